-- name: 6_to_7
-- Schema 6 to 7 is the token and dollar budgets' (docs/metrics.md §11), made on their own branch:
-- at the merge this file is replaced by theirs. Until then schema 7 adds nothing here, so that
-- a file of schema 6 reaches 8 (7_to_8.sql) on this branch too.
SELECT 1;
