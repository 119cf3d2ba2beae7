-- 001_init: jobs and their history, placement decisions, the workload
-- catalog and API tokens.
--
-- Released migrations are never edited: a change is a new NNN_*.sql file.
-- The migrator runs this script and the user_version bump in one
-- transaction, so no statement here may open or close one.
--
-- Every table is STRICT: a value of the wrong type is an error instead of
-- a silent conversion, and the C side binds exactly the declared types.

CREATE TABLE jobs (
  -- AUTOINCREMENT: ids are never reused, even once the newest job is
  -- deleted by a future retention purge; a client holding job 42 must
  -- never be shown another job under that number.
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  -- The names of util/jobspec.h's enum job_state (db.c maps them; the
  -- text is what is persisted, so a name never changes once released).
  state       TEXT    NOT NULL CHECK (state IN ('queued', 'placed',
                'submitted', 'running', 'succeeded', 'failed',
                'cancelled', 'lost')),
  name        TEXT    NOT NULL,
  project     TEXT    NOT NULL,
  -- The catalog entry the job came from.  Not a foreign key: replacing
  -- or removing a workload must not touch the history of its jobs.
  workload    TEXT,
  site        TEXT,
  spec_json   TEXT    NOT NULL,
  -- Copies of spec fields so queries need not parse spec_json.
  gpus        INTEGER NOT NULL CHECK (gpus >= 0),
  gpu_type    TEXT,
  hold        INTEGER NOT NULL DEFAULT 0 CHECK (hold IN (0, 1)),
  -- Unique where set; see jobs_idem below.
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

-- Every index on a rowid table ends with the rowid (here the id) as an
-- implicit last column, so an index ON jobs(project) is the (project, id)
-- index and serves "project = ? ORDER BY id DESC" without a sort.

-- idem_key UNIQUE, as a partial index: most jobs carry no key, and NULLs
-- need not be stored at all.  "idem_key = ?" implies IS NOT NULL, so
-- lookups by key use it.
CREATE UNIQUE INDEX jobs_idem ON jobs(idem_key) WHERE idem_key IS NOT NULL;

-- The scheduler's queue scan (db_job_list_runnable): only queued,
-- unheld jobs, in id order.  A partial index serves a query only when the
-- query's WHERE clause contains these same terms; db.c's does, and names
-- the index (INDEXED BY) so that a drift fails loudly.
CREATE INDEX jobs_runnable ON jobs(id)
  WHERE state = 'queued' AND hold = 0;

-- Non-final jobs in id order (db_job_list_active, restart recovery).
-- Final jobs, the bulk of the table, are not in it.  Same rule as above.
CREATE INDEX jobs_active ON jobs(id)
  WHERE state IN ('queued', 'placed', 'submitted', 'running');

-- Listing a project's (or a token scope's) jobs newest first.
CREATE INDEX jobs_project ON jobs(project);

-- Listing by state newest first (the most common list filter; without it
-- a rare state such as 'failed' scans the whole table).
CREATE INDEX jobs_state ON jobs(state);

-- db_job_counts (GROUP BY site, state for /metrics) reads only this
-- index (covering), and listing by site and state is served by it too.
CREATE INDEX jobs_site_state ON jobs(site, state);

-- Every transition of every job, append-only.
CREATE TABLE job_events (
  -- Not AUTOINCREMENT: events of one job are ordered by id, and a new
  -- row always gets max(id) + 1, which is all that order needs.
  id          INTEGER PRIMARY KEY,
  -- ON DELETE CASCADE: a job and its history are purged together.
  job_id      INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  at_ms       INTEGER NOT NULL,
  from_state  TEXT,
  to_state    TEXT    NOT NULL,
  detail      TEXT
) STRICT;

-- (job_id, id): one job's events in order; also the child index the
-- foreign key needs for cascading deletes.
CREATE INDEX job_events_job ON job_events(job_id);

-- The latest placement decision per job (older ones are replaced: a
-- waiting job is re-decided every tick and its history would be noise).
CREATE TABLE placements (
  job_id      INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  at_ms       INTEGER NOT NULL,
  verdict     TEXT    NOT NULL CHECK (verdict IN ('now', 'wait', 'never')),
  site        TEXT,
  -- JSON text: every candidate site's verdict and reason.
  candidates  TEXT
) STRICT;

-- The workload catalog: name -> JSON definition, stored verbatim.
CREATE TABLE workloads (
  name        TEXT    NOT NULL PRIMARY KEY,
  json        TEXT    NOT NULL,
  created_ms  INTEGER NOT NULL,
  updated_ms  INTEGER NOT NULL
) STRICT;

CREATE TABLE api_tokens (
  -- AUTOINCREMENT: a revoked token's id is never given to a new token.
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  -- SHA-256 hex of the token; the token itself is never stored.
  hash        TEXT    NOT NULL UNIQUE,
  name        TEXT,
  role        TEXT    NOT NULL CHECK (role IN ('admin', 'submitter',
                'viewer')),
  -- 1 when the token is limited to the projects in api_token_projects
  -- (possibly none), 0 for every project.  Explicit because "no rows"
  -- must never read as "every project": an empty scope, or a scope
  -- whose rows went missing, would otherwise widen the token.
  scoped      INTEGER NOT NULL CHECK (scoped IN (0, 1)),
  created_ms  INTEGER NOT NULL
) STRICT;

CREATE TABLE api_token_projects (
  token_id    INTEGER NOT NULL REFERENCES api_tokens(id) ON DELETE CASCADE,
  project     TEXT    NOT NULL,
  PRIMARY KEY (token_id, project)
) STRICT, WITHOUT ROWID;
