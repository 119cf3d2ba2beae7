/*
 * Parsing what a request carries: path ids, query numbers, JSON bodies;
 * and the JSON view of a job.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "util/jsonx.h"

static int
parse_i64(const char *s, int64_t *out)
{
  char *end;
  long long v;

  if (s == NULL || *s == '\0' || *s == '-' || *s == '+' || *s == ' ')
    return ERR_INVALID;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return ERR_INVALID;
  *out = v;
  return 0;
}

int
api__param_id(const struct api_call *call, int i, int64_t *out,
              struct err *e)
{
  if (parse_i64(call->params[i], out) < 0 || *out <= 0)
    return err_set(e, ERR_INVALID, "job id '%.64s' is not a positive "
                   "integer", call->params[i]);
  return 0;
}

int
api__query_int(const struct api_call *call, const char *name, int64_t min,
               int64_t max, int64_t dflt, int64_t *out, struct err *e)
{
  const char *s = http_request_query(call->req, name);

  if (s == NULL) {
    *out = dflt;
    return 0;
  }
  if (parse_i64(s, out) < 0 || *out < min || *out > max)
    return err_set(e, ERR_INVALID, "query parameter '%s': must be an "
                   "integer between %lld and %lld", name, (long long)min,
                   (long long)max);
  return 0;
}

int
api__add_dollars(struct buf *out, int64_t micro)
{
  int64_t m = micro < 0 ? -micro : micro;

  return buf_addf(out, "%s%lld.%06lld", micro < 0 ? "-" : "",
                  (long long)(m / 1000000), (long long)(m % 1000000));
}

int
api__body_json(const struct api_call *call, json_t **out, struct err *e)
{
  return http_request_json(call->req, 0, out, e);
}

/* Largest reply body: a list page of 1000 jobs with big specs. */
#define JOB_TEXT_MAX ((size_t)256 * 1024 * 1024)

int
api__job_text(const struct job_view *j, const json_t *extra, struct buf *out)
{
  json_t *v = json_object();
  int rc;

  json_object_set_new(v, "id", json_integer(j->id));
  jsonx_set_str(v, "name", j->name);
  jsonx_set_str(v, "project", j->project);
  jsonx_set_str(v, "workload", j->workload);
  jsonx_set_str(v, "state", job_state_name(j->state));
  jsonx_set_str(v, "site", j->site);
  jsonx_set_str(v, "reason", j->reason);
  jsonx_set_str(v, "remote_id", j->remote_id);
  json_object_set_new(v, "gpus", json_integer(j->gpus));
  jsonx_set_str(v, "gpu_type", j->gpu_type);
  jsonx_set_str(v, "alloc", j->alloc);
  json_object_set_new(v, "hold", json_boolean(j->hold));
  json_object_set_new(v, "restarts", json_integer(j->restarts));
  json_object_set_new(v, "exit_code", j->exit_code >= 0
                                          ? json_integer(j->exit_code)
                                          : json_null());
  json_object_set_new(v, "signal", j->signal > 0 ? json_integer(j->signal)
                                                 : json_null());
  jsonx_set_str(v, "log_path", j->log_path);
  jsonx_set_time(v, "created_at", j->created_ms);
  jsonx_set_time(v, "updated_at", j->updated_ms);
  jsonx_set_time(v, "started_at", j->started_ms);
  jsonx_set_time(v, "ended_at", j->ended_ms);
  jsonx_set_time(v, "predicted_start", j->predicted_start_ms);
  if (j->has_cost)
    json_object_set_new(
        v, "cost",
        json_pack("{s:I, s:I, s:I, s:I}", "gpu_ms",
                  (json_int_t)j->cost_gpu_ms, "billed_micro",
                  (json_int_t)j->billed_micro, "sunk_micro",
                  (json_int_t)j->sunk_micro, "marginal_micro",
                  (json_int_t)j->marginal_micro));
  if (j->has_forecast) {
    json_t *f = json_pack(
        "{s:I, s:s, s:I, s:o}", "runtime_ms", (json_int_t)j->runtime_ms,
        "runtime_basis", j->runtime_basis, "expected_micro",
        (json_int_t)j->expected_micro, "upper_micro",
        j->upper_micro >= 0 ? json_integer(j->upper_micro) : json_null());

    if (j->has_budget)
      json_object_set_new(f, "budget_left_micro",
                          json_integer(j->budget_left_micro));
    json_object_set_new(v, "forecast", f);
  }
  if (extra != NULL)
    json_object_update(v, (json_t *)extra);
  rc = jsonx_dump_buf(v, out);
  json_decref(v);
  if (rc < 0)
    return rc;
  /* The stored spec is the canonical JSON tenbind wrote itself
   * (jobspec_to_json): splice it in as text rather than parse it and
   * print it again on every read.  out now ends with the object's '}'. */
  out->len--;
  rc = buf_adds(out, ",\"spec\":");
  if (rc == 0)
    rc = buf_adds(out, j->spec_json != NULL && j->spec_json[0] != '\0'
                           ? j->spec_json
                           : "null");
  if (rc == 0)
    rc = buf_add(out, "}", 1);
  return rc;
}

void
api__reply_job(struct api_call *call, int status, const struct job_view *j,
               const json_t *extra)
{
  struct buf b;
  size_t len;
  char *body;

  buf_init(&b, JOB_TEXT_MAX);
  if (api__job_text(j, extra, &b) < 0 || buf_add(&b, "\n", 1) < 0) {
    buf_release(&b);
    api__reply_errf(call, ERR_INTERNAL, "cannot encode job %lld",
                    (long long)j->id);
    return;
  }
  body = buf_take(&b, &len);
  api__reply_body(call, status, "application/json", body, len);
}
