/*
 * Tests for sync/agent_client.c: the requests it sends to a tenbin-agent
 * and how it reads the answers and maps the errors.
 *
 * The peer is a small fake agent built on http/server.h in this file,
 * on the same loop (the broker's shape): it records each request and
 * answers what the test put in its canned reply, taken from the
 * contract in docs/SYNC.md.  This tests the client's side only; the
 * real agent is exercised by the integration tests.  A watchdog turns a
 * hang into a failure (a bound, never a measurement).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/client.h"
#include "http/server.h"
#include "sync/agent_client.h"
#include "util/alloc.h"

#include "tests/unit/loop_peer.h"

#define WATCHDOG_MS 30000u
#define TOKEN "s3cret-token"
#define V1 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define V2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

struct fx {
  uv_loop_t loop;
  uv_timer_t watchdog;
  struct http_server *srv;
  struct http_client *hc;
  struct agentc *ac;
  char base[64];
  /* what the fake agent answers next */
  int status;
  const char *reply;
  /* what it was asked last */
  int hits;
  char method[8];
  char path[256];
  char auth[128];
  char ctype[64];
  char *body;
  /* what the client delivered */
  int calls;
  int rc;
  struct err e;
  struct agentc_version v;
  char vpath[256];
  struct agentc_pull p;
  char ppath[256];
  char perror[256];
  size_t nversions;
  char versions[4][AGENTC_VERSION_HEX + 1];
  int sources[4];
  int closed;
};

static void
copy(char *dst, size_t n, const char *src)
{
  snprintf(dst, n, "%s", src != NULL ? src : "");
}

/* ---- the fake agent ---- */

static void
on_request(struct http_request *req, void *arg)
{
  struct fx *fx = arg;
  size_t len;
  const char *body = http_request_body(req, &len);
  char *out;

  fx->hits++;
  copy(fx->method, sizeof(fx->method), http_request_method(req));
  copy(fx->path, sizeof(fx->path), http_request_path(req));
  copy(fx->auth, sizeof(fx->auth),
       http_request_header(req, "Authorization"));
  copy(fx->ctype, sizeof(fx->ctype),
       http_request_header(req, "Content-Type"));
  free(fx->body);
  fx->body = xstrndup(body, len);
  out = xstrdup(fx->reply != NULL ? fx->reply : "");
  http_respond(req, fx->status, "application/json", out, strlen(out));
}

/* ---- fixture ---- */

static int
setup(void **state)
{
  struct fx *fx = xcalloc(1, sizeof(*fx));
  struct err e = {0};

  assert_int_equal(uv_loop_init(&fx->loop), 0);
  loop_peer_watchdog(&fx->loop, &fx->watchdog, WATCHDOG_MS);
  fx->srv = loop_peer_server(&fx->loop, on_request, fx, 16, "/", fx->base,
                             sizeof(fx->base));
  if (http_client_new(&fx->loop, NULL, &fx->hc, &e) < 0)
    fail_msg("client: %s", e.msg);
  if (agentc_new(fx->hc, fx->base, TOKEN, &fx->ac, &e) < 0)
    fail_msg("agentc_new: %s", e.msg);
  fx->status = 200;
  *state = fx;
  return 0;
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed++;
}

static int
teardown(void **state)
{
  struct fx *fx = *state;

  agentc_free(fx->ac);
  http_client_close(fx->hc, on_closed, fx);
  http_server_close(fx->srv, on_closed, fx);
  uv_close((uv_handle_t *)&fx->watchdog, NULL);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_int_equal(fx->closed, 2);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  free(fx->body);
  free(fx);
  return 0;
}

/* Run the loop until the client has called back n times in all. */
static void
run_until_calls(struct fx *fx, int n)
{
  while (fx->calls < n)
    uv_run(&fx->loop, UV_RUN_ONCE);
  assert_int_equal(fx->calls, n);
}

/* ---- callbacks that record ---- */

static void
record_err(struct fx *fx, int rc, const struct err *e)
{
  fx->calls++;
  fx->rc = rc;
  memset(&fx->e, 0, sizeof(fx->e));
  if (e != NULL)
    fx->e = *e;
}

static void
on_version(void *arg, int rc, const struct agentc_version *v,
           const struct err *e)
{
  struct fx *fx = arg;

  record_err(fx, rc, e);
  if (rc == 0) {
    assert_null(e);
    fx->v = *v;
    copy(fx->vpath, sizeof(fx->vpath), v->path);
    fx->v.path = NULL;
  } else {
    assert_null(v);
  }
}

static void
on_versions(void *arg, int rc, const struct agentc_version *v, size_t n,
            const struct err *e)
{
  struct fx *fx = arg;

  record_err(fx, rc, e);
  fx->nversions = n;
  for (size_t i = 0; i < n && i < 4; i++) {
    copy(fx->versions[i], sizeof(fx->versions[i]), v[i].version);
    fx->sources[i] = v[i].source;
  }
}

static void
on_pull(void *arg, int rc, const struct agentc_pull *p, const struct err *e)
{
  struct fx *fx = arg;

  record_err(fx, rc, e);
  if (rc == 0) {
    fx->p = *p;
    copy(fx->ppath, sizeof(fx->ppath), p->path);
    copy(fx->perror, sizeof(fx->perror), p->error);
    fx->p.path = NULL;
    fx->p.error = NULL;
  } else {
    assert_null(p);
  }
}

static void
pull_get(struct fx *fx, int status, const char *reply)
{
  struct err e = {0};
  int n = fx->calls;

  fx->status = status;
  fx->reply = reply;
  if (agentc_pull_get(fx->ac, "imagenet", V1, on_pull, fx, &e) < 0)
    fail_msg("agentc_pull_get: %s", e.msg);
  /* Never from inside the call. */
  assert_int_equal(fx->calls, n);
  run_until_calls(fx, n + 1);
}

/* ---- requests ---- */

static void
test_publish_posts_the_path_with_the_token_and_reads_the_version(
    void **state)
{
  struct fx *fx = *state;
  struct err e = {0};
  json_t *body;

  fx->status = 201;
  fx->reply = "{\"version\":\"" V1 "\",\"files\":3,\"dirs\":1,\"links\":1,"
              "\"bytes\":4096,\"path\":\"/data/root/imagenet\","
              "\"files_hashed\":3,\"files_reused\":0}";
  assert_int_equal(agentc_publish(fx->ac, "imagenet", "imagenet/v2",
                                  on_version, fx, &e),
                   0);
  run_until_calls(fx, 1);
  assert_string_equal(fx->method, "POST");
  assert_string_equal(fx->path, "/v1/datasets/imagenet/versions");
  assert_string_equal(fx->auth, "Bearer " TOKEN);
  assert_string_equal(fx->ctype, "application/json");
  body = json_loads(fx->body, 0, NULL);
  assert_non_null(body);
  assert_string_equal(json_string_value(json_object_get(body, "path")),
                      "imagenet/v2");
  assert_int_equal(json_object_size(body), 1);
  json_decref(body);

  assert_int_equal(fx->rc, 0);
  assert_string_equal(fx->v.version, V1);
  assert_int_equal(fx->v.files, 3);
  assert_int_equal(fx->v.dirs, 1);
  assert_int_equal(fx->v.links, 1);
  assert_int_equal(fx->v.bytes, 4096);
  assert_string_equal(fx->vpath, "/data/root/imagenet");
  assert_int_equal(fx->v.existed, 0);

  /* The same content again: 200, the version existed. */
  fx->status = 200;
  assert_int_equal(agentc_publish(fx->ac, "imagenet", ".", on_version, fx,
                                  &e),
                   0);
  run_until_calls(fx, 2);
  assert_int_equal(fx->rc, 0);
  assert_int_equal(fx->v.existed, 1);
}

static void
test_pull_put_sends_source_and_bwlimit_and_reads_the_status(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};
  json_t *body;
  json_t *src;

  fx->status = 202;
  fx->reply = "{\"state\":\"running\",\"dataset\":\"imagenet\","
              "\"version\":\"" V1 "\",\"path\":null,\"files_total\":10,"
              "\"files_done\":4,\"bytes_total\":1000,\"bytes_done\":400,"
              "\"bytes_wire\":120,\"bytes_saved\":300,\"bytes_linked\":200,"
              "\"retries\":1,\"error\":null,\"elapsed_ms\":5}";
  assert_int_equal(agentc_pull_put(fx->ac, "imagenet", V1,
                                   "http://127.0.0.1:9/", "src-token", 5000,
                                   on_pull, fx, &e),
                   0);
  run_until_calls(fx, 1);
  assert_string_equal(fx->method, "PUT");
  assert_string_equal(fx->path, "/v1/datasets/imagenet/pulls/" V1);
  assert_string_equal(fx->auth, "Bearer " TOKEN);
  body = json_loads(fx->body, 0, NULL);
  assert_non_null(body);
  src = json_object_get(body, "source");
  assert_string_equal(json_string_value(json_object_get(src, "url")),
                      "http://127.0.0.1:9/");
  assert_string_equal(json_string_value(json_object_get(src, "token")),
                      "src-token");
  assert_int_equal(json_integer_value(json_object_get(body, "bwlimit")),
                   5000);
  json_decref(body);

  assert_int_equal(fx->rc, 0);
  assert_int_equal(fx->p.state, AGENTC_PULL_RUNNING);
  assert_int_equal(fx->p.http_status, 202);
  assert_string_equal(fx->p.version, V1);
  assert_int_equal(fx->p.files_total, 10);
  assert_int_equal(fx->p.files_done, 4);
  assert_int_equal(fx->p.bytes_total, 1000);
  assert_int_equal(fx->p.bytes_done, 400);
  assert_int_equal(fx->p.bytes_wire, 120);
  assert_int_equal(fx->p.bytes_saved, 300);
  assert_int_equal(fx->p.bytes_linked, 200);
  assert_int_equal(fx->p.retries, 1);
  assert_string_equal(fx->ppath, "");
  assert_string_equal(fx->perror, "");

  /* Without a limit the field is left out. */
  assert_int_equal(agentc_pull_put(fx->ac, "imagenet", V1,
                                   "http://127.0.0.1:9", "t", 0, on_pull,
                                   fx, &e),
                   0);
  run_until_calls(fx, 2);
  body = json_loads(fx->body, 0, NULL);
  assert_null(json_object_get(body, "bwlimit"));
  json_decref(body);
}

static void
test_complete_status_without_counters_reads_zeros_and_the_path(
    void **state)
{
  struct fx *fx = *state;

  /* What an agent that holds the version already answers. */
  pull_get(fx, 200, "{\"state\":\"complete\",\"dataset\":\"imagenet\","
                    "\"version\":\"" V1 "\",\"path\":\"/d/.tenbin/data/"
                    "imagenet/" V1 "\",\"error\":null}");
  assert_string_equal(fx->method, "GET");
  assert_string_equal(fx->path, "/v1/datasets/imagenet/pulls/" V1);
  assert_int_equal(fx->rc, 0);
  assert_int_equal(fx->p.state, AGENTC_PULL_COMPLETE);
  assert_string_equal(fx->ppath, "/d/.tenbin/data/imagenet/" V1);
  assert_int_equal(fx->p.bytes_total, 0);
  assert_int_equal(fx->p.bytes_wire, 0);
}

static void
test_failed_status_carries_the_agents_error(void **state)
{
  struct fx *fx = *state;

  pull_get(fx, 200, "{\"state\":\"failed\",\"version\":\"" V1 "\","
                    "\"path\":null,\"bytes_wire\":77,\"error\":\"a/b.bin: "
                    "changed at the source since it was published\"}");
  assert_int_equal(fx->rc, 0);
  assert_int_equal(fx->p.state, AGENTC_PULL_FAILED);
  assert_int_equal(fx->p.bytes_wire, 77);
  assert_string_equal(fx->perror, "a/b.bin: changed at the source since "
                                  "it was published");
}

static void
test_versions_lists_every_version_with_its_source_flag(void **state)
{
  struct fx *fx = *state;
  struct err e = {0};

  fx->reply = "{\"versions\":[{\"version\":\"" V1 "\",\"files\":2,"
              "\"bytes\":10,\"path\":\"/r/a\",\"source\":true},"
              "{\"version\":\"" V2 "\",\"path\":\"/r/b\",\"source\":false}]}";
  assert_int_equal(agentc_versions(fx->ac, "imagenet", on_versions, fx, &e),
                   0);
  run_until_calls(fx, 1);
  assert_string_equal(fx->method, "GET");
  assert_string_equal(fx->path, "/v1/datasets/imagenet/versions");
  assert_int_equal(fx->rc, 0);
  assert_int_equal(fx->nversions, 2);
  assert_string_equal(fx->versions[0], V1);
  assert_int_equal(fx->sources[0], 1);
  assert_string_equal(fx->versions[1], V2);
  assert_int_equal(fx->sources[1], 0);
}

/* ---- errors ---- */

static void
test_agent_error_answers_keep_the_agents_code_and_message(void **state)
{
  struct fx *fx = *state;

  pull_get(fx, 404, "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":"
                    "\"no pull of imagenet@0123 here\"}}");
  assert_int_equal(fx->rc, ERR_NOT_FOUND);
  assert_string_equal(fx->e.msg, "no pull of imagenet@0123 here");
  assert_false(agentc_transient(fx->rc));

  pull_get(fx, 401, "{\"error\":{\"code\":\"UNAUTHORIZED\",\"message\":"
                    "\"missing or wrong agent token\"}}");
  assert_int_equal(fx->rc, ERR_UNAUTHORIZED);
  assert_false(agentc_transient(fx->rc));

  pull_get(fx, 503, "{\"error\":{\"code\":\"UNAVAILABLE\",\"message\":"
                    "\"the previous attempt is still winding down\"}}");
  assert_int_equal(fx->rc, ERR_UNAVAILABLE);
  assert_string_equal(fx->e.msg, "the previous attempt is still winding "
                                 "down");
  assert_true(agentc_transient(fx->rc));

  pull_get(fx, 500, "{\"error\":{\"code\":\"IO\",\"message\":\"disk "
                    "full\"}}");
  assert_int_equal(fx->rc, ERR_IO);
  assert_true(agentc_transient(fx->rc));
}

static void
test_answers_outside_the_contract_are_site_errors_naming_the_agent(
    void **state)
{
  struct fx *fx = *state;
  char url[80];

  snprintf(url, sizeof(url), "%.*s", (int)strlen(fx->base) - 1, fx->base);

  pull_get(fx, 502, "<html>bad gateway</html>");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, url));
  assert_non_null(strstr(fx->e.msg, "HTTP 502"));
  assert_true(agentc_transient(fx->rc));

  pull_get(fx, 418, "{\"error\":{\"code\":\"TEAPOT\",\"message\":"
                    "\"short and stout\"}}");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "short and stout (TEAPOT)"));
  assert_non_null(strstr(fx->e.msg, url));

  pull_get(fx, 200, "not json");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "not a JSON object"));

  pull_get(fx, 200, "{\"state\":\"paused\",\"version\":\"" V1 "\"}");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "'state'"));

  pull_get(fx, 200, "{\"state\":\"running\",\"version\":\"ABC\"}");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "'version'"));

  pull_get(fx, 200, "{\"state\":\"running\",\"version\":\"" V1 "\","
                    "\"bytes_done\":-4}");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "'bytes_done'"));

  pull_get(fx, 200, "{\"state\":\"complete\",\"version\":\"" V1 "\"}");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "'path'"));
}

/* A port nothing listens on: bound, then closed. */
static unsigned
closed_port(void)
{
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  assert_true(fd >= 0);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd);
  return ntohs(sa.sin_port);
}

static void
test_unreachable_agent_is_transient_unavailable_naming_its_url(
    void **state)
{
  struct fx *fx = *state;
  struct agentc *down = NULL;
  struct err e = {0};
  char url[64];

  snprintf(url, sizeof(url), "http://127.0.0.1:%u", closed_port());
  assert_int_equal(agentc_new(fx->hc, url, TOKEN, &down, &e), 0);
  assert_int_equal(agentc_pull_put(down, "imagenet", V1, fx->base, "t", 0,
                                   on_pull, fx, &e),
                   0);
  /* Freeing the client with a request in flight is safe: it still
   * calls back. */
  agentc_free(down);
  run_until_calls(fx, 1);
  assert_int_equal(fx->rc, ERR_UNAVAILABLE);
  assert_non_null(strstr(fx->e.msg, url));
  assert_true(agentc_transient(fx->rc));
  assert_int_equal(fx->hits, 0);
}

static void
on_health(void *arg, int rc, const struct err *e)
{
  struct fx *fx = arg;

  record_err(fx, rc, e);
  if (rc == 0)
    assert_null(e);
}

static void
health(struct fx *fx, struct agentc *c, int status, const char *reply)
{
  struct err e = {0};
  int n = fx->calls;

  fx->status = status;
  fx->reply = reply;
  if (agentc_health(c, on_health, fx, &e) < 0)
    fail_msg("agentc_health: %s", e.msg);
  assert_int_equal(fx->calls, n);
  run_until_calls(fx, n + 1);
}

static void
test_health_is_ok_only_when_the_agent_says_ok_and_names_it_otherwise(
    void **state)
{
  struct fx *fx = *state;
  struct agentc *down = NULL;
  struct err e = {0};
  char url[64];

  health(fx, fx->ac, 200, "{\"ok\":true,\"background\":0}");
  assert_int_equal(fx->rc, 0);
  assert_string_equal(fx->method, "GET");
  assert_string_equal(fx->path, "/healthz");
  /* An answer that does not say ok, or an error status, is not up. */
  health(fx, fx->ac, 200, "{\"ok\":false}");
  assert_int_equal(fx->rc, ERR_SITE);
  assert_non_null(strstr(fx->e.msg, "127.0.0.1"));
  health(fx, fx->ac, 503, "{\"error\":{\"code\":\"UNAVAILABLE\","
         "\"message\":\"the agent is stopping\"}}");
  assert_int_equal(fx->rc, ERR_UNAVAILABLE);
  assert_string_equal(fx->e.msg, "the agent is stopping");
  /* No agent at all: unavailable, naming the URL. */
  snprintf(url, sizeof(url), "http://127.0.0.1:%u", closed_port());
  assert_int_equal(agentc_new(fx->hc, url, TOKEN, &down, &e), 0);
  health(fx, down, 200, NULL);
  agentc_free(down);
  assert_int_equal(fx->rc, ERR_UNAVAILABLE);
  assert_non_null(strstr(fx->e.msg, url));
}

static void
test_bad_arguments_fail_at_once_without_a_request(void **state)
{
  struct fx *fx = *state;
  struct agentc *c = NULL;
  struct err e = {0};

  assert_int_equal(agentc_pull_get(fx->ac, "../etc", V1, on_pull, fx, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "dataset name"));
  assert_int_equal(agentc_pull_get(fx->ac, "a", "latest", on_pull, fx, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "version 'latest'"));
  assert_int_equal(agentc_pull_put(fx->ac, "a", V1 "0", "http://x", "t", 0,
                                   on_pull, fx, &e),
                   ERR_INVALID);
  assert_int_equal(agentc_publish(fx->ac, "", "x", on_version, fx, &e),
                   ERR_INVALID);
  assert_int_equal(agentc_publish(fx->ac, "a", "", on_version, fx, &e),
                   ERR_INVALID);

  assert_int_equal(agentc_new(fx->hc, "ftp://h", "t", &c, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "http://"));
  assert_int_equal(agentc_new(fx->hc, "http://h x", "t", &c, &e),
                   ERR_INVALID);
  assert_int_equal(agentc_new(fx->hc, "http://h", "", &c, &e), ERR_INVALID);
  assert_int_equal(agentc_new(fx->hc, "http://h", "a\nb", &c, &e),
                   ERR_INVALID);
  assert_null(c);
  assert_true(agentc_valid_version(V1));
  assert_false(agentc_valid_version("0123456789ABCDEF0123456789abcdef0123"
                                    "456789abcdef0123456789abcdef"));
  assert_true(agentc_valid_name("c4.en-v2_x"));
  assert_false(agentc_valid_name(".hidden"));

  uv_run(&fx->loop, UV_RUN_NOWAIT);
  assert_int_equal(fx->calls, 0);
  assert_int_equal(fx->hits, 0);
  /* The URL is kept without its trailing '/'. */
  assert_int_equal(fx->base[strlen(fx->base) - 1], '/');
  assert_int_equal(strncmp(agentc_url(fx->ac), fx->base,
                           strlen(fx->base) - 1),
                   0);
  assert_int_equal(strlen(agentc_url(fx->ac)), strlen(fx->base) - 1);
  assert_string_equal(agentc_token(fx->ac), TOKEN);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_publish_posts_the_path_with_the_token_and_reads_the_version,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_pull_put_sends_source_and_bwlimit_and_reads_the_status,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_complete_status_without_counters_reads_zeros_and_the_path,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_failed_status_carries_the_agents_error, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_versions_lists_every_version_with_its_source_flag, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_agent_error_answers_keep_the_agents_code_and_message, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_answers_outside_the_contract_are_site_errors_naming_the_agent,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_unreachable_agent_is_transient_unavailable_naming_its_url,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_bad_arguments_fail_at_once_without_a_request, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_health_is_ok_only_when_the_agent_says_ok_and_names_it_otherwise,
          setup, teardown),
  };
  int rc;

  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
