"""What the agents' configuration decides: budgets, per-call caps, refusals, retries, hedges.

Nature (latencies, failures, token counts) lives in `latency.py` and never reads a Policy, so the
same seed replayed under two policies sees exactly the same draws; only what the agent does
with them (cut a call at its cap, refuse it, retry it) changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType


@dataclass(frozen=True)
class AgentBudget:
    """A run's wall-clock budget. `total_ms=None`: the agent runs without a deadline."""

    total_ms: int | None
    reserve_ms: int = 0


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


def _lookup(mapping: Mapping[str, int | None], agent: str, step: str) -> int | None:
    """`agent:step` overrides `step`; an explicit None there means "not for this agent"."""
    key = f"{agent}:{step}"
    return mapping[key] if key in mapping else mapping.get(step)


@dataclass(frozen=True)
class Policy:
    """One configuration of every agent.

    caps_ms keys are a step name (`fetch_report`, `gpt-4o`) or `agent:name` for an agent-specific
    ceiling; a missing key or None means the call declares no timeout and may take whatever the
    run has left. A step is refused (not started) when the budget left minus the run's landing
    reserve is below `min_start_ms`; the landing step itself only needs `land_min_ms`.
    """

    name: str
    budgets: Mapping[str, AgentBudget]
    caps_ms: Mapping[str, int | None]
    # Tools whose client library retries inside one tool step: the ceiling of each attempt.
    attempt_caps_ms: Mapping[str, int] = field(default_factory=dict)
    # Idempotent reads that get a duplicate request when the first is slower than this.
    hedge_after_ms: Mapping[str, int | None] = field(default_factory=dict)
    min_start_ms: int = 1_500
    land_min_ms: int = 400
    retries: bool = True
    max_attempts: int = 3
    backoff_base_ms: int = 250
    reconcile_writes: bool = True
    # An uncertain write is read back only if this much budget (beyond the reserve) is left:
    # the agent keeps time for its answer. Below it the write stays an orphan.
    reconcile_min_ms: int = 5_000
    # Which uncertain endings the agent reads back. Ours only distrusts its own timeouts: a
    # 5xx that may have applied the write is retried blindly, a cancelled one is forgotten.
    reconcile_on: frozenset[str] = frozenset({"client_timeout"})

    def __post_init__(self) -> None:
        # Read-only views: a Policy is shared by every run that falls in its window.
        for name in ("budgets", "caps_ms", "attempt_caps_ms", "hedge_after_ms"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def cap_ms(self, agent: str, step: str) -> int | None:
        return _lookup(self.caps_ms, agent, step)

    def hedge_ms(self, agent: str, step: str) -> int | None:
        """After how long a duplicate of this read is sent; None: never hedged."""
        return _lookup(self.hedge_after_ms, agent, step)

    def budget(self, agent: str) -> AgentBudget:
        return self.budgets[agent]

    def with_caps_scaled(
        self, name: str, factor: float, overrides: Mapping[str, int | None] | None = None
    ) -> Policy:
        """The same policy with every cap multiplied by `factor`, then `overrides` applied."""
        caps = {k: (None if v is None else int(v * factor)) for k, v in self.caps_ms.items()}
        caps.update(overrides or {})
        attempts = {k: int(v * factor) for k, v in self.attempt_caps_ms.items()}
        return replace(self, name=name, caps_ms=caps, attempt_caps_ms=attempts)


@dataclass(frozen=True)
class PolicySchedule:
    """Which policy was live when: `windows` are (start_ns, end_ns, policy), first match wins."""

    default: Policy
    windows: tuple[tuple[int, int, Policy], ...] = ()

    def at(self, t_ns: int) -> Policy:
        for start, end, policy in self.windows:
            if start <= t_ns < end:
                return policy
        return self.default


def utc_ns(year: int, month: int, day: int, hour: int = 0) -> int:
    when = dt.datetime(year, month, day, hour, tzinfo=dt.UTC)
    return int(when.timestamp()) * 1_000_000_000


BASELINE = Policy(
    name="baseline",
    budgets={
        "research-agent": AgentBudget(90_000, 5_000),
        "support-agent": AgentBudget(60_000, 3_000),
        "billing-agent": AgentBudget(30_000, 2_000),
        "triage-agent": AgentBudget(25_000, 0),
    },
    caps_ms={
        "gpt-4o": 30_000,
        "gpt-4o-mini": 20_000,
        "summarizer": 45_000,
        "search_api": 12_000,
        "fetch_page": 8_000,
        # The reporting service declares no timeout for the research agent: one 90 s report
        # can eat the whole run. The billing agent learned that lesson and caps it.
        "research-agent:fetch_report": None,
        "fetch_report": 15_000,
        "vector_lookup": 2_000,
        "triage-agent:vector_lookup": 800,
        "get_customer": 1_500,
        "kb_search": 4_000,
        "get_order": 3_000,
        "create_ticket": 8_000,
        "get_ticket": 3_000,
        "get_invoice": 2_000,
        "get_payment": 2_000,
        "issue_refund": 10_000,
        "lookup_refund": 3_000,
    },
    attempt_caps_ms={"search_api": 4_000},
    # The triage agent's framework cannot hedge.
    hedge_after_ms={"vector_lookup": 250, "get_customer": 200, "triage-agent:vector_lookup": None},
)

# ISO week 2026-W47: a "fail fast" change halved the caps (and finally capped fetch_report for
# the research agent). Client timeouts, uncertain writes and reconciliations all go up.
TIGHTENED = BASELINE.with_caps_scaled(
    "tightened-w47",
    0.45,
    {"research-agent:fetch_report": 6_000, "fetch_report": 6_000},
)

W47_START = utc_ns(2026, 11, 16)
W47_END = utc_ns(2026, 11, 23)

DEFAULT_SCHEDULE = PolicySchedule(BASELINE, ((W47_START, W47_END, TIGHTENED),))


def as_schedule(policy: Policy | PolicySchedule | None) -> PolicySchedule:
    if policy is None:
        return DEFAULT_SCHEDULE
    if isinstance(policy, Policy):
        return PolicySchedule(policy)
    return policy
