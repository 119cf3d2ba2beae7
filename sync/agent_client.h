/*
 * tenbind's client of a tenbin-agent (docs/SYNC.md "Agent REST API"):
 * publish a version at a source agent, start or resume a pull at a
 * destination agent, read a pull's status, list the versions an agent
 * holds.
 *
 * Asynchronous on the loop, over a borrowed http/client.h client (one
 * libcurl multi for every agent of the broker).  Each call copies what
 * it needs and calls its callback exactly once, later, from the loop,
 * with the parsed answer or with the agent's error:
 *
 *   rc                       when
 *   0                        a 2xx answer that parsed
 *   ERR_UNAVAILABLE,         no answer: the agent could not be reached,
 *   ERR_TIMEOUT                the connection broke, the attempt timed
 *                              out, or the http client was closed
 *   the code the agent       an error answer {"error":{"code","message"}}
 *     named                    (e.message is the agent's message; a code
 *                              tenbin does not know becomes ERR_SITE)
 *   ERR_SITE                 any other non-2xx answer, or a 2xx answer
 *                              that is not what the contract says
 * e.msg always names the agent's URL for the transport failures and
 * ERR_SITE, so a reason shown to a user says which agent.
 * agentc_transient() tells the answers worth a retry from the others.
 *
 * A callback must not free the struct agentc it came from: requests in
 * flight do not point at it, so freeing it at any time is safe, but the
 * callbacks still run (with ERR_UNAVAILABLE once the http client is
 * closed).
 */
#ifndef TENBIN_SYNC_AGENT_CLIENT_H
#define TENBIN_SYNC_AGENT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "http/client.h"
#include "util/err.h"

/* A version id: 64 lowercase hex digits (SHA-256 of the manifest). */
#define AGENTC_VERSION_HEX 64
/* Longest agent URL and token accepted (also what the agent accepts as
 * a pull's source). */
#define AGENTC_URL_MAX 1024
#define AGENTC_TOKEN_MAX 4096
/* A publish hashes the whole tree on the agent's thread pool before it
 * answers; tens of TB take hours. */
#define AGENTC_PUBLISH_TIMEOUT_MS (12u * 3600u * 1000u)
#define AGENTC_TIMEOUT_MS 30000u
/* A /healthz answers at once; one slower than this is as good as down
 * for telling a user whether data can move. */
#define AGENTC_HEALTH_TIMEOUT_MS 5000u

struct agentc;

/* A version as publish and the version list give it. */
struct agentc_version {
  char version[AGENTC_VERSION_HEX + 1];
  int64_t files;        /* 0 when the agent did not say */
  int64_t dirs;
  int64_t links;
  int64_t bytes;
  const char *path;     /* absolute directory at the agent, or NULL */
  int source;           /* list: 1 for a version published here */
  int existed;          /* publish: 1 when the agent had it already
                           (200 rather than 201) */
};

enum agentc_pull_state {
  AGENTC_PULL_RUNNING = 0,
  AGENTC_PULL_COMPLETE,
  AGENTC_PULL_FAILED
};

/* docs/SYNC.md "Pull status"; a counter the agent left out reads 0. */
struct agentc_pull {
  enum agentc_pull_state state;
  char version[AGENTC_VERSION_HEX + 1];
  const char *path;     /* the replica's directory once complete, or NULL */
  int64_t files_total;
  int64_t files_done;
  int64_t bytes_total;
  int64_t bytes_done;
  int64_t bytes_wire;
  int64_t bytes_saved;
  int64_t bytes_linked;
  int64_t retries;
  const char *error;    /* why it failed, or NULL */
  int http_status;      /* 200 or 202 */
};

/*
 * Results are borrowed for the duration of the call (strings included).
 * On rc < 0 the result is NULL and e says why; e is NULL on success.
 */
typedef void (*agentc_version_cb)(void *arg, int rc,
                                  const struct agentc_version *v,
                                  const struct err *e);
typedef void (*agentc_versions_cb)(void *arg, int rc,
                                   const struct agentc_version *v, size_t n,
                                   const struct err *e);
typedef void (*agentc_pull_cb)(void *arg, int rc,
                               const struct agentc_pull *p,
                               const struct err *e);
typedef void (*agentc_health_cb)(void *arg, int rc, const struct err *e);

/*
 * A client of the agent at url ("http://127.0.0.1:7000", a trailing '/'
 * is dropped) that presents token.  hc is borrowed and must outlive
 * every request sent through the new client; NULL makes a client that
 * only checks url and token (its requests fail with ERR_INTERNAL).
 * ERR_INVALID for a URL
 * that is not http(s) or too long, and for an empty token or one that
 * does not fit one header line.  *out is new: agentc_free().
 */
int agentc_new(struct http_client *hc, const char *url, const char *token,
               struct agentc **out, struct err *e) WARN_UNUSED;
/* NULL-safe; requests in flight still call back. */
void agentc_free(struct agentc *c);
/* The URL (without a trailing '/') and the token, borrowed. */
const char *agentc_url(const struct agentc *c);
const char *agentc_token(const struct agentc *c);

/*
 * POST /v1/datasets/{name}/versions {"path": path}: publish the
 * directory path (relative to the agent's root, or ".").  Fails at once
 * with ERR_INVALID for a name outside [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
 */
int agentc_publish(struct agentc *c, const char *name, const char *path,
                   agentc_version_cb cb, void *arg, struct err *e)
    WARN_UNUSED;
/* GET /v1/datasets/{name}/versions. */
int agentc_versions(struct agentc *c, const char *name,
                    agentc_versions_cb cb, void *arg, struct err *e)
    WARN_UNUSED;
/*
 * PUT /v1/datasets/{name}/pulls/{version} with the source agent's URL and
 * token (and bwlimit bytes/s, 0 for none): start, resume or report the
 * pull.  Idempotent on the agent.  Fails at once with ERR_INVALID for a
 * bad name or a version that is not 64 lowercase hex digits.
 */
int agentc_pull_put(struct agentc *c, const char *name, const char *version,
                    const char *src_url, const char *src_token,
                    uint64_t bwlimit, agentc_pull_cb cb, void *arg,
                    struct err *e) WARN_UNUSED;
/* GET /v1/datasets/{name}/pulls/{version}; ERR_NOT_FOUND when the agent
 * has neither the pull nor the version (e.g. it restarted). */
int agentc_pull_get(struct agentc *c, const char *name, const char *version,
                    agentc_pull_cb cb, void *arg, struct err *e)
    WARN_UNUSED;

/*
 * GET /healthz: rc 0 when the agent answers {"ok": true} within
 * AGENTC_HEALTH_TIMEOUT_MS; else the error, as for the other calls
 * (e.msg names the agent's URL).
 */
int agentc_health(struct agentc *c, agentc_health_cb cb, void *arg,
                  struct err *e) WARN_UNUSED;

/*
 * 1 when a failure with rc may go away by itself (no answer, an answer
 * of status 5xx), so trying again later makes sense; 0 when the agent
 * refused the request itself (4xx) and asking again changes nothing.
 */
int agentc_transient(int rc);

/* 1 for a valid dataset name, 1 for a valid version id. */
int agentc_valid_name(const char *name);
int agentc_valid_version(const char *version);

#endif
