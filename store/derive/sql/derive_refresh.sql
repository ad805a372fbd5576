-- name: derive_refresh
-- Recognise the spans of every trace in the temp table touched_traces (docs/conventions.md, docs/metrics.md §3): the first of the derivation's files.
--
-- Runs in a derivation turn's transaction (store/derive/pending.py), after the spans' own
-- commit. It reads all stored spans of the touched traces (not only the last batch), so the
-- result is the same whatever order and in however many batches a trace's spans arrived, and
-- a duplicate delivery changes nothing.
-- Set-based throughout: no loop over runs. The derivation is this file, then derive_walk.sql,
-- derive_reach.sql and derive_walk.sql again (for the traces where a parent never arrived,
-- when this file left them to be found after the walk; skipped when none did),
-- derive_recognise.sql, derive_walk.sql once more (for the traces where one call left two
-- spans or runs nest too deep; skipped when none does), derive_steps.sql, derive_measure.sql
-- and derive_drop.sql, in one transaction (store/derive/statements.py, which also skips the
-- statements marked `-- when:` that have nothing to do).

-- 0. Where to start reading spans: the earliest first arrival of a touched trace, less a margin
-- for a wall clock stepped back between two writes (received_at is now() of each write).
-- A trace seen for the first time arrives now, in this transaction, and has no derived rows
-- yet, so step 8 deletes only for traces seen before (most of a stream's batches are new
-- traces, and each delete is a scan of its whole table).
-- touched_traces(trace_id, since) says since when each trace has spans not yet derived: the
-- derivation may run long after the write that stored them (see store/derive/pending.py).
CREATE OR REPLACE TEMP TABLE derive_touched AS
SELECT t.trace_id, a.first_received_at, t.since
FROM (SELECT trace_id, min(since) AS since FROM touched_traces GROUP BY trace_id) t
LEFT JOIN trace_arrivals a ON a.trace_id = t.trace_id;

INSERT INTO trace_arrivals (trace_id, first_received_at)
SELECT trace_id, since FROM derive_touched WHERE first_received_at IS NULL;

CREATE OR REPLACE TEMP TABLE derive_floor AS
SELECT coalesce(min(coalesce(first_received_at, since)), now()) - INTERVAL 1 MINUTE
           AS received_floor
FROM derive_touched;

CREATE OR REPLACE TEMP TABLE derive_seen_before AS
SELECT trace_id FROM derive_touched WHERE first_received_at IS NOT NULL;

-- 0b. Exceptions recorded as OTLP log records (docs/conventions.md): a record with exception.type
-- and a span context is an exception event of that span, for rule 4 and as rule 6's evidence. All
-- of a touched trace's records, whenever they came (a record may arrive before or after its
-- span; a late one marks its trace, store/write/sql/mark_pending_log_exceptions.sql), in time order.
-- Read through views of the traces in derive_reading: the touched traces, then those that the
-- rules across traces bring in (1a below) are read the same way. The views are made once a
-- connection and kept (derive_drop.sql leaves them): binding the spans' view cost ~7.5 ms of
-- CPU each turn, as much as deriving ~3,000 spans, and it reads only what each turn remakes.
CREATE OR REPLACE TEMP TABLE derive_reading AS SELECT trace_id FROM derive_touched;
CREATE TEMP VIEW IF NOT EXISTS derive_log_exceptions_read AS
SELECT trace_id, span_id,
       list(exception_type ORDER BY time_ns, record_key_hi, record_key_lo) AS types,
       list(json_extract_string(attributes, '$."exception.message"')
            ORDER BY time_ns, record_key_hi, record_key_lo) AS messages
FROM log_records
WHERE exception_type IS NOT NULL AND span_id IS NOT NULL
  AND trace_id IN (SELECT trace_id FROM derive_reading)
GROUP BY trace_id, span_id;
CREATE OR REPLACE TEMP TABLE derive_log_exceptions AS SELECT * FROM derive_log_exceptions_read;

-- 1. The touched traces' spans, recognised as candidate steps by the table of docs/conventions.md
-- and classed by §3 rules 1-5 (the marked fragments are filled from store/derive/conventions.py,
-- the one place those rules are written). `specific` is the class rules 1-4 give other than the
-- fallback `error`: a step without one may take a descendant's (rule 6, derive_rolled below).
-- Whether a candidate is a step is settled by the walk and derive_recognise.sql: row 12 needs
-- no step above it, row 11 no step below it, and one call recorded twice is one step.
CREATE TEMP VIEW IF NOT EXISTS derive_spans_read AS
WITH picked AS (
    SELECT s.*,
           /*@step_row*/ AS step_row,
           -- The exception types of each span (docs/metrics.md §3 rule 4), gathered in this one
           -- place: its `exception` events, then the exception log records carrying its context;
           -- then their messages, in the same order (read only where there are events or
           -- records: most spans have none).
           list_filter(list_concat(s.exception_types, coalesce(le.types, [])),
                       lambda x: trim(x) <> '') AS exception_texts,
           CASE WHEN len(s.events) > 0 OR le.messages IS NOT NULL
           THEN list_filter(list_concat(
               list_transform(list_filter(s.events, lambda e: e.name = 'exception'),
                              lambda e: json_extract_string(e.attributes,
                                                            '$."exception.message"')),
               coalesce(le.messages, [])), lambda x: coalesce(trim(x), '') <> '')
           ELSE [] END AS exception_messages
    FROM spans s
    LEFT JOIN derive_log_exceptions le ON le.trace_id = s.trace_id AND le.span_id = s.span_id
    WHERE s.received_at >= (SELECT received_floor FROM derive_floor)
      AND s.trace_id IN (SELECT trace_id FROM derive_reading)
), recognised AS (
    SELECT *,
           /*@step_kind*/ AS step_kind,
           -- the name the matched row gives from the span's attributes, if any
           -- (docs/conventions.md)
           /*@row_name*/ AS row_name,
           /*@convention*/ AS convention,
           /*@is_agent*/ AS is_agent,
           /*@needs_no_step_ancestor*/ AS needs_no_step_ancestor,
           coalesce(trim(error_type) <> '', false) OR len(exception_texts) > 0 AS has_error_type,
           -- rule 4's texts in order: error.type, the exception types, the exception
           -- messages, the status message of an ERROR span; each normalised, with its code
           -- (only where there is one: the lambdas cost ~10 µs a span, and most spans have
           -- none)
           CASE WHEN trim(error_type) <> '' OR len(exception_texts) > 0
                     OR len(exception_messages) > 0 OR status_code = 2
           THEN list_transform(list_transform(
               list_concat(CASE WHEN trim(error_type) <> '' THEN [error_type] ELSE [] END,
                           exception_texts, exception_messages,
                           CASE WHEN status_code = 2 THEN [status_message] ELSE [] END),
               lambda x: /*@normalise_x*/),
               lambda n: {'n': n, 'c': /*@code_n*/}) END AS error_texts,
           -- docs/metrics.md §11.2: whether the span carries usage or a reported cost
           /*@carries_usage*/ AS carries
    FROM picked
), classed AS (
    -- (no layer of its own for the row's name: one cost ~4 ms per 40,960 GenAI spans)
    SELECT *,
           -- rule 1b: a gateway's budget refusal in error.type, an exception type or message
           -- (error_texts less the status message an ERROR span adds last; looked at only
           -- where there are texts: the lambda cost ~0.2 µs a span of the GenAI payload)
           CASE WHEN error_texts IS NOT NULL THEN coalesce(list_bool_or(list_transform(
               error_texts[1:len(error_texts) - CASE WHEN status_code = 2 THEN 1 ELSE 0 END],
               lambda p: /*@budget_refusal*/)), false) ELSE false END AS budget_refusal,
           /*@raw_step_name*/ AS raw_step_name,
           -- docs/conventions.md: an unnamed span of rows 2-9 (named by its span name) may be an
           -- event record below a span of its kind
           /*@unnamed*/ AS unnamed
    FROM recognised
), classed_specific AS (
    SELECT *,
           coalesce(/*@outcome_class*/, CASE WHEN budget_refusal THEN 'refused' END,
                    /*@http_class*/, /*@grpc_class*/,
                    list_filter(list_transform(error_texts, lambda p: /*@text_class*/),
                                lambda c: c IS NOT NULL)[1],
                    CASE WHEN /*@tool_timeout_result*/ THEN 'client_timeout' END) AS specific
    FROM classed
)
SELECT trace_id, span_id, parent_span_id, scope_id, name, start_ns, end_ns, status_code,
       service_name, received_at,
       gen_ai_agent_name,
       budget_total_ms, budget_deadline_unix_ms, budget_reserve_ms,
       budget_run_outcome, budget_remaining_ms, budget_cap_ms, budget_allocated_ms,
       budget_side_effect, budget_effect_status, budget_idempotency_key, budget_attempt,
       budget_hedge, budget_reconcile_result, budget_cleanup_ms,
       budget_total_ms IS NOT NULL OR parent_span_id IS NULL AS is_run,
       step_row,
       needs_no_step_ancestor, is_agent,
       -- docs/conventions.md: a callable's `.__call__` dropped
       step_kind, /*@step_name*/ AS step_name, convention,
       specific,
       -- rules 4 (fallback) and 5
       coalesce(specific, CASE WHEN has_error_type OR status_code = 2 THEN 'error' ELSE 'ok' END)
           AS own_class,
       -- rule 6: what counts as outcome evidence on a descendant; an error.type or exception
       -- from which rule 4 gives only the fallback `error` (a framework's wrapper exception,
       -- re-raised around the client's timeout or 503) is passed over
       budget_outcome IS NOT NULL OR http_response_status_code IS NOT NULL
           OR grpc_status_code IS NOT NULL
           OR ((has_error_type OR len(exception_messages) > 0) AND specific IS NOT NULL)
           AS has_evidence,
       unnamed,
       -- docs/conventions.md, "A preparation span is not a call": a model span's own sign of a call
       -- (NULL for other spans), read by derive_recognise.sql
       /*@model_sign*/ AS model_sign,
       -- docs/conventions.md, "HTTP client spans in a trace of their own": a root HTTP client span
       -- of row 12 without a budget, which a trace of one span may be
       parent_span_id IS NULL AND budget_total_ms IS NULL AND /*@stray_call*/ AS stray_root,
       list_transform(links, lambda l: {'trace_id': l.trace_id, 'span_id': l.span_id})
           AS link_targets,
       -- as the walk reads them, amended below for the few spans concerned (updating those
       -- rows costs less than writing every span's row a second time): `walk_parent` is the
       -- parent, or the run's span for a span whose parent is missing; `candidate`: a row
       -- matched and no twin sibling wraps it; `is_step`: a step whatever its ancestors (rows
       -- 1-11; row 12 also needs no step above it)
       parent_span_id AS walk_parent,
       false AS root_missing,
       step_row IS NOT NULL AS candidate,
       step_row IS NOT NULL AND NOT needs_no_step_ancestor AS is_step,
       NULL::VARCHAR AS sibling_twin_of,
       -- docs/metrics.md §11: whether the span carries usage or cost (derive_usage.sql reads
       -- the carriers' usage from spans: a column here is written for every span, ~0.1 µs a
       -- span each, most of them empty), whether a value of it was ignored, the budgets a run
       -- states and which budget a refusal names
       carries, usage_ignored IS NOT NULL AS usage_ignored, budget_refusal, budget_refused_by,
       budget_run_exhausted_by, budget_total_tokens, budget_total_usd_nano
FROM classed_specific;
CREATE OR REPLACE TEMP TABLE derive_spans AS SELECT * FROM derive_spans_read;

-- 1a. Rules across traces (docs/conventions.md, "HTTP client spans in a trace of their own"): a
-- trace that is one root HTTP client span (a stray) joins the one model or tool step of another
-- trace of its service that holds its interval. Whether it does changes with the traces on both
-- sides, so the turn derives them together, in one transaction: never two answers for one call (the
-- stray a run and part of a step), never none. A trace's hull, per service (the interval its model
-- and tool spans cover, call_hulls in store/file/schema/recognition.sql), holds every step that may
-- hold a stray. With the touched traces come (1) the strays stored inside a touched trace's hull,
-- and those whose own trace is touched (it may have grown past one span); (2) the traces whose
-- stored hull holds one of those strays or of the strays read, and the traces those strays joined;
-- (3) the strays joined to the traces of (2), whose walk is made again. Every trace that may hold a
-- stray of (1) or a stray read is then in the turn, and derive_steps.sql decides on the turn's
-- steps alone; a stray of (3) lies in no touched trace's hull, so the steps around it are those
-- it was decided on, unchanged.
-- Looked at only where a stray is read or stored (most files have none), and then only around
-- the touched traces: a turn with no stray inside its hulls costs one lookup by service and time.
-- gates: whether any stray is read (a root HTTP client span: one-span traces are told below) or
-- stored; whether a touched trace has stored rows to replace (set again below, 1c)
SELECT coalesce((SELECT bool_or(stray_root) FROM derive_spans), false)
           OR EXISTS (SELECT 1 FROM stray_calls) AS strays_near,
       false AS strays, false AS closure, false AS strays_seen_before, false AS stray_joins,
       (SELECT count(*) FROM derive_seen_before) > 0 AS seen_before;

-- The touched traces' hulls.
-- when: strays_near
CREATE OR REPLACE TEMP TABLE derive_hulls AS
SELECT trace_id, coalesce(service_name, '') AS service_name, min(start_ns) AS start_ns,
       max(end_ns) AS end_ns
FROM derive_spans WHERE step_kind IN (/*@holder_kinds*/)
GROUP BY ALL;

-- (1) The strays whose answer this turn may change: those read, those stored inside a touched
-- trace's hull (by service and 2^34 ns bucket, then containment), and those stored whose trace
-- is touched (looked up by their own service and bucket: the zone maps of `bucket` skip the
-- rest of stray_calls). `holder_trace_id`: the trace it joined, if any.
-- when: strays_near
CREATE OR REPLACE TEMP TABLE derive_affected AS
WITH hull_buckets AS (
    SELECT service_name, start_ns, end_ns,
           unnest(range(start_ns // 17179869184, end_ns // 17179869184 + 1)) AS bucket
    FROM derive_hulls WHERE end_ns // 17179869184 - start_ns // 17179869184 < 4096
), long_hulls AS (
    SELECT service_name, start_ns, end_ns FROM derive_hulls
    WHERE end_ns // 17179869184 - start_ns // 17179869184 >= 4096
), stray_roots AS (
    SELECT trace_id, coalesce(service_name, '') AS service_name, start_ns, end_ns
    FROM derive_spans WHERE stray_root
)
SELECT c.trace_id, c.service_name, c.start_ns, c.end_ns, c.holder_trace_id
FROM stray_calls c
JOIN hull_buckets h ON h.service_name = c.service_name AND h.bucket = c.bucket
WHERE c.start_ns >= h.start_ns AND c.end_ns <= h.end_ns
UNION
SELECT c.trace_id, c.service_name, c.start_ns, c.end_ns, c.holder_trace_id
FROM stray_calls c
JOIN long_hulls h ON h.service_name = c.service_name
WHERE c.start_ns >= h.start_ns AND c.end_ns <= h.end_ns
UNION
SELECT c.trace_id, c.service_name, c.start_ns, c.end_ns, c.holder_trace_id
FROM stray_calls c
JOIN stray_roots r ON r.trace_id = c.trace_id AND r.service_name = c.service_name
                  AND c.bucket = r.start_ns // 17179869184
UNION
SELECT r.trace_id, any_value(r.service_name), any_value(r.start_ns), any_value(r.end_ns), NULL
FROM stray_roots r JOIN derive_spans s USING (trace_id)
GROUP BY r.trace_id HAVING count(*) = 1;

-- gates: whether a stray's answer may change this turn
-- when: strays_near
SELECT count(*) > 0 AS strays FROM derive_affected;

-- (2) and (3): the traces to derive with the touched ones.
-- when: strays
CREATE OR REPLACE TEMP TABLE derive_closure AS
WITH holders AS (
    SELECT k.trace_id
    FROM derive_affected a
    JOIN call_hulls k ON k.service_name = a.service_name
                     AND k.bucket = a.start_ns // 17179869184
    WHERE k.start_ns <= a.start_ns AND k.end_ns >= a.end_ns AND k.trace_id <> a.trace_id
    UNION
    SELECT k.trace_id
    FROM derive_affected a
    JOIN call_hulls k ON k.service_name = a.service_name AND k.bucket IS NULL
    WHERE k.start_ns <= a.start_ns AND k.end_ns >= a.end_ns AND k.trace_id <> a.trace_id
    UNION
    SELECT holder_trace_id FROM derive_affected WHERE holder_trace_id IS NOT NULL
), holder_hulls AS (
    -- a stray joined to a trace lies inside that trace's hull: looked up by its buckets
    SELECT k.* FROM call_hulls k SEMI JOIN holders h USING (trace_id)
)
SELECT trace_id FROM derive_affected
UNION SELECT trace_id FROM holders
UNION SELECT c.trace_id FROM stray_calls c
      JOIN holder_hulls k ON k.service_name = c.service_name AND k.bucket = c.bucket
                         AND k.trace_id = c.holder_trace_id
UNION SELECT c.trace_id FROM stray_calls c
      JOIN holder_hulls k ON k.service_name = c.service_name AND k.bucket IS NULL
                         AND k.trace_id = c.holder_trace_id
EXCEPT SELECT trace_id FROM derive_touched;

-- gates: whether the rules across traces bring in traces to derive with the touched ones
-- when: strays
SELECT (SELECT count(*) FROM derive_closure) > 0 AS closure,
       (SELECT count(*) FROM derive_closure) > 0
           OR (SELECT count(*) FROM derive_seen_before) > 0 AS seen_before,
       (SELECT count(*) FROM derive_closure) > 0
           OR (SELECT count(*) FROM derive_seen_before) > 0 AS strays_seen_before;

-- They are read as the touched traces are (all derived before: each has its first arrival).
-- when: closure
INSERT INTO derive_touched
SELECT c.trace_id, a.first_received_at, a.first_received_at
FROM derive_closure c JOIN trace_arrivals a ON a.trace_id = c.trace_id;
-- when: closure
INSERT INTO derive_seen_before
SELECT trace_id FROM derive_closure WHERE trace_id IN (SELECT trace_id FROM trace_arrivals);
-- when: closure
CREATE OR REPLACE TEMP TABLE derive_floor AS
SELECT least((SELECT received_floor FROM derive_floor),
             coalesce(min(a.first_received_at) - INTERVAL 1 MINUTE,
                      (SELECT received_floor FROM derive_floor))) AS received_floor
FROM derive_closure c JOIN trace_arrivals a ON a.trace_id = c.trace_id;
-- when: closure
CREATE OR REPLACE TEMP TABLE derive_reading AS SELECT trace_id FROM derive_closure;
-- when: closure
INSERT INTO derive_log_exceptions SELECT * FROM derive_log_exceptions_read;
-- when: closure
INSERT INTO derive_spans SELECT * FROM derive_spans_read;

-- Every trace read replaces its hulls in call_hulls (for the strays to come), one row per 2^34 ns
-- bucket they touch: 0.22 rows a span of bench/bench_conventions_ingest.py's receivers' payload,
-- where a row per model or tool step and 2^27 ns bucket cost 12, and over a quarter of the
-- derivation's CPU.
-- when: seen_before
DELETE FROM call_hulls WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
INSERT INTO call_hulls BY NAME
WITH hulls AS (
    SELECT trace_id, coalesce(service_name, '') AS service_name, min(start_ns) AS start_ns,
           max(end_ns) AS end_ns
    FROM derive_spans WHERE step_kind IN (/*@holder_kinds*/)
    GROUP BY ALL
)
SELECT service_name, unnest(range(start_ns // 17179869184, end_ns // 17179869184 + 1)) AS bucket,
       start_ns, end_ns, trace_id
FROM hulls WHERE end_ns // 17179869184 - start_ns // 17179869184 < 4096
UNION ALL
SELECT service_name, NULL AS bucket, start_ns, end_ns, trace_id
FROM hulls WHERE end_ns // 17179869184 - start_ns // 17179869184 >= 4096;

-- 1c. Parents that never arrived, and runs whose root never arrived (docs/conventions.md, "A trace
-- without its root"). A span whose parent is not stored (or is itself) counts as a child of its
-- trace's run span: the earliest-starting run among those with no parent or a missing one
-- (`anchor`). A trace with no run at all is measured once none of its spans has arrived for the
-- grace period (the derivation's caller sets the variable budgetscope_root_cutoff: spans
-- received before it are old enough; unset, no trace qualifies), or when it was already
-- measured so: it is a run rooted at its earliest-starting span among those whose parent is
-- missing (in a trace that is all cycles, its earliest span).
--
-- Most turns have no orphan and no trace without a run: the anchors are NULL then, and only
-- the trace facts below are computed (the anchors' two arg_min cost ~3 ms of 5.7 per 40,960
-- GenAI spans). `two_scopes`: the trace has candidates of one parent from two instrumentation
-- scopes, without which 1b below has nothing to pair (it cost ~5 ms per 40,960 spans with none).
-- `with_parent`: the spans the walk must reach below a run when no parent is missing
-- (derive_reach.sql); `row_11`: derive_recognise.sql's second search has candidates (a scan of
-- its own cost ~0.9 ms per 40,960 GenAI spans, ~0.5 here).
CREATE OR REPLACE TEMP TABLE derive_anchors AS
SELECT trace_id,
       count(*) AS spans,
       bool_or(is_run) AS has_run,
       max(received_at) AS last_received_at,
       NULL::VARCHAR AS root_missing_run,
       NULL::VARCHAR AS anchor,
       min(scope_id) FILTER (WHERE step_row IS NOT NULL AND step_row <> '1'
                                 AND parent_span_id IS NOT NULL)
           <> max(scope_id) FILTER (WHERE step_row IS NOT NULL AND step_row <> '1'
                                        AND parent_span_id IS NOT NULL) AS two_scopes,
       count(parent_span_id) AS with_parent,
       bool_or(step_row = '11') AS row_11,
       -- model spans of rows 2-9 (their names are kept across traces, 1d), and unnamed spans
       -- (event records, derive_recognise.sql)
       bool_or(step_kind = 'model' AND step_row IN (/*@named_rows*/)) AS model_spans,
       bool_or(unnamed) AS unnamed,
       bool_or(unnamed AND step_kind = 'model') AS unnamed_models,
       -- model spans with no sign of a call of their own (preparations, derive_recognise.sql)
       bool_or(NOT model_sign) AS quiet_models,
       bool_or(carries) AS usage,
       bool_or(usage_ignored) AS usage_ignored
FROM derive_spans
GROUP BY trace_id;

-- gates: which of the statements below have anything to do (store/derive/statements.py).
-- Missing parents are looked for here only where a trace has no run (its anchor needs them) or
-- is capped (they must be found before its spans past the cap go); otherwise after the walk,
-- and only when it did not reach every span with a parent (derive_reach.sql): the anti join
-- below cost ~7 ms per 40,960 GenAI spans, nearly always to find nothing; that check ~1 ms.
-- `seen_before`: some touched trace has derived rows to replace (most of a stream's turns have
-- none, and each of the five deletes below and in derive_steps.sql and derive_measure.sql cost
-- ~0.6 ms per turn all the same). One scan of the trace facts (five subqueries cost ~0.3 ms
-- more).
SELECT coalesce(bool_or(two_scopes), false) AS scopes,
       coalesce(bool_or(spans > 250000), false) AS capped,
       coalesce(bool_or(spans > 250000) OR NOT bool_and(has_run), false) AS orphans_first,
       NOT coalesce(bool_or(spans > 250000) OR NOT bool_and(has_run), false) AS orphans_later,
       coalesce(bool_or(row_11), false) AS row_11,
       coalesce(bool_or(model_spans), false) AS model_names,
       coalesce(bool_or(model_spans), false) AND (SELECT count(*) FROM derive_seen_before) > 0
           AS model_names_seen_before,
       -- a span name of the turn's model spans with unnamed spans, in the turn or stored (row
       -- groups of model_span_names without a NULL step_name are skipped by their statistics;
       -- joined on that side, nearly always empty, the turn's spans are then not read)
       coalesce(bool_or(unnamed_models), false) OR EXISTS (
           SELECT 1
           FROM (SELECT coalesce(service_name, '') AS service_name, name AS span_name
                 FROM derive_spans
                 WHERE step_kind = 'model' AND step_row IN (/*@named_rows*/)) d
           SEMI JOIN (SELECT service_name, span_name FROM model_span_names
                      WHERE step_name IS NULL) m USING (service_name, span_name))
           AS names_to_resolve,
       coalesce(bool_or(unnamed), false) AS unnamed,
       coalesce(bool_or(quiet_models), false) AS quiet_models,
       (SELECT count(*) FROM derive_seen_before) > 0 AS seen_before,
       -- docs/metrics.md §11: some span carries usage or cost; some value was ignored
       coalesce(bool_or(usage), false) AS usage,
       NOT coalesce(bool_or(usage), false) AS no_usage,
       coalesce(bool_or(usage_ignored), false) AS usage_ignored
FROM derive_anchors;

-- 1d. docs/conventions.md, "A model step without a model name": an unnamed model span (some
-- instrumentations read the model name from the response, so a call that failed has none) takes
-- the one name that the named model spans of its service with its span name carry, among every
-- stored trace's (model_span_names); none, or two or more: its span name. When the touched
-- traces change that answer for a span name, the other traces with unnamed spans of it are
-- marked to be derived again (the next turn). Only span names with unnamed spans somewhere are
-- resolved (gate `names_to_resolve`, above): in a turn whose span names have none, in the turn
-- or stored (most files), the touched traces' rows are replaced and nothing more (the
-- resolution's seven statements cost ~16 ms per 40,960 spans of the receivers' payload,
-- bench/bench_derivation_statements.py).
-- when: names_to_resolve
CREATE OR REPLACE TEMP TABLE derive_name_pairs AS
WITH turn AS (
    SELECT DISTINCT coalesce(service_name, '') AS service_name, name AS span_name, unnamed
    FROM derive_spans WHERE step_kind = 'model' AND step_row IN (/*@named_rows*/)
), touched AS (
    SELECT service_name, span_name FROM turn
    UNION
    SELECT service_name, span_name FROM model_span_names SEMI JOIN derive_touched USING (trace_id)
), unnamed AS (
    SELECT service_name, span_name FROM turn WHERE unnamed
    UNION
    SELECT service_name, span_name FROM model_span_names m
    SEMI JOIN touched t USING (service_name, span_name)
    WHERE m.step_name IS NULL
)
SELECT t.service_name, t.span_name, NULL::VARCHAR AS before, NULL::VARCHAR AS after
FROM touched t SEMI JOIN unnamed u USING (service_name, span_name);

-- when: names_to_resolve
UPDATE derive_name_pairs SET before = r.name
FROM (SELECT service_name, span_name,
             CASE WHEN count(DISTINCT step_name) = 1 THEN min(step_name) END AS name
      FROM model_span_names SEMI JOIN derive_name_pairs USING (service_name, span_name)
      GROUP BY ALL) r
WHERE r.service_name = derive_name_pairs.service_name AND r.span_name = derive_name_pairs.span_name;

-- when: model_names_seen_before
DELETE FROM model_span_names WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
-- when: model_names
INSERT INTO model_span_names BY NAME
SELECT DISTINCT coalesce(service_name, '') AS service_name, name AS span_name, trace_id,
       CASE WHEN NOT unnamed THEN step_name END AS step_name
FROM derive_spans WHERE step_kind = 'model' AND step_row IN (/*@named_rows*/);

-- when: names_to_resolve
UPDATE derive_name_pairs SET after = r.name
FROM (SELECT service_name, span_name,
             CASE WHEN count(DISTINCT step_name) = 1 THEN min(step_name) END AS name
      FROM model_span_names SEMI JOIN derive_name_pairs USING (service_name, span_name)
      GROUP BY ALL) r
WHERE r.service_name = derive_name_pairs.service_name AND r.span_name = derive_name_pairs.span_name;

-- when: names_to_resolve
INSERT INTO pending_derivations
SELECT DISTINCT m.trace_id, now()
FROM model_span_names m
JOIN derive_name_pairs p USING (service_name, span_name)
WHERE m.step_name IS NULL AND p.before IS DISTINCT FROM p.after
  AND m.trace_id NOT IN (SELECT trace_id FROM derive_touched);

-- when: names_to_resolve
UPDATE derive_spans SET step_name = p.after
FROM derive_name_pairs p
WHERE derive_spans.unnamed AND derive_spans.step_kind = 'model' AND p.after IS NOT NULL
  AND p.service_name = coalesce(derive_spans.service_name, '')
  AND p.span_name = derive_spans.name;

-- What the derivation has to say about a trace (a bound it met) is said again each time.
-- when: seen_before
DELETE FROM derivation_notes WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);

-- The spans whose parent is not stored, looked for here or after the walk (derive_reach.sql):
-- one definition, read by whichever looks.
CREATE OR REPLACE TEMP VIEW derive_missing_parents AS
SELECT r.trace_id, r.span_id, r.start_ns, r.is_run
FROM derive_spans r
-- a self-parented span finds no other span as its parent (an anti join: the NOT EXISTS it
-- replaces, ORed with the self-parent test, ran as a mark join at 1.5x the CPU)
ANTI JOIN derive_spans p
       ON p.trace_id = r.trace_id AND p.span_id = r.parent_span_id AND p.span_id <> r.span_id
WHERE r.parent_span_id IS NOT NULL;

CREATE OR REPLACE TEMP TABLE derive_orphans (
    trace_id VARCHAR, span_id VARCHAR, start_ns BIGINT, is_run BOOLEAN
);
-- when: orphans_first
INSERT INTO derive_orphans SELECT * FROM derive_missing_parents;

-- The anchors, where a trace may need one before the walk. In a turn with a capped trace but
-- no orphan and a run in every trace they equal the ones above: the statements reading them
-- below find nothing to do either way.
-- when: orphans_first
CREATE OR REPLACE TEMP TABLE derive_anchors AS
WITH traces AS (
    SELECT trace_id,
           count(*) AS spans,
           bool_or(is_run) AS has_run,
           arg_min(span_id, (start_ns, span_id)) FILTER (WHERE is_run AND parent_span_id IS NULL)
               AS root_run,
           arg_min(span_id, (start_ns, span_id)) AS earliest_span,
           max(received_at) AS last_received_at
    FROM derive_spans
    GROUP BY trace_id
), orphaned AS (
    SELECT trace_id, arg_min(span_id, (start_ns, span_id)) AS earliest_orphan,
           arg_min(span_id, (start_ns, span_id)) FILTER (WHERE is_run) AS orphan_run
    FROM derive_orphans
    GROUP BY trace_id
), measured AS (
    SELECT t.*, o.earliest_orphan, o.orphan_run,
           NOT t.has_run AND (t.last_received_at < getvariable('budgetscope_root_cutoff')
                              OR m.trace_id IS NOT NULL) AS root_overdue
    FROM traces t
    LEFT JOIN orphaned o ON o.trace_id = t.trace_id
    LEFT JOIN (SELECT DISTINCT trace_id FROM runs
               WHERE root_missing AND trace_id IN (SELECT trace_id FROM derive_seen_before)) m
           ON m.trace_id = t.trace_id
)
SELECT trace_id, spans, has_run, last_received_at,
       CASE WHEN root_overdue THEN coalesce(earliest_orphan, earliest_span) END
           AS root_missing_run,
       coalesce(root_run, orphan_run,
                CASE WHEN root_overdue THEN coalesce(earliest_orphan, earliest_span) END)
           AS anchor
FROM measured;

-- 1b. One call, two sibling spans (docs/conventions.md): candidates with one parent and one step
-- key whose intervals nest, recorded by two instrumentation scopes (an SDK's own span beside a
-- library's). Only the inner one is a step (of equal intervals, the larger span id); the outer one
-- is a wrapper, whose evidence still rolls up. Siblings from one scope are parallel calls. Spans
-- pair one to one, each with the other scope's span nearest to it (starts and ends apart, summed),
-- and only when each is the other's nearest: two parallel calls, the second inside the first,
-- pair as the two calls they are, not the first call's outer span with the second's inner one.
-- A budget step (row 1) is an agent's own record and never merged. Only groups with two scopes
-- are paired, so the self-join sees almost nothing in a trace without twins.
CREATE OR REPLACE TEMP TABLE derive_sibling_twins (
    trace_id VARCHAR, span_id VARCHAR, twin_id VARCHAR
);
-- when: scopes
INSERT INTO derive_sibling_twins
WITH two_scopes AS (
    SELECT trace_id
    FROM derive_spans
    WHERE step_row IS NOT NULL AND step_row <> '1' AND parent_span_id IS NOT NULL
    GROUP BY trace_id
    HAVING min(scope_id) <> max(scope_id)
), grouped AS (
    SELECT trace_id, parent_span_id, step_kind, step_name
    FROM derive_spans
    SEMI JOIN two_scopes USING (trace_id)
    WHERE step_row IS NOT NULL AND step_row <> '1' AND parent_span_id IS NOT NULL
    GROUP BY ALL
    HAVING min(scope_id) <> max(scope_id)
), candidates AS (
    SELECT s.trace_id, s.parent_span_id, s.span_id, s.scope_id, s.step_kind, s.step_name,
           s.start_ns, s.end_ns
    FROM derive_spans s
    SEMI JOIN grouped g ON g.trace_id = s.trace_id AND g.parent_span_id = s.parent_span_id
                       AND g.step_kind = s.step_kind AND g.step_name = s.step_name
    WHERE s.step_row IS NOT NULL AND s.step_row <> '1'
), pairs AS (
    SELECT a.trace_id, a.span_id AS a_id, b.span_id AS b_id,
           abs(a.start_ns - b.start_ns) + abs(a.end_ns - b.end_ns) AS distance,
           a.start_ns <= b.start_ns AND a.end_ns >= b.end_ns
               AND (a.start_ns < b.start_ns OR a.end_ns > b.end_ns OR a.span_id < b.span_id)
               AS a_outer
    FROM candidates a
    JOIN candidates b ON b.trace_id = a.trace_id AND b.parent_span_id = a.parent_span_id
                     AND b.step_kind = a.step_kind AND b.step_name = a.step_name
                     AND b.scope_id <> a.scope_id
    WHERE (a.start_ns <= b.start_ns AND a.end_ns >= b.end_ns)
       OR (b.start_ns <= a.start_ns AND b.end_ns >= a.end_ns)
), nearest AS (
    SELECT * FROM pairs
    QUALIFY row_number() OVER (PARTITION BY trace_id, a_id ORDER BY distance, b_id) = 1
)
SELECT x.trace_id, x.a_id AS span_id, x.b_id AS twin_id
FROM nearest x
JOIN nearest y ON y.trace_id = x.trace_id AND y.a_id = x.b_id AND y.b_id = x.a_id
WHERE x.a_outer;

-- gates: the amendments below
SELECT (SELECT count(*) FROM derive_orphans) > 0 AS orphans,
       (SELECT count(*) FROM derive_sibling_twins) > 0 AS twins,
       coalesce((SELECT bool_or(root_missing_run IS NOT NULL) FROM derive_anchors), false)
           AS rootless;

-- Work per trace is bounded (docs/design.md): a trace of more than 250,000 spans is measured
-- on its first 250,000 by start, and the derivation says so on the trace. Only such traces are
-- ranked, so the others pay nothing for it (nor for this statement: ~1 ms per 40,960 spans).
-- when: capped
CREATE OR REPLACE TEMP TABLE derive_capped AS
SELECT trace_id, span_id FROM derive_spans
WHERE trace_id IN (SELECT trace_id FROM derive_anchors WHERE spans > 250000)
QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY start_ns, span_id) > 250000;

-- when: capped
INSERT INTO derivation_notes BY NAME
SELECT trace_id, 'spans_capped' AS note,
       'the trace has ' || spans || ' spans: its runs are measured on the first 250000 by start'
           AS detail
FROM derive_anchors WHERE spans > 250000;

-- When each trace was derived and how large it was: a large trace marked again soon is
-- derived again only after a pause that grows with its size
-- (store/derive/sql/pending/take_pending_derivations.sql).
UPDATE trace_arrivals SET spans = a.spans, derived_at = now()
FROM derive_anchors a WHERE a.trace_id = trace_arrivals.trace_id;

-- Traces that still wait for their root, and since when nothing of them arrived: serve's
-- derivation thread marks them again once the grace period has passed.
DELETE FROM traces_awaiting_root WHERE trace_id IN (SELECT trace_id FROM derive_touched);
INSERT INTO traces_awaiting_root BY NAME
SELECT trace_id, last_received_at FROM derive_anchors WHERE NOT has_run AND anchor IS NULL;

-- The spans as the walk reads them: the run span of a trace whose root never arrived, each span
-- whose parent is missing hung below its trace's run span, sibling twins' outer spans no
-- candidates, a capped trace's spans past the cap gone.
-- when: rootless
UPDATE derive_spans SET is_run = true, root_missing = true
FROM derive_anchors a
WHERE a.trace_id = derive_spans.trace_id AND a.root_missing_run = derive_spans.span_id;

-- when: orphans
UPDATE derive_spans SET walk_parent = a.anchor
FROM derive_orphans o JOIN derive_anchors a ON a.trace_id = o.trace_id
WHERE o.trace_id = derive_spans.trace_id AND o.span_id = derive_spans.span_id
  AND o.span_id IS DISTINCT FROM a.anchor;

-- when: twins
UPDATE derive_spans SET candidate = false, is_step = false, sibling_twin_of = t.twin_id
FROM derive_sibling_twins t
WHERE t.trace_id = derive_spans.trace_id AND t.span_id = derive_spans.span_id;

-- when: capped
DELETE FROM derive_spans
WHERE (trace_id, span_id) IN (SELECT trace_id, span_id FROM derive_capped);

-- The walk (derive_walk.sql) reads derive_walk_spans and appends to derive_walk.
CREATE OR REPLACE TEMP VIEW derive_walk_spans AS SELECT * FROM derive_spans;
CREATE OR REPLACE TEMP TABLE derive_walk (
    trace_id VARCHAR, run_span_id VARCHAR, span_id VARCHAR, is_step BOOLEAN,
    step_parent VARCHAR, step_ctx VARCHAR, plain_step_above BOOLEAN, path VARCHAR[], own BOOLEAN, nested BOOLEAN, depth INTEGER,
    start_ns BIGINT, end_ns BIGINT, is_agent BOOLEAN, step_row VARCHAR, step_kind VARCHAR,
    step_name VARCHAR, needs_no_step_ancestor BOOLEAN, specific VARCHAR, has_evidence BOOLEAN
);
