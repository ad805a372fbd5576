"""The run simulation: play a run's plan against nature under one policy and record the spans.

Time is integer nanoseconds. A call's natural latency comes from `latency.py` (its own stream);
the policy decides whether a call is started at all, retried, hedged or reconciled.

Instrumented agents run on budgetscope_sdk, as a real agent would: a `RunBudget` on the
simulation's clock admits or refuses each call and gives it its slice (`min(cap, remaining -
reserve)`, the SDK's rule), and every budget span is the SDK's, opened when the call starts and
closed with what the call ended with. The plain agent (triage-agent) uses no SDK: its spans are
what stock instrumentation records (`emit.py`). Both go through the OpenTelemetry SDK
(`recorder.py`).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass

import budgetscope_sdk
from budgetscope_sdk import BudgetExhausted, LatencyBook, RunBudget, Step
from budgetscope_sdk.intents import Intent

from . import emit, sim_errors, usage
from .agents import (
    TOOLSPECS,
    AgentSpec,
    Call,
    Fanout,
    Item,
    Planner,
    Subagent,
    pick_agent,
    version_at,
)
from .attempts import Attempt
from .latency import Natural, draw_model, draw_scope, draw_tool, stream
from .policy import Policy, PolicySchedule
from .recorder import Recorder, SimClock, as_span
from .spans import Resource, Run, Span
from .timeline import busy_factor

NS = 1_000_000  # nanoseconds per millisecond
NO_BUDGET_HORIZON_MS = 600_000  # runs without a budget still die eventually
LANDING_IDX = 10_000  # step index of the partial-answer landing call
USER_CANCEL_P = 0.012
_PRIORITY = {"refused": 1, "failed": 2, "exhausted": 3, "cancelled": 4}
SDK_SCOPE = ("budgetscope_sdk", budgetscope_sdk.__version__)  # the scope the SDK's tracer gets

@dataclass(slots=True)
class Frame:
    """A deadline scope: the run itself, a subagent's allocation, or one retried tool step.

    Steps inside a scope see `budget.remaining_ms` as what the scope has left, which is never
    more than the run has left: that is the budget a nested call can actually spend.
    """

    deadline_ns: int
    reserve_ms: int
    parent_id: bytes
    top: bool
    stopped: bool = False
    # The SDK budget steps of this scope spend from (None for the plain agent): the run's
    # RunBudget, or the ChildBudget of a subagent or of a tool that retries inside its step.
    budget: RunBudget | None = None


class RunSim:
    """One run: its plan (policy-free), then its execution under the policy live at its start."""

    def __init__(self, seed: int, index: int, start_ns: int, schedule: PolicySchedule,
                 n_runs: int = 0, recorder: Recorder | None = None) -> None:
        self.seed, self.index, self.start_ns = seed, index, start_ns
        self.rec = recorder or Recorder()
        self.clock = SimClock(start_ns)
        self.arrived_ns: int | None = None
        self.last_end = start_ns
        # Ids also key on the file's run count: a benchmark file and the bundled sample loaded
        # into one database must not share ids (they would be dropped as duplicates).
        self._id_prefix = repr((seed, n_runs, index)).encode()
        plan_rng = stream(seed, index, "plan")
        self.agent: AgentSpec = pick_agent(plan_rng)
        self.instance = plan_rng.randrange(self.agent.instances)
        no_budget_u, explicit_u = plan_rng.random(), plan_rng.random()
        arrival_ms = self.agent.arrival_queue.draw(plan_rng) if self.agent.arrival_queue else 0.0
        self.new_rpc_semconv = plan_rng.random() < 0.5
        self.items: list[Item] = self.agent.planner(Planner(plan_rng))
        # usage draws from streams of its own: it changes no plan, latency or outcome
        self.conversations = usage.Conversations(seed, index, self.agent.name)
        nature = stream(seed, index, "run")
        cancel_u, cancel_frac, self.teardown_ms = nature.random(), nature.random(), nature.random()
        self.busy = busy_factor(start_ns)

        self.policy: Policy = schedule.at(start_ns)
        self.version = version_at(self.agent, start_ns)
        self.instrumented = self.agent.instrumented
        budget = self.policy.budget(self.agent.name)
        self.total_ms = None if no_budget_u < self.agent.no_budget_p else budget.total_ms
        self.reserve_ms = budget.reserve_ms if self.total_ms else 0
        self.deadline_ms: int | None = None  # only when the run states it explicitly
        if self.total_ms is None:
            self.deadline_ns = start_ns + NO_BUDGET_HORIZON_MS * NS
        elif explicit_u < self.agent.explicit_deadline_p:
            # The caller's clock started when the request arrived, before the run did.
            self.arrived_ns = start_ns - int(arrival_ms * NS)
            self.deadline_ms = self.arrived_ns // NS + self.total_ms
            self.deadline_ns = self.deadline_ms * NS
        else:
            self.deadline_ns = start_ns + self.total_ms * NS
        horizon_ms = self.total_ms or NO_BUDGET_HORIZON_MS
        self.cancel_at: int | None = None
        if cancel_u < USER_CANCEL_P:
            self.cancel_at = start_ns + int((2_000 + cancel_frac * 0.9 * horizon_ms) * NS)
        self.trace_id = self._digest(("trace",), 16)
        self.spans: list[Span] = []
        self.stop: str | None = None
        self.fail_type = ""

    # ---- ids and streams -------------------------------------------------------------------

    def _digest(self, key: tuple, size: int) -> bytes:
        raw = hashlib.blake2b(self._id_prefix + repr(key).encode(), digest_size=size)
        out = raw.digest()
        return out if any(out) else out[:-1] + b"\x01"

    def sid(self, *key: object) -> bytes:
        """Span id from the span's role, so the same step keeps its id under another policy."""
        return self._digest(key, 8)

    def nature(self, call: Call, attempt: int, branch: int | str) -> Natural:
        rng = stream(self.seed, self.index, call.idx, attempt, branch)
        if call.kind == "model":
            return draw_model(rng, call.name, call.input_tokens, short=call.idx == LANDING_IDX)
        if call.kind == "subagent":
            return draw_scope(rng)
        busy = self.busy if call.kind == "queue" else 1.0
        # Nature keys on the run start, not the call time, so no policy can shift it.
        return draw_tool(rng, call.name, self.start_ns, busy)

    def set_stop(self, reason: str) -> None:
        if self.stop is None or _PRIORITY[reason] > _PRIORITY[self.stop]:
            self.stop = reason

    # ---- one attempt ------------------------------------------------------------------------

    def minimum_ms(self, landing: bool, cap_ms: int | None = None) -> int:
        """The least slice a call starts with. The policy refuses a call when the budget left
        (beyond the reserve) is below min_start_ms, whatever its cap: a call capped below that
        asks the SDK for no more than its cap."""
        need = self.policy.land_min_ms if landing else self.policy.min_start_ms
        return need if cap_ms is None else min(need, cap_ms)

    def admit(self, frame: Frame, kind: str, name: str, t: int, span_id: bytes,
              cap_ms: int | None, landing: bool = False, intent: Intent | None = None,
              **options: object) -> Step | None:
        """Ask the SDK for this call's slice at `t`; None when it refused the call (the SDK
        has then recorded the `refused` step)."""
        budget = frame.budget
        assert budget is not None
        self.clock.set_ns(t)
        self.rec.name_next(span_id)
        cap = None if cap_ms is None else cap_ms / 1000
        minimum = self.minimum_ms(landing, cap_ms) / 1000
        try:
            if intent is not None:
                return intent.attempt("tool", name, cap=cap, minimum=minimum, **options)
            return budget.step(kind, name, cap=cap, minimum=minimum, landing=landing,
                               **options)  # type: ignore[arg-type]
        except BudgetExhausted:
            self.last_end = max(self.last_end, t)
            return None

    def resolve(self, call: Call, kind: str, t: int, frame: Frame, attempt: int,
                branch: int | str, cap_ms: int | None, landing: bool = False,
                step: Step | None = None) -> Attempt:
        """Decide refusal, allocation and how the wait ended. Touches no run state.

        With an SDK budget, `step` is what the SDK admitted (None: it refused the call)."""
        nat = self.nature(call, attempt, branch)
        remaining = (frame.deadline_ns - t) // NS
        if frame.budget is not None:
            if step is None:
                return Attempt(call, kind, attempt, 0, t, t, t, remaining, cap_ms, None,
                               "refused", nat)
            allocated = step.allocated_ms
            # The simulated clients take their timeout in the whole milliseconds the SDK
            # records as the allocation.
            limit = t + allocated * NS
            by_cap = step.cap_s is not None and step.timeout >= step.cap_s
        else:
            # The plain agent is budget-unaware: it starts anything until its deadline passed.
            if remaining < 1:
                # A refusal is a budget check, not a call: it takes microseconds.
                end = t + 15_000 + int(nat.u * 70_000)
                return Attempt(call, kind, attempt, 0, t, end, end, remaining, cap_ms, None,
                               "refused", nat)
            allocated = remaining if cap_ms is None else min(cap_ms, remaining)
            limit = t + allocated * NS
            by_cap = cap_ms is not None and cap_ms <= remaining
        natural_end = t + int(nat.latency_ms * NS)
        cleanup = int(nat.cleanup_ms * NS)
        a = Attempt(call, kind, attempt, 0 if isinstance(branch, str) else branch, t,
                    natural_end, natural_end, remaining, cap_ms, allocated, "ok", nat,
                    step=step)
        if self.cancel_at is not None and t <= self.cancel_at < min(natural_end, limit):
            a.resp_ns, a.end_ns = self.cancel_at, self.cancel_at + cleanup
            a.outcome, a.user_cancel = "cancelled", True
        elif natural_end <= limit:
            a.outcome = nat.failure.outcome if nat.failure else "ok"
        else:
            a.resp_ns, a.end_ns, a.outcome = limit, limit + cleanup, "client_timeout"
            if by_cap:
                a.reason = "cap"
            elif frame.budget is not None:
                # The run's spendable budget (before its reserve) was the limit: it is spent.
                a.reason = "run" if frame.top else "frame"
            else:
                a.reason = "run" if frame.deadline_ns == self.deadline_ns else "frame"
        return a

    def resolve_step(self, call: Call, kind: str, t: int, frame: Frame, attempt: int,
                     branch: int | str, cap_ms: int | None, landing: bool = False,
                     hedge: bool = False) -> Attempt:
        """`resolve`, admitted through the SDK when the agent has one."""
        step = None
        if frame.budget is not None:
            span_id = self.sid(call.idx, attempt, 0 if isinstance(branch, str) else branch,
                               kind)
            options: dict[str, object] = {"attempt": max(attempt, 1), "hedge": hedge}
            if kind == "model":
                options["attributes"] = {"gen_ai.provider.name": "openai"}
            elif kind == "tool":
                options["side_effect"] = "read"
            step = self.admit(frame, kind, call.name, t, span_id, cap_ms, landing, **options)
        return self.resolve(call, kind, t, frame, attempt, branch, cap_ms, landing, step)

    def note(self, a: Attempt, frame: Frame) -> None:
        """What an attempt's ending means for the run."""
        if a.outcome == "refused":
            if frame.top:
                self.set_stop("refused")
            else:
                frame.stopped = True
        elif a.user_cancel:
            self.set_stop("cancelled")
        elif a.outcome == "client_timeout" and a.reason == "run":
            self.set_stop("exhausted")

    def cap_for(self, name: str) -> int | None:
        return self.policy.cap_ms(self.agent.name, name)

    # ---- plan execution ---------------------------------------------------------------------

    def exec_items(self, items: tuple[Item, ...] | list[Item], t: int, frame: Frame) -> int:
        for item in items:
            if self.stop or frame.stopped:
                break
            t = self.exec_item(item, t + int(item.gap_ms * NS), frame)
        return t

    def exec_item(self, item: Item, t: int, frame: Frame) -> int:
        if isinstance(item, Fanout):
            # Parallel tool calls start a fraction of a millisecond apart.
            ends = [self.exec_call(c, t + k * 350_000, frame) for k, c in enumerate(item.calls)]
            return max(ends)
        if isinstance(item, Subagent):
            return self.exec_subagent(item, t, frame)
        return self.exec_call(item, t, frame)

    def exec_call(self, call: Call, t: int, frame: Frame) -> int:
        if call.kind == "model":
            return self.exec_model(call, t, frame)
        if call.kind == "queue":
            a = self.resolve_step(call, "queue", t, frame, 1, 0, None)
            self.emit(a, frame.parent_id)
            self.note(a, frame)
            return a.end_ns
        spec = TOOLSPECS[call.name]
        if spec.side_effect == "write":
            return self.exec_write(call, t, frame)
        if call.name in self.agent.nested_retry_tools:
            return self.exec_nested(call, t, frame)
        return self.with_retries(call, t, frame, frame.parent_id, self.cap_for(call.name)).end_ns

    def exec_model(self, call: Call, t: int, frame: Frame, landing: bool = False) -> int:
        last = self.with_retries(call, t, frame, frame.parent_id, self.cap_for(call.name), landing)
        if last.outcome not in ("ok", "refused") and not self.stop and not landing:
            # The agent cannot think without its model: the run fails.
            self.fail_type = last.nat.failure.error_type if last.nat.failure else "TimeoutError"
            self.set_stop("failed")
        return last.end_ns

    def retry_allowed(self, a: Attempt, frame: Frame) -> bool:
        retryable = a.outcome == "upstream_error" or (
            a.outcome == "client_timeout" and a.reason == "cap")
        return (retryable and self.policy.retries and a.attempt < self.policy.max_attempts
                and not self.stop and not frame.stopped)

    def backoff(self, a: Attempt, frame: Frame, parent_id: bytes) -> int | None:
        """Sleep before the next attempt; None when the budget left cannot cover it."""
        jitter = stream(self.seed, self.index, a.call.idx, a.attempt, "backoff").random()
        sleep_ms = self.policy.backoff_base_ms * 2 ** (a.attempt - 1) * (0.5 + jitter)
        wake = a.end_ns + int(sleep_ms * NS)
        if (frame.deadline_ns - wake) // NS < self.policy.min_start_ms + frame.reserve_ms:
            return None
        self.emit_backoff(a, wake, frame, parent_id)
        return wake

    def with_retries(self, call: Call, t: int, frame: Frame, parent_id: bytes,
                     cap_ms: int | None, landing: bool = False) -> Attempt:
        attempt = 1
        while True:
            a = self.attempt_once(call, t, frame, attempt, parent_id, cap_ms, landing)
            if not self.retry_allowed(a, frame):
                return a
            wake = self.backoff(a, frame, parent_id)
            if wake is None:
                return a
            t, attempt = wake, attempt + 1

    def attempt_once(self, call: Call, t: int, frame: Frame, attempt: int, parent_id: bytes,
                     cap_ms: int | None, landing: bool = False) -> Attempt:
        kind = "model" if call.kind == "model" else "tool"
        a = self.resolve_step(call, kind, t, frame, attempt, 0, cap_ms, landing)
        hedge_ms = self.policy.hedge_ms(self.agent.name, call.name) if attempt == 1 else None
        winner = a
        if hedge_ms is not None and a.outcome != "refused" and a.resp_ns - t > hedge_ms * NS \
                and self.may_hedge(t + hedge_ms * NS, frame):
            h = self.resolve_step(call, kind, t + hedge_ms * NS, frame, attempt, 1, cap_ms,
                                  hedge=True)
            if h.outcome != "refused":
                winner = self.settle_hedge(a, h)
                self.emit(h, parent_id)
                self.note(h, frame)
        self.emit(a, parent_id)
        self.note(a, frame)
        return winner

    def may_hedge(self, t: int, frame: Frame) -> bool:
        """The agent asks for a duplicate read only when its budget admits one: a hedge that
        would be refused is not requested (and so not recorded as a refusal)."""
        if frame.budget is None:
            return True
        self.clock.set_ns(t)
        return frame.budget.spendable() * 1000 >= self.policy.min_start_ms

    @staticmethod
    def settle_hedge(a: Attempt, h: Attempt) -> Attempt:
        """The first successful answer wins; the other request is cancelled."""
        if h.outcome == "ok" and h.resp_ns < a.resp_ns and not a.user_cancel:
            _cancel(a, h.resp_ns)
            return h
        if a.outcome == "ok" and h.resp_ns > a.resp_ns and not h.user_cancel:
            _cancel(h, a.resp_ns)
        return a

    def exec_nested(self, call: Call, t: int, frame: Frame) -> int:
        """A tool whose HTTP client retries inside the tool step: the step is a ChildBudget
        (kind tool) and its attempts, child steps, spend from its slice."""
        outer_id = self.sid(call.idx, "outer")
        cap_ms = self.cap_for(call.name)
        child = self.scope_budget(frame, "tool", call.name, t, outer_id, cap_ms, "read")
        if child is None:
            self.note(self.refused(call, "tool", t), frame)
            return t
        inner = Frame(t + int(round(child.total_s * 1e9)), 0, outer_id, False, budget=child)
        attempt_cap = self.policy.attempt_caps_ms.get(call.name, cap_ms)
        last = self.with_retries(call, t + 200_000, inner, outer_id, attempt_cap)
        end = last.end_ns + 150_000
        outcome, reason = _outer_ending(last)
        outer = Attempt(call, "tool", 0, 0, t, end, end, 0, cap_ms,
                        child.as_step.allocated_ms, outcome, last.nat, reason, last.user_cancel)
        self.close_scope(child, outer)
        self.note(outer, frame)
        return end

    def exec_subagent(self, sub: Subagent, t: int, frame: Frame) -> int:
        """The subagent spends a ChildBudget carved from this scope (`budget.child`)."""
        call = Call(sub.idx, "subagent", sub.name, 0.0)
        cap_ms = self.cap_for(sub.name)
        child = self.scope_budget(frame, "subagent", sub.name, t, self.sid(sub.idx, "sub"),
                                  cap_ms, None)
        if child is None:
            self.note(self.refused(call, "subagent", t), frame)
            return t
        sub_deadline = t + int(round(child.total_s * 1e9))
        inner = Frame(sub_deadline, 0, self.sid(sub.idx, "sub"), False, budget=child)
        end = self.exec_items(sub.items, t + 300_000, inner) + 400_000
        user_cancel = self.stop == "cancelled"
        outcome, reason = "ok", ""
        if user_cancel:
            outcome = "cancelled"
        elif end >= sub_deadline:
            outcome = "client_timeout"
            # Cut by its own cap, or by what the run could spend: then the run is spent.
            by_cap = cap_ms is not None and cap_ms / 1000 <= child.total_s
            reason = "cap" if by_cap or not frame.top else "run"
        a = Attempt(call, "subagent", 0, 0, t, end, end, 0, cap_ms, child.as_step.allocated_ms,
                    outcome, self.nature(call, 0, "sub"), reason, user_cancel)
        self.close_scope(child, a)
        if outcome != "cancelled":
            self.note(a, frame)
        return end

    def scope_budget(self, frame: Frame, kind: str, name: str, t: int, span_id: bytes,
                     cap_ms: int | None, side_effect: str | None) -> RunBudget | None:
        """A ChildBudget (a subagent's, or a tool's whose client retries) entered at `t`;
        None when the SDK refused it."""
        budget = frame.budget
        assert budget is not None
        self.clock.set_ns(t)
        self.rec.name_next(span_id)
        minimum = self.minimum_ms(False, cap_ms) / 1000
        try:
            if cap_ms is None:
                child = budget.child(share=1.0, name=name, kind=kind, minimum=minimum,
                                     side_effect=side_effect)
            else:
                child = budget.child(duration=cap_ms / 1000, name=name, kind=kind,
                                     minimum=minimum, side_effect=side_effect)
        except BudgetExhausted:
            return None
        self.rec.name_next(span_id)
        child.__enter__()
        return child

    def close_scope(self, child: RunBudget, a: Attempt) -> None:
        self.clock.set_ns(a.end_ns)
        self.last_end = max(self.last_end, a.end_ns)
        step = child.as_step  # type: ignore[attr-defined]
        step.set_outcome(a.outcome)
        if a.outcome in ("client_timeout", "cancelled"):
            step.cleanup_ms = 0  # it ends when its last call's cleanup did
        error = self.error_for(a)
        child.__exit__(type(error) if error else None, error, None)

    def refused(self, call: Call, kind: str, t: int) -> Attempt:
        """What the run notes of a call the SDK refused (its span is the SDK's)."""
        return Attempt(call, kind, 0, 0, t, t, t, 0, None, None, "refused",
                       self.nature(call, 0, "refused"))

    # ---- writes and reconciliation ----------------------------------------------------------

    def exec_write(self, call: Call, t: int, frame: Frame) -> int:
        """A write as an SDK intent: one idempotency key, numbered attempts, a reconcile read."""
        assert frame.budget is not None
        intent = frame.budget.intent(call.name, call.idx)
        attempt = 1
        while True:
            step = self.admit(frame, "tool", call.name, t, self.sid(call.idx, attempt, 0, "tool"),
                              self.cap_for(call.name), intent=intent)
            a = self.resolve(call, "tool", t, frame, attempt, 0, self.cap_for(call.name),
                             step=step)
            effect, landed = _effect(a)
            if step is not None:
                step.set_effect_status(effect)
            self.emit(a, frame.parent_id)
            self.note(a, frame)
            if a.outcome in ("ok", "refused") or self.stop:
                return a.end_ns
            if a.outcome == "client_error":
                self.fail_type = a.nat.failure.error_type if a.nat.failure else "error"
                self.set_stop("failed")
                return a.end_ns
            t = a.end_ns
            if effect == "possible":
                if not self.can_reconcile(a, frame):
                    return t  # an orphan write: it may have happened, nobody reads it back
                t, result = self.reconcile(call, attempt, intent, t + 2 * NS, frame, landed)
                if result == "landed" or self.stop:
                    return t
            a.end_ns = t
            if not self.retry_allowed_write(a, frame):
                return t
            wake = self.backoff(a, frame, frame.parent_id)
            if wake is None:
                return t
            t, attempt = wake, attempt + 1

    def retry_allowed_write(self, a: Attempt, frame: Frame) -> bool:
        # With an idempotency key a write is safe to retry after any uncertain ending.
        return (self.policy.retries and a.attempt < self.policy.max_attempts
                and not self.stop and not frame.stopped)

    def can_reconcile(self, a: Attempt, frame: Frame) -> bool:
        if not (self.policy.reconcile_writes and self.instrumented
                and a.outcome in self.policy.reconcile_on):
            return False
        left_ms = (frame.deadline_ns - a.end_ns) // NS
        return left_ms >= self.policy.reconcile_min_ms + frame.reserve_ms

    def reconcile_by_link(self) -> bool:
        since = self.agent.link_reconcile_from
        return since is not None and _version(self.version) >= _version(since)

    def reconcile(self, write: Call, attempt: int, intent: Intent, t: int, frame: Frame,
                      landed: bool) -> tuple[int, str]:
        """`intent.reconcile`: the read is played inside the SDK's reconcile step."""
        name = TOOLSPECS[write.name].reconcile_with
        assert name is not None
        call = Call(write.idx, "tool", name, 0.0)
        cap_ms = self.cap_for(name)
        played: list[Attempt] = []

        def read(step: Step) -> bool | None:
            a = self.resolve(call, "reconcile", t, frame, attempt, "reconcile", cap_ms,
                             step=step)
            played.append(a)
            self.play(a)
            if a.outcome != "ok":
                # The read failed: we still do not know (None). Handed over, not raised, so no
                # traceback of this file ends up in the sample.
                step.set_error(self.error_for(a) or RuntimeError(a.outcome))
                return None
            # Replication lag: now and then the read cannot tell yet (None: unknown).
            return None if a.nat.u < 0.1 else landed

        self.clock.set_ns(t)
        self.rec.name_next(self.sid(write.idx, attempt, 0, "reconcile"))
        cap = None if cap_ms is None else cap_ms / 1000
        try:
            found = intent.reconcile(read, name=name, cap=cap,
                                     minimum=self.minimum_ms(False, cap_ms) / 1000,
                                     link_to_write=self.reconcile_by_link())
        except BudgetExhausted:
            self.note(self.refused(call, "reconcile", t), frame)
            return t, "unknown"
        a = played[0]
        self.last_end = max(self.last_end, a.end_ns)
        self.note(a, frame)
        return a.end_ns, found.result

    # ---- the run ----------------------------------------------------------------------------

    def simulate(self) -> Run:
        root_id = self.sid("root")
        resource = self.resource()
        self.rec.begin_run(self.trace_id)
        if self.instrumented:
            self.simulate_sdk(root_id, resource)
        else:
            frame = Frame(self.deadline_ns, self.reserve_ms, root_id, True)
            # The first step starts after the harness set the run up (its gap is added too).
            end = self.exec_items(self.items, self.start_ns + 2 * NS, frame)
            outcome = self.land(end, frame)
            last_end = max([end, *(s.end_ns for s in self.spans)])
            root_end = last_end + int((2 + 40 * self.teardown_ms) * NS)
            self.spans.append(emit.root_span(self, root_id, root_end, outcome))
            for span in self.spans:
                self.rec.replay(self.rec.tracer(resource, span.scope), span, self.trace_id)
        spans = [as_span(span) for span in self.rec.collector.take()]
        return Run(self.index, self.trace_id, resource, self.start_ns, spans)

    def simulate_sdk(self, root_id: bytes, resource: Resource) -> None:
        """The run as an agent on budgetscope_sdk writes it: a RunBudget on the simulated clock."""
        assert self.total_ms is not None
        budget = RunBudget(
            self.total_ms / 1000, reserve=self.reserve_ms / 1000,
            name=f"invoke_agent {self.agent.name}", agent=self.agent.name,
            tracer=self.rec.tracer(resource, SDK_SCOPE), clock=self.clock,
            # These agents do not use the ladder's fit_only rung (p95 refusals): the policy
            # decides refusals. A book that never has enough samples keeps the rung off.
            latencies=LatencyBook(keep=1, min_samples=sys.maxsize),
            attributes={"gen_ai.operation.name": "invoke_agent",
                        **usage.run_budget_attributes(self.agent.name, self.version)},
            intent_namespace=self.sid("intents").hex(), arrived_unix_ns=self.arrived_ns)
        self.clock.set_ns(self.start_ns)
        self.rec.name_next(root_id)
        budget.__enter__()
        frame = Frame(self.deadline_ns, self.reserve_ms, root_id, True, budget=budget)
        # The first step starts after the harness set the run up (its gap is added too).
        end = self.exec_items(self.items, self.start_ns + 2 * NS, frame)
        outcome = self.land(end, frame)
        self.clock.set_ns(max(end, self.last_end) + int((2 + 40 * self.teardown_ms) * NS))
        error = self.run_error(outcome)
        if outcome == "partial":
            budget.mark_partial("calls refused for lack of budget; landed a partial answer")
        else:
            budget.set_outcome(outcome)
        budget.__exit__(type(error) if error else None, error, None)

    def run_error(self, outcome: str) -> BaseException | None:
        if outcome == "failed":
            return sim_errors.error_class(self.fail_type or "AgentError")("agent failed")
        if outcome == "exhausted":
            return sim_errors.error_class("DeadlineExceeded")("run deadline exceeded")
        if outcome == "cancelled":
            return sim_errors.cancelled_error(True)
        return None

    def land(self, end: int, frame: Frame) -> str:
        """The run's outcome; a refused run first tries to land a partial answer."""
        if self.stop != "refused":
            return self.stop or "completed"
        # The landing may spend the reserve that every other step had to leave alone.
        self.stop = None
        call = Call(LANDING_IDX, "model", self.agent.main_model, 0.0, 1_500)
        last = self.with_retries(call, end + 3 * NS, frame, frame.parent_id,
                                 self.cap_for(call.name), landing=True)
        if self.stop and self.stop != "refused":
            return self.stop
        if last.outcome == "ok":
            return "partial"
        if last.outcome in ("refused", "client_timeout"):
            return "exhausted"
        self.fail_type = last.nat.failure.error_type if last.nat.failure else "error"
        return "failed"

    # ---- recording ----------------------------------------------------------------------------

    def emit(self, a: Attempt, parent_id: bytes) -> None:
        """Record a step and its HTTP/gRPC client span: through the SDK step the call was
        admitted with, or as the plain agent's stock instrumentation records it."""
        span_id = self.sid(a.call.idx, a.attempt, a.branch, a.kind)
        billed = self.usage_of(a, parent_id)
        if self.instrumented:
            if a.step is not None:  # a refusal's span is already the SDK's
                self.clock.set_ns(a.start_ns)
                self.rec.name_next(span_id)
                a.step.__enter__()
                self.play(a, span_id, billed)
                self.close(a)
            return
        span = emit.step_span(self, a, span_id, parent_id, billed)
        if span is None:
            return
        self.spans.append(span)
        if a.outcome != "refused":
            child = emit.transport_span(self, a, span_id)
            if child is not None:
                self.spans.append(child)

    def usage_of(self, a: Attempt, parent_id: bytes) -> usage.Usage | None:
        """What an answered model call billed (None for anything else): in the conversation
        of the scope it runs in, the run's own or a subagent's."""
        if a.kind != "model" or a.outcome != "ok":
            return None
        return self.conversations.usage(
            parent_id, parent_id == self.sid("root"), a.call.name, a.call.idx, a.attempt,
            a.call.input_tokens, a.nat.output_tokens, a.call.synthesis)

    def play(self, a: Attempt, span_id: bytes | None = None,
             billed: usage.Usage | None = None) -> None:
        """What happens inside an open SDK step until it ends: the client library's transport
        span, the response's attributes, the clock moving to the step's end."""
        step = a.step
        assert step is not None
        span_id = span_id or self.sid(a.call.idx, a.attempt, a.branch, a.kind)
        client = emit.transport_span(self, a, span_id)
        if client is not None:
            self.rec.replay(self.rec.tracer(self.resource(), client.scope), client,
                            self.trace_id)
        if billed is not None:
            usage.record_usage(step, billed)
        step.set_outcome(a.outcome)
        if a.outcome in ("client_timeout", "cancelled"):
            step.cleanup_ms = round((a.end_ns - a.resp_ns) / NS)
        self.clock.set_ns(a.end_ns)
        self.last_end = max(self.last_end, a.end_ns)

    def close(self, a: Attempt) -> None:
        assert a.step is not None
        error = self.error_for(a)
        a.step.__exit__(type(error) if error else None, error, None)

    def error_for(self, a: Attempt) -> BaseException | None:
        """What the client raised when the call ended this way (None: it returned)."""
        if a.outcome == "client_timeout":
            return sim_errors.timeout_error(a.kind, a.call.name, a.allocated_ms or 0)
        if a.outcome == "cancelled":
            return sim_errors.cancelled_error(a.user_cancel)
        failure = a.nat.failure
        if failure is not None and a.outcome in ("upstream_error", "client_error"):
            error_type = failure.error_type
            if a.kind == "model" and failure.http_status is not None:
                error_type = emit.MODEL_ERRORS.get(failure.http_status, error_type)
            return sim_errors.failure_error(failure, error_type, emit.GRPC_NAMES)
        return None

    def emit_backoff(self, a: Attempt, wake: int, frame: Frame, parent_id: bytes) -> None:
        if frame.budget is not None:
            # The SDK's backoff step: the wait before the next attempt, numbered as it.
            self.clock.set_ns(a.end_ns)
            self.rec.name_next(self.sid(a.call.idx, a.attempt, "backoff"))
            step = frame.budget.step("backoff", a.call.name, cap=(wake - a.end_ns) / 1e9,
                                     attempt=a.attempt + 1)
            step.__enter__()
            self.clock.set_ns(wake)
            step.set_outcome("ok")
            step.__exit__(None, None, None)
            self.last_end = max(self.last_end, wake)
        # Plain instrumentation does not see a sleep between attempts.

    def resource(self) -> Resource:
        return emit.resource(self.agent.service, self.version, self.instance)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _outer_ending(last: Attempt) -> tuple[str, str]:
    """How a tool step whose client retried inside it ended, from its last attempt."""
    if last.outcome == "client_timeout" and last.reason == "frame":
        return "client_timeout", "cap"
    if last.outcome == "refused":
        return "client_timeout", "cap"  # no time left for another attempt in our cap
    return last.outcome, last.reason


def _cancel(a: Attempt, at_ns: int) -> None:
    a.resp_ns = at_ns
    a.end_ns = at_ns + int(a.nat.cleanup_ms * NS)
    a.outcome, a.reason = "cancelled", ""


def _effect(a: Attempt) -> tuple[str, bool]:
    """What is known about a write's effect after this attempt, and whether it really landed."""
    if a.outcome == "ok":
        return "completed", True
    if a.outcome in ("client_timeout", "cancelled"):
        return "possible", a.nat.landed_if_abandoned
    if a.outcome == "refused" or a.nat.failure is None:
        return "none", False
    if a.nat.failure.effect == "possible":
        return "possible", a.nat.landed_if_abandoned
    return "none", False

