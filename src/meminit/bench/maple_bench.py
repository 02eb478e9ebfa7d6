"""`meminit maple-bench` (commands/maple_bench.py): fork's maple-tree copy on the host (issue 8): the kernel's harness
(BENCH_FORK), __mt_dup() against re-inserting (maple_harness), and optionally forkbench on
the host kernel; results/maple-<UTC stamp>/result.json and maple.png.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from meminit.bench import forkbench, maple_harness
from meminit.core import hostinfo, proc, results
from meminit.core.errors import MeminitError
from meminit.core.stats import median_range
from meminit.core.tables import fixed_point


@dataclass(frozen=True)
class MapleBenchRequest:
    """What `meminit maple-bench` was asked: the tree sizes N, interleaved repetitions, the
    least timed seconds per sample, unmapped pages between the ranges, seconds of forkbench
    per N and rep on the host (0: none), and the result directory (None: results/maple-<UTC>)."""

    counts: list[int] = field(default_factory=lambda: list(forkbench.DEFAULT_COUNTS))
    reps: int = 3
    min_seconds: float = 0.2
    gap_pages: int = 0
    fork_seconds: float = 1.0
    out: Path | None = None


def run(req: MapleBenchRequest) -> int:
    counts = req.counts
    if req.reps < 1:
        raise MeminitError("--reps must be at least 1")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    loads = {"start": hostinfo.loadavg()}

    harness, ours = maple_harness.build_maple()
    origin = (maple_harness.MAPLE_SRC / maple_harness.EXPORT_STAMP).read_text().splitlines()[0]
    print(f"meminit: 6.12 maple tree from {origin}; load {loads['start']}", file=sys.stderr)
    out_dir = req.out or results.new_run_dir("maple")

    # 1. the kernel's own fork benchmark, repeated
    params = maple_harness.harness_bench_params()
    runs = []
    for _ in range(req.reps):
        runs.append(maple_harness.run_harness_bench(harness))
    secs = [r["seconds"] for r in runs]
    med, lo, hi = median_range(secs)
    harness_result = {
        "binary": str(harness), "cflags": "-O2 -DBENCH_FORK (no sanitizers)",
        "what": "bench_forking(): per dup, __mt_dup + in-place store of every entry"
                " + mt_validate + destroy", **params,
        "runs": runs, "seconds_median": med, "seconds_min": lo, "seconds_max": hi,
        "us_per_dup_median": med / params["dups"] * 1e6,
    }
    loads["after_harness"] = hostinfo.loadavg()

    # 2. our comparison: __mt_dup vs rebuilding
    cmd = [str(ours), "-n", ",".join(map(str, counts)), "-r", str(req.reps),
           "-t", f"{req.min_seconds:g}", "-g", str(req.gap_pages)]
    print(f"meminit: {shlex.join(cmd)}", file=sys.stderr, flush=True)
    copies = proc.run(cmd, timeout=3600, check=False)
    try:
        rows = maple_harness.parse_maple_dup(copies.stdout)
    except MeminitError as exc:
        raise MeminitError(f"{exc}\n(exit {copies.returncode}; stderr: "
                           f"{copies.stderr.strip()[-500:] or 'empty'})") from exc
    if copies.returncode != 0:
        raise MeminitError(f"maple_dup_vs_insert exited {copies.returncode}: "
                           f"{copies.stderr.strip()[-500:]}")
    loads["after_maple_copy"] = hostinfo.loadavg()

    # 3. optional: forkbench on the host kernel
    fork_result: dict | None = None
    if req.fork_seconds > 0:
        binary = forkbench.build_forkbench()
        fcmd = forkbench.forkbench_command(binary, counts, req.fork_seconds, req.reps)
        print(f"meminit: {fcmd}", file=sys.stderr, flush=True)
        fproc = proc.run(shlex.split(fcmd), timeout=3600, check=False)
        frows = forkbench.parse_forkbench(fproc.stdout)
        if fproc.returncode != 0:
            raise MeminitError(f"forkbench exited {fproc.returncode}")
        fork_result = {"command": fcmd, "rows": frows, "summary": forkbench.summarize_forks(frows)}
        loads["after_forkbench"] = hostinfo.loadavg()
    loads["end"] = hostinfo.loadavg()

    result = {
        "kind": "maple-bench", "timestamp": stamp,
        "host": {"kernel": platform.release(), "cpu": hostinfo.cpu_model(), "cpus": os.cpu_count()},
        "loadavg": loads,
        "note": "2 shared cores with other builds running: figures are indicative;"
                " compare ratios within one run, not absolute times across runs",
        "source": origin, "counts": counts, "reps": req.reps,
        "harness_bench_fork": harness_result,
        "maple_copy": {"command": shlex.join(cmd), "methods": maple_harness.METHOD_HELP,
                       "gap_pages": req.gap_pages, "min_seconds": req.min_seconds,
                       "rows": rows, "summary": maple_harness.summarize_maple(rows)},
        "forkbench_host": fork_result,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    results.write_json(out_dir, result)
    maple_harness.plot(result, out_dir / "maple.png")

    print(f"\nKernel harness, tools/testing/radix-tree maple with BENCH_FORK "
          f"({params['dups']} dups of a {params['entries']}-entry tree, {req.reps} runs): "
          f"{fixed_point(med)} s median ({fixed_point(lo)}–{fixed_point(hi)}), "
          f"{fixed_point(harness_result['us_per_dup_median'])} µs per dup incl. mt_validate")
    print(f"\n__mt_dup() vs rebuilding, µs per copy, median (min–max) of {req.reps}"
          f" interleaved reps; ratio per rep:")
    print(maple_harness.maple_table(rows))
    if fork_result:
        print(f"\nforkbench on the host kernel {platform.release()}, "
              f"{req.fork_seconds:g} s per N and rep:")
        print(forkbench.fork_table(fork_result["rows"]))
    print(f"\nload average: start {loads['start']} / end {loads['end']}")
    print(f"results: {out_dir / 'result.json'}, {out_dir / 'maple.png'}")
    return 0
