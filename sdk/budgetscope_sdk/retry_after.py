"""HTTP Retry-After (RFC 9110 §10.2.3): when the other side asks us to come back. It is a delay
in seconds or an HTTP date, and it advises when a later request may succeed; it never extends
the run's budget, so a retry whose advised wait does not fit what is left is declined."""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping
from typing import Any

# An advised wait longer than this is treated as "not within any budget" rather than trusted
# as a number: no run waits a year, and a huge value must not overflow the arithmetic.
_LONGEST_S = 366 * 86_400.0


def parse_retry_after(value: str | None, now_unix_s: float) -> float | None:
    """Seconds to wait from `now_unix_s`, or None when `value` is absent or malformed. A date
    in the past is 0 s; a value beyond a year is a year."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if text.isdigit():  # delay-seconds = 1*DIGIT
        return min(float(int(text[:12])), _LONGEST_S)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
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
    return parse_retry_after(value, now_unix_s) if isinstance(value, str) else None
