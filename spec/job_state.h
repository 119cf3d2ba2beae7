/*
 * The job states and their names: the vocabulary the broker's state
 * machine (broker/jobs.c), the database and the adapters share.  The
 * transitions themselves live in broker/; this is only the words.
 */
#ifndef TENBIN_SPEC_JOB_STATE_H
#define TENBIN_SPEC_JOB_STATE_H

#include "util/err.h"

enum job_state {
  JOB_QUEUED = 0,
  JOB_PLACED,
  JOB_SUBMITTED,
  JOB_RUNNING,
  JOB_SUCCEEDED,
  JOB_FAILED,
  JOB_CANCELLED,
  JOB_LOST,
  /* Placed at a site that lacks the job's dataset: waits, holding no
   * GPUs, while the site's agent pulls it.  Last so that the values
   * above keep their order (the state machine compares them). */
  JOB_STAGING,
  JOB_STATE_COUNT
};

/* "queued", "placed", ... */
const char *job_state_name(enum job_state s);
/* Inverse of job_state_name; ERR_INVALID for an unknown name. */
int job_state_parse(const char *name, enum job_state *out) WARN_UNUSED;
/* True for succeeded, failed, cancelled and lost. */
int job_state_is_final(enum job_state s);

#endif
