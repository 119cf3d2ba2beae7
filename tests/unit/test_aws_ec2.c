/*
 * adapters/aws_ec2: request bodies as the EC2 Query API spells them (a
 * RunInstances built here is the body botocore signed in
 * tests/data/sigv4, and signs to the same header), and answers read from
 * the XML shapes AWS and moto send (shared/research/cloud-contracts.md
 * 1.4-1.7), hostile ones included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "adapters/aws_ec2.h"
#include "adapters/sigv4.h"

static const char run_answer[] =
    "<RunInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/"
    "2016-11-15/\">\n"
    " <requestId>r1</requestId><reservationId>r-2deb934f43afa7fd4"
    "</reservationId><ownerId>123456789012</ownerId><groupSet/>\n"
    " <instancesSet><item>\n"
    "  <instanceId>i-1009b52c6fa280295</instanceId><imageId>ami-03cf127a"
    "</imageId>\n"
    "  <instanceState><code>0</code><name>pending</name></instanceState>\n"
    "  <instanceType>p5.48xlarge</instanceType><launchTime>"
    "2026-11-21T13:47:52.000Z</launchTime>\n"
    "  <placement><availabilityZone>us-east-1a</availabilityZone>"
    "<groupName/><tenancy>default</tenancy></placement>\n"
    "  <groupSet><item><groupId>sg-1</groupId></item></groupSet>\n"
    "  <instanceLifecycle>spot</instanceLifecycle><clientToken>"
    "job-42-attempt-1</clientToken>\n"
    "  <tagSet><item><key>gpujob</key><value>job-42</value></item>"
    "<item><key>owner</key><value>sched</value></item></tagSet>\n"
    "  <stateReason><code/><message/></stateReason>\n"
    " </item></instancesSet>\n"
    "</RunInstancesResponse>\n";

static void
test_run_instances_body_is_what_botocore_signed(void **state)
{
  const struct ec2_tag tags[] = {{"gpujob", "job-42"}};
  const struct ec2_launch l = {.image = "ami-0123456789abcdef0",
                               .type = "p5.48xlarge",
                               .client_token = "job-42-attempt-1",
                               .spot = 1,
                               .tags = tags,
                               .ntags = 1};
  const struct sigv4_header h[] = {
      {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
      {"Host", "ec2.us-east-1.amazonaws.com"},
      {"X-Amz-Date", "20150830T123600Z"}};
  const struct sigv4_key k = {"AKIDEXAMPLE",
                              "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                              "us-east-1", "ec2"};
  struct sigv4_request r = {"POST", "/", NULL, h, 3, NULL, 0};
  struct buf body, authz;

  (void)state;
  buf_init(&body, 65536);
  buf_init(&authz, 4096);
  assert_int_equal(ec2_run_instances(&l, &body), 0);
  assert_string_equal(
      buf_str(&body),
      "Action=RunInstances&Version=2016-11-15&ImageId=ami-0123456789abcdef0"
      "&InstanceType=p5.48xlarge&MinCount=1&MaxCount=1"
      "&ClientToken=job-42-attempt-1&InstanceMarketOptions.MarketType=spot"
      "&InstanceMarketOptions.SpotOptions.SpotInstanceType=one-time"
      "&InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior="
      "terminate&TagSpecification.1.ResourceType=instance"
      "&TagSpecification.1.Tag.1.Key=gpujob"
      "&TagSpecification.1.Tag.1.Value=job-42");
  r.body = body.data;
  r.body_len = body.len;
  assert_int_equal(sigv4_authorization(&r, &k, "20150830T123600Z", &authz),
                   0);
  assert_string_equal(buf_str(&authz),
                      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/"
                      "us-east-1/ec2/aws4_request, SignedHeaders=content-type;"
                      "host;x-amz-date, Signature=a13c4d2349ac00e599c6a50135"
                      "2abcb33c5deb31a4791d3c468b9236cf5d0cc2");
  buf_release(&body);
  buf_release(&authz);
}

static void
test_describe_and_terminate_bodies_spell_filters_and_lists(void **state)
{
  const char *ids[] = {"i-1", "i-2"};
  struct buf b;

  (void)state;
  buf_init(&b, 65536);
  assert_int_equal(ec2_describe_tagged("tenbin:instance", "ab12", 1000,
                                       "tok/1", &b),
                   0);
  assert_string_equal(
      buf_str(&b),
      "Action=DescribeInstances&Version=2016-11-15"
      "&Filter.1.Name=tag%3Atenbin%3Ainstance&Filter.1.Value.1=ab12"
      "&Filter.2.Name=instance-state-name&Filter.2.Value.1=pending"
      "&Filter.2.Value.2=running&Filter.2.Value.3=shutting-down"
      "&Filter.2.Value.4=stopping&Filter.2.Value.5=stopped"
      "&MaxResults=1000&NextToken=tok%2F1");
  buf_reset(&b);
  assert_int_equal(ec2_terminate_instances(ids, 2, &b), 0);
  assert_string_equal(buf_str(&b), "Action=TerminateInstances&Version="
                                   "2016-11-15&InstanceId.1=i-1"
                                   "&InstanceId.2=i-2");
  buf_release(&b);
}

static void
test_run_answer_gives_the_instance_its_state_zone_and_tags(void **state)
{
  struct ec2_instance in[2];
  struct ec2_answer a = {.instances = in, .max = 2};
  struct err e = {0};

  (void)state;
  assert_int_equal(ec2_parse(run_answer, strlen(run_answer), &a, &e), 0);
  assert_int_equal(a.n, 1);
  assert_string_equal(in[0].id, "i-1009b52c6fa280295");
  assert_int_equal(in[0].state_code, 0);
  assert_string_equal(in[0].state, "pending");
  assert_string_equal(in[0].type, "p5.48xlarge");
  assert_string_equal(in[0].zone, "us-east-1a");
  assert_true(in[0].spot);
  assert_string_equal(in[0].client_token, "job-42-attempt-1");
  assert_string_equal(in[0].launch_time, "2026-11-21T13:47:52.000Z");
  /* the security group's item is not a tag */
  assert_int_equal(in[0].ntags, 2);
  assert_string_equal(in[0].tags[0].key, "gpujob");
  assert_string_equal(in[0].tags[0].value, "job-42");
  assert_string_equal(in[0].tags[1].key, "owner");
  assert_string_equal(a.next_token, "");
}

static void
test_describe_answer_pages_through_reservations(void **state)
{
  static const char xml[] =
      "<DescribeInstancesResponse xmlns=\"x\"><requestId/><reservationSet>"
      "<item><reservationId>r-1</reservationId><instancesSet>"
      "<item><instanceId>i-a</instanceId><instanceState><code>16</code>"
      "<name>running</name></instanceState></item>"
      "<item><instanceId>i-b</instanceId><instanceState><code>48</code>"
      "<name>terminated</name></instanceState><stateReason><code>"
      "Server.SpotInstanceTermination</code></stateReason></item>"
      "</instancesSet></item>"
      "<item><instancesSet><item><instanceId>i-c</instanceId></item>"
      "</instancesSet></item></reservationSet>"
      "<nextToken>r-1</nextToken></DescribeInstancesResponse>";
  struct ec2_instance in[2];
  struct ec2_answer a = {.instances = in, .max = 2};
  struct err e = {0};

  (void)state;
  assert_int_equal(ec2_parse(xml, strlen(xml), &a, &e), 0);
  /* three in the answer, two kept: the count says more were there */
  assert_int_equal(a.nout, 3);
  assert_int_equal(a.n, 2);
  assert_string_equal(in[0].id, "i-a");
  assert_int_equal(in[0].state_code, 16);
  assert_string_equal(in[1].state_reason, "Server.SpotInstanceTermination");
  assert_false(in[1].spot);
  assert_string_equal(a.next_token, "r-1");
}

static void
test_terminate_answer_reads_the_current_state(void **state)
{
  static const char xml[] =
      "<TerminateInstancesResponse><requestId/><instancesSet><item>"
      "<instanceId>i-1</instanceId><currentState><code>32</code>"
      "<name>shutting-down</name></currentState><previousState><code>16"
      "</code><name>running</name></previousState></item></instancesSet>"
      "</TerminateInstancesResponse>";
  struct ec2_instance in[1];
  struct ec2_answer a = {.instances = in, .max = 1};
  struct err e = {0};

  (void)state;
  assert_int_equal(ec2_parse(xml, strlen(xml), &a, &e), 0);
  assert_int_equal(in[0].state_code, 32);
  assert_string_equal(in[0].state, "shutting-down");
}

static void
test_an_error_answer_gives_its_code_and_kind(void **state)
{
  static const char xml[] =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>"
      "<Code>InsufficientInstanceCapacity</Code><Message>We currently do "
      "not have sufficient p5.48xlarge capacity in the Availability Zone "
      "you requested (us-east-1a).</Message></Error></Errors><RequestID>"
      "ea96</RequestID></Response>";
  struct ec2_answer a = {0};
  struct err e = {0};

  (void)state;
  assert_int_equal(ec2_parse(xml, strlen(xml), &a, &e), ERR_SITE);
  assert_string_equal(a.error_code, "InsufficientInstanceCapacity");
  assert_non_null(strstr(e.msg, "InsufficientInstanceCapacity: We "
                                "currently do not have"));
  assert_true(ec2_is_capacity_error(a.error_code));
  assert_false(ec2_is_throttle_error(a.error_code));
  assert_true(ec2_is_throttle_error("RequestLimitExceeded"));
  assert_false(ec2_is_capacity_error("InvalidParameterValue"));
}

static void
test_what_is_no_ec2_answer_is_an_error_saying_why(void **state)
{
  char deep[2048];
  size_t n;
  struct ec2_instance in[1];
  struct ec2_answer a = {.instances = in, .max = 1};
  struct err e = {0};

  (void)state;
  assert_int_equal(ec2_parse("{\"json\": 1}", 11, &a, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "not XML"));
  assert_int_equal(ec2_parse("<html><body/></html>", 20, &a, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "not an EC2 answer"));
  assert_int_equal(ec2_parse("<XResponse><a>", 14, &a, &e), ERR_SITE);
  n = (size_t)snprintf(deep, sizeof(deep), "<XResponse>");
  for (int i = 0; i < 40; i++)
    n += (size_t)snprintf(deep + n, sizeof(deep) - n, "<a>");
  assert_int_equal(ec2_parse(deep, strlen(deep), &a, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "nested too deep"));
  assert_int_equal(ec2_parse("", 0, &a, &e), ERR_SITE);
}

/* A ParallelCluster compute instance as DescribeInstances lists it: a
 * dozen tags, more than an instance keeps, the one wanted last. */
static void
test_only_the_tags_asked_for_take_room_and_the_address_is_read(void **state)
{
  struct ec2_instance in[1];
  const char *keep[] = {"tenbin-node", "Name"};
  struct ec2_answer a = {.instances = in, .max = 1};
  struct err e = {0};
  char xml[8192];
  size_t len;

  (void)state;
  len = (size_t)snprintf(xml, sizeof(xml),
                         "<DescribeInstancesResponse><reservationSet><item>"
                         "<instancesSet><item><instanceId>i-0c1"
                         "</instanceId><privateIpAddress>10.0.3.17"
                         "</privateIpAddress><networkInterfaceSet><item>"
                         "<privateIpAddress>10.0.9.9</privateIpAddress>"
                         "</item></networkInterfaceSet><tagSet>");
  for (int i = 0; i < 12; i++)
    len += (size_t)snprintf(xml + len, sizeof(xml) - len,
                            "<item><key>parallelcluster:t%d</key><value>v"
                            "</value></item>", i);
  len += (size_t)snprintf(xml + len, sizeof(xml) - len,
                          "<item><key>Name</key><value>queue1-dy-p5-1"
                          "</value></item></tagSet></item></instancesSet>"
                          "</item></reservationSet>"
                          "</DescribeInstancesResponse>");
  assert_true(len < sizeof(xml));
  assert_int_equal(ec2_parse(xml, len, &a, &e), 0);
  /* All of them, the first EC2_MAX_TAGS kept. */
  assert_int_equal(a.n, 1);
  assert_int_equal(in[0].ntags, EC2_MAX_TAGS);
  assert_string_equal(in[0].private_ip, "10.0.3.17");
  /* Only those asked for. */
  a.keep = keep;
  a.nkeep = 2;
  assert_int_equal(ec2_parse(xml, len, &a, &e), 0);
  assert_int_equal(in[0].ntags, 1);
  assert_string_equal(in[0].tags[0].key, "Name");
  assert_string_equal(in[0].tags[0].value, "queue1-dy-p5-1");
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_instances_body_is_what_botocore_signed),
      cmocka_unit_test(
          test_describe_and_terminate_bodies_spell_filters_and_lists),
      cmocka_unit_test(
          test_run_answer_gives_the_instance_its_state_zone_and_tags),
      cmocka_unit_test(test_describe_answer_pages_through_reservations),
      cmocka_unit_test(test_terminate_answer_reads_the_current_state),
      cmocka_unit_test(test_an_error_answer_gives_its_code_and_kind),
      cmocka_unit_test(test_what_is_no_ec2_answer_is_an_error_saying_why),
      cmocka_unit_test(
          test_only_the_tags_asked_for_take_room_and_the_address_is_read),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
