/*
 * Compute Engine v1 URLs, the insert body and the answers (gce.h).
 *
 * Bodies are built and answers read with jansson.  An answer is loaded
 * whole (capped at GCE_ANSWER_MAX, jansson's own depth limit refusing
 * deep nesting), then every member tenbin reads is checked for its type
 * before use; members it does not read are left alone, so that fields
 * Google adds later change nothing.
 */
#include "adapters/gce.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "adapters/gcp_auth.h"
#include "adapters/sigv4.h"
#include "util/hash.h"
#include "util/jsonx.h"
#include "util/timeutil.h"
#include "util/utf8.h"

/* A project id is at most 30 characters, a domain-scoped one
 * ("example.com:proj") somewhat more; zones and names at most 63. */
#define GCE_PROJECT_MAX 100
#define GCE_WORD_MAX 63
/* An endpoint, an image or a network path: longer is no config's. */
#define GCE_PATH_MAX 512

/* ---- URLs ---- */

static int
too_long(struct err *e)
{
  return err_set(e, ERR_TOO_LARGE, "GCE URL too long");
}

/* The endpoint without its trailing '/'. */
static int
add_base(struct buf *out, const char *base, struct err *e)
{
  size_t len;

  if (base == NULL)
    base = GCE_ENDPOINT;
  len = strnlen(base, GCE_PATH_MAX + 1);
  if (len > GCE_PATH_MAX || (strncmp(base, "https://", 8) != 0 &&
                             strncmp(base, "http://", 7) != 0))
    return err_set(e, ERR_INVALID, "GCE endpoint '%.100s': must be an "
                   "http or https URL of at most %d bytes", base,
                   GCE_PATH_MAX);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)base[i];

    if (c <= ' ' || c >= 0x7f || c == '?' || c == '#')
      return err_set(e, ERR_INVALID, "GCE endpoint '%.100s': must be a "
                     "URL without spaces, query or fragment", base);
  }
  while (len > 0 && base[len - 1] == '/')
    len--;
  return buf_add(out, base, len) < 0 ? too_long(e) : 0;
}

/* "/" and s encoded.  "." and ".." are refused: an HTTP client resolves
 * them away, and a DELETE would then name another resource. */
static int
add_segment(struct buf *out, const char *what, const char *s, size_t max,
            struct err *e)
{
  if (s == NULL || s[0] == '\0')
    return err_set(e, ERR_INVALID, "GCE %s: required", what);
  if (strnlen(s, max + 1) > max)
    return err_set(e, ERR_INVALID, "GCE %s: longer than %zu bytes", what,
                   max);
  if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
    return err_set(e, ERR_INVALID, "GCE %s '%s': not a path segment", what,
                   s);
  if (buf_adds(out, "/") < 0 || sigv4_uri_encode(out, s) < 0)
    return too_long(e);
  return 0;
}

/* {base}/projects/{p}/zones/{z}/{collection} */
static int
zone_url(const struct gce_loc *loc, const char *collection, struct buf *out,
         struct err *e)
{
  int rc = add_base(out, loc->base, e);

  if (rc == 0 && buf_adds(out, "/projects") < 0)
    rc = too_long(e);
  if (rc == 0)
    rc = add_segment(out, "project", loc->project, GCE_PROJECT_MAX, e);
  if (rc == 0 && buf_adds(out, "/zones") < 0)
    rc = too_long(e);
  if (rc == 0)
    rc = add_segment(out, "zone", loc->zone, GCE_WORD_MAX, e);
  if (rc == 0 && buf_adds(out, "/") < 0)
    rc = too_long(e);
  if (rc == 0 && buf_adds(out, collection) < 0)
    rc = too_long(e);
  return rc;
}

/* Google refuses a requestId that is no UUID; so does tenbin, first. */
static int
uuid_valid(const char *s)
{
  for (int i = 0; i < 36; i++) {
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = s[i];

    if (dash ? c != '-'
             : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                 (c >= 'A' && c <= 'F')))
      return 0;
  }
  return s[36] == '\0';
}

static int
add_request_id(struct buf *out, const char *request_id, struct err *e)
{
  if (request_id == NULL || !uuid_valid(request_id))
    return err_set(e, ERR_INVALID, "GCE requestId '%.40s': not a UUID",
                   request_id != NULL ? request_id : "");
  if (buf_adds(out, "?requestId=") < 0 ||
      sigv4_uri_encode(out, request_id) < 0)
    return too_long(e);
  return 0;
}

int
gce_url_insert(const struct gce_loc *loc, const char *request_id,
               struct buf *out, struct err *e)
{
  int rc = zone_url(loc, "instances", out, e);

  if (rc == 0)
    rc = add_request_id(out, request_id, e);
  return rc;
}

int
gce_url_operation(const struct gce_loc *loc, const char *op,
                  struct buf *out, struct err *e)
{
  int rc = zone_url(loc, "operations", out, e);

  if (rc == 0)
    rc = add_segment(out, "operation", op, GCE_OP_LEN - 1, e);
  return rc;
}

int
gce_url_delete(const struct gce_loc *loc, const char *name,
               const char *request_id, struct buf *out, struct err *e)
{
  int rc = zone_url(loc, "instances", out, e);

  if (rc == 0)
    rc = add_segment(out, "instance name", name, GCE_WORD_MAX, e);
  if (rc == 0)
    rc = add_request_id(out, request_id, e);
  return rc;
}

/* 1..max characters of [a-z0-9-]: what tenbin's label values, zones and
 * machine types are made of. */
static int
is_word(const char *s, size_t max)
{
  size_t n = 0;

  if (s == NULL)
    return 0;
  for (; s[n] != '\0'; n++) {
    char c = s[n];

    if (n == max || !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-'))
      return 0;
  }
  return n > 0;
}

/* The list URL with filter (built by the caller from checked words). */
static int
list_url(const struct gce_loc *loc, const char *filter, int max_results,
         const char *page_token, struct buf *out, struct err *e)
{
  int rc;

  if (max_results < 1 || max_results > GCE_MAX_RESULTS)
    return err_set(e, ERR_INVALID, "GCE list: maxResults %d: must be "
                   "1..%d", max_results, GCE_MAX_RESULTS);
  if (page_token != NULL &&
      strnlen(page_token, GCE_TOKEN_LEN) >= GCE_TOKEN_LEN)
    return err_set(e, ERR_INVALID, "GCE list: pageToken longer than %d "
                   "bytes", GCE_TOKEN_LEN - 1);
  rc = zone_url(loc, "instances", out, e);
  if (rc < 0)
    return rc;
  if (buf_adds(out, "?filter=") < 0 || sigv4_uri_encode(out, filter) < 0 ||
      buf_addf(out, "&maxResults=%d", max_results) < 0)
    return too_long(e);
  if (page_token != NULL && page_token[0] != '\0' &&
      (buf_adds(out, "&pageToken=") < 0 ||
       sigv4_uri_encode(out, page_token) < 0))
    return too_long(e);
  return 0;
}

int
gce_url_list(const struct gce_loc *loc, const char *instance_label,
             int max_results, const char *page_token, struct buf *out,
             struct err *e)
{
  char filter[128];

  if (instance_label != NULL && !is_word(instance_label, GCE_WORD_MAX))
    return err_set(e, ERR_INVALID, "GCE list: label value '%.80s': must "
                   "be 1-63 of a-z, 0-9 and '-'", instance_label);
  /* Google's filter syntax: labels.KEY = "VALUE", or labels.KEY:* for
   * any value. */
  if (instance_label != NULL)
    snprintf(filter, sizeof(filter), "labels.%s = \"%s\"",
             CLOUD_TAG_INSTANCE, instance_label);
  else
    snprintf(filter, sizeof(filter), "labels.%s:*", CLOUD_TAG_INSTANCE);
  return list_url(loc, filter, max_results, page_token, out, e);
}

void
gce_request_id(const char *seed, char out[GCE_REQUEST_ID_LEN])
{
  unsigned char md[32];
  char hex[33];

  if (seed == NULL)
    seed = "";
  hash_sha256(seed, strlen(seed), md);
  md[6] = (unsigned char)((md[6] & 0x0f) | 0x40); /* version 4 */
  md[8] = (unsigned char)((md[8] & 0x3f) | 0x80); /* variant 10xx */
  hash_hex(md, 16, hex);
  snprintf(out, GCE_REQUEST_ID_LEN, "%.8s-%.4s-%.4s-%.4s-%.12s", hex,
           hex + 8, hex + 12, hex + 16, hex + 20);
}

/* ---- the insert body ---- */

int
gce_name_valid(const char *name)
{
  size_t n;

  if (!is_word(name, GCE_WORD_MAX))
    return 0;
  n = strlen(name);
  return name[0] >= 'a' && name[0] <= 'z' && name[n - 1] != '-';
}

/* 1..max printable ASCII characters and no space: a resource path or an
 * e-mail, which goes into JSON as it is. */
static int
is_path(const char *s, size_t max)
{
  size_t n = 0;

  if (s == NULL)
    return 0;
  for (; s[n] != '\0'; n++) {
    if (n == max || s[n] <= ' ' || s[n] >= 0x7f)
      return 0;
  }
  return n > 0;
}

/* Google's label rules, to ASCII: a key is 1-63 of [a-z0-9_-] starting
 * with a letter, a value 0-63 of the same. */
static int
label_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

static int
label_ok(const char *s, int key)
{
  size_t n = 0;

  if (s == NULL)
    return 0;
  for (; s[n] != '\0'; n++) {
    if (n == GCE_WORD_MAX || !label_char(s[n]))
      return 0;
  }
  return key ? n > 0 && s[0] >= 'a' && s[0] <= 'z' : 1;
}

int
gce_label_ok(const char *s, int key)
{
  return label_ok(s, key);
}

int
gce_url_list_labelled(const struct gce_loc *loc, const char *key,
                      const char *value, int max_results,
                      const char *page_token, struct buf *out,
                      struct err *e)
{
  /* "labels." + 63 + " = \"" + 63 + "\"" */
  char filter[160];

  if (!label_ok(key, 1))
    return err_set(e, ERR_INVALID, "GCE list: label key '%.80s': must be "
                   "1-63 of a-z, 0-9, '_' and '-', starting with a "
                   "lowercase letter", key != NULL ? key : "");
  /* The value goes between quotes: the rules keep a quote out. */
  if (!label_ok(value, 0))
    return err_set(e, ERR_INVALID, "GCE list: label value '%.80s': must "
                   "be 0-63 of a-z, 0-9, '_' and '-' (lowercase)",
                   value != NULL ? value : "");
  snprintf(filter, sizeof(filter), "labels.%s = \"%s\"", key, value);
  return list_url(loc, filter, max_results, page_token, out, e);
}

static int
bad(struct err *e, const char *field, const char *why)
{
  return err_set(e, ERR_INVALID, "GCE launch: field '%s': %s", field, why);
}

static int
check_labels(const struct gce_launch *l, struct err *e)
{
  if (!is_word(l->instance_label, GCE_WORD_MAX))
    return bad(e, "instance_label", "must be 1-63 of a-z, 0-9 and '-'");
  if (!is_word(l->node_label, GCE_WORD_MAX))
    return bad(e, "node_label", "must be 1-63 of a-z, 0-9 and '-'");
  if (l->nlabels > GCE_MAX_LABELS - 2 || (l->nlabels > 0 && !l->labels))
    return bad(e, "labels", "at most 62 besides tenbin's two");
  for (size_t i = 0; i < l->nlabels; i++) {
    const struct gce_label *lb = &l->labels[i];

    if (!label_ok(lb->key, 1) || !label_ok(lb->value, 0))
      return err_set(e, ERR_INVALID, "GCE launch: label '%.63s': a key "
                     "is 1-63 of a-z, 0-9, '_' and '-' starting with a "
                     "letter, a value 0-63 of them",
                     lb->key != NULL ? lb->key : "");
    if (strcmp(lb->key, CLOUD_TAG_INSTANCE) == 0 ||
        strcmp(lb->key, CLOUD_TAG_NODE) == 0)
      return err_set(e, ERR_INVALID, "GCE launch: label '%s': tenbin's "
                     "own", lb->key);
    for (size_t j = 0; j < i; j++) {
      if (strcmp(l->labels[j].key, lb->key) == 0)
        return err_set(e, ERR_INVALID, "GCE launch: label '%s': given "
                       "twice", lb->key);
    }
  }
  return 0;
}

static int
check_launch(const struct gce_launch *l, struct err *e)
{
  if (!gce_name_valid(l->name))
    return bad(e, "name", "must be 1-63 of a-z, 0-9 and '-', starting "
               "with a letter and not ending with '-'");
  if (!is_word(l->zone, GCE_WORD_MAX))
    return bad(e, "zone", "must be 1-63 of a-z, 0-9 and '-'");
  if (!is_word(l->machine_type, GCE_WORD_MAX))
    return bad(e, "machine_type", "must be 1-63 of a-z, 0-9 and '-'");
  if (!is_path(l->image, GCE_PATH_MAX))
    return bad(e, "image", "must be a resource path without spaces");
  if (l->disk_gb < 10 || l->disk_gb > 65536)
    return bad(e, "disk_gb", "must be 10..65536");
  if (l->disk_type != NULL && !is_word(l->disk_type, GCE_WORD_MAX))
    return bad(e, "disk_type", "must be 1-63 of a-z, 0-9 and '-'");
  if (l->network != NULL && !is_path(l->network, GCE_PATH_MAX))
    return bad(e, "network", "must be a resource path without spaces");
  if (l->subnetwork != NULL && !is_path(l->subnetwork, GCE_PATH_MAX))
    return bad(e, "subnetwork", "must be a resource path without spaces");
  if (l->accelerator_type != NULL
          ? !is_word(l->accelerator_type, GCE_WORD_MAX) ||
                l->accelerator_count < 1 || l->accelerator_count > 16
          : l->accelerator_count != 0)
    return bad(e, "accelerator", "a type of a-z, 0-9 and '-' with a "
               "count of 1..16, or neither");
  if (l->startup_script != NULL &&
      (strnlen(l->startup_script, GCE_SCRIPT_MAX + 1) > GCE_SCRIPT_MAX ||
       !utf8_valid(l->startup_script, strlen(l->startup_script))))
    return bad(e, "startup_script", "must be UTF-8 of at most 256 KiB");
  if (l->service_account != NULL && !is_path(l->service_account, 256))
    return bad(e, "service_account", "must be an e-mail or \"default\"");
  return check_labels(l, e);
}

/* obj[key] = v (stolen), remembering a failure in *ok. */
static void
put(json_t *obj, const char *key, json_t *v, int *ok)
{
  if (v == NULL || json_object_set_new(obj, key, v) < 0)
    *ok = 0;
}

static json_t *
disks(const struct gce_launch *l)
{
  char size[16], type[160];
  json_t *init;

  snprintf(size, sizeof(size), "%d", l->disk_gb);
  /* diskSizeGb is an int64, which Google's JSON writes as a string. */
  init = json_pack("{s:s, s:s}", "diskSizeGb", size, "sourceImage",
                   l->image);
  if (init != NULL && l->disk_type != NULL) {
    snprintf(type, sizeof(type), "zones/%s/diskTypes/%s", l->zone,
             l->disk_type);
    if (json_object_set_new(init, "diskType", json_string(type)) < 0) {
      json_decref(init);
      init = NULL;
    }
  }
  if (init == NULL)
    return NULL;
  return json_pack("[{s:b, s:b, s:s, s:s, s:o}]", "autoDelete", 1, "boot",
                   1, "mode", "READ_WRITE", "type", "PERSISTENT",
                   "initializeParams", init);
}

static json_t *
network(const struct gce_launch *l)
{
  json_t *nic = json_pack("{s:s}", "network",
                          l->network != NULL ? l->network
                                             : "global/networks/default");
  int ok = nic != NULL;

  if (ok && l->subnetwork != NULL)
    put(nic, "subnetwork", json_string(l->subnetwork), &ok);
  /* Without an access config the VM has no public address. */
  if (ok && l->external_ip)
    put(nic, "accessConfigs",
        json_pack("[{s:s, s:s}]", "name", "External NAT", "type",
                  "ONE_TO_ONE_NAT"),
        &ok);
  if (!ok) {
    json_decref(nic);
    return NULL;
  }
  return json_pack("[o]", nic);
}

static json_t *
labels(const struct gce_launch *l)
{
  json_t *obj = json_object();
  int ok = obj != NULL;

  if (ok)
    put(obj, CLOUD_TAG_INSTANCE, json_string(l->instance_label), &ok);
  if (ok)
    put(obj, CLOUD_TAG_NODE, json_string(l->node_label), &ok);
  for (size_t i = 0; ok && i < l->nlabels; i++)
    put(obj, l->labels[i].key, json_string(l->labels[i].value), &ok);
  if (!ok) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

static json_t *
scheduling(const struct gce_launch *l)
{
  /* A GPU VM cannot live-migrate: host maintenance must end it. */
  if (l->spot)
    return json_pack("{s:b, s:s, s:s, s:b, s:s}", "automaticRestart", 0,
                     "instanceTerminationAction", "DELETE",
                     "onHostMaintenance", "TERMINATE", "preemptible", 1,
                     "provisioningModel", "SPOT");
  return json_pack("{s:s, s:s}", "onHostMaintenance", "TERMINATE",
                   "provisioningModel", "STANDARD");
}

int
gce_insert_body(const struct gce_launch *l, struct buf *body,
                struct err *e)
{
  char path[160];
  json_t *root = NULL;
  int ok = 1, rc = check_launch(l, e);

  if (rc < 0)
    goto out;
  root = json_object();
  if (root == NULL) {
    rc = err_set(e, ERR_NOMEM, "building a GCE insert body");
    goto out;
  }
  put(root, "name", json_string(l->name), &ok);
  snprintf(path, sizeof(path), "zones/%s/machineTypes/%s", l->zone,
           l->machine_type);
  put(root, "machineType", json_string(path), &ok);
  put(root, "disks", disks(l), &ok);
  put(root, "networkInterfaces", network(l), &ok);
  put(root, "labels", labels(l), &ok);
  if (l->startup_script != NULL)
    put(root, "metadata",
        json_pack("{s:[{s:s, s:s}]}", "items", "key", "startup-script",
                  "value", l->startup_script),
        &ok);
  else
    put(root, "metadata", json_object(), &ok);
  put(root, "canIpForward", json_false(), &ok);
  put(root, "deletionProtection", json_false(), &ok);
  put(root, "scheduling", scheduling(l), &ok);
  if (l->service_account != NULL)
    put(root, "serviceAccounts",
        json_pack("[{s:s, s:[s]}]", "email", l->service_account, "scopes",
                  GCP_SCOPE),
        &ok);
  if (l->accelerator_type != NULL) {
    snprintf(path, sizeof(path), "zones/%s/acceleratorTypes/%s", l->zone,
             l->accelerator_type);
    put(root, "guestAccelerators",
        json_pack("[{s:s, s:i}]", "acceleratorType", path,
                  "acceleratorCount", l->accelerator_count),
        &ok);
  }
  if (!ok) {
    rc = err_set(e, ERR_NOMEM, "building a GCE insert body");
    goto out;
  }
  rc = jsonx_dump_buf(root, body);
  if (rc < 0)
    rc = err_set(e, ERR_TOO_LARGE, "GCE insert body too large");
out:
  json_decref(root);
  return rc;
}

/* ---- answers ---- */

/* The answer json[0..len), an object (new reference into *out). */
static int
load(const char *json, size_t len, const char *what, json_t **out,
     struct err *e)
{
  json_error_t jerr;
  json_t *v;

  *out = NULL;
  if (len > GCE_ANSWER_MAX)
    return err_set(e, ERR_SITE, "GCE %s: larger than %u bytes", what,
                   GCE_ANSWER_MAX);
  /* jansson refuses nesting deeper than JSON_PARSER_MAX_DEPTH. */
  v = json_loadb(json != NULL ? json : "", len, JSON_REJECT_DUPLICATES,
                 &jerr);
  if (v == NULL)
    return err_set(e, ERR_SITE, "GCE %s: not JSON: %.100s at line %d "
                   "column %d", what, jerr.text, jerr.line, jerr.column);
  if (!json_is_object(v)) {
    json_decref(v);
    return err_set(e, ERR_SITE, "GCE %s: not a JSON object", what);
  }
  *out = v;
  return 0;
}

/* obj[key] as a string (borrowed) into *out, NULL when absent or null.
 * Another type, or a string holding a NUL (which a C string would cut
 * short, naming another VM), is ERR_SITE naming where+key. */
static int
get_str(const json_t *obj, const char *key, const char *what,
        const char *where, const char **out, struct err *e)
{
  json_t *v = json_object_get(obj, key);

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v) ||
      strlen(json_string_value(v)) != json_string_length(v))
    return err_set(e, ERR_SITE, "GCE %s: field '%s%.63s': not a string",
                   what, where, key);
  *out = json_string_value(v);
  return 0;
}

/* obj[key] as a member of type (JSON_OBJECT, JSON_ARRAY), the same way. */
static int
get_typed(const json_t *obj, const char *key, json_type type,
          const char *what, const char *where, json_t **out, struct err *e)
{
  json_t *v = json_object_get(obj, key);

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (json_typeof(v) != type)
    return err_set(e, ERR_SITE, "GCE %s: field '%s%.63s': not %s", what,
                   where, key, type == JSON_OBJECT ? "an object"
                                                   : "an array");
  *out = v;
  return 0;
}

/* s into a field of size n; ERR_SITE when it does not fit (a cut name
 * would be another VM's). */
static int
fit(char *field, size_t n, const char *s, const char *what,
    const char *where, const char *key, struct err *e)
{
  size_t len = strlen(s);

  if (len >= n)
    return err_set(e, ERR_SITE, "GCE %s: field '%s%.63s': longer than %zu "
                   "bytes", what, where, key, n - 1);
  memcpy(field, s, len + 1);
  return 0;
}

/* s into a field of size n, cut to fit and still UTF-8: for words and
 * messages that are only shown. */
static void
cut(char *field, size_t n, const char *s)
{
  snprintf(field, n, "%s", s);
  utf8_repair(field);
}

/* What follows a URL's last '/'. */
static const char *
last_segment(const char *s)
{
  const char *p = strrchr(s, '/');

  return p != NULL ? p + 1 : s;
}

/* An RFC 3339 time with its offset ("2026-11-21T06:00:00.000-08:00" or
 * "...Z") into ms since the epoch. */
static int
rfc3339_ms(const char *s, int64_t *ms)
{
  char utc[40];
  size_t len = strlen(s), local;
  const char *off;
  int64_t t;
  int hours, minutes = 0;

  if (len < 20 || len >= sizeof(utc) - 1)
    return ERR_INVALID;
  if (s[len - 1] == 'Z') {
    off = s + len - 1;
  } else {
    off = s + len - 6;
    if ((off[0] != '+' && off[0] != '-') || off[3] != ':')
      return ERR_INVALID;
    for (int i = 1; i < 6; i++) {
      if (i != 3 && (off[i] < '0' || off[i] > '9'))
        return ERR_INVALID;
    }
    hours = (off[1] - '0') * 10 + off[2] - '0';
    minutes = (off[4] - '0') * 10 + off[5] - '0';
    if (hours > 23 || minutes > 59)
      return ERR_INVALID;
    minutes += hours * 60;
    if (off[0] == '-')
      minutes = -minutes;
  }
  /* The local time with a 'Z' is what time_parse_iso reads. */
  local = (size_t)(off - s);
  memcpy(utc, s, local);
  utc[local] = 'Z';
  utc[local + 1] = '\0';
  if (time_parse_iso(utc, &t) < 0)
    return ERR_INVALID;
  *ms = t - (int64_t)minutes * 60000;
  return 0;
}

/* ---- Operations ---- */

static const struct {
  const char *word;
  enum gce_op_status status;
} op_states[] = {
    {"PENDING", GCE_OP_PENDING},
    {"RUNNING", GCE_OP_RUNNING},
    {"DONE", GCE_OP_DONE},
};

/* The first of error.errors: its code and message into out. */
static int
op_error(const json_t *error, struct gce_operation *out, struct err *e)
{
  static const char what[] = "operation";
  const char *code = NULL, *msg = NULL;
  json_t *errors, *first;
  int rc = get_typed(error, "errors", JSON_ARRAY, what, "error.", &errors,
                     e);

  if (rc < 0 || errors == NULL || json_array_size(errors) == 0)
    return rc;
  first = json_array_get(errors, 0);
  if (!json_is_object(first))
    return err_set(e, ERR_SITE, "GCE operation: field 'error.errors[0]': "
                   "not an object");
  rc = get_str(first, "code", what, "error.errors[0].", &code, e);
  if (rc == 0)
    rc = get_str(first, "message", what, "error.errors[0].", &msg, e);
  if (rc < 0)
    return rc;
  cut(out->error_code, sizeof(out->error_code), code != NULL ? code : "");
  cut(out->error_message, sizeof(out->error_message),
      msg != NULL ? msg : "");
  return 0;
}

int
gce_parse_operation(const char *json, size_t len, struct gce_operation *out,
                    struct err *e)
{
  static const char what[] = "operation";
  const char *kind, *name, *status, *target;
  json_t *root = NULL, *error, *http;
  int rc;

  memset(out, 0, sizeof(*out));
  rc = load(json, len, what, &root, e);
  if (rc == 0)
    rc = get_str(root, "kind", what, "", &kind, e);
  if (rc == 0 && kind != NULL && strcmp(kind, "compute#operation") != 0)
    rc = err_set(e, ERR_SITE, "GCE operation: not one (its kind is "
                 "'%.40s')", kind);
  if (rc == 0)
    rc = get_str(root, "name", what, "", &name, e);
  if (rc == 0 && (name == NULL || name[0] == '\0'))
    rc = err_set(e, ERR_SITE, "GCE operation: field 'name': required");
  if (rc == 0)
    rc = fit(out->name, sizeof(out->name), name, what, "", "name", e);
  if (rc == 0)
    rc = get_str(root, "status", what, "", &status, e);
  for (size_t i = 0; rc == 0 && status != NULL &&
                     i < sizeof(op_states) / sizeof(op_states[0]);
       i++) {
    if (strcmp(status, op_states[i].word) == 0)
      out->status = op_states[i].status;
  }
  if (rc == 0 && out->status == GCE_OP_UNKNOWN)
    rc = err_set(e, ERR_SITE, "GCE operation: field 'status': '%.20s' is "
                 "no operation status", status != NULL ? status : "");
  if (rc == 0)
    rc = get_str(root, "targetLink", what, "", &target, e);
  if (rc == 0 && target != NULL)
    rc = fit(out->target, sizeof(out->target), last_segment(target), what,
             "", "targetLink", e);
  if (rc < 0)
    goto out;
  http = json_object_get(root, "httpErrorStatusCode");
  if (http != NULL && !json_is_null(http)) {
    if (!json_is_integer(http) || json_integer_value(http) < 0 ||
        json_integer_value(http) > 999) {
      rc = err_set(e, ERR_SITE, "GCE operation: field "
                   "'httpErrorStatusCode': not an HTTP status");
      goto out;
    }
    out->http_status = (int)json_integer_value(http);
  }
  rc = get_typed(root, "error", JSON_OBJECT, what, "", &error, e);
  /* Only a finished operation has failed; Google sets error then. */
  if (rc < 0 || error == NULL || out->status != GCE_OP_DONE)
    goto out;
  rc = op_error(error, out, e);
  if (rc < 0)
    goto out;
  out->failed = 1;
  out->refusal = gce_refusal(out->error_code, out->http_status);
  rc = err_set(e, ERR_SITE, "GCE operation %s failed: %s: %.300s",
               out->name, out->error_code[0] != '\0' ? out->error_code
                                                     : "no code",
               out->error_message);
out:
  if (rc < 0 && !out->failed)
    memset(out, 0, sizeof(*out));
  json_decref(root);
  return rc;
}

/* ---- instances.list ---- */

static const struct {
  const char *word;
  enum cloud_vm_state state;
} vm_states[] = {
    {"PROVISIONING", CLOUD_VM_PENDING},
    {"STAGING", CLOUD_VM_PENDING},
    {"RUNNING", CLOUD_VM_RUNNING},
    /* see gce_parse_list in gce.h */
    {"REPAIRING", CLOUD_VM_RUNNING},
    {"STOPPING", CLOUD_VM_STOPPING},
    {"SUSPENDING", CLOUD_VM_STOPPING},
    {"DEPROVISIONING", CLOUD_VM_STOPPING},
    {"TERMINATED", CLOUD_VM_GONE},
    {"STOPPED", CLOUD_VM_GONE},
    {"SUSPENDED", CLOUD_VM_GONE},
};

static enum cloud_vm_state
vm_state(const char *status)
{
  for (size_t i = 0; i < sizeof(vm_states) / sizeof(vm_states[0]); i++) {
    if (strcmp(status, vm_states[i].word) == 0)
      return vm_states[i].state;
  }
  return CLOUD_VM_UNKNOWN;
}

static int
read_scheduling(const json_t *item, const char *where, struct cloud_vm *vm,
                struct err *e)
{
  static const char what[] = "instance list";
  char at[48];
  const char *model;
  json_t *sched, *pre;
  int rc = get_typed(item, "scheduling", JSON_OBJECT, what, where, &sched,
                     e);

  if (rc < 0 || sched == NULL)
    return rc;
  snprintf(at, sizeof(at), "%sscheduling.", where);
  rc = get_str(sched, "provisioningModel", what, at, &model, e);
  if (rc < 0)
    return rc;
  pre = json_object_get(sched, "preemptible");
  if (pre != NULL && !json_is_null(pre) && !json_is_boolean(pre))
    return err_set(e, ERR_SITE, "GCE instance list: field '%spreemptible': "
                   "not a boolean", at);
  vm->spot = (model != NULL && strcmp(model, "SPOT") == 0) ||
             json_is_true(pre);
  return 0;
}

static int
read_labels(const json_t *item, const char *where, const char *name_label,
            struct cloud_vm *vm, struct err *e)
{
  static const char what[] = "instance list";
  char at[48];
  const char *inst, *node, *name = NULL;
  json_t *labels;
  int rc = get_typed(item, "labels", JSON_OBJECT, what, where, &labels, e);

  if (rc < 0 || labels == NULL)
    return rc;
  snprintf(at, sizeof(at), "%slabels.", where);
  rc = get_str(labels, CLOUD_TAG_INSTANCE, what, at, &inst, e);
  if (rc == 0)
    rc = get_str(labels, CLOUD_TAG_NODE, what, at, &node, e);
  if (rc == 0 && inst != NULL)
    rc = fit(vm->instance, sizeof(vm->instance), inst, what, at,
             CLOUD_TAG_INSTANCE, e);
  if (rc == 0 && node != NULL)
    rc = fit(vm->node, sizeof(vm->node), node, what, at, CLOUD_TAG_NODE,
             e);
  if (rc == 0 && name_label != NULL)
    rc = get_str(labels, name_label, what, at, &name, e);
  /* Not fitting, it is no node's name: a cut one could be another's. */
  if (rc == 0 && name != NULL && strlen(name) < sizeof(vm->name))
    memcpy(vm->name, name, strlen(name) + 1);
  return rc;
}

/* The first network interface's networkIP: the VM's private address,
 * what a Slurm node's NodeAddr holds. */
static int
read_address(const json_t *item, const char *where, struct cloud_vm *vm,
             struct err *e)
{
  static const char what[] = "instance list";
  char at[64];
  const char *ip;
  json_t *nics, *nic;
  int rc = get_typed(item, "networkInterfaces", JSON_ARRAY, what, where,
                     &nics, e);

  if (rc < 0 || nics == NULL || json_array_size(nics) == 0)
    return rc;
  nic = json_array_get(nics, 0);
  if (!json_is_object(nic))
    return err_set(e, ERR_SITE, "GCE instance list: field "
                   "'%snetworkInterfaces[0]': not an object", where);
  snprintf(at, sizeof(at), "%snetworkInterfaces[0].", where);
  rc = get_str(nic, "networkIP", what, at, &ip, e);
  if (rc == 0 && ip != NULL)
    rc = fit(vm->address, sizeof(vm->address), ip, what, at, "networkIP",
             e);
  return rc;
}

/* items[i] into vm. */
static int
read_vm(const json_t *item, size_t i, const char *name_label,
        struct cloud_vm *vm, struct err *e)
{
  static const char what[] = "instance list";
  const char *name, *status, *zone, *type, *created;
  char where[32];
  int rc;

  memset(vm, 0, sizeof(*vm));
  snprintf(where, sizeof(where), "items[%zu].", i);
  if (!json_is_object(item))
    return err_set(e, ERR_SITE, "GCE instance list: field 'items[%zu]': "
                   "not an object", i);
  rc = get_str(item, "name", what, where, &name, e);
  if (rc == 0 && (name == NULL || name[0] == '\0'))
    rc = err_set(e, ERR_SITE, "GCE instance list: field '%sname': "
                 "required", where);
  if (rc == 0)
    rc = fit(vm->id, sizeof(vm->id), name, what, where, "name", e);
  if (rc == 0)
    rc = get_str(item, "status", what, where, &status, e);
  if (rc == 0 && status != NULL)
    vm->state = vm_state(status);
  if (rc == 0)
    rc = get_str(item, "zone", what, where, &zone, e);
  if (rc == 0 && zone != NULL)
    rc = fit(vm->zone, sizeof(vm->zone), last_segment(zone), what, where,
             "zone", e);
  if (rc == 0)
    rc = get_str(item, "machineType", what, where, &type, e);
  if (rc == 0 && type != NULL)
    rc = fit(vm->shape, sizeof(vm->shape), last_segment(type), what,
             where, "machineType", e);
  if (rc == 0)
    rc = get_str(item, "creationTimestamp", what, where, &created, e);
  if (rc == 0 && created != NULL && rfc3339_ms(created, &vm->launched_ms) < 0)
    rc = err_set(e, ERR_SITE, "GCE instance list: field "
                 "'%screationTimestamp': '%.40s' is no RFC 3339 time",
                 where, created);
  if (rc == 0)
    rc = read_scheduling(item, where, vm, e);
  if (rc == 0)
    rc = read_labels(item, where, name_label, vm, e);
  if (rc == 0)
    rc = read_address(item, where, vm, e);
  return rc;
}

int
gce_parse_list(const char *json, size_t len, struct cloud_vm *vms,
               size_t max, size_t *n, size_t *nout,
               char next_page_token[GCE_TOKEN_LEN], struct err *e)
{
  return gce_parse_list_named(json, len, NULL, vms, max, n, nout,
                              next_page_token, e);
}

int
gce_parse_list_named(const char *json, size_t len, const char *name_label,
                     struct cloud_vm *vms, size_t max, size_t *n,
                     size_t *nout, char next_page_token[GCE_TOKEN_LEN],
                     struct err *e)
{
  static const char what[] = "instance list";
  const char *kind, *token;
  json_t *root = NULL, *items = NULL;
  struct cloud_vm spare;
  int rc;

  *n = *nout = 0;
  next_page_token[0] = '\0';
  rc = load(json, len, what, &root, e);
  if (rc == 0)
    rc = get_str(root, "kind", what, "", &kind, e);
  if (rc == 0 && kind != NULL && strcmp(kind, "compute#instanceList") != 0)
    rc = err_set(e, ERR_SITE, "GCE instance list: not one (its kind is "
                 "'%.40s')", kind);
  if (rc == 0 && json_object_get(root, "error") != NULL)
    rc = err_set(e, ERR_SITE, "GCE instance list: an error answer");
  if (rc == 0)
    rc = get_str(root, "nextPageToken", what, "", &token, e);
  if (rc == 0 && token != NULL)
    rc = fit(next_page_token, GCE_TOKEN_LEN, token, what, "",
             "nextPageToken", e);
  if (rc == 0)
    rc = get_typed(root, "items", JSON_ARRAY, what, "", &items, e);
  /* A page holds at most maxResults: more is no answer to tenbin. */
  if (rc == 0 && items != NULL && json_array_size(items) > GCE_MAX_RESULTS)
    rc = err_set(e, ERR_SITE, "GCE instance list: more than %d items",
                 GCE_MAX_RESULTS);
  for (size_t i = 0; rc == 0 && items != NULL && i < json_array_size(items);
       i++) {
    struct cloud_vm *vm = *n < max ? &vms[*n] : &spare;

    rc = read_vm(json_array_get(items, i), i, name_label, vm, e);
    if (rc == 0 && vm != &spare)
      (*n)++;
    if (rc == 0)
      (*nout)++;
  }
  if (rc < 0) {
    *n = *nout = 0;
    next_page_token[0] = '\0';
  }
  json_decref(root);
  return rc;
}

/* ---- errors ---- */

static const struct {
  const char *word;
  enum cloud_refusal refusal;
} refusals[] = {
    {"ZONE_RESOURCE_POOL_EXHAUSTED", CLOUD_REFUSED_CAPACITY},
    {"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", CLOUD_REFUSED_CAPACITY},
    {"QUOTA_EXCEEDED", CLOUD_REFUSED_QUOTA},
    {"quotaExceeded", CLOUD_REFUSED_QUOTA},
    {"rateLimitExceeded", CLOUD_REFUSED_THROTTLE},
    {"userRateLimitExceeded", CLOUD_REFUSED_THROTTLE},
    {"RESOURCE_EXHAUSTED", CLOUD_REFUSED_THROTTLE},
    {"RESOURCE_OPERATION_RATE_EXCEEDED", CLOUD_REFUSED_THROTTLE},
    {"UNAUTHENTICATED", CLOUD_REFUSED_AUTH},
    {"authError", CLOUD_REFUSED_AUTH},
    {"notFound", CLOUD_REFUSED_NOT_FOUND},
    {"NOT_FOUND", CLOUD_REFUSED_NOT_FOUND},
    {"RESOURCE_NOT_FOUND", CLOUD_REFUSED_NOT_FOUND},
};

/* The refusal a word names, or -1 for a word tenbin does not know. */
static int
word_refusal(const char *word)
{
  if (word == NULL || word[0] == '\0')
    return -1;
  for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
    if (strcmp(word, refusals[i].word) == 0)
      return (int)refusals[i].refusal;
  }
  return -1;
}

enum cloud_refusal
gce_refusal(const char *code_or_reason, int http_status)
{
  int r = word_refusal(code_or_reason);

  if (r >= 0)
    return (enum cloud_refusal)r;
  if (http_status == 429)
    return CLOUD_REFUSED_THROTTLE;
  if (http_status == 401)
    return CLOUD_REFUSED_AUTH;
  if (http_status == 404)
    return CLOUD_REFUSED_NOT_FOUND;
  if (http_status >= 500 && http_status <= 599)
    return CLOUD_REFUSED_TRANSIENT;
  return CLOUD_REFUSED_OTHER;
}

/* A string member of obj cut into a field, "" when it is none. */
static void
cut_member(char *field, size_t n, const json_t *obj, const char *key)
{
  const char *s = json_string_value(json_object_get(obj, key));

  cut(field, n, s != NULL ? s : "");
}

void
gce_parse_error(const char *json, size_t len, int http_status,
                struct gce_error *out)
{
  json_t *root = NULL, *error, *errors, *code;

  memset(out, 0, sizeof(*out));
  out->http_status = http_status;
  if (json != NULL && len <= GCE_ANSWER_MAX)
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
  error = json_object_get(root, "error");
  if (json_is_object(error)) {
    code = json_object_get(error, "code");
    if (json_is_integer(code) && json_integer_value(code) > 0 &&
        json_integer_value(code) <= 999)
      out->code = (int)json_integer_value(code);
    cut_member(out->message, sizeof(out->message), error, "message");
    cut_member(out->status, sizeof(out->status), error, "status");
    errors = json_object_get(error, "errors");
    cut_member(out->reason, sizeof(out->reason),
               json_array_get(errors, 0), "reason");
  }
  /* The most specific word decides: a reason, then a status. */
  if (word_refusal(out->reason) >= 0)
    out->refusal = gce_refusal(out->reason, http_status);
  else
    out->refusal = gce_refusal(out->status, http_status > 0 ? http_status
                                                            : out->code);
  json_decref(root);
}
