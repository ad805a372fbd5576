"""budgetscope-sdk: one deadline per agent run, honest timeout results, and the budget.* spans
budgetscope reads. Depends on opentelemetry-api only.

    from budgetscope_sdk import RunBudget

    with RunBudget(30, reserve=3, agent="support-agent") as budget:
        with budget.step("tool", "fetch_report", cap=9, minimum=0.5) as call:
            report = fetch(timeout=call.timeout, headers=call.headers())

Money and tokens likewise: `RunBudget(30, usd=0.50, tokens=200_000)`, and a model step
`budget.step("model", "gpt-4.1", max_output_tokens=2000, price=Price(input=2, output=8))`
holds its estimate, gets `call.max_tokens`, or is refused; `call.record_usage(...)` counts.

The httpx transports are in `budgetscope_sdk.httpx_transport` (they import httpx), the
framework adapters in `budgetscope_sdk.adapters.*`.
"""

from budgetscope_sdk.attributes import (
    EffectStatus,
    ReconcileResult,
    RunOutcome,
    SideEffect,
    StepKind,
    StepOutcome,
)
from budgetscope_sdk.budget import ChildBudget, RunBudget, RunResult, current_budget
from budgetscope_sdk.classify import classify
from budgetscope_sdk.clock import Clock, ManualClock, SystemClock
from budgetscope_sdk.decorator import budgeted_tool
from budgetscope_sdk.errors import BudgetExhausted, StepTimeout
from budgetscope_sdk.intents import Intent, Reconciled, aretry, retry
from budgetscope_sdk.ladder import FIT_ONLY, LANDING, NARROWING, OPEN, LatencyBook
from budgetscope_sdk.price import Price
from budgetscope_sdk.propagation import (
    DEADLINE_HEADER,
    IDEMPOTENCY_HEADER,
    REMAINING_HEADER,
    RemoteDeadline,
    deadline_headers,
    grpc_timeout_header,
)
from budgetscope_sdk.results import TimedOut, timed_out
from budgetscope_sdk.retry_budget import RetryBudget
from budgetscope_sdk.step import Step, StepRecord, current_step
from budgetscope_sdk.tools import call_tool, hedged_read, run_tool
from budgetscope_sdk.usage import Usage

__all__ = [
    "DEADLINE_HEADER", "FIT_ONLY", "IDEMPOTENCY_HEADER", "LANDING", "NARROWING", "OPEN",
    "REMAINING_HEADER", "BudgetExhausted", "ChildBudget", "Clock", "EffectStatus", "Intent",
    "LatencyBook", "ManualClock", "Price", "ReconcileResult", "Reconciled", "RemoteDeadline",
    "RetryBudget", "RunBudget", "RunOutcome", "RunResult", "SideEffect", "Step", "StepKind",
    "StepOutcome", "StepRecord", "StepTimeout", "SystemClock", "TimedOut", "Usage", "aretry",
    "budgeted_tool", "call_tool", "classify", "current_budget", "current_step",
    "deadline_headers", "grpc_timeout_header", "hedged_read", "retry", "run_tool", "timed_out",
]
__version__ = "0.1.0"
