-- name: prices_tables
-- The prices on ClickHouse (as the DuckDB schema's store/file/schema/prices.sql): the prices a team sets, the bundled table's rows matched to the models seen, and its version; created when missing.
--
-- Rates are integer pico-dollars per million tokens (per million calls for `request`); see
-- store/file/schema/prices.sql for what each column means. store/clickhouse/prices.py keeps
-- them; derive_cost.sql prices the metered spans from them.
CREATE TABLE IF NOT EXISTS budgetscope_price_overrides (
    model_pattern String, provider String, from_ns Nullable(Int64), input_rate Int64,
    output_rate Int64, cache_read_rate Nullable(Int64), cache_write_rate Nullable(Int64),
    declared_at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY (model_pattern, provider);
CREATE TABLE IF NOT EXISTS budgetscope_price_matches (
    model_ref String, provider String, bundled_ref Nullable(String),
    matched_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = MergeTree ORDER BY (model_ref, provider);
CREATE TABLE IF NOT EXISTS budgetscope_bundled_conditions (
    bundled_ref String, cond Int32, start_ns Nullable(Int64), tod_start_ns Nullable(Int64),
    tod_end_ns Nullable(Int64)
) ENGINE = MergeTree ORDER BY (bundled_ref, cond);
CREATE TABLE IF NOT EXISTS budgetscope_bundled_prices (
    bundled_ref String, cond Int32, quantity String, tier_start Int64, rate Int64
) ENGINE = MergeTree ORDER BY (bundled_ref, cond, quantity, tier_start);
CREATE TABLE IF NOT EXISTS budgetscope_meta (
    key String, value String
) ENGINE = MergeTree ORDER BY key;
