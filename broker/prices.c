/*
 * A site's price model, from its config's "cost" block: "owned" (finance
 * inputs, turned into rates by policies/price.c) or "rented" (rates per
 * GPU type).  A site without the block is unpriced, never free.
 *
 * The price history has three sources.  The config's prices are
 * recorded at each start where they changed; an admin's (tenbin prices
 * set) hold until the config changes that price; and a rented site
 * whose adapter has a price source (the aws, gcp and azure sites) has it
 * asked every price_refresh_s, its prices recorded where they changed.
 * A provider's price overrides the config's, in the ledger and in the
 * cost policy, but never an admin's that is in force.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "broker/config_fields.h"
#include "policies/price.h"
#include "spec/jobspec.h"
#include "util/alloc.h"
#include "util/grow.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/timeutil.h"

/* Defaults of an owned site's optional inputs (README "Prices"). */
#define OWNED_SUPPORT_PER_YEAR 0.10 /* of capex: typical maintenance */
#define OWNED_PUE 1.5               /* between today's average and new sites */
#define OWNED_GPUS_PER_NODE 8
#define RENTED_MIN_BILLED_S 60
/* A provider's prices are asked hourly unless the config says: its
 * catalog changes far more slowly, and reading one (GCP's SKUs) is some
 * megabytes. */
#define PRICE_REFRESH_S 3600
#define PRICE_REFRESH_MIN_S 60
#define PRICE_REFRESH_MAX_S (30 * 86400)
/* A failed ask is tried again this soon (or at the refresh, if sooner). */
#define PRICE_RETRY_MS (5 * 60 * 1000)

/* obj[key] as a number into *out: dflt (when not NAN) when absent, else
 * ERR_CONFIG naming where+key. */
static int
number(const json_t *obj, const char *key, double dflt, double *out,
       const char *where, struct err *e)
{
  const json_t *v = json_object_get(obj, key);

  if (v == NULL || json_is_null(v)) {
    if (isnan(dflt))
      return err_set(e, ERR_CONFIG, "field '%s%s': required", where, key);
    *out = dflt;
    return 0;
  }
  *out = json_number_value(v); /* a number: jsonx_check saw to it */
  return 0;
}

const struct jsonx_field broker_cost_owned_fields[] = {
    {"capex_per_node", JX_NUMBER}, {"nodes", JX_INT},
    {"years", JX_NUMBER},          {"support_per_year", JX_NUMBER},
    {"power_kw_busy", JX_NUMBER},  {"power_kw_idle", JX_NUMBER},
    {"pue", JX_NUMBER},            {"dollars_per_kwh", JX_NUMBER},
    {"staff_per_year", JX_NUMBER}, {"gpus_per_node", JX_INT},
    {NULL, 0}};

static int
owned(struct site_cost *c, const json_t *o, const char *where, struct err *e)
{
  struct price_owned *in = &c->owned;
  const char *why;
  int rc;

  rc = jsonx_check(o, broker_cost_owned_fields, where, e);
  if (rc == 0 && json_object_get(o, "nodes") == NULL)
    rc = err_set(e, ERR_CONFIG, "field '%snodes': required", where);
  if (rc == 0)
    rc = jsonx_int(o, "nodes", INT64_MIN, INT64_MAX, 0, &in->nodes, where, e);
  if (rc == 0)
    rc = jsonx_int(o, "gpus_per_node", INT64_MIN, INT64_MAX,
                   OWNED_GPUS_PER_NODE, &in->gpus_per_node, where, e);
  if (rc == 0)
    rc = number(o, "capex_per_node", NAN, &in->capex_per_node, where, e);
  if (rc == 0)
    rc = number(o, "years", NAN, &in->years, where, e);
  if (rc == 0)
    rc = number(o, "support_per_year", OWNED_SUPPORT_PER_YEAR,
                &in->support_per_year, where, e);
  if (rc == 0)
    rc = number(o, "power_kw_busy", NAN, &in->power_kw_busy, where, e);
  if (rc == 0)
    rc = number(o, "power_kw_idle", NAN, &in->power_kw_idle, where, e);
  if (rc == 0)
    rc = number(o, "pue", OWNED_PUE, &in->pue, where, e);
  if (rc == 0)
    rc = number(o, "dollars_per_kwh", NAN, &in->dollars_per_kwh, where, e);
  if (rc == 0)
    rc = number(o, "staff_per_year", 0, &in->staff_per_year, where, e);
  if (rc < 0)
    return ERR_CONFIG;
  why = price_owned_problem(in);
  if (why != NULL) {
    const char *colon = strchr(why, ':');

    return err_set(e, ERR_CONFIG, "field '%s%.*s'%s", where,
                   (int)(colon - why), why, colon);
  }
  price_owned_rates(in, &c->rates);
  c->kind = SITE_OWNED;
  return 0;
}

/* key, a well-formed GPU type, in lower case into out (32 bytes: the
 * rule allows 31 characters), as jobs name types. */
static void
lower_type(const char *key, char out[32])
{
  size_t i;

  for (i = 0; key[i] != '\0' && i < 31; i++)
    out[i] = (char)tolower((unsigned char)key[i]);
  out[i] = '\0';
}

/* A GPU type as a price names it: a job's rule, in lower case. */
static int
gpu_type_key(const char *key, char out[32], const char *where,
             struct err *e)
{
  const char *why = jobspec_gpu_type_problem(key);

  if (why != NULL)
    return err_set(e, ERR_CONFIG, "field '%s%.40s': GPU type %s", where,
                   key, why);
  lower_type(key, out);
  return 0;
}

/* A rate in dollars per GPU-hour at where+key, into micro-dollars. */
static int
dollars(const json_t *v, int64_t *out, const char *where, const char *key,
        struct err *e)
{
  if (!json_is_number(v) ||
      price_dollars_to_micro(json_number_value(v), PRICE_MAX_MICRO, out) < 0)
    return err_set(e, ERR_CONFIG, "field '%s%.40s': must be a number of "
                   "dollars, 0 to 10000", where, key);
  return 0;
}

const struct jsonx_field broker_cost_rented_fields[] = {
    {"per_gpu_hour", JX_OBJECT},     {"spot_per_gpu_hour", JX_OBJECT},
    {"min_billed_seconds", JX_INT},  {"egress_per_gb", JX_NUMBER},
    {"egress_to_sites_per_gb", JX_OBJECT}, {"price_refresh_s", JX_INT},
    {NULL, 0}};

static int
rented(struct site_cost *c, const json_t *r, const char *where, struct err *e)
{
  const json_t *to = json_object_get(r, "egress_to_sites_per_gb");
  const json_t *od = json_object_get(r, "per_gpu_hour");
  const json_t *spot = json_object_get(r, "spot_per_gpu_hour");
  char at[160];
  const char *key;
  json_t *v;
  int rc;

  rc = jsonx_check(r, broker_cost_rented_fields, where, e);
  if (rc < 0)
    return ERR_CONFIG;
  if (od == NULL || json_object_size(od) == 0)
    return err_set(e, ERR_CONFIG, "field '%sper_gpu_hour': required, the "
                   "on-demand price of each GPU type", where);
  c->rented = xcalloc(json_object_size(od), sizeof(*c->rented));
  snprintf(at, sizeof(at), "%sper_gpu_hour.", where);
  json_object_foreach((json_t *)od, key, v) {
    struct site_rate *rate = &c->rented[c->nrented];

    rc = gpu_type_key(key, rate->gpu_type, at, e);
    if (rc == 0)
      rc = dollars(v, &rate->per_gpu_hour_micro, at, key, e);
    if (rc < 0)
      return ERR_CONFIG;
    for (size_t k = 0; k < c->nrented; k++) {
      if (strcmp(c->rented[k].gpu_type, rate->gpu_type) == 0)
        return err_set(e, ERR_CONFIG, "field '%s%.40s': GPU type '%s' "
                       "priced twice", at, key, rate->gpu_type);
    }
    rate->spot_micro = -1;
    c->nrented++;
  }
  snprintf(at, sizeof(at), "%sspot_per_gpu_hour.", where);
  json_object_foreach((json_t *)spot, key, v) {
    char type[32];
    struct site_rate *rate = NULL;

    rc = gpu_type_key(key, type, at, e);
    if (rc < 0)
      return ERR_CONFIG;
    for (size_t k = 0; k < c->nrented; k++) {
      if (strcmp(c->rented[k].gpu_type, type) == 0)
        rate = &c->rented[k];
    }
    if (rate == NULL)
      return err_set(e, ERR_CONFIG, "field '%s%.40s': no on-demand price "
                     "for GPU type '%s' in per_gpu_hour", at, key, type);
    if (dollars(v, &rate->spot_micro, at, key, e) < 0)
      return ERR_CONFIG;
  }
  rc = jsonx_int(r, "min_billed_seconds", 0, 86400, RENTED_MIN_BILLED_S,
                 &c->min_billed_seconds, where, e);
  if (rc < 0)
    return ERR_CONFIG;
  if (jsonx_int(r, "price_refresh_s", 0, PRICE_REFRESH_MAX_S, -1,
                &c->refresh_s, where, NULL) < 0 ||
      (c->refresh_s > 0 && c->refresh_s < PRICE_REFRESH_MIN_S))
    return err_set(e, ERR_CONFIG, "field '%sprice_refresh_s': 0 (never) or "
                   "%d to %d seconds", where, PRICE_REFRESH_MIN_S,
                   PRICE_REFRESH_MAX_S);
  v = json_object_get(r, "egress_per_gb");
  c->egress_per_gb_micro = 0;
  if (v != NULL && !json_is_null(v) &&
      dollars(v, &c->egress_per_gb_micro, where, "egress_per_gb", e) < 0)
    return ERR_CONFIG;
  /* the sites named are checked once every site is known */
  c->egress_to = xcalloc(json_object_size(to) + 1, sizeof(*c->egress_to));
  snprintf(at, sizeof(at), "%segress_to_sites_per_gb.", where);
  json_object_foreach((json_t *)to, key, v) {
    struct site_egress *g = &c->egress_to[c->negress_to++];

    if (strlen(key) >= sizeof(g->site))
      return err_set(e, ERR_CONFIG, "field '%s%.40s': no such site", at,
                     key);
    snprintf(g->site, sizeof(g->site), "%s", key);
    if (dollars(v, &g->per_gb_micro, at, key, e) < 0)
      return ERR_CONFIG;
  }
  c->kind = SITE_RENTED;
  return 0;
}

const struct jsonx_field broker_cost_fields[] = {
    {"owned", JX_OBJECT}, {"rented", JX_OBJECT}, {NULL, 0}};

int
broker__site_cost(struct site_cost *c, const json_t *cost, size_t i,
                  struct err *e)
{
  const json_t *o = json_object_get(cost, "owned");
  const json_t *r = json_object_get(cost, "rented");
  char where[64];
  int rc;

  memset(c, 0, sizeof(*c));
  snprintf(where, sizeof(where), "sites[%zu].cost.", i);
  if (!json_is_object(cost))
    return err_set(e, ERR_CONFIG, "field 'sites[%zu].cost' must be an "
                   "object: {\"owned\": {...}} or {\"rented\": {...}}", i);
  if (jsonx_check(cost, broker_cost_fields, where, e) < 0)
    return ERR_CONFIG;
  if ((o == NULL) == (r == NULL))
    return err_set(e, ERR_CONFIG, "field 'sites[%zu].cost': give exactly "
                   "one of \"owned\" and \"rented\"", i);
  snprintf(where, sizeof(where), "sites[%zu].cost.%s.", i,
           o != NULL ? "owned" : "rented");
  rc = o != NULL ? owned(c, o, where, e) : rented(c, r, where, e);
  if (rc < 0)
    broker__site_cost_release(c);
  return rc;
}

void
broker__site_cost_release(struct site_cost *c)
{
  free(c->rented);
  free(c->egress_to);
  memset(c, 0, sizeof(*c));
}

int64_t
broker__egress_rate(const struct site_cost *c, const char *to)
{
  for (size_t k = 0; to != NULL && k < c->negress_to; k++) {
    if (strcmp(c->egress_to[k].site, to) == 0)
      return c->egress_to[k].per_gb_micro;
  }
  return c->egress_per_gb_micro;
}

const struct site_rate *
broker__site_rate(const struct site_cost *c, const char *gpu_type)
{
  for (size_t k = 0; k < c->nrented; k++) {
    if (strcmp(c->rented[k].gpu_type, gpu_type) == 0)
      return &c->rented[k];
  }
  return NULL;
}

/* ---- the price history ---- */

/* One rate the config gives a site. */
struct given {
  const char *gpu_type;
  const char *kind;
  int64_t rate_micro;
};

/* The rates s's cost block gives, into out (room for 2 per rented type
 * and 2 for an owned site); the count. */
static size_t
given_rates(const struct site *s, struct given *out)
{
  const struct site_cost *c = &s->cost;
  size_t n = 0;

  if (c->kind == SITE_OWNED) {
    out[n++] = (struct given){"*", "sunk", c->rates.sunk_micro};
    out[n++] = (struct given){"*", "marginal", c->rates.marginal_micro};
  }
  for (size_t k = 0; c->kind == SITE_RENTED && k < c->nrented; k++) {
    const struct site_rate *r = &c->rented[k];

    out[n++] = (struct given){r->gpu_type, "on_demand",
                              r->per_gpu_hour_micro};
    if (r->spot_micro >= 0)
      out[n++] = (struct given){r->gpu_type, "spot", r->spot_micro};
  }
  return n;
}

static struct given *
given_alloc(const struct site *s)
{
  return xcalloc(2 * s->cost.nrented + 2, sizeof(struct given));
}

/* A key of a row in force that the config may have stopped giving. */
struct in_force {
  char site[65], gpu_type[32], kind[16];
};

struct in_force_list {
  struct in_force *v;
  size_t n, cap;
};

static int
collect_in_force(const struct db_price *p, void *arg)
{
  struct in_force_list *l = arg;
  struct in_force *f;

  if (p->rate_micro == DB_PRICE_WITHDRAWN)
    return 0;
  GROW(l->v, l->n + 1, l->cap);
  f = &l->v[l->n++];
  snprintf(f->site, sizeof(f->site), "%s", p->site);
  snprintf(f->gpu_type, sizeof(f->gpu_type), "%s", p->gpu_type);
  snprintf(f->kind, sizeof(f->kind), "%s", p->kind);
  return 0;
}

/* Whether the config gives s the rate of (gpu_type, kind). */
static int
gives(const struct site *s, const char *gpu_type, const char *kind)
{
  struct given *g = given_alloc(s);
  size_t n = given_rates(s, g);
  int yes = 0;

  for (size_t k = 0; k < n && !yes; k++)
    yes = strcmp(g[k].gpu_type, gpu_type) == 0 &&
          strcmp(g[k].kind, kind) == 0;
  free(g);
  return yes;
}

int
broker__prices_sync(struct broker *b, int64_t now_ms, struct err *e)
{
  struct in_force_list l = {0};
  int rc = 0;

  /* A refresh asked of a site that has nothing to ask is a mistake. */
  for (size_t i = 0; i < b->nsites; i++) {
    const struct site *s = &b->sites[i];

    if (s->cost.kind == SITE_RENTED && s->cost.refresh_s > 0 &&
        s->ops->prices == NULL)
      return err_set(e, ERR_CONFIG, "field 'sites[%zu].cost.rented."
                     "price_refresh_s': a %s site has no price source to "
                     "refresh from", i, s->kind);
  }
  /* What the config gives: a new period where it changed since the
   * config last said (an admin's price holds until then). */
  for (size_t i = 0; rc == 0 && i < b->nsites; i++) {
    const struct site *s = &b->sites[i];
    struct given *g = given_alloc(s);
    size_t n = given_rates(s, g);

    for (size_t k = 0; rc == 0 && k < n; k++) {
      int64_t last = 0;
      int found = 0;

      rc = db_price_last_config(b->db, s->name, g[k].gpu_type, g[k].kind,
                                &last, &found, e);
      if (rc == 0 && (!found || last != g[k].rate_micro))
        rc = db_price_insert(b->db,
                             &(struct db_price){s->name, g[k].gpu_type,
                                                g[k].kind, now_ms,
                                                g[k].rate_micro, 0},
                             e);
    }
    free(g);
  }
  /* What it gave and no longer gives, for a site it still names:
   * withdrawn.  A price only an admin ever set is the admin's to keep. */
  if (rc == 0)
    rc = db_price_current(b->db, now_ms, collect_in_force, &l, e);
  for (size_t k = 0; rc == 0 && k < l.n; k++) {
    const struct site *s = broker__site(b, l.v[k].site);
    int64_t last = DB_PRICE_WITHDRAWN;
    int found = 0;

    if (s == NULL || gives(s, l.v[k].gpu_type, l.v[k].kind))
      continue;
    rc = db_price_last_config(b->db, l.v[k].site, l.v[k].gpu_type,
                              l.v[k].kind, &last, &found, e);
    if (rc == 0 && found && last != DB_PRICE_WITHDRAWN)
      rc = db_price_insert(b->db,
                           &(struct db_price){l.v[k].site, l.v[k].gpu_type,
                                              l.v[k].kind, now_ms,
                                              DB_PRICE_WITHDRAWN, 0},
                           e);
  }
  free(l.v);
  return rc < 0 ? err_prefix(e, "recording the config's prices") : 0;
}

int
broker_price_set(struct broker *b, const struct principal *p,
                 const char *site, const char *gpu_type,
                 int64_t per_gpu_hour_micro, int64_t spot_micro,
                 struct err *e)
{
  const struct site *s = broker__site(b, site);
  const char *why = jobspec_gpu_type_problem(gpu_type);
  char type[32];
  int64_t now = time_now_ms();
  int rc;

  if (p->role != ROLE_ADMIN)
    return err_set(e, ERR_FORBIDDEN, "setting prices needs the admin role");
  if (s == NULL)
    return err_set(e, ERR_NOT_FOUND, "site '%.64s' not found", site);
  if (s->cost.kind != SITE_RENTED)
    return err_set(e, ERR_UNPROCESSABLE, "site '%s' is %s: only a rented "
                   "site's prices are set here (an owned site's rates come "
                   "from its finance inputs in the config)", s->name,
                   s->cost.kind == SITE_OWNED ? "owned" : "unpriced");
  if (why != NULL)
    return err_set(e, ERR_INVALID, "field 'gpu_type': %s", why);
  lower_type(gpu_type, type);
  if (broker__site_rate(&s->cost, type) == NULL)
    return err_set(e, ERR_UNPROCESSABLE, "field 'gpu_type': site '%s' has "
                   "no price for GPU type '%s' (its config names the types "
                   "it rents)", s->name, type);
  if (per_gpu_hour_micro < 0 || per_gpu_hour_micro > PRICE_MAX_MICRO)
    return err_set(e, ERR_INVALID, "field 'per_gpu_hour': must be a number "
                   "of dollars, 0 to 10000");
  if (spot_micro > PRICE_MAX_MICRO)
    return err_set(e, ERR_INVALID, "field 'spot_per_gpu_hour': must be a "
                   "number of dollars, 0 to 10000");
  /* The new rate and the running holds cut where it starts, at once. */
  rc = db_begin(b->db, e);
  if (rc == 0)
    rc = db_price_insert(b->db,
                         &(struct db_price){s->name, type, "on_demand", now,
                                            per_gpu_hour_micro, 1},
                         e);
  if (rc == 0 && spot_micro >= 0)
    rc = db_price_insert(b->db,
                         &(struct db_price){s->name, type, "spot", now,
                                            spot_micro, 1},
                         e);
  if (rc == 0)
    rc = broker__ledger_catch_up(b, now, 1, e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0)
    db_rollback(b->db);
  return rc;
}

struct list_arg {
  struct broker *b;
  price_view_cb cb;
  void *arg;
};

static int
to_view(const struct db_price *p, void *arg)
{
  struct list_arg *a = arg;
  struct price_view v = {.site = p->site,
                         .gpu_type = p->gpu_type,
                         .kind = p->kind,
                         .rate_micro = p->rate_micro,
                         .since_ms = p->valid_from_ms,
                         .admin = p->admin == DB_PRICE_ADMIN,
                         .provider = p->admin == DB_PRICE_PROVIDER};
  const struct site *s = broker__site(a->b, p->site);

  if (p->rate_micro == DB_PRICE_WITHDRAWN)
    return 0;
  if (s != NULL && s->cost.kind == SITE_OWNED)
    v.inputs = &s->cost.owned;
  return a->cb(&v, a->arg);
}

int
broker_price_list(struct broker *b, price_view_cb cb, void *arg,
                  struct err *e)
{
  struct list_arg a = {b, cb, arg};

  return db_price_current(b->db, time_now_ms(), to_view, &a, e);
}

/* ---- a provider's prices ---- */

/* The row in force of one key of a site. */
struct held {
  char gpu_type[32], kind[16];
  int64_t rate_micro, from_ms;
  int admin, provider;
};

struct held_list {
  const char *site;
  struct held *v;
  size_t n, cap;
};

static int
collect_held(const struct db_price *p, void *arg)
{
  struct held_list *l = arg;
  struct held *h;

  if (strcmp(p->site, l->site) != 0)
    return 0;
  GROW(l->v, l->n + 1, l->cap);
  h = &l->v[l->n++];
  snprintf(h->gpu_type, sizeof(h->gpu_type), "%s", p->gpu_type);
  snprintf(h->kind, sizeof(h->kind), "%s", p->kind);
  h->rate_micro = p->rate_micro;
  h->from_ms = p->valid_from_ms;
  h->admin = p->admin == DB_PRICE_ADMIN;
  h->provider = p->admin == DB_PRICE_PROVIDER;
  return 0;
}

static const struct held *
find_held(const struct held_list *l, const char *gpu_type, const char *kind)
{
  for (size_t k = 0; k < l->n; k++)
    if (strcmp(l->v[k].gpu_type, gpu_type) == 0 &&
        strcmp(l->v[k].kind, kind) == 0)
      return &l->v[k];
  return NULL;
}

/* Why a price an adapter gave cannot be recorded, or NULL. */
static const char *
price_problem(const struct adapter_price *p)
{
  if (p->gpu_type == NULL || jobspec_gpu_type_problem(p->gpu_type) != NULL)
    return "no GPU type as jobs name them";
  if (p->kind == NULL ||
      (strcmp(p->kind, "on_demand") != 0 && strcmp(p->kind, "spot") != 0))
    return "its kind is neither on_demand nor spot";
  if (p->per_gpu_hour_micro < 0 || p->per_gpu_hour_micro > PRICE_MAX_MICRO)
    return "not 0 to 10000 dollars a GPU-hour";
  return NULL;
}

/* A price in force that the cost policy should see, once committed. */
struct in_memory {
  struct site_rate *rate;
  int spot;
  int64_t micro;
};

int
broker__prices_record(struct broker *b, struct site *s,
                      const struct adapter_price *p, size_t n,
                      int64_t now_ms, struct err *e)
{
  struct held_list l = {s->name, NULL, 0, 0};
  struct in_memory *mem = xcalloc(n > 0 ? n : 1, sizeof(*mem));
  size_t nmem = 0, changed = 0;
  int began = 0, rc;

  rc = db_price_current(b->db, now_ms, collect_held, &l, e);
  if (rc == 0)
    rc = db_begin(b->db, e);
  began = rc == 0;
  for (size_t k = 0; rc == 0 && k < n; k++) {
    const char *why = price_problem(&p[k]);
    struct site_rate *rate = NULL;
    const struct held *h;
    int64_t from = now_ms;
    char type[32];

    if (why != NULL) {
      log_warn("site %s: a price its provider gave is ignored: %s",
               s->name, why);
      continue;
    }
    lower_type(p[k].gpu_type, type);
    for (size_t r = 0; r < s->cost.nrented; r++)
      if (strcmp(s->cost.rented[r].gpu_type, type) == 0)
        rate = &s->cost.rented[r];
    if (rate == NULL) {
      log_debug("site %s: its provider prices %s, which the config does "
                "not rent", s->name, type);
      continue;
    }
    h = find_held(&l, type, p[k].kind);
    /* An admin's price holds until the config changes it. */
    if (h != NULL && h->admin)
      continue;
    mem[nmem++] = (struct in_memory){rate, strcmp(p[k].kind, "spot") == 0,
                                     p[k].per_gpu_hour_micro};
    if (h != NULL && h->provider && h->rate_micro == p[k].per_gpu_hour_micro)
      continue;
    /* A row of the same millisecond would replace the one in force. */
    if (h != NULL && h->from_ms >= from)
      from = h->from_ms + 1;
    rc = db_price_insert(b->db,
                         &(struct db_price){.site = s->name,
                                            .gpu_type = type,
                                            .kind = p[k].kind,
                                            .valid_from_ms = from,
                                            .rate_micro =
                                                p[k].per_gpu_hour_micro,
                                            .admin = DB_PRICE_PROVIDER},
                         e);
    if (rc == 0)
      log_info("site %s: %s %s price from its provider: %" PRId64
               " micro-dollars a GPU-hour", s->name, type, p[k].kind,
               p[k].per_gpu_hour_micro);
    changed++;
  }
  /* The new rates and the running holds cut where they start, at once. */
  if (rc == 0 && changed > 0)
    rc = broker__ledger_catch_up(b, now_ms, 1, e);
  if (rc == 0 && began)
    rc = db_commit(b->db, e);
  else if (began)
    db_rollback(b->db);
  for (size_t k = 0; rc == 0 && k < nmem; k++) {
    if (mem[k].spot)
      mem[k].rate->spot_micro = mem[k].micro;
    else
      mem[k].rate->per_gpu_hour_micro = mem[k].micro;
  }
  free(mem);
  free(l.v);
  return rc < 0 ? err_prefix(e, "recording site %s's provider prices",
                             s->name)
                : 0;
}

/* How often s's provider is asked for prices, ms; 0: never. */
static int64_t
refresh_ms(const struct site *s)
{
  if (s->cost.kind != SITE_RENTED || s->ops->prices == NULL ||
      s->cost.refresh_s == 0)
    return 0;
  return (s->cost.refresh_s < 0 ? PRICE_REFRESH_S : s->cost.refresh_s) *
         1000;
}

static void prices_tick(uv_timer_t *t);

/* The timer, for the soonest ask due. */
static void
prices_arm(struct broker *b)
{
  uint64_t now = uv_now(b->loop), soonest = UINT64_MAX;

  if (b->closing)
    return;
  for (size_t i = 0; i < b->nsites; i++) {
    const struct site *s = &b->sites[i];

    if (refresh_ms(s) > 0 && !s->prices_asking && s->prices_due < soonest)
      soonest = s->prices_due;
  }
  uv_timer_stop(&b->prices_timer);
  if (soonest != UINT64_MAX)
    uv_timer_start(&b->prices_timer, prices_tick,
                   soonest > now ? soonest - now : 0, 0);
}

static void
on_prices(void *arg, int rc, const struct adapter_price *p, size_t n,
          const struct err *e)
{
  struct site *s = arg;
  struct broker *b = s->broker;
  int64_t every = refresh_ms(s), wait = every;
  struct err re = {0};

  s->prices_asking = 0;
  /* The answer of a site being closed has no one to go to. */
  if (b->closing || s->ctx == NULL)
    return;
  if (rc < 0) {
    log_warn("site %s: its provider's prices: %s", s->name,
             e != NULL && e->msg[0] != '\0' ? e->msg : err_str(rc));
    if (wait > PRICE_RETRY_MS)
      wait = PRICE_RETRY_MS;
  } else if (broker__prices_record(b, s, p, n, time_now_ms(), &re) < 0) {
    log_warn("site %s: %s", s->name, re.msg);
  }
  s->prices_due = uv_now(b->loop) + (uint64_t)wait;
  prices_arm(b);
}

static void
prices_tick(uv_timer_t *t)
{
  struct broker *b = t->data;
  uint64_t now = uv_now(b->loop);

  for (size_t i = 0; i < b->nsites; i++) {
    struct site *s = &b->sites[i];

    if (refresh_ms(s) == 0 || s->prices_asking || s->ctx == NULL ||
        s->prices_due > now)
      continue;
    s->prices_asking = 1;
    s->ops->prices(s->ctx, on_prices, s);
  }
  prices_arm(b);
}

void
broker__prices_init(struct broker *b)
{
  uint64_t now = uv_now(b->loop);

  uv_timer_init(b->loop, &b->prices_timer);
  b->prices_timer.data = b;
  for (size_t i = 0; i < b->nsites; i++) {
    struct site *s = &b->sites[i];
    int64_t every = refresh_ms(s);

    s->prices_due = now;
    if (every > 0)
      log_info("site %s: prices from its provider every %" PRId64 " s",
               s->name, every / 1000);
  }
  prices_arm(b);
}

void
broker__prices_close(struct broker *b)
{
  uv_timer_stop(&b->prices_timer);
  broker__close_handle(b, (uv_handle_t *)&b->prices_timer);
}
