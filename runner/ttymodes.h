/* Which terminal modes a session's output switched on, so they can be switched off again
 * when the session ends however it ends (kill -9 included). Pure: bytes in, state out. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define TTYMODES_PARAMS    16
#define TTYMODES_KITTY_MAX 64  /* deeper kitty keyboard stacks are popped as this many */
#define TTYMODES_RESET_MAX 160 /* room for every reset sequence at once */
#define TTYMODES_SET_MAX   (TTYMODES_RESET_MAX + 8 * TTYMODES_KITTY_MAX)

struct ttymodes {
        uint32_t on;                             /* bit per tracked mode (ttymodes.c) */
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
