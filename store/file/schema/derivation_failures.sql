-- name: derivation_failures
-- derivation_failures: traces whose runs and steps could not be derived, with the error, so
-- that one bad trace is confined to itself (store/derive/pending.py): every other trace is still
-- derived, and these show in the database status, /metrics and /readyz. A trace's row goes
-- when it next derives (new spans of it mark it pending again); its spans stay stored (schema 4).
CREATE TABLE IF NOT EXISTS derivation_failures (
    trace_id  VARCHAR PRIMARY KEY,
    error     VARCHAR NOT NULL,  -- the derivation's error, first line, at most 500 characters
    failed_at TIMESTAMPTZ NOT NULL
);
