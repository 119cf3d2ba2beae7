/*
 * tenbin completion bash|zsh, and the hidden __complete KIND that the
 * scripts call for the server's values.  __complete is asked on every
 * Tab: it gives up fast and says nothing on any failure (no server, a
 * 401, a reply it cannot read), so a shell never prints an error or
 * waits long in the middle of a command line.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/complete.h"

/* Seconds a Tab may wait for tenbind, per request. */
#define COMPLETE_TIMEOUT_S 3L
/* A completion script is a few KiB; the values at most 1000 short lines. */
#define COMPLETE_MAX_OUT ((size_t)1 << 20)

static const char completion_usage[] =
    "usage: tenbin completion bash|zsh\n"
    "\n"
    "Print a completion script for the shell, made from tenbin's own\n"
    "commands and options; job ids, sites, workloads, datasets and\n"
    "projects are asked of tenbind as you type.\n"
    "\n"
    "  bash:  source <(tenbin completion bash)   (in ~/.bashrc)\n"
    "  zsh:   source <(tenbin completion zsh)    (in ~/.zshrc, after\n"
    "         compinit), or save it as _tenbin in a directory of $fpath\n";

int
cli_cmd_completion(struct cli *cli, int argc, char **argv)
{
  struct err e = {0};
  struct buf out;
  int status = CLI_EXIT_OK;
  int first;

  (void)cli;
  if (!cli_parsed(cli_args_positional(argc, argv, 1, 1, &first, &e),
                  completion_usage, &e, &status))
    return status;
  buf_init(&out, COMPLETE_MAX_OUT);
  if (cli_complete_script(argv[first], &out, &e) < 0)
    status = cli_usage_error(completion_usage, &e);
  else if (fwrite(buf_str(&out), 1, out.len, stdout) != out.len)
    status = CLI_EXIT_FAIL;
  buf_release(&out);
  return status;
}

int
cli_cmd_complete(struct cli *cli, int argc, char **argv)
{
  const struct cli_complete_source *src;
  struct buf out;
  int status = CLI_EXIT_OK;
  int full = 0;
  size_t n = argc == 2 ? cli_complete_sources(argv[1], &src) : 0;

  if (n == 0)
    return CLI_EXIT_USAGE;
  buf_init(&out, COMPLETE_MAX_OUT);
  cli->client.timeout_s = COMPLETE_TIMEOUT_S;
  /* Quiet by design: a failed source leaves the others' values, and a
   * full buffer (never, at 1000 short lines) what it holds. */
  for (size_t i = 0; i < n && !full; i++) {
    struct cli_response r;
    struct err e = {0};
    json_t *reply = NULL;

    cli_response_init(&r);
    if (cli_request(cli, "GET", src[i].path, NULL, &r, &reply, &e) == 0)
      full = cli_complete_values(&src[i], reply, &out) < 0;
    json_decref(reply);
    cli_response_release(&r);
  }
  if (out.len > 0 && fwrite(buf_str(&out), 1, out.len, stdout) != out.len)
    status = CLI_EXIT_FAIL;
  buf_release(&out);
  return status;
}
