-- 011_autoscaler: what the autoscaler decided for each elastic site, with
-- the inputs it decided from (broker/autoscaler.c, issue 25), and an
-- index that lets it read a site's usage history for its forecast.

CREATE TABLE autoscaler_log (
  id            INTEGER PRIMARY KEY,
  at_ms         INTEGER NOT NULL,
  site          TEXT    NOT NULL,
  -- what the plan did: launched nodes, released some, held launches
  -- back (a cap, the maximum, the cool-down), or nothing
  action        TEXT    NOT NULL CHECK (action IN ('launch', 'release',
                  'hold', 'none')),
  -- policies/burst.h's reason name ("demand", "forecast", "idle", ...)
  reason        TEXT    NOT NULL,
  launched      INTEGER NOT NULL CHECK (launched >= 0),
  released      INTEGER NOT NULL CHECK (released >= 0),
  live_nodes    INTEGER NOT NULL,
  wanted_nodes  INTEGER NOT NULL,
  demand_gpus   INTEGER NOT NULL,
  forecast_gpus INTEGER NOT NULL,   -- -1: no forecast
  spend_micro   INTEGER NOT NULL,   -- $ per hour of the wanted nodes
  detail        TEXT    NOT NULL
);
CREATE INDEX autoscaler_log_site ON autoscaler_log (site, id);
CREATE INDEX usage_site_from ON usage (site, from_ms);
