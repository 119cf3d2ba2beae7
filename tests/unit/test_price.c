/*
 * Tests for policies/price.c: an owned site's rates from its finance
 * inputs (numbers computed by hand below), its sunk cost at a
 * utilization, dollars to micro-dollars, charges that steps add up to
 * exactly, and a hold cut where the price changes and billed
 * piecewise, at least the billing minimum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "policies/price.h"

/* The example: 12 nodes of 8 GPUs at $350,000, 4 years, 10 %
 * support a year, 7 / 2 kW, PUE 1.4, $0.09 per kWh, $40,000 of staff. */
static struct price_owned
example(void)
{
  struct price_owned o = {
      .capex_per_node = 350000, .nodes = 12, .years = 4,
      .support_per_year = 0.10, .power_kw_busy = 7.0, .power_kw_idle = 2.0,
      .pue = 1.4, .dollars_per_kwh = 0.09, .staff_per_year = 40000,
      .gpus_per_node = 8};

  return o;
}

static void
test_owned_rates_split_sunk_from_marginal(void **state)
{
  struct price_owned o = example();
  struct price_owned_rates r;

  (void)state;
  assert_null(price_owned_problem(&o));
  price_owned_rates(&o, &r);
  /* per node-hour: 350000 / (4 x 8760) = 9.988584 amortization,
   * 35000 / 8760 = 3.995434 support, 40000 / (12 x 8760) = 0.380518
   * staff, 7 x 1.4 x 0.09 = 0.882 power: 15.246536; per GPU 1.905817 */
  assert_int_equal(r.sunk_micro, 1905817);
  /* (7 - 2) x 1.4 x 0.09 / 8 = 0.07875 */
  assert_int_equal(r.marginal_micro, 78750);
}

static void
test_sunk_cost_of_a_used_hour_grows_as_utilization_falls(void **state)
{
  struct price_owned o = example();

  (void)state;
  assert_int_equal(price_owned_sunk_at(&o, 1.0), 1905817);
  /* half busy: power 4.5 kW x 1.4 x 0.09 = 0.567; (14.364536 + 0.567)
   * / (8 x 0.5) = 3.732884 */
  assert_int_equal(price_owned_sunk_at(&o, 0.5), 3732884);
  /* out of range: above 1 is 1, below 1 % (and NaN) is 1 % */
  assert_int_equal(price_owned_sunk_at(&o, 1.5), 1905817);
  assert_int_equal(price_owned_sunk_at(&o, 0), price_owned_sunk_at(&o, 0.01));
  assert_int_equal(price_owned_sunk_at(&o, NAN),
                   price_owned_sunk_at(&o, 0.01));
}

static void
test_each_unusable_owned_input_is_named(void **state)
{
  static const struct {
    size_t off;     /* a double field, or SIZE_MAX for the ints below */
    double value;
    const char *field;
  } bad[] = {
      {offsetof(struct price_owned, capex_per_node), 0, "capex_per_node"},
      {offsetof(struct price_owned, capex_per_node), NAN, "capex_per_node"},
      {offsetof(struct price_owned, years), -4, "years"},
      {offsetof(struct price_owned, support_per_year), 10, "support_per_year"},
      {offsetof(struct price_owned, power_kw_busy), INFINITY, "power_kw_busy"},
      {offsetof(struct price_owned, power_kw_idle), 8, "power_kw_idle"},
      {offsetof(struct price_owned, pue), 0.9, "pue"},
      {offsetof(struct price_owned, dollars_per_kwh), -0.01, "dollars_per_kwh"},
      {offsetof(struct price_owned, staff_per_year), -1, "staff_per_year"},
  };
  struct price_owned o;
  const char *why;

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    o = example();
    memcpy((char *)&o + bad[i].off, &bad[i].value, sizeof(double));
    why = price_owned_problem(&o);
    if (why == NULL || strncmp(why, bad[i].field, strlen(bad[i].field)) != 0)
      fail_msg("case %zu: '%s' does not name %s", i, why ? why : "(null)",
               bad[i].field);
  }
  o = example();
  o.nodes = 0;
  assert_string_equal(price_owned_problem(&o), "nodes: must be 1 to 1,000,000");
  o = example();
  o.gpus_per_node = 0;
  assert_non_null(strstr(price_owned_problem(&o), "gpus_per_node"));
}

static void
test_dollars_become_micro_dollars_within_the_bound(void **state)
{
  int64_t m = -1;

  (void)state;
  assert_int_equal(price_dollars_to_micro(6.88, PRICE_MAX_MICRO, &m), 0);
  assert_int_equal(m, 6880000);
  assert_int_equal(price_dollars_to_micro(1.006, PRICE_MAX_MICRO, &m), 0);
  assert_int_equal(m, 1006000);
  assert_int_equal(price_dollars_to_micro(0, PRICE_MAX_MICRO, &m), 0);
  assert_int_equal(m, 0);
  assert_int_equal(price_dollars_to_micro(10000, PRICE_MAX_MICRO, &m), 0);
  assert_int_equal(price_dollars_to_micro(10000.01, PRICE_MAX_MICRO, &m),
                   -1);
  assert_int_equal(price_dollars_to_micro(-0.5, PRICE_MAX_MICRO, &m), -1);
  assert_int_equal(price_dollars_to_micro(NAN, PRICE_MAX_MICRO, &m), -1);
  assert_int_equal(price_dollars_to_micro(INFINITY, PRICE_MAX_MICRO, &m), -1);
}

static void
test_charges_round_down_and_steps_add_up_to_the_whole(void **state)
{
  int64_t billed = 0, held = 0;
  /* uneven steps (ms), as a ledger accruing about once a minute would */
  static const int64_t steps[] = {1, 59999, 61003, 7, 3600000, 13, 86400000,
                                  1};

  (void)state;
  /* an hour of 8 GPUs at $1.905817 */
  assert_int_equal(price_charge(1905817, 8, 3600000), 15246536);
  /* one GPU-second: 529.39 micro-dollars, rounded down */
  assert_int_equal(price_charge(1905817, 1, 1000), 529);
  assert_int_equal(price_charge(1905817, 1, 0), 0);
  assert_int_equal(price_charge(-5, 1, 10), 0);
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    held += steps[i];
    billed += price_charge(6880000, 8, held) -
              price_charge(6880000, 8, held - steps[i]);
  }
  assert_int_equal(billed, price_charge(6880000, 8, held));
  /* a year of 100,000 GPUs at the highest price fits; more saturates */
  assert_int_equal(
      price_charge(PRICE_MAX_MICRO, 100000, 8760LL * 3600 * 1000),
      8760000000000000000LL);
  assert_int_equal(
      price_charge(PRICE_MAX_MICRO, 1000000, 8760LL * 3600 * 1000),
      INT64_MAX);
}

/* A hold against one series and no cuts. */
static size_t
bill1(const struct price_period *p, size_t n, int64_t t0, int64_t t1,
      int64_t gpus, int64_t min_ms, struct price_bill *out, size_t max)
{
  struct price_series s = {p, n};

  return price_bill_hold(&s, 1, NULL, 0, t0, t1, gpus, min_ms, out, max);
}

static void
test_egress_is_charged_per_gb_rounded_down(void **state)
{
  (void)state;
  assert_int_equal(price_egress(90000, 1000000000), 90000); /* $0.09 */
  assert_int_equal(price_egress(90000, 1500000000), 135000);
  assert_int_equal(price_egress(90000, 11111), 0);      /* 0.99 micro */
  assert_int_equal(price_egress(90000, 11112), 1);
  assert_int_equal(price_egress(-1, 5), 0);
  assert_int_equal(price_egress(PRICE_MAX_MICRO, INT64_MAX), INT64_MAX);
}

static void
test_a_hold_is_cut_where_the_price_changes(void **state)
{
  static const struct price_period p[] = {
      {1000, 6880000}, {5000, 3100000}, {8000, 7000000}};
  struct price_bill out[4];

  (void)state;
  /* before the first price: a piece without one */
  assert_int_equal(bill1(p, 3, 0, 6000, 1, 0, out, 4), 3);
  assert_int_equal(out[0].from_ms, 0);
  assert_int_equal(out[0].to_ms, 1000);
  assert_int_equal(out[0].rate_micro[0], -1);
  assert_int_equal(out[0].cost_micro[0], 0);
  assert_int_equal(out[1].from_ms, 1000);
  assert_int_equal(out[1].to_ms, 5000);
  assert_int_equal(out[1].rate_micro[0], 6880000);
  assert_int_equal(out[2].from_ms, 5000);
  assert_int_equal(out[2].to_ms, 6000);
  assert_int_equal(out[2].rate_micro[0], 3100000);
  /* the unused second series has no price */
  assert_int_equal(out[2].rate_micro[1], -1);
  /* inside one period; the last one runs on */
  assert_int_equal(bill1(p, 3, 5500, 5600, 1, 0, out, 4), 1);
  assert_int_equal(out[0].rate_micro[0], 3100000);
  assert_int_equal(bill1(p, 3, 9000, 99999, 1, 0, out, 4), 1);
  assert_int_equal(out[0].rate_micro[0], 7000000);
  /* too little room: the count says how much is needed */
  memset(out, 0, sizeof(out));
  assert_int_equal(bill1(p, 3, 1000, 10000, 1, 0, out, 1), 3);
  assert_int_equal(out[0].to_ms, 5000);
  assert_int_equal(out[1].from_ms, 0);
  /* empty and reversed intervals; no prices at all is one piece */
  assert_int_equal(bill1(p, 3, 7000, 7000, 1, 0, out, 4), 0);
  assert_int_equal(bill1(p, 3, 7000, 6000, 1, 0, out, 4), 0);
  assert_int_equal(bill1(p, 0, 0, 6000, 1, 0, out, 4), 1);
  assert_int_equal(out[0].rate_micro[0], -1);
}

static void
test_a_hold_is_billed_piecewise_and_at_least_the_minimum(void **state)
{
  /* $6.88, then $3.10 from 1 h, then no price from 2 h, $7 from 3 h */
  static const struct price_period p[] = {{0, 6880000},
                                          {3600000, 3100000},
                                          {7200000, -1},
                                          {10800000, 7000000}};
  struct price_bill out[4];

  (void)state;
  /* 8 GPUs from 0:30 to 3:30: half an hour at $6.88, an hour at $3.10,
   * the unpriced hour at nothing, half an hour at $7 */
  assert_int_equal(bill1(p, 4, 1800000, 12600000, 8, 0, out, 4), 4);
  assert_int_equal(out[0].from_ms, 1800000);
  assert_int_equal(out[0].cost_micro[0], 27520000); /* 6.88 x 8 / 2 */
  assert_int_equal(out[1].cost_micro[0], 24800000); /* 3.10 x 8 */
  assert_int_equal(out[1].billed_ms, 3600000); /* over the minimum: as held */
  assert_int_equal(out[2].rate_micro[0], -1);
  assert_int_equal(out[2].cost_micro[0], 0);
  assert_int_equal(out[3].from_ms, 10800000);
  assert_int_equal(out[3].cost_micro[0], 28000000); /* 7.00 x 8 / 2 */
  /* 10 s of one GPU with a 60 s minimum: 60 s at $6.88 an hour */
  assert_int_equal(bill1(p, 4, 0, 10000, 1, 60000, out, 4), 1);
  assert_int_equal(out[0].billed_ms, 60000);
  assert_int_equal(out[0].cost_micro[0], 114666);
  /* across a change, the shortfall goes at the last piece's rate */
  assert_int_equal(bill1(p, 4, 3590000, 3600000 + 20000, 1, 60000, out, 4),
                   2);
  assert_int_equal(out[0].billed_ms, 10000);
  assert_int_equal(out[1].billed_ms, 50000);
  /* only unpriced time: the minimum bills nothing */
  assert_int_equal(bill1(p, 4, 7300000, 7400000, 1, 60000, out, 4), 1);
  assert_int_equal(out[0].cost_micro[0], 0);
}

static void
test_two_series_and_midnight_cut_one_hold_together(void **state)
{
  /* sunk $2.00 all along; marginal $0.10, then $0.20 from 1:00 */
  static const struct price_period sunk[] = {{0, 2000000}};
  static const struct price_period marg[] = {{0, 100000}, {3600000, 200000}};
  const struct price_series s[2] = {{sunk, 1}, {marg, 2}};
  const int64_t cuts[] = {1800000, 5400000}; /* two "midnights" */
  struct price_bill out[8];

  (void)state;
  /* 4 GPUs from 0:00 to 2:00: cut at 0:30, 1:00 (marginal), 1:30 */
  assert_int_equal(price_bill_hold(s, 2, cuts, 2, 0, 7200000, 4, 0, out, 8),
                   4);
  assert_int_equal(out[0].to_ms, 1800000);
  assert_int_equal(out[1].to_ms, 3600000);
  assert_int_equal(out[2].to_ms, 5400000);
  assert_int_equal(out[3].to_ms, 7200000);
  /* each half hour: sunk 2.00 x 4 / 2 = $4 */
  for (int i = 0; i < 4; i++)
    assert_int_equal(out[i].cost_micro[0], 4000000);
  assert_int_equal(out[0].cost_micro[1], 200000); /* 0.10 x 4 / 2 */
  assert_int_equal(out[2].cost_micro[1], 400000); /* 0.20 x 4 / 2 */
  assert_int_equal(out[3].rate_micro[1], 200000);
  /* a cut before the hold is skipped; one at its start cuts nothing */
  assert_int_equal(price_bill_hold(s, 2, cuts, 2, 1800000, 2000000, 4, 0,
                                   out, 8), 1);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_owned_rates_split_sunk_from_marginal),
      cmocka_unit_test(
          test_sunk_cost_of_a_used_hour_grows_as_utilization_falls),
      cmocka_unit_test(test_each_unusable_owned_input_is_named),
      cmocka_unit_test(test_dollars_become_micro_dollars_within_the_bound),
      cmocka_unit_test(test_charges_round_down_and_steps_add_up_to_the_whole),
      cmocka_unit_test(test_egress_is_charged_per_gb_rounded_down),
      cmocka_unit_test(test_a_hold_is_cut_where_the_price_changes),
      cmocka_unit_test(
          test_a_hold_is_billed_piecewise_and_at_least_the_minimum),
      cmocka_unit_test(test_two_series_and_midnight_cut_one_hold_together),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
