"""`budgetscope budgets`: declared budgets per agent, a default for all agents, and per-step caps
(SPEC §8, §10).

On a file nobody holds the command stores the change and re-derives the affected runs itself;
while `budgetscope serve` holds it, the command goes to that server's /budgets endpoint and the
server does the same through its single writer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import duckdb

from budgetscope.commands.budgets_remote import (
    RemoteError,
    budgets_url,
    fetch_declarations,
    send_change,
)
from budgetscope.commands.common import (
    WRITER_WAIT_SECONDS,
    Fail,
    backend_option,
    catch_up_derivations,
    db_option,
    no_database,
    refuse_trace_file,
)
from budgetscope.commands.tokens import TOKEN_ENV
from queries.readable import plural
from queries.terminal import terminal_safe
from store import (
    READER_WAIT_SECONDS,
    Change,
    DatabaseBusy,
    DeclarationError,
    SchemaError,
    apply,
    checked_agent,
    checked_step_key,
    clickhouse,
    clickhouse_declared,
    connect,
    declarations,
    derive_now,
    parse_duration_ms,
)


def format_ms(ms: int) -> str:
    """8000 → '8s', 90000 → '90s', 7200000 → '2h', 2500 → '2500ms'."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms % size == 0 and (unit != "m" or ms >= 10 * 60_000):
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _describe(change: Change) -> str:
    if change.action in ("set", "unset"):
        return f"budget of agent {change.target!r}"
    if change.action in ("cap", "uncap"):
        return f"cap of step {change.target!r}"
    return "default budget"


def _report(change: Change, answer: dict[str, Any], where: str) -> None:
    what = _describe(change)
    if not answer["changed"]:
        if change.duration_ms is not None:
            click.echo(f"{what} is already {format_ms(change.duration_ms)}; nothing changed")
        else:
            click.echo(f"no {what} was declared; nothing changed")
        return
    if change.duration_ms is not None:
        head = f"{what} set to {format_ms(change.duration_ms)} ({change.duration_ms} ms)"
    else:
        head = f"{what} removed"
    runs = int(answer["runs"])
    if runs < 0:  # ClickHouse: the derived tables are rebuilt whole
        click.echo(f"{head}{where}; derived tables rebuilt in {float(answer['seconds']):.2f} s")
        return
    if answer.get("derived", True):
        tail = f"{plural(runs, 'run')} re-derived in {float(answer['seconds']):.2f} s"
    else:
        tail = (f"{plural(runs, 'run')} marked; the server is still re-deriving them (they follow "
                "within seconds)")
    click.echo(f"{head}{where}; {tail}")
    if runs == 0 and change.action == "set":
        click.echo(f"no stored run of agent {change.target!r} without its own budget.total_ms "
                   "yet; the budget applies to those that arrive")


def _carry_out(context: click.Context, change: Change | None,
               local: Callable[[duckdb.DuckDBPyConnection], Any],
               remote: Callable[[str, str | None], Any]) -> Any:
    """Run `local` on the file, or `remote` on the server holding it."""
    server = context.obj.get("server")
    if server is not None:  # --server URL: its /budgets endpoint, whoever holds --db
        try:
            return remote(budgets_url(server), context.obj.get("token"))
        except RemoteError as error:
            if error.usage:
                raise click.UsageError(str(error)) from None
            raise Fail(str(error)) from None
    db = db_option(context)
    refuse_trace_file(db)
    if not Path(db).exists():
        # A change would create an empty file, after which `check` says every threshold
        # holds: refused, as `report` refuses a missing file.
        raise Fail(no_database(db, "nothing is declared" if change is None
                               else "budgets are declared in an existing database"))
    try:
        # A list only reads (read-only, beside any other reader, on a read-only file system
        # too); a change writes, and waits a moment for readers to let go.
        con = (connect(db, read_only=True, wait_seconds=READER_WAIT_SECONDS) if change is None
               else connect(db, wait_seconds=WRITER_WAIT_SECONDS))
    except DatabaseBusy as busy:
        url = (busy.server or {}).get("budgets")
        if not isinstance(url, str):
            raise Fail(str(busy)) from None
        try:
            return remote(url, context.obj.get("token"))
        except RemoteError as error:
            if error.usage:
                raise click.UsageError(str(error)) from None
            raise Fail(str(error)) from None
    except SchemaError as error:
        raise Fail(str(error)) from None
    except duckdb.Error as error:
        raise Fail(f"cannot open database {db}: {error}") from None
    try:
        return local(con)
    finally:
        con.close()


def _on_backend(context: click.Context, work: Callable[[Any], Any]) -> Any:
    """Run `work` on the ClickHouse backend of --backend (SPEC §10 there: the declarations
    live in ClickHouse tables, and the derived tables are rebuilt whole after a change)."""
    backend = backend_option(context)
    try:
        con = clickhouse.connect(str(backend))
        return work(con)
    except clickhouse.BackendError as error:
        raise Fail(str(error)) from None
    except clickhouse.NoTraces as error:
        raise Fail(str(error)) from None
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None
    except Exception as error:  # the engine's own errors
        raise Fail(f"cannot use backend {backend}: {str(error).splitlines()[0]}") from None


def _change(context: click.Context, change: Change) -> None:
    try:
        change = change.checked()
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None
    if backend_option(context) is not None:
        def on_clickhouse(con: clickhouse.ClickHouseConnection) -> None:
            started = time.monotonic()
            stored = clickhouse_declared.apply(con, change)
            if stored.changed:
                clickhouse.ensure_derived(con)
            _report(change, {"changed": stored.changed, "runs": -1,
                             "seconds": time.monotonic() - started}, " on the backend")

        _on_backend(context, on_clickhouse)
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

    _carry_out(context, change, local, remote)


def _duration(text: str, what: str) -> int:
    try:
        return parse_duration_ms(text, what)
    except DeclarationError as error:
        raise click.UsageError(str(error)) from None


@click.group("budgets")
@click.option("--token", envvar=TOKEN_ENV, default=None,
              help=f"The bearer token of the budgetscope serve holding the file, when it "
                   f"requires one (env {TOKEN_ENV}).")
@click.pass_context
def budgets_command(context: click.Context, token: str | None) -> None:
    """Declared budgets (docs/metrics.md §10): a budget per agent and a default for the runs
    that carry no budget.total_ms of their own, and caps per step key for steps without
    budget.allocated_ms. A change re-measures every affected run, past ones included.

    Durations need a unit: 2500ms, 90s, 5m, 2h, 1d. Step keys are kind:name, e.g.
    tool:fetch_report (kinds: model, tool, subagent, backoff, queue, reconcile, other)."""
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
        rows = _on_backend(context, lambda con: [
            d.to_json() for d in clickhouse_declared.declarations(con)])
    else:
        rows = _carry_out(context, None,
                          lambda con: [d.to_json() for d in declarations(con)],
                          fetch_declarations)
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("nothing declared (budgetscope budgets set AGENT DURATION, "
                   "set --default DURATION, cap STEP_KEY DURATION)")
        return
    for row in rows:
        # A name stored before names were checked, or by another version, stays inert.
        target = "(default: every agent without its own)" if row["target"] is None else \
            terminal_safe(str(row["target"]))
        label = {"agent": "budget", "default": "budget", "step": "cap"}[row["scope"]]
        click.echo(f"{label:<7} {target:<40} {format_ms(int(row['duration_ms'])):>8}"
                   f"  declared {row['declared_at']}")


# A negative duration (`set billing -5s`) reaches the check as an argument, so that the
# message says it is negative rather than "no such option -5".
_NEGATIVE_OK = {"ignore_unknown_options": True}


@budgets_command.command("set", context_settings=_NEGATIVE_OK)
@click.argument("arguments", nargs=-1, metavar="AGENT DURATION")
@click.option("--default", "default", is_flag=True,
              help="Set the default for every agent without a budget of its own: "
                   "`set --default DURATION`.")
@click.pass_context
def set_command(context: click.Context, arguments: tuple[str, ...], default: bool) -> None:
    """Declare the budget of AGENT (as reports name it: gen_ai.agent.name, else the
    service.name), or with --default the budget of every agent without its own."""
    if default:
        if len(arguments) != 1:
            raise click.UsageError("set --default takes one DURATION, e.g. "
                                   "`budgets set --default 60s`")
        _change(context, Change("set_default", None, _duration(arguments[0], "budget")))
        return
    if len(arguments) != 2:
        raise click.UsageError("set takes AGENT DURATION (e.g. `budgets set billing-agent "
                               "45s`), or --default DURATION")
    agent = _checked(checked_agent, arguments[0])
    _change(context, Change("set", agent, _duration(arguments[1], "budget")))


@budgets_command.command("unset")
@click.argument("agent", required=False)
@click.option("--default", "default", is_flag=True, help="Remove the default instead.")
@click.pass_context
def unset_command(context: click.Context, agent: str | None, default: bool) -> None:
    """Remove the declared budget of AGENT (or the default, with --default)."""
    if default == (agent is not None):
        raise click.UsageError("unset takes AGENT, or --default")
    if default:
        _change(context, Change("unset_default"))
    else:
        _change(context, Change("unset", _checked(checked_agent, agent)))


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
