/*
 * EC2 Query API bodies and answers (aws_ec2.h).
 *
 * An answer is read in one pass with expat, tracking the path of element
 * names: an instance is an <item> whose parent is <instancesSet> (in
 * RunInstances and TerminateInstances directly under the root, in
 * DescribeInstances under reservationSet/item), its tags the
 * <tagSet><item> under it.  Namespaces are not compared (moto leaves off
 * the trailing '/' AWS writes).
 */
#include "adapters/aws_ec2.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/form.h"
#include "util/alloc.h"

/* Deeper than any answer of these calls nests. */
#define EC2_MAX_DEPTH 24
#define EC2_NAME_LEN 40
/* The text of one element, cut beyond this. */
#define EC2_TEXT_MAX 4096

static int
action(struct buf *body, const char *op)
{
  int rc = form_add(body, "Action", op);

  if (rc == 0)
    rc = form_add(body, "Version", EC2_API_VERSION);
  return rc;
}

int
ec2_run_instances(const struct ec2_launch *l, struct buf *body)
{
  int rc = action(body, "RunInstances");

  if (rc == 0)
    rc = form_add(body, "ImageId", l->image);
  if (rc == 0)
    rc = form_add(body, "InstanceType", l->type);
  if (rc == 0)
    rc = form_add(body, "MinCount", "1");
  if (rc == 0)
    rc = form_add(body, "MaxCount", "1");
  if (rc == 0)
    rc = form_add(body, "ClientToken", l->client_token);
  if (rc == 0 && l->zone != NULL)
    rc = form_add(body, "Placement.AvailabilityZone", l->zone);
  if (rc == 0 && l->subnet != NULL)
    rc = form_add(body, "SubnetId", l->subnet);
  for (int i = 0; rc == 0 && i < l->nsecurity_groups; i++) {
    char name[32];

    snprintf(name, sizeof(name), "SecurityGroupId.%d", i + 1);
    rc = form_add(body, name, l->security_groups[i]);
  }
  if (rc == 0 && l->iam_profile != NULL)
    rc = form_add(body, "IamInstanceProfile.Name", l->iam_profile);
  if (rc == 0 && l->key_name != NULL)
    rc = form_add(body, "KeyName", l->key_name);
  if (rc == 0 && l->user_data != NULL)
    rc = form_add(body, "UserData", l->user_data);
  if (rc == 0 && l->spot) {
    rc = form_add(body, "InstanceMarketOptions.MarketType", "spot");
    if (rc == 0)
      rc = form_add(body,
                        "InstanceMarketOptions.SpotOptions.SpotInstanceType",
                        "one-time");
    if (rc == 0)
      rc = form_add(body,
                        "InstanceMarketOptions.SpotOptions."
                        "InstanceInterruptionBehavior",
                        "terminate");
  }
  if (rc == 0 && l->ntags > 0)
    rc = form_add(body, "TagSpecification.1.ResourceType", "instance");
  for (int i = 0; rc == 0 && i < l->ntags; i++) {
    char name[64];

    snprintf(name, sizeof(name), "TagSpecification.1.Tag.%d.Key", i + 1);
    rc = form_add(body, name, l->tags[i].key);
    snprintf(name, sizeof(name), "TagSpecification.1.Tag.%d.Value", i + 1);
    if (rc == 0)
      rc = form_add(body, name, l->tags[i].value);
  }
  return rc;
}

int
ec2_describe_tagged(const char *tag_key, const char *tag_value,
                    int max_results, const char *next_token,
                    struct buf *body)
{
  static const char *const live[] = {"pending", "running", "shutting-down",
                                     "stopping", "stopped"};
  int rc = action(body, "DescribeInstances");

  if (rc == 0 && tag_value != NULL) {
    rc = form_addf(body, "Filter.1.Name", "tag:%s", tag_key);
    if (rc == 0)
      rc = form_add(body, "Filter.1.Value.1", tag_value);
  } else if (rc == 0) {
    rc = form_add(body, "Filter.1.Name", "tag-key");
    if (rc == 0)
      rc = form_add(body, "Filter.1.Value.1", tag_key);
  }
  if (rc == 0)
    rc = form_add(body, "Filter.2.Name", "instance-state-name");
  for (size_t i = 0; rc == 0 && i < sizeof(live) / sizeof(live[0]); i++) {
    char name[32];

    snprintf(name, sizeof(name), "Filter.2.Value.%zu", i + 1);
    rc = form_add(body, name, live[i]);
  }
  if (rc == 0)
    rc = form_addf(body, "MaxResults", "%d", max_results);
  if (rc == 0 && next_token != NULL && next_token[0] != '\0')
    rc = form_add(body, "NextToken", next_token);
  return rc;
}

int
ec2_terminate_instances(const char *const *ids, size_t n, struct buf *body)
{
  int rc = action(body, "TerminateInstances");

  for (size_t i = 0; rc == 0 && i < n; i++) {
    char name[32];

    snprintf(name, sizeof(name), "InstanceId.%zu", i + 1);
    rc = form_add(body, name, ids[i]);
  }
  return rc;
}

/* ---- answers ---- */

struct reader {
  XML_Parser p;
  struct ec2_answer *a;
  char path[EC2_MAX_DEPTH][EC2_NAME_LEN];
  int depth;                /* elements open */
  int inst_depth;           /* depth of the open instance <item>, or -1 */
  int tag_open;             /* a tag <item> of the instance is open */
  int errors;               /* <Error> elements seen */
  char text[EC2_TEXT_MAX];
  size_t text_len;
  const char *why;          /* what made the answer unreadable */
};

/* The element i levels up from the innermost (0), or "". */
static const char *
up(const struct reader *r, int i)
{
  return r->depth - 1 - i >= 0 ? r->path[r->depth - 1 - i] : "";
}

static struct ec2_instance *
current(struct reader *r)
{
  struct ec2_answer *a = r->a;

  if (r->inst_depth < 0 || a->n == 0 || a->nout > a->n)
    return NULL;
  return &a->instances[a->n - 1];
}

static void XMLCALL
on_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
  struct reader *r = arg;
  struct ec2_instance *in;

  (void)attrs;
  if (r->depth == EC2_MAX_DEPTH) {
    r->why = "nested too deep";
    XML_StopParser(r->p, XML_FALSE);
    return;
  }
  snprintf(r->path[r->depth++], EC2_NAME_LEN, "%s", name);
  r->text_len = 0;
  if (r->depth == 1) {
    size_t len = strlen(name);

    if (len < 8 || strcmp(name + len - 8, "Response") != 0) {
      r->why = "not an EC2 answer (its root is no ...Response)";
      XML_StopParser(r->p, XML_FALSE);
    }
    return;
  }
  if (strcmp(name, "item") == 0 && strcmp(up(r, 1), "instancesSet") == 0 &&
      r->inst_depth < 0) {
    r->inst_depth = r->depth;
    r->a->nout++;
    if (r->a->n < r->a->max) {
      in = &r->a->instances[r->a->n++];
      memset(in, 0, sizeof(*in));
      in->state_code = -1;
    }
    return;
  }
  in = current(r);
  if (in != NULL && strcmp(name, "item") == 0 &&
      strcmp(up(r, 1), "tagSet") == 0 && r->depth == r->inst_depth + 2) {
    r->tag_open = in->ntags < EC2_MAX_TAGS;
    if (r->tag_open)
      memset(&in->tags[in->ntags++], 0, sizeof(in->tags[0]));
  }
  if (strcmp(name, "Error") == 0)
    r->errors++;
}

static void XMLCALL
on_text(void *arg, const XML_Char *s, int len)
{
  struct reader *r = arg;
  size_t room = sizeof(r->text) - 1 - r->text_len;
  size_t n = len > 0 ? (size_t)len : 0;

  if (n > room)
    n = room;
  memcpy(r->text + r->text_len, s, n);
  r->text_len += n;
}

/* The element's text into a field of size n (cut to fit). */
static void
take(const struct reader *r, char *field, size_t n)
{
  snprintf(field, n, "%.*s", (int)r->text_len, r->text);
}

/* An instance's own field, named by the element and its parent. */
static void
instance_field(struct reader *r, struct ec2_instance *in, const char *name)
{
  const char *parent = up(r, 1);
  int own = r->depth == r->inst_depth + 1;

  if (own && strcmp(name, "instanceId") == 0)
    take(r, in->id, sizeof(in->id));
  else if (own && strcmp(name, "instanceType") == 0)
    take(r, in->type, sizeof(in->type));
  else if (own && strcmp(name, "instanceLifecycle") == 0)
    in->spot = r->text_len == 4 && memcmp(r->text, "spot", 4) == 0;
  else if (own && strcmp(name, "launchTime") == 0)
    take(r, in->launch_time, sizeof(in->launch_time));
  else if (own && strcmp(name, "clientToken") == 0)
    take(r, in->client_token, sizeof(in->client_token));
  else if (own && strcmp(name, "privateIpAddress") == 0)
    take(r, in->private_ip, sizeof(in->private_ip));
  else if (r->depth == r->inst_depth + 2 &&
           (strcmp(parent, "instanceState") == 0 ||
            strcmp(parent, "currentState") == 0)) {
    if (strcmp(name, "code") == 0) {
      char code[16];

      take(r, code, sizeof(code));
      in->state_code = (int)(strtol(code, NULL, 10) & 0xff);
    } else if (strcmp(name, "name") == 0) {
      take(r, in->state, sizeof(in->state));
    }
  } else if (r->depth == r->inst_depth + 2 &&
             strcmp(parent, "placement") == 0 &&
             strcmp(name, "availabilityZone") == 0) {
    take(r, in->zone, sizeof(in->zone));
  } else if (r->depth == r->inst_depth + 2 &&
             strcmp(parent, "stateReason") == 0 &&
             strcmp(name, "code") == 0) {
    take(r, in->state_reason, sizeof(in->state_reason));
  } else if (r->tag_open && r->depth == r->inst_depth + 3 &&
             strcmp(parent, "item") == 0 && in->ntags > 0) {
    struct ec2_tag *t = &in->tags[in->ntags - 1];

    if (strcmp(name, "key") == 0)
      take(r, t->key, sizeof(t->key));
    else if (strcmp(name, "value") == 0)
      take(r, t->value, sizeof(t->value));
  }
}

/* 1 when a tag of key is one the caller keeps. */
static int
wanted(const struct ec2_answer *a, const char *key)
{
  if (a->keep == NULL)
    return 1;
  for (size_t i = 0; i < a->nkeep; i++) {
    if (a->keep[i] != NULL && strcmp(a->keep[i], key) == 0)
      return 1;
  }
  return 0;
}

static void XMLCALL
on_end(void *arg, const XML_Char *name)
{
  struct reader *r = arg;
  struct ec2_instance *in = current(r);

  if (in != NULL && r->depth > r->inst_depth)
    instance_field(r, in, name);
  if (r->depth == 2 && strcmp(name, "nextToken") == 0)
    take(r, r->a->next_token, sizeof(r->a->next_token));
  if (r->errors == 1 && strcmp(up(r, 1), "Error") == 0) {
    if (strcmp(name, "Code") == 0)
      take(r, r->a->error_code, sizeof(r->a->error_code));
    else if (strcmp(name, "Message") == 0)
      take(r, r->a->error_message, sizeof(r->a->error_message));
  }
  if (strcmp(name, "item") == 0 && r->tag_open &&
      r->depth == r->inst_depth + 2) {
    r->tag_open = 0;
    if (in != NULL && in->ntags > 0 &&
        !wanted(r->a, in->tags[in->ntags - 1].key))
      in->ntags--;
  }
  if (r->depth == r->inst_depth)
    r->inst_depth = -1;
  r->depth--;
  r->text_len = 0;
}

int
ec2_parse(const char *xml, size_t len, struct ec2_answer *a, struct err *e)
{
  struct reader *r = xcalloc(1, sizeof(*r));
  int rc = 0;

  a->n = a->nout = 0;
  a->next_token[0] = a->error_code[0] = a->error_message[0] = '\0';
  r->a = a;
  r->inst_depth = -1;
  /* No namespace processing, no entities from a DTD (expat expands
   * none it was not given). */
  r->p = XML_ParserCreate("UTF-8");
  if (r->p == NULL) {
    free(r);
    return err_set(e, ERR_NOMEM, "reading an EC2 answer");
  }
  XML_SetUserData(r->p, r);
  XML_SetElementHandler(r->p, on_start, on_end);
  XML_SetCharacterDataHandler(r->p, on_text);
  if (len > INT32_MAX ||
      XML_Parse(r->p, xml, (int)len, XML_TRUE) != XML_STATUS_OK) {
    rc = err_set(e, ERR_SITE, "EC2 answered what is not XML it speaks: %s",
                 r->why != NULL ? r->why
                                : XML_ErrorString(XML_GetErrorCode(r->p)));
  } else if (a->error_code[0] != '\0') {
    rc = err_set(e, ERR_SITE, "EC2: %s: %.300s", a->error_code,
                 a->error_message);
  }
  XML_ParserFree(r->p);
  free(r);
  return rc;
}

static int
in_list(const char *code, const char *const *list, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (strcmp(code, list[i]) == 0)
      return 1;
  }
  return 0;
}

int
ec2_is_capacity_error(const char *code)
{
  static const char *const list[] = {
      "InsufficientInstanceCapacity", "InsufficientHostCapacity",
      "InsufficientReservedInstanceCapacity", "InsufficientCapacity",
      "MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow",
      "UnfulfillableCapacity", "Unsupported"};

  return in_list(code, list, sizeof(list) / sizeof(list[0]));
}

int
ec2_is_throttle_error(const char *code)
{
  static const char *const list[] = {
      "RequestLimitExceeded", "EC2ThrottledException", "Throttling",
      "ThrottlingException", "RequestThrottled", "RequestTimeout",
      "PriorRequestNotComplete"};

  return in_list(code, list, sizeof(list) / sizeof(list[0]));
}

enum cloud_refusal
ec2_refusal(const char *code, int status)
{
  static const char *const quota[] = {"VcpuLimitExceeded",
                                      "InstanceLimitExceeded",
                                      "MaxSpotInstanceCountExceeded"};
  static const char *const auth[] = {"AuthFailure", "UnauthorizedOperation",
                                     "SignatureDoesNotMatch",
                                     "IncompleteSignature",
                                     "InvalidClientTokenId", "RequestExpired"};

  if (code != NULL && code[0] != '\0') {
    /* Checked before capacity: EC2 and ParallelCluster both list the spot
     * count limit as "no capacity", but it is the account's. */
    if (in_list(code, quota, sizeof(quota) / sizeof(quota[0])))
      return CLOUD_REFUSED_QUOTA;
    if (ec2_is_capacity_error(code))
      return CLOUD_REFUSED_CAPACITY;
    if (ec2_is_throttle_error(code))
      return CLOUD_REFUSED_THROTTLE;
    if (in_list(code, auth, sizeof(auth) / sizeof(auth[0])))
      return CLOUD_REFUSED_AUTH;
    if (strcmp(code, "InvalidInstanceID.NotFound") == 0)
      return CLOUD_REFUSED_NOT_FOUND;
  }
  if (status == 401 || status == 403)
    return CLOUD_REFUSED_AUTH;
  if (status == 503)
    return CLOUD_REFUSED_THROTTLE;
  if (status >= 500)
    return CLOUD_REFUSED_TRANSIENT;
  return CLOUD_REFUSED_OTHER;
}
