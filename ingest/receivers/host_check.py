"""Which `Host` and `Origin` the OTLP/HTTP port's data routes answer (DNS rebinding).

A page on `evil.example` whose name the attacker re-points at 127.0.0.1 reaches a loopback
port from the victim's browser, with `Host: evil.example:4318` and, being same-origin after
the rebinding, no CORS preflight to refuse. So every route that shows or changes data (`/cli`,
`/budgets`, `/metrics`, and any route added later) answers only the names the server is known
by, and a browser's `Origin`, when one is sent, must be the server itself. The OTLP exports
stay open to any Host, as the Collector's receivers are (exporters name the server however
they reach it), and so do the probes (an endpoint whose `probe` is true: serve's `/healthz` and
`/readyz`), which say nothing about the data.

`budgetscope serve` hands the receiver the same policy object as its dashboard's guard
(dashboard/server/access.py, built from `--host` and `--allowed-host`), so both surfaces answer the
same names. Without one (the receivers started on their own, in tests and benchmarks), only the
loopback names and the listening address are answered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Protocol


class HostPolicy(Protocol):
    def refusal(self, hosts: Sequence[str], origins: Sequence[str]) -> str | None:
        """Why a request with these `Host` and `Origin` headers is refused, or None."""


def _name(authority: str) -> str:
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    return authority.split(":", 1)[0] if authority.count(":") == 1 else authority


def _loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class LoopbackHosts:
    """The default: loopback names and the listening address; a browser's Origin must be the
    Host it sent (scheme aside)."""

    def __init__(self, listen_host: str) -> None:
        self.listen = _name(listen_host)

    def refusal(self, hosts: Sequence[str], origins: Sequence[str]) -> str | None:
        if len(hosts) != 1 or not (_loopback(_name(hosts[0])) or _name(hosts[0]) == self.listen):
            shown = hosts[0] if hosts else "(none)"
            return (f"Host {shown!r} is not a name this server answers to (DNS rebinding "
                    "protection)")
        for origin in origins:
            netloc = origin.strip().lower().partition("://")[2]
            if netloc != hosts[0].strip().lower():
                return (f"Origin {origin!r} is not this server; requests driven by another "
                        "site's page are refused")
        return None


def headers_of(headers: object, name: str) -> list[str]:
    """Every value of header `name` (tornado's HTTPHeaders keeps repeats apart)."""
    get_list = getattr(headers, "get_list", None)
    if get_list is not None:
        return list(get_list(name))
    value = headers.get(name)  # type: ignore[attr-defined]
    return [] if value is None else [value]
