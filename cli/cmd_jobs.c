/*
 * The job commands: submit, sbatch, jobs, show, events, logs, cancel and
 * release.  Parsing and body building live in args.c; this file does the
 * requests and prints the replies.
 *
 * Submissions always carry an Idempotency-Key (the user's or a random
 * one), which is what makes retrying a POST after a lost connection or
 * a 5xx safe: the server answers a replay with the job it already made.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/format.h"
#include "cli/table.h"
#include "util/alloc.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define SUBMIT_TRIES 3
/* A 512 KiB script may grow sixfold when JSON escapes it. */
#define MAX_BODY ((size_t)8 << 20)
#define FOLLOW_INTERVAL_MS 300
#define MAX_PATH_LEN 256

static const char show_usage[] =
    "usage: tenbin show ID\n\nShow one job.\n";
static const char events_usage[] =
    "usage: tenbin events ID\n\nList the state transitions of a job.\n";
static const char cancel_usage[] =
    "usage: tenbin cancel ID...\n\n"
    "Cancel jobs; a running job is signalled and ends shortly.\n";
static const char release_usage[] =
    "usage: tenbin release ID...\n\n"
    "Release held jobs so that they can be placed.\n";

static int
is_final_state(const char *s)
{
  return strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
         strcmp(s, "cancelled") == 0 || strcmp(s, "lost") == 0;
}

/* Print each string of warnings as "tenbin: warning: ..." on stderr. */
static void
print_warnings(const json_t *warnings, const json_t *skip)
{
  const json_t *w;
  const json_t *old;
  size_t i;
  size_t j;

  json_array_foreach(warnings, i, w) {
    int seen = 0;

    if (!json_is_string(w))
      continue;
    json_array_foreach(skip, j, old) {
      if (json_equal((json_t *)w, (json_t *)old))
        seen = 1;
    }
    if (!seen)
      cli_message("warning: ", json_string_value(w), "");
  }
}

/* The 201's cost forecast as a note on stderr (stdout is the id alone,
 * for scripts), when money is involved. */
static void
print_forecast(const json_t *job)
{
  const json_t *f = json_object_get(job, "forecast");
  const json_t *upper = json_object_get(f, "upper_micro");
  const json_t *left = json_object_get(f, "budget_left_micro");
  char runtime[CLI_FMT_SIZE], exp[40], up[40], lft[40];
  int64_t expected = json_integer_value(json_object_get(f, "expected_micro"));

  if (!json_is_object(f) ||
      (expected == 0 && json_is_integer(upper) &&
       json_integer_value(upper) == 0 && left == NULL))
    return;
  cli_fmt_duration(json_integer_value(json_object_get(f, "runtime_ms")) / 1000,
                   runtime, sizeof(runtime));
  cli_fmt_micro_dollars(expected, exp, sizeof(exp));
  if (json_is_integer(upper))
    cli_fmt_micro_dollars(json_integer_value(upper), up, sizeof(up));
  if (left != NULL)
    cli_fmt_micro_dollars(json_integer_value(left), lft, sizeof(lft));
  fprintf(stderr, "tenbin: forecast: about %s (%s), $%s expected, %s%s%s%s\n",
          runtime, jsonx_str(f, "runtime_basis"), exp,
          json_is_integer(upper) ? "at most $" : "no upper bound (no time "
                                                 "limit)",
          json_is_integer(upper) ? up : "",
          left != NULL ? "; budget left $" : "", left != NULL ? lft : "");
}

/*
 * POST /v1/jobs with body, retried with the same key on connection errors
 * and 5xx; prints the id (or the JSON) and the server's warnings but
 * those in printed (borrowed, may be NULL), which were printed already.
 */
static int
post_job(struct cli *cli, const json_t *body, const char *user_key,
         const json_t *printed)
{
  char key[64];
  struct buf text;
  struct cli_response r;
  struct err e = {0};
  json_t *job = NULL;
  int status = CLI_EXIT_FAIL;
  int rc;

  buf_init(&text, MAX_BODY);
  cli_response_init(&r);
  if (user_key == NULL && hash_random_token("tb-", key, sizeof(key)) < 0) {
    err_set(&e, ERR_IO, "cannot make an idempotency key: no randomness");
    status = cli_fail(&e);
    goto out;
  }
  if (jsonx_dump_buf(body, &text) < 0) {
    err_set(&e, ERR_TOO_LARGE, "request larger than %zu MiB",
            MAX_BODY >> 20);
    status = cli_fail(&e);
    goto out;
  }
  for (int attempt = 1;; attempt++) {
    rc = cli_client_call(&cli->client, "POST", "/v1/jobs", &text,
                         user_key != NULL ? user_key : key, &r, &e);
    if (rc == 0 && r.status < 500)
      break;
    if (rc < 0 && rc != ERR_UNAVAILABLE)
      break;
    if (attempt == SUBMIT_TRIES)
      break;
    /* Fill e with the 5xx's message for the note below. */
    if (rc == 0 && cli_response_check(&r, &e) == 0)
      break;
    cli_message("", err_msg(&e), "; retrying");
    /* 0.5 s, then 1.5 s: long enough for a daemon restart to finish. */
    time_sleep_ms(attempt == 1 ? 500 : 1500);
  }
  if (rc == 0)
    rc = cli_response_check(&r, &e);
  if (rc == 0)
    rc = cli_response_json(&r, &job, &e);
  if (rc < 0) {
    status = cli_fail(&e);
    goto out;
  }
  if (cli->json) {
    cli_print_raw(&r);
  } else {
    printf("%lld\n", (long long)json_integer_value(json_object_get(job, "id")));
    print_warnings(json_object_get(job, "warnings"), printed);
    print_forecast(job);
    if (r.replayed && user_key != NULL)
      fprintf(stderr, "tenbin: note: job %lld was already submitted with "
                      "this idempotency key\n",
              (long long)json_integer_value(json_object_get(job, "id")));
  }
  status = CLI_EXIT_OK;
out:
  json_decref(job);
  cli_response_release(&r);
  buf_release(&text);
  return status;
}

int
cli_cmd_submit(struct cli *cli, int argc, char **argv)
{
  struct cli_submit s;
  struct err e = {0};
  int status = CLI_EXIT_OK;

  cli_submit_init(&s);
  if (cli_parsed(cli_submit_parse(argc, argv, &s, &e), cli_submit_usage, &e,
             &status))
    status = post_job(cli, s.body, s.idempotency_key, NULL);
  cli_submit_release(&s);
  return status;
}

int
cli_cmd_sbatch(struct cli *cli, int argc, char **argv)
{
  struct cli_sbatch s;
  struct buf script;
  struct err e = {0};
  json_t *warnings = json_array();
  int status = CLI_EXIT_OK;

  cli_sbatch_init(&s);
  buf_init(&script, CLI_MAX_SCRIPT);
  if (!cli_parsed(cli_sbatch_parse(argc, argv, &s, &e), cli_sbatch_usage, &e,
              &status))
    goto out;
  if (cli_read_file(s.path, &script, &e) < 0 ||
      cli_sbatch_set_script(&s, buf_str(&script), script.len, warnings,
                            &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  /* Before the request, as sbatch does: they matter most when it fails. */
  print_warnings(warnings, NULL);
  status = post_job(cli, s.body, s.idempotency_key, warnings);
out:
  json_decref(warnings);
  buf_release(&script);
  cli_sbatch_release(&s);
  return status;
}

/* "in 12m" of a waiting job's predicted start ("now" once due), into
 * out; NULL when it has none. */
static const char *
starts_in(const json_t *job, int64_t now, char *out, size_t len)
{
  int64_t at;
  char d[CLI_FMT_SIZE];

  if (time_parse_iso(jsonx_str(job, "predicted_start"), &at) < 0)
    return NULL;
  if (at <= now)
    return "now";
  cli_fmt_duration((at - now) / 1000, d, sizeof(d));
  snprintf(out, len, "in %s", d);
  return out;
}

static void
add_job_row(struct cli_table *t, const json_t *job, int64_t now)
{
  char id[32];
  char gpus[CLI_FMT_SIZE];
  char age[CLI_FMT_SIZE];
  char exit_cell[CLI_FMT_SIZE];
  char starts[CLI_FMT_SIZE + 8];
  const char *site = jsonx_str(job, "site");
  const char *state = jsonx_str(job, "state");
  const char *row[10];
  int waiting = state != NULL && (strcmp(state, "queued") == 0 ||
                                  strcmp(state, "staging") == 0);

  snprintf(id, sizeof(id), "%lld",
           (long long)json_integer_value(json_object_get(job, "id")));
  cli_fmt_gpus(json_integer_value(json_object_get(job, "gpus")),
               jsonx_str(job, "gpu_type"), gpus, sizeof(gpus));
  cli_fmt_job_time(job, now, age, sizeof(age));
  cli_fmt_exit(job, exit_cell, sizeof(exit_cell));
  row[0] = id;
  row[1] = jsonx_str(job, "name");
  row[2] = jsonx_str(job, "project");
  row[3] = jsonx_str(job, "state");
  row[4] = site != NULL ? site : "-";
  row[5] = gpus;
  row[6] = age;
  row[7] = exit_cell;
  row[8] = waiting ? starts_in(job, now, starts, sizeof(starts)) : NULL;
  row[9] = waiting ? jsonx_str(job, "reason") : NULL;
  if (row[8] == NULL)
    row[8] = "-";
  if (row[9] == NULL)
    row[9] = "";
  cli_table_add(t, row);
}

/* next_cursor as a new string, or NULL on the last page. */
static char *
next_cursor(const json_t *page)
{
  const json_t *v = json_object_get(page, "next_cursor");
  char tmp[32];

  if (json_is_string(v) && json_string_value(v)[0] != '\0')
    return xstrdup(json_string_value(v));
  if (json_is_integer(v)) {
    snprintf(tmp, sizeof(tmp), "%lld", (long long)json_integer_value(v));
    return xstrdup(tmp);
  }
  return NULL;
}

int
cli_cmd_jobs(struct cli *cli, int argc, char **argv)
{
  static const char *const head[] = {"ID",     "NAME", "PROJECT",
                                     "STATE",  "SITE", "GPUS",
                                     "AGE/ELAPSED", "EXIT", "STARTS",
                                     "WHY WAITING"};
  struct cli_jobs o;
  struct cli_table t;
  struct cli_response r;
  struct buf path;
  struct err e = {0};
  json_t *page = NULL;
  json_t *merged = NULL;
  json_t *job;
  char *cursor = NULL;
  char *next = NULL;
  size_t i;
  int64_t now = time_now_ms();
  int status = CLI_EXIT_OK;

  cli_table_init(&t, head, 10);
  cli_table_set_right(&t, 0);
  cli_table_set_max(&t, 1, 24);
  cli_table_set_max(&t, 2, 16);
  cli_table_set_max(&t, 4, 16);
  cli_table_set_max(&t, 9, 60);
  cli_response_init(&r);
  buf_init(&path, 4096);
  if (!cli_parsed(cli_jobs_parse(argc, argv, &o, &e), cli_jobs_usage, &e,
              &status))
    goto out;
  /* --all with --json prints one object holding every page's jobs. */
  if (o.all && cli->json)
    merged = json_array();
  /* Without --limit, --all takes the largest pages: fewer round trips. */
  if (o.all && o.limit == 0)
    o.limit = 1000;
  for (;;) {
    buf_reset(&path);
    if (cli_jobs_path(&o, cursor, &path) < 0) {
      err_set(&e, ERR_INVALID, "request URL too long");
      status = cli_fail(&e);
      goto out;
    }
    if (cli_request(cli, "GET", buf_str(&path), NULL, &r, &page, &e) < 0) {
      status = cli_fail(&e);
      goto out;
    }
    if (cli->json && !o.all) {
      cli_print_raw(&r);
      goto out;
    }
    json_array_foreach(json_object_get(page, "jobs"), i, job) {
      if (merged != NULL)
        json_array_append(merged, job);
      else
        add_job_row(&t, job, now);
    }
    next = next_cursor(page);
    json_decref(page);
    page = NULL;
    if (!o.all || next == NULL)
      break;
    if (cursor != NULL && strcmp(cursor, next) == 0) {
      err_set(&e, ERR_INTERNAL, "tenbind repeated cursor '%s'", next);
      status = cli_fail(&e);
      goto out;
    }
    free(cursor);
    cursor = next;
    next = NULL;
  }
  if (merged != NULL) {
    json_t *all = json_pack("{s:O,s:n}", "jobs", merged, "next_cursor");
    char *text = jsonx_dump(all);

    puts(text);
    free(text);
    json_decref(all);
  } else if (cli_table_print(&t, stdout) < 0) {
    status = CLI_EXIT_FAIL;
  }
out:
  free(cursor);
  free(next);
  json_decref(page);
  json_decref(merged);
  buf_release(&path);
  cli_response_release(&r);
  cli_table_release(&t);
  return status;
}

/* One ID argument and its job path ("/v1/jobs/42" + suffix). */
static int
job_path(int argc, char **argv, const char *usage, const char *suffix,
         char *path, size_t pathlen, int *status)
{
  struct err e = {0};
  int64_t id;
  int first;

  if (!cli_parsed(cli_args_positional(argc, argv, 1, 1, &first, &e), usage, &e,
              status))
    return 0;
  if (cli_parse_job_id(argv[first], &id, &e) < 0) {
    *status = cli_usage_error(usage, &e);
    return 0;
  }
  snprintf(path, pathlen, "/v1/jobs/%lld%s", (long long)id, suffix);
  return 1;
}

/* The job's batch script, or NULL when it runs a command. */
static const char *
job_script(const json_t *job)
{
  const char *script = jsonx_str(json_object_get(job, "spec"), "script");

  return script != NULL ? script : jsonx_str(job, "script");
}

/*
 * The command line of a job's spec into out, or where its script is
 * shown; *label says which ("command" or "script"), NULL for neither.
 */
static int
job_command(const json_t *job, struct buf *out, const char **label)
{
  const json_t *spec = json_object_get(job, "spec");
  const json_t *argv = json_object_get(spec, "command");
  const char *script = job_script(job);
  size_t lines = 0;
  char text[64];

  *label = NULL;
  if (!json_is_array(argv))
    argv = json_object_get(job, "command");
  if (json_is_array(argv)) {
    *label = "command";
    return cli_fmt_argv(argv, out);
  }
  if (script == NULL)
    return 0;
  *label = "script";
  for (const char *p = script; *p != '\0'; p++)
    lines += *p == '\n' || p[1] == '\0';
  snprintf(text, sizeof(text), "%zu line%s, below", lines,
           lines == 1 ? "" : "s");
  return buf_adds(out, text);
}

/* A job's "cost" (from the ledger) as one line: what a rented site
 * billed, or an owned site's sunk and marginal cost; NULL without. */
static const char *
job_cost(const json_t *job, char *out, size_t len)
{
  const json_t *c = json_object_get(job, "cost");
  char billed[40], sunk[40], marginal[40];

  if (!json_is_object(c) ||
      (json_integer_value(json_object_get(c, "gpu_ms")) <= 0 &&
       json_integer_value(json_object_get(c, "billed_micro")) <= 0))
    return NULL;
  cli_fmt_micro_dollars(json_integer_value(json_object_get(c, "billed_micro")),
                        billed, sizeof(billed));
  cli_fmt_micro_dollars(json_integer_value(json_object_get(c, "sunk_micro")),
                        sunk, sizeof(sunk));
  cli_fmt_micro_dollars(
      json_integer_value(json_object_get(c, "marginal_micro")), marginal,
      sizeof(marginal));
  snprintf(out, len, "%.3f GPU-hours; $%s billed, $%s sunk, $%s marginal",
           (double)json_integer_value(json_object_get(c, "gpu_ms")) / 3.6e6,
           billed, sunk, marginal);
  return out;
}

static int
show_job(const json_t *job)
{
  char cost[256], starts[CLI_FMT_SIZE + 8];
  char id[32], gpus[CLI_FMT_SIZE], elapsed[CLI_FMT_SIZE];
  char created[CLI_FMT_TIME_SIZE], started[CLI_FMT_TIME_SIZE];
  char ended[CLI_FMT_TIME_SIZE], exit_code[32], sig[48];
  const json_t *spec = json_object_get(job, "spec");
  const json_t *v;
  const char *log = jsonx_str(job, "log_path");
  int64_t now = time_now_ms();
  int64_t from, to = now;
  const char *label;
  struct cli_table t;
  struct buf cmd;
  int rc;

  cli_table_init(&t, NULL, 2);
  buf_init(&cmd, CLI_MAX_RESPONSE);
  snprintf(id, sizeof(id), "%lld",
           (long long)json_integer_value(json_object_get(job, "id")));
  cli_fmt_gpus(json_integer_value(json_object_get(job, "gpus")),
               jsonx_str(job, "gpu_type"), gpus, sizeof(gpus));
  cli_table_add_kv(&t, "id", id);
  cli_table_add_kv(&t, "name", jsonx_str(job, "name"));
  cli_table_add_kv(&t, "project", jsonx_str(job, "project"));
  cli_table_add_kv(&t, "workload", jsonx_str(job, "workload"));
  cli_table_add_kv(&t, "dataset", jsonx_str(spec, "dataset"));
  cli_table_add_kv(&t, "state", jsonx_str(job, "state"));
  cli_table_add_kv(&t, "reason", jsonx_str(job, "reason"));
  cli_table_add_kv(&t, "starts", starts_in(job, now, starts,
                                           sizeof(starts)));
  cli_table_add_kv(&t, "held", jsonx_bool(job, "hold", 0) ? "yes" : NULL);
  cli_table_add_kv(&t, "site", jsonx_str(job, "site"));
  cli_table_add_kv(&t, "remote id", jsonx_str(job, "remote_id"));
  cli_table_add_kv(&t, "gpus", gpus);
  cli_table_add_kv(&t, "alloc", jsonx_str(job, "alloc"));
  cli_table_add_kv(&t, "created",
                   cli_fmt_iso_ago(jsonx_str(job, "created_at"), now,
                                   created, sizeof(created)));
  cli_table_add_kv(&t, "started",
                   cli_fmt_iso_ago(jsonx_str(job, "started_at"), now,
                                   started, sizeof(started)));
  cli_table_add_kv(&t, "ended",
                   cli_fmt_iso_ago(jsonx_str(job, "ended_at"), now,
                                   ended, sizeof(ended)));
  if (time_parse_iso(jsonx_str(job, "started_at"), &from) == 0) {
    if (time_parse_iso(jsonx_str(job, "ended_at"), &to) < 0)
      to = now;
    cli_fmt_duration(to > from ? (to - from) / 1000 : 0, elapsed,
                     sizeof(elapsed));
    cli_table_add_kv(&t, "elapsed", elapsed);
  }
  v = json_object_get(job, "exit_code");
  if (json_is_integer(v)) {
    snprintf(exit_code, sizeof(exit_code), "%lld",
             (long long)json_integer_value(v));
    cli_table_add_kv(&t, "exit code", exit_code);
  }
  v = json_object_get(job, "signal");
  if (json_is_integer(v) && json_integer_value(v) > 0) {
    const char *name = cli_signal_name(json_integer_value(v));

    snprintf(sig, sizeof(sig), "%lld%s%s%s", (long long)json_integer_value(v),
             name != NULL ? " (SIG" : "", name != NULL ? name : "",
             name != NULL ? ")" : "");
    cli_table_add_kv(&t, "signal", sig);
  }
  if (job_command(job, &cmd, &label) == 0 && label != NULL)
    cli_table_add_kv(&t, label, buf_str(&cmd));
  if (log == NULL)
    log = jsonx_str(spec, "output");
  cli_table_add_kv(&t, "log", log);
  cli_table_add_kv(&t, "cost", job_cost(job, cost, sizeof(cost)));
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  /* All of it: a script's first line is only its interpreter. */
  if (rc == CLI_EXIT_OK && label != NULL && strcmp(label, "script") == 0) {
    buf_reset(&cmd);
    if (cli_fmt_script(job_script(job), &cmd) < 0 ||
        printf("\n%s", buf_str(&cmd)) < 0)
      rc = CLI_EXIT_FAIL;
  }
  buf_release(&cmd);
  cli_table_release(&t);
  return rc;
}

int
cli_cmd_show(struct cli *cli, int argc, char **argv)
{
  char path[MAX_PATH_LEN];
  struct cli_response r;
  struct err e = {0};
  json_t *job = NULL;
  int status = CLI_EXIT_OK;

  if (!job_path(argc, argv, show_usage, "", path, sizeof(path), &status))
    return status;
  cli_response_init(&r);
  if (cli_request(cli, "GET", path, NULL, &r, &job, &e) < 0)
    status = cli_fail(&e);
  else if (cli->json)
    cli_print_raw(&r);
  else
    status = show_job(job);
  json_decref(job);
  cli_response_release(&r);
  return status;
}

int
cli_cmd_events(struct cli *cli, int argc, char **argv)
{
  static const char *const head[] = {"ID", "AT", "FROM", "TO", "DETAIL"};
  char path[MAX_PATH_LEN];
  char id[32];
  struct cli_response r;
  struct cli_table t;
  struct err e = {0};
  json_t *reply = NULL;
  json_t *ev;
  size_t i;
  int status = CLI_EXIT_OK;

  if (!job_path(argc, argv, events_usage, "/events", path, sizeof(path),
                &status))
    return status;
  cli_response_init(&r);
  cli_table_init(&t, head, 5);
  cli_table_set_right(&t, 0);
  if (cli_request(cli, "GET", path, NULL, &r, &reply, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  if (cli->json) {
    cli_print_raw(&r);
    goto out;
  }
  json_array_foreach(json_object_get(reply, "events"), i, ev) {
    const char *from = jsonx_str(ev, "from");
    char at[CLI_FMT_SIZE];
    const char *row[5];

    snprintf(id, sizeof(id), "%lld",
             (long long)json_integer_value(json_object_get(ev, "id")));
    row[0] = id;
    row[1] = cli_fmt_iso(jsonx_str(ev, "at"), at, sizeof(at));
    row[2] = from != NULL ? from : "-";
    row[3] = jsonx_str(ev, "to");
    row[4] = jsonx_str(ev, "detail");
    cli_table_add(&t, row);
  }
  if (cli_table_print(&t, stdout) < 0)
    status = CLI_EXIT_FAIL;
out:
  json_decref(reply);
  cli_table_release(&t);
  cli_response_release(&r);
  return status;
}

/* The job's state from GET /v1/jobs/ID, for a reply without X-Job-State. */
static int
fetch_state(struct cli *cli, int64_t id, char *out, size_t outlen,
            struct err *e)
{
  char path[MAX_PATH_LEN];
  struct cli_response r;
  json_t *job = NULL;
  int rc;

  snprintf(path, sizeof(path), "/v1/jobs/%lld", (long long)id);
  cli_response_init(&r);
  rc = cli_request(cli, "GET", path, NULL, &r, &job, e);
  if (rc == 0)
    snprintf(out, outlen, "%s",
             jsonx_str(job, "state") != NULL ? jsonx_str(job, "state") : "");
  json_decref(job);
  cli_response_release(&r);
  return rc;
}

int
cli_cmd_logs(struct cli *cli, int argc, char **argv)
{
  struct cli_logs o;
  struct cli_response r;
  struct err e = {0};
  char path[MAX_PATH_LEN];
  char state[32];
  int64_t offset = 0;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_logs_parse(argc, argv, &o, &e), cli_logs_usage, &e,
              &status))
    return status;
  cli_response_init(&r);
  for (;;) {
    int64_t next;
    int caught_up;

    snprintf(path, sizeof(path), "/v1/jobs/%lld/log?offset=%lld",
             (long long)o.id, (long long)offset);
    if (cli_client_call(&cli->client, "GET", path, NULL, NULL, &r, &e) < 0 ||
        cli_response_check(&r, &e) < 0) {
      status = cli_fail(&e);
      break;
    }
    if (r.body.len > 0 &&
        (fwrite(r.body.data, 1, r.body.len, stdout) != r.body.len ||
         fflush(stdout) != 0)) {
      status = CLI_EXIT_FAIL;
      break;
    }
    next = r.log_next >= 0 ? r.log_next : offset + (int64_t)r.body.len;
    caught_up = r.log_size >= 0 ? next >= r.log_size : r.body.len == 0;
    /* Without progress there is nothing more to read now. */
    if (next <= offset)
      caught_up = 1;
    offset = next;
    if (!caught_up)
      continue;
    if (!o.follow)
      break;
    snprintf(state, sizeof(state), "%s", r.job_state);
    if (state[0] == '\0' &&
        fetch_state(cli, o.id, state, sizeof(state), &e) < 0) {
      status = cli_fail(&e);
      break;
    }
    if (is_final_state(state))
      break;
    time_sleep_ms(FOLLOW_INTERVAL_MS);
  }
  cli_response_release(&r);
  return status;
}

/* POST /v1/jobs/ID/<action> for every ID; a failed one does not stop. */
static int
job_action(struct cli *cli, int argc, char **argv, const char *action,
           const char *usage)
{
  struct cli_response r;
  struct err e = {0};
  char path[MAX_PATH_LEN];
  int64_t *ids = NULL;
  int64_t id;
  int first;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_args_positional(argc, argv, 1, -1, &first, &e), usage,
                  &e, &status))
    return status;
  /* Every ID is checked before the first request is sent. */
  ids = xcalloc((size_t)argc, sizeof(*ids));
  for (int i = first; i < argc; i++) {
    if (cli_parse_job_id(argv[i], &ids[i], &e) < 0) {
      free(ids);
      return cli_usage_error(usage, &e);
    }
  }
  cli_response_init(&r);
  for (int i = first; i < argc; i++) {
    json_t *job = NULL;
    const char *state;

    id = ids[i];
    snprintf(path, sizeof(path), "/v1/jobs/%lld/%s", (long long)id, action);
    if (cli_request(cli, "POST", path, NULL, &r, &job, &e) < 0) {
      status = cli_fail(&e);
      continue;
    }
    state = jsonx_str(job, "state");
    if (cli->json)
      cli_print_raw(&r);
    else if (strcmp(action, "cancel") == 0 && state != NULL &&
             strcmp(state, "cancelled") != 0)
      printf("job %lld: cancel requested (%s)\n", (long long)id, state);
    else if (strcmp(action, "cancel") == 0)
      printf("job %lld cancelled\n", (long long)id);
    else
      printf("job %lld released (%s)\n", (long long)id,
             state != NULL ? state : "?");
    json_decref(job);
  }
  cli_response_release(&r);
  free(ids);
  return status;
}

int
cli_cmd_cancel(struct cli *cli, int argc, char **argv)
{
  return job_action(cli, argc, argv, "cancel", cancel_usage);
}

int
cli_cmd_release(struct cli *cli, int argc, char **argv)
{
  return job_action(cli, argc, argv, "release", release_usage);
}

/* ---- explain ---- */

static const char explain_usage[] =
    "usage: tenbin explain ID\n\n"
    "Why job ID is where it is, or still waits: its last placement\n"
    "decision, with every site's verdict, predicted start, run time,\n"
    "compute, data and waiting cost, total, and reason (the winner is\n"
    "marked *).  A decision is stored when it changes.\n";

/* Money of a candidate: "-" where not estimated. */
static const char *
cand_money(const json_t *c, const char *key, char *out)
{
  const json_t *v = json_object_get(c, key);

  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return "-";
  cli_fmt_cents(json_integer_value(v), out, 32);
  return out;
}

static int
print_placement(const json_t *p)
{
  int64_t now = time_now_ms();
  static const char *const head[] = {"",       "SITE",    "VERDICT",
                                     "START",  "RUNTIME", "COMPUTE $",
                                     "DATA $", "WAIT $",  "TOTAL $",
                                     "REASON"};
  struct cli_table t;
  const json_t *c;
  const char *decided;
  char at[CLI_FMT_SIZE];
  int64_t start;
  size_t i;
  int rc;

  cli_table_init(&t, head, 10);
  for (size_t k = 5; k < 9; k++)
    cli_table_set_right(&t, k);
  json_array_foreach(json_object_get(p, "candidates"), i, c) {
    char when[CLI_FMT_SIZE + 8], run[CLI_FMT_SIZE], m[4][32];
    const char *row[10];

    when[0] = run[0] = '\0';
    if (time_parse_iso(jsonx_str(c, "start"), &start) == 0 && start > now) {
      cli_fmt_duration((start - now) / 1000, run, sizeof(run));
      snprintf(when, sizeof(when), "in %s", run);
    } else if (jsonx_str(c, "start") != NULL) {
      snprintf(when, sizeof(when), "now");
    }
    run[0] = '\0';
    if (json_integer_value(json_object_get(c, "runtime_ms")) > 0)
      cli_fmt_duration(
          json_integer_value(json_object_get(c, "runtime_ms")) / 1000, run,
          sizeof(run));
    row[0] = jsonx_bool(c, "picked", 0) ? "*" : "";
    row[1] = jsonx_str(c, "site");
    row[2] = jsonx_str(c, "excluded") != NULL ? "excluded"
                                              : jsonx_str(c, "verdict");
    row[3] = when[0] ? when : "-";
    row[4] = run[0] ? run : "-";
    row[5] = cand_money(c, "compute_micro", m[0]);
    row[6] = cand_money(c, "data_micro", m[1]);
    row[7] = cand_money(c, "waiting_micro", m[2]);
    row[8] = cand_money(c, "total_micro", m[3]);
    row[9] = jsonx_str(c, "reason");
    cli_table_add(&t, row);
  }
  decided = cli_fmt_iso(jsonx_str(p, "at"), at, sizeof(at));
  printf("job %lld: %s%s%s (decided %s)\n",
         (long long)json_integer_value(json_object_get(p, "job")),
         jsonx_str(p, "verdict"), jsonx_str(p, "site") ? " at " : "",
         jsonx_str(p, "site") ? jsonx_str(p, "site") : "",
         decided != NULL ? decided : "-");
  if (jsonx_str(p, "reason") != NULL)
    printf("%s\n", jsonx_str(p, "reason"));
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  cli_table_release(&t);
  return rc;
}

int
cli_cmd_explain(struct cli *cli, int argc, char **argv)
{
  char path[64];
  int status = CLI_EXIT_OK;

  if (!job_path(argc, argv, explain_usage, "/placement", path, sizeof(path),
                &status))
    return status;
  return cli_show(cli, "GET", path, NULL, print_placement);
}
