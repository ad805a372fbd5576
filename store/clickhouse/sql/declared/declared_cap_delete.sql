-- name: declared_cap_delete
-- Remove the declared cap of a step key.
DELETE FROM budgetscope_declared_step_caps WHERE step_key = {step_key:String}
