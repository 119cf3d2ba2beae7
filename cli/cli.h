/*
 * What the tenbin commands share: the process context handed to every
 * handler, the handlers themselves (one file per command family) and the
 * request/print helpers they all use.
 *
 * A handler gets the argv of its command (argv[0] is the command name)
 * and returns the process exit status: CLI_EXIT_OK, CLI_EXIT_FAIL (the
 * server or the network said no) or CLI_EXIT_USAGE.
 */
#ifndef TENBIN_CLI_CLI_H
#define TENBIN_CLI_CLI_H

#include <jansson.h>

#include "cli/args.h"
#include "cli/client.h"

struct cli {
  struct cli_client client;
  int json; /* --json: print the server's JSON verbatim */
};

typedef int (*cli_cmd_fn)(struct cli *cli, int argc, char **argv);

/* cmd_jobs.c */
int cli_cmd_submit(struct cli *cli, int argc, char **argv);
int cli_cmd_sbatch(struct cli *cli, int argc, char **argv);
int cli_cmd_jobs(struct cli *cli, int argc, char **argv);
int cli_cmd_show(struct cli *cli, int argc, char **argv);
int cli_cmd_events(struct cli *cli, int argc, char **argv);
int cli_cmd_logs(struct cli *cli, int argc, char **argv);
int cli_cmd_cancel(struct cli *cli, int argc, char **argv);
int cli_cmd_release(struct cli *cli, int argc, char **argv);
/* cmd_workloads.c */
int cli_cmd_workloads(struct cli *cli, int argc, char **argv);
int cli_cmd_workload(struct cli *cli, int argc, char **argv);
/* cmd_sites.c */
int cli_cmd_sites(struct cli *cli, int argc, char **argv);
int cli_cmd_site(struct cli *cli, int argc, char **argv);
int cli_cmd_autoscaler(struct cli *cli, int argc, char **argv);
/* cmd_baseline.c */
int cli_cmd_baseline(struct cli *cli, int argc, char **argv);
int cli_cmd_prices(struct cli *cli, int argc, char **argv);
int cli_cmd_report(struct cli *cli, int argc, char **argv);
int cli_cmd_explain(struct cli *cli, int argc, char **argv);
int cli_cmd_budgets(struct cli *cli, int argc, char **argv);
int cli_cmd_budget(struct cli *cli, int argc, char **argv);
/* cmd_datasets.c */
int cli_cmd_datasets(struct cli *cli, int argc, char **argv);
int cli_cmd_dataset(struct cli *cli, int argc, char **argv);

/* cmd_complete.c: 'completion bash|zsh' prints the script; the hidden
 * '__complete KIND' prints the server's values for it, one a line, and
 * nothing at all when the server cannot be asked. */
int cli_cmd_completion(struct cli *cli, int argc, char **argv);
int cli_cmd_complete(struct cli *cli, int argc, char **argv);

/* main.c: print "tenbin: MSG" on stderr; returns CLI_EXIT_FAIL. */
int cli_fail(const struct err *e);
/*
 * main.c: print "tenbin: " label msg tail on stderr, with control
 * characters of msg (server text) shown as '?'.
 */
void cli_message(const char *label, const char *msg, const char *tail);
/*
 * main.c: act on a parser's result: CLI_HELP prints usage to stdout and
 * sets *status to CLI_EXIT_OK, an error prints a usage error and sets
 * CLI_EXIT_USAGE; both return 0.  Returns 1 when the command goes on.
 */
int cli_parsed(int rc, const char *usage, const struct err *e, int *status);
/*
 * main.c: one request whose reply must be a 2xx JSON object.  On 0, *out
 * is the object (new reference) and r holds the raw body (for --json).
 */
int cli_request(struct cli *cli, const char *method, const char *path,
                const struct buf *body, struct cli_response *r,
                json_t **out, struct err *e) WARN_UNUSED;
/* main.c: write r's body to stdout verbatim, ending in a newline. */
int cli_print_raw(const struct cli_response *r);
/* main.c: cli_request, then the reply verbatim with --json, else as
 * print shows it (an exit status); the command's exit status. */
int cli_show(struct cli *cli, const char *method, const char *path,
             const struct buf *body, int (*print)(const json_t *reply));

#endif
