"""httpx transports that give every request the current step's deadline, as one total deadline
on the whole exchange, and tell the step what they saw.

    client = httpx.Client(transport=BudgetTransport())
    with budget.step("tool", "fetch_report", cap=9) as call:
        client.get(url)     # ends by the step's deadline, carries Deadline-* and Idempotency-Key

- One deadline per call: connecting, waiting for the pool, sending and every read of the
  response, headers and body, share what is left of the step's slice. httpx's own timeouts are
  per operation: a server sending a byte every 100 ms never trips a 500 ms read timeout, and a
  keepalive keeps a dead call alive. Here each socket operation may wait only for what is left
  of the deadline, and none starts after it, so the exchange ends at the deadline however the
  bytes trickle. A timeout you set on the client still applies to each operation if shorter.
- When our deadline ends the exchange, the error is httpx's timeout of that phase (ReadTimeout,
  ConnectTimeout, WriteTimeout, PoolTimeout) and also a StepTimeout, so either `except` works.
- The step records what happened even when the agent handles it: our timeout makes it a
  `client_timeout`; a 5xx, 429 or 408 response an `upstream_error` with the status (the last
  response decides); a 2xx to a request that is not a read is evidence that a write completed;
  a Retry-After is kept for `retry`. A connection that failed before anything was sent marks the
  write as never sent.
- Outside any step the run's spendable time bounds the request (nothing is recorded); outside
  any budget the request goes out untouched. A request with no time left is refused before it
  is sent (BudgetExhausted).
- Money and tokens, for a request a step sends to an OpenAI-compatible chat completions
  endpoint (`…/chat/completions`), the OpenAI Responses API (`…/responses`) or Anthropic
  Messages (`…/messages`): a JSON body asking for more output than the step's allocation
  (`max_tokens`, `max_completion_tokens` or `max_output_tokens`) is lowered to it; a chat
  completions stream is sent with `stream_options.include_usage`; and the usage the answer
  reports (its JSON body, or its server-sent events, the stream's last usage) is recorded on
  the step, whatever the status, once the body has been read (usage.py reads it).

How: httpx's timeouts are read once per phase (all the header reads share one value), so the
transports wrap the network backend of the httpx HTTPTransport they are given (or make): every
socket operation of a bounded request, connect, TLS, each send and each receive, waits at most
for what is left of the deadline and none starts after it. A transport of your own that is not
an httpx HTTPTransport keeps the per-phase bound and the check between body chunks only."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

from budgetscope_sdk.budget import RunBudget, current_budget
from budgetscope_sdk.errors import BudgetExhausted, StepTimeout
from budgetscope_sdk.propagation import IDEMPOTENCY_HEADER, deadline_headers
from budgetscope_sdk.step import Step, current_step
from budgetscope_sdk.usage import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    StreamUsage,
    Usage,
    api_of_path,
    count,
    from_body,
    stream_reader,
)

_PHASES = ("connect", "read", "write", "pool")
_CORE_TIMEOUTS: dict[str, type[Exception]] = {
    "connect": httpcore.ConnectTimeout, "read": httpcore.ReadTimeout,
    "write": httpcore.WriteTimeout, "pool": httpcore.PoolTimeout}


class DeadlineConnectTimeout(httpx.ConnectTimeout, StepTimeout):
    """Our deadline ended the exchange while connecting."""


class DeadlineReadTimeout(httpx.ReadTimeout, StepTimeout):
    """Our deadline ended the exchange while waiting for the response."""


class DeadlineWriteTimeout(httpx.WriteTimeout, StepTimeout):
    """Our deadline ended the exchange while sending the request."""


class DeadlinePoolTimeout(httpx.PoolTimeout, StepTimeout):
    """Our deadline ended the exchange while waiting for a pooled connection."""


_OURS: tuple[tuple[type[httpx.TimeoutException], type[httpx.TimeoutException]], ...] = (
    (httpx.ConnectTimeout, DeadlineConnectTimeout), (httpx.WriteTimeout, DeadlineWriteTimeout),
    (httpx.PoolTimeout, DeadlinePoolTimeout), (httpx.ReadTimeout, DeadlineReadTimeout))

# The fields in which each API's request asks for an output ceiling.
_CEILINGS = {OPENAI_CHAT: ("max_tokens", "max_completion_tokens"),
             OPENAI_RESPONSES: ("max_output_tokens",), ANTHROPIC_MESSAGES: ("max_tokens",)}
# A JSON answer larger than this is not kept to read its usage from (a model's answer is far
# smaller; the cap bounds what a hostile server can make us hold twice).
_MAX_USAGE_BODY = 16 << 20


# The exchange whose deadline bounds the socket operations running now (in this thread, or this
# asyncio task): set by the transports around the request and around each body chunk.
_CURRENT: ContextVar[_Exchange | None] = ContextVar("budgetscope_sdk_exchange", default=None)


def _bounded(timeout: float | None, phase: str) -> float | None:
    """The timeout for one socket operation: the caller's, or what is left of the current
    exchange's deadline if that is shorter. Past the deadline, no operation starts."""
    exchange = _CURRENT.get()
    if exchange is None:
        return timeout
    return exchange.bound(timeout, phase)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, "read"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, "write"))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _bounded(timeout, "connect")))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(
            host, port, _bounded(timeout, "connect"), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(
            path, _bounded(timeout, "connect"), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncDeadlineStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, _bounded(timeout, "read"))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, _bounded(timeout, "write"))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        return _AsyncDeadlineStream(await self._inner.start_tls(
            ssl_context, server_hostname, _bounded(timeout, "connect")))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _AsyncDeadlineBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        return _AsyncDeadlineStream(await self._inner.connect_tcp(
            host, port, _bounded(timeout, "connect"), local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None
                                  ) -> httpcore.AsyncNetworkStream:
        return _AsyncDeadlineStream(await self._inner.connect_unix_socket(
            path, _bounded(timeout, "connect"), socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def bound_each_socket_operation(transport: httpx.BaseTransport | httpx.AsyncBaseTransport
                                ) -> bool:
    """Wrap the network backend of an httpx (Async)HTTPTransport so each socket operation of a
    bounded request waits at most for what is left of its deadline. The one reach into httpx's
    and httpcore's internals (`HTTPTransport._pool`, `ConnectionPool._network_backend`;
    written for httpx 0.28-0.29 and httpcore 1.0, and tested against the installed versions):
    False, and only the per-phase bound, where they are not found."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, (_DeadlineBackend, _AsyncDeadlineBackend)):
        return True
    if isinstance(backend, httpcore.NetworkBackend):
        pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]
        return True
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = _AsyncDeadlineBackend(backend)  # type: ignore[union-attr]
        return True
    return False


class _Exchange:
    """One request under a deadline: where it is bounded from and what it reports to."""

    def __init__(self, request: httpx.Request) -> None:
        self.request = request
        self.step: Step | None = current_step()
        self.budget: RunBudget | None = current_budget()
        # Whether the last socket operation waited for the deadline rather than the caller's
        # own shorter timeout (so a timeout is ours).
        self.deadline_bound = False
        # A model API's answer, read for its usage as it passes (usage.py): the API, the JSON
        # body so far or the event stream's reader, and whether its usage was recorded.
        self.api: str | None = None
        self._body: bytearray | None = None
        self._encoding: str | None = None
        self._events: StreamUsage | None = None
        self._usage_done = False

    def remaining(self) -> float:
        if self.step is not None:
            return self.step.remaining()
        assert self.budget is not None
        return self.budget.spendable()

    def bound(self, timeout: float | None, phase: str) -> float | None:
        left = self.remaining()
        if left <= 0:
            self.deadline_bound = True
            raise _CORE_TIMEOUTS[phase](f"the deadline had passed before this {phase}")
        self.deadline_bound = timeout is None or left <= timeout
        return left if self.deadline_bound else timeout

    def prepare(self, fit: bool = True) -> bool:
        """Bound the request; False when it is outside any budget (left untouched). `fit`:
        a model API's request may be replaced by one fitted to the step (`self.request`)."""
        step, budget, request = self.step, self.budget, self.request
        if step is None and budget is None:
            return False
        left = self.remaining()
        what = step.key if step is not None else "the run"
        if left <= 0:
            if step is not None:
                step.mark_not_sent()
            raise BudgetExhausted(f"no time left in {what} for {request.method} "
                                  f"{request.url.host}; not sent", step_key=what)
        if step is not None:
            step.request_started()
            headers = step.headers()
        else:
            assert budget is not None
            headers = deadline_headers(budget.now_unix_ms() + int(left * 1000),
                                       int(left * 1000))
        for name, value in headers.items():
            # An Idempotency-Key the caller set on the request is theirs to keep.
            if name != IDEMPOTENCY_HEADER or name not in request.headers:
                request.headers[name] = value
        if fit and step is not None and request.method == "POST":
            self.api = api_of_path(request.url.path)
            if self.api is not None:
                request = self.request = self._fitted(step, self.api, request)
        # Each phase's own timeout is at most what is left now (waiting for a pooled connection
        # is bounded by this alone); the wrapped backend bounds every socket operation after.
        timeout: dict[str, Any] = dict(request.extensions.get("timeout") or {})
        for phase in _PHASES:
            current = timeout.get(phase)
            timeout[phase] = left if current is None else min(current, left)
        request.extensions["timeout"] = timeout
        return True

    @staticmethod
    def _fitted(step: Step, api: str, request: httpx.Request) -> httpx.Request:
        """The request as sent: its output ceiling lowered to the step's allocation, and a
        chat completions stream asked for its usage. Unchanged (the same object) when it
        needs neither, or its body is not a JSON object already read."""
        try:
            body = json.loads(request.content)
        except (httpx.RequestNotRead, ValueError, RecursionError):
            return request
        if not isinstance(body, dict):
            return request
        changed = False
        ceiling = step.max_tokens
        for field in _CEILINGS[api] if ceiling is not None else ():
            asked = count(body.get(field))
            if asked is not None and ceiling is not None and asked > ceiling:
                body[field] = ceiling
                changed = True
        options = body.get("stream_options")
        if api == OPENAI_CHAT and body.get("stream") is True and not (
                isinstance(options, dict) and options.get("include_usage") is True):
            body["stream_options"] = {**(options if isinstance(options, dict) else {}),
                                      "include_usage": True}
            changed = True
        if not changed:
            return request
        content = json.dumps(body).encode()
        headers = httpx.Headers(request.headers)
        headers["Content-Length"] = str(len(content))
        return httpx.Request(request.method, request.url, headers=headers, content=content,
                             extensions=request.extensions)

    def read_usage_of(self, response: httpx.Response) -> None:
        """Read the answer's usage as its body passes (a model API's answer to a step)."""
        if self.api is None or self.step is None:
            return
        content_type = response.headers.get("content-type", "")
        encoding = response.headers.get("content-encoding", "identity").lower()
        if "json" in content_type:
            self._body, self._encoding = bytearray(), encoding
        elif encoding == "identity":
            self._events = stream_reader(self.api, content_type)

    def took(self, chunk: bytes) -> None:
        if self._events is not None:
            self._events.feed(chunk)
        elif self._body is not None:
            self._body += chunk
            if len(self._body) > _MAX_USAGE_BODY:
                self._body = None

    def body_ended(self, complete: bool) -> None:
        """The body was read to its end (`complete`) or closed before: record its usage once
        (a stream cut short gives what it had said; a JSON body, only when whole)."""
        if self._usage_done or self.step is None or self.api is None:
            return
        self._usage_done = True
        found: Usage | None = None
        if self._events is not None:
            found = self._events.usage
        elif self._body is not None and complete:
            found = from_body(self.api, _decoded(bytes(self._body), self._encoding))
        self._body = self._events = None
        if found is not None:
            self.step.record_usage(input_tokens=found.input, output_tokens=found.output,
                                   cache_read=found.cache_read, cache_write=found.cache_write,
                                   reasoning=found.reasoning)

    def timed_out(self, error: httpx.TimeoutException) -> httpx.TimeoutException:
        """The error to raise for a timeout: ours in both forms when our deadline ended it."""
        raised: httpx.TimeoutException = error
        if self.deadline_bound and not isinstance(error, StepTimeout):
            what = self.step.key if self.step is not None else "the run"
            for theirs, kind in _OURS:
                if isinstance(error, theirs):
                    raised = kind(f"{what} reached its deadline during {self.request.method} "
                                  f"{self.request.url.host}: {error}", request=self.request)
                    if self.step is not None:
                        raised.deadline_ms = self.step.allocated_ms  # type: ignore[attr-defined]
                    break
        if self.step is not None:
            self.step.record_timeout(raised)
        return raised

    def failed(self, error: httpx.TransportError) -> None:
        if self.step is not None:
            self.step.record_error(error)

    def answered(self, response: httpx.Response) -> None:
        if self.step is not None:
            self.step.record_response(response.status_code, method=self.request.method,
                                      retry_after=response.headers.get("retry-after"))
            self.read_usage_of(response)

    def late(self) -> bool:
        """A chunk that arrived after the deadline: the exchange overran it."""
        return self.remaining() <= 0

    def late_error(self) -> httpx.TimeoutException:
        self.deadline_bound = True
        return self.timed_out(httpx.ReadTimeout("the response was still arriving at the "
                                                "deadline", request=self.request))


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, exchange: _Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._inner)
        while True:
            token = _CURRENT.set(self._exchange)
            try:
                chunk = next(chunks)
            except StopIteration:
                self._exchange.body_ended(complete=True)
                return
            except StepTimeout:
                raise
            except httpx.TimeoutException as error:
                raise self._exchange.timed_out(error) from error
            finally:
                _CURRENT.reset(token)
            if self._exchange.late():
                raise self._exchange.late_error()
            self._exchange.took(chunk)
            yield chunk

    def close(self) -> None:
        self._exchange.body_ended(complete=False)
        self._inner.close()


class _AsyncBoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, exchange: _Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        while True:
            token = _CURRENT.set(self._exchange)
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                self._exchange.body_ended(complete=True)
                return
            except StepTimeout:
                raise
            except httpx.TimeoutException as error:
                raise self._exchange.timed_out(error) from error
            finally:
                _CURRENT.reset(token)
            if self._exchange.late():
                raise self._exchange.late_error()
            self._exchange.took(chunk)
            yield chunk

    async def aclose(self) -> None:
        self._exchange.body_ended(complete=False)
        await self._inner.aclose()


def _decoded(body: bytes, encoding: str | None) -> bytes:
    """A body as its Content-Encoding left it, decoded as httpx decodes (b'' if it cannot)."""
    if not encoding or encoding == "identity":
        return body
    try:
        return httpx.Response(200, headers={"content-encoding": encoding}, content=body).content
    except httpx.DecodingError:
        return b""


def _rewrap(response: httpx.Response, stream: Any) -> httpx.Response:
    return httpx.Response(status_code=response.status_code, headers=response.headers,
                          stream=stream, extensions=response.extensions)


class BudgetTransport(httpx.BaseTransport):
    """Wraps a sync transport (default httpx.HTTPTransport())."""

    def __init__(self, wrapped: httpx.BaseTransport | None = None) -> None:
        self._wrapped = wrapped or httpx.HTTPTransport()
        self.bounds_each_operation = bound_each_socket_operation(self._wrapped)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(request)
        if not exchange.prepare():
            return self._wrapped.handle_request(request)
        token = _CURRENT.set(exchange)
        try:
            response = self._wrapped.handle_request(exchange.request)
        except httpx.TimeoutException as error:
            raise exchange.timed_out(error) from error
        except httpx.TransportError as error:
            exchange.failed(error)
            raise
        finally:
            _CURRENT.reset(token)
        exchange.answered(response)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return _rewrap(response, _BoundedStream(response.stream, exchange))

    def close(self) -> None:
        self._wrapped.close()


class AsyncBudgetTransport(httpx.AsyncBaseTransport):
    """Wraps an async transport (default httpx.AsyncHTTPTransport())."""

    def __init__(self, wrapped: httpx.AsyncBaseTransport | None = None) -> None:
        self._wrapped = wrapped or httpx.AsyncHTTPTransport()
        self.bounds_each_operation = bound_each_socket_operation(self._wrapped)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(request)
        if not exchange.prepare():
            return await self._wrapped.handle_async_request(request)
        token = _CURRENT.set(exchange)
        try:
            response = await self._wrapped.handle_async_request(exchange.request)
        except httpx.TimeoutException as error:
            raise exchange.timed_out(error) from error
        except httpx.TransportError as error:
            exchange.failed(error)
            raise
        finally:
            _CURRENT.reset(token)
        exchange.answered(response)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return _rewrap(response, _AsyncBoundedStream(response.stream, exchange))

    async def aclose(self) -> None:
        await self._wrapped.aclose()


def request_hook(request: httpx.Request) -> None:
    """For clients whose transport you do not build: httpx.Client(event_hooks={"request":
    [request_hook], "response": [response_hook]}). The request gets the deadline headers and
    each phase (connect, send, headers, body) at most what is left when it starts: weaker than
    the transports' total deadline, since a hook cannot reach the socket operations. The
    response hook records the status on the step. A timeout is not seen by hooks: it is
    recorded only if it leaves the step's block."""
    _Exchange(request).prepare(fit=False)


def response_hook(response: httpx.Response) -> None:
    step = current_step()
    if step is not None:
        step.record_response(response.status_code, method=response.request.method,
                             retry_after=response.headers.get("retry-after"))


async def async_request_hook(request: httpx.Request) -> None:
    _Exchange(request).prepare(fit=False)


async def async_response_hook(response: httpx.Response) -> None:
    response_hook(response)
