/*
 * Job state names, one table indexed by the enum.
 */
#include "job_state.h"

#include <string.h>

static const char *const state_names[JOB_STATE_COUNT] = {
  "queued",    "placed", "submitted", "running",
  "succeeded", "failed", "cancelled", "lost",
  "staging",
};

const char *
job_state_name(enum job_state s)
{
  if ((unsigned)s >= JOB_STATE_COUNT)
    return "unknown";
  return state_names[s];
}

int
job_state_parse(const char *name, enum job_state *out)
{
  int i;

  for (i = 0; i < JOB_STATE_COUNT; i++) {
    if (strcmp(state_names[i], name) == 0) {
      *out = (enum job_state)i;
      return 0;
    }
  }
  return ERR_INVALID;
}

int
job_state_is_final(enum job_state s)
{
  return s == JOB_SUCCEEDED || s == JOB_FAILED || s == JOB_CANCELLED ||
         s == JOB_LOST;
}
