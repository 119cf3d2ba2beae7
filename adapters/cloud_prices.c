/*
 * The VM pool's side of a site's prices (cloud_int.h, cloud_prices_ask):
 * the provider prices node shapes, the broker records prices per GPU
 * type, so each type gets the price of its first shape in config order
 * (the one the pool launches first) divided over the shape's GPUs.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/cloud_int.h"
#include "util/alloc.h"

struct ask {
  const struct cloud_shape *shapes;
  size_t nshapes;
  adapter_prices_cb cb;
  void *arg;
  uv_timer_t later;           /* answers a provider without prices */
};

static void
ask_free_cb(uv_handle_t *h)
{
  free(h->data);
}

/* A node's price over its gpus, rounded to the micro-dollar. */
static int64_t
per_gpu(int64_t node_micro, int64_t gpus)
{
  return (node_micro + gpus / 2) / gpus;
}

/* The index of gpu_type among the n types in out, lowercase, added when
 * new. */
static size_t
type_slot(char (*types)[ADAPTER_GPU_TYPE_LEN], size_t *n,
          const char *gpu_type)
{
  char lower[ADAPTER_GPU_TYPE_LEN];
  size_t i;

  for (i = 0; gpu_type[i] != '\0' && i + 1 < sizeof(lower); i++)
    lower[i] = (char)tolower((unsigned char)gpu_type[i]);
  lower[i] = '\0';
  for (i = 0; i < *n; i++)
    if (strcmp(types[i], lower) == 0)
      return i;
  memcpy(types[*n], lower, sizeof(lower));
  return (*n)++;
}

static void
on_prices(void *arg, const struct cloud_result *r, const struct cloud_price *p,
          size_t n)
{
  struct ask *a = arg;
  char types[CLOUD_MAX_SHAPES][ADAPTER_GPU_TYPE_LEN];
  int64_t od[CLOUD_MAX_SHAPES], spot[CLOUD_MAX_SHAPES];
  struct adapter_price out[2 * CLOUD_MAX_SHAPES];
  size_t ntypes = 0, nout = 0;
  struct err e = {0};

  if (r->rc < 0) {
    err_set(&e, r->rc, "%s", r->msg);
    a->cb(a->arg, r->rc, NULL, 0, &e);
    goto out;
  }
  for (size_t s = 0; s < a->nshapes && s < CLOUD_MAX_SHAPES; s++) {
    const struct cloud_shape *sh = &a->shapes[s];
    size_t known = ntypes;
    size_t t = type_slot(types, &ntypes, sh->gpu_type);

    if (ntypes > known)
      od[t] = spot[t] = -1;
    for (size_t k = 0; k < n && sh->gpus > 0; k++) {
      if (p[k].shape != s)
        continue;
      if (od[t] < 0 && p[k].on_demand_micro >= 0)
        od[t] = per_gpu(p[k].on_demand_micro, sh->gpus);
      if (spot[t] < 0 && p[k].spot_micro >= 0)
        spot[t] = per_gpu(p[k].spot_micro, sh->gpus);
    }
  }
  for (size_t t = 0; t < ntypes; t++) {
    if (od[t] >= 0)
      out[nout++] = (struct adapter_price){types[t], "on_demand", od[t]};
    if (spot[t] >= 0)
      out[nout++] = (struct adapter_price){types[t], "spot", spot[t]};
  }
  a->cb(a->arg, 0, out, nout, NULL);
out:
  uv_close((uv_handle_t *)&a->later, ask_free_cb);
}

static void
none_cb(uv_timer_t *t)
{
  struct ask *a = t->data;
  struct cloud_result r;

  cloud_refuse(&r, CLOUD_REFUSED_OTHER, -1, "the provider has no price "
               "source");
  r.rc = ERR_UNAVAILABLE;
  on_prices(a, &r, NULL, 0);
}

void
cloud_prices_ask(uv_loop_t *loop, const struct cloud_provider *prov,
                 void *pctx, const struct cloud_shape *shapes,
                 size_t nshapes, adapter_prices_cb cb, void *arg)
{
  struct ask *a = xcalloc(1, sizeof(*a));

  a->shapes = shapes;
  a->nshapes = nshapes;
  a->cb = cb;
  a->arg = arg;
  uv_timer_init(loop, &a->later);
  a->later.data = a;
  if (prov->prices == NULL)
    uv_timer_start(&a->later, none_cb, 0, 0);
  else
    prov->prices(pctx, on_prices, a);
}
