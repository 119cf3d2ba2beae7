/*
 * Private to jobspec.c and sbatch.c: the field validators both use, so a
 * directive and a JSON field are held to the same rules (libuv's uv__
 * convention for non-static internals).
 *
 * The *_problem functions return NULL when v is acceptable, else a
 * static description of what is wrong ("must be 1 to 64 characters").
 */
#ifndef TENBIN_SPEC_SPEC_INT_H
#define TENBIN_SPEC_SPEC_INT_H

#include <stdint.h>

#include "jobspec.h"
#include "util/err.h"

const char *jobspec__name_problem(const char *v);
const char *jobspec__path_problem(const char *v);
const char *jobspec__extra_problem(const char *v);
/* A time limit as minutes or a Slurm duration, within the spec's cap. */
int jobspec__parse_duration(const char *v, int64_t *seconds, struct err *e);
/* sbatch --export syntax into s->export_mode, env and export_names. */
int jobspec__parse_export(const char *text, struct job_spec *s,
                          struct err *e);

#endif
