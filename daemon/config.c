/*
 * Configuration file loading and checking.
 */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/jobspec.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"

/* A config file is small; a bigger one is a mistake worth reporting. */
#define CONFIG_MAX_BYTES (4 * 1024 * 1024)

const char config_default_json[] =
    "{\n"
    "  \"listen\": \"127.0.0.1:8750\",\n"
    "  \"auth\": {\"enabled\": false},\n"
    "  \"sites\": [{\"name\": \"local\", \"kind\": \"local\"}],\n"
    "  \"policy\": {\"placement\": \"first-fit\"}\n"
    "}\n";

const struct jsonx_field config_top_fields[] = {
    {"listen", JX_STRING},   {"auth", JX_OBJECT},     {"sites", JX_ARRAY},
    {"workloads", JX_ARRAY}, {"policy", JX_OBJECT},   {"projects", JX_ARRAY},
    {"log_level", JX_STRING}, {"tick_ms", JX_INT},    {"tls", JX_OBJECT},
    {"http", JX_OBJECT},      {"time_zone", JX_STRING},
    {"baseline", JX_OBJECT},  {NULL, 0}};

const struct jsonx_field config_tls_fields[] = {
    {"cert_file", JX_STRING}, {"key_file", JX_STRING},
    {"ca_file", JX_STRING},   {"allow_insecure_tokens", JX_BOOL},
    {NULL, 0}};

/* Connection limits: see http/server.h. */
const struct jsonx_field config_http_fields[] = {
    {"max_connections", JX_INT}, {"max_connections_per_address", JX_INT},
    {"header_timeout_s", JX_INT}, {"min_body_rate", JX_INT}, {NULL, 0}};

const struct jsonx_field config_auth_fields[] = {{"enabled", JX_BOOL},
                                                {NULL, 0}};

const struct jsonx_field config_policy_fields[] = {
    {"placement", JX_STRING}, {"wait_value", JX_OBJECT},
    {"burst", JX_OBJECT}, {NULL, 0}};

int
config_is_loopback(const char *host)
{
  struct in_addr a4;
  struct in6_addr a6;

  if (inet_pton(AF_INET, host, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, host, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return 0;
}

int
config_parse_listen(const char *s, char *host, size_t hostlen,
                    uint16_t *port, struct err *e)
{
  const char *colon;
  const char *h = s;
  size_t hlen;
  char *end;
  long p;
  struct in6_addr a6;
  struct in_addr a4;

  if (s[0] == '[') {
    const char *close = strchr(s, ']');

    if (close == NULL || close[1] != ':')
      return err_set(e, ERR_INVALID, "'%s' is not ADDR:PORT or [V6]:PORT",
                     s);
    h = s + 1;
    hlen = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strchr(s, ':');
    /* "fe80::1:80" is ambiguous: IPv6 needs its brackets. */
    if (colon == NULL || strchr(colon + 1, ':') != NULL)
      return err_set(e, ERR_INVALID, "'%s' is not ADDR:PORT (IPv6 is "
                     "written [ADDR]:PORT)", s);
    hlen = (size_t)(colon - s);
  }
  if (hlen == 0 || hlen >= hostlen)
    return err_set(e, ERR_INVALID, "'%s' has no usable address", s);
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  if (inet_pton(AF_INET, host, &a4) != 1 &&
      inet_pton(AF_INET6, host, &a6) != 1)
    return err_set(e, ERR_INVALID, "'%s' is not a numeric IP address",
                   host);
  if (!isdigit((unsigned char)colon[1]))
    return err_set(e, ERR_INVALID, "port '%s' is not 0 to 65535",
                   colon + 1);
  errno = 0;
  p = strtol(colon + 1, &end, 10);
  if (errno != 0 || *end != '\0' || p > 65535)
    return err_set(e, ERR_INVALID, "port '%s' is not 0 to 65535",
                   colon + 1);
  *port = (uint16_t)p;
  return 0;
}

static int
read_file(const char *path, char **out, size_t *len, struct err *e)
{
  struct buf b;
  char chunk[8192];
  FILE *f = fopen(path, "re");
  size_t n;
  int rc = 0;

  if (f == NULL)
    return err_set(e, ERR_CONFIG, "cannot open: %s", strerror(errno));
  buf_init(&b, CONFIG_MAX_BYTES);
  while (rc == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
    rc = buf_add(&b, chunk, n);
  if (rc == 0 && ferror(f))
    rc = err_set(e, ERR_CONFIG, "cannot read: %s", strerror(errno));
  else if (rc < 0)
    rc = err_set(e, ERR_CONFIG, "larger than %d bytes", CONFIG_MAX_BYTES);
  fclose(f);
  if (rc == 0)
    *out = buf_take(&b, len);
  buf_release(&b);
  return rc;
}

/* "tls" and "http": how tenbind serves, and whom it trusts. */
static int
check_tls_http(struct daemon_config *cfg, struct err *e)
{
  const json_t *tls = json_object_get(cfg->root, "tls");
  const json_t *http = json_object_get(cfg->root, "http");
  int rc = 0;

  if (json_is_object(tls))
    rc = jsonx_check(tls, config_tls_fields, "tls.", e);
  if (rc == 0 && json_is_object(http))
    rc = jsonx_check(http, config_http_fields, "http.", e);
  if (rc < 0)
    return rc;
  cfg->tls_cert_file = jsonx_str(tls, "cert_file");
  cfg->tls_key_file = jsonx_str(tls, "key_file");
  cfg->ca_file = jsonx_str(tls, "ca_file");
  cfg->allow_insecure_tokens = jsonx_bool(tls, "allow_insecure_tokens", 0);
  if ((cfg->tls_cert_file == NULL) != (cfg->tls_key_file == NULL))
    return err_set(e, ERR_CONFIG, "field 'tls': 'cert_file' and "
                   "'key_file' go together");
  /* A benchmark on loopback holds 64 connections; one client address
   * holding a few hundred is an attack or a leak. */
  rc = jsonx_int(http, "max_connections", 1, 65536, 1024,
                 &cfg->max_connections, "http.", e);
  if (rc == 0)
    rc = jsonx_int(http, "max_connections_per_address", 1, 65536, 128,
                   &cfg->max_per_address, "http.", e);
  if (rc == 0)
    rc = jsonx_int(http, "header_timeout_s", 1, 3600, 10,
                   &cfg->header_timeout_s, "http.", e);
  if (rc == 0)
    rc = jsonx_int(http, "min_body_rate", 1, (int64_t)1 << 30, 8192,
                   &cfg->min_body_rate, "http.", e);
  return rc;
}

/* Project names as the API takes them (jobspec's rule), once each: a
 * project the API refuses could never be submitted to. */
static int
check_projects(const json_t *projects, struct err *e)
{
  size_t i, k;
  json_t *v;

  json_array_foreach((json_t *)projects, i, v) {
    const char *why;

    if (!json_is_string(v))
      return err_set(e, ERR_CONFIG, "field 'projects[%zu]' must be a "
                     "string", i);
    why = jobspec_ident_problem(json_string_value(v));
    if (why != NULL)
      return err_set(e, ERR_CONFIG, "field 'projects[%zu]': '%.64s' %s", i,
                     json_string_value(v), why);
    for (k = 0; k < i; k++) {
      if (json_equal(json_array_get(projects, k), v))
        return err_set(e, ERR_CONFIG, "field 'projects[%zu]': duplicate "
                       "project '%s'", i, json_string_value(v));
    }
  }
  return 0;
}

/* Workload names once each: the broker upserts them in order, so a
 * second one would silently replace the first.  Their other fields are
 * checked where they are loaded (broker/catalog.c). */
static int
check_workloads(const json_t *workloads, struct err *e)
{
  size_t i, k;
  json_t *w;

  json_array_foreach((json_t *)workloads, i, w) {
    const char *name = jsonx_str(w, "name");

    if (name == NULL)
      continue;
    for (k = 0; k < i; k++) {
      const char *other = jsonx_str(json_array_get(workloads, k), "name");

      if (other != NULL && strcmp(other, name) == 0)
        return err_set(e, ERR_CONFIG, "field 'workloads[%zu].name': "
                       "duplicate workload '%.64s' (also workloads[%zu])",
                       i, name, k);
    }
  }
  return 0;
}

/*
 * The GPU indices a local site hands out, as [*lo, *hi).  Detection
 * (absent, null, "auto") may find any index of the host.  Returns 0 for a
 * site without GPUs.  Malformed values are the adapter's to refuse.
 */
static int
local_gpu_range(const json_t *site, int64_t *lo, int64_t *hi)
{
  const json_t *gpus = json_object_get(site, "gpus");
  const json_t *first = json_object_get(site, "first_gpu");
  const char *type;
  json_t *n;
  int64_t count = 0;

  if (!json_is_object(gpus)) {
    *lo = 0;
    *hi = INT64_MAX;
    return 1;
  }
  json_object_foreach((json_t *)gpus, type, n) {
    if (json_is_integer(n) && json_integer_value(n) > 0)
      count += json_integer_value(n);
  }
  *lo = json_is_integer(first) ? json_integer_value(first) : 0;
  *hi = *lo + count;
  return count > 0;
}

/*
 * Local sites all run on this host and share its GPU indices: two whose
 * ranges overlap would give the same GPU to two jobs at once.  Other
 * checks of a site are its adapter's.
 */
static int
check_local_gpus(const json_t *sites, struct err *e)
{
  size_t i, k;
  json_t *s, *t;

  json_array_foreach((json_t *)sites, i, s) {
    const char *kind = jsonx_str(s, "kind");
    int64_t lo, hi;

    if (kind == NULL || strcmp(kind, "local") != 0 ||
        !local_gpu_range(s, &lo, &hi))
      continue;
    for (k = 0; k < i; k++) {
      const char *kind2;
      int64_t lo2, hi2;

      t = json_array_get(sites, k);
      kind2 = jsonx_str(t, "kind");
      if (kind2 == NULL || strcmp(kind2, "local") != 0 ||
          !local_gpu_range(t, &lo2, &hi2) || hi2 <= lo || hi <= lo2)
        continue;
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].gpus': sites "
                     "'%.64s' and '%.64s' are both local and would hand "
                     "out the same GPU indices; number this one's GPUs "
                     "after the other's with \"first_gpu\", or give it "
                     "\"gpus\": {}", i, jsonx_str(t, "name") ? jsonx_str(t, "name") : "?",
                     jsonx_str(s, "name") ? jsonx_str(s, "name") : "?");
    }
  }
  return 0;
}

static int
check(struct daemon_config *cfg, const char *listen_override, struct err *e)
{
  const json_t *root = cfg->root;
  const json_t *auth = json_object_get(root, "auth");
  const json_t *policy = json_object_get(root, "policy");
  const char *listen = listen_override;
  const char *level = jsonx_str(root, "log_level");
  int rc;

  rc = jsonx_check(root, config_top_fields, "", e);
  if (rc == 0 && json_is_object(auth))
    rc = jsonx_check(auth, config_auth_fields, "auth.", e);
  if (rc == 0 && json_is_object(policy))
    rc = jsonx_check(policy, config_policy_fields, "policy.", e);
  if (rc < 0)
    return rc;
  if (listen == NULL)
    listen = jsonx_str(root, "listen");
  if (listen == NULL)
    listen = CONFIG_DEFAULT_LISTEN;
  rc = config_parse_listen(listen, cfg->host, sizeof(cfg->host), &cfg->port,
                           e);
  if (rc < 0)
    return err_prefix(e, "field 'listen'");
  cfg->auth = jsonx_bool(auth, "enabled", 0);
  if (!cfg->auth && !config_is_loopback(cfg->host))
    return err_set(e, ERR_CONFIG, "field 'auth.enabled': listening on "
                   "'%s', which is not loopback, requires auth to be "
                   "enabled", cfg->host);
  cfg->placement = jsonx_str(policy, "placement");
  cfg->wait_value = json_object_get(policy, "wait_value");
  cfg->burst = json_object_get(policy, "burst");
  cfg->time_zone = jsonx_str(root, "time_zone");
  cfg->baseline = json_object_get(root, "baseline");
  cfg->sites = json_object_get(root, "sites");
  if (json_array_size(cfg->sites) == 0)
    return err_set(e, ERR_CONFIG, "field 'sites': at least one site is "
                   "required");
  cfg->workloads = json_object_get(root, "workloads");
  cfg->projects = json_object_get(root, "projects");
  rc = check_local_gpus(cfg->sites, e);
  if (rc == 0)
    rc = check_projects(cfg->projects, e);
  if (rc == 0)
    rc = check_workloads(cfg->workloads, e);
  if (rc < 0)
    return rc;
  cfg->log_level = LOG_INFO;
  if (level != NULL && log_parse_level(level, &cfg->log_level) < 0)
    return err_set(e, ERR_CONFIG, "field 'log_level': '%s' is not debug, "
                   "info, warn or error", level);
  rc = jsonx_int(root, "tick_ms", 10, 60000, 1000, &cfg->tick_ms, "", e);
  if (rc == 0)
    rc = check_tls_http(cfg, e);
  return rc;
}

/* The file's JSON; errors speak of the file, not of a request body as
 * jsonx_parse_object's do. */
static int
parse(const char *text, size_t len, json_t **out, struct err *e)
{
  json_error_t jerr;
  json_t *v;

  /* "a":1,"a":2 is ambiguous, so refused. */
  v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (v == NULL)
    return err_set(e, ERR_CONFIG, "malformed JSON at line %d column %d: "
                   "%s", jerr.line, jerr.column, jerr.text);
  if (!json_is_object(v)) {
    json_decref(v);
    return err_set(e, ERR_CONFIG, "the top level must be a JSON object");
  }
  *out = v;
  return 0;
}

int
config_load(const char *path, const char *listen_override,
            struct daemon_config *cfg, struct err *e)
{
  char *text = NULL;
  size_t len = 0;
  int rc;

  memset(cfg, 0, sizeof(*cfg));
  if (path == NULL) {
    text = xstrdup(config_default_json);
    len = strlen(text);
  } else {
    rc = read_file(path, &text, &len, e);
    if (rc < 0)
      goto out;
  }
  rc = parse(text, len, &cfg->root, e);
  if (rc == 0)
    rc = check(cfg, listen_override, e);
out:
  free(text);
  if (rc < 0) {
    err_recode(e, ERR_CONFIG);
    err_prefix(e, "%s", path ? path : "embedded default");
    config_release(cfg);
    return ERR_CONFIG;
  }
  return 0;
}

void
config_release(struct daemon_config *cfg)
{
  if (cfg == NULL)
    return;
  json_decref(cfg->root);
  memset(cfg, 0, sizeof(*cfg));
}

/* Whether two optional strings differ. */
static int
str_differs(const char *a, const char *b)
{
  return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

/* Whether two optional JSON values differ (absent and null alike). */
static int
json_differs(const json_t *a, const json_t *b)
{
  if (a != NULL && json_is_null(a))
    a = NULL;
  if (b != NULL && json_is_null(b))
    b = NULL;
  return (a == NULL) != (b == NULL) || (a != NULL && !json_equal(a, b));
}

const char *
config_restart_field(const struct daemon_config *was,
                     const struct daemon_config *now)
{
  if (strcmp(was->host, now->host) != 0 || was->port != now->port)
    return "listen";
  if (was->auth != now->auth)
    return "auth.enabled";
  if (str_differs(was->tls_cert_file, now->tls_cert_file) ||
      str_differs(was->tls_key_file, now->tls_key_file) ||
      str_differs(was->ca_file, now->ca_file) ||
      was->allow_insecure_tokens != now->allow_insecure_tokens)
    return "tls";
  if (was->max_connections != now->max_connections ||
      was->max_per_address != now->max_per_address ||
      was->header_timeout_s != now->header_timeout_s ||
      was->min_body_rate != now->min_body_rate)
    return "http";
  if (was->tick_ms != now->tick_ms)
    return "tick_ms";
  if (str_differs(was->time_zone, now->time_zone))
    return "time_zone";
  if (json_differs(was->projects, now->projects))
    return "projects";
  if (json_differs(was->burst, now->burst))
    return "policy.burst";
  return NULL;
}
