/*
 * tenbind's configuration: one JSON file (or the embedded default) with
 * listen, auth, tls, http, sites, workloads, policy, projects and
 * log_level.
 *
 * Loading checks the top level strictly (unknown or mistyped fields are
 * errors naming the file and the field); sites and workloads are checked
 * in depth by the broker and the adapters when they open them.
 */
#ifndef TENBIN_DAEMON_CONFIG_H
#define TENBIN_DAEMON_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "util/err.h"
#include "util/jsonx.h"
#include "util/log.h"

#define CONFIG_DEFAULT_LISTEN "127.0.0.1:8750"

struct daemon_config {
  char host[64];               /* numeric address to bind */
  uint16_t port;
  int auth;                    /* 1 when tokens are required */
  const char *placement;       /* borrowed from root */
  const json_t *wait_value;    /* borrowed from root, may be NULL */
  const json_t *burst;         /* "policy.burst", borrowed, may be NULL */
  const json_t *baseline;      /* the NCCL baseline, borrowed, may be NULL */
  const char *time_zone;       /* borrowed from root, may be NULL */
  const json_t *sites;         /* borrowed from root */
  const json_t *workloads;     /* borrowed from root, may be NULL */
  const json_t *projects;      /* borrowed from root, may be NULL */
  enum log_level log_level;
  int64_t tick_ms;
  const char *tls_cert_file;   /* tls.cert_file: serve HTTPS (borrowed) */
  const char *tls_key_file;    /* tls.key_file, mode 0600 (borrowed) */
  const char *ca_file;         /* tls.ca_file: CAs for the agents */
  int allow_insecure_tokens;   /* tls.allow_insecure_tokens */
  int64_t max_connections;     /* http.max_connections */
  int64_t max_per_address;     /* http.max_connections_per_address */
  int64_t header_timeout_s;    /* http.header_timeout_s */
  int64_t min_body_rate;       /* http.min_body_rate (bytes/s) */
  json_t *root;                /* owned: the whole document */
};

/* The field tables config_load checks the top level, "tls", "http",
 * "auth" and "policy" with; the configuration reference lists them
 * (daemon/config_fields.h). */
extern const struct jsonx_field config_top_fields[];
extern const struct jsonx_field config_tls_fields[];
extern const struct jsonx_field config_http_fields[];
extern const struct jsonx_field config_auth_fields[];
extern const struct jsonx_field config_policy_fields[];

/* The embedded default configuration (one local site). */
extern const char config_default_json[];

/*
 * Load path (NULL = the embedded default) into cfg (new contents: release
 * with config_release).  listen_override (may be NULL) replaces the
 * file's "listen".  Errors read "FILE: field 'x': reason".
 */
int config_load(const char *path, const char *listen_override,
                struct daemon_config *cfg, struct err *e) WARN_UNUSED;
void config_release(struct daemon_config *cfg);

/*
 * The first top-level field whose change needs a restart ("listen",
 * "auth.enabled", "tls", "http", "tick_ms", "time_zone", "projects",
 * "policy.burst"), or NULL when now differs from was only in what a
 * reload applies (broker_reload) and in log_level.
 */
const char *config_restart_field(const struct daemon_config *was,
                                 const struct daemon_config *now);

/* Split "ADDR:PORT" or "[V6]:PORT" into host and port. */
int config_parse_listen(const char *s, char *host, size_t hostlen,
                        uint16_t *port, struct err *e) WARN_UNUSED;
/* Whether host is a loopback address (127.0.0.0/8 or ::1). */
int config_is_loopback(const char *host);

#endif
