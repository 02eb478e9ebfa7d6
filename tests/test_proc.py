"""proc: the one way the harness runs a tool."""

import os
import sys
import time
from pathlib import Path

import pytest

from meminit.core import proc
from meminit.core.errors import MeminitError


def test_run_names_the_failure_and_keeps_its_tail():
    with pytest.raises(MeminitError, match=r"listing failed \(exit 3\):\nfirst\nlast words"):
        proc.run(["sh", "-c", "echo first; echo last words >&2; exit 3"], "listing")
    assert proc.run(["sh", "-c", "exit 3"], check=False).returncode == 3


def test_run_reports_a_missing_tool_and_a_timeout():
    with pytest.raises(MeminitError, match="no-such-tool"):
        proc.run(["no-such-tool-meminit"])
    with pytest.raises(MeminitError, match="timed out after 0 s"):
        proc.run(["sleep", "5"], timeout=0.2)


def test_stream_writes_the_log_and_hands_over_each_line(tmp_path):
    seen: list[str] = []
    rc = proc.stream(["sh", "-c", "echo one; echo two >&2; exit 4"], log=tmp_path / "log",
                     on_line=seen.append)
    assert rc == 4
    assert seen == ["one\n", "two\n"]
    assert (tmp_path / "log").read_text() == "one\ntwo\n"


def test_stream_can_leave_stderr_out():
    seen: list[str] = []
    assert proc.stream(["sh", "-c", "echo out; echo err >&2"], on_line=seen.append, merge_stderr=False) == 0
    assert seen == ["out\n"]


def test_stream_kills_its_child_when_the_caller_is_interrupted(tmp_path):
    """microbench's child runs in its own session, where Ctrl-C does not reach it: stream()
    must stop it before the caller restores the hugetlb pool."""
    pid_file = tmp_path / "pid"

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt

    script = f"echo $$ > {pid_file}; echo started; exec sleep 60"
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        proc.stream(["sh", "-c", script], on_line=interrupt, preexec=os.setsid)
    assert time.monotonic() - started < 30
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_stream_reports_a_missing_tool(tmp_path):
    with pytest.raises(MeminitError, match="no-such-tool"):
        proc.stream(["no-such-tool-meminit"], log=tmp_path / "log")


def test_interactive_returns_the_exit_code():
    assert proc.interactive([sys.executable, "-c", "raise SystemExit(5)"], cwd=Path("/")) == 5
