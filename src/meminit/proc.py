"""Running a tool: one place that turns a failed or missing command into a MeminitError."""

from __future__ import annotations

import subprocess
from pathlib import Path

from meminit.errors import MeminitError

TAIL_LINES = 15


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run(cmd: list[str], what: str | None = None, *, cwd: Path | None = None,
        timeout: float | None = None, input: str | None = None, check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run cmd with its output captured as text.

    With check (the default) a non-zero exit raises MeminitError naming `what` (by default
    the command) with the last lines of its output; a missing program or a timeout always
    does.
    """
    what = what or " ".join(cmd[:4])
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              input=input, env=env)
    except FileNotFoundError as exc:
        raise MeminitError(f"{what}: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise MeminitError(f"{what}: timed out after {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        raise MeminitError(f"{what} failed (exit {proc.returncode}):\n{tail(proc.stdout + proc.stderr)}")
    return proc


def first_line(cmd: list[str]) -> str:
    """The first output line of a version query, '' when the tool is missing or fails."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError:
        return ""
    return proc.stdout.splitlines()[0] if proc.returncode == 0 and proc.stdout else ""
