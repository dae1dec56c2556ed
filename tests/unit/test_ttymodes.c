/* Unit tests for the terminal modes a session leaves on: what is reset, what is not,
 * sequences split anywhere across reads, and the full restore after a session. */
#include "runner/ttymodes.h"

#include <string.h>
#include "check.h"

static size_t reset_of(const char *out, char *reset)
{
        struct ttymodes m;

        ttymodes_init(&m);
        ttymodes_feed(&m, out, strlen(out));
        return ttymodes_reset(&m, reset);
}

static void test_nothing_switched_on_resets_nothing(void)
{
        char reset[TTYMODES_RESET_MAX];

        CHECK(reset_of("plain text\r\n\033[1;31mred\033[0m\033[2J\033[H", reset) == 0);
        PASS();
}

static void test_every_mode_left_on_is_switched_off_primary_screen_last(void)
{
        char reset[TTYMODES_RESET_MAX];
        size_t n = reset_of("\033[?1049h\033[?25l\033[?2004h\033[?1000;1002;1006h\033[>1u"
                            "\033[>5u\033[?1004h",
                            reset);

        CHECK(n == strlen(reset));
        CHECK(strcmp(reset, "\033[<2u\033[?2004l\033[?1000l\033[?1002l\033[?1004l\033[?1006l"
                            "\033[?25h\033[?1049l") == 0);
        PASS();
}

static void test_modes_switched_back_off_are_not_reset(void)
{
        char reset[TTYMODES_RESET_MAX];

        CHECK(reset_of("\033[?1049h\033[?25l\033[>1u\033[?2004h\033[?2004l\033[?25h\033[<u"
                       "\033[?1049l",
                       reset) == 0);
        CHECK(reset_of("\033[>1u\033[>1u\033[>1u\033[<2u", reset) > 0);
        CHECK(strcmp(reset, "\033[<1u") == 0);
        CHECK(reset_of("\033[>1u\033[<9u", reset) == 0);
        PASS();
}

static void test_sequences_split_across_reads_are_seen(void)
{
        const char *out = "x\033[?1000;1049hy\033[?25lz";
        char reset[TTYMODES_RESET_MAX];
        struct ttymodes m;

        ttymodes_init(&m);
        for (size_t i = 0; out[i]; i++)
                ttymodes_feed(&m, out + i, 1);
        ttymodes_reset(&m, reset);
        CHECK(strcmp(reset, "\033[?1000l\033[?25h\033[?1049l") == 0);
        PASS();
}

static void test_strings_and_other_sequences_do_not_count(void)
{
        char reset[TTYMODES_RESET_MAX];

        /* Inside OSC / DCS strings, with an intermediate byte, or aborted by CAN. */
        CHECK(reset_of("\033]0;[?1049h title\007\033P[?25l\033\\\033[?1049$p\033[?10\03049h",
                       reset) == 0);
        /* A string ended by ESC \ gives the parser back. */
        CHECK(reset_of("\033]52;c;eA==\033\\\033[?2004h", reset) > 0);
        CHECK(strcmp(reset, "\033[?2004l") == 0);
        PASS();
}

static void test_one_way_back_from_the_alternate_screen(void)
{
        char reset[TTYMODES_RESET_MAX];

        CHECK(reset_of("\033[?47h\033[?1047h", reset) > 0);
        CHECK(strcmp(reset, "\033[?1047l") == 0);
        CHECK(reset_of("\033[?47h", reset) > 0);
        CHECK(strcmp(reset, "\033[?47l") == 0);
        PASS();
}

static void test_kitty_stack_depth_is_bounded(void)
{
        char reset[TTYMODES_RESET_MAX];
        struct ttymodes m;

        ttymodes_init(&m);
        for (int i = 0; i < 10000; i++)
                ttymodes_feed(&m, "\033[>1u", 5);
        CHECK(ttymodes_reset(&m, reset) > 0);
        CHECK(strcmp(reset, "\033[<64u") == 0);
        PASS();
}

static void test_set_after_a_suspend_puts_every_mode_back(void)
{
        const char *out = "\033[?1049h\033[?25l\033[?2004h\033[>1u\033[>13u\033[?1006h";
        char set[TTYMODES_SET_MAX];
        struct ttymodes m;

        ttymodes_init(&m);
        ttymodes_feed(&m, out, strlen(out));
        CHECK(ttymodes_set(&m, set) == strlen(set));
        CHECK(strcmp(set, "\033[?1049h\033[?2004h\033[?1006h\033[?25l\033[>1u\033[>13u") == 0);
        ttymodes_init(&m);
        CHECK(ttymodes_set(&m, set) == 0);
        PASS();
}

static void test_keypad_application_mode_is_reset_and_set_again(void)
{
        char reset[TTYMODES_RESET_MAX], set[TTYMODES_SET_MAX];
        struct ttymodes m;

        CHECK(reset_of("\033=\033[?1h", reset) > 0);
        CHECK(strcmp(reset, "\033>\033[?1l") == 0);
        ttymodes_init(&m);
        ttymodes_feed(&m, "\033=\033[?1h", 7);
        ttymodes_set(&m, set);
        CHECK(strcmp(set, "\033[?1h\033=") == 0);
        CHECK(reset_of("\033=\033>\033[?1h\033[?1l", reset) == 0);
        PASS();
}

static size_t restore_of(const char *out, char *restore)
{
        struct ttymodes m;
        size_t n;

        ttymodes_init(&m);
        ttymodes_feed(&m, out, strlen(out));
        n = ttymodes_restore(&m, restore);
        restore[n] = '\0';
        return n;
}

static void test_restore_is_nothing_after_a_session_that_changed_nothing(void)
{
        char restore[TTYMODES_RESTORE_MAX + 1];

        CHECK(restore_of("", restore) == 0);
        CHECK(restore_of("plain\r\ntext\tand \033[2J\033[H\033[5;1H moves", restore) == 0);
        /* Changed and changed back, or reset by RIS. */
        CHECK(restore_of("\033[1;31mred\033[m \033[4mu\033[0m \033[1;0m \033(0q\033(B \016q\017"
                         "\033[4h\033[4l\033[5;9r\033[r\033[?6h\033[?6l\033=\033>",
                         restore) == 0);
        CHECK(restore_of("\033[?1000h\033[1m\033(0\016\033[3;4r\033[4h\033=\033c", restore) == 0);
        /* Strings, however they look inside, change nothing either. */
        CHECK(restore_of("\033]52;c;eA==\007\033P[1m\033\\\033]8;;http://x/\033\\", restore) == 0);
        PASS();
}

static void test_restore_undoes_exactly_what_was_changed(void)
{
        static const struct {
                const char *out, *restore;
        } cases[] = {
            {"\033[1m", "\033[m"},
            {"\033[38;5;0m", "\033[m"}, /* a colour, not a reset */
            {"\033[38;2;0;0;0m", "\033[m"},
            {"\033[0;4m", "\033[m"},
            {"\033[4:3m", "\033[m"}, /* curly underline: 3 is a sub-parameter */
            {"\033[38;5;1;0m", ""},  /* the last 0 is a reset */
            {"\033(0", "\033(B"},
            {"\033)0", "\033)B"},
            {"\016", "\017"},
            {"\033n", "\017"},
            {"\033[4h", "\033[4l"},
            {"\033[5;10r", "\0337\033[r\0338"},
            {"\033[?6h", "\033[?6l\033[9999;1H\n"},
            {"\033[?7l", "\033[?7h"},
            {"\033[?25l", "\033[?25h"},
            {"\033[?1;2004h", "\033[?2004l\033[?1l"},
            {"\033=", "\033>"},
            {"\033[?1000;1002;1003;1004;1005;1006;1015h",
             "\033[?1000l\033[?1002l\033[?1003l\033[?1004l\033[?1005l\033[?1006l\033[?1015l"},
            {"\033[1m\033[?1049h\033[4m", "\033[?1049l\033[m"},
        };
        char restore[TTYMODES_RESTORE_MAX + 1];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                restore_of(cases[i].out, restore);
                CHECK(strcmp(restore, cases[i].restore) == 0);
        }
        PASS();
}

static void test_shifts_and_escapes_are_seen_anywhere_in_plain_text(void)
{
        char text[40], restore[TTYMODES_RESTORE_MAX + 1];

        /* Text is skipped eight bytes at a time: SO, and ESC ( 0, at every offset, after a
         * SUB (which looks like ESC in that scan) or not. */
        for (size_t pos = 0; pos < 24; pos++) {
                memset(text, 'a', sizeof(text) - 1);
                text[sizeof(text) - 1] = '\0';
                text[pos] = 0x0e;
                CHECK(restore_of(text, restore) > 0 && strcmp(restore, "\017") == 0);
                memcpy(text + pos, "\033(0", 3);
                if (pos)
                        text[0] = 0x1a;
                CHECK(restore_of(text, restore) > 0 && strcmp(restore, "\033(B") == 0);
        }
        PASS();
}

static void test_saved_cursor_state_is_followed(void)
{
        char restore[TTYMODES_RESTORE_MAX + 1];

        /* Leaving 1049 puts back what entering it saved: clean, or bold. */
        CHECK(restore_of("\033[?1049h\033[1m\033(0\033[?1049l", restore) == 0);
        CHECK(restore_of("\033[1m\033[?1049h\033[m\033[?1049l", restore) > 0);
        CHECK(strcmp(restore, "\033[m") == 0);
        /* DECRC puts back what DECSC saved. */
        CHECK(restore_of("\033[1m\0337\033[m\0338", restore) > 0);
        CHECK(strcmp(restore, "\033[m") == 0);
        CHECK(restore_of("\0337\033[1m\016\0338", restore) == 0);
        PASS();
}

static void test_restore_after_output_cut_inside_a_sequence_starts_with_can(void)
{
        char restore[TTYMODES_RESTORE_MAX + 1];

        CHECK(restore_of("\033[?25l\033]0;unfinished", restore) > 0);
        CHECK(strcmp(restore, "\030\033[?25h") == 0);
        CHECK(restore_of("\033]0;unfinished", restore) == 0);
        PASS();
}

/* The output of ttymodes_filter for out fed in pieces of `step` bytes, then flushed. */
static size_t filter_of(struct ttymodes *m, const char *out, size_t step, char *res)
{
        size_t len = strlen(out), o = 0;

        ttymodes_init(m);
        for (size_t i = 0; i < len; i += step) {
                size_t n = len - i < step ? len - i : step;

                o += ttymodes_filter(m, out + i, n, res + o);
        }
        o += ttymodes_flush(m, res + o);
        res[o] = '\0';
        return o;
}

static void test_title_push_goes_just_before_the_first_title_change(void)
{
        const char *out = "a\033[1mb\033]52;c;eA==\007\033]2;one\007c\033]0;two\033\\d";
        const char *want = "a\033[1mb\033]52;c;eA==\007\033[22;0t\033]2;one\007c\033]0;two\033\\d";
        char res[256], restore[TTYMODES_RESTORE_MAX + 1];
        struct ttymodes m;

        for (size_t step = 1; step <= strlen(out); step++) {
                CHECK(filter_of(&m, out, step, res) == strlen(want));
                CHECK(strcmp(res, want) == 0);
                CHECK(m.title);
        }
        restore[ttymodes_restore(&m, restore)] = '\0';
        CHECK(strcmp(restore, "\033[m\033[23;0t") == 0);
        /* Any other OSC, or a title without its ';': no push, no pop. */
        filter_of(&m, "\033]52;c;x\007\033]10;?\007\033]2\007\033]7;file:///\033\\", 1, res);
        CHECK(!m.title && !strstr(res, "22;0t"));
        CHECK(ttymodes_restore(&m, restore) == 0);
        /* Fed without a filter (a pipe): tracked, never pushed, so never popped. */
        ttymodes_init(&m);
        ttymodes_feed(&m, "\033]0;t\007", 6);
        CHECK(!m.title && ttymodes_restore(&m, restore) == 0);
        PASS();
}

static void test_what_is_held_back_is_bounded(void)
{
        char res[64], big[4096];
        struct ttymodes m;
        size_t o = 0;

        /* Leading zeros: past six digits it is taken for a title. */
        CHECK(filter_of(&m, "\033]0000000;t\007", 1, res) > 0);
        CHECK(strcmp(res, "\033[22;0t\033]0000000;t\007") == 0);
        /* A long run of ESCs holds one byte at a time. */
        memset(big, 0x1b, sizeof(big));
        ttymodes_init(&m);
        for (size_t i = 0; i < sizeof(big); i++) {
                o += ttymodes_filter(&m, big + i, 1, res);
                CHECK(m.n_held <= TTYMODES_HELD_MAX);
        }
        CHECK(o == sizeof(big) - 1 && m.n_held == 1);
        PASS();
}

static void test_restore_leaves_the_alternate_screen_before_resetting_attributes(void)
{
        /* Entering 1049 saved concealed attributes and DEC graphics; leaving restores them. */
        char restore[TTYMODES_RESTORE_MAX + 1];

        restore_of("\033[8;30;40m\033(0\016\033[?1049h\033[?25l", restore);
        CHECK(strstr(restore, "\033[?1049l") != NULL);
        CHECK(strstr(restore, "\033[?1049l") < strstr(restore, "\033[m"));
        CHECK(strstr(restore, "\033[?1049l") < strstr(restore, "\033(B"));
        CHECK(strstr(restore, "\033[?1049l") < strstr(restore, "\017"));
        /* Each mode switched off once. */
        CHECK(strstr(strstr(restore, "\033[?25h") + 1, "\033[?25h") == NULL);
        PASS();
}

static void test_restore_after_origin_mode_goes_to_a_new_line_at_the_bottom(void)
{
        char restore[TTYMODES_RESTORE_MAX + 1];

        restore_of("\033[5;6r\033[?6h", restore);
        CHECK(strstr(restore, "\033[?6l\033[r\033[9999;1H\n") != NULL);
        CHECK(!strstr(restore, "\0337"));
        restore_of("\033[5;6r\033[?6h\033[?6l", restore);
        CHECK(!strstr(restore, "?6l") && strstr(restore, "\0337\033[r\0338"));
        PASS();
}

static void test_restore_of_every_mode_at_once_fits(void)
{
        char restore[TTYMODES_RESTORE_MAX + 1];
        struct ttymodes m;
        size_t n;

        ttymodes_init(&m);
        for (int i = 0; i < 100; i++)
                ttymodes_feed(&m, "\033[>1u", 5);
        const char *all = "\033=\033[?25l\033[?1;6;2004;1000;1002;1003;1004;1005;1006;1015;1049;"
                          "1047;47h";

        ttymodes_feed(&m, all, strlen(all));
        n = ttymodes_restore(&m, restore);
        CHECK(n < TTYMODES_RESTORE_MAX);
        restore[n] = '\0';
        CHECK(n == strlen(restore));
        CHECK(strstr(restore, "\033[<64u") == restore);
        PASS();
}

int main(void)
{
        test_nothing_switched_on_resets_nothing();
        test_every_mode_left_on_is_switched_off_primary_screen_last();
        test_modes_switched_back_off_are_not_reset();
        test_sequences_split_across_reads_are_seen();
        test_strings_and_other_sequences_do_not_count();
        test_one_way_back_from_the_alternate_screen();
        test_kitty_stack_depth_is_bounded();
        test_set_after_a_suspend_puts_every_mode_back();
        test_keypad_application_mode_is_reset_and_set_again();
        test_restore_is_nothing_after_a_session_that_changed_nothing();
        test_restore_undoes_exactly_what_was_changed();
        test_shifts_and_escapes_are_seen_anywhere_in_plain_text();
        test_saved_cursor_state_is_followed();
        test_restore_after_output_cut_inside_a_sequence_starts_with_can();
        test_title_push_goes_just_before_the_first_title_change();
        test_what_is_held_back_is_bounded();
        test_restore_leaves_the_alternate_screen_before_resetting_attributes();
        test_restore_after_origin_mode_goes_to_a_new_line_at_the_bottom();
        test_restore_of_every_mode_at_once_fits();
        return failures ? 1 : 0;
}
