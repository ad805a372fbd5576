-- name: derive_usage
-- The spans that carry usage or a reported cost, metered or an aggregate, and the steps they belong to (as store/derive/sql/derive_usage.sql, docs/metrics.md §11.1-§11.2).
--
-- Reads what derive_steps.sql left (budgetscope_tmp_spans, budgetscope_tmp_walk_final,
-- budgetscope_tmp_beside, budgetscope_tmp_demoted, budgetscope_tmp_sibling_twins,
-- budgetscope_tmp_tree, budgetscope_tmp_runs) and writes budgetscope_tmp_metered, one row per
-- carrier, which derive_cost.sql prices and sums once store/clickhouse/prices.py has matched
-- the models it brings to the bundled price table. With no carrier the tables are empty.
-- Last, the notes on values the spans carry that were ignored (a re-measure keeps them).

-- Each carrier with the walk's row of it: the run it belongs to (a run span is its own run's,
-- at depth 0; every other span the run whose walk owns it), its steps above (`path`, HTTP spans
-- beside their call already moved under it) and its depth. One call recorded twice: a wrapper
-- that carries is the call it wraps (`wraps`), and never metered when that call carries too.
-- An HTTP client span in a trace of its own that joined a step of another trace
-- (docs/conventions.md, budgetscope_tmp_stray_joins) is walked there, under its holder's trace
-- id (the walk's row of it names the trace it is stored in, `span_trace_id`): it belongs to
-- that step and that run, and its row takes the holder's trace id.
CREATE TABLE budgetscope_tmp_carriers ENGINE = Memory SETTINGS compress = 1 AS
WITH twins AS (
    SELECT trace_id, span_id, any(because_of) AS wraps
    FROM budgetscope_tmp_demoted WHERE reason = 'twin' GROUP BY trace_id, span_id
    UNION ALL
    SELECT trace_id, span_id, twin_id AS wraps FROM budgetscope_tmp_sibling_twins
), carriers AS (
    SELECT s.trace_id AS trace_id, s.span_id AS span_id, s.is_run AS is_run,
           s.start_ns AS start_ns, s.end_ns AS end_ns, s.model_ref AS model_ref,
           s.provider_raw AS provider_raw, s.usage_input AS usage_input,
           s.usage_cache_read AS usage_cache_read, s.usage_cache_write AS usage_cache_write,
           s.usage_output AS usage_output, s.usage_reasoning AS usage_reasoning,
           s.usage_total AS usage_total,
           s.usage_input_includes_cache AS usage_input_includes_cache,
           s.cost_reported_nano AS cost_reported_nano, t.wraps AS wraps
    FROM budgetscope_tmp_spans s
    LEFT JOIN (SELECT trace_id AS t_trace_id, span_id AS t_span_id, any(wraps) AS wraps
               FROM twins GROUP BY trace_id, span_id) t
           ON t.t_trace_id = s.trace_id AND t.t_span_id = s.span_id
    WHERE s.carries
)
SELECT w.trace_id AS trace_id, c.* EXCEPT (trace_id), w.run_span_id AS run_span_id,
       w.depth AS depth, w.path AS path,
       c.wraps IS NOT NULL AND (c.trace_id, c.wraps) IN (
           SELECT trace_id, span_id FROM budgetscope_tmp_spans WHERE carries) AS twin_of_carrier
FROM carriers c
JOIN budgetscope_tmp_walk_final w ON w.span_trace_id = c.trace_id AND w.span_id = c.span_id
-- (a joined stray, walked in another trace, is no run: budgetscope_tmp_spans still says it is)
WHERE if(c.is_run AND w.span_trace_id = w.trace_id, w.depth = 0, w.own);

-- §11.2: a carrier with a carrying descendant in its run is an aggregate (a framework's total
-- on an agent span or the root, the Vercel AI SDK's ai.generateText above its doGenerate).
-- Descendants follow the walk's tree: from each carrier up its parents (a span whose parent
-- never arrived hangs below its run span, an HTTP span beside its call below that call) to
-- its run span; every carrier met on the way is an aggregate. Only runs with two carriers or
-- more can hold one, and only their traces' spans are read (a table: the up-walk reads it at
-- each level). The up-walk stops at 250 levels (the walk's own depth cap is 200), which a
-- parent cycle would otherwise not.
CREATE TABLE budgetscope_tmp_usage_links ENGINE = Memory SETTINGS compress = 1 AS
WITH counted AS (
    SELECT DISTINCT trace_id FROM (
        SELECT trace_id, run_span_id FROM budgetscope_tmp_carriers WHERE NOT twin_of_carrier
        GROUP BY trace_id, run_span_id HAVING count() > 1)
)
SELECT s.trace_id AS trace_id, s.span_id AS span_id,
       coalesce(b.tool_span_id, s.walk_parent) AS parent
FROM budgetscope_tmp_spans s
LEFT JOIN (SELECT trace_id AS b_trace_id, span_id AS b_span_id,
                  any(tool_path[-1]) AS tool_span_id
           FROM budgetscope_tmp_beside GROUP BY trace_id, span_id) b
       ON b.b_trace_id = s.trace_id AND b.b_span_id = s.span_id
WHERE s.trace_id IN (SELECT trace_id FROM counted)
UNION ALL
-- a stray that joined a step hangs below it
SELECT holder_trace_id AS trace_id, span_id, toNullable(holder_span_id) AS parent
FROM budgetscope_tmp_stray_joins
WHERE holder_trace_id IN (SELECT trace_id FROM counted);

CREATE TABLE budgetscope_tmp_aggregates ENGINE = Memory SETTINGS compress = 1 AS
WITH RECURSIVE counted AS (
    SELECT trace_id, run_span_id FROM budgetscope_tmp_carriers WHERE NOT twin_of_carrier
    GROUP BY trace_id, run_span_id HAVING count() > 1
), up AS (
    SELECT c.trace_id AS trace_id, c.run_span_id AS run_span_id, l.parent AS reached,
           toUInt32(1) AS level
    FROM budgetscope_tmp_carriers c
    JOIN budgetscope_tmp_usage_links l ON l.trace_id = c.trace_id AND l.span_id = c.span_id
    WHERE NOT c.twin_of_carrier AND c.span_id != c.run_span_id
      AND (c.trace_id, c.run_span_id) IN (SELECT trace_id, run_span_id FROM counted)
    UNION ALL
    SELECT u.trace_id, u.run_span_id, l.parent, toUInt32(u.level + 1)
    FROM up u JOIN budgetscope_tmp_usage_links l ON l.trace_id = u.trace_id
                                                AND l.span_id = u.reached
    WHERE u.reached != u.run_span_id AND u.level < 250
)
SELECT DISTINCT c.trace_id AS trace_id, c.span_id AS span_id
FROM up u
JOIN budgetscope_tmp_carriers c ON c.trace_id = u.trace_id AND c.span_id = u.reached
                               AND c.run_span_id = u.run_span_id;

-- The carriers as docs/metrics.md §11 counts them. Tokens (§11.1): input with its cache,
-- unless the span says it left the cache out or counts less input than cache (then the cache
-- is added to it); output with its reasoning, unless it counts less output than reasoning;
-- the total alone when neither input nor output is sent. The steps a carrier is or lies under
-- are its path's steps of the run (transparent agents are none); a wrapper twin stands for the
-- call it wraps. The model and provider it is priced for (§11.3): a `provider/model` name
-- split, OpenTelemetry's provider ids mapped to the price table's.
CREATE TABLE budgetscope_tmp_metered ENGINE = Memory SETTINGS compress = 1 AS
WITH placed AS (
    SELECT c.*, if(notEmpty(wp.path), wp.path, c.path) AS step_path
    FROM budgetscope_tmp_carriers c
    LEFT JOIN (SELECT trace_id AS wp_trace_id, span_id AS wp_span_id, any(path) AS path
               FROM budgetscope_tmp_walk_final
               WHERE own AND (trace_id, span_id) IN (SELECT trace_id, wraps
                                                     FROM budgetscope_tmp_carriers
                                                     WHERE wraps IS NOT NULL)
               GROUP BY trace_id, span_id) wp
           ON wp.wp_trace_id = c.trace_id AND wp.wp_span_id = c.wraps
), above AS (
    SELECT u.trace_id AS trace_id, u.span_id AS span_id,
           arrayMap(x -> x.2, arraySort(groupArray((u.position, t.span_id)))) AS steps_above,
           argMax(t.top_step_id, u.position) AS top_step_id
    FROM (SELECT trace_id, span_id, run_span_id, step_id, position FROM placed
          ARRAY JOIN step_path AS step_id, arrayEnumerate(step_path) AS position) u
    JOIN budgetscope_tmp_tree t ON t.trace_id = u.trace_id AND t.run_span_id = u.run_span_id
                               AND t.span_id = u.step_id
    GROUP BY u.trace_id, u.span_id
), counted AS (
    SELECT p.*,
           p.usage_input IS NULL AND p.usage_output IS NULL AND p.usage_total IS NOT NULL
               AS total_only,
           coalesce(p.usage_cache_read, 0) AS r, coalesce(p.usage_cache_write, 0) AS w,
           coalesce(p.usage_reasoning, 0) AS z,
           coalesce(p.usage_input_includes_cache, true)
               AND coalesce(p.usage_input, 0) >= coalesce(p.usage_cache_read, 0)
                                                 + coalesce(p.usage_cache_write, 0)
               AS inclusive,
           if(inclusive, coalesce(p.usage_input, 0),
              coalesce(p.usage_input, 0) + r + w) AS input_all,
           if(coalesce(p.usage_output, 0) >= z, coalesce(p.usage_output, 0),
              coalesce(p.usage_output, 0) + z) AS output_all,
           /*@provider_id_of_raw*/ AS span_provider,
           /*@model_prefix*/ AS model_prefix,
           /*@model_after_prefix*/ AS model_name
    FROM placed p
)
SELECT f.run_id AS run_id, c.trace_id AS trace_id, c.span_id AS span_id,
       a.top_step_id AS top_step_id,
       if(empty(a.steps_above), CAST(NULL, 'Nullable(String)'), a.steps_above[-1])
           AS step_span_id,
       a.steps_above AS steps_above,
       NOT c.twin_of_carrier AND (c.trace_id, c.span_id) NOT IN (
           SELECT trace_id, span_id FROM budgetscope_tmp_aggregates) AS is_metered,
       toInt32(c.depth) AS depth, c.start_ns AS start_ns, c.end_ns AS end_ns,
       c.model_name AS model,
       coalesce(c.span_provider, /*@provider_id_of_prefix*/) AS provider,
       c.model_ref AS model_ref,
       if(c.total_only, NULL, toNullable(c.input_all)) AS input_tokens,
       if(c.total_only, NULL, toNullable(if(c.inclusive, coalesce(c.usage_input, 0) - c.r - c.w,
                                            coalesce(c.usage_input, 0))))
           AS fresh_input_tokens,
       if(c.total_only, NULL, toNullable(c.r)) AS cache_read_tokens,
       if(c.total_only, NULL, toNullable(c.w)) AS cache_write_tokens,
       if(c.total_only, NULL, toNullable(c.output_all)) AS output_tokens,
       if(c.total_only, NULL, toNullable(c.z)) AS reasoning_tokens,
       toInt64(if(c.total_only, assumeNotNull(c.usage_total), c.input_all + c.output_all))
           AS tokens,
       c.cost_reported_nano AS reported_nano,
       f.agent AS agent, f.start_ns AS run_start_ns
FROM counted c
JOIN budgetscope_tmp_runs f ON f.trace_id = c.trace_id AND f.span_id = c.run_span_id
LEFT JOIN above a ON a.trace_id = c.trace_id AND a.span_id = c.span_id;

-- Values that are no valid count or cost were ignored (store/rows/usage.py): said on the
-- trace, with the attributes' names (as derive_usage.sql says it on DuckDB).
CREATE TABLE budgetscope_derivation_notes_next ENGINE = MergeTree ORDER BY trace_id AS
SELECT trace_id, 'usage_values_ignored' AS note,
       concat(toString(count()), ' span(s) carry usage or cost attributes whose values are not ',
              'valid (negative, fractional, not a number or beyond 10^12) and were ignored: ',
              arrayStringConcat(arraySort(groupUniqArrayArray(usage_ignored)), ', ')) AS detail
FROM budgetscope_tmp_spans
WHERE notEmpty(usage_ignored)
GROUP BY trace_id;
