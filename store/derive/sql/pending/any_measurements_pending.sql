-- name: any_measurements_pending
-- Whether the pass of measurements may have anything to take.
--
-- store/derive/pending.py asks before the pass: a pass that takes nothing still costs ~1.8 ms
-- of CPU (its transaction, its take, its count), paid by every run. A superset of what
-- take_pending_measurements.sql takes: a trace marked both ways is left to it.
SELECT EXISTS (SELECT 1 FROM pending_measurements) AS measurements
