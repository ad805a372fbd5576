-- name: declared_cap_set
-- Declare (or change) the cap of a step key.
INSERT INTO declared_step_caps VALUES ($step_key, $cap_ms, now())
ON CONFLICT (step_key) DO UPDATE SET cap_ms = excluded.cap_ms,
                                     declared_at = excluded.declared_at
