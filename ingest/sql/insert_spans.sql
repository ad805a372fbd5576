-- name: insert_spans
-- Stores the batch registered as `incoming_spans`, typing on the way in the attributes SPEC.md
-- computes with. Typing here rather than in Python: DuckDB parses each attributes JSON once
-- (one json_extract_string with a list of paths), in C++ and without holding the GIL, so the
-- receivers' Python threads keep decoding meanwhile. A span already stored is ignored.
INSERT OR IGNORE INTO spans BY NAME
SELECT
    * EXCLUDE (a),
    budgetscope_int(a[1])     AS budget_total_ms,
    budgetscope_int(a[2])     AS budget_deadline_unix_ms,
    budgetscope_int(a[3])     AS budget_reserve_ms,
    budgetscope_label(a[4])   AS budget_run_outcome,
    budgetscope_label(a[5])   AS budget_step_kind,
    a[6]                      AS budget_step_name,
    budgetscope_int(a[7])     AS budget_remaining_ms,
    budgetscope_int(a[8])     AS budget_cap_ms,
    budgetscope_int(a[9])     AS budget_allocated_ms,
    budgetscope_label(a[10])  AS budget_outcome,
    budgetscope_label(a[11])  AS budget_side_effect,
    budgetscope_label(a[12])  AS budget_effect_status,
    a[13]                     AS budget_idempotency_key,
    budgetscope_int(a[14])    AS budget_attempt,
    budgetscope_bool(a[15])   AS budget_hedge,
    budgetscope_label(a[16])  AS budget_reconcile_result,
    budgetscope_int(a[17])    AS budget_cleanup_ms,
    budgetscope_label(a[18])  AS gen_ai_operation_name,
    a[19]                     AS gen_ai_tool_name,
    a[20]                     AS gen_ai_request_model,
    a[21]                     AS gen_ai_agent_name,
    budgetscope_int(a[22])    AS http_response_status_code,
    a[23]                     AS error_type,
    coalesce(budgetscope_grpc_code(a[24]), budgetscope_grpc_code(a[25]),
             budgetscope_grpc_code(a[26])) AS grpc_status_code,
    now()                     AS received_at
FROM (
    SELECT *, json_extract_string(attributes, [
        '$."budget.total_ms"',           -- 1
        '$."budget.deadline_unix_ms"',   -- 2
        '$."budget.reserve_ms"',         -- 3
        '$."budget.run.outcome"',        -- 4
        '$."budget.step.kind"',          -- 5
        '$."budget.step.name"',          -- 6
        '$."budget.remaining_ms"',       -- 7
        '$."budget.cap_ms"',             -- 8
        '$."budget.allocated_ms"',       -- 9
        '$."budget.outcome"',            -- 10
        '$."budget.side_effect"',        -- 11
        '$."budget.effect_status"',      -- 12
        '$."budget.idempotency_key"',    -- 13
        '$."budget.attempt"',            -- 14
        '$."budget.hedge"',              -- 15
        '$."budget.reconcile.result"',   -- 16
        '$."budget.cleanup_ms"',         -- 17
        '$."gen_ai.operation.name"',     -- 18
        '$."gen_ai.tool.name"',          -- 19
        '$."gen_ai.request.model"',      -- 20
        '$."gen_ai.agent.name"',         -- 21
        '$."http.response.status_code"', -- 22
        '$."error.type"',                -- 23
        -- SPEC §3 rule 3: the gRPC status under its three names, in the order they are trusted.
        '$."rpc.grpc.status_code"',      -- 24
        '$."rpc.response.status_code"',  -- 25
        '$."rpc.status_code"'            -- 26
    ]) AS a
    FROM incoming_spans
)
