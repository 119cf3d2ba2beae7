/*
 * Tests for adapters/cloud_gcp.c: the gcp provider of the VM pool (its
 * config checks, the shared access token and its renewal, a 401 renewing
 * it once, an insert followed to its operation's end, refusals read by
 * class, listings over zones and pages, deletes, close).
 *
 * The provider is driven through struct cloud_provider, as the pool
 * drives it.  Its peer is a fake token endpoint and Compute Engine built
 * on http/server.h in this file, on the same loop, answering with the
 * shapes Google documents (the fixtures of test_gce.c): a token is
 * "tok-N", and Compute takes only the token the fake says is valid.  It
 * can hold the token request, so that a test decides when the token
 * comes.  A watchdog turns a hang into a failure.
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
#include "adapters/gce.h"
#include "http/server.h"
#include "util/alloc.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 60000u
#define ZONES "/compute/v1/projects/demo-proj/zones/"
#define NAME "tenbin-abc123-7"
#define TOKEN "tenbin-abc123-7-1"

#define assert_contains(hay, needle)                                           \
  do {                                                                         \
    if (strstr((hay), (needle)) == NULL)                                       \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));                 \
  } while (0)

#define RUN_UNTIL(fx, cond)                                                    \
  do {                                                                         \
    while (!(cond))                                                            \
      uv_run(&(fx)->loop, UV_RUN_ONCE);                                        \
  } while (0)

/* What one call came to. */
struct res {
  int called;
  struct cloud_result r;
  struct cloud_vm vm;
  size_t n;
  char ids[8][CLOUD_ID_LEN];
};

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_timer_t pause;
  int paused;
  struct http_server *srv;
  char url[64];
  char dir[64];
  char key[128];
  void *g;
  int closed;
  json_t *config;
  json_t *shapes;
  struct cloud_shape shape[2];

  /* the token endpoint */
  int n_token;
  int token_ttl;
  int token_status; /* 200, or an error answer */
  int hold_token;
  struct http_request *held_token;
  int min_tok; /* Compute takes tok-N for N >= this */

  /* Compute */
  int n_insert, n_poll, n_list, n_delete, n_401;
  int insert_status;
  const char *insert_body;
  const char *insert_retry_after;
  const char *ops[4]; /* polls answered in turn, the last again */
  int nops;
  int delete_status;
  char *got_insert;
  char request_id[64];
  char filter[256];
  char auth[128];
  char list_zones[512];
};

/* ---- answers ---- */

static const char OP_RUNNING[] =
    "{\"kind\":\"compute#operation\",\"name\":\"op-1\",\"status\":"
    "\"RUNNING\",\"targetLink\":\"https://compute.googleapis.com/compute/"
    "v1/projects/demo-proj/zones/us-central1-a/instances/" NAME "\"}";
static const char OP_DONE[] =
    "{\"kind\":\"compute#operation\",\"name\":\"op-1\",\"status\":\"DONE\","
    "\"targetLink\":\"https://compute.googleapis.com/compute/v1/projects/"
    "demo-proj/zones/us-central1-a/instances/" NAME "\"}";
static const char OP_NO_CAPACITY[] =
    "{\"kind\":\"compute#operation\",\"name\":\"op-1\",\"status\":\"DONE\","
    "\"httpErrorStatusCode\":503,\"error\":{\"errors\":[{\"code\":"
    "\"ZONE_RESOURCE_POOL_EXHAUSTED\",\"message\":\"The zone does not have "
    "enough resources available to fulfill the request.\"}]}}";
static const char OP_NO_QUOTA[] =
    "{\"kind\":\"compute#operation\",\"name\":\"op-1\",\"status\":\"DONE\","
    "\"httpErrorStatusCode\":403,\"error\":{\"errors\":[{\"code\":"
    "\"QUOTA_EXCEEDED\",\"message\":\"Quota 'NVIDIA_H100_GPUS' "
    "exceeded.\"}]}}";
static const char ERR_EXISTS[] =
    "{\"error\":{\"code\":409,\"message\":\"The resource 'projects/demo-"
    "proj/zones/us-central1-a/instances/" NAME "' already exists\","
    "\"errors\":[{\"message\":\"already exists\",\"domain\":\"global\","
    "\"reason\":\"alreadyExists\"}]}}";
static const char ERR_RATE_403[] =
    "{\"error\":{\"code\":403,\"message\":\"Rate Limit Exceeded\","
    "\"errors\":[{\"message\":\"Rate Limit Exceeded\",\"domain\":"
    "\"usageLimits\",\"reason\":\"rateLimitExceeded\"}]}}";
static const char ERR_RATE_429[] =
    "{\"error\":{\"code\":429,\"message\":\"Quota exceeded for quota "
    "metric 'Queries'\",\"status\":\"RESOURCE_EXHAUSTED\",\"errors\":[{"
    "\"message\":\"Quota exceeded\",\"domain\":\"global\",\"reason\":"
    "\"rateLimitExceeded\"}]}}";
static const char ERR_IMAGE[] =
    "{\"error\":{\"code\":404,\"message\":\"The resource 'projects/debian-"
    "cloud/global/images/nope' was not found\",\"errors\":[{\"reason\":"
    "\"notFound\",\"domain\":\"global\",\"message\":\"not found\"}]}}";
static const char ERR_AUTH[] =
    "{\"error\":{\"code\":401,\"message\":\"Request had invalid "
    "authentication credentials.\",\"status\":\"UNAUTHENTICATED\","
    "\"errors\":[{\"message\":\"Invalid Credentials\",\"domain\":"
    "\"global\",\"reason\":\"authError\"}]}}";
static const char ERR_GONE[] =
    "{\"error\":{\"code\":404,\"message\":\"The resource 'projects/demo-"
    "proj/zones/us-central1-a/instances/gone' was not found\",\"errors\":"
    "[{\"reason\":\"notFound\",\"domain\":\"global\",\"message\":\"x\"}]}}";

static char *
instance_json(const char *name, const char *zone, const char *status)
{
  json_t *v =
      json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "kind",
                "compute#instance", "name", name, "status", status, "zone",
                zone, "machineType", "zones/x/machineTypes/a3-highgpu-8g",
                "scheduling", "provisioningModel", "STANDARD", "labels",
                CLOUD_TAG_INSTANCE, "abc123", CLOUD_TAG_NODE, "7");
  char *s = json_dumps(v, JSON_COMPACT);

  json_decref(v);
  return s;
}

/* The listing: zone a holds two pages, zone b one VM. */
static char *
list_page(const char *zone, const char *page)
{
  struct buf b;
  char *i1, *i2;

  buf_init(&b, 1 << 20);
  if (strcmp(zone, "us-central1-a") == 0 && (page == NULL || !*page)) {
    i1 = instance_json("vm-a1", "zones/us-central1-a", "RUNNING");
    i2 = instance_json("vm-a2", "zones/us-central1-a", "STAGING");
    assert_int_equal(buf_addf(&b,
                              "{\"kind\":\"compute#instanceList\","
                              "\"items\":[%s,%s],\"nextPageToken\":\"p2\"}",
                              i1, i2),
                     0);
  } else if (strcmp(zone, "us-central1-a") == 0) {
    assert_string_equal(page, "p2");
    i1 = instance_json("vm-a3", "zones/us-central1-a", "STOPPING");
    i2 = NULL;
    assert_int_equal(buf_addf(&b,
                              "{\"kind\":\"compute#instanceList\","
                              "\"items\":[%s]}",
                              i1),
                     0);
  } else {
    i1 = instance_json("vm-b1", "zones/us-central1-b", "RUNNING");
    i2 = NULL;
    assert_int_equal(buf_addf(&b,
                              "{\"kind\":\"compute#instanceList\","
                              "\"items\":[%s]}",
                              i1),
                     0);
  }
  free(i1);
  free(i2);
  return buf_take(&b, NULL);
}

static void
respond(struct http_request *req, int status, const char *body)
{
  http_respond(req, status, "application/json; charset=UTF-8", xstrdup(body),
               strlen(body));
}

static void
answer_token(struct fx *fx, struct http_request *req)
{
  char body[256];

  if (fx->token_status != 200) {
    respond(req, fx->token_status,
            "{\"error\":\"invalid_grant\","
            "\"error_description\":\"Invalid JWT Signature.\"}");
    return;
  }
  snprintf(body, sizeof(body),
           "{\"access_token\":\"tok-%d\",\"expires_in\""
           ":%d,\"token_type\":\"Bearer\"}",
           fx->n_token, fx->token_ttl);
  respond(req, 200, body);
}

static void
on_request(struct http_request *req, void *arg)
{
  struct fx *fx = arg;
  const char *path = http_request_path(req);
  const char *method = http_request_method(req);
  const char *auth = http_request_header(req, "Authorization");
  char zone[32] = "";
  const char *rest;
  int tok = 0;

  if (strcmp(path, "/token") == 0) {
    const char *body = http_request_body(req, NULL);

    assert_string_equal(method, "POST");
    assert_contains(body, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3A"
                          "grant-type%3Ajwt-bearer&assertion=ey");
    fx->n_token++;
    if (fx->hold_token && fx->held_token == NULL) {
      fx->held_token = req;
      return;
    }
    answer_token(fx, req);
    return;
  }
  snprintf(fx->auth, sizeof(fx->auth), "%s", auth != NULL ? auth : "");
  if (auth != NULL && strncmp(auth, "Bearer tok-", 11) == 0)
    tok = (int)strtol(auth + 11, NULL, 10);
  if (tok < fx->min_tok || tok > fx->n_token) {
    fx->n_401++;
    respond(req, 401, ERR_AUTH);
    return;
  }
  assert_int_equal(strncmp(path, ZONES, strlen(ZONES)), 0);
  rest = path + strlen(ZONES);
  snprintf(zone, sizeof(zone), "%.*s", (int)strcspn(rest, "/"), rest);
  rest += strlen(zone);
  if (strcmp(method, "POST") == 0 && strcmp(rest, "/instances") == 0) {
    fx->n_insert++;
    free(fx->got_insert);
    fx->got_insert = xstrdup(http_request_body(req, NULL));
    snprintf(fx->request_id, sizeof(fx->request_id), "%s",
             http_request_query(req, "requestId"));
    if (fx->insert_retry_after != NULL)
      http_request_add_header(req, "Retry-After", fx->insert_retry_after);
    respond(req, fx->insert_status, fx->insert_body);
  } else if (strcmp(method, "GET") == 0 &&
             strcmp(rest, "/operations/op-1") == 0) {
    respond(req, 200,
            fx->ops[fx->n_poll < fx->nops ? fx->n_poll : fx->nops - 1]);
    fx->n_poll++;
  } else if (strcmp(method, "GET") == 0 && strcmp(rest, "/instances") == 0) {
    char *page = list_page(zone, http_request_query(req, "pageToken"));

    fx->n_list++;
    snprintf(fx->filter, sizeof(fx->filter), "%s",
             http_request_query(req, "filter"));
    snprintf(fx->list_zones + strlen(fx->list_zones),
             sizeof(fx->list_zones) - strlen(fx->list_zones), "%s ", zone);
    http_respond(req, 200, "application/json", page, strlen(page));
  } else if (strcmp(method, "DELETE") == 0 &&
             strncmp(rest, "/instances/", 11) == 0) {
    fx->n_delete++;
    assert_non_null(http_request_query(req, "requestId"));
    respond(req, fx->delete_status,
            fx->delete_status == 200 ? OP_RUNNING : ERR_GONE);
  } else {
    fail_msg("unexpected %s %s", method, path);
  }
}

/* ---- fixture ---- */

static void
write_key(struct fx *fx, mode_t mode)
{
  char path[512];
  json_t *sa;
  char *text;
  int fd;

  snprintf(path, sizeof(path), "%s/tests/data/gcp/service-account.json",
           TENBIN_SOURCE_DIR);
  sa = json_load_file(path, 0, NULL);
  assert_non_null(sa);
  snprintf(path, sizeof(path), "%s/token", fx->url);
  json_object_set_new(sa, "token_uri", json_string(path));
  text = json_dumps(sa, 0);
  unlink(fx->key);
  fd = open(fx->key, O_WRONLY | O_CREAT | O_EXCL, mode);
  assert_true(fd >= 0);
  assert_int_equal(fchmod(fd, mode), 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(close(fd), 0);
  free(text);
  json_decref(sa);
}

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));
  char endpoint[128];

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  uv_timer_init(&fx->loop, &fx->pause);
  fx->pause.data = fx;
  fx->srv = loop_peer_server(&fx->loop, on_request, fx, 32, "", fx->url,
                             sizeof(fx->url));
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/tenbin-test-gcp-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  snprintf(fx->key, sizeof(fx->key), "%s/key.json", fx->dir);
  write_key(fx, 0600);
  snprintf(endpoint, sizeof(endpoint), "%s/compute/v1/", fx->url);
  fx->shapes = json_pack(
      "[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i, s:{s:s, s:i}}]", "name",
      "a3", "type", "a3-highgpu-8g", "gpu_type", "h100", "gpus", 8, "name",
      "t4", "type", "n1-standard-8", "gpu_type", "t4", "gpus", 2, "accelerator",
      "type", "nvidia-tesla-t4", "count", 2);
  fx->config = json_pack("{s:s, s:s, s:[s, s], s:s, s:s, s:s, s:O, s:{s:s}}",
                         "kind", "gcp", "region", "us-central1", "zones",
                         "us-central1-a", "us-central1-b", "endpoint", endpoint,
                         "credentials_file", fx->key, "image",
                         "projects/debian-cloud/global/images/family/debian-12",
                         "shapes", fx->shapes, "labels", "team", "ml");
  assert_non_null(fx->config);
  for (size_t i = 0; i < 2; i++) {
    json_t *s = json_array_get(fx->shapes, i);

    snprintf(fx->shape[i].name, CLOUD_NAME_LEN, "%s",
             json_string_value(json_object_get(s, "name")));
    snprintf(fx->shape[i].type, CLOUD_NAME_LEN, "%s",
             json_string_value(json_object_get(s, "type")));
    fx->shape[i].gpus = json_integer_value(json_object_get(s, "gpus"));
    fx->shape[i].config = s;
  }
  fx->token_ttl = 3600;
  fx->token_status = 200;
  fx->min_tok = 1;
  fx->insert_status = 200;
  fx->insert_body = OP_RUNNING;
  fx->ops[0] = OP_RUNNING;
  fx->ops[1] = OP_DONE;
  fx->nops = 2;
  fx->delete_status = 200;
  *state = fx;
  return 0;
}

static int
open_gcp(struct fx *fx, struct err *e)
{
  struct cloud_env env = {
      .loop = &fx->loop, .site_name = "gcp", .shapes = fx->shape, .nshapes = 2};

  return cloud_gcp_provider.open(&env, fx->config, &fx->g, e);
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed++;
}

static void
close_gcp(struct fx *fx)
{
  int want = fx->closed + 1;

  cloud_gcp_provider.close(fx->g, on_closed, fx);
  fx->g = NULL;
  RUN_UNTIL(fx, fx->closed == want);
}

static int
teardown(void **state)
{
  struct fx *fx = *state;
  int want;

  if (fx->g != NULL)
    close_gcp(fx);
  want = fx->closed + 1;
  /* A held request is answered 503 by the closing server. */
  http_server_close(fx->srv, on_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_close((uv_handle_t *)&fx->pause, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(fx->closed, want);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  unlink(fx->key);
  rmdir(fx->dir);
  json_decref(fx->config);
  json_decref(fx->shapes);
  free(fx->got_insert);
  free(fx);
  return 0;
}

static void
on_pause(uv_timer_t *t)
{
  ((struct fx *)t->data)->paused = 1;
}

/* Turn the loop for ms. */
static void
pause_ms(struct fx *fx, uint64_t ms)
{
  fx->paused = 0;
  uv_timer_start(&fx->pause, on_pause, ms, 0);
  RUN_UNTIL(fx, fx->paused);
}

/* ---- calls ---- */

static void
on_launch(void *arg, const struct cloud_result *r, const struct cloud_vm *vm)
{
  struct res *res = arg;

  res->called++;
  res->r = *r;
  res->vm = *vm;
}

static void
on_list(void *arg, const struct cloud_result *r, const struct cloud_vm *vms,
        size_t n)
{
  struct res *res = arg;

  res->called++;
  res->r = *r;
  res->n = n;
  for (size_t i = 0; i < n && i < 8; i++)
    snprintf(res->ids[i], CLOUD_ID_LEN, "%s", vms[i].id);
}

static void
on_done(void *arg, const struct cloud_result *r)
{
  struct res *res = arg;

  res->called++;
  res->r = *r;
}

static void
launch(struct fx *fx, int shape, struct res *res)
{
  struct cloud_launch l = {.node_id = 7,
                           .name = NAME,
                           .token = TOKEN,
                           .shape = &fx->shape[shape],
                           .zone = "us-central1-a",
                           .spot = 0,
                           .script = "#!/bin/sh\necho 'hello'\n",
                           .instance = "abc123",
                           .node = "7"};

  cloud_gcp_provider.launch(fx->g, &l, on_launch, res);
  /* Never from inside the call. */
  assert_int_equal(res->called, 0);
}

static void
terminate(struct fx *fx, const char *id, struct res *res)
{
  struct cloud_vm vm;

  memset(&vm, 0, sizeof(vm));
  snprintf(vm.id, sizeof(vm.id), "%s", id);
  snprintf(vm.zone, sizeof(vm.zone), "us-central1-a");
  cloud_gcp_provider.terminate(fx->g, &vm, on_done, res);
  assert_int_equal(res->called, 0);
}

/* ---- tests ---- */

/* Each override of the good config, and what open must say of it. */
static void
test_open_names_the_field_google_would_refuse(void **state)
{
  struct fx *fx = *state;
  static const struct {
    const char *over; /* merged into the config; null removes */
    const char *says;
  } cases[] = {
      {"{\"region\": null}", "field 'region'"},
      {"{\"region\": \"US-Central1\"}", "field 'region'"},
      {"{\"zones\": [\"us-central1-a\", \"europe-west4-a\"]}",
       "field 'zones[1]': 'europe-west4-a' is not a zone of region "
       "us-central1"},
      {"{\"zones\": [\"us-central1-ab\"]}", "field 'zones[0]'"},
      {"{\"zones\": [\"us-central1\"]}", "field 'zones[0]'"},
      {"{\"image\": null}", "field 'image'"},
      {"{\"image\": \"has space\"}", "field 'image'"},
      {"{\"endpoint\": \"ftp://x\"}", "field 'endpoint'"},
      {"{\"labels\": {\"Team\": \"ml\"}}", "field 'labels.Team'"},
      {"{\"labels\": {\"team\": \"M L\"}}", "field 'labels.team'"},
      {"{\"labels\": {\"tenbin-x\": \"y\"}}", "field 'labels.tenbin-x'"},
      {"{\"labels\": [\"team\"]}", "field 'labels'"},
      {"{\"disk_size_gb\": 5}", "field 'disk_size_gb'"},
      {"{\"disk_type\": \"pd balanced\"}", "field 'disk_type'"},
      {"{\"project\": \"my/proj\"}", "field 'project'"},
      {"{\"credentials_file\": \"/nonexistent/key.json\"}",
       "field 'credentials_file'"},
  };

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    json_t *saved = json_deep_copy(fx->config);
    json_t *over = json_loads(cases[i].over, 0, NULL);
    const char *key;
    json_t *v;
    struct err e = {0};

    assert_non_null(over);
    json_object_foreach(over, key, v)
    {
      if (json_is_null(v))
        json_object_del(fx->config, key);
      else
        json_object_set(fx->config, key, v);
    }
    if (open_gcp(fx, &e) != ERR_CONFIG || e.code != ERR_CONFIG ||
        strstr(e.msg, cases[i].says) == NULL)
      fail_msg("case %zu (%s): code %d: %s", i, cases[i].over, e.code, e.msg);
    json_decref(over);
    json_decref(fx->config);
    fx->config = saved;
  }
}

static void
test_open_checks_shapes_and_their_accelerators(void **state)
{
  struct fx *fx = *state;
  json_t *t4 = json_array_get(fx->shapes, 1);
  json_t *acc = json_object_get(t4, "accelerator");
  struct err e = {0};

  json_object_set_new(acc, "count", json_integer(4));
  assert_int_equal(open_gcp(fx, &e), ERR_CONFIG);
  assert_contains(e.msg, "field 'shapes[1].accelerator.count': 4, but the "
                         "shape has 2 gpus");
  json_object_set_new(acc, "count", json_integer(2));
  json_object_set_new(acc, "type", json_string("NVIDIA T4"));
  assert_int_equal(open_gcp(fx, &e), ERR_CONFIG);
  assert_contains(e.msg, "field 'shapes[1].accelerator.type'");
  json_object_del(t4, "accelerator");
  assert_int_equal(open_gcp(fx, &e), ERR_CONFIG);
  assert_contains(e.msg, "field 'shapes[1].accelerator': an N1 machine "
                         "type has GPUs only as accelerators");
  json_object_set_new(
      t4, "accelerator",
      json_pack("{s:s, s:i}", "type", "nvidia-tesla-t4", "count", 2));
  snprintf(fx->shape[0].type, CLOUD_NAME_LEN, "A3_HIGHGPU");
  assert_int_equal(open_gcp(fx, &e), ERR_CONFIG);
  assert_contains(e.msg, "shape 'a3'");
  assert_contains(e.msg, "machine_type");
}

static void
test_open_refuses_a_key_file_others_can_read(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};

  write_key(fx, 0644);
  assert_int_equal(open_gcp(fx, &e), ERR_CONFIG);
  assert_contains(e.msg, "field 'credentials_file'");
  assert_int_equal(fx->n_token, 0);
  /* Without the field, $GOOGLE_APPLICATION_CREDENTIALS is the key. */
  write_key(fx, 0600);
  json_object_del(fx->config, "credentials_file");
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  assert_int_equal(open_gcp(fx, &e), ERR_CONFIG);
  assert_contains(e.msg, "GOOGLE_APPLICATION_CREDENTIALS");
  setenv("GOOGLE_APPLICATION_CREDENTIALS", fx->key, 1);
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  RUN_UNTIL(fx, fx->n_token == 1);
}

static void
test_concurrent_calls_share_one_token_request(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0}, l = {0};
  struct err e = {0};

  fx->hold_token = 1;
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  /* open asks at once; the calls wait for that one answer */
  RUN_UNTIL(fx, fx->held_token != NULL);
  launch(fx, 0, &a);
  cloud_gcp_provider.list(fx->g, "abc123", on_list, &l);
  terminate(fx, "vm-old", &b);
  pause_ms(fx, 100);
  assert_int_equal(fx->n_token, 1);
  assert_int_equal(a.called + b.called + l.called, 0);
  answer_token(fx, fx->held_token);
  fx->held_token = NULL;
  RUN_UNTIL(fx, a.called && b.called && l.called);
  assert_int_equal(fx->n_token, 1);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(b.r.rc, 0);
  assert_int_equal(l.r.rc, 0);
  assert_string_equal(fx->auth, "Bearer tok-1");
}

static void
test_launch_inserts_with_the_token_as_request_id_and_polls_to_done(void **state)
{
  struct fx *fx = *state;
  char rid[GCE_REQUEST_ID_LEN];
  struct res a = {0};
  struct err e = {0};
  json_t *body;

  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  launch(fx, 1, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_string_equal(a.vm.id, NAME);
  assert_string_equal(a.vm.zone, "us-central1-a");
  assert_string_equal(a.vm.shape, "n1-standard-8");
  assert_string_equal(a.vm.node, "7");
  assert_int_equal(fx->n_insert, 1);
  /* the insert answered RUNNING, then a poll RUNNING, then DONE */
  assert_int_equal(fx->n_poll, 2);
  gce_request_id(TOKEN, rid);
  assert_string_equal(fx->request_id, rid);
  body = json_loads(fx->got_insert, 0, NULL);
  assert_non_null(body);
  assert_string_equal(json_string_value(json_object_get(body, "name")), NAME);
  assert_string_equal(json_string_value(json_object_get(body, "machineType")),
                      "zones/us-central1-a/machineTypes/n1-standard-8");
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(body, "labels"), "tenbin-node")),
                      "7");
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(body, "labels"), "team")),
                      "ml");
  assert_contains(fx->got_insert, "\"key\":\"startup-script\",\"value\":"
                                  "\"#!/bin/sh\\necho 'hello'\\n\"");
  assert_contains(fx->got_insert, "\"acceleratorType\":\"zones/us-central1-"
                                  "a/acceleratorTypes/nvidia-tesla-t4\"");
  assert_contains(fx->got_insert, "\"diskSizeGb\":\"100\"");
  assert_contains(fx->got_insert, "ONE_TO_ONE_NAT");
  json_decref(body);
}

static void
test_insert_409_already_exists_is_that_vm(void **state)
{
  struct fx *fx = *state;
  struct res a = {0};
  struct err e = {0};

  fx->insert_status = 409;
  fx->insert_body = ERR_EXISTS;
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  launch(fx, 0, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_string_equal(a.vm.id, NAME);
  assert_int_equal(fx->n_poll, 0);
}

static void
test_refusals_are_read_by_class(void **state)
{
  struct fx *fx = *state;
  static const struct {
    int status;
    const char *insert;
    const char *op;
    const char *retry_after;
    enum cloud_refusal why;
    int64_t retry_ms;
  } cases[] = {
      {200, OP_NO_CAPACITY, NULL, NULL, CLOUD_REFUSED_CAPACITY, -1},
      {200, OP_RUNNING, OP_NO_QUOTA, NULL, CLOUD_REFUSED_QUOTA, -1},
      {403, ERR_RATE_403, NULL, NULL, CLOUD_REFUSED_THROTTLE, -1},
      {429, ERR_RATE_429, NULL, "7", CLOUD_REFUSED_THROTTLE, 7000},
      {404, ERR_IMAGE, NULL, NULL, CLOUD_REFUSED_OTHER, -1},
      {503, "<html>busy</html>", NULL, NULL, CLOUD_REFUSED_TRANSIENT, -1},
      {200, "{\"kind\": 3}", NULL, NULL, CLOUD_REFUSED_TRANSIENT, -1},
  };
  struct err e = {0};

  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct res a = {0};

    fx->insert_status = cases[i].status;
    fx->insert_body = cases[i].insert;
    fx->insert_retry_after = cases[i].retry_after;
    fx->ops[0] = cases[i].op;
    fx->nops = 1;
    fx->n_poll = 0;
    launch(fx, 0, &a);
    RUN_UNTIL(fx, a.called);
    if (a.r.rc == 0 || a.r.why != cases[i].why)
      fail_msg("case %zu: rc %d, class %d (%s)", i, a.r.rc, (int)a.r.why,
               a.r.msg);
    assert_int_equal(a.r.retry_after_ms, cases[i].retry_ms);
  }
}

static void
test_401_renews_the_token_once_and_sends_again(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};
  struct err e = {0};

  fx->insert_body = OP_DONE;
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  RUN_UNTIL(fx, fx->n_token == 1);
  /* tok-1 revoked: the next token is good */
  fx->min_tok = 2;
  launch(fx, 0, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_token, 2);
  assert_int_equal(fx->n_401, 1);
  assert_int_equal(fx->n_insert, 1);
  /* Every token refused: renewed once, then the refusal stands. */
  fx->min_tok = 1000000;
  launch(fx, 0, &b);
  RUN_UNTIL(fx, b.called);
  assert_true(b.r.rc < 0);
  assert_int_equal(b.r.why, CLOUD_REFUSED_AUTH);
  assert_int_equal(fx->n_token, 3);
  assert_int_equal(fx->n_401, 3);
}

static void
test_a_refused_grant_refuses_the_call_as_auth(void **state)
{
  struct fx *fx = *state;
  struct res a = {0};
  struct err e = {0};

  fx->token_status = 400;
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  launch(fx, 0, &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.why, CLOUD_REFUSED_AUTH);
  assert_contains(a.r.msg, "invalid_grant");
  assert_int_equal(fx->n_insert, 0);
}

static void
test_token_is_renewed_before_it_expires(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};
  struct err e = {0};

  /* 2 s: renewed after 1 s, used until 1.8 s */
  fx->token_ttl = 2;
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  RUN_UNTIL(fx, fx->n_token == 1);
  pause_ms(fx, 1200);
  terminate(fx, "vm-1", &a);
  RUN_UNTIL(fx, a.called && fx->n_token == 2);
  assert_int_equal(a.r.rc, 0);
  /* that call did not wait: it went with the old token */
  assert_string_equal(fx->auth, "Bearer tok-1");
  terminate(fx, "vm-2", &b);
  RUN_UNTIL(fx, b.called);
  assert_string_equal(fx->auth, "Bearer tok-2");
  assert_int_equal(fx->n_401, 0);
}

static void
test_list_reads_every_zone_page_by_page(void **state)
{
  struct fx *fx = *state;
  struct res l = {0};
  struct err e = {0};

  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  cloud_gcp_provider.list(fx->g, "abc123", on_list, &l);
  assert_int_equal(l.called, 0);
  RUN_UNTIL(fx, l.called);
  assert_int_equal(l.r.rc, 0);
  assert_int_equal(l.n, 4);
  assert_string_equal(l.ids[0], "vm-a1");
  assert_string_equal(l.ids[2], "vm-a3");
  assert_string_equal(l.ids[3], "vm-b1");
  assert_int_equal(fx->n_list, 3);
  assert_string_equal(fx->list_zones,
                      "us-central1-a us-central1-a us-central1-b ");
  assert_string_equal(fx->filter, "labels.tenbin-instance = \"abc123\"");
}

static void
test_terminate_returns_once_the_delete_is_accepted_and_gone_is_done(
    void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};
  struct err e = {0};

  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  terminate(fx, "vm-1", &a);
  RUN_UNTIL(fx, a.called);
  assert_int_equal(a.r.rc, 0);
  assert_int_equal(fx->n_poll, 0);
  fx->delete_status = 404;
  terminate(fx, "gone", &b);
  RUN_UNTIL(fx, b.called);
  assert_int_equal(b.r.rc, 0);
  assert_int_equal(fx->n_delete, 2);
}

static void
test_close_answers_every_call_due_unavailable_first(void **state)
{
  struct fx *fx = *state;
  struct res a = {0}, b = {0};
  struct err e = {0};
  int want = fx->closed + 1;

  fx->nops = 1; /* polls answer RUNNING for ever */
  if (open_gcp(fx, &e) < 0)
    fail_msg("open: %s", e.msg);
  launch(fx, 0, &a);
  RUN_UNTIL(fx, fx->n_poll >= 1);
  /* one polling in its backoff, one waiting for a token */
  fx->hold_token = 1;
  fx->min_tok = 1000000;
  terminate(fx, "vm-1", &b);
  RUN_UNTIL(fx, fx->held_token != NULL);
  cloud_gcp_provider.close(fx->g, on_closed, fx);
  fx->g = NULL;
  RUN_UNTIL(fx, fx->closed == want);
  assert_int_equal(a.called, 1);
  assert_int_equal(a.r.rc, ERR_UNAVAILABLE);
  assert_int_equal(b.called, 1);
  assert_int_equal(b.r.rc, ERR_UNAVAILABLE);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_open_names_the_field_google_would_refuse, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_open_checks_shapes_and_their_accelerators, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_open_refuses_a_key_file_others_can_read, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_concurrent_calls_share_one_token_request, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_launch_inserts_with_the_token_as_request_id_and_polls_to_done,
          setup, teardown),
      cmocka_unit_test_setup_teardown(test_insert_409_already_exists_is_that_vm,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_refusals_are_read_by_class, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_401_renews_the_token_once_and_sends_again, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_a_refused_grant_refuses_the_call_as_auth, setup, teardown),
      cmocka_unit_test_setup_teardown(test_token_is_renewed_before_it_expires,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_list_reads_every_zone_page_by_page,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_terminate_returns_once_the_delete_is_accepted_and_gone_is_done,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_close_answers_every_call_due_unavailable_first, setup, teardown),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
