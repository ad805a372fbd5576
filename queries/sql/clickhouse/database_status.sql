-- name: database_status
-- What the backend holds: spans, runs, the newest span start, and traces not derived yet (filters unused); ClickHouse dialect of sql/database_status.sql.
-- otel_traces has no arrival time: newest_received is the newest span start. spans counts rows,
-- a span the Collector delivered twice included. traces_pending_derivation is 0 when the
-- derived tables were built from the rows stored now, else the traces that arrived since.
SELECT (SELECT count() FROM otel_traces) AS spans,
       (SELECT count() FROM budgetscope_runs) AS runs,
       (SELECT toTimeZone(max(Timestamp), 'UTC') FROM otel_traces) AS newest_received,
       if(spans = (SELECT spans FROM budgetscope_derive_state), toInt64(0),
          greatest(toInt64(0), toInt64((SELECT uniq(TraceId) FROM otel_traces))
                               - toInt64((SELECT traces FROM budgetscope_derive_state))))
           AS traces_pending_derivation,
       -- rebuilt whole, in one statement: no trace fails alone on this backend
       toInt64(0) AS traces_failed_derivation;
