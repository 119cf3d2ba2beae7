/*
 * Tests for spec/jobspec.c: validation of every field of a job spec, the
 * merge with a script's #SBATCH directives, and the canonical JSON form
 * (to_json then from_json gives an equal spec).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/jobspec.h"
#include "util/buf.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* Parse JSON text (duplicates rejected) into a fresh spec. */
static int
parse_text(const char *text, struct job_spec *s, json_t *warnings,
           struct err *e)
{
  json_error_t jerr;
  json_t *obj = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  int rc;

  if (obj == NULL)
    fail_msg("test JSON does not parse: %s: %s", jerr.text, text);
  jobspec_init(s);
  err_clear(e);
  rc = jobspec_from_json(s, obj, warnings, e);
  json_decref(obj);
  return rc;
}

/* Expect text to be rejected with ERR_INVALID and a message holding what. */
static void
expect_invalid(const char *text, const char *what)
{
  struct job_spec s;
  struct err e;

  assert_int_equal(parse_text(text, &s, NULL, &e), ERR_INVALID);
  assert_int_equal(e.code, ERR_INVALID);
  assert_contains(e.msg, what);
  /* A rejected spec is handed back released. */
  assert_null(s.name);
  assert_null(s.argv);
  assert_null(s.script);
  jobspec_release(&s);
}

static void
expect_valid(const char *text, struct job_spec *s)
{
  struct err e;

  if (parse_text(text, s, NULL, &e) != 0)
    fail_msg("rejected: %s: %s", e.msg, text);
}

static void
assert_str_eq_or_null(const char *a, const char *b)
{
  if (a == NULL || b == NULL)
    assert_true(a == b);
  else
    assert_string_equal(a, b);
}

static void
assert_strv_equal(char *const *a, char *const *b)
{
  size_t i;

  assert_int_equal(strv_len(a), strv_len(b));
  assert_true((a == NULL) == (b == NULL));
  for (i = 0; i < strv_len(a); i++)
    assert_string_equal(a[i], b[i]);
}

static void
assert_spec_equal(const struct job_spec *a, const struct job_spec *b)
{
  assert_str_eq_or_null(a->name, b->name);
  assert_str_eq_or_null(a->project, b->project);
  assert_str_eq_or_null(a->workload, b->workload);
  assert_strv_equal(a->argv, b->argv);
  assert_str_eq_or_null(a->script, b->script);
  assert_strv_equal(a->env, b->env);
  assert_int_equal(a->export_mode, b->export_mode);
  assert_strv_equal(a->export_names, b->export_names);
  assert_int_equal(a->gpus, b->gpus);
  assert_str_eq_or_null(a->gpu_type, b->gpu_type);
  assert_int_equal(a->nodes, b->nodes);
  assert_int_equal(a->gpus_per_node, b->gpus_per_node);
  assert_int_equal(a->time_limit_s, b->time_limit_s);
  assert_str_eq_or_null(a->site, b->site);
  assert_str_eq_or_null(a->chdir, b->chdir);
  assert_str_eq_or_null(a->stdout_path, b->stdout_path);
  assert_str_eq_or_null(a->stderr_path, b->stderr_path);
  assert_strv_equal(a->sbatch_extra, b->sbatch_extra);
  assert_int_equal(a->hold, b->hold);
  assert_str_eq_or_null(a->dataset, b->dataset);
}

/* to_json, then from_json of that, must give an equal spec. */
static void
assert_round_trips(const struct job_spec *s)
{
  json_t *j = jobspec_to_json(s);
  json_t *j2;
  struct job_spec back;
  struct err e;
  int rc;

  jobspec_init(&back);
  err_clear(&e);
  rc = jobspec_from_json(&back, j, NULL, &e);
  if (rc != 0)
    fail_msg("canonical form rejected: %s", e.msg);
  assert_spec_equal(s, &back);
  /* And the canonical form is a fixed point. */
  j2 = jobspec_to_json(&back);
  assert_true(json_equal(j, j2));
  json_decref(j2);
  json_decref(j);
  jobspec_release(&back);
}

static void
test_minimal_command_gets_defaults(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"/usr/bin/python3\",\"train.py\"]}", &s);
  assert_string_equal(s.name, "python3");
  assert_string_equal(s.project, "default");
  assert_int_equal(s.nodes, 1);
  assert_int_equal(s.gpus, 0);
  assert_int_equal(s.gpus_per_node, 0);
  assert_int_equal(s.time_limit_s, 0);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_ALL);
  assert_null(s.export_names);
  assert_null(s.env);
  assert_null(s.script);
  assert_null(s.gpu_type);
  assert_int_equal(strv_len(s.argv), 2);
  assert_string_equal(s.argv[1], "train.py");
  jobspec_release(&s);
}

static void
test_name_defaults_to_job_when_command_basename_is_empty(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"/opt/bin/\"]}", &s);
  assert_string_equal(s.name, "job");
  jobspec_release(&s);
}

static void
test_name_defaults_to_job_name_directive_of_script(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"script\":\"#!/bin/sh\\n#SBATCH -J from-script\\n"
               "#SBATCH -A research\\nrun\\n\"}",
               &s);
  assert_string_equal(s.name, "from-script");
  assert_string_equal(s.project, "research");
  jobspec_release(&s);
}

static void
test_name_defaults_to_job_for_script_without_job_name(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"script\":\"#!/bin/sh\\nrun\\n\"}", &s);
  assert_string_equal(s.name, "job");
  assert_string_equal(s.project, "default");
  assert_string_equal(s.script, "#!/bin/sh\nrun\n");
  assert_null(s.argv);
  jobspec_release(&s);
}

static void
test_round_trip_of_full_command_spec_is_equal(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"name\":\"train resnet\",\"project\":\"vision\","
               "\"workload\":\"resnet-50\",\"command\":[\"python\","
               "\"-c\",\"print('hi')\"],\"env\":{\"A\":\"1\",\"B\":\"x=y\"},"
               "\"export\":\"HOME,PATH\",\"gpus\":16,\"gpu_type\":\"H100\","
               "\"nodes\":2,\"gpus_per_node\":8,\"time_limit\":\"1-02:03:04\","
               "\"site\":\"onprem\",\"chdir\":\"/scratch/run\","
               "\"output\":\"out-%j.log\",\"error\":\"err-%j.log\","
               "\"hold\":true,\"dataset\":\"imagenet@2024.1\","
               "\"sbatch_extra\":[\"--mem=4G\",\"--exclusive\"]}",
               &s);
  assert_string_equal(s.gpu_type, "h100");
  assert_int_equal(s.time_limit_s, 86400 + 2 * 3600 + 3 * 60 + 4);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  assert_round_trips(&s);
  jobspec_release(&s);
}

static void
test_round_trip_of_minimal_spec_is_equal(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"true\"]}", &s);
  assert_round_trips(&s);
  jobspec_release(&s);
}

static void
test_round_trip_of_script_spec_with_overrides_is_equal(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid(
      "{\"script\":\"#!/bin/bash\\n#SBATCH --job-name=a\\n"
      "#SBATCH --gres=gpu:a100:2 -N 2\\n#SBATCH --time=10\\n"
      "#SBATCH --export=NONE,X=1\\n#SBATCH -H --mem=4G\\nsrun x\\n\","
      "\"export\":\"ALL\",\"hold\":false,\"time_limit\":0,"
      "\"sbatch_extra\":[],\"nodes\":3}",
      &s);
  /* Each JSON value overrode a directive with a default value. */
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_ALL);
  assert_null(s.env);
  assert_int_equal(s.hold, 0);
  assert_int_equal(s.time_limit_s, 0);
  assert_null(s.sbatch_extra);
  assert_int_equal(s.nodes, 3);
  assert_int_equal(s.gpus, 6);
  assert_round_trips(&s);
  jobspec_release(&s);
}

static void
test_round_trip_of_script_total_overriding_per_node_is_equal(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"script\":\"#!/bin/sh\\n#SBATCH --gpus-per-node=2 -N 4\\n"
               "x\\n\",\"gpus\":8}",
               &s);
  assert_int_equal(s.gpus, 8);
  assert_int_equal(s.gpus_per_node, 0);
  assert_round_trips(&s);
  jobspec_release(&s);
}

static void
test_to_json_writes_time_limit_as_clock_and_days(void **state)
{
  struct job_spec s;
  json_t *j;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"time_limit\":90}", &s);
  j = jobspec_to_json(&s);
  assert_string_equal(json_string_value(json_object_get(j, "time_limit")),
                      "01:30:00");
  json_decref(j);
  jobspec_release(&s);

  expect_valid("{\"command\":[\"x\"],\"time_limit\":\"2-0\"}", &s);
  j = jobspec_to_json(&s);
  assert_string_equal(json_string_value(json_object_get(j, "time_limit")),
                      "2-00:00:00");
  json_decref(j);
  jobspec_release(&s);
}

static void
test_to_json_omits_absent_fields(void **state)
{
  struct job_spec s;
  json_t *j;
  static const char *const absent[] = {
    "workload", "script", "env", "export", "gpu_type", "gpus_per_node",
    "time_limit", "site", "chdir", "output", "error", "hold", "dataset",
    "sbatch_extra", NULL};
  int i;

  (void)state;
  expect_valid("{\"command\":[\"x\"]}", &s);
  j = jobspec_to_json(&s);
  for (i = 0; absent[i] != NULL; i++) {
    if (json_object_get(j, absent[i]) != NULL)
      fail_msg("field '%s' written although absent", absent[i]);
  }
  assert_int_equal(json_integer_value(json_object_get(j, "gpus")), 0);
  assert_int_equal(json_integer_value(json_object_get(j, "nodes")), 1);
  json_decref(j);
  jobspec_release(&s);
}

static void
test_to_json_writes_canonical_export_string(void **state)
{
  struct job_spec s;
  json_t *j;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"export\":\"all,B,A=1,B\"}", &s);
  j = jobspec_to_json(&s);
  assert_string_equal(json_string_value(json_object_get(j, "export")),
                      "ALL,B");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(j, "env"), "A")),
      "1");
  json_decref(j);
  jobspec_release(&s);
}

static void
test_unknown_field_is_rejected_naming_it(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"gpu\":2}", "unknown field 'gpu'");
}

static void
test_mistyped_field_is_rejected_naming_it(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"gpus\":\"2\"}", "'gpus'");
  expect_invalid("{\"command\":[\"x\"],\"gpus\":2.5}", "'gpus'");
  expect_invalid("{\"command\":\"x\"}", "'command'");
  expect_invalid("{\"command\":[\"x\"],\"hold\":1}", "'hold'");
  expect_invalid("{\"command\":[\"x\"],\"env\":[\"A=1\"]}", "'env'");
}

static void
test_negative_gpus_is_rejected_with_the_range(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"gpus\":-1}",
                 "field 'gpus': must be between 0 and 4096");
}

static void
test_absurd_gpus_is_rejected_with_the_range(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"gpus\":4097}",
                 "field 'gpus': must be between 0 and 4096");
  expect_invalid("{\"command\":[\"x\"],\"gpus\":9223372036854775807}",
                 "between 0 and 4096");
}

static void
test_nodes_out_of_range_are_rejected_with_the_range(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"nodes\":0}",
                 "field 'nodes': must be between 1 and 1024");
  expect_invalid("{\"command\":[\"x\"],\"nodes\":1025}",
                 "field 'nodes': must be between 1 and 1024");
  expect_invalid("{\"command\":[\"x\"],\"gpus_per_node\":-2}",
                 "field 'gpus_per_node': must be between 0 and 4096");
}

static void
test_empty_command_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[]}", "field 'command': must hold 1 to 256");
}

static void
test_empty_program_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"\",\"x\"]}", "field 'command[0]'");
}

static void
test_non_string_argument_is_rejected_naming_its_index(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\",\"y\",3]}",
                 "field 'command[2]': must be a string");
}

static void
test_too_many_arguments_are_rejected(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\""), 0);
  for (i = 1; i < JOBSPEC_MAX_ARGS + 1; i++)
    assert_int_equal(buf_adds(&b, ",\"a\""), 0);
  assert_int_equal(buf_adds(&b, "]}"), 0);
  expect_invalid(buf_str(&b), "must hold 1 to 256 arguments, got 257");
  buf_release(&b);
}

static void
test_overlong_argument_is_rejected(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\",\""), 0);
  for (i = 0; i < JOBSPEC_MAX_ARG_LEN + 1; i++)
    assert_int_equal(buf_adds(&b, "a"), 0);
  assert_int_equal(buf_adds(&b, "\"]}"), 0);
  expect_invalid(buf_str(&b), "field 'command[1]': longer than 8192 bytes");
  buf_release(&b);
}

static void
test_both_command_and_script_are_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"script\":\"#!/bin/sh\\nx\\n\"}",
                 "'command' and 'script'");
}

static void
test_neither_command_nor_script_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"gpus\":1}", "field 'command': required (or 'script')");
  expect_invalid("{\"command\":null}", "field 'command': required");
}

static void
test_script_without_shebang_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"script\":\"#SBATCH -N 1\\nrun\\n\"}",
                 "field 'script': must start with '#!'");
  expect_invalid("{\"script\":\"\"}", "must start with '#!'");
}

static void
test_oversized_script_is_rejected(void **state)
{
  struct buf b;
  size_t i;

  (void)state;
  buf_init(&b, 1 << 20);
  assert_int_equal(buf_adds(&b, "{\"script\":\"#!/bin/sh\\n"), 0);
  for (i = 0; i < JOBSPEC_MAX_SCRIPT / 8; i++)
    assert_int_equal(buf_adds(&b, "echo hi;"), 0);
  assert_int_equal(buf_adds(&b, "\"}"), 0);
  expect_invalid(buf_str(&b), "field 'script': larger than 524288 bytes");
  buf_release(&b);
}

static void
test_bad_env_key_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"env\":{\"1ABC\":\"v\"}}",
                 "field 'env': '1ABC' is not a variable name");
  expect_invalid("{\"command\":[\"x\"],\"env\":{\"A-B\":\"v\"}}",
                 "'A-B' is not a variable name");
  expect_invalid("{\"command\":[\"x\"],\"env\":{\"\":\"v\"}}",
                 "is not a variable name");
  expect_invalid("{\"command\":[\"x\"],\"env\":{\"A=B\":\"v\"}}",
                 "is not a variable name");
}

static void
test_env_value_that_is_not_a_string_is_rejected_naming_the_key(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"env\":{\"A\":1}}",
                 "field 'env.A': must be a string");
}

static void
test_too_many_env_variables_are_rejected(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\"],\"env\":{"), 0);
  for (i = 0; i < JOBSPEC_MAX_ENV + 1; i++)
    assert_int_equal(buf_addf(&b, "%s\"V%d\":\"1\"", i ? "," : "", i), 0);
  assert_int_equal(buf_adds(&b, "}}"), 0);
  expect_invalid(buf_str(&b), "field 'env': at most 256 variables");
  buf_release(&b);
}

static void
test_name_with_control_character_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"name\":\"a\\nb\"}",
                 "field 'name': must not contain control characters");
  expect_invalid("{\"command\":[\"x\"],\"name\":\"a\\u0085b\"}",
                 "must not contain control characters");
  expect_invalid("{\"command\":[\"x\"],\"name\":\"\"}",
                 "field 'name': must not be empty");
}

static void
test_name_limit_counts_characters_not_bytes(void **state)
{
  struct buf b;
  struct job_spec s;
  int i;

  (void)state;
  buf_init(&b, 1 << 12);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\"],\"name\":\""), 0);
  for (i = 0; i < JOBSPEC_MAX_NAME; i++)
    assert_int_equal(buf_adds(&b, "\xe5\xa4\xa9"), 0); /* U+5929 */
  assert_int_equal(buf_adds(&b, "\"}"), 0);
  expect_valid(buf_str(&b), &s);
  assert_int_equal(strlen(s.name), 3 * JOBSPEC_MAX_NAME);
  jobspec_release(&s);

  buf_reset(&b);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\"],\"name\":\""), 0);
  for (i = 0; i < JOBSPEC_MAX_NAME + 1; i++)
    assert_int_equal(buf_adds(&b, "n"), 0);
  assert_int_equal(buf_adds(&b, "\"}"), 0);
  expect_invalid(buf_str(&b), "field 'name': must be at most 128 characters");
  buf_release(&b);
}

static void
test_strings_with_quotes_and_sql_are_kept_verbatim(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"name\":\"Robert'); DROP TABLE jobs;-- \\\"x\\\" $(id)\","
               "\"command\":[\"sh\",\"-c\",\"echo \\\"it's\\\" `id` $HOME; "
               "rm -rf /\"],\"env\":{\"Q\":\"' OR 1=1 --\"}}",
               &s);
  assert_string_equal(s.name, "Robert'); DROP TABLE jobs;-- \"x\" $(id)");
  assert_string_equal(s.argv[2], "echo \"it's\" `id` $HOME; rm -rf /");
  assert_string_equal(s.env[0], "Q=' OR 1=1 --");
  assert_round_trips(&s);
  jobspec_release(&s);
}

static void
test_project_workload_and_site_follow_the_identifier_pattern(void **state)
{
  struct job_spec s;

  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"project\":\"-x\"}",
                 "field 'project': must match [A-Za-z0-9][A-Za-z0-9._-]");
  expect_invalid("{\"command\":[\"x\"],\"project\":\"a b\"}",
                 "field 'project'");
  expect_invalid("{\"command\":[\"x\"],\"workload\":\"a/b\"}",
                 "field 'workload'");
  expect_invalid("{\"command\":[\"x\"],\"site\":\"\"}", "field 'site'");
  /* 65 characters: one too many. */
  expect_invalid("{\"command\":[\"x\"],\"project\":\"a1234567890123456789012"
                 "345678901234567890123456789012345678901234\"}",
                 "field 'project'");
  expect_valid("{\"command\":[\"x\"],\"project\":\"a12345678901234567890123"
               "4567890123456789012345678901234567890.-_\"}",
               &s);
  assert_int_equal(strlen(s.project), 64);
  jobspec_release(&s);
}

static void
test_gpu_type_is_validated_and_stored_lowercase(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"gpus\":1,\"gpu_type\":\"A100_80G-x\"}",
               &s);
  assert_string_equal(s.gpu_type, "a100_80g-x");
  jobspec_release(&s);
  expect_invalid("{\"command\":[\"x\"],\"gpu_type\":\"a100:2\"}",
                 "field 'gpu_type': must match [A-Za-z0-9_-]{1,31}");
  expect_invalid("{\"command\":[\"x\"],\"gpu_type\":\"\"}",
                 "field 'gpu_type'");
}

static void
test_gpus_per_node_times_nodes_gives_gpus(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"gpus_per_node\":8,\"nodes\":4}", &s);
  assert_int_equal(s.gpus, 32);
  assert_int_equal(s.gpus_per_node, 8);
  jobspec_release(&s);
}

static void
test_gpus_disagreeing_with_gpus_per_node_is_rejected_naming_both(
    void **state)
{
  (void)state;
  expect_invalid(
      "{\"command\":[\"x\"],\"gpus\":8,\"gpus_per_node\":2,\"nodes\":2}",
      "fields 'gpus' and 'gpus_per_node' disagree");
}

static void
test_gpus_per_node_times_nodes_over_the_limit_is_rejected(void **state)
{
  (void)state;
  expect_invalid(
      "{\"command\":[\"x\"],\"gpus_per_node\":8,\"nodes\":1024}",
      "field 'gpus_per_node': 8 per node x 1024 nodes is more than 4096");
}

static void
test_time_limit_accepts_minutes_and_slurm_durations(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"time_limit\":525600}", &s);
  assert_int_equal(s.time_limit_s, 525600LL * 60);
  jobspec_release(&s);
  expect_valid("{\"command\":[\"x\"],\"time_limit\":\"4:30:00\"}", &s);
  assert_int_equal(s.time_limit_s, 4 * 3600 + 30 * 60);
  jobspec_release(&s);
  expect_valid("{\"command\":[\"x\"],\"time_limit\":\"UNLIMITED\"}", &s);
  assert_int_equal(s.time_limit_s, 0);
  jobspec_release(&s);
}

static void
test_time_limit_out_of_range_or_garbage_is_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"time_limit\":-1}",
                 "field 'time_limit': must be between 0 and 525600 minutes");
  expect_invalid("{\"command\":[\"x\"],\"time_limit\":525601}",
                 "field 'time_limit': must be between 0 and 525600");
  expect_invalid("{\"command\":[\"x\"],\"time_limit\":\"soon\"}",
                 "field 'time_limit': invalid duration 'soon'");
  expect_invalid("{\"command\":[\"x\"],\"time_limit\":\"366-0\"}",
                 "field 'time_limit': invalid duration");
}

static void
test_deadline_is_an_iso_time_kept_to_the_millisecond(void **state)
{
  struct job_spec s;
  json_t *back;

  (void)state;
  expect_valid("{\"command\":[\"x\"],"
               "\"deadline\":\"2026-11-28T18:00:00.250Z\"}", &s);
  assert_int_equal(s.deadline_ms, 1795888800250LL);
  back = jobspec_to_json(&s);
  assert_string_equal(json_string_value(json_object_get(back, "deadline")),
                      "2026-11-28T18:00:00.250Z");
  json_decref(back);
  jobspec_release(&s);
  expect_invalid("{\"command\":[\"x\"],\"deadline\":\"tomorrow\"}",
                 "field 'deadline': 'tomorrow' is not a time");
  expect_invalid("{\"command\":[\"x\"],\"deadline\":1796061600}",
                 "field 'deadline'");
}

static void
test_export_forms_set_mode_names_and_env(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"export\":\"NONE\"}", &s);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  assert_null(s.export_names);
  jobspec_release(&s);

  expect_valid("{\"command\":[\"x\"],\"export\":\"HOME,PATH\"}", &s);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  assert_int_equal(strv_len(s.export_names), 2);
  assert_string_equal(s.export_names[1], "PATH");
  jobspec_release(&s);

  expect_valid("{\"command\":[\"x\"],\"export\":\"ALL,A=1,B=x=y,HOME\"}", &s);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_ALL);
  assert_int_equal(strv_len(s.env), 2);
  assert_string_equal(s.env[0], "A=1");
  assert_string_equal(s.env[1], "B=x=y");
  assert_string_equal(s.export_names[0], "HOME");
  jobspec_release(&s);
}

static void
test_bad_export_strings_are_rejected(void **state)
{
  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"export\":\"ALL,NONE\"}",
                 "field 'export': ALL and NONE exclude each other");
  expect_invalid("{\"command\":[\"x\"],\"export\":\"ALL,,A\"}",
                 "field 'export': empty entry");
  expect_invalid("{\"command\":[\"x\"],\"export\":\"9X=1\"}",
                 "field 'export': '9X' is not a variable name");
  expect_invalid("{\"command\":[\"x\"],\"export\":\"\"}",
                 "field 'export': must not be empty");
}

static void
test_env_object_overrides_an_export_value(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"export\":\"ALL,A=1,B=2\","
               "\"env\":{\"B\":\"3\",\"C\":\"4\"}}",
               &s);
  assert_int_equal(strv_len(s.env), 3);
  assert_string_equal(s.env[0], "A=1");
  assert_string_equal(s.env[1], "B=3");
  assert_string_equal(s.env[2], "C=4");
  jobspec_release(&s);
}

static void
test_dataset_must_be_name_or_name_at_version(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"dataset\":\"imagenet@v2.1\"}", &s);
  assert_string_equal(s.dataset, "imagenet@v2.1");
  jobspec_release(&s);
  expect_valid("{\"command\":[\"x\"],\"dataset\":\"imagenet@latest\"}", &s);
  jobspec_release(&s);
  /* A bare name is its latest version, resolved by the broker. */
  expect_valid("{\"command\":[\"x\"],\"dataset\":\"imagenet\"}", &s);
  assert_string_equal(s.dataset, "imagenet");
  jobspec_release(&s);
  expect_invalid("{\"command\":[\"x\"],\"dataset\":\".imagenet\"}",
                 "field 'dataset': must be NAME or NAME@VERSION");
  expect_invalid("{\"command\":[\"x\"],\"dataset\":\"a/b\"}",
                 "field 'dataset'");
  expect_invalid("{\"command\":[\"x\"],\"dataset\":\"@v1\"}",
                 "field 'dataset'");
  expect_invalid("{\"command\":[\"x\"],\"dataset\":\"a@\"}",
                 "field 'dataset'");
  expect_invalid("{\"command\":[\"x\"],\"dataset\":\"a@b@c\"}",
                 "field 'dataset'");
}

static void
test_paths_are_limited_and_free_of_control_characters(void **state)
{
  struct buf b;
  int i;

  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"output\":\"a\\nb\"}",
                 "field 'output': must not contain control characters");
  expect_invalid("{\"command\":[\"x\"],\"chdir\":\"\"}",
                 "field 'chdir': must not be empty");
  buf_init(&b, 4096);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\"],\"error\":\""), 0);
  for (i = 0; i < JOBSPEC_MAX_PATH + 1; i++)
    assert_int_equal(buf_adds(&b, "p"), 0);
  assert_int_equal(buf_adds(&b, "\"}"), 0);
  expect_invalid(buf_str(&b), "field 'error': must be at most 1024 bytes");
  buf_release(&b);
}

static void
test_sbatch_extra_entries_are_limited(void **state)
{
  struct buf b;
  int i;

  (void)state;
  expect_invalid("{\"command\":[\"x\"],\"sbatch_extra\":[\"mem=4G\"]}",
                 "field 'sbatch_extra[0]': must be an sbatch option");
  expect_invalid("{\"command\":[\"x\"],\"sbatch_extra\":[\"--a\",\"--b\\n"
                 "#SBATCH --c\"]}",
                 "field 'sbatch_extra[1]': must not contain control");
  expect_invalid("{\"command\":[\"x\"],\"sbatch_extra\":[1]}",
                 "field 'sbatch_extra[0]': must be a string");
  buf_init(&b, 4096);
  assert_int_equal(buf_adds(&b, "{\"command\":[\"x\"],\"sbatch_extra\":["),
                   0);
  for (i = 0; i < 65; i++)
    assert_int_equal(buf_addf(&b, "%s\"--x%d\"", i ? "," : "", i), 0);
  assert_int_equal(buf_adds(&b, "]}"), 0);
  expect_invalid(buf_str(&b), "field 'sbatch_extra': at most 64 entries");
  buf_release(&b);
}

static void
test_json_fields_override_script_directives(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"script\":\"#!/bin/sh\\n#SBATCH -J script-name -A sp\\n"
               "#SBATCH --gpus=a100:2 --time=10 -o s.out -D /s\\n"
               "#SBATCH --partition=gpu\\nrun\\n\","
               "\"name\":\"json-name\",\"project\":\"jp\",\"gpus\":4,"
               "\"gpu_type\":\"h100\",\"time_limit\":60,\"chdir\":\"/j\"}",
               &s);
  assert_string_equal(s.name, "json-name");
  assert_string_equal(s.project, "jp");
  assert_int_equal(s.gpus, 4);
  assert_string_equal(s.gpu_type, "h100");
  assert_int_equal(s.time_limit_s, 3600);
  assert_string_equal(s.chdir, "/j");
  /* What the JSON left alone comes from the script. */
  assert_string_equal(s.stdout_path, "s.out");
  assert_int_equal(strv_len(s.sbatch_extra), 1);
  assert_string_equal(s.sbatch_extra[0], "--partition=gpu");
  jobspec_release(&s);
}

static void
test_json_nodes_scale_the_script_gpus_per_node(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"script\":\"#!/bin/sh\\n#SBATCH --gres=gpu:4 -N 1\\nx\\n\","
               "\"nodes\":3}",
               &s);
  assert_int_equal(s.nodes, 3);
  assert_int_equal(s.gpus_per_node, 4);
  assert_int_equal(s.gpus, 12);
  jobspec_release(&s);
}

static void
test_json_export_replaces_the_script_export_values(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"script\":\"#!/bin/sh\\n#SBATCH --export=ALL,A=1\\nx\\n\","
               "\"export\":\"NONE,B=2\"}",
               &s);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  assert_int_equal(strv_len(s.env), 1);
  assert_string_equal(s.env[0], "B=2");
  jobspec_release(&s);
}

static void
test_script_warnings_are_appended(void **state)
{
  struct job_spec s;
  struct err e;
  json_t *warnings = json_array();

  (void)state;
  assert_int_equal(
      parse_text("{\"script\":\"#!/bin/sh\\n#SBATCH --mem=4G\\nx\\n\"}", &s,
                 warnings, &e),
      0);
  assert_int_equal(json_array_size(warnings), 1);
  assert_string_equal(
      json_string_value(json_array_get(warnings, 0)),
      "#SBATCH --mem=4G is not interpreted by tenbin; kept for Slurm sites");
  json_decref(warnings);
  jobspec_release(&s);
}

/*
 * A request's sbatch_extra replaces the script's: a directive it replaced
 * is not sent to Slurm, so no warning may say it is kept.
 */
static void
test_script_warnings_name_only_directives_still_kept(void **state)
{
  struct job_spec s;
  struct err e;
  json_t *warnings = json_array();

  (void)state;
  assert_int_equal(
      parse_text("{\"script\":\"#!/bin/sh\\n#SBATCH --partition=cpu\\n"
                 "#SBATCH --mem=4G\\nx\\n\",\"sbatch_extra\":"
                 "[\"--mem=4G\",\"--partition=gpu\"]}",
                 &s, warnings, &e),
      0);
  assert_int_equal(strv_len(s.sbatch_extra), 2);
  assert_string_equal(s.sbatch_extra[1], "--partition=gpu");
  assert_int_equal(json_array_size(warnings), 1);
  assert_string_equal(
      json_string_value(json_array_get(warnings, 0)),
      "#SBATCH --mem=4G is not interpreted by tenbin; kept for Slurm sites");
  json_decref(warnings);
  jobspec_release(&s);
}

static void
test_script_error_names_the_field_and_the_line(void **state)
{
  (void)state;
  expect_invalid("{\"script\":\"#!/bin/sh\\n#SBATCH -N 1\\n"
                 "#SBATCH --time=abc\\nx\\n\"}",
                 "field 'script': line 3: #SBATCH --time: invalid duration "
                 "'abc'");
}

static void
test_null_field_means_absent(void **state)
{
  struct job_spec s;

  (void)state;
  expect_valid("{\"command\":[\"x\"],\"name\":null,\"gpus\":null,"
               "\"script\":null,\"env\":null}",
               &s);
  assert_string_equal(s.name, "x");
  assert_int_equal(s.gpus, 0);
  jobspec_release(&s);
}

static void
test_string_with_embedded_nul_is_rejected(void **state)
{
  struct job_spec s;
  struct err e;
  json_t *obj = json_pack("{s:[s]}", "command", "x");

  (void)state;
  json_object_set_new(obj, "name", json_stringn("a\0b", 3));
  jobspec_init(&s);
  assert_int_equal(jobspec_from_json(&s, obj, NULL, &e), ERR_INVALID);
  assert_contains(e.msg, "field 'name': must not contain NUL");
  json_decref(obj);
  jobspec_release(&s);
}

static void
test_non_object_is_rejected(void **state)
{
  struct job_spec s;
  struct err e;
  json_t *arr = json_array();

  (void)state;
  jobspec_init(&s);
  assert_int_equal(jobspec_from_json(&s, arr, NULL, &e), ERR_INVALID);
  json_decref(arr);
  jobspec_release(&s);
}

/* The public identifier rule is the one a job's project meets (config
 * checks its project list with it). */
static void
test_ident_problem_is_the_project_rule(void **state)
{
  struct job_spec s;
  struct err e;
  char longest[66];

  (void)state;
  assert_null(jobspec_ident_problem("a"));
  assert_null(jobspec_ident_problem("Vision-2.team_x"));
  memset(longest, 'a', 64);
  longest[64] = '\0';
  assert_null(jobspec_ident_problem(longest));
  longest[64] = 'a';
  longest[65] = '\0';
  assert_non_null(jobspec_ident_problem(longest));
  assert_non_null(jobspec_ident_problem(""));
  assert_non_null(jobspec_ident_problem("-a"));
  assert_non_null(jobspec_ident_problem("a b"));
  assert_int_equal(parse_text("{\"command\":[\"x\"],\"project\":\"a b\"}",
                              &s, NULL, &e),
                   ERR_INVALID);
  assert_contains(e.msg, jobspec_ident_problem("a b"));
  jobspec_release(&s);
}

static void
test_job_state_names_round_trip(void **state)
{
  int i;
  enum job_state st;

  (void)state;
  for (i = 0; i < JOB_STATE_COUNT; i++) {
    assert_int_equal(job_state_parse(job_state_name((enum job_state)i), &st),
                     0);
    assert_int_equal(st, i);
  }
  assert_string_equal(job_state_name(JOB_QUEUED), "queued");
  assert_string_equal(job_state_name(JOB_CANCELLED), "cancelled");
  assert_string_equal(job_state_name(JOB_STAGING), "staging");
  assert_string_equal(job_state_name(JOB_STATE_COUNT), "unknown");
  assert_int_equal(job_state_parse("Queued", &st), ERR_INVALID);
  assert_int_equal(job_state_parse("", &st), ERR_INVALID);
}

static void
test_only_ended_states_are_final(void **state)
{
  (void)state;
  assert_false(job_state_is_final(JOB_QUEUED));
  assert_false(job_state_is_final(JOB_PLACED));
  assert_false(job_state_is_final(JOB_SUBMITTED));
  assert_false(job_state_is_final(JOB_RUNNING));
  assert_false(job_state_is_final(JOB_STAGING));
  assert_true(job_state_is_final(JOB_SUCCEEDED));
  assert_true(job_state_is_final(JOB_FAILED));
  assert_true(job_state_is_final(JOB_CANCELLED));
  assert_true(job_state_is_final(JOB_LOST));
}

static void
test_release_is_null_safe_and_reinitialises(void **state)
{
  struct job_spec s;

  (void)state;
  jobspec_release(NULL);
  expect_valid("{\"command\":[\"x\"],\"nodes\":5}", &s);
  jobspec_release(&s);
  assert_null(s.name);
  assert_int_equal(s.nodes, 1);
  jobspec_release(&s);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_minimal_command_gets_defaults),
    cmocka_unit_test(test_name_defaults_to_job_when_command_basename_is_empty),
    cmocka_unit_test(test_name_defaults_to_job_name_directive_of_script),
    cmocka_unit_test(test_name_defaults_to_job_for_script_without_job_name),
    cmocka_unit_test(test_round_trip_of_full_command_spec_is_equal),
    cmocka_unit_test(test_round_trip_of_minimal_spec_is_equal),
    cmocka_unit_test(test_round_trip_of_script_spec_with_overrides_is_equal),
    cmocka_unit_test(
        test_round_trip_of_script_total_overriding_per_node_is_equal),
    cmocka_unit_test(test_to_json_writes_time_limit_as_clock_and_days),
    cmocka_unit_test(test_to_json_omits_absent_fields),
    cmocka_unit_test(test_to_json_writes_canonical_export_string),
    cmocka_unit_test(test_unknown_field_is_rejected_naming_it),
    cmocka_unit_test(test_mistyped_field_is_rejected_naming_it),
    cmocka_unit_test(test_negative_gpus_is_rejected_with_the_range),
    cmocka_unit_test(test_absurd_gpus_is_rejected_with_the_range),
    cmocka_unit_test(test_nodes_out_of_range_are_rejected_with_the_range),
    cmocka_unit_test(test_empty_command_is_rejected),
    cmocka_unit_test(test_empty_program_is_rejected),
    cmocka_unit_test(test_non_string_argument_is_rejected_naming_its_index),
    cmocka_unit_test(test_too_many_arguments_are_rejected),
    cmocka_unit_test(test_overlong_argument_is_rejected),
    cmocka_unit_test(test_both_command_and_script_are_rejected),
    cmocka_unit_test(test_neither_command_nor_script_is_rejected),
    cmocka_unit_test(test_script_without_shebang_is_rejected),
    cmocka_unit_test(test_oversized_script_is_rejected),
    cmocka_unit_test(test_bad_env_key_is_rejected),
    cmocka_unit_test(
        test_env_value_that_is_not_a_string_is_rejected_naming_the_key),
    cmocka_unit_test(test_too_many_env_variables_are_rejected),
    cmocka_unit_test(test_name_with_control_character_is_rejected),
    cmocka_unit_test(test_name_limit_counts_characters_not_bytes),
    cmocka_unit_test(test_strings_with_quotes_and_sql_are_kept_verbatim),
    cmocka_unit_test(
        test_project_workload_and_site_follow_the_identifier_pattern),
    cmocka_unit_test(test_gpu_type_is_validated_and_stored_lowercase),
    cmocka_unit_test(test_gpus_per_node_times_nodes_gives_gpus),
    cmocka_unit_test(
        test_gpus_disagreeing_with_gpus_per_node_is_rejected_naming_both),
    cmocka_unit_test(
        test_gpus_per_node_times_nodes_over_the_limit_is_rejected),
    cmocka_unit_test(test_time_limit_accepts_minutes_and_slurm_durations),
    cmocka_unit_test(test_time_limit_out_of_range_or_garbage_is_rejected),
    cmocka_unit_test(test_deadline_is_an_iso_time_kept_to_the_millisecond),
    cmocka_unit_test(test_export_forms_set_mode_names_and_env),
    cmocka_unit_test(test_bad_export_strings_are_rejected),
    cmocka_unit_test(test_env_object_overrides_an_export_value),
    cmocka_unit_test(test_dataset_must_be_name_or_name_at_version),
    cmocka_unit_test(test_paths_are_limited_and_free_of_control_characters),
    cmocka_unit_test(test_sbatch_extra_entries_are_limited),
    cmocka_unit_test(test_json_fields_override_script_directives),
    cmocka_unit_test(test_json_nodes_scale_the_script_gpus_per_node),
    cmocka_unit_test(test_json_export_replaces_the_script_export_values),
    cmocka_unit_test(test_script_warnings_are_appended),
    cmocka_unit_test(test_script_warnings_name_only_directives_still_kept),
    cmocka_unit_test(test_script_error_names_the_field_and_the_line),
    cmocka_unit_test(test_null_field_means_absent),
    cmocka_unit_test(test_string_with_embedded_nul_is_rejected),
    cmocka_unit_test(test_non_object_is_rejected),
    cmocka_unit_test(test_ident_problem_is_the_project_rule),
    cmocka_unit_test(test_job_state_names_round_trip),
    cmocka_unit_test(test_only_ended_states_are_final),
    cmocka_unit_test(test_release_is_null_safe_and_reinitialises),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
