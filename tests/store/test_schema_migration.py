"""A file of schema version 1 (spans unique through their primary key, no span_keys) is brought
to the current version when a command opens it read-write: its spans stay, each gets its key,
so a span sent again after the upgrade is still stored once."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from budgetscope.cli import cli
from ingest.decode.flatten import flatten_request
from store import SchemaError, SpanWriter, connect
from store.testing import SCHEMA_VERSION, migration_steps
from tests.support.receivers import raw_request


def _version_1_file(folder: Path, request: ExportTraceServiceRequest) -> Path:
    """What schema 1 held: spans and no span_keys, stamped version 1."""
    db = folder / "v1.duckdb"
    con = connect(db)
    try:
        SpanWriter(con).write(flatten_request(request))
        con.execute("DROP TABLE span_keys")
        con.execute("UPDATE budgetscope_meta SET value = '1' WHERE key = 'schema_version'")
    finally:
        con.close()
    return db


def test_version_1_is_migrated_and_keeps_every_span_unique(tmp_path: Path) -> None:
    assert [step.name for step in migration_steps(1)] == [
        f"{v}_to_{v + 1}.sql" for v in range(1, SCHEMA_VERSION)]
    stored = raw_request(5)
    db = _version_1_file(tmp_path, stored)
    con = connect(db)
    try:
        version = con.execute("SELECT value FROM budgetscope_meta "
                              "WHERE key = 'schema_version'").fetchone()[0]
        assert version == str(SCHEMA_VERSION)
        keys = con.execute("SELECT count(*) FROM span_keys").fetchone()[0]
        assert keys == 5
        again = SpanWriter(con).write(flatten_request(stored))  # sent again after the upgrade
        assert (again.inserted, again.duplicates) == (0, 5)
        mixed = ExportTraceServiceRequest()
        mixed.CopyFrom(stored)
        mixed.MergeFrom(raw_request(2))  # the five old spans and two new ones
        more = SpanWriter(con).write(flatten_request(mixed))
        assert (more.inserted, more.duplicates) == (2, 5)
        assert con.execute("SELECT count(*), count(DISTINCT (trace_id, span_id)) "
                           "FROM spans").fetchone() == (7, 7)
    finally:
        con.close()
    result = CliRunner().invoke(cli, ["--db", str(db), "report", "runs", "--format", "json"])
    assert result.exit_code == 0, result.output


def test_a_failed_migration_leaves_the_file_at_version_1(tmp_path: Path) -> None:
    db = _version_1_file(tmp_path, raw_request(3))
    raw = duckdb.connect(str(db))  # a span id the migration cannot read makes it fail
    try:
        raw.execute("UPDATE spans SET span_id = 'not hex!' WHERE span_id = "
                    "(SELECT min(span_id) FROM spans)")
    finally:
        raw.close()
    with pytest.raises(SchemaError, match="from schema version 1 to .* left unchanged"):
        connect(db)
    raw = duckdb.connect(str(db), read_only=True)
    try:
        assert raw.execute("SELECT value FROM budgetscope_meta "
                           "WHERE key = 'schema_version'").fetchone()[0] == "1"
        tables = {row[0] for row in raw.execute("SELECT table_name FROM duckdb_tables()")
                  .fetchall()}
        assert "span_keys" not in tables  # the DDL rolled back with the migration
    finally:
        raw.close()


def test_version_2_marks_survive_and_lose_their_key(tmp_path: Path) -> None:
    """Schema 2 → 3: pending_derivations had a primary key on trace_id; its marks are
    kept, and a trace can then be marked again by a second write (marks are appended)."""
    db = tmp_path / "v2.duckdb"
    con = connect(db)
    try:
        SpanWriter(con).write(flatten_request(raw_request(4)))
        marked = con.execute("SELECT trace_id, since FROM pending_derivations "
                             "ORDER BY trace_id").fetchall()
        con.execute("DROP TABLE pending_derivations")
        con.execute("CREATE TABLE pending_derivations (trace_id VARCHAR PRIMARY KEY, "
                    "since TIMESTAMPTZ NOT NULL)")
        con.executemany("INSERT INTO pending_derivations VALUES (?, ?)", marked)
        con.execute("UPDATE budgetscope_meta SET value = '2' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = connect(db)
    try:
        assert con.execute("SELECT value FROM budgetscope_meta "
                           "WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        assert con.execute("SELECT trace_id, since FROM pending_derivations "
                           "ORDER BY trace_id").fetchall() == marked
        con.execute("INSERT INTO pending_derivations VALUES (?, now())", [marked[0][0]])
        assert con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = "
                           "'pending_derivations' AND constraint_type = 'PRIMARY KEY'"
                           ).fetchone()[0] == 0
    finally:
        con.close()


def test_version_3_gains_the_convention_columns_filled_as_ingest_types_them(
        tmp_path: Path) -> None:
    """Schema 3 → 4: spans gain the typed columns of docs/conventions.md, filled from the stored
    attributes the way ingest types them, and every trace is marked for derivation again."""
    from store import TYPED_ATTRIBUTES
    from store.testing import HTTP_STATUS_KEYS
    from tests.support.trace_builder import TraceBuilder

    b = TraceBuilder(seed=3)
    run = b.run(0, 1_000, 1_000)
    values = {"openinference.span.kind": " LLM ", "llm.invocation_parameters":
              '{"model": "gpt-inv"}', "url.full": "https://user@API.Example.com:8443/a?b=1",
              "http.url": "http://h.example/x", "ai.operationId": "ai.streamText.doStream",
              "output.value": "Tool 'x' timed out after 5 seconds." + "y" * 400,
              "rpc.system": "grpc", "tool.name": "t", "http.status_code": "503"}
    b.span("everything", 0, 10, parent=run, attributes=values)
    # labels that begin or end in a t, n or r: the migration once trimmed those letters too
    b.span("labels", 10, 20, parent=run, attributes={
        "traceloop.span.kind": " Tool\t", "llm.request.type": "chat\n"})
    b.span("payload", 10, 20, parent=run, attributes={"output.value": "x" * 5000})
    db = tmp_path / "v3.duckdb"
    con = connect(db)
    new_columns = [column for key, (column, _) in TYPED_ATTRIBUTES.items()
                   if not column.startswith("_")][
        [key for key in TYPED_ATTRIBUTES].index("gen_ai.response.model"):]
    try:
        SpanWriter(con).write(flatten_request(encode_spans(b.finished())))
        expected = con.execute(f"SELECT {', '.join(new_columns)}, http_response_status_code "
                               "FROM spans WHERE name = 'everything'").fetchone()
        for column in new_columns:
            con.execute(f"ALTER TABLE spans DROP COLUMN {column}")
        con.execute("UPDATE spans SET http_response_status_code = NULL")
        con.execute("DROP INDEX steps_by_run_id")
        con.execute("ALTER TABLE steps DROP COLUMN convention")
        con.execute("DELETE FROM pending_derivations")
        con.execute("UPDATE budgetscope_meta SET value = '3' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = connect(db)
    try:
        got = con.execute(f"SELECT {', '.join(new_columns)}, http_response_status_code "
                          "FROM spans WHERE name = 'everything'").fetchone()
        assert got == expected
        assert expected[new_columns.index("url_full_host")] == "api.example.com"
        assert expected[new_columns.index("llm_invocation_model")] == "gpt-inv"
        assert expected[-1] == 503 and HTTP_STATUS_KEYS[-1] == "http.status_code"
        assert con.execute("SELECT traceloop_span_kind, llm_request_type FROM spans "
                           "WHERE name = 'labels'").fetchone() == ("tool", "chat")
        assert con.execute("SELECT output_value_head FROM spans WHERE name = 'payload'"
                           ).fetchone() == (None,)  # only a timeout result's start is typed
        assert con.execute("SELECT count(DISTINCT trace_id) FROM pending_derivations"
                           ).fetchone()[0] == 1
        assert "convention" in [row[0] for row in con.execute("DESCRIBE steps").fetchall()]
        # no provisional column of ingest's (the merged gRPC and HTTP statuses) is stored
        assert not [row[0] for row in con.execute("DESCRIBE spans").fetchall()
                    if row[0].startswith("_")]
    finally:
        con.close()


def test_version_5_gains_numbered_blame_and_the_mcp_column(tmp_path: Path) -> None:
    """Schema 5 → 6 (docs/metrics.md §4, docs/conventions.md as revised): runs gain culprit_step,
    holder_step, holder_at_deadline and root_missing, spans gain mcp_method_name (filled from the
    stored attributes as ingest types it), the two new tables exist, and every trace is marked for
    derivation again, after which the numbers are there."""
    from opentelemetry.trace import SpanKind

    from store.testing import PendingDerivations, refresh_touched
    from tests.support.trace_builder import TraceBuilder

    b = TraceBuilder(seed=5)
    run = b.run(0, 1_000, 1_000)
    b.span("tools/call fetch", 0, 500, parent=run, kind=SpanKind.CLIENT,
           attributes={"mcp.method.name": " Tools/Call "})
    db = tmp_path / "v5.duckdb"
    con = connect(db)
    try:
        SpanWriter(con).write(flatten_request(encode_spans(b.finished())))
        PendingDerivations(refresh_touched).run(con)
        con.execute("DROP INDEX runs_by_run_id")
        for column in ("culprit_step", "holder_step", "holder_at_deadline", "root_missing"):
            con.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        con.execute("CREATE INDEX runs_by_run_id ON runs (run_id)")
        con.execute("ALTER TABLE spans DROP COLUMN mcp_method_name")
        con.execute("DROP TABLE traces_awaiting_root")
        con.execute("DROP TABLE derivation_notes")
        con.execute("UPDATE budgetscope_meta SET value = '5' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = connect(db)
    try:
        assert con.execute("SELECT mcp_method_name FROM spans WHERE name = 'tools/call fetch'"
                           ).fetchone() == ("tools/call",)
        assert con.execute("SELECT culprit_step, root_missing FROM runs").fetchone() == (
            None, False)
        assert con.execute("SELECT count(DISTINCT trace_id) FROM pending_derivations"
                           ).fetchone()[0] == 1
        PendingDerivations(refresh_touched).run(con)
        assert con.execute("SELECT culprit_step, culprit_key, root_missing FROM runs"
                           ).fetchone() == (1, "tool:fetch", False)
        assert con.execute("SELECT count(*) FROM traces_awaiting_root").fetchone() == (0,)
    finally:
        con.close()


def test_version_6_gains_tokens_and_dollars_filled_as_ingest_types_them(tmp_path: Path) -> None:
    """Schema 6 → 7 (docs/metrics.md §11): spans gain the usage, cost and budget columns,
    filled from the stored attributes the way ingest types them (each quantity from its first
    valid spelling, bad values named), runs and steps their token and dollar columns, the
    declared budgets their new dimensions (a budget of 6 kept), metered_spans and the price
    tables exist, and every trace is derived again, after which its cost is there."""
    from store.testing import USAGE_COLUMNS, PendingDerivations, refresh_touched
    from tests.support.trace_builder import TraceBuilder

    b = TraceBuilder(seed=6)
    run = b.run(0, 1_000, 1_000, budget_total__usd="0.0123", budget_total__tokens="2e3",
                budget_run_exhausted__by=" USD ")
    values = [
        {"gen_ai.usage.input_tokens": -3, "gen_ai.usage.prompt_tokens": "1200",
         "ai.usage.inputTokens": 7, "gen_ai.usage.output_tokens": 80.0,
         "gen_ai.usage.reasoning.output_tokens": 2.5, "llm.token_count.completion_details"
         ".reasoning": " 30 ", "gen_ai.usage.cache_read.input_tokens": 10**12 + 1,
         "ai.usage.cachedInputTokens": 1e3, "budget.usage.input_includes_cache": "no",
         "gen_ai.usage.cost.amount": 0.5, "gen_ai.usage.cost.currency": "EUR",
         "llm.cost.prompt": 0.001, "llm.cost.completion": "0.0025",
         "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai",
         "gen_ai.operation.name": "chat", "ai.response.model": "gpt-4o-x",
         "llm.provider": "OpenAI", "ai.model.provider": "openai.chat"},
        {"gen_ai.usage.total_tokens": True, "llm.usage.total_tokens": float("nan"),
         "ai.usage.totalTokens": "77", "budget.cost_usd": "1e-05", "operation.cost": 3,
         "budget.refused_by": "Tokens", "budget.usage.input_includes_cache": 1},
        {"gen_ai.usage.cost": 0.123456789499, "llm.cost.total": "cheap",
         "gen_ai.usage.input_tokens": "  12 ", "budget.total_usd": -1},
    ]
    for index, attributes in enumerate(values):
        b.span(f"usage {index}", index * 10, index * 10 + 5, parent=run, attributes=attributes)
    db = tmp_path / "v6.duckdb"
    con = connect(db)
    columns = (*USAGE_COLUMNS, "usage_input_includes_cache", "budget_refused_by",
               "budget_run_exhausted_by", "ai_response_model", "llm_provider",
               "ai_model_provider")
    select = f"SELECT name, {', '.join(columns)} FROM spans ORDER BY name"
    run_columns = ("tokens", "cost_nano", "usd_budget_nano", "exhausted_by")
    try:
        SpanWriter(con).write(flatten_request(encode_spans(b.finished())))
        PendingDerivations(refresh_touched).run(con)
        expected = con.execute(select).fetchall()
        derived = con.execute(f"SELECT {', '.join(run_columns)} FROM runs").fetchall()
        # a check of ingest: 1200 input said to leave out its 1000 cache reads, and 80 out
        # (30 of them reasoning); a total of 77; 12 input
        assert derived[0][0] == (1200 + 1000 + 80) + 77 + 12
        for column in columns:
            con.execute(f"ALTER TABLE spans DROP COLUMN {column}")
        con.execute("DROP INDEX runs_by_run_id")
        con.execute("DROP INDEX steps_by_run_id")
        for table, new in (("runs", "tokens"), ("steps", "input_tokens")):
            names = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
            for column in names[names.index(new):]:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("CREATE INDEX runs_by_run_id ON runs (run_id)")
        con.execute("CREATE INDEX steps_by_run_id ON steps (run_id)")
        con.execute("DROP TABLE declared_budgets")
        con.execute("CREATE TABLE declared_budgets (scope VARCHAR NOT NULL CHECK (scope IN "
                    "('agent', 'default')), agent VARCHAR NOT NULL, budget_ms BIGINT NOT NULL "
                    "CHECK (budget_ms > 0), declared_at TIMESTAMPTZ NOT NULL, "
                    "PRIMARY KEY (scope, agent))")
        con.execute("INSERT INTO declared_budgets VALUES ('agent', 'billing', 45000, now())")
        for table in ("metered_spans", "price_overrides", "price_matches",
                      "bundled_conditions", "bundled_prices"):
            con.execute(f"DROP TABLE {table}")
        con.execute("DELETE FROM budgetscope_meta WHERE key <> 'schema_version'")
        con.execute("UPDATE budgetscope_meta SET value = '6' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = connect(db)
    try:
        assert con.execute(select).fetchall() == expected
        assert con.execute("SELECT count(DISTINCT trace_id) FROM pending_derivations"
                           ).fetchone()[0] == 1
        PendingDerivations(refresh_touched).run(con)
        assert con.execute(f"SELECT {', '.join(run_columns)} FROM runs").fetchall() == derived
        assert con.execute("SELECT count(*) FROM metered_spans").fetchone()[0] == 3
        con.execute("INSERT INTO declared_budgets (scope, agent, declared_at, tokens) "
                    "VALUES ('default', '', now(), 5)")  # a row without a duration: allowed
        assert con.execute("SELECT agent, budget_ms, tokens FROM declared_budgets ORDER BY agent"
                           ).fetchall() == [("", None, 5), ("billing", 45000, None)]
    finally:
        con.close()


def test_version_6_retypes_the_labels_the_3_to_4_migration_cut(tmp_path: Path) -> None:
    """The 3 → 4 migration trimmed labels with ' \\t\\n\\r', which DuckDB reads without
    escapes, so `tool` became `ool` in files that came through it; 6 → 7 types them again
    from the attributes, as ingest does."""
    from tests.support.trace_builder import TraceBuilder

    b = TraceBuilder(seed=7)
    run = b.run(0, 1_000, 1_000)
    b.span("labels", 0, 10, parent=run, attributes={
        "openinference.span.kind": "TOOL", "traceloop.span.kind": "task",
        "llm.request.type": "chat", "ai.operationId": "ai.toolCall"})
    db = tmp_path / "v6-cut.duckdb"
    con = connect(db)
    select = ("SELECT openinference_span_kind, traceloop_span_kind, llm_request_type, "
              "ai_operation_id FROM spans WHERE name = 'labels'")
    try:
        SpanWriter(con).write(flatten_request(encode_spans(b.finished())))
        assert con.execute(select).fetchone() == ("tool", "task", "chat", "ai.toolcall")
        con.execute("UPDATE spans SET openinference_span_kind = 'ool', "
                    "traceloop_span_kind = 'as', llm_request_type = 'cha', "
                    "ai_operation_id = 'ai.toolcall' WHERE name = 'labels'")
        con.execute("DROP TABLE metered_spans")
        con.execute("UPDATE budgetscope_meta SET value = '6' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = connect(db)
    try:
        assert con.execute(select).fetchone() == ("tool", "task", "chat", "ai.toolcall")
    finally:
        con.close()


def test_version_7_gains_the_rules_across_traces(tmp_path: Path) -> None:
    """Schema 7 → 8 (docs/conventions.md, HTTP client spans in a trace of their own; a model
    step named after its service's named spans): the recognition's tables exist, every trace
    is derived again, after which a stray HTTP trace is part of the call that held it."""
    from opentelemetry.trace import SpanKind

    from store.testing import PendingDerivations, refresh_touched
    from tests.support.trace_builder import TraceBuilder

    b = TraceBuilder(seed=8, service="svc")
    stray = b.span("GET", 1_000, 2_000, kind=SpanKind.CLIENT, attributes={
        "http.request.method": "GET", "server.address": "tools.example",
        "http.response.status_code": 503})
    run = b.run(0, 10_000, 10_000)
    b.span("tool", 500, 3_000, parent=run, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    db = tmp_path / "v7.duckdb"
    con = connect(db)
    try:
        SpanWriter(con).write(flatten_request(encode_spans(b.finished())))
        for table in ("call_hulls", "stray_calls", "model_span_names"):
            con.execute(f"DROP TABLE {table}")
        con.execute("DELETE FROM pending_derivations")
        con.execute("UPDATE budgetscope_meta SET value = '7' WHERE key = 'schema_version'")
    finally:
        con.close()
    con = connect(db)
    try:
        assert con.execute("SELECT value FROM budgetscope_meta WHERE key = 'schema_version'"
                           ).fetchone()[0] == str(SCHEMA_VERSION) == "8"
        assert con.execute("SELECT count(DISTINCT trace_id) FROM pending_derivations"
                           ).fetchone()[0] == 2
        PendingDerivations(refresh_touched).run(con)
        assert con.execute("SELECT trace_id, class FROM steps").fetchall() == [
            (b.trace_id(run), "upstream_error")]
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert con.execute("SELECT trace_id FROM stray_calls WHERE holder_span_id IS NOT NULL"
                           ).fetchall() == [(b.trace_id(stray),)]
    finally:
        con.close()
