/*
 * GET /v1/prices and PUT /v1/prices/{site}/{gpu_type}: the rates in
 * force, in integer micro-dollars per GPU-hour, and an admin's change of
 * a rented site's price from now on (the broker keeps the history).
 */
#include <jansson.h>
#include <string.h>

#include "api/api_internal.h"
#include "policies/price.h"
#include "util/jsonx.h"

json_t *
api__owned_inputs_json(const struct price_owned *o)
{
  return json_pack("{s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I}",
                   "capex_per_node", o->capex_per_node, "nodes",
                   (json_int_t)o->nodes, "years", o->years,
                   "support_per_year", o->support_per_year, "power_kw_busy",
                   o->power_kw_busy, "power_kw_idle", o->power_kw_idle,
                   "pue", o->pue, "dollars_per_kwh", o->dollars_per_kwh,
                   "staff_per_year", o->staff_per_year, "gpus_per_node",
                   (json_int_t)o->gpus_per_node);
}

static int
price_cb(const struct price_view *v, void *arg)
{
  json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s}", "site", v->site,
                        "gpu_type", v->gpu_type, "kind", v->kind,
                        "per_gpu_hour_micro", (json_int_t)v->rate_micro,
                        "source",
                        v->admin      ? "admin"
                        : v->provider ? "provider"
                                      : "config");

  jsonx_set_time(o, "since", v->since_ms);
  if (v->inputs != NULL)
    json_object_set_new(o, "inputs", api__owned_inputs_json(v->inputs));
  json_array_append_new(arg, o);
  return 0;
}

void
api__prices_list(struct api_call *call)
{
  json_t *arr = json_array();
  struct err e = {0};

  if (broker_price_list(call->api->broker, price_cb, arr, &e) < 0) {
    json_decref(arr);
    api__reply_err(call, &e);
    return;
  }
  api__reply_json(call, 200, json_pack("{s:o}", "prices", arr));
}

/* body[key], dollars, into micro-dollars; absent: *out = dflt. */
static int
dollars(const json_t *body, const char *key, int64_t dflt, int64_t *out,
        struct err *e)
{
  const json_t *v = json_object_get(body, key);

  *out = dflt;
  if (v == NULL || json_is_null(v))
    return 0;
  if (price_dollars_to_micro(json_number_value(v), PRICE_MAX_MICRO, out) <
      0)
    return err_set(e, ERR_INVALID, "field '%s': must be a number of "
                   "dollars, 0 to 10000", key);
  return 0;
}

void
api__prices_set(struct api_call *call)
{
  static const struct jsonx_field fields[] = {
      {"per_gpu_hour", JX_NUMBER}, {"spot_per_gpu_hour", JX_NUMBER},
      {NULL, 0}};
  json_t *body = NULL;
  struct err e = {0};
  int64_t od, spot;

  if (api__body_json(call, &body, &e) < 0 ||
      jsonx_check(body, fields, "", &e) < 0)
    goto fail;
  if (json_object_get(body, "per_gpu_hour") == NULL ||
      json_is_null(json_object_get(body, "per_gpu_hour"))) {
    err_set(&e, ERR_INVALID, "field 'per_gpu_hour': required (dollars per "
            "GPU-hour, on demand)");
    goto fail;
  }
  if (dollars(body, "per_gpu_hour", 0, &od, &e) < 0 ||
      dollars(body, "spot_per_gpu_hour", -1, &spot, &e) < 0 ||
      broker_price_set(call->api->broker, &call->who, call->params[0],
                       call->params[1], od, spot, &e) < 0)
    goto fail;
  json_decref(body);
  api__prices_list(call);
  return;

fail:
  json_decref(body);
  api__reply_err(call, &e);
}
