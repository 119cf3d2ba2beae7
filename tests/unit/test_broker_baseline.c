/*
 * Tests of tenbind's NCCL-baseline driver (broker/baseline.c): probes
 * stored and submitted as jobs, the probe's own calls (report, NCCL id),
 * drift judged from the fixtures, jobs that require the baseline kept
 * from a drifted site, and what survives a restart or a crash.
 *
 * Each test runs a real broker on its own uv loop with a real SQLite
 * file and sites of a fake plain kind, "fakesite", put in front of the
 * broker through broker_config.adapters.  The fake records every job it
 * is handed (its env and script) and says at once that it runs; the
 * test ends it when it wants.  The probe peer is the test itself: it
 * takes the URL and token from the recorded job's env and reports a
 * fixture of tests/data/probe as that probe's node.  The same fake
 * stands in for kind "slurm", the one kind that runs multi-node probes.
 *
 * broker_close() commits the submissions still pending, so a close is
 * not a crash: the crash test forks a child that opens a broker, starts
 * a probe and _exit()s before its loop ever turns.
 *
 * The sites are listed with the drifting one first: first-fit would
 * put a job there, so a job that goes elsewhere went because of the
 * baseline.  The time guard only turns a hang into a failure.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adapters/update_queue.h"
#include "broker/broker.h"
#include "broker/broker_internal.h"
#include "db/db.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"

/* A guard against a hang, never a timing assertion. */
#define GUARD_NS (30ull * 1000 * 1000 * 1000)
#define FAKE_MAX_SITES 4
#define FAKE_MAX_JOBS 16
#define FIXTURES TENBIN_SOURCE_DIR "/tests/data/probe/"

/* ---- the fake plain kind ---- */

struct fake_job {
  int64_t id;
  char *name, *project, *script;
  char **env;               /* "KEY=VALUE", NULL-terminated */
  int64_t nodes, gpus, gpus_per_node;
  int adopted;              /* came by adopt(), after a restart */
  int ended;
};

struct fake {
  char site[64];
  struct adapter_queue q;
  int64_t gpus_per_node, nodes;
  struct fake_job jobs[FAKE_MAX_JOBS];
  size_t njobs;
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* The open fake sites: the broker opens them, the test drives them. */
static struct fake *fakes[FAKE_MAX_SITES];

static char *
dup_or_null(const char *s)
{
  return s != NULL ? xstrdup(s) : NULL;
}

static int
fake_open(const struct adapter_env *env, const json_t *config, void **ctx,
          struct err *e)
{
  static const struct jsonx_field fields[] = {{"name", JX_STRING},
                                              {"kind", JX_STRING},
                                              {"gpus_per_node", JX_INT},
                                              {"nodes", JX_INT},
                                              {NULL, 0}};
  struct fake *k;
  size_t slot = 0;

  while (slot < FAKE_MAX_SITES && fakes[slot] != NULL)
    slot++;
  if (slot == FAKE_MAX_SITES)
    return err_set(e, ERR_CONFIG, "the test holds %d fake sites",
                   FAKE_MAX_SITES);
  k = xcalloc(1, sizeof(*k));
  if (jsonx_check(config, fields, "", e) < 0 ||
      jsonx_int(config, "gpus_per_node", 1, 64, 8, &k->gpus_per_node, "",
                e) < 0 ||
      jsonx_int(config, "nodes", 1, 64, 2, &k->nodes, "", e) < 0) {
    free(k);
    e->code = ERR_CONFIG;
    return ERR_CONFIG;
  }
  snprintf(k->site, sizeof(k->site), "%s", env->site_name);
  adapter_queue_init(&k->q, env->loop, env->update, env->update_arg);
  k->q.timer.data = k;
  fakes[slot] = k;
  *ctx = k;
  return 0;
}

static void
fake_push(struct fake *k, int64_t job_id, enum job_state st,
          const char *reason)
{
  char remote[32];
  struct adapter_update u = {.job_id = job_id,
                             .state = st,
                             .remote_id = remote,
                             .reason = reason,
                             .exit_code = -1};

  snprintf(remote, sizeof(remote), "fake-%" PRId64, job_id);
  if (st == JOB_SUCCEEDED)
    u.exit_code = 0;
  else if (st == JOB_FAILED)
    u.exit_code = 1;
  adapter_queue_push(&k->q, &u);
}

/* A copy of job, as the site would keep it. */
static int
fake_record(struct fake *k, const struct adapter_job *job, int adopted,
            struct err *e)
{
  const struct job_spec *spec = job->spec;
  struct fake_job *j;
  size_t n = 0;

  if (k->njobs == FAKE_MAX_JOBS)
    return err_set(e, ERR_UNAVAILABLE, "the fake holds %d jobs",
                   FAKE_MAX_JOBS);
  j = &k->jobs[k->njobs++];
  memset(j, 0, sizeof(*j));
  j->id = job->id;
  j->adopted = adopted;
  j->name = dup_or_null(spec->name);
  j->project = dup_or_null(spec->project);
  j->script = dup_or_null(spec->script);
  while (spec->env != NULL && spec->env[n] != NULL)
    n++;
  j->env = xcalloc(n + 1, sizeof(*j->env));
  for (size_t i = 0; i < n; i++)
    j->env[i] = xstrdup(spec->env[i]);
  j->nodes = spec->nodes;
  j->gpus = spec->gpus;
  j->gpus_per_node = spec->gpus_per_node;
  return 0;
}

static int
fake_submit(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct fake *k = ctx;
  int rc = fake_record(k, job, 0, e);

  if (rc < 0)
    return rc;
  fake_push(k, job->id, JOB_SUBMITTED, "queued at the fake");
  fake_push(k, job->id, JOB_RUNNING, NULL);
  return 0;
}

static struct fake_job *
fake_job(struct fake *k, int64_t id)
{
  for (size_t i = 0; i < k->njobs; i++)
    if (k->jobs[i].id == id)
      return &k->jobs[i];
  return NULL;
}

static int
fake_cancel(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct fake *k = ctx;
  struct fake_job *j = fake_job(k, job->id);

  (void)e;
  if (j != NULL)
    j->ended = 1;
  fake_push(k, job->id, JOB_CANCELLED, "cancelled");
  return 0;
}

/* A job placed before a restart still runs: the fake takes it back. */
static int
fake_adopt(void *ctx, const struct adapter_job *job, struct err *e)
{
  struct fake *k = ctx;
  int rc = fake_record(k, job, 1, e);

  if (rc < 0)
    return rc;
  fake_push(k, job->id, JOB_RUNNING, NULL);
  return 0;
}

/* One pool of h100s, nodes of gpus_per_node each. */
static void
fake_capacity(void *ctx, struct adapter_capacity *out)
{
  struct fake *k = ctx;
  struct adapter_gpu_pool *g = &out->pools[0];

  memset(out, 0, sizeof(*out));
  out->reachable = 1;
  out->nodes = k->nodes;
  out->npools = 1;
  snprintf(g->type, sizeof(g->type), "h100");
  g->per_node = k->gpus_per_node;
  g->total = k->gpus_per_node * k->nodes;
  for (size_t i = 0; i < k->njobs; i++) {
    if (!k->jobs[i].ended) {
      g->in_use += k->jobs[i].gpus;
      out->jobs_active++;
    }
  }
}

static void
fake_closed(uv_handle_t *h)
{
  struct fake *k = h->data;

  if (k->close_cb != NULL)
    k->close_cb(k->close_arg);
  for (size_t i = 0; i < FAKE_MAX_SITES; i++)
    if (fakes[i] == k)
      fakes[i] = NULL;
  for (size_t i = 0; i < k->njobs; i++) {
    struct fake_job *j = &k->jobs[i];

    for (size_t n = 0; j->env[n] != NULL; n++)
      free(j->env[n]);
    free(j->env);
    free(j->name);
    free(j->project);
    free(j->script);
  }
  free(k);
}

static void
fake_close(void *ctx, void (*cb)(void *arg), void *arg)
{
  struct fake *k = ctx;

  k->close_cb = cb;
  k->close_arg = arg;
  adapter_queue_close(&k->q, fake_closed);
}

static const struct adapter_ops fake_ops = {
    .kind = "fakesite",
    .api_version = ADAPTER_API_VERSION,
    .open = fake_open,
    .submit = fake_submit,
    .cancel = fake_cancel,
    .adopt = fake_adopt,
    .capacity = fake_capacity,
    .close = fake_close,
};

/* The same fake as kind "slurm": the one kind that runs multi-node
 * probes (srun). */
static const struct adapter_ops fake_slurm_ops = {
    .kind = "slurm",
    .api_version = ADAPTER_API_VERSION,
    .open = fake_open,
    .submit = fake_submit,
    .cancel = fake_cancel,
    .adopt = fake_adopt,
    .capacity = fake_capacity,
    .close = fake_close,
};

static const struct adapter_ops *const kinds[] = {&fake_ops, &fake_slurm_ops,
                                                  NULL};

/* The open fake of site. */
static struct fake *
fake_at(const char *site)
{
  for (size_t i = 0; i < FAKE_MAX_SITES; i++)
    if (fakes[i] != NULL && strcmp(fakes[i]->site, site) == 0)
      return fakes[i];
  fail_msg("no fake site '%s' is open", site);
  return NULL;
}

/* The value of key in j's env, or NULL. */
static const char *
env_of(const struct fake_job *j, const char *key)
{
  size_t n = strlen(key);

  for (size_t i = 0; j->env[i] != NULL; i++)
    if (strncmp(j->env[i], key, n) == 0 && j->env[i][n] == '=')
      return j->env[i] + n + 1;
  return NULL;
}

/* Job id at site ends in state (JOB_SUCCEEDED, JOB_FAILED). */
static void
fake_end(const char *site, int64_t id, enum job_state state,
         const char *reason)
{
  struct fake *k = fake_at(site);
  struct fake_job *j = fake_job(k, id);

  assert_non_null(j);
  j->ended = 1;
  fake_push(k, id, state, reason);
}

/* ---- fixture ---- */

/* The drifting site first, the reference second, one never probed. */
#define SITES                                                                \
  "[{\"name\": \"cloud\", \"kind\": \"fakesite\", \"gpus_per_node\": 8},"   \
  " {\"name\": \"ref\", \"kind\": \"fakesite\", \"gpus_per_node\": 8},"     \
  " {\"name\": \"edge\", \"kind\": \"fakesite\", \"gpus_per_node\": 4}]"
#define CLOUD 0
#define REF 1
#define EDGE 2
#define NSITES 3
#define BASELINE                                                             \
  "{\"reference\": \"ref\", \"every_s\": 0, \"sites\": [],"                 \
  " \"server\": \"http://127.0.0.1:1\"}"

struct fx {
  uv_loop_t loop;
  uv_timer_t wake;  /* wakes the loop to re-check */
  char dir[64];
  char db_path[128];
  char self[PATH_MAX];
  struct broker *b;
  int closed;
  int turn;         /* uv_run() calls so far (broker_fx.h) */
};

#include "broker_fx.h"

/* A broker on loop over f's state with sites_text and baseline_text
 * (NULL: no block). */
static int
open_broker_on(uv_loop_t *loop, struct fx *f, const char *sites_text,
               const char *baseline_text, struct broker **out, struct err *e)
{
  json_t *sites = parse(sites_text);
  json_t *baseline = baseline_text != NULL ? parse(baseline_text) : NULL;
  struct broker_config cfg = {
      .state_dir = f->dir,
      .db_path = f->db_path,
      .self_exe = f->self,
      .sites = sites,
      .tick_ms = 50,
      .stage_poll_ms = 20,
      .baseline = baseline,
      .adapters = kinds,
  };
  int rc = broker_new(loop, &cfg, out, e);

  json_decref(sites);
  json_decref(baseline);
  return rc;
}

static int
open_broker(struct fx *f, const char *baseline_text, struct err *e)
{
  assert_null(f->b);
  return open_broker_on(&f->loop, f, SITES, baseline_text, &f->b, e);
}

static void
start_with(struct fx *f, const char *sites_text, const char *baseline_text)
{
  struct err e = {0};

  assert_null(f->b);
  if (open_broker_on(&f->loop, f, sites_text, baseline_text, &f->b, &e) < 0)
    fail_msg("broker_new: %s", e.msg);
}

static void
start(struct fx *f, const char *baseline_text)
{
  start_with(f, SITES, baseline_text);
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));

  fx_open(f, "/tmp/tenbin-blunit-XXXXXX");
  *state = f;
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  close_broker(f);
  for (size_t i = 0; i < FAKE_MAX_SITES; i++)
    assert_null(fakes[i]);
  fx_close(f);
  free(f);
  return 0;
}

/* ---- running the loop ---- */

static int
time_passed(struct fx *f, const void *arg)
{
  (void)f;
  return uv_hrtime() >= *(const uint64_t *)arg;
}

/* Let the loop run ms (several scheduler passes at tick_ms 50). */
static void
settle(struct fx *f, int ms)
{
  uint64_t until = uv_hrtime() + (uint64_t)ms * 1000 * 1000;

  assert_true(run_until(f, time_passed, &until));
}

struct want_jobs {
  const char *site;
  size_t n;
};

static int
site_has_jobs(struct fx *f, const void *arg)
{
  const struct want_jobs *w = arg;

  (void)f;
  return fake_at(w->site)->njobs >= w->n;
}

/* Run the loop until the fake at site was handed n jobs. */
static void
wait_jobs(struct fx *f, const char *site, size_t n)
{
  struct want_jobs w = {site, n};

  if (!run_until(f, site_has_jobs, &w))
    fail_msg("site '%s' was handed %zu jobs, never %zu", site,
             fake_at(site)->njobs, n);
}

/* ---- probes ---- */

struct probe {
  int64_t id;
  int64_t job;          /* its job at the site */
  char token[128];      /* from the job's env */
  char url[256];
};

/* The fake job at site that runs probe id, or NULL. */
static struct fake_job *
probe_job(const char *site, int64_t id)
{
  struct fake *k = fake_at(site);
  char tail[64];

  snprintf(tail, sizeof(tail), "/v1/probes/%" PRId64, id);
  for (size_t i = 0; i < k->njobs; i++) {
    const char *url = env_of(&k->jobs[i], "TENBIN_PROBE_URL");
    size_t n = url != NULL ? strlen(url) : 0;

    if (n >= strlen(tail) && strcmp(url + n - strlen(tail), tail) == 0)
      return &k->jobs[i];
  }
  return NULL;
}

/* Site's newest probe, as the view shows it (new), or NULL. */
static json_t *
view_of(struct fx *f, const char *site)
{
  struct err e = {0};
  json_t *v = NULL;

  if (broker_baseline_view(f->b, site, NULL, &v, &e) < 0)
    fail_msg("view of '%s': %s", site, e.msg);
  return v;
}

static const char *
latest_state(const json_t *view)
{
  return jsonx_str(json_object_get(view, "latest_probe"), "state");
}

struct probe_at {
  const char *site;
  int64_t id;
};

static int
probe_running(struct fx *f, const void *arg)
{
  const struct probe_at *p = arg;
  json_t *v = view_of(f, p->site);
  const json_t *latest = json_object_get(v, "latest_probe");
  int ok = json_integer_value(json_object_get(latest, "id")) == p->id &&
           json_is_integer(json_object_get(latest, "job_id")) &&
           probe_job(p->site, p->id) != NULL;

  json_decref(v);
  return ok;
}

/* Probe id of site is running at the fake: its job into p. */
static void
await_probe(struct fx *f, const char *site, int64_t id, struct probe *p)
{
  struct probe_at at = {site, id};
  const struct fake_job *j;

  if (!run_until(f, probe_running, &at))
    fail_msg("probe %" PRId64 " of '%s' never ran", id, site);
  j = probe_job(site, id);
  memset(p, 0, sizeof(*p));
  p->id = id;
  p->job = j->id;
  snprintf(p->token, sizeof(p->token), "%s",
           env_of(j, "TENBIN_PROBE_TOKEN") != NULL
               ? env_of(j, "TENBIN_PROBE_TOKEN") : "");
  snprintf(p->url, sizeof(p->url), "%s", env_of(j, "TENBIN_PROBE_URL"));
}

/* broker_baseline_run's answer's probe id. */
static int64_t
run_probe(struct fx *f, const char *site, int64_t nodes)
{
  struct err e = {0};
  json_t *out = NULL;
  int64_t id;

  if (broker_baseline_run(f->b, site, nodes, &out, &e) < 0)
    fail_msg("baseline run at '%s': %s", site, e.msg);
  id = json_integer_value(json_object_get(json_object_get(out, "probe"),
                                          "id"));
  assert_true(id > 0);
  json_decref(out);
  return id;
}

/* Start a one-node probe of site and let its job run there. */
static void
start_probe(struct fx *f, const char *site, struct probe *p)
{
  await_probe(f, site, run_probe(f, site, 1), p);
}

/* Fixture name as node rank of nodes (new text). */
static char *
fixture_as(const char *name, int rank, int nodes)
{
  char path[PATH_MAX];
  json_error_t jerr;
  json_t *doc;
  char *text;

  snprintf(path, sizeof(path), "%s%s", FIXTURES, name);
  doc = json_load_file(path, 0, &jerr);
  if (doc == NULL)
    fail_msg("fixture %s: %s", path, jerr.text);
  json_object_set_new(doc, "node_rank", json_integer(rank));
  json_object_set_new(doc, "nodes", json_integer(nodes));
  text = jsonx_dump(doc);
  json_decref(doc);
  return text;
}

/* Report fixture name as node rank of nodes of probe p, with token. */
static int
report_as(struct fx *f, const struct probe *p, const char *token,
          const char *name, int rank, int nodes, struct err *e)
{
  char *text = fixture_as(name, rank, nodes);
  int rc = broker_probe_report(f->b, token, p->id, text, strlen(text), e);

  free(text);
  return rc;
}

/* Report fixture name as the one node of probe p. */
static void
report_ok(struct fx *f, const struct probe *p, const char *name)
{
  struct err e = {0};

  if (report_as(f, p, p->token, name, 0, 1, &e) < 0)
    fail_msg("report of %s to probe %" PRId64 ": %s", name, p->id, e.msg);
}

/* A whole probe of site: run, report fixture name, its job ends. */
static int64_t
probe_site(struct fx *f, const char *site, const char *name)
{
  struct probe p;

  start_probe(f, site, &p);
  report_ok(f, &p, name);
  fake_end(site, p.job, JOB_SUCCEEDED, "exit code 0");
  wait_state(f, p.job, JOB_SUCCEEDED);
  return p.id;
}

static int
count_report(int64_t rank, const char *doc, int64_t at_ms, void *arg)
{
  (void)rank;
  (void)doc;
  (void)at_ms;
  (*(int *)arg)++;
  return 0;
}

/* Reports stored for probe id. */
static int
reports_of(struct fx *f, int64_t id)
{
  struct err e = {0};
  int n = 0;

  assert_int_equal(db_probe_reports(broker_db(f->b), id, count_report, &n,
                                    &e),
                   0);
  return n;
}

static int
count_probe(const struct db_probe *p, void *arg)
{
  (void)p;
  (*(int *)arg)++;
  return 0;
}

/* Probes stored for site. */
static int
probes_of(struct fx *f, const char *site)
{
  struct err e = {0};
  int n = 0;

  assert_int_equal(db_probe_list(broker_db(f->b), site, NULL, 100,
                                 count_probe, &n, &e),
                   0);
  return n;
}

struct named {
  char name[64];
  int n;
};

static int
count_named(const struct job_view *j, void *arg)
{
  struct named *w = arg;

  w->n += j->name != NULL && strcmp(j->name, w->name) == 0;
  return 0;
}

/* Jobs the broker stored as probe id's ("baseline-probe-ID"). */
static int
probe_jobs(struct fx *f, int64_t id)
{
  struct job_filter flt = {.limit = 1000};
  struct named w = {{0}, 0};
  struct err e = {0};

  snprintf(w.name, sizeof(w.name), "baseline-probe-%" PRId64, id);
  assert_int_equal(broker_job_list(f->b, &admin, &flt, count_named, &w, &e),
                   0);
  return w.n;
}

static const char *
bars(struct fx *f, size_t site)
{
  return broker__baseline_bars(f->b, site);
}

/* Whether view's findings have one of rule. */
static int
has_finding(const json_t *view, const char *rule)
{
  const json_t *v;
  size_t i;

  json_array_foreach(json_object_get(view, "findings"), i, v) {
    if (strcmp(jsonx_str(v, "rule"), rule) == 0)
      return 1;
  }
  return 0;
}

/* The /metrics text (new). */
static char *
metrics(struct fx *f)
{
  struct buf out;
  char *text;

  buf_init(&out, 1 << 20);
  assert_int_equal(broker_baseline_metrics(f->b, &out), 0);
  text = xstrdup(buf_str(&out));
  buf_release(&out);
  return text;
}

/* Site's status, findings by rule and bars, after ref got ref-h100 and
 * site got fixture name. */
static void
assert_drift(struct fx *f, const char *site, size_t idx, const char *name,
             const char *rule)
{
  json_t *v;
  char line[160];
  char *m;

  probe_site(f, "ref", "ref-h100.json");
  probe_site(f, site, name);
  v = view_of(f, site);
  assert_string_equal(jsonx_str(v, "status"), "drifted");
  if (!has_finding(v, rule))
    fail_msg("no %s finding in %s", rule,
             jsonx_dump(json_object_get(v, "findings")));
  json_decref(v);
  assert_non_null(bars(f, idx));
  assert_non_null(strstr(bars(f, idx), rule));
  assert_null(bars(f, REF));
  m = metrics(f);
  snprintf(line, sizeof(line),
           "tenbin_baseline_drift{site=\"%s\",rule=\"%s\"} 1\n", site, rule);
  assert_non_null(strstr(m, line));
  free(m);
}

/* ---- jobs ---- */

static int
placed_once(struct fx *f, const void *arg)
{
  struct placement_view p = {0};
  struct err e = {0};
  int found = broker_job_placement(f->b, &admin, *(const int64_t *)arg, &p,
                                   &e) == 0;

  placement_view_release(&p);
  return found;
}

static char *
site_of(struct fx *f, int64_t id)
{
  struct job_view j;
  struct err e = {0};
  char *site;

  job_view_init(&j);
  assert_int_equal(broker_job_get(f->b, &admin, id, &j, &e), 0);
  site = dup_or_null(j.site);
  job_view_release(&j);
  return site;
}

#define NEEDS_BASELINE                                                       \
  "{\"project\": \"demo\", \"gpus\": 1, \"require_baseline\": true,"        \
  " \"command\": [\"true\"]}"

/* ---- tests: a probe's start ---- */

static void
test_a_run_stores_a_probe_and_submits_one_job_for_a_whole_node(
    void **state)
{
  struct fx *f = *state;
  struct fake_job *j;
  struct err e = {0};
  json_t *out = NULL, *p, *v;
  char want[128];
  int64_t id;

  start(f, BASELINE);
  assert_int_equal(broker_baseline_run(f->b, "ref", 1, &out, &e), 0);
  p = json_object_get(out, "probe");
  id = json_integer_value(json_object_get(p, "id"));
  assert_true(id > 0);
  assert_string_equal(jsonx_str(p, "site"), "ref");
  assert_string_equal(jsonx_str(p, "state"), "pending");
  assert_string_equal(jsonx_str(p, "why"), "manual");
  assert_int_equal(json_integer_value(json_object_get(p, "nodes")), 1);
  assert_true(json_is_null(json_object_get(p, "job_id")));
  json_decref(out);
  assert_int_equal(probes_of(f, "ref"), 1);

  wait_jobs(f, "ref", 1);
  settle(f, 200);
  assert_int_equal(fake_at("ref")->njobs, 1);
  assert_int_equal(fake_at("cloud")->njobs, 0);
  assert_int_equal(fake_at("edge")->njobs, 0);
  j = &fake_at("ref")->jobs[0];
  snprintf(want, sizeof(want), "http://127.0.0.1:1/v1/probes/%" PRId64, id);
  assert_string_equal(env_of(j, "TENBIN_PROBE_URL"), want);
  assert_non_null(env_of(j, "TENBIN_PROBE_TOKEN"));
  assert_int_equal(strncmp(env_of(j, "TENBIN_PROBE_TOKEN"), "tbprobe_", 8),
                   0);
  assert_true(strlen(env_of(j, "TENBIN_PROBE_TOKEN")) > 8 + 32);
  snprintf(want, sizeof(want), "baseline-probe-%" PRId64, id);
  assert_string_equal(j->name, want);
  assert_string_equal(j->project, "baseline");
  assert_non_null(j->script);
  assert_int_equal(strncmp(j->script, "#!/bin/sh\n", 10), 0);
  assert_non_null(strstr(j->script, "\nexec '"));
  assert_non_null(strstr(j->script, "tenbin-probe' --nodes 1\n"));
  assert_null(strstr(j->script, "srun"));
  assert_int_equal(j->nodes, 1);
  assert_int_equal(j->gpus, 8);
  assert_int_equal(j->gpus_per_node, 8);

  /* The probe knows its job now. */
  v = view_of(f, "ref");
  assert_string_equal(latest_state(v), "running");
  assert_int_equal(json_integer_value(json_object_get(
                       json_object_get(v, "latest_probe"), "job_id")),
                   j->id);
  assert_string_equal(jsonx_str(v, "status"), "never_probed");
  json_decref(v);
  assert_int_equal(probe_jobs(f, id), 1);
}

static void
test_a_probe_takes_every_gpu_of_one_node_of_its_site(void **state)
{
  struct fx *f = *state;
  struct probe p;

  start(f, BASELINE);
  start_probe(f, "edge", &p);
  assert_int_equal(probe_job("edge", p.id)->gpus, 4);
  assert_int_equal(probe_job("edge", p.id)->gpus_per_node, 4);
}

/* ---- tests: the probe's report ---- */

static void
test_a_report_with_the_probe_token_finishes_a_one_node_probe(void **state)
{
  struct fx *f = *state;
  json_t *v, *doc, *r;
  json_error_t jerr;
  struct probe p;
  char line[160];
  size_t i, sizes = 0;
  char *m;

  start(f, BASELINE);
  start_probe(f, "ref", &p);
  report_ok(f, &p, "ref-h100.json");
  assert_int_equal(reports_of(f, p.id), 1);

  v = view_of(f, "ref");
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  assert_string_equal(jsonx_str(v, "reference"), "ref");
  assert_int_equal(json_integer_value(json_object_get(v, "probe_id")), p.id);
  assert_string_equal(latest_state(v), "done");
  assert_int_equal(json_array_size(json_object_get(v, "findings")), 0);
  assert_string_equal(jsonx_str(json_object_get(v, "result"), "host"),
                      "dgx-h100-01");
  json_decref(v);
  assert_null(bars(f, REF));

  m = metrics(f);
  assert_non_null(
      strstr(m, "tenbin_baseline_drift{site=\"ref\",rule=\"probed\"} 0\n"));
  assert_non_null(
      strstr(m, "tenbin_baseline_drift{site=\"cloud\",rule=\"probed\"} 1\n"));
  doc = json_load_file(FIXTURES "ref-h100.json", 0, &jerr);
  assert_non_null(doc);
  json_array_foreach(json_object_get(json_object_get(doc, "measurement"),
                                     "results"), i, r) {
    if (strcmp(jsonx_str(r, "collective"), "all_reduce") != 0)
      continue;
    snprintf(line, sizeof(line),
             "tenbin_allreduce_busbw_gbps{site=\"ref\",size=\"%" PRId64
             "\"} %.3f\n", (int64_t)json_integer_value(
                 json_object_get(r, "bytes")),
             json_number_value(json_object_get(r, "busbw_gbps")));
    if (strstr(m, line) == NULL)
      fail_msg("no line '%s' in the metrics", line);
    sizes++;
  }
  assert_true(sizes > 10);
  assert_null(strstr(m, "tenbin_allreduce_busbw_gbps{site=\"cloud\""));
  json_decref(doc);
  free(m);

  /* Its job ending after the report leaves it done. */
  fake_end("ref", p.job, JOB_SUCCEEDED, "exit code 0");
  wait_state(f, p.job, JOB_SUCCEEDED);
  v = view_of(f, "ref");
  assert_string_equal(latest_state(v), "done");
  json_decref(v);
}

static void
test_bad_reports_are_refused_and_store_nothing(void **state)
{
  struct fx *f = *state;
  struct probe p, other;
  char wrong[128];
  struct err e = {0};
  json_t *v;

  start(f, BASELINE);
  start_probe(f, "ref", &p);
  start_probe(f, "cloud", &other);
  assert_string_not_equal(p.token, other.token);

  /* A token that is not the probe's. */
  snprintf(wrong, sizeof(wrong), "%s", p.token);
  wrong[strlen(wrong) - 1] = wrong[strlen(wrong) - 1] == 'a' ? 'b' : 'a';
  assert_int_equal(report_as(f, &p, wrong, "ref-h100.json", 0, 1, &e),
                   ERR_UNAUTHORIZED);
  assert_int_equal(report_as(f, &p, "tbprobe_x", "ref-h100.json", 0, 1, &e),
                   ERR_UNAUTHORIZED);
  assert_int_equal(report_as(f, &p, NULL, "ref-h100.json", 0, 1, &e),
                   ERR_UNAUTHORIZED);
  /* Another probe's token. */
  assert_int_equal(report_as(f, &p, other.token, "ref-h100.json", 0, 1, &e),
                   ERR_UNAUTHORIZED);
  /* A document for two nodes, when the probe runs on one. */
  memset(&e, 0, sizeof(e));
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 1, 2, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "nodes"));
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 2, &e),
                   ERR_INVALID);
  /* Malformed documents. */
  assert_int_equal(broker_probe_report(f->b, p.token, p.id, "{\"schema\":",
                                       10, &e),
                   ERR_INVALID);
  assert_int_equal(broker_probe_report(f->b, p.token, p.id, "[]", 2, &e),
                   ERR_INVALID);
  assert_int_equal(
      broker_probe_report(f->b, p.token, p.id,
                          "{\"schema\": \"tenbin-probe/9\"}", 28, &e),
      ERR_INVALID);

  assert_int_equal(reports_of(f, p.id), 0);
  assert_int_equal(reports_of(f, other.id), 0);
  v = view_of(f, "ref");
  assert_string_equal(latest_state(v), "running");
  assert_string_equal(jsonx_str(v, "status"), "never_probed");
  json_decref(v);

  /* The right one goes in; once done, a report is too late. */
  report_ok(f, &p, "ref-h100.json");
  memset(&e, 0, sizeof(e));
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 1, &e),
                   ERR_CONFLICT);
  assert_int_equal(reports_of(f, p.id), 1);
}

static void
test_a_report_for_a_probe_that_does_not_exist_is_unauthorized(void **state)
{
  struct fx *f = *state;
  struct probe p, ghost;
  struct err e = {0};

  start(f, BASELINE);
  start_probe(f, "ref", &p);
  ghost = p;
  ghost.id = p.id + 100;
  /* The token is derived from the id: p's proves nothing of 100 more. */
  assert_int_equal(report_as(f, &ghost, p.token, "ref-h100.json", 0, 1, &e),
                   ERR_UNAUTHORIZED);
}

/* ---- tests: drift ---- */

static void
test_a_site_with_an_older_nccl_drifts_on_nccl_version(void **state)
{
  struct fx *f = *state;

  start(f, BASELINE);
  assert_drift(f, "cloud", CLOUD, "older-nccl.json", "nccl_version");
}

static void
test_a_site_with_half_the_bandwidth_drifts_on_busbw(void **state)
{
  struct fx *f = *state;

  start(f, BASELINE);
  assert_drift(f, "cloud", CLOUD, "half-bw.json", "busbw");
}

static void
test_a_site_with_an_ib_device_missing_drifts_on_interconnect(void **state)
{
  struct fx *f = *state;

  start(f, BASELINE);
  assert_drift(f, "edge", EDGE, "no-ib.json", "interconnect");
}

static void
test_a_site_with_the_reference_fingerprint_is_at_the_baseline(void **state)
{
  struct fx *f = *state;
  json_t *v;

  start(f, BASELINE);
  probe_site(f, "ref", "ref-h100.json");
  probe_site(f, "cloud", "ref-h100.json");
  v = view_of(f, "cloud");
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  json_decref(v);
  assert_null(bars(f, CLOUD));
  /* edge never probed: barred. */
  assert_non_null(bars(f, EDGE));
  assert_non_null(strstr(bars(f, EDGE), "probed"));
}

static void
test_with_the_reference_never_probed_every_site_is_barred(void **state)
{
  struct fx *f = *state;
  json_t *v;

  start(f, BASELINE);
  for (size_t i = 0; i < NSITES; i++) {
    assert_non_null(bars(f, i));
    assert_non_null(strstr(bars(f, i), "probed"));
  }
  /* A site's own result does not help while the reference has none. */
  probe_site(f, "cloud", "ref-h100.json");
  v = view_of(f, "cloud");
  assert_string_equal(jsonx_str(v, "status"), "drifted");
  assert_true(has_finding(v, "probed"));
  json_decref(v);
  for (size_t i = 0; i < NSITES; i++) {
    assert_non_null(bars(f, i));
    assert_non_null(strstr(bars(f, i), "probed"));
  }
}

/* ---- tests: jobs that require the baseline ---- */

static void
test_a_job_requiring_the_baseline_runs_only_at_a_site_at_it(void **state)
{
  struct fx *f = *state;
  size_t cloud_jobs;
  int64_t id, plain;
  char *site;

  start(f, BASELINE);
  probe_site(f, "ref", "ref-h100.json");
  probe_site(f, "cloud", "older-nccl.json");
  cloud_jobs = fake_at("cloud")->njobs;

  id = fx_submit_ok(f, NEEDS_BASELINE);
  wait_state(f, id, JOB_RUNNING);
  site = site_of(f, id);
  assert_string_equal(site, "ref");
  free(site);
  assert_int_equal(fake_at("cloud")->njobs, cloud_jobs);
  assert_null(fake_job(fake_at("cloud"), id));

  /* Without the requirement first-fit takes the first site: the one
   * above went to ref for the baseline, not by order. */
  plain = fx_submit_ok(f, "{\"project\": \"demo\", \"gpus\": 1, \"command\":"
                       " [\"true\"]}");
  wait_state(f, plain, JOB_RUNNING);
  site = site_of(f, plain);
  assert_string_equal(site, "cloud");
  free(site);
}

static void
test_a_job_pinned_to_a_drifted_site_stays_queued_naming_the_rule(
    void **state)
{
  struct fx *f = *state;
  struct placement_view p = {0};
  struct err e = {0};
  int64_t id;

  start(f, BASELINE);
  probe_site(f, "ref", "ref-h100.json");
  probe_site(f, "cloud", "older-nccl.json");

  id = fx_submit_ok(f, "{\"project\": \"demo\", \"gpus\": 1, \"site\": "
                    "\"cloud\", \"require_baseline\": true, \"command\": "
                    "[\"true\"]}");
  assert_true(run_until(f, placed_once, &id));
  settle(f, 200);
  assert_int_equal(state_of(f, id), JOB_QUEUED);
  assert_null(fake_job(fake_at("cloud"), id));
  assert_int_equal(broker_job_placement(f->b, &admin, id, &p, &e), 0);
  assert_string_equal(p.verdict, "wait");
  if (!((p.reason != NULL && strstr(p.reason, "nccl_version") != NULL) ||
        (p.candidates != NULL &&
         strstr(p.candidates, "nccl_version") != NULL)))
    fail_msg("the decision does not name the rule: reason '%s', "
             "candidates %s", p.reason != NULL ? p.reason : "(null)",
             p.candidates != NULL ? p.candidates : "(null)");
  placement_view_release(&p);
}

static void
test_a_site_probed_back_to_the_baseline_takes_the_waiting_job(void **state)
{
  struct fx *f = *state;
  int64_t id;
  char *site;

  start(f, BASELINE);
  probe_site(f, "ref", "ref-h100.json");
  probe_site(f, "cloud", "older-nccl.json");
  id = fx_submit_ok(f, "{\"project\": \"demo\", \"gpus\": 1, \"site\": "
                    "\"cloud\", \"require_baseline\": true, \"command\": "
                    "[\"true\"]}");
  assert_true(run_until(f, placed_once, &id));
  assert_int_equal(state_of(f, id), JOB_QUEUED);
  /* A newer probe at the reference's fingerprint lets it go. */
  probe_site(f, "cloud", "ref-h100.json");
  assert_null(bars(f, CLOUD));
  wait_state(f, id, JOB_RUNNING);
  site = site_of(f, id);
  assert_string_equal(site, "cloud");
  free(site);
}

static void
test_without_a_baseline_block_require_baseline_is_unprocessable(
    void **state)
{
  struct fx *f = *state;
  json_t *body = parse(NEEDS_BASELINE), *out = NULL;
  struct fx_answer a = {0};
  struct err e = {0};
  char *m;

  start(f, NULL);
  assert_int_equal(broker_submit(f->b, &admin, body, NULL, NULL,
                                 fx_on_submitted, &a, &e),
                   ERR_UNPROCESSABLE);
  assert_non_null(strstr(e.msg, "require_baseline"));
  json_decref(body);
  assert_int_equal(broker_baseline_run(f->b, "ref", 1, &out, &e),
                   ERR_UNPROCESSABLE);
  assert_int_equal(broker_baseline_view(f->b, "ref", NULL, &out, &e),
                   ERR_NOT_FOUND);
  assert_null(out);
  assert_int_equal(broker_probe_report(f->b, "tbprobe_x", 1, "{}", 2, &e),
                   ERR_NOT_FOUND);
  for (size_t i = 0; i < NSITES; i++)
    assert_null(bars(f, i));
  m = metrics(f);
  assert_string_equal(m, "");
  free(m);
  settle(f, 100);
  assert_int_equal(a.called, 0);
}

/* ---- tests: a probe's job ends first ---- */

static void
test_a_probe_whose_job_fails_before_its_report_fails_naming_the_job(
    void **state)
{
  struct fx *f = *state;
  char want[64];
  struct probe p;
  struct err e = {0};
  int64_t first;
  json_t *v;

  start(f, BASELINE);
  first = probe_site(f, "ref", "ref-h100.json");
  start_probe(f, "ref", &p);
  fake_end("ref", p.job, JOB_FAILED, "exit code 1");
  wait_state(f, p.job, JOB_FAILED);

  v = view_of(f, "ref");
  assert_string_equal(latest_state(v), "failed");
  snprintf(want, sizeof(want), "job %" PRId64 " ended", p.job);
  assert_non_null(strstr(jsonx_str(json_object_get(v, "latest_probe"),
                                   "reason"), want));
  /* The site keeps its previous result. */
  assert_int_equal(json_integer_value(json_object_get(v, "probe_id")),
                   first);
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  json_decref(v);
  assert_null(bars(f, REF));
  /* A late report finds it failed. */
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 1, &e),
                   ERR_CONFLICT);
  assert_int_equal(reports_of(f, p.id), 0);
}

static void
test_a_probe_whose_job_succeeds_without_a_report_fails(void **state)
{
  struct fx *f = *state;
  char want[64];
  struct probe p;
  json_t *v;

  start(f, BASELINE);
  start_probe(f, "cloud", &p);
  fake_end("cloud", p.job, JOB_SUCCEEDED, "exit code 0");
  wait_state(f, p.job, JOB_SUCCEEDED);
  v = view_of(f, "cloud");
  assert_string_equal(latest_state(v), "failed");
  snprintf(want, sizeof(want), "job %" PRId64 " ended", p.job);
  assert_non_null(strstr(jsonx_str(json_object_get(v, "latest_probe"),
                                   "reason"), want));
  assert_true(json_is_null(json_object_get(v, "probe_id")));
  assert_string_equal(jsonx_str(v, "status"), "never_probed");
  json_decref(v);
  /* And the site may be probed again. */
  start_probe(f, "cloud", &p);
}

/* ---- tests: more than one node, and the NCCL id ---- */

static void
test_a_multi_node_probe_needs_a_slurm_site(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  json_t *out = NULL;

  start(f, BASELINE);
  assert_int_equal(broker_baseline_run(f->b, "cloud", 2, &out, &e),
                   ERR_UNPROCESSABLE);
  assert_non_null(strstr(e.msg, "nodes"));
  assert_null(out);
  assert_int_equal(probes_of(f, "cloud"), 0);
}

/* 256 hex digits from 16 of them. */
#define HEX_ID(c) c c c c c c c c c c c c c c c c

static int
put_id(struct fx *f, const struct probe *p, const char *token,
       const char *body_text, struct err *e)
{
  json_t *body = parse(body_text);
  int rc = broker_probe_nccl_id_put(f->b, token, p->id, body, e);

  json_decref(body);
  return rc;
}

static void
test_the_nccl_id_is_put_once_and_got_by_the_other_nodes(void **state)
{
  struct fx *f = *state;
  const char *id_a = HEX_ID("0123456789abcdef");
  const char *id_b = HEX_ID("fedcba9876543210");
  char body[1024];
  struct err e = {0};
  struct probe p;
  json_t *got = NULL;

  start(f, BASELINE);
  start_probe(f, "ref", &p);
  assert_int_equal(strlen(id_a), 256);
  assert_int_equal(broker_probe_nccl_id_get(f->b, p.token, p.id, &got, &e),
                   ERR_NOT_FOUND);
  assert_null(got);

  /* Bad puts: uppercase, not hex, short, no gpus_per_node, ... */
  assert_int_equal(put_id(f, &p, p.token,
                          "{\"id\": \"" HEX_ID("0123456789ABCDEF")
                          "\", \"gpus_per_node\": 8}", &e),
                   ERR_INVALID);
  assert_int_equal(put_id(f, &p, p.token,
                          "{\"id\": \"" HEX_ID("0123456789abcdeg")
                          "\", \"gpus_per_node\": 8}", &e),
                   ERR_INVALID);
  assert_int_equal(put_id(f, &p, p.token,
                          "{\"id\": \"abcd\", \"gpus_per_node\": 8}", &e),
                   ERR_INVALID);
  memset(&e, 0, sizeof(e));
  snprintf(body, sizeof(body), "{\"id\": \"%s\"}", id_a);
  assert_int_equal(put_id(f, &p, p.token, body, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "gpus_per_node"));
  snprintf(body, sizeof(body), "{\"id\": \"%s\", \"gpus_per_node\": 0}",
           id_a);
  assert_int_equal(put_id(f, &p, p.token, body, &e), ERR_INVALID);
  snprintf(body, sizeof(body), "{\"id\": \"%s\", \"gpus_per_node\": 8, "
           "\"extra\": 1}", id_a);
  assert_int_equal(put_id(f, &p, p.token, body, &e), ERR_INVALID);
  assert_int_equal(put_id(f, &p, p.token, "{\"gpus_per_node\": 8}", &e),
                   ERR_INVALID);
  snprintf(body, sizeof(body), "{\"id\": \"%s\", \"gpus_per_node\": 8}",
           id_a);
  assert_int_equal(put_id(f, &p, "tbprobe_x", body, &e), ERR_UNAUTHORIZED);
  assert_int_equal(broker_probe_nccl_id_get(f->b, p.token, p.id, &got, &e),
                   ERR_NOT_FOUND);

  /* Put, then get. */
  assert_int_equal(put_id(f, &p, p.token, body, &e), 0);
  assert_int_equal(broker_probe_nccl_id_get(f->b, p.token, p.id, &got, &e),
                   0);
  assert_string_equal(jsonx_str(got, "id"), id_a);
  assert_int_equal(json_integer_value(json_object_get(got, "gpus_per_node")),
                   8);
  json_decref(got);
  got = NULL;
  assert_int_equal(broker_probe_nccl_id_get(f->b, "tbprobe_x", p.id, &got,
                                            &e),
                   ERR_UNAUTHORIZED);
  assert_null(got);

  /* The same again is fine (a retry); another is a conflict. */
  assert_int_equal(put_id(f, &p, p.token, body, &e), 0);
  snprintf(body, sizeof(body), "{\"id\": \"%s\", \"gpus_per_node\": 8}",
           id_b);
  assert_int_equal(put_id(f, &p, p.token, body, &e), ERR_CONFLICT);
  snprintf(body, sizeof(body), "{\"id\": \"%s\", \"gpus_per_node\": 4}",
           id_a);
  assert_int_equal(put_id(f, &p, p.token, body, &e), ERR_CONFLICT);
  assert_int_equal(broker_probe_nccl_id_get(f->b, p.token, p.id, &got, &e),
                   0);
  assert_string_equal(jsonx_str(got, "id"), id_a);
  json_decref(got);
}

/* ref, and a two-node Slurm site which is the reference: a two-node
 * result is not comparable with a one-node one (busbw says so). */
#define HPC_SITES                                                            \
  "[{\"name\": \"ref\", \"kind\": \"fakesite\", \"gpus_per_node\": 8},"     \
  " {\"name\": \"hpc\", \"kind\": \"slurm\", \"gpus_per_node\": 8,"         \
  " \"nodes\": 2}]"
#define HPC 1
#define HPC_BASELINE                                                         \
  "{\"reference\": \"hpc\", \"every_s\": 0, \"sites\": [],"                 \
  " \"server\": \"http://127.0.0.1:1\"}"

/* A two-node probe of hpc, running. */
static void
start_hpc_probe(struct fx *f, struct probe *p)
{
  const struct fake_job *j;

  await_probe(f, "hpc", run_probe(f, "hpc", 2), p);
  j = probe_job("hpc", p->id);
  assert_int_equal(j->nodes, 2);
  assert_int_equal(j->gpus, 16);
  assert_int_equal(j->gpus_per_node, 8);
  assert_non_null(strstr(j->script, "exec srun --nodes=2 "
                                    "--ntasks-per-node=1 '"));
  assert_non_null(strstr(j->script, "tenbin-probe' --nodes 2\n"));
}

static void
test_a_two_node_probe_at_a_slurm_site_is_done_when_both_nodes_report(
    void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  struct probe p;
  json_t *v;

  start_with(f, HPC_SITES, HPC_BASELINE);
  start_hpc_probe(f, &p);
  /* A one-node document does not fit a two-node probe. */
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 1, &e),
                   ERR_INVALID);
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 2, &e), 0);
  /* A node that reports twice is counted once. */
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 2, &e), 0);
  assert_int_equal(reports_of(f, p.id), 1);
  v = view_of(f, "hpc");
  assert_string_equal(latest_state(v), "running");
  assert_string_equal(jsonx_str(v, "status"), "never_probed");
  json_decref(v);

  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 1, 2, &e), 0);
  assert_int_equal(reports_of(f, p.id), 2);
  v = view_of(f, "hpc");
  assert_string_equal(latest_state(v), "done");
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  assert_int_equal(json_integer_value(json_object_get(v, "nodes_differing")),
                   0);
  json_decref(v);
  assert_null(bars(f, HPC));
}

static void
test_a_node_unlike_node_0_fails_uniform(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  struct probe p;
  json_t *v;

  start_with(f, HPC_SITES, HPC_BASELINE);
  start_hpc_probe(f, &p);
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 2, &e), 0);
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 1, 2, &e), 0);
  fake_end("hpc", p.job, JOB_SUCCEEDED, "exit code 0");
  wait_state(f, p.job, JOB_SUCCEEDED);
  assert_null(bars(f, HPC));
  /* The next probe's node 1 has an older NCCL than its node 0. */
  start_hpc_probe(f, &p);
  assert_int_equal(report_as(f, &p, p.token, "ref-h100.json", 0, 2, &e), 0);
  assert_int_equal(report_as(f, &p, p.token, "older-nccl.json", 1, 2, &e),
                   0);
  v = view_of(f, "hpc");
  assert_string_equal(jsonx_str(v, "status"), "drifted");
  assert_true(has_finding(v, "uniform"));
  assert_int_equal(json_integer_value(json_object_get(v, "nodes_differing")),
                   1);
  json_decref(v);
  assert_non_null(bars(f, HPC));
  assert_non_null(strstr(bars(f, HPC), "uniform"));
}

/* ---- tests: restarts and crashes ---- */

static int
probe_has_job(struct fx *f, const void *arg)
{
  json_t *v = view_of(f, "ref");
  const json_t *latest = json_object_get(v, "latest_probe");
  int ok = json_integer_value(json_object_get(latest, "id")) ==
               *(const int64_t *)arg &&
           json_is_integer(json_object_get(latest, "job_id"));

  json_decref(v);
  return ok;
}

/* What a child that crashes says: which step went wrong. */
enum crash_exit {
  CRASHED_AFTER_RUN = 0,
  CRASH_LOOP,
  CRASH_OPEN,
  CRASH_RUN,
  CRASH_PIPE,
};

/*
 * In a child process: open a broker on f's state with a loop of its
 * own, start a probe of ref and die before the loop ever turns (so
 * before the group commit of the probe's job), as kill -9 would.  The
 * probe's id comes back through a pipe.
 */
static int64_t
crash_after_run(struct fx *f)
{
  int64_t id = 0;
  int status = 0;
  int fds[2];
  pid_t pid;

  assert_int_equal(pipe(fds), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    uv_loop_t loop;
    struct broker *b = NULL;
    struct err e = {0};
    json_t *out = NULL;
    int64_t got;

    close(fds[0]);
    if (uv_loop_init(&loop) != 0)
      _exit(CRASH_LOOP);
    if (open_broker_on(&loop, f, SITES, BASELINE, &b, &e) < 0)
      _exit(CRASH_OPEN);
    if (broker_baseline_run(b, "ref", 1, &out, &e) < 0)
      _exit(CRASH_RUN);
    got = json_integer_value(json_object_get(json_object_get(out, "probe"),
                                             "id"));
    if (write(fds[1], &got, sizeof(got)) != (ssize_t)sizeof(got))
      _exit(CRASH_PIPE);
    _exit(CRASHED_AFTER_RUN);
  }
  close(fds[1]);
  assert_int_equal(read(fds[0], &id, sizeof(id)), (ssize_t)sizeof(id));
  close(fds[0]);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), CRASHED_AFTER_RUN);
  return id;
}

static void
test_a_probe_stored_before_a_crash_is_submitted_once_after_restart(
    void **state)
{
  struct fx *f = *state;
  struct probe p;
  int64_t id;
  json_t *v;

  id = crash_after_run(f);
  assert_true(id > 0);
  start(f, BASELINE);
  /* Stored, pending, with no job: the crash came before the commit. */
  v = view_of(f, "ref");
  assert_string_equal(latest_state(v), "pending");
  assert_true(json_is_null(json_object_get(json_object_get(v,
                                                           "latest_probe"),
                                           "job_id")));
  json_decref(v);
  assert_int_equal(probe_jobs(f, id), 0);

  /* The first scheduler pass submits it. */
  await_probe(f, "ref", id, &p);
  settle(f, 300);
  assert_int_equal(probe_jobs(f, id), 1);
  assert_int_equal(fake_at("ref")->njobs, 1);
  assert_int_equal(probes_of(f, "ref"), 1);
  /* and it finishes as any other. */
  report_ok(f, &p, "ref-h100.json");
  v = view_of(f, "ref");
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  json_decref(v);
}

static void
test_a_probe_submitted_at_close_is_not_submitted_again(void **state)
{
  struct fx *f = *state;
  int64_t id;

  start(f, BASELINE);
  id = run_probe(f, "ref", 1);
  /* Closed before the loop turned: the close commits the submission. */
  close_broker(f);
  start(f, BASELINE);
  assert_true(run_until(f, probe_has_job, &id));
  settle(f, 300);
  assert_int_equal(probe_jobs(f, id), 1);
  /* The job the first broker stored, still queued then, placed by the
   * second. */
  assert_int_equal(fake_at("ref")->njobs, 1);
  assert_false(fake_at("ref")->jobs[0].adopted);
  assert_int_equal(probes_of(f, "ref"), 1);
}

static void
test_a_probe_running_across_a_restart_is_adopted_and_finishes(void **state)
{
  struct fx *f = *state;
  struct probe p;
  json_t *v;

  start(f, BASELINE);
  start_probe(f, "ref", &p);
  close_broker(f);
  start(f, BASELINE);
  /* The site takes its job back; the token still holds. */
  wait_jobs(f, "ref", 1);
  assert_true(fake_at("ref")->jobs[0].adopted);
  assert_int_equal(fake_at("ref")->jobs[0].id, p.job);
  settle(f, 200);
  assert_int_equal(fake_at("ref")->njobs, 1);
  report_ok(f, &p, "ref-h100.json");
  v = view_of(f, "ref");
  assert_string_equal(latest_state(v), "done");
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  json_decref(v);
  assert_int_equal(probe_jobs(f, p.id), 1);
}

static void
test_a_done_result_is_loaded_back_after_a_restart(void **state)
{
  struct fx *f = *state;
  int64_t ref_id, cloud_id;
  json_t *v;

  start(f, BASELINE);
  ref_id = probe_site(f, "ref", "ref-h100.json");
  cloud_id = probe_site(f, "cloud", "older-nccl.json");
  close_broker(f);

  start(f, BASELINE);
  /* Judged at open, before any pass. */
  assert_null(bars(f, REF));
  assert_non_null(bars(f, CLOUD));
  assert_non_null(strstr(bars(f, CLOUD), "nccl_version"));
  v = view_of(f, "ref");
  assert_string_equal(jsonx_str(v, "status"), "at_baseline");
  assert_int_equal(json_integer_value(json_object_get(v, "probe_id")),
                   ref_id);
  assert_string_equal(latest_state(v), "done");
  json_decref(v);
  v = view_of(f, "cloud");
  assert_string_equal(jsonx_str(v, "status"), "drifted");
  assert_int_equal(json_integer_value(json_object_get(v, "probe_id")),
                   cloud_id);
  assert_true(has_finding(v, "nccl_version"));
  json_decref(v);
}

/* ---- tests: what broker_baseline_run refuses ---- */

static void
test_a_run_is_refused_while_one_runs_or_for_a_bad_site_or_count(
    void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  json_t *out = NULL;
  struct probe p;

  start(f, BASELINE);
  start_probe(f, "ref", &p);
  assert_int_equal(broker_baseline_run(f->b, "ref", 1, &out, &e),
                   ERR_CONFLICT);
  assert_int_equal(broker_baseline_run(f->b, "nowhere", 1, &out, &e),
                   ERR_NOT_FOUND);
  assert_int_equal(broker_baseline_run(f->b, "cloud", 0, &out, &e),
                   ERR_INVALID);
  assert_int_equal(broker_baseline_run(f->b, "cloud", -1, &out, &e),
                   ERR_INVALID);
  assert_int_equal(broker_baseline_run(f->b, "cloud", 1025, &out, &e),
                   ERR_INVALID);
  assert_null(out);
  assert_int_equal(probes_of(f, "ref"), 1);
  assert_int_equal(probes_of(f, "cloud"), 0);
  assert_int_equal(broker_baseline_view(f->b, "nowhere", NULL, &out, &e),
                   ERR_NOT_FOUND);
  assert_int_equal(broker_baseline_view(f->b, "ref", "nowhere", &out, &e),
                   ERR_NOT_FOUND);
  assert_null(out);
  /* Once it is done, another may start. */
  report_ok(f, &p, "ref-h100.json");
  assert_true(run_probe(f, "ref", 1) > p.id);
}

static void
test_a_bundle_without_a_version_refuses_a_run_and_stores_nothing(
    void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  json_t *out = NULL;

  start(f, "{\"reference\": \"ref\", \"sites\": [], \"server\": "
           "\"http://127.0.0.1:1\", \"bundle\": \"nccl-bundle\"}");
  assert_int_equal(broker_baseline_run(f->b, "ref", 1, &out, &e),
                   ERR_UNPROCESSABLE);
  assert_non_null(strstr(e.msg, "nccl-bundle"));
  assert_null(out);
  assert_int_equal(probes_of(f, "ref"), 0);
}

static void
test_the_probe_path_args_and_server_from_the_block_shape_the_job(
    void **state)
{
  struct fx *f = *state;
  const struct fake_job *j;
  struct probe p;
  char want[128];

  start(f, "{\"reference\": \"ref\", \"sites\": [], \"server\": "
           "\"http://tenbind.example:8080//\", \"probe\": "
           "\"/opt/tb/tenbin-probe\", \"probe_args\": [\"--iters\", "
           "\"it's\"], \"time_limit_s\": 600}");
  start_probe(f, "cloud", &p);
  snprintf(want, sizeof(want), "http://tenbind.example:8080/v1/probes/%"
           PRId64, p.id);
  assert_string_equal(p.url, want);
  j = probe_job("cloud", p.id);
  /* Each argument quoted for sh, a quote inside one too. */
  assert_non_null(strstr(j->script, "exec '/opt/tb/tenbin-probe' --nodes 1 "
                                    "'--iters' 'it'\\''s'\n"));
}

/* ---- tests: the config block ---- */

static void
test_bad_baseline_blocks_are_config_errors_naming_the_field(void **state)
{
  static const struct {
    const char *block, *names;
  } cases[] = {
      {"{\"every_s\": 0}", "baseline.reference"},
      {"{\"reference\": \"nowhere\"}", "baseline.reference"},
      {"{\"reference\": \"ref\", \"rules\": {\"off\": [\"nosuch\"]}}",
       "baseline.rules.off[0]"},
      {"{\"reference\": \"ref\", \"rules\": {\"busbw_tolerance_pct\": 150}}",
       "busbw_tolerance_pct"},
      {"{\"reference\": \"ref\", \"probe\": \"bin/tenbin-probe\"}",
       "baseline.probe"},
      {"{\"reference\": \"ref\", \"colour\": \"blue\"}", "colour"},
      {"{\"reference\": \"ref\", \"sites\": [\"nowhere\"]}",
       "baseline.sites[0]"},
      {"{\"reference\": \"ref\", \"server\": \"ftp://h\"}",
       "baseline.server"},
      {"{\"reference\": \"ref\", \"rules\": {\"nccl_version\": \"minor\"}}",
       "baseline.rules.nccl_version"},
      {"{\"reference\": \"ref\", \"every_s\": -1}", "every_s"},
      {"[]", "baseline"},
  };
  struct fx *f = *state;

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct err e = {0};
    int rc = open_broker(f, cases[i].block, &e);

    if (rc != ERR_CONFIG || strstr(e.msg, cases[i].names) == NULL)
      fail_msg("%s: rc %d, '%s' (wanted ERR_CONFIG naming '%s')",
               cases[i].block, rc, e.msg, cases[i].names);
    assert_null(f->b);
    /* Its sites close through the loop. */
    settle(f, 20);
  }
  /* A relative path with no slash is looked up on the site's PATH. */
  start(f, "{\"reference\": \"ref\", \"probe\": \"my-probe\"}");
}

/* A field the helpers refuse is a mistake in the config: ERR_CONFIG in
 * the return and in e alike, as every config reader says it. */
static void
test_a_bad_baseline_block_says_err_config_in_its_err_too(void **state)
{
  static const char *const blocks[] = {
      "{\"reference\": \"ref\", \"colour\": \"blue\"}",
      "{\"reference\": \"ref\", \"every_s\": -1}",
      "{\"reference\": \"ref\", \"rules\": {\"colour\": 1}}",
      "{\"reference\": \"ref\", \"rules\": {\"max_age_s\": -1}}",
  };
  struct fx *f = *state;

  for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
    struct err e = {0};
    int rc = open_broker(f, blocks[i], &e);

    settle(f, 20);
    if (rc != ERR_CONFIG || e.code != ERR_CONFIG)
      fail_msg("%s: rc %d, e.code %d '%s' (wanted ERR_CONFIG in both)",
               blocks[i], rc, e.code, e.msg);
  }
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_a_run_stores_a_probe_and_submits_one_job_for_a_whole_node),
      T(test_a_probe_takes_every_gpu_of_one_node_of_its_site),
      T(test_a_report_with_the_probe_token_finishes_a_one_node_probe),
      T(test_bad_reports_are_refused_and_store_nothing),
      T(test_a_report_for_a_probe_that_does_not_exist_is_unauthorized),
      T(test_a_site_with_an_older_nccl_drifts_on_nccl_version),
      T(test_a_site_with_half_the_bandwidth_drifts_on_busbw),
      T(test_a_site_with_an_ib_device_missing_drifts_on_interconnect),
      T(test_a_site_with_the_reference_fingerprint_is_at_the_baseline),
      T(test_with_the_reference_never_probed_every_site_is_barred),
      T(test_a_job_requiring_the_baseline_runs_only_at_a_site_at_it),
      T(test_a_job_pinned_to_a_drifted_site_stays_queued_naming_the_rule),
      T(test_a_site_probed_back_to_the_baseline_takes_the_waiting_job),
      T(test_without_a_baseline_block_require_baseline_is_unprocessable),
      T(test_a_probe_whose_job_fails_before_its_report_fails_naming_the_job),
      T(test_a_probe_whose_job_succeeds_without_a_report_fails),
      T(test_a_multi_node_probe_needs_a_slurm_site),
      T(test_the_nccl_id_is_put_once_and_got_by_the_other_nodes),
      T(test_a_two_node_probe_at_a_slurm_site_is_done_when_both_nodes_report),
      T(test_a_node_unlike_node_0_fails_uniform),
      T(test_a_probe_stored_before_a_crash_is_submitted_once_after_restart),
      T(test_a_probe_submitted_at_close_is_not_submitted_again),
      T(test_a_probe_running_across_a_restart_is_adopted_and_finishes),
      T(test_a_done_result_is_loaded_back_after_a_restart),
      T(test_a_run_is_refused_while_one_runs_or_for_a_bad_site_or_count),
      T(test_a_bundle_without_a_version_refuses_a_run_and_stores_nothing),
      T(test_the_probe_path_args_and_server_from_the_block_shape_the_job),
      T(test_bad_baseline_blocks_are_config_errors_naming_the_field),
      T(test_a_bad_baseline_block_says_err_config_in_its_err_too),
  };
#undef T

  log_set_level(LOG_ERROR);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
