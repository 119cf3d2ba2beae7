/*
 * The clouds' price sources on the wire (cloud-contracts.md 1.8, 2.6 and
 * 3.6): EC2's DescribeSpotPriceHistory, the Cloud Billing Catalog's SKUs
 * of Compute Engine and Azure's Retail Prices, requests built and
 * answers read.  No I/O: the providers (cloud_aws.c, cloud_gcp.c,
 * cloud_azure.c) send what is built here and hand back what came.
 *
 * Answers are outside input: every string is bounded, every count
 * capped, and an answer that is not the documented shape is ERR_SITE
 * naming what was wrong, never a crash (fuzz/fuzz_price_feed.c).  Rows
 * of the right shape that are not wanted (another region, currency or
 * unit, a Windows meter) are skipped, not errors.
 *
 * Every price is integer micro-dollars per hour: of an instance (EC2,
 * Azure) or of one GPU (a GCP GPU SKU).
 */
#ifndef TENBIN_ADAPTERS_PRICE_FEED_H
#define TENBIN_ADAPTERS_PRICE_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/err.h"

#define PRICEFEED_NAME_LEN 64    /* zones, types, products */
#define PRICEFEED_SKU_LEN 128    /* a GPU SKU's name */
#define PRICEFEED_TOKEN_LEN 1024 /* a page token */
#define PRICEFEED_URL_MAX 4096   /* a next page's link */
/* The most an hour of one instance may cost: $1,000,000.  More is no
 * price but a garbled answer. */
#define PRICEFEED_MAX_MICRO (1000000LL * 1000000LL)
/* Compute Engine in the Cloud Billing Catalog. */
#define PRICEFEED_GCE_SERVICE "6F81-5844-456A"
#define PRICEFEED_GCP_BILLING "https://cloudbilling.googleapis.com"
#define PRICEFEED_AZURE_PRICES "https://prices.azure.com"
#define PRICEFEED_AZURE_API_VERSION "2023-01-01-preview"

/*
 * A decimal "12.345600" (up to 9 integer and 9 fraction digits, no
 * sign) into micro-dollars, the seventh fraction digit rounding.
 * ERR_INVALID for anything else.
 */
int pricefeed_decimal_micro(const char *s, int64_t *out) WARN_UNUSED;

/* ---- EC2: DescribeSpotPriceHistory ---- */

/* One item of spotPriceHistorySet. */
struct pricefeed_spot {
  char zone[PRICEFEED_NAME_LEN];
  char type[PRICEFEED_NAME_LEN];
  char product[PRICEFEED_NAME_LEN]; /* "Linux/UNIX" */
  int64_t price_micro;              /* per instance-hour */
  int64_t at_ms;                    /* when it took effect */
};

/* One answer: its items (at most max of them; nout says how many there
 * were) and the next page's token, "" on the last page. */
struct pricefeed_spot_page {
  struct pricefeed_spot *rows; /* the caller's array */
  size_t max;
  size_t n;
  size_t nout;
  char next_token[PRICEFEED_TOKEN_LEN];
};

/*
 * The body of a DescribeSpotPriceHistory of the Linux/UNIX prices of
 * types (ntypes of them, at least 1) in zones (nzones, 0 for any) in
 * effect at at_ms: StartTime and EndTime both at_ms, which EC2 answers
 * with each series' price in effect then.  next_token NULL or "" for
 * the first page.
 */
int pricefeed_ec2_spot_body(const char *const *types, size_t ntypes,
                            const char *const *zones, size_t nzones,
                            int64_t at_ms, const char *next_token,
                            struct buf *body) WARN_UNUSED;
/* Read an answer into p (reset first).  An error answer, XML that does
 * not parse and an item whose price or time does not read are ERR_SITE
 * saying why. */
int pricefeed_ec2_spot_parse(const char *xml, size_t len,
                             struct pricefeed_spot_page *p, struct err *e)
    WARN_UNUSED;

/* ---- GCP: the Cloud Billing Catalog ---- */

/* A GPU SKU of one region, on demand or Spot. */
struct pricefeed_sku {
  /* The description without its market ("Spot Preemptible ") and place
   * (" running in Americas"): "Nvidia H100 80GB GPU". */
  char name[PRICEFEED_SKU_LEN];
  int spot;                       /* usageType Preemptible */
  int64_t price_micro;            /* per GPU-hour */
};

/* One page: the region's GPU SKUs on it (at most max; nout counts them
 * all) and the next page's token, "" on the last page. */
struct pricefeed_sku_page {
  struct pricefeed_sku *rows;  /* the caller's array */
  size_t max;
  size_t n;
  size_t nout;
  char next_token[PRICEFEED_TOKEN_LEN];
};

/* base + "/v1/services/6F81-5844-456A/skus?pageSize=N[&pageToken=T]"
 * into url. */
int pricefeed_gcp_skus_url(const char *base, int page_size,
                           const char *page_token, struct buf *url)
    WARN_UNUSED;
/*
 * Read a page into p (reset first), keeping the GPU SKUs (resourceGroup
 * GPU, usageType OnDemand or Preemptible) whose serviceRegions hold
 * region, priced per hour in USD.  Malformed JSON, a page that is no
 * object of "skus", and such a SKU whose price does not read are
 * ERR_SITE saying why.
 */
int pricefeed_gcp_skus_parse(const char *json, size_t len,
                             const char *region, struct pricefeed_sku_page *p,
                             struct err *e) WARN_UNUSED;
/*
 * The price of one GPU of gpu_type from rows (n of them), Spot or not:
 * of the SKU named sku (case aside) when it is not NULL, else of the one
 * SKU name that holds gpu_type as a word (no Virtual Workstation).
 * ERR_NOT_FOUND when none matches, ERR_CONFLICT when names differ (both
 * with why, of whylen bytes, saying which).
 */
int pricefeed_gcp_gpu_price(const struct pricefeed_sku *rows, size_t n,
                            const char *gpu_type, const char *sku, int spot,
                            int64_t *micro, char *why, size_t whylen)
    WARN_UNUSED;

/* ---- Azure: Retail Prices ---- */

/* What the pages of one VM size in one region came to: Linux on demand
 * and Spot, per VM-hour, -1 when none was seen. */
struct pricefeed_azure {
  int64_t on_demand_micro;
  int64_t spot_micro;
  char on_demand_from[PRICEFEED_NAME_LEN]; /* the row's
                                              effectiveStartDate */
  char spot_from[PRICEFEED_NAME_LEN];
  size_t rows;                              /* rows read, kept or not */
  char next_link[PRICEFEED_URL_MAX + 1];    /* the last page's; "" when
                                               it was the last */
};

/* A fresh result: no price, no link. */
void pricefeed_azure_init(struct pricefeed_azure *a);
/* base + "/api/retail/prices?api-version=...&$filter=..." asking for the
 * Consumption rows of Virtual Machines of size in region into url.
 * ERR_INVALID for a size or region that is no plain word. */
int pricefeed_azure_url(const char *base, const char *region,
                        const char *size, struct buf *url) WARN_UNUSED;
/*
 * Add a page's rows to a: a row of size in region, type Consumption, in
 * USD per "1 Hour", not Windows, not Low Priority, is the Spot price
 * when its meterName or skuName ends in " Spot", else the on-demand
 * one; of two the later effectiveStartDate wins.  next_link is the
 * page's NextPageLink (check it before following it).  Malformed JSON
 * and rows of the wrong types are ERR_SITE saying why.
 */
int pricefeed_azure_parse(const char *json, size_t len, const char *region,
                          const char *size, struct pricefeed_azure *a,
                          struct err *e) WARN_UNUSED;

#endif
