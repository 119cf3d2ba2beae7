/*
 * Tests for util/timeutil.c: Slurm duration syntax, its limits, and the
 * duration and ISO 8601 formats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "util/timeutil.h"

static int64_t
parse(const char *text)
{
  int64_t secs = -1;

  if (time_parse_slurm_duration(text, &secs) != 0)
    fail_msg("'%s' rejected", text);
  return secs;
}

static void
expect_rejected(const char *text)
{
  int64_t secs = 12345;

  if (time_parse_slurm_duration(text, &secs) != ERR_INVALID)
    fail_msg("'%s' accepted", text);
  /* The output is untouched on failure. */
  assert_int_equal(secs, 12345);
}

static void
test_bare_number_is_minutes(void **state)
{
  (void)state;
  assert_int_equal(parse("0"), 0);
  assert_int_equal(parse("90"), 90 * 60);
}

static void
test_two_fields_are_minutes_and_seconds(void **state)
{
  (void)state;
  assert_int_equal(parse("5:30"), 5 * 60 + 30);
}

static void
test_three_fields_are_hours_minutes_seconds(void **state)
{
  (void)state;
  assert_int_equal(parse("2:03:04"), 2 * 3600 + 3 * 60 + 4);
}

static void
test_days_forms(void **state)
{
  (void)state;
  assert_int_equal(parse("2-5"), 2 * 86400 + 5 * 3600);
  assert_int_equal(parse("2-5:06"), 2 * 86400 + 5 * 3600 + 6 * 60);
  assert_int_equal(parse("2-5:06:07"), 2 * 86400 + 5 * 3600 + 6 * 60 + 7);
  assert_int_equal(parse("0-0"), 0);
}

static void
test_unlimited_and_infinite_mean_no_limit(void **state)
{
  (void)state;
  assert_int_equal(parse("UNLIMITED"), 0);
  assert_int_equal(parse("unlimited"), 0);
  assert_int_equal(parse("INFINITE"), 0);
  assert_int_equal(parse("Infinite"), 0);
}

static void
test_garbage_is_rejected(void **state)
{
  (void)state;
  expect_rejected("");
  expect_rejected("abc");
  expect_rejected("1h");
  expect_rejected(" 5");
  expect_rejected("5 ");
  expect_rejected("-5");
  expect_rejected("5-");
  expect_rejected("1-2-3");
  expect_rejected("1:2:3:4");
  expect_rejected("1-2:3:4:5");
  expect_rejected("10:00-1");
  expect_rejected("1::2");
  expect_rejected(":5");
  expect_rejected("5:");
  expect_rejected("+5");
  expect_rejected("1.5");
  expect_rejected("UNLIMITEDX");
}

static void
test_more_than_a_year_is_rejected(void **state)
{
  (void)state;
  assert_int_equal(parse("366-0"), 366LL * 86400);
  expect_rejected("366-0:0:1");
  expect_rejected("367-0");
  expect_rejected("527041");
  expect_rejected("9000:00:00");
  /* Ten digits would overflow nothing, but are refused before. */
  expect_rejected("1234567890");
}

static void
test_format_duration_uses_clock_and_days(void **state)
{
  char out[32];

  (void)state;
  time_format_duration(0, out, sizeof(out));
  assert_string_equal(out, "00:00:00");
  time_format_duration(3661, out, sizeof(out));
  assert_string_equal(out, "01:01:01");
  time_format_duration(86399, out, sizeof(out));
  assert_string_equal(out, "23:59:59");
  time_format_duration(86400 + 3600 + 60 + 1, out, sizeof(out));
  assert_string_equal(out, "1-01:01:01");
  time_format_duration(365LL * 86400, out, sizeof(out));
  assert_string_equal(out, "365-00:00:00");
}

static void
test_formatted_duration_parses_back(void **state)
{
  static const int64_t values[] = {0, 1, 59, 60, 3599, 3600, 86399, 86400,
                                   90061, 365LL * 86400};
  size_t i;
  char out[32];

  (void)state;
  for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    time_format_duration(values[i], out, sizeof(out));
    assert_int_equal(parse(out), values[i]);
  }
}

static void
test_format_duration_truncates_to_the_buffer(void **state)
{
  char out[4];

  (void)state;
  time_format_duration(3661, out, sizeof(out));
  assert_string_equal(out, "01:");
}

static void
test_format_iso_is_utc_with_milliseconds(void **state)
{
  char out[40];

  (void)state;
  time_format_iso(1700000000123LL, out, sizeof(out));
  assert_string_equal(out, "2023-11-14T22:13:20.123Z");
  time_format_iso(1000, out, sizeof(out));
  assert_string_equal(out, "1970-01-01T00:00:01.000Z");
}

static void
test_clocks_are_plausible_and_monotonic_does_not_go_back(void **state)
{
  int64_t a;
  int64_t b;

  (void)state;
  /* 2020-01-01 in ms: the wall clock is not the epoch. */
  assert_true(time_now_ms() > 1577836800000LL);
  a = time_mono_ms();
  b = time_mono_ms();
  assert_true(b >= a);
}

static void
test_zones_are_fixed_offsets_and_nothing_else(void **state)
{
  int off = 1;

  (void)state;
  assert_int_equal(time_zone_parse("UTC", &off), 0);
  assert_int_equal(off, 0);
  assert_int_equal(time_zone_parse("+05:30", &off), 0);
  assert_int_equal(off, 330);
  assert_int_equal(time_zone_parse("-08:00", &off), 0);
  assert_int_equal(off, -480);
  assert_int_equal(time_zone_parse("Europe/Berlin", &off), ERR_INVALID);
  assert_int_equal(time_zone_parse("+5:30", &off), ERR_INVALID);
  assert_int_equal(time_zone_parse("+15:00", &off), ERR_INVALID);
  assert_int_equal(time_zone_parse("+05:30x", &off), ERR_INVALID);
  assert_int_equal(time_zone_parse("", &off), ERR_INVALID);
}

static void
test_days_and_months_start_at_local_midnight(void **state)
{
  /* 2026-11-27T01:30:00Z */
  const int64_t t = 1795743000000LL;
  int64_t ms = 0;
  char day[11];

  (void)state;
  assert_int_equal(time_day_start(t, 0), 1795737600000LL);
  time_format_day(t, 0, day);
  assert_string_equal(day, "2026-11-27");
  /* at -08:00 it is still the 26th, whose midnight is 08:00Z */
  time_format_day(t, -480, day);
  assert_string_equal(day, "2026-11-26");
  assert_int_equal(time_day_start(t, -480), 1795737600000LL - 16 * 3600000LL);
  assert_int_equal(time_month_start(t, 0), 1793491200000LL); /* 11-01 */
  assert_int_equal(time_parse_day("2026-11-01", 0, &ms), 0);
  assert_int_equal(ms, 1793491200000LL);
  assert_int_equal(time_parse_day("2026-11-27", 330, &ms), 0);
  assert_int_equal(ms, 1795737600000LL - 330 * 60000LL);
  assert_int_equal(time_parse_day("2026-02-30", 0, &ms), ERR_INVALID);
  assert_int_equal(time_parse_day("2026-1-01", 0, &ms), ERR_INVALID);
  assert_int_equal(time_parse_day("yesterday", 0, &ms), ERR_INVALID);
  assert_int_equal(time_parse_day("2026-11-270", 0, &ms), ERR_INVALID);
}

static void
test_iso_times_parse_to_milliseconds(void **state)
{
  int64_t ms = 0;

  (void)state;
  assert_int_equal(time_parse_iso("1970-01-01T00:00:01.5Z", &ms), 0);
  assert_int_equal(ms, 1500);
  assert_int_equal(time_parse_iso("2026-11-21T14:00:00.123Z", &ms), 0);
  assert_int_equal(ms, 1795269600123LL);
  assert_int_equal(time_parse_iso("2026-11-21T14:00:00Z", &ms), 0);
  assert_int_equal(ms, 1795269600000LL);
  assert_int_equal(time_parse_iso("2026-11-21T14:00:00.123456Z", &ms), 0);
  assert_int_equal(ms, 1795269600123LL);
  assert_int_equal(time_parse_iso("2026-11-21 14:00:00Z", &ms), ERR_INVALID);
  assert_int_equal(time_parse_iso("2026-11-21T14:00:00", &ms), ERR_INVALID);
  assert_int_equal(time_parse_iso("2026-13-21T14:00:00Z", &ms), ERR_INVALID);
  assert_int_equal(time_parse_iso("2026-11-21T14:00:00.Z", &ms), ERR_INVALID);
  assert_int_equal(time_parse_iso("2026-11-21T14:00:00Zjunk", &ms),
                   ERR_INVALID);
  assert_int_equal(time_parse_iso(NULL, &ms), ERR_INVALID);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_iso_times_parse_to_milliseconds),
      cmocka_unit_test(test_zones_are_fixed_offsets_and_nothing_else),
      cmocka_unit_test(test_days_and_months_start_at_local_midnight),
    cmocka_unit_test(test_bare_number_is_minutes),
    cmocka_unit_test(test_two_fields_are_minutes_and_seconds),
    cmocka_unit_test(test_three_fields_are_hours_minutes_seconds),
    cmocka_unit_test(test_days_forms),
    cmocka_unit_test(test_unlimited_and_infinite_mean_no_limit),
    cmocka_unit_test(test_garbage_is_rejected),
    cmocka_unit_test(test_more_than_a_year_is_rejected),
    cmocka_unit_test(test_format_duration_uses_clock_and_days),
    cmocka_unit_test(test_formatted_duration_parses_back),
    cmocka_unit_test(test_format_duration_truncates_to_the_buffer),
    cmocka_unit_test(test_format_iso_is_utc_with_milliseconds),
    cmocka_unit_test(
        test_clocks_are_plausible_and_monotonic_does_not_go_back),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
