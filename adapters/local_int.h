/*
 * Internals of the local adapter, shared by its files and its unit test
 * only: local.c (the vtable and job tracking), local_gpu.c (the GPU
 * inventory), local_launch.c (what a job runs: environment, paths,
 * spec.json), local_fs.c (durable files, /proc) and local_shim.c (the
 * shim).  Nothing here is part of the adapter interface.
 *
 * A job's directory, STATE/jobs/ID, is the contract between tenbind and
 * the shim, and what a restarted tenbind reads:
 *
 *   lock         flock(LOCK_EX)'d by tenbind before the shim is spawned and
 *                inherited by the shim, which holds it until it exits:
 *                lock held <=> a shim for the job is alive
 *   spec.json    what the shim runs (LOCAL_SPEC_* keys), written before
 *                the spawn
 *   shim.pid     "PID STARTTIME" of the shim, written by the shim first
 *   shim.log     the shim's own stderr
 *   started      written durably by the shim before it forks the job, so
 *                a job process can exist only if this file does
 *   status.json  how the job ended (LOCAL_STATUS_* keys), written
 *                atomically by the shim before it exits
 *   script       a script job's batch script (mode 0700)
 *   output.log   the default stdout and stderr of the job
 */
#ifndef TENBIN_ADAPTERS_LOCAL_INT_H
#define TENBIN_ADAPTERS_LOCAL_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "adapters/adapter.h"
#include "util/err.h"
#include "util/fileio.h"

/* The shim finds the job's lock on this descriptor. */
#define LOCAL_LOCK_FD 3

/* Caps on the files of a job directory (spec.json carries the whole
 * environment and argv, each capped by jobspec; status.json is small). */
#define LOCAL_SPEC_MAX (8u << 20)
#define LOCAL_STATUS_MAX (64u << 10)

/* The four ways a job ends, as status.json's "reason" names them. */
#define LOCAL_END_EXITED "exited"
#define LOCAL_END_CANCELLED "cancelled"
#define LOCAL_END_TIMEOUT "timeout"
#define LOCAL_END_ERROR "error" /* the job could not be started */

/*
 * spec.json: {"job_id": int, "argv": [str], "env": ["K=V"], "chdir": str,
 * "stdout": str, "stderr": str or null (= with stdout), "time_limit_s":
 * int, "cancel_grace_s": int, "alloc": str, "gpu_type": str or null}.
 * Every path in it is absolute.
 *
 * status.json: {"job_id": int, "reason": LOCAL_END_*, "exit_code": int
 * (-1 when not ended by exit), "signal": int (0 when not ended by a
 * signal), "killed_after_grace": bool, "error": str or null, "start_ms":
 * int, "end_ms": int}.
 */

/* ---- local_fs.c: files and processes ---- */

/* New string "dir/name". */
char *adapter_local__path(const char *dir, const char *name);
/* 1 when path exists. */
int adapter_local__exists(const char *path);
/*
 * Start time of process pid (field 22 of /proc/PID/stat, clock ticks since
 * boot): what tells a process apart from a later one that reuses its pid.
 * ERR_NOT_FOUND when there is no such process.
 */
int adapter_local__proc_start(pid_t pid, unsigned long long *start)
    WARN_UNUSED;
/* Parse "PID:STARTTIME" (a remote_id); ERR_INVALID when malformed. */
int adapter_local__parse_remote_id(const char *s, pid_t *pid,
                                   unsigned long long *start) WARN_UNUSED;
/* Parse "PID STARTTIME" (shim.pid's text); ERR_INVALID when malformed. */
int adapter_local__parse_pid_file(const char *s, pid_t *pid,
                                  unsigned long long *start) WARN_UNUSED;
/* "killed by signal 9 (SIGKILL)" or "killed by signal 40" into out. */
void adapter_local__signal_text(int sig, char *out, size_t outlen);

/* ---- local_gpu.c: the GPU inventory ---- */

struct local_gpu {
  int index;     /* the device index jobs see in CUDA_VISIBLE_DEVICES */
  int pool;      /* index into local_inventory.types */
  int64_t owner; /* job id holding it, 0 when free */
};

struct local_inventory {
  int npools;
  char types[ADAPTER_MAX_POOLS][ADAPTER_GPU_TYPE_LEN];
  struct local_gpu *gpus; /* owned; in index order */
  size_t ngpus;
  char none_why[128];     /* why detection found no GPUs, or "" */
};

void adapter_local__inventory_init(struct local_inventory *inv);
void adapter_local__inventory_release(struct local_inventory *inv);
/*
 * Fill inv from the site config's "gpus" value (borrowed; NULL means
 * "auto"): "auto" asks nvidia-smi when it is on PATH, an object
 * {"h100": 8} declares GPUs numbered from `first` in that order (so that
 * two local sites of one host can split its GPUs).  ERR_CONFIG naming
 * the field.
 */
int adapter_local__inventory_configure(struct local_inventory *inv,
                                       const json_t *gpus, int first,
                                       struct err *e) WARN_UNUSED;
/* Add the GPUs of `nvidia-smi -L` output text to inv (MIG lines are
 * skipped); ERR_CONFIG on more types or GPUs than fit. */
int adapter_local__inventory_parse_smi(struct local_inventory *inv,
                                       const char *text,
                                       struct err *e) WARN_UNUSED;
/* The lowercase type of a GPU model name: "NVIDIA H100 80GB HBM3" gives
 * "h100", an unknown model its words joined by '-'. */
void adapter_local__gpu_type(const char *model, char *out, size_t outlen);
/*
 * Assign n GPUs of type (NULL: any single type) to job_id, lowest free
 * indices first.  On success *alloc is new ("0,1", "" for n == 0) and
 * *type_out borrowed from inv (NULL for n == 0).  ERR_UNPROCESSABLE when
 * the site can never satisfy it, ERR_UNAVAILABLE when not right now.
 */
int adapter_local__inventory_take(struct local_inventory *inv, int64_t job_id,
                                  const char *type, int64_t n, char **alloc,
                                  const char **type_out,
                                  struct err *e) WARN_UNUSED;
/* Mark the GPUs listed in alloc ("0,1") as job_id's again (adopt after a
 * restart); returns how many could not be claimed. */
int adapter_local__inventory_claim(struct local_inventory *inv,
                                   int64_t job_id, const char *alloc);
/* Free every GPU job_id holds. */
void adapter_local__inventory_put(struct local_inventory *inv,
                                  int64_t job_id);
/* Fill the pool part of a capacity snapshot. */
void adapter_local__inventory_capacity(const struct local_inventory *inv,
                                       struct adapter_capacity *out);

/* ---- local_launch.c: what a job runs ---- */

struct local_launch {
  int64_t job_id;
  const struct job_spec *spec;
  const char *site_name;
  const char *job_dir;    /* absolute */
  const char *alloc;      /* "0,1" or "" */
  const char *gpu_type;   /* NULL when no GPUs */
  int64_t ngpus;
  int64_t cancel_grace_s;
  char *const *environ_;  /* tenbind's environment (borrowed) */
};

/*
 * Expand the sbatch filename pattern pat (%j job id, %x job name, %u user,
 * %N host, %% a percent sign; any other %-sequence is kept as written)
 * into *out (new).  ERR_INVALID when the result is too long.
 */
int adapter_local__expand_pattern(const char *pat, int64_t job_id,
                                  const char *name, char **out,
                                  struct err *e) WARN_UNUSED;
/*
 * The job's environment (new NULL-terminated vector, free each string and
 * the vector): tenbind's environment when export is ALL, the names of
 * export_names from it, then the spec's env, then the TENBIN_* and CUDA
 * variables, later entries replacing earlier ones of the same name; with
 * export NONE PATH defaults to /usr/local/bin:/usr/bin:/bin.
 */
char **adapter_local__job_env(const struct local_launch *l);
/*
 * The spec.json object for l (new reference) and the absolute stdout path
 * (*log_path, new).  A script job runs JOB_DIR/script, which the caller
 * writes.  ERR_INVALID on an unusable spec.
 */
int adapter_local__launch_spec(const struct local_launch *l, json_t **out,
                               char **log_path, struct err *e) WARN_UNUSED;

#endif
