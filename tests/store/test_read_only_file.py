"""Reading a file nobody serves: read-only, so that any number of read commands run at once, on
a read-only file system or directory too, and the dashboard with them. Before, `report`, `run`,
`check` and the dashboard opened the file read-write to derive what a stopped writer left, so
two of three concurrent `budgetscope run` calls failed with "is held by process", and a file on
a read-only mount could not be read at all.

What a stopped writer left marked is derived by a read command only when it can open the file
for writing at once; otherwise it reads the file as it is and says its numbers may lag. A
command that writes waits a moment for readers to let go.

Real processes on real DuckDB files; the read-only file systems are a tmpfs remounted
read-only and a read-only bind mount of a directory, both mounted by the test (as root, as CI
runs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ingest.files.loader import load_files
from store import connect
from store.testing import PendingDerivations
from tests.support import ui

# slow, left out of make test-fast: concurrent CLI processes and mounts on derived copies of
# the sample (40 s in all on 2 loaded cores).
pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "from budgetscope.cli import main; main()"]
READS = [["report", "runs"], ["report", "weekly", "--format", "table"],
         ["check", "--max-exhaustion-rate", "1", "--window", "1000d", "--until", "2027-01-01"],
         ["simulate", "--cap", "fetch_report=9s"], ["budgets", "list"]]


def _env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items()
            if key not in ("BUDGETSCOPE_SERVER", "BUDGETSCOPE_TOKEN", "BUDGETSCOPE_DB")}


def _cli(db: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "--db", str(db), *arguments], capture_output=True, text=True,
                          env=_env(), timeout=300)


def _build(tmp_path_factory: pytest.TempPathFactory, derive: bool) -> Path:
    """The sample, derived (a copy of the session's, ui.sample_copy); with `derive=False` also
    20 runs more that a writer stored and stopped before deriving (their traces are marked)."""
    path = ui.sample_copy(tmp_path_factory, "read-only")
    con = connect(path)
    try:
        if not derive:
            more = path.with_suffix(".more.jsonl")
            subprocess.run([sys.executable, "-m", "sample_traces.generate", "--out", str(more),
                            "--seed", "9", "--runs", "20"], check=True, cwd=ui.REPO,
                           capture_output=True, timeout=300)
            assert not load_files(con, [more], derive=False).rejections
            assert PendingDerivations.count(con) > 0
    finally:
        con.close()
    return path


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory, derive=True)


@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory, derive=False)


def _run_id(db: Path) -> str:
    con = connect(db, read_only=True)
    try:
        return str(con.execute("SELECT min(run_id) FROM runs WHERE exhausted").fetchone()[0])
    finally:
        con.close()


def _pending(db: Path) -> int:
    con = connect(db, read_only=True)
    try:
        return PendingDerivations.count(con)
    finally:
        con.close()


def test_three_concurrent_run_calls_all_answer(derived: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copyfile(derived, db)
    run_id = _run_id(db)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: _cli(db, "run", run_id), range(3)))
    assert [result.returncode for result in results] == [0, 0, 0], \
        [result.stderr for result in results]
    assert len({result.stdout for result in results}) == 1


def test_concurrent_reads_of_a_file_a_writer_left_marked(marked: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copyfile(marked, db)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda arguments: _cli(db, *arguments),
                                [["report", "runs"], ["report", "weekly"], ["report", "runs"]]))
    assert [result.returncode for result in results] == [0, 0, 0], \
        [result.stderr for result in results]
    # Each either derived first or read what there was and said its numbers may lag.
    for result in results:
        assert "Traceback" not in result.stderr
        assert not result.stderr or "not derived yet" in result.stderr, result.stderr
    # A later command that finds the file free derives what is left.
    assert _cli(db, "report", "runs").returncode == 0
    assert _pending(db) == 0


@pytest.fixture()
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(mount_point)],
                   check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _read_only(mount_point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True)
    with pytest.raises(OSError):
        (mount_point / "probe").write_text("x")


@pytest.mark.root
@pytest.mark.parametrize("source", ["derived", "marked"])
def test_every_read_command_reads_a_read_only_file_system(read_only_mount: Path, source: str,
                                                          request: pytest.FixtureRequest
                                                          ) -> None:
    db = read_only_mount / "db.duckdb"
    shutil.copyfile(request.getfixturevalue(source), db)
    run_id = _run_id(db)
    _read_only(read_only_mount)
    for arguments in [*READS, ["run", run_id]]:
        result = _cli(db, *arguments)
        assert result.returncode == 0, (arguments, result.stderr)
        assert result.stdout.strip(), arguments
        assert "Traceback" not in result.stderr
        if source == "marked" and arguments[0] != "budgets":
            assert "not derived yet" in result.stderr and "for writing" in result.stderr, \
                result.stderr


@pytest.mark.root
def test_a_read_only_directory_too(derived: Path, tmp_path: Path) -> None:
    folder, view = tmp_path / "data", tmp_path / "view"
    folder.mkdir()
    view.mkdir()
    shutil.copyfile(derived, folder / "db.duckdb")
    subprocess.run(["mount", "--bind", str(folder), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        for arguments in READS:
            result = _cli(view / "db.duckdb", *arguments)
            assert result.returncode == 0, (arguments, result.stderr)
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


@pytest.mark.root
def test_the_dashboard_reads_a_read_only_file_system(read_only_mount: Path, derived: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    db = read_only_mount / "db.duckdb"
    shutil.copyfile(derived, db)
    _read_only(read_only_mount)
    monkeypatch.setenv("BUDGETSCOPE_DB", str(db))
    for page in ("overview", "runs", "weekly"):
        at = AppTest.from_file(str(ui.APP), default_timeout=120)
        at.query_params["range"] = "all"
        if page != "overview":
            at.switch_page(f"app_pages/{page}.py")
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        assert not at.error, [e.value for e in at.error]
    # The command itself starts on it (its check that the file can be read is read-only too).
    app = ui.Dashboard(str(db), read_only_mount.parent / "dashboard.log")
    try:
        import urllib.request
        with urllib.request.urlopen(f"{app.url}/_stcore/health", timeout=30) as answer:
            assert answer.status == 200
    finally:
        app.stop()


HOLD_READ_ONLY = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("reading", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def test_a_writer_waits_for_a_reader_to_let_go(derived: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copyfile(derived, db)
    reader = subprocess.Popen([sys.executable, "-c", HOLD_READ_ONLY, str(db), "2"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "reading"  # type: ignore[union-attr]
        result = _cli(db, "budgets", "set", "--default", "30s")
    finally:
        reader.wait(30)
    assert result.returncode == 0, result.stderr
    assert "default budget set to 30s" in result.stdout
