/*
 * The slurm site adapter: jobs run on a Slurm cluster, reached only
 * through its slurmrestd (never ssh, never sbatch).
 *
 * Every request goes through one http_client on the broker's loop
 * (keep-alive, a few connections).  The wire format of the site's
 * OpenAPI version is behind slurm_schema.h.
 *
 * A poll tick lists every job of the cluster in one request and the
 * nodes in another.  Our jobs are recognised by their tag (the comment
 * "tenbin:<instance>:<job id>"), which is also what makes submission
 * exactly-once across crashes:
 *   - the broker commits a job `placed` before submit() is called;
 *   - if tenbind dies before the remote id is stored, adopt() after the
 *     restart finds the job by its tag in the next listing instead of
 *     submitting it again;
 *   - a submit whose answer was lost (connection cut) is never retried
 *     blindly: the next listing sent after the failure decides whether
 *     Slurm has it (adopt it) or not (give it back to the scheduler).
 *   - should that submit reach slurmctld after all, once the job was
 *     placed again, the tag is listed twice: the Slurm job not followed
 *     is cancelled, so the job runs once.
 * Listings count only when they were sent after the fact they judge
 * (generation numbers), so a listing already in flight when a job was
 * submitted cannot declare that job missing.
 *
 * A job that slurmctld has purged (MinJobAge after its end) before we
 * saw its end is looked up in slurmdbd when the site has one, and is
 * otherwise settled from the last state seen (lost, saying so).
 *
 * Updates reach the broker through update_queue.h: a whole listing's
 * changes in one batch.
 *
 * A site with a "cloud" block also hands every nodes answer and every
 * jobs listing to slurm_cloud.c, which bills the cluster's VMs.
 */
#include "adapters/adapter.h"
#include "adapters/config_fields.h"
#include "adapters/slurm.h"
#include "adapters/slurm_cloud.h"
#include "adapters/slurm_schema.h"
#include "adapters/slurm_token.h"
#include "adapters/update_queue.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/client.h"
#include "util/alloc.h"
#include "util/fault.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/utf8.h"

#define DEFAULT_POLL_MS 1000
#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_CONNECTIONS 4
/* A listing of a big cluster is large; other answers are small. */
#define MAX_LISTING (256u << 20)
#define MAX_ANSWER (4u << 20)
#define MAX_ENV 512
/* How long a powered-down node takes to take its job, when the site does
 * not say: ParallelCluster's median from submit to start on a node it
 * had to launch is 294 s (../shared/research/placement-burst.md 2.2). */
#define DEFAULT_BOOT_MS 300000
/* A boot of more than a day is a mistake in the config, not a cloud. */
#define MAX_BOOT_S 86400

enum sj_phase {
  SJ_SUBMITTING, /* POST sent, no answer yet */
  SJ_UNCERTAIN,  /* the POST's answer was lost: look for the tag */
  SJ_ADOPTING,   /* after a restart, no remote id: look for the tag */
  SJ_ACTIVE,     /* Slurm's id known */
  SJ_ASKING_DB,  /* purged from slurmctld, asking slurmdbd */
};

/* A job of ours at this site, until its final state is reported. */
struct sjob {
  int64_t id;
  int64_t slurm_id;          /* 0 until known */
  enum sj_phase phase;
  uint64_t since_gen;        /* listings of a later generation judge it */
  uint64_t seen_gen;         /* last listing that had it */
  enum job_state reported;   /* last state told to the broker */
  char *reason;              /* last reason told */
  char *stdout_pattern;      /* absolute, Slurm pattern */
  char *name;
  int64_t gpus;
  char gpu_type[ADAPTER_GPU_TYPE_LEN];
  int cancel_wanted;
  int cancel_sent;
  int64_t stray_id;          /* a duplicate of it being cancelled */
  struct sjob *next;         /* hash chain */
};

/* GPU demand waiting in the site's queue, by type ("" = untyped). */
struct demand {
  struct {
    char type[ADAPTER_GPU_TYPE_LEN];
    int64_t gpus;
  } v[ADAPTER_MAX_POOLS + 1];
  int n;
  int64_t total;
};

struct slurm_site {
  uv_loop_t *loop;
  char *name;
  char *instance;
  const struct slurm_schema *schema;
  char *url;                 /* without a trailing slash */
  char *user;
  char *workdir;
  char *log_dir;             /* logs tenbind serves lie beneath it */
  char *output;              /* stdout pattern, absolute */
  json_t *partitions;        /* gpu type -> partition */
  char *default_partition;
  json_t *accounts;          /* project -> account */
  char *default_account;
  json_t *environment;       /* the site's base environment */
  int slurmdbd;
  int64_t boot_ms;           /* elastic.boot_s, or -1: not configured */
  int64_t poll_ms;
  int64_t timeout_ms;
  int64_t max_jobs;

  struct http_client *http;
  struct slurm_token *token;
  struct adapter_queue updates;
  uv_timer_t poll;

  struct sjob **buckets;
  size_t nbuckets;
  size_t njobs;

  uint64_t gen;              /* generation of the newest listing sent */
  int listing;               /* a jobs listing is in flight */
  int nodes_asked;           /* a nodes request is in flight */
  int jobs_ok;               /* the last listing answered */
  int nodes_ok;
  char detail[192];
  struct adapter_capacity cap; /* from the last nodes answer */
  int cap_known;             /* cap came from the site at least once */
  struct demand demand;       /* from the last listing */
  struct slurm_cloud *cloud;  /* the "cloud" block's, or NULL */

  int handles;               /* callbacks owed: parts being closed,
                                listings being parsed */
  int closing;
  void (*close_cb)(void *arg);
  void *close_arg;
};

enum req_kind {
  RQ_SUBMIT, RQ_JOBS, RQ_NODES, RQ_CANCEL, RQ_DB_JOB, RQ_CANCEL_STRAY
};

/* One request in flight; freed by its callback. */
struct sreq {
  struct slurm_site *s;
  enum req_kind kind;
  int64_t job_id;  /* tenbin id, for submit, cancel, db */
  uint64_t gen;    /* for listings */
  int64_t sent_ms; /* when it left */
};

/* ---- the job table ---- */

static size_t
bucket_of(const struct slurm_site *s, int64_t id)
{
  return (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ull >> 32) %
         s->nbuckets;
}

static struct sjob *
find_job(const struct slurm_site *s, int64_t id)
{
  for (struct sjob *j = s->buckets[bucket_of(s, id)]; j != NULL;
       j = j->next) {
    if (j->id == id)
      return j;
  }
  return NULL;
}

static void
grow_table(struct slurm_site *s)
{
  size_t old_n = s->nbuckets;
  struct sjob **old = s->buckets;

  s->nbuckets = old_n * 2;
  s->buckets = xcalloc(s->nbuckets, sizeof(*s->buckets));
  for (size_t i = 0; i < old_n; i++) {
    while (old[i] != NULL) {
      struct sjob *j = old[i];
      size_t b = bucket_of(s, j->id);

      old[i] = j->next;
      j->next = s->buckets[b];
      s->buckets[b] = j;
    }
  }
  free(old);
}

static struct sjob *
add_job(struct slurm_site *s, int64_t id)
{
  struct sjob *j = xcalloc(1, sizeof(*j));
  size_t b;

  if (s->njobs + 1 > 2 * s->nbuckets)
    grow_table(s);
  b = bucket_of(s, id);
  j->id = id;
  j->reported = JOB_PLACED;
  j->next = s->buckets[b];
  s->buckets[b] = j;
  s->njobs++;
  return j;
}

static void
free_job(struct sjob *j)
{
  free(j->reason);
  free(j->stdout_pattern);
  free(j->name);
  free(j);
}

static void
remove_job(struct slurm_site *s, struct sjob *j)
{
  for (struct sjob **p = &s->buckets[bucket_of(s, j->id)]; *p != NULL;
       p = &(*p)->next) {
    if (*p == j) {
      *p = j->next;
      s->njobs--;
      free_job(j);
      return;
    }
  }
}

/* Call fn for every job; fn may remove the job it is given. */
static void
each_job(struct slurm_site *s,
         void (*fn)(struct slurm_site *s, struct sjob *j, void *arg),
         void *arg)
{
  for (size_t i = 0; i < s->nbuckets; i++) {
    struct sjob *j = s->buckets[i];

    while (j != NULL) {
      struct sjob *next = j->next;

      fn(s, j, arg);
      j = next;
    }
  }
}

/* ---- updates ---- */

static void
report(struct slurm_site *s, struct sjob *j, enum job_state state,
       const char *reason, const char *alloc, const char *log_path,
       int exit_code, int sig, int64_t at_ms)
{
  char remote[24];
  struct adapter_update u = {
      .job_id = j->id,
      .state = state,
      .remote_id = NULL,
      .alloc = alloc,
      .log_path = log_path,
      .reason = reason,
      .exit_code = exit_code,
      .signal = sig,
      .at_ms = at_ms,
  };

  if (j->slurm_id > 0) {
    snprintf(remote, sizeof(remote), "%" PRId64, j->slurm_id);
    u.remote_id = remote;
  }
  adapter_queue_push(&s->updates, &u);
  j->reported = state;
  free(j->reason);
  j->reason = xstrdup(reason);
}

/* The job never reached Slurm: the broker places it again (or, when it
 * was being cancelled, it ends cancelled). */
static void
give_back(struct slurm_site *s, struct sjob *j, const char *why)
{
  if (j->cancel_wanted)
    report(s, j, JOB_CANCELLED, "cancelled before it reached Slurm", NULL,
           NULL, -1, 0, 0);
  else
    report(s, j, JOB_QUEUED, why, NULL, NULL, -1, 0, 0);
  remove_job(s, j);
}

/* ---- requests ---- */

static void on_poll(uv_timer_t *t);
static void on_answer(void *arg, int rc,
                      const struct http_client_response *resp,
                      const struct err *e);

static int
send_request(struct slurm_site *s, enum req_kind kind, const char *method,
             const char *what, int64_t id, const char *body,
             int64_t job_id, struct err *e)
{
  char path[256];
  char url[1024];
  char user_h[300];
  char token_h[SLURM_TOKEN_MAX + 32];
  const char *headers[5];
  struct http_client_request r;
  struct sreq *q;
  const char *token;
  int rc;

  token = slurm_token_get(s->token, e);
  if (token == NULL)
    return ERR_UNAVAILABLE;
  rc = s->schema->path(what, id, path, sizeof(path));
  if (rc < 0)
    return err_set(e, rc, "slurmrestd %s has no '%s' endpoint",
                   s->schema->version, what);
  snprintf(url, sizeof(url), "%s%s", s->url, path);
  snprintf(user_h, sizeof(user_h), "X-SLURM-USER-NAME: %s", s->user);
  snprintf(token_h, sizeof(token_h), "X-SLURM-USER-TOKEN: %s", token);
  headers[0] = user_h;
  headers[1] = token_h;
  headers[2] = "Accept: application/json";
  headers[3] = body != NULL ? "Content-Type: application/json" : NULL;
  headers[4] = NULL;
  memset(&r, 0, sizeof(r));
  r.method = method;
  r.url = url;
  r.headers = headers;
  r.body = body;
  r.body_len = body != NULL ? strlen(body) : 0;
  r.timeout_ms = (unsigned)s->timeout_ms;
  r.max_response = kind == RQ_JOBS ? MAX_LISTING : MAX_ANSWER;
  /* A submit is never repeated by the client: whether a lost answer
   * means a lost job is for the next listing to say.  Reads and DELETE
   * may be. */
  r.max_attempts = kind == RQ_SUBMIT ? 1 : 3;
  r.retry_on_5xx = kind != RQ_SUBMIT;
  q = xcalloc(1, sizeof(*q));
  q->s = s;
  q->kind = kind;
  q->job_id = job_id;
  q->gen = s->gen;
  q->sent_ms = time_now_ms();
  rc = http_client_send(s->http, &r, on_answer, q, e);
  if (rc < 0)
    free(q);
  return rc;
}

/* An answer that is not a success: our error, with the site's words. */
static int
answer_error(struct slurm_site *s, const struct http_client_response *resp,
             struct err *e)
{
  int code = slurm_answer_error(resp->status, resp->body, resp->len, e);

  if (code == ERR_UNAUTHORIZED)
    slurm_token_refused(s->token);
  return code;
}

static int
parse_json(const char *body, size_t len, json_t **out, struct err *e)
{
  json_error_t jerr;

  *out = json_loadb(body, len, 0, &jerr);
  if (*out == NULL)
    return err_set(e, ERR_SITE, "slurmrestd sent malformed JSON: %s",
                   jerr.text);
  return 0;
}

static void
set_unreachable(struct slurm_site *s, const char *what, const struct err *e)
{
  char detail[sizeof(s->detail)];

  snprintf(detail, sizeof(detail), "%s: %s", what, err_msg(e));
  /* The site's words may be cut inside a character here; the detail
   * goes into JSON (GET /v1/sites), which wants whole ones. */
  utf8_repair(detail);
  if (strcmp(detail, s->detail) != 0)
    log_warn("site '%s': %s", s->name, detail);
  memcpy(s->detail, detail, sizeof(detail));
}

/* ---- what a listing says about one job ---- */

static void
log_path_of(const struct sjob *j, const struct slurm_job *sj, char *out,
            size_t outsz)
{
  const char *pattern = sj != NULL && sj->stdout_path[0] != '\0'
                            ? sj->stdout_path
                            : j->stdout_pattern;
  struct slurm_job fake;

  out[0] = '\0';
  if (pattern == NULL)
    return;
  if (sj == NULL) {
    memset(&fake, 0, sizeof(fake));
    fake.slurm_id = j->slurm_id;
    fake.name = j->name;
    fake.user = (char *)"";
    fake.nodes = (char *)"";
    fake.stdout_path = (char *)"";
    sj = &fake;
  }
  if (slurm_expand_path(pattern, sj, out, outsz) < 0)
    out[0] = '\0';
}

/* Tell the broker what Slurm says about j, when it is news. */
static void
observe(struct slurm_site *s, struct sjob *j, const struct slurm_job *sj)
{
  struct slurm_outcome o;
  char log_path[1024];
  int64_t at_ms = 0;

  slurm_job_outcome(sj, &o);
  if (o.state == JOB_SUBMITTED && j->reported == JOB_RUNNING) {
    /* Requeued (node failure, preemption): it starts again by itself;
     * running does not go back to submitted, the reason says it. */
    char why[sizeof(o.reason)];

    memcpy(why, o.reason, sizeof(why));
    snprintf(o.reason, sizeof(o.reason), "requeued: %.160s", why);
    o.state = JOB_RUNNING;
  }
  /* Slurm's words, cut to fit, may end inside a character; the broker
   * stores and serves the reason as JSON text. */
  utf8_repair(o.reason);
  if (o.state == j->reported && j->reason != NULL &&
      strcmp(o.reason, j->reason) == 0)
    return;
  if (o.state == JOB_RUNNING && o.started_ms > 0)
    at_ms = o.started_ms;
  else if (job_state_is_final(o.state) && sj->end_s > 0)
    at_ms = sj->end_s * 1000;
  log_path_of(j, sj, log_path, sizeof(log_path));
  if (job_state_is_final(o.state) && o.started_ms > 0 &&
      j->reported != JOB_RUNNING) {
    /* It ran and ended between two listings: say when it started, first,
     * so that it has a start and its events come in order. */
    report(s, j, JOB_RUNNING, "RUNNING", sj->alloc[0] ? sj->alloc : NULL,
           log_path[0] ? log_path : NULL, -1, 0, o.started_ms);
  }
  report(s, j, o.state, o.reason, sj->alloc[0] ? sj->alloc : NULL,
         log_path[0] ? log_path : NULL, o.exit_code, o.signal, at_ms);
  if (job_state_is_final(o.state))
    remove_job(s, j);
}

/* Slurm no longer lists j and nobody can tell how it ended. */
static void
settle_forgotten(struct slurm_site *s, struct sjob *j, const char *why)
{
  char reason[256];

  if (j->cancel_wanted) {
    snprintf(reason, sizeof(reason), "cancelled; Slurm job %" PRId64
             " is gone", j->slurm_id);
    report(s, j, JOB_CANCELLED, reason, NULL, NULL, -1, 0, 0);
  } else {
    snprintf(reason, sizeof(reason),
             "Slurm job %" PRId64 " was purged before its end was seen "
             "(last seen %s); %s", j->slurm_id,
             j->reason != NULL ? j->reason : "never", why);
    report(s, j, JOB_LOST, reason, NULL, NULL, -1, 0, 0);
  }
  remove_job(s, j);
}

static void
forgotten(struct slurm_site *s, struct sjob *j)
{
  struct err e = {0};

  if (!s->slurmdbd) {
    settle_forgotten(s, j, "the site has no slurmdbd to ask");
    return;
  }
  j->phase = SJ_ASKING_DB;
  if (send_request(s, RQ_DB_JOB, "GET", "db_job", j->slurm_id, NULL, j->id,
                   &e) < 0) {
    /* Asked again at the next listing. */
    j->phase = SJ_ACTIVE;
    log_warn("site '%s': cannot ask slurmdbd about job %" PRId64 ": %s",
             s->name, j->id, err_msg(&e));
  }
}

/* After a listing of generation *gen: the jobs it should have had. */
static void
judge_absent(struct slurm_site *s, struct sjob *j, void *arg)
{
  uint64_t gen = *(const uint64_t *)arg;

  if (j->seen_gen == gen || j->since_gen >= gen)
    return;
  switch (j->phase) {
  case SJ_ACTIVE:
    forgotten(s, j);
    break;
  case SJ_UNCERTAIN:
    give_back(s, j, "Slurm does not have the job whose submission was "
                    "cut off; placing it again");
    break;
  case SJ_ADOPTING:
    give_back(s, j, "not found at the site after a restart (it was "
                    "never submitted); placing it again");
    break;
  case SJ_SUBMITTING:
  case SJ_ASKING_DB:
    break;
  }
}

static void
demand_add(struct demand *d, const char *type, int64_t gpus)
{
  int i;

  d->total += gpus;
  for (i = 0; i < d->n; i++) {
    if (strcmp(d->v[i].type, type) == 0) {
      d->v[i].gpus += gpus;
      return;
    }
  }
  /* More types than pools: counted in the total only. */
  if (i == (int)(sizeof(d->v) / sizeof(d->v[0])))
    return;
  snprintf(d->v[i].type, sizeof(d->v[i].type), "%s", type);
  d->v[i].gpus = gpus;
  d->n++;
}

static void
send_cancel(struct slurm_site *s, struct sjob *j)
{
  struct err e = {0};

  if (j->cancel_sent || j->slurm_id <= 0)
    return;
  if (send_request(s, RQ_CANCEL, "DELETE", "job", j->slurm_id, NULL, j->id,
                   &e) < 0) {
    log_warn("site '%s': cannot cancel job %" PRId64 " yet: %s", s->name,
             j->id, err_msg(&e));
    return;
  }
  j->cancel_sent = 1;
}

/*
 * A second Slurm job with the tag of one we follow: a submit whose answer
 * was lost reached slurmctld only after the listing that found it absent,
 * and the broker had placed the job again.  Left alone it would run the
 * job twice, unwatched; the one not followed is cancelled (once, unless
 * the DELETE fails).
 */
static void
cancel_stray(struct slurm_site *s, struct sjob *j, const struct slurm_job *sj)
{
  struct slurm_outcome o;
  struct err e = {0};

  slurm_job_outcome(sj, &o);
  if (job_state_is_final(o.state) || j->stray_id == sj->slurm_id)
    return;
  log_error("site '%s': job %" PRId64 " is tagged on Slurm jobs %" PRId64
            " and %" PRId64 "; cancelling the second", s->name, j->id,
            j->slurm_id, sj->slurm_id);
  if (send_request(s, RQ_CANCEL_STRAY, "DELETE", "job", sj->slurm_id, NULL,
                   j->id, &e) < 0) {
    log_warn("site '%s': cannot cancel Slurm job %" PRId64 " yet: %s",
             s->name, sj->slurm_id, err_msg(&e));
    return;
  }
  j->stray_id = sj->slurm_id;
}

/*
 * A listing parsed on libuv's thread pool: at 1,000 jobs in slurmctld it
 * is 3 MB of JSON, 60-90 ms of parsing that would stall every request
 * waiting on the loop.  The worker touches only its own struct (and the
 * schema's pure functions); the result is applied on the loop.
 */
struct listing_work {
  uv_work_t req;
  struct slurm_site *s;
  const struct slurm_schema *schema;
  const char *instance;  /* s's, alive until after_listing runs */
  uint64_t gen;
  int64_t sent_ms;
  char *body;
  size_t len;
  struct slurm_job_list list;
  int rc;
  struct err e;
};

static void maybe_finish_close(struct slurm_site *s);
static void apply_listing(struct slurm_site *s, uint64_t gen,
                          int64_t sent_ms, const struct slurm_job_list *l);

static void
parse_listing(uv_work_t *req)
{
  struct listing_work *w = req->data;
  json_t *answer = NULL;

  w->rc = parse_json(w->body, w->len, &answer, &w->e);
  if (w->rc == 0)
    w->rc = w->schema->jobs(answer, w->instance, &w->list, &w->e);
  json_decref(answer);
}

static void
after_listing(uv_work_t *req, int status)
{
  struct listing_work *w = req->data;
  struct slurm_site *s = w->s;

  s->listing = 0;
  s->handles--;
  if (status < 0 && w->rc == 0)
    w->rc = err_set(&w->e, ERR_INTERNAL, "listing not parsed: %s",
                    uv_strerror(status));
  if (s->closing) {
    /* Nothing more to tell anyone. */
  } else if (w->rc < 0) {
    s->jobs_ok = 0;
    set_unreachable(s, "listing jobs", &w->e);
  } else {
    apply_listing(s, w->gen, w->sent_ms, &w->list);
  }
  slurm_job_list_release(&w->list);
  free(w->body);
  free(w);
  if (s->closing)
    maybe_finish_close(s);
}

static void
on_jobs(struct slurm_site *s, const struct sreq *q, int rc,
        const struct http_client_response *resp, struct err *e)
{
  struct listing_work *w;

  if (rc == 0 && resp->status != 200)
    rc = answer_error(s, resp, e);
  if (rc < 0) {
    s->listing = 0;
    s->jobs_ok = 0;
    set_unreachable(s, "listing jobs", e);
    return;
  }
  /* s->listing stays set until the parse is applied: one at a time. */
  w = xcalloc(1, sizeof(*w));
  w->req.data = w;
  w->s = s;
  w->schema = s->schema;
  w->instance = s->instance;
  w->gen = q->gen;
  w->sent_ms = q->sent_ms;
  w->len = resp->len;
  w->body = xmalloc(resp->len + 1);
  memcpy(w->body, resp->body, resp->len + 1);
  s->handles++;
  rc = uv_queue_work(s->loop, &w->req, parse_listing, after_listing);
  if (rc < 0) {
    /* Cannot happen with a valid loop; parse here rather than lose it. */
    parse_listing(&w->req);
    after_listing(&w->req, 0);
  }
}

/* What a listing of generation gen says, applied on the loop. */
static void
apply_listing(struct slurm_site *s, uint64_t gen, int64_t sent_ms,
              const struct slurm_job_list *lp)
{
  const struct slurm_job_list l = *lp;

  s->jobs_ok = 1;
  if (s->nodes_ok)
    s->detail[0] = '\0';
  memset(&s->demand, 0, sizeof(s->demand));
  for (size_t i = 0; i < l.n; i++) {
    const struct slurm_job *sj = &l.jobs[i];
    struct sjob *j;

    if (strcmp(sj->state, "PENDING") == 0 && sj->gpus > 0)
      demand_add(&s->demand, sj->gpu_type, sj->gpus);
    if (sj->tenbin_id < 0 || (j = find_job(s, sj->tenbin_id)) == NULL)
      continue;
    if (j->slurm_id > 0 && j->slurm_id != sj->slurm_id) {
      cancel_stray(s, j, sj);
      continue;
    }
    if (j->phase != SJ_ACTIVE && j->phase != SJ_ASKING_DB)
      log_info("site '%s': job %" PRId64 " found as Slurm job %" PRId64,
               s->name, j->id, sj->slurm_id);
    j->slurm_id = sj->slurm_id;
    j->phase = SJ_ACTIVE;
    j->seen_gen = gen;
    if (j->cancel_wanted)
      send_cancel(s, j);
    observe(s, j, sj);
  }
  each_job(s, judge_absent, &gen);
  if (s->cloud != NULL)
    slurm_cloud_jobs(s->cloud, l.jobs, l.n, sent_ms);
}

static void
on_db_job(struct slurm_site *s, const struct sreq *q, int rc,
          const struct http_client_response *resp, struct err *e)
{
  struct sjob *j = find_job(s, q->job_id);
  struct slurm_job_list l = {0};
  json_t *answer = NULL;

  if (j == NULL || j->phase != SJ_ASKING_DB)
    return;
  if (rc == 0 && resp->status != 200)
    rc = answer_error(s, resp, e);
  if (rc == 0)
    rc = parse_json(resp->body, resp->len, &answer, e);
  if (rc == 0)
    rc = s->schema->db_jobs(answer, s->instance, &l, e);
  json_decref(answer);
  if (rc == ERR_NOT_FOUND) {
    settle_forgotten(s, j, "slurmdbd does not know it either");
    goto out;
  }
  if (rc < 0) {
    /* Asked again after the next listing. */
    j->phase = SJ_ACTIVE;
    log_warn("site '%s': slurmdbd about job %" PRId64 ": %s", s->name,
             j->id, err_msg(e));
    goto out;
  }
  for (size_t i = 0; i < l.n; i++) {
    if (l.jobs[i].slurm_id == j->slurm_id) {
      j->phase = SJ_ACTIVE;
      observe(s, j, &l.jobs[i]);
      goto out;
    }
  }
  settle_forgotten(s, j, "slurmdbd does not know it either");
out:
  slurm_job_list_release(&l);
}

static void
on_nodes(struct slurm_site *s, int rc,
         const struct http_client_response *resp, struct err *e)
{
  struct adapter_capacity cap;
  json_t *answer = NULL;

  s->nodes_asked = 0;
  memset(&cap, 0, sizeof(cap));
  if (rc == 0 && resp->status != 200)
    rc = answer_error(s, resp, e);
  if (rc == 0)
    rc = parse_json(resp->body, resp->len, &answer, e);
  if (rc == 0)
    rc = s->schema->nodes(answer, &cap, e);
  if (rc == 0 && s->cloud != NULL) {
    struct slurm_node_list nl = {0};

    rc = s->schema->node_list(answer, &nl, e);
    if (rc == 0)
      slurm_cloud_nodes(s->cloud, nl.nodes, nl.n);
    slurm_node_list_release(&nl);
  }
  json_decref(answer);
  if (rc < 0) {
    s->nodes_ok = 0;
    set_unreachable(s, "listing nodes", e);
    return;
  }
  s->nodes_ok = 1;
  if (s->jobs_ok)
    s->detail[0] = '\0';
  s->cap = cap;
  s->cap_known = 1;
}

static void
on_submit(struct slurm_site *s, const struct sreq *q, int rc,
          const struct http_client_response *resp, struct err *e)
{
  struct sjob *j = find_job(s, q->job_id);
  json_t *answer = NULL;
  int64_t slurm_id = 0;
  char reason[ERR_MSG_SIZE + 64];
  char log_path[1024];

  if (j == NULL || j->phase != SJ_SUBMITTING)
    return;
  if (rc < 0 || resp->status == 502 || resp->status == 503 ||
      resp->status == 504) {
    /* Slurm may or may not have it: a listing sent from now on says. */
    if (rc == 0)
      err_set(e, ERR_UNAVAILABLE, "HTTP %d", resp->status);
    log_warn("site '%s': submission of job %" PRId64 " unconfirmed (%s); "
             "looking for its tag", s->name, j->id, err_msg(e));
    j->phase = SJ_UNCERTAIN;
    j->since_gen = s->gen;
    return;
  }
  if (resp->status != 200) {
    rc = answer_error(s, resp, e);
    if (rc == ERR_UNAUTHORIZED) {
      /* Most likely refused at the door, but slurmrestd says the same
       * (5005) when slurmctld hung up mid-request, maybe after taking
       * the job: only a listing can tell. */
      set_unreachable(s, "submitting", e);
      j->phase = SJ_UNCERTAIN;
      j->since_gen = s->gen;
      return;
    }
    snprintf(reason, sizeof(reason), "Slurm refused the job: %s",
             err_msg(e));
    report(s, j, JOB_FAILED, reason, NULL, NULL, -1, 0, 0);
    remove_job(s, j);
    return;
  }
  rc = parse_json(resp->body, resp->len, &answer, e);
  if (rc == 0)
    rc = s->schema->submit_id(answer, &slurm_id, e);
  json_decref(answer);
  if (rc < 0) {
    j->phase = SJ_UNCERTAIN;
    j->since_gen = s->gen;
    log_warn("site '%s': job %" PRId64 ": %s; looking for its tag", s->name,
             j->id, err_msg(e));
    return;
  }
  /* Slurm has the job; the broker has not stored its id yet. */
  fault_point("slurm-submit-answered");
  j->slurm_id = slurm_id;
  j->phase = SJ_ACTIVE;
  j->since_gen = s->gen;
  snprintf(reason, sizeof(reason), "Slurm job %" PRId64, slurm_id);
  log_path_of(j, NULL, log_path, sizeof(log_path));
  report(s, j, JOB_SUBMITTED, reason, NULL, log_path[0] ? log_path : NULL,
         -1, 0, 0);
  if (j->cancel_wanted)
    send_cancel(s, j);
}

static void
on_cancel(struct slurm_site *s, const struct sreq *q, int rc,
          const struct http_client_response *resp, struct err *e)
{
  struct sjob *j = find_job(s, q->job_id);

  if (j == NULL)
    return;
  if (rc == 0 && resp->status != 200)
    rc = answer_error(s, resp, e);
  if (rc == ERR_NOT_FOUND) {
    settle_forgotten(s, j, "");
    return;
  }
  if (rc < 0) {
    /* Sent again with the next listing that still has it. */
    j->cancel_sent = 0;
    log_warn("site '%s': cancelling job %" PRId64 ": %s", s->name, j->id,
             err_msg(e));
    return;
  }
  /* The listing brings CANCELLED: ask for one now. */
  uv_timer_start(&s->poll, on_poll, 0, (uint64_t)s->poll_ms);
}

static void
on_cancel_stray(struct slurm_site *s, const struct sreq *q, int rc,
                const struct http_client_response *resp, struct err *e)
{
  struct sjob *j = find_job(s, q->job_id);

  if (rc == 0 && resp->status != 200)
    rc = answer_error(s, resp, e);
  if (rc < 0 && rc != ERR_NOT_FOUND) {
    /* Sent again with the next listing that still has it running. */
    if (j != NULL)
      j->stray_id = 0;
    log_warn("site '%s': cancelling a duplicate of job %" PRId64 ": %s",
             s->name, q->job_id, err_msg(e));
  }
}

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *te)
{
  struct sreq *q = arg;
  struct slurm_site *s = q->s;
  struct err e = {0};

  if (te != NULL)
    e = *te;
  if (s->closing) {
    free(q);
    return;
  }
  switch (q->kind) {
  case RQ_SUBMIT:
    on_submit(s, q, rc, resp, &e);
    break;
  case RQ_JOBS:
    on_jobs(s, q, rc, resp, &e);
    break;
  case RQ_NODES:
    on_nodes(s, rc, resp, &e);
    break;
  case RQ_CANCEL:
    on_cancel(s, q, rc, resp, &e);
    break;
  case RQ_DB_JOB:
    on_db_job(s, q, rc, resp, &e);
    break;
  case RQ_CANCEL_STRAY:
    on_cancel_stray(s, q, rc, resp, &e);
    break;
  }
  free(q);
}

static void
on_poll(uv_timer_t *t)
{
  struct slurm_site *s = t->data;
  struct err e = {0};

  if (!s->listing) {
    s->gen++;
    if (send_request(s, RQ_JOBS, "GET", "jobs", 0, NULL, 0, &e) == 0) {
      s->listing = 1;
    } else {
      s->jobs_ok = 0;
      set_unreachable(s, "listing jobs", &e);
    }
  }
  if (!s->nodes_asked) {
    if (send_request(s, RQ_NODES, "GET", "nodes", 0, NULL, 0, &e) == 0) {
      s->nodes_asked = 1;
    } else {
      s->nodes_ok = 0;
      set_unreachable(s, "listing nodes", &e);
    }
  }
}

/* ---- submit ---- */

static const char *
lookup(const json_t *map, const char *key, const char *dflt)
{
  const char *v = key != NULL ? jsonx_str(map, key) : NULL;

  return v != NULL ? v : dflt;
}

static void
env_push(char ***env, const char *key, const char *value)
{
  size_t klen = strlen(key);
  size_t len = klen + strlen(value) + 2;
  char *kv = xmalloc(len);
  char **v = *env;

  snprintf(kv, len, "%s=%s", key, value);
  /* A later value replaces an earlier one, as in a shell. */
  for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
    if (strncmp(v[i], key, klen) == 0 && v[i][klen] == '=') {
      free(v[i]);
      v[i] = kv;
      return;
    }
  }
  strv_push(env, kv);
  free(kv);
}

/*
 * The job's whole environment (Slurm wants one): the site's base
 * environment (all of it, or the names --export listed), the job's own
 * variables, then the TENBIN_* ones, as on a local site.
 */
static char **
job_env(const struct slurm_site *s, int64_t id, const struct job_spec *sp)
{
  char **env = NULL;
  const char *key;
  json_t *value;
  char num[32];

  json_object_foreach(s->environment, key, value) {
    int take = sp->export_mode == JOBSPEC_EXPORT_ALL;

    for (char *const *n = sp->export_names; !take && n && *n; n++)
      take = strcmp(*n, key) == 0;
    if (take && json_is_string(value))
      env_push(&env, key, json_string_value(value));
  }
  for (char *const *kv = sp->env; kv != NULL && *kv != NULL; kv++) {
    const char *eq = strchr(*kv, '=');
    char *k;

    if (eq == NULL)
      continue;
    k = xmalloc((size_t)(eq - *kv) + 1);
    memcpy(k, *kv, (size_t)(eq - *kv));
    k[eq - *kv] = '\0';
    env_push(&env, k, eq + 1);
    free(k);
  }
  snprintf(num, sizeof(num), "%" PRId64, id);
  env_push(&env, "TENBIN_JOB_ID", num);
  env_push(&env, "TENBIN_JOB_NAME", sp->name != NULL ? sp->name : "");
  env_push(&env, "TENBIN_PROJECT", sp->project != NULL ? sp->project : "");
  env_push(&env, "TENBIN_SITE", s->name);
  snprintf(num, sizeof(num), "%" PRId64, sp->gpus);
  env_push(&env, "TENBIN_GPUS", num);
  if (sp->gpu_type != NULL)
    env_push(&env, "TENBIN_GPU_TYPE", sp->gpu_type);
  return env;
}

/* An output path as Slurm will see it: relative ones are relative to the
 * job's working directory. */
static char *
site_path(const char *workdir, const char *path)
{
  size_t len;
  char *out;

  if (path[0] == '/')
    return xstrdup(path);
  len = strlen(workdir) + strlen(path) + 2;
  out = xmalloc(len);
  snprintf(out, len, "%s/%s", workdir, path);
  return out;
}

/* Where the job's stdout goes, as a Slurm pattern (%j ...). */
static char *
stdout_pattern(const struct slurm_site *s, const struct job_spec *sp)
{
  return site_path(sp->chdir != NULL ? sp->chdir : s->workdir,
                   sp->stdout_path != NULL ? sp->stdout_path : s->output);
}

/* Start following aj: what the adapter keeps of it. */
static struct sjob *
track(struct slurm_site *s, const struct adapter_job *aj)
{
  const struct job_spec *sp = aj->spec;
  struct sjob *j = add_job(s, aj->id);

  j->since_gen = s->gen;
  j->name = xstrdup(sp->name);
  j->gpus = sp->gpus > 0 ? sp->gpus : sp->gpus_per_node * sp->nodes;
  snprintf(j->gpu_type, sizeof(j->gpu_type), "%s",
           sp->gpu_type != NULL ? sp->gpu_type : "");
  j->stdout_pattern = aj->log_path != NULL ? xstrdup(aj->log_path)
                                           : stdout_pattern(s, sp);
  return j;
}

static int
slurm_submit_job(void *ctx, const struct adapter_job *aj, struct err *e)
{
  struct slurm_site *s = ctx;
  const struct job_spec *sp = aj->spec;
  struct slurm_submit sub;
  char tag[SLURM_TAG_MAX];
  char **env = NULL;
  char *stdout_path = NULL;
  char *stderr_path = NULL;
  char *text = NULL;
  json_t *body = NULL;
  struct sjob *j;
  int rc;

  if (s->closing)
    return err_set(e, ERR_BAD_STATE, "site '%s' is closing", s->name);
  if (find_job(s, aj->id) != NULL)
    return err_set(e, ERR_CONFLICT, "job %" PRId64 " is already at site "
                   "'%s'", aj->id, s->name);
  memset(&sub, 0, sizeof(sub));
  slurm_tag_format(tag, sizeof(tag), s->instance, aj->id);
  sub.spec = sp;
  sub.tag = tag;
  sub.partition = lookup(s->partitions, sp->gpu_type, s->default_partition);
  sub.account = lookup(s->accounts, sp->project, s->default_account);
  /* A site with no account map takes the project as the account, as
   * sbatch -A means both; "default" is tenbin's when none was named,
   * which leaves Slurm to pick the user's default account. */
  if (json_object_size(s->accounts) == 0 && s->default_account == NULL &&
      sp->project != NULL && strcmp(sp->project, "default") != 0)
    sub.account = sp->project;
  sub.workdir = sp->chdir != NULL ? sp->chdir : s->workdir;
  stdout_path = stdout_pattern(s, sp);
  if (sp->stderr_path != NULL)
    stderr_path = site_path(sub.workdir, sp->stderr_path);
  sub.stdout_path = stdout_path;
  sub.stderr_path = stderr_path;
  env = job_env(s, aj->id, sp);
  sub.env = env;
  rc = s->schema->submit_body(&sub, &body, e);
  if (rc < 0)
    goto out;
  text = jsonx_dump(body);
  /* The broker has committed the job placed here; Slurm has nothing. */
  fault_point("slurm-before-submit");
  rc = send_request(s, RQ_SUBMIT, "POST", "submit", 0, text, aj->id, e);
  if (rc < 0) {
    /* Nothing was sent: the broker keeps the job queued. */
    rc = ERR_UNAVAILABLE;
    goto out;
  }
  j = track(s, aj);
  j->phase = SJ_SUBMITTING;
out:
  free(text);
  json_decref(body);
  strv_free(env);
  free(stdout_path);
  free(stderr_path);
  return rc;
}

static int
slurm_cancel_job(void *ctx, const struct adapter_job *aj, struct err *e)
{
  struct slurm_site *s = ctx;
  struct sjob *j = find_job(s, aj->id);

  (void)e;
  if (j == NULL) {
    /* Nothing of it here (it was never handed to us, or it ended):
     * cancelling it is the whole story. */
    struct adapter_update u = {
        .job_id = aj->id,
        .state = JOB_CANCELLED,
        .reason = "cancelled before it reached Slurm",
        .exit_code = -1,
    };

    adapter_queue_push(&s->updates, &u);
    return 0;
  }
  j->cancel_wanted = 1;
  if (j->phase == SJ_ACTIVE)
    send_cancel(s, j);
  return 0;
}

static int
slurm_adopt_job(void *ctx, const struct adapter_job *aj, struct err *e)
{
  struct slurm_site *s = ctx;
  struct sjob *j;
  int64_t slurm_id = 0;

  if (find_job(s, aj->id) != NULL)
    return 0;
  if (aj->remote_id != NULL) {
    char *end;

    slurm_id = strtoll(aj->remote_id, &end, 10);
    if (*end != '\0' || slurm_id <= 0)
      return err_set(e, ERR_INVALID, "remote id '%s' is not a Slurm job id",
                     aj->remote_id);
  }
  j = track(s, aj);
  j->slurm_id = slurm_id;
  j->phase = slurm_id > 0 ? SJ_ACTIVE : SJ_ADOPTING;
  return 0;
}

/* ---- capacity ---- */

static void
count_unlisted(struct slurm_site *s, struct sjob *j, void *arg)
{
  (void)s;
  /* Submitted by us but in no listing yet: the site's queue has it even
   * though we have not seen it there. */
  if (j->seen_gen == 0 && j->gpus > 0)
    demand_add(arg, j->gpu_type, j->gpus);
}

static void
slurm_capacity(void *ctx, struct adapter_capacity *out)
{
  struct slurm_site *s = ctx;
  struct demand d = s->demand;

  *out = s->cap;
  out->unknown = !s->cap_known;
  out->reachable = s->jobs_ok && s->nodes_ok;
  snprintf(out->detail, sizeof(out->detail), "%s", s->detail);
  if (s->detail[0] == '\0' && s->cloud != NULL)
    snprintf(out->detail, sizeof(out->detail), "%s",
             slurm_cloud_detail(s->cloud));
  out->max_jobs = s->max_jobs;
  out->jobs_active = (int64_t)s->njobs;
  /* Slurm itself powers its nodes up for the jobs it is given
   * (grows_on_submit, from the nodes' states); how long that takes is
   * the config's word, else the default once the site has such nodes. */
  if (s->boot_ms >= 0)
    out->grow_ms = s->boot_ms;
  else
    out->grow_ms = out->grows_on_submit ? DEFAULT_BOOT_MS : 0;
  each_job(s, count_unlisted, &d);
  out->gpus_pending = d.total;
  for (int k = 0; k < out->npools; k++) {
    out->pools[k].pending = 0;
    for (int i = 0; i < d.n; i++) {
      if (strcmp(d.v[i].type, out->pools[k].type) == 0)
        out->pools[k].pending = d.v[i].gpus;
    }
  }
}

/* ---- open and close ---- */

const struct jsonx_field adapter_slurm_fields[] = {
    {"name", JX_STRING},
    {"kind", JX_STRING},
    {"url", JX_STRING},
    {"api_version", JX_STRING},
    {"user", JX_STRING},
    {"token_file", JX_STRING},
    {"token_command", JX_STRING},
    {"partitions", JX_OBJECT},
    {"default_partition", JX_STRING},
    {"accounts", JX_OBJECT},
    {"default_account", JX_STRING},
    {"workdir", JX_STRING},
    {"output", JX_STRING},
    {"log_dir", JX_STRING},
    {"environment", JX_OBJECT},
    {"slurmdbd", JX_BOOL},
    {"poll_ms", JX_INT},
    {"timeout_ms", JX_INT},
    {"connections", JX_INT},
    {"max_jobs", JX_INT},
    {"ca_file", JX_STRING},
    {"allow_insecure_token", JX_BOOL},
    {"elastic", JX_OBJECT},
    {"cloud", JX_OBJECT},
    {NULL, 0},
};

/* The "elastic" block: what tenbin plans with for nodes that Slurm's
 * power saving starts. */
const struct jsonx_field adapter_slurm_elastic_fields[] = {
    {"boot_s", JX_INT},
    {NULL, 0},
};

static int
string_map(const json_t *config, const char *field, json_t **out,
           struct err *e)
{
  json_t *m = json_object_get(config, field);
  const char *key;
  json_t *v;

  *out = json_object();
  if (m == NULL || json_is_null(m))
    return 0;
  json_object_foreach(m, key, v) {
    if (!json_is_string(v) || json_string_length(v) == 0)
      return err_set(e, ERR_CONFIG, "field '%s.%s': must be a non-empty "
                     "string", field, key);
    json_object_set(*out, key, v);
  }
  return 0;
}

static int
config_string(const json_t *config, const char *field, int required,
              char **out, struct err *e)
{
  const char *v = jsonx_str(config, field);

  *out = NULL;
  if (v == NULL || v[0] == '\0') {
    if (required)
      return err_set(e, ERR_CONFIG, "field '%s': required", field);
    return 0;
  }
  *out = xstrdup(v);
  return 0;
}

static int
configure_elastic(struct slurm_site *s, const json_t *config, struct err *e)
{
  const json_t *el = json_object_get(config, "elastic");
  int rc;

  s->boot_ms = -1;
  if (el == NULL || json_is_null(el))
    return 0;
  rc = jsonx_check(el, adapter_slurm_elastic_fields, "elastic.", e);
  if (rc == 0)
    rc = jsonx_int(el, "boot_s", 0, MAX_BOOT_S, -1, &s->boot_ms,
                   "elastic.", e);
  if (rc == 0 && s->boot_ms >= 0)
    s->boot_ms *= 1000;
  return rc;
}

static int
configure(struct slurm_site *s, const json_t *config, struct err *e)
{
  const char *version;
  int64_t conns;
  int rc;

  rc = jsonx_check(config, adapter_slurm_fields, "", e);
  if (rc == 0)
    rc = config_string(config, "url", 1, &s->url, e);
  if (rc == 0 && strncmp(s->url, "http://", 7) != 0 &&
      strncmp(s->url, "https://", 8) != 0)
    rc = err_set(e, ERR_CONFIG, "field 'url': must start with http:// or "
                 "https://");
  if (rc < 0)
    return rc;
  while (s->url[0] != '\0' && s->url[strlen(s->url) - 1] == '/')
    s->url[strlen(s->url) - 1] = '\0';
  version = jsonx_str(config, "api_version");
  s->schema = slurm_schema_find(version != NULL ? version : "v0.0.38");
  if (s->schema == NULL)
    return err_set(e, ERR_CONFIG, "field 'api_version': unsupported "
                   "slurmrestd version '%.32s' (supported: v0.0.38)",
                   version);
  rc = config_string(config, "user", 1, &s->user, e);
  if (rc == 0 && strpbrk(s->user, "\r\n") != NULL)
    rc = err_set(e, ERR_CONFIG, "field 'user': must be one line");
  if (rc == 0)
    rc = config_string(config, "workdir", 0, &s->workdir, e);
  if (rc == 0 && s->workdir == NULL)
    s->workdir = xstrdup("/tmp");
  if (rc == 0 && s->workdir[0] != '/')
    rc = err_set(e, ERR_CONFIG, "field 'workdir': must be an absolute path "
                 "on the site");
  /* Where the broker host sees the site's output files: a job's output
   * elsewhere is its own choice and is not served (h_jobs.c). */
  if (rc == 0)
    rc = config_string(config, "log_dir", 0, &s->log_dir, e);
  if (rc == 0 && s->log_dir == NULL)
    s->log_dir = xstrdup(s->workdir);
  if (rc == 0 && s->log_dir[0] != '/')
    rc = err_set(e, ERR_CONFIG, "field 'log_dir': must be an absolute "
                 "path");
  if (rc == 0)
    rc = config_string(config, "output", 0, &s->output, e);
  if (rc == 0 && s->output == NULL)
    s->output = xstrdup("tenbin-%j.out");
  if (rc == 0)
    rc = config_string(config, "default_partition", 0,
                       &s->default_partition, e);
  if (rc == 0)
    rc = config_string(config, "default_account", 0, &s->default_account,
                       e);
  if (rc == 0)
    rc = string_map(config, "partitions", &s->partitions, e);
  if (rc == 0)
    rc = string_map(config, "accounts", &s->accounts, e);
  if (rc == 0)
    rc = string_map(config, "environment", &s->environment, e);
  if (rc == 0 && json_object_size(s->environment) == 0)
    json_object_set_new(s->environment, "PATH",
                        json_string("/usr/local/bin:/usr/bin:/bin"));
  if (rc == 0 && json_object_size(s->environment) > MAX_ENV)
    rc = err_set(e, ERR_CONFIG, "field 'environment': at most %d "
                 "variables", MAX_ENV);
  if (rc == 0)
    rc = jsonx_int(config, "poll_ms", 100, 3600000, DEFAULT_POLL_MS,
                   &s->poll_ms, "", e);
  if (rc == 0)
    rc = jsonx_int(config, "timeout_ms", 100, 600000, DEFAULT_TIMEOUT_MS,
                   &s->timeout_ms, "", e);
  if (rc == 0)
    rc = jsonx_int(config, "connections", 1, 64, DEFAULT_CONNECTIONS,
                   &conns, "", e);
  if (rc == 0)
    rc = jsonx_int(config, "max_jobs", 0, 10000000, 0, &s->max_jobs, "",
                   e);
  if (rc == 0)
    rc = configure_elastic(s, config, e);
  if (rc < 0)
    return rc;
  s->slurmdbd = jsonx_bool(config, "slurmdbd", 0);
  if (s->slurmdbd && s->schema->db_jobs == NULL)
    return err_set(e, ERR_CONFIG, "field 'slurmdbd': slurmrestd %s has no "
                   "slurmdbd endpoints here", s->schema->version);
  return (int)conns;
}

static void
free_site(struct slurm_site *s)
{
  for (size_t i = 0; i < s->nbuckets; i++) {
    while (s->buckets[i] != NULL) {
      struct sjob *j = s->buckets[i];

      s->buckets[i] = j->next;
      free_job(j);
    }
  }
  free(s->buckets);
  free(s->name);
  free(s->instance);
  free(s->url);
  free(s->user);
  free(s->workdir);
  free(s->log_dir);
  free(s->output);
  free(s->default_partition);
  free(s->default_account);
  json_decref(s->partitions);
  json_decref(s->accounts);
  json_decref(s->environment);
  free(s);
}

static int
slurm_open(const struct adapter_env *env, const json_t *config, void **ctx,
           struct err *e)
{
  struct slurm_site *s;
  struct http_client_config hc;
  int conns;
  int rc;

  *ctx = NULL;
  if (config == NULL || !json_is_object(config))
    return err_set(e, ERR_CONFIG, "a slurm site needs its settings (url, "
                   "user, token_file or token_command)");
  if (env->instance == NULL || env->update == NULL)
    return err_set(e, ERR_INTERNAL, "slurm site needs instance and update");
  s = xcalloc(1, sizeof(*s));
  s->loop = env->loop;
  s->name = xstrdup(env->site_name != NULL ? env->site_name : "slurm");
  s->instance = xstrdup(env->instance);
  s->nbuckets = 64;
  s->buckets = xcalloc(s->nbuckets, sizeof(*s->buckets));
  snprintf(s->detail, sizeof(s->detail), "not contacted yet");
  rc = configure(s, config, e);
  if (rc < 0)
    goto fail;
  conns = rc;
  if (json_object_get(config, "cloud") != NULL &&
      !json_is_null(json_object_get(config, "cloud"))) {
    const struct slurm_cloud_env ce = {.loop = s->loop,
                                       .site_name = s->name,
                                       .store = env->nodes,
                                       .store_arg = env->nodes_arg};

    rc = slurm_cloud_open(&ce, json_object_get(config, "cloud"), &s->cloud,
                          e);
    if (rc < 0)
      goto fail;
  }
  rc = slurm_token_new(s->loop, jsonx_str(config, "token_file"),
                       jsonx_str(config, "token_command"), &s->token, e);
  if (rc < 0)
    goto fail;
  memset(&hc, 0, sizeof(hc));
  hc.max_host_connections = (unsigned)conns;
  hc.user_agent = "tenbind";
  /* The token goes in clear over http only to loopback, unless allowed
   * (http/client.h). */
  hc.ca_file = jsonx_str(config, "ca_file");
  hc.allow_insecure_tokens = jsonx_bool(config, "allow_insecure_token", 0);
  rc = http_client_new(s->loop, &hc, &s->http, e);
  if (rc < 0) {
    slurm_token_close(s->token, NULL, NULL);
    goto fail;
  }
  adapter_queue_init(&s->updates, s->loop, env->update, env->update_arg);
  s->updates.timer.data = s;
  uv_timer_init(s->loop, &s->poll);
  s->poll.data = s;
  /* First look at once: placement waits for a reachable site. */
  uv_timer_start(&s->poll, on_poll, 0, (uint64_t)s->poll_ms);
  *ctx = s;
  return 0;

fail:
  if (s->cloud != NULL)
    slurm_cloud_close(s->cloud, NULL, NULL);
  free_site(s);
  return rc;
}

static void
maybe_finish_close(struct slurm_site *s)
{
  void (*cb)(void *arg) = s->close_cb;
  void *arg = s->close_arg;

  if (s->handles > 0)
    return;
  free_site(s);
  if (cb != NULL)
    cb(arg);
}

static void
on_part_closed(void *arg)
{
  struct slurm_site *s = arg;

  s->handles--;
  maybe_finish_close(s);
}

static void
on_handle_closed(uv_handle_t *h)
{
  on_part_closed(h->data);
}

static void
slurm_close(void *ctx, void (*cb)(void *arg), void *arg)
{
  struct slurm_site *s = ctx;

  /* Jobs go on at the site; the next tenbind adopts them. */
  s->closing = 1;
  s->close_cb = cb;
  s->close_arg = arg;
  /* Each part is counted as it is closed, never as a literal: one part
   * more is one count more.  The uv handles go first: their callbacks
   * never run from inside the call, so the parts that may call back at
   * once cannot bring the count to 0 while s is still in use here. */
  s->handles++;
  uv_close((uv_handle_t *)&s->poll, on_handle_closed);
  s->handles++;
  adapter_queue_close(&s->updates, on_handle_closed);
  s->handles++;
  http_client_close(s->http, on_part_closed, s);
  s->handles++;
  slurm_token_close(s->token, on_part_closed, s);
  if (s->cloud != NULL) {
    s->handles++;
    slurm_cloud_close(s->cloud, on_part_closed, s);
  }
}

static char *
slurm_log_dir(void *ctx, int64_t job_id)
{
  const struct slurm_site *s = ctx;

  (void)job_id; /* every job writes beneath the one directory */
  return xstrdup(s->log_dir);
}

const struct adapter_ops adapter_slurm_ops = {
    .kind = "slurm",
    .api_version = ADAPTER_API_VERSION,
    .open = slurm_open,
    .submit = slurm_submit_job,
    .cancel = slurm_cancel_job,
    .adopt = slurm_adopt_job,
    .capacity = slurm_capacity,
    .close = slurm_close,
    .log_dir = slurm_log_dir,
};
