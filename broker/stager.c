/*
 * The stager: makes every pending or syncing replica complete by having
 * the destination site's agent pull it from the source site's agent
 * (docs/SYNC.md), and keeps the replicas and transfers rows up to date.
 *
 * It works in rounds, one every stage_poll_ms (500 ms), on a uv timer:
 *   1. the answers that came back since the last round are written, all
 *      in one transaction (replica progress, one transfers row per pull
 *      attempt with its bytes on the wire, complete or failed);
 *   2. the pending and syncing replicas are read back, and any without
 *      a task gets one that starts by PUTting the pull (so after a
 *      restart every unfinished replica is resumed: the PUT is
 *      idempotent at the agent, and resumes or reports);
 *   3. every task not waiting for an answer or a backoff sends its next
 *      request: a PUT to start or resume the pull, else a GET of its
 *      status.
 * A round never waits for an agent: answers are recorded by their
 * callbacks and written by the next round.
 *
 * What goes wrong, and what the stager does:
 *   - no answer, or a 5xx (agent down, restarting, overloaded): try
 *     again after a backoff (two rounds, 1 s, doubling to 60 s), the
 *     reason shown in the replica's error meanwhile;
 *   - the agent has forgotten the pull (404 on the status: it
 *     restarted): the attempt ends, a new PUT resumes from its staging;
 *   - the pull failed at the agent (which retries transient trouble
 *     with the source itself for minutes first): the attempt ends
 *     failed, and a new PUT tries again, up to STAGER_MAX_PULLS attempts
 *     in all; then the replica is failed with the agent's error;
 *   - the agent refused the request (4xx): the replica fails at once.
 * While a replica waits out a backoff its row says why (error) and when
 * the next try goes (next_try_ms), so that a user watching it sees both.
 * A replica that ends (complete or failed) kicks the scheduler, whose
 * staging jobs wait for exactly that.
 *
 * Elastic sites (aws, gcp, azure) get no replicas: their nodes pull a
 * job's version themselves, and what they report moving is recorded
 * here as a transfer and billed (broker__node_pull_record).
 *
 * The rounds also keep every site's agent_seen: a GET /healthz every
 * AGENT_PROBE_ROUNDS rounds, and the outcome of every pull request (no
 * answer or a 5xx is down, any other answer up), so that an agent that
 * is down shows in GET /v1/sites and /metrics even with nothing to pull.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/timeutil.h"

#define STAGER_MAX_PULLS 3
/* In rounds (stage_poll_ms each: 500 ms by default): after a failed
 * pull, 4 rounds times the attempts so far; after no answer, 2 rounds
 * doubling, to at most a minute. */
#define STAGER_RETRY_ROUNDS 4u
#define STAGER_BACKOFF_MIN_ROUNDS 2u
#define STAGER_BACKOFF_MAX_MS 60000u
/* Every 4 rounds (2 s by default): a /healthz costs the agent nothing,
 * and a user who just started a sync should not wait long to see why it
 * does not move. */
#define AGENT_PROBE_ROUNDS 4u

/* One replica being made. */
struct stage {
  struct stage *next;
  struct broker *b;
  char dataset[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  char site[SITE_NAME_LEN];      /* the destination */
  char source[SITE_NAME_LEN];    /* the dataset's source site */
  int64_t transfer_id;           /* this attempt's transfers row, or 0 */
  int64_t wire;                  /* its bytes on the wire so far */
  int64_t wire_base;             /* the replica's bytes_wire before it */
  int need_put;                  /* the next request (re)starts the pull */
  int inflight;
  int sent_put;                  /* the request in flight is the PUT */
  int attempts;                  /* pulls the agent reported failed */
  unsigned backoff_ms;
  uint64_t not_before;           /* uv_now() before which nothing goes */
  int seen;                      /* active in the last read */
  int gone;                      /* done: free once nothing is in flight */
  /* the last answer, written by the next round */
  int dirty;
  int rc;
  char why[ERR_MSG_SIZE];
  struct agentc_pull st;         /* path and error: the copies below */
  char *path;
  char *error;
};

static void round_cb(uv_timer_t *t);

void
broker__stager_init(struct broker *b)
{
  uv_timer_init(b->loop, &b->stage_timer);
  b->stage_timer.data = b;
  /* The first round at once: a restart resumes its replicas promptly. */
  uv_timer_start(&b->stage_timer, round_cb, 0, (uint64_t)b->stage_poll_ms);
}

void
broker__stager_close(struct broker *b)
{
  broker__close_handle(b, (uv_handle_t *)&b->stage_timer);
}

void
broker__stager_kick(struct broker *b)
{
  if (b->closing)
    return;
  uv_timer_start(&b->stage_timer, round_cb, 0, (uint64_t)b->stage_poll_ms);
}

static void
stage_free(struct stage *t)
{
  free(t->path);
  free(t->error);
  free(t);
}

void
broker__stager_free(struct broker *b)
{
  while (b->stages != NULL) {
    struct stage *t = b->stages;

    b->stages = t->next;
    stage_free(t);
  }
}

/* ---- agents' health ---- */

/* Record what s's agent just showed: up, or down saying why. */
static void
agent_mark(struct site *s, int up, const char *why)
{
  struct agent_seen *a = &s->agent_seen;
  enum agent_health h = up ? AGENT_UP : AGENT_DOWN;
  int64_t now = time_now_ms();

  if (a->health != h) {
    a->since_ms = now;
    if (h == AGENT_DOWN)
      log_warn("agent of site '%s' is down: %s", s->name, why);
    else if (a->health == AGENT_DOWN)
      log_info("agent of site '%s' answers again", s->name);
  }
  a->health = h;
  a->checked_ms = now;
  snprintf(a->error, sizeof(a->error), "%s", up ? "" : why);
}

static void
on_probe(void *arg, int rc, const struct err *e)
{
  struct site *s = arg;

  s->agent_seen.probing = 0;
  if (s->broker->closing)
    return;
  agent_mark(s, rc == 0, err_msg(e));
}

static void
probe_agents(struct broker *b, uint64_t now)
{
  for (size_t i = 0; i < b->nsites; i++) {
    struct site *s = &b->sites[i];
    struct err e = {0};

    if (s->agent == NULL || s->agent_seen.probing ||
        now < s->agent_seen.next_probe)
      continue;
    s->agent_seen.next_probe = now + (uint64_t)b->stage_poll_ms *
                                         AGENT_PROBE_ROUNDS;
    if (agentc_health(s->agent, on_probe, s, &e) < 0) {
      agent_mark(s, 0, err_msg(&e));
      continue;
    }
    s->agent_seen.probing = 1;
  }
}

/* ---- answers ---- */

static void
on_answer(void *arg, int rc, const struct agentc_pull *st,
          const struct err *e)
{
  struct stage *t = arg;
  struct site *dst;

  t->inflight = 0;
  /* Closing: the http client cancels what is in flight; nothing of it
   * is written (the next start resumes). */
  if (t->b->closing)
    return;
  dst = broker__site(t->b, t->site);
  if (dst != NULL)
    agent_mark(dst, rc == 0 || !agentc_transient(rc), err_msg(e));
  t->rc = rc;
  t->why[0] = '\0';
  free(t->path);
  free(t->error);
  t->path = t->error = NULL;
  if (rc < 0) {
    snprintf(t->why, sizeof(t->why), "%s", err_msg(e));
  } else {
    t->st = *st;
    t->path = st->path != NULL ? xstrdup(st->path) : NULL;
    t->error = st->error != NULL ? xstrdup(st->error) : NULL;
    t->st.path = t->path;
    t->st.error = t->error;
  }
  t->dirty = 1;
}

/* A failure found without asking the agent (no agent configured, a
 * request that could not be sent): handled like an answer. */
static void
local_failure(struct stage *t, int rc, const char *why)
{
  t->rc = rc;
  snprintf(t->why, sizeof(t->why), "%s", why);
  t->dirty = 1;
}

/* ---- writing an answer (inside the round's transaction) ---- */

static int
begin_transfer(struct broker *b, struct stage *t, const struct db_replica *r,
               int64_t now, struct err *e)
{
  struct db_transfer tr = {
      .dataset = t->dataset, .version = t->version, .from_site = t->source,
      .to_site = t->site, .state = (char *)"running", .started_ms = now};
  int rc = db_transfer_insert(b->db, &tr, e);

  if (rc < 0)
    return rc;
  t->transfer_id = tr.id;
  t->wire = 0;
  t->wire_base = r->bytes_wire;
  return 0;
}

static int
update_transfer(struct broker *b, struct stage *t, const char *state,
                const char *error, int64_t now, struct err *e)
{
  struct db_transfer tr = {.id = t->transfer_id, .bytes_wire = t->wire,
                           .state = (char *)state, .error = (char *)error,
                           .finished_ms = strcmp(state, "running") != 0
                                              ? now
                                              : 0};

  int rc;

  if (t->transfer_id == 0)
    return 0;
  rc = db_transfer_update(b->db, &tr, e);
  /* Over, well or not: what it put on the wire is egress. */
  if (rc == 0 && tr.finished_ms != 0)
    rc = broker__egress_bill(b, tr.id, NULL, t->dataset, t->version,
                             t->source, t->site, t->wire, now, e);
  if (strcmp(state, "running") != 0)
    t->transfer_id = 0;
  return rc;
}

/* Take the answer's bytes on the wire into this attempt's account. */
static int
account_wire(struct broker *b, struct stage *t, struct db_replica *r,
             int64_t now, struct err *e)
{
  int rc = 0;

  /* Fewer than already counted: the agent started this pull afresh
   * (it restarted too), so that is a new attempt. */
  if (t->transfer_id != 0 && t->st.bytes_wire < t->wire) {
    rc = update_transfer(b, t, "failed", "the agent started the pull "
                         "again", now, e);
    if (rc == 0)
      rc = begin_transfer(b, t, r, now, e);
  }
  if (rc == 0 && t->transfer_id == 0 && t->st.bytes_wire > 0)
    rc = begin_transfer(b, t, r, now, e);
  if (rc == 0 && t->st.bytes_wire > t->wire) {
    t->wire = t->st.bytes_wire;
    rc = update_transfer(b, t, "running", NULL, now, e);
  }
  r->bytes_wire = t->wire_base + t->wire;
  return rc;
}

static void
set_error(struct db_replica *r, const char *msg)
{
  free(r->error);
  r->error = msg != NULL ? xstrdup(msg) : NULL;
}

static void
progress(struct db_replica *r, const struct agentc_pull *st)
{
  r->bytes_total = st->bytes_total;
  r->bytes_done = st->bytes_done;
  r->bytes_saved = st->bytes_saved;
  r->files_total = st->files_total;
  r->files_done = st->files_done;
}

static int
fail_replica(struct broker *b, struct stage *t, struct db_replica *r,
             const char *why, int64_t now, int *kick, struct err *e)
{
  r->state = DB_REPLICA_FAILED;
  r->finished_ms = now;
  set_error(r, why);
  *kick = 1;
  t->gone = 1;
  log_warn("replica of %s@%.12s at site '%s' failed: %s", t->dataset,
           t->version, t->site, why);
  return update_transfer(b, t, "failed", why, now, e);
}

static int
complete_replica(struct broker *b, struct stage *t, struct db_replica *r,
                 int64_t now, int *kick, struct err *e)
{
  struct db_dataset_version v;
  int rc;

  /* An agent that held the version already reports no counters: the
   * version's own totals say what is there. */
  rc = db_dataset_version_get(b->db, t->dataset, t->version, &v, e);
  if (rc < 0)
    return rc;
  progress(r, &t->st);
  if (r->bytes_total < v.bytes)
    r->bytes_total = v.bytes;
  if (r->files_total < v.files)
    r->files_total = v.files;
  r->bytes_done = r->bytes_total;
  r->files_done = r->files_total;
  db_dataset_version_release(&v);
  r->state = DB_REPLICA_COMPLETE;
  free(r->path);
  r->path = xstrdup(t->st.path);
  if (r->started_ms == 0)
    r->started_ms = now;
  r->finished_ms = now;
  set_error(r, NULL);
  *kick = 1;
  t->gone = 1;
  log_info("replica of %s@%.12s at site '%s' complete: %lld bytes, %lld "
           "on the wire", t->dataset, t->version, t->site,
           (long long)r->bytes_total, (long long)r->bytes_wire);
  return update_transfer(b, t, "complete", NULL, now, e);
}

/* The agent answered with the pull's status. */
static int
apply_status(struct broker *b, struct stage *t, struct db_replica *r,
             int64_t now, int *kick, struct err *e)
{
  char msg[ERR_MSG_SIZE + 64];
  uint64_t wait_ms;
  int rc;

  t->backoff_ms = 0;
  t->need_put = 0;
  rc = account_wire(b, t, r, now, e);
  if (rc < 0)
    return rc;
  switch (t->st.state) {
  case AGENTC_PULL_RUNNING:
    if (t->transfer_id == 0)
      rc = begin_transfer(b, t, r, now, e);
    r->state = DB_REPLICA_SYNCING;
    if (r->started_ms == 0)
      r->started_ms = now;
    progress(r, &t->st);
    set_error(r, NULL);
    return rc;
  case AGENTC_PULL_COMPLETE:
    return complete_replica(b, t, r, now, kick, e);
  case AGENTC_PULL_FAILED:
    break;
  }
  progress(r, &t->st);
  t->attempts++;
  if (t->attempts >= STAGER_MAX_PULLS)
    return fail_replica(b, t, r, t->st.error, now, kick, e);
  snprintf(msg, sizeof(msg), "attempt %d of %d failed: %s; trying again",
           t->attempts, STAGER_MAX_PULLS, t->st.error);
  log_warn("replica of %s@%.12s at site '%s': %s", t->dataset, t->version,
           t->site, msg);
  set_error(r, msg);
  t->need_put = 1;
  wait_ms = (uint64_t)b->stage_poll_ms * STAGER_RETRY_ROUNDS *
            (unsigned)t->attempts;
  t->not_before = uv_now(b->loop) + wait_ms;
  r->next_try_ms = now + (int64_t)wait_ms;
  return update_transfer(b, t, "failed", t->st.error, now, e);
}

/* The request failed: no answer, or the agent refused it. */
static int
apply_failure(struct broker *b, struct stage *t, struct db_replica *r,
              int64_t now, int *kick, struct err *e)
{
  char msg[ERR_MSG_SIZE + 64];

  if (t->rc == ERR_NOT_FOUND && !t->sent_put) {
    /* The agent forgot the pull (it restarted): resume it. */
    t->need_put = 1;
    t->not_before = 0;
    return update_transfer(b, t, "failed", "the agent lost the pull "
                           "(restarted?); resumed by a new one", now, e);
  }
  if (!agentc_transient(t->rc))
    return fail_replica(b, t, r, t->why, now, kick, e);
  t->backoff_ms = t->backoff_ms == 0
                      ? (unsigned)b->stage_poll_ms * STAGER_BACKOFF_MIN_ROUNDS
                      : t->backoff_ms * 2;
  if (t->backoff_ms > STAGER_BACKOFF_MAX_MS)
    t->backoff_ms = STAGER_BACKOFF_MAX_MS;
  t->not_before = uv_now(b->loop) + t->backoff_ms;
  /* The error says why, next_try_ms when: a watcher shows both, and
   * the error stays the same text from one try to the next. */
  r->next_try_ms = now + (int64_t)t->backoff_ms;
  snprintf(msg, sizeof(msg), "%s; trying again in %u s", t->why,
           (t->backoff_ms + 999) / 1000);
  if (r->error == NULL || strcmp(r->error, t->why) != 0)
    log_info("replica of %s@%.12s at site '%s': %s", t->dataset,
             t->version, t->site, msg);
  set_error(r, t->why);
  return 0;
}

static int
apply(struct broker *b, struct stage *t, int *kick, struct err *e)
{
  struct db_replica r;
  int64_t now = time_now_ms();
  int rc;

  rc = db_replica_get(b->db, t->dataset, t->version, t->site, &r, e);
  if (rc == ERR_NOT_FOUND) {
    t->gone = 1;
    return 0;
  }
  if (rc < 0)
    return rc;
  if (r.state != DB_REPLICA_PENDING && r.state != DB_REPLICA_SYNCING) {
    /* Ended by someone else meanwhile; nothing to add. */
    t->gone = 1;
    goto out;
  }
  /* Set again below only when this answer means another wait. */
  r.next_try_ms = 0;
  if (t->rc < 0)
    rc = apply_failure(b, t, &r, now, kick, e);
  else
    rc = apply_status(b, t, &r, now, kick, e);
  r.updated_ms = now;
  if (rc == 0)
    rc = db_replica_put(b->db, &r, e);
out:
  db_replica_release(&r);
  return rc;
}

/* Step 1: write every answer that came in, in one transaction. */
static void
write_answers(struct broker *b)
{
  struct err e = {0};
  int kick = 0;
  int any = 0;
  int rc;

  for (struct stage *t = b->stages; t != NULL; t = t->next)
    any |= t->dirty;
  if (!any)
    return;
  rc = db_begin(b->db, &e);
  for (struct stage *t = b->stages; rc == 0 && t != NULL; t = t->next) {
    if (t->dirty)
      rc = apply(b, t, &kick, &e);
  }
  if (rc == 0)
    rc = db_commit(b->db, &e);
  if (rc < 0) {
    db_rollback(b->db);
    log_error("stager: cannot record the agents' answers: %s",
              err_msg(&e));
    /* What this round believed is gone with the transaction: start each
     * of these over from the agent's word (the PUT is idempotent). */
    for (struct stage *t = b->stages; t != NULL; t = t->next) {
      if (!t->dirty)
        continue;
      t->transfer_id = 0;
      t->need_put = 1;
      t->gone = 0;
    }
  }
  for (struct stage *t = b->stages; t != NULL; t = t->next)
    t->dirty = 0;
  if (kick)
    broker__kick(b);
}

/* ---- pulls made by elastic sites' nodes ---- */

int
broker__node_pull_record(struct broker *b, const char *project,
                         const char *dataset, const char *version,
                         const char *to, int64_t bytes, int failed,
                         int64_t now, struct err *e)
{
  struct db_dataset d;
  struct db_transfer tr;
  int rc;

  if (bytes <= 0)
    return 0;
  rc = db_dataset_get(b->db, dataset, &d, e);
  if (rc < 0)
    return rc;
  /* The node says how much moved, not when it began: the row is the
   * pull as tenbind heard of it, with the job's end. */
  tr = (struct db_transfer){.dataset = (char *)dataset,
                            .version = (char *)version,
                            .from_site = d.source_site,
                            .to_site = (char *)to,
                            .bytes_wire = bytes,
                            .state = (char *)(failed ? "failed"
                                                     : "complete"),
                            .error = failed ? (char *)"the node's pull "
                                                      "failed"
                                            : NULL,
                            .started_ms = now,
                            .finished_ms = now};
  rc = db_transfer_insert(b->db, &tr, e);
  if (rc == 0)
    rc = broker__egress_bill(b, tr.id, project, dataset, version,
                             d.source_site, to, bytes, now, e);
  db_dataset_release(&d);
  return rc;
}

/* ---- reading the work list ---- */

static struct stage *
find(struct broker *b, const struct db_replica *r)
{
  for (struct stage *t = b->stages; t != NULL; t = t->next) {
    if (strcmp(t->dataset, r->dataset) == 0 &&
        strcmp(t->version, r->version) == 0 && strcmp(t->site, r->site) == 0)
      return t;
  }
  return NULL;
}

/* A task for replica r: its first request is the PUT.  A transfer left
 * running by a previous run is carried on (the agent may still be on
 * that very pull). */
static struct stage *
stage_new(struct broker *b, const struct db_replica *r, struct err *e)
{
  struct db_dataset d;
  struct db_transfer tr;
  struct stage *t;
  int rc;

  rc = db_dataset_get(b->db, r->dataset, &d, e);
  if (rc < 0)
    return NULL;
  t = xcalloc(1, sizeof(*t));
  t->b = b;
  snprintf(t->dataset, sizeof(t->dataset), "%s", r->dataset);
  snprintf(t->version, sizeof(t->version), "%s", r->version);
  snprintf(t->site, sizeof(t->site), "%s", r->site);
  snprintf(t->source, sizeof(t->source), "%s", d.source_site);
  db_dataset_release(&d);
  t->need_put = 1;
  if (db_transfer_running(b->db, r->dataset, r->version, r->site, &tr,
                          NULL) == 0) {
    t->transfer_id = tr.id;
    t->wire = tr.bytes_wire;
    t->wire_base = r->bytes_wire > tr.bytes_wire
                       ? r->bytes_wire - tr.bytes_wire
                       : 0;
    db_transfer_release(&tr);
  }
  if (r->state == DB_REPLICA_SYNCING)
    log_info("resuming replica of %s@%.12s at site '%s'", r->dataset,
             r->version, r->site);
  t->next = b->stages;
  b->stages = t;
  return t;
}

static int
read_cb(const struct db_replica *r, void *arg)
{
  struct broker *b = arg;
  struct stage *t = find(b, r);
  struct err e = {0};

  if (t == NULL)
    t = stage_new(b, r, &e);
  if (t == NULL) {
    log_error("stager: replica of %s at site '%s': %s", r->dataset,
              r->site, err_msg(&e));
    return 0;
  }
  t->seen = 1;
  return 0;
}

/* Step 2. */
static void
read_work(struct broker *b)
{
  struct err e = {0};

  for (struct stage *t = b->stages; t != NULL; t = t->next)
    t->seen = 0;
  if (db_replica_list_active(b->db, read_cb, b, &e) < 0) {
    log_error("stager: cannot list replicas: %s", err_msg(&e));
    return;
  }
  for (struct stage *t = b->stages; t != NULL; t = t->next) {
    if (!t->seen)
      t->gone = 1;
  }
}

/* ---- requests ---- */

static void
send_one(struct broker *b, struct stage *t)
{
  struct site *dst = broker__site(b, t->site);
  struct site *src = broker__site(b, t->source);
  char why[ERR_MSG_SIZE];
  struct err e = {0};
  int rc;

  if (dst == NULL || dst->agent == NULL) {
    snprintf(why, sizeof(why), "site '%s' has no agent to pull with",
             t->site);
    local_failure(t, ERR_UNPROCESSABLE, why);
    return;
  }
  if (t->need_put && (src == NULL || src->agent == NULL)) {
    snprintf(why, sizeof(why), "the source site '%s' has no agent",
             t->source);
    local_failure(t, ERR_UNPROCESSABLE, why);
    return;
  }
  t->sent_put = t->need_put;
  if (t->need_put)
    rc = agentc_pull_put(dst->agent, t->dataset, t->version,
                         agentc_url(src->agent), agentc_token(src->agent),
                         dst->agent_bwlimit, on_answer, t, &e);
  else
    rc = agentc_pull_get(dst->agent, t->dataset, t->version, on_answer, t,
                         &e);
  if (rc < 0) {
    local_failure(t, rc, err_msg(&e));
    return;
  }
  t->inflight = 1;
}

static void
round_cb(uv_timer_t *timer)
{
  struct broker *b = timer->data;
  uint64_t now;

  if (b->closing)
    return;
  write_answers(b);
  read_work(b);
  now = uv_now(b->loop);
  for (struct stage **p = &b->stages; *p != NULL;) {
    struct stage *t = *p;

    if (t->gone && !t->inflight) {
      *p = t->next;
      stage_free(t);
      continue;
    }
    if (!t->gone && !t->inflight && !t->dirty && now >= t->not_before)
      send_one(b, t);
    p = &t->next;
  }
  probe_agents(b, now);
}
