-- name: prices_meta_set
-- Record a value of budgetscope_meta (ClickHouse has no upsert: the old row deleted first).
DELETE FROM budgetscope_meta WHERE key = {key:String};
INSERT INTO budgetscope_meta (key, value) VALUES ({key:String}, {value:String});
