#include "ttymodes.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* DEC private modes a program turns on (CSI ? N h) and leaves on when it is killed. Some
 * are on by default and switched off with l: "on" then means off. */
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
    {7, true},     /* autowrap off */
    {5, false},    /* reverse video */
    {69, false},   /* left and right margins */
    {1049, false}, /* alternate screen, cursor saved */
    {1047, false}, /* alternate screen */
    {47, false},   /* alternate screen (old) */
};
#define N_TRACKED (sizeof(tracked) / sizeof(tracked[0]))

enum { GROUND, ESCAPE, ESC_INTER, CSI, OSC_NUM, STRING, STRING_ESCAPE };
/* What a byte did, for ttymodes_filter. */
enum { EV_NONE, EV_ESC, EV_TITLE };

static bool is_alt(unsigned mode)
{
        return mode == 1049 || mode == 1047 || mode == 47;
}

static bool mode_on(const struct ttymodes *m, unsigned mode)
{
        for (size_t i = 0; i < N_TRACKED; i++)
                if (tracked[i].mode == mode)
                        return m->on & (1u << i);
        return false;
}

void ttymodes_init(struct ttymodes *m)
{
        memset(m, 0, sizeof(*m));
}

/* RIS: the terminal at its defaults, as if the session had changed nothing. The title
 * stack is not touched by it. */
static void full_reset(struct ttymodes *m)
{
        m->on = 0;
        m->keypad = m->insert = m->margins = m->in_alt = false;
        memset(&m->cur, 0, sizeof(m->cur));
        memset(m->saved, 0, sizeof(m->saved));
        m->kitty_pushes = 0;
}

static void dec_mode(struct ttymodes *m, unsigned mode, bool set)
{
        if (mode == 6)
                m->cur.origin = set;
        else if (mode == 1048) /* DECSC / DECRC by mode */
                set ? (void)(m->saved[m->in_alt] = m->cur) : (void)(m->cur = m->saved[m->in_alt]);
        else if (mode == 1049 && set)
                m->saved[m->in_alt] = m->cur;
        for (size_t i = 0; i < N_TRACKED; i++)
                if (tracked[i].mode == mode) {
                        if (set != tracked[i].on_with_l)
                                m->on |= 1u << i;
                        else
                                m->on &= ~(1u << i);
                }
        if (is_alt(mode))
                m->in_alt = mode_on(m, 1049) || mode_on(m, 1047) || mode_on(m, 47);
        /* Leaving 1049 puts back the cursor, attributes and charsets saved on entering. */
        if (mode == 1049 && !set)
                m->cur = m->saved[0];
}

static void sgr(struct ttymodes *m)
{
        unsigned n = m->n_params ? m->n_params : 1;

        for (unsigned i = 0; i < n; i++) {
                unsigned p = m->params[i];

                if (m->sub & (1u << i))
                        continue;
                m->cur.sgr = p != 0;
                /* 38;5;N and 38;2;R;G;B (and 48, 58): a 0 in there is a colour. */
                if ((p == 38 || p == 48 || p == 58) && i + 1 < n && !(m->sub & (1u << (i + 1))))
                        i += m->params[i + 1] == 5 ? 2 : m->params[i + 1] == 2 ? 4 : 0;
        }
}

static void csi_final(struct ttymodes *m, unsigned char final)
{
        unsigned n = m->n_params;

        if (m->intermediates) {
                if (m->inter == '!' && final == 'p' && !m->marker) { /* DECSTR, soft reset */
                        for (size_t i = 0; i < N_TRACKED; i++)
                                if (tracked[i].mode == 25 || tracked[i].mode == 1)
                                        m->on &= ~(1u << i);
                        m->keypad = m->insert = m->margins = false;
                        memset(&m->cur, 0, sizeof(m->cur));
                        memset(&m->saved[m->in_alt], 0, sizeof(m->saved[0]));
                }
                return;
        }
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
        } else if (!m->marker) {
                if (final == 'm') {
                        sgr(m);
                } else if (final == 'h' || final == 'l') {
                        for (unsigned i = 0; i < n; i++)
                                if (m->params[i] == 4)
                                        m->insert = final == 'h';
                } else if (final == 'r') {
                        /* Top 1 (or none) and bottom none: the whole screen. */
                        m->margins = (n >= 1 && m->params[0] > 1) || (n >= 2 && m->params[1]);
                } else if (final == 's' && !mode_on(m, 69)) { /* SCOSC, as DECSC */
                        m->saved[m->in_alt] = m->cur;
                } else if (final == 'u') { /* SCORC */
                        m->cur = m->saved[m->in_alt];
                }
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
                if (m->n_params < TTYMODES_PARAMS) {
                        if (c == ':')
                                m->sub |= (uint16_t)(1u << m->n_params);
                        m->params[m->n_params++] = 0;
                }
        } else if (c >= '<' && c <= '?') {
                m->marker = (char)c;
        } else if (c >= 0x20 && c <= 0x2f) {
                if (!m->intermediates++)
                        m->inter = (char)c;
        } else if (c >= 0x40 && c <= 0x7e) {
                csi_final(m, c);
                m->state = GROUND;
        }
}

static void esc_final(struct ttymodes *m, unsigned char c)
{
        switch (c) {
        case '=': /* DECKPAM, DECKPNM */
        case '>':
                m->keypad = c == '=';
                break;
        case '7': /* DECSC, DECRC */
                m->saved[m->in_alt] = m->cur;
                break;
        case '8':
                m->cur = m->saved[m->in_alt];
                break;
        case 'c': /* RIS */
                full_reset(m);
                break;
        case 'n': /* LS2, LS3 */
        case 'o':
                m->cur.shift = c == 'n' ? 2 : 3;
                break;
        }
        m->state = GROUND;
}

/* ESC ( F and ESC ) F (or ESC - F, a 96-character set): a charset into G0 or G1. */
static void designate(struct ttymodes *m, unsigned char final)
{
        char set = final == 'B' && m->intermediates == 1 && m->inter != '-' ? 0 : (char) final;

        if (m->inter == '(')
                m->cur.g0 = set;
        else if (m->inter == ')' || m->inter == '-')
                m->cur.g1 = set;
}

static int step(struct ttymodes *m, unsigned char c)
{
        if (c == 0x18 || c == 0x1a) { /* CAN, SUB: abort any sequence */
                m->state = GROUND;
                return EV_NONE;
        }
        if (c == 0x1b) {
                m->state = m->state == OSC_NUM || m->state == STRING ? STRING_ESCAPE : ESCAPE;
                return EV_ESC;
        }
        /* SO and SI act wherever they come, except inside a string. */
        if ((c == 0x0e || c == 0x0f) && m->state != OSC_NUM && m->state != STRING &&
            m->state != STRING_ESCAPE) {
                m->cur.shift = c == 0x0e;
                return EV_NONE;
        }
        switch (m->state) {
        case GROUND:
                break;
        case STRING_ESCAPE:
                /* ESC \ ends the string; anything else ends it and is read as after ESC. */
                if (c == '\\') {
                        m->state = GROUND;
                        break;
                }
                m->state = ESCAPE;
                /* fall through */
        case ESCAPE:
                if (c == '[') {
                        m->state = CSI;
                        m->marker = 0;
                        m->inter = 0;
                        m->n_params = 0;
                        m->intermediates = 0;
                        m->sub = 0;
                        memset(m->params, 0, sizeof(m->params));
                } else if (c == ']') {
                        m->state = OSC_NUM;
                        m->osc = m->osc_digits = 0;
                } else if (c == 'P' || c == '_' || c == '^' || c == 'X') {
                        m->state = STRING; /* DCS, APC, PM, SOS */
                } else if (c >= 0x20 && c <= 0x2f) {
                        m->state = ESC_INTER;
                        m->inter = (char)c;
                        m->intermediates = 1;
                } else if (c >= 0x30 && c <= 0x7e) {
                        esc_final(m, c);
                }
                break;
        case ESC_INTER:
                if (c >= 0x20 && c <= 0x2f) {
                        if (m->intermediates < 255)
                                m->intermediates++;
                } else if (c >= 0x30 && c <= 0x7e) {
                        designate(m, c);
                        m->state = GROUND;
                }
                break;
        case CSI:
                csi_byte(m, c);
                break;
        case OSC_NUM:
                /* OSC 0, 1 and 2 set the window and icon titles; leading zeros count as
                 * nothing, so past six digits it is taken for one (the push is harmless). */
                if (c >= '0' && c <= '9') {
                        m->osc = m->osc * 10 + (c - '0');
                        m->osc_digits++;
                        if (m->osc > 2) {
                                m->state = STRING;
                        } else if (m->osc_digits == 6) {
                                m->state = STRING;
                                return EV_TITLE;
                        }
                } else if (c == 0x07) {
                        m->state = GROUND;
                } else {
                        m->state = STRING;
                        if (c == ';' && m->osc_digits)
                                return EV_TITLE;
                }
                break;
        case STRING:
                if (c == 0x07)
                        m->state = GROUND;
                break;
        }
        return EV_NONE;
}

static bool special(unsigned char c)
{
        return c == 0x1b || c == 0x0e || c == 0x0f;
}

/* How many bytes from p on change nothing (nearly all output): plain text in the ground
 * state, up to the next ESC, SO or SI. Eight bytes at a time: with bit 0 set in each byte,
 * SO and SI both read 0x0f, ESC 0x1b (and SUB too: that word is then looked at bytewise). */
static size_t plain_span(const unsigned char *p, size_t len)
{
        const uint64_t ones = ~(uint64_t)0 / 255, highs = ones * 0x80;
        size_t i = 0;

        while (i < len) {
                size_t end = len - i < 8 ? len : i + 8;

                if (end == i + 8) {
                        uint64_t w, x, y;

                        memcpy(&w, p + i, 8);
                        w |= ones;
                        x = w ^ (ones * 0x0f);
                        y = w ^ (ones * 0x1b);
                        if (!(((x - ones) & ~x) & highs) && !(((y - ones) & ~y) & highs)) {
                                i = end;
                                continue;
                        }
                }
                for (; i < end; i++)
                        if (special(p[i]))
                                return i;
        }
        return len;
}

void ttymodes_feed(struct ttymodes *m, const void *buf, size_t len)
{
        const unsigned char *p = buf;

        for (size_t i = 0; i < len; i++) {
                if (m->state == GROUND) {
                        i += plain_span(p + i, len - i);
                        if (i == len)
                                break;
                }
                step(m, p[i]);
        }
}

/* The parser is inside what may still become a title change: bytes from its ESC on wait. */
static bool maybe_title(const struct ttymodes *m)
{
        return m->state == ESCAPE || m->state == STRING_ESCAPE || m->state == OSC_NUM;
}

size_t ttymodes_filter(struct ttymodes *m, const void *buf, size_t len, char *out)
{
        const size_t none = (size_t)-1, push = strlen(TTYMODES_TITLE_PUSH);
        const unsigned char *p = buf;
        size_t o = m->n_held, pending = m->n_held ? 0 : none;

        memcpy(out, m->held, m->n_held);
        m->n_held = 0;
        for (size_t i = 0; i < len; i++) {
                int ev;

                if (m->state == GROUND) {
                        size_t k = plain_span(p + i, len - i);

                        memcpy(out + o, p + i, k);
                        o += k;
                        i += k;
                        if (i == len)
                                break;
                }
                out[o++] = (char)p[i];
                ev = step(m, p[i]);
                if (ev == EV_ESC) {
                        pending = o - 1;
                } else if (ev == EV_TITLE && pending != none && !m->title) {
                        memmove(out + pending + push, out + pending, o - pending);
                        memcpy(out + pending, TTYMODES_TITLE_PUSH, push);
                        o += push;
                        m->title = true;
                }
                if (!maybe_title(m))
                        pending = none;
        }
        if (pending != none && o - pending <= TTYMODES_HELD_MAX) {
                m->n_held = (uint8_t)(o - pending);
                memcpy(m->held, out + pending, m->n_held);
                o = pending;
        }
        return o;
}

size_t ttymodes_flush(struct ttymodes *m, char *out)
{
        size_t n = m->n_held;

        memcpy(out, m->held, n);
        m->n_held = 0;
        return n;
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
                bool alt = is_alt(tracked[i].mode);

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
                        bool alt_mode = is_alt(tracked[i].mode);

                        if (!(m->on & (1u << i)) || alt_mode != (alt == 1))
                                continue;
                        o += (size_t)snprintf(out + o, TTYMODES_SET_MAX - o, "\033[?%u%c",
                                              tracked[i].mode, tracked[i].on_with_l ? 'l' : 'h');
                        if (alt_mode)
                                break;
                }
        if (m->keypad)
                o += (size_t)snprintf(out + o, TTYMODES_SET_MAX - o, "\033=");
        for (unsigned k = 0; k < m->kitty_pushes; k++)
                o += (size_t)snprintf(out + o, TTYMODES_SET_MAX - o, "\033[>%uu",
                                      (unsigned)m->kitty_flags[k]);
        return o;
}

static size_t append(char *out, size_t o, const char *seq)
{
        size_t n = strlen(seq);

        memcpy(out + o, seq, n);
        return o + n;
}

size_t ttymodes_restore(const struct ttymodes *m, char *out)
{
        /* Leaving 1049 puts back the state saved on entering it, which the session may
         * have changed first; what it changed on the alternate screen is undone too, for a
         * terminal that does not restore it. */
        const struct ttymodes_cursor *c = &m->cur, *s = mode_on(m, 1049) ? &m->saved[0] : c;
        size_t o = 1 + ttymodes_reset(m, out + 1);

        if (c->sgr || s->sgr)
                o = append(out, o, "\033[m");
        if (c->g0 || s->g0)
                o = append(out, o, "\033(B");
        if (c->g1 || s->g1)
                o = append(out, o, "\033)B");
        if (c->shift || s->shift)
                o = append(out, o, "\017");
        if (m->insert)
                o = append(out, o, "\033[4l");
        /* DECSTBM homes the cursor, so it is saved around it. Leaving origin mode homes it
         * too and DECRC would turn origin mode back on: then a new line at the bottom
         * instead, which scrolls the screen up one line rather than write over its top. */
        if (c->origin || s->origin) {
                o = append(out, o, "\033[?6l");
                if (m->margins)
                        o = append(out, o, "\033[r");
                o = append(out, o, "\033[9999;1H\n");
        } else if (m->margins) {
                o = append(out, o, "\0337\033[r\0338");
        }
        if (m->title)
                o = append(out, o, TTYMODES_TITLE_POP);
        if (o == 1)
                return 0;
        /* Output that ended inside a sequence would swallow the restore: CAN ends it. */
        if (m->state != GROUND) {
                out[0] = 0x18;
                return o;
        }
        memmove(out, out + 1, o - 1);
        return o - 1;
}
