/*
 * Placement policy: pure decisions, no I/O (DESIGN.md "policies/").
 *
 * Input: one job's resource request and a snapshot of every site.
 * Output: place now at a site, wait (fits somewhere, not right now), or
 * never (no site could ever run it: the REST layer answers 422), with a
 * verdict and a reason for every candidate site so that "why is my job
 * still queued" has an answer.
 *
 * Policies sit behind struct placement_policy: "first-fit" takes the
 * first site in order that fits now; "cost" (cost.c) takes the site
 * where compute $ + data $ + waiting $ is least.  Both judge a site's
 * fit the same way (NEVER / WAIT / NOW, placement.c).  Everything here
 * is borrowed from the caller for the length of one call: no policy
 * keeps a pointer, allocates, or reads a clock.
 */
#ifndef TENBIN_POLICIES_PLACEMENT_H
#define TENBIN_POLICIES_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* 50 sites (a few regions of three clouds, and on-prem) must fit. */
#define PLACEMENT_MAX_SITES 64
#define PLACEMENT_MAX_POOLS 8
#define PLACEMENT_REASON_LEN 160
/* A decision's reason names every site with its own. */
#define PLACEMENT_SUMMARY_LEN 1024

struct placement_pool {
  const char *type;  /* borrowed */
  int64_t total;
  int64_t free;
  int64_t per_node;  /* most of this type on one node */
  int64_t grow;      /* elastic: GPUs of total not up yet, that
                        starting nodes gives (not in free) */
};

struct placement_site {
  const char *name;  /* borrowed */
  int reachable;
  const char *closed;    /* why the job may not use the site now (its
                            project spent its budget), or NULL; the site
                            is then waited for, like an unreachable one;
                            borrowed */
  int unknown;       /* never reached yet: nodes and pools say nothing */
  const char *detail; /* the site's own news ("no GPUs: nvidia-smi is not
                         on PATH"), or NULL; borrowed */
  int64_t nodes;
  int grows_on_submit; /* a job that needs growth goes now: the site
                          starts nodes itself (Slurm power saving);
                          0: it waits for tenbin to launch them */
  int64_t max_jobs;      /* 0 = no cap */
  int64_t jobs_active;
  int npools;
  struct placement_pool pools[PLACEMENT_MAX_POOLS];
};

struct placement_request {
  int64_t gpus;          /* total */
  const char *gpu_type;  /* NULL = any */
  int64_t nodes;
  int64_t gpus_per_node; /* 0 = not given */
  const char *site;      /* pinned, or NULL */
};

enum placement_verdict { PLACEMENT_NOW = 0, PLACEMENT_WAIT, PLACEMENT_NEVER };

/* Why the cost policy left a candidate out of its ranking. */
enum placement_excluded {
  PLACEMENT_RANKED = 0,        /* not left out: ranked by its total */
  PLACEMENT_EXCLUDED_SITE,     /* never fits, unreachable or not reached */
  PLACEMENT_EXCLUDED_DATA,     /* data missing there and no way to send it */
  PLACEMENT_EXCLUDED_DEADLINE, /* starts after the deadline, another not */
};

/* The numbers come before the words: a pass over many jobs writes the
 * numbers of every candidate, and the words of few (two cache lines a
 * candidate, not three). */
struct placement_candidate {
  const char *site;      /* borrowed from the snapshot */
  enum placement_verdict verdict;
  double score;          /* higher is better among NOW candidates (cost:
                            minus the total in dollars) */
  int index;             /* of the site in the snapshot */
  /* The cost policy's terms; first-fit leaves them 0.  Money is -1 where
   * not estimated (an excluded site, or no price known anywhere). */
  enum placement_excluded excluded;
  int priced;            /* compute_micro is at the site's own rate */
  int held;              /* starts behind the reservation of an older job */
  int grows;             /* fits only once the site grows: the GPUs
                            free are too few, free + grow enough */
  const char *type;      /* GPU type it would take, borrowed; NULL: none */
  int64_t start_ms;      /* predicted start (absolute); -1: none */
  int64_t runtime_ms;
  int64_t compute_micro;
  int64_t data_micro;
  int64_t waiting_micro;
  int64_t total_micro;
  char reason[PLACEMENT_REASON_LEN];
};

struct placement_decision {
  enum placement_verdict verdict;
  int site;              /* index into the snapshot when NOW, else -1 */
  int pick;              /* cost: index of the site it runs at or waits
                            for, -1 when none; first-fit: as site */
  char reason[PLACEMENT_SUMMARY_LEN];
  size_t ncandidates;
  struct placement_candidate candidates[PLACEMENT_MAX_SITES];
};

/*
 * The cost policy's inputs (cost.c).  Its model, per site that can run
 * the job:
 *
 *   start    the earliest time the site has the job's GPUs of its type:
 *            now when they are free and no reservation holds them
 *            (placement_reservation); else the first predicted end of a
 *            running job by which free + freed GPUs cover the GPUs
 *            waiting ahead (ahead_gpus) plus the job's.  Beyond the
 *            known ends, the type is taken to turn over once per
 *            predicted runtime (this job's, the only one known).  At its
 *            job cap a site starts nothing before its first end.  The
 *            start is then at least now + boot_ms and now + the data's
 *            transfer time: staging overlaps the wait for capacity.
 *            An elastic site's job that needs growth (free too few,
 *            free + grow enough) starts at now + grow_ms.
 *   compute  price_charge(rate, GPUs, runtime): the marginal rate of an
 *            owned site, the price of a rented one (its spot rate for
 *            a job that may run on spot, where the site has one).
 *   data     missing bytes x egress $/GB (10^9 bytes) of the source.
 *   waiting  price_charge(wait_value, GPUs, start - now).
 *
 * It picks the least total (ties: earlier start, then a site with room
 * now, then snapshot order).  Waiting for an owned site wins when that
 * is cheaper than renting; as every pass decides again, a job whose
 * predicted wait grows moves to a rented site.  With a deadline, sites
 * that would start the job after it are left out while one starts it
 * in time.  Fragmentation (GPUs free, but on different nodes) is not
 * modelled.
 *
 * Unpriced: a type without a price (pool.priced 0, or no cost block) is
 * never $0, which would make it the cheapest: it is charged the dearest
 * rate among the job's priced candidates and marked priced = 0.  When
 * no candidate is priced, compute is unknown (-1) everywhere and the
 * sites are ranked by data and waiting $ alone.
 *
 * No starvation: the caller keeps, per GPU type, the reservation of the
 * oldest job that waits (placement_cost_reservation).  At the reserved
 * site a younger job of that type may take free GPUs only when it is
 * predicted to end by the reserved start; otherwise it is held behind
 * it.  Only that oldest job is protected (EASY backfilling).
 *
 * Calling sequence, for a pass over the queue:
 *   1. Snapshot the sites (placement_site) and build their cost blocks
 *      (placement_cost_site): per pool its rate, and its running jobs'
 *      predicted ends in order with running sums of their GPUs.
 *   2. For each job, oldest first: fill a placement_cost (now_ms, the
 *      predicted runtime, the project's wait_value, the deadline, the
 *      job's dataset per site, the reservations made so far) and call
 *      placement_cost_decide (words: placement_cost_explain, or
 *      decide_cost for both).
 *   3. NOW: take the job's GPUs from the pick's pool free, as first-fit's
 *      caller does.  WAIT with a pick: add the job's GPUs to the
 *      ahead_gpus of the pick's pool of candidate type; if no
 *      reservation names that type yet, the job is its oldest waiting
 *      one: append placement_cost_reservation's.
 * Nothing is kept from one pass to the next: each pass decides again.
 */

/* A running job's predicted end, and the GPUs free by then. */
struct placement_end {
  int64_t end_ms;  /* ascending along the array */
  int64_t freed;   /* GPUs of the type this end and every earlier one
                      free: a running sum, searched by bisection */
};

/* One pool's GPU type at a site; several pools of one type: the first
 * pool's entry speaks for the type, the others are not read. */
struct placement_cost_pool {
  int priced;          /* 0: no price for the type here (see above) */
  int64_t rate_micro;  /* per GPU-hour: marginal when owned, else price */
  int spot_priced;     /* the site would run a job that may take spot on
                          spot, at spot_rate_micro (with what the
                          interruptions are expected to cost) */
  int64_t spot_rate_micro;
  int64_t ahead_gpus;  /* GPUs of older jobs that wait for this type
                          here and are not in the pool's free (the
                          site's own queue beyond free, tenbin's queue) */
  const struct placement_end *ends; /* running jobs of the type; borrowed */
  size_t nends;
};

/* A site's cost block.  Owned or rented shows in its rates alone. */
struct placement_cost_site {
  int64_t boot_ms;     /* dispatch to a node able to run the job (a cloud
                          node to boot), 0 when its nodes are up */
  int64_t grow_ms;     /* a job that needs the site to grow starts no
                          sooner than now + this (a new node's boot) */
  struct placement_cost_pool pools[PLACEMENT_MAX_POOLS]; /* as site pools */
};

/* The job's dataset version at one site. */
struct placement_data {
  int64_t missing_bytes;       /* not there yet; 0: complete there */
  int64_t egress_micro_per_gb; /* of the site it would come from */
  int64_t bytes_per_s;         /* to this site; <= 0: cannot receive */
};

/* Capacity held for the oldest waiting job of a GPU type. */
struct placement_reservation {
  const char *type;    /* borrowed */
  int site;            /* index into the snapshot */
  int64_t start_ms;
};

/* One job's cost inputs.  Arrays are borrowed, nsites long, parallel to
 * the snapshot. */
struct placement_cost {
  int64_t now_ms;
  int64_t runtime_ms;        /* predicted by the caller; > 0 */
  int64_t wait_value_micro;  /* the project's $ per GPU-hour of waiting */
  int64_t deadline_ms;       /* latest start (absolute); 0: none */
  int spot_ok;               /* the job may run on spot: a pool's
                                spot_rate_micro is its compute rate */
  const struct placement_cost_site *sites; /* NULL: nothing priced */
  const struct placement_data *data;       /* NULL: no dataset */
  const struct placement_reservation *reservations;
  size_t nreservations;
};

struct placement_policy {
  const char *name;
  void (*decide)(const struct placement_request *req,
                 const struct placement_site *sites, size_t nsites,
                 struct placement_decision *out);
  /* The decision with cost inputs, reasons included; NULL for a policy
   * that reads none (first-fit).  decide is this with cost NULL. */
  void (*decide_cost)(const struct placement_request *req,
                      const struct placement_site *sites, size_t nsites,
                      const struct placement_cost *cost,
                      struct placement_decision *out);
};

/* The policy of that name, or NULL. */
const struct placement_policy *placement_policy_find(const char *name);

/*
 * The cost policy's decision without its words: verdict, pick and every
 * candidate's terms, with every reason empty.  A pass over many jobs
 * calls this, and placement_cost_explain only for the decisions it
 * stores or shows (the words cost more than the numbers).  cost may be
 * NULL: no prices, no runtimes; the pick is then first-fit's.
 */
void placement_cost_decide(const struct placement_request *req,
                           const struct placement_site *sites, size_t nsites,
                           const struct placement_cost *cost,
                           struct placement_decision *out);
/* Write the reasons of d, decided by placement_cost_decide from the same
 * inputs: every candidate's and the decision's. */
void placement_cost_explain(const struct placement_request *req,
                            const struct placement_site *sites,
                            size_t nsites, const struct placement_cost *cost,
                            struct placement_decision *d);
/*
 * The reservation that d, the decision for the oldest waiting job of its
 * GPU type, makes: 1 and *out set when the job waits for a site, else 0
 * (placed now, never placeable, or needs no GPUs).  Its type is
 * borrowed from the snapshot.
 */
int placement_cost_reservation(const struct placement_request *req,
                               const struct placement_decision *d,
                               struct placement_reservation *out);

#endif
