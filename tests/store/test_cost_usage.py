"""A span's usage and cost as docs/metrics.md §11.1-§11.3 read them, typed at ingest
(store/rows/usage.py) and counted by the derivation (store/derive/sql/derive_usage.sql): each
quantity from the first spelling with a valid value, two spellings counted once, input without
its cache (the Anthropic API's figure), reasoning beside or inside output, reported costs and
their currency, and bad values ignored with a note, never a failed batch.

Prices are genai-prices' (the bundled table) where a number depends on one: gpt-4o at
$2.50 / $1.25 cache read / $10 per million tokens (no cache-write rate: charged at the input
rate), claude-sonnet-4-5 at $3 / $0.30 / $3.75 / $15.
"""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from tests.support.cost_rows import metered, nano, notes, span_usage
from tests.support.trace_builder import TraceBuilder, open_db, run_row, store

CHAT = {"gen_ai.operation.name": "chat"}
GPT_4O = {**CHAT, "gen_ai.request.model": "gpt-4o", "gen_ai.provider.name": "openai"}
SONNET = {**CHAT, "gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.system": "anthropic"}


@pytest.fixture
def con(tmp_path):
    connection = open_db(tmp_path)
    yield connection
    connection.close()


def test_two_spellings_of_one_quantity_count_once(con):
    """The Vercel AI SDK's doGenerate span carries ai.usage.* and gen_ai.usage.* with the same
    numbers: 1000 in + 200 out = 1200 tokens, not 2400."""
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    b.span("doGenerate", 0, 900, parent=run, attributes={
        "ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o",
        "ai.model.provider": "openai.chat",
        "ai.usage.inputTokens": 1000, "ai.usage.outputTokens": 200,
        "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 200})
    store(con, b.finished())
    assert span_usage(con, "doGenerate")["usage_input"] == 1000
    row = metered(con, "doGenerate")
    assert (row["input_tokens"], row["output_tokens"], row["tokens"]) == (1000, 200, 1200)
    assert (row["model"], row["provider"]) == ("gpt-4o", "openai")  # openai.chat's first word
    # 1000 × $2.50 + 200 × $10, per million: $0.0025 + $0.002
    assert row["cost_nano"] == nano("0.0045") and row["cost_source"] == "bundled"
    assert run_row(con, b.trace_id(run))["tokens"] == 1200


def test_input_reported_without_its_cache_is_counted_with_it(con):
    """The Anthropic API reports input without cache reads and writes: 100 fresh, 4000 read,
    1000 written is 5100 input tokens. Said by budget.usage.input_includes_cache = false, or
    seen when the input is smaller than its cache. Priced 100 × $3 + 4000 × $0.30 + 1000 ×
    $3.75 + 200 × $15 per million = $0.0003 + $0.0012 + $0.00375 + $0.003 = $0.00825."""
    b = TraceBuilder()
    run = b.run(0, 3_000, None)
    usage = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.cache_read.input_tokens": 4000,
             "gen_ai.usage.cache_creation.input_tokens": 1000, "gen_ai.usage.output_tokens": 200}
    b.span("said", 0, 1_000, parent=run, attributes={
        **SONNET, **usage, "budget.usage.input_includes_cache": False})
    b.span("seen", 1_000, 2_000, parent=run, attributes={**SONNET, **usage})
    # OTel's own convention: input includes its cache (10000 = 6000 fresh + 4000 read)
    b.span("inclusive", 2_000, 3_000, parent=run, attributes={
        **GPT_4O, "gen_ai.usage.input_tokens": 10_000,
        "gen_ai.usage.cache_read.input_tokens": 4_000, "gen_ai.usage.output_tokens": 1_000})
    store(con, b.finished())
    for name in ("said", "seen"):
        row = metered(con, name)
        assert (row["input_tokens"], row["fresh_input_tokens"], row["cache_read_tokens"],
                row["cache_write_tokens"], row["tokens"]) == (5100, 100, 4000, 1000, 5300)
        assert row["cost_nano"] == nano("0.00825"), name
    row = metered(con, "inclusive")
    assert (row["input_tokens"], row["fresh_input_tokens"], row["tokens"]) == (10_000, 6_000,
                                                                              11_000)
    # 6000 × $2.50 + 4000 × $1.25 + 1000 × $10 = $0.015 + $0.005 + $0.01
    assert row["cost_nano"] == nano("0.03")


def test_reasoning_inside_output_counts_once_and_beside_it_is_added(con):
    """OTel counts reasoning inside output (500 out, 200 of them reasoning: 500); some emitters
    report it beside (100 out and 300 reasoning: 400). gpt-4o has no reasoning rate: reasoning
    is charged at the output rate, $10 per million."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None)
    b.span("inside", 0, 1_000, parent=run, attributes={
        **GPT_4O, "gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 500,
        "gen_ai.usage.reasoning.output_tokens": 200})
    b.span("beside", 1_000, 2_000, parent=run, attributes={
        **GPT_4O, "gen_ai.usage.input_tokens": 0, "gen_ai.usage.output_tokens": 100,
        "gen_ai.usage.reasoning.output_tokens": 300})
    store(con, b.finished())
    inside, beside = metered(con, "inside"), metered(con, "beside")
    assert (inside["output_tokens"], inside["reasoning_tokens"], inside["tokens"]) == (500, 200,
                                                                                      500)
    assert (beside["output_tokens"], beside["reasoning_tokens"], beside["tokens"]) == (400, 300,
                                                                                      400)
    assert inside["cost_nano"] == nano("0.005") and beside["cost_nano"] == nano("0.004")


def test_a_total_alone_counts_its_tokens_and_leaves_the_cost_unknown(con):
    """llm.usage.total_tokens is read only when input and output are both absent; a total
    cannot be priced (which part is input?), so the span is unpriced, never $0."""
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    b.span("total", 0, 500, parent=run, attributes={**GPT_4O, "llm.usage.total_tokens": 1234})
    b.span("both", 500, 1_000, parent=run, attributes={
        **GPT_4O, "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.total_tokens": 999})
    store(con, b.finished())
    total = metered(con, "total")
    assert (total["tokens"], total["input_tokens"], total["cost_nano"],
            total["cost_source"]) == (1234, None, None, "unpriced")
    assert metered(con, "both")["tokens"] == 15  # the total beside them is not read
    r = run_row(con, b.trace_id(run))
    assert (r["tokens"], r["cost_complete"], r["unpriced_models"]) == (1249, False, ["gpt-4o"])


def test_reported_costs_in_the_order_of_the_candidates(con):
    """budget.cost_usd first; gen_ai.usage.cost.amount only in USD (EUR: the next candidate);
    llm.cost.prompt + llm.cost.completion when llm.cost.total is absent; a reported 0 on a
    span with tokens is a stream that reported none, priced instead; on a span without tokens
    (a tool) $0 is a cost."""
    b = TraceBuilder()
    run = b.run(0, 5_000, None)
    b.span("euro", 0, 1_000, parent=run, attributes={
        "gen_ai.usage.cost.amount": 0.5, "gen_ai.usage.cost.currency": "EUR",
        "operation.cost": 0.55})
    b.span("dollar", 1_000, 2_000, parent=run, attributes={
        "gen_ai.usage.cost.amount": "0.25", "gen_ai.usage.cost.currency": " usd ",
        "operation.cost": 9})
    b.span("parts", 2_000, 3_000, parent=run, attributes={
        "llm.cost.prompt": 0.001, "llm.cost.completion": "0.0025", "operation.cost": 9})
    b.span("zero stream", 3_000, 4_000, parent=run, attributes={
        **GPT_4O, "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100,
        "gen_ai.usage.cost": 0})
    b.span("free tool", 4_000, 5_000, parent=run, attributes={"budget.cost_usd": 0})
    store(con, b.finished())
    assert span_usage(con, "euro")["usage_ignored"] == ["gen_ai.usage.cost.amount"]
    assert (metered(con, "euro")["cost_nano"], metered(con, "dollar")["cost_nano"],
            metered(con, "parts")["cost_nano"]) == (nano("0.55"), nano("0.25"), nano("0.0035"))
    zero = metered(con, "zero stream")
    # 1000 × $2.50 + 100 × $10 per million
    assert (zero["cost_source"], zero["cost_nano"]) == ("bundled", nano("0.0035"))
    free = metered(con, "free tool")
    assert (free["cost_source"], free["cost_nano"]) == ("reported", 0)


@pytest.mark.parametrize(("value", "why"), [
    (-5, "negative"), (2.5, "fractional"), ("many", "a string that holds no number"),
    (float("nan"), "NaN"), (10**12 + 1, "more than 10^12"), (True, "a boolean")])
def test_a_bad_count_is_ignored_with_a_note_and_the_next_spelling_read(con, value, why):
    """An invalid value is as if absent: gen_ai.usage.prompt_tokens (the next spelling) gives
    the input; the bad attribute is named in a note on the trace; nothing is refused."""
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    b.span("call", 0, 900, parent=run, attributes={
        **GPT_4O, "gen_ai.usage.input_tokens": value, "gen_ai.usage.prompt_tokens": "300",
        "gen_ai.usage.output_tokens": 7.0})
    assert store(con, b.finished()) == 2  # both spans stored, no refusal (store asserts none)
    usage = span_usage(con, "call")
    assert (usage["usage_input"], usage["usage_output"]) == (300, 7), why
    assert usage["usage_ignored"] == ["gen_ai.usage.input_tokens"], why
    assert metered(con, "call")["tokens"] == 307
    note = notes(con, b.trace_id(run))["usage_values_ignored"]
    assert "gen_ai.usage.input_tokens" in note and note.startswith("1 span"), why


@pytest.mark.parametrize("value", [-0.01, float("nan"), float("inf"), "cheap", 10**10, False])
def test_a_bad_cost_is_ignored_with_a_note(con, value):
    """A reported cost must be a finite number of USD in [0, 10^9]: else the next candidate
    (operation.cost) is read."""
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    b.span("tool", 0, 900, parent=run, attributes={"budget.cost_usd": value,
                                                    "operation.cost": 0.125})
    store(con, b.finished())
    usage = span_usage(con, "tool")
    assert (usage["cost_reported_nano"], usage["usage_ignored"]) == (nano("0.125"),
                                                                     ["budget.cost_usd"])
    assert "budget.cost_usd" in notes(con, b.trace_id(run))["usage_values_ignored"]


def test_a_span_with_only_bad_values_carries_nothing_but_is_noted(con):
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    b.span("call", 0, 900, parent=run, attributes={**GPT_4O, "gen_ai.usage.input_tokens": -1})
    store(con, b.finished())
    assert con.execute("SELECT count(*) FROM metered_spans").fetchone()[0] == 0
    r = run_row(con, b.trace_id(run))
    # the model step is unmetered and, being ok, possibly billed: the cost is incomplete
    assert (r["tokens"], r["cost_nano"], r["unmetered_steps"], r["cost_complete"]) == (
        0, 0, 1, False)
    assert "usage_values_ignored" in notes(con, b.trace_id(run))


def test_a_long_model_name_with_control_characters_is_stored_and_unpriced(con):
    """A 10 KB model name with control characters is kept as sent (every output escapes it),
    never handed to the price table, and named among the run's unpriced models."""
    name = "evil\x1b[31m\x00\u202e" + "m" * 10_240
    b = TraceBuilder()
    run = b.run(0, 1_000, None)
    b.span("call", 0, 900, parent=run, attributes={
        **CHAT, "gen_ai.request.model": name, "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 1})
    store(con, b.finished())
    row = metered(con, "call")
    assert row["model"] == name and row["cost_source"] == "unpriced"
    assert con.execute("SELECT bundled_ref FROM price_matches WHERE model_ref = ?",
                       [name]).fetchone() == (None,)
    assert run_row(con, b.trace_id(run))["unpriced_models"] == [name]


def test_the_provider_of_a_provider_slash_model_name_and_otel_ids(con):
    """`anthropic/claude-sonnet-4-5` is split into its provider and model; OpenTelemetry's
    `aws.bedrock`, `gcp.vertex_ai`, `azure.ai.openai`, `x_ai` and `mistral_ai` are the price
    table's aws, google, azure, x-ai and mistral."""
    b = TraceBuilder()
    run = b.run(0, 7_000, None)
    usage = {"gen_ai.usage.input_tokens": 1, "gen_ai.usage.output_tokens": 1}
    b.span("slash", 0, 1_000, parent=run, attributes={
        **CHAT, "gen_ai.request.model": "anthropic/claude-sonnet-4-5", **usage})
    for index, (otel, table) in enumerate((("aws.bedrock", "aws"), ("gcp.vertex_ai", "google"),
                                           ("azure.ai.openai", "azure"), ("x_ai", "x-ai"),
                                           ("Mistral_AI", "mistral"))):
        b.span(f"otel {table}", 1_000 + index * 1_000, 2_000 + index * 1_000, parent=run,
               attributes={**CHAT, "gen_ai.request.model": "m", "gen_ai.provider.name": otel,
                           **usage})
    store(con, b.finished())
    slash = metered(con, "slash")
    assert (slash["model"], slash["provider"], slash["model_ref"]) == (
        "claude-sonnet-4-5", "anthropic", "anthropic/claude-sonnet-4-5")
    assert slash["cost_source"] == "bundled"  # 1 × $3 + 1 × $15 per million: $0.000018
    assert slash["cost_nano"] == nano("0.000018")
    for table in ("aws", "google", "azure", "x-ai", "mistral"):
        assert metered(con, f"otel {table}")["provider"] == table


def test_a_stray_http_spans_usage_is_metered_in_the_run_it_joined(con):
    """An HTTP client span in a trace of its own (docs/conventions.md) that joined the one step of
    another trace around it is counted in that run, under that step, and its own trace is no run.
    Inside a tool: its 1000 + 200 tokens are the run's and the tool's (unpriced: an HTTP span naming
    a model is a model step, no stray). Inside a model call that carries 7 + 3 of its own: the model
    span is an aggregate above it (docs/metrics.md §11.2), the run counts the stray's 120.
    (tests/clickhouse/test_conventions_parity.py holds the ClickHouse derivation to the same
    rows.)"""
    b = TraceBuilder(seed=4646, service="stray-usage-svc")
    http = {"http.request.method": "POST", "server.address": "models.example"}
    in_tool = b.span("POST", 1_000, 2_000, kind=SpanKind.CLIENT, attributes={
        **http, "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 200})
    run = b.run(0, 10_000, 10_000)
    tool = b.span("tool", 500, 3_000, parent=run, attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "summarise"})
    in_model = b.span("POST", 21_000, 22_000, kind=SpanKind.CLIENT, attributes={
        **http, "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20})
    second = b.run(20_000, 30_000, 10_000)
    model = b.span("chat m", 20_500, 23_000, parent=second, attributes={
        **CHAT, "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3})
    store(con, b.finished())
    rows = con.execute("SELECT trace_id, span_id, top_step_id, is_metered, tokens, cost_nano "
                       "FROM metered_spans ORDER BY start_ns").fetchall()
    assert rows == [
        (b.trace_id(run), b.span_id(in_tool), b.span_id(tool), True, 1200, None),
        (b.trace_id(second), b.span_id(model), b.span_id(model), False, 10, None),
        (b.trace_id(second), b.span_id(in_model), b.span_id(model), True, 120, None)]
    assert run_row(con, b.trace_id(run))["tokens"] == 1200
    assert run_row(con, b.trace_id(second))["tokens"] == 120
    assert con.execute("SELECT count(*) FROM runs WHERE trace_id IN (?, ?)",
                       [b.trace_id(in_tool), b.trace_id(in_model)]).fetchone() == (0,)


def test_a_provider_attribute_naming_the_instrumentation_is_read_as_absent(con):
    """Strands Agents writes gen_ai.system = strands-agents on every span whatever it calls
    (gen_ai.provider.name under the latest conventions): that names no price table, so it is
    read as absent. Its `chat` span (tests/real_fixtures/otlp/strands.otlp.pb's shape) is then
    priced by its model alone, gpt-4o-mini at openai's $0.15 / $0.075 cache read / $0.60 per
    million: 325 fresh × 0.15 + 896 × 0.075 + 90 × 0.60 = 169.95 → $0.00016995. A
    `provider/model` name's prefix still says: 1000 × 0.15 + 100 × 0.60 → $0.00021."""
    b = TraceBuilder()
    run = b.run(0, 2_000, None)
    b.span("chat", 0, 1_000, parent=run, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.system": "strands-agents",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.prompt_tokens": 1221, "gen_ai.usage.input_tokens": 1221,
        "gen_ai.usage.completion_tokens": 90, "gen_ai.usage.output_tokens": 90,
        "gen_ai.usage.total_tokens": 1311, "gen_ai.usage.cache_read.input_tokens": 896,
        "gen_ai.usage.cache_read_input_tokens": 896})
    b.span("latest conventions", 1_000, 2_000, parent=run, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": " Strands-Agents",
        "gen_ai.request.model": "openai/gpt-4o-mini",
        "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100})
    store(con, b.finished())
    chat = metered(con, "chat")
    assert (chat["model"], chat["provider"], chat["tokens"]) == ("gpt-4o-mini", None, 1311)
    assert (chat["cost_source"], chat["cost_nano"]) == ("bundled", nano("0.00016995"))
    assert chat["price_ref"].startswith("bundled openai/gpt-4o-mini")
    latest = metered(con, "latest conventions")
    assert (latest["provider"], latest["cost_nano"]) == ("openai", nano("0.00021"))
    r = run_row(con, b.trace_id(run))
    assert (r["cost_nano"], r["cost_complete"], r["unpriced_models"]) == (
        nano("0.00037995"), True, [])
