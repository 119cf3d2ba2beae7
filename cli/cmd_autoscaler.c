/*
 * 'tenbin autoscaler log [--site S] [--limit N]': what the autoscaler
 * decided for the elastic sites, newest first, with the inputs it
 * decided from (GET /v1/autoscaler/log).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/format.h"
#include "cli/table.h"
#include "util/jsonx.h"

static const char autoscaler_usage[] =
    "usage: tenbin autoscaler log [--site SITE] [--limit N]\n\n"
    "List the autoscaler's decisions, newest first: the nodes it launched\n"
    "or released at each elastic site and why, and what held launches\n"
    "back (a spend cap, the site's maximum, the cool-down), with the\n"
    "GPUs of jobs waiting for the site to grow and the forecast.\n";

static int
print_log(const json_t *reply)
{
  static const char *const head[] = {"WHEN",   "SITE",   "ACTION", "REASON",
                                     "NODES",  "DEMAND", "$/H",    "DETAIL"};
  struct cli_table t;
  const json_t *d;
  size_t i;
  int rc;

  cli_table_init(&t, head, 8);
  cli_table_set_right(&t, 5);
  cli_table_set_right(&t, 6);
  cli_table_set_max(&t, 7, 90);
  json_array_foreach(json_object_get(reply, "decisions"), i, d) {
    char nodes[48], demand[32], rate[40], at[CLI_FMT_SIZE];
    const char *row[8];

    snprintf(nodes, sizeof(nodes), "%lld->%lld",
             (long long)json_integer_value(json_object_get(d, "live_nodes")),
             (long long)json_integer_value(
                 json_object_get(d, "wanted_nodes")));
    snprintf(demand, sizeof(demand), "%lld GPUs",
             (long long)json_integer_value(
                 json_object_get(d, "demand_gpus")));
    cli_fmt_micro_dollars(json_integer_value(
                              json_object_get(d, "spend_micro_per_hour")),
                          rate, sizeof(rate));
    row[0] = cli_fmt_iso(jsonx_str(d, "at"), at, sizeof(at));
    row[1] = jsonx_str(d, "site");
    row[2] = jsonx_str(d, "action");
    row[3] = jsonx_str(d, "reason");
    row[4] = nodes;
    row[5] = demand;
    row[6] = rate;
    row[7] = jsonx_str(d, "detail");
    cli_table_add(&t, row);
  }
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  cli_table_release(&t);
  return rc;
}

int
cli_cmd_autoscaler(struct cli *cli, int argc, char **argv)
{
  struct cli_scale_log o;
  struct err e = {0};
  struct buf path;
  int status = CLI_EXIT_OK;

  if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                   strcmp(argv[1], "-h") == 0)) {
    fputs(autoscaler_usage, stdout);
    return CLI_EXIT_OK;
  }
  if (argc < 2 || strcmp(argv[1], "log") != 0) {
    if (argc < 2)
      err_set(&e, ERR_INVALID, "a subcommand is needed (log)");
    else
      err_set(&e, ERR_INVALID, "unknown subcommand '%s'", argv[1]);
    return cli_usage_error(autoscaler_usage, &e);
  }
  if (!cli_parsed(cli_scale_log_parse(argc - 1, argv + 1, &o, &e),
                  autoscaler_usage, &e, &status))
    return status;
  buf_init(&path, 8192);
  if (cli_scale_log_path(&o, &path) < 0) {
    err_set(&e, ERR_INVALID, "site name too long");
    status = cli_fail(&e);
  } else {
    status = cli_show(cli, "GET", buf_str(&path), NULL, print_log);
  }
  buf_release(&path);
  return status;
}
