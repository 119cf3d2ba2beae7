/*
 * adapters/gce: the insert body has the shape gcloud sent for a spot A3
 * (shared/research/cloud-contracts.md 2.2), the URLs carry every segment
 * encoded, and operations, lists and error answers are read as Google
 * writes them (2.3-2.5), hostile ones refused without a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/gce.h"
#include "util/utf8.h"

static const struct gce_loc loc = {NULL, "demo-proj", "us-central1-a"};

/* The body must be JSON equal to want (key order aside). */
static void
assert_json(const char *got, const char *want)
{
  json_t *g = json_loads(got, 0, NULL), *w = json_loads(want, 0, NULL);

  assert_non_null(g);
  assert_non_null(w);
  if (!json_equal(g, w))
    fail_msg("got  %s\nwant %s", got, want);
  json_decref(g);
  json_decref(w);
}

static void
test_spot_a3_insert_body_has_the_shape_gcloud_sent(void **state)
{
  const struct gce_label extra[] = {{"owner", "sched"}};
  const struct gce_launch l = {
      .name = "gpu-job-42",
      .zone = "us-central1-a",
      .machine_type = "a3-highgpu-8g",
      .image = "projects/debian-cloud/global/images/"
               "debian-12-bookworm-v20241112",
      .disk_gb = 200,
      .instance_label = "ab12",
      .node_label = "n-7",
      .labels = extra,
      .nlabels = 1,
      .spot = 1,
  };
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 65536);
  assert_int_equal(gce_insert_body(&l, &b, &e), 0);
  /* 2.2's capture, with the relative paths Google accepts too and
   * tenbin's labels; no guestAccelerators: A3 carries its GPUs */
  assert_json(
      buf_str(&b),
      "{\"name\":\"gpu-job-42\",\"machineType\":\"zones/us-central1-a/"
      "machineTypes/a3-highgpu-8g\",\"disks\":[{\"autoDelete\":true,"
      "\"boot\":true,\"mode\":\"READ_WRITE\",\"type\":\"PERSISTENT\","
      "\"initializeParams\":{\"diskSizeGb\":\"200\",\"sourceImage\":"
      "\"projects/debian-cloud/global/images/debian-12-bookworm-v20241112\""
      "}}],\"networkInterfaces\":[{\"network\":\"global/networks/default\""
      "}],\"labels\":{\"tenbin-instance\":\"ab12\",\"tenbin-node\":\"n-7\","
      "\"owner\":\"sched\"},\"metadata\":{},\"canIpForward\":false,"
      "\"deletionProtection\":false,\"scheduling\":{\"automaticRestart\":"
      "false,\"instanceTerminationAction\":\"DELETE\",\"onHostMaintenance\""
      ":\"TERMINATE\",\"preemptible\":true,\"provisioningModel\":\"SPOT\"}}");
  /* the keys come in gcloud's order */
  assert_non_null(strstr(buf_str(&b), "{\"name\":\"gpu-job-42\","
                                      "\"machineType\":"));
  buf_release(&b);
}

static void
test_standard_launch_carries_gpus_script_network_and_account(void **state)
{
  const struct gce_launch l = {
      .name = "t4-node",
      .zone = "us-central1-b",
      .machine_type = "n1-standard-8",
      .image = "projects/p/global/images/family/tenbin",
      .disk_gb = 50,
      .disk_type = "pd-balanced",
      .network = "projects/p/global/networks/gpu",
      .subnetwork = "regions/us-central1/subnetworks/gpu-a",
      .external_ip = 1,
      .instance_label = "ab12",
      .node_label = "n-8",
      .accelerator_type = "nvidia-tesla-t4",
      .accelerator_count = 2,
      .startup_script = "#!/bin/sh\necho \"h\xc3\xa9\" > /tmp/x\n",
      .service_account = "runner@p.iam.gserviceaccount.com",
  };
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 65536);
  assert_int_equal(gce_insert_body(&l, &b, &e), 0);
  assert_json(
      buf_str(&b),
      "{\"name\":\"t4-node\",\"machineType\":\"zones/us-central1-b/"
      "machineTypes/n1-standard-8\",\"disks\":[{\"autoDelete\":true,"
      "\"boot\":true,\"mode\":\"READ_WRITE\",\"type\":\"PERSISTENT\","
      "\"initializeParams\":{\"diskSizeGb\":\"50\",\"sourceImage\":"
      "\"projects/p/global/images/family/tenbin\",\"diskType\":"
      "\"zones/us-central1-b/diskTypes/pd-balanced\"}}],"
      "\"networkInterfaces\":[{\"network\":\"projects/p/global/networks/"
      "gpu\",\"subnetwork\":\"regions/us-central1/subnetworks/gpu-a\","
      "\"accessConfigs\":[{\"name\":\"External NAT\",\"type\":"
      "\"ONE_TO_ONE_NAT\"}]}],\"labels\":{\"tenbin-instance\":\"ab12\","
      "\"tenbin-node\":\"n-8\"},\"metadata\":{\"items\":[{\"key\":"
      "\"startup-script\",\"value\":\"#!/bin/sh\\necho \\\"h\\u00e9\\\" > "
      "/tmp/x\\n\"}]},\"canIpForward\":false,\"deletionProtection\":false,"
      "\"scheduling\":{\"onHostMaintenance\":\"TERMINATE\","
      "\"provisioningModel\":\"STANDARD\"},\"serviceAccounts\":[{\"email\":"
      "\"runner@p.iam.gserviceaccount.com\",\"scopes\":[\"https://"
      "www.googleapis.com/auth/cloud-platform\"]}],\"guestAccelerators\":"
      "[{\"acceleratorType\":\"zones/us-central1-b/acceleratorTypes/"
      "nvidia-tesla-t4\",\"acceleratorCount\":2}]}");
  buf_release(&b);
}

/* A launch that passes, to break one field at a time. */
static struct gce_launch
good_launch(void)
{
  const struct gce_launch l = {.name = "a1",
                               .zone = "us-central1-a",
                               .machine_type = "a2-highgpu-8g",
                               .image = "projects/p/global/images/i",
                               .disk_gb = 100,
                               .instance_label = "ab12",
                               .node_label = "n-1"};

  return l;
}

static void
expect_refused(const struct gce_launch *l, const char *field)
{
  struct buf b;
  struct err e = {0};

  buf_init(&b, 65536);
  assert_int_equal(gce_insert_body(l, &b, &e), ERR_INVALID);
  if (strstr(e.msg, field) == NULL)
    fail_msg("'%s' does not name %s", e.msg, field);
  assert_int_equal(b.len, 0);
  buf_release(&b);
}

static void
test_insert_refuses_what_google_would(void **state)
{
  static const char *const names[] = {"", "1abc", "Abc", "ab-", "a_b",
                                      "a.b", "a b"};
  char long_name[70], *script;
  struct gce_label dup[] = {{"team", "x"}, {"team", "y"}};
  struct gce_label ours[] = {{"tenbin-node", "x"}};
  struct gce_label upper[] = {{"Team", "x"}};
  struct gce_label digit[] = {{"9team", "x"}};
  struct gce_label val[] = {{"team", "A"}};
  struct gce_launch l;
  struct buf b;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    l = good_launch();
    l.name = names[i];
    expect_refused(&l, "'name'");
  }
  memset(long_name, 'a', 64);
  long_name[64] = '\0';
  l = good_launch();
  l.name = long_name;
  expect_refused(&l, "'name'");
  long_name[63] = '\0';
  l.name = long_name;
  buf_init(&b, 65536);
  assert_int_equal(gce_insert_body(&l, &b, &e), 0);
  buf_release(&b);

  l = good_launch();
  l.zone = "us-central1-a/../x";
  expect_refused(&l, "'zone'");
  l = good_launch();
  l.machine_type = "a2\"";
  expect_refused(&l, "'machine_type'");
  l = good_launch();
  l.image = "projects/p/global/images/a b";
  expect_refused(&l, "'image'");
  l = good_launch();
  l.disk_gb = 9;
  expect_refused(&l, "'disk_gb'");
  l = good_launch();
  l.accelerator_count = 1;
  expect_refused(&l, "'accelerator'");
  l = good_launch();
  l.accelerator_type = "nvidia-tesla-t4";
  expect_refused(&l, "'accelerator'");
  l = good_launch();
  l.instance_label = "AB";
  expect_refused(&l, "'instance_label'");
  l = good_launch();
  l.node_label = NULL;
  expect_refused(&l, "'node_label'");
  l = good_launch();
  l.labels = dup;
  l.nlabels = 2;
  expect_refused(&l, "given twice");
  l.labels = ours;
  l.nlabels = 1;
  expect_refused(&l, "tenbin's own");
  l.labels = upper;
  expect_refused(&l, "label 'Team'");
  l.labels = digit;
  expect_refused(&l, "label '9team'");
  l.labels = val;
  expect_refused(&l, "label 'team'");
  l.labels = NULL;
  l.nlabels = 63;
  expect_refused(&l, "'labels'");

  l = good_launch();
  l.startup_script = "echo \xff";
  expect_refused(&l, "'startup_script'");
  script = malloc(GCE_SCRIPT_MAX + 2);
  assert_non_null(script);
  memset(script, 'x', GCE_SCRIPT_MAX + 1);
  script[GCE_SCRIPT_MAX + 1] = '\0';
  l.startup_script = script;
  expect_refused(&l, "'startup_script'");
  free(script);

  /* a body that does not fit its buffer is too large, the buffer left
   * as it was */
  l = good_launch();
  buf_init(&b, 64);
  assert_int_equal(gce_insert_body(&l, &b, &e), ERR_TOO_LARGE);
  assert_int_equal(b.len, 0);
  buf_release(&b);
}

static void
test_request_id_is_stable_per_seed_and_uuid_shaped(void **state)
{
  char a[GCE_REQUEST_ID_LEN], b[GCE_REQUEST_ID_LEN], c[GCE_REQUEST_ID_LEN];
  char seed[16];

  (void)state;
  gce_request_id("node-7", a);
  gce_request_id("node-7", b);
  gce_request_id("node-8", c);
  assert_string_equal(a, b);
  assert_string_not_equal(a, c);
  /* the first 16 bytes of SHA-256("node-7"), version and variant set:
   * printf node-7 | sha256sum */
  for (int i = 0; i < 200; i++) {
    snprintf(seed, sizeof(seed), "n%d", i);
    gce_request_id(seed, c);
    assert_int_equal(strlen(c), 36);
    for (int j = 0; j < 36; j++) {
      if (j == 8 || j == 13 || j == 18 || j == 23)
        assert_int_equal(c[j], '-');
      else
        assert_non_null(strchr("0123456789abcdef", c[j]));
    }
    assert_int_equal(c[14], '4');
    assert_non_null(strchr("89ab", c[19]));
  }
  gce_request_id(NULL, b);
  gce_request_id("", c);
  assert_string_equal(b, c);
}

static void
test_request_id_is_the_seeds_sha256_with_uuid_bits(void **state)
{
  char id[GCE_REQUEST_ID_LEN];

  (void)state;
  /* SHA-256("") = e3b0c44298fc1c149afbf4c8996fb924...: byte 6 0x1c
   * becomes 0x4c, byte 8 0x9a stays 0x9a */
  gce_request_id("", id);
  assert_string_equal(id, "e3b0c442-98fc-4c14-9afb-f4c8996fb924");
  /* SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...: byte 6 0xcf
   * becomes 0x4f, byte 8 0x41 becomes 0x81 */
  gce_request_id("abc", id);
  assert_string_equal(id, "ba7816bf-8f01-4fea-8141-40de5dae2223");
}

static void
test_urls_encode_every_segment_and_query_value(void **state)
{
  const struct gce_loc odd = {"http://127.0.0.1:8080/compute/v1/",
                              "dom.example:p/x", "z?a=b#c"};
  const char *rid = "e3b0c442-98fc-4c14-9afb-f4c8996fb924";
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(gce_url_insert(&loc, rid, &b, &e), 0);
  assert_string_equal(buf_str(&b),
                      "https://compute.googleapis.com/compute/v1/projects/"
                      "demo-proj/zones/us-central1-a/instances?requestId="
                      "e3b0c442-98fc-4c14-9afb-f4c8996fb924");
  buf_reset(&b);
  assert_int_equal(gce_url_operation(&odd, "op 1/%", &b, &e), 0);
  assert_string_equal(buf_str(&b),
                      "http://127.0.0.1:8080/compute/v1/projects/"
                      "dom.example%3Ap%2Fx/zones/z%3Fa%3Db%23c/operations/"
                      "op%201%2F%25");
  buf_reset(&b);
  assert_int_equal(gce_url_delete(&loc, "gpu-job-42", rid, &b, &e), 0);
  assert_string_equal(buf_str(&b),
                      "https://compute.googleapis.com/compute/v1/projects/"
                      "demo-proj/zones/us-central1-a/instances/gpu-job-42"
                      "?requestId=e3b0c442-98fc-4c14-9afb-f4c8996fb924");
  buf_reset(&b);
  assert_int_equal(gce_url_list(&loc, "ab12", 500, NULL, &b, &e), 0);
  assert_string_equal(buf_str(&b),
                      "https://compute.googleapis.com/compute/v1/projects/"
                      "demo-proj/zones/us-central1-a/instances?filter="
                      "labels.tenbin-instance%20%3D%20%22ab12%22"
                      "&maxResults=500");
  buf_reset(&b);
  assert_int_equal(gce_url_list(&loc, NULL, 10, "Cg+/=&x", &b, &e), 0);
  assert_string_equal(buf_str(&b),
                      "https://compute.googleapis.com/compute/v1/projects/"
                      "demo-proj/zones/us-central1-a/instances?filter="
                      "labels.tenbin-instance%3A%2A&maxResults=10"
                      "&pageToken=Cg%2B%2F%3D%26x");
  buf_release(&b);
}

static void
test_urls_refuse_what_would_name_another_resource(void **state)
{
  const char *rid = "e3b0c442-98fc-4c14-9afb-f4c8996fb924";
  const struct gce_loc noproj = {NULL, "", "z"};
  const struct gce_loc dots = {NULL, "..", "z"};
  const struct gce_loc badbase = {"ftp://x", "p", "z"};
  const struct gce_loc spacebase = {"http://x y", "p", "z"};
  char big[GCE_TOKEN_LEN + 1];
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(gce_url_delete(&loc, "..", rid, &b, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "not a path segment"));
  assert_int_equal(gce_url_delete(&loc, ".", rid, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_delete(&loc, "", rid, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_delete(&loc, "x", "not-a-uuid", &b, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "not a UUID"));
  assert_int_equal(gce_url_insert(&loc, NULL, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_insert(&noproj, rid, &b, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "project"));
  assert_int_equal(gce_url_insert(&dots, rid, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_insert(&badbase, rid, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_insert(&spacebase, rid, &b, &e), ERR_INVALID);
  /* the filter's value is spelled into an expression: only its own
   * characters pass */
  assert_int_equal(gce_url_list(&loc, "a\" OR name:*", 10, NULL, &b, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "label value"));
  assert_int_equal(gce_url_list(&loc, "", 10, NULL, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_list(&loc, "Ab", 10, NULL, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_list(&loc, "a", 0, NULL, &b, &e), ERR_INVALID);
  assert_int_equal(gce_url_list(&loc, "a", 501, NULL, &b, &e), ERR_INVALID);
  memset(big, 'x', GCE_TOKEN_LEN);
  big[GCE_TOKEN_LEN] = '\0';
  assert_int_equal(gce_url_list(&loc, "a", 10, big, &b, &e), ERR_INVALID);
  buf_release(&b);
  /* a URL longer than its buffer */
  buf_init(&b, 40);
  assert_int_equal(gce_url_insert(&loc, rid, &b, &e), ERR_TOO_LARGE);
  buf_release(&b);
}

static const char page1[] =
    "{\"kind\":\"compute#instanceList\",\"id\":\"projects/demo-proj/zones/"
    "us-central1-a/instances\",\"items\":[{\"kind\":\"compute#instance\","
    "\"id\":\"4711\",\"creationTimestamp\":\"2026-11-21T06:00:00.000-08:00\","
    "\"name\":\"gpu-job-42\",\"machineType\":\"https://www.googleapis.com/"
    "compute/v1/projects/demo-proj/zones/us-central1-a/machineTypes/"
    "a3-highgpu-8g\",\"status\":\"RUNNING\",\"zone\":\"https://"
    "www.googleapis.com/compute/v1/projects/demo-proj/zones/us-central1-a\","
    "\"networkInterfaces\":[{\"networkIP\":\"10.128.0.2\"}],\"metadata\":"
    "{\"items\":[{\"key\":\"startup-script\",\"value\":\"#!/bin/sh\"}]},"
    "\"scheduling\":{\"automaticRestart\":false,\"onHostMaintenance\":"
    "\"TERMINATE\",\"preemptible\":true,\"provisioningModel\":\"SPOT\","
    "\"instanceTerminationAction\":\"DELETE\"},\"labels\":{\"tenbin-"
    "instance\":\"ab12\",\"tenbin-node\":\"n-7\",\"owner\":\"sched\"}},"
    "{\"name\":\"gpu-job-43\",\"status\":\"STAGING\",\"zone\":\"projects/"
    "demo-proj/zones/us-central1-a\",\"machineType\":\"zones/us-central1-a/"
    "machineTypes/a2-highgpu-8g\",\"creationTimestamp\":"
    "\"2026-11-21T14:00:01Z\",\"scheduling\":{\"provisioningModel\":"
    "\"STANDARD\",\"preemptible\":false},\"labels\":{\"tenbin-instance\":"
    "\"ab12\",\"tenbin-node\":\"n-8\"}}],\"nextPageToken\":\"Cg+tok/1=\","
    "\"selfLink\":\"https://www.googleapis.com/compute/v1/projects/"
    "demo-proj/zones/us-central1-a/instances\"}";

static const char page2[] =
    "{\"kind\":\"compute#instanceList\",\"items\":[{\"name\":\"gpu-job-44\","
    "\"status\":\"TERMINATED\",\"creationTimestamp\":"
    "\"2026-11-21T23:30:00.5+05:30\",\"labels\":{\"tenbin-instance\":"
    "\"ab12\"}}],\"selfLink\":\"x\"}";

static void
test_list_pages_through_two_answers(void **state)
{
  struct cloud_vm vms[4];
  char token[GCE_TOKEN_LEN];
  size_t n = 9, nout = 9;
  struct err e = {0};

  (void)state;
  assert_int_equal(gce_parse_list(page1, strlen(page1), vms, 4, &n, &nout,
                                   token, &e),
                   0);
  assert_int_equal(n, 2);
  assert_int_equal(nout, 2);
  assert_string_equal(token, "Cg+tok/1=");
  assert_string_equal(vms[0].id, "gpu-job-42");
  assert_int_equal(vms[0].state, CLOUD_VM_RUNNING);
  assert_string_equal(vms[0].zone, "us-central1-a");
  assert_string_equal(vms[0].shape, "a3-highgpu-8g");
  assert_true(vms[0].spot);
  /* 06:00 at -08:00 is 14:00 UTC: 1795269600 s since the epoch */
  assert_int_equal(vms[0].launched_ms, 1795269600000LL);
  assert_string_equal(vms[0].instance, "ab12");
  assert_string_equal(vms[0].node, "n-7");
  assert_string_equal(vms[0].end_reason, "");
  assert_string_equal(vms[1].id, "gpu-job-43");
  assert_int_equal(vms[1].state, CLOUD_VM_PENDING);
  assert_string_equal(vms[1].shape, "a2-highgpu-8g");
  assert_false(vms[1].spot);
  assert_int_equal(vms[1].launched_ms, 1795269601000LL);

  /* the last page has no nextPageToken */
  assert_int_equal(gce_parse_list(page2, strlen(page2), vms, 4, &n, &nout,
                                   token, &e),
                   0);
  assert_int_equal(n, 1);
  assert_string_equal(token, "");
  assert_string_equal(vms[0].id, "gpu-job-44");
  assert_int_equal(vms[0].state, CLOUD_VM_GONE);
  assert_string_equal(vms[0].zone, "");
  assert_string_equal(vms[0].node, "");
  /* 23:30:00.5 at +05:30 is 18:00:00.5 UTC */
  assert_int_equal(vms[0].launched_ms, 1795269600000LL + 4 * 3600000 + 500);
}

static void
test_list_keeps_what_fits_and_counts_the_rest(void **state)
{
  struct cloud_vm vms[1];
  char token[GCE_TOKEN_LEN];
  size_t n, nout;
  struct err e = {0};

  (void)state;
  assert_int_equal(gce_parse_list(page1, strlen(page1), vms, 1, &n, &nout,
                                   token, &e),
                   0);
  assert_int_equal(n, 1);
  assert_int_equal(nout, 2);
  assert_string_equal(vms[0].id, "gpu-job-42");
  assert_int_equal(gce_parse_list(page1, strlen(page1), NULL, 0, &n, &nout,
                                   token, &e),
                   0);
  assert_int_equal(n, 0);
  assert_int_equal(nout, 2);
}

static void
test_list_without_items_is_an_empty_last_page(void **state)
{
  static const char empty[] =
      "{\"kind\":\"compute#instanceList\",\"id\":\"projects/p/zones/z/"
      "instances\",\"selfLink\":\"https://x\"}";
  struct cloud_vm vms[1];
  char token[GCE_TOKEN_LEN] = "stale";
  size_t n = 5, nout = 5;
  struct err e = {0};

  (void)state;
  assert_int_equal(gce_parse_list(empty, strlen(empty), vms, 1, &n, &nout,
                                   token, &e),
                   0);
  assert_int_equal(n, 0);
  assert_int_equal(nout, 0);
  assert_string_equal(token, "");
}

static void
test_list_maps_every_instance_status(void **state)
{
  static const struct {
    const char *status;
    enum cloud_vm_state state;
  } cases[] = {
      {"PROVISIONING", CLOUD_VM_PENDING}, {"STAGING", CLOUD_VM_PENDING},
      {"RUNNING", CLOUD_VM_RUNNING},      {"REPAIRING", CLOUD_VM_RUNNING},
      {"STOPPING", CLOUD_VM_STOPPING},    {"SUSPENDING", CLOUD_VM_STOPPING},
      {"DEPROVISIONING", CLOUD_VM_STOPPING},
      {"TERMINATED", CLOUD_VM_GONE},      {"STOPPED", CLOUD_VM_GONE},
      {"SUSPENDED", CLOUD_VM_GONE},       {"MELTING", CLOUD_VM_UNKNOWN},
  };
  struct cloud_vm vm;
  char json[256], token[GCE_TOKEN_LEN];
  size_t n, nout;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    snprintf(json, sizeof(json), "{\"items\":[{\"name\":\"a\",\"status\":"
             "\"%s\",\"scheduling\":{\"preemptible\":true}}]}",
             cases[i].status);
    assert_int_equal(gce_parse_list(json, strlen(json), &vm, 1, &n, &nout,
                                     token, &e),
                     0);
    assert_int_equal(vm.state, cases[i].state);
    /* preemptible alone says spot too */
    assert_true(vm.spot);
  }
}

/* The cloud block of an elastic Slurm site lists anyone's label: the
 * filter names it, and only Google's label characters pass, so that
 * nothing can end the filter's quoted value. */
static void
test_a_labelled_list_filters_on_that_label_by_googles_rules(void **state)
{
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(gce_url_list_labelled(&loc, "slurm_cluster_name",
                                         "ml-a_3", 500, "t/1", &b, &e),
                   0);
  assert_string_equal(buf_str(&b),
                      "https://compute.googleapis.com/compute/v1/projects/"
                      "demo-proj/zones/us-central1-a/instances?filter="
                      "labels.slurm_cluster_name%20%3D%20%22ml-a_3%22"
                      "&maxResults=500&pageToken=t%2F1");
  buf_reset(&b);
  /* an empty value is a value */
  assert_int_equal(gce_url_list_labelled(&loc, "k", "", 10, NULL, &b, &e),
                   0);
  assert_non_null(strstr(buf_str(&b), "labels.k%20%3D%20%22%22"));
  buf_reset(&b);
  assert_int_equal(gce_url_list_labelled(&loc, "Cluster", "ml", 10, NULL,
                                         &b, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "label key 'Cluster'"));
  assert_int_equal(gce_url_list_labelled(&loc, "1k", "ml", 10, NULL, &b,
                                         &e),
                   ERR_INVALID);
  assert_int_equal(gce_url_list_labelled(&loc, "k", "ML", 10, NULL, &b,
                                         &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "label value 'ML'"));
  assert_int_equal(gce_url_list_labelled(&loc, "k", "a\" OR name:*", 10,
                                         NULL, &b, &e),
                   ERR_INVALID);
  assert_int_equal(gce_url_list_labelled(&loc, NULL, "a", 10, NULL, &b,
                                         &e),
                   ERR_INVALID);
  assert_int_equal(gce_url_list_labelled(&loc, "k", NULL, 10, NULL, &b,
                                         &e),
                   ERR_INVALID);
  assert_int_equal(gce_url_list_labelled(&loc, "k", "a", 0, NULL, &b, &e),
                   ERR_INVALID);
  assert_true(gce_label_ok("a-b_c9", 1));
  assert_false(gce_label_ok("", 1));
  assert_true(gce_label_ok("", 0));
  assert_false(gce_label_ok("a b", 0));
  buf_release(&b);
}

/* What a Slurm node is matched by: the first interface's networkIP, and
 * the value of the label the caller names (one too long to be a node's
 * name is none). */
static void
test_a_list_reads_the_address_and_the_name_label(void **state)
{
  static const char json[] =
      "{\"items\":[{\"name\":\"ml-a3-0\",\"status\":\"RUNNING\","
      "\"networkInterfaces\":[{\"networkIP\":\"10.128.0.7\"},"
      "{\"networkIP\":\"10.9.0.1\"}],"
      "\"labels\":{\"node\":\"ml-a3-0\",\"tenbin-node\":\"4\"}},"
      "{\"name\":\"b\",\"labels\":{\"node\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}},"
      "{\"name\":\"c\",\"networkInterfaces\":[]}]}";
  struct cloud_vm vms[3];
  char token[GCE_TOKEN_LEN];
  size_t n, nout;
  struct err e = {0};

  (void)state;
  assert_int_equal(gce_parse_list_named(json, strlen(json), "node", vms, 3,
                                        &n, &nout, token, &e),
                   0);
  assert_int_equal(n, 3);
  assert_string_equal(vms[0].address, "10.128.0.7");
  assert_string_equal(vms[0].name, "ml-a3-0");
  assert_string_equal(vms[0].node, "4");
  assert_string_equal(vms[1].name, "");
  assert_string_equal(vms[1].address, "");
  assert_string_equal(vms[2].address, "");
  /* Without a name label, no name; the address is read all the same. */
  assert_int_equal(gce_parse_list(json, strlen(json), vms, 3, &n, &nout,
                                  token, &e),
                   0);
  assert_string_equal(vms[0].name, "");
  assert_string_equal(vms[0].address, "10.128.0.7");
}

/* A name label or an address of the wrong shape is an error naming it. */
static void
test_a_bad_address_or_name_label_names_the_field(void **state)
{
  static const struct {
    const char *json, *why;
  } cases[] = {
      {"{\"items\":[{\"name\":\"a\",\"networkInterfaces\":{}}]}",
       "'items[0].networkInterfaces': not an array"},
      {"{\"items\":[{\"name\":\"a\",\"networkInterfaces\":[7]}]}",
       "'items[0].networkInterfaces[0]': not an object"},
      {"{\"items\":[{\"name\":\"a\",\"networkInterfaces\":"
       "[{\"networkIP\":7}]}]}",
       "'items[0].networkInterfaces[0].networkIP': not a string"},
      {"{\"items\":[{\"name\":\"a\",\"networkInterfaces\":"
       "[{\"networkIP\":\"1234567890123456789012345678901234567890123456789"
       "\"}]}]}",
       "'items[0].networkInterfaces[0].networkIP': longer than 47"},
      {"{\"items\":[{\"name\":\"a\",\"labels\":{\"node\":[]}}]}",
       "'items[0].labels.node': not a string"},
  };
  struct cloud_vm vms[2];
  char token[GCE_TOKEN_LEN];
  size_t n = 7, nout = 7;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(gce_parse_list_named(cases[i].json,
                                          strlen(cases[i].json), "node",
                                          vms, 2, &n, &nout, token, &e),
                     ERR_SITE);
    if (strstr(e.msg, cases[i].why) == NULL)
      fail_msg("'%s' does not say '%s'", e.msg, cases[i].why);
    assert_int_equal(n, 0);
  }
}

/* json must be refused as an instance list, e's message holding why. */
static void
list_refused(const char *json, size_t len, const char *why)
{
  struct cloud_vm vms[2];
  char token[GCE_TOKEN_LEN];
  size_t n = 7, nout = 7;
  struct err e = {0};

  assert_int_equal(gce_parse_list(json, len, vms, 2, &n, &nout, token, &e),
                   ERR_SITE);
  if (strstr(e.msg, why) == NULL)
    fail_msg("'%s' does not say '%s'", e.msg, why);
  assert_int_equal(n, 0);
  assert_int_equal(nout, 0);
  assert_string_equal(token, "");
}

static void
test_list_refuses_hostile_shapes(void **state)
{
  static const struct {
    const char *json;
    const char *why;
  } cases[] = {
      {"", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {"{\"items\":{}}", "'items': not an array"},
      {"{\"items\":[1]}", "'items[0]': not an object"},
      {"{\"items\":[{}]}", "'items[0].name': required"},
      {"{\"items\":[{\"name\":7}]}", "'items[0].name': not a string"},
      /* jansson refuses a NUL in a string, as tenbin would */
      {"{\"items\":[{\"name\":\"a\\u0000b\"}]}", "not JSON"},
      {"{\"items\":[{\"name\":\"a\"},{\"name\":\"b\",\"status\":[]}]}",
       "'items[1].status': not a string"},
      {"{\"items\":[{\"name\":\"a\",\"labels\":[]}]}",
       "'items[0].labels': not an object"},
      {"{\"items\":[{\"name\":\"a\",\"labels\":{\"tenbin-node\":1}}]}",
       "'items[0].labels.tenbin-node': not a string"},
      {"{\"items\":[{\"name\":\"a\",\"scheduling\":{\"preemptible\":"
       "\"yes\"}}]}",
       "'items[0].scheduling.preemptible': not a boolean"},
      {"{\"items\":[{\"name\":\"a\",\"creationTimestamp\":\"yesterday\"}]}",
       "no RFC 3339 time"},
      {"{\"items\":[{\"name\":\"a\",\"creationTimestamp\":"
       "\"2026-11-21T06:00:00-24:00\"}]}",
       "no RFC 3339 time"},
      {"{\"nextPageToken\":5}", "'nextPageToken': not a string"},
      {"{\"kind\":\"compute#operation\"}", "not one"},
      {"{\"error\":{\"code\":403}}", "an error answer"},
      {"{\"a\":1,\"a\":2}", "not JSON"},
  };
  char *big;
  size_t len;

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    list_refused(cases[i].json, strlen(cases[i].json), cases[i].why);

  /* a name too long for an id, a token too long for its room */
  big = malloc(GCE_ANSWER_MAX + 2);
  assert_non_null(big);
  len = (size_t)snprintf(big, 64, "{\"items\":[{\"name\":\"");
  memset(big + len, 'a', CLOUD_ID_LEN);
  len += CLOUD_ID_LEN;
  len += (size_t)snprintf(big + len, 64, "\"}]}");
  list_refused(big, len, "'items[0].name': longer than 127");
  len = (size_t)snprintf(big, 64, "{\"nextPageToken\":\"");
  memset(big + len, 't', GCE_TOKEN_LEN);
  len += GCE_TOKEN_LEN;
  len += (size_t)snprintf(big + len, 64, "\"}");
  list_refused(big, len, "'nextPageToken': longer than");

  /* nesting deeper than jansson goes */
  len = 0;
  len += (size_t)snprintf(big, 64, "{\"items\":");
  for (int i = 0; i < 5000; i++)
    big[len++] = '[';
  big[len] = '\0';
  list_refused(big, len, "not JSON");

  /* more items than any page holds */
  len = (size_t)snprintf(big, 64, "{\"items\":[");
  for (int i = 0; i <= GCE_MAX_RESULTS; i++)
    len += (size_t)snprintf(big + len, 64, "%s{\"name\":\"a\"}",
                            i > 0 ? "," : "");
  len += (size_t)snprintf(big + len, 64, "]}");
  list_refused(big, len, "more than 500 items");

  /* an answer over the cap is not even read */
  memset(big, ' ', GCE_ANSWER_MAX + 1);
  big[0] = '{';
  big[GCE_ANSWER_MAX] = '}';
  list_refused(big, GCE_ANSWER_MAX + 1, "larger than");
  free(big);
}

static void
test_operation_running_then_done(void **state)
{
  static const char running[] =
      "{\"kind\":\"compute#operation\",\"id\":\"7334017356386478123\","
      "\"name\":\"operation-1732197600000-abc-def\",\"zone\":\"https://"
      "www.googleapis.com/compute/v1/projects/p/zones/us-central1-a\","
      "\"operationType\":\"insert\",\"targetLink\":\"https://"
      "www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/"
      "instances/gpu-job-42\",\"targetId\":\"4711\",\"status\":\"RUNNING\","
      "\"user\":\"sa@p.iam.gserviceaccount.com\",\"progress\":0,"
      "\"insertTime\":\"2026-11-21T06:00:00.000-08:00\",\"startTime\":"
      "\"2026-11-21T06:00:00.100-08:00\",\"selfLink\":\"https://x/"
      "operations/operation-1732197600000-abc-def\"}";
  static const char done[] =
      "{\"kind\":\"compute#operation\",\"name\":\"operation-1\",\"status\":"
      "\"DONE\",\"targetLink\":\"projects/p/zones/z/instances/gpu-job-42\","
      "\"progress\":100,\"endTime\":\"2026-11-21T06:01:00.000-08:00\"}";
  struct gce_operation op;
  struct err e = {0};

  (void)state;
  assert_int_equal(gce_parse_operation(running, strlen(running), &op, &e),
                   0);
  assert_string_equal(op.name, "operation-1732197600000-abc-def");
  assert_int_equal(op.status, GCE_OP_RUNNING);
  assert_string_equal(op.target, "gpu-job-42");
  assert_false(op.failed);
  assert_int_equal(gce_parse_operation(done, strlen(done), &op, &e), 0);
  assert_int_equal(op.status, GCE_OP_DONE);
  assert_false(op.failed);
  assert_string_equal(op.error_code, "");
  assert_int_equal(op.http_status, 0);
}

static void
test_done_operation_with_zone_exhausted_is_capacity(void **state)
{
  /* 2.3's real capture */
  static const char json[] =
      "{\"kind\":\"compute#operation\",\"name\":\"operation-2\","
      "\"operationType\":\"insert\",\"targetLink\":\"https://x/projects/P/"
      "zones/us-central1-a/instances/gpu-job-42\",\"status\":\"DONE\","
      "\"error\":{\"errors\":[{\"code\":\"ZONE_RESOURCE_POOL_EXHAUSTED\","
      "\"message\":\"The zone 'projects/P/zones/us-central1-a' does not "
      "have enough resources available to fulfill the request.  Try a "
      "different zone, or try again later.\",\"errorDetails\":[{\"help\":"
      "{\"links\":[{\"description\":\"Troubleshooting documentation\","
      "\"url\":\"https://cloud.google.com/compute/docs/resource-error\"}]}},"
      "{\"localizedMessage\":{\"locale\":\"en-US\",\"message\":\"x\"}}]}]},"
      "\"httpErrorStatusCode\":503,\"httpErrorMessage\":\"SERVICE "
      "UNAVAILABLE\"}";
  struct gce_operation op;
  struct err e = {0};

  (void)state;
  assert_int_equal(gce_parse_operation(json, strlen(json), &op, &e),
                   ERR_SITE);
  assert_true(op.failed);
  assert_int_equal(op.status, GCE_OP_DONE);
  assert_string_equal(op.name, "operation-2");
  assert_string_equal(op.target, "gpu-job-42");
  assert_string_equal(op.error_code, "ZONE_RESOURCE_POOL_EXHAUSTED");
  assert_int_equal(op.http_status, 503);
  /* the code decides, not the 503 */
  assert_int_equal(op.refusal, CLOUD_REFUSED_CAPACITY);
  assert_non_null(strstr(e.msg, "operation-2 failed: "
                                "ZONE_RESOURCE_POOL_EXHAUSTED: The zone"));
  assert_non_null(strstr(op.error_message, "Try a different zone"));
}

static void
test_operation_refusals_by_code(void **state)
{
  static const struct {
    const char *code;
    int http;
    enum cloud_refusal want;
  } cases[] = {
      {"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503,
       CLOUD_REFUSED_CAPACITY},
      {"QUOTA_EXCEEDED", 403, CLOUD_REFUSED_QUOTA},
      {"RESOURCE_OPERATION_RATE_EXCEEDED", 403, CLOUD_REFUSED_THROTTLE},
      {"INTERNAL_ERROR", 500, CLOUD_REFUSED_TRANSIENT},
      {"INVALID_FIELD_VALUE", 400, CLOUD_REFUSED_OTHER},
  };
  struct gce_operation op;
  char json[512];
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    snprintf(json, sizeof(json), "{\"name\":\"op\",\"status\":\"DONE\","
             "\"error\":{\"errors\":[{\"code\":\"%s\",\"message\":\"Quota "
             "'NVIDIA_H100_GPUS' exceeded.  Limit: 0.0 in region "
             "us-central1.\"}]},\"httpErrorStatusCode\":%d}",
             cases[i].code, cases[i].http);
    assert_int_equal(gce_parse_operation(json, strlen(json), &op, &e),
                     ERR_SITE);
    assert_true(op.failed);
    assert_int_equal(op.refusal, cases[i].want);
  }
  /* an error with no details still failed; its status says what */
  snprintf(json, sizeof(json), "{\"name\":\"op\",\"status\":\"DONE\","
           "\"error\":{},\"httpErrorStatusCode\":502}");
  assert_int_equal(gce_parse_operation(json, strlen(json), &op, &e),
                   ERR_SITE);
  assert_true(op.failed);
  assert_int_equal(op.refusal, CLOUD_REFUSED_TRANSIENT);
  assert_non_null(strstr(e.msg, "no code"));
}

static void
test_operation_refuses_hostile_shapes(void **state)
{
  static const struct {
    const char *json;
    const char *why;
  } cases[] = {
      {"nope", "not JSON"},
      {"{\"status\":\"DONE\"}", "'name': required"},
      {"{\"name\":\"op\"}", "'status': '' is no operation status"},
      {"{\"name\":\"op\",\"status\":\"done\"}", "no operation status"},
      {"{\"name\":[],\"status\":\"DONE\"}", "'name': not a string"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"targetLink\":{}}",
       "'targetLink': not a string"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"httpErrorStatusCode\":"
       "\"503\"}",
       "not an HTTP status"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"httpErrorStatusCode\":"
       "99999999999}",
       "not an HTTP status"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"error\":\"boom\"}",
       "'error': not an object"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"error\":{\"errors\":{}}}",
       "'error.errors': not an array"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"error\":{\"errors\":[7]}}",
       "'error.errors[0]': not an object"},
      {"{\"name\":\"op\",\"status\":\"DONE\",\"error\":{\"errors\":"
       "[{\"code\":1}]}}",
       "'error.errors[0].code': not a string"},
      {"{\"kind\":\"compute#instance\",\"name\":\"op\",\"status\":\"DONE\"}",
       "not one"},
  };
  struct gce_operation op;
  char *big;
  size_t len;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(gce_parse_operation(cases[i].json,
                                         strlen(cases[i].json), &op, &e),
                     ERR_SITE);
    if (strstr(e.msg, cases[i].why) == NULL)
      fail_msg("'%s' does not say '%s'", e.msg, cases[i].why);
    assert_false(op.failed);
    assert_int_equal(op.status, GCE_OP_UNKNOWN);
  }
  /* a huge message is cut, and the cut is still UTF-8 */
  big = malloc(8192);
  assert_non_null(big);
  len = (size_t)snprintf(big, 128, "{\"name\":\"op\",\"status\":\"DONE\","
                         "\"error\":{\"errors\":[{\"code\":\"X\","
                         "\"message\":\"");
  for (int i = 0; i < 2000; i++) {
    memcpy(big + len, "\xc3\xa9", 2);
    len += 2;
  }
  len += (size_t)snprintf(big + len, 64, "\"}]}}");
  assert_int_equal(gce_parse_operation(big, len, &op, &e), ERR_SITE);
  assert_true(op.failed);
  assert_int_equal(strlen(op.error_message), CLOUD_MSG_LEN - 1);
  assert_true(utf8_valid(op.error_message, strlen(op.error_message)));
  assert_true(utf8_valid(e.msg, strlen(e.msg)));
  free(big);
}

static void
test_every_refusal_class_from_a_real_error_body(void **state)
{
  static const struct {
    int status;
    const char *body;
    enum cloud_refusal want;
    const char *word;
  } cases[] = {
      /* 2.5: Compute's own rate limit */
      {403,
       "{\"error\":{\"code\":403,\"message\":\"Rate Limit Exceeded\","
       "\"errors\":[{\"message\":\"Rate Limit Exceeded\",\"domain\":"
       "\"usageLimits\",\"reason\":\"rateLimitExceeded\"}]}}",
       CLOUD_REFUSED_THROTTLE, "rateLimitExceeded"},
      /* the newer front end's 429 */
      {429,
       "{\"error\":{\"code\":429,\"message\":\"Quota exceeded for quota "
       "metric 'Read requests' and limit 'Read requests per minute' of "
       "service 'compute.googleapis.com'\",\"status\":"
       "\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis."
       "com/google.rpc.ErrorInfo\",\"reason\":\"RATE_LIMIT_EXCEEDED\"}]}}",
       CLOUD_REFUSED_THROTTLE, "RESOURCE_EXHAUSTED"},
      {403,
       "{\"error\":{\"code\":403,\"message\":\"Quota 'NVIDIA_H100_GPUS' "
       "exceeded.  Limit: 0.0 in region us-central1.\",\"errors\":[{"
       "\"message\":\"Quota 'NVIDIA_H100_GPUS' exceeded.\",\"domain\":"
       "\"usageLimits\",\"reason\":\"quotaExceeded\"}]}}",
       CLOUD_REFUSED_QUOTA, "quotaExceeded"},
      {401,
       "{\"error\":{\"code\":401,\"message\":\"Request had invalid "
       "authentication credentials.\",\"errors\":[{\"message\":\"Invalid "
       "Credentials\",\"domain\":\"global\",\"reason\":\"authError\","
       "\"location\":\"Authorization\",\"locationType\":\"header\"}],"
       "\"status\":\"UNAUTHENTICATED\"}}",
       CLOUD_REFUSED_AUTH, "authError"},
      {404,
       "{\"error\":{\"code\":404,\"message\":\"The resource 'projects/p/"
       "zones/z/instances/x' was not found\",\"errors\":[{\"message\":"
       "\"The resource 'projects/p/zones/z/instances/x' was not found\","
       "\"domain\":\"global\",\"reason\":\"notFound\"}]}}",
       CLOUD_REFUSED_NOT_FOUND, "notFound"},
      {503,
       "{\"error\":{\"code\":503,\"message\":\"Internal error. Please try "
       "again or contact Google Support.\",\"errors\":[{\"message\":\"x\","
       "\"domain\":\"global\",\"reason\":\"backendError\"}]}}",
       CLOUD_REFUSED_TRANSIENT, "backendError"},
      {409,
       "{\"error\":{\"code\":409,\"message\":\"The resource 'projects/p/"
       "zones/z/instances/x' already exists\",\"errors\":[{\"message\":"
       "\"x\",\"domain\":\"global\",\"reason\":\"alreadyExists\"}]}}",
       CLOUD_REFUSED_OTHER, "alreadyExists"},
      {400,
       "{\"error\":{\"code\":400,\"message\":\"Invalid value for field "
       "'resource.machineType'\",\"errors\":[{\"message\":\"x\",\"domain\":"
       "\"global\",\"reason\":\"invalid\"}]}}",
       CLOUD_REFUSED_OTHER, "invalid"},
      /* a proxy's page, no JSON: the status alone decides */
      {502, "<html><body>Bad Gateway</body></html>",
       CLOUD_REFUSED_TRANSIENT, ""},
      {429, "", CLOUD_REFUSED_THROTTLE, ""},
  };
  struct gce_error ge;
  const char *body;

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    gce_parse_error(cases[i].body, strlen(cases[i].body), cases[i].status,
                    &ge);
    assert_int_equal(ge.http_status, cases[i].status);
    if (ge.refusal != cases[i].want)
      fail_msg("case %zu: refusal %d, want %d", i, ge.refusal,
               cases[i].want);
    assert_string_equal(ge.reason[0] != '\0' ? ge.reason : ge.status,
                        cases[i].word);
  }
  gce_parse_error(cases[1].body, strlen(cases[1].body), 429, &ge);
  assert_int_equal(ge.code, 429);
  assert_string_equal(ge.status, "RESOURCE_EXHAUSTED");
  assert_non_null(strstr(ge.message, "'Read requests'"));
  gce_parse_error(NULL, 0, 500, &ge);
  assert_int_equal(ge.refusal, CLOUD_REFUSED_TRANSIENT);
  /* wrong types are words left empty, not a crash */
  body = "{\"error\":{\"code\":\"x\",\"message\":7,\"errors\":[[]],"
         "\"status\":{}}}";
  gce_parse_error(body, strlen(body), 403, &ge);
  assert_int_equal(ge.code, 0);
  assert_string_equal(ge.message, "");
  assert_int_equal(ge.refusal, CLOUD_REFUSED_OTHER);
}

static void
test_refusal_words_and_statuses(void **state)
{
  (void)state;
  assert_int_equal(gce_refusal("ZONE_RESOURCE_POOL_EXHAUSTED", 0),
                   CLOUD_REFUSED_CAPACITY);
  assert_int_equal(gce_refusal("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                               503),
                   CLOUD_REFUSED_CAPACITY);
  assert_int_equal(gce_refusal("QUOTA_EXCEEDED", 0), CLOUD_REFUSED_QUOTA);
  assert_int_equal(gce_refusal("quotaExceeded", 403), CLOUD_REFUSED_QUOTA);
  assert_int_equal(gce_refusal("rateLimitExceeded", 403),
                   CLOUD_REFUSED_THROTTLE);
  assert_int_equal(gce_refusal("RESOURCE_EXHAUSTED", 0),
                   CLOUD_REFUSED_THROTTLE);
  assert_int_equal(gce_refusal("RESOURCE_OPERATION_RATE_EXCEEDED", 403),
                   CLOUD_REFUSED_THROTTLE);
  assert_int_equal(gce_refusal(NULL, 429), CLOUD_REFUSED_THROTTLE);
  assert_int_equal(gce_refusal("", 401), CLOUD_REFUSED_AUTH);
  assert_int_equal(gce_refusal("notFound", 0), CLOUD_REFUSED_NOT_FOUND);
  assert_int_equal(gce_refusal(NULL, 404), CLOUD_REFUSED_NOT_FOUND);
  assert_int_equal(gce_refusal("backendError", 500),
                   CLOUD_REFUSED_TRANSIENT);
  assert_int_equal(gce_refusal(NULL, 599), CLOUD_REFUSED_TRANSIENT);
  assert_int_equal(gce_refusal("forbidden", 403), CLOUD_REFUSED_OTHER);
  assert_int_equal(gce_refusal(NULL, 0), CLOUD_REFUSED_OTHER);
  /* words are compared whole, case and all */
  assert_int_equal(gce_refusal("quota_exceeded", 400), CLOUD_REFUSED_OTHER);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spot_a3_insert_body_has_the_shape_gcloud_sent),
      cmocka_unit_test(
          test_standard_launch_carries_gpus_script_network_and_account),
      cmocka_unit_test(test_insert_refuses_what_google_would),
      cmocka_unit_test(test_request_id_is_stable_per_seed_and_uuid_shaped),
      cmocka_unit_test(test_request_id_is_the_seeds_sha256_with_uuid_bits),
      cmocka_unit_test(test_urls_encode_every_segment_and_query_value),
      cmocka_unit_test(test_urls_refuse_what_would_name_another_resource),
      cmocka_unit_test(test_list_pages_through_two_answers),
      cmocka_unit_test(test_list_keeps_what_fits_and_counts_the_rest),
      cmocka_unit_test(test_list_without_items_is_an_empty_last_page),
      cmocka_unit_test(test_list_maps_every_instance_status),
      cmocka_unit_test(test_list_refuses_hostile_shapes),
      cmocka_unit_test(
          test_a_labelled_list_filters_on_that_label_by_googles_rules),
      cmocka_unit_test(test_a_list_reads_the_address_and_the_name_label),
      cmocka_unit_test(test_a_bad_address_or_name_label_names_the_field),
      cmocka_unit_test(test_operation_running_then_done),
      cmocka_unit_test(test_done_operation_with_zone_exhausted_is_capacity),
      cmocka_unit_test(test_operation_refusals_by_code),
      cmocka_unit_test(test_operation_refuses_hostile_shapes),
      cmocka_unit_test(test_every_refusal_class_from_a_real_error_body),
      cmocka_unit_test(test_refusal_words_and_statuses),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
