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
api__body_json(const struct api_call *call, json_t **out, struct err *e)
{
  size_t len;
  const char *body = http_request_body(call->req, &len);

  if (len == 0)
    return err_set(e, ERR_INVALID, "request body is empty; a JSON object "
                   "is required");
  return jsonx_parse_object(body, len, out, e);
}

json_t *
api__job_json(const struct db_job *j)
{
  json_t *v = json_object();
  json_t *spec = json_loads(j->spec_json, 0, NULL);

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
  json_object_set_new(v, "spec", spec ? spec : json_null());
  return v;
}
