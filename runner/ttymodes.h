/* What a session's output changed in the terminal's state, so exactly that (and nothing
 * else) is put back when the session ends however it ends (kill -9 included). Pure: bytes
 * in, state and the bytes to pass on out; its memory is bounded whatever the output. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TTYMODES_PARAMS      16
#define TTYMODES_KITTY_MAX   64  /* deeper kitty keyboard stacks are popped as this many */
#define TTYMODES_RESET_MAX   192 /* room for every mode reset at once */
#define TTYMODES_SET_MAX     (TTYMODES_RESET_MAX + 8 * TTYMODES_KITTY_MAX)
#define TTYMODES_RESTORE_MAX 384 /* room for ttymodes_restore() */
#define TTYMODES_HELD_MAX    8   /* ESC ] and up to 6 digits: maybe a title change */
/* ttymodes_filter's output is at most this much longer than its input. */
#define TTYMODES_FILTER_EXTRA (TTYMODES_HELD_MAX + 8)
/* xterm's title stack: the caller's window and icon title pushed just before the session's
 * first title change, popped (the last of ttymodes_restore()) after; terminals without a
 * stack ignore both. */
#define TTYMODES_TITLE_PUSH "\033[22;0t"
#define TTYMODES_TITLE_POP  "\033[23;0t"

/* What DECSC saves and DECRC (and leaving the 1049 alternate screen) puts back. Zero is the
 * terminal's default. */
struct ttymodes_cursor {
        bool sgr;      /* attributes or colours other than the defaults */
        char g0, g1;   /* the charset designated (its final byte), 0 for ASCII */
        uint8_t shift; /* the set locked into GL: 0 G0 (SI), 1 G1 (SO), 2 G2, 3 G3 */
        bool origin;   /* origin mode (CSI ? 6 h) */
};

struct ttymodes {
        uint32_t on;  /* bit per tracked DEC private mode (ttymodes.c) */
        bool keypad;  /* application keypad (ESC =) */
        bool insert;  /* insert mode (CSI 4 h) */
        bool margins; /* a scroll region (CSI t;b r) */
        bool title;   /* the caller's title was pushed before the session's first change */
        bool in_alt;  /* on the alternate screen (DECSC has a slot per screen) */
        struct ttymodes_cursor cur, saved[2];
        unsigned kitty_pushes;                   /* CSI > flags u minus CSI < n u, capped */
        uint8_t kitty_flags[TTYMODES_KITTY_MAX]; /* what each push pushed */
        /* the escape sequence parser */
        uint8_t state;
        char marker; /* the private marker after CSI: ? > < = or 0 */
        char inter;  /* the first intermediate byte, 0 for none */
        uint8_t n_params;
        uint8_t intermediates;
        uint16_t sub; /* bit n: params[n] is a sub-parameter (after ':') */
        unsigned params[TTYMODES_PARAMS];
        unsigned osc, osc_digits; /* an OSC's number, while it is read */
        /* The output since an ESC that may start a title change, not passed on yet. */
        uint8_t n_held;
        char held[TTYMODES_HELD_MAX];
};

void ttymodes_init(struct ttymodes *m);
/* Track what buf changes, without passing anything on (the output is not a terminal). */
void ttymodes_feed(struct ttymodes *m, const void *buf, size_t len);
/* Track what buf changes and copy it to out, with TTYMODES_TITLE_PUSH just before the
 * session's first title change. An ESC at the end of buf, or an OSC whose number has not
 * arrived yet, is held back for the next call (or ttymodes_flush), so the push can still go
 * in front of it. out holds len + TTYMODES_FILTER_EXTRA bytes; returns the bytes written. */
size_t ttymodes_filter(struct ttymodes *m, const void *buf, size_t len, char *out);
/* The bytes held back, once no more output will come; out holds TTYMODES_HELD_MAX. */
size_t ttymodes_flush(struct ttymodes *m, char *out);
/* The sequences that switch every DEC mode, the keypad and the kitty keyboard flags the
 * session left on back off, the primary screen last; returns their length (0: nothing to
 * reset). out holds TTYMODES_RESET_MAX bytes. */
size_t ttymodes_reset(const struct ttymodes *m, char *out);
/* The sequences that switch them all on again (after a suspend): the alternate screen
 * first, the kitty keyboard pushes last. out holds TTYMODES_SET_MAX bytes. */
size_t ttymodes_set(const struct ttymodes *m, char *out);
/* The terminal back as it was before the session, without clearing it: ttymodes_reset(),
 * then for each of SGR attributes, G0/G1 charsets and the shift, insert mode, scroll region,
 * origin mode and the title, the one sequence that undoes it, only when the session changed
 * it. A session that changed nothing gets nothing (0). When the session's output ended
 * inside a sequence, a CAN first, so the restore is not read as part of it. The cursor stays
 * where it was, except when the session left origin mode on (turning it off homes the
 * cursor): then it goes to a new line at the bottom, so nothing on the screen is
 * overwritten. out holds TTYMODES_RESTORE_MAX bytes; returns the length. */
size_t ttymodes_restore(const struct ttymodes *m, char *out);
