/*
 * Private to api/: the per-request context and the reply helpers every
 * handler uses.
 */
#ifndef TENBIN_API_INTERNAL_H
#define TENBIN_API_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "api/api.h"
#include "util/buf.h"

/* Statuses counted per route for /metrics; anything else counts as the
 * last slot. */
#define API_STATUS_SLOTS 18

struct api {
  struct broker *broker;
  int auth;
  int stopped;                  /* shutting down: answer 503 */
  char *version;
  /* requests by route and status; the extra row is "no route matched" */
  uint64_t (*requests)[API_STATUS_SLOTS];
};

/*
 * One request in flight.  Created by api_handle(), freed by the reply
 * helpers, so a handler that answers later (POST /v1/jobs after the group
 * commit) simply keeps the pointer until then.
 */
struct api_call {
  struct api *api;
  struct http_request *req;
  struct http_match match;      /* match.index: into api_routes, or
                                   api_route_count when none matched */
  char (*params)[HTTP_ROUTE_PARAM_LEN]; /* = match.params: {x} path
                                           segments */
  struct principal who;
};

/* Reply with v as JSON (steals v); frees call. */
void api__reply_json(struct api_call *call, int status, json_t *v);
/* Reply with the error of e (its code's status); frees call. */
void api__reply_err(struct api_call *call, const struct err *e);
/* Reply with code and a formatted message; frees call. */
void api__reply_errf(struct api_call *call, int code, const char *fmt, ...)
    PRINTF_LIKE(3, 4);
/* Reply with a body of type ctype (steals body); frees call. */
void api__reply_body(struct api_call *call, int status, const char *ctype,
                     char *body, size_t len);
/* Reply with len bytes of fd from offset (steals fd); frees call. */
void api__reply_fd(struct api_call *call, int status, const char *ctype,
                   int fd, int64_t offset, size_t len);

/* Parse path param i as a job id; ERR_INVALID naming it otherwise. */
int api__param_id(const struct api_call *call, int i, int64_t *out,
                  struct err *e) WARN_UNUSED;
/* Micro-dollars as dollars with six decimals ("-0.030000"), appended:
 * /metrics and CSV give money exactly. */
int api__add_dollars(struct buf *out, int64_t micro) WARN_UNUSED;
/* Parse a decimal query argument in [min, max]; dflt when absent. */
int api__query_int(const struct api_call *call, const char *name,
                   int64_t min, int64_t max, int64_t dflt, int64_t *out,
                   struct err *e) WARN_UNUSED;
/* Parse the request body as a JSON object (new reference in *out). */
int api__body_json(const struct api_call *call, json_t **out,
                   struct err *e) WARN_UNUSED;

/*
 * Append the job as the API shows it to out.  extra (borrowed, may be
 * NULL) is an object whose members are added (e.g. "warnings").
 */
int api__job_text(const struct job_view *j, const json_t *extra,
                  struct buf *out) WARN_UNUSED;
/* Reply with the job (and extra, borrowed); frees call. */
void api__reply_job(struct api_call *call, int status,
                    const struct job_view *j, const json_t *extra);

/* Handlers, one per route. */
void api__jobs_create(struct api_call *call);
void api__jobs_list(struct api_call *call);
void api__jobs_get(struct api_call *call);
void api__jobs_cancel(struct api_call *call);
void api__jobs_release(struct api_call *call);
void api__jobs_events(struct api_call *call);
void api__jobs_placement(struct api_call *call);
void api__jobs_log(struct api_call *call);
void api__workloads_list(struct api_call *call);
void api__workloads_create(struct api_call *call);
void api__workloads_get(struct api_call *call);
void api__sites_list(struct api_call *call);
void api__sites_get(struct api_call *call);
/* h_prices.c */
/* An owned site's finance inputs as its config gives them (new). */
json_t *api__owned_inputs_json(const struct price_owned *o);
void api__prices_list(struct api_call *call);
void api__prices_set(struct api_call *call);
/* h_reports.c */
/* A CSV field of s (NULL: empty) and its ',' or, when last, "\r\n":
 * quoted when it holds a comma, quote or line break, and behind a ' when
 * a spreadsheet would take it for a formula (= + - @ tab CR first). */
int api__csv_field(struct buf *out, const char *s, int last) WARN_UNUSED;
void api__reports_usage(struct api_call *call);
void api__budgets_list(struct api_call *call);
void api__budgets_get(struct api_call *call);
void api__budgets_set(struct api_call *call);
void api__datasets_create(struct api_call *call);
void api__datasets_list(struct api_call *call);
void api__datasets_get(struct api_call *call);
void api__datasets_publish(struct api_call *call);
void api__datasets_replicate(struct api_call *call);
void api__nodes_heartbeat(struct api_call *call);
void api__nodes_log(struct api_call *call);
/* site's nodes, live and ended in the last day, as a JSON array (new). */
int api__site_nodes(struct api_call *call, const char *site, json_t **out,
                    struct err *e) WARN_UNUSED;
/* The tenbin_nodes family of /metrics, appended to out. */
int api__metrics_nodes(struct broker *b, struct buf *out) WARN_UNUSED;
/* The autoscaler's gauges and counters, for /metrics. */
int api__metrics_autoscaler(struct broker *b, struct buf *out) WARN_UNUSED;
/* The site view's "autoscaler" member (new), or NULL for a site the
 * autoscaler does not grow. */
json_t *api__site_autoscaler(struct broker *b, const char *site);
/* GET /v1/autoscaler/log?site=&limit=&before= */
void api__autoscaler_log(struct api_call *call);
/* h_baseline.c */
void api__baseline_get(struct api_call *call);
void api__baseline_run(struct api_call *call);
void api__probes_nccl_id_put(struct api_call *call);
void api__probes_nccl_id_get(struct api_call *call);
void api__probes_report(struct api_call *call);
/* h_ui.c: the dashboard's files (ui/ui.h) */
void api__ui_redirect(struct api_call *call);
void api__ui_index(struct api_call *call);
void api__ui_file(struct api_call *call);
void api__healthz(struct api_call *call);
void api__metrics(struct api_call *call);

/* Append the HTTP request counters in Prometheus format. */
int api__metrics_http(const struct api *api, struct buf *out) WARN_UNUSED;

#endif
