"""An example agent on budgetscope-sdk: one 4-second run with a reserve, three report fetches in
parallel (one too slow for its slice), a quote from a service that is overloaded once, a refund
whose answer comes too late and is read back instead of re-sent, and a library that opens a
budget of its own inside the run. Its services run locally (services.py).

    python agent.py                                   # prints what the run recorded
    python agent.py --otlp http://127.0.0.1:4318/v1/traces   # and exports it to budgetscope

Needs budgetscope-sdk and httpx; --otlp also opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import httpx
from opentelemetry.trace import Tracer
from services import running

from budgetscope_sdk import RunBudget, RunResult, Step, TimedOut, budgeted_tool
from budgetscope_sdk.httpx_transport import AsyncBudgetTransport


@budgeted_tool("tool", "fetch_report", cap=1.0, minimum=0.1)
async def fetch_report(client: httpx.AsyncClient, base: str, quarter: str) -> dict[str, Any]:
    """A read: its slice is min(1 s, what the run may spend); the transport ends the request at
    it, and a timeout comes back as a TimedOut result, not an exception."""
    response = await client.get(f"{base}/report", params={"quarter": quarter})
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


async def summarise(reports: list[dict[str, Any]]) -> str:
    """A library with a budget of its own: inside the run it becomes a subagent step whose
    deadline is clamped to what the run may still spend."""
    async with RunBudget(30, agent="summariser") as budget, \
            budget.step("model", "local-model", cap=5) as call:
        await call.run(asyncio.sleep(0.05))  # the model call
        return f"{len(reports)} reports, revenue {sum(r['revenue'] for r in reports)}"


async def run(base: str, tracer: Tracer | None = None) -> RunResult[str]:
    async with httpx.AsyncClient(transport=AsyncBudgetTransport()) as client, \
            RunBudget(4, reserve=0.4, agent="support-agent", tracer=tracer) as budget:
        fetched = await asyncio.gather(*(fetch_report(client, base, quarter)
                                         for quarter in ("q1", "q2", "q3")))
        reports = [r for r in fetched if not isinstance(r, TimedOut)]
        missing = [f"report {q}" for q, r in zip(("q1", "q2", "q3"), fetched)
                   if isinstance(r, TimedOut)]

        async def quote(call: Step) -> dict[str, Any]:
            response = await client.get(f"{base}/quote")
            return response.raise_for_status().json()  # type: ignore[no-any-return]

        # A read retried after a 503, waiting at least what Retry-After asks.
        rate = await budget.aretry(budget.intent("quote", "eur"), quote, side_effect="read",
                                   attempts=3, backoff=0.1)

        refund = budget.intent("refund", "order_17")

        async def issue(call: Step) -> dict[str, Any]:
            response = await client.post(f"{base}/refunds", json={"order": "order_17"})
            return response.raise_for_status().json()  # type: ignore[no-any-return]

        async def read_back(call: Step) -> dict[str, Any] | None:
            found = await client.get(f"{base}/refunds/{refund.key}")
            return found.json() if found.status_code == 200 else None

        # A write: its answer comes too late, so it is read back by its key, not re-sent.
        issued = await budget.aretry(refund, issue, reconcile=read_back, cap=0.3)

        summary = await summarise(reports)
        answer = f"{summary}; EUR/USD {rate['eur_usd']}; refund {issued['status']}"
        return budget.finish(answer, done=["reports", "quote", "refund"], missing=missing)


def tracer_for(endpoint: str) -> tuple[Tracer, Any]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "support"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider.get_tracer("example-agent"), provider


def main() -> None:
    parser = argparse.ArgumentParser(description="budgetscope-sdk's example agent")
    parser.add_argument("--otlp", help="an OTLP/HTTP traces endpoint to export the run to")
    args = parser.parse_args()
    tracer, provider = tracer_for(args.otlp) if args.otlp else (None, None)
    with running() as base:
        result = asyncio.run(run(base, tracer))
    print(f"answer: {result.value}")
    print(f"outcome: {result.outcome}: {result.note}")
    if provider is not None:
        provider.shutdown()  # flushes the batch to the endpoint


if __name__ == "__main__":
    main()
