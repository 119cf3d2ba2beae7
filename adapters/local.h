/*
 * The local site: jobs run as processes on this host.
 *
 * Each job runs under a shim (tenbind's own executable started as
 * "tenbind --shim JOBDIR"): the shim is the parent of the job, keeps a
 * lock on the job directory for its whole life, enforces the time limit
 * and the cancel grace period, and writes the exit status to a file.  So
 * jobs outlive a tenbind restart, and a restarted tenbind learns their
 * fate from the lock and the status file.
 */
#ifndef TENBIN_ADAPTERS_LOCAL_H
#define TENBIN_ADAPTERS_LOCAL_H

#include "adapters/adapter.h"

extern const struct adapter_ops adapter_local_ops;

/* Entry point of the shim mode: argv after "--shim".  Returns the
 * process exit status. */
int adapter_local_shim_main(int argc, char **argv);

#endif
