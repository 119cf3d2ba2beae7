/*
 * Unit tests of the progress lines of 'tenbin dataset sync': the bar
 * and the plain form, byte units, ETAs, rate smoothing and when the
 * plain form writes a line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cli/progress.h"

#define GiB ((int64_t)1 << 30)
#define MiB ((int64_t)1 << 20)

static struct cli_progress
sample(int64_t done, int64_t total)
{
  struct cli_progress p;

  memset(&p, 0, sizeof(p));
  p.label = "syncing";
  p.bytes_done = done;
  p.bytes_total = total;
  p.files_done = 120;
  p.files_total = 300;
  /* Content moves at 113 MiB/s, of which 4 MiB/s cross the wire. */
  p.rate = 113.0 * (double)MiB;
  p.bytes_wire = 12 * MiB;
  p.bytes_saved = GiB;
  p.wire_rate = 4.0 * (double)MiB;
  p.elapsed_ms = 65000;
  return p;
}

static void
assert_no_control_chars(const char *s)
{
  for (; *s != '\0'; s++)
    assert_false((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f);
}

/* The cells between '[' and ']', and how many of them are '#'. */
static void
bar_cells(const char *line, size_t *cells, size_t *done)
{
  const char *open = strchr(line, '[');
  const char *close = strchr(line, ']');

  assert_non_null(open);
  assert_non_null(close);
  *cells = (size_t)(close - open - 1);
  *done = 0;
  for (const char *c = open + 1; c < close; c++)
    if (*c == '#')
      (*done)++;
}

static void
test_percent_rounds_down_and_reaches_100_only_when_done(void **state)
{
  (void)state;
  assert_int_equal(cli_progress_percent(0, 100), 0);
  assert_int_equal(cli_progress_percent(1, 3), 33);
  assert_int_equal(cli_progress_percent(999, 1000), 99);
  assert_int_equal(cli_progress_percent(1000, 1000), 100);
  assert_int_equal(cli_progress_percent(1500, 1000), 100);
  assert_int_equal(cli_progress_percent(-7, 1000), 0);
  assert_int_equal(cli_progress_percent(5, 0), -1);
  assert_int_equal(cli_progress_percent(5, -1), -1);
}

static void
test_percent_is_exact_for_huge_values(void **state)
{
  (void)state;
  /* done * 100 overflows int64 here; the answer must still be floor. */
  assert_int_equal(cli_progress_percent(INT64_MAX / 2, INT64_MAX), 49);
  assert_int_equal(cli_progress_percent(INT64_MAX - 1, INT64_MAX), 99);
  assert_int_equal(cli_progress_percent(INT64_MAX / 100, INT64_MAX), 0);
  assert_int_equal(cli_progress_percent(INT64_MAX / 100 + 1, INT64_MAX), 1);
  assert_int_equal(cli_progress_percent(INT64_MAX, INT64_MAX), 100);
}

static void
test_bytes_use_binary_units_with_three_digits(void **state)
{
  static const struct {
    int64_t n;
    const char *want;
  } cases[] = {
      {0, "0 B"},
      {-5, "0 B"},
      {999, "999 B"},
      {1000, "0.98 KiB"},
      {1024, "1.00 KiB"},
      {1536, "1.50 KiB"},
      {10 * MiB, "10.0 MiB"},
      {123 * GiB, "123 GiB"},
      {1023 * MiB + 1000 * 1024, "1.00 GiB"},
      {(int64_t)2600 * MiB, "2.54 GiB"},
      {INT64_MAX, "8.00 EiB"},
  };
  char out[32];

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cli_progress_bytes(cases[i].n, out, sizeof(out));
    assert_string_equal(out, cases[i].want);
  }
}

static void
test_eta_is_unknown_without_a_rate_and_rounds_up(void **state)
{
  char out[32];

  (void)state;
  cli_progress_eta(GiB, 0, out, sizeof(out));
  assert_string_equal(out, "--");
  cli_progress_eta(GiB, -1, out, sizeof(out));
  assert_string_equal(out, "--");
  cli_progress_eta(1000, 100, out, sizeof(out));
  assert_string_equal(out, "10s");
  cli_progress_eta(1001, 100, out, sizeof(out));
  assert_string_equal(out, "11s");
  cli_progress_eta(245 * 100, 100, out, sizeof(out));
  assert_string_equal(out, "4m05s");
  cli_progress_eta(0, 0, out, sizeof(out));
  assert_string_equal(out, "0s");
  /* Seconds beyond int64 must not reach the cast. */
  cli_progress_eta(INT64_MAX, 1e-9, out, sizeof(out));
  assert_string_equal(out, ">99d");
}

static void
test_bar_at_0_percent_is_empty_with_an_unknown_eta(void **state)
{
  struct cli_progress p = sample(0, 2 * GiB);
  char line[CLI_PROGRESS_SIZE];
  size_t cells, done;

  (void)state;
  p.rate = 0;
  p.wire_rate = 0;
  p.bytes_wire = 0;
  p.bytes_saved = 0;
  p.files_done = 0;
  cli_progress_bar(&p, 120, line, sizeof(line));
  bar_cells(line, &cells, &done);
  assert_int_equal(done, 0);
  assert_non_null(strstr(line, "  0%"));
  assert_non_null(strstr(line, "0 B/2.00 GiB"));
  assert_non_null(strstr(line, "ETA --"));
  /* Padded as they will be later, so the bar keeps its size. */
  assert_non_null(strstr(line, "       --/s"));
  assert_non_null(strstr(line, "wire      0 B"));
  assert_non_null(strstr(line, "saved      0 B"));
  assert_non_null(strstr(line, "files   0/300"));
}

static void
test_bar_at_100_percent_is_full_and_shows_the_time_taken(void **state)
{
  struct cli_progress p = sample(2 * GiB, 2 * GiB);
  char line[CLI_PROGRESS_SIZE];
  size_t cells, done;

  (void)state;
  p.files_done = 300;
  cli_progress_bar(&p, 120, line, sizeof(line));
  bar_cells(line, &cells, &done);
  assert_int_equal(done, cells);
  assert_non_null(strstr(line, "100%"));
  assert_non_null(strstr(line, "in 1m05s"));
  assert_null(strstr(line, "ETA"));
}

static void
test_bar_in_the_middle_has_every_field(void **state)
{
  struct cli_progress p = sample(GiB + GiB / 4, (int64_t)5 * GiB / 2);
  char line[CLI_PROGRESS_SIZE];
  size_t cells, done;

  (void)state;
  cli_progress_bar(&p, 200, line, sizeof(line));
  assert_string_equal(line,
                      "syncing  [####################....................]"
                      "   50%  1.25 GiB/2.50 GiB  wire 12.0 MiB  4.00 MiB/s"
                      "  saved 1.00 GiB  ETA 12s    files 120/300");
  bar_cells(line, &cells, &done);
  assert_int_equal(cells, 40);
  assert_int_equal(done, 20);
}

static void
test_bar_is_never_full_before_done(void **state)
{
  struct cli_progress p = sample(INT64_MAX - 1, INT64_MAX);
  char line[CLI_PROGRESS_SIZE];
  size_t cells, done;

  (void)state;
  cli_progress_bar(&p, 200, line, sizeof(line));
  bar_cells(line, &cells, &done);
  assert_int_equal(done, cells - 1);
  assert_non_null(strstr(line, " 99%"));
  assert_non_null(strstr(line, "8.00 EiB/8.00 EiB"));
}

static void
test_bar_keeps_its_size_while_the_numbers_change(void **state)
{
  static const int64_t done[] = {0, 999, 37 * MiB, 10 * GiB, 123 * GiB,
                                 299 * GiB};
  char line[CLI_PROGRESS_SIZE];
  size_t cells, filled, first = 0;
  const char *pct;

  (void)state;
  for (size_t i = 0; i < sizeof(done) / sizeof(done[0]); i++) {
    struct cli_progress p = sample(done[i], 300 * GiB);

    p.label = NULL;
    p.rate = i == 0 ? 0 : (double)(i * i * 1000) * (double)MiB;
    p.wire_rate = p.rate / 3;
    p.bytes_wire = done[i] / 3;
    p.bytes_saved = done[i] - done[i] / 3;
    p.files_done = (int64_t)i * 50;
    cli_progress_bar(&p, 100, line, sizeof(line));
    bar_cells(line, &cells, &filled);
    if (i == 0)
      first = cells;
    assert_int_equal(cells, first);
    /* Everything after the bar holds its column too. */
    pct = strchr(line, '%');
    assert_non_null(pct);
    assert_int_equal(pct - line, (long)first + 7);
    assert_non_null(strstr(line, "ETA "));
    assert_int_equal(strstr(line, "wire ") - line, (long)first + 29);
    assert_int_equal(strstr(line, "saved ") - line, (long)first + 56);
    assert_int_equal(strstr(line, "ETA ") - line, (long)first + 72);
  }
}

static void
test_unknown_total_has_no_bar_percent_or_eta(void **state)
{
  struct cli_progress p = sample(3 * MiB, 0);
  char line[CLI_PROGRESS_SIZE];

  (void)state;
  p.files_total = 0;
  p.files_done = 7;
  cli_progress_bar(&p, 120, line, sizeof(line));
  assert_string_equal(line, "syncing  3.00 MiB  wire 12.0 MiB  4.00 MiB/s"
                            "  saved 1.00 GiB  files 7");
  cli_progress_text(&p, line, sizeof(line));
  assert_string_equal(line, "syncing  3.00 MiB  wire 12.0 MiB  4.00 MiB/s"
                            "  saved 1.00 GiB  files 7");
}

static void
test_bar_fits_every_width_dropping_fields_in_order(void **state)
{
  struct cli_progress p = sample(GiB + GiB / 4, (int64_t)5 * GiB / 2);
  char line[CLI_PROGRESS_SIZE];
  size_t cells, done;
  size_t n;

  (void)state;
  for (size_t w = 0; w <= 200; w++) {
    n = cli_progress_bar(&p, w, line, sizeof(line));
    assert_int_equal(n, strlen(line));
    assert_true(n <= w);
    assert_no_control_chars(line);
  }
  /* 145 columns hold all at the largest bar; 115 at the smallest. */
  assert_int_equal(cli_progress_bar(&p, 200, line, sizeof(line)), 145);
  cli_progress_bar(&p, 115, line, sizeof(line));
  bar_cells(line, &cells, &done);
  assert_int_equal(cells, 10);
  assert_non_null(strstr(line, "files 120/300"));
  /* Narrower: the files go first, then the saved bytes, the rate, the
   * label and the bytes on the wire. */
  cli_progress_bar(&p, 114, line, sizeof(line));
  assert_null(strstr(line, "files"));
  assert_non_null(strstr(line, "syncing  ["));
  assert_non_null(strstr(line, "saved 1.00 GiB"));
  bar_cells(line, &cells, &done);
  assert_int_equal(cells, 24);
  cli_progress_bar(&p, 99, line, sizeof(line));
  assert_null(strstr(line, "saved"));
  assert_non_null(strstr(line, "4.00 MiB/s"));
  bar_cells(line, &cells, &done);
  assert_int_equal(cells, 25);
  cli_progress_bar(&p, 84, line, sizeof(line));
  bar_cells(line, &cells, &done);
  assert_int_equal(cells, 10);
  assert_non_null(strstr(line, "4.00 MiB/s"));
  cli_progress_bar(&p, 83, line, sizeof(line));
  assert_string_equal(line, "syncing  [##########...........]   50%"
                            "  1.25 GiB/2.50 GiB  wire 12.0 MiB  ETA 12s");
  cli_progress_bar(&p, 71, line, sizeof(line));
  assert_string_equal(line, "[#########.........]   50%"
                            "  1.25 GiB/2.50 GiB  wire 12.0 MiB  ETA 12s");
  cli_progress_bar(&p, 62, line, sizeof(line));
  assert_string_equal(line, "[############............]   50%"
                            "  1.25 GiB/2.50 GiB  ETA 12s");
  /* Then the bar, the ETA and the bytes: the percent is last. */
  cli_progress_bar(&p, 47, line, sizeof(line));
  assert_string_equal(line, " 50%  1.25 GiB/2.50 GiB  ETA 12s");
  cli_progress_bar(&p, 33, line, sizeof(line));
  assert_string_equal(line, " 50%  1.25 GiB/2.50 GiB");
  cli_progress_bar(&p, 22, line, sizeof(line));
  assert_string_equal(line, " 50%");
  cli_progress_bar(&p, 2, line, sizeof(line));
  assert_string_equal(line, " 5");
}

static void
test_bar_without_a_label_keeps_every_field_in_120_columns(void **state)
{
  struct cli_progress p = sample(GiB + GiB / 4, (int64_t)5 * GiB / 2);
  char line[CLI_PROGRESS_SIZE];
  size_t cells, done;

  (void)state;
  p.label = NULL;
  cli_progress_bar(&p, 119, line, sizeof(line));
  assert_string_equal(line, "[###########............]   50%"
                            "  1.25 GiB/2.50 GiB  wire 12.0 MiB  4.00 MiB/s"
                            "  saved 1.00 GiB  ETA 12s    files 120/300");
  bar_cells(line, &cells, &done);
  assert_int_equal(cells, 23);
}

/*
 * A 1 MiB delta against a 47.7 MiB file: the content is done at disk
 * speed, but what the line shows moving is the wire's, with the rest
 * saved.  The ETA still follows the content.
 */
static void
test_a_delta_shows_the_bytes_on_the_wire_and_the_bytes_saved(void **state)
{
  struct cli_progress p = sample(24 * MiB, 47 * MiB + 734003);
  char line[CLI_PROGRESS_SIZE];

  (void)state;
  p.rate = 190.0 * (double)MiB;
  p.bytes_wire = MiB / 2;
  p.bytes_saved = 24 * MiB - MiB / 2;
  p.wire_rate = 2.0 * (double)MiB;
  cli_progress_text(&p, line, sizeof(line));
  assert_string_equal(line, "syncing  50%  24.0 MiB/47.7 MiB  wire 512 KiB"
                            "  2.00 MiB/s  saved 23.5 MiB  ETA 1s"
                            "  files 120/300");
  assert_null(strstr(line, "190"));
  cli_progress_bar(&p, 200, line, sizeof(line));
  assert_non_null(strstr(line, "wire  512 KiB  2.00 MiB/s  saved 23.5 MiB"));
  assert_null(strstr(line, "190"));
}

static void
test_labels_lose_control_characters_in_both_forms(void **state)
{
  struct cli_progress p = sample(GiB, 2 * GiB);
  char line[CLI_PROGRESS_SIZE];

  (void)state;
  p.label = "ds@0123 at \x1b[2Jgpu\r\n: sync\x7fing";
  cli_progress_text(&p, line, sizeof(line));
  assert_no_control_chars(line);
  assert_non_null(strstr(line, "ds@0123 at ?[2Jgpu??: sync?ing  50%"));
  cli_progress_bar(&p, 200, line, sizeof(line));
  assert_no_control_chars(line);
}

static void
test_plain_form_has_no_bar_padding_or_cut(void **state)
{
  struct cli_progress p = sample(GiB + GiB / 4, (int64_t)5 * GiB / 2);
  char line[CLI_PROGRESS_SIZE];
  char label[200];

  (void)state;
  p.label = "ds@0123456789ab at gpu2: syncing";
  cli_progress_text(&p, line, sizeof(line));
  assert_string_equal(line, "ds@0123456789ab at gpu2: syncing  50%  "
                            "1.25 GiB/2.50 GiB  wire 12.0 MiB  4.00 MiB/s  "
                            "saved 1.00 GiB  ETA 12s  files 120/300");
  /* A long label is kept up to its cap, never cut to a terminal. */
  memset(label, 'x', sizeof(label) - 1);
  label[sizeof(label) - 1] = '\0';
  p.label = label;
  cli_progress_text(&p, line, sizeof(line));
  assert_int_equal(strspn(line, "x"), 160);
  assert_non_null(strstr(line, "files 120/300"));
}

static void
test_rate_starts_at_the_first_movement_and_falls_in_a_stall(void **state)
{
  struct cli_progress_rate r;

  (void)state;
  cli_progress_rate_init(&r);
  cli_progress_rate_add(&r, 1000, 0);
  assert_true(r.bps == 0);
  cli_progress_rate_add(&r, 61000, 0);
  assert_true(r.bps == 0);
  /* 25 MB since the last poll, not since the first: 100 MB/s. */
  cli_progress_rate_add(&r, 61250, 25000000);
  assert_true(r.bps > 99e6 && r.bps < 101e6);
  /* A sample at the instant of the last change teaches nothing. */
  cli_progress_rate_add(&r, 61250, 99000000);
  assert_true(r.bps > 99e6 && r.bps < 101e6);
  assert_int_equal(r.n, 2);
  /* Within the usual gap between changes, no news is no change... */
  cli_progress_rate_add(&r, 61500, 25000000);
  assert_true(r.bps > 99e6 && r.bps < 101e6);
  /* ...past it, the rate falls as the stall lasts. */
  cli_progress_rate_add(&r, 61750, 25000000);
  assert_true(r.bps > 49e6 && r.bps < 51e6);
  cli_progress_rate_add(&r, 71000, 25000000);
  assert_true(r.bps < 3e6);
}

static void
test_rate_of_a_bursty_counter_is_its_mean_between_polls(void **state)
{
  struct cli_progress_rate r;
  int64_t bytes = 0;

  (void)state;
  cli_progress_rate_init(&r);
  /*
   * 100 MB once a second, polled every 250 ms: every poll, between the
   * bursts too, must say 100 MB/s once two bursts were seen.
   */
  for (int i = 0; i <= 400; i++) {
    if (i > 0 && i % 4 == 0)
      bytes += 100000000;
    cli_progress_rate_add(&r, (int64_t)i * 250, bytes);
    if (i >= 8)
      assert_true(r.bps > 99e6 && r.bps < 101e6);
  }
  assert_true(r.n <= CLI_PROGRESS_RATE_POINTS);
}

static void
test_rate_follows_a_change_within_the_window(void **state)
{
  struct cli_progress_rate r;
  int64_t bytes = 0;
  int64_t t = 0;

  (void)state;
  cli_progress_rate_init(&r);
  for (int i = 0; i < 40; i++) {
    cli_progress_rate_add(&r, t, bytes);
    t += 1000;
    bytes += 10000000; /* 10 MB/s */
  }
  for (int i = 0; i < 12; i++) {
    cli_progress_rate_add(&r, t, bytes);
    t += 1000;
    bytes += 1000000; /* then 1 MB/s */
  }
  /* Ten seconds on, the old speed is out of the window. */
  assert_true(r.bps > 0.99e6 && r.bps < 1.01e6);
}

static void
test_rate_starts_over_when_the_counter_goes_back(void **state)
{
  struct cli_progress_rate r;

  (void)state;
  cli_progress_rate_init(&r);
  cli_progress_rate_add(&r, 0, 0);
  cli_progress_rate_add(&r, 1000, 50000000);
  assert_true(r.bps > 0);
  cli_progress_rate_add(&r, 2000, 10);
  assert_true(r.bps == 0);
  cli_progress_rate_add(&r, 3000, 1000010);
  assert_true(r.bps > 0.99e6 && r.bps < 1.01e6);
}

static void
test_plain_lines_on_state_changes_and_at_most_every_2s(void **state)
{
  struct cli_progress_log l;

  (void)state;
  cli_progress_log_init(&l);
  assert_true(cli_progress_log_due(&l, "pending", 0, 0, 0));
  /* Nothing new: never a line, however long it takes. */
  assert_false(cli_progress_log_due(&l, "pending", 0, 0, 100000));
  assert_true(cli_progress_log_due(&l, "syncing", 0, 0, 100250));
  assert_false(cli_progress_log_due(&l, "syncing", 10, 1, 100500));
  assert_false(cli_progress_log_due(&l, "syncing", 20, 1, 102249));
  assert_true(cli_progress_log_due(&l, "syncing", 30, 2, 102250));
  assert_false(cli_progress_log_due(&l, "syncing", 40, 2, 102500));
  /* A new state is written at once. */
  assert_true(cli_progress_log_due(&l, "complete", 40, 2, 102750));
}

static void
test_plain_log_compares_long_states_as_stored(void **state)
{
  struct cli_progress_log l;
  const char *s = "a-state-name-longer-than-thirty-one-characters";

  (void)state;
  cli_progress_log_init(&l);
  assert_true(cli_progress_log_due(&l, s, 0, 0, 0));
  assert_false(cli_progress_log_due(&l, s, 0, 0, 250));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_percent_rounds_down_and_reaches_100_only_when_done),
      cmocka_unit_test(test_percent_is_exact_for_huge_values),
      cmocka_unit_test(test_bytes_use_binary_units_with_three_digits),
      cmocka_unit_test(test_eta_is_unknown_without_a_rate_and_rounds_up),
      cmocka_unit_test(test_bar_at_0_percent_is_empty_with_an_unknown_eta),
      cmocka_unit_test(
          test_bar_at_100_percent_is_full_and_shows_the_time_taken),
      cmocka_unit_test(test_bar_in_the_middle_has_every_field),
      cmocka_unit_test(test_bar_is_never_full_before_done),
      cmocka_unit_test(test_bar_keeps_its_size_while_the_numbers_change),
      cmocka_unit_test(test_unknown_total_has_no_bar_percent_or_eta),
      cmocka_unit_test(test_bar_fits_every_width_dropping_fields_in_order),
      cmocka_unit_test(
          test_bar_without_a_label_keeps_every_field_in_120_columns),
    cmocka_unit_test(
        test_a_delta_shows_the_bytes_on_the_wire_and_the_bytes_saved),
      cmocka_unit_test(test_labels_lose_control_characters_in_both_forms),
      cmocka_unit_test(test_plain_form_has_no_bar_padding_or_cut),
      cmocka_unit_test(
          test_rate_starts_at_the_first_movement_and_falls_in_a_stall),
      cmocka_unit_test(
          test_rate_of_a_bursty_counter_is_its_mean_between_polls),
      cmocka_unit_test(test_rate_follows_a_change_within_the_window),
      cmocka_unit_test(test_rate_starts_over_when_the_counter_goes_back),
      cmocka_unit_test(
          test_plain_lines_on_state_changes_and_at_most_every_2s),
      cmocka_unit_test(test_plain_log_compares_long_states_as_stored),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
