"""`report`, `run`, `check` and `simulate` sent to a running `budgetscope serve` (its read API,
POST /cli: budgetscope/server/cli_endpoint.py): with `--server URL`, or on their own when the file
of --db is held by a serve that announced the API in its sidecar (store/file/owner.py).

The arguments are parsed here first, by the command itself, so that a usage error or --help
reads as on the file without asking the server; --out is written here, never on the server.
The server streams the command's exact bytes and then its exit status (read_api_answer.py names
the form); they are passed on unchanged once the status has come (an answer cut short before
it is an error, never printed as if whole).
"""

from __future__ import annotations

import http.client
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import click
import duckdb

from budgetscope.commands.common import is_terminal, terminal_width, write_output
from budgetscope.commands.http_client import unauthorised, urlopen
from budgetscope.fail import Fail
from budgetscope.read_api_answer import ANSWER_TYPE, CutAnswer, read_answer
from queries.terminal import for_terminal
from store import DatabaseBusy, SchemaError, connect, serve_sidecar_path

REMOTE_COMMANDS = ("report", "run", "check", "simulate")
PATH = "/cli"
# The server stops a command after 120 s (serve.READ_API_SECONDS); a margin for the answer.
TIMEOUT_SECONDS = 150.0


class RemoteFail(Fail):
    """The server could not be asked. `check` exits 2 on it: a check that did not run must not
    look like a breach (1) nor like a pass (0)."""


class RemoteCheckFail(RemoteFail):
    exit_code = 2


def server_cli_url(server: str) -> str:
    """The read API of the server at `server` (http://HOST:PORT, the OTLP/HTTP port)."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{server!r} is not an http:// or https:// URL of the "
                                 "server's OTLP/HTTP port, e.g. http://127.0.0.1:4318",
                                 param_hint="--server")
    base = server.rstrip("/")
    return base if base.endswith(PATH) else base + PATH


def announced_cli_url(db: str) -> str | None:
    """The read API of the `budgetscope serve` holding `db`, when one holds it and said so."""
    if not serve_sidecar_path(db).exists():
        return None  # the common case, answered without touching the file
    try:
        con = connect(db, read_only=True)
    except DatabaseBusy as busy:
        url = (busy.server or {}).get("cli")
        return url if isinstance(url, str) else None
    except (SchemaError, duckdb.Error, OSError):
        return None  # the command opens it itself and says what is wrong
    con.close()  # a sidecar left by a killed server: nobody holds the file
    return None


def _without_out(arguments: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for part in arguments:
        if skip:
            skip = False
        elif part == "--out":
            skip = True
        elif not part.startswith("--out="):
            kept.append(part)
    return kept


def _ask(url: str, token: str | None, argv: list[str], failure: type[RemoteFail]
         ) -> tuple[int, bytes, bytes]:
    headers = {"Content-Type": "application/json", "Accept": ANSWER_TYPE}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps({"argv": argv}).encode("utf-8"),
                                     headers=headers, method="POST")
    try:
        with urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            return read_answer(answer)  # line by line, as the server writes them
    except urllib.error.HTTPError as error:
        if error.code == 401:
            raise failure(unauthorised(url, token)) from None
        try:
            message = json.loads(error.read().decode("utf-8")).get("error") or error.reason
        except (ValueError, AttributeError, RecursionError):
            message = error.reason
        raise failure(f"the server at {url} refused the command ({error.code}): "
                      f"{message}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise failure(f"cannot reach the server at {url}: {reason}") from None
    except (CutAnswer, http.client.HTTPException) as error:
        raise failure(f"the server at {url} gave an answer that is not the read API's "
                      f"whole answer: {error}") from None


def run_remotely(context: click.Context, url: str, name: str, arguments: Sequence[str]) -> int:
    """Parse and check the command here, run it on the server, print what it printed; the
    command's exit status."""
    command = context.command.get_command(context, name)  # type: ignore[attr-defined]
    assert command is not None
    parsed = command.make_context(name, list(arguments), parent=context)
    out: Path | None = parsed.params.get("out")
    failure = RemoteCheckFail if name == "check" else RemoteFail
    sent = _without_out(arguments)
    if "width" in parsed.params and parsed.params.get("width") is None:
        # The width of this terminal, not of the server's: the output is printed here.
        sent.extend(["--width", str(terminal_width())])
    status, stdout, stderr = _ask(url, context.obj.get("token"), [name, *sent], failure)
    if stderr:
        _print(sys.stderr, stderr)
    if out is not None and status == 0:
        write_output(stdout, out)
    elif stdout:
        _print(sys.stdout, stdout)
    return status


def _print(stream: IO[str], data: bytes) -> None:
    """The server's bytes as they are to a file or a pipe, made inert for a terminal (the
    server cannot know where its answer is printed)."""
    stream.flush()
    stream.buffer.write(for_terminal(data) if is_terminal(stream) else data)  # type: ignore[attr-defined]
    stream.buffer.flush()  # type: ignore[attr-defined]
