"""What another server sends the SDK never makes it raise: every header the SDK reads
(Retry-After on a response, the deadline headers a caller sends a service) is parsed without
an exception whatever it holds. Retry-After is delay-seconds in ASCII digits (RFC 9110), else an
HTTP date, else ignored.

The named hostile values go through a real server on 127.0.0.1 that writes them as raw header
bytes, and the real BudgetTransport; hypothesis then tries everything else on the parsers."""

from __future__ import annotations

import math

import httpx
import pytest
from budgetscope_sdk import RemoteDeadline, RunBudget
from budgetscope_sdk.httpx_transport import BudgetTransport, response_hook
from budgetscope_sdk.propagation import DEADLINE_HEADER, REMAINING_HEADER
from budgetscope_sdk.retry_after import parse_retry_after, retry_after_of
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sdk.support.capture import capture
from tests.sdk.support.servers import ScriptedTool, ScriptState, serve

YEAR_S = 366 * 86_400.0
NOW_S = 1_780_000_000.0

# (raw header bytes, seconds the SDK takes from them: None when it ignores them)
HOSTILE_RETRY_AFTER: list[tuple[bytes, float | None]] = [
    ("²".encode("latin-1"), None),  # a digit to str.isdigit(), not to int()
    ("٣".encode(), None),  # ARABIC-INDIC DIGIT THREE, as UTF-8
    ("１２".encode(), None),  # fullwidth digits
    (b"1e309", None),  # a float past the largest double
    (b"-1", None),
    (b"1" * 26, YEAR_S),  # ASCII digits, far past a year: a year
    (b"Fri, 31 Dec 9999 23:59:59 GMT", YEAR_S),
    (b"Fri, 31 Dec 99999 23:59:59 GMT", None),  # past what a datetime holds
    (b"nan", None),
    (b"inf", None),
    (b"", None),
    (b"5.5", None),
    (b"0x10", None),
    (b" 7 ", 7.0),  # optional whitespace around delay-seconds
]


def _on_the_wire(raw: bytes) -> str:
    """`raw` as http.server writes it: it encodes header values as latin-1."""
    return raw.decode("latin-1")


@pytest.mark.parametrize(("raw", "expected"), HOSTILE_RETRY_AFTER,
                         ids=[repr(raw) for raw, _ in HOSTILE_RETRY_AFTER])
def test_a_hostile_retry_after_never_raises_out_of_the_transport(
        raw: bytes, expected: float | None) -> None:
    spans = capture()
    script = ScriptState({"/quote": [(503, 0.0, {"Retry-After": _on_the_wire(raw)})]})
    with serve(ScriptedTool, script) as (url, _), \
            httpx.Client(transport=BudgetTransport(), event_hooks={
                "response": [response_hook]}) as client, \
            RunBudget(10, reserve=1, tracer=spans.tracer) as budget:
        with budget.step("tool", "quote", cap=2) as call:
            response = client.get(f"{url}/quote")  # returns the 503: nothing raised
            assert response.status_code == 503
        assert call.retry_after_s == expected
    (step,) = spans.steps()
    assert step["budget.outcome"] == "upstream_error"  # retryable, not `error`


@pytest.mark.parametrize("raw", [b"\x00", b"5\x00", b"\x00\x00\x00"])
def test_a_nul_in_retry_after_is_ignored(raw: bytes) -> None:
    """h11 refuses a response header holding NUL before the SDK sees it; a client of another
    HTTP library may still hand one over (as str or bytes)."""
    assert parse_retry_after(raw.decode("latin-1"), NOW_S) is None
    assert parse_retry_after(raw, NOW_S) is None  # type: ignore[arg-type]


def _sane(seconds: float | None) -> bool:
    return seconds is None or (math.isfinite(seconds) and 0 <= seconds <= YEAR_S)


@settings(max_examples=2_000, deadline=None)
@given(st.one_of(st.text(), st.binary().map(lambda raw: raw.decode("latin-1")),
                 st.from_regex(r"\A[ \t]*[0-9]{1,40}[ \t]*\Z"),
                 st.datetimes().map(lambda when: when.strftime("%a, %d %b %Y %H:%M:%S GMT"))),
       st.floats(min_value=0, max_value=4e9))
def test_any_retry_after_parses_without_raising(value: str, now: float) -> None:
    assert _sane(parse_retry_after(value, now))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_any_retry_after_bytes_on_a_response_parse_without_raising(raw: bytes) -> None:
    """The header as httpx hands it over from any bytes (it decodes them as it can), read
    where the SDK reads it: on the response an exception holds."""
    try:
        response = httpx.Response(503, headers=[(b"Retry-After", raw)],
                                  request=httpx.Request("GET", "http://127.0.0.1/"))
    except (httpx.LocalProtocolError, ValueError):
        return  # httpx itself refuses such a header
    error = httpx.HTTPStatusError("503", request=response.request, response=response)
    assert _sane(retry_after_of(error, NOW_S))


_HEADER_NAMES = st.sampled_from([REMAINING_HEADER, DEADLINE_HEADER, REMAINING_HEADER.upper(),
                                 DEADLINE_HEADER.lower(), "grpc-timeout", "x-other"])


@settings(max_examples=1_000, deadline=None)
@given(st.dictionaries(_HEADER_NAMES, st.one_of(
    st.text(), st.from_regex(r"\A-?[0-9]{0,30}(\.[0-9]{0,10})?(e[+-]?[0-9]{1,4})?\Z"),
    st.sampled_from(["nan", "inf", "-inf", "1e309", "²", "٣", "\x00", ""]))),
    st.one_of(st.none(), st.floats(min_value=0, max_value=1e6)))
def test_any_deadline_headers_parse_without_raising(headers: dict[str, str],
                                                    default: float | None) -> None:
    deadline = RemoteDeadline.from_headers(headers, default_s=default)
    if deadline is not None:
        assert math.isfinite(deadline.remaining()) and deadline.remaining() >= 0
