/*
 * Compute Engine v1 on the wire, for the gcp VM-pool site: the URLs of
 * instances.insert, zoneOperations.get, instances.list and
 * instances.delete, the insert's JSON body, and the answers read into
 * struct cloud_vm and enum cloud_refusal (cloud_vm.h).  No I/O: the site
 * sends what is built here with a bearer token (gcp_auth.h) and hands
 * back what came.  Facts from shared/research/cloud-contracts.md 2.2-2.5.
 *
 * Answers are outside input: their size is capped, every string is
 * bounded, and whatever does not parse is ERR_SITE naming what was
 * wrong, never a crash (fuzz/fuzz_gce.c).  Arguments a caller builds
 * from config are checked too: a bad one is ERR_INVALID naming it.
 */
#ifndef TENBIN_ADAPTERS_GCE_H
#define TENBIN_ADAPTERS_GCE_H

#include <stddef.h>
#include <stdint.h>

#include "adapters/cloud_vm.h"
#include "util/buf.h"
#include "util/err.h"

#define GCE_ENDPOINT "https://compute.googleapis.com/compute/v1"
/* An answer larger than this is refused: a page of 500 instances, each
 * with its startup script in its metadata, stays well below it. */
#define GCE_ANSWER_MAX (16u * 1024 * 1024)
#define GCE_MAX_RESULTS 500   /* instances.list's own maximum */
#define GCE_OP_LEN 128        /* an operation's name */
#define GCE_CODE_LEN 64       /* an error's code, reason or status word */
#define GCE_TOKEN_LEN 2048    /* a list page's nextPageToken */
#define GCE_REQUEST_ID_LEN 37 /* a UUID and its NUL */
#define GCE_MAX_LABELS 64     /* on one instance, Google's own limit */
#define GCE_SCRIPT_MAX (256u * 1024) /* one metadata value, Google's limit */

/* Where the calls go.  All borrowed. */
struct gce_loc {
  const char *base;     /* NULL: GCE_ENDPOINT; a test's fake otherwise */
  const char *project;  /* demo-proj */
  const char *zone;     /* us-central1-a */
};

/*
 * The URLs, appended to out, every path segment and query value
 * percent-encoded.  A segment that is empty, "." or ".." (which an HTTP
 * client would resolve away), or longer than Google allows, is
 * ERR_INVALID naming it; a full out is ERR_TOO_LARGE.  After a failure
 * out may hold part of a URL: reset it before reuse.
 */
/* POST: instances.insert, deduplicated by request_id (gce_request_id). */
int gce_url_insert(const struct gce_loc *loc, const char *request_id,
                   struct buf *out, struct err *e) WARN_UNUSED;
/* GET: the operation op of that zone. */
int gce_url_operation(const struct gce_loc *loc, const char *op,
                      struct buf *out, struct err *e) WARN_UNUSED;
/*
 * GET: a page of at most max_results (1..GCE_MAX_RESULTS) instances
 * labelled CLOUD_TAG_INSTANCE = instance_label, from page_token (NULL or
 * "" for the first).  instance_label must be 1-63 of [a-z0-9-]; NULL
 * selects every instance that has the label, whatever its value.  All
 * states are listed: a TERMINATED instance still pays for its disk until
 * it is deleted.
 */
int gce_url_list(const struct gce_loc *loc, const char *instance_label,
                 int max_results, const char *page_token, struct buf *out,
                 struct err *e) WARN_UNUSED;
/*
 * GET: the same page of the instances labelled key = value, whoever
 * launched them (the cluster of an elastic Slurm site).  Google's label
 * rules: key 1-63 of [a-z0-9_-] starting with a lowercase letter, value
 * 0-63 of [a-z0-9_-]; anything else (an uppercase letter, a space, a
 * quote that would end the filter's string) is ERR_INVALID naming it.
 */
int gce_url_list_labelled(const struct gce_loc *loc, const char *key,
                          const char *value, int max_results,
                          const char *page_token, struct buf *out,
                          struct err *e) WARN_UNUSED;
/* 1 when s is a label key (key 1) or value (key 0) by Google's rules
 * (gce_url_list_labelled). */
int gce_label_ok(const char *s, int key);
/* DELETE: the instance name, deduplicated by request_id. */
int gce_url_delete(const struct gce_loc *loc, const char *name,
                   const char *request_id, struct buf *out, struct err *e)
    WARN_UNUSED;

/*
 * A requestId derived from seed (the node's id, say): the first 16 bytes
 * of SHA-256(seed) with RFC 4122's version 4 and variant bits set, as
 * "xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx".  The same seed gives the
 * same id, so a retried insert is one insert to Google (which keeps an
 * id for 60 minutes).  seed NULL is "".
 */
void gce_request_id(const char *seed, char out[GCE_REQUEST_ID_LEN]);

/* 1 when name is a Compute Engine resource name: 1-63 characters,
 * [a-z]([-a-z0-9]*[a-z0-9])?. */
int gce_name_valid(const char *name);

/* One label of the site's own (borrowed). */
struct gce_label {
  const char *key;    /* 1-63 of [a-z0-9_-], starting with [a-z] */
  const char *value;  /* 0-63 of [a-z0-9_-] */
};

/* What instances.insert launches: one instance.  All borrowed. */
struct gce_launch {
  const char *name;          /* gce_name_valid */
  const char *zone;          /* us-central1-a */
  const char *machine_type;  /* a3-highgpu-8g, sent as
                                zones/{zone}/machineTypes/{type} */
  const char *image;         /* projects/debian-cloud/global/images/...,
                                sent as given */
  int disk_gb;               /* the boot disk, 10..65536 */
  const char *disk_type;     /* pd-balanced, or NULL: Google's default */
  const char *network;       /* NULL: global/networks/default */
  const char *subnetwork;    /* regions/{r}/subnetworks/{s}, or NULL */
  int external_ip;           /* give it an ephemeral public address */
  const char *instance_label; /* CLOUD_TAG_INSTANCE's value */
  const char *node_label;     /* CLOUD_TAG_NODE's value */
  const struct gce_label *labels; /* the site's own, besides those two */
  size_t nlabels;
  int spot;                  /* SPOT, deleted when preempted */
  const char *accelerator_type; /* nvidia-tesla-t4, or NULL: A2, A3 and
                                   the like carry their GPUs already */
  int accelerator_count;     /* 1..16 with a type, 0 without */
  const char *startup_script; /* metadata startup-script, or NULL */
  const char *service_account; /* an e-mail or "default", or NULL: none;
                                  given the cloud-platform scope, IAM
                                  deciding what it may do */
};

/*
 * The JSON body of an instances.insert of l appended to body.  Every
 * field is checked first: ERR_INVALID naming the one that is not what
 * Google takes; ERR_TOO_LARGE when body is full.
 */
int gce_insert_body(const struct gce_launch *l, struct buf *body,
                    struct err *e) WARN_UNUSED;

enum gce_op_status {
  GCE_OP_UNKNOWN = 0,  /* not read */
  GCE_OP_PENDING,
  GCE_OP_RUNNING,
  GCE_OP_DONE
};

/* An Operation, as insert, delete and operations.get answer it. */
struct gce_operation {
  char name[GCE_OP_LEN];     /* what gce_url_operation takes */
  enum gce_op_status status;
  char target[CLOUD_ID_LEN]; /* targetLink's last segment: the instance */
  int failed;                /* DONE with an error */
  char error_code[GCE_CODE_LEN];  /* error.errors[0].code */
  char error_message[CLOUD_MSG_LEN]; /* its message, cut */
  int http_status;           /* httpErrorStatusCode, 0 when not said */
  enum cloud_refusal refusal; /* what a failure means, when failed */
};

/*
 * Read an Operation from json[0..len) into out (reset first).  One that
 * is DONE with an error sets failed, error_code, error_message and
 * refusal and returns ERR_SITE saying them; one that is no Operation is
 * ERR_SITE saying why, failed 0.
 */
int gce_parse_operation(const char *json, size_t len,
                        struct gce_operation *out, struct err *e)
    WARN_UNUSED;

/*
 * Read a page of instances.list from json[0..len): its instances into
 * vms (at most max; *n says how many were written, *nout how many the
 * page held) and the next page's token into next_page_token, "" on the
 * last page.  The instance's name is its id (delete takes it), status
 * gives its state (REPAIRING counts as RUNNING: the VM still exists,
 * still holds its name and comes back by itself, while the node's agent
 * falls silent, which is what tells the broker it cannot take work),
 * zone and machineType their URLs' last segments, spot
 * provisioningModel SPOT or preemptible, launched_ms creationTimestamp,
 * instance and node the tenbin labels.  A status tenbin does not know is
 * CLOUD_VM_UNKNOWN.  Anything of the wrong type, or too long for its
 * field, is ERR_SITE naming it (then *n is 0 and the token "").
 */
int gce_parse_list(const char *json, size_t len, struct cloud_vm *vms,
                   size_t max, size_t *n, size_t *nout,
                   char next_page_token[GCE_TOKEN_LEN], struct err *e)
    WARN_UNUSED;
/*
 * gce_parse_list, also reading into name the value of the label
 * name_label (NULL: none; a label key, borrowed): "" when the instance
 * has no such label or its value does not fit.  Both read address, the
 * first network interface's networkIP (its private address).
 */
int gce_parse_list_named(const char *json, size_t len,
                         const char *name_label, struct cloud_vm *vms,
                         size_t max, size_t *n, size_t *nout,
                         char next_page_token[GCE_TOKEN_LEN], struct err *e)
    WARN_UNUSED;

/* A synchronous error answer (an HTTP status of 400 or more). */
struct gce_error {
  int http_status;                 /* as given */
  int code;                        /* error.code, 0 when not said */
  char status[GCE_CODE_LEN];       /* error.status: RESOURCE_EXHAUSTED */
  char reason[GCE_CODE_LEN];       /* error.errors[0].reason:
                                      rateLimitExceeded */
  char message[CLOUD_MSG_LEN];     /* error.message, cut; "" when none */
  enum cloud_refusal refusal;      /* from reason, else status, else
                                      http_status */
};

/*
 * Read an error answer json[0..len) that came with http_status into out.
 * It never fails: a body that is no Google error (a proxy's HTML page)
 * leaves the words empty, and the status alone decides the refusal.
 */
void gce_parse_error(const char *json, size_t len, int http_status,
                     struct gce_error *out);

/*
 * What an error's word (an Operation's error code, an error answer's
 * reason or status; NULL or "" when none) and HTTP status mean to the
 * pool.  A word tenbin knows decides; otherwise 429 is THROTTLE, 401
 * AUTH, 404 NOT_FOUND, any 5xx TRANSIENT, and the rest OTHER.
 * NOT_FOUND says the call named something missing: for a delete or a
 * get, the VM; for an insert, its image or machine type, which is the
 * config's mistake (OTHER to the pool).
 */
enum cloud_refusal gce_refusal(const char *code_or_reason, int http_status);

#endif
