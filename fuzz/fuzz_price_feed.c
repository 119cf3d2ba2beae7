/*
 * The clouds' price answers (adapters/price_feed.c): the same bytes read
 * as EC2's spot price history, a page of the Billing Catalog's SKUs and
 * a page of Azure's Retail Prices, without a crash, never into more rows
 * than the caller's array holds, every string within its field, every
 * price one (0 to PRICEFEED_MAX_MICRO), and a refusal saying why.
 */
#include <string.h>

#include "adapters/price_feed.h"
#include "fuzz/fuzz.h"

/* s ends within its field. */
#define ENDS(s) (memchr((s), '\0', sizeof(s)) != NULL)
#define PRICE_OK(v) ((v) >= 0 && (v) <= PRICEFEED_MAX_MICRO)

static void
spot(const char *xml, size_t size)
{
  struct pricefeed_spot rows[3];
  struct pricefeed_spot_page p = {.rows = rows, .max = 3};
  struct err e = {0};

  if (pricefeed_ec2_spot_parse(xml, size, &p, &e) < 0) {
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
    FUZZ_CHECK(p.n == 0 && p.nout == 0);
    return;
  }
  FUZZ_CHECK(p.n <= 3 && p.n <= p.nout && ENDS(p.next_token));
  for (size_t i = 0; i < p.n; i++) {
    FUZZ_CHECK(ENDS(rows[i].zone) && ENDS(rows[i].type) &&
               ENDS(rows[i].product));
    FUZZ_CHECK(rows[i].zone[0] != '\0' && rows[i].type[0] != '\0');
    FUZZ_CHECK(PRICE_OK(rows[i].price_micro));
  }
}

static void
skus(const char *json, size_t size)
{
  struct pricefeed_sku rows[3];
  struct pricefeed_sku_page p = {.rows = rows, .max = 3};
  struct err e = {0};
  char why[512];
  int64_t v = -1;

  if (pricefeed_gcp_skus_parse(json, size, "us-central1", &p, &e) < 0) {
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
    FUZZ_CHECK(p.n == 0 && p.nout == 0);
    return;
  }
  FUZZ_CHECK(p.n <= 3 && p.n <= p.nout && ENDS(p.next_token));
  for (size_t i = 0; i < p.n; i++)
    FUZZ_CHECK(ENDS(rows[i].name) && PRICE_OK(rows[i].price_micro));
  /* What was read is matched without a crash, and a match is a row's. */
  for (int s = 0; s < 2; s++) {
    int rc = pricefeed_gcp_gpu_price(rows, p.n, "h100", NULL, s, &v, why,
                                     sizeof(why));

    FUZZ_CHECK(rc == 0 || rc == ERR_NOT_FOUND || rc == ERR_CONFLICT);
    FUZZ_CHECK(rc != 0 || PRICE_OK(v));
    FUZZ_CHECK(rc == 0 || memchr(why, '\0', sizeof(why)) != NULL);
  }
}

static void
retail(const char *json, size_t size)
{
  struct pricefeed_azure a;
  struct err e = {0};

  pricefeed_azure_init(&a);
  if (pricefeed_azure_parse(json, size, "eastus", "Standard_ND96isr_H100_v5",
                            &a, &e) < 0)
    FUZZ_CHECK(e.code == ERR_SITE && e.msg[0] != '\0');
  FUZZ_CHECK(ENDS(a.next_link) && ENDS(a.on_demand_from) &&
             ENDS(a.spot_from));
  FUZZ_CHECK(a.on_demand_micro == -1 || PRICE_OK(a.on_demand_micro));
  FUZZ_CHECK(a.spot_micro == -1 || PRICE_OK(a.spot_micro));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  spot((const char *)data, size);
  skus((const char *)data, size);
  retail((const char *)data, size);
  return 0;
}
