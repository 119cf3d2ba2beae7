/*
 * tenbin-sim: a week of GPU jobs on an owned site and three clouds, run
 * in simulated time under tenbin's own policies (policies/: placement,
 * burst, price) and under five re-implemented anchors, on one trace.
 *
 * The program is four files: sim_data.c reads the parameters (the
 * .tsv files in data/, every figure with its source), sim_trace.c draws
 * the trace from them, sim_run.c simulates one policy over it, and
 * sim.c runs them all and prints the comparison.  Nothing here is
 * shared with tenbind but policies/: the simulator is plain C, single
 * threaded, and deterministic for a seed.
 */
#ifndef TENBIN_BENCH_SIM_H
#define TENBIN_BENCH_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "policies/price.h"

#define SIM_SEC 1000LL
#define SIM_MIN (60 * SIM_SEC)
#define SIM_HOUR (3600 * SIM_SEC)
#define SIM_DAY (24 * SIM_HOUR)
#define SIM_WEEK (7 * SIM_DAY)

/* Bounds of the parameter files: a data file is small and read once. */
#define SIM_MAX_SIZES 16
#define SIM_MAX_CLOUDS 4
#define SIM_MAX_CURVE 16
#define SIM_NAME_LEN 24
#define SIM_ERR_LEN 256
/* The most --scale may be: 1,000 x 1,600 jobs a week still fit. */
#define SIM_MAX_SCALE 1000
/* A multi-node job spans at most this many nodes (64 GPUs of 8). */
#define SIM_MAX_JOB_NODES 8

/* A cloud's one node shape, on demand and spot. */
struct sim_cloud {
  char name[SIM_NAME_LEN];
  int64_t od_micro;       /* per node-hour */
  int64_t spot_micro;     /* per node-hour */
  double interrupts_per_hour; /* per spot node-hour */
  double ice, ice_spot;   /* chance a launch fails for want of capacity */
  double boot_median_s, boot_sigma;
  int64_t max_nodes;      /* at --scale 1 */
  int64_t egress_micro_per_gb;
};

struct sim_params {
  /* the workload */
  int nsizes;
  int64_t size_gpus[SIM_MAX_SIZES];
  double size_share[SIM_MAX_SIZES];     /* of the chosen mix, sums to 1 */
  double dur_median_s[SIM_MAX_SIZES];   /* per size, its class's */
  double dur_sigma[SIM_MAX_SIZES];
  double completed[SIM_MAX_SIZES], cancelled[SIM_MAX_SIZES]; /* shares */
  int64_t duration_cap_ms;
  double jobs_per_gpu_day;
  double hourly[24];                    /* divided by their mean */
  double weekend;
  double target_load;
  double deadline_share, deadline_lo, deadline_hi;
  double dataset_share;
  int ndatasets;
  double dataset_gb_lo, dataset_gb_hi;
  double dataset_bytes_per_s;
  double predict_sigma;
  int64_t checkpoint_ms;
  /* the sites */
  int64_t onprem_nodes, gpus_per_node;
  struct price_owned owned;
  int nclouds;
  struct sim_cloud clouds[SIM_MAX_CLOUDS];
  int64_t ice_ms, boot_timeout_ms, billing_min_ms;
  /* the policies */
  int64_t pass_gap_ms, tick_ms;
  int batch;
  int64_t bwb_suspend_ms, anchor_backoff_ms;
  int64_t spill_after_ms, spill_idle_ms, failover_after_ms;
  int64_t tenbin_idle_ms, tenbin_margin_ms, tenbin_cooldown_ms;
  int64_t tenbin_boot_ms, tenbin_backoff_ms;
  int tenbin_forecast;
  double tenbin_interrupt_prior;
  double wait_value;
  int ncurve;
  double curve[SIM_MAX_CURVE];
  /* the command line's */
  char mix[SIM_NAME_LEN];
  char diurnal[SIM_NAME_LEN];
  uint64_t seed;
  int64_t scale;
  double interrupt_x;   /* spot interruption rates x this */
  int overrun_grows;    /* predict overdue jobs' ends as they overrun */
};

/*
 * Read dir's workload.tsv, sites.tsv and policies.tsv into p, whose mix,
 * diurnal, seed, scale and interrupt_x the caller set.  0, or -1 with
 * what was wrong in err (errlen bytes), naming the file and line.
 */
int sim_params_load(const char *dir, struct sim_params *p, char *err,
                    size_t errlen);

/* One job of the trace.  Jobs are in submission order. */
struct sim_job {
  int64_t submit_ms;
  int64_t work_ms;      /* its duration had it completed */
  int64_t run_ms;       /* what it runs before it ends (<= work_ms) */
  int64_t predicted_ms; /* what tenbin predicts for work_ms */
  int64_t deadline_ms;  /* done by then (absolute); 0: none */
  int32_t gpus;
  int16_t dataset;      /* -1: none */
  uint8_t outcome;      /* 0 completed, 1 cancelled, 2 failed */
};

struct sim_trace {
  struct sim_job *jobs; /* new, freed by sim_trace_free */
  size_t njobs;
  int64_t t0_ms;        /* warm-up week from (a Monday, 00:00 UTC) */
  int64_t t1_ms;        /* the measured week [t1, t2) */
  int64_t t2_ms;
  int64_t end_ms;       /* arrivals and the simulation stop here */
  int64_t onprem_gpus;
  double duration_factor; /* every duration x this (target_load) */
  int64_t dataset_bytes[256];
  /* of the jobs submitted in the measured week */
  size_t measured, deadlines, with_dataset;
  double offered_load;  /* their GPU-time over the on-prem GPUs' week */
  int64_t run_p50_ms, run_p90_ms, run_p99_ms;
  double share_1gpu, share_multinode;
};

/* Draw the trace of p (seeded by p->seed).  0, or -1 with err. */
int sim_trace_make(const struct sim_params *p, struct sim_trace *t, char *err,
                   size_t errlen);
void sim_trace_free(struct sim_trace *t);

enum sim_policy {
  SIM_ONPREM_ONLY = 0,
  SIM_BURST_WHEN_BUSY,
  SIM_SPILL_5MIN,
  SIM_FAILOVER_10MIN,
  SIM_CHEAPEST_RENTED,
  SIM_TENBIN,
  SIM_NPOLICIES
};

/* "onprem-only", ... "tenbin" (static). */
const char *sim_policy_name(enum sim_policy p);

/* What one policy did in the measured week.  Money is micro-dollars. */
struct sim_result {
  enum sim_policy policy;
  double wait_value;      /* tenbin's; 0 for the anchors */
  int64_t sunk_micro, marginal_micro;
  int64_t cloud_compute_micro, cloud_idle_micro, egress_micro;
  int64_t wait_p50_ms, wait_p95_ms, wait_p99_ms, wait_mean_ms;
  int64_t jobs;           /* submitted in the measured week */
  int64_t unstarted;      /* of them, never started by the end */
  int64_t deadline_jobs, deadline_misses;
  int64_t launches, launch_failures, interruptions;
  int64_t lost_gpu_ms;    /* work lost to interruptions and moves */
  int64_t cloud_gpu_ms, onprem_gpu_ms;
  int64_t cloud_jobs;     /* ran (partly) in a cloud */
  /* deadline jobs that ran on spot: their cloud $ and what the same
   * GPU-time would cost on demand */
  int64_t dl_spot_jobs, dl_spot_misses, dl_spot_micro, dl_od_micro;
  int64_t dl_moved;       /* moved off spot by the safety net */
  double onprem_busy;     /* GPU-time run over the GPUs' time */
  double demand_mean, demand_p95, demand_max; /* (busy+queued)/GPUs, hourly */
  int64_t demand_hours_over;  /* hours whose demand exceeded the GPUs */
};

/* Simulate policy over t.  0, or -1 with err (out of memory only). */
int sim_run(const struct sim_params *p, const struct sim_trace *t,
            enum sim_policy policy, double wait_value, struct sim_result *out,
            char *err, size_t errlen);

/* splitmix64: one stream per use, so that each is fixed by the seed. */
struct sim_rng {
  uint64_t s;
};

uint64_t sim_rng_next(struct sim_rng *r);
double sim_rng_uniform(struct sim_rng *r);           /* [0, 1) */
double sim_rng_lognormal(struct sim_rng *r, double median, double sigma);
double sim_rng_exp(struct sim_rng *r, double mean);

#endif
