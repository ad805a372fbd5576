-- name: step_keys
-- Every step key stored, all time: what `report runs --culprit/--holder/--step` may name (filters unused).
SELECT DISTINCT step_key FROM steps ORDER BY step_key;
