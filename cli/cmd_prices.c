/*
 * 'tenbin prices' lists the rates in force at every priced site, in
 * dollars per GPU-hour; 'tenbin prices set SITE --gpu-type T
 * --per-gpu-hour X [--spot Y]' (an admin) changes a rented site's price
 * of a type from now on.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/format.h"
#include "cli/table.h"
#include "util/jsonx.h"

static const char prices_usage[] =
    "usage: tenbin prices\n"
    "       tenbin prices set SITE --gpu-type T --per-gpu-hour X "
    "[--spot Y]\n\n"
    "List the rates in force at every priced site (owned sites: sunk and\n"
    "marginal; rented: on demand and spot per GPU type), or, as an admin,\n"
    "set a rented site's price of a GPU type from now on (dollars per\n"
    "GPU-hour; the history is kept).\n";

/* The rates of reply's "prices" as a table. */
static int
print_prices(const json_t *reply)
{
  static const char *const head[] = {"SITE",   "GPU TYPE", "KIND",
                                     "$/GPU-H", "SINCE",   "SOURCE"};
  struct cli_table t;
  const json_t *p;
  size_t i;
  int rc;

  cli_table_init(&t, head, 6);
  cli_table_set_right(&t, 3);
  json_array_foreach(json_object_get(reply, "prices"), i, p) {
    long long micro = (long long)json_integer_value(
        json_object_get(p, "per_gpu_hour_micro"));
    char rate[40];
    char since[CLI_FMT_SIZE];
    const char *row[6];

    cli_fmt_micro_dollars(micro, rate, sizeof(rate));
    row[0] = jsonx_str(p, "site");
    row[1] = jsonx_str(p, "gpu_type");
    row[2] = jsonx_str(p, "kind");
    row[3] = rate;
    row[4] = cli_fmt_iso(jsonx_str(p, "since"), since, sizeof(since));
    row[5] = jsonx_str(p, "source");
    cli_table_add(&t, row);
  }
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  cli_table_release(&t);
  return rc;
}

static int
prices_set(struct cli *cli, int argc, char **argv)
{
  struct buf path, text;
  struct err e = {0};
  const char *site = NULL, *gpu_type = NULL;
  json_t *body = NULL;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_prices_set_parse(argc, argv, &site, &gpu_type, &body,
                                       &e),
                  prices_usage, &e, &status))
    return status;
  buf_init(&path, 4096);
  buf_init(&text, 4096);
  if (cli_url_add_segment(&path, "/v1/prices/", site) < 0 ||
      cli_url_add_segment(&path, "/", gpu_type) < 0 ||
      jsonx_dump_buf(body, &text) < 0) {
    err_set(&e, ERR_INVALID, "site or GPU type too long");
    status = cli_fail(&e);
  } else {
    status = cli_show(cli, "PUT", buf_str(&path), &text, print_prices);
  }
  json_decref(body);
  buf_release(&text);
  buf_release(&path);
  return status;
}

int
cli_cmd_prices(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  int status = CLI_EXIT_OK;
  int first;

  if (argc > 1 && strcmp(argv[1], "set") == 0)
    return prices_set(cli, argc - 1, argv + 1);
  if (!cli_parsed(cli_args_positional(argc, argv, 0, 0, &first, &e),
                  prices_usage, &e, &status))
    return status;
  return cli_show(cli, "GET", "/v1/prices", NULL, print_prices);
}
