"""Nature: how long each dependency takes and how it fails, independent of any policy.

Every call draws from its own random stream keyed by (seed, run index, step index, attempt,
branch), so replaying a seed under another policy gives each call the same natural latency and
failure, whatever happened to the calls before it.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from .policy import utc_ns


def stream(seed: int, *key: object) -> random.Random:
    """An independent RNG for `key`; blake2b, not hash(), so it is stable across processes."""
    digest = hashlib.blake2b(repr((seed, *key)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


@dataclass(frozen=True)
class Lognormal:
    median_ms: float
    sigma: float

    def draw(self, rng: random.Random) -> float:
        return self.median_ms * math.exp(self.sigma * rng.gauss(0.0, 1.0))


@dataclass(frozen=True)
class Failure:
    """One way a dependency fails. Exactly one of http_status / grpc_code is set."""

    p: float
    latency: Lognormal
    outcome: str  # docs/metrics.md §3 class: upstream_error or client_error
    error_type: str
    message: str
    http_status: int | None = None
    grpc_code: int | None = None
    # For writes: whether the server may have applied the effect before failing.
    effect: str = "none"
    lands_p: float = 0.0


@dataclass(frozen=True)
class ToolNature:
    body: Lognormal
    failures: tuple[Failure, ...] = ()
    slow: Lognormal | None = None
    slow_p: float = 0.0
    # A write that we stop waiting for (timeout, cancel) still lands this often.
    lands_if_abandoned_p: float = 0.6


@dataclass(frozen=True)
class ModelNature:
    ttft: Lognormal
    ms_per_token: tuple[float, float]
    output_tokens: Lognormal
    failures: tuple[Failure, ...]
    slow: Lognormal
    slow_p: float


@dataclass(frozen=True)
class Natural:
    """What the world does with one call, before our deadlines get a say."""

    latency_ms: float  # until the response (success or failure) would arrive
    failure: Failure | None
    landed_if_abandoned: bool
    cleanup_ms: float  # cancellation cleanup, when we stop waiting
    u: float  # a spare uniform (e.g. to jitter a refusal's ~0 duration)
    output_tokens: int = 0


def _http(p: float, status: int, median: float, effect: str = "none",
          lands: float = 0.0) -> Failure:
    outcome = "upstream_error" if status >= 500 or status in (408, 429) else "client_error"
    messages = {
        404: "Not Found",
        403: "Forbidden",
        409: "Conflict",
        429: "Too Many Requests",
        500: "Internal Server Error",
        502: "Bad Gateway",
        503: "Service Unavailable",
        504: "Gateway Timeout",
    }
    return Failure(p, Lognormal(median, 0.5), outcome, str(status), messages[status],
                   http_status=status, effect=effect, lands_p=lands)


_GRPC = {
    5: ("NOT_FOUND", "client_error"),
    8: ("RESOURCE_EXHAUSTED", "upstream_error"),
    9: ("FAILED_PRECONDITION", "client_error"),
    10: ("ABORTED", "upstream_error"),
    13: ("INTERNAL", "upstream_error"),
    14: ("UNAVAILABLE", "upstream_error"),
}


def _grpc(p: float, code: int, median: float, effect: str = "none", lands: float = 0.0) -> Failure:
    name, outcome = _GRPC[code]
    return Failure(p, Lognormal(median, 0.5), outcome, name, f"grpc status {name}",
                   grpc_code=code, effect=effect, lands_p=lands)


TOOLS: dict[str, ToolNature] = {
    # p50 ~400 ms, p95 ~3.5 s, p99 ~9 s, and one call in ~500 stuck near 90 s.
    "fetch_report": ToolNature(
        Lognormal(400, 1.35),
        (_http(0.002, 500, 300), _http(0.001, 502, 60)),
        slow=Lognormal(88_000, 0.06), slow_p=0.002,
    ),
    "search_api": ToolNature(
        Lognormal(260, 0.5),
        (_http(0.03, 503, 40), _http(0.004, 429, 30), _http(0.003, 504, 10_000)),
        slow=Lognormal(5_000, 0.4), slow_p=0.004,
    ),
    "fetch_page": ToolNature(
        Lognormal(700, 0.8),
        (_http(0.03, 404, 120), _http(0.01, 403, 90), _http(0.01, 502, 300)),
        slow=Lognormal(14_000, 0.3), slow_p=0.01,
    ),
    "kb_search": ToolNature(
        Lognormal(300, 0.6), (_http(0.01, 503, 50),), slow=Lognormal(6_000, 0.3), slow_p=0.01,
    ),
    "get_order": ToolNature(Lognormal(150, 0.5), (_http(0.005, 500, 80),)),
    "create_ticket": ToolNature(
        Lognormal(1_500, 0.8),
        (_http(0.01, 500, 700, "possible", 0.4), _http(0.01, 503, 40), _http(0.003, 409, 200)),
        slow=Lognormal(12_000, 0.45), slow_p=0.03,
    ),
    "get_ticket": ToolNature(Lognormal(120, 0.5), (_http(0.03, 503, 40),)),
    "vector_lookup": ToolNature(
        Lognormal(80, 0.45),
        (_grpc(0.02, 14, 15), _grpc(0.003, 8, 10)),
        slow=Lognormal(1_200, 0.5), slow_p=0.03,
    ),
    "get_customer": ToolNature(
        Lognormal(60, 0.5), (_grpc(0.01, 14, 12), _grpc(0.005, 5, 20)),
        slow=Lognormal(900, 0.5), slow_p=0.03,
    ),
    "get_invoice": ToolNature(
        Lognormal(120, 0.5), (_grpc(0.015, 14, 15),), slow=Lognormal(3_000, 0.4), slow_p=0.01,
    ),
    "get_payment": ToolNature(Lognormal(90, 0.5), (_grpc(0.01, 14, 15),)),
    "issue_refund": ToolNature(
        Lognormal(1_800, 0.65),
        (_grpc(0.01, 14, 20), _grpc(0.008, 13, 900, "possible", 0.5), _grpc(0.004, 10, 300),
         _grpc(0.003, 9, 100)),
        slow=Lognormal(14_000, 0.4), slow_p=0.025,
    ),
    "lookup_refund": ToolNature(Lognormal(80, 0.5), (_grpc(0.03, 14, 15),)),
    # Queue waits: no failure, a heavy tail when the humans or the rate limiter are busy.
    "handoff_queue": ToolNature(Lognormal(3_500, 1.2)),
    "rate_limiter": ToolNature(Lognormal(150, 1.2)),
}

_MODEL_FAILURES = (_http(0.012, 429, 250), _http(0.003, 500, 1_500), _http(0.003, 503, 400))

MODELS: dict[str, ModelNature] = {
    "gpt-4o": ModelNature(Lognormal(550, 0.35), (16.0, 26.0), Lognormal(150, 0.55),
                          _MODEL_FAILURES, Lognormal(35_000, 0.3), 0.006),
    "gpt-4o-mini": ModelNature(Lognormal(350, 0.35), (7.0, 11.0), Lognormal(140, 0.55),
                               _MODEL_FAILURES, Lognormal(25_000, 0.3), 0.006),
}

# A search backend incident: 2026-11-04 13:00-19:00 UTC, search_api answers 503 far more often.
_INCIDENTS = ((utc_ns(2026, 11, 4, 13), utc_ns(2026, 11, 4, 19), "search_api", 12.0),)


def _failure_scale(tool: str, t_ns: int) -> float:
    for start, end, name, scale in _INCIDENTS:
        if name == tool and start <= t_ns < end:
            return scale
    return 1.0


def _pick_failure(rng: random.Random, failures: tuple[Failure, ...],
                  scale: float) -> Failure | None:
    u = rng.random()
    for failure in failures:
        u -= failure.p * scale
        if u < 0:
            return failure
    return None


def draw_tool(rng: random.Random, tool: str, t_ns: int, busy: float = 1.0) -> Natural:
    """One tool call's nature. `busy` (time of day) only stretches queue waits."""
    nature = TOOLS[tool]
    # Fixed draw order, every draw always consumed, so the stream never shifts.
    failure = _pick_failure(rng, nature.failures, _failure_scale(tool, t_ns))
    fail_ms = failure.latency.draw(rng) if failure else 0.0
    slow = rng.random() < nature.slow_p
    body = nature.body.draw(rng)
    slow_ms = nature.slow.draw(rng) if nature.slow else 0.0
    landed = rng.random()
    cleanup = Lognormal(12, 0.8).draw(rng)
    u = rng.random()
    latency = fail_ms if failure else (slow_ms if slow and nature.slow else body * busy)
    lands_p = failure.lands_p if failure else nature.lands_if_abandoned_p
    return Natural(latency, failure, landed < lands_p, min(cleanup, 400.0), u)


def draw_model(rng: random.Random, model: str, input_tokens: int, short: bool = False) -> Natural:
    """One model call: time to first token plus decode time, from the token counts."""
    nature = MODELS[model]
    failure = _pick_failure(rng, nature.failures, 1.0)
    fail_ms = failure.latency.draw(rng) if failure else 0.0
    slow = rng.random() < nature.slow_p
    slow_ms = nature.slow.draw(rng)
    ttft = nature.ttft.draw(rng) + input_tokens * 0.02
    per_token = rng.uniform(*nature.ms_per_token)
    out = nature.output_tokens.draw(rng) * (0.4 if short else 1.0)
    output_tokens = max(12, min(int(out), 1_500))
    cleanup = Lognormal(8, 0.7).draw(rng)
    u = rng.random()
    latency = ttft + output_tokens * per_token
    if failure:
        latency = fail_ms
    elif slow:
        latency = max(latency, slow_ms)
    return Natural(latency, failure, False, min(cleanup, 400.0), u, output_tokens)


def draw_scope(rng: random.Random) -> Natural:
    """A step that only scopes others (a subagent): its time is its children's."""
    cleanup = Lognormal(8, 0.7).draw(rng)
    return Natural(0.0, None, False, min(cleanup, 400.0), rng.random())
