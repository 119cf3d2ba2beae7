/*
 * Unit tests of the CLI's time formatting: times in the local zone (TZ
 * set by each test, as a user's shell would), the server's ISO UTC read
 * and shown there, how long ago or ahead, and the progress bar's compact
 * durations (cli_fmt_duration is tested with the other cells in
 * test_cli_args.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cli/format.h"

/* 2026-11-21T14:00:00Z */
#define T0 1795269600000LL

static void
set_tz(const char *tz)
{
  assert_int_equal(setenv("TZ", tz, 1), 0);
  tzset();
}

static void
test_times_print_in_the_local_zone(void **state)
{
  char out[CLI_FMT_SIZE];

  (void)state;
  set_tz("Asia/Tokyo");
  cli_fmt_time(T0, out, sizeof(out));
  assert_string_equal(out, "2026-11-21 23:00:00");
  set_tz("UTC");
  cli_fmt_time(T0 + 999, out, sizeof(out));
  assert_string_equal(out, "2026-11-21 14:00:00");
  /* Daylight saving time is the zone's: New York in July is UTC-4. */
  set_tz("America/New_York");
  cli_fmt_time(1783008000000LL, out, sizeof(out)); /* 2026-07-02T16:00Z */
  assert_string_equal(out, "2026-07-02 12:00:00");
  cli_fmt_time(T0, out, sizeof(out));
  assert_string_equal(out, "2026-11-21 09:00:00");
}

static void
test_times_before_1970_floor_to_the_second(void **state)
{
  char out[CLI_FMT_SIZE];

  (void)state;
  set_tz("UTC");
  cli_fmt_time(-1, out, sizeof(out));
  assert_string_equal(out, "1969-12-31 23:59:59");
  cli_fmt_time(-1000, out, sizeof(out));
  assert_string_equal(out, "1969-12-31 23:59:59");
}

static void
test_iso_times_from_the_server_show_local(void **state)
{
  char out[CLI_FMT_SIZE];

  (void)state;
  set_tz("Asia/Tokyo");
  assert_ptr_equal(cli_fmt_iso("2026-11-21T14:00:00.123Z", out, sizeof(out)),
                   out);
  assert_string_equal(out, "2026-11-21 23:00:00");
  assert_null(cli_fmt_iso(NULL, out, sizeof(out)));
  /* What does not parse is shown as sent, not as a wrong time. */
  assert_string_equal(cli_fmt_iso("yesterday", out, sizeof(out)),
                      "yesterday");
}

static void
test_iso_times_say_how_long_ago_or_ahead(void **state)
{
  char out[CLI_FMT_TIME_SIZE];

  (void)state;
  set_tz("Asia/Tokyo");
  assert_string_equal(cli_fmt_iso_ago("2026-11-21T14:00:00Z", T0 + 200000,
                                      out, sizeof(out)),
                      "2026-11-21 23:00:00 (3m 20s ago)");
  assert_string_equal(cli_fmt_iso_ago("2026-11-21T16:05:00Z", T0, out,
                                      sizeof(out)),
                      "2026-11-22 01:05:00 (in 2h 5m)");
  assert_string_equal(
      cli_fmt_iso_ago("2026-11-21T14:00:00Z", T0, out, sizeof(out)),
      "2026-11-21 23:00:00 (0s ago)");
  assert_null(cli_fmt_iso_ago(NULL, T0, out, sizeof(out)));
  assert_string_equal(cli_fmt_iso_ago("soon", T0, out, sizeof(out)), "soon");
}

/* The progress bar's fields keep their width: five characters. */
static void
test_compact_durations_fit_a_progress_bar(void **state)
{
  static const struct {
    int64_t s;
    const char *want;
  } cases[] = {
      {-5, "0s"},      {59, "59s"},      {60, "1m00s"}, {245, "4m05s"},
      {3600, "1h00m"}, {86399, "23h59m"}, {86400, "1d00h"},
      {200000, "2d07h"},
  };
  char out[CLI_FMT_SIZE];

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cli_fmt_duration_compact(cases[i].s, out, sizeof(out));
    assert_string_equal(out, cases[i].want);
  }
}

/* A short buffer cuts the text and never overflows. */
static void
test_short_buffers_are_cut(void **state)
{
  char out[8];

  (void)state;
  set_tz("UTC");
  memset(out, 'x', sizeof(out));
  cli_fmt_time(T0, out, sizeof(out));
  assert_true(memchr(out, '\0', sizeof(out)) != NULL);
  cli_fmt_duration(356400, out, 4);
  assert_string_equal(out, "4d ");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_times_print_in_the_local_zone),
      cmocka_unit_test(test_times_before_1970_floor_to_the_second),
      cmocka_unit_test(test_iso_times_from_the_server_show_local),
      cmocka_unit_test(test_iso_times_say_how_long_ago_or_ahead),
      cmocka_unit_test(test_compact_durations_fit_a_progress_bar),
      cmocka_unit_test(test_short_buffers_are_cut),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
