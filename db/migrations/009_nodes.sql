-- 009_nodes: the VMs of the aws, gcp and azure sites (issue 24).
-- (The idle pieces are usage rows whose job_id is the node's id negated:
-- a VM's idle time is no job's.)  A node
-- is written before its launch request leaves, so the request's
-- idempotency token (derived from the id) is the same after a crash, and
-- every VM that ever existed is here with its launch and end time: that
-- is what the ledger bills, idle time included.  token_hash is the
-- SHA-256 of the node agent's token, which a restart re-derives.

CREATE TABLE nodes (
  id INTEGER PRIMARY KEY,
  site TEXT NOT NULL,
  shape TEXT NOT NULL,
  zone TEXT NOT NULL,
  spot INTEGER NOT NULL DEFAULT 0,
  attempt INTEGER NOT NULL DEFAULT 1,
  state TEXT NOT NULL,
  vm_id TEXT,
  token_hash TEXT UNIQUE,
  gpus INTEGER NOT NULL,
  gpu_type TEXT,
  price_micro INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL,
  launched_ms INTEGER NOT NULL DEFAULT 0,
  registered_ms INTEGER NOT NULL DEFAULT 0,
  seen_ms INTEGER NOT NULL DEFAULT 0,
  ended_ms INTEGER NOT NULL DEFAULT 0,
  reason TEXT,
  -- The VM's GPUs that no running job holds, since when: billed to the
  -- project '(idle)' piece by piece, so that the jobs' holds and the
  -- idle pieces add up to the VM's whole uptime.
  idle_gpus INTEGER NOT NULL DEFAULT 0,
  idle_from_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX nodes_live ON nodes(site) WHERE ended_ms = 0;

-- How many times a job was placed again after it had started (a spot
-- VM taken back, a node lost): TENBIN_RESTART_COUNT in its next run.
ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
