"""Optional bearer-token check shared by both receivers."""

from __future__ import annotations

import hmac


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
