-- name: prices_meta_get
-- A value of budgetscope_meta (genai_prices_version: the bundled table the matches came from).
SELECT any(value) AS value FROM budgetscope_meta WHERE key = {key:String}
