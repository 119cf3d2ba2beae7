/*
 * The autoscaler (DESIGN.md "Burst"): grows and shrinks the elastic
 * sites whose nodes tenbin launches (ops->fleet and ops->scale), with
 * the decisions of policies/burst.h.
 *
 * Demand comes from the scheduler: each pass runs the placement policy
 * with every elastic site as large as it may grow (capacity's grow), and
 * a queued job whose pick is a site that must grow for it is that site's
 * demand (broker__autoscaler_demand).  The pass's end runs a tick at
 * once when there is demand, so a burst is answered within the pass that
 * saw it; a timer ticks anyway for what time alone changes (idle nodes,
 * the forecast, the minimum).
 *
 * A tick reads each site's fleet, learns boot delays from the nodes that
 * came up since the last tick, rebuilds the site's hour-of-week forecast
 * from its usage history once an hour, asks burst_decide for every site
 * at once (the overall spend cap is shared), applies the plans through
 * ops->scale and records every plan that did something, or whose reason
 * changed, in the autoscaler log (011_autoscaler.sql).  A restarted
 * tenbind learns again from the nodes table: boots and interruptions.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/broker_internal.h"
#include "broker/config_fields.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

#define SCALE_TICK_MS 15000
/* A burst seen by a pass is answered at once, but not more often. */
#define SCALE_MIN_GAP_MS 1000
#define HOUR_MS 3600000LL
#define DAY_MS (24 * HOUR_MS)
/* The forecast reads four weeks of usage, rebuilt every hour. */
#define FORECAST_SPAN_MS (28 * DAY_MS)
/* Decisions older than this are pruned. */
#define LOG_KEEP_MS (30 * DAY_MS)
/* Demand per site and pass: the scheduler looks at fewer jobs. */
#define MAX_DEMAND 4096
/* What an interruption costs a job besides a new node's boot: the work
 * since its last checkpoint, taken to be at most this. */
#define LOST_WORK_MS (10 * 60 * 1000LL)
/* The prior of spot interruptions per node-hour: 15 % of nodes a month
 * (AWS's band for H100, research/placement-burst.md 3.2). */
#define INTERRUPTION_PRIOR (0.15 / 730.0)

/* A job of the last pass's demand, its GPU type its own. */
struct demand {
  struct burst_job job;
  char type[ADAPTER_GPU_TYPE_LEN];
};

struct scaler {
  struct demand *demand;         /* the last pass's */
  size_t njobs, cap;
  struct burst_boot boot[ADAPTER_MAX_SHAPES];
  int64_t *up;                   /* ids of nodes seen up, sorted */
  size_t nup;
  struct burst_forecast forecast;
  int64_t forecast_ms;           /* when it was built; 0: never */
  double interruptions_per_hour;
  int64_t last_launch_ms, last_release_ms;
  /* the GPU types it launches spot nodes of, from its shapes */
  char spot_types[ADAPTER_MAX_SHAPES][ADAPTER_GPU_TYPE_LEN];
  size_t nspot;
  int64_t boot_ms;               /* the site's burst.boot_s: the boot
                                    until one is learned */
  /* the last plan, for views and metrics */
  struct scale_view view;
  char detail[BURST_REASON_LEN];
  char logged[BURST_REASON_LEN + 32]; /* action and reason last logged */
  uint64_t decisions[BURST_REASON_COUNT];
};

static struct scaler *
scaler_of(const struct site *s)
{
  return s->scaler;
}

/* ---- learning ---- */

static int
shape_index(const struct adapter_fleet *f, const char *name)
{
  for (size_t i = 0; i < f->nshapes; i++)
    if (name != NULL && strcmp(f->shapes[i].name, name) == 0)
      return (int)i;
  return -1;
}

struct seed {
  struct scaler *sc;
  const struct adapter_fleet *fleet; /* NULL: boots are not learned */
  int64_t interruptions, spot_ms, now;
};

/* A stored node: its boot, and its spot time and interruption. */
static int
seed_node(const struct db_node *n, void *arg)
{
  struct seed *sd = arg;
  int s = sd->fleet != NULL ? shape_index(sd->fleet, n->shape) : -1;
  int64_t end = n->ended_ms > 0 ? n->ended_ms : sd->now;

  if (s >= 0 && n->registered_ms > 0 && n->created_ms > 0)
    burst_boot_add(&sd->sc->boot[s], n->registered_ms - n->created_ms);
  if (n->spot && n->registered_ms > 0 && end > n->registered_ms) {
    sd->spot_ms += end - n->registered_ms;
    if (n->reason != NULL && strstr(n->reason, "interruption") != NULL)
      sd->interruptions++;
  }
  return 0;
}

/* Learn from the site's nodes of the last four weeks: the spot
 * interruption rate, and with fleet (at open) the boots too. */
static void
learn_nodes(struct broker *b, struct site *s, struct scaler *sc,
            const struct adapter_fleet *fleet)
{
  struct seed sd = {.sc = sc, .fleet = fleet, .now = time_now_ms()};
  struct err e = {0};

  if (db_node_list(b->db, s->name, sd.now - FORECAST_SPAN_MS, seed_node, &sd,
                   &e) < 0)
    log_warn("site %s: reading past nodes: %s", s->name, err_msg(&e));
  sc->interruptions_per_hour = burst_interruption_rate(
      sd.interruptions, sd.spot_ms, INTERRUPTION_PRIOR);
}

static int
cmp_id(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return (x > y) - (x < y);
}

/* Keep the ids of the nodes up now; with learn, learn the boot of every
 * one that was not up at the last call. */
static void
track_up(struct scaler *sc, const struct adapter_fleet *f, int learn)
{
  int64_t *up = xcalloc(f->nnodes + 1, sizeof(*up));
  size_t n = 0;

  for (size_t i = 0; i < f->nnodes; i++) {
    const struct adapter_fleet_node *node = &f->nodes[i];

    if (!node->up)
      continue;
    up[n++] = node->id;
    if (learn &&
        (sc->nup == 0 || bsearch(&node->id, sc->up, sc->nup,
                                 sizeof(*sc->up), cmp_id) == NULL) &&
        node->registered_ms > node->launched_ms && node->shape >= 0 &&
        node->shape < ADAPTER_MAX_SHAPES)
      burst_boot_add(&sc->boot[node->shape],
                     node->registered_ms - node->launched_ms);
  }
  qsort(up, n, sizeof(*up), cmp_id);
  free(sc->up);
  sc->up = up;
  sc->nup = n;
}

/* The nodes of the store's last four weeks teach the boots; those up
 * now are among them, so the first tick must not learn them again. */
static void
seed(struct broker *b, struct site *s, struct scaler *sc)
{
  struct adapter_fleet f;

  s->ops->fleet(s->ctx, &f);
  learn_nodes(b, s, sc, &f);
  track_up(sc, &f, 0);
  sc->boot_ms = f.burst.boot_ms;
  for (size_t i = 0; i < f.nshapes && sc->nspot < ADAPTER_MAX_SHAPES; i++)
    if (f.shapes[i].spot)
      snprintf(sc->spot_types[sc->nspot++], sizeof(sc->spot_types[0]), "%s",
               f.shapes[i].gpu_type);
  adapter_fleet_release(&f);
}

struct history {
  struct burst_forecast *f;
  int64_t first_ms;   /* the earliest piece read; 0: none */
};

static int
forecast_piece(const struct db_usage *u, void *arg)
{
  struct history *h = arg;

  burst_forecast_add(h->f, u->from_ms, u->to_ms, u->gpus);
  if (h->first_ms == 0 || u->from_ms < h->first_ms)
    h->first_ms = u->from_ms;
  return 0;
}

/* Hourly: the site's interruption rate from its nodes, and, when the
 * site wants a forecast, its hour-of-week forecast from its last four
 * weeks of usage.  A failed read keeps no forecast until the next hour
 * (the plan then does without one). */
static void
learn_hourly(struct broker *b, struct site *s, struct scaler *sc,
             int forecast, int64_t now)
{
  struct history h = {.f = &sc->forecast};
  struct err e = {0};

  if (sc->forecast_ms != 0 && now - sc->forecast_ms < HOUR_MS)
    return;
  if (sc->forecast_ms != 0)
    learn_nodes(b, s, sc, NULL);
  sc->forecast_ms = now;
  burst_forecast_init(&sc->forecast);
  if (!forecast)
    return;
  if (db_usage_of_site(b->db, s->name, now - FORECAST_SPAN_MS,
                       forecast_piece, &h, &e) < 0) {
    log_warn("site %s: reading usage for the forecast: %s", s->name,
             err_msg(&e));
    burst_forecast_init(&sc->forecast);
    return;
  }
  /* History counts from the site's first use in the span: hours before
   * it are not zero demand, they are unknown. */
  if (h.first_ms > 0)
    burst_forecast_cover(&sc->forecast,
                         h.first_ms > now - FORECAST_SPAN_MS
                             ? h.first_ms
                             : now - FORECAST_SPAN_MS,
                         now);
}

/* ---- demand from the scheduler ---- */

void
broker__autoscaler_pass_begin(struct broker *b)
{
  for (size_t i = 0; i < b->nsites; i++) {
    struct scaler *sc = scaler_of(&b->sites[i]);

    if (sc != NULL)
      sc->njobs = 0;
  }
}

void
broker__autoscaler_demand(struct broker *b, int site,
                          const struct job_spec *spec, int64_t runtime_ms)
{
  struct scaler *sc;
  struct demand *d;
  struct burst_job *j;

  if (site < 0 || (size_t)site >= b->nsites)
    return;
  sc = scaler_of(&b->sites[site]);
  if (sc == NULL || sc->njobs >= MAX_DEMAND || spec->gpus <= 0)
    return;
  GROW(sc->demand, sc->njobs + 1, sc->cap);
  d = &sc->demand[sc->njobs++];
  memset(d, 0, sizeof(*d));
  j = &d->job;
  j->gpus = spec->gpus;
  if (spec->gpu_type != NULL)
    snprintf(d->type, sizeof(d->type), "%s", spec->gpu_type);
  j->runtime_ms = runtime_ms > 0 ? runtime_ms : HOUR_MS;
  /* The spec's deadline is the latest start; burst wants the end. */
  if (spec->deadline_ms > 0)
    j->deadline_ms = spec->deadline_ms + j->runtime_ms;
}

static void scale_tick(struct broker *b);

static void scale_timer_cb(uv_timer_t *t);

void
broker__autoscaler_pass_end(struct broker *b)
{
  int64_t gap;
  int demand = 0;

  for (size_t i = 0; i < b->nsites; i++) {
    struct scaler *sc = scaler_of(&b->sites[i]);

    if (sc != NULL && sc->njobs > 0)
      demand = 1;
  }
  if (!demand)
    return;
  gap = time_now_ms() - b->scale_last_ms;
  if (gap >= SCALE_MIN_GAP_MS)
    scale_tick(b);
  else if (!b->closing)
    /* Too soon after the last: the timer's next tick comes early. */
    uv_timer_start(&b->scale_timer, scale_timer_cb,
                   (uint64_t)(SCALE_MIN_GAP_MS - gap),
                   (uint64_t)b->scale_tick_ms);
}

int64_t
broker__autoscaler_grow_ms(struct broker *b, int site, int64_t dflt)
{
  const struct scaler *sc;
  int64_t best = -1;

  if (site < 0 || (size_t)site >= b->nsites ||
      (sc = scaler_of(&b->sites[site])) == NULL)
    return dflt;
  for (int i = 0; i < ADAPTER_MAX_SHAPES; i++) {
    int64_t ms = burst_boot_estimate(&sc->boot[i], -1);

    if (ms >= 0 && (best < 0 || ms < best))
      best = ms;
  }
  return best >= 0 ? best : dflt;
}

/* What an interruption costs a job of site in time: a new node's boot
 * (the fastest learned, else the site's boot_s) and the lost work. */
static int64_t
restart_ms(struct broker *b, const struct site *site)
{
  return broker__autoscaler_grow_ms(b, (int)(site - b->sites),
                                    site->scaler->boot_ms) +
         LOST_WORK_MS;
}

int
broker__autoscaler_on_demand(struct broker *b, const struct site *site,
                             const struct job_spec *spec)
{
  const char *how;
  int64_t run;

  if (spec->deadline_ms <= 0 || site->scaler == NULL)
    return 0;
  run = broker__runtime_predict(
      b, spec->project, spec->workload != NULL ? spec->workload : spec->name,
      spec->time_limit_s, &how);
  /* The deadline is the latest start: it must end by then + its run. */
  return !burst_spot_safe(
      time_now_ms(), spec->deadline_ms + run, run,
      burst_restart_allowance(restart_ms(b, site),
                              site->scaler->interruptions_per_hour, run));
}

int
broker__autoscaler_spot_rate(struct broker *b, const struct site *site,
                             const char *type, int64_t *out)
{
  const struct scaler *sc = site->scaler;
  const struct site_rate *r = broker__site_rate(&site->cost, type);
  size_t i;

  if (sc == NULL || r == NULL || r->spot_micro < 0)
    return 0;
  for (i = 0; i < sc->nspot && strcasecmp(sc->spot_types[i], type) != 0; i++)
    ;
  if (i == sc->nspot)
    return 0;
  /* What an hour on spot is expected to cost: the price, and the
   * restart each interruption makes the job pay again. */
  *out = (int64_t)((double)r->spot_micro *
                   (1.0 + sc->interruptions_per_hour *
                              (double)restart_ms(b, site) / (double)HOUR_MS));
  return 1;
}

/* ---- a tick ---- */

/* A node-hour of shape a at site s: its GPUs at the site's price of the
 * type (spot when the shape is spot and a spot price is known); 0 when
 * unpriced. */
static int64_t
shape_price(const struct site *s, const struct adapter_shape *a)
{
  const struct site_rate *r = broker__site_rate(&s->cost, a->gpu_type);

  if (r == NULL)
    return 0;
  if (a->spot && r->spot_micro >= 0)
    return r->spot_micro * a->gpus;
  return r->per_gpu_hour_micro * a->gpus;
}

/* One site's inputs, its arrays in the tick's. */
struct site_in {
  struct site *site;
  struct scaler *sc;
  struct adapter_fleet fleet;
  struct burst_shape shapes[ADAPTER_MAX_SHAPES];
  struct burst_node *nodes;
  struct burst_job *jobs;
};

/* The site's shapes into in->shapes, priced, with their learned boots;
 * returns the boot of the cheapest per GPU (the fleet's boot_ms when
 * none is learned): what the forecast and a restart wait for. */
static int64_t
build_shapes(struct site_in *in)
{
  const struct adapter_fleet *f = &in->fleet;
  int64_t cheapest_boot = -1, cheapest = -1;

  for (size_t i = 0; i < f->nshapes; i++) {
    struct burst_shape *s = &in->shapes[i];

    s->name = f->shapes[i].name;
    s->gpu_type = f->shapes[i].gpu_type;
    s->gpus = f->shapes[i].gpus;
    s->price_micro = shape_price(in->site, &f->shapes[i]);
    s->spot = f->shapes[i].spot;
    s->boot_ms = burst_boot_estimate(&in->sc->boot[i], f->burst.boot_ms);
    if (cheapest < 0 || (s->gpus > 0 && s->price_micro / s->gpus < cheapest)) {
      cheapest = s->gpus > 0 ? s->price_micro / s->gpus : 0;
      cheapest_boot = s->boot_ms;
    }
  }
  return cheapest_boot > 0 ? cheapest_boot : f->burst.boot_ms;
}

static void
build_site(struct site_in *in, struct burst_site *bs, int64_t now)
{
  struct adapter_fleet *f = &in->fleet;
  struct scaler *sc = in->sc;
  int64_t boot;

  memset(bs, 0, sizeof(*bs));
  boot = build_shapes(in);
  in->nodes = xcalloc(f->nnodes + 1, sizeof(*in->nodes));
  for (size_t i = 0; i < f->nnodes; i++) {
    const struct adapter_fleet_node *n = &f->nodes[i];

    in->nodes[i] = (struct burst_node){
        .id = n->id,
        .shape = n->shape,
        .gpus_used = n->gpus_used,
        .launched_ms = n->launched_ms,
        .idle_since_ms = n->idle_since_ms,
        .up = n->up};
  }
  bs->name = in->site->name;
  bs->cfg = (struct burst_config){
      .min_nodes = f->min_nodes,
      .max_nodes = f->max_nodes,
      .idle_timeout_ms = f->idle_timeout_ms,
      .billing_ms = f->burst.billing_ms,
      .release_margin_ms = f->burst.release_margin_ms,
      .cooldown_ms = f->burst.cooldown_ms,
      .spend_cap_micro = f->burst.spend_cap_micro,
      .forecast = f->burst.forecast,
      /* the default project's: an idle node's keep is the site's */
      .wait_value_micro = in->site->broker->wait_value_micro};
  bs->shapes = in->shapes;
  bs->nshapes = f->nshapes;
  bs->nodes = in->nodes;
  bs->nnodes = f->nnodes;
  in->jobs = xcalloc(sc->njobs + 1, sizeof(*in->jobs));
  for (size_t i = 0; i < sc->njobs; i++) {
    in->jobs[i] = sc->demand[i].job;
    in->jobs[i].gpu_type = sc->demand[i].type[0] ? sc->demand[i].type : NULL;
  }
  bs->jobs = in->jobs;
  bs->njobs = sc->njobs;
  bs->forecast_gpus =
      f->burst.forecast ? burst_forecast_gpus(&sc->forecast, now + boot) : -1;
  bs->last_launch_ms = sc->last_launch_ms;
  bs->last_release_ms = sc->last_release_ms;
  bs->restart_ms = restart_ms(in->site->broker, in->site);
  bs->interruptions_per_hour = sc->interruptions_per_hour;
}

static const char *
action_of(const struct burst_plan *p)
{
  if (p->nlaunch > 0)
    return "launch";
  if (p->nrelease > 0)
    return "release";
  if (p->held != BURST_NONE)
    return "hold";
  return "none";
}

static enum burst_reason
reason_of(const struct burst_plan *p)
{
  if (p->nlaunch > 0)
    return p->launch_reason;
  if (p->nrelease > 0)
    return BURST_IDLE;
  return p->held;
}

/* The site as the plan leaves it, for views and metrics. */
static void
fill_view(struct site_in *in, const struct burst_site *bs,
          const struct burst_plan *p, int64_t now)
{
  struct scaler *sc = in->sc;
  struct scale_view *v = &sc->view;

  v->live = (int64_t)in->fleet.nnodes;
  v->launching = v->idle = v->busy = 0;
  for (size_t i = 0; i < in->fleet.nnodes; i++) {
    const struct adapter_fleet_node *n = &in->fleet.nodes[i];

    if (!n->up)
      v->launching++;
    else if (n->gpus_used == 0)
      v->idle++;
    else
      v->busy++;
  }
  /* As the plan leaves the site: launches coming, releases going. */
  v->launching += p->nlaunch;
  v->idle -= p->nrelease;
  v->live += p->nlaunch - p->nrelease;
  v->terminating = in->fleet.terminating + p->nrelease;
  v->wanted = p->wanted_nodes;
  v->demand_gpus = p->demand_gpus;
  v->forecast_gpus = bs->forecast_gpus;
  v->spend_micro = p->spend_micro;
  v->spend_cap_micro = bs->cfg.spend_cap_micro;
  v->boot_ms = bs->nshapes > 0 ? bs->shapes[0].boot_ms : in->fleet.burst.boot_ms;
  v->interruptions_per_hour = sc->interruptions_per_hour;
  v->at_ms = now;
  snprintf(sc->detail, sizeof(sc->detail), "%s", p->reason);
  v->detail = sc->detail;
  v->reason = burst_reason_name(reason_of(p));
  v->action = action_of(p);
}

/* The plan's view, metrics and, when it did something or its reason
 * changed, its row in the log. */
static void
record(struct broker *b, struct site_in *in, const struct burst_site *bs,
       const struct burst_plan *p, int64_t now)
{
  struct scaler *sc = in->sc;
  const char *action = action_of(p);
  enum burst_reason why = reason_of(p);
  char key[sizeof(sc->logged)];
  struct err e = {0};

  fill_view(in, bs, p, now);
  if (p->nlaunch > 0 || p->nrelease > 0 || p->held != BURST_NONE)
    sc->decisions[why]++;
  snprintf(key, sizeof(key), "%s %s", action, burst_reason_name(why));
  if (p->nlaunch == 0 && p->nrelease == 0 && strcmp(key, sc->logged) == 0)
    return;
  snprintf(sc->logged, sizeof(sc->logged), "%s", key);
  {
    struct db_scale r = {.at_ms = now,
                         .site = in->site->name,
                         .action = action,
                         .reason = burst_reason_name(why),
                         .launched = p->nlaunch,
                         .released = p->nrelease,
                         .live_nodes = (int64_t)in->fleet.nnodes,
                         .wanted_nodes = p->wanted_nodes,
                         .demand_gpus = p->demand_gpus,
                         .forecast_gpus = bs->forecast_gpus,
                         .spend_micro = p->spend_micro,
                         .detail = p->reason};

    if (db_scale_add(b->db, &r, &e) < 0)
      log_error("site %s: recording a decision: %s", in->site->name,
                err_msg(&e));
  }
  if (p->nlaunch > 0 || p->nrelease > 0)
    log_info("site %s: autoscaler: %s", in->site->name, p->reason);
}

/* The plan's launches will not be sent (the site backs off, or refused
 * them): out of p, so that neither scale() nor the view and the log
 * count them, and the line says so. */
static void
drop_launches(const struct burst_site *bs, struct burst_plan *p,
              const char *why)
{
  size_t len = strlen(p->reason);

  if (p->nlaunch == 0)
    return;
  /* What they would have cost (an unpriced shape's price, which the
   * policy took from the dearest, is not known here: counted as 0). */
  for (size_t k = 0; k < bs->nshapes && k < BURST_MAX_SHAPES; k++)
    if (bs->shapes[k].price_micro > 0)
      p->spend_micro -= p->launch[k] * bs->shapes[k].price_micro;
  p->wanted_nodes -= p->nlaunch;
  p->nlaunch = 0;
  memset(p->launch, 0, sizeof(p->launch));
  snprintf(p->reason + len, sizeof(p->reason) - len, "; not sent: %s", why);
}

/* Carry p out at the site: releases, then launches. */
static void
apply(struct site_in *in, const struct burst_site *bs, struct burst_plan *p,
      int64_t now)
{
  int64_t *release = xcalloc(bs->nnodes + 1, sizeof(*release));
  size_t nrelease = 0;
  struct err e = {0};
  char why[BURST_REASON_LEN + 32];

  for (size_t i = 0; i < bs->nnodes; i++)
    if (p->nodes[i] == BURST_IDLE)
      release[nrelease++] = bs->nodes[i].id;
  snprintf(why, sizeof(why), "released by the autoscaler: %s", p->reason);
  if (p->nlaunch > 0 || nrelease > 0) {
    if (in->site->ops->scale(in->site->ctx, p->launch, bs->nshapes, release,
                             nrelease, why, &e) < 0) {
      log_warn("site %s: autoscaler: %s", in->site->name, err_msg(&e));
      drop_launches(bs, p, err_msg(&e));
    }
    if (p->nlaunch > 0)
      in->sc->last_launch_ms = now;
    if (nrelease > 0)
      in->sc->last_release_ms = now;
  }
  free(release);
}

static void
scale_tick(struct broker *b)
{
  size_t n = 0;
  struct site_in *in = xcalloc(b->nsites + 1, sizeof(*in));
  struct burst_site *bs = xcalloc(b->nsites + 1, sizeof(*bs));
  struct burst_plan *plans = xcalloc(b->nsites + 1, sizeof(*plans));
  int64_t now = time_now_ms();
  int launched = 0;

  b->scale_last_ms = now;
  for (size_t i = 0; i < b->nsites; i++) {
    struct site *s = &b->sites[i];

    if (scaler_of(s) == NULL || s->ctx == NULL)
      continue;
    in[n].site = s;
    in[n].sc = scaler_of(s);
    s->ops->fleet(s->ctx, &in[n].fleet);
    track_up(in[n].sc, &in[n].fleet, 1);
    learn_hourly(b, s, in[n].sc, in[n].fleet.burst.forecast, now);
    build_site(&in[n], &bs[n], now);
    plans[n].nodes = xcalloc(in[n].fleet.nnodes + 1, sizeof(*plans[n].nodes));
    n++;
  }
  if (n > 0)
    burst_decide(now, bs, n, b->spend_cap_micro, plans);
  for (size_t i = 0; i < n; i++) {
    /* A site backing off launches nothing: no row of launches that were
     * never sent. */
    if (in[i].fleet.backing_off)
      drop_launches(&bs[i], &plans[i], "the site backs off");
    apply(&in[i], &bs[i], &plans[i], now);
    launched |= plans[i].nlaunch > 0;
    record(b, &in[i], &bs[i], &plans[i], now);
    free(plans[i].nodes);
    free(in[i].nodes);
    free(in[i].jobs);
    adapter_fleet_release(&in[i].fleet);
  }
  if (now - b->scale_pruned_ms >= HOUR_MS) {
    struct err e = {0};

    b->scale_pruned_ms = now;
    if (db_scale_prune(b->db, now - LOG_KEEP_MS, &e) < 0)
      log_warn("pruning the autoscaler log: %s", err_msg(&e));
  }
  free(in);
  free(bs);
  free(plans);
  /* New nodes have room: place the jobs that waited for them. */
  if (launched)
    broker__kick(b);
}

static void
scale_timer_cb(uv_timer_t *t)
{
  scale_tick(t->data);
}

/* ---- setup ---- */

const struct jsonx_field broker_policy_burst_fields[] = {
    {"tick_s", JX_INT}, {"spend_cap_per_hour", JX_NUMBER}, {NULL, 0}};

int
broker__autoscaler_open(struct broker *b, const json_t *cfg, struct err *e)
{
  const json_t *cap = NULL;
  int64_t tick_s;
  int rc;

  if (cfg != NULL && json_is_null(cfg))
    cfg = NULL;
  if (cfg != NULL && !json_is_object(cfg))
    return err_set(e, ERR_CONFIG, "field 'policy.burst': must be an object");
  rc = cfg != NULL ? jsonx_check(cfg, broker_policy_burst_fields, "policy.burst.", e) : 0;
  if (rc == 0)
    rc = jsonx_int(cfg, "tick_s", 1, 3600, SCALE_TICK_MS / 1000, &tick_s,
                   "policy.burst.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  cap = cfg != NULL ? json_object_get(cfg, "spend_cap_per_hour") : NULL;
  if (cap != NULL && !json_is_null(cap) &&
      price_dollars_to_micro(json_number_value(cap), PRICE_MAX_MICRO * 1000,
                             &b->spend_cap_micro) < 0)
    return err_set(e, ERR_CONFIG, "field 'policy.burst.spend_cap_per_hour': "
                   "must be dollars per hour, 0 or more");
  b->scale_tick_ms = tick_s * 1000;
  for (size_t i = 0; i < b->nsites; i++) {
    struct site *s = &b->sites[i];

    if (s->ops->fleet == NULL || s->ops->scale == NULL)
      continue;
    s->scaler = xcalloc(1, sizeof(*s->scaler));
    for (int k = 0; k < ADAPTER_MAX_SHAPES; k++)
      burst_boot_init(&s->scaler->boot[k]);
    burst_forecast_init(&s->scaler->forecast);
    seed(b, s, s->scaler);
  }
  return 0;
}

void
broker__autoscaler_start(struct broker *b)
{
  int any = 0;

  uv_timer_init(b->loop, &b->scale_timer);
  b->scale_timer.data = b;
  for (size_t i = 0; i < b->nsites; i++)
    any |= b->sites[i].scaler != NULL;
  if (any)
    uv_timer_start(&b->scale_timer, scale_timer_cb, 0,
                   (uint64_t)b->scale_tick_ms);
}

void
broker__autoscaler_close(struct broker *b)
{
  uv_timer_stop(&b->scale_timer);
  broker__close_handle(b, (uv_handle_t *)&b->scale_timer);
}

void
broker__autoscaler_free(struct broker *b)
{
  for (size_t i = 0; b->sites != NULL && i < b->nsites; i++) {
    struct scaler *sc = b->sites[i].scaler;

    if (sc == NULL)
      continue;
    free(sc->demand);
    free(sc->up);
    free(sc);
    b->sites[i].scaler = NULL;
  }
}

/* ---- views ---- */

int
broker_scale_view(struct broker *b, const char *site, struct scale_view *out)
{
  struct site *s = broker__site(b, site);

  if (s == NULL || s->scaler == NULL)
    return 0;
  *out = s->scaler->view;
  out->site = s->name;
  out->decisions = s->scaler->decisions;
  if (out->reason == NULL) {
    out->reason = "none";
    out->action = "none";
    out->detail = "no decision yet";
  }
  return 1;
}

struct log_visit {
  scale_decision_cb cb;
  void *arg;
};

static int
log_row(const struct db_scale *r, void *arg)
{
  struct log_visit *v = arg;
  struct scale_decision d = {
      .id = r->id,
      .at_ms = r->at_ms,
      .site = r->site,
      .action = r->action,
      .reason = r->reason,
      .detail = r->detail,
      .launched = r->launched,
      .released = r->released,
      .live_nodes = r->live_nodes,
      .wanted_nodes = r->wanted_nodes,
      .demand_gpus = r->demand_gpus,
      .forecast_gpus = r->forecast_gpus,
      .spend_micro = r->spend_micro};

  return v->cb(&d, v->arg);
}

int
broker_scale_log(struct broker *b, const char *site, int64_t before_id,
                 int64_t limit, scale_decision_cb cb, void *arg,
                 struct err *e)
{
  struct log_visit v = {cb, arg};

  if (site != NULL && broker__site(b, site) == NULL)
    return err_set(e, ERR_NOT_FOUND, "site '%.64s' not found", site);
  return db_scale_list(b->db, site, before_id, limit, log_row, &v, e);
}
