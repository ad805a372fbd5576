"""The process's file descriptors, shared out so that no flood at one port starves the others.

`serve` runs the OTLP/HTTP port, the OTLP/gRPC port and the dashboard in one process, on one
table of descriptors: every connection holds one. At a soft limit of 1,024 (the default of
systemd services and most shells) 1,100 connections that never sent a request, to any one of
the ports, used to take them all, and exports were refused for want of a socket.

So at start the soft RLIMIT_NOFILE is raised to the hard limit (an unprivileged process may),
RESERVE descriptors are kept for what is not a client's connection (the DuckDB file, its WAL
and the temporary files of large sorts, grpc's own, the event loops, log files), and each
listening port's connection cap is its share of the rest, never more than its own default:

    limit 1,024: reserve 128; OTLP/HTTP 336, OTLP/gRPC 336, dashboard 224 (3:3:2)
    limit 524,288 (systemd's default hard limit): the defaults, 1,024, 1,024 and 512

Each port then keeps within its cap on its own (the OTLP/HTTP port and the dashboard close the
connection idle longest to make room; grpc refuses new ones past its cap and closes those that
do not finish their handshake within 5 s), so a flood at one leaves the others their share.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from pathlib import Path

_LOG = logging.getLogger("budgetscope.serve")

RESERVE = 128
# Eighths of what is left after the reserve, per port: with the dashboard, and without (--no-ui).
SHARES = {"otlp_http": 3, "otlp_grpc": 3, "dashboard": 2}
SHARES_WITHOUT_UI = {"otlp_http": 4, "otlp_grpc": 4, "dashboard": 0}
# Below this many for a port's share, start-up warns: the limit is too low to serve well.
FEW = 32
_NR_OPEN = Path("/proc/sys/fs/nr_open")


@dataclass(frozen=True)
class Descriptors:
    """The soft limit the process runs with (raised from `before`), and each port's cap."""

    limit: int
    before: int
    otlp_http: int
    otlp_grpc: int
    dashboard: int

    def describe(self) -> dict[str, int]:
        return {"descriptor_limit": self.limit, "otlp_http_connections": self.otlp_http,
                "otlp_grpc_connections": self.otlp_grpc,
                "dashboard_connections": self.dashboard}


def raise_soft_limit() -> tuple[int, int]:
    """(soft limit before, soft limit now): raised to the hard limit when it can be (a hard
    limit of "unlimited" is taken as the kernel's most per process, fs.nr_open)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            target = int(_NR_OPEN.read_text())
        except (OSError, ValueError):
            target = 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as error:
            _LOG.warning("could not raise the descriptor limit from %d to %d: %s", soft,
                         target, error, extra={"event": "descriptor_limit"})
            return soft, soft
        return soft, target
    return soft, soft


def share(limit: int, before: int, *, dashboard: bool, otlp_http_default: int,
          otlp_grpc_default: int, dashboard_default: int) -> Descriptors:
    """Each port's cap at `limit` descriptors: its share of what the reserve leaves, at most
    its default."""
    shares = SHARES if dashboard else SHARES_WITHOUT_UI
    spare = max(0, limit - RESERVE)
    caps = {name: max(1, spare * part // 8) for name, part in shares.items()}
    return Descriptors(limit=limit, before=before,
                       otlp_http=min(otlp_http_default, caps["otlp_http"]),
                       otlp_grpc=min(otlp_grpc_default, caps["otlp_grpc"]),
                       dashboard=min(dashboard_default, caps["dashboard"]) if dashboard else 0)


def dashboard_alone(default: int) -> int:
    """The connection cap of a dashboard that runs alone (`budgetscope dashboard`, `demo`),
    once the soft limit is raised: what the reserve leaves, at most `default`."""
    _, limit = raise_soft_limit()
    return max(1, min(default, limit - RESERVE))


def of_this_process(*, dashboard: bool, otlp_http_default: int, otlp_grpc_default: int,
                    dashboard_default: int) -> Descriptors:
    """Raise the soft limit, then share it out; warns when a port's share is below FEW."""
    before, limit = raise_soft_limit()
    shared = share(limit, before, dashboard=dashboard, otlp_http_default=otlp_http_default,
                   otlp_grpc_default=otlp_grpc_default, dashboard_default=dashboard_default)
    caps = [shared.otlp_http, shared.otlp_grpc] + ([shared.dashboard] if dashboard else [])
    if min(caps) < FEW:
        _LOG.warning("the process may open only %d file descriptors (ulimit -n); each port "
                     "holds few connections (%s): raise the limit", limit, shared.describe(),
                     extra={"event": "descriptor_limit", **shared.describe()})
    return shared
