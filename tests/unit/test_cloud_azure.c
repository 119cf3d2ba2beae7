/*
 * Tests for adapters/cloud_azure.c: the azure provider of the VM pool
 * (the token shared and refreshed, the launch's PUT and its operation,
 * the failed VM deleted before a refusal, refusal classes, the listing's
 * pages, terminate, close, the config's checks).
 *
 * The provider is driven through struct cloud_provider only.  Its peer
 * is a fake of ARM and of Entra's token endpoint built on http/server.h
 * in this file, on the same loop (the pattern of test_slurm.c), which
 * answers what each test put in its canned replies, in the shapes of
 * ../shared/research/cloud-contracts.md section 3.  It checks every ARM
 * call's bearer token like ARM: only tokens it issued, and not revoked.
 * A watchdog turns a hang into a failure (a bound, never a measurement).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/cloud_int.h"
#include "http/server.h"
#include "util/alloc.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 60000u
#define INSTANCE "inst1"
#define VMS "/subscriptions/sub-1/resourceGroups/rg-1/providers/" \
            "Microsoft.Compute/virtualMachines"
#define VM_NAME "tenbin-inst1-7"
#define SCRIPT "#!/bin/sh\necho hello from the node\n"
#define MAX_LOG 8192

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* Turn the loop until cond holds (the watchdog bounds it). */
#define RUN_UNTIL(fx, cond)                                                \
  do {                                                                     \
    while (!(cond))                                                        \
      uv_run(&(fx)->loop, UV_RUN_ONCE);                                    \
  } while (0)

/* A canned answer: status, body, and the headers ARM adds. */
struct canned {
  int status;
  const char *body;
  const char *async;       /* Azure-AsyncOperation, or NULL */
  const char *retry_after; /* or NULL */
};

/* What one provider call answered. */
struct got {
  int called;
  int during_call;         /* answered from inside the call */
  int after_close;         /* answered after close's callback */
  struct cloud_result r;
  struct cloud_vm vm;
  size_t n;
  struct cloud_vm vms[8];
};

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_timer_t pause;
  int paused;
  struct http_server *srv;
  char url[64];
  char dir[64];
  char secret_file[128];
  void *prov;
  int in_call;
  int closed;
  int prov_closed;
  struct cloud_shape shape;

  /* what the fake answers */
  int token_status;        /* 200, or an error */
  int token_ttl;
  int min_valid;           /* tokens below this number are revoked */
  int reject_auth;         /* answer this many ARM calls 401 */
  struct canned put, vm_get, del, page1, page2, terminate;
  struct canned ops[8];    /* successive polls of /ops/... */
  int nops;
  int hold_list;           /* hold the next listing unanswered */
  struct http_request *held;

  /* what it was asked */
  int n_tokens;
  int n_401;
  int n_put, n_vm_get, n_del, n_ops, n_list;
  char *put_body;
  char token_form[1024];
  char log[MAX_LOG];       /* "METHOD path" lines of ARM calls */
  uint64_t put_at, first_poll_at;
};

static struct fx *the_fx;

/* ---- the fake ---- */

static void
answer(struct http_request *req, const struct canned *c)
{
  const char *body = c->body != NULL ? c->body : "";

  if (c->async != NULL)
    http_request_add_header(req, "Azure-AsyncOperation", c->async);
  if (c->retry_after != NULL)
    http_request_add_header(req, "Retry-After", c->retry_after);
  http_respond(req, c->status, "application/json", xstrdup(body),
               strlen(body));
}

static void
on_token(struct fx *fx, struct http_request *req)
{
  size_t len;
  const char *form = http_request_body(req, &len);
  char text[256];

  snprintf(fx->token_form, sizeof(fx->token_form), "%s", form);
  if (fx->token_status != 200) {
    const struct canned c = {
        fx->token_status,
        "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS7000215:"
        " Invalid client secret provided.\",\"error_codes\":[7000215]}",
        NULL, NULL};

    answer(req, &c);
    return;
  }
  fx->n_tokens++;
  snprintf(text, sizeof(text),
           "{\"token_type\":\"Bearer\",\"expires_in\":%d,"
           "\"ext_expires_in\":%d,\"access_token\":\"tok-%d\"}",
           fx->token_ttl, fx->token_ttl, fx->n_tokens);
  {
    const struct canned c = {200, text, NULL, NULL};

    answer(req, &c);
  }
}

/* 1 when auth is "Bearer tok-N" of a token issued and not revoked. */
static int
bearer_ok(const struct fx *fx, const char *auth)
{
  char *end;
  long n;

  if (auth == NULL || strncmp(auth, "Bearer tok-", 11) != 0)
    return 0;
  n = strtol(auth + 11, &end, 10);
  return *end == '\0' && n >= fx->min_valid && n >= 1 && n <= fx->n_tokens;
}

static void
on_request(struct http_request *req, void *arg)
{
  struct fx *fx = arg;
  const char *m = http_request_method(req);
  const char *path = http_request_path(req);
  static const struct canned refused = {
      401,
      "{\"error\":{\"code\":\"InvalidAuthenticationToken\",\"message\":"
      "\"The access token is invalid.\"}}",
      NULL, NULL};
  static const struct canned nothing = {
      404, "{\"error\":{\"code\":\"NotFound\",\"message\":\"no route\"}}",
      NULL, NULL};
  size_t used = strlen(fx->log);

  if (strcmp(m, "POST") == 0 && strstr(path, "/oauth2/v2.0/token") != NULL) {
    on_token(fx, req);
    return;
  }
  snprintf(fx->log + used, sizeof(fx->log) - used, "%s %s\n", m, path);
  if (fx->reject_auth > 0 ||
      !bearer_ok(fx, http_request_header(req, "Authorization"))) {
    if (fx->reject_auth > 0)
      fx->reject_auth--;
    fx->n_401++;
    answer(req, &refused);
    return;
  }
  if (strncmp(path, "/ops/", 5) == 0) {
    if (fx->n_ops == 0)
      fx->first_poll_at = uv_now(&fx->loop);
    answer(req, &fx->ops[fx->n_ops < fx->nops ? fx->n_ops : fx->nops - 1]);
    fx->n_ops++;
  } else if (strcmp(path, VMS) == 0 && strcmp(m, "GET") == 0) {
    const char *page = http_request_query(req, "page");

    fx->n_list++;
    if (fx->hold_list) {
      fx->hold_list = 0;
      fx->held = req;
      return;
    }
    answer(req, page != NULL ? &fx->page2 : &fx->page1);
  } else if (strncmp(path, VMS "/", sizeof(VMS)) == 0) {
    if (strcmp(m, "PUT") == 0) {
      size_t len;
      const char *b = http_request_body(req, &len);

      fx->n_put++;
      fx->put_at = uv_now(&fx->loop);
      free(fx->put_body);
      fx->put_body = xstrdup(b);
      answer(req, &fx->put);
    } else if (strcmp(m, "DELETE") == 0) {
      fx->n_del++;
      answer(req, strcmp(path, VMS "/" VM_NAME) == 0 ? &fx->del
                                                     : &fx->terminate);
    } else {
      fx->n_vm_get++;
      answer(req, &fx->vm_get);
    }
  } else {
    answer(req, &nothing);
  }
}

/* A VM as ARM describes it. */
static char *
vm_json(const char *name, const char *state, const char *instance,
        const char *node, const char *zone)
{
  json_t *v = json_pack(
      "{s:s, s:s, s:[s], s:{s:s, s:s}, s:{s:s, s:{s:s}, s:s, s:s}}", "name",
      name, "location", "eastus", "zones", zone, "tags", "tenbin-instance",
      instance, "tenbin-node", node, "properties", "provisioningState", state,
      "hardwareProfile", "vmSize", "Standard_ND96isr_H100_v5", "priority",
      "Regular", "timeCreated", "2026-11-21T13:00:00.1234567+00:00");
  char *text = json_dumps(v, JSON_COMPACT);

  json_decref(v);
  return text;
}

/* ---- fixture ---- */

static void
write_file(const char *path, const char *text, mode_t mode)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(fchmod(fd, mode), 0);
  assert_int_equal(close(fd), 0);
}

static char *vm_creating, *vm_succeeded, *vm_failed;
static char async_create[128], async_delete[128];

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));

  the_fx = fx;
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  uv_timer_init(&fx->loop, &fx->pause);
  fx->pause.data = fx;
  fx->srv = loop_peer_server(&fx->loop, on_request, fx, 32, "", fx->url,
                             sizeof(fx->url));
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/tenbin-test-azure-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  snprintf(fx->secret_file, sizeof(fx->secret_file), "%s/secret", fx->dir);
  write_file(fx->secret_file, "s3cret~value\n", 0600);
  snprintf(async_create, sizeof(async_create), "%s/ops/create?api-version=1",
           fx->url);
  snprintf(async_delete, sizeof(async_delete), "%s/ops/delete?api-version=1",
           fx->url);
  vm_creating = vm_json(VM_NAME, "Creating", INSTANCE, "7", "2");
  vm_succeeded = vm_json(VM_NAME, "Succeeded", INSTANCE, "7", "2");
  vm_failed = vm_json(VM_NAME, "Failed", INSTANCE, "7", "2");
  fx->token_status = 200;
  fx->token_ttl = 3599;
  fx->put = (struct canned){201, vm_creating, async_create, "0"};
  fx->ops[0] = (struct canned){
      200, "{\"status\":\"InProgress\",\"startTime\":\"2026-11-21T13:00:00Z\"}",
      NULL, "0"};
  fx->ops[1] = (struct canned){200, "{\"status\":\"Succeeded\"}", NULL, NULL};
  fx->nops = 2;
  fx->vm_get = (struct canned){200, vm_succeeded, NULL, NULL};
  fx->del = (struct canned){204, "", NULL, NULL};
  fx->terminate = (struct canned){202, "", async_delete, "10"};
  fx->page1 = (struct canned){200, "{\"value\":[]}", NULL, NULL};
  fx->page2 = fx->page1;
  snprintf(fx->shape.name, sizeof(fx->shape.name), "h100x8");
  snprintf(fx->shape.type, sizeof(fx->shape.type),
           "Standard_ND96isr_H100_v5");
  snprintf(fx->shape.gpu_type, sizeof(fx->shape.gpu_type), "h100");
  fx->shape.gpus = 8;
  *state = fx;
  return 0;
}

static void
on_closed(void *arg)
{
  struct fx *fx = arg;

  fx->closed++;
}

static void
on_prov_closed(void *arg)
{
  struct fx *fx = arg;

  fx->prov_closed = 1;
}

static void
close_prov(struct fx *fx)
{
  if (fx->prov == NULL)
    return;
  cloud_azure_provider.close(fx->prov, on_prov_closed, fx);
  fx->prov = NULL;
  RUN_UNTIL(fx, fx->prov_closed);
}

static int
teardown(void **state)
{
  struct fx *fx = *state;

  close_prov(fx);
  /* A held request is answered 503 by the closing server. */
  http_server_close(fx->srv, on_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_close((uv_handle_t *)&fx->pause, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(fx->closed, 1);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  unlink(fx->secret_file);
  rmdir(fx->dir);
  free(fx->put_body);
  free(vm_creating);
  free(vm_succeeded);
  free(vm_failed);
  free(fx);
  return 0;
}

/* The site config with the test's overrides (null removes a field). */
static json_t *
config(struct fx *fx, const char *overrides)
{
  json_t *c = json_pack(
      "{s:s, s:s, s:s, s:[s, s], s:s, s:s, s:{s:s, s:s, s:s}, s:s, s:s, "
      "s:{s:s}}",
      "subscription", "sub-1", "resource_group", "rg-1", "location",
      "eastus", "zones", "1", "2", "endpoint", fx->url, "login_endpoint",
      fx->url, "credentials", "tenant", "contoso.onmicrosoft.com",
      "client_id", "11111111-2222-3333-4444-555555555555",
      "client_secret_file", fx->secret_file, "image",
      "microsoft-dsvm:ubuntu-hpc:2204:latest", "subnet_id",
      "/subscriptions/sub-1/resourceGroups/rg-1/providers/"
      "Microsoft.Network/virtualNetworks/vnet/subnets/default",
      "tags", "team", "ml");
  const char *key;
  json_t *v, *tmp;

  assert_non_null(c);
  if (overrides != NULL) {
    json_t *o = json_loads(overrides, 0, NULL);

    assert_non_null(o);
    json_object_update(c, o);
    json_decref(o);
    json_object_foreach_safe(c, tmp, key, v) {
      if (json_is_null(v))
        json_object_del(c, key);
    }
  }
  return c;
}

static int
try_open(struct fx *fx, const char *overrides, struct err *e)
{
  const struct cloud_env env = {.loop = &fx->loop,
                                .site_name = "az",
                                .shapes = &fx->shape,
                                .nshapes = 1};
  json_t *c = config(fx, overrides);
  int rc = cloud_azure_provider.open(&env, c, &fx->prov, e);

  json_decref(c);
  return rc;
}

static void
open_prov(struct fx *fx, const char *overrides)
{
  struct err e = {0};

  if (try_open(fx, overrides, &e) < 0)
    fail_msg("open: %s", e.msg);
}

/* ---- calls ---- */

static void
record(struct got *g, const struct cloud_result *r)
{
  g->called++;
  g->during_call = the_fx->in_call;
  g->after_close = the_fx->prov_closed;
  g->r = *r;
}

static void
on_launched(void *arg, const struct cloud_result *r, const struct cloud_vm *vm)
{
  struct got *g = arg;

  record(g, r);
  g->vm = *vm;
}

static void
on_listed(void *arg, const struct cloud_result *r, const struct cloud_vm *vms,
          size_t n)
{
  struct got *g = arg;

  record(g, r);
  g->n = n;
  for (size_t i = 0; i < n && i < 8; i++)
    g->vms[i] = vms[i];
}

static void
on_done(void *arg, const struct cloud_result *r)
{
  record(arg, r);
}

static void
launch(struct fx *fx, const char *name, const char *zone, struct got *g)
{
  const struct cloud_launch l = {.node_id = 7,
                                 .name = name,
                                 .token = "tenbin-inst1-7-1",
                                 .shape = &fx->shape,
                                 .zone = zone,
                                 .spot = 0,
                                 .script = SCRIPT,
                                 .instance = INSTANCE,
                                 .node = "7"};

  fx->in_call = 1;
  cloud_azure_provider.launch(fx->prov, &l, on_launched, g);
  fx->in_call = 0;
}

static void
list(struct fx *fx, struct got *g)
{
  fx->in_call = 1;
  cloud_azure_provider.list(fx->prov, INSTANCE, on_listed, g);
  fx->in_call = 0;
}

static void
terminate(struct fx *fx, const char *id, struct got *g)
{
  struct cloud_vm vm;

  memset(&vm, 0, sizeof(vm));
  snprintf(vm.id, sizeof(vm.id), "%s", id);
  snprintf(vm.zone, sizeof(vm.zone), "1");
  fx->in_call = 1;
  cloud_azure_provider.terminate(fx->prov, &vm, on_done, g);
  fx->in_call = 0;
}

static void
on_pause(uv_timer_t *t)
{
  struct fx *fx = t->data;

  fx->paused = 1;
}

static void
pause_ms(struct fx *fx, uint64_t ms)
{
  fx->paused = 0;
  uv_timer_start(&fx->pause, on_pause, ms, 0);
  RUN_UNTIL(fx, fx->paused);
}

/* ---- tests ---- */

static void
test_launch_puts_the_named_vm_and_answers_once_its_operation_succeeded(
    void **state)
{
  struct fx *fx = *state;
  struct got a = {0}, b = {0};
  json_t *body, *props;
  const char *data;

  open_prov(fx, NULL);
  launch(fx, VM_NAME, "2", &a);
  launch(fx, VM_NAME, "2", &b);
  RUN_UNTIL(fx, a.called && b.called);
  assert_int_equal(a.called, 1);
  assert_false(a.during_call);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(b.r.rc, 0);
  /* One token served both calls; the client's secret went in the form. */
  assert_int_equal(fx->n_tokens, 1);
  assert_contains(fx->token_form, "grant_type=client_credentials");
  assert_contains(fx->token_form, "client_secret=s3cret~value");
  assert_contains(fx->token_form,
                  "scope=https%3A%2F%2Fmanagement.azure.com%2F.default");
  assert_int_equal(fx->n_put, 2);
  /* The first poll said InProgress, every later one Succeeded. */
  assert_int_equal(fx->n_ops, 3);
  /* The VM's id is its name, in the zone asked. */
  assert_string_equal(a.vm.id, VM_NAME);
  assert_string_equal(a.vm.zone, "2");
  assert_string_equal(a.vm.shape, "Standard_ND96isr_H100_v5");
  assert_string_equal(a.vm.instance, INSTANCE);
  assert_string_equal(a.vm.node, "7");
  assert_true(a.vm.launched_ms > 0);
  assert_contains(fx->log, "PUT " VMS "/" VM_NAME "\n");
  body = json_loads(fx->put_body, 0, NULL);
  assert_non_null(body);
  props = json_object_get(body, "properties");
  assert_string_equal(json_string_value(json_array_get(
                          json_object_get(body, "zones"), 0)),
                      "2");
  assert_string_equal(
      json_string_value(json_object_get(
          json_object_get(body, "tags"), "tenbin-instance")),
      INSTANCE);
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(body, "tags"), "tenbin-node")),
                      "7");
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(body, "tags"), "team")),
                      "ml");
  data = json_string_value(json_object_get(
      json_object_get(props, "osProfile"), "customData"));
  assert_non_null(data);
  /* base64 of SCRIPT */
  assert_string_equal(data, "IyEvYmluL3NoCmVjaG8gaGVsbG8gZnJvbSB0aGUgbm9kZQo=");
  json_decref(body);
}

static void
test_put_answering_a_vm_that_succeeded_needs_no_poll(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};

  /* A PUT resent after a crash meets the VM the first one made. */
  fx->put = (struct canned){200, vm_succeeded, NULL, NULL};
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "2", &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_string_equal(a.vm.id, VM_NAME);
  assert_int_equal(fx->n_ops + fx->n_vm_get, 0);
}

static void
test_allocation_failure_deletes_the_failed_vm_then_refuses_for_capacity(
    void **state)
{
  struct fx *fx = *state;
  struct got a = {0};

  fx->ops[1] = (struct canned){
      200,
      "{\"status\":\"Failed\",\"error\":{\"code\":\"AllocationFailed\","
      "\"message\":\"Allocation failed. We do not have sufficient capacity "
      "for the requested VM size in this zone.\"}}",
      NULL, NULL};
  fx->ops[2] = (struct canned){200, "{\"status\":\"Succeeded\"}", NULL, NULL};
  fx->nops = 3;
  fx->del = (struct canned){202, "", async_delete, "0"};
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "1", &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, ERR_SITE);
  assert_int_equal(a.r.why, CLOUD_REFUSED_CAPACITY);
  assert_contains(a.r.msg, "AllocationFailed");
  assert_contains(a.r.msg, "zone 1");
  /* The VM was deleted, and the delete awaited, before the answer. */
  assert_int_equal(fx->n_del, 1);
  assert_int_equal(fx->n_ops, 3);
  assert_contains(fx->log, "DELETE " VMS "/" VM_NAME "\nGET /ops/delete\n");
}

static void
test_failed_vm_already_gone_is_not_awaited(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};

  fx->ops[0] = (struct canned){
      200,
      "{\"status\":\"Canceled\",\"error\":{\"code\":\"OperationCanceled\","
      "\"message\":\"canceled\"}}",
      NULL, NULL};
  fx->nops = 1;
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "1", &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.why, CLOUD_REFUSED_OTHER);
  assert_contains(a.r.msg, "was canceled");
  assert_int_equal(fx->n_del, 1);
  assert_int_equal(fx->n_ops, 1);
}

static void
test_refusals_of_the_put_keep_their_class_and_retry_after(void **state)
{
  struct fx *fx = *state;
  static const struct {
    int status;
    const char *body;
    const char *retry;
    enum cloud_refusal why;
    int64_t retry_ms;
  } cases[] = {
      {409,
       "{\"error\":{\"code\":\"OperationNotAllowed\",\"message\":\"Operation "
       "could not be completed as it results in exceeding approved "
       "standardNDSH100v5Family Cores quota.\"}}",
       NULL, CLOUD_REFUSED_QUOTA, -1},
      {409,
       "{\"error\":{\"code\":\"SkuNotAvailable\",\"message\":\"The requested "
       "size is currently not available in location 'eastus' zones '1'.\"}}",
       NULL, CLOUD_REFUSED_CAPACITY, -1},
      {429,
       "{\"error\":{\"code\":\"TooManyRequests\",\"message\":\"slow down\"}}",
       "7", CLOUD_REFUSED_THROTTLE, 7000},
      {500, "<html>oops</html>", NULL, CLOUD_REFUSED_TRANSIENT, -1},
      {400,
       "{\"error\":{\"code\":\"InvalidParameter\",\"message\":\"bad "
       "image\"}}",
       NULL, CLOUD_REFUSED_OTHER, -1},
  };

  open_prov(fx, NULL);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct got a = {0};

    fx->put = (struct canned){cases[i].status, cases[i].body, async_create,
                              cases[i].retry};
    launch(fx, VM_NAME, "1", &a);
    RUN_UNTIL(fx, a.called);
    assert_int_equal(a.r.rc, ERR_SITE);
    assert_int_equal(a.r.why, cases[i].why);
    assert_int_equal(a.r.retry_after_ms, cases[i].retry_ms);
  }
  /* A refused PUT made nothing to poll or delete. */
  assert_int_equal(fx->n_ops + fx->n_del, 0);
}

static void
test_operation_url_off_the_endpoint_is_never_sent_the_token(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};
  char other[128];

  /* The same server under another name: link_ok refuses it, and a fetch
   * would show in the log. */
  snprintf(other, sizeof(other), "http://localhost:%s/ops/create",
           strrchr(fx->url, ':') + 1);
  fx->put = (struct canned){201, vm_creating, other, "0"};
  fx->vm_get = (struct canned){200, vm_creating, NULL, "0"};
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "2", &a);
  RUN_UNTIL(fx, fx->n_vm_get == 2);
  fx->vm_get = (struct canned){200, vm_succeeded, NULL, NULL};
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_ops, 0);
  assert_int_equal(fx->n_vm_get, 3);
}

static void
test_polls_wait_what_retry_after_says(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};

  fx->put = (struct canned){201, vm_creating, async_create, "1"};
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "2", &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  /* A lower bound only: no poll came before the second asked. */
  assert_true(fx->first_poll_at - fx->put_at >= 990);
}

static void
test_401_gets_a_new_token_once_and_retries(void **state)
{
  struct fx *fx = *state;
  struct got a = {0}, b = {0};

  open_prov(fx, NULL);
  list(fx, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_tokens, 1);
  /* Revoked: the next call gets a 401, a new token, and goes through. */
  fx->min_valid = 2;
  memset(&a, 0, sizeof(a));
  list(fx, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_tokens, 2);
  assert_int_equal(fx->n_401, 1);
  /* Refused again with the new one: once only, then AUTH. */
  fx->reject_auth = 2;
  list(fx, &b);
  RUN_UNTIL(fx, b.called);
  assert_int_equal(b.r.rc, ERR_SITE);
  assert_int_equal(b.r.why, CLOUD_REFUSED_AUTH);
  assert_int_equal(fx->n_401, 3);
  assert_int_equal(fx->n_tokens, 3);
}

static void
test_token_is_fetched_again_before_it_expires(void **state)
{
  struct fx *fx = *state;
  struct got a = {0}, b = {0}, c = {0};

  /* 2 s: a new one from 1.5 s, the old one sent until 1.8 s. */
  fx->token_ttl = 2;
  open_prov(fx, NULL);
  list(fx, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(fx->n_tokens, 1);
  list(fx, &b);
  RUN_UNTIL(fx, b.called);
  assert_int_equal(fx->n_tokens, 1);
  pause_ms(fx, 1600);
  list(fx, &c);
  RUN_UNTIL(fx, c.called && fx->n_tokens == 2);
  assert_int_equal(c.r.rc, 0);
  assert_int_equal(fx->n_401, 0);
}

static void
test_refused_credentials_refuse_every_waiting_call_for_auth(void **state)
{
  struct fx *fx = *state;
  struct got a = {0}, b = {0};

  fx->token_status = 401;
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "1", &a);
  list(fx, &b);
  RUN_UNTIL(fx, a.called && b.called);
  assert_false(a.during_call);
  assert_int_equal(a.r.why, CLOUD_REFUSED_AUTH);
  assert_int_equal(b.r.why, CLOUD_REFUSED_AUTH);
  assert_contains(a.r.msg, "invalid_client");
  assert_int_equal(fx->n_put + fx->n_list, 0);
}

static void
test_list_follows_next_link_and_keeps_this_instances_vms(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};
  char *v1 = vm_json("tenbin-inst1-7", "Succeeded", INSTANCE, "7", "1");
  char *v2 = vm_json("other-vm", "Succeeded", "someone-else", "3", "1");
  char *v3 = vm_json("tenbin-inst1-9", "Failed", INSTANCE, "9", "2");
  char p1[2048], p2[2048];

  snprintf(p1, sizeof(p1), "{\"value\":[%s,%s],\"nextLink\":\"%s" VMS
           "?api-version=2024-07-01&page=2\"}", v1, v2, fx->url);
  snprintf(p2, sizeof(p2), "{\"value\":[%s],\"nextLink\":null}", v3);
  fx->page1 = (struct canned){200, p1, NULL, NULL};
  fx->page2 = (struct canned){200, p2, NULL, NULL};
  open_prov(fx, NULL);
  list(fx, &a);
  RUN_UNTIL(fx, a.called);
  assert_false(a.during_call);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_list, 2);
  assert_int_equal(a.n, 2);
  assert_string_equal(a.vms[0].id, "tenbin-inst1-7");
  assert_int_equal(a.vms[0].state, CLOUD_VM_RUNNING);
  assert_string_equal(a.vms[1].id, "tenbin-inst1-9");
  /* Failed: GONE to the pool, which must still delete it. */
  assert_int_equal(a.vms[1].state, CLOUD_VM_GONE);
  assert_string_equal(a.vms[1].node, "9");
  free(v1);
  free(v2);
  free(v3);
}

static void
test_list_refuses_a_next_link_off_the_endpoint(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};

  fx->page1 = (struct canned){
      200,
      "{\"value\":[],\"nextLink\":\"https://evil.example/subscriptions/"
      "x?page=2\"}",
      NULL, NULL};
  open_prov(fx, NULL);
  list(fx, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, ERR_SITE);
  assert_int_equal(a.r.why, CLOUD_REFUSED_OTHER);
  assert_contains(a.r.msg, "nextLink");
  assert_int_equal(fx->n_list, 1);
}

static void
test_terminate_takes_202_and_204_as_done(void **state)
{
  struct fx *fx = *state;
  struct got a = {0}, b = {0}, c = {0}, d = {0};

  open_prov(fx, NULL);
  terminate(fx, "tenbin-inst1-8", &a);
  RUN_UNTIL(fx, a.called);
  assert_false(a.during_call);
  assert_int_equal(a.r.rc, 0);
  /* Not awaited. */
  assert_int_equal(fx->n_ops, 0);
  fx->terminate = (struct canned){204, "", NULL, NULL};
  terminate(fx, "tenbin-inst1-8", &b);
  RUN_UNTIL(fx, b.called);
  assert_int_equal(b.r.rc, 0);
  fx->terminate = (struct canned){
      404,
      "{\"error\":{\"code\":\"ResourceGroupNotFound\",\"message\":\"Resource "
      "group 'rg-1' could not be found.\"}}",
      NULL, NULL};
  terminate(fx, "tenbin-inst1-8", &c);
  RUN_UNTIL(fx, c.called);
  assert_int_equal(c.r.why, CLOUD_REFUSED_OTHER);
  /* A name that is none of ours never reaches a URL. */
  terminate(fx, "../../x", &d);
  RUN_UNTIL(fx, d.called);
  assert_false(d.during_call);
  assert_int_equal(d.r.why, CLOUD_REFUSED_OTHER);
  assert_int_equal(fx->n_del, 3);
}

static void
test_close_answers_calls_still_due_unavailable_before_its_callback(
    void **state)
{
  struct fx *fx = *state;
  struct got a = {0}, b = {0}, c = {0};

  /* a waits 30 s for its next poll, b's listing is held by the peer, c
   * has only just been asked. */
  fx->put = (struct canned){201, vm_creating, async_create, "30"};
  fx->hold_list = 1;
  open_prov(fx, NULL);
  launch(fx, VM_NAME, "2", &a);
  list(fx, &b);
  RUN_UNTIL(fx, fx->n_put == 1 && fx->held != NULL);
  pause_ms(fx, 50);
  terminate(fx, "tenbin-inst1-8", &c);
  cloud_azure_provider.close(fx->prov, on_prov_closed, fx);
  fx->prov = NULL;
  RUN_UNTIL(fx, fx->prov_closed);
  assert_int_equal(a.called + b.called + c.called, 3);
  assert_int_equal(a.r.rc, ERR_UNAVAILABLE);
  assert_int_equal(b.r.rc, ERR_UNAVAILABLE);
  assert_int_equal(c.r.rc, ERR_UNAVAILABLE);
  assert_false(a.after_close || b.after_close || c.after_close);
  assert_int_equal(fx->n_ops, 0);
}

static void
test_environment_credentials_serve_when_the_config_has_none(void **state)
{
  struct fx *fx = *state;
  struct got a = {0};

  setenv("AZURE_TENANT_ID", "contoso.onmicrosoft.com", 1);
  setenv("AZURE_CLIENT_ID", "99999999-2222-3333-4444-555555555555", 1);
  setenv("AZURE_CLIENT_SECRET", "from-the-env", 1);
  open_prov(fx, "{\"credentials\": null}");
  unsetenv("AZURE_TENANT_ID");
  unsetenv("AZURE_CLIENT_ID");
  unsetenv("AZURE_CLIENT_SECRET");
  list(fx, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_contains(fx->token_form,
                  "client_id=99999999-2222-3333-4444-555555555555");
  assert_contains(fx->token_form, "client_secret=from-the-env");
}

static void
test_bad_config_is_refused_naming_the_field(void **state)
{
  struct fx *fx = *state;
  char loose[160];
  char over[512];
  static const struct {
    const char *over;
    const char *msg;
  } cases[] = {
      {"{\"subscription\": null}", "field 'subscription'"},
      {"{\"resource_group\": \"rg/../x\"}", "field 'resource_group'"},
      {"{\"location\": \"East US\"}", "field 'location'"},
      {"{\"zones\": [\"1\", \"eastus-1\"]}", "field 'zones[1]'"},
      {"{\"endpoint\": \"ftp://x\"}", "field 'endpoint'"},
      {"{\"endpoint\": \"http://management.example.com\"}",
       "field 'endpoint': plain http only"},
      {"{\"login_endpoint\": \"http://login.example.com\"}",
       "field 'login_endpoint': plain http only"},
      {"{\"credentials\": {\"tenant\": \"t\"}}", "field 'credentials'"},
      {"{\"credentials\": {\"tenant\": \"t\", \"client_id\": \"c\", "
       "\"client_secret_file\": \"/nonexistent/secret\"}}",
       "field 'credentials.client_secret_file'"},
      {"{\"credentials\": {\"tenant\": \"a/b\", \"client_id\": \"c\", "
       "\"client_secret_file\": \"SECRET\"}}",
       "field 'credentials.tenant'"},
      {"{\"credentials\": {\"tenant\": \"t\", \"client_id\": \"c\", "
       "\"client_secret_file\": \"SECRET\", \"secret\": \"x\"}}",
       "credentials.secret"},
      {"{\"credentials\": null}", "field 'credentials': none found"},
      {"{\"image\": null}", "field 'image'"},
      {"{\"image\": \"ubuntu\"}", "field 'image'"},
      {"{\"nic_id\": \"/subscriptions/s/nic\"}", "field 'subnet_id'"},
      {"{\"subnet_id\": null, \"nic_id\": \"/subscriptions/s/nic\"}",
       "field 'nic_id': one NIC serves one VM"},
      {"{\"subnet_id\": \"subnet-1\"}", "field 'subnet_id'"},
      {"{\"admin_user\": \"Root User\"}", "field 'admin_user'"},
      {"{\"ssh_public_key\": \" ssh-rsa AAAA\"}", "field 'ssh_public_key'"},
      {"{\"tags\": {\"tenbin-node\": \"x\"}}", "field 'tags.tenbin-node'"},
      {"{\"tags\": {\"a\": 1}}", "field 'tags.a'"},
  };

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct err e = {0};
    const char *s = cases[i].over;
    const char *at = strstr(s, "SECRET");

    /* SECRET stands for the good secret file. */
    if (at != NULL)
      snprintf(over, sizeof(over), "%.*s%s%s", (int)(at - s), s,
               fx->secret_file, at + 6);
    else
      snprintf(over, sizeof(over), "%s", s);
    unsetenv("AZURE_TENANT_ID");
    fx->prov = NULL;
    if (try_open(fx, over, &e) == 0)
      fail_msg("case %zu (%s) was accepted", i, over);
    assert_int_equal(e.code, ERR_CONFIG);
    if (strstr(e.msg, cases[i].msg) == NULL)
      fail_msg("case %zu: '%s' does not name '%s'", i, e.msg, cases[i].msg);
    assert_null(fx->prov);
  }
  /* A secret file others may read is refused like an ssh key. */
  snprintf(loose, sizeof(loose), "%s/loose", fx->dir);
  write_file(loose, "s3cret\n", 0644);
  snprintf(over, sizeof(over), "{\"credentials\": {\"tenant\": \"t\", "
           "\"client_id\": \"c\", \"client_secret_file\": \"%s\"}}", loose);
  {
    struct err e = {0};

    assert_int_equal(try_open(fx, over, &e), ERR_CONFIG);
    assert_contains(e.msg, "client_secret_file");
  }
  unlink(loose);
  /* And the shape's type is a VM size. */
  snprintf(fx->shape.type, sizeof(fx->shape.type), "p5.48xlarge");
  {
    struct err e = {0};

    assert_int_equal(try_open(fx, NULL, &e), ERR_CONFIG);
    assert_contains(e.msg, "field 'shapes[0].type'");
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_launch_puts_the_named_vm_and_answers_once_its_operation_succeeded,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_put_answering_a_vm_that_succeeded_needs_no_poll, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_allocation_failure_deletes_the_failed_vm_then_refuses_for_capacity,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_failed_vm_already_gone_is_not_awaited, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_refusals_of_the_put_keep_their_class_and_retry_after, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_operation_url_off_the_endpoint_is_never_sent_the_token, setup,
          teardown),
      cmocka_unit_test_setup_teardown(test_polls_wait_what_retry_after_says,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_401_gets_a_new_token_once_and_retries, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_token_is_fetched_again_before_it_expires, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_refused_credentials_refuse_every_waiting_call_for_auth, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_list_follows_next_link_and_keeps_this_instances_vms, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_list_refuses_a_next_link_off_the_endpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_terminate_takes_202_and_204_as_done, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_close_answers_calls_still_due_unavailable_before_its_callback,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_environment_credentials_serve_when_the_config_has_none, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_bad_config_is_refused_naming_the_field, setup, teardown),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
