-- name: derive_state
-- Whether the derived tables are current: otel_traces and the declarations now against what the last derive_build read.
SELECT (SELECT count() FROM otel_traces) AS spans,
       (SELECT max(Timestamp) FROM otel_traces) AS newest_span,
       s.spans AS derived_spans,
       s.newest_span AS derived_newest_span,
       s.traces AS derived_traces,
       s.derived_at AS derived_at,
       -- the declarations' fingerprint, the same expression as derive_build.sql's
       concat(toString((SELECT count() FROM budgetscope_declared_budgets)), ':',
              toString((SELECT sum(cityHash64(scope, agent, budget_ms))
                        FROM budgetscope_declared_budgets)), '/',
              toString((SELECT count() FROM budgetscope_declared_step_caps)), ':',
              toString((SELECT sum(cityHash64(step_key, cap_ms))
                        FROM budgetscope_declared_step_caps))) AS declared,
       s.declared AS derived_declared,
       s.log_rows AS derived_log_rows
FROM budgetscope_derive_state s;
