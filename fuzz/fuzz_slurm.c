/*
 * slurmrestd's answers as the slurm adapter reads them, through every
 * schema table: the input is one answer body, read as a submit answer,
 * a job list, a slurmdbd job list, a node list and an error answer.
 * Each job read is then mapped to an outcome and its output pattern
 * expanded, as the adapter does when a job ends.
 */
#include "adapters/slurm_schema.h"
#include "fuzz/fuzz.h"

static const char *const versions[] = {"v0.0.38", NULL};

static void
jobs(const struct slurm_job_list *l)
{
  for (size_t i = 0; i < l->n; i++) {
    const struct slurm_job *j = &l->jobs[i];
    struct slurm_outcome o;
    char path[512];

    FUZZ_CHECK(j->state != NULL && j->name != NULL && j->nodes != NULL &&
               j->alloc != NULL && j->stdout_path != NULL);
    slurm_job_outcome(j, &o);
    FUZZ_CHECK(memchr(o.reason, '\0', sizeof(o.reason)) != NULL);
    (void)slurm_expand_path(j->stdout_path, j, path, sizeof(path));
  }
}

static void
answer(const struct slurm_schema *s, const json_t *v)
{
  struct slurm_job_list l = {0};
  struct slurm_node_list nl = {0};
  struct adapter_capacity cap;
  struct err e = {0};
  int64_t id;

  (void)s->submit_id(v, &id, &e);
  if (s->jobs(v, "abc123", &l, &e) == 0)
    jobs(&l);
  slurm_job_list_release(&l);
  if (s->db_jobs != NULL && s->db_jobs(v, "abc123", &l, &e) == 0)
    jobs(&l);
  slurm_job_list_release(&l);
  memset(&cap, 0, sizeof(cap));
  if (s->nodes(v, &cap, &e) == 0)
    FUZZ_CHECK(cap.npools >= 0 && cap.npools <= ADAPTER_MAX_POOLS);
  if (s->node_list(v, &nl, &e) == 0)
    for (size_t i = 0; i < nl.n; i++)
      FUZZ_CHECK(nl.nodes[i].gpus >= 0);
  slurm_node_list_release(&nl);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  json_error_t jerr;
  json_t *v = json_loadb((const char *)data, size, 0, &jerr);
  struct err e = {0};

  if (v != NULL) {
    for (size_t i = 0; versions[i] != NULL; i++)
      answer(slurm_schema_find(versions[i]), v);
    json_decref(v);
  }
  FUZZ_CHECK(slurm_answer_error(500, (const char *)data, size, &e) < 0);
  FUZZ_CHECK(slurm_answer_error(404, (const char *)data, size, &e) < 0);
  return 0;
}
