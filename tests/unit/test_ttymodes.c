/* Unit tests for the terminal modes a session leaves on: what is reset, what is not, and
 * sequences split anywhere across reads. */
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
        return failures ? 1 : 0;
}
