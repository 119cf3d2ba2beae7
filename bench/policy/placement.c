/*
 * tenbin-bench-placement: how long one placement pass of the cost policy
 * takes with 10,000 queued jobs over 50 sites, on one core.
 *
 * The world is drawn once from a fixed seed, with the mixes of
 * shared/research/placement-burst.md: two owned sites (96 H100, 64
 * A100) and 48 rented ones in regions of AWS, GCP and Azure with H100,
 * A100, A10G and L4 pools at their list prices; pools 70-90 % busy
 * with running jobs whose remaining times are log-normal; queued jobs
 * asking 1 GPU (72 %), 2-8 (23 %, mostly 8) or 16-64 (5 %), a type
 * (H100 60 %, A100 25 %, L4/A10G 10 %, any 5 %; multi-GPU ones H100),
 * runtimes log-normal around a 200 s median with a 2 h p90, a third
 * with a dataset missing at the rented sites, one in twenty with a
 * deadline.  Ten thousand queued jobs is a backlog: most of them wait,
 * so nearly every site of nearly every decision predicts a start from
 * its running jobs' ends, the costliest case.
 *
 * A pass walks the queue oldest first as the scheduler would: decide,
 * take the GPUs of a job placed now from the snapshot, count a waiting
 * job's GPUs as queued ahead at the site it waits for, and keep the
 * reservation of the oldest waiting job of each type.  Each repetition
 * starts from the same snapshot.  Printed: the median pass (numbers
 * only, as a pass runs), the same with every decision's words written
 * (placement_cost_explain), and first-fit's pass for scale.
 *
 * Usage: tenbin-bench-placement [repetitions]   (default 21)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "policies/placement.h"
#include "policies/price.h"

#define NSITES 50
#define NJOBS 10000
#define NDATASETS 20
#define MAX_ENDS 256
#define SEC 1000LL
#define HOUR (3600 * SEC)
#define NOW (1800000000LL * SEC)

enum { H100, A100, A10G, L4, NTYPES };
static const char *const type_names[NTYPES] = {"h100", "a100", "a10g", "l4"};
/* A job's spec spells its type in memory of its own, as in the broker:
 * no pointer is shared with the snapshot's. */
static const char job_types[NTYPES][8] = {"H100", "A100", "A10G", "L4"};

struct job {
  struct placement_request req;
  int64_t runtime_ms;
  int64_t wait_value_micro;
  int64_t deadline_ms;
  int dataset; /* -1: none */
};

struct world {
  struct placement_site sites[NSITES];
  struct placement_cost_site costs[NSITES];
  /* Every pool's running jobs in one array, one pool after another, as
   * a broker would build them for a pass. */
  struct placement_end ends[NSITES * PLACEMENT_MAX_POOLS * MAX_ENDS];
  size_t nends;
  char types[NSITES][PLACEMENT_MAX_POOLS][8];
  struct placement_data data[NDATASETS][NSITES];
  struct job jobs[NJOBS];
};

static uint64_t rng_state = 0x7e2b1e5cULL;

/* splitmix64: a fixed seed gives the same world every run. */
static uint64_t
rng(void)
{
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double
uniform(void)
{
  return (double)(rng() >> 11) / 9007199254740992.0;
}

static double
lognormal(double median, double sigma)
{
  double u1 = uniform(), u2 = uniform();
  double z = sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);

  return median * exp(sigma * z);
}

/* Runtimes: median 200 s, p90 2 h (sigma = ln(36) / 1.2816), at most a
 * week; larger jobs run longer. */
static int64_t
runtime_ms(int64_t gpus)
{
  double s = lognormal(200.0, 2.8) * (1.0 + log2((double)gpus));

  if (s > 7 * 86400.0)
    s = 7 * 86400.0;
  return (int64_t)(s * 1000.0) + SEC;
}

static int64_t
job_gpus(void)
{
  double u = uniform();

  if (u < 0.722)
    return 1;
  if (u < 0.742)
    return 2;
  if (u < 0.787)
    return 4;
  if (u < 0.947)
    return 8;
  if (u < 0.977)
    return 16;
  if (u < 0.992)
    return 32;
  return 64;
}

static int
cmp_end(const void *a, const void *b)
{
  const struct placement_end *x = a, *y = b;

  return (x->end_ms > y->end_ms) - (x->end_ms < y->end_ms);
}

/* A pool of type t, its price, and the running jobs that keep it
 * 70-90 % busy, by predicted end with running sums of GPUs. */
static void
add_pool(struct world *w, int i, int t, int64_t nodes, int64_t per_node,
         int64_t rate_micro)
{
  struct placement_site *s = &w->sites[i];
  int k = s->npools++;
  struct placement_pool *p = &s->pools[k];
  struct placement_cost_pool *cp = &w->costs[i].pools[k];
  struct placement_end *ends = &w->ends[w->nends];
  int64_t busy = 0, target;
  size_t n = 0;

  /* Each site's adapter reports its types in strings of its own. */
  snprintf(w->types[i][k], sizeof(w->types[i][k]), "%s", type_names[t]);
  p->type = w->types[i][k];
  p->total = nodes * per_node;
  p->per_node = per_node;
  if (nodes > s->nodes)
    s->nodes = nodes;
  target = (int64_t)((double)p->total * (0.7 + 0.2 * uniform()));
  while (busy < target && n < MAX_ENDS) {
    int64_t g = job_gpus();

    if (g > per_node)
      g = per_node;
    if (busy + g > p->total)
      g = p->total - busy;
    ends[n].end_ms = NOW + (int64_t)(uniform() * (double)runtime_ms(g));
    ends[n].freed = g;
    busy += g;
    n++;
  }
  qsort(ends, n, sizeof(ends[0]), cmp_end);
  for (size_t e = 1; e < n; e++)
    ends[e].freed += ends[e - 1].freed;
  p->free = p->total - busy;
  cp->priced = 1;
  cp->rate_micro = rate_micro;
  cp->ends = ends;
  cp->nends = n;
  w->nends += n;
  s->jobs_active += (int64_t)n;
}

static void
build(struct world *w)
{
  /* Per GPU-hour, micro-dollars: AWS, GCP, Azure list prices. */
  static const int64_t rates[3][NTYPES] = {
      {6880000, 2745000, 1006000, 805000},
      {11060000, 3674000, 1100000, 705000},
      {12290000, 3400000, 1200000, 900000}};
  static char names[NSITES][32];

  memset(w, 0, sizeof(*w));
  for (int i = 0; i < NSITES; i++) {
    struct placement_site *s = &w->sites[i];

    s->reachable = 1;
    if (i == 0) {
      s->name = "onprem";
      add_pool(w, i, H100, 12, 8, 80000);
      continue;
    }
    if (i == 1) {
      s->name = "onprem-a100";
      add_pool(w, i, A100, 8, 8, 60000);
      continue;
    }
    snprintf(names[i], sizeof(names[i]), "%s-region-%02d",
             (const char *[]){"aws", "gcp", "azure"}[i % 3], i);
    s->name = names[i];
    w->costs[i].boot_ms = (int64_t)(lognormal(300.0, 0.6) * 1000.0);
    add_pool(w, i, H100, 2 + (int64_t)(uniform() * 8), 8, rates[i % 3][H100]);
    if (i % 2 == 0)
      add_pool(w, i, A100, 2 + (int64_t)(uniform() * 6), 8,
               rates[i % 3][A100]);
    add_pool(w, i, i % 2 ? A10G : L4, 8 + (int64_t)(uniform() * 24), 1,
             rates[i % 3][i % 2 ? A10G : L4]);
  }
  /* Datasets live on-prem; 10 GB - 10 TB of each is missing elsewhere,
   * sent at 1 GB/s, paid at $0.09 a GB. */
  for (int v = 0; v < NDATASETS; v++) {
    int64_t bytes = (int64_t)(1e10 * pow(1000.0, uniform()));

    for (int i = 2; i < NSITES; i++) {
      w->data[v][i].missing_bytes = bytes;
      w->data[v][i].egress_micro_per_gb = 90000;
      w->data[v][i].bytes_per_s = 1000000000LL;
    }
  }
  for (int j = 0; j < NJOBS; j++) {
    struct job *b = &w->jobs[j];
    double u = uniform();

    b->req.gpus = job_gpus();
    b->req.nodes = b->req.gpus > 8 ? b->req.gpus / 8 : 1;
    /* Multi-GPU jobs train on big GPUs. */
    if (b->req.gpus > 1 && u >= 0.85)
      u = 0.0;
    b->req.gpu_type = u < 0.60   ? job_types[H100]
                      : u < 0.85 ? job_types[A100]
                      : u < 0.90 ? job_types[L4]
                      : u < 0.95 ? job_types[A10G]
                                 : NULL;
    b->runtime_ms = runtime_ms(b->req.gpus);
    b->wait_value_micro = (int64_t[]){1, 4, 10}[rng() % 3] * PRICE_MICRO;
    b->deadline_ms = uniform() < 0.05
                         ? NOW + (int64_t)(600.0 + uniform() * 6 * 3600.0) *
                                     SEC
                         : 0;
    b->dataset = uniform() < 0.33 ? (int)(rng() % NDATASETS) : -1;
  }
}

/* The pool of site i that carries type (the snapshot's own pointer). */
static int
pool_of(const struct placement_site *s, const char *type)
{
  for (int k = 0; k < s->npools; k++) {
    if (s->pools[k].type == type)
      return k;
  }
  return -1;
}

struct tally {
  int now, wait, never;
};

/* One pass over the queue; explain: write every decision's words too. */
static void
pass(const struct world *w0, struct placement_site *sites,
     struct placement_cost_site *costs, int policy_cost, int explain,
     struct tally *t)
{
  const struct placement_policy *ff = placement_policy_find("first-fit");
  struct placement_reservation res[NTYPES];
  struct placement_decision d;
  struct placement_cost cost;
  size_t nres = 0;

  memset(t, 0, sizeof(*t));
  memset(&cost, 0, sizeof(cost));
  cost.now_ms = NOW;
  cost.sites = costs;
  cost.reservations = res;
  for (int j = 0; j < NJOBS; j++) {
    const struct job *b = &w0->jobs[j];
    const struct placement_candidate *c = NULL;
    int k;

    if (!policy_cost) {
      ff->decide(&b->req, sites, NSITES, &d);
    } else {
      cost.runtime_ms = b->runtime_ms;
      cost.wait_value_micro = b->wait_value_micro;
      cost.deadline_ms = b->deadline_ms;
      cost.data = b->dataset >= 0 ? w0->data[b->dataset] : NULL;
      cost.nreservations = nres;
      placement_cost_decide(&b->req, sites, NSITES, &cost, &d);
      if (explain)
        placement_cost_explain(&b->req, sites, NSITES, &cost, &d);
    }
    for (size_t n = 0; n < d.ncandidates && d.pick >= 0; n++) {
      if (d.candidates[n].index == d.pick)
        c = &d.candidates[n];
    }
    if (d.verdict == PLACEMENT_NEVER) {
      t->never++;
      continue;
    }
    if (d.verdict == PLACEMENT_WAIT)
      t->wait++;
    else
      t->now++;
    if (c == NULL || c->type == NULL)
      continue;
    k = pool_of(&sites[d.pick], c->type);
    if (d.verdict == PLACEMENT_NOW) {
      sites[d.pick].pools[k].free -= b->req.gpus;
      sites[d.pick].jobs_active++;
      continue;
    }
    costs[d.pick].pools[k].ahead_gpus += b->req.gpus;
    for (k = 0; k < (int)nres; k++) {
      if (strcasecmp(res[k].type, c->type) == 0)
        break;
    }
    if (k == (int)nres && nres < NTYPES &&
        placement_cost_reservation(&b->req, &d, &res[nres]))
      nres++;
  }
}

static double
ms_since(const struct timespec *t0)
{
  struct timespec t1;

  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
         (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return (x > y) - (x < y);
}

/* The median of reps passes, in milliseconds. */
static double
timed(const struct world *w, int reps, int policy_cost, int explain,
      struct tally *t)
{
  static struct placement_site sites[NSITES];
  static struct placement_cost_site costs[NSITES];
  double *ms = calloc((size_t)reps, sizeof(*ms));
  double median;

  if (ms == NULL)
    abort();
  for (int r = 0; r < reps; r++) {
    struct timespec t0;

    memcpy(sites, w->sites, sizeof(sites));
    memcpy(costs, w->costs, sizeof(costs));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pass(w, sites, costs, policy_cost, explain, t);
    ms[r] = ms_since(&t0);
  }
  qsort(ms, (size_t)reps, sizeof(*ms), cmp_double);
  median = ms[reps / 2];
  free(ms);
  return median;
}

int
main(int argc, char **argv)
{
  static struct world w;
  struct tally t;
  int reps = 21;
  double cost_ms, explain_ms, ff_ms;

  if (argc > 1) {
    char *end;
    long n = strtol(argv[1], &end, 10);

    if (*end != '\0' || n < 1 || n > 10000) {
      fprintf(stderr, "usage: %s [repetitions 1-10000]\n", argv[0]);
      return 2;
    }
    reps = (int)n;
  }
  build(&w);
  cost_ms = timed(&w, reps, 1, 0, &t);
  printf("cost pass: %d jobs over %d sites, median of %d: %.2f ms "
         "(%d now, %d wait, %d never)\n",
         NJOBS, NSITES, reps, cost_ms, t.now, t.wait, t.never);
  explain_ms = timed(&w, reps, 1, 1, &t);
  printf("cost pass with every reason written: %.2f ms\n", explain_ms);
  ff_ms = timed(&w, reps, 0, 0, &t);
  printf("first-fit pass (reasons always written): %.2f ms\n", ff_ms);
  return 0;
}
