-- name: prices_forget_matches
-- The bundled table changed version: forget every match, so that the next build matches each pair again (as store/prices/sql/bundled_version_changed.sql; the build re-prices every run).
TRUNCATE TABLE budgetscope_price_matches;
TRUNCATE TABLE budgetscope_bundled_conditions;
TRUNCATE TABLE budgetscope_bundled_prices;
