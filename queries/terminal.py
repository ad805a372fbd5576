"""Text bound for a terminal, made inert.

Span names, agent names, attribute values and idempotency keys are sent by whoever can reach
the OTLP port. Written raw to a TTY, `\\x1b]0;…\\x07` retitles the window, `\\x1b[2J` clears the
screen, `\\x1b]8;;url\\x07` plants a link and a carriage return overwrites what was printed
before it on the same line. Everything the product prints from span data goes through
`terminal_safe` first: `run`, `report|simulate --format table`, `budgets list`, `check`,
`ingest`'s summary, error messages and the text log lines of `serve`; and any output bound
for a terminal (a CSV report printed rather than redirected, what the server's read API
answered) through `for_terminal` (budgetscope/commands/common.py decides when).

Rules:
- an escape sequence (CSI `ESC [ … final`, OSC/DCS/SOS/PM/APC `ESC ] … BEL|ESC \\`, and any
  other two-character `ESC x`, and their one-character C1 forms) is removed whole;
- every other C0 control (U+0000–U+001F), DEL and C1 control (U+0080–U+009F, of which U+009B
  is a one-byte CSI) becomes U+FFFD, so the reader sees that something was there;
- the bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069) become U+FFFD too:
  they reorder what is shown ("Trojan Source");
- a line feed is kept only where the caller says lines are expected (`keep_newlines=True`);
  inside one cell of a table it becomes a space, as a tab does.
"""

from __future__ import annotations

import re

_REPLACEMENT = "\ufffd"
# ESC followed by: CSI (parameters, intermediates, one final byte); a string introducer (OSC ],
# DCS P, SOS X, PM ^, APC _) up to BEL or ST (ESC \) on the same line; or any one character
# (an unterminated string loses its introducer, and what followed it is left as inert text).
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)"
    r"|\x1b[\s\S]?",
    re.DOTALL,
)
# The same in their one-character C1 forms: CSI U+009B; DCS, SOS, OSC, PM, APC up to ST U+009C.
_C1_SEQUENCE = re.compile(
    r"\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x9c\x1b\n]*(?:\x07|\x9c|\x1b\\)",
    re.DOTALL,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SPACING = re.compile(r"[\t\n\r\v\f]")


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with no escape sequence, control character or bidi override left in it."""
    text = _ESCAPE_SEQUENCE.sub("", text)
    text = _C1_SEQUENCE.sub("", text)
    if keep_newlines:
        return "\n".join(_CONTROL.sub(_REPLACEMENT, line.replace("\t", " "))
                         for line in text.replace("\r\n", "\n").split("\n"))
    return _CONTROL.sub(_REPLACEMENT, _SPACING.sub(" ", text))


def for_terminal(data: bytes) -> bytes:
    """Bytes a command would print (CSV, JSON, text), made inert for a terminal: lines kept,
    everything else `terminal_safe` removes or replaces (a tab becomes a space). Only for a
    terminal: a file or a pipe gets the data as it is."""
    return terminal_safe(data.decode("utf-8", "replace"), keep_newlines=True).encode("utf-8")


# json.dumps(ensure_ascii=False) escapes U+0000-U+001F but writes these as they are.
_RAW_IN_JSON = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_inert(text: str) -> str:
    """JSON text (from `json.dumps(..., ensure_ascii=False)`) with DEL, the C1 controls and
    the bidi overrides written as `\\uXXXX`: the same JSON value, inert on a terminal."""
    return _RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
