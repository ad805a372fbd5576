-- name: derive_build
-- Build budgetscope_runs, budgetscope_steps and budgetscope_reconcile_links from otel_traces, inside ClickHouse (docs/metrics.md §1-§6): the spans.
--
-- The ClickHouse dialect of store/derive/sql/derive_refresh.sql: the same steps in the same order,
-- the same rules, so every derived number equals the DuckDB backend's. Differences are of
-- dialect only: spans come from the Collector exporter's otel_traces (attribute values arrive as
-- strings and are cast here the way store/rows/typed_attributes.py casts them at ingest); the whole
-- table is derived at once into *_next tables that then replace the live ones, instead of a
-- refresh of the traces one write touched (ClickHouse has no transactions to make a
-- delete-and-insert atomic; an exchange of tables is).
-- The build is this file (the spans), derive_walk.sql, derive_recognise.sql, derive_walk.sql again
-- (the traces where one call left two spans), then derive_steps.sql, derive_usage.sql,
-- derive_cost.sql and derive_measure.sql (store.clickhouse runs them).
-- Statements end with ';' at the end of a line (store.clickhouse.split_statements).
-- Every query runs with join_use_nulls = 1 (a missing join side is NULL, as in DuckDB).
-- Its scratch and *_next tables are dropped before and after by derive_scratch_drop.sql.
-- The scratch tables (budgetscope_tmp_*) are Memory tables: read only within one build, they
-- need no parts on disk (a rebuild takes a third less time: bench/README.md). Compressed:
-- uncompressed, a build of 1M spans peaked at twice the memory. A build that died leaves
-- them, empty after a restart, and the next build drops them first.

-- 0. Declared budgets and step caps (docs/guide.md#declaring-budgets; the DuckDB schema's
-- declared_budgets.sql), created empty the first time: `budgetscope --backend URL budgets`
-- writes them.
CREATE TABLE IF NOT EXISTS budgetscope_declared_budgets (
    scope String, agent String, budget_ms Nullable(Int64), declared_at DateTime64(3, 'UTC'),
    tokens Nullable(Int64), usd_nano Nullable(Int64), usd_per_week_nano Nullable(Int64)
) ENGINE = MergeTree ORDER BY (scope, agent);
-- docs/metrics.md §11.5: a declaration's token and dollar dimensions, beside its duration
-- (a table made before them gains them; each dimension may be left unset)
ALTER TABLE budgetscope_declared_budgets ADD COLUMN IF NOT EXISTS tokens Nullable(Int64);
ALTER TABLE budgetscope_declared_budgets ADD COLUMN IF NOT EXISTS usd_nano Nullable(Int64);
ALTER TABLE budgetscope_declared_budgets
    ADD COLUMN IF NOT EXISTS usd_per_week_nano Nullable(Int64);
ALTER TABLE budgetscope_declared_budgets MODIFY COLUMN budget_ms Nullable(Int64);
CREATE TABLE IF NOT EXISTS budgetscope_declared_step_caps (
    step_key String, cap_ms Int64, declared_at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY step_key;

-- The state this derivation is built from: stored rows, the newest span start and the
-- declarations. Readers compare it with otel_traces and the declarations to know whether the
-- derived tables are current (derive_state.sql).
CREATE TABLE budgetscope_derive_state_next ENGINE = MergeTree ORDER BY tuple() AS
SELECT count() AS spans, max(Timestamp) AS newest_span, uniqExact(TraceId) AS traces,
       now64(3) AS derived_at,
       -- the declarations' fingerprint; the same expression is in derive_state.sql
       concat(toString((SELECT count() FROM budgetscope_declared_budgets)), ':',
              toString((SELECT sum(cityHash64(scope, agent, coalesce(budget_ms, -1),
                                              coalesce(tokens, -1), coalesce(usd_nano, -1)))
                        FROM budgetscope_declared_budgets)), '/',
              toString((SELECT count() FROM budgetscope_declared_step_caps)), ':',
              toString((SELECT sum(cityHash64(step_key, cap_ms))
                        FROM budgetscope_declared_step_caps))) AS declared,
       -- otel_logs' rows when built (0 without that table): new log records rebuild too
       (SELECT log_rows FROM budgetscope_tmp_log_state) AS log_rows,
       -- the prices set and the bundled table's version (docs/metrics.md §11.3); the same
       -- expression is in derive_state.sql
       concat(toString((SELECT count() FROM budgetscope_price_overrides)), ':',
              toString((SELECT sum(cityHash64(model_pattern, provider, coalesce(from_ns, -1),
                                              input_rate, output_rate,
                                              coalesce(cache_read_rate, -1),
                                              coalesce(cache_write_rate, -1)))
                        FROM budgetscope_price_overrides)), '/',
              (SELECT any(value) FROM budgetscope_meta WHERE key = 'genai_prices_version'))
           AS prices
FROM otel_traces;

-- 1. One row per (trace id, span id): the Collector retries, so a span may be stored twice; the
-- DuckDB backend keeps one copy of each, so does this. The budget.* attributes are read as
-- trimmed strings (NULL when absent: a missing Map key reads as ''), then typed (`raw` and
-- `typed` are one statement: a table between them cost a write and a read of every span),
-- as store/rows/typed_attributes.py types them at ingest (an integer is any number without a
-- fraction, written as an integer or not); then step kind, name and class (docs/metrics.md §2, §3).
CREATE TABLE budgetscope_tmp_spans_read ENGINE = Memory SETTINGS compress = 1 AS
WITH raw AS (
        SELECT TraceId AS trace_id, SpanId AS span_id, nullIf(ParentSpanId, '') AS parent_span_id,
               toString(SpanName) AS name,
               -- the instrumentation scope (docs/conventions.md, one call, two spans): as the
               -- DuckDB store tells scopes apart, by name and version
               concat(ScopeName, '@', ScopeVersion) AS scope_id,
               toUnixTimestamp64Nano(Timestamp) AS start_ns,
               toUnixTimestamp64Nano(Timestamp) + toInt64(Duration) AS end_ns,
               -- the exporter writes pdata's names (Unset/Ok/Error); older versions wrote the proto's
               multiIf(StatusCode IN ('Error', 'STATUS_CODE_ERROR'), 2,
                       StatusCode IN ('Ok', 'STATUS_CODE_OK'), 1, 0) AS status_code,
               nullIf(toString(ServiceName), '') AS service_name,
               if(mapContains(SpanAttributes, 'budget.total_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.total_ms']), NULL) AS t_total,
               if(mapContains(SpanAttributes, 'budget.deadline_unix_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.deadline_unix_ms']), NULL) AS t_deadline,
               if(mapContains(SpanAttributes, 'budget.reserve_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.reserve_ms']), NULL) AS t_reserve,
               if(mapContains(SpanAttributes, 'budget.remaining_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.remaining_ms']), NULL) AS t_remaining,
               if(mapContains(SpanAttributes, 'budget.cap_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.cap_ms']), NULL) AS t_cap,
               if(mapContains(SpanAttributes, 'budget.allocated_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.allocated_ms']), NULL) AS t_allocated,
               if(mapContains(SpanAttributes, 'budget.attempt'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.attempt']), NULL) AS t_attempt,
               if(mapContains(SpanAttributes, 'budget.cleanup_ms'),
                  trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.cleanup_ms']), NULL) AS t_cleanup,
               -- the HTTP status under its two names, newer first (docs/metrics.md §3 rule 2)
               multiIf(mapContains(SpanAttributes, 'http.response.status_code'),
                           trim(BOTH ' \t\n\r' FROM SpanAttributes['http.response.status_code']),
                       mapContains(SpanAttributes, 'http.status_code'),
                           trim(BOTH ' \t\n\r' FROM SpanAttributes['http.status_code']), NULL)
                   AS t_http,
               -- the attributes of docs/conventions.md, typed as ingest types them
               -- (store/derive/conventions.py)
               /*@clickhouse_reads*/,
               -- docs/metrics.md §11: usage, reported costs and token and dollar budgets as
               -- strings, the labels cost reads (store/derive/usage_reads.py)
               /*@usage_reads*/,
               toInt8(multiIf(SpanKind IN ('Client', 'SPAN_KIND_CLIENT'), 3,
                              SpanKind IN ('Server', 'SPAN_KIND_SERVER'), 2,
                              SpanKind IN ('Internal', 'SPAN_KIND_INTERNAL'), 1,
                              SpanKind IN ('Producer', 'SPAN_KIND_PRODUCER'), 4,
                              SpanKind IN ('Consumer', 'SPAN_KIND_CONSUMER'), 5, 0)) AS kind,
               toString(StatusMessage) AS status_message,
               -- gRPC status under its three names, most trusted first (docs/metrics.md §3 rule 3)
               multiIf(mapContains(SpanAttributes, 'rpc.grpc.status_code'),
                           SpanAttributes['rpc.grpc.status_code'],
                       mapContains(SpanAttributes, 'rpc.response.status_code'),
                           SpanAttributes['rpc.response.status_code'],
                       mapContains(SpanAttributes, 'rpc.status_code'),
                           SpanAttributes['rpc.status_code'], NULL) AS t_grpc,
               if(mapContains(SpanAttributes, 'budget.run.outcome'),
                  lowerUTF8(trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.run.outcome'])), NULL)
                   AS budget_run_outcome,
               if(mapContains(SpanAttributes, 'budget.outcome'),
                  lowerUTF8(trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.outcome'])), NULL)
                   AS budget_outcome,
               if(mapContains(SpanAttributes, 'budget.side_effect'),
                  lowerUTF8(trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.side_effect'])), NULL)
                   AS budget_side_effect,
               if(mapContains(SpanAttributes, 'budget.effect_status'),
                  lowerUTF8(trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.effect_status'])), NULL)
                   AS budget_effect_status,
               if(mapContains(SpanAttributes, 'budget.idempotency_key'),
                  SpanAttributes['budget.idempotency_key'], NULL) AS budget_idempotency_key,
               if(mapContains(SpanAttributes, 'budget.hedge'),
                  lowerUTF8(trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.hedge'])), NULL) AS t_hedge,
               if(mapContains(SpanAttributes, 'budget.reconcile.result'),
                  lowerUTF8(trim(BOTH ' \t\n\r' FROM SpanAttributes['budget.reconcile.result'])), NULL)
                   AS budget_reconcile_result,
               if(mapContains(SpanAttributes, 'error.type'),
                  SpanAttributes['error.type'], NULL) AS error_type,
               -- exception.type of each `exception` event, in event order, non-empty ones only
               arrayFilter(x -> x != '', arrayMap((n, a) -> if(n = 'exception', a['exception.type'], ''),
                                                  Events.Name, Events.Attributes)) AS exception_types,
               -- and their exception.message, in the same order
               arrayFilter(x -> trimBoth(x) != '',
                           arrayMap((n, a) -> if(n = 'exception', a['exception.message'], ''),
                                    Events.Name, Events.Attributes)) AS event_messages,
               arrayZip(Links.TraceId, Links.SpanId) AS links,
               -- for a model span's sign of a call (docs/conventions.md, a preparation span)
               mapKeys(SpanAttributes) AS attribute_keys
        FROM otel_traces
        LIMIT 1 BY TraceId, SpanId
), typed AS (
    SELECT raw.*,
           -- exception log records carrying the span's context (derive_log_exceptions.sql)
           le.log_exception_types AS log_exception_types,
           le.log_exception_messages AS log_exception_messages,
           -- docs/metrics.md §11.1-§11.3: each value cast as ingest casts it (-1: not valid)
           /*@usage_values*/,
           coalesce(toInt64OrNull(t_total), if(toFloat64OrNull(t_total) = floor(toFloat64OrNull(t_total)) AND abs(toFloat64OrNull(t_total)) < 9.2e18, toInt64(toFloat64OrNull(t_total)), NULL)) AS budget_total_ms,
           coalesce(toInt64OrNull(t_deadline), if(toFloat64OrNull(t_deadline) = floor(toFloat64OrNull(t_deadline)) AND abs(toFloat64OrNull(t_deadline)) < 9.2e18, toInt64(toFloat64OrNull(t_deadline)), NULL)) AS budget_deadline_unix_ms,
           coalesce(toInt64OrNull(t_reserve), if(toFloat64OrNull(t_reserve) = floor(toFloat64OrNull(t_reserve)) AND abs(toFloat64OrNull(t_reserve)) < 9.2e18, toInt64(toFloat64OrNull(t_reserve)), NULL)) AS budget_reserve_ms,
           coalesce(toInt64OrNull(t_remaining), if(toFloat64OrNull(t_remaining) = floor(toFloat64OrNull(t_remaining)) AND abs(toFloat64OrNull(t_remaining)) < 9.2e18, toInt64(toFloat64OrNull(t_remaining)), NULL)) AS budget_remaining_ms,
           coalesce(toInt64OrNull(t_cap), if(toFloat64OrNull(t_cap) = floor(toFloat64OrNull(t_cap)) AND abs(toFloat64OrNull(t_cap)) < 9.2e18, toInt64(toFloat64OrNull(t_cap)), NULL)) AS budget_cap_ms,
           coalesce(toInt64OrNull(t_allocated), if(toFloat64OrNull(t_allocated) = floor(toFloat64OrNull(t_allocated)) AND abs(toFloat64OrNull(t_allocated)) < 9.2e18, toInt64(toFloat64OrNull(t_allocated)), NULL)) AS budget_allocated_ms,
           coalesce(toInt64OrNull(t_attempt), if(toFloat64OrNull(t_attempt) = floor(toFloat64OrNull(t_attempt)) AND abs(toFloat64OrNull(t_attempt)) < 9.2e18, toInt64(toFloat64OrNull(t_attempt)), NULL)) AS budget_attempt,
           coalesce(toInt64OrNull(t_cleanup), if(toFloat64OrNull(t_cleanup) = floor(toFloat64OrNull(t_cleanup)) AND abs(toFloat64OrNull(t_cleanup)) < 9.2e18, toInt64(toFloat64OrNull(t_cleanup)), NULL)) AS budget_cleanup_ms,
           coalesce(toInt64OrNull(t_http), if(toFloat64OrNull(t_http) = floor(toFloat64OrNull(t_http)) AND abs(toFloat64OrNull(t_http)) < 9.2e18, toInt64(toFloat64OrNull(t_http)), NULL)) AS http_response_status_code,
           -- a gRPC status name (DEADLINE_EXCEEDED) or its number
           multiIf(upperUTF8(trim(BOTH ' \t\n\r' FROM t_grpc)) IN ('OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'),
                   toInt64(indexOf(['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'], upperUTF8(trim(BOTH ' \t\n\r' FROM t_grpc))) - 1),
               coalesce(toInt64OrNull(trim(BOTH ' \t\n\r' FROM t_grpc)), if(toFloat64OrNull(trim(BOTH ' \t\n\r' FROM t_grpc)) = floor(toFloat64OrNull(trim(BOTH ' \t\n\r' FROM t_grpc))) AND abs(toFloat64OrNull(trim(BOTH ' \t\n\r' FROM t_grpc))) < 9.2e18, toInt64(toFloat64OrNull(trim(BOTH ' \t\n\r' FROM t_grpc))), NULL))) AS grpc_status_code,
           CAST(multiIf(t_hedge IN ('true', '1', 'yes'), true, t_hedge IN ('false', '0', 'no'),
                        false, NULL), 'Nullable(Bool)') AS budget_hedge
    FROM raw
    LEFT JOIN (SELECT trace_id AS log_trace_id, span_id AS log_span_id,
                      types AS log_exception_types, messages AS log_exception_messages
               FROM budgetscope_tmp_log_exceptions) le
           ON le.log_trace_id = raw.trace_id AND le.log_span_id = raw.span_id
), recognised AS (
    SELECT *,
           /*@step_row*/ AS step_row,
           -- docs/metrics.md §11: each quantity from its first valid spelling, the reported
           -- cost, the budgets, the attributes ignored (as store/rows/usage.py merges them)
           /*@usage_typed*/
    FROM typed
), row_named AS (
    -- the name the matched row gives from the span's attributes, if any (docs/conventions.md)
    SELECT *, /*@row_name*/ AS row_name FROM recognised
), named AS (
    SELECT *,
           /*@step_kind*/ AS step_kind,
           /*@raw_step_name*/ AS raw_step_name,
           /*@convention*/ AS convention,
           /*@is_agent*/ AS is_agent,
           /*@needs_no_step_ancestor*/ AS needs_no_step_ancestor,
           -- docs/metrics.md §11.2: whether the span carries usage or a reported cost; §3 rule
           -- 1b: a gateway's budget refusal in error.type, an exception type or message (the
           -- texts less the status message an ERROR span adds last)
           /*@carries_usage*/ AS carries,
           arrayExists(n -> /*@budget_refusal*/, arraySlice(error_norms, 1,
               length(error_norms) - if(status_code = 2, 1, 0))) AS budget_refusal,
           -- The exception types of each span (docs/metrics.md §3 rule 4), gathered in this one
           -- place: its `exception` events, then the exception log records carrying its context.
           arrayFilter(x -> trimBoth(x) != '', arrayConcat(exception_types, log_exception_types))
               AS exception_texts,
           arrayFilter(x -> trimBoth(x) != '', arrayConcat(event_messages, log_exception_messages))
               AS exception_messages,
           coalesce(trimBoth(error_type) != '', false) OR length(exception_texts) > 0
               AS has_error_type,
           -- rule 4's texts in order (error.type, exception types, exception messages, an ERROR
           -- span's status message), normalised, and their codes
           arrayMap(x -> /*@normalise_x*/,
                    arrayConcat(if(trimBoth(coalesce(error_type, '')) != '',
                                   [assumeNotNull(error_type)], []),
                                exception_texts, exception_messages,
                                if(status_code = 2, [status_message], []))) AS error_norms,
           arrayMap(n -> /*@code_n*/, error_norms) AS error_codes
    FROM row_named
), classed AS (
    SELECT *,
           -- docs/conventions.md: a callable's `.__call__` dropped; an unnamed span of rows 2-9
           /*@step_name*/ AS step_name,
           /*@unnamed*/ AS unnamed,
           coalesce(/*@outcome_class*/, if(budget_refusal, 'refused', NULL),
                    /*@http_class*/, /*@grpc_class*/,
                    arrayFirst(c -> c IS NOT NULL,
                               arrayMap((n, c) -> /*@text_class*/, error_norms, error_codes)),
                    if(/*@tool_timeout_result*/, 'client_timeout', NULL)) AS specific
    FROM named
)
SELECT trace_id, span_id, parent_span_id, scope_id, name, start_ns, end_ns, status_code,
       service_name, gen_ai_agent_name, budget_total_ms, budget_deadline_unix_ms,
       budget_reserve_ms, budget_run_outcome, budget_remaining_ms, budget_cap_ms,
       budget_allocated_ms, budget_side_effect, budget_effect_status, budget_idempotency_key,
       budget_attempt, budget_hedge, budget_reconcile_result, budget_cleanup_ms,
       -- docs/metrics.md §11 (derive_usage.sql, derive_cost.sql read them): usage and cost,
       -- what prices the span, the budgets a run states and which budget a refusal names
       carries, usage_ignored, budget_refusal, budget_refused_by, budget_run_exhausted_by,
       budget_total_tokens, budget_total_usd_nano,
       usage_input, usage_cache_read, usage_cache_write, usage_output, usage_reasoning,
       usage_total, usage_input_includes_cache, cost_reported_nano,
       if(carries, /*@pricing_model*/, NULL) AS model_ref,
       if(carries, /*@pricing_provider_raw*/, NULL) AS provider_raw,
       budget_total_ms IS NOT NULL OR parent_span_id IS NULL AS is_run,
       step_row,
       needs_no_step_ancestor, is_agent,
       step_kind, step_name, convention,
       specific,
       coalesce(specific, if(has_error_type OR status_code = 2, 'error', 'ok')) AS own_class,
       -- rule 6's evidence; a wrapper exception that rule 4 classes `error` only is passed over
       budget_outcome IS NOT NULL OR http_response_status_code IS NOT NULL
           OR grpc_status_code IS NOT NULL
           OR ((has_error_type OR length(exception_messages) > 0) AND specific IS NOT NULL)
           AS has_evidence,
       links AS link_targets,
       unnamed,
       -- docs/conventions.md, "A preparation span is not a call": a model span's own sign of a call
       -- (NULL for other spans), read by derive_recognise.sql
       /*@model_sign*/ AS model_sign,
       -- docs/conventions.md, "HTTP client spans in a trace of their own": a root HTTP client span
       -- of row 12 without a budget, which a trace of one span may be
       /*@stray_call*/ AND parent_span_id IS NULL AND budget_total_ms IS NULL AS stray_root
FROM classed;

-- docs/conventions.md, "A model step without a model name" (as derive_refresh.sql 1d, over every
-- trace at once): an unnamed model span takes the one name that the named model spans of rows 2-9
-- of its service with its span name carry; none, or two or more: its span name.
CREATE TABLE budgetscope_tmp_model_names ENGINE = Memory SETTINGS compress = 1 AS
SELECT coalesce(service_name, '') AS service_name, name AS span_name,
       if(uniqExact(step_name) = 1, any(step_name), NULL) AS resolved
FROM budgetscope_tmp_spans_read
WHERE step_kind = 'model' AND step_row IN (/*@named_rows*/) AND NOT unnamed
GROUP BY service_name, span_name;

-- 1b. One call, two sibling spans (as derive_refresh.sql step 1b): one parent, one step key,
-- nested intervals, two instrumentation scopes, paired one to one with the nearest; the outer is
-- a wrapper. Budget steps never.
CREATE TABLE budgetscope_tmp_sibling_twins ENGINE = Memory SETTINGS compress = 1 AS
WITH grouped AS (
    SELECT trace_id, parent_span_id, step_kind, step_name
    FROM budgetscope_tmp_spans_read
    WHERE step_row IS NOT NULL AND step_row != '1' AND parent_span_id IS NOT NULL
    GROUP BY trace_id, parent_span_id, step_kind, step_name
    HAVING min(scope_id) != max(scope_id)
), candidates AS (
    SELECT trace_id, parent_span_id, span_id, scope_id, step_kind, step_name, start_ns, end_ns
    FROM budgetscope_tmp_spans_read
    WHERE step_row IS NOT NULL AND step_row != '1'
      AND (trace_id, parent_span_id, step_kind, step_name) IN (SELECT * FROM grouped)
), pairs AS (
    SELECT a.trace_id AS trace_id, a.span_id AS a_id, b.span_id AS b_id,
           abs(a.start_ns - b.start_ns) + abs(a.end_ns - b.end_ns) AS distance,
           a.start_ns <= b.start_ns AND a.end_ns >= b.end_ns
               AND (a.start_ns < b.start_ns OR a.end_ns > b.end_ns OR a.span_id < b.span_id)
               AS a_outer
    FROM candidates a
    JOIN candidates b ON b.trace_id = a.trace_id AND b.parent_span_id = a.parent_span_id
                     AND b.step_kind = a.step_kind AND b.step_name = a.step_name
    WHERE b.scope_id != a.scope_id
      AND ((a.start_ns <= b.start_ns AND a.end_ns >= b.end_ns)
           OR (b.start_ns <= a.start_ns AND b.end_ns >= a.end_ns))
), nearest AS (
    SELECT trace_id, a_id, b_id, a_outer FROM pairs
    QUALIFY row_number() OVER (PARTITION BY trace_id, a_id ORDER BY distance, b_id) = 1
)
SELECT x.trace_id AS trace_id, x.a_id AS span_id, x.b_id AS twin_id
FROM nearest x
JOIN (SELECT trace_id AS y_trace_id, a_id AS y_a_id, b_id AS y_b_id FROM nearest) y
  ON y.y_trace_id = x.trace_id AND y.y_a_id = x.b_id AND y.y_b_id = x.a_id
WHERE x.a_outer;

-- 1c. Parents that never arrived, and runs whose root never arrived (as derive_refresh.sql step
-- 1c). otel_traces has no arrival time: a trace qualifies once its last span ended before
-- {root_cutoff_ns} (now less the grace period, set by store.clickhouse).
CREATE TABLE budgetscope_tmp_parents ENGINE = Memory SETTINGS compress = 1 AS
SELECT r.trace_id AS trace_id, r.span_id AS span_id, r.parent_span_id AS parent_span_id,
       r.start_ns AS start_ns, r.end_ns AS end_ns, r.is_run AS is_run,
       r.parent_span_id IS NOT NULL AND (p.span_id IS NULL OR r.parent_span_id = r.span_id)
           AS parent_missing
FROM budgetscope_tmp_spans_read r
LEFT JOIN (SELECT trace_id, span_id FROM budgetscope_tmp_spans_read) p
       ON p.trace_id = r.trace_id AND p.span_id = r.parent_span_id;

CREATE TABLE budgetscope_tmp_anchors ENGINE = Memory SETTINGS compress = 1 AS
WITH traces AS (
    SELECT trace_id,
           max(is_run) AS has_run,
           argMinIf(span_id, tuple(parent_span_id IS NOT NULL, start_ns, span_id),
                    is_run AND (parent_span_id IS NULL OR parent_missing)) AS top_run_any,
           countIf(is_run AND (parent_span_id IS NULL OR parent_missing)) > 0 AS has_top_run,
           argMin(span_id, tuple(NOT parent_missing, start_ns, span_id)) AS earliest_orphan,
           max(end_ns) AS last_end_ns
    FROM budgetscope_tmp_parents
    GROUP BY trace_id
)
SELECT trace_id,
       if(NOT has_run AND last_end_ns < {root_cutoff_ns:Int64}, toNullable(earliest_orphan),
          NULL) AS root_missing_run,
       coalesce(if(has_top_run, toNullable(top_run_any), NULL),
                if(NOT has_run AND last_end_ns < {root_cutoff_ns:Int64},
                   toNullable(earliest_orphan), NULL)) AS anchor
FROM traces;

-- Bounded work per trace (as derive_refresh.sql): a trace of more than 250,000 spans is measured
-- on its first 250,000 by start.
CREATE TABLE budgetscope_tmp_capped ENGINE = Memory SETTINGS compress = 1 AS
SELECT trace_id, span_id FROM budgetscope_tmp_spans_read
WHERE trace_id IN (SELECT trace_id FROM budgetscope_tmp_spans_read GROUP BY trace_id
                   HAVING count() > 250000)
QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY start_ns, span_id) > 250000;

CREATE TABLE budgetscope_tmp_spans ENGINE = Memory SETTINGS compress = 1 AS
SELECT s.* EXCEPT (is_run, step_name),
       if(s.unnamed AND s.step_kind = 'model' AND m.resolved IS NOT NULL, m.resolved,
          s.step_name) AS step_name,
       s.is_run OR coalesce(s.span_id = a.root_missing_run, false) AS is_run,
       coalesce(s.span_id = a.root_missing_run, false) AS root_missing,
       if(p.parent_missing AND NOT (a.anchor IS NOT NULL AND s.span_id = a.anchor), a.anchor,
          s.parent_span_id) AS walk_parent,
       s.step_row IS NOT NULL AND t.t_span_id IS NULL AS candidate,
       s.step_row IS NOT NULL AND t.t_span_id IS NULL AND NOT s.needs_no_step_ancestor
           AS is_step
-- (the joined tables' columns are named apart: ClickHouse would prefix the span's own
-- trace_id and span_id with `s.` in the result otherwise)
FROM budgetscope_tmp_spans_read s
JOIN (SELECT trace_id AS p_trace_id, span_id AS p_span_id, parent_missing
      FROM budgetscope_tmp_parents) p ON p.p_trace_id = s.trace_id AND p.p_span_id = s.span_id
JOIN (SELECT trace_id AS a_trace_id, root_missing_run, anchor FROM budgetscope_tmp_anchors) a
     ON a.a_trace_id = s.trace_id
LEFT JOIN (SELECT trace_id AS t_trace_id, span_id AS t_span_id
           FROM budgetscope_tmp_sibling_twins) t
       ON t.t_trace_id = s.trace_id AND t.t_span_id = s.span_id
LEFT JOIN (SELECT service_name AS m_service, span_name AS m_span_name, resolved
           FROM budgetscope_tmp_model_names) m
       ON m.m_service = coalesce(s.service_name, '') AND m.m_span_name = s.name
WHERE (s.trace_id, s.span_id) NOT IN (SELECT trace_id, span_id FROM budgetscope_tmp_capped);

-- The walk (derive_walk.sql) reads budgetscope_tmp_walk_spans and appends to budgetscope_tmp_walk.
CREATE VIEW budgetscope_tmp_walk_spans AS SELECT * FROM budgetscope_tmp_spans;
CREATE TABLE budgetscope_tmp_walk (
    trace_id String, run_span_id String, span_id String, is_step Bool,
    step_parent Nullable(String), step_ctx Nullable(String), plain_step_above Bool,
    path Array(String), own Bool, nested Bool, depth UInt32
) ENGINE = Memory SETTINGS compress = 1;
