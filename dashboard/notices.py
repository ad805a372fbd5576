"""What a page shows instead of its content: the empty database (how to send data), no runs in
the chosen range (and a button to widen it), and a failure as a message a person can act on.

Anything that came from a span goes through `fmt.escape_md` before Markdown, or into st.code,
which never interprets it.
"""

from __future__ import annotations

import streamlit as st

from dashboard import config, data, fmt, page_context, sidebar


def _endpoints() -> tuple[str, str]:
    """Where to send OTLP: the serving command's own endpoints, else the default ports."""
    return config.current().endpoints


# Shown to people as code: every line short enough to need no lint exception.
SDK_SNIPPET = """\
# pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "my-agent"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint="{http}")))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("my-agent")
with tracer.start_as_current_span("run", attributes={"budget.total_ms": 30000}):
    ...  # the agent's run: model and tool calls as child spans
"""


def empty_state(path: str, serving: bool) -> None:
    """An empty (or absent) database: how to send data, instead of empty charts."""
    http, grpc = _endpoints()
    st.header("No agent runs here yet")
    st.markdown("This database holds no runs. Send traces of your agents' runs over OTLP, or "
                "load trace files:")
    st.code(path, language=None)  # a code block shows the path as it is, never escaped
    if serving:
        st.markdown("This server is receiving OTLP now:")
    else:
        st.markdown("Start the receiver, which owns the database and serves this dashboard:")
        st.code(f"budgetscope --db {path} serve", language="bash")
    st.code(f"OTLP/HTTP  {http}\nOTLP/gRPC  {grpc}", language=None)
    st.markdown("From Python with the OpenTelemetry SDK (the run span carries "
                "`budget.total_ms`; steps carry `budget.step.kind`, or are recognised from the "
                "usual instrumentations, docs/conventions.md), or with budgetscope-sdk "
                "(sdk/README.md):")
    st.code(SDK_SNIPPET.replace("{http}", http), language="python", wrap_lines=True)
    st.markdown("Or load files (OTLP JSON, JSON lines, protobuf, gzipped or not), or try the "
                "bundled sample:")
    st.code(f"budgetscope --db {path} ingest traces/\nbudgetscope demo", language="bash")


def show_error(error: BaseException, doing: str = "") -> None:
    """A failure as a message a person can act on, never a traceback."""
    if isinstance(error, data.DatabaseBusy):
        st.error(fmt.escape_md(str(error)))
        return
    prefix = f"Could not {doing}: " if doing else ""
    st.error(fmt.escape_md(f"{prefix}{type(error).__name__}: {error}"))


def no_runs_in_range(ctx: page_context.PageContext) -> bool:
    """Say so when the filters match no run; True when the page should stop."""
    runs = data.report("runs", ctx.filters)
    if not runs.empty:
        return False
    st.info(fmt.escape_md(f"No runs started in {ctx.state.label(ctx.now)}. The database "
                          f"holds {fmt.plural(ctx.status.runs, 'run')} in all: widen the "
                          "time range or pick another agent."))
    st.button("Show all time, all agents", on_click=sidebar.show_everything, key="show_all")
    return True

