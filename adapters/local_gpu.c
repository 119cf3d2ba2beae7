/*
 * The local site's GPU inventory: which GPUs exist (from `nvidia-smi -L`
 * or declared as fakes in the config), which job holds each, and the
 * assignment rule (a job's GPUs are of one type, lowest free indices
 * first, never more than exist).
 */
#include "local_int.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/jobspec.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/proc.h"

/* nvidia-smi hangs on some broken drivers; tenbind must still start. */
#define SMI_TIMEOUT_MS 10000
#define SMI_OUTPUT_MAX (256u << 10)

void
adapter_local__inventory_init(struct local_inventory *inv)
{
  memset(inv, 0, sizeof(*inv));
}

void
adapter_local__inventory_release(struct local_inventory *inv)
{
  if (inv == NULL)
    return;
  free(inv->gpus);
  adapter_local__inventory_init(inv);
}

static int
find_pool(const struct local_inventory *inv, const char *type)
{
  for (int i = 0; i < inv->npools; i++) {
    if (strcmp(inv->types[i], type) == 0)
      return i;
  }
  return -1;
}

static int
add_gpu(struct local_inventory *inv, int index, const char *type,
        struct err *e)
{
  int pool = find_pool(inv, type);

  if (pool < 0) {
    if (inv->npools == ADAPTER_MAX_POOLS)
      return err_set(e, ERR_CONFIG, "more than %d GPU types",
                     ADAPTER_MAX_POOLS);
    pool = inv->npools++;
    snprintf(inv->types[pool], sizeof(inv->types[pool]), "%s", type);
  }
  if (inv->ngpus >= JOBSPEC_MAX_GPUS)
    return err_set(e, ERR_CONFIG, "more than %d GPUs", JOBSPEC_MAX_GPUS);
  for (size_t i = 0; i < inv->ngpus; i++) {
    if (inv->gpus[i].index == index)
      return err_set(e, ERR_CONFIG, "GPU index %d appears twice", index);
  }
  inv->gpus = xrealloc(inv->gpus, (inv->ngpus + 1) * sizeof(*inv->gpus));
  inv->gpus[inv->ngpus].index = index;
  inv->gpus[inv->ngpus].pool = pool;
  inv->gpus[inv->ngpus].owner = 0;
  inv->ngpus++;
  return 0;
}

static int
cmp_gpu(const void *a, const void *b)
{
  const struct local_gpu *x = a;
  const struct local_gpu *y = b;

  return (x->index > y->index) - (x->index < y->index);
}

/* Model tokens that name a GPU type on their own ("A100" in
 * "NVIDIA A100-SXM4-80GB"). */
static const char *const known_models[] = {
    "gb200", "b200", "b100", "gh200", "h200", "h100", "h800", "h20",
    "a100",  "a800", "a40",  "a30",   "a16",  "a10g", "a10",  "a2",
    "l40s",  "l40",  "l4",   "t4",    "v100", "p100", "p40",  "p4",
    "k80",   "m60",  NULL};

static int
is_known_model(const char *tok)
{
  for (int i = 0; known_models[i] != NULL; i++) {
    if (strcmp(known_models[i], tok) == 0)
      return 1;
  }
  return 0;
}

void
adapter_local__gpu_type(const char *model, char *out, size_t outlen)
{
  char tok[64];
  size_t used = 0;
  const char *p = model;

  out[0] = '\0';
  while (*p != '\0') {
    size_t n = 0;

    while (*p == ' ' || *p == '-' || *p == '\t')
      p++;
    if (*p == '\0')
      break;
    /* Keep [a-z0-9] of the word, lowercased: the type is used in
     * configs, URLs and environment variables. */
    while (*p != '\0' && *p != ' ' && *p != '-' && *p != '\t') {
      unsigned char c = (unsigned char)tolower((unsigned char)*p++);

      if (n + 1 < sizeof(tok) && (isdigit(c) || (c >= 'a' && c <= 'z')))
        tok[n++] = (char)c;
    }
    tok[n] = '\0';
    if (n == 0)
      continue;
    if (is_known_model(tok)) {
      snprintf(out, outlen, "%s", tok);
      return;
    }
    /* The vendor names nothing. */
    if (strcmp(tok, "nvidia") == 0 || strcmp(tok, "tesla") == 0)
      continue;
    if (used > 0 && used + 1 < outlen)
      out[used++] = '-';
    for (size_t i = 0; i < n && used + 1 < outlen; i++)
      out[used++] = tok[i];
    out[used] = '\0';
  }
  if (used == 0)
    snprintf(out, outlen, "gpu");
}

int
adapter_local__inventory_parse_smi(struct local_inventory *inv,
                                   const char *text, struct err *e)
{
  const char *line = text;

  while (line != NULL && *line != '\0') {
    const char *nl = strchr(line, '\n');
    size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
    char *copy = xstrndup(line, len);
    char type[ADAPTER_GPU_TYPE_LEN];
    char *end;
    char *model;
    char *uuid;
    long index;
    int rc;

    line = nl != NULL ? nl + 1 : NULL;
    /* "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; MIG devices are
     * indented lines under their GPU and are not scheduled here. */
    if (strncmp(copy, "GPU ", 4) != 0) {
      free(copy);
      continue;
    }
    errno = 0;
    index = strtol(copy + 4, &end, 10);
    if (errno != 0 || end == copy + 4 || *end != ':' || index < 0 ||
        index > 65535) {
      free(copy);
      continue;
    }
    model = end + 1;
    uuid = strstr(model, " (UUID");
    if (uuid != NULL)
      *uuid = '\0';
    adapter_local__gpu_type(model, type, sizeof(type));
    rc = add_gpu(inv, (int)index, type, e);
    free(copy);
    if (rc < 0)
      return rc;
  }
  qsort(inv->gpus, inv->ngpus, sizeof(*inv->gpus), cmp_gpu);
  return 0;
}

static int
detect(struct local_inventory *inv, struct err *e)
{
  char *const argv[] = {(char *)"nvidia-smi", (char *)"-L", NULL};
  char exe[PATH_MAX];
  char *text = NULL;
  struct err se = {0};
  int rc = 0;

  if (proc_find(getenv("PATH"), "nvidia-smi", exe, sizeof(exe)) < 0) {
    log_info("local site: nvidia-smi is not on PATH, no GPUs");
    snprintf(inv->none_why, sizeof(inv->none_why),
             "nvidia-smi is not on PATH");
    return 0;
  }
  /* A GPU host with a broken driver still runs CPU jobs: warn, go on. */
  if (proc_capture(exe, argv, NULL, SMI_TIMEOUT_MS, SMI_OUTPUT_MAX, &text,
                   &se) < 0) {
    log_warn("local site: no GPUs: %s", err_msg(&se));
    snprintf(inv->none_why, sizeof(inv->none_why), "%.127s",
             err_msg(&se));
    goto out;
  }
  rc = adapter_local__inventory_parse_smi(inv, text, e);
  if (rc < 0)
    goto out;
  log_info("local site: %zu GPUs found by %s", inv->ngpus, exe);
out:
  free(text);
  return rc;
}

static int
valid_type_name(const char *s)
{
  size_t n = strlen(s);

  if (n == 0 || n >= ADAPTER_GPU_TYPE_LEN)
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];

    if (!((c >= 'a' && c <= 'z') || isdigit(c) || c == '-' || c == '_' ||
          c == '.'))
      return 0;
  }
  return 1;
}

int
adapter_local__inventory_configure(struct local_inventory *inv,
                                   const json_t *gpus, int first,
                                   struct err *e)
{
  const char *type;
  json_t *v;
  int next = first;

  if (gpus == NULL || json_is_null(gpus))
    return detect(inv, e);
  if (json_is_string(gpus)) {
    if (strcmp(json_string_value(gpus), "auto") == 0)
      return detect(inv, e);
    return err_set(e, ERR_CONFIG,
                   "field 'gpus' must be \"auto\" or an object of counts "
                   "such as {\"h100\": 8}");
  }
  if (!json_is_object(gpus))
    return err_set(e, ERR_CONFIG,
                   "field 'gpus' must be \"auto\" or an object of counts "
                   "such as {\"h100\": 8}");
  json_object_foreach((json_t *)gpus, type, v) {
    json_int_t n;
    int rc;

    if (!valid_type_name(type))
      return err_set(e, ERR_CONFIG,
                     "field 'gpus.%.64s': a GPU type is 1 to %d characters "
                     "of a-z, 0-9, '-', '_' and '.'",
                     type, ADAPTER_GPU_TYPE_LEN - 1);
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > JOBSPEC_MAX_GPUS)
      return err_set(e, ERR_CONFIG,
                     "field 'gpus.%s' must be an integer between 0 and %d",
                     type, JOBSPEC_MAX_GPUS);
    n = json_integer_value(v);
    for (json_int_t i = 0; i < n; i++) {
      rc = add_gpu(inv, next++, type, e);
      if (rc < 0) {
        err_prefix(e, "field 'gpus'");
        return rc;
      }
    }
  }
  return 0;
}

static void
pool_counts(const struct local_inventory *inv, int pool, int64_t *total,
            int64_t *free_)
{
  *total = 0;
  *free_ = 0;
  for (size_t i = 0; i < inv->ngpus; i++) {
    if (inv->gpus[i].pool != pool)
      continue;
    (*total)++;
    if (inv->gpus[i].owner == 0)
      (*free_)++;
  }
}

int
adapter_local__inventory_take(struct local_inventory *inv, int64_t job_id,
                              const char *type, int64_t n, char **alloc,
                              const char **type_out, struct err *e)
{
  struct buf b;
  int64_t total;
  int64_t free_;
  int64_t largest = 0;
  int pool = -1;
  int64_t left;

  if (n < 0)
    return err_set(e, ERR_INVALID, "a job cannot ask for %lld GPUs",
                   (long long)n);
  if (n == 0) {
    *alloc = xstrdup("");
    *type_out = NULL;
    return 0;
  }
  if (type != NULL) {
    pool = find_pool(inv, type);
    if (pool < 0)
      return err_set(e, ERR_UNPROCESSABLE, "the site has no '%s' GPUs",
                     type);
    pool_counts(inv, pool, &total, &free_);
    if (total < n)
      return err_set(e, ERR_UNPROCESSABLE,
                     "the job asks for %lld '%s' GPUs, the site has %lld",
                     (long long)n, type, (long long)total);
    if (free_ < n)
      return err_set(e, ERR_UNAVAILABLE,
                     "%lld of %lld '%s' GPUs are free, the job needs %lld",
                     (long long)free_, (long long)total, type, (long long)n);
  } else {
    /* Any type, but one type per job: the first pool with room. */
    for (int i = 0; i < inv->npools && pool < 0; i++) {
      pool_counts(inv, i, &total, &free_);
      if (total > largest)
        largest = total;
      if (free_ >= n)
        pool = i;
    }
    if (pool < 0 && largest < n)
      return err_set(e, ERR_UNPROCESSABLE,
                     "the job asks for %lld GPUs of one type, the site has "
                     "at most %lld",
                     (long long)n, (long long)largest);
    if (pool < 0)
      return err_set(e, ERR_UNAVAILABLE,
                     "no GPU type has %lld free GPUs right now",
                     (long long)n);
  }
  /* At most JOBSPEC_MAX_GPUS indices of a few digits each. */
  buf_init(&b, 64u << 10);
  left = n;
  for (size_t i = 0; i < inv->ngpus && left > 0; i++) {
    struct local_gpu *g = &inv->gpus[i];

    if (g->pool != pool || g->owner != 0)
      continue;
    g->owner = job_id;
    left--;
    if (buf_addf(&b, "%s%d", b.len > 0 ? "," : "", g->index) < 0)
      abort();
  }
  *alloc = buf_take(&b, NULL);
  *type_out = inv->types[pool];
  return 0;
}

int
adapter_local__inventory_claim(struct local_inventory *inv, int64_t job_id,
                               const char *alloc)
{
  const char *p = alloc;
  int missed = 0;

  while (p != NULL && *p != '\0') {
    char *end;
    long index;
    int found = 0;

    errno = 0;
    index = strtol(p, &end, 10);
    if (errno != 0 || end == p)
      return missed + 1;
    for (size_t i = 0; i < inv->ngpus; i++) {
      struct local_gpu *g = &inv->gpus[i];

      if (g->index != index)
        continue;
      if (g->owner == 0 || g->owner == job_id) {
        g->owner = job_id;
        found = 1;
      }
      break;
    }
    if (!found)
      missed++;
    p = *end == ',' ? end + 1 : NULL;
  }
  return missed;
}

void
adapter_local__inventory_put(struct local_inventory *inv, int64_t job_id)
{
  for (size_t i = 0; i < inv->ngpus; i++) {
    if (inv->gpus[i].owner == job_id)
      inv->gpus[i].owner = 0;
  }
}

void
adapter_local__inventory_capacity(const struct local_inventory *inv,
                                  struct adapter_capacity *out)
{
  /* Why a GPU request can never run here (placement says it). */
  if (inv->ngpus == 0 && inv->none_why[0] != '\0')
    snprintf(out->detail, sizeof(out->detail), "%s", inv->none_why);
  out->npools = inv->npools;
  for (int i = 0; i < inv->npools; i++) {
    struct adapter_gpu_pool *p = &out->pools[i];
    int64_t free_;

    snprintf(p->type, sizeof(p->type), "%s", inv->types[i]);
    pool_counts(inv, i, &p->total, &free_);
    p->in_use = p->total - free_;
    /* One node: all of a type are on it. */
    p->per_node = p->total;
  }
}
