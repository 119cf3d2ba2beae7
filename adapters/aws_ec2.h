/*
 * The EC2 Query API on the wire (API version 2016-11-15): request bodies
 * built as form fields, and answers read from their XML (expat).  No
 * I/O: the aws site sends what is built here, signed by sigv4.c, and
 * hands back what came.  Answers are outside input: every string is
 * bounded, every count capped, and whatever does not parse is an error
 * naming what was wrong, never a crash (fuzz/fuzz_ec2.c).
 */
#ifndef TENBIN_ADAPTERS_AWS_EC2_H
#define TENBIN_ADAPTERS_AWS_EC2_H

#include <stddef.h>
#include <stdint.h>

#include "adapters/cloud_vm.h"
#include "util/buf.h"
#include "util/err.h"

#define EC2_API_VERSION "2016-11-15"
#define EC2_ID_LEN 64          /* ids, types, zones, state names */
#define EC2_TAG_LEN 256        /* a tag's key or value (AWS: 128/256) */
#define EC2_MAX_TAGS 8         /* tags kept per instance */
#define EC2_TOKEN_LEN 1024     /* a page's nextToken */
#define EC2_MSG_LEN 512        /* an error's message, cut */

/* A tag on an instance (the tenbin ones: instance and node). */
struct ec2_tag {
  char key[EC2_TAG_LEN];
  char value[EC2_TAG_LEN];
};

/* An instance as an answer describes it. */
struct ec2_instance {
  char id[EC2_ID_LEN];
  int state_code;                 /* 0 pending, 16 running, 32 shutting-
                                     down, 48 terminated, 64 stopping,
                                     80 stopped; -1 when not said */
  char state[EC2_ID_LEN];         /* its name */
  char type[EC2_ID_LEN];          /* p5.48xlarge */
  char zone[EC2_ID_LEN];          /* us-east-1a */
  int spot;                       /* instanceLifecycle = spot */
  char launch_time[EC2_ID_LEN];   /* 2026-11-21T13:47:52.000Z */
  char client_token[EC2_TAG_LEN];
  char state_reason[EC2_ID_LEN];  /* Server.SpotInstanceTermination... */
  char private_ip[EC2_ID_LEN];    /* privateIpAddress, or "" */
  struct ec2_tag tags[EC2_MAX_TAGS];
  int ntags;
};

/* One answer of RunInstances, DescribeInstances or TerminateInstances:
 * its instances (at most max of them, nout says how many there were) and
 * the next page's token, "" on the last page. */
struct ec2_answer {
  struct ec2_instance *instances; /* the caller's array */
  size_t max;
  size_t n;                       /* instances written */
  size_t nout;                    /* instances in the answer */
  char next_token[EC2_TOKEN_LEN];
  /* Tags to keep, keep[0..nkeep), or all when keep is NULL.  An instance
   * may carry 50 tags (ParallelCluster's alone are about 10); only the
   * first EC2_MAX_TAGS kept are read, so the caller names the ones it
   * needs and the others take no room. */
  const char *const *keep;
  size_t nkeep;
  /* An error answer: its first error's code and message. */
  char error_code[EC2_ID_LEN];
  char error_message[EC2_MSG_LEN];
};

/* What RunInstances launches: one instance. */
struct ec2_launch {
  const char *image;         /* ami-... */
  const char *type;          /* p5.48xlarge */
  const char *zone;          /* or NULL: any */
  const char *subnet;        /* or NULL */
  const char *const *security_groups; /* ids, or NULL */
  int nsecurity_groups;
  const char *iam_profile;   /* instance profile name, or NULL */
  const char *key_name;      /* or NULL */
  const char *client_token;  /* idempotency: derived from the node id */
  int spot;                  /* one-time spot, terminated on interruption */
  const char *user_data;     /* base64, or NULL */
  const struct ec2_tag *tags; /* on the instance; borrowed */
  int ntags;
};

/* The body of a RunInstances of one instance. */
int ec2_run_instances(const struct ec2_launch *l, struct buf *body)
    WARN_UNUSED;
/* The body of a DescribeInstances of the instances tagged tag_key =
 * tag_value (any value when it is NULL) that are not terminated, a page
 * of at most max_results from next_token (NULL or "" for the first). */
int ec2_describe_tagged(const char *tag_key, const char *tag_value,
                        int max_results, const char *next_token,
                        struct buf *body) WARN_UNUSED;
/* The body of a TerminateInstances of n instance ids. */
int ec2_terminate_instances(const char *const *ids, size_t n,
                            struct buf *body) WARN_UNUSED;

/*
 * Read answer xml[0..len) into a (its instances and next_token reset
 * first).  An error answer (<Response><Errors><Error>...) fills
 * error_code and error_message and returns ERR_SITE saying them; XML that
 * does not parse, or that is no EC2 answer, is ERR_SITE saying why.
 */
int ec2_parse(const char *xml, size_t len, struct ec2_answer *a,
              struct err *e) WARN_UNUSED;

/* 1 when an error code says the zone or type has no capacity now (move
 * on to the next zone or shape), as EC2 and ParallelCluster name them. */
int ec2_is_capacity_error(const char *code);
/* 1 when it says the caller is being throttled (back off and retry). */
int ec2_is_throttle_error(const char *code);
/* What an error answer (code, HTTP status) means to the VM pool; status
 * alone for an answer that named no code. */
enum cloud_refusal ec2_refusal(const char *code, int status);

#endif
