"""A subprocess bounded by a step's slice: the articles' isolation boundary for work that will
not stop itself. The command runs as its own process group (a new session), so at the deadline
the whole tree is signalled, not only the shell that started it: SIGTERM, then SIGKILL after a
grace period. Killing a local process does not undo what it already did elsewhere."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Protocol

from budgetscope_sdk.clock import Clock
from budgetscope_sdk.errors import StepTimeout

# After SIGKILL, how long to wait for the pipes to close: a grandchild that left the group
# (setsid) may hold them open forever, and the step must still return.
_PIPE_DRAIN_S = 1.0


class ProcessTimeout(StepTimeout):
    """A command reached its step's deadline and its process group was stopped. `stdout` and
    `stderr` hold what it had written by then."""

    def __init__(self, message: str, *, deadline_ms: int, cleanup_ms: int | None,
                 command: list[str], stdout: bytes, stderr: bytes) -> None:
        super().__init__(message, deadline_ms=deadline_ms, cleanup_ms=cleanup_ms)
        self.command = command
        self.stdout = stdout
        self.stderr = stderr


class _Clocked(Protocol):
    @property
    def clock(self) -> Clock: ...


class BoundedStep(Protocol):
    """What `run_bounded` needs of the step whose slice bounds the process: a Step, written
    here as an interface so that this module, which step.py imports, does not import it back."""

    cleanup_ms: int | None

    @property
    def budget(self) -> _Clocked: ...

    @property
    def key(self) -> str: ...

    @property
    def allocated_ms(self) -> int: ...

    def remaining(self) -> float: ...

    def record_timeout(self, error: BaseException | None = None) -> None: ...


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signum)  # the group's id is the leader's pid
        else:  # pragma: no cover - Windows has no process groups to signal
            process.kill()
    except ProcessLookupError:
        pass  # the group is already gone


def run_bounded(step: BoundedStep, command: list[str], *, input: bytes | None, kill_grace: float,
                popen: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
    """See Step.run_process."""
    clock = step.budget.clock
    process = subprocess.Popen(
        command, start_new_session=True,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=popen.pop("stdout", subprocess.PIPE), stderr=popen.pop("stderr", subprocess.PIPE),
        **popen)
    try:
        out, err = process.communicate(input, timeout=step.remaining())
        return subprocess.CompletedProcess(command, process.returncode, out, err)
    except subprocess.TimeoutExpired:
        pass
    wait_ended = clock.monotonic()
    _signal_group(process, signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=max(kill_grace, 0.0))
    except subprocess.TimeoutExpired:
        _signal_group(process, getattr(signal, "SIGKILL", signal.SIGTERM))
        try:
            out, err = process.communicate(timeout=_PIPE_DRAIN_S)
        except subprocess.TimeoutExpired:
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            process.wait()  # the leader is dead by SIGKILL: this reaps it at once
            out, err = b"", b""
    cleanup_ms = int(round((clock.monotonic() - wait_ended) * 1000))
    step.cleanup_ms = cleanup_ms
    error = ProcessTimeout(
        f"{step.key} reached its {step.allocated_ms} ms deadline; {command[0]} and its process "
        f"group were stopped", deadline_ms=step.allocated_ms, cleanup_ms=cleanup_ms,
        command=command, stdout=out or b"", stderr=err or b"")
    step.record_timeout(error)
    raise error
