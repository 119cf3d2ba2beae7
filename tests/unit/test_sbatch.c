/*
 * Tests for spec/sbatch.c: #SBATCH directives read the way sbatch reads
 * them, the options tenbin interprets, and the ones it keeps for Slurm.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/sbatch.h"
#include "util/buf.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* Parse script into s (initialised here); fail the test on an error. */
static void
parse_ok(const char *script, struct job_spec *s, json_t *warnings)
{
  struct err e;

  jobspec_init(s);
  err_clear(&e);
  if (sbatch_parse(script, s, warnings, &e) != 0)
    fail_msg("rejected: %s", e.msg);
}

/* Expect script to be rejected with a message holding what. */
static void
parse_bad(const char *script, const char *what)
{
  struct job_spec s;
  struct err e;

  jobspec_init(&s);
  err_clear(&e);
  assert_int_equal(sbatch_parse(script, &s, NULL, &e), ERR_INVALID);
  assert_int_equal(e.code, ERR_INVALID);
  assert_contains(e.msg, what);
  jobspec_release(&s);
}

static void
test_long_form_with_equals_sets_fields(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --account=vision\n"
           "#SBATCH --output=o-%j.log\n#SBATCH --error=e-%j.log\n"
           "#SBATCH --chdir=/scratch\nsrun train\n",
           &s, NULL);
  assert_string_equal(s.name, "train");
  assert_string_equal(s.project, "vision");
  assert_string_equal(s.stdout_path, "o-%j.log");
  assert_string_equal(s.stderr_path, "e-%j.log");
  assert_string_equal(s.chdir, "/scratch");
  assert_null(s.sbatch_extra);
  jobspec_release(&s);
}

static void
test_long_form_with_separate_value(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --job-name train --nodes 2\nx\n", &s, NULL);
  assert_string_equal(s.name, "train");
  assert_int_equal(s.nodes, 2);
  jobspec_release(&s);
}

static void
test_short_form_separate_and_attached(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -J name1 -Aproj -N3 -t 5 -o out -e err "
           "-D /d\nx\n",
           &s, NULL);
  assert_string_equal(s.name, "name1");
  assert_string_equal(s.project, "proj");
  assert_int_equal(s.nodes, 3);
  assert_int_equal(s.time_limit_s, 300);
  assert_string_equal(s.stdout_path, "out");
  assert_string_equal(s.stderr_path, "err");
  assert_string_equal(s.chdir, "/d");
  jobspec_release(&s);
}

static void
test_quoting_keeps_spaces_and_the_other_quote(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --job-name=\"my job's #1\"\n"
           "#SBATCH -o '/tmp/a \"b\" c'\n#SBATCH -e x\\ y\nx\n",
           &s, NULL);
  assert_string_equal(s.name, "my job's #1");
  assert_string_equal(s.stdout_path, "/tmp/a \"b\" c");
  assert_string_equal(s.stderr_path, "x y");
  jobspec_release(&s);
}

static void
test_unterminated_quote_is_rejected_naming_the_line(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH -J \"open\nx\n",
            "line 2: #SBATCH: unterminated double quote");
}

static void
test_comment_after_directive_is_ignored(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -N 2   # two nodes -N 8\n"
           "#SBATCH --job-name=a#b # a '#' inside a word is kept\nx\n",
           &s, NULL);
  assert_int_equal(s.nodes, 2);
  assert_string_equal(s.name, "a#b");
  jobspec_release(&s);
}

static void
test_several_options_on_one_line(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -N 2 --gpus-per-node=4 -H\nx\n", &s, NULL);
  assert_int_equal(s.nodes, 2);
  assert_int_equal(s.gpus, 8);
  assert_int_equal(s.hold, 1);
  jobspec_release(&s);
}

static void
test_parsing_stops_at_the_first_command(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n\n# a comment\n   \n#SBATCH -J before\n"
           "module load cuda\n#SBATCH -J after\n#SBATCH --time=abc\n",
           &s, NULL);
  assert_string_equal(s.name, "before");
  jobspec_release(&s);
}

static void
test_indented_or_spaced_sbatch_is_a_comment(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n  #SBATCH -J indented\n# SBATCH -J spaced\n"
           "#SBATCHX -J glued\n#sbatch -J lower\nx\n",
           &s, NULL);
  assert_null(s.name);
  jobspec_release(&s);
}

static void
test_gres_without_type_is_gpus_per_node(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --gres=gpu:4\nx\n", &s, NULL);
  assert_int_equal(s.gpus_per_node, 4);
  assert_int_equal(s.gpus, 4);
  assert_null(s.gpu_type);
  jobspec_release(&s);

  parse_ok("#!/bin/sh\n#SBATCH --gres=gpu\nx\n", &s, NULL);
  assert_int_equal(s.gpus, 1);
  jobspec_release(&s);
}

static void
test_gres_with_type_sets_type_lowercase(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --gres=gpu:A100:2 -N 3\nx\n", &s, NULL);
  assert_string_equal(s.gpu_type, "a100");
  assert_int_equal(s.gpus_per_node, 2);
  assert_int_equal(s.gpus, 6);
  jobspec_release(&s);

  parse_ok("#!/bin/sh\n#SBATCH --gres=gres/gpu:h100\nx\n", &s, NULL);
  assert_string_equal(s.gpu_type, "h100");
  assert_int_equal(s.gpus, 1);
  jobspec_release(&s);
}

static void
test_gres_keeps_other_entries_as_extra(void **state)
{
  struct job_spec s;
  json_t *warnings = json_array();

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --gres=nvme:1,gpu:h100:8,license:x\nx\n", &s,
           warnings);
  assert_int_equal(s.gpus, 8);
  assert_int_equal(strv_len(s.sbatch_extra), 1);
  assert_string_equal(s.sbatch_extra[0], "--gres=nvme:1,license:x");
  assert_int_equal(json_array_size(warnings), 1);
  json_decref(warnings);
  jobspec_release(&s);
}

static void
test_malformed_gres_is_rejected_naming_the_line(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH -N 1\n#SBATCH --gres=gpu:a100:lots\nx\n",
            "line 3: #SBATCH --gres: invalid GPU count");
  parse_bad("#!/bin/sh\n#SBATCH --gres=gpu:2,gpu:3\nx\n",
            "line 2: #SBATCH --gres: more than one gpu entry");
  parse_bad("#!/bin/sh\n#SBATCH --gres=gpu:a.b:2\nx\n",
            "line 2: #SBATCH --gres: GPU type must match");
}

static void
test_gpus_total_with_and_without_type(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -G h100:16 -N 2\nx\n", &s, NULL);
  assert_int_equal(s.gpus, 16);
  assert_int_equal(s.gpus_per_node, 0);
  assert_string_equal(s.gpu_type, "h100");
  jobspec_release(&s);

  parse_ok("#!/bin/sh\n#SBATCH --gpus=3\nx\n", &s, NULL);
  assert_int_equal(s.gpus, 3);
  assert_null(s.gpu_type);
  jobspec_release(&s);
}

static void
test_gpus_per_node_times_nodes_gives_total(void **state)
{
  struct job_spec s;

  (void)state;
  /* The node count may come after the per-node count. */
  parse_ok("#!/bin/sh\n#SBATCH --gpus-per-node=l4:4\n#SBATCH --nodes=5\nx\n",
           &s, NULL);
  assert_int_equal(s.gpus, 20);
  assert_int_equal(s.gpus_per_node, 4);
  assert_string_equal(s.gpu_type, "l4");
  jobspec_release(&s);
}

static void
test_gpus_and_per_node_that_disagree_are_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH -N 2\n#SBATCH --gpus=3\n"
            "#SBATCH --gpus-per-node=2\nx\n",
            "line 3: #SBATCH --gpus=3 disagrees with 2 GPUs per node x 2");
}

static void
test_conflicting_gpu_types_are_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH --gres=gpu:a100:1\n#SBATCH -G h100:2\nx\n",
            "line 3: #SBATCH --gpus: GPU type 'h100' conflicts with 'a100' "
            "from --gres on line 2");
}

static void
test_gpus_over_the_limit_are_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH --gpus=4097\nx\n",
            "line 2: #SBATCH --gpus: invalid value '4097'");
  parse_bad("#!/bin/sh\n#SBATCH --gpus-per-node=8 -N 1024\nx\n",
            "more than 4096 GPUs");
}

static void
test_node_range_takes_the_minimum(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -N 2-8\nx\n", &s, NULL);
  assert_int_equal(s.nodes, 2);
  jobspec_release(&s);
}

static void
test_bad_node_counts_are_rejected_naming_the_line(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH -N 8-2\nx\n",
            "line 2: #SBATCH --nodes: invalid value '8-2'");
  parse_bad("#!/bin/sh\n#SBATCH -N 0\nx\n", "line 2: #SBATCH --nodes");
  parse_bad("#!/bin/sh\n#SBATCH --nodes=1025\nx\n", "#SBATCH --nodes");
  parse_bad("#!/bin/sh\n#SBATCH --nodes=two\nx\n", "#SBATCH --nodes");
}

static void
test_every_time_format_is_understood(void **state)
{
  static const struct {
    const char *text;
    int64_t seconds;
  } cases[] = {
    {"30", 30 * 60},
    {"30:15", 30 * 60 + 15},
    {"2:30:15", 2 * 3600 + 30 * 60 + 15},
    {"3-0", 3 * 86400},
    {"3-4", 3 * 86400 + 4 * 3600},
    {"3-4:05", 3 * 86400 + 4 * 3600 + 5 * 60},
    {"3-4:05:06", 3 * 86400 + 4 * 3600 + 5 * 60 + 6},
    {"UNLIMITED", 0},
    {"infinite", 0},
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct job_spec s;
    char script[128];

    snprintf(script, sizeof(script), "#!/bin/sh\n#SBATCH --time=%s\nx\n",
             cases[i].text);
    parse_ok(script, &s, NULL);
    if (s.time_limit_s != cases[i].seconds)
      fail_msg("'%s' gave %lld s, want %lld", cases[i].text,
               (long long)s.time_limit_s, (long long)cases[i].seconds);
    jobspec_release(&s);
  }
}

static void
test_malformed_time_is_rejected_naming_the_line(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH -J a\n\n#SBATCH --time=abc\nx\n",
            "line 4: #SBATCH --time: invalid duration 'abc'");
  parse_bad("#!/bin/sh\n#SBATCH -t 1:2:3:4\nx\n",
            "line 2: #SBATCH --time: invalid duration '1:2:3:4'");
  parse_bad("#!/bin/sh\n#SBATCH -t 400-0\nx\n",
            "line 2: #SBATCH --time: invalid duration");
}

static void
test_export_forms(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --export=NONE\nx\n", &s, NULL);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  assert_null(s.env);
  jobspec_release(&s);

  parse_ok("#!/bin/sh\n#SBATCH --export=ALL,CUDA_HOME=/opt/cuda,LANG\nx\n",
           &s, NULL);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_ALL);
  assert_int_equal(strv_len(s.env), 1);
  assert_string_equal(s.env[0], "CUDA_HOME=/opt/cuda");
  assert_int_equal(strv_len(s.export_names), 1);
  assert_string_equal(s.export_names[0], "LANG");
  jobspec_release(&s);

  parse_ok("#!/bin/sh\n#SBATCH --export=EDITOR=vi,HOME\nx\n", &s, NULL);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  assert_string_equal(s.env[0], "EDITOR=vi");
  assert_string_equal(s.export_names[0], "HOME");
  jobspec_release(&s);
}

static void
test_last_export_replaces_earlier_values(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --export=ALL,A=1\n#SBATCH --export=B=2\nx\n",
           &s, NULL);
  assert_int_equal(strv_len(s.env), 1);
  assert_string_equal(s.env[0], "B=2");
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_NONE);
  jobspec_release(&s);
}

static void
test_malformed_export_is_rejected_naming_the_line(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH --export=ALL,NONE\nx\n",
            "line 2: #SBATCH --export: ALL and NONE exclude each other");
  parse_bad("#!/bin/sh\n#SBATCH --export=A-B=1\nx\n",
            "line 2: #SBATCH --export: 'A-B' is not a variable name");
}

static void
test_unknown_directives_are_kept_verbatim_and_warned(void **state)
{
  struct job_spec s;
  json_t *warnings = json_array();

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --mem=4G\n#SBATCH -p gpu\n"
           "#SBATCH --constraint \"a100&ib\" --exclusive\n"
           "#SBATCH --ntasks-per-node=8\nx\n",
           &s, warnings);
  assert_int_equal(strv_len(s.sbatch_extra), 5);
  assert_string_equal(s.sbatch_extra[0], "--mem=4G");
  assert_string_equal(s.sbatch_extra[1], "--partition=gpu");
  assert_string_equal(s.sbatch_extra[2], "--constraint=a100&ib");
  assert_string_equal(s.sbatch_extra[3], "--exclusive");
  assert_string_equal(s.sbatch_extra[4], "--ntasks-per-node=8");
  assert_int_equal(json_array_size(warnings), 5);
  assert_string_equal(
      json_string_value(json_array_get(warnings, 0)),
      "#SBATCH --mem=4G is not interpreted by tenbin; kept for Slurm sites");
  assert_string_equal(json_string_value(json_array_get(warnings, 1)),
                      "#SBATCH --partition=gpu is not interpreted by tenbin; "
                      "kept for Slurm sites");
  json_decref(warnings);
  jobspec_release(&s);
}

static void
test_option_unknown_to_the_table_is_kept(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --future-option=7 --another\nx\n", &s, NULL);
  assert_int_equal(strv_len(s.sbatch_extra), 2);
  assert_string_equal(s.sbatch_extra[0], "--future-option=7");
  assert_string_equal(s.sbatch_extra[1], "--another");
  jobspec_release(&s);
}

static void
test_unique_abbreviation_is_accepted_and_ambiguous_one_rejected(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --job=short --part=gpu\nx\n", &s, NULL);
  assert_string_equal(s.name, "short");
  assert_string_equal(s.sbatch_extra[0], "--partition=gpu");
  jobspec_release(&s);
  parse_bad("#!/bin/sh\n#SBATCH --ti=5\nx\n",
            "line 2: #SBATCH --ti: ambiguous option");
}

static void
test_hold_flag_short_and_long(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -H\nx\n", &s, NULL);
  assert_int_equal(s.hold, 1);
  jobspec_release(&s);
  parse_ok("#!/bin/sh\n#SBATCH --hold\nx\n", &s, NULL);
  assert_int_equal(s.hold, 1);
  jobspec_release(&s);
  parse_bad("#!/bin/sh\n#SBATCH --hold=yes\nx\n",
            "line 2: #SBATCH --hold: takes no value");
}

static void
test_missing_value_is_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH --time\nx\n",
            "line 2: #SBATCH --time: missing value");
  parse_bad("#!/bin/sh\n#SBATCH -J\nx\n", "line 2: #SBATCH -J: missing value");
}

static void
test_stray_argument_and_unknown_short_option_are_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH --future value\nx\n",
            "line 2: #SBATCH: unexpected argument 'value'");
  parse_bad("#!/bin/sh\n#SBATCH -Z\nx\n", "line 2: #SBATCH -Z: unknown option");
}

static void
test_last_directive_wins(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH -t 10\n#SBATCH --time=20\n"
           "#SBATCH -J a -J b\nx\n",
           &s, NULL);
  assert_int_equal(s.time_limit_s, 20 * 60);
  assert_string_equal(s.name, "b");
  jobspec_release(&s);
}

static void
test_invalid_account_is_rejected_naming_the_line(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH -A 'my project'\nx\n",
            "line 2: #SBATCH --account: must match");
}

static void
test_too_many_directives_are_rejected(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "#!/bin/sh\n"), 0);
  for (i = 0; i < 257; i++)
    assert_int_equal(buf_adds(&b, "#SBATCH -H\n"), 0);
  assert_int_equal(buf_adds(&b, "x\n"), 0);
  parse_bad(buf_str(&b), "line 258: more than 256 #SBATCH directives");
  buf_release(&b);
}

static void
test_more_than_64_kept_directives_are_rejected(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "#!/bin/sh\n"), 0);
  for (i = 0; i < 65; i++)
    assert_int_equal(buf_adds(&b, "#SBATCH --mem=1G\n"), 0);
  parse_bad(buf_str(&b), "line 66: #SBATCH --mem: more than 64");
  buf_release(&b);
}

static void
test_overlong_line_is_rejected(void **state)
{
  struct buf b;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "#!/bin/sh\n#SBATCH -J "), 0);
  for (i = 0; i < 4096; i++)
    assert_int_equal(buf_adds(&b, "n"), 0);
  assert_int_equal(buf_adds(&b, "\nx\n"), 0);
  parse_bad(buf_str(&b), "line 2: longer than 4096 bytes");
  buf_release(&b);
}

static void
test_long_lines_after_the_header_are_not_read(void **state)
{
  struct buf b;
  struct job_spec s;
  int i;

  (void)state;
  buf_init(&b, 1 << 16);
  assert_int_equal(buf_adds(&b, "#!/bin/sh\n#SBATCH -N 2\necho "), 0);
  for (i = 0; i < 8192; i++)
    assert_int_equal(buf_adds(&b, "n"), 0);
  parse_ok(buf_str(&b), &s, NULL);
  assert_int_equal(s.nodes, 2);
  jobspec_release(&s);
  buf_release(&b);
}

static void
test_dos_line_breaks_are_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\r\n#SBATCH -N 2\r\nx\r\n", "DOS line breaks");
}

static void
test_script_without_shebang_is_rejected(void **state)
{
  (void)state;
  parse_bad("#SBATCH -N 2\nx\n", "must start with '#!'");
}

static void
test_control_characters_in_kept_options_are_rejected(void **state)
{
  (void)state;
  parse_bad("#!/bin/sh\n#SBATCH --comment=\"a\tb\"\nx\n",
            "line 2: #SBATCH --comment: must not contain control");
}

static void
test_warnings_may_be_null(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\n#SBATCH --mem=1G\nx\n", &s, NULL);
  assert_int_equal(strv_len(s.sbatch_extra), 1);
  jobspec_release(&s);
}

static void
test_script_without_directives_changes_nothing(void **state)
{
  struct job_spec s;

  (void)state;
  parse_ok("#!/bin/sh\necho hi\n", &s, NULL);
  assert_null(s.name);
  assert_null(s.project);
  assert_int_equal(s.nodes, 1);
  assert_int_equal(s.gpus, 0);
  assert_int_equal(s.export_mode, JOBSPEC_EXPORT_ALL);
  assert_null(s.script);
  jobspec_release(&s);
}

/* ---- sbatch's command line ---- */

/* What own_cb saw: the last own option and its value. */
struct own_seen {
  int val;
  char value[32];
  int calls;
};

static int
own_cb(void *arg, int val, const char *value, struct err *e)
{
  struct own_seen *seen = arg;

  (void)e;
  seen->val = val;
  snprintf(seen->value, sizeof(seen->value), "%s",
           value != NULL ? value : "(null)");
  seen->calls++;
  return val == 'h' ? 7 : 0;
}

static const struct option own_opts[] = {
  {"site", required_argument, NULL, 'S'},
  {"help", no_argument, NULL, 'h'},
  {NULL, 0, NULL, 0},
};

static void
test_command_line_options_become_request_fields(void **state)
{
  char *argv[] = {"-J", "train", "-A", "vision", "-N", "2-4",
                  "--gpus-per-node=h100:2", "-t", "1:00:00", "-oo.log",
                  "--error", "e.log", "-D", "/w", "--export=NONE,A=1",
                  "-H", "job.sh", "-p", "x", NULL};
  json_t *fields = json_object();
  char **extra = NULL;
  struct own_seen seen = {0};
  struct err e;
  int end = -1;

  (void)state;
  err_clear(&e);
  assert_int_equal(sbatch_parse_args(19, argv, own_opts, own_cb, &seen,
                                     fields, &extra, &end, &e),
                   0);
  assert_int_equal(end, 16);
  assert_null(extra);
  assert_int_equal(seen.calls, 0);
  assert_string_equal(json_string_value(json_object_get(fields, "name")),
                      "train");
  assert_string_equal(json_string_value(json_object_get(fields, "project")),
                      "vision");
  assert_int_equal(json_integer_value(json_object_get(fields, "nodes")), 2);
  assert_int_equal(
      json_integer_value(json_object_get(fields, "gpus_per_node")), 2);
  assert_null(json_object_get(fields, "gpus"));
  assert_string_equal(json_string_value(json_object_get(fields, "gpu_type")),
                      "h100");
  assert_string_equal(
      json_string_value(json_object_get(fields, "time_limit")), "1:00:00");
  assert_string_equal(json_string_value(json_object_get(fields, "output")),
                      "o.log");
  assert_string_equal(json_string_value(json_object_get(fields, "error")),
                      "e.log");
  assert_string_equal(json_string_value(json_object_get(fields, "chdir")),
                      "/w");
  assert_string_equal(json_string_value(json_object_get(fields, "export")),
                      "NONE,A=1");
  assert_true(json_is_true(json_object_get(fields, "hold")));
  assert_int_equal(json_object_size(fields), 11);
  json_decref(fields);
}

static void
test_command_line_keeps_the_others_under_their_full_name(void **state)
{
  char *argv[] = {"-p", "gpu", "--mem=4G", "--qos", "high",
                  "--gres=gpu:2,mps:1", "--exclus", "job.sh", NULL};
  json_t *fields = json_object();
  char **extra = NULL;
  struct err e;
  int end = -1;

  (void)state;
  err_clear(&e);
  assert_int_equal(sbatch_parse_args(8, argv, NULL, NULL, NULL, fields,
                                     &extra, &end, &e),
                   0);
  assert_int_equal(end, 7);
  assert_int_equal(strv_len(extra), 5);
  assert_string_equal(extra[0], "--partition=gpu");
  assert_string_equal(extra[1], "--mem=4G");
  assert_string_equal(extra[2], "--qos=high");
  assert_string_equal(extra[3], "--gres=mps:1");
  assert_string_equal(extra[4], "--exclusive");
  assert_int_equal(
      json_integer_value(json_object_get(fields, "gpus_per_node")), 2);
  strv_free(extra);
  json_decref(fields);
}

static void
test_command_line_own_options_go_to_the_caller(void **state)
{
  char *argv[] = {"--site", "a", "-p", "x", "--site=b", "job.sh", NULL};
  char *help[] = {"-t", "5", "-h", "job.sh", NULL};
  json_t *fields = json_object();
  char **extra = NULL;
  struct own_seen seen = {0};
  struct err e;
  int end = -1;

  (void)state;
  err_clear(&e);
  assert_int_equal(sbatch_parse_args(6, argv, own_opts, own_cb, &seen,
                                     fields, &extra, &end, &e),
                   0);
  assert_int_equal(seen.calls, 2);
  assert_int_equal(seen.val, 'S');
  assert_string_equal(seen.value, "b");
  assert_int_equal(end, 5);
  strv_free(extra);
  extra = NULL;
  /* The caller's non-zero answer ends the parse and is returned. */
  assert_int_equal(sbatch_parse_args(4, help, own_opts, own_cb, &seen,
                                     fields, &extra, &end, &e),
                   7);
  assert_null(extra);
  json_decref(fields);
}

static void
test_command_line_ends_at_the_script_or_double_dash(void **state)
{
  char *script_first[] = {"job.sh", "-p", "x", NULL};
  char *dashes[] = {"-H", "--", "-odd.sh", NULL};
  json_t *fields = json_object();
  char **extra = NULL;
  struct err e;
  int end = -1;

  (void)state;
  err_clear(&e);
  assert_int_equal(sbatch_parse_args(3, script_first, NULL, NULL, NULL,
                                     fields, &extra, &end, &e),
                   0);
  assert_int_equal(end, 0);
  assert_null(extra);
  assert_int_equal(json_object_size(fields), 0);
  assert_int_equal(sbatch_parse_args(3, dashes, NULL, NULL, NULL, fields,
                                     &extra, &end, &e),
                   0);
  assert_int_equal(end, 2);
  json_decref(fields);
}

/* Expect argv (NULL-terminated) to be rejected with exactly msg. */
static void
args_bad(char **argv, const char *msg)
{
  json_t *fields = json_object();
  char **extra = NULL;
  struct err e;
  int argc = 0;
  int end = -1;

  while (argv[argc] != NULL)
    argc++;
  err_clear(&e);
  assert_int_equal(sbatch_parse_args(argc, argv, own_opts, own_cb, NULL,
                                     fields, &extra, &end, &e),
                   ERR_INVALID);
  assert_string_equal(e.msg, msg);
  assert_null(extra);
  json_decref(fields);
}

/* On a command line an unknown option is a typo; a directive keeps it. */
static void
test_command_line_errors_name_the_option(void **state)
{
  char *unknown[] = {"--frobnicate=1", "job.sh", NULL};
  char *unknown_short[] = {"-Z", "job.sh", NULL};
  char *bad_time[] = {"-t", "soon", "job.sh", NULL};
  char *bad_nodes[] = {"--nodes=0", "job.sh", NULL};
  char *no_value[] = {"-N", NULL};
  char *flag_value[] = {"--hold=yes", "job.sh", NULL};
  char *own_flag_value[] = {"--help=yes", "job.sh", NULL};
  char *ambiguous[] = {"--ti=5", "job.sh", NULL};

  (void)state;
  args_bad(unknown, "unknown option '--frobnicate'");
  args_bad(unknown_short, "unknown option '-Z'");
  args_bad(bad_time,
           "option '--time': invalid duration 'soon' (minutes, MM:SS, "
           "HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED, at most 365 days)");
  args_bad(bad_nodes, "option '--nodes': invalid value '0' (want N or "
                      "MIN-MAX, from 1 to 1024)");
  args_bad(no_value, "option '-N': missing value");
  args_bad(flag_value, "option '--hold': takes no value");
  args_bad(own_flag_value, "option '--help' takes no value");
  args_bad(ambiguous, "option '--ti': ambiguous option");
}

static void
test_arity_says_which_words_take_the_next(void **state)
{
  (void)state;
  assert_int_equal(sbatch_args_arity(own_opts, "-p"), 1);
  assert_int_equal(sbatch_args_arity(own_opts, "-pgpu"), 0);
  assert_int_equal(sbatch_args_arity(own_opts, "--partition"), 1);
  assert_int_equal(sbatch_args_arity(own_opts, "--partition=x"), 0);
  assert_int_equal(sbatch_args_arity(own_opts, "--part"), 1);
  assert_int_equal(sbatch_args_arity(own_opts, "-H"), 0);
  assert_int_equal(sbatch_args_arity(own_opts, "-Hp"), 1);
  assert_int_equal(sbatch_args_arity(own_opts, "--hold"), 0);
  assert_int_equal(sbatch_args_arity(own_opts, "--site"), 1);
  assert_int_equal(sbatch_args_arity(own_opts, "--site=x"), 0);
  assert_int_equal(sbatch_args_arity(own_opts, "--nosuch"), 0);
  assert_int_equal(sbatch_args_arity(own_opts, "job.sh"), -1);
  assert_int_equal(sbatch_args_arity(own_opts, "-"), -1);
  assert_int_equal(sbatch_args_arity(own_opts, "--"), -1);
}

static void
test_override_replaces_the_same_option_and_keeps_the_rest(void **state)
{
  char *script[] = {"--partition=cpu", "--mem=4G", "--exclusive",
                    "--partition=x", NULL};
  char *cli[] = {"--partition=gpu", "--qos=high", "--exclusive=user",
                 "--qos=low", NULL};
  char **list = strv_dup(script);

  (void)state;
  sbatch_extra_override(&list, cli);
  assert_int_equal(strv_len(list), 4);
  assert_string_equal(list[0], "--mem=4G");
  assert_string_equal(list[1], "--partition=gpu");
  assert_string_equal(list[2], "--exclusive=user");
  assert_string_equal(list[3], "--qos=low");
  strv_free(list);
  list = NULL;
  sbatch_extra_override(&list, cli + 3);
  assert_int_equal(strv_len(list), 1);
  strv_free(list);
}

static void
test_extra_warning_says_where_the_option_came_from(void **state)
{
  json_t *a = sbatch_extra_warning("--mem=4G", 1);
  json_t *b = sbatch_extra_warning("--mem=4G", 0);

  (void)state;
  assert_string_equal(
      json_string_value(a),
      "#SBATCH --mem=4G is not interpreted by tenbin; kept for Slurm sites");
  assert_string_equal(
      json_string_value(b),
      "option --mem=4G is not interpreted by tenbin; kept for Slurm sites");
  json_decref(a);
  json_decref(b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_long_form_with_equals_sets_fields),
    cmocka_unit_test(test_long_form_with_separate_value),
    cmocka_unit_test(test_short_form_separate_and_attached),
    cmocka_unit_test(test_quoting_keeps_spaces_and_the_other_quote),
    cmocka_unit_test(test_unterminated_quote_is_rejected_naming_the_line),
    cmocka_unit_test(test_comment_after_directive_is_ignored),
    cmocka_unit_test(test_several_options_on_one_line),
    cmocka_unit_test(test_parsing_stops_at_the_first_command),
    cmocka_unit_test(test_indented_or_spaced_sbatch_is_a_comment),
    cmocka_unit_test(test_gres_without_type_is_gpus_per_node),
    cmocka_unit_test(test_gres_with_type_sets_type_lowercase),
    cmocka_unit_test(test_gres_keeps_other_entries_as_extra),
    cmocka_unit_test(test_malformed_gres_is_rejected_naming_the_line),
    cmocka_unit_test(test_gpus_total_with_and_without_type),
    cmocka_unit_test(test_gpus_per_node_times_nodes_gives_total),
    cmocka_unit_test(test_gpus_and_per_node_that_disagree_are_rejected),
    cmocka_unit_test(test_conflicting_gpu_types_are_rejected),
    cmocka_unit_test(test_gpus_over_the_limit_are_rejected),
    cmocka_unit_test(test_node_range_takes_the_minimum),
    cmocka_unit_test(test_bad_node_counts_are_rejected_naming_the_line),
    cmocka_unit_test(test_every_time_format_is_understood),
    cmocka_unit_test(test_malformed_time_is_rejected_naming_the_line),
    cmocka_unit_test(test_export_forms),
    cmocka_unit_test(test_last_export_replaces_earlier_values),
    cmocka_unit_test(test_malformed_export_is_rejected_naming_the_line),
    cmocka_unit_test(test_unknown_directives_are_kept_verbatim_and_warned),
    cmocka_unit_test(test_option_unknown_to_the_table_is_kept),
    cmocka_unit_test(
        test_unique_abbreviation_is_accepted_and_ambiguous_one_rejected),
    cmocka_unit_test(test_hold_flag_short_and_long),
    cmocka_unit_test(test_missing_value_is_rejected),
    cmocka_unit_test(test_stray_argument_and_unknown_short_option_are_rejected),
    cmocka_unit_test(test_last_directive_wins),
    cmocka_unit_test(test_invalid_account_is_rejected_naming_the_line),
    cmocka_unit_test(test_too_many_directives_are_rejected),
    cmocka_unit_test(test_more_than_64_kept_directives_are_rejected),
    cmocka_unit_test(test_overlong_line_is_rejected),
    cmocka_unit_test(test_long_lines_after_the_header_are_not_read),
    cmocka_unit_test(test_dos_line_breaks_are_rejected),
    cmocka_unit_test(test_script_without_shebang_is_rejected),
    cmocka_unit_test(test_control_characters_in_kept_options_are_rejected),
    cmocka_unit_test(test_warnings_may_be_null),
    cmocka_unit_test(test_script_without_directives_changes_nothing),
    cmocka_unit_test(test_command_line_options_become_request_fields),
    cmocka_unit_test(test_command_line_keeps_the_others_under_their_full_name),
    cmocka_unit_test(test_command_line_own_options_go_to_the_caller),
    cmocka_unit_test(test_command_line_ends_at_the_script_or_double_dash),
    cmocka_unit_test(test_command_line_errors_name_the_option),
    cmocka_unit_test(test_arity_says_which_words_take_the_next),
    cmocka_unit_test(
        test_override_replaces_the_same_option_and_keeps_the_rest),
    cmocka_unit_test(test_extra_warning_says_where_the_option_came_from),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
