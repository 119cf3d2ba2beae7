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
 *
 * The gcp and azure blocks open their real providers against a peer on
 * 127.0.0.1 that answers as Compute Engine or ARM would (the token, and
 * one page of VMs), which proves the list-only open, the label or tag
 * filter and what a listing reads, through to the nodes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  refused(fx, "{\"kind\": \"oci\", \"tag\": {\"key\": \"k\", \"value\": "
              "\"v\"}}", "'cloud.kind': \"oci\" is none of");
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

/* ---- gcp and azure, over a peer answering as their APIs ---- */

/* A Compute Engine page: the cluster's VM in us-central1-b at the node's
 * NodeAddr, its controller (labelled too, no Slurm node).  The peer
 * answers it for the zone the VMs are in, an empty page for the other. */
static const char GCE_PAGE[] =
    "{\"kind\":\"compute#instanceList\",\"items\":["
    "{\"kind\":\"compute#instance\",\"name\":\"ml-a3-0\","
    "\"status\":\"RUNNING\",\"zone\":\"https://x/zones/us-central1-b\","
    "\"machineType\":\"https://x/machineTypes/a3-highgpu-8g\","
    "\"creationTimestamp\":\"2027-01-15T00:00:00.000-08:00\","
    "\"networkInterfaces\":[{\"network\":\"n\",\"networkIP\":\"10.0.0.11\"}],"
    "\"labels\":{\"slurm_cluster\":\"ml\",\"node\":\"elastic-h100-9\"}},"
    "{\"kind\":\"compute#instance\",\"name\":\"ml-controller\","
    "\"status\":\"RUNNING\",\"zone\":\"https://x/zones/us-central1-b\","
    "\"machineType\":\"https://x/machineTypes/n2-standard-4\","
    "\"creationTimestamp\":\"2027-01-15T00:00:00Z\","
    "\"networkInterfaces\":[{\"networkIP\":\"10.0.0.2\"}],"
    "\"labels\":{\"slurm_cluster\":\"ml\"}}]}";

/* An ARM page of the group: the cluster's VM named after its Slurm node,
 * a VM of another cluster, one without tags.  The tag's name is in
 * another case than the block's: Azure compares names case aside. */
static const char ARM_PAGE[] =
    "{\"value\":["
    "{\"name\":\"elastic-h100-2\",\"zones\":[\"2\"],"
    "\"tags\":{\"ClusterName\":\"elastic\"},"
    "\"properties\":{\"provisioningState\":\"Succeeded\","
    "\"hardwareProfile\":{\"vmSize\":\"Standard_ND96isr_H100_v5\"},"
    "\"timeCreated\":\"2027-01-15T08:00:00.0000000+00:00\"}},"
    "{\"name\":\"other-1\",\"tags\":{\"clustername\":\"other\"},"
    "\"properties\":{\"provisioningState\":\"Succeeded\"}},"
    "{\"name\":\"jump\",\"properties\":{\"provisioningState\":\"Succeeded\"}}"
    "]}";

#define T_LISTED 1800000000000 /* 2027-01-15T08:00:00Z, both pages' */

struct peer {
  char url[96];
  char dir[64];
  char key[128], secret[128];
  int tokens, pages;
  char paths[512];           /* the listings' paths, each then ' ' */
  char filter[160];
};

static void
answer(struct http_request *req, int status, const char *body)
{
  http_respond(req, status, "application/json", xstrdup(body),
               strlen(body));
}

static void
on_peer(struct http_request *req, void *arg)
{
  struct peer *p = arg;
  const char *path = http_request_path(req);
  const char *auth = http_request_header(req, "Authorization");
  const char *filter = http_request_query(req, "filter");
  size_t used = strlen(p->paths);

  if (strstr(path, "/token") != NULL) {
    p->tokens++;
    answer(req, 200, "{\"access_token\":\"tok-1\",\"expires_in\":3599,"
                     "\"token_type\":\"Bearer\"}");
    return;
  }
  if (auth == NULL || strcmp(auth, "Bearer tok-1") != 0) {
    answer(req, 401, "{}");
    return;
  }
  p->pages++;
  snprintf(p->paths + used, sizeof(p->paths) - used, "%s ", path);
  if (filter != NULL)
    snprintf(p->filter, sizeof(p->filter), "%s", filter);
  if (strstr(path, "/zones/us-central1-a/") != NULL)
    answer(req, 200, "{\"kind\":\"compute#instanceList\"}");
  else if (strstr(path, "/zones/") != NULL)
    answer(req, 200, GCE_PAGE);
  else
    answer(req, 200, ARM_PAGE);
}

static void
write_private(const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(close(fd), 0);
}

/* The peer's credentials: the test service account whose token_uri is
 * the peer's, and an Entra client secret. */
static void
peer_files(struct peer *p)
{
  char path[512];
  json_t *sa;
  char *text;

  snprintf(p->dir, sizeof(p->dir), "/tmp/tenbin-test-scloud-XXXXXX");
  assert_non_null(mkdtemp(p->dir));
  snprintf(path, sizeof(path), "%s/tests/data/gcp/service-account.json",
           TENBIN_SOURCE_DIR);
  sa = json_load_file(path, 0, NULL);
  assert_non_null(sa);
  snprintf(path, sizeof(path), "%s/token", p->url);
  json_object_set_new(sa, "token_uri", json_string(path));
  text = json_dumps(sa, 0);
  snprintf(p->key, sizeof(p->key), "%s/key.json", p->dir);
  write_private(p->key, text);
  free(text);
  json_decref(sa);
  snprintf(p->secret, sizeof(p->secret), "%s/secret", p->dir);
  write_private(p->secret, "s3cret\n");
}

static void
peer_files_remove(struct peer *p)
{
  unlink(p->key);
  unlink(p->secret);
  rmdir(p->dir);
}

/* A gcp block over the peer, as a gcp site has its connection. */
static json_t *
gcp_block(const struct peer *p)
{
  char endpoint[128];

  snprintf(endpoint, sizeof(endpoint), "%s/compute/v1", p->url);
  return json_pack("{s:s, s:{s:s, s:s}, s:i, s:s, s:s, s:[s, s], s:s, "
                   "s:s}",
                   "kind", "gcp", "tag", "key", "slurm_cluster", "value",
                   "ml", "reconcile_s", 1, "project", "demo-proj", "region",
                   "us-central1", "zones", "us-central1-a", "us-central1-b",
                   "endpoint", endpoint, "credentials_file", p->key);
}

/* An azure block over the peer, as an azure site has its connection. */
static json_t *
azure_block(const struct peer *p)
{
  return json_pack("{s:s, s:{s:s, s:s}, s:i, s:s, s:s, s:s, s:s, "
                   "s:{s:s, s:s, s:s}}",
                   "kind", "azure", "tag", "key", "clustername", "value",
                   "elastic", "reconcile_s", 1, "subscription",
                   "0b1f6471-1bf0-4dda-aec3-111111111111", "resource_group",
                   "rg-slurm", "endpoint", p->url, "login_endpoint", p->url,
                   "credentials", "tenant", "contoso.onmicrosoft.com",
                   "client_id", "11111111-2222-4333-8444-555555555555",
                   "client_secret_file", p->secret);
}

/* Open block over its real provider and wait for its first listing to
 * make nodes (want of them). */
static void
open_real(struct fx *fx, struct peer *p, json_t *block, int want)
{
  struct slurm_cloud_env env = env_of(fx);
  struct err e = {0};

  if (slurm_cloud_open(&env, block, &fx->c, &e) < 0)
    fail_msg("open: %s", e.msg);
  json_decref(block);
  while (fx->nnodes < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
  (void)p;
}

/* The next listing answered and read: the one after it has been asked
 * (a listing starts only once the last one has been read). */
static void
next_listing_of(struct fx *fx, struct peer *p)
{
  int want = p->pages + 2;

  while (p->pages < want)
    uv_run(&fx->loop, UV_RUN_ONCE);
}

static struct http_server *
peer_start(struct fx *fx, struct peer *p)
{
  struct http_server *srv;

  memset(p, 0, sizeof(*p));
  srv = loop_peer_server(&fx->loop, on_peer, p, 8, "", p->url,
                         sizeof(p->url));
  peer_files(p);
  return srv;
}

static void
peer_stop(struct fx *fx, struct peer *p, struct http_server *srv)
{
  int done = 0;

  close_block(fx);
  http_server_close(srv, on_closed, &done);
  while (!done)
    uv_run(&fx->loop, UV_RUN_ONCE);
  peer_files_remove(p);
}

/* GCE lists a zone at a time, with a label filter: every zone of the
 * block is asked, and a VM whose networkIP is a node's NodeAddr is that
 * node (no node_tag), billed from its creationTimestamp. */
static void
test_a_gcp_block_lists_its_label_in_each_zone(void **state)
{
  struct fx *fx = *state;
  struct peer p;
  struct http_server *srv = peer_start(fx, &p);
  char want[256];

  now_value = T_LISTED + 60000;
  open_real(fx, &p, gcp_block(&p), 2);
  snprintf(want, sizeof(want),
           "/compute/v1/projects/demo-proj/zones/us-central1-a/instances "
           "/compute/v1/projects/demo-proj/zones/us-central1-b/instances ");
  assert_string_equal(p.paths, want);
  assert_string_equal(p.filter, "labels.slurm_cluster = \"ml\"");
  assert_string_equal(fx->nodes[0].vm_id, "ml-a3-0");
  assert_string_equal(fx->nodes[0].zone, "us-central1-b");
  assert_string_equal(fx->nodes[0].shape, "a3-highgpu-8g");
  assert_int_equal(fx->nodes[0].launched_ms, T_LISTED);
  give_nodes(fx);
  assert_int_equal(fx->nodes[0].gpus, 8);
  assert_string_equal(fx->nodes[0].reason, "Slurm node elastic-h100-1");
  assert_int_equal(fx->nodes[1].gpus, 0);
  peer_stop(fx, &p, srv);
}

/* With node_tag the label of that name says the node, whatever the
 * VM's address. */
static void
test_a_gcp_block_finds_the_node_by_its_node_label(void **state)
{
  struct fx *fx = *state;
  struct peer p;
  struct http_server *srv = peer_start(fx, &p);
  json_t *block = gcp_block(&p);
  static const char nodes[] =
      "{\"nodes\":[{\"name\":\"elastic-h100-9\",\"address\":\"10.9.9.9\","
      "\"gres\":\"gpu:h100:8\"}]}";
  json_t *answer_json = json_loads(nodes, 0, NULL);
  struct slurm_node_list l = {0};
  struct err e = {0};

  now_value = T_LISTED + 60000;
  json_object_set_new(block, "node_tag", json_string("node"));
  open_real(fx, &p, block, 2);
  assert_int_equal(slurm_schema_v0038.node_list(answer_json, &l, &e), 0);
  slurm_cloud_nodes(fx->c, l.nodes, l.n);
  assert_string_equal(fx->nodes[0].reason, "Slurm node elastic-h100-9");
  assert_int_equal(fx->nodes[0].gpus, 8);
  slurm_node_list_release(&l);
  json_decref(answer_json);
  peer_stop(fx, &p, srv);
}

/* ARM has no tag filter: the group's VMs come, and only those tagged
 * with the cluster's tag (its name case aside) become nodes.  No address
 * is read (it is the NIC's): the VM named after a Slurm node is it. */
static void
test_an_azure_block_keeps_the_group_vms_of_its_tag(void **state)
{
  struct fx *fx = *state;
  struct peer p;
  struct http_server *srv = peer_start(fx, &p);

  now_value = T_LISTED + 60000;
  open_real(fx, &p, azure_block(&p), 1);
  assert_string_equal(p.paths,
                      "/subscriptions/0b1f6471-1bf0-4dda-aec3-111111111111"
                      "/resourceGroups/rg-slurm/providers/Microsoft.Compute"
                      "/virtualMachines ");
  /* Another listing, so that a VM not kept would have been made by now. */
  next_listing_of(fx, &p);
  assert_int_equal(fx->nnodes, 1);
  assert_string_equal(fx->nodes[0].vm_id, "elastic-h100-2");
  assert_string_equal(fx->nodes[0].zone, "2");
  assert_string_equal(fx->nodes[0].shape, "Standard_ND96isr_H100_v5");
  assert_int_equal(fx->nodes[0].launched_ms, T_LISTED);
  give_nodes(fx);
  assert_string_equal(fx->nodes[0].reason, "Slurm node elastic-h100-2");
  assert_int_equal(fx->nodes[0].gpus, 8);
  peer_stop(fx, &p, srv);
}

/* Open block (new reference, taken) over its real provider and return
 * the refusal's message. */
static void
refused_block(struct fx *fx, json_t *block, const char *want)
{
  struct slurm_cloud_env env = env_of(fx);
  struct slurm_cloud *c = NULL;
  struct err e = {0};
  int rc = slurm_cloud_open(&env, block, &c, &e);
  char *text = json_dumps(block, JSON_COMPACT);

  json_decref(block);
  if (rc != ERR_CONFIG || c != NULL || strstr(e.msg, want) == NULL)
    fail_msg("'%s' refused as %d '%s', not '%s'", text, rc, e.msg, want);
  free(text);
}

/* json with member key set to v (new reference, taken; NULL deletes). */
static json_t *
with(json_t *json, const char *key, json_t *v)
{
  if (v == NULL)
    json_object_del(json, key);
  else
    json_object_set_new(json, key, v);
  return json;
}

/* GCE's labels are lowercase: the block's tag and node_tag are held to
 * Google's rules, and its connection is a gcp site's, zones included. */
static void
test_a_gcp_blocks_errors_name_the_field(void **state)
{
  struct fx *fx = *state;
  struct peer p;
  struct http_server *srv = peer_start(fx, &p);

  refused_block(fx, with(gcp_block(&p), "tag",
                         json_pack("{s:s, s:s}", "key", "Cluster", "value",
                                   "ml")),
                "field 'cloud.tag.key': a GCE label key");
  refused_block(fx, with(gcp_block(&p), "tag",
                         json_pack("{s:s, s:s}", "key", "cluster", "value",
                                   "ML")),
                "field 'cloud.tag.value': a GCE label value");
  refused_block(fx, with(gcp_block(&p), "node_tag", json_string("Name")),
                "field 'cloud.node_tag': a GCE label key");
  refused_block(fx, with(gcp_block(&p), "zones", NULL),
                "cloud (gcp): field 'zones'");
  refused_block(fx, with(gcp_block(&p), "zones",
                         json_pack("[s]", "us-east1-b")),
                "cloud (gcp): field 'zones[0]'");
  refused_block(fx, with(gcp_block(&p), "region", NULL),
                "cloud (gcp): field 'region'");
  refused_block(fx, with(gcp_block(&p), "credentials_file",
                         json_string("/nonexistent/key.json")),
                "cloud (gcp): field 'credentials_file'");
  /* An aws site's fields, or a launch's, are no gcp block's. */
  refused_block(fx, with(gcp_block(&p), "credentials", json_object()),
                "cloud.credentials");
  refused_block(fx, with(gcp_block(&p), "image", json_string("x")),
                "cloud.image");
  peer_stop(fx, &p, srv);
}

static void
test_an_azure_blocks_errors_name_the_field(void **state)
{
  struct fx *fx = *state;
  struct peer p;
  struct http_server *srv = peer_start(fx, &p);

  refused_block(fx, with(azure_block(&p), "tag",
                         json_pack("{s:s, s:s}", "key", "a/b", "value",
                                   "x")),
                "field 'cloud.tag.key': an Azure tag name");
  refused_block(fx, with(azure_block(&p), "node_tag", json_string("a?b")),
                "field 'cloud.node_tag': an Azure tag name");
  refused_block(fx, with(azure_block(&p), "resource_group", NULL),
                "cloud (azure): field 'resource_group'");
  refused_block(fx, with(azure_block(&p), "subscription", NULL),
                "cloud (azure): field 'subscription'");
  refused_block(fx, with(azure_block(&p), "credentials",
                         json_pack("{s:s}", "tenant", "t")),
                "cloud (azure): field 'credentials'");
  refused_block(fx, with(azure_block(&p), "endpoint",
                         json_string("http://example.com")),
                "cloud (azure): field 'endpoint'");
  /* A listing needs no location, and takes none. */
  refused_block(fx, with(azure_block(&p), "location", json_string("eastus")),
                "cloud.location");
  refused_block(fx, with(azure_block(&p), "zones", json_pack("[s]", "1")),
                "cloud.zones");
  peer_stop(fx, &p, srv);
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
      cmocka_unit_test_setup_teardown(
          test_a_gcp_block_lists_its_label_in_each_zone, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_gcp_block_finds_the_node_by_its_node_label, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_an_azure_block_keeps_the_group_vms_of_its_tag, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_a_gcp_blocks_errors_name_the_field, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_an_azure_blocks_errors_name_the_field, setup, teardown),
      cmocka_unit_test(
          test_a_malformed_nodes_answer_is_an_error_naming_the_node),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
