-- name: meta
-- meta: facts about the database file itself.
-- schema_version lets a newer budgetscope refuse (or migrate) a file written by an older one
-- instead of silently misreading it.
CREATE TABLE IF NOT EXISTS budgetscope_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
