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
    "  --dataset D[@V]       run where version V (default: the latest) of\n"
    "                        dataset D is; it is copied there first\n"
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
    "  --dataset D[@V]       run where version V (default: the latest) of\n"
    "                        dataset D is; it is copied there first\n"
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

const char cli_dataset_usage[] =
    "usage: tenbin dataset COMMAND [ARGS]\n"
    "\n"
    "Datasets are versioned directory trees that tenbin copies between\n"
    "sites.\n"
    "\n"
    "  add NAME --site S --path P [--project P]\n"
    "                              register the directory P at site S\n"
    "  publish NAME                snapshot the source as a new version\n"
    "  sync NAME[@V] --site S      copy version V (default: the latest)\n"
    "                              to site S and show the progress\n"
    "  ls                          list datasets\n"
    "  show NAME                   show versions and replicas\n"
    "\n"
    "Run 'tenbin dataset COMMAND --help' for the options of a command.\n";

const char cli_dataset_add_usage[] =
    "usage: tenbin dataset add NAME --site SITE --path PATH [--project P]\n"
    "\n"
    "Register a dataset whose source is the directory PATH under the agent\n"
    "root of SITE.  NAME is 1 to 64 of A-Z a-z 0-9 . _ - and starts with a\n"
    "letter or a digit.\n"
    "\n"
    "  --site SITE     the source site (it needs an agent)\n"
    "  --path PATH     the directory, relative to the agent's root\n"
    "  --project P     the project whose tokens see and use the dataset\n"
    "                  (required but for an admin of every project; PATH\n"
    "                  must be under a root the site allows P, unless an\n"
    "                  admin registers it)\n";

const char cli_dataset_publish_usage[] =
    "usage: tenbin dataset publish NAME\n"
    "\n"
    "Snapshot the source directory now as a version and print its id;\n"
    "unchanged content gives the same id again.\n";

const char cli_dataset_sync_usage[] =
    "usage: tenbin dataset sync NAME[@VERSION] --site SITE [--no-wait]\n"
    "                           [--timeout T]\n"
    "\n"
    "Copy a version of a dataset to SITE and show its progress until it is\n"
    "complete (exit 0) or failed (exit 1).  VERSION is a version id, the\n"
    "start of one, or 'latest' (the default).  Ctrl-C stops watching; the\n"
    "copy goes on ('tenbin dataset show NAME').  With --json, the replica\n"
    "is printed as JSON when it ends (with --no-wait, at once).  While the\n"
    "copy cannot go on (an agent is down), the reason and the next try are\n"
    "printed.\n"
    "\n"
    "  --site SITE   the site that gets the copy\n"
    "  --no-wait     ask for the copy and return at once\n"
    "  --timeout T   stop watching after T (seconds, or 90s, 5m, 2h) and\n"
    "                exit 1 if the copy is not complete; it goes on\n";

const char cli_dataset_ls_usage[] =
    "usage: tenbin dataset ls\n\nList datasets.\n";

const char cli_dataset_show_usage[] =
    "usage: tenbin dataset show NAME\n"
    "\n"
    "Show a dataset, its versions (newest first) and its replicas.\n";

static const char *const job_states[] = {
    "queued",    "placed", "submitted", "running",   "succeeded",
    "failed",    "cancelled", "lost",   "staging",
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
  OPT_PATH,
  OPT_NO_WAIT,
  OPT_TIMEOUT,
  OPT_DATASET,
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
  case OPT_DATASET:
    /* tenbind resolves NAME[@VERSION] and names what is wrong with it. */
    return set_str(s->body, "dataset", "--dataset", arg, e);
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
      {"dataset", required_argument, NULL, OPT_DATASET},
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
      {"dataset", required_argument, NULL, OPT_DATASET},
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

/* ASCII only: a dataset name must not depend on the locale. */
static int
is_alnum(char c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9');
}

static int
is_hex(char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

int
cli_is_dataset_name(const char *name)
{
  size_t n = strlen(name);

  if (n == 0 || n > CLI_DATASET_NAME_MAX || !is_alnum(name[0]))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!is_alnum(name[i]) && strchr("._-", name[i]) == NULL)
      return 0;
  return 1;
}

static int
dataset_name_error(const char *name, struct err *e)
{
  return err_set(e, ERR_INVALID,
                 "dataset name '%s': 1 to %d of A-Z a-z 0-9 . _ -, "
                 "starting with a letter or a digit",
                 name, CLI_DATASET_NAME_MAX);
}

int
cli_dataset_add_parse(int argc, char **argv, json_t **body, struct err *e)
{
  static const struct option opts[] = {
      {"site", required_argument, NULL, OPT_SITE},
      {"path", required_argument, NULL, OPT_PATH},
      {"project", required_argument, NULL, OPT_PROJECT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *site = NULL;
  const char *path = NULL;
  const char *project = NULL;
  const char *name;
  json_t *b = NULL;
  int rc = ERR_INVALID;

  *body = NULL;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", opts, NULL);

    if (c == -1)
      break;
    if (c == 'h')
      return CLI_HELP;
    if (c == OPT_SITE)
      site = optarg;
    else if (c == OPT_PATH)
      path = optarg;
    else if (c == OPT_PROJECT)
      project = optarg;
    else
      return opt_error(c, argv, e);
  }
  if (optind >= argc)
    return err_set(e, ERR_INVALID, "a dataset NAME is needed");
  if (optind + 1 < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'",
                   argv[optind + 1]);
  name = argv[optind];
  if (!cli_is_dataset_name(name))
    return dataset_name_error(name, e);
  if (site == NULL || site[0] == '\0')
    return err_set(e, ERR_INVALID, "option '--site' is needed");
  if (path == NULL || path[0] == '\0')
    return err_set(e, ERR_INVALID, "option '--path' is needed");
  b = json_object();
  json_object_set_new(b, "name", json_string(name));
  if (set_str(b, "source_site", "--site", site, e) < 0 ||
      set_str(b, "path", "--path", path, e) < 0 ||
      (project != NULL && set_str(b, "project", "--project", project, e) < 0))
    goto out;
  *body = b;
  b = NULL;
  rc = 0;
out:
  json_decref(b);
  return rc;
}

int
cli_dataset_name_parse(int argc, char **argv, const char **name,
                       struct err *e)
{
  int first;
  int rc = cli_args_positional(argc, argv, 0, 1, &first, e);

  if (rc != 0)
    return rc;
  if (first >= argc)
    return err_set(e, ERR_INVALID, "a dataset NAME is needed");
  if (!cli_is_dataset_name(argv[first]))
    return dataset_name_error(argv[first], e);
  *name = argv[first];
  return 0;
}

/* "NAME[@VERSION]" into o->name and o->version. */
static int
split_name_version(const char *arg, struct cli_dataset_sync *o,
                   struct err *e)
{
  const char *at = strchr(arg, '@');
  size_t n = at != NULL ? (size_t)(at - arg) : strlen(arg);
  const char *v = at != NULL ? at + 1 : "latest";
  size_t vn = strlen(v);

  if (n > CLI_DATASET_NAME_MAX)
    n = 0; /* fails the check below, which names the whole argument */
  memcpy(o->name, arg, n);
  o->name[n] = '\0';
  if (!cli_is_dataset_name(o->name))
    return err_set(e, ERR_INVALID,
                   "dataset name in '%s': 1 to %d of A-Z a-z 0-9 . _ -, "
                   "starting with a letter or a digit",
                   arg, CLI_DATASET_NAME_MAX);
  if (strcmp(v, "latest") == 0) {
    snprintf(o->version, sizeof(o->version), "latest");
    return 0;
  }
  if (vn == 0 || vn > CLI_VERSION_LEN)
    goto bad;
  for (size_t i = 0; i < vn; i++) {
    if (!is_hex(v[i]))
      goto bad;
    /* Ids are lower-case hex; 'A'..'F' from a copy-paste still match. */
    o->version[i] = v[i] >= 'A' && v[i] <= 'F' ? (char)(v[i] - 'A' + 'a')
                                               : v[i];
  }
  o->version[vn] = '\0';
  return 0;
bad:
  return err_set(e, ERR_INVALID,
                 "version '%s': neither 'latest' nor 1 to %d hex digits of "
                 "a version id",
                 v, CLI_VERSION_LEN);
}

/* --timeout: "90", "90s", "5m" or "2h", at most a week, into seconds. */
static int
parse_timeout(const char *s, int64_t *out, struct err *e)
{
  static const int64_t max_s = 7 * 86400;
  char num[24];
  size_t n = strlen(s);
  int64_t unit = 1;
  int64_t v;

  if (n > 0 && strchr("smh", s[n - 1]) != NULL) {
    unit = s[n - 1] == 'h' ? 3600 : s[n - 1] == 'm' ? 60 : 1;
    n--;
  }
  if (n == 0 || n >= sizeof(num))
    goto bad;
  memcpy(num, s, n);
  num[n] = '\0';
  if (parse_int("--timeout", num, 1, max_s / unit, &v, NULL) < 0)
    goto bad;
  *out = v * unit;
  return 0;
bad:
  return err_set(e, ERR_INVALID, "option '--timeout': '%s' is not a time "
                 "of 1s to 7 days (seconds, or a number with s, m or h)",
                 s);
}

int
cli_dataset_sync_parse(int argc, char **argv, struct cli_dataset_sync *o,
                       struct err *e)
{
  static const struct option opts[] = {
      {"site", required_argument, NULL, OPT_SITE},
      {"no-wait", no_argument, NULL, OPT_NO_WAIT},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  json_t *site;

  memset(o, 0, sizeof(*o));
  o->wait = 1;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", opts, NULL);

    if (c == -1)
      break;
    if (c == 'h')
      return CLI_HELP;
    if (c == OPT_SITE)
      o->site = optarg;
    else if (c == OPT_NO_WAIT)
      o->wait = 0;
    else if (c == OPT_TIMEOUT) {
      if (parse_timeout(optarg, &o->timeout_s, e) < 0)
        return ERR_INVALID;
    } else
      return opt_error(c, argv, e);
  }
  if (optind >= argc)
    return err_set(e, ERR_INVALID, "a dataset NAME[@VERSION] is needed");
  if (optind + 1 < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'",
                   argv[optind + 1]);
  if (split_name_version(argv[optind], o, e) < 0)
    return ERR_INVALID;
  if (o->site == NULL || o->site[0] == '\0')
    return err_set(e, ERR_INVALID, "option '--site' is needed");
  site = json_string(o->site);
  if (site == NULL)
    return err_set(e, ERR_INVALID, "option '--site': not valid UTF-8");
  json_decref(site);
  return 0;
}

json_t *
cli_dataset_sync_body(const struct cli_dataset_sync *o, const char *version)
{
  json_t *body = json_object();

  /* The parser checked that both are UTF-8, so both are set. */
  json_object_set_new(body, "site", json_string(o->site));
  json_object_set_new(body, "version",
                      json_string(version != NULL ? version : o->version));
  return body;
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
