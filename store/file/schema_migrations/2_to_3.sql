-- name: 2_to_3
-- Schema 2 → 3: pending_derivations loses its primary key on trace_id (../schema/pending.sql:
-- marks become rows appended per write, so the derivation can run beside the writer). DuckDB
-- cannot drop a key in place: the marks move to a table without one, which takes the name.
CREATE TABLE pending_derivations_3 (trace_id VARCHAR NOT NULL, since TIMESTAMPTZ NOT NULL);
INSERT INTO pending_derivations_3 SELECT trace_id, since FROM pending_derivations;
DROP TABLE pending_derivations;
ALTER TABLE pending_derivations_3 RENAME TO pending_derivations;
