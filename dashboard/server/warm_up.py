"""What the first page view would otherwise pay for, done once when the dashboard starts.

The app's modules are imported by its first script run, and Plotly imports each trace type's
validators the first time a figure uses it: on this 2-core machine the first chart page of a
fresh process spent ~2 s importing and ~0.4 s more building its first figures. Doing both in a
background thread at start-up keeps the server's own start as fast as before.
"""

from __future__ import annotations

import inspect
import io
import logging
import threading

log = logging.getLogger(__name__)


def warm() -> None:
    """Import the app's modules and draw one figure of every kind the pages draw, from the
    kinds of values they pass (pandas Series, numpy arrays, datetimes)."""
    import numpy as np
    import pandas as pd
    import plotly.colors  # noqa: F401 - the heatmaps' named colour scales
    import plotly.io as pio
    from plotly.subplots import make_subplots

    # Every module a page imports (dashboard/app_pages/*.py): each page's first visit would
    # otherwise import its own, from source when no bytecode is cached.
    from dashboard import (  # noqa: F401 - imported for their import cost only
        attribution_summaries,
        colors,
        columns,
        compare_figures,
        data,
        database_status,
        drill,
        exports,
        favicon,
        figures,
        filters,
        fmt,
        links,
        notices,
        page_context,
        run_figures,
        run_search_params,
        run_summaries,
        sidebar,
        simulation_figures,
        summaries,
        tables,
        weekly_summaries,
    )
    from queries import (  # noqa: F401
        render,
        run_compare,
        run_search,
        run_story,
        run_view,
        terminal,
    )
    from simulation import policy, replay  # noqa: F401
    from store import Change, DeclarationError, parse_duration_ms  # noqa: F401

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
    # Stacked panels, as the overview's trends, the run view's waterfall and the utilisation
    # histograms are, fed pandas values: Plotly converts those through narwhals, whose pandas
    # backend is imported at the first such value (~0.4 s of the overview's first visit of a
    # fresh process, measured on 144k spans), and lays out each panel's axes at the first
    # make_subplots.
    when = pd.Series(pd.to_datetime(["2026-01-01", "2026-01-02"], utc=True))
    values = pd.Series([1.0, 2.0])
    panels = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                           row_heights=[0.4, 0.3, 0.3])
    panels.add_bar(x=when, y=values, row=1, col=1)
    panels.add_bar(y=["a", "b"], x=values.to_numpy(), base=values.to_numpy(),
                   orientation="h", row=2, col=1)
    panels.add_scatter(x=when, y=values, customdata=np.column_stack([values, values]),
                       row=3, col=1)
    panels.update_yaxes(title_text="warm-up", row=2, col=1)
    panels.add_vline(x=1, row="all", col=1, annotation_text="warm-up")
    panels.add_hline(y=0, row=2, col=1)
    pio.to_json(panels, validate=False)
    # Tables shown as people read them are pandas Stylers (fmt.readable_table): pandas imports
    # its Styler and jinja2 and compiles the templates at the first one (~0.4 s of the
    # overview's first visit when Python reads sources without cached bytecode, as here).
    fmt.readable_table(pd.DataFrame({"exhaustion_rate": [0.5, None]})).to_html()
    # The tab's icon: Streamlit encodes it as PNG on every page run, Pillow loads its image
    # plugins at the first encoding.
    favicon.favicon().save(io.BytesIO(), format="PNG")
    # Streamlit's first element of the process asks inspect.stack() (env_util.is_repl), whose
    # first call resolves the file of every module loaded (~0.28 s of the first visit); later
    # calls only look at modules loaded since.
    inspect.stack()


def _warm_quietly() -> None:
    try:
        warm()
    except Exception:  # noqa: BLE001 - only a head start; the page itself reports real errors
        log.debug("dashboard warm-up failed", exc_info=True)


def start_warm_up() -> threading.Thread:
    thread = threading.Thread(target=_warm_quietly, name="dashboard-warm-up", daemon=True)
    thread.start()
    return thread
