-- name: 5_to_6
-- Schema 5 to 6: the revised recognition of docs/conventions.md and §4's numbered culprit and holder.
-- runs gain culprit_step, holder_step, holder_at_deadline and root_missing; trace_arrivals
-- gains spans and derived_at (the pace of a large trace's derivations); spans gain
-- mcp_method_name, filled here from each span's attributes JSON as store/rows/typed_attributes.py
-- types it at ingest (a label: trimmed, lower-cased); traces_awaiting_root and
-- derivation_notes are new tables, made by the DDL. The rules changed which spans are steps,
-- so every trace not already waiting is derived again, from its first span on.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS culprit_step INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS holder_step INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS holder_at_deadline BOOLEAN;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS root_missing BOOLEAN DEFAULT false;
UPDATE runs SET root_missing = false WHERE root_missing IS NULL;
ALTER TABLE trace_arrivals ADD COLUMN IF NOT EXISTS spans BIGINT;
ALTER TABLE trace_arrivals ADD COLUMN IF NOT EXISTS derived_at TIMESTAMPTZ;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS mcp_method_name VARCHAR;
UPDATE spans SET mcp_method_name = lower(trim(json_extract_string(attributes, '$."mcp.method.name"')))
WHERE json_extract_string(attributes, '$."mcp.method.name"') IS NOT NULL;
INSERT INTO pending_derivations
SELECT trace_id, min(received_at) FROM spans
WHERE trace_id NOT IN (SELECT trace_id FROM pending_derivations)
GROUP BY trace_id;
