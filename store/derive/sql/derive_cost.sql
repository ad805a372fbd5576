-- name: derive_cost
-- Tokens and dollars of the runs and steps (docs/metrics.md §11.3-§11.7): cost of each metered span, sums, budgets, exhaustion, culprit and crosser.
--
-- Reads derive_metered (the carriers, derive_usage.sql; or, when only prices or declarations
-- changed, the stored metered_spans, derive_budgets.sql), derive_run_facts and
-- derive_step_facts, the prices (store/file/schema/prices.sql) and the declared budgets. Leaves
-- derive_cost_runs (run_id) and derive_cost_steps (trace_id, span_id) for derive_measure.sql,
-- which stores them with the runs and steps it replaces, and replaces the traces' metered_spans.
-- Money is integer nano-dollars: a priced span's cost is Σ count × rate (pico-dollars per
-- million tokens) / 10^9 in HUGEINT, rounded half to even once; sums of costs saturate at
-- BIGINT's largest (9.2 billion dollars) rather than fail a derivation.

-- B$ and Btok (§11.5): the run's own budget.total_usd / budget.total_tokens, else its agent's
-- declaration of that dimension, else the default's; each dimension on its own (§10).
CREATE OR REPLACE TEMP TABLE derive_run_budgets AS
SELECT r.run_id, r.trace_id,
       coalesce(r.budget_total_usd_nano, a.usd_nano, d.usd_nano) AS usd_budget_nano,
       CASE WHEN r.budget_total_usd_nano IS NOT NULL THEN 'span'
            WHEN coalesce(a.usd_nano, d.usd_nano) IS NOT NULL THEN 'declared' END
           AS usd_budget_source,
       coalesce(r.budget_total_tokens, a.tokens, d.tokens) AS token_budget,
       CASE WHEN r.budget_total_tokens IS NOT NULL THEN 'span'
            WHEN coalesce(a.tokens, d.tokens) IS NOT NULL THEN 'declared' END
           AS token_budget_source
FROM derive_run_facts r
LEFT JOIN declared_budgets a ON a.scope = 'agent' AND a.agent = r.agent
LEFT JOIN declared_budgets d ON d.scope = 'default';

-- The cost of each metered span (§11.3): its reported cost (a 0 on a span with tokens is a
-- stream that reported none: not taken); else the `prices set` entry that matches its model
-- (exact before prefix, the longer prefix first; a provider before any; the latest --from at
-- or before the span's start); else the bundled price matched to its model and provider
-- (store/prices/bundled.py), the conditional price in force at its start and the tier of its
-- own input; else unknown. A missing cache rate charges the input rate, a missing reasoning
-- rate the output rate. An aggregate is never priced: it keeps its reported cost.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_costed AS
WITH taken AS (
    SELECT *, reported_nano IS NOT NULL AND NOT (reported_nano = 0 AND tokens > 0) AS reported
    FROM derive_metered
), needs AS (
    SELECT trace_id, span_id, lower(model) AS model_key, provider, model_ref, start_ns,
           input_tokens
    FROM taken
    WHERE is_metered AND NOT reported AND input_tokens IS NOT NULL
), override AS (
    SELECT n.trace_id, n.span_id,
           arg_max({'input': o.input_rate, 'cache_read': o.cache_read_rate,
                    'cache_write': o.cache_write_rate, 'output': o.output_rate,
                    'ref': 'override ' || o.model_pattern || ' ' || o.provider || ' '
                           || coalesce(o.from_ns::VARCHAR, '')},
                   (NOT ends_with(o.model_pattern, '*'), length(o.model_pattern),
                    o.provider <> '', coalesce(o.from_ns, -9223372036854775808))) AS rates
    FROM needs n
    JOIN price_overrides o
      ON (o.model_pattern = n.model_key
          OR (ends_with(o.model_pattern, '*')
              AND starts_with(n.model_key, left(o.model_pattern, -1))))
     AND (o.provider = '' OR o.provider = n.provider)
     AND (o.from_ns IS NULL OR o.from_ns <= n.start_ns)
    GROUP BY ALL
), matched AS (
    SELECT n.trace_id, n.span_id, n.start_ns, n.input_tokens, m.bundled_ref
    FROM needs n
    JOIN price_matches m ON m.model_ref = n.model_ref AND m.provider = coalesce(n.provider, '')
    WHERE m.bundled_ref IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM override o
                      WHERE o.trace_id = n.trace_id AND o.span_id = n.span_id)
), chosen AS (
    -- genai-prices' rule: the last conditional price in force, else the first
    SELECT m.trace_id, m.span_id, m.bundled_ref, m.input_tokens,
           coalesce(max(c.cond) FILTER (WHERE
               (c.start_ns IS NULL AND c.tod_start_ns IS NULL)
               OR m.start_ns >= c.start_ns
               OR CASE WHEN c.tod_end_ns < c.tod_start_ns
                       THEN m.start_ns % 86400000000000 >= c.tod_start_ns
                            OR m.start_ns % 86400000000000 < c.tod_end_ns
                       ELSE m.start_ns % 86400000000000 >= c.tod_start_ns
                            AND m.start_ns % 86400000000000 < c.tod_end_ns END), 0) AS cond
    FROM matched m
    JOIN bundled_conditions c ON c.bundled_ref = m.bundled_ref
    GROUP BY ALL
), tiered AS (
    -- each quantity's rate in the tier of the call's own input (cache included)
    SELECT c.trace_id, c.span_id, c.bundled_ref, c.cond, p.quantity,
           arg_max(p.rate, p.tier_start) AS rate
    FROM chosen c
    JOIN bundled_prices p ON p.bundled_ref = c.bundled_ref AND p.cond = c.cond
                         AND p.tier_start < c.input_tokens
    GROUP BY ALL
), bundled AS (
    SELECT c.trace_id, c.span_id,
           {'input': max(t.rate) FILTER (WHERE t.quantity = 'input'),
            'cache_read': max(t.rate) FILTER (WHERE t.quantity = 'cache_read'),
            'cache_write': max(t.rate) FILTER (WHERE t.quantity = 'cache_write'),
            'output': max(t.rate) FILTER (WHERE t.quantity = 'output'),
            'reasoning': max(t.rate) FILTER (WHERE t.quantity = 'reasoning'),
            'request': max(t.rate) FILTER (WHERE t.quantity = 'request'),
            'ref': 'bundled ' || c.bundled_ref || ' ' || c.cond} AS rates
    FROM chosen c
    LEFT JOIN tiered t ON t.trace_id = c.trace_id AND t.span_id = c.span_id
    GROUP BY c.trace_id, c.span_id, c.bundled_ref, c.cond
), rated AS (
    SELECT m.*,
           coalesce(o.rates.input, b.rates.input, 0)::HUGEINT AS r_in,
           coalesce(o.rates.cache_read, o.rates.input, b.rates.cache_read, b.rates.input, 0)
               ::HUGEINT AS r_cache_read,
           coalesce(o.rates.cache_write, o.rates.input, b.rates.cache_write, b.rates.input, 0)
               ::HUGEINT AS r_cache_write,
           coalesce(o.rates.output, b.rates.output, 0)::HUGEINT AS r_out,
           b.rates.reasoning::HUGEINT AS r_reasoning,
           coalesce(b.rates.request, 0)::HUGEINT AS r_request,
           coalesce(o.rates.ref, b.rates.ref) AS price_ref,
           CASE WHEN m.reported THEN 'reported' WHEN o.rates IS NOT NULL THEN 'override'
                WHEN b.rates IS NOT NULL THEN 'bundled'
                WHEN m.is_metered THEN 'unpriced' END AS cost_source
    FROM taken m
    LEFT JOIN override o ON o.trace_id = m.trace_id AND o.span_id = m.span_id
    LEFT JOIN bundled b ON b.trace_id = m.trace_id AND b.span_id = m.span_id
), raw AS (
    SELECT *,
           CASE WHEN cost_source IN ('override', 'bundled') THEN
               fresh_input_tokens * r_in + cache_read_tokens * r_cache_read
               + cache_write_tokens * r_cache_write
               + CASE WHEN r_reasoning IS NULL THEN output_tokens * r_out
                      ELSE (output_tokens - reasoning_tokens) * r_out
                           + reasoning_tokens * r_reasoning END
               + r_request END AS priced_raw
    FROM rated
), rounded AS (
    SELECT *, /*@priced_nano*/ AS priced_nano FROM raw
)
SELECT * EXCLUDE (reported, r_in, r_cache_read, r_cache_write, r_out, r_reasoning, r_request,
                  priced_raw, priced_nano, price_ref, cost_source),
       CASE WHEN reported THEN reported_nano
            WHEN priced_raw IS NOT NULL
                THEN CAST(least(priced_nano, 9223372036854775807) AS BIGINT) END AS cost_nano,
       cost_source,
       price_ref
FROM rounded;

-- Each step's tokens and known cost: the metered spans that are the step or lie under it
-- (`covered`: a model step with one is not unmetered); and each top-level step's own: the
-- metered spans that belong to it (§11.6; a tool lifted out of a model step belongs to its
-- own top-level step).
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_step_cost AS
WITH under AS (
    SELECT trace_id, unnest(steps_above) AS span_id, input_tokens, cache_read_tokens,
           cache_write_tokens, output_tokens, reasoning_tokens, tokens, cost_nano, cost_source
    FROM derive_costed WHERE is_metered
), sums AS (
    SELECT trace_id, span_id,
           sum(input_tokens)::BIGINT AS input_tokens,
           sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
           sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
           sum(output_tokens)::BIGINT AS output_tokens,
           sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
           sum(tokens)::BIGINT AS tokens,
           -- NULL when no cost under it is known (all unpriced): unknown, never 0
           CAST(CASE WHEN sum(cost_nano) > 9223372036854775807 THEN 9223372036854775807
                     ELSE sum(cost_nano) END AS BIGINT) AS cost_nano,
           count(*) FILTER (WHERE cost_source = 'unpriced') AS unpriced_under,
           CASE WHEN min(cost_source) = max(cost_source) THEN min(cost_source) ELSE 'mixed' END
               AS cost_source
    FROM under GROUP BY ALL
), belonging AS (
    SELECT trace_id, top_step_id AS span_id,
           least(coalesce(sum(cost_nano), 0), 9223372036854775807)::BIGINT
               AS consumption_usd_nano,
           sum(tokens)::BIGINT AS consumption_tokens,
           count(*) FILTER (WHERE cost_source = 'unpriced') AS unpriced_belonging
    FROM derive_costed WHERE is_metered AND top_step_id IS NOT NULL
    GROUP BY ALL
)
SELECT coalesce(s.trace_id, b.trace_id) AS trace_id, coalesce(s.span_id, b.span_id) AS span_id,
       s.* EXCLUDE (trace_id, span_id), s.span_id IS NOT NULL AS covered,
       b.* EXCLUDE (trace_id, span_id)
FROM sums s FULL JOIN belonging b ON b.trace_id = s.trace_id AND b.span_id = s.span_id;

-- Each run's sums (§11.4: over its metered spans, after the deadline too), its unpriced
-- models, what no top-level step holds, the outermost aggregate's reported cost, and where it
-- crossed B$ and Btok (§11.6: the metered spans by end, start, span id; the first at which the
-- cumulative known cost, or token count, reaches the budget).
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_run_cost AS
WITH cumulative AS (
    SELECT m.run_id, m.span_id, m.top_step_id, m.tokens, coalesce(m.cost_nano, 0) AS known,
           b.usd_budget_nano, b.token_budget,
           sum(coalesce(m.cost_nano, 0)) OVER spent AS cost_through,
           sum(m.tokens) OVER spent AS tokens_through,
           (m.end_ns, m.start_ns, m.span_id) AS position
    FROM derive_costed m
    JOIN derive_run_budgets b ON b.run_id = m.run_id
    WHERE m.is_metered
    WINDOW spent AS (PARTITION BY m.run_id ORDER BY m.end_ns, m.start_ns, m.span_id
                     ROWS UNBOUNDED PRECEDING)
), crossings AS (
    SELECT run_id,
           arg_min({'step': top_step_id, 'before': cost_through - known,
                    'after': cost_through}, position)
               FILTER (WHERE cost_through >= usd_budget_nano) AS usd,
           arg_min({'step': top_step_id, 'before': tokens_through - tokens,
                    'after': tokens_through}, position)
               FILTER (WHERE tokens_through >= token_budget) AS tokens
    FROM cumulative GROUP BY run_id
), sums AS (
    SELECT run_id,
           coalesce(sum(tokens) FILTER (WHERE is_metered), 0)::BIGINT AS tokens,
           coalesce(sum(input_tokens) FILTER (WHERE is_metered), 0)::BIGINT AS input_tokens,
           coalesce(sum(cache_read_tokens) FILTER (WHERE is_metered), 0)::BIGINT
               AS cache_read_tokens,
           coalesce(sum(cache_write_tokens) FILTER (WHERE is_metered), 0)::BIGINT
               AS cache_write_tokens,
           coalesce(sum(output_tokens) FILTER (WHERE is_metered), 0)::BIGINT AS output_tokens,
           coalesce(sum(reasoning_tokens) FILTER (WHERE is_metered), 0)::BIGINT
               AS reasoning_tokens,
           least(coalesce(sum(cost_nano) FILTER (WHERE is_metered), 0),
                 9223372036854775807)::BIGINT AS cost_nano,
           count(*) FILTER (WHERE cost_source = 'unpriced') AS unpriced_spans,
           list_sort(list_distinct(list(model) FILTER (WHERE cost_source = 'unpriced')))
               AS unpriced_models,
           least(coalesce(sum(cost_nano) FILTER (WHERE is_metered AND top_step_id IS NULL), 0),
                 9223372036854775807)::BIGINT AS unattributed_cost_nano,
           coalesce(sum(tokens) FILTER (WHERE is_metered AND top_step_id IS NULL), 0)::BIGINT
               AS unattributed_tokens,
           arg_min(cost_nano, (depth, start_ns, span_id))
               FILTER (WHERE NOT is_metered AND cost_source = 'reported') AS reported_total_nano
    FROM derive_costed GROUP BY run_id
)
SELECT s.*, c.usd AS usd_crossing, c.tokens AS token_crossing
FROM sums s LEFT JOIN crossings c USING (run_id);

-- when: no_usage
CREATE OR REPLACE TEMP TABLE derive_step_cost (
    trace_id VARCHAR, span_id VARCHAR, input_tokens BIGINT, cache_read_tokens BIGINT,
    cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, tokens BIGINT,
    cost_nano BIGINT, unpriced_under BIGINT, cost_source VARCHAR, covered BOOLEAN,
    consumption_usd_nano BIGINT, consumption_tokens BIGINT, unpriced_belonging BIGINT
);
-- when: no_usage
CREATE OR REPLACE TEMP TABLE derive_run_cost (
    run_id VARCHAR, tokens BIGINT, input_tokens BIGINT, cache_read_tokens BIGINT,
    cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, cost_nano BIGINT,
    unpriced_spans BIGINT, unpriced_models VARCHAR[], unattributed_cost_nano BIGINT,
    unattributed_tokens BIGINT, reported_total_nano BIGINT,
    usd_crossing STRUCT(step VARCHAR, "before" HUGEINT, "after" HUGEINT),
    token_crossing STRUCT(step VARCHAR, "before" HUGEINT, "after" HUGEINT)
);

-- The steps' columns (§11.4, §11.6). A model step neither metered nor above a metered span is
-- unmetered, and possibly billed unless its class says the call was refused or failed before
-- it ran. A step's cost is complete when no metered span under it is unpriced, it is not
-- possibly billed, and (a top-level step) no step in it is. Shares are not clipped.
CREATE OR REPLACE TEMP TABLE derive_cost_steps AS
WITH flagged AS (
    SELECT s.trace_id, s.span_id, s.run_id, s.top_step_id, s.is_top_level,
           c.* EXCLUDE (trace_id, span_id, unpriced_belonging, covered, consumption_usd_nano,
                        consumption_tokens, unpriced_under),
           coalesce(c.unpriced_under, 0) AS unpriced_under,
           s.kind = 'model' AND NOT coalesce(c.covered, false) AS unmetered,
           s.kind = 'model' AND NOT coalesce(c.covered, false)
               AND s.class IN (/*@billable_classes*/) AS possibly_billed,
           CASE WHEN s.is_top_level THEN coalesce(c.consumption_usd_nano, 0) END
               AS consumption_usd_nano,
           CASE WHEN s.is_top_level THEN coalesce(c.consumption_tokens, 0) END
               AS consumption_tokens
    FROM derive_step_facts s
    LEFT JOIN derive_step_cost c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
)
SELECT f.* EXCLUDE (run_id, top_step_id, is_top_level, unpriced_under),
       f.unpriced_under = 0 AND NOT f.possibly_billed
           AND NOT (f.is_top_level AND coalesce(bool_or(f.possibly_billed) OVER (
               PARTITION BY f.trace_id, f.top_step_id), false)) AS cost_complete,
       f.consumption_usd_nano / nullif(b.usd_budget_nano, 0) AS cost_share,
       f.consumption_tokens / nullif(b.token_budget, 0) AS token_share
FROM flagged f
JOIN derive_run_budgets b ON b.run_id = f.run_id;

-- The runs' columns (§11.4-§11.7), and what §4's time exhaustion reads: the refused steps
-- whose refusal names time, and the budget the stated outcome names.
CREATE OR REPLACE TEMP TABLE derive_cost_runs AS
WITH counted AS (
    SELECT s.run_id,
           count(*) FILTER (WHERE s.class = 'refused' AND s.refused_by = 'time')
               AS time_refused_steps,
           coalesce(bool_or(s.class = 'refused' AND s.refused_by = 'usd'), false) AS refused_usd,
           coalesce(bool_or(s.class = 'refused' AND s.refused_by = 'tokens'), false)
               AS refused_tokens,
           count(*) FILTER (WHERE c.unmetered) AS unmetered_steps,
           count(*) FILTER (WHERE c.possibly_billed) AS unmetered_billable_steps,
           count(*) FILTER (WHERE s.is_top_level AND coalesce(p.unpriced_belonging, 0) > 0)
               AS unpriced_steps
    FROM derive_step_facts s
    JOIN derive_cost_steps c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
    LEFT JOIN derive_step_cost p ON p.trace_id = s.trace_id AND p.span_id = s.span_id
    GROUP BY s.run_id
), top AS (
    -- the top-level steps with their numbers (§4: the rank of their start, from 1)
    SELECT s.run_id, s.span_id, s.step_key, s.start_ns, c.consumption_usd_nano,
           c.consumption_tokens,
           row_number() OVER (PARTITION BY s.run_id ORDER BY s.start_ns, s.span_id) AS number
    FROM derive_step_facts s
    JOIN derive_cost_steps c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
    WHERE s.is_top_level
), cost_culprit AS (
    SELECT run_id, span_id, step_key, number, consumption_usd_nano FROM top
    WHERE consumption_usd_nano > 0
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_usd_nano DESC, start_ns, span_id) = 1
), token_culprit AS (
    SELECT run_id, span_id, step_key, number, consumption_tokens FROM top
    WHERE consumption_tokens > 0
    QUALIFY row_number() OVER (PARTITION BY run_id
                               ORDER BY consumption_tokens DESC, start_ns, span_id) = 1
), measured AS (
    SELECT f.run_id, f.exhausted_by,
           coalesce(lower(trim(f.outcome)) IN ('exhausted', 'partial'), false)
               AS stated_exhausted,
           coalesce(n.time_refused_steps, 0) AS time_refused_steps,
           coalesce(n.refused_usd, false) AS refused_usd,
           coalesce(n.refused_tokens, false) AS refused_tokens,
           coalesce(n.unmetered_steps, 0) AS unmetered_steps,
           coalesce(n.unmetered_billable_steps, 0) AS unmetered_billable_steps,
           coalesce(n.unpriced_steps, 0) AS unpriced_steps,
           coalesce(c.tokens, 0) AS tokens, coalesce(c.input_tokens, 0) AS input_tokens,
           coalesce(c.cache_read_tokens, 0) AS cache_read_tokens,
           coalesce(c.cache_write_tokens, 0) AS cache_write_tokens,
           coalesce(c.output_tokens, 0) AS output_tokens,
           coalesce(c.reasoning_tokens, 0) AS reasoning_tokens,
           coalesce(c.cost_nano, 0) AS cost_nano,
           coalesce(c.unpriced_spans, 0) AS unpriced_spans,
           coalesce(c.unpriced_models, []) AS unpriced_models,
           coalesce(c.unattributed_cost_nano, 0) AS unattributed_cost_nano,
           coalesce(c.unattributed_tokens, 0) AS unattributed_tokens,
           c.reported_total_nano, c.usd_crossing, c.token_crossing,
           b.usd_budget_nano, b.usd_budget_source, b.token_budget, b.token_budget_source
    FROM derive_run_facts f
    JOIN derive_run_budgets b ON b.run_id = f.run_id
    LEFT JOIN counted n ON n.run_id = f.run_id
    LEFT JOIN derive_run_cost c ON c.run_id = f.run_id
)
SELECT m.run_id, m.time_refused_steps,
       m.tokens, m.input_tokens, m.cache_read_tokens, m.cache_write_tokens, m.output_tokens,
       m.reasoning_tokens, m.cost_nano,
       m.unpriced_spans = 0 AND m.unmetered_billable_steps = 0 AS cost_complete,
       m.unpriced_steps, m.unmetered_steps, m.unmetered_billable_steps, m.unpriced_models,
       m.unattributed_cost_nano, m.unattributed_tokens, m.reported_total_nano,
       m.exhausted_by,
       m.usd_budget_nano, m.usd_budget_source, m.token_budget, m.token_budget_source,
       m.cost_nano / nullif(m.usd_budget_nano, 0) AS cost_utilisation,
       m.tokens / nullif(m.token_budget, 0) AS token_utilisation,
       -- §11.5: a stated outcome naming the budget, spending it, or a refusal naming it; a
       -- run exhausted so counts even when its budget is unknown (enforced elsewhere)
       CASE WHEN m.usd_budget_nano IS NOT NULL
                THEN (m.stated_exhausted AND coalesce(m.exhausted_by = 'usd', false))
                     OR m.cost_nano >= m.usd_budget_nano OR m.refused_usd
            WHEN (m.stated_exhausted AND coalesce(m.exhausted_by = 'usd', false))
                 OR m.refused_usd THEN true
       END AS usd_exhausted,
       CASE WHEN m.token_budget IS NOT NULL
                THEN (m.stated_exhausted AND coalesce(m.exhausted_by = 'tokens', false))
                     OR m.tokens >= m.token_budget OR m.refused_tokens
            WHEN (m.stated_exhausted AND coalesce(m.exhausted_by = 'tokens', false))
                 OR m.refused_tokens
                THEN true
       END AS tokens_exhausted,
       cc.span_id AS cost_culprit_span_id, cc.step_key AS cost_culprit_key,
       cc.number::INTEGER AS cost_culprit_step, cc.consumption_usd_nano AS cost_culprit_nano,
       cc.consumption_usd_nano / nullif(m.usd_budget_nano, 0) AS cost_culprit_share,
       m.usd_crossing.step AS cost_crosser_span_id, ux.step_key AS cost_crosser_key,
       ux.number::INTEGER AS cost_crosser_step,
       CAST(CASE WHEN m.usd_crossing."before" > 9223372036854775807 THEN 9223372036854775807
                 ELSE m.usd_crossing."before" END AS BIGINT)
           AS cost_before_crossing_nano,
       CAST(CASE WHEN m.usd_crossing."after" > 9223372036854775807 THEN 9223372036854775807
                 ELSE m.usd_crossing."after" END AS BIGINT) AS cost_after_crossing_nano,
       CASE WHEN m.usd_budget_nano IS NOT NULL
            THEN greatest(0, m.cost_nano - m.usd_budget_nano) END AS overrun_usd_nano,
       tc.span_id AS token_culprit_span_id, tc.step_key AS token_culprit_key,
       tc.number::INTEGER AS token_culprit_step, tc.consumption_tokens AS token_culprit_tokens,
       tc.consumption_tokens / nullif(m.token_budget, 0) AS token_culprit_share,
       m.token_crossing.step AS token_crosser_span_id, tx.step_key AS token_crosser_key,
       tx.number::INTEGER AS token_crosser_step,
       m.token_crossing."before"::BIGINT AS tokens_before_crossing,
       m.token_crossing."after"::BIGINT AS tokens_after_crossing,
       CASE WHEN m.token_budget IS NOT NULL
            THEN greatest(0, m.tokens - m.token_budget) END AS overrun_tokens
FROM measured m
LEFT JOIN cost_culprit cc ON cc.run_id = m.run_id
LEFT JOIN token_culprit tc ON tc.run_id = m.run_id
LEFT JOIN top ux ON ux.run_id = m.run_id AND ux.span_id = m.usd_crossing.step
LEFT JOIN top tx ON tx.run_id = m.run_id AND tx.span_id = m.token_crossing.step;

-- The traces' metered spans, replaced (those of traces derived before: the gate
-- `seen_before`; after derive_budgets.sql, always).
-- when: seen_before
DELETE FROM metered_spans WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
-- when: usage
INSERT INTO metered_spans BY NAME SELECT * FROM derive_costed;

DROP TABLE derive_run_budgets;
DROP TABLE derive_run_cost;
DROP TABLE derive_step_cost;
DROP TABLE derive_metered;
-- when: usage
DROP TABLE derive_costed;
