-- name: derive_cost
-- Tokens and dollars of the runs and steps: cost of each metered span, sums, budgets, exhaustion, culprit and crosser (as store/derive/sql/derive_cost.sql, docs/metrics.md §11.3-§11.7).
--
-- Reads budgetscope_tmp_metered (derive_usage.sql, or a re-measure's derive_remeasure.sql),
-- budgetscope_tmp_runs and budgetscope_tmp_steps (derive_budgeted.sql), the prices
-- (budgetscope_price_overrides, and the bundled rows store/clickhouse/prices.py keeps:
-- budgetscope_price_matches, budgetscope_bundled_conditions, budgetscope_bundled_prices) and
-- the declared budgets. Leaves
-- budgetscope_tmp_cost_runs (run_id) and budgetscope_tmp_cost_steps (trace_id, span_id), which
-- derive_measure.sql stores with the runs and steps, and budgetscope_metered_spans_next,
-- which it exchanges with the live table.
-- Money is integer nano-dollars: a priced span's cost is Σ count × rate (pico-dollars per
-- million tokens) / 10^9 in Int128, rounded half to even once; sums of costs saturate at
-- Int64's largest (9.2 billion dollars) rather than fail a build.

-- B$ and Btok (§11.5): the run's own budget.total_usd / budget.total_tokens, else its agent's
-- declaration of that dimension, else the default's; each dimension on its own (§10).
CREATE TABLE budgetscope_tmp_run_budgets ENGINE = Memory SETTINGS compress = 1 AS
SELECT r.run_id AS run_id, r.trace_id AS trace_id,
       coalesce(r.budget_total_usd_nano, a.usd_nano, dflt.usd_nano) AS usd_budget_nano,
       multiIf(r.budget_total_usd_nano IS NOT NULL, 'span',
               coalesce(a.usd_nano, dflt.usd_nano) IS NOT NULL, 'declared', NULL)
           AS usd_budget_source,
       coalesce(r.budget_total_tokens, a.tokens, dflt.tokens) AS token_budget,
       multiIf(r.budget_total_tokens IS NOT NULL, 'span',
               coalesce(a.tokens, dflt.tokens) IS NOT NULL, 'declared', NULL)
           AS token_budget_source
FROM budgetscope_tmp_runs r
LEFT JOIN (SELECT agent, usd_nano, tokens FROM budgetscope_declared_budgets
           WHERE scope = 'agent') a ON a.agent = r.agent
LEFT JOIN (SELECT usd_nano, tokens FROM budgetscope_declared_budgets
           WHERE scope = 'default' LIMIT 1) dflt ON true;

-- The cost of each metered span (§11.3): its reported cost (a 0 on a span with tokens is a
-- stream that reported none: not taken); else the `prices set` entry that matches its model
-- (exact before prefix, the longer prefix first; a provider before any; the latest --from at
-- or before the span's start); else the bundled price matched to its model and provider
-- (store/prices/bundled.py), the conditional price in force at its start and the tier of its
-- own input; else unknown. A missing cache rate charges the input rate, a missing reasoning
-- rate the output rate. An aggregate is never priced: it keeps its reported cost.
CREATE TABLE budgetscope_tmp_price_needs ENGINE = Memory SETTINGS compress = 1 AS
SELECT trace_id, span_id, lowerUTF8(model) AS model_key, provider, model_ref, start_ns,
       input_tokens
FROM budgetscope_tmp_metered
WHERE is_metered AND NOT (reported_nano IS NOT NULL AND NOT (reported_nano = 0 AND tokens > 0))
  AND input_tokens IS NOT NULL;

-- (the overrides are few: each span is compared with each)
CREATE TABLE budgetscope_tmp_price_override ENGINE = Memory SETTINGS compress = 1 AS
SELECT trace_id, span_id, rates.1 AS input_rate, rates.2 AS cache_read_rate,
       rates.3 AS cache_write_rate, rates.4 AS output_rate, rates.5 AS ref
FROM (
SELECT n.trace_id AS trace_id, n.span_id AS span_id,
       argMax((o.input_rate, o.cache_read_rate, o.cache_write_rate, o.output_rate,
               concat('override ', o.model_pattern, ' ', o.provider, ' ',
                      coalesce(toString(o.from_ns), ''))),
              (NOT endsWith(o.model_pattern, '*'), lengthUTF8(o.model_pattern),
               o.provider != '', coalesce(o.from_ns, toInt64(-9223372036854775808))))
           AS rates
FROM budgetscope_tmp_price_needs n
CROSS JOIN budgetscope_price_overrides o
WHERE (o.model_pattern = n.model_key
       OR (endsWith(o.model_pattern, '*')
           AND startsWith(n.model_key, substring(o.model_pattern, 1,
                                                 length(o.model_pattern) - 1))))
  AND (o.provider = '' OR o.provider = n.provider)
  AND (o.from_ns IS NULL OR o.from_ns <= n.start_ns)
GROUP BY n.trace_id, n.span_id);

CREATE TABLE budgetscope_tmp_price_bundled ENGINE = Memory SETTINGS compress = 1 AS
WITH matched AS (
    SELECT n.trace_id AS trace_id, n.span_id AS span_id, n.start_ns AS start_ns,
           n.input_tokens AS input_tokens, m.bundled_ref AS bundled_ref
    FROM budgetscope_tmp_price_needs n
    JOIN budgetscope_price_matches m ON m.model_ref = n.model_ref
                                    AND m.provider = coalesce(n.provider, '')
    WHERE m.bundled_ref IS NOT NULL
      AND (n.trace_id, n.span_id) NOT IN (SELECT trace_id, span_id
                                          FROM budgetscope_tmp_price_override)
), chosen AS (
    -- genai-prices' rule: the last conditional price in force, else the first
    SELECT m.trace_id AS trace_id, m.span_id AS span_id, any(m.bundled_ref) AS bundled_ref,
           any(m.input_tokens) AS input_tokens,
           coalesce(maxIf(c.cond,
               (c.start_ns IS NULL AND c.tod_start_ns IS NULL)
               OR m.start_ns >= c.start_ns
               OR if(c.tod_end_ns < c.tod_start_ns,
                     m.start_ns % 86400000000000 >= c.tod_start_ns
                         OR m.start_ns % 86400000000000 < c.tod_end_ns,
                     m.start_ns % 86400000000000 >= c.tod_start_ns
                         AND m.start_ns % 86400000000000 < c.tod_end_ns)), 0) AS cond
    FROM matched m
    JOIN budgetscope_bundled_conditions c ON c.bundled_ref = m.bundled_ref
    GROUP BY m.trace_id, m.span_id
), tiered AS (
    -- each quantity's rate in the tier of the call's own input (cache included)
    SELECT c.trace_id AS trace_id, c.span_id AS span_id, p.quantity AS quantity,
           argMax(p.rate, p.tier_start) AS rate
    FROM chosen c
    JOIN budgetscope_bundled_prices p ON p.bundled_ref = c.bundled_ref AND p.cond = c.cond
    WHERE p.tier_start < c.input_tokens
    GROUP BY c.trace_id, c.span_id, p.quantity
)
SELECT c.trace_id AS trace_id, c.span_id AS span_id,
       maxIf(t.rate, t.quantity = 'input') AS input_rate,
       maxIf(t.rate, t.quantity = 'cache_read') AS cache_read_rate,
       maxIf(t.rate, t.quantity = 'cache_write') AS cache_write_rate,
       maxIf(t.rate, t.quantity = 'output') AS output_rate,
       maxIf(t.rate, t.quantity = 'reasoning') AS reasoning_rate,
       maxIf(t.rate, t.quantity = 'request') AS request_rate,
       concat('bundled ', any(c.bundled_ref), ' ', toString(any(c.cond))) AS ref
FROM chosen c
LEFT JOIN tiered t ON t.trace_id = c.trace_id AND t.span_id = c.span_id
GROUP BY c.trace_id, c.span_id;

-- The metered spans with their cost: the table reports read for models and pricing (DuckDB's
-- metered_spans), exchanged with the live one by derive_measure.sql.
CREATE TABLE budgetscope_metered_spans_next ENGINE = MergeTree
ORDER BY (run_id, trace_id, span_id) AS
WITH taken AS (
    SELECT *, reported_nano IS NOT NULL AND NOT (reported_nano = 0 AND tokens > 0) AS reported
    FROM budgetscope_tmp_metered
), rated AS (
    SELECT m.*,
           o.o_ref AS o_ref, b.ref AS b_ref,
           toInt128(coalesce(o.o_input, b.input_rate, 0)) AS r_in,
           toInt128(coalesce(o.o_cache_read, o.o_input, b.cache_read_rate, b.input_rate, 0))
               AS r_cache_read,
           toInt128(coalesce(o.o_cache_write, o.o_input, b.cache_write_rate, b.input_rate, 0))
               AS r_cache_write,
           toInt128(coalesce(o.o_output, b.output_rate, 0)) AS r_out,
           b.reasoning_rate AS r_reasoning,
           toInt128(coalesce(b.request_rate, 0)) AS r_request,
           multiIf(m.reported, 'reported', o_ref IS NOT NULL, 'override',
                   b_ref IS NOT NULL, 'bundled', m.is_metered, 'unpriced', NULL) AS cost_source
    FROM taken m
    LEFT JOIN (SELECT trace_id AS o_trace_id, span_id AS o_span_id, input_rate AS o_input,
                      cache_read_rate AS o_cache_read, cache_write_rate AS o_cache_write,
                      output_rate AS o_output, ref AS o_ref
               FROM budgetscope_tmp_price_override) o
           ON o.o_trace_id = m.trace_id AND o.o_span_id = m.span_id
    LEFT JOIN (SELECT trace_id AS b_trace_id, span_id AS b_span_id, input_rate,
                      cache_read_rate, cache_write_rate, output_rate, reasoning_rate,
                      request_rate, ref
               FROM budgetscope_tmp_price_bundled) b
           ON b.b_trace_id = m.trace_id AND b.b_span_id = m.span_id
), priced AS (
    SELECT *,
           if(cost_source IN ('override', 'bundled'),
              fresh_input_tokens * r_in + cache_read_tokens * r_cache_read
              + cache_write_tokens * r_cache_write
              + if(r_reasoning IS NULL, output_tokens * r_out,
                   (output_tokens - reasoning_tokens) * r_out
                   + reasoning_tokens * toInt128(r_reasoning))
              + r_request, NULL) AS priced_raw,
           /*@priced_nano*/ AS priced_nano
    FROM rated
)
SELECT run_id, trace_id, span_id, top_step_id, step_span_id, steps_above, is_metered, depth,
       start_ns, end_ns, model, provider, model_ref, input_tokens, fresh_input_tokens,
       cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, tokens,
       reported_nano,
       multiIf(reported, reported_nano,
               priced_raw IS NOT NULL, toNullable(toInt64(least(priced_nano,
                                                                 9223372036854775807))),
               NULL) AS cost_nano,
       cost_source, coalesce(o_ref, b_ref) AS price_ref, agent, run_start_ns
FROM priced;

-- Each step's tokens and known cost: the metered spans that are the step or lie under it
-- (`covered`: a model step with one is not unmetered); and each top-level step's own: the
-- metered spans that belong to it (§11.6; a tool lifted out of a model step belongs to its
-- own top-level step).
CREATE TABLE budgetscope_tmp_step_cost ENGINE = Memory SETTINGS compress = 1 AS
WITH sums AS (
    -- (each sum named apart from its column: ClickHouse would read the column as the alias)
    SELECT trace_id, step_id AS span_id,
           sum(input_tokens) AS s_input, sum(cache_read_tokens) AS s_cache_read,
           sum(cache_write_tokens) AS s_cache_write, sum(output_tokens) AS s_output,
           sum(reasoning_tokens) AS s_reasoning, sum(tokens) AS s_tokens,
           -- NULL when no cost under it is known (all unpriced): unknown, never 0 (least()
           -- passes over a NULL)
           if(count(cost_nano) = 0, NULL,
              toInt64(least(sum(toInt128(cost_nano)), 9223372036854775807))) AS s_cost,
           countIf(cost_source = 'unpriced') AS unpriced_under,
           if(min(cost_source) = max(cost_source), min(cost_source), 'mixed') AS s_source
    FROM budgetscope_metered_spans_next
    ARRAY JOIN steps_above AS step_id
    WHERE is_metered
    GROUP BY trace_id, step_id
), belonging AS (
    SELECT trace_id, assumeNotNull(top_step_id) AS span_id,
           toInt64(least(coalesce(sum(toInt128(cost_nano)), 0), 9223372036854775807))
               AS consumption_usd_nano,
           sum(tokens) AS consumption_tokens,
           countIf(cost_source = 'unpriced') AS unpriced_belonging
    FROM budgetscope_metered_spans_next WHERE is_metered AND top_step_id IS NOT NULL
    GROUP BY trace_id, top_step_id
)
SELECT coalesce(s.trace_id, b.trace_id) AS trace_id, coalesce(s.span_id, b.span_id) AS span_id,
       s.s_input AS input_tokens, s.s_cache_read AS cache_read_tokens,
       s.s_cache_write AS cache_write_tokens, s.s_output AS output_tokens,
       s.s_reasoning AS reasoning_tokens, s.s_tokens AS tokens, s.s_cost AS cost_nano,
       s.unpriced_under AS unpriced_under, s.s_source AS cost_source,
       s.span_id IS NOT NULL AS covered,
       b.consumption_usd_nano AS consumption_usd_nano,
       b.consumption_tokens AS consumption_tokens, b.unpriced_belonging AS unpriced_belonging
FROM sums s
FULL JOIN belonging b ON b.trace_id = s.trace_id AND b.span_id = s.span_id;

-- Each run's sums (§11.4: over its metered spans, after the deadline too), its unpriced
-- models, what no top-level step holds, the outermost aggregate's reported cost, and where it
-- crossed B$ and Btok (§11.6: the metered spans by end, start, span id; the first at which the
-- cumulative known cost, or token count, reaches the budget).
CREATE TABLE budgetscope_tmp_run_cost ENGINE = Memory SETTINGS compress = 1 AS
WITH cumulative AS (
    SELECT m.run_id AS run_id, m.span_id AS span_id, m.top_step_id AS top_step_id,
           m.tokens AS tokens, toInt128(coalesce(m.cost_nano, 0)) AS known,
           b.usd_budget_nano AS usd_budget_nano, b.token_budget AS token_budget,
           sum(known) OVER spent AS cost_through,
           sum(m.tokens) OVER spent AS tokens_through,
           (m.end_ns, m.start_ns, m.span_id) AS position
    FROM budgetscope_metered_spans_next m
    JOIN budgetscope_tmp_run_budgets b ON b.run_id = m.run_id
    WHERE m.is_metered
    WINDOW spent AS (PARTITION BY m.run_id ORDER BY m.end_ns, m.start_ns, m.span_id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), crossings AS (
    SELECT run_id,
           countIf(cost_through >= usd_budget_nano) > 0 AS usd_crossed,
           argMinIf((top_step_id, cost_through - known, cost_through), position,
                    cost_through >= usd_budget_nano) AS usd_crossing,
           countIf(tokens_through >= token_budget) > 0 AS tokens_crossed,
           argMinIf((top_step_id, tokens_through - tokens, tokens_through), position,
                    tokens_through >= token_budget) AS token_crossing
    FROM cumulative GROUP BY run_id
), sums AS (
    -- (each sum named apart from its column: ClickHouse would read the column as the alias)
    SELECT run_id,
           sumIf(tokens, is_metered) AS run_tokens,
           coalesce(sumIf(input_tokens, is_metered), 0) AS run_input_tokens,
           coalesce(sumIf(cache_read_tokens, is_metered), 0) AS run_cache_read_tokens,
           coalesce(sumIf(cache_write_tokens, is_metered), 0) AS run_cache_write_tokens,
           coalesce(sumIf(output_tokens, is_metered), 0) AS run_output_tokens,
           coalesce(sumIf(reasoning_tokens, is_metered), 0) AS run_reasoning_tokens,
           toInt64(least(coalesce(sumIf(toInt128(cost_nano), is_metered), 0),
                         9223372036854775807)) AS run_cost_nano,
           countIf(cost_source = 'unpriced') AS unpriced_spans,
           arraySort(groupUniqArrayIf(model, cost_source = 'unpriced')) AS unpriced_models,
           toInt64(least(coalesce(sumIf(toInt128(cost_nano),
                                        is_metered AND top_step_id IS NULL), 0),
                         9223372036854775807)) AS unattributed_cost_nano,
           sumIf(tokens, is_metered AND top_step_id IS NULL) AS unattributed_tokens,
           argMinIf(cost_nano, (depth, start_ns, span_id),
                    NOT is_metered AND cost_source = 'reported') AS reported_total_nano
    FROM budgetscope_metered_spans_next GROUP BY run_id
)
SELECT s.*,
       coalesce(c.usd_crossed, false) AS usd_crossed,
       c.usd_crossing.1 AS usd_step, c.usd_crossing.2 AS usd_before,
       c.usd_crossing.3 AS usd_after,
       coalesce(c.tokens_crossed, false) AS tokens_crossed,
       c.token_crossing.1 AS token_step, c.token_crossing.2 AS tokens_before,
       c.token_crossing.3 AS tokens_after
FROM sums s LEFT JOIN crossings c ON c.run_id = s.run_id;

-- The steps' columns (§11.4, §11.6). A model step neither metered nor above a metered span is
-- unmetered, and possibly billed unless its class says the call was refused or failed before
-- it ran. A step's cost is complete when no metered span under it is unpriced, it is not
-- possibly billed, and (a top-level step) no step in it is. Shares are not clipped.
CREATE TABLE budgetscope_tmp_cost_steps ENGINE = Memory SETTINGS compress = 1 AS
WITH flagged AS (
    SELECT s.trace_id AS trace_id, s.span_id AS span_id, s.run_id AS run_id,
           s.top_step_id AS top_step_id, s.is_top_level AS is_top_level,
           c.input_tokens AS input_tokens, c.cache_read_tokens AS cache_read_tokens,
           c.cache_write_tokens AS cache_write_tokens, c.output_tokens AS output_tokens,
           c.reasoning_tokens AS reasoning_tokens, c.tokens AS tokens, c.cost_nano AS cost_nano,
           c.cost_source AS cost_source,
           coalesce(c.unpriced_under, 0) AS unpriced_under,
           s.kind = 'model' AND NOT coalesce(c.covered, false) AS unmetered,
           s.kind = 'model' AND NOT coalesce(c.covered, false)
               AND s.class IN (/*@billable_classes*/) AS possibly_billed,
           if(s.is_top_level, coalesce(c.consumption_usd_nano, 0), NULL)
               AS consumption_usd_nano,
           if(s.is_top_level, coalesce(c.consumption_tokens, 0), NULL) AS consumption_tokens
    FROM budgetscope_tmp_steps s
    LEFT JOIN budgetscope_tmp_step_cost c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
)
SELECT f.trace_id AS trace_id, f.span_id AS span_id,
       f.input_tokens AS input_tokens, f.cache_read_tokens AS cache_read_tokens,
       f.cache_write_tokens AS cache_write_tokens, f.output_tokens AS output_tokens,
       f.reasoning_tokens AS reasoning_tokens, f.tokens AS tokens, f.cost_nano AS cost_nano,
       CAST(f.unpriced_under = 0 AND NOT f.possibly_billed
            AND NOT (f.is_top_level AND coalesce(max(f.possibly_billed) OVER (
                PARTITION BY f.trace_id, f.top_step_id), false)), 'Bool') AS cost_complete,
       f.cost_source AS cost_source, CAST(f.unmetered, 'Bool') AS unmetered,
       CAST(f.possibly_billed, 'Bool') AS possibly_billed,
       f.consumption_usd_nano AS consumption_usd_nano,
       f.consumption_tokens AS consumption_tokens,
       f.consumption_usd_nano / nullIf(b.usd_budget_nano, 0) AS cost_share,
       f.consumption_tokens / nullIf(b.token_budget, 0) AS token_share
FROM flagged f
JOIN budgetscope_tmp_run_budgets b ON b.run_id = f.run_id;

-- The top-level steps of the runs with a budget in tokens or dollars, with their numbers (§4:
-- the rank of their start, from 1) and what belongs to them (a table: the culprits and
-- crossers below read it four times). §11.6 names culprits and crossers only for a run with
-- that budget known, and most runs have none (as derive_cost.sql's gate `budgeted` on DuckDB).
CREATE TABLE budgetscope_tmp_cost_top ENGINE = Memory SETTINGS compress = 1 AS
SELECT s.run_id AS run_id, s.span_id AS span_id, s.step_key AS step_key,
       s.start_ns AS start_ns, c.consumption_usd_nano AS consumption_usd_nano,
       c.consumption_tokens AS consumption_tokens,
       row_number() OVER (PARTITION BY s.run_id ORDER BY s.start_ns, s.span_id) AS number
FROM budgetscope_tmp_steps s
JOIN budgetscope_tmp_cost_steps c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
WHERE s.is_top_level
  AND s.run_id IN (SELECT run_id FROM budgetscope_tmp_run_budgets
                   WHERE usd_budget_nano IS NOT NULL OR token_budget IS NOT NULL);

-- The runs' columns (§11.4-§11.7), and what §4's time exhaustion reads: the refused steps
-- whose refusal names time, and the budget the stated outcome names.
CREATE TABLE budgetscope_tmp_cost_runs ENGINE = Memory SETTINGS compress = 1 AS
WITH counted AS (
    SELECT s.run_id AS run_id,
           countIf(s.class = 'refused' AND s.refused_by = 'time') AS time_refused_steps,
           max(s.class = 'refused' AND coalesce(s.refused_by = 'usd', false)) AS refused_usd,
           max(s.class = 'refused' AND coalesce(s.refused_by = 'tokens', false))
               AS refused_tokens,
           countIf(c.unmetered) AS unmetered_steps,
           countIf(c.possibly_billed) AS unmetered_billable_steps,
           countIf(s.is_top_level AND coalesce(p.unpriced_belonging, 0) > 0) AS unpriced_steps
    FROM budgetscope_tmp_steps s
    JOIN budgetscope_tmp_cost_steps c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
    LEFT JOIN budgetscope_tmp_step_cost p ON p.trace_id = s.trace_id AND p.span_id = s.span_id
    GROUP BY s.run_id
), cost_culprit AS (
    SELECT run_id, span_id, step_key, number, consumption_usd_nano
    FROM budgetscope_tmp_cost_top
    WHERE consumption_usd_nano > 0
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_usd_nano DESC, start_ns, span_id) = 1
), token_culprit AS (
    SELECT run_id, span_id, step_key, number, consumption_tokens
    FROM budgetscope_tmp_cost_top
    WHERE consumption_tokens > 0
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_tokens DESC, start_ns, span_id) = 1
), measured AS (
    SELECT f.run_id AS run_id, f.exhausted_by AS exhausted_by,
           coalesce(f.known_outcome IN ('exhausted', 'partial'), false) AS stated_exhausted,
           coalesce(n.time_refused_steps, 0) AS time_refused_steps,
           coalesce(n.refused_usd, false) AS refused_usd,
           coalesce(n.refused_tokens, false) AS refused_tokens,
           coalesce(n.unmetered_steps, 0) AS unmetered_steps,
           coalesce(n.unmetered_billable_steps, 0) AS unmetered_billable_steps,
           coalesce(n.unpriced_steps, 0) AS unpriced_steps,
           coalesce(k.run_tokens, 0) AS tokens, coalesce(k.run_input_tokens, 0) AS input_tokens,
           coalesce(k.run_cache_read_tokens, 0) AS cache_read_tokens,
           coalesce(k.run_cache_write_tokens, 0) AS cache_write_tokens,
           coalesce(k.run_output_tokens, 0) AS output_tokens,
           coalesce(k.run_reasoning_tokens, 0) AS reasoning_tokens,
           coalesce(k.run_cost_nano, 0) AS cost_nano,
           coalesce(k.unpriced_spans, 0) AS unpriced_spans,
           k.unpriced_models AS unpriced_models,
           coalesce(k.unattributed_cost_nano, 0) AS unattributed_cost_nano,
           coalesce(k.unattributed_tokens, 0) AS unattributed_tokens,
           k.reported_total_nano AS reported_total_nano,
           coalesce(k.usd_crossed, false) AS usd_crossed, k.usd_step AS usd_step,
           k.usd_before AS usd_before, k.usd_after AS usd_after,
           coalesce(k.tokens_crossed, false) AS tokens_crossed, k.token_step AS token_step,
           k.tokens_before AS tokens_before, k.tokens_after AS tokens_after,
           b.usd_budget_nano AS usd_budget_nano, b.usd_budget_source AS usd_budget_source,
           b.token_budget AS token_budget, b.token_budget_source AS token_budget_source
    FROM budgetscope_tmp_runs f
    JOIN budgetscope_tmp_run_budgets b ON b.run_id = f.run_id
    LEFT JOIN counted n ON n.run_id = f.run_id
    LEFT JOIN budgetscope_tmp_run_cost k ON k.run_id = f.run_id
)
SELECT m.run_id AS run_id, m.time_refused_steps AS time_refused_steps,
       toInt64(m.tokens) AS tokens, toInt64(m.input_tokens) AS input_tokens,
       toInt64(m.cache_read_tokens) AS cache_read_tokens,
       toInt64(m.cache_write_tokens) AS cache_write_tokens,
       toInt64(m.output_tokens) AS output_tokens,
       toInt64(m.reasoning_tokens) AS reasoning_tokens, toInt64(m.cost_nano) AS cost_nano,
       CAST(m.unpriced_spans = 0 AND m.unmetered_billable_steps = 0, 'Bool') AS cost_complete,
       toInt64(m.unpriced_steps) AS unpriced_steps, toInt64(m.unmetered_steps) AS unmetered_steps,
       toInt64(m.unmetered_billable_steps) AS unmetered_billable_steps,
       m.unpriced_models AS unpriced_models,
       toInt64(m.unattributed_cost_nano) AS unattributed_cost_nano,
       toInt64(m.unattributed_tokens) AS unattributed_tokens,
       m.reported_total_nano AS reported_total_nano,
       m.exhausted_by AS exhausted_by,
       m.usd_budget_nano AS usd_budget_nano, m.usd_budget_source AS usd_budget_source,
       m.token_budget AS token_budget, m.token_budget_source AS token_budget_source,
       m.cost_nano / nullIf(m.usd_budget_nano, 0) AS cost_utilisation,
       m.tokens / nullIf(m.token_budget, 0) AS token_utilisation,
       -- §11.5: a stated outcome naming the budget, spending it, or a refusal naming it; a
       -- run exhausted so counts even when its budget is unknown (enforced elsewhere)
       CAST(multiIf(m.usd_budget_nano IS NOT NULL,
                    (m.stated_exhausted AND coalesce(m.exhausted_by = 'usd', false))
                    OR m.cost_nano >= m.usd_budget_nano OR m.refused_usd,
                    (m.stated_exhausted AND coalesce(m.exhausted_by = 'usd', false))
                    OR m.refused_usd, true, NULL), 'Nullable(Bool)') AS usd_exhausted,
       CAST(multiIf(m.token_budget IS NOT NULL,
                    (m.stated_exhausted AND coalesce(m.exhausted_by = 'tokens', false))
                    OR m.tokens >= m.token_budget OR m.refused_tokens,
                    (m.stated_exhausted AND coalesce(m.exhausted_by = 'tokens', false))
                    OR m.refused_tokens, true, NULL), 'Nullable(Bool)') AS tokens_exhausted,
       cc.span_id AS cost_culprit_span_id, cc.step_key AS cost_culprit_key,
       toInt32(cc.number) AS cost_culprit_step, cc.consumption_usd_nano AS cost_culprit_nano,
       cc.consumption_usd_nano / nullIf(m.usd_budget_nano, 0) AS cost_culprit_share,
       if(m.usd_crossed, m.usd_step, NULL) AS cost_crosser_span_id,
       ux.step_key AS cost_crosser_key, toInt32(ux.number) AS cost_crosser_step,
       if(m.usd_crossed, toInt64(least(m.usd_before, 9223372036854775807)), NULL)
           AS cost_before_crossing_nano,
       if(m.usd_crossed, toInt64(least(m.usd_after, 9223372036854775807)), NULL)
           AS cost_after_crossing_nano,
       if(m.usd_budget_nano IS NOT NULL, greatest(0, m.cost_nano - m.usd_budget_nano), NULL)
           AS overrun_usd_nano,
       tc.span_id AS token_culprit_span_id, tc.step_key AS token_culprit_key,
       toInt32(tc.number) AS token_culprit_step, tc.consumption_tokens AS token_culprit_tokens,
       tc.consumption_tokens / nullIf(m.token_budget, 0) AS token_culprit_share,
       if(m.tokens_crossed, m.token_step, NULL) AS token_crosser_span_id,
       tx.step_key AS token_crosser_key, toInt32(tx.number) AS token_crosser_step,
       if(m.tokens_crossed, toInt64(m.tokens_before), NULL) AS tokens_before_crossing,
       if(m.tokens_crossed, toInt64(m.tokens_after), NULL) AS tokens_after_crossing,
       if(m.token_budget IS NOT NULL, greatest(0, m.tokens - m.token_budget), NULL)
           AS overrun_tokens
FROM measured m
LEFT JOIN cost_culprit cc ON cc.run_id = m.run_id AND m.usd_budget_nano IS NOT NULL
LEFT JOIN token_culprit tc ON tc.run_id = m.run_id AND m.token_budget IS NOT NULL
LEFT JOIN budgetscope_tmp_cost_top ux ON ux.run_id = m.run_id AND m.usd_crossed
                                     AND ux.span_id = m.usd_step
LEFT JOIN budgetscope_tmp_cost_top tx ON tx.run_id = m.run_id AND m.tokens_crossed
                                     AND tx.span_id = m.token_step;
