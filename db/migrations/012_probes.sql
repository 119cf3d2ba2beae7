-- 012_probes: the NCCL baseline (broker/baseline.c, issue 26).  A probe is
-- one run of tenbin-probe as a job at a site; every node of it reports
-- one document (spec/probe_doc.h).  The newest probe of a site that is
-- 'done' is its baseline result.

CREATE TABLE probes (
  id           INTEGER PRIMARY KEY,
  site         TEXT    NOT NULL,
  nodes        INTEGER NOT NULL CHECK (nodes BETWEEN 1 AND 1024),
  -- pending: stored, its job not yet submitted; running: its job is
  -- known; done: every node reported; failed: the job ended first
  state        TEXT    NOT NULL CHECK (state IN ('pending', 'running',
                 'done', 'failed')),
  why          TEXT    NOT NULL CHECK (why IN ('manual', 'schedule',
                 'bundle')),
  job_id       INTEGER,
  bundle       TEXT,   -- "NAME@VERSION" the probe ran with, or NULL
  nccl_id      TEXT,   -- node 0's ncclUniqueId (hex) for the others
  gpus_per_node INTEGER,
  created_ms   INTEGER NOT NULL,
  finished_ms  INTEGER NOT NULL DEFAULT 0,
  reason       TEXT    -- why it failed, or NULL
);
CREATE INDEX probes_site ON probes (site, id);
CREATE INDEX probes_job ON probes (job_id);

CREATE TABLE probe_reports (
  probe_id     INTEGER NOT NULL REFERENCES probes (id),
  node_rank    INTEGER NOT NULL,
  doc          TEXT    NOT NULL,
  at_ms        INTEGER NOT NULL,
  PRIMARY KEY (probe_id, node_rank)
);
