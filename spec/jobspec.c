/*
 * The job specification: strict validation of the JSON a client sends
 * (every field checked against one table, every limit named in its
 * error), the merge with a batch script's #SBATCH directives (sbatch.c
 * fills the spec first, explicit JSON fields then win, as sbatch's command
 * line wins over the script), and the canonical JSON form the database
 * stores and reads back to an equal spec.
 *
 * Also a few validators sbatch.c shares (jobspec__*, declared in
 * spec_int.h).
 */
#include "jobspec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbatch.h"
#include "spec_int.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/strv.h"
#include "util/timeutil.h"
#include "util/timeutil.h"
#include "util/utf8.h"

/* A year of minutes: a longer limit is a typo, not a plan. */
#define MAX_TIME_LIMIT_MIN 525600
#define MAX_SBATCH_EXTRA 64
#define MAX_EXTRA_LEN 1024
#define MAX_IDENT 64
#define MAX_ENV_KEY 128
#define MAX_GPU_TYPE 31
#define MAX_DATASET_VERSION 64

void
jobspec_init(struct job_spec *s)
{
  memset(s, 0, sizeof(*s));
  s->nodes = 1;
  s->export_mode = JOBSPEC_EXPORT_ALL;
}

void
jobspec_release(struct job_spec *s)
{
  if (s == NULL)
    return;
  free(s->name);
  free(s->project);
  free(s->workload);
  strv_free(s->argv);
  free(s->script);
  strv_free(s->env);
  strv_free(s->export_names);
  free(s->gpu_type);
  free(s->site);
  free(s->chdir);
  free(s->stdout_path);
  free(s->stderr_path);
  strv_free(s->sbatch_extra);
  free(s->dataset);
  jobspec_init(s);
}

/* ---- character classes (ASCII only: isalnum() follows the locale) ---- */

static int
is_alnum(int c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

static int
is_ident_char(int c)
{
  return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

static int
is_env_key(const char *k)
{
  size_t i;

  if (!(k[0] == '_' || (is_alnum(k[0]) && !(k[0] >= '0' && k[0] <= '9'))))
    return 0;
  for (i = 1; k[i] != '\0'; i++) {
    if (i >= MAX_ENV_KEY || !(is_alnum(k[i]) || k[i] == '_'))
      return 0;
  }
  return 1;
}

/*
 * Check that v is valid UTF-8 and, unless allow_controls, free of C0 and
 * C1 control characters (a newline in a name or a path could forge a line
 * in a generated batch script or a log).  *nchars gets the code points.
 */
static const char *
text_problem(const char *v, int allow_controls, size_t *nchars)
{
  const unsigned char *p = (const unsigned char *)v;
  const unsigned char *end = p + strlen(v);
  size_t n = 0;

  while (p < end) {
    size_t len = utf8_char(p, end);

    if (len == 0)
      return "must be valid UTF-8";
    /* C0 and DEL are one byte; C1 (U+0080..U+009F) is 0xc2 0x80..0x9f. */
    if (!allow_controls &&
        (len == 1 ? p[0] < 0x20 || p[0] == 0x7f
                  : len == 2 && p[0] == 0xc2 && p[1] <= 0x9f))
      return "must not contain control characters";
    p += len;
    n++;
  }
  *nchars = n;
  return NULL;
}

/* ---- validators shared with sbatch.c: NULL when v is fine ---- */

const char *
jobspec__name_problem(const char *v)
{
  const char *why;
  size_t n;

  if (v[0] == '\0')
    return "must not be empty";
  why = text_problem(v, 0, &n);
  if (why != NULL)
    return why;
  if (n > JOBSPEC_MAX_NAME)
    return "must be at most 128 characters";
  return NULL;
}

const char *
jobspec_ident_problem(const char *v)
{
  size_t i;

  if (!is_alnum(v[0]))
    return "must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}";
  for (i = 1; v[i] != '\0'; i++) {
    if (i >= MAX_IDENT || !is_ident_char(v[i]))
      return "must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}";
  }
  return NULL;
}

const char *
jobspec_gpu_type_problem(const char *v)
{
  size_t i;

  for (i = 0; v[i] != '\0'; i++) {
    if (i >= MAX_GPU_TYPE || !(is_alnum(v[i]) || v[i] == '_' || v[i] == '-'))
      return "must match [A-Za-z0-9_-]{1,31}";
  }
  if (i == 0)
    return "must match [A-Za-z0-9_-]{1,31}";
  return NULL;
}

const char *
jobspec__path_problem(const char *v)
{
  size_t n;

  if (v[0] == '\0')
    return "must not be empty";
  if (strlen(v) > JOBSPEC_MAX_PATH)
    return "must be at most 1024 bytes";
  return text_problem(v, 0, &n);
}

const char *
jobspec__extra_problem(const char *v)
{
  size_t n;

  if (v[0] != '-')
    return "must be an sbatch option starting with '-'";
  if (strlen(v) > MAX_EXTRA_LEN)
    return "must be at most 1024 bytes";
  return text_problem(v, 0, &n);
}

int
jobspec__parse_duration(const char *v, int64_t *seconds, struct err *e)
{
  int64_t secs;

  if (time_parse_slurm_duration(v, &secs) < 0 ||
      secs > (int64_t)MAX_TIME_LIMIT_MIN * 60)
    return err_set(e, ERR_INVALID,
                   "invalid duration '%.32s' (minutes, MM:SS, HH:MM:SS, "
                   "D-HH[:MM[:SS]] or UNLIMITED, at most 365 days)",
                   v);
  *seconds = secs;
  return 0;
}

/* Set KEY=VALUE in s->env, replacing an earlier value of KEY in place. */
static void
env_set(struct job_spec *s, const char *key, size_t keylen,
        const char *value)
{
  size_t vlen = strlen(value);
  size_t i;
  char *kv = xmalloc(keylen + vlen + 2);

  memcpy(kv, key, keylen);
  kv[keylen] = '=';
  memcpy(kv + keylen + 1, value, vlen + 1);
  for (i = 0; s->env != NULL && s->env[i] != NULL; i++) {
    if (strncmp(s->env[i], kv, keylen + 1) == 0) {
      free(s->env[i]);
      s->env[i] = kv;
      return;
    }
  }
  strv_push(&s->env, kv);
  free(kv);
}

/*
 * sbatch --export syntax: "ALL", "NONE", or a comma list of ALL, NONE,
 * NAME and NAME=VALUE.  A list without ALL starts from an empty
 * environment (sbatch exports only the named variables then).  Replaces
 * s->export_mode and s->export_names; NAME=VALUE entries are set in
 * s->env (the caller decides whether earlier entries stay).
 */
int
jobspec__parse_export(const char *text, struct job_spec *s, struct err *e)
{
  char **names = NULL;
  char *copy = NULL;
  char *item;
  char *next;
  int all = 0;
  int none = 0;
  size_t count = 0;
  size_t n;
  int rc = ERR_INVALID;

  if (text[0] == '\0') {
    err_set(e, ERR_INVALID, "must not be empty (use ALL or NONE)");
    goto out;
  }
  copy = xstrdup(text);
  for (item = copy; item != NULL; item = next) {
    char *eq;

    next = strchr(item, ',');
    if (next != NULL)
      *next++ = '\0';
    if (++count > JOBSPEC_MAX_ENV) {
      err_set(e, ERR_INVALID, "more than %d entries", JOBSPEC_MAX_ENV);
      goto out;
    }
    if (item[0] == '\0') {
      err_set(e, ERR_INVALID, "empty entry in '%.64s'", text);
      goto out;
    }
    if (strcasecmp(item, "ALL") == 0) {
      all = 1;
      continue;
    }
    if (strcasecmp(item, "NONE") == 0) {
      none = 1;
      continue;
    }
    eq = strchr(item, '=');
    if (eq != NULL)
      *eq = '\0';
    if (!is_env_key(item)) {
      err_set(e, ERR_INVALID,
              "'%.64s' is not a variable name ([A-Za-z_][A-Za-z0-9_]{0,127})",
              item);
      goto out;
    }
    if (eq == NULL) {
      if (!strv_contains(names, item))
        strv_push(&names, item);
      continue;
    }
    if (strlen(eq + 1) > JOBSPEC_MAX_ARG_LEN) {
      err_set(e, ERR_INVALID, "value of '%s' longer than %d bytes", item,
              JOBSPEC_MAX_ARG_LEN);
      goto out;
    }
    if (text_problem(eq + 1, 1, &n) != NULL) {
      err_set(e, ERR_INVALID, "value of '%s' must be valid UTF-8", item);
      goto out;
    }
    env_set(s, item, strlen(item), eq + 1);
  }
  if (all && none) {
    err_set(e, ERR_INVALID, "ALL and NONE exclude each other");
    goto out;
  }
  s->export_mode = all ? JOBSPEC_EXPORT_ALL : JOBSPEC_EXPORT_NONE;
  strv_free(s->export_names);
  s->export_names = names;
  names = NULL;
  rc = 0;
out:
  strv_free(names);
  free(copy);
  return rc;
}

/* ---- reading the JSON ---- */

/* obj[key], or NULL when absent or JSON null (jsonx_check's "absent"). */
static json_t *
field(const json_t *obj, const char *key)
{
  json_t *v = json_object_get(obj, key);

  return json_is_null(v) ? NULL : v;
}

/*
 * A string field's value (borrowed), refusing embedded NULs: jansson
 * builds such strings from json_stringn() even though its parser rejects
 * \u0000, and a C string would silently cut them off.
 */
static int
string_value(const json_t *v, const char *what, const char **out,
             struct err *e)
{
  const char *str = json_string_value(v);

  if (str == NULL)
    return err_set(e, ERR_INVALID, "field '%s': must be a string", what);
  if (strlen(str) != json_string_length(v))
    return err_set(e, ERR_INVALID, "field '%s': must not contain NUL", what);
  *out = str;
  return 0;
}

/* Replace *dst by obj[key] when present, after problem() accepts it. */
static int
take_string(const json_t *obj, const char *key,
            const char *(*problem)(const char *), char **dst, struct err *e)
{
  json_t *v = field(obj, key);
  const char *str;
  const char *why;

  if (v == NULL)
    return 0;
  if (string_value(v, key, &str, e) < 0)
    return ERR_INVALID;
  why = problem(str);
  if (why != NULL)
    return err_set(e, ERR_INVALID, "field '%s': %s", key, why);
  free(*dst);
  *dst = xstrdup(str);
  return 0;
}

static int
take_int(const json_t *obj, const char *key, int64_t min, int64_t max,
         int *present, int64_t *out, struct err *e)
{
  json_t *v = field(obj, key);
  json_int_t n;

  *present = 0;
  if (v == NULL)
    return 0;
  if (!json_is_integer(v))
    return err_set(e, ERR_INVALID, "field '%s': must be an integer", key);
  n = json_integer_value(v);
  if (n < min || n > max)
    return err_set(e, ERR_INVALID,
                   "field '%s': must be between %lld and %lld, got %lld", key,
                   (long long)min, (long long)max, (long long)n);
  *present = 1;
  *out = n;
  return 0;
}

static int
take_command(const json_t *v, struct job_spec *s, struct err *e)
{
  size_t n = json_array_size(v);
  size_t i;
  char what[32];

  if (n < 1 || n > JOBSPEC_MAX_ARGS)
    return err_set(e, ERR_INVALID,
                   "field 'command': must hold 1 to %d arguments, got %zu",
                   JOBSPEC_MAX_ARGS, n);
  s->argv = xcalloc(n + 1, sizeof(*s->argv));
  for (i = 0; i < n; i++) {
    const char *arg;

    snprintf(what, sizeof(what), "command[%zu]", i);
    if (string_value(json_array_get(v, i), what, &arg, e) < 0)
      return ERR_INVALID;
    if (strlen(arg) > JOBSPEC_MAX_ARG_LEN)
      return err_set(e, ERR_INVALID, "field '%s': longer than %d bytes",
                     what, JOBSPEC_MAX_ARG_LEN);
    if (i == 0 && arg[0] == '\0')
      return err_set(e, ERR_INVALID,
                     "field 'command[0]': the program must not be empty");
    s->argv[i] = xstrdup(arg);
  }
  return 0;
}

static int
take_env(const json_t *v, struct job_spec *s, struct err *e)
{
  const char *key;
  json_t *val;

  if (json_object_size(v) > JOBSPEC_MAX_ENV)
    return err_set(e, ERR_INVALID,
                   "field 'env': at most %d variables, got %zu",
                   JOBSPEC_MAX_ENV, json_object_size(v));
  json_object_foreach((json_t *)v, key, val) {
    char what[160];
    const char *str;

    if (!is_env_key(key))
      return err_set(e, ERR_INVALID,
                     "field 'env': '%.64s' is not a variable name "
                     "([A-Za-z_][A-Za-z0-9_]{0,127})",
                     key);
    snprintf(what, sizeof(what), "env.%s", key);
    if (string_value(val, what, &str, e) < 0)
      return ERR_INVALID;
    if (strlen(str) > JOBSPEC_MAX_ARG_LEN)
      return err_set(e, ERR_INVALID, "field '%s': longer than %d bytes",
                     what, JOBSPEC_MAX_ARG_LEN);
    env_set(s, key, strlen(key), str);
  }
  return 0;
}

static int
take_time_limit(const json_t *obj, struct job_spec *s, struct err *e)
{
  json_t *v = field(obj, "time_limit");
  int64_t secs = 0;

  if (v == NULL)
    return 0;
  if (json_is_integer(v)) {
    json_int_t m = json_integer_value(v);

    if (m < 0 || m > MAX_TIME_LIMIT_MIN)
      return err_set(e, ERR_INVALID,
                     "field 'time_limit': must be between 0 and %d minutes "
                     "(0 = no limit), got %lld",
                     MAX_TIME_LIMIT_MIN, (long long)m);
    s->time_limit_s = (int64_t)m * 60;
    return 0;
  }
  if (jobspec__parse_duration(json_string_value(v), &secs, e) < 0)
    return err_prefix(e, "field 'time_limit'");
  s->time_limit_s = secs;
  return 0;
}

static const char *
dataset_problem(const char *v)
{
  const char *at = strchr(v, '@');
  char name[MAX_IDENT + 2];
  size_t len;
  size_t i;
  static const char msg[] = "must be NAME or NAME@VERSION (NAME like a "
                            "project, VERSION [A-Za-z0-9._-]{1,64} or "
                            "'latest')";

  /* A bare NAME means its latest version (docs/SYNC.md). */
  if (at == NULL)
    return jobspec_ident_problem(v) != NULL ? msg : NULL;
  len = (size_t)(at - v);
  if (len == 0 || len > MAX_IDENT)
    return msg;
  memcpy(name, v, len);
  name[len] = '\0';
  if (jobspec_ident_problem(name) != NULL)
    return msg;
  for (i = 0; at[1 + i] != '\0'; i++) {
    if (i >= MAX_DATASET_VERSION || !is_ident_char(at[1 + i]))
      return msg;
  }
  return i == 0 ? msg : NULL;
}

static int
take_extra(const json_t *v, struct job_spec *s, struct err *e)
{
  size_t n = json_array_size(v);
  size_t i;
  char what[32];

  if (n > MAX_SBATCH_EXTRA)
    return err_set(e, ERR_INVALID,
                   "field 'sbatch_extra': at most %d entries, got %zu",
                   MAX_SBATCH_EXTRA, n);
  strv_free(s->sbatch_extra);
  s->sbatch_extra = NULL;
  for (i = 0; i < n; i++) {
    const char *str;
    const char *why;

    snprintf(what, sizeof(what), "sbatch_extra[%zu]", i);
    if (string_value(json_array_get(v, i), what, &str, e) < 0)
      return ERR_INVALID;
    why = jobspec__extra_problem(str);
    if (why != NULL)
      return err_set(e, ERR_INVALID, "field '%s': %s", what, why);
    strv_push(&s->sbatch_extra, str);
  }
  return 0;
}

/*
 * nodes, gpus and gpus_per_node, over what the script set.  A per-node
 * count in the JSON defines the total; a total in the JSON replaces any
 * per-node count of the script (the client gave a total instead); with
 * neither, a per-node count of the script follows the node count.
 */
static int
take_gpus(const json_t *obj, struct job_spec *s, struct err *e)
{
  int64_t nodes = 1;
  int64_t gpus = 0;
  int64_t gpn = 0;
  int has_nodes;
  int has_gpus;
  int has_gpn;

  if (take_int(obj, "nodes", 1, JOBSPEC_MAX_NODES, &has_nodes, &nodes, e) <
          0 ||
      take_int(obj, "gpus", 0, JOBSPEC_MAX_GPUS, &has_gpus, &gpus, e) < 0 ||
      take_int(obj, "gpus_per_node", 0, JOBSPEC_MAX_GPUS, &has_gpn, &gpn, e) <
          0)
    return ERR_INVALID;
  if (has_nodes)
    s->nodes = nodes;
  if (has_gpn && (gpn > 0 || !has_gpus)) {
    if (gpn * s->nodes > JOBSPEC_MAX_GPUS)
      return err_set(e, ERR_INVALID,
                     "field 'gpus_per_node': %lld per node x %lld nodes is "
                     "more than %d GPUs",
                     (long long)gpn, (long long)s->nodes, JOBSPEC_MAX_GPUS);
    if (has_gpus && gpus != gpn * s->nodes)
      return err_set(e, ERR_INVALID,
                     "fields 'gpus' and 'gpus_per_node' disagree: %lld GPUs "
                     "is not %lld per node x %lld nodes",
                     (long long)gpus, (long long)gpn, (long long)s->nodes);
    s->gpus = gpn * s->nodes;
    s->gpus_per_node = gpn;
  } else if (has_gpus) {
    s->gpus = gpus;
    s->gpus_per_node = 0;
  } else if (s->gpus_per_node > 0) {
    if (s->gpus_per_node * s->nodes > JOBSPEC_MAX_GPUS)
      return err_set(e, ERR_INVALID,
                     "field 'nodes': %lld nodes x %lld GPUs per node from "
                     "the script is more than %d GPUs",
                     (long long)s->nodes, (long long)s->gpus_per_node,
                     JOBSPEC_MAX_GPUS);
    s->gpus = s->gpus_per_node * s->nodes;
  }
  return 0;
}

static char *
lower_dup(const char *v)
{
  char *out = xstrdup(v);
  char *p;

  for (p = out; *p != '\0'; p++) {
    if (*p >= 'A' && *p <= 'Z')
      *p = (char)(*p - 'A' + 'a');
  }
  return out;
}

/* The basename of command[0] when it makes a valid name, else "job". */
static char *
default_name(const struct job_spec *s)
{
  const char *base;

  if (s->argv == NULL)
    return xstrdup("job");
  base = strrchr(s->argv[0], '/');
  base = base != NULL ? base + 1 : s->argv[0];
  if (jobspec__name_problem(base) != NULL)
    return xstrdup("job");
  return xstrdup(base);
}

static const struct jsonx_field spec_fields[] = {
  {"name", JX_STRING},
  {"project", JX_STRING},
  {"workload", JX_STRING},
  {"command", JX_ARRAY},
  {"script", JX_STRING},
  {"env", JX_OBJECT},
  {"export", JX_STRING},
  {"gpus", JX_INT},
  {"gpu_type", JX_STRING},
  {"nodes", JX_INT},
  {"gpus_per_node", JX_INT},
  {"time_limit", JX_STRING_OR_INT},
  {"site", JX_STRING},
  {"chdir", JX_STRING},
  {"output", JX_STRING},
  {"error", JX_STRING},
  {"hold", JX_BOOL},
  {"deadline", JX_STRING},
  {"dataset", JX_STRING},
  {"require_baseline", JX_BOOL},
  {"sbatch_extra", JX_ARRAY},
  {NULL, 0},
};

static int
take_script(const json_t *v, struct job_spec *s, json_t *warnings,
            struct err *e)
{
  const char *text;

  if (string_value(v, "script", &text, e) < 0)
    return ERR_INVALID;
  if (strlen(text) > JOBSPEC_MAX_SCRIPT)
    return err_set(e, ERR_INVALID,
                   "field 'script': larger than %d bytes",
                   JOBSPEC_MAX_SCRIPT);
  if (strncmp(text, "#!", 2) != 0)
    return err_set(e, ERR_INVALID,
                   "field 'script': must start with '#!' (an interpreter "
                   "line), as sbatch requires");
  if (sbatch_parse(text, s, warnings, e) < 0)
    return err_prefix(e, "field 'script'");
  s->script = xstrdup(text);
  return 0;
}

static int
from_json(struct job_spec *s, const json_t *obj, json_t *warnings,
          struct err *e)
{
  json_t *command;
  json_t *script;
  json_t *v;
  const char *str;

  if (jsonx_check(obj, spec_fields, "", e) < 0)
    return ERR_INVALID;
  command = field(obj, "command");
  script = field(obj, "script");
  if (command != NULL && script != NULL)
    return err_set(e, ERR_INVALID,
                   "fields 'command' and 'script': give one, not both");
  if (command == NULL && script == NULL)
    return err_set(e, ERR_INVALID, "field 'command': required (or 'script')");
  /* The script first: every explicit field below overrides it.  A JSON
   * sbatch_extra replaces the script's, so its warnings wait for that. */
  if (script != NULL &&
      take_script(script, s,
                  field(obj, "sbatch_extra") != NULL ? NULL : warnings,
                  e) < 0)
    return ERR_INVALID;
  if (command != NULL && take_command(command, s, e) < 0)
    return ERR_INVALID;

  if (take_string(obj, "name", jobspec__name_problem, &s->name, e) < 0 ||
      take_string(obj, "project", jobspec_ident_problem, &s->project, e) <
          0 ||
      take_string(obj, "workload", jobspec_ident_problem, &s->workload, e) <
          0 ||
      take_string(obj, "site", jobspec_ident_problem, &s->site, e) < 0 ||
      take_string(obj, "chdir", jobspec__path_problem, &s->chdir, e) < 0 ||
      take_string(obj, "output", jobspec__path_problem, &s->stdout_path, e) <
          0 ||
      take_string(obj, "error", jobspec__path_problem, &s->stderr_path, e) <
          0 ||
      take_string(obj, "dataset", dataset_problem, &s->dataset, e) < 0)
    return ERR_INVALID;

  v = field(obj, "gpu_type");
  if (v != NULL) {
    const char *why;

    if (string_value(v, "gpu_type", &str, e) < 0)
      return ERR_INVALID;
    why = jobspec_gpu_type_problem(str);
    if (why != NULL)
      return err_set(e, ERR_INVALID, "field 'gpu_type': %s", why);
    free(s->gpu_type);
    s->gpu_type = lower_dup(str);
  }
  if (take_gpus(obj, s, e) < 0 || take_time_limit(obj, s, e) < 0)
    return ERR_INVALID;

  /* A JSON export replaces the script's --export, values included. */
  v = field(obj, "export");
  if (v != NULL) {
    if (string_value(v, "export", &str, e) < 0)
      return ERR_INVALID;
    strv_free(s->env);
    s->env = NULL;
    if (jobspec__parse_export(str, s, e) < 0)
      return err_prefix(e, "field 'export'");
  }
  v = field(obj, "env");
  if (v != NULL && take_env(v, s, e) < 0)
    return ERR_INVALID;
  if (strv_len(s->env) > JOBSPEC_MAX_ENV)
    return err_set(e, ERR_INVALID,
                   "fields 'env' and 'export': more than %d variables",
                   JOBSPEC_MAX_ENV);

  v = field(obj, "hold");
  if (v != NULL)
    s->hold = json_is_true(v);
  v = field(obj, "require_baseline");
  if (v != NULL)
    s->require_baseline = json_is_true(v);
  v = field(obj, "deadline");
  if (v != NULL && time_parse_iso(json_string_value(v), &s->deadline_ms) < 0)
    return err_set(e, ERR_INVALID, "field 'deadline': '%.40s' is not a time "
                   "such as 2026-11-28T18:00:00Z", json_string_value(v));
  v = field(obj, "sbatch_extra");
  if (v != NULL) {
    char **from_script = s->sbatch_extra;
    int rc;

    s->sbatch_extra = NULL;
    rc = take_extra(v, s, e);
    /* Name the script's directives that are still kept, and only them. */
    for (size_t i = 0; rc == 0 && warnings != NULL &&
                       i < strv_len(s->sbatch_extra);
         i++)
      if (strv_contains(from_script, s->sbatch_extra[i]))
        json_array_append_new(warnings,
                              sbatch_extra_warning(s->sbatch_extra[i], 1));
    strv_free(from_script);
    if (rc < 0)
      return ERR_INVALID;
  }

  if (s->name == NULL)
    s->name = default_name(s);
  if (s->project == NULL)
    s->project = xstrdup("default");
  return 0;
}

int
jobspec_from_json(struct job_spec *s, const json_t *obj, json_t *warnings,
                  struct err *e)
{
  int rc = from_json(s, obj, warnings, e);

  /* Never hand back a half-filled spec. */
  if (rc < 0)
    jobspec_release(s);
  return rc;
}

/* ---- writing the canonical JSON ---- */

static json_t *
strv_to_array(char *const *v)
{
  json_t *a = json_array();
  size_t i;

  for (i = 0; v != NULL && v[i] != NULL; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

static json_t *
env_to_object(char *const *env)
{
  json_t *o = json_object();
  size_t i;

  for (i = 0; env != NULL && env[i] != NULL; i++) {
    const char *eq = strchr(env[i], '=');
    char *key;

    if (eq == NULL)
      continue;
    key = xstrndup(env[i], (size_t)(eq - env[i]));
    json_object_set_new(o, key, json_string(eq + 1));
    free(key);
  }
  return o;
}

/* "ALL", "NONE", "ALL,A,B" or "A,B" (a list without ALL means NONE). */
static json_t *
export_to_string(const struct job_spec *s)
{
  struct buf b;
  size_t i;
  char *str;
  json_t *out;
  int rc = 0;

  buf_init(&b, (size_t)JOBSPEC_MAX_ENV * (MAX_ENV_KEY + 1) + 8);
  if (s->export_mode == JOBSPEC_EXPORT_ALL)
    rc = buf_adds(&b, "ALL");
  else if (strv_len(s->export_names) == 0)
    rc = buf_adds(&b, "NONE");
  for (i = 0; rc == 0 && i < strv_len(s->export_names); i++) {
    if (b.len > 0)
      rc = buf_adds(&b, ",");
    if (rc == 0)
      rc = buf_adds(&b, s->export_names[i]);
  }
  str = buf_take(&b, NULL);
  out = json_string(str);
  free(str);
  return out;
}

json_t *
jobspec_to_json(const struct job_spec *s)
{
  json_t *o = json_object();
  /*
   * With a script, an omitted field would let the script's directive come
   * back on reading; so defaults are written out then.
   */
  int all = s->script != NULL;

  if (s->name != NULL)
    jsonx_set_str(o, "name", s->name);
  if (s->project != NULL)
    jsonx_set_str(o, "project", s->project);
  if (s->workload != NULL)
    jsonx_set_str(o, "workload", s->workload);
  if (s->argv != NULL)
    json_object_set_new(o, "command", strv_to_array(s->argv));
  if (s->script != NULL)
    jsonx_set_str(o, "script", s->script);
  if (s->env != NULL)
    json_object_set_new(o, "env", env_to_object(s->env));
  if (all || s->export_mode != JOBSPEC_EXPORT_ALL || s->export_names != NULL)
    json_object_set_new(o, "export", export_to_string(s));
  json_object_set_new(o, "gpus", json_integer(s->gpus));
  if (s->gpu_type != NULL)
    jsonx_set_str(o, "gpu_type", s->gpu_type);
  json_object_set_new(o, "nodes", json_integer(s->nodes));
  if (s->gpus_per_node > 0)
    json_object_set_new(o, "gpus_per_node", json_integer(s->gpus_per_node));
  if (s->time_limit_s > 0) {
    char dur[40];

    time_format_duration(s->time_limit_s, dur, sizeof(dur));
    jsonx_set_str(o, "time_limit", dur);
  } else if (all) {
    jsonx_set_str(o, "time_limit", "UNLIMITED");
  }
  if (s->site != NULL)
    jsonx_set_str(o, "site", s->site);
  if (s->chdir != NULL)
    jsonx_set_str(o, "chdir", s->chdir);
  if (s->stdout_path != NULL)
    jsonx_set_str(o, "output", s->stdout_path);
  if (s->stderr_path != NULL)
    jsonx_set_str(o, "error", s->stderr_path);
  if (all || s->hold)
    json_object_set_new(o, "hold", json_boolean(s->hold));
  if (s->deadline_ms > 0)
    jsonx_set_time(o, "deadline", s->deadline_ms);
  if (s->require_baseline)
    json_object_set_new(o, "require_baseline",
                        json_boolean(s->require_baseline));
  if (s->dataset != NULL)
    jsonx_set_str(o, "dataset", s->dataset);
  if (all || s->sbatch_extra != NULL)
    json_object_set_new(o, "sbatch_extra", strv_to_array(s->sbatch_extra));
  return o;
}
