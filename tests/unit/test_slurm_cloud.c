/*
 * Tests for adapters/slurm_cloud.c: a slurm site's cloud block, the
 * cluster's VMs as billed nodes.
 *
 * The block runs over a fake provider (its listings are what each test
 * puts there, answered from the loop), a fake node store that keeps
 * every idle piece billed, and a clock the test sets.  Slurm's side is a
 * canned nodes answer in v0.0.38's shape (read by the schema, as the
 * adapter reads it) and jobs as the schema reads them.  The ledger
 * identity checked throughout: a VM's uptime x its GPUs is the idle
 * pieces plus the GPU time of the Slurm jobs on it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud_int.h"
#include "adapters/slurm_cloud.h"
#include "adapters/slurm_schema.h"
#include "util/alloc.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 30000u
#define MAX_STORED 16
#define MAX_PIECES 64
#define MAX_VMS 8
#define T0 1800000000000 /* a VM's launch, ms */

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

struct stored {
  int64_t id;
  char shape[64], zone[64], state[16], vm_id[64], reason[160];
  char gpu_type[32];
  int64_t gpus, created_ms, launched_ms, seen_ms, ended_ms;
  int64_t idle_gpus, idle_from_ms;
};

struct piece {
  int64_t node, from, to, gpus;
};

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  struct slurm_cloud *c;

  /* the store */
  struct stored nodes[MAX_STORED];
  int nnodes;
  int creates;
  struct piece pieces[MAX_PIECES];
  int npieces;

  /* the provider */
  uv_timer_t deliver;
  int opened_list_only;
  char name_tag[64];
  char key[64], value[64];
  struct cloud_vm vms[MAX_VMS];
  size_t nvms;
  int fail_next;
  int lists;                  /* asked */
  int answered;
  cloud_list_cb list_cb;
  void *list_arg;
  void (*close_cb)(void *);
  void *close_arg;
  int closed;
};

static int64_t now_value;

static int64_t
fake_now(void)
{
  return now_value;
}

/* ---- the store ---- */

static void
copy_str(char *dst, size_t len, const char *s)
{
  snprintf(dst, len, "%s", s != NULL ? s : "");
}

static struct stored *
stored(struct fx *fx, int64_t id)
{
  for (int i = 0; i < fx->nnodes; i++) {
    if (fx->nodes[i].id == id)
      return &fx->nodes[i];
  }
  return NULL;
}

static void
store_write(struct stored *s, const struct adapter_node *n)
{
  copy_str(s->shape, sizeof(s->shape), n->shape);
  copy_str(s->zone, sizeof(s->zone), n->zone);
  copy_str(s->state, sizeof(s->state), n->state);
  copy_str(s->vm_id, sizeof(s->vm_id), n->vm_id);
  copy_str(s->reason, sizeof(s->reason), n->reason);
  copy_str(s->gpu_type, sizeof(s->gpu_type), n->gpu_type);
  s->gpus = n->gpus;
  s->launched_ms = n->launched_ms;
  s->seen_ms = n->seen_ms;
  s->ended_ms = n->ended_ms;
  s->idle_gpus = n->idle_gpus;
  s->idle_from_ms = n->idle_from_ms;
}

static int
store_create(void *arg, struct adapter_node *n, char *token, size_t tokenlen,
             struct err *e)
{
  struct fx *fx = arg;
  struct stored *s;

  (void)e;
  assert_true(fx->nnodes < MAX_STORED);
  s = &fx->nodes[fx->nnodes++];
  memset(s, 0, sizeof(*s));
  s->id = fx->nnodes;
  s->created_ms = n->created_ms;
  store_write(s, n);
  n->id = s->id;
  snprintf(token, tokenlen, "tok-%" PRId64, s->id);
  fx->creates++;
  return 0;
}

static int
store_update(void *arg, const struct adapter_node *n, struct err *e)
{
  struct stored *s = stored(arg, n->id);

  if (s == NULL)
    return err_set(e, ERR_NOT_FOUND, "no node %" PRId64, n->id);
  store_write(s, n);
  return 0;
}

static int
store_list(void *arg, adapter_node_cb cb, void *cb_arg, struct err *e)
{
  struct fx *fx = arg;

  (void)e;
  for (int i = 0; i < fx->nnodes; i++) {
    const struct stored *s = &fx->nodes[i];
    const struct adapter_node n = {
        .id = s->id, .shape = s->shape, .zone = s->zone, .state = s->state,
        .vm_id = s->vm_id, .gpus = s->gpus,
        .gpu_type = s->gpu_type[0] ? s->gpu_type : NULL,
        .created_ms = s->created_ms, .launched_ms = s->launched_ms,
        .seen_ms = s->seen_ms, .reason = s->reason,
        .idle_gpus = s->idle_gpus, .idle_from_ms = s->idle_from_ms};

    if (strcmp(s->state, "ended") != 0 && cb(&n, cb_arg) < 0)
      return -1;
  }
  return 0;
}

static int
store_bill_idle(void *arg, const struct adapter_node *n, int64_t from_ms,
                int64_t to_ms, int64_t gpus, struct err *e)
{
  struct fx *fx = arg;

  assert_true(to_ms >= from_ms);
  /* Pieces follow one another: none starts before the last ended. */
  for (int i = 0; i < fx->npieces; i++) {
    if (fx->pieces[i].node == n->id && gpus > 0 && to_ms > from_ms)
      assert_true(fx->pieces[i].to <= from_ms);
  }
  if (gpus > 0 && to_ms > from_ms) {
    assert_true(fx->npieces < MAX_PIECES);
    fx->pieces[fx->npieces++] = (struct piece){n->id, from_ms, to_ms, gpus};
  }
  return store_update(arg, n, e);
}

static const struct adapter_node_store fake_store = {
    .create = store_create,
    .update = store_update,
    .list = store_list,
    .bill_idle = store_bill_idle,
};

/* GPU-ms billed idle for node id. */
static int64_t
idle_ms(const struct fx *fx, int64_t id)
{
  int64_t sum = 0;

  for (int i = 0; i < fx->npieces; i++) {
    if (fx->pieces[i].node == id)
      sum += (fx->pieces[i].to - fx->pieces[i].from) * fx->pieces[i].gpus;
  }
  return sum;
}

/* ---- the provider ---- */

static struct fx *the_fx; /* the fake provider's (one site per test) */

static int
fake_open(const struct cloud_env *env, const json_t *config, void **pctx,
          struct err *e)
{
  struct fx *fx = the_fx;

  (void)config;
  (void)e;
  fx->opened_list_only = env->list_only;
  copy_str(fx->name_tag, sizeof(fx->name_tag), env->name_tag);
  *pctx = fx;
  return 0;
}

static void
fake_deliver(uv_timer_t *t)
{
  struct fx *fx = t->data;

  if (fx->list_cb != NULL) {
    cloud_list_cb cb = fx->list_cb;
    struct cloud_result r = {0};

    fx->list_cb = NULL;
    if (fx->fail_next) {
      fx->fail_next = 0;
      r.rc = ERR_SITE;
      snprintf(r.msg, sizeof(r.msg), "EC2 503 Unavailable");
    }
    fx->answered++;
    cb(fx->list_arg, &r, fx->vms, r.rc == 0 ? fx->nvms : 0);
  }
  if (fx->close_cb != NULL) {
    void (*cb)(void *) = fx->close_cb;

    fx->close_cb = NULL;
    fx->closed = 1;
    cb(fx->close_arg);
  }
}

static void
fake_list_tagged(void *pctx, const char *key, const char *value,
                 cloud_list_cb cb, void *arg)
{
  struct fx *fx = pctx;

  copy_str(fx->key, sizeof(fx->key), key);
  copy_str(fx->value, sizeof(fx->value), value);
  fx->lists++;
  fx->list_cb = cb;
  fx->list_arg = arg;
  uv_timer_start(&fx->deliver, fake_deliver, 0, 0);
}

static void
fake_close(void *pctx, void (*cb)(void *arg), void *arg)
{
  struct fx *fx = pctx;

  if (cb == NULL) {
    fx->closed = 1;
    return;
  }
  fx->close_cb = cb;
  fx->close_arg = arg;
  uv_timer_start(&fx->deliver, fake_deliver, 0, 0);
}

static const struct cloud_provider fake_provider = {
    .kind = "aws",
    .open = fake_open,
    .list_tagged = fake_list_tagged,
    .close = fake_close,
};

/* ---- Slurm's side ---- */

/* GET nodes of the testbed's elastic cluster, one node up: two 8-h100
 * nodes, their NodeAddr as ParallelCluster sets it (the VM's address). */
static const char NODES[] =
    "{\"meta\":{},\"errors\":[],\"nodes\":["
    "{\"name\":\"elastic-h100-1\",\"address\":\"10.0.0.11\","
    "\"hostname\":\"elastic-h100-1\",\"state\":\"mixed\","
    "\"state_flags\":[\"CLOUD\"],\"gres\":\"gpu:h100:8\","
    "\"gres_used\":\"gpu:h100:2(IDX:0-1)\",\"partitions\":[\"gpu\"]},"
    "{\"name\":\"elastic-h100-2\",\"address\":\"10.0.0.12\","
    "\"hostname\":\"elastic-h100-2\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],\"gres\":\"gpu:h100:8\","
    "\"gres_used\":\"gpu:h100:0(IDX:N/A)\",\"partitions\":[\"gpu\"]}]}";

static void
give_nodes(struct fx *fx)
{
  json_t *answer = json_loads(NODES, 0, NULL);
  struct slurm_node_list l = {0};
  struct err e = {0};

  assert_non_null(answer);
  assert_int_equal(slurm_schema_v0038.node_list(answer, &l, &e), 0);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.nodes[0].address, "10.0.0.11");
  assert_int_equal(l.nodes[1].gpus, 8);
  slurm_cloud_nodes(fx->c, l.nodes, l.n);
  slurm_node_list_release(&l);
  json_decref(answer);
}

/* A job as the schema reads it: on node with alloc, started and (when
 * end_s > 0) ended at those seconds. */
static struct slurm_job
job(const char *state, const char *node, const char *alloc, int64_t gpus,
    int64_t start_s, int64_t end_s)
{
  struct slurm_job j;

  memset(&j, 0, sizeof(j));
  j.slurm_id = 100;
  j.tenbin_id = -1;
  j.state = (char *)state;
  j.reason = (char *)"None";
  j.nodes = (char *)node;
  j.alloc = (char *)alloc;
  j.stdout_path = (char *)"";
  j.name = (char *)"train";
  j.user = (char *)"someone";
  j.exit_raw = 0;
  j.start_s = start_s;
  j.end_s = end_s;
  j.gpus = gpus;
  return j;
}

/* ---- fixture ---- */

static struct cloud_vm
vm(const char *id, const char *name, const char *address, int64_t launched)
{
  struct cloud_vm v;

  memset(&v, 0, sizeof(v));
  copy_str(v.id, sizeof(v.id), id);
  v.state = CLOUD_VM_RUNNING;
  copy_str(v.zone, sizeof(v.zone), "us-east-1a");
  copy_str(v.shape, sizeof(v.shape), "p5.48xlarge");
  copy_str(v.name, sizeof(v.name), name);
  copy_str(v.address, sizeof(v.address), address);
  v.launched_ms = launched;
  return v;
}

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  uv_timer_init(&fx->loop, &fx->deliver);
  fx->deliver.data = fx;
  the_fx = fx;
  now_value = T0 + 60000;
  *state = fx;
  return 0;
}

static void
on_closed(void *arg)
{
  *(int *)arg = 1;
}

static void
close_block(struct fx *fx)
{
  int done = 0;

  if (fx->c == NULL)
    return;
  slurm_cloud_close(fx->c, on_closed, &done);
  while (!done)
    uv_run(&fx->loop, UV_RUN_ONCE);
  fx->c = NULL;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;

  close_block(fx);
  uv_close((uv_handle_t *)&fx->deliver, NULL);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  free(fx);
  return 0;
}

static struct slurm_cloud_env
env_of(struct fx *fx)
{
  return (struct slurm_cloud_env){.loop = &fx->loop,
                                  .site_name = "elastic",
                                  .store = &fake_store,
                                  .store_arg = fx,
                                  .now_ms = fake_now};
}

/* Open the block (node_tag: "Name" unless told NULL) and wait for its
 * first listing's answer. */
static void
open_block(struct fx *fx, const char *node_tag)
{
  struct slurm_cloud_env env = env_of(fx);
  json_t *block = json_pack("{s:s, s:{s:s, s:s}, s:i, s:s}", "kind", "aws",
                            "tag", "key", "parallelcluster:cluster-name",
                            "value", "gpu", "reconcile_s", 1, "region",
                            "us-east-1");
  struct err e = {0};
  int want = fx->answered + 1;

  if (node_tag != NULL)
    json_object_set_new(block, "node_tag", json_string(node_tag));
  if (slurm_cloud_open_with(&fake_provider, &env, block, &fx->c, &e) < 0)
    fail_msg("open: %s", e.msg);
  json_decref(block);
  while (fx->answered < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
}

/* The next listing (reconcile_s is 1: a second of real time) answered
 * with what fx->vms holds now, at the clock's now. */
static void
next_listing(struct fx *fx)
{
  int want = fx->answered + 1;

  while (fx->answered < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
}

/* ---- tests ---- */

static void
test_vms_become_nodes_billed_from_their_launch(void **state)
{
  struct fx *fx = *state;

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->vms[1] = vm("i-0head", "HeadNode", "10.0.0.5", T0 - 3600000);
  fx->nvms = 2;
  open_block(fx, "Name");
  assert_true(fx->opened_list_only);
  assert_string_equal(fx->name_tag, "Name");
  assert_string_equal(fx->key, "parallelcluster:cluster-name");
  assert_string_equal(fx->value, "gpu");
  assert_int_equal(fx->nnodes, 2);
  assert_string_equal(fx->nodes[0].vm_id, "i-0a1");
  assert_string_equal(fx->nodes[0].shape, "p5.48xlarge");
  assert_string_equal(fx->nodes[0].zone, "us-east-1a");
  /* Billed from EC2's launch time, not from when tenbin saw it. */
  assert_int_equal(fx->nodes[0].launched_ms, T0);
  assert_int_equal(fx->nodes[0].idle_from_ms, T0);
  assert_int_equal(fx->nodes[0].gpus, 0);
  give_nodes(fx);
  assert_int_equal(fx->nodes[0].gpus, 8);
  assert_string_equal(fx->nodes[0].gpu_type, "h100");
  assert_int_equal(fx->nodes[0].idle_gpus, 8);
  assert_int_equal(fx->nodes[0].idle_from_ms, T0);
  assert_string_equal(fx->nodes[0].reason, "Slurm node elastic-h100-1");
  assert_string_equal(fx->nodes[0].state, "idle");
  /* The head node is tagged with the cluster too, but no Slurm node. */
  assert_int_equal(fx->nodes[1].gpus, 0);
  assert_string_equal(fx->nodes[1].reason, "no Slurm node matches it");
  assert_int_equal(fx->npieces, 0);
}

static void
test_idle_gpus_are_billed_piecewise_around_slurm_jobs(void **state)
{
  struct fx *fx = *state;
  const int64_t t0s = T0 / 1000;
  struct slurm_job jobs[3];
  int64_t end, jobs_ms;

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  give_nodes(fx);
  /* tenbin's job: 2 GPUs from +10 s to +20 s; another user's: 4 GPUs
   * from +15 s, still running; a pending one (its start_time is Slurm's
   * guess) and one on the other node count for nothing here. */
  jobs[0] = job("COMPLETED", "elastic-h100-1", "elastic-h100-1:0-1", 2,
                t0s + 10, t0s + 20);
  jobs[1] = job("RUNNING", "elastic-h100-1", "elastic-h100-1:2-5", 4,
                t0s + 15, t0s + 3600);
  jobs[2] = job("PENDING", "", "", 8, t0s + 25, 0);
  slurm_cloud_jobs(fx->c, jobs, 3, T0 + 30500);
  assert_int_equal(fx->npieces, 3);
  assert_int_equal(fx->pieces[0].from, T0);
  assert_int_equal(fx->pieces[0].to, T0 + 10000);
  assert_int_equal(fx->pieces[0].gpus, 8);
  assert_int_equal(fx->pieces[1].to, T0 + 15000);
  assert_int_equal(fx->pieces[1].gpus, 6);
  assert_int_equal(fx->pieces[2].to, T0 + 20000);
  assert_int_equal(fx->pieces[2].gpus, 2);
  assert_int_equal(fx->nodes[0].idle_gpus, 4);
  assert_int_equal(fx->nodes[0].idle_from_ms, T0 + 20000);
  assert_string_equal(fx->nodes[0].state, "busy");
  /* The same listing again bills nothing twice. */
  slurm_cloud_jobs(fx->c, jobs, 3, T0 + 31500);
  assert_int_equal(fx->npieces, 3);
  /* The other job ends at +40 s; the VM is terminated (stopped) at
   * +50 s: its last idle piece ends there. */
  jobs[1] = job("COMPLETED", "elastic-h100-1", "elastic-h100-1:2-5", 4,
                t0s + 15, t0s + 40);
  slurm_cloud_jobs(fx->c, jobs, 2, T0 + 45000);
  assert_int_equal(fx->npieces, 4);
  assert_int_equal(fx->nodes[0].idle_gpus, 8);
  end = T0 + 50000;
  now_value = end;
  fx->vms[0].state = CLOUD_VM_GONE;
  next_listing(fx);
  assert_string_equal(fx->nodes[0].state, "ended");
  assert_int_equal(fx->nodes[0].ended_ms, end);
  assert_int_equal(fx->pieces[4].from, T0 + 40000);
  assert_int_equal(fx->pieces[4].to, end);
  /* The ledger's identity: uptime x GPUs = idle pieces + jobs' time. */
  jobs_ms = 2 * 10000 + 4 * 25000;
  assert_int_equal(idle_ms(fx, 1) + jobs_ms, 8 * (end - T0));
}

static void
test_a_vm_gone_from_two_listings_ends_at_the_first_miss(void **state)
{
  struct fx *fx = *state;
  int64_t missed_at;

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  give_nodes(fx);
  /* One listing without it: a listing may lag, it lives on. */
  fx->nvms = 0;
  missed_at = now_value = T0 + 120000;
  next_listing(fx);
  assert_string_equal(fx->nodes[0].state, "idle");
  /* A failed listing says nothing either way. */
  fx->fail_next = 1;
  now_value = T0 + 180000;
  next_listing(fx);
  assert_contains(slurm_cloud_detail(fx->c), "EC2 503");
  assert_string_equal(fx->nodes[0].state, "idle");
  /* The second miss ends it, billed up to the first. */
  now_value = T0 + 240000;
  next_listing(fx);
  assert_string_equal(slurm_cloud_detail(fx->c), "");
  assert_string_equal(fx->nodes[0].state, "ended");
  assert_int_equal(fx->nodes[0].ended_ms, missed_at);
  assert_string_equal(fx->nodes[0].reason,
                      "gone from the provider's listing");
  assert_int_equal(idle_ms(fx, 1), 8 * (missed_at - T0));
}

static void
test_a_vm_back_in_a_listing_is_not_ended(void **state)
{
  struct fx *fx = *state;

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  fx->nvms = 0;
  next_listing(fx);
  fx->nvms = 1;
  next_listing(fx);
  fx->nvms = 0;
  next_listing(fx);
  assert_string_equal(fx->nodes[0].state, "idle");
  assert_int_equal(fx->creates, 1);
}

static void
test_a_vm_that_is_no_slurm_node_bills_no_gpu_hour(void **state)
{
  struct fx *fx = *state;
  struct slurm_job jobs[1];

  fx->vms[0] = vm("i-0login", "login-1", "10.0.0.99", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  give_nodes(fx);
  jobs[0] = job("RUNNING", "login-1", "login-1:0", 1, T0 / 1000 + 1, 0);
  slurm_cloud_jobs(fx->c, jobs, 1, T0 + 30000);
  fx->vms[0].state = CLOUD_VM_GONE;
  now_value = T0 + 90000;
  next_listing(fx);
  assert_string_equal(fx->nodes[0].state, "ended");
  assert_int_equal(fx->nodes[0].gpus, 0);
  assert_int_equal(fx->npieces, 0);
}

static void
test_without_node_tag_a_vm_is_the_node_at_its_address(void **state)
{
  struct fx *fx = *state;

  /* ParallelCluster tags its compute VMs Name=Compute and sets each
   * node's NodeAddr to its VM's private address. */
  fx->vms[0] = vm("i-0a2", "", "10.0.0.12", T0);
  fx->nvms = 1;
  open_block(fx, NULL);
  assert_string_equal(fx->name_tag, "");
  give_nodes(fx);
  assert_string_equal(fx->nodes[0].reason, "Slurm node elastic-h100-2");
  assert_int_equal(fx->nodes[0].gpus, 8);
}

static void
test_a_job_started_in_the_listings_second_waits_for_the_next(void **state)
{
  struct fx *fx = *state;
  const int64_t t0s = T0 / 1000;
  struct slurm_job jobs[1];

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  give_nodes(fx);
  /* Sent at +30.4 s: settled up to +30 s only, so a job that Slurm
   * starts after the snapshot, stamped +30 s, still meets its piece. */
  jobs[0] = job("RUNNING", "elastic-h100-1", "elastic-h100-1:0", 1,
                t0s + 30, 0);
  slurm_cloud_jobs(fx->c, jobs, 0, T0 + 30400);
  assert_int_equal(fx->npieces, 0);
  slurm_cloud_jobs(fx->c, jobs, 1, T0 + 31200);
  assert_int_equal(fx->npieces, 1);
  assert_int_equal(fx->pieces[0].to, T0 + 30000);
  assert_int_equal(fx->nodes[0].idle_gpus, 7);
}

static void
test_a_job_keeps_its_start_when_slurm_moves_it_past_the_boot(void **state)
{
  struct fx *fx = *state;
  const int64_t t0s = T0 / 1000;
  struct slurm_job jobs[1];

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  give_nodes(fx);
  /* Allocated at +4 s on the booting node (CONFIGURING), no GPU index
   * yet; once the node is up Slurm says it started at +25 s. */
  jobs[0] = job("RUNNING", "elastic-h100-1", "", 2, t0s + 4, 0);
  slurm_cloud_jobs(fx->c, jobs, 1, T0 + 10000);
  jobs[0] = job("RUNNING", "elastic-h100-1", "elastic-h100-1:0-1", 2,
                t0s + 25, 0);
  slurm_cloud_jobs(fx->c, jobs, 1, T0 + 30000);
  assert_int_equal(fx->npieces, 1);
  assert_int_equal(fx->pieces[0].to, T0 + 4000);
  assert_int_equal(fx->nodes[0].idle_gpus, 6);
  assert_int_equal(fx->nodes[0].idle_from_ms, T0 + 4000);
}

static void
test_a_restart_resumes_from_the_stored_nodes(void **state)
{
  struct fx *fx = *state;
  const int64_t t0s = T0 / 1000;
  struct slurm_job jobs[1];

  fx->vms[0] = vm("i-0a1", "elastic-h100-1", "10.0.0.11", T0);
  fx->nvms = 1;
  open_block(fx, "Name");
  give_nodes(fx);
  jobs[0] = job("RUNNING", "elastic-h100-1", "elastic-h100-1:0-3", 4,
                t0s + 10, 0);
  slurm_cloud_jobs(fx->c, jobs, 1, T0 + 20000);
  assert_int_equal(fx->npieces, 1);
  close_block(fx);
  /* The next tenbind: the same VM is the same node, and the listing it
   * reads bills from where the last one stopped, nothing twice. */
  open_block(fx, "Name");
  assert_int_equal(fx->creates, 1);
  give_nodes(fx);
  jobs[0] = job("COMPLETED", "elastic-h100-1", "elastic-h100-1:0-3", 4,
                t0s + 10, t0s + 70);
  slurm_cloud_jobs(fx->c, jobs, 1, T0 + 80000);
  assert_int_equal(fx->npieces, 2);
  assert_int_equal(fx->pieces[1].from, T0 + 10000);
  assert_int_equal(fx->pieces[1].to, T0 + 70000);
  assert_int_equal(fx->pieces[1].gpus, 4);
  assert_int_equal(fx->nodes[0].idle_gpus, 8);
}

/* Open with block (JSON text) and return the refusal's message. */
static void
refused(struct fx *fx, const char *text, const char *want)
{
  struct slurm_cloud_env env = env_of(fx);
  json_t *block = json_loads(text, 0, NULL);
  struct slurm_cloud *c = NULL;
  struct err e = {0};

  assert_non_null(block);
  assert_int_equal(slurm_cloud_open(&env, block, &c, &e), ERR_CONFIG);
  assert_null(c);
  if (strstr(e.msg, want) == NULL)
    fail_msg("'%s' refused as '%s', not '%s'", text, e.msg, want);
  json_decref(block);
}

static void
test_config_errors_name_the_field(void **state)
{
  struct fx *fx = *state;

  refused(fx, "{\"tag\": {\"key\": \"k\", \"value\": \"v\"}}",
          "'cloud.kind': required");
  refused(fx, "{\"kind\": \"gcp\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\"}}", "'cloud.kind'");
  refused(fx, "{\"kind\": \"aws\", \"region\": \"us-east-1\"}",
          "'cloud.tag': required");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"value\": \"v\"}}",
          "'cloud.tag.key': required");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"k\"}}",
          "'cloud.tag.value': required");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"\", \"value\": "
              "\"v\"}}", "'cloud.tag.key': 1 to 128");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\", \"op\": \"=\"}}", "cloud.tag.op");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\"}, \"zones\": [\"us-east-1a\"]}", "'cloud.zones'");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\"}, \"reconcile_s\": 0}", "cloud.reconcile_s");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\"}, \"node_tag\": \"\"}", "'cloud.node_tag'");
  refused(fx, "{\"kind\": \"aws\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\"}, \"region\": \"US EAST\"}", "cloud (aws): field "
              "'region'");
  refused(fx, "[1]", "'cloud' must be an object");
}

/* slurmrestd's nodes answer is outside input: what is not a node is an
 * error saying where, a name too long to be whole is no node. */
static void
test_a_malformed_nodes_answer_is_an_error_naming_the_node(void **state)
{
  struct slurm_node_list l = {0};
  struct err e = {0};
  char big[200];
  json_t *v;

  (void)state;
  v = json_loads("{\"nodes\": [{\"name\": \"a\"}, 7]}", 0, NULL);
  assert_int_equal(slurm_schema_v0038.node_list(v, &l, &e), ERR_SITE);
  assert_contains(e.msg, "nodes[1]");
  assert_null(l.nodes);
  json_decref(v);
  v = json_loads("{\"errors\": []}", 0, NULL);
  assert_int_equal(slurm_schema_v0038.node_list(v, &l, &e), ERR_SITE);
  json_decref(v);
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  v = json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:i}]}", "nodes", "name", big,
                "address", big, "gres", "gpu:h100:8", "name", "b", "gres", 3);
  assert_int_equal(slurm_schema_v0038.node_list(v, &l, &e), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.nodes[0].name, "b");
  assert_int_equal(l.nodes[0].gpus, 0);
  slurm_node_list_release(&l);
  json_decref(v);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_vms_become_nodes_billed_from_their_launch, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_idle_gpus_are_billed_piecewise_around_slurm_jobs, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_vm_gone_from_two_listings_ends_at_the_first_miss, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_vm_back_in_a_listing_is_not_ended, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_vm_that_is_no_slurm_node_bills_no_gpu_hour, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_without_node_tag_a_vm_is_the_node_at_its_address, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_job_started_in_the_listings_second_waits_for_the_next,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_job_keeps_its_start_when_slurm_moves_it_past_the_boot,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_restart_resumes_from_the_stored_nodes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_config_errors_name_the_field,
                                      setup, teardown),
      cmocka_unit_test(
          test_a_malformed_nodes_answer_is_an_error_naming_the_node),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
