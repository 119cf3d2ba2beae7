/*
 * Tests of a provider's prices in the broker (broker/prices.c): what a
 * site's price source gave is recorded as a 'provider' period where it
 * changed, overrides the config's price (in GET /v1/prices, the price
 * history and the rate the cost policy reads), yields to an admin's, and
 * "price_refresh_s" is checked with the rest of the config.
 *
 * Each test runs a real broker on its own uv loop, with a real SQLite
 * file in a temporary directory and a rented local site; the prices an
 * adapter would answer are handed to broker__prices_record directly (the
 * aws, gcp and azure sites' asks are t37's business).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "adapters/local.h"
#include "broker/broker.h"
#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/timeutil.h"

#define GUARD_NS (60ull * 1000 * 1000 * 1000)
#define LINES 1024

#define SITES(rented)                                                     \
  "[{\"name\": \"cloud\", \"kind\": \"local\", \"gpus\": {\"h100\": 2},"  \
  " \"cost\": {\"rented\": " rented "}}]"
#define CONFIG_PRICES                                                     \
  "{\"per_gpu_hour\": {\"h100\": 6.88}, \"spot_per_gpu_hour\":"           \
  " {\"h100\": 3.10}}"

static const struct principal admin = {
    .role = ROLE_ADMIN, .token_id = 0, .projects = NULL, .name = "anonymous"};

struct fx {
  uv_loop_t loop;
  char dir[64];
  char db_path[128];
  char self[PATH_MAX];
  struct broker *b;
  int closed;
};

static int
open_broker(struct fx *f, const char *sites_text, struct err *e)
{
  json_error_t jerr;
  json_t *sites = json_loads(sites_text, 0, &jerr);
  struct broker_config cfg = {
      .state_dir = f->dir,
      .db_path = f->db_path,
      .self_exe = f->self,
      .placement = "first-fit",
      .sites = sites,
      .tick_ms = 50,
      .stage_poll_ms = 20,
  };
  int rc;

  if (sites == NULL)
    fail_msg("test JSON '%s': %s", sites_text, jerr.text);
  assert_null(f->b);
  rc = broker_new(&f->loop, &cfg, &f->b, e);
  json_decref(sites);
  return rc;
}

static void
on_closed(void *arg)
{
  ((struct fx *)arg)->closed = 1;
}

static void
close_broker(struct fx *f)
{
  uint64_t deadline = uv_hrtime() + GUARD_NS;

  if (f->b == NULL)
    return;
  f->closed = 0;
  broker_close(f->b, on_closed, f);
  f->b = NULL;
  while (!f->closed && uv_hrtime() < deadline)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_true(f->closed);
}

/* Close the broker if open, and open it on sites. */
static void
reopen(struct fx *f, const char *sites)
{
  struct err e = {0};

  close_broker(f);
  usleep(2000); /* each step its own millisecond: a key's periods differ */
  if (open_broker(f, sites, &e) < 0)
    fail_msg("broker_new: %s", e.msg);
}

static int
setup(void **state)
{
  struct fx *f = xcalloc(1, sizeof(*f));
  ssize_t n;

  assert_int_equal(uv_loop_init(&f->loop), 0);
  snprintf(f->dir, sizeof(f->dir), "/tmp/tenbin-prices-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->db_path, sizeof(f->db_path), "%s/tenbin.db", f->dir);
  n = readlink("/proc/self/exe", f->self, sizeof(f->self) - 1);
  assert_true(n > 0);
  f->self[n] = '\0';
  *state = f;
  return 0;
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  close_broker(f);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  /* Every handle the broker and its site opened is closed. */
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

/* "gpu_type/kind=rate(source);" of each rate in force, into arg (LINES
 * bytes). */
static int
line(const struct price_view *v, void *arg)
{
  size_t n = strlen(arg);

  snprintf((char *)arg + n, LINES - n, "%s/%s=%lld(%s);", v->gpu_type,
           v->kind, (long long)v->rate_micro,
           v->admin ? "admin" : v->provider ? "provider" : "config");
  return 0;
}

static void
in_force(struct fx *f, char *out)
{
  struct err e = {0};

  out[0] = '\0';
  assert_int_equal(broker_price_list(f->b, line, out, &e), 0);
}

static int
count_row(const struct db_price *p, void *arg)
{
  (void)p;
  (*(int *)arg)++;
  return 0;
}

static int
periods(struct fx *f, const char *kind)
{
  struct err e = {0};
  int n = 0;

  assert_int_equal(db_price_history(broker_db(f->b), "cloud", "h100", kind,
                                    count_row, &n, &e),
                   0);
  return n;
}

/* Record what a provider gave, now. */
static void
record(struct fx *f, const struct adapter_price *p, size_t n)
{
  struct err e = {0};

  usleep(2000);
  if (broker__prices_record(f->b, broker__site(f->b, "cloud"), p, n,
                            time_now_ms(), &e) < 0)
    fail_msg("broker__prices_record: %s", e.msg);
}

/* The on-demand and spot rate GET /v1/sites shows (the cost policy's). */
static void
site_rates(struct fx *f, int64_t *od, int64_t *spot)
{
  struct site_view v;
  struct err e = {0};

  site_view_init(&v);
  assert_int_equal(broker_site_get(f->b, "cloud", &v, &e), 0);
  assert_int_equal(v.nprices, 1);
  *od = v.prices[0].per_gpu_hour_micro;
  *spot = v.prices[0].spot_micro;
  site_view_release(&v);
}

static void
test_a_providers_prices_override_the_configs_for_ledger_and_policy(
    void **state)
{
  const struct adapter_price given[] = {
      {"h100", "on_demand", 5000000},
      {"h100", "spot", 2000000},
      {"a100", "on_demand", 3000000}, /* not a type the site rents */
      {"h100", "reserved", 1},        /* not a kind */
      {"h 100", "spot", 1},           /* not a GPU type */
      {"h100", "spot", -5},           /* not a price */
  };
  struct fx *f = *state;
  char now[LINES];
  int64_t od, spot;

  reopen(f, SITES(CONFIG_PRICES));
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=6880000(config);"
                           "h100/spot=3100000(config);");
  record(f, given, 2);
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=5000000(provider);"
                           "h100/spot=2000000(provider);");
  site_rates(f, &od, &spot);
  assert_int_equal(od, 5000000);
  assert_int_equal(spot, 2000000);
  assert_int_equal(periods(f, "on_demand"), 2);
  /* the same again is no new period; what cannot be recorded is left */
  record(f, given, sizeof(given) / sizeof(given[0]));
  assert_int_equal(periods(f, "on_demand"), 2);
  assert_int_equal(periods(f, "spot"), 2);
  in_force(f, now);
  assert_null(strstr(now, "a100"));
  /* a change is one */
  record(f, &(struct adapter_price){"H100", "on_demand", 4500000}, 1);
  assert_int_equal(periods(f, "on_demand"), 3);
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=4500000(provider);"
                           "h100/spot=2000000(provider);");
  /* a start with the same config keeps the provider's price in force */
  reopen(f, SITES(CONFIG_PRICES));
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=4500000(provider);"
                           "h100/spot=2000000(provider);");
}

static void
test_an_admins_price_holds_over_the_providers_until_the_config_changes(
    void **state)
{
  const struct adapter_price given[] = {{"h100", "on_demand", 5000000},
                                        {"h100", "spot", 2000000}};
  struct fx *f = *state;
  struct err e = {0};
  char now[LINES];
  int64_t od, spot;

  reopen(f, SITES(CONFIG_PRICES));
  usleep(2000);
  assert_int_equal(broker_price_set(f->b, &admin, "cloud", "h100", 6500000,
                                    -1, &e),
                   0);
  record(f, given, 2);
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=6500000(admin);"
                           "h100/spot=2000000(provider);");
  site_rates(f, &od, &spot);
  assert_int_equal(spot, 2000000);
  assert_int_equal(periods(f, "on_demand"), 2);
  /* the config changes its prices (a new one, and spot dropped): they
   * hold until the provider says again */
  reopen(f, SITES("{\"per_gpu_hour\": {\"h100\": 7.00}}"));
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=7000000(config);");
  record(f, given, 2);
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=5000000(provider);"
                           "h100/spot=2000000(provider);");
}

static int
last_from(const struct db_price *p, void *arg)
{
  *(int64_t *)arg = p->valid_from_ms;
  return 0;
}

static void
test_a_provider_price_in_the_configs_millisecond_replaces_nothing(
    void **state)
{
  struct fx *f = *state;
  struct err e = {0};
  char now[LINES];
  int64_t at = 0;

  reopen(f, SITES(CONFIG_PRICES));
  assert_int_equal(db_price_history(broker_db(f->b), "cloud", "h100",
                                    "on_demand", last_from, &at, &e),
                   0);
  assert_true(at > 0);
  assert_int_equal(broker__prices_record(
                       f->b, broker__site(f->b, "cloud"),
                       &(struct adapter_price){"h100", "on_demand", 5000000},
                       1, at, &e),
                   0);
  /* both periods kept: the provider's starts a millisecond later */
  assert_int_equal(periods(f, "on_demand"), 2);
  usleep(2000);
  in_force(f, now);
  assert_string_equal(now, "h100/on_demand=5000000(provider);"
                           "h100/spot=3100000(config);");
}

static void
test_price_refresh_s_is_checked_with_the_config(void **state)
{
  static const struct {
    const char *rented, *want;
  } bad[] = {
      {"{\"per_gpu_hour\": {\"h100\": 6.88}, \"price_refresh_s\": 30}",
       "field 'sites[0].cost.rented.price_refresh_s': 0 (never) or 60 to"},
      {"{\"per_gpu_hour\": {\"h100\": 6.88}, \"price_refresh_s\": -1}",
       "field 'sites[0].cost.rented.price_refresh_s'"},
      {"{\"per_gpu_hour\": {\"h100\": 6.88}, \"price_refresh_s\": \"1h\"}",
       "sites[0].cost.rented.price_refresh_s"},
      {"{\"per_gpu_hour\": {\"h100\": 6.88}, \"price_refresh_s\": 600}",
       "price_refresh_s': a local site has no price source"},
  };
  struct fx *f = *state;
  char text[512];

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct err e = {0};

    close_broker(f);
    snprintf(text, sizeof(text), "[{\"name\": \"cloud\", \"kind\": "
             "\"local\", \"gpus\": {}, \"cost\": {\"rented\": %s}}]",
             bad[i].rented);
    assert_int_equal(open_broker(f, text, &e), ERR_CONFIG);
    assert_null(f->b);
    if (strstr(e.msg, bad[i].want) == NULL)
      fail_msg("%s: '%s' lacks '%s'", bad[i].rented, e.msg, bad[i].want);
    uv_run(&f->loop, UV_RUN_NOWAIT);
  }
  /* never refreshing is fine anywhere */
  reopen(f, SITES("{\"per_gpu_hour\": {\"h100\": 6.88}, "
                  "\"price_refresh_s\": 0}"));
}

int
main(int argc, char **argv)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_a_providers_prices_override_the_configs_for_ledger_and_policy),
      T(test_an_admins_price_holds_over_the_providers_until_the_config_changes),
      T(test_a_provider_price_in_the_configs_millisecond_replaces_nothing),
      T(test_price_refresh_s_is_checked_with_the_config),
  };
  int rc;

  if (argc >= 2 && strcmp(argv[1], "--shim") == 0)
    return adapter_local_shim_main(argc - 2, argv + 2);
  log_set_level(LOG_WARN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
