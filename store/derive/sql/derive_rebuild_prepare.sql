-- name: derive_rebuild_prepare
-- Before a full rebuild: every trace is touched, and each trace's first arrival is re-read from its spans.
DELETE FROM trace_arrivals;
INSERT INTO trace_arrivals (trace_id, first_received_at)
SELECT trace_id, min(received_at) FROM spans GROUP BY trace_id;
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT trace_id, first_received_at AS since FROM trace_arrivals;
