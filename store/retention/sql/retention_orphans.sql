-- name: retention_orphans
-- Resources and instrumentation scopes no stored span points at any more (their spans were
-- all removed by retention). Runs on the single writer, so no span referring to them can be
-- inserted meanwhile; a later span with the same resource simply stores it again.
-- OTLP log records share them (store/file/schema/log_records.sql).
DELETE FROM resources r
WHERE NOT EXISTS (SELECT 1 FROM spans s WHERE s.resource_id = r.resource_id)
  AND NOT EXISTS (SELECT 1 FROM log_records l WHERE l.resource_id = r.resource_id);
DELETE FROM scopes c
WHERE NOT EXISTS (SELECT 1 FROM spans s WHERE s.scope_id = c.scope_id)
  AND NOT EXISTS (SELECT 1 FROM log_records l WHERE l.scope_id = c.scope_id);
