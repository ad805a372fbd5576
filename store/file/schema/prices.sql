-- name: prices
-- Model prices (docs/metrics.md §11.3; schema 7). A metered span without a reported cost is
-- priced in SQL (store/derive/sql/derive_cost.sql) from these tables: the entry a team set with
-- `budgetscope prices set`, else the bundled table (genai-prices, shipped with budgetscope,
-- never fetched), as of the span's start. Rates are integer pico-dollars per million tokens
-- (1 USD/Mtok = 10^12), so that a span's cost in nano-dollars is Σ count × rate / 10^9,
-- exact in 128-bit integers and rounded half to even once.

-- price_overrides: the prices a team declares (store/prices/overrides.py). A model pattern
-- with a trailing `*` matches a prefix (fine-tuned ids); provider '' matches any; from_ns is
-- the UTC midnight a dated entry starts at (NULL: from the beginning). One entry per
-- (model_pattern, provider, from_ns), which the code keeps (a key cannot hold a NULL).
-- Patterns and providers are stored lower-cased and compared with lower-cased names.
CREATE TABLE IF NOT EXISTS price_overrides (
    model_pattern    VARCHAR NOT NULL,
    provider         VARCHAR NOT NULL,
    from_ns          BIGINT,
    input_rate       BIGINT NOT NULL CHECK (input_rate >= 0),
    output_rate      BIGINT NOT NULL CHECK (output_rate >= 0),
    cache_read_rate  BIGINT CHECK (cache_read_rate >= 0),   -- NULL: at the input rate
    cache_write_rate BIGINT CHECK (cache_write_rate >= 0),  -- NULL: at the input rate
    declared_at      TIMESTAMPTZ NOT NULL
);

-- price_matches: each (model, provider) pair seen on a metered span, matched once to the
-- bundled table through genai-prices' own lookup (store/prices/bundled.py). bundled_ref NULL:
-- the table has no such model. Cleared when the bundled table's version changes
-- (budgetscope_meta 'genai_prices_version'), so that every pair is matched again.
CREATE TABLE IF NOT EXISTS price_matches (
    model_ref        VARCHAR NOT NULL,  -- the model as spans name it
    provider         VARCHAR NOT NULL,  -- normalised (docs/metrics.md §11.3); '' when none
    bundled_ref      VARCHAR,           -- the matched provider/model id of genai-prices
    matched_at       TIMESTAMPTZ NOT NULL
);

-- bundled_conditions and bundled_prices: a matched model's prices as genai-prices holds them.
-- A model has one or more conditional prices (cond 0, 1, ... in genai-prices' order), each
-- from a date on (start_ns, that UTC midnight) or during a time of day (tod_start_ns up to
-- tod_end_ns, nanoseconds after UTC midnight; wrapping past midnight when end < start);
-- the last one in force at the span's start applies, else the first. Each quantity (input,
-- cache_read, cache_write, output, reasoning; request: per call) has a rate per tier: the
-- tier with the largest tier_start below the call's input tokens (cache included), -1 the base.
CREATE TABLE IF NOT EXISTS bundled_conditions (
    bundled_ref      VARCHAR NOT NULL,
    cond             INTEGER NOT NULL,
    start_ns         BIGINT,
    tod_start_ns     BIGINT,
    tod_end_ns       BIGINT
);
CREATE TABLE IF NOT EXISTS bundled_prices (
    bundled_ref      VARCHAR NOT NULL,
    cond             INTEGER NOT NULL,
    quantity         VARCHAR NOT NULL,
    tier_start       BIGINT NOT NULL,
    rate             BIGINT NOT NULL
);
