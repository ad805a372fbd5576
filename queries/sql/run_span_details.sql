-- name: run_span_details
-- What the spans of one run's steps carry beyond the derived facts, for on-call's step details:
-- status and status message, every attribute and every event (exception type and message among
-- them), as JSON text. All the run's steps, or only $span_id when it is given.
SELECT s.span_id,
       s.name AS span_name,
       s.status_code,
       s.status_message,
       s.attributes::VARCHAR AS attributes,
       to_json(s.events)::VARCHAR AS events,
       s.dropped_attributes_count,
       s.dropped_events_count
FROM spans s
WHERE s.trace_id = $trace_id
  AND s.span_id IN (SELECT span_id FROM steps WHERE run_id = $run_id)
  AND ($span_id::VARCHAR IS NULL OR s.span_id = $span_id::VARCHAR)
ORDER BY s.start_ns, s.span_id;
