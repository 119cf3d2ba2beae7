/*
 * Unit tests of the tenbin CLI's network-free parts: argv -> request
 * JSON for submit, sbatch and the dataset commands, the other commands'
 * option checks, URL building, table rendering and the human formatting
 * of times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/args.h"
#include "cli/complete.h"
#include "cli/format.h"
#include "cli/table.h"
#include "spec/jobspec.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

/* Parse submit argv (NULL-terminated) into s; returns the parser's rc. */
static int
submit(char **argv, int argc, struct cli_submit *s, struct err *e)
{
  cli_submit_init(s);
  return cli_submit_parse(argc, argv, s, e);
}

static void
assert_json_str(const json_t *obj, const char *key, const char *want)
{
  const json_t *v = json_object_get(obj, key);

  assert_non_null(v);
  assert_true(json_is_string(v));
  assert_string_equal(json_string_value(v), want);
}

static void
assert_json_int(const json_t *obj, const char *key, json_int_t want)
{
  const json_t *v = json_object_get(obj, key);

  assert_non_null(v);
  assert_true(json_is_integer(v));
  assert_int_equal(json_integer_value(v), want);
}

/* ---- submit ---- */

static void
test_submit_sets_every_flag_in_the_body(void **state)
{
  char *argv[] = {"submit",
                  "--name", "train",
                  "--project", "research",
                  "--gpus", "8",
                  "--gpu-type", "h100",
                  "--nodes", "2",
                  "--gpus-per-node", "4",
                  "--time", "1-02:00:00",
                  "--site", "onprem",
                  "--env", "A=1",
                  "--chdir", "/work",
                  "--output", "out-%j.log",
                  "--error", "err-%j.log",
                  "--hold",
                  "--idempotency-key", "key-1",
                  "--workload", "tmpl",
                  "--param", "k=v",
                  "--", "python", "train.py",
                  NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), 0);
  assert_json_str(s.body, "name", "train");
  assert_json_str(s.body, "project", "research");
  assert_json_int(s.body, "gpus", 8);
  assert_json_str(s.body, "gpu_type", "h100");
  assert_json_int(s.body, "nodes", 2);
  assert_json_int(s.body, "gpus_per_node", 4);
  assert_json_str(s.body, "time_limit", "1-02:00:00");
  assert_json_str(s.body, "site", "onprem");
  assert_json_str(json_object_get(s.body, "env"), "A", "1");
  assert_json_str(s.body, "chdir", "/work");
  assert_json_str(s.body, "output", "out-%j.log");
  assert_json_str(s.body, "error", "err-%j.log");
  assert_true(json_is_true(json_object_get(s.body, "hold")));
  assert_string_equal(s.idempotency_key, "key-1");
  assert_int_equal(json_array_size(json_object_get(s.body, "command")), 2);
  assert_json_str(s.body, "workload", "tmpl");
  assert_json_str(json_object_get(s.body, "params"), "k", "v");
  /* Nothing the user did not ask for is sent. */
  assert_int_equal(json_object_size(s.body), 16);
  cli_submit_release(&s);
}

static void
test_submit_sends_only_given_fields(void **state)
{
  char *argv[] = {"submit", "--", "true", NULL};
  struct cli_submit s;

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), 0);
  assert_int_equal(json_object_size(s.body), 1);
  assert_null(s.idempotency_key);
  cli_submit_release(&s);
}

static void
test_submit_repeated_env_and_param_build_objects(void **state)
{
  char *argv[] = {"submit",   "--workload", "train-llm", "--env",
                  "A=1",      "--env",      "B=x=y",     "--env",
                  "EMPTY=",   "--param",    "lr=1e-4",   "--param",
                  "steps=10", NULL};
  struct cli_submit s;
  json_t *env;
  json_t *params;

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), 0);
  env = json_object_get(s.body, "env");
  params = json_object_get(s.body, "params");
  assert_int_equal(json_object_size(env), 3);
  assert_json_str(env, "A", "1");
  /* Only the first '=' splits: values may hold more. */
  assert_json_str(env, "B", "x=y");
  assert_json_str(env, "EMPTY", "");
  assert_int_equal(json_object_size(params), 2);
  assert_json_str(params, "lr", "1e-4");
  assert_json_str(params, "steps", "10");
  assert_json_str(s.body, "workload", "train-llm");
  assert_null(json_object_get(s.body, "command"));
  cli_submit_release(&s);
}

static void
test_submit_keeps_dashes_of_the_command_after_double_dash(void **state)
{
  char *argv[] = {"submit", "--gpus", "1", "--", "python", "-u",
                  "train.py", "--lr", "3e-4", "--", "-x", NULL};
  struct cli_submit s;
  const json_t *cmd;
  static const char *const want[] = {"python", "-u", "train.py", "--lr",
                                     "3e-4", "--", "-x"};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), 0);
  cmd = json_object_get(s.body, "command");
  assert_int_equal(json_array_size(cmd), 7);
  for (size_t i = 0; i < 7; i++)
    assert_string_equal(json_string_value(json_array_get(cmd, i)), want[i]);
  assert_json_int(s.body, "gpus", 1);
  cli_submit_release(&s);
}

static void
test_submit_command_starts_at_first_non_option(void **state)
{
  char *argv[] = {"submit", "--name", "n", "sleep", "--gpus", "2", NULL};
  struct cli_submit s;
  const json_t *cmd;

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), 0);
  cmd = json_object_get(s.body, "command");
  assert_int_equal(json_array_size(cmd), 3);
  assert_string_equal(json_string_value(json_array_get(cmd, 1)), "--gpus");
  /* --gpus after the command belongs to the command, not to tenbin. */
  assert_null(json_object_get(s.body, "gpus"));
  cli_submit_release(&s);
}

static void
test_submit_with_bad_gpus_is_a_usage_error_naming_it(void **state)
{
  static const char *const bad[] = {"abc", "-1", "4097", "2x", "", " 2",
                                    "+2", "99999999999999999999"};

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *argv[] = {"submit", "--gpus", (char *)bad[i], "--", "true", NULL};
    struct cli_submit s;
    struct err e = {0};

    assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
    assert_null(s.body);
    assert_non_null(strstr(e.msg, "'--gpus'"));
    cli_submit_release(&s);
  }
}

static void
test_submit_accepts_gpu_bounds(void **state)
{
  char *argv[] = {"submit", "--gpus", "0", "--nodes", "1024", "--", "true",
                  NULL};
  struct cli_submit s;

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), 0);
  assert_json_int(s.body, "gpus", 0);
  assert_json_int(s.body, "nodes", 1024);
  cli_submit_release(&s);
}

static void
test_submit_with_zero_nodes_is_rejected(void **state)
{
  char *argv[] = {"submit", "--nodes", "0", "--", "true", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'--nodes'"));
  cli_submit_release(&s);
}

static void
test_submit_time_minutes_are_sent_as_integer(void **state)
{
  char *argv[] = {"submit", "--time", "90", "--", "true", NULL};
  struct cli_submit s;

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), 0);
  assert_json_int(s.body, "time_limit", 90);
  cli_submit_release(&s);
}

static void
test_submit_with_bad_time_is_rejected(void **state)
{
  char *argv[] = {"submit", "--time", "soon", "--", "true", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'--time'"));
  assert_non_null(strstr(e.msg, "'soon'"));
  cli_submit_release(&s);
}

static void
test_submit_without_command_or_workload_is_rejected(void **state)
{
  char *argv[] = {"submit", "--gpus", "1", "--", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "--workload"));
  cli_submit_release(&s);
}

static void
test_submit_param_without_workload_is_rejected(void **state)
{
  char *argv[] = {"submit", "--param", "lr=1", "--", "true", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'--param'"));
  cli_submit_release(&s);
}

static void
test_submit_env_without_key_or_equals_is_rejected(void **state)
{
  static const char *const bad[] = {"NOEQUALS", "=value"};

  (void)state;
  for (size_t i = 0; i < 2; i++) {
    char *argv[] = {"submit", "--env", (char *)bad[i], "--", "true", NULL};
    struct cli_submit s;
    struct err e = {0};

    assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "'--env'"));
    assert_non_null(strstr(e.msg, bad[i]));
    cli_submit_release(&s);
  }
}

static void
test_submit_unknown_option_is_named(void **state)
{
  char *argv[] = {"submit", "--gpuz=2", "--", "true", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '--gpuz'");
  cli_submit_release(&s);
}

static void
test_submit_option_without_value_is_named(void **state)
{
  char *argv[] = {"submit", "--workload", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_string_equal(e.msg, "option '--workload' needs a value");
  cli_submit_release(&s);
}

static void
test_submit_help_is_reported_not_an_error(void **state)
{
  char *argv[] = {"submit", "--help", NULL};
  char *argv2[] = {"submit", "-h", "--", "x", NULL};
  struct cli_submit s;

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, NULL), CLI_HELP);
  cli_submit_release(&s);
  assert_int_equal(submit(argv2, ARGC(argv2), &s, NULL), CLI_HELP);
  cli_submit_release(&s);
}

static void
test_submit_idempotency_key_is_checked(void **state)
{
  char long_key[CLI_MAX_IDEM_KEY + 2];
  char *argv[] = {"submit", "--idempotency-key", long_key, "--", "x", NULL};
  char *argv2[] = {"submit", "--idempotency-key", "a b", "--", "x", NULL};
  char *argv3[] = {"submit", "--idempotency-key", NULL, "--", "x", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  memset(long_key, 'k', sizeof(long_key) - 1);
  long_key[sizeof(long_key) - 1] = '\0';
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'--idempotency-key'"));
  cli_submit_release(&s);
  assert_int_equal(submit(argv2, ARGC(argv2), &s, &e), ERR_INVALID);
  cli_submit_release(&s);
  /* Exactly 128 characters is allowed. */
  long_key[CLI_MAX_IDEM_KEY] = '\0';
  argv3[2] = long_key;
  assert_int_equal(submit(argv3, ARGC(argv3), &s, &e), 0);
  assert_int_equal(strlen(s.idempotency_key), CLI_MAX_IDEM_KEY);
  cli_submit_release(&s);
}

static void
test_submit_with_invalid_utf8_is_rejected(void **state)
{
  char *argv[] = {"submit", "--name", "bad\xff", "--", "true", NULL};
  char *argv2[] = {"submit", "--", "echo", "\xc3", NULL};
  struct cli_submit s;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(argv, ARGC(argv), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'--name'"));
  cli_submit_release(&s);
  assert_int_equal(submit(argv2, ARGC(argv2), &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "command argument 2"));
  cli_submit_release(&s);
}

/* ---- sbatch ---- */

static void
test_sbatch_body_has_its_flags_and_the_script(void **state)
{
  char *argv[] = {"sbatch", "--project", "demo", "--site", "local",
                  "--hold", "--name",    "nightly", "job.sh", NULL};
  static const char script[] = "#!/bin/bash\n#SBATCH --gpus=2\necho hi\n";
  struct cli_sbatch s;
  struct err e = {0};

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(argv), argv, &s, &e), 0);
  assert_string_equal(s.path, "job.sh");
  assert_int_equal(
      cli_sbatch_set_script(&s, script, strlen(script), NULL, &e), 0);
  assert_json_str(s.body, "project", "demo");
  assert_json_str(s.body, "site", "local");
  assert_json_str(s.body, "name", "nightly");
  assert_true(json_is_true(json_object_get(s.body, "hold")));
  assert_json_str(s.body, "script", script);
  assert_int_equal(json_object_size(s.body), 5);
  cli_sbatch_release(&s);
}

static void
test_sbatch_needs_exactly_one_script(void **state)
{
  char *none[] = {"sbatch", "--hold", NULL};
  char *two[] = {"sbatch", "a.sh", "b.sh", NULL};
  struct cli_sbatch s;
  struct err e = {0};

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(none), none, &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "SCRIPT"));
  assert_int_equal(cli_sbatch_parse(ARGC(two), two, &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'b.sh'"));
  cli_sbatch_release(&s);
}

/* sbatch reads what follows the script as the script's own arguments. */
static void
test_sbatch_option_after_the_script_is_refused_not_taken(void **state)
{
  char *argv[] = {"sbatch", "job.sh", "--hold", NULL};
  struct cli_sbatch s;
  struct err e = {0};

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(argv), argv, &s, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "unexpected argument '--hold' after the "
                                "script"));
  assert_null(s.body);
  cli_sbatch_release(&s);
}

/* The spec tenbind builds from a body (what POST /v1/jobs does). */
static void
spec_of(const json_t *body, struct job_spec *spec, json_t *warnings)
{
  struct err e = {0};

  jobspec_init(spec);
  if (jobspec_from_json(spec, body, warnings, &e) != 0)
    fail_msg("tenbind would reject the body: %s", e.msg);
}

static void
test_sbatch_account_sets_the_project_over_the_script(void **state)
{
  char *shrt[] = {"sbatch", "-A", "vision", "job.sh", NULL};
  char *lng[] = {"sbatch", "--account=vision", "job.sh", NULL};
  char **argvs[] = {shrt, lng};
  int argcs[] = {ARGC(shrt), ARGC(lng)};
  static const char script[] =
      "#!/bin/sh\n#SBATCH --account=other\n#SBATCH -J x\nrun\n";
  struct job_spec spec;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < 2; i++) {
    struct cli_sbatch s;

    cli_sbatch_init(&s);
    assert_int_equal(cli_sbatch_parse(argcs[i], argvs[i], &s, &e), 0);
    assert_json_str(s.body, "project", "vision");
    assert_int_equal(
        cli_sbatch_set_script(&s, script, strlen(script), NULL, &e), 0);
    spec_of(s.body, &spec, NULL);
    assert_string_equal(spec.project, "vision");
    jobspec_release(&spec);
    cli_sbatch_release(&s);
  }
}

/*
 * Every option on the command line beats the script's directive of the
 * same name, also the ones tenbin only passes to Slurm, as with sbatch.
 */
static void
test_sbatch_options_override_the_scripts_directives(void **state)
{
  char *argv[] = {"sbatch", "-J", "cli", "-N", "2", "--gpus-per-node=2",
                  "-t", "30", "-ocli.log", "-p", "gpu", "--mem=8G",
                  "job.sh", NULL};
  static const char script[] = "#!/bin/sh\n"
                               "#SBATCH -J script -N 1 --gres=gpu:1\n"
                               "#SBATCH -t 10 -o script.log\n"
                               "#SBATCH -p cpu --mem=4G --qos=high\n"
                               "run\n";
  struct cli_sbatch s;
  struct job_spec spec;
  struct err e = {0};
  json_t *warnings = json_array();
  json_t *server = json_array();
  size_t i;
  json_t *w;

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(argv), argv, &s, &e), 0);
  assert_int_equal(
      cli_sbatch_set_script(&s, script, strlen(script), warnings, &e), 0);
  spec_of(s.body, &spec, server);
  assert_string_equal(spec.name, "cli");
  assert_int_equal(spec.nodes, 2);
  assert_int_equal(spec.gpus_per_node, 2);
  assert_int_equal(spec.gpus, 4);
  assert_int_equal(spec.time_limit_s, 30 * 60);
  assert_string_equal(spec.stdout_path, "cli.log");
  assert_int_equal(strv_len(spec.sbatch_extra), 3);
  assert_string_equal(spec.sbatch_extra[0], "--qos=high");
  assert_string_equal(spec.sbatch_extra[1], "--partition=gpu");
  assert_string_equal(spec.sbatch_extra[2], "--mem=8G");
  /* Told before submitting, each one where it came from. */
  assert_int_equal(json_array_size(warnings), 3);
  assert_string_equal(
      json_string_value(json_array_get(warnings, 0)),
      "#SBATCH --qos=high is not interpreted by tenbin; kept for Slurm "
      "sites");
  assert_string_equal(
      json_string_value(json_array_get(warnings, 1)),
      "option --partition=gpu is not interpreted by tenbin; kept for Slurm "
      "sites");
  /* tenbind's warnings are among them, so none is printed twice. */
  assert_true(json_array_size(server) > 0);
  json_array_foreach(server, i, w) {
    int found = 0;

    for (size_t j = 0; j < json_array_size(warnings); j++)
      found |= json_equal(w, json_array_get(warnings, j));
    assert_true(found);
  }
  jobspec_release(&spec);
  json_decref(server);
  json_decref(warnings);
  cli_sbatch_release(&s);
}

/* Without options of its own kind, the script's kept directives stay. */
static void
test_sbatch_without_kept_options_leaves_the_scripts_alone(void **state)
{
  char *argv[] = {"sbatch", "--gpus", "h100:2", "job.sh", NULL};
  static const char script[] = "#!/bin/sh\n#SBATCH --mem=4G\nrun\n";
  struct cli_sbatch s;
  struct err e = {0};
  json_t *warnings = json_array();

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(argv), argv, &s, &e), 0);
  assert_int_equal(
      cli_sbatch_set_script(&s, script, strlen(script), warnings, &e), 0);
  assert_json_int(s.body, "gpus", 2);
  assert_json_str(s.body, "gpu_type", "h100");
  assert_null(json_object_get(s.body, "sbatch_extra"));
  assert_int_equal(json_array_size(warnings), 1);
  json_decref(warnings);
  cli_sbatch_release(&s);
}

static void
test_sbatch_job_is_named_after_the_script_file(void **state)
{
  static const char plain[] = "#!/bin/sh\nrun\n";
  static const char named[] = "#!/bin/sh\n#SBATCH --job-name=mine\nrun\n";
  char *in_dir[] = {"sbatch", "jobs/train.sh", NULL};
  char *from_stdin[] = {"sbatch", "-", NULL};
  char *with_name[] = {"sbatch", "--name", "given", "jobs/train.sh", NULL};
  struct cli_sbatch s;
  struct job_spec spec;
  struct err e = {0};

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(in_dir), in_dir, &s, &e), 0);
  assert_int_equal(cli_sbatch_set_script(&s, plain, strlen(plain), NULL, &e),
                   0);
  assert_json_str(s.body, "name", "train.sh");
  cli_sbatch_release(&s);

  assert_int_equal(cli_sbatch_parse(ARGC(from_stdin), from_stdin, &s, &e),
                   0);
  assert_int_equal(cli_sbatch_set_script(&s, plain, strlen(plain), NULL, &e),
                   0);
  assert_json_str(s.body, "name", "sbatch");
  cli_sbatch_release(&s);

  /* The script's --job-name is the name: the body must not override it. */
  assert_int_equal(cli_sbatch_parse(ARGC(in_dir), in_dir, &s, &e), 0);
  assert_int_equal(cli_sbatch_set_script(&s, named, strlen(named), NULL, &e),
                   0);
  assert_null(json_object_get(s.body, "name"));
  spec_of(s.body, &spec, NULL);
  assert_string_equal(spec.name, "mine");
  jobspec_release(&spec);
  cli_sbatch_release(&s);

  assert_int_equal(cli_sbatch_parse(ARGC(with_name), with_name, &s, &e), 0);
  assert_int_equal(cli_sbatch_set_script(&s, plain, strlen(plain), NULL, &e),
                   0);
  assert_json_str(s.body, "name", "given");
  cli_sbatch_release(&s);
}

static void
test_sbatch_bad_options_are_named(void **state)
{
  char *bad_time[] = {"sbatch", "--time=soon", "job.sh", NULL};
  char *unknown[] = {"sbatch", "--frobnicate", "job.sh", NULL};
  char *unknown_short[] = {"sbatch", "-Z", "job.sh", NULL};
  char *no_value[] = {"sbatch", "--site", NULL};
  char *help[] = {"sbatch", "-h", NULL};
  struct cli_sbatch s;
  struct err e = {0};

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(bad_time), bad_time, &s, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "option '--time'"));
  assert_int_equal(cli_sbatch_parse(ARGC(unknown), unknown, &s, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '--frobnicate'");
  assert_int_equal(
      cli_sbatch_parse(ARGC(unknown_short), unknown_short, &s, &e),
      ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '-Z'");
  assert_int_equal(cli_sbatch_parse(ARGC(no_value), no_value, &s, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--site' needs a value");
  assert_int_equal(cli_sbatch_parse(ARGC(help), help, &s, &e), CLI_HELP);
  cli_sbatch_release(&s);
}

static void
test_sbatch_stdin_dash_is_a_script_argument(void **state)
{
  char *argv[] = {"sbatch", "--project", "p", "-", NULL};
  struct cli_sbatch s;

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(argv), argv, &s, NULL), 0);
  assert_string_equal(s.path, "-");
  cli_sbatch_release(&s);
}

static void
test_sbatch_empty_bad_or_non_utf8_script_is_rejected(void **state)
{
  char *argv[] = {"sbatch", "job.sh", NULL};
  static const char bad_time[] = "#!/bin/sh\n#SBATCH --time=soon\nrun\n";
  struct cli_sbatch s;
  struct err e = {0};

  (void)state;
  cli_sbatch_init(&s);
  assert_int_equal(cli_sbatch_parse(ARGC(argv), argv, &s, &e), 0);
  assert_int_equal(cli_sbatch_set_script(&s, "", 0, NULL, &e), ERR_INVALID);
  assert_int_equal(
      cli_sbatch_set_script(&s, "#!/bin/sh\n\xff", 11, NULL, &e),
      ERR_INVALID);
  assert_non_null(strstr(e.msg, "UTF-8"));
  assert_int_equal(
      cli_sbatch_set_script(&s, bad_time, strlen(bad_time), NULL, &e),
      ERR_INVALID);
  assert_non_null(strstr(e.msg, "script 'job.sh': line 2: #SBATCH --time"));
  assert_null(json_object_get(s.body, "script"));
  cli_sbatch_release(&s);
}

/* Write n bytes of c to a new temp file; returns its path in out. */
static void
temp_file(char *out, size_t outlen, char c, size_t n)
{
  int fd;
  char chunk[4096];

  snprintf(out, outlen, "/tmp/test_cli_args.XXXXXX");
  fd = mkstemp(out);
  assert_true(fd >= 0);
  memset(chunk, c, sizeof(chunk));
  while (n > 0) {
    size_t k = n < sizeof(chunk) ? n : sizeof(chunk);

    assert_int_equal(write(fd, chunk, k), (ssize_t)k);
    n -= k;
  }
  close(fd);
}

static void
test_read_file_reads_up_to_the_cap_and_no_further(void **state)
{
  char path[64];
  struct buf b;
  struct err e = {0};

  (void)state;
  temp_file(path, sizeof(path), 'x', CLI_MAX_SCRIPT);
  buf_init(&b, CLI_MAX_SCRIPT);
  assert_int_equal(cli_read_file(path, &b, &e), 0);
  assert_int_equal(b.len, CLI_MAX_SCRIPT);
  buf_release(&b);
  unlink(path);

  temp_file(path, sizeof(path), 'x', CLI_MAX_SCRIPT + 1);
  buf_init(&b, CLI_MAX_SCRIPT);
  assert_int_equal(cli_read_file(path, &b, &e), ERR_TOO_LARGE);
  assert_non_null(strstr(e.msg, "512 KiB"));
  assert_non_null(strstr(e.msg, path));
  buf_release(&b);
  unlink(path);
}

static void
test_read_file_missing_names_the_file(void **state)
{
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 1024);
  assert_int_equal(cli_read_file("/nonexistent/job.sh", &b, &e), ERR_IO);
  assert_non_null(strstr(e.msg, "'/nonexistent/job.sh'"));
  buf_release(&b);
}

/* ---- global options, jobs, logs, ids ---- */

static const char *
fake_env(const char *name)
{
  if (strcmp(name, "TENBIN_SERVER") == 0)
    return "http://10.0.0.1:9000";
  if (strcmp(name, "TENBIN_TOKEN") == 0)
    return "envtoken";
  if (strcmp(name, "TENBIN_CA_FILE") == 0)
    return "/env/ca.pem";
  return NULL;
}

static const char *
empty_env(const char *name)
{
  (void)name;
  return NULL;
}

static void
test_global_options_fall_back_to_env_then_default(void **state)
{
  char *argv[] = {"tenbin", "--json", "jobs", "--all", NULL};
  char *argv2[] = {"tenbin", "--server", "http://h:1", "--token", "t",
                   "show", "1", NULL};
  struct cli_global g;

  (void)state;
  assert_int_equal(cli_global_parse(ARGC(argv), argv, fake_env, &g, NULL), 0);
  assert_string_equal(g.server, "http://10.0.0.1:9000");
  assert_string_equal(g.token, "envtoken");
  assert_string_equal(g.cacert, "/env/ca.pem");
  assert_true(g.json);
  assert_int_equal(g.cmd_index, 2);
  /* Options after the command are the command's, untouched. */
  assert_string_equal(argv[3], "--all");

  assert_int_equal(cli_global_parse(ARGC(argv), argv, empty_env, &g, NULL),
                   0);
  assert_string_equal(g.server, CLI_DEFAULT_SERVER);
  assert_null(g.token);

  assert_int_equal(cli_global_parse(ARGC(argv2), argv2, fake_env, &g, NULL),
                   0);
  assert_string_equal(g.server, "http://h:1");
  assert_string_equal(g.token, "t");
  assert_int_equal(g.cmd_index, 5);
}

static void
test_global_unknown_option_is_a_usage_error(void **state)
{
  char *argv[] = {"tenbin", "--verbose", "jobs", NULL};
  struct cli_global g;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_global_parse(ARGC(argv), argv, empty_env, &g, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '--verbose'");
}

/* Parse argv's globals before and after its command; argv is edited. */
static int
globals(char **argv, int argc, cli_arity_fn arity, struct cli_global *g,
        struct err *e)
{
  int rc = cli_global_parse(argc, argv, fake_env, g, e);

  if (rc == 0)
    rc = cli_global_take(g, argc, argv, arity, e);
  return rc;
}

static void
test_global_options_after_the_command_are_taken_out(void **state)
{
  char *argv[] = {"tenbin", "jobs", "--state", "running", "--json",
                  "--server", "http://h:2", "--token=t2", "--cacert",
                  "ca.pem", NULL};
  struct cli_global g;

  (void)state;
  assert_int_equal(globals(argv, ARGC(argv), cli_jobs_arity, &g, NULL), 0);
  assert_true(g.json);
  /* Given on the command line, wherever: it beats the environment. */
  assert_string_equal(g.server, "http://h:2");
  assert_string_equal(g.token, "t2");
  assert_string_equal(g.cacert, "ca.pem");
  assert_int_equal(g.argc, 4);
  assert_string_equal(argv[2], "--state");
  assert_string_equal(argv[3], "running");
  assert_null(argv[4]);
}

static void
test_words_after_submit_double_dash_are_never_global(void **state)
{
  char *argv[] = {"tenbin", "submit", "--name", "x", "--json", "--",
                  "echo", "--json", "--server", "y", NULL};
  char *want[] = {"tenbin", "submit", "--name", "x", "--", "echo",
                  "--json", "--server", "y"};
  struct cli_global g;

  (void)state;
  assert_int_equal(globals(argv, ARGC(argv), cli_submit_arity, &g, NULL),
                   0);
  assert_true(g.json);
  assert_string_equal(g.server, "http://10.0.0.1:9000");
  assert_int_equal(g.argc, 9);
  for (int i = 0; i < 9; i++)
    assert_string_equal(argv[i], want[i]);
}

static void
test_submit_command_keeps_words_that_look_global(void **state)
{
  char *argv[] = {"tenbin", "submit", "--gpus", "2", "python", "--json",
                  NULL};
  struct cli_global g;

  (void)state;
  assert_int_equal(globals(argv, ARGC(argv), cli_submit_arity, &g, NULL),
                   0);
  assert_false(g.json);
  assert_int_equal(g.argc, 6);
  assert_string_equal(argv[5], "--json");
}

static void
test_sbatch_script_arguments_are_never_global(void **state)
{
  char *argv[] = {"tenbin", "sbatch", "-p", "gpu", "--json", "-Hv",
                  "job.sh", "--token", "t", NULL};
  char *want[] = {"tenbin", "sbatch", "-p", "gpu", "-Hv", "job.sh",
                  "--token", "t"};
  struct cli_global g;

  (void)state;
  assert_int_equal(globals(argv, ARGC(argv), cli_sbatch_arity, &g, NULL),
                   0);
  assert_true(g.json);
  assert_string_equal(g.token, "envtoken");
  assert_int_equal(g.argc, 8);
  for (int i = 0; i < 8; i++)
    assert_string_equal(argv[i], want[i]);
}

/* An option's value is the command's, even when it reads "--json". */
static void
test_option_value_is_never_a_global_option(void **state)
{
  char *sbatch[] = {"tenbin", "sbatch", "-J", "--json", "job.sh", NULL};
  char *jobs[] = {"tenbin", "jobs", "--proj", "--json", NULL};
  char *submit[] = {"tenbin", "submit", "--name", "--json", "cmd", NULL};
  struct cli_global g;

  (void)state;
  assert_int_equal(globals(sbatch, ARGC(sbatch), cli_sbatch_arity, &g, NULL),
                   0);
  assert_false(g.json);
  assert_int_equal(g.argc, 5);
  assert_int_equal(globals(jobs, ARGC(jobs), cli_jobs_arity, &g, NULL), 0);
  assert_false(g.json);
  assert_int_equal(globals(submit, ARGC(submit), cli_submit_arity, &g, NULL),
                   0);
  assert_false(g.json);
  assert_int_equal(g.argc, 5);
}

static void
test_global_option_misuse_after_the_command_is_named(void **state)
{
  char *no_value[] = {"tenbin", "jobs", "--server", NULL};
  char *flag_value[] = {"tenbin", "show", "1", "--json=yes", NULL};
  char *lead_value[] = {"tenbin", "--json=yes", "jobs", NULL};
  char *empty[] = {"tenbin", "jobs", "--server=", NULL};
  struct cli_global g;
  struct err e = {0};

  (void)state;
  assert_int_equal(globals(no_value, ARGC(no_value), NULL, &g, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--server' needs a value");
  assert_int_equal(globals(flag_value, ARGC(flag_value), NULL, &g, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--json' takes no value");
  assert_int_equal(globals(lead_value, ARGC(lead_value), NULL, &g, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--json' takes no value");
  assert_int_equal(globals(empty, ARGC(empty), NULL, &g, &e), ERR_INVALID);
  assert_string_equal(e.msg, "option '--server': empty URL");
}

static void
test_jobs_options_are_checked(void **state)
{
  char *ok[] = {"jobs", "--state", "running", "--limit", "1000", "--all",
                "--project", "p", "--site", "s", NULL};
  char *bad_state[] = {"jobs", "--state", "runing", NULL};
  char *bad_limit[] = {"jobs", "--limit", "0", NULL};
  char *big_limit[] = {"jobs", "--limit", "1001", NULL};
  char *extra[] = {"jobs", "42", NULL};
  struct cli_jobs o;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_jobs_parse(ARGC(ok), ok, &o, &e), 0);
  assert_string_equal(o.state, "running");
  assert_int_equal(o.limit, 1000);
  assert_true(o.all);
  assert_int_equal(cli_jobs_parse(ARGC(bad_state), bad_state, &o, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'runing'"));
  assert_int_equal(cli_jobs_parse(ARGC(bad_limit), bad_limit, &o, &e),
                   ERR_INVALID);
  assert_int_equal(cli_jobs_parse(ARGC(big_limit), big_limit, &o, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'--limit'"));
  assert_int_equal(cli_jobs_parse(ARGC(extra), extra, &o, &e), ERR_INVALID);
}

static void
test_jobs_path_escapes_every_value(void **state)
{
  struct cli_jobs o = {.state = "queued",
                       .project = "my proj&x=1",
                       .site = "a/b",
                       .limit = 50};
  struct cli_jobs none = {0};
  struct buf b;

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(cli_jobs_path(&o, "41", &b), 0);
  assert_string_equal(buf_str(&b), "/v1/jobs?state=queued&project=my%20proj"
                                   "%26x%3D1&site=a%2Fb&limit=50&cursor=41");
  buf_reset(&b);
  assert_int_equal(cli_jobs_path(&none, NULL, &b), 0);
  assert_string_equal(buf_str(&b), "/v1/jobs");
  buf_release(&b);
}

static void
test_url_escape_keeps_only_unreserved_bytes(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 1024);
  assert_int_equal(cli_url_escape(&b, "aZ09-._~ ?#%+\xc3\xa9"), 0);
  assert_string_equal(buf_str(&b), "aZ09-._~%20%3F%23%25%2B%C3%A9");
  buf_reset(&b);
  assert_int_equal(cli_url_add_segment(&b, "/v1/workloads/", "../x y"), 0);
  assert_string_equal(buf_str(&b), "/v1/workloads/..%2Fx%20y");
  buf_reset(&b);
  assert_int_equal(buf_adds(&b, "/p"), 0);
  assert_int_equal(cli_url_add_query(&b, "a", NULL), 0);
  assert_int_equal(cli_url_add_query(&b, "a", "1"), 0);
  assert_int_equal(cli_url_add_query(&b, "b", ""), 0);
  assert_string_equal(buf_str(&b), "/p?a=1&b=");
  buf_release(&b);
}

static void
test_logs_follow_flag_may_come_after_the_id(void **state)
{
  char *argv[] = {"logs", "42", "-f", NULL};
  char *argv2[] = {"logs", "--follow", "7", NULL};
  char *argv3[] = {"logs", "7", "8", NULL};
  struct cli_logs o;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_logs_parse(ARGC(argv), argv, &o, &e), 0);
  assert_int_equal(o.id, 42);
  assert_true(o.follow);
  assert_int_equal(cli_logs_parse(ARGC(argv2), argv2, &o, &e), 0);
  assert_int_equal(o.id, 7);
  assert_true(o.follow);
  assert_int_equal(cli_logs_parse(ARGC(argv3), argv3, &o, &e), ERR_INVALID);
}

static void
test_job_ids_must_be_positive_integers(void **state)
{
  static const char *const bad[] = {"0", "-1", "12a", "", "1.5", " 1"};
  int64_t id = 0;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_parse_job_id("42", &id, &e), 0);
  assert_int_equal(id, 42);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(cli_parse_job_id(bad[i], &id, &e), ERR_INVALID);
    assert_non_null(strstr(e.msg, "job id"));
  }
}

static void
test_positional_counts_are_enforced(void **state)
{
  char *none[] = {"show", NULL};
  char *two[] = {"show", "1", "2", NULL};
  char *help[] = {"show", "1", "--help", NULL};
  char *opt[] = {"show", "--bogus", "1", NULL};
  char *many[] = {"cancel", "1", "2", "3", NULL};
  struct err e = {0};
  int first = -1;

  (void)state;
  assert_int_equal(cli_args_positional(ARGC(none), none, 1, 1, &first, &e),
                   ERR_INVALID);
  assert_int_equal(cli_args_positional(ARGC(two), two, 1, 1, &first, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'2'"));
  assert_int_equal(cli_args_positional(ARGC(help), help, 1, 1, &first, &e),
                   CLI_HELP);
  assert_int_equal(cli_args_positional(ARGC(opt), opt, 1, 1, &first, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '--bogus'");
  assert_int_equal(cli_args_positional(ARGC(many), many, 1, -1, &first, &e),
                   0);
  assert_int_equal(first, 1);
}

/* ---- dataset ---- */

static void
test_submit_and_sbatch_pass_the_dataset_through(void **state)
{
  char *sub[] = {"submit", "--dataset", "train@latest", "--", "true", NULL};
  char *sb[] = {"sbatch", "--dataset", "train", "job.sh", NULL};
  struct cli_submit s;
  struct cli_sbatch b;
  struct err e = {0};

  (void)state;
  assert_int_equal(submit(sub, ARGC(sub), &s, &e), 0);
  assert_json_str(s.body, "dataset", "train@latest");
  cli_submit_release(&s);
  cli_sbatch_init(&b);
  assert_int_equal(cli_sbatch_parse(ARGC(sb), sb, &b, &e), 0);
  assert_json_str(b.body, "dataset", "train");
  cli_sbatch_release(&b);
}

static void
test_dataset_names_follow_the_contract(void **state)
{
  static const char *const good[] = {"a", "imagenet-1k", "A.b_c-9",
                                     "0start"};
  static const char *const bad[] = {"", "-x", ".hidden", "_x", "a b",
                                    "a/b", "a@b", "caf\xc3\xa9"};
  char longest[66];

  (void)state;
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    assert_true(cli_is_dataset_name(good[i]));
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_false(cli_is_dataset_name(bad[i]));
  memset(longest, 'n', 64);
  longest[64] = '\0';
  assert_true(cli_is_dataset_name(longest));
  longest[64] = 'n';
  longest[65] = '\0';
  assert_false(cli_is_dataset_name(longest));
}

static void
test_report_options_travel_escaped_with_a_default_grouping(void **state)
{
  char *plain[] = {"report", NULL};
  char *full[] = {"report", "--from", "2026-11-01", "--to", "2026 x",
                  "--by", "site,day", "--csv", NULL};
  char *extra[] = {"report", "now", NULL};
  struct buf path;
  struct err e = {0};
  int csv = -1;

  (void)state;
  buf_init(&path, 4096);
  assert_int_equal(cli_report_parse(ARGC(plain), plain, &csv, &path, &e), 0);
  assert_string_equal(buf_str(&path), "/v1/reports/usage?by=project%2Csite");
  assert_int_equal(csv, 0);
  buf_reset(&path);
  assert_int_equal(cli_report_parse(ARGC(full), full, &csv, &path, &e), 0);
  assert_string_equal(buf_str(&path),
                      "/v1/reports/usage?from=2026-11-01&to=2026%20x&"
                      "by=site%2Cday&format=csv");
  assert_int_equal(csv, 1);
  buf_reset(&path);
  assert_int_equal(cli_report_parse(ARGC(extra), extra, &csv, &path, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unexpected argument 'now'");
  assert_int_equal(cli_report_arity("--by"), 1);
  assert_int_equal(cli_report_arity("--csv"), 0);
  buf_release(&path);
}

static void
test_budget_set_builds_the_body_and_names_what_is_wrong(void **state)
{
  char *good[] = {"set", "vision", "--monthly", "5000", "--hard",
                  "--counts", "all", NULL};
  char *no_amount[] = {"set", "vision", "--soft", NULL};
  char *bad_counts[] = {"set", "vision", "--monthly", "1", "--counts",
                        "owned", NULL};
  char *negative[] = {"set", "vision", "--monthly", "-5", NULL};
  char *no_project[] = {"set", "--monthly", "5", NULL};
  const char *project = NULL;
  json_t *body = NULL;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_budget_set_parse(ARGC(good), good, &project, &body,
                                        &e), 0);
  assert_string_equal(project, "vision");
  assert_true(json_number_value(json_object_get(body, "monthly")) == 5000);
  assert_true(json_is_true(json_object_get(body, "hard")));
  assert_string_equal(json_string_value(json_object_get(body, "counts")),
                      "all");
  json_decref(body);
  assert_int_equal(cli_budget_set_parse(ARGC(no_amount), no_amount, &project,
                                        &body, &e), ERR_INVALID);
  assert_string_equal(e.msg, "option '--monthly' is needed");
  assert_int_equal(cli_budget_set_parse(ARGC(bad_counts), bad_counts,
                                        &project, &body, &e), ERR_INVALID);
  assert_string_equal(e.msg, "option '--counts': 'owned' is not rented or "
                             "all");
  assert_int_equal(cli_budget_set_parse(ARGC(negative), negative, &project,
                                        &body, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'-5' is not an amount in dollars"));
  assert_int_equal(cli_budget_set_parse(ARGC(no_project), no_project,
                                        &project, &body, &e), ERR_INVALID);
  assert_string_equal(e.msg, "a PROJECT is needed");
  assert_null(body);
}

static void
test_prices_set_builds_the_body_and_names_what_is_missing(void **state)
{
  char *good[] = {"set", "--per-gpu-hour", "6.5", "cloud", "--gpu-type",
                  "h100", "--spot", "2.75", NULL};
  char *no_type[] = {"set", "cloud", "--per-gpu-hour", "6.5", NULL};
  char *no_price[] = {"set", "cloud", "--gpu-type", "h100", NULL};
  char *no_site[] = {"set", "--gpu-type", "h100", "--per-gpu-hour", "1",
                     NULL};
  char *bad[] = {"set", "cloud", "--gpu-type", "h100", "--per-gpu-hour",
                 "1e9", NULL};
  char *nan[] = {"set", "cloud", "--gpu-type", "h100", "--per-gpu-hour",
                 "nan", NULL};
  const char *site = NULL, *type = NULL;
  json_t *body = NULL;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_prices_set_parse(ARGC(good), good, &site, &type,
                                        &body, &e), 0);
  assert_string_equal(site, "cloud");
  assert_string_equal(type, "h100");
  assert_true(json_number_value(json_object_get(body, "per_gpu_hour")) ==
              6.5);
  assert_true(json_number_value(json_object_get(body,
                                                "spot_per_gpu_hour")) ==
              2.75);
  json_decref(body);
  assert_int_equal(cli_prices_set_parse(ARGC(no_type), no_type, &site,
                                        &type, &body, &e), ERR_INVALID);
  assert_string_equal(e.msg, "option '--gpu-type' is needed");
  assert_int_equal(cli_prices_set_parse(ARGC(no_price), no_price, &site,
                                        &type, &body, &e), ERR_INVALID);
  assert_string_equal(e.msg, "option '--per-gpu-hour' is needed");
  assert_int_equal(cli_prices_set_parse(ARGC(no_site), no_site, &site,
                                        &type, &body, &e), ERR_INVALID);
  assert_string_equal(e.msg, "a SITE is needed");
  assert_int_equal(cli_prices_set_parse(ARGC(bad), bad, &site, &type, &body,
                                        &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'1e9' is not an amount in dollars"));
  assert_int_equal(cli_prices_set_parse(ARGC(nan), nan, &site, &type, &body,
                                        &e), ERR_INVALID);
  assert_null(body);
}

static void
test_dataset_add_builds_the_body_with_options_anywhere(void **state)
{
  char *argv[] = {"add", "--site", "onprem", "imagenet", "--path",
                  "data/imagenet", NULL};
  json_t *body = NULL;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_dataset_add_parse(ARGC(argv), argv, &body, &e), 0);
  assert_json_str(body, "name", "imagenet");
  assert_json_str(body, "source_site", "onprem");
  assert_json_str(body, "path", "data/imagenet");
  assert_int_equal(json_object_size(body), 3);
  json_decref(body);
}

static void
test_dataset_add_needs_name_site_and_path(void **state)
{
  char *no_site[] = {"add", "ds", "--path", "p", NULL};
  char *no_path[] = {"add", "ds", "--site", "s", NULL};
  char *no_name[] = {"add", "--site", "s", "--path", "p", NULL};
  char *bad_name[] = {"add", "-", "--site", "s", "--path", "p", NULL};
  char *two[] = {"add", "ds", "more", "--site", "s", "--path", "p", NULL};
  char *unknown[] = {"add", "ds", "--sit", "s", "--path", "p", "--x", NULL};
  char *help[] = {"add", "--help", NULL};
  json_t *body = NULL;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_dataset_add_parse(ARGC(no_site), no_site, &body, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--site' is needed");
  assert_int_equal(cli_dataset_add_parse(ARGC(no_path), no_path, &body, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--path' is needed");
  assert_int_equal(cli_dataset_add_parse(ARGC(no_name), no_name, &body, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "NAME"));
  assert_int_equal(
      cli_dataset_add_parse(ARGC(bad_name), bad_name, &body, &e),
      ERR_INVALID);
  assert_non_null(strstr(e.msg, "dataset name '-'"));
  assert_int_equal(cli_dataset_add_parse(ARGC(two), two, &body, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unexpected argument 'more'");
  /* getopt takes an unambiguous prefix: --sit is --site. */
  assert_int_equal(cli_dataset_add_parse(ARGC(unknown), unknown, &body, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '--x'");
  assert_int_equal(cli_dataset_add_parse(ARGC(help), help, &body, &e),
                   CLI_HELP);
  assert_null(body);
}

static void
test_dataset_name_commands_take_one_valid_name(void **state)
{
  char *ok[] = {"show", "ds-1", NULL};
  char *none[] = {"show", NULL};
  char *bad[] = {"publish", "a/b", NULL};
  char *opt[] = {"publish", "--site", "x", "ds", NULL};
  const char *name = NULL;
  struct err e = {0};

  (void)state;
  assert_int_equal(cli_dataset_name_parse(ARGC(ok), ok, &name, &e), 0);
  assert_string_equal(name, "ds-1");
  assert_int_equal(cli_dataset_name_parse(ARGC(none), none, &name, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "a dataset NAME is needed");
  assert_int_equal(cli_dataset_name_parse(ARGC(bad), bad, &name, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'a/b'"));
  assert_int_equal(cli_dataset_name_parse(ARGC(opt), opt, &name, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "unknown option '--site'");
}

static void
test_dataset_sync_splits_name_and_version(void **state)
{
  char *latest[] = {"sync", "ds", "--site", "gpu2", NULL};
  char *prefix[] = {"sync", "--no-wait", "ds@0123ABcd", "--site=gpu2", NULL};
  char *named[] = {"sync", "ds@latest", "--site", "gpu2", NULL};
  struct cli_dataset_sync o;
  struct err e = {0};
  json_t *body;

  (void)state;
  assert_int_equal(cli_dataset_sync_parse(ARGC(latest), latest, &o, &e), 0);
  assert_string_equal(o.name, "ds");
  assert_string_equal(o.version, "latest");
  assert_string_equal(o.site, "gpu2");
  assert_true(o.wait);
  body = cli_dataset_sync_body(&o, NULL);
  assert_json_str(body, "site", "gpu2");
  assert_json_str(body, "version", "latest");
  assert_int_equal(json_object_size(body), 2);
  json_decref(body);
  /* A prefix is lower-cased; the caller may send the resolved id. */
  assert_int_equal(cli_dataset_sync_parse(ARGC(prefix), prefix, &o, &e), 0);
  assert_string_equal(o.version, "0123abcd");
  assert_false(o.wait);
  body = cli_dataset_sync_body(&o, "0123abcdef");
  assert_json_str(body, "version", "0123abcdef");
  json_decref(body);
  assert_int_equal(cli_dataset_sync_parse(ARGC(named), named, &o, &e), 0);
  assert_string_equal(o.version, "latest");
}

static void
test_dataset_sync_rejects_bad_versions_names_and_missing_site(void **state)
{
  char id64[80];
  char id65[80];
  char *full[] = {"sync", id64, "--site", "s", NULL};
  char *too_long[] = {"sync", id65, "--site", "s", NULL};
  char *empty[] = {"sync", "ds@", "--site", "s", NULL};
  char *not_hex[] = {"sync", "ds@xyz", "--site", "s", NULL};
  char *bad_name[] = {"sync", "@abc", "--site", "s", NULL};
  char *no_site[] = {"sync", "ds@abc", NULL};
  char *bad_site[] = {"sync", "ds", "--site", "\xff", NULL};
  char *none[] = {"sync", "--site", "s", NULL};
  struct cli_dataset_sync o;
  struct err e = {0};

  (void)state;
  snprintf(id64, sizeof(id64), "ds@%064d", 7);
  snprintf(id65, sizeof(id65), "ds@%065d", 7);
  assert_int_equal(cli_dataset_sync_parse(ARGC(full), full, &o, &e), 0);
  assert_int_equal(strlen(o.version), CLI_VERSION_LEN);
  assert_int_equal(
      cli_dataset_sync_parse(ARGC(too_long), too_long, &o, &e),
      ERR_INVALID);
  assert_non_null(strstr(e.msg, "version '"));
  assert_int_equal(cli_dataset_sync_parse(ARGC(empty), empty, &o, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "version ''"));
  assert_int_equal(cli_dataset_sync_parse(ARGC(not_hex), not_hex, &o, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "version 'xyz'"));
  assert_int_equal(
      cli_dataset_sync_parse(ARGC(bad_name), bad_name, &o, &e),
      ERR_INVALID);
  assert_non_null(strstr(e.msg, "dataset name in '@abc'"));
  assert_int_equal(cli_dataset_sync_parse(ARGC(no_site), no_site, &o, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, "option '--site' is needed");
  assert_int_equal(
      cli_dataset_sync_parse(ARGC(bad_site), bad_site, &o, &e),
      ERR_INVALID);
  assert_non_null(strstr(e.msg, "UTF-8"));
  assert_int_equal(cli_dataset_sync_parse(ARGC(none), none, &o, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "NAME[@VERSION]"));
}

/* ---- tables ---- */

static char *
render(const struct cli_table *t)
{
  struct buf b;

  buf_init(&b, 1 << 20);
  assert_int_equal(cli_table_render(t, &b), 0);
  return buf_take(&b, NULL);
}

static void
test_table_aligns_columns_without_trailing_blanks(void **state)
{
  static const char *const head[] = {"ID", "NAME", "STATE"};
  struct cli_table t;
  char *out;

  (void)state;
  cli_table_init(&t, head, 3);
  cli_table_set_right(&t, 0);
  cli_table_add(&t, (const char *[]){"7", "train", "running"});
  cli_table_add(&t, (const char *[]){"1042", "x", ""});
  out = render(&t);
  assert_string_equal(out, "  ID  NAME   STATE\n"
                           "   7  train  running\n"
                           "1042  x\n");
  free(out);
  cli_table_release(&t);
}

/* Rows are kept in order however many there are (the cell array grows
 * as rows come). */
static void
test_table_keeps_every_row_of_a_long_table(void **state)
{
  static const char *const head[] = {"ID", "NAME", "STATE"};
  struct cli_table t;
  char id[16];
  char want[64];
  char *out;
  const char *line;
  int i;

  (void)state;
  cli_table_init(&t, head, 3);
  for (i = 0; i < 1000; i++) {
    snprintf(id, sizeof(id), "%d", i);
    cli_table_add(&t, (const char *[]){id, "n", "queued"});
  }
  out = render(&t);
  line = out;
  for (i = -1; i < 1000; i++) {
    if (i >= 0) {
      snprintf(want, sizeof(want), "%-4d n     queued\n", i);
      assert_memory_equal(line, want, strlen(want));
    }
    line = strchr(line, '\n');
    assert_non_null(line);
    line++;
  }
  assert_string_equal(line, "");
  free(out);
  cli_table_release(&t);
}

static void
test_table_cuts_long_cells_with_an_ellipsis(void **state)
{
  static const char *const head[] = {"NAME", "STATE"};
  struct cli_table t;
  char *out;

  (void)state;
  cli_table_init(&t, head, 2);
  cli_table_set_max(&t, 0, 10);
  cli_table_add(&t, (const char *[]){"a-very-long-job-name", "queued"});
  cli_table_add(&t, (const char *[]){"exactly-10", "running"});
  out = render(&t);
  assert_string_equal(out, "NAME        STATE\n"
                           "a-very-...  queued\n"
                           "exactly-10  running\n");
  free(out);
  cli_table_release(&t);
}

static void
test_table_counts_utf8_characters_not_bytes(void **state)
{
  static const char *const head[] = {"NAME", "X"};
  struct cli_table t;
  char *out;

  (void)state;
  cli_table_init(&t, head, 2);
  cli_table_set_max(&t, 0, 5);
  /* "héllo" is 5 characters in 6 bytes and fits; the 7 characters of
   * "日本語のジョブ" (21 bytes) are cut to 2 and the ellipsis. */
  cli_table_add(&t, (const char *[]){"h\xc3\xa9llo", "1"});
  cli_table_add(&t, (const char *[]){"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"
                                     "\xe3\x81\xae\xe3\x82\xb8\xe3\x83\xa7"
                                     "\xe3\x83\x96",
                                     "2"});
  out = render(&t);
  assert_string_equal(out, "NAME   X\n"
                           "h\xc3\xa9llo  1\n"
                           "\xe6\x97\xa5\xe6\x9c\xac...  2\n");
  free(out);
  cli_table_release(&t);
}

static void
test_table_replaces_control_characters(void **state)
{
  static const char *const head[] = {"NAME"};
  struct cli_table t;
  char *out;

  (void)state;
  cli_table_init(&t, head, 1);
  cli_table_add(&t, (const char *[]){"evil\x1b[2J\nname"});
  cli_table_add(&t, (const char *[]){NULL});
  out = render(&t);
  assert_string_equal(out, "NAME\nevil?[2J?name\n\n");
  free(out);
  cli_table_release(&t);
}

static void
test_table_key_value_rows_skip_absent_values(void **state)
{
  struct cli_table t;
  char *out;

  (void)state;
  cli_table_init(&t, NULL, 2);
  cli_table_add_kv(&t, "id", "42");
  cli_table_add_kv(&t, "reason", NULL);
  cli_table_add_kv(&t, "alloc", "");
  cli_table_add_kv(&t, "remote id", "1234");
  out = render(&t);
  assert_string_equal(out, "id:         42\n"
                           "remote id:  1234\n");
  free(out);
  cli_table_release(&t);
}

/* ---- formatting ---- */

static void
test_durations_read_in_their_two_largest_units(void **state)
{
  static const struct {
    int64_t s;
    const char *want;
  } cases[] = {
      {-5, "0s"},        {0, "0s"},          {59, "59s"},
      {60, "1m"},        {200, "3m 20s"},    {3599, "59m 59s"},
      {3600, "1h"},      {7500, "2h 5m"},    {86399, "23h 59m"},
      {86400, "1d"},     {356400, "4d 3h"},  {200000, "2d 7h"},
      {INT64_MAX, "106751991167300d 15h"},
  };
  char out[CLI_FMT_SIZE];

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cli_fmt_duration(cases[i].s, out, sizeof(out));
    assert_string_equal(out, cases[i].want);
  }
}

static void
test_micro_dollars_print_with_all_six_decimals(void **state)
{
  static const struct {
    int64_t micro;
    const char *want;
  } cases[] = {
      {1905817, "1.905817"}, {78750, "0.078750"}, {0, "0.000000"},
      {6880000, "6.880000"}, {-1500000, "-1.500000"}, {-5, "-0.000005"},
  };
  char out[CLI_FMT_SIZE];

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cli_fmt_micro_dollars(cases[i].micro, out, sizeof(out));
    assert_string_equal(out, cases[i].want);
  }
}

static void
test_job_time_is_age_until_started_then_elapsed(void **state)
{
  /* now = 2026-11-21T14:10:00Z */
  int64_t now = 1795269600000LL + 600000;
  json_t *queued = json_pack("{s:s, s:n}", "created_at",
                             "2026-11-21T14:00:00.000Z", "started_at");
  json_t *running = json_pack("{s:s, s:s}", "created_at",
                              "2026-11-21T13:00:00Z", "started_at",
                              "2026-11-21T14:08:00Z");
  json_t *ended = json_pack("{s:s, s:s, s:s}", "created_at",
                            "2026-11-21T13:00:00Z", "started_at",
                            "2026-11-21T13:00:00Z", "ended_at",
                            "2026-11-21T14:01:05Z");
  json_t *none = json_object();
  char out[CLI_FMT_SIZE];

  (void)state;
  cli_fmt_job_time(queued, now, out, sizeof(out));
  assert_string_equal(out, "10m");
  cli_fmt_job_time(running, now, out, sizeof(out));
  assert_string_equal(out, "2m");
  cli_fmt_job_time(ended, now, out, sizeof(out));
  assert_string_equal(out, "1h 1m");
  cli_fmt_job_time(none, now, out, sizeof(out));
  assert_string_equal(out, "-");
  json_decref(queued);
  json_decref(running);
  json_decref(ended);
  json_decref(none);
}

static void
test_gpus_and_exit_cells(void **state)
{
  char out[CLI_FMT_SIZE];
  json_t *code = json_pack("{s:i, s:n}", "exit_code", 3, "signal");
  json_t *killed = json_pack("{s:n, s:i}", "exit_code", "signal", 9);
  json_t *odd = json_pack("{s:i, s:i}", "exit_code", 1, "signal", 77);
  json_t *running = json_pack("{s:n, s:n}", "exit_code", "signal");

  (void)state;
  cli_fmt_gpus(2, "h100", out, sizeof(out));
  assert_string_equal(out, "2xh100");
  cli_fmt_gpus(4, NULL, out, sizeof(out));
  assert_string_equal(out, "4");
  cli_fmt_gpus(0, "h100", out, sizeof(out));
  assert_string_equal(out, "0");
  cli_fmt_exit(code, out, sizeof(out));
  assert_string_equal(out, "3");
  cli_fmt_exit(killed, out, sizeof(out));
  assert_string_equal(out, "SIGKILL");
  cli_fmt_exit(odd, out, sizeof(out));
  assert_string_equal(out, "sig 77");
  cli_fmt_exit(running, out, sizeof(out));
  assert_string_equal(out, "");
  json_decref(code);
  json_decref(killed);
  json_decref(odd);
  json_decref(running);
}

static void
test_time_limits_print_in_slurm_form(void **state)
{
  char out[CLI_FMT_SIZE];
  json_t *v;

  (void)state;
  v = json_integer(90);
  cli_fmt_time_limit(v, out, sizeof(out));
  assert_string_equal(out, "01:30:00");
  json_decref(v);
  v = json_string("1-12:00:00");
  cli_fmt_time_limit(v, out, sizeof(out));
  assert_string_equal(out, "1-12:00:00");
  json_decref(v);
  v = json_string("UNLIMITED");
  cli_fmt_time_limit(v, out, sizeof(out));
  assert_string_equal(out, "unlimited");
  json_decref(v);
  cli_fmt_time_limit(NULL, out, sizeof(out));
  assert_string_equal(out, "-");
}

static void
test_site_gpus_show_use_per_type(void **state)
{
  json_t *gpus = json_pack("[{s:s,s:i,s:i},{s:s,s:i,s:i}]", "type", "h100",
                           "total", 8, "in_use", 2, "type", "a100", "total",
                           4, "in_use", 0);
  json_t *empty = json_array();
  struct buf b;

  (void)state;
  buf_init(&b, 1024);
  assert_int_equal(cli_fmt_site_gpus(gpus, &b), 0);
  assert_string_equal(buf_str(&b), "h100 2/8, a100 0/4");
  buf_reset(&b);
  assert_int_equal(cli_fmt_site_gpus(empty, &b), 0);
  assert_string_equal(buf_str(&b), "-");
  buf_release(&b);
  json_decref(gpus);
  json_decref(empty);
}

static void
test_command_lines_are_shell_quoted(void **state)
{
  json_t *argv = json_pack("[s,s,s,s,s]", "python", "train.py", "--msg",
                           "it's a test", "");
  struct buf b;

  (void)state;
  buf_init(&b, 1024);
  assert_int_equal(cli_fmt_argv(argv, &b), 0);
  assert_string_equal(buf_str(&b),
                      "python train.py --msg 'it'\\''s a test' ''");
  buf_release(&b);
  json_decref(argv);
}

/* ---- the completion scripts ---- */

/*
 * The words of the script's line that starts with prefix, between the
 * quotes that follow it, as " w1 w2 ... " in out (so " --site " finds a
 * word); fails the test when there is no such line.
 */
static void
script_words(const char *script, const char *prefix, char *out, size_t len)
{
  const char *p = script;
  const char *q;
  const char *end;

  for (;;) {
    assert_non_null(p);
    if (strncmp(p, prefix, strlen(prefix)) == 0)
      break;
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  q = strchr(p, '\'');
  assert_non_null(q);
  end = strchr(q + 1, '\'');
  assert_non_null(end);
  assert_true((size_t)(end - q) + 2 < len);
  snprintf(out, len, " %.*s ", (int)(end - q - 1), q + 1);
}

static int
has_word(const char *words, const char *dashes, const char *word)
{
  char w[160];

  snprintf(w, sizeof(w), " %s%s ", dashes, word);
  return strstr(words, w) != NULL;
}

static void
check_script_names_everything(const char *shell)
{
  struct buf out;
  struct err e = {0};
  char words[4096];
  char prefix[128];
  const char *name;
  int has_arg;

  buf_init(&out, 1 << 20);
  assert_int_equal(cli_complete_script(shell, &out, &e), 0);
  script_words(buf_str(&out), "_tenbin_commands=", words, sizeof(words));
  for (size_t i = 0; i < cli_ncommand_names; i++)
    assert_true(has_word(words, "", cli_command_names[i]));
  assert_false(has_word(words, "", "__complete"));
  script_words(buf_str(&out), "_tenbin_after=", words, sizeof(words));
  for (size_t i = 0; (name = cli_global_option(i, &has_arg)) != NULL; i++)
    assert_true(has_word(words, "--", name));
  for (size_t i = 0; i < cli_comp_nspecs; i++) {
    const struct cli_comp_spec *sp = &cli_comp_specs[i];

    snprintf(prefix, sizeof(prefix), "    %s/%s) echo '", sp->cmd,
             sp->sub != NULL ? sp->sub : "");
    script_words(buf_str(&out), prefix, words, sizeof(words));
    for (size_t k = 0; sp->opts[k].name != NULL; k++)
      assert_true(has_word(words, "--", sp->opts[k].name));
    if (sp->sub != NULL) {
      snprintf(prefix, sizeof(prefix), "    %s) echo '", sp->cmd);
      script_words(buf_str(&out), prefix, words, sizeof(words));
      assert_true(has_word(words, "", sp->sub));
    }
  }
  buf_release(&out);
}

static void
test_completion_scripts_name_every_command_and_option(void **state)
{
  (void)state;
  check_script_names_everything("bash");
  check_script_names_everything("zsh");
}

/* A command without an entry would complete none of its options. */
static void
test_every_command_has_its_option_table_for_completion(void **state)
{
  (void)state;
  for (size_t i = 0; i < cli_ncommand_names; i++) {
    int found = 0;

    for (size_t j = 0; j < cli_comp_nspecs; j++)
      found |= strcmp(cli_comp_specs[j].cmd, cli_command_names[i]) == 0;
    if (!found)
      fail_msg("command '%s' has no completion entry", cli_command_names[i]);
  }
  for (size_t j = 0; j < cli_comp_nspecs; j++) {
    int found = 0;

    for (size_t i = 0; i < cli_ncommand_names; i++)
      found |= strcmp(cli_comp_specs[j].cmd, cli_command_names[i]) == 0;
    assert_true(found);
  }
}

/* The script reads an option's value by its name alone, so a name takes
 * a value in every table or in none. */
static void
test_an_option_takes_a_value_everywhere_or_nowhere(void **state)
{
  (void)state;
  for (size_t i = 0; i < cli_comp_nspecs; i++) {
    const struct option *a = cli_comp_specs[i].opts;

    for (size_t k = 0; a[k].name != NULL; k++) {
      if (cli_comp_option_value(a[k].name) != CLI_COMP_NONE)
        assert_int_equal(a[k].has_arg, required_argument);
      for (size_t j = 0; j < cli_comp_nspecs; j++) {
        const struct option *b = cli_comp_specs[j].opts;

        for (size_t m = 0; b[m].name != NULL; m++)
          if (strcmp(a[k].name, b[m].name) == 0 &&
              (a[k].has_arg != no_argument) != (b[m].has_arg != no_argument))
            fail_msg("option '--%s' takes a value in one table only",
                     a[k].name);
      }
    }
  }
}

static void
test_completion_for_another_shell_is_a_usage_error(void **state)
{
  struct buf out;
  struct err e = {0};

  (void)state;
  buf_init(&out, 1 << 20);
  assert_int_equal(cli_complete_script("fish", &out, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'fish'"));
  buf_release(&out);
  buf_init(&out, 64);
  assert_int_equal(cli_complete_script("bash", &out, &e), ERR_TOO_LARGE);
  buf_release(&out);
}

static void
test_complete_values_put_unfinished_jobs_first(void **state)
{
  const struct cli_complete_source *src;
  json_t *reply = json_pack(
      "{s:[{s:i, s:s}, {s:i, s:s}, {s:i, s:s}, {s:s, s:s}, {s:i}]}", "jobs",
      "id", 9, "state", "succeeded", "id", 8, "state", "running", "id", 7,
      "state", "queued", "id", "6", "state", "queued", "id", -1);
  struct buf out;

  (void)state;
  buf_init(&out, 1 << 20);
  assert_int_equal(cli_complete_sources("jobs", &src), 1);
  assert_int_equal(cli_complete_values(src, reply, &out), 0);
  assert_string_equal(buf_str(&out), "8\n7\n9\n");
  assert_int_equal(cli_complete_sources("nodes", &src), 0);
  assert_null(src);
  buf_release(&out);
  json_decref(reply);
}

/* Names are the server's: one a shell would split or expand is left out,
 * and projects read from two replies come once. */
static void
test_complete_values_drop_odd_words_and_repeats(void **state)
{
  const struct cli_complete_source *src;
  char long_name[CLI_COMPLETE_MAX_VALUE + 2];
  json_t *budgets;
  json_t *jobs;
  struct buf out;

  (void)state;
  memset(long_name, 'a', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = '\0';
  budgets = json_pack("{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:i}, {}]}",
                      "budgets", "project", "alpha", "project", "a b",
                      "project", "$(reboot)", "project", long_name,
                      "project", 3);
  jobs = json_pack("{s:[{s:s}, {s:s}, {s:s}]}", "jobs", "project", "beta",
                   "project", "alpha", "project", "");
  buf_init(&out, 1 << 20);
  assert_int_equal(cli_complete_sources("projects", &src), 2);
  assert_int_equal(cli_complete_values(&src[0], budgets, &out), 0);
  assert_int_equal(cli_complete_values(&src[1], jobs, &out), 0);
  assert_string_equal(buf_str(&out), "alpha\nbeta\n");
  buf_release(&out);
  json_decref(budgets);
  json_decref(jobs);
}

static void
test_complete_values_stop_at_the_cap(void **state)
{
  const struct cli_complete_source *src;
  json_t *sites = json_array();
  json_t *reply = json_pack("{s:o}", "sites", sites);
  struct buf out;
  size_t lines = 0;

  (void)state;
  for (int i = 0; i < CLI_COMPLETE_MAX_VALUES + 10; i++) {
    char name[32];

    snprintf(name, sizeof(name), "s%d", i);
    json_array_append_new(sites, json_pack("{s:s}", "name", name));
  }
  buf_init(&out, 1 << 20);
  assert_int_equal(cli_complete_sources("sites", &src), 1);
  assert_int_equal(cli_complete_values(src, reply, &out), 0);
  for (const char *p = buf_str(&out); *p != '\0'; p++)
    lines += *p == '\n';
  assert_int_equal(lines, CLI_COMPLETE_MAX_VALUES);
  buf_release(&out);
  json_decref(reply);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_sets_every_flag_in_the_body),
      cmocka_unit_test(test_submit_sends_only_given_fields),
      cmocka_unit_test(test_submit_repeated_env_and_param_build_objects),
      cmocka_unit_test(
          test_submit_keeps_dashes_of_the_command_after_double_dash),
      cmocka_unit_test(test_submit_command_starts_at_first_non_option),
      cmocka_unit_test(test_submit_with_bad_gpus_is_a_usage_error_naming_it),
      cmocka_unit_test(test_submit_accepts_gpu_bounds),
      cmocka_unit_test(test_submit_with_zero_nodes_is_rejected),
      cmocka_unit_test(test_submit_time_minutes_are_sent_as_integer),
      cmocka_unit_test(test_submit_with_bad_time_is_rejected),
      cmocka_unit_test(test_submit_without_command_or_workload_is_rejected),
      cmocka_unit_test(test_submit_param_without_workload_is_rejected),
      cmocka_unit_test(test_submit_env_without_key_or_equals_is_rejected),
      cmocka_unit_test(test_submit_unknown_option_is_named),
      cmocka_unit_test(test_submit_option_without_value_is_named),
      cmocka_unit_test(test_submit_help_is_reported_not_an_error),
      cmocka_unit_test(test_submit_idempotency_key_is_checked),
      cmocka_unit_test(test_submit_with_invalid_utf8_is_rejected),
      cmocka_unit_test(test_sbatch_body_has_its_flags_and_the_script),
      cmocka_unit_test(test_sbatch_needs_exactly_one_script),
      cmocka_unit_test(test_sbatch_option_after_the_script_is_refused_not_taken),
      cmocka_unit_test(test_sbatch_account_sets_the_project_over_the_script),
      cmocka_unit_test(test_sbatch_options_override_the_scripts_directives),
      cmocka_unit_test(
          test_sbatch_without_kept_options_leaves_the_scripts_alone),
      cmocka_unit_test(test_sbatch_job_is_named_after_the_script_file),
      cmocka_unit_test(test_sbatch_bad_options_are_named),
      cmocka_unit_test(test_sbatch_stdin_dash_is_a_script_argument),
      cmocka_unit_test(test_sbatch_empty_bad_or_non_utf8_script_is_rejected),
      cmocka_unit_test(test_read_file_reads_up_to_the_cap_and_no_further),
      cmocka_unit_test(test_read_file_missing_names_the_file),
      cmocka_unit_test(test_global_options_fall_back_to_env_then_default),
      cmocka_unit_test(test_global_unknown_option_is_a_usage_error),
      cmocka_unit_test(test_global_options_after_the_command_are_taken_out),
      cmocka_unit_test(test_words_after_submit_double_dash_are_never_global),
      cmocka_unit_test(test_submit_command_keeps_words_that_look_global),
      cmocka_unit_test(test_sbatch_script_arguments_are_never_global),
      cmocka_unit_test(test_option_value_is_never_a_global_option),
      cmocka_unit_test(test_global_option_misuse_after_the_command_is_named),
      cmocka_unit_test(test_jobs_options_are_checked),
      cmocka_unit_test(test_jobs_path_escapes_every_value),
      cmocka_unit_test(test_url_escape_keeps_only_unreserved_bytes),
      cmocka_unit_test(test_logs_follow_flag_may_come_after_the_id),
      cmocka_unit_test(test_job_ids_must_be_positive_integers),
      cmocka_unit_test(test_positional_counts_are_enforced),
      cmocka_unit_test(test_submit_and_sbatch_pass_the_dataset_through),
      cmocka_unit_test(test_dataset_names_follow_the_contract),
      cmocka_unit_test(test_dataset_add_builds_the_body_with_options_anywhere),
      cmocka_unit_test(test_dataset_add_needs_name_site_and_path),
      cmocka_unit_test(
          test_prices_set_builds_the_body_and_names_what_is_missing),
      cmocka_unit_test(
          test_report_options_travel_escaped_with_a_default_grouping),
      cmocka_unit_test(
          test_budget_set_builds_the_body_and_names_what_is_wrong),
      cmocka_unit_test(test_dataset_name_commands_take_one_valid_name),
      cmocka_unit_test(test_dataset_sync_splits_name_and_version),
      cmocka_unit_test(
          test_dataset_sync_rejects_bad_versions_names_and_missing_site),
      cmocka_unit_test(test_table_aligns_columns_without_trailing_blanks),
      cmocka_unit_test(test_table_keeps_every_row_of_a_long_table),
      cmocka_unit_test(test_table_cuts_long_cells_with_an_ellipsis),
      cmocka_unit_test(test_table_counts_utf8_characters_not_bytes),
      cmocka_unit_test(test_table_replaces_control_characters),
      cmocka_unit_test(test_table_key_value_rows_skip_absent_values),
      cmocka_unit_test(test_durations_read_in_their_two_largest_units),
      cmocka_unit_test(test_micro_dollars_print_with_all_six_decimals),
      cmocka_unit_test(test_job_time_is_age_until_started_then_elapsed),
      cmocka_unit_test(test_gpus_and_exit_cells),
      cmocka_unit_test(test_time_limits_print_in_slurm_form),
      cmocka_unit_test(test_site_gpus_show_use_per_type),
      cmocka_unit_test(test_command_lines_are_shell_quoted),
      cmocka_unit_test(test_completion_scripts_name_every_command_and_option),
      cmocka_unit_test(test_every_command_has_its_option_table_for_completion),
      cmocka_unit_test(test_an_option_takes_a_value_everywhere_or_nowhere),
      cmocka_unit_test(test_completion_for_another_shell_is_a_usage_error),
      cmocka_unit_test(test_complete_values_put_unfinished_jobs_first),
      cmocka_unit_test(test_complete_values_drop_odd_words_and_repeats),
      cmocka_unit_test(test_complete_values_stop_at_the_cap),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
