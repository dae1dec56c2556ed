#include "ttymodes.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* DEC private modes a full-screen program turns on (CSI ? N h) and leaves on when it is
 * killed. The cursor is the odd one: ?25l hides it, so "on" means hidden. */
static const struct {
        unsigned mode;
        bool on_with_l;
} tracked[] = {
    {2004, false}, /* bracketed paste */
    {1000, false}, /* mouse: clicks */
    {1002, false}, /* mouse: drags */
    {1003, false}, /* mouse: all motion */
    {1004, false}, /* focus in/out reports */
    {1005, false}, /* mouse: UTF-8 coordinates */
    {1006, false}, /* mouse: SGR coordinates */
    {1015, false}, /* mouse: urxvt coordinates */
    {25, true},    /* cursor hidden */
    {1, false},    /* application cursor keys */
    {1049, false}, /* alternate screen, cursor saved */
    {1047, false}, /* alternate screen */
    {47, false},   /* alternate screen (old) */
};
#define N_TRACKED (sizeof(tracked) / sizeof(tracked[0]))

enum { GROUND, ESCAPE, CSI, STRING, STRING_ESCAPE };

void ttymodes_init(struct ttymodes *m)
{
        memset(m, 0, sizeof(*m));
}

static void dec_mode(struct ttymodes *m, unsigned mode, bool set)
{
        if (mode == 6)
                m->origin = set;
        for (size_t i = 0; i < N_TRACKED; i++)
                if (tracked[i].mode == mode) {
                        if (set != tracked[i].on_with_l)
                                m->on |= 1u << i;
                        else
                                m->on &= ~(1u << i);
                }
}

static void csi_final(struct ttymodes *m, unsigned char final)
{
        unsigned n = m->n_params;

        if (m->intermediates)
                return;
        if (m->marker == '?' && (final == 'h' || final == 'l')) {
                for (unsigned i = 0; i < n; i++)
                        dec_mode(m, m->params[i], final == 'h');
        } else if (m->marker == '>' && final == 'u') {
                if (m->kitty_pushes < TTYMODES_KITTY_MAX)
                        m->kitty_flags[m->kitty_pushes++] =
                            (uint8_t)(n && m->params[0] < 256 ? m->params[0] : 0);
        } else if (m->marker == '<' && final == 'u') {
                unsigned pops = n && m->params[0] ? m->params[0] : 1;

                m->kitty_pushes = pops >= m->kitty_pushes ? 0 : m->kitty_pushes - pops;
        }
}

static void csi_byte(struct ttymodes *m, unsigned char c)
{
        if (c >= '0' && c <= '9') {
                unsigned *p;

                if (m->n_params == 0)
                        m->n_params = 1;
                p = &m->params[m->n_params - 1];
                if (*p < 100000)
                        *p = *p * 10 + (c - '0');
        } else if (c == ';' || c == ':') {
                if (m->n_params == 0)
                        m->n_params = 1;
                if (m->n_params < TTYMODES_PARAMS)
                        m->params[m->n_params++] = 0;
        } else if (c >= '<' && c <= '?') {
                m->marker = (char)c;
        } else if (c >= 0x20 && c <= 0x2f) {
                m->intermediates++;
        } else if (c >= 0x40 && c <= 0x7e) {
                csi_final(m, c);
                m->state = GROUND;
        }
}

void ttymodes_feed(struct ttymodes *m, const void *buf, size_t len)
{
        const unsigned char *p = buf;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[i];

                /* Text between sequences (nearly all output): only an ESC starts one, and
                 * CAN/SUB change nothing in the ground state. */
                if (m->state == GROUND && c != 0x1b) {
                        const unsigned char *esc = memchr(p + i, 0x1b, len - i);

                        if (!esc)
                                return;
                        i = (size_t)(esc - p);
                        c = 0x1b;
                }
                if (c == 0x18 || c == 0x1a) { /* CAN, SUB: abort any sequence */
                        m->state = GROUND;
                        continue;
                }
                switch (m->state) {
                case GROUND:
                        if (c == 0x1b)
                                m->state = ESCAPE;
                        break;
                case ESCAPE:
                        if (c == '[') {
                                m->state = CSI;
                                m->marker = 0;
                                m->n_params = 0;
                                m->intermediates = 0;
                                memset(m->params, 0, sizeof(m->params));
                        } else if (c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X') {
                                m->state = STRING; /* OSC, DCS, APC, PM, SOS */
                        } else if (c != 0x1b) {
                                if (c == '=' || c == '>') /* DECKPAM, DECKPNM */
                                        m->keypad = c == '=';
                                m->state = GROUND;
                        }
                        break;
                case CSI:
                        if (c == 0x1b)
                                m->state = ESCAPE;
                        else
                                csi_byte(m, c);
                        break;
                case STRING:
                        if (c == 0x07)
                                m->state = GROUND;
                        else if (c == 0x1b)
                                m->state = STRING_ESCAPE;
                        break;
                case STRING_ESCAPE:
                        /* ESC \ ends the string; anything else ends it and starts anew. */
                        m->state = c == '\\' ? GROUND : STRING;
                        if (c == '[' || c == ']') {
                                m->state = ESCAPE;
                                ttymodes_feed(m, &c, 1);
                        }
                        break;
                }
        }
}

size_t ttymodes_reset(const struct ttymodes *m, char *out)
{
        bool alt_done = false;
        size_t o = 0;

        out[0] = '\0';
        if (m->kitty_pushes)
                o +=
                    (size_t)snprintf(out + o, TTYMODES_RESET_MAX - o, "\033[<%uu", m->kitty_pushes);
        if (m->keypad)
                o += (size_t)snprintf(out + o, TTYMODES_RESET_MAX - o, "\033>");
        for (size_t i = 0; i < N_TRACKED; i++) {
                bool alt =
                    tracked[i].mode == 1049 || tracked[i].mode == 1047 || tracked[i].mode == 47;

                if (!(m->on & (1u << i)) || (alt && alt_done))
                        continue;
                /* One way back to the primary screen; 1049 first, as it also restores the
                 * cursor it saved. */
                alt_done = alt_done || alt;
                o += (size_t)snprintf(out + o, TTYMODES_RESET_MAX - o, "\033[?%u%c",
                                      tracked[i].mode, tracked[i].on_with_l ? 'h' : 'l');
        }
        return o;
}

size_t ttymodes_set(const struct ttymodes *m, char *out)
{
        size_t o = 0;

        out[0] = '\0';
        /* The alternate screen first: the other modes then apply to it. */
        for (int alt = 1; alt >= 0; alt--)
                for (size_t i = 0; i < N_TRACKED; i++) {
                        bool is_alt = tracked[i].mode == 1049 || tracked[i].mode == 1047 ||
                                      tracked[i].mode == 47;

                        if (!(m->on & (1u << i)) || is_alt != (alt == 1))
                                continue;
                        o += (size_t)snprintf(out + o, TTYMODES_SET_MAX - o, "\033[?%u%c",
                                              tracked[i].mode, tracked[i].on_with_l ? 'l' : 'h');
                        if (is_alt)
                                break;
                }
        if (m->keypad)
                o += (size_t)snprintf(out + o, TTYMODES_SET_MAX - o, "\033=");
        for (unsigned k = 0; k < m->kitty_pushes; k++)
                o += (size_t)snprintf(out + o, TTYMODES_SET_MAX - o, "\033[>%uu",
                                      (unsigned)m->kitty_flags[k]);
        return o;
}

size_t ttymodes_restore(const struct ttymodes *m, char *out)
{
        size_t o = ttymodes_reset(m, out);

        /* What the parser did not see switched on is switched off too: a terminal may
         * understand a sequence this parser does not (8-bit C1 controls, for one), and each
         * of these is a no-op where the mode is off. Not the alternate screen: 1049l off it
         * restores a stale cursor. */
        for (size_t i = 0; i < N_TRACKED; i++) {
                bool alt =
                    tracked[i].mode == 1049 || tracked[i].mode == 1047 || tracked[i].mode == 47;

                if (!alt && !(m->on & (1u << i)))
                        o += (size_t)snprintf(out + o, TTYMODES_RESTORE_MAX - o, "\033[?%u%c",
                                              tracked[i].mode, tracked[i].on_with_l ? 'h' : 'l');
        }
        /* After the alternate screen is left: leaving 1049 restores the attributes and
         * charsets saved on entering it, which the session may have set first. Numeric
         * keypad; no left/right margins; SGR reset; G0 and G1 ASCII and G0 shifted in (SI);
         * insert mode off; autowrap on. None of these moves the cursor. */
        if (!m->keypad)
                o += (size_t)snprintf(out + o, TTYMODES_RESTORE_MAX - o, "\033>");
        o += (size_t)snprintf(out + o, TTYMODES_RESTORE_MAX - o,
                              "\033[?69l\033[m\033(B\033)B\017\033[4l\033[?7h");
        /* Full scroll margins. DECSTBM homes the cursor, so it is saved around it (DECSC
         * saves the attributes and charsets just reset). Leaving origin mode homes it too
         * and DECRC would turn origin mode back on: then a new line at the bottom instead,
         * which scrolls the screen up one line rather than write over its top. */
        if (m->origin)
                o += (size_t)snprintf(out + o, TTYMODES_RESTORE_MAX - o,
                                      "\033[?6l\033[r\033[9999;1H\n");
        else
                o += (size_t)snprintf(out + o, TTYMODES_RESTORE_MAX - o, "\0337\033[r\0338");
        o += (size_t)snprintf(out + o, TTYMODES_RESTORE_MAX - o, "%s", TTYMODES_TITLE_POP);
        return o;
}
