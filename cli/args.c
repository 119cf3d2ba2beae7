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
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/format.h"
#include "spec/sbatch.h"
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
    "  --deadline T          start by T (2026-11-28T18:00:00Z, or +LIMIT\n"
    "                        from now): sites that cannot are left out\n"
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
    "print the job id.  Its #SBATCH lines are honoured; options given here\n"
    "override them, as on sbatch's command line.  Options tenbin does not\n"
    "interpret (-p, --mem, ...) are kept for Slurm sites and reported on\n"
    "stderr, as are the script's.  A job without a name is named after\n"
    "SCRIPT.\n"
    "\n"
    "  -J, --job-name N, --name N  job name\n"
    "  -A, --account P, --project P\n"
    "                        project the job belongs to (the Slurm account)\n"
    "  -G, --gpus [TYPE:]N   GPUs in total\n"
    "  --gpus-per-node [TYPE:]N, --gres=gpu[:TYPE]:N\n"
    "                        GPUs on each node\n"
    "  -N, --nodes N         nodes (N or MIN-MAX: MIN)\n"
    "  -t, --time LIMIT      time limit: minutes or [D-]HH:MM:SS\n"
    "  -o, --output F        file for stdout (%j %x %u %N %%)\n"
    "  -e, --error F         file for stderr\n"
    "  -D, --chdir D         working directory\n"
    "  --export ALL|NONE|[ALL,]NAME[=V],...\n"
    "                        the job's environment\n"
    "  -H, --hold            keep it queued until 'tenbin release'\n"
    "  --site S              run on this site only\n"
    "  --dataset D[@V]       run where version V (default: the latest) of\n"
    "                        dataset D is; it is copied there first\n"
    "  --idempotency-key K   a retry with the same key returns the same "
    "job\n"
    "  any other sbatch option (-p, --mem, -q, ...) for Slurm sites\n";

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

/* --deadline: an ISO 8601 time as is, or "+LIMIT" (a time limit's
 * syntax) after now, into body's "deadline". */
static int
set_deadline(json_t *body, const char *s, int64_t now, struct err *e)
{
  char iso[40];
  int64_t ms, secs;

  if (s[0] == '+' && time_parse_slurm_duration(s + 1, &secs) == 0 &&
      secs > 0) {
    ms = now + secs * 1000;
  } else if (time_parse_iso(s, &ms) < 0) {
    return err_set(e, ERR_INVALID, "option '--deadline': '%.40s' is not a "
                   "time (2026-11-28T18:00:00Z) or +LIMIT from now", s);
  }
  time_format_iso(ms, iso, sizeof(iso));
  json_object_set_new(body, "deadline", json_string(iso));
  return 0;
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

/*
 * The global options.  Each one is a field of struct cli_global: a
 * const char * for an option with a value, an int set to 1 for a flag.
 * A new global option is a field and one line here; parsing, the
 * environment fallback, finding it after the command and the usage text
 * all follow from this table.
 */
struct global_opt {
  const char *name;
  const char *arg; /* the value's name in the usage, NULL for a flag */
  size_t offset;   /* of the field in struct cli_global */
  const char *env; /* read when the option is not given, or NULL */
  const char *help;
};

static const struct global_opt global_opts[] = {
    {"server", "URL", offsetof(struct cli_global, server), "TENBIN_SERVER",
     "tenbind's address ($TENBIN_SERVER, else " CLI_DEFAULT_SERVER ")"},
    {"token", "T", offsetof(struct cli_global, token), "TENBIN_TOKEN",
     "bearer token ($TENBIN_TOKEN)"},
    {"cacert", "FILE", offsetof(struct cli_global, cacert), "TENBIN_CA_FILE",
     "CA certificates to verify an https tenbind ($TENBIN_CA_FILE)"},
    {"json", NULL, offsetof(struct cli_global, json), NULL,
     "print the server's JSON replies verbatim"},
};

#define NGLOBAL (sizeof(global_opts) / sizeof(global_opts[0]))
/* getopt_long's val of global_opts[i]: above any character. */
#define GLOBAL_VAL 1000

/* Store one global option's value (NULL for a flag) in g. */
static int
global_set(struct cli_global *g, const struct global_opt *o,
           const char *value, struct err *e)
{
  char *field = (char *)g + o->offset;

  if (o->arg == NULL && value != NULL)
    return err_set(e, ERR_INVALID, "option '--%s' takes no value", o->name);
  if (o->arg == NULL) {
    *(int *)(void *)field = 1;
    return 0;
  }
  *(const char **)(void *)field = value;
  return 0;
}

/* The global option word is ("--name" or "--name=value"), else NULL. */
static const struct global_opt *
global_find(const char *word, const char **value)
{
  size_t len;

  *value = NULL;
  if (strncmp(word, "--", 2) != 0)
    return NULL;
  len = strcspn(word + 2, "=");
  for (size_t i = 0; i < NGLOBAL; i++) {
    if (strlen(global_opts[i].name) == len &&
        strncmp(global_opts[i].name, word + 2, len) == 0) {
      if (word[2 + len] == '=')
        *value = word + 3 + len;
      return &global_opts[i];
    }
  }
  return NULL;
}

void
cli_global_usage(FILE *f)
{
  char lhs[64];

  for (size_t i = 0; i < NGLOBAL; i++) {
    const struct global_opt *o = &global_opts[i];

    snprintf(lhs, sizeof(lhs), "--%s%s%s", o->name, o->arg != NULL ? " " : "",
             o->arg != NULL ? o->arg : "");
    fprintf(f, "  %-14s %s\n", lhs, o->help);
  }
}

int
cli_global_parse(int argc, char **argv,
                 const char *(*getenv_fn)(const char *name),
                 struct cli_global *out, struct err *e)
{
  struct option opts[NGLOBAL + 3];
  const char *env;
  size_t i;

  for (i = 0; i < NGLOBAL; i++) {
    opts[i].name = global_opts[i].name;
    opts[i].has_arg =
        global_opts[i].arg != NULL ? required_argument : no_argument;
    opts[i].flag = NULL;
    opts[i].val = GLOBAL_VAL + (int)i;
  }
  opts[i++] = (struct option){"help", no_argument, NULL, 'h'};
  opts[i++] = (struct option){"version", no_argument, NULL, 'V'};
  opts[i] = (struct option){NULL, 0, NULL, 0};
  memset(out, 0, sizeof(*out));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, "+:h", opts, NULL);

    if (c == -1)
      break;
    if (c == 'h') {
      out->help = 1;
    } else if (c == 'V') {
      out->version = 1;
    } else if (c >= GLOBAL_VAL && c < GLOBAL_VAL + (int)NGLOBAL) {
      (void)global_set(out, &global_opts[c - GLOBAL_VAL], optarg, NULL);
    } else if (c == '?' && optopt >= GLOBAL_VAL) {
      /* getopt's '?' for "--json=x": a flag given a value. */
      return err_set(e, ERR_INVALID, "option '--%s' takes no value",
                     global_opts[optopt - GLOBAL_VAL].name);
    } else {
      return opt_error(c, argv, e);
    }
  }
  out->cmd_index = optind;
  out->argc = argc;
  if (getenv_fn == NULL)
    getenv_fn = env_lookup;
  for (i = 0; i < NGLOBAL; i++) {
    const char **field =
        (const char **)(void *)((char *)out + global_opts[i].offset);

    if (global_opts[i].env == NULL || *field != NULL)
      continue;
    env = getenv_fn(global_opts[i].env);
    *field = env != NULL && env[0] != '\0' ? env : NULL;
  }
  if (out->server == NULL)
    out->server = CLI_DEFAULT_SERVER;
  if (out->server[0] == '\0')
    return err_set(e, ERR_INVALID, "option '--server': empty URL");
  return 0;
}

int
cli_global_take(struct cli_global *g, int argc, char **argv,
                cli_arity_fn arity, struct err *e)
{
  int w = g->cmd_index + 1;
  int ended = 0;

  /* Where the command's options end, its words are its own: the CMD
   * after submit's options, the script after sbatch's. */
  for (int i = g->cmd_index + 1; i < argc; i++) {
    const char *value = NULL;
    const struct global_opt *o = ended ? NULL : global_find(argv[i], &value);
    int n;

    if (o != NULL) {
      if (o->arg != NULL && value == NULL) {
        if (i + 1 >= argc)
          return err_set(e, ERR_INVALID, "option '--%s' needs a value",
                         o->name);
        value = argv[++i];
      }
      if (global_set(g, o, value, e) < 0)
        return ERR_INVALID;
      continue;
    }
    if (!ended) {
      n = arity != NULL ? arity(argv[i])
                        : (strcmp(argv[i], "--") == 0 ? -1 : 0);
      ended = n < 0;
      /* The option's value is its own, even if it reads "--json". */
      if (n > 0 && i + 1 < argc)
        argv[w++] = argv[i++];
    }
    argv[w++] = argv[i];
  }
  if (w < argc)
    argv[w] = NULL;
  g->argc = g->cmd_index < argc ? w : argc;
  if (g->server[0] == '\0')
    return err_set(e, ERR_INVALID, "option '--server': empty URL");
  return 0;
}

/*
 * cli_arity_fn for a getopt_long table whose short options are flags:
 * exact or unique abbreviated long names, as getopt_long matches them.
 */
static int
getopt_arity(const struct option *opts, int in_order, const char *word)
{
  const struct option *found = NULL;
  size_t len;

  if (strcmp(word, "--") == 0)
    return -1;
  if (word[0] != '-' || word[1] == '\0')
    return in_order ? -1 : 0;
  if (word[1] != '-' || strchr(word, '=') != NULL)
    return 0;
  len = strlen(word + 2);
  for (size_t i = 0; opts[i].name != NULL; i++) {
    if (strncmp(opts[i].name, word + 2, len) != 0)
      continue;
    if (strlen(opts[i].name) == len) {
      found = &opts[i];
      break;
    }
    if (found != NULL && found->has_arg != opts[i].has_arg)
      return 0; /* ambiguous: getopt_long rejects it */
    found = &opts[i];
  }
  return found != NULL && found->has_arg == required_argument ? 1 : 0;
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
  OPT_DEADLINE,
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
  OPT_PER_GPU_HOUR,
  OPT_SPOT,
  OPT_FROM,
  OPT_TO,
  OPT_BY,
  OPT_CSV,
  OPT_MONTHLY,
  OPT_HARD,
  OPT_SOFT,
  OPT_COUNTS,
  OPT_REQUIRE_BASELINE,
  OPT_AGAINST,
  OPT_WAIT,
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
  case OPT_DEADLINE:
    return set_deadline(s->body, arg, time_now_ms(), e);
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
  case OPT_REQUIRE_BASELINE:
    json_object_set_new(s->body, "require_baseline", json_true());
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

/* submit's options; its argv is read by getopt_long and by the arity. */
static const struct option submit_opts[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"project", required_argument, NULL, OPT_PROJECT},
    {"gpus", required_argument, NULL, OPT_GPUS},
    {"gpu-type", required_argument, NULL, OPT_GPU_TYPE},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"gpus-per-node", required_argument, NULL, OPT_GPUS_PER_NODE},
    {"time", required_argument, NULL, OPT_TIME},
    {"deadline", required_argument, NULL, OPT_DEADLINE},
    {"site", required_argument, NULL, OPT_SITE},
    {"env", required_argument, NULL, OPT_ENV},
    {"chdir", required_argument, NULL, OPT_CHDIR},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"error", required_argument, NULL, OPT_ERROR},
    {"hold", no_argument, NULL, OPT_HOLD},
    {"require-baseline", no_argument, NULL, OPT_REQUIRE_BASELINE},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"param", required_argument, NULL, OPT_PARAM},
    {"dataset", required_argument, NULL, OPT_DATASET},
    {"idempotency-key", required_argument, NULL, OPT_IDEM},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_submit_arity(const char *word)
{
  /* In order: the command's own options come after its first word. */
  return getopt_arity(submit_opts, 1, word);
}

int
cli_submit_parse(int argc, char **argv, struct cli_submit *s, struct err *e)
{
  json_t *env = NULL;
  json_t *params = NULL;
  json_t *cmd = NULL;
  int rc = ERR_INVALID;

  s->body = json_object();
  args_reset();
  for (;;) {
    /* '+': stop at the first non-option, so CMD keeps its own options. */
    int c = getopt_long(argc, argv, "+:h", submit_opts, NULL);

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
  s->extra = NULL;
}

void
cli_sbatch_release(struct cli_sbatch *s)
{
  if (s == NULL)
    return;
  json_decref(s->body);
  free(s->idempotency_key);
  strv_free(s->extra);
  cli_sbatch_init(s);
}

/*
 * tenbin's own options of sbatch, looked up before sbatch's (which are
 * spec/sbatch.c's table: -J, -A, -N, -t, -p, --mem, ...).
 */
static const struct option sbatch_own_opts[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"project", required_argument, NULL, OPT_PROJECT},
    {"site", required_argument, NULL, OPT_SITE},
    {"dataset", required_argument, NULL, OPT_DATASET},
    {"idempotency-key", required_argument, NULL, OPT_IDEM},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_sbatch_arity(const char *word)
{
  return sbatch_args_arity(sbatch_own_opts, word);
}

/* sbatch_own_fn: the shared options mean what they mean for submit. */
static int
sbatch_own(void *arg, int val, const char *value, struct err *e)
{
  if (val == 'h')
    return CLI_HELP;
  return submit_option(val, value, arg, NULL, NULL, e);
}

int
cli_sbatch_parse(int argc, char **argv, struct cli_sbatch *s, struct err *e)
{
  struct cli_submit sub;
  json_t *fields = json_object();
  char **extra = NULL;
  int end = argc;
  int rc;

  cli_submit_init(&sub);
  sub.body = json_object();
  rc = sbatch_parse_args(argc - 1, argv + 1, sbatch_own_opts, sbatch_own,
                         &sub, fields, &extra, &end, e);
  if (rc != 0)
    goto out;
  end++; /* argv + 1 above */
  rc = ERR_INVALID;
  if (end >= argc) {
    err_set(e, ERR_INVALID, "a SCRIPT argument is needed");
    goto out;
  }
  /* sbatch passes these to the script; tenbin has nowhere to put them. */
  if (end + 1 < argc) {
    err_set(e, ERR_INVALID,
            "unexpected argument '%s' after the script (options go before "
            "it; tenbin passes no arguments to a script)",
            argv[end + 1]);
    goto out;
  }
  /* sbatch's -J and -A are the same fields as --name and --project. */
  json_object_update(sub.body, fields);
  s->path = argv[end];
  s->body = sub.body;
  sub.body = NULL;
  s->idempotency_key = sub.idempotency_key;
  sub.idempotency_key = NULL;
  s->extra = extra;
  extra = NULL;
  rc = 0;
out:
  strv_free(extra);
  json_decref(fields);
  cli_submit_release(&sub);
  return rc;
}

/*
 * The job name sbatch gives a script without --job-name: its file name,
 * or "sbatch" when it came on stdin.  NULL when that is not a valid job
 * name (tenbind then picks one).
 */
static json_t *
name_from_path(const char *path)
{
  const char *base = strrchr(path, '/');
  size_t n;

  base = base != NULL ? base + 1 : path;
  if (strcmp(path, "-") == 0)
    base = "sbatch";
  n = strlen(base);
  if (n == 0 || n > CLI_MAX_JOB_NAME)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)base[i] < 0x20 || base[i] == 0x7f)
      return NULL;
  return json_string(base);
}

int
cli_sbatch_set_script(struct cli_sbatch *s, const char *text, size_t len,
                      json_t *warnings, struct err *e)
{
  struct job_spec spec;
  json_t *script = NULL;
  json_t *name = NULL;
  char **kept = NULL;
  json_t *list = NULL;
  int rc = ERR_INVALID;

  jobspec_init(&spec);
  if (len == 0) {
    err_set(e, ERR_INVALID, "script '%s' is empty", s->path);
    goto out;
  }
  script = json_stringn(text, len);
  if (script == NULL || strlen(text) != len) {
    err_set(e, ERR_INVALID, "script '%s' is not valid UTF-8 text",
            s->path);
    goto out;
  }
  /* Read here as tenbind will, so that what is not interpreted can be
   * told even when the submission fails. */
  if (sbatch_parse(text, &spec, NULL, e) < 0) {
    err_prefix(e, "script '%s'", s->path);
    goto out;
  }
  json_object_set_new(s->body, "script", script);
  script = NULL;
  if (json_object_get(s->body, "name") == NULL && spec.name == NULL) {
    name = name_from_path(s->path);
    if (name != NULL)
      json_object_set_new(s->body, "name", name);
  }
  /* The command line's options replace the script's of the same name. */
  kept = strv_dup(spec.sbatch_extra);
  if (s->extra != NULL) {
    sbatch_extra_override(&kept, s->extra);
    list = json_array();
    for (size_t i = 0; kept[i] != NULL; i++)
      json_array_append_new(list, json_string(kept[i]));
    json_object_set_new(s->body, "sbatch_extra", list);
  }
  for (size_t i = 0; warnings != NULL && i < strv_len(kept); i++)
    json_array_append_new(
        warnings,
        sbatch_extra_warning(kept[i],
                             strv_contains(spec.sbatch_extra, kept[i])));
  rc = 0;
out:
  strv_free(kept);
  json_decref(script);
  jobspec_release(&spec);
  return rc;
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

const char *
cli_job_state(size_t i)
{
  return i < sizeof(job_states) / sizeof(job_states[0]) ? job_states[i]
                                                          : NULL;
}

static const struct option jobs_opts[] = {
    {"state", required_argument, NULL, OPT_STATE},
    {"project", required_argument, NULL, OPT_PROJECT},
    {"site", required_argument, NULL, OPT_SITE},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"all", no_argument, NULL, OPT_ALL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_jobs_arity(const char *word)
{
  return getopt_arity(jobs_opts, 0, word);
}

int
cli_jobs_parse(int argc, char **argv, struct cli_jobs *o, struct err *e)
{
  memset(o, 0, sizeof(*o));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", jobs_opts, NULL);

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

static const struct option scale_log_opts[] = {
    {"site", required_argument, NULL, OPT_SITE},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_scale_log_parse(int argc, char **argv, struct cli_scale_log *o,
                    struct err *e)
{
  memset(o, 0, sizeof(*o));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", scale_log_opts, NULL);

    if (c == -1)
      break;
    switch (c) {
    case 'h':
      return CLI_HELP;
    case OPT_SITE:
      o->site = optarg;
      break;
    case OPT_LIMIT:
      if (parse_int("--limit", optarg, 1, MAX_PAGE, &o->limit, e) < 0)
        return ERR_INVALID;
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
cli_scale_log_path(const struct cli_scale_log *o, struct buf *out)
{
  char limit[32];
  int rc = buf_adds(out, "/v1/autoscaler/log");

  snprintf(limit, sizeof(limit), "%lld", (long long)o->limit);
  if (rc == 0)
    rc = cli_url_add_query(out, "site", o->site);
  if (rc == 0)
    rc = cli_url_add_query(out, "limit", o->limit > 0 ? limit : NULL);
  return rc;
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

static const struct option baseline_opts[] = {
    {"nodes", required_argument, NULL, OPT_NODES},
    {"against", required_argument, NULL, OPT_AGAINST},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_baseline_parse(int argc, char **argv, struct cli_baseline *o,
                   struct err *e)
{
  memset(o, 0, sizeof(*o));
  o->nodes = 1;
  if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0)
    return argc < 2 ? err_set(e, ERR_INVALID, "a subcommand is needed "
                              "(run, show, diff)")
                    : CLI_HELP;
  o->verb = argv[1];
  if (strcmp(o->verb, "run") != 0 && strcmp(o->verb, "show") != 0 &&
      strcmp(o->verb, "diff") != 0)
    return err_set(e, ERR_INVALID, "unknown subcommand '%s'", o->verb);
  args_reset();
  for (;;) {
    int c = getopt_long(argc - 1, argv + 1, ":h", baseline_opts, NULL);

    if (c == -1)
      break;
    switch (c) {
    case 'h':
      return CLI_HELP;
    case OPT_NODES:
      if (strcmp(o->verb, "run") != 0)
        return err_set(e, ERR_INVALID, "--nodes is for 'baseline run'");
      if (parse_int("--nodes", optarg, 1, MAX_NODES, &o->nodes, e) < 0)
        return ERR_INVALID;
      break;
    case OPT_WAIT:
      if (strcmp(o->verb, "run") != 0)
        return err_set(e, ERR_INVALID, "--wait is for 'baseline run'");
      o->wait = 1;
      break;
    case OPT_AGAINST:
      if (strcmp(o->verb, "diff") != 0)
        return err_set(e, ERR_INVALID, "--against is for 'baseline diff'");
      o->against = optarg;
      break;
    default:
      return opt_error(c, argv + 1, e);
    }
  }
  if (optind + 1 >= argc)
    return err_set(e, ERR_INVALID, "a site name is needed");
  o->site = argv[optind + 1];
  if (optind + 2 < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'",
                   argv[optind + 2]);
  return 0;
}

int
cli_baseline_path(const struct cli_baseline *o, struct buf *out)
{
  int rc = cli_url_add_segment(out, "/v1/sites/", o->site);

  if (rc == 0)
    rc = buf_adds(out, strcmp(o->verb, "run") == 0 ? "/baseline/run"
                                                   : "/baseline");
  if (rc == 0)
    rc = cli_url_add_query(out, "against", o->against);
  return rc;
}

static const struct option report_opts[] = {
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {"by", required_argument, NULL, OPT_BY},
    {"csv", no_argument, NULL, OPT_CSV},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_report_arity(const char *word)
{
  return getopt_arity(report_opts, 0, word);
}

int
cli_report_parse(int argc, char **argv, int *csv, struct buf *path,
                 struct err *e)
{
  const char *from = NULL, *to = NULL, *by = NULL;
  int rc;

  *csv = 0;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", report_opts, NULL);

    if (c == -1)
      break;
    if (c == 'h')
      return CLI_HELP;
    if (c == OPT_FROM)
      from = optarg;
    else if (c == OPT_TO)
      to = optarg;
    else if (c == OPT_BY)
      by = optarg;
    else if (c == OPT_CSV)
      *csv = 1;
    else
      return opt_error(c, argv, e);
  }
  if (optind < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'", argv[optind]);
  /* The server checks the days and the groupings, naming what is wrong;
   * here they only travel, escaped. */
  rc = buf_adds(path, "/v1/reports/usage");
  if (rc == 0)
    rc = cli_url_add_query(path, "from", from);
  if (rc == 0)
    rc = cli_url_add_query(path, "to", to);
  if (rc == 0)
    rc = cli_url_add_query(path, "by", by != NULL ? by : "project,site");
  if (rc == 0 && *csv)
    rc = cli_url_add_query(path, "format", "csv");
  if (rc < 0)
    return err_set(e, ERR_INVALID, "options too long");
  return 0;
}

static const struct option logs_opts[] = {
    {"follow", no_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_logs_parse(int argc, char **argv, struct cli_logs *o, struct err *e)
{
  memset(o, 0, sizeof(*o));
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":fh", logs_opts, NULL);

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

static const struct option dataset_add_opts[] = {
    {"site", required_argument, NULL, OPT_SITE},
    {"path", required_argument, NULL, OPT_PATH},
    {"project", required_argument, NULL, OPT_PROJECT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_dataset_add_parse(int argc, char **argv, json_t **body, struct err *e)
{
  const char *site = NULL;
  const char *path = NULL;
  const char *project = NULL;
  const char *name;
  json_t *b = NULL;
  int rc = ERR_INVALID;

  *body = NULL;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", dataset_add_opts, NULL);

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

static const struct option dataset_sync_opts[] = {
    {"site", required_argument, NULL, OPT_SITE},
    {"no-wait", no_argument, NULL, OPT_NO_WAIT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_dataset_sync_parse(int argc, char **argv, struct cli_dataset_sync *o,
                       struct err *e)
{
  json_t *site;

  memset(o, 0, sizeof(*o));
  o->wait = 1;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", dataset_sync_opts, NULL);

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

static const struct option help_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_args_positional(int argc, char **argv, int min, int max, int *first,
                    struct err *e)
{
  int c;
  int n;

  /* Any option but --help is an error, so the first one decides. */
  args_reset();
  c = getopt_long(argc, argv, ":h", help_opts, NULL);
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
  int64_t id = 0;

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

/* An amount in dollars from an option: a plain decimal, 0 to max. */
static int
dollars_arg(json_t *body, const char *key, const char *opt, const char *arg,
            double max, struct err *e)
{
  char *end;
  double v;

  errno = 0;
  v = strtod(arg, &end);
  if (arg[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) ||
      v < 0 || v > max)
    return err_set(e, ERR_INVALID, "option '%s': '%.32s' is not an amount "
                   "in dollars (0 to %.0f)", opt, arg, max);
  json_object_set_new(body, key, json_real(v));
  return 0;
}

/* The one operand after a command's options (getopt's optind), which
 * names what: "a SITE is needed" when it is missing. */
static int
sole_operand(int argc, char **argv, const char *what, const char **out,
             struct err *e)
{
  if (optind >= argc)
    return err_set(e, ERR_INVALID, "a %s is needed", what);
  if (optind + 1 < argc)
    return err_set(e, ERR_INVALID, "unexpected argument '%s'",
                   argv[optind + 1]);
  *out = argv[optind];
  return 0;
}

static const struct option prices_set_opts[] = {
    {"gpu-type", required_argument, NULL, OPT_GPU_TYPE},
    {"per-gpu-hour", required_argument, NULL, OPT_PER_GPU_HOUR},
    {"spot", required_argument, NULL, OPT_SPOT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_prices_set_parse(int argc, char **argv, const char **site,
                     const char **gpu_type, json_t **body, struct err *e)
{
  json_t *b = json_object();
  int rc = 0;

  *body = NULL;
  *gpu_type = NULL;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", prices_set_opts, NULL);

    if (c == -1)
      break;
    if (c == 'h') {
      rc = CLI_HELP;
      goto out;
    }
    if (c == OPT_GPU_TYPE)
      *gpu_type = optarg;
    else if (c == OPT_PER_GPU_HOUR)
      rc = dollars_arg(b, "per_gpu_hour", "--per-gpu-hour", optarg, 10000,
                       e);
    else if (c == OPT_SPOT)
      rc = dollars_arg(b, "spot_per_gpu_hour", "--spot", optarg, 10000, e);
    else
      rc = opt_error(c, argv, e);
    if (rc < 0)
      goto out;
  }
  rc = sole_operand(argc, argv, "SITE", site, e);
  if (rc < 0)
    goto out;
  rc = ERR_INVALID;
  if (*gpu_type == NULL || (*gpu_type)[0] == '\0') {
    err_set(e, ERR_INVALID, "option '--gpu-type' is needed");
    goto out;
  }
  if (json_object_get(b, "per_gpu_hour") == NULL) {
    err_set(e, ERR_INVALID, "option '--per-gpu-hour' is needed");
    goto out;
  }
  *body = b;
  b = NULL;
  rc = 0;
out:
  json_decref(b);
  return rc;
}

static const struct option budget_set_opts[] = {
    {"monthly", required_argument, NULL, OPT_MONTHLY},
    {"hard", no_argument, NULL, OPT_HARD},
    {"soft", no_argument, NULL, OPT_SOFT},
    {"counts", required_argument, NULL, OPT_COUNTS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int
cli_budget_set_parse(int argc, char **argv, const char **project,
                     json_t **body, struct err *e)
{
  json_t *b = json_object();
  int rc = 0;

  *body = NULL;
  args_reset();
  for (;;) {
    int c = getopt_long(argc, argv, ":h", budget_set_opts, NULL);

    if (c == -1)
      break;
    if (c == 'h') {
      rc = CLI_HELP;
      goto out;
    }
    if (c == OPT_MONTHLY) {
      rc = dollars_arg(b, "monthly", "--monthly", optarg, 1e8, e);
    } else if (c == OPT_HARD || c == OPT_SOFT) {
      json_object_set_new(b, "hard", json_boolean(c == OPT_HARD));
    } else if (c == OPT_COUNTS) {
      if (strcmp(optarg, "rented") != 0 && strcmp(optarg, "all") != 0)
        rc = err_set(e, ERR_INVALID, "option '--counts': '%.16s' is not "
                     "rented or all", optarg);
      else
        json_object_set_new(b, "counts", json_string(optarg));
    } else {
      rc = opt_error(c, argv, e);
    }
    if (rc < 0)
      goto out;
  }
  rc = sole_operand(argc, argv, "PROJECT", project, e);
  if (rc < 0)
    goto out;
  rc = ERR_INVALID;
  if (json_object_get(b, "monthly") == NULL) {
    err_set(e, ERR_INVALID, "option '--monthly' is needed");
    goto out;
  }
  *body = b;
  b = NULL;
  rc = 0;
out:
  json_decref(b);
  return rc;
}

const char *
cli_global_option(size_t i, int *has_arg)
{
  if (i >= NGLOBAL)
    return NULL;
  *has_arg = global_opts[i].arg != NULL;
  return global_opts[i].name;
}

/*
 * The parsers' own tables, per command and subcommand, for the
 * completion script.  A command whose parser is cli_args_positional
 * takes help_opts; baseline's verbs share one table, as its parser does.
 */
const struct cli_comp_spec cli_comp_specs[] = {
    {"submit", NULL, submit_opts, CLI_COMP_NONE},
    {"sbatch", NULL, sbatch_own_opts, CLI_COMP_FILE},
    {"jobs", NULL, jobs_opts, CLI_COMP_NONE},
    {"show", NULL, help_opts, CLI_COMP_JOB},
    {"events", NULL, help_opts, CLI_COMP_JOB},
    {"explain", NULL, help_opts, CLI_COMP_JOB},
    {"logs", NULL, logs_opts, CLI_COMP_JOB},
    {"cancel", NULL, help_opts, CLI_COMP_JOB},
    {"release", NULL, help_opts, CLI_COMP_JOB},
    {"workloads", NULL, help_opts, CLI_COMP_NONE},
    {"workload", "add", help_opts, CLI_COMP_FILE},
    {"workload", "show", help_opts, CLI_COMP_WORKLOAD},
    {"sites", NULL, help_opts, CLI_COMP_NONE},
    {"site", "show", help_opts, CLI_COMP_SITE},
    {"baseline", "run", baseline_opts, CLI_COMP_SITE},
    {"baseline", "show", baseline_opts, CLI_COMP_SITE},
    {"baseline", "diff", baseline_opts, CLI_COMP_SITE},
    {"autoscaler", "log", scale_log_opts, CLI_COMP_NONE},
    {"prices", NULL, help_opts, CLI_COMP_NONE},
    {"prices", "set", prices_set_opts, CLI_COMP_SITE},
    {"report", NULL, report_opts, CLI_COMP_NONE},
    {"budgets", NULL, help_opts, CLI_COMP_NONE},
    {"budget", "set", budget_set_opts, CLI_COMP_PROJECT},
    {"datasets", NULL, help_opts, CLI_COMP_NONE},
    {"dataset", "add", dataset_add_opts, CLI_COMP_NONE},
    {"dataset", "publish", help_opts, CLI_COMP_DATASET},
    {"dataset", "sync", dataset_sync_opts, CLI_COMP_DATASET},
    {"dataset", "ls", help_opts, CLI_COMP_NONE},
    {"dataset", "show", help_opts, CLI_COMP_DATASET},
    {"completion", NULL, help_opts, CLI_COMP_SHELL},
    {"help", NULL, help_opts, CLI_COMP_COMMAND},
};

const size_t cli_comp_nspecs = sizeof(cli_comp_specs) /
                               sizeof(cli_comp_specs[0]);

enum cli_comp_value
cli_comp_option_value(const char *name)
{
  static const struct {
    const char *name;
    enum cli_comp_value value;
  } values[] = {
      {"site", CLI_COMP_SITE},         {"against", CLI_COMP_SITE},
      {"workload", CLI_COMP_WORKLOAD}, {"dataset", CLI_COMP_DATASET},
      {"project", CLI_COMP_PROJECT},   {"state", CLI_COMP_STATE},
      {"output", CLI_COMP_FILE},       {"error", CLI_COMP_FILE},
      {"chdir", CLI_COMP_FILE},        {"cacert", CLI_COMP_FILE},
  };

  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
    if (strcmp(values[i].name, name) == 0)
      return values[i].value;
  return CLI_COMP_NONE;
}
