/*
 * The broker's config field tables: each is the table its parser checks
 * a block with (jsonx_check), exported so that the configuration
 * reference (daemon/config_fields.c, docs/CONFIG.md) lists exactly what
 * the parser takes.  Static data; nothing to free.
 */
#ifndef TENBIN_BROKER_CONFIG_FIELDS_H
#define TENBIN_BROKER_CONFIG_FIELDS_H

#include "util/jsonx.h"

/* A site's fields the broker takes for itself before its adapter sees
 * the rest (broker.c). */
extern const struct jsonx_field broker_site_fields[];
/* "sites[].agent" (broker.c). */
extern const struct jsonx_field broker_agent_fields[];
/* "sites[].cost", its "owned" and its "rented" (prices.c). */
extern const struct jsonx_field broker_cost_fields[];
extern const struct jsonx_field broker_cost_owned_fields[];
extern const struct jsonx_field broker_cost_rented_fields[];
/* "policy.burst" (autoscaler.c). */
extern const struct jsonx_field broker_policy_burst_fields[];
/* "baseline" and "baseline.rules" (baseline.c). */
extern const struct jsonx_field broker_baseline_fields[];
extern const struct jsonx_field broker_baseline_rules_fields[];
/* "workloads[]" and each of its "params" (catalog.c). */
extern const struct jsonx_field broker_workload_fields[];
extern const struct jsonx_field broker_workload_param_fields[];

#endif
