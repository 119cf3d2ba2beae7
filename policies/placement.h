/*
 * Placement policy: pure decisions, no I/O (DESIGN.md "policies/").
 *
 * Input: one job's resource request and a snapshot of every site.
 * Output: place now at a site, wait (fits somewhere, not right now), or
 * never (no site could ever run it: the REST layer answers 422), with a
 * verdict and a reason for every candidate site so that "why is my job
 * still queued" has an answer.
 *
 * Policies sit behind struct placement_policy: "first-fit" takes the
 * first site in order that fits now.  Everything here is borrowed from
 * the caller for the length of one call: no policy keeps a pointer,
 * allocates, or reads a clock.
 */
#ifndef TENBIN_POLICIES_PLACEMENT_H
#define TENBIN_POLICIES_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* 50 sites (a few regions of three clouds, and on-prem) must fit. */
#define PLACEMENT_MAX_SITES 64
#define PLACEMENT_MAX_POOLS 8
#define PLACEMENT_REASON_LEN 160
/* A decision's reason names every site with its own. */
#define PLACEMENT_SUMMARY_LEN 1024

struct placement_pool {
  const char *type;  /* borrowed */
  int64_t total;
  int64_t free;
  int64_t per_node;  /* most of this type on one node */
};

struct placement_site {
  const char *name;  /* borrowed */
  int reachable;
  int unknown;       /* never reached yet: nodes and pools say nothing */
  const char *detail; /* the site's own news ("no GPUs: nvidia-smi is not
                         on PATH"), or NULL; borrowed */
  int64_t nodes;
  int64_t max_jobs;      /* 0 = no cap */
  int64_t jobs_active;
  int npools;
  struct placement_pool pools[PLACEMENT_MAX_POOLS];
};

struct placement_request {
  int64_t gpus;          /* total */
  const char *gpu_type;  /* NULL = any */
  int64_t nodes;
  int64_t gpus_per_node; /* 0 = not given */
  const char *site;      /* pinned, or NULL */
};

enum placement_verdict { PLACEMENT_NOW = 0, PLACEMENT_WAIT, PLACEMENT_NEVER };

struct placement_candidate {
  const char *site;      /* borrowed from the snapshot */
  enum placement_verdict verdict;
  double score;          /* higher is better among NOW candidates */
  int index;             /* of the site in the snapshot */
  char reason[PLACEMENT_REASON_LEN];
};

struct placement_decision {
  enum placement_verdict verdict;
  int site;              /* index into the snapshot when NOW, else -1 */
  int pick;              /* index of the site it runs at or waits for,
                            -1 when none; first-fit: as site */
  char reason[PLACEMENT_SUMMARY_LEN];
  size_t ncandidates;
  struct placement_candidate candidates[PLACEMENT_MAX_SITES];
};

struct placement_policy {
  const char *name;
  void (*decide)(const struct placement_request *req,
                 const struct placement_site *sites, size_t nsites,
                 struct placement_decision *out);
};

/* The policy of that name, or NULL. */
const struct placement_policy *placement_policy_find(const char *name);

#endif
