"""httpx integration: every request made inside a step gets the step's remaining slice as its
timeout and the deadline headers, so tool code written against a plain httpx client needs no
change. Import this module only where httpx is installed (the SDK does not require it).

    client = httpx.AsyncClient(transport=AsyncBudgetTransport())
    async with budget.step("tool", "fetch_report") as call:
        await call.run(client.get(url))     # timeout and Deadline-* headers from the slice

Outside any step the run's spendable time bounds the request; outside any budget the request
goes out untouched. A request with no time left is refused before it is sent."""

from __future__ import annotations

from typing import Any

import httpx

from budgetscope_sdk.budget import current_budget
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.propagation import deadline_headers
from budgetscope_sdk.step import current_step


def _bound(request: httpx.Request) -> None:
    step = current_step()
    if step is not None:
        left = step.remaining()
        headers = step.headers()
        what = step.key
    else:
        budget = current_budget()
        if budget is None:
            return
        left = budget.spendable()
        headers = deadline_headers(budget.now_unix_ms() + int(left * 1000), int(left * 1000))
        what = "the run"
    if left <= 0:
        if step is not None:
            step.mark_not_sent()
        raise BudgetExhausted(f"no time left in {what} for {request.method} {request.url.host}; "
                              "not sent", step_key=what)
    request.headers.update(headers)
    timeout: dict[str, Any] = dict(request.extensions.get("timeout") or {})
    for phase in ("connect", "read", "write", "pool"):
        current = timeout.get(phase)
        timeout[phase] = left if current is None else min(current, left)
    request.extensions["timeout"] = timeout


class BudgetTransport(httpx.BaseTransport):
    """Wraps a sync transport (default httpx.HTTPTransport())."""

    def __init__(self, wrapped: httpx.BaseTransport | None = None) -> None:
        self._wrapped = wrapped or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _bound(request)
        return self._wrapped.handle_request(request)

    def close(self) -> None:
        self._wrapped.close()


class AsyncBudgetTransport(httpx.AsyncBaseTransport):
    """Wraps an async transport (default httpx.AsyncHTTPTransport())."""

    def __init__(self, wrapped: httpx.AsyncBaseTransport | None = None) -> None:
        self._wrapped = wrapped or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _bound(request)
        return await self._wrapped.handle_async_request(request)

    async def aclose(self) -> None:
        await self._wrapped.aclose()


def request_hook(request: httpx.Request) -> None:
    """The same as an event hook, for clients whose transport you do not build:
    httpx.Client(event_hooks={"request": [request_hook]})."""
    _bound(request)


async def async_request_hook(request: httpx.Request) -> None:
    _bound(request)
