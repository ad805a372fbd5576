"""Every command in the README and the manual runs as copied, after `make demo` on a fresh clone.

The ```sh and ```python blocks of README.md, CONTRIBUTING.md, bench/README.md and docs/*.md are
extracted and run, not kept in step by hand:
- shell blocks run with bash (`set -eu`), one block a script, in a folder holding what `make
  demo` leaves (`budgetscope-demo.duckdb`, made here by `budgetscope demo --no-ui`, and the
  repository's `.venv`), with `budgetscope` on the PATH as `. .venv/bin/activate` puts it;
  `make` lines are checked with `make -n` in the repository (they install and start things);
  a block of benchmark commands has each script checked to exist and compile (they run for
  minutes to hours);
- a block that a `<!-- docs test: serve … -->` comment says needs a running server gets a
  `budgetscope serve` on the demo's database, its address in place of 127.0.0.1:4318;
- Python blocks (the OpenTelemetry SDK, OTLP logs, the budget SDK) export to a real
  `budgetscope serve` on free ports, and what they sent must arrive as runs and log records.
"""

from __future__ import annotations

import json
import os
import py_compile
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.serve import CLI, start_serve, stop

README = REPO / "README.md"
# The pages whose code blocks run: the README, the manual in docs/, the benchmarks' page and the
# contributors' guide (sdk/README.md's examples are run by tests/sdk/test_examples.py).
DOCUMENTS = [path for path in (README, REPO / "CONTRIBUTING.md", REPO / "bench" / "README.md",
                               *sorted((REPO / "docs").glob("*.md"))) if path.exists()]
BLOCK = re.compile(r"(?:<!-- docs test: (?P<note>[^\n]*?) -->\n)?```(?P<lang>sh|python)\n"
                   r"(?P<body>.*?)```", re.S)
DEFAULT_OTLP = "127.0.0.1:4318"
BENCH_LINE = re.compile(
    r"^\.venv/bin/python (?:-m (?P<module>(?:bench|tests\.long)\.\w+)|(?P<path>bench/\S+))")


def blocks(lang: str) -> list[tuple[str, str, str]]:
    """(page:line, note, body) of each fenced block of `lang` in the documents."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO)
        found += [(f"{where}:{text.count(chr(10), 0, m.start('body')) + 1}", m["note"] or "",
                   m["body"]) for m in BLOCK.finditer(text) if m["lang"] == lang]
    return found


def shell_blocks() -> list[tuple[str, str, str]]:
    return blocks("sh")


@pytest.fixture(scope="module")
def after_make_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder as `make demo` leaves the clone: the demo's database, and the venv."""
    folder = tmp_path_factory.mktemp("clone")
    (folder / ".venv").symlink_to(REPO / ".venv")
    result = subprocess.run([*CLI, "demo", "--no-ui"], cwd=folder, capture_output=True,
                            text=True, timeout=600, env=_environment())
    assert result.returncode == 0, result.stdout + result.stderr
    assert (folder / "budgetscope-demo.duckdb").exists()
    return folder


def _environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("BUDGETSCOPE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run_shell(body: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", "set -eu\n" + body], cwd=folder, capture_output=True,
                          text=True, timeout=600, env=_environment())


@pytest.mark.parametrize("line,note,body", shell_blocks(),
                         ids=[line for line, _, _ in shell_blocks()])
def test_every_shell_block_runs_as_copied(after_make_demo: Path, line: str, note: str,
                                          body: str) -> None:
    commands = [part for part in body.splitlines() if part.strip()]
    if all(part.startswith("make ") for part in commands):
        for part in commands:
            target = part.split()[1]
            result = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True,
                                    text=True, timeout=60)
            assert result.returncode == 0, (line, part, result.stderr)
        return
    benches = [BENCH_LINE.match(part) for part in commands]
    if all(benches):
        for match in benches:
            script = (REPO / match["path"] if match["path"]  # type: ignore[index]
                      else REPO / (match["module"].replace(".", "/") + ".py"))  # type: ignore[index]
            assert script.exists(), (line, script)
            py_compile.compile(str(script), doraise=True)
        return
    if note.startswith("serve"):
        db = after_make_demo / "budgetscope-demo.duckdb"
        process, announced = start_serve(db, "--no-ui")
        try:
            base = announced["otlp_http"].split("//", 1)[1].split("/", 1)[0]
            result = _run_shell(body.replace(DEFAULT_OTLP, base), after_make_demo)
        finally:
            stop(process)
    else:
        result = _run_shell(body, after_make_demo)
    assert result.returncode == 0, (line, body, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, (line, result.stderr)


@pytest.fixture(scope="module")
def serve_for_agents(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    db = tmp_path_factory.mktemp("agents") / "agents.duckdb"
    process, announced = start_serve(db, "--no-ui", "--root-grace", "0")
    yield db, announced
    stop(process)


def test_every_python_block_sends_what_it_says(serve_for_agents) -> None:  # type: ignore[no-untyped-def]
    _, announced = serve_for_agents
    base = announced["otlp_http"].split("//", 1)[1].split("/", 1)[0]
    found = blocks("python")
    assert len(found) >= 3  # the OpenTelemetry SDK, OTLP logs, the budget SDK
    for line, _, body in found:
        assert DEFAULT_OTLP in body, line  # each sends to a local serve's default port
        result = subprocess.run([sys.executable, "-c", body.replace(DEFAULT_OTLP, base)],
                                capture_output=True, text=True, timeout=300,
                                env=_environment(), cwd=REPO)
        assert result.returncode == 0, (line, body, result.stderr)
        assert "Traceback" not in result.stderr and "Failed to export" not in result.stderr, \
            (line, result.stderr)
    server = "http://" + base
    deadline = time.monotonic() + 60
    agents: set[str] = set()
    while time.monotonic() < deadline:
        answer = subprocess.run([*CLI, "--server", server, "report", "runs", "--format",
                                 "json"], capture_output=True, text=True, timeout=120,
                                env=_environment())
        assert answer.returncode == 0, answer.stderr
        agents = {run["agent"] for run in json.loads(answer.stdout)}
        if {"my-agent", "support-agent"} <= agents:
            break
        time.sleep(1)
    assert {"my-agent", "support-agent"} <= agents, agents
    check = subprocess.run([*CLI, "--server", server, "run", "--width", "120",
                            _run_of(server, "support-agent")],
                           capture_output=True, text=True, timeout=120, env=_environment())
    assert check.returncode == 0 and "tool:fetch_report" in check.stdout, check.stdout
    # the logging example's record is stored (without a span: it was logged outside one)
    assert _stored_log_records(server) >= 1


def _run_of(server: str, agent: str) -> str:
    answer = subprocess.run([*CLI, "--server", server, "report", "runs", "--agent", agent,
                             "--format", "json"], capture_output=True, text=True, timeout=120,
                            env=_environment())
    return json.loads(answer.stdout)[0]["run_id"]


def _stored_log_records(server: str) -> float:
    with urllib.request.urlopen(f"{server}/metrics", timeout=30) as reply:
        text = reply.read().decode("utf-8")
    stored = [line for line in text.splitlines()
              if line.startswith("budgetscope_log_records_stored_total ")]
    return float(stored[0].split()[1]) if stored else 0.0


OUTSIDE = ("SPEC", "../shared")  # the project's specification and notes, not in the repository


def test_readme_and_docs_cite_the_users_docs_not_a_file_they_lack() -> None:
    """Users have docs/metrics.md and docs/conventions.md, not the project's specification nor its
    notes outside the repository: nor do the CLI's help texts, /metrics' HELP lines or the
    dashboard's texts cite them."""
    import click

    from budgetscope.cli import cli
    from budgetscope.server.metrics import SIGNALS

    for path in (*DOCUMENTS, REPO / "sdk" / "README.md"):
        text = path.read_text(encoding="utf-8")
        assert not [word for word in OUTSIDE if word in text], path
    for path in sorted((REPO / "dashboard").rglob("*.py")):
        shown = [text for text in _string_literals(path) if "SPEC" in text or "README," in text]
        assert not shown, (path, shown)
    context = click.Context(cli)
    commands = [cli, *cli.commands.values()]
    for group in [c for c in commands if isinstance(c, click.Group) and c is not cli]:
        commands.extend(group.commands.values())
    for command in commands:
        assert "SPEC" not in command.get_help(context), command.name
    assert not [text for *_, text in SIGNALS if "SPEC" in text]


def _string_literals(path: Path) -> list[str]:
    """The strings of `path` that are not docstrings: what a page may show."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef
                                | ast.ClassDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]
