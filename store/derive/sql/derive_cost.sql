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
--
-- Each statement has a fixed cost (planning one of these takes milliseconds), paid every turn:
-- what only spans with usage need runs under the gate `usage`, and the rarer paths (prices set
-- by a team, bundled prices that change with the date, the time of day or the call's input;
-- crossings, which need a budget) under gates of their own, so that a turn without usage pays
-- for four plain statements.

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

-- gates: without usage, neither of the rare paths below
-- when: no_usage
SELECT false AS other_prices, false AS budgeted;

-- The metered spans to price (§11.3): without a reported cost they take (a reported 0 on a
-- span with tokens is a stream that reported none), with input and output counts (a total
-- alone cannot be priced), with the rates of their bundled model when it has one price at all
-- times and no tiers (most models: their rates are read once, not span by span).
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_rates AS
WITH flat AS (
    SELECT c.bundled_ref,
           {'input': max(p.rate) FILTER (WHERE p.quantity = 'input'),
            'cache_read': max(p.rate) FILTER (WHERE p.quantity = 'cache_read'),
            'cache_write': max(p.rate) FILTER (WHERE p.quantity = 'cache_write'),
            'output': max(p.rate) FILTER (WHERE p.quantity = 'output'),
            'reasoning': max(p.rate) FILTER (WHERE p.quantity = 'reasoning'),
            'request': max(p.rate) FILTER (WHERE p.quantity = 'request'),
            'ref': 'bundled ' || c.bundled_ref || ' 0'} AS rates
    FROM bundled_conditions c
    LEFT JOIN bundled_prices p ON p.bundled_ref = c.bundled_ref
    GROUP BY c.bundled_ref
    HAVING count(DISTINCT c.cond) = 1 AND bool_and(c.start_ns IS NULL AND c.tod_start_ns IS NULL)
       AND coalesce(max(p.tier_start), -1) < 0
)
SELECT m.trace_id, m.span_id, lower(m.model) AS model_key, m.provider, m.start_ns,
       m.input_tokens, x.bundled_ref, f.rates, 'bundled' AS source
FROM derive_metered m
LEFT JOIN price_matches x ON x.model_ref = m.model_ref AND x.provider = coalesce(m.provider, '')
LEFT JOIN flat f ON f.bundled_ref = x.bundled_ref
WHERE m.is_metered AND m.input_tokens IS NOT NULL
  AND NOT coalesce(m.reported_nano IS NOT NULL AND NOT (m.reported_nano = 0 AND m.tokens > 0),
                   false);

-- gates: a price set by a team, or a bundled model whose price depends on the date, the time
-- of day or the call's input, to choose span by span (the rare path below); a run with a
-- budget in tokens or dollars, whose crossing and culprits are to be found
-- when: usage
SELECT (SELECT count(*) FROM price_overrides) > 0
           OR (SELECT count(*) FROM derive_rates WHERE rates IS NULL AND bundled_ref IS NOT NULL)
              > 0 AS other_prices,
       (SELECT count(*) FROM derive_run_budgets
        WHERE usd_budget_nano IS NOT NULL OR token_budget IS NOT NULL) > 0 AS budgeted;

-- The rest of §11.3's choice, for those spans: the `prices set` entry that matches the model
-- (exact before prefix, the longer prefix first; a provider before any; the latest --from at
-- or before the span's start), else the bundled model's conditional price in force at the
-- span's start (genai-prices' rule: the last in force, else the first) and, per quantity, the
-- rate of the tier of the call's own input (cache included).
-- when: other_prices
UPDATE derive_rates SET rates = chosen.rates, source = chosen.source
FROM (
    WITH override AS (
        SELECT r.trace_id, r.span_id,
               arg_max({'input': o.input_rate, 'cache_read': o.cache_read_rate,
                        'cache_write': o.cache_write_rate, 'output': o.output_rate,
                        'reasoning': NULL::BIGINT, 'request': NULL::BIGINT,
                        'ref': 'override ' || o.model_pattern || ' ' || o.provider || ' '
                               || coalesce(o.from_ns::VARCHAR, '')},
                       (NOT ends_with(o.model_pattern, '*'), length(o.model_pattern),
                        o.provider <> '', coalesce(o.from_ns, -9223372036854775808))) AS rates
        FROM derive_rates r
        JOIN price_overrides o
          ON (o.model_pattern = r.model_key
              OR (ends_with(o.model_pattern, '*')
                  AND starts_with(r.model_key, left(o.model_pattern, -1))))
         AND (o.provider = '' OR o.provider = r.provider)
         AND (o.from_ns IS NULL OR o.from_ns <= r.start_ns)
        GROUP BY ALL
    ), conditions AS (
        SELECT r.trace_id, r.span_id, r.bundled_ref, r.input_tokens,
               coalesce(max(c.cond) FILTER (WHERE
                   (c.start_ns IS NULL AND c.tod_start_ns IS NULL)
                   OR r.start_ns >= c.start_ns
                   OR CASE WHEN c.tod_end_ns < c.tod_start_ns
                           THEN r.start_ns % 86400000000000 >= c.tod_start_ns
                                OR r.start_ns % 86400000000000 < c.tod_end_ns
                           ELSE r.start_ns % 86400000000000 >= c.tod_start_ns
                                AND r.start_ns % 86400000000000 < c.tod_end_ns END), 0) AS cond
        FROM derive_rates r
        JOIN bundled_conditions c ON c.bundled_ref = r.bundled_ref
        WHERE r.rates IS NULL
        GROUP BY ALL
    ), tiered AS (
        SELECT c.trace_id, c.span_id, c.bundled_ref, c.cond, p.quantity,
               arg_max(p.rate, p.tier_start) AS rate
        FROM conditions c
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
        FROM conditions c
        LEFT JOIN tiered t ON t.trace_id = c.trace_id AND t.span_id = c.span_id
        GROUP BY c.trace_id, c.span_id, c.bundled_ref, c.cond
    )
    SELECT trace_id, span_id, rates, 'override' AS source FROM override
    UNION ALL
    SELECT b.trace_id, b.span_id, b.rates, 'bundled' FROM bundled b
    ANTI JOIN override o ON o.trace_id = b.trace_id AND o.span_id = b.span_id
) chosen
WHERE chosen.trace_id = derive_rates.trace_id AND chosen.span_id = derive_rates.span_id;

-- Each carrier's cost: reported, else priced (fresh input, cache reads and writes, output and
-- a per-call price at their rates; a missing cache rate charges the input rate, a missing
-- reasoning rate the output rate), else unknown. An aggregate is never priced: it keeps its
-- reported cost.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_costed AS
WITH rated AS (
    SELECT m.*, r.rates.ref AS price_ref,
           CASE WHEN m.reported_nano IS NOT NULL
                     AND NOT (m.reported_nano = 0 AND m.tokens > 0) THEN 'reported'
                WHEN r.rates IS NOT NULL THEN r.source
                WHEN m.is_metered THEN 'unpriced' END AS cost_source,
           CASE WHEN r.rates IS NOT NULL THEN
               m.fresh_input_tokens * coalesce(r.rates.input, 0)::HUGEINT
               + m.cache_read_tokens * coalesce(r.rates.cache_read, r.rates.input, 0)::HUGEINT
               + m.cache_write_tokens * coalesce(r.rates.cache_write, r.rates.input, 0)::HUGEINT
               + CASE WHEN r.rates.reasoning IS NULL
                      THEN m.output_tokens * coalesce(r.rates.output, 0)::HUGEINT
                      ELSE (m.output_tokens - m.reasoning_tokens)
                               * coalesce(r.rates.output, 0)::HUGEINT
                           + m.reasoning_tokens * r.rates.reasoning::HUGEINT END
               + coalesce(r.rates.request, 0)::HUGEINT END AS priced_raw
    FROM derive_metered m
    LEFT JOIN derive_rates r ON r.trace_id = m.trace_id AND r.span_id = m.span_id
)
SELECT * EXCLUDE (priced_raw, price_ref, cost_source),
       CASE WHEN cost_source = 'reported' THEN reported_nano
            WHEN priced_raw IS NOT NULL
                THEN CAST(least(/*@priced_nano*/, 9223372036854775807) AS BIGINT) END
           AS cost_nano,
       cost_source,
       CASE WHEN cost_source <> 'reported' THEN price_ref END AS price_ref
FROM rated;

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
-- models, what no top-level step holds, and the outermost aggregate's reported cost.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_run_cost AS
SELECT run_id,
       coalesce(sum(tokens) FILTER (WHERE is_metered), 0)::BIGINT AS tokens,
       coalesce(sum(input_tokens) FILTER (WHERE is_metered), 0)::BIGINT AS input_tokens,
       coalesce(sum(cache_read_tokens) FILTER (WHERE is_metered), 0)::BIGINT
           AS cache_read_tokens,
       coalesce(sum(cache_write_tokens) FILTER (WHERE is_metered), 0)::BIGINT
           AS cache_write_tokens,
       coalesce(sum(output_tokens) FILTER (WHERE is_metered), 0)::BIGINT AS output_tokens,
       coalesce(sum(reasoning_tokens) FILTER (WHERE is_metered), 0)::BIGINT AS reasoning_tokens,
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
           FILTER (WHERE NOT is_metered AND cost_source = 'reported') AS reported_total_nano,
       NULL::STRUCT(step VARCHAR, "before" HUGEINT, "after" HUGEINT) AS usd_crossing,
       NULL::STRUCT(step VARCHAR, "before" HUGEINT, "after" HUGEINT) AS token_crossing
FROM derive_costed GROUP BY run_id;

-- Where each run with a budget crossed it (§11.6): its metered spans by end, start, span id
-- (a call's bill is known when it completes); the first at which the cumulative known cost,
-- or token count, reaches the budget; the spend before and after it.
-- when: budgeted
UPDATE derive_run_cost SET usd_crossing = c.usd, token_crossing = c.tokens
FROM (
    SELECT run_id,
           arg_min({'step': top_step_id, 'before': cost_through - known,
                    'after': cost_through}, position)
               FILTER (WHERE cost_through >= usd_budget_nano) AS usd,
           arg_min({'step': top_step_id, 'before': tokens_through - tokens,
                    'after': tokens_through}, position)
               FILTER (WHERE tokens_through >= token_budget) AS tokens
    FROM (SELECT m.run_id, m.top_step_id, m.tokens, coalesce(m.cost_nano, 0) AS known,
                 b.usd_budget_nano, b.token_budget,
                 sum(coalesce(m.cost_nano, 0)) OVER spent AS cost_through,
                 sum(m.tokens) OVER spent AS tokens_through,
                 (m.end_ns, m.start_ns, m.span_id) AS position
          FROM derive_costed m
          JOIN derive_run_budgets b ON b.run_id = m.run_id
          WHERE m.is_metered AND (b.usd_budget_nano IS NOT NULL OR b.token_budget IS NOT NULL)
          WINDOW spent AS (PARTITION BY m.run_id ORDER BY m.end_ns, m.start_ns, m.span_id
                           ROWS UNBOUNDED PRECEDING))
    GROUP BY run_id
) c
WHERE c.run_id = derive_run_cost.run_id;

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
-- possibly billed, and (a top-level step) no step in it is. Shares are not clipped. The
-- columns from `run_id` on are for the runs' statement below (derive_measure.sql stores the
-- others).
CREATE OR REPLACE TEMP TABLE derive_cost_steps AS
WITH flagged AS (
    SELECT s.*, c.* EXCLUDE (trace_id, span_id),
           s.kind = 'model' AND c.covered IS NULL AS unmetered,
           s.kind = 'model' AND c.covered IS NULL AND s.class IN (/*@billable_classes*/)
               AS possibly_billed
    FROM derive_step_facts s
    LEFT JOIN derive_step_cost c ON c.trace_id = s.trace_id AND c.span_id = s.span_id
)
SELECT f.trace_id, f.span_id,
       f.input_tokens, f.cache_read_tokens, f.cache_write_tokens, f.output_tokens,
       f.reasoning_tokens, f.tokens, f.cost_nano, f.cost_source, f.unmetered, f.possibly_billed,
       CASE WHEN f.is_top_level THEN coalesce(f.consumption_usd_nano, 0) END
           AS consumption_usd_nano,
       CASE WHEN f.is_top_level THEN coalesce(f.consumption_tokens, 0) END
           AS consumption_tokens,
       coalesce(f.unpriced_under, 0) = 0 AND NOT f.possibly_billed
           AND NOT (f.is_top_level AND t.top_step_id IS NOT NULL) AS cost_complete,
       CASE WHEN f.is_top_level THEN coalesce(f.consumption_usd_nano, 0) END
           / nullif(b.usd_budget_nano, 0) AS cost_share,
       CASE WHEN f.is_top_level THEN coalesce(f.consumption_tokens, 0) END
           / nullif(b.token_budget, 0) AS token_share,
       f.run_id, f.top_step_id, f.is_top_level, f.step_key, f.start_ns, f.class, f.refused_by,
       coalesce(f.unpriced_belonging, 0) AS unpriced_belonging
FROM flagged f
JOIN derive_run_budgets b ON b.run_id = f.run_id
LEFT JOIN (SELECT DISTINCT trace_id, top_step_id FROM flagged WHERE possibly_billed) t
       ON t.trace_id = f.trace_id AND t.top_step_id = f.span_id;

-- The runs' columns (§11.4-§11.7), and what §4's time exhaustion reads: the refused steps
-- whose refusal names time, and the budget the stated outcome names.
CREATE OR REPLACE TEMP TABLE derive_cost_runs AS
WITH counted AS (
    SELECT run_id,
           count(*) FILTER (WHERE class = 'refused' AND refused_by = 'time')
               AS time_refused_steps,
           coalesce(bool_or(class = 'refused' AND refused_by = 'usd'), false) AS refused_usd,
           coalesce(bool_or(class = 'refused' AND refused_by = 'tokens'), false)
               AS refused_tokens,
           count(*) FILTER (WHERE unmetered) AS unmetered_steps,
           count(*) FILTER (WHERE possibly_billed) AS unmetered_billable_steps,
           count(*) FILTER (WHERE is_top_level AND unpriced_belonging > 0) AS unpriced_steps
    FROM derive_cost_steps
    GROUP BY run_id
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
                 OR m.refused_tokens THEN true
       END AS tokens_exhausted,
       -- the culprits and the crossers' steps: set below, where there is usage
       NULL::VARCHAR AS cost_culprit_span_id, NULL::VARCHAR AS cost_culprit_key,
       NULL::INTEGER AS cost_culprit_step, NULL::BIGINT AS cost_culprit_nano,
       NULL::DOUBLE AS cost_culprit_share,
       m.usd_crossing.step AS cost_crosser_span_id, NULL::VARCHAR AS cost_crosser_key,
       NULL::INTEGER AS cost_crosser_step,
       CAST(CASE WHEN m.usd_crossing."before" > 9223372036854775807 THEN 9223372036854775807
                 ELSE m.usd_crossing."before" END AS BIGINT) AS cost_before_crossing_nano,
       CAST(CASE WHEN m.usd_crossing."after" > 9223372036854775807 THEN 9223372036854775807
                 ELSE m.usd_crossing."after" END AS BIGINT) AS cost_after_crossing_nano,
       CASE WHEN m.usd_budget_nano IS NOT NULL
            THEN greatest(0, m.cost_nano - m.usd_budget_nano) END AS overrun_usd_nano,
       NULL::VARCHAR AS token_culprit_span_id, NULL::VARCHAR AS token_culprit_key,
       NULL::INTEGER AS token_culprit_step, NULL::BIGINT AS token_culprit_tokens,
       NULL::DOUBLE AS token_culprit_share,
       m.token_crossing.step AS token_crosser_span_id, NULL::VARCHAR AS token_crosser_key,
       NULL::INTEGER AS token_crosser_step,
       m.token_crossing."before"::BIGINT AS tokens_before_crossing,
       m.token_crossing."after"::BIGINT AS tokens_after_crossing,
       CASE WHEN m.token_budget IS NOT NULL
            THEN greatest(0, m.tokens - m.token_budget) END AS overrun_tokens
FROM measured m;

-- The cost and token culprits of the runs with that budget (§11.6: the top-level step with the
-- largest consumption; ties: the earliest start) and the steps the runs name, numbered as §4
-- numbers them (the rank of their start among the run's top-level steps, from 1; ties: the
-- smaller span id), with the crossers' keys: only where a run has a budget in tokens or
-- dollars and some span carries usage.
-- when: budgeted
UPDATE derive_cost_runs SET
    cost_culprit_span_id = n.cost_culprit.span_id, cost_culprit_key = n.cost_culprit.key,
    cost_culprit_nano = n.cost_culprit.spent,
    cost_culprit_share = n.cost_culprit.spent / nullif(derive_cost_runs.usd_budget_nano, 0),
    token_culprit_span_id = n.token_culprit.span_id, token_culprit_key = n.token_culprit.key,
    token_culprit_tokens = n.token_culprit.spent,
    token_culprit_share = n.token_culprit.spent / nullif(derive_cost_runs.token_budget, 0),
    cost_culprit_step = CASE WHEN n.cost_culprit IS NOT NULL THEN 1 + n.before_cost_culprit END,
    token_culprit_step = CASE WHEN n.token_culprit IS NOT NULL
                              THEN 1 + n.before_token_culprit END,
    cost_crosser_step = CASE WHEN n.usd_start IS NOT NULL THEN 1 + n.before_cost_crosser END,
    token_crosser_step = CASE WHEN n.token_start IS NOT NULL
                              THEN 1 + n.before_token_crosser END,
    cost_crosser_key = n.cost_crosser_key, token_crosser_key = n.token_crosser_key
FROM (
    SELECT c.*,
           count(*) FILTER (WHERE (t.start_ns, t.span_id)
                            < (c.cost_culprit.start_ns, c.cost_culprit.span_id))
               AS before_cost_culprit,
           count(*) FILTER (WHERE (t.start_ns, t.span_id)
                            < (c.token_culprit.start_ns, c.token_culprit.span_id))
               AS before_token_culprit,
           count(*) FILTER (WHERE (t.start_ns, t.span_id) < (c.usd_start, c.usd_step))
               AS before_cost_crosser,
           count(*) FILTER (WHERE (t.start_ns, t.span_id) < (c.token_start, c.token_step))
               AS before_token_crosser
    FROM (
        SELECT r.run_id, r.cost_crosser_span_id AS usd_step,
               r.token_crosser_span_id AS token_step,
               arg_min({'span_id': s.span_id, 'key': s.step_key, 'start_ns': s.start_ns,
                        'spent': s.consumption_usd_nano},
                       (-s.consumption_usd_nano, s.start_ns, s.span_id))
                   FILTER (WHERE s.consumption_usd_nano > 0 AND r.usd_budget_nano IS NOT NULL)
                   AS cost_culprit,
               arg_min({'span_id': s.span_id, 'key': s.step_key, 'start_ns': s.start_ns,
                        'spent': s.consumption_tokens},
                       (-s.consumption_tokens, s.start_ns, s.span_id))
                   FILTER (WHERE s.consumption_tokens > 0 AND r.token_budget IS NOT NULL)
                   AS token_culprit,
               any_value(s.step_key) FILTER (WHERE s.span_id = r.cost_crosser_span_id)
                   AS cost_crosser_key,
               any_value(s.start_ns) FILTER (WHERE s.span_id = r.cost_crosser_span_id)
                   AS usd_start,
               any_value(s.step_key) FILTER (WHERE s.span_id = r.token_crosser_span_id)
                   AS token_crosser_key,
               any_value(s.start_ns) FILTER (WHERE s.span_id = r.token_crosser_span_id)
                   AS token_start
        FROM derive_cost_runs r
        JOIN derive_cost_steps s ON s.run_id = r.run_id AND s.is_top_level
        WHERE r.usd_budget_nano IS NOT NULL OR r.token_budget IS NOT NULL
        GROUP BY r.run_id, r.cost_crosser_span_id, r.token_crosser_span_id
    ) c
    JOIN derive_cost_steps t ON t.run_id = c.run_id AND t.is_top_level
    GROUP BY ALL
) n
WHERE n.run_id = derive_cost_runs.run_id;

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
-- when: usage
DROP TABLE derive_rates;
