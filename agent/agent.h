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
  const char *host;      /* numeric address to listen on */
  uint16_t port;         /* 0: any free port (agent_port) */
  const char *token;     /* bearer token peers and tenbind present */
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
uint16_t agent_port(const struct agent *a);
/* The agent's route table (agent/agent-openapi.yaml describes it; a test
 * compares the two).  Routes have no roles: the token is all or
 * nothing. */
extern const struct http_routes agent_routes;
/* Stop serving, cancel pulls (their staging stays for a resume), free a
 * once the loop has let go of everything; cb(arg) then.  cb may be NULL. */
void agent_close(struct agent *a, void (*cb)(void *arg), void *arg);

#endif
