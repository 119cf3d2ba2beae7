/*
 * The site commands: 'sites' lists every site with its reachability,
 * its agent's state, GPU use per type and job counts; 'site show NAME'
 * prints one.  A site's own state (its adapter) and its agent's are
 * apart: jobs run at a site whose agent is down, but no data moves.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/format.h"
#include "cli/table.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

static const char sites_usage[] =
    "usage: tenbin sites\n\nList sites, their GPUs (in use/total) and "
    "jobs.\n";
static const char site_usage[] =
    "usage: tenbin site show NAME\n\nShow one site.\n";

static const char *
reach(const json_t *site)
{
  return jsonx_bool(site, "reachable", 0) ? "reachable" : "unreachable";
}

/* The AGENT cell: "up", "down", "unknown" (not asked yet), "-" none. */
static const char *
agent_word(const json_t *site)
{
  const char *s = jsonx_str(json_object_get(site, "agent_state"), "state");

  return s != NULL ? s : "-";
}

/* "down since 2026-01-02 03:04:05 (5m ago): agent http://...:
 * connection refused", "up since ...", or NULL without an agent. */
static void
agent_text(const json_t *site, char *out, size_t outlen)
{
  const json_t *a = json_object_get(site, "agent_state");
  char at[CLI_FMT_TIME_SIZE];
  const char *since = cli_fmt_iso_ago(jsonx_str(a, "since"), time_now_ms(),
                                      at, sizeof(at));
  const char *error = jsonx_str(a, "error");

  snprintf(out, outlen, "%s%s%s%s%s", agent_word(site),
           since != NULL ? " since " : "", since != NULL ? since : "",
           error != NULL ? ": " : "", error != NULL ? error : "");
}

static void
nodes_text(const json_t *site, char *out, size_t outlen)
{
  json_int_t nodes = json_integer_value(json_object_get(site, "nodes"));
  json_int_t down = json_integer_value(json_object_get(site, "nodes_down"));

  if (down > 0)
    snprintf(out, outlen, "%lld (%lld down)", (long long)nodes,
             (long long)down);
  else
    snprintf(out, outlen, "%lld", (long long)nodes);
}

static void
count(const json_t *site, const char *key, char *out, size_t outlen)
{
  const json_t *v = json_object_get(json_object_get(site, "jobs"), key);

  snprintf(out, outlen, "%lld", (long long)json_integer_value(v));
}

int
cli_cmd_sites(struct cli *cli, int argc, char **argv)
{
  static const char *const head[] = {"NAME",   "KIND",   "STATE",
                                     "AGENT",  "NODES",  "GPUS",
                                     "QUEUED", "RUNNING"};
  struct cli_response r;
  struct cli_table t;
  struct err e = {0};
  json_t *reply = NULL;
  json_t *site;
  size_t i;
  int first;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_args_positional(argc, argv, 0, 0, &first, &e),
                  sites_usage, &e, &status))
    return status;
  cli_response_init(&r);
  cli_table_init(&t, head, 8);
  cli_table_set_max(&t, 0, 24);
  cli_table_set_right(&t, 6);
  cli_table_set_right(&t, 7);
  if (cli_request(cli, "GET", "/v1/sites", NULL, &r, &reply, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  if (cli->json) {
    cli_print_raw(&r);
    goto out;
  }
  json_array_foreach(json_object_get(reply, "sites"), i, site) {
    char queued[32];
    char running[32];
    char nodes[64];
    struct buf gpus;
    const char *row[8];

    buf_init(&gpus, CLI_MAX_RESPONSE);
    count(site, "queued", queued, sizeof(queued));
    count(site, "running", running, sizeof(running));
    nodes_text(site, nodes, sizeof(nodes));
    row[0] = jsonx_str(site, "name");
    row[1] = jsonx_str(site, "kind");
    row[2] = reach(site);
    row[3] = agent_word(site);
    row[4] = nodes;
    row[5] = cli_fmt_site_gpus(json_object_get(site, "gpus"), &gpus) == 0
                 ? buf_str(&gpus)
                 : "?";
    row[6] = queued;
    row[7] = running;
    cli_table_add(&t, row);
    buf_release(&gpus);
  }
  if (cli_table_print(&t, stdout) < 0)
    status = CLI_EXIT_FAIL;
out:
  json_decref(reply);
  cli_table_release(&t);
  cli_response_release(&r);
  return status;
}

/* Micro-dollars as "$1.905817". */
static void
money(long long micro, char *out, size_t outlen)
{
  out[0] = '$';
  cli_fmt_micro_dollars(micro, out + 1, outlen - 1);
}

static long long
int_of(const json_t *obj, const char *key)
{
  return (long long)json_integer_value(json_object_get(obj, key));
}

/* An owned site's finance inputs in a line, or NULL without them. */
static const char *
inputs_text(const json_t *in, char *out, size_t len)
{
  if (!json_is_object(in))
    return NULL;
  snprintf(out, len, "%lld nodes of %lld GPUs at $%.0f over %g years, "
           "support %g %% a year, %g/%g kW busy/idle, PUE %g at $%g/kWh, "
           "staff $%.0f a year",
           (long long)json_integer_value(json_object_get(in, "nodes")),
           (long long)json_integer_value(json_object_get(in, "gpus_per_node")),
           json_number_value(json_object_get(in, "capex_per_node")),
           json_number_value(json_object_get(in, "years")),
           100 * json_number_value(json_object_get(in, "support_per_year")),
           json_number_value(json_object_get(in, "power_kw_busy")),
           json_number_value(json_object_get(in, "power_kw_idle")),
           json_number_value(json_object_get(in, "pue")),
           json_number_value(json_object_get(in, "dollars_per_kwh")),
           json_number_value(json_object_get(in, "staff_per_year")));
  return out;
}

/* "owned: $1.905817 sunk, $0.078750 marginal per GPU-hour", "rented:
 * h100 $6.880000 (spot $3.100000) per GPU-hour, ...", or "unpriced". */
static int
prices_text(const json_t *cost, struct buf *out)
{
  const char *pricing = jsonx_str(cost, "pricing");
  const json_t *od = json_object_get(cost, "per_gpu_hour_micro");
  const json_t *spot = json_object_get(cost, "spot_per_gpu_hour_micro");
  char a[40], b[40];
  const char *type;
  json_t *v;
  int rc = 0, first = 1;

  if (pricing == NULL)
    return buf_adds(out, "?");
  if (strcmp(pricing, "owned") == 0) {
    char c[40];

    money(int_of(cost, "sunk_per_gpu_hour_micro"), a, sizeof(a));
    money(int_of(cost, "marginal_per_gpu_hour_micro"), b, sizeof(b));
    rc = buf_addf(out, "owned: %s sunk, %s marginal per GPU-hour", a, b);
    if (rc == 0 && json_object_get(cost, "sunk_at_utilization_micro")) {
      money(int_of(cost, "sunk_at_utilization_micro"), c, sizeof(c));
      rc = buf_addf(out, "; sunk %s per used GPU-hour at the %.1f %% used "
                    "over 30 days", c,
                    100 * json_number_value(
                              json_object_get(cost, "utilization_30d")));
    }
    return rc;
  }
  if (strcmp(pricing, "rented") != 0)
    return buf_adds(out, pricing);
  rc = buf_adds(out, "rented:");
  json_object_foreach((json_t *)od, type, v) {
    const json_t *s = json_object_get(spot, type);

    money((long long)json_integer_value(v), a, sizeof(a));
    if (rc == 0)
      rc = buf_addf(out, "%s %s %s", first ? "" : ",", type, a);
    if (rc == 0 && s != NULL) {
      money((long long)json_integer_value(s), b, sizeof(b));
      rc = buf_addf(out, " (spot %s)", b);
    }
    first = 0;
  }
  money(int_of(cost, "egress_per_gb_micro"), a, sizeof(a));
  if (rc == 0)
    rc = buf_addf(out, " per GPU-hour; at least %lld s billed; egress "
                  "%s/GB", int_of(cost, "min_billed_seconds"), a);
  json_object_foreach(json_object_get(cost, "egress_to_sites_per_gb_micro"),
                      type, v) {
    money((long long)json_integer_value(v), a, sizeof(a));
    if (rc == 0)
      rc = buf_addf(out, ", %s/GB to %s", a, type);
  }
  return rc;
}

/* An elastic site's nodes: what each VM is doing, where, since when. */
static int
show_nodes(const json_t *nodes)
{
  static const char *const head[] = {"NODE",   "STATE", "SHAPE",
                                     "ZONE",   "MARKET", "VM",
                                     "UPTIME", "COST",  "REASON"};
  struct cli_table t;
  size_t i;
  json_t *n;
  int rc;

  printf("\n");
  cli_table_init(&t, head, 9);
  cli_table_set_max(&t, 8, 60);
  cli_table_set_right(&t, 6);
  cli_table_set_right(&t, 7);
  json_array_foreach(nodes, i, n) {
    char id[24], up[32], cost[40] = "-";
    const char *row[9];
    const json_t *c = json_object_get(n, "cost_micro");

    snprintf(id, sizeof(id), "%lld",
             (long long)json_integer_value(json_object_get(n, "id")));
    cli_fmt_duration(json_integer_value(json_object_get(n, "uptime_s")), up,
                     sizeof(up));
    row[0] = id;
    row[1] = jsonx_str(n, "state");
    row[2] = jsonx_str(n, "shape");
    row[3] = jsonx_str(n, "zone");
    row[4] = json_is_true(json_object_get(n, "spot")) ? "spot" : "on-demand";
    row[5] = jsonx_str(n, "vm_id") != NULL ? jsonx_str(n, "vm_id") : "-";
    if (json_is_integer(c))
      money(json_integer_value(c), cost, sizeof(cost));
    row[6] = up;
    row[7] = cost;
    row[8] = jsonx_str(n, "reason") != NULL ? jsonx_str(n, "reason") : "";
    cli_table_add(&t, row);
  }
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  cli_table_release(&t);
  return rc;
}

/* The autoscaler's state in two rows of t (a is the site's "autoscaler",
 * or NULL for a site it does not grow), written into the buffers. */
static void
autoscaler_rows(struct cli_table *t, const json_t *a, char *state,
                size_t statelen, char *last, size_t lastlen)
{
  const json_t *n = json_object_get(a, "nodes");
  const json_t *fc = json_object_get(a, "forecast_gpus");
  const json_t *cap = json_object_get(a, "spend_cap_micro_per_hour");
  char rate[40], capm[40], caps[56] = "", boot[32], fcs[32] = "none";

  if (!json_is_object(a))
    return;
  money(int_of(a, "spend_micro_per_hour"), rate, sizeof(rate));
  if (json_is_integer(cap)) {
    money(json_integer_value(cap), capm, sizeof(capm));
    snprintf(caps, sizeof(caps), " (cap %s/h)", capm);
  }
  if (json_is_integer(fc))
    snprintf(fcs, sizeof(fcs), "%lld GPUs", (long long)json_integer_value(fc));
  cli_fmt_duration(json_integer_value(json_object_get(a, "boot_s")), boot,
                   sizeof(boot));
  snprintf(state, statelen,
           "wants %lld nodes (launching %lld, idle %lld, busy %lld); "
           "demand %lld GPUs, forecast %s; %s/h%s; boot %s",
           int_of(n, "wanted"), int_of(n, "launching"),
           int_of(n, "idle"), int_of(n, "busy"),
           int_of(a, "demand_gpus"), fcs, rate, caps, boot);
  snprintf(last, lastlen, "%s (%s): %s", jsonx_str(a, "action"),
           jsonx_str(a, "reason"), jsonx_str(a, "detail"));
  cli_table_add_kv(t, "autoscaler", state);
  cli_table_add_kv(t, "last decision", last);
}

/* The NCCL baseline's verdict in one row (b is the site's "baseline", or
 * NULL when none is configured). */
static void
baseline_row(struct cli_table *t, const json_t *b, char *out, size_t len)
{
  const char *reason = jsonx_str(b, "reason");

  if (!json_is_object(b))
    return;
  snprintf(out, len, "%s against %s%s%s", jsonx_str(b, "status"),
           jsonx_str(b, "reference"), reason != NULL ? ": " : "",
           reason != NULL ? reason : "");
  cli_table_add_kv(t, "baseline", out);
}

static int
show_site(const json_t *site)
{
  char nodes[64], max_jobs[32], total[64], queued[32], running[32];
  char pending[32];
  char agent[1024], inputs[512], scaler[256], decided[320], baseline[512];
  const char *detail = jsonx_str(site, "detail");
  struct cli_table t;
  struct buf gpus, prices;
  const json_t *v;
  int rc;

  cli_table_init(&t, NULL, 2);
  buf_init(&gpus, CLI_MAX_RESPONSE);
  buf_init(&prices, CLI_MAX_RESPONSE);
  cli_table_add_kv(&t, "name", jsonx_str(site, "name"));
  cli_table_add_kv(&t, "kind", jsonx_str(site, "kind"));
  cli_table_add_kv(&t, "state", reach(site));
  if (detail != NULL && detail[0] != '\0')
    cli_table_add_kv(&t, "detail", detail);
  if (jsonx_str(site, "agent") != NULL) {
    agent_text(site, agent, sizeof(agent));
    cli_table_add_kv(&t, "agent", jsonx_str(site, "agent"));
    cli_table_add_kv(&t, "agent state", agent);
  }
  nodes_text(site, nodes, sizeof(nodes));
  cli_table_add_kv(&t, "nodes", nodes);
  v = json_object_get(site, "max_jobs");
  if (json_is_integer(v)) {
    if (json_integer_value(v) > 0)
      snprintf(max_jobs, sizeof(max_jobs), "%lld",
               (long long)json_integer_value(v));
    else
      snprintf(max_jobs, sizeof(max_jobs), "unlimited");
    cli_table_add_kv(&t, "max jobs", max_jobs);
  }
  if (cli_fmt_site_gpus(json_object_get(site, "gpus"), &gpus) == 0)
    cli_table_add_kv(&t, "gpus", buf_str(&gpus));
  snprintf(total, sizeof(total), "%lld/%lld",
           (long long)json_integer_value(json_object_get(site, "gpus_in_use")),
           (long long)json_integer_value(json_object_get(site, "gpus_total")));
  cli_table_add_kv(&t, "gpus in use", total);
  snprintf(pending, sizeof(pending), "%lld",
           (long long)json_integer_value(
               json_object_get(site, "gpus_pending")));
  cli_table_add_kv(&t, "gpus waiting at site", pending);
  count(site, "queued", queued, sizeof(queued));
  count(site, "running", running, sizeof(running));
  cli_table_add_kv(&t, "queued", queued);
  cli_table_add_kv(&t, "running", running);
  if (prices_text(json_object_get(site, "cost"), &prices) == 0)
    cli_table_add_kv(&t, "prices", buf_str(&prices));
  cli_table_add_kv(&t, "cost inputs",
                   inputs_text(json_object_get(json_object_get(site, "cost"),
                                               "inputs"),
                               inputs, sizeof(inputs)));
  autoscaler_rows(&t, json_object_get(site, "autoscaler"), scaler,
                  sizeof(scaler), decided, sizeof(decided));
  baseline_row(&t, json_object_get(site, "baseline"), baseline,
               sizeof(baseline));
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  if (rc == CLI_EXIT_OK && json_is_array(json_object_get(site, "nodes")))
    rc = show_nodes(json_object_get(site, "nodes"));
  buf_release(&prices);
  buf_release(&gpus);
  cli_table_release(&t);
  return rc;
}

int
cli_cmd_site(struct cli *cli, int argc, char **argv)
{
  struct cli_response r;
  struct buf path;
  struct err e = {0};
  json_t *site = NULL;
  int status = CLI_EXIT_OK;
  int first;
  const char *sub = argc > 1 ? argv[1] : NULL;

  if (sub != NULL && (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0)) {
    fputs(site_usage, stdout);
    return CLI_EXIT_OK;
  }
  if (sub == NULL || strcmp(sub, "show") != 0) {
    if (sub == NULL)
      err_set(&e, ERR_INVALID, "a subcommand is needed (show)");
    else
      err_set(&e, ERR_INVALID, "unknown subcommand '%s'", sub);
    return cli_usage_error(site_usage, &e);
  }
  if (!cli_parsed(cli_args_positional(argc - 1, argv + 1, 1, 1, &first, &e),
                  site_usage, &e, &status))
    return status;
  cli_response_init(&r);
  buf_init(&path, 4096);
  if (cli_url_add_segment(&path, "/v1/sites/", argv[1 + first]) < 0) {
    err_set(&e, ERR_INVALID, "site name too long");
    status = cli_fail(&e);
  } else if (cli_request(cli, "GET", buf_str(&path), NULL, &r, &site, &e) <
             0) {
    status = cli_fail(&e);
  } else if (cli->json) {
    cli_print_raw(&r);
  } else {
    status = show_site(site);
  }
  json_decref(site);
  buf_release(&path);
  cli_response_release(&r);
  return status;
}
