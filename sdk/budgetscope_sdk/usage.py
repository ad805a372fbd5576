"""Token usage: what one response said it used, read from the provider's own JSON without
trusting it, and the OpenTelemetry GenAI attributes that carry it.

Counts follow OpenTelemetry (and budgetscope's docs/metrics.md §11.1): input includes the
cache reads and writes; output includes reasoning. The Anthropic API reports input without
its cache, so its input is converted. A count that is not a non-negative integer (a string, a
float, a boolean, a negative, NaN, or more than 10¹² tokens) is dropped for that field; reading
usage never raises.

Readers take the provider's answer as bytes, a JSON body or a server-sent event stream:
OpenAI-compatible chat completions (`usage` on the body, or on the last chunk of a stream sent
with `stream_options.include_usage`), the OpenAI Responses API (`usage`, or the
`response.completed` event) and Anthropic Messages (`usage`, or `message_start` then
`message_delta`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_TOKENS_COUNT = 10**12  # more than any call could use: a bigger count is garbage

OPENAI_CHAT = "openai_chat"
OPENAI_RESPONSES = "openai_responses"
ANTHROPIC_MESSAGES = "anthropic_messages"


def count(value: Any) -> int | None:
    """A token count from someone else's JSON: a non-negative int up to 10¹², else None."""
    if type(value) is int:  # a bool is not a count (and an int subclass is not JSON's)
        return value if 0 <= value <= MAX_TOKENS_COUNT else None
    return None


class Usage:
    """One response's (or a step's summed) token counts, each None when not known. `input` is
    OpenTelemetry's: cache reads and writes included."""

    __slots__ = ("cache_read", "cache_write", "input", "output", "reasoning")

    def __init__(self, input: int | None = None, output: int | None = None,  # noqa: A002
                 cache_read: int | None = None, cache_write: int | None = None,
                 reasoning: int | None = None) -> None:
        self.input = input
        self.output = output
        self.cache_read = cache_read
        self.cache_write = cache_write
        self.reasoning = reasoning

    @classmethod
    def checked(cls, input: Any = None, output: Any = None,  # noqa: A002
                cache_read: Any = None, cache_write: Any = None,
                reasoning: Any = None) -> Usage:
        """Each field kept only when it is a valid count (count(), written out inline)."""
        top = MAX_TOKENS_COUNT
        return cls(input if type(input) is int and 0 <= input <= top else None,
                   output if type(output) is int and 0 <= output <= top else None,
                   cache_read if type(cache_read) is int and 0 <= cache_read <= top else None,
                   cache_write if type(cache_write) is int and 0 <= cache_write <= top
                   else None,
                   reasoning if type(reasoning) is int and 0 <= reasoning <= top else None)

    def __repr__(self) -> str:
        return (f"Usage(input={self.input}, output={self.output}, cache_read={self.cache_read},"
                f" cache_write={self.cache_write}, reasoning={self.reasoning})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Usage):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None  # type: ignore[assignment]  # mutable in spirit: compared by value only

    def fields(self) -> tuple[int | None, ...]:
        return (self.input, self.output, self.cache_read, self.cache_write, self.reasoning)

    @property
    def empty(self) -> bool:
        return self.input is None and self.output is None and self.cache_read is None \
            and self.cache_write is None and self.reasoning is None

    def plus(self, other: Usage) -> Usage:
        """Field by field; a field known on either side is known."""
        def add(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else a + b
        return Usage(add(self.input, other.input), add(self.output, other.output),
                     add(self.cache_read, other.cache_read),
                     add(self.cache_write, other.cache_write),
                     add(self.reasoning, other.reasoning))


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def from_openai_chat(usage: Any) -> Usage | None:
    """Chat completions' `usage`: prompt_tokens (cached included), completion_tokens
    (reasoning included), prompt_tokens_details.cached_tokens,
    completion_tokens_details.reasoning_tokens."""
    if not isinstance(usage, Mapping):
        return None
    found = Usage.checked(usage.get("prompt_tokens"), usage.get("completion_tokens"),
                          _get(usage, "prompt_tokens_details", "cached_tokens"), None,
                          _get(usage, "completion_tokens_details", "reasoning_tokens"))
    return None if found.empty else found


def from_openai_responses(usage: Any) -> Usage | None:
    """The Responses API's `usage`: input_tokens (cached included), output_tokens,
    input_tokens_details.cached_tokens, output_tokens_details.reasoning_tokens."""
    if not isinstance(usage, Mapping):
        return None
    found = Usage.checked(usage.get("input_tokens"), usage.get("output_tokens"),
                          _get(usage, "input_tokens_details", "cached_tokens"), None,
                          _get(usage, "output_tokens_details", "reasoning_tokens"))
    return None if found.empty else found


def from_anthropic(usage: Any) -> Usage | None:
    """Anthropic's `usage`: input_tokens *without* the cache, cache_read_input_tokens,
    cache_creation_input_tokens, output_tokens. Input becomes OpenTelemetry's (cache
    included) only when the uncached input is known; a cache count alone is kept as itself."""
    if not isinstance(usage, Mapping):
        return None
    uncached = count(usage.get("input_tokens"))
    read = count(usage.get("cache_read_input_tokens"))
    write = count(usage.get("cache_creation_input_tokens"))
    total = None if uncached is None else uncached + (read or 0) + (write or 0)
    found = Usage(total, count(usage.get("output_tokens")), read, write, None)
    return None if found.empty else found


_BODY_READERS = {OPENAI_CHAT: from_openai_chat, OPENAI_RESPONSES: from_openai_responses,
                 ANTHROPIC_MESSAGES: from_anthropic}


def api_of_path(path: str) -> str | None:
    """Which API a request is for, from its URL path (None: not one whose usage we read)."""
    if path.endswith("/chat/completions"):
        return OPENAI_CHAT
    if path.endswith("/responses"):
        return OPENAI_RESPONSES
    if path.endswith("/messages"):
        return ANTHROPIC_MESSAGES
    return None


def from_body(api: str, body: bytes) -> Usage | None:
    """The usage of a whole JSON answer (an error's too), or None."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, Mapping):
        return None
    return _BODY_READERS[api](document.get("usage"))


class StreamUsage:
    """Reads usage from a server-sent event stream as its bytes arrive, in any chunking. Keeps
    the last usage each API reports (Anthropic's input from `message_start`, its output from
    the last `message_delta`), so a stream cut short still gives what it had said."""

    # A line longer than this is no usage event (a huge text delta): dropped unparsed.
    MAX_LINE = 1 << 20

    def __init__(self, api: str) -> None:
        self.api = api
        self._pending = bytearray()
        self._skipping = False
        self._anthropic: dict[str, Any] = {}
        self.usage: Usage | None = None

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        while True:
            end = self._pending.find(b"\n")
            if end < 0:
                if len(self._pending) > self.MAX_LINE:
                    self._pending.clear()
                    self._skipping = True
                return
            line = bytes(self._pending[:end])
            del self._pending[:end + 1]
            if self._skipping:
                self._skipping = False  # the rest of an oversized line
                continue
            self._line(line)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        # Only lines that can carry usage are parsed: text deltas are most of a stream, and a
        # chat completions stream asked for its usage says `"usage": null` in every chunk.
        if not data.startswith(b"{") or b'"usage"' not in data or (
                data.count(b'"usage"') == 1 and (b'"usage":null' in data
                                                 or b'"usage": null' in data)):
            return
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(event, Mapping):
            return
        if self.api == OPENAI_CHAT:
            found = from_openai_chat(event.get("usage"))
        elif self.api == OPENAI_RESPONSES:
            found = from_openai_responses(_get(event, "response", "usage"))
        else:
            found = self._anthropic_event(event)
        if found is not None:
            self.usage = found

    def _anthropic_event(self, event: Mapping[str, Any]) -> Usage | None:
        kind = event.get("type")
        usage = _get(event, "message", "usage") if kind == "message_start" else (
            event.get("usage") if kind == "message_delta" else None)
        if not isinstance(usage, Mapping):
            return None
        # message_delta repeats what changed (the output so far, sometimes the input again).
        self._anthropic.update({key: value for key, value in usage.items()
                                if count(value) is not None})
        return from_anthropic(self._anthropic)


def stream_reader(api: str | None, content_type: str | None) -> StreamUsage | None:
    if api is None or not content_type or "text/event-stream" not in content_type:
        return None
    return StreamUsage(api)

