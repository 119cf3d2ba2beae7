/*
 * Argument parsing for tenbin and the request bodies built from it.
 *
 * getopt_long keeps its state in globals; every parser starts with
 * args_reset() (glibc re-initialises fully when optind is 0), so parsers
 * can run many times in one process, as the unit tests do.  opterr is
 * off and errors become ERR_INVALID messages that the caller prints.
 */
#include "cli/args.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/format.h"
#include "util/alloc.h"
#include "util/timeutil.h"

#define MAX_GPUS 4096 /* JOBSPEC_MAX_GPUS */
#define MAX_NODES 1024 /* JOBSPEC_MAX_NODES */
#define MAX_PAGE 1000 /* the largest limit GET /v1/jobs accepts */

const char cli_submit_usage[] =
    "usage: tenbin submit [options] [--] CMD [ARGS...]\n"
    "   or: tenbin submit [options] --workload NAME [--param K=V]...\n"
    "\n"
    "Submit a job and print its id.  Options end at '--' or at the first\n"
    "argument that is not an option; the rest is the command, verbatim.\n"
    "\n"
    "  --name N              job name\n"
    "  --project P           project the job belongs to\n"
    "  --gpus N              GPUs in total (0..4096)\n"
    "  --gpu-type T          GPU type, e.g. h100\n"
    "  --nodes N             nodes (1..1024)\n"
    "  --gpus-per-node N     GPUs on each node\n"
    "  --time LIMIT          time limit: minutes or [D-]HH:MM:SS\n"
    "  --site S              run on this site only\n"
    "  --env K=V             environment variable (repeatable)\n"
    "  --chdir D             working directory\n"
    "  --output F            file for stdout\n"
    "  --error F             file for stderr\n"
    "  --hold                keep it queued until 'tenbin release'\n"
    "  --workload NAME       fill the job from a catalog workload\n"
    "  --param K=V           workload parameter (repeatable)\n"
    "  --idempotency-key K   a retry with the same key returns the same "
    "job\n";

const char cli_sbatch_usage[] =
    "usage: tenbin sbatch [options] SCRIPT\n"
    "\n"
    "Submit a batch script ('-' reads it from stdin, at most 512 KiB) and\n"
    "print the job id; its #SBATCH lines are honoured, and directives\n"
    "tenbin does not interpret are reported on stderr.\n"
    "\n"
    "  --name N              job name\n"
    "  --project P           project the job belongs to\n"
    "  --site S              run on this site only\n"
    "  --hold                keep it queued until 'tenbin release'\n"
    "  --idempotency-key K   a retry with the same key returns the same "
    "job\n";

const char cli_jobs_usage[] =
    "usage: tenbin jobs [options]\n"
    "\n"
    "List jobs, newest first.\n"
    "\n"
    "  --state S     only jobs in state S (queued, placed, submitted,\n"
    "                running, succeeded, failed, cancelled, lost)\n"
    "  --project P   only jobs of project P\n"
    "  --site S      only jobs on site S\n"
    "  --limit N     at most N jobs (a page size with --all; 1..1000)\n"
    "  --all         every page, not only the first\n";

const char cli_logs_usage[] =
    "usage: tenbin logs [-f|--follow] ID\n"
    "\n"
    "Write the job's output to stdout.\n"
    "\n"
    "  -f, --follow  keep reading until the job has ended\n";

static const char *const job_states[] = {
    "queued",    "placed", "submitted", "running",
    "succeeded", "failed", "cancelled", "lost",
};

static const char *
env_lookup(const char *name)
{
  return getenv(name);
}

static void
args_reset(void)
{
  optind = 0;
  opterr = 0;
}

/* The ERR_INVALID for what getopt_long returned as c ('?' or ':'). */
static int
opt_error(int c, char **argv, struct err *e)
{
  const char *arg = argv[optind - 1];
  size_t n = strcspn(arg, "=");

  if (c == ':')
    return err_set(e, ERR_INVALID, "option '%.*s' needs a value", (int)n,
                   arg);
  if (optopt != 0)
    return err_set(e, ERR_INVALID, "unknown option '-%c'", optopt);
  return err_set(e, ERR_INVALID, "unknown option '%.*s'", (int)n, arg);
}

/* A decimal integer in [min, max]; the whole string, no sign, no blanks. */
static int
parse_int(const char *opt, const char *s, int64_t min, int64_t max,
          int64_t *out, struct err *e)
{
  char *end = NULL;
  long long v;

  if (s[0] < '0' || s[0] > '9')
    goto bad;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    goto bad;
  *out = v;
  return 0;
bad:
  return err_set(e, ERR_INVALID,
                 "option '%s': '%s' is not an integer between %lld and %lld",
                 opt, s, (long long)min, (long long)max);
}

/* body[key] = value, which must be valid UTF-8 for JSON to carry it. */
static int
set_str(json_t *body, const char *key, const char *opt, const char *value,
        struct err *e)
{
  if (json_object_set_new(body, key, json_string(value)) < 0)
    return err_set(e, ERR_INVALID, "option '%s': not valid UTF-8", opt);
  return 0;
}

/* Add "K=V" to the object *obj (created on first use); V may be empty. */
static int
add_pair(json_t **obj, const char *opt, const char *pair, struct err *e)
{
  const char *eq = strchr(pair, '=');
  char *key = NULL;
  int rc = ERR_INVALID;

  if (eq == NULL || eq == pair) {
    err_set(e, ERR_INVALID, "option '%s': '%s' is not KEY=VALUE", opt, pair);
    goto out;
  }
  key = xstrndup(pair, (size_t)(eq - pair));
  if (*obj == NULL)
    *obj = json_object();
  if (json_object_set_new(*obj, key, json_string(eq + 1)) < 0) {
    err_set(e, ERR_INVALID, "option '%s': '%s' is not valid UTF-8", opt,
            pair);
    goto out;
  }
  rc = 0;
out:
  free(key);
  return rc;
}

/* Slurm syntax is checked here so a typo fails before any request. */
static int
set_time(json_t *body, const char *s, struct err *e)
{
  int64_t seconds;
  int64_t minutes;

  if (time_parse_slurm_duration(s, &seconds) < 0)
    return err_set(e, ERR_INVALID,
                   "option '--time': '%s' is not a time limit (minutes, "
                   "HH:MM:SS or D-HH:MM:SS)",
                   s);
  /* Plain minutes go as an integer; anything else as Slurm wrote it. */
  if (parse_int("--time", s, 0, INT64_MAX, &minutes, NULL) == 0)
    return json_object_set_new(body, "time_limit", json_integer(minutes));
  return set_str(body, "time_limit", "--time", s, e);
}

/* A key that fits the header: 1..128 visible ASCII characters. */
static int
set_idem_key(char **dst, const char *s, struct err *e)
{
  size_t n = strlen(s);

  if (n == 0 || n > CLI_MAX_IDEM_KEY)
    return err_set(e, ERR_INVALID,
                   "option '--idempotency-key': must be 1 to %d characters",
                   CLI_MAX_IDEM_KEY);
  for (size_t i = 0; i < n; i++)
    if (s[i] <= ' ' || s[i] >= 0x7f)
      return err_set(e, ERR_INVALID,
                     "option '--idempotency-key': only visible ASCII "
                     "characters are allowed");
  free(*dst);
  *dst = xstrdup(s);
  return 0;
}

int
cli_global_parse(int argc, char **argv,
                 const char *(*getenv_fn)(const char *name),
                 struct cli_global *out, struct err *e)
{
  static const struct option opts[] = {
      {"server", required_argument, NULL, 's'},
      {"token", required_argument, NULL, 't'},
      {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  const char *env;

  memset(out, 0, sizeof(*out));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, "+:h", opts, NULL);

    if (c == -1)
      break;
    switch (c) {
    case 's':
      out->server = optarg;
      break;
    case 't':
      out->token = optarg;
      break;
    case 'j':
      out->json = 1;
      break;
    case 'h':
      out->help = 1;
      break;
    case 'V':
      out->version = 1;
      break;
    default:
      return opt_error(c, argv, e);
    }
  }
  out->cmd_index = optind;
  if (getenv_fn == NULL)
    getenv_fn = env_lookup;
  if (out->server == NULL) {
    env = getenv_fn("TENBIN_SERVER");
    out->server = env != NULL && env[0] != '\0' ? env : CLI_DEFAULT_SERVER;
  }
  if (out->token == NULL) {
    env = getenv_fn("TENBIN_TOKEN");
    out->token = env != NULL && env[0] != '\0' ? env : NULL;
  }
  if (out->server[0] == '\0')
    return err_set(e, ERR_INVALID, "option '--server': empty URL");
  return 0;
}

void
cli_submit_init(struct cli_submit *s)
{
  s->body = NULL;
  s->idempotency_key = NULL;
}

void
cli_submit_release(struct cli_submit *s)
{
  if (s == NULL)
    return;
  json_decref(s->body);
  free(s->idempotency_key);
  cli_submit_init(s);
}

enum {
  OPT_NAME = 256,
  OPT_PROJECT,
  OPT_GPUS,
  OPT_GPU_TYPE,
  OPT_NODES,
  OPT_GPUS_PER_NODE,
  OPT_TIME,
  OPT_SITE,
  OPT_ENV,
  OPT_CHDIR,
  OPT_OUTPUT,
  OPT_ERROR,
  OPT_HOLD,
  OPT_WORKLOAD,
  OPT_PARAM,
  OPT_IDEM,
  OPT_STATE,
  OPT_LIMIT,
  OPT_ALL,
};

/* One submit option into body (or env/params/key); 0 or ERR_INVALID. */
static int
submit_option(int c, const char *arg, struct cli_submit *s, json_t **env,
              json_t **params, struct err *e)
{
  int64_t n;
  int rc;

  switch (c) {
  case OPT_NAME:
    return set_str(s->body, "name", "--name", arg, e);
  case OPT_PROJECT:
    return set_str(s->body, "project", "--project", arg, e);
  case OPT_GPUS:
    rc = parse_int("--gpus", arg, 0, MAX_GPUS, &n, e);
    if (rc == 0)
      json_object_set_new(s->body, "gpus", json_integer(n));
    return rc;
  case OPT_GPU_TYPE:
    return set_str(s->body, "gpu_type", "--gpu-type", arg, e);
  case OPT_NODES:
    rc = parse_int("--nodes", arg, 1, MAX_NODES, &n, e);
    if (rc == 0)
      json_object_set_new(s->body, "nodes", json_integer(n));
    return rc;
  case OPT_GPUS_PER_NODE:
    rc = parse_int("--gpus-per-node", arg, 1, MAX_GPUS, &n, e);
    if (rc == 0)
      json_object_set_new(s->body, "gpus_per_node", json_integer(n));
    return rc;
  case OPT_TIME:
    return set_time(s->body, arg, e);
  case OPT_SITE:
    return set_str(s->body, "site", "--site", arg, e);
  case OPT_ENV:
    return add_pair(env, "--env", arg, e);
  case OPT_CHDIR:
    return set_str(s->body, "chdir", "--chdir", arg, e);
  case OPT_OUTPUT:
    return set_str(s->body, "output", "--output", arg, e);
  case OPT_ERROR:
    return set_str(s->body, "error", "--error", arg, e);
  case OPT_HOLD:
    json_object_set_new(s->body, "hold", json_true());
    return 0;
  case OPT_WORKLOAD:
    return set_str(s->body, "workload", "--workload", arg, e);
  case OPT_PARAM:
    return add_pair(params, "--param", arg, e);
  case OPT_IDEM:
    return set_idem_key(&s->idempotency_key, arg, e);
  }
  return err_set(e, ERR_INTERNAL, "unhandled option %d", c);
}

int
cli_submit_parse(int argc, char **argv, struct cli_submit *s, struct err *e)
{
  static const struct option opts[] = {
      {"name", required_argument, NULL, OPT_NAME},
      {"project", required_argument, NULL, OPT_PROJECT},
      {"gpus", required_argument, NULL, OPT_GPUS},
      {"gpu-type", required_argument, NULL, OPT_GPU_TYPE},
      {"nodes", required_argument, NULL, OPT_NODES},
      {"gpus-per-node", required_argument, NULL, OPT_GPUS_PER_NODE},
      {"time", required_argument, NULL, OPT_TIME},
      {"site", required_argument, NULL, OPT_SITE},
      {"env", required_argument, NULL, OPT_ENV},
      {"chdir", required_argument, NULL, OPT_CHDIR},
      {"output", required_argument, NULL, OPT_OUTPUT},
      {"error", required_argument, NULL, OPT_ERROR},
      {"hold", no_argument, NULL, OPT_HOLD},
      {"workload", required_argument, NULL, OPT_WORKLOAD},
      {"param", required_argument, NULL, OPT_PARAM},
      {"idempotency-key", required_argument, NULL, OPT_IDEM},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  json_t *env = NULL;
  json_t *params = NULL;
  json_t *cmd = NULL;
  int rc = ERR_INVALID;

  s->body = json_object();
  args_reset();
  for (;;) {
    /* '+': stop at the first non-option, so CMD keeps its own options. */
    int c = getopt_long(argc, argv, "+:h", opts, NULL);

    if (c == -1)
      break;
    if (c == 'h') {
      rc = CLI_HELP;
      goto out;
    }
    if (c == '?' || c == ':') {
      rc = opt_error(c, argv, e);
      goto out;
    }
    rc = submit_option(c, optarg, s, &env, &params, e);
    if (rc < 0)
      goto out;
  }
  rc = ERR_INVALID;
  if (optind < argc) {
    cmd = json_array();
    for (int i = optind; i < argc; i++) {
      if (json_array_append_new(cmd, json_string(argv[i])) < 0) {
        err_set(e, ERR_INVALID, "command argument %d: not valid UTF-8",
                i - optind + 1);
        goto out;
      }
    }
    json_object_set_new(s->body, "command", cmd);
    cmd = NULL;
  } else if (json_object_get(s->body, "workload") == NULL) {
    err_set(e, ERR_INVALID, "a command after '--' or --workload is needed");
    goto out;
  }
  if (params != NULL && json_object_get(s->body, "workload") == NULL) {
    err_set(e, ERR_INVALID, "option '--param' needs --workload");
    goto out;
  }
  if (env != NULL)
    json_object_set_new(s->body, "env", env);
  env = NULL;
  if (params != NULL)
    json_object_set_new(s->body, "params", params);
  params = NULL;
  rc = 0;
out:
  json_decref(env);
  json_decref(params);
  json_decref(cmd);
  if (rc != 0) {
    json_decref(s->body);
    s->body = NULL;
  }
  return rc;
}

void
cli_sbatch_init(struct cli_sbatch *s)
{
  s->body = NULL;
  s->path = NULL;
  s->idempotency_key = NULL;
}

void
cli_sbatch_release(struct cli_sbatch *s)
{
  if (s == NULL)
    return;
  json_decref(s->body);
  free(s->idempotency_key);
  cli_sbatch_init(s);
}

int
cli_sbatch_parse(int argc, char **argv, struct cli_sbatch *s, struct err *e)
{
  static const struct option opts[] = {
      {"name", required_argument, NULL, OPT_NAME},
      {"project", required_argument, NULL, OPT_PROJECT},
      {"site", required_argument, NULL, OPT_SITE},
      {"hold", no_argument, NULL, OPT_HOLD},
      {"idempotency-key", required_argument, NULL, OPT_IDEM},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  struct cli_submit sub;
  int rc = ERR_INVALID;

  /* The shared options mean what they mean for submit. */
  cli_submit_init(&sub);
  sub.body = json_object();
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", opts, NULL);

    if (c == -1)
      break;
    if (c == 'h') {
      rc = CLI_HELP;
      goto out;
    }
    if (c == '?' || c == ':') {
      rc = opt_error(c, argv, e);
      goto out;
    }
    rc = submit_option(c, optarg, &sub, NULL, NULL, e);
    if (rc < 0)
      goto out;
  }
  rc = ERR_INVALID;
  if (optind >= argc) {
    err_set(e, ERR_INVALID, "a SCRIPT argument is needed");
    goto out;
  }
  if (optind + 1 < argc) {
    err_set(e, ERR_INVALID, "unexpected argument '%s' after the script",
            argv[optind + 1]);
    goto out;
  }
  s->path = argv[optind];
  s->body = sub.body;
  sub.body = NULL;
  s->idempotency_key = sub.idempotency_key;
  sub.idempotency_key = NULL;
  rc = 0;
out:
  cli_submit_release(&sub);
  return rc;
}

int
cli_sbatch_set_script(json_t *body, const char *text, size_t len,
                      struct err *e)
{
  if (len == 0)
    return err_set(e, ERR_INVALID, "script is empty");
  if (json_object_set_new(body, "script", json_stringn(text, len)) < 0)
    return err_set(e, ERR_INVALID, "script is not valid UTF-8");
  return 0;
}

int
cli_read_file(const char *path, struct buf *out, struct err *e)
{
  char chunk[16384];
  int is_stdin = strcmp(path, "-") == 0;
  const char *name = is_stdin ? "stdin" : path;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  int rc = 0;

  if (f == NULL)
    return err_set(e, ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  for (;;) {
    size_t n = fread(chunk, 1, sizeof(chunk), f);

    if (n > 0 && buf_add(out, chunk, n) < 0) {
      rc = err_set(e, ERR_TOO_LARGE, "'%s': larger than %zu KiB", name,
                   out->max / 1024);
      break;
    }
    if (n < sizeof(chunk)) {
      if (ferror(f))
        rc = err_set(e, ERR_IO, "cannot read '%s': %s", name,
                     strerror(errno));
      break;
    }
  }
  if (!is_stdin)
    fclose(f);
  return rc;
}

int
cli_is_job_state(const char *name)
{
  for (size_t i = 0; i < sizeof(job_states) / sizeof(job_states[0]); i++)
    if (strcmp(name, job_states[i]) == 0)
      return 1;
  return 0;
}

int
cli_jobs_parse(int argc, char **argv, struct cli_jobs *o, struct err *e)
{
  static const struct option opts[] = {
      {"state", required_argument, NULL, OPT_STATE},
      {"project", required_argument, NULL, OPT_PROJECT},
      {"site", required_argument, NULL, OPT_SITE},
      {"limit", required_argument, NULL, OPT_LIMIT},
      {"all", no_argument, NULL, OPT_ALL},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };

  memset(o, 0, sizeof(*o));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", opts, NULL);

    if (c == -1)
      break;
    switch (c) {
    case 'h':
      return CLI_HELP;
    case OPT_STATE:
      if (!cli_is_job_state(optarg))
        return err_set(e, ERR_INVALID,
                       "option '--state': unknown state '%s'", optarg);
      o->state = optarg;
      break;
    case OPT_PROJECT:
      o->project = optarg;
      break;
    case OPT_SITE:
      o->site = optarg;
      break;
    case OPT_LIMIT:
      if (parse_int("--limit", optarg, 1, MAX_PAGE, &o->limit, e) < 0)
        return ERR_INVALID;
      break;
    case OPT_ALL:
      o->all = 1;
      break;
    default:
      return opt_error(c, argv, e);
    }
  }
  if (optind < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'", argv[optind]);
  return 0;
}

int
cli_jobs_path(const struct cli_jobs *o, const char *cursor, struct buf *out)
{
  char limit[32];
  int rc = buf_adds(out, "/v1/jobs");

  snprintf(limit, sizeof(limit), "%lld", (long long)o->limit);
  if (rc == 0)
    rc = cli_url_add_query(out, "state", o->state);
  if (rc == 0)
    rc = cli_url_add_query(out, "project", o->project);
  if (rc == 0)
    rc = cli_url_add_query(out, "site", o->site);
  if (rc == 0)
    rc = cli_url_add_query(out, "limit", o->limit > 0 ? limit : NULL);
  if (rc == 0)
    rc = cli_url_add_query(out, "cursor", cursor);
  return rc;
}

int
cli_logs_parse(int argc, char **argv, struct cli_logs *o, struct err *e)
{
  static const struct option opts[] = {
      {"follow", no_argument, NULL, 'f'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };

  memset(o, 0, sizeof(*o));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":fh", opts, NULL);

    if (c == -1)
      break;
    if (c == 'h')
      return CLI_HELP;
    if (c != 'f')
      return opt_error(c, argv, e);
    o->follow = 1;
  }
  if (optind >= argc)
    return err_set(e, ERR_INVALID, "a job ID is needed");
  if (optind + 1 < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'",
                   argv[optind + 1]);
  return cli_parse_job_id(argv[optind], &o->id, e);
}

int
cli_args_positional(int argc, char **argv, int min, int max, int *first,
                    struct err *e)
{
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;
  int n;

  /* Any option but --help is an error, so the first one decides. */
  args_reset();
  c = getopt_long(argc, argv, ":h", opts, NULL);
  if (c == 'h')
    return CLI_HELP;
  if (c != -1)
    return opt_error(c, argv, e);
  n = argc - optind;
  if (n < min)
    return err_set(e, ERR_INVALID, "%s", min == 1 ? "an argument is needed"
                                                  : "arguments are missing");
  if (max >= 0 && n > max)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'",
                   argv[optind + max]);
  *first = optind;
  return 0;
}

int
cli_parse_job_id(const char *s, int64_t *out, struct err *e)
{
  int64_t id;

  if (parse_int("ID", s, 1, INT64_MAX, &id, NULL) < 0)
    return err_set(e, ERR_INVALID, "job id '%s': not a positive integer", s);
  *out = id;
  return 0;
}

int
cli_usage_error(const char *usage, const struct err *e)
{
  size_t n = strcspn(usage, "\n");

  fprintf(stderr, "tenbin: %s\n%.*s\n", err_msg(e), (int)n, usage);
  return CLI_EXIT_USAGE;
}
