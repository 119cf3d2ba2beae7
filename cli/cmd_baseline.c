/*
 * 'tenbin baseline run|show|diff SITE': the NCCL baseline (docs/
 * BASELINE.md).  run starts tenbin-probe as a job at the site (and with
 * --wait follows it to its end); show prints the site's verdict, its
 * fingerprint and its bandwidth; diff puts the site beside the
 * reference (or --against another site) and marks what differs.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/table.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

static const char baseline_usage[] =
    "usage: tenbin baseline run SITE [--nodes N] [--wait]\n"
    "       tenbin baseline show SITE\n"
    "       tenbin baseline diff SITE [--against SITE]\n\n"
    "run   probe the site now: tenbin-probe runs as a job there, takes the\n"
    "      GPU software stack's fingerprint and measures NCCL bandwidth\n"
    "      (--nodes: on that many nodes of a Slurm site; --wait: until\n"
    "      the probe ends, then show the site).\n"
    "show  the site's verdict against the reference site, the rules it\n"
    "      fails, its fingerprint and its all-reduce bandwidth.\n"
    "diff  the fingerprint side by side with the reference's (or the\n"
    "      --against site's), '!' marking a difference a rule judges and\n"
    "      '~' one no rule judges, then the bandwidth per message size\n"
    "      as a percentage of the reference's.\n";

/* "8 B", "64 KiB", "8 GiB": message sizes are powers of two. */
static void
size_label(int64_t bytes, char *out, size_t len)
{
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;

  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    u++;
  }
  snprintf(out, len, "%" PRId64 " %s", bytes, unit[u]);
}

static const char *
str_or(const json_t *o, const char *key, const char *dflt)
{
  const char *s = jsonx_str(o, key);

  return s != NULL ? s : dflt;
}

static void
print_verdict(const json_t *reply)
{
  const json_t *p = json_object_get(reply, "latest_probe");
  const json_t *f;
  size_t i;

  printf("site:       %s\n", str_or(reply, "site", "?"));
  printf("against:    %s%s\n", str_or(reply, "against", "?"),
         strcmp(str_or(reply, "against", ""),
                str_or(reply, "reference", "")) == 0 ? " (the reference)"
                                                     : "");
  printf("status:     %s\n", str_or(reply, "status", "?"));
  if (json_is_object(p))
    printf("last probe: %lld %s (%s, %lld node%s, job %lld)%s%s\n",
           (long long)json_integer_value(json_object_get(p, "id")),
           str_or(p, "state", "?"), str_or(p, "why", "?"),
           (long long)json_integer_value(json_object_get(p, "nodes")),
           json_integer_value(json_object_get(p, "nodes")) == 1 ? "" : "s",
           (long long)json_integer_value(json_object_get(p, "job_id")),
           jsonx_str(p, "reason") != NULL ? ": " : "",
           str_or(p, "reason", ""));
  json_array_foreach(json_object_get(reply, "findings"), i, f)
    printf("  ! %s: %s\n", str_or(f, "rule", "?"), str_or(f, "message", ""));
  if (json_integer_value(json_object_get(reply, "more_findings")) > 0)
    printf("  ... and %lld more\n",
           (long long)json_integer_value(
               json_object_get(reply, "more_findings")));
}

static int
print_table(struct cli_table *t)
{
  int rc = cli_table_print(t, stdout) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;

  cli_table_release(t);
  return rc;
}

static int
print_show(const json_t *reply)
{
  static const char *const fhead[] = {"KEY", "VALUE"};
  static const char *const bhead[] = {"COLLECTIVE", "SIZE", "TIME US",
                                      "ALGBW GB/S", "BUSBW GB/S", "CHECK"};
  const json_t *diff = json_object_get(reply, "diff");
  const json_t *m = json_object_get(json_object_get(reply, "result"),
                                    "measurement");
  const json_t *row;
  struct cli_table t;
  size_t i;
  int rc;

  print_verdict(reply);
  if (!json_is_object(json_object_get(reply, "result")))
    return CLI_EXIT_OK;
  printf("\n");
  cli_table_init(&t, fhead, 2);
  cli_table_set_max(&t, 1, 100);
  json_array_foreach(json_object_get(diff, "fingerprint"), i, row) {
    if (jsonx_str(row, "site") != NULL)
      cli_table_add(&t, (const char *[]){jsonx_str(row, "key"),
                                         jsonx_str(row, "site")});
  }
  rc = print_table(&t);
  printf("\nmeasurement: %s%s%s\n", str_or(m, "status", "?"),
         jsonx_str(m, "reason") != NULL ? ": " : "", str_or(m, "reason", ""));
  if (json_array_size(json_object_get(m, "results")) == 0)
    return rc;
  cli_table_init(&t, bhead, 6);
  for (size_t k = 1; k <= 4; k++)
    cli_table_set_right(&t, k);
  json_array_foreach(json_object_get(m, "results"), i, row) {
    char size[32], us[32], alg[32], bus[32];

    size_label(json_integer_value(json_object_get(row, "bytes")), size,
               sizeof(size));
    snprintf(us, sizeof(us), "%.1f",
             json_number_value(json_object_get(row, "time_us")));
    snprintf(alg, sizeof(alg), "%.2f",
             json_number_value(json_object_get(row, "algbw_gbps")));
    snprintf(bus, sizeof(bus), "%.2f",
             json_number_value(json_object_get(row, "busbw_gbps")));
    cli_table_add(&t, (const char *[]){
                          str_or(row, "collective", "?"), size, us, alg, bus,
                          json_is_true(json_object_get(row, "correct"))
                              ? str_or(row, "check", "ok")
                              : "WRONG"});
  }
  return rc == CLI_EXIT_OK ? print_table(&t) : rc;
}

static int
print_diff(const json_t *reply)
{
  const json_t *diff = json_object_get(reply, "diff");
  const char *ref = str_or(reply, "against", "reference");
  const char *site = str_or(reply, "site", "site");
  const char *fhead[] = {"", "KEY", ref, site, "RULE"};
  const char *bhead[] = {"ALL-REDUCE", ref, site, "%", ""};
  const json_t *row;
  struct cli_table t;
  size_t i;
  int rc;

  print_verdict(reply);
  if (!json_is_object(diff))
    return CLI_EXIT_OK;
  printf("\n");
  cli_table_init(&t, fhead, 5);
  cli_table_set_max(&t, 2, 48);
  cli_table_set_max(&t, 3, 48);
  json_array_foreach(json_object_get(diff, "fingerprint"), i, row) {
    int differs = json_is_true(json_object_get(row, "differs"));
    const char *rule = jsonx_str(row, "rule");

    cli_table_add(&t, (const char *[]){
                          !differs ? "" : rule != NULL ? "!" : "~",
                          str_or(row, "key", "?"),
                          str_or(row, "reference", "-"),
                          str_or(row, "site", "-"), rule != NULL ? rule : ""});
  }
  rc = print_table(&t);
  if (json_array_size(json_object_get(diff, "bandwidth")) == 0 ||
      rc != CLI_EXIT_OK)
    return rc;
  printf("\nall-reduce bus bandwidth, GB/s\n");
  cli_table_init(&t, bhead, 5);
  for (size_t k = 1; k <= 3; k++)
    cli_table_set_right(&t, k);
  json_array_foreach(json_object_get(diff, "bandwidth"), i, row) {
    const json_t *r = json_object_get(row, "reference_gbps");
    const json_t *s = json_object_get(row, "site_gbps");
    const json_t *p = json_object_get(row, "pct");
    char size[32], rv[32] = "-", sv[32] = "-", pv[32] = "-";

    size_label(json_integer_value(json_object_get(row, "bytes")), size,
               sizeof(size));
    if (json_is_number(r))
      snprintf(rv, sizeof(rv), "%.2f", json_number_value(r));
    if (json_is_number(s))
      snprintf(sv, sizeof(sv), "%.2f", json_number_value(s));
    if (json_is_number(p))
      snprintf(pv, sizeof(pv), "%.0f %%", json_number_value(p));
    cli_table_add(&t, (const char *[]){
                          size, rv, sv, pv,
                          json_is_true(json_object_get(row, "judged"))
                              ? "judged" : ""});
  }
  return print_table(&t);
}

/* Follow the probe run started until it is done or failed. */
static int
wait_probe(struct cli *cli, const struct cli_baseline *o, int64_t id)
{
  struct cli_baseline show = *o;
  struct buf path;
  int status = CLI_EXIT_OK;

  show.verb = "show";
  buf_init(&path, 4096);
  if (cli_baseline_path(&show, &path) < 0)
    return CLI_EXIT_FAIL;
  for (;;) {
    struct cli_response r;
    struct err e = {0};
    json_t *reply = NULL;
    const json_t *p;
    const char *state;

    cli_response_init(&r);
    if (cli_request(cli, "GET", buf_str(&path), NULL, &r, &reply, &e) < 0) {
      cli_response_release(&r);
      status = cli_fail(&e);
      break;
    }
    p = json_object_get(reply, "latest_probe");
    state = jsonx_str(p, "state");
    if (json_integer_value(json_object_get(p, "id")) != id ||
        (state != NULL && (strcmp(state, "done") == 0 ||
                           strcmp(state, "failed") == 0))) {
      if (cli->json)
        cli_print_raw(&r);
      else
        status = print_show(reply);
      if (state != NULL && strcmp(state, "failed") == 0)
        status = CLI_EXIT_FAIL;
      json_decref(reply);
      cli_response_release(&r);
      break;
    }
    json_decref(reply);
    cli_response_release(&r);
    time_sleep_ms(1000);
  }
  buf_release(&path);
  return status;
}

static int
run(struct cli *cli, const struct cli_baseline *o, const char *path)
{
  struct cli_response r;
  struct err e = {0};
  json_t *reply = NULL, *body;
  struct buf text;
  const json_t *p;
  int status = CLI_EXIT_OK;

  cli_response_init(&r);
  buf_init(&text, 256);
  body = json_pack("{s:I}", "nodes", (json_int_t)o->nodes);
  if (jsonx_dump_buf(body, &text) < 0 ||
      cli_request(cli, "POST", path, &text, &r, &reply, &e) < 0) {
    status = cli_fail(&e);
    goto out;
  }
  p = json_object_get(reply, "probe");
  if (o->wait) {
    if (!cli->json)
      printf("probe %lld of site %s started; waiting for it...\n",
             (long long)json_integer_value(json_object_get(p, "id")),
             o->site);
    fflush(stdout);
    status = wait_probe(cli, o, json_integer_value(json_object_get(p, "id")));
  } else if (cli->json) {
    cli_print_raw(&r);
  } else {
    printf("probe %lld of site %s: %s%s%s\n",
           (long long)json_integer_value(json_object_get(p, "id")), o->site,
           str_or(p, "state", "?"), jsonx_str(p, "reason") != NULL ? ": " : "",
           str_or(p, "reason", ""));
  }
out:
  json_decref(body);
  json_decref(reply);
  buf_release(&text);
  cli_response_release(&r);
  return status;
}

int
cli_cmd_baseline(struct cli *cli, int argc, char **argv)
{
  struct cli_baseline o;
  struct err e = {0};
  struct buf path;
  int status = CLI_EXIT_OK;

  if (!cli_parsed(cli_baseline_parse(argc, argv, &o, &e), baseline_usage,
                  &e, &status))
    return status;
  buf_init(&path, 4096);
  if (cli_baseline_path(&o, &path) < 0) {
    err_set(&e, ERR_INVALID, "site name too long");
    status = cli_fail(&e);
  } else if (strcmp(o.verb, "run") == 0) {
    status = run(cli, &o, buf_str(&path));
  } else {
    status = cli_show(cli, "GET", buf_str(&path), NULL,
                      strcmp(o.verb, "show") == 0 ? print_show : print_diff);
  }
  buf_release(&path);
  return status;
}
