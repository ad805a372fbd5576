"""budgetscope-sdk: one deadline per agent run, honest timeout results, and the budget.* spans
budgetscope reads (its SPEC §2). Depends on opentelemetry-api only.

    from budgetscope_sdk import RunBudget

    with RunBudget(30, reserve=3, agent="support-agent") as budget:
        with budget.step("tool", "fetch_report", cap=9, minimum=0.5) as call:
            report = fetch(timeout=call.timeout, headers=call.headers())
"""

from budgetscope_sdk.budget import ChildBudget, RunBudget, RunResult, current_budget
from budgetscope_sdk.classify import classify
from budgetscope_sdk.clock import Clock, ManualClock, SystemClock
from budgetscope_sdk.errors import BudgetExhausted, StepTimeout
from budgetscope_sdk.intents import Intent, Reconciled, aretry, retry
from budgetscope_sdk.ladder import FIT_ONLY, LANDING, NARROWING, OPEN, LatencyBook
from budgetscope_sdk.propagation import (
    DEADLINE_HEADER,
    REMAINING_HEADER,
    RemoteDeadline,
    deadline_headers,
    grpc_timeout_header,
)
from budgetscope_sdk.results import TimedOut, timed_out
from budgetscope_sdk.step import Step, StepRecord, current_step
from budgetscope_sdk.tools import call_tool, hedged_read, run_tool

__all__ = [
    "DEADLINE_HEADER", "FIT_ONLY", "LANDING", "NARROWING", "OPEN", "REMAINING_HEADER",
    "BudgetExhausted", "ChildBudget", "Clock", "Intent", "LatencyBook", "ManualClock",
    "Reconciled", "RemoteDeadline", "RunBudget", "RunResult", "Step", "StepRecord",
    "StepTimeout", "SystemClock", "TimedOut", "aretry", "classify", "current_budget",
    "call_tool", "current_step", "hedged_read", "deadline_headers", "grpc_timeout_header", "retry",
    "run_tool", "timed_out",
]
__version__ = "0.1.0"
