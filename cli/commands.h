/*
 * tenbin's command table as an X-macro: X(name, handler, arity, help)
 * per command.  main.c expands it into its dispatch table; the
 * completion script's generator (complete.c) expands it into the list
 * of command names, dropping the handlers, so that cli_lib and its tests
 * link without them.  A command added here is dispatched, listed by
 * 'tenbin --help' and completed.
 *
 * arity is how the command reads its words (args.h); NULL: only flags.
 */
#ifndef TENBIN_CLI_COMMANDS_H
#define TENBIN_CLI_COMMANDS_H

#define CLI_COMMANDS(X)                                                      \
  X("submit", cli_cmd_submit, cli_submit_arity,                              \
    "submit a command or a workload as a job")                               \
  X("sbatch", cli_cmd_sbatch, cli_sbatch_arity,                              \
    "submit a batch script with #SBATCH lines")                              \
  X("jobs", cli_cmd_jobs, cli_jobs_arity, "list jobs")                       \
  X("show", cli_cmd_show, NULL, "show one job")                              \
  X("events", cli_cmd_events, NULL, "list a job's state transitions")        \
  X("explain", cli_cmd_explain, NULL,                                        \
    "why a job is where it is: every site's terms")                          \
  X("logs", cli_cmd_logs, NULL, "print a job's output (-f follows it)")      \
  X("cancel", cli_cmd_cancel, NULL, "cancel jobs")                           \
  X("release", cli_cmd_release, NULL, "release held jobs")                   \
  X("workloads", cli_cmd_workloads, NULL, "list the workload catalog")       \
  X("workload", cli_cmd_workload, NULL, "add FILE.json | show NAME")         \
  X("sites", cli_cmd_sites, NULL, "list sites with their GPUs and jobs")     \
  X("site", cli_cmd_site, NULL, "show NAME")                                 \
  X("baseline", cli_cmd_baseline, NULL,                                      \
    "run|show|diff SITE: the NCCL baseline of a site against the "           \
    "reference")                                                             \
  X("autoscaler", cli_cmd_autoscaler, NULL,                                  \
    "log: what the autoscaler decided for the elastic sites")                \
  X("prices", cli_cmd_prices, NULL,                                          \
    "list the rates in force | set SITE (admin)")                            \
  X("report", cli_cmd_report, cli_report_arity,                              \
    "GPU-hours and cost by project, site, GPU type, day")                    \
  X("budgets", cli_cmd_budgets, NULL, "list monthly budgets and spending")   \
  X("budget", cli_cmd_budget, NULL, "set PROJECT --monthly X (admin)")       \
  X("datasets", cli_cmd_datasets, NULL, "list datasets")                     \
  X("dataset", cli_cmd_dataset, NULL, "add | publish | sync | ls | show")    \
  X("completion", cli_cmd_completion, NULL,                                  \
    "bash|zsh: print a shell completion script")

#endif
