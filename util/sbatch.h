/*
 * The #SBATCH directive parser: reads a batch script the way sbatch does
 * and fills a job spec from it.  Pure text processing, no I/O.
 *
 * sbatch reads directives only from the comment block at the top of the
 * script: it stops at the first line that is neither blank nor a comment.
 * Long (--gpus=2, --gpus 2) and short (-G 2, -G2, -N 1) forms are accepted,
 * with shell-like quoting inside a directive line.
 */
#ifndef TENBIN_UTIL_SBATCH_H
#define TENBIN_UTIL_SBATCH_H

#include <jansson.h>

#include "err.h"
#include "jobspec.h"

/*
 * Parse the directives of script into s (freshly initialised): name,
 * project (--account), gpus / gpu_type (--gres=gpu[:type]:N, --gpus,
 * --gpus-per-node, -G), nodes (-N, min of a min-max range), time limit
 * (-t), stdout/stderr paths (-o/-e), chdir (-D), export mode and env
 * (--export), hold (-H).  Every other directive is kept verbatim in
 * s->sbatch_extra and named in a warning string appended to warnings
 * (borrowed JSON array; may be NULL).  A directive tenbin interprets but
 * whose value is malformed is an ERR_INVALID naming it, e.g.
 * "#SBATCH --time: invalid duration 'abc'".  s->script is not touched.
 */
int sbatch_parse(const char *script, struct job_spec *s, json_t *warnings,
                 struct err *e) WARN_UNUSED;

#endif
