/*
 * Placement policies: given one job's request and a snapshot of every
 * site, decide where it runs now, or whether it waits or can never run,
 * with a human reason for every site considered.  Pure libc: no I/O, no
 * allocation, no clock, so every decision is a unit test.
 *
 * "first-fit" walks the sites in the order given (the configuration's
 * order, on-prem first) and takes the first that fits right now.
 *
 * Per site, the verdict is
 *   NEVER  the request cannot fit even on an idle site: more nodes than
 *          the site has, no GPUs of the requested type, more GPUs of one
 *          type than the site has in total (a job takes GPUs of a single
 *          type), or more per node than a node holds;
 *   WAIT   it fits in principle but not now: the site is unreachable, at
 *          its job cap, or has too few GPUs free;
 *   NOW    otherwise.
 * NEVER is decided from the snapshot's totals before reachability, so an
 * unreachable site keeps the capacity the snapshot last knew for it.
 */
#include "placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* GPUs of one type summed over the pools of a site that carry it. */
struct type_total {
  const char *type;
  int64_t total;
  int64_t free;
  int64_t per_node; /* the largest per-node count among those pools */
};

static void
reason_set(char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
reason_set(char *out, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(out, PLACEMENT_REASON_LEN, fmt, ap);
  va_end(ap);
}

/* Append to a decision's reason; what does not fit is cut. */
static void
summary_add(char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
summary_add(char *out, const char *fmt, ...)
{
  size_t used = strlen(out);
  va_list ap;

  if (used + 1 >= PLACEMENT_SUMMARY_LEN)
    return;
  va_start(ap, fmt);
  vsnprintf(out + used, PLACEMENT_SUMMARY_LEN - used, fmt, ap);
  va_end(ap);
}

/* Site names come from configuration; never print a NULL one. */
static const char *
site_name(const struct placement_site *site)
{
  return site->name != NULL ? site->name : "?";
}

static int
same_type(const char *a, const char *b)
{
  return a != NULL && b != NULL && strcasecmp(a, b) == 0;
}

/* Sum the pools of site that carry type (0 totals when none does). */
static void
type_sum(const struct placement_site *site, const char *type,
         struct type_total *t)
{
  int i;

  t->type = type;
  t->total = 0;
  t->free = 0;
  t->per_node = 0;
  for (i = 0; i < site->npools && i < PLACEMENT_MAX_POOLS; i++) {
    const struct placement_pool *p = &site->pools[i];

    if (!same_type(p->type, type))
      continue;
    t->total += p->total;
    t->free += p->free;
    if (p->per_node > t->per_node)
      t->per_node = p->per_node;
  }
}

/* GPUs the job needs on its busiest node (the per-node request, or the
 * total spread over its nodes, rounded up). */
static int64_t
needed_per_node(const struct placement_request *req, int64_t gpus,
                int64_t nodes)
{
  if (req->gpus_per_node > 0)
    return req->gpus_per_node;
  return (gpus + nodes - 1) / nodes;
}

/*
 * Can GPUs of type t ever hold the job?  0 and a reason when not.  A
 * per_node of 0 means the snapshot does not know, and is not checked.
 */
static int
type_can_fit(const struct placement_request *req, int64_t gpus,
             int64_t nodes, const struct type_total *t, char *why)
{
  int64_t per_node = needed_per_node(req, gpus, nodes);

  if (t->total == 0) {
    reason_set(why, "needs %lld x %s GPUs, site has 0 %s", (long long)gpus,
               t->type, t->type);
    return 0;
  }
  if (gpus > t->total) {
    reason_set(why, "needs %lld x %s GPUs, site has %lld %s in total",
               (long long)gpus, t->type, (long long)t->total, t->type);
    return 0;
  }
  if (t->per_node > 0 && per_node > t->per_node) {
    reason_set(why,
               "needs %lld %s GPUs per node, site has at most %lld per node",
               (long long)per_node, t->type, (long long)t->per_node);
    return 0;
  }
  return 1;
}

/* The verdict for one site, with its reason in c->reason. */
static enum placement_verdict
judge_site(const struct placement_request *req,
           const struct placement_site *site, struct placement_candidate *c)
{
  int64_t nodes = req->nodes > 0 ? req->nodes : 1;
  int64_t gpus = req->gpus;
  struct type_total best;
  int have_best = 0;

  if (gpus <= 0 && req->gpus_per_node > 0)
    gpus = req->gpus_per_node * nodes;
  if (site->unknown) {
    /* Not "never": what the site has is not known until it answers. */
    reason_set(c->reason, "site not reached yet, its capacity is unknown");
    return PLACEMENT_WAIT;
  }
  if (nodes > site->nodes) {
    reason_set(c->reason, "needs %lld nodes, site has %lld", (long long)nodes,
               (long long)site->nodes);
    return PLACEMENT_NEVER;
  }

  if (gpus > 0 && req->gpu_type != NULL) {
    type_sum(site, req->gpu_type, &best);
    if (!type_can_fit(req, gpus, nodes, &best, c->reason))
      return PLACEMENT_NEVER;
    have_best = 1;
  } else if (gpus > 0) {
    /*
     * Any type will do, but all of one type: among the types that could
     * ever hold the job, prefer the one with the most GPUs free now.
     */
    char why[PLACEMENT_REASON_LEN] = "";
    int64_t largest = 0;
    int i;

    for (i = 0; i < site->npools && i < PLACEMENT_MAX_POOLS; i++) {
      struct type_total t;
      char tmp[PLACEMENT_REASON_LEN];

      if (site->pools[i].type == NULL)
        continue;
      type_sum(site, site->pools[i].type, &t);
      if (t.total > largest)
        largest = t.total;
      if (!type_can_fit(req, gpus, nodes, &t, tmp)) {
        if (why[0] == '\0' || t.total >= gpus)
          memcpy(why, tmp, sizeof(why));
        continue;
      }
      if (!have_best || t.free > best.free)
        best = t;
      have_best = 1;
    }
    if (!have_best) {
      if (largest == 0 && site->detail != NULL && site->detail[0] != '\0')
        reason_set(c->reason, "needs %lld GPUs, site has none (%s)",
                   (long long)gpus, site->detail);
      else if (largest == 0)
        reason_set(c->reason, "needs %lld GPUs, site has none",
                   (long long)gpus);
      else if (largest < gpus)
        reason_set(c->reason,
                   "needs %lld GPUs of one type, site has at most %lld of "
                   "one type",
                   (long long)gpus, (long long)largest);
      else
        memcpy(c->reason, why, sizeof(c->reason));
      return PLACEMENT_NEVER;
    }
  }

  if (!site->reachable) {
    reason_set(c->reason, "site unreachable");
    return PLACEMENT_WAIT;
  }
  if (site->max_jobs > 0 && site->jobs_active >= site->max_jobs) {
    reason_set(c->reason, "site runs %lld jobs, its limit is %lld",
               (long long)site->jobs_active, (long long)site->max_jobs);
    return PLACEMENT_WAIT;
  }
  if (have_best && best.free < gpus) {
    reason_set(c->reason, "%lld of %lld %s free, needs %lld",
               (long long)(best.free > 0 ? best.free : 0),
               (long long)best.total, best.type, (long long)gpus);
    return PLACEMENT_WAIT;
  }
  if (have_best)
    reason_set(c->reason, "fits: %lld of %lld %s free, needs %lld",
               (long long)best.free, (long long)best.total, best.type,
               (long long)gpus);
  else
    reason_set(c->reason, "fits: needs no GPUs");
  return PLACEMENT_NOW;
}

/* "2 x a10g GPUs", "16 GPUs on 2 nodes", "4 nodes without GPUs". */
static void
describe_request(const struct placement_request *req, char *out, size_t len)
{
  int64_t nodes = req->nodes > 0 ? req->nodes : 1;
  int64_t gpus = req->gpus;
  int n;

  if (gpus <= 0 && req->gpus_per_node > 0)
    gpus = req->gpus_per_node * nodes;
  if (gpus <= 0) {
    snprintf(out, len, "%lld node%s without GPUs", (long long)nodes,
             nodes == 1 ? "" : "s");
    return;
  }
  if (req->gpu_type != NULL)
    n = snprintf(out, len, "%lld x %s GPUs", (long long)gpus, req->gpu_type);
  else
    n = snprintf(out, len, "%lld GPUs", (long long)gpus);
  if (n > 0 && (size_t)n < len && nodes > 1)
    snprintf(out + n, len - (size_t)n, " on %lld nodes", (long long)nodes);
}

/*
 * Append ": 'a': why; 'b', 'c': why" to out->reason: every candidate
 * with its reason, in order, sites that say the same thing together, so
 * that a job nobody runs says why of each site and not of the first.
 */
static void
add_site_reasons(struct placement_decision *out)
{
  const char *sep = ": ";

  for (size_t i = 0; i < out->ncandidates; i++) {
    const struct placement_candidate *c = &out->candidates[i];
    size_t k;

    for (k = 0; k < i; k++) {
      if (strcmp(out->candidates[k].reason, c->reason) == 0)
        break;
    }
    if (k < i)
      continue; /* named with the first site that said it */
    summary_add(out->reason, "%s'%s'", sep, c->site != NULL ? c->site : "?");
    for (k = i + 1; k < out->ncandidates; k++) {
      const struct placement_candidate *o = &out->candidates[k];

      if (strcmp(o->reason, c->reason) == 0)
        summary_add(out->reason, ", '%s'", o->site != NULL ? o->site : "?");
    }
    summary_add(out->reason, ": %s", c->reason);
    sep = "; ";
  }
}

static void
first_fit_decide(const struct placement_request *req,
                 const struct placement_site *sites, size_t nsites,
                 struct placement_decision *out)
{
  char what[PLACEMENT_REASON_LEN];
  size_t first_wait = (size_t)-1;
  size_t i;

  memset(out, 0, sizeof(*out));
  out->verdict = PLACEMENT_NEVER;
  out->site = -1;
  describe_request(req, what, sizeof(what));
  /* A snapshot is bounded by the candidates array; the rest is unseen. */
  if (nsites > PLACEMENT_MAX_SITES)
    nsites = PLACEMENT_MAX_SITES;

  for (i = 0; i < nsites; i++) {
    struct placement_candidate *c;

    if (req->site != NULL &&
        (sites[i].name == NULL || strcmp(sites[i].name, req->site) != 0))
      continue;
    c = &out->candidates[out->ncandidates++];
    c->site = sites[i].name;
    c->score = -(double)i;
    c->verdict = judge_site(req, &sites[i], c);
    if (c->verdict == PLACEMENT_NOW && out->verdict != PLACEMENT_NOW) {
      out->verdict = PLACEMENT_NOW;
      out->site = (int)i;
      reason_set(out->reason, "first site that fits is '%s': %s",
                 site_name(&sites[i]), c->reason);
    } else if (c->verdict == PLACEMENT_WAIT && first_wait == (size_t)-1) {
      first_wait = out->ncandidates - 1;
    }
  }

  if (out->verdict == PLACEMENT_NOW)
    return;
  if (req->site != NULL && out->ncandidates == 0) {
    reason_set(out->reason, "no site named '%s'", req->site);
    return;
  }
  if (first_wait != (size_t)-1) {
    out->verdict = PLACEMENT_WAIT;
    reason_set(out->reason, "no site can run %s now", what);
    add_site_reasons(out);
    return;
  }
  if (out->ncandidates == 0) {
    reason_set(out->reason, "no sites to place %s on", what);
  } else if (req->site != NULL) {
    reason_set(out->reason, "site '%s' can never run %s: %s", req->site,
               what, out->candidates[0].reason);
  } else {
    reason_set(out->reason, "no site can run %s", what);
    add_site_reasons(out);
  }
}

static const struct placement_policy policies[] = {
  {"first-fit", first_fit_decide},
};

const struct placement_policy *
placement_policy_find(const char *name)
{
  size_t i;

  if (name == NULL)
    return NULL;
  for (i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
    if (strcmp(policies[i].name, name) == 0)
      return &policies[i];
  }
  return NULL;
}
