/*
 * The "cost" placement policy: for every site that can run a job, its
 * predicted start and what running there costs (compute $ + data $ +
 * waiting $), and the site of the least total.  The model is in
 * placement.h; whether a site fits at all is placement__judge's, as for
 * first-fit.  Pure: no I/O, no allocation, no clock (now_ms is the
 * caller's).  Money is integer micro-dollars, and rate x GPUs x time
 * goes through price_charge only.
 *
 * A decision is numbers first (placement_cost_decide, asked for every
 * job of a pass, so it formats nothing) and words on demand
 * (placement_cost_explain).
 */
#include "placement_internal.h"
#include "price.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define BYTES_PER_GB 1000000000LL
/* A ranked candidate scores minus its total in dollars (above -1e13);
 * one left out scores below all of them. */
#define SCORE_EXCLUDED (-1e15)

static int64_t
max64(int64_t a, int64_t b)
{
  return a > b ? a : b;
}

/* a x b / c for non-negative a, b and positive c, rounded up or down;
 * in 128 bits only when 64 do not hold it (a call, and slower). */
static int64_t
muldiv(int64_t a, int64_t b, int64_t c, int up)
{
  int64_t p;
  __int128 q;

  if (!__builtin_mul_overflow(a, b, &p) &&
      !__builtin_add_overflow(p, up ? c - 1 : 0, &p))
    return p / c;
  q = ((__int128)a * b + (up ? c - 1 : 0)) / c;
  return q > INT64_MAX ? INT64_MAX : (int64_t)q;
}

/*
 * When the type has need GPUs free: now when free covers them, else at
 * the first running job's end by which it does.  Past the last known
 * end the type turns over once per runtime; without a runtime the start
 * is unknown, INT64_MAX.
 */
static int64_t
capacity_at(int64_t now, int64_t free, const struct placement_cost_pool *pool,
            int64_t need, int64_t total, int64_t runtime)
{
  int64_t last = now, have = free, waves;

  if (free >= need)
    return now;
  if (pool != NULL && pool->ends != NULL && pool->nends > 0) {
    const struct placement_end *ends = pool->ends;
    size_t lo = 0, hi = pool->nends;

    /* A long queue ahead outruns every end: no need to search. */
    if (free + ends[hi - 1].freed < need)
      lo = hi;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;

      if (free + ends[mid].freed >= need)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo < pool->nends)
      return max64(now, ends[lo].end_ms);
    last = max64(now, ends[pool->nends - 1].end_ms);
    have = free + ends[pool->nends - 1].freed;
  }
  if (runtime <= 0)
    return INT64_MAX; /* no runtime, no guess: start unknown */
  total = total > 0 ? total : 1;
  waves = need - have <= total ? 1 : (need - have + total - 1) / total;
  return placement__sat_add(last, placement__sat_mul(waves, runtime));
}

/* A site at its job cap starts nothing before a running job ends: the
 * first known end, else one runtime from now (unknown without one). */
static int64_t
first_end(const struct placement_cost_site *cs, int npools, int64_t now,
          int64_t runtime)
{
  int64_t first = INT64_MAX;

  for (int k = 0; cs != NULL && k < npools && k < PLACEMENT_MAX_POOLS; k++) {
    const struct placement_cost_pool *p = &cs->pools[k];

    if (p->ends != NULL && p->nends > 0 && p->ends[0].end_ms < first)
      first = p->ends[0].end_ms;
  }
  if (first == INT64_MAX)
    return runtime > 0 ? placement__sat_add(now, runtime) : INT64_MAX;
  return max64(now, first);
}

static const struct placement_reservation *
reservation_at(const struct placement_cost *cost, int site, const char *type)
{
  for (size_t k = 0; k < cost->nreservations; k++) {
    const struct placement_reservation *r = &cost->reservations[k];

    if (r->site == site && placement__same_type(r->type, type))
      return r;
  }
  return NULL;
}

/* What one decision carries from site to site. */
#define RATES_KEPT 4
struct scan {
  uint64_t reserved;  /* bit i: a reservation names site i */
  int64_t runtime;    /* the job's predicted runtime, 0 when not given */
  int64_t dearest;    /* the dearest priced rate seen; -1: none */
  /* The compute $ of the first few rates: the sites of a provider share
   * one, and price_charge divides in 128 bits. */
  int nrates;
  int64_t rate[RATES_KEPT];
  int64_t charge[RATES_KEPT];
};

_Static_assert(PLACEMENT_MAX_SITES <= 64, "struct scan's reserved bits");

static int64_t
compute_charge(struct scan *scan, int64_t rate, int64_t gpus,
               int64_t runtime)
{
  int64_t charge;

  for (int i = 0; i < scan->nrates; i++) {
    if (scan->rate[i] == rate)
      return scan->charge[i];
  }
  charge = price_charge(rate, gpus, runtime);
  if (scan->nrates < RATES_KEPT) {
    scan->rate[scan->nrates] = rate;
    scan->charge[scan->nrates++] = charge;
  }
  if (rate > scan->dearest)
    scan->dearest = rate;
  return charge;
}

/* The rate the job pays at pool: spot where the site has it and the job
 * may take it. */
static int64_t
pool_rate(const struct placement_cost_pool *pool,
          const struct placement_cost *k)
{
  return k->spot_ok && pool->spot_priced ? pool->spot_rate_micro
                                         : pool->rate_micro;
}

/* The GPUs a job that needs growth is billed for: the free ones it
 * takes, and whole new nodes for the rest, since a node is rented whole
 * and nothing says another job will share it. */
static int64_t
grown_gpus(const struct placement__fit *fit)
{
  int64_t free = fit->free > 0 ? fit->free : 0, rest = fit->gpus - free;

  if (fit->node_max <= 0 || rest <= 0)
    return fit->gpus;
  return placement__sat_add(
      free, placement__sat_mul((rest + fit->node_max - 1) / fit->node_max,
                               fit->node_max));
}

/* c for a site left out by its fit: what it is, no terms. */
static void
left_out(struct placement_candidate *c, enum placement_excluded why)
{
  c->excluded = why;
  c->priced = 0;
  c->held = 0;
  c->grows = 0;
  c->start_ms = -1;
  c->compute_micro = -1;
  c->data_micro = -1;
  c->waiting_micro = -1;
  c->total_micro = -1;
}

/*
 * Site i's start and terms for the job into c, fit being the request's
 * (placement__fit_init), all but the compute $ of an unpriced type: that
 * needs every site's rate (rank_again).
 */
static void
estimate(const struct placement_request *req,
         const struct placement_site *site, int i,
         const struct placement_cost *k, struct placement__fit *fit,
         struct placement_candidate *c, struct scan *scan)
{
  const struct placement_cost_site *cs = k->sites ? &k->sites[i] : NULL;
  const struct placement_cost_pool *pool = NULL;
  const struct placement_reservation *res = NULL;
  int64_t runtime = scan->runtime, transfer = 0, ahead = 0, earliest, cap;

  placement__judge(req, site, fit);
  c->site = site->name;
  c->verdict = fit->verdict;
  c->score = SCORE_EXCLUDED;
  c->reason[0] = '\0';
  c->index = i;
  c->runtime_ms = runtime;
  c->type = fit->pool >= 0 ? site->pools[fit->pool].type : NULL;
  if (fit->verdict == PLACEMENT_NEVER || fit->why == PLACEMENT__UNKNOWN ||
      fit->why == PLACEMENT__CLOSED || fit->why == PLACEMENT__UNREACHABLE) {
    left_out(c, PLACEMENT_EXCLUDED_SITE);
    return;
  }
  if (cs != NULL && fit->pool >= 0)
    pool = &cs->pools[fit->pool];
  c->data_micro = 0;
  if (k->data != NULL && k->data[i].missing_bytes > 0) {
    const struct placement_data *d = &k->data[i];

    if (d->bytes_per_s <= 0) {
      left_out(c, PLACEMENT_EXCLUDED_DATA);
      return;
    }
    transfer = muldiv(d->missing_bytes, 1000, d->bytes_per_s, 1);
    c->data_micro = muldiv(d->missing_bytes, max64(d->egress_micro_per_gb, 0),
                           BYTES_PER_GB, 0);
  }
  c->excluded = PLACEMENT_RANKED;
  c->priced = 1;
  c->grows = fit->why == PLACEMENT__GROWS;
  if (fit->gpus <= 0)
    c->compute_micro = 0;
  else if (pool != NULL && pool->priced && c->grows)
    c->compute_micro = price_charge(pool_rate(pool, k), grown_gpus(fit),
                                    runtime);
  else if (pool != NULL && pool->priced)
    c->compute_micro =
        compute_charge(scan, pool_rate(pool, k), fit->gpus, runtime);
  else
    c->priced = 0;

  earliest =
      placement__sat_add(k->now_ms, max64(cs ? cs->boot_ms : 0, transfer));
  if (c->grows && cs != NULL)
    earliest = max64(earliest, placement__sat_add(k->now_ms, cs->grow_ms));
  if (pool != NULL && pool->ahead_gpus > 0)
    ahead = pool->ahead_gpus;
  cap = k->now_ms;
  if (fit->verdict != PLACEMENT_NOW && !c->grows)
    cap = capacity_at(k->now_ms, fit->free, pool, ahead + fit->gpus,
                      fit->total, runtime);
  if (fit->why == PLACEMENT__JOB_CAP)
    cap = max64(cap, first_end(cs, site->npools, k->now_ms, runtime));
  /* Passing the oldest waiting job is allowed only by ending first. */
  if ((scan->reserved >> i & 1) && c->type != NULL)
    res = reservation_at(k, i, c->type);
  c->held = res != NULL && cap <= res->start_ms &&
            placement__sat_add(max64(cap, earliest), runtime) > res->start_ms;
  if (c->held) {
    c->verdict = PLACEMENT_WAIT;
    cap = capacity_at(k->now_ms, fit->free, pool, ahead + fit->gpus,
                      fit->total, runtime);
    cap = max64(cap, res->start_ms);
  }
  c->start_ms = max64(cap, earliest);
  c->waiting_micro = price_charge(k->wait_value_micro, fit->gpus,
                                  c->start_ms - k->now_ms);
}

/* a ranks before b: less total, then earlier start, then room now. */
static int
ranks_before(const struct placement_candidate *a,
             const struct placement_candidate *b)
{
  if (a->total_micro != b->total_micro)
    return a->total_micro < b->total_micro;
  if (a->start_ms != b->start_ms)
    return a->start_ms < b->start_ms;
  return a->verdict == PLACEMENT_NOW && b->verdict != PLACEMENT_NOW;
}

/* c's total and score, with unpriced the compute $ of an unpriced type
 * (-1: unknown). */
static void
finish(struct placement_candidate *c, int64_t unpriced)
{
  if (!c->priced)
    c->compute_micro = unpriced;
  c->total_micro = placement__sat_add(
      placement__sat_add(max64(c->compute_micro, 0), c->data_micro),
      c->waiting_micro);
  c->score = -(double)c->total_micro * (1.0 / (double)PRICE_MICRO);
}

/*
 * Rank again once every site is seen: the compute $ of an unpriced type
 * needs the dearest rate, and a deadline leaves a site out only when
 * another starts in time.  The best candidate's position, or -1.
 */
static int
rank_again(struct placement_decision *out, const struct placement_cost *k,
           int64_t unpriced)
{
  int in_time = 0, best = -1;

  for (size_t n = 0; n < out->ncandidates && k->deadline_ms > 0; n++) {
    const struct placement_candidate *c = &out->candidates[n];

    if (c->excluded == PLACEMENT_RANKED && c->start_ms <= k->deadline_ms)
      in_time = 1;
  }
  for (size_t n = 0; n < out->ncandidates; n++) {
    struct placement_candidate *c = &out->candidates[n];

    if (c->excluded != PLACEMENT_RANKED)
      continue;
    finish(c, unpriced);
    if (in_time && c->start_ms > k->deadline_ms) {
      c->excluded = PLACEMENT_EXCLUDED_DEADLINE;
      c->score = SCORE_EXCLUDED;
      continue;
    }
    if (best < 0 || ranks_before(c, &out->candidates[best]))
      best = (int)n;
  }
  return best;
}

void
placement_cost_decide(const struct placement_request *req,
                      const struct placement_site *sites, size_t nsites,
                      const struct placement_cost *cost,
                      struct placement_decision *out)
{
  static const struct placement_cost none;
  const struct placement_cost *k = cost != NULL ? cost : &none;
  struct scan scan = {.dearest = -1};
  struct placement__fit fit;
  int best = -1, waits = 0, again = k->deadline_ms > 0;

  out->verdict = PLACEMENT_NEVER;
  out->site = -1;
  out->pick = -1;
  out->reason[0] = '\0';
  out->ncandidates = 0;
  if (nsites > PLACEMENT_MAX_SITES)
    nsites = PLACEMENT_MAX_SITES;
  scan.runtime = k->runtime_ms > 0 ? k->runtime_ms : 0;
  placement__fit_init(req, &fit);
  for (size_t r = 0; r < k->nreservations; r++) {
    if (k->reservations[r].site >= 0 &&
        k->reservations[r].site < PLACEMENT_MAX_SITES)
      scan.reserved |= 1ULL << k->reservations[r].site;
  }
  /* One pass ranks every site, unless a site is unpriced or there is a
   * deadline (rank_again); the candidates are not read twice. */
  for (size_t i = 0; i < nsites; i++) {
    struct placement_candidate *c;

    if (placement__pinned_out(req, &sites[i]))
      continue;
    c = &out->candidates[out->ncandidates++];
    estimate(req, &sites[i], (int)i, k, &fit, c, &scan);
    if (c->verdict != PLACEMENT_NEVER)
      waits = 1;
    if (c->excluded != PLACEMENT_RANKED || again)
      continue;
    if (!c->priced) {
      again = 1;
      continue;
    }
    finish(c, -1);
    if (best < 0 || ranks_before(c, &out->candidates[best]))
      best = (int)out->ncandidates - 1;
  }
  /* An unknown price is never $0: it is the dearest one known. */
  if (again)
    best = rank_again(out, k,
                      scan.dearest >= 0
                          ? price_charge(scan.dearest, fit.gpus, scan.runtime)
                          : -1);
  if (best >= 0) {
    out->pick = out->candidates[best].index;
    out->verdict = out->candidates[best].verdict;
    if (out->verdict == PLACEMENT_NOW)
      out->site = out->pick;
  } else if (waits) {
    out->verdict = PLACEMENT_WAIT;
  }
}

/* "$12.345678", or "unknown" for -1 (no price known anywhere). */
static void
fmt_money(int64_t micro, char *out, size_t len)
{
  if (micro < 0)
    snprintf(out, len, "unknown");
  else
    snprintf(out, len, "$%lld.%06lld", (long long)(micro / PRICE_MICRO),
             (long long)(micro % PRICE_MICRO));
}

/* When at is, seen from now: "now", "in 45s", "in 12m", "in 1h05m",
 * "in 2d03h", or "at a time unknown" (INT64_MAX). */
static void
fmt_in(int64_t at, int64_t now, char *out, size_t len)
{
  long long s;

  if (at == INT64_MAX) {
    snprintf(out, len, "at a time unknown");
    return;
  }
  s = (long long)((at - now) / 1000);
  if (at <= now)
    snprintf(out, len, "now");
  else if (s < 60)
    snprintf(out, len, "in %llds", s);
  else if (s < 3600)
    snprintf(out, len, "in %lldm", s / 60);
  else if (s < 86400)
    snprintf(out, len, "in %lldh%02lldm", s / 3600, s / 60 % 60);
  else
    snprintf(out, len, "in %lldd%02lldh", s / 86400, s / 3600 % 24);
}

/* ": compute $C + data $D + waiting $W; starts in 1h05m" and what the
 * numbers do not say by themselves. */
static void
add_terms(char *out, const struct placement_candidate *c,
          const struct placement_cost *k)
{
  char cm[32], dm[32], wm[32], in[32];

  fmt_money(c->compute_micro, cm, sizeof(cm));
  fmt_money(c->data_micro, dm, sizeof(dm));
  fmt_money(c->waiting_micro, wm, sizeof(wm));
  fmt_in(c->start_ms, k->now_ms, in, sizeof(in));
  placement__append(out, PLACEMENT_REASON_LEN, ": compute %s + data %s + waiting %s; starts %s", cm, dm,
             wm, in);
  if (!c->priced && c->compute_micro >= 0)
    placement__append(out, PLACEMENT_REASON_LEN, "; unpriced, charged the dearest rate");
  else if (!c->priced)
    placement__append(out, PLACEMENT_REASON_LEN, "; no site has a price, compute not counted");
  if (c->held)
    placement__append(out, PLACEMENT_REASON_LEN, "; held behind the oldest waiting %s job", c->type);
  if (c->grows)
    placement__append(out, PLACEMENT_REASON_LEN, "; once the site grows a node for it");
}

static void
explain_one(const struct placement_request *req,
            const struct placement_site *sites,
            const struct placement_cost *k,
            const struct placement_candidate *pick,
            struct placement_candidate *c)
{
  struct placement__fit fit;
  char a[32], b[32];

  switch (c->excluded) {
  case PLACEMENT_EXCLUDED_SITE:
    placement__fit_init(req, &fit);
    placement__judge(req, &sites[c->index], &fit);
    placement__fit_reason(&sites[c->index], &fit, c->reason);
    return;
  case PLACEMENT_EXCLUDED_DATA:
    snprintf(c->reason, PLACEMENT_REASON_LEN,
             "dataset missing here (%lld bytes) and the site cannot "
             "receive it",
             (long long)k->data[c->index].missing_bytes);
    return;
  case PLACEMENT_EXCLUDED_DEADLINE:
    fmt_in(c->start_ms, k->now_ms, a, sizeof(a));
    fmt_in(k->deadline_ms, k->now_ms, b, sizeof(b));
    snprintf(c->reason, PLACEMENT_REASON_LEN,
             "starts %s, after the deadline (%s)", a, b);
    return;
  case PLACEMENT_RANKED:
    break;
  }
  fmt_money(c->total_micro, a, sizeof(a));
  if (c == pick || pick == NULL) {
    snprintf(c->reason, PLACEMENT_REASON_LEN, "least total, %s", a);
  } else {
    fmt_money(c->total_micro - pick->total_micro, b, sizeof(b));
    snprintf(c->reason, PLACEMENT_REASON_LEN, "%s more than '%s'", b,
             pick->site != NULL ? pick->site : "?");
  }
  add_terms(c->reason, c, k);
  if (c == pick && k->deadline_ms > 0 && c->start_ms > k->deadline_ms)
    placement__append(c->reason, PLACEMENT_REASON_LEN, "; no site starts it by the deadline");
}

void
placement_cost_explain(const struct placement_request *req,
                       const struct placement_site *sites, size_t nsites,
                       const struct placement_cost *cost,
                       struct placement_decision *d)
{
  static const struct placement_cost none;
  const struct placement_cost *k = cost != NULL ? cost : &none;
  struct placement_candidate *pick = NULL;

  for (size_t n = 0; n < d->ncandidates; n++) {
    if (d->candidates[n].index == d->pick)
      pick = &d->candidates[n];
  }
  for (size_t n = 0; n < d->ncandidates; n++) {
    if ((size_t)d->candidates[n].index < nsites)
      explain_one(req, sites, k, pick, &d->candidates[n]);
  }
  if (pick == NULL) {
    placement__explain_none(req, d);
    return;
  }
  snprintf(d->reason, PLACEMENT_SUMMARY_LEN, "%s '%s', %s",
           d->verdict == PLACEMENT_NOW ? "runs at" : "waits for",
           pick->site != NULL ? pick->site : "?", pick->reason);
}

int
placement_cost_reservation(const struct placement_request *req,
                           const struct placement_decision *d,
                           struct placement_reservation *out)
{
  struct placement__fit need;

  placement__fit_init(req, &need);
  if (d->verdict != PLACEMENT_WAIT || d->pick < 0 || need.gpus <= 0)
    return 0;
  for (size_t n = 0; n < d->ncandidates; n++) {
    const struct placement_candidate *c = &d->candidates[n];

    if (c->index != d->pick || c->type == NULL)
      continue;
    out->type = c->type;
    out->site = c->index;
    out->start_ms = c->start_ms;
    return 1;
  }
  return 0;
}

void
placement__cost_decide_full(const struct placement_request *req,
                            const struct placement_site *sites, size_t nsites,
                            const struct placement_cost *cost,
                            struct placement_decision *out)
{
  placement_cost_decide(req, sites, nsites, cost, out);
  placement_cost_explain(req, sites, nsites, cost, out);
}

void
placement__cost_decide_plain(const struct placement_request *req,
                             const struct placement_site *sites,
                             size_t nsites, struct placement_decision *out)
{
  placement__cost_decide_full(req, sites, nsites, NULL, out);
}
