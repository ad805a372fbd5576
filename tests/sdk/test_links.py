"""`budget.url()`: an agent's log line carries its run's link on the dashboard (the SDK could
not give one). The address comes from url(dashboard=…), set_dashboard_url or
BUDGETSCOPE_DASHBOARD_URL; the run id in it is budgetscope's, which the test checks by loading
the very spans the real OpenTelemetry SDK recorded into budgetscope and opening the run the
link names."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from budgetscope_sdk import ManualClock, RunBudget, links
from opentelemetry import trace

from ingest.files.loader import load_files
from queries.run_view import load_run
from store import connect
from tests.sdk.support.capture import capture
from tests.support.otlp_files import write_every_form

DASHBOARD = "http://127.0.0.1:8501"


@pytest.fixture(autouse=True)
def _no_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(links.DASHBOARD_URL_ENV, raising=False)
    links.set_dashboard_url(None)


def _run_of(url: str | None) -> str:
    assert url is not None and url.startswith(f"{DASHBOARD}/run?")
    return parse_qs(urlsplit(url).query)["run"][0]


def test_a_runs_link_opens_that_run_in_budgetscope(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    captured = capture()
    tracer = captured.tracer
    clock = ManualClock()
    urls: dict[str, str | None] = {}
    with RunBudget(30, agent="root-agent", tracer=tracer, clock=clock) as root:
        urls["none"] = root.url()  # no address anywhere: no link, never a guessed host
        urls["given"] = root.url(DASHBOARD + "/")
        monkeypatch.setenv(links.DASHBOARD_URL_ENV, DASHBOARD)
        urls["env"] = root.url()
        with RunBudget(10, agent="helper", tracer=tracer, clock=clock) as nested:
            urls["nested"] = nested.url()
        with root.step("tool", "fetch_report", cap=5):
            clock.advance(1)
    # a run below the root of its trace (a request span around the agent's run)
    with (tracer.start_as_current_span("POST /answer"),
          RunBudget(20, agent="served-agent", tracer=tracer, clock=clock) as below):
        links.set_dashboard_url(DASHBOARD)
        urls["below"] = below.url()
        with below.step("tool", "lookup", cap=5):
            clock.advance(1)
    assert urls["none"] is None
    assert _run_of(urls["given"]) == _run_of(urls["env"]) == root.trace_id
    assert _run_of(urls["nested"]) == root.trace_id  # a subagent's budget: its run's trace
    assert _run_of(urls["below"]) == f"{below.trace_id}/" + format(
        below.span.get_span_context().span_id, "016x")

    folder = tmp_path / "files"
    folder.mkdir()
    files = write_every_form(folder, captured.spans())
    con = connect(tmp_path / "runs.duckdb")
    try:
        assert not load_files(con, [files["json"]], derive=True).rejections
        for name in ("given", "below"):
            view = load_run(con, _run_of(urls[name]))
            assert str(view.summary["run_id"]) == _run_of(urls[name])
    finally:
        con.close()


def test_an_address_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="is not an http:// or https:// address"):
        links.set_dashboard_url("127.0.0.1:8501")
    with pytest.raises(ValueError):
        links.dashboard_url("dash")
    assert links.run_url(trace.INVALID_SPAN, DASHBOARD) is None  # not recording: no link
