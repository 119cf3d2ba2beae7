/*
 * What agent.c, publish.c and serve.c (the source side) and pull.c (the
 * destination side) share.  Everything here is owned by the loop thread.
 */
#ifndef TENBIN_SYNC_AGENT_INT_H
#define TENBIN_SYNC_AGENT_INT_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "http/client.h"
#include "http/server.h"
#include "agent/agent.h"
#include "sync/manifest.h"
#include "sync/wire.h"
#include "agent/store.h"

#define AGENT_JSON_MAX ((size_t)64 << 10)
#define AGENT_BATCH_MAX ((size_t)64 << 20)   /* request body */
#define AGENT_BATCH_FRAMES 4096u
/* --watch: how long a tree is quiet before its next publish is drafted
 * (publish.c), unless --draft-ms says otherwise. */
#define AGENT_DRAFT_MS 250u
#define AGENT_ANSWER_MAX ((size_t)80 << 20)  /* 64 MiB data + framing */

struct serve_state;
struct publish_state;
struct pull;

struct agent {
  uv_loop_t *loop;
  struct store *store;
  struct http_server *http;    /* NULL when it listens nowhere */
  struct http_client *client;
  int client_closing;          /* http_client_close was called */
  char *token;                 /* NULL when it listens nowhere */
  unsigned parallel;
  size_t batch_bytes;
  int watch;                   /* watch published trees (watch.h) */
  unsigned draft_ms;           /* quiet time before a draft; 0: none */
  struct serve_state *serve;   /* source side caches */
  struct publish_state *publish; /* source side: publishes, drafts */
  struct pull *pulls;          /* destination side, a list */
  unsigned background;         /* signature, prestage and draft jobs */
  uint64_t drafts;             /* drafts of a publish completed */
  struct prestage_work *prestaging;    /* the job running, or NULL */
  struct prestage_work *prestage_next; /* the one to run after it */
  unsigned inflight;           /* work items on the thread pool */
  int closing;
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* Answers (each answers req exactly once). */
void agent_reply_json(struct http_request *req, int status, json_t *v);
void agent_reply_err(struct http_request *req, const struct err *e);
void agent_reply_errf(struct http_request *req, int code, const char *fmt,
                      ...) PRINTF_LIKE(3, 4);
/* The JSON object body of req (new reference), ERR_INVALID otherwise. */
int agent_body_json(struct http_request *req, json_t **out, struct err *e)
    WARN_UNUSED;

/* ---- publish.c: versions published here (the source side) ---- */
void publish_new(struct agent *a);
/* Only once no publish or draft is in flight. */
void publish_free(struct agent *a);
/* POST /v1/datasets/NAME/versions */
void publish_post(struct agent *a, struct http_request *req,
                  const char *name);

/* ---- serve.c: the source side ---- */
void serve_new(struct agent *a);
void serve_free(struct agent *a);
void serve_versions(struct agent *a, struct http_request *req,
                    const char *name);
void serve_manifest(struct agent *a, struct http_request *req,
                    const char *name, const char *v);
void serve_batch(struct agent *a, struct http_request *req,
                 const char *name, const char *v);
/*
 * The frames of a batch request body, checked by every rule that needs
 * no manifest (kinds, payload lengths, a sorted fingerprint table, at
 * most AGENT_BATCH_FRAMES, at least one): *out new (free(); payloads
 * borrowed from body), *n their count.  ERR_INVALID naming the frame.
 * Pure, for the fuzzer too.
 */
int serve_batch_parse(const void *body, size_t len, struct wire_frame **out,
                      size_t *n, struct err *e) WARN_UNUSED;
/* Content bytes answered (DATA and DELTA payloads) since the start. */
uint64_t serve_served_bytes(const struct agent *a);
/* Serve version v of name, published from rel, from m and c (taken,
 * left empty), unless that version is loaded already: the first pull
 * then does not decode what was just encoded. */
void serve_seed(struct agent *a, const char *name, const char *v,
                const char *rel, struct manifest *m,
                struct manifest_checks *c);
/* Forget v of name when loaded and unused: its checks were replaced. */
void serve_forget(struct agent *a, const char *name, const char *v);

/* ---- pull.c: the destination side ---- */
void pull_put(struct agent *a, struct http_request *req, const char *name,
              const char *v);
void pull_get(struct agent *a, struct http_request *req, const char *name,
              const char *v);
/* Stop every pull (staging is kept for a resume) and the prestage job,
 * and answer the requests waiting on the pulls; work already on the pool
 * still finishes. */
void pull_cancel_all(struct agent *a);
/* Free every pull; only once nothing of theirs is in flight. */
void pull_free_all(struct agent *a);
/* Drop a prestage job not started yet (pull_prestage.c), likewise. */
void pull_prestage_free(struct agent *a);

/*
 * Work on the thread pool: agent_queue counts it in, and every done
 * callback ends with agent_work_done(a), after its last use of a, so
 * that agent_close can wait for the pool to let go of everything.
 */
void agent_queue(struct agent *a, uv_work_t *w, uv_work_cb run,
                 uv_after_work_cb done);
void agent_work_done(struct agent *a);


#endif
