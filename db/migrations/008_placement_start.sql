-- 008_placement_start: a placement decision's predicted start and the
-- reason it gives, so that a queued job shows when it should start and
-- why without its candidates being read (issue 23).

ALTER TABLE placements ADD COLUMN start_ms INTEGER;
ALTER TABLE placements ADD COLUMN reason TEXT;
