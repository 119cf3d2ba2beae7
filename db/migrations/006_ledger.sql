-- 006_ledger: what every GPU-hour and every byte moved cost, and the
-- budgets that spending is held to (issue 23).
--
-- The usage ledger is a materialization: a hold (a job's GPUs from the
-- time it started running to the time it stopped) is cut into pieces
-- where a rate changes and at midnight of the report time zone, and each
-- piece is priced at the rates in force (policies/price.h).  The broker
-- rewrites a hold's pieces whole, in the transaction that changes the
-- job, so a piece is never billed twice nor dropped.

CREATE TABLE usage (
  job_id          INTEGER NOT NULL,
  -- When the hold began: a job requeued after it ran holds again.
  hold_ms         INTEGER NOT NULL,
  from_ms         INTEGER NOT NULL,
  -- While open (the job still runs) the piece is billed up to now by
  -- whoever reads it; to_ms is where it was last written.
  to_ms           INTEGER NOT NULL,
  -- to_ms - from_ms, or more for a hold under the billing minimum.
  billed_ms       INTEGER NOT NULL CHECK (billed_ms >= 0),
  open            INTEGER NOT NULL CHECK (open IN (0, 1)),
  -- YYYY-MM-DD of from_ms in the report time zone.
  day             TEXT    NOT NULL,
  project         TEXT    NOT NULL,
  site            TEXT    NOT NULL,
  gpu_type        TEXT    NOT NULL,
  gpus            INTEGER NOT NULL CHECK (gpus > 0),
  -- How the site charges: rented on demand or spot, owned (sunk and
  -- marginal), or not priced at all (its hours are still counted).
  kind            TEXT    NOT NULL CHECK (kind IN ('on_demand', 'spot',
                    'owned', 'unpriced')),
  -- Micro-dollars per GPU-hour (NULL: none in force) and the charges
  -- of billed_ms at them.
  billed_rate     INTEGER,
  sunk_rate       INTEGER,
  marginal_rate   INTEGER,
  billed_micro    INTEGER NOT NULL DEFAULT 0,
  sunk_micro      INTEGER NOT NULL DEFAULT 0,
  marginal_micro  INTEGER NOT NULL DEFAULT 0,
  -- How the job ended (its final state, or 'requeued'); NULL while open.
  outcome         TEXT,
  PRIMARY KEY (job_id, hold_ms, from_ms)
) STRICT, WITHOUT ROWID;

-- Reports and budgets read by day (a month is a range of days).
CREATE INDEX usage_day ON usage(day);
CREATE INDEX usage_project_day ON usage(project, day);
-- The open pieces: the few holds still running.
CREATE INDEX usage_open ON usage(day) WHERE open = 1;

-- Bytes a transfer put on the wire, charged at the source's egress
-- rate once the transfer is over (one row per transfer: exactly once).
CREATE TABLE egress (
  transfer_id     INTEGER PRIMARY KEY,
  at_ms           INTEGER NOT NULL,
  day             TEXT    NOT NULL,
  project         TEXT    NOT NULL,
  site            TEXT    NOT NULL,   -- the source, whose egress it is
  to_site         TEXT    NOT NULL,
  dataset         TEXT    NOT NULL,
  bytes           INTEGER NOT NULL CHECK (bytes >= 0),
  rate_micro      INTEGER,            -- per GB (1e9 bytes); NULL: none
  cost_micro      INTEGER NOT NULL
) STRICT;

CREATE INDEX egress_day ON egress(day);

-- Who a replica's transfers are billed to: the project of the job that
-- wanted it first, or the dataset's project for an explicit sync.
ALTER TABLE replicas ADD COLUMN project TEXT;

-- Totals since the beginning per (project, site, gpu_type, kind), kept
-- by the triggers below, so /metrics never sums the whole ledger.
CREATE TABLE usage_totals (
  project         TEXT    NOT NULL,
  site            TEXT    NOT NULL,
  gpu_type        TEXT    NOT NULL,
  kind            TEXT    NOT NULL,
  gpu_ms          INTEGER NOT NULL,
  billed_micro    INTEGER NOT NULL,
  sunk_micro      INTEGER NOT NULL,
  marginal_micro  INTEGER NOT NULL,
  PRIMARY KEY (project, site, gpu_type, kind)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER usage_totals_add AFTER INSERT ON usage BEGIN
  INSERT INTO usage_totals VALUES (new.project, new.site, new.gpu_type,
      new.kind, (new.to_ms - new.from_ms) * new.gpus, new.billed_micro,
      new.sunk_micro, new.marginal_micro)
    ON CONFLICT DO UPDATE SET
      gpu_ms = gpu_ms + excluded.gpu_ms,
      billed_micro = billed_micro + excluded.billed_micro,
      sunk_micro = sunk_micro + excluded.sunk_micro,
      marginal_micro = marginal_micro + excluded.marginal_micro;
END;

CREATE TRIGGER usage_totals_sub AFTER DELETE ON usage BEGIN
  UPDATE usage_totals SET
      gpu_ms = gpu_ms - (old.to_ms - old.from_ms) * old.gpus,
      billed_micro = billed_micro - old.billed_micro,
      sunk_micro = sunk_micro - old.sunk_micro,
      marginal_micro = marginal_micro - old.marginal_micro
    WHERE project = old.project AND site = old.site AND
      gpu_type = old.gpu_type AND kind = old.kind;
END;

-- Egress totals ride in the same table under kind 'egress' (gpu_type
-- '', billed_micro the charge).
CREATE TRIGGER egress_totals_add AFTER INSERT ON egress BEGIN
  INSERT INTO usage_totals VALUES (new.project, new.site, '', 'egress', 0,
      new.cost_micro, 0, 0)
    ON CONFLICT DO UPDATE SET
      billed_micro = billed_micro + excluded.billed_micro;
END;

-- A project's monthly budget (tenbin budget set).
CREATE TABLE budgets (
  project         TEXT    NOT NULL PRIMARY KEY,
  monthly_micro   INTEGER NOT NULL CHECK (monthly_micro >= 0),
  -- hard: a job whose cost could exceed what is left is refused.
  hard            INTEGER NOT NULL CHECK (hard IN (0, 1)),
  -- 'rented': only rented sites' bills count (owned capacity is paid
  -- for); 'all': owned sites' sunk cost counts too.
  counts          TEXT    NOT NULL CHECK (counts IN ('rented', 'all')),
  updated_ms      INTEGER NOT NULL,
  -- The highest warning given this month: 0, 80 or 100 (percent), and
  -- the month it was given in ("YYYY-MM"), so a restart never warns twice.
  warned_pct      INTEGER NOT NULL DEFAULT 0,
  warned_month    TEXT
) STRICT;
