/*
 * slurmrestd's wire format, one table per OpenAPI plugin version.
 *
 * The slurm adapter (slurm.c) speaks HTTP and keeps the jobs; everything
 * that depends on the shape of slurmrestd's JSON lives behind struct
 * slurm_schema: the paths, the submit body, and the parsing of the job
 * list, the node list and the error objects.  Supporting v0.0.39 (whose
 * job schema changed: environment becomes an array, job_state a list,
 * exit_code an object) means adding one table, not touching slurm.c.
 *
 * What does not depend on the version (the meaning of Slurm's job states
 * and wait statuses, error numbers, gres strings) is shared, below the
 * table.
 *
 * Pure: no I/O, no loop.  Ownership: parse functions fill structs whose
 * strings they own; release them with the matching _release function.
 */
#ifndef TENBIN_ADAPTERS_SLURM_SCHEMA_H
#define TENBIN_ADAPTERS_SLURM_SCHEMA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "adapters/adapter.h"
#include "spec/jobspec.h"
#include "util/err.h"

/* The comment every Slurm job of ours carries: "tenbin:<instance>:<id>".
 * instance tells brokers that share a cluster apart. */
#define SLURM_TAG_PREFIX "tenbin:"
#define SLURM_TAG_MAX 96

/* What the adapter asks Slurm to run; every member borrowed. */
struct slurm_submit {
  const struct job_spec *spec;
  const char *tag;         /* the comment, from slurm_tag_format() */
  const char *partition;   /* NULL: the cluster's default partition */
  const char *account;     /* NULL: the user's default account */
  const char *workdir;     /* never NULL */
  const char *stdout_path; /* absolute pattern (%j etc.), never NULL */
  const char *stderr_path; /* NULL: with stdout */
  char *const *env;        /* NULL-terminated "KEY=VALUE", the job's whole
                              environment (Slurm requires one) */
};

/* One job as the site lists it. */
struct slurm_job {
  int64_t slurm_id;
  int64_t tenbin_id;      /* from a tag of our instance, else -1 */
  char *state;            /* "PENDING", "RUNNING", ... verbatim */
  char *reason;           /* state_reason verbatim ("None", "Resources") */
  char *nodes;            /* "onprem-gpu1" or "" */
  char *alloc;            /* GPUs per node, e.g. "onprem-gpu1:0-1", or "" */
  char *stdout_path;      /* as reported (patterns unexpanded), or "" */
  char *name;
  char *user;
  int64_t exit_raw;       /* raw wait status; -1 unknown */
  int64_t start_s;        /* epoch seconds; 0 unknown */
  int64_t end_s;
  int64_t gpus;           /* GPUs the job asks for, over all nodes */
  char gpu_type[ADAPTER_GPU_TYPE_LEN]; /* "" when untyped */
  int64_t array_job_id;   /* master id of an array task; 0: not one */
  int64_t array_task_id;  /* its index; meaningless when not one */
};

struct slurm_job_list {
  struct slurm_job *jobs;
  size_t n;
};

void slurm_job_list_release(struct slurm_job_list *l);

/* The GPUs of one job as read from an answer: more is read as this many,
 * so that the sums made of them cannot overflow. */
#define SLURM_JOB_GPUS_MAX ((int64_t)1 << 31)

/* One node as the site lists it: what an elastic site's cloud block
 * (slurm_cloud.c) matches a VM to, and the GPUs it bills. */
#define SLURM_NODE_NAME_LEN 64
#define SLURM_NODE_ADDR_LEN 64
struct slurm_node {
  char name[SLURM_NODE_NAME_LEN];    /* NodeName; "" when too long */
  char address[SLURM_NODE_ADDR_LEN]; /* NodeAddr; "" when not said */
  char gpu_type[ADAPTER_GPU_TYPE_LEN]; /* its first GPU type ("gpu"
                                          when untyped), or "" */
  int64_t gpus;                       /* all its GPUs, any type */
};

struct slurm_node_list {
  struct slurm_node *nodes;
  size_t n;
};

void slurm_node_list_release(struct slurm_node_list *l);

struct slurm_schema {
  const char *version;       /* "v0.0.38" */
  /* Path of an endpoint under the site URL; what is one of "ping",
   * "jobs", "job" (needs id), "submit", "nodes", "db_job" (needs id).
   * ERR_NOT_FOUND for an endpoint this version lacks, ERR_TOO_LARGE when
   * out is too small. */
  int (*path)(const char *what, int64_t id, char *out, size_t outsz);
  /* The body of POST submit (new reference).  ERR_INVALID naming the
   * directive for an #SBATCH option this version cannot express. */
  int (*submit_body)(const struct slurm_submit *s, json_t **out,
                     struct err *e);
  /* The job id from a submit answer. */
  int (*submit_id)(const json_t *answer, int64_t *id, struct err *e);
  /* Every job in a jobs (or single job) answer; instance selects which
   * tags are ours. */
  int (*jobs)(const json_t *answer, const char *instance,
              struct slurm_job_list *out, struct err *e);
  /* Jobs in a slurmdbd answer (GET db_job): the history of jobs that
   * slurmctld has purged, mapped to the same struct (exit_raw rebuilt as
   * a wait status).  NULL when this version has no slurmdbd endpoints. */
  int (*db_jobs)(const json_t *answer, const char *instance,
                 struct slurm_job_list *out, struct err *e);
  /* Nodes, GPUs by type (total, in use, on down/drained nodes, on
   * powered-down nodes Slurm starts for a job: grow), and whether the
   * cluster starts nodes itself (grows_on_submit). */
  int (*nodes)(const json_t *answer, struct adapter_capacity *cap,
               struct err *e);
  /* The same answer, node by node (out is new: release it).  A node
   * that is no object is an error, as for nodes. */
  int (*node_list)(const json_t *answer, struct slurm_node_list *out,
                   struct err *e);
};

/* The table for version ("v0.0.38"), or NULL. */
const struct slurm_schema *slurm_schema_find(const char *version);

/* ---- version-independent ---- */

/* Write the tag of job id for instance into out. */
void slurm_tag_format(char *out, size_t outsz, const char *instance,
                      int64_t id);
/* The tenbin id in tag when it is instance's, else -1. */
int64_t slurm_tag_parse(const char *tag, const char *instance);

/* What a Slurm job state means for tenbin. */
struct slurm_outcome {
  enum job_state state;   /* SUBMITTED, RUNNING or a final state */
  int exit_code;          /* -1 unless it ended by exit */
  int signal;             /* 0 unless it ended by a signal */
  char reason[192];       /* "PENDING (Resources)", "exit code 3",
                             "TIMEOUT", "killed by signal 9", ... */
  int64_t started_ms;     /* when Slurm started it (running or ended),
                             0 when it never ran */
};
void slurm_job_outcome(const struct slurm_job *j, struct slurm_outcome *out);

/*
 * An answer of slurmrestd that is not a success, mapped to our table
 * with the site's own words kept: 2017 (invalid job id) is ERR_NOT_FOUND,
 * 401 is ERR_UNAUTHORIZED, a 500 whose errors say the token was refused
 * (slurmctld answers that with "unable to load" / error -1) is
 * ERR_UNAUTHORIZED too, other 4xx ERR_INVALID, other 5xx ERR_SITE.
 * Reads both "error_number" and "error_code".  Returns the code.
 */
int slurm_answer_error(int status, const char *body, size_t len,
                       struct err *e);

/* Expand a Slurm output pattern (%j %x %u %N %%, %A %a) into out;
 * ERR_TOO_LARGE when it does not fit. */
int slurm_expand_path(const char *pattern, const struct slurm_job *j,
                      char *out, size_t outsz);

/* ---- gres and hostlist strings, for the version tables ---- */

extern const struct slurm_schema slurm_schema_v0038;

/* One GPU entry of a gres or TRES list: type lowercased ("" untyped),
 * count, and the device indexes ("0-1,3") or NULL; all borrowed for the
 * duration of the call. */
typedef void (*slurm_gres_fn)(void *arg, const char *type, int64_t count,
                              const char *idx);
/*
 * Call fn for every GPU entry of list: node gres ("gpu:h100:8(S:0-1)"),
 * gres_used and gres_detail ("gpu:h100:2(IDX:0-1)"), TRES requests
 * ("gres:gpu:h100:2", "gres/gpu:h100=2", "gpu:2"); entries are separated
 * by ',' or ';' outside parentheses.  Other gres and malformed entries
 * are skipped.
 */
void slurm_gres_each(const char *list, slurm_gres_fn fn, void *arg);
/*
 * The GPUs of each node of a job: nodes is its hostlist ("a,b" or
 * "gpu-[1-2]"), detail[i] the gres_detail string of its i-th node.
 * Returns a new string, "gpu-1:0-1,gpu-2:0,2" (a token holding ':'
 * starts a node), or the index lists alone, "0-1;0,2", when the hostlist
 * cannot be paired with detail, or "" when no GPU is assigned; free with
 * free().
 */
char *slurm_gres_alloc(const char *nodes, const char *const *detail,
                       size_t n);

#endif
