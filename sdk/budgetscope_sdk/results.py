"""A timeout is a result the model can act on, not an error string: what was waited for, how
long, what is known about the effect, and what to do next."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class TimedOut:
    """What a tool call that hit its deadline returns to the agent.

    side_effect_status: `none` only when the request provably never left, `possible` when it
    may have reached the other side (the honest default after any timeout), `completed` once a
    reconciliation read it back."""

    tool: str
    deadline_ms: int
    side_effect_status: str
    idempotency_key: str | None
    retryable: bool
    hint: str
    status: str = "timed_out"
    attempt: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def timed_out(tool: str, deadline_ms: int, *, side_effect: str | None,
              side_effect_status: str, idempotency_key: str | None,
              attempt: int = 1) -> TimedOut:
    """The envelope with the hint and retry advice that follow from the effect status."""
    if side_effect_status == "none":
        retryable, hint = True, (
            f"{tool} was not sent within its {deadline_ms} ms and changed nothing; "
            "it is safe to retry or to go on without it.")
    elif side_effect != "write":
        retryable, hint = True, (
            f"{tool} did not answer within {deadline_ms} ms; it only reads, so retry it if "
            "the budget allows or go on without it.")
    elif side_effect_status == "completed":
        retryable, hint = False, (
            f"{tool} timed out but a read-back shows the write landed; do not repeat it.")
    elif idempotency_key:
        retryable, hint = True, (
            f"{tool} may still be completing; retry only with idempotency key "
            f"{idempotency_key} (or reconcile by it) before assuming it failed.")
    else:
        retryable, hint = False, (
            f"{tool} may have taken effect and has no idempotency key; read its state back "
            "before doing anything that would repeat it.")
    return TimedOut(tool=tool, deadline_ms=deadline_ms, side_effect_status=side_effect_status,
                    idempotency_key=idempotency_key, retryable=retryable, hint=hint,
                    attempt=attempt)
