/*
 * Tests for adapters/slurm.c: the slurm site adapter's state machine
 * (exactly-once with tags, uncertain submits, listing generations,
 * purged jobs, refused tokens, malformed answers).
 *
 * The adapter is driven through its public vtable and its config only.
 * Its peer is a fake slurmrestd built on http/server.h in this file, on
 * the same loop (the pattern of test_sync_agent_client.c).  It answers
 * what each test put in its canned replies, which follow slurmrestd
 * v0.0.38's real shapes (Slurm 22.05.8, ../shared/research and the
 * fixtures of test_slurm_schema.c).  It can hold a request unanswered,
 * so that a test decides when a listing or a submit answer arrives, or
 * that one never arrives in time.  A watchdog turns a hang into a
 * failure (a bound, never a measurement).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/adapter.h"
#include "adapters/slurm.h"
#include "http/server.h"
#include "util/alloc.h"
#include "util/utf8.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 60000u
#define INSTANCE "abc123"
#define GOOD_TOKEN "tok-good"
#define TIMEOUT_MS 1000
#define MAX_UPDATES 64

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* Turn the loop until cond holds (the watchdog bounds it). */
#define RUN_UNTIL(fx, cond)                                                \
  do {                                                                     \
    while (!(cond))                                                        \
      uv_run(&(fx)->loop, UV_RUN_ONCE);                                    \
  } while (0)

/* One update the adapter gave the broker. */
struct upd {
  int64_t job_id;
  enum job_state state;
  char remote[24];
  char alloc[64];
  char reason[512];
  int exit_code;
};

/* A canned answer: status and body (NULL body: empty). */
struct canned {
  int status;
  const char *body;
  size_t len; /* 0: strlen(body) */
};

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_timer_t pause;
  int paused;
  struct http_server *srv;
  void *site;
  char url[64];
  char dir[64];
  char token_file[128];
  char count_file[128];
  int closed;

  /* what the fake slurmrestd answers */
  struct canned jobs;
  struct canned nodes;
  struct canned submit;
  struct canned db;
  struct canned del;
  int hold_jobs;   /* hold the next listing in held_jobs */
  int hold_submit; /* hold the next submit in held_submit */
  struct http_request *held_jobs;
  struct http_request *held_submit;
  const char *good_token; /* any other token is refused like slurmctld */
  char listing[32768];

  /* what it was asked */
  int n_jobs;
  int n_nodes;
  int n_submit;
  int n_db;
  int n_del;
  int n_refused;
  char last_token[128];
  char user[64];
  char db_path[128];
  char del_path[128];
  char *submit_body;

  /* what the adapter told the broker */
  struct upd u[MAX_UPDATES];
  size_t nu;
};

/* ---- canned answers (real shapes) ---- */

/* GET nodes on onprem, idle (trimmed NODES_ONPREM). */
static const char NODES_ONPREM[] =
    "{\"meta\":{},\"errors\":[],\"nodes\":[{\"name\":\"onprem-gpu1\","
    "\"state\":\"idle\",\"state_flags\":[],\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"partitions\":[\"gpu\"],\"reason\":\"\",\"cpus\":32,"
    "\"alloc_cpus\":0,\"idle_cpus\":32,\"address\":\"127.0.0.1\"}]}";

/* GET nodes on the testbed's elastic cluster (scripts/slurm-testbed
 * --elastic), trimmed: two State=CLOUD nodes powered down; then the first
 * one up after a job, the second still powered down. */
static const char NODES_ELASTIC_DOWN[] =
    "{\"meta\":{},\"errors\":[],\"nodes\":["
    "{\"name\":\"elastic-h100-1\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"partitions\":[\"gpu\"],\"reason\":\"\",\"boot_time\":0},"
    "{\"name\":\"elastic-h100-2\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"partitions\":[\"gpu\"],\"reason\":\"\",\"boot_time\":0}]}";
static const char NODES_ELASTIC_ONE_UP[] =
    "{\"meta\":{},\"errors\":[],\"nodes\":["
    "{\"name\":\"elastic-h100-1\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\"],\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"partitions\":[\"gpu\"],\"reason\":\"\",\"boot_time\":1795762158},"
    "{\"name\":\"elastic-h100-2\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"partitions\":[\"gpu\"],\"reason\":\"\",\"boot_time\":0}]}";

/* A wrong, expired or other cluster's token, on a GET. */
static const char BAD_TOKEN[] =
    "{\"errors\":[{\"description\":\"slurmctld config is unable to load\","
    "\"error_number\":-1,\"error\":\"Unspecified error\","
    "\"source\":\"slurm_load_ctl_conf\"}]}";

/* The same refusal on POST, or slurmctld hanging up mid-request. */
static const char ZERO_BYTES[] =
    "{\"errors\":[{\"error_code\":5005,\"error\":\"Zero Bytes were "
    "transmitted or received\"}]}";

/* "gpus":"h100:16" on an 8-GPU node. */
static const char NODE_CONFIG[] =
    "{\"errors\":[{\"error_code\":2014,\"error\":\"Requested node "
    "configuration is not available\"}]}";

/* POST without environment. */
static const char NO_ENV[] =
    "{\"errors\":[{\"error\":\"environment must be set\","
    "\"error_code\":2127},{\"error_code\":9001,\"error\":"
    "\"Failure during parsing\"}]}";

/* DELETE job/101 once slurmctld purged it. */
static const char KILL_UNKNOWN[] =
    "{\"errors\":[{\"description\":\"unable to kill JobId=101 with signal "
    "9: Invalid job id specified\",\"error_number\":2017,\"error\":"
    "\"Invalid job id specified\",\"source\":\"slurm_kill_job\"}]}";

/* GET jobs while slurmctld is down (error 1001, its documented words;
 * the testbed's slurmctld was not stopped for this): no listing. */
static const char CTLD_DOWN[] =
    "{\"errors\":[{\"description\":\"slurm_load_jobs failed\","
    "\"error_number\":1001,\"error\":\"Unable to contact slurm "
    "controller (connect failure)\",\"source\":\"slurm_load_jobs\"}]}";

static const char CANCELLED_OK[] = "{\"meta\":{},\"errors\":[]}";

/* GET /slurmdb/v0.0.38/job/101: the history slurmdbd keeps. */
static const char DB_COMPLETED[] =
    "{\"errors\":[],\"jobs\":[{\"job_id\":101,\"cluster\":\"onprem\","
    "\"account\":\"broker\",\"user\":\"brokertest\",\"name\":\"train\","
    "\"nodes\":\"onprem-gpu1\",\"comment\":{\"administrator\":\"\","
    "\"job\":\"tenbin:abc123:5\",\"system\":\"\"},"
    "\"state\":{\"current\":\"COMPLETED\",\"reason\":\"None\"},"
    "\"exit_code\":{\"status\":\"SUCCESS\",\"return_code\":0},"
    "\"time\":{\"start\":1795269715,\"end\":1795269717,\"elapsed\":2},"
    "\"tres\":{\"allocated\":[{\"type\":\"cpu\",\"count\":1},"
    "{\"type\":\"gres\",\"name\":\"gpu\",\"id\":1001,\"count\":2}],"
    "\"requested\":[]}}]}";

/* slurmdbd answers 200 with "Nothing found" for a job it never had. */
static const char DB_NOTHING[] =
    "{\"jobs\":[],\"errors\":[{\"error_number\":9003,\"error\":"
    "\"Nothing found\"}]}";

/* POST job/submit. */
static void
submitted(char *out, size_t n, int64_t slurm_id)
{
  snprintf(out, n,
           "{\"meta\":{\"plugin\":{\"type\":\"openapi/v0.0.38\","
           "\"name\":\"Slurm OpenAPI v0.0.38\"},\"Slurm\":{\"version\":"
           "{\"major\":22,\"micro\":8,\"minor\":5},\"release\":"
           "\"22.05.8\"}},\"errors\":[],\"job_id\":%" PRId64 ","
           "\"step_id\":\"BATCH\",\"job_submit_user_msg\":\"\"}",
           slurm_id);
}

/* One job of ours as GET jobs lists it (the trimmed shape of
 * test_slurm_schema.c's JOBS_ONPREM). */
struct lj {
  int64_t slurm_id;
  int64_t tenbin_id;
  const char *state;
  const char *reason;
  int64_t exit_raw;
};

/*
 * Make GET jobs list v[0..n-1], plus a job of another broker that
 * carries the same tenbin id 5 as ours under its own instance: it must
 * never be taken for ours.
 */
static void
set_listing(struct fx *fx, size_t n, const struct lj *v)
{
  size_t len;

  len = (size_t)snprintf(fx->listing, sizeof(fx->listing),
                         "{\"meta\":{\"plugin\":{\"type\":"
                         "\"openapi/v0.0.38\"}},\"errors\":[],\"jobs\":["
                         "{\"job_id\":83,\"job_state\":\"PENDING\","
                         "\"state_reason\":\"Priority\","
                         "\"comment\":\"tenbin:def456:5\",\"name\":\"ex3\","
                         "\"nodes\":\"\",\"gres_detail\":[],"
                         "\"tres_per_job\":\"gres:gpu:1\","
                         "\"tres_per_node\":\"\",\"node_count\":1,"
                         "\"exit_code\":0,\"start_time\":0,\"end_time\":0,"
                         "\"standard_output\":\"/tmp/cap-%%x-%%j.out\","
                         "\"array_job_id\":0,\"array_task_id\":null,"
                         "\"user_name\":\"brokertest\"}");
  for (size_t i = 0; i < n; i++) {
    int ran = strcmp(v[i].state, "PENDING") != 0;

    len += (size_t)snprintf(
        fx->listing + len, sizeof(fx->listing) - len,
        ",{\"job_id\":%" PRId64 ",\"job_state\":\"%s\","
        "\"state_reason\":\"%s\",\"comment\":\"tenbin:" INSTANCE
        ":%" PRId64 "\",\"name\":\"train\",\"nodes\":\"%s\","
        "\"gres_detail\":[%s],\"tres_per_job\":\"gres:gpu:h100:2\","
        "\"tres_per_node\":\"\",\"node_count\":1,\"exit_code\":%" PRId64
        ",\"start_time\":%s,\"end_time\":%s,"
        "\"standard_output\":\"/tmp/tenbin-%%j.out\",\"array_job_id\":0,"
        "\"array_task_id\":null,\"user_name\":\"brokertest\","
        "\"partition\":\"gpu\",\"cluster\":\"onprem\"}",
        v[i].slurm_id, v[i].state, v[i].reason, v[i].tenbin_id,
        ran ? "onprem-gpu1" : "", ran ? "\"gpu:h100:2(IDX:0-1)\"" : "",
        v[i].exit_raw, ran ? "1795281107" : "0",
        ran && strcmp(v[i].state, "RUNNING") != 0 ? "1795281117" : "0");
    assert_true(len < sizeof(fx->listing));
  }
  len += (size_t)snprintf(fx->listing + len, sizeof(fx->listing) - len,
                          "]}");
  assert_true(len < sizeof(fx->listing));
  fx->jobs.status = 200;
  fx->jobs.body = fx->listing;
  fx->jobs.len = 0;
}

/* ---- the fake slurmrestd ---- */

static void
copy(char *dst, size_t n, const char *src)
{
  snprintf(dst, n, "%s", src != NULL ? src : "");
}

static void
answer(struct http_request *req, const struct canned *c)
{
  size_t len = c->body == NULL ? 0 : c->len > 0 ? c->len : strlen(c->body);
  char *out = xmalloc(len + 1);

  if (len > 0)
    memcpy(out, c->body, len);
  out[len] = '\0';
  http_respond(req, c->status, "application/json", out, len);
}

static void
on_request(struct http_request *req, void *arg)
{
  struct fx *fx = arg;
  const char *method = http_request_method(req);
  const char *path = http_request_path(req);
  const char *token = http_request_header(req, "X-SLURM-USER-TOKEN");
  int post = strcmp(method, "POST") == 0;
  size_t len;
  const char *body;

  copy(fx->last_token, sizeof(fx->last_token), token);
  copy(fx->user, sizeof(fx->user),
       http_request_header(req, "X-SLURM-USER-NAME"));
  if (token == NULL) {
    /* slurmrestd's own answer without the headers. */
    struct canned c = {401, "Authentication failure", 0};

    answer(req, &c);
    return;
  }
  if (fx->good_token != NULL && strcmp(token, fx->good_token) != 0) {
    /* slurmctld validates the token; slurmrestd says 500. */
    struct canned c = {500, post ? ZERO_BYTES : BAD_TOKEN, 0};

    fx->n_refused++;
    answer(req, &c);
    return;
  }
  if (strcmp(method, "GET") == 0 &&
      strcmp(path, "/slurm/v0.0.38/jobs") == 0) {
    fx->n_jobs++;
    if (fx->hold_jobs) {
      fx->hold_jobs = 0;
      fx->held_jobs = req;
      return;
    }
    answer(req, &fx->jobs);
  } else if (strcmp(method, "GET") == 0 &&
             strcmp(path, "/slurm/v0.0.38/nodes") == 0) {
    fx->n_nodes++;
    answer(req, &fx->nodes);
  } else if (post && strcmp(path, "/slurm/v0.0.38/job/submit") == 0) {
    fx->n_submit++;
    body = http_request_body(req, &len);
    free(fx->submit_body);
    fx->submit_body = xstrndup(body, len);
    if (fx->hold_submit) {
      fx->hold_submit = 0;
      fx->held_submit = req;
      return;
    }
    answer(req, &fx->submit);
  } else if (strcmp(method, "DELETE") == 0 &&
             strncmp(path, "/slurm/v0.0.38/job/", 19) == 0) {
    fx->n_del++;
    copy(fx->del_path, sizeof(fx->del_path), path);
    answer(req, &fx->del);
  } else if (strcmp(method, "GET") == 0 &&
             strncmp(path, "/slurmdb/v0.0.38/job/", 21) == 0) {
    fx->n_db++;
    copy(fx->db_path, sizeof(fx->db_path), path);
    answer(req, &fx->db);
  } else {
    struct canned c = {404, "{\"errors\":[{\"error\":\"Unable to find "
                            "endpoint\"}]}", 0};

    answer(req, &c);
  }
}

/* Answer a held request now. */
static void
release(struct http_request **held, int status, const char *body)
{
  struct canned c = {status, body, 0};

  assert_non_null(*held);
  answer(*held, &c);
  *held = NULL;
}

/* ---- what the adapter tells the broker ---- */

static void
on_update(void *arg, const struct adapter_update *batch, size_t n)
{
  struct fx *fx = arg;

  for (size_t i = 0; i < n; i++) {
    struct upd *u;

    assert_true(fx->nu < MAX_UPDATES);
    u = &fx->u[fx->nu++];
    u->job_id = batch[i].job_id;
    u->state = batch[i].state;
    copy(u->remote, sizeof(u->remote), batch[i].remote_id);
    copy(u->alloc, sizeof(u->alloc), batch[i].alloc);
    copy(u->reason, sizeof(u->reason), batch[i].reason);
    u->exit_code = batch[i].exit_code;
  }
}

/* Updates of job id into state so far. */
static int
count(const struct fx *fx, int64_t id, enum job_state state)
{
  int n = 0;

  for (size_t i = 0; i < fx->nu; i++)
    n += fx->u[i].job_id == id && fx->u[i].state == state;
  return n;
}

/* The latest update of job id into state (it must exist). */
static const struct upd *
find(const struct fx *fx, int64_t id, enum job_state state)
{
  for (size_t i = fx->nu; i > 0; i--) {
    if (fx->u[i - 1].job_id == id && fx->u[i - 1].state == state)
      return &fx->u[i - 1];
  }
  fail_msg("no update of job %" PRId64 " into %s", id,
           job_state_name(state));
  return NULL;
}

static struct adapter_capacity
capacity(struct fx *fx)
{
  struct adapter_capacity c;

  memset(&c, 0, sizeof(c));
  adapter_slurm_ops.capacity(fx->site, &c);
  return c;
}

/* ---- fixture ---- */

static void
on_pause(uv_timer_t *t)
{
  ((struct fx *)t->data)->paused = 0;
}

/* Turn the loop for ms (only to let a client-side timeout pass). */
static void
run_for(struct fx *fx, uint64_t ms)
{
  fx->paused = 1;
  uv_timer_start(&fx->pause, on_pause, ms, 0);
  RUN_UNTIL(fx, !fx->paused);
}

/* Turn the loop until n more listings have been asked for: the answer
 * to every listing asked before the last of them has been applied (one
 * listing at a time). */
static void
run_listings(struct fx *fx, int n)
{
  int want = fx->n_jobs + n;

  RUN_UNTIL(fx, fx->n_jobs >= want);
}

static void
write_file(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(close(fd), 0);
}

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  uv_timer_init(&fx->loop, &fx->pause);
  fx->pause.data = fx;
  fx->srv = loop_peer_server(&fx->loop, on_request, fx, 32, "/", fx->url,
                             sizeof(fx->url));
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/tenbin-test-slurm-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  snprintf(fx->token_file, sizeof(fx->token_file), "%s/token", fx->dir);
  snprintf(fx->count_file, sizeof(fx->count_file), "%s/minted", fx->dir);
  write_file(fx->token_file, GOOD_TOKEN "\n");
  fx->good_token = GOOD_TOKEN;
  set_listing(fx, 0, NULL);
  fx->nodes = (struct canned){200, NODES_ONPREM, 0};
  fx->submit = (struct canned){500, "{\"errors\":[{\"error\":\"no canned "
                                    "answer\"}]}", 0};
  fx->db = (struct canned){200, DB_NOTHING, 0};
  fx->del = (struct canned){200, CANCELLED_OK, 0};
  *state = fx;
  return 0;
}

/* Open the site with the test's settings over the defaults (url, user,
 * token_file, poll_ms 100, timeout_ms TIMEOUT_MS). */
static void
open_site(struct fx *fx, const char *overrides)
{
  struct adapter_env env = {
      .loop = &fx->loop,
      .site_name = "onprem",
      .state_dir = fx->dir,
      .instance = INSTANCE,
      .update = on_update,
      .update_arg = fx,
  };
  json_t *config = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:{s:s}}",
                             "url", fx->url, "user", "brokertest",
                             "token_file", fx->token_file, "poll_ms", 100,
                             "timeout_ms", TIMEOUT_MS, "workdir", "/tmp",
                             "partitions", "h100", "gpu");
  struct err e = {0};

  assert_non_null(config);
  if (overrides != NULL) {
    json_t *o = json_loads(overrides, 0, NULL);

    assert_non_null(o);
    json_object_update(config, o);
    json_decref(o);
    /* null removes a default */
    if (json_is_null(json_object_get(config, "token_file")))
      json_object_del(config, "token_file");
  }
  if (adapter_slurm_ops.open(&env, config, &fx->site, &e) < 0)
    fail_msg("open: %s", e.msg);
  json_decref(config);
}

/* Open the site with overrides that it must refuse; e says why. */
static int
open_refused(struct fx *fx, const char *overrides, struct err *e)
{
  struct adapter_env env = {
      .loop = &fx->loop,
      .site_name = "elastic",
      .state_dir = fx->dir,
      .instance = INSTANCE,
      .update = on_update,
      .update_arg = fx,
  };
  json_t *config = json_pack("{s:s, s:s, s:s}", "url", fx->url, "user",
                             "brokertest", "token_file", fx->token_file);
  json_t *o = json_loads(overrides, 0, NULL);
  int rc;

  assert_non_null(config);
  assert_non_null(o);
  json_object_update(config, o);
  json_decref(o);
  memset(e, 0, sizeof(*e));
  rc = adapter_slurm_ops.open(&env, config, &fx->site, e);
  json_decref(config);
  assert_null(fx->site);
  return rc;
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed++;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;
  int want = fx->closed + 1;

  if (fx->site != NULL) {
    adapter_slurm_ops.close(fx->site, on_closed, fx);
    want++;
  }
  /* Held requests are answered 503 by the closing server. */
  http_server_close(fx->srv, on_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_close((uv_handle_t *)&fx->pause, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(fx->closed, want);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  unlink(fx->token_file);
  unlink(fx->count_file);
  rmdir(fx->dir);
  free(fx->submit_body);
  free(fx);
  return 0;
}

/* Hand job id (2 h100 GPUs, project "default") to the site. */
static int
submit(struct fx *fx, int64_t id, struct err *e)
{
  struct job_spec sp;
  struct adapter_job aj;
  int rc;

  jobspec_init(&sp);
  sp.name = xstrdup("train");
  sp.project = xstrdup("default");
  strv_push(&sp.argv, "/bin/true");
  sp.gpus = 2;
  sp.gpu_type = xstrdup("h100");
  sp.nodes = 1;
  memset(&aj, 0, sizeof(aj));
  aj.id = id;
  aj.spec = &sp;
  rc = adapter_slurm_ops.submit(fx->site, &aj, e);
  jobspec_release(&sp);
  return rc;
}

static void
submit_ok(struct fx *fx, int64_t id)
{
  struct err e = {0};

  if (submit(fx, id, &e) != 0)
    fail_msg("submit: %s", e.msg);
}

static void
cancel(struct fx *fx, int64_t id)
{
  struct adapter_job aj;
  struct err e = {0};

  memset(&aj, 0, sizeof(aj));
  aj.id = id;
  assert_int_equal(adapter_slurm_ops.cancel(fx->site, &aj, &e), 0);
}

/* Job 5 submitted as Slurm job 101 and seen running. */
static void
job_running(struct fx *fx)
{
  char ok[512];
  const struct lj running = {101, 5, "RUNNING", "None", 0};

  submitted(ok, sizeof(ok), 101);
  fx->submit = (struct canned){200, ok, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  fx->submit = (struct canned){500, NULL, 0};
  set_listing(fx, 1, &running);
  RUN_UNTIL(fx, count(fx, 5, JOB_RUNNING) == 1);
}

/* ---- exactly once ---- */

static void
test_submit_posts_the_tagged_job_and_follows_it_to_its_end(void **state)
{
  struct fx *fx = *state;
  char ok[512];
  const struct lj done = {101, 5, "COMPLETED", "None", 0};
  json_t *body;
  json_t *job;
  struct adapter_capacity c;

  open_site(fx, NULL);
  run_listings(fx, 1);
  submitted(ok, sizeof(ok), 101);
  fx->submit = (struct canned){200, ok, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  assert_int_equal(fx->n_submit, 1);
  assert_string_equal(fx->user, "brokertest");
  assert_string_equal(fx->last_token, GOOD_TOKEN);
  body = json_loads(fx->submit_body, 0, NULL);
  assert_non_null(body);
  job = json_object_get(body, "job");
  assert_string_equal(json_string_value(json_object_get(job, "comment")),
                      "tenbin:" INSTANCE ":5");
  assert_string_equal(json_string_value(json_object_get(job, "partition")),
                      "gpu");
  json_decref(body);
  assert_string_equal(find(fx, 5, JOB_SUBMITTED)->remote, "101");
  assert_string_equal(find(fx, 5, JOB_SUBMITTED)->reason, "Slurm job 101");
  c = capacity(fx);
  assert_int_equal(c.jobs_active, 1);

  /* Ran and ended between two listings: its start is told first. */
  set_listing(fx, 1, &done);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUCCEEDED) == 1);
  assert_int_equal(count(fx, 5, JOB_RUNNING), 1);
  assert_string_equal(find(fx, 5, JOB_RUNNING)->alloc, "onprem-gpu1:0-1");
  assert_int_equal(find(fx, 5, JOB_SUCCEEDED)->exit_code, 0);
  c = capacity(fx);
  assert_int_equal(c.jobs_active, 0);
  assert_true(c.reachable);
  assert_string_equal(c.detail, "");
  /* Another broker's job 5 never became ours. */
  assert_int_equal(count(fx, 5, JOB_QUEUED), 0);
  assert_int_equal(fx->n_submit, 1);
}

static void
test_listing_in_flight_at_submit_does_not_declare_the_job_missing(
    void **state)
{
  struct fx *fx = *state;
  char ok[512];
  const struct lj pending = {101, 5, "PENDING", "Priority", 0};
  size_t before;

  open_site(fx, NULL);
  run_listings(fx, 1);
  /* A listing is sent, then the job is submitted and Slurm takes it. */
  fx->hold_jobs = 1;
  run_listings(fx, 1);
  RUN_UNTIL(fx, fx->held_jobs != NULL);
  submitted(ok, sizeof(ok), 101);
  fx->submit = (struct canned){200, ok, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  /* The listing answers as Slurm was before the submit: without it. */
  before = fx->nu;
  release(&fx->held_jobs, 200, fx->listing);
  set_listing(fx, 1, &pending);
  run_listings(fx, 2);
  assert_int_equal(count(fx, 5, JOB_LOST), 0);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 0);
  assert_int_equal(capacity(fx).jobs_active, 1);
  assert_true(fx->nu > before);
  assert_int_equal(fx->u[fx->nu - 1].state, JOB_SUBMITTED);
  /* A listing sent after the submit, without it, does judge it. */
  set_listing(fx, 0, NULL);
  RUN_UNTIL(fx, count(fx, 5, JOB_LOST) == 1);
  assert_contains(find(fx, 5, JOB_LOST)->reason, "purged");
  assert_int_equal(fx->n_submit, 1);
}

static void
test_uncertain_submit_is_judged_only_by_a_listing_sent_after_it(
    void **state)
{
  struct fx *fx = *state;

  open_site(fx, NULL);
  run_listings(fx, 1);
  /* A listing in flight; the submit's answer is a proxy's 502. */
  fx->hold_jobs = 1;
  run_listings(fx, 1);
  RUN_UNTIL(fx, fx->held_jobs != NULL);
  fx->hold_submit = 1;
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->held_submit != NULL);
  release(&fx->held_submit, 502, "<html><b>Bad Gateway</b></html>");
  /* The adapter has the 502 well within 100 ms on loopback; the old
   * listing, without the job, then comes in and must not decide. */
  run_for(fx, 100);
  fx->hold_jobs = 1;
  release(&fx->held_jobs, 200, fx->listing);
  /* The next listing is sent once the old one is applied. */
  RUN_UNTIL(fx, fx->held_jobs != NULL);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 0);
  assert_int_equal(capacity(fx).jobs_active, 1);
  /* That one does judge: Slurm never had it, the broker places it
   * again, once. */
  release(&fx->held_jobs, 200, fx->listing);
  RUN_UNTIL(fx, count(fx, 5, JOB_QUEUED) == 1);
  assert_contains(find(fx, 5, JOB_QUEUED)->reason, "placing it again");
  run_listings(fx, 2);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 1);
  assert_int_equal(fx->nu, 1);
  assert_int_equal(fx->n_submit, 1);
}

static void
test_listing_sent_while_a_submit_awaits_its_answer_does_not_judge_it(
    void **state)
{
  struct fx *fx = *state;

  open_site(fx, NULL);
  run_listings(fx, 1);
  /* The POST is in, its answer not yet out; a listing is sent, and
   * slurmctld may take it before the job. */
  fx->hold_submit = 1;
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->held_submit != NULL);
  fx->hold_jobs = 1;
  RUN_UNTIL(fx, fx->held_jobs != NULL);
  release(&fx->held_submit, 503, "");
  run_for(fx, 100);
  /* That listing, without the job, answers after the 503: no verdict. */
  fx->hold_jobs = 1;
  release(&fx->held_jobs, 200, fx->listing);
  RUN_UNTIL(fx, fx->held_jobs != NULL);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 0);
  assert_int_equal(capacity(fx).jobs_active, 1);
  /* The first listing sent after the 503 decides. */
  release(&fx->held_jobs, 200, fx->listing);
  RUN_UNTIL(fx, count(fx, 5, JOB_QUEUED) == 1);
  assert_int_equal(fx->n_submit, 1);
}

static void
test_answer_lost_after_commit_is_adopted_by_tag_not_resubmitted(
    void **state)
{
  struct fx *fx = *state;
  char ok[512];
  const struct lj pending = {101, 5, "PENDING", "Priority", 0};

  open_site(fx, NULL);
  run_listings(fx, 1);
  /* No listing can judge anything while the answer is awaited. */
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  fx->hold_submit = 1;
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->held_submit != NULL);
  /* Slurm took the job, but its answer comes after the client gave up
   * (timeout_ms): it reaches no one. */
  run_for(fx, TIMEOUT_MS + 300);
  submitted(ok, sizeof(ok), 101);
  release(&fx->held_submit, 200, ok);
  assert_int_equal(fx->nu, 0);
  assert_int_equal(capacity(fx).jobs_active, 1);
  /* The next listing finds the tag: adopted, with Slurm's id. */
  set_listing(fx, 1, &pending);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  assert_string_equal(find(fx, 5, JOB_SUBMITTED)->remote, "101");
  assert_contains(find(fx, 5, JOB_SUBMITTED)->reason, "PENDING");
  run_listings(fx, 2);
  assert_int_equal(fx->n_submit, 1);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 0);
  assert_int_equal(count(fx, 5, JOB_LOST), 0);
}

static void
test_lost_answer_and_job_absent_is_given_back_once_then_resubmitted(
    void **state)
{
  struct fx *fx = *state;
  char ok[512];

  open_site(fx, NULL);
  run_listings(fx, 1);
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  fx->hold_submit = 1;
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->held_submit != NULL);
  run_for(fx, TIMEOUT_MS + 300);
  release(&fx->held_submit, 504, "");
  assert_int_equal(fx->nu, 0);
  set_listing(fx, 0, NULL);
  /* Slurm never had it: given back to the scheduler, exactly once. */
  RUN_UNTIL(fx, count(fx, 5, JOB_QUEUED) == 1);
  assert_contains(find(fx, 5, JOB_QUEUED)->reason,
                  "submission was cut off");
  run_listings(fx, 2);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 1);
  assert_int_equal(capacity(fx).jobs_active, 0);
  assert_int_equal(fx->n_submit, 1);
  /* The broker places it again: one more POST, and it is followed. */
  submitted(ok, sizeof(ok), 102);
  fx->submit = (struct canned){200, ok, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  assert_string_equal(find(fx, 5, JOB_SUBMITTED)->remote, "102");
  assert_int_equal(fx->n_submit, 2);
}

static void
test_late_commit_of_a_given_back_submit_is_cancelled_as_a_duplicate(
    void **state)
{
  struct fx *fx = *state;
  char ok[512];
  const struct lj both[2] = {
      {101, 5, "PENDING", "Priority", 0},
      {102, 5, "PENDING", "Priority", 0},
  };
  const struct lj gone[2] = {
      {101, 5, "CANCELLED", "None", 15},
      {102, 5, "RUNNING", "None", 0},
  };

  open_site(fx, NULL);
  run_listings(fx, 1);
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  fx->hold_submit = 1;
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->held_submit != NULL);
  run_for(fx, TIMEOUT_MS + 300);
  set_listing(fx, 0, NULL);
  RUN_UNTIL(fx, count(fx, 5, JOB_QUEUED) == 1);
  submitted(ok, sizeof(ok), 102);
  fx->submit = (struct canned){200, ok, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  /* slurmctld takes the first POST only now (its answer reaches no
   * one): the job is there twice, under one tag. */
  release(&fx->held_submit, 200, ok);
  set_listing(fx, 2, both);
  run_listings(fx, 3);
  /* The one not followed is cancelled, once; the job stays 102. */
  assert_int_equal(fx->n_del, 1);
  assert_string_equal(fx->del_path, "/slurm/v0.0.38/job/101");
  set_listing(fx, 2, gone);
  RUN_UNTIL(fx, count(fx, 5, JOB_RUNNING) == 1);
  run_listings(fx, 2);
  assert_int_equal(fx->n_del, 1);
  for (size_t i = 0; i < fx->nu; i++)
    assert_string_not_equal(fx->u[i].remote, "101");
  assert_string_equal(find(fx, 5, JOB_RUNNING)->remote, "102");
  assert_int_equal(count(fx, 5, JOB_CANCELLED), 0);
  assert_int_equal(fx->n_submit, 2);
}

static void
test_adopt_without_remote_id_finds_the_tag_or_places_the_job_again(
    void **state)
{
  struct fx *fx = *state;
  struct job_spec sp;
  struct adapter_job aj;
  struct err e = {0};
  const struct lj running = {101, 5, "RUNNING", "None", 0};

  /* After a restart, before the first listing is sent. */
  set_listing(fx, 1, &running);
  open_site(fx, NULL);
  jobspec_init(&sp);
  sp.name = xstrdup("train");
  sp.project = xstrdup("default");
  strv_push(&sp.argv, "/bin/true");
  sp.nodes = 1;
  memset(&aj, 0, sizeof(aj));
  aj.spec = &sp;
  aj.id = 5;
  assert_int_equal(adapter_slurm_ops.adopt(fx->site, &aj, &e), 0);
  aj.id = 6;
  assert_int_equal(adapter_slurm_ops.adopt(fx->site, &aj, &e), 0);
  aj.id = 7;
  aj.remote_id = "12x";
  assert_int_equal(adapter_slurm_ops.adopt(fx->site, &aj, &e), ERR_INVALID);
  assert_contains(e.msg, "'12x'");
  jobspec_release(&sp);
  RUN_UNTIL(fx, count(fx, 5, JOB_RUNNING) == 1 &&
                    count(fx, 6, JOB_QUEUED) == 1);
  assert_string_equal(find(fx, 5, JOB_RUNNING)->remote, "101");
  assert_contains(find(fx, 6, JOB_QUEUED)->reason, "never submitted");
  assert_int_equal(fx->n_submit, 0);
}

/* ---- slurmrestd's error numbers ---- */

static void
test_submit_answered_5005_is_uncertain_and_found_by_its_tag(void **state)
{
  struct fx *fx = *state;
  const struct lj pending = {101, 5, "PENDING", "Priority", 0};

  open_site(fx, NULL);
  run_listings(fx, 1);
  /* slurmctld hung up mid-request, maybe after taking the job. */
  fx->submit = (struct canned){500, ZERO_BYTES, 0};
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->n_submit == 1);
  run_for(fx, 100);
  assert_int_equal(fx->nu, 0);
  set_listing(fx, 1, &pending);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  assert_string_equal(find(fx, 5, JOB_SUBMITTED)->remote, "101");
  assert_int_equal(count(fx, 5, JOB_FAILED), 0);
  assert_int_equal(fx->n_submit, 1);
  /* Or it did not take it: placed again, never failed. */
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  submit_ok(fx, 6);
  RUN_UNTIL(fx, fx->n_submit == 2);
  run_for(fx, 100);
  set_listing(fx, 1, &pending);
  RUN_UNTIL(fx, count(fx, 6, JOB_QUEUED) == 1);
  assert_int_equal(count(fx, 6, JOB_FAILED), 0);
  assert_int_equal(fx->n_submit, 2);
}

static void
test_submit_refused_by_slurm_fails_the_job_with_slurms_words(void **state)
{
  struct fx *fx = *state;

  open_site(fx, NULL);
  run_listings(fx, 1);
  fx->submit = (struct canned){500, NODE_CONFIG, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_FAILED) == 1);
  assert_string_equal(find(fx, 5, JOB_FAILED)->reason,
                      "Slurm refused the job: slurmrestd 500: Requested "
                      "node configuration is not available [error 2014]");
  fx->submit = (struct canned){400, NO_ENV, 0};
  submit_ok(fx, 6);
  RUN_UNTIL(fx, count(fx, 6, JOB_FAILED) == 1);
  assert_string_equal(find(fx, 6, JOB_FAILED)->reason,
                      "Slurm refused the job: slurmrestd 400: environment "
                      "must be set [error 2127]; Failure during parsing "
                      "[error 9001]");
  assert_int_equal(capacity(fx).jobs_active, 0);
  /* A refused job is done: no listing revisits it. */
  run_listings(fx, 2);
  assert_int_equal(fx->nu, 2);
  assert_int_equal(fx->n_submit, 2);
}

/* ---- purged jobs ---- */

static void
test_job_purged_without_slurmdbd_is_lost_saying_how_it_was_last_seen(
    void **state)
{
  struct fx *fx = *state;

  open_site(fx, NULL);
  job_running(fx);
  set_listing(fx, 0, NULL);
  RUN_UNTIL(fx, count(fx, 5, JOB_LOST) == 1);
  assert_string_equal(find(fx, 5, JOB_LOST)->reason,
                      "Slurm job 101 was purged before its end was seen "
                      "(last seen RUNNING); the site has no slurmdbd to "
                      "ask");
  assert_int_equal(fx->n_db, 0);
  assert_int_equal(capacity(fx).jobs_active, 0);
}

static void
test_job_purged_with_slurmdbd_is_settled_from_its_history(void **state)
{
  struct fx *fx = *state;

  open_site(fx, "{\"slurmdbd\":true}");
  job_running(fx);
  /* First slurmdbd answers garbage: asked again after the next listing. */
  fx->db = (struct canned){200, "{\"jobs\":", 0};
  set_listing(fx, 0, NULL);
  RUN_UNTIL(fx, fx->n_db == 1);
  fx->db = (struct canned){200, DB_COMPLETED, 0};
  RUN_UNTIL(fx, count(fx, 5, JOB_SUCCEEDED) == 1);
  assert_int_equal(fx->n_db, 2);
  assert_string_equal(fx->db_path, "/slurmdb/v0.0.38/job/101");
  assert_int_equal(find(fx, 5, JOB_SUCCEEDED)->exit_code, 0);
  assert_int_equal(count(fx, 5, JOB_LOST), 0);
  run_listings(fx, 2);
  assert_int_equal(fx->n_db, 2);
}

static void
test_job_purged_and_unknown_to_slurmdbd_is_lost(void **state)
{
  struct fx *fx = *state;

  open_site(fx, "{\"slurmdbd\":true}");
  job_running(fx);
  fx->db = (struct canned){200, DB_NOTHING, 0};
  set_listing(fx, 0, NULL);
  RUN_UNTIL(fx, count(fx, 5, JOB_LOST) == 1);
  assert_contains(find(fx, 5, JOB_LOST)->reason,
                  "slurmdbd does not know it either");
  assert_int_equal(fx->n_db, 1);
}

static void
test_cancel_of_a_job_slurm_no_longer_knows_ends_it_cancelled(void **state)
{
  struct fx *fx = *state;

  open_site(fx, NULL);
  job_running(fx);
  fx->del = (struct canned){500, KILL_UNKNOWN, 0};
  cancel(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_CANCELLED) == 1);
  assert_string_equal(fx->del_path, "/slurm/v0.0.38/job/101");
  assert_contains(find(fx, 5, JOB_CANCELLED)->reason, "is gone");
  assert_int_equal(capacity(fx).jobs_active, 0);
}

static void
test_cancel_while_the_submit_is_unconfirmed_cancels_it_once_found(
    void **state)
{
  struct fx *fx = *state;
  const struct lj pending = {101, 5, "PENDING", "Priority", 0};
  const struct lj cancelled = {101, 5, "CANCELLED", "None", 0};

  open_site(fx, NULL);
  run_listings(fx, 1);
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  fx->submit = (struct canned){500, ZERO_BYTES, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->n_submit == 1);
  /* No Slurm id to cancel yet: nothing is sent. */
  cancel(fx, 5);
  run_for(fx, 100);
  assert_int_equal(fx->n_del, 0);
  assert_int_equal(fx->nu, 0);
  /* Found by its tag: cancelled there, and reported when Slurm says. */
  set_listing(fx, 1, &pending);
  RUN_UNTIL(fx, fx->n_del == 1);
  assert_string_equal(fx->del_path, "/slurm/v0.0.38/job/101");
  set_listing(fx, 1, &cancelled);
  RUN_UNTIL(fx, count(fx, 5, JOB_CANCELLED) == 1);
  assert_string_equal(find(fx, 5, JOB_CANCELLED)->remote, "101");
  assert_int_equal(fx->n_del, 1);
  assert_int_equal(fx->n_submit, 1);
}

static void
test_cancel_that_fails_is_sent_again_while_the_job_is_listed(void **state)
{
  struct fx *fx = *state;
  const struct lj cancelled = {101, 5, "CANCELLED", "None", 15};

  open_site(fx, NULL);
  job_running(fx);
  fx->del = (struct canned){500, CTLD_DOWN, 0};
  cancel(fx, 5);
  RUN_UNTIL(fx, fx->n_del == 2);
  assert_int_equal(count(fx, 5, JOB_CANCELLED), 0);
  fx->del = (struct canned){200, CANCELLED_OK, 0};
  set_listing(fx, 1, &cancelled);
  RUN_UNTIL(fx, count(fx, 5, JOB_CANCELLED) == 1);
  assert_string_equal(find(fx, 5, JOB_CANCELLED)->reason, "CANCELLED");
  assert_int_equal(capacity(fx).jobs_active, 0);
}

static void
test_close_with_requests_in_flight_reports_nothing_more(void **state)
{
  struct fx *fx = *state;
  const struct lj running = {101, 5, "RUNNING", "None", 0};
  size_t before;

  open_site(fx, NULL);
  job_running(fx);
  fx->hold_jobs = 1;
  RUN_UNTIL(fx, fx->held_jobs != NULL);
  fx->hold_submit = 1;
  submit_ok(fx, 6);
  RUN_UNTIL(fx, fx->held_submit != NULL);
  before = fx->nu;
  adapter_slurm_ops.close(fx->site, on_closed, fx);
  fx->site = NULL;
  RUN_UNTIL(fx, fx->closed == 1);
  /* Answers that come now reach no one. */
  set_listing(fx, 1, &running);
  release(&fx->held_jobs, 200, fx->listing);
  release(&fx->held_submit, 200, "{\"errors\":[],\"job_id\":102}");
  run_for(fx, 100);
  assert_int_equal(fx->nu, before);
}

/* ---- the token ---- */

static void
test_refused_token_is_minted_again_and_the_site_recovers(void **state)
{
  struct fx *fx = *state;
  char cfg[512];
  struct adapter_capacity c;
  char *minted = NULL;
  size_t n = 0;
  FILE *f;

  /* Each run mints the next token: tok1, tok2, ... */
  snprintf(cfg, sizeof(cfg),
           "{\"token_file\":null,\"token_command\":\"printf x >> %s; "
           "echo tok$(($(wc -c < %s)))\"}",
           fx->count_file, fx->count_file);
  fx->good_token = "tok2";
  open_site(fx, cfg);
  /* No token yet: nothing is sent, and the broker keeps the job. */
  {
    struct err e = {0};

    assert_int_equal(submit(fx, 5, &e), ERR_UNAVAILABLE);
    assert_contains(e.msg, "token_command has not answered yet");
    assert_int_equal(capacity(fx).jobs_active, 0);
  }
  /* Refused: unreachable, with slurmrestd's words. */
  RUN_UNTIL(fx, strstr(capacity(fx).detail, "unable to load") != NULL);
  assert_false(capacity(fx).reachable);
  assert_true(fx->n_refused > 0);
  RUN_UNTIL(fx, capacity(fx).reachable);
  c = capacity(fx);
  assert_string_equal(c.detail, "");
  assert_false(c.unknown);
  assert_int_equal(c.pools[0].total, 8);
  assert_string_equal(fx->last_token, "tok2");
  /* The command ran once at open and once after the refusal, not once
   * per refused request. */
  run_listings(fx, 2);
  f = fopen(fx->count_file, "r");
  assert_non_null(f);
  assert_int_equal(getline(&minted, &n, f), 2);
  fclose(f);
  free(minted);
  assert_int_equal(fx->n_submit, 0);
  assert_int_equal(fx->nu, 0);
}

static void
test_refused_token_makes_the_site_unreachable_with_the_reason(
    void **state)
{
  struct fx *fx = *state;
  struct adapter_capacity c;

  /* An expired token in the file. */
  write_file(fx->token_file, "tok-old\n");
  open_site(fx, NULL);
  RUN_UNTIL(fx, fx->n_refused >= 2);
  RUN_UNTIL(fx, strstr(capacity(fx).detail, "unable to load") != NULL);
  c = capacity(fx);
  assert_false(c.reachable);
  assert_contains(c.detail, "slurmctld config is unable to load");
  assert_string_equal(fx->last_token, "tok-old");
  /* Whatever keeps the file fresh writes a new token: it is read and
   * the site comes back. */
  write_file(fx->token_file, GOOD_TOKEN "\n");
  RUN_UNTIL(fx, capacity(fx).reachable);
  assert_string_equal(capacity(fx).detail, "");
  assert_string_equal(fx->last_token, GOOD_TOKEN);
}

static void
test_token_file_gone_makes_the_site_unreachable_naming_it(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};

  open_site(fx, NULL);
  RUN_UNTIL(fx, capacity(fx).reachable);
  assert_int_equal(unlink(fx->token_file), 0);
  RUN_UNTIL(fx, !capacity(fx).reachable);
  assert_contains(capacity(fx).detail, fx->token_file);
  /* Nothing can be sent: a submit leaves the job with the broker. */
  assert_int_equal(submit(fx, 5, &e), ERR_UNAVAILABLE);
  assert_contains(e.msg, fx->token_file);
  write_file(fx->token_file, GOOD_TOKEN "\n");
  RUN_UNTIL(fx, capacity(fx).reachable);
  assert_int_equal(fx->n_submit, 0);
}

/* ---- malformed answers ---- */

/* Make GET jobs answer body; return the site's capacity once a listing
 * asked after the change has been applied. */
static struct adapter_capacity
listing_answers(struct fx *fx, int status, const char *body, size_t len)
{
  fx->jobs = (struct canned){status, body, len};
  run_listings(fx, 2);
  return capacity(fx);
}

static void
test_malformed_listings_mark_the_site_unreachable_and_judge_no_job(
    void **state)
{
  struct fx *fx = *state;
  struct adapter_capacity c;
  const struct lj running = {101, 5, "RUNNING", "None", 0};
  size_t before;

  open_site(fx, NULL);
  job_running(fx);
  before = fx->nu;

  c = listing_answers(fx, 200, "{\"jobs\":[{\"job_id\":101,", 0);
  assert_false(c.reachable);
  assert_contains(c.detail, "listing jobs: slurmrestd sent malformed JSON");

  c = listing_answers(fx, 200, "{\"errors\":[],\"jobs\":[{\"job_id\":"
                               "\"101\",\"job_state\":\"RUNNING\"}]}", 0);
  assert_false(c.reachable);
  assert_contains(c.detail, "jobs[0].job_id");

  c = listing_answers(fx, 200, "{\"errors\":[],\"jobs\":{}}", 0);
  assert_false(c.reachable);
  assert_contains(c.detail, "'jobs'");

  c = listing_answers(fx, 200, "[1,2,3]", 0);
  assert_false(c.reachable);
  assert_contains(c.detail, "listing jobs");

  c = listing_answers(fx, 200, "", 0);
  assert_false(c.reachable);
  assert_contains(c.detail, "malformed JSON");

  /* Retried by the client first (a read), then reported. */
  fx->jobs = (struct canned){502, "<html>bad gateway</html>", 0};
  RUN_UNTIL(fx, strstr(capacity(fx).detail, "slurmrestd 502") != NULL);
  assert_false(capacity(fx).reachable);

  /* Wrong types inside a job of ours read as unknown: no crash, and
   * the job is still there. */
  c = listing_answers(fx, 200, "{\"errors\":[],\"jobs\":[{\"job_id\":101,"
                               "\"comment\":\"tenbin:" INSTANCE ":5\","
                               "\"job_state\":7,\"state_reason\":[],"
                               "\"nodes\":{},\"gres_detail\":\"x\","
                               "\"exit_code\":\"none\",\"start_time\":"
                               "\"soon\",\"end_time\":null}]}", 0);
  assert_int_equal(count(fx, 5, JOB_LOST), 0);
  assert_int_equal(count(fx, 5, JOB_QUEUED), 0);

  /* Back to a good listing: reachable, the job never judged missing. */
  set_listing(fx, 1, &running);
  run_listings(fx, 2);
  c = capacity(fx);
  assert_true(c.reachable);
  assert_string_equal(c.detail, "");
  assert_int_equal(c.jobs_active, 1);
  for (size_t i = before; i < fx->nu; i++) {
    assert_false(job_state_is_final(fx->u[i].state));
    assert_int_not_equal(fx->u[i].state, JOB_QUEUED);
  }
}

/* A listing past the adapter's cap for listings (256 MiB): refused by
 * its length, never parsed, and no job is judged by it. */
static void
test_listing_past_its_cap_marks_the_site_unreachable(void **state)
{
  struct fx *fx = *state;
  size_t big = (256u << 20) + 1;
  char *huge = xmalloc(big);
  struct adapter_capacity c;

  memset(huge, ' ', big);
  huge[0] = '{';
  open_site(fx, NULL);
  job_running(fx);
  fx->jobs = (struct canned){200, huge, big};
  RUN_UNTIL(fx, strstr(capacity(fx).detail, "exceeds") != NULL);
  c = capacity(fx);
  assert_false(c.reachable);
  assert_contains(c.detail, "listing jobs: http client: GET");
  assert_contains(c.detail, "response exceeds 268435456 bytes");
  assert_int_equal(c.jobs_active, 1);
  assert_int_equal(count(fx, 5, JOB_LOST), 0);
  set_listing(fx, 0, NULL);
  free(huge);
}

/* slurmrestd's words in another script (a user's path, a hostname),
 * long enough that "listing jobs: ..." is cut at the detail's size. */
static void
test_site_detail_cut_to_its_size_stays_valid_utf8(void **state)
{
  struct fx *fx = *state;
  char body[2][1024];
  char words[256];
  size_t n = 0;

  /* 100 x U+00E9, two bytes each: of two cuts one byte apart, one falls
   * inside a character. */
  for (int i = 0; i < 100; i++)
    n += (size_t)snprintf(words + n, sizeof(words) - n, "\xc3\xa9");
  for (int k = 0; k < 2; k++)
    snprintf(body[k], sizeof(body[k]),
             "{\"errors\":[{\"description\":\"%s%s\",\"error_number\":"
             "1001,\"error\":\"Unable to contact slurm controller "
             "(connect failure)\",\"source\":\"slurm_load_jobs\"}]}",
             k == 0 ? "" : "x", words);
  open_site(fx, NULL);
  run_listings(fx, 1);
  for (int k = 0; k < 2; k++) {
    struct adapter_capacity c;

    fx->jobs = (struct canned){500, body[k], 0};
    run_listings(fx, 2);
    c = capacity(fx);
    assert_false(c.reachable);
    assert_contains(c.detail, "listing jobs: slurmrestd 500: Unable to "
                              "contact slurm controller");
    assert_true(strlen(c.detail) >= sizeof(c.detail) - 4);
    if (!utf8_valid(c.detail, strlen(c.detail)))
      fail_msg("detail is not UTF-8 (cut %d): %s", k, c.detail);
  }
}

/* A state reason past what the outcome keeps of it (120 bytes), cut
 * inside a character: the broker still gets whole ones. */
static void
test_reasons_cut_inside_a_character_reach_the_broker_as_utf8(
    void **state)
{
  struct fx *fx = *state;
  char ok[512];
  char why[256];
  size_t n = 0;
  struct lj pending = {101, 5, "PENDING", NULL, 0};

  n += (size_t)snprintf(why, sizeof(why), "x");
  for (int i = 0; i < 100; i++)
    n += (size_t)snprintf(why + n, sizeof(why) - n, "\xc3\xa9");
  pending.reason = why;
  open_site(fx, NULL);
  submitted(ok, sizeof(ok), 101);
  fx->submit = (struct canned){200, ok, 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1);
  set_listing(fx, 1, &pending);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 2);
  /* Told once, not again at every listing. */
  run_listings(fx, 2);
  assert_int_equal(count(fx, 5, JOB_SUBMITTED), 2);
  /* And the job purged with that as the last word. */
  set_listing(fx, 0, NULL);
  RUN_UNTIL(fx, count(fx, 5, JOB_LOST) == 1);
  for (size_t i = 0; i < fx->nu; i++) {
    if (!utf8_valid(fx->u[i].reason, strlen(fx->u[i].reason)))
      fail_msg("update %zu: reason is not UTF-8: %s", i, fx->u[i].reason);
  }
  assert_contains(find(fx, 5, JOB_SUBMITTED)->reason, "PENDING (x\xc3\xa9");
}

static void
test_huge_or_malformed_nodes_answer_marks_the_site_unreachable(
    void **state)
{
  struct fx *fx = *state;
  size_t big = (5u << 20);
  char *huge = xmalloc(big);
  struct adapter_capacity c;

  /* A body past the 4 MiB cap of every answer but listings. */
  memcpy(huge, "{\"nodes\":[", 10);
  memset(huge + 10, ' ', big - 10);
  open_site(fx, NULL);
  run_listings(fx, 1);
  fx->nodes = (struct canned){200, huge, big};
  run_listings(fx, 2);
  RUN_UNTIL(fx, !capacity(fx).reachable);
  c = capacity(fx);
  assert_contains(c.detail, "listing nodes");
  assert_contains(c.detail, "exceeds");

  fx->nodes = (struct canned){200, "{\"errors\":[],\"nodes\":7}", 0};
  run_listings(fx, 2);
  RUN_UNTIL(fx, strstr(capacity(fx).detail, "exceeds") == NULL);
  c = capacity(fx);
  assert_false(c.reachable);
  assert_contains(c.detail, "listing nodes");

  fx->nodes = (struct canned){200, NODES_ONPREM, 0};
  RUN_UNTIL(fx, capacity(fx).reachable);
  free(huge);
}

static void
test_malformed_submit_answers_are_uncertain_never_a_second_submit(
    void **state)
{
  struct fx *fx = *state;
  size_t big = (5u << 20);
  char *huge = xmalloc(big);
  const struct lj pending[3] = {
      {101, 5, "PENDING", "Priority", 0},
      {102, 6, "PENDING", "Priority", 0},
      {103, 7, "PENDING", "Priority", 0},
  };

  memset(huge, ' ', big);
  open_site(fx, NULL);
  run_listings(fx, 1);
  fx->jobs = (struct canned){500, CTLD_DOWN, 0};
  /* Slurm took each one; what came back cannot be read. */
  fx->submit = (struct canned){200, "{\"errors\":[],\"job_id\":", 0};
  submit_ok(fx, 5);
  RUN_UNTIL(fx, fx->n_submit == 1);
  fx->submit = (struct canned){200, "{\"errors\":[],\"job_id\":\"102\"}", 0};
  submit_ok(fx, 6);
  RUN_UNTIL(fx, fx->n_submit == 2);
  fx->submit = (struct canned){200, huge, big};
  submit_ok(fx, 7);
  RUN_UNTIL(fx, fx->n_submit == 3);
  run_for(fx, 200);
  assert_int_equal(fx->nu, 0);
  assert_int_equal(count(fx, 5, JOB_FAILED) + count(fx, 6, JOB_FAILED) +
                       count(fx, 7, JOB_FAILED),
                   0);
  set_listing(fx, 3, pending);
  RUN_UNTIL(fx, count(fx, 5, JOB_SUBMITTED) == 1 &&
                    count(fx, 6, JOB_SUBMITTED) == 1 &&
                    count(fx, 7, JOB_SUBMITTED) == 1);
  assert_string_equal(find(fx, 7, JOB_SUBMITTED)->remote, "103");
  assert_int_equal(fx->n_submit, 3);
  free(huge);
}

/* ---- elastic capacity (Slurm power saving) ---- */

static void
test_powered_down_nodes_are_growth_at_the_default_boot_delay(void **state)
{
  struct fx *fx = *state;
  struct adapter_capacity c;

  fx->nodes = (struct canned){200, NODES_ELASTIC_DOWN, 0};
  open_site(fx, NULL);
  RUN_UNTIL(fx, capacity(fx).reachable);
  c = capacity(fx);
  /* Both nodes can run a job: Slurm powers them up for it. */
  assert_int_equal(c.nodes, 2);
  assert_int_equal(c.nodes_down, 0);
  assert_int_equal(c.npools, 1);
  assert_int_equal(c.pools[0].total, 16);
  assert_int_equal(c.pools[0].grow, 16);
  assert_int_equal(c.pools[0].in_use, 0);
  assert_int_equal(c.pools[0].down, 0);
  assert_int_equal(c.grows_on_submit, 1);
  /* No boot delay configured: ParallelCluster's median. */
  assert_int_equal(c.grow_ms, 300000);

  /* After a job, the first node is up and idle: its 8 are free. */
  fx->nodes = (struct canned){200, NODES_ELASTIC_ONE_UP, 0};
  RUN_UNTIL(fx, capacity(fx).pools[0].grow == 8);
  c = capacity(fx);
  assert_int_equal(c.pools[0].total - c.pools[0].in_use - c.pools[0].down -
                       c.pools[0].grow,
                   8);
  assert_int_equal(c.grows_on_submit, 1);
}

static void
test_elastic_boot_delay_comes_from_the_site_config(void **state)
{
  struct fx *fx = *state;

  fx->nodes = (struct canned){200, NODES_ELASTIC_DOWN, 0};
  open_site(fx, "{\"elastic\": {\"boot_s\": 42}}");
  RUN_UNTIL(fx, capacity(fx).reachable);
  assert_int_equal(capacity(fx).grow_ms, 42000);
  assert_int_equal(capacity(fx).pools[0].grow, 16);
}

static void
test_site_without_power_saving_neither_grows_nor_waits_for_boots(
    void **state)
{
  struct fx *fx = *state;
  struct adapter_capacity c;

  open_site(fx, NULL);
  RUN_UNTIL(fx, capacity(fx).reachable);
  c = capacity(fx);
  assert_int_equal(c.pools[0].grow, 0);
  assert_int_equal(c.grows_on_submit, 0);
  assert_int_equal(c.grow_ms, 0);
}

static void
test_elastic_settings_are_refused_naming_the_field(void **state)
{
  struct fx *fx = *state;
  static const struct {
    const char *config;
    const char *says;
  } bad[] = {
      {"{\"elastic\": {\"boot_s\": -1}}", "'elastic.boot_s' must be between"},
      {"{\"elastic\": {\"boot_s\": 86401}}",
       "'elastic.boot_s' must be between 0 and 86400"},
      {"{\"elastic\": {\"boot_s\": \"300\"}}", "'elastic.boot_s' must be"},
      {"{\"elastic\": {\"boot_s\": 2.5}}", "'elastic.boot_s' must be"},
      {"{\"elastic\": {\"boot\": 300}}", "unknown field 'elastic.boot'"},
      {"{\"elastic\": 300}", "field 'elastic' must be"},
      {"{\"elastic\": [300]}", "field 'elastic' must be"},
  };
  struct err e;

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_true(open_refused(fx, bad[i].config, &e) < 0);
    assert_contains(e.msg, bad[i].says);
  }
  /* Absent, null, empty, 0: all accepted. */
  open_site(fx, "{\"elastic\": {\"boot_s\": 0}}");
  adapter_slurm_ops.close(fx->site, on_closed, fx);
  fx->site = NULL;
  open_site(fx, "{\"elastic\": null}");
  adapter_slurm_ops.close(fx->site, on_closed, fx);
  fx->site = NULL;
  open_site(fx, "{\"elastic\": {}}");
  RUN_UNTIL(fx, fx->closed == 2);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_submit_posts_the_tagged_job_and_follows_it_to_its_end, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_listing_in_flight_at_submit_does_not_declare_the_job_missing,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_uncertain_submit_is_judged_only_by_a_listing_sent_after_it,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_listing_sent_while_a_submit_awaits_its_answer_does_not_judge_it,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_answer_lost_after_commit_is_adopted_by_tag_not_resubmitted,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_lost_answer_and_job_absent_is_given_back_once_then_resubmitted,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_late_commit_of_a_given_back_submit_is_cancelled_as_a_duplicate,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_adopt_without_remote_id_finds_the_tag_or_places_the_job_again,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_submit_answered_5005_is_uncertain_and_found_by_its_tag, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_submit_refused_by_slurm_fails_the_job_with_slurms_words,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_job_purged_without_slurmdbd_is_lost_saying_how_it_was_last_seen,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_job_purged_with_slurmdbd_is_settled_from_its_history, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_job_purged_and_unknown_to_slurmdbd_is_lost, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_cancel_of_a_job_slurm_no_longer_knows_ends_it_cancelled,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_cancel_while_the_submit_is_unconfirmed_cancels_it_once_found,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_cancel_that_fails_is_sent_again_while_the_job_is_listed,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_close_with_requests_in_flight_reports_nothing_more, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_refused_token_is_minted_again_and_the_site_recovers, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_refused_token_makes_the_site_unreachable_with_the_reason,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_token_file_gone_makes_the_site_unreachable_naming_it, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_malformed_listings_mark_the_site_unreachable_and_judge_no_job,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_listing_past_its_cap_marks_the_site_unreachable, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_site_detail_cut_to_its_size_stays_valid_utf8, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_reasons_cut_inside_a_character_reach_the_broker_as_utf8,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_huge_or_malformed_nodes_answer_marks_the_site_unreachable,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_malformed_submit_answers_are_uncertain_never_a_second_submit,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_powered_down_nodes_are_growth_at_the_default_boot_delay,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_elastic_boot_delay_comes_from_the_site_config, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_site_without_power_saving_neither_grows_nor_waits_for_boots,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_elastic_settings_are_refused_naming_the_field, setup,
          teardown),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
