/*
 * Tests of the workload catalog (broker/catalog.c): validation of workload
 * definitions, and the expansion of a submission that names a workload
 * into a plain job body (params, defaults, overrides, literal braces and
 * how script parameters travel in the environment, never in the text).
 *
 * Each test runs a real broker (real SQLite file in a temporary directory,
 * the real local site with no GPUs) but submits at most held jobs, so
 * nothing runs.  Expanded scripts are only inspected as text.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters/local.h"
#include "broker/broker.h"
#include "broker/broker_internal.h"
#include "util/alloc.h"

#define GUARD_NS (60ull * 1000 * 1000 * 1000)

struct fx {
  uv_loop_t loop;
  char dir[64];
  char db_path[128];
  char self[PATH_MAX];
  struct broker *b;
  int closed;
};

static const struct principal admin = {
    .role = ROLE_ADMIN, .token_id = 0, .projects = NULL, .name = "anonymous"};

/* ---- fixture ---- */

static json_t *
parse(const char *text)
{
  json_error_t jerr;
  json_t *v = json_loads(text, 0, &jerr);

  if (v == NULL)
    fail_msg("test JSON '%s': %s", text, jerr.text);
  return v;
}

static int
open_broker(struct fx *f, const char *workloads, struct err *e)
{
  json_t *sites = parse("[{\"name\": \"local\", \"kind\": \"local\", "
                        "\"gpus\": {}}]");
  json_t *wl = workloads != NULL ? parse(workloads) : NULL;
  struct broker_config cfg = {
      .state_dir = f->dir,
      .db_path = f->db_path,
      .self_exe = f->self,
      .placement = "first-fit",
      .sites = sites,
      .workloads = wl,
      .projects = NULL,
      .tick_ms = 50,
  };
  int rc = broker_new(&f->loop, &cfg, &f->b, e);

  json_decref(sites);
  json_decref(wl);
  return rc;
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));
  struct err e = {0};
  ssize_t n;

  assert_int_equal(uv_loop_init(&f->loop), 0);
  snprintf(f->dir, sizeof(f->dir), "/tmp/tenbin-catalog-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->db_path, sizeof(f->db_path), "%s/tenbin.db", f->dir);
  n = readlink("/proc/self/exe", f->self, sizeof(f->self) - 1);
  assert_true(n > 0);
  f->self[n] = '\0';
  if (open_broker(f, NULL, &e) < 0)
    fail_msg("broker_new: %s", e.msg);
  *state = f;
  return 0;
}

static void
on_closed(void *arg)
{
  struct fx *f = arg;

  f->closed = 1;
}

static void
close_broker(struct fx *f)
{
  uint64_t deadline = uv_hrtime() + GUARD_NS;

  if (f->b == NULL)
    return;
  f->closed = 0;
  broker_close(f->b, on_closed, f);
  f->b = NULL;
  while (!f->closed && uv_hrtime() < deadline)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(f->closed);
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

  close_broker(f);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

/* ---- helpers ---- */

static int
put(struct fx *f, const char *def_text, struct err *e)
{
  json_t *def = parse(def_text);
  int created = -1;
  int rc = broker_workload_put(f->b, def, &created, e);

  json_decref(def);
  return rc;
}

static void
put_ok(struct fx *f, const char *def_text)
{
  struct err e = {0};

  if (put(f, def_text, &e) < 0)
    fail_msg("workload '%s' refused: %s", def_text, e.msg);
}

/* The job body a submission expands to (new reference). */
static json_t *
expand_ok(struct fx *f, const char *body_text)
{
  json_t *body = parse(body_text);
  json_t *job = NULL;
  struct err e = {0};

  if (broker__workload_expand(f->b, body, &job, &e) < 0)
    fail_msg("'%s' did not expand: %s", body_text, e.msg);
  json_decref(body);
  assert_non_null(job);
  return job;
}

static int
expand_fails(struct fx *f, const char *body_text, struct err *e)
{
  json_t *body = parse(body_text);
  json_t *job = NULL;
  int rc = broker__workload_expand(f->b, body, &job, e);

  json_decref(body);
  if (rc == 0)
    json_decref(job);
  assert_true(rc < 0);
  assert_null(job);
  return rc;
}

static const char *
str_at(const json_t *job, const char *key)
{
  const char *s = json_string_value(json_object_get(job, key));

  if (s == NULL)
    fail_msg("expanded job has no string '%s'", key);
  return s;
}

static const char *
arg_at(const json_t *job, size_t i)
{
  const char *s =
      json_string_value(json_array_get(json_object_get(job, "command"), i));

  if (s == NULL)
    fail_msg("expanded job has no command[%zu]", i);
  return s;
}


/* ---- validation ---- */

static void
test_workload_validation_errors_name_the_field(void **state)
{
  static const struct {
    const char *def;
    const char *what;
  } cases[] = {
      {"{\"command\": [\"true\"]}", "'name'"},
      {"{\"name\": \"-w\", \"command\": [\"true\"]}", "'name'"},
      {"{\"name\": \"w\", \"params\": {\"1x\": {}}, \"command\": "
       "[\"true\"]}",
       "'params.1x'"},
      {"{\"name\": \"w\", \"params\": {\"a-b\": {}}, \"command\": "
       "[\"true\"]}",
       "'params.a-b'"},
      {"{\"name\": \"w\", \"params\": {\"x\": {\"default\": 1}}, "
       "\"command\": [\"true\"]}",
       "'params.x.default'"},
      {"{\"name\": \"w\", \"params\": {\"x\": {\"defualt\": \"1\"}}, "
       "\"command\": [\"true\"]}",
       "'params.x.defualt'"},
      {"{\"name\": \"w\", \"command\": [\"echo\", \"{who}\"]}", "'{who}'"},
      {"{\"name\": \"w\", \"command\": [\"echo\", \"{who}\"]}",
       "'command[1]'"},
      {"{\"name\": \"w\", \"script\": \"#!/bin/sh\\necho {who}\\n\"}",
       "'script'"},
      {"{\"name\": \"w\", \"env\": {\"A\": \"{who}\"}, \"command\": "
       "[\"true\"]}",
       "'env.A'"},
      {"{\"name\": \"w\", \"command\": [\"true\"], \"script\": "
       "\"#!/bin/sh\\ntrue\\n\"}",
       "'command' and 'script'"},
      {"{\"name\": \"w\", \"command\": [\"true\"], \"colour\": \"red\"}",
       "'colour'"},
      {"{\"name\": \"w\", \"command\": [\"true\"], \"gpus\": \"two\"}",
       "'gpus'"},
      {"{\"name\": \"w\", \"command\": [\"true\"], \"gpus\": -1}", "'gpus'"},
      {"{\"name\": \"w\"}", "'command'"},
  };
  struct fx *f = *state;

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct err e = {0};

    if (put(f, cases[i].def, &e) != ERR_INVALID)
      fail_msg("workload '%s' was not refused as invalid", cases[i].def);
    if (strstr(e.msg, cases[i].what) == NULL)
      fail_msg("'%s': '%s' does not name %s", cases[i].def, e.msg,
               cases[i].what);
  }
}

static void
test_valid_workload_is_stored_created_then_replaced(void **state)
{
  struct fx *f = *state;
  json_t *def = parse("{\"name\": \"hello\", \"description\": \"says hi\", "
                      "\"params\": {\"who\": {\"default\": \"world\"}}, "
                      "\"command\": [\"echo\", \"{who}\"]}");
  struct err e = {0};
  struct workload_view w;
  json_t *back;
  int created = -1;

  workload_view_init(&w);
  assert_int_equal(broker_workload_put(f->b, def, &created, &e), 0);
  assert_int_equal(created, 1);
  assert_int_equal(broker_workload_put(f->b, def, &created, &e), 0);
  assert_int_equal(created, 0);
  assert_int_equal(broker_workload_get(f->b, "hello", &w, &e), 0);
  back = parse(w.definition);
  assert_true(json_equal(back, def));
  json_decref(back);
  workload_view_release(&w);
  assert_int_equal(broker_workload_get(f->b, "nope", &w, &e),
                   ERR_NOT_FOUND);
  json_decref(def);
}

static void
test_config_workloads_are_loaded_and_a_bad_one_is_named(void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  struct workload_view w;

  workload_view_init(&w);
  close_broker(f);
  assert_int_equal(open_broker(f,
                               "[{\"name\": \"cfgw\", \"command\": "
                               "[\"true\"]}]",
                               &e),
                   0);
  assert_int_equal(broker_workload_get(f->b, "cfgw", &w, &e), 0);
  workload_view_release(&w);
  close_broker(f);
  assert_int_equal(open_broker(f,
                               "[{\"name\": \"ok\", \"command\": [\"true\"]}, "
                               "{\"name\": \"bad\", \"colour\": 1}]",
                               &e),
                   ERR_CONFIG);
  assert_null(f->b);
  assert_non_null(strstr(e.msg, "workloads[1]"));
  assert_non_null(strstr(e.msg, "'colour'"));
  /* Leave a broker for teardown. */
  assert_int_equal(open_broker(f, NULL, &e), 0);
}

/* ---- expansion ---- */

#define TRAIN                                                               \
  "{\"name\": \"train\", \"project\": \"alpha\", \"params\": {"            \
  "\"model\": {\"required\": true}, \"epochs\": {\"default\": \"3\"}, "    \
  "\"tag\": {}}, \"command\": [\"python\", \"train.py\", "                 \
  "\"--model={model}\", \"--epochs={epochs}\", \"--tag={tag}\"], "         \
  "\"env\": {\"MODEL\": \"{model}\"}, \"gpus\": 0, \"time_limit\": 60}"

static void
test_expansion_fills_params_and_defaults(void **state)
{
  struct fx *f = *state;
  json_t *job;

  put_ok(f, TRAIN);
  job = expand_ok(f, "{\"workload\": \"train\", \"params\": {\"model\": "
                     "\"llama\"}}");
  assert_string_equal(arg_at(job, 0), "python");
  assert_string_equal(arg_at(job, 2), "--model=llama");
  assert_string_equal(arg_at(job, 3), "--epochs=3");
  /* Declared, not required, no default: empty. */
  assert_string_equal(arg_at(job, 4), "--tag=");
  assert_string_equal(
      json_string_value(
          json_object_get(json_object_get(job, "env"), "MODEL")),
      "llama");
  assert_string_equal(str_at(job, "project"), "alpha");
  assert_string_equal(str_at(job, "workload"), "train");
  /* The job is named after the workload unless the request names it. */
  assert_string_equal(str_at(job, "name"), "train");
  assert_int_equal(json_integer_value(json_object_get(job, "time_limit")),
                   60);
  assert_null(json_object_get(job, "params"));
  json_decref(job);

  job = expand_ok(f, "{\"workload\": \"train\", \"params\": {\"model\": "
                     "\"m\", \"epochs\": \"10\", \"tag\": \"t1\"}}");
  assert_string_equal(arg_at(job, 3), "--epochs=10");
  assert_string_equal(arg_at(job, 4), "--tag=t1");
  json_decref(job);
}

static void
test_required_param_missing_is_an_error_naming_it(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  put_ok(f, TRAIN);
  assert_int_equal(expand_fails(f, "{\"workload\": \"train\"}", &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params.model'"));
  assert_non_null(strstr(e.msg, "'train'"));
  assert_int_equal(expand_fails(f, "{\"workload\": \"train\", \"params\": "
                                   "{\"epochs\": \"1\"}}",
                                &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params.model'"));
}

static void
test_unknown_param_is_an_error_naming_it(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  put_ok(f, TRAIN);
  assert_int_equal(expand_fails(f, "{\"workload\": \"train\", \"params\": "
                                   "{\"model\": \"m\", \"lr\": \"1\"}}",
                                &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params.lr'"));
  assert_int_equal(expand_fails(f, "{\"workload\": \"train\", \"params\": "
                                   "[\"m\"]}",
                                &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params'"));
}

static void
test_unknown_workload_is_unprocessable_naming_it(void **state)
{
  struct fx *f = *state;
  struct err e = {0};

  assert_int_equal(expand_fails(f, "{\"workload\": \"ghost\"}", &e),
                   ERR_UNPROCESSABLE);
  assert_non_null(strstr(e.msg, "'ghost'"));
  assert_int_equal(expand_fails(f, "{\"workload\": 7}", &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'workload'"));
}

static void
test_request_fields_override_template_fields(void **state)
{
  struct fx *f = *state;
  json_t *job;

  put_ok(f, TRAIN);
  job = expand_ok(f, "{\"workload\": \"train\", \"params\": {\"model\": "
                     "\"m\"}, \"name\": \"mine\", \"project\": \"beta\", "
                     "\"gpus\": 2, \"time_limit\": \"0:30:00\", "
                     "\"hold\": true}");
  assert_string_equal(str_at(job, "name"), "mine");
  assert_string_equal(str_at(job, "project"), "beta");
  assert_int_equal(json_integer_value(json_object_get(job, "gpus")), 2);
  assert_string_equal(str_at(job, "time_limit"), "0:30:00");
  assert_true(json_is_true(json_object_get(job, "hold")));
  /* What the request did not name still comes from the template. */
  assert_string_equal(arg_at(job, 2), "--model=m");
  json_decref(job);
}

static void
test_request_command_replaces_template_script_and_vice_versa(void **state)
{
  struct fx *f = *state;
  json_t *job;

  put_ok(f, "{\"name\": \"s\", \"script\": \"#!/bin/sh\\necho hi\\n\"}");
  job = expand_ok(f, "{\"workload\": \"s\", \"command\": [\"true\"]}");
  assert_null(json_object_get(job, "script"));
  assert_string_equal(arg_at(job, 0), "true");
  json_decref(job);

  put_ok(f, "{\"name\": \"c\", \"command\": [\"echo\", \"hi\"]}");
  job = expand_ok(f, "{\"workload\": \"c\", \"script\": "
                     "\"#!/bin/sh\\ntrue\\n\"}");
  assert_null(json_object_get(job, "command"));
  assert_string_equal(str_at(job, "script"), "#!/bin/sh\ntrue\n");
  json_decref(job);
}

static void
test_numbers_and_booleans_are_param_values(void **state)
{
  struct fx *f = *state;
  json_t *job;
  struct err e = {0};

  put_ok(f, "{\"name\": \"n\", \"params\": {\"i\": {}, \"r\": {}, "
            "\"t\": {}, \"f\": {}}, \"command\": [\"run\", \"{i}\", "
            "\"{r}\", \"{t}\", \"{f}\"]}");
  job = expand_ok(f, "{\"workload\": \"n\", \"params\": {\"i\": -42, "
                     "\"r\": 2.5, \"t\": true, \"f\": false}}");
  assert_string_equal(arg_at(job, 1), "-42");
  assert_string_equal(arg_at(job, 2), "2.5");
  assert_string_equal(arg_at(job, 3), "true");
  assert_string_equal(arg_at(job, 4), "false");
  json_decref(job);
  /* Arrays and objects are not values. */
  assert_int_equal(expand_fails(f, "{\"workload\": \"n\", \"params\": "
                                   "{\"i\": [1]}}",
                                &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params.i'"));
  assert_int_equal(expand_fails(f, "{\"workload\": \"n\", \"params\": "
                                   "{\"i\": {\"a\": 1}}}",
                                &e),
                   ERR_INVALID);
}

/*
 * BUG (broker/catalog.c, param_values(), line 368): a real is written with
 * "%.17g", so {"lr": 0.1} becomes "0.10000000000000001" on the command
 * line.  The shortest text that reads back as the same double ("%.15g",
 * then "%.16g", then "%.17g", whichever round-trips first) gives "0.1".
 */
static void
test_real_param_value_is_written_in_its_shortest_form(void **state)
{
  struct fx *f = *state;
  json_t *job;
  char arg[64];

  put_ok(f, "{\"name\": \"lr\", \"params\": {\"lr\": {}}, \"command\": "
            "[\"train\", \"--lr={lr}\"]}");
  job = expand_ok(f, "{\"workload\": \"lr\", \"params\": {\"lr\": 0.1}}");
  snprintf(arg, sizeof(arg), "%s", arg_at(job, 1));
  json_decref(job);
  assert_string_equal(arg, "--lr=0.1");
}

static void
test_double_braces_are_literal_braces(void **state)
{
  struct fx *f = *state;
  json_t *job;

  put_ok(f, "{\"name\": \"b\", \"params\": {\"x\": {\"default\": \"v\"}}, "
            "\"command\": [\"echo\", \"{{x}}\", \"{{{x}}}\", \"a}}b\", "
            "\"{{\", \"}}\"]}");
  job = expand_ok(f, "{\"workload\": \"b\"}");
  assert_string_equal(arg_at(job, 1), "{x}");
  assert_string_equal(arg_at(job, 2), "{v}");
  assert_string_equal(arg_at(job, 3), "a}b");
  assert_string_equal(arg_at(job, 4), "{");
  assert_string_equal(arg_at(job, 5), "}");
  json_decref(job);
}

static void
test_braces_that_are_not_placeholders_are_left_alone(void **state)
{
  struct fx *f = *state;
  json_t *job;

  put_ok(f, "{\"name\": \"k\", \"params\": {\"x\": {\"default\": \"v\"}}, "
            "\"command\": [\"sh\", \"-c\", \"echo {a,b} {} { x } "
            "{1x} {x\"], "
            "\"env\": {\"J\": \"{\\\"k\\\": [1]}\"}}");
  job = expand_ok(f, "{\"workload\": \"k\"}");
  assert_string_equal(arg_at(job, 2), "echo {a,b} {} { x } {1x} {x");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(job, "env"), "J")),
      "{\"k\": [1]}");
  json_decref(job);
}

/* "${HOME}" is shell text even though HOME would be a valid name. */
static void
test_shell_variable_braces_are_left_alone(void **state)
{
  struct fx *f = *state;
  json_t *job;
  struct err e = {0};

  if (put(f, "{\"name\": \"h\", \"params\": {\"x\": {\"default\": \"v\"}}, "
             "\"script\": \"#!/bin/sh\\necho ${HOME} {x}\\n\"}",
          &e) < 0)
    fail_msg("a script with ${HOME} was refused: %s", e.msg);
  job = expand_ok(f, "{\"workload\": \"h\"}");
  assert_string_equal(str_at(job, "script"),
                      "#!/bin/sh\necho ${HOME} ${TENBIN_PARAM_x}\n");
  json_decref(job);
}

static void
test_command_params_are_inserted_verbatim_and_not_re_expanded(void **state)
{
  struct fx *f = *state;
  json_t *job;

  put_ok(f, "{\"name\": \"v\", \"params\": {\"msg\": {}, \"other\": "
            "{\"default\": \"no\"}}, \"command\": [\"echo\", \"{msg}\"]}");
  job = expand_ok(f, "{\"workload\": \"v\", \"params\": {\"msg\": "
                     "\"'; rm -rf / #\"}}");
  /* argv goes to exec, not to a shell: no quoting, no change. */
  assert_string_equal(arg_at(job, 1), "'; rm -rf / #");
  json_decref(job);
  job = expand_ok(f, "{\"workload\": \"v\", \"params\": {\"msg\": "
                     "\"{other} {{\"}}");
  assert_string_equal(arg_at(job, 1), "{other} {{");
  json_decref(job);
}

/* The value of a parameter as the job's environment will carry it. */
static const char *
param_env(const json_t *job, const char *name)
{
  char var[96];

  snprintf(var, sizeof(var), "TENBIN_PARAM_%s", name);
  return json_string_value(json_object_get(json_object_get(job, "env"), var));
}

/*
 * A script never receives a value as text, so no value can change what
 * the shell parses: the script is the same whatever the value, and the
 * value arrives intact in the environment.
 */
static void
test_script_values_never_appear_in_the_script_text(void **state)
{
  static const char *const values[] = {
      "'; rm -rf / #", "$(touch pwned)", "`touch pwned`", "a b  c",
      "\\",            "\"",             "''",            "",
      "line1\nline2",  "${HOME}",        "*",             "x'y'z",
      "{msg}",         "-n",
  };
  struct fx *f = *state;
  json_t *job;

  put_ok(f, "{\"name\": \"q\", \"params\": {\"msg\": {}}, \"script\": "
            "\"#!/bin/sh\\necho \\\"{msg}\\\"\\n\"}");
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    json_t *body = json_pack("{s:s, s:{s:s}}", "workload", "q", "params",
                             "msg", values[i]);
    struct err e = {0};

    assert_int_equal(broker__workload_expand(f->b, body, &job, &e), 0);
    assert_string_equal(str_at(job, "script"),
                        "#!/bin/sh\necho \"${TENBIN_PARAM_msg}\"\n");
    assert_non_null(param_env(job, "msg"));
    assert_string_equal(param_env(job, "msg"), values[i]);
    json_decref(job);
    json_decref(body);
  }
}

/*
 * Whatever quoting context the template puts a placeholder in ('...',
 * "...", ${...}), the value cannot break out: the script text holds only
 * a variable reference, whose expansion the shell never parses again.
 */
static void
test_placeholders_in_quoted_contexts_cannot_break_out(void **state)
{
  static const struct {
    const char *script;
    const char *value;
    const char *expanded;
  } cases[] = {
      {"#!/bin/sh\\necho '{msg}'\\n", "; id #",
       "#!/bin/sh\necho '${TENBIN_PARAM_msg}'\n"},
      {"#!/bin/sh\\necho \\\"{msg}\\\"\\n", "$(id)",
       "#!/bin/sh\necho \"${TENBIN_PARAM_msg}\"\n"},
      {"#!/bin/sh\\necho ${msg}\\n", "\\'; id #",
       "#!/bin/sh\necho ${msg}\n"},
  };
  struct fx *f = *state;

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char def[256];
    char name[16];
    json_t *body;
    json_t *job = NULL;
    struct err e = {0};

    snprintf(name, sizeof(name), "qc%zu", i);
    snprintf(def, sizeof(def),
             "{\"name\": \"%s\", \"params\": {\"msg\": {}}, "
             "\"script\": \"%s\"}",
             name, cases[i].script);
    if (put(f, def, &e) < 0)
      fail_msg("case %zu refused: %s", i, e.msg);
    body = json_pack("{s:s, s:{s:s}}", "workload", name, "params", "msg",
                     cases[i].value);
    assert_int_equal(broker__workload_expand(f->b, body, &job, &e), 0);
    assert_string_equal(str_at(job, "script"), cases[i].expanded);
    assert_null(strstr(str_at(job, "script"), cases[i].value));
    json_decref(job);
    json_decref(body);
  }
}

/* ---- through broker_submit ---- */

struct answer {
  int called;
  int rc;
  int64_t id;
};

static void
on_submitted(void *arg, int rc, const struct job_view *job,
             char *const *warnings, int replayed, const struct err *e)
{
  struct answer *a = arg;

  (void)warnings;
  (void)replayed;
  (void)e;
  a->called++;
  a->rc = rc;
  a->id = job != NULL ? job->id : -1;
}

static void
test_submit_with_a_workload_stores_the_expanded_job(void **state)
{
  struct fx *f = *state;
  json_t *body;
  json_t *spec;
  struct answer a = {0};
  struct job_view j;
  struct err e = {0};
  uint64_t deadline = uv_hrtime() + GUARD_NS;

  put_ok(f, TRAIN);
  body = parse("{\"workload\": \"train\", \"params\": {\"model\": "
               "\"llama\"}, \"hold\": true}");
  assert_int_equal(broker_submit(f->b, &admin, body, NULL, NULL,
                                 on_submitted, &a, &e),
                   0);
  json_decref(body);
  while (a.called == 0 && uv_hrtime() < deadline)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(a.called, 1);
  assert_int_equal(a.rc, 0);
  job_view_init(&j);
  assert_int_equal(broker_job_get(f->b, &admin, a.id, &j, &e), 0);
  assert_string_equal(j.workload, "train");
  assert_string_equal(j.project, "alpha");
  assert_string_equal(j.name, "train");
  assert_int_equal(j.hold, 1);
  spec = parse(j.spec_json);
  assert_string_equal(
      json_string_value(json_array_get(json_object_get(spec, "command"), 2)),
      "--model=llama");
  json_decref(spec);
  job_view_release(&j);

  /* A bad expansion is answered at once, and the callback never runs. */
  body = parse("{\"workload\": \"train\"}");
  assert_int_equal(broker_submit(f->b, &admin, body, NULL, NULL,
                                 on_submitted, &a, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params.model'"));
  json_decref(body);
  /* params without a workload is refused naming it. */
  body = parse("{\"command\": [\"true\"], \"params\": {\"x\": 1}}");
  assert_int_equal(broker_submit(f->b, &admin, body, NULL, NULL,
                                 on_submitted, &a, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'params'"));
  json_decref(body);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(a.called, 1);
}

int
main(int argc, char **argv)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_workload_validation_errors_name_the_field),
      T(test_valid_workload_is_stored_created_then_replaced),
      T(test_config_workloads_are_loaded_and_a_bad_one_is_named),
      T(test_expansion_fills_params_and_defaults),
      T(test_required_param_missing_is_an_error_naming_it),
      T(test_unknown_param_is_an_error_naming_it),
      T(test_unknown_workload_is_unprocessable_naming_it),
      T(test_request_fields_override_template_fields),
      T(test_request_command_replaces_template_script_and_vice_versa),
      T(test_numbers_and_booleans_are_param_values),
      T(test_real_param_value_is_written_in_its_shortest_form),
      T(test_double_braces_are_literal_braces),
      T(test_braces_that_are_not_placeholders_are_left_alone),
      T(test_shell_variable_braces_are_left_alone),
      T(test_command_params_are_inserted_verbatim_and_not_re_expanded),
      T(test_script_values_never_appear_in_the_script_text),
      T(test_placeholders_in_quoted_contexts_cannot_break_out),
      T(test_submit_with_a_workload_stores_the_expanded_job),
  };
#undef T

  /* The local site's shim is this binary, as it is tenbind in
   * production (no job runs here, but the site needs the path). */
  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
