"""A run's address on the budgetscope dashboard, for an agent's log line or error report:
`budget.url()` → `http://127.0.0.1:8501/run?run=<run id>`, the run view on-call opens.

The dashboard's address is given to `url(dashboard=…)`, set once for the process with
`set_dashboard_url(…)`, or read from BUDGETSCOPE_DASHBOARD_URL (the variable budgetscope's own
`check` and `run` read). Without any, there is no link (None): the SDK never guesses a host.

The run id is budgetscope's (docs/metrics.md §8): the trace id when the run's span is the root
of its trace, else `TRACE_ID/SPAN_ID`. Whether the span has a parent is read from the SDK's
span (`parent`); a span that does not say (a no-op or foreign span) is taken as a root, whose
trace id the dashboard also opens as the start of a `TRACE_ID/SPAN_ID` run id when that is the
only run of the trace.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote, urlsplit

DASHBOARD_URL_ENV = "BUDGETSCOPE_DASHBOARD_URL"
_configured: str | None = None


def set_dashboard_url(address: str | None) -> None:
    """The dashboard every run's `url()` links to in this process (None: back to the
    environment). Raises ValueError for anything but an http(s) address."""
    global _configured
    _configured = None if address is None else _checked(address)


def dashboard_url(given: str | None = None) -> str | None:
    """`given`, else the process's setting, else BUDGETSCOPE_DASHBOARD_URL, else None."""
    if given:
        return _checked(given)
    if _configured:
        return _configured
    from_env = os.environ.get(DASHBOARD_URL_ENV, "").strip()
    return _checked(from_env) if from_env else None


def run_id(span: Any, nested: bool = False) -> str:
    """budgetscope's run id of the run whose span is `span`; `nested`: the span is a step of
    a run (a subagent's budget), whose trace's run is meant."""
    context = span.get_span_context()
    trace_id = format(context.trace_id, "032x")
    if nested or getattr(span, "parent", None) is None:
        return trace_id
    return f"{trace_id}/{format(context.span_id, '016x')}"


def run_url(span: Any, dashboard: str | None = None,
            nested: bool = False) -> str | None:
    """The run view's address of the run whose span is `span` (run_id); None without a
    dashboard address or a recording span."""
    base = dashboard_url(dashboard)
    if base is None or not span.get_span_context().is_valid:
        return None
    return f"{base}/run?run={quote(run_id(span, nested), safe='/')}"


def _checked(address: str) -> str:
    parts = urlsplit(address.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{address!r} is not an http:// or https:// address of the "
                         "budgetscope dashboard, e.g. http://127.0.0.1:8501")
    return address.strip().rstrip("/")
