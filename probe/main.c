/*
 * tenbin-probe: fingerprint this GPU node and measure NCCL collectives,
 * then write one "tenbin-probe/1" document to stdout (and --out FILE)
 * and POST it to tenbind when TENBIN_PROBE_URL (or --report) is set.
 *
 * Exit status: 0 when the document was written (and reported, when a
 * URL is set), also when the measurement was skipped or failed; 1 for
 * bad options or a document that could not be written; 2 when
 * reporting failed.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe/probe.h"
#include "util/jsonx.h"

extern char **environ;

/* Connection errors and 5xx are retried this often, 1 s, 2 s... apart. */
#define REPORT_ATTEMPTS 6
#define REPORT_BACKOFF_MS 1000

static void
usage(FILE *f)
{
  fprintf(f,
          "usage: tenbin-probe [--out FILE] [--no-measure] [--bundle DIR]\n"
          "                    [--node-rank N --nodes N] [--min-bytes N] "
          "[--max-bytes N]\n"
          "                    [--iters N] [--warmup N] "
          "[--rendezvous-timeout S]\n"
          "                    [--report URL]\n"
          "\n"
          "  --out FILE         also write the document to FILE\n"
          "  --no-measure       fingerprint only\n"
          "  --bundle DIR       the dataset bundle (else "
          "$TENBIN_BUNDLE_DIR)\n"
          "  --node-rank N      this node's rank (else $TENBIN_NODE_RANK, "
          "$SLURM_NODEID, 0)\n"
          "  --nodes N          nodes in the run (else $TENBIN_NODES, "
          "$SLURM_NNODES, 1)\n"
          "  --min-bytes N      smallest message, a power of two (default "
          "8; K, M, G)\n"
          "  --max-bytes N      largest message (default 8G)\n"
          "  --iters N          timed iterations per size (default 20)\n"
          "  --warmup N         untimed iterations before them (default "
          "5)\n"
          "  --rendezvous-timeout S  how long nodes wait for node 0's "
          "NCCL id (default 300)\n"
          "  --report URL       tenbind's probe URL (else "
          "$TENBIN_PROBE_URL); the token\n"
          "                     comes from $TENBIN_PROBE_TOKEN\n"
          "  --sysroot DIR      read /sys, /proc and /etc under DIR (for "
          "tests)\n");
}

static int
parse_count(const char *s, const char *what, long min, long max, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
    fprintf(stderr, "tenbin-probe: %s '%.32s': must be from %ld to %ld\n",
            what, s, min, max);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int
power_of_two(int64_t v)
{
  return v > 0 && (v & (v - 1)) == 0;
}

static int
write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  int rc = 0;

  if (f == NULL) {
    fprintf(stderr, "tenbin-probe: --out '%s': %s\n", path,
            strerror(errno));
    return -1;
  }
  if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
    rc = -1;
  if (fclose(f) != 0)
    rc = -1;
  if (rc < 0)
    fprintf(stderr, "tenbin-probe: --out '%s': %s\n", path,
            strerror(errno));
  return rc;
}

int
main(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"out", required_argument, NULL, 'o'},
      {"no-measure", no_argument, NULL, 'n'},
      {"bundle", required_argument, NULL, 'b'},
      {"node-rank", required_argument, NULL, 'r'},
      {"nodes", required_argument, NULL, 'N'},
      {"min-bytes", required_argument, NULL, 'm'},
      {"max-bytes", required_argument, NULL, 'M'},
      {"iters", required_argument, NULL, 'i'},
      {"warmup", required_argument, NULL, 'w'},
      {"rendezvous-timeout", required_argument, NULL, 't'},
      {"report", required_argument, NULL, 'u'},
      {"sysroot", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  struct probe_opts o;
  struct err e = {0};
  const char *out_path = NULL, *opt_rank = NULL, *opt_nodes = NULL;
  json_t *doc = NULL;
  char *pretty = NULL, *compact = NULL;
  int status = 1;
  int c;

  probe_opts_init(&o);
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'o':
      out_path = optarg;
      break;
    case 'n':
      o.measure = 0;
      break;
    case 'b':
      o.bundle_dir = optarg;
      break;
    case 'r':
      opt_rank = optarg;
      break;
    case 'N':
      opt_nodes = optarg;
      break;
    case 'm':
    case 'M':
      if (probe_parse_size(optarg, c == 'm' ? "--min-bytes" : "--max-bytes",
                           c == 'm' ? &o.min_bytes : &o.max_bytes,
                           &e) < 0) {
        fprintf(stderr, "tenbin-probe: %s\n", err_msg(&e));
        return 1;
      }
      break;
    case 'i':
      if (parse_count(optarg, "--iters", 1, 100000, &o.iters) < 0)
        return 1;
      break;
    case 'w':
      if (parse_count(optarg, "--warmup", 1, 10000, &o.warmup) < 0)
        return 1;
      break;
    case 't':
      if (parse_count(optarg, "--rendezvous-timeout", 1, 86400,
                      &o.rendezvous_timeout_s) < 0)
        return 1;
      break;
    case 'u':
      o.url = optarg;
      break;
    case 's':
      o.sysroot = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'V':
      printf("tenbin-probe %s\n", PROBE_VERSION);
      return 0;
    default:
      usage(stderr);
      return 1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "tenbin-probe: unexpected argument '%s'\n",
            argv[optind]);
    usage(stderr);
    return 1;
  }
  if (!power_of_two(o.min_bytes) || o.min_bytes < 4 ||
      !power_of_two(o.max_bytes) || o.max_bytes < o.min_bytes) {
    fprintf(stderr, "tenbin-probe: --min-bytes and --max-bytes must be "
            "powers of two, at least 4, min <= max\n");
    return 1;
  }
  if (probe_place(opt_rank, opt_nodes, environ, &o.node_rank, &o.nodes,
                  &e) < 0) {
    fprintf(stderr, "tenbin-probe: %s\n", err_msg(&e));
    return 1;
  }
  if (o.url == NULL)
    o.url = probe_getenv(environ, "TENBIN_PROBE_URL");
  if (o.url != NULL && o.url[0] == '\0')
    o.url = NULL;
  o.token = probe_getenv(environ, "TENBIN_PROBE_TOKEN");
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "tenbin-probe: curl_global_init failed\n");
    return 1;
  }

  doc = probe_build(&o, environ);
  pretty = json_dumps(doc, JSON_INDENT(2));
  compact = jsonx_dump(doc);
  if (pretty == NULL)
    goto out;
  if (puts(pretty) == EOF || fflush(stdout) != 0) {
    fprintf(stderr, "tenbin-probe: cannot write to stdout\n");
    goto out;
  }
  if (out_path != NULL && write_file(out_path, pretty) < 0)
    goto out;
  status = 0;
  if (o.url != NULL) {
    if (o.token == NULL) {
      fprintf(stderr, "tenbin-probe: report: TENBIN_PROBE_TOKEN is not "
              "set\n");
      status = 2;
    } else if (probe_report(o.url, o.token, compact, REPORT_ATTEMPTS,
                            REPORT_BACKOFF_MS, &e) < 0) {
      fprintf(stderr, "tenbin-probe: report: %s\n", err_msg(&e));
      status = 2;
    }
  }
out:
  free(pretty);
  free(compact);
  json_decref(doc);
  curl_global_cleanup();
  return status;
}
