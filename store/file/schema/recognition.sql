-- name: recognition
-- What the rules across traces of docs/conventions.md ("A model step without a model name",
-- "HTTP client spans in a trace of their own") keep between derivations. Each trace's rows are
-- replaced whenever the trace is derived (store/derive/sql/derive_refresh.sql and
-- derive_steps.sql), like its runs and steps; never edit them by hand. No keys or indexes, as runs
-- and steps: the derivation's deletes by trace are hash joins, and the lookups by service and time
-- go through `bucket` (below), whose zone maps skip every row group far from the traces of a turn
-- (rows are appended in arrival order).
--
-- Times are cut into buckets of 2^34 ns (~17 s): an interval is stored once per bucket it
-- touches, so "which traces of this service may hold this span" is an equality join on
-- (service, bucket) followed by a containment test among the few rows of that bucket, never a
-- comparison of every span with every trace of the service. An interval touching more than
-- 4,096 buckets (over ~19 hours) is stored once with bucket NULL and compared by service alone.

-- call_hulls: per trace and service.name, the interval its model and tool spans cover (those a
-- row of the table of docs/conventions.md makes model or tool candidates, whether or not the walk
-- keeps them as steps). Every model or tool step of the trace lies inside it, so a one-span HTTP
-- trace of the same service outside it is held by none of them (docs/conventions.md, "HTTP client
-- spans in a trace of their own"): the derivation reads the traces whose hull holds a stray, and
-- decides on their steps. One row a trace and service for most runs, where a row per step cost ~8
-- rows a step.
CREATE TABLE IF NOT EXISTS call_hulls (
    service_name         VARCHAR NOT NULL,  -- the spans' service.name ('' when absent)
    bucket               BIGINT,            -- a 2^34 ns bucket its interval touches; NULL: long
    start_ns             BIGINT NOT NULL,   -- the earliest start of those spans
    end_ns               BIGINT NOT NULL,   -- their latest end
    trace_id             VARCHAR NOT NULL
);

-- stray_calls: every trace that is one root HTTP client span of row 12 without budget.total_ms,
-- and the step it joined (docs/conventions.md): the holder columns are NULL while it stays a run of
-- its own (held by no step, or by two or more).
CREATE TABLE IF NOT EXISTS stray_calls (
    trace_id             VARCHAR NOT NULL,
    span_id              VARCHAR NOT NULL,
    service_name         VARCHAR NOT NULL,
    bucket               BIGINT NOT NULL,   -- the 2^34 ns bucket of its start
    start_ns             BIGINT NOT NULL,
    end_ns               BIGINT NOT NULL,
    holder_trace_id      VARCHAR,
    holder_span_id       VARCHAR,
    holder_run_span_id   VARCHAR
);

-- model_span_names: per trace, the span names of its model spans of rows 2-9 by service.name,
-- with the name each named one carries, and NULL for the unnamed ones (docs/conventions.md, "A
-- model step without a model name": an unnamed model step takes the one name its service's named
-- spans of that span name carry). Unnamed rows are few: a turn whose span names have none anywhere
-- resolves nothing.
CREATE TABLE IF NOT EXISTS model_span_names (
    service_name         VARCHAR NOT NULL,
    span_name            VARCHAR NOT NULL,
    trace_id             VARCHAR NOT NULL,
    step_name            VARCHAR            -- NULL: the trace has unnamed spans of this name
);
