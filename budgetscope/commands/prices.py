"""`budgetscope prices`: model prices (docs/metrics.md §8, §11.3).

A metered span that reports no cost is priced from the entry a team set here (its model
pattern, optionally its provider and a date it starts on), else from the bundled table
(genai-prices, shipped with budgetscope, never fetched). `set` and `unset` re-measure every run
with a span the entry prices, past ones included; `check` lists the models seen without a price,
each with the command that prices it. Stored in the database, and carried out by the
`budgetscope serve` that holds it, as `budgets` is; with --backend, in the ClickHouse backend's
tables (store/clickhouse/prices.py), whose derived tables are then rebuilt.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click
import duckdb

from budgetscope.commands.budgets_remote import fetch_prices, send_change
from budgetscope.commands.common import backend_option, catch_up_derivations
from budgetscope.commands.declared_place import carry_out, on_backend
from budgetscope.commands.tokens import TOKEN_ENV
from queries.terminal import terminal_safe
from queries.words import plural
from store import (
    PriceChange,
    PriceError,
    apply_price,
    derive_now,
    format_day,
    format_usd_per_mtok,
    listing,
    parse_from,
    parse_rate,
)

FORMAT = click.option("--format", "output", type=click.Choice(["table", "json"]),
                      default="table", show_default=True,
                      help="table (aligned text for a terminal) or json (an object).")
PROVIDER_HELP = ("The provider the price is for, as `prices check` names it (openai, "
                 "anthropic, aws, ...); any provider when left out.")
FROM_HELP = "The date the price holds from (YYYY-MM-DD, 00:00 UTC); from the beginning when " \
            "left out."


def _checked(parse: Any, text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return parse(text, what) if what else parse(text)
    except PriceError as error:
        raise click.UsageError(str(error)) from None


def _entry_name(change: PriceChange) -> str:
    provider = f" of provider {change.provider!r}" if change.provider else ""
    since = f" from {format_day(change.from_ns)}" if change.from_ns is not None else ""
    return f"price of {terminal_safe(change.model)!r}{provider}{since}"


def _rates(row: dict[str, Any]) -> str:
    parts = [f"input ${format_usd_per_mtok(row['input_rate'])}",
             f"output ${format_usd_per_mtok(row['output_rate'])}"]
    for key, name in (("cache_read_rate", "cache read"), ("cache_write_rate", "cache write")):
        if row.get(key) is not None:
            parts.append(f"{name} ${format_usd_per_mtok(row[key])}")
    return ", ".join(parts) + " per million tokens"


def _report(change: PriceChange, answer: dict[str, Any], where: str) -> None:
    what = _entry_name(change)
    if not answer["changed"]:
        click.echo(f"{what} is already so; nothing changed" if change.action == "set"
                   else f"no {what} was set; nothing changed")
        return
    head = f"{what} set to {_rates(change.to_json())}" if change.action == "set" \
        else f"{what} removed"
    runs = int(answer["runs"])
    if runs < 0:  # ClickHouse: the derived tables measured again, or rebuilt whole
        done = "re-measured" if answer.get("derivation") == "remeasure" else "rebuilt"
        click.echo(f"{head}{where}; derived tables {done} in {float(answer['seconds']):.2f} s")
    elif answer.get("derived", True):
        click.echo(f"{head}{where}; {plural(runs, 'run')} re-measured in "
                   f"{float(answer['seconds']):.2f} s")
    else:
        click.echo(f"{head}{where}; {plural(runs, 'run')} marked; the server is still "
                   "re-measuring them (they follow within seconds)")
    if change.action == "set" and not int(answer.get("matching_spans", 0)):
        click.echo(f"no stored span of model {terminal_safe(change.model)!r} yet; the price "
                   "applies to those that arrive")


def _change(context: click.Context, change: PriceChange) -> None:
    try:
        change = change.checked()
    except PriceError as error:
        raise click.UsageError(str(error)) from None
    if backend_option(context) is not None:
        from store import clickhouse, clickhouse_prices

        def on_clickhouse(con: clickhouse.ClickHouseConnection) -> None:
            # the prices live in ClickHouse tables there; the derived tables are measured
            # again after a change (store/clickhouse/prices.py)
            started = time.monotonic()
            applied = clickhouse_prices.apply(con, change)
            # the derived tables measured again, or (stored before a re-measure could read
            # them back) rebuilt whole
            done = clickhouse.update_derived(con) if applied.changed else None
            _report(change, {**applied.to_json(), "runs": -1, "derivation": done,
                             "seconds": time.monotonic() - started}, " on the backend")

        on_backend(context, on_clickhouse)
        return

    def local(con: duckdb.DuckDBPyConnection) -> None:
        catch_up_derivations(con)
        started = time.monotonic()
        applied = apply_price(con, change)
        derive_now(con)
        _report(change, {**applied.to_json(), "seconds": time.monotonic() - started}, "")

    def remote(url: str, token: str | None) -> None:
        _report(change, send_change(url, token, change),
                " by the budgetscope serve holding the file")

    carry_out(context, writes=True, endpoint="/prices", local=local, remote=remote,
              doing="prices are set in an existing database")


def _listing(context: click.Context, *, seen: bool) -> dict[str, Any]:
    """The prices set and the bundled table; `seen`: also the models seen without a price,
    which on the ClickHouse backend need the derived tables current."""
    if backend_option(context) is not None:
        from store import clickhouse, clickhouse_prices

        def on_clickhouse(con: clickhouse.ClickHouseConnection) -> dict[str, Any]:
            if seen:
                clickhouse.ensure_derived(con)
            return clickhouse_prices.listing(con)

        return on_backend(context, on_clickhouse)
    return carry_out(context, writes=False, endpoint="/prices", local=listing,
                     remote=fetch_prices, doing="no price is set")


@click.group("prices")
@click.option("--token", envvar=TOKEN_ENV, default=None,
              help=f"The bearer token of the budgetscope serve holding the file, when it "
                   f"requires one (env {TOKEN_ENV}).")
@click.pass_context
def prices_command(context: click.Context, token: str | None) -> None:
    """Model prices (docs/metrics.md §11.3), in USD per million tokens: the prices you set
    (your fine-tuned or self-hosted models, a negotiated rate), ahead of the bundled table
    (genai-prices). A trailing * in MODEL matches a prefix (ft:gpt-4o-mini:acme:*). A change
    re-prices every run it concerns, past ones included; a reported cost never changes."""
    context.obj["token"] = token or context.obj.get("token")


@prices_command.command("list")
@FORMAT
@click.pass_context
def list_command(context: click.Context, output: str) -> None:
    """The prices set (exact patterns, then prefixes, by provider and date), then the
    bundled table's name, version and model count."""
    found = _listing(context, seen=False)
    if output == "json":
        click.echo(json.dumps({"overrides": found["overrides"], "bundled": found["bundled"]},
                              indent=2))
        return
    if not found["overrides"]:
        click.echo("no price set (budgetscope prices set MODEL --input X --output X)")
    for row in found["overrides"]:
        provider = row["provider"] or "(any provider)"
        since = f"from {format_day(row['from_ns'])}" if row["from_ns"] is not None \
            else "from the beginning"
        click.echo(f"{terminal_safe(row['model']):<32} {terminal_safe(provider):<16} "
                   f"{since:<20} {_rates(row)}")
    bundled = found["bundled"]
    click.echo(f"bundled: {bundled['name']} {bundled['version']} "
               f"({int(bundled['models']):,} models)")


@prices_command.command("set")
@click.argument("model")
@click.option("--input", "input_", metavar="X", required=True,
              help="USD per million input tokens (0: free).")
@click.option("--output", "output", metavar="X", required=True,
              help="USD per million output tokens, reasoning included.")
@click.option("--cache-read", "cache_read", metavar="X", default=None,
              help="USD per million cache-read tokens (default: the input price).")
@click.option("--cache-write", "cache_write", metavar="X", default=None,
              help="USD per million cache-write tokens (default: the input price).")
@click.option("--provider", default=None, help=PROVIDER_HELP)
@click.option("--from", "from_", metavar="DATE", default=None, help=FROM_HELP)
@click.pass_context
def set_command(context: click.Context, model: str, input_: str, output: str,
                cache_read: str | None, cache_write: str | None, provider: str | None,
                from_: str | None) -> None:
    """Price MODEL (as `prices check` names it, or a prefix and *). A model no stored span
    names yet is accepted: the price applies to the spans that arrive."""
    _change(context, PriceChange(
        "set", model, provider or "", _checked(parse_from, from_, ""),
        _checked(parse_rate, input_, "input price"), _checked(parse_rate, output, "output price"),
        _checked(parse_rate, cache_read, "cache read price"),
        _checked(parse_rate, cache_write, "cache write price")))


@prices_command.command("unset")
@click.argument("model")
@click.option("--provider", default=None, help=PROVIDER_HELP)
@click.option("--from", "from_", metavar="DATE", default=None, help=FROM_HELP)
@click.pass_context
def unset_command(context: click.Context, model: str, provider: str | None,
                  from_: str | None) -> None:
    """Remove the price of MODEL set for that provider (or any) and date (or none)."""
    _change(context, PriceChange("unset", model, provider or "",
                                 _checked(parse_from, from_, "")))


@prices_command.command("check")
@FORMAT
@click.pass_context
def check_command(context: click.Context, output: str) -> None:
    """Every model seen in the traces without a price, the most steps first, with its step
    and span counts and the command that prices it (X: USD per million tokens)."""
    from queries.prices import with_commands  # pandas: for this subcommand only

    rows = with_commands(_listing(context, seen=True)["unpriced"])
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("every metered span has a price (reported, set, or from the bundled table)")
        return
    for row in rows:
        if row["model"] is None:
            click.echo(f"{plural(int(row['spans']), 'span')} in {plural(int(row['steps']), 'step')}"
                       " name no model: their instrumentation should set gen_ai.request.model")
            continue
        provider = row["provider"] or "(no provider)"
        steps, spans = plural(int(row["steps"]), "step"), plural(int(row["spans"]), "span")
        click.echo(f"{terminal_safe(row['model']):<32} {terminal_safe(provider):<16} "
                   f"{steps:>10} {spans:>10}  {terminal_safe(row['command'])}")
