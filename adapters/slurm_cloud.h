/*
 * The "cloud" block of a slurm site (README "Elastic Slurm sites"): the
 * VMs of a cloud Slurm cluster (ParallelCluster, CycleCloud, Cluster
 * Toolkit), read from its provider every reconcile_s, kept as nodes in
 * the broker's node store and billed whole, as the VM-pool sites bill
 * theirs (cloud.c): tenbin's jobs by their holds, the GPUs no Slurm job
 * holds by idle pieces (store->bill_idle), from the VM's launch to its
 * end.  GPUs that jobs of other Slurm users hold are not tenbin's to
 * bill: they are in neither.
 *
 * The slurm adapter (slurm.c) owns one when the site has the block, and
 * feeds it every nodes answer (which Slurm node a VM is, and its GPUs)
 * and every jobs listing (which GPUs of a node Slurm's jobs held, and
 * from when to when, in Slurm's own times, so that the idle pieces meet
 * the jobs' holds exactly).  Everything runs on the broker's loop.
 */
#ifndef TENBIN_ADAPTERS_SLURM_CLOUD_H
#define TENBIN_ADAPTERS_SLURM_CLOUD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "adapters/adapter.h"
#include "adapters/slurm_schema.h"
#include "util/err.h"

struct slurm_cloud;
struct cloud_provider;

/* What the block needs of its site; borrowed while it is open. */
struct slurm_cloud_env {
  uv_loop_t *loop;
  const char *site_name;
  const struct adapter_node_store *store; /* the broker's */
  void *store_arg;
  int64_t (*now_ms)(void); /* NULL: time_now_ms (tests set a clock) */
};

/*
 * Validate block (ERR_CONFIG naming the field, "cloud.tag.key"), open
 * the provider of its kind, take up the site's live nodes from the
 * store and start listing.  *out is new: slurm_cloud_close().
 */
int slurm_cloud_open(const struct slurm_cloud_env *env, const json_t *block,
                     struct slurm_cloud **out, struct err *e);
/* The same over prov, whatever the block's kind (tests' fakes). */
int slurm_cloud_open_with(const struct cloud_provider *prov,
                          const struct slurm_cloud_env *env,
                          const json_t *block, struct slurm_cloud **out,
                          struct err *e);

/* The site's nodes from its newest nodes answer; borrowed for the call. */
void slurm_cloud_nodes(struct slurm_cloud *c, const struct slurm_node *nodes,
                       size_t n);
/* Every job of a jobs listing whose request left at sent_ms; borrowed for
 * the call.  Bills the idle pieces that the listing settles. */
void slurm_cloud_jobs(struct slurm_cloud *c, const struct slurm_job *jobs,
                      size_t n, int64_t sent_ms);
/* Why the provider could not be read, or "" (borrowed). */
const char *slurm_cloud_detail(const struct slurm_cloud *c);

/* Stop listing, close the provider, free c, then cb(arg) from the loop. */
void slurm_cloud_close(struct slurm_cloud *c, void (*cb)(void *arg),
                       void *arg);

#endif
