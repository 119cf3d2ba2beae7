/*
 * Command-line parsing and request building for tenbin, kept apart from
 * the HTTP code so that every argument -> request rule is a unit test.
 *
 * Parsers take the argv of one command (argv[0] is the command's name),
 * use getopt_long with its state reset on every call, print nothing and
 * return:
 *   0         parsed; the out struct is filled
 *   CLI_HELP  --help/-h was given; the caller prints the usage text
 *   ERR_INVALID  a usage error; e->msg says which argument and why
 * Strings borrowed from argv stay valid for the life of the process.
 */
#ifndef TENBIN_CLI_ARGS_H
#define TENBIN_CLI_ARGS_H

#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/buf.h"
#include "util/err.h"

#define CLI_HELP 1

/* Exit statuses of the tenbin process. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

#define CLI_DEFAULT_SERVER "http://127.0.0.1:8750"
/* The REST contract caps Idempotency-Key at 128 characters. */
#define CLI_MAX_IDEM_KEY 128
/* A job name is at most 128 characters (JOBSPEC_MAX_NAME). */
#define CLI_MAX_JOB_NAME 128
/* Scripts are capped by the server at 512 KiB (JOBSPEC_MAX_SCRIPT). */
#define CLI_MAX_SCRIPT (512 * 1024)

/* Usage texts printed by --help (borrowed, static). */
extern const char cli_submit_usage[];
extern const char cli_sbatch_usage[];
extern const char cli_jobs_usage[];

/* ---- global options (before or after the command) ---- */

struct cli_global {
  const char *server; /* --server, else $TENBIN_SERVER, else the default */
  const char *token;  /* --token, else $TENBIN_TOKEN, else NULL */
  const char *cacert; /* --cacert, else $TENBIN_CA_FILE, else NULL */
  int json;           /* --json: print the server's JSON verbatim */
  int help;           /* --help/-h (before the command only) */
  int version;        /* --version (before the command only) */
  int cmd_index;      /* argv index of the command; argc when none */
  int argc;           /* argc once cli_global_take took its options out */
};

/*
 * How a command reads one of its words, so that global options can be
 * found among its own: 1 for an option whose value is the next word
 * (that value is the command's, even if it reads "--json"), 0 for any
 * other word, -1 where the command's options end ("--"; for submit, the
 * CMD; for sbatch, the script): every word from there on is its own.
 */
typedef int (*cli_arity_fn)(const char *word);

/*
 * Parse the options that come before the command.  getenv_fn (NULL for
 * getenv) supplies $TENBIN_SERVER and $TENBIN_TOKEN, so tests can inject
 * an environment.  Returns 0 or ERR_INVALID.
 */
int cli_global_parse(int argc, char **argv,
                     const char *(*getenv_fn)(const char *name),
                     struct cli_global *out, struct err *e) WARN_UNUSED;
/*
 * After cli_global_parse: take the global options that follow the
 * command out of argv (moving the command's words down; argv[g->argc]
 * becomes NULL) into g, up to where the command's options end.  Only
 * exact names are global there ("--json", "--server=URL", "--server
 * URL"), so abbreviations stay the command's.  arity is the command's
 * (NULL: every word but "--" is a flag or an operand).  ERR_INVALID for
 * a global option without its value.
 */
int cli_global_take(struct cli_global *g, int argc, char **argv,
                    cli_arity_fn arity, struct err *e) WARN_UNUSED;
/* One line per global option for 'tenbin --help'. */
void cli_global_usage(FILE *f);

/* The arity (above) of submit, sbatch and jobs. */
int cli_submit_arity(const char *word);
int cli_sbatch_arity(const char *word);
int cli_jobs_arity(const char *word);

/* ---- submit ---- */

struct cli_submit {
  json_t *body;          /* POST /v1/jobs body (new reference) */
  char *idempotency_key; /* copy of --idempotency-key, or NULL */
};

void cli_submit_init(struct cli_submit *s);
/* Drop the body and the key (NULL-safe) and re-init. */
void cli_submit_release(struct cli_submit *s);
/*
 * Build the POST /v1/jobs body from submit's argv.  Options end at "--"
 * or at the first argument that is not an option; everything after is
 * the command, kept verbatim (its own dashes included).  Either a
 * command or --workload is required.  s must be freshly initialised.
 */
int cli_submit_parse(int argc, char **argv, struct cli_submit *s,
                     struct err *e) WARN_UNUSED;

/* ---- sbatch ---- */

struct cli_sbatch {
  json_t *body;          /* everything but "script" (new reference) */
  const char *path;      /* SCRIPT argument, "-" = stdin (borrowed) */
  char *idempotency_key; /* copy of --idempotency-key, or NULL */
  char **extra;          /* options kept for Slurm, "--mem=4G" (owned) */
};

void cli_sbatch_init(struct cli_sbatch *s);
void cli_sbatch_release(struct cli_sbatch *s);
/*
 * sbatch's argv: tenbin's --name --project --site --dataset
 * --idempotency-key --help, then sbatch's own options read as
 * spec/sbatch.c reads #SBATCH lines (-J, -A, -N, -G, -t, -o, ...; -A is
 * the project).  Options end at the script; an argument after it is an
 * error.  Options tenbin does not interpret (-p, --mem, ...) go to
 * s->extra.  s must be freshly initialised.
 */
int cli_sbatch_parse(int argc, char **argv, struct cli_sbatch *s,
                     struct err *e) WARN_UNUSED;
/*
 * Complete s->body with the script's len bytes of text (copies), as
 * sbatch does: the command line's options override the script's, also
 * the ones tenbin only keeps for Slurm (body["sbatch_extra"] is then the
 * script's with the command line's replacing those of the same name); a
 * job whose script and options give no name is named after the script
 * file ("sbatch" for stdin).  The warnings tenbind will give for options
 * kept for Slurm are appended to warnings (borrowed; may be NULL).
 * ERR_INVALID, naming the file, for an empty script, one that is not
 * UTF-8 text and a directive that tenbind would reject.
 */
int cli_sbatch_set_script(struct cli_sbatch *s, const char *text,
                          size_t len, json_t *warnings,
                          struct err *e) WARN_UNUSED;

/*
 * Read a whole file ("-" = stdin) into out, which must have been set up
 * with buf_init(out, max).  ERR_TOO_LARGE past the cap and ERR_IO when it
 * cannot be read, both naming the file.
 */
int cli_read_file(const char *path, struct buf *out, struct err *e)
    WARN_UNUSED;

/* ---- jobs ---- */

struct cli_jobs {
  const char *state;   /* borrowed, or NULL */
  const char *project; /* borrowed, or NULL */
  const char *site;    /* borrowed, or NULL */
  int64_t limit;       /* page size 1..1000, 0 = the server's default */
  int all;             /* --all: follow next_cursor through every page */
};

int cli_jobs_parse(int argc, char **argv, struct cli_jobs *o,
                   struct err *e) WARN_UNUSED;
/*
 * Append "/v1/jobs?..." for o and cursor (NULL for the first page) to
 * out, every value percent-escaped.
 */
int cli_jobs_path(const struct cli_jobs *o, const char *cursor,
                  struct buf *out) WARN_UNUSED;

/* ---- autoscaler log ---- */

struct cli_scale_log {
  const char *site;    /* borrowed, or NULL */
  int64_t limit;       /* 1..1000, 0 = the server's default */
};

/* 'autoscaler log [--site S] [--limit N]' (argv from "log"). */
int cli_scale_log_parse(int argc, char **argv, struct cli_scale_log *o,
                        struct err *e) WARN_UNUSED;
/* Append "/v1/autoscaler/log?..." for o to out. */
int cli_scale_log_path(const struct cli_scale_log *o, struct buf *out)
    WARN_UNUSED;

/* ---- baseline ---- */

struct cli_baseline {
  const char *verb;    /* "run", "show" or "diff" (borrowed) */
  const char *site;    /* borrowed */
  const char *against; /* diff --against, or NULL: the reference */
  int64_t nodes;       /* run --nodes, 1 by default */
  int wait;            /* run --wait: until the probe ends */
};

/* 'baseline VERB [options] SITE' (argv from "baseline"). */
int cli_baseline_parse(int argc, char **argv, struct cli_baseline *o,
                       struct err *e) WARN_UNUSED;
/* "/v1/sites/SITE/baseline[/run][?against=...]" for o, appended. */
int cli_baseline_path(const struct cli_baseline *o, struct buf *out)
    WARN_UNUSED;

/* ---- report ---- */

/*
 * 'report [--from D] [--to D] [--by KEYS] [--csv]' into the request path
 * "/v1/reports/usage?..." appended to path (values escaped; by defaults
 * to "project,site"); *csv set for --csv.
 */
int cli_report_parse(int argc, char **argv, int *csv, struct buf *path,
                     struct err *e) WARN_UNUSED;
int cli_report_arity(const char *word);
/*
 * 'budget set PROJECT --monthly X [--hard|--soft] [--counts rented|all]'
 * (argv from "set"): *project borrowed, *body the PUT
 * /v1/budgets/{project} body (new reference; NULL unless 0 is returned).
 */
int cli_budget_set_parse(int argc, char **argv, const char **project,
                         json_t **body, struct err *e) WARN_UNUSED;

/* ---- logs ---- */

extern const char cli_logs_usage[];

struct cli_logs {
  int64_t id;
  int follow; /* -f/--follow: poll until the job ended and all is read */
};

int cli_logs_parse(int argc, char **argv, struct cli_logs *o,
                   struct err *e) WARN_UNUSED;

/* ---- dataset ---- */

extern const char cli_dataset_usage[];
extern const char cli_dataset_add_usage[];
extern const char cli_dataset_publish_usage[];
extern const char cli_dataset_sync_usage[];
extern const char cli_dataset_ls_usage[];
extern const char cli_dataset_show_usage[];

/* A version id is the SHA-256 (hex) of its manifest (SYNC.md). */
#define CLI_VERSION_LEN 64
#define CLI_DATASET_NAME_MAX 64

/* 1 when name is a dataset name, [A-Za-z0-9][A-Za-z0-9._-]{0,63}. */
int cli_is_dataset_name(const char *name);
/*
 * 'dataset add NAME --site SITE --path PATH [--project P]' into *body,
 * the POST /v1/datasets body {"name","source_site","path"[,"project"]}
 * (new reference; NULL unless 0 is returned).  Options may come before
 * or after NAME.
 */
int cli_dataset_add_parse(int argc, char **argv, json_t **body,
                          struct err *e) WARN_UNUSED;
/*
 * The commands that take one dataset NAME and no options (publish,
 * show): *name is borrowed from argv.
 */
int cli_dataset_name_parse(int argc, char **argv, const char **name,
                           struct err *e) WARN_UNUSED;
/*
 * 'prices set SITE --gpu-type T --per-gpu-hour X [--spot Y]' (argv from
 * "set"): *site and *gpu_type borrowed from argv, *body the PUT
 * /v1/prices/{site}/{gpu_type} body {"per_gpu_hour"[, "spot_per_gpu_hour"]}
 * (new reference; NULL unless 0 is returned).  CLI_HELP for --help.
 */
int cli_prices_set_parse(int argc, char **argv, const char **site,
                         const char **gpu_type, json_t **body,
                         struct err *e) WARN_UNUSED;

struct cli_dataset_sync {
  char name[CLI_DATASET_NAME_MAX + 1];
  char version[CLI_VERSION_LEN + 1]; /* "latest", or hex in lower case */
  const char *site;                  /* borrowed */
  int wait;                          /* 0 with --no-wait */
  int64_t timeout_s;                 /* --timeout: give up after; 0 never */
};

/*
 * 'dataset sync NAME[@VERSION] --site SITE [--no-wait] [--timeout T]'
 * (T: seconds, or a number with s, m or h).  VERSION is
 * "latest" (the default) or 1 to 64 hex digits: a whole version id or
 * the start of one, as the listings show them.
 */
int cli_dataset_sync_parse(int argc, char **argv, struct cli_dataset_sync *o,
                           struct err *e) WARN_UNUSED;
/*
 * The POST /v1/datasets/NAME/replicas body {"site","version"} (new
 * reference); version is the id to ask for (a prefix the caller has
 * resolved), NULL for o->version.
 */
json_t *cli_dataset_sync_body(const struct cli_dataset_sync *o,
                              const char *version);

/* ---- helpers shared by the commands ---- */

/*
 * Parse a command that takes only --help and positional arguments:
 * between min and max of them (max < 0: no limit).  On 0, *first is the
 * argv index of the first positional argument.
 */
int cli_args_positional(int argc, char **argv, int min, int max,
                        int *first, struct err *e) WARN_UNUSED;
/* A job id argument: a positive decimal integer, else ERR_INVALID. */
int cli_parse_job_id(const char *s, int64_t *out, struct err *e)
    WARN_UNUSED;
/*
 * Print "tenbin: MSG" and the usage text's first line to stderr;
 * returns CLI_EXIT_USAGE so commands can write return cli_usage_error().
 */
int cli_usage_error(const char *usage, const struct err *e);
/* The job states a --state filter accepts; 1 when name is one. */
int cli_is_job_state(const char *name);
/* The i-th of those states, or NULL past the last. */
const char *cli_job_state(size_t i);

/* ---- what the completion script is generated from ---- */

/* What a word completes to: an operand of a command or an option's
 * value.  The server's kinds are asked for with 'tenbin __complete'. */
enum cli_comp_value {
  CLI_COMP_NONE,     /* free text: nothing to offer */
  CLI_COMP_FILE,     /* a file name */
  CLI_COMP_JOB,      /* a job id (server) */
  CLI_COMP_SITE,     /* a site name (server) */
  CLI_COMP_WORKLOAD, /* a workload name (server) */
  CLI_COMP_DATASET,  /* a dataset name (server) */
  CLI_COMP_PROJECT,  /* a project name (server) */
  CLI_COMP_STATE,    /* a job state (cli_job_state) */
  CLI_COMP_SHELL,    /* bash or zsh */
  CLI_COMP_COMMAND,  /* a tenbin command */
};

/*
 * One command (sub NULL) or subcommand and the getopt_long table its
 * parser uses (borrowed, static, ending in a zero entry), so that a new
 * option is completed without a word more.  A command with subcommands
 * has one entry per subcommand and none of its own.
 */
struct cli_comp_spec {
  const char *cmd;
  const char *sub;
  const struct option *opts;
  enum cli_comp_value operand; /* what its operands complete to */
};

/* Every command's and subcommand's entry ("help" included). */
extern const struct cli_comp_spec cli_comp_specs[];
extern const size_t cli_comp_nspecs;
/* What the value of the long option name ("site") completes to. */
enum cli_comp_value cli_comp_option_value(const char *name);
/* The i-th global option's name ("server") and *has_arg, or NULL past
 * the last. */
const char *cli_global_option(size_t i, int *has_arg);

#endif
