"""A command run as a real process whose standard output and error are a pseudo-terminal, and
what that terminal received, searched for anything it would act on (a window title, a screen
clear, a hyperlink, C1 controls, bidi overrides): tests/cli/test_terminal_outputs.py and the cost
commands' tests."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

CLI = [sys.executable, "-c", "from budgetscope.cli import main; main()"]
# What a terminal acts on, once the pty's own CR before each LF is set aside.
ACTS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def cli_env() -> dict[str, str]:
    """The environment without what would send the command to a server or another file."""
    return {key: value for key, value in os.environ.items()
            if key not in ("BUDGETSCOPE_SERVER", "BUDGETSCOPE_TOKEN", "BUDGETSCOPE_DB")}


def on_terminal(db: str, *arguments: str) -> tuple[int, str]:
    """(exit status, what a terminal received) for one command run on a pseudo-terminal."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([*CLI, "--db", db, *arguments], stdin=subprocess.DEVNULL,
                               stdout=terminal, stderr=terminal, env=cli_env())
    os.close(terminal)
    received = bytearray()
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        received += chunk
    os.close(controller)
    status = process.wait(120)
    return status, received.decode("utf-8", "replace").replace("\r\n", "\n")


def assert_inert(text: str) -> None:
    found = ACTS.search(text)
    assert found is None, (repr(found.group()) if found else "", repr(text[-2000:]))
