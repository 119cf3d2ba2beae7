/*
 * The workload catalog: named job templates with {param} placeholders.
 *
 * A workload holds the job fields of POST /v1/jobs plus a description and
 * declared parameters.  Submitting with "workload" expands the template:
 * placeholders are filled from the request's params (or the declared
 * defaults), then the request's own job fields override the template's.
 *
 * Placeholders in a command's arguments are replaced verbatim: no shell is
 * involved.  In a script template a value is inserted shell-quoted, so a
 * parameter can never inject commands into the script.  "{{" and "}}"
 * stand for literal braces.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define PARAM_VALUE_MAX 4096
#define PARAMS_MAX 64
#define DESCRIPTION_MAX 1024

/* The job fields a template may set: POST /v1/jobs minus the catalog's
 * own fields. */
static const char *const job_fields[] = {
    "project", "command", "script", "env", "export", "gpus", "gpu_type",
    "nodes", "gpus_per_node", "time_limit", "site", "chdir", "output",
    "error", "hold", "dataset", NULL};

static const struct jsonx_field workload_fields[] = {
    {"name", JX_STRING},          {"description", JX_STRING},
    {"params", JX_OBJECT},        {"project", JX_STRING},
    {"command", JX_ARRAY},        {"script", JX_STRING},
    {"env", JX_OBJECT},           {"export", JX_STRING},
    {"gpus", JX_INT},             {"gpu_type", JX_STRING},
    {"nodes", JX_INT},            {"gpus_per_node", JX_INT},
    {"time_limit", JX_STRING_OR_INT}, {"site", JX_STRING},
    {"chdir", JX_STRING},         {"output", JX_STRING},
    {"error", JX_STRING},         {"hold", JX_BOOL},
    {"dataset", JX_STRING},       {NULL, 0}};

static const struct jsonx_field param_fields[] = {
    {"default", JX_STRING}, {"description", JX_STRING},
    {"required", JX_BOOL},  {NULL, 0}};

static int
valid_name(const char *s, size_t max)
{
  size_t n = strlen(s);

  if (n == 0 || n > max || !isalnum((unsigned char)s[0]))
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];

    if (!isalnum(c) && c != '.' && c != '_' && c != '-')
      return 0;
  }
  return 1;
}

static int
valid_param_name(const char *s, size_t n)
{
  if (n == 0 || n > 64 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!isalnum((unsigned char)s[i]) && s[i] != '_')
      return 0;
  }
  return 1;
}

/* Append value single-quoted for a POSIX shell. */
static int
add_shell_quoted(struct buf *out, const char *value)
{
  int rc = buf_add(out, "'", 1);

  for (const char *p = value; rc == 0 && *p != '\0'; p++) {
    if (*p == '\'')
      rc = buf_adds(out, "'\\''");
    else
      rc = buf_add(out, p, 1);
  }
  if (rc == 0)
    rc = buf_add(out, "'", 1);
  return rc;
}

/*
 * Expand the placeholders of text into *out (new string).  values maps
 * parameter names to strings; where names the field in errors.
 */
static int
expand(const char *text, const json_t *declared, const json_t *values,
       int shell_quote, const char *where, char **out, struct err *e)
{
  struct buf b;
  const char *p = text;
  int rc = 0;

  buf_init(&b, JOBSPEC_MAX_SCRIPT + 64 * 1024);
  while (rc == 0 && *p != '\0') {
    const char *close;
    char name[65];
    const char *value;

    if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
      rc = buf_add(&b, p, 1);
      p += 2;
      continue;
    }
    if (*p != '{') {
      rc = buf_add(&b, p++, 1);
      continue;
    }
    close = strchr(p + 1, '}');
    if (close == NULL || !valid_param_name(p + 1, (size_t)(close - p - 1))) {
      /* Not a placeholder (e.g. a shell ${VAR} or JSON): keep it. */
      rc = buf_add(&b, p++, 1);
      continue;
    }
    memcpy(name, p + 1, (size_t)(close - p - 1));
    name[close - p - 1] = '\0';
    if (json_object_get(declared, name) == NULL) {
      rc = err_set(e, ERR_INVALID, "field '%s': unknown parameter '{%s}'",
                   where, name);
      break;
    }
    value = json_string_value(json_object_get(values, name));
    if (value == NULL)
      value = "";
    rc = shell_quote ? add_shell_quoted(&b, value) : buf_adds(&b, value);
    p = close + 1;
  }
  if (rc == ERR_TOO_LARGE)
    rc = err_set(e, ERR_TOO_LARGE, "field '%s': too long once expanded",
                 where);
  if (rc == 0)
    *out = buf_take(&b, NULL);
  buf_release(&b);
  return rc;
}

/*
 * Copy the template's job fields into a new job body (new reference in
 * *out), expanding every string that may hold placeholders.
 */
static int
instantiate(const json_t *def, const json_t *values, json_t **out,
            struct err *e)
{
  const json_t *declared = json_object_get(def, "params");
  json_t *job = json_object();
  char *s = NULL;
  int rc = 0;

  for (int i = 0; job_fields[i] != NULL && rc == 0; i++) {
    const char *f = job_fields[i];
    json_t *v = json_object_get(def, f);

    if (v == NULL || json_is_null(v))
      continue;
    if (strcmp(f, "command") == 0) {
      json_t *arr = json_array();
      size_t k;
      json_t *a;

      json_array_foreach(v, k, a) {
        char where[32];

        snprintf(where, sizeof(where), "command[%zu]", k);
        if (!json_is_string(a)) {
          rc = err_set(e, ERR_INVALID, "field '%s' must be a string",
                       where);
          break;
        }
        rc = expand(json_string_value(a), declared, values, 0, where, &s,
                    e);
        if (rc < 0)
          break;
        json_array_append_new(arr, json_string(s));
        free(s);
        s = NULL;
      }
      json_object_set_new(job, f, arr);
    } else if (strcmp(f, "env") == 0) {
      json_t *env = json_object();
      const char *k;
      json_t *a;

      json_object_foreach(v, k, a) {
        char where[160];

        snprintf(where, sizeof(where), "env.%.128s", k);
        if (!json_is_string(a)) {
          rc = err_set(e, ERR_INVALID, "field '%s' must be a string",
                       where);
          break;
        }
        rc = expand(json_string_value(a), declared, values, 0, where, &s,
                    e);
        if (rc < 0)
          break;
        json_object_set_new(env, k, json_string(s));
        free(s);
        s = NULL;
      }
      json_object_set_new(job, f, env);
    } else if (json_is_string(v) && strcmp(f, "project") != 0 &&
               strcmp(f, "site") != 0 && strcmp(f, "gpu_type") != 0) {
      rc = expand(json_string_value(v), declared, values,
                  strcmp(f, "script") == 0, f, &s, e);
      if (rc == 0)
        json_object_set_new(job, f, json_string(s));
      free(s);
      s = NULL;
    } else {
      json_object_set(job, f, v);
    }
  }
  if (rc < 0) {
    json_decref(job);
    return rc;
  }
  *out = job;
  return 0;
}

int
broker__workload_validate(const json_t *def, struct err *e)
{
  const json_t *params;
  const char *name;
  const char *desc;
  json_t *job = NULL;
  json_t *values = NULL;
  json_t *p;
  const char *k;
  struct job_spec spec;
  int rc;

  jobspec_init(&spec);
  rc = jsonx_check(def, workload_fields, "", e);
  if (rc < 0)
    goto out;
  name = jsonx_str(def, "name");
  if (name == NULL || !valid_name(name, 64)) {
    rc = err_set(e, ERR_INVALID, "field 'name': required, 1 to 64 of "
                 "A-Z a-z 0-9 . _ - starting with a letter or digit");
    goto out;
  }
  desc = jsonx_str(def, "description");
  if (desc != NULL && strlen(desc) > DESCRIPTION_MAX) {
    rc = err_set(e, ERR_INVALID, "field 'description': longer than %d "
                 "bytes", DESCRIPTION_MAX);
    goto out;
  }
  params = json_object_get(def, "params");
  if (json_object_size(params) > PARAMS_MAX) {
    rc = err_set(e, ERR_INVALID, "field 'params': more than %d parameters",
                 PARAMS_MAX);
    goto out;
  }
  /* Check every parameter, and give each a stand-in value so the
   * expanded template can be validated as a job. */
  values = json_object();
  json_object_foreach((json_t *)params, k, p) {
    char where[96];
    const char *dflt;

    snprintf(where, sizeof(where), "params.%.64s.", k);
    if (!valid_param_name(k, strlen(k))) {
      rc = err_set(e, ERR_INVALID, "field 'params.%.64s': parameter names "
                   "are letters, digits and _", k);
      goto out;
    }
    rc = jsonx_check(p, param_fields, where, e);
    if (rc < 0)
      goto out;
    dflt = jsonx_str(p, "default");
    if (dflt != NULL && strlen(dflt) > PARAM_VALUE_MAX) {
      rc = err_set(e, ERR_INVALID, "field '%sdefault': longer than %d "
                   "bytes", where, PARAM_VALUE_MAX);
      goto out;
    }
    json_object_set_new(values, k, json_string(dflt ? dflt : "1"));
  }
  rc = instantiate(def, values, &job, e);
  if (rc < 0)
    goto out;
  json_object_set_new(job, "workload", json_string(name));
  rc = jobspec_from_json(&spec, job, NULL, e);

out:
  jobspec_release(&spec);
  json_decref(job);
  json_decref(values);
  return rc;
}

int
broker_workload_put(struct broker *b, const json_t *def, int *created,
                    struct err *e)
{
  char *text = NULL;
  int rc;

  rc = broker__workload_validate(def, e);
  if (rc < 0)
    return rc;
  text = jsonx_dump(def);
  rc = db_workload_put(b->db, jsonx_str(def, "name"), text, time_now_ms(),
                       created, e);
  free(text);
  return rc;
}

int
broker_workload_get(struct broker *b, const char *name, char **json_out,
                    struct err *e)
{
  return db_workload_get(b->db, name, json_out, e);
}

int
broker_workload_list(struct broker *b, db_workload_cb cb, void *arg,
                     struct err *e)
{
  return db_workload_list(b->db, cb, arg, e);
}

/* The parameter values of a submission: request params over defaults. */
static int
param_values(const json_t *def, const json_t *given, json_t **out,
             struct err *e)
{
  const json_t *declared = json_object_get(def, "params");
  const char *wname = jsonx_str(def, "name");
  json_t *values = json_object();
  const char *k;
  json_t *v;

  if (given != NULL && !json_is_object(given) && !json_is_null(given)) {
    json_decref(values);
    return err_set(e, ERR_INVALID, "field 'params' must be an object");
  }
  json_object_foreach((json_t *)given, k, v) {
    char num[64];
    const char *s = num;

    if (json_object_get(declared, k) == NULL) {
      json_decref(values);
      return err_set(e, ERR_INVALID, "field 'params.%.64s': workload '%s' "
                     "has no parameter '%.64s'", k, wname, k);
    }
    if (json_is_string(v))
      s = json_string_value(v);
    else if (json_is_integer(v))
      snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
      snprintf(num, sizeof(num), "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
      s = json_is_true(v) ? "true" : "false";
    else {
      json_decref(values);
      return err_set(e, ERR_INVALID, "field 'params.%.64s' must be a "
                     "string, number or boolean", k);
    }
    if (strlen(s) > PARAM_VALUE_MAX) {
      json_decref(values);
      return err_set(e, ERR_INVALID, "field 'params.%.64s': longer than %d "
                     "bytes", k, PARAM_VALUE_MAX);
    }
    json_object_set_new(values, k, json_string(s));
  }
  json_object_foreach((json_t *)declared, k, v) {
    const char *dflt = jsonx_str(v, "default");

    if (json_object_get(values, k) != NULL)
      continue;
    if (dflt != NULL) {
      json_object_set_new(values, k, json_string(dflt));
    } else if (jsonx_bool(v, "required", 0)) {
      json_decref(values);
      return err_set(e, ERR_INVALID, "field 'params.%.64s': required by "
                     "workload '%s'", k, wname);
    } else {
      json_object_set_new(values, k, json_string(""));
    }
  }
  *out = values;
  return 0;
}

int
broker__workload_expand(struct broker *b, const json_t *body, json_t **out,
                        struct err *e)
{
  const char *name = jsonx_str(body, "workload");
  json_t *def = NULL;
  json_t *values = NULL;
  json_t *job = NULL;
  char *text = NULL;
  json_error_t jerr;
  const char *k;
  json_t *v;
  int rc;

  if (name == NULL)
    return err_set(e, ERR_INVALID, "field 'workload' must be a string");
  rc = db_workload_get(b->db, name, &text, NULL);
  if (rc == ERR_NOT_FOUND)
    return err_set(e, ERR_UNPROCESSABLE, "field 'workload': unknown "
                   "workload '%.64s'", name);
  if (rc < 0)
    return err_set(e, rc, "cannot read workload '%.64s'", name);
  def = json_loads(text, 0, &jerr);
  free(text);
  if (def == NULL)
    return err_set(e, ERR_INTERNAL, "workload '%.64s' is unreadable", name);
  rc = param_values(def, json_object_get(body, "params"), &values, e);
  if (rc < 0)
    goto out;
  rc = instantiate(def, values, &job, e);
  if (rc < 0)
    goto out;
  /* The request's own fields win over the template's, and a request
   * command replaces a template script and vice versa. */
  json_object_foreach((json_t *)body, k, v) {
    if (strcmp(k, "params") == 0)
      continue;
    if (strcmp(k, "command") == 0)
      json_object_del(job, "script");
    if (strcmp(k, "script") == 0)
      json_object_del(job, "command");
    json_object_set(job, k, v);
  }
  if (json_object_get(job, "name") == NULL)
    json_object_set_new(job, "name", json_string(name));
  *out = job;
  job = NULL;

out:
  json_decref(job);
  json_decref(values);
  json_decref(def);
  return rc;
}
