-- name: 1_to_2
-- Schema 1 → 2: the identity of a stored span moves from spans' primary key (two hex VARCHARs)
-- to span_keys (three UBIGINTs; ../schema/span_keys.sql, created before this runs). Every span
-- already stored gets its key, so a span sent again after the upgrade is still stored once.
-- spans keeps its version-1 primary key: DuckDB cannot drop a key in place, and the writer only
-- stores spans whose keys span_keys accepted, so the old key never fires; it costs its upkeep.
INSERT OR IGNORE INTO span_keys
SELECT ('0x' || substr(trace_id, 1, 16))::UBIGINT,
       ('0x' || substr(trace_id, 17, 16))::UBIGINT,
       ('0x' || span_id)::UBIGINT
FROM spans;
