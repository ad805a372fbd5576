-- name: span_keys
-- span_keys: the identity of every stored span, so that a span sent again is stored once.
-- (trace_id, span_id) as three integers, the 16-byte trace id in two halves and the 8-byte span
-- id, all big-endian as their hex reads. The writer inserts the batch's keys here first (INSERT
-- OR IGNORE ... RETURNING) and stores only the spans whose keys were new. The primary key on
-- spans' two hex VARCHARs cost more: INSERT OR IGNORE of 2,048-span batches measured ~28 µs
-- of CPU a span with it, ~24 with this table (bench/bench_ingest_stages.py, same payloads).
CREATE TABLE IF NOT EXISTS span_keys (
    trace_key_hi UBIGINT NOT NULL,  -- trace_id bytes 0-7
    trace_key_lo UBIGINT NOT NULL,  -- trace_id bytes 8-15
    span_key     UBIGINT NOT NULL,  -- span_id
    PRIMARY KEY (trace_key_hi, trace_key_lo, span_key)
);
