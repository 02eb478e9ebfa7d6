"""forkbench (bench/fork/forkbench.c): forks/s of a process with N extra VMAs (issue 8).

A process maps N extra VMAs and forks/reaps children for a fixed time: Linux 6.8+
duplicates its maple tree with __mt_dup(). It runs in the guest (the fork scenario)
and, with maple-bench, on the host. This module builds it, writes its command line,
reads its JSON lines and renders them.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
from pathlib import Path
from typing import Any

from meminit.core import deps, paths, plotting, proc
from meminit.core.errors import MeminitError
from meminit.core.stats import median_range, spread_pct
from meminit.core.tables import fixed_point, render_markdown

DEFAULT_COUNTS = (21, 221, 1621, 12821, 51221)
FORK_DIR = paths.BENCH_DIR / "fork"
FORK_BUILD = paths.WORK / "fork-build"
# Debian package -> a file it installs (same convention as meminit.core.deps).
FORKBENCH_DEPS = {
    "build-essential": "/usr/bin/gcc",
    "make": "/usr/bin/make",
}


def json_lines(output: str, kind: str) -> list[dict]:
    """JSON objects of one kind, wherever they sit in noisy (console) output."""
    found = []
    marker = f'{{"kind": "{kind}"'
    for raw in output.splitlines():
        start = raw.find(marker)
        if start < 0:
            continue
        try:
            found.append(json.loads(raw[start:].strip()))
        except json.JSONDecodeError as exc:
            raise MeminitError(f"{kind}: unreadable line {raw.strip()!r}: {exc}") from exc
    return found



def build_forkbench() -> Path:
    """Compile bench/fork/forkbench.c into work/fork-build/ and return the binary."""
    deps.ensure(FORKBENCH_DEPS)
    proc.run(["make", "-s", "-C", str(FORK_DIR), "forkbench", f"BUILD={FORK_BUILD}"],
             "building forkbench")
    binary = FORK_BUILD / "forkbench"
    if not os.access(binary, os.X_OK):
        raise MeminitError(f"building forkbench produced no executable {binary}")
    return binary


def forkbench_command(binary: Path | str, vma_counts, seconds: float, reps: int = 1) -> str:
    """Shell command that runs forkbench for these N values (one JSON line per rep and N)."""
    counts = [int(n) for n in vma_counts]
    if not counts or any(n <= 0 for n in counts):
        raise MeminitError(f"forkbench: VMA counts must be positive integers, got {vma_counts!r}")
    if not seconds > 0:
        raise MeminitError(f"forkbench: duration must be > 0 s, got {seconds!r}")
    if reps < 1:
        raise MeminitError(f"forkbench: repetitions must be >= 1, got {reps!r}")
    return shlex.join([str(binary), "-n", ",".join(map(str, counts)),
                       "-t", f"{seconds:g}", "-r", str(reps)])


def parse_forkbench(output: str) -> list[dict]:
    """The forkbench rows of an output (console noise is skipped); fail on an error row."""
    rows = json_lines(output, "forkbench")
    for row in rows:
        if "error" in row:
            raise MeminitError(f"forkbench failed at N={row.get('vmas')}: {row['error']}")
        for key in ("vmas", "forks", "seconds", "forks_per_sec"):
            if key not in row:
                raise MeminitError(f"forkbench: row without {key!r}: {row}")
        if row["forks"] <= 0:
            raise MeminitError(f"forkbench: no fork completed at N={row['vmas']}")
        if "maps_during" in row and row["maps_during"] - row["maps_before"] != row["vmas"]:
            raise MeminitError(
                f"forkbench: VMA count rose by {row['maps_during'] - row['maps_before']},"
                f" expected {row['vmas']}")
    if not rows:
        raise MeminitError("forkbench: no result line in the output")
    return rows


def summarize_forks(rows: list[dict]) -> list[dict]:
    """Per N: median / min / max forks per second over the repetitions, ratio to the smallest N."""
    by_n: dict[int, list[dict]] = {}
    for row in rows:
        by_n.setdefault(int(row["vmas"]), []).append(row)
    out: list[dict[str, Any]] = []
    for n in sorted(by_n):
        fps = [float(r["forks_per_sec"]) for r in by_n[n]]
        med, lo, hi = median_range(fps)
        calls = [float(r["fork_call_us"]) for r in by_n[n] if "fork_call_us" in r]
        out.append({
            "vmas": n, "reps": len(fps), "forks_per_sec_median": med,
            "forks_per_sec_min": lo, "forks_per_sec_max": hi, "spread_pct": spread_pct(fps),
            "fork_call_us_median": statistics.median(calls) if calls else None,
        })
    if out:
        base = out[0]["forks_per_sec_median"]
        for item in out:
            item["rel_to_first"] = item["forks_per_sec_median"] / base if base else None
    return out


def fork_table(rows: list[dict]) -> str:
    """Markdown table: forks/s per N (median, range), fork() time, ratio to the smallest N."""
    summary = summarize_forks(rows)
    if not summary:
        return "(no forkbench rows)"
    first = summary[0]["vmas"]
    header = ["VMAs", "reps", "forks/s (median)", "min–max", "spread", "fork() µs",
              f"vs N={first}", "vs previous N"]
    lines = []
    prev = None
    for s in summary:
        call = s["fork_call_us_median"]
        lines.append([
            str(s["vmas"]), str(s["reps"]), fixed_point(s["forks_per_sec_median"]),
            f"{fixed_point(s['forks_per_sec_min'])}–{fixed_point(s['forks_per_sec_max'])}",
            f"{s['spread_pct']:.0f} %", fixed_point(call) if call is not None else "–",
            f"{s['rel_to_first']:.3f}×",
            f"{s['forks_per_sec_median'] / prev:.3f}×" if prev else "–",
        ])
        prev = s["forks_per_sec_median"]
    return render_markdown(header, lines)


def plot_forks(runs: dict[str, list[dict]], out: Path, title: str = "") -> None:
    """PNG of forks/s against N (median, min–max), one line per label (kernel, host...)."""
    plt = plotting.pyplot()
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(10.4, 4.4))
    for label, rows in runs.items():
        summary = summarize_forks(rows)
        if not summary:
            continue
        x = [s["vmas"] for s in summary]
        y = [s["forks_per_sec_median"] for s in summary]
        err = [[s["forks_per_sec_median"] - s["forks_per_sec_min"] for s in summary],
               [s["forks_per_sec_max"] - s["forks_per_sec_median"] for s in summary]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
        rel.plot(x, [s["rel_to_first"] for s in summary], marker="o", label=label)
    for a in (ax, rel):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("extra VMAs in the parent")
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    ax.set_ylabel("forks/s (fork + exit + wait; median, min–max)")
    rel.set_ylabel("forks/s relative to the smallest N")
    ax.set_title("Fork rate")
    rel.set_title("Cost of VMAs")
    if title:
        fig.suptitle(title, fontsize=9)
    plotting.save(fig, out, dpi=110)
