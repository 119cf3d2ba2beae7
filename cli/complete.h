/*
 * Shell completion for tenbin: the bash and zsh scripts, generated from
 * the command table (cli/commands.h) and the parsers' option tables
 * (cli_comp_specs in args.h), and the values the scripts ask the server
 * for through the hidden 'tenbin __complete KIND'.  Pure functions: the
 * requests are made by cmd_complete.c.
 */
#ifndef TENBIN_CLI_COMPLETE_H
#define TENBIN_CLI_COMPLETE_H

#include <jansson.h>

#include "util/buf.h"
#include "util/err.h"

/* At most this many values are printed for one KIND. */
#define CLI_COMPLETE_MAX_VALUES 1000
/* A longer value is left out: no name or id of tenbind's is so long. */
#define CLI_COMPLETE_MAX_VALUE 128

/* The commands' names, in the table's order ("help" last), and count. */
extern const char *const cli_command_names[];
extern const size_t cli_ncommand_names;

/*
 * Append the completion script for shell ("bash" or "zsh") to out.
 * ERR_INVALID naming the shell for another one; ERR_TOO_LARGE when out's
 * cap is too small.
 */
int cli_complete_script(const char *shell, struct buf *out, struct err *e)
    WARN_UNUSED;

/*
 * The server's values for __complete KIND: where to ask (a GET path),
 * the reply's array and the field of each element.  Returns the number
 * of sources KIND has (projects are read from budgets and from jobs),
 * 0 when KIND is not one of jobs, sites, workloads, datasets, projects.
 */
struct cli_complete_source {
  const char *path;  /* "/v1/sites" */
  const char *array; /* "sites" */
  const char *field; /* "name" */
};
size_t cli_complete_sources(const char *kind,
                            const struct cli_complete_source **out);

/*
 * Append the values of one reply for src to out, one a line, leaving
 * out those out already holds, those that are not plain words (a shell
 * would split or expand them) and those past CLI_COMPLETE_MAX_VALUES.
 * Job ids come as integers; the jobs that have not ended come first.
 */
int cli_complete_values(const struct cli_complete_source *src,
                        const json_t *reply, struct buf *out) WARN_UNUSED;

#endif
