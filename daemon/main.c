/*
 * tenbind: the composition root.  config -> broker -> api -> http server
 * -> uv_run, and the reverse on SIGINT/SIGTERM.  Jobs keep running across
 * a stop; the next start re-attaches to them.
 *
 *   tenbind [--listen ADDR:PORT] [--state DIR] [--config FILE]
 *           [--log-level LEVEL]
 *   tenbind --check-config FILE   (check it as a start would; exit 0/1)
 *
 * SIGHUP reads the config file again and applies what may change while
 * running (broker_reload: prices, job environments, workloads, wait
 * values, the baseline, the log level); a change that needs a restart
 * is refused as a whole, naming the field.
 *   tenbind token create --role ROLE [--project P]... [--name N]
 *           [--state DIR]
 *   tenbind --shim JOBDIR        (internal: the local site's job shim)
 */
/* nftw() */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/local.h"
#include "api/api.h"
#include "broker/broker.h"
#include "daemon/config.h"
#include "http/server.h"
#include "spec/jobspec.h"
#include "util/alloc.h"
#include "util/log.h"

#ifndef TENBIN_VERSION
#define TENBIN_VERSION "dev"
#endif

#define MAX_BODY (1024 * 1024)
#define CONN_TIMEOUT_S 60
/* Request bodies (up to MAX_BODY) and answers from this size up are
 * mmap'd, so their memory goes back to the system when freed: glibc's
 * sliding threshold would otherwise keep a burst of 1 MiB uploads in
 * the heap after they are done. */
#define MMAP_THRESHOLD (256 * 1024)

struct daemon {
  uv_loop_t loop;
  uv_signal_t sigint;
  uv_signal_t sigterm;
  uv_signal_t sighup;
  struct daemon_config *cfg;   /* in force; replaced by a reload */
  const char *config_path;     /* NULL: the embedded default */
  const char *listen;          /* --listen, or NULL */
  int level_given;             /* --log-level outranks the file's */
  struct broker *broker;
  struct api *api;
  struct http_server *http;
  int stopping;
};

static void
usage(FILE *f)
{
  fprintf(f,
          "usage: tenbind [--listen ADDR:PORT] [--state DIR] "
          "[--config FILE] [--log-level LEVEL]\n"
          "       tenbind token create --role admin|submitter|viewer "
          "[--project P]... [--name N] [--state DIR]\n"
          "       tenbind --check-config FILE\n"
          "\n"
          "  --listen ADDR:PORT  address to serve the REST API on "
          "(default %s)\n"
          "  --state DIR         where the database and job logs live "
          "(default var)\n"
          "  --config FILE       JSON configuration (default: embedded: "
          "one local site)\n"
          "  --log-level LEVEL   debug, info, warn or error\n"
          "  --check-config FILE check FILE as a start would (sites, "
          "workloads,\n"
          "                      baseline...) and exit: 0 when tenbind "
          "would start\n"
          "\n"
          "SIGHUP reads the config file again: prices, job_env, "
          "workloads, wait\n"
          "values, the baseline and the log level change at once; "
          "anything else\n"
          "needs a restart and the reload is refused, naming it.\n",
          CONFIG_DEFAULT_LISTEN);
}

static int
make_state_dir(const char *dir, struct err *e)
{
  if (mkdir(dir, 0750) < 0 && errno != EEXIST)
    return err_set(e, ERR_IO, "cannot create state directory '%s': %s",
                   dir, strerror(errno));
  return 0;
}

static void
db_path_of(const char *state, char *out, size_t outlen)
{
  snprintf(out, outlen, "%s/tenbin.db", state);
}

/* tenbind token create ... */
static int
token_main(int argc, char **argv)
{
  static const struct option opts[] = {
      {"role", required_argument, NULL, 'r'},
      {"project", required_argument, NULL, 'p'},
      {"name", required_argument, NULL, 'n'},
      {"state", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *state = "var";
  const char *name = NULL;
  const char *role_s = NULL;
  char **projects = NULL;
  char dbpath[PATH_MAX];
  char token[96];
  struct err e = {0};
  enum broker_role role;
  int c;
  int rc = 2;

  if (argc < 2 || strcmp(argv[1], "create") != 0) {
    fprintf(stderr, "usage: tenbind token create --role ROLE "
                    "[--project P]... [--name N] [--state DIR]\n");
    return 2;
  }
  optind = 2;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      role_s = optarg;
      break;
    case 'p':
      strv_push(&projects, optarg);
      break;
    case 'n':
      name = optarg;
      break;
    case 's':
      state = optarg;
      break;
    case 'h':
      printf("usage: tenbind token create --role admin|submitter|viewer "
             "[--project P]... [--name N] [--state DIR]\n"
             "Prints a new API token once; only its hash is stored.\n");
      rc = 0;
      goto out;
    default:
      goto out;
    }
  }
  if (role_s == NULL || broker_role_parse(role_s, &role) < 0) {
    fprintf(stderr, "tenbind: --role must be admin, submitter or viewer\n");
    goto out;
  }
  rc = 1;
  if (make_state_dir(state, &e) < 0)
    goto fail;
  db_path_of(state, dbpath, sizeof(dbpath));
  if (broker_token_create(dbpath, role, projects, name, token,
                          sizeof(token), &e) < 0)
    goto fail;
  printf("%s\n", token);
  rc = 0;
  goto out;

fail:
  fprintf(stderr, "tenbind: %s\n", err_msg(&e));
out:
  strv_free(projects);
  return rc;
}

static void
broker_closed_cb(void *arg)
{
  struct daemon *d = arg;

  d->broker = NULL;
  uv_close((uv_handle_t *)&d->sigint, NULL);
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  uv_close((uv_handle_t *)&d->sighup, NULL);
}

static void
http_closed_cb(void *arg)
{
  struct daemon *d = arg;

  d->http = NULL;
  api_free(d->api);
  d->api = NULL;
  broker_close(d->broker, broker_closed_cb, d);
}

static void
signal_cb(uv_signal_t *h, int signum)
{
  struct daemon *d = h->data;

  if (d->stopping)
    return;
  d->stopping = 1;
  log_info("received %s, stopping (running jobs keep running)",
           strsignal(signum));
  /* Order matters: no new work, answer what was accepted, then close the
   * server (which drops whatever is still unanswered). */
  api_stop(d->api);
  broker_flush(d->broker);
  http_server_close(d->http, http_closed_cb, d);
}

/* The probes' way back to tenbind, unless the config names one: the
 * address it listens on (loopback for a wildcard), with the port the
 * server got. */
static void
tell_own_url(const struct daemon_config *cfg, struct daemon *d)
{
  char url[128];
  const char *h = strcmp(cfg->host, "0.0.0.0") == 0 ? "127.0.0.1"
                  : strcmp(cfg->host, "::") == 0    ? "::1"
                                                    : cfg->host;

  snprintf(url, sizeof(url), "%s://%s%s%s:%u",
           cfg->tls_cert_file != NULL ? "https" : "http",
           strchr(h, ':') ? "[" : "", h, strchr(h, ':') ? "]" : "",
           http_server_port(d->http));
  broker_baseline_set_url(d->broker, url);
}

/* The broker's view of cfg; paths borrowed. */
static void
broker_config_of(const struct daemon_config *cfg, const char *state,
                 const char *dbpath, const char *exe,
                 struct broker_config *bc)
{
  memset(bc, 0, sizeof(*bc));
  bc->state_dir = state;
  bc->db_path = dbpath;
  bc->self_exe = exe;
  bc->placement = cfg->placement;
  bc->wait_value = cfg->wait_value;
  bc->burst = cfg->burst;
  bc->baseline = cfg->baseline;
  bc->sites = cfg->sites;
  bc->workloads = cfg->workloads;
  bc->projects = cfg->projects;
  bc->tick_ms = cfg->tick_ms;
  bc->time_zone = cfg->time_zone;
  bc->ca_file = cfg->ca_file;
  bc->allow_insecure_tokens = cfg->allow_insecure_tokens;
}

/* Read the config file again and apply it, or refuse it whole. */
static void
reload(struct daemon *d)
{
  struct daemon_config next;
  struct broker_config bc;
  const char *field;
  char *summary = NULL;
  struct err e = {0};

  if (d->config_path == NULL) {
    log_warn("SIGHUP: tenbind runs on its embedded default, which does "
             "not change; nothing to reload");
    return;
  }
  if (config_load(d->config_path, d->listen, &next, &e) < 0) {
    log_error("reload refused, the running configuration stays: %s",
              err_msg(&e));
    return;
  }
  field = config_restart_field(d->cfg, &next);
  if (field != NULL) {
    log_error("reload refused, nothing changed: %s: field '%s' changed, "
              "which needs a restart", d->config_path, field);
    config_release(&next);
    return;
  }
  broker_config_of(&next, NULL, NULL, NULL, &bc);
  if (broker_reload(d->broker, &bc, &summary, &e) < 0) {
    log_error("reload refused, nothing changed: %s: %s", d->config_path,
              err_msg(&e));
    config_release(&next);
    return;
  }
  if (!d->level_given)
    log_set_level(next.log_level);
  log_info("reloaded %s: %s", d->config_path, summary);
  free(summary);
  /* The broker's new prices and policy live in next's JSON now. */
  config_release(d->cfg);
  *d->cfg = next;
}

static void
sighup_cb(uv_signal_t *h, int signum)
{
  struct daemon *d = h->data;

  (void)signum;
  if (!d->stopping)
    reload(d);
}

static int
serve(struct daemon_config *cfg, const char *config_path,
      const char *listen, int level_given, const char *state)
{
  struct daemon d;
  struct broker_config bc;
  struct http_server_config hc;
  struct api_config ac;
  struct err e = {0};
  char dbpath[PATH_MAX];
  char exe[PATH_MAX];
  char names[256] = "";
  ssize_t n;
  int rc = 1;

  memset(&d, 0, sizeof(d));
  if (make_state_dir(state, &e) < 0)
    goto fail_early;
  n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n < 0) {
    err_set(&e, ERR_IO, "cannot find my own executable: %s",
            strerror(errno));
    goto fail_early;
  }
  exe[n] = '\0';
  db_path_of(state, dbpath, sizeof(dbpath));
  uv_loop_init(&d.loop);

  d.cfg = cfg;
  d.config_path = config_path;
  d.listen = listen;
  d.level_given = level_given;
  broker_config_of(cfg, state, dbpath, exe, &bc);
  if (broker_new(&d.loop, &bc, &d.broker, &e) < 0)
    goto fail;

  memset(&ac, 0, sizeof(ac));
  ac.auth = cfg->auth;
  ac.version = TENBIN_VERSION;
  if (api_new(d.broker, &ac, &d.api, &e) < 0)
    goto fail;

  memset(&hc, 0, sizeof(hc));
  hc.host = cfg->host;
  hc.port = cfg->port;
  hc.max_body = MAX_BODY;
  hc.max_connections = (unsigned)cfg->max_connections;
  hc.max_per_address = (unsigned)cfg->max_per_address;
  hc.header_timeout_s = (unsigned)cfg->header_timeout_s;
  hc.min_body_rate = (unsigned)cfg->min_body_rate;
  hc.conn_timeout_s = CONN_TIMEOUT_S;
  hc.tls_cert_file = cfg->tls_cert_file;
  hc.tls_key_file = cfg->tls_key_file;
  hc.head_handler = api_handle_head;
  hc.handler = api_handle;
  hc.handler_arg = d.api;
  if (http_server_start(&d.loop, &hc, &d.http, &e) < 0)
    goto fail;
  tell_own_url(cfg, &d);

  uv_signal_init(&d.loop, &d.sigint);
  uv_signal_init(&d.loop, &d.sigterm);
  d.sigint.data = &d;
  d.sigterm.data = &d;
  uv_signal_start(&d.sigint, signal_cb, SIGINT);
  uv_signal_start(&d.sigterm, signal_cb, SIGTERM);
  uv_signal_init(&d.loop, &d.sighup);
  d.sighup.data = &d;
  uv_signal_start(&d.sighup, sighup_cb, SIGHUP);

  for (size_t i = 0; i < json_array_size(cfg->sites); i++) {
    const char *nm = json_string_value(
        json_object_get(json_array_get(cfg->sites, i), "name"));
    size_t used = strlen(names);

    snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
             nm ? nm : "?");
  }
  if (!cfg->auth)
    log_warn("auth is off: anyone who can reach %s can use the API "
             "(allowed only on loopback)", cfg->host);
  if (cfg->tls_cert_file == NULL && !config_is_loopback(cfg->host))
    log_warn("serving plain http on %s: tokens travel in clear unless a "
             "proxy in front adds TLS (set tls.cert_file and "
             "tls.key_file)", cfg->host);
  printf("tenbind %s listening on %s://%s%s%s:%u\n"
         "  state: %s (database %s)\n"
         "  sites: %s\n"
         "  submit a job: tenbin submit --gpus 0 --project demo -- sh -c "
         "'echo hello'\n",
         TENBIN_VERSION, cfg->tls_cert_file != NULL ? "https" : "http",
         strchr(cfg->host, ':') ? "[" : "", cfg->host,
         strchr(cfg->host, ':') ? "]" : "", http_server_port(d.http), state,
         dbpath, names);
  fflush(stdout);

  uv_run(&d.loop, UV_RUN_DEFAULT);
  rc = 0;
  goto out;

fail:
  if (e.code == ERR_CONFIG) {
    /* A mistake in the file: say which file, like config_load does. */
    fprintf(stderr, "tenbind: %s: %s\n",
            config_path ? config_path : "embedded default", err_msg(&e));
    rc = 2;
  } else {
    log_error("%s", err_msg(&e));
  }
  if (d.api != NULL)
    api_free(d.api);
  if (d.broker != NULL)
    broker_close(d.broker, NULL, NULL);
  /* Let whatever was opened finish closing. */
  uv_run(&d.loop, UV_RUN_DEFAULT);
out:
  if (uv_loop_close(&d.loop) != 0)
    log_warn("event loop closed with handles still open");
  return rc;

fail_early:
  log_error("%s", err_msg(&e));
  return 1;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) < 0 ? -1 : 0;
}

static void
closed_cb(void *arg)
{
  *(int *)arg = 1;
}

/*
 * --check-config: open everything a start opens (the sites' adapters,
 * the workloads, the policy, the baseline) on a scratch state directory
 * and database, then close it without running the loop's work: the
 * same checks as a start, no job touched, no site called.
 */
static int
check_config(struct daemon_config *cfg, const char *path)
{
  char dir[] = "/tmp/tenbind-check-XXXXXX";
  char dbpath[PATH_MAX], exe[PATH_MAX];
  struct broker_config bc;
  struct broker *b = NULL;
  struct err e = {0};
  uv_loop_t loop;
  ssize_t n;
  int closed = 0, rc;

  n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n < 0 || mkdtemp(dir) == NULL) {
    fprintf(stderr, "tenbind: --check-config: %s\n", strerror(errno));
    return 1;
  }
  exe[n] = '\0';
  db_path_of(dir, dbpath, sizeof(dbpath));
  uv_loop_init(&loop);
  broker_config_of(cfg, dir, dbpath, exe, &bc);
  rc = broker_new(&loop, &bc, &b, &e);
  if (rc == 0)
    broker_close(b, closed_cb, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  (void)uv_loop_close(&loop);
  (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc < 0) {
    fprintf(stderr, "tenbind: %s: %s\n", path, err_msg(&e));
    return 1;
  }
  printf("%s: OK: %zu site%s, %zu workload%s%s\n", path,
         json_array_size(cfg->sites),
         json_array_size(cfg->sites) == 1 ? "" : "s",
         json_array_size(cfg->workloads),
         json_array_size(cfg->workloads) == 1 ? "" : "s",
         cfg->baseline != NULL ? ", a baseline" : "");
  return closed ? 0 : 1;
}

int
main(int argc, char **argv)
{
  static const struct option opts[] = {
      {"listen", required_argument, NULL, 'l'},
      {"state", required_argument, NULL, 's'},
      {"config", required_argument, NULL, 'c'},
      {"log-level", required_argument, NULL, 'L'},
      {"check-config", required_argument, NULL, 'C'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  const char *listen = NULL;
  const char *state = "var";
  const char *config_path = NULL;
  const char *level = NULL;
  const char *check = NULL;
  struct daemon_config cfg;
  struct err e = {0};
  enum log_level lvl;
  int c;
  int rc;

  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  if (argc >= 2 && strcmp(argv[1], "token") == 0)
    return token_main(argc - 1, argv + 1);
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'l':
      listen = optarg;
      break;
    case 's':
      state = optarg;
      break;
    case 'c':
      config_path = optarg;
      break;
    case 'L':
      level = optarg;
      break;
    case 'C':
      check = optarg;
      config_path = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'V':
      printf("tenbind %s\n", TENBIN_VERSION);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind != argc) {
    usage(stderr);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  (void)mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
  if (config_load(config_path, listen, &cfg, &e) < 0) {
    fprintf(stderr, "tenbind: %s\n", err_msg(&e));
    return check != NULL ? 1 : 2;
  }
  log_set_level(cfg.log_level);
  if (level != NULL) {
    if (log_parse_level(level, &lvl) < 0) {
      fprintf(stderr, "tenbind: --log-level: '%s' is not debug, info, warn "
                      "or error\n", level);
      config_release(&cfg);
      return 2;
    }
    log_set_level(lvl);
  }
  /* Once, before any thread or handle: the Slurm adapter's HTTP client
   * needs it, and curl_global_init is not thread-safe. */
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    fprintf(stderr, "tenbind: cannot initialise libcurl\n");
    config_release(&cfg);
    return 1;
  }
  rc = check != NULL ? check_config(&cfg, check)
                     : serve(&cfg, config_path, listen, level != NULL, state);
  config_release(&cfg);
  curl_global_cleanup();
  return rc;
}
