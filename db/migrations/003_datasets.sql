-- 003_datasets: datasets, their versions, replicas at sites and the
-- transfers that made them (docs/SYNC.md), and the job state 'staging'.
--
-- The migrator runs this with foreign_keys off and checks every foreign
-- key (PRAGMA foreign_key_check) before it commits (db/migrate.c): the
-- jobs table is rebuilt below, and with enforcement on, dropping the old
-- jobs would cascade into job_events and placements and empty them.

-- A named, versioned directory tree at one site's agent.  source_site
-- is a site of the configuration, not a foreign key: sites live in the
-- config file, and a dataset must outlive a typo there.
CREATE TABLE datasets (
  name         TEXT    NOT NULL PRIMARY KEY,
  source_site  TEXT    NOT NULL,
  -- Relative to the source agent's root ("." for the root itself).
  path         TEXT    NOT NULL,
  created_ms   INTEGER NOT NULL
) STRICT;

-- Versions published at the source.  The id is the SHA-256 (hex) of the
-- canonical manifest, so publishing unchanged content again gives the
-- same row.
CREATE TABLE dataset_versions (
  dataset       TEXT    NOT NULL
                REFERENCES datasets(name) ON DELETE CASCADE,
  version       TEXT    NOT NULL,
  files         INTEGER NOT NULL CHECK (files >= 0),
  bytes         INTEGER NOT NULL CHECK (bytes >= 0),
  created_ms    INTEGER NOT NULL,
  -- When the source last published this content: "latest" is the
  -- version published last, which after a revert is an older id again
  -- (the newer one's files are gone from the source).
  published_ms  INTEGER NOT NULL,
  PRIMARY KEY (dataset, version)
) STRICT, WITHOUT ROWID;

-- "latest" and "newest first" (db_dataset_version_latest / _list).
CREATE INDEX dataset_versions_published
  ON dataset_versions(dataset, published_ms);

-- A version at a site: being pulled there (pending, then syncing) or
-- there complete, or failed.  The row of the source site is complete
-- from the publish on.  Progress columns are the destination agent's
-- pull status as last polled.
CREATE TABLE replicas (
  dataset      TEXT    NOT NULL,
  version      TEXT    NOT NULL,
  site         TEXT    NOT NULL,
  -- OR chains rather than IN (...) for every state check in this file:
  -- SQLite evaluates an IN list by building an ephemeral b-tree each
  -- time the statement runs, so a CHECK (or a partial index WHERE) with
  -- IN costs a b-tree per INSERT and UPDATE of the table.
  state        TEXT    NOT NULL CHECK (state = 'pending' OR
                 state = 'syncing' OR state = 'complete' OR
                 state = 'failed'),
  bytes_total  INTEGER NOT NULL DEFAULT 0 CHECK (bytes_total >= 0),
  bytes_done   INTEGER NOT NULL DEFAULT 0 CHECK (bytes_done >= 0),
  bytes_wire   INTEGER NOT NULL DEFAULT 0 CHECK (bytes_wire >= 0),
  bytes_saved  INTEGER NOT NULL DEFAULT 0 CHECK (bytes_saved >= 0),
  files_total  INTEGER NOT NULL DEFAULT 0 CHECK (files_total >= 0),
  files_done   INTEGER NOT NULL DEFAULT 0 CHECK (files_done >= 0),
  -- Why it failed, or while it is retried why the last try did not work.
  error        TEXT,
  -- The replica's directory at the site (what jobs get as
  -- TENBIN_DATASET_DIR) once complete.
  path         TEXT,
  started_ms   INTEGER NOT NULL DEFAULT 0,
  finished_ms  INTEGER NOT NULL DEFAULT 0,
  updated_ms   INTEGER NOT NULL,
  PRIMARY KEY (dataset, version, site),
  FOREIGN KEY (dataset, version)
    REFERENCES dataset_versions(dataset, version) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- The stager's work list (db_replica_list_active, INDEXED BY it): only
-- replicas still to be pulled, whatever the size of the history.
CREATE INDEX replicas_active ON replicas(dataset, version, site)
  WHERE (state = 'pending' OR state = 'syncing');

-- One row per pull attempt, with what crossed the network, per pair of
-- sites: the egress bill is SQL over this table.  History, like
-- jobs.workload: no foreign key, a transfer stays on the books.
CREATE TABLE transfers (
  id           INTEGER PRIMARY KEY,
  dataset      TEXT    NOT NULL,
  version      TEXT    NOT NULL,
  from_site    TEXT    NOT NULL,
  to_site      TEXT    NOT NULL,
  bytes_wire   INTEGER NOT NULL DEFAULT 0 CHECK (bytes_wire >= 0),
  state        TEXT    NOT NULL CHECK (state = 'running' OR
                 state = 'complete' OR state = 'failed'),
  error        TEXT,
  started_ms   INTEGER NOT NULL,
  finished_ms  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- A dataset's transfers newest first, and the stager finding the attempt
-- it left running before a restart.
CREATE INDEX transfers_dataset ON transfers(dataset, version, to_site);

-- ---- jobs gain the state 'staging' ----
--
-- SQLite cannot alter a CHECK constraint, so jobs is rebuilt the
-- documented way (lang_altertable.html, "Making Other Kinds Of Table
-- Schema Changes"): create the new table, copy, drop the old one, rename,
-- recreate the indexes.  Ids are copied as they are, so job_events and
-- placements (which reference jobs(id)) keep pointing at their jobs.

CREATE TABLE jobs_new (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  state       TEXT    NOT NULL CHECK (state = 'queued' OR
                state = 'placed' OR state = 'submitted' OR
                state = 'running' OR state = 'succeeded' OR
                state = 'failed' OR state = 'cancelled' OR
                state = 'lost' OR state = 'staging'),
  name        TEXT    NOT NULL,
  project     TEXT    NOT NULL,
  workload    TEXT,
  site        TEXT,
  spec_json   TEXT    NOT NULL,
  gpus        INTEGER NOT NULL CHECK (gpus >= 0),
  gpu_type    TEXT,
  hold        INTEGER NOT NULL DEFAULT 0 CHECK (hold = 0 OR hold = 1),
  idem_key    TEXT,
  idem_hash   TEXT,
  remote_id   TEXT,
  alloc       TEXT,
  reason      TEXT,
  log_path    TEXT,
  exit_code   INTEGER NOT NULL DEFAULT -1,
  signal      INTEGER NOT NULL DEFAULT 0,
  created_ms  INTEGER NOT NULL,
  updated_ms  INTEGER NOT NULL,
  started_ms  INTEGER NOT NULL DEFAULT 0,
  ended_ms    INTEGER NOT NULL DEFAULT 0
) STRICT;

INSERT INTO jobs_new (id, state, name, project, workload, site, spec_json,
    gpus, gpu_type, hold, idem_key, idem_hash, remote_id, alloc, reason,
    log_path, exit_code, signal, created_ms, updated_ms, started_ms,
    ended_ms)
  SELECT id, state, name, project, workload, site, spec_json, gpus,
    gpu_type, hold, idem_key, idem_hash, remote_id, alloc, reason,
    log_path, exit_code, signal, created_ms, updated_ms, started_ms,
    ended_ms
  FROM jobs;

-- AUTOINCREMENT's high-water mark goes along: an id once given (even to
-- a job since deleted) must never be given again.
DELETE FROM sqlite_sequence WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq)
  SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs';

DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

-- The indexes of 001_init, with the same names and reasons.  The WHERE
-- clauses of the partial ones are written exactly as the queries in
-- db/db.c write theirs (which name them with INDEXED BY).
CREATE UNIQUE INDEX jobs_idem ON jobs(idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX jobs_runnable ON jobs(id)
  WHERE state = 'queued' AND hold = 0;
-- Non-final jobs: staging is waiting for its data, not finished.
CREATE INDEX jobs_active ON jobs(id)
  WHERE (state = 'queued' OR state = 'placed' OR state = 'submitted' OR
         state = 'running' OR state = 'staging');
CREATE INDEX jobs_project ON jobs(project);
CREATE INDEX jobs_state ON jobs(state);
CREATE INDEX jobs_site_state ON jobs(site, state);
