/*
 * Tests for adapters/cloud_prices.c: a VM pool's shapes priced by its
 * provider become prices per GPU type, a node's price over its GPUs, of
 * the first shape of the type that has one.  The provider is a fake that
 * answers from the loop what each test tells it to.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "adapters/cloud_int.h"

/* What the fake provider answers. */
struct fake {
  uv_timer_t timer;
  struct cloud_result r;
  struct cloud_price p[CLOUD_MAX_SHAPES];
  size_t n;
  cloud_prices_cb cb;
  void *arg;
  int asked;
};

/* What cloud_prices_ask answered. */
struct got {
  int called;
  int rc;
  char msg[ERR_MSG_SIZE];
  char lines[512];        /* "type/kind=micro;" each */
};

static struct fake fake;

static void
fake_answer(uv_timer_t *t)
{
  (void)t;
  fake.cb(fake.arg, &fake.r, fake.r.rc == 0 ? fake.p : NULL,
          fake.r.rc == 0 ? fake.n : 0);
}

static void
fake_prices(void *pctx, cloud_prices_cb cb, void *arg)
{
  (void)pctx;
  fake.asked++;
  fake.cb = cb;
  fake.arg = arg;
  uv_timer_start(&fake.timer, fake_answer, 0, 0);
}

static const struct cloud_provider with_prices = {.kind = "fake",
                                                  .prices = fake_prices};
static const struct cloud_provider without_prices = {.kind = "fake"};

static void
on_prices(void *arg, int rc, const struct adapter_price *p, size_t n,
          const struct err *e)
{
  struct got *g = arg;

  g->called++;
  g->rc = rc;
  if (e != NULL)
    snprintf(g->msg, sizeof(g->msg), "%s", e->msg);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(g->lines);

    snprintf(g->lines + len, sizeof(g->lines) - len, "%s/%s=%lld;",
             p[i].gpu_type, p[i].kind, (long long)p[i].per_gpu_hour_micro);
  }
}

static struct cloud_shape
shape(const char *name, const char *gpu_type, int64_t gpus)
{
  struct cloud_shape s;

  memset(&s, 0, sizeof(s));
  snprintf(s.name, sizeof(s.name), "%s", name);
  snprintf(s.type, sizeof(s.type), "%s", name);
  snprintf(s.gpu_type, sizeof(s.gpu_type), "%s", gpu_type);
  s.gpus = gpus;
  return s;
}

/* Ask over prov on a fresh loop, run it dry, and close it cleanly. */
static void
ask(const struct cloud_provider *prov, const struct cloud_shape *shapes,
    size_t n, struct got *g)
{
  uv_loop_t loop;

  memset(g, 0, sizeof(*g));
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_timer_init(&loop, &fake.timer);
  fake.asked = 0;
  cloud_prices_ask(&loop, prov, NULL, shapes, n, on_prices, g);
  /* never from inside the call */
  assert_int_equal(g->called, 0);
  while (g->called == 0 && uv_run(&loop, UV_RUN_ONCE) != 0)
    ;
  uv_close((uv_handle_t *)&fake.timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(g->called, 1);
}

static void
test_each_gpu_type_gets_its_first_priced_shapes_price_per_gpu(void **state)
{
  const struct cloud_shape shapes[] = {
      shape("p5-8", "H100", 8), shape("p5-4", "h100", 4),
      shape("p4d", "a100", 8), shape("none", "l4", 1)};
  struct got g;

  (void)state;
  memset(&fake.r, 0, sizeof(fake.r));
  /* shape 0 has a spot price only, shape 1 both: on demand comes from
   * shape 1, spot from shape 0; the unpriced shape is left out */
  fake.p[0] = (struct cloud_price){0, -1, 16000004};
  fake.p[1] = (struct cloud_price){1, 20000000, 9000000};
  fake.p[2] = (struct cloud_price){2, 30000000, -1};
  fake.n = 3;
  ask(&with_prices, shapes, 4, &g);
  assert_int_equal(fake.asked, 1);
  assert_int_equal(g.rc, 0);
  assert_string_equal(g.lines, "h100/on_demand=5000000;h100/spot=2000001;"
                               "a100/on_demand=3750000;");
}

static void
test_a_refusal_reaches_the_broker_with_its_message(void **state)
{
  const struct cloud_shape shapes[] = {shape("p5", "h100", 8)};
  struct got g;

  (void)state;
  cloud_refuse(&fake.r, CLOUD_REFUSED_THROTTLE, 1000, "EC2 503 "
               "RequestLimitExceeded: slow down");
  fake.n = 0;
  ask(&with_prices, shapes, 1, &g);
  assert_int_equal(g.rc, ERR_SITE);
  assert_string_equal(g.msg, "EC2 503 RequestLimitExceeded: slow down");
  assert_string_equal(g.lines, "");
}

static void
test_a_provider_without_a_price_source_answers_unavailable(void **state)
{
  const struct cloud_shape shapes[] = {shape("p5", "h100", 8)};
  struct got g;

  (void)state;
  ask(&without_prices, shapes, 1, &g);
  assert_int_equal(fake.asked, 0);
  assert_int_equal(g.rc, ERR_UNAVAILABLE);
  assert_non_null(strstr(g.msg, "no price source"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_each_gpu_type_gets_its_first_priced_shapes_price_per_gpu),
      cmocka_unit_test(test_a_refusal_reaches_the_broker_with_its_message),
      cmocka_unit_test(
          test_a_provider_without_a_price_source_answers_unavailable),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
