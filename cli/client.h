/*
 * The CLI's HTTP client for tenbind: one libcurl easy handle for the
 * whole process, so paging (jobs --all) and log following (logs -f)
 * reuse one keep-alive connection.  Blocking calls; a CLI has nothing
 * else to do meanwhile.
 *
 * A call "succeeds" when any HTTP response arrived; cli_response_check()
 * then turns an error status into the server's own message.  Response
 * bodies are capped at CLI_MAX_RESPONSE (struct buf), so a broken or
 * hostile server cannot make the CLI allocate without bound.
 */
#ifndef TENBIN_CLI_CLIENT_H
#define TENBIN_CLI_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

#define CLI_MAX_RESPONSE ((size_t)64 << 20)

struct cli_client {
  CURL *curl;
  char *server;   /* base URL without a trailing '/' (owned) */
  char *token;    /* bearer token, or NULL (owned) */
  char *ca_file;  /* CA file for https, or NULL: the system's (owned) */
  long timeout_s; /* limit of each whole call; 0: none (init: 120 s) */
  char errbuf[CURL_ERROR_SIZE];
};

struct cli_response {
  long status;        /* HTTP status, 0 before a response */
  struct buf body;    /* capped at CLI_MAX_RESPONSE */
  int replayed;       /* Idempotent-Replayed: true */
  char job_state[32]; /* X-Job-State, "" when absent */
  int64_t log_offset; /* X-Log-Offset, -1 when absent */
  int64_t log_next;   /* X-Log-Next-Offset, -1 when absent */
  int64_t log_size;   /* X-Log-Size, -1 when absent */
};

/*
 * Create the handle (curl_global_init must have run).  server, token and
 * ca_file are copied; token and ca_file may be NULL.  ERR_INVALID for a
 * token that cannot be sent in a header.
 */
int cli_client_init(struct cli_client *c, const char *server,
                    const char *token, const char *ca_file,
                    struct err *e) WARN_UNUSED;
/* Close the handle and free the copies (NULL-safe). */
void cli_client_release(struct cli_client *c);

void cli_response_init(struct cli_response *r);
void cli_response_release(struct cli_response *r);

/*
 * method ("GET"/"POST") path (with its query, escaped) on the server.
 * body (borrowed, may be NULL) is sent as application/json; idem_key
 * (may be NULL) as Idempotency-Key.  r is reset first.  ERR_UNAVAILABLE
 * "cannot reach tenbind at URL: ..." when no response came, ERR_TOO_LARGE
 * when the body passed the cap.
 */
int cli_client_call(struct cli_client *c, const char *method,
                    const char *path, const struct buf *body,
                    const char *idem_key, struct cli_response *r,
                    struct err *e) WARN_UNUSED;
/*
 * 0 for a 2xx status; otherwise an error whose message is the server's
 * error.message (or the body's first line) plus " (HTTP N)".
 */
int cli_response_check(const struct cli_response *r, struct err *e)
    WARN_UNUSED;
/* r's body as a JSON object (new reference), ERR_INVALID if it is not. */
int cli_response_json(const struct cli_response *r, json_t **out,
                      struct err *e) WARN_UNUSED;

#endif
