/*
 * The azure provider of the VM pool: Azure Resource Manager's
 * virtualMachines over http/client, with a bearer token from Microsoft
 * Entra's client-credentials flow (azure_auth.c, oauth.c), bodies and
 * answers as azure_arm.c spells and reads them.
 *
 * Credentials come from the site's "credentials" block (tenant,
 * client_id, client_secret_file), else from the environment
 * (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET).  One access
 * token serves every call.  It is fetched when a call first needs it
 * (calls that come meanwhile wait for the same fetch), fetched again in
 * the background once most of its life is spent, and dropped when ARM
 * answers 401 to it: the call that got the 401 retries once with a new
 * one.
 *
 * A launch PUTs the VM under the pool's name for the node, so a PUT
 * resent after a crash meets the VM the first one made.  ARM creates it
 * asynchronously; the launch answers once the operation has ended.  A
 * creation that failed leaves a Failed VM under that name, which would
 * tie the next attempt (in another zone) to the old VM: it is deleted,
 * and the delete awaited, before the refusal is answered.
 *
 * Each call is one attempt (the pool decides about retrying); polls of
 * an operation ride over a few failed polls, and the HTTP client only
 * retries a connection that broke before an answer.
 *
 * Opened list_only (the cloud block of an elastic Slurm site), it reads
 * the connection alone (subscription, resource_group, credentials,
 * endpoint, login_endpoint, ca_file) and lists the VMs of the group
 * tagged key = value by anyone.  ARM's list has no tag filter: every VM
 * of the group comes, and the page is filtered here.  A VM's private
 * address is its NIC's, one more call per VM: it is not read, so a
 * Slurm node is found by its VM's name or by the node tag.
 *
 * Prices come from the public Retail Prices API ("prices_endpoint"),
 * asked without the ARM token, which is for ARM alone: for each VM size
 * of the site's shapes, the Linux Consumption rows of the site's
 * location, page by page, read by the rules of price_feed.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/azure_arm.h"
#include "adapters/azure_auth.h"
#include "adapters/cloud_call.h"
#include "adapters/config_fields.h"
#include "adapters/cloud_int.h"
#include "adapters/oauth.h"
#include "adapters/price_feed.h"
#include "http/client.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/secret.h"
#include "util/timeutil.h"

/* A PUT body: the script's 64 KiB as base64, and the rest. */
#define BODY_MAX (256u << 10)
#define MAX_LISTED 100000     /* VMs one listing may hold */
#define MAX_PAGES 200
#define FIRST_PAGE_VMS 256    /* grown to what a page says it holds */
#define MAX_POLLS 2000        /* of one operation */
#define MAX_POLL_ERRORS 5     /* failed polls in a row before giving up */
/* GPU VMs can take long to allocate; past this the pool retries the
 * PUT, which finds the same VM. */
#define CREATE_WAIT_MS (30 * 60 * 1000)
#define DELETE_WAIT_MS (10 * 60 * 1000)
/* Polls without a Retry-After back off from the first to the last. */
#define POLL_FIRST_MS 500
#define POLL_MAX_MS 15000
#define POLL_MIN_MS 100
/* Names in ARM paths: a subscription id is a GUID, a group at most 90
 * characters. */
#define SUB_LEN 64
#define GROUP_LEN 90
/* Azure's tag limits: a name of 512, a value of 256. */
#define TAG_KEY_LEN 513
#define TAG_VALUE_LEN 257
/* Pages of one size's prices: a few rows per meter, 1000 to a page. */
#define MAX_PRICE_PAGES 20

struct azure {
  struct cloud_calls calls;   /* and the token they share */
  char *site;
  char *endpoint;             /* ARM's base, "https://management.azure.com" */
  char *list_url;             /* the group's virtualMachines */
  char *token_url;
  char *prices_base;          /* Retail Prices' base URL */
  const struct cloud_shape *shapes; /* the pool's, alive while it is */
  size_t nshapes;
  char *client_id;
  char *secret;               /* secret_free */
  char *subscription, *group, *location;
  char *image, *subnet_id, *nic_id, *admin_user, *ssh_key;
  struct azarm_tag tags[AZARM_MAX_TAGS]; /* the site's own; new strings */
  size_t ntags;
  char *name_tag;             /* cloud_env's, or NULL */
};

enum op_step {
  S_PUT,          /* launch: the PUT */
  S_CREATING,     /* launch: polling the creation */
  S_DELETE,       /* launch: deleting the VM whose creation failed */
  S_DELETING,     /* launch: polling that delete */
  S_LIST,         /* list: a page */
  S_TERMINATE,    /* terminate: the DELETE */
  S_PRICES        /* prices: a page of a size's */
};

struct op {
  struct cloud_call call;     /* first (cloud_call.h); its timer polls,
                                 its r is also a launch's refusal kept
                                 while its VM is deleted */
  struct azure *a;
  enum op_step step;
  const char *method;         /* of the next request (static) */
  char *url;                  /* of the next request */
  char *vm_url;               /* the VM's */
  char *body;                 /* the PUT's */
  size_t body_len;
  int poll_op;                /* polling an operation, not the VM */
  int polls, errors;
  int64_t backoff_ms;
  int64_t deadline_ms;        /* time_mono_ms */
  char name[CLOUD_ID_LEN];
  char zone[CLOUD_NAME_LEN];
  char size[CLOUD_NAME_LEN];
  int spot;
  char instance[CLOUD_NAME_LEN];
  char node[CLOUD_NAME_LEN];
  struct cloud_vm vm;         /* a launch's, as ARM last described it */
  int pages;
  char key[TAG_KEY_LEN];      /* a tagged listing's tag, "" for the
                                 pool's (instance) */
  char value[TAG_VALUE_LEN];
  /* prices: the shape asked about, what its pages came to, and the
   * shapes' prices so far */
  size_t shape_ix;
  struct pricefeed_azure feed;
  struct cloud_price prices[CLOUD_MAX_SHAPES];
  size_t nprices;
};

/* ---- config ---- */

const struct jsonx_field adapter_azure_fields[] = {
    {"subscription", JX_STRING},    {"resource_group", JX_STRING},
    {"location", JX_STRING},        {"credentials", JX_OBJECT},
    {"endpoint", JX_STRING},        {"login_endpoint", JX_STRING},
    {"image", JX_STRING},           {"subnet_id", JX_STRING},
    {"nic_id", JX_STRING},          {"admin_user", JX_STRING},
    {"ssh_public_key", JX_STRING},  {"tags", JX_OBJECT},
    {"ca_file", JX_STRING},         {"prices_endpoint", JX_STRING},
    {NULL, 0}};

const struct jsonx_field adapter_azure_credentials_fields[] = {
    {"tenant", JX_STRING}, {"client_id", JX_STRING},
    {"client_secret_file", JX_STRING}, {NULL, 0}};

/* Wipe a buffer that held a secret before it goes. */
static void
buf_wipe_release(struct buf *b)
{
  if (b->data != NULL)
    memset(b->data, 0, b->len);
  buf_release(b);
}

/*
 * Check url (a config field) is an http(s) URL; plain http only to this
 * machine, since what travels to it is a credential (a bearer token to
 * ARM, the client secret to the token endpoint).  *out is new, without
 * a trailing '/'.
 */
static int
read_base(const json_t *config, const char *field, const char *dflt,
          char **out, struct err *e)
{
  const char *v = jsonx_str(config, field);
  const char *h;
  char host[256];
  size_t n, hl;

  if (v == NULL)
    v = dflt;
  n = strnlen(v, 1025);
  if (n > 1024 || (strncmp(v, "https://", 8) != 0 &&
                   strncmp(v, "http://", 7) != 0) ||
      strpbrk(v, "?# \t\r\n") != NULL)
    return err_set(e, ERR_CONFIG, "field '%s': an http(s) URL of at most "
                   "1024 bytes, without query", field);
  while (n > 8 && v[n - 1] == '/')
    n--;
  h = strstr(v, "://") + 3;
  hl = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/");
  if (hl == 0 || hl >= sizeof(host))
    return err_set(e, ERR_CONFIG, "field '%s': no host in the URL", field);
  memcpy(host, h, hl);
  host[hl] = '\0';
  if (strncmp(v, "http://", 7) == 0 && !secret_host_is_loopback(host))
    return err_set(e, ERR_CONFIG, "field '%s': plain http only to this "
                   "machine (credentials would travel in clear)", field);
  *out = xstrndup(v, n);
  return 0;
}

static int
read_credentials(struct azure *a, const json_t *config, const char **tenant,
                 struct err *e)
{
  const json_t *c = json_object_get(config, "credentials");
  const char *id, *file;

  if (c != NULL && !json_is_null(c)) {
    if (!json_is_object(c))
      return err_set(e, ERR_CONFIG, "field 'credentials' must be an object");
    if (jsonx_check(c, adapter_azure_credentials_fields, "credentials.",
                    e) < 0)
      return ERR_CONFIG;
    *tenant = jsonx_str(c, "tenant");
    id = jsonx_str(c, "client_id");
    file = jsonx_str(c, "client_secret_file");
    if (*tenant == NULL || id == NULL || file == NULL)
      return err_set(e, ERR_CONFIG, "field 'credentials': tenant, client_id "
                     "and client_secret_file go together");
    if (secret_read_file(file, SECRET_FIRST_LINE, &a->secret, NULL, e) < 0) {
      err_prefix(e, "field 'credentials.client_secret_file'");
      return err_recode(e, ERR_CONFIG);
    }
  } else {
    *tenant = getenv("AZURE_TENANT_ID");
    id = getenv("AZURE_CLIENT_ID");
    if (*tenant == NULL || id == NULL || getenv("AZURE_CLIENT_SECRET") == NULL)
      return err_set(e, ERR_CONFIG, "field 'credentials': none found (no "
                     "block in the config, and not all of AZURE_TENANT_ID, "
                     "AZURE_CLIENT_ID and AZURE_CLIENT_SECRET are set)");
    if (getenv("AZURE_CLIENT_SECRET")[0] == '\0' ||
        strlen(getenv("AZURE_CLIENT_SECRET")) > SECRET_FILE_MAX)
      return err_set(e, ERR_CONFIG, "field 'credentials': "
                     "AZURE_CLIENT_SECRET is empty or too long");
    a->secret = xstrdup(getenv("AZURE_CLIENT_SECRET"));
  }
  /* An application id is a GUID. */
  if (!azarm_word_ok(id, 64, "-"))
    return err_set(e, ERR_CONFIG, "field 'credentials.client_id': '%.64s' "
                   "is not an application id", id);
  a->client_id = xstrdup(id);
  return 0;
}

/* An optional string field, 1..max printable bytes, copied. */
static int
copy_field(char **dst, const json_t *config, const char *field, size_t max,
           struct err *e)
{
  const json_t *v = json_object_get(config, field);
  const char *s = json_string_value(v);

  if (v == NULL || json_is_null(v))
    return 0;
  if (s == NULL || s[0] == '\0' || strlen(s) > max)
    return err_set(e, ERR_CONFIG, "field '%s': a string of 1 to %zu bytes",
                   field, max);
  for (const char *p = s; *p != '\0'; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return err_set(e, ERR_CONFIG, "field '%s': no control characters",
                     field);
  *dst = xstrdup(s);
  return 0;
}

static int
read_vm_fields(struct azure *a, const json_t *config, struct err *e)
{
  const json_t *tags = json_object_get(config, "tags");
  int64_t max_nodes = 0;
  const char *key;
  json_t *v;
  int rc;

  rc = copy_field(&a->image, config, "image", 1024, e);
  if (rc == 0 && a->image == NULL)
    rc = err_set(e, ERR_CONFIG, "field 'image': a URN "
                 "publisher:offer:sku:version or an image id is needed");
  if (rc == 0)
    rc = copy_field(&a->subnet_id, config, "subnet_id", 1024, e);
  if (rc == 0)
    rc = copy_field(&a->nic_id, config, "nic_id", 1024, e);
  if (rc == 0 && (a->subnet_id == NULL) == (a->nic_id == NULL))
    rc = err_set(e, ERR_CONFIG, "field 'subnet_id': the subnet the VMs' "
                 "NICs are made in is needed (or an existing 'nic_id', one "
                 "of the two)");
  /* An existing NIC serves one VM at a time. */
  if (rc == 0 && a->nic_id != NULL &&
      (jsonx_int(config, "max_nodes", 1, 100000, 4, &max_nodes, "", e) < 0 ||
       max_nodes != 1))
    rc = err_set(e, ERR_CONFIG, "field 'nic_id': one NIC serves one VM, so "
                 "max_nodes must be 1 (use subnet_id for more)");
  if (rc == 0)
    rc = copy_field(&a->admin_user, config, "admin_user", 64, e);
  if (rc == 0)
    rc = copy_field(&a->ssh_key, config, "ssh_public_key", 8192, e);
  if (rc < 0)
    return rc;
  if (tags == NULL || json_is_null(tags))
    return 0;
  if (!json_is_object(tags) || json_object_size(tags) > AZARM_MAX_TAGS)
    return err_set(e, ERR_CONFIG, "field 'tags': an object of at most %d "
                   "tags", AZARM_MAX_TAGS);
  json_object_foreach((json_t *)tags, key, v) {
    if (!json_is_string(v))
      return err_set(e, ERR_CONFIG, "field 'tags.%.64s' must be a string",
                     key);
    a->tags[a->ntags].key = xstrdup(key);
    a->tags[a->ntags].value = xstrdup(json_string_value(v));
    a->ntags++;
  }
  return 0;
}

/*
 * What launches will send, checked once at open: a body for each shape
 * built as a launch builds it, so a bad image, network, user, key or tag
 * fails the config, not every launch.
 */
static int
check_bodies(const struct azure *a, const struct cloud_env *env,
             const char *zone, struct err *e)
{
  struct buf b;
  struct err be = {0};
  int rc = 0;

  buf_init(&b, BODY_MAX);
  for (size_t i = 0; i < env->nshapes && rc == 0; i++) {
    const struct azarm_launch l = {.name = "tenbin-check",
                                   .location = a->location,
                                   .zone = zone,
                                   .size = env->shapes[i].type,
                                   .instance = "check",
                                   .node = "1",
                                   .tags = a->tags,
                                   .ntags = a->ntags,
                                   .image = a->image,
                                   .admin_user = a->admin_user,
                                   .ssh_key = a->ssh_key,
                                   .subnet_id = a->subnet_id,
                                   .nic_id = a->nic_id};

    if (!azarm_word_ok(l.size, 64, "_-")) {
      rc = err_set(e, ERR_CONFIG, "field 'shapes[%zu].type': not an Azure "
                   "VM size such as Standard_ND96isr_H100_v5", i);
      break;
    }
    buf_reset(&b);
    if (azarm_vm_body(&l, &b, &be) < 0) {
      /* Its fields are named as the config names them, but for the
       * key. */
      rc = err_set(e, ERR_CONFIG, "%s", strncmp(be.msg, "field 'ssh_key'",
                                                15) == 0
                                            ? "field 'ssh_public_key': not "
                                              "an OpenSSH public key line"
                                            : be.msg);
    }
  }
  buf_release(&b);
  return rc;
}

/* Also its calls' hooks->free (hence the void *). */
static void
azure_free(void *owner)
{
  struct azure *a = owner;

  cloud_calls_release(&a->calls);
  free(a->site);
  free(a->endpoint);
  free(a->list_url);
  free(a->token_url);
  free(a->prices_base);
  free(a->client_id);
  secret_free(a->secret);
  free(a->subscription);
  free(a->group);
  free(a->location);
  free(a->image);
  free(a->subnet_id);
  free(a->nic_id);
  free(a->admin_user);
  free(a->ssh_key);
  free(a->name_tag);
  for (size_t i = 0; i < a->ntags; i++) {
    free((char *)a->tags[i].key);
    free((char *)a->tags[i].value);
  }
  free(a);
}

static const struct cloud_call_hooks azure_hooks;

static int
azure_open(const struct cloud_env *env, const json_t *config, void **pctx,
           struct err *e)
{
  struct azure *a = xcalloc(1, sizeof(*a));
  struct http_client_config hc = {.user_agent = "tenbin"};
  const char *sub = jsonx_str(config, "subscription");
  const char *group = jsonx_str(config, "resource_group");
  const char *location = jsonx_str(config, "location");
  const json_t *zones = json_object_get(config, "zones");
  const char *tenant = NULL, *zone0 = NULL;
  char *login = NULL;
  struct buf b;
  size_t i;
  json_t *z;
  int rc = 0;

  a->site = xstrdup(env->site_name != NULL ? env->site_name : "azure");
  cloud_calls_init(&a->calls, env->loop, a->site, &azure_hooks, a);
  buf_init(&b, AZARM_URL_MAX);
  if (!azarm_word_ok(sub, SUB_LEN, "-")) {
    rc = err_set(e, ERR_CONFIG, "field 'subscription': the subscription "
                 "id (a GUID) is needed");
    goto out;
  }
  if (!azarm_word_ok(group, GROUP_LEN, "-_.()") ||
      group[strlen(group) - 1] == '.') {
    rc = err_set(e, ERR_CONFIG, "field 'resource_group': a resource group "
                 "name (1 to %d letters, digits and -_.(), not ending in "
                 "'.') is needed", GROUP_LEN);
    goto out;
  }
  a->subscription = xstrdup(sub);
  a->group = xstrdup(group);
  /* A listing needs no location, zone or VM fields: it launches none. */
  if (env->list_only)
    goto connection;
  if (location == NULL || !azarm_word_ok(location, 64, "") ||
      strspn(location, "abcdefghijklmnopqrstuvwxyz0123456789") !=
          strlen(location)) {
    rc = err_set(e, ERR_CONFIG, "field 'location': an Azure region such as "
                 "\"eastus\" is needed");
    goto out;
  }
  a->location = xstrdup(location);
  /* Azure's zones are numbered within a region. */
  json_array_foreach(zones, i, z) {
    const char *name = json_string_value(z);

    if (name == NULL || strlen(name) != 1 || name[0] < '1' || name[0] > '3') {
      rc = err_set(e, ERR_CONFIG, "field 'zones[%zu]': Azure's zones are "
                   "\"1\", \"2\" and \"3\"", i);
      goto out;
    }
    if (zone0 == NULL)
      zone0 = name;
  }
connection:
  a->shapes = env->shapes;
  a->nshapes = env->nshapes;
  rc = read_base(config, "endpoint", AZARM_ENDPOINT, &a->endpoint, e);
  if (rc == 0)
    rc = read_base(config, "login_endpoint", AZURE_LOGIN, &login, e);
  if (rc == 0)
    rc = read_base(config, "prices_endpoint", PRICEFEED_AZURE_PRICES,
                   &a->prices_base, e);
  if (rc == 0 && azarm_list_url(a->endpoint, a->subscription, a->group, &b,
                                e) < 0)
    rc = ERR_CONFIG;
  if (rc < 0)
    goto out;
  a->list_url = buf_take(&b, NULL);
  rc = read_credentials(a, config, &tenant, e);
  if (rc == 0 && azure_token_url(login, tenant, &b, e) < 0)
    rc = err_set(e, ERR_CONFIG, "field 'credentials.tenant': '%.64s' is not "
                 "a tenant id or domain", tenant);
  if (rc < 0)
    goto out;
  a->token_url = buf_take(&b, NULL);
  if (env->name_tag != NULL) {
    /* Azure's rules for a tag name. */
    if (env->name_tag[0] == '\0' || strlen(env->name_tag) >= TAG_KEY_LEN ||
        strpbrk(env->name_tag, "<>%&\\?/") != NULL) {
      rc = err_set(e, ERR_CONFIG, "the name tag '%.64s': 1 to %d "
                   "characters, none of < > %% & \\ ? /", env->name_tag,
                   TAG_KEY_LEN - 1);
      goto out;
    }
    a->name_tag = xstrdup(env->name_tag);
  }
  if (!env->list_only) {
    rc = read_vm_fields(a, config, e);
    if (rc == 0)
      rc = check_bodies(a, env, zone0, e);
  }
  if (rc < 0)
    goto out;
  hc.ca_file = jsonx_str(config, "ca_file");
  rc = http_client_new(env->loop, &hc, &a->calls.http, e);
  if (rc < 0)
    goto out;
  *pctx = a;
  a = NULL;
out:
  if (rc < 0)
    rc = err_recode(e, ERR_CONFIG);
  buf_release(&b);
  free(login);
  if (a != NULL)
    azure_free(a);
  return rc < 0 ? ERR_CONFIG : 0;
}

/* ---- calls ---- */

/* Answer o's caller with r and forget o. */
static void
finish(struct op *o, const struct cloud_result *r)
{
  free(o->url);
  free(o->vm_url);
  free(o->body);
  cloud_call_end(&o->call, r, &o->vm, o->prices, o->nprices);
}

/* o failed with r.  A launch that was deleting its failed VM answers
 * the refusal that made it delete. */
static void
fail(struct op *o, const struct cloud_result *r)
{
  if (o->call.kind == CLOUD_CALL_LAUNCH &&
      (o->step == S_DELETE || o->step == S_DELETING)) {
    log_warn("site %s: deleting VM %s after its failed creation: %s",
             o->a->site, o->name, r->msg);
    r = &o->call.r;
  }
  cloud_call_fail_later(&o->call, r);
}

static struct op *
op_new(struct azure *a, enum cloud_call_kind kind, void *arg)
{
  struct op *o = xcalloc(1, sizeof(*o));

  o->a = a;
  o->method = "GET";
  cloud_call_start(&a->calls, &o->call, kind, arg);
  return o;
}

static void
set_url(struct op *o, const char *url)
{
  free(o->url);
  o->url = xstrdup(url);
}

/* What an ARM answer that is no success means. */
static void
arm_refusal(const struct http_client_response *resp, const char *what,
            struct cloud_result *r)
{
  struct azarm_error ae;
  struct err pe = {0};

  if (azarm_parse_error(resp->body, resp->len, &ae, &pe) < 0)
    ae.code[0] = ae.message[0] = '\0';
  cloud_refuse(r, azarm_refusal(ae.code, ae.message, resp->status),
               azarm_retry_after_ms(
                   http_client_response_header(resp, "Retry-After")),
               "ARM %s: %d %s: %.300s", what, resp->status,
               ae.code[0] != '\0' ? ae.code : "(no code)", ae.message);
}

/* ---- the token ---- */

static int
read_token(void *owner, int rc, const struct http_client_response *resp,
           const struct err *e, char *token, int64_t *ttl_s,
           struct cloud_result *r)
{
  struct err pe = {0};
  int prc;

  (void)owner;
  if (rc < 0) {
    cloud_refuse(r, CLOUD_REFUSED_TRANSIENT, -1, "Azure's token endpoint "
                 "unreachable: %s", e->msg);
    return -1;
  }
  prc = oauth_token_parse(resp->body, resp->len, token, ttl_s, &pe);
  if (prc == 0 && resp->status == 200 && cloud_call_token_ok(token))
    return 0;
  if (resp->status == 429)
    cloud_refuse(r, CLOUD_REFUSED_THROTTLE,
                 azarm_retry_after_ms(
                     http_client_response_header(resp, "Retry-After")),
                 "Azure's token endpoint: 429 too many requests");
  else if (resp->status >= 500)
    cloud_refuse(r, CLOUD_REFUSED_TRANSIENT, -1, "Azure's token "
                 "endpoint: %d", resp->status);
  else if (prc == ERR_UNAUTHORIZED || resp->status == 400 ||
           resp->status == 401)
    cloud_refuse(r, CLOUD_REFUSED_AUTH, -1, "Azure token: %d %s",
                 resp->status, prc < 0 ? pe.msg : "");
  else
    cloud_refuse(r, CLOUD_REFUSED_TRANSIENT, -1, "Azure token: %d %s",
                 resp->status, prc < 0 ? pe.msg : "no usable token");
  return -1;
}

/* Ask for a token.  Ops waiting for it are answered from the loop when
 * it cannot leave. */
static void
fetch_token(void *owner)
{
  static const char *const headers[] = {
      "Content-Type: application/x-www-form-urlencoded",
      "Accept: application/json", NULL};
  struct azure *a = owner;
  struct http_client_request req = {0};
  struct cloud_result r;
  struct buf body;
  struct err e = {0};
  int rc;

  buf_init(&body, 16384);
  rc = azure_token_request(a->client_id, a->secret, AZURE_ARM_SCOPE, &body);
  if (rc < 0) {
    err_set(&e, ERR_TOO_LARGE, "the token request is too large");
  } else {
    req.method = "POST";
    req.url = a->token_url;
    req.headers = headers;
    req.body = body.data;
    req.body_len = body.len;
    rc = cloud_call_token_post(&a->calls, &req, &e);
  }
  buf_wipe_release(&body);
  if (rc == 0)
    return;
  cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "Azure token request: %s", e.msg);
  cloud_call_token_failed(&a->calls, &r);
}

/* ---- requests ---- */

static void on_answer(void *arg, int rc,
                      const struct http_client_response *resp,
                      const struct err *e);

/* Send o's request with the token at hand. */
static void
send_now(struct cloud_call *c)
{
  struct op *o = (struct op *)c;
  const char *headers[3];
  struct http_client_request req = {0};
  struct cloud_result r;
  size_t nh = 0;

  headers[nh++] = "Accept: application/json";
  if (o->step == S_PUT) {
    headers[nh++] = "Content-Type: application/json";
    req.body = o->body;
    req.body_len = o->body_len;
  }
  headers[nh] = NULL;
  req.method = o->method;
  req.url = o->url;
  req.headers = headers;
  req.max_response = AZARM_ANSWER_MAX;
  /* GET, PUT (by name) and DELETE may all be repeated. */
  req.max_attempts = 2;
  if (cloud_call_send(c, &req, 1, on_answer, "ARM", &r) < 0)
    fail(o, &r);
}

/* Send o's request without a token: Retail Prices is public, and the
 * ARM token is not given to another service. */
static void
send_public(struct op *o)
{
  static const char *const headers[] = {"Accept: application/json", NULL};
  struct http_client_request req = {0};
  struct cloud_result r;

  req.method = "GET";
  req.url = o->url;
  req.headers = headers;
  req.max_response = AZARM_ANSWER_MAX;
  req.max_attempts = 2;
  if (cloud_call_send(&o->call, &req, 0, on_answer, "Retail Prices", &r) < 0)
    fail(o, &r);
}

/* Send o's request, first getting a token when none can be sent. */
static void
request(struct op *o)
{
  if (o->call.kind != CLOUD_CALL_PRICES)
    cloud_call_with_token(&o->call);
  else if (!cloud_call_closed(&o->call))
    send_public(o);
}

static void
poll_cb(uv_timer_t *t)
{
  request(t->data);
}

static void
finish_cb(struct cloud_call *c, const struct cloud_result *r)
{
  finish((struct op *)c, r);
}

static void
fail_cb(struct cloud_call *c, const struct cloud_result *r)
{
  fail((struct op *)c, r);
}

static const struct cloud_call_hooks azure_hooks = {
    .finish = finish_cb,
    .free = azure_free,
    .fail = fail_cb,
    .send = send_now,
    .ask = fetch_token,
    .read = read_token,
    /* Refreshed once a quarter of its life (at most 5 min) is left. */
    .renew_part = 4,
};

/* ---- launch: answers ---- */

static void
succeed(struct op *o)
{
  struct cloud_result r = {0};
  struct cloud_vm *vm = &o->vm;

  r.retry_after_ms = -1;
  /* The pool's name is the VM's: what terminate takes. */
  snprintf(vm->id, sizeof(vm->id), "%s", o->name);
  vm->state = CLOUD_VM_RUNNING;
  if (vm->zone[0] == '\0')
    snprintf(vm->zone, sizeof(vm->zone), "%s", o->zone);
  if (vm->shape[0] == '\0')
    snprintf(vm->shape, sizeof(vm->shape), "%s", o->size);
  vm->spot = o->spot;
  snprintf(vm->instance, sizeof(vm->instance), "%s", o->instance);
  snprintf(vm->node, sizeof(vm->node), "%s", o->node);
  finish(o, &r);
}

/* Wait before polling again: Retry-After when resp says it, else a
 * backoff of our own; refused past the step's deadline. */
static void
wait_poll(struct op *o, const struct http_client_response *resp)
{
  int64_t delay = -1;
  struct cloud_result r;

  if (resp != NULL)
    delay = azarm_retry_after_ms(
        http_client_response_header(resp, "Retry-After"));
  if (delay < 0) {
    delay = o->backoff_ms;
    o->backoff_ms = o->backoff_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS
                                                    : o->backoff_ms * 2;
  }
  if (delay < POLL_MIN_MS)
    delay = POLL_MIN_MS;
  if (++o->polls > MAX_POLLS || time_mono_ms() + delay > o->deadline_ms) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "VM %s: still %s after "
                 "%d polls", o->name,
                 o->step == S_CREATING ? "being created" : "being deleted",
                 o->polls - 1);
    fail(o, &r);
    return;
  }
  o->method = "GET";
  uv_timer_start(&o->call.timer, poll_cb, (uint64_t)delay, 0);
}

/* A poll that did not answer, answered 429 or 5xx, or answered what is
 * not read: polled again, a few times. */
static void
poll_error(struct op *o, const struct http_client_response *resp,
           const char *what)
{
  struct cloud_result r;

  if (++o->errors <= MAX_POLL_ERRORS) {
    log_info("site %s: VM %s: polling again after: %s", o->a->site, o->name,
             what);
    wait_poll(o, resp);
    return;
  }
  cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "VM %s: %d polls failed, "
               "the last: %.300s", o->name, o->errors, what);
  fail(o, &r);
}

/* Start polling the operation at async (when it may be fetched with our
 * token), else the VM itself. */
static void
start_polls(struct op *o, const char *async, int64_t wait_ms)
{
  o->polls = 0;
  o->errors = 0;
  o->backoff_ms = POLL_FIRST_MS;
  o->deadline_ms = time_mono_ms() + wait_ms;
  o->poll_op = async != NULL && azarm_link_ok(async, o->a->endpoint);
  if (async != NULL && !o->poll_op)
    log_warn("site %s: VM %s: not polling '%.100s', which is not on the "
             "endpoint: polling the VM instead", o->a->site, o->name, async);
  set_url(o, o->poll_op ? async : o->vm_url);
}

/* The VM's creation failed with code (and message): the refusal is
 * kept, and the VM it left deleted first. */
static void
creation_failed(struct op *o, const char *code, const char *message,
                const char *how)
{
  cloud_refuse(&o->call.r, azarm_refusal(code, message, 0), -1,
               "VM %s in zone %s %s: %s: %.300s", o->name, o->zone, how,
               code[0] != '\0' ? code : "(no code)", message);
  log_info("site %s: %s; deleting what it left", o->a->site,
           o->call.r.msg);
  o->step = S_DELETE;
  o->method = "DELETE";
  set_url(o, o->vm_url);
  request(o);
}

/* The code in a Failed VM's end_reason ("ProvisioningState/failed/X"). */
static const char *
failed_code(const struct cloud_vm *vm)
{
  const char *slash = strrchr(vm->end_reason, '/');

  return strncasecmp(vm->end_reason, "ProvisioningState/failed/", 25) == 0
             ? slash + 1
             : "";
}

static void
on_put(struct op *o, const struct http_client_response *resp)
{
  const char *async;
  struct cloud_result r;
  struct err pe = {0};

  if (resp->status != 200 && resp->status != 201) {
    arm_refusal(resp, "PUT VM", &r);
    fail(o, &r);
    return;
  }
  /* The VM exists now, whatever the answer says about it. */
  if (azarm_parse_vm(resp->body, resp->len, &o->vm, &pe) < 0) {
    log_warn("site %s: VM %s: %s", o->a->site, o->name, pe.msg);
    memset(&o->vm, 0, sizeof(o->vm));
    o->vm.state = CLOUD_VM_PENDING;
  }
  async = http_client_response_header(resp, "Azure-AsyncOperation");
  o->step = S_CREATING;
  start_polls(o, async, CREATE_WAIT_MS);
  if (!o->poll_op && o->vm.state == CLOUD_VM_RUNNING) {
    succeed(o);
    return;
  }
  if (!o->poll_op && o->vm.state == CLOUD_VM_GONE) {
    creation_failed(o, failed_code(&o->vm), "", "failed");
    return;
  }
  wait_poll(o, resp);
}

static void
on_creating(struct op *o, const struct http_client_response *resp)
{
  struct azarm_operation op;
  struct cloud_vm vm;
  struct cloud_result r;
  struct err pe = {0};

  if (resp->status == 429 || resp->status >= 500) {
    poll_error(o, resp, resp->status == 429 ? "429" : "5xx");
    return;
  }
  if (resp->status == 404) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "VM %s vanished while "
                 "being created", o->name);
    fail(o, &r);
    return;
  }
  if (resp->status != 200) {
    arm_refusal(resp, "poll", &r);
    fail(o, &r);
    return;
  }
  if (o->poll_op) {
    if (azarm_parse_operation(resp->body, resp->len, &op, &pe) < 0) {
      poll_error(o, resp, pe.msg);
      return;
    }
    o->errors = 0;
    switch (op.status) {
    case AZARM_OP_RUNNING:
      wait_poll(o, resp);
      return;
    case AZARM_OP_SUCCEEDED:
      succeed(o);
      return;
    case AZARM_OP_FAILED:
      creation_failed(o, op.code, op.message, "failed");
      return;
    case AZARM_OP_CANCELED:
      creation_failed(o, op.code, op.message, "was canceled");
      return;
    }
    return;
  }
  if (azarm_parse_vm(resp->body, resp->len, &vm, &pe) < 0) {
    poll_error(o, resp, pe.msg);
    return;
  }
  o->errors = 0;
  o->vm = vm;
  switch (vm.state) {
  case CLOUD_VM_RUNNING:
    succeed(o);
    return;
  case CLOUD_VM_GONE:
    creation_failed(o, failed_code(&vm), "", "failed");
    return;
  case CLOUD_VM_STOPPING:
    creation_failed(o, "", "", "is being deleted");
    return;
  default:
    wait_poll(o, resp);
    return;
  }
}

static void
on_delete(struct op *o, const struct http_client_response *resp)
{
  struct azarm_operation op;
  struct cloud_result r;
  struct err pe = {0};

  if (o->step == S_DELETE) {
    if (resp->status == 200 || resp->status == 204) {
      finish(o, &o->call.r);
    } else if (resp->status == 202) {
      o->step = S_DELETING;
      start_polls(o, http_client_response_header(resp,
                                                 "Azure-AsyncOperation"),
                  DELETE_WAIT_MS);
      wait_poll(o, resp);
    } else {
      arm_refusal(resp, "DELETE VM", &r);
      fail(o, &r);
    }
    return;
  }
  if (resp->status == 429 || resp->status >= 500) {
    poll_error(o, resp, resp->status == 429 ? "429" : "5xx");
    return;
  }
  if (!o->poll_op) {
    /* Polling the VM: until it is gone. */
    if (resp->status == 404)
      finish(o, &o->call.r);
    else if (resp->status == 200)
      wait_poll(o, resp);
    else
      poll_error(o, resp, "an unexpected status");
    return;
  }
  if (resp->status != 200 ||
      azarm_parse_operation(resp->body, resp->len, &op, &pe) < 0) {
    poll_error(o, resp, resp->status != 200 ? "an unexpected status"
                                            : pe.msg);
    return;
  }
  if (op.status == AZARM_OP_RUNNING) {
    wait_poll(o, resp);
    return;
  }
  if (op.status != AZARM_OP_SUCCEEDED)
    log_warn("site %s: deleting VM %s after its failed creation: %s %s",
             o->a->site, o->name, op.code, op.message);
  finish(o, &o->call.r);
}

/* ---- list and terminate: answers ---- */

static void
on_page(struct op *o, const struct http_client_response *resp)
{
  struct azure *a = o->a;
  struct cloud_call *c = &o->call;
  struct cloud_result r = {0};
  struct azarm_page *p = xcalloc(1, sizeof(*p));
  struct err pe = {0};
  size_t max = FIRST_PAGE_VMS;
  int rc;

  r.retry_after_ms = -1;
  if (resp->status != 200) {
    arm_refusal(resp, "list VMs", &r);
    goto out;
  }
  for (;;) {
    p->vms = xcalloc(max, sizeof(*p->vms));
    p->max = max;
    p->instance = o->key[0] == '\0' ? o->instance : NULL;
    p->tag_key = o->key[0] != '\0' ? o->key : NULL;
    p->tag_value = o->value;
    p->name_tag = a->name_tag;
    rc = azarm_parse_list(resp->body, resp->len, p, &pe);
    if (rc < 0) {
      cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "%s", pe.msg);
      goto out;
    }
    if (p->nout <= p->n)
      break;
    /* A page holds what ARM puts in it: read it again, whole. */
    if (p->nout > MAX_LISTED) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "a page of more than %d "
                   "VMs", MAX_LISTED);
      goto out;
    }
    max = p->nout;
    free(p->vms);
  }
  if (c->n + p->n > MAX_LISTED) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d VMs tagged",
                 MAX_LISTED);
    goto out;
  }
  if (c->n + p->n > c->cap) {
    c->cap = c->n + p->n;
    c->vms = xrealloc(c->vms, c->cap * sizeof(*c->vms));
  }
  if (p->n > 0)
    memcpy(c->vms + c->n, p->vms, p->n * sizeof(*p->vms));
  c->n += p->n;
  if (p->next_link[0] != '\0') {
    if (!azarm_link_ok(p->next_link, a->endpoint)) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "nextLink '%.100s' is not "
                   "on the endpoint %s", p->next_link, a->endpoint);
      goto out;
    }
    if (++o->pages >= MAX_PAGES) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d pages",
                   MAX_PAGES);
      goto out;
    }
    set_url(o, p->next_link);
    free(p->vms);
    free(p);
    request(o);
    return;
  }
out:
  free(p->vms);
  free(p);
  if (r.rc < 0)
    fail(o, &r);
  else
    finish(o, &r);
}

static void
on_terminated(struct op *o, const struct http_client_response *resp)
{
  struct cloud_result r = {0};

  r.retry_after_ms = -1;
  /* 202: the delete is under way; 204: there was no such VM. */
  if (resp->status == 200 || resp->status == 202 || resp->status == 204) {
    finish(o, &r);
    return;
  }
  arm_refusal(resp, "DELETE VM", &r);
  fail(o, &r);
}

/* ---- prices ---- */

/* Ask for the prices of shape o->shape_ix on, each size once; answer
 * when every shape is priced. */
static void
ask_shape(struct op *o)
{
  struct azure *a = o->a;
  struct cloud_result r;
  struct buf url;

  while (o->shape_ix < a->nshapes) {
    const char *size = a->shapes[o->shape_ix].type;
    size_t k = 0;

    while (k < o->shape_ix && strcmp(a->shapes[k].type, size) != 0)
      k++;
    if (k == o->shape_ix)
      break;
    /* A size asked already: the same prices. */
    for (size_t i = 0; i < o->nprices; i++) {
      if (o->prices[i].shape == k) {
        o->prices[o->nprices] = o->prices[i];
        o->prices[o->nprices++].shape = o->shape_ix;
        break;
      }
    }
    o->shape_ix++;
  }
  memset(&r, 0, sizeof(r));
  r.retry_after_ms = -1;
  if (o->shape_ix == a->nshapes) {
    cloud_call_fail_later(&o->call, &r);
    return;
  }
  pricefeed_azure_init(&o->feed);
  o->pages = 0;
  buf_init(&url, AZARM_URL_MAX);
  if (pricefeed_azure_url(a->prices_base, a->location,
                          a->shapes[o->shape_ix].type, &url) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "no Retail Prices URL for "
                 "size '%.64s'", a->shapes[o->shape_ix].type);
    cloud_call_fail_later(&o->call, &r);
  } else {
    set_url(o, buf_str(&url));
    request(o);
  }
  buf_release(&url);
}

static void
on_retail(struct op *o, const struct http_client_response *resp)
{
  struct azure *a = o->a;
  const char *size = a->shapes[o->shape_ix].type;
  struct cloud_result r;
  struct err pe = {0};

  memset(&r, 0, sizeof(r));
  r.retry_after_ms = -1;
  if (resp->status != 200) {
    arm_refusal(resp, "Retail Prices", &r);
    fail(o, &r);
    return;
  }
  if (pricefeed_azure_parse(resp->body, resp->len, a->location, size,
                            &o->feed, &pe) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "%s", pe.msg);
    fail(o, &r);
    return;
  }
  if (o->feed.next_link[0] != '\0') {
    /* Only pages of the API asked: a link elsewhere is not followed. */
    if (!azarm_link_ok(o->feed.next_link, a->prices_base)) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "NextPageLink '%.100s' is "
                   "not on %s", o->feed.next_link, a->prices_base);
      fail(o, &r);
    } else if (++o->pages >= MAX_PRICE_PAGES) {
      cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "more than %d pages of "
                   "prices of %s", MAX_PRICE_PAGES, size);
      fail(o, &r);
    } else {
      set_url(o, o->feed.next_link);
      request(o);
    }
    return;
  }
  if (o->feed.on_demand_micro >= 0 || o->feed.spot_micro >= 0)
    o->prices[o->nprices++] = (struct cloud_price){
        o->shape_ix, o->feed.on_demand_micro, o->feed.spot_micro};
  else
    log_info("site %s: no Linux price of %s in %s among %zu rows", a->site,
             size, a->location, o->feed.rows);
  o->shape_ix++;
  ask_shape(o);
}

static void
azure_prices(void *pctx, cloud_prices_cb cb, void *arg)
{
  struct op *o = op_new(pctx, CLOUD_CALL_PRICES, arg);

  o->call.prices_cb = cb;
  o->step = S_PRICES;
  ask_shape(o);
}

static void
on_answer(void *arg, int rc, const struct http_client_response *resp,
          const struct err *e)
{
  struct op *o = arg;
  struct cloud_result r;

  if (o->a->calls.closing) {
    cloud_call_closing(&r);
    finish(o, &r);
    return;
  }
  if (rc < 0) {
    if (o->step == S_CREATING || o->step == S_DELETING) {
      poll_error(o, NULL, e->msg);
      return;
    }
    cloud_refuse(&r, CLOUD_REFUSED_TRANSIENT, -1, "ARM unreachable: %s",
                 e->msg);
    fail(o, &r);
    return;
  }
  if (o->call.kind != CLOUD_CALL_PRICES &&
      cloud_call_reauth(&o->call, resp->status))
    return;
  switch (o->step) {
  case S_PUT:
    on_put(o, resp);
    break;
  case S_CREATING:
    on_creating(o, resp);
    break;
  case S_DELETE:
  case S_DELETING:
    on_delete(o, resp);
    break;
  case S_LIST:
    on_page(o, resp);
    break;
  case S_TERMINATE:
    on_terminated(o, resp);
    break;
  case S_PRICES:
    on_retail(o, resp);
    break;
  }
}

/* ---- the provider ---- */

static int
vm_url(const struct azure *a, const char *name, char **out, struct err *e)
{
  struct buf b;
  int rc;

  buf_init(&b, AZARM_URL_MAX);
  rc = azarm_vm_url(a->endpoint, a->subscription, a->group, name, &b, e);
  if (rc == 0)
    *out = buf_take(&b, NULL);
  buf_release(&b);
  return rc;
}

static void
azure_launch(void *pctx, const struct cloud_launch *l, cloud_launch_cb cb,
             void *arg)
{
  struct azure *a = pctx;
  struct op *o = op_new(a, CLOUD_CALL_LAUNCH, arg);
  struct cloud_result r;
  struct azarm_launch al;
  struct buf body;
  struct err e = {0};

  o->call.launch_cb = cb;
  o->step = S_PUT;
  o->method = "PUT";
  snprintf(o->name, sizeof(o->name), "%s", l->name);
  snprintf(o->zone, sizeof(o->zone), "%s", l->zone);
  snprintf(o->size, sizeof(o->size), "%s", l->shape->type);
  snprintf(o->instance, sizeof(o->instance), "%s", l->instance);
  snprintf(o->node, sizeof(o->node), "%s", l->node);
  o->spot = l->spot;
  al = (struct azarm_launch){.name = l->name,
                             .location = a->location,
                             .zone = l->zone,
                             .size = l->shape->type,
                             .instance = l->instance,
                             .node = l->node,
                             .tags = a->tags,
                             .ntags = a->ntags,
                             .spot = l->spot,
                             .max_price = -1,
                             .image = a->image,
                             .admin_user = a->admin_user,
                             .ssh_key = a->ssh_key,
                             .script = l->script,
                             .script_len = strlen(l->script),
                             .subnet_id = a->subnet_id,
                             .nic_id = a->nic_id};
  buf_init(&body, BODY_MAX);
  if (vm_url(a, l->name, &o->vm_url, &e) < 0 ||
      azarm_vm_body(&al, &body, &e) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "VM %s: %s", l->name, e.msg);
    cloud_call_fail_later(&o->call, &r);
  } else {
    o->url = xstrdup(o->vm_url);
    o->body = buf_take(&body, &o->body_len);
    request(o);
  }
  buf_release(&body);
}

static void
azure_list(void *pctx, const char *instance, cloud_list_cb cb, void *arg)
{
  struct azure *a = pctx;
  struct op *o = op_new(a, CLOUD_CALL_LIST, arg);

  o->call.list_cb = cb;
  o->step = S_LIST;
  snprintf(o->instance, sizeof(o->instance), "%s", instance);
  o->url = xstrdup(a->list_url);
  request(o);
}

static void
azure_list_tagged(void *pctx, const char *key, const char *value,
                  cloud_list_cb cb, void *arg)
{
  struct azure *a = pctx;
  struct op *o = op_new(a, CLOUD_CALL_LIST, arg);
  struct cloud_result r;

  o->call.list_cb = cb;
  o->step = S_LIST;
  /* Longer than Azure allows is no VM's tag; cut, it could be another's. */
  if (key[0] == '\0' || strlen(key) >= sizeof(o->key) ||
      strlen(value) >= sizeof(o->value)) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "list VMs: tag '%.64s': not "
                 "an Azure tag (a name of 1 to %d characters, a value of "
                 "at most %d)", key, TAG_KEY_LEN - 1, TAG_VALUE_LEN - 1);
    cloud_call_fail_later(&o->call, &r);
    return;
  }
  snprintf(o->key, sizeof(o->key), "%s", key);
  snprintf(o->value, sizeof(o->value), "%s", value);
  o->url = xstrdup(a->list_url);
  request(o);
}

static void
azure_terminate(void *pctx, const struct cloud_vm *vm, cloud_done_cb cb,
                void *arg)
{
  struct azure *a = pctx;
  struct op *o = op_new(a, CLOUD_CALL_TERMINATE, arg);
  struct cloud_result r;
  struct err e = {0};

  o->call.done_cb = cb;
  o->step = S_TERMINATE;
  o->method = "DELETE";
  snprintf(o->name, sizeof(o->name), "%s", vm->id);
  /* Only a name tenbin gives goes into the path. */
  if (!azarm_name_ok(vm->id) || vm_url(a, vm->id, &o->url, &e) < 0) {
    cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "'%.64s' is no VM name of "
                 "ours%s%s", vm->id, e.msg[0] != '\0' ? ": " : "", e.msg);
    cloud_call_fail_later(&o->call, &r);
    return;
  }
  request(o);
}

static void
azure_close(void *pctx, void (*cb)(void *arg), void *arg)
{
  struct azure *a = pctx;

  cloud_calls_close(&a->calls, 1, cb, arg);
}

const struct cloud_provider cloud_azure_provider = {
    .kind = "azure",
    .fields = adapter_azure_fields,
    .open = azure_open,
    .launch = azure_launch,
    .list = azure_list,
    .list_tagged = azure_list_tagged,
    .terminate = azure_terminate,
    .close = azure_close,
    .prices = azure_prices,
};

static int
azure_site_open(const struct adapter_env *env, const json_t *config,
                void **ctx, struct err *e)
{
  return cloud_open(&cloud_azure_provider, env, config, ctx, e);
}

const struct adapter_ops adapter_azure_ops =
    CLOUD_OPS("azure", azure_site_open);
