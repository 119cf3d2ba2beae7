/*
 * The aws provider of the VM pool: EC2's Query API over http/client,
 * each request signed with SigV4 (sigv4.c), bodies and answers as
 * aws_ec2.c spells and reads them.
 *
 * Credentials come from the usual places, first found wins: the site's
 * "credentials" block (access_key_id with secret_access_key_file), the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN), then the shared credentials file
 * (credentials.file, else $AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) under credentials.profile, else $AWS_PROFILE, else
 * "default".
 *
 * Each call is one attempt (the pool decides about retrying); the HTTP
 * client only retries a connection that broke before an answer.
 *
 * Prices: spot from DescribeSpotPriceHistory, the price in effect now
 * of each shape's type in the site's zones, and of those the first zone
 * in the site's order that has one: the pool launches there first and
 * moves on only when refused, so that is what a spot node most often
 * pays (the lowest would be a price few nodes get).  EC2 has no
 * on-demand price call short of the offer file, about 100k products per
 * region: on demand stays the config's.
 */
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/aws_ec2.h"
#include "adapters/cloud_call.h"
#include "adapters/config_fields.h"
#include "adapters/cloud_int.h"
#include "adapters/price_feed.h"
#include "adapters/sigv4.h"
#include "http/client.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/jsonx.h"
#include "util/secret.h"
#include "util/timeutil.h"

#define PAGE_SIZE 1000        /* DescribeInstances' MaxResults at most */
#define MAX_LISTED 100000     /* VMs one listing may hold */
#define MAX_PAGES 200
#define MAX_SGS 8
#define MAX_TAGS (EC2_MAX_TAGS - 2)
#define BODY_MAX (1u << 20)
#define ANSWER_MAX (32u << 20)
#define SPOT_PAGE 1000        /* DescribeSpotPriceHistory's MaxResults */
#define MAX_SPOT_PAGES 20     /* one row per type and zone: plenty */

struct aws {
  struct cloud_calls calls;
  char *endpoint;             /* "https://ec2.REGION.amazonaws.com" */
  char *host;                 /* its host[:port], as signed */
  char *region;
  char *access_key, *secret_key, *session_token;
  char *image, *subnet, *iam_profile, *key_name;
  /* A subnet lives in one zone: "subnets" names one per zone (by the
   * index of zones[]), else "subnet" serves every zone. */
  char *zone_subnets[CLOUD_MAX_ZONES];
  char *sgs[MAX_SGS];
  int nsgs;
  struct ec2_tag tags[MAX_TAGS]; /* the site's own, besides tenbin's */
  int ntags;
  const struct cloud_shape *shapes; /* the pool's, alive while it is */
  size_t nshapes;
  char zones[CLOUD_MAX_ZONES][CLOUD_NAME_LEN]; /* in the site's order */
  size_t nzones;
  char *name_tag;             /* cloud_env's, or NULL */
};

struct op {
  struct cloud_call call;     /* first (cloud_call.h) */
  struct aws *a;
  char zone[CLOUD_NAME_LEN];  /* a launch's, when EC2 does not say */
  char key[EC2_TAG_LEN];      /* a listing's tag */
  char value[EC2_TAG_LEN];
  int pages;
  /* prices: the instant asked about, and per shape and zone the newest
   * spot price seen (at 0: none) */
  int64_t at_ms;
  int64_t spot_at[CLOUD_MAX_SHAPES][CLOUD_MAX_ZONES];
  int64_t spot[CLOUD_MAX_SHAPES][CLOUD_MAX_ZONES];
};

/* ---- config ---- */

const struct jsonx_field adapter_aws_fields[] = {
    {"region", JX_STRING},          {"endpoint", JX_STRING},
    {"credentials", JX_OBJECT},     {"image", JX_STRING},
    {"subnet", JX_STRING},          {"subnets", JX_OBJECT},
    {"security_groups", JX_ARRAY},  {"iam_instance_profile", JX_STRING},
    {"key_name", JX_STRING},        {"tags", JX_OBJECT},
    {"ca_file", JX_STRING},         {NULL, 0}};

const struct jsonx_field adapter_aws_credentials_fields[] = {
    {"access_key_id", JX_STRING}, {"secret_access_key_file", JX_STRING},
    {"session_token_file", JX_STRING}, {"profile", JX_STRING},
    {"file", JX_STRING}, {NULL, 0}};

/* The value of key in the [profile] section of an INI text, new, or
 * NULL. */
static char *
ini_get(const char *text, const char *profile, const char *key)
{
  const char *line = text;
  int in = 0;
  size_t plen = strlen(profile), klen = strlen(key);

  while (*line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    const char *p = line, *stop = line + len;

    while (p < stop && (*p == ' ' || *p == '\t'))
      p++;
    while (stop > p && (stop[-1] == ' ' || stop[-1] == '\t' ||
                        stop[-1] == '\r'))
      stop--;
    if (p < stop && *p == '[') {
      in = (size_t)(stop - p) == plen + 2 && stop[-1] == ']' &&
           strncmp(p + 1, profile, plen) == 0;
    } else if (in && (size_t)(stop - p) > klen &&
               strncmp(p, key, klen) == 0) {
      const char *v = p + klen;

      while (v < stop && (*v == ' ' || *v == '\t'))
        v++;
      if (v < stop && *v == '=') {
        v++;
        while (v < stop && (*v == ' ' || *v == '\t'))
          v++;
        return xstrndup(v, (size_t)(stop - v));
      }
    }
    line = end != NULL ? end + 1 : line + len;
  }
  return NULL;
}

static int
read_credentials(struct aws *a, const json_t *config, struct err *e)
{
  const json_t *c = json_object_get(config, "credentials");
  const char *id = NULL, *secret_file = NULL, *profile = NULL, *file = NULL;
  char *text = NULL, *path = NULL;
  int rc = 0;

  if (c != NULL && !json_is_null(c)) {
    if (!json_is_object(c))
      return err_set(e, ERR_CONFIG, "field 'credentials' must be an object");
    if (jsonx_check(c, adapter_aws_credentials_fields, "credentials.", e) < 0)
      return ERR_CONFIG;
    id = jsonx_str(c, "access_key_id");
    secret_file = jsonx_str(c, "secret_access_key_file");
    profile = jsonx_str(c, "profile");
    file = jsonx_str(c, "file");
  }
  if ((id == NULL) != (secret_file == NULL))
    return err_set(e, ERR_CONFIG, "field 'credentials': access_key_id and "
                   "secret_access_key_file go together");
  if (id != NULL) {
    const char *tf = jsonx_str(c, "session_token_file");

    a->access_key = xstrdup(id);
    rc = secret_read_file(secret_file, SECRET_FIRST_LINE, &a->secret_key,
                          NULL, e);
    if (rc == 0 && tf != NULL)
      rc = secret_read_file(tf, SECRET_FIRST_LINE, &a->session_token, NULL,
                            e);
    if (rc < 0) {
      err_prefix(e, "field 'credentials'");
      return err_recode(e, ERR_CONFIG);
    }
    return 0;
  }
  if (profile == NULL && file == NULL && getenv("AWS_ACCESS_KEY_ID") &&
      getenv("AWS_SECRET_ACCESS_KEY")) {
    a->access_key = xstrdup(getenv("AWS_ACCESS_KEY_ID"));
    a->secret_key = xstrdup(getenv("AWS_SECRET_ACCESS_KEY"));
    if (getenv("AWS_SESSION_TOKEN") != NULL)
      a->session_token = xstrdup(getenv("AWS_SESSION_TOKEN"));
    return 0;
  }
  if (profile == NULL)
    profile = getenv("AWS_PROFILE") != NULL ? getenv("AWS_PROFILE")
                                            : "default";
  if (file != NULL) {
    path = xstrdup(file);
  } else if (getenv("AWS_SHARED_CREDENTIALS_FILE") != NULL) {
    path = xstrdup(getenv("AWS_SHARED_CREDENTIALS_FILE"));
  } else if (getenv("HOME") != NULL) {
    struct buf b;

    buf_init(&b, 4096);
    if (buf_addf(&b, "%s/.aws/credentials", getenv("HOME")) == 0)
      path = buf_take(&b, NULL);
    buf_release(&b);
  }
  if (path == NULL)
    return err_set(e, ERR_CONFIG, "field 'credentials': none found (no "
                   "access key in the config or the environment, no "
                   "credentials file)");
  rc = secret_read_file(path, 0, &text, NULL, e);
  if (rc < 0) {
    err_prefix(e, "field 'credentials'");
    rc = err_recode(e, ERR_CONFIG);
    goto out;
  }
  a->access_key = ini_get(text, profile, "aws_access_key_id");
  a->secret_key = ini_get(text, profile, "aws_secret_access_key");
  a->session_token = ini_get(text, profile, "aws_session_token");
  if (a->access_key == NULL || a->secret_key == NULL)
    rc = err_set(e, ERR_CONFIG, "field 'credentials': profile '%.64s' of %s "
                 "has no aws_access_key_id and aws_secret_access_key",
                 profile, path);
out:
  secret_free(text);
  free(path);
  return rc;
}

/* A printable name of at most 255 bytes, or an error naming field. */
static int
copy_name(char **dst, const char *v, const char *field, struct err *e)
{
  if (v == NULL)
    return 0;
  if (v[0] == '\0' || strlen(v) > 255)
    return err_set(e, ERR_CONFIG, "field '%s': 1 to 255 characters", field);
  for (const char *p = v; *p != '\0'; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return err_set(e, ERR_CONFIG, "field '%s': no control characters",
                     field);
  *dst = xstrdup(v);
  return 0;
}

/* "subnets": {"ZONE": "subnet-...", ...}, one for every zone of the
 * site and no other, instead of one "subnet". */
static int
read_subnets(struct aws *a, const json_t *subnets, struct err *e)
{
  const char *zone;
  json_t *v;

  if (subnets == NULL || json_is_null(subnets))
    return 0;
  if (a->subnet != NULL)
    return err_set(e, ERR_CONFIG, "field 'subnets': give it or 'subnet', "
                   "not both");
  if (!json_is_object(subnets))
    return err_set(e, ERR_CONFIG, "field 'subnets' must be an object of "
                   "zone: subnet id");
  json_object_foreach((json_t *)subnets, zone, v) {
    size_t i;

    for (i = 0; i < a->nzones; i++)
      if (strcmp(a->zones[i], zone) == 0)
        break;
    if (i == a->nzones)
      return err_set(e, ERR_CONFIG, "field 'subnets.%.64s': not one of the "
                     "site's zones", zone);
    if (copy_name(&a->zone_subnets[i], json_string_value(v), "subnets", e) <
        0)
      return ERR_CONFIG;
    if (a->zone_subnets[i] == NULL)
      return err_set(e, ERR_CONFIG, "field 'subnets.%.64s' must be a "
                     "subnet id", zone);
  }
  for (size_t i = 0; i < a->nzones; i++)
    if (a->zone_subnets[i] == NULL)
      return err_set(e, ERR_CONFIG, "field 'subnets': zone %s has none (a "
                     "subnet lives in one zone)", a->zones[i]);
  return 0;
}

/* The subnet a launch into zone goes to, or NULL for the default. */
static const char *
subnet_of(const struct aws *a, const char *zone)
{
  for (size_t i = 0; i < a->nzones; i++)
    if (a->zone_subnets[i] != NULL && strcmp(a->zones[i], zone) == 0)
      return a->zone_subnets[i];
  return a->subnet;
}

static int
read_network(struct aws *a, const json_t *config, struct err *e)
{
  const json_t *sgs = json_object_get(config, "security_groups");
  const json_t *tags = json_object_get(config, "tags");
  const char *key;
  size_t i;
  json_t *v;
  int rc;

  rc = copy_name(&a->image, jsonx_str(config, "image"), "image", e);
  if (rc == 0 && a->image == NULL)
    rc = err_set(e, ERR_CONFIG, "field 'image': the AMI id is needed");
  if (rc == 0)
    rc = copy_name(&a->subnet, jsonx_str(config, "subnet"), "subnet", e);
  if (rc == 0)
    rc = copy_name(&a->iam_profile, jsonx_str(config, "iam_instance_profile"),
                   "iam_instance_profile", e);
  if (rc == 0)
    rc = copy_name(&a->key_name, jsonx_str(config, "key_name"), "key_name",
                   e);
  if (rc == 0)
    rc = read_subnets(a, json_object_get(config, "subnets"), e);
  if (rc < 0)
    return rc;
  if (sgs != NULL && !json_is_null(sgs)) {
    if (!json_is_array(sgs) || json_array_size(sgs) > MAX_SGS)
      return err_set(e, ERR_CONFIG, "field 'security_groups': at most %d "
                     "ids", MAX_SGS);
    json_array_foreach(sgs, i, v) {
      rc = copy_name(&a->sgs[i], json_string_value(v), "security_groups", e);
      if (rc == 0 && a->sgs[i] == NULL)
        rc = err_set(e, ERR_CONFIG, "field 'security_groups[%zu]' must be a "
                     "string", i);
      if (rc < 0)
        return rc;
      a->nsgs++;
    }
  }
  if (tags != NULL && !json_is_null(tags)) {
    if (!json_is_object(tags) || json_object_size(tags) > MAX_TAGS)
      return err_set(e, ERR_CONFIG, "field 'tags': an object of at most %d "
                     "tags", MAX_TAGS);
    json_object_foreach((json_t *)tags, key, v) {
      const char *val = json_string_value(v);

      if (val == NULL || key[0] == '\0' || strlen(key) >= EC2_TAG_LEN ||
          strlen(val) >= EC2_TAG_LEN || strncmp(key, "tenbin-", 7) == 0)
        return err_set(e, ERR_CONFIG, "field 'tags.%.64s': a string of at "
                       "most %d characters (keys starting 'tenbin-' are "
                       "tenbin's)", key, EC2_TAG_LEN - 1);
      snprintf(a->tags[a->ntags].key, EC2_TAG_LEN, "%s", key);
      snprintf(a->tags[a->ntags].value, EC2_TAG_LEN, "%s", val);
      a->ntags++;
    }
  }
  return 0;
}

/* endpoint's host[:port], the Host header SigV4 signs. */
static char *
endpoint_host(const char *endpoint)
{
  const char *h = strstr(endpoint, "://");
  size_t len;

  if (h == NULL)
    return NULL;
  h += 3;
  len = strcspn(h, "/?#");
  return len > 0 ? xstrndup(h, len) : NULL;
}

/* Also its calls' hooks->free (hence the void *). */
static void
aws_free(void *owner)
{
  struct aws *a = owner;

  cloud_calls_release(&a->calls);
  free(a->endpoint);
  free(a->host);
  free(a->region);
  free(a->access_key);
  secret_free(a->secret_key);
  secret_free(a->session_token);
  free(a->image);
  free(a->subnet);
  for (size_t i = 0; i < CLOUD_MAX_ZONES; i++)
    free(a->zone_subnets[i]);
  free(a->iam_profile);
  free(a->key_name);
  free(a->name_tag);
  for (int i = 0; i < a->nsgs; i++)
    free(a->sgs[i]);
  free(a);
}

/* Each call is one signed request: no token, no waits of its own. */
static const struct cloud_call_hooks aws_hooks = {.free = aws_free};

static int
aws_open(const struct cloud_env *env, const json_t *config, void **pctx,
         struct err *e)
{
  struct aws *a = xcalloc(1, sizeof(*a));
  struct http_client_config hc = {.user_agent = "tenbin"};
  const char *region = jsonx_str(config, "region");
  const char *endpoint = jsonx_str(config, "endpoint");
  const json_t *zones = json_object_get(config, "zones");
  size_t i;
  json_t *z;
  int rc = 0;

  cloud_calls_init(&a->calls, env->loop, env->site_name, &aws_hooks, a);
  if (region == NULL || region[0] == '\0' || strlen(region) > 32 ||
      strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
          strlen(region)) {
    rc = err_set(e, ERR_CONFIG, "field 'region': an AWS region such as "
                 "\"us-east-1\" is needed");
    goto out;
  }
  a->region = xstrdup(region);
  a->shapes = env->shapes;
  a->nshapes = env->nshapes;
  /* A zone of another region is a typo that would fail every launch. */
  json_array_foreach(zones, i, z) {
    const char *name = json_string_value(z);

    if (strncmp(name, region, strlen(region)) != 0 ||
        strlen(name) == strlen(region)) {
      rc = err_set(e, ERR_CONFIG, "field 'zones[%zu]': '%s' is not a zone "
                   "of region %s", i, name, region);
      goto out;
    }
    if (i < CLOUD_MAX_ZONES && strlen(name) < CLOUD_NAME_LEN)
      snprintf(a->zones[a->nzones++], CLOUD_NAME_LEN, "%s", name);
  }
  if (endpoint != NULL) {
    a->endpoint = xstrdup(endpoint);
  } else {
    struct buf b;

    buf_init(&b, 256);
    if (buf_addf(&b, "https://ec2.%s.amazonaws.com", region) == 0)
      a->endpoint = buf_take(&b, NULL);
    buf_release(&b);
  }
  a->host = a->endpoint != NULL ? endpoint_host(a->endpoint) : NULL;
  if (a->host == NULL || (strncmp(a->endpoint, "https://", 8) != 0 &&
                          strncmp(a->endpoint, "http://", 7) != 0)) {
    rc = err_set(e, ERR_CONFIG, "field 'endpoint': an http(s) URL");
    goto out;
  }
  if (env->name_tag != NULL) {
    if (env->name_tag[0] == '\0' || strlen(env->name_tag) >= EC2_TAG_LEN) {
      rc = err_set(e, ERR_CONFIG, "the name tag: 1 to %d characters",
                   EC2_TAG_LEN - 1);
      goto out;
    }
    a->name_tag = xstrdup(env->name_tag);
  }
  rc = read_credentials(a, config, e);
  /* A listing alone needs no image and no network. */
  if (rc == 0 && !env->list_only)
    rc = read_network(a, config, e);
  if (rc < 0)
    goto out;
  hc.ca_file = jsonx_str(config, "ca_file");
  rc = http_client_new(env->loop, &hc, &a->calls.http, e);
  if (rc < 0)
    goto out;
  *pctx = a;
  a = NULL;
out:
  if (a != NULL)
    aws_free(a);
  return rc;
}

/* ---- calls ---- */

static struct op *
op_new(struct aws *a, enum cloud_call_kind kind, void *arg)
{
  struct op *o = xcalloc(1, sizeof(*o));

  o->a = a;
  cloud_call_start(&a->calls, &o->call, kind, arg);
  return o;
}

static void
ec2_instance_vm(const struct aws *a, const struct ec2_instance *in,
                struct cloud_vm *vm)
{
  memset(vm, 0, sizeof(*vm));
  snprintf(vm->id, sizeof(vm->id), "%s", in->id);
  switch (in->state_code) {
  case 0:
    vm->state = CLOUD_VM_PENDING;
    break;
  case 16:
    vm->state = CLOUD_VM_RUNNING;
    break;
  case 32:
  case 64:
    vm->state = CLOUD_VM_STOPPING;
    break;
  case 48:
    vm->state = CLOUD_VM_GONE;
    break;
  case 80:
    /* Stopped: its volumes are still billed until it is terminated. */
    vm->state = CLOUD_VM_GONE;
    vm->lingers = 1;
    break;
  default:
    vm->state = CLOUD_VM_UNKNOWN;
  }
  snprintf(vm->zone, sizeof(vm->zone), "%s", in->zone);
  snprintf(vm->shape, sizeof(vm->shape), "%s", in->type);
  vm->spot = in->spot;
  if (in->launch_time[0] != '\0' &&
      time_parse_iso(in->launch_time, &vm->launched_ms) < 0)
    vm->launched_ms = 0;
  snprintf(vm->end_reason, sizeof(vm->end_reason), "%s", in->state_reason);
  if (strlen(in->private_ip) < sizeof(vm->address))
    memcpy(vm->address, in->private_ip, strlen(in->private_ip) + 1);
  for (int i = 0; i < in->ntags; i++) {
    const char *v = in->tags[i].value;
    /* A value too long to be tenbin's is no one's: a cut one could
     * pass for ours. */
    size_t len = strlen(v);

    if (len >= CLOUD_NAME_LEN)
      continue;
    if (strcmp(in->tags[i].key, CLOUD_TAG_INSTANCE) == 0)
      memcpy(vm->instance, v, len + 1);
    else if (strcmp(in->tags[i].key, CLOUD_TAG_NODE) == 0)
      memcpy(vm->node, v, len + 1);
    if (a->name_tag != NULL && strcmp(in->tags[i].key, a->name_tag) == 0)
      memcpy(vm->name, v, len + 1);
  }
}

/* What an answer that is not 200 (or did not come) means. */
static void
refusal(int rc, const struct http_client_response *resp,
        const struct err *e, const struct ec2_answer *ans,
        struct cloud_result *r)
{
  const char *after;
  int64_t retry_ms = -1;

  if (rc < 0) {
    cloud_refuse(r, CLOUD_REFUSED_TRANSIENT, -1, "EC2 unreachable: %s",
                 e->msg);
    return;
  }
  after = http_client_response_header(resp, "x-amz-retry-after");
  if (after == NULL)
    after = http_client_response_header(resp, "Retry-After");
  if (after != NULL) {
    char *end;
    long long v = strtoll(after, &end, 10);

    /* x-amz-retry-after is in milliseconds, Retry-After in seconds. */
    if (*end == '\0' && v >= 0 && v <= 3600000)
      retry_ms = http_client_response_header(resp, "x-amz-retry-after")
                         ? v
                         : v * 1000;
  }
  cloud_refuse(r, ec2_refusal(ans->error_code, resp->status), retry_ms,
               "EC2 %d %s: %.300s", resp->status,
               ans->error_code[0] ? ans->error_code : "(no code)",
               ans->error_message);
}

static void send_page(struct op *o, const char *next_token);
static void on_prices(struct op *o, int rc,
                      const struct http_client_response *resp,
                      const struct err *e);

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct op *o = arg;
  struct cloud_result r = {0};
  struct ec2_instance *page = NULL;
  struct ec2_answer ans = {0};
  struct err pe = {0};
  const char *keep[3];
  size_t nkeep = 0;
  int prc = -1;

  if (o->call.kind == CLOUD_CALL_PRICES) {
    on_prices(o, rc, resp, e);
    return;
  }
  page = xcalloc(PAGE_SIZE, sizeof(*page));
  ans = (struct ec2_answer){.instances = page, .max = PAGE_SIZE};
  /* Only the tags read into struct cloud_vm take room. */
  keep[nkeep++] = CLOUD_TAG_INSTANCE;
  keep[nkeep++] = CLOUD_TAG_NODE;
  if (o->a->name_tag != NULL)
    keep[nkeep++] = o->a->name_tag;
  ans.keep = keep;
  ans.nkeep = nkeep;
  r.retry_after_ms = -1;
  if (rc == 0)
    prc = ec2_parse(resp->body, resp->len, &ans, &pe);
  if (rc < 0 || resp->status != 200 || prc < 0) {
    if (rc == 0 && resp->status == 200)
      cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "EC2's answer: %s",
                   pe.msg);
    else
      refusal(rc, resp, e, &ans, &r);
    goto out;
  }
  switch (o->call.kind) {
  case CLOUD_CALL_LAUNCH: {
    struct cloud_vm vm;

    if (ans.n != 1) {
      cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1,
                   "RunInstances answered %zu instances, not 1", ans.nout);
      goto out;
    }
    ec2_instance_vm(o->a, &page[0], &vm);
    if (vm.zone[0] == '\0')
      snprintf(vm.zone, sizeof(vm.zone), "%s", o->zone);
    free(page);
    cloud_call_end(&o->call, &r, &vm, NULL, 0);
    return;
  }
  case CLOUD_CALL_LIST: {
    struct cloud_call *c = &o->call;

    for (size_t i = 0; i < ans.n; i++) {
      if (c->n == c->cap) {
        if (c->cap == MAX_LISTED) {
          cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d VMs "
                       "tagged", MAX_LISTED);
          goto out;
        }
        c->cap = c->cap == 0 ? 64 : c->cap * 2;
        if (c->cap > MAX_LISTED)
          c->cap = MAX_LISTED;
        c->vms = xrealloc(c->vms, c->cap * sizeof(*c->vms));
      }
      ec2_instance_vm(o->a, &page[i], &c->vms[c->n++]);
    }
    if (ans.next_token[0] != '\0' && !o->a->calls.closing) {
      if (++o->pages >= MAX_PAGES) {
        cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d pages",
                     MAX_PAGES);
        goto out;
      }
      free(page);
      send_page(o, ans.next_token);
      return;
    }
    break;
  }
  case CLOUD_CALL_TERMINATE:
  case CLOUD_CALL_PRICES: /* read by on_prices */
    break;
  }
out:
  free(page);
  cloud_call_end(&o->call, &r, NULL, NULL, 0);
}

/* Sign body and POST it; o's callback runs from on_answer, or from the
 * loop with a refusal when it could not leave. */
static void
post(struct op *o, struct buf *body)
{
  struct aws *a = o->a;
  char date[SIGV4_DATE_LEN];
  struct buf authz, h_date, h_auth, h_host, h_token;
  const char *headers[6];
  struct sigv4_header sh[4];
  size_t nsh = 0, nh = 0;
  struct http_client_request req = {0};
  struct cloud_result r = {0};
  int rc;

  buf_init(&authz, 4096);
  buf_init(&h_date, 256);
  buf_init(&h_auth, 4096);
  buf_init(&h_host, 512);
  buf_init(&h_token, 8192);
  sigv4_date(time_now_ms(), date);
  sh[nsh++] = (struct sigv4_header){
      "Content-Type", "application/x-www-form-urlencoded; charset=utf-8"};
  sh[nsh++] = (struct sigv4_header){"Host", a->host};
  sh[nsh++] = (struct sigv4_header){"X-Amz-Date", date};
  if (a->session_token != NULL)
    sh[nsh++] = (struct sigv4_header){"X-Amz-Security-Token",
                                      a->session_token};
  {
    const struct sigv4_request sr = {"POST", "/", NULL, sh, nsh, body->data,
                                     body->len};
    const struct sigv4_key k = {a->access_key, a->secret_key, a->region,
                                "ec2"};

    rc = sigv4_authorization(&sr, &k, date, &authz);
  }
  if (rc == 0)
    rc = buf_addf(&h_date, "X-Amz-Date: %s", date);
  if (rc == 0)
    rc = buf_addf(&h_auth, "Authorization: %s", buf_str(&authz));
  if (rc == 0)
    rc = buf_addf(&h_host, "Host: %s", a->host);
  if (rc == 0 && a->session_token != NULL)
    rc = buf_addf(&h_token, "X-Amz-Security-Token: %s", a->session_token);
  if (rc < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "cannot sign the request");
    cloud_call_fail_later(&o->call, &r);
    goto out;
  }
  headers[nh++] = "Content-Type: application/x-www-form-urlencoded; "
                  "charset=utf-8";
  headers[nh++] = buf_str(&h_host);
  headers[nh++] = buf_str(&h_date);
  headers[nh++] = buf_str(&h_auth);
  if (a->session_token != NULL)
    headers[nh++] = buf_str(&h_token);
  headers[nh] = NULL;
  req.method = "POST";
  req.url = a->endpoint;
  req.headers = headers;
  req.body = body->data;
  req.body_len = body->len;
  req.max_response = ANSWER_MAX;
  /* Every EC2 call tenbin makes may be repeated: a launch carries its
   * ClientToken. */
  req.idempotent = true;
  req.max_attempts = 2;
  if (cloud_call_send(&o->call, &req, 0, on_answer, "EC2", &r) < 0)
    cloud_call_fail_later(&o->call, &r);
out:
  buf_release(&authz);
  buf_release(&h_date);
  buf_release(&h_auth);
  buf_release(&h_host);
  buf_release(&h_token);
}

static void
aws_launch(void *pctx, const struct cloud_launch *l, cloud_launch_cb cb,
           void *arg)
{
  struct aws *a = pctx;
  struct op *o = op_new(a, CLOUD_CALL_LAUNCH, arg);
  struct ec2_tag tags[EC2_MAX_TAGS];
  struct ec2_launch el;
  struct buf body;
  unsigned char *b64 = NULL;
  size_t slen = strlen(l->script);
  int ntags = 0, rc;

  o->call.launch_cb = cb;
  snprintf(o->zone, sizeof(o->zone), "%s", l->zone);
  snprintf(tags[ntags].key, EC2_TAG_LEN, "%s", CLOUD_TAG_INSTANCE);
  snprintf(tags[ntags++].value, EC2_TAG_LEN, "%s", l->instance);
  snprintf(tags[ntags].key, EC2_TAG_LEN, "%s", CLOUD_TAG_NODE);
  snprintf(tags[ntags++].value, EC2_TAG_LEN, "%s", l->node);
  for (int i = 0; i < a->ntags; i++)
    tags[ntags++] = a->tags[i];
  b64 = xmalloc(4 * ((slen + 2) / 3) + 1);
  EVP_EncodeBlock(b64, (const unsigned char *)l->script, (int)slen);
  el = (struct ec2_launch){.image = a->image,
                           .type = l->shape->type,
                           .zone = l->zone,
                           .subnet = subnet_of(a, l->zone),
                           .security_groups = (const char *const *)a->sgs,
                           .nsecurity_groups = a->nsgs,
                           .iam_profile = a->iam_profile,
                           .key_name = a->key_name,
                           .client_token = l->token,
                           .spot = l->spot,
                           .user_data = (const char *)b64,
                           .tags = tags,
                           .ntags = ntags};
  buf_init(&body, BODY_MAX);
  rc = ec2_run_instances(&el, &body);
  if (rc < 0) {
    struct cloud_result r;

    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "RunInstances too large");
    cloud_call_fail_later(&o->call, &r);
  } else {
    post(o, &body);
  }
  buf_release(&body);
  free(b64);
}

static void
send_page(struct op *o, const char *next_token)
{
  struct buf body;

  buf_init(&body, BODY_MAX);
  if (ec2_describe_tagged(o->key, o->value, PAGE_SIZE, next_token,
                          &body) < 0) {
    struct cloud_result r;

    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "DescribeInstances too large");
    cloud_call_fail_later(&o->call, &r);
  } else {
    post(o, &body);
  }
  buf_release(&body);
}

static void
aws_list_tagged(void *pctx, const char *key, const char *value,
                cloud_list_cb cb, void *arg)
{
  struct op *o = op_new(pctx, CLOUD_CALL_LIST, arg);

  o->call.list_cb = cb;
  snprintf(o->key, sizeof(o->key), "%s", key);
  snprintf(o->value, sizeof(o->value), "%s", value);
  send_page(o, NULL);
}

static void
aws_list(void *pctx, const char *instance, cloud_list_cb cb, void *arg)
{
  aws_list_tagged(pctx, CLOUD_TAG_INSTANCE, instance, cb, arg);
}

static void
aws_terminate(void *pctx, const struct cloud_vm *vm, cloud_done_cb cb,
              void *arg)
{
  struct op *o = op_new(pctx, CLOUD_CALL_TERMINATE, arg);
  const char *ids[1] = {vm->id};
  struct buf body;

  o->call.done_cb = cb;
  buf_init(&body, BODY_MAX);
  if (ec2_terminate_instances(ids, 1, &body) < 0) {
    struct cloud_result r;

    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "TerminateInstances too large");
    cloud_call_fail_later(&o->call, &r);
  } else {
    post(o, &body);
  }
  buf_release(&body);
}

/* ---- prices ---- */

/* The types of the site's shapes, each once, into types; the count. */
static size_t
shape_types(const struct aws *a, const char **types)
{
  size_t n = 0;

  for (size_t s = 0; s < a->nshapes; s++) {
    size_t k = 0;

    while (k < n && strcmp(types[k], a->shapes[s].type) != 0)
      k++;
    if (k == n)
      types[n++] = a->shapes[s].type;
  }
  return n;
}

static void
send_prices_page(struct op *o, const char *next_token)
{
  struct aws *a = o->a;
  const char *types[CLOUD_MAX_SHAPES], *zones[CLOUD_MAX_ZONES];
  struct buf body;

  for (size_t z = 0; z < a->nzones; z++)
    zones[z] = a->zones[z];
  buf_init(&body, BODY_MAX);
  if (pricefeed_ec2_spot_body(types, shape_types(a, types), zones,
                              a->nzones, o->at_ms, next_token, &body) < 0) {
    struct cloud_result r;

    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1,
                 "DescribeSpotPriceHistory too large");
    cloud_call_fail_later(&o->call, &r);
  } else {
    post(o, &body);
  }
  buf_release(&body);
}

/* A page's rows into o: per shape of the row's type, the newest price of
 * each of the site's zones. */
static void
keep_spot(struct op *o, const struct pricefeed_spot *rows, size_t n)
{
  struct aws *a = o->a;

  for (size_t i = 0; i < n; i++) {
    const struct pricefeed_spot *row = &rows[i];
    size_t z = 0;

    /* What Linux/UNIX was called in EC2-Classic days is the same. */
    if (strcmp(row->product, "Linux/UNIX") != 0 &&
        strcmp(row->product, "Linux/UNIX (Amazon VPC)") != 0)
      continue;
    while (z < a->nzones && strcmp(a->zones[z], row->zone) != 0)
      z++;
    for (size_t s = 0; z < a->nzones && s < a->nshapes; s++) {
      if (strcmp(a->shapes[s].type, row->type) != 0 ||
          row->at_ms < o->spot_at[s][z])
        continue;
      o->spot_at[s][z] = row->at_ms > 0 ? row->at_ms : 1;
      o->spot[s][z] = row->price_micro;
    }
  }
}

/* Each shape's spot price: its first zone's, in the site's order, that
 * has one. */
static void
prices_done(struct op *o)
{
  struct aws *a = o->a;
  struct cloud_price p[CLOUD_MAX_SHAPES];
  struct cloud_result r = {0};
  size_t n = 0;

  r.retry_after_ms = -1;
  for (size_t s = 0; s < a->nshapes; s++) {
    for (size_t z = 0; z < a->nzones; z++) {
      if (o->spot_at[s][z] == 0)
        continue;
      p[n++] = (struct cloud_price){s, -1, o->spot[s][z]};
      break;
    }
  }
  cloud_call_end(&o->call, &r, NULL, p, n);
}

static void
on_prices(struct op *o, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct pricefeed_spot_page *pg = xcalloc(1, sizeof(*pg));
  struct cloud_result r = {0};
  struct err pe = {0};

  pg->rows = xcalloc(SPOT_PAGE, sizeof(*pg->rows));
  pg->max = SPOT_PAGE;
  r.retry_after_ms = -1;
  if (o->a->calls.closing) {
    cloud_call_closing(&r);
  } else if (rc < 0 || resp->status != 200) {
    struct ec2_answer ans = {0};
    int prc = 0;

    /* Only the error's code and message are wanted of it: an answer
     * that does not read leaves them empty, and the status speaks. */
    if (rc == 0)
      prc = ec2_parse(resp->body, resp->len, &ans, &pe);
    (void)prc;
    refusal(rc, resp, e, &ans, &r);
  } else if (pricefeed_ec2_spot_parse(resp->body, resp->len, pg, &pe) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "%s", pe.msg);
  } else if (pg->nout > pg->n) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "a page of %zu spot prices",
                 pg->nout);
  } else {
    keep_spot(o, pg->rows, pg->n);
    if (pg->next_token[0] == '\0') {
      prices_done(o);
    } else if (++o->pages >= MAX_SPOT_PAGES) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d pages of "
                   "spot prices", MAX_SPOT_PAGES);
    } else {
      send_prices_page(o, pg->next_token);
    }
  }
  if (r.rc < 0)
    cloud_call_end(&o->call, &r, NULL, NULL, 0);
  free(pg->rows);
  free(pg);
}

static void
aws_prices(void *pctx, cloud_prices_cb cb, void *arg)
{
  struct op *o = op_new(pctx, CLOUD_CALL_PRICES, arg);

  o->call.prices_cb = cb;
  o->at_ms = time_now_ms();
  send_prices_page(o, NULL);
}

static void
aws_close(void *pctx, void (*cb)(void *arg), void *arg)
{
  struct aws *a = pctx;

  /* A call between requests only ever has its answer due: it keeps it. */
  cloud_calls_close(&a->calls, 0, cb, arg);
}

const struct cloud_provider cloud_aws_provider = {
    .kind = "aws",
    .fields = adapter_aws_fields,
    .open = aws_open,
    .launch = aws_launch,
    .list = aws_list,
    .list_tagged = aws_list_tagged,
    .terminate = aws_terminate,
    .close = aws_close,
    .prices = aws_prices,
};

static int
aws_site_open(const struct adapter_env *env, const json_t *config,
              void **ctx, struct err *e)
{
  return cloud_open(&cloud_aws_provider, env, config, ctx, e);
}

const struct adapter_ops adapter_aws_ops = CLOUD_OPS("aws", aws_site_open);
