"""`budgetscope budgets`: declared budgets per agent, a default for all agents, and per-step caps
(docs/metrics.md §8, §11.5, docs/guide.md#declaring-budgets): each in time, tokens, dollars per run
and dollars per week.

On a file nobody holds the command stores the change and re-derives the affected runs itself;
while `budgetscope serve` holds it, the command goes to that server's /budgets endpoint and the
server does the same through its single writer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import click
import duckdb

from budgetscope.commands.budgets_remote import fetch_declarations, send_change
from budgetscope.commands.common import backend_option, catch_up_derivations
from budgetscope.commands.declared_place import carry_out, on_backend
from budgetscope.commands.tokens import TOKEN_ENV
from queries.terminal import terminal_safe
from queries.words import plural
from store import (
    DIMENSIONS,
    Change,
    DeclarationError,
    apply,
    checked_agent,
    checked_step_key,
    declarations,
    derive_now,
    parse_duration_ms,
    parse_tokens,
    parse_usd_nano,
)


def format_ms(ms: int) -> str:
    """8000 → '8s', 90000 → '90s', 7200000 → '2h', 2500 → '2500ms'."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms % size == 0 and (unit != "m" or ms >= 10 * 60_000):
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def format_usd(nano: int) -> str:
    """500000000 → '0.5', 20000000000 → '20': dollars with up to 9 decimals, trailing zeros
    trimmed (docs/metrics.md §11.3)."""
    whole, fraction = divmod(int(nano), 10**9)
    return f"{whole}.{fraction:09d}".rstrip("0").rstrip(".")


def _dimensions(values: dict[str, Any]) -> list[str]:
    """A declaration's dimensions as a person reads them: 8s, 200000 tokens, $0.5 a run,
    $20 a week."""
    parts = []
    if values.get("duration_ms") is not None:
        parts.append(format_ms(int(values["duration_ms"])))
    if values.get("tokens") is not None:
        parts.append(f"{int(values['tokens'])} tokens")
    if values.get("usd_nano") is not None:
        parts.append(f"${format_usd(values['usd_nano'])} a run")
    if values.get("usd_per_week_nano") is not None:
        parts.append(f"${format_usd(values['usd_per_week_nano'])} a week")
    return parts


def _describe(change: Change) -> str:
    if change.action in ("set", "unset"):
        return f"budget of agent {change.target!r}"
    if change.action in ("cap", "uncap"):
        return f"cap of step {change.target!r}"
    return "default budget"


def _report(change: Change, answer: dict[str, Any], where: str) -> None:
    what = _describe(change)
    declared = _dimensions(change.to_json())
    if not answer["changed"]:
        if declared:
            click.echo(f"{what} is already {', '.join(declared)}; nothing changed")
        else:
            click.echo(f"no {what} was declared; nothing changed")
        return
    if change.action in ("cap",) or change.declared == ("time",):
        head = f"{what} set to {format_ms(change.duration_ms)} ({change.duration_ms} ms)"
    elif declared:
        head = f"{what} set to {', '.join(declared)}"
    elif change.dimensions and change.action in ("unset", "unset_default"):
        head = f"{what}: {', '.join(change.dimensions)} removed"
    else:
        head = f"{what} removed"
    runs = int(answer["runs"])
    if runs < 0:  # ClickHouse: the derived tables measured again, or rebuilt whole
        done = "re-measured" if answer.get("derivation") == "remeasure" else "rebuilt"
        click.echo(f"{head}{where}; derived tables {done} in {float(answer['seconds']):.2f} s")
        return
    if answer.get("derived", True):
        tail = f"{plural(runs, 'run')} re-derived in {float(answer['seconds']):.2f} s"
    else:
        tail = (f"{plural(runs, 'run')} marked; the server is still re-deriving them (they follow "
                "within seconds)")
    click.echo(f"{head}{where}; {tail}")
    if runs == 0 and change.action == "set" and change.declared != ("usd_per_week",):
        own = {"time": "budget.total_ms", "tokens": "budget.total_tokens",
               "usd": "budget.total_usd"}
        names = " / ".join(own[d] for d in change.declared if d in own)
        click.echo(f"no stored run of agent {change.target!r} without its own {names} "
                   "yet; the budget applies to those that arrive")


def _change(context: click.Context, change: Change) -> None:
    try:
        change = change.checked()
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None
    if backend_option(context) is not None:
        from store import clickhouse, clickhouse_declared

        def on_clickhouse(con: clickhouse.ClickHouseConnection) -> None:
            started = time.monotonic()
            stored = clickhouse_declared.apply(con, change)
            # the derived tables measured again, or (stored before a re-measure could read
            # them back) rebuilt whole
            done = clickhouse.update_derived(con) if stored.changed else None
            _report(change, {"changed": stored.changed, "runs": -1, "derivation": done,
                             "seconds": time.monotonic() - started}, " on the backend")

        on_backend(context, on_clickhouse)
        return

    def local(con: duckdb.DuckDBPyConnection) -> None:
        catch_up_derivations(con)
        started = time.monotonic()
        applied = apply(con, change)
        derive_now(con)
        _report(change, {**applied.to_json(), "seconds": time.monotonic() - started}, "")

    def remote(url: str, token: str | None) -> None:
        answer = send_change(url, token, change)
        _report(change, answer, " by the budgetscope serve holding the file")

    carry_out(context, writes=True, endpoint="/budgets", local=local, remote=remote,
              doing="budgets are declared in an existing database")


def _duration(text: str, what: str) -> int:
    try:
        return parse_duration_ms(text, what)
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None


def _parsed(parse: Callable[[str], int], text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse(text)
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None


@click.group("budgets")
@click.option("--token", envvar=TOKEN_ENV, default=None,
              help=f"The bearer token of the budgetscope serve holding the file, when it "
                   f"requires one (env {TOKEN_ENV}).")
@click.pass_context
def budgets_command(context: click.Context, token: str | None) -> None:
    """Declared budgets (docs/metrics.md §10, §11.5): per agent and a default, in time, tokens,
    dollars per run and dollars per week, for the runs that carry none of their own
    (budget.total_ms, budget.total_tokens, budget.total_usd); and caps per step key for steps
    without budget.allocated_ms. Each dimension is declared and removed on its own; a change
    re-measures every affected run, past ones included.

    Durations need a unit: 2500ms, 90s, 5m, 2h, 1d. Token counts: 200000, 200k, 1.5M. Dollars:
    a decimal with up to 9 places (0.50, 20). Step keys are kind:name, e.g. tool:fetch_report
    (kinds: model, tool, subagent, backoff, queue, reconcile, other)."""
    # Its own --token, else the global one (`budgetscope --token T budgets ...`).
    context.obj["token"] = token or context.obj.get("token")


@budgets_command.command("list")
@click.option("--format", "output", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="table (aligned text for a terminal) or json (a list "
                                      "of objects).")
@click.pass_context
def list_command(context: click.Context, output: str) -> None:
    """Every declared budget and cap."""
    if backend_option(context) is not None:
        from store import clickhouse_declared

        rows = on_backend(context, lambda con: [
            d.to_json() for d in clickhouse_declared.declarations(con)])
    else:
        rows = carry_out(context, writes=False, endpoint="/budgets",
                         local=lambda con: [d.to_json() for d in declarations(con)],
                         remote=fetch_declarations, doing="nothing is declared")
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("nothing declared (budgetscope budgets set AGENT DURATION [--tokens N] "
                   "[--usd X] [--usd-per-week X], set --default ..., cap STEP_KEY DURATION)")
        return
    for row in rows:
        # A name stored before names were checked, or by another version, stays inert.
        target = "(default: every agent without its own)" if row["target"] is None else \
            terminal_safe(str(row["target"]))
        label = {"agent": "budget", "default": "budget", "step": "cap"}[row["scope"]]
        values = " ".join(f"{part:>8}" for part in _dimensions(row))
        click.echo(f"{label:<7} {target:<40} {values}  declared {row['declared_at']}")


# A negative duration (`set billing -5s`) reaches the check as an argument, so that the
# message says it is negative rather than "no such option -5".
_NEGATIVE_OK = {"ignore_unknown_options": True}


@budgets_command.command("set", context_settings=_NEGATIVE_OK)
@click.argument("arguments", nargs=-1, metavar="AGENT [DURATION]")
@click.option("--default", "default", is_flag=True,
              help="Set the default for every agent without a budget of its own in that "
                   "dimension: `set --default [DURATION] [--tokens N] ...`.")
@click.option("--tokens", "tokens", metavar="N", default=None,
              help="The token budget of each run (docs/metrics.md §11.5): 200000, 200k, 1.5M.")
@click.option("--usd", "usd", metavar="X", default=None,
              help="The dollar budget of each run: a non-negative decimal, up to 9 places.")
@click.option("--usd-per-week", "usd_per_week", metavar="X", default=None,
              help="The agent's dollar budget per ISO week, for the weekly report "
                   "(docs/metrics.md §11.8).")
@click.pass_context
def set_command(context: click.Context, arguments: tuple[str, ...], default: bool,
                tokens: str | None, usd: str | None, usd_per_week: str | None) -> None:
    """Declare the budget of AGENT (as reports name it: gen_ai.agent.name, else the
    service.name), or with --default the budget of every agent without its own: a DURATION,
    and/or --tokens, --usd, --usd-per-week. Dimensions not given are left as declared."""
    dimensions = {"tokens": _parsed(parse_tokens, tokens),
                  "usd_nano": _parsed(parse_usd_nano, usd),
                  "usd_per_week_nano": _parsed(
                      lambda text: parse_usd_nano(text, "weekly dollar budget"), usd_per_week)}
    others = any(value is not None for value in dimensions.values())
    if default:
        if len(arguments) > 1 or (not arguments and not others):
            raise click.UsageError("set --default takes a DURATION and/or --tokens N, --usd X, "
                                   "--usd-per-week X, e.g. `budgets set --default 60s`")
        duration = _duration(arguments[0], "budget") if arguments else None
        _change(context, Change("set_default", None, duration, **dimensions))
        return
    if len(arguments) not in (1, 2) or (len(arguments) == 1 and not others):
        raise click.UsageError("set takes AGENT DURATION, and/or --tokens N, --usd X, "
                               "--usd-per-week X (e.g. `budgets set billing-agent 45s --usd "
                               "0.50`), or --default")
    agent = _checked(checked_agent, arguments[0])
    duration = _duration(arguments[1], "budget") if len(arguments) == 2 else None
    _change(context, Change("set", agent, duration, **dimensions))


@budgets_command.command("unset")
@click.argument("agent", required=False)
@click.option("--default", "default", is_flag=True, help="Remove the default instead.")
@click.option("--time", "time_", is_flag=True, help="Remove the duration only.")
@click.option("--tokens", "tokens", is_flag=True, help="Remove the token budget only.")
@click.option("--usd", "usd", is_flag=True, help="Remove the dollar budget per run only.")
@click.option("--usd-per-week", "usd_per_week", is_flag=True,
              help="Remove the weekly dollar budget only.")
@click.pass_context
def unset_command(context: click.Context, agent: str | None, default: bool, time_: bool,
                  tokens: bool, usd: bool, usd_per_week: bool) -> None:
    """Remove the declared budget of AGENT (or the default, with --default): the dimensions
    named by --time, --tokens, --usd and --usd-per-week, or all of them when none is."""
    if default == (agent is not None):
        raise click.UsageError("unset takes AGENT, or --default")
    dimensions = tuple(name for name, flag in zip(
        DIMENSIONS, (time_, tokens, usd, usd_per_week), strict=True) if flag)
    if default:
        _change(context, Change("unset_default", dimensions=dimensions))
    else:
        _change(context, Change("unset", _checked(checked_agent, agent),
                                dimensions=dimensions))


@budgets_command.command("cap", context_settings=_NEGATIVE_OK)
@click.argument("step_key")
@click.argument("duration")
@click.pass_context
def cap_command(context: click.Context, step_key: str, duration: str) -> None:
    """Declare the cap of STEP_KEY (kind:name): its steps without budget.allocated_ms get
    min(cap, budget left when they start) as their allocation. A key not seen yet is fine."""
    key = _checked(checked_step_key, step_key)
    _change(context, Change("cap", key, _duration(duration, "cap")))


@budgets_command.command("uncap")
@click.argument("step_key")
@click.pass_context
def uncap_command(context: click.Context, step_key: str) -> None:
    """Remove the declared cap of STEP_KEY."""
    _change(context, Change("uncap", _checked(checked_step_key, step_key)))


def _checked(check: Callable[[Any], str], value: Any) -> str:
    try:
        return check(value)
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None
