/*
 * adapters/azure_arm: the VM PUT body in the shape ARM documents for
 * 2024-07-01, URLs whose segments cannot escape their place, links that
 * cannot carry the token to another host, and answers read from the
 * shapes shared/research/cloud-contracts.md section 3 records (hostile
 * ones included).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/azure_arm.h"
#include "util/utf8.h"

#define BASE "http://127.0.0.1:8080"
#define NIC "/subscriptions/s1/resourceGroups/rg1/providers/" \
            "Microsoft.Network/networkInterfaces/nic1"
#define SUBNET "/subscriptions/s1/resourceGroups/rg1/providers/" \
               "Microsoft.Network/virtualNetworks/v1/subnets/default"

static const char script[] = "#!/bin/sh\necho hi\n";

/* The spot H100 VM of contract 3.2, with tenbin's tags added. */
static struct azarm_launch
spot_h100(void)
{
  static const struct azarm_tag extra[] = {{"gpujob", "job-42"}};
  struct azarm_launch l = {
      .name = "gpu-job-42",
      .location = "eastus",
      .zone = "1",
      .size = "Standard_ND96isr_H100_v5",
      .instance = "tb-1",
      .node = "node-7",
      .tags = extra,
      .ntags = 1,
      .spot = 1,
      .image = "microsoft-dsvm:ubuntu-hpc:2204:latest",
      .disk_type = "Premium_LRS",
      .admin_user = "azureuser",
      .ssh_key = "ssh-rsa AAAAB3Nza me@host",
      .script = script,
      .script_len = sizeof(script) - 1,
      .nic_id = NIC,
  };

  return l;
}

/* The body of l parsed back (new reference), or NULL with e set. */
static json_t *
body_of(const struct azarm_launch *l, struct err *e)
{
  struct buf b;
  json_t *v = NULL;

  buf_init(&b, 1 << 20);
  if (azarm_vm_body(l, &b, e) == 0)
    v = json_loads(buf_str(&b), 0, NULL);
  buf_release(&b);
  return v;
}

static void
assert_json(const json_t *got, const char *want_text)
{
  json_t *want = json_loads(want_text, JSON_DECODE_ANY, NULL);

  assert_non_null(want);
  assert_non_null(got);
  if (!json_equal(got, want)) {
    char *g = json_dumps(got, JSON_INDENT(1) | JSON_SORT_KEYS);

    fprintf(stderr, "got: %s\n", g);
    free(g);
  }
  assert_true(json_equal(got, want));
  json_decref(want);
}

static void
test_spot_h100_body_has_the_documented_shape(void **state)
{
  struct azarm_launch l = spot_h100();
  struct err e = {0};
  json_t *got = body_of(&l, &e);

  (void)state;
  assert_json(
      got,
      "{\"location\":\"eastus\","
      " \"tags\":{\"tenbin-instance\":\"tb-1\",\"tenbin-node\":\"node-7\","
      "  \"gpujob\":\"job-42\"},"
      " \"zones\":[\"1\"],"
      " \"properties\":{"
      "  \"hardwareProfile\":{\"vmSize\":\"Standard_ND96isr_H100_v5\"},"
      "  \"priority\":\"Spot\",\"evictionPolicy\":\"Delete\","
      "  \"billingProfile\":{\"maxPrice\":-1},"
      "  \"storageProfile\":{\"imageReference\":{\"publisher\":"
      "\"microsoft-dsvm\",\"offer\":\"ubuntu-hpc\",\"sku\":\"2204\","
      "\"version\":\"latest\"},"
      "   \"osDisk\":{\"createOption\":\"FromImage\",\"caching\":"
      "\"ReadWrite\",\"managedDisk\":{\"storageAccountType\":"
      "\"Premium_LRS\"},\"deleteOption\":\"Delete\"}},"
      "  \"osProfile\":{\"computerName\":\"gpu-job-42\",\"adminUsername\":"
      "\"azureuser\",\"customData\":\"IyEvYmluL3NoCmVjaG8gaGkK\","
      "   \"linuxConfiguration\":{\"disablePasswordAuthentication\":true,"
      "    \"ssh\":{\"publicKeys\":[{\"path\":"
      "\"/home/azureuser/.ssh/authorized_keys\",\"keyData\":"
      "\"ssh-rsa AAAAB3Nza me@host\"}]}}},"
      "  \"networkProfile\":{\"networkInterfaces\":[{\"id\":\"" NIC "\","
      "   \"properties\":{\"primary\":true,\"deleteOption\":\"Delete\"}}]}"
      "}}");
  json_decref(got);
}

static void
test_subnet_gives_a_nic_configuration_deleted_with_the_vm(void **state)
{
  struct azarm_launch l = spot_h100();
  struct err e = {0};
  json_t *got, *props;

  (void)state;
  l.nic_id = NULL;
  l.subnet_id = SUBNET;
  l.spot = 0;
  l.zone = NULL;
  l.ssh_key = NULL;
  l.admin_user = NULL;
  l.disk_type = NULL;
  l.disk_gb = 256;
  l.script = NULL;
  l.script_len = 0;
  l.image = "/subscriptions/s1/resourceGroups/rg1/providers/"
            "Microsoft.Compute/galleries/g/images/tb/versions/1.0.0";
  got = body_of(&l, &e);
  assert_non_null(got);
  props = json_object_get(got, "properties");
  assert_null(json_object_get(got, "zones"));
  assert_null(json_object_get(props, "evictionPolicy"));
  assert_null(json_object_get(props, "billingProfile"));
  assert_json(json_object_get(props, "priority"), "\"Regular\"");
  assert_json(json_object_get(props, "storageProfile"),
              "{\"imageReference\":{\"id\":\"/subscriptions/s1/"
              "resourceGroups/rg1/providers/Microsoft.Compute/galleries/g/"
              "images/tb/versions/1.0.0\"},\"osDisk\":{\"createOption\":"
              "\"FromImage\",\"caching\":\"ReadWrite\",\"diskSizeGB\":256,"
              "\"deleteOption\":\"Delete\"}}");
  assert_json(json_object_get(props, "osProfile"),
              "{\"computerName\":\"gpu-job-42\",\"adminUsername\":"
              "\"azureuser\",\"linuxConfiguration\":"
              "{\"disablePasswordAuthentication\":true}}");
  assert_json(
      json_object_get(props, "networkProfile"),
      "{\"networkApiVersion\":\"2022-11-01\","
      " \"networkInterfaceConfigurations\":[{\"name\":\"gpu-job-42-nic\","
      "  \"properties\":{\"primary\":true,\"deleteOption\":\"Delete\","
      "   \"ipConfigurations\":[{\"name\":\"gpu-job-42-ip\",\"properties\":"
      "    {\"primary\":true,\"subnet\":{\"id\":\"" SUBNET "\"}}}]}}]}");
  json_decref(got);
}

/* customData of a script of len bytes, decoded back. */
static void
assert_custom_data_round_trips(const unsigned char *data, size_t len)
{
  struct azarm_launch l = spot_h100();
  struct err e = {0};
  json_t *got;
  const char *b64;
  unsigned char *back;
  size_t blen;
  int n;

  l.script = data;
  l.script_len = len;
  got = body_of(&l, &e);
  assert_non_null(got);
  b64 = json_string_value(json_object_get(
      json_object_get(json_object_get(got, "properties"), "osProfile"),
      "customData"));
  assert_non_null(b64);
  blen = strlen(b64);
  assert_int_equal(blen, 4 * ((len + 2) / 3));
  back = malloc(blen + 1);
  n = EVP_DecodeBlock(back, (const unsigned char *)b64, (int)blen);
  /* EVP_DecodeBlock counts the padding's zero bytes too. */
  assert_int_equal((size_t)n, blen / 4 * 3);
  assert_memory_equal(back, data, len);
  free(back);
  json_decref(got);
}

static void
test_custom_data_is_base64_of_the_script_bytes(void **state)
{
  static unsigned char big[AZARM_SCRIPT_MAX + 1];
  const unsigned char bin[] = {0, 0xff, '\n', 0x80, 'x'};
  struct azarm_launch l = spot_h100();
  struct err e = {0};
  struct buf b;

  (void)state;
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (unsigned char)(i * 7);
  for (size_t len = 1; len <= sizeof(bin); len++)
    assert_custom_data_round_trips(bin, len);
  assert_custom_data_round_trips(big, AZARM_SCRIPT_MAX);
  buf_init(&b, 1 << 20);
  l.script = big;
  l.script_len = AZARM_SCRIPT_MAX + 1;
  assert_int_equal(azarm_vm_body(&l, &b, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'script'"));
  assert_int_equal(b.len, 0);
  buf_release(&b);
}

static void
test_spot_max_price_is_sent_with_at_most_five_decimals(void **state)
{
  struct azarm_launch l = spot_h100();
  struct err e = {0};
  struct buf b;

  (void)state;
  buf_init(&b, 1 << 20);
  l.max_price = 0.1;
  assert_int_equal(azarm_vm_body(&l, &b, &e), 0);
  assert_non_null(strstr(buf_str(&b), "\"billingProfile\":{\"maxPrice\":0.1}"));
  buf_reset(&b);
  l.max_price = 12.3456789;
  assert_int_equal(azarm_vm_body(&l, &b, &e), 0);
  assert_non_null(
      strstr(buf_str(&b), "\"billingProfile\":{\"maxPrice\":12.34568}"));
  buf_release(&b);
}

static void
test_body_too_large_for_its_buffer_is_refused_and_left_empty(void **state)
{
  struct azarm_launch l = spot_h100();
  struct err e = {0};
  struct buf b;

  (void)state;
  buf_init(&b, 100);
  assert_int_equal(azarm_vm_body(&l, &b, &e), ERR_TOO_LARGE);
  assert_int_equal(b.len, 0);
  buf_release(&b);
}

enum mutation {
  M_NAME_DASH_FIRST, M_NAME_DASH_LAST, M_NAME_EMPTY, M_NAME_LONG,
  M_NAME_UNDERSCORE, M_NAME_NULL, M_ZONE, M_SIZE, M_LOCATION, M_IMAGE_URN,
  M_IMAGE_NULL, M_IMAGE_ID_SPACE, M_BOTH_NETS, M_NO_NET, M_INSTANCE_UPPER,
  M_NODE_EMPTY, M_TAG_SLASH, M_TAG_OURS, M_TAG_TWICE, M_TAG_VALUE_UTF8,
  M_TOO_MANY_TAGS, M_PRICE_NAN, M_PRICE_HUGE, M_ADMIN, M_SSH_NEWLINE,
  M_DISK_GB, M_SCRIPT_NULL, M_COUNT
};

static void
test_launch_fields_that_azure_would_refuse_are_named(void **state)
{
  static const struct {
    enum mutation m;
    const char *field;
  } cases[] = {
      {M_NAME_DASH_FIRST, "'name'"}, {M_NAME_DASH_LAST, "'name'"},
      {M_NAME_EMPTY, "'name'"}, {M_NAME_LONG, "'name'"},
      {M_NAME_UNDERSCORE, "'name'"}, {M_NAME_NULL, "'name'"},
      {M_ZONE, "'zone'"}, {M_SIZE, "'size'"}, {M_LOCATION, "'location'"},
      {M_IMAGE_URN, "'image'"}, {M_IMAGE_NULL, "'image'"},
      {M_IMAGE_ID_SPACE, "'image'"}, {M_BOTH_NETS, "'subnet_id'"},
      {M_NO_NET, "'subnet_id'"}, {M_INSTANCE_UPPER, "'instance'"},
      {M_NODE_EMPTY, "'node'"}, {M_TAG_SLASH, "'tags[1]'"},
      {M_TAG_OURS, "'tags.Tenbin-Node'"}, {M_TAG_TWICE, "'tags.GPUJOB'"},
      {M_TAG_VALUE_UTF8, "'tags.bad'"}, {M_TOO_MANY_TAGS, "'tags'"},
      {M_PRICE_NAN, "'max_price'"}, {M_PRICE_HUGE, "'max_price'"},
      {M_ADMIN, "'admin_user'"}, {M_SSH_NEWLINE, "'ssh_key'"},
      {M_DISK_GB, "'disk_gb'"}, {M_SCRIPT_NULL, "'script'"}};
  char long_name[80];
  struct azarm_tag tags[AZARM_MAX_TAGS + 1];

  (void)state;
  assert_int_equal(sizeof(cases) / sizeof(cases[0]), M_COUNT);
  memset(long_name, 'a', 65);
  long_name[65] = '\0';
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct azarm_launch l = spot_h100();
    struct err e = {0};
    struct buf b;

    tags[0] = (struct azarm_tag){"gpujob", "job-42"};
    tags[1] = (struct azarm_tag){"a/b", "x"};
    switch (cases[i].m) {
    case M_NAME_DASH_FIRST: l.name = "-gpu"; break;
    case M_NAME_DASH_LAST: l.name = "gpu-"; break;
    case M_NAME_EMPTY: l.name = ""; break;
    case M_NAME_LONG: l.name = long_name; break;
    case M_NAME_UNDERSCORE: l.name = "gpu_1"; break;
    case M_NAME_NULL: l.name = NULL; break;
    case M_ZONE: l.zone = "4"; break;
    case M_SIZE: l.size = "Standard ND96"; break;
    case M_LOCATION: l.location = "east us"; break;
    case M_IMAGE_URN: l.image = "microsoft-dsvm:ubuntu-hpc:2204"; break;
    case M_IMAGE_NULL: l.image = NULL; break;
    case M_IMAGE_ID_SPACE: l.image = "/subscriptions/s 1"; break;
    case M_BOTH_NETS: l.subnet_id = SUBNET; break;
    case M_NO_NET: l.nic_id = NULL; break;
    case M_INSTANCE_UPPER: l.instance = "TB-1"; break;
    case M_NODE_EMPTY: l.node = ""; break;
    case M_TAG_SLASH: l.tags = tags; l.ntags = 2; break;
    case M_TAG_OURS:
      tags[1] = (struct azarm_tag){"Tenbin-Node", "x"};
      l.tags = tags;
      l.ntags = 2;
      break;
    case M_TAG_TWICE:
      tags[1] = (struct azarm_tag){"GPUJOB", "x"};
      l.tags = tags;
      l.ntags = 2;
      break;
    case M_TAG_VALUE_UTF8:
      tags[1] = (struct azarm_tag){"bad", "\xc3("};
      l.tags = tags;
      l.ntags = 2;
      break;
    case M_TOO_MANY_TAGS: l.tags = tags; l.ntags = AZARM_MAX_TAGS + 1; break;
    case M_PRICE_NAN: l.max_price = NAN; break;
    case M_PRICE_HUGE: l.max_price = 1e9; break;
    case M_ADMIN: l.admin_user = "Admin!"; break;
    case M_SSH_NEWLINE: l.ssh_key = "ssh-rsa AAAA\nssh-rsa BBBB"; break;
    case M_DISK_GB: l.disk_gb = -1; break;
    case M_SCRIPT_NULL: l.script = NULL; break;
    case M_COUNT: break;
    }
    buf_init(&b, 1 << 20);
    assert_int_equal(azarm_vm_body(&l, &b, &e), ERR_INVALID);
    if (strstr(e.msg, cases[i].field) == NULL)
      fail_msg("case %zu: '%s' does not name %s", i, e.msg, cases[i].field);
    assert_int_equal(b.len, 0);
    buf_release(&b);
  }
}

static void
test_vm_names_follow_azure_rules(void **state)
{
  (void)state;
  assert_true(azarm_name_ok("a"));
  assert_true(azarm_name_ok("tb-node-0001"));
  assert_true(azarm_name_ok("A9"));
  assert_false(azarm_name_ok(NULL));
  assert_false(azarm_name_ok(""));
  assert_false(azarm_name_ok("-"));
  assert_false(azarm_name_ok("a.b"));
  assert_false(azarm_name_ok("a b"));
  assert_false(azarm_name_ok("n\xc3\xa9"));
}

static void
test_urls_encode_hostile_segments(void **state)
{
  struct buf b;
  struct err e = {0};

  (void)state;
  buf_init(&b, 4096);
  assert_int_equal(azarm_vm_url(AZARM_ENDPOINT, "0000-11", "rg1", "vm1", &b,
                                &e), 0);
  assert_string_equal(
      buf_str(&b),
      "https://management.azure.com/subscriptions/0000-11/resourceGroups/"
      "rg1/providers/Microsoft.Compute/virtualMachines/vm1"
      "?api-version=2024-07-01");
  buf_reset(&b);
  assert_int_equal(azarm_vm_url(BASE "/", "../x", "rg with space/and?&",
                                "vm#1", &b, &e), 0);
  assert_string_equal(
      buf_str(&b),
      BASE "/subscriptions/..%2Fx/resourceGroups/"
      "rg%20with%20space%2Fand%3F%26/providers/Microsoft.Compute/"
      "virtualMachines/vm%231?api-version=2024-07-01");
  buf_reset(&b);
  assert_int_equal(azarm_list_url(BASE, "s1", "r\xc3\xa9", &b, &e), 0);
  assert_string_equal(buf_str(&b),
                      BASE "/subscriptions/s1/resourceGroups/r%C3%A9/"
                      "providers/Microsoft.Compute/virtualMachines"
                      "?api-version=2024-07-01");
  buf_reset(&b);

  assert_int_equal(azarm_vm_url("ftp://x", "s", "r", "v", &b, &e),
                   ERR_INVALID);
  assert_non_null(strstr(e.msg, "'endpoint'"));
  assert_int_equal(azarm_vm_url("https://", "s", "r", "v", &b, &e),
                   ERR_INVALID);
  assert_int_equal(azarm_vm_url("https://h/?x", "s", "r", "v", &b, &e),
                   ERR_INVALID);
  assert_int_equal(azarm_vm_url(NULL, "s", "r", "v", &b, &e), ERR_INVALID);
  assert_int_equal(azarm_vm_url(BASE, "", "r", "v", &b, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'subscription'"));
  assert_int_equal(azarm_list_url(BASE, "s", NULL, &b, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'resource_group'"));
  assert_int_equal(azarm_vm_url(BASE, "s", "r", NULL, &b, &e), ERR_INVALID);
  assert_non_null(strstr(e.msg, "'vm'"));
  assert_int_equal(b.len, 0);
  buf_release(&b);

  /* A URL past the buffer's cap leaves the buffer as it was. */
  buf_init(&b, 40);
  assert_int_equal(buf_adds(&b, "x"), 0);
  assert_int_equal(azarm_vm_url(BASE, "s", "r", "v", &b, &e), ERR_TOO_LARGE);
  assert_string_equal(buf_str(&b), "x");
  buf_release(&b);
}

static void
test_links_to_another_host_are_refused(void **state)
{
  char *huge = malloc(AZARM_URL_MAX + 2);

  (void)state;
  assert_true(azarm_link_ok(
      "https://management.azure.com/subscriptions/s/providers/"
      "Microsoft.Compute/locations/eastus/operations/op1?api-version=x",
      AZARM_ENDPOINT));
  assert_true(azarm_link_ok("HTTPS://Management.Azure.com/x?$skiptoken=a",
                            AZARM_ENDPOINT));
  assert_true(azarm_link_ok(BASE "/subscriptions/s?p=2", BASE "/"));
  assert_false(azarm_link_ok("https://evil.example/subscriptions/s",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok("https://management.azure.com.evil.example/x",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok("https://management.azure.com@evil.example/x",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok("https://management.azure.com:444/x",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok("http://management.azure.com/x",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok(BASE "0/x", BASE));
  assert_false(azarm_link_ok("https://management.azure.com", AZARM_ENDPOINT));
  assert_false(azarm_link_ok("https://management.azure.com/a\r\nHost: e",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok("https://management.azure.com/a b",
                             AZARM_ENDPOINT));
  assert_false(azarm_link_ok(NULL, AZARM_ENDPOINT));
  assert_false(azarm_link_ok("https://management.azure.com/x", NULL));
  assert_false(azarm_link_ok("https://management.azure.com/x", ""));
  /* 4096 bytes pass, 4097 do not. */
  memcpy(huge, BASE "/", sizeof(BASE));
  memset(huge + sizeof(BASE), 'a', AZARM_URL_MAX - sizeof(BASE));
  huge[AZARM_URL_MAX] = '\0';
  assert_true(azarm_link_ok(huge, BASE));
  huge[AZARM_URL_MAX] = 'a';
  huge[AZARM_URL_MAX + 1] = '\0';
  assert_false(azarm_link_ok(huge, BASE));
  free(huge);
}

/* A VM as ARM lists it, tagged for instance inst (or untagged: NULL). */
static void
add_vm(struct buf *b, const char *name, const char *inst, const char *state)
{
  assert_int_equal(
      buf_addf(b,
               "{\"name\":\"%s\",\"id\":\"/subscriptions/s/resourceGroups/"
               "rg/providers/Microsoft.Compute/virtualMachines/%s\","
               "\"type\":\"Microsoft.Compute/virtualMachines\","
               "\"location\":\"eastus\",\"zones\":[\"2\"],"
               "\"tags\":{%s%s%s\"other\":\"x\"},"
               "\"properties\":{\"vmId\":\"0f47b100\",\"hardwareProfile\":"
               "{\"vmSize\":\"Standard_NC24ads_A100_v4\"},\"priority\":"
               "\"Regular\",\"provisioningState\":\"%s\",\"timeCreated\":"
               "\"2026-11-21T13:00:00+02:00\"}}",
               name, name, inst != NULL ? "\"tenbin-instance\":\"" : "",
               inst != NULL ? inst : "", inst != NULL ? "\"," : "", state),
      0);
}

static void
test_two_pages_of_a_list_filtered_by_instance(void **state)
{
  struct cloud_vm vms[4];
  struct azarm_page p = {.vms = vms, .max = 4, .instance = "tb-1"};
  struct err e = {0};
  struct buf b;

  (void)state;
  buf_init(&b, 1 << 20);
  assert_int_equal(buf_adds(&b, "{\"value\":["), 0);
  add_vm(&b, "a1", "tb-1", "Succeeded");
  assert_int_equal(buf_adds(&b, ","), 0);
  add_vm(&b, "theirs", NULL, "Succeeded");
  assert_int_equal(buf_adds(&b, ","), 0);
  add_vm(&b, "other-broker", "tb-2", "Succeeded");
  assert_int_equal(buf_adds(&b, ","), 0);
  add_vm(&b, "a2", "tb-1", "Creating");
  assert_int_equal(
      buf_adds(&b, "],\"nextLink\":\"https://management.azure.com/"
                   "subscriptions/s/resourceGroups/rg/providers/"
                   "Microsoft.Compute/virtualMachines?api-version="
                   "2024-07-01&$skiptoken=abc\"}"),
      0);
  assert_int_equal(azarm_parse_list(b.data, b.len, &p, &e), 0);
  assert_int_equal(p.n, 2);
  assert_int_equal(p.nout, 2);
  assert_string_equal(vms[0].id, "a1");
  assert_int_equal(vms[0].state, CLOUD_VM_RUNNING);
  assert_string_equal(vms[0].zone, "2");
  assert_string_equal(vms[0].shape, "Standard_NC24ads_A100_v4");
  assert_false(vms[0].spot);
  /* 13:00 at +02:00 is 11:00 UTC. */
  assert_int_equal(vms[0].launched_ms, 1795258800000LL);
  assert_string_equal(vms[1].id, "a2");
  assert_int_equal(vms[1].state, CLOUD_VM_PENDING);
  assert_true(azarm_link_ok(p.next_link, AZARM_ENDPOINT));
  assert_non_null(strstr(p.next_link, "$skiptoken=abc"));

  /* The last page: nextLink null; all VMs kept without a filter, and a
   * small array says how many there were. */
  buf_reset(&b);
  assert_int_equal(buf_adds(&b, "{\"value\":["), 0);
  add_vm(&b, "a3", "tb-1", "Deleting");
  assert_int_equal(buf_adds(&b, ","), 0);
  add_vm(&b, "b1", NULL, "Succeeded");
  assert_int_equal(buf_adds(&b, "],\"nextLink\":null}"), 0);
  p.instance = NULL;
  p.max = 1;
  assert_int_equal(azarm_parse_list(b.data, b.len, &p, &e), 0);
  assert_int_equal(p.n, 1);
  assert_int_equal(p.nout, 2);
  assert_string_equal(vms[0].id, "a3");
  assert_int_equal(vms[0].state, CLOUD_VM_STOPPING);
  assert_string_equal(p.next_link, "");

  /* nextLink absent, and no VMs at all. */
  assert_int_equal(azarm_parse_list("{\"value\":[]}", 12, &p, &e), 0);
  assert_int_equal(p.nout, 0);
  assert_string_equal(p.next_link, "");
  buf_release(&b);
}

static const char vm_get[] =
    "{\"name\":\"gpu-job-42\",\"id\":\"/subscriptions/s/resourceGroups/rg/"
    "providers/Microsoft.Compute/virtualMachines/gpu-job-42\","
    "\"type\":\"Microsoft.Compute/virtualMachines\",\"location\":\"eastus\","
    "\"tags\":{\"Tenbin-Instance\":\"tb-1\",\"TENBIN-NODE\":\"node-7\"},"
    "\"zones\":[\"1\"],\"etag\":\"\\\"1\\\"\","
    "\"properties\":{\"vmId\":\"0f47b100-583c-48e3-a4c0-aefc2c9bbcc1\","
    "\"hardwareProfile\":{\"vmSize\":\"Standard_ND96isr_H100_v5\"},"
    "\"priority\":\"Spot\",\"evictionPolicy\":\"Delete\","
    "\"billingProfile\":{\"maxPrice\":-1},"
    "\"provisioningState\":\"Succeeded\","
    "\"timeCreated\":\"2021-06-27T01:02:38.3138469+00:00\"}}";

/* The cloud block of an elastic Slurm site: ARM's list has no tag
 * filter, so the page is filtered on the cluster's tag (its name case
 * aside, as Azure compares names; its value exactly), and the node tag's
 * value is read into name.  No address: that is the NIC's. */
static void
test_a_list_filtered_by_any_tag_reads_the_name_tag(void **state)
{
  static const char page[] =
      "{\"value\":["
      "{\"name\":\"hpc-1\",\"tags\":{\"ClusterName\":\"ml\","
      "\"SlurmNode\":\"ml-hpc-1\"},\"properties\":{}},"
      "{\"name\":\"hpc-2\",\"tags\":{\"clustername\":\"ML\"},"
      "\"properties\":{}},"
      "{\"name\":\"hpc-3\",\"tags\":{\"other\":\"ml\"},\"properties\":{}},"
      "{\"name\":\"hpc-4\",\"properties\":{}},"
      "{\"name\":\"hpc-5\",\"tags\":{\"CLUSTERNAME\":\"ml\",\"slurmnode\":"
      "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "\"},\"properties\":{}}]}";
  static const char bad[] =
      "{\"value\":[{\"name\":\"a\",\"tags\":{\"clustername\":7}}]}";
  struct cloud_vm vms[4];
  struct azarm_page p = {.vms = vms, .max = 4, .tag_key = "clusterName",
                         .tag_value = "ml", .name_tag = "slurmnode"};
  struct err e = {0};

  (void)state;
  assert_int_equal(azarm_parse_list(page, strlen(page), &p, &e), 0);
  assert_int_equal(p.n, 2);
  assert_int_equal(p.nout, 2);
  assert_string_equal(vms[0].id, "hpc-1");
  assert_string_equal(vms[0].name, "ml-hpc-1");
  assert_string_equal(vms[0].address, "");
  /* one too long to be a node's name is none, not a cut one */
  assert_string_equal(vms[1].id, "hpc-5");
  assert_string_equal(vms[1].name, "");
  /* without a name tag, no name */
  p.name_tag = NULL;
  assert_int_equal(azarm_parse_list(page, strlen(page), &p, &e), 0);
  assert_string_equal(vms[0].name, "");
  /* a value no VM has keeps none; a tag value is compared whole */
  p.tag_value = "m";
  assert_int_equal(azarm_parse_list(page, strlen(page), &p, &e), 0);
  assert_int_equal(p.nout, 0);
  /* a tag value that is not a string is an error naming it */
  assert_int_equal(azarm_parse_list(bad, strlen(bad), &p, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "tag 'clustername'"));
}

static void
test_a_vm_answer_is_read_into_cloud_vm(void **state)
{
  struct cloud_vm vm;
  struct err e = {0};

  (void)state;
  assert_int_equal(azarm_parse_vm(vm_get, strlen(vm_get), &vm, &e), 0);
  assert_string_equal(vm.id, "gpu-job-42");
  assert_int_equal(vm.state, CLOUD_VM_RUNNING);
  assert_string_equal(vm.zone, "1");
  assert_string_equal(vm.shape, "Standard_ND96isr_H100_v5");
  assert_true(vm.spot);
  assert_int_equal(vm.launched_ms, 1624755758313LL);
  assert_string_equal(vm.instance, "tb-1");
  assert_string_equal(vm.node, "node-7");
  assert_string_equal(vm.end_reason, "");
}

/* vm_get with "Succeeded" replaced by state and statuses added. */
static int
parse_state(const char *state, const char *statuses, struct cloud_vm *vm)
{
  char text[2048];
  struct err e = {0};
  int n = snprintf(text, sizeof(text),
                   "{\"name\":\"v\",\"properties\":{\"provisioningState\":"
                   "\"%s\",\"instanceView\":{\"statuses\":[%s]}}}",
                   state, statuses);

  return azarm_parse_vm(text, (size_t)n, vm, &e);
}

static void
test_provisioning_and_power_states_map_to_cloud_states(void **state)
{
  static const struct {
    const char *prov, *statuses;
    enum cloud_vm_state want;
    const char *reason;
  } cases[] = {
      {"Creating", "", CLOUD_VM_PENDING, ""},
      {"Updating", "", CLOUD_VM_PENDING, ""},
      {"Succeeded", "", CLOUD_VM_RUNNING, ""},
      {"Deleting", "", CLOUD_VM_STOPPING, ""},
      {"Failed", "", CLOUD_VM_GONE, "Failed"},
      {"Migrating", "", CLOUD_VM_UNKNOWN, ""},
      {"Failed",
       "{\"code\":\"ProvisioningState/failed/AllocationFailed\"},"
       "{\"code\":\"PowerState/running\"}",
       CLOUD_VM_GONE, "ProvisioningState/failed/AllocationFailed"},
      {"Succeeded",
       "{\"code\":\"ProvisioningState/succeeded\"},"
       "{\"code\":\"PowerState/running\"}",
       CLOUD_VM_RUNNING, ""},
      {"Succeeded", "{\"code\":\"PowerState/starting\"}", CLOUD_VM_PENDING,
       ""},
      {"Succeeded", "{\"code\":\"PowerState/stopped\"}", CLOUD_VM_STOPPING,
       ""},
      {"Succeeded", "{\"code\":\"PowerState/deallocating\"}",
       CLOUD_VM_STOPPING, ""},
      {"Succeeded", "{\"level\":\"Info\"},{\"code\":\"PowerState/"
                    "deallocated\"}", CLOUD_VM_GONE,
       "PowerState/deallocated"},
      {"Creating", "{\"code\":\"PowerState/deallocated\"}",
       CLOUD_VM_PENDING, ""},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct cloud_vm vm;

    assert_int_equal(parse_state(cases[i].prov, cases[i].statuses, &vm), 0);
    if (vm.state != cases[i].want)
      fail_msg("case %zu: state %d, want %d", i, vm.state, cases[i].want);
    assert_string_equal(vm.end_reason, cases[i].reason);
  }
}

static void
test_time_created_offsets_and_fractions(void **state)
{
  static const struct {
    const char *t;
    int64_t ms;
  } ok[] = {
      {"2026-11-21T11:00:00Z", 1795258800000LL},
      {"2026-11-21T11:00:00.5z", 1795258800500LL},
      {"2026-11-21t06:30:00.000000001-04:30", 1795258800000LL},
  };
  static const char *const bad[] = {
      "2026-11-21T11:00:00", "2026-11-21T11:00:00+0200",
      "2026-11-21T11:00:00.Z", "2026-11-21 11:00:00Z",
      "2026-13-21T11:00:00Z", "2026-11-21T11:00:00+25:00",
      "1960-01-01T00:00:00Z", "2026-11-21T11:00:00Zjunk", "",
      "2026-11-21T11:00:00+02:0"};
  char text[256];
  struct cloud_vm vm;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    int n = snprintf(text, sizeof(text),
                     "{\"name\":\"v\",\"properties\":{\"timeCreated\":\"%s\""
                     "}}", ok[i].t);

    assert_int_equal(azarm_parse_vm(text, (size_t)n, &vm, &e), 0);
    assert_int_equal(vm.launched_ms, ok[i].ms);
  }
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int n = snprintf(text, sizeof(text),
                     "{\"name\":\"v\",\"properties\":{\"timeCreated\":\"%s\""
                     "}}", bad[i]);

    if (azarm_parse_vm(text, (size_t)n, &vm, &e) != ERR_SITE)
      fail_msg("'%s' was read as a time", bad[i]);
    assert_non_null(strstr(e.msg, "timeCreated"));
  }
}

/* Error bodies as ARM sends them (contract 3.5), each with its class. */
static void
test_each_refusal_class_from_a_real_error_body(void **state)
{
  static const struct {
    int status;
    const char *body;
    enum cloud_refusal want;
  } cases[] = {
      {409,
       "{\"error\":{\"code\":\"SkuNotAvailable\",\"message\":\"The requested "
       "size for resource '/subscriptions/s/resourceGroups/rg/providers/"
       "Microsoft.Compute/virtualMachines/gpu-job-42' is currently not "
       "available in location 'eastus' zones '1' for subscription 's'. "
       "Please try another size or deploy to a different location or "
       "zones.\",\"target\":\"vmSize\",\"details\":[]}}",
       CLOUD_REFUSED_CAPACITY},
      {409,
       "{\"error\":{\"code\":\"OperationNotAllowed\",\"message\":\"Operation "
       "could not be completed as it results in exceeding approved "
       "standardNDSH100v5Family Cores quota. Additional details - "
       "Deployment Model: Resource Manager, Location: eastus, Current "
       "Limit: 0, Current Usage: 0, Additional Required: 96, (Minimum) New "
       "Limit Required: 96.\"}}",
       CLOUD_REFUSED_QUOTA},
      {409,
       "{\"error\":{\"code\":\"OperationNotAllowed\",\"message\":\"The "
       "operation is not allowed on a VM that is being deleted.\"}}",
       CLOUD_REFUSED_OTHER},
      {429,
       "{\"error\":{\"code\":\"TooManyRequests\",\"message\":\"The request "
       "is being throttled.\"}}",
       CLOUD_REFUSED_THROTTLE},
      {409,
       "{\"error\":{\"code\":\"RetryableErrorDueToAnotherOperation\","
       "\"message\":\"Operation 'Put' is not allowed since another "
       "operation is in progress.\"}}",
       CLOUD_REFUSED_THROTTLE},
      {401,
       "{\"error\":{\"code\":\"ExpiredAuthenticationToken\",\"message\":"
       "\"The access token expiry UTC time is earlier than current UTC "
       "time.\"}}",
       CLOUD_REFUSED_AUTH},
      {401,
       "{\"error\":{\"code\":\"InvalidAuthenticationToken\",\"message\":"
       "\"The access token is invalid.\"}}",
       CLOUD_REFUSED_AUTH},
      {403,
       "{\"error\":{\"code\":\"AuthorizationFailed\",\"message\":\"The "
       "client does not have authorization to perform action.\"}}",
       CLOUD_REFUSED_AUTH},
      {404,
       "{\"error\":{\"code\":\"ResourceNotFound\",\"message\":\"The "
       "Resource 'Microsoft.Compute/virtualMachines/x' under resource "
       "group 'rg' was not found.\"}}",
       CLOUD_REFUSED_NOT_FOUND},
      {404,
       "{\"error\":{\"code\":\"ResourceGroupNotFound\",\"message\":"
       "\"Resource group 'rg' could not be found.\"}}",
       CLOUD_REFUSED_OTHER},
      {500,
       "{\"error\":{\"code\":\"InternalServerError\",\"message\":\"An "
       "unexpected error occured.\"}}",
       CLOUD_REFUSED_TRANSIENT},
      {400,
       "{\"error\":{\"code\":\"InvalidParameter\",\"message\":\"The value "
       "of parameter imageReference.sku is invalid.\",\"target\":"
       "\"imageReference.sku\"}}",
       CLOUD_REFUSED_OTHER},
      {400, "{\"code\":\"QuotaExceeded\",\"message\":\"over quota\"}",
       CLOUD_REFUSED_QUOTA},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct azarm_error ae;
    struct err e = {0};
    enum cloud_refusal r;

    assert_int_equal(azarm_parse_error(cases[i].body, strlen(cases[i].body),
                                       &ae, &e),
                     0);
    r = azarm_refusal(ae.code, ae.message, cases[i].status);
    if (r != cases[i].want)
      fail_msg("case %zu (%s): class %d, want %d", i, ae.code, r,
               cases[i].want);
  }
  /* A status without a body, and an operation's error (status 0). */
  assert_int_equal(azarm_refusal(NULL, NULL, 503), CLOUD_REFUSED_TRANSIENT);
  assert_int_equal(azarm_refusal("", NULL, 429), CLOUD_REFUSED_THROTTLE);
  assert_int_equal(azarm_refusal(NULL, NULL, 404), CLOUD_REFUSED_NOT_FOUND);
  assert_int_equal(azarm_refusal(NULL, NULL, 400), CLOUD_REFUSED_OTHER);
  assert_int_equal(azarm_refusal("ZonalAllocationFailed", NULL, 0),
                   CLOUD_REFUSED_CAPACITY);
  assert_int_equal(azarm_refusal("OverconstrainedAllocationRequest", "", 0),
                   CLOUD_REFUSED_CAPACITY);
  assert_int_equal(azarm_refusal("AllocationFailed", NULL, 0),
                   CLOUD_REFUSED_CAPACITY);
}

static void
test_error_bodies_that_are_not_arm_errors_are_refused(void **state)
{
  static const char *const bad[] = {
      "<html><body>502 Bad Gateway</body></html>", "{}",
      "{\"error\":\"invalid_client\"}", "{\"error\":{\"message\":\"x\"}}",
      "{\"error\":{\"code\":7}}", "[]"};
  struct azarm_error ae;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(azarm_parse_error(bad[i], strlen(bad[i]), &ae, &e),
                     ERR_SITE);
    assert_string_equal(ae.code, "");
    assert_true(e.msg[0] != '\0');
  }
}

static void
test_operation_states(void **state)
{
  static const struct {
    const char *body;
    enum azarm_op_status want;
    const char *code;
  } cases[] = {
      {"{\"name\":\"op1\",\"status\":\"InProgress\",\"startTime\":"
       "\"2026-11-21T13:00:00.000Z\"}",
       AZARM_OP_RUNNING, ""},
      {"{\"status\":\"Succeeded\",\"endTime\":\"2026-11-21T13:02:00Z\"}",
       AZARM_OP_SUCCEEDED, ""},
      {"{\"status\":\"Failed\",\"error\":{\"code\":\"AllocationFailed\","
       "\"message\":\"Allocation failed. We do not have sufficient "
       "capacity for the requested VM size in this region.\"}}",
       AZARM_OP_FAILED, "AllocationFailed"},
      {"{\"status\":\"Canceled\"}", AZARM_OP_CANCELED, ""},
      {"{\"status\":\"Deleting\"}", AZARM_OP_RUNNING, ""},
      {"{\"status\":\"succeeded\",\"error\":null}", AZARM_OP_SUCCEEDED, ""},
  };
  static const char *const bad[] = {
      "{}", "{\"status\":null}", "{\"status\":1}",
      "{\"status\":\"Failed\",\"error\":\"x\"}",
      "{\"status\":\"Failed\",\"error\":{\"code\":[]}}", "not json"};
  struct azarm_operation op;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(azarm_parse_operation(cases[i].body,
                                           strlen(cases[i].body), &op, &e),
                     0);
    assert_int_equal(op.status, cases[i].want);
    assert_string_equal(op.code, cases[i].code);
  }
  assert_int_equal(azarm_refusal(op.code, op.message, 0),
                   CLOUD_REFUSED_OTHER);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(azarm_parse_operation(bad[i], strlen(bad[i]), &op, &e),
                     ERR_SITE);
    assert_true(e.msg[0] != '\0');
  }
}

static void
test_retry_after_is_seconds_capped(void **state)
{
  (void)state;
  assert_int_equal(azarm_retry_after_ms("120"), 120000);
  assert_int_equal(azarm_retry_after_ms(" 5\t"), 5000);
  assert_int_equal(azarm_retry_after_ms("0"), 0);
  assert_int_equal(azarm_retry_after_ms("3601"), 3600000);
  assert_int_equal(azarm_retry_after_ms("99999999999999999999999999999"),
                   3600000);
  assert_int_equal(azarm_retry_after_ms(NULL), -1);
  assert_int_equal(azarm_retry_after_ms(""), -1);
  assert_int_equal(azarm_retry_after_ms("  "), -1);
  assert_int_equal(azarm_retry_after_ms("-1"), -1);
  assert_int_equal(azarm_retry_after_ms("1.5"), -1);
  assert_int_equal(azarm_retry_after_ms("12abc"), -1);
  assert_int_equal(azarm_retry_after_ms("1 2"), -1);
  assert_int_equal(azarm_retry_after_ms("Wed, 21 Oct 2026 07:28:00 GMT"),
                   -1);
}

static void
test_hostile_vm_answers_are_refused_naming_the_field(void **state)
{
  static const struct {
    const char *body;
    const char *names;
  } cases[] = {
      {"{\"name\":7}", "'name'"},
      {"{\"name\":\"\"}", "no name"},
      {"{\"id\":\"/x\"}", "no name"},
      {"{\"name\":\"v\",\"properties\":[]}", "'properties'"},
      {"{\"name\":\"v\",\"properties\":{\"provisioningState\":1}}",
       "'properties.provisioningState'"},
      {"{\"name\":\"v\",\"properties\":{\"hardwareProfile\":"
       "{\"vmSize\":{}}}}",
       "'properties.hardwareProfile.vmSize'"},
      {"{\"name\":\"v\",\"zones\":\"1\"}", "'zones'"},
      {"{\"name\":\"v\",\"zones\":[1]}", "'zones[0]'"},
      {"{\"name\":\"v\",\"tags\":{\"tenbin-node\":5}}", "tag 'tenbin-node'"},
      {"{\"name\":\"v\",\"tags\":[]}", "'tags'"},
      {"{\"name\":\"v\",\"properties\":{\"instanceView\":{\"statuses\":"
       "[5]}}}",
       "status"},
      {"{\"name\":\"v\",\"name\":\"w\"}", "duplicate"},
      {"[1,2]", "not a JSON object"},
      {"{\"name\":\"v\"", "not a JSON object"},
      {"", "not a JSON object"},
  };
  struct cloud_vm vm;
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(azarm_parse_vm(cases[i].body, strlen(cases[i].body),
                                    &vm, &e),
                     ERR_SITE);
    if (strstr(e.msg, cases[i].names) == NULL)
      fail_msg("case %zu: '%s' does not name %s", i, e.msg, cases[i].names);
    assert_string_equal(vm.id, "");
  }
  assert_int_equal(azarm_parse_vm(NULL, 0, &vm, &e), ERR_SITE);
}

static void
test_huge_strings_and_answers_are_refused_or_cut(void **state)
{
  size_t big = 300;
  char *text = malloc(AZARM_ANSWER_MAX + 64);
  struct cloud_vm vm;
  struct azarm_operation op;
  struct azarm_page p = {.vms = &vm, .max = 1};
  struct err e = {0};
  int n;

  (void)state;
  /* A name longer than an id holds: refused, never cut into another. */
  n = snprintf(text, 512, "{\"name\":\"%0*d\"}", (int)big, 0);
  assert_int_equal(azarm_parse_vm(text, (size_t)n, &vm, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "'name' is longer"));
  /* A tenbin tag value too long to be ours: read as not ours. */
  n = snprintf(text, 512, "{\"name\":\"v\",\"tags\":{\"tenbin-instance\":"
               "\"%0*d\"}}", CLOUD_NAME_LEN, 0);
  assert_int_equal(azarm_parse_vm(text, (size_t)n, &vm, &e), 0);
  assert_string_equal(vm.instance, "");
  /* A nextLink past 4 KB. */
  memcpy(text, "{\"value\":[],\"nextLink\":\"", 24);
  memset(text + 24, 'a', AZARM_URL_MAX + 1);
  memcpy(text + 24 + AZARM_URL_MAX + 1, "\"}", 3);
  assert_int_equal(azarm_parse_list(text, strlen(text), &p, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "'nextLink'"));
  /* An error message of 2000 two-byte characters: cut, still UTF-8. */
  memcpy(text, "{\"status\":\"Failed\",\"error\":{\"code\":\"X\","
               "\"message\":\"", 50);
  for (int i = 0; i < 2000; i++)
    memcpy(text + 50 + 2 * i, "\xc3\xa9", 2);
  memcpy(text + 50 + 4000, "\"}}", 4);
  assert_int_equal(azarm_parse_operation(text, strlen(text), &op, &e), 0);
  assert_int_equal(strlen(op.message), CLOUD_MSG_LEN - 1);
  assert_true(utf8_valid(op.message, strlen(op.message)));
  /* An answer past the cap is not even parsed. */
  memset(text, ' ', AZARM_ANSWER_MAX + 1);
  assert_int_equal(azarm_parse_list(text, AZARM_ANSWER_MAX + 1, &p, &e),
                   ERR_SITE);
  assert_non_null(strstr(e.msg, "larger than"));
  /* Nesting deeper than jansson's limit. */
  memset(text, '[', 100000);
  assert_int_equal(azarm_parse_vm(text, 100000, &vm, &e), ERR_SITE);
  free(text);
}

static void
test_a_bad_vm_in_a_list_names_its_index(void **state)
{
  static const char *const bad[] = {
      "{\"value\":[{\"name\":\"a\"},{\"name\":3}]}",
      "{\"value\":[{\"name\":\"a\"},\"b\"]}"};
  struct cloud_vm vms[2];
  struct azarm_page p = {.vms = vms, .max = 2};
  struct err e = {0};

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(azarm_parse_list(bad[i], strlen(bad[i]), &p, &e),
                     ERR_SITE);
    assert_non_null(strstr(e.msg, "value[1]"));
    assert_int_equal(p.n, 0);
  }
  assert_int_equal(azarm_parse_list("{\"value\":{}}", 12, &p, &e), ERR_SITE);
  assert_non_null(strstr(e.msg, "'value'"));
  assert_int_equal(azarm_parse_list("{\"nextLink\":null}", 17, &p, &e),
                   ERR_SITE);
  assert_int_equal(azarm_parse_list("{\"value\":[],\"nextLink\":1}", 25, &p,
                                    &e),
                   ERR_SITE);
  assert_non_null(strstr(e.msg, "'nextLink'"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spot_h100_body_has_the_documented_shape),
      cmocka_unit_test(
          test_subnet_gives_a_nic_configuration_deleted_with_the_vm),
      cmocka_unit_test(test_custom_data_is_base64_of_the_script_bytes),
      cmocka_unit_test(
          test_spot_max_price_is_sent_with_at_most_five_decimals),
      cmocka_unit_test(
          test_body_too_large_for_its_buffer_is_refused_and_left_empty),
      cmocka_unit_test(test_launch_fields_that_azure_would_refuse_are_named),
      cmocka_unit_test(test_vm_names_follow_azure_rules),
      cmocka_unit_test(test_urls_encode_hostile_segments),
      cmocka_unit_test(test_links_to_another_host_are_refused),
      cmocka_unit_test(test_two_pages_of_a_list_filtered_by_instance),
      cmocka_unit_test(test_a_list_filtered_by_any_tag_reads_the_name_tag),
      cmocka_unit_test(test_a_vm_answer_is_read_into_cloud_vm),
      cmocka_unit_test(
          test_provisioning_and_power_states_map_to_cloud_states),
      cmocka_unit_test(test_time_created_offsets_and_fractions),
      cmocka_unit_test(test_each_refusal_class_from_a_real_error_body),
      cmocka_unit_test(
          test_error_bodies_that_are_not_arm_errors_are_refused),
      cmocka_unit_test(test_operation_states),
      cmocka_unit_test(test_retry_after_is_seconds_capped),
      cmocka_unit_test(test_hostile_vm_answers_are_refused_naming_the_field),
      cmocka_unit_test(test_huge_strings_and_answers_are_refused_or_cut),
      cmocka_unit_test(test_a_bad_vm_in_a_list_names_its_index),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
