/*
 * 'tenbin report [--from D] [--to D] [--by KEYS] [--csv|--json]': what
 * the GPU-hours in the usage ledger cost, grouped by project, site, GPU
 * type and day, with a total line; --csv is the server's CSV verbatim
 * (safe to open in a spreadsheet).  'tenbin budgets' and 'tenbin budget
 * set': the monthly budgets and what each project spent of its own.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/format.h"
#include "cli/table.h"
#include "util/jsonx.h"

static const char report_usage[] =
    "usage: tenbin report [--from YYYY-MM-DD] [--to YYYY-MM-DD]\n"
    "                     [--by project,site,gpu-type,day] [--csv|--json]\n\n"
    "GPU-hours, jobs and cost from the usage ledger over a range of days\n"
    "(default: this month so far, by project and site): what rented sites\n"
    "billed, owned sites' sunk and marginal cost, egress, and the share of\n"
    "GPU-hours in jobs that failed or were cancelled.  Days are in the\n"
    "server's report time zone; jobs still running count up to now.\n";

/* The cells of one line (keys of by first) into cells; text is room. */
static void
line_cells(const json_t *l, const json_t *by, const char **cells,
           char text[][32])
{
  static const char *const money[] = {"billed_micro", "sunk_micro",
                                      "marginal_micro", "egress_micro"};
  size_t n = 0, i;
  const json_t *k;

  json_array_foreach(by, i, k) {
    const char *v = jsonx_str(l, json_string_value(k));

    cells[n++] = v != NULL && v[0] != '\0' ? v : "-";
  }
  snprintf(text[0], 32, "%.1f",
           json_number_value(json_object_get(l, "gpu_hours")));
  snprintf(text[1], 32, "%lld",
           (long long)json_integer_value(json_object_get(l, "jobs")));
  for (int m = 0; m < 4; m++)
    cli_fmt_cents(json_integer_value(json_object_get(l, money[m])), text[2 + m],
              32);
  snprintf(text[6], 32, "%.1f%%",
           100.0 * json_number_value(json_object_get(l, "failed_share")));
  for (int c = 0; c < 7; c++)
    cells[n++] = text[c];
}

static int
print_report(const json_t *reply)
{
  static const char *const sums[] = {"GPU-H",    "JOBS",     "BILLED $",
                                     "SUNK $",   "MARGIN $", "EGRESS $",
                                     "FAILED"};
  const json_t *by = json_object_get(reply, "by");
  const char *head[11], *cells[11];
  char text[7][32];
  struct cli_table t;
  size_t nby = json_array_size(by), i;
  const json_t *l;
  int rc;

  if (nby > 4)
    nby = 4;
  for (i = 0; i < nby; i++) {
    const char *k = json_string_value(json_array_get(by, i));

    head[i] = k != NULL && strcmp(k, "gpu_type") == 0 ? "GPU TYPE"
              : k != NULL && strcmp(k, "project") == 0 ? "PROJECT"
              : k != NULL && strcmp(k, "site") == 0    ? "SITE"
                                                       : "DAY";
  }
  for (int c = 0; c < 7; c++)
    head[nby + (size_t)c] = sums[c];
  cli_table_init(&t, head, nby + 7);
  for (size_t c = nby; c < nby + 7; c++)
    cli_table_set_right(&t, c);
  json_array_foreach(json_object_get(reply, "lines"), i, l) {
    line_cells(l, by, cells, text);
    cli_table_add(&t, cells);
  }
  line_cells(json_object_get(reply, "total"), NULL, cells + nby,
             text);
  for (i = 0; i < nby; i++)
    cells[i] = i == 0 ? "TOTAL" : "";
  cli_table_add(&t, cells);
  printf("%s to %s\n", jsonx_str(reply, "from"), jsonx_str(reply, "to"));
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  cli_table_release(&t);
  return rc;
}

int
cli_cmd_report(struct cli *cli, int argc, char **argv)
{
  struct cli_response r;
  struct err e = {0};
  struct buf path;
  int status = CLI_EXIT_OK, csv;

  buf_init(&path, 4096);
  if (!cli_parsed(cli_report_parse(argc, argv, &csv, &path, &e),
                  report_usage, &e, &status)) {
    buf_release(&path);
    return status;
  }
  if (!csv) {
    status = cli_show(cli, "GET", buf_str(&path), NULL, print_report);
    buf_release(&path);
    return status;
  }
  /* CSV is no JSON object: the body as it came */
  cli_response_init(&r);
  if (cli_client_call(&cli->client, "GET", buf_str(&path), NULL, NULL, &r,
                      &e) < 0 ||
      cli_response_check(&r, &e) < 0)
    status = cli_fail(&e);
  else
    cli_print_raw(&r);
  cli_response_release(&r);
  buf_release(&path);
  return status;
}

/* ---- budgets ---- */

static const char budgets_usage[] =
    "usage: tenbin budgets\n"
    "       tenbin budget set PROJECT --monthly DOLLARS [--hard|--soft]\n"
    "                         [--counts rented|all]\n\n"
    "List the monthly budgets with what each project spent this month and\n"
    "where that pace ends the month, or, as an admin, set one.  A hard\n"
    "budget refuses jobs that could exceed what is left and, once spent,\n"
    "keeps the project's queued jobs off rented sites; a soft one (the\n"
    "default) warns at 80 % and 100 %.  Budgets count rented sites' bills\n"
    "and egress, plus owned sites' sunk cost with --counts all.\n";

static int
print_budgets(const json_t *reply)
{
  static const char *const head[] = {"PROJECT", "MONTH",   "BUDGET $",
                                     "SPENT $", "LEFT $",  "FORECAST $",
                                     "KIND",    "COUNTS",  "WARNED"};
  const json_t *list = json_object_get(reply, "budgets");
  struct cli_table t;
  const json_t *v;
  size_t i;
  int rc;

  cli_table_init(&t, head, 9);
  for (size_t c = 2; c < 6; c++)
    cli_table_set_right(&t, c);
  /* one budget (set, or GET of a project) or the list */
  if (list == NULL)
    list = reply;
  for (i = 0; i < (json_is_array(list) ? json_array_size(list) : 1); i++) {
    static const char *const money[] = {"monthly_micro", "spent_micro",
                                        "left_micro", "forecast_micro"};
    char text[5][32];
    const char *row[9];

    v = json_is_array(list) ? json_array_get(list, i) : list;
    for (int m = 0; m < 4; m++)
      cli_fmt_cents(json_integer_value(json_object_get(v, money[m])), text[m],
                32);
    snprintf(text[4], 32, "%lld%%",
             (long long)json_integer_value(json_object_get(v, "warned_pct")));
    row[0] = jsonx_str(v, "project");
    row[1] = jsonx_str(v, "month");
    for (int m = 0; m < 4; m++)
      row[2 + m] = text[m];
    row[6] = jsonx_bool(v, "hard", 0) ? "hard" : "soft";
    row[7] = jsonx_str(v, "counts");
    row[8] = json_integer_value(json_object_get(v, "warned_pct")) ? text[4]
                                                                   : "-";
    cli_table_add(&t, row);
  }
  rc = cli_table_print(&t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  cli_table_release(&t);
  return rc;
}

int
cli_cmd_budgets(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  int status = CLI_EXIT_OK, first;

  if (!cli_parsed(cli_args_positional(argc, argv, 0, 0, &first, &e),
                  budgets_usage, &e, &status))
    return status;
  return cli_show(cli, "GET", "/v1/budgets", NULL, print_budgets);
}

int
cli_cmd_budget(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  struct buf path, text;
  const char *project = NULL;
  json_t *body = NULL;
  int status = CLI_EXIT_OK;

  if (argc < 2 || strcmp(argv[1], "set") != 0) {
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 ||
                     strcmp(argv[1], "-h") == 0)) {
      fputs(budgets_usage, stdout);
      return CLI_EXIT_OK;
    }
    fputs(budgets_usage, stderr);
    return CLI_EXIT_USAGE;
  }
  if (!cli_parsed(cli_budget_set_parse(argc - 1, argv + 1, &project, &body,
                                       &e),
                  budgets_usage, &e, &status))
    return status;
  buf_init(&path, 4096);
  buf_init(&text, 4096);
  if (cli_url_add_segment(&path, "/v1/budgets/", project) < 0 ||
      jsonx_dump_buf(body, &text) < 0) {
    err_set(&e, ERR_INVALID, "project name too long");
    status = cli_fail(&e);
  } else {
    status = cli_show(cli, "PUT", buf_str(&path), &text, print_budgets);
  }
  json_decref(body);
  buf_release(&text);
  buf_release(&path);
  return status;
}
