-- name: declared_budget_delete
-- Remove the declared budget of (scope, agent): 'agent' with its name, or 'default' with ''.
DELETE FROM budgetscope_declared_budgets
WHERE scope = {scope:String} AND agent = {agent:String}
