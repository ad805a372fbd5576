-- name: declared_budget_insert
-- Declare the budget of (scope, agent), after declared_budget_delete removed the previous one.
INSERT INTO budgetscope_declared_budgets
SELECT {scope:String}, {agent:String}, {budget_ms:Int64}, now64(3)
