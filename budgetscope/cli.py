"""The `budgetscope` console script."""

from __future__ import annotations

import click

from budgetscope.commands.budgets import budgets_command
from budgetscope.commands.check import check_command
from budgetscope.commands.dashboard import dashboard_command
from budgetscope.commands.demo import demo_command
from budgetscope.commands.ingest_files import ingest_command
from budgetscope.commands.report import report_command
from budgetscope.commands.retain import retain_command
from budgetscope.commands.run import run_command
from budgetscope.commands.serve import serve_command
from budgetscope.commands.simulate import simulate_command
from budgetscope.config import DB_ENV, DEFAULT_DB
from ingest.gc_tuning import relax_gc_for_ingest
from queries.clickhouse import BACKEND_ENV


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar=DB_ENV, default=DEFAULT_DB, show_default=True,
              help=f"DuckDB database file (env {DB_ENV}).")
@click.option("--backend", envvar=BACKEND_ENV, default=None, metavar="URL",
              help="Read from ClickHouse instead of --db, where the Collector's ClickHouse "
                   "exporter writes otel_traces: clickhouse://user@host:port/database, or "
                   f"chdb:///FOLDER for in-process ClickHouse (env {BACKEND_ENV}). Used by "
                   "report, run, check, simulate, dashboard and budgets; ingest, serve and demo "
                   "always use --db.")
@click.pass_context
def cli(context: click.Context, db: str, backend: str | None) -> None:
    """budgetscope: where AI agents' deadline budgets go."""
    context.ensure_object(dict)
    context.obj["db"] = db
    context.obj["backend"] = backend


cli.add_command(ingest_command)
cli.add_command(demo_command)
cli.add_command(report_command)
cli.add_command(run_command)
cli.add_command(serve_command)
cli.add_command(dashboard_command)
cli.add_command(simulate_command)
cli.add_command(check_command)
cli.add_command(retain_command)
cli.add_command(budgets_command)


def main() -> None:
    relax_gc_for_ingest()
    cli(prog_name="budgetscope")
