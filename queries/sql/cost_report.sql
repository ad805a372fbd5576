-- name: cost_report
-- One row per run started in [since, until) for the agent filter: its tokens, its dollars and both budgets (docs/metrics.md §11.9 `report cost`).
-- Amounts are the store's integer nano-dollars under the report's `_usd` names;
-- queries/reports.py turns them into exact dollars (queries/money.py), never through a float.
-- The culprit and crosser cells name the step with its number, `#3 model:gpt-4o` (§4's form);
-- a crosser is empty when the budget was not reached, or when the call that reached it lies
-- under no step (§11.6). Undefined cells (no budget in that dimension) are NULL.
SELECT run_id,
       agent,
       strftime(make_timestamp(start_ns // 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS start,
       tokens,
       input_tokens,
       cache_read_tokens,
       cache_write_tokens,
       output_tokens,
       reasoning_tokens,
       cost_nano AS cost_usd,
       cost_complete,
       usd_budget_nano AS usd_budget,
       usd_budget_source,
       cost_utilisation,
       usd_exhausted,
       coalesce('#' || CAST(cost_culprit_step AS VARCHAR) || ' ', '') || cost_culprit_key
           AS cost_culprit,
       cost_culprit_share,
       coalesce('#' || CAST(cost_crosser_step AS VARCHAR) || ' ', '') || cost_crosser_key
           AS cost_crosser,
       overrun_usd_nano AS overrun_usd,
       unattributed_cost_nano AS unattributed_usd,
       token_budget,
       token_budget_source,
       token_utilisation,
       tokens_exhausted,
       coalesce('#' || CAST(token_culprit_step AS VARCHAR) || ' ', '') || token_culprit_key
           AS token_culprit,
       token_culprit_share,
       coalesce('#' || CAST(token_crosser_step AS VARCHAR) || ' ', '') || token_crosser_key
           AS token_crosser,
       overrun_tokens,
       unpriced_steps,
       unmetered_steps,
       reported_total_nano AS reported_total_usd
FROM runs
WHERE /*@run_filter(start_ns)*/
ORDER BY start_ns, run_id;
