/*
 * The cloud block of a slurm site: the cluster's VMs as billed nodes
 * (slurm_cloud.h).
 *
 * Every reconcile_s the provider lists the VMs tagged with the
 * cluster's tag.  A VM seen for the first time becomes a node in the
 * store (its id, instance type, zone, launch time); a node whose VM is
 * stopped, or missing from two listings in a row (a listing may lag a
 * launch or a termination), ends at the first listing that missed it.
 * A VM is a Slurm node when the value of its node_tag names one, or,
 * without node_tag, when its private address is the node's NodeAddr (as
 * ParallelCluster sets it) or its name is the node's (a GCE or Azure VM
 * named after its node); its GPUs are that node's.  A VM that is no
 * Slurm node (the head node, a login node) is listed with 0 GPUs: it
 * bills no GPU-hour.
 *
 * Billing follows cloud.c: a node's GPUs that no Slurm job holds are
 * billed idle piece by piece, a piece ending whenever that count
 * changes, and tenbin's own jobs are billed by their holds.  The times
 * are Slurm's (a job's start and end from the jobs listing, the same
 * the holds use), so a job's hold and the idle pieces around it meet,
 * but for the broker's rule that a job starts no earlier than it was
 * submitted: Slurm's whole seconds can put a start up to a second before
 * it, and that sliver is billed to no one.  A listing settles the node's past only up to the
 * second its request left in: a job that started after the snapshot
 * has a start time of that second or later.  Each piece is billed with
 * the node's record in one transaction, so a restart resumes from the
 * stored idle_from_ms and bills no piece twice.
 *
 * The providers: aws (EC2's tag filter; the private address is in the
 * listing), gcp (instances.list with a label filter in each of the
 * block's zones; labels are lowercase by Google's rules, and so are the
 * block's tag and node_tag; the address is the first interface's
 * networkIP) and azure (the resource group's VMs, filtered here by tag;
 * the address is the NIC's, another call per VM, so it is not read and
 * a VM is its Slurm node by node_tag or by its name).
 */
#include "adapters/slurm_cloud.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud_int.h"
#include "adapters/config_fields.h"
#include "adapters/gce.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

#define DEFAULT_RECONCILE_S 60
#define MAX_RECONCILE_S 86400
#define MAX_VMS 4096         /* VMs of one cluster followed */
#define MAX_SPANS 512        /* jobs on one node one listing weighs */
#define GONE_AFTER 2         /* listings in a row without the VM */
#define TAG_KEY_MAX 128      /* AWS's bounds; GCP's are narrower, Azure's
                                name may be longer, which no cluster
                                manager's tag is */
#define TAG_VALUE_MAX 255
#define NEVER INT64_MAX

/* A VM of the cluster, while it lives. */
struct vnode {
  int64_t id;                          /* the store's */
  char vm_id[CLOUD_ID_LEN];
  char shape[CLOUD_NAME_LEN];          /* instance type */
  char zone[CLOUD_NAME_LEN];
  int spot;
  char tag_name[CLOUD_NAME_LEN];       /* node_tag's value, newest */
  char address[CLOUD_ADDR_LEN];        /* private address, newest */
  char slurm[SLURM_NODE_NAME_LEN];     /* the Slurm node it is, or "" */
  char gpu_type[ADAPTER_GPU_TYPE_LEN];
  int64_t gpus;                        /* 0 until it is a Slurm node */
  int64_t busy;                        /* GPUs Slurm's jobs hold */
  int64_t created_ms, launched_ms, seen_ms, ended_ms;
  int64_t idle_gpus, idle_from_ms;
  int64_t gone_ms;                     /* first listing that missed it */
  int missed;                          /* listings in a row that did */
  int listed;                          /* in the listing being read */
  char reason[160];
};

/* When a job was first seen started.  Slurm moves a job's start_time to
 * when its powered-down node has booted (so that the boot does not eat
 * its time limit); the job holds the GPUs from its allocation, and its
 * hold in tenbin's ledger starts there too. */
struct first_start {
  int64_t slurm_id;
  int64_t ms;
};

struct slurm_cloud {
  uv_loop_t *loop;
  char *site;
  const struct adapter_node_store *store;
  void *store_arg;
  int64_t (*now)(void);
  const struct cloud_provider *prov;
  void *pctx;
  char *key, *value;                   /* the cluster's tag */
  char *node_tag;                      /* or NULL: match by address */
  int64_t reconcile_ms;
  uv_timer_t timer;
  int listing;                         /* a listing is in flight */

  struct vnode *v;                     /* live nodes */
  size_t n, cap;
  struct slurm_node *snodes;           /* the newest nodes answer */
  size_t nsnodes;
  struct first_start *starts;          /* of the newest listing's jobs */
  size_t nstarts;
  char detail[192];

  int closing;
  int handles;                         /* parts still closing */
  void (*close_cb)(void *arg);
  void *close_arg;
};

/* The block's fields: its own, and the connection's of its kind, as a
 * site of that kind has them (gcp's zones too: GCE lists a zone at a
 * time). */
#define BLOCK_FIELDS                                                     \
  {"kind", JX_STRING}, {"tag", JX_OBJECT}, {"node_tag", JX_STRING},      \
      {"reconcile_s", JX_INT}, {"endpoint", JX_STRING},                  \
      {"ca_file", JX_STRING}

const struct jsonx_field adapter_slurm_cloud_aws_fields[] = {
    BLOCK_FIELDS, {"region", JX_STRING}, {"credentials", JX_OBJECT},
    {NULL, 0}};

const struct jsonx_field adapter_slurm_cloud_gcp_fields[] = {
    BLOCK_FIELDS,           {"project", JX_STRING},
    {"region", JX_STRING},  {"zones", JX_ARRAY},
    {"credentials_file", JX_STRING}, {NULL, 0}};

const struct jsonx_field adapter_slurm_cloud_azure_fields[] = {
    BLOCK_FIELDS, {"subscription", JX_STRING},
    {"resource_group", JX_STRING}, {"credentials", JX_OBJECT},
    {"login_endpoint", JX_STRING}, {NULL, 0}};

/* What a tag name or value may be on a provider: 1 when s is fine. */
typedef int (*tag_rule_fn)(const char *s, int key);

/* AWS: any printable text (the lengths are checked before). */
static int
aws_tag_ok(const char *s, int key)
{
  (void)key;
  for (const char *p = s; *p != '\0'; p++) {
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return 0;
  }
  return 1;
}

/* Azure: a name has none of < > % & \ ? /; a value is printable. */
static int
azure_tag_ok(const char *s, int key)
{
  return aws_tag_ok(s, key) && (!key || strpbrk(s, "<>%&\\?/") == NULL);
}

/* One kind of block: its fields, its tags' rule and its provider. */
struct block_kind {
  const char *kind;
  const struct jsonx_field *fields;
  tag_rule_fn tag_ok;
  const char *key_rule;   /* what tag_ok asks of a name, said */
  const char *value_rule; /* ... of a value */
  const struct cloud_provider *prov;
};

static const struct block_kind kinds[] = {
    {"aws", adapter_slurm_cloud_aws_fields, aws_tag_ok, "no control characters",
     "no control characters", &cloud_aws_provider},
    {"gcp", adapter_slurm_cloud_gcp_fields, gce_label_ok,
     "a GCE label key: 1-63 of a-z, 0-9, '_' and '-', starting with a "
     "lowercase letter",
     "a GCE label value: 0-63 of a-z, 0-9, '_' and '-' (lowercase)",
     &cloud_gcp_provider},
    {"azure", adapter_slurm_cloud_azure_fields, azure_tag_ok,
     "an Azure tag name: none of < > % & \\ ? / or control characters",
     "no control characters", &cloud_azure_provider},
};

static const struct block_kind *
kind_of(const char *kind)
{
  for (size_t i = 0; kind != NULL && i < sizeof(kinds) / sizeof(kinds[0]);
       i++) {
    if (strcmp(kinds[i].kind, kind) == 0)
      return &kinds[i];
  }
  return NULL;
}

const struct jsonx_field adapter_slurm_cloud_tag_fields[] = {
    {"key", JX_STRING}, {"value", JX_STRING}, {NULL, 0}};

/* ---- the store ---- */

static void
node_view(const struct vnode *v, struct adapter_node *n)
{
  memset(n, 0, sizeof(*n));
  n->id = v->id;
  n->shape = v->shape;
  n->zone = v->zone;
  n->spot = v->spot;
  n->state = v->ended_ms > 0 ? "ended" : v->busy > 0 ? "busy" : "idle";
  n->vm_id = v->vm_id;
  n->gpus = v->gpus;
  n->gpu_type = v->gpu_type[0] != '\0' ? v->gpu_type : NULL;
  n->created_ms = v->created_ms;
  n->launched_ms = v->launched_ms;
  n->seen_ms = v->seen_ms;
  n->ended_ms = v->ended_ms;
  n->reason = v->reason[0] != '\0' ? v->reason : NULL;
  n->idle_gpus = v->idle_gpus;
  n->idle_from_ms = v->idle_from_ms;
}

static void
save(struct slurm_cloud *c, const struct vnode *v)
{
  struct adapter_node n;
  struct err e = {0};

  node_view(v, &n);
  if (c->store->update(c->store_arg, &n, &e) < 0)
    log_error("site %s: recording node %" PRId64 ": %s", c->site, v->id,
              e.msg);
}

/*
 * From at on, busy of v's GPUs are held: bill the idle piece that ends
 * there and start the next, with v's record, in one transaction.  No
 * change in the idle count is no piece: pieces end only at changes.
 */
static void
account(struct slurm_cloud *c, struct vnode *v, int64_t at, int64_t busy)
{
  int64_t idle = v->gpus - busy, from = v->idle_from_ms;
  int64_t gpus = v->idle_gpus;
  struct adapter_node n;
  struct err e = {0};

  if (idle < 0)
    idle = 0;
  v->busy = busy;
  if (idle == gpus)
    return;
  if (at < from)
    at = from;
  v->idle_gpus = idle;
  v->idle_from_ms = at;
  node_view(v, &n);
  if (c->store->bill_idle(c->store_arg, &n, from, at, gpus, &e) < 0)
    log_error("site %s: billing node %" PRId64 "'s idle time: %s", c->site,
              v->id, e.msg);
}

/* v's VM is gone since at: its last piece billed, its record ended. */
static void
end_node(struct slurm_cloud *c, struct vnode *v, int64_t at,
         const char *why)
{
  int64_t from = v->idle_from_ms, gpus = v->idle_gpus;
  struct adapter_node n;
  struct err e = {0};

  if (at < from)
    at = from;
  v->ended_ms = at > 0 ? at : 1;
  v->busy = 0;
  v->idle_gpus = 0;
  v->idle_from_ms = at;
  snprintf(v->reason, sizeof(v->reason), "%s", why);
  node_view(v, &n);
  if (c->store->bill_idle(c->store_arg, &n, from, at, gpus, &e) < 0)
    log_error("site %s: ending node %" PRId64 ": %s", c->site, v->id, e.msg);
  log_info("site %s: node %" PRId64 " (VM %s) ended: %s", c->site, v->id,
           v->vm_id, why);
}

/* ---- which Slurm node a VM is ---- */

static const struct slurm_node *
slurm_node_of(const struct slurm_cloud *c, const struct vnode *v)
{
  for (size_t i = 0; i < c->nsnodes; i++) {
    const struct slurm_node *s = &c->snodes[i];

    if (c->node_tag != NULL) {
      if (v->tag_name[0] != '\0' && strcmp(s->name, v->tag_name) == 0)
        return s;
    } else if ((v->address[0] != '\0' &&
                strcmp(s->address, v->address) == 0) ||
               strcmp(s->name, v->vm_id) == 0) {
      return s;
    }
  }
  return NULL;
}

/*
 * Find v's Slurm node.  Its GPUs count from the VM's launch when it is
 * found the first time (nothing was billed before: a 0-GPU node bills
 * nothing), else from now.  A VM whose node is no longer listed keeps
 * the last one: a node that ParallelCluster powers down resets its
 * address while its VM is still terminating, and that VM still costs.
 */
static void
match(struct slurm_cloud *c, struct vnode *v, int64_t now)
{
  const struct slurm_node *s = slurm_node_of(c, v);

  if (s == NULL) {
    if (v->slurm[0] == '\0' &&
        strcmp(v->reason, "no Slurm node matches it") != 0) {
      snprintf(v->reason, sizeof(v->reason), "no Slurm node matches it");
      save(c, v);
    }
    return;
  }
  if (strcmp(v->slurm, s->name) == 0 && v->gpus == s->gpus)
    return;
  snprintf(v->slurm, sizeof(v->slurm), "%s", s->name);
  snprintf(v->reason, sizeof(v->reason), "Slurm node %s", s->name);
  if (v->gpus == 0) {
    v->gpus = s->gpus;
    v->idle_gpus = s->gpus;
    snprintf(v->gpu_type, sizeof(v->gpu_type), "%s", s->gpu_type);
    save(c, v);
  } else if (v->gpus != s->gpus) {
    int64_t busy = v->busy;

    /* The piece so far at the old count, the next at the new. */
    account(c, v, now, v->gpus);
    v->gpus = s->gpus;
    snprintf(v->gpu_type, sizeof(v->gpu_type), "%s", s->gpu_type);
    account(c, v, now, busy);
    save(c, v);
  } else {
    save(c, v);
  }
  log_info("site %s: VM %s is Slurm node %s (%" PRId64 " GPUs)", c->site,
           v->vm_id, v->slurm, v->gpus);
}

/* ---- the provider's listing ---- */

static struct vnode *
find_vm(struct slurm_cloud *c, const char *vm_id)
{
  for (size_t i = 0; i < c->n; i++) {
    if (strcmp(c->v[i].vm_id, vm_id) == 0)
      return &c->v[i];
  }
  return NULL;
}

/* A new node for vm, committed before it is followed; NULL when the
 * store refused it (the next listing tries again). */
static struct vnode *
add_vm(struct slurm_cloud *c, const struct cloud_vm *vm, int64_t now)
{
  struct vnode *v;
  struct adapter_node n;
  struct err e = {0};
  char token[128];

  if (c->n == MAX_VMS) {
    snprintf(c->detail, sizeof(c->detail), "cloud: more than %d VMs "
             "tagged %.64s; the others are not billed", MAX_VMS, c->key);
    return NULL;
  }
  if (c->n == c->cap) {
    c->cap = c->cap == 0 ? 16 : c->cap * 2;
    c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
  }
  v = &c->v[c->n];
  memset(v, 0, sizeof(*v));
  snprintf(v->vm_id, sizeof(v->vm_id), "%s", vm->id);
  snprintf(v->shape, sizeof(v->shape), "%s", vm->shape);
  snprintf(v->zone, sizeof(v->zone), "%s", vm->zone);
  v->spot = vm->spot;
  v->created_ms = now;
  /* It bills from its launch, not from when tenbin first saw it. */
  v->launched_ms = vm->launched_ms > 0 && vm->launched_ms <= now
                       ? vm->launched_ms
                       : now;
  v->seen_ms = now;
  v->idle_from_ms = v->launched_ms;
  node_view(v, &n);
  if (c->store->create(c->store_arg, &n, token, sizeof(token), &e) < 0) {
    log_error("site %s: recording VM %s: %s", c->site, vm->id, e.msg);
    return NULL;
  }
  /* No agent runs on it: the token is never handed to anyone. */
  memset(token, 0, sizeof(token));
  v->id = n.id;
  c->n++;
  log_info("site %s: VM %s (%s, launched %" PRId64 ") is node %" PRId64,
           c->site, v->vm_id, v->shape, v->launched_ms, v->id);
  return v;
}

/* Forget the ended nodes. */
static void
compact(struct slurm_cloud *c)
{
  size_t k = 0;

  for (size_t i = 0; i < c->n; i++) {
    if (c->v[i].ended_ms == 0)
      c->v[k++] = c->v[i];
  }
  c->n = k;
}

static void
on_list(void *arg, const struct cloud_result *r, const struct cloud_vm *vms,
        size_t n)
{
  struct slurm_cloud *c = arg;
  int64_t now;

  c->listing = 0;
  if (c->closing)
    return;
  if (r->rc < 0) {
    snprintf(c->detail, sizeof(c->detail), "cloud: listing the cluster's "
             "VMs: %.150s", r->msg);
    log_warn("site %s: %s", c->site, c->detail);
    return;
  }
  c->detail[0] = '\0';
  now = c->now();
  for (size_t i = 0; i < c->n; i++)
    c->v[i].listed = 0;
  for (size_t i = 0; i < n; i++) {
    const struct cloud_vm *vm = &vms[i];
    struct vnode *v = find_vm(c, vm->id);

    if (vm->id[0] == '\0')
      continue;
    if (vm->state == CLOUD_VM_GONE) {
      /* Stopped or terminated: it bills no compute any more. */
      if (v != NULL && v->ended_ms == 0)
        end_node(c, v, now, vm->end_reason[0] ? vm->end_reason : "stopped");
      continue;
    }
    if (v == NULL)
      v = add_vm(c, vm, now);
    if (v == NULL)
      continue;
    v->listed = 1;
    v->missed = 0;
    v->gone_ms = 0;
    v->seen_ms = now;
    snprintf(v->tag_name, sizeof(v->tag_name), "%s", vm->name);
    snprintf(v->address, sizeof(v->address), "%s", vm->address);
  }
  for (size_t i = 0; i < c->n; i++) {
    struct vnode *v = &c->v[i];

    if (v->ended_ms > 0 || v->listed)
      continue;
    if (v->missed++ == 0)
      v->gone_ms = now;
    if (v->missed >= GONE_AFTER)
      end_node(c, v, v->gone_ms, "gone from the provider's listing");
  }
  compact(c);
  for (size_t i = 0; i < c->n; i++)
    match(c, &c->v[i], now);
}

static void
on_timer(uv_timer_t *t)
{
  struct slurm_cloud *c = t->data;

  if (c->listing || c->closing)
    return;
  c->listing = 1;
  c->prov->list_tagged(c->pctx, c->key, c->value, on_list, c);
}

/* ---- Slurm's answers ---- */

void
slurm_cloud_nodes(struct slurm_cloud *c, const struct slurm_node *nodes,
                  size_t n)
{
  int64_t now = c->now();

  free(c->snodes);
  c->snodes = xcalloc(n + 1, sizeof(*c->snodes));
  if (n > 0)
    memcpy(c->snodes, nodes, n * sizeof(*nodes));
  c->nsnodes = n;
  for (size_t i = 0; i < c->n; i++)
    match(c, &c->v[i], now);
}

/* GPUs that job j holds on node: its alloc's index lists for the node
 * ("a:0-1,b:0,2": a token holding ':' starts a node), else, for a job on
 * that one node whose indexes Slurm does not give (yet), all it asked. */
static int64_t
gpus_on(const struct slurm_job *j, const char *node)
{
  const char *p = j->alloc != NULL ? j->alloc : "";
  size_t nlen = strlen(node);
  int64_t n = 0;
  int mine = 0, paired = 0;

  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    const char *idx = p;

    if (colon != NULL) {
      paired = 1;
      mine = (size_t)(colon - p) == nlen && strncmp(p, node, nlen) == 0;
      idx = colon + 1;
    }
    if (mine) {
      char *end;
      long long a = strtoll(idx, &end, 10), b = a;

      if (*end == '-')
        b = strtoll(end + 1, &end, 10);
      if (end != idx && a >= 0 && b >= a && b - a < 4096)
        n += b - a + 1;
    }
    p += len;
    p += *p == ',';
  }
  if (!paired && j->nodes != NULL && strcmp(j->nodes, node) == 0)
    n = j->gpus;
  return n;
}

/* A job's hold of a node's GPUs, in Slurm's times. */
struct span {
  int64_t from, to, gpus;
};

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return x < y ? -1 : x > y;
}

static int64_t
held_at(const struct span *s, size_t n, int64_t t)
{
  int64_t held = 0;

  for (size_t i = 0; i < n; i++) {
    if (s[i].from <= t && t < s[i].to)
      held += s[i].gpus;
  }
  return held;
}

/* Bill v's idle pieces over [idle_from_ms, until) from the holds of
 * jobs[0..n), whose outcomes are out[0..n). */
static void
settle(struct slurm_cloud *c, struct vnode *v, const struct slurm_job *jobs,
       const struct slurm_outcome *out, size_t n, int64_t until)
{
  struct span s[MAX_SPANS];
  int64_t t[2 * MAX_SPANS];
  size_t ns = 0, nt = 0;
  int64_t from = v->idle_from_ms;

  for (size_t i = 0; i < n && ns < MAX_SPANS; i++) {
    const struct slurm_job *j = &jobs[i];
    int64_t g, end = NEVER;

    /* A job on several nodes may list them as a range ("gpu-[1-2]");
     * its alloc names each. */
    if (out[i].started_ms <= 0 || out[i].started_ms >= until ||
        ((j->nodes == NULL || strstr(j->nodes, v->slurm) == NULL) &&
         (j->alloc == NULL || strstr(j->alloc, v->slurm) == NULL)))
      continue;
    if (job_state_is_final(out[i].state) && j->end_s > 0)
      end = j->end_s * 1000;
    if (end <= from || (g = gpus_on(j, v->slurm)) <= 0)
      continue;
    s[ns++] = (struct span){out[i].started_ms, end, g};
  }
  account(c, v, from, held_at(s, ns, from));
  for (size_t i = 0; i < ns; i++) {
    if (s[i].from > from && s[i].from < until)
      t[nt++] = s[i].from;
    if (s[i].to > from && s[i].to < until)
      t[nt++] = s[i].to;
  }
  qsort(t, nt, sizeof(t[0]), cmp_i64);
  for (size_t i = 0; i < nt; i++) {
    if (i > 0 && t[i] == t[i - 1])
      continue;
    account(c, v, t[i], held_at(s, ns, t[i]));
  }
}

static int
cmp_start(const void *a, const void *b)
{
  const struct first_start *x = a, *y = b;

  return x->slurm_id < y->slurm_id ? -1 : x->slurm_id > y->slurm_id;
}

/* Each started job's start: the first one seen, kept for the jobs that
 * the listing still has. */
static void
keep_starts(struct slurm_cloud *c, const struct slurm_job *jobs,
            struct slurm_outcome *out, size_t n)
{
  struct first_start *next = xcalloc(n + 1, sizeof(*next));
  size_t k = 0;

  for (size_t i = 0; i < n; i++) {
    struct first_start key = {jobs[i].slurm_id, 0};
    const struct first_start *old;

    if (out[i].started_ms <= 0)
      continue;
    old = c->nstarts > 0 ? bsearch(&key, c->starts, c->nstarts,
                                   sizeof(key), cmp_start)
                         : NULL;
    if (old != NULL && old->ms < out[i].started_ms)
      out[i].started_ms = old->ms;
    next[k++] = (struct first_start){jobs[i].slurm_id, out[i].started_ms};
  }
  qsort(next, k, sizeof(*next), cmp_start);
  free(c->starts);
  c->starts = next;
  c->nstarts = k;
}

void
slurm_cloud_jobs(struct slurm_cloud *c, const struct slurm_job *jobs,
                 size_t n, int64_t sent_ms)
{
  struct slurm_outcome *out;
  /* Slurm's times are seconds: a job it started after this snapshot may
   * still carry the second the request left in. */
  int64_t until = sent_ms - sent_ms % 1000;

  out = xcalloc(n + 1, sizeof(*out));
  for (size_t i = 0; i < n; i++)
    slurm_job_outcome(&jobs[i], &out[i]);
  keep_starts(c, jobs, out, n);
  for (size_t i = 0; i < c->n; i++) {
    struct vnode *v = &c->v[i];

    if (v->gpus > 0 && v->slurm[0] != '\0' && v->idle_from_ms < until)
      settle(c, v, jobs, out, n, until);
  }
  free(out);
}

const char *
slurm_cloud_detail(const struct slurm_cloud *c)
{
  return c->detail;
}

/* ---- open and close ---- */

/* A stored node of this site, taken up again after a restart.  Its
 * Slurm node is found again from the next listings. */
static int
take_node(const struct adapter_node *n, void *arg)
{
  struct slurm_cloud *c = arg;
  struct vnode *v;

  if (n->vm_id == NULL || (n->state != NULL &&
                           strcmp(n->state, "ended") == 0) ||
      c->n == MAX_VMS)
    return 0;
  if (c->n == c->cap) {
    c->cap = c->cap == 0 ? 16 : c->cap * 2;
    c->v = xrealloc(c->v, c->cap * sizeof(*c->v));
  }
  v = &c->v[c->n++];
  memset(v, 0, sizeof(*v));
  v->id = n->id;
  snprintf(v->vm_id, sizeof(v->vm_id), "%s", n->vm_id);
  snprintf(v->shape, sizeof(v->shape), "%s", n->shape ? n->shape : "");
  snprintf(v->zone, sizeof(v->zone), "%s", n->zone ? n->zone : "");
  snprintf(v->gpu_type, sizeof(v->gpu_type), "%s",
           n->gpu_type ? n->gpu_type : "");
  snprintf(v->reason, sizeof(v->reason), "%s", n->reason ? n->reason : "");
  v->spot = n->spot;
  v->gpus = n->gpus;
  v->created_ms = n->created_ms;
  v->launched_ms = n->launched_ms;
  v->seen_ms = n->seen_ms;
  v->idle_gpus = n->idle_gpus;
  v->idle_from_ms = n->idle_from_ms;
  v->busy = n->gpus - n->idle_gpus;
  return 0;
}

/* A tag key (key 1) or value of 1 (value: 0) to max bytes, that k's
 * provider takes; field names it ("tag.key", "node_tag"). */
static int
tag_string(const struct block_kind *k, const char *v, const char *field,
           int key, size_t max, char **out, struct err *e)
{
  size_t min = key ? 1 : 0;

  if (v == NULL)
    return err_set(e, ERR_CONFIG, "field 'cloud.%s': required", field);
  if (strlen(v) < min || strlen(v) > max)
    return err_set(e, ERR_CONFIG, "field 'cloud.%s': %zu to %zu "
                   "characters", field, min, max);
  if (!k->tag_ok(v, key))
    return err_set(e, ERR_CONFIG, "field 'cloud.%s': %s", field,
                   key ? k->key_rule : k->value_rule);
  *out = xstrdup(v);
  return 0;
}

static int
configure(struct slurm_cloud *c, const struct block_kind *k,
          const json_t *block, struct err *e)
{
  const json_t *tag = json_object_get(block, "tag");
  const char *node_tag = jsonx_str(block, "node_tag");
  int rc;

  if (!json_is_object(block))
    return err_set(e, ERR_CONFIG, "field 'cloud' must be an object");
  rc = jsonx_check(block, k->fields, "cloud.", e);
  if (rc == 0 && tag == NULL)
    rc = err_set(e, ERR_CONFIG, "field 'cloud.tag': required, the "
                 "cluster's tag {\"key\": K, \"value\": V}");
  if (rc == 0)
    rc = jsonx_check(tag, adapter_slurm_cloud_tag_fields, "cloud.tag.", e);
  if (rc == 0)
    rc = tag_string(k, jsonx_str(tag, "key"), "tag.key", 1, TAG_KEY_MAX,
                    &c->key, e);
  if (rc == 0)
    rc = tag_string(k, jsonx_str(tag, "value"), "tag.value", 0,
                    TAG_VALUE_MAX, &c->value, e);
  if (rc == 0 && node_tag != NULL)
    rc = tag_string(k, node_tag, "node_tag", 1, TAG_KEY_MAX, &c->node_tag,
                    e);
  if (rc == 0)
    rc = jsonx_int(block, "reconcile_s", 1, MAX_RECONCILE_S,
                   DEFAULT_RECONCILE_S, &c->reconcile_ms, "cloud.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  c->reconcile_ms *= 1000;
  return 0;
}

static void
free_cloud(struct slurm_cloud *c)
{
  free(c->site);
  free(c->key);
  free(c->value);
  free(c->node_tag);
  free(c->v);
  free(c->snodes);
  free(c->starts);
  free(c);
}

int
slurm_cloud_open_with(const struct cloud_provider *prov,
                      const struct slurm_cloud_env *env, const json_t *block,
                      struct slurm_cloud **out, struct err *e)
{
  struct slurm_cloud *c = xcalloc(1, sizeof(*c));
  const struct block_kind *k = kind_of(prov->kind);
  struct cloud_env ce;
  int rc;

  *out = NULL;
  c->loop = env->loop;
  c->site = xstrdup(env->site_name != NULL ? env->site_name : "slurm");
  c->store = env->store;
  c->store_arg = env->store_arg;
  c->now = env->now_ms != NULL ? env->now_ms : time_now_ms;
  c->prov = prov;
  if (k == NULL) {
    rc = err_set(e, ERR_CONFIG, "field 'cloud.kind': %.16s cannot list a "
                 "cluster's VMs", prov->kind);
    goto fail;
  }
  rc = configure(c, k, block, e);
  if (rc < 0)
    goto fail;
  if (c->store == NULL) {
    rc = err_set(e, ERR_CONFIG, "field 'cloud': this tenbind has no node "
                 "store for it");
    goto fail;
  }
  if (prov->list_tagged == NULL) {
    rc = err_set(e, ERR_CONFIG, "field 'cloud.kind': %s cannot list a "
                 "cluster's VMs", prov->kind);
    goto fail;
  }
  memset(&ce, 0, sizeof(ce));
  ce.loop = env->loop;
  ce.site_name = c->site;
  ce.list_only = 1;
  ce.name_tag = c->node_tag;
  rc = prov->open(&ce, block, &c->pctx, e);
  if (rc < 0) {
    err_prefix(e, "cloud (%s)", prov->kind);
    rc = err_recode(e, ERR_CONFIG);
    goto fail;
  }
  rc = c->store->list(c->store_arg, take_node, c, e);
  if (rc < 0) {
    prov->close(c->pctx, NULL, NULL);
    goto fail;
  }
  uv_timer_init(c->loop, &c->timer);
  c->timer.data = c;
  uv_timer_start(&c->timer, on_timer, 0, (uint64_t)c->reconcile_ms);
  *out = c;
  return 0;

fail:
  free_cloud(c);
  return rc;
}

int
slurm_cloud_open(const struct slurm_cloud_env *env, const json_t *block,
                 struct slurm_cloud **out, struct err *e)
{
  const char *kind = jsonx_str(block, "kind");
  const struct block_kind *k;

  *out = NULL;
  if (!json_is_object(block))
    return err_set(e, ERR_CONFIG, "field 'cloud' must be an object");
  if (kind == NULL)
    return err_set(e, ERR_CONFIG, "field 'cloud.kind': required (\"aws\", "
                   "\"gcp\" or \"azure\")");
  k = kind_of(kind);
  if (k == NULL)
    return err_set(e, ERR_CONFIG, "field 'cloud.kind': \"%.16s\" is none of "
                   "\"aws\", \"gcp\" and \"azure\"", kind);
  return slurm_cloud_open_with(k->prov, env, block, out, e);
}

static void
maybe_free(struct slurm_cloud *c)
{
  void (*cb)(void *arg) = c->close_cb;
  void *arg = c->close_arg;

  if (c->handles > 0)
    return;
  free_cloud(c);
  if (cb != NULL)
    cb(arg);
}

static void
on_part_closed(void *arg)
{
  struct slurm_cloud *c = arg;

  c->handles--;
  maybe_free(c);
}

static void
on_timer_closed(uv_handle_t *h)
{
  on_part_closed(h->data);
}

void
slurm_cloud_close(struct slurm_cloud *c, void (*cb)(void *arg), void *arg)
{
  /* The VMs are the cluster's: they go on, and the next tenbind takes up
   * their nodes from the store. */
  c->closing = 1;
  c->close_cb = cb;
  c->close_arg = arg;
  c->handles++;
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  c->handles++;
  c->prov->close(c->pctx, on_part_closed, c);
}
