/*
 * The completion scripts, written from the tables the parsers use, so
 * that a command or an option added to them completes without a word
 * more.  Both shells get the same helper functions (case tables that
 * bash and zsh read alike) and a driver of their own: bash's reads
 * COMP_LINE, zsh's reads $words.
 */
#include "cli/complete.h"

#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"

#define CLI_COMMAND_NAME(name, fn, arity, help) name,
const char *const cli_command_names[] = {CLI_COMMANDS(CLI_COMMAND_NAME)
                                             "help"};
#undef CLI_COMMAND_NAME

const size_t cli_ncommand_names = sizeof(cli_command_names) /
                                  sizeof(cli_command_names[0]);

/* The words of enum cli_comp_value in the scripts. */
static const char *
value_word(enum cli_comp_value v)
{
  switch (v) {
  case CLI_COMP_FILE:
    return "file";
  case CLI_COMP_JOB:
    return "job";
  case CLI_COMP_SITE:
    return "site";
  case CLI_COMP_WORKLOAD:
    return "workload";
  case CLI_COMP_DATASET:
    return "dataset";
  case CLI_COMP_PROJECT:
    return "project";
  case CLI_COMP_STATE:
    return "state";
  case CLI_COMP_SHELL:
    return "shell";
  case CLI_COMP_COMMAND:
    return "command";
  case CLI_COMP_NONE:
    break;
  }
  return "text";
}

/* 1 when a subcommand of spec i's command comes before it (the case of
 * its command is written then). */
static int
subs_seen(size_t i)
{
  for (size_t j = 0; j < i; j++)
    if (cli_comp_specs[j].sub != NULL &&
        strcmp(cli_comp_specs[j].cmd, cli_comp_specs[i].cmd) == 0)
      return 1;
  return 0;
}

/* 1 when an earlier option than opts[k] in any table, or in opts before
 * k, is named the same (the OPTION case lists each name once). */
static int
option_seen(size_t spec, size_t k)
{
  const char *name = cli_comp_specs[spec].opts[k].name;

  for (size_t j = 0; j <= spec; j++) {
    const struct option *o = cli_comp_specs[j].opts;

    for (size_t m = 0; o[m].name != NULL && (j < spec || m < k); m++)
      if (strcmp(o[m].name, name) == 0)
        return 1;
  }
  return 0;
}

/* _tenbin_subs CMD: the subcommands of each command that has some. */
static int
write_subs(struct buf *out)
{
  int rc = buf_adds(out, "# _tenbin_subs CMD: its subcommands.\n"
                         "_tenbin_subs() {\n  case $1 in\n");

  for (size_t i = 0; rc == 0 && i < cli_comp_nspecs; i++) {
    const char *sep = "";

    if (cli_comp_specs[i].sub == NULL || subs_seen(i))
      continue;
    rc = buf_addf(out, "    %s) echo '", cli_comp_specs[i].cmd);
    for (size_t j = i; rc == 0 && j < cli_comp_nspecs; j++) {
      if (strcmp(cli_comp_specs[j].cmd, cli_comp_specs[i].cmd) != 0 ||
          cli_comp_specs[j].sub == NULL)
        continue;
      rc = buf_addf(out, "%s%s", sep, cli_comp_specs[j].sub);
      sep = " ";
    }
    if (rc == 0)
      rc = buf_adds(out, "' ;;\n");
  }
  return rc == 0 ? buf_adds(out, "  esac\n}\n") : rc;
}

/* _tenbin_opts CMD SUB and _tenbin_operand CMD SUB. */
static int
write_per_command(struct buf *out)
{
  int rc = buf_adds(out, "# _tenbin_opts CMD SUB: its long options.\n"
                         "_tenbin_opts() {\n  case $1/$2 in\n");

  for (size_t i = 0; rc == 0 && i < cli_comp_nspecs; i++) {
    const struct cli_comp_spec *s = &cli_comp_specs[i];

    rc = buf_addf(out, "    %s/%s) echo '", s->cmd,
                  s->sub != NULL ? s->sub : "");
    for (size_t k = 0; rc == 0 && s->opts[k].name != NULL; k++)
      rc = buf_addf(out, "%s--%s", k > 0 ? " " : "", s->opts[k].name);
    if (rc == 0)
      rc = buf_adds(out, "' ;;\n");
  }
  if (rc == 0)
    rc = buf_adds(out, "  esac\n}\n"
                       "# _tenbin_operand CMD SUB: what its operands are.\n"
                       "_tenbin_operand() {\n  case $1/$2 in\n");
  for (size_t i = 0; rc == 0 && i < cli_comp_nspecs; i++) {
    const struct cli_comp_spec *s = &cli_comp_specs[i];

    if (s->operand != CLI_COMP_NONE)
      rc = buf_addf(out, "    %s/%s) echo %s ;;\n", s->cmd,
                    s->sub != NULL ? s->sub : "", value_word(s->operand));
  }
  return rc == 0 ? buf_adds(out, "  esac\n}\n") : rc;
}

/* _tenbin_arg OPTION: what the value of each option that takes one
 * completes to; nothing for a flag. */
static int
write_option_values(struct buf *out)
{
  int has_arg;
  const char *name;
  int rc = buf_adds(out,
                    "# _tenbin_arg OPTION: what its value completes to; "
                    "nothing for a flag.\n"
                    "_tenbin_arg() {\n  case $1 in\n");

  for (size_t i = 0;
       rc == 0 && (name = cli_global_option(i, &has_arg)) != NULL; i++)
    if (has_arg)
      rc = buf_addf(out, "    --%s) echo %s ;;\n", name,
                    value_word(cli_comp_option_value(name)));
  for (size_t i = 0; rc == 0 && i < cli_comp_nspecs; i++) {
    const struct option *o = cli_comp_specs[i].opts;

    for (size_t k = 0; rc == 0 && o[k].name != NULL; k++) {
      if (o[k].has_arg == no_argument || option_seen(i, k))
        continue;
      rc = buf_addf(out, "    --%s) echo %s ;;\n", o[k].name,
                    value_word(cli_comp_option_value(o[k].name)));
    }
  }
  return rc == 0 ? buf_adds(out, "  esac\n}\n") : rc;
}

/* The word lists and _tenbin_values, the one caller of __complete. */
static int
write_lists(struct buf *out)
{
  const char *name;
  int has_arg;
  int rc = buf_adds(out, "_tenbin_commands='");

  for (size_t i = 0; rc == 0 && i < cli_ncommand_names; i++)
    rc = buf_addf(out, "%s%s", i > 0 ? " " : "", cli_command_names[i]);
  if (rc == 0)
    rc = buf_adds(out, "'\n# The global options after a command.\n"
                       "_tenbin_after='");
  for (size_t i = 0;
       rc == 0 && (name = cli_global_option(i, &has_arg)) != NULL; i++)
    rc = buf_addf(out, "%s--%s", i > 0 ? " " : "", name);
  if (rc == 0)
    rc = buf_adds(out, "'\n_tenbin_globals=\"$_tenbin_after --help "
                       "--version\"\n_tenbin_states='");
  for (size_t i = 0; rc == 0 && (name = cli_job_state(i)) != NULL; i++)
    rc = buf_addf(out, "%s%s", i > 0 ? " " : "", name);
  if (rc == 0)
    rc = buf_adds(
        out,
        "'\n"
        "# _tenbin_values KIND TENBIN [GLOBAL OPTIONS]: the words of KIND;\n"
        "# the server's are asked for with the options typed.\n"
        "_tenbin_values() {\n"
        "  local kind=$1\n"
        "  shift\n"
        "  case $kind in\n"
        "    job|site|workload|dataset|project)\n"
        "      \"$@\" __complete \"${kind}s\" 2>/dev/null ;;\n"
        "    state) echo \"$_tenbin_states\" ;;\n"
        "    shell) echo 'bash zsh' ;;\n"
        "    command) echo \"$_tenbin_commands\" ;;\n"
        "  esac\n"
        "}\n");
  return rc;
}

/*
 * Where the drivers stand after reading the finished words w[1..n):
 * cmd, sub, the global options typed (glob), and whether the words are
 * submit's command (done: the shell's own completion is better there).
 * A word after an option that takes a value is that value.
 */
static const char scan_words[] =
    "  for ((i = 1; i < n; i++)); do\n"
    "    case ${w[i]} in\n"
    "      --server|--token|--cacert)\n"
    "        glob+=(\"${w[i]}\" \"${w[i+1]-}\")\n"
    "        i=$((i + 1))\n"
    "        continue ;;\n"
    "      --server=*|--token=*|--cacert=*) glob+=(\"${w[i]}\"); continue ;;\n"
    "      --) [[ $cmd == submit ]] && return 1; continue ;;\n"
    "      -*)\n"
    "        if [[ ${w[i]} != *=* && -n $(_tenbin_arg \"${w[i]}\") ]]; then\n"
    "          i=$((i + 1))\n"
    "        fi\n"
    "        continue ;;\n"
    "    esac\n"
    "    if [[ -z $cmd ]]; then\n"
    "      cmd=${w[i]}\n"
    "    elif [[ -z $sub && -n $(_tenbin_subs \"$cmd\") ]]; then\n"
    "      sub=${w[i]}\n"
    "    elif [[ $cmd == submit ]]; then\n"
    "      return 1\n"
    "    fi\n"
    "  done\n"
    "  (( n > 1 )) && prev=${w[n-1]}\n"
    "  if [[ $cur == --*=* ]]; then\n"
    "    opt=${cur%%=*}\n"
    "  elif [[ $prev == --* && $prev != *=* && -n $(_tenbin_arg \"$prev\") ]]"
    "; then\n"
    "    opt=$prev\n"
    "  fi\n"
    "  if [[ -n $opt ]]; then\n"
    "    kind=$(_tenbin_arg \"$opt\")\n"
    "  elif [[ $cur == -* && -z $cmd ]]; then\n"
    "    list=$_tenbin_globals\n"
    "  elif [[ $cur == -* ]]; then\n"
    "    list=\"$(_tenbin_opts \"$cmd\" \"$sub\") $_tenbin_after\"\n"
    "  elif [[ -z $cmd ]]; then\n"
    "    list=$_tenbin_commands\n"
    "  elif [[ -z $sub && -n $(_tenbin_subs \"$cmd\") ]]; then\n"
    "    list=$(_tenbin_subs \"$cmd\")\n"
    "  else\n"
    "    kind=$(_tenbin_operand \"$cmd\" \"$sub\")\n"
    "  fi\n"
    "  case $kind in\n"
    "    ''|text|file) ;;\n"
    "    *) list=$(_tenbin_values \"$kind\" \"${w[0]}\" \"${glob[@]}\") ;;\n"
    "  esac\n";

static const char bash_head[] =
    "_tenbin() {\n"
    "  local line=${COMP_LINE:0:COMP_POINT} cur='' prev='' cmd='' sub=''\n"
    "  local opt='' kind='' list='' i n pre=''\n"
    "  local -a w=() glob=()\n"
    "  COMPREPLY=()\n"
    "  # Words from the line itself: bash splits COMP_WORDS at = and :,\n"
    "  # which URLs and --opt=value are full of.\n"
    "  read -ra w <<<\"$line\"\n"
    "  if [[ -n $line && $line != *[[:space:]] && ${#w[@]} -gt 0 ]]; then\n"
    "    cur=${w[${#w[@]}-1]}\n"
    "    unset \"w[${#w[@]}-1]\"\n"
    "  fi\n"
    "  n=${#w[@]}\n"
    "  (( n > 0 )) || return 0\n";

static const char bash_tail[] =
    "  # The reply replaces readline's word, which starts after a = only\n"
    "  # when = breaks words.\n"
    "  if [[ $cur == --*=* ]]; then\n"
    "    cur=${cur#*=}\n"
    "    [[ $COMP_WORDBREAKS == *=* ]] || pre=${opt}=\n"
    "  fi\n"
    "  if [[ $kind == file ]]; then\n"
    "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
    "    return 0\n"
    "  fi\n"
    "  # Job ids come newest and unfinished first: keep that order.\n"
    "  [[ $kind == job ]] && compopt -o nosort 2>/dev/null\n"
    "  COMPREPLY=($(compgen -P \"$pre\" -W \"$list\" -- \"$cur\"))\n"
    "  return 0\n"
    "}\n"
    "complete -F _tenbin tenbin\n";

static const char zsh_head[] =
    "_tenbin() {\n"
    "  local cur=${words[CURRENT]} prev='' cmd='' sub=''\n"
    "  local opt='' kind='' list='' i n=$((CURRENT - 1))\n"
    "  local -a w glob vals\n"
    "  # w[0] is the command: the same indices as bash's.\n"
    "  w=(\"${(@)words[1,CURRENT-1]}\")\n"
    "  setopt localoptions ksharrays\n";

static const char zsh_tail[] =
    "  [[ $cur == --*=* ]] && compset -P '*='\n"
    "  if [[ $kind == file ]]; then\n"
    "    _files\n"
    "    return\n"
    "  fi\n"
    "  vals=(${=list})\n"
    "  (( ${#vals} )) || return 1\n"
    "  # Job ids come newest and unfinished first: keep that order.\n"
    "  if [[ $kind == job ]]; then\n"
    "    compadd -V tenbin-jobs -- \"${vals[@]}\"\n"
    "  else\n"
    "    compadd -- \"${vals[@]}\"\n"
    "  fi\n"
    "}\n"
    "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then\n"
    "  _tenbin \"$@\"\n"
    "else\n"
    "  compdef _tenbin tenbin\n"
    "fi\n";

int
cli_complete_script(const char *shell, struct buf *out, struct err *e)
{
  int zsh = strcmp(shell, "zsh") == 0;
  int rc;

  if (!zsh && strcmp(shell, "bash") != 0)
    return err_set(e, ERR_INVALID,
                   "no completion for shell '%.32s' (bash or zsh)", shell);
  rc = buf_addf(out,
                "%s# %s completion for tenbin, generated by 'tenbin "
                "completion %s'\n"
                "# from its command and option tables.  Load it with\n"
                "#   %s\n"
                "# Job ids, sites, workloads, datasets and projects come "
                "from tenbind\n"
                "# ('tenbin __complete KIND'), as the token typed or "
                "$TENBIN_TOKEN allows.\n\n",
                zsh ? "#compdef tenbin\n" : "", shell, shell,
                zsh ? "source <(tenbin completion zsh), or save it as _tenbin "
                      "in $fpath"
                    : "source <(tenbin completion bash)");
  if (rc == 0)
    rc = write_lists(out);
  if (rc == 0)
    rc = write_subs(out);
  if (rc == 0)
    rc = write_per_command(out);
  if (rc == 0)
    rc = write_option_values(out);
  if (rc == 0)
    rc = buf_adds(out, zsh ? zsh_head : bash_head);
  if (rc == 0)
    rc = buf_adds(out, scan_words);
  if (rc == 0)
    rc = buf_adds(out, zsh ? zsh_tail : bash_tail);
  if (rc < 0)
    return err_set(e, ERR_TOO_LARGE, "the completion script does not fit");
  return 0;
}

static const struct cli_complete_source sources[] = {
    {"/v1/jobs?limit=200", "jobs", "id"},
    {"/v1/sites", "sites", "name"},
    {"/v1/workloads", "workloads", "name"},
    {"/v1/datasets", "datasets", "name"},
    /* No list of projects: those with a budget, then those with jobs. */
    {"/v1/budgets", "budgets", "project"},
    {"/v1/jobs?limit=200", "jobs", "project"},
};

size_t
cli_complete_sources(const char *kind,
                     const struct cli_complete_source **out)
{
  static const struct {
    const char *kind;
    size_t first;
    size_t n;
  } kinds[] = {{"jobs", 0, 1},     {"sites", 1, 1},    {"workloads", 2, 1},
               {"datasets", 3, 1}, {"projects", 4, 2}};

  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    if (strcmp(kinds[i].kind, kind) == 0) {
      *out = &sources[kinds[i].first];
      return kinds[i].n;
    }
  }
  *out = NULL;
  return 0;
}

/* A value a shell takes as one word, as it is. */
static int
plain_word(const char *s)
{
  size_t n = strlen(s);

  if (n == 0 || n > CLI_COMPLETE_MAX_VALUE)
    return 0;
  for (; *s != '\0'; s++)
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
          (*s >= '0' && *s <= '9') || strchr("._+,-", *s) != NULL))
      return 0;
  return 1;
}

/* 1 when the lines of out hold word; *count gets how many lines. */
static int
has_line(const struct buf *out, const char *word, size_t *count)
{
  const char *p = buf_str(out);
  size_t n = strlen(word);
  int found = 0;

  *count = 0;
  while (*p != '\0') {
    const char *nl = strchr(p, '\n');
    size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);

    if (len == n && strncmp(p, word, n) == 0)
      found = 1;
    (*count)++;
    p += len + (nl != NULL);
  }
  return found;
}

static int
job_ended(const json_t *job)
{
  static const char *const final[] = {"succeeded", "failed", "cancelled",
                                      "lost"};
  const char *state = json_string_value(json_object_get(job, "state"));

  for (size_t i = 0; state != NULL && i < sizeof(final) / sizeof(final[0]);
       i++)
    if (strcmp(state, final[i]) == 0)
      return 1;
  return 0;
}

int
cli_complete_values(const struct cli_complete_source *src,
                    const json_t *reply, struct buf *out)
{
  const json_t *list = json_object_get(reply, src->array);
  int ids = strcmp(src->field, "id") == 0;
  int rc = 0;

  /* Two rounds for job ids: the ones still to run or running first. */
  for (int round = 0; round < (ids ? 2 : 1) && rc == 0; round++) {
    size_t i;
    const json_t *v;

    json_array_foreach(list, i, v) {
      const json_t *f = json_object_get(v, src->field);
      char word[CLI_COMPLETE_MAX_VALUE + 1];
      size_t count;

      if (ids && job_ended(v) != round)
        continue;
      if (ids && json_is_integer(f) && json_integer_value(f) > 0)
        snprintf(word, sizeof(word), "%lld",
                 (long long)json_integer_value(f));
      else if (!ids && json_is_string(f) && plain_word(json_string_value(f)))
        snprintf(word, sizeof(word), "%s", json_string_value(f));
      else
        continue;
      if (has_line(out, word, &count))
        continue;
      if (count >= CLI_COMPLETE_MAX_VALUES)
        break;
      rc = buf_addf(out, "%s\n", word);
      if (rc < 0)
        break;
    }
  }
  return rc;
}
