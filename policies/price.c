/*
 * Prices (see price.h).
 */
#include "policies/price.h"

#include <math.h>

/* A double in (lo, hi], or [lo, hi] with closed_lo. */
static int
within(double v, double lo, double hi, int closed_lo)
{
  if (!isfinite(v))
    return 0;
  return (closed_lo ? v >= lo : v > lo) && v <= hi;
}

const char *
price_owned_problem(const struct price_owned *in)
{
  if (!within(in->capex_per_node, 0, 1e9, 0))
    return "capex_per_node: must be more than 0 and at most 1e9 dollars";
  if (in->nodes < 1 || in->nodes > 1000000)
    return "nodes: must be 1 to 1,000,000";
  if (!within(in->years, 0, 50, 0))
    return "years: must be more than 0 and at most 50";
  if (!within(in->support_per_year, 0, 1, 1))
    return "support_per_year: must be a fraction of capex, 0 to 1";
  if (!within(in->power_kw_busy, 0, 1000, 0))
    return "power_kw_busy: must be more than 0 and at most 1000 kW";
  if (!within(in->power_kw_idle, 0, 1000, 1))
    return "power_kw_idle: must be 0 to 1000 kW";
  if (in->power_kw_idle > in->power_kw_busy)
    return "power_kw_idle: must not be more than power_kw_busy";
  if (!within(in->pue, 1, 5, 1))
    return "pue: must be 1 to 5";
  if (!within(in->dollars_per_kwh, 0, 10, 1))
    return "dollars_per_kwh: must be 0 to 10";
  if (!within(in->staff_per_year, 0, 1e9, 1))
    return "staff_per_year: must be 0 to 1e9 dollars";
  if (in->gpus_per_node < 1 || in->gpus_per_node > 1024)
    return "gpus_per_node: must be 1 to 1024";
  return NULL;
}

/* Dollars a node-hour costs whatever it does: amortization, support and
 * its share of the staff. */
static double
fixed_per_node_hour(const struct price_owned *in)
{
  return in->capex_per_node / (in->years * PRICE_HOURS_PER_YEAR) +
         in->capex_per_node * in->support_per_year / PRICE_HOURS_PER_YEAR +
         in->staff_per_year / ((double)in->nodes * PRICE_HOURS_PER_YEAR);
}

/* Dollars of electricity a node-hour costs at kw. */
static double
power_per_node_hour(const struct price_owned *in, double kw)
{
  return kw * in->pue * in->dollars_per_kwh;
}

static int64_t
to_micro(double dollars)
{
  return (int64_t)llround(dollars * (double)PRICE_MICRO);
}

void
price_owned_rates(const struct price_owned *in, struct price_owned_rates *out)
{
  double g = (double)in->gpus_per_node;

  out->sunk_micro =
      to_micro((fixed_per_node_hour(in) +
                power_per_node_hour(in, in->power_kw_busy)) / g);
  out->marginal_micro =
      to_micro(power_per_node_hour(in, in->power_kw_busy - in->power_kw_idle) /
               g);
}

int64_t
price_owned_sunk_at(const struct price_owned *in, double utilization)
{
  double u = utilization;
  double kw;

  if (!(u >= 0.01))
    u = 0.01; /* (NaN too) below 1 %, the figure means nothing */
  if (u > 1)
    u = 1;
  kw = u * in->power_kw_busy + (1 - u) * in->power_kw_idle;
  return to_micro((fixed_per_node_hour(in) + power_per_node_hour(in, kw)) /
                  ((double)in->gpus_per_node * u));
}

int
price_dollars_to_micro(double dollars, int64_t max_micro, int64_t *out)
{
  double micro;

  if (!isfinite(dollars) || dollars < 0)
    return -1;
  micro = dollars * (double)PRICE_MICRO;
  if (micro > (double)max_micro)
    return -1;
  *out = (int64_t)llround(micro);
  return 0;
}

int64_t
price_charge(int64_t rate_micro, int64_t gpus, int64_t ms)
{
  __int128 c;
  int64_t p;

  if (rate_micro <= 0 || gpus <= 0 || ms <= 0)
    return 0;
  /* Most charges fit in 64 bits, whose division is several times
   * cheaper than a 128-bit one (a placement pass makes many). */
  if (!__builtin_mul_overflow(rate_micro, gpus, &p) &&
      !__builtin_mul_overflow(p, ms, &p))
    return p / 3600000;
  c = (__int128)rate_micro * gpus * ms / 3600000;
  return c > INT64_MAX ? INT64_MAX : (int64_t)c;
}

int64_t
price_egress(int64_t rate_micro, int64_t bytes)
{
  __int128 c;

  if (rate_micro <= 0 || bytes <= 0)
    return 0;
  c = (__int128)rate_micro * bytes / 1000000000;
  return c > INT64_MAX ? INT64_MAX : (int64_t)c;
}

/* The rate of series at t (-1 when it has none), and in *next the
 * first change after t, if it is before *next. */
static int64_t
rate_at(const struct price_series *series, int64_t t, int64_t *next)
{
  int64_t rate = -1;

  for (size_t i = 0; i < series->n; i++) {
    const struct price_period *p = &series->periods[i];

    if (p->from <= t) {
      rate = p->rate_micro < 0 ? -1 : p->rate_micro;
    } else {
      if (p->from < *next)
        *next = p->from;
      break;
    }
  }
  return rate;
}

size_t
price_bill_hold(const struct price_series *series, size_t nseries,
                const int64_t *cuts, size_t ncuts, int64_t t0_ms,
                int64_t t1_ms, int64_t gpus, int64_t min_billed_ms,
                struct price_bill *out, size_t max)
{
  size_t count = 0, c = 0;
  int64_t t = t0_ms;

  if (nseries > PRICE_SERIES_MAX)
    nseries = PRICE_SERIES_MAX;
  while (t < t1_ms) {
    struct price_bill piece = {.from_ms = t};
    int64_t next = t1_ms;

    while (c < ncuts && cuts[c] <= t)
      c++;
    if (c < ncuts && cuts[c] < next)
      next = cuts[c];
    for (size_t k = 0; k < PRICE_SERIES_MAX; k++)
      piece.rate_micro[k] = k < nseries ? rate_at(&series[k], t, &next) : -1;
    piece.to_ms = next;
    piece.billed_ms = next - t;
    if (count < max)
      out[count] = piece;
    count++;
    t = next;
  }
  /* the minimum: the shortfall at the last piece's rates */
  if (count > 0 && count <= max && t1_ms - t0_ms < min_billed_ms)
    out[count - 1].billed_ms += min_billed_ms - (t1_ms - t0_ms);
  for (size_t i = 0; i < count && i < max; i++) {
    for (size_t k = 0; k < PRICE_SERIES_MAX; k++)
      out[i].cost_micro[k] =
          price_charge(out[i].rate_micro[k], gpus, out[i].billed_ms);
  }
  return count;
}
