/*
 * The job specification: what a client asked for, the shared vocabulary of
 * the REST layer, the broker, the placement policy and the site adapters.
 * A spec is immutable once the job is accepted; it is stored as the JSON
 * that jobspec_to_json() writes and read back with jobspec_from_json().
 *
 * Value type (git's _init/_release vocabulary): every pointer member is
 * owned by the struct and freed by jobspec_release().
 */
#ifndef TENBIN_SPEC_JOBSPEC_H
#define TENBIN_SPEC_JOBSPEC_H

#include <jansson.h>
#include <stdint.h>

#include "job_state.h"
#include "util/err.h"
/* The spec is made of string vectors; its users free them with it. */
#include "util/strv.h"

/* Limits on what a client controls; each one is named in its error. */
#define JOBSPEC_MAX_GPUS 4096
#define JOBSPEC_MAX_NODES 1024
#define JOBSPEC_MAX_ARGS 256
#define JOBSPEC_MAX_ARG_LEN 8192
#define JOBSPEC_MAX_ENV 256
#define JOBSPEC_MAX_SCRIPT (512 * 1024)
#define JOBSPEC_MAX_NAME 128
#define JOBSPEC_MAX_PATH 1024

/*
 * How the job's environment is built from the site's own environment
 * (sbatch --export): ALL inherits it, NONE starts empty; both then add
 * env[] and the TENBIN_* variables.
 */
enum jobspec_export { JOBSPEC_EXPORT_ALL = 0, JOBSPEC_EXPORT_NONE };

struct job_spec {
  char *name;          /* job name; never NULL after validation */
  char *project;       /* never NULL after validation */
  char *workload;      /* catalog entry it came from, or NULL */
  char **argv;         /* NULL-terminated command, or NULL with script */
  char *script;        /* batch script text, or NULL with argv */
  char **env;          /* NULL-terminated "KEY=VALUE" list, may be NULL */
  enum jobspec_export export_mode;
  char **export_names; /* bare names of --export=A,B (taken from the site) */
  int64_t gpus;        /* total GPUs over all nodes */
  char *gpu_type;      /* "h100", or NULL for any type */
  int64_t nodes;       /* >= 1 */
  int64_t gpus_per_node; /* 0 when the client gave a total instead */
  int64_t time_limit_s;  /* 0 = no limit */
  char *site;          /* pinned site, or NULL */
  char *chdir;         /* working directory, or NULL */
  char *stdout_path;   /* sbatch --output pattern, or NULL for default */
  char *stderr_path;   /* sbatch --error pattern, or NULL = with stdout */
  char **sbatch_extra; /* directives tenbin does not interpret, verbatim */
  int hold;            /* stays queued until released */
  int64_t deadline_ms; /* latest start it is placed for (wall clock), or
                          0: sites that cannot start it by then are left
                          out while one can */
  int require_baseline; /* placed only at sites whose NCCL baseline
                           matches the reference site's (docs/BASELINE.md) */
  char *dataset;       /* "NAME", "NAME@latest" or "NAME@VERSION" as
                          given; the broker stores it resolved to
                          "NAME@VERSION" (docs/SYNC.md); or NULL */
};

void jobspec_init(struct job_spec *s);
/* Free every member (NULL-safe) and re-init. */
void jobspec_release(struct job_spec *s);

/*
 * Fill s from a validated JSON object (the REST body of POST /v1/jobs
 * minus the fields the broker consumes itself, or a stored spec).
 * Unknown or mistyped fields and out-of-range values give ERR_INVALID
 * naming the field.  When "script" is present its #SBATCH lines fill
 * every field the JSON left unset (explicit fields win, as sbatch's
 * command line wins over the script); warnings for directives tenbin
 * does not interpret are appended to warnings (a JSON array, borrowed)
 * when it is not NULL.  s must be freshly initialised.
 */
int jobspec_from_json(struct job_spec *s, const json_t *obj,
                      json_t *warnings, struct err *e) WARN_UNUSED;
/* The spec as a JSON object (new reference); round-trips exactly. */
json_t *jobspec_to_json(const struct job_spec *s);

/*
 * NULL when v is a well-formed identifier (a project, site or workload
 * name: [A-Za-z0-9][A-Za-z0-9._-]{0,63}), else a static description of
 * what is wrong.  Public so that tenbind's config holds its project list
 * to the rule a job's project meets.
 */
const char *jobspec_ident_problem(const char *v);
/* NULL when v is a GPU type as a job may name it ([A-Za-z0-9_-]{1,31};
 * jobs name types in lower case), else what is wrong.  Public so that a
 * site's prices hold their GPU types to the same rule. */
const char *jobspec_gpu_type_problem(const char *v);

#endif
