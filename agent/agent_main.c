/*
 * tenbin-agent: one dataset root served on one address.
 *
 *   tenbin-agent --root DIR [--listen ADDR:PORT] [--token-file FILE]
 *                [--port-file FILE] [--parallel N] [--no-fsync]
 *                [--watch] [--log-level LEVEL] [--tls-cert FILE
 *                --tls-key FILE] [--ca-file FILE] [--allow-insecure-token]
 *                [--max-conns-per-address N]
 *
 * The token comes from --token-file or TENBIN_AGENT_TOKEN; peers and
 * tenbind present it as a bearer token.
 *
 *   tenbin-agent node --server URL --root DIR --provider aws|gcp|azure|none
 *                [--token-file FILE] [--gpus SPEC] [--ca-file FILE]
 *                [--allow-insecure-token] [--log-level LEVEL]
 *
 * Node mode, on a VM a cloud site launched: it dials tenbind and runs
 * the jobs tenbind assigns (agent/node.h, docs/NODES.md).  Its token
 * comes from --token-file or TENBIN_NODE_TOKEN, the metadata service's
 * address from TENBIN_METADATA_URL (else the provider's own).
 *
 *   tenbin-agent --shim JOBDIR   (internal: a node job's shim)
 */
#include <curl/curl.h>
#include <librsync.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters/local.h"
#include "agent/agent.h"
#include "agent/node.h"
#include "agent/store.h"
#include "util/fileio.h"
#include "util/secret.h"
#include "util/log.h"

#define DEFAULT_LISTEN "127.0.0.1:8760"

struct main_state {
  uv_loop_t loop;
  uv_signal_t sigint, sigterm;
  struct agent *agent;
  int stopping;
};

static void
usage(FILE *f)
{
  fprintf(f,
          "usage: tenbin-agent --root DIR [--listen ADDR:PORT] "
          "[--token-file FILE]\n"
          "                    [--port-file FILE] [--parallel N] "
          "[--no-fsync] [--watch]\n"
          "                    [--draft-ms MS] [--log-level LEVEL]\n"
          "\n"
          "  --root DIR         the dataset root it serves (store in "
          "DIR/.tenbin)\n"
          "  --listen ADDR:PORT where to serve (default %s; port 0 picks "
          "one)\n"
          "  --token-file FILE  the bearer token (else "
          "$TENBIN_AGENT_TOKEN)\n"
          "  --port-file FILE   write the port listened on to FILE\n"
          "  --parallel N       batches in flight per pull (default 4)\n"
          "  --no-fsync         publish replicas without syncing them to "
          "disk first\n"
          "  --watch            republish a tree from the changes inotify "
          "saw, not a full\n"
          "                     scan (not for trees written through mmap "
          "or hard links\n"
          "                     from outside; never on network "
          "filesystems)\n"
          "  --draft-ms MS      with --watch, hash what changed once a "
          "tree has been quiet\n"
          "                     MS ms (>= 50), before it is published "
          "(default 250; 0: never)\n"
          "  --log-level LEVEL  debug, info, warn or error\n"
          "  --tls-cert FILE    serve HTTPS with this PEM certificate "
          "chain\n"
          "  --tls-key FILE     and this PEM key (mode 0600)\n"
          "  --ca-file FILE     PEM CAs that peers' certificates are "
          "checked against\n"
          "  --allow-insecure-token  send the token over plain http to "
          "peers not on\n"
          "                     loopback (else refused: use https)\n"
          "  --max-conns-per-address N  connections one address may hold "
          "(default 64)\n"
          "\n"
          "       tenbin-agent node --server URL --root DIR --provider P "
          "...\n"
          "  runs tenbind's jobs on a cloud VM (tenbin-agent node --help)\n",
          DEFAULT_LISTEN);
}

static int
read_token(const char *path, char *out, size_t outlen)
{
  char *text = NULL;
  struct err e = {0};

  /* The one reader of token files: a file others may read is refused. */
  if (secret_read_file(path, SECRET_FIRST_LINE, &text, NULL, &e) < 0) {
    fprintf(stderr, "tenbin-agent: --token-file: %s\n", err_msg(&e));
    return -1;
  }
  snprintf(out, outlen, "%s", text);
  secret_free(text);
  return 0;
}

static int
parse_listen(const char *s, char *host, size_t hostlen, uint16_t *port)
{
  const char *colon = strrchr(s, ':');
  char *end;
  long p;

  if (colon == NULL || (size_t)(colon - s) >= hostlen)
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  errno = 0;
  p = strtol(colon + 1, &end, 10);
  if (errno != 0 || *end != '\0' || p < 0 || p > 65535)
    return -1;
  *port = (uint16_t)p;
  return 0;
}

static void
closed_cb(void *arg)
{
  struct main_state *m = arg;

  m->agent = NULL;
  uv_close((uv_handle_t *)&m->sigint, NULL);
  uv_close((uv_handle_t *)&m->sigterm, NULL);
}

static void
signal_cb(uv_signal_t *h, int signum)
{
  struct main_state *m = h->data;

  if (m->stopping)
    return;
  m->stopping = 1;
  log_info("received %s, stopping (pulls resume on the next start)",
           strsignal(signum));
  agent_close(m->agent, closed_cb, m);
}

/* ---- node mode ---- */

struct node_main {
  uv_loop_t loop;
  uv_signal_t sigint, sigterm;
  struct node_agent *node;
  int status;
  int stopping;
};

static void
node_usage(FILE *f)
{
  fprintf(f,
          "usage: tenbin-agent node --server URL --root DIR --provider "
          "aws|gcp|azure|none\n"
          "                         [--token-file FILE] [--gpus SPEC] "
          "[--site NAME]\n"
          "                         [--ca-file FILE]\n"
          "                         [--allow-insecure-token] [--log-level "
          "LEVEL]\n"
          "\n"
          "  --server URL       tenbind's address (https://HOST:PORT)\n"
          "  --root DIR         job directories and logs go in DIR/node\n"
          "  --provider P       whose spot interruption notices to watch "
          "(none: no polling)\n"
          "  --token-file FILE  the node token (else $TENBIN_NODE_TOKEN)\n"
          "  --gpus SPEC        auto (nvidia-smi, the default), none, or "
          "TYPE:N such as h100:8\n"
          "  --site NAME        the site its jobs see as TENBIN_SITE "
          "(default: node)\n"
          "  --ca-file FILE     PEM CAs that tenbind's certificate is "
          "checked against\n"
          "  --allow-insecure-token  send the token over plain http to a "
          "host not on\n"
          "                     loopback (else refused: use https)\n"
          "  --log-level LEVEL  debug, info, warn or error\n"
          "\n"
          "$TENBIN_METADATA_URL replaces the provider's metadata address.\n"
          "Exit status: 0 when tenbind retired the node (or on SIGTERM), "
          "2 for bad\n"
          "arguments or a token tenbind refused, 1 when it could not "
          "start.\n");
}

static void
node_closed_cb(void *arg)
{
  struct node_main *m = arg;

  m->node = NULL;
  uv_close((uv_handle_t *)&m->sigint, NULL);
  uv_close((uv_handle_t *)&m->sigterm, NULL);
}

static void
node_stop(struct node_main *m, int status)
{
  if (m->stopping)
    return;
  m->stopping = 1;
  m->status = status;
  node_agent_close(m->node, node_closed_cb, m);
}

static void
node_on_exit(void *arg, int status)
{
  node_stop(arg, status);
}

static void
node_signal_cb(uv_signal_t *h, int signum)
{
  struct node_main *m = h->data;

  log_info("received %s, stopping (jobs keep running)", strsignal(signum));
  node_stop(m, 0);
}

static int
node_main(int argc, char **argv)
{
  static const struct option opts[] = {
      {"server", required_argument, NULL, 's'},
      {"root", required_argument, NULL, 'r'},
      {"provider", required_argument, NULL, 'P'},
      {"token-file", required_argument, NULL, 't'},
      {"gpus", required_argument, NULL, 'g'},
      {"site", required_argument, NULL, 'S'},
      {"ca-file", required_argument, NULL, 'A'},
      {"allow-insecure-token", no_argument, NULL, 'I'},
      {"log-level", required_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  struct node_main m;
  struct node_config cfg;
  struct err e = {0};
  char token[4097] = "";
  const char *token_file = NULL;
  const char *provider = NULL;
  enum log_level level;
  int c;

  memset(&m, 0, sizeof(m));
  memset(&cfg, 0, sizeof(cfg));
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 's':
      cfg.server = optarg;
      break;
    case 'r':
      cfg.root = optarg;
      break;
    case 'P':
      provider = optarg;
      break;
    case 't':
      token_file = optarg;
      break;
    case 'g':
      cfg.gpus = optarg;
      break;
    case 'S':
      cfg.site = optarg;
      break;
    case 'A':
      cfg.ca_file = optarg;
      break;
    case 'I':
      cfg.allow_insecure_tokens = 1;
      break;
    case 'v':
      if (log_parse_level(optarg, &level) < 0) {
        fprintf(stderr, "tenbin-agent node: --log-level: debug, info, warn "
                        "or error\n");
        return 2;
      }
      log_set_level(level);
      break;
    case 'h':
      node_usage(stdout);
      return 0;
    default:
      node_usage(stderr);
      return 2;
    }
  }
  if (cfg.server == NULL || cfg.root == NULL || provider == NULL ||
      optind != argc) {
    node_usage(stderr);
    return 2;
  }
  if (node_provider_parse(provider, &cfg.provider) < 0) {
    fprintf(stderr, "tenbin-agent node: --provider: aws, gcp, azure or "
                    "none\n");
    return 2;
  }
  if (token_file != NULL) {
    if (read_token(token_file, token, sizeof(token)) < 0)
      return 2;
  } else if (getenv("TENBIN_NODE_TOKEN") != NULL) {
    snprintf(token, sizeof(token), "%s", getenv("TENBIN_NODE_TOKEN"));
  }
  /* Jobs inherit this process's environment (export ALL): the node's
   * credential must not be in it. */
  unsetenv("TENBIN_NODE_TOKEN");
  cfg.token = token;
  cfg.metadata_url = getenv("TENBIN_METADATA_URL");
  cfg.agent_version = TENBIN_VERSION;
  cfg.on_exit = node_on_exit;
  cfg.on_exit_arg = &m;

  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  uv_loop_init(&m.loop);
  m.status = 1;
  if (node_agent_start(&m.loop, &cfg, &m.node, &e) < 0) {
    fprintf(stderr, "tenbin-agent node: %s\n", err_msg(&e));
    m.status = e.code == ERR_CONFIG ? 2 : 1;
    /* What the failed start opened closes on the loop. */
    uv_run(&m.loop, UV_RUN_DEFAULT);
    goto out;
  }
  uv_signal_init(&m.loop, &m.sigint);
  uv_signal_init(&m.loop, &m.sigterm);
  m.sigint.data = &m;
  m.sigterm.data = &m;
  uv_signal_start(&m.sigint, node_signal_cb, SIGINT);
  uv_signal_start(&m.sigterm, node_signal_cb, SIGTERM);
  uv_run(&m.loop, UV_RUN_DEFAULT);
out:
  memset(token, 0, sizeof(token));
  if (uv_loop_close(&m.loop) != 0)
    log_warn("loop closed with handles still open");
  curl_global_cleanup();
  return m.status;
}

int
main(int argc, char **argv)
{
  static const struct option opts[] = {
      {"root", required_argument, NULL, 'r'},
      {"listen", required_argument, NULL, 'l'},
      {"token-file", required_argument, NULL, 't'},
      {"port-file", required_argument, NULL, 'p'},
      {"parallel", required_argument, NULL, 'j'},
      {"no-fsync", no_argument, NULL, 'n'},
      {"watch", no_argument, NULL, 'w'},
      {"draft-ms", required_argument, NULL, 'd'},
      {"log-level", required_argument, NULL, 'v'},
      {"tls-cert", required_argument, NULL, 'C'},
      {"tls-key", required_argument, NULL, 'K'},
      {"ca-file", required_argument, NULL, 'A'},
      {"allow-insecure-token", no_argument, NULL, 'I'},
      {"max-conns-per-address", required_argument, NULL, 'M'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  struct main_state m;
  struct agent_config cfg;
  struct err e = {0};
  char host[64];
  char token[4097] = "";
  const char *listen = DEFAULT_LISTEN;
  const char *token_file = NULL;
  const char *port_file = NULL;
  enum log_level level;
  int c;
  int rc = 1;

  /* The node mode's jobs run under this executable as their shim. */
  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  if (argc >= 2 && strcmp(argv[1], "node") == 0)
    return node_main(argc - 1, argv + 1);

  /* Batches and I/O buffers are 1-16 MiB of every size.  glibc would
   * raise its mmap threshold after the first such free and keep the rest
   * in arenas (150 MiB held idle after serving a 1 GiB pull); a fixed
   * threshold gives each back when it is freed. */
  (void)mallopt(M_MMAP_THRESHOLD, 1 << 20);

  memset(&m, 0, sizeof(m));
  memset(&cfg, 0, sizeof(cfg));
  cfg.fsync_publish = 1;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      cfg.root = optarg;
      break;
    case 'l':
      listen = optarg;
      break;
    case 't':
      token_file = optarg;
      break;
    case 'p':
      port_file = optarg;
      break;
    case 'j': {
      char *end;
      long n = strtol(optarg, &end, 10);

      if (*optarg == '\0' || *end != '\0' || n < 1 || n > 64) {
        fprintf(stderr, "tenbin-agent: --parallel must be 1..64\n");
        return 2;
      }
      cfg.parallel = (unsigned)n;
      break;
    }
    case 'n':
      cfg.fsync_publish = 0;
      break;
    case 'w':
      cfg.watch = 1;
      break;
    case 'd': {
      char *end;
      long n = strtol(optarg, &end, 10);

      /* Shorter than a coarse clock's tick, a write right after a draft
       * could keep the timestamps it recorded (serve.c). */
      if (*optarg == '\0' || *end != '\0' || n < 0 || (n > 0 && n < 50) ||
          n > 3600000) {
        fprintf(stderr, "tenbin-agent: --draft-ms must be 0 (never) or "
                        "50..3600000\n");
        return 2;
      }
      cfg.draft_ms = n == 0 ? -1 : (int)n;
      break;
    }
    case 'v':
      if (log_parse_level(optarg, &level) < 0) {
        fprintf(stderr, "tenbin-agent: --log-level: debug, info, warn or "
                        "error\n");
        return 2;
      }
      log_set_level(level);
      break;
    case 'C':
      cfg.tls_cert_file = optarg;
      break;
    case 'K':
      cfg.tls_key_file = optarg;
      break;
    case 'A':
      cfg.ca_file = optarg;
      break;
    case 'I':
      cfg.allow_insecure_tokens = 1;
      break;
    case 'M': {
      char *end;
      long n = strtol(optarg, &end, 10);

      if (*optarg == '\0' || *end != '\0' || n < 1 || n > 65536) {
        fprintf(stderr, "tenbin-agent: --max-conns-per-address must be "
                        "1..65536\n");
        return 2;
      }
      cfg.max_per_address = (unsigned)n;
      break;
    }
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (cfg.root == NULL || optind != argc) {
    usage(stderr);
    return 2;
  }
  if (parse_listen(listen, host, sizeof(host), &cfg.port) < 0) {
    fprintf(stderr, "tenbin-agent: --listen '%s': want ADDR:PORT\n",
            listen);
    return 2;
  }
  cfg.host = host;
  if (token_file != NULL) {
    if (read_token(token_file, token, sizeof(token)) < 0)
      return 2;
  } else if (getenv("TENBIN_AGENT_TOKEN") != NULL) {
    snprintf(token, sizeof(token), "%s", getenv("TENBIN_AGENT_TOKEN"));
  }
  cfg.token = token;

  /* Hashing, librsync and file I/O run on libuv's pool: give it room
   * for every core and for the batches and pulls that wait on I/O. */
  if (getenv("UV_THREADPOOL_SIZE") == NULL) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    char n[24];

    snprintf(n, sizeof(n), "%ld", ncpu < 4 ? 8 : ncpu * 2);
    setenv("UV_THREADPOOL_SIZE", n, 1);
  }
  /* A write past RLIMIT_FSIZE must be an EFBIG we report, not a kill. */
  signal(SIGXFSZ, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  /* A peer's bad delta is our error to report, not librsync's to print. */
  rs_trace_set_level(RS_LOG_EMERG);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  uv_loop_init(&m.loop);
  if (agent_start(&m.loop, &cfg, &m.agent, &e) < 0) {
    fprintf(stderr, "tenbin-agent: %s\n", err_msg(&e));
    /* What the failed start closes (its HTTP client) closes on the loop. */
    uv_run(&m.loop, UV_RUN_DEFAULT);
    goto out;
  }
  if (port_file != NULL) {
    char text[16];
    int n = snprintf(text, sizeof(text), "%u\n", agent_port(m.agent));

    if (store_write_file(port_file, text, (size_t)n, &e) < 0) {
      fprintf(stderr, "tenbin-agent: %s\n", err_msg(&e));
      goto out;
    }
  }
  uv_signal_init(&m.loop, &m.sigint);
  uv_signal_init(&m.loop, &m.sigterm);
  m.sigint.data = &m;
  m.sigterm.data = &m;
  uv_signal_start(&m.sigint, signal_cb, SIGINT);
  uv_signal_start(&m.sigterm, signal_cb, SIGTERM);
  log_info("tenbin-agent serving '%s' on %s://%s:%u", cfg.root,
           cfg.tls_cert_file != NULL ? "https" : "http", host,
           agent_port(m.agent));
  uv_run(&m.loop, UV_RUN_DEFAULT);
  rc = 0;

out:
  if (m.agent != NULL && !m.stopping) {
    agent_close(m.agent, NULL, NULL);
    uv_run(&m.loop, UV_RUN_DEFAULT);
  }
  if (uv_loop_close(&m.loop) != 0)
    log_warn("loop closed with handles still open");
  curl_global_cleanup();
  return rc;
}
