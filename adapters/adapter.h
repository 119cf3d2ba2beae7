/*
 * The site adapter interface (DESIGN.md "Sites and adapters"): one vtable
 * per site kind plus a void *ctx per site (curl's Curl_cftype + ctx).
 *
 * Everything is asynchronous on the broker's loop.  The broker calls in
 * (submit, cancel, adopt, capacity); the adapter reports back through the
 * one update callback it was opened with, at any later time, from the
 * loop.  An adapter never touches the database: the broker records every
 * update as a state transition.
 *
 * Exactly-once rule: submit() must be safe to follow with adopt() after
 * a crash at any point.  The adapter tags what it launches with the
 * tenbin job id, so adopt() finds it again instead of launching twice.
 */
#ifndef TENBIN_ADAPTERS_ADAPTER_H
#define TENBIN_ADAPTERS_ADAPTER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "spec/jobspec.h"
#include "util/err.h"

/* Bumped whenever struct adapter_ops changes; ops->api_version says
 * which one an adapter was written for. */
#define ADAPTER_API_VERSION 6

#define ADAPTER_MAX_POOLS 8
#define ADAPTER_GPU_TYPE_LEN 32

/* GPUs of one type at a site. */
struct adapter_gpu_pool {
  char type[ADAPTER_GPU_TYPE_LEN]; /* "h100"; lowercase */
  int64_t total;                   /* GPUs that exist */
  int64_t in_use;                  /* GPUs assigned to running jobs */
  int64_t down;                    /* GPUs on drained or down nodes */
  int64_t pending;                 /* GPUs asked for by jobs waiting in
                                      the site's own queue (any user) */
  int64_t per_node;                /* most GPUs of this type on one node */
  int64_t grow;                    /* elastic sites: GPUs of total that
                                      are not up and could be started
                                      (VMs not launched, Slurm nodes
                                      powered down); never in use */
};

/* A snapshot of a site's capacity, filled by ops->capacity(). */
struct adapter_capacity {
  int reachable;       /* 0 when the site cannot be talked to */
  char detail[192];    /* why not, or other news; "" when none */
  int unknown;         /* never reached yet: the figures below are not
                          the site's, and no job is impossible there */
  int64_t nodes;       /* nodes that can run jobs */
  int64_t nodes_down;  /* drained or down nodes */
  int64_t max_jobs;    /* concurrent jobs the site accepts; 0 = no cap */
  int64_t jobs_active; /* jobs the adapter is running or has submitted */
  int64_t gpus_pending; /* GPUs asked for by jobs waiting in the site's
                           own queue, typed or not */
  int npools;
  struct adapter_gpu_pool pools[ADAPTER_MAX_POOLS];
  /* Elastic capacity (the pools' grow): how long starting a node takes,
   * and who starts it.  grows_on_submit 1: the site starts nodes itself
   * for the jobs it is given (Slurm power saving); 0: only a launch by
   * tenbin's autoscaler does (ops->scale). */
  int64_t grow_ms;
  int grows_on_submit;
};

/*
 * Where an elastic site's node pulls a job's dataset version from: the
 * agent of the dataset's source site (docs/NODES.md).  The version id
 * is the SHA-256 of the version's manifest, so the node checks what it
 * gets against it.  Strings are borrowed for the call.
 */
struct adapter_dataset {
  const char *name;            /* the dataset */
  const char *version;         /* 64 lowercase hex digits */
  const char *url;             /* the source agent's base URL */
  const char *token;           /* and its bearer token */
};

/* One job handed to an adapter; borrowed for the duration of the call. */
struct adapter_job {
  int64_t id;                  /* tenbin job id (the tag) */
  const struct job_spec *spec;
  /* For adopt() after a restart: what the broker had recorded (each may
   * be NULL when the crash came before it was stored). */
  const char *remote_id;
  const char *alloc;
  const char *log_path;
  /* Elastic sites only, for submit() and adopt(): the dataset version
   * the job's node pulls before the job starts, or NULL for none.  The
   * spec's env has TENBIN_DATASET; the node adds TENBIN_DATASET_DIR. */
  const struct adapter_dataset *dataset;
  /* Elastic sites only, for submit(): never on a spot node.  The broker
   * sets it when the job's deadline would not absorb an interruption
   * and a restart (policies/burst.h, burst_spot_safe). */
  int on_demand;
};

/* A change of a job's state at the site, reported to the broker. */
struct adapter_update {
  int64_t job_id;
  enum job_state state;  /* SUBMITTED, RUNNING, a final state, or QUEUED
                            meaning "never started here, place it again" */
  const char *remote_id; /* site's id, when known (borrowed) */
  const char *alloc;     /* GPUs assigned, e.g. "0,1" (borrowed) */
  const char *log_path;  /* where stdout goes (borrowed) */
  const char *reason;    /* e.g. "exit code 3", "TIMEOUT" (borrowed) */
  int exit_code;         /* -1 when not ended by exit */
  int signal;            /* 0 when not ended by a signal */
  int64_t at_ms;         /* when it happened, 0 = now */
  /* A final update of a job whose node pulled its dataset (elastic
   * sites): the bytes that crossed the network, which the broker bills
   * as egress from the dataset's source, and whether the pull failed. */
  int64_t pulled_bytes;
  int pull_failed;
};

/* Updates in the order they happened; n >= 1.  u is borrowed. */
typedef void (*adapter_update_fn)(void *arg, const struct adapter_update *u,
                                  size_t n);

/*
 * A VM of an elastic site (kinds aws, gcp, azure) as the broker stores
 * it.  The adapter decides; the broker only records, so an adapter still
 * never touches the database.  Strings are borrowed for the call.
 */
struct adapter_node {
  int64_t id;             /* the broker's, set by create() */
  const char *shape;      /* the site config's shape name */
  const char *zone;
  int spot;
  int attempt;            /* launch attempts made so far */
  const char *state;      /* launching, booting, ready, terminating,
                             ended */
  const char *vm_id;      /* the provider's id, or NULL */
  int64_t gpus;
  const char *gpu_type;   /* or NULL */
  int64_t price_micro;    /* per node-hour; 0: unpriced */
  int64_t created_ms, launched_ms, registered_ms, seen_ms, ended_ms;
  const char *reason;     /* or NULL */
  int64_t idle_gpus;      /* GPUs no running job holds, */
  int64_t idle_from_ms;   /* since then */
};

typedef int (*adapter_node_cb)(const struct adapter_node *n, void *arg);

/* The broker's record of nodes, for the elastic sites.  Every call is
 * synchronous and durable when it returns 0. */
struct adapter_node_store {
  /* Commit n as a new node (n->id is set) and write the token its agent
   * will present, NUL-terminated, into token[0..tokenlen). */
  int (*create)(void *arg, struct adapter_node *n, char *token,
                size_t tokenlen, struct err *e);
  /* Record n's new state (every field but the site and created_ms). */
  int (*update)(void *arg, const struct adapter_node *n, struct err *e);
  /* The site's live nodes (not ended), by id. */
  int (*list)(void *arg, adapter_node_cb cb, void *cb_arg, struct err *e);
  /* Node id's token again (a launch resent after a restart must carry
   * the same startup script), into token[0..tokenlen). */
  int (*token)(void *arg, int64_t id, char *token, size_t tokenlen,
               struct err *e);
  /* Bill gpus of n's VM idle from from_ms to to_ms, and record n (its
   * idle_gpus and idle_from_ms moved on), in one transaction: a VM's
   * uptime is billed whole, the jobs' holds plus these pieces. */
  int (*bill_idle)(void *arg, const struct adapter_node *n, int64_t from_ms,
                   int64_t to_ms, int64_t gpus, struct err *e);
};

/* A price a site's provider gives, as the broker records it. */
struct adapter_price {
  const char *gpu_type;        /* lowercase, as jobs name it (borrowed) */
  const char *kind;            /* "on_demand" or "spot" (static) */
  int64_t per_gpu_hour_micro;  /* a node's price over its GPUs */
};

/* The answer of ops->prices(): rc 0 and n prices (borrowed for the
 * call), or a negative code and e saying why. */
typedef void (*adapter_prices_cb)(void *arg, int rc,
                                  const struct adapter_price *p, size_t n,
                                  const struct err *e);

/* A shape an elastic site launches (its config's "shapes"). */
struct adapter_shape {
  char name[64];
  char gpu_type[ADAPTER_GPU_TYPE_LEN];
  int64_t gpus;                /* per node */
  int spot;                    /* spot first (it may fall back) */
};

#define ADAPTER_MAX_SHAPES 8

/* An elastic site's "burst" block (README "Burst mode"). */
struct adapter_burst {
  int64_t billing_ms, release_margin_ms, cooldown_ms;
  int64_t boot_ms;             /* the boot delay to assume until one is
                                  seen */
  int64_t spend_cap_micro;     /* $ per hour; 0: none */
  int forecast;
};

/* Read block (a site's "burst" member; NULL or null: every default)
 * into out; ERR_CONFIG naming the field ("burst.cooldown_s: ..."). */
int adapter_burst_read(const json_t *block, struct adapter_burst *out,
                       struct err *e) WARN_UNUSED;

/* A live node of an elastic site, as the autoscaler sees it. */
struct adapter_fleet_node {
  int64_t id;
  int shape;                   /* index into the fleet's shapes */
  int up;                      /* registered; 0 launching or booting */
  int64_t gpus_used;
  int64_t launched_ms;         /* created: billing is near enough */
  int64_t registered_ms;       /* 0 until up */
  int64_t idle_since_ms;       /* last job left, or created */
};

/*
 * What the autoscaler needs of an elastic site (ops->fleet): its shapes,
 * its live nodes (launching, booting, up; not terminating) and the
 * site's burst settings, validated by the adapter with the rest of its
 * config (README "Burst").  nodes is new: adapter_fleet_release().
 */
struct adapter_fleet {
  struct adapter_shape shapes[ADAPTER_MAX_SHAPES];
  size_t nshapes;
  struct adapter_fleet_node *nodes;
  size_t nnodes;
  int64_t terminating;         /* nodes on their way out */
  int backing_off;             /* launches refused for now */
  int64_t min_nodes, max_nodes;
  int64_t idle_timeout_ms;
  struct adapter_burst burst;
};

void adapter_fleet_release(struct adapter_fleet *f);

/* What the broker gives every adapter at open. */
struct adapter_env {
  uv_loop_t *loop;
  const char *site_name;
  const char *state_dir;   /* the broker's --state dir (job dirs, logs) */
  const char *self_exe;    /* path of the tenbind executable (for a shim) */
  const char *instance;    /* the broker's id (hex), for tags that must
                              not match another broker's jobs */
  adapter_update_fn update;
  void *update_arg;
  const struct adapter_node_store *nodes; /* for elastic sites */
  void *nodes_arg;
};

struct adapter_ops {
  const char *kind;  /* "local", "slurm", ... as in the site config */
  int api_version;   /* bumped when this struct changes */

  /* Validate the site's JSON config (ERR_CONFIG naming the field, e.g.
   * "gpus.h100: must be a non-negative integer") and open the site.
   * *ctx is new: released by close(). */
  int (*open)(const struct adapter_env *env, const json_t *config,
              void **ctx, struct err *e);
  /* Start job.  0 means accepted: its progress arrives as updates (the
   * first one SUBMITTED or RUNNING, or a final state).  ERR_UNAVAILABLE
   * means "no room right now" and the broker keeps the job queued. */
  int (*submit)(void *ctx, const struct adapter_job *job, struct err *e);
  /* Cancel job; idempotent, a job already gone is not an error.  The
   * final CANCELLED arrives as an update. */
  int (*cancel)(void *ctx, const struct adapter_job *job, struct err *e);
  /* Re-attach to a job the broker had placed, submitted or running before
   * a restart.  Its true state arrives as updates. */
  int (*adopt)(void *ctx, const struct adapter_job *job, struct err *e);
  /* Fill out with the site's current capacity. */
  void (*capacity)(void *ctx, struct adapter_capacity *out);
  /* Stop watching jobs (they keep running), release ctx, then cb(arg)
   * from the loop. */
  void (*close)(void *ctx, void (*cb)(void *arg), void *arg);
  /* The directory, absolute, that job job_id's log may be read from on
   * the broker host (new string, free()), or NULL for none.  The job
   * chooses its output path; this is the site's choice, and tenbind
   * opens a log only beneath it, following no link.  Optional: NULL
   * here serves no log. */
  char *(*log_dir)(void *ctx, int64_t job_id);

  /* Elastic sites only (NULL elsewhere): the node agents' calls
   * (docs/NODES.md), from node node_id, whose token the broker checked.
   * A heartbeat's body is req; *answer (new) is what goes back. */
  int (*node_heartbeat)(void *ctx, int64_t node_id, const json_t *req,
                        json_t **answer, struct err *e);
  /* Bytes data[0..len) of job job_id's output at offset; *size is what
   * is held after.  ERR_CONFLICT (with *size) when offset is not it. */
  int (*node_log)(void *ctx, int64_t node_id, int64_t job_id,
                  int64_t offset, const char *data, size_t len,
                  int64_t *size, struct err *e);

  /* Optional (NULL where the site has no price source): the prices its
   * provider asks now, per GPU type, into cb(arg, ...) exactly once, from
   * the loop, never from inside the call; ERR_UNAVAILABLE once close()
   * has begun, before close's cb. */
  void (*prices)(void *ctx, adapter_prices_cb cb, void *arg);

  /* Elastic sites whose nodes tenbin launches (NULL elsewhere): the
   * autoscaler's view of the site, and its orders.  scale launches
   * launch[s] nodes of shape s (nshapes entries) and releases the idle
   * nodes of ids release[0..nrelease), with why in their log; it never
   * goes above max_nodes nor below min_nodes, and skips a node that is
   * no longer idle.  ERR_UNAVAILABLE while the site backs off. */
  void (*fleet)(void *ctx, struct adapter_fleet *out);
  int (*scale)(void *ctx, const int64_t *launch, size_t nshapes,
               const int64_t *release, size_t nrelease, const char *why,
               struct err *e);
};

/* The adapter for a site kind, or NULL. */
const struct adapter_ops *adapter_find(const char *kind);

/*
 * 1 for an elastic site's adapter (aws, gcp, azure: the one kind of
 * adapter whose ops have node_heartbeat), else 0.  An elastic site has
 * no storage of its own that outlives a VM: it holds no dataset
 * replicas and the stager never pulls to it; a job with a dataset goes
 * to it at once with adapter_job.dataset, and the node pulls the
 * version itself.
 */
int adapter_is_elastic(const struct adapter_ops *ops);

#endif
