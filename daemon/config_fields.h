/*
 * Every block of tenbind's configuration, with the field table its
 * parser checks it with: the registry docs/CONFIG.md is tested against
 * (tests/unit/test_config_doc.c), so the reference cannot drift from
 * what the parsers take.
 *
 * The tables stay with their parsers (daemon/config.h,
 * broker/config_fields.h, adapters/config_fields.h); this only lists
 * them.  All of it is static data: nothing to free.
 */
#ifndef TENBIN_DAEMON_CONFIG_FIELDS_H
#define TENBIN_DAEMON_CONFIG_FIELDS_H

#include <stddef.h>

#include "util/jsonx.h"

struct config_block {
  /* Where the block is: "(top level)" is the file itself, "sites[]"
   * each site, "sites[kind=slurm].cloud[kind=aws]" a slurm site's cloud
   * block of kind aws, "workloads[].params.*" each parameter of a
   * workload. */
  const char *path;
  const struct jsonx_field *fields; /* the parser's own table */
  const char *about;                /* one line */
};

/* The blocks, *n of them, in the order docs/CONFIG.md gives them. */
const struct config_block *config_blocks(size_t *n);
/* The word docs/CONFIG.md uses for type t ("string", "integer", ...). */
const char *config_type_name(enum jsonx_type t);

#endif
