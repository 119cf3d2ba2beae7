/*
 * The workload catalog: named job templates with {param} placeholders.
 *
 * A workload holds the job fields of POST /v1/jobs plus a description and
 * declared parameters.  Submitting with "workload" expands the template:
 * placeholders are filled from the request's params (or the declared
 * defaults), then the request's own job fields override the template's.
 *
 * Placeholders in a command's arguments are replaced verbatim: no shell is
 * involved.  A script never receives a value as text: "{name}" becomes
 * "${TENBIN_PARAM_name}" and the value travels in the job's environment.
 * Quoting the value for the shell would be safe only outside quotes (a
 * template may well write '{x}' or "{x}"); an expansion result is never
 * parsed again by the shell, so in every quoting context the value stays
 * data.  "{{" and "}}" stand for literal braces; "${...}" is shell text.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "broker/config_fields.h"
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
    "error", "hold", "dataset", "require_baseline", NULL};

const struct jsonx_field broker_workload_fields[] = {
    {"name", JX_STRING},          {"description", JX_STRING},
    {"params", JX_OBJECT},        {"project", JX_STRING},
    {"command", JX_ARRAY},        {"script", JX_STRING},
    {"env", JX_OBJECT},           {"export", JX_STRING},
    {"gpus", JX_INT},             {"gpu_type", JX_STRING},
    {"nodes", JX_INT},            {"gpus_per_node", JX_INT},
    {"time_limit", JX_STRING_OR_INT}, {"site", JX_STRING},
    {"chdir", JX_STRING},         {"output", JX_STRING},
    {"error", JX_STRING},         {"hold", JX_BOOL},
    {"dataset", JX_STRING},       {"require_baseline", JX_BOOL},
    {NULL, 0}};

const struct jsonx_field broker_workload_param_fields[] = {
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

/* The environment variable that carries a parameter into a script. */
#define PARAM_ENV_PREFIX "TENBIN_PARAM_"
/* Longest placeholder: "{" + 64-character name + "}". */
#define PLACEHOLDER_MAX 66

/*
 * Expand the placeholders of text into *out (new string).  values maps
 * parameter names to strings; in_script replaces a placeholder by the
 * variable reference instead of the value.  where names the field in
 * errors.
 */
static int
expand(const char *text, const json_t *declared, const json_t *values,
       int in_script, const char *where, char **out, struct err *e)
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
    if (*p != '{' || (p > text && p[-1] == '$')) {
      rc = buf_add(&b, p++, 1);
      continue;
    }
    /* Bounded search: a text full of '{' must not cost quadratic time. */
    close = memchr(p + 1, '}', strnlen(p + 1, PLACEHOLDER_MAX));
    if (close == NULL || !valid_param_name(p + 1, (size_t)(close - p - 1))) {
      /* Not a placeholder (e.g. JSON in an argument): keep it. */
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
    if (in_script) {
      rc = buf_addf(&b, "${" PARAM_ENV_PREFIX "%s}", name);
    } else {
      value = json_string_value(json_object_get(values, name));
      rc = buf_adds(&b, value != NULL ? value : "");
    }
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

/* A script reads its parameters from TENBIN_PARAM_<name> variables. */
static void
add_param_env(json_t *job, const json_t *values)
{
  json_t *env = json_object_get(job, "env");
  const char *k;
  json_t *v;

  if (env == NULL) {
    env = json_object();
    json_object_set_new(job, "env", env);
  }
  json_object_foreach((json_t *)values, k, v) {
    char var[sizeof(PARAM_ENV_PREFIX) + 64];

    snprintf(var, sizeof(var), PARAM_ENV_PREFIX "%s", k);
    json_object_set(env, var, v);
  }
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
  if (rc == 0 && json_object_get(job, "script") != NULL)
    add_param_env(job, values);
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
  rc = jsonx_check(def, broker_workload_fields, "", e);
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
    rc = jsonx_check(p, broker_workload_param_fields, where, e);
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

void
workload_view_init(struct workload_view *v)
{
  memset(v, 0, sizeof(*v));
}

void
workload_view_release(struct workload_view *v)
{
  if (v == NULL)
    return;
  free(v->name);
  free(v->definition);
  workload_view_init(v);
}

int
broker_workload_get(struct broker *b, const char *name,
                    struct workload_view *out, struct err *e)
{
  char *json = NULL;
  int rc = db_workload_get(b->db, name, &json, e);

  if (rc < 0)
    return rc;
  workload_view_release(out);
  out->name = xstrdup(name);
  out->definition = json;
  return 0;
}

/* Hands each row to the caller's callback as a view. */
struct workload_list {
  workload_view_cb cb;
  void *arg;
};

static int
workload_row_cb(const char *name, const char *json, void *arg)
{
  struct workload_list *l = arg;
  /* Borrowed for the call, as the row is: never released. */
  struct workload_view v = {(char *)name, (char *)json};

  return l->cb(&v, l->arg);
}

int
broker_workload_list(struct broker *b, workload_view_cb cb, void *arg,
                     struct err *e)
{
  struct workload_list l = {cb, arg};

  return db_workload_list(b->db, workload_row_cb, &l, e);
}

/* The shortest decimal that reads back as d: 0.1, not 0.10000000000000001. */
static void
format_real(double d, char *out, size_t outlen)
{
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(out, outlen, "%.*g", prec, d);
    if (strtod(out, NULL) == d)
      return;
  }
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
      format_real(json_real_value(v), num, sizeof(num));
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
  /* The request's own fields win over the template's, a request command
   * replaces a template script and vice versa, and a request's env adds
   * to the template's (so the parameter variables stay). */
  json_object_foreach((json_t *)body, k, v) {
    json_t *env = json_object_get(job, "env");

    if (strcmp(k, "params") == 0)
      continue;
    if (strcmp(k, "command") == 0)
      json_object_del(job, "script");
    if (strcmp(k, "script") == 0)
      json_object_del(job, "command");
    if (strcmp(k, "env") == 0 && json_is_object(v) && env != NULL) {
      json_object_update(env, v);
      continue;
    }
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
