"""The benchmark binary (bench/, C): building it, verifying it, reading its output.

meminit-bench prints one line per fact: 'info k=v ...' about the machine and options,
'sample k=v ...' per timed run, 'skip ... reason=...' for a case it cannot run. The
microbench command and the thp-fault scenario read it through parse_output().
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import deps, paths, proc
from meminit.core.errors import MeminitError

BUILD_DIR = paths.BENCH_DIR / "build"
BINARY = BUILD_DIR / "meminit-bench"


def build() -> Path:
    deps.ensure(deps.BENCH)
    proc.run(["make", "-C", str(paths.BENCH_DIR), "-s"], f"building the benchmark in {paths.BENCH_DIR}")
    if not BINARY.exists():
        raise MeminitError(f"building the benchmark in {paths.BENCH_DIR} left no {BINARY}")
    return BINARY


def verify(size: str = "4M", bug: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(build()), "verify", "--size", size] + (["--bug", bug] if bug else [])
    return proc.run(cmd, check=False)


def parse_line(line: str) -> tuple[str, dict] | None:
    """One line of meminit-bench output -> (type, fields); None for other lines.

    'sample k=v ...' and 'info k=v' carry key=value tokens; in 'skip' lines the
    value of reason= runs to the end of the line.
    """
    line = line.rstrip("\n")
    head, _, rest = line.partition(" ")
    if head not in ("sample", "info", "skip"):
        return None
    fields: dict = {}
    if head == "skip" and "reason=" in rest:
        rest, _, reason = rest.partition("reason=")
        fields["reason"] = reason.strip()
    for token in rest.split():
        key, eq, value = token.partition("=")
        if not eq:
            raise MeminitError(f"malformed benchmark output token {token!r} in line {line!r}")
        fields[key] = int(value) if value.lstrip("-").isdigit() else value
    if head == "sample":
        for key in ("ns", "bytes"):
            if not isinstance(fields.get(key), int):
                raise MeminitError(f"benchmark sample without integer {key}=: {line!r}")
        if fields["ns"] <= 0:
            raise MeminitError(f"benchmark sample with non-positive time: {line!r}")
    return head, fields


@dataclass
class Output:
    samples: list[dict] = field(default_factory=list)
    skips: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)


def parse_output(text: str) -> Output:
    out = Output()
    for line in text.splitlines():
        parsed = parse_line(line)
        if parsed is None:
            continue
        kind, fields = parsed
        if kind == "sample":
            out.samples.append(fields)
        elif kind == "skip":
            out.skips.append(fields)
        else:
            out.info.update(fields)
    return out



def gbps(sample: dict) -> float:
    return sample["bytes"] / sample["ns"]  # bytes per ns == GB/s
