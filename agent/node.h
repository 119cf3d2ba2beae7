/*
 * tenbin-agent node mode: the agent on a cloud VM that a VM-pool site
 * (aws, gcp, azure) launched.  The VM has no inbound port, so the agent
 * dials tenbind: it heartbeats, runs the jobs tenbind assigns to it the
 * way the local site does (the real local adapter, in-process, each job
 * under the agent's own executable as its shim), pulls a job's dataset
 * version from its source agent first (the agent library's pull,
 * in-process, into DIR/datasets), streams each job's stdout to tenbind,
 * and reports the provider's spot interruption notice.  docs/NODES.md
 * is the protocol.
 *
 * Lifecycle (libuv style): node_agent_start() -> uv_run ->
 * node_agent_close(cb).  The agent ends by itself when tenbind retires
 * the node (stop) or refuses its token: it then calls cfg->on_exit once,
 * from the loop, with the process exit status, and does nothing more;
 * the caller closes it.
 */
#ifndef TENBIN_AGENT_NODE_H
#define TENBIN_AGENT_NODE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util/err.h"

/* Exit statuses the agent hands to on_exit. */
#define NODE_EXIT_STOPPED 0 /* tenbind retired the node */
#define NODE_EXIT_REFUSED 2 /* tenbind refused the token (401) */

/* Bounds on what tenbind and the metadata service send. */
#define NODE_ANSWER_MAX (1u << 20)  /* a heartbeat answer's body */
#define NODE_MAX_ASSIGN 64          /* assignments in one answer */
#define NODE_MAX_IDS 4096           /* ids in one cancel or ack list */
#define NODE_MAX_JOBS 1024          /* jobs held at once */
#define NODE_LOG_CHUNK (1u << 20)   /* bytes of log in one PUT */
#define NODE_NOTICE_MAX 256         /* an interruption notice, bytes */
#define NODE_HEARTBEAT_MIN_MS 100
#define NODE_HEARTBEAT_MAX_MS 60000
#define NODE_HEARTBEAT_DEFAULT_MS 1000

enum node_provider {
  NODE_PROVIDER_NONE = 0,
  NODE_PROVIDER_AWS,
  NODE_PROVIDER_GCP,
  NODE_PROVIDER_AZURE
};

struct node_agent;

struct node_config {
  const char *server;       /* tenbind's base URL, "https://host:port" */
  const char *token;        /* the node token (bearer) */
  const char *root;         /* DIR: jobs and logs live in DIR/node,
                               pulled dataset versions in DIR/datasets */
  enum node_provider provider;
  const char *metadata_url; /* NULL: the provider's own address */
  const char *site;         /* the site its jobs see as TENBIN_SITE;
                               NULL: "node" */
  const char *gpus;         /* --gpus SPEC: "auto" (NULL), "none",
                               "h100:8" or "h100:4,l4:2" */
  const char *self_exe;     /* the shim executable; NULL: this process's
                               own (/proc/self/exe), which must dispatch
                               "--shim" to adapter_local_shim_main() */
  const char *hostname;     /* NULL: gethostname() */
  const char *agent_version; /* NULL: "unknown" */
  const char *ca_file;      /* CAs tenbind's and the dataset sources'
                               certificates are checked against; NULL:
                               the system's */
  int allow_insecure_tokens; /* the tokens (the node's, the dataset
                                sources') may go over plain http to a
                                host other than loopback */
  unsigned meta_poll_ms;    /* 0: every 2000 ms (tests shorten it) */
  unsigned log_flush_ms;    /* 0: new log bytes go every 500 ms */
  unsigned backoff_ms;      /* 0: the first retry after 500 ms */
  /* Called once when the agent ended by itself (status NODE_EXIT_*);
   * it must still be closed. */
  void (*on_exit)(void *arg, int status);
  void *on_exit_arg;
};

/* "aws", "gcp", "azure" or "none" into *out; ERR_INVALID otherwise. */
int node_provider_parse(const char *s, enum node_provider *out) WARN_UNUSED;
const char *node_provider_name(enum node_provider p);

/*
 * Check cfg (copied: nothing in it is used after this returns), open the
 * local adapter on DIR/node and send the first heartbeat, which
 * registers the node.  *out is new: node_agent_close().  ERR_CONFIG
 * naming what is wrong.
 */
int node_agent_start(uv_loop_t *loop, const struct node_config *cfg,
                     struct node_agent **out, struct err *e) WARN_UNUSED;
/*
 * Stop talking to tenbind and the metadata service and close the local
 * adapter: jobs keep running under their shims.  a is freed once the
 * loop has let go of everything; cb(arg) then (cb may be NULL).
 */
void node_agent_close(struct node_agent *a, void (*cb)(void *arg),
                      void *arg);

/* ---- the parts that read outside input (tests and fuzz targets) ---- */

/* The "gpus" config of the local adapter for a --gpus SPEC (new
 * reference); ERR_CONFIG naming what is wrong. */
int node_gpus_config(const char *spec, json_t **out,
                     struct err *e) WARN_UNUSED;

/* Where an assignment's dataset version is pulled from before the job
 * starts (docs/NODES.md); strings borrowed from the answer. */
struct node_dataset {
  const char *name;    /* NULL: the job names no dataset */
  const char *version; /* 64 lowercase hex digits */
  const char *url;     /* the source agent, http(s) */
  const char *token;   /* its bearer token */
};

struct node_assign {
  int64_t id;
  json_t *spec; /* borrowed from the answer */
  struct node_dataset dataset;
};

/* A heartbeat answer, read and checked. */
struct node_answer {
  json_t *root;              /* owned: what spec points into */
  int64_t heartbeat_ms;      /* clamped to the bounds above */
  struct node_assign *assign; /* owned array */
  size_t nassign;
  int64_t *cancel;           /* owned arrays of positive ids */
  size_t ncancel;
  int64_t *ack;
  size_t nack;
  int stop;
};

/*
 * Read a heartbeat answer body (len bytes).  Keys it does not know are
 * ignored (tenbind may add some); a known key of the wrong type, an id
 * that is not a positive integer, an assignment without an object spec,
 * a dataset whose name, version, url or token is not one, or more
 * entries than the caps is ERR_INVALID naming the field.  *out
 * is filled (release with node_answer_release) only on success.
 */
int node_answer_parse(const char *body, size_t len, struct node_answer *out,
                      struct err *e) WARN_UNUSED;
void node_answer_release(struct node_answer *a);

/* ---- the provider's metadata service (node_meta.c) ---- */

/* What a provider said about the VM's end. */
struct node_interruption {
  enum node_provider provider;
  char notice[NODE_NOTICE_MAX + 1]; /* the provider's words, printable
                                       ASCII */
  int64_t ends_ms;                  /* wall clock; 0 when not said */
};

/*
 * Parsers of the metadata answers.  Each returns 1 and fills *out when
 * the answer announces an interruption, 0 when it does not, and
 * ERR_INVALID for an answer it cannot read.
 *   aws:   the body of GET /latest/meta-data/spot/instance-action (200)
 *   gcp:   the body of GET /computeMetadata/v1/instance/preempted
 *   azure: the body of GET /metadata/scheduledevents; vm_name (may be
 *          NULL or "" when unknown) is this VM's name, and an event
 *          counts when its Resources list is empty or holds vm_name
 */
int node_meta_parse_aws(const char *body, size_t len,
                        struct node_interruption *out) WARN_UNUSED;
int node_meta_parse_gcp(const char *body, size_t len,
                        struct node_interruption *out) WARN_UNUSED;
int node_meta_parse_azure(const char *body, size_t len, const char *vm_name,
                          struct node_interruption *out) WARN_UNUSED;

struct node_meta;

/* Called each time a poll finds an interruption that differs from the
 * last one reported (the first one included). */
typedef void (*node_meta_fn)(void *arg, const struct node_interruption *i);

/*
 * Poll provider's metadata service at base_url (NULL: the provider's
 * address) every poll_ms (0: 2000), one request at a time, reporting to
 * fn(arg, ...) from the loop.  The poller has an HTTP client of its own:
 * the service is plain http on a link-local address, and AWS's session
 * header names say "token", which tenbind's client would refuse to send
 * in clear.  *out is new: node_meta_close().
 */
int node_meta_start(uv_loop_t *loop, enum node_provider provider,
                    const char *base_url, unsigned poll_ms, node_meta_fn fn,
                    void *arg, struct node_meta **out,
                    struct err *e) WARN_UNUSED;
/* Stop polling; m is freed once its request and handles have ended,
 * then cb(arg) (may be NULL). */
void node_meta_close(struct node_meta *m, void (*cb)(void *arg), void *arg);

#endif
