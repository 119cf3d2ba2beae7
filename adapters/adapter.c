/*
 * The registry of site adapters: the site config's "kind" names one of
 * them.  Later kinds (aws, ...) are added to the table.  Also what
 * every elastic adapter reads the same way: its "burst" block.
 */
#include "adapter.h"

#include <stdlib.h>
#include <string.h>

#include "adapters/config_fields.h"
#include "cloud_int.h"
#include "local.h"
#include "slurm.h"
#include "util/jsonx.h"

static const struct adapter_ops *const adapters[] = {
    &adapter_local_ops,
    &adapter_slurm_ops,
    &adapter_aws_ops,
    &adapter_gcp_ops,
    &adapter_azure_ops,
    NULL,
};

const struct adapter_ops *
adapter_find(const char *kind)
{
  if (kind == NULL)
    return NULL;
  for (size_t i = 0; adapters[i] != NULL; i++) {
    if (strcmp(adapters[i]->kind, kind) == 0)
      return adapters[i];
  }
  return NULL;
}

int
adapter_is_elastic(const struct adapter_ops *ops)
{
  /* Nodes that dial in are what makes a site elastic: one test, so the
   * two can never disagree. */
  return ops != NULL && ops->node_heartbeat != NULL;
}

void
adapter_fleet_release(struct adapter_fleet *f)
{
  if (f == NULL)
    return;
  free(f->nodes);
  f->nodes = NULL;
  f->nnodes = 0;
}

const struct jsonx_field adapter_burst_fields[] = {
    {"billing_s", JX_INT},          {"release_margin_s", JX_INT},
    {"cooldown_s", JX_INT},         {"boot_s", JX_INT},
    {"spend_cap_per_hour", JX_NUMBER}, {"forecast", JX_BOOL},
    {NULL, 0}};

/* The autoscaler's settings of an elastic site, read by every elastic
 * adapter with the rest of its config. */
int
adapter_burst_read(const json_t *b, struct adapter_burst *out, struct err *e)
{
  int64_t billing_s, margin_s, cooldown_s, boot_s;
  const json_t *cap;
  double dollars = 0;
  int rc;

  if (b != NULL && !json_is_null(b) && !json_is_object(b))
    return err_set(e, ERR_CONFIG, "field 'burst': must be an object");
  if (b == NULL || json_is_null(b))
    b = NULL;
  rc = b != NULL ? jsonx_check(b, adapter_burst_fields, "burst.", e) : 0;
  /* Per-second billing with a minute's minimum is the three clouds'
   * rule for these VMs (research/placement-burst.md). */
  if (rc == 0)
    rc = jsonx_int(b, "billing_s", 1, 86400, 60, &billing_s, "burst.", e);
  if (rc == 0)
    rc = jsonx_int(b, "release_margin_s", 0, 3600, 120, &margin_s, "burst.",
                   e);
  if (rc == 0)
    rc = jsonx_int(b, "cooldown_s", 0, 86400, 300, &cooldown_s, "burst.", e);
  if (rc == 0)
    rc = jsonx_int(b, "boot_s", 0, 86400, 300, &boot_s, "burst.", e);
  if (rc < 0)
    return err_recode(e, ERR_CONFIG);
  cap = b != NULL ? json_object_get(b, "spend_cap_per_hour") : NULL;
  if (cap != NULL && !json_is_null(cap)) {
    dollars = json_number_value(cap);
    if (!(dollars >= 0 && dollars <= 1e7))
      return err_set(e, ERR_CONFIG, "field 'burst.spend_cap_per_hour': "
                     "must be dollars per hour, 0 to 10,000,000");
  }
  out->billing_ms = billing_s * 1000;
  out->release_margin_ms = margin_s * 1000;
  out->cooldown_ms = cooldown_s * 1000;
  out->boot_ms = boot_s * 1000;
  out->spend_cap_micro = (int64_t)(dollars * 1e6 + 0.5);
  /* Off unless asked: on the simulated week, nodes launched ahead of
   * the usual demand cost more than the waits they saved
   * (bench/README.md, "Burst policy"). */
  out->forecast = b != NULL ? jsonx_bool(b, "forecast", 0) : 0;
  return 0;
}
