-- name: declared_cap_insert
-- Declare the cap of a step key, after declared_cap_delete removed the previous one.
INSERT INTO budgetscope_declared_step_caps SELECT {step_key:String}, {cap_ms:Int64}, now64(3)
