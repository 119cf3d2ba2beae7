/*
 * The burst policy (burst.h): per elastic site, the nodes to launch and
 * the idle nodes to release, from the jobs that wait for the site to
 * grow, a forecast of its demand, its bounds and the billing of its
 * provider.  Also the learned inputs the caller feeds it: the forecast
 * by hour of the week, the boot delay and the spot interruption rate.
 * Pure: no I/O, no allocation, no clock, no globals that change.  Money
 * is integer micro-dollars per node-hour; every sum of it saturates.
 *
 * A plan is worked out in a struct site_work on the stack (about 14 KiB):
 * the free GPUs of the first BURST_MAX_LIVE live nodes, and up to
 * BURST_MAX_LAUNCH new nodes in the order the rules asked for them, so
 * that the bounds cut the last asked first.
 */
#include "burst.h"
#include "placement_internal.h"

#include <stdio.h>
#include <string.h>

#define SEC_MS 1000LL
#define HOUR_MS (3600LL * SEC_MS)
#define WEEK_MS (BURST_WEEK_HOURS * HOUR_MS)
/* 1970-01-01 00:00 UTC was a Thursday: hour 72 of a week from Monday. */
#define EPOCH_HOUR_OF_WEEK 72
/* A billing unit this short is per second: no unit end to wait for. */
#define PER_SECOND_MS 60000LL
/* The prior of the interruption rate weighs as this much uptime. */
#define PRIOR_HOURS 24.0
/* Node ids a release line names before it says "...". */
#define REASON_IDS 4

/* a - b for times, which the caller's clock may put anywhere. */
static int64_t
sat_sub(int64_t a, int64_t b)
{
  int64_t r;

  if (!__builtin_sub_overflow(a, b, &r))
    return r;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

static int64_t
pos(int64_t v)
{
  return v > 0 ? v : 0;
}

const char *
burst_reason_name(enum burst_reason r)
{
  static const char *const names[BURST_REASON_COUNT] = {
      [BURST_NONE] = "none",          [BURST_DEMAND] = "demand",
      [BURST_FORECAST] = "forecast",  [BURST_MIN_NODES] = "min-nodes",
      [BURST_IDLE] = "idle",          [BURST_MAX_NODES] = "max-nodes",
      [BURST_SITE_CAP] = "site-cap",  [BURST_TOTAL_CAP] = "total-cap",
      [BURST_COOLDOWN] = "cooldown",  [BURST_PAID] = "paid",
      [BURST_HELD] = "held",          [BURST_BUDGET] = "budget",
  };

  if ((unsigned)r >= BURST_REASON_COUNT)
    return "unknown";
  return names[r];
}

int
burst_spot_safe(int64_t now_ms, int64_t deadline_ms, int64_t remaining_ms,
                int64_t restart_ms)
{
  if (deadline_ms == 0)
    return 1;
  /* The work and one restart must fit in the time left. */
  return placement__sat_add(pos(remaining_ms), pos(restart_ms)) <=
         sat_sub(deadline_ms, now_ms);
}

int64_t
burst_restart_allowance(int64_t restart_ms, double per_hour,
                        int64_t remaining_ms)
{
  double expected = per_hour * (double)pos(remaining_ms) / (double)HOUR_MS;
  int64_t n = 1;

  /* NaN, negative or absurd rates: one restart, or a bounded many. */
  if (expected > 1.0 && expected < 1000.0)
    n = (int64_t)expected + (expected > (double)(int64_t)expected);
  else if (expected >= 1000.0)
    n = 1000;
  return placement__sat_mul(pos(restart_ms), n);
}

/* ---- One site's plan ---- */

/* A node the plan launches. */
struct new_node {
  int shape;
  int64_t free;           /* GPUs no job claims yet */
  enum burst_reason why;  /* MIN_NODES, DEMAND or FORECAST */
};

struct site_work {
  const struct burst_site *s;
  size_t nshapes, nnodes, njobs;
  int64_t price[BURST_MAX_SHAPES]; /* unpriced: the dearest priced */
  int64_t dearest;        /* of a node of no known shape too */
  int base;               /* the MIN and FORECAST shape; -1: none */
  int64_t free[BURST_MAX_LIVE];   /* live nodes' unclaimed GPUs */
  struct new_node add[BURST_MAX_LAUNCH];
  size_t nadd;
  int64_t live_rate;      /* $ per hour of the live nodes */
  int64_t jobs;           /* counted jobs */
  int64_t budget_jobs;
  int64_t capacity;       /* FORECAST: GPUs of the base type counted */
  int forecast_cooldown;  /* FORECAST asked but held by the cool-down */
  int64_t total_cap;      /* the overall cap, for the reason line */
};

/* Whether a is cheaper per GPU than b; fewer GPUs (less left unused),
 * then the earlier shape, break a tie. */
static int
cheaper(const struct site_work *w, int a, int b)
{
  const struct burst_shape *sa = &w->s->shapes[a], *sb = &w->s->shapes[b];
  __int128 ca = (__int128)w->price[a] * sb->gpus;
  __int128 cb = (__int128)w->price[b] * sa->gpus;

  if (ca != cb)
    return ca < cb;
  return sa->gpus < sb->gpus;
}

static int
shape_ok(const struct site_work *w, int k)
{
  return k >= 0 && (size_t)k < w->nshapes && w->s->shapes[k].gpus > 0;
}

static int64_t
node_gpus(const struct site_work *w, const struct burst_node *n)
{
  return shape_ok(w, n->shape) ? w->s->shapes[n->shape].gpus : 0;
}

static int64_t
node_price(const struct site_work *w, const struct burst_node *n)
{
  return shape_ok(w, n->shape) ? w->price[n->shape] : w->dearest;
}

/* The counts and prices the rules read, bounded and with the unpriced
 * shapes at the dearest price.  A site with no priced shape costs 0,
 * which no cap can bound. */
static void
work_init(struct site_work *w, const struct burst_site *s)
{
  int64_t dearest = 0;
  int spot_base = -1;

  memset(w, 0, sizeof(*w));
  w->s = s;
  w->nshapes = s->shapes != NULL ? s->nshapes : 0;
  if (w->nshapes > BURST_MAX_SHAPES)
    w->nshapes = BURST_MAX_SHAPES;
  w->nnodes = s->nodes != NULL ? s->nnodes : 0;
  w->njobs = s->jobs != NULL ? s->njobs : 0;
  for (size_t k = 0; k < w->nshapes; k++)
    if (s->shapes[k].price_micro > dearest)
      dearest = s->shapes[k].price_micro;
  /* The base shape is the cheapest per GPU that is not spot: nodes
   * launched ahead of demand must suit every job, deadlines too. */
  w->base = -1;
  for (size_t k = 0; k < w->nshapes; k++) {
    int i = (int)k;

    w->price[k] = s->shapes[k].price_micro > 0 ? s->shapes[k].price_micro
                                                : dearest;
    if (!shape_ok(w, i))
      continue;
    if (s->shapes[k].spot) {
      if (spot_base < 0 || cheaper(w, i, spot_base))
        spot_base = i;
    } else if (w->base < 0 || cheaper(w, i, w->base)) {
      w->base = i;
    }
  }
  if (w->base < 0)
    w->base = spot_base;
  w->dearest = dearest;
  for (size_t i = 0; i < w->nnodes; i++) {
    const struct burst_node *n = &s->nodes[i];

    w->live_rate = placement__sat_add(w->live_rate, node_price(w, n));
    if (i < BURST_MAX_LIVE)
      w->free[i] = pos(node_gpus(w, n) - pos(n->gpus_used));
  }
}

/* Whether a job may run on a node of shape k. */
static int
job_fits(const struct site_work *w, int k, const struct burst_job *j,
         int spot_ok)
{
  const struct burst_shape *sh;

  if (!shape_ok(w, k))
    return 0;
  sh = &w->s->shapes[k];
  if (sh->gpus < j->gpus || (sh->spot && !spot_ok))
    return 0;
  return j->gpu_type == NULL || placement__same_type(sh->gpu_type,
                                                      j->gpu_type);
}

static void
open_nodes(struct site_work *w, int shape, int64_t n, enum burst_reason why)
{
  for (; n > 0 && w->nadd < BURST_MAX_LAUNCH; n--) {
    w->add[w->nadd].shape = shape;
    w->add[w->nadd].free = w->s->shapes[shape].gpus;
    w->add[w->nadd].why = why;
    w->nadd++;
  }
}

static int
spot_ok(int64_t now, const struct burst_site *s, const struct burst_job *j)
{
  return burst_spot_safe(now, j->deadline_ms, j->runtime_ms,
                         burst_restart_allowance(s->restart_ms,
                                                 s->interruptions_per_hour,
                                                 j->runtime_ms));
}

/* The cheapest shape per GPU that holds the job, or -1. */
static int
best_shape(const struct site_work *w, const struct burst_job *j, int spot)
{
  int best = -1;

  for (int k = 0; k < (int)w->nshapes; k++)
    if (job_fits(w, k, j, spot) && (best < 0 || cheaper(w, k, best)))
      best = k;
  return best;
}

/* First fit over the live nodes, then over the new ones, then a new node
 * of the best shape.  0 when no shape holds the job: it is no demand of
 * this site. */
static int
place_job(struct site_work *w, const struct burst_job *j, int spot)
{
  const struct burst_site *s = w->s;
  int best;

  for (size_t i = 0; i < w->nnodes && i < BURST_MAX_LIVE; i++)
    if (w->free[i] >= j->gpus && job_fits(w, s->nodes[i].shape, j, spot)) {
      w->free[i] -= j->gpus;
      return 1;
    }
  for (size_t i = 0; i < w->nadd; i++)
    if (w->add[i].free >= j->gpus && job_fits(w, w->add[i].shape, j, spot)) {
      w->add[i].free -= j->gpus;
      return 1;
    }
  best = best_shape(w, j, spot);
  if (best < 0)
    return 0;
  /* Past BURST_MAX_LAUNCH the job still counts: the next plan opens. */
  if (w->nadd < BURST_MAX_LAUNCH) {
    open_nodes(w, best, 1, BURST_DEMAND);
    w->add[w->nadd - 1].free -= j->gpus;
  }
  return 1;
}

/* The largest size of a job within budget below size that some shape
 * could hold; 0 when none is left. */
static int64_t
next_size(const struct site_work *w, int64_t size, int64_t largest)
{
  int64_t next = 0;

  for (size_t i = 0; i < w->njobs; i++) {
    int64_t g = w->s->jobs[i].gpus;

    if (!w->s->jobs[i].over_budget && g < size && g > next && g <= largest)
      next = g;
  }
  return next;
}

/* Rule 2: the jobs within budget, largest first (in input order among
 * equals), without sorting: one pass per distinct size no larger than
 * the largest shape, so at most that shape's GPUs passes. */
static void
pack_jobs(struct site_work *w, int64_t now, struct burst_plan *p)
{
  const struct burst_site *s = w->s;
  int64_t largest = 0;

  for (size_t k = 0; k < w->nshapes; k++)
    if (s->shapes[k].gpus > largest)
      largest = s->shapes[k].gpus;
  for (size_t i = 0; i < w->njobs; i++) {
    const struct burst_job *j = &s->jobs[i];

    if (j->over_budget && j->gpus > 0 &&
        best_shape(w, j, spot_ok(now, s, j)) >= 0) {
      w->budget_jobs++;
      p->budget_gpus = placement__sat_add(p->budget_gpus, j->gpus);
    }
  }
  for (int64_t size = next_size(w, INT64_MAX, largest); size > 0;
       size = next_size(w, size, largest)) {
    for (size_t i = 0; i < w->njobs; i++) {
      const struct burst_job *j = &s->jobs[i];

      if (j->over_budget || j->gpus != size ||
          !place_job(w, j, spot_ok(now, s, j)))
        continue;
      w->jobs++;
      p->demand_gpus = placement__sat_add(p->demand_gpus, j->gpus);
    }
  }
}

static int
within(int64_t now, int64_t since, int64_t span)
{
  return since != 0 && span > 0 && sat_sub(now, since) < span;
}

/* Rule 3: base-shape nodes for the forecast GPUs the live nodes and the
 * launches so far (of the base shape's type) do not cover. */
static void
forecast_nodes(struct site_work *w, int64_t now)
{
  const struct burst_site *s = w->s;
  const struct burst_shape *b;
  int64_t gap, n;

  if (!s->cfg.forecast || s->forecast_gpus < 0 || w->base < 0)
    return;
  b = &s->shapes[w->base];
  for (size_t i = 0; i < w->nnodes; i++) {
    int k = s->nodes[i].shape;

    if (shape_ok(w, k) &&
        placement__same_type(s->shapes[k].gpu_type, b->gpu_type))
      w->capacity = placement__sat_add(w->capacity, s->shapes[k].gpus);
  }
  for (size_t i = 0; i < w->nadd; i++)
    if (placement__same_type(s->shapes[w->add[i].shape].gpu_type,
                             b->gpu_type))
      w->capacity =
          placement__sat_add(w->capacity, s->shapes[w->add[i].shape].gpus);
  if (s->forecast_gpus <= w->capacity)
    return;
  if (within(now, s->last_release_ms, s->cfg.cooldown_ms)) {
    w->forecast_cooldown = 1;
    return;
  }
  /* Whole nodes, to the nearest: a forecast of a GPU or two is no
   * reason to start eight ahead of anyone asking. */
  gap = s->forecast_gpus - w->capacity;
  n = gap / b->gpus + (2 * (gap % b->gpus) >= b->gpus);
  open_nodes(w, w->base, n, BURST_FORECAST);
}

/* Rule 4: admit the new nodes in the order asked while the site stays
 * within max_nodes and both spend caps; a node a cap refuses lets a
 * cheaper one after it through.  The first refusal is the plan's held. */
static void
bound_launches(struct site_work *w, struct burst_plan *p, int64_t *total_rate,
               int64_t total_cap)
{
  const struct burst_config *c = &w->s->cfg;
  int64_t live = (int64_t)w->nnodes;

  p->spend_micro = w->live_rate;
  for (size_t i = 0; i < w->nadd; i++) {
    int64_t price = w->price[w->add[i].shape];
    enum burst_reason cut = BURST_NONE;

    if (p->launch_reason == BURST_NONE)
      p->launch_reason = w->add[i].why;
    if (placement__sat_add(live, p->nlaunch) >= c->max_nodes)
      cut = BURST_MAX_NODES;
    else if (c->spend_cap_micro > 0 &&
             placement__sat_add(p->spend_micro, price) > c->spend_cap_micro)
      cut = BURST_SITE_CAP;
    else if (total_cap > 0 &&
             placement__sat_add(*total_rate, price) > total_cap)
      cut = BURST_TOTAL_CAP;
    if (cut != BURST_NONE) {
      if (p->held == BURST_NONE)
        p->held = cut;
      continue;
    }
    p->launch[w->add[i].shape]++;
    p->nlaunch++;
    p->spend_micro = placement__sat_add(p->spend_micro, price);
    *total_rate = placement__sat_add(*total_rate, price);
  }
  if (p->held == BURST_NONE && w->forecast_cooldown)
    p->held = BURST_COOLDOWN;
  if (p->held == BURST_NONE && w->budget_jobs > 0)
    p->held = BURST_BUDGET;
}

/* Time from now to the end of the paid unit of a node launched at
 * launched_ms (a whole unit at a unit's very end: the next has begun). */
static int64_t
unit_left(int64_t now, int64_t launched_ms, int64_t billing_ms)
{
  int64_t used = pos(sat_sub(now, launched_ms));

  return billing_ms - used % billing_ms;
}

/* Rule 5 for one idle node past its timeout: why it stays, or IDLE. */
static enum burst_reason
keep_reason(const struct site_work *w, int64_t now, const struct burst_node *n,
            int64_t remaining, int64_t idle_after, int64_t expected)
{
  const struct burst_config *c = &w->s->cfg;

  if (remaining <= c->min_nodes)
    return BURST_MIN_NODES;
  /* Counted jobs wait for this site, and a node launched or asked for
   * means it grows: a release now would be undone. */
  if (w->jobs > 0 || w->nadd > 0)
    return BURST_HELD;
  if (within(now, w->s->last_launch_ms, c->cooldown_ms))
    return BURST_COOLDOWN;
  if (expected > idle_after)
    return BURST_HELD;
  if (c->billing_ms > PER_SECOND_MS &&
      unit_left(now, n->launched_ms, c->billing_ms) > c->release_margin_ms)
    return BURST_PAID;
  return BURST_IDLE;
}

/* How long node n may sit idle: the idle timeout, or less where an
 * hour of its waiting GPUs is worth little: once its idle time has cost
 * what the boot it would save a job of its size is worth (price x t =
 * wait value x GPUs x boot), keeping it longer is money for nothing. */
static int64_t
idle_limit(const struct site_work *w, const struct burst_node *n)
{
  const struct burst_site *s = w->s;
  int64_t limit = pos(s->cfg.idle_timeout_ms), price = node_price(w, n);
  double keep;

  if (s->cfg.wait_value_micro <= 0 || price <= 0 || !shape_ok(w, n->shape))
    return limit;
  keep = (double)s->cfg.wait_value_micro * (double)node_gpus(w, n) *
         (double)pos(s->shapes[n->shape].boot_ms) / (double)price;
  return keep < (double)limit ? (int64_t)keep : limit;
}

static void
release_nodes(const struct site_work *w, int64_t now, struct burst_plan *p)
{
  const struct burst_site *s = w->s;
  int64_t busy = 0, idle = 0, expected = -1;
  int64_t remaining = (int64_t)w->nnodes;

  for (size_t i = 0; i < w->nnodes; i++) {
    const struct burst_node *n = &s->nodes[i];

    busy = placement__sat_add(busy, pos(n->gpus_used));
    idle = placement__sat_add(idle, pos(node_gpus(w, n) - pos(n->gpus_used)));
  }
  /* Hysteresis: the GPUs the forecast expects beyond those busy. */
  if (s->cfg.forecast && s->forecast_gpus >= 0)
    expected = s->forecast_gpus - busy;
  for (size_t i = 0; i < w->nnodes; i++) {
    const struct burst_node *n = &s->nodes[i];
    int64_t gpus = node_gpus(w, n);
    enum burst_reason r;

    if (n->gpus_used > 0 || !n->up ||
        sat_sub(now, n->idle_since_ms) < idle_limit(w, n))
      continue;
    r = keep_reason(w, now, n, remaining, idle - gpus, expected);
    if (p->nodes != NULL)
      p->nodes[i] = r;
    if (r != BURST_IDLE)
      continue;
    p->nrelease++;
    remaining--;
    idle -= gpus;
    p->spend_micro -= node_price(w, n);
  }
}

/* ---- The reason line ---- */

static void
put_money(char *out, int64_t micro)
{
  long long dollars = (long long)(micro / 1000000);
  long long cents = (long long)(micro % 1000000 / 10000);

  if (micro % 1000000 == 0)
    placement__append(out, BURST_REASON_LEN, "$%lld/h", dollars);
  else
    placement__append(out, BURST_REASON_LEN, "$%lld.%02lld/h", dollars,
                      cents);
}

static void
put_launches(const struct site_work *w, const struct burst_plan *p,
             char *out)
{
  const char *sep = "launch ";

  for (size_t k = 0; k < w->nshapes; k++) {
    const char *name = w->s->shapes[k].name;

    if (p->launch[k] == 0)
      continue;
    placement__append(out, BURST_REASON_LEN, "%s%lld x %s", sep,
                      (long long)p->launch[k], name != NULL ? name : "?");
    sep = ", ";
  }
  switch (p->launch_reason) {
  case BURST_MIN_NODES:
    placement__append(out, BURST_REASON_LEN, " (min-nodes: %lld)",
                      (long long)w->s->cfg.min_nodes);
    break;
  case BURST_DEMAND:
    placement__append(out, BURST_REASON_LEN,
                      " (demand: %lld job%s, %lld GPUs waiting)",
                      (long long)w->jobs, w->jobs == 1 ? "" : "s",
                      (long long)p->demand_gpus);
    break;
  case BURST_FORECAST:
    placement__append(out, BURST_REASON_LEN,
                      " (forecast: %lld GPUs busy expected, %lld there)",
                      (long long)w->s->forecast_gpus,
                      (long long)w->capacity);
    break;
  default:
    break;
  }
}

static void
put_held(const struct site_work *w, int64_t now, const struct burst_plan *p,
         char *out)
{
  const struct burst_site *s = w->s;

  if (p->nlaunch == 0)
    placement__append(out, BURST_REASON_LEN, "hold: ");
  else if (p->held == BURST_BUDGET || p->held == BURST_COOLDOWN)
    placement__append(out, BURST_REASON_LEN, "; hold: ");
  else
    placement__append(out, BURST_REASON_LEN, "; hold %lld: ",
                      (long long)((int64_t)w->nadd - p->nlaunch));
  switch (p->held) {
  case BURST_MAX_NODES:
    placement__append(out, BURST_REASON_LEN, "max nodes %lld reached",
                      (long long)s->cfg.max_nodes);
    break;
  case BURST_SITE_CAP:
    placement__append(out, BURST_REASON_LEN, "spend cap ");
    put_money(out, s->cfg.spend_cap_micro);
    placement__append(out, BURST_REASON_LEN, " reached at site");
    break;
  case BURST_TOTAL_CAP:
    placement__append(out, BURST_REASON_LEN, "total spend cap ");
    put_money(out, w->total_cap);
    placement__append(out, BURST_REASON_LEN, " reached");
    break;
  case BURST_COOLDOWN:
    placement__append(
        out, BURST_REASON_LEN,
        "forecast launch in the cool-down after a release (%lld s left)",
        (long long)((s->cfg.cooldown_ms -
                     sat_sub(now, s->last_release_ms)) / SEC_MS));
    break;
  case BURST_BUDGET:
    placement__append(out, BURST_REASON_LEN,
                      "%lld job%s (%lld GPUs) over budget",
                      (long long)w->budget_jobs,
                      w->budget_jobs == 1 ? "" : "s",
                      (long long)p->budget_gpus);
    break;
  default:
    break;
  }
}

/* "release node 17 (idle 600 s, paid hour ends in 40 s)": the times of
 * the first node released. */
static void
put_releases(const struct site_work *w, int64_t now,
             const struct burst_plan *p, char *out)
{
  const struct burst_site *s = w->s;
  const struct burst_node *first = NULL;
  int64_t named = 0;

  placement__append(out, BURST_REASON_LEN, "%srelease node%s ",
                    out[0] != '\0' ? "; " : "", p->nrelease > 1 ? "s" : "");
  for (size_t i = 0; i < w->nnodes; i++) {
    if (p->nodes[i] != BURST_IDLE)
      continue;
    if (first == NULL)
      first = &s->nodes[i];
    if (named < REASON_IDS)
      placement__append(out, BURST_REASON_LEN, "%s%lld",
                        named > 0 ? ", " : "", (long long)s->nodes[i].id);
    else if (named == REASON_IDS)
      placement__append(out, BURST_REASON_LEN, ", ...");
    named++;
  }
  if (first == NULL)
    return;
  placement__append(out, BURST_REASON_LEN, " (idle %lld s",
                    (long long)(sat_sub(now, first->idle_since_ms) / SEC_MS));
  if (s->cfg.billing_ms > PER_SECOND_MS)
    placement__append(
        out, BURST_REASON_LEN, ", paid %s ends in %lld s",
        s->cfg.billing_ms == HOUR_MS ? "hour" : "unit",
        (long long)(unit_left(now, first->launched_ms, s->cfg.billing_ms) /
                    SEC_MS));
  placement__append(out, BURST_REASON_LEN, ")");
}

static void
put_reason(const struct site_work *w, int64_t now, struct burst_plan *p)
{
  p->reason[0] = '\0';
  if (p->nlaunch > 0)
    put_launches(w, p, p->reason);
  if (p->held != BURST_NONE)
    put_held(w, now, p, p->reason);
  if (p->nrelease > 0 && p->nodes != NULL)
    put_releases(w, now, p, p->reason);
  if (p->reason[0] == '\0')
    placement__append(p->reason, BURST_REASON_LEN, "nothing to do");
}

static void
plan_site(struct site_work *w, int64_t now, const struct burst_site *s,
          int64_t *total_rate, int64_t total_cap, struct burst_plan *p)
{
  enum burst_reason *nodes = p->nodes;

  memset(p, 0, sizeof(*p));
  p->nodes = nodes;
  work_init(w, s);
  w->total_cap = total_cap;
  for (size_t i = 0; nodes != NULL && i < w->nnodes; i++)
    nodes[i] = BURST_NONE;
  if ((int64_t)w->nnodes < s->cfg.min_nodes && w->base >= 0)
    open_nodes(w, w->base, s->cfg.min_nodes - (int64_t)w->nnodes,
               BURST_MIN_NODES);
  pack_jobs(w, now, p);
  forecast_nodes(w, now);
  bound_launches(w, p, total_rate, total_cap);
  release_nodes(w, now, p);
  p->wanted_nodes = (int64_t)w->nnodes + p->nlaunch - p->nrelease;
  put_reason(w, now, p);
}

void
burst_decide(int64_t now_ms, const struct burst_site *sites, size_t nsites,
             int64_t total_cap_micro, struct burst_plan *plans)
{
  struct site_work w;
  int64_t total_rate = 0;

  if (sites == NULL || plans == NULL)
    return;
  /* Every site's live nodes spend now; the room left under the overall
   * cap goes to the launches of the earlier sites first. */
  for (size_t i = 0; i < nsites; i++) {
    work_init(&w, &sites[i]);
    total_rate = placement__sat_add(total_rate, w.live_rate);
  }
  for (size_t i = 0; i < nsites; i++)
    plan_site(&w, now_ms, &sites[i], &total_rate, total_cap_micro, &plans[i]);
}

/* ---- Forecast by hour of the week ---- */

static int
hour_of_week(int64_t ms)
{
  int64_t h = ms / HOUR_MS - (ms % HOUR_MS < 0);
  int64_t w = (h % BURST_WEEK_HOURS + EPOCH_HOUR_OF_WEEK) % BURST_WEEK_HOURS;

  return (int)(w < 0 ? w + BURST_WEEK_HOURS : w);
}

/* Add per_ms x the milliseconds of [from, to) that fall in each hour of
 * the week to its bucket: whole weeks at once, then at most 169 pieces. */
static void
spread(int64_t *bucket, int64_t from, int64_t to, int64_t per_ms)
{
  uint64_t span;
  int64_t t, weeks;

  if (bucket == NULL || to <= from || per_ms <= 0)
    return;
  span = (uint64_t)to - (uint64_t)from;
  weeks = (int64_t)(span / (uint64_t)WEEK_MS);
  if (weeks > 0)
    for (int h = 0; h < BURST_WEEK_HOURS; h++)
      bucket[h] = placement__sat_add(
          bucket[h],
          placement__sat_mul(placement__sat_mul(weeks, HOUR_MS), per_ms));
  t = to - (int64_t)(span % (uint64_t)WEEK_MS);
  while (t < to) {
    int64_t into = t % HOUR_MS, piece;

    if (into < 0)
      into += HOUR_MS;
    piece = HOUR_MS - into;
    if (to - t < piece)
      piece = to - t;
    bucket[hour_of_week(t)] =
        placement__sat_add(bucket[hour_of_week(t)],
                           placement__sat_mul(piece, per_ms));
    t += piece;
  }
}

void
burst_forecast_init(struct burst_forecast *f)
{
  if (f != NULL)
    memset(f, 0, sizeof(*f));
}

void
burst_forecast_cover(struct burst_forecast *f, int64_t from_ms, int64_t to_ms)
{
  if (f != NULL)
    spread(f->seen_ms, from_ms, to_ms, 1);
}

void
burst_forecast_add(struct burst_forecast *f, int64_t from_ms, int64_t to_ms,
                   int64_t gpus)
{
  if (f != NULL)
    spread(f->gpu_ms, from_ms, to_ms, gpus);
}

int64_t
burst_forecast_gpus(const struct burst_forecast *f, int64_t at_ms)
{
  int h;
  int64_t seen, busy;

  if (f == NULL)
    return -1;
  h = hour_of_week(at_ms);
  seen = f->seen_ms[h];
  busy = pos(f->gpu_ms[h]);
  if (seen < HOUR_MS)
    return -1;
  return busy / seen + (busy % seen != 0);
}

/* ---- Boot delay ---- */

void
burst_boot_init(struct burst_boot *b)
{
  if (b != NULL)
    memset(b, 0, sizeof(*b));
}

void
burst_boot_add(struct burst_boot *b, int64_t ms)
{
  if (b == NULL || ms <= 0)
    return;
  if (b->next < 0 || b->next >= BURST_BOOT_SAMPLES)
    b->next = 0;
  b->samples[b->next] = ms;
  b->next = (b->next + 1) % BURST_BOOT_SAMPLES;
  if (b->n < BURST_BOOT_SAMPLES)
    b->n = b->n < 0 ? 1 : b->n + 1;
}

/* The median; of an even count, the mean of the middle two rounded up (a
 * boot is better expected late than early). */
int64_t
burst_boot_estimate(const struct burst_boot *b, int64_t default_ms)
{
  int64_t v[BURST_BOOT_SAMPLES];
  int n;

  if (b == NULL || b->n <= 0)
    return default_ms;
  n = b->n > BURST_BOOT_SAMPLES ? BURST_BOOT_SAMPLES : b->n;
  for (int i = 0; i < n; i++) {
    int64_t x = b->samples[i];
    int k = i;

    for (; k > 0 && v[k - 1] > x; k--)
      v[k] = v[k - 1];
    v[k] = x;
  }
  if (n % 2 == 1)
    return v[n / 2];
  return v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1] + 1) / 2;
}

/* ---- Spot interruptions ---- */

double
burst_interruption_rate(int64_t interruptions, int64_t spot_node_ms,
                        double prior_per_hour)
{
  double prior = prior_per_hour > 0 ? prior_per_hour : 0; /* NaN too */
  double hours = (double)pos(spot_node_ms) / (double)HOUR_MS;

  /* The prior is PRIOR_HOURS of uptime seen at its rate. */
  return ((double)pos(interruptions) + prior * PRIOR_HOURS) /
         (hours + PRIOR_HOURS);
}
