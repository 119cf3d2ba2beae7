/*
 * Azure Resource Manager on the wire for the azure VM-pool site:
 * Microsoft.Compute virtualMachines at api-version 2024-07-01
 * (shared/research/cloud-contracts.md section 3).  The URLs of a VM and
 * of a resource group's VMs, the JSON body that creates a VM, and the
 * answers read into struct cloud_vm (cloud_vm.h) and struct
 * azarm_operation.  No I/O: the site sends what is built here with its
 * bearer token (azure_auth.h) and hands back what came.
 *
 * Answers are outside input: each is capped (AZARM_ANSWER_MAX), every
 * string is bounded, and whatever is not the shape ARM documents is
 * ERR_SITE naming what was wrong, never a crash (fuzz/fuzz_azure_arm.c).
 *
 * Calling sequence of a launch:
 *   azarm_vm_url + azarm_vm_body -> PUT; 201 (or 200) with the VM, and
 *   Azure-AsyncOperation + Retry-After headers;
 *   azarm_link_ok(that header) -> GET it until azarm_parse_operation
 *   says it ended (azarm_retry_after_ms paces the polls);
 *   GET azarm_vm_url -> azarm_parse_vm.
 * A refusal's body goes to azarm_parse_error, its code to azarm_refusal.
 *
 * Ownership: inputs are borrowed for the call; results are written into
 * the caller's buffers and structs (copies), and nothing allocated here
 * outlives a call.
 */
#ifndef TENBIN_ADAPTERS_AZURE_ARM_H
#define TENBIN_ADAPTERS_AZURE_ARM_H

#include <stddef.h>
#include <stdint.h>

#include "adapters/cloud_vm.h"
#include "util/buf.h"
#include "util/err.h"

#define AZARM_ENDPOINT "https://management.azure.com"
#define AZARM_API_VERSION "2024-07-01"
/* The Microsoft.Network version ARM creates the VM's NIC with. */
#define AZARM_NETWORK_API_VERSION "2022-11-01"

/* ARM's URLs (nextLink, Azure-AsyncOperation) may be up to 4 KB. */
#define AZARM_URL_MAX 4096
/* An answer larger than this is refused: a page of VMs is a few hundred
 * KB, so this is only a bound on what a hostile peer makes us parse. */
#define AZARM_ANSWER_MAX (8u << 20)
/* customData decodes to at most 65535 bytes (the VM API's limit). */
#define AZARM_SCRIPT_MAX 65535
/* Extra tags per VM; Azure allows 50, the two tenbin ones included. */
#define AZARM_MAX_TAGS 16
/* An error code kept; ARM's are short identifiers. */
#define AZARM_CODE_LEN 128
/* Retry-After values above this many seconds are cut to it. */
#define AZARM_RETRY_MAX_S 3600

/* An extra tag a site puts on its VMs (copied into the body). */
struct azarm_tag {
  const char *key;   /* 1-512 bytes, none of < > % & \ ? / */
  const char *value; /* 0-256 bytes */
};

/* What one PUT creates.  Every pointer is borrowed for the call. */
struct azarm_launch {
  const char *name;     /* the VM's name and its computerName: 1-64 of
                           letters, digits and '-', no '-' at either end
                           (azarm_name_ok); deterministic from the node
                           id, so a repeated PUT is the same VM */
  const char *location; /* "eastus" */
  const char *zone;     /* "1", "2" or "3", or NULL: no zone */
  const char *size;     /* "Standard_ND96isr_H100_v5" */
  const char *instance; /* CLOUD_TAG_INSTANCE's value */
  const char *node;     /* CLOUD_TAG_NODE's value */
  const struct azarm_tag *tags; /* extra site tags, or NULL */
  size_t ntags;
  int spot;             /* priority Spot, evictionPolicy Delete */
  double max_price;     /* Spot only: USD per hour; <= 0 means -1 (up to
                           the pay-as-you-go price, evicted only for
                           capacity) */
  const char *image;    /* a marketplace URN "publisher:offer:sku:version"
                           (as az vm image list prints it), or an image
                           resource id starting with '/' */
  const char *disk_type; /* the OS disk's storageAccountType
                            ("Premium_LRS"), or NULL: Azure's default */
  int disk_gb;          /* the OS disk's size, or 0: the image's */
  const char *admin_user; /* or NULL: "azureuser" */
  const char *ssh_key;  /* an OpenSSH public key line, or NULL */
  const void *script;   /* the startup script (cloud-init reads it), sent
                           base64 as osProfile.customData; or NULL */
  size_t script_len;    /* at most AZARM_SCRIPT_MAX */
  const char *subnet_id; /* preferred: ARM creates the NIC in this subnet
                            and deletes it with the VM */
  const char *nic_id;   /* or an existing NIC, deleted with the VM; give
                           exactly one of the two */
};

/* One page of a resource group's VMs. */
struct azarm_page {
  struct cloud_vm *vms; /* the caller's array */
  size_t max;
  const char *instance; /* keep only VMs whose CLOUD_TAG_INSTANCE tag is
                           this (borrowed), or NULL: all */
  const char *tag_key;  /* and only those whose tag tag_key (its name
                           case aside, as Azure compares names) is
                           tag_value (exactly); NULL: no such filter.
                           ARM has no tag filter on this call, so the
                           page is filtered here.  Borrowed. */
  const char *tag_value;
  const char *name_tag; /* the tag whose value goes into each VM's name
                           (name case aside; "" when absent or too
                           long), or NULL.  Borrowed. */
  size_t n;             /* VMs written */
  size_t nout;          /* VMs kept on the page (more than max when the
                           array was too small) */
  char next_link[AZARM_URL_MAX + 1]; /* "" on the last page; check it
                                        with azarm_link_ok first */
};

/* Where a long-running operation stands. */
enum azarm_op_status {
  AZARM_OP_RUNNING = 0, /* InProgress, and any status ARM adds later */
  AZARM_OP_SUCCEEDED,
  AZARM_OP_FAILED,
  AZARM_OP_CANCELED
};

struct azarm_operation {
  enum azarm_op_status status;
  char code[AZARM_CODE_LEN];    /* error.code of a failed one, or "" */
  char message[CLOUD_MSG_LEN];  /* error.message, cut, or "" */
};

/* An ARM error body, {"error":{"code":..,"message":..}}. */
struct azarm_error {
  char code[AZARM_CODE_LEN];
  char message[CLOUD_MSG_LEN];  /* cut; always valid UTF-8 */
};

/* ---- URLs ---- */

/*
 * base + /subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Compute
 * /virtualMachines/VM?api-version=..., each segment percent-encoded,
 * appended to out: the URL a VM is PUT, GET and DELETEd at.  base is
 * AZARM_ENDPOINT or a test's "http://127.0.0.1:PORT" (a trailing '/' is
 * dropped).  ERR_INVALID naming the field for a base that is no http(s)
 * URL or a segment that is empty or too long; ERR_TOO_LARGE past out's
 * cap.
 */
int azarm_vm_url(const char *base, const char *subscription,
                 const char *group, const char *vm, struct buf *out,
                 struct err *e) WARN_UNUSED;
/* The same URL without the VM: the first page of the group's VMs. */
int azarm_list_url(const char *base, const char *subscription,
                   const char *group, struct buf *out,
                   struct err *e) WARN_UNUSED;
/*
 * 1 when link (a nextLink, an Azure-AsyncOperation or Location header)
 * may be fetched with our bearer token: at most AZARM_URL_MAX bytes of
 * printable ASCII that start with base (case aside) followed by '/'.  0
 * otherwise, so a hostile answer cannot send the token to another host.
 */
int azarm_link_ok(const char *link, const char *base);
/* 1 when name is a VM name azarm_vm_body accepts. */
int azarm_name_ok(const char *name);
/* 1 when s is 1..max bytes, each a letter, a digit or a byte of extra
 * (the words of ARM's names: sizes, locations, groups, ids). */
int azarm_word_ok(const char *s, size_t max, const char *extra);

/* ---- requests ---- */

/*
 * The JSON body of the PUT that creates l, appended to out.  ERR_INVALID
 * naming the field that is missing or malformed; ERR_TOO_LARGE past
 * out's cap.
 */
int azarm_vm_body(const struct azarm_launch *l, struct buf *out,
                  struct err *e) WARN_UNUSED;

/* ---- answers ---- */

/*
 * Read one VM (a GET's or a PUT's answer) into out (reset first):
 *   name -> id; zones[0] -> zone; hardwareProfile.vmSize -> shape;
 *   priority Spot or Low -> spot; timeCreated (RFC 3339) -> launched_ms;
 *   the two tenbin tags (keys case aside, as Azure compares them);
 *   provisioningState Creating, Updating -> PENDING; Succeeded ->
 *   RUNNING; Deleting -> STOPPING; Failed -> GONE; others UNKNOWN.
 * Failed is GONE because such a VM will never become a node, but unlike
 * a deleted one it still exists and may hold a disk and a NIC: the pool
 * must DELETE it (harmless when it is gone: 204).  end_reason is then
 * "Failed", or the instance view's ProvisioningState/failed/CODE when
 * the answer has one.  When it has PowerState statuses
 * ($expand=instanceView), a Succeeded VM that is starting is PENDING,
 * stopping, deallocating or stopped (still billed) STOPPING, and
 * deallocated GONE.
 * A tag value too long to be tenbin's is read as "" (not ours).  ERR_SITE
 * naming what was wrong for anything else that is not a VM.
 */
int azarm_parse_vm(const char *json, size_t len, struct cloud_vm *out,
                   struct err *e) WARN_UNUSED;
/*
 * Read a page of a list answer {"value":[VM...],"nextLink":...} into p
 * (n, nout and next_link reset first), keeping only the VMs tagged
 * p->instance, and p->tag_key = p->tag_value, when they are set.  A
 * listed VM has no private address: that is its NIC's, another call.
 * A nextLink absent or null is the last page.  ERR_SITE naming what was
 * wrong (value[i] for a VM).
 */
int azarm_parse_list(const char *json, size_t len, struct azarm_page *p,
                     struct err *e) WARN_UNUSED;
/*
 * Read a poll of an Azure-AsyncOperation URL into out (reset first):
 * status Succeeded, Failed, Canceled (case aside), anything else still
 * running; error.code and error.message when there.  ERR_SITE when there
 * is no status string.
 */
int azarm_parse_operation(const char *json, size_t len,
                          struct azarm_operation *out,
                          struct err *e) WARN_UNUSED;
/*
 * Read an error body into out (reset first): {"error":{"code","message"}}
 * or, as some services answer, {"code","message"} at the top.  ERR_SITE
 * when it is neither (a proxy's HTML page); out is "" then, and the
 * HTTP status alone says what happened.
 */
int azarm_parse_error(const char *json, size_t len, struct azarm_error *out,
                      struct err *e) WARN_UNUSED;

/*
 * What a refusal means (cloud_vm.h), from its error code (NULL or "" when
 * none), its message (NULL when none; it tells a quota's
 * OperationNotAllowed from others) and the HTTP status (0 for an
 * operation's error, which came with a 200):
 *   SkuNotAvailable, AllocationFailed, ZonalAllocationFailed,
 *   Overconstrained(Zonal)AllocationRequest -> CAPACITY;
 *   QuotaExceeded, OperationNotAllowed saying "quota" -> QUOTA;
 *   429, TooManyRequests, SubscriptionRequestsThrottled,
 *   RetryableErrorDueToAnotherOperation -> THROTTLE;
 *   401, InvalidAuthenticationToken(Tenant), ExpiredAuthenticationToken,
 *   AuthenticationFailed, AuthorizationFailed -> AUTH;
 *   ResourceGroupNotFound, SubscriptionNotFound -> OTHER (the config is
 *   wrong; no VM is "done" because of it);
 *   404, ResourceNotFound, NotFound -> NOT_FOUND;
 *   other 5xx, InternalExecutionError, InternalServerError,
 *   ServiceUnavailable, GatewayTimeout -> TRANSIENT; else OTHER.
 * Codes are compared case aside.
 */
enum cloud_refusal azarm_refusal(const char *code, const char *message,
                                 int http_status);
/*
 * A Retry-After header's delay in ms: whole seconds (spaces around
 * allowed), cut to AZARM_RETRY_MAX_S.  -1 when value is NULL, empty or
 * anything else, an HTTP-date included: ARM sends seconds (contract
 * 3.3), and a caller without a delay uses its own backoff.
 */
int64_t azarm_retry_after_ms(const char *value);

#endif
