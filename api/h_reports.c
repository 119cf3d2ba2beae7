/*
 * Spending.  GET /v1/reports/usage: GPU-hours, jobs and money from the usage
 * ledger over a range of days, grouped as asked, as JSON (money in
 * integer micro-dollars) or CSV (dollars, safe to open in a
 * spreadsheet).  A caller sees the lines of the projects its token may
 * read, and nothing else.  GET /v1/budgets[/{project}] and PUT
 * /v1/budgets/{project} (admins): a project's monthly budget and what it
 * spent of it.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api/api_internal.h"
#include "policies/price.h"
#include "util/buf.h"
#include "util/jsonx.h"

/* Largest report body: a year by project, site, type and day. */
#define REPORT_TEXT_MAX ((size_t)256 * 1024 * 1024)

static const char *const by_names[] = {"project", "site", "gpu_type", "day"};

static double
share(int64_t part, int64_t whole)
{
  return whole > 0 ? (double)part / (double)whole : 0.0;
}

static json_t *
line_json(const struct usage_line *l)
{
  json_t *o = json_object();
  const char *keys[4] = {l->project, l->site, l->gpu_type, l->day};

  for (int k = 0; k < 4; k++) {
    if (keys[k] != NULL)
      jsonx_set_str(o, by_names[k], keys[k]);
  }
  json_object_set_new(o, "gpu_hours", json_real((double)l->gpu_ms / 3.6e6));
  json_object_set_new(o, "gpu_ms", json_integer(l->gpu_ms));
  json_object_set_new(o, "jobs", json_integer(l->jobs));
  json_object_set_new(o, "billed_micro", json_integer(l->billed_micro));
  json_object_set_new(o, "sunk_micro", json_integer(l->sunk_micro));
  json_object_set_new(o, "marginal_micro", json_integer(l->marginal_micro));
  json_object_set_new(o, "egress_bytes", json_integer(l->egress_bytes));
  json_object_set_new(o, "egress_micro", json_integer(l->egress_micro));
  json_object_set_new(o, "failed_share",
                      json_real(share(l->failed_gpu_ms, l->gpu_ms)));
  return o;
}

static int
json_line_cb(const struct usage_line *l, void *arg)
{
  json_array_append_new(arg, line_json(l));
  return 0;
}

static int
total_cb(const struct usage_line *l, void *arg)
{
  *(json_t **)arg = line_json(l);
  return 0;
}

/* A CSV field: quoted when it holds a comma, quote or line break, and
 * prefixed with ' when a spreadsheet would take it for a formula. */
int
api__csv_field(struct buf *out, const char *s, int last)
{
  int formula, rc = 0;

  if (s == NULL)
    s = "";
  formula = s[0] != '\0' && strchr("=+-@\t\r", s[0]) != NULL;
  if (formula || strpbrk(s, ",\"\r\n") != NULL) {
    rc = buf_adds(out, formula ? "\"'" : "\"");
    for (const char *p = s; rc == 0 && *p; p++)
      rc = *p == '"' ? buf_adds(out, "\"\"") : buf_add(out, p, 1);
    if (rc == 0)
      rc = buf_adds(out, "\"");
  } else {
    rc = buf_adds(out, s);
  }
  if (rc == 0)
    rc = buf_adds(out, last ? "\r\n" : ",");
  return rc;
}

static int
csv_dollars(struct buf *out, int64_t micro)
{
  int rc = api__add_dollars(out, micro);

  return rc == 0 ? buf_adds(out, ",") : rc;
}

struct csv {
  struct buf *out;
  unsigned by;
};

static int
csv_line_cb(const struct usage_line *l, void *arg)
{
  struct csv *c = arg;
  const char *keys[4] = {l->project, l->site, l->gpu_type, l->day};
  int rc = 0;

  for (int k = 0; rc == 0 && k < 4; k++) {
    if (c->by & (1u << k))
      rc = api__csv_field(c->out, keys[k], 0);
  }
  if (rc == 0)
    rc = buf_addf(c->out, "%.6f,%lld,", (double)l->gpu_ms / 3.6e6,
                  (long long)l->jobs);
  if (rc == 0)
    rc = csv_dollars(c->out, l->billed_micro);
  if (rc == 0)
    rc = csv_dollars(c->out, l->sunk_micro);
  if (rc == 0)
    rc = csv_dollars(c->out, l->marginal_micro);
  if (rc == 0)
    rc = buf_addf(c->out, "%lld,", (long long)l->egress_bytes);
  if (rc == 0)
    rc = csv_dollars(c->out, l->egress_micro);
  if (rc == 0)
    rc = buf_addf(c->out, "%.4f\r\n", share(l->failed_gpu_ms, l->gpu_ms));
  return rc < 0 ? ERR_TOO_LARGE : 0;
}

static void
reply_csv(struct api_call *call, struct usage_query *q)
{
  struct buf out;
  struct csv c = {&out, q->by};
  struct err e = {0};
  int rc = 0;

  buf_init(&out, REPORT_TEXT_MAX);
  for (int k = 0; rc == 0 && k < 4; k++) {
    if (q->by & (1u << k))
      rc = buf_addf(&out, "%s,", by_names[k]);
  }
  if (rc == 0)
    rc = buf_adds(&out, "gpu_hours,jobs,billed_dollars,sunk_dollars,"
                        "marginal_dollars,egress_bytes,egress_dollars,"
                        "failed_share\r\n");
  if (rc < 0)
    rc = err_set(&e, ERR_TOO_LARGE, "report too large");
  if (rc == 0)
    rc = broker_usage_report(call->api->broker, &call->who, q, csv_line_cb,
                             &c, &e);
  if (rc == ERR_TOO_LARGE)
    err_set(&e, rc, "report too large: ask for fewer days or groups");
  if (rc < 0) {
    buf_release(&out);
    api__reply_err(call, &e);
    return;
  }
  {
    size_t len = out.len;
    char *body = buf_take(&out, NULL);

    api__reply_body(call, 200, "text/csv; charset=utf-8", body, len);
  }
}

void
api__reports_usage(struct api_call *call)
{
  struct usage_query q = {.from = http_request_query(call->req, "from"),
                          .to = http_request_query(call->req, "to")};
  const char *by = http_request_query(call->req, "by");
  const char *format = http_request_query(call->req, "format");
  struct usage_query all;
  json_t *lines = NULL, *total = NULL, *by_arr;
  struct err e = {0};

  if (by != NULL && broker_report_by_parse(by, &q.by, &e) < 0)
    goto fail;
  if (format != NULL && strcmp(format, "json") != 0 &&
      strcmp(format, "csv") != 0) {
    err_set(&e, ERR_INVALID, "field 'format': '%.16s' is not json or csv",
            format);
    goto fail;
  }
  if (format != NULL && strcmp(format, "csv") == 0) {
    reply_csv(call, &q);
    return;
  }
  lines = json_array();
  all = q;
  all.by = 0;
  if (broker_usage_report(call->api->broker, &call->who, &q, json_line_cb,
                          lines, &e) < 0 ||
      broker_usage_report(call->api->broker, &call->who, &all, total_cb,
                          &total, &e) < 0)
    goto fail;
  by_arr = json_array();
  for (int k = 0; k < 4; k++) {
    if (q.by & (1u << k))
      json_array_append_new(by_arr, json_string(by_names[k]));
  }
  api__reply_json(call, 200,
                  json_pack("{s:s, s:s, s:o, s:o, s:o}", "from", q.from_day,
                            "to", q.to_day, "by", by_arr, "lines", lines,
                            "total", total != NULL ? total : json_object()));
  return;
fail:
  json_decref(lines);
  json_decref(total);
  api__reply_err(call, &e);
}

/* ---- budgets ---- */

static int
budget_cb(const struct budget_view *v, void *arg)
{
  json_t *o = json_pack(
      "{s:s, s:I, s:b, s:s, s:s, s:I, s:I, s:I, s:i}", "project", v->project,
      "monthly_micro", (json_int_t)v->monthly_micro, "hard", v->hard,
      "counts", v->counts, "month", v->month, "spent_micro",
      (json_int_t)v->spent_micro, "left_micro", (json_int_t)v->left_micro,
      "forecast_micro", (json_int_t)v->forecast_micro, "warned_pct",
      v->warned_pct);

  json_array_append_new(arg, o);
  return 0;
}

static void
reply_budgets(struct api_call *call, const char *project)
{
  json_t *arr = json_array();
  struct err e = {0};

  if (broker_budget_list(call->api->broker, &call->who, project, budget_cb,
                         arr, &e) < 0) {
    json_decref(arr);
    api__reply_err(call, &e);
    return;
  }
  if (project != NULL)
    api__reply_json(call, 200, json_incref(json_array_get(arr, 0)));
  else
    api__reply_json(call, 200, json_pack("{s:o}", "budgets", json_incref(arr)));
  json_decref(arr);
}

void
api__budgets_list(struct api_call *call)
{
  reply_budgets(call, NULL);
}

void
api__budgets_get(struct api_call *call)
{
  reply_budgets(call, call->params[0]);
}

void
api__budgets_set(struct api_call *call)
{
  static const struct jsonx_field fields[] = {
      {"monthly", JX_NUMBER}, {"hard", JX_BOOL}, {"counts", JX_STRING},
      {NULL, 0}};
  const json_t *monthly;
  json_t *body = NULL;
  struct err e = {0};
  int64_t micro;

  if (api__body_json(call, &body, &e) < 0 ||
      jsonx_check(body, fields, "", &e) < 0)
    goto fail;
  monthly = json_object_get(body, "monthly");
  if (monthly == NULL || json_is_null(monthly) ||
      price_dollars_to_micro(json_number_value(monthly), BUDGET_MAX_MICRO,
                             &micro) < 0) {
    err_set(&e, ERR_INVALID, "field 'monthly': required, a number of "
            "dollars from 0 to 100000000");
    goto fail;
  }
  if (broker_budget_set(call->api->broker, &call->who, call->params[0],
                        micro, jsonx_bool(body, "hard", 0),
                        jsonx_str(body, "counts"), &e) < 0)
    goto fail;
  json_decref(body);
  reply_budgets(call, call->params[0]);
  return;
fail:
  json_decref(body);
  api__reply_err(call, &e);
}
