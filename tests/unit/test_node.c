/*
 * Tests of tenbin-agent's node mode (agent/node.h) against a fake
 * tenbind: an http/server peer on 127.0.0.1 in the test's own loop that
 * plays the protocol of docs/NODES.md (it checks the bearer token,
 * assigns jobs, takes logs as tenbind does, answers 409 with the size it
 * holds) and also serves the cloud metadata paths, so that one loop and
 * one process hold both sides and ASan sees both.
 *
 * Jobs are real: the node agent runs them through the local adapter
 * under the shim, which is this test binary re-executed with "--shim"
 * (main dispatches it first, as tenbin-agent's main does).  Every wait
 * is for an event, bounded by a watchdog: never a timing assertion.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/local.h"
#include "agent/agent.h"
#include "agent/node.h"
#include "loop_peer.h"
#include "sync/agent_client.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define WATCHDOG_MS 100000u
#define TOKEN "node-token-0123456789"
#define HOSTNAME "node-test-1"
#define MAX_JOBS 16
#define MAX_OFFSETS 64
#define AWS_TOKEN "imds-session-token-1"
#define SRC_TOKEN "token-of-the-source-agent-0123"
#define AWS_ACTION "{\"action\": \"terminate\", \"time\": " \
                   "\"2026-11-21T14:02:00Z\"}"

/* What the fake tenbind knows of one job. */
struct fake_job {
  int64_t id;
  int seen;            /* some heartbeat listed it */
  int final_seen;      /* some heartbeat listed it in a final state */
  char state[16];      /* as the last heartbeat said */
  int exit_code;
  int sig;
  char reason[256];
  size_t log_at_final; /* log bytes held when the final state came */
  int was_submitted;   /* some heartbeat said "submitted" */
  char waiting[256];   /* ... with this reason */
  int64_t pulled_bytes; /* the final report's, -1 when absent */
  int pull_failed;
  struct buf log;      /* what tenbind holds of its stdout */
  uint64_t offsets[MAX_OFFSETS]; /* of the PUTs, in order */
  int nputs;
};

struct fake {
  /* the script */
  const char *token;
  int refuse;          /* answer 401 to every heartbeat */
  int fail_n;          /* answer 503 to the next fail_n heartbeats */
  int hb_ms;
  json_t *assign;      /* [{id, spec}]: handed out until reported */
  int assign_always;   /* ... or in every answer */
  int64_t cancel;      /* 0, or an id to cancel in every answer */
  int ack;             /* acknowledge final states */
  int stop;
  int preempted;       /* the metadata service announces the end */
  /* what it saw */
  int heartbeats;
  int bad_auth;
  int acked_at;        /* the heartbeat count when it first acked */
  json_t *first_hb;
  json_t *last_hb;
  struct fake_job jobs[MAX_JOBS];
  int njobs;
  int aws_token_puts;
  int meta_gets;
  int meta_bad;        /* metadata requests without the right header */
};

struct fx {
  uv_loop_t loop;
  uv_timer_t tick;
  uv_timer_t watchdog;
  char root[64];
  char url[64];
  struct http_server *srv;
  struct node_agent *node;
  struct agent *src;   /* a dataset source agent, when a test starts one */
  struct http_client *hc; /* the test's client of it */
  char src_url[64];
  struct fake fk;
  int exited;
  int status;
  int closed;
};

/* ---- the fake tenbind ---- */

static struct fake_job *
fake_job(struct fake *fk, int64_t id)
{
  for (int i = 0; i < fk->njobs; i++) {
    if (fk->jobs[i].id == id)
      return &fk->jobs[i];
  }
  assert_true(fk->njobs < MAX_JOBS);
  fk->jobs[fk->njobs].id = id;
  buf_init(&fk->jobs[fk->njobs].log, 64u << 20);
  return &fk->jobs[fk->njobs++];
}

static void
reply(struct http_request *req, int status, json_t *v)
{
  char *text = jsonx_dump(v);

  json_decref(v);
  http_respond(req, status, "application/json", text, strlen(text));
}

static void
reply_text(struct http_request *req, int status, const char *text)
{
  char *body = xstrdup(text);

  http_respond(req, status, "text/plain", body, strlen(body));
}

static int
authorized(struct fake *fk, struct http_request *req)
{
  const char *h = http_request_header(req, "Authorization");
  char want[128];

  snprintf(want, sizeof(want), "Bearer %s", fk->token);
  if (h != NULL && strcmp(h, want) == 0)
    return 1;
  fk->bad_auth++;
  return 0;
}

static void
fake_heartbeat(struct fake *fk, struct http_request *req)
{
  json_t *body;
  json_t *jobs;
  json_t *v;
  json_t *ans;
  json_t *assign = json_array();
  json_t *ack = json_array();
  json_t *item;
  size_t len;
  size_t i;
  const char *text = http_request_body(req, &len);

  if (fk->refuse) {
    reply(req, 401, json_pack("{s:{s:s,s:s}}", "error", "code",
                              "UNAUTHORIZED", "message", "no such node"));
    goto out;
  }
  if (fk->fail_n > 0) {
    fk->fail_n--;
    reply(req, 503, json_pack("{s:{s:s,s:s}}", "error", "code",
                              "UNAVAILABLE", "message", "busy"));
    goto out;
  }
  body = json_loadb(text, len, 0, NULL);
  assert_non_null(body);
  fk->heartbeats++;
  if (fk->first_hb == NULL)
    fk->first_hb = json_incref(body);
  json_decref(fk->last_hb);
  fk->last_hb = body;
  jobs = json_object_get(body, "jobs");
  assert_true(json_is_array(jobs));
  json_array_foreach(jobs, i, v) {
    struct fake_job *j = fake_job(fk, json_integer_value(
                                          json_object_get(v, "id")));
    const char *st = json_string_value(json_object_get(v, "state"));
    const char *reason = json_string_value(json_object_get(v, "reason"));

    assert_non_null(st);
    j->seen = 1;
    snprintf(j->state, sizeof(j->state), "%s", st);
    j->exit_code = (int)json_integer_value(json_object_get(v, "exit_code"));
    j->sig = (int)json_integer_value(json_object_get(v, "signal"));
    snprintf(j->reason, sizeof(j->reason), "%s",
             reason != NULL ? reason : "");
    if (strcmp(st, "submitted") == 0) {
      j->was_submitted = 1;
      snprintf(j->waiting, sizeof(j->waiting), "%s", j->reason);
    } else if (strcmp(st, "running") != 0) {
      json_t *pulled = json_object_get(v, "pulled_bytes");

      j->pulled_bytes = json_is_integer(pulled) ? json_integer_value(pulled)
                                                : -1;
      j->pull_failed = json_is_true(json_object_get(v, "pull_failed"));
      if (!j->final_seen)
        j->log_at_final = j->log.len;
      j->final_seen = 1;
      if (fk->ack) {
        json_array_append_new(ack, json_integer(j->id));
        if (fk->acked_at == 0)
          fk->acked_at = fk->heartbeats;
      }
    }
  }
  json_array_foreach(fk->assign, i, item) {
    int64_t id = json_integer_value(json_object_get(item, "id"));

    if (fk->assign_always || !fake_job(fk, id)->seen)
      json_array_append(assign, item);
  }
  ans = json_pack("{s:i, s:O, s:[], s:O, s:b}", "heartbeat_ms", fk->hb_ms,
                  "assign", assign, "cancel", "ack", ack, "stop", fk->stop);
  if (fk->cancel > 0)
    json_array_append_new(json_object_get(ans, "cancel"),
                          json_integer(fk->cancel));
  reply(req, 200, ans);
out:
  json_decref(assign);
  json_decref(ack);
}

/* PUT /v1/nodes/jobs/ID/log?offset=N, as tenbind takes it. */
static void
fake_log(struct fake *fk, struct http_request *req, int64_t id)
{
  struct fake_job *j = fake_job(fk, id);
  const char *q = http_request_query(req, "offset");
  const char *ct = http_request_header(req, "Content-Type");
  const char *data;
  size_t len;
  uint64_t off;

  assert_non_null(q);
  assert_non_null(ct);
  assert_string_equal(ct, "application/octet-stream");
  off = strtoull(q, NULL, 10);
  data = http_request_body(req, &len);
  assert_true(len <= NODE_LOG_CHUNK);
  if (j->nputs < MAX_OFFSETS)
    j->offsets[j->nputs++] = off;
  if (off != j->log.len) {
    reply(req, 409, json_pack("{s:{s:s,s:s}, s:I}", "error", "code",
                              "CONFLICT", "message", "offset is not the "
                              "size held", "size", (json_int_t)j->log.len));
    return;
  }
  assert_int_equal(buf_add(&j->log, data, len), 0);
  reply(req, 200, json_pack("{s:I}", "size", (json_int_t)j->log.len));
}

static void
fake_metadata(struct fake *fk, struct http_request *req, const char *path)
{
  const char *m = http_request_method(req);

  if (strcmp(path, "/latest/api/token") == 0 && strcmp(m, "PUT") == 0) {
    if (http_request_header(req, "X-aws-ec2-metadata-token-ttl-seconds") ==
        NULL) {
      fk->meta_bad++;
      reply_text(req, 400, "");
      return;
    }
    fk->aws_token_puts++;
    reply_text(req, 200, AWS_TOKEN);
    return;
  }
  fk->meta_gets++;
  if (strcmp(path, "/latest/meta-data/spot/instance-action") == 0) {
    const char *t = http_request_header(req, "X-aws-ec2-metadata-token");

    if (t == NULL || strcmp(t, AWS_TOKEN) != 0) {
      fk->meta_bad++;
      reply_text(req, 401, "");
    } else {
      reply_text(req, fk->preempted ? 200 : 404,
                 fk->preempted ? AWS_ACTION : "Not Found");
    }
    return;
  }
  if (strcmp(path, "/computeMetadata/v1/instance/preempted") == 0) {
    const char *h = http_request_header(req, "Metadata-Flavor");

    if (h == NULL || strcmp(h, "Google") != 0) {
      fk->meta_bad++;
      reply_text(req, 403, "");
    } else {
      reply_text(req, 200, fk->preempted ? "TRUE" : "FALSE");
    }
    return;
  }
  reply_text(req, 404, "");
}

static void
fake_handle(struct http_request *req, void *arg)
{
  struct fake *fk = arg;
  const char *path = http_request_path(req);
  long long id;
  int used = 0;

  if (strncmp(path, "/v1/", 4) != 0) {
    fake_metadata(fk, req, path);
    return;
  }
  if (!authorized(fk, req)) {
    reply(req, 401, json_pack("{s:{s:s,s:s}}", "error", "code",
                              "UNAUTHORIZED", "message", "bad token"));
    return;
  }
  if (strcmp(path, "/v1/nodes/heartbeat") == 0 &&
      strcmp(http_request_method(req), "POST") == 0) {
    fake_heartbeat(fk, req);
    return;
  }
  if (sscanf(path, "/v1/nodes/jobs/%lld/log%n", &id, &used) == 1 &&
      path[used] == '\0' && strcmp(http_request_method(req), "PUT") == 0) {
    fake_log(fk, req, id);
    return;
  }
  reply(req, 404, json_pack("{s:{s:s,s:s}}", "error", "code", "NOT_FOUND",
                            "message", "no route"));
}

/* Hand out job id running "/bin/sh -c cmd". */
static void
fake_assign_sh(struct fake *fk, int64_t id, const char *cmd)
{
  if (fk->assign == NULL)
    fk->assign = json_array();
  json_array_append_new(
      fk->assign,
      json_pack("{s:I, s:{s:s, s:s, s:[s,s,s]}}", "id", (json_int_t)id,
                "spec", "name", "t", "project", "p", "command", "/bin/sh",
                "-c", cmd));
}

/* ---- fixture ---- */

static void
on_tick(uv_timer_t *t)
{
  (void)t;
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));
  struct http_server_config sc = {
      .host = "127.0.0.1",
      .max_body = 2u << 20,
      .max_connections = 64,
      .conn_timeout_s = 10,
      .handler = fake_handle,
  };
  struct err e = {0};

  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->tick);
  loop_peer_watchdog(&f->loop, &f->watchdog, WATCHDOG_MS);
  snprintf(f->root, sizeof(f->root), "/tmp/tenbin-node-XXXXXX");
  assert_non_null(mkdtemp(f->root));
  f->fk.token = TOKEN;
  f->fk.hb_ms = 50;
  sc.handler_arg = &f->fk;
  if (http_server_start(&f->loop, &sc, &f->srv, &e) < 0)
    fail_msg("server: %s", e.msg);
  snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u",
           (unsigned)http_server_port(f->srv));
  *state = f;
  return 0;
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed++;
}

static void
close_node(struct fx *f)
{
  int want = f->closed + 1;

  if (f->node == NULL)
    return;
  node_agent_close(f->node, on_closed, f);
  f->node = NULL;
  /* Nothing is freed from inside the call. */
  assert_int_equal(f->closed, want - 1);
  while (f->closed < want)
    uv_run(&f->loop, UV_RUN_ONCE);
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;
  int want;

  close_node(f);
  want = f->closed;
  if (f->src != NULL) {
    agent_close(f->src, on_closed, f);
    want++;
  }
  if (f->hc != NULL) {
    http_client_close(f->hc, on_closed, f);
    want++;
  }
  while (f->closed < want)
    uv_run(&f->loop, UV_RUN_ONCE);
  want = f->closed + 1;
  http_server_close(f->srv, on_closed, f);
  while (f->closed < want)
    uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&f->tick, NULL);
  uv_close((uv_handle_t *)&f->watchdog, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  for (int i = 0; i < f->fk.njobs; i++)
    buf_release(&f->fk.jobs[i].log);
  json_decref(f->fk.assign);
  json_decref(f->fk.first_hb);
  json_decref(f->fk.last_hb);
  free(f);
  return 0;
}

static void
on_node_exit(void *arg, int status)
{
  struct fx *f = arg;

  f->exited++;
  f->status = status;
}

static struct node_config
node_cfg(struct fx *f)
{
  struct node_config c = {
      .server = f->url,
      .token = TOKEN,
      .root = f->root,
      .provider = NODE_PROVIDER_NONE,
      .gpus = "h100:2",
      .hostname = HOSTNAME,
      .agent_version = "test",
      .meta_poll_ms = 50,
      .log_flush_ms = 50,
      .backoff_ms = 20,
      .on_exit = on_node_exit,
      .on_exit_arg = f,
  };

  return c;
}

static void
start_node_with(struct fx *f, const struct node_config *c)
{
  struct err e = {0};

  if (node_agent_start(&f->loop, c, &f->node, &e) < 0)
    fail_msg("node_agent_start: %s", e.msg);
}

static void
start_node(struct fx *f)
{
  struct node_config c = node_cfg(f);

  start_node_with(f, &c);
}

typedef int (*pred_fn)(struct fx *f, const void *arg);

static void
run_until(struct fx *f, pred_fn pred, const void *arg)
{
  /* The tick wakes the loop to look again at what the fake recorded. */
  uv_timer_start(&f->tick, on_tick, 10, 10);
  while (!pred(f, arg))
    uv_run(&f->loop, UV_RUN_ONCE);
  uv_timer_stop(&f->tick);
}

static int
heartbeats_reach(struct fx *f, const void *arg)
{
  return f->fk.heartbeats >= *(const int *)arg;
}

static int
job_final(struct fx *f, const void *arg)
{
  return fake_job(&f->fk, *(const int64_t *)arg)->final_seen;
}

static int
job_seen(struct fx *f, const void *arg)
{
  return fake_job(&f->fk, *(const int64_t *)arg)->seen;
}

static int
has_exited(struct fx *f, const void *arg)
{
  (void)arg;
  return f->exited > 0;
}

static int
interruption_seen(struct fx *f, const void *arg)
{
  (void)arg;
  return f->fk.last_hb != NULL &&
         json_is_object(json_object_get(f->fk.last_hb, "interruption"));
}

/* The jobs the last heartbeat listed. */
static size_t
last_jobs(struct fx *f)
{
  return json_array_size(json_object_get(f->fk.last_hb, "jobs"));
}

/* ---- the protocol with tenbind ---- */

static void
test_registration_heartbeat_carries_hostname_and_gpus(void **state)
{
  struct fx *f = *state;
  int two = 2;
  json_t *hb;

  start_node(f);
  run_until(f, heartbeats_reach, &two);
  hb = f->fk.first_hb;
  assert_int_equal(f->fk.bad_auth, 0);
  assert_string_equal(jsonx_str(hb, "hostname"), HOSTNAME);
  assert_string_equal(jsonx_str(hb, "agent_version"), "test");
  assert_int_equal(json_integer_value(json_object_get(hb, "gpus")), 2);
  assert_string_equal(jsonx_str(hb, "gpu_type"), "h100");
  assert_int_equal(json_array_size(json_object_get(hb, "jobs")), 0);
  assert_true(json_is_null(json_object_get(hb, "interruption")));
  assert_int_equal(f->exited, 0);
}

static void
test_job_exit_3_is_reported_failed_with_exit_code_3(void **state)
{
  struct fx *f = *state;
  int64_t id = 7;
  struct fake_job *j;

  fake_assign_sh(&f->fk, id, "echo hello; exit 3");
  start_node(f);
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "failed");
  assert_int_equal(j->exit_code, 3);
  assert_int_equal(j->sig, 0);
  assert_string_equal(j->reason, "exit code 3");
  assert_int_equal(j->log.len, 6);
  assert_memory_equal(j->log.data, "hello\n", 6);
  assert_int_equal(j->log_at_final, 6);
}

static void
test_log_arrives_whole_before_the_final_state(void **state)
{
  struct fx *f = *state;
  int64_t id = 8;
  struct fake_job *j;
  const size_t size = 2500000; /* three PUTs of at most 1 MiB */

  fake_assign_sh(&f->fk, id, "yes hello | head -c 2500000");
  start_node(f);
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "succeeded");
  assert_int_equal(j->exit_code, 0);
  assert_int_equal(j->log_at_final, size);
  assert_int_equal(j->log.len, size);
  assert_true(j->nputs >= 3);
  for (size_t i = 0; i < size; i += 6)
    assert_memory_equal(j->log.data + i, "hello\n",
                        size - i < 6 ? size - i : 6);
}

static void
test_log_409_resumes_at_the_size_tenbind_holds(void **state)
{
  struct fx *f = *state;
  int64_t id = 9;
  struct fake_job *j = fake_job(&f->fk, id);
  int resumed = 0;

  /* tenbind holds 3 bytes from before (a PUT whose answer was lost). */
  assert_int_equal(buf_add(&j->log, "hel", 3), 0);
  fake_assign_sh(&f->fk, id, "echo hello; exit 0");
  start_node(f);
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "succeeded");
  assert_int_equal(j->log.len, 6);
  assert_memory_equal(j->log.data, "hello\n", 6);
  assert_int_equal(j->log_at_final, 6);
  assert_true(j->nputs >= 2);
  assert_int_equal(j->offsets[0], 0);
  for (int i = 1; i < j->nputs; i++)
    resumed |= j->offsets[i] == 3;
  assert_true(resumed);
}

static void
test_cancel_ends_a_sleeping_job_as_cancelled(void **state)
{
  struct fx *f = *state;
  int64_t id = 10;
  struct fake_job *j;

  fake_assign_sh(&f->fk, id, "sleep 30");
  start_node(f);
  run_until(f, job_seen, &id);
  assert_string_equal(fake_job(&f->fk, id)->state, "running");
  f->fk.cancel = id;
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "cancelled");
  assert_int_equal(f->exited, 0);
}

static int
count_lines(const char *path)
{
  char *text = NULL;
  int n = 0;

  if (file_read(path, 1 << 20, &text, NULL, NULL) < 0)
    return -1;
  for (const char *p = text; *p != '\0'; p++)
    n += *p == '\n';
  free(text);
  return n;
}

static void
test_ack_forgets_a_job_and_a_repeated_assignment_runs_it_once(void **state)
{
  struct fx *f = *state;
  int64_t id = 11;
  char count[128];
  char cmd[256];
  int after;

  snprintf(count, sizeof(count), "%s/runs", f->root);
  snprintf(cmd, sizeof(cmd), "echo run >> %s", count);
  fake_assign_sh(&f->fk, id, cmd);
  /* tenbind repeats the assignment in every answer, before and after
   * the ack: the job must still run once. */
  f->fk.assign_always = 1;
  f->fk.ack = 1;
  start_node(f);
  run_until(f, job_final, &id);
  assert_string_equal(fake_job(&f->fk, id)->state, "succeeded");
  after = f->fk.acked_at + 3;
  run_until(f, heartbeats_reach, &after);
  assert_int_equal(last_jobs(f), 0);
  assert_int_equal(count_lines(count), 1);
}

static void
test_unreachable_tenbind_is_retried_until_it_answers(void **state)
{
  struct fx *f = *state;
  int two = 2;

  f->fk.fail_n = 4;
  start_node(f);
  run_until(f, heartbeats_reach, &two);
  assert_int_equal(f->fk.fail_n, 0);
  assert_int_equal(f->exited, 0);
}

static void
test_refused_token_stops_the_agent_with_status_2(void **state)
{
  struct fx *f = *state;
  struct node_config c = node_cfg(f);

  c.token = "not-the-node-token";
  start_node_with(f, &c);
  run_until(f, has_exited, NULL);
  assert_int_equal(f->status, NODE_EXIT_REFUSED);
  assert_int_equal(f->status, 2);
  assert_true(f->fk.bad_auth > 0);
  assert_int_equal(f->fk.heartbeats, 0);
}

static void
test_401_on_a_heartbeat_stops_the_agent_with_status_2(void **state)
{
  struct fx *f = *state;

  f->fk.refuse = 1;
  start_node(f);
  run_until(f, has_exited, NULL);
  assert_int_equal(f->status, 2);
  assert_int_equal(f->exited, 1);
}

static void
test_stop_cancels_running_jobs_and_exits_0(void **state)
{
  struct fx *f = *state;
  int64_t id = 12;
  json_t *jobs;

  fake_assign_sh(&f->fk, id, "sleep 30");
  start_node(f);
  run_until(f, job_seen, &id);
  f->fk.stop = 1;
  run_until(f, has_exited, NULL);
  assert_int_equal(f->status, NODE_EXIT_STOPPED);
  /* The last heartbeat before the exit says how the job ended. */
  jobs = json_object_get(f->fk.last_hb, "jobs");
  assert_int_equal(json_array_size(jobs), 1);
  assert_string_equal(jsonx_str(json_array_get(jobs, 0), "state"),
                      "cancelled");
}

static void
test_spec_that_does_not_parse_is_reported_failed(void **state)
{
  struct fx *f = *state;
  int64_t id = 13;
  struct fake_job *j;

  f->fk.assign = json_pack("[{s:i, s:{s:s}}]", "id", 13, "spec", "name",
                           "no command");
  start_node(f);
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "failed");
  assert_int_equal(j->exit_code, -1);
  assert_non_null(strstr(j->reason, "spec: "));
  assert_non_null(strstr(j->reason, "command"));
}

/* ---- datasets pulled onto the node ---- */

struct published {
  int done;
  int rc;
  char v[AGENTC_VERSION_HEX + 1];
  char msg[ERR_MSG_SIZE];
};

static void
on_published(void *arg, int rc, const struct agentc_version *v,
             const struct err *e)
{
  struct published *p = arg;

  p->done = 1;
  p->rc = rc;
  if (rc == 0)
    snprintf(p->v, sizeof(p->v), "%s", v->version);
  else
    snprintf(p->msg, sizeof(p->msg), "%s", e->msg);
}

/* A source agent on ROOT/src, as a site's tenbin-agent is, publishing
 * ROOT/src/ds as dataset "train": hello.txt and 300 kB of data.  The
 * version id into v (65 bytes). */
static void
start_source(struct fx *f, char *v)
{
  char dir[128], ds[160];
  char big[300000];
  struct agent_config ac = {.host = "127.0.0.1", .token = SRC_TOKEN,
                            .draft_ms = -1};
  struct published pub = {0};
  struct agentc *c = NULL;
  struct err e = {0};

  snprintf(dir, sizeof(dir), "%s/src", f->root);
  snprintf(ds, sizeof(ds), "%s/ds", dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(mkdir(ds, 0700), 0);
  assert_int_equal(file_write_atomic(ds, "hello.txt", "tokens: 42\n", 11,
                                     0644, &e), 0);
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (char)(i * 7919 % 251);
  assert_int_equal(file_write_atomic(ds, "shard.bin", big, sizeof(big),
                                     0644, &e), 0);
  ac.root = dir;
  if (agent_start(&f->loop, &ac, &f->src, &e) < 0)
    fail_msg("source agent: %s", e.msg);
  snprintf(f->src_url, sizeof(f->src_url), "http://127.0.0.1:%u",
           (unsigned)agent_port(f->src));
  if (http_client_new(&f->loop, NULL, &f->hc, &e) < 0 ||
      agentc_new(f->hc, f->src_url, SRC_TOKEN, &c, &e) < 0 ||
      agentc_publish(c, "train", "ds", on_published, &pub, &e) < 0)
    fail_msg("publish: %s", e.msg);
  while (!pub.done)
    uv_run(&f->loop, UV_RUN_ONCE);
  agentc_free(c);
  if (pub.rc < 0)
    fail_msg("publish: %s", pub.msg);
  snprintf(v, AGENTC_VERSION_HEX + 1, "%s", pub.v);
}

/* Hand out job id running "/bin/sh -c cmd" with version v of "train",
 * pulled from url with token. */
static void
fake_assign_data(struct fake *fk, int64_t id, const char *cmd,
                 const char *v, const char *url, const char *token)
{
  if (fk->assign == NULL)
    fk->assign = json_array();
  json_array_append_new(
      fk->assign,
      json_pack("{s:I, s:{s:s, s:s, s:[s,s,s]}, s:{s:s, s:s, s:s, s:s}}",
                "id", (json_int_t)id, "spec", "name", "t", "project", "p",
                "command", "/bin/sh", "-c", cmd, "dataset", "name", "train",
                "version", v, "url", url, "token", token));
}

static int
job_submitted(struct fx *f, const void *arg)
{
  return fake_job(&f->fk, *(const int64_t *)arg)->was_submitted;
}

static void
test_job_reads_its_dataset_pulled_from_the_source_agent(void **state)
{
  struct fx *f = *state;
  char v[AGENTC_VERSION_HEX + 1];
  char want[256];
  int64_t id = 21, again = 22;
  struct fake_job *j;

  start_source(f, v);
  fake_assign_data(&f->fk, id, "cat \"$TENBIN_DATASET_DIR/hello.txt\"; "
                   "echo \"$TENBIN_DATASET\"; case \"$TENBIN_DATASET_DIR\" "
                   "in \"$TENBIN_ROOT\"/datasets/*) echo under-root;; esac; "
                   "wc -c <\"$TENBIN_DATASET_DIR/shard.bin\"",
                   v, f->src_url, SRC_TOKEN);
  setenv("TENBIN_ROOT", f->root, 1);
  start_node(f);
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "succeeded");
  snprintf(want, sizeof(want), "tokens: 42\ntrain@%s\nunder-root\n300000\n",
           v);
  assert_int_equal(j->log.len, strlen(want));
  assert_memory_equal(j->log.data, want, strlen(want));
  /* Its own pull: the manifest and the data crossed the network. */
  assert_true(j->pulled_bytes > 300000);
  assert_false(j->pull_failed);

  /* A second job of the same version finds it here: nothing moves. */
  fake_assign_data(&f->fk, again, "cat \"$TENBIN_DATASET_DIR/hello.txt\"",
                   v, f->src_url, SRC_TOKEN);
  run_until(f, job_final, &again);
  j = fake_job(&f->fk, again);
  assert_string_equal(j->state, "succeeded");
  assert_int_equal(j->log.len, 11);
  assert_memory_equal(j->log.data, "tokens: 42\n", 11);
  assert_int_equal(j->pulled_bytes, 0);
  unsetenv("TENBIN_ROOT");
}

static void
test_failed_pull_fails_the_job_saying_why_and_it_never_runs(void **state)
{
  struct fx *f = *state;
  char v[AGENTC_VERSION_HEX + 1];
  char ran[128], cmd[256];
  int64_t id = 23;
  struct fake_job *j;

  start_source(f, v);
  snprintf(ran, sizeof(ran), "%s/ran", f->root);
  snprintf(cmd, sizeof(cmd), "touch %s", ran);
  /* The source refuses the token: no retry mends that. */
  fake_assign_data(&f->fk, id, cmd, v, f->src_url, "not-the-source-token");
  start_node(f);
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "failed");
  assert_non_null(strstr(j->reason, "dataset train@"));
  assert_non_null(strstr(j->reason, "the pull failed"));
  assert_non_null(strstr(j->reason, "401"));
  assert_true(j->pull_failed);
  assert_int_equal(j->pulled_bytes, 0);
  assert_int_equal(j->log.len, 0);
  assert_int_equal(access(ran, F_OK), -1);
}

static void
test_job_waiting_for_its_dataset_is_submitted_and_can_be_cancelled(
    void **state)
{
  struct fx *f = *state;
  char v[AGENTC_VERSION_HEX + 1];
  int64_t id = 24;
  struct fake_job *j;

  memset(v, 'a', AGENTC_VERSION_HEX);
  v[AGENTC_VERSION_HEX] = '\0';
  /* Nothing listens there: the pull retries (for minutes) meanwhile. */
  fake_assign_data(&f->fk, id, "echo should-not-run", v,
                   "http://127.0.0.1:1", SRC_TOKEN);
  start_node(f);
  run_until(f, job_submitted, &id);
  j = fake_job(&f->fk, id);
  assert_false(j->final_seen);
  assert_non_null(strstr(j->waiting, "pulling dataset train@aaaa"));
  f->fk.cancel = id;
  run_until(f, job_final, &id);
  j = fake_job(&f->fk, id);
  assert_string_equal(j->state, "cancelled");
  assert_string_equal(j->reason, "cancelled before it started");
  assert_int_equal(j->log.len, 0);
}

/* ---- spot interruptions ---- */

static void
test_gcp_preemption_is_reported_in_the_next_heartbeat_at_once(
    void **state)
{
  struct fx *f = *state;
  struct node_config c = node_cfg(f);
  int one = 1;
  json_t *intr;
  int before;

  c.provider = NODE_PROVIDER_GCP;
  c.metadata_url = f->url;
  /* Heartbeats a minute apart: only "at once" brings the notice. */
  f->fk.hb_ms = 60000;
  start_node_with(f, &c);
  run_until(f, heartbeats_reach, &one);
  while (f->fk.meta_gets < 2)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(json_is_null(json_object_get(f->fk.last_hb, "interruption")));
  before = f->fk.heartbeats;
  f->fk.preempted = 1;
  run_until(f, interruption_seen, NULL);
  assert_int_equal(f->fk.heartbeats, before + 1);
  intr = json_object_get(f->fk.last_hb, "interruption");
  assert_string_equal(jsonx_str(intr, "provider"), "gcp");
  assert_non_null(strstr(jsonx_str(intr, "notice"), "preempted"));
  assert_int_equal(json_integer_value(json_object_get(intr, "ends_ms")), 0);
  assert_int_equal(f->fk.meta_bad, 0);
}

static void
test_aws_instance_action_is_reported_with_its_time(void **state)
{
  struct fx *f = *state;
  struct node_config c = node_cfg(f);
  json_t *intr;
  int64_t want;
  int one = 1;
  int gets;

  c.provider = NODE_PROVIDER_AWS;
  c.metadata_url = f->url;
  start_node_with(f, &c);
  run_until(f, heartbeats_reach, &one);
  /* A few polls with nothing to say (404), on one session token. */
  while (f->fk.meta_gets < 3)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(json_is_null(json_object_get(f->fk.last_hb, "interruption")));
  gets = f->fk.meta_gets;
  f->fk.preempted = 1;
  run_until(f, interruption_seen, NULL);
  assert_true(f->fk.meta_gets > gets);
  assert_int_equal(f->fk.aws_token_puts, 1);
  assert_int_equal(f->fk.meta_bad, 0);
  intr = json_object_get(f->fk.last_hb, "interruption");
  assert_string_equal(jsonx_str(intr, "provider"), "aws");
  assert_non_null(strstr(jsonx_str(intr, "notice"), "terminate"));
  assert_int_equal(time_parse_iso("2026-11-21T14:02:00Z", &want), 0);
  assert_int_equal(json_integer_value(json_object_get(intr, "ends_ms")),
                   want);
}

/* ---- the parsers of outside input ---- */

/* An answer assigning job 1 with a dataset of those JSON values. */
#define DATA_ASSIGN(name, version, url, token)                             \
  "{\"assign\": [{\"id\": 1, \"spec\": {}, \"dataset\": {\"name\": " name    \
  ", \"version\": " version ", \"url\": " url ", \"token\": " token "}}]}"
#define V64 "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""

static int
parse_answer(const char *text, struct node_answer *a, struct err *e)
{
  return node_answer_parse(text, strlen(text), a, e);
}

static void
test_answer_is_read_and_bounded(void **state)
{
  struct node_answer a;
  struct err e = {0};
  struct buf big;

  (void)state;
  assert_int_equal(parse_answer("{\"heartbeat_ms\": 5, \"assign\": [{\"id\": "
                                "4, \"spec\": {}}], \"cancel\": [1, 2], "
                                "\"ack\": [3], \"stop\": true, \"new\": 1}",
                                &a, &e), 0);
  assert_int_equal(a.heartbeat_ms, NODE_HEARTBEAT_MIN_MS);
  assert_int_equal(a.nassign, 1);
  assert_int_equal(a.assign[0].id, 4);
  assert_int_equal(a.ncancel, 2);
  assert_int_equal(a.cancel[1], 2);
  assert_int_equal(a.nack, 1);
  assert_true(a.stop);
  node_answer_release(&a);
  assert_int_equal(parse_answer("{\"heartbeat_ms\": 999999999}", &a, &e), 0);
  assert_int_equal(a.heartbeat_ms, NODE_HEARTBEAT_MAX_MS);
  assert_int_equal(a.nassign + a.ncancel + a.nack, 0);
  node_answer_release(&a);
  assert_int_equal(parse_answer("{}", &a, &e), 0);
  assert_int_equal(a.heartbeat_ms, NODE_HEARTBEAT_DEFAULT_MS);
  node_answer_release(&a);

  assert_int_equal(parse_answer("{\"cancel\": [0]}", &a, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "cancel[0]"));
  assert_int_equal(parse_answer("{\"ack\": [-4]}", &a, &e), ERR_INVALID);
  assert_int_equal(parse_answer("{\"assign\": [{\"id\": 1.5, \"spec\": {}}]}",
                                &a, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "assign[0].id"));
  assert_int_equal(parse_answer("{\"assign\": [{\"id\": 1, \"spec\": 3}]}",
                                &a, &e), ERR_INVALID);
  assert_int_equal(parse_answer("{\"stop\": 1}", &a, &e), ERR_INVALID);
  assert_int_equal(parse_answer(DATA_ASSIGN("\"train\"", V64,
                                            "\"https://src:7000\"",
                                            "\"tok\""), &a, &e), 0);
  assert_string_equal(a.assign[0].dataset.name, "train");
  assert_string_equal(a.assign[0].dataset.url, "https://src:7000");
  assert_string_equal(a.assign[0].dataset.token, "tok");
  node_answer_release(&a);
  assert_int_equal(parse_answer(DATA_ASSIGN("\"../x\"", V64, "\"http://s\"",
                                            "\"t\""), &a, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "assign[0].dataset.name"));
  assert_int_equal(parse_answer(DATA_ASSIGN("\"train\"", "\"ABC\"",
                                            "\"http://s\"", "\"t\""), &a,
                                &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "assign[0].dataset.version"));
  assert_int_equal(parse_answer(DATA_ASSIGN("\"train\"", V64,
                                            "\"file:///etc\"", "\"t\""),
                                &a, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "assign[0].dataset.url"));
  assert_int_equal(parse_answer(DATA_ASSIGN("\"train\"", V64, "\"http://s\"",
                                            "\"a b\""), &a, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "assign[0].dataset.token"));
  assert_int_equal(parse_answer(DATA_ASSIGN("\"train\"", V64, "\"http://s\"",
                                            "7"), &a, &e), ERR_INVALID);
  assert_int_equal(parse_answer("{\"assign\": [{\"id\": 1, \"spec\": {}, "
                                "\"dataset\": \"train\"}]}", &a, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "assign[0].dataset"));
  assert_int_equal(parse_answer("{\"heartbeat_ms\": \"1\"}", &a, &e),
                   ERR_INVALID);
  assert_int_equal(parse_answer("[]", &a, &e), ERR_INVALID);
  assert_int_equal(parse_answer("{", &a, &e), ERR_INVALID);
  buf_init(&big, 1 << 20);
  assert_int_equal(buf_adds(&big, "{\"assign\": ["), 0);
  for (int i = 0; i <= NODE_MAX_ASSIGN; i++)
    assert_int_equal(buf_addf(&big, "%s{\"id\": %d, \"spec\": {}}",
                              i > 0 ? "," : "", i + 1), 0);
  assert_int_equal(buf_adds(&big, "]}"), 0);
  assert_int_equal(parse_answer(buf_str(&big), &a, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "at most"));
  buf_release(&big);
}

static void
test_gpus_spec_becomes_the_local_adapter_config(void **state)
{
  struct err e = {0};
  json_t *v;

  (void)state;
  assert_int_equal(node_gpus_config(NULL, &v, &e), 0);
  assert_string_equal(json_string_value(v), "auto");
  json_decref(v);
  assert_int_equal(node_gpus_config("none", &v, &e), 0);
  assert_int_equal(json_object_size(v), 0);
  json_decref(v);
  assert_int_equal(node_gpus_config("h100:8", &v, &e), 0);
  assert_int_equal(json_integer_value(json_object_get(v, "h100")), 8);
  json_decref(v);
  assert_int_equal(node_gpus_config("h100:4,l4:2", &v, &e), 0);
  assert_int_equal(json_integer_value(json_object_get(v, "l4")), 2);
  json_decref(v);
  assert_int_equal(node_gpus_config("h100", &v, &e), ERR_CONFIG);
  assert_int_equal(node_gpus_config("h100:x", &v, &e), ERR_CONFIG);
  assert_int_equal(node_gpus_config("h100:-1", &v, &e), ERR_CONFIG);
  assert_int_equal(node_gpus_config("h100:99999", &v, &e), ERR_CONFIG);
  assert_int_equal(node_gpus_config("a:1,a:2", &v, &e), ERR_CONFIG);
  assert_int_equal(node_gpus_config("a:1,", &v, &e), ERR_CONFIG);
  assert_int_equal(node_gpus_config(":1", &v, &e), ERR_CONFIG);
}

static int
azure(const char *body, const char *vm, struct node_interruption *i)
{
  return node_meta_parse_azure(body, strlen(body), vm, i);
}

static void
test_azure_preempt_counts_for_this_vm_or_the_whole_set(void **state)
{
  struct node_interruption i;
  int64_t want;

  (void)state;
  assert_int_equal(azure("{\"DocumentIncarnation\": 1, \"Events\": []}",
                         "vm1", &i), 0);
  assert_int_equal(azure("{\"Events\": [{\"EventType\": \"Reboot\", "
                         "\"Resources\": [\"vm1\"]}]}", "vm1", &i), 0);
  assert_int_equal(azure("{\"Events\": [{\"EventType\": \"Preempt\", "
                         "\"Resources\": [\"vm2\"]}]}", "vm1", &i), 0);
  assert_int_equal(azure("{\"Events\": [{\"EventType\": \"Preempt\", "
                         "\"EventId\": \"E1\", \"Resources\": [\"vm2\", "
                         "\"VM1\"], \"NotBefore\": \"Mon, 19 Sep 2016 "
                         "18:29:47 GMT\", \"Description\": \"bye\"}]}",
                         "vm1", &i), 1);
  assert_int_equal(i.provider, NODE_PROVIDER_AZURE);
  assert_int_equal(time_parse_iso("2016-09-19T18:29:47Z", &want), 0);
  assert_int_equal(i.ends_ms, want);
  assert_non_null(strstr(i.notice, "E1"));
  assert_non_null(strstr(i.notice, "bye"));
  assert_int_equal(azure("{\"Events\": [{\"EventType\": \"Preempt\", "
                         "\"Resources\": [], \"NotBefore\": \"\"}]}", NULL,
                         &i), 1);
  assert_int_equal(i.ends_ms, 0);
  /* A date that does not exist is an unknown end, not a wrong one. */
  assert_int_equal(azure("{\"Events\": [{\"EventType\": \"Preempt\", "
                         "\"NotBefore\": \"Mon, 31 Feb 2016 18:29:47 "
                         "GMT\"}]}", "vm1", &i), 1);
  assert_int_equal(i.ends_ms, 0);
  assert_int_equal(azure("{\"Events\": {}}", "vm1", &i), ERR_INVALID);
  assert_int_equal(azure("{\"Events\": [{\"EventType\": \"Preempt\", "
                         "\"Resources\": [7]}]}", "vm1", &i), ERR_INVALID);
  assert_int_equal(azure("nonsense", "vm1", &i), ERR_INVALID);
}

static void
test_metadata_answers_are_read_strictly_and_cut(void **state)
{
  struct node_interruption i;
  char body[2048];
  size_t n;

  (void)state;
  assert_int_equal(node_meta_parse_gcp("TRUE\n", 5, &i), 1);
  assert_int_equal(i.provider, NODE_PROVIDER_GCP);
  assert_int_equal(node_meta_parse_gcp("FALSE", 5, &i), 0);
  assert_int_equal(node_meta_parse_gcp("MAYBE", 5, &i), ERR_INVALID);
  assert_int_equal(node_meta_parse_gcp("", 0, &i), ERR_INVALID);
  assert_int_equal(node_meta_parse_aws(AWS_ACTION, strlen(AWS_ACTION), &i),
                   1);
  assert_int_equal(node_meta_parse_aws("{}", 2, &i), ERR_INVALID);
  assert_int_equal(node_meta_parse_aws("<html>", 6, &i), ERR_INVALID);
  /* A long action with bytes that are not text: cut, and printable. */
  n = (size_t)snprintf(body, sizeof(body), "{\"action\": \"");
  for (int k = 0; k < 600; k++)
    body[n++] = k % 2 ? 'x' : '\t';
  n += (size_t)snprintf(body + n, sizeof(body) - n, "\"}");
  body[n] = '\0';
  /* \t is an escape JSON needs: write it as one. */
  {
    char esc[4096];
    size_t o = 0;

    for (size_t k = 0; k < n; k++) {
      if (body[k] == '\t') {
        esc[o++] = '\\';
        esc[o++] = 't';
      } else {
        esc[o++] = body[k];
      }
    }
    assert_int_equal(node_meta_parse_aws(esc, o, &i), 1);
  }
  assert_int_equal(strlen(i.notice), NODE_NOTICE_MAX);
  for (size_t k = 0; k < strlen(i.notice); k++)
    assert_true(i.notice[k] >= 0x20 && i.notice[k] < 0x7f);
}

static void
test_config_errors_name_what_is_wrong(void **state)
{
  struct fx *f = *state;
  struct node_config c = node_cfg(f);
  struct err e = {0};
  struct node_agent *a = NULL;

  c.server = "ftp://x";
  assert_int_equal(node_agent_start(&f->loop, &c, &a, &e), ERR_CONFIG);
  assert_non_null(strstr(e.msg, "--server"));
  c = node_cfg(f);
  c.token = "";
  assert_int_equal(node_agent_start(&f->loop, &c, &a, &e), ERR_CONFIG);
  assert_non_null(strstr(e.msg, "token"));
  c = node_cfg(f);
  c.token = "two words";
  assert_int_equal(node_agent_start(&f->loop, &c, &a, &e), ERR_CONFIG);
  c = node_cfg(f);
  c.gpus = "h100:lots";
  assert_int_equal(node_agent_start(&f->loop, &c, &a, &e), ERR_CONFIG);
  assert_non_null(strstr(e.msg, "--gpus"));
  /* The token would cross the network in clear. */
  c = node_cfg(f);
  c.server = "http://192.0.2.1:8080";
  assert_int_equal(node_agent_start(&f->loop, &c, &a, &e), ERR_CONFIG);
  assert_non_null(strstr(e.msg, "--server"));
  /* A failed start hands nothing out; what it opened closes on the
   * loop (the teardown runs it). */
  assert_null(a);
}

int
main(int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_answer_is_read_and_bounded),
      cmocka_unit_test(test_gpus_spec_becomes_the_local_adapter_config),
      cmocka_unit_test(test_azure_preempt_counts_for_this_vm_or_the_whole_set),
      cmocka_unit_test(test_metadata_answers_are_read_strictly_and_cut),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_config_errors_name_what_is_wrong),
      T(test_registration_heartbeat_carries_hostname_and_gpus),
      T(test_job_exit_3_is_reported_failed_with_exit_code_3),
      T(test_log_arrives_whole_before_the_final_state),
      T(test_log_409_resumes_at_the_size_tenbind_holds),
      T(test_cancel_ends_a_sleeping_job_as_cancelled),
      T(test_ack_forgets_a_job_and_a_repeated_assignment_runs_it_once),
      T(test_unreachable_tenbind_is_retried_until_it_answers),
      T(test_refused_token_stops_the_agent_with_status_2),
      T(test_401_on_a_heartbeat_stops_the_agent_with_status_2),
      T(test_stop_cancels_running_jobs_and_exits_0),
      T(test_spec_that_does_not_parse_is_reported_failed),
      T(test_job_reads_its_dataset_pulled_from_the_source_agent),
      T(test_failed_pull_fails_the_job_saying_why_and_it_never_runs),
      T(test_job_waiting_for_its_dataset_is_submitted_and_can_be_cancelled),
      T(test_gcp_preemption_is_reported_in_the_next_heartbeat_at_once),
      T(test_aws_instance_action_is_reported_with_its_time),
#undef T
  };
  int rc;

  /* The shim is this binary, as it is tenbin-agent in production. */
  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
