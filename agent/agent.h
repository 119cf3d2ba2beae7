/*
 * tenbin-agent: serves one dataset root to peers and to tenbind.
 *
 * As a source it publishes versions (scans and hashes a directory into a
 * manifest) and answers batches of signatures with deltas; as a
 * destination it pulls versions from a source agent into its store
 * (docs/SYNC.md).  Everything runs on one libuv loop; hashing, librsync
 * and file I/O go to the thread pool.
 *
 * Lifecycle (libuv style): agent_start() -> uv_run -> agent_close(cb).
 */
#ifndef TENBIN_SYNC_AGENT_H
#define TENBIN_SYNC_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "http/router.h"
#include "util/err.h"

struct agent;

struct agent_config {
  const char *root;      /* the dataset root it serves */
  const char *host;      /* numeric address to listen on; NULL: listen
                            nowhere, and pull only through agent_pull()
                            (a cloud node's agent has no inbound port) */
  uint16_t port;         /* 0: any free port (agent_port) */
  const char *token;     /* bearer token peers and tenbind present;
                            required when it listens */
  unsigned parallel;     /* batches in flight per pull; 0: 4 */
  size_t batch_bytes;    /* segment data asked per batch; 0: 8 MiB */
  int fsync_publish;     /* sync a replica's data before publishing it */
  int watch;             /* republish from what inotify saw change
                            (agent/watch.h has what it cannot see) */
  int draft_ms;          /* with watch: draft the next publish once a
                            tree is quiet this long; 0: 250, -1: never */
  const char *tls_cert_file; /* with tls_key_file: serve HTTPS */
  const char *tls_key_file;  /* mode 0600 (util/secret.h) */
  const char *ca_file;   /* CAs that peers' https certificates are checked
                            against; NULL: the system's */
  int allow_insecure_tokens; /* send the token over plain http to peers
                                that are not loopback */
  unsigned max_per_address; /* connections one peer address may hold;
                               0: AGENT_MAX_PER_ADDRESS */
};

/* Open the store, listen and serve.  *out is new: agent_close(). */
int agent_start(uv_loop_t *loop, const struct agent_config *cfg,
                struct agent **out, struct err *e) WARN_UNUSED;
/* The port it listens on; 0 when it listens nowhere. */
uint16_t agent_port(const struct agent *a);
/* The agent's route table (agent/agent-openapi.yaml describes it; a test
 * compares the two).  Routes have no roles: the token is all or
 * nothing. */
extern const struct http_routes agent_routes;
/* How a pull asked for through agent_pull() ended (borrowed for the
 * callback's duration). */
struct agent_pull_end {
  int complete;          /* 1: the version is here, at path */
  const char *path;      /* its absolute directory, or NULL */
  uint64_t bytes_total;  /* the version's bytes, as far as known */
  uint64_t bytes_wire;   /* what crossed the network for this attempt */
  const char *error;     /* why not complete, or NULL */
};

typedef void (*agent_pull_cb)(void *arg, const struct agent_pull_end *end);

/* What agent_pull() is asked; strings are copied. */
struct agent_pull_req {
  const char *name;      /* [A-Za-z0-9][A-Za-z0-9._-]{0,63} */
  const char *version;   /* 64 lowercase hex digits */
  const char *src_url;   /* the source agent, http(s), <= 1024 bytes */
  const char *src_token; /* its token, one line, <= 4096 bytes */
  uint64_t bwlimit;      /* bytes/s, 0: none */
  agent_pull_cb cb;
  void *arg;
};

/* agent_pull()'s answers besides errors. */
#define AGENT_PULL_STARTED 0 /* a new attempt: its bytes are the caller's */
#define AGENT_PULL_HELD 1    /* here already: nothing moves, no callback */
#define AGENT_PULL_JOINED 2  /* an attempt was running: its bytes belong
                                to whoever started it */

/*
 * Pull a version into a's store in-process, exactly as
 * PUT /v1/datasets/{name}/pulls/{v} does for a peer (docs/SYNC.md):
 * AGENT_PULL_HELD fills path (pathlen bytes) with the version's
 * directory; STARTED and JOINED call r->cb(r->arg, end) once, from the
 * loop, never from inside this call (a pull that agent_close() stops
 * ends, not complete, from inside agent_close).  ERR_INVALID naming what
 * is wrong in r; ERR_UNAVAILABLE while the agent closes or a failed
 * attempt still winds down; the pull's own error when it could not even
 * begin.
 */
int agent_pull(struct agent *a, const struct agent_pull_req *r, char *path,
               size_t pathlen, struct err *e) WARN_UNUSED;
/* Stop serving, cancel pulls (their staging stays for a resume), free a
 * once the loop has let go of everything; cb(arg) then.  cb may be NULL. */
void agent_close(struct agent *a, void (*cb)(void *arg), void *arg);

#endif
