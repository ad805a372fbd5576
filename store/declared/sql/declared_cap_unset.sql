-- name: declared_cap_unset
-- Remove the declared cap of a step key.
DELETE FROM declared_step_caps WHERE step_key = $step_key
