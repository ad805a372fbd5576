-- name: 7_to_8
-- Schema 7 to 8: the rules across traces of docs/conventions.md (a model step named after its
-- service's named spans, HTTP client spans in a trace of their own). Its tables (call_hulls,
-- stray_calls, model_span_names: store/file/schema/recognition.sql) are made by the DDL. The
-- rules changed which spans are steps and what a step is named, so every trace is derived again,
-- from its first span on.
INSERT INTO pending_derivations
SELECT trace_id, min(received_at) FROM spans
WHERE trace_id NOT IN (SELECT trace_id FROM pending_derivations)
GROUP BY trace_id;
