"""Running a tool: one place that turns a failed or missing command into a MeminitError.

run() captures a tool's output, stream() hands it over line by line (to a log, a
progress counter, a parser) as it comes, interactive() leaves the terminal to it.
Only vm.boot drives its own child, for the guest's timeout and console copy.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO

from meminit.core.errors import MeminitError

TAIL_LINES = 15
STOP_GRACE_S = 10.0


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run(cmd: list[str], what: str | None = None, *, cwd: Path | None = None,
        timeout: float | None = None, input: str | None = None, check: bool = True,
        env: dict[str, str] | None = None, new_session: bool = False) -> subprocess.CompletedProcess:
    """Run cmd with its output captured as text.

    With check (the default) a non-zero exit raises MeminitError naming `what` (by default
    the command) with the last lines of its output; a missing program or a timeout always
    does. In a new session the child does not get the terminal's Ctrl-C: for steps that
    must finish, whose caller holds the signal until they have (host_measure).
    """
    what = what or " ".join(cmd[:4])
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace",
                              timeout=timeout, input=input, env=env, start_new_session=new_session)
    except OSError as exc:   # missing, not executable
        raise MeminitError(f"{what}: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise MeminitError(f"{what}: timed out after {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        raise MeminitError(f"{what} failed (exit {proc.returncode}):\n{tail(proc.stdout + proc.stderr)}")
    return proc


def stream(cmd: list[str], what: str | None = None, *, log: Path | None = None,
           on_line: Callable[[str], None] | None = None, cwd: Path | None = None,
           env: dict[str, str] | None = None, merge_stderr: bool = True,
           preexec: Callable[[], None] | None = None) -> int:
    """Run cmd, writing each output line to `log` and passing it to `on_line`; its exit code.

    stderr joins stdout unless merge_stderr is False (then it goes to our stderr). On any
    exception, Ctrl-C included, the child is stopped before it propagates: a child in its
    own session (preexec) never sees the Ctrl-C and is killed at once; one in ours got it
    too and has STOP_GRACE_S to finish (make removes its half-written targets) before the
    kill. Callers restore state after us.
    """
    what = what or " ".join(cmd[:4])
    out: IO[str] | None = log.open("w") if log else None
    try:
        child = subprocess.Popen(cmd, cwd=cwd, env=env, text=True, errors="replace",
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT if merge_stderr else None,
                                 preexec_fn=preexec)
    except OSError as exc:
        if out:
            out.close()
        raise MeminitError(f"{what}: {exc}") from exc
    assert child.stdout is not None
    try:
        for line in child.stdout:
            if out:
                out.write(line)
            if on_line:
                on_line(line)
        return child.wait()
    except BaseException:
        if preexec is None:
            try:
                child.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        child.kill()
        child.wait()
        raise
    finally:
        child.stdout.close()
        if out:
            out.close()


def interactive(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> int:
    """Run cmd on our terminal (its output is for the user as it comes); its exit code."""
    try:
        return subprocess.run(cmd, cwd=cwd, env=env).returncode
    except OSError as exc:
        raise MeminitError(f"{cmd[0]}: {exc}") from exc


def first_line(cmd: list[str]) -> str:
    """The first output line of a version query, '' when the tool is missing or fails."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError:
        return ""
    return proc.stdout.splitlines()[0] if proc.returncode == 0 and proc.stdout else ""
