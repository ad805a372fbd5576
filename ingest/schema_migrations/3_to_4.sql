-- Schema 3 → 4.

-- declared_budgets, declared_step_caps (../schema/declared_budgets.sql, SPEC §10): the tables
-- are created by the DDL, which runs before this. runs gains budget_source; no budget was
-- declared before version 4, so every known budget came from its span.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS budget_source VARCHAR;
UPDATE runs SET budget_source = 'span' WHERE budget_ms IS NOT NULL AND budget_source IS NULL;

-- log_records (../schema/log_records.sql): OTLP log records. A new table, created by the
-- DDL; nothing to move.

-- derivation_failures (../schema/derivation_failures.sql): traces whose derivation failed,
-- confined to them (ingest/derivation.py); created by the DDL too, idempotent here.
CREATE TABLE IF NOT EXISTS derivation_failures (
    trace_id  VARCHAR PRIMARY KEY,
    error     VARCHAR NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL
);
