-- name: 3_to_4
-- Schema 3 → 4.

-- declared_budgets, declared_step_caps (../schema/declared_budgets.sql,
-- docs/guide.md#declaring-budgets): the tables are created by the DDL, which runs before this.
-- runs gains budget_source; no budget was declared before version 4, so every known budget came
-- from its span.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS budget_source VARCHAR;
UPDATE runs SET budget_source = 'span' WHERE budget_ms IS NOT NULL AND budget_source IS NULL;

-- log_records (../schema/log_records.sql): OTLP log records. A new table, created by the
-- DDL; nothing to move.

-- derivation_failures (../schema/derivation_failures.sql): traces whose derivation failed,
-- confined to them (store/derive/pending.py); created by the DDL too, idempotent here.
CREATE TABLE IF NOT EXISTS derivation_failures (
    trace_id  VARCHAR PRIMARY KEY,
    error     VARCHAR NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL
);

-- spans (steps recognised by the conventions of docs/conventions.md, store/derive/conventions.py):
-- spans gain the typed columns those rules read (../schema/spans.sql). A file of schema 3 gets
-- them here, filled from each span's attributes JSON as store/rows/typed_attributes.py types them at
-- ingest (tests/store/test_schema_migration.py compares the two), and every trace is marked for
-- derivation again so that its runs and steps follow the new rules.
-- Added with IF NOT EXISTS: a file whose spans already have them is left as it is.
ALTER TABLE spans ADD COLUMN IF NOT EXISTS gen_ai_response_model VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS gen_ai_data_source_id VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS gen_ai_provider_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS gen_ai_system VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS openinference_span_kind VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS llm_model_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS embedding_model_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS reranker_model_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS llm_invocation_model VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS tool_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS agent_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS graph_node_id VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS traceloop_span_kind VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS traceloop_entity_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS llm_request_type VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS ai_operation_id VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS ai_tool_call_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS ai_model_id VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS http_request_method VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS http_method VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS rpc_system VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS rpc_service VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS rpc_method VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS server_address VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS net_peer_name VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS url_full_host VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS http_url_host VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS url_template VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS http_route VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS output_value_head VARCHAR;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS gen_ai_tool_call_result_head VARCHAR;

-- Only spans that carry one of the keys are rewritten.
UPDATE spans SET
    gen_ai_response_model = CASE WHEN json_type(attributes, '$."gen_ai.response.model"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."gen_ai.response.model"') END,
    gen_ai_data_source_id = CASE WHEN json_type(attributes, '$."gen_ai.data_source.id"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."gen_ai.data_source.id"') END,
    gen_ai_provider_name = CASE WHEN json_type(attributes, '$."gen_ai.provider.name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."gen_ai.provider.name"') END,
    gen_ai_system = CASE WHEN json_type(attributes, '$."gen_ai.system"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."gen_ai.system"') END,
    openinference_span_kind = lower(trim(CASE WHEN json_type(attributes, '$."openinference.span.kind"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."openinference.span.kind"') END, ' ' || chr(9) || chr(10) || chr(13))),
    llm_model_name = CASE WHEN json_type(attributes, '$."llm.model_name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."llm.model_name"') END,
    embedding_model_name = CASE WHEN json_type(attributes, '$."embedding.model_name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."embedding.model_name"') END,
    reranker_model_name = CASE WHEN json_type(attributes, '$."reranker.model_name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."reranker.model_name"') END,
    llm_invocation_model = CASE WHEN json_valid(json_extract_string(attributes, '$."llm.invocation_parameters"'))
        THEN nullif(json_extract_string(json_extract_string(attributes, '$."llm.invocation_parameters"'), '$.model'), '') END,
    tool_name = CASE WHEN json_type(attributes, '$."tool.name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."tool.name"') END,
    agent_name = CASE WHEN json_type(attributes, '$."agent.name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."agent.name"') END,
    graph_node_id = CASE WHEN json_type(attributes, '$."graph.node.id"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."graph.node.id"') END,
    traceloop_span_kind = lower(trim(CASE WHEN json_type(attributes, '$."traceloop.span.kind"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."traceloop.span.kind"') END, ' ' || chr(9) || chr(10) || chr(13))),
    traceloop_entity_name = CASE WHEN json_type(attributes, '$."traceloop.entity.name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."traceloop.entity.name"') END,
    llm_request_type = lower(trim(CASE WHEN json_type(attributes, '$."llm.request.type"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."llm.request.type"') END, ' ' || chr(9) || chr(10) || chr(13))),
    ai_operation_id = lower(trim(CASE WHEN json_type(attributes, '$."ai.operationId"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."ai.operationId"') END, ' ' || chr(9) || chr(10) || chr(13))),
    ai_tool_call_name = CASE WHEN json_type(attributes, '$."ai.toolCall.name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."ai.toolCall.name"') END,
    ai_model_id = CASE WHEN json_type(attributes, '$."ai.model.id"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."ai.model.id"') END,
    http_request_method = CASE WHEN json_type(attributes, '$."http.request.method"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."http.request.method"') END,
    http_method = CASE WHEN json_type(attributes, '$."http.method"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."http.method"') END,
    rpc_system = CASE WHEN json_type(attributes, '$."rpc.system"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."rpc.system"') END,
    rpc_service = CASE WHEN json_type(attributes, '$."rpc.service"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."rpc.service"') END,
    rpc_method = CASE WHEN json_type(attributes, '$."rpc.method"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."rpc.method"') END,
    server_address = CASE WHEN json_type(attributes, '$."server.address"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."server.address"') END,
    net_peer_name = CASE WHEN json_type(attributes, '$."net.peer.name"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."net.peer.name"') END,
    url_full_host = nullif(lower(regexp_extract(trim(CASE WHEN json_type(attributes, '$."url.full"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."url.full"') END),
        '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?\[?([^\]/?#:]*)', 1)), ''),
    http_url_host = nullif(lower(regexp_extract(trim(CASE WHEN json_type(attributes, '$."http.url"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."http.url"') END),
        '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?\[?([^\]/?#:]*)', 1)), ''),
    url_template = CASE WHEN json_type(attributes, '$."url.template"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."url.template"') END,
    http_route = CASE WHEN json_type(attributes, '$."http.route"') NOT IN ('OBJECT', 'ARRAY')
        THEN json_extract_string(attributes, '$."http.route"') END,
    output_value_head = CASE WHEN json_type(attributes, '$."output.value"') = 'VARCHAR'
        AND starts_with(json_extract_string(attributes, '$."output.value"'), 'Tool ''')
        THEN left(json_extract_string(attributes, '$."output.value"'), 256) END,
    gen_ai_tool_call_result_head = CASE WHEN json_type(attributes, '$."gen_ai.tool.call.result"') = 'VARCHAR'
        AND starts_with(json_extract_string(attributes, '$."gen_ai.tool.call.result"'), 'Tool ''')
        THEN left(json_extract_string(attributes, '$."gen_ai.tool.call.result"'), 256) END
WHERE json_exists(attributes, '$."gen_ai.response.model"')
   OR json_exists(attributes, '$."gen_ai.data_source.id"')
   OR json_exists(attributes, '$."gen_ai.provider.name"')
   OR json_exists(attributes, '$."gen_ai.system"')
   OR json_exists(attributes, '$."openinference.span.kind"')
   OR json_exists(attributes, '$."llm.model_name"')
   OR json_exists(attributes, '$."embedding.model_name"')
   OR json_exists(attributes, '$."reranker.model_name"')
   OR json_exists(attributes, '$."llm.invocation_parameters"')
   OR json_exists(attributes, '$."tool.name"')
   OR json_exists(attributes, '$."agent.name"')
   OR json_exists(attributes, '$."graph.node.id"')
   OR json_exists(attributes, '$."traceloop.span.kind"')
   OR json_exists(attributes, '$."traceloop.entity.name"')
   OR json_exists(attributes, '$."llm.request.type"')
   OR json_exists(attributes, '$."ai.operationId"')
   OR json_exists(attributes, '$."ai.toolCall.name"')
   OR json_exists(attributes, '$."ai.model.id"')
   OR json_exists(attributes, '$."http.request.method"')
   OR json_exists(attributes, '$."http.method"')
   OR json_exists(attributes, '$."rpc.system"')
   OR json_exists(attributes, '$."rpc.service"')
   OR json_exists(attributes, '$."rpc.method"')
   OR json_exists(attributes, '$."server.address"')
   OR json_exists(attributes, '$."net.peer.name"')
   OR json_exists(attributes, '$."url.full"')
   OR json_exists(attributes, '$."http.url"')
   OR json_exists(attributes, '$."url.template"')
   OR json_exists(attributes, '$."http.route"')
   OR json_exists(attributes, '$."output.value"')
   OR json_exists(attributes, '$."gen_ai.tool.call.result"');

-- docs/metrics.md §3 rule 2 reads the older http.status_code when http.response.status_code is
-- absent.
UPDATE spans SET http_response_status_code = CASE
    WHEN TRY_CAST(json_extract_string(attributes, '$."http.status_code"') AS DOUBLE)
         = floor(TRY_CAST(json_extract_string(attributes, '$."http.status_code"') AS DOUBLE))
     AND abs(TRY_CAST(json_extract_string(attributes, '$."http.status_code"') AS DOUBLE)) < 9.2e18
    THEN TRY_CAST(json_extract_string(attributes, '$."http.status_code"') AS DOUBLE)::BIGINT END
WHERE http_response_status_code IS NULL AND json_exists(attributes, '$."http.status_code"');

-- steps record which convention recognised each one. DuckDB alters no table an index depends
-- on, so steps' index is dropped and made again around the new column.
DROP INDEX IF EXISTS steps_by_run_id;
ALTER TABLE steps ADD COLUMN IF NOT EXISTS convention VARCHAR;
CREATE INDEX IF NOT EXISTS steps_by_run_id ON steps (run_id);

-- Every trace not already waiting is derived again, from its first span on (the derivation
-- beside the writer takes these marks in slices, as it takes a write's).
INSERT INTO pending_derivations
SELECT trace_id, min(received_at) FROM spans
WHERE trace_id NOT IN (SELECT trace_id FROM pending_derivations)
GROUP BY trace_id;
