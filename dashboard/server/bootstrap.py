"""Streamlit's server for the dashboard, on Streamlit's public ground.

`serve(server, config)` builds `st.App` for dashboard/streamlit_app.py with the access guard as
its first middleware (so every request passes it: pages, static files, media, `/_stcore/*` and
the websocket) and the page hints inside it (page_head.py), hands the pages their
`DashboardConfig` and runs the app with `App.run` on this thread until SIGTERM or Ctrl-C, then
returns, so that `budgetscope serve` can drain its receivers and close the database. The warm-up
starts in the app's lifespan, once Streamlit's runtime is up; the lifespan also puts the
dashboard's own accept loop and connection guard on its port (connections.py) before uvicorn
starts listening.

The commands (`dashboard`, `demo`, `serve`) build a `DashboardServer` (where it listens, and the
access policy) and call `serve`; nothing is left in module globals between the two.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from dashboard.config import DashboardConfig, configure
from dashboard.server.access import AccessGuard, AccessPolicy
from dashboard.server.connections import ConnectionLimits, take_over
from dashboard.server.ground import require_supported
from dashboard.server.page_head import PageHead
from dashboard.server.warm_up import start_warm_up
from dashboard.server.wrong_port import WrongPort

APP = Path(__file__).resolve().parents[1] / "streamlit_app.py"

# What the product asks of Streamlit's server: headless, no usage statistics, no file
# watching, nothing fetched from outside (`App.run(config=…)`, Streamlit's own option names).
STREAMLIT_OPTIONS: dict[str, Any] = {
    "server.headless": True,
    "server.fileWatcherType": "none",
    "server.runOnSave": False,
    # Nothing goes out: no usage statistics; no start-up banner, whose "Network URL" /
    # "External URL" lines on a wildcard --host connect a UDP socket to 8.8.8.8 and ask
    # checkip.amazonaws.com (the commands print their own addresses); no static folder
    # served from the app's directory.
    "browser.gatherUsageStats": False,
    "logger.hideWelcomeMessage": True,
    "server.enableStaticServing": False,
    "global.developmentMode": False,
    "client.toolbarMode": "viewer",  # no "Deploy" button: this is a product, not a sketch
    # Streamlit's full gc.collect(2) after every page run held the GIL ~0.3 s on 1.4M-span
    # pages, stalling every other session (and, in serve, the receivers); Python's own
    # generational collection still runs.
    "runner.postScriptGC": False,
}


@dataclass(frozen=True)
class DashboardServer:
    """Where the dashboard listens and who may open it; `access` None: the loopback names and
    `host`, no token."""

    host: str
    port: int
    access: AccessPolicy | None = None
    app: Path = APP
    # Open connections at most, how long a head may take (connections.py); `serve` gives the
    # cap its share of the process's descriptors (budgetscope/server/descriptors.py).
    connections: ConnectionLimits = ConnectionLimits()

    def policy(self) -> AccessPolicy:
        return self.access or AccessPolicy.build(listen_host=self.host, port=self.port,
                                                 token=None)

    def options(self) -> dict[str, Any]:
        return {**STREAMLIT_OPTIONS, "server.address": self.host, "server.port": self.port}


def serve(server: DashboardServer, config: DashboardConfig) -> None:
    """The dashboard on this thread until SIGTERM or Ctrl-C (SIGQUIT too); `config` is what its
    pages read (dashboard/config.py) for as long as it runs. Raises
    ground.UnsupportedStreamlit, naming the supported range, on another Streamlit."""
    require_supported()
    import streamlit as st  # here: the other commands never load it
    from starlette.middleware import Middleware

    signals = _Signals()
    # The guard first: nothing reaches the page hints or Streamlit that it has not admitted.
    app = st.App(str(server.app),
                 middleware=[Middleware(AccessGuard, policy=server.policy()),
                             Middleware(WrongPort), Middleware(PageHead)],
                 lifespan=_lifespan(server, signals))
    configure(config)
    try:
        with signals.installed(), _launched_as(server.app):
            app.run(config=server.options())
    except _StoppedBeforeServing:
        pass
    finally:
        configure(None)


def _lifespan(server: DashboardServer, signals: _Signals
              ) -> Callable[[object], AsyncIterator[None]]:
    """The app's lifespan: the dashboard's port taken over (connections.py), then the signals'
    and the warm-up's. It runs before uvicorn creates its server and ends after it stopped."""

    @asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        with take_over(asyncio.get_running_loop(), server.port, server.connections):
            async with signals.lifespan(app):
                yield

    return lifespan  # type: ignore[return-value]


@contextmanager
def _launched_as(script: Path) -> Iterator[None]:
    """`App.run` takes the process's script (sys.argv[0]) for the app's launcher: the folder
    put on sys.path, the script-level `.streamlit/` looked in and the arguments the app sees.
    Here that is the app itself, as under `streamlit run`, not the `budgetscope` script."""
    argv = sys.argv
    sys.argv = [str(script)]
    try:
        yield
    finally:
        sys.argv = argv


class _StoppedBeforeServing(BaseException):
    """SIGTERM or Ctrl-C came while the server was starting: nothing to stop yet."""


class _Signals:
    """What SIGTERM, SIGINT and SIGQUIT do around the server.

    While it serves, uvicorn (which App.run runs) handles SIGINT and SIGTERM: it stops
    accepting, closes the connections and returns; then it raises the signal again for the
    handler it found installed. These handlers are the ones it finds: after the server has
    served they do nothing (so App.run returns and the caller drains), before it they stop
    the start-up. SIGQUIT, which uvicorn leaves alone, is passed on to it as SIGTERM (Streamlit's
    own server stopped on all three)."""

    HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)

    def __init__(self) -> None:
        self.phase = "starting"  # then "serving", then "stopped"

    @contextmanager
    def installed(self) -> Iterator[None]:
        for signum in self.HANDLED:
            signal.signal(signum, self._handle)
        yield

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.phase == "starting":
            raise _StoppedBeforeServing
        if self.phase == "serving" and signum == signal.SIGQUIT:
            signal.raise_signal(signal.SIGTERM)

    @asynccontextmanager
    async def lifespan(self, app: object) -> AsyncIterator[None]:
        """st.App's start-up and shut-down hook: Streamlit's runtime has started (so the pages'
        caches the warm-up creates are the runtime's) and uvicorn handles the signals."""
        self.phase = "serving"
        start_warm_up()
        try:
            yield
        finally:
            self.phase = "stopped"
