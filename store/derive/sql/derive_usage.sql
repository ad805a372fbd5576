-- name: derive_usage
-- The spans that carry usage or a reported cost, as docs/metrics.md §11.1-§11.2 count them: metered or an aggregate, and the steps they belong to.
--
-- Reads what the recognition left (derive_refresh.sql to derive_steps.sql: derive_spans,
-- derive_walk, derive_tree, derive_step_tree, derive_beside, derive_demoted,
-- derive_sibling_twins, derive_run_facts) and the carriers' usage columns from spans, and
-- writes the temp table derive_metered, one row per carrier, which derive_cost.sql prices and
-- sums (a change of prices reads the same rows back from metered_spans, derive_budgets.sql).
-- A turn where no span carries usage (gate `no_usage`) only makes the table, empty.
--
-- One statement: each temp table written costs ~0.1 µs a row and column (more for text), so
-- the carriers, their aggregates and their steps are found in one pass rather than kept in
-- tables of their own (the first cut's three statements cost ~10 µs a carrier).

-- when: no_usage
CREATE OR REPLACE TEMP TABLE derive_metered (
    run_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, top_step_id VARCHAR,
    step_span_id VARCHAR, steps_above VARCHAR[], is_metered BOOLEAN, depth INTEGER,
    start_ns BIGINT, end_ns BIGINT, model VARCHAR, provider VARCHAR, model_ref VARCHAR,
    input_tokens BIGINT, fresh_input_tokens BIGINT, cache_read_tokens BIGINT,
    cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, tokens BIGINT,
    reported_nano BIGINT, agent VARCHAR, run_start_ns BIGINT
);

-- Values that are no valid count or cost were ignored at ingest (store/rows/usage.py): said
-- on the trace, with the attributes' names (read from spans: derive_spans keeps only whether).
-- when: usage_ignored
INSERT INTO derivation_notes BY NAME
SELECT s.trace_id, 'usage_values_ignored' AS note,
       count(*) || ' span(s) carry usage or cost attributes whose values are not valid '
       || '(negative, fractional, not a number or beyond 10^12) and were ignored: '
       || array_to_string(list_sort(list_distinct(flatten(list(s.usage_ignored)))), ', ')
           AS detail
FROM spans s
SEMI JOIN (SELECT trace_id, span_id FROM derive_spans WHERE usage_ignored) d
       ON d.trace_id = s.trace_id AND d.span_id = s.span_id
WHERE s.received_at >= (SELECT received_floor FROM derive_floor)
  AND s.usage_ignored IS NOT NULL
GROUP BY s.trace_id;

-- The carriers as docs/metrics.md §11 counts them.
-- - Each carrier with the walk's row of it: the run it belongs to (a run span is its own run's,
--   at depth 0; every other span the run whose walk owns it), its steps above (`path`: the run
--   span first, then each step it is or lies under, HTTP spans beside their call already moved
--   under it by derive_steps.sql) and its depth. One call recorded twice (§9): a wrapper that
--   carries is the call it wraps (`wraps`: its steps above are that call's), and never metered
--   when that call carries too. An HTTP client span in a trace of its own that joined a step
--   of another trace (docs/conventions.md, derive_stray_joins) is walked there, under its
--   holder's trace id, as derive_walk keeps it: it belongs to that step and that run, and its
--   row is replaced with the holder's (`span_trace_id`: the trace it is stored in).
-- - §11.2: a carrier with a carrying descendant in its run is an aggregate (a framework's total
--   on an agent span or the root, the Vercel AI SDK's ai.generateText above its doGenerate).
--   A run span or a step is one when it is on the path of another carrier of its run (the
--   path holds every step above a span, and the run span); any other carrier (a wrapper, an
--   HTTP span, a plain span) when it is met going up the parents from one (a span whose parent
--   never arrived hangs below its run span, an HTTP span beside its call below that call): only
--   the runs that hold such a carrier are walked up, and only their spans read.
-- - Tokens (§11.1): input with its cache, unless the span says it left the cache out or counts
--   less input than cache (then the cache is added to it); output with its reasoning, unless
--   it counts less output than reasoning; the total alone when neither input nor output is
--   sent. The steps a carrier is or lies under are its path's, less the run span (unless the
--   run is its own single step) and the agents made transparent; it belongs to the top-level
--   step of the nearest. The model and provider it is priced for (§11.3): a `provider/model`
--   name split, OpenTelemetry's provider ids mapped to the price table's.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_metered AS
WITH RECURSIVE twins AS (
    SELECT trace_id, span_id, any_value(because_of) AS wraps
    FROM derive_demoted WHERE reason = 'twin' GROUP BY ALL
    UNION ALL
    SELECT trace_id, span_id, twin_id FROM derive_sibling_twins
), wrappers AS (
    -- the few wrappers, with the call each wraps: its walk's path, and whether it carries
    SELECT t.trace_id, t.span_id, t.wraps, w.path, coalesce(x.carries, false) AS call_carries
    FROM (SELECT DISTINCT ON (trace_id, span_id) * FROM twins) t
    LEFT JOIN derive_walk w ON w.trace_id = t.trace_id AND w.span_id = t.wraps AND w.own
    LEFT JOIN derive_spans x ON x.trace_id = t.trace_id AND x.span_id = t.wraps
), carriers AS MATERIALIZED (
    SELECT w.trace_id, s.span_id, s.trace_id AS span_trace_id, s.start_ns, s.end_ns,
           w.run_span_id, w.depth,
           w.is_step OR s.span_id = w.run_span_id AS on_paths,
           coalesce(t.path, w.path) AS path,
           coalesce(t.call_carries, false) AS twin_of_carrier
    FROM derive_spans s
    LEFT JOIN derive_stray_joins j ON j.trace_id = s.trace_id AND j.span_id = s.span_id
    JOIN derive_walk w ON w.trace_id = coalesce(j.holder_trace_id, s.trace_id)
                      AND w.span_id = s.span_id
                      AND CASE WHEN s.is_run THEN w.depth = 0 ELSE w.own END
    LEFT JOIN wrappers t ON t.trace_id = s.trace_id AND t.span_id = s.span_id
    WHERE s.carries
), below_carriers AS (
    -- the run spans and steps some other carrier of the run lies under (its path less itself)
    SELECT DISTINCT trace_id, run_span_id,
           unnest(CASE WHEN path[-1] = span_id THEN path[:-2] ELSE path END) AS span_id
    FROM carriers WHERE NOT twin_of_carrier
), loose_runs AS (
    -- the runs with a carrier that is neither a step nor a run span (rare)
    SELECT DISTINCT trace_id, run_span_id FROM carriers
    WHERE NOT on_paths AND NOT twin_of_carrier
), links AS (
    SELECT s.trace_id, s.span_id, coalesce(b.tool_span_id, s.walk_parent) AS parent
    FROM derive_spans s
    LEFT JOIN derive_beside b ON b.trace_id = s.trace_id AND b.span_id = s.span_id
    WHERE s.trace_id IN (SELECT trace_id FROM loose_runs)
    UNION ALL
    -- a stray that joined a step hangs below it
    SELECT holder_trace_id, span_id, holder_span_id FROM derive_stray_joins
    WHERE holder_trace_id IN (SELECT trace_id FROM loose_runs)
), up(trace_id, run_span_id, reached) AS (
    -- UNION: paths that meet walk on once, and a parent cycle ends where it closes
    SELECT c.trace_id, c.run_span_id, l.parent
    FROM carriers c
    SEMI JOIN loose_runs n ON n.trace_id = c.trace_id AND n.run_span_id = c.run_span_id
    JOIN links l ON l.trace_id = c.trace_id AND l.span_id = c.span_id
    WHERE NOT c.twin_of_carrier AND c.span_id <> c.run_span_id
    UNION
    SELECT u.trace_id, u.run_span_id, l.parent
    FROM up u JOIN links l ON l.trace_id = u.trace_id AND l.span_id = u.reached
    WHERE u.reached <> u.run_span_id
), aggregates AS (
    SELECT trace_id, run_span_id, span_id FROM below_carriers
    UNION
    SELECT trace_id, run_span_id, reached FROM up
), own_step_runs AS (
    -- runs that are their own single step (derive_steps.sql, step 4)
    SELECT trace_id, run_span_id FROM derive_tree WHERE span_id = run_span_id
), transparent AS (
    SELECT trace_id, run_span_id, list(span_id) AS ids
    FROM derive_step_tree WHERE transparent GROUP BY ALL
), placed AS (
    SELECT c.*, CASE WHEN t.ids IS NULL THEN c.above
                     ELSE list_filter(c.above, lambda x: NOT list_contains(t.ids, x)) END
                    AS steps_above
    FROM (SELECT c.*,
                 CASE WHEN c.path[1] = c.run_span_id AND o.run_span_id IS NULL
                      THEN c.path[2:] ELSE c.path END AS above,
                 NOT c.twin_of_carrier AND g.span_id IS NULL AS is_metered
          FROM carriers c
          LEFT JOIN own_step_runs o ON o.trace_id = c.trace_id AND o.run_span_id = c.run_span_id
          LEFT JOIN aggregates g ON g.trace_id = c.trace_id AND g.run_span_id = c.run_span_id
                                AND g.span_id = c.span_id) c
    LEFT JOIN transparent t ON t.trace_id = c.trace_id AND t.run_span_id = c.run_span_id
), usage AS (
    -- the carriers' usage, read from spans (the rows derive_spans read)
    SELECT trace_id, span_id, usage_input, usage_cache_read, usage_cache_write, usage_output,
           usage_reasoning, usage_total, usage_input_includes_cache, cost_reported_nano,
           /*@pricing_model*/ AS model_ref, /*@pricing_provider_raw*/ AS provider_raw
    FROM spans
    WHERE received_at >= (SELECT received_floor FROM derive_floor) AND /*@carries_usage*/
), counted AS (
    SELECT p.*, u.* EXCLUDE (trace_id, span_id),
           u.usage_input IS NULL AND u.usage_output IS NULL AND u.usage_total IS NOT NULL
               AS total_only,
           coalesce(u.usage_input, 0) AS i, coalesce(u.usage_output, 0) AS o,
           coalesce(u.usage_cache_read, 0) AS r, coalesce(u.usage_cache_write, 0) AS w,
           coalesce(u.usage_reasoning, 0) AS z
    FROM placed p
    JOIN usage u ON u.trace_id = p.span_trace_id AND u.span_id = p.span_id
), counts AS (
    SELECT c.*,
           CASE WHEN c.usage_input_includes_cache IS DISTINCT FROM false AND c.i >= c.r + c.w
                THEN c.i ELSE c.i + c.r + c.w END AS input,
           CASE WHEN c.usage_input_includes_cache IS DISTINCT FROM false AND c.i >= c.r + c.w
                THEN c.i - c.r - c.w ELSE c.i END AS fresh,
           CASE WHEN c.o >= c.z THEN c.o ELSE c.o + c.z END AS output,
           /*@provider_id_of_raw*/ AS span_provider,
           /*@model_prefix*/ AS model_prefix,
           /*@model_after_prefix*/ AS model_name
    FROM counted c
)
SELECT f.run_id, c.trace_id, c.span_id,
       -- the top-level step of the nearest step: itself when that is at the top level
       CASE WHEN len(c.steps_above) > 0 THEN coalesce(t.top_step_id, c.steps_above[-1]) END
           AS top_step_id,
       c.steps_above[-1] AS step_span_id, c.steps_above, c.is_metered,
       c.depth, c.start_ns, c.end_ns,
       c.model_name AS model, coalesce(c.span_provider, /*@provider_id_of_prefix*/) AS provider,
       c.model_ref,
       CASE WHEN NOT c.total_only THEN c.input END AS input_tokens,
       CASE WHEN NOT c.total_only THEN c.fresh END AS fresh_input_tokens,
       CASE WHEN NOT c.total_only THEN c.r END AS cache_read_tokens,
       CASE WHEN NOT c.total_only THEN c.w END AS cache_write_tokens,
       CASE WHEN NOT c.total_only THEN c.output END AS output_tokens,
       CASE WHEN NOT c.total_only THEN c.z END AS reasoning_tokens,
       CASE WHEN c.total_only THEN c.usage_total ELSE c.input + c.output END AS tokens,
       c.cost_reported_nano AS reported_nano,
       f.agent, f.start_ns AS run_start_ns
FROM counts c
JOIN derive_run_facts f ON f.trace_id = c.trace_id AND f.span_id = c.run_span_id
-- only steps below the top level: a top-level step's own top step is itself
LEFT JOIN (SELECT trace_id, run_span_id, span_id, top_step_id FROM derive_tree
           WHERE step_level > 0) t
       ON t.trace_id = c.trace_id AND t.run_span_id = c.run_span_id
      AND t.span_id = c.steps_above[-1];
