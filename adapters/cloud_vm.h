/*
 * What every provider's wire module (aws_ec2.c, gce.c, azure_arm.c)
 * reads a listed VM and a refusal into, so that the one VM-pool site
 * (adapters/cloud.c) drives the three clouds alike.  No I/O here.
 *
 * Every VM tenbin launches carries two tags (labels on GCP): the broker's
 * instance id under CLOUD_TAG_INSTANCE and its node id under
 * CLOUD_TAG_NODE.  Both keys and every value are lowercase letters,
 * digits and '-', so that GCP's label rules hold for all three.
 */
#ifndef TENBIN_ADAPTERS_CLOUD_VM_H
#define TENBIN_ADAPTERS_CLOUD_VM_H

#include <stdint.h>

#define CLOUD_TAG_INSTANCE "tenbin-instance"
#define CLOUD_TAG_NODE "tenbin-node"

#define CLOUD_ID_LEN 128   /* i-..., a GCE or Azure VM name */
#define CLOUD_NAME_LEN 64  /* zones, shapes, tag values */
#define CLOUD_MSG_LEN 512  /* a refusal's message, cut */
#define CLOUD_ADDR_LEN 48  /* an IPv4 or IPv6 address */

enum cloud_vm_state {
  CLOUD_VM_UNKNOWN = 0,
  CLOUD_VM_PENDING,  /* asked for, not yet running (EC2 pending, GCE
                        PROVISIONING/STAGING, ARM Creating) */
  CLOUD_VM_RUNNING,
  CLOUD_VM_STOPPING, /* on its way out (shutting-down, STOPPING,
                        Deleting) */
  CLOUD_VM_GONE      /* terminated, stopped, deleted: bills no more */
};

/* A VM as a listing or a launch answer describes it. */
struct cloud_vm {
  char id[CLOUD_ID_LEN];       /* what terminate takes */
  enum cloud_vm_state state;
  char zone[CLOUD_NAME_LEN];   /* "us-east-1a", "us-central1-a", "1" */
  char shape[CLOUD_NAME_LEN];  /* instance type, machine type, VM size */
  int spot;
  int64_t launched_ms;         /* 0 when not said */
  char instance[CLOUD_NAME_LEN]; /* CLOUD_TAG_INSTANCE's value, or "" */
  char node[CLOUD_NAME_LEN];     /* CLOUD_TAG_NODE's value, or "" */
  char name[CLOUD_NAME_LEN];     /* the value of the tag cloud_env's
                                    name_tag names, or "" (none asked
                                    for, none there, or too long) */
  char address[CLOUD_ADDR_LEN];  /* its private address, or "" */
  char end_reason[CLOUD_NAME_LEN]; /* a provider's word for why it
                                      ended (spot), or "" */
  int lingers;                 /* GONE, yet its resources are still there
                                  (a failed Azure VM, a stopped EC2
                                  one): it must still be deleted */
};

/* What a refusal means to the pool: what to do next. */
enum cloud_refusal {
  CLOUD_REFUSED_OTHER = 0, /* a mistake of ours or the config's: shown,
                              not retried blindly */
  CLOUD_REFUSED_CAPACITY,  /* none of that shape in that zone now: try
                              the next zone, then the next shape */
  CLOUD_REFUSED_QUOTA,     /* over the account's quota: next shape, then
                              back off the site */
  CLOUD_REFUSED_THROTTLE,  /* too many requests: back off, retry */
  CLOUD_REFUSED_AUTH,      /* credentials refused */
  CLOUD_REFUSED_NOT_FOUND, /* no such VM (a delete of a gone one is done) */
  CLOUD_REFUSED_TRANSIENT  /* a 5xx that says nothing more: retry */
};

#endif
