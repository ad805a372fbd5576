-- name: derive_scratch_drop
-- Drop derive_build.sql's scratch and *_next tables; run before a build (a crashed one may have left them) and after it.
DROP TABLE IF EXISTS budgetscope_tmp_log_exceptions;
DROP TABLE IF EXISTS budgetscope_tmp_log_state;
DROP TABLE IF EXISTS budgetscope_tmp_spans;
DROP TABLE IF EXISTS budgetscope_tmp_walk;
DROP TABLE IF EXISTS budgetscope_tmp_runs;
DROP TABLE IF EXISTS budgetscope_tmp_found;
DROP TABLE IF EXISTS budgetscope_tmp_step_tree;
DROP TABLE IF EXISTS budgetscope_tmp_tree;
DROP TABLE IF EXISTS budgetscope_tmp_rolled;
DROP TABLE IF EXISTS budgetscope_tmp_steps;
DROP TABLE IF EXISTS budgetscope_tmp_segments;
DROP TABLE IF EXISTS budgetscope_tmp_consumption;
DROP TABLE IF EXISTS budgetscope_tmp_top;
DROP TABLE IF EXISTS budgetscope_tmp_weighted;
DROP TABLE IF EXISTS budgetscope_tmp_clipped;
DROP TABLE IF EXISTS budgetscope_tmp_blame;
DROP TABLE IF EXISTS budgetscope_runs_next;
DROP TABLE IF EXISTS budgetscope_steps_next;
DROP TABLE IF EXISTS budgetscope_reconcile_links_next;
DROP TABLE IF EXISTS budgetscope_derive_state_next;
