"""A run's money and tokens: what is spent, what calls in flight hold, and whether the next call
fits. The twin of the run's deadline for the two budgets that are not time.

A model step is admitted the way a time slice is: it **holds** an estimate against what is left
while it is in flight (so calls admitted together cannot jointly overshoot), its output is
**allocated** `min(max_output_tokens, what the money and tokens left afford after the input
estimate and the reserve)`, it is **refused** when not even its minimum output fits, and when it
ends its hold is released and what it **recorded** is added instead. All amounts are integers
(nano-dollars, tokens) changed under one lock per run, nested budgets included, so many threads
and tasks can admit and settle at once.

The run (budget.py) holds one Ledger: its admission (admission.py) calls `admit`, `stamps` and
`phase`, its nesting (nesting.py) `nested_in`, its ending (ending.py) `outcome_attributes`, and
the run itself `run_attributes` and `describe`; a step holds the `Spend` it was admitted with
and calls `record` and `settle`."""

from __future__ import annotations

import math
import threading
from typing import Any

from budgetscope_sdk import attributes as attr
from budgetscope_sdk import ladder
from budgetscope_sdk.errors import BudgetExhausted
from budgetscope_sdk.price import (
    ATTO_PER_NANO,
    NANO_PER_USD,
    Price,
    ceil_div,
    format_usd,
    nano_to_usd,
    reported_usd_to_nano,
    usd_to_nano,
)
from budgetscope_sdk.usage import MAX_TOKENS_COUNT, Usage

DEFAULT_MINIMUM_OUTPUT_TOKENS = 256
_STILL_OPEN = (ladder.OPEN, "usd", 0.0)
# Classes after which a call is presumed billed though it recorded no usage (docs/metrics.md
# §11.4): the ledger then keeps its estimate as spent. After the others nothing is charged.
_POSSIBLY_BILLED = frozenset({"ok", "client_timeout", "cancelled", "error"})


def _token_count(value: Any, what: str, *, positive: bool = False) -> int:
    if type(value) is int and value >= positive:  # a bool is not a count
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        least = "1" if positive else "0"
        raise ValueError(f"{what} must be a whole number of tokens at least {least}, "
                         f"got {value!r}")
    return value


class Ledger:
    """The money and tokens of one run, or of a budget nested in one (`parent`): a nested
    ledger's calls spend from every ledger above it too, within the least that any of them
    has left."""

    def __init__(self, total_nano: int | None = None, total_tokens: int | None = None,
                 reserve_nano: int = 0, parent: Ledger | None = None) -> None:
        self.total_nano = total_nano
        self.total_tokens = total_tokens
        self.reserve_nano = reserve_nano
        self.parent = parent
        self.root: Ledger = self if parent is None else parent.root
        # One lock for a whole tree of budgets: an admission reads and holds at every level.
        self.lock: threading.Lock = threading.Lock() if parent is None else parent.lock
        self.chain: tuple[Ledger, ...] = (self,) if parent is None else (self, *parent.chain)
        self.money = any(level.total_nano is not None for level in self.chain)
        self.tokens = any(level.total_tokens is not None for level in self.chain)
        self.active = self.money or self.tokens
        self.spent_nano = 0
        self.spent_tokens = 0
        self.held_nano = 0
        self.held_tokens = 0
        # The input (cache included) of the run's last completed model call: the next call's
        # input estimate (an agent's context only grows). Kept on the root.
        self.last_input: int | None = None
        self.refused_by: str | None = None  # the budget of the last call refused for money
        # Below these, what is spent leaves this level on the ladder's first rung (open): below
        # 60% of the budget and more than the reserve left (ladder.phase_at).
        self._open_below_nano = math.inf if total_nano is None else min(
            ladder.NARROWING_AT * total_nano, total_nano - reserve_nano)
        self._open_below_tokens = math.inf if total_tokens is None else \
            ladder.NARROWING_AT * total_tokens

    @classmethod
    def for_run(cls, usd: Any, tokens: Any, reserve_usd: Any) -> Ledger:
        """A run's ledger from RunBudget's arguments, each checked (ValueError naming it)."""
        total_nano = None if usd is None else usd_to_nano(usd, "usd")
        total_tokens = None if tokens is None else _token_count(tokens, "tokens")
        reserve_nano = usd_to_nano(reserve_usd, "reserve_usd")
        if reserve_nano and total_nano is None:
            raise ValueError("reserve_usd is kept out of a dollar budget: give usd= too")
        if reserve_nano and total_nano is not None and reserve_nano >= total_nano:
            raise ValueError(f"reserve_usd ({format_usd(reserve_nano)}) must be less than "
                             f"usd ({format_usd(total_nano)})")
        return cls(total_nano, total_tokens, reserve_nano)

    def nested_in(self, parent: Ledger) -> Ledger:
        """This budget's ledger as a budget nested in `parent`'s run: its own totals clamped
        to what the parent may still spend (its reserve scaled with it), its calls spending
        from the parent too. A dimension it does not set is the parent's."""
        with parent.lock:
            money_left = parent._least(landing=False)[1] if parent.money else None
            tokens_left = parent._least(landing=False)[2] if parent.tokens else None
        total_nano, reserve_nano = self.total_nano, self.reserve_nano
        if total_nano is not None and money_left is not None and money_left < total_nano:
            reserve_nano = reserve_nano * max(0, money_left) // total_nano if total_nano else 0
            total_nano = max(0, money_left)
        total_tokens = self.total_tokens
        if total_tokens is not None and tokens_left is not None:
            total_tokens = max(0, min(total_tokens, tokens_left))
        return Ledger(total_nano, total_tokens, reserve_nano, parent)

    # -- reading -----------------------------------------------------------------------------
    def _least(self, landing: bool) -> tuple[int | None, int | None, int | None]:
        """(money left, money spendable, tokens left) over the chain, holds counted (the lock
        held by the caller)."""
        left = spendable = tokens = None
        for level in self.chain:
            if level.total_nano is not None:
                free = level.total_nano - level.spent_nano - level.held_nano
                left = free if left is None else min(left, free)
                usable = free if landing else free - level.reserve_nano
                spendable = usable if spendable is None else min(spendable, usable)
            if level.total_tokens is not None:
                free = level.total_tokens - level.spent_tokens - level.held_tokens
                tokens = free if tokens is None else min(tokens, free)
        return left, spendable, tokens

    @staticmethod
    def _stamp(money_left: int | None, tokens_left: int | None) -> dict[str, Any]:
        stamps: dict[str, Any] = {}
        if money_left is not None:
            stamps[attr.REMAINING_USD] = money_left / NANO_PER_USD if money_left > 0 else 0.0
        if tokens_left is not None:
            stamps[attr.REMAINING_TOKENS] = tokens_left if tokens_left > 0 else 0
        return stamps

    def stamps(self) -> dict[str, Any]:
        """budget.remaining_usd / remaining_tokens now (what calls in flight hold counted)."""
        if not self.active:
            return {}
        with self.lock:
            left, _, tokens = self._least(landing=True)
        return self._stamp(left, tokens)

    def run_attributes(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if self.total_nano is not None:
            values[attr.TOTAL_USD] = nano_to_usd(self.total_nano)
            if self.reserve_nano:
                values[attr.RESERVE_USD] = nano_to_usd(self.reserve_nano)
        if self.total_tokens is not None:
            values[attr.TOTAL_TOKENS] = self.total_tokens
        return values

    # -- admission ---------------------------------------------------------------------------
    def admit(self, kind: str, name: str, landing: bool, *, max_output_tokens: int | None,
              minimum_output_tokens: int, price: Price | None, estimate_usd: float | None,
              input_tokens: int | None) -> Spend | None:
        """The Spend of a step about to start: its hold placed, its output allocated, or its
        refusal (`refused_by`) when not even `minimum_output_tokens` fit. None for a step that
        neither spends nor has a budget to be measured against."""
        asks = price is not None or estimate_usd is not None or input_tokens is not None \
            or max_output_tokens is not None
        if not asks and not self.active:
            return None  # a run without money or tokens: nothing to account for
        output_bearing = kind == "model" or max_output_tokens is not None
        if not (output_bearing or asks):
            return Spend(self, kind, None, None, self.stamps())
        if price is not None and not isinstance(price, Price):
            raise ValueError(f"price must be a budgetscope_sdk.Price, got {price!r}")
        # checked by _token_count, whose common case (a plain int) is tested inline here
        ceiling = max_output_tokens if type(max_output_tokens) is int and max_output_tokens > 0 \
            else None if max_output_tokens is None else _token_count(
                max_output_tokens, "max_output_tokens", positive=True)
        minimum = minimum_output_tokens if type(minimum_output_tokens) is int \
            and minimum_output_tokens >= 0 else _token_count(minimum_output_tokens,
                                                             "minimum_output_tokens")
        if ceiling is not None and minimum > ceiling:
            if minimum != DEFAULT_MINIMUM_OUTPUT_TOKENS:
                raise ValueError(f"minimum_output_tokens ({minimum}) must be at most "
                                 f"max_output_tokens ({ceiling})")
            minimum = ceiling  # the default minimum never asks for more than the call's cap
        estimate_atto = None if estimate_usd is None else usd_to_nano(
            estimate_usd, "estimate_usd") * ATTO_PER_NANO
        given_input = None if input_tokens is None else _token_count(input_tokens,
                                                                     "input_tokens")
        if not self.active:
            return Spend(self, kind, price, ceiling)
        with self.lock:
            if self.parent is None:  # _least, inline for a run's own ledger (the usual case)
                left = spendable = tokens_left = None
                if self.total_nano is not None:
                    left = self.total_nano - self.spent_nano - self.held_nano
                    spendable = left if landing else left - self.reserve_nano
                if self.total_tokens is not None:
                    tokens_left = self.total_tokens - self.spent_tokens - self.held_tokens
            else:
                left, spendable, tokens_left = self._least(landing)
            input_estimate = given_input if given_input is not None else (
                self.root.last_input or 0) if kind == "model" else 0
            # the call's cost apart from its output, and per output token, in atto-dollars: a
            # Price prices the input estimate and each output token; the caller's estimate is
            # the call's cost at its max_output_tokens (with a Price its output part shrinks
            # with the allocation, without one it is all or nothing); neither holds nothing
            per_output = 0 if price is None else price.output_pico
            if estimate_atto is not None:
                base = max(0, estimate_atto - (ceiling or 0) * per_output)
            else:
                base = 0 if price is None else input_estimate * price.input_pico
            allocated, refused_by = _allocate(
                None if spendable is None else spendable * ATTO_PER_NANO, tokens_left,
                base, per_output, input_estimate, ceiling,
                (minimum if minimum > 1 else 1) if output_bearing else 0, kind == "model")
            stamps: dict[str, Any] = {}  # _stamp, inline: this is every model step's path
            if left is not None:
                stamps[attr.REMAINING_USD] = left / NANO_PER_USD if left > 0 else 0.0
            if tokens_left is not None:
                stamps[attr.REMAINING_TOKENS] = tokens_left if tokens_left > 0 else 0
            if refused_by is not None:
                for level in self.chain:
                    level.refused_by = refused_by
                return Spend(self, kind, price, None, stamps, 0, 0, refused_by,
                             _refusal_reason(refused_by, spendable, tokens_left,
                                             input_estimate, minimum, price, estimate_atto,
                                             landing))
            hold_nano = ceil_div(base + (allocated or 0) * per_output, ATTO_PER_NANO) \
                if self.money else 0
            hold_tokens = input_estimate + allocated if self.tokens and output_bearing \
                and allocated is not None else 0
            for level in self.chain:
                level.held_nano += hold_nano
                level.held_tokens += hold_tokens
        spend = Spend(self, kind, price, allocated, stamps, hold_nano, hold_tokens)
        if ceiling is None and estimate_atto is None:
            # Unbounded output: the hold is all that is left, but only the input is an
            # estimate of what the call costs if it records nothing.
            spend.estimate_nano = ceil_div(base, ATTO_PER_NANO) if self.money else 0
            spend.estimate_tokens = input_estimate if hold_tokens else 0
        return spend

    # -- the run's state ---------------------------------------------------------------------
    def phase(self) -> tuple[str, str, float]:
        """(phase, budget, share consumed) of the dimension furthest down the ladder, from
        what is spent (not held: a hold is released when its call ends)."""
        for level in self.chain:  # the common case, two comparisons a level: still open
            if level.spent_nano >= level._open_below_nano \
                    or level.spent_tokens >= level._open_below_tokens:
                break
        else:
            return _STILL_OPEN
        furthest = _STILL_OPEN
        # Read without the lock: a count read while another call settles moves the ladder a
        # call early or late, never the admission (which holds the lock).
        for level in self.chain:
            for total, spent, reserve, name in (
                    (level.total_nano, level.spent_nano, level.reserve_nano, "usd"),
                    (level.total_tokens, level.spent_tokens, 0, "tokens")):
                if total is None or (spent < ladder.NARROWING_AT * total
                                     and total - spent > reserve):
                    continue  # still open: the common case, decided without the ladder
                now = ladder.phase_at(spent, total, reserve)
                if ladder.phase_index(now) > ladder.phase_index(furthest[0]):
                    furthest = (now, name, round(min(spent / total, 1.0), 4) if total else 1.0)
        return furthest

    def ran_out(self) -> bool:
        """Whether money or tokens cut the run short: a call refused for them, or only the
        reserve left."""
        if not self.active:
            return False
        return self.refused_by is not None or self.phase()[0] == ladder.LANDING

    def outcome_attributes(self, outcome: str, error: BaseException | None,
                           time_ran_out: bool) -> dict[str, str]:
        """budget.run.exhausted_by when money or tokens, not time, ended an `exhausted` or
        `partial` run (time is the default, left unstated)."""
        if outcome not in ("exhausted", "partial") or not self.active:
            return {}
        if isinstance(error, BudgetExhausted):
            if error.refused_by in ("usd", "tokens"):
                return {attr.RUN_EXHAUSTED_BY: error.refused_by}
            return {}
        if time_ran_out:
            return {}
        if self.refused_by is not None:
            return {attr.RUN_EXHAUSTED_BY: self.refused_by}
        phase, dimension, _ = self.phase()
        return {attr.RUN_EXHAUSTED_BY: dimension} if phase == ladder.LANDING else {}

    def describe(self, time_left_s: float, total_s: float, reserve_s: float,
                 phase: str) -> str:
        """What is left of the run's time, money and tokens, and its phase, in a sentence for
        the model to read."""
        with self.lock:
            left, _, tokens = self._least(landing=True)
        parts = [f"{time_left_s:.1f} s of {total_s:g} s left ({reserve_s:g} s of it kept for "
                 f"the final answer)"]
        if left is not None:
            total = min(level.total_nano for level in self.chain if level.total_nano is not None)
            text = f"{format_usd(max(0, left))} of {format_usd(total)} left"
            reserve = max(level.reserve_nano for level in self.chain)
            if reserve:
                text += f" ({format_usd(reserve)} of it kept for the final answer)"
            parts.append(text)
        if tokens is not None:
            total_tokens = min(level.total_tokens for level in self.chain
                               if level.total_tokens is not None)
            parts.append(f"{max(0, tokens):,} of {total_tokens:,} tokens left")
        return "; ".join(parts) + f"; phase: {phase}."


def _allocate(money_atto: int | None, tokens_left: int | None, base: int, per_output: int,
              input_estimate: int, ceiling: int | None, need: int,
              must_have_money: bool) -> tuple[int | None, str | None]:
    """(output tokens allocated, None: not limited; or the budget that refuses the call).
    An output-bearing call needs `need` output tokens; another (a tool with an estimate, need
    0) only needs its estimate to fit."""
    money_affords: int | None = None
    if money_atto is not None:
        if must_have_money and money_atto <= 0:
            money_affords = -1  # nothing left: no model call is free
        elif per_output:
            money_affords = (money_atto - base) // per_output
        elif base > money_atto:
            money_affords = -1
    tokens_afford = None if tokens_left is None else tokens_left - input_estimate
    money_short = money_affords is not None and money_affords < need
    tokens_short = need > 0 and tokens_afford is not None and tokens_afford < need
    if money_short or tokens_short:
        if money_short and tokens_short:
            assert money_affords is not None and tokens_afford is not None
            return None, "usd" if money_affords <= tokens_afford else "tokens"
        return None, "usd" if money_short else "tokens"
    allocated = ceiling
    if money_affords is not None and (allocated is None or money_affords < allocated):
        allocated = money_affords
    if tokens_afford is not None and (allocated is None or tokens_afford < allocated):
        allocated = tokens_afford
    return allocated, None


def _refusal_reason(refused_by: str, spendable: int | None, tokens_left: int | None,
                    input_estimate: int, minimum: int, price: Price | None,
                    estimate_atto: int | None, landing: bool) -> str:
    """Why, in numbers: what was left (calls in flight holding theirs) against what the call
    needed."""
    if refused_by == "tokens":
        return (f"{max(0, tokens_left or 0):,} tokens left (calls in flight holding theirs), "
                f"the call needs its input (~{input_estimate:,}) and at least {minimum:,} "
                f"output tokens")
    money = format_usd(max(0, spendable or 0))
    where = "left" if landing else "left beyond the reserve"
    if spendable is None or spendable <= 0:
        return f"{money} of the dollar budget {where} (calls in flight holding theirs)"
    if estimate_atto is not None and price is None:
        return (f"{money} {where} (calls in flight holding theirs), the call's estimate is "
                f"{format_usd(estimate_atto // ATTO_PER_NANO)}")
    return (f"{money} {where} (calls in flight holding theirs), not enough for ~"
            f"{input_estimate:,} input and {minimum:,} output tokens at {price!r}")


class Spend:
    """What one step holds and has recorded. `allocated` is its output ceiling (call.max_tokens);
    `usage` the sum of what it recorded; `cost_nano` that usage's cost when known (from the
    step's Price, else the costs it was given)."""

    __slots__ = ("allocated", "attributes", "charged_nano", "charged_tokens", "cost_known",
                 "cost_nano", "estimate_nano", "estimate_tokens", "hold_nano", "hold_tokens",
                 "kind", "ledger", "price", "reason", "refused_by", "settled", "usage")

    def __init__(self, ledger: Ledger | None, kind: str, price: Price | None,
                 allocated: int | None = None, stamps: dict[str, Any] | None = None,
                 hold_nano: int = 0, hold_tokens: int = 0, refused_by: str | None = None,
                 reason: str = "") -> None:
        """`stamps` become the start of its span attributes (the dict is kept, not copied)."""
        self.ledger = ledger
        self.kind = kind
        self.price = price
        self.allocated = allocated
        self.hold_nano = self.estimate_nano = hold_nano
        self.hold_tokens = self.estimate_tokens = hold_tokens
        self.refused_by = refused_by
        self.reason = reason
        attributes = self.attributes = {} if stamps is None else stamps
        if refused_by is not None:
            attributes[attr.REFUSED_BY] = refused_by
        elif allocated is not None:
            attributes[attr.ALLOCATED_TOKENS] = allocated
        self.usage: Usage | None = None
        self.cost_nano = self.charged_nano = self.charged_tokens = 0
        self.cost_known = self.settled = False

    def refusal(self, step_key: str) -> BudgetExhausted:
        return BudgetExhausted(f"refused {step_key}: {self.reason}", step_key=step_key,
                               refused_by=self.refused_by or "usd")

    def write_attributes(self, values: dict[str, Any]) -> None:
        """Add to `values` the usage attributes of what the step recorded, and budget.cost_usd
        when known. Read by the step as it closes, without the lock: a response recorded by
        another thread at that very moment misses the span (the ledger still counts it)."""
        usage = self.usage
        if usage is not None:  # the OpenTelemetry GenAI names of the counts that are known
            if usage.input is not None:
                values[attr.GEN_AI_INPUT_TOKENS] = usage.input
            if usage.output is not None:
                values[attr.GEN_AI_OUTPUT_TOKENS] = usage.output
            if usage.cache_read is not None:
                values[attr.GEN_AI_CACHE_READ] = usage.cache_read
            if usage.cache_write is not None:
                values[attr.GEN_AI_CACHE_WRITE] = usage.cache_write
            if usage.reasoning is not None:
                values[attr.GEN_AI_REASONING] = usage.reasoning
        if self.cost_known:
            values[attr.COST_USD] = self.cost_nano / NANO_PER_USD

    def record(self, input_tokens: Any, output_tokens: Any, cache_read: Any, cache_write: Any,
               reasoning: Any, cost_usd: Any) -> None:
        """Add one response's usage as someone else reported it (each count kept only when it
        is a non-negative int up to 10¹², as usage.count checks) and the cost the caller knows.
        Nothing valid: nothing changes. Every recorded response comes through here, so the
        checks and the price are written out inline."""
        top = MAX_TOKENS_COUNT
        given = input_tokens if type(input_tokens) is int and 0 <= input_tokens <= top else None
        output = output_tokens if type(output_tokens) is int and 0 <= output_tokens <= top \
            else None
        read = cache_read if type(cache_read) is int and 0 <= cache_read <= top else None
        write = cache_write if type(cache_write) is int and 0 <= cache_write <= top else None
        thought = reasoning if type(reasoning) is int and 0 <= reasoning <= top else None
        reported = None if cost_usd is None else reported_usd_to_nano(cost_usd)
        nothing = given is None and output is None and read is None and write is None \
            and thought is None
        if nothing and (reported is None or self.price is not None):
            return
        with self.ledger.lock if self.ledger is not None else _DETACHED_LOCK:
            if not nothing:
                found = Usage(given, output, read, write, thought)
                self.usage = found if self.usage is None else self.usage.plus(found)
            price = self.price
            if price is not None:
                # Usage.split and Price.cost_atto, rounded half to even to the nano-dollar
                read_n, write_n, given_n = read or 0, write or 0, given or 0
                fresh = given_n if given_n < read_n + write_n else given_n - read_n - write_n
                out_n, thought_n = output or 0, thought or 0
                atto = (fresh * price.input_pico + read_n * price.cache_read_pico
                        + write_n * price.cache_write_pico
                        + (out_n if out_n >= thought_n else out_n + thought_n)
                        * price.output_pico)
                nano, rest = divmod(atto, ATTO_PER_NANO)
                if 2 * rest > ATTO_PER_NANO or (2 * rest == ATTO_PER_NANO and nano % 2):
                    nano += 1
                self.cost_nano += nano
                self.cost_known = True
            elif reported is not None:
                self.cost_nano += reported
                self.cost_known = True
            if self.settled:
                self._charge_locked(None)  # late usage: spent is spent

    def settle(self, outcome: str | None) -> None:
        """The step ended (`outcome`): its hold released, what it spent added."""
        if self.ledger is None:
            return
        with self.ledger.lock:
            if self.settled:
                return
            self.settled = True
            if self.hold_nano or self.hold_tokens:
                for level in self.ledger.chain:
                    level.held_nano -= self.hold_nano
                    level.held_tokens -= self.hold_tokens
            input_tokens = self._charge_locked(outcome)
            if input_tokens is not None and self.kind == "model":
                self.ledger.root.last_input = input_tokens

    def release(self) -> None:
        """The step never started: its hold released, nothing spent."""
        if self.ledger is None:
            return
        with self.ledger.lock:
            if not self.settled:
                self.settled = True
                for level in self.ledger.chain:
                    level.held_nano -= self.hold_nano
                    level.held_tokens -= self.hold_tokens

    def _charge_locked(self, outcome: str | None) -> int | None:
        """Bring what this step counts as spent up to date (the ledger's lock held). With
        usage: its tokens and its cost (the estimate when the cost is unknown). Without: the
        estimate when the call was possibly billed, else nothing. Returns the usage's input
        with its cache when it recorded an input."""
        if self.ledger is None:
            return None
        counted = None
        usage = self.usage
        if usage is not None:
            # Usage.split: an input below its own cache was counted without it; an output
            # below its reasoning was reported beside it
            given, read, write = usage.input or 0, usage.cache_read or 0, usage.cache_write or 0
            output, reasoning = usage.output or 0, usage.reasoning or 0
            inputs = given if given >= read + write else given + read + write
            tokens = inputs + (output if output >= reasoning else output + reasoning)
            if usage.input is not None:
                counted = inputs
            cost = self.cost_nano if self.cost_known else self.estimate_nano
        elif self.cost_known:
            tokens, cost = self.estimate_tokens, self.cost_nano
        elif outcome in _POSSIBLY_BILLED:
            tokens, cost = self.estimate_tokens, self.estimate_nano
        else:
            tokens, cost = 0, 0
        for level in self.ledger.chain:
            level.spent_nano += cost - self.charged_nano
            level.spent_tokens += tokens - self.charged_tokens
        self.charged_nano, self.charged_tokens = cost, tokens
        return counted


_DETACHED_LOCK = threading.Lock()  # a step outside any budget's accounting: rare, never held long
