-- name: derive_usage
-- The spans that carry usage or a reported cost, as docs/metrics.md §11.1-§11.2 count them: metered or an aggregate, and the steps they belong to.
--
-- Reads what the recognition left (derive_refresh.sql to derive_steps.sql: derive_spans,
-- derive_walk, derive_tree, derive_beside, derive_demoted, derive_sibling_twins,
-- derive_run_facts) and writes the temp table derive_metered, one row per carrier, which
-- derive_cost.sql prices and sums (a change of prices reads the same rows back from
-- metered_spans, derive_budgets.sql). A turn where no span carries usage (gate `no_usage`)
-- only makes the table, empty.

-- when: no_usage
CREATE OR REPLACE TEMP TABLE derive_metered (
    run_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, top_step_id VARCHAR,
    step_span_id VARCHAR, steps_above VARCHAR[], is_metered BOOLEAN, depth INTEGER,
    start_ns BIGINT, end_ns BIGINT, model VARCHAR, provider VARCHAR, model_ref VARCHAR,
    input_tokens BIGINT, fresh_input_tokens BIGINT, cache_read_tokens BIGINT,
    cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, tokens BIGINT,
    reported_nano BIGINT, agent VARCHAR, run_start_ns BIGINT
);
-- gates: nothing below has anything to do
-- when: no_usage
SELECT false AS wrapper_carriers;

-- Values that are no valid count or cost were ignored at ingest (store/rows/usage.py): said
-- on the trace, with the attributes' names.
-- when: usage
INSERT INTO derivation_notes BY NAME
SELECT trace_id, 'usage_values_ignored' AS note,
       count(*) || ' span(s) carry usage or cost attributes whose values are not valid '
       || '(negative, fractional, not a number or beyond 10^12) and were ignored: '
       || array_to_string(list_sort(list_distinct(flatten(list(usage_ignored)))), ', ')
           AS detail
FROM derive_spans
WHERE usage_ignored IS NOT NULL
GROUP BY trace_id;

-- Each carrier with the walk's row of it: the run it belongs to (a run span is its own run's,
-- at depth 0; every other span the run whose walk owns it), its steps above (`path`: the run
-- span first, then each step it is or lies under, HTTP spans beside their call already moved
-- under it by derive_steps.sql) and its depth. One call recorded twice (§9): a wrapper that
-- carries is the call it wraps (`wraps`), and never metered when that call carries too.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_carriers AS
WITH twins AS (
    SELECT trace_id, span_id, any_value(because_of) AS wraps
    FROM derive_demoted WHERE reason = 'twin' GROUP BY ALL
    UNION ALL
    SELECT trace_id, span_id, twin_id FROM derive_sibling_twins
), carriers AS (
    SELECT s.trace_id, s.span_id, s.is_run, s.start_ns, s.end_ns, s.model_ref, s.provider_raw,
           s.usage_input, s.usage_cache_read, s.usage_cache_write, s.usage_output,
           s.usage_reasoning, s.usage_total, s.usage_input_includes_cache,
           s.cost_reported_nano, t.wraps
    FROM derive_spans s
    LEFT JOIN (SELECT DISTINCT ON (trace_id, span_id) * FROM twins) t
           ON t.trace_id = s.trace_id AND t.span_id = s.span_id
    WHERE s.carries
)
SELECT c.*, w.run_span_id, w.depth, w.path,
       c.wraps IS NOT NULL AND EXISTS (
           SELECT 1 FROM derive_spans x
           WHERE x.trace_id = c.trace_id AND x.span_id = c.wraps AND x.carries) AS twin_of_carrier
FROM carriers c
JOIN derive_walk w ON w.trace_id = c.trace_id AND w.span_id = c.span_id
                  AND CASE WHEN c.is_run THEN w.depth = 0 ELSE w.own END;

-- gates: whether a carrier is the wrapper of a call recorded twice (rare)
-- when: usage
SELECT count(*) > 0 AS wrapper_carriers FROM derive_carriers WHERE wraps IS NOT NULL;

-- Such a wrapper stands for the call it wraps: its steps above are that call's.
-- when: wrapper_carriers
UPDATE derive_carriers SET path = w.path
FROM derive_walk w
WHERE derive_carriers.wraps IS NOT NULL AND w.trace_id = derive_carriers.trace_id
  AND w.span_id = derive_carriers.wraps AND w.own;

-- §11.2: a carrier with a carrying descendant in its run is an aggregate (a framework's total
-- on an agent span or the root, the Vercel AI SDK's ai.generateText above its doGenerate).
-- Descendants follow the walk's tree: from each carrier up its parents (a span whose parent
-- never arrived hangs below its run span, an HTTP span beside its call below that call) to
-- its run span; every carrier met on the way is an aggregate. Only runs with two carriers or
-- more can hold one, and only their spans are read.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_aggregates AS
WITH RECURSIVE counted AS (
    SELECT trace_id, run_span_id FROM derive_carriers WHERE NOT twin_of_carrier
    GROUP BY ALL HAVING count(*) > 1
), links AS (
    SELECT s.trace_id, s.span_id, coalesce(b.tool_span_id, s.walk_parent) AS parent
    FROM derive_spans s
    LEFT JOIN derive_beside b ON b.trace_id = s.trace_id AND b.span_id = s.span_id
    WHERE s.trace_id IN (SELECT trace_id FROM counted)
), up(trace_id, run_span_id, reached) AS (
    -- UNION: paths that meet walk on once, and a parent cycle ends where it closes
    SELECT c.trace_id, c.run_span_id, l.parent
    FROM derive_carriers c
    SEMI JOIN counted n ON n.trace_id = c.trace_id AND n.run_span_id = c.run_span_id
    JOIN links l ON l.trace_id = c.trace_id AND l.span_id = c.span_id
    WHERE NOT c.twin_of_carrier AND c.span_id <> c.run_span_id
    UNION
    SELECT u.trace_id, u.run_span_id, l.parent
    FROM up u JOIN links l ON l.trace_id = u.trace_id AND l.span_id = u.reached
    WHERE u.reached <> u.run_span_id
)
SELECT DISTINCT c.trace_id, c.span_id
FROM up u
JOIN derive_carriers c ON c.trace_id = u.trace_id AND c.span_id = u.reached
                      AND c.run_span_id = u.run_span_id;

-- The carriers as docs/metrics.md §11 counts them. Tokens (§11.1): input with its cache,
-- unless the span says it left the cache out or counts less input than cache (then the cache
-- is added to it); output with its reasoning, unless it counts less output than reasoning;
-- the total alone when neither input nor output is sent. The steps a carrier is or lies under
-- are its path's, less the run span (unless the run is its own single step) and the agents
-- made transparent; it belongs to the top-level step of the nearest. The model and provider
-- it is priced for (§11.3): a `provider/model` name split, OpenTelemetry's provider ids
-- mapped to the price table's.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_metered AS
WITH transparent AS (
    SELECT trace_id, run_span_id, list(span_id) AS ids
    FROM derive_step_tree WHERE transparent GROUP BY ALL
), placed AS (
    SELECT c.*,
           CASE WHEN t.ids IS NULL THEN above
                ELSE list_filter(above, lambda x: NOT list_contains(t.ids, x)) END AS steps_above
    FROM (SELECT c.*,
                 CASE WHEN c.path[1] = c.run_span_id AND NOT EXISTS (
                          SELECT 1 FROM derive_tree r WHERE r.trace_id = c.trace_id
                            AND r.run_span_id = c.run_span_id AND r.span_id = c.run_span_id)
                      THEN c.path[2:] ELSE c.path END AS above
          FROM derive_carriers c) c
    LEFT JOIN transparent t ON t.trace_id = c.trace_id AND t.run_span_id = c.run_span_id
), counted AS (
    SELECT p.*,
           p.usage_input IS NULL AND p.usage_output IS NULL AND p.usage_total IS NOT NULL
               AS total_only,
           coalesce(p.usage_input, 0) AS i, coalesce(p.usage_output, 0) AS o,
           coalesce(p.usage_cache_read, 0) AS r, coalesce(p.usage_cache_write, 0) AS w,
           coalesce(p.usage_reasoning, 0) AS z,
           /*@provider_id_of_raw*/ AS span_provider,
           /*@model_prefix*/ AS model_prefix,
           /*@model_after_prefix*/ AS model_name
    FROM placed p
), counts AS (
    SELECT c.*,
           CASE WHEN c.usage_input_includes_cache IS DISTINCT FROM false AND c.i >= c.r + c.w
                THEN c.i ELSE c.i + c.r + c.w END AS input,
           CASE WHEN c.usage_input_includes_cache IS DISTINCT FROM false AND c.i >= c.r + c.w
                THEN c.i - c.r - c.w ELSE c.i END AS fresh,
           CASE WHEN c.o >= c.z THEN c.o ELSE c.o + c.z END AS output
    FROM counted c
)
SELECT f.run_id, c.trace_id, c.span_id, t.top_step_id, c.steps_above[-1] AS step_span_id,
       c.steps_above,
       NOT c.twin_of_carrier AND g.span_id IS NULL AS is_metered,
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
LEFT JOIN derive_tree t ON t.trace_id = c.trace_id AND t.run_span_id = c.run_span_id
                       AND t.span_id = c.steps_above[-1]
LEFT JOIN derive_aggregates g ON g.trace_id = c.trace_id AND g.span_id = c.span_id;

-- when: usage
DROP TABLE derive_carriers;
-- when: usage
DROP TABLE derive_aggregates;
