/*
 * The #SBATCH directive parser: reads a batch script the way sbatch does
 * and fills a job spec from it.  Pure text processing, no I/O.
 *
 * sbatch reads directives only from the comment block at the top of the
 * script: it stops at the first line that is neither blank nor a comment.
 * Long (--gpus=2, --gpus 2) and short (-G 2, -G2, -N 1) forms are accepted,
 * with shell-like quoting inside a directive line.
 */
#ifndef TENBIN_SPEC_SBATCH_H
#define TENBIN_SPEC_SBATCH_H

#include <getopt.h>
#include <jansson.h>

#include "jobspec.h"
#include "util/err.h"

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

/*
 * The caller's own options on sbatch's command line (tenbin's --site,
 * --help, ...) get val and their value (NULL for no_argument); a
 * non-zero return ends the parse and is returned.
 */
typedef int (*sbatch_own_fn)(void *arg, int val, const char *value,
                             struct err *e);

/*
 * Parse sbatch's command line, argv[0..argc) (what comes before the
 * script), with the directives' rules: long and short forms, clusters,
 * unique abbreviations.  Options end at "--" or at the first argument
 * that is not one; *end gets its index.  own (getopt_long's table, flag
 * NULL; may be NULL) is looked up first, by exact long name or by val as
 * a short option, and handed to own_fn.  The options tenbin interprets
 * become POST /v1/jobs fields in fields (borrowed): name, project, gpus,
 * gpus_per_node, gpu_type, nodes, time_limit, output, error, chdir,
 * export, hold; the others are *extra (new list, strv_free), each
 * "--name[=value]" under sbatch's full name.  Unlike in a directive, an
 * option sbatch does not know is an error: on a command line it is a
 * typo.  Errors name the option ("option '--time': ...").
 */
int sbatch_parse_args(int argc, char **argv, const struct option *own,
                      sbatch_own_fn own_fn, void *own_arg, json_t *fields,
                      char ***extra, int *end, struct err *e) WARN_UNUSED;

/*
 * How sbatch_parse_args reads word: 1 for an option whose value is the
 * next argument, 0 for another option, -1 where options end ("--", or
 * an argument that is not an option).  Unknown options count as 0.
 */
int sbatch_args_arity(const struct option *own, const char *word);

/*
 * Put the uninterpreted options over into *list as sbatch's command line
 * overrides its script: each entry of over replaces every entry of *list
 * for the same option (the text before '='); the rest keep their order.
 * Copies over's strings.
 */
void sbatch_extra_override(char ***list, char *const *over);

/*
 * The warning for an option tenbin keeps for Slurm (new reference):
 * "#SBATCH --mem=4G is not interpreted by tenbin; kept for Slurm sites",
 * or "option --mem=4G ..." when it was not from the script.
 */
json_t *sbatch_extra_warning(const char *extra, int from_script);

#endif
