/*
 * The gcp provider of the VM pool: Compute Engine v1 over http/client,
 * URLs, bodies and answers as gce.c spells and reads them, each call
 * carrying a bearer token that the service-account flow (gcp_auth.c,
 * oauth.c) gets from the key file's token_uri.
 *
 * The token is shared: the first call (or open) asks for one, and every
 * call that needs one meanwhile waits for that one request.  A token is
 * renewed a few minutes before it expires, in the background while the
 * old one still serves; a call answered 401 renews it once and is sent
 * again.
 *
 * A launch is instances.insert with a requestId made from the pool's
 * launch token, so that an insert resent after a crash is the same
 * insert to Google, then zoneOperations.get with a backoff until the
 * operation is DONE.  An insert answered 409 alreadyExists (a resend
 * whose first insert went through under another requestId, older than
 * Google's 60 minutes) is that VM.  A terminate returns once the delete
 * is accepted; a listing reads every zone of the site, page by page.
 *
 * Each call is one attempt (the pool decides about retrying); the HTTP
 * client only retries a connection that broke before an answer.
 *
 * Opened list_only (the cloud block of an elastic Slurm site), it reads
 * the connection alone (project, region, zones, credentials_file,
 * endpoint, ca_file) and lists the VMs of anyone's label key = value:
 * instances.list with a label filter in each of the zones, the call the
 * contract documents whole (aggregatedList would spare naming the zones,
 * but its answer's shape is not in it).  Each VM's private address is
 * its first interface's networkIP, in the same answer.
 *
 * Prices come from the Cloud Billing Catalog (the same token serves):
 * every page of Compute Engine's SKUs, of which the GPU SKUs of the
 * site's region are kept, and per shape the on-demand and Spot price of
 * its GPU times its GPUs.  A machine type's vCPU and memory SKUs are
 * not added: the price is the GPUs' part of the node, which is most of
 * a GPU node's.  A GPU SKU is found by the shape's GPU type as a word
 * of its name, or by the name the site's "gpu_skus" gives for the type
 * where several names hold it ("Nvidia H100 80GB GPU" and "... Mega
 * GPU").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "adapters/cloud_call.h"
#include "adapters/config_fields.h"
#include "adapters/cloud_int.h"
#include "adapters/gce.h"
#include "adapters/gcp_auth.h"
#include "adapters/oauth.h"
#include "adapters/price_feed.h"
#include "http/client.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/secret.h"
#include "util/timeutil.h"

#define MAX_LISTED 100000 /* VMs one listing may hold */
#define MAX_PAGES 200     /* of one zone */
#define URL_MAX 8192
#define BODY_MAX (1u << 20) /* an insert: the script is at most 256 KiB */
#define POLL_FIRST_MS 500 /* an insert is DONE in seconds to minutes */
#define POLL_MAX_MS 5000
#define POLL_GIVE_UP_MS (15 * 60 * 1000)
#define DISK_GB_DEFAULT 100 /* GPU images (CUDA, drivers) need ~50 */
#define MAX_LABELS (GCE_MAX_LABELS - 2)
#define SKU_PAGE_SIZE 5000 /* the Catalog's most per page */
#define SKU_PAGE_GPUS 1024 /* GPU SKUs of one region on one page */
#define MAX_GPU_SKUS 4096  /* ... on all pages */
#define MAX_SKU_PAGES 100

struct gcp {
  struct cloud_calls calls; /* and the bearer token they share */
  struct gcp_key *key;
  char *base; /* Compute's URL up to /compute/v1 */
  char *project;
  char zones[CLOUD_MAX_ZONES][CLOUD_NAME_LEN];
  size_t nzones;
  char *image, *network, *subnetwork, *disk_type, *service_account;
  int disk_gb;
  int external_ip;
  struct gce_label labels[MAX_LABELS]; /* the site's own (strings owned) */
  size_t nlabels;
  const struct cloud_shape *shapes; /* the pool's, alive while it is */
  size_t nshapes;
  char accel_type[CLOUD_MAX_SHAPES][CLOUD_NAME_LEN]; /* "" when none */
  int accel_count[CLOUD_MAX_SHAPES];
  /* prices: the Catalog's base URL, the region, and the SKU names
   * "gpu_skus" gives per GPU type */
  char *billing;
  char region[CLOUD_NAME_LEN];
  char sku_type[CLOUD_MAX_SHAPES][ADAPTER_GPU_TYPE_LEN];
  char sku_name[CLOUD_MAX_SHAPES][PRICEFEED_SKU_LEN];
  size_t nskus;
  unsigned seq; /* makes each delete's requestId unique */
  char *name_label; /* cloud_env's name_tag, or NULL */
};

enum op_step { ST_INSERT, ST_POLL, ST_LIST, ST_DELETE, ST_SKUS };

struct op {
  struct cloud_call call; /* first (cloud_call.h); its timer polls */
  struct gcp *g;
  enum op_step step;
  /* the request, kept for a resend after a 401 */
  const char *method;
  char *url;
  char *body;
  size_t body_len;
  /* a launch's */
  char name[CLOUD_ID_LEN];
  char zone[CLOUD_NAME_LEN];
  char shape[CLOUD_NAME_LEN];
  int spot;
  char instance[CLOUD_NAME_LEN];
  char node[CLOUD_NAME_LEN];
  char opname[GCE_OP_LEN];
  int64_t poll_ms, poll_until_ms;
  /* a listing's: the label, and where it is */
  char key[CLOUD_NAME_LEN];
  char value[CLOUD_NAME_LEN];
  size_t zone_ix;
  int pages;
  /* prices: the region's GPU SKUs of the pages so far */
  struct pricefeed_sku *skus;
  size_t nskus;
};

/* ---- config ---- */

const struct jsonx_field adapter_gcp_fields[] = {
    {"project", JX_STRING},         {"region", JX_STRING},
    {"credentials_file", JX_STRING}, {"endpoint", JX_STRING},
    {"image", JX_STRING},           {"network", JX_STRING},
    {"subnetwork", JX_STRING},      {"disk_size_gb", JX_INT},
    {"disk_type", JX_STRING},       {"service_account", JX_STRING},
    {"labels", JX_OBJECT},          {"external_ip", JX_BOOL},
    {"ca_file", JX_STRING},         {"billing_endpoint", JX_STRING},
    {"gpu_skus", JX_OBJECT},        {NULL, 0}};

const struct jsonx_field adapter_gcp_accelerator_fields[] = {
    {"type", JX_STRING}, {"count", JX_INT}, {NULL, 0}};

/* 1..max characters of [a-z0-9-]: regions, zones, disk types. */
static int
word_ok(const char *s, size_t max)
{
  size_t n = s != NULL ? strlen(s) : 0;

  return n > 0 && n <= max &&
         strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* A printable name without spaces of at most max bytes into *dst (new),
 * or an error naming field; absent is fine. */
static int
copy_path(char **dst, const json_t *config, const char *field, size_t max,
          struct err *e)
{
  const char *v = jsonx_str(config, field);

  if (v == NULL)
    return 0;
  if (v[0] == '\0' || strlen(v) > max)
    return err_set(e, ERR_CONFIG, "field '%s': 1 to %zu characters", field,
                   max);
  for (const char *p = v; *p != '\0'; p++)
    if ((unsigned char)*p <= ' ' || *p == 0x7f)
      return err_set(e, ERR_CONFIG,
                     "field '%s': no spaces or control "
                     "characters",
                     field);
  *dst = xstrdup(v);
  return 0;
}

/* Google's label rules: a key 1-63 of [a-z0-9_-] starting with a letter,
 * a value 0-63 of the same. */
static int
label_ok(const char *s, int key)
{
  size_t n = strlen(s);

  if (n > 63 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)
    return 0;
  return !key || (n > 0 && s[0] >= 'a' && s[0] <= 'z');
}

static int
read_labels(struct gcp *g, const json_t *config, struct err *e)
{
  const json_t *labels = json_object_get(config, "labels");
  const char *key;
  json_t *v;

  if (labels == NULL || json_is_null(labels))
    return 0;
  if (!json_is_object(labels) || json_object_size(labels) > MAX_LABELS)
    return err_set(e, ERR_CONFIG,
                   "field 'labels': an object of at most %d "
                   "labels",
                   MAX_LABELS);
  json_object_foreach((json_t *)labels, key, v)
  {
    const char *val = json_string_value(v);

    if (val == NULL || !label_ok(key, 1) || !label_ok(val, 0))
      return err_set(e, ERR_CONFIG,
                     "field 'labels.%.64s': a key is 1-63 "
                     "of a-z, 0-9, '_' and '-' starting with a letter, a "
                     "value a string of 0-63 of them",
                     key);
    if (strncmp(key, "tenbin-", 7) == 0)
      return err_set(e, ERR_CONFIG,
                     "field 'labels.%s': keys starting "
                     "'tenbin-' are tenbin's",
                     key);
    g->labels[g->nlabels].key = xstrdup(key);
    g->labels[g->nlabels].value = xstrdup(val);
    g->nlabels++;
  }
  return 0;
}

/* The key file: credentials_file, else $GOOGLE_APPLICATION_CREDENTIALS. */
static int
read_key(struct gcp *g, const json_t *config, struct err *e)
{
  const char *path = jsonx_str(config, "credentials_file");
  char *text = NULL;
  size_t len = 0;
  int rc;

  if (path == NULL)
    path = getenv("GOOGLE_APPLICATION_CREDENTIALS");
  if (path == NULL || path[0] == '\0')
    return err_set(e, ERR_CONFIG,
                   "field 'credentials_file': the service "
                   "account's key file is needed (or "
                   "$GOOGLE_APPLICATION_CREDENTIALS)");
  rc = secret_read_file(path, 0, &text, &len, e);
  if (rc == 0)
    rc = gcp_key_load(text, len, &g->key, e);
  if (rc < 0) {
    err_prefix(e, "field 'credentials_file'");
    rc = err_recode(e, ERR_CONFIG);
  }
  secret_free(text);
  return rc;
}

/* Zones must be "<region>-<letter>": one of another region would fail
 * every launch there. */
static int
read_zones(struct gcp *g, const json_t *config, const char *region,
           struct err *e)
{
  const json_t *zones = json_object_get(config, "zones");
  size_t rlen = strlen(region), i;
  json_t *z;

  json_array_foreach(zones, i, z)
  {
    const char *name = json_string_value(z);

    if (i >= CLOUD_MAX_ZONES || name == NULL || strlen(name) != rlen + 2 ||
        strncmp(name, region, rlen) != 0 || name[rlen] != '-' ||
        name[rlen + 1] < 'a' || name[rlen + 1] > 'z')
      return err_set(e, ERR_CONFIG,
                     "field 'zones[%zu]': '%.64s' is not a "
                     "zone of region %s (%s-a, %s-b, ...)",
                     i, name != NULL ? name : "", region, region, region);
    snprintf(g->zones[i], CLOUD_NAME_LEN, "%s", name);
    g->nzones = i + 1;
  }
  return 0;
}

/* A shape's "accelerator": {"type", "count"}, for the machine families
 * whose GPUs are attached (N1) or may be named (G2). */
static int
read_accelerator(struct gcp *g, size_t i, struct err *e)
{
  const struct cloud_shape *s = &g->shapes[i];
  const json_t *a = json_object_get(s->config, "accelerator");
  const char *type;
  char where[48];
  int64_t count;

  snprintf(where, sizeof(where), "shapes[%zu].accelerator.", i);
  if (a == NULL || json_is_null(a)) {
    /* An N1 VM has no GPU unless one is attached. */
    if (strncmp(s->type, "n1-", 3) == 0)
      return err_set(e, ERR_CONFIG,
                     "field 'shapes[%zu].accelerator': an N1 "
                     "machine type has GPUs only as accelerators: "
                     "{\"type\": \"nvidia-tesla-t4\", \"count\": %" PRId64
                     "}, say",
                     i, s->gpus);
    return 0;
  }
  if (!json_is_object(a))
    return err_set(e, ERR_CONFIG,
                   "field 'shapes[%zu].accelerator' must be "
                   "an object",
                   i);
  if (jsonx_check(a, adapter_gcp_accelerator_fields, where, e) < 0)
    return err_recode(e, ERR_CONFIG);
  type = jsonx_str(a, "type");
  if (!word_ok(type, CLOUD_NAME_LEN - 1))
    return err_set(e, ERR_CONFIG,
                   "field '%stype': an accelerator type such "
                   "as \"nvidia-tesla-t4\" is needed",
                   where);
  if (jsonx_int(a, "count", 1, 16, s->gpus, &count, where, NULL) < 0)
    return err_set(e, ERR_CONFIG, "field '%scount': 1 to 16", where);
  /* The pool counts the shape's GPUs; the VM must have as many. */
  if (count != s->gpus)
    return err_set(e, ERR_CONFIG,
                   "field '%scount': %" PRId64 ", but the "
                   "shape has %" PRId64 " gpus",
                   where, count, s->gpus);
  snprintf(g->accel_type[i], CLOUD_NAME_LEN, "%s", type);
  g->accel_count[i] = (int)count;
  return 0;
}

/* The site's launch for shape i, zone, name and labels filled in. */
static struct gce_launch
launch_of(const struct gcp *g, size_t i, const char *name, const char *zone,
          const char *instance, const char *node)
{
  return (struct gce_launch){
      .name = name,
      .zone = zone,
      .machine_type = g->shapes[i].type,
      .image = g->image,
      .disk_gb = g->disk_gb,
      .disk_type = g->disk_type,
      .network = g->network,
      .subnetwork = g->subnetwork,
      .external_ip = g->external_ip,
      .instance_label = instance,
      .node_label = node,
      .labels = g->labels,
      .nlabels = g->nlabels,
      .accelerator_type = g->accel_type[i][0] != '\0' ? g->accel_type[i] : NULL,
      .accelerator_count = g->accel_count[i],
      .service_account = g->service_account,
  };
}

/* Where prices come from: "billing_endpoint" (the Catalog's base URL)
 * and "gpu_skus" ({"h100": "Nvidia H100 80GB GPU"}: the SKU name of a GPU
 * type where its word alone names several). */
static int
read_billing(struct gcp *g, const json_t *config, struct err *e)
{
  const char *base = jsonx_str(config, "billing_endpoint");
  const json_t *skus = json_object_get(config, "gpu_skus");
  const char *key;
  json_t *v;
  size_t n;

  if (base == NULL)
    base = PRICEFEED_GCP_BILLING;
  n = strnlen(base, 513);
  if (n > 512 ||
      (strncmp(base, "https://", 8) != 0 && strncmp(base, "http://", 7) != 0) ||
      strpbrk(base, "?# \t\r\n") != NULL)
    return err_set(e, ERR_CONFIG, "field 'billing_endpoint': an http(s) URL "
                   "of at most 512 bytes, without query");
  while (n > 8 && base[n - 1] == '/')
    n--;
  g->billing = xstrndup(base, n);
  if (skus == NULL || json_is_null(skus))
    return 0;
  if (!json_is_object(skus) || json_object_size(skus) > CLOUD_MAX_SHAPES)
    return err_set(e, ERR_CONFIG, "field 'gpu_skus': an object of at most "
                   "%d GPU types", CLOUD_MAX_SHAPES);
  json_object_foreach((json_t *)skus, key, v) {
    const char *name = json_string_value(v);

    if (strlen(key) >= ADAPTER_GPU_TYPE_LEN || !word_ok(key, 31) ||
        name == NULL || name[0] == '\0' ||
        strlen(name) >= PRICEFEED_SKU_LEN)
      return err_set(e, ERR_CONFIG, "field 'gpu_skus.%.40s': a GPU type "
                     "(lowercase) and the name of its SKU, at most %d "
                     "characters, such as \"Nvidia H100 80GB GPU\"", key,
                     PRICEFEED_SKU_LEN - 1);
    for (const char *p = name; *p != '\0'; p++)
      if ((unsigned char)*p < 0x20 || *p == 0x7f)
        return err_set(e, ERR_CONFIG, "field 'gpu_skus.%s': no control "
                       "characters", key);
    snprintf(g->sku_type[g->nskus], ADAPTER_GPU_TYPE_LEN, "%s", key);
    snprintf(g->sku_name[g->nskus], PRICEFEED_SKU_LEN, "%s", name);
    g->nskus++;
  }
  return 0;
}

/* Build every shape's insert once, so that what Google would refuse for
 * every launch is a config error now. */
static int
check_inserts(struct gcp *g, struct err *e)
{
  struct buf body;
  int rc = 0;

  buf_init(&body, BODY_MAX);
  for (size_t i = 0; i < g->nshapes && rc == 0; i++) {
    struct gce_launch l =
        launch_of(g, i, "tenbin-check", g->zones[0], "check", "1");

    rc = gce_insert_body(&l, &body, e);
    if (rc < 0) {
      err_prefix(e, "shape '%s'", g->shapes[i].name);
      rc = err_recode(e, ERR_CONFIG);
    }
    buf_reset(&body);
  }
  buf_release(&body);
  return rc;
}

/* Also its calls' hooks->free (hence the void *). */
static void
gcp_free(void *owner)
{
  struct gcp *g = owner;

  cloud_calls_release(&g->calls);
  gcp_key_free(g->key);
  free(g->base);
  free(g->billing);
  free(g->project);
  free(g->image);
  free(g->network);
  free(g->subnetwork);
  free(g->disk_type);
  free(g->service_account);
  free(g->name_label);
  for (size_t i = 0; i < g->nlabels; i++) {
    free((char *)g->labels[i].key);
    free((char *)g->labels[i].value);
  }
  free(g);
}

static const struct cloud_call_hooks gcp_hooks;

static int
gcp_open(const struct cloud_env *env, const json_t *config, void **pctx,
         struct err *e)
{
  struct gcp *g = xcalloc(1, sizeof(*g));
  struct http_client_config hc = {.user_agent = "tenbin"};
  const char *region = jsonx_str(config, "region");
  const char *endpoint = jsonx_str(config, "endpoint");
  const char *project = jsonx_str(config, "project");
  int64_t disk_gb = 0;
  int rc = 0;

  cloud_calls_init(&g->calls, env->loop, env->site_name, &gcp_hooks, g);
  g->shapes = env->shapes;
  g->nshapes = env->nshapes;
  if (!word_ok(region, 32)) {
    rc = err_set(e, ERR_CONFIG,
                 "field 'region': a GCP region such as "
                 "\"us-central1\" is needed");
    goto out;
  }
  snprintf(g->region, sizeof(g->region), "%s", region);
  rc = read_zones(g, config, region, e);
  /* A listing asks for no price. */
  if (rc == 0 && !env->list_only)
    rc = read_billing(g, config, e);
  if (rc < 0)
    goto out;
  if (env->name_tag != NULL) {
    if (!gce_label_ok(env->name_tag, 1)) {
      rc = err_set(e, ERR_CONFIG, "the name label '%.64s': a GCE label key "
                   "is 1-63 of a-z, 0-9, '_' and '-', starting with a "
                   "lowercase letter", env->name_tag);
      goto out;
    }
    g->name_label = xstrdup(env->name_tag);
  }
  if (endpoint == NULL)
    endpoint = GCE_ENDPOINT;
  if (strlen(endpoint) > 512 || (strncmp(endpoint, "https://", 8) != 0 &&
                                 strncmp(endpoint, "http://", 7) != 0)) {
    rc = err_set(e, ERR_CONFIG, "field 'endpoint': an http(s) URL");
    goto out;
  }
  g->base = xstrdup(endpoint);
  /* A trailing slash would make "//projects" in every URL. */
  while (strlen(g->base) > 8 && g->base[strlen(g->base) - 1] == '/')
    g->base[strlen(g->base) - 1] = '\0';
  rc = read_key(g, config, e);
  if (rc < 0)
    goto out;
  if (project == NULL)
    project = gcp_key_project(g->key);
  /* Project ids are 6-30 of [a-z0-9-]; older domain-scoped ones hold
   * "example.com:name". */
  if (project == NULL || project[0] == '\0' || strlen(project) > 100 ||
      strspn(project, "abcdefghijklmnopqrstuvwxyz0123456789-.:") !=
          strlen(project)) {
    rc = err_set(e, ERR_CONFIG,
                 "field 'project': a project id such as "
                 "\"my-project\" (else the key file's project_id)");
    goto out;
  }
  g->project = xstrdup(project);
  if (env->list_only) {
    /* Only the zones to list in; no VM is ever launched. */
    if (g->nzones == 0)
      rc = err_set(e, ERR_CONFIG, "field 'zones': the zones the VMs are "
                   "in (GCE lists them zone by zone)");
    goto client;
  }
  rc = copy_path(&g->image, config, "image", 512, e);
  if (rc == 0 && g->image == NULL)
    rc = err_set(e, ERR_CONFIG,
                 "field 'image': the boot image is needed "
                 "(projects/PROJECT/global/images/NAME or a family)");
  if (rc == 0)
    rc = copy_path(&g->network, config, "network", 512, e);
  if (rc == 0)
    rc = copy_path(&g->subnetwork, config, "subnetwork", 512, e);
  if (rc == 0)
    rc = copy_path(&g->service_account, config, "service_account", 256, e);
  if (rc == 0 && jsonx_int(config, "disk_size_gb", 10, 65536, DISK_GB_DEFAULT,
                           &disk_gb, "", NULL) < 0)
    rc = err_set(e, ERR_CONFIG, "field 'disk_size_gb': 10 to 65536");
  if (rc < 0)
    goto out;
  g->disk_gb = (int)disk_gb;
  if (jsonx_str(config, "disk_type") != NULL) {
    if (!word_ok(jsonx_str(config, "disk_type"), 63)) {
      rc = err_set(e, ERR_CONFIG,
                   "field 'disk_type': a disk type such as "
                   "\"pd-balanced\"");
      goto out;
    }
    g->disk_type = xstrdup(jsonx_str(config, "disk_type"));
  }
  /* Without an external address the node reaches tenbind only through
   * Cloud NAT or a VPN: the site says so with false. */
  g->external_ip = jsonx_bool(config, "external_ip", 1);
  rc = read_labels(g, config, e);
  for (size_t i = 0; rc == 0 && i < g->nshapes; i++)
    rc = read_accelerator(g, i, e);
  if (rc == 0 && g->nzones == 0)
    rc = err_set(e, ERR_CONFIG, "field 'zones': at least one zone");
  if (rc == 0)
    rc = check_inserts(g, e);
client:
  if (rc < 0)
    goto out;
  hc.ca_file = jsonx_str(config, "ca_file");
  rc = http_client_new(env->loop, &hc, &g->calls.http, e);
  if (rc < 0)
    goto out;
  /* The first call should not wait for the token: ask now. */
  cloud_call_token_ask(&g->calls);
  *pctx = g;
  g = NULL;
out:
  if (g != NULL)
    gcp_free(g);
  return rc;
}

/* ---- ops ---- */

static struct op *
op_new(struct gcp *g, enum cloud_call_kind kind, void *arg)
{
  struct op *o = xcalloc(1, sizeof(*o));

  o->g = g;
  cloud_call_start(&g->calls, &o->call, kind, arg);
  return o;
}

static size_t shape_prices(const struct op *o, struct cloud_price *p);

/* Answer o's caller with r (vm: a launch's, may be NULL) and retire o. */
static void
finish(struct op *o, const struct cloud_result *r, const struct cloud_vm *vm)
{
  struct cloud_price p[CLOUD_MAX_SHAPES];
  struct cloud_result closed;
  size_t n = 0;

  if (o->g->calls.closing && r->rc == 0) {
    /* Whatever came after close() began is not the caller's any more. */
    cloud_call_closing(&closed);
    r = &closed;
  }
  if (o->call.kind == CLOUD_CALL_PRICES && r->rc == 0)
    n = shape_prices(o, p);
  free(o->url);
  free(o->body);
  free(o->skus);
  cloud_call_end(&o->call, r, vm, p, n);
}

static void
finish_cb(struct cloud_call *c, const struct cloud_result *r)
{
  finish((struct op *)c, r, NULL);
}

/* ---- the token ---- */

/* The provider's wait from a Retry-After (seconds), or -1. */
static int64_t
retry_after(const struct http_client_response *resp)
{
  const char *after = http_client_response_header(resp, "Retry-After");
  char *end;
  long long v;

  if (after == NULL)
    return -1;
  v = strtoll(after, &end, 10);
  return end != after && *end == '\0' && v >= 0 && v <= 3600 ? v * 1000 : -1;
}

static int
read_token(void *owner, int rc, const struct http_client_response *resp,
           const struct err *e, char *token, int64_t *ttl_s,
           struct cloud_result *r)
{
  struct err pe = {0};

  (void)owner;
  if (rc < 0) {
    cloud_refuse(r, CLOUD_REFUSED_TRANSIENT, -1,
                 "token endpoint unreachable: %s", e->msg);
    return -1;
  }
  if (resp->status == 429 || resp->status >= 500) {
    cloud_refuse(r,
                 resp->status == 429 ? CLOUD_REFUSED_THROTTLE
                                     : CLOUD_REFUSED_TRANSIENT,
                 retry_after(resp), "token endpoint answered %d", resp->status);
    return -1;
  }
  rc = oauth_token_parse(resp->body, resp->len, token, ttl_s, &pe);
  if (rc == 0 && (resp->status != 200 || !cloud_call_token_ok(token)))
    rc = err_set(&pe, ERR_SITE, "no usable token");
  if (rc < 0) {
    /* A grant refused is the key's fault; a garbled 200 is not. */
    cloud_refuse(r,
                 rc == ERR_UNAUTHORIZED || resp->status != 200
                     ? CLOUD_REFUSED_AUTH
                     : CLOUD_REFUSED_TRANSIENT,
                 -1, "token endpoint %d: %s", resp->status, pe.msg);
    return -1;
  }
  return 0;
}

/* Ask the token endpoint for a token. */
static void
ask_token(void *owner)
{
  static const char *const headers[] = {
      "Content-Type: application/x-www-form-urlencoded", NULL};
  struct gcp *g = owner;
  struct http_client_request req = {0};
  struct cloud_result r;
  struct buf body;
  struct err e = {0};
  int rc;

  buf_init(&body, 32768);
  rc = gcp_token_request(g->key, time_now_ms() / 1000, GCP_SCOPE, &body, &e);
  if (rc == 0) {
    req.method = "POST";
    req.url = gcp_key_token_uri(g->key);
    req.headers = headers;
    req.body = body.data;
    req.body_len = body.len;
    rc = cloud_call_token_post(&g->calls, &req, &e);
  }
  buf_release(&body);
  if (rc == 0)
    return;
  cloud_refuse(&r, CLOUD_REFUSED_AUTH, -1, "token request: %s", e.msg);
  if (cloud_call_token_failed(&g->calls, &r) == 0)
    log_warn("gcp: %s", r.msg);
}

/* ---- requests and answers ---- */

static void on_answer(void *arg, int rc,
                      const struct http_client_response *resp,
                      const struct err *e);

/* Send o's request with the token at hand. */
static void
send_now(struct cloud_call *c)
{
  struct op *o = (struct op *)c;
  const char *headers[] = {
      o->body != NULL ? "Content-Type: application/json" : NULL, NULL};
  struct http_client_request req = {0};
  struct cloud_result r;

  req.method = o->method;
  req.url = o->url;
  req.headers = headers;
  req.body = o->body;
  req.body_len = o->body_len;
  req.max_response = GCE_ANSWER_MAX;
  /* Inserts and deletes carry a requestId: a repeat is the same call. */
  req.idempotent = true;
  req.max_attempts = 2;
  if (cloud_call_send(c, &req, 1, on_answer, "GCE", &r) < 0)
    cloud_call_fail_later(c, &r);
}

static const struct cloud_call_hooks gcp_hooks = {
    .finish = finish_cb,
    .free = gcp_free,
    .send = send_now,
    .ask = ask_token,
    .read = read_token,
    /* Renewed 5 min before expiry, or at half the life of a short token. */
    .renew_part = 2,
};

/* Set o's request (what a resend after a 401 sends again): the URL is
 * taken from url, body (new, may be NULL) stolen. */
static void
set_request(struct op *o, const char *method, struct buf *url, char *body,
            size_t body_len)
{
  free(o->url);
  free(o->body);
  o->method = method;
  o->url = buf_take(url, NULL);
  o->body = body;
  o->body_len = body_len;
}

/* What an error answer means. */
static void
refusal(const struct http_client_response *resp, const struct gce_error *ge,
        struct cloud_result *r)
{
  const char *word = ge->reason[0] != '\0' ? ge->reason : ge->status;

  cloud_refuse(r, ge->refusal, retry_after(resp), "GCE %d %s: %.300s",
               resp->status, word[0] != '\0' ? word : "(no reason)",
               ge->message);
}

static void
launched(struct op *o)
{
  struct cloud_result r = {0};
  struct cloud_vm vm;

  memset(&vm, 0, sizeof(vm));
  r.retry_after_ms = -1;
  snprintf(vm.id, sizeof(vm.id), "%s", o->name);
  vm.state = CLOUD_VM_PENDING;
  snprintf(vm.zone, sizeof(vm.zone), "%s", o->zone);
  snprintf(vm.shape, sizeof(vm.shape), "%s", o->shape);
  vm.spot = o->spot;
  snprintf(vm.instance, sizeof(vm.instance), "%s", o->instance);
  snprintf(vm.node, sizeof(vm.node), "%s", o->node);
  finish(o, &r, &vm);
}

static void
poll_cb(uv_timer_t *t)
{
  cloud_call_with_token(t->data);
}

/* An insert's operation as answered: done, failed, or poll again. */
static void
on_operation(struct op *o, const struct http_client_response *resp)
{
  struct gce_operation op;
  struct cloud_result r;
  struct gce_loc loc = {o->g->base, o->g->project, o->zone};
  struct buf url;
  struct err e = {0};
  int rc = gce_parse_operation(resp->body, resp->len, &op, &e);

  if (rc < 0 && op.failed) {
    /* Another requestId's insert of this name went through: ours. */
    if (strcmp(op.error_code, "RESOURCE_ALREADY_EXISTS") == 0 ||
        strcmp(op.error_code, "alreadyExists") == 0) {
      launched(o);
      return;
    }
    /* The image or machine type is missing: the config's mistake. */
    cloud_refuse(&r,
                 op.refusal == CLOUD_REFUSED_NOT_FOUND ? CLOUD_REFUSED_OTHER
                                                       : op.refusal,
                 -1, "%s", e.msg);
    finish(o, &r, NULL);
    return;
  }
  if (rc < 0) {
    /* The insert may have gone through: the pool's resend carries the
     * same requestId. */
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "GCE's answer: %s", e.msg);
    finish(o, &r, NULL);
    return;
  }
  if (op.status == GCE_OP_DONE) {
    launched(o);
    return;
  }
  if (o->step == ST_INSERT) {
    o->step = ST_POLL;
    o->poll_ms = POLL_FIRST_MS;
    o->poll_until_ms = time_now_ms() + POLL_GIVE_UP_MS;
    snprintf(o->opname, sizeof(o->opname), "%s", op.name);
    buf_init(&url, URL_MAX);
    rc = gce_url_operation(&loc, o->opname, &url, &e);
    if (rc < 0) {
      buf_release(&url);
      cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "GCE's answer: %s", e.msg);
      finish(o, &r, NULL);
      return;
    }
    set_request(o, "GET", &url, NULL, 0);
    buf_release(&url);
  } else {
    o->poll_ms = o->poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : o->poll_ms * 2;
  }
  if (time_now_ms() >= o->poll_until_ms) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1,
                 "GCE operation %s still %s after %d s", o->opname,
                 op.status == GCE_OP_PENDING ? "PENDING" : "RUNNING",
                 POLL_GIVE_UP_MS / 1000);
    finish(o, &r, NULL);
    return;
  }
  uv_timer_start(&o->call.timer, poll_cb, (uint64_t)o->poll_ms, 0);
}

static void send_page(struct op *o, const char *page_token);

/* A page of the listing as answered: the next page, zone or the end. */
static void
on_page(struct op *o, const struct http_client_response *resp)
{
  struct gcp *g = o->g;
  struct cloud_call *c = &o->call;
  struct cloud_result r = {0};
  char *next = xmalloc(GCE_TOKEN_LEN);
  size_t n = 0, nout = 0, room;
  struct err e = {0};

  r.retry_after_ms = -1;
  if (c->cap - c->n < GCE_MAX_RESULTS && c->cap < MAX_LISTED) {
    c->cap = c->cap == 0 ? GCE_MAX_RESULTS : c->cap * 2;
    if (c->cap > MAX_LISTED)
      c->cap = MAX_LISTED;
    c->vms = xrealloc(c->vms, c->cap * sizeof(*c->vms));
  }
  room = c->cap - c->n;
  if (gce_parse_list_named(resp->body, resp->len, g->name_label,
                           c->vms + c->n, room, &n, &nout, next, &e) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "GCE's answer: %s", e.msg);
    goto done;
  }
  c->n += n;
  if (nout > n) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d VMs labelled",
                 MAX_LISTED);
    goto done;
  }
  if (next[0] != '\0') {
    if (++o->pages >= MAX_PAGES) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d pages in %s",
                   MAX_PAGES, g->zones[o->zone_ix]);
      goto done;
    }
    send_page(o, next);
    free(next);
    return;
  }
  if (++o->zone_ix < g->nzones) {
    o->pages = 0;
    send_page(o, NULL);
    free(next);
    return;
  }
done:
  free(next);
  finish(o, &r, NULL);
}

static void send_skus(struct op *o, const char *page_token);

/* A page of the Catalog's SKUs: its GPU SKUs of the region kept, then
 * the next page or the answer. */
static void
on_skus(struct op *o, const struct http_client_response *resp)
{
  struct gcp *g = o->g;
  struct pricefeed_sku_page *p = xcalloc(1, sizeof(*p));
  struct cloud_result r = {0};
  struct err e = {0};

  r.retry_after_ms = -1;
  p->rows = xcalloc(SKU_PAGE_GPUS, sizeof(*p->rows));
  p->max = SKU_PAGE_GPUS;
  if (pricefeed_gcp_skus_parse(resp->body, resp->len, g->region, p, &e) <
      0) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "%s", e.msg);
    goto done;
  }
  if (p->nout > p->n || o->nskus + p->n > MAX_GPU_SKUS) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d GPU SKUs in "
                 "%s", p->nout > p->n ? SKU_PAGE_GPUS : MAX_GPU_SKUS,
                 p->nout > p->n ? "a page" : "the Catalog");
    goto done;
  }
  if (p->n > 0) {
    o->skus = xrealloc(o->skus, (o->nskus + p->n) * sizeof(*o->skus));
    memcpy(o->skus + o->nskus, p->rows, p->n * sizeof(*o->skus));
    o->nskus += p->n;
  }
  if (p->next_token[0] != '\0') {
    if (++o->pages >= MAX_SKU_PAGES) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d pages of "
                   "SKUs", MAX_SKU_PAGES);
      goto done;
    }
    send_skus(o, p->next_token);
    free(p->rows);
    free(p);
    return;
  }
done:
  free(p->rows);
  free(p);
  finish(o, &r, NULL);
}

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct op *o = arg;
  struct cloud_result r = {0};
  struct gce_error ge;

  r.retry_after_ms = -1;
  if (o->g->calls.closing) {
    cloud_call_closing(&r);
    finish(o, &r, NULL);
    return;
  }
  if (rc < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "GCE unreachable: %s",
                 e->msg);
    finish(o, &r, NULL);
    return;
  }
  if (cloud_call_reauth(&o->call, resp->status))
    return;
  if (resp->status == 200) {
    switch (o->step) {
    case ST_INSERT:
    case ST_POLL:
      on_operation(o, resp);
      return;
    case ST_LIST:
      on_page(o, resp);
      return;
    case ST_DELETE:
      finish(o, &r, NULL);
      return;
    case ST_SKUS:
      on_skus(o, resp);
      return;
    }
  }
  gce_parse_error(resp->body, resp->len, resp->status, &ge);
  if (o->step == ST_INSERT && resp->status == 409 &&
      (strcmp(ge.reason, "alreadyExists") == 0 ||
       strcmp(ge.status, "ALREADY_EXISTS") == 0)) {
    launched(o);
    return;
  }
  if (o->step == ST_DELETE && resp->status == 404) {
    finish(o, &r, NULL); /* already gone */
    return;
  }
  refusal(resp, &ge, &r);
  if (r.why == CLOUD_REFUSED_NOT_FOUND && o->step != ST_LIST &&
      o->step != ST_SKUS) {
    /* An insert's: its image or machine type, the config's mistake.  A
     * poll's: the operation, which a resend of the insert finds. */
    r.why =
        o->step == ST_INSERT ? CLOUD_REFUSED_OTHER : CLOUD_REFUSED_TRANSIENT;
    r.rc = ERR_SITE;
  }
  finish(o, &r, NULL);
}

/* ---- calls ---- */

static int
shape_index(const struct gcp *g, const struct cloud_shape *s)
{
  for (size_t i = 0; i < g->nshapes; i++)
    if (&g->shapes[i] == s || strcmp(g->shapes[i].name, s->name) == 0)
      return (int)i;
  return -1;
}

static void
gcp_launch(void *pctx, const struct cloud_launch *l, cloud_launch_cb cb,
           void *arg)
{
  struct gcp *g = pctx;
  struct op *o = op_new(g, CLOUD_CALL_LAUNCH, arg);
  struct gce_loc loc = {g->base, g->project, l->zone};
  char rid[GCE_REQUEST_ID_LEN];
  struct gce_launch gl;
  struct cloud_result r;
  struct buf url, body;
  struct err e = {0};
  int ix = shape_index(g, l->shape), rc;

  o->call.launch_cb = cb;
  o->step = ST_INSERT;
  snprintf(o->name, sizeof(o->name), "%s", l->name);
  snprintf(o->zone, sizeof(o->zone), "%s", l->zone);
  snprintf(o->shape, sizeof(o->shape), "%s", l->shape->type);
  snprintf(o->instance, sizeof(o->instance), "%s", l->instance);
  snprintf(o->node, sizeof(o->node), "%s", l->node);
  o->spot = l->spot;
  buf_init(&url, URL_MAX);
  buf_init(&body, BODY_MAX);
  if (cloud_call_closed(&o->call))
    goto out;
  if (ix < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "no shape '%s' in this site",
                 l->shape->name);
    cloud_call_fail_later(&o->call, &r);
    goto out;
  }
  /* The same node and attempt give the same token, hence the same
   * requestId: Google makes one VM of a resent insert. */
  gce_request_id(l->token, rid);
  gl = launch_of(g, (size_t)ix, l->name, l->zone, l->instance, l->node);
  gl.spot = l->spot;
  gl.startup_script = l->script;
  rc = gce_url_insert(&loc, rid, &url, &e);
  if (rc == 0)
    rc = gce_insert_body(&gl, &body, &e);
  if (rc < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "%s", e.msg);
    cloud_call_fail_later(&o->call, &r);
    goto out;
  }
  set_request(o, "POST", &url, NULL, 0);
  o->body_len = body.len;
  o->body = buf_take(&body, NULL);
  cloud_call_with_token(&o->call);
out:
  buf_release(&url);
  buf_release(&body);
}

static void
send_page(struct op *o, const char *page_token)
{
  struct gcp *g = o->g;
  struct gce_loc loc = {g->base, g->project, g->zones[o->zone_ix]};
  struct cloud_result r;
  struct buf url;
  struct err e = {0};

  buf_init(&url, URL_MAX);
  if (gce_url_list_labelled(&loc, o->key, o->value, GCE_MAX_RESULTS,
                            page_token, &url, &e) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "%s", e.msg);
    cloud_call_fail_later(&o->call, &r);
  } else {
    set_request(o, "GET", &url, NULL, 0);
    cloud_call_with_token(&o->call);
  }
  buf_release(&url);
}

static void
gcp_list_tagged(void *pctx, const char *key, const char *value,
                cloud_list_cb cb, void *arg)
{
  struct op *o = op_new(pctx, CLOUD_CALL_LIST, arg);
  struct cloud_result r;

  o->call.list_cb = cb;
  o->step = ST_LIST;
  if (cloud_call_closed(&o->call))
    return;
  /* A label is at most 63 bytes: a longer one matches no VM, and a cut
   * one could match another's. */
  if (strlen(key) >= sizeof(o->key) || strlen(value) >= sizeof(o->value)) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "GCE list: label '%.64s': "
                 "longer than a label may be", key);
    cloud_call_fail_later(&o->call, &r);
    return;
  }
  snprintf(o->key, sizeof(o->key), "%s", key);
  snprintf(o->value, sizeof(o->value), "%s", value);
  send_page(o, NULL);
}

static void
gcp_list(void *pctx, const char *instance, cloud_list_cb cb, void *arg)
{
  gcp_list_tagged(pctx, CLOUD_TAG_INSTANCE, instance, cb, arg);
}

static void
gcp_terminate(void *pctx, const struct cloud_vm *vm, cloud_done_cb cb,
              void *arg)
{
  struct gcp *g = pctx;
  struct op *o = op_new(g, CLOUD_CALL_TERMINATE, arg);
  struct gce_loc loc = {g->base, g->project, vm->zone};
  char seed[CLOUD_ID_LEN + CLOUD_NAME_LEN + 64], rid[GCE_REQUEST_ID_LEN];
  struct cloud_result r;
  struct buf url;
  struct err e = {0};

  o->call.done_cb = cb;
  o->step = ST_DELETE;
  if (cloud_call_closed(&o->call))
    return;
  /* The client's own resend of this call is one delete; a later call is
   * a new one (a delete that failed inside Google is tried again, not
   * replayed). */
  snprintf(seed, sizeof(seed), "delete %s/%s %" PRId64 " %u", vm->zone, vm->id,
           time_now_ms(), ++g->seq);
  gce_request_id(seed, rid);
  buf_init(&url, URL_MAX);
  if (gce_url_delete(&loc, vm->id, rid, &url, &e) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "%s", e.msg);
    cloud_call_fail_later(&o->call, &r);
  } else {
    set_request(o, "DELETE", &url, NULL, 0);
    cloud_call_with_token(&o->call);
  }
  buf_release(&url);
}

/* ---- prices ---- */

static void
send_skus(struct op *o, const char *page_token)
{
  struct gcp *g = o->g;
  struct cloud_result r;
  struct buf url;

  buf_init(&url, URL_MAX);
  if (pricefeed_gcp_skus_url(g->billing, SKU_PAGE_SIZE, page_token, &url) <
      0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "the Catalog's URL is too "
                 "long");
    cloud_call_fail_later(&o->call, &r);
  } else {
    set_request(o, "GET", &url, NULL, 0);
    cloud_call_with_token(&o->call);
  }
  buf_release(&url);
}

/* The SKU name "gpu_skus" gives gpu_type, or NULL. */
static const char *
sku_of(const struct gcp *g, const char *gpu_type)
{
  for (size_t i = 0; i < g->nskus; i++)
    if (strcasecmp(g->sku_type[i], gpu_type) == 0)
      return g->sku_name[i];
  return NULL;
}

/* Each shape's prices from the SKUs gathered, into p; how many. */
static size_t
shape_prices(const struct op *o, struct cloud_price *p)
{
  struct gcp *g = o->g;
  size_t n = 0;

  for (size_t s = 0; s < g->nshapes; s++) {
    const struct cloud_shape *sh = &g->shapes[s];
    const char *sku = sku_of(g, sh->gpu_type);
    int64_t micro[2] = {-1, -1};

    for (int spot = 0; spot < 2; spot++) {
      char why[PRICEFEED_SKU_LEN * 2 + 96];
      int rc = pricefeed_gcp_gpu_price(o->skus, o->nskus, sh->gpu_type, sku,
                                       spot, &micro[spot], why, sizeof(why));

      if (rc == 0)
        micro[spot] *= sh->gpus;
      else if (rc == ERR_CONFLICT)
        log_warn("gcp: shape %s: %s", sh->name, why);
      else
        log_info("gcp: shape %s: %s", sh->name, why);
    }
    if (micro[0] >= 0 || micro[1] >= 0)
      p[n++] = (struct cloud_price){s, micro[0], micro[1]};
  }
  return n;
}

static void
gcp_prices(void *pctx, cloud_prices_cb cb, void *arg)
{
  struct op *o = op_new(pctx, CLOUD_CALL_PRICES, arg);

  o->call.prices_cb = cb;
  o->step = ST_SKUS;
  if (!cloud_call_closed(&o->call))
    send_skus(o, NULL);
}

static void
gcp_close(void *pctx, void (*cb)(void *arg), void *arg)
{
  struct gcp *g = pctx;

  cloud_calls_close(&g->calls, 1, cb, arg);
}

const struct cloud_provider cloud_gcp_provider = {
    .kind = "gcp",
    .fields = adapter_gcp_fields,
    .open = gcp_open,
    .launch = gcp_launch,
    .list = gcp_list,
    .list_tagged = gcp_list_tagged,
    .terminate = gcp_terminate,
    .close = gcp_close,
    .prices = gcp_prices,
};

static int
gcp_site_open(const struct adapter_env *env, const json_t *config, void **ctx,
              struct err *e)
{
  return cloud_open(&cloud_gcp_provider, env, config, ctx, e);
}

const struct adapter_ops adapter_gcp_ops = CLOUD_OPS("gcp", gcp_site_open);
