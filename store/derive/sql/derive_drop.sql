-- name: derive_drop
-- Drop the derivation's temp tables, last (store/derive/statements.py runs a span explanation before it).
DROP VIEW derive_walk_spans;
-- derive_spans_read and derive_log_exceptions_read are kept for the connection's next turn
-- (derive_refresh.sql, 0b)
DROP TABLE derive_reading;
DROP TABLE IF EXISTS derive_hulls;  -- made only where a stray is read or stored
DROP TABLE IF EXISTS derive_affected;
DROP TABLE IF EXISTS derive_closure;
DROP TABLE IF EXISTS derive_strays;
DROP TABLE IF EXISTS derive_name_pairs;  -- made only where unnamed model spans are
DROP TABLE derive_stray_joins;
DROP VIEW derive_missing_parents;
DROP TABLE derive_beside;
DROP TABLE derive_run_tree;
DROP TABLE derive_deep_runs;
DROP TABLE derive_rewalked;
DROP TABLE IF EXISTS derive_capped;  -- made only for a capped trace
DROP TABLE IF EXISTS derive_beside_runs;  -- made only where a client span is a step
DROP TABLE IF EXISTS derive_beside_steps;
DROP TABLE derive_demoted;
DROP TABLE derive_rolled;
DROP TABLE derive_step_tree;
DROP TABLE derive_walk;
DROP TABLE derive_spans;
DROP TABLE derive_anchors;
DROP TABLE derive_orphans;
DROP TABLE derive_sibling_twins;
DROP TABLE derive_log_exceptions;
DROP TABLE derive_floor;
DROP TABLE derive_touched;
