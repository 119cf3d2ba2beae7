/*
 * The clouds' price sources on the wire (price_feed.h).
 *
 * EC2 answers XML, read with expat as aws_ec2.c reads its answers: a
 * path of open elements, a capped text buffer, the fields taken when
 * their element ends.  The Billing Catalog and Retail Prices answer
 * JSON, loaded whole by jansson (its own depth limit refuses deep
 * nesting; the HTTP client caps the size) and every member read checked
 * for its type first, so that fields the providers add change nothing.
 */
#include "adapters/price_feed.h"

#include <ctype.h>
#include <expat.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "adapters/form.h"
#include "adapters/sigv4.h"
#include "util/alloc.h"
#include "util/jsonx.h"
#include "util/timeutil.h"

#define EC2_VERSION "2016-11-15"
/* Deeper than a spot price answer nests. */
#define SPOT_MAX_DEPTH 16
#define SPOT_ELEM_LEN 40
/* The text of one element, cut beyond this. */
#define SPOT_TEXT_MAX 1024
/* A region, zone or size tenbin puts in a query. */
#define WORD_MAX 80

int
pricefeed_decimal_micro(const char *s, int64_t *out)
{
  int64_t whole = 0, frac = 0;
  int nint = 0, nfrac = 0, round_up = 0;
  const char *p = s;

  if (s == NULL)
    return ERR_INVALID;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (++nint > 9)
      return ERR_INVALID;
    whole = whole * 10 + (*p - '0');
  }
  if (nint == 0)
    return ERR_INVALID;
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++) {
      if (++nfrac > 9)
        return ERR_INVALID;
      if (nfrac <= 6)
        frac = frac * 10 + (*p - '0');
      else if (nfrac == 7)
        round_up = *p >= '5';
    }
    if (nfrac == 0)
      return ERR_INVALID;
  }
  if (*p != '\0')
    return ERR_INVALID;
  for (; nfrac < 6; nfrac++)
    frac *= 10;
  *out = whole * 1000000 + frac + round_up;
  return 0;
}

/* 1 when s is 1..WORD_MAX letters, digits, '-' and '_': safe inside a
 * quoted filter value and a query. */
static int
plain_word(const char *s)
{
  size_t n = s != NULL ? strnlen(s, WORD_MAX + 1) : 0;

  if (n == 0 || n > WORD_MAX)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
      return 0;
  return 1;
}

/* ---- EC2 ---- */

/* Field name of what is numbered: "InstanceType.3". */
static int
numbered(struct buf *body, const char *prefix, size_t i, const char *value)
{
  char name[64];

  snprintf(name, sizeof(name), "%s.%zu", prefix, i + 1);
  return form_add(body, name, value);
}

int
pricefeed_ec2_spot_body(const char *const *types, size_t ntypes,
                        const char *const *zones, size_t nzones,
                        int64_t at_ms, const char *next_token,
                        struct buf *body)
{
  char when[40];
  int rc;

  if (ntypes == 0)
    return ERR_INVALID;
  time_format_iso(at_ms, when, sizeof(when));
  rc = form_add(body, "Action", "DescribeSpotPriceHistory");
  if (rc == 0)
    rc = form_add(body, "Version", EC2_VERSION);
  for (size_t i = 0; rc == 0 && i < ntypes; i++)
    rc = numbered(body, "InstanceType", i, types[i]);
  if (rc == 0)
    rc = form_add(body, "ProductDescription.1", "Linux/UNIX");
  /* A window of one instant: EC2 answers each series' last change
   * before it, the price in effect then. */
  if (rc == 0)
    rc = form_add(body, "StartTime", when);
  if (rc == 0)
    rc = form_add(body, "EndTime", when);
  if (rc == 0)
    rc = form_add(body, "MaxResults", "1000");
  if (rc == 0 && nzones > 0)
    rc = form_add(body, "Filter.1.Name", "availability-zone");
  for (size_t i = 0; rc == 0 && i < nzones; i++)
    rc = numbered(body, "Filter.1.Value", i, zones[i]);
  if (rc == 0 && next_token != NULL && next_token[0] != '\0')
    rc = form_add(body, "NextToken", next_token);
  return rc;
}

struct spot_reader {
  XML_Parser p;
  struct pricefeed_spot_page *page;
  char path[SPOT_MAX_DEPTH][SPOT_ELEM_LEN];
  int depth;                 /* elements open */
  int in_item;               /* an item of spotPriceHistorySet is open */
  struct pricefeed_spot item;
  char price[32];            /* the item's spotPrice, cut */
  char at[48];               /* its timestamp, cut */
  int errors;                /* <Error> elements seen */
  char code[64], message[300];
  char text[SPOT_TEXT_MAX];
  size_t text_len;
  char why[160];             /* what made the answer unreadable */
};

static const char *
spot_up(const struct spot_reader *r, int i)
{
  return r->depth - 1 - i >= 0 ? r->path[r->depth - 1 - i] : "";
}

static void
spot_stop(struct spot_reader *r, const char *why)
{
  if (r->why[0] == '\0')
    snprintf(r->why, sizeof(r->why), "%s", why);
  XML_StopParser(r->p, XML_FALSE);
}

static void XMLCALL
spot_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
  struct spot_reader *r = arg;

  (void)attrs;
  if (r->depth == SPOT_MAX_DEPTH) {
    spot_stop(r, "nested too deep");
    return;
  }
  snprintf(r->path[r->depth++], SPOT_ELEM_LEN, "%s", name);
  r->text_len = 0;
  if (r->depth == 1) {
    size_t len = strlen(name);

    if (len < 8 || strcmp(name + len - 8, "Response") != 0)
      spot_stop(r, "not an EC2 answer (its root is no ...Response)");
    return;
  }
  if (r->depth == 3 && strcmp(name, "item") == 0 &&
      strcmp(spot_up(r, 1), "spotPriceHistorySet") == 0) {
    r->in_item = 1;
    memset(&r->item, 0, sizeof(r->item));
    r->price[0] = r->at[0] = '\0';
  }
  if (strcmp(name, "Error") == 0)
    r->errors++;
}

static void XMLCALL
spot_text(void *arg, const XML_Char *s, int len)
{
  struct spot_reader *r = arg;
  size_t room = sizeof(r->text) - 1 - r->text_len;
  size_t n = len > 0 ? (size_t)len : 0;

  if (n > room)
    n = room;
  memcpy(r->text + r->text_len, s, n);
  r->text_len += n;
}

static void
spot_take(const struct spot_reader *r, char *field, size_t n)
{
  snprintf(field, n, "%.*s", (int)r->text_len, r->text);
}

/* The item that ended: read, checked, kept when there is room. */
static void
spot_item_end(struct spot_reader *r)
{
  struct pricefeed_spot_page *pg = r->page;
  char why[160];

  r->in_item = 0;
  if (pricefeed_decimal_micro(r->price, &r->item.price_micro) < 0 ||
      r->item.price_micro > PRICEFEED_MAX_MICRO) {
    snprintf(why, sizeof(why), "item %zu: spotPrice '%.32s' is no price",
             pg->nout + 1, r->price);
    spot_stop(r, why);
    return;
  }
  if (time_parse_iso(r->at, &r->item.at_ms) < 0) {
    snprintf(why, sizeof(why), "item %zu: timestamp '%.40s' is no time",
             pg->nout + 1, r->at);
    spot_stop(r, why);
    return;
  }
  if (r->item.zone[0] == '\0' || r->item.type[0] == '\0') {
    snprintf(why, sizeof(why), "item %zu: no availabilityZone or "
             "instanceType", pg->nout + 1);
    spot_stop(r, why);
    return;
  }
  pg->nout++;
  if (pg->n < pg->max)
    pg->rows[pg->n++] = r->item;
}

static void XMLCALL
spot_end(void *arg, const XML_Char *name)
{
  struct spot_reader *r = arg;

  if (r->in_item && r->depth == 4) {
    if (strcmp(name, "availabilityZone") == 0)
      spot_take(r, r->item.zone, sizeof(r->item.zone));
    else if (strcmp(name, "instanceType") == 0)
      spot_take(r, r->item.type, sizeof(r->item.type));
    else if (strcmp(name, "productDescription") == 0)
      spot_take(r, r->item.product, sizeof(r->item.product));
    else if (strcmp(name, "spotPrice") == 0)
      spot_take(r, r->price, sizeof(r->price));
    else if (strcmp(name, "timestamp") == 0)
      spot_take(r, r->at, sizeof(r->at));
  } else if (r->in_item && r->depth == 3) {
    spot_item_end(r);
  } else if (r->depth == 2 && strcmp(name, "nextToken") == 0) {
    if (r->text_len >= sizeof(r->page->next_token))
      spot_stop(r, "nextToken too long");
    else
      spot_take(r, r->page->next_token, sizeof(r->page->next_token));
  }
  if (r->errors == 1 && strcmp(spot_up(r, 1), "Error") == 0) {
    if (strcmp(name, "Code") == 0)
      spot_take(r, r->code, sizeof(r->code));
    else if (strcmp(name, "Message") == 0)
      spot_take(r, r->message, sizeof(r->message));
  }
  r->depth--;
  r->text_len = 0;
}

int
pricefeed_ec2_spot_parse(const char *xml, size_t len,
                         struct pricefeed_spot_page *p, struct err *e)
{
  struct spot_reader *r = xcalloc(1, sizeof(*r));
  int rc = 0;

  p->n = p->nout = 0;
  p->next_token[0] = '\0';
  r->page = p;
  /* No namespace processing, and no entities but XML's own. */
  r->p = XML_ParserCreate("UTF-8");
  if (r->p == NULL) {
    free(r);
    return err_set(e, ERR_NOMEM, "reading an EC2 answer");
  }
  XML_SetUserData(r->p, r);
  XML_SetElementHandler(r->p, spot_start, spot_end);
  XML_SetCharacterDataHandler(r->p, spot_text);
  if (xml == NULL || len > INT32_MAX ||
      XML_Parse(r->p, xml, (int)len, XML_TRUE) != XML_STATUS_OK) {
    rc = err_set(e, ERR_SITE, "EC2's spot prices: %s",
                 r->why[0] != '\0'
                     ? r->why
                     : XML_ErrorString(XML_GetErrorCode(r->p)));
  } else if (r->code[0] != '\0') {
    rc = err_set(e, ERR_SITE, "EC2: %s: %.300s", r->code, r->message);
  }
  if (rc < 0)
    p->n = p->nout = 0;
  XML_ParserFree(r->p);
  free(r);
  return rc;
}

/* ---- JSON helpers ---- */

/* obj[key] as a string into *out (borrowed; NULL when absent or null);
 * ERR_SITE naming where.key when it is something else. */
static int
opt_str(const json_t *obj, const char *key, const char **out,
        const char *where, size_t i, struct err *e)
{
  const json_t *v = json_object_get(obj, key);

  *out = NULL;
  if (v == NULL || json_is_null(v))
    return 0;
  if (!json_is_string(v))
    return err_set(e, ERR_SITE, "%s[%zu].%s is not a string", where, i, key);
  *out = json_string_value(v);
  return 0;
}

/* Load a JSON answer whose top level must be an object. */
static int
load_object(const char *json, size_t len, const char *what, json_t **out,
            struct err *e)
{
  struct err pe = {0};

  if (jsonx_parse_object(json != NULL ? json : "", json != NULL ? len : 0,
                         out, &pe) < 0)
    return err_set(e, ERR_SITE, "%s: %s", what, pe.msg);
  return 0;
}

/* ---- GCP ---- */

int
pricefeed_gcp_skus_url(const char *base, int page_size,
                       const char *page_token, struct buf *url)
{
  size_t len = base != NULL ? strnlen(base, 1025) : 0;
  int rc;

  if (len == 0 || len > 1024)
    return ERR_INVALID;
  while (len > 8 && base[len - 1] == '/')
    len--;
  rc = buf_add(url, base, len);
  if (rc == 0)
    rc = buf_addf(url, "/v1/services/%s/skus?pageSize=%d",
                  PRICEFEED_GCE_SERVICE, page_size);
  if (rc == 0 && page_token != NULL && page_token[0] != '\0') {
    rc = buf_adds(url, "&pageToken=");
    if (rc == 0)
      rc = sigv4_uri_encode(url, page_token);
  }
  return rc;
}

/* 1 when the JSON array arr holds the string s. */
static int
holds(const json_t *arr, const char *s)
{
  size_t i;
  json_t *v;

  json_array_foreach(arr, i, v) {
    if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
      return 1;
  }
  return 0;
}

/* A SKU's description as its name: without the market before and the
 * place after. */
static void
sku_name(const char *desc, char *out, size_t outlen)
{
  static const char *const markets[] = {"Spot Preemptible ", "Preemptible "};
  static const char *const places[] = {" running in ", " attached to "};
  size_t n;

  for (size_t i = 0; i < 2; i++) {
    if (strncmp(desc, markets[i], strlen(markets[i])) == 0) {
      desc += strlen(markets[i]);
      break;
    }
  }
  n = strlen(desc);
  for (size_t i = 0; i < 2; i++) {
    const char *at = strstr(desc, places[i]);

    if (at != NULL && (size_t)(at - desc) < n)
      n = (size_t)(at - desc);
  }
  while (n > 0 && desc[n - 1] == ' ')
    n--;
  if (n >= outlen)
    n = outlen - 1;
  memcpy(out, desc, n);
  out[n] = '\0';
}

/* The newest price of a SKU's pricingInfo per usageUnit "h" in USD into
 * *micro: 1 read, 0 not priced so (skipped), or ERR_SITE. */
static int
sku_price(const json_t *sku, size_t i, int64_t *micro, struct err *e)
{
  const json_t *info = json_object_get(sku, "pricingInfo");
  const json_t *expr, *rates, *rate = NULL, *unit, *units, *nanos;
  const char *usage, *currency;
  int64_t whole = 0, nano;
  size_t k;
  json_t *r;

  if (!json_is_array(info) || json_array_size(info) == 0)
    return err_set(e, ERR_SITE, "skus[%zu]: no pricingInfo", i);
  /* A timeline, oldest first: the last is in force. */
  expr = json_object_get(json_array_get(info, json_array_size(info) - 1),
                         "pricingExpression");
  rates = json_object_get(expr, "tieredRates");
  usage = jsonx_str(expr, "usageUnit");
  if (!json_is_object(expr) || !json_is_array(rates) || usage == NULL)
    return err_set(e, ERR_SITE, "skus[%zu]: pricingExpression has no "
                   "usageUnit and tieredRates", i);
  if (strcmp(usage, "h") != 0)
    return 0;
  /* The tier from the first hour: a GPU's only one. */
  json_array_foreach(rates, k, r) {
    const json_t *start = json_object_get(r, "startUsageAmount");

    if (start == NULL || (json_is_number(start) &&
                          json_number_value(start) == 0)) {
      rate = r;
      break;
    }
  }
  if (rate == NULL)
    return err_set(e, ERR_SITE, "skus[%zu]: no tier starts at 0", i);
  unit = json_object_get(rate, "unitPrice");
  currency = jsonx_str(unit, "currencyCode");
  units = json_object_get(unit, "units");
  nanos = json_object_get(unit, "nanos");
  if (!json_is_object(unit) || currency == NULL)
    return err_set(e, ERR_SITE, "skus[%zu]: a tier has no unitPrice", i);
  if (strcmp(currency, "USD") != 0)
    return 0;
  /* units is an int64, which the JSON mapping spells as a string. */
  if (json_is_string(units)) {
    if (pricefeed_decimal_micro(json_string_value(units), &whole) < 0 ||
        strchr(json_string_value(units), '.') != NULL)
      return err_set(e, ERR_SITE, "skus[%zu]: units '%.20s' is no whole "
                     "number", i, json_string_value(units));
  } else if (json_is_integer(units)) {
    whole = json_integer_value(units);
    if (whole < 0 || whole > 999999999)
      return err_set(e, ERR_SITE, "skus[%zu]: units out of range", i);
    whole *= 1000000;
  } else if (units != NULL && !json_is_null(units)) {
    return err_set(e, ERR_SITE, "skus[%zu]: units is no number", i);
  }
  nano = json_is_integer(nanos) ? json_integer_value(nanos) : 0;
  if ((nanos != NULL && !json_is_null(nanos) && !json_is_integer(nanos)) ||
      nano < 0 || nano > 999999999)
    return err_set(e, ERR_SITE, "skus[%zu]: nanos is no 0 to 999999999", i);
  *micro = whole + (nano + 500) / 1000;
  if (*micro > PRICEFEED_MAX_MICRO)
    return err_set(e, ERR_SITE, "skus[%zu]: price out of range", i);
  return 1;
}

/* skus[i], kept in p when it is a GPU SKU of region priced per hour. */
static int
read_sku(const json_t *sku, size_t i, const char *region,
         struct pricefeed_sku_page *p, struct err *e)
{
  const json_t *cat = json_object_get(sku, "category");
  const json_t *regions = json_object_get(sku, "serviceRegions");
  const char *group = NULL, *usage = NULL, *desc = NULL;
  struct pricefeed_sku row;
  int rc;

  if (!json_is_object(sku))
    return err_set(e, ERR_SITE, "skus[%zu] is not an object", i);
  if (cat != NULL && !json_is_object(cat))
    return err_set(e, ERR_SITE, "skus[%zu].category is not an object", i);
  rc = opt_str(cat, "resourceGroup", &group, "skus", i, e);
  if (rc == 0)
    rc = opt_str(cat, "usageType", &usage, "skus", i, e);
  if (rc == 0)
    rc = opt_str(sku, "description", &desc, "skus", i, e);
  if (rc < 0)
    return rc;
  if (group == NULL || strcmp(group, "GPU") != 0 || usage == NULL ||
      (strcmp(usage, "OnDemand") != 0 && strcmp(usage, "Preemptible") != 0))
    return 0;
  if (regions != NULL && !json_is_array(regions))
    return err_set(e, ERR_SITE, "skus[%zu].serviceRegions is not an array",
                   i);
  if (!holds(regions, region))
    return 0;
  if (desc == NULL)
    return err_set(e, ERR_SITE, "skus[%zu]: a GPU SKU without a "
                   "description", i);
  memset(&row, 0, sizeof(row));
  rc = sku_price(sku, i, &row.price_micro, e);
  if (rc <= 0)
    return rc;
  sku_name(desc, row.name, sizeof(row.name));
  row.spot = strcmp(usage, "Preemptible") == 0;
  p->nout++;
  if (p->n < p->max)
    p->rows[p->n++] = row;
  return 0;
}

int
pricefeed_gcp_skus_parse(const char *json, size_t len, const char *region,
                         struct pricefeed_sku_page *p, struct err *e)
{
  json_t *root = NULL;
  const json_t *skus, *next;
  size_t i;
  json_t *v;
  int rc;

  p->n = p->nout = 0;
  p->next_token[0] = '\0';
  rc = load_object(json, len, "the Billing Catalog's answer", &root, e);
  if (rc < 0)
    return rc;
  skus = json_object_get(root, "skus");
  next = json_object_get(root, "nextPageToken");
  if (skus != NULL && !json_is_array(skus)) {
    rc = err_set(e, ERR_SITE, "the Billing Catalog's answer: skus is not "
                 "an array");
    goto out;
  }
  if (next != NULL && !json_is_null(next) &&
      (!json_is_string(next) ||
       json_string_length(next) >= sizeof(p->next_token))) {
    rc = err_set(e, ERR_SITE, "the Billing Catalog's answer: "
                 "nextPageToken is no string of at most %zu bytes",
                 sizeof(p->next_token) - 1);
    goto out;
  }
  if (json_is_string(next))
    snprintf(p->next_token, sizeof(p->next_token), "%s",
             json_string_value(next));
  json_array_foreach(skus, i, v) {
    rc = read_sku(v, i, region, p, e);
    if (rc < 0)
      goto out;
  }
out:
  if (rc < 0)
    p->n = p->nout = 0;
  json_decref(root);
  return rc;
}

/* 1 when word occurs in s as a word of its own, case aside. */
static int
has_word(const char *s, const char *word)
{
  size_t wl = strlen(word);

  if (wl == 0)
    return 0;
  for (const char *p = s; *p != '\0'; p++) {
    if (strncasecmp(p, word, wl) != 0)
      continue;
    if ((p == s || !isalnum((unsigned char)p[-1])) &&
        !isalnum((unsigned char)p[wl]))
      return 1;
  }
  return 0;
}

static int
has_text(const char *s, const char *text)
{
  size_t tl = strlen(text);

  for (const char *p = s; *p != '\0'; p++)
    if (strncasecmp(p, text, tl) == 0)
      return 1;
  return 0;
}

int
pricefeed_gcp_gpu_price(const struct pricefeed_sku *rows, size_t n,
                        const char *gpu_type, const char *sku, int spot,
                        int64_t *micro, char *why, size_t whylen)
{
  const struct pricefeed_sku *first = NULL;

  for (size_t i = 0; i < n; i++) {
    const struct pricefeed_sku *r = &rows[i];

    if (r->spot != spot)
      continue;
    if (sku != NULL ? strcasecmp(r->name, sku) != 0
                    : !has_word(r->name, gpu_type) ||
                          has_text(r->name, "Workstation"))
      continue;
    if (first == NULL) {
      first = r;
    } else if (strcasecmp(first->name, r->name) != 0) {
      snprintf(why, whylen, "SKUs '%s' and '%s' both name %s: say which "
               "in gpu_skus", first->name, r->name, gpu_type);
      return ERR_CONFLICT;
    } else if (first->price_micro != r->price_micro) {
      snprintf(why, whylen, "SKU '%s' has two prices in the region",
               r->name);
      return ERR_CONFLICT;
    }
  }
  if (first == NULL) {
    snprintf(why, whylen, "no %sGPU SKU %s '%s' in the region",
             spot ? "Spot " : "", sku != NULL ? "named" : "of",
             sku != NULL ? sku : gpu_type);
    return ERR_NOT_FOUND;
  }
  *micro = first->price_micro;
  return 0;
}

/* ---- Azure ---- */

void
pricefeed_azure_init(struct pricefeed_azure *a)
{
  memset(a, 0, sizeof(*a));
  a->on_demand_micro = -1;
  a->spot_micro = -1;
}

int
pricefeed_azure_url(const char *base, const char *region, const char *size,
                    struct buf *url)
{
  size_t len = base != NULL ? strnlen(base, 1025) : 0;
  struct buf filter;
  int rc;

  if (len == 0 || len > 1024 || !plain_word(region) || !plain_word(size))
    return ERR_INVALID;
  while (len > 8 && base[len - 1] == '/')
    len--;
  buf_init(&filter, 1024);
  rc = buf_addf(&filter, "serviceName eq 'Virtual Machines' and "
                "armRegionName eq '%s' and armSkuName eq '%s' and "
                "priceType eq 'Consumption'", region, size);
  if (rc == 0)
    rc = buf_add(url, base, len);
  if (rc == 0)
    rc = buf_adds(url, "/api/retail/prices?api-version="
                  PRICEFEED_AZURE_API_VERSION "&$filter=");
  if (rc == 0)
    rc = sigv4_uri_encode(url, buf_str(&filter));
  buf_release(&filter);
  return rc;
}

/* 1 when s ends in suffix. */
static int
ends_with(const char *s, const char *suffix)
{
  size_t n = s != NULL ? strlen(s) : 0, sl = strlen(suffix);

  return n >= sl && strcmp(s + n - sl, suffix) == 0;
}

/* Items[i] into a when it is a Linux price of size in region. */
static int
read_row(const json_t *row, size_t i, const char *region, const char *size,
         struct pricefeed_azure *a, struct err *e)
{
  static const char *const keys[] = {
      "armSkuName", "armRegionName", "type",        "currencyCode",
      "unitOfMeasure", "productName", "meterName",  "skuName",
      "effectiveStartDate", "serviceName"};
  const char *v[10];
  const json_t *price = json_object_get(row, "retailPrice");
  int64_t micro;
  char *from;
  int spot, rc = 0;

  if (!json_is_object(row))
    return err_set(e, ERR_SITE, "Items[%zu] is not an object", i);
  for (size_t k = 0; rc == 0 && k < 10; k++)
    rc = opt_str(row, keys[k], &v[k], "Items", i, e);
  if (rc < 0)
    return rc;
  a->rows++;
  if (v[0] == NULL || strcmp(v[0], size) != 0 || v[1] == NULL ||
      strcmp(v[1], region) != 0 || v[2] == NULL ||
      strcmp(v[2], "Consumption") != 0 || v[3] == NULL ||
      strcmp(v[3], "USD") != 0 || v[4] == NULL ||
      strcmp(v[4], "1 Hour") != 0 ||
      (v[9] != NULL && strcmp(v[9], "Virtual Machines") != 0))
    return 0;
  /* Windows is in the product; Low Priority and Spot in the meter (and
   * the sku name), whose spacing varies: only the suffixes count. */
  if ((v[5] != NULL && has_text(v[5], "Windows")) ||
      (v[6] != NULL && has_text(v[6], "Low Priority")) ||
      (v[7] != NULL && has_text(v[7], "Low Priority")))
    return 0;
  if (!json_is_number(price) || json_number_value(price) < 0 ||
      json_number_value(price) * 1e6 > (double)PRICEFEED_MAX_MICRO)
    return err_set(e, ERR_SITE, "Items[%zu].retailPrice is no price", i);
  /* Not negative, and bounded above: rounding by adding a half. */
  micro = (int64_t)(json_number_value(price) * 1e6 + 0.5);
  spot = ends_with(v[6], " Spot") || ends_with(v[7], " Spot");
  from = spot ? a->spot_from : a->on_demand_from;
  if (v[8] == NULL)
    v[8] = "";
  if ((spot ? a->spot_micro : a->on_demand_micro) >= 0 &&
      strcmp(v[8], from) <= 0)
    return 0;
  if (spot)
    a->spot_micro = micro;
  else
    a->on_demand_micro = micro;
  snprintf(from, PRICEFEED_NAME_LEN, "%s", v[8]);
  return 0;
}

int
pricefeed_azure_parse(const char *json, size_t len, const char *region,
                      const char *size, struct pricefeed_azure *a,
                      struct err *e)
{
  json_t *root = NULL;
  const json_t *items, *next;
  size_t i;
  json_t *v;
  int rc;

  a->next_link[0] = '\0';
  rc = load_object(json, len, "Retail Prices' answer", &root, e);
  if (rc < 0)
    return rc;
  items = json_object_get(root, "Items");
  next = json_object_get(root, "NextPageLink");
  if (!json_is_array(items)) {
    rc = err_set(e, ERR_SITE, "Retail Prices' answer has no Items array");
    goto out;
  }
  if (next != NULL && !json_is_null(next) &&
      (!json_is_string(next) ||
       json_string_length(next) >= sizeof(a->next_link))) {
    rc = err_set(e, ERR_SITE, "Retail Prices' answer: NextPageLink is no "
                 "string of at most %zu bytes", sizeof(a->next_link) - 1);
    goto out;
  }
  json_array_foreach(items, i, v) {
    rc = read_row(v, i, region, size, a, e);
    if (rc < 0)
      goto out;
  }
  if (json_is_string(next))
    snprintf(a->next_link, sizeof(a->next_link), "%s",
             json_string_value(next));
out:
  json_decref(root);
  return rc;
}
