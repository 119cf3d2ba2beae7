/*
 * Azure Resource Manager's virtualMachines API (azure_arm.h).
 *
 * Bodies are built as jansson trees from fields checked first, so a bad
 * config value is an error naming it rather than a 400 from Azure later.
 * Answers are read with jansson from at most AZARM_ANSWER_MAX bytes
 * (duplicate keys refused); a field of the wrong type is an error, a
 * field that is absent or null is "not said".
 */
#include "adapters/azure_arm.h"

#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "adapters/sigv4.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/timeutil.h"
#include "util/utf8.h"

/* Segment caps: a subscription is a GUID, Azure caps a resource group
 * name at 90 and a Linux VM name at 64. */
#define BASE_MAX 256
#define SUB_MAX 64
#define GROUP_MAX 90
#define VM_MAX 64
/* A resource id (image, subnet, NIC) is a path of a few segments. */
#define RESOURCE_ID_MAX 1024
#define URN_PART_MAX 128
#define SSH_KEY_MAX 16384
#define ADMIN_MAX 32
/* Azure's tag limits. */
#define TAG_KEY_MAX 512
#define TAG_VALUE_MAX 256
/* A Spot max price beyond this is a typo, not a price. */
#define MAX_PRICE_CAP 10000.0
/* The OS disk may be up to 4 TiB. */
#define DISK_GB_MAX 4095
/* Instance-view statuses looked at; a VM has two or three. */
#define STATUSES_MAX 64

static int
is_alnum(int c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* Printable ASCII but the space: what a URL or an id may hold. */
static int
is_urlchar(int c)
{
  return c > 0x20 && c < 0x7f;
}

int
azarm_word_ok(const char *s, size_t max, const char *extra)
{
  size_t n;

  if (s == NULL)
    return 0;
  n = strnlen(s, max + 1);
  if (n == 0 || n > max)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_alnum((unsigned char)s[i]) && strchr(extra, s[i]) == NULL)
      return 0;
  }
  return 1;
}

/* 1 when s is min..max bytes of UTF-8 with no control character. */
static int
text_ok(const char *s, size_t min, size_t max)
{
  size_t n;

  if (s == NULL)
    return 0;
  n = strnlen(s, max + 1);
  if (n < min || n > max || !utf8_valid(s, n))
    return 0;
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
      return 0;
  }
  return 1;
}

/* 1 when s is a resource id: '/' then printable ASCII, bounded. */
static int
resource_id_ok(const char *s)
{
  size_t n;

  if (s == NULL || s[0] != '/')
    return 0;
  n = strnlen(s, RESOURCE_ID_MAX + 1);
  if (n < 2 || n > RESOURCE_ID_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_urlchar((unsigned char)s[i]))
      return 0;
  }
  return 1;
}

/* ---- URLs ---- */

/*
 * The length of base without its trailing '/'s, or 0 when base is no
 * http(s) URL with a host.  '?' and '#' are refused so that what follows
 * base in a URL is always its path.
 */
static size_t
base_len(const char *base)
{
  size_t n, scheme;

  if (base == NULL)
    return 0;
  n = strnlen(base, BASE_MAX + 1);
  if (n > BASE_MAX)
    return 0;
  if (strncasecmp(base, "https://", 8) == 0)
    scheme = 8;
  else if (strncasecmp(base, "http://", 7) == 0)
    scheme = 7;
  else
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_urlchar((unsigned char)base[i]) || base[i] == '?' ||
        base[i] == '#')
      return 0;
  }
  while (n > scheme && base[n - 1] == '/')
    n--;
  return n > scheme ? n : 0;
}

static int
segment_ok(const char *field, const char *s, size_t max, struct err *e)
{
  if (s == NULL || s[0] == '\0')
    return err_set(e, ERR_INVALID, "field '%s': empty", field);
  if (strnlen(s, max + 1) > max)
    return err_set(e, ERR_INVALID, "field '%s': longer than %zu bytes",
                   field, max);
  return 0;
}

/* The group's virtualMachines collection, and the VM in it when vm is
 * not NULL.  out is left as it was on an error. */
static int
compute_url(const char *base, const char *sub, const char *group,
            const char *vm, struct buf *out, struct err *e)
{
  size_t start = out->len;
  size_t blen = base_len(base);
  int rc;

  if (blen == 0)
    return err_set(e, ERR_INVALID, "field 'endpoint': '%.64s' is not an "
                   "http(s) URL", base != NULL ? base : "");
  rc = segment_ok("subscription", sub, SUB_MAX, e);
  if (rc == 0)
    rc = segment_ok("resource_group", group, GROUP_MAX, e);
  if (rc == 0 && vm != NULL)
    rc = segment_ok("vm", vm, VM_MAX, e);
  if (rc < 0)
    return rc;
  rc = buf_add(out, base, blen);
  if (rc == 0)
    rc = buf_adds(out, "/subscriptions/");
  if (rc == 0)
    rc = sigv4_uri_encode(out, sub);
  if (rc == 0)
    rc = buf_adds(out, "/resourceGroups/");
  if (rc == 0)
    rc = sigv4_uri_encode(out, group);
  if (rc == 0)
    rc = buf_adds(out, "/providers/Microsoft.Compute/virtualMachines");
  if (rc == 0 && vm != NULL) {
    rc = buf_adds(out, "/");
    if (rc == 0)
      rc = sigv4_uri_encode(out, vm);
  }
  if (rc == 0)
    rc = buf_adds(out, "?api-version=" AZARM_API_VERSION);
  if (rc < 0) {
    out->len = start;
    if (out->data != NULL)
      out->data[start] = '\0';
    return err_set(e, ERR_TOO_LARGE, "ARM URL longer than its buffer");
  }
  return 0;
}

int
azarm_vm_url(const char *base, const char *subscription, const char *group,
             const char *vm, struct buf *out, struct err *e)
{
  if (vm == NULL)
    return err_set(e, ERR_INVALID, "field 'vm': empty");
  return compute_url(base, subscription, group, vm, out, e);
}

int
azarm_list_url(const char *base, const char *subscription,
               const char *group, struct buf *out, struct err *e)
{
  return compute_url(base, subscription, group, NULL, out, e);
}

int
azarm_link_ok(const char *link, const char *base)
{
  size_t blen = base_len(base);
  size_t n;

  if (link == NULL || blen == 0)
    return 0;
  n = strnlen(link, AZARM_URL_MAX + 1);
  if (n > AZARM_URL_MAX || n <= blen)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_urlchar((unsigned char)link[i]))
      return 0;
  }
  /* The '/' after base ends its host: "https://management.azure.com"
   * must not accept "https://management.azure.com.evil.example/" or
   * "...azure.com@evil.example/". */
  return strncasecmp(link, base, blen) == 0 && link[blen] == '/';
}

int
azarm_name_ok(const char *name)
{
  size_t n;

  if (!azarm_word_ok(name, VM_MAX, "-"))
    return 0;
  n = strlen(name);
  return name[0] != '-' && name[n - 1] != '-';
}

/* ---- the PUT body ---- */

/* A value of a tenbin tag: cloud_vm.h's rule, so GCP's labels hold. */
static int
tenbin_value_ok(const char *s)
{
  size_t n;

  if (s == NULL)
    return 0;
  n = strnlen(s, CLOUD_NAME_LEN);
  if (n == 0 || n >= CLOUD_NAME_LEN)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '-'))
      return 0;
  }
  return 1;
}

static int
tags_ok(const struct azarm_launch *l, struct err *e)
{
  if (!tenbin_value_ok(l->instance))
    return err_set(e, ERR_INVALID, "field 'instance': not 1-%d lowercase "
                   "letters, digits and '-'", CLOUD_NAME_LEN - 1);
  if (!tenbin_value_ok(l->node))
    return err_set(e, ERR_INVALID, "field 'node': not 1-%d lowercase "
                   "letters, digits and '-'", CLOUD_NAME_LEN - 1);
  if (l->ntags > AZARM_MAX_TAGS || (l->ntags > 0 && l->tags == NULL))
    return err_set(e, ERR_INVALID, "field 'tags': more than %d tags",
                   AZARM_MAX_TAGS);
  for (size_t i = 0; i < l->ntags; i++) {
    const char *k = l->tags[i].key;

    /* Azure refuses these in a tag name. */
    if (!text_ok(k, 1, TAG_KEY_MAX) || strpbrk(k, "<>%&\\?/") != NULL)
      return err_set(e, ERR_INVALID, "field 'tags[%zu]': key is not 1-%d "
                     "bytes of text without < > %% & \\ ? /", i,
                     TAG_KEY_MAX);
    if (!text_ok(l->tags[i].value, 0, TAG_VALUE_MAX))
      return err_set(e, ERR_INVALID, "field 'tags.%.64s': value is not "
                     "0-%d bytes of text", k, TAG_VALUE_MAX);
    /* Tag names are case-insensitive in Azure. */
    if (strcasecmp(k, CLOUD_TAG_INSTANCE) == 0 ||
        strcasecmp(k, CLOUD_TAG_NODE) == 0)
      return err_set(e, ERR_INVALID, "field 'tags.%.64s': tenbin's own "
                     "tag", k);
    for (size_t j = 0; j < i; j++) {
      if (strcasecmp(k, l->tags[j].key) == 0)
        return err_set(e, ERR_INVALID, "field 'tags.%.64s': given twice",
                       k);
    }
  }
  return 0;
}

/* A marketplace URN: four parts, publisher:offer:sku:version. */
static int
urn_ok(const char *s)
{
  const char *p = s;

  for (int part = 0; part < 4; part++) {
    size_t n = strcspn(p, ":");

    if (n == 0 || n > URN_PART_MAX)
      return 0;
    for (size_t i = 0; i < n; i++) {
      if (!is_alnum((unsigned char)p[i]) && strchr("-_.", p[i]) == NULL)
        return 0;
    }
    p += n;
    if (part < 3 && *p++ != ':')
      return 0;
  }
  return *p == '\0';
}

static int
launch_ok(const struct azarm_launch *l, struct err *e)
{
  if (!azarm_name_ok(l->name))
    return err_set(e, ERR_INVALID, "field 'name': '%.64s' is not 1-%d "
                   "letters, digits and '-' (no '-' at either end)",
                   l->name != NULL ? l->name : "", VM_MAX);
  if (!azarm_word_ok(l->location, 64, ""))
    return err_set(e, ERR_INVALID, "field 'location': not a region name "
                   "such as eastus");
  if (l->zone != NULL && (strlen(l->zone) != 1 || l->zone[0] < '1' ||
                          l->zone[0] > '3'))
    return err_set(e, ERR_INVALID, "field 'zone': not \"1\", \"2\" or "
                   "\"3\"");
  if (!azarm_word_ok(l->size, 64, "_-"))
    return err_set(e, ERR_INVALID, "field 'size': not a VM size such as "
                   "Standard_ND96isr_H100_v5");
  if (l->spot && (!isfinite(l->max_price) || l->max_price > MAX_PRICE_CAP))
    return err_set(e, ERR_INVALID, "field 'max_price': not a price up to "
                   "%.0f", MAX_PRICE_CAP);
  if (l->image == NULL ||
      (l->image[0] == '/' ? !resource_id_ok(l->image) : !urn_ok(l->image)))
    return err_set(e, ERR_INVALID, "field 'image': not an image resource "
                   "id nor a URN publisher:offer:sku:version");
  if (l->disk_type != NULL && !azarm_word_ok(l->disk_type, 32, "_"))
    return err_set(e, ERR_INVALID, "field 'disk_type': not a storage "
                   "account type such as Premium_LRS");
  if (l->disk_gb < 0 || l->disk_gb > DISK_GB_MAX)
    return err_set(e, ERR_INVALID, "field 'disk_gb': not 0 to %d",
                   DISK_GB_MAX);
  if (l->admin_user != NULL &&
      (!azarm_word_ok(l->admin_user, ADMIN_MAX, "_-") ||
       !((l->admin_user[0] >= 'a' && l->admin_user[0] <= 'z') ||
         l->admin_user[0] == '_')))
    return err_set(e, ERR_INVALID, "field 'admin_user': not a Linux user "
                   "name of 1-%d bytes", ADMIN_MAX);
  if (l->ssh_key != NULL &&
      (!text_ok(l->ssh_key, 1, SSH_KEY_MAX) || l->ssh_key[0] == ' '))
    return err_set(e, ERR_INVALID, "field 'ssh_key': not a public key "
                   "line of at most %d bytes", SSH_KEY_MAX);
  if (l->script_len > AZARM_SCRIPT_MAX ||
      (l->script == NULL && l->script_len > 0))
    return err_set(e, ERR_INVALID, "field 'script': longer than %d bytes",
                   AZARM_SCRIPT_MAX);
  if ((l->subnet_id != NULL) == (l->nic_id != NULL))
    return err_set(e, ERR_INVALID, "field 'subnet_id': give a subnet or a "
                   "NIC, one of the two");
  if (l->subnet_id != NULL && !resource_id_ok(l->subnet_id))
    return err_set(e, ERR_INVALID, "field 'subnet_id': not a resource id");
  if (l->nic_id != NULL && !resource_id_ok(l->nic_id))
    return err_set(e, ERR_INVALID, "field 'nic_id': not a resource id");
  return tags_ok(l, e);
}

/* obj[key] = v (stolen); a NULL v or a failed set marks *bad. */
static void
put(json_t *obj, const char *key, json_t *v, int *bad)
{
  if (v == NULL || json_object_set_new(obj, key, v) < 0)
    *bad = 1;
}

static json_t *
tags_json(const struct azarm_launch *l, int *bad)
{
  json_t *t = json_object();

  if (t == NULL) {
    *bad = 1;
    return NULL;
  }
  put(t, CLOUD_TAG_INSTANCE, json_string(l->instance), bad);
  put(t, CLOUD_TAG_NODE, json_string(l->node), bad);
  for (size_t i = 0; i < l->ntags; i++)
    put(t, l->tags[i].key, json_string(l->tags[i].value), bad);
  return t;
}

static json_t *
image_json(const char *image)
{
  char part[4][URN_PART_MAX + 1];
  const char *p = image;

  if (image[0] == '/')
    return json_pack("{s:s}", "id", image);
  /* urn_ok held: four parts, each at most URN_PART_MAX. */
  for (int i = 0; i < 4; i++) {
    size_t n = strcspn(p, ":");

    memcpy(part[i], p, n);
    part[i][n] = '\0';
    p += n + (i < 3);
  }
  return json_pack("{s:s, s:s, s:s, s:s}", "publisher", part[0], "offer",
                   part[1], "sku", part[2], "version", part[3]);
}

static json_t *
storage_json(const struct azarm_launch *l, int *bad)
{
  json_t *disk = json_pack("{s:s, s:s}", "createOption", "FromImage",
                           "caching", "ReadWrite");

  if (disk == NULL) {
    *bad = 1;
    return NULL;
  }
  if (l->disk_type != NULL)
    put(disk, "managedDisk",
        json_pack("{s:s}", "storageAccountType", l->disk_type), bad);
  if (l->disk_gb > 0)
    put(disk, "diskSizeGB", json_integer(l->disk_gb), bad);
  /* The disk goes with the VM, so a deleted node bills nothing. */
  put(disk, "deleteOption", json_string("Delete"), bad);
  return json_pack("{s:o, s:o}", "imageReference", image_json(l->image),
                   "osDisk", disk);
}

/* base64 of the script, as customData wants it (new string). */
static json_t *
custom_data(const void *script, size_t len)
{
  size_t cap = 4 * ((len + 2) / 3) + 1;
  unsigned char *b64 = xmalloc(cap);
  json_t *v;

  /* launch_ok capped len at AZARM_SCRIPT_MAX, far below INT_MAX. */
  EVP_EncodeBlock(b64, script, (int)len);
  v = json_string((const char *)b64);
  free(b64);
  return v;
}

static json_t *
os_json(const struct azarm_launch *l, int *bad)
{
  const char *user = l->admin_user != NULL ? l->admin_user : "azureuser";
  json_t *os = json_pack("{s:s, s:s}", "computerName", l->name,
                         "adminUsername", user);
  json_t *linux_cfg = json_pack("{s:b}", "disablePasswordAuthentication", 1);

  if (os == NULL || linux_cfg == NULL) {
    json_decref(os);
    json_decref(linux_cfg);
    *bad = 1;
    return NULL;
  }
  if (l->ssh_key != NULL) {
    char path[ADMIN_MAX + 40];

    snprintf(path, sizeof(path), "/home/%s/.ssh/authorized_keys", user);
    put(linux_cfg, "ssh",
        json_pack("{s:[{s:s, s:s}]}", "publicKeys", "path", path, "keyData",
                  l->ssh_key),
        bad);
  }
  if (l->script != NULL && l->script_len > 0)
    put(os, "customData", custom_data(l->script, l->script_len), bad);
  put(os, "linuxConfiguration", linux_cfg, bad);
  return os;
}

static json_t *
network_json(const struct azarm_launch *l)
{
  char nic[VM_MAX + 8], ip[VM_MAX + 8];

  if (l->nic_id != NULL)
    return json_pack("{s:[{s:s, s:{s:b, s:s}}]}", "networkInterfaces", "id",
                     l->nic_id, "properties", "primary", 1, "deleteOption",
                     "Delete");
  /* ARM creates the NIC from this configuration and, with deleteOption
   * Delete, removes it with the VM: nothing is left to clean up. */
  snprintf(nic, sizeof(nic), "%s-nic", l->name);
  snprintf(ip, sizeof(ip), "%s-ip", l->name);
  return json_pack(
      "{s:s, s:[{s:s, s:{s:b, s:s, s:[{s:s, s:{s:b, s:{s:s}}}]}}]}",
      "networkApiVersion", AZARM_NETWORK_API_VERSION,
      "networkInterfaceConfigurations", "name", nic, "properties",
      "primary", 1, "deleteOption", "Delete", "ipConfigurations", "name",
      ip, "properties", "primary", 1, "subnet", "id", l->subnet_id);
}

int
azarm_vm_body(const struct azarm_launch *l, struct buf *out, struct err *e)
{
  json_t *root = NULL, *props = NULL;
  char *text = NULL;
  int bad = 0;
  int rc = launch_ok(l, e);

  if (rc < 0)
    goto out;
  root = json_object();
  props = json_object();
  if (root == NULL || props == NULL) {
    rc = err_set(e, ERR_NOMEM, "building an ARM VM body");
    goto out;
  }
  put(root, "location", json_string(l->location), &bad);
  put(root, "tags", tags_json(l, &bad), &bad);
  if (l->zone != NULL)
    put(root, "zones", json_pack("[s]", l->zone), &bad);
  put(props, "hardwareProfile", json_pack("{s:s}", "vmSize", l->size), &bad);
  put(props, "priority", json_string(l->spot ? "Spot" : "Regular"), &bad);
  if (l->spot) {
    /* Delete, not Deallocate: an evicted node is gone and bills
     * nothing, and the pool launches a new one. */
    put(props, "evictionPolicy", json_string("Delete"), &bad);
    /* Azure takes at most five decimals. */
    put(props, "billingProfile",
        l->max_price > 0
            ? json_pack("{s:f}", "maxPrice",
                        (double)(int64_t)(l->max_price * 1e5 + 0.5) / 1e5)
            : json_pack("{s:i}", "maxPrice", -1),
        &bad);
  }
  put(props, "storageProfile", storage_json(l, &bad), &bad);
  put(props, "osProfile", os_json(l, &bad), &bad);
  put(props, "networkProfile", network_json(l), &bad);
  put(root, "properties", props, &bad);
  props = NULL;
  if (bad) {
    rc = err_set(e, ERR_NOMEM, "building an ARM VM body");
    goto out;
  }
  /* Twelve digits print a five-decimal price as it is (0.1, not the
   * seventeen digits of its double). */
  text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(12));
  if (text == NULL) {
    rc = err_set(e, ERR_NOMEM, "writing an ARM VM body");
    goto out;
  }
  if (buf_adds(out, text) < 0)
    rc = err_set(e, ERR_TOO_LARGE, "ARM VM body longer than its buffer");
out:
  free(text);
  json_decref(props);
  json_decref(root);
  return rc;
}

/* ---- answers ---- */

static int
load(const char *json, size_t len, const char *what, json_t **out,
     struct err *e)
{
  struct err pe = {0};

  *out = NULL;
  if (len > AZARM_ANSWER_MAX)
    return err_set(e, ERR_SITE, "ARM's %s is larger than %u bytes", what,
                   AZARM_ANSWER_MAX);
  if (jsonx_parse_object(json != NULL ? json : "", json != NULL ? len : 0,
                         out, &pe) < 0)
    return err_set(e, ERR_SITE, "ARM's %s is not a JSON object: %s", what,
                   pe.msg);
  return 0;
}

static const char *
type_word(json_type t)
{
  switch (t) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  default:
    break;
  }
  return "of its type";
}

/* obj[key] into *v (borrowed) when it has type t; NULL when absent or
 * null (or obj is NULL); ERR_SITE naming path in ctx otherwise. */
static int
field(json_t *obj, const char *key, json_type t, const char *ctx,
      const char *path, json_t **v, struct err *e)
{
  json_t *x = obj != NULL ? json_object_get(obj, key) : NULL;

  *v = NULL;
  if (x == NULL || json_is_null(x))
    return 0;
  if (json_typeof(x) != t)
    return err_set(e, ERR_SITE, "ARM answer: %s: field '%s' is not %s", ctx,
                   path, type_word(t));
  *v = x;
  return 0;
}

/* String s into dst[cap], whole or ERR_SITE. */
static int
copy_whole(char *dst, size_t cap, json_t *s, const char *ctx,
           const char *path, struct err *e)
{
  size_t n = json_string_length(s);

  if (n >= cap)
    return err_set(e, ERR_SITE, "ARM answer: %s: field '%s' is longer "
                   "than %zu bytes", ctx, path, cap - 1);
  memcpy(dst, json_string_value(s), n);
  dst[n] = '\0';
  return 0;
}

/* String s cut into dst[cap], still valid UTF-8. */
static void
copy_cut(char *dst, size_t cap, json_t *s)
{
  snprintf(dst, cap, "%s", json_string_value(s));
  utf8_repair(dst);
}

/*
 * "2021-06-27T01:02:38.3138469+00:00" (any fraction, Z or an offset)
 * into ms since the epoch: rewritten as time_parse_iso reads it, then
 * moved by the offset.
 */
static int
rfc3339_ms(const char *s, int64_t *ms)
{
  char iso[32];
  size_t n = strnlen(s, 64), i = 19, k = 19, digits = 0;
  int sign = 0, offset_min = 0;

  if (n < 20 || n >= 64)
    return -1;
  memcpy(iso, s, 19);
  if (iso[10] == 't')
    iso[10] = 'T';
  if (s[i] == '.') {
    iso[k++] = s[i++];
    for (; s[i] >= '0' && s[i] <= '9'; i++, digits++) {
      if (digits < 3)
        iso[k++] = s[i];
    }
    if (digits == 0)
      return -1;
  }
  if (s[i] == 'Z' || s[i] == 'z') {
    i++;
  } else if (s[i] == '+' || s[i] == '-') {
    const char *o = s + i;

    if (!(o[1] >= '0' && o[1] <= '2' && o[2] >= '0' && o[2] <= '9' &&
          o[3] == ':' && o[4] >= '0' && o[4] <= '5' && o[5] >= '0' &&
          o[5] <= '9'))
      return -1;
    sign = o[0] == '+' ? 1 : -1;
    offset_min = ((o[1] - '0') * 10 + (o[2] - '0')) * 60 +
                 (o[4] - '0') * 10 + (o[5] - '0');
    if (offset_min > 24 * 60)
      return -1;
    i += 6;
  } else {
    return -1;
  }
  if (s[i] != '\0')
    return -1;
  iso[k++] = 'Z';
  iso[k] = '\0';
  if (time_parse_iso(iso, ms) < 0)
    return -1;
  *ms -= (int64_t)sign * offset_min * 60000;
  return *ms >= 0 ? 0 : -1;
}

static enum cloud_vm_state
provisioning_state(const char *s)
{
  if (strcasecmp(s, "Creating") == 0 || strcasecmp(s, "Updating") == 0)
    return CLOUD_VM_PENDING;
  if (strcasecmp(s, "Succeeded") == 0)
    return CLOUD_VM_RUNNING;
  if (strcasecmp(s, "Deleting") == 0)
    return CLOUD_VM_STOPPING;
  if (strcasecmp(s, "Failed") == 0)
    return CLOUD_VM_GONE;
  return CLOUD_VM_UNKNOWN;
}

/* The instance view's statuses (when the answer has them): PowerState
 * refines a Succeeded VM, ProvisioningState/failed/CODE says why a
 * Failed one ended. */
static int
read_statuses(json_t *props, struct cloud_vm *out, const char *ctx,
              struct err *e)
{
  json_t *view = NULL, *list = NULL, *st, *code = NULL;
  const char *c;
  size_t n;
  int rc = field(props, "instanceView", JSON_OBJECT, ctx,
                 "properties.instanceView", &view, e);

  if (rc == 0)
    rc = field(view, "statuses", JSON_ARRAY, ctx,
               "properties.instanceView.statuses", &list, e);
  if (rc < 0 || list == NULL)
    return rc;
  n = json_array_size(list);
  for (size_t i = 0; i < n && i < STATUSES_MAX; i++) {
    st = json_array_get(list, i);
    if (!json_is_object(st))
      return err_set(e, ERR_SITE, "ARM answer: %s: an instance view "
                     "status is not an object", ctx);
    rc = field(st, "code", JSON_STRING, ctx,
               "properties.instanceView.statuses[].code", &code, e);
    if (rc < 0)
      return rc;
    if (code == NULL)
      continue;
    c = json_string_value(code);
    if (out->state == CLOUD_VM_GONE &&
        strncasecmp(c, "ProvisioningState/failed", 24) == 0) {
      copy_cut(out->end_reason, sizeof(out->end_reason), code);
    } else if (out->state == CLOUD_VM_RUNNING &&
               strncasecmp(c, "PowerState/", 11) == 0) {
      c += 11;
      if (strcasecmp(c, "starting") == 0) {
        out->state = CLOUD_VM_PENDING;
      } else if (strcasecmp(c, "stopping") == 0 ||
                 strcasecmp(c, "deallocating") == 0 ||
                 strcasecmp(c, "stopped") == 0) {
        /* A stopped VM is still allocated and billed. */
        out->state = CLOUD_VM_STOPPING;
      } else if (strcasecmp(c, "deallocated") == 0) {
        out->state = CLOUD_VM_GONE;
        out->lingers = 1;
        copy_cut(out->end_reason, sizeof(out->end_reason), code);
      }
    }
  }
  return 0;
}

static int
read_tags(json_t *vm, struct cloud_vm *out, const char *ctx, struct err *e)
{
  json_t *tags, *v;
  const char *k;
  int rc = field(vm, "tags", JSON_OBJECT, ctx, "tags", &tags, e);

  if (rc < 0 || tags == NULL)
    return rc;
  json_object_foreach(tags, k, v) {
    char *dst = NULL;

    if (!json_is_string(v))
      return err_set(e, ERR_SITE, "ARM answer: %s: tag '%.64s' is not a "
                     "string", ctx, k);
    /* Azure compares tag names case aside. */
    if (strcasecmp(k, CLOUD_TAG_INSTANCE) == 0)
      dst = out->instance;
    else if (strcasecmp(k, CLOUD_TAG_NODE) == 0)
      dst = out->node;
    if (dst == NULL)
      continue;
    /* Too long to be a value tenbin wrote: not ours, and never cut into
     * one that matches. */
    if (json_string_length(v) < CLOUD_NAME_LEN)
      memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    else
      dst[0] = '\0';
  }
  return 0;
}

/* One VM object into out; ctx names it in messages ("VM", "value[3]"). */
static int
read_vm(json_t *vm, struct cloud_vm *out, const char *ctx, struct err *e)
{
  json_t *name = NULL, *props = NULL, *hw = NULL, *s = NULL, *zones = NULL;
  int rc;

  memset(out, 0, sizeof(*out));
  rc = field(vm, "name", JSON_STRING, ctx, "name", &name, e);
  if (rc < 0)
    return rc;
  if (name == NULL || json_string_length(name) == 0)
    return err_set(e, ERR_SITE, "ARM answer: %s has no name", ctx);
  rc = copy_whole(out->id, sizeof(out->id), name, ctx, "name", e);
  if (rc == 0)
    rc = field(vm, "properties", JSON_OBJECT, ctx, "properties", &props, e);
  if (rc < 0)
    return rc;

  rc = field(props, "provisioningState", JSON_STRING, ctx,
             "properties.provisioningState", &s, e);
  if (rc == 0 && s != NULL) {
    out->state = provisioning_state(json_string_value(s));
    if (out->state == CLOUD_VM_GONE) {
      snprintf(out->end_reason, sizeof(out->end_reason), "Failed");
      /* A failed VM keeps its disk and NIC until deleted. */
      out->lingers = 1;
    }
  }
  if (rc == 0)
    rc = read_statuses(props, out, ctx, e);
  if (rc == 0)
    rc = field(props, "hardwareProfile", JSON_OBJECT, ctx,
               "properties.hardwareProfile", &hw, e);
  if (rc == 0)
    rc = field(hw, "vmSize", JSON_STRING, ctx,
               "properties.hardwareProfile.vmSize", &s, e);
  if (rc == 0 && s != NULL)
    rc = copy_whole(out->shape, sizeof(out->shape), s, ctx,
                    "properties.hardwareProfile.vmSize", e);
  if (rc == 0)
    rc = field(props, "priority", JSON_STRING, ctx, "properties.priority",
               &s, e);
  if (rc == 0 && s != NULL)
    out->spot = strcasecmp(json_string_value(s), "Spot") == 0 ||
                strcasecmp(json_string_value(s), "Low") == 0;
  if (rc == 0)
    rc = field(props, "timeCreated", JSON_STRING, ctx,
               "properties.timeCreated", &s, e);
  if (rc == 0 && s != NULL &&
      rfc3339_ms(json_string_value(s), &out->launched_ms) < 0)
    rc = err_set(e, ERR_SITE, "ARM answer: %s: field "
                 "'properties.timeCreated' is no RFC 3339 time: '%.40s'",
                 ctx, json_string_value(s));
  if (rc == 0)
    rc = field(vm, "zones", JSON_ARRAY, ctx, "zones", &zones, e);
  if (rc == 0 && zones != NULL && json_array_size(zones) > 0) {
    s = json_array_get(zones, 0);
    if (!json_is_string(s))
      rc = err_set(e, ERR_SITE, "ARM answer: %s: field 'zones[0]' is not "
                   "a string", ctx);
    else
      rc = copy_whole(out->zone, sizeof(out->zone), s, ctx, "zones[0]", e);
  }
  if (rc == 0)
    rc = read_tags(vm, out, ctx, e);
  return rc;
}

int
azarm_parse_vm(const char *json, size_t len, struct cloud_vm *out,
               struct err *e)
{
  json_t *root = NULL;
  int rc = load(json, len, "VM answer", &root, e);

  memset(out, 0, sizeof(*out));
  if (rc == 0)
    rc = read_vm(root, out, "VM", e);
  if (rc < 0)
    memset(out, 0, sizeof(*out));
  json_decref(root);
  return rc;
}

/* The value of vm's tag key (name case aside; read_tags checked every
 * value is a string), or NULL: also for a value holding a NUL, which a
 * C string would cut into another's. */
static const char *
tag_of(json_t *vm, const char *key)
{
  json_t *tags = json_object_get(vm, "tags"), *v;
  const char *k;

  if (!json_is_object(tags))
    return NULL;
  json_object_foreach(tags, k, v) {
    if (strcasecmp(k, key) == 0)
      return strlen(json_string_value(v)) == json_string_length(v)
                 ? json_string_value(v)
                 : NULL;
  }
  return NULL;
}

int
azarm_parse_list(const char *json, size_t len, struct azarm_page *p,
                 struct err *e)
{
  json_t *root = NULL, *value = NULL, *link = NULL;
  struct cloud_vm vm;
  size_t count;
  int rc;

  p->n = p->nout = 0;
  p->next_link[0] = '\0';
  rc = load(json, len, "VM list", &root, e);
  if (rc == 0)
    rc = field(root, "value", JSON_ARRAY, "VM list", "value", &value, e);
  if (rc == 0 && value == NULL)
    rc = err_set(e, ERR_SITE, "ARM answer: VM list has no 'value'");
  if (rc == 0)
    rc = field(root, "nextLink", JSON_STRING, "VM list", "nextLink", &link,
               e);
  if (rc == 0 && link != NULL)
    rc = copy_whole(p->next_link, sizeof(p->next_link), link, "VM list",
                    "nextLink", e);
  if (rc < 0)
    goto out;
  count = json_array_size(value);
  for (size_t i = 0; i < count; i++) {
    json_t *v = json_array_get(value, i);
    char ctx[40];

    snprintf(ctx, sizeof(ctx), "value[%zu]", i);
    if (!json_is_object(v)) {
      rc = err_set(e, ERR_SITE, "ARM answer: %s is not an object", ctx);
      goto out;
    }
    rc = read_vm(v, &vm, ctx, e);
    if (rc < 0)
      goto out;
    if (p->instance != NULL && strcmp(vm.instance, p->instance) != 0)
      continue;
    if (p->tag_key != NULL) {
      const char *t = tag_of(v, p->tag_key);

      if (t == NULL || p->tag_value == NULL || strcmp(t, p->tag_value) != 0)
        continue;
    }
    if (p->name_tag != NULL) {
      const char *t = tag_of(v, p->name_tag);

      /* Too long to be a node's name: not cut into another's. */
      if (t != NULL && strlen(t) < sizeof(vm.name))
        memcpy(vm.name, t, strlen(t) + 1);
    }
    p->nout++;
    if (p->vms != NULL && p->n < p->max)
      p->vms[p->n++] = vm;
  }
out:
  if (rc < 0) {
    p->n = p->nout = 0;
    p->next_link[0] = '\0';
  }
  json_decref(root);
  return rc;
}

/* error.code and error.message of obj into code and msg (cut). */
static int
read_error(json_t *err_obj, char *code, size_t code_cap, char *msg,
           size_t msg_cap, const char *ctx, struct err *e)
{
  json_t *c = NULL, *m = NULL;
  int rc = field(err_obj, "code", JSON_STRING, ctx, "error.code", &c, e);

  if (rc == 0)
    rc = field(err_obj, "message", JSON_STRING, ctx, "error.message", &m, e);
  if (rc < 0)
    return rc;
  if (c != NULL)
    copy_cut(code, code_cap, c);
  if (m != NULL)
    copy_cut(msg, msg_cap, m);
  return 0;
}

int
azarm_parse_operation(const char *json, size_t len,
                      struct azarm_operation *out, struct err *e)
{
  json_t *root = NULL, *status = NULL, *error = NULL;
  const char *s;
  int rc = load(json, len, "operation answer", &root, e);

  memset(out, 0, sizeof(*out));
  if (rc == 0)
    rc = field(root, "status", JSON_STRING, "operation", "status", &status,
               e);
  if (rc == 0 && status == NULL)
    rc = err_set(e, ERR_SITE, "ARM answer: operation has no status");
  if (rc == 0)
    rc = field(root, "error", JSON_OBJECT, "operation", "error", &error, e);
  if (rc == 0)
    rc = read_error(error, out->code, sizeof(out->code), out->message,
                    sizeof(out->message), "operation", e);
  if (rc < 0) {
    memset(out, 0, sizeof(*out));
    goto out;
  }
  s = json_string_value(status);
  if (strcasecmp(s, "Succeeded") == 0)
    out->status = AZARM_OP_SUCCEEDED;
  else if (strcasecmp(s, "Failed") == 0)
    out->status = AZARM_OP_FAILED;
  else if (strcasecmp(s, "Canceled") == 0)
    out->status = AZARM_OP_CANCELED;
  else
    out->status = AZARM_OP_RUNNING;
out:
  json_decref(root);
  return rc;
}

int
azarm_parse_error(const char *json, size_t len, struct azarm_error *out,
                  struct err *e)
{
  json_t *root = NULL, *error;
  int rc = load(json, len, "error answer", &root, e);

  memset(out, 0, sizeof(*out));
  if (rc == 0)
    rc = field(root, "error", JSON_OBJECT, "error", "error", &error, e);
  /* Some services put code and message at the top. */
  if (rc == 0 && error == NULL)
    error = root;
  if (rc == 0)
    rc = read_error(error, out->code, sizeof(out->code), out->message,
                    sizeof(out->message), "error", e);
  if (rc == 0 && out->code[0] == '\0')
    rc = err_set(e, ERR_SITE, "ARM answer: error has no code");
  if (rc < 0)
    memset(out, 0, sizeof(*out));
  json_decref(root);
  return rc;
}

/* ---- refusals ---- */

static int
one_of(const char *code, const char *const *list, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (strcasecmp(code, list[i]) == 0)
      return 1;
  }
  return 0;
}

#define ONE_OF(code, list) one_of(code, list, sizeof(list) / sizeof(list[0]))

/* 1 when message says "quota", case aside. */
static int
says_quota(const char *message)
{
  if (message == NULL)
    return 0;
  for (const char *p = message; *p != '\0'; p++) {
    if (strncasecmp(p, "quota", 5) == 0)
      return 1;
  }
  return 0;
}

enum cloud_refusal
azarm_refusal(const char *code, const char *message, int http_status)
{
  static const char *const capacity[] = {
      "SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed",
      "OverconstrainedAllocationRequest",
      "OverconstrainedZonalAllocationRequest"};
  static const char *const throttle[] = {
      "TooManyRequests", "SubscriptionRequestsThrottled",
      "RetryableErrorDueToAnotherOperation"};
  static const char *const auth[] = {
      "InvalidAuthenticationToken", "InvalidAuthenticationTokenTenant",
      "ExpiredAuthenticationToken", "AuthenticationFailed",
      "AuthorizationFailed"};
  /* A missing group or subscription is a config mistake, not a VM that
   * is already gone. */
  static const char *const config[] = {"ResourceGroupNotFound",
                                       "SubscriptionNotFound"};
  static const char *const not_found[] = {"ResourceNotFound", "NotFound"};
  static const char *const transient[] = {
      "InternalExecutionError", "InternalServerError", "ServiceUnavailable",
      "GatewayTimeout"};

  if (code == NULL)
    code = "";
  if (ONE_OF(code, capacity))
    return CLOUD_REFUSED_CAPACITY;
  if (strcasecmp(code, "QuotaExceeded") == 0 ||
      (strcasecmp(code, "OperationNotAllowed") == 0 && says_quota(message)))
    return CLOUD_REFUSED_QUOTA;
  if (http_status == 429 || ONE_OF(code, throttle))
    return CLOUD_REFUSED_THROTTLE;
  if (http_status == 401 || ONE_OF(code, auth))
    return CLOUD_REFUSED_AUTH;
  if (ONE_OF(code, config))
    return CLOUD_REFUSED_OTHER;
  if (http_status == 404 || ONE_OF(code, not_found))
    return CLOUD_REFUSED_NOT_FOUND;
  if ((http_status >= 500 && http_status <= 599) || ONE_OF(code, transient))
    return CLOUD_REFUSED_TRANSIENT;
  return CLOUD_REFUSED_OTHER;
}

int64_t
azarm_retry_after_ms(const char *value)
{
  int64_t s = 0;
  const char *p = value;
  const char *digits;

  if (p == NULL)
    return -1;
  while (*p == ' ' || *p == '\t')
    p++;
  digits = p;
  for (; *p >= '0' && *p <= '9'; p++) {
    /* Stop growing past the cap: any longer number is cut anyway. */
    if (s <= AZARM_RETRY_MAX_S)
      s = s * 10 + (*p - '0');
  }
  if (p == digits)
    return -1;
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p != '\0')
    return -1;
  return (s > AZARM_RETRY_MAX_S ? AZARM_RETRY_MAX_S : s) * 1000;
}
