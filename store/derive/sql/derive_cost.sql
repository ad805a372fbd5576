-- name: derive_cost
-- Tokens and dollars of the metered spans, steps and runs (docs/metrics.md §11.3-§11.4): each span's cost, and their sums by step and by run.
--
-- Reads derive_metered (the carriers, derive_usage.sql; or, when only prices or declarations
-- changed, the stored metered_spans, derive_budgets.sql) and the prices
-- (store/file/schema/prices.sql); replaces the traces' metered_spans and leaves
-- derive_step_cost (trace_id, span_id) and derive_run_cost (run_id) for derive_measure.sql,
-- which applies B$ and Btok (§11.5-§11.7) as it stores the runs and steps it replaces.
-- Money is integer nano-dollars: a priced span's cost is Σ count × rate (pico-dollars per
-- million tokens) / 10^9 in HUGEINT, rounded half to even once; sums of costs saturate at
-- BIGINT's largest (9.2 billion dollars) rather than fail a derivation.
--
-- Each statement has a fixed cost (planning one of these takes milliseconds), paid every turn,
-- and each temp table a cost per row and column: what only spans with usage need runs under the
-- gate `usage`, prices are chosen once per (model, provider) pair of the turn rather than span
-- by span, the rarer paths (prices set by a team, bundled prices that change with the date,
-- the time of day or the call's input) under a gate of their own, and a span's cost is computed
-- where it is read (derive_costed, a view) rather than kept in a table.

-- gates: without usage, not the rare path below
-- when: no_usage
SELECT false AS span_prices;

-- The prices of the turn's (model, provider) pairs (§11.3): the bundled model each was matched
-- to, with its rates when it has one price at all times and no tiers (most models; `price_ref`
-- NULL otherwise), and whether its spans are to be priced span by span (`per_span`: a price
-- set by a team may apply to its model, or its bundled price depends on the date, the time of
-- day or the call's input). Only the spans to price count: metered, without a reported cost
-- they take (a reported 0 on a span with tokens is a stream that reported none), with input
-- and output counts (a total alone cannot be priced). Rates are pico-dollars per million
-- tokens (per million calls: `request_rate`), one column each.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_pair_prices AS
WITH pairs AS (
    SELECT DISTINCT model_ref, coalesce(provider, '') AS provider, lower(model) AS model_key
    FROM derive_metered
    WHERE is_metered AND input_tokens IS NOT NULL AND model_ref IS NOT NULL
      AND NOT coalesce(reported_nano IS NOT NULL AND NOT (reported_nano = 0 AND tokens > 0),
                       false)
), flat AS (
    SELECT c.bundled_ref,
           max(p.rate) FILTER (WHERE p.quantity = 'input') AS input_rate,
           max(p.rate) FILTER (WHERE p.quantity = 'cache_read') AS cache_read_rate,
           max(p.rate) FILTER (WHERE p.quantity = 'cache_write') AS cache_write_rate,
           max(p.rate) FILTER (WHERE p.quantity = 'output') AS output_rate,
           max(p.rate) FILTER (WHERE p.quantity = 'reasoning') AS reasoning_rate,
           max(p.rate) FILTER (WHERE p.quantity = 'request') AS request_rate,
           'bundled ' || c.bundled_ref || ' 0' AS price_ref
    FROM bundled_conditions c
    LEFT JOIN bundled_prices p ON p.bundled_ref = c.bundled_ref
    WHERE c.bundled_ref IN (SELECT bundled_ref FROM price_matches
                            SEMI JOIN pairs USING (model_ref, provider))
    GROUP BY c.bundled_ref
    -- one condition (min = max: a DISTINCT count plans an aggregate of its own, ~1 ms a turn)
    HAVING min(c.cond) = max(c.cond) AND bool_and(c.start_ns IS NULL AND c.tod_start_ns IS NULL)
       AND coalesce(max(p.tier_start), -1) < 0
)
SELECT p.model_ref, p.provider, x.bundled_ref, f.* EXCLUDE (bundled_ref),
       (x.bundled_ref IS NOT NULL AND f.bundled_ref IS NULL) OR EXISTS (
           SELECT 1 FROM price_overrides o
           WHERE (o.model_pattern = p.model_key
                  OR (ends_with(o.model_pattern, '*')
                      AND starts_with(p.model_key, left(o.model_pattern, -1))))
             AND (o.provider = '' OR o.provider = p.provider)) AS per_span
FROM pairs p
LEFT JOIN price_matches x ON x.model_ref = p.model_ref AND x.provider = p.provider
LEFT JOIN flat f ON f.bundled_ref = x.bundled_ref;

-- gates: spans to price one by one (the rare path below)
-- when: usage
SELECT coalesce(bool_or(per_span), false) AS span_prices FROM derive_pair_prices;

-- The rest of §11.3's choice, for the spans of those pairs: the `prices set` entry that
-- matches the model (exact before prefix, the longer prefix first; a provider before any; the
-- latest --from at or before the span's start), else the bundled model's conditional price in
-- force at the span's start (genai-prices' rule: the last in force, else the first) and, per
-- quantity, the rate of the tier of the call's own input (cache included). A span of a pair
-- with one bundled price whose override does not apply yet keeps the pair's rates.
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_span_prices (
    trace_id VARCHAR, span_id VARCHAR, input_rate BIGINT, cache_read_rate BIGINT,
    cache_write_rate BIGINT, output_rate BIGINT, reasoning_rate BIGINT, request_rate BIGINT,
    price_ref VARCHAR, source VARCHAR
);
-- when: span_prices
INSERT INTO derive_span_prices
WITH priced AS (
    SELECT m.trace_id, m.span_id, lower(m.model) AS model_key, m.provider, m.start_ns,
           m.input_tokens, p.bundled_ref, p.price_ref
    FROM derive_metered m
    JOIN derive_pair_prices p ON p.model_ref = m.model_ref
                             AND p.provider = coalesce(m.provider, '')
    WHERE p.per_span AND m.is_metered AND m.input_tokens IS NOT NULL
      AND NOT coalesce(m.reported_nano IS NOT NULL
                       AND NOT (m.reported_nano = 0 AND m.tokens > 0), false)
), override AS (
    SELECT r.trace_id, r.span_id,
           arg_max({'input': o.input_rate, 'cache_read': o.cache_read_rate,
                    'cache_write': o.cache_write_rate, 'output': o.output_rate,
                    'reasoning': NULL::BIGINT, 'request': NULL::BIGINT,
                    'ref': 'override ' || o.model_pattern || ' ' || o.provider || ' '
                           || coalesce(o.from_ns::VARCHAR, '')},
                   (NOT ends_with(o.model_pattern, '*'), length(o.model_pattern),
                    o.provider <> '', coalesce(o.from_ns, -9223372036854775808))) AS rates
    FROM priced r
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
    FROM priced r
    JOIN bundled_conditions c ON c.bundled_ref = r.bundled_ref
    WHERE r.price_ref IS NULL
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
), chosen AS (
    SELECT trace_id, span_id, rates, 'override' AS source FROM override
    UNION ALL
    SELECT b.trace_id, b.span_id, b.rates, 'bundled' FROM bundled b
    ANTI JOIN override o ON o.trace_id = b.trace_id AND o.span_id = b.span_id
)
SELECT trace_id, span_id, rates.input, rates.cache_read, rates.cache_write, rates.output,
       rates.reasoning, rates.request, rates.ref, source
FROM chosen;

-- Each carrier's cost: reported, else priced (fresh input, cache reads and writes, output and
-- a per-call price at their rates; a missing cache rate charges the input rate, a missing
-- reasoning rate the output rate), else unknown. An aggregate is never priced: it keeps its
-- reported cost. The rates are a span's own where it has them, else its pair's. Kept by the
-- carrier's row number in derive_metered (`row`, its rowid, which nothing changes after it is
-- made): a table of the carriers with their costs would cost ~3x more to write than this one
-- and the joins on it (derive_costed below).
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_costs AS
WITH rated AS (
    SELECT m.rowid AS row, m.reported_nano,
           CASE WHEN m.reported_nano IS NOT NULL
                     AND NOT (m.reported_nano = 0 AND m.tokens > 0) THEN 'reported'
                WHEN m.is_metered AND m.input_tokens IS NOT NULL
                     AND coalesce(s.price_ref, p.price_ref) IS NOT NULL
                    THEN coalesce(s.source, 'bundled')
                WHEN m.is_metered THEN 'unpriced' END AS cost_source,
           coalesce(s.price_ref, p.price_ref) AS rates_ref,
           m.fresh_input_tokens, m.cache_read_tokens, m.cache_write_tokens, m.output_tokens,
           m.reasoning_tokens,
           CASE WHEN s.price_ref IS NULL THEN p.input_rate ELSE s.input_rate END AS input_rate,
           CASE WHEN s.price_ref IS NULL THEN p.cache_read_rate ELSE s.cache_read_rate END
               AS cache_read_rate,
           CASE WHEN s.price_ref IS NULL THEN p.cache_write_rate ELSE s.cache_write_rate END
               AS cache_write_rate,
           CASE WHEN s.price_ref IS NULL THEN p.output_rate ELSE s.output_rate END
               AS output_rate,
           CASE WHEN s.price_ref IS NULL THEN p.reasoning_rate ELSE s.reasoning_rate END
               AS reasoning_rate,
           CASE WHEN s.price_ref IS NULL THEN p.request_rate ELSE s.request_rate END
               AS request_rate
    FROM derive_metered m
    LEFT JOIN derive_pair_prices p ON p.model_ref = m.model_ref
                                  AND p.provider = coalesce(m.provider, '')
    LEFT JOIN derive_span_prices s ON s.trace_id = m.trace_id AND s.span_id = m.span_id
), priced AS MATERIALIZED (
    -- materialized: the rounding below reads priced_raw six times, and DuckDB would compute
    -- the sum (and the rates above) again for each (~6 µs a span)
    SELECT row, reported_nano, cost_source,
           CASE WHEN cost_source IN ('override', 'bundled') THEN rates_ref END AS price_ref,
           CASE WHEN cost_source IN ('override', 'bundled') THEN
               fresh_input_tokens * coalesce(input_rate, 0)::HUGEINT
               + cache_read_tokens * coalesce(cache_read_rate, input_rate, 0)::HUGEINT
               + cache_write_tokens * coalesce(cache_write_rate, input_rate, 0)::HUGEINT
               + CASE WHEN reasoning_rate IS NULL
                      THEN output_tokens * coalesce(output_rate, 0)::HUGEINT
                      ELSE (output_tokens - reasoning_tokens) * coalesce(output_rate, 0)::HUGEINT
                           + reasoning_tokens * reasoning_rate::HUGEINT END
               + coalesce(request_rate, 0)::HUGEINT END AS priced_raw
    FROM rated
), small AS (
    -- 128-bit arithmetic costs ~30x the 64-bit one: the rounding is done in BIGINT where the
    -- sum fits one (nearly always)
    SELECT *, CASE WHEN priced_raw <= 9223372036854775807 THEN priced_raw::BIGINT END
                  AS priced_bigint
    FROM priced
)
SELECT row,
       CASE WHEN cost_source = 'reported' THEN reported_nano
            WHEN priced_bigint IS NOT NULL THEN /*@priced_nano_bigint*/
            WHEN priced_raw IS NOT NULL
                THEN CAST(least(/*@priced_nano*/, 9223372036854775807) AS BIGINT) END
           AS cost_nano,
       cost_source, price_ref
FROM small;

-- The carriers with their costs, as metered_spans holds them.
-- when: usage
CREATE OR REPLACE TEMP VIEW derive_costed AS
SELECT m.*, c.cost_nano, c.cost_source, c.price_ref
FROM derive_metered m JOIN derive_costs c ON c.row = m.rowid;

-- The traces' metered spans, replaced (those of traces derived before: the gate
-- `seen_before`; after derive_budgets.sql, always).
-- when: seen_before
DELETE FROM metered_spans WHERE trace_id IN (SELECT trace_id FROM derive_seen_before);
-- when: usage
INSERT INTO metered_spans BY NAME SELECT * FROM derive_costed;

-- Each step's tokens and known cost: the metered spans that are the step or lie under it (a
-- model step with one is not unmetered); and each top-level step's own: the metered spans that
-- belong to it (§11.6; a tool lifted out of a model step belongs to its own top-level step),
-- which are among those under it (a span's top-level step is one of its steps above).
-- when: usage
CREATE OR REPLACE TEMP TABLE derive_step_cost AS
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
           AS cost_source,
       least(coalesce(sum(cost_nano) FILTER (WHERE span_id = top_step_id), 0),
             9223372036854775807)::BIGINT AS consumption_usd_nano,
       coalesce(sum(tokens) FILTER (WHERE span_id = top_step_id), 0)::BIGINT
           AS consumption_tokens
FROM (SELECT trace_id, unnest(steps_above) AS span_id, top_step_id, input_tokens,
             cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, tokens,
             cost_nano, cost_source
      FROM derive_costed WHERE is_metered)
GROUP BY trace_id, span_id;

-- Each run's sums (§11.4: over its metered spans, after the deadline too), its unpriced
-- models and the top-level steps with an unpriced span, what no top-level step holds, and the
-- outermost aggregate's reported cost.
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
       -- the distinct steps of the unpriced spans only (a DISTINCT count with a FILTER hashed
       -- every span of the turn: ~3 ms a turn of 40,960 GenAI spans)
       coalesce(len(list_distinct(list(top_step_id) FILTER (WHERE cost_source = 'unpriced'))), 0)
           AS unpriced_steps,
       list_sort(list_distinct(list(model) FILTER (WHERE cost_source = 'unpriced')))
           AS unpriced_models,
       least(coalesce(sum(cost_nano) FILTER (WHERE is_metered AND top_step_id IS NULL), 0),
             9223372036854775807)::BIGINT AS unattributed_cost_nano,
       coalesce(sum(tokens) FILTER (WHERE is_metered AND top_step_id IS NULL), 0)::BIGINT
           AS unattributed_tokens,
       arg_min(cost_nano, (depth, start_ns, span_id))
           FILTER (WHERE NOT is_metered AND cost_source = 'reported') AS reported_total_nano
FROM derive_costed GROUP BY run_id;

-- when: no_usage
CREATE OR REPLACE TEMP TABLE derive_step_cost (
    trace_id VARCHAR, span_id VARCHAR, input_tokens BIGINT, cache_read_tokens BIGINT,
    cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, tokens BIGINT,
    cost_nano BIGINT, unpriced_under BIGINT, cost_source VARCHAR,
    consumption_usd_nano BIGINT, consumption_tokens BIGINT
);
-- when: no_usage
CREATE OR REPLACE TEMP TABLE derive_run_cost (
    run_id VARCHAR, tokens BIGINT, input_tokens BIGINT, cache_read_tokens BIGINT,
    cache_write_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT, cost_nano BIGINT,
    unpriced_spans BIGINT, unpriced_steps BIGINT, unpriced_models VARCHAR[],
    unattributed_cost_nano BIGINT, unattributed_tokens BIGINT, reported_total_nano BIGINT
);
