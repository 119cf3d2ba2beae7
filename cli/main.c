/*
 * tenbin: the command-line client of tenbind.  Global options come
 * before the command or after it (as git, gh and kubectl users type
 * them); the command table (cli/commands.h, git's commands[]) maps a
 * name to its handler in cmd_*.c, which gets the rest of argv, and to
 * how it reads its words, so that its own are never taken for global
 * options.  "__complete" is the completion script's hidden helper.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"

#ifndef TENBIN_VERSION
#define TENBIN_VERSION "0.1.0"
#endif

struct cmd {
  const char *name;
  cli_cmd_fn fn;
  cli_arity_fn arity; /* how it reads its words; NULL: only flags */
  const char *help;   /* one line for 'tenbin --help' */
};

#define CLI_COMMAND_ENTRY(name, fn, arity, help) {name, fn, arity, help},
static const struct cmd commands[] = {CLI_COMMANDS(CLI_COMMAND_ENTRY)};
#undef CLI_COMMAND_ENTRY

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void
usage(FILE *f)
{
  fprintf(f, "usage: tenbin [OPTIONS] COMMAND [ARGS] [OPTIONS]\n\n"
             "Commands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\nOptions (before or after the command):\n");
  cli_global_usage(f);
  fprintf(f, "  %-14s %s\n", "--version", "print tenbin's version");
  fprintf(f, "\nRun 'tenbin COMMAND --help' for the options of a command.\n"
             "Words after 'submit ... --' or after sbatch's SCRIPT are "
             "never options.\n");
}

/* The completion script's helper: not listed, not for people. */
static const struct cmd hidden_complete = {"__complete", cli_cmd_complete,
                                           NULL, NULL};

static const struct cmd *
find_command(const char *name)
{
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  if (strcmp(name, hidden_complete.name) == 0)
    return &hidden_complete;
  return NULL;
}

void
cli_message(const char *label, const char *msg, const char *tail)
{
  /* Messages carry server text: keep control characters off the tty. */
  fprintf(stderr, "tenbin: %s", label);
  for (const char *p = msg; *p != '\0'; p++)
    fputc((unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p, stderr);
  fprintf(stderr, "%s\n", tail);
}

int
cli_fail(const struct err *e)
{
  cli_message("", err_msg(e), "");
  return CLI_EXIT_FAIL;
}

int
cli_parsed(int rc, const char *usage, const struct err *e, int *status)
{
  if (rc == CLI_HELP) {
    fputs(usage, stdout);
    *status = CLI_EXIT_OK;
    return 0;
  }
  if (rc < 0) {
    *status = cli_usage_error(usage, e);
    return 0;
  }
  return 1;
}

int
cli_request(struct cli *cli, const char *method, const char *path,
            const struct buf *body, struct cli_response *r, json_t **out,
            struct err *e)
{
  int rc = cli_client_call(&cli->client, method, path, body, NULL, r, e);

  if (rc == 0)
    rc = cli_response_check(r, e);
  if (rc == 0)
    rc = cli_response_json(r, out, e);
  return rc;
}

int
cli_print_raw(const struct cli_response *r)
{
  const struct buf *b = &r->body;

  if (b->len > 0 && fwrite(b->data, 1, b->len, stdout) != b->len)
    return -1;
  if (b->len == 0 || b->data[b->len - 1] != '\n')
    fputc('\n', stdout);
  return 0;
}

int
cli_show(struct cli *cli, const char *method, const char *path,
         const struct buf *body, int (*print)(const json_t *reply))
{
  struct cli_response r;
  struct err e = {0};
  json_t *reply = NULL;
  int status = CLI_EXIT_OK;

  cli_response_init(&r);
  if (cli_request(cli, method, path, body, &r, &reply, &e) < 0)
    status = cli_fail(&e);
  else if (cli->json)
    cli_print_raw(&r);
  else
    status = print(reply);
  json_decref(reply);
  cli_response_release(&r);
  return status;
}

/* 'tenbin help [COMMAND]': the general usage or a command's --help. */
static int
run_help(struct cli *cli, int argc, char **argv)
{
  const struct cmd *cmd = argc > 1 ? find_command(argv[1]) : NULL;
  char help_opt[] = "--help";
  char *args[3];

  if (cmd == NULL) {
    usage(stdout);
    return argc > 1 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  args[0] = argv[1];
  args[1] = help_opt;
  args[2] = NULL;
  return cmd->fn(cli, 2, args);
}

int
main(int argc, char **argv)
{
  struct cli_global g;
  struct cli cli;
  struct err e = {0};
  const struct cmd *cmd;
  int status = CLI_EXIT_FAIL;
  int curl_ready = 0;

  memset(&cli, 0, sizeof(cli));
  if (cli_global_parse(argc, argv, NULL, &g, &e) < 0) {
    fprintf(stderr, "tenbin: %s\n", err_msg(&e));
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (g.version) {
    printf("tenbin %s\n", TENBIN_VERSION);
    return CLI_EXIT_OK;
  }
  if (g.help) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (g.cmd_index >= argc) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  cmd = find_command(argv[g.cmd_index]);
  if (cmd == NULL && strcmp(argv[g.cmd_index], "help") != 0) {
    fprintf(stderr,
            "tenbin: '%s' is not a tenbin command; see 'tenbin --help'\n",
            argv[g.cmd_index]);
    return CLI_EXIT_USAGE;
  }
  if (cli_global_take(&g, argc, argv, cmd != NULL ? cmd->arity : NULL,
                      &e) < 0) {
    fprintf(stderr, "tenbin: %s\n", err_msg(&e));
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "tenbin: cannot initialise libcurl\n");
    goto out;
  }
  curl_ready = 1;
  if (cli_client_init(&cli.client, g.server, g.token, g.cacert, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  cli.json = g.json;
  if (cmd == NULL)
    status = run_help(&cli, g.argc - g.cmd_index, argv + g.cmd_index);
  else
    status = cmd->fn(&cli, g.argc - g.cmd_index, argv + g.cmd_index);
  if (fflush(stdout) != 0 && status == CLI_EXIT_OK) {
    fprintf(stderr, "tenbin: cannot write to stdout\n");
    status = CLI_EXIT_FAIL;
  }
out:
  cli_client_release(&cli.client);
  if (curl_ready)
    curl_global_cleanup();
  return status;
}
