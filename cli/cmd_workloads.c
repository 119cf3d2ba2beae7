/*
 * The workload catalog commands: 'workloads' lists the catalog,
 * 'workload add FILE.json' creates or replaces an entry (admin) and
 * 'workload show NAME' prints one.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/format.h"
#include "cli/table.h"
#include "util/jsonx.h"

/* A workload file is a small JSON object; scripts inside are capped at
 * 512 KiB and may grow sixfold when escaped. */
#define MAX_WORKLOAD_FILE ((size_t)4 << 20)

static const char workloads_usage[] =
    "usage: tenbin workloads\n\nList the workload catalog.\n";
static const char workload_usage[] =
    "usage: tenbin workload (add FILE.json | show NAME)\n"
    "\n"
    "  add FILE.json   create or replace a workload ('-' reads stdin)\n"
    "  show NAME       show one workload\n";

int
cli_cmd_workloads(struct cli *cli, int argc, char **argv)
{
  static const char *const head[] = {"NAME", "GPUS", "TIME", "DESCRIPTION"};
  struct cli_response r;
  struct cli_table t;
  struct err e = {0};
  json_t *reply = NULL;
  json_t *w;
  size_t i;
  int first;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_args_positional(argc, argv, 0, 0, &first, &e),
                  workloads_usage, &e, &status))
    return status;
  cli_response_init(&r);
  cli_table_init(&t, head, 4);
  cli_table_set_max(&t, 0, 32);
  cli_table_set_max(&t, 3, 60);
  if (cli_request(cli, "GET", "/v1/workloads", NULL, &r, &reply, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  if (cli->json) {
    cli_print_raw(&r);
    goto out;
  }
  json_array_foreach(json_object_get(reply, "workloads"), i, w) {
    char gpus[CLI_FMT_SIZE];
    char limit[CLI_FMT_SIZE];
    const char *row[4];

    cli_fmt_gpus(json_integer_value(json_object_get(w, "gpus")),
                 jsonx_str(w, "gpu_type"), gpus, sizeof(gpus));
    cli_fmt_time_limit(json_object_get(w, "time_limit"), limit,
                       sizeof(limit));
    row[0] = jsonx_str(w, "name");
    row[1] = gpus;
    row[2] = limit;
    row[3] = jsonx_str(w, "description");
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

static int
workload_add(struct cli *cli, const char *path)
{
  struct cli_response r;
  struct buf text;
  struct err e = {0};
  json_t *local = NULL;
  json_t *reply = NULL;
  const char *name;
  int status = CLI_EXIT_FAIL;

  cli_response_init(&r);
  buf_init(&text, MAX_WORKLOAD_FILE);
  if (cli_read_file(path, &text, &e) < 0) {
    cli_fail(&e);
    goto out;
  }
  /* A syntax error is reported with its line before any request. */
  if (jsonx_parse_object(buf_str(&text), text.len, &local, &e) < 0) {
    err_prefix(&e, "'%s'", path);
    cli_fail(&e);
    goto out;
  }
  if (cli_request(cli, "POST", "/v1/workloads", &text, &r, &reply, &e) < 0) {
    cli_fail(&e);
    goto out;
  }
  name = jsonx_str(reply, "name");
  if (name == NULL)
    name = jsonx_str(local, "name");
  if (cli->json)
    cli_print_raw(&r);
  else
    printf("%s workload %s\n", r.status == 201 ? "created" : "replaced",
           name != NULL ? name : "?");
  status = CLI_EXIT_OK;
out:
  json_decref(local);
  json_decref(reply);
  buf_release(&text);
  cli_response_release(&r);
  return status;
}

/* "K=V, K=V" of an env object. */
static int
fmt_env(const json_t *env, struct buf *out)
{
  const char *k;
  json_t *v;
  int rc = 0;

  json_object_foreach((json_t *)env, k, v) {
    if (rc == 0 && out->len > 0)
      rc = buf_adds(out, ", ");
    if (rc == 0)
      rc = buf_addf(out, "%s=%s", k,
                    json_is_string(v) ? json_string_value(v) : "");
  }
  return rc;
}

static int
show_workload(const json_t *w)
{
  char gpus[CLI_FMT_SIZE];
  char limit[CLI_FMT_SIZE];
  char nodes[32];
  struct cli_table t;
  struct buf cmd;
  struct buf env;
  const json_t *v;
  const char *k;
  json_t *p;
  int status;

  cli_table_init(&t, NULL, 2);
  buf_init(&cmd, CLI_MAX_RESPONSE);
  buf_init(&env, CLI_MAX_RESPONSE);
  cli_fmt_gpus(json_integer_value(json_object_get(w, "gpus")),
               jsonx_str(w, "gpu_type"), gpus, sizeof(gpus));
  cli_fmt_time_limit(json_object_get(w, "time_limit"), limit, sizeof(limit));
  cli_table_add_kv(&t, "name", jsonx_str(w, "name"));
  cli_table_add_kv(&t, "description", jsonx_str(w, "description"));
  cli_table_add_kv(&t, "project", jsonx_str(w, "project"));
  cli_table_add_kv(&t, "gpus", gpus);
  v = json_object_get(w, "nodes");
  if (json_is_integer(v)) {
    snprintf(nodes, sizeof(nodes), "%lld", (long long)json_integer_value(v));
    cli_table_add_kv(&t, "nodes", nodes);
  }
  cli_table_add_kv(&t, "time limit", limit);
  cli_table_add_kv(&t, "dataset", jsonx_str(w, "dataset"));
  v = json_object_get(w, "command");
  if (json_is_array(v) && cli_fmt_argv(v, &cmd) == 0)
    cli_table_add_kv(&t, "command", buf_str(&cmd));
  else if (jsonx_str(w, "script") != NULL &&
           buf_add(&cmd, jsonx_str(w, "script"),
                   strcspn(jsonx_str(w, "script"), "\n")) == 0)
    cli_table_add_kv(&t, "script", buf_str(&cmd));
  v = json_object_get(w, "env");
  if (json_object_size(v) > 0 && fmt_env(v, &env) == 0)
    cli_table_add_kv(&t, "env", buf_str(&env));
  json_object_foreach(json_object_get(w, "params"), k, p) {
    char key[96];
    struct buf line;
    const char *dflt = jsonx_str(p, "default");
    const char *desc = jsonx_str(p, "description");
    int rc;

    buf_init(&line, CLI_MAX_RESPONSE);
    snprintf(key, sizeof(key), "param %s", k);
    if (jsonx_bool(p, "required", 0))
      rc = buf_adds(&line, "required");
    else if (dflt != NULL)
      rc = buf_addf(&line, "default %s", dflt);
    else
      rc = buf_adds(&line, "optional");
    if (rc == 0 && desc != NULL)
      rc = buf_addf(&line, "; %s", desc);
    if (rc == 0)
      cli_table_add_kv(&t, key, buf_str(&line));
    buf_release(&line);
  }
  status = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  buf_release(&env);
  buf_release(&cmd);
  cli_table_release(&t);
  return status;
}

static int
workload_show(struct cli *cli, const char *name)
{
  struct cli_response r;
  struct buf path;
  struct err e = {0};
  json_t *w = NULL;
  int status = CLI_EXIT_OK;

  cli_response_init(&r);
  buf_init(&path, 4096);
  if (cli_url_add_segment(&path, "/v1/workloads/", name) < 0) {
    err_set(&e, ERR_INVALID, "workload name too long");
    status = cli_fail(&e);
  } else if (cli_request(cli, "GET", buf_str(&path), NULL, &r, &w, &e) < 0) {
    status = cli_fail(&e);
  } else if (cli->json) {
    cli_print_raw(&r);
  } else {
    status = show_workload(w);
  }
  json_decref(w);
  buf_release(&path);
  cli_response_release(&r);
  return status;
}

int
cli_cmd_workload(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  int status = CLI_EXIT_OK;
  int first;
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub == NULL) {
    err_set(&e, ERR_INVALID, "a subcommand is needed (add or show)");
    return cli_usage_error(workload_usage, &e);
  }
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
    fputs(workload_usage, stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(sub, "add") != 0 && strcmp(sub, "show") != 0) {
    err_set(&e, ERR_INVALID, "unknown subcommand '%s'", sub);
    return cli_usage_error(workload_usage, &e);
  }
  if (!cli_parsed(cli_args_positional(argc - 1, argv + 1, 1, 1, &first, &e),
                  workload_usage, &e, &status))
    return status;
  if (strcmp(sub, "add") == 0)
    return workload_add(cli, argv[1 + first]);
  return workload_show(cli, argv[1 + first]);
}
