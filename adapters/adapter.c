/*
 * The registry of site adapters: the site config's "kind" names one of
 * them.  Later kinds (aws, ...) are added to the table.
 */
#include "adapter.h"

#include <stdlib.h>

#include <string.h>

#include "cloud_int.h"
#include "local.h"
#include "slurm.h"

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
