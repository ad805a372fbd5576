"""Every option of every `budgetscope` command and every environment variable the code reads
is documented (as datasette's suite checks its own), so that the documentation cannot drift
from the CLI: a new option or variable without a line of documentation fails here.

docs/cli.md, the CLI reference, is generated from the commands' --help by docs/cli_reference.py;
it must be current, and every option must say what it does in its help text, so that the
reference describes each option rather than only naming it. Options and variables must also be
named in README.md or docs/ beside their command."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest

from budgetscope.cli import cli
from tests.support.paths import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# The code that runs for a user: the CLI, the receivers and store, the queries, the dashboard,
# the SDK. Tests and benchmarks set their own variables and are documented where they are.
CODE = [REPO / name for name in ("budgetscope", "ingest", "store", "queries", "dashboard",
                                 "simulation", "sdk/budgetscope_sdk", "sample_traces")]


def _documentation() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCS)


def _commands(command: click.Command, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, (*path, name))


def _options() -> list[tuple[str, str]]:
    """(command path, --option) for every long option of every command, --help aside."""
    found = []
    for path, command in _commands(cli):
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            for name in (*param.opts, *param.secondary_opts):
                if name.startswith("--") and name != "--help":
                    found.append((" ".join(("budgetscope", *path)), name))
    return found


def _reference_module():  # type: ignore[no-untyped-def]
    """docs/cli_reference.py, the generator of docs/cli.md (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("cli_reference",
                                                  REPO / "docs" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = _reference_module()


def test_the_cli_reference_is_current() -> None:
    """docs/cli.md is what the generator writes from today's --help. It runs in a fresh
    interpreter: click keeps each command's help option once made, so in the suite's process a
    test that built a context without the group's settings decides whether `-h` shows."""
    checked = subprocess.run([sys.executable, str(REPO / "docs" / "cli_reference.py"), "--check"],
                             capture_output=True, text=True, timeout=120, cwd=REPO)
    assert checked.returncode == 0, (
        f"docs/cli.md differs from the commands' --help: run {REFERENCE.COMMAND} and commit "
        f"docs/cli.md ({checked.stderr.strip()})")
    assert "-h, --help" in REFERENCE.CLI_MD.read_text(encoding="utf-8")  # the group's -h


def _described() -> list[tuple[str, str, str]]:
    """(command path, option, its help text) of every option of every command."""
    found = []
    for path, command, _ in REFERENCE.commands():
        for param in command.params:
            if isinstance(param, click.Option) and param.opts[0] != "--help":
                found.append((" ".join(path), "/".join(param.opts + param.secondary_opts),
                              param.help or ""))
    return found


DESCRIBED = _described()


@pytest.mark.parametrize("command, option, text", DESCRIBED,
                         ids=[f"{c} {o}" for c, o, _ in DESCRIBED])
def test_every_option_is_described(command: str, option: str, text: str) -> None:
    """Its help text says what it does, and docs/cli.md carries that text in the command's
    section (the reference is current, above, so this holds once the help text is there)."""
    assert len(text.split()) >= 2, (
        f"{command} {option} has no help text: say what it does (and its default) in its "
        f"click.option(help=...), then run {REFERENCE.COMMAND}")
    reference = REFERENCE.CLI_MD.read_text(encoding="utf-8")
    section = reference.split(f"\n## {command}\n", 1)[1].split("\n## ", 1)[0]
    # compared without whitespace: --help wraps lines, and breaks words at their hyphens
    assert "".join(text.split()) in "".join(section.split()), (
        f"docs/cli.md's {command} section lacks the help text of {option}")


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


OPTIONS = _options()


def test_the_walk_finds_the_commands_and_their_options() -> None:
    commands = {path for path, _ in OPTIONS}
    assert {"budgetscope", "budgetscope check", "budgetscope serve",
            "budgetscope budgets set"} <= commands
    assert ("budgetscope check", "--max-exhaustion-rate") in OPTIONS
    assert len(OPTIONS) > 60


def _passages() -> list[str]:
    """The documentation cut into what can describe one command: each section (from one heading
    to the next), each of its paragraphs, each table row."""
    passages = []
    for path in DOCS:
        for section in re.split(r"(?m)^(?=#{1,4} )", path.read_text(encoding="utf-8")):
            passages.append(section)
            passages.extend(re.split(r"\n\s*\n|\n(?=\|)", section))
    return passages


@pytest.mark.parametrize("command, option", OPTIONS, ids=[f"{c} {o}" for c, o in OPTIONS])
def test_every_option_is_documented(command: str, option: str) -> None:
    """A subcommand's option is named in a passage that names the subcommand too (so that
    `simulate --since` is not taken as documented by `report --since`); the group's own
    options (--db, --backend, ...) anywhere."""
    words = command.split()[1:2]
    assert any(_mentions(passage, option) and all(_mentions(passage, w) for w in words)
               for passage in _passages()), (
        f"{command} {option} is not named in README.md or docs/ beside {command}: say what "
        "it does and its default there")


# ---- environment variables ----------------------------------------------------------------

def _string_constants(trees: list[ast.Module]) -> dict[str, set[str]]:
    """Module-level NAME = "text" of every module: how a variable name held in a constant
    (DB_ENV, clickhouse.BACKEND_ENV) is resolved."""
    constants: dict[str, set[str]] = {}
    for tree in trees:
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        constants.setdefault(target.id, set()).add(node.value.value)
    return constants


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _read_names(tree: ast.Module) -> Iterator[tuple[ast.expr, int]]:
    """The expressions naming a variable: os.environ[X], os.environ.get(X), os.getenv(X),
    click's envvar=X."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            yield node.slice, node.lineno
        elif isinstance(node, ast.Call):
            function = node.func
            environ_call = (isinstance(function, ast.Attribute) and _is_environ(function.value)
                            and function.attr in ("get", "pop", "setdefault"))
            getenv = isinstance(function, ast.Attribute) and function.attr == "getenv"
            if (environ_call or getenv) and node.args:
                yield node.args[0], node.lineno
            for keyword in node.keywords:
                if keyword.arg == "envvar":
                    yield keyword.value, node.lineno


def environment_variables() -> dict[str, str]:
    """Every variable the code reads or sets → where (file:line)."""
    files = [path for folder in CODE for path in sorted(folder.rglob("*.py"))]
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in files}
    constants = _string_constants(list(trees.values()))
    found: dict[str, str] = {}
    for path, tree in trees.items():
        for expression, line in _read_names(tree):
            where = f"{path.relative_to(REPO)}:{line}"
            if isinstance(expression, ast.Constant) and isinstance(expression.value, str):
                names = {expression.value}
            elif isinstance(expression, ast.Name | ast.Attribute):
                key = expression.id if isinstance(expression, ast.Name) else expression.attr
                names = constants.get(key, set())
            else:
                names = set()
            assert names, f"{where}: cannot tell which environment variable is read"
            for name in names:
                found.setdefault(name, where)
    # A name spelled anywhere in the code counts too (a variable passed on to a child process).
    for path in files:
        for name in re.findall(r"\bBUDGETSCOPE_[A-Z0-9_]+\b", path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path.relative_to(REPO)))
    return found


VARIABLES = environment_variables()


def test_the_scan_finds_the_variables() -> None:
    assert {"BUDGETSCOPE_DB", "BUDGETSCOPE_TOKEN", "BUDGETSCOPE_BACKEND",
            "BUDGETSCOPE_CLICKHOUSE_PASSWORD"} <= set(VARIABLES)


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_every_environment_variable_is_documented(name: str) -> None:
    assert _mentions(_documentation(), name), (
        f"{name} (read at {VARIABLES[name]}) is not named in README.md or docs/: say what it "
        "does and its default there")
