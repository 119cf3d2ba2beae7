/*
 * The ledger at scale, on a real SQLite file in WAL mode (what tenbind
 * opens).  Prints one line per figure, the median of REPS runs:
 *
 *   report   a month's report over ROWS pieces grouped by project, site,
 *            GPU type and day, and by project alone (db_usage_report);
 *   tick     the ledger timer's pass when no open hold reached midnight
 *            (db_usage_open of the days before today: none);
 *   midnight the pass that cuts every one of the OPEN holds at midnight:
 *            each billed again (policies/price) and rewritten, in one
 *            transaction, as broker/ledger.c does.
 *
 * usage: bench_ledger DIR [ROWS [OPEN]]   (DIR: where the file goes)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "policies/price.h"
#include "util/timeutil.h"

#define REPS 5
#define DAY TIME_DAY_MS
/* 2026-11-01T00:00:00Z */
#define MONTH_START 1793491200000LL

static int
cmp(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

  return (x > y) - (x < y);
}

static int64_t
median(int64_t *v)
{
  qsort(v, REPS, sizeof(*v), cmp);
  return v[REPS / 2];
}

static void
die(const struct err *e)
{
  fprintf(stderr, "bench_ledger: %s\n", e->msg);
  exit(1);
}

static int
count_line(const struct db_usage_sum *s, void *arg)
{
  (void)s;
  (*(int64_t *)arg)++;
  return 0;
}

static int
count_open(const struct db_usage *u, void *arg)
{
  (void)u;
  (*(int64_t *)arg)++;
  return 0;
}

/* Piece i of a month: 50 projects, 20 sites, 4 types, 30 days. */
static void
fill(struct db_usage *u, int64_t i, char *project, char *site, char *day)
{
  static const char *const types[] = {"h100", "a100", "l4", "a10g"};
  int64_t from = MONTH_START + (i % 30) * DAY + (i * 7919) % (DAY / 2);

  snprintf(project, 16, "p%02lld", (long long)(i % 50));
  snprintf(site, 16, "s%02lld", (long long)(i / 50 % 20));
  time_format_day(from, 0, day);
  *u = (struct db_usage){.from_ms = from, .to_ms = from + 3600000,
                         .billed_ms = 3600000, .day = day,
                         .project = project, .site = site,
                         .gpu_type = types[i % 4], .gpus = 8,
                         .kind = "on_demand", .billed_rate = 6880000,
                         .sunk_rate = DB_NO_RATE,
                         .marginal_rate = DB_NO_RATE,
                         .billed_micro = 55040000, .outcome = "succeeded"};
}

int
main(int argc, char **argv)
{
  int64_t rows = argc > 2 ? strtoll(argv[2], NULL, 10) : 1000000;
  int64_t open = argc > 3 ? strtoll(argv[3], NULL, 10) : 10000;
  int64_t t[REPS], n = 0;
  struct err e = {0};
  struct db *db;
  char path[4096], project[16], site[16], day[11];
  struct db_usage u;

  if (argc < 2 || rows < 1 || open < 1) {
    fprintf(stderr, "usage: bench_ledger DIR [ROWS [OPEN]] (counts > 0)\n");
    return 2;
  }
  snprintf(path, sizeof(path), "%s/ledger-bench.db", argv[1]);
  remove(path);
  if (db_open(path, &db, &e) < 0)
    die(&e);
  /* Closed pieces, one job each, a transaction per 10,000. */
  for (int64_t i = 0; i < rows; i++) {
    if (i % 10000 == 0 && db_begin(db, &e) < 0)
      die(&e);
    fill(&u, i, project, site, day);
    if (db_usage_replace(db, i + 1, u.from_ms, &u, 1, &e) < 0)
      die(&e);
    if ((i % 10000 == 9999 || i == rows - 1) && db_commit(db, &e) < 0)
      die(&e);
  }
  /* Open holds of running jobs, begun today. */
  if (db_begin(db, &e) < 0)
    die(&e);
  for (int64_t i = 0; i < open; i++) {
    fill(&u, i, project, site, day);
    u.from_ms = MONTH_START + 29 * DAY + i;
    u.to_ms = u.from_ms;
    u.billed_ms = u.billed_micro = 0;
    u.open = 1;
    u.outcome = NULL;
    time_format_day(u.from_ms, 0, day);
    if (db_usage_replace(db, rows + i + 1, u.from_ms, &u, 1, &e) < 0)
      die(&e);
  }
  if (db_commit(db, &e) < 0)
    die(&e);

  for (int r = 0; r < REPS; r++) {
    int64_t t0 = time_mono_ms();

    n = 0;
    if (db_usage_report(db, "2026-11-01", "2026-11-30",
                        DB_BY_PROJECT | DB_BY_SITE | DB_BY_GPU_TYPE |
                            DB_BY_DAY,
                        NULL, count_line, &n, &e) < 0)
      die(&e);
    t[r] = time_mono_ms() - t0;
  }
  printf("report by project,site,gpu_type,day over %lld pieces: %lld ms "
         "(%lld lines)\n", (long long)(rows + open), (long long)median(t),
         (long long)n);
  for (int r = 0; r < REPS; r++) {
    int64_t t0 = time_mono_ms();

    n = 0;
    if (db_usage_report(db, "2026-11-01", "2026-11-30", DB_BY_PROJECT, NULL,
                        count_line, &n, &e) < 0)
      die(&e);
    t[r] = time_mono_ms() - t0;
  }
  printf("report by project over %lld pieces: %lld ms (%lld lines)\n",
         (long long)(rows + open), (long long)median(t), (long long)n);
  for (int r = 0; r < REPS; r++) {
    int64_t t0 = time_mono_ms();

    n = 0;
    if (db_usage_open(db, "2026-11-30", count_open, &n, &e) < 0)
      die(&e);
    t[r] = time_mono_ms() - t0;
  }
  printf("tick over %lld open holds: %lld ms\n", (long long)n,
         (long long)median(t));
  /* Midnight: every open hold billed again over two days and rewritten
   * as two pieces (one closed, one open), in one transaction. */
  for (int r = 0; r < REPS; r++) {
    static const struct price_period period = {0, 6880000};
    const struct price_series series = {&period, 1};
    int64_t t0 = time_mono_ms(), cut = MONTH_START + 30 * DAY;
    struct price_bill bills[2];
    struct db_usage two[2];
    char days[2][11];

    if (db_begin(db, &e) < 0)
      die(&e);
    for (int64_t i = 0; i < open; i++) {
      int64_t from = MONTH_START + 29 * DAY + i;

      fill(&u, i, project, site, day);
      price_bill_hold(&series, 1, &cut, 1, from, cut + 60000 + r, 8, 0,
                      bills, 2);
      for (int k = 0; k < 2; k++) {
        two[k] = u;
        time_format_day(bills[k].from_ms, 0, days[k]);
        two[k].day = days[k];
        two[k].from_ms = bills[k].from_ms;
        two[k].to_ms = bills[k].to_ms;
        two[k].billed_ms = bills[k].billed_ms;
        two[k].billed_micro = bills[k].cost_micro[0];
        two[k].open = k == 1;
        two[k].outcome = NULL;
      }
      if (db_usage_replace(db, rows + i + 1, from, two, 2, &e) < 0)
        die(&e);
    }
    if (db_commit(db, &e) < 0)
      die(&e);
    t[r] = time_mono_ms() - t0;
  }
  printf("midnight: %lld open holds cut and rewritten: %lld ms (%lld ms "
         "per loop turn of 500, as tenbind cuts them)\n", (long long)open,
         (long long)median(t), (long long)(median(t) * 500 / open));
  db_close(db);
  remove(path);
  return 0;
}
