/*
 * #SBATCH scripts (the "script" of a job, or a file given to
 * `tenbin sbatch`) and sbatch's command line: the input is the script,
 * and its lines are also handed to sbatch_parse_args as argv.
 */
#include "fuzz/fuzz.h"
#include "spec/jobspec.h"
#include "spec/sbatch.h"
#include "util/alloc.h"

#define ARGS_MAX 64

static void
parse_args(char *text)
{
  char *argv[ARGS_MAX + 1];
  int argc = 0, end = 0;
  char *save = NULL;
  json_t *fields = json_object();
  char **extra = NULL;
  struct err e = {0};

  for (char *w = strtok_r(text, "\n", &save); w != NULL && argc < ARGS_MAX;
       w = strtok_r(NULL, "\n", &save))
    argv[argc++] = w;
  argv[argc] = NULL;
  if (sbatch_parse_args(argc, argv, NULL, NULL, NULL, fields, &extra, &end,
                        &e) == 0) {
    FUZZ_CHECK(end >= 0 && end <= argc);
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
      json_decref(sbatch_extra_warning(extra[i], 0));
  }
  for (int i = 0; i < argc; i++)
    (void)sbatch_args_arity(NULL, argv[i]);
  strv_free(extra);
  json_decref(fields);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *script = fuzz_cstr(data, size);
  struct job_spec s;
  struct err e = {0};
  json_t *warnings = json_array();

  jobspec_init(&s);
  if (sbatch_parse(script, &s, warnings, &e) == 0) {
    char **over = strv_dup(s.sbatch_extra);

    sbatch_extra_override(&s.sbatch_extra, over);
    strv_free(over);
  }
  jobspec_release(&s);
  json_decref(warnings);
  parse_args(script);
  free(script);
  return 0;
}
