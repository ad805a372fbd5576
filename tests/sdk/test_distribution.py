"""budgetscope-sdk as agents install it: its own wheel, in a fresh virtual
environment holding nothing but the wheel and what it declares (opentelemetry-api), works with
OpenTelemetry's no-op tracer and imports none of the optional frameworks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")

# Installs from the package registry (tests/conftest.py skips it when that does not answer).
pytestmark = pytest.mark.network

PROBE = """
import sys
from importlib import metadata
from budgetscope_sdk import RunBudget, BudgetExhausted
with RunBudget(5, reserve=1) as budget:
    with budget.step("tool", "fetch_report", cap=2) as call:
        assert call.timeout == 2
    try:
        budget.slice(minimum=10)
    except BudgetExhausted:
        pass
assert budget.outcome == "partial", budget.outcome
loaded = sorted(name for name in ("httpx", "agents", "pydantic_ai", "opentelemetry.sdk")
                if name in sys.modules)
installed = sorted(d.metadata["Name"].lower() for d in metadata.distributions())
print(loaded, installed)
"""


@pytest.mark.skipif(UV is None, reason="needs uv (make install puts it in .venv/bin)")
def test_the_wheel_alone_needs_only_the_opentelemetry_api(tmp_path: Path) -> None:
    assert UV is not None
    subprocess.run([UV, "build", "-q", str(REPO / "sdk"), "--wheel", "-o", str(tmp_path)],
                   check=True, timeout=300)
    (wheel,) = tmp_path.glob("budgetscope_sdk-*.whl")
    venv = tmp_path / "agent-venv"
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([UV, "pip", "install", "-q", "--python", str(python), str(wheel)],
                   check=True, timeout=300)
    done = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loaded, installed = done.stdout.strip().split("] [")
    assert loaded == "["
    names = set(installed.rstrip("]").replace("'", "").split(", "))
    assert {"budgetscope-sdk", "opentelemetry-api"} <= names
    assert not names & {"opentelemetry-sdk", "httpx", "openai", "openai-agents",
                        "pydantic-ai-slim", "duckdb", "streamlit"}
