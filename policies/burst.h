/*
 * Burst policy: how many nodes of which shape an elastic site launches,
 * and which idle nodes it releases.  Pure: no I/O, no allocation, no
 * clock (DESIGN.md "policies/", "Burst").  tenbind's autoscaler
 * (broker/autoscaler.c) and the simulator (bench/policy) call the same
 * functions.
 *
 * The demand is decided elsewhere: the placement policy, run with each
 * elastic site as large as it may grow, says which queued jobs it would
 * send to a site if the site had the nodes (placement_candidate.grows).
 * Those jobs are this policy's input; it packs them onto new nodes,
 * adds what the forecast expects at the site one boot delay from now,
 * and bounds the result.
 *
 * The rules, per site, in order:
 *   1. Nodes below min_nodes are launched (MIN_NODES).
 *   2. Jobs of projects over budget are dropped (BUDGET); the others are
 *      packed first-fit decreasing onto the site's free GPUs that no job
 *      claims yet, then onto new nodes of the cheapest shape per GPU of
 *      their type that holds them (DEMAND).  A job with a deadline whose
 *      slack would not absorb an interruption and a restart takes no
 *      spot shape (burst_spot_safe).
 *   3. Forecast: when the forecast GPUs busy at now + boot delay exceed
 *      the GPUs of live nodes and of the launches of rule 2, nodes of
 *      the cheapest shape cover the difference (FORECAST), unless a
 *      node was released within the cool-down (COOLDOWN).
 *   4. Bounds: never more than max_nodes live (MAX_NODES), never a
 *      spend rate above the site's cap or, over all sites in order,
 *      the overall cap (SITE_CAP, TOTAL_CAP).  The rate counts every
 *      live node at its price per hour.
 *   5. Release: a node with no job, idle for idle_timeout_ms (or less:
 *      no longer than its idle time costs what the boot it saves a job
 *      is worth at the site's wait value), is
 *      released (IDLE) at the end of its paid billing unit: within
 *      release_margin_ms of it when billing_ms is longer than a minute
 *      (PAID until then).  Never below min_nodes, never within the
 *      cool-down after a launch (COOLDOWN), and never while the idle
 *      GPUs left after releasing it would not cover the expected demand
 *      (the forecast GPUs above those busy): hysteresis (HELD).
 *      A node is never released while jobs wait for the site to grow.
 * Nothing in a plan ever takes a site below min_nodes or above
 * max_nodes.
 *
 * How the rules are settled:
 *   - Prices: an unpriced shape costs what the dearest priced shape of
 *     its site costs (0 when none is priced: no cap bounds that site).
 *     "Cheapest per GPU" compares price / GPUs exactly; a tie goes to
 *     fewer GPUs, then to the earlier shape.
 *   - The base shape, of MIN_NODES and FORECAST launches, is the
 *     cheapest per GPU that is not spot (nodes launched ahead of demand
 *     must suit every job, deadlines too); a site with only spot shapes
 *     uses its cheapest spot shape.
 *   - Packing (rule 2): jobs by GPUs, most first (input order among
 *     equals), each onto the first live node (launching ones included)
 *     whose shape holds the job and whose unclaimed GPUs (gpus -
 *     gpus_used, less what earlier jobs claimed) suffice; else onto the
 *     first new node (the MIN_NODES ones, then those opened by earlier
 *     jobs) with room; else onto a new node of the cheapest shape per
 *     GPU of its type (NULL: any) with at least its GPUs.  A shape holds
 *     a job only if the job's type matches and, for a spot shape, when
 *     burst_spot_safe(now, deadline_ms, runtime_ms, restart_ms).  A job
 *     no shape holds is not demand: it counts in neither demand_gpus nor
 *     budget_gpus.  Jobs with gpus <= 0 are ignored.
 *   - Forecast (rule 3) runs only when cfg.forecast and forecast_gpus >=
 *     0; it counts the GPUs of the base shape's type on live nodes and on
 *     the launches of rules 1-2, and asks for gap / base GPUs nodes,
 *     rounded to the nearest (half up): a GPU or two of forecast is no
 *     reason to start a node.
 *   - Bounds (rule 4): the launches are admitted in the order asked
 *     (MIN_NODES, DEMAND in the order the jobs opened them, FORECAST),
 *     each while live + admitted < max_nodes, site rate + price <= the
 *     site cap and all sites' rate + price <= the overall cap.  A node a
 *     cap refuses lets a cheaper one asked after it through; held is the
 *     first refusal.  The overall rate starts at every site's live nodes
 *     (releases of this call free nothing), and each site's admitted
 *     launches add to it before the next site is planned.
 *   - Release (rule 5) looks at up, idle (gpus_used 0) nodes idle for
 *     idle_timeout_ms or, with a wait value, min(that, wait value x
 *     GPUs x the shape's boot_ms / node price), in input order, and keeps one for the first of:
 *     the site would drop to min_nodes (MIN_NODES); jobs are counted or
 *     a launch is asked (HELD); within cooldown_ms of last_launch_ms
 *     (COOLDOWN); hysteresis, cfg.forecast and forecast_gpus >= 0: the
 *     forecast GPUs minus the site's busy GPUs exceed the free GPUs of
 *     the site once this node is gone (HELD); billing_ms > 60 s and the
 *     paid unit (units run from launched_ms) ends more than
 *     release_margin_ms from now (PAID).  Else it is released (IDLE).
 *   - Cool-down: it holds FORECAST launches after a release and releases
 *     after a launch; MIN_NODES and DEMAND launches never wait.  A time
 *     of 0 in last_launch_ms / last_release_ms is "never".
 *   - wanted_nodes = live + nlaunch - nrelease; spend_micro is the live
 *     rate plus the launches less the releases.
 *   - Bounded: BURST_MAX_SHAPES shapes are read, the first
 *     BURST_MAX_LIVE live nodes take demand onto their free GPUs (later
 *     ones still count, spend and may be released), and a plan asks for
 *     at most BURST_MAX_LAUNCH nodes (the next call asks for the rest).
 */
#ifndef TENBIN_POLICIES_BURST_H
#define TENBIN_POLICIES_BURST_H

#include <stddef.h>
#include <stdint.h>

#define BURST_MAX_SHAPES 8
#define BURST_REASON_LEN 192
#define BURST_WEEK_HOURS 168
#define BURST_BOOT_SAMPLES 16
/* Live nodes per site whose free GPUs take demand (config caps
 * max_nodes here), and nodes one plan asks to launch per site: the work
 * of a plan is on the stack, with no allocation. */
#define BURST_MAX_LIVE 1024
#define BURST_MAX_LAUNCH 256

enum burst_reason {
  BURST_NONE = 0,   /* nothing to do */
  BURST_DEMAND,     /* launch: jobs wait for nodes only a launch gives */
  BURST_FORECAST,   /* launch: the usual demand, ahead of it */
  BURST_MIN_NODES,  /* launch: the site is below its minimum */
  BURST_IDLE,       /* release: idle past the timeout, paid time used */
  BURST_MAX_NODES,  /* launches cut: the site is at its maximum */
  BURST_SITE_CAP,   /* launches cut: the site's spend-rate cap */
  BURST_TOTAL_CAP,  /* launches cut: the overall spend-rate cap */
  BURST_COOLDOWN,   /* held: too soon after the last launch or release */
  BURST_PAID,       /* idle node kept: its billing unit is paid */
  BURST_HELD,       /* idle node kept: expected demand (hysteresis) */
  BURST_BUDGET,     /* demand left out: its projects are over budget */
  BURST_REASON_COUNT
};

/* "demand", "forecast", "min-nodes", "idle", "max-nodes", "site-cap",
 * "total-cap", "cooldown", "paid", "held", "budget", "none"; "unknown"
 * out of range (static). */
const char *burst_reason_name(enum burst_reason r);

/* A shape a site can launch. */
struct burst_shape {
  const char *name;       /* borrowed */
  const char *gpu_type;   /* lowercase; borrowed */
  int64_t gpus;           /* per node, > 0 */
  int64_t price_micro;    /* per node-hour; 0: unpriced (taken as the
                             dearest priced shape of the site) */
  int spot;               /* may be interrupted */
  int64_t boot_ms;        /* launch to usable (burst_boot_estimate) */
};

/* A live node (launching, booting or up; not terminating). */
struct burst_node {
  int64_t id;
  int shape;              /* index into the site's shapes */
  int64_t gpus_used;      /* by jobs on it (0: idle) */
  int64_t launched_ms;    /* billing starts here */
  int64_t idle_since_ms;  /* when its last job left, or launched_ms */
  int up;                 /* registered: 0 while launching or booting */
};

/* A queued job the placement policy would send to the site if it grew. */
struct burst_job {
  int64_t gpus;           /* on one node, > 0 */
  const char *gpu_type;   /* NULL: any; borrowed */
  int over_budget;        /* its project may not spend here */
  int64_t deadline_ms;    /* when it must be done (absolute); 0: none */
  int64_t runtime_ms;     /* predicted */
};

/* A site's settings (its config's "burst" block). */
struct burst_config {
  int64_t min_nodes, max_nodes;
  int64_t idle_timeout_ms;
  int64_t billing_ms;        /* the provider's billing unit; <= 60 s:
                                per second, released at the timeout */
  int64_t release_margin_ms; /* how near a unit's end a release goes */
  int64_t cooldown_ms;
  int64_t spend_cap_micro;   /* $ per hour of live nodes; 0: no cap */
  int forecast;              /* launch ahead of forecast demand */
  int64_t wait_value_micro;  /* $ a GPU-hour of waiting is worth (the
                                default project's); an idle node is
                                kept no longer than its cost stays below
                                the boot it would save a job of its
                                size: price x t = wait value x GPUs x
                                boot.  0: idle_timeout_ms alone */
};

struct burst_site {
  const char *name;          /* borrowed */
  struct burst_config cfg;
  const struct burst_shape *shapes;  /* nshapes <= BURST_MAX_SHAPES */
  size_t nshapes;
  const struct burst_node *nodes;
  size_t nnodes;
  const struct burst_job *jobs;
  size_t njobs;
  int64_t forecast_gpus;     /* burst_forecast_gpus at now + the boot
                                delay of the cheapest shape; -1: none */
  int64_t last_launch_ms;    /* kept by the caller from plans it applied;
                                0: never */
  int64_t last_release_ms;
  int64_t restart_ms;        /* what an interruption costs a job in time:
                                a new node's boot and the lost work */
  double interruptions_per_hour; /* of a spot node, learned
                                (burst_interruption_rate); 0: one
                                interruption is all a job must absorb */
};

/* What one site should do now. */
struct burst_plan {
  int64_t launch[BURST_MAX_SHAPES];  /* nodes to launch, per shape */
  int64_t nlaunch;
  enum burst_reason launch_reason;   /* DEMAND, FORECAST, MIN_NODES or
                                        NONE; the first that asked,
                                        even when a bound cut it */
  enum burst_reason held;            /* why fewer were launched than
                                        asked (MAX_NODES, SITE_CAP,
                                        TOTAL_CAP, COOLDOWN), BUDGET when
                                        demand was left out, or NONE */
  /* Per node of the input, in its order; the caller's array, nnodes
   * long: IDLE to release it; PAID, HELD, COOLDOWN or MIN_NODES for an
   * idle node kept; NONE otherwise. */
  enum burst_reason *nodes;
  int64_t nrelease;
  int64_t demand_gpus;      /* of the jobs counted */
  int64_t budget_gpus;      /* of the jobs left out for their budget */
  int64_t wanted_nodes;     /* live nodes once the plan is applied */
  int64_t spend_micro;      /* $ per hour of those */
  char reason[BURST_REASON_LEN]; /* one line for the log, e.g. "launch
                                    2 x p5 (demand: 3 jobs, 24 GPUs
                                    waiting)", "release node 17 (idle
                                    600 s, paid hour ends in 40 s)",
                                    "hold: spend cap $110/h reached at
                                    site", "nothing to do" */
};

/*
 * Plan every site: plans[i] for sites[i], each plans[i].nodes set by the
 * caller to an array of sites[i].nnodes.  total_cap_micro bounds the
 * spend rate of all sites together ($ per hour; 0: none); the sites
 * earlier in the array get the room first.
 */
void burst_decide(int64_t now_ms, const struct burst_site *sites,
                  size_t nsites, int64_t total_cap_micro,
                  struct burst_plan *plans);

/*
 * 1 when a job with deadline_ms (0: none) that needs remaining_ms more
 * of work can run on spot now: the time left absorbs one interruption
 * and a restart (restart_ms) on top of the work.  Else 0: the job goes
 * on demand (Can't Be Late's safety net).
 */
int burst_spot_safe(int64_t now_ms, int64_t deadline_ms, int64_t remaining_ms,
                    int64_t restart_ms);

/*
 * The slack a spot job needs: restart_ms for each interruption expected
 * over remaining_ms at per_hour (rounded up), and at least one.  The
 * plan's packing passes it to burst_spot_safe; so should a caller that
 * asks the same question of a job.
 */
int64_t burst_restart_allowance(int64_t restart_ms, double per_hour,
                                int64_t remaining_ms);

/* Demand by hour of the week (Monday 00:00 UTC is hour 0). */
struct burst_forecast {
  int64_t gpu_ms[BURST_WEEK_HOURS];  /* GPU-milliseconds busy */
  int64_t seen_ms[BURST_WEEK_HOURS]; /* milliseconds of history */
};

/* Empty: no history. */
void burst_forecast_init(struct burst_forecast *f);
/* History was watched over [from_ms, to_ms): each hour-of-week bucket it
 * crosses has that much more time seen. */
void burst_forecast_cover(struct burst_forecast *f, int64_t from_ms,
                          int64_t to_ms);
/* gpus GPUs were busy over [from_ms, to_ms). */
void burst_forecast_add(struct burst_forecast *f, int64_t from_ms,
                        int64_t to_ms, int64_t gpus);
/* The mean GPUs busy in the hour of the week at_ms falls in, rounded up;
 * -1 when less than an hour of history covers that hour. */
int64_t burst_forecast_gpus(const struct burst_forecast *f, int64_t at_ms);

/* Observed boots (launch to registration) of one site and shape. */
struct burst_boot {
  int64_t samples[BURST_BOOT_SAMPLES]; /* the latest, a ring */
  int n;                               /* samples held */
  int next;                            /* where the next one goes */
};

void burst_boot_init(struct burst_boot *b);
/* One boot took ms (ignored when <= 0). */
void burst_boot_add(struct burst_boot *b, int64_t ms);
/* The median of the boots held (of an even count, the mean of the
 * middle two rounded up), or default_ms when none is. */
int64_t burst_boot_estimate(const struct burst_boot *b, int64_t default_ms);

/*
 * Spot interruptions per node-hour, learned: interruptions over
 * spot_node_ms of spot nodes' uptime, with prior_per_hour weighing as
 * one day of uptime (so a few hours without one do not make it 0).
 */
double burst_interruption_rate(int64_t interruptions, int64_t spot_node_ms,
                               double prior_per_hour);

#endif
