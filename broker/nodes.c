/*
 * The nodes of elastic sites, on the broker's side: the node store the
 * VM-pool adapters record their decisions through (adapter.h), the node
 * agents' tokens, and the agents' calls routed to their site.
 *
 * A node's token is HMAC-SHA256(node key, "tenbin-node:" id), the key
 * being 32 random bytes in STATE/node.key (mode 0600, made at first
 * open).  So a launch resent after a crash carries the same startup
 * script (EC2 refuses a ClientToken reused with other parameters), and
 * yet the database holds only the token's SHA-256: a copy of it lets no
 * one act as a node.  A token is good while its node has not ended.
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker_internal.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/hash.h"
#include "util/secret.h"
#include "util/timeutil.h"

#define NODE_KEY_FILE "node.key"
#define NODE_TOKEN_PREFIX "tbnode_"

int
broker__nodes_open(struct broker *b, struct err *e)
{
  struct buf path;
  char *text = NULL;
  size_t len = 0;
  int rc;

  buf_init(&path, 8192);
  rc = buf_addf(&path, "%s/%s", b->state_dir, NODE_KEY_FILE);
  if (rc < 0)
    goto out;
  rc = secret_read_file(buf_str(&path), SECRET_FIRST_LINE, &text, &len, e);
  if (rc == ERR_NOT_FOUND) {
    char key[NODE_KEY_LEN];

    rc = hash_random_token("", key, sizeof(key));
    if (rc == 0)
      rc = file_write_atomic(b->state_dir, NODE_KEY_FILE, key, strlen(key),
                             0600, e);
    if (rc == 0)
      memcpy(b->node_key, key, sizeof(key));
    OPENSSL_cleanse(key, sizeof(key));
    goto out;
  }
  if (rc < 0)
    goto out;
  if (len < 32 || len >= sizeof(b->node_key))
    rc = err_set(e, ERR_CONFIG, "%s: not a node key (32 to %zu characters)",
                 buf_str(&path), sizeof(b->node_key) - 1);
  else
    memcpy(b->node_key, text, len + 1);
out:
  secret_free(text);
  buf_release(&path);
  return rc;
}

void
broker__derive_token(const struct broker *b, const char *label, int64_t id,
                     const char *prefix, char *out, size_t outlen)
{
  unsigned char mac[32];
  unsigned int maclen = sizeof(mac);
  char msg[64], hex[65];

  snprintf(msg, sizeof(msg), "%s%" PRId64, label, id);
  HMAC(EVP_sha256(), b->node_key, (int)strlen(b->node_key),
       (const unsigned char *)msg, strlen(msg), mac, &maclen);
  hash_hex(mac, sizeof(mac), hex);
  snprintf(out, outlen, "%s%s", prefix, hex);
  OPENSSL_cleanse(mac, sizeof(mac));
}

static void
node_token(const struct broker *b, int64_t id, char *out, size_t outlen)
{
  broker__derive_token(b, "tenbin-node:", id, NODE_TOKEN_PREFIX, out,
                       outlen);
}

/* ---- the store the adapters record through (adapter_env.nodes) ---- */

static void
row_of(const struct site *s, const struct adapter_node *n, struct db_node *r)
{
  *r = (struct db_node){.id = n->id,
                        .site = s->name,
                        .shape = n->shape,
                        .zone = n->zone,
                        .spot = n->spot,
                        .attempt = n->attempt,
                        .state = n->state,
                        .vm_id = n->vm_id,
                        .gpus = n->gpus,
                        .gpu_type = n->gpu_type,
                        .price_micro = n->price_micro,
                        .created_ms = n->created_ms,
                        .launched_ms = n->launched_ms,
                        .registered_ms = n->registered_ms,
                        .seen_ms = n->seen_ms,
                        .ended_ms = n->ended_ms,
                        .reason = n->reason,
                        .idle_gpus = n->idle_gpus,
                        .idle_from_ms = n->idle_from_ms};
}

static int
store_create(void *arg, struct adapter_node *n, char *token, size_t tokenlen,
             struct err *e)
{
  struct site *s = arg;
  struct broker *b = s->broker;
  struct db_node r;
  char hash[65];
  int rc;

  row_of(s, n, &r);
  rc = db_begin(b->db, e);
  if (rc < 0)
    return rc;
  rc = db_node_insert(b->db, &r, e);
  if (rc == 0) {
    node_token(b, r.id, token, tokenlen);
    hash_sha256_hex(token, strlen(token), hash);
    rc = db_node_set_token(b->db, r.id, hash, e);
  }
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0) {
    db_rollback(b->db);
    memset(token, 0, tokenlen);
    return rc;
  }
  n->id = r.id;
  return 0;
}

static int
store_update(void *arg, const struct adapter_node *n, struct err *e)
{
  struct site *s = arg;
  struct db_node r;

  row_of(s, n, &r);
  return db_node_update(s->broker->db, &r, e);
}

struct list_arg {
  adapter_node_cb cb;
  void *cb_arg;
};

static int
visit_row(const struct db_node *r, void *arg)
{
  struct list_arg *la = arg;
  const struct adapter_node n = {.id = r->id,
                                 .shape = r->shape,
                                 .zone = r->zone,
                                 .spot = r->spot,
                                 .attempt = r->attempt,
                                 .state = r->state,
                                 .vm_id = r->vm_id,
                                 .gpus = r->gpus,
                                 .gpu_type = r->gpu_type,
                                 .price_micro = r->price_micro,
                                 .created_ms = r->created_ms,
                                 .launched_ms = r->launched_ms,
                                 .registered_ms = r->registered_ms,
                                 .seen_ms = r->seen_ms,
                                 .ended_ms = r->ended_ms,
                                 .reason = r->reason,
                                 .idle_gpus = r->idle_gpus,
                                 .idle_from_ms = r->idle_from_ms};

  return la->cb(&n, la->cb_arg);
}

static int
store_list(void *arg, adapter_node_cb cb, void *cb_arg, struct err *e)
{
  struct site *s = arg;
  struct list_arg la = {cb, cb_arg};

  return db_node_list(s->broker->db, s->name, INT64_MAX, visit_row, &la, e);
}

static int
store_token(void *arg, int64_t id, char *token, size_t tokenlen,
            struct err *e)
{
  struct site *s = arg;

  (void)e;
  node_token(s->broker, id, token, tokenlen);
  return 0;
}

static int
store_bill_idle(void *arg, const struct adapter_node *n, int64_t from_ms,
                int64_t to_ms, int64_t gpus, struct err *e)
{
  struct site *s = arg;
  struct broker *b = s->broker;
  struct db_node r;
  int rc;

  row_of(s, n, &r);
  rc = db_begin(b->db, e);
  if (rc == 0 && gpus > 0 && to_ms > from_ms)
    rc = broker__ledger_idle(b, s->name, n->id, n->gpu_type, gpus, from_ms,
                             to_ms, e);
  if (rc == 0)
    rc = db_node_update(b->db, &r, e);
  if (rc == 0)
    rc = db_commit(b->db, e);
  if (rc < 0)
    db_rollback(b->db);
  return rc;
}

const struct adapter_node_store broker__node_store = {
    .create = store_create,
    .update = store_update,
    .list = store_list,
    .token = store_token,
    .bill_idle = store_bill_idle,
};

/* ---- the node agents' calls ---- */

struct found {
  int64_t id;
  int64_t ended_ms;
  char site[SITE_NAME_LEN];
};

static int
take_node(const struct db_node *n, void *arg)
{
  struct found *f = arg;

  f->id = n->id;
  f->ended_ms = n->ended_ms;
  snprintf(f->site, sizeof(f->site), "%s", n->site);
  return 0;
}

/* The site and node id that token belongs to; ERR_UNAUTHORIZED for a
 * token of no node, or of one that has ended (a token is not reused). */
static int
node_of(struct broker *b, const char *token, struct site **site,
        int64_t *id, struct err *e)
{
  struct found f = {0};
  char hash[65];
  int found = 0, rc;

  if (token == NULL || strncmp(token, NODE_TOKEN_PREFIX,
                               strlen(NODE_TOKEN_PREFIX)) != 0)
    return err_set(e, ERR_UNAUTHORIZED, "not a node token");
  hash_sha256_hex(token, strlen(token), hash);
  rc = db_node_by_token(b->db, hash, take_node, &f, &found, e);
  if (rc < 0)
    return rc;
  if (!found)
    return err_set(e, ERR_UNAUTHORIZED, "invalid node token");
  if (f.ended_ms != 0)
    return err_set(e, ERR_UNAUTHORIZED, "node %" PRId64 " has ended", f.id);
  *site = broker__site(b, f.site);
  if (*site == NULL || (*site)->ctx == NULL ||
      (*site)->ops->node_heartbeat == NULL)
    return err_set(e, ERR_UNAUTHORIZED, "node %" PRId64 "'s site '%s' is "
                   "not configured", f.id, f.site);
  *id = f.id;
  return 0;
}

int
broker_node_heartbeat(struct broker *b, const char *token, const json_t *req,
                      json_t **answer, struct err *e)
{
  struct site *s;
  int64_t id;
  int rc = node_of(b, token, &s, &id, e);

  if (rc < 0)
    return rc;
  return s->ops->node_heartbeat(s->ctx, id, req, answer, e);
}

int
broker_node_log(struct broker *b, const char *token, int64_t job_id,
                int64_t offset, const char *data, size_t len, int64_t *size,
                struct err *e)
{
  struct site *s;
  int64_t id;
  int rc = node_of(b, token, &s, &id, e);

  if (rc < 0)
    return rc;
  return s->ops->node_log(s->ctx, id, job_id, offset, data, len, size, e);
}

/* ---- what operators see ---- */

struct view_arg {
  struct broker *b;
  node_view_cb cb;
  void *arg;
  int64_t now;
};

/* What node r cost so far: its uptime at its site's on-demand rate for
 * its GPU type now, or -1 when the site does not rent it. */
static int64_t
node_cost(struct broker *b, const struct db_node *r, int64_t uptime_ms)
{
  const struct site *s = broker__site(b, r->site);

  if (s == NULL || s->cost.kind != SITE_RENTED || r->gpu_type == NULL)
    return -1;
  for (size_t i = 0; i < s->cost.nrented; i++)
    if (strcmp(s->cost.rented[i].gpu_type, r->gpu_type) == 0)
      return price_charge(s->cost.rented[i].per_gpu_hour_micro, r->gpus,
                          uptime_ms);
  return -1;
}

static int
visit_view(const struct db_node *r, void *arg)
{
  struct view_arg *va = arg;
  int64_t up = r->launched_ms == 0 ? 0
               : (r->ended_ms != 0 ? r->ended_ms : va->now) -
                     r->launched_ms;
  const struct node_view v = {
      .id = r->id,
      .site = r->site,
      .shape = r->shape,
      .zone = r->zone,
      .spot = r->spot,
      .state = r->state,
      .vm_id = r->vm_id,
      .gpus = r->gpus,
      .gpu_type = r->gpu_type,
      .created_ms = r->created_ms,
      .launched_ms = r->launched_ms,
      .registered_ms = r->registered_ms,
      .ended_ms = r->ended_ms,
      .uptime_ms = up,
      .cost_micro = node_cost(va->b, r, up),
      .reason = r->reason};

  return va->cb(&v, va->arg);
}

int
broker_node_list(struct broker *b, const char *site, int64_t ended_since_ms,
                 node_view_cb cb, void *arg, struct err *e)
{
  struct view_arg va = {b, cb, arg, time_now_ms()};

  return db_node_list(b->db, site, ended_since_ms, visit_view, &va, e);
}
