/*
 * Baseline policy: has a site drifted from the reference site's NCCL
 * baseline?  Pure: no I/O, no allocation, no clock (DESIGN.md
 * "policies/", "NCCL baseline").  tenbind (broker/baseline.c) feeds it
 * the probe results it stored; `tenbin baseline diff` shows its rows.
 *
 * A probe result is seen here flattened: the fingerprint as key/value
 * strings sorted by key ("nccl.version" -> "2.21.5", docs/BASELINE.md
 * lists the keys), and the all-reduce bus bandwidth by message size.
 * Everything is borrowed for the length of one call.
 *
 * The rules (each one can be switched off; names as in metrics):
 *   probed        the site has a probe result, and so does the reference;
 *                 a result older than max_age_ms is stale.
 *   gpu_model     gpu.model equal to the reference's.
 *   nccl_version  nccl.version equal to the reference's at match level
 *                 (default major.minor).
 *   cuda_runtime  cuda.runtime equal at match level (default major).
 *   driver        gpu.driver within [driver_min, driver_max] when either
 *                 is set; else its major at least the reference's (a
 *                 newer driver runs an older CUDA, not the reverse).
 *   nccl_env      every env.NCCL_* key equal, both ways (a variable set
 *                 on one side only differs), except those in env_ignore.
 *   bundle        bundle.version equal to the reference's, when the
 *                 reference has one.
 *   interconnect  the site's class (topology.class for a one-node probe,
 *                 interconnect for more) is the reference's, or both
 *                 have a class_scale entry; with the reference's class,
 *                 at least as many active devices of that kind as the
 *                 reference's (net.* entries).
 *   busbw         for every all-reduce size >= busbw_min_bytes that both
 *                 measured: site >= reference x scale x (1 - tolerance),
 *                 scale = class_scale[site class] / class_scale[ref
 *                 class] (1 when the classes are equal).  A site that
 *                 did not measure, where the reference did, fails it.
 *   correct       every measured result's check passed.
 *   uniform       every node of a multi-node probe had node 0's
 *                 fingerprint (the caller counts those that differ).
 * The reference site compared with itself passes every rule.
 */
#ifndef TENBIN_POLICIES_BASELINE_H
#define TENBIN_POLICIES_BASELINE_H

#include <stddef.h>
#include <stdint.h>

#define BASELINE_MAX_FINDINGS 32
#define BASELINE_MESSAGE_LEN 200
#define BASELINE_MAX_CLASSES 8
#define BASELINE_MAX_IGNORE 16

enum baseline_rule {
  BASELINE_PROBED = 0,
  BASELINE_GPU_MODEL,
  BASELINE_NCCL_VERSION,
  BASELINE_CUDA_RUNTIME,
  BASELINE_DRIVER,
  BASELINE_NCCL_ENV,
  BASELINE_BUNDLE,
  BASELINE_INTERCONNECT,
  BASELINE_BUSBW,
  BASELINE_CORRECT,
  BASELINE_UNIFORM,
  BASELINE_NRULES
};

/* How much of a dotted version must be equal. */
enum baseline_match {
  BASELINE_MATCH_ANY = 0, /* the rule is off */
  BASELINE_MATCH_MAJOR,
  BASELINE_MATCH_MINOR,   /* major.minor */
  BASELINE_MATCH_EXACT,
};

struct baseline_kv {
  const char *key;   /* borrowed */
  const char *value; /* borrowed */
};

/* One all-reduce size as measured. */
struct baseline_point {
  int64_t bytes;
  double busbw_gbps; /* GB/s, 10^9 bytes/s */
};

struct baseline_probe {
  const struct baseline_kv *kv; /* sorted by key (strcmp), unique keys */
  size_t nkv;
  int measured;                 /* the measurement ran ("done") */
  const char *skipped;          /* why it did not, or NULL; borrowed */
  const struct baseline_point *allreduce; /* sorted by bytes */
  size_t npoints;
  int all_correct;              /* every result's check passed */
  int nodes;                    /* nodes the probe ran on */
  int nodes_differing;          /* nodes whose fingerprint is not node 0's */
  const char *differing_key;    /* a key that differs on one, or NULL */
  int64_t time_ms;              /* when it ran (wall clock) */
};

struct baseline_class_scale {
  const char *name; /* "nvlink", "pcie", "ib", "efa", "roce", "tcp" */
  double scale;     /* expected bandwidth relative to 1.0 */
};

struct baseline_rules {
  unsigned enabled;              /* bit (1u << rule) per enabled rule */
  enum baseline_match nccl;      /* default BASELINE_MATCH_MINOR */
  enum baseline_match cuda;      /* default BASELINE_MATCH_MAJOR */
  const char *driver_min;        /* "535.104", or NULL */
  const char *driver_max;        /* or NULL */
  const char *env_ignore[BASELINE_MAX_IGNORE]; /* names, NULL-ended */
  double busbw_tolerance;        /* 0.2 = 20 % below is drift */
  int64_t busbw_min_bytes;       /* default 1 MiB */
  int64_t max_age_ms;            /* 0 = results never go stale */
  size_t nclasses;
  struct baseline_class_scale classes[BASELINE_MAX_CLASSES];
};

struct baseline_finding {
  enum baseline_rule rule;
  char message[BASELINE_MESSAGE_LEN]; /* "nccl.version 2.18.3, reference
                                         2.21.5 (major.minor must match)" */
};

struct baseline_verdict {
  int drifted;   /* any finding */
  size_t nfindings; /* at most BASELINE_MAX_FINDINGS; more are counted
                       in nmore */
  size_t nmore;
  struct baseline_finding findings[BASELINE_MAX_FINDINGS];
};

/* Every rule on, the defaults above; env_ignore holds NCCL_DEBUG,
 * NCCL_DEBUG_FILE and NCCL_DEBUG_SUBSYS (logging, not behaviour). */
void baseline_rules_default(struct baseline_rules *r);
/* "nccl_version" for BASELINE_NCCL_VERSION; NULL out of range. */
const char *baseline_rule_name(enum baseline_rule rule);
/* The rule named name, or -1. */
int baseline_rule_from_name(const char *name);
/* "major", "major.minor", "exact", "any" to a level; -1 when unknown. */
int baseline_match_from_name(const char *name);

/*
 * Judge site against ref at now_ms.  ref or site NULL: never probed
 * (rule probed, and nothing else judged).  out is filled completely.
 */
void baseline_check(const struct baseline_rules *r,
                    const struct baseline_probe *ref,
                    const struct baseline_probe *site, int64_t now_ms,
                    struct baseline_verdict *out);

/* One line of the side-by-side fingerprint. */
struct baseline_row {
  const char *key;  /* borrowed from ref or site */
  const char *ref;  /* NULL: absent at the reference */
  const char *site; /* NULL: absent at the site */
  int differs;      /* values differ (absent on one side included) */
  int rule;         /* the baseline_rule that judges this key, or -1
                       when none does (shown, not gated) */
};

/*
 * Merge the two sorted fingerprints into rows (sorted by key), each
 * with the rule of r (NULL: the defaults) that judges it: none for a
 * rule switched off or an ignored variable.  Writes at most cap rows;
 * returns the number there are (a larger return than cap means rows
 * were cut).
 */
size_t baseline_diff(const struct baseline_rules *r,
                     const struct baseline_probe *ref,
                     const struct baseline_probe *site,
                     struct baseline_row *rows, size_t cap);

/* One message size of the bandwidth comparison. */
struct baseline_bw_row {
  int64_t bytes;
  double ref_gbps;  /* < 0: not measured at the reference */
  double site_gbps; /* < 0: not measured at the site */
  double pct;       /* site / ref x 100, or -1 when either is missing */
  int judged;       /* bytes >= busbw_min_bytes: the busbw rule looks */
};

/* The all-reduce sizes of either side, merged by bytes; as
 * baseline_diff for cap and the return. */
size_t baseline_bw_diff(const struct baseline_rules *r,
                        const struct baseline_probe *ref,
                        const struct baseline_probe *site,
                        struct baseline_bw_row *rows, size_t cap);

#endif
