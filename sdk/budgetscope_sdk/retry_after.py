"""HTTP Retry-After (RFC 9110 §10.2.3): when the other side asks us to come back. It is a delay
in seconds or an HTTP date, and it advises when a later request may succeed; it never extends
the run's budget, so a retry whose advised wait does not fit what is left is declined.

The header comes from another server, so it is untrusted input: whatever it holds, parsing it
never raises. Delay-seconds is `1*DIGIT`, ASCII digits only (RFC 9110 §5.6.1 via RFC 5234's
DIGIT): `str.isdigit()` also takes `²` or `٣`, which `int()` then refuses, and `1e309`, `-1`
or `nan` are not delay-seconds either. Anything else is tried as an HTTP date, then ignored."""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Mapping
from typing import Any

# An advised wait longer than this is treated as "not within any budget" rather than trusted
# as a number: no run waits a year, and a huge value must not overflow the arithmetic.
_LONGEST_S = 366 * 86_400.0
# Delay-seconds: ASCII digits only (re's [0-9] never matches another script's digits).
_DELAY_SECONDS = re.compile(r"[0-9]+")
# More digits than this is past _LONGEST_S whatever they say: no int() of a 4,300-digit value.
_MOST_DIGITS = 9


def parse_retry_after(value: str | bytes | None, now_unix_s: float) -> float | None:
    """Seconds to wait from `now_unix_s`, or None when `value` is absent or malformed (bytes
    are read as latin-1, as HTTP headers were). A date in the past is 0 s; a value beyond a
    year is a year. Never raises on `value`."""
    if value is None:
        return None
    try:
        return _parse(value, now_unix_s)
    except Exception:  # noqa: BLE001 - another server's header must never fail the call
        return None


def _parse(value: Any, now_unix_s: float) -> float | None:
    text = (value.decode("latin-1") if isinstance(value, bytes) else str(value)).strip(" \t")
    if not text:
        return None
    if _DELAY_SECONDS.fullmatch(text):
        if len(text.lstrip("0")) > _MOST_DIGITS:
            return _LONGEST_S
        return min(float(int(text)), _LONGEST_S)
    when = email.utils.parsedate_to_datetime(text)
    if when is None or when.tzinfo is None:
        return None  # an HTTP date is always GMT; a date without a zone is not one
    wait = when.timestamp() - now_unix_s
    if not math.isfinite(wait):
        return None
    return min(max(0.0, wait), _LONGEST_S)


def retry_after_of(error: BaseException, now_unix_s: float) -> float | None:
    """The Retry-After carried by the response an exception holds (httpx.HTTPStatusError, the
    OpenAI client's APIStatusError, requests' HTTPError), in seconds."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if not isinstance(headers, Mapping) and not hasattr(headers, "get"):
        return None
    try:
        value: Any = headers.get("retry-after") or headers.get("Retry-After")  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a foreign object's .get is not ours to trust
        return None
    return parse_retry_after(value, now_unix_s) if isinstance(value, (str, bytes)) else None
