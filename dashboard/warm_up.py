"""What the first page view would otherwise pay for, done once when the dashboard starts.

The app's modules are imported by its first script run, and Plotly imports each trace type's
validators the first time a figure uses it: on this 2-core machine the first chart page of a
fresh process spent ~2 s importing and ~0.4 s more building its first figures. Doing both in a
background thread at start-up keeps the server's own start as fast as before.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


def warm() -> None:
    """Import the app's modules and draw one figure of every kind the pages draw."""
    import plotly.io as pio

    from dashboard import (  # noqa: F401 - imported for their import cost only
        data,
        exports,
        figures,
        layout,
        run_figures,
        simulation_figures,
        summaries,
    )

    # One figure with every trace and shape kind the pages draw (dashboard/*figures.py),
    # serialized as st.plotly_chart does.
    figure = figures.empty("warm-up", "")
    figure.add_bar(x=[1], y=[1])
    figure.add_scatter(x=[1], y=[1])
    figure.add_heatmap(z=[[1]])
    figure.add_histogram(x=[1])
    figure.add_hline(y=1)
    figure.add_vline(x=1)
    pio.to_json(figure, validate=False)


def _warm_quietly() -> None:
    try:
        warm()
    except Exception:  # noqa: BLE001 - only a head start; the page itself reports real errors
        log.debug("dashboard warm-up failed", exc_info=True)


def start_warm_up() -> threading.Thread:
    thread = threading.Thread(target=_warm_quietly, name="dashboard-warm-up", daemon=True)
    thread.start()
    return thread
