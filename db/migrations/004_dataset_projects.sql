-- 004_dataset_projects: datasets belong to a project (and are scoped
-- like jobs), a source's superseded version is 'superseded' rather than
-- 'failed', and a replica that is retried says when the next try is.
--
-- The migrator runs this with foreign_keys off and checks every foreign
-- key before it commits (db/migrate.c), as for 003.

-- The project whose tokens see and touch the dataset.  NULL: a dataset
-- registered before datasets had projects, or by an admin without one;
-- only admins see it, use it in jobs and replicate it.
ALTER TABLE datasets ADD COLUMN project TEXT;

-- ---- replicas gain the state 'superseded' and next_try_ms ----
--
-- SQLite cannot alter a CHECK constraint: replicas is rebuilt the
-- documented way (create, copy, drop, rename, recreate the index).
-- Nothing references replicas, so nothing else moves.

CREATE TABLE replicas_new (
  dataset      TEXT    NOT NULL,
  version      TEXT    NOT NULL,
  site         TEXT    NOT NULL,
  -- OR chains rather than IN (...), for the reason 003 gives.
  -- superseded: the source site's files are a newer version's now; the
  -- version was fine, it is just no longer there.
  state        TEXT    NOT NULL CHECK (state = 'pending' OR
                 state = 'syncing' OR state = 'complete' OR
                 state = 'failed' OR state = 'superseded'),
  bytes_total  INTEGER NOT NULL DEFAULT 0 CHECK (bytes_total >= 0),
  bytes_done   INTEGER NOT NULL DEFAULT 0 CHECK (bytes_done >= 0),
  bytes_wire   INTEGER NOT NULL DEFAULT 0 CHECK (bytes_wire >= 0),
  bytes_saved  INTEGER NOT NULL DEFAULT 0 CHECK (bytes_saved >= 0),
  files_total  INTEGER NOT NULL DEFAULT 0 CHECK (files_total >= 0),
  files_done   INTEGER NOT NULL DEFAULT 0 CHECK (files_done >= 0),
  error        TEXT,
  path         TEXT,
  started_ms   INTEGER NOT NULL DEFAULT 0,
  finished_ms  INTEGER NOT NULL DEFAULT 0,
  updated_ms   INTEGER NOT NULL,
  -- While a pending or syncing replica waits out a backoff: when the
  -- stager tries again (wall clock).  0 when nothing is waited for.
  next_try_ms  INTEGER NOT NULL DEFAULT 0 CHECK (next_try_ms >= 0),
  PRIMARY KEY (dataset, version, site),
  FOREIGN KEY (dataset, version)
    REFERENCES dataset_versions(dataset, version) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- Rows that 003 marked failed for being superseded become what they
-- are; the message written then is the only mark they carry.
INSERT INTO replicas_new (dataset, version, site, state, bytes_total,
    bytes_done, bytes_wire, bytes_saved, files_total, files_done, error,
    path, started_ms, finished_ms, updated_ms)
  SELECT dataset, version, site,
    CASE WHEN state = 'failed' AND error LIKE 'superseded at the source%'
         THEN 'superseded' ELSE state END,
    bytes_total, bytes_done, bytes_wire, bytes_saved, files_total,
    files_done, error, path, started_ms, finished_ms, updated_ms
  FROM replicas;

DROP TABLE replicas;
ALTER TABLE replicas_new RENAME TO replicas;

-- 003's index, with its name and its WHERE clause verbatim.
CREATE INDEX replicas_active ON replicas(dataset, version, site)
  WHERE (state = 'pending' OR state = 'syncing');
