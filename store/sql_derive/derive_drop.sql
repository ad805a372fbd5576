-- name: derive_drop
-- Drop the derivation's temp tables, last (store/derive.py runs a span explanation before it).
DROP VIEW derive_walk_spans;
DROP TABLE derive_beside;
DROP TABLE derive_beside_runs;
DROP TABLE derive_beside_steps;
DROP TABLE derive_demoted;
DROP TABLE derive_rolled;
DROP TABLE derive_step_tree;
DROP TABLE derive_walk;
DROP TABLE derive_spans;
DROP TABLE derive_anchors;
DROP TABLE derive_parents;
DROP TABLE derive_sibling_twins;
DROP TABLE derive_spans_read;
DROP TABLE derive_log_exceptions;
DROP TABLE derive_floor;
DROP TABLE derive_touched;
