/*
 * The broker: the imperative shell around the pure policies (DESIGN.md
 * "broker/").  It owns the job state machine, the scheduler tick, dispatch
 * to site adapters, restart recovery, the workload catalog and API tokens.
 *
 * One struct broker per daemon, driven by one libuv loop; nothing here is
 * thread-safe and nothing needs to be.  The REST layer (api/) calls the
 * functions below; the broker never speaks HTTP.  It answers with domain
 * views (struct job_view, site_view, dataset_view, ...), never with db
 * rows or response bodies: api/ renders them.
 *
 * Durability: broker_submit() answers through its callback only after the
 * job is committed.  Submissions that arrive in one loop turn are committed
 * together in one transaction (group commit), so durability costs one
 * fsync per turn, not one per job.
 */
#ifndef TENBIN_BROKER_BROKER_H
#define TENBIN_BROKER_BROKER_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "policies/price.h"
#include "spec/jobspec.h"
#include "util/buf.h"
#include "util/err.h"

struct broker;

struct broker_config {
  const char *state_dir;    /* logs and job directories live here */
  const char *db_path;      /* the SQLite file */
  const char *self_exe;     /* tenbind's executable, for the local shim */
  const char *placement;    /* placement policy name, "first-fit" or
                               "cost"; NULL: cost when a site is priced */
  const json_t *wait_value; /* {"default": D, "PROJECT": V}: dollars a
                               GPU-hour of waiting is worth, or NULL */
  const json_t *sites;      /* array of site objects (borrowed) */
  const json_t *workloads;  /* array of workload objects, or NULL */
  const json_t *projects;   /* array of allowed project names, or NULL for
                               any well-formed name */
  int64_t tick_ms;          /* scheduler period; 0 = 1000 */
  int64_t stage_poll_ms;    /* how often the stager asks the agents how
                               their pulls go; 0 = 500 */
  const char *ca_file;      /* CAs the agents' https certificates are
                               checked against; NULL: the system's */
  int allow_insecure_tokens; /* agent tokens over plain http to hosts
                               other than loopback (http/client.h) */
  const char *time_zone;    /* days of reports and budgets: "UTC" (NULL)
                               or an offset such as "+09:00" */
  const json_t *burst;      /* "policy.burst": the autoscaler's tick and
                               overall spend cap, or NULL */
  const json_t *baseline;   /* the NCCL baseline's block, or NULL */
  /* The site kinds, NULL-terminated, borrowed for the broker's life;
   * NULL: the built-in ones (adapter_find).  Unit tests put a kind of
   * their own in front of the broker here. */
  const struct adapter_ops *const *adapters;
};

/*
 * Open the database, the sites and the catalog, then recover: jobs that
 * were placed, submitted or running are handed to their site's adopt(),
 * which reports their true state.  *out is new: close it with
 * broker_close().  Errors name the config entry ("sites[0].gpus: ...").
 */
int broker_new(uv_loop_t *loop, const struct broker_config *cfg,
               struct broker **out, struct err *e) WARN_UNUSED;
/*
 * Commit what is pending, answer pending submissions, stop the timers,
 * close the sites (their jobs keep running) and the database, free b,
 * then cb(arg) from the loop.
 */
void broker_close(struct broker *b, void (*cb)(void *arg), void *arg);

/*
 * Commit the pending submissions now and answer them, and answer the
 * publishes still waiting for an agent (ERR_UNAVAILABLE).  The daemon
 * calls it at shutdown, before the HTTP server closes, so that no request
 * is answered after it is gone.
 */
void broker_flush(struct broker *b);

/* ---- who is calling ---- */

enum broker_role { ROLE_VIEWER = 0, ROLE_SUBMITTER, ROLE_ADMIN };

/*
 * The caller of an API request.  With auth off every caller is an admin of
 * every project.  projects NULL means every project.
 */
struct principal {
  enum broker_role role;
  int64_t token_id;          /* 0 when auth is off */
  char **projects;           /* NULL-terminated, or NULL for all */
  char name[64];             /* for events: "token 3 (ci)" or "anonymous" */
};

void principal_release(struct principal *p);
/* Whether p may act on project (its scope). */
int principal_has_project(const struct principal *p, const char *project);
const char *broker_role_name(enum broker_role r);
int broker_role_parse(const char *s, enum broker_role *out) WARN_UNUSED;

/*
 * Resolve a bearer token into *p (caller releases it).  ERR_UNAUTHORIZED
 * for an unknown token.
 */
int broker_authenticate(struct broker *b, const char *token,
                        struct principal *p, struct err *e) WARN_UNUSED;
/*
 * Create a token with role and project scope (projects NULL = all) in the
 * broker's database at db_path (broker_config.db_path; tenbind may be
 * running on it) and write the clear token (shown once) into out.  Only
 * its SHA-256 is kept.
 */
int broker_token_create(const char *db_path, enum broker_role role,
                        char *const *projects, const char *name,
                        char *out, size_t outlen, struct err *e) WARN_UNUSED;

/* ---- jobs ---- */

/*
 * A job as callers see it (what GET /v1/jobs/{id} shows, before it is
 * rendered).  Strings are NULL when absent.  A view the caller passes in
 * (broker_job_get and friends) owns its strings: release it with
 * job_view_release().  One handed to a callback is borrowed for the call.
 */
struct job_view {
  int64_t id;
  enum job_state state;
  char *name;
  char *project;
  char *workload;       /* or NULL */
  char *site;           /* or NULL until placed */
  char *reason;         /* why it is in this state (last), or NULL */
  char *remote_id;      /* the site's id for the job, or NULL */
  int64_t gpus;
  char *gpu_type;       /* or NULL */
  char *alloc;          /* GPUs assigned at the site, or NULL */
  int hold;
  int exit_code;        /* -1 until it ends with an exit status */
  int signal;           /* 0, or the signal that ended it */
  char *log_path;       /* the job's stdout file, or NULL */
  int64_t created_ms;
  int64_t updated_ms;
  int64_t started_ms;   /* 0 until running */
  int64_t ended_ms;     /* 0 until final */
  int restarts;         /* placed again after it had started */
  char *spec_json;      /* canonical jobspec_to_json() text, or NULL */
  /* What its holds cost, from the ledger (broker_job_get only; a hold
   * still running up to now): set when has_cost. */
  int has_cost;
  int64_t cost_gpu_ms;
  int64_t billed_micro, sunk_micro, marginal_micro;
  /* At submit (the 201 answer only; has_forecast): how long it should
   * run and on what grounds, and what it should cost and could cost at
   * most (-1: no bound, it has no time limit) as its project's budget
   * counts money; what is left of that budget when has_budget. */
  int has_forecast;
  int64_t runtime_ms;
  const char *runtime_basis;  /* static */
  int64_t expected_micro, upper_micro;
  int has_budget;
  int64_t budget_left_micro;
  /* A queued job's predicted start (get and list), 0 when unknown. */
  int64_t predicted_start_ms;
};

void job_view_init(struct job_view *v);
/* Free the strings (NULL-safe) and re-init. */
void job_view_release(struct job_view *v);

/* A job's last placement decision (tenbin explain); owned strings,
 * release with placement_view_release. */
struct placement_view {
  int64_t at_ms;
  char *verdict;          /* "now", "wait" or "never" */
  char *site;             /* chosen or waited for, or NULL */
  int64_t start_ms;       /* predicted start, 0: unknown */
  char *reason;           /* or NULL */
  char *candidates;       /* JSON array text: every site, its verdict,
                             terms and reason */
};

void placement_view_release(struct placement_view *v);
/* Job id's last decision, for those who may see the job (as
 * broker_job_get); ERR_NOT_FOUND when none was made yet. */
int broker_job_placement(struct broker *b, const struct principal *p,
                         int64_t id, struct placement_view *out,
                         struct err *e) WARN_UNUSED;

/* Which jobs a list wants; strings borrowed for the call. */
struct job_filter {
  const char *state;     /* exact state name, or NULL */
  const char *project;   /* or NULL */
  const char *site;      /* or NULL */
  int64_t before_id;     /* cursor: only ids < before_id; 0 = newest */
  int limit;             /* rows wanted, 1..1000 */
};

/* Called once per job, the view borrowed for the call.  Return non-zero
 * to stop early (that value is returned by the list function). */
typedef int (*job_view_cb)(const struct job_view *j, void *arg);

/* One transition of a job; strings borrowed for the callback. */
struct event_view {
  int64_t id;
  int64_t at_ms;
  const char *from_state; /* NULL for the creation event */
  const char *to_state;
  const char *detail;     /* human text, or NULL */
};

/* As job_view_cb, for events. */
typedef int (*event_view_cb)(const struct event_view *ev, void *arg);

/*
 * Result of a submission, delivered after the commit.  job is borrowed for
 * the call; warnings (borrowed, NULL-terminated, NULL when there are none)
 * lists what the caller should know (uninterpreted #SBATCH directives);
 * replayed is 1 when an earlier job with the same Idempotency-Key is
 * returned.  rc < 0 with e set when the commit failed: nothing was stored.
 */
typedef void (*broker_submit_cb)(void *arg, int rc,
                                 const struct job_view *job,
                                 char *const *warnings, int replayed,
                                 const struct err *e);

/*
 * Validate body (the POST /v1/jobs object, borrowed) for principal p and
 * queue it for the next group commit.  On 0, cb is called exactly once,
 * later, from the loop.  On a negative return (bad input, 403, 422) cb is
 * never called and e says why.  idem_key (may be NULL) makes retries
 * return the first job; body_hash identifies the request for that check.
 */
int broker_submit(struct broker *b, const struct principal *p,
                  const json_t *body, const char *idem_key,
                  const char *body_hash, broker_submit_cb cb, void *arg,
                  struct err *e) WARN_UNUSED;

/* Fill out (initialised; the caller releases it) with job id after
 * checking that p may see it: ERR_NOT_FOUND, as for an unknown id, when
 * it belongs to a project p has no access to. */
int broker_job_get(struct broker *b, const struct principal *p, int64_t id,
                   struct job_view *out, struct err *e) WARN_UNUSED;
/*
 * The directory job j's site serves its logs from on this host (new
 * string, free()), or NULL when its site serves none (unknown, closed, or
 * without logs here).  See adapter_ops.log_dir.
 */
char *broker_job_log_dir(struct broker *b, const struct job_view *j);
/* List jobs for p, newest first (f's project scope is narrowed to p's). */
int broker_job_list(struct broker *b, const struct principal *p,
                    const struct job_filter *f, job_view_cb cb, void *arg,
                    struct err *e) WARN_UNUSED;
/* Events of a job p may see. */
int broker_job_events(struct broker *b, const struct principal *p,
                      int64_t id, event_view_cb cb, void *arg,
                      struct err *e)
    WARN_UNUSED;
/*
 * Cancel: a queued job ends cancelled at once; a placed/submitted/running
 * one is signalled through its site and ends cancelled when the site says
 * so.  A job already cancelled is fine; one that ended otherwise is
 * ERR_BAD_STATE.  out gets the job as it is after the call.
 */
int broker_job_cancel(struct broker *b, const struct principal *p,
                      int64_t id, struct job_view *out, struct err *e)
    WARN_UNUSED;
/* Release a held job so the scheduler may place it. */
int broker_job_release(struct broker *b, const struct principal *p,
                       int64_t id, struct job_view *out, struct err *e)
    WARN_UNUSED;

/* ---- workloads ---- */

/* Validate and store a workload definition (admin only, checked by the
 * caller's role); *created tells 201 from 200. */
int broker_workload_put(struct broker *b, const json_t *def, int *created,
                        struct err *e) WARN_UNUSED;
/*
 * A workload as stored: its definition is the canonical JSON text of the
 * object PUT or configured.  The view owns both strings: release it with
 * workload_view_release().  One handed to a callback is borrowed for the
 * call.
 */
struct workload_view {
  char *name;
  char *definition;     /* JSON object text */
};

void workload_view_init(struct workload_view *v);
/* Free the strings (NULL-safe) and re-init. */
void workload_view_release(struct workload_view *v);

/* Called once per workload, by name; non-zero stops the list. */
typedef int (*workload_view_cb)(const struct workload_view *v, void *arg);

/* Fill out (initialised; the caller releases it) with workload name;
 * ERR_NOT_FOUND naming it. */
int broker_workload_get(struct broker *b, const char *name,
                        struct workload_view *out, struct err *e)
    WARN_UNUSED;
int broker_workload_list(struct broker *b, workload_view_cb cb, void *arg,
                         struct err *e) WARN_UNUSED;

/* ---- datasets (docs/SYNC.md "tenbind REST API") ---- */

/*
 * The views of datasets own every string (and array) they point to:
 * release them with their _release().  One handed to a callback is
 * borrowed for the call.
 */

/* One published version of a dataset. */
struct dataset_version_view {
  char *dataset;
  char *version;        /* 64 hex digits */
  int64_t files;
  int64_t bytes;
  int64_t created_ms;   /* first published */
  int64_t published_ms; /* last published */
};

void dataset_version_view_init(struct dataset_version_view *v);
void dataset_version_view_release(struct dataset_version_view *v);

/* A copy of one version of a dataset at one site. */
struct replica_view {
  char *dataset;
  char *version;
  char *site;
  const char *state;    /* "pending", "syncing", "complete", ... (static) */
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
  int64_t next_try_ms;  /* in a backoff: when the next try goes; else 0 */
};

void replica_view_init(struct replica_view *r);
void replica_view_release(struct replica_view *r);

/* One pull of a version from one site to another. */
struct transfer_view {
  int64_t id;
  char *from_site;
  char *to_site;
  char *version;
  int64_t bytes_wire;
  char *state;          /* "running", "complete" or "failed" */
  char *error;          /* or NULL */
  int64_t started_ms;
  int64_t finished_ms;  /* 0 while running */
};

/*
 * A dataset.  detailed is 1 when it comes from broker_dataset_get():
 * only then are versions (nversions of them, as the store lists them),
 * replicas and the latest transfers filled; otherwise nversions alone
 * counts them.
 */
struct dataset_view {
  char *name;
  char *source_site;
  char *path;           /* relative to the source agent's root */
  char *project;        /* NULL: admins of every project only */
  char *latest;         /* the version published last, or NULL */
  int64_t created_ms;
  int64_t nversions;
  int detailed;
  struct dataset_version_view *versions;
  struct replica_view *replicas;
  size_t nreplicas;
  struct transfer_view *transfers;
  size_t ntransfers;
};

void dataset_view_init(struct dataset_view *d);
void dataset_view_release(struct dataset_view *d);

/* Called once per dataset, view borrowed; non-zero stops the list. */
typedef int (*dataset_view_cb)(const struct dataset_view *d, void *arg);

/*
 * Datasets are scoped like jobs (datasets.c): p sees a dataset of a
 * project in its scope, and one without a project only as an admin of
 * every project; any other is ERR_NOT_FOUND, as an unknown name.
 *
 * Register a dataset from body {"name", "source_site", "path",
 * "project"} (borrowed) and fill *out (initialised; the caller releases
 * it) with its view.
 * ERR_INVALID naming the field for a bad name, path or project (required
 * but from an admin of every project), ERR_UNPROCESSABLE for an unknown
 * site or project or a site without an agent, ERR_CONFLICT when the
 * name exists, ERR_FORBIDDEN below the submitter role, for a project
 * outside p's scope, and for a non-admin's path outside the roots the
 * site's agent.projects allows the project.
 */
int broker_dataset_register(struct broker *b, const struct principal *p,
                            const json_t *body, struct dataset_view *out,
                            struct err *e) WARN_UNUSED;
/* The datasets p sees, by name. */
int broker_dataset_list(struct broker *b, const struct principal *p,
                        dataset_view_cb cb, void *arg, struct err *e)
    WARN_UNUSED;
/* One dataset p sees with its versions, replicas and transfers, in *out
 * (initialised; the caller releases it); ERR_NOT_FOUND naming it. */
int broker_dataset_get(struct broker *b, const struct principal *p,
                       const char *name, struct dataset_view *out,
                       struct err *e) WARN_UNUSED;

/*
 * Result of a publish: version (borrowed for the call) is the version,
 * path (borrowed) where the source agent published it; created is 1 when
 * tenbind did not know that version before.  rc < 0 with e set when it
 * failed (version and path NULL).
 */
typedef void (*broker_publish_cb)(void *arg, int rc, int created,
                                  const struct dataset_version_view *version,
                                  const char *path, const struct err *e);
/*
 * Publish dataset name at its source site's agent now and record the
 * version (and the source site's replica, complete).  On 0, cb is called
 * exactly once, later, from the loop (at the latest from broker_flush(),
 * with ERR_UNAVAILABLE).  On a negative return cb is never called:
 * ERR_NOT_FOUND for an unknown dataset, ERR_UNPROCESSABLE when its site
 * has no agent any more, ERR_FORBIDDEN below the submitter role.  The
 * agent's own refusals come back as ERR_UNPROCESSABLE (or BAD_STATE for
 * a publish already running there), its absence as ERR_UNAVAILABLE.
 */
int broker_dataset_publish(struct broker *b, const struct principal *p,
                           const char *name, broker_publish_cb cb, void *arg,
                           struct err *e) WARN_UNUSED;
/*
 * Ask for a replica from body {"site", "version"} ("latest" or absent:
 * the version published last) and fill *out (initialised; the caller
 * releases it) with it.  A site that has it complete, or is pulling it,
 * keeps its replica; a failed one is tried again.  ERR_NOT_FOUND for an
 * unknown dataset, ERR_UNPROCESSABLE naming the field for an unknown
 * site or version, a site without an agent, or no version published yet.
 */
int broker_dataset_replicate(struct broker *b, const struct principal *p,
                             const char *name, const json_t *body,
                             struct replica_view *out, struct err *e)
    WARN_UNUSED;

/* ---- sites ---- */

/* One GPU type at a site, as its adapter last counted it. */
struct site_gpu_view {
  char *type;           /* "h100"; lowercase */
  int64_t total;        /* GPUs that exist */
  int64_t in_use;       /* assigned to running jobs */
  int64_t idle;         /* up, neither in use nor down (never
                           negative) */
  int64_t down;         /* on drained or down nodes */
  int64_t pending;      /* asked for by jobs in the site's own queue */
  int64_t grow;         /* elastic: of total, not up; starting nodes
                           gives them */
};

/* A rented site's price of one GPU type, micro-dollars per GPU-hour. */
/* What a GB to one named site costs (egress_to_sites_per_gb). */
struct site_egress {
  char site[65];
  int64_t per_gb_micro;
};

struct site_price_view {
  char gpu_type[32];
  int64_t per_gpu_hour_micro;
  int64_t spot_micro;           /* -1: no spot price */
};

/*
 * A site as GET /v1/sites shows it, before it is rendered.  The view owns
 * every string and the gpus array: release it with site_view_release().
 * One handed to a callback is borrowed for the call.
 */
struct site_view {
  char *name;
  char *kind;           /* adapter kind: "local", "slurm" */
  int reachable;        /* the site's own word (its adapter) */
  char *detail;         /* why not, or other news; "" when none */
  int64_t nodes;
  int64_t nodes_down;
  int64_t max_jobs;     /* 0 = no cap */
  struct site_gpu_view *gpus;
  int ngpus;
  int64_t gpus_total;
  int64_t gpus_in_use;
  int64_t gpus_pending;
  /* Jobs here by state.  queued: those the last pass found waiting for
   * this site plus those placed here that it has not started yet; the
   * other slots of jobs[] count by state (JOB_PLACED and JOB_SUBMITTED
   * are in queued). */
  int64_t queued;
  int64_t jobs[JOB_STATE_COUNT];
  char *agent;          /* the site's tenbin-agent URL, or NULL: then the
                           agent_ fields below mean nothing */
  const char *agent_health; /* "unknown", "up" or "down" (static) */
  char *agent_error;    /* why it is down, or NULL */
  int64_t agent_since_ms;   /* wall clock of the last change, 0 = never */
  int64_t agent_checked_ms; /* wall clock of the last word, 0 = never */
  /* Its price model: "owned", "rented" or "unpriced" (static), and for
   * an owned site its rates per GPU-hour (micro-dollars), for a rented
   * one its prices (an owned array), billing minimum and egress. */
  const char *pricing;
  int64_t sunk_micro, marginal_micro;
  /* An owned site's use of its GPUs over the last 30 days (0 to 1, from
   * the ledger) and the sunk cost of a used GPU-hour at that use, when
   * it was used at all (else 0). */
  double utilization;
  int64_t sunk_at_use_micro;
  struct price_owned owned; /* an owned site's finance inputs */
  struct site_price_view *prices;
  int nprices;
  int64_t min_billed_seconds;
  int64_t egress_per_gb_micro;
  struct site_egress *egress_to; /* owned; negress_to of them */
  int negress_to;
};

void site_view_init(struct site_view *v);
/* Free what v holds (NULL-safe) and re-init. */
void site_view_release(struct site_view *v);

/* Called once per site, view borrowed; non-zero stops the walk. */
typedef int (*site_view_cb)(const struct site_view *v, void *arg);

/* Fill out (initialised; the caller releases it) with site name;
 * ERR_NOT_FOUND naming it when there is none. */
int broker_site_get(struct broker *b, const char *name,
                    struct site_view *out, struct err *e) WARN_UNUSED;
/* Every site, in config order.  Returns what cb returned to stop, or 0. */
int broker_site_list(struct broker *b, site_view_cb cb, void *arg);

/* ---- prices ---- */


/* A rate in force, as GET /v1/prices shows it (strings borrowed for the
 * callback). */
struct price_view {
  const char *site;
  const char *gpu_type;   /* as jobs name it, or "*" (an owned site) */
  const char *kind;       /* "on_demand", "spot", "sunk", "marginal" */
  int64_t rate_micro;     /* per GPU-hour */
  int64_t since_ms;       /* wall clock it has held from */
  int admin;              /* set with tenbin prices set */
  const struct price_owned *inputs; /* an owned site's finance inputs the
                                       rate comes from, else NULL */
  int provider;           /* read from the site's provider */
};
typedef int (*price_view_cb)(const struct price_view *v, void *arg);

/* Every rate in force now, by site, GPU type and kind.  Returns what cb
 * returned to stop, 0, or a negative code with e set. */
int broker_price_list(struct broker *b, price_view_cb cb, void *arg,
                      struct err *e) WARN_UNUSED;
/*
 * A rented site's on-demand (and, spot_micro >= 0, spot) price of a GPU
 * type it rents, from now on; history is kept.  Admins only
 * (ERR_FORBIDDEN); ERR_NOT_FOUND for an unknown site, ERR_UNPROCESSABLE
 * for an owned or unpriced one or a type it does not rent, ERR_INVALID
 * naming the field for a malformed type or a price out of range.
 */
int broker_price_set(struct broker *b, const struct principal *p,
                     const char *site, const char *gpu_type,
                     int64_t per_gpu_hour_micro, int64_t spot_micro,
                     struct err *e) WARN_UNUSED;

/* ---- usage reports (reports.c) ---- */

/* What a report is grouped by. */
enum {
  USAGE_BY_PROJECT = 1u << 0,
  USAGE_BY_SITE = 1u << 1,
  USAGE_BY_GPU_TYPE = 1u << 2,
  USAGE_BY_DAY = 1u << 3,
};

/* "project,site,gpu_type,day" (any of them, "gpu-type" too, "" for
 * none) into USAGE_BY_ bits; ERR_INVALID naming field 'by' otherwise. */
int broker_report_by_parse(const char *s, unsigned *by, struct err *e)
    WARN_UNUSED;

/* A report's days, inclusive, "YYYY-MM-DD" in the report zone; NULL:
 * the first of this month, and today. */
struct usage_query {
  const char *from;
  const char *to;
  unsigned by;            /* USAGE_BY_ bits */
  char from_day[11];      /* set by the report: the days it covers */
  char to_day[11];
};

/* One line of a report: sums over the keys it is grouped by (the others
 * NULL); open holds billed up to now.  Borrowed for the callback. */
struct usage_line {
  const char *project, *site, *gpu_type, *day;
  int64_t gpu_ms;          /* GPU-milliseconds held */
  int64_t failed_gpu_ms;   /* of them, in jobs that failed, were
                              cancelled or lost */
  int64_t jobs;            /* distinct jobs that held GPUs */
  int64_t billed_micro;    /* rented sites' bills */
  int64_t sunk_micro;      /* owned sites' sunk cost of the hours */
  int64_t marginal_micro;  /* and their marginal cost */
  int64_t egress_bytes, egress_micro;
};
typedef int (*usage_line_cb)(const struct usage_line *line, void *arg);

/*
 * The ledger's sums over q's days for the projects p may read, one
 * line per group, in key order.  ERR_INVALID naming 'from' or 'to' for
 * a malformed day, ERR_UNPROCESSABLE naming them for a reversed range or
 * one longer than USAGE_REPORT_MAX_DAYS.  Returns what cb returned to
 * stop, 0, or a negative code with e set.
 */
#define USAGE_REPORT_MAX_DAYS 366
int broker_usage_report(struct broker *b, const struct principal *p,
                        struct usage_query *q, usage_line_cb cb,
                        void *arg, struct err *e) WARN_UNUSED;

/* ---- budgets (budgets.c) ---- */

/* The most a monthly budget may be: $100 million. */
#define BUDGET_MAX_MICRO (100000000LL * 1000000)

/* A project's budget this month (strings borrowed for the callback). */
struct budget_view {
  const char *project;
  int64_t monthly_micro;
  int hard;               /* refuses jobs, keeps them off rented sites */
  const char *counts;     /* "rented" or "all" */
  const char *month;      /* "YYYY-MM" in the report zone */
  int64_t spent_micro;    /* this month, jobs still running up to now */
  int64_t left_micro;     /* monthly - spent; negative when over */
  int64_t forecast_micro; /* at the month's pace so far, to its end */
  int warned_pct;         /* 0, 80 or 100: warned this month at */
};
typedef int (*budget_view_cb)(const struct budget_view *v, void *arg);

/*
 * Set project's monthly budget (admins only: ERR_FORBIDDEN): hard or
 * soft, counting "rented" spending (NULL: the default) or "all".
 * ERR_INVALID naming 'project', 'monthly' or 'counts' for a malformed
 * value, ERR_UNPROCESSABLE naming 'project' for one the config does not
 * allow.
 */
int broker_budget_set(struct broker *b, const struct principal *p,
                      const char *project, int64_t monthly_micro, int hard,
                      const char *counts, struct err *e) WARN_UNUSED;
/* The budgets of the projects p may read, by project, or project's only
 * (ERR_NOT_FOUND when it has none).  Returns what cb returned to stop,
 * 0, or a negative code with e set. */
int broker_budget_list(struct broker *b, const struct principal *p,
                       const char *project, budget_view_cb cb, void *arg,
                       struct err *e) WARN_UNUSED;

/* ---- metrics ---- */

/*
 * What /metrics shows of the broker, before it is rendered: every site,
 * in config order (its jobs by state, GPUs by type, its agent), and the
 * jobs at no site by state.  It owns what it holds: release it with
 * metrics_view_release().
 */
/* Money spent since the beginning, by project, site, GPU type and kind
 * ("on_demand", "spot", "sunk", "marginal", "egress"). */
struct cost_total_view {
  char *project, *site, *gpu_type;
  const char *kind;     /* static */
  int64_t micro;
};

struct metrics_view {
  struct site_view *sites;
  size_t nsites;
  int64_t unplaced[JOB_STATE_COUNT];
  struct cost_total_view *costs;
  size_t ncosts;
  struct budget_metric {
    char *project;
    int64_t limit_micro, spent_micro;
    int warned_pct;
  } *budgets;
  size_t nbudgets;
};

void metrics_view_init(struct metrics_view *m);
/* Free what m holds (NULL-safe) and re-init. */
void metrics_view_release(struct metrics_view *m);
/* Fill out (initialised; the caller releases it); fails, with e set,
 * when the jobs cannot be counted. */
int broker_metrics_get(struct broker *b, struct metrics_view *out,
                       struct err *e) WARN_UNUSED;

/* ---- nodes of elastic sites (nodes.c; docs/NODES.md) ---- */

/*
 * A node agent's heartbeat: token is its bearer token, req its body;
 * *answer (new) is what goes back.  ERR_UNAUTHORIZED for a token of no
 * node or of an ended one.
 */
int broker_node_heartbeat(struct broker *b, const char *token,
                          const json_t *req, json_t **answer,
                          struct err *e) WARN_UNUSED;
/* len bytes of job job_id's output at offset, from the node of token;
 * *size is what tenbind holds after (also with ERR_CONFLICT, when offset
 * is not that). */
int broker_node_log(struct broker *b, const char *token, int64_t job_id,
                    int64_t offset, const char *data, size_t len,
                    int64_t *size, struct err *e) WARN_UNUSED;

/* A node as operators see it; strings borrowed for the callback. */
struct node_view {
  int64_t id;
  const char *site, *shape, *zone;
  int spot;
  const char *state;      /* launching, booting, ready, terminating,
                             ended */
  const char *vm_id;      /* or NULL */
  int64_t gpus;
  const char *gpu_type;
  int64_t created_ms, launched_ms, registered_ms, ended_ms;
  int64_t uptime_ms;      /* launched to ended (or now) */
  int64_t cost_micro;     /* its uptime at the site's on-demand rate for
                             its GPUs now; -1 when unpriced */
  const char *reason;     /* or NULL */
};
typedef int (*node_view_cb)(const struct node_view *n, void *arg);
/* site's nodes (every site's when NULL): the live ones and those that
 * ended at or after ended_since_ms, by id. */
int broker_node_list(struct broker *b, const char *site,
                     int64_t ended_since_ms, node_view_cb cb, void *arg,
                     struct err *e) WARN_UNUSED;

/* ---- the autoscaler (autoscaler.c) ---- */

/* An elastic site's autoscaler as of its last plan; strings borrowed
 * until the next tick. */
struct scale_view {
  const char *site;
  const char *action;     /* "launch", "release", "hold", "none" */
  const char *reason;     /* burst_reason_name() */
  const char *detail;     /* the plan's line */
  int64_t at_ms;          /* 0: no plan yet */
  int64_t live, launching, idle, busy, terminating, wanted;
  int64_t demand_gpus, forecast_gpus; /* forecast -1: none */
  int64_t spend_micro, spend_cap_micro; /* $ per hour; cap 0: none */
  int64_t boot_ms;        /* learned, of its first shape */
  double interruptions_per_hour;      /* spot, learned */
  const uint64_t *decisions; /* plans that acted or held, by
                                enum burst_reason (BURST_REASON_COUNT) */
};
/* 1 and *out for a site the autoscaler grows, else 0. */
int broker_scale_view(struct broker *b, const char *site,
                      struct scale_view *out);

/* A logged decision; strings borrowed for the callback. */
struct scale_decision {
  int64_t id, at_ms;
  const char *site, *action, *reason, *detail;
  int64_t launched, released, live_nodes, wanted_nodes;
  int64_t demand_gpus, forecast_gpus, spend_micro;
};
typedef int (*scale_decision_cb)(const struct scale_decision *d, void *arg);
/* Up to limit decisions, newest first, of site (all when NULL), older
 * than before_id (0: the newest).  ERR_NOT_FOUND for no such site. */
int broker_scale_log(struct broker *b, const char *site, int64_t before_id,
                     int64_t limit, scale_decision_cb cb, void *arg,
                     struct err *e) WARN_UNUSED;

/* ---- a new configuration (reload.c) ---- */

/*
 * Apply cfg while running (SIGHUP): each site's cost and job_env, the
 * placement policy and wait values, the workloads, the baseline block.
 * Any other change to a site, and adding or removing one, is ERR_CONFIG
 * naming the field ("... needs a restart").  All or nothing: on an
 * error nothing changed.  *summary (new string, free()) says what the
 * reload applied.  cfg's JSON is borrowed for the call only.
 */
int broker_reload(struct broker *b, const struct broker_config *cfg,
                  char **summary, struct err *e) WARN_UNUSED;

/* ---- the NCCL baseline (baseline.c, docs/BASELINE.md) ---- */

/*
 * Start a probe of site on nodes nodes (admins; the route checks).
 * *out (new) is {"probe": {...}}.  ERR_UNPROCESSABLE without a baseline
 * block, or for more than one node at a site other than slurm;
 * ERR_CONFLICT while a probe of the site still runs.
 */
int broker_baseline_run(struct broker *b, const char *site, int64_t nodes,
                        json_t **out, struct err *e) WARN_UNUSED;
/*
 * site's baseline as GET /v1/sites/{name}/baseline shows it (*out new):
 * its verdict against against (NULL: the reference site), the findings,
 * its newest probe, the result it is judged on, and the diff.
 */
int broker_baseline_view(struct broker *b, const char *site,
                         const char *against, json_t **out, struct err *e)
    WARN_UNUSED;
/* site's verdict in short, for the site view (new): its status, why it
 * is closed to jobs that require the baseline, the probe it rests on;
 * NULL without a baseline block or for no such site. */
json_t *broker_baseline_summary(struct broker *b, const char *site);
/* Where tenbind listens ("http://HOST:PORT"): the probes' way back
 * when the baseline block names no "server".  The daemon tells it once
 * its server is up. */
void broker_baseline_set_url(struct broker *b, const char *url);
/* The baseline's gauges for /metrics, appended to out (nothing when no
 * baseline is configured). */
int broker_baseline_metrics(struct broker *b, struct buf *out) WARN_UNUSED;
/* What a probe's nodes call, each with the probe's token: node 0 puts
 * its NCCL unique id ({"id": hex, "gpus_per_node": n}), the others get
 * it (ERR_NOT_FOUND until then); every node reports its document. */
int broker_probe_nccl_id_put(struct broker *b, const char *token,
                             int64_t id, const json_t *body, struct err *e)
    WARN_UNUSED;
int broker_probe_nccl_id_get(struct broker *b, const char *token,
                             int64_t id, json_t **out, struct err *e)
    WARN_UNUSED;
int broker_probe_report(struct broker *b, const char *token, int64_t id,
                        const char *text, size_t len, struct err *e)
    WARN_UNUSED;

#endif
