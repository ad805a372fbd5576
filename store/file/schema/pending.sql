-- name: pending
-- pending_derivations: traces with spans stored since their runs and steps were last derived.
-- The writer appends a mark per trace in the same transaction as the spans, and the derivation
-- removes the marks it read in the same transaction as the derived rows, so that after a crash
-- nothing is forgotten: whatever was acknowledged is derived on the next start.
-- The derivation runs on its own connection, beside the writer (store/write/derive_thread.py), so a
-- trace may be marked again while its derivation runs. Hence no primary key: a mark is a row
-- appended per write (INSERT never conflicts with the derivation's DELETE, and never merges into
-- a mark the derivation is removing), and the derivation deletes only the marks its snapshot
-- saw, so a mark added meanwhile stays for the next turn (schema 3; 2 had a key on trace_id).
CREATE TABLE IF NOT EXISTS pending_derivations (
    trace_id VARCHAR NOT NULL,
    -- when the write that made this mark stored its spans: the derivation reads the trace's
    -- spans from its earliest mark on (spans are appended in arrival order, so older row
    -- groups are skipped)
    since    TIMESTAMPTZ NOT NULL
);

-- Traces whose runs only need measuring again against the declared budgets
-- (docs/guide.md#declaring-budgets): a change of a declaration marks them here, and the derivation
-- re-measures their stored runs and steps (store/derive/sql/derive_budgets.sql), unless the trace
-- is also in pending_derivations, whose full derivation measures it anyway.
CREATE TABLE IF NOT EXISTS pending_measurements (
    trace_id VARCHAR NOT NULL
);
