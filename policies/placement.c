/*
 * Placement policies: given one job's request and a snapshot of every
 * site, decide where it runs now, or whether it waits or can never run,
 * with a human reason for every site considered.  Pure libc: no I/O, no
 * allocation, no clock, so every decision is a unit test.
 *
 * "first-fit" walks the sites in the order given (the configuration's
 * order, on-prem first) and takes the first that fits right now.  The
 * "cost" policy (cost.c) ranks the same sites by money; both ask
 * placement__judge, below, whether a site fits.
 *
 * Per site, the verdict is
 *   NEVER  the request cannot fit even on an idle site: more nodes than
 *          the site has, no GPUs of the requested type, more GPUs of one
 *          type than the site has in total (a job takes GPUs of a single
 *          type), or more per node than a node holds;
 *   WAIT   it fits in principle but not now: the site is closed to the
 *          job (site->closed), unreachable, at its job cap, or has too
 *          few GPUs free; an elastic site whose free plus grow GPUs
 *          hold the job "grows": it waits for nodes to be launched, or
 *          goes NOW where the site starts nodes itself on submit;
 *   NOW    otherwise.
 * NEVER is decided from the snapshot's totals before reachability, so an
 * unreachable site keeps the capacity the snapshot last knew for it.
 * The judgement is numbers (struct placement__fit); its words are
 * written only when asked for (placement__fit_reason).
 */
#include "placement_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void
placement__append(char *out, size_t cap, const char *fmt, ...)
{
  size_t used = strlen(out);
  va_list ap;

  if (used + 1 >= cap)
    return;
  va_start(ap, fmt);
  vsnprintf(out + used, cap - used, fmt, ap);
  va_end(ap);
}

/* Site names come from configuration; never print a NULL one. */
static const char *
site_name(const struct placement_site *site)
{
  return site->name != NULL ? site->name : "?";
}

/* Sum the pools of site that carry type into fit (0 when none does).
 * Inline: it runs for every job and site of a pass. */
static inline void
type_sum(const struct placement_site *site, const char *type,
         struct placement__fit *fit)
{
  /* Equal in any case means equal with bit 5 set: most pools differ in
   * their first letter, and are passed over on that alone. */
  unsigned char first = (unsigned char)(*type | 0x20);

  fit->type = type;
  fit->pool = -1;
  fit->total = 0;
  fit->free = 0;
  fit->grow = 0;
  fit->node_max = 0;
  for (int i = 0; i < site->npools && i < PLACEMENT_MAX_POOLS; i++) {
    const struct placement_pool *p = &site->pools[i];

    if (p->type == NULL || (unsigned char)(*p->type | 0x20) != first ||
        !placement__same_type(p->type, type))
      continue;
    if (fit->pool < 0)
      fit->pool = i;
    fit->total += p->total;
    fit->free += p->free;
    fit->grow += p->grow;
    if (p->per_node > fit->node_max)
      fit->node_max = p->per_node;
  }
}

/*
 * Can the type in fit ever hold the job?  FITS, or the reason it cannot.
 * A node_max of 0 means the snapshot does not know, and is not checked.
 */
static enum placement__why
type_can_fit(const struct placement__fit *fit)
{
  if (fit->total == 0)
    return PLACEMENT__TYPE_NONE;
  if (fit->gpus > fit->total)
    return PLACEMENT__TYPE_TOTAL;
  if (fit->node_max > 0 && fit->per_node > fit->node_max)
    return PLACEMENT__PER_NODE;
  return PLACEMENT__FITS;
}

static void
fit_set(struct placement__fit *fit, enum placement_verdict verdict,
        enum placement__why why)
{
  fit->verdict = verdict;
  fit->why = why;
}

/*
 * Any type will do, but all of one type: among the types that could ever
 * hold the job, the one with the most GPUs free now.  0 when none can,
 * with fit set to NEVER and its reason.
 */
static int
best_type(const struct placement_site *site, struct placement__fit *fit)
{
  struct placement__fit t = *fit, no = *fit;
  int have_best = 0, have_no = 0;

  fit->largest = 0;
  for (int i = 0; i < site->npools && i < PLACEMENT_MAX_POOLS; i++) {
    enum placement__why why;

    if (site->pools[i].type == NULL)
      continue;
    type_sum(site, site->pools[i].type, &t);
    if (t.total > fit->largest)
      fit->largest = t.total;
    why = type_can_fit(&t);
    if (why != PLACEMENT__FITS) {
      /* Of the types that say no, the last one large enough speaks. */
      if (!have_no || t.total >= t.gpus) {
        no = t;
        no.why = why;
      }
      have_no = 1;
      continue;
    }
    if (!have_best || t.free > fit->free) {
      fit->type = t.type;
      fit->pool = t.pool;
      fit->total = t.total;
      fit->free = t.free;
      fit->grow = t.grow;
      fit->node_max = t.node_max;
    }
    have_best = 1;
  }
  if (have_best)
    return 1;
  if (fit->largest == 0) {
    fit_set(fit, PLACEMENT_NEVER, PLACEMENT__NO_GPUS);
  } else if (fit->largest < fit->gpus) {
    fit_set(fit, PLACEMENT_NEVER, PLACEMENT__ONE_TYPE);
  } else {
    no.largest = fit->largest;
    *fit = no;
    fit->verdict = PLACEMENT_NEVER;
  }
  return 0;
}

void
placement__fit_init(const struct placement_request *req,
                    struct placement__fit *fit)
{
  fit->nodes = req->nodes > 0 ? req->nodes : 1;
  fit->gpus = req->gpus;
  if (fit->gpus <= 0 && req->gpus_per_node > 0)
    fit->gpus = req->gpus_per_node * fit->nodes;
  if (req->gpus_per_node > 0)
    fit->per_node = req->gpus_per_node;
  else
    fit->per_node = (fit->gpus + fit->nodes - 1) / fit->nodes;
  fit->verdict = PLACEMENT_NEVER;
  fit->why = PLACEMENT__NODES;
}

void
placement__judge(const struct placement_request *req,
                 const struct placement_site *site,
                 struct placement__fit *fit)
{
  fit->type = NULL;
  fit->pool = -1;
  fit->total = fit->free = fit->grow = fit->node_max = fit->largest = 0;

  if (site->unknown) {
    /* Not "never": what the site has is not known until it answers. */
    fit_set(fit, PLACEMENT_WAIT, PLACEMENT__UNKNOWN);
    return;
  }
  if (fit->nodes > site->nodes) {
    fit_set(fit, PLACEMENT_NEVER, PLACEMENT__NODES);
    return;
  }
  if (fit->gpus > 0 && req->gpu_type != NULL) {
    enum placement__why why;

    type_sum(site, req->gpu_type, fit);
    why = type_can_fit(fit);
    if (why != PLACEMENT__FITS) {
      fit_set(fit, PLACEMENT_NEVER, why);
      return;
    }
  } else if (fit->gpus > 0 && !best_type(site, fit)) {
    return;
  }

  if (site->closed != NULL)
    fit_set(fit, PLACEMENT_WAIT, PLACEMENT__CLOSED);
  else if (!site->reachable)
    fit_set(fit, PLACEMENT_WAIT, PLACEMENT__UNREACHABLE);
  else if (site->max_jobs > 0 && site->jobs_active >= site->max_jobs)
    fit_set(fit, PLACEMENT_WAIT, PLACEMENT__JOB_CAP);
  else if (fit->gpus > 0 && fit->free < fit->gpus &&
           fit->free + fit->grow >= fit->gpus)
    fit_set(fit, site->grows_on_submit ? PLACEMENT_NOW : PLACEMENT_WAIT,
            PLACEMENT__GROWS);
  else if (fit->gpus > 0 && fit->free < fit->gpus)
    fit_set(fit, PLACEMENT_WAIT, PLACEMENT__BUSY);
  else
    fit_set(fit, PLACEMENT_NOW, PLACEMENT__FITS);
}

void
placement__fit_reason(const struct placement_site *site,
                      const struct placement__fit *fit, char *out)
{
  long long gpus = (long long)fit->gpus;
  const char *type = fit->type != NULL ? fit->type : "?";

  switch (fit->why) {
  case PLACEMENT__UNKNOWN:
    reason_set(out, "site not reached yet, its capacity is unknown");
    break;
  case PLACEMENT__NODES:
    reason_set(out, "needs %lld nodes, site has %lld",
               (long long)fit->nodes, (long long)site->nodes);
    break;
  case PLACEMENT__TYPE_NONE:
    reason_set(out, "needs %lld x %s GPUs, site has 0 %s", gpus, type, type);
    break;
  case PLACEMENT__TYPE_TOTAL:
    reason_set(out, "needs %lld x %s GPUs, site has %lld %s in total", gpus,
               type, (long long)fit->total, type);
    break;
  case PLACEMENT__PER_NODE:
    reason_set(out,
               "needs %lld %s GPUs per node, site has at most %lld per node",
               (long long)fit->per_node, type, (long long)fit->node_max);
    break;
  case PLACEMENT__NO_GPUS:
    if (site->detail != NULL && site->detail[0] != '\0')
      reason_set(out, "needs %lld GPUs, site has none (%s)", gpus,
                 site->detail);
    else
      reason_set(out, "needs %lld GPUs, site has none", gpus);
    break;
  case PLACEMENT__ONE_TYPE:
    reason_set(out,
               "needs %lld GPUs of one type, site has at most %lld of one "
               "type",
               gpus, (long long)fit->largest);
    break;
  case PLACEMENT__CLOSED:
    reason_set(out, "%s", site->closed);
    break;
  case PLACEMENT__UNREACHABLE:
    reason_set(out, "site unreachable");
    break;
  case PLACEMENT__JOB_CAP:
    reason_set(out, "site runs %lld jobs, its limit is %lld",
               (long long)site->jobs_active, (long long)site->max_jobs);
    break;
  case PLACEMENT__BUSY:
    reason_set(out, "%lld of %lld %s free, needs %lld",
               (long long)(fit->free > 0 ? fit->free : 0),
               (long long)fit->total, type, gpus);
    break;
  case PLACEMENT__GROWS:
    reason_set(out, "%lld of %lld %s free, needs %lld: %s",
               (long long)(fit->free > 0 ? fit->free : 0),
               (long long)fit->total, type, gpus,
               site->grows_on_submit ? "the site starts nodes for it"
                                     : "waits for nodes to be launched");
    break;
  case PLACEMENT__FITS:
    if (fit->type != NULL)
      reason_set(out, "fits: %lld of %lld %s free, needs %lld",
                 (long long)fit->free, (long long)fit->total, type, gpus);
    else
      reason_set(out, "fits: needs no GPUs");
    break;
  }
}

void
placement__describe(const struct placement_request *req, char *out,
                     size_t len)
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
 * Append ": 'a': why; 'b', 'c': why" to d->reason: every candidate with
 * its reason, in order, sites that say the same thing together, so that
 * a job nobody runs says why of each site and not of the first.
 */
void
placement__add_site_reasons(struct placement_decision *d)
{
  const char *sep = ": ";

  for (size_t i = 0; i < d->ncandidates; i++) {
    const struct placement_candidate *c = &d->candidates[i];
    size_t k;

    for (k = 0; k < i; k++) {
      if (strcmp(d->candidates[k].reason, c->reason) == 0)
        break;
    }
    if (k < i)
      continue; /* named with the first site that said it */
    placement__append(d->reason, PLACEMENT_SUMMARY_LEN, "%s'%s'", sep,
                           c->site != NULL ? c->site : "?");
    for (k = i + 1; k < d->ncandidates; k++) {
      const struct placement_candidate *o = &d->candidates[k];

      if (strcmp(o->reason, c->reason) == 0)
        placement__append(d->reason, PLACEMENT_SUMMARY_LEN, ", '%s'",
                               o->site != NULL ? o->site : "?");
    }
    placement__append(d->reason, PLACEMENT_SUMMARY_LEN, ": %s", c->reason);
    sep = "; ";
  }
}

void
placement__explain_none(const struct placement_request *req,
                        struct placement_decision *d)
{
  char what[PLACEMENT_REASON_LEN];

  placement__describe(req, what, sizeof(what));
  d->reason[0] = '\0';
  if (req->site != NULL && d->ncandidates == 0) {
    reason_set(d->reason, "no site named '%s'", req->site);
  } else if (d->verdict == PLACEMENT_WAIT) {
    reason_set(d->reason, "no site can run %s now", what);
    placement__add_site_reasons(d);
  } else if (d->ncandidates == 0) {
    reason_set(d->reason, "no sites to place %s on", what);
  } else if (req->site != NULL) {
    reason_set(d->reason, "site '%s' can never run %s: %s", req->site, what,
               d->candidates[0].reason);
  } else {
    reason_set(d->reason, "no site can run %s", what);
    placement__add_site_reasons(d);
  }
}

static void
first_fit_decide(const struct placement_request *req,
                 const struct placement_site *sites, size_t nsites,
                 struct placement_decision *out)
{
  struct placement__fit fit;
  int waits = 0;

  memset(out, 0, sizeof(*out));
  out->verdict = PLACEMENT_NEVER;
  out->site = -1;
  out->pick = -1;
  /* A snapshot is bounded by the candidates array; the rest is unseen. */
  if (nsites > PLACEMENT_MAX_SITES)
    nsites = PLACEMENT_MAX_SITES;

  placement__fit_init(req, &fit);
  for (size_t i = 0; i < nsites; i++) {
    struct placement_candidate *c;

    if (placement__pinned_out(req, &sites[i]))
      continue;
    c = &out->candidates[out->ncandidates++];
    c->site = sites[i].name;
    c->index = (int)i;
    c->score = -(double)i;
    placement__judge(req, &sites[i], &fit);
    placement__fit_reason(&sites[i], &fit, c->reason);
    c->verdict = fit.verdict;
    c->grows = fit.why == PLACEMENT__GROWS;
    /* Nothing fits now: the job waits for the first site that grows. */
    if (c->grows && out->pick < 0 && c->verdict == PLACEMENT_WAIT)
      out->pick = (int)i;
    if (c->verdict == PLACEMENT_NOW && out->verdict != PLACEMENT_NOW) {
      out->verdict = PLACEMENT_NOW;
      out->site = out->pick = (int)i;
      reason_set(out->reason, "first site that fits is '%s': %s",
                 site_name(&sites[i]), c->reason);
    } else if (c->verdict == PLACEMENT_WAIT) {
      waits = 1;
    }
  }
  if (out->verdict == PLACEMENT_NOW)
    return;
  if (waits)
    out->verdict = PLACEMENT_WAIT;
  placement__explain_none(req, out);
}

static const struct placement_policy policies[] = {
  {"first-fit", first_fit_decide, NULL},
  {"cost", placement__cost_decide_plain, placement__cost_decide_full},
};

const struct placement_policy *
placement_policy_find(const char *name)
{
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
    if (strcmp(policies[i].name, name) == 0)
      return &policies[i];
  }
  return NULL;
}
