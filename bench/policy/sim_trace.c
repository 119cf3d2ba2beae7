/*
 * The synthetic trace (shared/research/placement-burst.md section 1.8):
 * non-homogeneous Poisson arrivals shaped by hour of day and weekend,
 * GPUs per job from a published mix, log-normal durations per size
 * class, early failures and cancellations, a share of deadline jobs and
 * of jobs that read a dataset.  Three weeks' worth from a Monday: a
 * warm-up week (the forecast learns from it, the queues fill), the
 * measured week, and two days after it so that the measured week's
 * last jobs start under load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define WARM_DAYS 7
#define MEASURED_DAYS 7
#define TAIL_DAYS 2
/* Samples of the expected GPU-time per job: fixed, so the duration
 * factor does not depend on --seed. */
#define LOAD_SAMPLES 400000
/* 1,000 x the week's ~1,600 jobs, three weeks' worth, with room. */
#define MAX_JOBS (SIM_MAX_SCALE * 6000LL)

uint64_t
sim_rng_next(struct sim_rng *r)
{
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double
sim_rng_uniform(struct sim_rng *r)
{
  return (double)(sim_rng_next(r) >> 11) / 9007199254740992.0;
}

double
sim_rng_lognormal(struct sim_rng *r, double median, double sigma)
{
  double u1 = sim_rng_uniform(r), u2 = sim_rng_uniform(r);
  double z = sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);

  return median * exp(sigma * z);
}

double
sim_rng_exp(struct sim_rng *r, double mean)
{
  return -mean * log(1.0 - sim_rng_uniform(r));
}

static int
draw_size(const struct sim_params *p, struct sim_rng *r)
{
  double u = sim_rng_uniform(r), acc = 0;

  for (int i = 0; i < p->nsizes; i++) {
    acc += p->size_share[i];
    if (u < acc)
      return i;
  }
  return p->nsizes - 1;
}

/* Of a job of size class k: its duration had it completed (before the
 * factor), and the fraction of it that it runs (1 when it completes). */
static double
draw_work_s(const struct sim_params *p, int k, struct sim_rng *r)
{
  return sim_rng_lognormal(r, p->dur_median_s[k], p->dur_sigma[k]);
}

static double
draw_fraction(const struct sim_params *p, int k, struct sim_rng *r,
              uint8_t *outcome)
{
  double u = sim_rng_uniform(r), f;

  if (u < p->completed[k]) {
    *outcome = 0;
    return 1.0;
  }
  f = sim_rng_uniform(r);
  if (u < p->completed[k] + p->cancelled[k]) {
    *outcome = 1;
    return f;
  }
  /* Failures come early: U^4 has mean 0.2 and median 0.06. */
  *outcome = 2;
  return f * f * f * f;
}

/* The factor that makes the expected offered load p->target_load: the
 * cap applies after the factor, so a few fixed-point steps find it. */
static double
duration_factor(const struct sim_params *p)
{
  struct sim_rng r = {0x5eed0f10adULL};
  double *gs = malloc(sizeof(double) * 2 * LOAD_SAMPLES), f = 1.0;
  double cap_s = (double)p->duration_cap_ms / 1000.0;
  double jobs_per_week, want;

  if (gs == NULL)
    return -1;
  for (int i = 0; i < LOAD_SAMPLES; i++) {
    int k = draw_size(p, &r);
    uint8_t o;

    gs[2 * i] = (double)p->size_gpus[k] * draw_fraction(p, k, &r, &o);
    gs[2 * i + 1] = draw_work_s(p, k, &r);
  }
  jobs_per_week = p->jobs_per_gpu_day * (double)(p->onprem_nodes * 8) *
                  (5 + 2 * p->weekend);
  want = p->target_load * (double)(p->onprem_nodes * 8) * 7 * 86400.0 /
         jobs_per_week;
  for (int step = 0; step < 8; step++) {
    double sum = 0, mean;

    for (int i = 0; i < LOAD_SAMPLES; i++)
      sum += gs[2 * i] * fmin(gs[2 * i + 1] * f, cap_s);
    mean = sum / LOAD_SAMPLES;
    f *= want / mean;
  }
  free(gs);
  return f;
}

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return (x > y) - (x < y);
}

/* The measured week's figures for the trace block. */
static void
describe(struct sim_trace *t)
{
  int64_t *runs = malloc(sizeof(int64_t) * (t->njobs + 1));
  double gpu_ms = 0;
  size_t n = 0, one = 0, multi = 0;

  t->measured = t->deadlines = t->with_dataset = 0;
  for (size_t i = 0; i < t->njobs; i++) {
    const struct sim_job *j = &t->jobs[i];

    if (j->submit_ms < t->t1_ms || j->submit_ms >= t->t2_ms)
      continue;
    t->measured++;
    t->deadlines += j->deadline_ms > 0;
    t->with_dataset += j->dataset >= 0;
    one += j->gpus == 1;
    multi += j->gpus > 8;
    gpu_ms += (double)j->gpus * (double)j->run_ms;
    if (runs != NULL)
      runs[n++] = j->run_ms;
  }
  t->offered_load = gpu_ms / ((double)t->onprem_gpus * (double)SIM_WEEK);
  t->share_1gpu = t->measured ? (double)one / (double)t->measured : 0;
  t->share_multinode = t->measured ? (double)multi / (double)t->measured : 0;
  if (runs != NULL && n > 0) {
    qsort(runs, n, sizeof(*runs), cmp_i64);
    t->run_p50_ms = runs[n / 2];
    t->run_p90_ms = runs[(size_t)((double)n * 0.90)];
    t->run_p99_ms = runs[(size_t)((double)n * 0.99)];
  }
  free(runs);
}

int
sim_trace_make(const struct sim_params *p, struct sim_trace *t, char *err,
               size_t errlen)
{
  struct sim_rng arr = {p->seed * 0x2545f4914f6cdd1dULL + 1};
  struct sim_rng job = {p->seed * 0x9e3779b97f4a7c15ULL + 2};
  int64_t now_day = 1800000000000LL / SIM_DAY, hours, cap;
  double factor, per_hour;
  size_t cap_jobs = 1024;

  memset(t, 0, sizeof(*t));
  /* 1970-01-01 was a Thursday: day d is a Monday when (d + 3) % 7 == 0. */
  t->t0_ms = (now_day - (now_day + 3) % 7) * SIM_DAY;
  t->t1_ms = t->t0_ms + WARM_DAYS * SIM_DAY;
  t->t2_ms = t->t1_ms + MEASURED_DAYS * SIM_DAY;
  t->end_ms = t->t2_ms + TAIL_DAYS * SIM_DAY;
  t->onprem_gpus = p->onprem_nodes * 8 * p->scale;
  factor = duration_factor(p);
  if (factor <= 0) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  t->duration_factor = factor;
  for (int d = 0; d < p->ndatasets && d < 256; d++)
    t->dataset_bytes[d] = (int64_t)(
        p->dataset_gb_lo * 1e9 *
        pow(p->dataset_gb_hi / p->dataset_gb_lo, sim_rng_uniform(&job)));
  /* Weekdays at rate r, weekend days at r x weekend, 2.4 a GPU a day on
   * average over the week. */
  per_hour = p->jobs_per_gpu_day * (double)t->onprem_gpus * 7 /
             (24 * (5 + 2 * p->weekend));
  t->jobs = malloc(sizeof(*t->jobs) * cap_jobs);
  if (t->jobs == NULL)
    goto oom;
  hours = (t->end_ms - t->t0_ms) / SIM_HOUR;
  cap = (int64_t)(factor * (double)p->duration_cap_ms);
  if (cap > p->duration_cap_ms)
    cap = p->duration_cap_ms;
  for (int64_t h = 0; h < hours; h++) {
    int dow = (int)(h / 24 % 7), hod = (int)(h % 24);
    double rate = per_hour * p->hourly[hod] * (dow >= 5 ? p->weekend : 1.0);
    double at = 0;

    if (rate <= 0)
      continue;
    for (;;) {
      struct sim_job *j;
      int k;
      double work_s, frac;

      /* Memoryless: the hour's arrivals are exponential gaps at its
       * rate, and the next hour starts afresh. */
      at += sim_rng_exp(&arr, 3600.0 / rate);
      if (at >= 3600.0)
        break;
      if (t->njobs >= (size_t)MAX_JOBS) {
        snprintf(err, errlen, "more than %lld jobs", (long long)MAX_JOBS);
        goto fail;
      }
      if (t->njobs == cap_jobs) {
        struct sim_job *g = realloc(t->jobs, sizeof(*g) * cap_jobs * 2);

        if (g == NULL)
          goto oom;
        t->jobs = g;
        cap_jobs *= 2;
      }
      j = &t->jobs[t->njobs++];
      memset(j, 0, sizeof(*j));
      j->submit_ms = t->t0_ms + h * SIM_HOUR + (int64_t)(at * 1000.0);
      k = draw_size(p, &job);
      j->gpus = (int32_t)p->size_gpus[k];
      work_s = draw_work_s(p, k, &job) * factor;
      frac = draw_fraction(p, k, &job, &j->outcome);
      j->work_ms = (int64_t)(work_s * 1000.0);
      if (j->work_ms > cap)
        j->work_ms = cap;
      if (j->work_ms < 10 * SIM_SEC)
        j->work_ms = 10 * SIM_SEC;
      j->predicted_ms = (int64_t)((double)j->work_ms *
                                  sim_rng_lognormal(&job, 1.0,
                                                    p->predict_sigma));
      if (j->predicted_ms < SIM_SEC)
        j->predicted_ms = SIM_SEC;
      /* Deadline jobs are production work: they complete. */
      if (sim_rng_uniform(&job) < p->deadline_share) {
        double f = p->deadline_lo +
                   (p->deadline_hi - p->deadline_lo) * sim_rng_uniform(&job);

        frac = 1.0;
        j->outcome = 0;
        j->deadline_ms = j->submit_ms + (int64_t)((double)j->work_ms * f);
      }
      j->run_ms = (int64_t)((double)j->work_ms * frac);
      if (j->run_ms < 10 * SIM_SEC)
        j->run_ms = 10 * SIM_SEC;
      if (j->run_ms > j->work_ms)
        j->run_ms = j->work_ms;
      j->dataset = -1;
      if (sim_rng_uniform(&job) < p->dataset_share)
        j->dataset = (int16_t)(sim_rng_next(&job) % (uint64_t)p->ndatasets);
    }
  }
  describe(t);
  return 0;
oom:
  snprintf(err, errlen, "out of memory");
fail:
  sim_trace_free(t);
  return -1;
}

void
sim_trace_free(struct sim_trace *t)
{
  if (t == NULL)
    return;
  free(t->jobs);
  t->jobs = NULL;
  t->njobs = 0;
}
