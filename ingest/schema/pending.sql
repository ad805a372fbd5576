-- pending_derivations: traces with spans stored since their runs and steps were last derived.
-- The writer adds to it in the same transaction as the spans, and the derivation removes
-- from it in the same transaction as the derived rows, so that after a crash nothing is
-- forgotten: whatever was acknowledged is derived on the next start. Deriving outside the
-- acknowledged write keeps its cost (~175 ms per transaction measured, whatever its size)
-- off every request's latency; the derived tables catch up within about a second.
CREATE TABLE IF NOT EXISTS pending_derivations (
    trace_id VARCHAR PRIMARY KEY,
    -- when the earliest not-yet-derived span of the trace was stored: the derivation reads
    -- spans from there on (spans are appended in arrival order, so older row groups are skipped)
    since    TIMESTAMPTZ NOT NULL
);
