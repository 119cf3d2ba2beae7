/*
 * Private to adapters/: the VM-pool site (cloud.c) and the providers it
 * drives (cloud_aws.c, ...).  The pool owns the nodes, the jobs on them
 * and every decision (which zone, which shape, when to give up, when a
 * node is idle, lost or never booted); a provider only turns "launch
 * this", "list ours" and "terminate that" into its cloud's HTTP calls and
 * reads the answers into struct cloud_vm and a refusal class.
 */
#ifndef TENBIN_ADAPTERS_CLOUD_INT_H
#define TENBIN_ADAPTERS_CLOUD_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "adapters/adapter.h"
#include "adapters/cloud_vm.h"
#include "util/err.h"
#include "util/jsonx.h"

#define CLOUD_MAX_SHAPES 8
#define CLOUD_MAX_ZONES 16

enum cloud_market {
  CLOUD_ON_DEMAND = 0,
  CLOUD_SPOT,
  CLOUD_SPOT_FALLBACK /* spot in every zone first, then on demand */
};

/* One node shape of the site config's "shapes". */
struct cloud_shape {
  char name[CLOUD_NAME_LEN];     /* the config's name for it */
  char type[CLOUD_NAME_LEN];     /* instance type, machine type, VM size */
  char gpu_type[ADAPTER_GPU_TYPE_LEN];
  int64_t gpus;                  /* per node */
  enum cloud_market market;
  const json_t *config;          /* the shape's object (borrowed from the
                                    site config, alive while the site is) */
};

/* What a provider call came to. */
struct cloud_result {
  int rc;                        /* 0, or a negative code */
  enum cloud_refusal why;        /* when rc < 0 */
  int64_t retry_after_ms;        /* the provider's own wait, or -1 */
  char msg[CLOUD_MSG_LEN];       /* what it said, for logs and reasons */
};

/* One launch: a single VM for one node.  Strings borrowed for the call
 * (a provider copies what it keeps). */
struct cloud_launch {
  int64_t node_id;
  const char *name;       /* the VM's name where the cloud wants one */
  const char *token;      /* idempotency token: the same node and attempt
                             give the same token, so a resend after a
                             crash finds the first VM */
  const struct cloud_shape *shape;
  const char *zone;
  int spot;
  const char *script;     /* the startup script (plain text) */
  const char *instance;   /* CLOUD_TAG_INSTANCE's value */
  const char *node;       /* CLOUD_TAG_NODE's value */
};

/* vm is the launched VM (its id at least) when r->rc is 0. */
typedef void (*cloud_launch_cb)(void *arg, const struct cloud_result *r,
                                const struct cloud_vm *vm);
/* Every VM tagged with the instance, n of them, when r->rc is 0. */
typedef void (*cloud_list_cb)(void *arg, const struct cloud_result *r,
                              const struct cloud_vm *vms, size_t n);
typedef void (*cloud_done_cb)(void *arg, const struct cloud_result *r);

/* A shape's prices from the provider's price source, per node-hour:
 * -1 where the source gives none (AWS's on-demand price is in an offer
 * file too large to fetch; it stays the config's). */
struct cloud_price {
  size_t shape;                  /* index in cloud_env's shapes */
  int64_t on_demand_micro;
  int64_t spot_micro;
};

/* The shapes' prices, n of them, when r->rc is 0 (a shape the source
 * does not price is left out). */
typedef void (*cloud_prices_cb)(void *arg, const struct cloud_result *r,
                                const struct cloud_price *p, size_t n);

/* What a provider gets at open. */
struct cloud_env {
  uv_loop_t *loop;
  const char *site_name;
  const struct cloud_shape *shapes;
  size_t nshapes;
  /* Open to list VMs that others launch (the cluster of an elastic
   * Slurm site, slurm_cloud.c): only the connection's fields are read
   * (region or project, endpoint, credentials, ca_file); no image,
   * network, shape or zone is needed, and no launch is ever asked. */
  int list_only;
  /* The tag (label on GCP) whose value listings report in
   * cloud_vm.name, or NULL for none. */
  const char *name_tag;
};

/*
 * A provider.  Every call answers through its callback exactly once,
 * from the loop, never from inside the call; after close() has begun,
 * callbacks still due run with rc ERR_UNAVAILABLE before close's cb.
 */
struct cloud_provider {
  const char *kind;                   /* "aws", "gcp", "azure" */
  /* The config fields this provider reads (besides the pool's), for the
   * site's one check of unknown fields; NULL name ends it. */
  const struct jsonx_field *fields;
  /* Read the provider's part of the site config (credentials, region,
   * endpoint, image, network) and the shapes' provider fields; *pctx is
   * new.  Errors are ERR_CONFIG naming the field. */
  int (*open)(const struct cloud_env *env, const json_t *config,
              void **pctx, struct err *e);
  void (*launch)(void *pctx, const struct cloud_launch *l,
                 cloud_launch_cb cb, void *arg);
  void (*list)(void *pctx, const char *instance, cloud_list_cb cb,
               void *arg);
  /* Every VM tagged key = value: what list does for the pool's own tag
   * (CLOUD_TAG_INSTANCE = instance), for a tag of anyone's.  NULL in a
   * provider that cannot (the tests' fakes of the pool). */
  void (*list_tagged)(void *pctx, const char *key, const char *value,
                      cloud_list_cb cb, void *arg);
  /* Terminate vm (its id and zone); a VM already gone is success. */
  void (*terminate)(void *pctx, const struct cloud_vm *vm,
                    cloud_done_cb cb, void *arg);
  void (*close)(void *pctx, void (*cb)(void *arg), void *arg);
  /* The shapes' prices from the cloud's price source (price_feed.h);
   * NULL when it has none. */
  void (*prices)(void *pctx, cloud_prices_cb cb, void *arg);
};

/* Each provider file is one site kind: its provider and its adapter, as
 * adapter_find() lists them. */
extern const struct cloud_provider cloud_aws_provider;   /* cloud_aws.c */
extern const struct adapter_ops adapter_aws_ops;
extern const struct cloud_provider cloud_gcp_provider;   /* cloud_gcp.c */
extern const struct adapter_ops adapter_gcp_ops;
extern const struct cloud_provider cloud_azure_provider; /* cloud_azure.c */
extern const struct adapter_ops adapter_azure_ops;

/* Open a VM-pool site over prov: what each kind's open() does (tests
 * open a pool over a fake provider this way).  The other ops are the
 * pool's, the same for every kind: CLOUD_OPS puts them together. */
int cloud_open(const struct cloud_provider *prov,
               const struct adapter_env *env, const json_t *config,
               void **ctx, struct err *e);
int cloud_submit(void *ctx, const struct adapter_job *job, struct err *e);
int cloud_cancel(void *ctx, const struct adapter_job *job, struct err *e);
int cloud_adopt(void *ctx, const struct adapter_job *job, struct err *e);
void cloud_capacity(void *ctx, struct adapter_capacity *out);
void cloud_close(void *ctx, void (*cb)(void *arg), void *arg);
char *cloud_log_dir(void *ctx, int64_t job_id);
void cloud_fleet(void *ctx, struct adapter_fleet *out);
int cloud_scale(void *ctx, const int64_t *launch, size_t nshapes,
                const int64_t *release, size_t nrelease, const char *why,
                struct err *e);
int cloud_node_heartbeat(void *ctx, int64_t node_id, const json_t *req,
                         json_t **answer, struct err *e);
int cloud_node_log(void *ctx, int64_t node_id, int64_t job_id,
                   int64_t offset, const char *data, size_t len,
                   int64_t *size, struct err *e);

/* The adapter's prices() of a pool (cloud.c): cloud_prices_ask with the
 * pool's own loop, provider and shapes. */
void cloud_prices(void *ctx, adapter_prices_cb cb, void *arg);
/*
 * Ask prov for its shapes' prices and answer cb per GPU type
 * (cloud_prices.c): a node's price over its GPUs, of the first shape of
 * the type in config order that has one, since the pool launches shapes
 * in that order.  shapes are borrowed until cb has run; cb runs once,
 * from the loop.
 */
void cloud_prices_ask(uv_loop_t *loop, const struct cloud_provider *prov,
                      void *pctx, const struct cloud_shape *shapes,
                      size_t nshapes, adapter_prices_cb cb, void *arg);

/* A kind's adapter_ops: the pool's ops with the kind's open(). */
#define CLOUD_OPS(name, open_fn)                                           \
  {                                                                        \
    .kind = name, .api_version = ADAPTER_API_VERSION, .open = open_fn,    \
    .submit = cloud_submit, .cancel = cloud_cancel, .adopt = cloud_adopt, \
    .capacity = cloud_capacity, .close = cloud_close,                     \
    .log_dir = cloud_log_dir, .node_heartbeat = cloud_node_heartbeat,     \
    .node_log = cloud_node_log, .prices = cloud_prices,                   \
    .fleet = cloud_fleet, .scale = cloud_scale,                           \
  }

/* Set r to a refusal of class why, with a message. */
void cloud_refuse(struct cloud_result *r, enum cloud_refusal why,
                  int64_t retry_after_ms, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
