/*
 * The slurm site adapter (slurm.c): jobs on a Slurm cluster through its
 * slurmrestd.  Site config: url, api_version ("v0.0.38"), user,
 * token_file or token_command, partitions {gpu type: partition},
 * default_partition, accounts {project: account}, default_account,
 * workdir, output, environment, slurmdbd, poll_ms, timeout_ms,
 * connections, max_jobs, elastic {boot_s}, cloud (the cluster's VMs,
 * slurm_cloud.h) (README "Slurm sites").
 */
#ifndef TENBIN_ADAPTERS_SLURM_H
#define TENBIN_ADAPTERS_SLURM_H

#include "adapters/adapter.h"

extern const struct adapter_ops adapter_slurm_ops;

#endif
