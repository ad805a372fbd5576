-- name: derive_state
-- Whether the derived tables are current: otel_traces now against what the last derive_build read.
SELECT (SELECT count() FROM otel_traces) AS spans,
       (SELECT max(Timestamp) FROM otel_traces) AS newest_span,
       s.spans AS derived_spans,
       s.newest_span AS derived_newest_span,
       s.traces AS derived_traces,
       s.derived_at AS derived_at
FROM budgetscope_derive_state s;
