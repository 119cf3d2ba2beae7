/*
 * Prices: what a GPU-hour costs at a site, and what an interval of use
 * costs at a rate.  Pure: no I/O, no allocation, libc only (DESIGN.md
 * "policies/").
 *
 * Money is integer micro-dollars (int64_t, "_micro"): a rate is a whole
 * number of micro-dollars per GPU-hour, and a charge is derived from it
 * with integer arithmetic only, so no floating point decides what anyone
 * is billed.  The one place a float enters is an owned site's rate,
 * derived once from the finance inputs of its config and rounded to the
 * nearest micro-dollar; the rate is then shown and billed as that
 * integer.
 *
 * An owned site's GPU-hour is mostly sunk (bought, supported, staffed
 * whether or not it runs) and almost free at the margin (the power that
 * running draws over idling): the rates below keep the two apart.
 */
#ifndef TENBIN_POLICIES_PRICE_H
#define TENBIN_POLICIES_PRICE_H

#include <stddef.h>
#include <stdint.h>

#define PRICE_MICRO 1000000LL         /* micro-dollars per dollar */
/* The most a GPU-hour or a GB of egress may cost: $10,000.  Anything
 * above is a typo (a price per month, or in cents), not a price. */
#define PRICE_MAX_MICRO (10000LL * PRICE_MICRO)
#define PRICE_HOURS_PER_YEAR 8760.0

/* An owned site's finance inputs (its config's "cost": {"owned": ...}). */
struct price_owned {
  double capex_per_node;   /* $ paid per node, network and storage share in */
  int64_t nodes;
  double years;            /* amortization */
  double support_per_year; /* support and maintenance, fraction of capex */
  double power_kw_busy;    /* per node, running jobs */
  double power_kw_idle;    /* per node, idle */
  double pue;              /* facility power over IT power, >= 1 */
  double dollars_per_kwh;
  double staff_per_year;   /* $ a year of operations staff, whole site */
  int64_t gpus_per_node;
};

/* What an owned site's GPU-hour costs, micro-dollars. */
struct price_owned_rates {
  int64_t sunk_micro;     /* per GPU-hour at 100 % use: amortization,
                             support, staff and busy power */
  int64_t marginal_micro; /* per GPU-hour run rather than left idle: the
                             power running draws over idling */
};

/*
 * NULL when in is usable, else what is wrong, naming the field as in the
 * config ("years: must be more than 0"; static string).
 */
const char *price_owned_problem(const struct price_owned *in);
/* The rates of a usable in (price_owned_problem gave NULL). */
void price_owned_rates(const struct price_owned *in,
                       struct price_owned_rates *out);
/*
 * The sunk cost of a GPU-hour that ran, micro-dollars, when the site is
 * busy a fraction utilization (0, 1] of the time: the site costs the
 * same whether it runs or not, so the hours that run carry the idle
 * ones.  At 1 it is sunk_micro; below 0.01 (or NaN) it is taken as 0.01.
 */
int64_t price_owned_sunk_at(const struct price_owned *in, double utilization);

/* A whole-dollar amount from config into micro-dollars: 0 and *out set,
 * or -1 for NaN, infinity, a negative amount or one above max_micro. */
int price_dollars_to_micro(double dollars, int64_t max_micro, int64_t *out);

/*
 * The charge of gpus GPUs held for ms milliseconds at rate_micro per
 * GPU-hour, micro-dollars, rounded down (never more than the rate says).
 * Exact up to a year of 100,000 GPUs at PRICE_MAX_MICRO; INT64_MAX
 * beyond, and 0 for a negative input.  A ledger that accrues an interval
 * in steps bills each step as the charge of the whole interval so far
 * minus what it billed before, so the steps add up to this, to the
 * micro-dollar.
 */
int64_t price_charge(int64_t rate_micro, int64_t gpus, int64_t ms);

/* The charge of bytes of egress at rate_micro per GB (10^9 bytes),
 * rounded down (INT64_MAX past it); 0 for a negative input. */
int64_t price_egress(int64_t rate_micro, int64_t bytes);

/* A rate in force from a time on (milliseconds), until the next one;
 * a negative rate_micro: no price from then on. */
struct price_period {
  int64_t from;
  int64_t rate_micro;
};

/* One rate history: n periods sorted by from, each from distinct. */
struct price_series {
  const struct price_period *periods; /* borrowed */
  size_t n;
};

/* An owned site bills two series at once (sunk and marginal). */
#define PRICE_SERIES_MAX 2

/* A piece of a hold, billed. */
struct price_bill {
  int64_t from_ms, to_ms;  /* the piece of the hold */
  int64_t billed_ms;       /* to_ms - from_ms, or more on the last piece
                              of a hold shorter than the minimum */
  int64_t rate_micro[PRICE_SERIES_MAX]; /* per series; -1: no price */
  int64_t cost_micro[PRICE_SERIES_MAX]; /* price_charge of billed_ms */
};

/*
 * Bill gpus GPUs held over [t0_ms, t1_ms) against nseries (at most
 * PRICE_SERIES_MAX) rate histories at once: the hold is cut where any
 * series' rate changes and at each of the ncuts times in cuts (sorted;
 * a ledger cuts at midnight so that days add up), and each piece is
 * charged at each series' rate.  Time before a series' first period or
 * in a period of negative rate has no price in that series (rate -1,
 * cost 0) but is still a piece: the hours were held.  A hold shorter
 * than min_billed_ms (a rented site's billing minimum) is billed that
 * long, the shortfall at its last piece's rates.  Writes at most max
 * pieces into out and returns how many the hold has (more than max: call
 * again with room).  A price change never rewrites history: a hold
 * across one is billed piecewise.
 */
size_t price_bill_hold(const struct price_series *series, size_t nseries,
                       const int64_t *cuts, size_t ncuts, int64_t t0_ms,
                       int64_t t1_ms, int64_t gpus, int64_t min_billed_ms,
                       struct price_bill *out, size_t max);

#endif
