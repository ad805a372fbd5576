"""The console script imports what the chosen command needs, no more (issue 48): the suite
starts `budgetscope` hundreds of times, and pandas, pyarrow with NumPy, and genai-prices cost
0.2-0.5 s a start. `import budgetscope.cli` imports each command's module only when the command
is chosen (budgetscope/cli.py's COMMANDS), the store's front imports its readers and writers on
first use (store/__init__.py's ON_FIRST_USE), the commands that only declare import no
reader, and `budgetscope --help` lists the commands without importing them. Checked in fresh
interpreters, through sys.modules, so that a new top-level import cannot bring them back
unseen."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

# What a start without a report, a simulation or a server need not import.
HEAVY = ("pandas", "pyarrow", "numpy", "genai_prices", "grpc", "tornado", "streamlit")

# Runs the CLI on argv in this interpreter, then prints which of HEAVY it imported.
_RUN = """
import json, sys
heavy = {heavy!r}
argv = {argv!r}
if argv is not None:
    from budgetscope.cli import cli
    try:
        cli(argv, prog_name="budgetscope")
    except SystemExit as done:
        assert not done.code, done.code
else:
    import budgetscope.cli
print(json.dumps(sorted(name for name in heavy if name in sys.modules)))
"""


def _imported(argv: list[str] | None, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of `heavy` a fresh interpreter imported running `budgetscope ARGV` (None: only
    importing budgetscope.cli)."""
    done = subprocess.run([sys.executable, "-c", _RUN.format(heavy=heavy, argv=argv)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_no_command_and_none_of_the_heavy_libraries() -> None:
    assert _imported(None) == []


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["budgets", "list"],
    ["budgets", "set", "my-agent", "30s"],
    ["budgets", "cap", "tool:fetch", "2s"],
    ["prices", "set", "my-model", "--input", "1", "--output", "2"],
], ids=" ".join)
def test_the_help_and_declaring_import_none_of_the_heavy_libraries(sample: str,
                                                                   argv: list[str]) -> None:
    assert _imported(["--db", sample, *argv]) == []


def test_a_report_still_imports_what_it_reads_with(sample: str) -> None:
    """The check above sees an import: a report reads with pandas."""
    assert "pandas" in _imported(["--db", sample, "report", "runs", "--limit", "1"])


def test_the_commands_load_on_first_use_under_their_own_names() -> None:
    """Each command the group lists is its module's command of that name; the help lists
    them all (loading each for its line)."""
    from budgetscope.cli import COMMANDS, cli

    assert sorted(cli.commands) == sorted(COMMANDS)
    for name in COMMANDS:
        assert isinstance(cli.commands[name], click.Command) and cli.commands[name].name == name
    shown = cli.get_help(click.Context(cli))
    assert all(f"  {name} " in shown for name in COMMANDS)


def test_the_help_lists_each_command_with_its_own_first_sentence() -> None:
    """`budgetscope --help` lists the commands from COMMANDS' sentences without importing them;
    each must be the first sentence of the command's own help, so that the list reads as click
    would write it from the commands at any terminal width."""
    from budgetscope.cli import COMMANDS, cli

    for name, (_, _, sentence) in COMMANDS.items():
        command = cli.commands[name]
        stand_in = click.Command(name, help=sentence)
        for limit in (30, 45, 60, 74, 120, 400, 10_000):
            assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), (
                name, limit)
