-- 002_meta: facts about this database itself.
--
-- 'instance' names this broker's state: it goes into the tag of every job
-- sent to a shared site (a Slurm cluster), so that two brokers using the
-- same cluster, or a broker started on a fresh database, never take each
-- other's jobs for their own.  Made once, here, and never changed.

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

INSERT INTO meta (key, value) VALUES ('instance', lower(hex(randomblob(6))));
