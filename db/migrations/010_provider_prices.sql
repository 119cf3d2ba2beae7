-- 010_provider_prices: a third source of a price, 'provider': what a
-- cloud site's own price source said (EC2's spot price history, the
-- Cloud Billing Catalog, Azure's Retail Prices), refreshed while tenbind
-- runs (issue 24).  It overrides the config's price and yields to an
-- admin's.  SQLite cannot change a CHECK in place, so the table is
-- rebuilt as its documentation says ("Making Other Kinds Of Table
-- Schema Changes"); nothing refers to it.

CREATE TABLE prices_new (
  site          TEXT    NOT NULL,
  gpu_type      TEXT    NOT NULL,
  kind          TEXT    NOT NULL CHECK (kind = 'on_demand' OR
                  kind = 'spot' OR kind = 'sunk' OR kind = 'marginal'),
  valid_from_ms INTEGER NOT NULL,
  rate_micro    INTEGER CHECK (rate_micro IS NULL OR rate_micro >= 0),
  -- 'config': what the config said at a start; 'admin': tenbin prices
  -- set, which holds until the config itself changes that price;
  -- 'provider': the site's price source, read every price_refresh_s.
  source        TEXT    NOT NULL CHECK (source = 'config' OR
                  source = 'admin' OR source = 'provider'),
  PRIMARY KEY (site, gpu_type, kind, valid_from_ms)
) STRICT, WITHOUT ROWID;

INSERT INTO prices_new (site, gpu_type, kind, valid_from_ms, rate_micro,
                        source)
  SELECT site, gpu_type, kind, valid_from_ms, rate_micro, source
  FROM prices;
DROP TABLE prices;
ALTER TABLE prices_new RENAME TO prices;
