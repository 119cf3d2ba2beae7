/*
 * Private to broker/: the struct behind the opaque handle, and the
 * functions the broker's files share (broker__ prefix, libuv's uv__).
 */
#ifndef TENBIN_BROKER_INTERNAL_H
#define TENBIN_BROKER_INTERNAL_H

#include "adapters/adapter.h"
#include "broker/broker.h"
#include "db/db.h"
#include "http/client.h"
#include "policies/burst.h"
#include "policies/placement.h"
#include "policies/price.h"
#include "spec/jobspec.h"
#include "sync/agent_client.h"

#define BROKER_TAG 0x7e9b1d00u

struct broker;

/* What tenbind last saw of a site's agent: the stager asks its /healthz
 * every few rounds, and every answer or silence of a pull counts too. */
enum agent_health { AGENT_UNKNOWN = 0, AGENT_UP, AGENT_DOWN };

struct agent_seen {
  enum agent_health health;
  int64_t since_ms;               /* wall clock of the last change */
  int64_t checked_ms;             /* wall clock of the last word */
  char error[ERR_MSG_SIZE];       /* why it is down, else "" */
  int probing;                    /* a /healthz is in flight */
  uint64_t next_probe;            /* uv_now() of the next one */
};

/* What a GPU-hour of waiting is worth when the config does not say:
 * about half an on-demand H100 hour. */
#define DEFAULT_WAIT_VALUE_MICRO 4000000

/* Longest site name, NUL included. */
#define SITE_NAME_LEN 65

/* A configured site and its open adapter. */
/* A site's price model (prices.c): its config's "cost" block. */
enum site_pricing { SITE_UNPRICED = 0, SITE_OWNED, SITE_RENTED };

struct site_rate {
  char gpu_type[32];              /* lower case, a job's rule */
  int64_t per_gpu_hour_micro;     /* on demand: the config's until the
                                     site's provider gives one */
  int64_t spot_micro;             /* -1: no spot price */
};

struct site_cost {
  enum site_pricing kind;
  struct price_owned owned;       /* SITE_OWNED: the inputs, */
  struct price_owned_rates rates; /* and the rates they give */
  struct site_rate *rented;       /* SITE_RENTED: owned array */
  size_t nrented;
  int64_t min_billed_seconds;
  int64_t egress_per_gb_micro;    /* to the internet: any other site */
  struct site_egress *egress_to;  /* to named sites (another region of
                                     the same cloud), owned array */
  size_t negress_to;
  int64_t refresh_s;              /* rented: "price_refresh_s", -1 when
                                     not given (prices.c's default) */
};

struct site {
  struct broker *broker;          /* back pointer for adapter updates */
  char *name;
  char *kind;
  const struct adapter_ops *ops;
  void *ctx;                      /* the adapter's, NULL once closed */
  int64_t waiting;                /* queued jobs that wait for this site,
                                     as of the last scheduler pass */
  char *agent_url;                /* the site's tenbin-agent, or NULL */
  char *agent_token;
  uint64_t agent_bwlimit;         /* bytes/s for pulls into it, 0: none */
  struct agentc *agent;           /* its client, NULL without an agent */
  json_t *agent_projects;         /* {"project": ["root", ...]}: where
                                     non-admins may register datasets;
                                     owned, NULL for nowhere */
  struct agent_seen agent_seen;
  struct site_cost cost;
  uint64_t prices_due;            /* uv_now() of the next ask of its
                                     provider's prices (prices.c) */
  int prices_asking;              /* an ask is in flight */
  struct scaler *scaler;          /* the autoscaler's state of a site it
                                     grows (autoscaler.c), else NULL */
  char **job_env;                 /* "KEY=VALUE" the site adds to every
                                     job's environment (its "job_env"),
                                     owned strv, may be NULL */
  json_t *config;                 /* its config entry as opened, owned:
                                     what a reload compares with */
};

struct stage;
struct publish_op;

/* A validated submission waiting for the next group commit. */
struct pending_submit {
  struct pending_submit *next;
  struct db_job row;              /* id set by the commit */
  char **warnings;                /* owned strv, may be NULL */
  struct pending_submit *same_as; /* earlier one in this batch with the
                                     same Idempotency-Key, or NULL */
  int replayed;                   /* row is an already stored job */
  char *detail;                   /* text of the creation event */
  broker_submit_cb cb;
  void *cb_arg;
  struct job_view forecast;       /* its forecast fields only */
};

/* The node key's size: 43 random characters and a NUL, room to spare. */
#define NODE_KEY_LEN 64

struct broker {
  unsigned tag;                   /* BROKER_TAG while alive (dogtag) */
  uv_loop_t *loop;
  struct db *db;
  char *state_dir;
  char *self_exe;
  char *instance;                 /* this database's id, in remote tags */
  const struct placement_policy *policy;
  json_t *projects;               /* allow-list, or NULL */
  struct site *sites;
  size_t nsites;

  /* group commit of submissions: filled during the poll phase, committed
   * in the check phase of the same loop turn */
  struct pending_submit *pending;
  struct pending_submit **pending_tail;
  size_t npending;
  uv_check_t flush_check;
  uv_idle_t flush_idle;           /* keeps the poll from blocking while
                                     submissions are pending */

  uv_timer_t tick_timer;          /* periodic scheduler pass */
  uv_timer_t kick_timer;          /* scheduler pass soon, coalesced */
  int64_t tick_ms;
  int kick_pending;

  /* datasets: one http client for every site's agent (NULL when no
   * site has one), the stager's round timer and its work, publishes
   * waiting for their agent */
  struct http_client *agent_http;
  uv_timer_t stage_timer;
  int64_t stage_poll_ms;
  struct stage *stages;
  struct publish_op *publishes;

  /* the ledger: its timer, and the report zone's offset in minutes */
  uv_timer_t ledger_timer;
  /* the next ask of a site's provider prices (prices.c) */
  uv_timer_t prices_timer;
  int tz_offset_min;
  /* budgets by project, as stored, with what each spent (budgets.c) */
  struct budget *budgets;
  size_t nbudgets, budgets_cap;
  /* the cost inputs of the last scheduler pass, owned, or NULL */
  struct pass_cost *last_pass;
  /* what an hour of a GPU waiting is worth, micro-dollars: per project
   * (a JSON object of integers, owned, or NULL) and by default */
  json_t *wait_values;
  int64_t wait_value_micro;
  /* past run times by project and workload or name (runtimes.c) */
  struct runtime_hist *runtimes;
  size_t nruntimes, runtimes_cap;
  /* what node tokens are derived from (nodes.c), a NUL-terminated
   * secret read from STATE/node.key */
  char node_key[NODE_KEY_LEN];

  /* the autoscaler (autoscaler.c): its timer, the overall spend cap in
   * micro-dollars per hour (0: none), its last tick and log pruning */
  uv_timer_t scale_timer;
  int64_t scale_tick_ms;
  int64_t spend_cap_micro;
  int64_t scale_last_ms;
  int64_t scale_pruned_ms;

  /* the NCCL baseline (baseline.c), NULL when none is configured */
  struct broker_baseline *baseline;

  int closing;
  /* Handles and parts closing: one per broker__close_handle and per
   * site or client closed, plus broker_close's own while it runs. */
  int handles_open;
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* ---- jobs.c ---- */

/* Whether the state machine allows from -> to. */
int broker__transition_ok(enum job_state from, enum job_state to);
/*
 * Move j to state to at time at_ms (0 = now; a site may report when the
 * change really happened), write the row and append the event with
 * detail.  Runs inside the caller's transaction.  ERR_BAD_STATE for a
 * move the state machine forbids.
 */
int broker__transition(struct broker *b, struct db_job *j,
                       enum job_state to, const char *detail,
                       int64_t at_ms, struct err *e) WARN_UNUSED;
/* The same in a transaction of its own, so row and event land together. */
int broker__transition_tx(struct broker *b, struct db_job *j,
                          enum job_state to, const char *detail,
                          int64_t at_ms, struct err *e) WARN_UNUSED;
/* Call an adapter entry point (submit, cancel, adopt) for stored job j
 * at site. */
int broker__adapter_call(const struct db_job *j,
                         int (*fn)(void *ctx, const struct adapter_job *aj,
                                   struct err *e),
                         struct site *site, struct err *e) WARN_UNUSED;
/* The site named name, or NULL. */
struct site *broker__site(struct broker *b, const char *name);
/* sites[i].job_env (an object) as "KEY=VALUE" strings pushed onto *out;
 * ERR_CONFIG naming the field. */
int broker__site_job_env(char ***out, const json_t *env, size_t i,
                         struct err *e) WARN_UNUSED;
/* Upsert the config's workloads (at every start and reload: the file is
 * the source of truth for the entries it names; others stay as the API
 * left them); *n counts them.  ERR_CONFIG naming the entry. */
int broker__workloads_load(struct broker *b, const json_t *workloads,
                           size_t *n, struct err *e) WARN_UNUSED;
/* Choose the placement policy (cfg->placement, else cost where a site is
 * priced) and read the wait values into b; ERR_CONFIG naming the
 * field.  Writes b->policy, b->wait_value_micro and b->wait_values. */
int broker__choose_policy(struct broker *b, const struct broker_config *cfg,
                          struct err *e) WARN_UNUSED;
/* Add site's job_env to spec's environment, where the job did not set
 * the variable itself. */
void broker__site_env(const struct site *site, struct job_spec *spec);
/* The database (borrowed), for tests that look at the state directly. */
struct db *broker_db(struct broker *b);
/* Point v's fields at j's (borrowed: v is valid while j is unchanged;
 * never release it). */
void broker__job_view_borrow(struct job_view *v, const struct db_job *j);
/* uv_close h (its data is b), counted: the broker is freed once every
 * handle closed this way has called back.  Only from broker_close. */
void broker__close_handle(struct broker *b, uv_handle_t *h);

/* ---- baseline.c ---- */

/* Read the config's "baseline" block (NULL: none) and every site's
 * result.  The first tick resubmits the probes a stop left
 * unsubmitted. */
int broker__baseline_open(struct broker *b, const json_t *cfg,
                          struct err *e) WARN_UNUSED;
void broker__baseline_free(struct broker *b);
/* Start the probes the schedule or a new bundle version asks for
 * (at most every 10 s; the scheduler calls it after each pass). */
void broker__baseline_tick(struct broker *b);
/* Why site (an index of b->sites) is closed to jobs that require the
 * baseline (borrowed until the next verdict), or NULL when it is not. */
const char *broker__baseline_bars(const struct broker *b, size_t site);
int broker__baseline_configured(const struct broker *b);
/* The URL the probes reach tenbind at, or NULL (borrowed). */
const char *broker__baseline_url(const struct broker *b);
/* Add the probe's token to the environment j is submitted with, when j
 * is a probe's job (it is never stored in the job's spec). */
int broker__baseline_job_env(struct broker *b, const struct db_job *j,
                             struct job_spec *spec, struct err *e)
    WARN_UNUSED;
/* j ended: its probe, if it runs one and not every node reported,
 * failed.  Inside the caller's transaction. */
int broker__baseline_job_ended(struct broker *b, const struct db_job *j,
                               struct err *e) WARN_UNUSED;

/* ---- submit.c ---- */

void broker__submit_init(struct broker *b);
/* Close submit's handles (broker_close). */
void broker__submit_close(struct broker *b);
/* Commit the pending batch and answer it (also used at close). */
void broker__submit_flush(struct broker *b);

/* ---- scheduler.c ---- */

void broker__scheduler_init(struct broker *b);
/* Close the scheduler's timers (broker_close). */
void broker__scheduler_close(struct broker *b);
/* Run a scheduler pass soon (coalesced). */
void broker__kick(struct broker *b);
/* The adapter update callback (arg is the struct site): records the
 * batch in one transaction. */
void broker__on_update(void *arg, const struct adapter_update *u,
                       size_t n);
/* Re-attach to jobs left placed, submitted or running by a previous run. */
int broker__recover(struct broker *b, struct err *e) WARN_UNUSED;
/* Placement request of a spec. */
void broker__placement_request(const struct job_spec *spec,
                               struct placement_request *req);
/* Snapshot of every site for the policy; names borrowed from b, each
 * detail from caps. */
void broker__snapshot(struct broker *b, struct placement_site *out,
                      struct adapter_capacity *caps);

/* ---- nodes.c ---- */

/* A bearer token only this broker can make: prefix then
 * HMAC-SHA256(node key, label id) in hex (node and probe tokens). */
void broker__derive_token(const struct broker *b, const char *label,
                          int64_t id, const char *prefix, char *out,
                          size_t outlen);

/* ---- ledger.c ---- */

void broker__ledger_init(struct broker *b);
void broker__ledger_close(struct broker *b);
/*
 * Rewrite the hold of j that began at hold_ms, through to_ms: closed
 * with outcome (j's final state, or "requeued"), or open (outcome NULL)
 * while j still runs.  Runs inside the caller's transaction.
 */
int broker__ledger_hold(struct broker *b, const struct db_job *j,
                        int64_t hold_ms, int64_t to_ms, const char *outcome,
                        struct err *e) WARN_UNUSED;
/* The project a VM's idle GPUs are billed to: no project's name can
 * hold parentheses, so no project is charged for it by mistake. */
#define BROKER_IDLE_PROJECT "(idle)"
/*
 * Bill gpus of node node_id's VM at site, idle from from_ms to to_ms,
 * as a closed hold of the node (job_id -node_id) at the site's rates for
 * gpu_type.  Runs inside the caller's transaction.
 */
int broker__ledger_idle(struct broker *b, const char *site, int64_t node_id,
                        const char *gpu_type, int64_t gpus, int64_t from_ms,
                        int64_t to_ms, struct err *e) WARN_UNUSED;
/* Rewrite the open holds whose open piece reached midnight, a batch of
 * them (every open hold when all), as their jobs stand at now; in the
 * caller's transaction.  1 when some are left for the next call. */
int broker__ledger_catch_up(struct broker *b, int64_t now, int all,
                            struct err *e) WARN_UNUSED;
/* What open piece u accrued since it was written, up to now (no further
 * than its day's end in zone tz) into add's sums; zero when closed. */
void broker__usage_accrued(const struct db_usage *u, int64_t now, int tz,
                           struct db_usage_sum *add);
/* What v's job's holds cost, up to now, into v's cost fields. */
int broker__job_cost(struct broker *b, struct job_view *v, struct err *e)
    WARN_UNUSED;
/* Money spent since the beginning into m->costs (reports.c). */
int broker__cost_totals(struct broker *b, struct metrics_view *m,
                        struct err *e) WARN_UNUSED;
/* Charge a finished transfer's bytes to project, or when NULL to the
 * project its replica names (else the dataset's), at the source's egress
 * rate, once. */
int broker__egress_bill(struct broker *b, int64_t transfer_id,
                        const char *project, const char *dataset,
                        const char *version, const char *from,
                        const char *to, int64_t bytes, int64_t now,
                        struct err *e) WARN_UNUSED;

/* ---- budgets.c ---- */

struct budget;
/* "$12.34" (cents cut, not rounded) of micro-dollars, for messages. */
/* Set or replace KEY=value in a NULL-terminated "KEY=VALUE" vector
 * (a job's environment). */
void broker__env_set(char ***env, const char *key, const char *value);
/* Load or make STATE/node.key (nodes.c). */
int broker__nodes_open(struct broker *b, struct err *e) WARN_UNUSED;
/* The node store every elastic site's adapter records through; its arg
 * is the struct site. */
extern const struct adapter_node_store broker__node_store;
void broker__fmt_dollars(int64_t micro, char *out, size_t len);
/* Whether the config's project list (if any) has project. */
int broker__project_allowed(struct broker *b, const char *project);
/* Read the budgets from the database (at start and after a change). */
int broker__budgets_load(struct broker *b, struct err *e) WARN_UNUSED;
void broker__budgets_free(struct broker *b);
/* Read every budget's spending again and warn where it crossed 80 % or
 * 100 % (the ledger's timer). */
int broker__budgets_tick(struct broker *b, int64_t now, struct err *e)
    WARN_UNUSED;
/* 1 when project has a hard budget it has spent: its jobs keep off
 * rented sites. */
int broker__budget_blocks_rented(struct broker *b, const char *project);
/* 1 and what is left of project's budget, whether it is hard and counts
 * all spending, when it has one; 0 when it has none. */
int broker__budget_left(struct broker *b, const char *project,
                        int64_t *left, int *hard, int *all, struct err *e)
    WARN_UNUSED;

/* ---- costing.c ---- */

/* The cost policy's inputs over one pass (policies/placement.h). */
#define PASS_MAX_RESERVATIONS 64
struct pass_cost {
  int64_t now;
  struct placement_cost_site sites[PLACEMENT_MAX_SITES];
  struct placement_end *ends;   /* owned; the pools' ends point in */
  struct placement_reservation res[PASS_MAX_RESERVATIONS];
  size_t nres;
};

/* Build pc (zeroed first) from the pass's snapshot and the jobs that
 * hold GPUs.  Release with broker__pass_cost_release. */
int broker__pass_cost_init(struct broker *b,
                           const struct placement_site *snap,
                           const struct adapter_capacity *caps, int64_t now,
                           struct pass_cost *pc, struct err *e) WARN_UNUSED;
void broker__pass_cost_release(struct pass_cost *pc);
/* A job's cost inputs into out (pointing into pc; data, nsites long,
 * is filled when spec names a dataset and data is not NULL). */
int broker__pass_cost_job(struct broker *b, struct pass_cost *pc,
                          const struct job_spec *spec,
                          struct placement_data *data,
                          struct placement_cost *out, struct err *e)
    WARN_UNUSED;
/* Keep pc (owned, from now) as the last pass's, for submissions to be
 * forecast against until the next pass; the one kept before is freed. */
void broker__pass_cost_keep(struct broker *b, struct pass_cost *pc);
/* After a decision d for req: a job that waits adds its GPUs ahead at
 * its pick, and the oldest of its type reserves its start. */
void broker__pass_cost_after(struct pass_cost *pc,
                             const struct placement_request *req,
                             const struct placement_site *snap,
                             const struct placement_decision *d);
/* What an hour of a GPU of project waiting is worth, micro-dollars. */
int64_t broker__wait_value(const struct broker *b, const char *project);

/* ---- runtimes.c ---- */

/* Runs a prediction is the median of, and what is predicted of work
 * never seen without a time limit. */
#define RUNTIME_SAMPLES 16
#define RUNTIME_DEFAULT_MS (3600LL * 1000)

struct runtime_hist;
int broker__runtimes_load(struct broker *b, struct err *e) WARN_UNUSED;
void broker__runtimes_free(struct broker *b);
/* A successful run of key (a workload, else a job name) in project. */
void broker__runtime_add(struct broker *b, const char *project,
                         const char *key, int64_t ms);
/* How long such a job will run, ms, and in *how on what grounds
 * ("median of past runs", "time limit" or "default"; static). */
int64_t broker__runtime_predict(struct broker *b, const char *project,
                                const char *key, int64_t time_limit_s,
                                const char **how);

/* ---- autoscaler.c ---- */

/* Read the config's "policy.burst" (may be NULL) and set up a scaler per
 * site whose adapter has fleet and scale, learning from its past nodes;
 * starts nothing.  ERR_CONFIG naming the field. */
int broker__autoscaler_open(struct broker *b, const json_t *cfg,
                            struct err *e) WARN_UNUSED;
/* Start ticking (a handle: closed by broker__autoscaler_close). */
void broker__autoscaler_start(struct broker *b);
void broker__autoscaler_close(struct broker *b);
/* Free the scalers (sites_free calls it). */
void broker__autoscaler_free(struct broker *b);
/* A scheduler pass begins: forget the last pass's demand. */
void broker__autoscaler_pass_begin(struct broker *b);
/* The pass would send a job of spec, predicted to run runtime_ms, to
 * site (an index) once it grows.  Copies what it keeps of spec: the
 * caller may release spec at once. */
void broker__autoscaler_demand(struct broker *b, int site,
                               const struct job_spec *spec,
                               int64_t runtime_ms);
/* The pass is over: with demand, tick now (at most once a second). */
void broker__autoscaler_pass_end(struct broker *b);
/* 1 when a job of spec may not run on a spot node of site: its
 * deadline would not absorb an interruption and a restart. */
int broker__autoscaler_on_demand(struct broker *b, const struct site *site,
                                 const struct job_spec *spec);
/* 1 and *out, per GPU-hour, when site launches spot nodes of type and
 * has a spot price for it: the price with what interruptions are
 * expected to cost; else 0. */
int broker__autoscaler_spot_rate(struct broker *b, const struct site *site,
                                 const char *type, int64_t *out);
/* The boot delay learned at site (an index), or dflt. */
int64_t broker__autoscaler_grow_ms(struct broker *b, int site, int64_t dflt);

/* ---- datasets.c ---- */

/* Longest dataset name and version id, NUL included. */
#define BROKER_DS_NAME 65
#define BROKER_DS_VERSION 65

/*
 * Split a resolved spec dataset "NAME@VERSION" into name and version;
 * ERR_INVALID when it is not one (a spec stored before resolution).
 */
int broker__dataset_split(const char *ds, char *name, char *version,
                          struct err *e) WARN_UNUSED;
/*
 * Resolve spec->dataset ("NAME", "NAME@latest", "NAME@VERSION") to
 * "NAME@VERSION" in place.  ERR_UNPROCESSABLE naming the field for an
 * unknown dataset or version, a dataset with no version yet, one p may
 * not see (as unknown) and one of a project other than the job's.
 */
int broker__dataset_resolve(struct broker *b, const struct principal *p,
                            struct job_spec *spec, struct err *e)
    WARN_UNUSED;
/*
 * Check a site's "agent": {"projects": {"PROJECT": ["ROOT", ...]}}: each
 * project a known one (allowed is the config's "projects", NULL for any)
 * and each root a relative directory.  ERR_CONFIG naming the field
 * (where is the prefix, e.g. "sites[0].agent.").
 */
int broker__dataset_roots_check(const json_t *projects,
                                const json_t *allowed, const char *where,
                                struct err *e) WARN_UNUSED;
/*
 * Make sure site has, or is getting, version of dataset name: a replica
 * row is created pending when there is none, and a failed one is asked
 * for again when retry_failed; its transfers are billed to project (the
 * job's that wants it; NULL: the dataset's).  out (may be NULL) gets the
 * row as it is then.  ERR_UNPROCESSABLE when the site has no agent to pull with.
 * Writes inside the caller's transaction, if any.
 */
int broker__replica_want(struct broker *b, const char *name,
                         const char *version, const char *site,
                         const char *project, int retry_failed,
                         struct db_replica *out, struct err *e) WARN_UNUSED;
/*
 * For a job j placed at a site: add TENBIN_DATASET_DIR (the replica's
 * directory there) and TENBIN_DATASET (NAME@VERSION) to spec's env when
 * spec names a dataset.  ERR_BAD_STATE when the replica is not complete.
 */
int broker__dataset_env(struct broker *b, const struct db_job *j,
                        struct job_spec *spec, struct err *e) WARN_UNUSED;
/* Where an elastic site's node pulls a job's dataset version from. */
struct dataset_source {
  char name[BROKER_DS_NAME];
  char version[BROKER_DS_VERSION];
  struct adapter_dataset ds;  /* points into the above, and at the source
                                 site's agent URL and token (the
                                 broker's, for its lifetime) */
};
/*
 * For a job going to an elastic site: fill out with where spec's
 * dataset version comes from (the dataset's source site, as the stager
 * pulls from it) and add TENBIN_DATASET (NAME@VERSION) to spec's env;
 * 0 with out->ds.name NULL when spec names none.  ERR_UNPROCESSABLE
 * when the source site has no agent to pull from.
 */
int broker__dataset_source(struct broker *b, struct job_spec *spec,
                           struct dataset_source *out, struct err *e)
    WARN_UNUSED;
/* Answer every publish still waiting for its agent with ERR_UNAVAILABLE
 * (shutdown: their HTTP requests are about to go away). */
void broker__publish_flush(struct broker *b);

/* ---- stager.c ---- */

/* Start the stager's rounds; the first one resumes every pending and
 * syncing replica (a restart re-PUTs their pulls). */
void broker__stager_init(struct broker *b);
/* Close the stager's timer (broker_close). */
void broker__stager_close(struct broker *b);
/* A round soon (a replica was asked for). */
void broker__stager_kick(struct broker *b);
/* Free the stager's state; only once nothing of it is in flight (from
 * broker_finish). */
void broker__stager_free(struct broker *b);
/*
 * Record the pull that a node of elastic site `to` made of version of
 * dataset for a job of project (bytes on the wire; failed or complete)
 * as a transfer from the dataset's source site, and bill its bytes to
 * project as egress (broker__egress_bill), at now, inside the caller's
 * transaction.
 */
int broker__node_pull_record(struct broker *b, const char *project,
                             const char *dataset, const char *version,
                             const char *to, int64_t bytes, int failed,
                             int64_t now, struct err *e) WARN_UNUSED;

/* ---- catalog.c ---- */

/* Validate a workload definition; ERR_INVALID naming the field. */
int broker__workload_validate(const json_t *def, struct err *e) WARN_UNUSED;
/*
 * Expand a submission that names a workload into a plain job body (new
 * reference in *out): the template's job fields, placeholders filled from
 * body.params and the defaults, then body's own fields on top.
 */
int broker__workload_expand(struct broker *b, const json_t *body,
                            json_t **out, struct err *e) WARN_UNUSED;

/* ---- prices.c ---- */
/* The "cost" block of sites[i] into *c (new: broker__site_cost_release);
 * ERR_CONFIG naming the field. */
int broker__site_cost(struct site_cost *c, const json_t *cost, size_t i,
                      struct err *e) WARN_UNUSED;
void broker__site_cost_release(struct site_cost *c);
/* Record the rates the config gives (a new period for each one that
 * changed since the config last gave it; a withdrawn one for each it
 * gave and no longer gives) from now_ms on. */
int broker__prices_sync(struct broker *b, int64_t now_ms, struct err *e)
    WARN_UNUSED;
/* Start asking the providers of the sites that have one for their
 * prices, each every price_refresh_s, the first time now. */
void broker__prices_init(struct broker *b);
/* Close the prices' timer (broker_close). */
void broker__prices_close(struct broker *b);
/*
 * Record the n prices site s's provider gave at now_ms, in one
 * transaction with the ledger's catch-up: a price of a GPU type the
 * config rents becomes a 'provider' period where it changed, overriding
 * the config's price (for the cost policy too), unless an admin's price
 * is in force, which holds.  Malformed prices and types the site does
 * not rent are skipped (logged).
 */
int broker__prices_record(struct broker *b, struct site *s,
                          const struct adapter_price *p, size_t n,
                          int64_t now_ms, struct err *e) WARN_UNUSED;
/* The rented rate of a GPU type (lower case), or NULL. */
/* What a GB from a site of cost c to site to costs, micro-dollars. */
int64_t broker__egress_rate(const struct site_cost *c, const char *to);
const struct site_rate *broker__site_rate(const struct site_cost *c,
                                          const char *gpu_type);

#endif
