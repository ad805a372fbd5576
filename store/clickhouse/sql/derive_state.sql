-- name: derive_state
-- Whether the derived tables are current: otel_traces, the declarations and the prices now against what the last derive_build read.
SELECT (SELECT count() FROM otel_traces) AS spans,
       (SELECT max(Timestamp) FROM otel_traces) AS newest_span,
       s.spans AS derived_spans,
       s.newest_span AS derived_newest_span,
       s.traces AS derived_traces,
       s.derived_at AS derived_at,
       -- the declarations' fingerprint, the same expression as derive_build.sql's
       concat(toString((SELECT count() FROM budgetscope_declared_budgets)), ':',
              toString((SELECT sum(cityHash64(scope, agent, coalesce(budget_ms, -1),
                                              coalesce(tokens, -1), coalesce(usd_nano, -1)))
                        FROM budgetscope_declared_budgets)), '/',
              toString((SELECT count() FROM budgetscope_declared_step_caps)), ':',
              toString((SELECT sum(cityHash64(step_key, cap_ms))
                        FROM budgetscope_declared_step_caps))) AS declared,
       s.declared AS derived_declared,
       s.log_rows AS derived_log_rows,
       -- the prices set and the bundled table's version, as derive_build.sql computes them
       concat(toString((SELECT count() FROM budgetscope_price_overrides)), ':',
              toString((SELECT sum(cityHash64(model_pattern, provider, coalesce(from_ns, -1),
                                              input_rate, output_rate,
                                              coalesce(cache_read_rate, -1),
                                              coalesce(cache_write_rate, -1)))
                        FROM budgetscope_price_overrides)), '/',
              (SELECT any(value) FROM budgetscope_meta WHERE key = 'genai_prices_version'))
           AS prices,
       s.prices AS derived_prices
FROM budgetscope_derive_state s;
