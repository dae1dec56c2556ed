/* Which terminal modes a session's output switched on, so they can be switched off again
 * when the session ends however it ends (kill -9 included), and the rest of the terminal's
 * state put back to its defaults whether the parser saw it change or not. Pure: bytes in,
 * state out. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TTYMODES_PARAMS      16
#define TTYMODES_KITTY_MAX   64  /* deeper kitty keyboard stacks are popped as this many */
#define TTYMODES_RESET_MAX   160 /* room for every reset sequence at once */
#define TTYMODES_SET_MAX     (TTYMODES_RESET_MAX + 8 * TTYMODES_KITTY_MAX)
#define TTYMODES_RESTORE_MAX 384 /* room for ttymodes_restore() */
/* xterm's title stack: push the caller's window and icon title before the session, pop it
 * (the last of ttymodes_restore()) after; terminals without a stack ignore both. */
#define TTYMODES_TITLE_PUSH "\033[22;0t"
#define TTYMODES_TITLE_POP  "\033[23;0t"

struct ttymodes {
        uint32_t on;                             /* bit per tracked mode (ttymodes.c) */
        bool keypad;                             /* application keypad (ESC =) */
        bool origin;                             /* origin mode (CSI ? 6 h) */
        unsigned kitty_pushes;                   /* CSI > flags u minus CSI < n u, capped */
        uint8_t kitty_flags[TTYMODES_KITTY_MAX]; /* what each push pushed */
        /* the escape sequence parser */
        uint8_t state;
        char marker; /* the private marker after CSI: ? > < = or 0 */
        uint8_t n_params;
        uint8_t intermediates;
        unsigned params[TTYMODES_PARAMS];
};

void ttymodes_init(struct ttymodes *m);
void ttymodes_feed(struct ttymodes *m, const void *buf, size_t len);
/* The sequences that switch every mode seen on back off, in an order that leaves the
 * primary screen last; returns their length (0: nothing to reset). out holds
 * TTYMODES_RESET_MAX bytes. */
size_t ttymodes_reset(const struct ttymodes *m, char *out);
/* The sequences that switch them all on again (after a suspend): the alternate screen
 * first, the kitty keyboard pushes last. out holds TTYMODES_SET_MAX bytes. */
size_t ttymodes_set(const struct ttymodes *m, char *out);
/* The terminal back as a shell expects it once the session has ended (or stopped), without
 * clearing it: ttymodes_reset(), then unconditionally every mode reset, SGR reset, ASCII
 * charsets, full margins, autowrap on, insert and origin mode off, the cursor shown, and the
 * title popped. The cursor stays where it was, except when the session left origin mode on
 * (turning it off homes the cursor): then it goes to a new line at the bottom, so nothing on
 * the screen is overwritten. out holds TTYMODES_RESTORE_MAX bytes; returns the length. */
size_t ttymodes_restore(const struct ttymodes *m, char *out);
