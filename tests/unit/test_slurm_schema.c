/*
 * Tests for adapters/slurm_schema.c and slurm_v0038.c: slurmrestd's wire
 * format.  The JSON fixtures are real answers of Slurm 22.05.8's
 * slurmrestd (scripts/slurm-testbed), trimmed to the keys that matter
 * plus a few others, unless a comment says it is built from the
 * documented shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters/slurm_schema.h"
#include "spec/sbatch.h"

#define assert_contains(hay, needle)                                       \
  do {                                                                     \
    if (strstr((hay), (needle)) == NULL)                                   \
      fail_msg("'%s' does not contain '%s'", (hay), (needle));             \
  } while (0)

static const struct slurm_schema *
v38(void)
{
  const struct slurm_schema *s = slurm_schema_find("v0.0.38");

  assert_non_null(s);
  return s;
}

static json_t *
load(const char *text)
{
  json_error_t jerr;
  json_t *v = json_loads(text, 0, &jerr);

  if (v == NULL)
    fail_msg("fixture: %s (line %d)", jerr.text, jerr.line);
  return v;
}

/* ---- real answers ---- */

/* GET /slurm/v0.0.38/jobs on onprem: one running job of ours (full
 * object), one pending on Resources, one of another broker, one with no
 * comment, one with a user's comment. */
static const char JOBS_ONPREM[] =
    "{\"meta\":{\"plugin\":{\"type\":\"openapi/v0.0.38\"}},\"errors\":[],"
    "\"jobs\":["
    "{\"account\":\"\",\"accrue_time\":1795281106,\"admin_comment\":\"\","
    "\"array_job_id\":0,\"array_task_id\":null,\"array_max_tasks\":0,"
    "\"batch_flag\":true,\"batch_host\":\"onprem-gpu1\","
    "\"flags\":[\"JOB_WAS_RUNNING\"],\"cluster\":\"onprem\","
    "\"comment\":\"tenbin:abc123:21\",\"core_spec\":null,"
    "\"billable_tres\":1.0,\"deadline\":0,\"dependency\":\"\","
    "\"derived_exit_code\":0,\"end_time\":1826817107,\"exit_code\":0,"
    "\"gres_detail\":[\"gpu:h100:6(IDX:0-5)\"],\"group_id\":1001,"
    "\"job_id\":81,\"job_resources\":{\"nodes\":\"onprem-gpu1\","
    "\"allocated_cores\":1,\"allocated_hosts\":1},"
    "\"job_state\":\"RUNNING\",\"name\":\"run6\",\"nodes\":\"onprem-gpu1\","
    "\"nice\":null,\"node_count\":1,\"partition\":\"gpu\","
    "\"priority\":4294901758,\"start_time\":1795281107,"
    "\"state_reason\":\"None\",\"standard_error\":\"\","
    "\"standard_output\":\"/tmp/cap-%x-%j.out\",\"time_limit\":null,"
    "\"tres_per_job\":\"gres:gpu:h100:6\",\"tres_per_node\":\"\","
    "\"tres_req_str\":\"cpu=1,mem=1G,node=1,billing=1\","
    "\"user_id\":1001,\"user_name\":\"brokertest\","
    "\"current_working_directory\":\"/tmp\"},"
    "{\"job_id\":82,\"job_state\":\"PENDING\",\"state_reason\":\"Resources\","
    "\"comment\":\"tenbin:abc123:22\",\"name\":\"pend4\",\"nodes\":\"\","
    "\"gres_detail\":[],\"tres_per_job\":\"gres:gpu:h100:4\","
    "\"tres_per_node\":\"\",\"node_count\":1,\"exit_code\":0,"
    "\"start_time\":0,\"end_time\":0,"
    "\"standard_output\":\"/tmp/cap-%x-%j.out\",\"array_job_id\":0,"
    "\"array_task_id\":null,\"user_name\":\"brokertest\"},"
    "{\"job_id\":83,\"job_state\":\"PENDING\",\"state_reason\":\"Priority\","
    "\"comment\":\"tenbin:def456:23\",\"name\":\"ex3\",\"nodes\":\"\","
    "\"gres_detail\":[],\"tres_per_job\":\"gres:gpu:1\","
    "\"tres_per_node\":\"\",\"node_count\":1,\"exit_code\":0,"
    "\"start_time\":0,\"end_time\":0,"
    "\"standard_output\":\"/tmp/cap-%x-%j.out\",\"array_job_id\":0,"
    "\"array_task_id\":null,\"user_name\":\"brokertest\"},"
    "{\"job_id\":84,\"job_state\":\"PENDING\",\"state_reason\":\"Priority\","
    "\"comment\":\"\",\"name\":\"sig9\",\"nodes\":\"\",\"gres_detail\":[],"
    "\"tres_per_job\":\"gres:gpu:1\",\"tres_per_node\":\"\","
    "\"node_count\":1,\"exit_code\":0,\"start_time\":0,\"end_time\":0,"
    "\"standard_output\":\"/tmp/cap-%x-%j.out\",\"array_job_id\":0,"
    "\"array_task_id\":null,\"user_name\":\"brokertest\"},"
    "{\"job_id\":85,\"job_state\":\"PENDING\",\"state_reason\":\"Priority\","
    "\"comment\":\"user comment\",\"name\":\"ok0\",\"nodes\":\"\","
    "\"gres_detail\":[],\"tres_per_job\":\"gres:gpu:0\","
    "\"tres_per_node\":\"\",\"node_count\":1,\"exit_code\":0,"
    "\"start_time\":0,\"end_time\":0,"
    "\"standard_output\":\"/tmp/cap-%x-%j.out\",\"array_job_id\":0,"
    "\"array_task_id\":null,\"user_name\":\"brokertest\"}]}";

/* The same jobs once ended: cancelled (15), completed, exit 3 (768),
 * killed by SIGKILL (9). */
static const char JOBS_ENDED[] =
    "{\"errors\":[],\"jobs\":["
    "{\"job_id\":81,\"job_state\":\"CANCELLED\",\"state_reason\":\"None\","
    "\"comment\":\"tenbin:abc123:21\",\"name\":\"run6\","
    "\"nodes\":\"onprem-gpu1\",\"gres_detail\":[],"
    "\"tres_per_job\":\"gres:gpu:h100:6\",\"exit_code\":15,"
    "\"derived_exit_code\":0,\"start_time\":1795281107,"
    "\"end_time\":1795281113},"
    "{\"job_id\":82,\"job_state\":\"COMPLETED\",\"state_reason\":\"None\","
    "\"comment\":\"tenbin:abc123:22\",\"name\":\"pend4\","
    "\"nodes\":\"onprem-gpu1\",\"gres_detail\":[],"
    "\"tres_per_job\":\"gres:gpu:h100:4\",\"exit_code\":0,"
    "\"start_time\":1795281113,\"end_time\":1795281114},"
    "{\"job_id\":83,\"job_state\":\"FAILED\","
    "\"state_reason\":\"NonZeroExitCode\",\"comment\":\"tenbin:def456:23\","
    "\"name\":\"ex3\",\"nodes\":\"onprem-gpu1\",\"gres_detail\":[],"
    "\"tres_per_job\":\"gres:gpu:1\",\"exit_code\":768,"
    "\"start_time\":1795281113,\"end_time\":1795281113},"
    "{\"job_id\":84,\"job_state\":\"FAILED\","
    "\"state_reason\":\"JobLaunchFailure\",\"comment\":\"\",\"name\":\"sig9\","
    "\"nodes\":\"onprem-gpu1\",\"gres_detail\":[],"
    "\"tres_per_job\":\"gres:gpu:1\",\"exit_code\":9,"
    "\"start_time\":1795281113,\"end_time\":1795281113}]}";

/* GET jobs on cloud: "nodes":"2","gpus_per_node":"1" spread over the
 * a10g and the h100 node; "gpus_per_node":"a10g:1" on one node; a held
 * one-node job whose node_count reads 2 (an onprem job, moved here). */
static const char JOBS_CLOUD[] =
    "{\"errors\":[],\"jobs\":["
    "{\"job_id\":1,\"job_state\":\"RUNNING\",\"state_reason\":\"None\","
    "\"comment\":\"tenbin:abc123:7\",\"name\":\"cap-nodes-str\","
    "\"user_name\":\"brokertest\","
    "\"nodes\":\"cloud-a10g-1,cloud-h100-1\","
    "\"gres_detail\":[\"gpu:a10g:1(IDX:0)\",\"gpu:h100:1(IDX:0)\"],"
    "\"tres_per_job\":\"\",\"tres_per_node\":\"gres:gpu:1\","
    "\"node_count\":2,\"exit_code\":0,\"start_time\":1795280988,"
    "\"end_time\":1795281288,\"standard_output\":\"/tmp/cap-%j.out\","
    "\"array_job_id\":0,\"array_task_id\":null,"
    "\"tres_req_str\":\"cpu=1,mem=1G,node=2,billing=1\","
    "\"tres_alloc_str\":\"cpu=2,mem=2G,node=2,billing=2\","
    "\"batch_host\":\"cloud-a10g-1\"},"
    "{\"job_id\":2,\"job_state\":\"RUNNING\",\"state_reason\":\"None\","
    "\"comment\":\"tenbin:abc123:8\",\"name\":\"cap-nodes-arr\","
    "\"user_name\":\"brokertest\",\"nodes\":\"cloud-a10g-1\","
    "\"gres_detail\":[\"gpu:a10g:1(IDX:1)\"],\"tres_per_job\":\"\","
    "\"tres_per_node\":\"gres:gpu:a10g:1\",\"node_count\":1,"
    "\"exit_code\":0,\"start_time\":1795280989,\"end_time\":1795281289,"
    "\"standard_output\":\"/tmp/cap-%j.out\",\"array_job_id\":0,"
    "\"array_task_id\":null},"
    "{\"job_id\":88,\"job_state\":\"PENDING\","
    "\"state_reason\":\"JobHeldUser\",\"comment\":\"tenbin:abc123:9\","
    "\"nodes\":\"\",\"gres_detail\":[],\"tres_per_job\":\"\","
    "\"tres_per_node\":\"gres:gpu:h100:1\",\"node_count\":2,"
    "\"tres_req_str\":\"cpu=2,mem=2G,node=1,billing=2\","
    "\"tres_alloc_str\":\"\",\"exit_code\":0}]}";

/* GET nodes on onprem, idle (full node object). */
static const char NODES_ONPREM[] =
    "{\"meta\":{},\"errors\":[],\"nodes\":[{\"architecture\":\"x86_64\","
    "\"burstbuffer_network_address\":\"\",\"boards\":1,"
    "\"boot_time\":1795271870,\"comment\":\"\",\"cores\":1,"
    "\"cpu_binding\":0,\"cpu_load\":5,\"extra\":\"\","
    "\"free_memory\":23617,\"cpus\":32,\"last_busy\":1795280185,"
    "\"features\":\"\",\"active_features\":\"\",\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"mcs_label\":\"\",\"name\":\"onprem-gpu1\","
    "\"next_state_after_reboot\":\"invalid\",\"address\":\"127.0.0.1\","
    "\"hostname\":\"vm\",\"state\":\"idle\",\"state_flags\":[],"
    "\"next_state_after_reboot_flags\":[],\"owner\":null,"
    "\"partitions\":[\"gpu\"],\"port\":6819,\"real_memory\":256000,"
    "\"reason\":\"\",\"reason_changed_at\":0,\"reason_set_by_user\":null,"
    "\"sockets\":32,\"threads\":1,\"temporary_disk\":0,\"weight\":1,"
    "\"tres\":\"cpu=32,mem=250G,billing=32\",\"slurmd_version\":\"22.05.8\","
    "\"alloc_memory\":0,\"alloc_cpus\":0,\"idle_cpus\":32,"
    "\"tres_used\":null,\"tres_weighted\":0.0}]}";

/* GET nodes on cloud with the two jobs of JOBS_CLOUD running. */
static const char NODES_CLOUD[] =
    "{\"errors\":[],\"nodes\":["
    "{\"name\":\"cloud-a10g-1\",\"state\":\"mixed\",\"state_flags\":[],"
    "\"gres\":\"gpu:a10g:4\",\"gres_used\":\"gpu:a10g:2(IDX:0-1)\","
    "\"gres_drained\":\"N/A\",\"partitions\":[\"gpu\"],\"reason\":\"\","
    "\"alloc_cpus\":2},"
    "{\"name\":\"cloud-h100-1\",\"state\":\"mixed\",\"state_flags\":[],"
    "\"gres\":\"gpu:h100:8\",\"gres_used\":\"gpu:h100:1(IDX:0)\","
    "\"gres_drained\":\"N/A\",\"partitions\":[\"gpu\"],\"reason\":\"\","
    "\"alloc_cpus\":1}]}";

/* Built from the documented shape (the testbed was not drained for
 * this): a draining node with a job on it, a down node, the joined
 * "idle+drain" form, a node of untyped GPUs, one of two types with
 * socket affinity, and a node without GPUs. */
static const char NODES_MIXED_STATES[] =
    "{\"errors\":[],\"nodes\":["
    "{\"name\":\"a1\",\"state\":\"mixed\",\"state_flags\":[\"DRAIN\"],"
    "\"gres\":\"gpu:h100:8\",\"gres_used\":\"gpu:h100:2(IDX:0-1)\"},"
    "{\"name\":\"a2\",\"state\":\"down\","
    "\"state_flags\":[\"NOT_RESPONDING\"],\"gres\":\"gpu:h100:8\","
    "\"gres_used\":\"gpu:h100:0(IDX:N/A)\"},"
    "{\"name\":\"a3\",\"state\":\"idle+drain\",\"gres\":\"gpu:a10g:4\","
    "\"gres_used\":\"gpu:a10g:0(IDX:N/A)\"},"
    "{\"name\":\"a4\",\"state\":\"allocated\",\"state_flags\":[],"
    "\"gres\":\"gpu:2\",\"gres_used\":\"gpu:2(IDX:0-1)\"},"
    "{\"name\":\"a5\",\"state\":\"idle\","
    "\"state_flags\":[\"POWERED_DOWN\"],"
    "\"gres\":\"gpu:H100:4(S:0),gpu:a100:4(S:1),shard:8\","
    "\"gres_used\":\"gpu:h100:1(IDX:0),gpu:a100:0(IDX:N/A),shard:0\"},"
    "{\"name\":\"cpu1\",\"state\":\"idle\",\"state_flags\":[],"
    "\"gres\":\"\",\"gres_used\":\"\"}]}";

/*
 * GET nodes on the testbed's elastic cluster (scripts/slurm-testbed
 * --elastic: two State=CLOUD nodes under power saving), through one job
 * of 2 GPUs, in the order the states came: both powered down at start
 * (the first node's object in full); the job allocated the first node,
 * whose ResumeProgram has not run yet; its slurmd booting; the node up;
 * idle after the job; being suspended.
 */
static const char NODES_ELASTIC_DOWN[] =
    "{\"meta\":{\"plugin\":{\"type\":\"openapi/v0.0.38\"}},\"errors\":[],"
    "\"nodes\":[{\"architecture\":\"\",\"burstbuffer_network_address\":\"\","
    "\"boards\":1,\"boot_time\":0,\"comment\":\"\",\"cores\":1,"
    "\"cpu_binding\":0,\"cpu_load\":4294967294,\"extra\":\"\","
    "\"free_memory\":-2,\"cpus\":32,\"last_busy\":0,\"features\":\"\","
    "\"active_features\":\"\",\"gres\":\"gpu:h100:8\","
    "\"gres_drained\":\"N/A\",\"gres_used\":\"gpu:h100:0(IDX:N/A)\","
    "\"mcs_label\":\"\",\"name\":\"elastic-h100-1\","
    "\"next_state_after_reboot\":\"invalid\",\"address\":\"127.0.0.1\","
    "\"hostname\":\"vm\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],"
    "\"next_state_after_reboot_flags\":[],\"operating_system\":\"\","
    "\"owner\":null,\"partitions\":[\"gpu\"],\"port\":6822,"
    "\"real_memory\":256000,\"reason\":\"\",\"reason_changed_at\":0,"
    "\"reason_set_by_user\":null,\"slurmd_start_time\":0,\"sockets\":32,"
    "\"threads\":1,\"temporary_disk\":0,\"weight\":1,"
    "\"tres\":\"cpu=32,mem=250G,billing=32\",\"slurmd_version\":\"\","
    "\"alloc_memory\":0,\"alloc_cpus\":0,\"idle_cpus\":32,"
    "\"tres_used\":null,\"tres_weighted\":0},"
    "{\"name\":\"elastic-h100-2\",\"state\":\"idle\","
    "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],\"gres\":\"gpu:h100:8\","
    "\"gres_used\":\"gpu:h100:0(IDX:N/A)\",\"boot_time\":0}]}";

/* One elastic node in state (with flags) and gres_used, beside a second
 * one powered down. */
#define NODES_ELASTIC(state, flags, used)                                   \
  "{\"errors\":[],\"nodes\":[{\"name\":\"elastic-h100-1\","                 \
  "\"state\":\"" state "\",\"state_flags\":[" flags "],"                    \
  "\"gres\":\"gpu:h100:8\",\"gres_used\":\"" used "\"},"                    \
  "{\"name\":\"elastic-h100-2\",\"state\":\"idle\","                        \
  "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],\"gres\":\"gpu:h100:8\","   \
  "\"gres_used\":\"gpu:h100:0(IDX:N/A)\"}]}"

static const char NODES_ELASTIC_ALLOCATED[] = NODES_ELASTIC(
    "mixed", "\"CLOUD\",\"POWERED_DOWN\"", "gpu:h100:2(IDX:0-1)");
static const char NODES_ELASTIC_BOOTING[] = NODES_ELASTIC(
    "mixed", "\"CLOUD\",\"NOT_RESPONDING\",\"POWERING_UP\"",
    "gpu:h100:2(IDX:0-1)");
static const char NODES_ELASTIC_UP[] =
    NODES_ELASTIC("mixed", "\"CLOUD\"", "gpu:h100:2(IDX:0-1)");
static const char NODES_ELASTIC_IDLE[] =
    NODES_ELASTIC("idle", "\"CLOUD\"", "gpu:h100:0(IDX:N/A)");
static const char NODES_ELASTIC_SUSPENDING[] =
    NODES_ELASTIC("idle", "\"CLOUD\",\"POWERING_DOWN\"",
                  "gpu:h100:0(IDX:N/A)");

/* GET /slurmdb/v0.0.38/job/1 (research notes), plus a cancelled job
 * whose exit_code is in the documented signal form. */
static const char DB_JOBS[] =
    "{\"errors\":[],\"jobs\":["
    "{\"job_id\":1,\"cluster\":\"onprem\",\"account\":\"broker\","
    "\"user\":\"brokertest\",\"name\":\"train\",\"nodes\":\"onprem-gpu1\","
    "\"comment\":{\"administrator\":\"\",\"job\":\"tenbin:abc123:5\","
    "\"system\":\"\"},"
    "\"state\":{\"current\":\"COMPLETED\",\"reason\":\"None\"},"
    "\"exit_code\":{\"status\":\"SUCCESS\",\"return_code\":0},"
    "\"time\":{\"start\":1795269715,\"end\":1795269717,\"elapsed\":2},"
    "\"tres\":{\"allocated\":[{\"type\":\"cpu\",\"count\":1},"
    "{\"type\":\"mem\",\"count\":1024},"
    "{\"type\":\"gres\",\"name\":\"gpu\",\"id\":1001,\"count\":2}],"
    "\"requested\":[]}},"
    "{\"job_id\":2,\"user\":\"brokertest\",\"name\":\"long\","
    "\"nodes\":\"onprem-gpu1\",\"comment\":{\"job\":\"tenbin:abc123:6\"},"
    "\"state\":{\"current\":\"CANCELLED\",\"reason\":\"None\"},"
    "\"exit_code\":{\"status\":\"SIGNALED\",\"return_code\":0,"
    "\"signal\":{\"signal_id\":15,\"name\":\"Terminated\"}},"
    "\"time\":{\"start\":1795269800,\"end\":1795269860},"
    "\"tres\":{\"allocated\":[],\"requested\":[{\"type\":\"gres\","
    "\"name\":\"gpu:h100\",\"count\":4}]}},"
    "{\"job_id\":3,\"user\":\"brokertest\",\"name\":\"bad\","
    "\"comment\":{\"job\":\"tenbin:abc123:7\"},"
    "\"state\":{\"current\":\"FAILED\",\"reason\":\"NonZeroExitCode\"},"
    "\"exit_code\":{\"status\":\"FAILED\",\"return_code\":3}}]}";

/* POST job/submit. */
static const char SUBMITTED[] =
    "{\"meta\":{\"plugin\":{\"type\":\"openapi/v0.0.38\","
    "\"name\":\"Slurm OpenAPI v0.0.38\"},\"Slurm\":{\"version\":"
    "{\"major\":22,\"micro\":8,\"minor\":5},\"release\":\"22.05.8\"}},"
    "\"errors\":[],\"job_id\":1,\"step_id\":\"BATCH\","
    "\"job_submit_user_msg\":\"\"}";

/* ---- tags and paths ---- */

static void
test_tag_round_trips_for_its_instance_only(void **state)
{
  char tag[SLURM_TAG_MAX];

  (void)state;
  slurm_tag_format(tag, sizeof(tag), "abc123", 42);
  assert_string_equal(tag, "tenbin:abc123:42");
  assert_int_equal(slurm_tag_parse(tag, "abc123"), 42);
  assert_int_equal(slurm_tag_parse(tag, "abc12"), -1);
  assert_int_equal(slurm_tag_parse(tag, "abc1234"), -1);
  assert_int_equal(slurm_tag_parse(tag, "def456"), -1);
}

static void
test_tag_parse_rejects_anything_not_strictly_ours(void **state)
{
  static const char *const bad[] = {
    "tenbin:abc:12x", "tenbin:abc:", "tenbin:abc:0", "tenbin:abc:-3",
    "tenbin:abc: 12", "tenbin:abc:+12", "tenbin:abc:12 ", "Tenbin:abc:12",
    "tenbin:abc", "tenbin:abc:1234567890123456789", "xtenbin:abc:12",
    "tenbin:abc:12:1", "", "user comment"};

  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (slurm_tag_parse(bad[i], "abc") != -1)
      fail_msg("'%s' taken for a tag", bad[i]);
  }
  assert_int_equal(slurm_tag_parse(NULL, "abc"), -1);
  assert_int_equal(slurm_tag_parse("tenbin:abc:007", "abc"), 7);
}

static void
test_schema_is_found_by_version_only(void **state)
{
  (void)state;
  assert_ptr_equal(slurm_schema_find("v0.0.38"), &slurm_schema_v0038);
  assert_null(slurm_schema_find("v0.0.39"));
  assert_null(slurm_schema_find(NULL));
}

static void
test_paths_of_every_endpoint(void **state)
{
  const struct slurm_schema *s = v38();
  char p[64];

  (void)state;
  assert_int_equal(s->path("ping", 0, p, sizeof(p)), 0);
  assert_string_equal(p, "/slurm/v0.0.38/ping");
  assert_int_equal(s->path("jobs", 0, p, sizeof(p)), 0);
  assert_string_equal(p, "/slurm/v0.0.38/jobs");
  assert_int_equal(s->path("job", 81, p, sizeof(p)), 0);
  assert_string_equal(p, "/slurm/v0.0.38/job/81");
  assert_int_equal(s->path("submit", 0, p, sizeof(p)), 0);
  assert_string_equal(p, "/slurm/v0.0.38/job/submit");
  assert_int_equal(s->path("nodes", 0, p, sizeof(p)), 0);
  assert_string_equal(p, "/slurm/v0.0.38/nodes");
  assert_int_equal(s->path("db_job", 7, p, sizeof(p)), 0);
  assert_string_equal(p, "/slurmdb/v0.0.38/job/7");
  assert_int_equal(s->path("diag", 0, p, sizeof(p)), ERR_NOT_FOUND);
  assert_int_equal(s->path("jobs", 0, p, 10), ERR_TOO_LARGE);
}

/* ---- submit ---- */

struct sub {
  struct job_spec spec;
  struct slurm_submit s;
  char *env[4];
};

static void
sub_init(struct sub *x)
{
  memset(x, 0, sizeof(*x));
  jobspec_init(&x->spec);
  x->spec.name = strdup("train");
  x->spec.project = strdup("vision");
  x->spec.nodes = 1;
  x->env[0] = (char *)"PATH=/bin:/usr/bin";
  x->env[1] = (char *)"OPTS=a=b=c";
  x->env[2] = (char *)"TENBIN_JOB_ID=42";
  x->s.spec = &x->spec;
  x->s.tag = "tenbin:abc123:42";
  x->s.workdir = "/scratch/42";
  x->s.stdout_path = "/scratch/42/out-%j.log";
  x->s.env = x->env;
}

static json_t *
body_ok(struct sub *x)
{
  json_t *body = NULL;
  struct err e;

  err_clear(&e);
  if (v38()->submit_body(&x->s, &body, &e) != 0)
    fail_msg("refused: %s", e.msg);
  assert_non_null(body);
  return body;
}

static void
body_bad(struct sub *x, const char *what)
{
  json_t *body = NULL;
  struct err e;

  err_clear(&e);
  assert_int_equal(v38()->submit_body(&x->s, &body, &e), ERR_INVALID);
  assert_null(body);
  assert_contains(e.msg, what);
}

static const char *
job_str(const json_t *body, const char *key)
{
  return json_string_value(json_object_get(json_object_get(body, "job"),
                                           key));
}

static json_int_t
job_int(const json_t *body, const char *key)
{
  const json_t *v = json_object_get(json_object_get(body, "job"), key);

  if (!json_is_integer(v))
    fail_msg("job.%s is not an integer", key);
  return json_integer_value(v);
}

static void
test_submit_body_of_an_argv_job(void **state)
{
  struct sub x;
  char *argv[] = {(char *)"python", (char *)"train.py", NULL};
  json_t *body;
  json_t *env;

  (void)state;
  sub_init(&x);
  x.spec.argv = argv;
  x.spec.time_limit_s = 61; /* 2 minutes: a limit is never cut short */
  x.spec.gpus = 2;
  x.spec.gpu_type = strdup("h100");
  x.s.partition = "gpu";
  x.s.account = "broker";
  body = body_ok(&x);
  assert_string_equal(json_string_value(json_object_get(body, "script")),
                      "#!/bin/sh\nexec 'python' 'train.py'\n");
  assert_string_equal(job_str(body, "name"), "train");
  assert_string_equal(job_str(body, "comment"), "tenbin:abc123:42");
  assert_string_equal(job_str(body, "partition"), "gpu");
  assert_string_equal(job_str(body, "account"), "broker");
  assert_string_equal(job_str(body, "current_working_directory"),
                      "/scratch/42");
  assert_string_equal(job_str(body, "standard_output"),
                      "/scratch/42/out-%j.log");
  assert_null(job_str(body, "standard_error"));
  assert_int_equal(job_int(body, "time_limit"), 2);
  /* A string: v0.0.38 reads the documented [min, max] array as 1. */
  assert_string_equal(job_str(body, "nodes"), "1");
  assert_string_equal(job_str(body, "gpus"), "h100:2");
  assert_null(job_str(body, "gpus_per_node"));
  assert_null(json_object_get(json_object_get(body, "job"), "hold"));
  env = json_object_get(json_object_get(body, "job"), "environment");
  assert_true(json_is_object(env));
  assert_int_equal(json_object_size(env), 3);
  assert_string_equal(json_string_value(json_object_get(env, "PATH")),
                      "/bin:/usr/bin");
  assert_string_equal(json_string_value(json_object_get(env, "OPTS")),
                      "a=b=c");
  json_decref(body);
  x.spec.argv = NULL;
  jobspec_release(&x.spec);
}

/* The script really runs each argument as one word, whatever it holds. */
static void
test_argv_script_quotes_hostile_arguments(void **state)
{
  static const char *const hostile[] = {
    "it's", "$HOME", "a\nb", "`id`", "\"q\"", "'", "", "x;y|z&", "\\n", "*"};
  char *argv[16];
  struct sub x;
  json_t *body;
  const char *script;
  char path[] = "/tmp/test_slurm_schema_XXXXXX";
  char out[512];
  char want[512];
  size_t n = 0;
  size_t wl = 0;
  FILE *f;
  int fd;

  (void)state;
  sub_init(&x);
  argv[n++] = (char *)"printf";
  argv[n++] = (char *)"[%s]";
  for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
    argv[n++] = (char *)hostile[i];
    wl += (size_t)snprintf(want + wl, sizeof(want) - wl, "[%s]", hostile[i]);
  }
  argv[n] = NULL;
  x.spec.argv = argv;
  body = body_ok(&x);
  script = json_string_value(json_object_get(body, "script"));
  assert_contains(script, "exec 'printf' '[%s]' 'it'\\''s' '$HOME' 'a\nb'");
  fd = mkstemp(path);
  assert_true(fd >= 0);
  f = fdopen(fd, "w");
  assert_non_null(f);
  fputs(script, f);
  fclose(f);
  {
    char cmd[128];
    size_t got;

    snprintf(cmd, sizeof(cmd), "/bin/sh %s", path);
    f = popen(cmd, "r");
    assert_non_null(f);
    got = fread(out, 1, sizeof(out) - 1, f);
    out[got] = '\0';
    assert_int_equal(pclose(f), 0);
  }
  unlink(path);
  assert_string_equal(out, want);
  json_decref(body);
  x.spec.argv = NULL;
  jobspec_release(&x.spec);
}

static void
test_submit_body_gpu_requests(void **state)
{
  char *argv[] = {(char *)"true", NULL};
  struct sub x;
  json_t *body;

  (void)state;
  /* Per node, typed, on 2 nodes. */
  sub_init(&x);
  x.spec.argv = argv;
  x.spec.nodes = 2;
  x.spec.gpus = 8;
  x.spec.gpus_per_node = 4;
  x.spec.gpu_type = strdup("a10g");
  body = body_ok(&x);
  assert_string_equal(job_str(body, "gpus_per_node"), "a10g:4");
  assert_string_equal(job_str(body, "nodes"), "2");
  assert_null(job_str(body, "gpus"));
  json_decref(body);
  /* Per node, untyped. */
  free(x.spec.gpu_type);
  x.spec.gpu_type = NULL;
  body = body_ok(&x);
  assert_string_equal(job_str(body, "gpus_per_node"), "4");
  json_decref(body);
  /* Per job, untyped; no time limit, held. */
  x.spec.gpus_per_node = 0;
  x.spec.gpus = 3;
  x.spec.hold = 1;
  body = body_ok(&x);
  assert_string_equal(job_str(body, "gpus"), "3");
  assert_null(job_str(body, "gpus_per_node"));
  assert_null(json_object_get(json_object_get(body, "job"), "time_limit"));
  assert_true(json_is_true(
      json_object_get(json_object_get(body, "job"), "hold")));
  json_decref(body);
  /* No GPU at all. */
  x.spec.gpus = 0;
  body = body_ok(&x);
  assert_null(job_str(body, "gpus"));
  assert_null(job_str(body, "gpus_per_node"));
  json_decref(body);
  x.spec.argv = NULL;
  jobspec_release(&x.spec);
}

/* A batch script goes verbatim; the directives tenbin left for Slurm
 * (as spec/sbatch.c keeps them) become v0.0.38 job properties. */
static void
test_script_job_maps_kept_directives(void **state)
{
  static const char script[] =
      "#!/bin/bash\n"
      "#SBATCH --job-name=train --time=1:00:00\n"
      "#SBATCH --qos=high -C 'ib&nvlink'\n"
      "#SBATCH --mem=4G --mem-per-gpu=512K\n"
      "#SBATCH -c 4 --ntasks=2 --ntasks-per-node=2\n"
      "#SBATCH --exclusive --requeue --nice\n"
      "#SBATCH --dependency=afterok:12 --reservation=maint\n"
      "#SBATCH --mail-type=END,FAIL --mail-user=a@example.org\n"
      "#SBATCH --begin=now+1hour\n"
      "#SBATCH -p debug --licenses=matlab:1 --gres=shard:2,gpu:h100:2\n"
      "#SBATCH --signal=USR1@60 --open-mode=append --time-min=1:30\n"
      "#SBATCH --kill-on-invalid-dep=yes --wait-all-nodes=1\n"
      "#SBATCH --spread-job --oversubscribe --hint=nomultithread\n"
      "#SBATCH --gpu-bind=closest --cpu-freq=Performance --bb=x\n"
      "#SBATCH --delay-boot=60 --core-spec=1 --threads-per-core=1\n"
      "#SBATCH --parsable\n"
      "srun python train.py\n";
  struct sub x;
  json_t *body;
  json_t *job;
  struct err e;

  (void)state;
  sub_init(&x);
  err_clear(&e);
  free(x.spec.name);
  x.spec.name = NULL;
  if (sbatch_parse(script, &x.spec, NULL, &e) != 0)
    fail_msg("sbatch_parse: %s", e.msg);
  x.spec.script = strdup(script);
  x.s.partition = "gpu";
  body = body_ok(&x);
  job = json_object_get(body, "job");
  assert_string_equal(json_string_value(json_object_get(body, "script")),
                      script);
  assert_string_equal(job_str(body, "name"), "train");
  assert_string_equal(job_str(body, "gpus_per_node") != NULL
                          ? job_str(body, "gpus_per_node")
                          : job_str(body, "gpus"),
                      "h100:2");
  assert_int_equal(job_int(body, "time_limit"), 60);
  assert_string_equal(job_str(body, "qos"), "high");
  assert_string_equal(job_str(body, "constraints"), "ib&nvlink");
  assert_int_equal(job_int(body, "memory_per_node"), 4096);
  assert_int_equal(job_int(body, "memory_per_gpu"), 1);
  assert_int_equal(job_int(body, "cpus_per_task"), 4);
  assert_int_equal(job_int(body, "tasks"), 2);
  assert_int_equal(job_int(body, "tasks_per_node"), 2);
  assert_string_equal(job_str(body, "exclusive"), "exclusive");
  assert_true(json_is_true(json_object_get(job, "requeue")));
  assert_int_equal(job_int(body, "nice"), 100);
  assert_string_equal(job_str(body, "dependency"), "afterok:12");
  assert_string_equal(job_str(body, "reservation"), "maint");
  assert_string_equal(job_str(body, "mail_type"), "END,FAIL");
  assert_string_equal(job_str(body, "mail_user"), "a@example.org");
  assert_string_equal(job_str(body, "begin_time"), "now+1hour");
  /* The script's partition wins over the site's choice. */
  assert_string_equal(job_str(body, "partition"), "debug");
  assert_string_equal(job_str(body, "licenses"), "matlab:1");
  assert_string_equal(job_str(body, "gres"), "shard:2");
  assert_string_equal(job_str(body, "signal"), "USR1@60");
  assert_string_equal(job_str(body, "open_mode"), "append");
  assert_int_equal(job_int(body, "time_minimum"), 2);
  assert_true(json_is_true(json_object_get(job,
                                           "kill_on_invalid_dependency")));
  assert_int_equal(job_int(body, "wait_all_nodes"), 1);
  assert_true(json_is_true(json_object_get(job, "spread_job")));
  assert_true(json_is_true(json_object_get(job, "oversubscribe")));
  assert_string_equal(job_str(body, "cpu_binding_hint"), "nomultithread");
  assert_string_equal(job_str(body, "gpu_binding"), "closest");
  assert_string_equal(job_str(body, "cpu_frequency"), "Performance");
  assert_string_equal(job_str(body, "burst_buffer"), "x");
  assert_string_equal(job_str(body, "delay_boot"), "60");
  assert_int_equal(job_int(body, "core_specification"), 1);
  assert_int_equal(job_int(body, "threads_per_core"), 1);
  assert_null(json_object_get(job, "get_user_environment"));
  json_decref(body);
  jobspec_release(&x.spec);
}

static void
test_extras_from_json_in_other_spellings(void **state)
{
  char *argv[] = {(char *)"true", NULL};
  char *extra[] = {(char *)"--qos high", (char *)"-pdebug",
                   (char *)"-n 3", (char *)"--no-requeue",
                   (char *)"--mem-per-cpu=2g", (char *)"--nice=-5",
                   (char *)"--exclusive=user", NULL};
  struct sub x;
  json_t *body;

  (void)state;
  sub_init(&x);
  x.spec.argv = argv;
  x.spec.sbatch_extra = extra;
  body = body_ok(&x);
  assert_string_equal(job_str(body, "qos"), "high");
  assert_string_equal(job_str(body, "partition"), "debug");
  assert_int_equal(job_int(body, "tasks"), 3);
  assert_true(json_is_false(
      json_object_get(json_object_get(body, "job"), "requeue")));
  assert_int_equal(job_int(body, "memory_per_cpu"), 2048);
  assert_int_equal(job_int(body, "nice"), -5);
  assert_string_equal(job_str(body, "exclusive"), "user");
  json_decref(body);
  x.spec.argv = NULL;
  x.spec.sbatch_extra = NULL;
  jobspec_release(&x.spec);
}

static void
test_directives_v0038_cannot_express_fail_the_job(void **state)
{
  static const struct {
    const char *extra;
    const char *msg;
  } cases[] = {
    {"--nodelist=n1", "#SBATCH --nodelist cannot be expressed through "
                      "slurmrestd v0.0.38"},
    {"--tmp=10G", "#SBATCH --tmp cannot be expressed"},
    {"--batch=x", "#SBATCH --batch cannot be expressed"},
    {"-w n1", "#SBATCH -w cannot be expressed"},
    {"--comment=mine", "the comment carries tenbin's tag"},
    {"--signal=B:USR1@60", "B: and R: forms"},
    {"--gres=gpu:2", "GPUs are asked for with tenbin's gpus fields"},
    {"--mem=12X", "#SBATCH --mem: invalid size '12X'"},
    {"--cpus-per-task=two", "#SBATCH --cpus-per-task: invalid count"},
    {"--time-min=soon", "#SBATCH --time-min: invalid duration"},
    {"--kill-on-invalid-dep=maybe", "want yes or no"},
    {"--requeue=1", "#SBATCH --requeue: takes no value"},
    {"--qos", "#SBATCH --qos: missing value"},
    {"--account=other", "#SBATCH --account in sbatch_extra"},
    {"--array=0-3", "job arrays are not supported through tenbin"},
    {"plain", "not an option"},
  };
  char *argv[] = {(char *)"true", NULL};
  char *extra[2] = {NULL, NULL};
  struct sub x;

  (void)state;
  sub_init(&x);
  x.spec.argv = argv;
  x.spec.sbatch_extra = extra;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    extra[0] = (char *)cases[i].extra;
    body_bad(&x, cases[i].msg);
  }
  x.spec.argv = NULL;
  x.spec.sbatch_extra = NULL;
  jobspec_release(&x.spec);
}

static void
test_submit_body_refuses_bad_environment_and_empty_job(void **state)
{
  char *argv[] = {(char *)"true", NULL};
  char *env[] = {(char *)"PATH=/bin", (char *)"NOEQUALS", NULL};
  struct sub x;

  (void)state;
  sub_init(&x);
  x.spec.argv = argv;
  x.s.env = env;
  body_bad(&x, "environment entry 'NOEQUALS' is not KEY=VALUE");
  env[1] = (char *)"BAD=\xff\xfe";
  body_bad(&x, "environment: 'BAD' of the job is not UTF-8 text");
  x.s.env = x.env;
  argv[0] = (char *)"caf\xe9";
  body_bad(&x, "'script' of the job is not UTF-8 text");
  x.spec.argv = NULL;
  body_bad(&x, "neither a script nor argv");
  jobspec_release(&x.spec);
}

static void
test_submit_id_from_the_answer(void **state)
{
  json_t *a = load(SUBMITTED);
  json_t *none = load("{\"errors\":[],\"job_id\":null}");
  int64_t id = 0;
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->submit_id(a, &id, &e), 0);
  assert_int_equal(id, 1);
  assert_int_equal(v38()->submit_id(none, &id, &e), ERR_SITE);
  assert_contains(e.msg, "job_id");
  json_decref(a);
  json_decref(none);
}

/* ---- job listings ---- */

static void
test_jobs_of_a_real_listing(void **state)
{
  json_t *a = load(JOBS_ONPREM);
  struct slurm_job_list l = {0};
  struct err e;
  const struct slurm_job *j;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 5);
  j = &l.jobs[0];
  assert_int_equal(j->slurm_id, 81);
  assert_int_equal(j->tenbin_id, 21);
  assert_string_equal(j->state, "RUNNING");
  assert_string_equal(j->reason, "None");
  assert_string_equal(j->nodes, "onprem-gpu1");
  assert_string_equal(j->alloc, "onprem-gpu1:0-5");
  assert_string_equal(j->stdout_path, "/tmp/cap-%x-%j.out");
  assert_string_equal(j->name, "run6");
  assert_string_equal(j->user, "brokertest");
  assert_int_equal(j->exit_raw, 0);
  assert_int_equal(j->start_s, 1795281107);
  assert_int_equal(j->gpus, 6);
  assert_string_equal(j->gpu_type, "h100");
  assert_int_equal(j->array_job_id, 0);
  j = &l.jobs[1];
  assert_int_equal(j->tenbin_id, 22);
  assert_string_equal(j->state, "PENDING");
  assert_string_equal(j->reason, "Resources");
  assert_string_equal(j->alloc, "");
  assert_string_equal(j->nodes, "");
  assert_int_equal(j->gpus, 4);
  /* Another broker's job, a job without comment, a user's comment. */
  assert_int_equal(l.jobs[2].tenbin_id, -1);
  assert_int_equal(l.jobs[2].gpus, 1);
  assert_string_equal(l.jobs[2].gpu_type, "");
  assert_int_equal(l.jobs[3].tenbin_id, -1);
  assert_int_equal(l.jobs[4].tenbin_id, -1);
  assert_int_equal(l.jobs[4].gpus, 0);
  slurm_job_list_release(&l);
  assert_null(l.jobs);
  assert_int_equal(l.n, 0);
  /* The other broker sees its own job only. */
  assert_int_equal(v38()->jobs(a, "def456", &l, &e), 0);
  assert_int_equal(l.jobs[0].tenbin_id, -1);
  assert_int_equal(l.jobs[2].tenbin_id, 23);
  slurm_job_list_release(&l);
  json_decref(a);
}

static void
test_jobs_on_two_nodes_pair_hosts_with_gpu_indexes(void **state)
{
  json_t *a = load(JOBS_CLOUD);
  struct slurm_job_list l = {0};
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 3);
  assert_int_equal(l.jobs[0].tenbin_id, 7);
  assert_string_equal(l.jobs[0].alloc, "cloud-a10g-1:0,cloud-h100-1:0");
  /* gpus_per_node 1 on 2 nodes. */
  assert_int_equal(l.jobs[0].gpus, 2);
  assert_string_equal(l.jobs[0].gpu_type, "");
  assert_string_equal(l.jobs[1].alloc, "cloud-a10g-1:1");
  assert_int_equal(l.jobs[1].gpus, 1);
  assert_string_equal(l.jobs[1].gpu_type, "a10g");
  /* Counted on the node=1 it asked for, not node_count. */
  assert_int_equal(l.jobs[2].gpus, 1);
  assert_string_equal(l.jobs[2].gpu_type, "h100");
  slurm_job_list_release(&l);
  json_decref(a);
}

static void
test_jobs_answer_must_hold_job_ids(void **state)
{
  json_t *bad = load("{\"jobs\":[{\"job_id\":5,\"job_state\":\"PENDING\"},"
                     "{\"job_id\":\"6\",\"job_state\":\"PENDING\"}]}");
  json_t *odd = load("{\"jobs\":[17]}");
  json_t *none = load("{\"errors\":[]}");
  json_t *bare = load("{\"jobs\":[{\"job_id\":9}]}");
  struct slurm_job_list l = {0};
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(bad, "abc", &l, &e), ERR_SITE);
  assert_contains(e.msg, "jobs[1].job_id");
  assert_int_equal(l.n, 0);
  assert_int_equal(v38()->jobs(odd, "abc", &l, &e), ERR_SITE);
  assert_contains(e.msg, "jobs[0].job_id");
  assert_int_equal(v38()->jobs(none, "abc", &l, &e), ERR_SITE);
  assert_contains(e.msg, "'jobs'");
  assert_int_equal(v38()->db_jobs(bad, "abc", &l, &e), ERR_SITE);
  /* Missing strings read as "", a missing exit code as unknown. */
  assert_int_equal(v38()->jobs(bare, "abc", &l, &e), 0);
  assert_string_equal(l.jobs[0].state, "");
  assert_string_equal(l.jobs[0].user, "");
  assert_int_equal(l.jobs[0].exit_raw, -1);
  assert_int_equal(l.jobs[0].tenbin_id, -1);
  slurm_job_list_release(&l);
  json_decref(bad);
  json_decref(odd);
  json_decref(none);
  json_decref(bare);
}

static void
test_db_jobs_rebuild_wait_status_and_read_comment_object(void **state)
{
  json_t *a = load(DB_JOBS);
  struct slurm_job_list l = {0};
  struct slurm_outcome o;
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->db_jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 3);
  assert_int_equal(l.jobs[0].slurm_id, 1);
  assert_int_equal(l.jobs[0].tenbin_id, 5);
  assert_string_equal(l.jobs[0].state, "COMPLETED");
  assert_int_equal(l.jobs[0].exit_raw, 0);
  assert_int_equal(l.jobs[0].start_s, 1795269715);
  assert_int_equal(l.jobs[0].end_s, 1795269717);
  assert_int_equal(l.jobs[0].gpus, 2);
  assert_string_equal(l.jobs[0].user, "brokertest");
  assert_string_equal(l.jobs[0].nodes, "onprem-gpu1");
  assert_string_equal(l.jobs[0].stdout_path, "");
  slurm_job_outcome(&l.jobs[0], &o);
  assert_int_equal(o.state, JOB_SUCCEEDED);
  assert_int_equal(l.jobs[1].tenbin_id, 6);
  assert_int_equal(l.jobs[1].exit_raw, 15);
  assert_int_equal(l.jobs[1].gpus, 4);
  assert_string_equal(l.jobs[1].gpu_type, "h100");
  slurm_job_outcome(&l.jobs[1], &o);
  assert_int_equal(o.state, JOB_CANCELLED);
  assert_int_equal(o.signal, 15);
  assert_int_equal(l.jobs[2].exit_raw, 768);
  slurm_job_outcome(&l.jobs[2], &o);
  assert_int_equal(o.state, JOB_FAILED);
  assert_int_equal(o.exit_code, 3);
  assert_string_equal(o.reason, "exit code 3");
  slurm_job_list_release(&l);
  json_decref(a);
}

/* slurmdbd answers 200 whatever happened: errors[] says what did. */
static void
test_db_jobs_read_errors_in_a_200_answer(void **state)
{
  json_t *refused = load(
      "{\"jobs\":[],\"errors\":[{\"error_number\":1007,\"error\":"
      "\"Protocol authentication error\",\"source\":\"slurmdb_jobs_get\"}]}");
  json_t *none = load("{\"jobs\":[],\"errors\":[{\"error_number\":9003,"
                      "\"error\":\"Nothing found\"}]}");
  struct slurm_job_list l = {0};
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->db_jobs(refused, "abc", &l, &e), ERR_UNAUTHORIZED);
  assert_contains(e.msg, "Protocol authentication error");
  assert_int_equal(v38()->db_jobs(none, "abc", &l, &e), ERR_NOT_FOUND);
  assert_int_equal(l.n, 0);
  json_decref(refused);
  json_decref(none);
}

/* Slurm 22.05's dbv0.0.38 writes every normal exit as SUCCESS/0: a
 * FAILED job's code is unknown there, not 0. */
static void
test_db_jobs_distrust_a_zero_exit_of_a_failed_job(void **state)
{
  json_t *a = load(
      "{\"jobs\":[{\"job_id\":9,\"comment\":{\"job\":\"tenbin:abc:4\"},"
      "\"state\":{\"current\":\"FAILED\",\"reason\":\"None\"},"
      "\"exit_code\":{\"status\":\"SUCCESS\",\"return_code\":0}}],"
      "\"errors\":[]}");
  struct slurm_job_list l = {0};
  struct slurm_outcome o;
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->db_jobs(a, "abc", &l, &e), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.jobs[0].tenbin_id, 4);
  assert_int_equal(l.jobs[0].exit_raw, -1);
  slurm_job_outcome(&l.jobs[0], &o);
  assert_int_equal(o.state, JOB_FAILED);
  assert_int_equal(o.exit_code, -1);
  slurm_job_list_release(&l);
  json_decref(a);
}

/* ---- nodes ---- */

static const struct adapter_gpu_pool *
pool(const struct adapter_capacity *c, const char *type)
{
  for (int i = 0; i < c->npools; i++) {
    if (strcmp(c->pools[i].type, type) == 0)
      return &c->pools[i];
  }
  fail_msg("no pool '%s'", type);
  return NULL;
}

static void
nodes_ok(const char *text, struct adapter_capacity *c)
{
  json_t *a = load(text);
  struct err e;

  memset(c, 0, sizeof(*c));
  c->reachable = 7;
  c->max_jobs = 9;
  err_clear(&e);
  if (v38()->nodes(a, c, &e) != 0)
    fail_msg("nodes: %s", e.msg);
  /* The adapter's figures are left alone. */
  assert_int_equal(c->reachable, 7);
  assert_int_equal(c->max_jobs, 9);
  json_decref(a);
}

static void
test_nodes_idle_and_busy(void **state)
{
  struct adapter_capacity c;
  const struct adapter_gpu_pool *p;

  (void)state;
  nodes_ok(NODES_ONPREM, &c);
  assert_int_equal(c.nodes, 1);
  assert_int_equal(c.nodes_down, 0);
  assert_int_equal(c.npools, 1);
  p = pool(&c, "h100");
  assert_int_equal(p->total, 8);
  assert_int_equal(p->in_use, 0);
  assert_int_equal(p->down, 0);
  assert_int_equal(p->per_node, 8);
  nodes_ok(NODES_CLOUD, &c);
  assert_int_equal(c.nodes, 2);
  assert_int_equal(c.npools, 2);
  assert_int_equal(pool(&c, "a10g")->total, 4);
  assert_int_equal(pool(&c, "a10g")->in_use, 2);
  assert_int_equal(pool(&c, "h100")->in_use, 1);
  assert_int_equal(pool(&c, "h100")->per_node, 8);
}

static void
test_nodes_drained_down_and_many_types(void **state)
{
  struct adapter_capacity c;
  const struct adapter_gpu_pool *p;

  (void)state;
  nodes_ok(NODES_MIXED_STATES, &c);
  /* a1 (DRAIN), a2 (down), a3 (idle+drain) are down; a4, a5 (powered
   * down cloud node: Slurm starts it for a job) and cpu1 are not. */
  assert_int_equal(c.nodes_down, 3);
  assert_int_equal(c.nodes, 3);
  p = pool(&c, "h100");
  assert_int_equal(p->total, 20);
  assert_int_equal(p->in_use, 3);
  /* a1's 6 idle GPUs and a2's 8; a1's 2 busy ones are in_use only. */
  assert_int_equal(p->down, 14);
  assert_int_equal(p->per_node, 8);
  p = pool(&c, "a10g");
  assert_int_equal(p->total, 4);
  assert_int_equal(p->down, 4);
  p = pool(&c, "gpu");
  assert_int_equal(p->total, 2);
  assert_int_equal(p->in_use, 2);
  p = pool(&c, "a100");
  assert_int_equal(p->total, 4);
  assert_int_equal(p->in_use, 0);
  assert_int_equal(c.npools, 4);
  /* a5's GPUs no job holds are the ones the site grows into. */
  assert_int_equal(pool(&c, "h100")->grow, 3);
  assert_int_equal(p->grow, 4);
  assert_int_equal(pool(&c, "a10g")->grow, 0);
  assert_int_equal(c.grows_on_submit, 1);
}

/* The h100 pool of an answer of the elastic cluster (16 GPUs): what is
 * in use, down, growth and free (what the broker may place at once). */
static void
assert_h100(const char *text, int64_t nodes, int64_t in_use, int64_t down,
            int64_t grow, int64_t free_now)
{
  struct adapter_capacity c;
  const struct adapter_gpu_pool *p;

  nodes_ok(text, &c);
  p = pool(&c, "h100");
  assert_int_equal(c.nodes, nodes);
  assert_int_equal(c.nodes_down, 2 - nodes);
  assert_int_equal(p->total, 16);
  assert_int_equal(p->in_use, in_use);
  assert_int_equal(p->down, down);
  assert_int_equal(p->grow, grow);
  assert_int_equal(p->per_node, 8);
  assert_int_equal(p->total - p->in_use - p->down - p->grow, free_now);
  assert_int_equal(c.grows_on_submit, 1);
}

static void
test_nodes_powered_down_cloud_nodes_grow_and_are_not_down(void **state)
{
  (void)state;
  /* Both nodes can run jobs once Slurm powers them up: none is down,
   * none of their GPUs is free, all 16 are growth. */
  assert_h100(NODES_ELASTIC_DOWN, 2, 0, 0, 16, 0);
}

static void
test_nodes_powering_up_grow_and_hold_their_jobs_gpus(void **state)
{
  (void)state;
  /* Allocated before the ResumeProgram ran, then booting and not
   * responding: the job's 2 GPUs are in use, the node's other 6 still
   * come with it (grow), and not responding while powering up is no
   * failure. */
  assert_h100(NODES_ELASTIC_ALLOCATED, 2, 2, 0, 14, 0);
  assert_h100(NODES_ELASTIC_BOOTING, 2, 2, 0, 14, 0);
}

static void
test_nodes_resumed_cloud_node_is_free_capacity(void **state)
{
  (void)state;
  /* Up (CLOUD alone): its GPUs are in use or free, no longer growth. */
  assert_h100(NODES_ELASTIC_UP, 2, 2, 0, 8, 6);
  assert_h100(NODES_ELASTIC_IDLE, 2, 0, 0, 8, 8);
  /* Being suspended: it takes no job until Slurm powers it up again. */
  assert_h100(NODES_ELASTIC_SUSPENDING, 2, 0, 0, 16, 0);
}

static void
test_nodes_down_or_drained_while_powered_down_stay_down(void **state)
{
  struct adapter_capacity c;
  const struct adapter_gpu_pool *p;

  (void)state;
  /* A node whose boot failed (ResumeTimeout marks it DOWN), a drained
   * one, one not responding while up, and the joined form: Slurm starts
   * no job on any of them. */
  nodes_ok("{\"nodes\":["
           "{\"name\":\"e1\",\"state\":\"down\","
           "\"state_flags\":[\"CLOUD\",\"POWERED_DOWN\"],"
           "\"gres\":\"gpu:h100:8\",\"gres_used\":\"\"},"
           "{\"name\":\"e2\",\"state\":\"idle\","
           "\"state_flags\":[\"CLOUD\",\"DRAIN\",\"POWERED_DOWN\"],"
           "\"gres\":\"gpu:h100:8\",\"gres_used\":\"\"},"
           "{\"name\":\"e3\",\"state\":\"idle\","
           "\"state_flags\":[\"CLOUD\",\"NOT_RESPONDING\"],"
           "\"gres\":\"gpu:h100:8\",\"gres_used\":\"\"},"
           "{\"name\":\"e4\",\"state\":\"IDLE+CLOUD+POWERED_DOWN\","
           "\"gres\":\"gpu:h100:8\",\"gres_used\":\"\"}]}",
           &c);
  p = pool(&c, "h100");
  assert_int_equal(c.nodes_down, 3);
  assert_int_equal(c.nodes, 1);
  assert_int_equal(p->down, 24);
  assert_int_equal(p->grow, 8);
  assert_int_equal(c.grows_on_submit, 1);
}

static void
test_nodes_without_power_saving_never_grow(void **state)
{
  struct adapter_capacity c;

  (void)state;
  c.grows_on_submit = 1;
  nodes_ok(NODES_ONPREM, &c);
  assert_int_equal(pool(&c, "h100")->grow, 0);
  assert_int_equal(c.grows_on_submit, 0);
  nodes_ok(NODES_CLOUD, &c);
  assert_int_equal(pool(&c, "h100")->grow, 0);
  assert_int_equal(c.grows_on_submit, 0);
}

static void
test_nodes_past_the_pool_limit_keep_the_first_types(void **state)
{
  char text[2048];
  size_t n;
  struct adapter_capacity c;

  (void)state;
  n = (size_t)snprintf(text, sizeof(text), "{\"nodes\":[");
  for (int i = 0; i < ADAPTER_MAX_POOLS + 2; i++)
    n += (size_t)snprintf(text + n, sizeof(text) - n,
                          "%s{\"name\":\"n%d\",\"state\":\"idle\","
                          "\"gres\":\"gpu:t%d:1\",\"gres_used\":\"\"}",
                          i > 0 ? "," : "", i, i);
  snprintf(text + n, sizeof(text) - n, "]}");
  nodes_ok(text, &c);
  assert_int_equal(c.npools, ADAPTER_MAX_POOLS);
  assert_int_equal(c.nodes, ADAPTER_MAX_POOLS + 2);
  assert_string_equal(c.pools[0].type, "t0");
}

static void
test_nodes_answer_without_nodes_is_site_error(void **state)
{
  json_t *a = load("{\"errors\":[]}");
  struct adapter_capacity c;
  struct err e;

  (void)state;
  memset(&c, 0, sizeof(c));
  err_clear(&e);
  assert_int_equal(v38()->nodes(a, &c, &e), ERR_SITE);
  assert_contains(e.msg, "'nodes'");
  json_decref(a);
}

/* ---- outcomes ---- */

static void
test_outcome_of_every_state(void **state)
{
  static const struct {
    const char *state;
    const char *reason;
    int64_t raw;
    enum job_state want;
    int code;
    int sig;
    const char *why;
  } cases[] = {
    {"PENDING", "Resources", 0, JOB_SUBMITTED, -1, 0, "PENDING (Resources)"},
    {"PENDING", "None", 0, JOB_SUBMITTED, -1, 0, "PENDING"},
    {"REQUEUE_HOLD", "JobHeldAdmin", 0, JOB_SUBMITTED, -1, 0,
     "REQUEUE_HOLD (JobHeldAdmin)"},
    {"REQUEUED", "", 0, JOB_SUBMITTED, -1, 0, "REQUEUED"},
    {"RESV_DEL_HOLD", "None", 0, JOB_SUBMITTED, -1, 0, "RESV_DEL_HOLD"},
    {"RUNNING", "None", 0, JOB_RUNNING, -1, 0, "RUNNING"},
    {"CONFIGURING", "None", 0, JOB_RUNNING, -1, 0, "CONFIGURING"},
    {"COMPLETING", "None", 0, JOB_RUNNING, -1, 0, "COMPLETING"},
    {"SUSPENDED", "None", 0, JOB_RUNNING, -1, 0, "SUSPENDED"},
    {"COMPLETED", "None", 0, JOB_SUCCEEDED, 0, 0, "exit code 0"},
    {"COMPLETED", "None", -1, JOB_SUCCEEDED, 0, 0, "exit code 0"},
    {"FAILED", "NonZeroExitCode", 768, JOB_FAILED, 3, 0, "exit code 3"},
    {"FAILED", "JobLaunchFailure", 9, JOB_FAILED, -1, 9,
     "killed by signal 9 (SIGKILL)"},
    {"FAILED", "JobLaunchFailure", 0, JOB_FAILED, 0, 0,
     "FAILED (JobLaunchFailure)"},
    {"FAILED", "None", 40, JOB_FAILED, -1, 40, "killed by signal 40"},
    {"CANCELLED", "None", 15, JOB_CANCELLED, -1, 15, "CANCELLED"},
    {"CANCELLED", "None", 0, JOB_CANCELLED, -1, 0, "CANCELLED"},
    {"TIMEOUT", "None", 15, JOB_FAILED, -1, 15, "TIMEOUT"},
    {"NODE_FAIL", "NodeDown", 0, JOB_FAILED, 0, 0, "NODE_FAIL (NodeDown)"},
    {"OUT_OF_MEMORY", "None", 0, JOB_FAILED, 0, 0, "OUT_OF_MEMORY"},
    {"PREEMPTED", "None", 0, JOB_FAILED, 0, 0, "PREEMPTED"},
    {"BOOT_FAIL", "None", 0, JOB_FAILED, 0, 0, "BOOT_FAIL"},
    {"DEADLINE", "None", 0, JOB_FAILED, 0, 0, "DEADLINE"},
    {"WEIRD_NEW", "None", 0, JOB_SUBMITTED, -1, 0,
     "unknown Slurm state WEIRD_NEW"},
  };

  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct slurm_job j;
    struct slurm_outcome o;

    memset(&j, 0, sizeof(j));
    j.state = (char *)cases[i].state;
    j.reason = (char *)cases[i].reason;
    j.exit_raw = cases[i].raw;
    slurm_job_outcome(&j, &o);
    if (o.state != cases[i].want || o.exit_code != cases[i].code ||
        o.signal != cases[i].sig || strcmp(o.reason, cases[i].why) != 0)
      fail_msg("%s/%s/%lld: got %s %d %d '%s'", cases[i].state,
               cases[i].reason, (long long)cases[i].raw,
               job_state_name(o.state), o.exit_code, o.signal, o.reason);
  }
}

static void
test_outcome_of_real_ended_jobs(void **state)
{
  json_t *a = load(JOBS_ENDED);
  struct slurm_job_list l = {0};
  struct slurm_outcome o;
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 4);
  slurm_job_outcome(&l.jobs[0], &o);
  assert_int_equal(o.state, JOB_CANCELLED);
  assert_int_equal(o.signal, 15);
  slurm_job_outcome(&l.jobs[1], &o);
  assert_int_equal(o.state, JOB_SUCCEEDED);
  assert_int_equal(o.exit_code, 0);
  slurm_job_outcome(&l.jobs[2], &o);
  assert_int_equal(o.state, JOB_FAILED);
  assert_int_equal(o.exit_code, 3);
  slurm_job_outcome(&l.jobs[3], &o);
  assert_int_equal(o.state, JOB_FAILED);
  assert_int_equal(o.signal, 9);
  assert_int_equal(o.exit_code, -1);
  assert_string_equal(o.reason, "killed by signal 9 (SIGKILL)");
  slurm_job_list_release(&l);
  json_decref(a);
}

/* GET jobs on onprem (Slurm 22.05): a job that ran and ended within one
 * second, and one cancelled while it was pending. */
static const char JOBS_FAST[] =
    "{\"errors\":[],\"jobs\":["
    "{\"job_id\":3,\"job_state\":\"COMPLETED\",\"state_reason\":\"None\","
    "\"comment\":\"tenbin:abc123:3\",\"name\":\"fast\","
    "\"nodes\":\"onprem-gpu1\",\"gres_detail\":[],\"exit_code\":0,"
    "\"submit_time\":1795727478,\"start_time\":1795727481,"
    "\"end_time\":1795727481},"
    "{\"job_id\":2,\"job_state\":\"CANCELLED\",\"state_reason\":"
    "\"Priority\",\"comment\":\"tenbin:abc123:2\",\"name\":\"pend\","
    "\"nodes\":\"\",\"gres_detail\":[],\"tres_per_job\":\"gres:gpu:h100:8\","
    "\"exit_code\":0,\"submit_time\":1795727478,"
    "\"start_time\":1795727480,\"end_time\":1795727480}]}";

static void
test_outcome_says_when_an_ended_job_ran_and_that_a_pending_one_did_not(
    void **state)
{
  json_t *a = load(JOBS_FAST);
  struct slurm_job_list l = {0};
  struct slurm_job j;
  struct slurm_outcome o;
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 2);
  /* Seen only once it had ended: when it ran is Slurm's start time. */
  slurm_job_outcome(&l.jobs[0], &o);
  assert_int_equal(o.state, JOB_SUCCEEDED);
  assert_int_equal(o.started_ms, 1795727481000LL);
  /* Slurm gives a cancelled pending job its end as start: it never ran. */
  slurm_job_outcome(&l.jobs[1], &o);
  assert_int_equal(o.state, JOB_CANCELLED);
  assert_int_equal(o.started_ms, 0);
  /* Nor did one slurmdbd lists without nodes, nor a pending one. */
  memset(&j, 0, sizeof(j));
  j.state = (char *)"CANCELLED";
  j.nodes = (char *)"None assigned";
  j.start_s = 1795727480;
  slurm_job_outcome(&j, &o);
  assert_int_equal(o.started_ms, 0);
  j.state = (char *)"PENDING";
  j.nodes = (char *)"onprem-gpu1";
  slurm_job_outcome(&j, &o);
  assert_int_equal(o.started_ms, 0);
  slurm_job_list_release(&l);
  json_decref(a);
}

/* ---- errors ---- */

static void
expect_error(int status, const char *body, int code, const char *msg)
{
  struct err e;

  err_clear(&e);
  assert_int_equal(slurm_answer_error(status, body,
                                      body != NULL ? strlen(body) : 0, &e),
                   code);
  assert_int_equal(e.code, code);
  assert_contains(e.msg, msg);
}

static void
test_answer_errors_map_to_our_codes(void **state)
{
  (void)state;
  /* GET job/99999 */
  expect_error(500,
               "{\"errors\":[{\"description\":\"Unable to find "
               "JobId=99999\",\"error_number\":2017,\"error\":\"Invalid job "
               "id specified\",\"source\":\"slurm_load_job\"}]}",
               ERR_NOT_FOUND,
               "slurmrestd 500: Invalid job id specified (Unable to find "
               "JobId=99999) [error 2017]");
  /* The same number under error_code. */
  expect_error(500,
               "{\"errors\":[{\"error_code\":2017,\"error\":\"Invalid job "
               "id specified\"}]}",
               ERR_NOT_FOUND, "[error 2017]");
  /* No X-SLURM-* headers: text/plain. */
  expect_error(401, "Authentication failure", ERR_UNAUTHORIZED,
               "slurmrestd 401: Authentication failure");
  /* Another cluster's token, on ping, jobs, job/85, nodes, DELETE. */
  expect_error(500,
               "{\"errors\":[{\"description\":\"slurmctld config is unable "
               "to load\",\"error_number\":-1,\"error\":\"Unspecified "
               "error\",\"source\":\"slurm_load_ctl_conf\"}]}",
               ERR_UNAUTHORIZED, "slurmctld config is unable to load");
  expect_error(500,
               "{\"errors\":[{\"description\":\"Unable to find JobId=85\","
               "\"error_number\":-1,\"error\":\"Unspecified error\","
               "\"source\":\"slurm_load_job\"}],\"jobs\":[]}",
               ERR_UNAUTHORIZED, "[error -1]");
  expect_error(500, "{\"errors\":[{\"error\":\"Unspecified error\","
                    "\"errno\":-1}]}",
               ERR_UNAUTHORIZED, "Unspecified error [error -1]");
  expect_error(500,
               "{\"errors\":[{\"error_code\":5005,\"error\":\"Zero Bytes "
               "were transmitted or received\"}]}",
               ERR_UNAUTHORIZED, "Zero Bytes");
  /* "gpus":"h100:16" on an 8-GPU node. */
  expect_error(500,
               "{\"errors\":[{\"error_code\":2014,\"error\":\"Requested "
               "node configuration is not available\"}]}",
               ERR_SITE, "not available [error 2014]");
  /* No environment: both errors are kept. */
  expect_error(400,
               "{\"errors\":[{\"error\":\"environment must be set\","
               "\"error_code\":2127},{\"error_code\":9001,\"error\":"
               "\"Failure during parsing\"}]}",
               ERR_INVALID,
               "environment must be set [error 2127]; Failure during "
               "parsing [error 9001]");
  /* A proxy's HTML, and no body at all. */
  expect_error(502, "<html>\r\n<b>Bad Gateway</b></html>", ERR_SITE,
               "slurmrestd 502: <html>  <b>Bad Gateway</b></html>");
  expect_error(503, NULL, ERR_SITE, "slurmrestd 503: no error details");
  expect_error(404, "", ERR_INVALID, "slurmrestd 404");
}

static void
test_answer_error_message_is_bounded(void **state)
{
  char body[8192];
  size_t n;
  struct err e;

  (void)state;
  n = (size_t)snprintf(body, sizeof(body), "{\"errors\":[");
  for (int i = 0; i < 40; i++)
    n += (size_t)snprintf(body + n, sizeof(body) - n,
                          "%s{\"error\":\"problem number %d of many\","
                          "\"error_number\":%d}",
                          i > 0 ? "," : "", i, 3000 + i);
  snprintf(body + n, sizeof(body) - n, "]}");
  err_clear(&e);
  assert_int_equal(slurm_answer_error(500, body, strlen(body), &e),
                   ERR_SITE);
  assert_true(strlen(e.msg) < ERR_MSG_SIZE);
  assert_contains(e.msg, "problem number 0 of many [error 3000]");
}

/* ---- output patterns ---- */

static void
expand_is(const struct slurm_job *j, const char *pattern, const char *want)
{
  char out[256];

  assert_int_equal(slurm_expand_path(pattern, j, out, sizeof(out)), 0);
  assert_string_equal(out, want);
}

static void
test_expand_path_like_slurmd(void **state)
{
  struct slurm_job j;
  char small[8];

  (void)state;
  memset(&j, 0, sizeof(j));
  j.slurm_id = 81;
  j.name = (char *)"run6";
  j.user = (char *)"brokertest";
  j.nodes = (char *)"gpu-[3-4],other";
  expand_is(&j, "/tmp/cap-%x-%j.out", "/tmp/cap-run6-81.out");
  expand_is(&j, "%u/%N/%%j/100%%", "brokertest/gpu-3/%j/100%");
  expand_is(&j, "%5j-%A-%a", "00081-81-4294967294");
  expand_is(&j, "%J %s %n %t", "81.batch batch 0 0");
  expand_is(&j, "odd %Q %", "odd %Q %");
  expand_is(&j, "no\\%j", "no%j");
  j.array_job_id = 80;
  j.array_task_id = 3;
  expand_is(&j, "slurm-%A_%a.out", "slurm-80_3.out");
  j.nodes = (char *)"";
  expand_is(&j, "%N.log", "%N.log");
  j.nodes = (char *)"onprem-gpu1";
  expand_is(&j, "%N.log", "onprem-gpu1.log");
  assert_int_equal(slurm_expand_path("/long/%x/%j", &j, small,
                                     sizeof(small)),
                   ERR_TOO_LARGE);
  assert_string_equal(small, "");
  assert_int_equal(slurm_expand_path("1234567", &j, small, sizeof(small)),
                   0);
  assert_int_equal(slurm_expand_path("12345678", &j, small, sizeof(small)),
                   ERR_TOO_LARGE);
}

/* ---- gres strings ---- */

struct seen {
  char text[512];
  size_t len;
};

static void
record(void *arg, const char *type, int64_t count, const char *idx)
{
  struct seen *s = arg;

  s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len,
                             "[%s %lld %s]", type, (long long)count,
                             idx != NULL ? idx : "-");
}

static void
gres_is(const char *list, const char *want)
{
  struct seen s;

  memset(&s, 0, sizeof(s));
  slurm_gres_each(list, record, &s);
  assert_string_equal(s.text, want);
}

static void
test_gres_strings_in_every_form(void **state)
{
  (void)state;
  gres_is("gres:gpu:h100:2", "[h100 2 -]");
  gres_is("gres:gpu:h100:2(IDX:4-5)", "[h100 2 4-5]");
  gres_is("gres/gpu:H100=2;gres/gpu=1", "[h100 2 -][ 1 -]");
  gres_is("gpu:2", "[ 2 -]");
  gres_is("gpu", "[ 1 -]");
  gres_is("gpu:a10g", "[a10g 1 -]");
  gres_is("gpu:h100:8(S:0-1),shard:4,gpu:a100:2(S:0)",
          "[h100 8 -][a100 2 -]");
  gres_is("gpu:h100:3(IDX:0-1,3),mps:100", "[h100 3 0-1,3]");
  gres_is("gpu:h100:0(IDX:N/A)", "[h100 0 -]");
  gres_is("gpus:3,gpu_mem:10,gpu:x:y:2,gpu:h100:2x,", "");
  gres_is("", "");
}

/* Found by fuzz/fuzz_slurm: a count of 20 digits overflowed int64_t. */
static void
test_gres_count_longer_than_nine_digits_is_skipped(void **state)
{
  (void)state;
  gres_is("gpu:h100:99999999999999999999,gpu:a10g:2", "[a10g 2 -]");
  gres_is("gres/gpu=1234567890", "");
  gres_is("gpu:h100:999999999", "[h100 999999999 -]");
}

/* Found by fuzz/fuzz_slurm: an epoch time of 17 digits overflowed when
 * made milliseconds, in GET jobs and in slurmdbd's answer. */
static void
test_times_too_large_for_milliseconds_are_unknown(void **state)
{
  json_t *a = load(
      "{\"jobs\":[{\"job_id\":1,\"job_state\":\"COMPLETED\","
      "\"comment\":\"tenbin:abc123:1\",\"name\":\"x\","
      "\"nodes\":\"n1\",\"exit_code\":0,"
      "\"start_time\":17952811135281113,"
      "\"end_time\":9223372036854775807},"
      "{\"job_id\":2,\"job_state\":\"FAILED\",\"nodes\":\"n1\","
      "\"start_time\":-5,\"end_time\":1795281113}]}");
  json_t *db = load(
      "{\"jobs\":[{\"job_id\":1,\"nodes\":\"n1\","
      "\"state\":{\"current\":\"COMPLETED\"},"
      "\"time\":{\"start\":9223372036854775807,"
      "\"end\":9223372036854775}}]}");
  struct slurm_job_list l = {0};
  struct slurm_outcome o;
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.jobs[0].start_s, 0);
  assert_int_equal(l.jobs[0].end_s, 0);
  assert_int_equal(l.jobs[1].start_s, 0);
  assert_int_equal(l.jobs[1].end_s, 1795281113);
  slurm_job_outcome(&l.jobs[0], &o);
  assert_int_equal(o.state, JOB_SUCCEEDED);
  assert_int_equal(o.started_ms, 0);
  slurm_job_list_release(&l);
  assert_int_equal(v38()->db_jobs(db, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.jobs[0].start_s, 0);
  /* The largest time whose milliseconds fit is kept. */
  assert_int_equal(l.jobs[0].end_s, 9223372036854775LL);
  slurm_job_outcome(&l.jobs[0], &o);
  assert_int_equal(o.started_ms, 0);
  slurm_job_list_release(&l);
  json_decref(db);
  json_decref(a);
}

/* GPUs per node times a node count that slurmrestd made huge must not
 * overflow: the job's GPUs are read as at most SLURM_JOB_GPUS_MAX. */
static void
test_job_gpus_saturate_instead_of_overflowing(void **state)
{
  json_t *a = load(
      "{\"jobs\":[{\"job_id\":1,\"job_state\":\"PENDING\","
      "\"tres_per_node\":\"gres:gpu:h100:999999999\","
      "\"node_count\":9223372036854775807}]}");
  struct slurm_job_list l = {0};
  struct err e;

  (void)state;
  err_clear(&e);
  assert_int_equal(v38()->jobs(a, "abc123", &l, &e), 0);
  assert_int_equal(l.n, 1);
  assert_int_equal(l.jobs[0].gpus, SLURM_JOB_GPUS_MAX);
  slurm_job_list_release(&l);
  json_decref(a);
}

static void
test_alloc_pairs_hostlist_with_detail(void **state)
{
  const char *two[] = {"gpu:h100:2(IDX:0-1)", "gpu:h100:2(IDX:0,2)"};
  const char *idle[] = {"gpu:h100:0(IDX:N/A)"};
  char *a;

  (void)state;
  a = slurm_gres_alloc("gpu-[1-2]", two, 2);
  assert_string_equal(a, "gpu-1:0-1,gpu-2:0,2");
  free(a);
  a = slurm_gres_alloc("n[09-10]", two, 2);
  assert_string_equal(a, "n09:0-1,n10:0,2");
  free(a);
  a = slurm_gres_alloc("a,b-[7]", two, 2);
  assert_string_equal(a, "a:0-1,b-7:0,2");
  free(a);
  /* Three hosts for two entries, or a form not read: indexes alone. */
  a = slurm_gres_alloc("gpu-[1-3]", two, 2);
  assert_string_equal(a, "0-1;0,2");
  free(a);
  a = slurm_gres_alloc("r[1-2]c[1-2]", two, 2);
  assert_string_equal(a, "0-1;0,2");
  free(a);
  a = slurm_gres_alloc("onprem-gpu1", idle, 1);
  assert_string_equal(a, "");
  free(a);
  a = slurm_gres_alloc("", NULL, 0);
  assert_string_equal(a, "");
  free(a);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tag_round_trips_for_its_instance_only),
    cmocka_unit_test(test_tag_parse_rejects_anything_not_strictly_ours),
    cmocka_unit_test(test_schema_is_found_by_version_only),
    cmocka_unit_test(test_paths_of_every_endpoint),
    cmocka_unit_test(test_submit_body_of_an_argv_job),
    cmocka_unit_test(test_argv_script_quotes_hostile_arguments),
    cmocka_unit_test(test_submit_body_gpu_requests),
    cmocka_unit_test(test_script_job_maps_kept_directives),
    cmocka_unit_test(test_extras_from_json_in_other_spellings),
    cmocka_unit_test(test_directives_v0038_cannot_express_fail_the_job),
    cmocka_unit_test(test_submit_body_refuses_bad_environment_and_empty_job),
    cmocka_unit_test(test_submit_id_from_the_answer),
    cmocka_unit_test(test_jobs_of_a_real_listing),
    cmocka_unit_test(test_jobs_on_two_nodes_pair_hosts_with_gpu_indexes),
    cmocka_unit_test(test_jobs_answer_must_hold_job_ids),
    cmocka_unit_test(test_db_jobs_rebuild_wait_status_and_read_comment_object),
    cmocka_unit_test(test_db_jobs_read_errors_in_a_200_answer),
    cmocka_unit_test(test_db_jobs_distrust_a_zero_exit_of_a_failed_job),
    cmocka_unit_test(test_nodes_idle_and_busy),
    cmocka_unit_test(test_nodes_drained_down_and_many_types),
    cmocka_unit_test(test_nodes_powered_down_cloud_nodes_grow_and_are_not_down),
    cmocka_unit_test(test_nodes_powering_up_grow_and_hold_their_jobs_gpus),
    cmocka_unit_test(test_nodes_resumed_cloud_node_is_free_capacity),
    cmocka_unit_test(test_nodes_down_or_drained_while_powered_down_stay_down),
    cmocka_unit_test(test_nodes_without_power_saving_never_grow),
    cmocka_unit_test(test_nodes_past_the_pool_limit_keep_the_first_types),
    cmocka_unit_test(test_nodes_answer_without_nodes_is_site_error),
    cmocka_unit_test(test_outcome_of_every_state),
    cmocka_unit_test(test_outcome_of_real_ended_jobs),
    cmocka_unit_test(
        test_outcome_says_when_an_ended_job_ran_and_that_a_pending_one_did_not),
    cmocka_unit_test(test_answer_errors_map_to_our_codes),
    cmocka_unit_test(test_answer_error_message_is_bounded),
    cmocka_unit_test(test_expand_path_like_slurmd),
    cmocka_unit_test(test_gres_strings_in_every_form),
    cmocka_unit_test(test_gres_count_longer_than_nine_digits_is_skipped),
    cmocka_unit_test(test_times_too_large_for_milliseconds_are_unknown),
    cmocka_unit_test(test_job_gpus_saturate_instead_of_overflowing),
    cmocka_unit_test(test_alloc_pairs_hostlist_with_detail),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
