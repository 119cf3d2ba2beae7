-- 007_usage_daily: the ledger summed by day, project, site and GPU type,
-- kept by triggers, so that a month's report reads thousands of rows
-- instead of a million pieces.  "holds" counts the holds that began in
-- the group (a piece that starts its hold): a report's job count is the
-- jobs that started holding GPUs in its days.

CREATE TABLE usage_daily (
  day             TEXT    NOT NULL,
  project         TEXT    NOT NULL,
  site            TEXT    NOT NULL,
  gpu_type        TEXT    NOT NULL,
  gpu_ms          INTEGER NOT NULL,
  failed_gpu_ms   INTEGER NOT NULL,
  holds           INTEGER NOT NULL,
  billed_micro    INTEGER NOT NULL,
  sunk_micro      INTEGER NOT NULL,
  marginal_micro  INTEGER NOT NULL,
  PRIMARY KEY (day, project, site, gpu_type)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER usage_daily_add AFTER INSERT ON usage BEGIN
  INSERT INTO usage_daily VALUES (new.day, new.project, new.site,
      new.gpu_type, (new.to_ms - new.from_ms) * new.gpus,
      CASE WHEN new.outcome IN ('failed', 'cancelled', 'lost')
        THEN (new.to_ms - new.from_ms) * new.gpus ELSE 0 END,
      new.from_ms = new.hold_ms, new.billed_micro, new.sunk_micro,
      new.marginal_micro)
    ON CONFLICT DO UPDATE SET
      gpu_ms = gpu_ms + excluded.gpu_ms,
      failed_gpu_ms = failed_gpu_ms + excluded.failed_gpu_ms,
      holds = holds + excluded.holds,
      billed_micro = billed_micro + excluded.billed_micro,
      sunk_micro = sunk_micro + excluded.sunk_micro,
      marginal_micro = marginal_micro + excluded.marginal_micro;
END;

CREATE TRIGGER usage_daily_sub AFTER DELETE ON usage BEGIN
  UPDATE usage_daily SET
      gpu_ms = gpu_ms - (old.to_ms - old.from_ms) * old.gpus,
      failed_gpu_ms = failed_gpu_ms - CASE WHEN old.outcome IN ('failed',
        'cancelled', 'lost') THEN (old.to_ms - old.from_ms) * old.gpus
        ELSE 0 END,
      holds = holds - (old.from_ms = old.hold_ms),
      billed_micro = billed_micro - old.billed_micro,
      sunk_micro = sunk_micro - old.sunk_micro,
      marginal_micro = marginal_micro - old.marginal_micro
    WHERE day = old.day AND project = old.project AND site = old.site AND
      gpu_type = old.gpu_type;
END;

INSERT INTO usage_daily
  SELECT day, project, site, gpu_type, SUM((to_ms - from_ms) * gpus),
      SUM(CASE WHEN outcome IN ('failed', 'cancelled', 'lost')
        THEN (to_ms - from_ms) * gpus ELSE 0 END),
      SUM(from_ms = hold_ms), SUM(billed_micro), SUM(sunk_micro),
      SUM(marginal_micro)
    FROM usage GROUP BY day, project, site, gpu_type;
