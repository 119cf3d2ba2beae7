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

  if (rate_micro <= 0 || gpus <= 0 || ms <= 0)
    return 0;
  c = (__int128)rate_micro * gpus * ms / 3600000;
  return c > INT64_MAX ? INT64_MAX : (int64_t)c;
}

/* The part of [t0, t1) that period i of n covers, as [*a, *b): 0 when
 * it covers none. */
static int
clip(const struct price_period *periods, size_t n, size_t i, int64_t t0,
     int64_t t1, int64_t *a, int64_t *b)
{
  int64_t to = i + 1 < n ? periods[i + 1].from : INT64_MAX;

  *a = periods[i].from > t0 ? periods[i].from : t0;
  *b = to < t1 ? to : t1;
  return *a < *b;
}

size_t
price_bill_hold(const struct price_period *periods, size_t n, int64_t t0_ms,
                int64_t t1_ms, int64_t gpus, int64_t min_billed_ms,
                struct price_bill *out, size_t max)
{
  size_t count = 0;
  int64_t held = 0, a, b;

  for (size_t i = 0; i < n; i++) {
    if (!clip(periods, n, i, t0_ms, t1_ms, &a, &b) ||
        periods[i].rate_micro < 0)
      continue;
    if (count < max)
      out[count] = (struct price_bill){a, b, b - a, periods[i].rate_micro,
                                       0};
    held += b - a;
    count++;
  }
  /* the minimum: the shortfall at the last piece's rate */
  if (count > 0 && count <= max && held < min_billed_ms)
    out[count - 1].billed_ms += min_billed_ms - held;
  for (size_t k = 0; k < count && k < max; k++)
    out[k].cost_micro =
        price_charge(out[k].rate_micro, gpus, out[k].billed_ms);
  return count;
}
