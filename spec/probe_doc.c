/*
 * The tenbin-probe document (probe_doc.h): parse, validate and flatten
 * what a probe process reports about its node.  The sender is a job, so
 * a peer tenbind does not trust: every member the schema knows is
 * checked for its type and its limits, and an error names the member by
 * its path ("fingerprint.net[3].kind: ...").  Members the schema does
 * not know are ignored, so a newer probe still talks to an older daemon.
 *
 * The fingerprint is flattened into key/value strings sorted by key
 * (docs/BASELINE.md lists the keys): the form the diff and the drift
 * rules of policies/baseline.h read.  Every key and value is a string of
 * its own, owned by the document.
 */
#include "probe_doc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/jsonx.h"

/* Fixed keys of the flattened fingerprint (gpu.model ... bundle.version),
 * with room to spare; env and net entries come on top. */
#define FIXED_KEYS 24
#define MAX_KV (FIXED_KEYS + PROBE_DOC_MAX_ENV + PROBE_DOC_MAX_NET)
/* A member path in a message: "fingerprint.env." and a whole name fit. */
#define PATH_LEN 160
/* Env names are shell variable names; longer ones are not a setting. */
#define MAX_ENV_NAME 128
#define MAX_NET_NAME 64
#define MAX_NET_STATE 32
/* 2^40 bytes: nccl-tests sizes go to a few GiB; 1 TiB is no message. */
#define MAX_RESULT_BYTES (1LL << 40)
/* Bandwidth in GB/s and time in microseconds above these is no
 * measurement (a day of time; 10^6 GB/s is far past any link). */
#define MAX_GBPS 1e6
#define MAX_TIME_US 864e8
/* 9999-12-31: a later time is a broken clock, not a probe. */
#define MAX_TIME_MS 253402300799999LL
#define MAX_NUMA 4095
#define MAX_MEMORY_MIB (1LL << 30)
#define MAX_ITERS 1000000

struct probe_doc {
  json_t *root;                 /* the document as parsed (owned) */
  const char *host;             /* borrowed from root */
  int64_t time_ms;
  int node_rank;
  int nodes;
  struct probe_doc_kv *kv;      /* owned keys and values */
  size_t nkv;
  enum probe_measured measured;
  const char *reason;           /* borrowed from root, or NULL */
  struct probe_result *results; /* owned */
  size_t nresults;
};


/* NULL-ended lists of the values an enumerated member may take. */
static const char *const sources[] = {"nvml", "nvidia-smi", "none", NULL};
static const char *const classes[] = {"nvlink", "pcie", "single", "unknown",
                                      NULL};
static const char *const net_kinds[] = {"ib", "roce", "efa", "tcp", NULL};
static const char *const interconnects[] = {"ib",  "roce", "efa",
                                            "tcp", "none", NULL};
static const char *const runtimes[] = {"podman", "docker", "enroot",
                                       "unknown", NULL};
/* In enum probe_collective's order. */
static const char *const collectives[PROBE_NCOLLECTIVES + 1] = {
    "all_reduce", "all_gather", "reduce_scatter", NULL};
static const char *const statuses[] = {"done", "skipped", "failed", NULL};
static const char *const checks[] = {"full", "sampled", NULL};

const char *
probe_collective_name(enum probe_collective c)
{
  if ((unsigned)c >= PROBE_NCOLLECTIVES)
    return NULL;
  return collectives[c];
}

/* ---- member access: each names the member's path in its error ---- */

/* "where.key", or "key" at the top level. */
static void
path_of(char *buf, size_t cap, const char *where, const char *key)
{
  snprintf(buf, cap, "%s%s%s", where, where[0] != '\0' ? "." : "", key);
}

/* obj[key], or NULL when absent or JSON null (null means unknown). */
static json_t *
member(const json_t *obj, const char *key)
{
  json_t *v = json_object_get(obj, key);

  return json_is_null(v) ? NULL : v;
}

static int
missing(const char *where, const char *key, struct err *e)
{
  char path[PATH_LEN];

  path_of(path, sizeof(path), where, key);
  return err_set(e, ERR_INVALID, "%s: missing", path);
}

static int
has_control(const char *s, size_t len)
{
  size_t i;

  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];

    if (c < 0x20 || c == 0x7f)
      return 1;
  }
  return 0;
}

/*
 * obj[key] as a string of at most PROBE_DOC_MAX_STRING bytes into *out
 * (borrowed; NULL when absent).  text: a fact shown in a table or a
 * message, so no control characters (a newline could forge a line).
 */
static int
get_str(const json_t *obj, const char *where, const char *key, int required,
        int text, const char **out, struct err *e)
{
  json_t *v = member(obj, key);
  char path[PATH_LEN];
  size_t len;

  *out = NULL;
  if (v == NULL)
    return required ? missing(where, key, e) : 0;
  path_of(path, sizeof(path), where, key);
  if (!json_is_string(v))
    return err_set(e, ERR_INVALID, "%s: must be a string", path);
  len = json_string_length(v);
  if (len > PROBE_DOC_MAX_STRING)
    return err_set(e, ERR_INVALID, "%s: longer than %d bytes", path,
                   PROBE_DOC_MAX_STRING);
  /* jansson refuses \u0000 unless asked, but a NUL would cut the value
   * short everywhere it is used, so check rather than trust. */
  if (strlen(json_string_value(v)) != len)
    return err_set(e, ERR_INVALID, "%s: contains a NUL character", path);
  if (text && has_control(json_string_value(v), len))
    return err_set(e, ERR_INVALID, "%s: contains a control character",
                   path);
  *out = json_string_value(v);
  return 0;
}

/* obj[key] as an integer in [min, max]; *present says whether it was. */
static int
get_int(const json_t *obj, const char *where, const char *key, int required,
        int64_t min, int64_t max, int64_t *out, int *present, struct err *e)
{
  json_t *v = member(obj, key);
  char path[PATH_LEN];
  json_int_t n;

  *present = 0;
  if (v == NULL)
    return required ? missing(where, key, e) : 0;
  path_of(path, sizeof(path), where, key);
  if (!json_is_integer(v))
    return err_set(e, ERR_INVALID, "%s: must be an integer", path);
  n = json_integer_value(v);
  if (n < min || n > max)
    return err_set(e, ERR_INVALID, "%s: %lld is not between %lld and %lld",
                   path, (long long)n, (long long)min, (long long)max);
  *out = n;
  *present = 1;
  return 0;
}

/* obj[key] as a finite number in [0, max]. */
static int
get_num(const json_t *obj, const char *where, const char *key, int required,
        double max, double *out, int *present, struct err *e)
{
  json_t *v = member(obj, key);
  char path[PATH_LEN];
  double d;

  *present = 0;
  if (v == NULL)
    return required ? missing(where, key, e) : 0;
  path_of(path, sizeof(path), where, key);
  if (!json_is_number(v))
    return err_set(e, ERR_INVALID, "%s: must be a number", path);
  d = json_number_value(v);
  if (!isfinite(d))
    return err_set(e, ERR_INVALID, "%s: must be finite", path);
  if (d < 0)
    return err_set(e, ERR_INVALID, "%s: must not be negative", path);
  if (d > max)
    return err_set(e, ERR_INVALID, "%s: %g is more than %g", path, d, max);
  *out = d;
  *present = 1;
  return 0;
}

/* obj[key] as one of names (NULL-ended): its index, or -1 when absent. */
static int
get_enum(const json_t *obj, const char *where, const char *key, int required,
         const char *const *names, int *out, struct err *e)
{
  const char *s;
  char path[PATH_LEN];
  char list[128];
  size_t used = 0;
  int i;
  int rc;

  *out = -1;
  rc = get_str(obj, where, key, required, 0, &s, e);
  if (rc < 0 || s == NULL)
    return rc;
  for (i = 0; names[i] != NULL; i++) {
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  }
  list[0] = '\0';
  for (i = 0; names[i] != NULL && used < sizeof(list); i++) {
    int w = snprintf(list + used, sizeof(list) - used, "%s%s",
                     i > 0 ? ", " : "", names[i]);

    if (w < 0)
      break;
    used += (size_t)w;
  }
  path_of(path, sizeof(path), where, key);
  return err_set(e, ERR_INVALID, "%s: '%.40s' is not one of %s", path, s,
                 list);
}

/* obj[key] as an object or an array (want says which); NULL: absent. */
static int
get_container(const json_t *obj, const char *where, const char *key,
              int required, int want_array, json_t **out, struct err *e)
{
  json_t *v = member(obj, key);
  char path[PATH_LEN];

  *out = NULL;
  if (v == NULL)
    return required ? missing(where, key, e) : 0;
  if (want_array ? !json_is_array(v) : !json_is_object(v)) {
    path_of(path, sizeof(path), where, key);
    return err_set(e, ERR_INVALID, "%s: must be an %s", path,
                   want_array ? "array" : "object");
  }
  *out = v;
  return 0;
}

/* ---- the flattened fingerprint ---- */

struct flat {
  struct probe_doc_kv *kv;
  size_t n;
};

/* Add key -> value (both copied). */
static void
flat_put(struct flat *f, const char *key, const char *value)
{
  /* MAX_KV counts every key the schema allows, so this never trips. */
  if (f->n >= MAX_KV)
    abort();
  f->kv[f->n].key = xstrdup(key);
  f->kv[f->n].value = xstrdup(value);
  f->n++;
}

/* flat_put, but an empty or absent value is an absent fact: no key. */
static void
flat_add(struct flat *f, const char *key, const char *value)
{
  if (value != NULL && value[0] != '\0')
    flat_put(f, key, value);
}

static void
flat_add_int(struct flat *f, const char *key, int64_t v)
{
  char num[24];

  snprintf(num, sizeof(num), "%lld", (long long)v);
  flat_add(f, key, num);
}

/* key = prefix + name, e.g. "env." + "NCCL_IB_HCA"; value may be "". */
static void
flat_put_named(struct flat *f, const char *prefix, const char *name,
               const char *value)
{
  size_t plen = strlen(prefix);
  size_t nlen = strlen(name);
  char *key = xmalloc(plen + nlen + 1);

  memcpy(key, prefix, plen);
  memcpy(key + plen, name, nlen + 1);
  flat_put(f, key, value);
  free(key);
}

static int
kv_cmp(const void *a, const void *b)
{
  const struct probe_doc_kv *x = a;
  const struct probe_doc_kv *y = b;

  return strcmp(x->key, y->key);
}

/* ---- fingerprint members ---- */

static int
parse_gpu(const json_t *fp, struct flat *f, struct err *e)
{
  const char *w = "fingerprint.gpu";
  json_t *gpu;
  const char *s;
  int64_t n;
  int present;
  int which;
  int rc;

  rc = get_container(fp, "fingerprint", "gpu", 0, 0, &gpu, e);
  if (rc < 0 || gpu == NULL)
    return rc;
  rc = get_enum(gpu, w, "source", 0, sources, &which, e);
  if (rc == 0)
    rc = get_str(gpu, w, "reason", 0, 0, &s, e);
  if (rc == 0)
    rc = get_str(gpu, w, "model", 0, 1, &s, e);
  if (rc < 0)
    return rc;
  flat_add(f, "gpu.model", s);
  rc = get_int(gpu, w, "count", 0, 0, PROBE_DOC_MAX_GPUS, &n, &present, e);
  if (rc < 0)
    return rc;
  if (present)
    flat_add_int(f, "gpu.count", n);
  rc = get_int(gpu, w, "memory_mib", 0, 0, MAX_MEMORY_MIB, &n, &present, e);
  if (rc < 0)
    return rc;
  if (present)
    flat_add_int(f, "gpu.memory_mib", n);
  rc = get_str(gpu, w, "driver", 0, 1, &s, e);
  if (rc < 0)
    return rc;
  flat_add(f, "gpu.driver", s);
  return 0;
}

/* cuda and nccl: a few strings each, plus why they are unknown. */
static int
parse_versions(const json_t *fp, struct flat *f, struct err *e)
{
  json_t *o;
  const char *s;
  int rc;

  rc = get_container(fp, "fingerprint", "cuda", 0, 0, &o, e);
  if (rc < 0)
    return rc;
  if (o != NULL) {
    rc = get_str(o, "fingerprint.cuda", "reason", 0, 0, &s, e);
    if (rc == 0)
      rc = get_str(o, "fingerprint.cuda", "runtime", 0, 1, &s, e);
    if (rc < 0)
      return rc;
    flat_add(f, "cuda.runtime", s);
    rc = get_str(o, "fingerprint.cuda", "driver", 0, 1, &s, e);
    if (rc < 0)
      return rc;
    flat_add(f, "cuda.driver", s);
  }
  rc = get_container(fp, "fingerprint", "nccl", 0, 0, &o, e);
  if (rc < 0)
    return rc;
  if (o != NULL) {
    rc = get_str(o, "fingerprint.nccl", "reason", 0, 0, &s, e);
    if (rc == 0)
      rc = get_str(o, "fingerprint.nccl", "version", 0, 1, &s, e);
    if (rc < 0)
      return rc;
    flat_add(f, "nccl.version", s);
  }
  return 0;
}

/* NCCL_* or CUDA_* followed by [A-Z0-9_]+. */
static int
env_name_ok(const char *k)
{
  size_t i;

  if (strncmp(k, "NCCL_", 5) != 0 && strncmp(k, "CUDA_", 5) != 0)
    return 0;
  if (k[5] == '\0')
    return 0;
  for (i = 5; k[i] != '\0'; i++) {
    if (i >= MAX_ENV_NAME)
      return 0;
    if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') ||
          k[i] == '_'))
      return 0;
  }
  return 1;
}

static int
parse_env(const json_t *fp, struct flat *f, struct err *e)
{
  json_t *env;
  const char *name;
  json_t *v;
  int rc;

  rc = get_container(fp, "fingerprint", "env", 0, 0, &env, e);
  if (rc < 0 || env == NULL)
    return rc;
  if (json_object_size(env) > PROBE_DOC_MAX_ENV)
    return err_set(e, ERR_INVALID,
                   "fingerprint.env: %zu variables, at most %d",
                   json_object_size(env), PROBE_DOC_MAX_ENV);
  /* jansson refuses duplicate names at parse time (JSON_REJECT_DUPLICATES
   * in jsonx_parse_object), so each name comes once. */
  json_object_foreach(env, name, v) {
    const char *s;

    if (!env_name_ok(name))
      return err_set(e, ERR_INVALID,
                     "fingerprint.env: name '%.64s' is not NCCL_ or CUDA_ "
                     "followed by [A-Z0-9_]",
                     name);
    rc = get_str(env, "fingerprint.env", name, 1, 1, &s, e);
    if (rc < 0)
      return rc;
    /* A variable set to "" is set: NCCL reads it so (a key, not none). */
    flat_put_named(f, "env.", name, s);
  }
  return 0;
}

/* [A-Za-z0-9._-]{1,max}, with ':' too when colon. */
static int
word_ok(const char *s, size_t max, int colon)
{
  size_t i;

  for (i = 0; s[i] != '\0'; i++) {
    char c = s[i];

    if (i >= max)
      return 0;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
          (colon && c == ':')))
      return 0;
  }
  return i > 0;
}

static int
parse_net(const json_t *fp, struct flat *f, struct err *e)
{
  const char *names[PROBE_DOC_MAX_NET];
  json_t *net;
  size_t i;
  size_t j;
  int rc;

  rc = get_container(fp, "fingerprint", "net", 0, 1, &net, e);
  if (rc < 0 || net == NULL)
    return rc;
  if (json_array_size(net) > PROBE_DOC_MAX_NET)
    return err_set(e, ERR_INVALID, "fingerprint.net: %zu entries, at most %d",
                   json_array_size(net), PROBE_DOC_MAX_NET);
  for (i = 0; i < json_array_size(net); i++) {
    json_t *dev = json_array_get(net, i);
    char where[PATH_LEN];
    char value[64];
    const char *name;
    const char *state;
    double rate;
    int present;
    int kind;

    snprintf(where, sizeof(where), "fingerprint.net[%zu]", i);
    if (!json_is_object(dev))
      return err_set(e, ERR_INVALID, "%s: must be an object", where);
    rc = get_str(dev, where, "name", 1, 1, &name, e);
    if (rc < 0)
      return rc;
    if (!word_ok(name, MAX_NET_NAME, 1))
      return err_set(e, ERR_INVALID,
                     "%s.name: '%.64s' does not match [A-Za-z0-9._:-]{1,64}",
                     where, name);
    for (j = 0; j < i; j++) {
      if (strcmp(names[j], name) == 0)
        return err_set(e, ERR_INVALID,
                       "%s.name: '%s' appears twice in fingerprint.net",
                       where, name);
    }
    names[i] = name;
    rc = get_enum(dev, where, "kind", 1, net_kinds, &kind, e);
    if (rc == 0)
      rc = get_str(dev, where, "state", 1, 1, &state, e);
    if (rc < 0)
      return rc;
    /* The state is a word of the flattened value "ib active 400G". */
    if (!word_ok(state, MAX_NET_STATE, 0))
      return err_set(e, ERR_INVALID,
                     "%s.state: '%.32s' does not match [A-Za-z0-9._-]{1,32}",
                     where, state);
    rc = get_num(dev, where, "rate_gbps", 0, MAX_GBPS, &rate, &present, e);
    if (rc < 0)
      return rc;
    if (present)
      snprintf(value, sizeof(value), "%s %s %.15gG", net_kinds[kind], state,
               rate);
    else
      snprintf(value, sizeof(value), "%s %s", net_kinds[kind], state);
    flat_put_named(f, "net.", name, value);
  }
  return 0;
}

/* topology.matrix rows joined with " / ", topology.numa as "0,0,1". */
static int
parse_topology(const json_t *fp, struct flat *f, struct err *e)
{
  const char *w = "fingerprint.topology";
  json_t *topo;
  json_t *a;
  char *text = NULL;
  size_t used = 0;
  size_t i;
  int which;
  int rc;

  rc = get_container(fp, "fingerprint", "topology", 0, 0, &topo, e);
  if (rc < 0 || topo == NULL)
    return rc;
  rc = get_enum(topo, w, "source", 0, sources, &which, e);
  if (rc == 0)
    rc = get_enum(topo, w, "class", 0, classes, &which, e);
  if (rc < 0)
    return rc;
  if (which >= 0)
    flat_add(f, "topology.class", classes[which]);

  rc = get_container(topo, w, "matrix", 0, 1, &a, e);
  if (rc < 0)
    return rc;
  if (a != NULL && json_array_size(a) > PROBE_DOC_MAX_GPUS)
    return err_set(e, ERR_INVALID,
                   "%s.matrix: %zu rows, at most %d", w, json_array_size(a),
                   PROBE_DOC_MAX_GPUS);
  if (a != NULL && json_array_size(a) > 0) {
    /* Each row at most PROBE_DOC_MAX_STRING plus " / " between. */
    text = xmalloc(json_array_size(a) * (PROBE_DOC_MAX_STRING + 3) + 1);
    for (i = 0; i < json_array_size(a); i++) {
      json_t *row = json_array_get(a, i);
      size_t len = json_string_length(row); /* 0 for a non-string */

      if (!json_is_string(row) || len > PROBE_DOC_MAX_STRING ||
          strlen(json_string_value(row)) != len ||
          has_control(json_string_value(row), len)) {
        rc = err_set(e, ERR_INVALID,
                     "%s.matrix[%zu]: must be a string of at most %d "
                     "bytes without control characters",
                     w, i, PROBE_DOC_MAX_STRING);
        goto out;
      }
      if (i > 0) {
        memcpy(text + used, " / ", 3);
        used += 3;
      }
      memcpy(text + used, json_string_value(row), len);
      used += len;
    }
    text[used] = '\0';
    flat_add(f, "topology.matrix", text);
  }

  rc = get_container(topo, w, "numa", 0, 1, &a, e);
  if (rc < 0)
    goto out;
  if (a != NULL && json_array_size(a) > PROBE_DOC_MAX_GPUS) {
    rc = err_set(e, ERR_INVALID, "%s.numa: %zu entries, at most %d", w,
                 json_array_size(a), PROBE_DOC_MAX_GPUS);
    goto out;
  }
  if (a != NULL && json_array_size(a) > 0) {
    /* At most 64 entries of "-1" to "4095" and a comma each. */
    char list[PROBE_DOC_MAX_GPUS * 6 + 1];

    used = 0;
    for (i = 0; i < json_array_size(a); i++) {
      json_t *v = json_array_get(a, i);
      json_int_t n = json_integer_value(v); /* 0 for a non-integer */

      if (!json_is_integer(v) || n < -1 || n > MAX_NUMA) {
        rc = err_set(e, ERR_INVALID,
                     "%s.numa[%zu]: must be an integer from -1 to %d", w, i,
                     MAX_NUMA);
        goto out;
      }
      used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%lld",
                               i > 0 ? "," : "", (long long)n);
    }
    flat_add(f, "topology.numa", list);
  }
  rc = 0;

out:
  free(text);
  return rc;
}

/* os, kernel, interconnect, container and bundle. */
static int
parse_system(const json_t *fp, struct flat *f, struct err *e)
{
  const char *w = "fingerprint";
  json_t *o;
  const char *s;
  const char *digest;
  int which;
  int rc;

  rc = get_enum(fp, w, "interconnect", 0, interconnects, &which, e);
  if (rc < 0)
    return rc;
  if (which >= 0)
    flat_add(f, "interconnect", interconnects[which]);
  rc = get_str(fp, w, "kernel", 0, 1, &s, e);
  if (rc < 0)
    return rc;
  flat_add(f, "kernel", s);
  rc = get_str(fp, w, "os", 0, 1, &s, e);
  if (rc < 0)
    return rc;
  flat_add(f, "os", s);

  rc = get_container(fp, w, "container", 0, 0, &o, e);
  if (rc < 0)
    return rc;
  if (o != NULL) {
    rc = get_enum(o, "fingerprint.container", "runtime", 0, runtimes, &which,
                  e);
    if (rc == 0)
      rc = get_str(o, "fingerprint.container", "image", 0, 1, &s, e);
    if (rc == 0)
      rc = get_str(o, "fingerprint.container", "image_digest", 0, 1, &digest,
                   e);
    if (rc < 0)
      return rc;
    /* The digest names the bits; a tag can move. */
    if (digest != NULL && digest[0] != '\0')
      flat_add(f, "container.image_digest", digest);
    else
      flat_add(f, "container.image", s);
  }

  rc = get_container(fp, w, "bundle", 0, 0, &o, e);
  if (rc < 0)
    return rc;
  if (o != NULL) {
    rc = get_str(o, "fingerprint.bundle", "dir", 0, 0, &s, e);
    if (rc == 0)
      rc = get_str(o, "fingerprint.bundle", "version", 0, 1, &s, e);
    if (rc < 0)
      return rc;
    flat_add(f, "bundle.version", s);
  }
  return 0;
}

static int
parse_fingerprint(struct probe_doc *d, struct err *e)
{
  struct flat f;
  json_t *fp;
  size_t i;
  int rc;

  rc = get_container(d->root, "", "fingerprint", 1, 0, &fp, e);
  if (rc < 0)
    return rc;
  d->kv = xcalloc(MAX_KV, sizeof(*d->kv));
  f.kv = d->kv;
  f.n = 0;
  rc = parse_gpu(fp, &f, e);
  if (rc == 0)
    rc = parse_versions(fp, &f, e);
  if (rc == 0)
    rc = parse_env(fp, &f, e);
  if (rc == 0)
    rc = parse_topology(fp, &f, e);
  if (rc == 0)
    rc = parse_net(fp, &f, e);
  if (rc == 0)
    rc = parse_system(fp, &f, e);
  d->nkv = f.n; /* so that probe_doc_free frees what was added */
  if (rc < 0)
    return rc;
  qsort(d->kv, d->nkv, sizeof(*d->kv), kv_cmp);
  /* Keys come from distinct members and distinct names, so a repeat is
   * a bug here, but the rules rely on unique keys: check. */
  for (i = 1; i < d->nkv; i++) {
    if (strcmp(d->kv[i - 1].key, d->kv[i].key) == 0)
      return err_set(e, ERR_INVALID, "fingerprint: key '%.64s' twice",
                     d->kv[i].key);
  }
  return 0;
}

/* ---- measurement ---- */

static int
parse_result(const json_t *r, const char *where, struct probe_result *out,
             struct err *e)
{
  int64_t bytes;
  int present;
  int which;
  json_t *v;
  int rc;

  if (!json_is_object(r))
    return err_set(e, ERR_INVALID, "%s: must be an object", where);
  rc = get_enum(r, where, "collective", 1, collectives, &which, e);
  if (rc < 0)
    return rc;
  out->collective = (enum probe_collective)which;
  rc = get_int(r, where, "bytes", 1, 1, MAX_RESULT_BYTES, &bytes, &present,
               e);
  if (rc == 0)
    rc = get_num(r, where, "time_us", 1, MAX_TIME_US, &out->time_us,
                 &present, e);
  if (rc == 0)
    rc = get_num(r, where, "algbw_gbps", 1, MAX_GBPS, &out->algbw_gbps,
                 &present, e);
  if (rc == 0)
    rc = get_num(r, where, "busbw_gbps", 1, MAX_GBPS, &out->busbw_gbps,
                 &present, e);
  if (rc == 0)
    rc = get_enum(r, where, "check", 0, checks, &which, e);
  if (rc < 0)
    return rc;
  out->bytes = bytes;
  out->sampled = which == 1;
  v = member(r, "correct");
  if (v == NULL)
    return missing(where, "correct", e);
  if (!json_is_boolean(v))
    return err_set(e, ERR_INVALID, "%s.correct: must be a boolean", where);
  out->correct = json_is_true(v);
  return 0;
}

static int
parse_measurement(struct probe_doc *d, struct err *e)
{
  const char *w = "measurement";
  json_t *m;
  json_t *results;
  const char *s;
  int64_t n;
  int present;
  int which;
  size_t i;
  size_t j;
  int rc;

  rc = get_container(d->root, "", "measurement", 1, 0, &m, e);
  if (rc == 0)
    rc = get_enum(m, w, "status", 1, statuses, &which, e);
  if (rc < 0)
    return rc;
  d->measured = (enum probe_measured)which;
  rc = get_str(m, w, "reason", 0, 0, &d->reason, e);
  if (rc == 0)
    rc = get_int(m, w, "ranks", 0, 1,
                 (int64_t)PROBE_DOC_MAX_NODES * PROBE_DOC_MAX_GPUS, &n,
                 &present, e);
  if (rc == 0)
    rc = get_int(m, w, "nodes", 0, 1, PROBE_DOC_MAX_NODES, &n, &present, e);
  if (rc == 0)
    rc = get_int(m, w, "gpus_per_node", 0, 0, PROBE_DOC_MAX_GPUS, &n,
                 &present, e);
  if (rc == 0)
    rc = get_str(m, w, "dtype", 0, 1, &s, e);
  if (rc == 0)
    rc = get_int(m, w, "iters", 0, 0, MAX_ITERS, &n, &present, e);
  if (rc == 0)
    rc = get_int(m, w, "warmup", 0, 0, MAX_ITERS, &n, &present, e);
  if (rc == 0)
    rc = get_container(m, w, "results", 0, 1, &results, e);
  if (rc < 0 || results == NULL)
    return rc;
  if (json_array_size(results) > PROBE_DOC_MAX_RESULTS)
    return err_set(e, ERR_INVALID, "measurement.results: %zu entries, at "
                   "most %d", json_array_size(results),
                   PROBE_DOC_MAX_RESULTS);
  d->results = xcalloc(json_array_size(results) + 1, sizeof(*d->results));
  for (i = 0; i < json_array_size(results); i++) {
    struct probe_result *r = &d->results[i];
    char where[PATH_LEN];

    snprintf(where, sizeof(where), "measurement.results[%zu]", i);
    rc = parse_result(json_array_get(results, i), where, r, e);
    if (rc < 0)
      return rc;
    /* One line per collective and size, as nccl-tests prints: a repeat
     * would make the comparison by size ambiguous. */
    for (j = 0; j < i; j++) {
      if (d->results[j].collective == r->collective &&
          d->results[j].bytes == r->bytes)
        return err_set(e, ERR_INVALID,
                       "%s: %s at %lld bytes repeats results[%zu]", where,
                       collectives[r->collective], (long long)r->bytes,
                       j);
    }
    d->nresults = i + 1;
  }
  return 0;
}

/* schema, host, time, node rank and count. */
static int
parse_header(struct probe_doc *d, struct err *e)
{
  const char *schema;
  const char *version;
  int64_t n;
  int present;
  int rc;

  rc = get_str(d->root, "", "schema", 1, 0, &schema, e);
  if (rc < 0)
    return rc;
  if (strcmp(schema, PROBE_DOC_SCHEMA) != 0)
    return err_set(e, ERR_INVALID, "schema: '%.40s' is not '%s'", schema,
                   PROBE_DOC_SCHEMA);
  rc = get_str(d->root, "", "probe_version", 0, 1, &version, e);
  if (rc == 0)
    rc = get_str(d->root, "", "host", 1, 1, &d->host, e);
  if (rc < 0)
    return rc;
  if (d->host[0] == '\0')
    return err_set(e, ERR_INVALID, "host: must not be empty");
  rc = get_int(d->root, "", "time_ms", 1, 0, MAX_TIME_MS, &d->time_ms,
               &present, e);
  if (rc < 0)
    return rc;
  d->nodes = 1;
  rc = get_int(d->root, "", "nodes", 0, 1, PROBE_DOC_MAX_NODES, &n, &present,
               e);
  if (rc < 0)
    return rc;
  if (present)
    d->nodes = (int)n;
  rc = get_int(d->root, "", "node_rank", 0, 0, PROBE_DOC_MAX_NODES - 1, &n,
               &present, e);
  if (rc < 0)
    return rc;
  if (present)
    d->node_rank = (int)n;
  if (d->node_rank >= d->nodes)
    return err_set(e, ERR_INVALID, "node_rank: %d is not below nodes (%d)",
                   d->node_rank, d->nodes);
  return 0;
}

int
probe_doc_parse(const char *text, size_t len, struct probe_doc **out,
                struct err *e)
{
  struct probe_doc *d = NULL;
  int rc;

  *out = NULL;
  if (len > PROBE_DOC_MAX_BYTES)
    return err_set(e, ERR_TOO_LARGE,
                   "probe document of %zu bytes, at most %d", len,
                   PROBE_DOC_MAX_BYTES);
  d = xcalloc(1, sizeof(*d));
  /* jansson refuses invalid UTF-8 and duplicate member names. */
  rc = jsonx_parse_object(text, len, &d->root, e);
  if (rc < 0) {
    err_prefix(e, "probe document");
    goto out;
  }
  rc = parse_header(d, e);
  if (rc == 0)
    rc = parse_fingerprint(d, e);
  if (rc == 0)
    rc = parse_measurement(d, e);
  if (rc < 0)
    goto out;
  *out = d;
  d = NULL;

out:
  probe_doc_free(d);
  return rc;
}

void
probe_doc_free(struct probe_doc *d)
{
  size_t i;

  if (d == NULL)
    return;
  for (i = 0; i < d->nkv; i++) {
    free((char *)d->kv[i].key);
    free((char *)d->kv[i].value);
  }
  free(d->kv);
  free(d->results);
  json_decref(d->root);
  free(d);
}

/* ---- accessors ---- */

const json_t *
probe_doc_json(const struct probe_doc *d)
{
  return d->root;
}

const char *
probe_doc_host(const struct probe_doc *d)
{
  return d->host;
}

int
probe_doc_node_rank(const struct probe_doc *d)
{
  return d->node_rank;
}

int
probe_doc_nodes(const struct probe_doc *d)
{
  return d->nodes;
}

int64_t
probe_doc_time_ms(const struct probe_doc *d)
{
  return d->time_ms;
}

const struct probe_doc_kv *
probe_doc_kv(const struct probe_doc *d, size_t *n)
{
  *n = d->nkv;
  return d->kv;
}

const char *
probe_doc_get(const struct probe_doc *d, const char *key)
{
  struct probe_doc_kv k = {key, NULL};
  const struct probe_doc_kv *hit;

  if (d->nkv == 0)
    return NULL;
  hit = bsearch(&k, d->kv, d->nkv, sizeof(*d->kv), kv_cmp);
  return hit != NULL ? hit->value : NULL;
}

enum probe_measured
probe_doc_measured(const struct probe_doc *d)
{
  return d->measured;
}

const char *
probe_doc_reason(const struct probe_doc *d)
{
  return d->measured == PROBE_MEASURE_DONE ? NULL : d->reason;
}

const struct probe_result *
probe_doc_results(const struct probe_doc *d, size_t *n)
{
  *n = d->nresults;
  return d->results;
}
