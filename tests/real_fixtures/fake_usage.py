"""What the fake model server (fakes.py) bills: the usage of each answer in the API's own shape,
its streamed forms, and the same usage in docs/metrics.md §11.1's terms for the ground truth.

The numbers are realistic, not real: a prompt is about four characters a token of what the
client sent, over a 1,000-token system prompt (so prompts pass OpenAI's 1,024-token caching
threshold); a turn that continues a conversation reads most of it from the cache; some answers
reason. A scripted action can replace any field with its own `usage` (the API's spelling).
Stdlib only: it runs in the generator's process."""

from __future__ import annotations

import json
import time
from typing import Any

SYSTEM_PROMPT_TOKENS = 1_000
# OpenAI caches prompts of 1,024 tokens and more, in steps of 128
OPENAI_CACHE_MIN, OPENAI_CACHE_STEP = 1_024, 128
# Anthropic: the prefix the first call writes to the cache and every later call reads
ANTHROPIC_CACHED_PREFIX = 1_536


def _estimate(request: dict[str, Any]) -> int:
    sent = json.dumps([request.get(key) for key in ("system", "messages", "tools")])
    return len(sent) // 4


def _continues(request: dict[str, Any]) -> bool:
    """A turn after the model already answered in this conversation (a tool result or an
    assistant message in it): its prefix was sent before, so the provider has it cached."""
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("assistant", "tool"):
            return True
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(block, dict) and block.get("type")
                                             == "tool_result" for block in content):
            return True
    return False


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def _output_tokens(action: dict[str, Any], number: int) -> int:
    if action.get("do") == "tool_call":
        return 16 + 9 * len(action.get("calls") or [action])
    return 24 + (number * 37) % 97


def openai_usage(request: dict[str, Any], action: dict[str, Any], number: int) -> dict[str, Any]:
    """Chat completions' `usage`: prompt_tokens includes the cached ones, completion_tokens the
    reasoning ones. Every third answer reasons."""
    prompt = SYSTEM_PROMPT_TOKENS + _estimate(request)
    cached = 0
    if _continues(request) and prompt >= OPENAI_CACHE_MIN:
        cached = (prompt * 4 // 5) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
    reasoning = 32 + (number * 11) % 64 if number % 3 == 0 else 0
    completion = _output_tokens(action, number) + reasoning
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": prompt + completion,
             "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                           "accepted_prediction_tokens": 0,
                                           "rejected_prediction_tokens": 0}}
    usage = _merged(usage, action.get("usage") or {})
    if "total_tokens" not in (action.get("usage") or {}):
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


def anthropic_usage(request: dict[str, Any], action: dict[str, Any],
                    anthropic_number: int) -> dict[str, Any]:
    """Messages' `usage`: input_tokens *without* the cache (the API's own figure). The first
    call of the server's life writes the prefix to the cache; later ones read it, and every
    third also writes a little more (the conversation grew)."""
    first = anthropic_number == 1
    usage = {"input_tokens": 12 + _estimate(request),
             "cache_creation_input_tokens": ANTHROPIC_CACHED_PREFIX if first
             else (384 if anthropic_number % 3 == 0 else 0),
             "cache_read_input_tokens": 0 if first else ANTHROPIC_CACHED_PREFIX,
             "output_tokens": _output_tokens(action, anthropic_number)}
    return _merged(usage, action.get("usage") or {})


def terms(api: str, usage: dict[str, Any]) -> dict[str, int]:
    """A billed usage in docs/metrics.md §11.1's terms: input with its cache, output with its
    reasoning, and the total. From the fake's own figures, never from a span."""
    if api == "anthropic":
        read = usage.get("cache_read_input_tokens") or 0
        write = usage.get("cache_creation_input_tokens") or 0
        found = {"input": usage["input_tokens"] + read + write, "cache_read": read,
                 "cache_write": write, "output": usage["output_tokens"], "reasoning": 0}
    else:
        details = usage.get("completion_tokens_details") or {}
        found = {"input": usage["prompt_tokens"],
                 "cache_read": (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                 or 0, "cache_write": 0, "output": usage["completion_tokens"],
                 "reasoning": details.get("reasoning_tokens") or 0}
    found["total"] = found["input"] + found["output"]
    return found


def add_terms(into: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {key: into.get(key, 0) + value for key, value in more.items()}


ZERO_TERMS = {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0, "reasoning": 0,
              "total": 0}


# ---- streams ----------------------------------------------------------------------------------

def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]


def openai_stream(completion: dict[str, Any], include_usage: bool) -> list[bytes]:
    """A chat completion as its `stream: true` events: the role, the content (or the tool
    calls) piece by piece, the finish reason, then — only when the request had
    `stream_options.include_usage` — one chunk with no choices and the usage, then [DONE]."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {"id": completion["id"], "object": "chat.completion.chunk",
            "created": completion["created"], "model": completion["model"],
            "system_fingerprint": "fp_fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return _sse(body)

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if message.get("tool_calls"):
        for i, call in enumerate(message["tool_calls"]):
            events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"],
                                                              "arguments": ""}}]}))
            events.append(chunk({"tool_calls": [{"index": i, "function": {
                "arguments": call["function"]["arguments"]}}]}))
    else:
        events += [chunk({"content": piece}) for piece in _words(message["content"] or "")]
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append(_sse({**base, "choices": [], "usage": completion["usage"]}))
    events.append(_sse("[DONE]"))
    return events


def anthropic_stream(message: dict[str, Any], fail_after_start: dict[str, Any] | None = None
                     ) -> list[bytes]:
    """A Messages answer as its `stream: true` events: message_start carries the input usage
    (and output_tokens 1), message_delta the final output count. With `fail_after_start` (an
    error body), the stream stops after message_start with that `error` event, as the API does
    when it overloads mid-answer: the input was already billed and reported."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    events = [_sse({"type": "message_start", "message": start}, "message_start")]
    if fail_after_start is not None:
        return events + [_sse(fail_after_start, "error")]
    events.append(_sse({"type": "ping"}, "ping"))
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(_sse({"type": "content_block_start", "index": index,
                                "content_block": {"type": "text", "text": ""}},
                               "content_block_start"))
            events += [_sse({"type": "content_block_delta", "index": index,
                             "delta": {"type": "text_delta", "text": piece}},
                            "content_block_delta") for piece in _words(block["text"])]
        else:
            events.append(_sse({"type": "content_block_start", "index": index,
                                "content_block": {**block, "input": {}}}, "content_block_start"))
            events.append(_sse({"type": "content_block_delta", "index": index,
                                "delta": {"type": "input_json_delta",
                                          "partial_json": json.dumps(block["input"])}},
                               "content_block_delta"))
        events.append(_sse({"type": "content_block_stop", "index": index},
                           "content_block_stop"))
    events.append(_sse({"type": "message_delta",
                        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                        "usage": {"output_tokens": usage["output_tokens"]}}, "message_delta"))
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def billed_entry(number: int, request_id: str, api: str, model: str, stream: bool,
                 usage: dict[str, Any], returned: bool, failed: bool, why: str) -> dict[str, Any]:
    """One line of the fake's billing log: the usage as the API shaped it, whether the client
    received it (a stream without include_usage, or a client that hung up before the answer,
    did not), whether the call failed all the same, and §11.1's terms of it."""
    return {"request": number, "request_id": request_id, "api": api, "model": model,
            "stream": stream, "returned": returned, "failed": failed, "why": why,
            "usage": usage, "terms": terms(api, usage), "billed_ns": time.time_ns()}
