/*
 * What a local job runs, worked out by tenbind before the shim starts:
 * its command, environment (sbatch --export semantics plus the TENBIN_*
 * and CUDA variables), working directory and output files (sbatch
 * filename patterns), all written to spec.json for the shim.  Pure
 * computation apart from reading the user and host names.
 */
#include "local_int.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spec/jobspec.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/* A pattern expands to at most this much (a few %x of a long name). */
#define PATTERN_MAX (4 * JOBSPEC_MAX_PATH)

static void
user_name(char *out, size_t outlen)
{
  struct passwd pw;
  struct passwd *res = NULL;
  char scratch[1024];

  if (getpwuid_r(getuid(), &pw, scratch, sizeof(scratch), &res) == 0 &&
      res != NULL)
    snprintf(out, outlen, "%s", pw.pw_name);
  else
    snprintf(out, outlen, "%lu", (unsigned long)getuid());
}

int
adapter_local__expand_pattern(const char *pat, int64_t job_id,
                              const char *name, char **out, struct err *e)
{
  struct buf b;
  char word[256];
  int rc = 0;

  buf_init(&b, PATTERN_MAX);
  for (const char *p = pat; *p != '\0' && rc == 0; p++) {
    if (*p != '%' || p[1] == '\0') {
      rc = buf_add(&b, p, 1);
      continue;
    }
    p++;
    switch (*p) {
    case 'j':
      rc = buf_addf(&b, "%lld", (long long)job_id);
      break;
    case 'x':
      rc = buf_adds(&b, name != NULL ? name : "job");
      break;
    case 'u':
      user_name(word, sizeof(word));
      rc = buf_adds(&b, word);
      break;
    case 'N':
      if (gethostname(word, sizeof(word)) < 0)
        snprintf(word, sizeof(word), "localhost");
      word[sizeof(word) - 1] = '\0';
      rc = buf_adds(&b, word);
      break;
    case '%':
      rc = buf_add(&b, "%", 1);
      break;
    default:
      /* sbatch's other patterns (%A, %a, %5j, ...) mean nothing on a
       * single-node site: keep them as written rather than guess. */
      rc = buf_add(&b, p - 1, 2);
      break;
    }
  }
  if (rc < 0) {
    buf_release(&b);
    return err_set(e, ERR_INVALID, "path '%.64s...' is longer than %d bytes "
                   "once expanded", pat, PATTERN_MAX);
  }
  *out = buf_take(&b, NULL);
  return 0;
}

/* A growable "K=V" vector in which a name appears at most once. */
struct envv {
  char **v;
  size_t n;
};

static size_t
name_len(const char *kv)
{
  const char *eq = strchr(kv, '=');

  return eq != NULL ? (size_t)(eq - kv) : strlen(kv);
}

static ssize_t
env_find(const struct envv *env, const char *name, size_t len)
{
  for (size_t i = 0; i < env->n; i++) {
    if (name_len(env->v[i]) == len && memcmp(env->v[i], name, len) == 0)
      return (ssize_t)i;
  }
  return -1;
}

/* Set "K=V" (copies), replacing an earlier K. */
static void
env_put(struct envv *env, const char *kv)
{
  size_t len = name_len(kv);
  ssize_t i;

  if (kv[len] != '=' || len == 0)
    return;
  i = env_find(env, kv, len);
  if (i >= 0) {
    free(env->v[i]);
    env->v[i] = xstrdup(kv);
    return;
  }
  env->v = xrealloc(env->v, (env->n + 2) * sizeof(*env->v));
  env->v[env->n++] = xstrdup(kv);
  env->v[env->n] = NULL;
}

static void
env_setf(struct envv *env, const char *name, const char *value)
{
  size_t n = strlen(name) + strlen(value) + 2;
  char *kv = xmalloc(n);

  snprintf(kv, n, "%s=%s", name, value);
  env_put(env, kv);
  free(kv);
}

static void
env_unset(struct envv *env, const char *name)
{
  ssize_t i = env_find(env, name, strlen(name));

  if (i < 0)
    return;
  free(env->v[i]);
  memmove(&env->v[i], &env->v[i + 1], (env->n - (size_t)i) * sizeof(char *));
  env->n--;
}

char **
adapter_local__job_env(const struct local_launch *l)
{
  const struct job_spec *s = l->spec;
  struct envv env = {NULL, 0};
  char num[32];

  env.v = xcalloc(1, sizeof(*env.v));
  if (s->export_mode == JOBSPEC_EXPORT_NONE) {
    env_setf(&env, "PATH", DEFAULT_PATH);
  } else {
    for (char *const *p = l->environ_; p != NULL && *p != NULL; p++)
      env_put(&env, *p);
  }
  for (char *const *n = s->export_names; n != NULL && *n != NULL; n++) {
    size_t len = strlen(*n);

    for (char *const *p = l->environ_; p != NULL && *p != NULL; p++) {
      if (strncmp(*p, *n, len) == 0 && (*p)[len] == '=') {
        env_put(&env, *p);
        break;
      }
    }
  }
  for (char *const *p = s->env; p != NULL && *p != NULL; p++)
    env_put(&env, *p);
  /* Ours come last: a job must not widen its own GPU assignment. */
  snprintf(num, sizeof(num), "%lld", (long long)l->job_id);
  env_setf(&env, "TENBIN_JOB_ID", num);
  env_setf(&env, "TENBIN_JOB_NAME", s->name != NULL ? s->name : "");
  env_setf(&env, "TENBIN_PROJECT", s->project != NULL ? s->project : "");
  env_setf(&env, "TENBIN_SITE", l->site_name != NULL ? l->site_name : "");
  snprintf(num, sizeof(num), "%lld", (long long)l->ngpus);
  env_setf(&env, "TENBIN_GPUS", num);
  if (l->gpu_type != NULL)
    env_setf(&env, "TENBIN_GPU_TYPE", l->gpu_type);
  else
    env_unset(&env, "TENBIN_GPU_TYPE");
  env_setf(&env, "CUDA_VISIBLE_DEVICES", l->alloc != NULL ? l->alloc : "");
  /* nvidia-smi numbers GPUs in PCI bus order, CUDA by default fastest
   * first: without this the indices above could name other GPUs. */
  env_setf(&env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  return env.v;
}

/* dir/path when path is relative, path otherwise (new). */
static char *
absolute(const char *dir, const char *path)
{
  if (path[0] == '/')
    return xstrdup(path);
  return adapter_local__path(dir, path);
}

/* A string for JSON; NULL when it is not valid UTF-8. */
static json_t *
jstr(const char *s)
{
  return json_string(s);
}

int
adapter_local__launch_spec(const struct local_launch *l, json_t **out,
                           char **log_path, struct err *e)
{
  const struct job_spec *s = l->spec;
  json_t *spec = NULL;
  json_t *argv = NULL;
  json_t *env = NULL;
  char **envv = NULL;
  char *workdir = NULL;
  char *pat = NULL;
  char *stdout_path = NULL;
  char *stderr_path = NULL;
  int rc = ERR_INVALID;

  workdir = s->chdir != NULL ? absolute(l->job_dir, s->chdir)
                             : xstrdup(l->job_dir);
  if (s->stdout_path != NULL) {
    rc = adapter_local__expand_pattern(s->stdout_path, l->job_id, s->name,
                                       &pat, e);
    if (rc < 0)
      goto out;
    stdout_path = absolute(workdir, pat);
    free(pat);
    pat = NULL;
  } else {
    stdout_path = adapter_local__path(l->job_dir, "output.log");
  }
  if (s->stderr_path != NULL) {
    rc = adapter_local__expand_pattern(s->stderr_path, l->job_id, s->name,
                                       &pat, e);
    if (rc < 0)
      goto out;
    stderr_path = absolute(workdir, pat);
  }
  rc = ERR_INVALID;
  argv = json_array();
  if (s->script != NULL) {
    /* The script is executed directly: jobspec guarantees its "#!". */
    free(pat);
    pat = adapter_local__path(l->job_dir, "script");
    json_array_append_new(argv, jstr(pat));
  } else {
    if (s->argv == NULL || s->argv[0] == NULL) {
      err_set(e, ERR_INVALID, "job has neither a command nor a script");
      goto out;
    }
    for (char *const *p = s->argv; *p != NULL; p++) {
      json_t *a = jstr(*p);

      if (a == NULL) {
        err_set(e, ERR_INVALID, "job argument is not valid UTF-8");
        goto out;
      }
      json_array_append_new(argv, a);
    }
  }
  env = json_array();
  envv = adapter_local__job_env(l);
  for (char **p = envv; *p != NULL; p++) {
    json_t *v = jstr(*p);

    /* tenbind's own environment may hold bytes JSON cannot carry. */
    if (v == NULL) {
      log_warn("job %lld: environment entry '%.*s' is not valid UTF-8, "
               "left out",
               (long long)l->job_id, (int)name_len(*p), *p);
      continue;
    }
    json_array_append_new(env, v);
  }
  spec = json_object();
  json_object_set_new(spec, "job_id", json_integer(l->job_id));
  json_object_set(spec, "argv", argv);
  json_object_set(spec, "env", env);
  json_object_set_new(spec, "chdir", jstr(workdir));
  json_object_set_new(spec, "stdout", jstr(stdout_path));
  json_object_set_new(spec, "stderr",
                      stderr_path != NULL ? jstr(stderr_path) : json_null());
  json_object_set_new(spec, "time_limit_s", json_integer(s->time_limit_s));
  json_object_set_new(spec, "cancel_grace_s",
                      json_integer(l->cancel_grace_s));
  json_object_set_new(spec, "alloc", json_string(l->alloc ? l->alloc : ""));
  json_object_set_new(spec, "gpu_type", l->gpu_type != NULL
                                            ? json_string(l->gpu_type)
                                            : json_null());
  /* json_object_set_new() drops a NULL (invalid UTF-8) value: a path
   * that is missing now would only fail later, in the shim. */
  if (json_object_get(spec, "chdir") == NULL ||
      json_object_get(spec, "stdout") == NULL ||
      json_object_get(spec, "stderr") == NULL ||
      json_array_size(argv) == 0 || json_array_get(argv, 0) == NULL) {
    err_set(e, ERR_INVALID, "job paths must be valid UTF-8");
    goto out;
  }
  *out = spec;
  spec = NULL;
  *log_path = stdout_path;
  stdout_path = NULL;
  rc = 0;
out:
  if (envv != NULL) {
    for (char **p = envv; *p != NULL; p++)
      free(*p);
    free(envv);
  }
  json_decref(spec);
  json_decref(argv);
  json_decref(env);
  free(workdir);
  free(pat);
  free(stdout_path);
  free(stderr_path);
  return rc;
}
