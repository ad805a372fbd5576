"""Optional bearer-token check shared by both receivers, and the pace of wrong tokens per client.

A token is at least 16 printable characters (budgetscope/commands/tokens.py), so it cannot be
guessed outright; what is left is to keep a client from trying quickly, and its wrong tokens
from costing the server lines of log and work. `FailedTokens` counts each client address's wrong
tokens as a leaky bucket: BURST of them are answered as usual (a typo, a rotated token), then
the client may try once each REFILL_SECONDS; meanwhile its wrong tokens are answered 429 with
Retry-After (gRPC UNAVAILABLE with RetryInfo) and not counted.

Each surface keeps its own count (the OTLP/HTTP port, the OTLP/gRPC port, the dashboard), and a
request carrying the right token is always let through, paced or not. An address is all a
server knows of a client, and every process of a machine is one: counted per address alone and
shared, ten `<img src="http://127.0.0.1:8501/?token=guessN">` on any web page held back every
local exporter with the right token, and the owner, for as long as the page kept guessing. So
the count says when a client may be told "wrong" again, never that the right token is refused
(the token's length is what makes guessing hopeless, at any pace).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from urllib.parse import unquote

# Ten wrong tokens at once, then one each ten seconds: 360 guesses an hour from one address.
BURST = 10
REFILL_SECONDS = 10.0
# Addresses remembered (the least recently failed is forgotten first): bounded memory
# whatever the number of addresses an attacker sends from.
MOST_CLIENTS = 10_000


class BearerToken:
    """Accepts `Authorization: Bearer <token>`; with no token configured, accepts everything."""

    def __init__(self, token: str | None) -> None:
        self._expected = token.encode() if token else None

    @property
    def required(self) -> bool:
        return self._expected is not None

    def allows(self, authorization: str | None) -> bool:
        if self._expected is None:
            return True
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":  # the scheme is case-insensitive (RFC 9110 §11.1)
            return False
        # Constant-time, so response timing does not reveal how much of a guess was right.
        return hmac.compare_digest(credentials.strip().encode(), self._expected)


class FailedTokens:
    """Wrong tokens per client address (see the module's docstring). Thread-safe."""

    def __init__(self, burst: int = BURST, refill_seconds: float = REFILL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.refill_seconds = refill_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._owed: OrderedDict[str, tuple[float, float]] = OrderedDict()  # (failures, when)

    def _outstanding(self, client: str, now: float) -> float:
        failures, when = self._owed.get(client, (0.0, now))
        return max(0.0, failures - (now - when) / self.refill_seconds)

    def wait(self, client: str) -> float:
        """Seconds before `client` may try a token again; 0 when it may now."""
        with self._lock:
            outstanding = self._outstanding(client, self._clock())
        return max(0.0, (outstanding - (self.burst - 1)) * self.refill_seconds)

    def failed(self, client: str) -> None:
        """`client` sent a wrong token."""
        with self._lock:
            now = self._clock()
            self._owed[client] = (self._outstanding(client, now) + 1, now)
            self._owed.move_to_end(client)
            while len(self._owed) > MOST_CLIENTS:
                self._owed.popitem(last=False)


def grpc_client(peer: str) -> str:
    """The address of a grpc peer string: `ipv4:127.0.0.1:5000` → `127.0.0.1`,
    `ipv6:%5B::1%5D:5000` (or unquoted) → `::1`."""
    _, _, rest = unquote(peer).partition(":")
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest
