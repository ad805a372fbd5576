"""The read API's answer as the CLI reads it: what `POST /cli` on a running `budgetscope
serve` streams back (budgetscope/server/cli_endpoint.py writes it), JSON lines, each one of

    {"stdout": BASE64}    bytes the command wrote to its standard output, in order
    {"stderr": BASE64}    bytes it wrote to its standard error
    {"status": N}         its exit status: the last line, and only once it is done

Below both the CLI's client (commands/remote_cli.py) and the server, so that neither imports
the other for the answer's form.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable

ANSWER_TYPE = "application/x-ndjson"


class CutAnswer(ValueError):
    """The read API's answer is not whole (no status line) or not its form."""


def read_answer(lines: Iterable[bytes]) -> tuple[int, bytes, bytes]:
    """(status, stdout, stderr) of a read API answer's JSON lines; CutAnswer when they are
    not one (a line that is not the form, or no status line at the end)."""
    out: list[bytes] = []
    err: list[bytes] = []
    status: int | None = None
    for line in lines:
        if not line.strip():
            continue
        if status is not None:
            raise CutAnswer("a line after the status line")
        try:
            record = json.loads(line)
            (name, value), = record.items()
            if name == "status" and isinstance(value, int) and not isinstance(value, bool):
                status = value
            elif name in ("stdout", "stderr") and isinstance(value, str):
                (out if name == "stdout" else err).append(
                    base64.b64decode(value, validate=True))
            else:
                raise ValueError(f"unexpected {name!r}")
        except (ValueError, TypeError, AttributeError, RecursionError,
                binascii.Error) as error:
            raise CutAnswer(f"a line that is not the read API's: {error}") from None
    if status is None:
        raise CutAnswer("the answer ended before the command's exit status (cut short)")
    return status, b"".join(out), b"".join(err)
