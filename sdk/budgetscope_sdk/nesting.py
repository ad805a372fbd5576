"""Nesting: where a budget stands among runs, and what is current in the context.

A budget is a run of its own, or a step of another run: a subagent's budget carved from a run
(`RunBudget.child`, a ChildBudget), a RunBudget opened while another is open in the same
context (it becomes a `subagent` step of that run, clamped to what the run may still spend in
time, money and tokens: the articles' "subagents inherit a slice, never a fresh allocation"),
or a service's budget whose span continues its caller's run (`RunBudget.from_remote`). While
a budget is open, it is the context's current budget (`CURRENT_BUDGET`, which
`budget.current_budget()` reads) and its span the current span.

The run (budget.py) holds one Nesting, which places it as it is entered (`nest_in`) and makes
it current (`enter`, `leave`)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Tracer

from budgetscope_sdk.attributes import StepKind
from budgetscope_sdk.clock import Clock
from budgetscope_sdk.durations import Duration, seconds
from budgetscope_sdk.ladder import LatencyBook
from budgetscope_sdk.ledger import Ledger
from budgetscope_sdk.retry_budget import RetryBudget
from budgetscope_sdk.step import Step


class NestingRun(Protocol):
    """What nesting reads and sets of a budget and of the run it nests in: a RunBudget,
    written here as an interface so that this module, which budget.py imports, does not import
    budget.py back."""

    name: str
    agent: str | None
    total_s: float
    reserve_s: float
    per_step_caps: dict[str, float]
    ledger: Ledger
    clock: Clock
    latencies: LatencyBook
    intent_namespace: str
    retry_budget: RetryBudget | None

    @property
    def tracer(self) -> Tracer: ...

    @property
    def is_open(self) -> bool: ...

    def step(self, kind: StepKind, name: str, *, cap: Duration | None = None) -> Step: ...


CURRENT_BUDGET: ContextVar[NestingRun | None] = ContextVar("budgetscope_sdk_budget",
                                                           default=None)

# The settings a nested budget takes from the run it nests in when it was not given its own.
INHERITABLE = ("clock", "latencies", "intent_namespace", "retry_budget")


def child_allocation(spendable: Callable[[], float], share: float | None,
                     duration: Duration | None) -> float:
    """Seconds a child asks of its run: `share` of what the run may spend now (`spendable()`),
    or `duration`."""
    if (share is None) == (duration is None):
        raise ValueError("give a child either share= (0..1] or duration=")
    now = spendable()
    if share is not None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        return share * now
    assert duration is not None
    return seconds(duration, "duration")


class Nesting:
    """Where one budget stands: `as_step`, the step of the enclosing run it is (its span is
    that step's span), else a run of its own; `continues_caller`, a service's budget whose span
    continues its caller's run; `parent`, the run it nested in when opened inside it."""

    def __init__(self, defaults: frozenset[str]) -> None:
        self._defaults = defaults  # which of INHERITABLE the budget was not given
        self.as_step: Step | None = None
        self.continues_caller = False
        self.parent: NestingRun | None = None
        self._budget_token: Token[NestingRun | None] | None = None
        self._otel_token: Token[Context] | None = None

    @staticmethod
    def open_around() -> NestingRun | None:
        """The run open in this context, if any (the innermost)."""
        enclosing = CURRENT_BUDGET.get()
        return enclosing if enclosing is not None and enclosing.is_open else None

    def joins(self, separate_run: bool) -> bool:
        """Whether the budget, opened inside a run, becomes a step of that run: unless it is a
        step already, a separate run, or a continuation of a caller's run."""
        return self.as_step is None and not separate_run and not self.continues_caller

    def nest_in(self, budget: NestingRun, parent: NestingRun) -> None:
        """Make `budget` a `subagent` step of `parent`, the run open around it: its deadline
        is clamped to what the parent may still spend, its reserve keeps its share of the
        budget, its money and tokens spend the parent's too (ledger.Ledger.nested_in), and
        what was left to defaults (clock, latencies, intent namespace, retry budget, tracer,
        caps) is the parent's."""
        self.parent = parent  # the budget's tracer, left to the default, is the parent's
        if "clock" in self._defaults:
            budget.clock = parent.clock
        if "latencies" in self._defaults:
            budget.latencies = parent.latencies
        if "intent_namespace" in self._defaults:
            budget.intent_namespace = parent.intent_namespace
        if "retry_budget" in self._defaults:
            budget.retry_budget = parent.retry_budget
        budget.per_step_caps = {**parent.per_step_caps, **budget.per_step_caps}
        budget.ledger = budget.ledger.nested_in(parent.ledger)
        step = parent.step("subagent", budget.agent or budget.name, cap=budget.total_s)
        if step.timeout < budget.total_s:
            budget.reserve_s *= step.timeout / budget.total_s
            budget.total_s = step.timeout
        self.as_step = step

    def enter(self, budget: NestingRun, span_context: Context) -> None:
        """Make `budget` the context's current budget, and its span the current span."""
        self._otel_token = otel_context.attach(span_context)
        self._budget_token = CURRENT_BUDGET.set(budget)

    def leave(self) -> None:
        """Give the context back as it was before `enter`."""
        if self._budget_token is not None:
            CURRENT_BUDGET.reset(self._budget_token)
            self._budget_token = None
        if self._otel_token is not None:
            otel_context.detach(self._otel_token)
            self._otel_token = None
