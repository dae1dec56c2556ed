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

static void test_restore_resets_what_the_parser_never_saw_without_clearing(void)
{
        static const char *const resets[] = {
            "\033[m",      "\033(B",      "\033)B",      "\017",
            "\033[4l",     "\033[?7h",    "\033[?25h",   "\033[?1000l",
            "\033[?1002l", "\033[?1003l", "\033[?1006l", "\033[?1004l",
            "\033[?2004l", "\033[?1l",    "\033>",       "\0337\033[r\0338"};
        char restore[TTYMODES_RESTORE_MAX + 1];
        size_t n = restore_of("", restore);

        CHECK(n == strlen(restore));
        for (size_t i = 0; i < sizeof(resets) / sizeof(resets[0]); i++)
                CHECK(strstr(restore, resets[i]) != NULL);
        /* The title popped last; the screen neither cleared nor left when never entered. */
        CHECK(n > strlen(TTYMODES_TITLE_POP) &&
              strcmp(restore + n - strlen(TTYMODES_TITLE_POP), TTYMODES_TITLE_POP) == 0);
        CHECK(!strstr(restore, "J") && !strstr(restore, "1049") && !strstr(restore, "?47"));
        CHECK(!strstr(restore, "?6l"));
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
        test_restore_resets_what_the_parser_never_saw_without_clearing();
        test_restore_leaves_the_alternate_screen_before_resetting_attributes();
        test_restore_after_origin_mode_goes_to_a_new_line_at_the_bottom();
        test_restore_of_every_mode_at_once_fits();
        return failures ? 1 : 0;
}
