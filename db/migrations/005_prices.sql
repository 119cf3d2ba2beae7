-- 005_prices: the rates a site's GPU-hours had, each from when (issue
-- 23).  A change adds a row and never rewrites one, so a hold across a
-- change is billed piecewise (policies/price.h, price_split).

CREATE TABLE prices (
  site          TEXT    NOT NULL,
  -- A GPU type as jobs name it, or '*' for an owned site's rates, which
  -- hold for every type it has.
  gpu_type      TEXT    NOT NULL,
  kind          TEXT    NOT NULL CHECK (kind = 'on_demand' OR
                  kind = 'spot' OR kind = 'sunk' OR kind = 'marginal'),
  valid_from_ms INTEGER NOT NULL,
  -- Micro-dollars per GPU-hour; NULL: no price from then on (the config
  -- stopped giving one).
  rate_micro    INTEGER CHECK (rate_micro IS NULL OR rate_micro >= 0),
  -- 'config': what the config said at a start; 'admin': tenbin prices
  -- set, which holds until the config itself changes that price.
  source        TEXT    NOT NULL CHECK (source = 'config' OR
                  source = 'admin'),
  PRIMARY KEY (site, gpu_type, kind, valid_from_ms)
) STRICT, WITHOUT ROWID;
