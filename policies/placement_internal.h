/*
 * What the placement policies share inside policies/, not for callers:
 * the one judgement of whether a site fits a job (placement.c), used by
 * first-fit and by cost, and the words both print.  The judgement is
 * numbers first and words on demand, so that a pass over many jobs can
 * rank sites without formatting a reason per site.
 */
#ifndef TENBIN_POLICIES_PLACEMENT_INTERNAL_H
#define TENBIN_POLICIES_PLACEMENT_INTERNAL_H

#include <string.h>

#include "placement.h"

/* Which of the reasons of placement.c's header comment applies. */
enum placement__why {
  PLACEMENT__UNKNOWN,     /* WAIT: never reached, capacity unknown */
  PLACEMENT__NODES,       /* NEVER: more nodes than the site has */
  PLACEMENT__TYPE_NONE,   /* NEVER: no GPUs of the type */
  PLACEMENT__TYPE_TOTAL,  /* NEVER: more than the type has in total */
  PLACEMENT__PER_NODE,    /* NEVER: more per node than a node holds */
  PLACEMENT__NO_GPUS,     /* NEVER: any type will do, the site has none */
  PLACEMENT__ONE_TYPE,    /* NEVER: no one type has that many */
  PLACEMENT__CLOSED,      /* WAIT: closed to this job (site->closed) */
  PLACEMENT__UNREACHABLE, /* WAIT */
  PLACEMENT__JOB_CAP,     /* WAIT: at its limit of jobs */
  PLACEMENT__BUSY,        /* WAIT: too few GPUs free */
  PLACEMENT__GROWS,       /* WAIT, or NOW where the site grows on
                             submit: fits once nodes are started */
  PLACEMENT__FITS,        /* NOW */
};

/* A site's fit for a request, and the facts its reason cites. */
struct placement__fit {
  enum placement_verdict verdict;
  enum placement__why why;
  int64_t gpus;      /* the request's total (gpus_per_node x nodes) */
  int64_t nodes;
  int64_t per_node;  /* GPUs needed on the busiest node */
  const char *type;  /* the type judged, as the request names it (any
                        type: as the pool does); NULL: none */
  int pool;          /* the first pool of type, or -1 */
  int64_t total;     /* of type, over its pools */
  int64_t free;
  int64_t grow;      /* of type, not up yet (elastic) */
  int64_t node_max;  /* the most of type on one node */
  int64_t largest;   /* ONE_TYPE: the most GPUs of any one type */
};

/* The request's part of fit (gpus, nodes, per_node): the same for every
 * site, so a policy fills it once per decision. */
void placement__fit_init(const struct placement_request *req,
                         struct placement__fit *fit);
/* Judge site for req into fit, whose request's part placement__fit_init
 * filled (for req); fit may go from site to site. */
void placement__judge(const struct placement_request *req,
                      const struct placement_site *site,
                      struct placement__fit *fit);
/* The reason for fit, into out (PLACEMENT_REASON_LEN bytes). */
void placement__fit_reason(const struct placement_site *site,
                           const struct placement__fit *fit, char *out);
/* "2 x a10g GPUs", "16 GPUs on 2 nodes", "4 nodes without GPUs". */
void placement__describe(const struct placement_request *req, char *out,
                         size_t len);
/* Append every candidate's reason to d->reason, sites that say the same
 * thing together. */
void placement__add_site_reasons(struct placement_decision *d);
/* The reason of d when no site takes the job (d's verdict WAIT or NEVER,
 * its candidates' reasons written). */
void placement__explain_none(const struct placement_request *req,
                             struct placement_decision *d);
/*
 * Same GPU type: the same name in any case (ASCII, as strcasecmp in the
 * C locale).  Asked for every job, site and pool of a pass, so inline:
 * names differ in their first letter mostly, and a call costs more.
 */
static inline int
placement__same_type(const char *a, const char *b)
{
  if (a == b)
    return a != NULL;
  if (a == NULL || b == NULL)
    return 0;
  for (;; a++, b++) {
    unsigned char x = (unsigned char)*a, y = (unsigned char)*b;

    if (x == y) {
      if (x == '\0')
        return 1;
    } else if ((x ^ y) != 0x20 || (unsigned)((x | 0x20) - 'a') >= 26u) {
      return 0; /* not the same letter in another case */
    }
  }
}
/* Sums and products of non-negative amounts (money, GPUs, times) stop
 * at INT64_MAX, a bound that compares right, where a wrap would not. */
static inline int64_t
placement__sat_add(int64_t a, int64_t b)
{
  int64_t r;

  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
static inline int64_t
placement__sat_mul(int64_t a, int64_t b)
{
  int64_t r;

  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
/* The request is pinned to another site than this one. */
static inline int
placement__pinned_out(const struct placement_request *req,
                      const struct placement_site *site)
{
  return req->site != NULL &&
         (site->name == NULL || strcmp(site->name, req->site) != 0);
}
/* Append to a reason of cap bytes (a candidate's or a decision's); what
 * does not fit is cut. */
void placement__append(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The cost policy's entries in the policy table (cost.c). */
void placement__cost_decide_plain(const struct placement_request *req,
                                  const struct placement_site *sites,
                                  size_t nsites,
                                  struct placement_decision *out);
void placement__cost_decide_full(const struct placement_request *req,
                                 const struct placement_site *sites,
                                 size_t nsites,
                                 const struct placement_cost *cost,
                                 struct placement_decision *out);

#endif
