/*
 * slurmrestd's OpenAPI plugins v0.0.38 and dbv0.0.38 (Slurm 22.05).
 *
 * Everything here was checked against a real 22.05.8 slurmrestd (the
 * testbed of scripts/slurm-testbed), not only the OpenAPI document, which
 * is wrong in places: v0.0.38 hands the job properties to sbatch's own
 * option parser, so "nodes" takes "2" (the documented [min, max] array
 * is silently read as one node), "begin_time" takes sbatch's time strings
 * ("now+1hour"; an epoch number is refused), "wait_all_nodes" takes 0 or
 * 1, "get_user_environment" refuses a boolean, and "batch_features"
 * makes slurmrestd 22.05.8 abort (free(): invalid pointer), so it is
 * never sent.
 */
#include "adapters/slurm_schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define VERSION "v0.0.38"
/* A listing of more jobs than this is not a cluster we can follow. */
#define MAX_JOBS 1000000
/* The batch script built from argv: jobspec's limits keep it far lower. */
#define MAX_SCRIPT (4 * 1024 * 1024)
/* GPU entries read from one node's gres. */
#define MAX_NODE_GRES 16

/* ---- paths ---- */

static int
path_v0038(const char *what, int64_t id, char *out, size_t outsz)
{
  int n;

  if (strcmp(what, "ping") == 0)
    n = snprintf(out, outsz, "/slurm/" VERSION "/ping");
  else if (strcmp(what, "jobs") == 0)
    n = snprintf(out, outsz, "/slurm/" VERSION "/jobs");
  else if (strcmp(what, "job") == 0)
    n = snprintf(out, outsz, "/slurm/" VERSION "/job/%" PRId64, id);
  else if (strcmp(what, "submit") == 0)
    n = snprintf(out, outsz, "/slurm/" VERSION "/job/submit");
  else if (strcmp(what, "nodes") == 0)
    n = snprintf(out, outsz, "/slurm/" VERSION "/nodes");
  else if (strcmp(what, "db_job") == 0)
    n = snprintf(out, outsz, "/slurmdb/" VERSION "/job/%" PRId64, id);
  else
    return ERR_NOT_FOUND;
  if (n < 0 || (size_t)n >= outsz)
    return ERR_TOO_LARGE;
  return 0;
}

/* ---- #SBATCH directives tenbin does not interpret ---- */

enum xkind {
  X_STR,       /* the value, verbatim: Slurm parses it as sbatch does */
  X_INT,       /* a decimal integer */
  X_MEM,       /* a size, megabytes by default, into MB */
  X_MINUTES,   /* a Slurm duration into whole minutes, rounded up */
  X_TRUE,      /* a flag: true */
  X_FALSE,     /* a flag: false (--no-requeue) */
  X_YESNO,     /* "yes" or "no" */
  X_EXCLUSIVE, /* --exclusive[=user|mcs|...] */
  X_NICE,      /* --nice[=N], 100 without a value (sbatch's default) */
  X_SIGNAL,    /* [B:|R:]sig[@time]; v0.0.38 refuses the prefixes */
  X_GRES,      /* gres other than GPUs */
  X_IGNORE,    /* sbatch's own output options: no effect on the job */
  X_OURS,      /* a field tenbin interprets: refused here */
  X_ARRAY,     /* one tenbin job is one Slurm job: arrays are refused */
};

struct xmap {
  const char *opt;  /* sbatch's long name */
  char short_name;  /* 0 when none */
  const char *key;  /* v0.0.38 job property */
  enum xkind kind;
};

/* Every sbatch option v0.0.38 can express (each one tried on the
 * testbed), plus the ones that must not come through this door. */
static const struct xmap xmaps[] = {
  {"account", 'A', NULL, X_OURS},
  {"acctg-freq", 0, "account_gather_frequency", X_STR},
  {"array", 'a', NULL, X_ARRAY},
  {"bb", 0, "burst_buffer", X_STR},
  {"begin", 'b', "begin_time", X_STR},
  {"chdir", 'D', NULL, X_OURS},
  {"constraint", 'C', "constraints", X_STR},
  {"core-spec", 'S', "core_specification", X_INT},
  {"cores-per-socket", 0, "cores_per_socket", X_INT},
  {"cpu-freq", 0, "cpu_frequency", X_STR},
  {"cpus-per-gpu", 0, "cpus_per_gpu", X_STR},
  {"cpus-per-task", 'c', "cpus_per_task", X_INT},
  {"deadline", 0, "deadline", X_STR},
  {"delay-boot", 0, "delay_boot", X_STR},
  {"dependency", 'd', "dependency", X_STR},
  {"distribution", 'm', "distribution", X_STR},
  {"error", 'e', NULL, X_OURS},
  {"exclusive", 0, "exclusive", X_EXCLUSIVE},
  {"export", 0, NULL, X_OURS},
  {"gpu-bind", 0, "gpu_binding", X_STR},
  {"gpu-freq", 0, "gpu_frequency", X_STR},
  {"gpus", 'G', NULL, X_OURS},
  {"gpus-per-node", 0, NULL, X_OURS},
  {"gpus-per-socket", 0, "gpus_per_socket", X_STR},
  {"gpus-per-task", 0, "gpus_per_task", X_STR},
  {"gres", 0, "gres", X_GRES},
  {"gres-flags", 0, "gres_flags", X_STR},
  {"hint", 0, "cpu_binding_hint", X_STR},
  {"hold", 'H', NULL, X_OURS},
  {"ignore-pbs", 0, NULL, X_IGNORE},
  {"input", 'i', "standard_input", X_STR},
  {"job-name", 'J', NULL, X_OURS},
  {"kill-on-invalid-dep", 0, "kill_on_invalid_dependency", X_YESNO},
  {"licenses", 'L', "licenses", X_STR},
  {"mail-type", 0, "mail_type", X_STR},
  {"mail-user", 0, "mail_user", X_STR},
  {"mcs-label", 0, "mcs_label", X_STR},
  {"mem", 0, "memory_per_node", X_MEM},
  {"mem-bind", 0, "memory_binding", X_STR},
  {"mem-per-cpu", 0, "memory_per_cpu", X_MEM},
  {"mem-per-gpu", 0, "memory_per_gpu", X_MEM},
  {"mincpus", 0, "minimum_cpus_per_node", X_INT},
  {"nice", 0, "nice", X_NICE},
  {"no-requeue", 0, "requeue", X_FALSE},
  {"nodes", 'N', NULL, X_OURS},
  {"ntasks", 'n', "tasks", X_INT},
  {"ntasks-per-core", 0, "tasks_per_core", X_INT},
  {"ntasks-per-node", 0, "tasks_per_node", X_INT},
  {"ntasks-per-socket", 0, "tasks_per_socket", X_INT},
  {"open-mode", 0, "open_mode", X_STR},
  {"output", 'o', NULL, X_OURS},
  {"oversubscribe", 's', "oversubscribe", X_TRUE},
  {"parsable", 0, NULL, X_IGNORE},
  {"partition", 'p', "partition", X_STR},
  {"prefer", 0, "prefer", X_STR},
  {"priority", 0, "priority", X_STR},
  {"qos", 'q', "qos", X_STR},
  {"quiet", 'Q', NULL, X_IGNORE},
  {"requeue", 0, "requeue", X_TRUE},
  {"reservation", 0, "reservation", X_STR},
  {"signal", 0, "signal", X_SIGNAL},
  {"sockets-per-node", 0, "sockets_per_node", X_INT},
  {"spread-job", 0, "spread_job", X_TRUE},
  {"thread-spec", 0, "thread_specification", X_INT},
  {"threads-per-core", 0, "threads_per_core", X_INT},
  {"time", 't', NULL, X_OURS},
  {"time-min", 0, "time_minimum", X_MINUTES},
  {"use-min-nodes", 0, "minimum_nodes", X_TRUE},
  {"verbose", 'v', NULL, X_IGNORE},
  {"wait-all-nodes", 0, "wait_all_nodes", X_INT},
  {"wckey", 0, "wckey", X_STR},
  {"workdir", 0, NULL, X_OURS},
};

#define NXMAPS (sizeof(xmaps) / sizeof(xmaps[0]))

static const struct xmap *
find_xmap(const char *name, size_t len, char short_name)
{
  for (size_t i = 0; i < NXMAPS; i++) {
    if (short_name != 0 ? xmaps[i].short_name == short_name
                        : strlen(xmaps[i].opt) == len &&
                              strncmp(xmaps[i].opt, name, len) == 0)
      return &xmaps[i];
  }
  return NULL;
}

/* A decimal integer, '-' allowed when neg; 0 or -1. */
static int
parse_int(const char *v, int neg, int64_t *out)
{
  int64_t n = 0;
  int sign = 1;
  size_t i = 0;

  if (neg && v[0] == '-') {
    sign = -1;
    i = 1;
  }
  if (v[i] == '\0' || strlen(v + i) > 12)
    return -1;
  for (; v[i] != '\0'; i++) {
    if (v[i] < '0' || v[i] > '9')
      return -1;
    n = n * 10 + (v[i] - '0');
  }
  *out = sign * n;
  return 0;
}

/* sbatch's --mem sizes: N[K|M|G|T], megabytes without a unit. */
static int
parse_mem_mb(const char *v, int64_t *mb)
{
  size_t digits = strspn(v, "0123456789");
  char unit = v[digits];
  int64_t n;
  char num[16];

  if (digits == 0 || digits > 12 || (unit != '\0' && v[digits + 1] != '\0'))
    return -1;
  memcpy(num, v, digits);
  num[digits] = '\0';
  if (parse_int(num, 0, &n) < 0)
    return -1;
  switch (unit) {
  case 'K':
  case 'k':
    *mb = (n + 1023) / 1024;
    return 0;
  case '\0':
  case 'M':
  case 'm':
    *mb = n;
    return 0;
  case 'G':
  case 'g':
    *mb = n * 1024;
    return 0;
  case 'T':
  case 't':
    *mb = n * 1024 * 1024;
    return 0;
  }
  return -1;
}

/* obj[key] = v; jansson refuses text that is not UTF-8. */
static int
put_str(json_t *obj, const char *key, const char *v, struct err *e)
{
  json_t *str = json_string(v);

  if (str == NULL || json_object_set_new(obj, key, str) < 0)
    return err_set(e, ERR_INVALID, "'%.64s' of the job is not UTF-8 text",
                   key);
  return 0;
}

static void
count_gpu(void *arg, const char *type, int64_t count, const char *idx)
{
  (void)type;
  (void)count;
  (void)idx;
  (*(int *)arg)++;
}

/* Put one directive's value into job. */
static int
apply_extra(json_t *job, const struct xmap *m, const char *value,
            struct err *e)
{
  const char *opt = m->opt;
  int64_t n;
  int gpus = 0;

  if (value == NULL && m->kind != X_TRUE && m->kind != X_FALSE &&
      m->kind != X_EXCLUSIVE && m->kind != X_NICE && m->kind != X_IGNORE)
    return err_set(e, ERR_INVALID, "#SBATCH --%s: missing value", opt);
  if (value != NULL && (m->kind == X_TRUE || m->kind == X_FALSE))
    return err_set(e, ERR_INVALID, "#SBATCH --%s: takes no value", opt);
  switch (m->kind) {
  case X_STR:
    return put_str(job, m->key, value, e);
  case X_INT:
    if (parse_int(value, 0, &n) < 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --%s: invalid count '%.64s'", opt, value);
    json_object_set_new(job, m->key, json_integer(n));
    return 0;
  case X_MEM:
    if (parse_mem_mb(value, &n) < 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --%s: invalid size '%.64s' (N[K|M|G|T])", opt,
                     value);
    json_object_set_new(job, m->key, json_integer(n));
    return 0;
  case X_MINUTES:
    if (time_parse_slurm_duration(value, &n) < 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --%s: invalid duration '%.64s'", opt, value);
    json_object_set_new(job, m->key, json_integer((n + 59) / 60));
    return 0;
  case X_TRUE:
  case X_FALSE:
    json_object_set_new(job, m->key, json_boolean(m->kind == X_TRUE));
    return 0;
  case X_YESNO:
    if (strcmp(value, "yes") != 0 && strcmp(value, "no") != 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --%s: want yes or no, not '%.64s'", opt,
                     value);
    json_object_set_new(job, m->key, json_boolean(value[0] == 'y'));
    return 0;
  case X_EXCLUSIVE:
    /* v0.0.38 refuses "true"; "exclusive" is what sbatch means. */
    return put_str(job, m->key, value != NULL ? value : "exclusive", e);
  case X_NICE:
    if (value == NULL)
      n = 100;
    else if (parse_int(value, 1, &n) < 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --%s: invalid adjustment '%.64s'", opt, value);
    json_object_set_new(job, m->key, json_integer(n));
    return 0;
  case X_SIGNAL:
    if (strchr(value, ':') != NULL)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --signal=%.64s cannot be expressed through "
                     "slurmrestd " VERSION " (it refuses the B: and R: "
                     "forms)", value);
    return put_str(job, m->key, value, e);
  case X_GRES:
    slurm_gres_each(value, count_gpu, &gpus);
    if (gpus > 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --gres=%.64s: GPUs are asked for with "
                     "tenbin's gpus fields", value);
    return put_str(job, m->key, value, e);
  case X_IGNORE:
    return 0;
  case X_OURS:
    return err_set(e, ERR_INVALID,
                   "#SBATCH --%s in sbatch_extra: it is one of the job's "
                   "own fields", opt);
  case X_ARRAY:
    /* Every task would carry the one tag; tenbin could follow only one
     * of them and would lose the rest. */
    return err_set(e, ERR_INVALID,
                   "#SBATCH --array=%.64s: job arrays are not supported "
                   "through tenbin; submit one job per task", value);
  }
  return err_set(e, ERR_INTERNAL, "unhandled directive kind");
}

/*
 * One entry of spec->sbatch_extra: "--name=value" or "--name" as the
 * #SBATCH parser writes them; from a client's JSON also "--name value",
 * "-X value" and "-Xvalue".  Anything v0.0.38 cannot say is refused, so
 * the job fails with the reason instead of running without it.
 */
static int
map_extra(json_t *job, const char *extra, struct err *e)
{
  const struct xmap *m = NULL;
  const char *value = NULL;
  size_t len = 0;

  if (strncmp(extra, "--", 2) == 0) {
    const char *name = extra + 2;

    len = strcspn(name, "= ");
    if (name[len] != '\0')
      value = name + len + 1;
    if (len == 7 && strncmp(name, "comment", 7) == 0)
      return err_set(e, ERR_INVALID, "#SBATCH --comment: the comment "
                     "carries tenbin's tag (use the job's name)");
    m = find_xmap(name, len, 0);
    if (m == NULL || len == 0)
      return err_set(e, ERR_INVALID,
                     "#SBATCH --%.*s cannot be expressed through "
                     "slurmrestd " VERSION,
                     (int)(len > 64 ? 64 : len), name);
  } else if (extra[0] == '-' && extra[1] != '\0') {
    m = find_xmap(NULL, 0, extra[1]);
    if (m == NULL)
      return err_set(e, ERR_INVALID,
                     "#SBATCH -%c cannot be expressed through slurmrestd "
                     VERSION, extra[1]);
    value = extra + 2;
    value += strspn(value, " ");
    if (*value == '\0')
      value = NULL;
  } else {
    return err_set(e, ERR_INVALID, "#SBATCH '%.64s': not an option",
                   extra);
  }
  return apply_extra(job, m, value, e);
}

/* ---- the submit body ---- */

/* 'arg' for sh: every ' becomes '\'' (close, escaped quote, reopen). */
static int
add_quoted(struct buf *b, const char *arg)
{
  int rc = buf_adds(b, "'");

  for (const char *p = arg; rc == 0 && *p != '\0'; p++)
    rc = *p == '\'' ? buf_adds(b, "'\\''") : buf_add(b, p, 1);
  if (rc == 0)
    rc = buf_adds(b, "'");
  return rc;
}

static int
argv_script(char *const *argv, char **out, struct err *e)
{
  struct buf b;
  int rc;

  buf_init(&b, MAX_SCRIPT);
  rc = buf_adds(&b, "#!/bin/sh\nexec");
  for (size_t i = 0; rc == 0 && argv[i] != NULL; i++) {
    rc = buf_adds(&b, " ");
    if (rc == 0)
      rc = add_quoted(&b, argv[i]);
  }
  if (rc == 0)
    rc = buf_adds(&b, "\n");
  if (rc < 0) {
    buf_release(&b);
    return err_set(e, ERR_TOO_LARGE, "the command is over %d bytes",
                   MAX_SCRIPT);
  }
  *out = buf_take(&b, NULL);
  return 0;
}

/* "type:N" or "N". */
static json_t *
gpu_request(const char *type, int64_t n)
{
  char v[ADAPTER_GPU_TYPE_LEN + 32];

  if (type != NULL && type[0] != '\0')
    snprintf(v, sizeof(v), "%.31s:%" PRId64, type, n);
  else
    snprintf(v, sizeof(v), "%" PRId64, n);
  return json_string(v);
}

static int
environment(char *const *env, json_t *job, struct err *e)
{
  /* Required, an object in v0.0.38; without it slurmrestd answers 400
   * "environment must be set". */
  json_t *obj = json_object();

  json_object_set_new(job, "environment", obj);
  for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
    const char *eq = strchr(env[i], '=');
    char *key;
    int rc;

    if (eq == NULL || eq == env[i])
      return err_set(e, ERR_INVALID,
                     "environment entry '%.64s' is not KEY=VALUE", env[i]);
    key = xstrndup(env[i], (size_t)(eq - env[i]));
    rc = put_str(obj, key, eq + 1, e);
    free(key);
    if (rc < 0)
      return err_prefix(e, "environment");
  }
  return 0;
}

/*
 * Export mode: v0.0.38 has no --export; its get_user_environment is
 * sbatch's --get-user-env and refuses a boolean.  Neither is needed:
 * s->env is the job's whole environment for either mode (the adapter
 * builds it), and slurmstepd gives the job exactly that.
 */
static int
submit_body_v0038(const struct slurm_submit *s, json_t **out,
                  struct err *e)
{
  const struct job_spec *sp = s->spec;
  json_t *body = json_object();
  json_t *job = json_object();
  char nodes[32];
  char *script = NULL;
  int rc;

  *out = NULL;
  json_object_set_new(body, "job", job);
  rc = put_str(job, "comment", s->tag, e);
  if (rc == 0 && sp->name != NULL)
    rc = put_str(job, "name", sp->name, e);
  if (rc == 0 && s->account != NULL)
    rc = put_str(job, "account", s->account, e);
  if (rc == 0 && s->partition != NULL)
    rc = put_str(job, "partition", s->partition, e);
  if (rc == 0)
    rc = put_str(job, "current_working_directory", s->workdir, e);
  if (rc == 0)
    rc = put_str(job, "standard_output", s->stdout_path, e);
  if (rc == 0 && s->stderr_path != NULL)
    rc = put_str(job, "standard_error", s->stderr_path, e);
  if (rc == 0)
    rc = environment(s->env, job, e);
  if (rc < 0)
    goto out;
  if (sp->time_limit_s > 0)
    json_object_set_new(job, "time_limit",
                        json_integer((sp->time_limit_s + 59) / 60));
  /* A string: the documented [min, max] array is read as one node. */
  snprintf(nodes, sizeof(nodes), "%" PRId64, sp->nodes > 0 ? sp->nodes : 1);
  json_object_set_new(job, "nodes", json_string(nodes));
  if (sp->gpus_per_node > 0)
    json_object_set_new(job, "gpus_per_node",
                        gpu_request(sp->gpu_type, sp->gpus_per_node));
  else if (sp->gpus > 0)
    json_object_set_new(job, "gpus", gpu_request(sp->gpu_type, sp->gpus));
  if (sp->hold)
    json_object_set_new(job, "hold", json_true());
  for (size_t i = 0; sp->sbatch_extra != NULL && sp->sbatch_extra[i]; i++) {
    rc = map_extra(job, sp->sbatch_extra[i], e);
    if (rc < 0)
      goto out;
  }
  if (sp->script != NULL) {
    /* Verbatim: slurmrestd does not read #SBATCH lines, tenbin did. */
    rc = put_str(body, "script", sp->script, e);
  } else if (sp->argv != NULL && sp->argv[0] != NULL) {
    rc = argv_script(sp->argv, &script, e);
    if (rc == 0)
      rc = put_str(body, "script", script, e);
  } else {
    rc = err_set(e, ERR_INVALID, "the job has neither a script nor argv");
  }
  if (rc < 0)
    goto out;
  *out = body;
  body = NULL;
out:
  free(script);
  json_decref(body);
  return rc;
}

static int
submit_id_v0038(const json_t *answer, int64_t *id, struct err *e)
{
  const json_t *v = json_object_get(answer, "job_id");

  if (!json_is_integer(v) || json_integer_value(v) <= 0)
    return err_set(e, ERR_SITE, "slurmrestd's submit answer has no job_id");
  *id = json_integer_value(v);
  return 0;
}

/* ---- job listings ---- */

static char *
dup_str(const json_t *obj, const char *key)
{
  const char *v = json_string_value(json_object_get(obj, key));

  return xstrdup(v != NULL ? v : "");
}

static int64_t
get_int(const json_t *obj, const char *key, int64_t dflt)
{
  const json_t *v = json_object_get(obj, key);

  return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* An epoch time in seconds; 0 (unknown) when absent or when its
 * milliseconds would not fit an int64_t. */
static int64_t
get_time(const json_t *obj, const char *key)
{
  int64_t t = get_int(obj, key, 0);

  return t >= 0 && t <= INT64_MAX / 1000 ? t : 0;
}

struct gpu_sum {
  int64_t n;
  char type[ADAPTER_GPU_TYPE_LEN];
};

static void
add_gpus(void *arg, const char *type, int64_t count, const char *idx)
{
  struct gpu_sum *g = arg;

  (void)idx;
  g->n = count > SLURM_JOB_GPUS_MAX - g->n ? SLURM_JOB_GPUS_MAX
                                           : g->n + count;
  if (g->type[0] == '\0')
    snprintf(g->type, sizeof(g->type), "%s", type);
}

/* The "jobs" array of answer, with room for as many slurm_jobs. */
static int
jobs_array(const json_t *answer, struct slurm_job_list *out,
           const json_t **jobs, struct err *e)
{
  size_t n;

  out->jobs = NULL;
  out->n = 0;
  *jobs = json_object_get(answer, "jobs");
  if (!json_is_array(*jobs))
    return err_set(e, ERR_SITE, "slurmrestd's answer has no 'jobs' array");
  n = json_array_size(*jobs);
  if (n > MAX_JOBS)
    return err_set(e, ERR_SITE, "slurmrestd lists %zu jobs (more than %d)",
                   n, MAX_JOBS);
  out->jobs = xcalloc(n > 0 ? n : 1, sizeof(*out->jobs));
  return 0;
}

static int
job_id_of(const json_t *o, size_t i, const char *field, int64_t *id,
          struct err *e)
{
  const json_t *v = json_object_get(o, field);

  if (!json_is_object(o) || !json_is_integer(v) ||
      json_integer_value(v) <= 0)
    return err_set(e, ERR_SITE,
                   "slurmrestd's answer: jobs[%zu].%s is not a job id", i,
                   field);
  *id = json_integer_value(v);
  return 0;
}

static char *
job_alloc(const json_t *o, const char *nodes)
{
  const json_t *detail = json_object_get(o, "gres_detail");
  size_t n = json_array_size(detail);
  const char **v;
  char *alloc;

  if (n == 0)
    return xstrdup("");
  v = xcalloc(n, sizeof(*v));
  for (size_t i = 0; i < n; i++) {
    const char *d = json_string_value(json_array_get(detail, i));

    v[i] = d != NULL ? d : "";
  }
  alloc = slurm_gres_alloc(nodes, v, n);
  free(v);
  return alloc;
}

/* "node=N" of a TRES string ("cpu=1,mem=1G,node=2,billing=1"), or 0. */
static int64_t
tres_node_count(const char *tres)
{
  const char *p = tres;

  while (p != NULL && *p != '\0') {
    size_t n;

    if (strncmp(p, "node=", 5) == 0) {
      n = strspn(p + 5, "0123456789");
      if (n > 0 && n <= 9 && (p[5 + n] == ',' || p[5 + n] == '\0')) {
        int64_t v = 0;

        for (size_t i = 0; i < n; i++)
          v = v * 10 + (p[5 + i] - '0');
        return v;
      }
    }
    p = strchr(p, ',');
    p = p != NULL ? p + 1 : NULL;
  }
  return 0;
}

/*
 * The nodes a per-node request is multiplied by: what was allocated,
 * else what was asked.  node_count comes last: for a pending job it is
 * an estimate (a held 1-node job read 2 on Slurm 22.05).
 */
static int64_t
job_node_count(const json_t *o)
{
  int64_t n = tres_node_count(
      json_string_value(json_object_get(o, "tres_alloc_str")));

  if (n <= 0)
    n = tres_node_count(
        json_string_value(json_object_get(o, "tres_req_str")));
  if (n <= 0)
    n = get_int(o, "node_count", 1);
  return n > 0 ? n : 1;
}

static void
job_gpus(const json_t *o, struct slurm_job *j)
{
  struct gpu_sum g;

  memset(&g, 0, sizeof(g));
  slurm_gres_each(json_string_value(json_object_get(o, "tres_per_job")),
                  add_gpus, &g);
  if (g.n == 0) {
    int64_t nodes = job_node_count(o);

    slurm_gres_each(json_string_value(json_object_get(o, "tres_per_node")),
                    add_gpus, &g);
    if (g.n > 0 && nodes > SLURM_JOB_GPUS_MAX / g.n)
      g.n = SLURM_JOB_GPUS_MAX;
    else
      g.n *= nodes;
  }
  j->gpus = g.n;
  memcpy(j->gpu_type, g.type, sizeof(j->gpu_type));
}

/*
 * GET jobs and GET job/{id}.  exit_code is the raw wait status (exit 3
 * reads 768, a job ended by SIGTERM 15); gres_detail holds one string
 * per node of the job while it runs, none once it ended.
 */
static int
jobs_v0038(const json_t *answer, const char *instance,
           struct slurm_job_list *out, struct err *e)
{
  const json_t *jobs;
  const json_t *o;
  size_t i;
  int rc;

  rc = jobs_array(answer, out, &jobs, e);
  if (rc < 0)
    return rc;
  json_array_foreach(jobs, i, o) {
    struct slurm_job *j = &out->jobs[out->n];
    const json_t *task = json_object_get(o, "array_task_id");
    int64_t id;
    char *comment;

    rc = job_id_of(o, i, "job_id", &id, e);
    if (rc < 0)
      goto fail;
    out->n++;
    j->slurm_id = id;
    comment = dup_str(o, "comment");
    j->tenbin_id = slurm_tag_parse(comment, instance);
    free(comment);
    j->state = dup_str(o, "job_state");
    j->reason = dup_str(o, "state_reason");
    j->nodes = dup_str(o, "nodes");
    j->alloc = job_alloc(o, j->nodes);
    j->stdout_path = dup_str(o, "standard_output");
    j->name = dup_str(o, "name");
    j->user = dup_str(o, "user_name");
    j->exit_raw = get_int(o, "exit_code", -1);
    j->start_s = get_time(o, "start_time");
    j->end_s = get_time(o, "end_time");
    job_gpus(o, j);
    if (get_int(o, "array_job_id", 0) > 0 && json_is_integer(task)) {
      j->array_job_id = get_int(o, "array_job_id", 0);
      j->array_task_id = json_integer_value(task);
    }
  }
  return 0;
fail:
  slurm_job_list_release(out);
  return rc;
}

/* GPUs of a dbv0.0.38 TRES list: {"type":"gres","name":"gpu[:type]"}. */
static void
tres_gpus(const json_t *list, struct gpu_sum *g)
{
  size_t i;
  const json_t *t;

  json_array_foreach(list, i, t) {
    const char *type = json_string_value(json_object_get(t, "type"));
    const char *name = json_string_value(json_object_get(t, "name"));
    int64_t count = get_int(t, "count", 0);
    char entry[96];

    if (type == NULL || name == NULL || strcmp(type, "gres") != 0 ||
        count <= 0)
      continue;
    snprintf(entry, sizeof(entry), "%.64s=%" PRId64, name, count);
    slurm_gres_each(entry, add_gpus, g);
  }
}

/* exit_code {status, return_code, signal {signal_id}} as a wait status. */
static int64_t
db_exit_raw(const json_t *ec)
{
  const json_t *sig = json_object_get(json_object_get(ec, "signal"),
                                      "signal_id");
  const char *status = json_string_value(json_object_get(ec, "status"));
  int64_t rc = get_int(ec, "return_code", -1);

  if (json_is_integer(sig) && json_integer_value(sig) > 0 &&
      json_integer_value(sig) < 128)
    return json_integer_value(sig);
  if (!json_is_object(ec) ||
      (status != NULL && strcmp(status, "PENDING") == 0) || rc < 0)
    return -1;
  return (rc & 0xff) << 8;
}

static int
db_answer_errors(const json_t *answer, struct err *e)
{
  const json_t *errors = json_object_get(answer, "errors");
  const json_t *jobs = json_object_get(answer, "jobs");
  char *text;
  int rc;

  if (json_array_size(errors) == 0)
    return 0;
  if (json_array_size(errors) == 1 && json_array_size(jobs) == 0 &&
      json_integer_value(
          json_object_get(json_array_get(errors, 0), "error_number")) ==
          9003)
    return err_set(e, ERR_NOT_FOUND, "slurmdbd: nothing found");
  text = jsonx_dump(answer);
  rc = slurm_answer_error(200, text, strlen(text), e);
  free(text);
  return rc;
}

/* GET db_job/{id}: dbv0.0.38_job, a shape of its own. */
static int
db_jobs_v0038(const json_t *answer, const char *instance,
              struct slurm_job_list *out, struct err *e)
{
  const json_t *jobs;
  const json_t *o;
  size_t i;
  int rc;

  /* slurmdbd's answers are HTTP 200 even when it refused the token:
   * only errors[] tells (9003 "Nothing found" is an empty result). */
  rc = db_answer_errors(answer, e);
  if (rc == 0)
    rc = jobs_array(answer, out, &jobs, e);
  if (rc < 0)
    return rc;
  json_array_foreach(jobs, i, o) {
    struct slurm_job *j = &out->jobs[out->n];
    const json_t *state = json_object_get(o, "state");
    const json_t *time = json_object_get(o, "time");
    const json_t *comment = json_object_get(o, "comment");
    const json_t *tres = json_object_get(o, "tres");
    const json_t *array = json_object_get(o, "array");
    struct gpu_sum g;
    int64_t id;

    rc = job_id_of(o, i, "job_id", &id, e);
    if (rc < 0)
      goto fail;
    out->n++;
    j->slurm_id = id;
    /* {administrator, job, system}: the job's own is ours. */
    if (json_is_object(comment))
      comment = json_object_get(comment, "job");
    j->tenbin_id = slurm_tag_parse(json_string_value(comment), instance);
    j->state = dup_str(state, "current");
    j->reason = dup_str(state, "reason");
    j->nodes = dup_str(o, "nodes");
    j->alloc = xstrdup("");
    j->stdout_path = xstrdup("");
    j->name = dup_str(o, "name");
    j->user = dup_str(o, "user");
    j->exit_raw = db_exit_raw(json_object_get(o, "exit_code"));
    /* Slurm 22.05's dbv0.0.38 writes any normal exit as SUCCESS with
     * return code 0 (a job that exited 7 included): only a COMPLETED
     * job's 0 is true.  For the rest the code is unknown. */
    if (j->exit_raw == 0 && j->state != NULL &&
        strcmp(j->state, "COMPLETED") != 0)
      j->exit_raw = -1;
    j->start_s = get_time(time, "start");
    j->end_s = get_time(time, "end");
    memset(&g, 0, sizeof(g));
    tres_gpus(json_object_get(tres, "allocated"), &g);
    if (g.n == 0)
      tres_gpus(json_object_get(tres, "requested"), &g);
    j->gpus = g.n;
    memcpy(j->gpu_type, g.type, sizeof(j->gpu_type));
    if (get_int(array, "job_id", 0) > 0 &&
        get_int(array, "task_id", -1) >= 0 &&
        get_int(array, "task_id", -1) < 4294967294) {
      j->array_job_id = get_int(array, "job_id", 0);
      j->array_task_id = get_int(array, "task_id", 0);
    }
  }
  return 0;
fail:
  slurm_job_list_release(out);
  return rc;
}

/* ---- nodes ---- */

/*
 * What a node's state says about taking a job.  v0.0.38 gives the base
 * state in lowercase ("idle", "mixed", "down") and the flags apart
 * ("DRAIN", "NOT_RESPONDING", "CLOUD", "POWERED_DOWN"); older forms join
 * them ("idle+drain").
 *
 * A draining node still runs its jobs but takes no new one: down.  A node
 * under Slurm's power saving that is not up (POWERED_DOWN, POWERING_UP,
 * POWERING_DOWN, or asked to power up or down) is elastic: Slurm runs its
 * ResumeProgram for a job that needs it, so its GPUs are capacity the site
 * grows into, not down ones.  A booting node is NOT_RESPONDING until its
 * slurmd registers (seen on 22.05.8: "mixed" + CLOUD, NOT_RESPONDING,
 * POWERING_UP), which is no failure.  A node that is down or drained as
 * well stays down: Slurm starts no job there, powered down or not.
 */
enum node_word {
  NW_OTHER = 0,
  NW_DOWN,         /* never takes a job in this state */
  NW_NO_RESPONSE,  /* down, unless it is powering up */
  NW_POWER,        /* not up, under power saving */
  NW_CLOUD,        /* a node of a cluster that starts nodes itself */
};

static const struct {
  const char *word;
  enum node_word kind;
} node_words[] = {
  {"down", NW_DOWN}, {"drain", NW_DOWN}, {"drained", NW_DOWN},
  {"draining", NW_DOWN}, {"fail", NW_DOWN}, {"failing", NW_DOWN},
  {"maint", NW_DOWN}, {"maintenance", NW_DOWN}, {"future", NW_DOWN},
  {"unknown", NW_DOWN}, {"inval", NW_DOWN}, {"invalid", NW_DOWN},
  {"invalid_reg", NW_DOWN}, {"error", NW_DOWN},
  {"not_responding", NW_NO_RESPONSE}, {"no_respond", NW_NO_RESPONSE},
  {"powered_down", NW_POWER}, {"powering_up", NW_POWER},
  {"powering_down", NW_POWER}, {"power_down", NW_POWER},
  {"power_up", NW_POWER},
  {"cloud", NW_CLOUD},
};

enum node_use { NODE_UP, NODE_DOWN, NODE_ELASTIC };

struct node_state {
  enum node_use use;
  int cloud;       /* CLOUD or a power-saving word: Slurm starts it */
};

static enum node_word
node_word(const char *w, size_t len)
{
  for (size_t i = 0; i < sizeof(node_words) / sizeof(node_words[0]); i++) {
    if (strlen(node_words[i].word) == len &&
        strncasecmp(node_words[i].word, w, len) == 0)
      return node_words[i].kind;
  }
  return NW_OTHER;
}

static void
node_state_of(const json_t *node, struct node_state *out)
{
  const char *state = json_string_value(json_object_get(node, "state"));
  const json_t *flags = json_object_get(node, "state_flags");
  const json_t *f;
  int n[NW_CLOUD + 1] = {0}; /* words of each kind, state and flags */
  size_t i;

  memset(out, 0, sizeof(*out));
  if (state == NULL || state[0] == '\0') {
    out->use = NODE_DOWN;
    return;
  }
  for (const char *p = state; *p != '\0';) {
    size_t len = strcspn(p, "+");

    n[node_word(p, len)]++;
    p += len;
    p += *p == '+';
  }
  json_array_foreach(flags, i, f) {
    const char *w = json_string_value(f);

    if (w != NULL)
      n[node_word(w, strlen(w))]++;
  }
  out->cloud = n[NW_CLOUD] > 0 || n[NW_POWER] > 0;
  if (n[NW_DOWN] > 0)
    out->use = NODE_DOWN;
  else if (n[NW_POWER] > 0)
    out->use = NODE_ELASTIC;
  else if (n[NW_NO_RESPONSE] > 0)
    out->use = NODE_DOWN;
  else
    out->use = NODE_UP;
}

struct node_gres {
  int n;
  char type[MAX_NODE_GRES][ADAPTER_GPU_TYPE_LEN];
  int64_t count[MAX_NODE_GRES];
};

/* Untyped GPUs ("gpu:8") form a pool of type "gpu": a job that names no
 * type may use them, one that names a type may not. */
static void
add_node_gres(void *arg, const char *type, int64_t count, const char *idx)
{
  struct node_gres *g = arg;
  const char *t = type[0] != '\0' ? type : "gpu";
  int k;

  (void)idx;
  for (k = 0; k < g->n; k++) {
    if (strcmp(g->type[k], t) == 0)
      break;
  }
  if (k == g->n) {
    if (g->n == MAX_NODE_GRES)
      return;
    snprintf(g->type[k], sizeof(g->type[k]), "%s", t);
    g->count[k] = 0;
    g->n++;
  }
  g->count[k] += count;
}

static struct adapter_gpu_pool *
pool_of(struct adapter_capacity *cap, const char *type)
{
  struct adapter_gpu_pool *p;

  for (int i = 0; i < cap->npools; i++) {
    if (strcmp(cap->pools[i].type, type) == 0)
      return &cap->pools[i];
  }
  /* Types past ADAPTER_MAX_POOLS are left out: asking for them by name
   * fails as "no such GPU here", the others stay right, where an error
   * would make the whole site unusable. */
  if (cap->npools == ADAPTER_MAX_POOLS)
    return NULL;
  p = &cap->pools[cap->npools++];
  memset(p, 0, sizeof(*p));
  snprintf(p->type, sizeof(p->type), "%s", type);
  return p;
}

/*
 * GET nodes.  pools[].down counts the GPUs of down or drained nodes that
 * no job holds, and pools[].grow those of elastic nodes (node_state_of)
 * that no job holds, so that total = in_use + down + grow + idle (a
 * draining node's running jobs are in_use, not down twice; the GPUs a
 * job was given on a node still powering up are in_use, not grow).
 * Elastic nodes count in nodes, not in nodes_down: they can run jobs.
 * grows_on_submit is 1 when any node is under Slurm's power saving.
 * Only the figures the schema knows are written; reachable, detail, the
 * job counts and grow_ms are the adapter's.
 */
static int
nodes_v0038(const json_t *answer, struct adapter_capacity *cap,
            struct err *e)
{
  const json_t *nodes = json_object_get(answer, "nodes");
  const json_t *node;
  size_t i;

  if (!json_is_array(nodes))
    return err_set(e, ERR_SITE, "slurmrestd's answer has no 'nodes' array");
  cap->nodes = 0;
  cap->nodes_down = 0;
  cap->npools = 0;
  cap->grows_on_submit = 0;
  json_array_foreach(nodes, i, node) {
    struct node_gres have;
    struct node_gres used;
    struct node_state st;

    if (!json_is_object(node))
      return err_set(e, ERR_SITE,
                     "slurmrestd's answer: nodes[%zu] is not an object", i);
    node_state_of(node, &st);
    if (st.use == NODE_DOWN)
      cap->nodes_down++;
    else
      cap->nodes++;
    if (st.cloud)
      cap->grows_on_submit = 1;
    memset(&have, 0, sizeof(have));
    memset(&used, 0, sizeof(used));
    slurm_gres_each(json_string_value(json_object_get(node, "gres")),
                    add_node_gres, &have);
    slurm_gres_each(json_string_value(json_object_get(node, "gres_used")),
                    add_node_gres, &used);
    for (int k = 0; k < have.n; k++) {
      struct adapter_gpu_pool *p = pool_of(cap, have.type[k]);
      int64_t busy = 0;

      if (p == NULL)
        continue;
      for (int u = 0; u < used.n; u++) {
        if (strcmp(used.type[u], have.type[k]) == 0)
          busy = used.count[u];
      }
      if (busy > have.count[k])
        busy = have.count[k];
      p->total += have.count[k];
      p->in_use += busy;
      if (st.use == NODE_DOWN)
        p->down += have.count[k] - busy;
      else if (st.use == NODE_ELASTIC)
        p->grow += have.count[k] - busy;
      if (have.count[k] > p->per_node)
        p->per_node = have.count[k];
    }
  }
  return 0;
}

/* A string member of o into out when it fits, else "": a name cut to
 * fit could pass for another node's. */
static void
node_str(const json_t *o, const char *key, char *out, size_t outsz)
{
  const char *v = json_string_value(json_object_get(o, key));

  out[0] = '\0';
  if (v != NULL && strlen(v) < outsz)
    memcpy(out, v, strlen(v) + 1);
}

/* GET nodes, node by node: name, address and GPUs. */
static int
node_list_v0038(const json_t *answer, struct slurm_node_list *out,
                struct err *e)
{
  const json_t *nodes = json_object_get(answer, "nodes");
  const json_t *node;
  size_t i;

  out->nodes = NULL;
  out->n = 0;
  if (!json_is_array(nodes))
    return err_set(e, ERR_SITE, "slurmrestd's answer has no 'nodes' array");
  out->nodes = xcalloc(json_array_size(nodes) + 1, sizeof(*out->nodes));
  json_array_foreach(nodes, i, node) {
    struct slurm_node *n = &out->nodes[out->n];
    struct node_gres have;

    if (!json_is_object(node)) {
      slurm_node_list_release(out);
      return err_set(e, ERR_SITE,
                     "slurmrestd's answer: nodes[%zu] is not an object", i);
    }
    node_str(node, "name", n->name, sizeof(n->name));
    if (n->name[0] == '\0')
      continue;
    node_str(node, "address", n->address, sizeof(n->address));
    memset(&have, 0, sizeof(have));
    slurm_gres_each(json_string_value(json_object_get(node, "gres")),
                    add_node_gres, &have);
    for (int k = 0; k < have.n; k++) {
      if (have.count[k] > SLURM_JOB_GPUS_MAX - n->gpus)
        break;
      n->gpus += have.count[k];
    }
    if (have.n > 0)
      snprintf(n->gpu_type, sizeof(n->gpu_type), "%s", have.type[0]);
    out->n++;
  }
  return 0;
}

const struct slurm_schema slurm_schema_v0038 = {
  .version = VERSION,
  .path = path_v0038,
  .submit_body = submit_body_v0038,
  .submit_id = submit_id_v0038,
  .jobs = jobs_v0038,
  .db_jobs = db_jobs_v0038,
  .nodes = nodes_v0038,
  .node_list = node_list_v0038,
};
