/*
 * The registry of configuration blocks (config_fields.h).  A block is
 * added here when a parser gets a new table; the reference's test fails
 * until docs/CONFIG.md documents it.
 */
#include "daemon/config_fields.h"

#include "adapters/config_fields.h"
#include "broker/config_fields.h"
#include "daemon/config.h"

static const struct config_block blocks[] = {
    {"(top level)", config_top_fields, "the top level of the file"},
    {"tls", config_tls_fields, "HTTPS for the API, and the CAs of agents"},
    {"http", config_http_fields, "the API server's connection limits"},
    {"auth", config_auth_fields, "bearer tokens for the API"},
    {"policy", config_policy_fields, "placement and waiting"},
    {"policy.burst", broker_policy_burst_fields,
     "the autoscaler of elastic sites"},
    {"baseline", broker_baseline_fields, "the NCCL baseline probes"},
    {"baseline.rules", broker_baseline_rules_fields,
     "what counts as drift from the reference site"},
    {"workloads[]", broker_workload_fields, "a job template"},
    {"workloads[].params.*", broker_workload_param_fields,
     "one parameter of a template"},
    {"sites[]", broker_site_fields,
     "what every site has besides its kind's fields"},
    {"sites[].agent", broker_agent_fields,
     "the site's tenbin-agent, for datasets"},
    {"sites[].cost", broker_cost_fields, "what the site's GPUs cost"},
    {"sites[].cost.owned", broker_cost_owned_fields,
     "hardware the site owns, amortised"},
    {"sites[].cost.rented", broker_cost_rented_fields,
     "capacity the site rents by the hour"},
    {"sites[kind=local]", adapter_local_fields,
     "jobs run as processes on tenbind's host"},
    {"sites[kind=slurm]", adapter_slurm_fields,
     "a Slurm cluster through slurmrestd"},
    {"sites[kind=slurm].elastic", adapter_slurm_elastic_fields,
     "nodes that Slurm's power saving starts"},
    {"sites[kind=slurm].cloud[kind=aws]", adapter_slurm_cloud_aws_fields,
     "the cluster's cloud nodes on AWS, watched for cost"},
    {"sites[kind=slurm].cloud[kind=gcp]", adapter_slurm_cloud_gcp_fields,
     "the cluster's cloud nodes on GCP, watched for cost"},
    {"sites[kind=slurm].cloud[kind=azure]", adapter_slurm_cloud_azure_fields,
     "the cluster's cloud nodes on Azure, watched for cost"},
    {"sites[kind=slurm].cloud.tag", adapter_slurm_cloud_tag_fields,
     "the tag that marks the cluster's VMs"},
    {"sites[kind=slurm].cloud[kind=aws].credentials",
     adapter_aws_credentials_fields, "AWS credentials of the cloud block"},
    {"sites[kind=slurm].cloud[kind=azure].credentials",
     adapter_azure_credentials_fields,
     "Azure credentials of the cloud block"},
    {"sites[kind=aws/gcp/azure]", adapter_cloud_pool_fields,
     "the node pool every cloud kind has"},
    {"sites[kind=aws/gcp/azure].shapes[]", adapter_cloud_shape_fields,
     "one kind of VM the pool launches"},
    {"sites[kind=aws/gcp/azure].node_agent", adapter_cloud_node_agent_fields,
     "the agent on the VMs"},
    {"sites[kind=aws/gcp/azure].burst", adapter_burst_fields,
     "how the autoscaler weighs this site"},
    {"sites[kind=aws]", adapter_aws_fields, "AWS EC2's own fields"},
    {"sites[kind=aws].credentials", adapter_aws_credentials_fields,
     "AWS credentials"},
    {"sites[kind=gcp]", adapter_gcp_fields,
     "Google Compute Engine's own fields"},
    {"sites[kind=gcp].shapes[].accelerator", adapter_gcp_accelerator_fields,
     "GPUs attached to a GCE machine type"},
    {"sites[kind=azure]", adapter_azure_fields, "Azure's own fields"},
    {"sites[kind=azure].credentials", adapter_azure_credentials_fields,
     "an Azure service principal"},
};

const struct config_block *
config_blocks(size_t *n)
{
  *n = sizeof(blocks) / sizeof(blocks[0]);
  return blocks;
}

const char *
config_type_name(enum jsonx_type t)
{
  switch (t) {
  case JX_ANY:
    return "any";
  case JX_STRING:
    return "string";
  case JX_INT:
    return "integer";
  case JX_NUMBER:
    return "number";
  case JX_BOOL:
    return "boolean";
  case JX_OBJECT:
    return "object";
  case JX_ARRAY:
    return "array";
  case JX_STRING_OR_INT:
    return "string or integer";
  case JX_STRING_OR_ARRAY:
    return "string or array";
  }
  return "?";
}
