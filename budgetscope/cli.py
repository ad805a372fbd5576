"""The `budgetscope` console script."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

import click

from budgetscope.commands.remote_cli import (
    REMOTE_COMMANDS,
    announced_cli_url,
    run_remotely,
    server_cli_url,
)
from budgetscope.commands.tokens import TOKEN_ENV
from budgetscope.config import DB_ENV, DEFAULT_DB, SERVER_ENV
from budgetscope.gc_tuning import relax_gc_for_ingest
from store import BACKEND_ENV

# Each command's module, imported when the command is chosen (or its own help shown): the
# reports and the simulation import pandas, pyarrow and NumPy, serve the receivers, dashboard
# Streamlit's ground; `budgetscope budgets set` or `ingest` needs none of them, and the test
# suite starts the console script hundreds of times (issue 48). name -> (module, its click
# command, the first sentence of its help: what `budgetscope --help` lists it with, without
# importing it; tests/cli/test_cli_start.py checks it against the command's own).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": ("budgetscope.commands.ingest_files", "ingest_command",
               "Load OTLP trace files: OTLP JSON, JSON lines (the Collector's file exporter), "
               "binary protobuf or the Collector's length-prefixed protobuf stream, each "
               "optionally gzipped; folders are walked."),
    "demo": ("budgetscope.commands.demo", "demo_command",
             "Load the bundled sample traces into a fresh database and show what they say."),
    "report": ("budgetscope.commands.report", "report_command",
               "Print report NAME: weekly, runs, attribution, failures, utilisation, "
               "reconciliation, cost, cost-attribution or models."),
    "run": ("budgetscope.commands.run", "run_command",
            "Summarise run RUN_ID (a trace id, or TRACE_ID/SPAN_ID for a run below the root; a "
            "unique start of one is enough, an ambiguous one lists the runs it matches): what "
            "happened, who spent and who held the budget, failures by class, uncertain and "
            "orphan writes with their idempotency keys, one next step, and a waterfall of the "
            "steps against the deadline (docs/metrics.md §3–§6)."),
    "serve": ("budgetscope.commands.serve", "serve_command",
              "Receive OTLP traces (HTTP and gRPC) and serve the dashboard, in one process that "
              "owns the database."),
    "dashboard": ("budgetscope.commands.dashboard", "dashboard_command",
                  "Serve the dashboard on an existing database (read-only; the file stays free "
                  "for `budgetscope ingest` between page loads)."),
    "simulate": ("budgetscope.commands.simulate", "simulate_command",
                 "Replay the stored runs under another timeout policy: predicted client "
                 "timeouts per step, refusals, exhaustion, utilisation and writes that would "
                 "time out, beside what happened."),
    "check": ("budgetscope.commands.check", "check_command",
              "Compare exhaustion, reconciliation, client give-up and upstream failure rates "
              "and orphan writes, and the dollar and token exhaustion rates, weekly budget "
              "utilisation and unpriced steps, over a recent window with thresholds; exit 1 on "
              "a breach, 2 on an error."),
    "retain": ("budgetscope.commands.retain", "retain_command",
               "Remove traces older than --days, whole (every span, derived run and step, and "
               "the resources and scopes nothing uses any more), then checkpoint so that new "
               "data reuses the space."),
    "budgets": ("budgetscope.commands.budgets", "budgets_command",
                "Declared budgets (docs/metrics.md §10, §11.5): per agent and a default, in "
                "time, tokens, dollars per run and dollars per week, for the runs that carry "
                "none of their own (budget.total_ms, budget.total_tokens, budget.total_usd); "
                "and caps per step key for steps without budget.allocated_ms."),
    "prices": ("budgetscope.commands.prices", "prices_command",
               "Model prices (docs/metrics.md §11.3), in USD per million tokens: the prices you "
               "set (your fine-tuned or self-hosted models, a negotiated rate), ahead of the "
               "bundled table (genai-prices)."),
}


class _OnFirstUse(MutableMapping[str, click.Command]):
    """The group's commands (click.Group.commands), each imported on its first use: a name
    looked up (the command chosen, or its line of --help) imports its module; iterating
    names imports nothing."""

    def __init__(self, modules: dict[str, tuple[str, str, str]]) -> None:
        self._modules = {name: (module, attribute)
                         for name, (module, attribute, _) in modules.items()}
        self._loaded: dict[str, click.Command] = {}

    def loaded(self, name: str) -> bool:
        return name in self._loaded

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = self._modules[name]  # KeyError: no such command
            self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self._modules.pop(name, None)

    def __delitem__(self, name: str) -> None:
        if name not in self._loaded and name not in self._modules:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._modules.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._modules.keys() - self._loaded.keys(), *self._loaded])

    def __len__(self) -> int:
        return len(self._modules.keys() | self._loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._modules


_ARGUMENTS = "budgetscope.subcommand_arguments"


class _Commands(click.Group):
    """The group, keeping the subcommand's own arguments so that they can be sent to a
    server as typed (remote_cli.py)."""

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta[_ARGUMENTS] = list(rest)
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """`budgetscope --help`'s list of commands, as click writes it, from COMMANDS' first
        sentences for the commands not imported yet: click asks each command for its short
        help, which imported every command's module (pandas, pyarrow, the ClickHouse
        backend) to print one screen of text."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            if isinstance(self.commands, _OnFirstUse) and not self.commands.loaded(name):
                # a stand-in with the help's first sentence: click shortens it the same way
                summary = click.Command(name, help=COMMANDS[name][2])
                rows.append((name, summary.get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as error:
            raise _misplaced(ctx, error) or error from None


# The group's own options: `budgetscope report weekly --db X` is the usual slip.
_GROUP_OPTIONS = ("--db", "--backend", "--server", "--token")


def _misplaced(ctx: click.Context, error: click.NoSuchOption) -> click.UsageError | None:
    """A group option given after the command, as a usage error that shows where it goes."""
    option = error.option_name.split("=", 1)[0]
    if option not in _GROUP_OPTIONS:
        return None
    rest = list(ctx.meta.get(_ARGUMENTS, []))
    value = "VALUE"
    for i, part in enumerate(rest):
        if part == option and i + 1 < len(rest):
            value = rest[i + 1]
            del rest[i:i + 2]
            break
        if part.startswith(f"{option}="):
            value = part.split("=", 1)[1]
            del rest[i]
            break
    command = " ".join([ctx.invoked_subcommand or "COMMAND", *rest])
    return click.UsageError(f"{option} goes before the command: "
                            f"budgetscope {option} {value} {command}", ctx=error.ctx)


@click.group(cls=_Commands, commands=_OnFirstUse(COMMANDS),
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar=DB_ENV, default=DEFAULT_DB, show_default=True,
              help=f"DuckDB database file (env {DB_ENV}).")
@click.option("--backend", envvar=BACKEND_ENV, default=None, metavar="URL",
              help="Read from ClickHouse instead of --db, where the Collector's ClickHouse "
                   "exporter writes otel_traces: clickhouse://user@host:port/database, or "
                   f"chdb:///FOLDER for in-process ClickHouse (env {BACKEND_ENV}). Used by "
                   "report, run, check, simulate, dashboard and budgets; ingest, serve and demo "
                   "always use --db.")
@click.option("--server", envvar=SERVER_ENV, default=None, metavar="URL",
              help="Run report, run, check and simulate on the budgetscope serve at URL (its "
                   "OTLP/HTTP port, e.g. http://127.0.0.1:4318), and send budgets and prices there "
                   f"(env {SERVER_ENV}). Without it they go to the serve holding --db on "
                   "their own.")
@click.option("--token", envvar=TOKEN_ENV, default=None,
              help=f"The bearer token of that server, when it requires one (env {TOKEN_ENV}).")
@click.pass_context
def cli(context: click.Context, db: str, backend: str | None, server: str | None,
        token: str | None) -> None:
    """budgetscope: where AI agents' deadline budgets go."""
    context.ensure_object(dict)
    context.obj["db"] = db
    context.obj["backend"] = backend
    context.obj["server"] = server
    context.obj["token"] = token
    if "reader" in context.obj:
        return  # serve running a command for a client: it reads its own file, never a server
    name = context.invoked_subcommand
    if server is not None and backend is not None:
        raise click.UsageError("--server and --backend name two places to read from; "
                               "give one")
    if server is not None and name not in (*REMOTE_COMMANDS, "budgets", "prices"):
        raise click.UsageError(f"--server applies to {', '.join(REMOTE_COMMANDS)}, budgets "
                               f"and prices, not {name}")
    if name not in REMOTE_COMMANDS or backend is not None:
        return
    url = server_cli_url(server) if server is not None else announced_cli_url(db)
    if url is not None:
        context.exit(run_remotely(context, url, name, context.meta.get(_ARGUMENTS, [])))


def main() -> None:
    relax_gc_for_ingest()
    cli(prog_name="budgetscope")
