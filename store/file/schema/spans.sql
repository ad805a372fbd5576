-- name: spans
-- spans: one row per span as received, identified by (trace_id, span_id) (see span_keys.sql).
-- Everything OTLP carries is kept (attributes, events and links whole, as JSON and typed lists);
-- the attributes docs/metrics.md computes with are also copied into typed columns so that queries
-- never parse strings. The typed columns are a cache of `attributes`, never a replacement.
CREATE TABLE IF NOT EXISTS spans (
    trace_id                 VARCHAR NOT NULL,   -- 32 lowercase hex
    span_id                  VARCHAR NOT NULL,   -- 16 lowercase hex
    parent_span_id           VARCHAR,            -- NULL for a root
    trace_state              VARCHAR NOT NULL,
    flags                    UINTEGER NOT NULL,
    name                     VARCHAR NOT NULL,
    kind                     TINYINT NOT NULL,   -- OTLP SpanKind number
    start_ns                 BIGINT NOT NULL,    -- unix epoch nanoseconds
    end_ns                   BIGINT NOT NULL,
    status_code              TINYINT NOT NULL,   -- 0 unset, 1 ok, 2 error
    status_message           VARCHAR NOT NULL,
    resource_id              VARCHAR NOT NULL,
    scope_id                 VARCHAR NOT NULL,
    -- Denormalized cache of the resource's service.name: the agent falls back to it
    -- (docs/metrics.md §7).
    service_name             VARCHAR,
    attributes               JSON NOT NULL,
    dropped_attributes_count UINTEGER NOT NULL,
    events STRUCT(
        time_ns BIGINT, name VARCHAR, attributes JSON, dropped_attributes_count UINTEGER
    )[] NOT NULL,
    dropped_events_count     UINTEGER NOT NULL,
    links STRUCT(
        trace_id VARCHAR, span_id VARCHAR, trace_state VARCHAR, flags UINTEGER,
        attributes JSON, dropped_attributes_count UINTEGER
    )[] NOT NULL,
    dropped_links_count      UINTEGER NOT NULL,

    -- docs/metrics.md §2 budget.* attributes, typed.
    budget_total_ms          BIGINT,
    budget_deadline_unix_ms  BIGINT,
    budget_reserve_ms        BIGINT,
    budget_run_outcome       VARCHAR,
    budget_step_kind         VARCHAR,
    budget_step_name         VARCHAR,
    budget_remaining_ms      BIGINT,
    budget_cap_ms            BIGINT,
    budget_allocated_ms      BIGINT,
    budget_outcome           VARCHAR,
    budget_side_effect       VARCHAR,
    budget_effect_status     VARCHAR,
    budget_idempotency_key   VARCHAR,
    budget_attempt           BIGINT,
    budget_hedge             BOOLEAN,
    budget_reconcile_result  VARCHAR,
    budget_cleanup_ms        BIGINT,
    -- OpenTelemetry semantic conventions docs/metrics.md §2-§3 reads.
    gen_ai_operation_name    VARCHAR,
    gen_ai_tool_name         VARCHAR,
    gen_ai_request_model     VARCHAR,
    gen_ai_agent_name        VARCHAR,
    -- http.response.status_code, else the older http.status_code (docs/metrics.md §3 rule 2)
    http_response_status_code BIGINT,
    -- gRPC status as a number, from rpc.grpc.status_code or the newer string-valued
    -- rpc.response.status_code / rpc.status_code (e.g. DEADLINE_EXCEEDED → 4).
    grpc_status_code         INTEGER,
    error_type               VARCHAR,
    -- exception.type of each `exception` event, in event order (docs/metrics.md §3 rule 4).
    exception_types          VARCHAR[] NOT NULL,
    -- What docs/conventions.md recognises steps by, in the conventions real instrumentations emit
    -- (store/derive/conventions.py; schema 4). Labels (kinds, operation ids) are lower-cased.
    gen_ai_response_model    VARCHAR,
    gen_ai_data_source_id    VARCHAR,
    gen_ai_provider_name     VARCHAR,
    gen_ai_system            VARCHAR,
    openinference_span_kind  VARCHAR,
    llm_model_name           VARCHAR,
    embedding_model_name     VARCHAR,
    reranker_model_name      VARCHAR,
    llm_invocation_model     VARCHAR,            -- the `model` key of llm.invocation_parameters
    tool_name                VARCHAR,
    agent_name               VARCHAR,
    graph_node_id            VARCHAR,
    traceloop_span_kind      VARCHAR,
    traceloop_entity_name    VARCHAR,
    llm_request_type         VARCHAR,
    ai_operation_id          VARCHAR,
    ai_tool_call_name        VARCHAR,
    ai_model_id              VARCHAR,
    http_request_method      VARCHAR,
    http_method              VARCHAR,
    rpc_system               VARCHAR,
    rpc_service              VARCHAR,
    rpc_method               VARCHAR,
    server_address           VARCHAR,
    net_peer_name            VARCHAR,
    url_full_host            VARCHAR,            -- the host of url.full, never the URL
    http_url_host            VARCHAR,            -- the host of http.url
    url_template             VARCHAR,
    http_route               VARCHAR,
    -- the first 256 characters of a tool's result (docs/metrics.md §3 rule 4's timeout result)
    output_value_head        VARCHAR,
    gen_ai_tool_call_result_head VARCHAR,
    mcp_method_name          VARCHAR,            -- schema 6: an MCP client's call (row 3)
    -- Schema 7 (docs/metrics.md §11): tokens and cost. Each quantity is the first valid value
    -- of its spellings (store/rows/usage.py); counts in [0, 10^12], money in nano-dollars.
    usage_input              BIGINT,
    usage_cache_read         BIGINT,
    usage_cache_write        BIGINT,
    usage_output             BIGINT,
    usage_reasoning          BIGINT,
    usage_total              BIGINT,             -- read only when input and output are absent
    usage_input_includes_cache BOOLEAN,          -- budget.usage.input_includes_cache
    cost_reported_nano       BIGINT,             -- §11.3 step 1's first valid reported cost
    -- the attributes present with a value that is no valid count or cost (ignored, noted)
    usage_ignored            VARCHAR[],
    budget_refused_by        VARCHAR,            -- labels: time, tokens, usd
    budget_run_exhausted_by  VARCHAR,
    budget_total_tokens      BIGINT,
    budget_total_usd_nano    BIGINT,
    ai_response_model        VARCHAR,            -- what prices a span (§11.3), beside the
    llm_provider             VARCHAR,            -- model and provider columns above
    ai_model_provider        VARCHAR,

    received_at              TIMESTAMPTZ NOT NULL  -- when this row was committed
    -- No primary key here: (trace_id, span_id) is unique through span_keys (span_keys.sql),
    -- whose integer key costs less to keep than an index on these two strings.
);
