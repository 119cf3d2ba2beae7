/*
 * The state store: the only module that includes <sqlite3.h>.
 *
 * One SQLite file in WAL mode with synchronous=FULL, so a committed
 * transaction survives kill -9 and power loss.  The schema comes from
 * db/migrations/NNN_*.sql, compiled into the binary, applied in order and
 * tracked with PRAGMA user_version (append-only: never edit a released
 * migration, add a new one).
 *
 * Used from the loop thread only.  Statements are prepared once and cached
 * per handle.  Functions that write do not open transactions themselves:
 * the caller groups writes with db_begin()/db_commit() (the broker commits
 * a batch of submissions per loop turn); outside a transaction each write
 * is its own autocommit transaction.
 *
 * Row structs are value types: db fills them with new strings that the
 * caller frees with the matching _release().
 */
#ifndef TENBIN_DB_DB_H
#define TENBIN_DB_DB_H

#include <stdint.h>

#include "spec/jobspec.h"
#include "util/err.h"

struct db;

/*
 * Open (creating if needed) the database at path and migrate it to the
 * latest schema.  *out is new: close with db_close().  A database whose
 * user_version is newer than this binary knows is refused (ERR_DB with a
 * message saying so) rather than misread.
 */
int db_open(const char *path, struct db **out, struct err *e) WARN_UNUSED;
/* Finalize statements and close; NULL is a no-op. */
void db_close(struct db *db);
/* Schema version after migration (PRAGMA user_version). */
int db_schema_version(struct db *db);

int db_begin(struct db *db, struct err *e) WARN_UNUSED;
int db_commit(struct db *db, struct err *e) WARN_UNUSED;
/* Roll back the open transaction, if any; never fails visibly. */
void db_rollback(struct db *db);

/* ---- jobs ---- */

struct db_job {
  int64_t id;           /* assigned by db_job_insert */
  enum job_state state;
  char *name;
  char *project;
  char *workload;       /* or NULL */
  char *site;           /* or NULL until placed */
  char *spec_json;      /* jobspec_to_json() text */
  int64_t gpus;         /* copies of spec fields, for queries */
  char *gpu_type;       /* or NULL */
  int hold;
  char *idem_key;       /* Idempotency-Key scoped by its owner, or NULL */
  char *idem_hash;      /* SHA-256 of the request it came with, or NULL */
  char *remote_id;      /* the site's id for the job, or NULL */
  char *alloc;          /* GPUs assigned at the site, e.g. "0,1", or NULL */
  char *reason;         /* why it is in this state (last), or NULL */
  char *log_path;       /* the job's stdout file, or NULL */
  int exit_code;        /* -1 until it ends with an exit status */
  int signal;           /* 0, or the signal that ended it */
  int64_t created_ms;
  int64_t updated_ms;
  int64_t started_ms;   /* 0 until running */
  int64_t ended_ms;     /* 0 until final */
  int restarts;         /* placed again after it had started */
};

void db_job_init(struct db_job *j);
/* Free the strings (NULL-safe) and re-init. */
void db_job_release(struct db_job *j);

/* Insert j (all fields but id) and set j->id.  ERR_CONFLICT when idem_key
 * is already used. */
int db_job_insert(struct db *db, struct db_job *j, struct err *e)
    WARN_UNUSED;
/* Fill out (initialised) with job id; ERR_NOT_FOUND naming the id. */
int db_job_get(struct db *db, int64_t id, struct db_job *out,
               struct err *e) WARN_UNUSED;
/* Fill out with the job created with idem_key; ERR_NOT_FOUND if none. */
int db_job_get_by_idem(struct db *db, const char *idem_key,
                       struct db_job *out, struct err *e) WARN_UNUSED;
/*
 * Write back the mutable columns of j: state, site, remote_id, alloc,
 * reason, log_path, exit_code, signal, hold, updated/started/ended times.
 */
int db_job_update(struct db *db, const struct db_job *j, struct err *e)
    WARN_UNUSED;

struct db_job_filter {
  const char *state;     /* exact state name, or NULL */
  const char *project;   /* or NULL */
  const char *site;      /* or NULL */
  char *const *projects; /* NULL-terminated allow-list (token scope), or
                            NULL for all projects */
  int64_t before_id;     /* cursor: only ids < before_id; 0 = from newest */
  int limit;             /* rows wanted, 1..1000 */
};

/* Called once per row; the row is borrowed for the call.  Return non-zero
 * to stop early (that value is returned by the list function). */
typedef int (*db_job_cb)(const struct db_job *j, void *arg);

/* Jobs matching f, newest first (id descending). */
int db_job_list(struct db *db, const struct db_job_filter *f, db_job_cb cb,
                void *arg, struct err *e) WARN_UNUSED;
/* Non-final jobs (queued..running), oldest first; for restart recovery
 * and the scheduler. Held queued jobs are included only if with_held. */
int db_job_list_active(struct db *db, int with_held, db_job_cb cb,
                       void *arg, struct err *e) WARN_UNUSED;
/* Queued, non-held jobs, oldest first, at most limit of them (the
 * scheduler's queue scan; served by a partial index). */
int db_job_list_runnable(struct db *db, int limit, db_job_cb cb, void *arg,
                         struct err *e) WARN_UNUSED;

/* Counts of jobs by (site, state); site is "" for unplaced jobs. */
typedef void (*db_count_cb)(const char *site, enum job_state state,
                            int64_t count, void *arg);
int db_job_counts(struct db *db, db_count_cb cb, void *arg, struct err *e)
    WARN_UNUSED;

/* ---- job events: every transition, append-only ---- */

struct db_event {
  int64_t id;
  int64_t job_id;
  int64_t at_ms;
  char *from_state; /* NULL for the creation event */
  char *to_state;
  char *detail;     /* human text, or NULL */
};

void db_event_release(struct db_event *ev);
int db_event_append(struct db *db, int64_t job_id, int64_t at_ms,
                    const char *from_state, const char *to_state,
                    const char *detail, struct err *e) WARN_UNUSED;
typedef int (*db_event_cb)(const struct db_event *ev, void *arg);
/* Events of one job in order of id. */
int db_event_list(struct db *db, int64_t job_id, db_event_cb cb, void *arg,
                  struct err *e) WARN_UNUSED;

/* ---- placement decisions (for "why is my job here / still queued") ---- */

/* A job's latest placement decision; borrowed when read. */
struct db_placement {
  int64_t job_id;
  int64_t at_ms;
  const char *verdict;    /* "now", "wait" or "never" */
  const char *site;       /* chosen or waited for, or NULL */
  int64_t start_ms;       /* predicted start, 0: unknown */
  const char *reason;     /* or NULL */
  const char *candidates; /* JSON text: every candidate's verdict, terms
                             and reason */
};

/* Record p as its job's decision.  Only the latest decision per job is
 * kept (a waiting job is re-decided every pass; the broker writes only
 * when the decision changes). */
int db_placement_put(struct db *db, const struct db_placement *p,
                     struct err *e) WARN_UNUSED;
typedef int (*db_placement_cb)(const struct db_placement *p, void *arg);
/* cb with job_id's decision, if it has one (*found says). */
int db_placement_get(struct db *db, int64_t job_id, db_placement_cb cb,
                     void *arg, int *found, struct err *e) WARN_UNUSED;

/* ---- meta ---- */

/* A fact about this database, e.g. "instance" (the broker's id in the
 * tags of remote jobs); *value_out is new.  ERR_NOT_FOUND when unset. */
int db_meta_get(struct db *db, const char *key, char **value_out,
                struct err *e) WARN_UNUSED;

/* ---- workload catalog ---- */

/* Insert or replace workload name with its JSON definition; *created is
 * set to 1 when it did not exist before (may be NULL). */
int db_workload_put(struct db *db, const char *name, const char *json,
                    int64_t now_ms, int *created, struct err *e) WARN_UNUSED;
/* *json_out is new (free()); ERR_NOT_FOUND naming the workload. */
int db_workload_get(struct db *db, const char *name, char **json_out,
                    struct err *e) WARN_UNUSED;
typedef int (*db_workload_cb)(const char *name, const char *json,
                              void *arg);
/* All workloads by name. */
int db_workload_list(struct db *db, db_workload_cb cb, void *arg,
                     struct err *e) WARN_UNUSED;

/* ---- datasets, versions, replicas, transfers (datasets.c) ---- */

struct db_dataset {
  char *name;
  char *source_site;
  char *path;           /* relative to the source agent's root */
  int64_t created_ms;
  char *project;        /* whose tokens see it; NULL: admins only */
};

void db_dataset_release(struct db_dataset *d);
/* ERR_CONFLICT naming the dataset when the name exists. */
int db_dataset_insert(struct db *db, const struct db_dataset *d,
                      struct err *e) WARN_UNUSED;
/* Fill out (zeroed first); ERR_NOT_FOUND naming the dataset. */
int db_dataset_get(struct db *db, const char *name, struct db_dataset *out,
                   struct err *e) WARN_UNUSED;
/* Rows handed to list callbacks are borrowed (as for jobs). */
typedef int (*db_dataset_cb)(const struct db_dataset *d, void *arg);
/* Every dataset by name. */
int db_dataset_list(struct db *db, db_dataset_cb cb, void *arg,
                    struct err *e) WARN_UNUSED;

struct db_dataset_version {
  char *dataset;
  char *version;        /* 64 hex digits */
  int64_t files;
  int64_t bytes;
  int64_t created_ms;   /* first published */
  int64_t published_ms; /* last published ("latest" is the newest) */
};

void db_dataset_version_release(struct db_dataset_version *v);
/*
 * Record a publish of v: a new version is inserted (created_ms and
 * published_ms as given, *created = 1); a known one only gets its
 * published_ms moved to v->published_ms (*created = 0; created may be
 * NULL).  ERR_NOT_FOUND when the dataset does not exist.
 */
int db_dataset_version_put(struct db *db, const struct db_dataset_version *v,
                           int *created, struct err *e) WARN_UNUSED;
/* ERR_NOT_FOUND naming the version. */
int db_dataset_version_get(struct db *db, const char *dataset,
                           const char *version,
                           struct db_dataset_version *out, struct err *e)
    WARN_UNUSED;
/* The version published last; ERR_NOT_FOUND when there is none. */
int db_dataset_version_latest(struct db *db, const char *dataset,
                              struct db_dataset_version *out, struct err *e)
    WARN_UNUSED;
typedef int (*db_dataset_version_cb)(const struct db_dataset_version *v,
                                     void *arg);
/* A dataset's versions, the one published last first. */
int db_dataset_version_list(struct db *db, const char *dataset,
                            db_dataset_version_cb cb, void *arg,
                            struct err *e) WARN_UNUSED;

enum db_replica_state {
  DB_REPLICA_PENDING = 0, /* asked for, no pull started yet */
  DB_REPLICA_SYNCING,     /* the site's agent is pulling it */
  DB_REPLICA_COMPLETE,    /* verified and published at the site */
  DB_REPLICA_FAILED,
  DB_REPLICA_SUPERSEDED,  /* the source's files are a newer version's */
  DB_REPLICA_STATE_COUNT
};

/* "pending", ...; "unknown" out of range. */
const char *db_replica_state_name(enum db_replica_state s);

struct db_replica {
  char *dataset;
  char *version;
  char *site;
  enum db_replica_state state;
  int64_t bytes_total;
  int64_t bytes_done;
  int64_t bytes_wire;
  int64_t bytes_saved;
  int64_t files_total;
  int64_t files_done;
  char *error;          /* or NULL */
  char *path;           /* the directory at the site once complete */
  int64_t started_ms;   /* 0 until a pull started */
  int64_t finished_ms;  /* 0 until complete or failed */
  int64_t updated_ms;
  int64_t next_try_ms;  /* pending/syncing in a backoff: when the next
                           try goes (wall clock); else 0 */
  char *project;        /* who its transfers are billed to, or NULL for
                           the dataset's own project */
};

void db_replica_release(struct db_replica *r);
/* Insert or replace the whole row (keyed by dataset, version, site).
 * ERR_NOT_FOUND when the version does not exist. */
int db_replica_put(struct db *db, const struct db_replica *r, struct err *e)
    WARN_UNUSED;
/*
 * A source site holds only the version last published from its path:
 * mark its other complete replicas of dataset with that path
 * superseded (not failed: nothing went wrong with them), naming version
 * as what superseded them.
 */
int db_replica_supersede(struct db *db, const char *dataset,
                         const char *site, const char *path,
                         const char *version, int64_t now_ms, struct err *e)
    WARN_UNUSED;
/* ERR_NOT_FOUND when the site has no row for that version. */
int db_replica_get(struct db *db, const char *dataset, const char *version,
                   const char *site, struct db_replica *out, struct err *e)
    WARN_UNUSED;
typedef int (*db_replica_cb)(const struct db_replica *r, void *arg);
/* A dataset's replicas by version and site. */
int db_replica_list(struct db *db, const char *dataset, db_replica_cb cb,
                    void *arg, struct err *e) WARN_UNUSED;
/* Every pending or syncing replica (the stager's work; served by a
 * partial index). */
int db_replica_list_active(struct db *db, db_replica_cb cb, void *arg,
                           struct err *e) WARN_UNUSED;

struct db_transfer {
  int64_t id;           /* assigned by db_transfer_insert */
  char *dataset;
  char *version;
  char *from_site;
  char *to_site;
  int64_t bytes_wire;
  char *state;          /* "running", "complete" or "failed" */
  char *error;          /* or NULL */
  int64_t started_ms;
  int64_t finished_ms;  /* 0 while running */
};

void db_transfer_release(struct db_transfer *t);
/* Insert t (all but id) and set t->id. */
int db_transfer_insert(struct db *db, struct db_transfer *t, struct err *e)
    WARN_UNUSED;
/* Write back bytes_wire, state, error and finished_ms of t->id. */
int db_transfer_update(struct db *db, const struct db_transfer *t,
                       struct err *e) WARN_UNUSED;
/* The newest transfer of version to to_site still "running", or
 * ERR_NOT_FOUND. */
int db_transfer_running(struct db *db, const char *dataset,
                        const char *version, const char *to_site,
                        struct db_transfer *out, struct err *e) WARN_UNUSED;
typedef int (*db_transfer_cb)(const struct db_transfer *t, void *arg);
/* A dataset's transfers, newest first, at most limit of them. */
int db_transfer_list(struct db *db, const char *dataset, int limit,
                     db_transfer_cb cb, void *arg, struct err *e)
    WARN_UNUSED;

/* ---- API tokens (stored as SHA-256 hex, never in clear) ---- */

struct db_token {
  int64_t id;
  char *name;      /* label given at creation, or NULL */
  char *role;      /* "admin", "submitter" or "viewer" */
  char **projects; /* NULL-terminated scope, or NULL for every project */
  int64_t created_ms;
};

void db_token_release(struct db_token *t);
int db_token_insert(struct db *db, const char *hash_hex, const char *name,
                    const char *role, char *const *projects, int64_t now_ms,
                    int64_t *id_out, struct err *e) WARN_UNUSED;
/* Fill out for the token whose hash is hash_hex; ERR_NOT_FOUND if none. */
int db_token_find(struct db *db, const char *hash_hex, struct db_token *out,
                  struct err *e) WARN_UNUSED;
/* Number of tokens stored. */
int db_token_count(struct db *db, int64_t *count, struct err *e)
    WARN_UNUSED;

/* ---- prices (005_prices.sql, 010_provider_prices.sql) ---- */

/* A rate of a site from a time on; a row read is borrowed by the
 * callback it is handed to. */
#define DB_PRICE_WITHDRAWN (-1) /* rate_micro: no price from then on */
/* Who set a price other than the config (db_price.admin 0): */
#define DB_PRICE_ADMIN 1        /* an admin (tenbin prices set) */
#define DB_PRICE_PROVIDER 2     /* the site's price source (010) */
struct db_price {
  const char *site;
  const char *gpu_type;   /* as jobs name it, or "*" (an owned site) */
  const char *kind;       /* "on_demand", "spot", "sunk", "marginal" */
  int64_t valid_from_ms;
  int64_t rate_micro;     /* per GPU-hour, or DB_PRICE_WITHDRAWN */
  /* 0 read from the config, else DB_PRICE_ADMIN or DB_PRICE_PROVIDER.
   * NEEDSWORK: it is a source now, and should be named so. */
  int admin;
};
typedef int (*db_price_cb)(const struct db_price *p, void *arg);

/* Add p (copied).  A second row for the same key and millisecond
 * replaces the first. */
int db_price_insert(struct db *db, const struct db_price *p, struct err *e)
    WARN_UNUSED;
/* The rate of the newest row of (site, gpu_type, kind) the config set
 * into *rate (DB_PRICE_WITHDRAWN included); *found 0 when it never set
 * one. */
int db_price_last_config(struct db *db, const char *site,
                         const char *gpu_type, const char *kind,
                         int64_t *rate, int *found, struct err *e)
    WARN_UNUSED;
/* The row in force at now_ms of every key (its newest row from no later
 * than now_ms), withdrawn ones included, by site, gpu_type and kind.
 * Returns what cb returned to stop, or 0. */
int db_price_current(struct db *db, int64_t now_ms, db_price_cb cb,
                     void *arg, struct err *e) WARN_UNUSED;
/* Every row of (site, gpu_type, kind), oldest first: the periods a hold
 * is billed by. */
int db_price_history(struct db *db, const char *site, const char *gpu_type,
                     const char *kind, db_price_cb cb, void *arg,
                     struct err *e) WARN_UNUSED;

/* ---- the usage ledger and budgets (006_ledger.sql; ledger.c) ---- */

/* A piece of a hold: GPUs a job held over [from_ms, to_ms), priced.
 * Rows read are borrowed by the callback they are handed to. */
#define DB_NO_RATE (-1) /* a rate column with no price in force */
struct db_usage {
  int64_t job_id;
  int64_t hold_ms;        /* when the hold began */
  int64_t from_ms, to_ms;
  int64_t billed_ms;
  int open;               /* the job still runs: the last piece grows */
  const char *day;        /* "YYYY-MM-DD" of from_ms, report zone */
  const char *project;
  const char *site;
  const char *gpu_type;
  int64_t gpus;
  const char *kind;       /* "on_demand", "spot", "owned", "unpriced" */
  int64_t billed_rate, sunk_rate, marginal_rate; /* or DB_NO_RATE */
  int64_t billed_micro, sunk_micro, marginal_micro;
  const char *outcome;    /* final state, "requeued", or NULL */
};
typedef int (*db_usage_cb)(const struct db_usage *u, void *arg);

/* Replace every piece of hold (job_id, hold_ms) with pieces[0..n), in
 * the caller's transaction. */
int db_usage_replace(struct db *db, int64_t job_id, int64_t hold_ms,
                     const struct db_usage *pieces, size_t n, struct err *e)
    WARN_UNUSED;
/* The open pieces of days before before_day ("YYYY-MM-DD"; NULL: all),
 * by job. */
int db_usage_open(struct db *db, const char *before_day, db_usage_cb cb,
                  void *arg, struct err *e) WARN_UNUSED;
/* The pieces of site's holds that end at or after since_ms, by time:
 * the autoscaler's usage history. */
int db_usage_of_site(struct db *db, const char *site, int64_t since_ms,
                     db_usage_cb cb, void *arg, struct err *e) WARN_UNUSED;
/* The pieces of one job, by hold and time. */
int db_usage_of_job(struct db *db, int64_t job_id, db_usage_cb cb,
                    void *arg, struct err *e) WARN_UNUSED;

/* Report grouping: any of these, or none (one line of totals). */
enum {
  DB_BY_PROJECT = 1u << 0,
  DB_BY_SITE = 1u << 1,
  DB_BY_GPU_TYPE = 1u << 2,
  DB_BY_DAY = 1u << 3,
};

/* One line of a report: keys not grouped by are NULL; borrowed. */
struct db_usage_sum {
  const char *project, *site, *gpu_type, *day;
  const char *kind;        /* db_usage_totals only, else NULL */
  int64_t gpu_ms;          /* GPU-milliseconds held */
  int64_t failed_gpu_ms;   /* of them, in jobs that failed, were
                              cancelled or lost */
  int64_t jobs;            /* holds begun in the group: jobs that
                              started holding GPUs then */
  int64_t billed_micro, sunk_micro, marginal_micro;
  int64_t egress_bytes, egress_micro;
};
typedef int (*db_usage_sum_cb)(const struct db_usage_sum *s, void *arg);

/*
 * Sums of the pieces and egress of days [from_day, to_day] ("YYYY-MM-DD"
 * both), grouped by the DB_BY_ bits of by, for the projects in the
 * NULL-terminated list projects (NULL: every project).  Pieces and
 * egress come as separate lines (egress lines have gpu_ms 0, and an
 * empty gpu_type when grouped by it): the caller merges them.  Open
 * pieces count as last written; the caller adds what they accrued since.
 */
int db_usage_report(struct db *db, const char *from_day, const char *to_day,
                    unsigned by, char *const *projects, db_usage_sum_cb cb,
                    void *arg, struct err *e) WARN_UNUSED;

/* The GPU-milliseconds site's holds took over days [from_day, to_day],
 * as written (open pieces as far as they were). */
int db_usage_site_ms(struct db *db, const char *site, const char *from_day,
                     const char *to_day, int64_t *gpu_ms, struct err *e)
    WARN_UNUSED;

/* Totals since the beginning per project, site, GPU type and kind
 * ("egress" for transfers, its charge in billed_micro), as the
 * usage_totals table keeps them; jobs and failed_gpu_ms are 0. */
int db_usage_totals(struct db *db, db_usage_sum_cb cb, void *arg,
                    struct err *e) WARN_UNUSED;

/* A transfer's bytes on the wire, charged to project once. */
struct db_egress {
  int64_t transfer_id;
  int64_t at_ms;
  const char *day;
  const char *project;
  const char *site;       /* the source */
  const char *to_site;
  const char *dataset;
  int64_t bytes;
  int64_t rate_micro;     /* per GB, or DB_NO_RATE */
  int64_t cost_micro;
};
/* Record eg once per transfer (a second call for it changes nothing). */
int db_egress_insert(struct db *db, const struct db_egress *eg,
                     struct err *e) WARN_UNUSED;

/* ---- budgets (006_ledger.sql; ledger.c) ---- */

/* A project's monthly budget; rows read are borrowed by the callback. */
struct db_budget {
  const char *project;
  int64_t monthly_micro;
  int hard;               /* refuse what could exceed it, else warn */
  const char *counts;     /* "rented" or "all" */
  int64_t updated_ms;
  int warned_pct;         /* 0, 80 or 100: the last warning given, */
  const char *warned_month; /* in that month ("YYYY-MM"), or NULL */
};
typedef int (*db_budget_cb)(const struct db_budget *b, void *arg);

/* Insert or replace project's budget; a new limit warns afresh. */
int db_budget_put(struct db *db, const struct db_budget *b, struct err *e)
    WARN_UNUSED;
/* Every budget, by project. */
int db_budget_list(struct db *db, db_budget_cb cb, void *arg,
                   struct err *e) WARN_UNUSED;
/* Record that project was warned at pct of its budget in month. */
int db_budget_warned(struct db *db, const char *project, int pct,
                     const char *month, struct err *e) WARN_UNUSED;

/* ---- run times (ledger.c) ---- */

/* One successful run: its project, workload (else name) and how long it
 * ran; strings borrowed for the callback. */
typedef int (*db_runtime_cb)(const char *project, const char *key,
                             int64_t ms, void *arg);
/* The newest limit successful runs, newest first. */
int db_job_runtimes(struct db *db, int limit, db_runtime_cb cb, void *arg,
                    struct err *e) WARN_UNUSED;

/* A job placed at a site, submitted there or running: it holds GPUs
 * (or will at once); strings borrowed for the callback. */
struct db_holding {
  int64_t id;
  const char *project;
  const char *key;        /* its workload, else its name */
  const char *site;
  int64_t gpus;
  const char *gpu_type;   /* or NULL */
  int64_t started_ms;     /* 0 until it runs */
  const char *time_limit; /* as its spec has it ("4:00:00"), or NULL */
};
typedef int (*db_holding_cb)(const struct db_holding *h, void *arg);
/* Every job that holds GPUs at a site (the placement pass's running
 * ends; served by the jobs_state index). */
int db_job_list_holding(struct db *db, db_holding_cb cb, void *arg,
                        struct err *e) WARN_UNUSED;

/* ---- nodes: the VMs of elastic sites (009_nodes.sql; nodes.c) ---- */

/* A node as stored; rows read are borrowed by the callback. */
struct db_node {
  int64_t id;             /* set by db_node_insert */
  const char *site;
  const char *shape;      /* the site config's shape name */
  const char *zone;
  int spot;
  int attempt;            /* launch attempts made (zone or shape moves) */
  const char *state;      /* launching, booting, ready, terminating, ended */
  const char *vm_id;      /* the provider's id, or NULL until known */
  int64_t gpus;
  const char *gpu_type;   /* or NULL */
  int64_t price_micro;    /* per node-hour, 0 when unpriced */
  int64_t created_ms;     /* committed, before the launch request */
  int64_t launched_ms;    /* the provider took the request; 0 before */
  int64_t registered_ms;  /* its agent's first heartbeat; 0 before */
  int64_t seen_ms;        /* its agent's last heartbeat */
  int64_t ended_ms;       /* 0 while it may still exist */
  const char *reason;     /* why it ended or the last refusal, or NULL */
  int64_t idle_gpus;      /* GPUs no running job holds, */
  int64_t idle_from_ms;   /* since then (billed up to then) */
};
typedef int (*db_node_cb)(const struct db_node *n, void *arg);

/* Insert n (id ignored) and set n->id. */
int db_node_insert(struct db *db, struct db_node *n, struct err *e)
    WARN_UNUSED;
/* Rewrite every field of node n->id but site and created_ms. */
int db_node_update(struct db *db, const struct db_node *n, struct err *e)
    WARN_UNUSED;
/* Set node id's token hash (hex SHA-256). */
int db_node_set_token(struct db *db, int64_t id, const char *hash_hex,
                      struct err *e) WARN_UNUSED;
/* The node whose token hashes to hash_hex, handed to cb; *found says
 * whether there is one. */
int db_node_by_token(struct db *db, const char *hash_hex, db_node_cb cb,
                     void *arg, int *found, struct err *e) WARN_UNUSED;
/* site's nodes by id (every site's when site is NULL): the live ones
 * (ended_ms = 0) and those that ended at or after ended_since_ms
 * (INT64_MAX: the live ones only). */
int db_node_list(struct db *db, const char *site, int64_t ended_since_ms,
                 db_node_cb cb, void *arg, struct err *e) WARN_UNUSED;

/* ---- the autoscaler's decisions (011_autoscaler.sql; nodes.c) ---- */

/* One decision; rows read are borrowed by the callback. */
struct db_scale {
  int64_t id;             /* set by db_scale_add */
  int64_t at_ms;
  const char *site;
  const char *action;     /* "launch", "release", "hold" or "none" */
  const char *reason;     /* burst_reason_name() */
  int64_t launched, released;
  int64_t live_nodes, wanted_nodes;
  int64_t demand_gpus, forecast_gpus; /* forecast -1: none */
  int64_t spend_micro;    /* $ per hour of the wanted nodes */
  const char *detail;     /* the plan's line */
};
typedef int (*db_scale_cb)(const struct db_scale *r, void *arg);

/* Append r and set r->id. */
int db_scale_add(struct db *db, struct db_scale *r, struct err *e)
    WARN_UNUSED;
/* Up to limit decisions, newest first, of site (every site's when NULL),
 * older than before_id (0: from the newest). */
int db_scale_list(struct db *db, const char *site, int64_t before_id,
                  int64_t limit, db_scale_cb cb, void *arg, struct err *e)
    WARN_UNUSED;
/* Forget the decisions made before before_ms. */
int db_scale_prune(struct db *db, int64_t before_ms, struct err *e)
    WARN_UNUSED;

/* ---- the NCCL baseline's probes (012_probes.sql; probes.c) ---- */

/* A probe as stored; rows read are borrowed by the callback. */
struct db_probe {
  int64_t id;             /* set by db_probe_add */
  const char *site;
  int64_t nodes;
  const char *state;      /* "pending", "running", "done" or "failed" */
  const char *why;        /* "manual", "schedule" or "bundle" */
  int64_t job_id;         /* 0 until its job is stored */
  const char *bundle;     /* "NAME@VERSION", or NULL */
  const char *nccl_id;    /* node 0's ncclUniqueId in hex, or NULL */
  int64_t gpus_per_node;  /* as node 0 reported it, 0 until then */
  int64_t created_ms;
  int64_t finished_ms;    /* 0 until done or failed */
  const char *reason;     /* why it failed, or NULL */
};
typedef int (*db_probe_cb)(const struct db_probe *p, void *arg);

/* Store p (every field but id) and set p->id. */
int db_probe_add(struct db *db, struct db_probe *p, struct err *e)
    WARN_UNUSED;
/* Write p's state, job_id, bundle, nccl_id, gpus_per_node, finished_ms
 * and reason. */
int db_probe_update(struct db *db, const struct db_probe *p, struct err *e)
    WARN_UNUSED;
/* cb with probe id, or the probe job job_id runs (*found says). */
int db_probe_get(struct db *db, int64_t id, db_probe_cb cb, void *arg,
                 int *found, struct err *e) WARN_UNUSED;
int db_probe_by_job(struct db *db, int64_t job_id, db_probe_cb cb,
                    void *arg, int *found, struct err *e) WARN_UNUSED;
/* Up to limit probes, newest first, of site and in state (NULL: any). */
int db_probe_list(struct db *db, const char *site, const char *state,
                  int64_t limit, db_probe_cb cb, void *arg, struct err *e)
    WARN_UNUSED;
/* Store (or replace) node_rank's document of probe_id. */
int db_probe_report_put(struct db *db, int64_t probe_id, int64_t node_rank,
                        const char *doc, int64_t at_ms, struct err *e)
    WARN_UNUSED;
/* cb(rank, doc, at_ms, arg) for each report of probe_id, by rank; doc
 * borrowed for the call. */
typedef int (*db_probe_report_cb)(int64_t node_rank, const char *doc,
                                  int64_t at_ms, void *arg);
int db_probe_reports(struct db *db, int64_t probe_id, db_probe_report_cb cb,
                     void *arg, struct err *e) WARN_UNUSED;

#endif
