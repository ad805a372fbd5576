"""The hand-built traces of the recognition tests (docs/conventions.md; real OpenTelemetry SDK
spans through tests/support/trace_builder.py), shared with
tests/clickhouse/test_conventions_parity.py, which derives the same spans on ClickHouse and compares
every step and run: recognised_traces (each row of the table: tests/store/test_conventions.py),
call_traces (the shapes frameworks give one call, runs with spans missing:
tests/store/test_conventions_calls.py), text_trace and roll_up_trace (error texts and rule 6's
roll-up: tests/store/test_conventions_classes.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind

from tests.support.trace_builder import TraceBuilder

CLIENT = SpanKind.CLIENT
OP = "gen_ai.operation.name"
OI = "openinference.span.kind"
CHAT = {OP: "chat", "gen_ai.request.model": "gpt-x"}
HTTP = {"http.request.method": "GET", "server.address": "tools.example"}
TOOL = {OP: "execute_tool", "gen_ai.tool.name": "t"}


def recognised_traces() -> tuple[TraceBuilder, dict[str, Any]]:
    """One run per concern; returns the builder and the run spans by concern."""
    b = TraceBuilder(seed=1313, service="conv-svc")
    runs: dict[str, Any] = {}

    # Every row of the table of docs/conventions.md, side by side under one root (so no agent is
    # alone).
    root = runs["rows"] = b.run(0, 60_000, 60_000)
    rows = [
        ("r1", {"budget.step.kind": "backoff", "budget.step.name": "sleep"}, {}),
        ("r2", {OP: "chat", "gen_ai.response.model": "gpt-resp"}, {}),
        ("r2 embeddings", {OP: "embeddings", "gen_ai.request.model": "emb-1"}, {}),
        ("r3", {OP: "retrieval", "gen_ai.data_source.id": "kb"}, {}),
        ("r4", {OI: "LLM", "llm.invocation_parameters": '{"model": "gpt-inv", "t": 0}'}, {}),
        ("r4 reranker", {OI: "RERANKER", "reranker.model_name": "rr"}, {}),
        ("r5", {OI: "RETRIEVER", "tool.name": "search_docs"}, {}),
        ("r6 tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather"}, {}),
        ("r6 model", {"llm.request.type": "chat", "gen_ai.request.model": "gpt-ll"}, {}),
        ("r7", {"ai.operationId": "ai.toolCall", "ai.toolCall.name": "lookup"}, {}),
        ("r8", {"ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-v"}, {}),
        ("r9", {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-c"},
         {"kind": CLIENT}),
        ("r10", {OP: "invoke_agent", "gen_ai.agent.name": "maker"}, {}),
        ("r10 oi", {OI: "AGENT", "agent.name": "crew-a"}, {}),
        ("r10 traceloop", {"traceloop.span.kind": "agent", "traceloop.entity.name": "tl"}, {}),
        ("r11", {OP: "some_new_op"}, {"kind": CLIENT}),
        ("r12 grpc", {"rpc.system": "grpc", "rpc.service": "pay.Ledger", "rpc.method": "Post"},
         {"kind": CLIENT}),
        ("r12 http", {"http.request.method": "GET", "server.address": "api.example.com",
                      "url.template": "/v1/items/{id}"}, {"kind": CLIENT}),
        ("r12 old http", {"http.method": "GET", "http.url": "https://Old.Example.com:8443/x?q=1"},
         {"kind": CLIENT}),
        ("r12 bare", {"http.request.method": "POST"}, {"kind": CLIENT}),
        # not steps
        ("wrapper", {OP: "invoke_workflow"}, {}),
        ("chain", {OI: "CHAIN"}, {}),
        ("internal http", {"http.request.method": "GET"}, {}),
        ("internal model", {"gen_ai.request.model": "x"}, {}),
        # docs/conventions.md row 11: only a leaf call that leaves the process; building an
        # agent never
        ("internal op", {OP: "execute_event_loop_cycle"}, {}),
        ("create agent", {OP: "create_agent", "gen_ai.agent.name": "maker"}, {"kind": CLIENT}),
        # row 10 only with a name attribute; row 9 only for model operations
        ("unnamed agent", {OI: "AGENT"}, {}),
        ("agent with system", {OP: "invoke_agent", "gen_ai.system": "openai"}, {"kind": CLIENT}),
        # docs/conventions.md: conflicting conventions follow the table's order
        ("conflict", {OP: "chat", "gen_ai.request.model": "gpt-first", OI: "TOOL",
                      "tool.name": "never"}, {}),
        ("conflict 2", {OI: "TOOL", "tool.name": "oi-tool", "traceloop.span.kind": "agent"},
         {}),
    ]
    for index, (name, attributes, extra) in enumerate(rows):
        b.span(name, index * 100, index * 100 + 50, parent=root, attributes=attributes,
               **extra)

    # Wrappers are transparent; a lone agent with steps below is transparent too, twice over.
    lone = runs["lone"] = b.run(0, 10_000, 10_000)
    workflow = b.span("workflow", 0, 10_000, parent=lone, attributes={OP: "invoke_workflow"})
    outer = b.span("outer agent", 0, 10_000, parent=workflow, attributes={
        OP: "invoke_agent", "gen_ai.agent.name": "outer"})
    inner = b.span("inner agent", 0, 9_000, parent=outer, attributes={
        OI: "AGENT", "agent.name": "inner"})
    chain = b.span("chain", 0, 9_000, parent=inner, attributes={OI: "CHAIN"})
    b.span("llm", 0, 4_000, parent=chain, attributes={OI: "LLM", "llm.model_name": "m"})
    tool = b.span("tool", 4_000, 9_000, parent=chain, attributes={OI: "TOOL",
                                                                  "tool.name": "fetch"})
    b.span("tool http", 4_000, 9_000, parent=tool, kind=CLIENT,
           attributes={"http.request.method": "GET", "server.address": "svc"})

    # Two agents side by side stay subagent steps; a lone agent with nothing inside is one.
    crew = runs["crew"] = b.run(0, 10_000, 10_000)
    for who, start in (("alice", 0), ("bob", 5_000)):
        agent = b.span(f"agent {who}", start, start + 5_000, parent=crew,
                       attributes={OP: "invoke_agent", "gen_ai.agent.name": who})
        b.span(f"chat {who}", start, start + 4_000, parent=agent,
               attributes={OP: "chat", "gen_ai.request.model": "m"})
    empty = runs["empty agent"] = b.run(0, 10_000, 10_000)
    b.span("failed agent", 0, 100, parent=empty, error=True,
           attributes={OP: "invoke_agent", "gen_ai.agent.name": "early"})

    # An agent alone under a tool step: transparent there too; its model call is the tool's.
    under = runs["agent under step"] = b.run(0, 10_000, 10_000)
    handoff = b.span("handoff tool", 0, 8_000, parent=under,
                     attributes={OP: "execute_tool", "gen_ai.tool.name": "handoff"})
    helper = b.span("helper agent", 0, 8_000, parent=handoff,
                    attributes={OP: "invoke_agent", "gen_ai.agent.name": "helper"})
    b.span("helper chat", 0, 7_000, parent=helper,
           attributes={OP: "chat", "gen_ai.request.model": "m"})
    b.span("side chat", 8_000, 9_000, parent=under,
           attributes={OP: "chat", "gen_ai.request.model": "m"})

    # A tool inside a model call stands beside it; the model is not active while it runs.
    stream = runs["tool in model"] = b.run(0, 10_000, 10_000)
    model = b.span("doStream", 0, 6_000, parent=stream, attributes={
        "ai.operationId": "ai.streamText.doStream", "ai.model.id": "gpt-v"})
    b.span("toolCall a", 1_000, 3_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "a"})
    b.span("toolCall b", 2_000, 4_000, parent=model, attributes={
        "ai.operationId": "ai.toolCall", "ai.toolCall.name": "b"})

    # Pure auto-instrumentation: the trace is one model call, and it failed.
    runs["one call"] = b.span("chat gpt-4o", 0, 2_000, kind=CLIENT, error=True,
                              status_message="Error code: 503 - overloaded", attributes={
                                  OP: "chat", "gen_ai.request.model": "gpt-4o",
                                  "gen_ai.system": "openai",
                                  "error.type": "<class 'openai.InternalServerError'>"})
    runs["one http call"] = b.span("GET", 0, 1_000, kind=CLIENT, attributes={
        "http.request.method": "GET", "server.address": "api.example.com",
        "http.response.status_code": 429})

    # An HTTP client span inside a step is no step; inside an agent it is one.
    nested = runs["http nesting"] = b.run(0, 10_000, 10_000)
    fetch = b.span("fetch tool", 0, 3_000, parent=nested,
                   attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"})
    b.span("fetch http", 0, 3_000, parent=fetch, kind=CLIENT,
           attributes={"http.request.method": "GET", "server.address": "a"})
    agent = b.span("planner", 3_000, 9_000, parent=nested,
                   attributes={OP: "invoke_agent", "gen_ai.agent.name": "planner"})
    b.span("planner http", 3_000, 5_000, parent=agent, kind=CLIENT,
           attributes={"http.request.method": "POST", "server.address": "b",
                       "http.route": "/plan"})
    return b, runs


def call_traces() -> tuple[TraceBuilder, dict[str, Any]]:
    """One run per concern; returns the builder and the run spans by concern. Every trace here
    has its root, except those under "rootless", whose roots are left out of finished()."""
    b = TraceBuilder(seed=3333, service="calls-svc")
    runs: dict[str, Any] = {}

    # Strands: each event-loop cycle is an in-process operation around the calls it makes.
    run = runs["cycles"] = b.run(0, 10_000, 10_000)
    agent = b.span("invoke_agent helper", 0, 10_000, parent=run,
                   attributes={OP: "invoke_agent", "gen_ai.agent.name": "helper"})
    for number, start in enumerate((0, 5_000)):
        cycle = b.span(f"cycle {number}", start, start + 5_000, parent=agent,
                       attributes={OP: "execute_event_loop_cycle"})
        b.span(f"chat {number}", start, start + 2_000, parent=cycle, attributes=CHAT)
        tool = b.span(f"tool {number}", start + 2_000, start + 5_000, parent=cycle,
                      attributes={OP: "execute_tool", "gen_ai.tool.name": "search"})
        b.span(f"tool {number} http", start + 2_000, start + 5_000, parent=tool, kind=CLIENT,
               attributes=HTTP)

    # Row 11: a call of another operation that leaves the process is a step when it is a leaf,
    # and a wrapper when a step lies below it; an HTTP call beside that step then stands alone.
    run = runs["row 11"] = b.run(0, 10_000, 10_000)
    b.span("remote op", 0, 1_000, parent=run, kind=CLIENT, attributes={OP: "remote_op"})
    task = b.span("remote task", 1_000, 9_000, parent=run, kind=CLIENT,
                  attributes={OP: "execute_task"})
    b.span("task chat", 1_000, 4_000, parent=task, attributes=CHAT)
    b.span("task http", 5_000, 8_000, parent=task, kind=CLIENT, attributes=HTTP)

    # One call, two nested spans: an instrumentation's model span around an SDK's own, whatever
    # each names the model; a tool around the same tool. The inner one is the step.
    run = runs["nested twins"] = b.run(0, 10_000, 10_000)
    outer = b.span("llm outer", 0, 3_000, parent=run,
                   attributes={OI: "LLM", "llm.model_name": "fake-model"})
    b.span("chat inner", 100, 2_900, parent=outer,
           attributes={OP: "chat", "gen_ai.request.model": "openai/fake-model"}, error=True,
           status_message="Error code: 503 - overloaded")
    tool = b.span("tool outer", 3_000, 6_000, parent=run,
                  attributes={OI: "TOOL", "tool.name": "fetch"})
    b.span("tool inner", 3_100, 5_900, parent=tool,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"})
    # a tool inside another tool is a nested step, not a twin
    other = b.span("tool caller", 6_000, 9_000, parent=run,
                   attributes={OI: "TOOL", "tool.name": "plan"})
    b.span("tool callee", 6_100, 8_900, parent=other,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"})

    # Budget steps are the agent's own record: a retry attempt inside its step stays a step;
    # an instrumentation's span inside a budget step of its kind is the wrapper instead.
    run = runs["budget steps"] = b.run(0, 10_000, 10_000)
    fetch = b.step(run, "tool", "fetch", 0, 4_000)
    for attempt, (start, end) in enumerate(((0, 1_000), (1_500, 4_000)), 1):
        b.span(f"attempt {attempt}", start, end, parent=fetch, attributes={
            "budget.step.kind": "tool", "budget.step.name": "fetch", "budget.attempt": attempt})
    model = b.step(run, "model", "gpt-x", 4_000, 8_000,
                   **{"budget.allocated_ms": 5_000, "budget.outcome": "ok"})
    b.span("sdk chat", 4_100, 7_900, parent=model, kind=CLIENT, attributes=CHAT)

    # One call, two sibling spans from two scopes: the inner is the step. From one scope they
    # are two calls, even one inside the other. Two parallel calls, the second inside the
    # first, each recorded twice: two steps, each pairing with its own twin.
    run = runs["sibling twins"] = b.run(0, 10_000, 10_000)
    b.span("chat library", 0, 2_000, parent=run, attributes=CHAT, scope="library")
    b.span("chat sdk", 10, 1_990, parent=run, attributes=CHAT, scope="sdk", error=True,
           status_message="Error code: 429 - rate limited")
    b.span("chat one", 3_000, 5_000, parent=run, attributes=CHAT, scope="sdk")
    b.span("chat two", 3_500, 4_500, parent=run, attributes=CHAT, scope="sdk")
    b.span("first library", 6_000, 9_000, parent=run, attributes=CHAT, scope="library")
    b.span("first sdk", 6_010, 8_990, parent=run, attributes=CHAT, scope="sdk")
    b.span("second library", 7_000, 8_000, parent=run, attributes=CHAT, scope="library")
    b.span("second sdk", 7_010, 7_990, parent=run, attributes=CHAT, scope="sdk")

    # Framework bookkeeping, an MCP client's call, an agent span with no name.
    run = runs["bookkeeping"] = b.run(0, 10_000, 10_000)
    workflow = b.span("agent workflow", 0, 10_000, parent=run, attributes={OI: "AGENT"})
    b.span("tool a", 0, 2_000, parent=workflow,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "a"})
    b.span("tool b", 0, 3_000, parent=workflow,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "b"})
    b.span("merged", 3_000, 3_001, parent=workflow,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "(merged tools)"})
    b.span("tools/call fetch_report", 4_000, 6_000, parent=workflow, kind=CLIENT,
           attributes={"mcp.method.name": "tools/call"})

    # HTTP client spans hung beside their tool (a tracer that does not make its tool span
    # current): inside exactly one tool and no other step, they are the tool's.
    run = runs["beside"] = b.run(0, 10_000, 10_000)
    b.span("lookup", 0, 3_000, parent=run, ok=True,
           attributes={OI: "TOOL", "tool.name": "lookup"})
    b.span("lookup http", 100, 2_900, parent=run, kind=CLIENT,
           attributes={**HTTP, "http.response.status_code": 503})
    # inside two overlapping tools: it stays where it is
    b.span("left", 4_000, 7_000, parent=run, attributes={OI: "TOOL", "tool.name": "left"})
    b.span("right", 4_500, 7_500, parent=run, attributes={OI: "TOOL", "tool.name": "right"})
    b.span("shared http", 5_000, 6_000, parent=run, kind=CLIENT, attributes=HTTP)
    # inside a tool and a model call running beside it: it stays too
    b.span("slow tool", 8_000, 9_900, parent=run, attributes={OI: "TOOL", "tool.name": "slow"})
    b.span("side chat", 8_000, 9_900, parent=run, attributes=CHAT)
    b.span("side http", 8_500, 9_000, parent=run, kind=CLIENT, attributes=HTTP)

    # A span whose parent never arrived counts as a child of the run span.
    run = runs["orphan"] = b.run(0, 10_000, 10_000)
    lost = b.span("lost parent", 0, 9_000, parent=run)
    b.span("orphan chat", 1_000, 3_000, parent=lost, attributes=CHAT)
    runs["lost"] = lost

    # The run's agent: a subagent beside a tool belongs to the service; nested lone agents
    # to the outermost.
    run = runs["agent beside tool"] = b.run(0, 10_000, 10_000)
    sub = b.span("researcher", 0, 5_000, parent=run,
                 attributes={OP: "invoke_agent", "gen_ai.agent.name": "researcher"})
    b.span("researcher chat", 0, 4_000, parent=sub, attributes=CHAT)
    b.span("after tool", 5_000, 9_000, parent=run,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "after"})
    run = runs["nested agents"] = b.run(0, 10_000, 10_000)
    outer_agent = b.span("outer agent", 0, 9_000, parent=run,
                         attributes={OI: "AGENT", "agent.name": "outer"})
    inner_agent = b.span("inner agent", 0, 9_000, parent=outer_agent,
                         attributes={OP: "invoke_agent", "gen_ai.agent.name": "inner"})
    b.span("agent chat", 0, 4_000, parent=inner_agent, attributes=CHAT)

    # A trace whose root never arrives (smolagents never ends the agent span of a run that
    # raised): measured from its earliest span whose parent is missing.
    root = runs["rootless"] = b.span("agent.run", 0, 12_000, attributes={OI: "AGENT"})
    first = b.span("step 1", 1_000, 4_000, parent=root, attributes={OI: "CHAIN"})
    b.span("rootless chat", 1_000, 3_500, parent=first, error=True,
           attributes={OI: "LLM", "llm.model_name": "gpt-x"}, exceptions=["openai.APIError"],
           messages=["Error code: 503 - Service Unavailable"])
    second = b.span("step 2", 5_000, 9_000, parent=root, attributes={OI: "CHAIN"})
    b.span("rootless tool", 5_000, 8_000, parent=second,
           attributes={OI: "TOOL", "tool.name": "search"})
    # Runs nested 40 deep (each span with its own budget): 16 are measured as runs, the deeper
    # ones as part of the 16th; the outermost run's latest end is the deepest span's.
    parent = runs["nested runs"] = b.run(0, 9_000, 10_000)
    for depth in range(1, 40):
        parent = b.span(f"nested run {depth}", depth, 9_000 + (2_000 if depth == 39 else 0),
                        parent=parent, attributes={"budget.total_ms": 10_000 - depth})
    # exception.message decides where the type says nothing (pydantic-ai's own tool timeout)
    run = runs["message"] = b.run(0, 10_000, 10_000)
    b.span("execute_tool fetch", 0, 300, parent=run, error=True,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"},
           exceptions=["pydantic_ai.exceptions.ToolRetryError"],
           messages=["Timed out after 0.3 seconds."])
    return b, runs


def finished_spans(b: TraceBuilder, runs: dict[str, Any]) -> list:
    """Every span but those that never arrive: the lost parent and the rootless root."""
    missing = {b.span_id(runs["lost"]), b.span_id(runs["rootless"])}
    return [span for span in b.finished() if b.span_id(span) not in missing]


# name, attributes, exception types, status ("error", "ok" or ""), status message, expected
TEXT_CASES = [
    ("openai 500", {"error.type": "<class 'openai.InternalServerError'>"}, [], "error", "",
     "upstream_error"),
    ("openai 429", {"error.type": "<class 'openai.RateLimitError'>"}, [], "error", "",
     "upstream_error"),
    ("openai 404", {"error.type": "openai.NotFoundError"}, [], "error", "", "client_error"),
    ("openai auth", {"error.type": "AuthenticationError"}, [], "error", "", "client_error"),
    ("gateway timeout", {"error.type": "GatewayTimeout"}, [], "error", "", "upstream_error"),
    ("qualified timeout", {}, ["httpx.ReadTimeout"], "error", "", "client_timeout"),
    ("short timeout", {}, ["ReadTimeout"], "error", "", "client_timeout"),
    ("message 503", {}, [], "error", "Error code: 503 - The server is overloaded",
     "upstream_error"),
    ("message status 404", {}, [], "error", "HTTP status 404", "client_error"),
    ("message matches nothing", {}, [], "error", "it broke", "error"),
    ("message on an ok span is not read", {}, [], "", "Error code: 503", "ok"),
    ("unspecific then specific", {"error.type": "ToolRetryError"}, ["ConnectTimeout"], "error",
     "", "client_timeout"),
    ("unspecific only", {"error.type": "ToolRetryError"}, [], "", "", "error"),
    ("older http.status_code", {"http.status_code": "503"}, [], "", "", "upstream_error"),
    ("newer http wins", {"http.response.status_code": 200, "http.status_code": 503}, [], "", "",
     "ok"),
    ("agents timeout result", {"output.value": "Tool 'lookup' timed out after 5 seconds."}, [],
     "", "", "client_timeout"),
    ("agents timeout result, genai", {"gen_ai.tool.call.result":
                                      "Tool 'lookup' timed out after 5.0 seconds."}, [], "ok",
     "", "client_timeout"),
    ("result text on an error span", {"output.value": "Tool 'x' timed out after 1 seconds."},
     [], "error", "", "error"),
    ("result text that is no timeout", {"output.value": "the tool 'x' timed out? no"}, [], "",
     "", "ok"),
]


def _status(span_kwargs: dict[str, Any], status: str) -> dict[str, Any]:
    return {**span_kwargs, "error": status == "error", "ok": status == "ok"}


def text_trace() -> tuple[TraceBuilder, Any]:
    b = TraceBuilder(seed=31)
    run = b.run(0, 100_000, 100_000)
    for index, (name, attributes, exceptions, status, message, _) in enumerate(TEXT_CASES):
        b.span(name, index * 10, index * 10 + 5, parent=run, exceptions=exceptions,
               status_message=message, attributes={**TOOL, **attributes},
               **_status({}, status))
    return b, run


def roll_up_trace() -> tuple[TraceBuilder, Any]:
    """Each top-level tool with spans below it; the tool's span name says what it checks."""
    b = TraceBuilder(seed=36)
    run = b.run(0, 100_000, 100_000)
    http = {"http.request.method": "GET", "server.address": "svc"}
    cases: list[tuple[str, str, list[tuple[float, float, dict[str, Any], list[str]]]]] = [
        ("error tool around a 503", "error", [(0, 5, {"http.response.status_code": 503}, [])]),
        ("unset tool around a 503", "", [(0, 5, {"http.response.status_code": 503}, [])]),
        ("ok tool around a 503", "ok", [(0, 5, {"http.response.status_code": 503}, [])]),
        ("retried 503 then 200", "error", [(0, 3, {"http.response.status_code": 503}, []),
                                           (3, 6, {"http.response.status_code": 200}, [])]),
        ("own specific class stays", "error",
         [(0, 5, {"http.response.status_code": 503}, [])]),
        ("fallback error takes a nested timeout", "error",
         [(0, 5, {}, ["httpx.ReadTimeout"])]),
        ("tie on end: later start wins", "error",
         [(0, 6, {"http.response.status_code": 503}, []),
          (2, 6, {"rpc.grpc.status_code": 4}, [])]),
        ("a later wrapper exception is passed over", "error",
         [(0, 3, {"http.response.status_code": 503}, []), (3, 6, {}, ["ValueError"])]),
        ("evidence two levels down", "error", [(0, 5, {"budget.outcome": "cancelled"}, [])]),
    ]
    for index, (name, status, children) in enumerate(cases):
        start = index * 100
        extra = {"error.type": "KeyError"} if "fallback" in name else {}
        if "own specific" in name:
            extra = {"error.type": "ReadTimeout"}
        tool = b.span(name, start, start + 50, parent=run, attributes={**TOOL, **extra},
                      **_status({}, status))
        parent = tool
        if "two levels" in name:
            parent = b.span(f"{name} wrapper", start, start + 10, parent=tool)
        for number, (s, e, attributes, exceptions) in enumerate(children):
            b.span(f"{name} child {number}", start + s, start + e, parent=parent,
                   kind=SpanKind.CLIENT if "http" in str(attributes) else SpanKind.INTERNAL,
                   attributes={**http, **attributes}, exceptions=exceptions)
    return b, run


def revised_traces() -> tuple[TraceBuilder, dict[str, Any]]:
    """The span shapes and rules across traces of docs/conventions.md, one concern per run
    (tests/store/test_conventions_across.py): a callable's method, event records, a model step
    without a model name, HTTP client spans beside a model call, and HTTP client spans in a trace of
    their own. Every span arrives."""
    b = TraceBuilder(seed=4646, service="revised-svc")
    runs: dict[str, Any] = {}
    oi_tool = {OI: "TOOL"}

    # A callable object's method names no tool: fetch_report.__call__ is fetch_report.
    run = runs["callable"] = b.run(0, 10_000, 10_000)
    b.span("fetch_report.__call__", 0, 1_000, parent=run,
           attributes={**oi_tool, "tool.name": "fetch_report.__call__"})
    b.span("Planner.__call__", 1_000, 2_000, parent=run, attributes={OP: "execute_tool"})
    b.span(".__call__", 2_000, 3_000, parent=run, attributes={OP: "execute_tool"})

    # Event records: a 0 ms `error` child of the failed call, unnamed, below a span of its kind.
    run = runs["event records"] = b.run(0, 10_000, 10_000)
    failed = b.span("fetch tool", 0, 2_000, parent=run, error=True,
                    attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch"},
                    exceptions=["httpx.ReadTimeout"])
    b.span("error", 2_000, 2_000, parent=failed, error=True, attributes={OP: "execute_tool"},
           exceptions=["ToolException"])
    llm = b.span("llm call", 3_000, 5_000, parent=run, error=True,
                 attributes={OI: "LLM", "llm.model_name": "gpt-x"},
                 exceptions=["openai.RateLimitError"])
    b.span("error", 5_000, 5_000, parent=llm, error=True, attributes={OI: "LLM"})
    # not merged: a named 0 ms child under a tool of another name is a nested step, and an
    # unnamed tool with no span of its kind above it is a step
    search = b.span("search tool", 6_000, 8_000, parent=run,
                    attributes={OP: "execute_tool", "gen_ai.tool.name": "search"})
    b.span("fetch_report", 7_000, 7_000, parent=search,
           attributes={OP: "execute_tool", "gen_ai.tool.name": "fetch_report"})
    b.span("lonely", 8_000, 9_000, parent=run, attributes={OP: "execute_tool"})

    # A wrapper exception recorded after the client's timeout is passed over by the roll-up.
    run = runs["wrapper exception"] = b.run(0, 10_000, 10_000)
    tool = b.span("wrapped tool", 0, 3_000, parent=run, error=True,
                  attributes={OP: "execute_tool", "gen_ai.tool.name": "wrapped"})
    b.span("wrapped http", 0, 2_000, parent=tool, kind=CLIENT,
           attributes=HTTP, exceptions=["httpx.ReadTimeout"], error=True)
    b.span("framework", 2_000, 2_900, parent=tool, exceptions=["ToolInvocationError"],
           error=True)

    # An HTTP client span beside its model call (the model span not made current).
    run = runs["beside model"] = b.run(0, 10_000, 10_000)
    b.span("chat beside", 0, 3_000, parent=run, kind=CLIENT, attributes=CHAT)
    b.span("chat http", 100, 2_900, parent=run, kind=CLIENT,
           attributes={**HTTP, "http.response.status_code": 503})

    # A model step without a model name: the failed call of a service whose named spans of that
    # span name all say gpt-4o; not merged: two names, none, another service.
    gen = {OI: "LLM"}
    for service, names in (("named-svc", ["gpt-4o", "gpt-4o"]), ("two-names-svc", ["a", "b"]),
                           ("no-names-svc", [])):
        run = runs[f"unnamed {service}"] = b.run(0, 10_000, 10_000)
        b.span(f"Generator.run {service}", 0, 1_000, parent=run, service=service, error=True,
               attributes=gen, exceptions=["openai.InternalServerError"])
        for index, model in enumerate(names):
            named = runs[f"named {service} {index}"] = b.run(0, 10_000, 10_000)
            b.span(f"Generator.run {service}", 0, 1_000, parent=named, service=service,
                   attributes={**gen, "llm.model_name": model})
    # the same span name in another service names nothing here
    run = runs["unnamed other service"] = b.run(0, 10_000, 10_000)
    b.span("Generator.run named-svc", 0, 1_000, parent=run, service="other-svc",
           attributes=gen, error=True)

    # HTTP client spans in a trace of their own, in service stray-svc (its run spans are of it
    # too): two runs whose tools overlap in time (concurrent runs of one service).
    stray = {"service": "stray-svc", "kind": CLIENT}
    run_a = runs["stray run a"] = b.span("agent run a", 0, 10_000, service="stray-svc",
                                         attributes={"budget.total_ms": 10_000})
    b.span("tool a", 0, 3_000, parent=run_a, service="stray-svc", ok=True,
           attributes={OI: "TOOL", "tool.name": "lookup"})
    run_b = runs["stray run b"] = b.span("agent run b", 1_000, 10_000, service="stray-svc",
                                         attributes={"budget.total_ms": 10_000})
    b.span("tool b", 1_000, 4_000, parent=run_b, service="stray-svc",
           attributes={OI: "TOOL", "tool.name": "lookup"})
    b.span("model b", 5_000, 8_000, parent=run_b, service="stray-svc", attributes=CHAT)
    runs["stray in a"] = b.span("GET in a", 100, 900, **stray,
                                attributes={**HTTP, "http.response.status_code": 503})
    runs["stray in both"] = b.span("GET in both", 1_500, 2_500, **stray, attributes=HTTP)
    runs["stray in b"] = b.span("GET in b", 3_200, 3_900, **stray, attributes={
        "http.method": "GET", "http.url": "https://tools.example/x"}, exceptions=[
        "httpx.ReadTimeout"], error=True)
    runs["stray in model"] = b.span("POST in model", 5_100, 7_900, **stray, attributes={
        "http.request.method": "POST", "server.address": "api.openai.example",
        "http.response.status_code": 429})
    runs["stray in none"] = b.span("GET in none", 9_000, 9_500, **stray, attributes=HTTP)
    # not strays: a model call of row 9, a span with its own budget, a gRPC call, another
    # service's, a trace of two spans
    runs["row 9 alone"] = b.span("chat alone", 200, 800, **stray, attributes={
        "gen_ai.system": "openai", "gen_ai.request.model": "gpt-x"})
    runs["budgeted http"] = b.span("GET budgeted", 200, 800, **stray,
                                   attributes={**HTTP, "budget.total_ms": 1_000})
    runs["grpc alone"] = b.span("grpc alone", 200, 800, **stray, attributes={
        "rpc.system": "grpc", "rpc.service": "a.B", "rpc.method": "C"})
    runs["other service http"] = b.span("GET other service", 200, 800, service="elsewhere",
                                        kind=CLIENT, attributes=HTTP)
    two = runs["two spans"] = b.span("GET two", 200, 800, **stray, attributes=HTTP)
    b.span("GET two child", 300, 700, parent=two, service="stray-svc", kind=CLIENT,
           attributes=HTTP)
    preparation_traces(b, runs)
    return b, runs


# An LLM span as LlamaIndex's OpenInference spans carry it, and what a model's answer adds.
LLM = {OI: "LLM", "llm.model_name": "gpt-x", "output.value": '{"messages": []}'}
ANSWERED = {**LLM, "llm.token_count.total": 18, "llm.output_messages.0.message.role": "assistant"}


def preparation_traces(b: TraceBuilder, runs: dict[str, Any]) -> None:
    """docs/conventions.md, "A preparation span is not a call": a model span with no sign of a call
    (no span below it, not CLIENT, no evidence nor error, no usage nor response) right before a
    model call of the same name under the same parent, one run per case (concern "prep …")."""
    # LlamaIndex's shape: the preparation, then the call (a wrapper around the LLM's own span,
    # the client's POST below it), under one workflow step; then a second call whose only sign
    # is its usage (no HTTP instrumentation).
    run = runs["prep llama"] = b.run(0, 10_000, 10_000)
    step = b.span("run_agent_step", 0, 9_000, parent=run, attributes={OI: "CHAIN"})
    b.span("prepare 1", 0, 1, parent=step, attributes=LLM)
    outer = b.span("achat outer", 2, 3_000, parent=step, attributes=LLM)
    inner = b.span("achat inner", 3, 2_990, parent=outer, attributes=ANSWERED)
    b.span("POST", 10, 2_980, parent=inner, kind=CLIENT,
           attributes={**HTTP, "http.response.status_code": 200})
    b.span("prepare 2", 4_000, 4_001, parent=step, attributes=LLM)
    b.span("achat usage only", 4_002, 6_000, parent=step,
           attributes={**LLM, "llm.token_count.total": 18})
    # the call failed (503 on its HTTP span): its preparation is still none
    b.span("prepare 3", 7_000, 7_001, parent=step, attributes=LLM)
    failed = b.span("achat failed", 7_002, 8_000, parent=step, error=True, attributes=LLM,
                    exceptions=["openai.InternalServerError"])
    b.span("POST failed", 7_010, 7_990, parent=failed, kind=CLIENT,
           attributes={**HTTP, "http.response.status_code": 503})

    # Not merged:
    # two short calls in parallel, neither answering anything it records
    run = runs["prep parallel"] = b.run(0, 10_000, 10_000)
    b.span("parallel 1", 0, 100, parent=run, attributes=LLM)
    b.span("parallel 2", 50, 150, parent=run, attributes=LLM)
    # a cached answer (no I/O, but it carries the response) right before a real call
    run = runs["prep cached"] = b.run(0, 10_000, 10_000)
    b.span("cached answer", 0, 1, parent=run,
           attributes={**LLM, "llm.output_messages.0.message.role": "assistant"})
    b.span("real call", 2, 1_000, parent=run, attributes=ANSWERED)
    # a quiet span followed by another quiet one: nothing shows a call
    run = runs["prep quiet pair"] = b.run(0, 10_000, 10_000)
    b.span("quiet 1", 0, 1, parent=run, attributes=LLM)
    b.span("quiet 2", 2, 3, parent=run, attributes=LLM)
    # followed by a call of another model, by a tool first, or by its HTTP call beside it
    run = runs["prep other model"] = b.run(0, 10_000, 10_000)
    b.span("quiet before other", 0, 1, parent=run, attributes=LLM)
    b.span("other model call", 2, 1_000, parent=run,
           attributes={**ANSWERED, "llm.model_name": "gpt-y"})
    run = runs["prep tool between"] = b.run(0, 10_000, 10_000)
    b.span("quiet before tool", 0, 1, parent=run, attributes=LLM)
    b.span("tool between", 2, 10, parent=run, attributes={OI: "TOOL", "tool.name": "lookup"})
    b.span("call after tool", 20, 1_000, parent=run, attributes=ANSWERED)
    run = runs["prep beside http"] = b.run(0, 10_000, 10_000)
    b.span("model not current", 0, 1_000, parent=run, attributes=LLM)
    b.span("its http beside", 10, 990, parent=run, kind=CLIENT,
           attributes={**HTTP, "http.response.status_code": 200})
    b.span("next call", 1_100, 2_000, parent=run, attributes=ANSWERED)
    # a quiet span that is a CLIENT span (a call that leaves the process), or that failed
    run = runs["prep client"] = b.run(0, 10_000, 10_000)
    b.span("quiet client", 0, 1, parent=run, kind=CLIENT, attributes=CHAT)
    b.span("client call", 2, 1_000, parent=run, kind=CLIENT,
           attributes={**CHAT, "gen_ai.usage.output_tokens": 7})
    run = runs["prep failed"] = b.run(0, 10_000, 10_000)
    b.span("quiet failed", 0, 1, parent=run, attributes=LLM, error=True)
    b.span("call after failure", 2, 1_000, parent=run, attributes=ANSWERED)
