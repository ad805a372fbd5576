"""A call as it played out (`Attempt`), and what `emit.py` reads of the run it played in
(`PlayedRun`).

Their own module, below the run simulation (`runs.py`, which makes both) and the spans of stock
instrumentation (`emit.py`, which reads them), so that emit.py does not import runs.py back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from budgetscope_sdk import Step

from .agents import AgentSpec, Call
from .latency import Natural


@dataclass(slots=True)
class Attempt:
    """One call as it played out; `resp_ns` is when we stopped waiting, `end_ns` after cleanup."""

    call: Call
    kind: str
    attempt: int
    branch: int
    start_ns: int
    resp_ns: int
    end_ns: int
    remaining_ms: int
    cap_ms: int | None
    allocated_ms: int | None
    outcome: str
    nat: Natural
    reason: str = ""  # for client_timeout: "cap", "frame" or "run" (the run deadline fired)
    user_cancel: bool = False
    step: Step | None = None  # the SDK's step (instrumented agents, when not refused)


class PlayedRun(Protocol):
    """What emit.py reads of a run (runs.RunSim) to record its spans as stock instrumentation
    would."""

    agent: AgentSpec
    start_ns: int
    total_ms: int | None
    deadline_ms: int | None
    instrumented: bool
    new_rpc_semconv: bool
    fail_type: str

    def sid(self, *key: object) -> bytes: ...
