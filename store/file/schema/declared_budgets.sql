-- name: declared_budgets
-- declared_budgets and declared_step_caps: budgets a team declares instead of (or before) its
-- agents sending budget.total_ms and budget.allocated_ms (docs/guide.md#declaring-budgets). Written
-- by `budgetscope budgets` (or, while `serve` holds the file, by the server for it); read by the
-- derivation (store/derive/sql/derive_refresh.sql), which resolves each run's budget B as the
-- span's own budget.total_ms, else its agent's declared budget, else the declared default.
-- A change marks the affected traces pending (store/declared/budgets.py), so that past runs'
-- numbers follow it like new ones.

-- One row per agent with a declared budget, and at most one row with scope 'default' (agent
-- '') for every agent without one. Two columns rather than a NULL agent: a key cannot be NULL.
-- Each of the dimensions (time, tokens, dollars per run, dollars per week) is declared and
-- removed on its own (docs/metrics.md §10, §11.5, §11.8; schema 7); a row has at least one.
CREATE TABLE IF NOT EXISTS declared_budgets (
    scope        VARCHAR NOT NULL CHECK (scope IN ('agent', 'default')),
    agent        VARCHAR NOT NULL,  -- the run's agent (runs.agent); '' for the default
    budget_ms    BIGINT CHECK (budget_ms > 0),
    declared_at  TIMESTAMPTZ NOT NULL,
    tokens       BIGINT CHECK (tokens >= 0),             -- Btok
    usd_nano     BIGINT CHECK (usd_nano >= 0),           -- B$, in nano-dollars
    usd_per_week_nano BIGINT CHECK (usd_per_week_nano >= 0),  -- the weekly dollar budget
    PRIMARY KEY (scope, agent)
);

-- One row per step key (`kind:name`, docs/metrics.md §4) with a declared cap: steps of that key
-- without budget.allocated_ms get min(cap, B - (step start - s)) as their allocation
-- (docs/metrics.md §5, docs/guide.md#declaring-budgets). A key no step has yet is allowed: the cap
-- applies once such steps arrive.
CREATE TABLE IF NOT EXISTS declared_step_caps (
    step_key     VARCHAR PRIMARY KEY,
    cap_ms       BIGINT NOT NULL CHECK (cap_ms > 0),
    declared_at  TIMESTAMPTZ NOT NULL
);
