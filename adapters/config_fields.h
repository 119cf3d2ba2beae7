/*
 * The adapters' config field tables: each is the table its site kind's
 * parser checks a block with, exported so that the configuration
 * reference (daemon/config_fields.c, docs/CONFIG.md) lists exactly what
 * the parser takes.  Static data; nothing to free.
 */
#ifndef TENBIN_ADAPTERS_CONFIG_FIELDS_H
#define TENBIN_ADAPTERS_CONFIG_FIELDS_H

#include "util/jsonx.h"

/* A local site (local.c). */
extern const struct jsonx_field adapter_local_fields[];
/* A slurm site, its "elastic" block, its "cloud" block by kind and the
 * cloud block's "tag" (slurm.c, slurm_cloud.c). */
extern const struct jsonx_field adapter_slurm_fields[];
extern const struct jsonx_field adapter_slurm_elastic_fields[];
extern const struct jsonx_field adapter_slurm_cloud_aws_fields[];
extern const struct jsonx_field adapter_slurm_cloud_gcp_fields[];
extern const struct jsonx_field adapter_slurm_cloud_azure_fields[];
extern const struct jsonx_field adapter_slurm_cloud_tag_fields[];
/* The autoscaler's "burst" block of an elastic site (adapter.c). */
extern const struct jsonx_field adapter_burst_fields[];
/* The node pool every cloud kind shares, its "shapes[]" and its
 * "node_agent" (cloud.c). */
extern const struct jsonx_field adapter_cloud_pool_fields[];
extern const struct jsonx_field adapter_cloud_shape_fields[];
extern const struct jsonx_field adapter_cloud_node_agent_fields[];
/* Each cloud kind's own fields and their sub-blocks (cloud_aws.c,
 * cloud_gcp.c, cloud_azure.c). */
extern const struct jsonx_field adapter_aws_fields[];
extern const struct jsonx_field adapter_aws_credentials_fields[];
extern const struct jsonx_field adapter_gcp_fields[];
extern const struct jsonx_field adapter_gcp_accelerator_fields[];
extern const struct jsonx_field adapter_azure_fields[];
extern const struct jsonx_field adapter_azure_credentials_fields[];

#endif
