/*
 * How long a job will run, predicted from how long the same work ran:
 * the median of the last RUNTIME_SAMPLES successful runs of the same
 * workload (else job name) in the same project (at most its time
 * limit), else the job's time limit, else RUNTIME_DEFAULT_MS.  The histories are kept in memory,
 * read from the database at start and added to as jobs succeed, so a
 * prediction costs no query (submissions and placement passes ask for
 * one per job).
 */
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/grow.h"

/* Runs read at start: enough for every key's last RUNTIME_SAMPLES in a
 * busy installation's recent weeks. */
#define RUNTIME_LOAD 20000

struct runtime_hist {
  char *project;
  char *key;
  int64_t ms[RUNTIME_SAMPLES]; /* a ring */
  int n;
  int next;
};

static struct runtime_hist *
hist_find(struct broker *b, const char *project, const char *key, int add)
{
  struct runtime_hist *h;

  for (size_t i = 0; i < b->nruntimes; i++) {
    h = &b->runtimes[i];
    if (strcmp(h->key, key) == 0 && strcmp(h->project, project) == 0)
      return h;
  }
  if (!add)
    return NULL;
  GROW(b->runtimes, b->nruntimes + 1, b->runtimes_cap);
  h = &b->runtimes[b->nruntimes++];
  memset(h, 0, sizeof(*h));
  h->project = xstrdup(project);
  h->key = xstrdup(key);
  return h;
}

void
broker__runtime_add(struct broker *b, const char *project, const char *key,
                    int64_t ms)
{
  struct runtime_hist *h = hist_find(b, project, key, 1);

  h->ms[h->next] = ms;
  h->next = (h->next + 1) % RUNTIME_SAMPLES;
  if (h->n < RUNTIME_SAMPLES)
    h->n++;
}

/* Runs come newest first: keep a key's first RUNTIME_SAMPLES. */
static int
load_cb(const char *project, const char *key, int64_t ms, void *arg)
{
  struct broker *b = arg;
  struct runtime_hist *h = hist_find(b, project, key, 0);

  if (h == NULL || h->n < RUNTIME_SAMPLES)
    broker__runtime_add(b, project, key, ms);
  return 0;
}

int
broker__runtimes_load(struct broker *b, struct err *e)
{
  return db_job_runtimes(b->db, RUNTIME_LOAD, load_cb, b, e);
}

void
broker__runtimes_free(struct broker *b)
{
  for (size_t i = 0; i < b->nruntimes; i++) {
    free(b->runtimes[i].project);
    free(b->runtimes[i].key);
  }
  free(b->runtimes);
  b->runtimes = NULL;
  b->nruntimes = b->runtimes_cap = 0;
}

static int
cmp_ms(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return (x > y) - (x < y);
}

int64_t
broker__runtime_predict(struct broker *b, const char *project,
                        const char *key, int64_t time_limit_s,
                        const char **how)
{
  struct runtime_hist *h = hist_find(b, project, key, 0);
  int64_t sorted[RUNTIME_SAMPLES];

  if (h != NULL && h->n > 0) {
    memcpy(sorted, h->ms, sizeof(sorted[0]) * (size_t)h->n);
    qsort(sorted, (size_t)h->n, sizeof(sorted[0]), cmp_ms);
    *how = "median of past runs";
    /* the lower median of an even count: a prediction errs short; and
     * never past the time limit, where the site ends the job */
    if (time_limit_s > 0 && sorted[(h->n - 1) / 2] > time_limit_s * 1000)
      return time_limit_s * 1000;
    return sorted[(h->n - 1) / 2];
  }
  if (time_limit_s > 0) {
    *how = "time limit";
    return time_limit_s * 1000;
  }
  *how = "default";
  return RUNTIME_DEFAULT_MS;
}
