/*
 * Tests for adapters/price_feed.c: the clouds' price sources on the wire
 * (cloud-contracts.md 1.8, 2.6, 3.6).  Requests are checked as text;
 * answers are the documented shapes, then each of the ways one can be
 * wrong, which must be ERR_SITE saying what, never a crash or a price.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "adapters/price_feed.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

/* ---- decimals ---- */

static void
test_decimals_read_to_the_micro_dollar_and_round_the_seventh_digit(
    void **state)
{
  static const struct {
    const char *text;
    int64_t micro;
  } good[] = {{"12.345600", 12345600},  {"0.00001", 10},
              {"55.04", 55040000},      {"7", 7000000},
              {"1.0000005", 1000001},   {"1.0000004", 1000000},
              {"999999999.999999999", 999999999999999 + 1}};
  static const char *const bad[] = {"",     ".5",   "1.",        "-1",
                                    "1e3",  "1.5x", "1234567890", " 1",
                                    "1.1234567890", "NaN"};
  int64_t v;

  (void)state;
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    assert_int_equal(pricefeed_decimal_micro(good[i].text, &v), 0);
    assert_int_equal(v, good[i].micro);
  }
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(pricefeed_decimal_micro(bad[i], &v), ERR_INVALID);
  assert_int_equal(pricefeed_decimal_micro(NULL, &v), ERR_INVALID);
}

/* ---- EC2 ---- */

static void
test_spot_history_asks_for_the_price_now_in_the_sites_zones(
    void **state)
{
  const char *types[] = {"p5.48xlarge", "p4d.24xlarge"};
  const char *zones[] = {"us-east-1a", "us-east-1b"};
  struct buf b;

  (void)state;
  buf_init(&b, 8192);
  /* 2026-11-21T10:00:00.000Z */
  assert_int_equal(pricefeed_ec2_spot_body(types, 2, zones, 2,
                                           1795255200000LL, NULL, &b),
                   0);
  assert_string_equal(
      buf_str(&b),
      "Action=DescribeSpotPriceHistory&Version=2016-11-15"
      "&InstanceType.1=p5.48xlarge&InstanceType.2=p4d.24xlarge"
      "&ProductDescription.1=Linux%2FUNIX"
      "&StartTime=2026-11-21T10%3A00%3A00.000Z"
      "&EndTime=2026-11-21T10%3A00%3A00.000Z&MaxResults=1000"
      "&Filter.1.Name=availability-zone&Filter.1.Value.1=us-east-1a"
      "&Filter.1.Value.2=us-east-1b");
  buf_reset(&b);
  assert_int_equal(pricefeed_ec2_spot_body(types, 1, NULL, 0,
                                           1795255200000LL, "tok/1=", &b),
                   0);
  assert_contains(buf_str(&b), "&MaxResults=1000&NextToken=tok%2F1%3D");
  assert_null(strstr(buf_str(&b), "Filter"));
  buf_reset(&b);
  assert_int_equal(pricefeed_ec2_spot_body(types, 0, NULL, 0, 0, NULL, &b),
                   ERR_INVALID);
  buf_release(&b);
}

#define SPOT_ITEM(zone, price, at)                                         \
  "<item><availabilityZone>" zone "</availabilityZone>"                    \
  "<instanceType>p5.48xlarge</instanceType>"                               \
  "<productDescription>Linux/UNIX</productDescription>"                    \
  "<spotPrice>" price "</spotPrice><timestamp>" at "</timestamp></item>"

#define SPOT_ANSWER(items, next)                                           \
  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"                             \
  "<DescribeSpotPriceHistoryResponse "                                     \
  "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"                    \
  "<requestId>r-1</requestId><spotPriceHistorySet>" items                  \
  "</spotPriceHistorySet>" next "</DescribeSpotPriceHistoryResponse>"

static void
test_spot_history_answers_are_read_item_by_item_with_the_next_token(
    void **state)
{
  static const char xml[] = SPOT_ANSWER(
      SPOT_ITEM("us-east-1a", "12.345600", "2026-11-21T10:00:00.000Z")
          SPOT_ITEM("us-east-1b", "26.000000", "2026-11-21T11:00:00Z"),
      "<nextToken>abc</nextToken>");
  static const char last[] = SPOT_ANSWER("", "<nextToken/>");
  struct pricefeed_spot rows[1];
  struct pricefeed_spot_page p = {.rows = rows, .max = 1};
  struct err e = {0};

  (void)state;
  assert_int_equal(pricefeed_ec2_spot_parse(xml, strlen(xml), &p, &e), 0);
  /* one kept, both counted: the caller sees it had too little room */
  assert_int_equal(p.n, 1);
  assert_int_equal(p.nout, 2);
  assert_string_equal(rows[0].zone, "us-east-1a");
  assert_string_equal(rows[0].type, "p5.48xlarge");
  assert_string_equal(rows[0].product, "Linux/UNIX");
  assert_int_equal(rows[0].price_micro, 12345600);
  assert_int_equal(rows[0].at_ms, 1795255200000LL);
  assert_string_equal(p.next_token, "abc");
  assert_int_equal(pricefeed_ec2_spot_parse(last, strlen(last), &p, &e), 0);
  assert_int_equal(p.nout, 0);
  assert_string_equal(p.next_token, "");
}

static void
test_spot_history_answers_that_are_wrong_say_why(void **state)
{
  static const struct {
    const char *xml, *why;
  } bad[] = {
      {SPOT_ANSWER(SPOT_ITEM("us-east-1a", "-1", "2026-11-21T10:00:00Z"), ""),
       "item 1: spotPrice '-1' is no price"},
      {SPOT_ANSWER(SPOT_ITEM("us-east-1a", "1.5", "yesterday"), ""),
       "item 1: timestamp 'yesterday' is no time"},
      {SPOT_ANSWER("<item><spotPrice>1</spotPrice><timestamp>2026-11-21T10:"
                   "00:00Z</timestamp></item>", ""),
       "no availabilityZone"},
      {"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>"
       "Request limit exceeded.</Message></Error></Errors></Response>",
       "EC2: RequestLimitExceeded: Request limit exceeded."},
      {"<html>nope</html>", "its root is no ...Response"},
      {"<DescribeSpotPriceHistoryResponse><a>", "EC2's spot prices:"},
      {"", "EC2's spot prices:"},
      {"<XResponse><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a>"
       "</a></a></a></a></a></a></a></a></a></a></a></a></a></a></a></a>"
       "</a></XResponse>", "nested too deep"},
  };
  struct pricefeed_spot rows[4];
  struct pricefeed_spot_page p = {.rows = rows, .max = 4};

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct err e = {0};

    assert_int_equal(
        pricefeed_ec2_spot_parse(bad[i].xml, strlen(bad[i].xml), &p, &e),
        ERR_SITE);
    assert_contains(e.msg, bad[i].why);
    assert_int_equal(p.n, 0);
  }
}

/* ---- GCP ---- */

#define SKU(desc, group, usage, regions, units, nanos, extra)              \
  "{\"name\": \"services/6F81-5844-456A/skus/X\", \"skuId\": \"X\","       \
  " \"description\": \"" desc "\", \"category\": {\"serviceDisplayName\":" \
  " \"Compute Engine\", \"resourceFamily\": \"Compute\","                  \
  " \"resourceGroup\": \"" group "\", \"usageType\": \"" usage "\"},"      \
  " \"serviceRegions\": [" regions "], \"pricingInfo\": [{"                \
  "\"effectiveTime\": \"2026-11-01T00:00:00Z\", \"pricingExpression\":"    \
  " {\"usageUnit\": \"h\", \"baseUnit\": \"s\","                           \
  " \"baseUnitConversionFactor\": 3600, \"displayQuantity\": 1,"           \
  " \"tieredRates\": [{\"startUsageAmount\": 0, \"unitPrice\":"            \
  " {\"currencyCode\": \"USD\", \"units\": \"" units "\", \"nanos\": "     \
  nanos "}}]}, \"currencyConversionRate\": 1}]" extra "}"

static void
test_gcp_skus_keep_the_regions_gpus_by_name_and_market(void **state)
{
  static const char json[] =
      "{\"skus\": ["
      SKU("Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand",
          "\"us-east1\", \"us-central1\"", "11", "60000000", "") ","
      SKU("Spot Preemptible Nvidia H100 80GB GPU running in Americas", "GPU",
          "Preemptible", "\"us-central1\"", "2", "250000000", "") ","
      SKU("Nvidia H100 80GB GPU running in Belgium", "GPU", "OnDemand",
          "\"europe-west1\"", "12", "0", "") ","
      SKU("Commitment v1: Nvidia H100 GPU in Americas for 1 Year", "GPU",
          "Commit1Yr", "\"us-central1\"", "7", "0", "") ","
      SKU("A3 Instance Core running in Americas", "CPU", "OnDemand",
          "\"us-central1\"", "0", "31611", "") ","
      "{\"skuId\": \"no category\"},"
      SKU("Nvidia L4 GPU running in Americas", "GPU", "OnDemand",
          "\"us-central1\"", "0", "560000000", ", \"x\": [1, {}]")
      "], \"nextPageToken\": \"page-2\"}";
  struct pricefeed_sku rows[8];
  struct pricefeed_sku_page p = {.rows = rows, .max = 8};
  struct err e = {0};

  (void)state;
  assert_int_equal(
      pricefeed_gcp_skus_parse(json, strlen(json), "us-central1", &p, &e), 0);
  assert_int_equal(p.n, 3);
  assert_int_equal(p.nout, 3);
  assert_string_equal(rows[0].name, "Nvidia H100 80GB GPU");
  assert_false(rows[0].spot);
  assert_int_equal(rows[0].price_micro, 11060000);
  assert_string_equal(rows[1].name, "Nvidia H100 80GB GPU");
  assert_true(rows[1].spot);
  assert_int_equal(rows[1].price_micro, 2250000);
  assert_string_equal(rows[2].name, "Nvidia L4 GPU");
  assert_int_equal(rows[2].price_micro, 560000);
  assert_string_equal(p.next_token, "page-2");
}

static void
test_gcp_skus_not_priced_per_hour_in_dollars_are_skipped(void **state)
{
  static const char json[] =
      "{\"skus\": [{\"description\": \"Nvidia T4 GPU running in Americas\","
      " \"category\": {\"resourceGroup\": \"GPU\", \"usageType\":"
      " \"OnDemand\"}, \"serviceRegions\": [\"us-central1\"],"
      " \"pricingInfo\": [{\"pricingExpression\": {\"usageUnit\": \"mo\","
      " \"tieredRates\": []}}]},"
      " {\"description\": \"Nvidia T4 GPU running in Americas\","
      " \"category\": {\"resourceGroup\": \"GPU\", \"usageType\":"
      " \"OnDemand\"}, \"serviceRegions\": [\"us-central1\"],"
      " \"pricingInfo\": [{\"pricingExpression\": {\"usageUnit\": \"h\","
      " \"tieredRates\": [{\"unitPrice\": {\"currencyCode\": \"EUR\","
      " \"units\": \"1\"}}]}}]}], \"nextPageToken\": \"\"}";
  struct pricefeed_sku rows[2];
  struct pricefeed_sku_page p = {.rows = rows, .max = 2};
  struct err e = {0};

  (void)state;
  assert_int_equal(
      pricefeed_gcp_skus_parse(json, strlen(json), "us-central1", &p, &e), 0);
  assert_int_equal(p.nout, 0);
  assert_string_equal(p.next_token, "");
}

static void
test_gcp_skus_answers_that_are_wrong_say_why(void **state)
{
  static const struct {
    const char *json, *why;
  } bad[] = {
      {"[]", "the Billing Catalog's answer:"},
      {"{\"skus\": {}}", "skus is not an array"},
      {"{\"skus\": [1]}", "skus[0] is not an object"},
      {"{\"skus\": [{\"category\": []}]}",
       "skus[0].category is not an object"},
      {"{\"skus\": [{\"category\": {\"resourceGroup\": 5}}]}",
       "skus[0].resourceGroup is not a string"},
      {"{\"skus\": [" SKU("Nvidia H100 GPU", "GPU", "OnDemand",
                          "\"us-central1\"", "1.5", "0", "") "]}",
       "skus[0]: units '1.5' is no whole number"},
      {"{\"skus\": [" SKU("Nvidia H100 GPU", "GPU", "OnDemand",
                          "\"us-central1\"", "-3", "0", "") "]}",
       "skus[0]: units '-3' is no whole number"},
      {"{\"skus\": [" SKU("Nvidia H100 GPU", "GPU", "OnDemand",
                          "\"us-central1\"", "1", "1000000000", "") "]}",
       "skus[0]: nanos is no 0 to 999999999"},
      {"{\"skus\": [" SKU("Nvidia H100 GPU", "GPU", "OnDemand",
                          "\"us-central1\"", "1", "0.5", "") "]}",
       "skus[0]: nanos is no 0 to 999999999"},
      {"{\"skus\": [{\"description\": \"x\", \"category\": "
       "{\"resourceGroup\": \"GPU\", \"usageType\": \"OnDemand\"}, "
       "\"serviceRegions\": [\"us-central1\"]}]}",
       "skus[0]: no pricingInfo"},
      {"{\"skus\": [{\"category\": {\"resourceGroup\": \"GPU\", "
       "\"usageType\": \"OnDemand\"}, \"serviceRegions\": \"us-central1\"}]}",
       "skus[0].serviceRegions is not an array"},
      {"{\"skus\": [], \"nextPageToken\": 7}", "nextPageToken is no string"},
      {"{\"skus\": [", "the Billing Catalog's answer:"},
  };
  struct pricefeed_sku rows[2];
  struct pricefeed_sku_page p = {.rows = rows, .max = 2};

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct err e = {0};

    assert_int_equal(pricefeed_gcp_skus_parse(bad[i].json,
                                              strlen(bad[i].json),
                                              "us-central1", &p, &e),
                     ERR_SITE);
    assert_contains(e.msg, bad[i].why);
    assert_int_equal(p.n, 0);
  }
}

static void
test_a_gpu_type_names_its_sku_or_the_config_must_say_which(void **state)
{
  static const struct pricefeed_sku rows[] = {
      {"Nvidia H100 80GB GPU", 0, 11060000},
      {"Nvidia H100 80GB Mega GPU", 0, 11800000},
      {"Nvidia H100 80GB GPU", 1, 2250000},
      {"Nvidia Tesla T4 GPU", 0, 350000},
      {"Nvidia Tesla T4 Virtual Workstation GPU", 0, 550000},
      {"Nvidia A100X GPU", 0, 1},
  };
  char why[256];
  int64_t v = -1;
  size_t n = sizeof(rows) / sizeof(rows[0]);

  (void)state;
  assert_int_equal(pricefeed_gcp_gpu_price(rows, n, "t4", NULL, 0, &v, why,
                                           sizeof(why)),
                   0);
  assert_int_equal(v, 350000);
  assert_int_equal(pricefeed_gcp_gpu_price(rows, n, "h100", NULL, 1, &v, why,
                                           sizeof(why)),
                   0);
  assert_int_equal(v, 2250000);
  assert_int_equal(pricefeed_gcp_gpu_price(rows, n, "h100", NULL, 0, &v, why,
                                           sizeof(why)),
                   ERR_CONFLICT);
  assert_contains(why, "'Nvidia H100 80GB GPU' and 'Nvidia H100 80GB Mega "
                       "GPU' both name h100");
  assert_int_equal(pricefeed_gcp_gpu_price(rows, n, "h100",
                                           "nvidia h100 80gb mega gpu", 0,
                                           &v, why, sizeof(why)),
                   0);
  assert_int_equal(v, 11800000);
  /* a word, not a part of one */
  assert_int_equal(pricefeed_gcp_gpu_price(rows, n, "a100", NULL, 0, &v, why,
                                           sizeof(why)),
                   ERR_NOT_FOUND);
  assert_contains(why, "no GPU SKU of 'a100'");
  assert_int_equal(pricefeed_gcp_gpu_price(rows, n, "t4", NULL, 1, &v, why,
                                           sizeof(why)),
                   ERR_NOT_FOUND);
  assert_contains(why, "no Spot GPU SKU");
}

static void
test_gcp_skus_url_pages_with_the_token_encoded(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(pricefeed_gcp_skus_url("http://127.0.0.1:9/", 5000, NULL,
                                          &b),
                   0);
  assert_string_equal(buf_str(&b), "http://127.0.0.1:9/v1/services/"
                                   "6F81-5844-456A/skus?pageSize=5000");
  buf_reset(&b);
  assert_int_equal(pricefeed_gcp_skus_url(PRICEFEED_GCP_BILLING, 10, "a+b/c",
                                          &b),
                   0);
  assert_string_equal(buf_str(&b), "https://cloudbilling.googleapis.com/v1/"
                                   "services/6F81-5844-456A/skus?pageSize=10"
                                   "&pageToken=a%2Bb%2Fc");
  buf_release(&b);
}

/* ---- Azure ---- */

static void
test_azure_asks_for_one_sizes_consumption_rows_in_the_region(void **state)
{
  struct buf b;

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(pricefeed_azure_url(PRICEFEED_AZURE_PRICES, "eastus",
                                       "Standard_ND96isr_H100_v5", &b),
                   0);
  assert_string_equal(
      buf_str(&b),
      "https://prices.azure.com/api/retail/prices?api-version="
      "2023-01-01-preview&$filter=serviceName%20eq%20%27Virtual%20Machines"
      "%27%20and%20armRegionName%20eq%20%27eastus%27%20and%20armSkuName%20"
      "eq%20%27Standard_ND96isr_H100_v5%27%20and%20priceType%20eq%20%27"
      "Consumption%27");
  buf_reset(&b);
  /* a quote would end the filter's string */
  assert_int_equal(pricefeed_azure_url(PRICEFEED_AZURE_PRICES, "eastus",
                                       "x' or 'a' eq 'a", &b),
                   ERR_INVALID);
  assert_int_equal(pricefeed_azure_url(PRICEFEED_AZURE_PRICES, "", "x", &b),
                   ERR_INVALID);
  buf_release(&b);
}

#define ROW(sku, region, meter, product, price, type, from)                \
  "{\"currencyCode\": \"USD\", \"tierMinimumUnits\": 0.0,"                 \
  " \"retailPrice\": " price ", \"unitPrice\": " price ","                 \
  " \"armRegionName\": \"" region "\", \"location\": \"US East\","         \
  " \"effectiveStartDate\": \"" from "\", \"meterId\": \"m\","             \
  " \"meterName\": \"" meter "\", \"productId\": \"p\", \"skuId\": \"s\"," \
  " \"productName\": \"" product "\", \"skuName\": \"" meter "\","         \
  " \"serviceName\": \"Virtual Machines\", \"serviceId\": \"DZH313Z7MMC8\"," \
  " \"serviceFamily\": \"Compute\", \"unitOfMeasure\": \"1 Hour\","        \
  " \"type\": \"" type "\", \"isPrimaryMeterRegion\": true,"               \
  " \"armSkuName\": \"" sku "\"}"

#define H "Standard_ND96isr_H100_v5"
#define P "Virtual Machines NDsr H100 v5 Series"
#define D1 "2026-09-01T00:00:00Z"
#define D2 "2026-10-01T00:00:00Z"

static void
test_azure_linux_on_demand_and_spot_are_told_from_the_other_rows(
    void **state)
{
  static const char page1[] =
      "{\"BillingCurrency\": \"USD\", \"CustomerEntityId\": \"Default\","
      " \"CustomerEntityType\": \"Retail\", \"Items\": ["
      ROW(H, "eastus", "ND96isr H100 v5", P, "98.32", "Consumption", D1) ","
      ROW(H, "eastus", "ND96isr H100 v5", P " Windows", "102.736",
          "Consumption", D1) ","
      ROW(H, "eastus", "ND96isr H100 v5 Spot", P, "18.17", "Consumption",
          D1) ","
      ROW(H, "eastus", "ND96isr H100 v5 Low Priority", P, "41.09",
          "Consumption", D1) "],"
      " \"NextPageLink\": \"https://prices.azure.com/api/retail/prices?"
      "$skip=4\", \"Count\": 4}";
  static const char page2[] =
      "{\"Items\": ["
      ROW(H, "eastus", "ND96isr H100 v5", P, "516000.0", "Reservation", D2)
      "," ROW(H, "westus", "ND96isr H100 v5", P, "99.0", "Consumption", D2)
      "," ROW("Standard_ND96asr_v4", "eastus", "ND96asr v4", P, "27.2",
              "Consumption", D2)
      "," ROW(H, "eastus", "ND96isrH100v5 Spot", P, "17.5", "Consumption", D2)
      "," ROW(H, "eastus", "ND96isr H100 v5", P, "90", "Consumption",
              "2026-08-01T00:00:00Z")
      "], \"NextPageLink\": null, \"Count\": 5}";
  struct pricefeed_azure a;
  struct err e = {0};

  (void)state;
  pricefeed_azure_init(&a);
  assert_int_equal(a.on_demand_micro, -1);
  assert_int_equal(pricefeed_azure_parse(page1, strlen(page1), "eastus", H,
                                         &a, &e),
                   0);
  assert_int_equal(a.on_demand_micro, 98320000);
  assert_int_equal(a.spot_micro, 18170000);
  assert_string_equal(a.next_link, "https://prices.azure.com/api/retail/"
                                   "prices?$skip=4");
  assert_int_equal(pricefeed_azure_parse(page2, strlen(page2), "eastus", H,
                                         &a, &e),
                   0);
  /* the later effective date wins, whatever the page */
  assert_int_equal(a.spot_micro, 17500000);
  assert_string_equal(a.spot_from, D2);
  assert_int_equal(a.on_demand_micro, 98320000);
  assert_int_equal(a.rows, 9);
  assert_string_equal(a.next_link, "");
}

static void
test_azure_answers_that_are_wrong_say_why(void **state)
{
  static const struct {
    const char *json, *why;
  } bad[] = {
      {"{\"Count\": 0}", "has no Items array"},
      {"{\"Items\": [7]}", "Items[0] is not an object"},
      {"{\"Items\": [{\"armSkuName\": 7}]}",
       "Items[0].armSkuName is not a string"},
      {"{\"Items\": [" ROW(H, "eastus", "ND96isr H100 v5", P, "\"98\"",
                           "Consumption", D1) "]}",
       "Items[0].retailPrice is no price"},
      {"{\"Items\": [" ROW(H, "eastus", "ND96isr H100 v5", P, "-1",
                           "Consumption", D1) "]}",
       "Items[0].retailPrice is no price"},
      {"{\"Items\": [" ROW(H, "eastus", "ND96isr H100 v5", P, "1e300",
                           "Consumption", D1) "]}",
       "Items[0].retailPrice is no price"},
      {"{\"Items\": [], \"NextPageLink\": 3}", "NextPageLink is no string"},
      {"not json", "Retail Prices' answer:"},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct pricefeed_azure a;
    struct err e = {0};

    pricefeed_azure_init(&a);
    assert_int_equal(pricefeed_azure_parse(bad[i].json, strlen(bad[i].json),
                                           "eastus", H, &a, &e),
                     ERR_SITE);
    assert_contains(e.msg, bad[i].why);
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_decimals_read_to_the_micro_dollar_and_round_the_seventh_digit),
      cmocka_unit_test(
          test_spot_history_asks_for_the_price_now_in_the_sites_zones),
      cmocka_unit_test(
          test_spot_history_answers_are_read_item_by_item_with_the_next_token),
      cmocka_unit_test(test_spot_history_answers_that_are_wrong_say_why),
      cmocka_unit_test(test_gcp_skus_keep_the_regions_gpus_by_name_and_market),
      cmocka_unit_test(
          test_gcp_skus_not_priced_per_hour_in_dollars_are_skipped),
      cmocka_unit_test(test_gcp_skus_answers_that_are_wrong_say_why),
      cmocka_unit_test(
          test_a_gpu_type_names_its_sku_or_the_config_must_say_which),
      cmocka_unit_test(test_gcp_skus_url_pages_with_the_token_encoded),
      cmocka_unit_test(
          test_azure_asks_for_one_sizes_consumption_rows_in_the_region),
      cmocka_unit_test(
          test_azure_linux_on_demand_and_spot_are_told_from_the_other_rows),
      cmocka_unit_test(test_azure_answers_that_are_wrong_say_why),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
