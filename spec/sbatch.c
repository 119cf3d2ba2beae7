/*
 * The #SBATCH directive parser.  It reads a batch script the way sbatch
 * does: directives are taken only from the block at the top of the script,
 * up to the first line that is neither blank nor a comment; a directive
 * line starts with "#SBATCH" in column one; its options are parsed like a
 * command line (getopt_long: --opt=value, --opt value, -Xvalue, -X value,
 * unambiguous abbreviations of long names), with "..." and '...' quoting
 * and backslash escapes, and an unquoted '#' that starts a word begins a
 * comment.  The options tenbin acts on fill the spec; every other sbatch
 * option is kept verbatim for Slurm sites, with a warning.
 *
 * sbatch's own command line is read by the same code (sbatch_parse_args),
 * so "-p gpu" means on the command line what it means in a directive.
 */
#include "sbatch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"
#include "util/alloc.h"
#include "util/strv.h"
#include "util/timeutil.h"

/*
 * Limits: a header of more than 256 directives or a line over 4 KiB is not
 * a batch script but an attack on the parser; 64 uninterpreted options is
 * jobspec's own limit on sbatch_extra.
 */
#define MAX_DIRECTIVES 256
#define MAX_LINE 4096
#define MAX_EXTRA 64
#define MAX_WORDS (MAX_LINE / 2 + 1)

enum opt_arg { ARG_NONE, ARG_REQUIRED, ARG_OPTIONAL };

enum opt_id {
  OPT_EXTRA = 0, /* kept verbatim for Slurm sites */
  OPT_JOB_NAME,
  OPT_ACCOUNT,
  OPT_GRES,
  OPT_GPUS,
  OPT_GPUS_PER_NODE,
  OPT_NODES,
  OPT_TIME,
  OPT_OUTPUT,
  OPT_ERROR,
  OPT_CHDIR,
  OPT_EXPORT,
  OPT_HOLD,
};

struct sbatch_opt {
  const char *name; /* long name without "--" */
  char short_name;  /* 0 when there is none */
  enum opt_arg arg;
  enum opt_id id;
};

/* sbatch's options (from its manual), sorted by long name. */
static const struct sbatch_opt options[] = {
  {"account", 'A', ARG_REQUIRED, OPT_ACCOUNT},
  {"acctg-freq", 0, ARG_REQUIRED, OPT_EXTRA},
  {"array", 'a', ARG_REQUIRED, OPT_EXTRA},
  {"batch", 0, ARG_REQUIRED, OPT_EXTRA},
  {"bb", 0, ARG_REQUIRED, OPT_EXTRA},
  {"bbf", 0, ARG_REQUIRED, OPT_EXTRA},
  {"begin", 'b', ARG_REQUIRED, OPT_EXTRA},
  {"chdir", 'D', ARG_REQUIRED, OPT_CHDIR},
  {"cluster-constraint", 0, ARG_REQUIRED, OPT_EXTRA},
  {"clusters", 'M', ARG_REQUIRED, OPT_EXTRA},
  {"comment", 0, ARG_REQUIRED, OPT_EXTRA},
  {"constraint", 'C', ARG_REQUIRED, OPT_EXTRA},
  {"container", 0, ARG_REQUIRED, OPT_EXTRA},
  {"container-id", 0, ARG_REQUIRED, OPT_EXTRA},
  {"contiguous", 0, ARG_NONE, OPT_EXTRA},
  {"core-spec", 'S', ARG_REQUIRED, OPT_EXTRA},
  {"cores-per-socket", 0, ARG_REQUIRED, OPT_EXTRA},
  {"cpu-freq", 0, ARG_REQUIRED, OPT_EXTRA},
  {"cpus-per-gpu", 0, ARG_REQUIRED, OPT_EXTRA},
  {"cpus-per-task", 'c', ARG_REQUIRED, OPT_EXTRA},
  {"deadline", 0, ARG_REQUIRED, OPT_EXTRA},
  {"delay-boot", 0, ARG_REQUIRED, OPT_EXTRA},
  {"dependency", 'd', ARG_REQUIRED, OPT_EXTRA},
  {"distribution", 'm', ARG_REQUIRED, OPT_EXTRA},
  {"error", 'e', ARG_REQUIRED, OPT_ERROR},
  {"exclude", 'x', ARG_REQUIRED, OPT_EXTRA},
  {"exclusive", 0, ARG_OPTIONAL, OPT_EXTRA},
  {"export", 0, ARG_REQUIRED, OPT_EXPORT},
  {"export-file", 0, ARG_REQUIRED, OPT_EXTRA},
  {"extra", 0, ARG_REQUIRED, OPT_EXTRA},
  {"extra-node-info", 'B', ARG_REQUIRED, OPT_EXTRA},
  {"get-user-env", 0, ARG_OPTIONAL, OPT_EXTRA},
  {"gid", 0, ARG_REQUIRED, OPT_EXTRA},
  {"gpu-bind", 0, ARG_REQUIRED, OPT_EXTRA},
  {"gpu-freq", 0, ARG_REQUIRED, OPT_EXTRA},
  {"gpus", 'G', ARG_REQUIRED, OPT_GPUS},
  {"gpus-per-node", 0, ARG_REQUIRED, OPT_GPUS_PER_NODE},
  {"gpus-per-socket", 0, ARG_REQUIRED, OPT_EXTRA},
  {"gpus-per-task", 0, ARG_REQUIRED, OPT_EXTRA},
  {"gres", 0, ARG_REQUIRED, OPT_GRES},
  {"gres-flags", 0, ARG_REQUIRED, OPT_EXTRA},
  {"help", 'h', ARG_NONE, OPT_EXTRA},
  {"hint", 0, ARG_REQUIRED, OPT_EXTRA},
  {"hold", 'H', ARG_NONE, OPT_HOLD},
  {"ignore-pbs", 0, ARG_NONE, OPT_EXTRA},
  {"input", 'i', ARG_REQUIRED, OPT_EXTRA},
  {"job-name", 'J', ARG_REQUIRED, OPT_JOB_NAME},
  {"kill-on-invalid-dep", 0, ARG_REQUIRED, OPT_EXTRA},
  {"licenses", 'L', ARG_REQUIRED, OPT_EXTRA},
  {"mail-type", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mail-user", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mcs-label", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mem", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mem-bind", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mem-per-cpu", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mem-per-gpu", 0, ARG_REQUIRED, OPT_EXTRA},
  {"mincpus", 0, ARG_REQUIRED, OPT_EXTRA},
  {"network", 0, ARG_REQUIRED, OPT_EXTRA},
  {"nice", 0, ARG_OPTIONAL, OPT_EXTRA},
  {"no-kill", 'k', ARG_OPTIONAL, OPT_EXTRA},
  {"no-requeue", 0, ARG_NONE, OPT_EXTRA},
  {"nodefile", 'F', ARG_REQUIRED, OPT_EXTRA},
  {"nodelist", 'w', ARG_REQUIRED, OPT_EXTRA},
  {"nodes", 'N', ARG_REQUIRED, OPT_NODES},
  {"ntasks", 'n', ARG_REQUIRED, OPT_EXTRA},
  {"ntasks-per-core", 0, ARG_REQUIRED, OPT_EXTRA},
  {"ntasks-per-gpu", 0, ARG_REQUIRED, OPT_EXTRA},
  {"ntasks-per-node", 0, ARG_REQUIRED, OPT_EXTRA},
  {"ntasks-per-socket", 0, ARG_REQUIRED, OPT_EXTRA},
  {"oom-kill-step", 0, ARG_OPTIONAL, OPT_EXTRA},
  {"open-mode", 0, ARG_REQUIRED, OPT_EXTRA},
  {"output", 'o', ARG_REQUIRED, OPT_OUTPUT},
  {"overcommit", 'O', ARG_NONE, OPT_EXTRA},
  {"oversubscribe", 's', ARG_NONE, OPT_EXTRA},
  {"parsable", 0, ARG_NONE, OPT_EXTRA},
  {"partition", 'p', ARG_REQUIRED, OPT_EXTRA},
  {"power", 0, ARG_REQUIRED, OPT_EXTRA},
  {"prefer", 0, ARG_REQUIRED, OPT_EXTRA},
  {"priority", 0, ARG_REQUIRED, OPT_EXTRA},
  {"profile", 0, ARG_REQUIRED, OPT_EXTRA},
  {"propagate", 0, ARG_OPTIONAL, OPT_EXTRA},
  {"qos", 'q', ARG_REQUIRED, OPT_EXTRA},
  {"quiet", 'Q', ARG_NONE, OPT_EXTRA},
  {"reboot", 0, ARG_NONE, OPT_EXTRA},
  {"requeue", 0, ARG_NONE, OPT_EXTRA},
  {"reservation", 0, ARG_REQUIRED, OPT_EXTRA},
  {"resv-ports", 0, ARG_OPTIONAL, OPT_EXTRA},
  {"segment", 0, ARG_REQUIRED, OPT_EXTRA},
  {"signal", 0, ARG_REQUIRED, OPT_EXTRA},
  {"sockets-per-node", 0, ARG_REQUIRED, OPT_EXTRA},
  {"spread-job", 0, ARG_NONE, OPT_EXTRA},
  {"switches", 0, ARG_REQUIRED, OPT_EXTRA},
  {"test-only", 0, ARG_NONE, OPT_EXTRA},
  {"thread-spec", 0, ARG_REQUIRED, OPT_EXTRA},
  {"threads-per-core", 0, ARG_REQUIRED, OPT_EXTRA},
  {"time", 't', ARG_REQUIRED, OPT_TIME},
  {"time-min", 0, ARG_REQUIRED, OPT_EXTRA},
  {"tmp", 0, ARG_REQUIRED, OPT_EXTRA},
  {"tres-bind", 0, ARG_REQUIRED, OPT_EXTRA},
  {"tres-per-task", 0, ARG_REQUIRED, OPT_EXTRA},
  {"uid", 0, ARG_REQUIRED, OPT_EXTRA},
  {"usage", 0, ARG_NONE, OPT_EXTRA},
  {"use-min-nodes", 0, ARG_NONE, OPT_EXTRA},
  {"verbose", 'v', ARG_NONE, OPT_EXTRA},
  {"version", 'V', ARG_NONE, OPT_EXTRA},
  {"wait", 'W', ARG_NONE, OPT_EXTRA},
  {"wait-all-nodes", 0, ARG_REQUIRED, OPT_EXTRA},
  {"wckey", 0, ARG_REQUIRED, OPT_EXTRA},
  {"workdir", 0, ARG_REQUIRED, OPT_CHDIR}, /* the old name of --chdir */
  {"wrap", 0, ARG_REQUIRED, OPT_EXTRA},
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* One directive line cut into words; heap-allocated once per parse. */
struct line_words {
  char mem[2 * MAX_LINE + 2];
  char *words[MAX_WORDS];
  int nwords;
};

/* What the GPU directives said, settled once the header is read. */
struct gpu_state {
  int64_t total; /* --gpus */
  int has_total;
  int total_line;
  int64_t per_node; /* --gpus-per-node or --gres=gpu */
  int has_per_node;
  int per_node_line;
  char type[32];
  const char *type_opt;
  int type_line;
};

struct parser {
  struct job_spec *s;
  json_t *warnings;
  struct err *e;
  int lineno;
  int ndirectives;
  struct gpu_state gpu;
  /* Command-line mode (sbatch_parse_args): errors name the option, not a
   * line, and what was given is recorded to become JSON fields. */
  int cmdline;
  unsigned set;           /* 1 << enum opt_id of every option given */
  const char *time_raw;   /* --time as written (borrowed) */
  const char *export_raw; /* --export as written (borrowed) */
};

static int
is_space(int c)
{
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

static int
bad(struct parser *p, const char *opt, const char *fmt, ...)
    PRINTF_LIKE(3, 4);

/* Where opt was given: "line N: #SBATCH --opt", or "option '--opt'". */
static void
where(const struct parser *p, const char *opt, char *out, size_t outlen)
{
  if (p->cmdline)
    snprintf(out, outlen, "option '%s'", opt);
  else
    snprintf(out, outlen, "line %d: #SBATCH %s", p->lineno, opt);
}

/* ERR_INVALID "line N: #SBATCH --opt: <formatted reason>". */
static int
bad(struct parser *p, const char *opt, const char *fmt, ...)
{
  char why[ERR_MSG_SIZE];
  char at[96];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  where(p, opt, at, sizeof(at));
  return err_set(p->e, ERR_INVALID, "%s: %s", at, why);
}

/*
 * Cut text (after "#SBATCH") into words as a shell would, without
 * expansions.  ERR_INVALID on an unterminated quote.
 */
static int
split_words(struct parser *p, const char *text, struct line_words *w)
{
  char *out = w->mem;
  const char *c = text;

  w->nwords = 0;
  for (;;) {
    char quote = 0;

    while (is_space((unsigned char)*c))
      c++;
    if (*c == '\0' || *c == '#')
      return 0; /* end of line, or a comment */
    w->words[w->nwords++] = out;
    while (*c != '\0') {
      if (quote == 0 && is_space((unsigned char)*c))
        break;
      if (*c == '\\' && quote != '\'' && c[1] != '\0') {
        *out++ = c[1];
        c += 2;
      } else if (quote != 0 && *c == quote) {
        quote = 0;
        c++;
      } else if (quote == 0 && (*c == '"' || *c == '\'')) {
        quote = *c++;
      } else {
        *out++ = *c++;
      }
    }
    if (quote != 0)
      return err_set(p->e, ERR_INVALID, "line %d: #SBATCH: unterminated %s",
                     p->lineno,
                     quote == '"' ? "double quote" : "single quote");
    *out++ = '\0';
  }
}

/* Exact long name first, then a unique abbreviation (getopt_long). */
static int
find_long(const char *name, size_t len, const struct sbatch_opt **out)
{
  const struct sbatch_opt *found = NULL;
  size_t i;

  for (i = 0; i < NOPTIONS; i++) {
    if (strlen(options[i].name) == len &&
        strncmp(options[i].name, name, len) == 0) {
      *out = &options[i];
      return 0;
    }
  }
  for (i = 0; i < NOPTIONS; i++) {
    if (strncmp(options[i].name, name, len) != 0)
      continue;
    if (found != NULL)
      return ERR_CONFLICT; /* ambiguous */
    found = &options[i];
  }
  *out = found;
  return 0;
}

static const struct sbatch_opt *
find_short(char c)
{
  size_t i;

  for (i = 0; i < NOPTIONS; i++) {
    if (options[i].short_name == c)
      return &options[i];
  }
  return NULL;
}

/* A decimal count in [min, max]; 0 or -1. */
static int
parse_count(const char *v, int64_t min, int64_t max, int64_t *out)
{
  int64_t n = 0;
  size_t i;

  for (i = 0; v[i] != '\0'; i++) {
    if (v[i] < '0' || v[i] > '9' || i >= 9)
      return -1;
    n = n * 10 + (v[i] - '0');
  }
  if (i == 0 || n < min || n > max)
    return -1;
  *out = n;
  return 0;
}

/*
 * Record a GPU type; two directives asking for different types conflict.
 * opt is kept to name the first one later, so it must be a literal.
 */
static int
set_gpu_type(struct parser *p, const char *opt, const char *type,
             size_t len)
{
  char t[sizeof(p->gpu.type)];
  size_t i;

  if (len == 0 || len >= sizeof(t))
    return bad(p, opt, "GPU type must match [A-Za-z0-9_-]{1,31}");
  for (i = 0; i < len; i++) {
    char c = type[i];

    t[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
  }
  t[len] = '\0';
  if (jobspec_gpu_type_problem(t) != NULL)
    return bad(p, opt, "GPU type must match [A-Za-z0-9_-]{1,31}");
  if (p->gpu.type_opt != NULL && strcmp(p->gpu.type, t) != 0) {
    if (p->cmdline)
      return bad(p, opt, "GPU type '%s' conflicts with '%s' from %s", t,
                 p->gpu.type, p->gpu.type_opt);
    return bad(p, opt, "GPU type '%s' conflicts with '%s' from %s on line %d",
               t, p->gpu.type, p->gpu.type_opt, p->gpu.type_line);
  }
  memcpy(p->gpu.type, t, len + 1);
  p->gpu.type_opt = opt;
  p->gpu.type_line = p->lineno;
  return 0;
}

/* "[type:]N" of --gpus and --gpus-per-node. */
static int
parse_typed_count(struct parser *p, const char *opt, const char *v,
                  int64_t *count)
{
  const char *colon = strchr(v, ':');
  const char *num = colon != NULL ? colon + 1 : v;

  if (parse_count(num, 0, JOBSPEC_MAX_GPUS, count) < 0)
    return bad(p, opt,
               "invalid value '%.64s' (want [type:]N with N from 0 to 4096)",
               v);
  if (colon != NULL)
    return set_gpu_type(p, opt, v, (size_t)(colon - v));
  return 0;
}

json_t *
sbatch_extra_warning(const char *extra, int from_script)
{
  char msg[MAX_LINE + 128];

  snprintf(msg, sizeof(msg),
           "%s %s is not interpreted by tenbin; kept for Slurm sites",
           from_script ? "#SBATCH" : "option", extra);
  return json_string(msg);
}

static void
warn_extra(struct parser *p, const char *extra)
{
  if (p->warnings != NULL)
    json_array_append_new(p->warnings, sbatch_extra_warning(extra, 1));
}

/* Keep an option tenbin does not act on, verbatim, for Slurm sites. */
static int
keep_extra(struct parser *p, const char *name, const char *value)
{
  char extra[MAX_LINE + 8];
  char opt[72];
  const char *why;

  if (value != NULL)
    snprintf(extra, sizeof(extra), "--%s=%s", name, value);
  else
    snprintf(extra, sizeof(extra), "--%s", name);
  snprintf(opt, sizeof(opt), "--%.64s", name);
  why = jobspec__extra_problem(extra);
  if (why != NULL)
    return bad(p, opt, "%s", why);
  if (strv_len(p->s->sbatch_extra) >= MAX_EXTRA)
    return bad(p, opt, "more than %d %s tenbin does not interpret",
               MAX_EXTRA, p->cmdline ? "options" : "directives");
  strv_push(&p->s->sbatch_extra, extra);
  warn_extra(p, extra);
  return 0;
}

/*
 * --gres=LIST: the gpu entry ("gpu", "gpu:N", "gpu:type", "gpu:type:N",
 * optionally "gres/gpu...") is a per-node GPU request; the other entries
 * are kept as one --gres for Slurm sites.
 */
static int
parse_gres(struct parser *p, const char *opt, const char *v)
{
  char *copy = xstrdup(v);
  char rest[MAX_LINE];
  char *item;
  char *next;
  size_t restlen = 0;
  int seen_gpu = 0;
  int rc = ERR_INVALID;

  rest[0] = '\0';
  for (item = copy; item != NULL; item = next) {
    char *name = item;
    char *f1;
    char *f2 = NULL;
    int64_t count = 1;

    next = strchr(item, ',');
    if (next != NULL)
      *next++ = '\0';
    if (item[0] == '\0') {
      bad(p, opt, "empty entry in '%.64s'", v);
      goto out;
    }
    if (strncmp(name, "gres/", 5) == 0)
      name += 5;
    f1 = strchr(name, ':');
    if (f1 != NULL) {
      *f1++ = '\0';
      f2 = strchr(f1, ':');
      if (f2 != NULL)
        *f2++ = '\0';
    }
    if (strcmp(name, "gpu") != 0) {
      /* Not ours: put the entry back together and keep it. */
      if (f1 != NULL)
        f1[-1] = ':';
      if (f2 != NULL)
        f2[-1] = ':';
      /* rest holds pieces of v and fits; the check keeps it provable. */
      if (restlen + strlen(item) + 2 > sizeof(rest)) {
        bad(p, opt, "list too long: '%.64s'", v);
        goto out;
      }
      restlen += (size_t)snprintf(rest + restlen, sizeof(rest) - restlen,
                                  "%s%s", restlen > 0 ? "," : "", item);
      continue;
    }
    if (seen_gpu) {
      bad(p, opt, "more than one gpu entry in '%.64s'", v);
      goto out;
    }
    seen_gpu = 1;
    if (f2 != NULL) {
      /* gpu:type:N */
      if (set_gpu_type(p, opt, f1, strlen(f1)) < 0)
        goto out;
      if (parse_count(f2, 0, JOBSPEC_MAX_GPUS, &count) < 0) {
        bad(p, opt, "invalid GPU count in '%.64s' (0 to 4096 per node)", v);
        goto out;
      }
    } else if (f1 != NULL && f1[0] >= '0' && f1[0] <= '9') {
      /* gpu:N */
      if (parse_count(f1, 0, JOBSPEC_MAX_GPUS, &count) < 0) {
        bad(p, opt, "invalid GPU count in '%.64s' (0 to 4096 per node)", v);
        goto out;
      }
    } else if (f1 != NULL) {
      /* gpu:type, one of them */
      if (set_gpu_type(p, opt, f1, strlen(f1)) < 0)
        goto out;
    }
    p->gpu.per_node = count;
    p->gpu.has_per_node = 1;
    p->gpu.per_node_line = p->lineno;
  }
  if (restlen > 0 && keep_extra(p, "gres", rest) < 0)
    goto out;
  rc = 0;
out:
  free(copy);
  return rc;
}

/* --nodes=N or MIN-MAX; the job asks for MIN. */
static int
parse_nodes(struct parser *p, const char *opt, const char *v)
{
  const char *dash = strchr(v, '-');
  char min[16];
  int64_t lo;
  int64_t hi;

  if (dash == NULL) {
    if (parse_count(v, 1, JOBSPEC_MAX_NODES, &lo) < 0)
      goto invalid;
    p->s->nodes = lo;
    return 0;
  }
  if ((size_t)(dash - v) >= sizeof(min))
    goto invalid;
  memcpy(min, v, (size_t)(dash - v));
  min[dash - v] = '\0';
  if (parse_count(min, 1, JOBSPEC_MAX_NODES, &lo) < 0 ||
      parse_count(dash + 1, 1, JOBSPEC_MAX_NODES, &hi) < 0 || lo > hi)
    goto invalid;
  p->s->nodes = lo;
  return 0;
invalid:
  return bad(p, opt,
             "invalid value '%.64s' (want N or MIN-MAX, from 1 to 1024)", v);
}

static int
set_string(struct parser *p, const char *opt, const char *v,
           const char *(*problem)(const char *), char **dst)
{
  const char *why = problem(v);

  if (why != NULL)
    return bad(p, opt, "%s", why);
  free(*dst);
  *dst = xstrdup(v);
  return 0;
}

/* Act on one option; opt is its display name ("--time"). */
static int
apply(struct parser *p, const struct sbatch_opt *o, const char *value)
{
  char opt[64];
  struct job_spec *s = p->s;
  int64_t secs;
  int64_t n;

  char at[96];

  snprintf(opt, sizeof(opt), "--%s", o->name);
  where(p, opt, at, sizeof(at));
  p->set |= 1u << o->id;
  switch (o->id) {
  case OPT_EXTRA:
    return keep_extra(p, o->name, value);
  case OPT_JOB_NAME:
    return set_string(p, opt, value, jobspec__name_problem, &s->name);
  case OPT_ACCOUNT:
    return set_string(p, opt, value, jobspec_ident_problem, &s->project);
  case OPT_OUTPUT:
    return set_string(p, opt, value, jobspec__path_problem,
                      &s->stdout_path);
  case OPT_ERROR:
    return set_string(p, opt, value, jobspec__path_problem,
                      &s->stderr_path);
  case OPT_CHDIR:
    return set_string(p, opt, value, jobspec__path_problem, &s->chdir);
  case OPT_GRES:
    return parse_gres(p, "--gres", value);
  case OPT_GPUS:
    if (parse_typed_count(p, "--gpus", value, &n) < 0)
      return ERR_INVALID;
    p->gpu.total = n;
    p->gpu.has_total = 1;
    p->gpu.total_line = p->lineno;
    return 0;
  case OPT_GPUS_PER_NODE:
    if (parse_typed_count(p, "--gpus-per-node", value, &n) < 0)
      return ERR_INVALID;
    p->gpu.per_node = n;
    p->gpu.has_per_node = 1;
    p->gpu.per_node_line = p->lineno;
    return 0;
  case OPT_NODES:
    return parse_nodes(p, opt, value);
  case OPT_TIME:
    if (jobspec__parse_duration(value, &secs, p->e) < 0)
      return err_prefix(p->e, "%s", at);
    s->time_limit_s = secs;
    p->time_raw = value;
    return 0;
  case OPT_EXPORT:
    /* The last --export wins, values included (getopt's rule). */
    strv_free(s->env);
    s->env = NULL;
    if (jobspec__parse_export(value, s, p->e) < 0)
      return err_prefix(p->e, "%s", at);
    p->export_raw = value;
    return 0;
  case OPT_HOLD:
    s->hold = 1;
    return 0;
  }
  return err_set(p->e, ERR_INTERNAL, "unhandled sbatch option");
}

static int
count_directive(struct parser *p)
{
  /* A command line is bounded by the kernel, not by this limit. */
  if (p->cmdline)
    return 0;
  if (++p->ndirectives > MAX_DIRECTIVES)
    return err_set(p->e, ERR_INVALID,
                   "line %d: more than %d #SBATCH directives", p->lineno,
                   MAX_DIRECTIVES);
  return 0;
}

/*
 * "--name[=value]" at words[*i]; may consume the next word as value.  An
 * option the table does not know is kept in a directive (a newer Slurm
 * may know it) and an error on a command line (there it is a typo).
 */
static int
long_option(struct parser *p, char *const *words, int nwords, int *i)
{
  const char *word = words[*i] + 2;
  const char *eq = strchr(word, '=');
  size_t len = eq != NULL ? (size_t)(eq - word) : strlen(word);
  const char *value = eq != NULL ? eq + 1 : NULL;
  const struct sbatch_opt *o = NULL;
  char opt[72];

  snprintf(opt, sizeof(opt), "--%.*s", (int)(len > 64 ? 64 : len), word);
  if (len == 0 && p->cmdline)
    return err_set(p->e, ERR_INVALID, "unexpected argument '%.64s'",
                   words[*i]);
  if (len == 0)
    return err_set(p->e, ERR_INVALID,
                   "line %d: #SBATCH: unexpected argument '%.64s'", p->lineno,
                   words[*i]);
  if (find_long(word, len, &o) < 0)
    return bad(p, opt, "ambiguous option");
  if (o == NULL && p->cmdline)
    return err_set(p->e, ERR_INVALID, "unknown option '%s'", opt);
  if (o == NULL) {
    /* Unknown to this table: newer Slurm may know it; keep it as is. */
    char name[MAX_LINE];

    snprintf(name, sizeof(name), "%.*s", (int)len, word);
    return keep_extra(p, name, value);
  }
  snprintf(opt, sizeof(opt), "--%s", o->name);
  if (o->arg == ARG_NONE && value != NULL)
    return bad(p, opt, "takes no value");
  if (o->arg == ARG_REQUIRED && value == NULL) {
    if (*i + 1 >= nwords)
      return bad(p, opt, "missing value");
    value = words[++*i];
  }
  return apply(p, o, value);
}

/* "-Xvalue", "-X value" or a cluster of flags such as "-Hv". */
static int
short_options(struct parser *p, char *const *words, int nwords, int *i)
{
  const char *word = words[*i];
  size_t j;

  for (j = 1; word[j] != '\0'; j++) {
    const struct sbatch_opt *o = find_short(word[j]);
    const char *value = NULL;
    char opt[3] = {'-', word[j], '\0'};

    if (o == NULL) {
      if (p->cmdline)
        return err_set(p->e, ERR_INVALID, "unknown option '%s'", opt);
      return bad(p, opt, "unknown option");
    }
    if (j > 1 && count_directive(p) < 0)
      return ERR_INVALID;
    if (o->arg != ARG_NONE && word[j + 1] != '\0') {
      value = word + j + 1;
    } else if (o->arg == ARG_REQUIRED) {
      if (*i + 1 >= nwords)
        return bad(p, opt, "missing value");
      value = words[++*i];
    }
    if (apply(p, o, value) < 0)
      return ERR_INVALID;
    if (value != NULL)
      break;
  }
  return 0;
}

static int
directive_line(struct parser *p, const char *text, struct line_words *w)
{
  int i;

  if (split_words(p, text, w) < 0)
    return ERR_INVALID;
  for (i = 0; i < w->nwords; i++) {
    const char *word = w->words[i];
    int rc;

    if (count_directive(p) < 0)
      return ERR_INVALID;
    if (word[0] == '-' && word[1] == '-' && word[2] != '\0')
      rc = long_option(p, w->words, w->nwords, &i);
    else if (word[0] == '-' && word[1] != '\0' && word[1] != '-')
      rc = short_options(p, w->words, w->nwords, &i);
    else
      rc = err_set(p->e, ERR_INVALID,
                   "line %d: #SBATCH: unexpected argument '%.64s' (options "
                   "tenbin does not know take --opt=value)",
                   p->lineno, word);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* Settle gpus and gpus_per_node once every directive is read. */
static int
finish_gpus(struct parser *p)
{
  struct job_spec *s = p->s;
  struct gpu_state *g = &p->gpu;

  if (g->has_per_node) {
    int64_t total = g->per_node * s->nodes;

    if (total > JOBSPEC_MAX_GPUS)
      return err_set(p->e, ERR_INVALID,
                     "line %d: #SBATCH: %lld GPUs per node x %lld nodes is "
                     "more than %d GPUs",
                     g->per_node_line, (long long)g->per_node,
                     (long long)s->nodes, JOBSPEC_MAX_GPUS);
    if (g->has_total && g->total != total)
      return err_set(p->e, ERR_INVALID,
                     "line %d: #SBATCH --gpus=%lld disagrees with %lld GPUs "
                     "per node x %lld nodes",
                     g->total_line, (long long)g->total,
                     (long long)g->per_node, (long long)s->nodes);
    s->gpus = total;
    s->gpus_per_node = g->per_node;
  } else if (g->has_total) {
    s->gpus = g->total;
    s->gpus_per_node = 0;
  }
  if (g->type_opt != NULL) {
    free(s->gpu_type);
    s->gpu_type = xstrdup(g->type);
  }
  return 0;
}

int
sbatch_parse(const char *script, struct job_spec *s, json_t *warnings,
             struct err *e)
{
  struct parser p;
  struct line_words *w = NULL;
  char *line = NULL;
  const char *c = script;
  int rc = ERR_INVALID;

  memset(&p, 0, sizeof(p));
  p.s = s;
  p.warnings = warnings;
  p.e = e;
  if (strncmp(script, "#!", 2) != 0)
    return err_set(e, ERR_INVALID,
                   "script must start with '#!' (an interpreter line), as "
                   "sbatch requires");
  /* sbatch refuses these too: the shell would see "\r" in every line. */
  if (strstr(script, "\r\n") != NULL)
    return err_set(e, ERR_INVALID,
                   "script has DOS line breaks (\\r\\n); sbatch refuses "
                   "them");
  w = xmalloc(sizeof(*w));
  line = xmalloc(MAX_LINE + 1);
  while (*c != '\0') {
    const char *end = strchr(c, '\n');
    size_t len = end != NULL ? (size_t)(end - c) : strlen(c);
    const char *line_start = c;
    size_t k;

    p.lineno++;
    c += len + (end != NULL ? 1 : 0);
    if (len >= 7 && strncmp(line_start, "#SBATCH", 7) == 0 &&
        (len == 7 || is_space((unsigned char)line_start[7]))) {
      /* Only directives are copied, so only they have a length limit. */
      if (len > MAX_LINE) {
        err_set(e, ERR_INVALID, "line %d: longer than %d bytes", p.lineno,
                MAX_LINE);
        goto out;
      }
      memcpy(line, line_start, len);
      line[len] = '\0';
      if (directive_line(&p, line + 7, w) < 0)
        goto out;
      continue;
    }
    for (k = 0; k < len && is_space((unsigned char)line_start[k]); k++)
      ;
    if (k < len && line_start[k] != '#')
      break; /* the first command: sbatch reads no further */
  }
  if (finish_gpus(&p) < 0)
    goto out;
  rc = 0;
out:
  free(line);
  free(w);
  return rc;
}

/* ---- sbatch's command line ---- */

/* own's entry for "--name[=v]" (exact) or "-X[v]" (val 'X'), else NULL. */
static const struct option *
own_option(const struct option *own, const char *word, const char **value)
{
  size_t i;

  *value = NULL;
  for (i = 0; own != NULL && own[i].name != NULL; i++) {
    const struct option *o = &own[i];

    if (word[1] == '-') {
      const char *eq = strchr(word + 2, '=');
      size_t len = eq != NULL ? (size_t)(eq - word - 2) : strlen(word + 2);

      if (strlen(o->name) == len && strncmp(o->name, word + 2, len) == 0) {
        *value = eq != NULL ? eq + 1 : NULL;
        return o;
      }
    } else if (o->val == (unsigned char)word[1] &&
               (word[2] == '\0' || o->has_arg != no_argument)) {
      *value = word[2] != '\0' ? word + 2 : NULL;
      return o;
    }
  }
  return NULL;
}

#define GIVEN(p, id) (((p)->set & (1u << (id))) != 0)

/* What the command line gave, as POST /v1/jobs fields. */
static void
args_to_fields(const struct parser *p, json_t *fields)
{
  const struct job_spec *s = p->s;

  if (GIVEN(p, OPT_JOB_NAME))
    json_object_set_new(fields, "name", json_string(s->name));
  if (GIVEN(p, OPT_ACCOUNT))
    json_object_set_new(fields, "project", json_string(s->project));
  if (GIVEN(p, OPT_OUTPUT))
    json_object_set_new(fields, "output", json_string(s->stdout_path));
  if (GIVEN(p, OPT_ERROR))
    json_object_set_new(fields, "error", json_string(s->stderr_path));
  if (GIVEN(p, OPT_CHDIR))
    json_object_set_new(fields, "chdir", json_string(s->chdir));
  if (GIVEN(p, OPT_TIME))
    json_object_set_new(fields, "time_limit", json_string(p->time_raw));
  if (GIVEN(p, OPT_EXPORT))
    json_object_set_new(fields, "export", json_string(p->export_raw));
  if (GIVEN(p, OPT_HOLD))
    json_object_set_new(fields, "hold", json_true());
  if (GIVEN(p, OPT_NODES))
    json_object_set_new(fields, "nodes", json_integer(s->nodes));
  /* tenbind settles totals against nodes, as for any JSON request. */
  if (p->gpu.has_total)
    json_object_set_new(fields, "gpus", json_integer(p->gpu.total));
  if (p->gpu.has_per_node)
    json_object_set_new(fields, "gpus_per_node",
                        json_integer(p->gpu.per_node));
  if (p->gpu.type_opt != NULL)
    json_object_set_new(fields, "gpu_type", json_string(p->gpu.type));
}

int
sbatch_parse_args(int argc, char **argv, const struct option *own,
                  sbatch_own_fn own_fn, void *own_arg, json_t *fields,
                  char ***extra, int *end, struct err *e)
{
  struct parser p;
  struct job_spec s;
  int i;
  int rc = 0;

  jobspec_init(&s);
  memset(&p, 0, sizeof(p));
  p.s = &s;
  p.e = e;
  p.cmdline = 1;
  *extra = NULL;
  for (i = 0; i < argc; i++) {
    const char *word = argv[i];
    const struct option *o;
    const char *value;

    if (strcmp(word, "--") == 0) {
      i++;
      break;
    }
    if (word[0] != '-' || word[1] == '\0')
      break; /* the script */
    o = own_option(own, word, &value);
    if (o == NULL) {
      rc = word[1] == '-' ? long_option(&p, argv, argc, &i)
                          : short_options(&p, argv, argc, &i);
      if (rc < 0)
        goto out;
      continue;
    }
    if (o->has_arg == no_argument && value != NULL) {
      rc = err_set(e, ERR_INVALID, "option '--%s' takes no value", o->name);
      goto out;
    }
    if (o->has_arg == required_argument && value == NULL) {
      if (i + 1 >= argc) {
        rc = err_set(e, ERR_INVALID, "option '%.64s' needs a value", word);
        goto out;
      }
      value = argv[++i];
    }
    rc = own_fn(own_arg, o->val, value, e);
    if (rc != 0)
      goto out;
  }
  *end = i;
  args_to_fields(&p, fields);
  *extra = s.sbatch_extra;
  s.sbatch_extra = NULL;
out:
  jobspec_release(&s);
  return rc;
}

int
sbatch_args_arity(const struct option *own, const char *word)
{
  const struct sbatch_opt *so = NULL;
  const struct option *o;
  const char *value;
  size_t j;

  if (strcmp(word, "--") == 0 || word[0] != '-' || word[1] == '\0')
    return -1;
  o = own_option(own, word, &value);
  if (o != NULL)
    return o->has_arg == required_argument && value == NULL ? 1 : 0;
  if (word[1] == '-') {
    if (strchr(word, '=') != NULL ||
        find_long(word + 2, strlen(word + 2), &so) < 0 || so == NULL)
      return 0;
    return so->arg == ARG_REQUIRED ? 1 : 0;
  }
  for (j = 1; word[j] != '\0'; j++) {
    so = find_short(word[j]);
    if (so == NULL)
      return 0;
    if (so->arg != ARG_NONE)
      return so->arg == ARG_REQUIRED && word[j + 1] == '\0' ? 1 : 0;
  }
  return 0;
}

/* Length of the option name of an entry: "--mem=4G" -> 5 ("--mem"). */
static size_t
extra_name_len(const char *extra)
{
  return strcspn(extra, "=");
}

void
sbatch_extra_override(char ***list, char *const *over)
{
  size_t i;

  for (i = 0; over != NULL && over[i] != NULL; i++) {
    size_t n = extra_name_len(over[i]);
    char **v = *list;
    size_t r;
    size_t w = 0;

    for (r = 0; v != NULL && v[r] != NULL; r++) {
      if (extra_name_len(v[r]) == n && strncmp(v[r], over[i], n) == 0)
        free(v[r]);
      else
        v[w++] = v[r];
    }
    if (v != NULL)
      v[w] = NULL;
    strv_push(list, over[i]);
  }
}
