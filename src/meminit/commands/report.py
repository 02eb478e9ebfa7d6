"""`meminit report RUN [RUN...]`: render a run's table and plots again from its result.json.

Given several runs of one machine (a `measure` on the base kernel, then one on the
series kernel), it merges them into one table, so the series is compared with the base
as in a `run`, and writes the merged result.json and plot to a new results/report-*.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meminit import scenarios
from meminit.core import results
from meminit.core.errors import MeminitError

# What must be equal for runs' timings to be compared: the machine, and the guest or device.
SAME_ON_HOST = ("host_cpu", "accel", "host_cpus", "device", "init_threads")
SAME_IN_GUESTS = ("host_cpu", "accel", "guest_cpus", "guest_memory", "pmem_size", "init_threads",
                  "source_version")


def merge(runs: list[tuple[Path, dict]]) -> dict:
    """One result of several memmap runs of one machine and device; each kernel from one run."""
    first_dir, first = runs[0]
    for run_dir, result in runs:
        if result.get("kind") != "memmap":
            raise MeminitError(f"{run_dir}: only memmap runs merge; this one is {result.get('kind')!r}")
        if "host_cpu" not in result:
            raise MeminitError(f"{run_dir} does not name its host CPU (a run from before 2026-11-24), "
                               "so it cannot be told to come from the same machine")
        for key in SAME_ON_HOST if first.get("accel") == "host" else SAME_IN_GUESTS:
            if result.get(key) != first.get(key):
                raise MeminitError(f"{run_dir} has {key} {result.get(key)!r}, {first_dir} {first.get(key)!r}: "
                                   "only runs of one machine under the same conditions are compared")
    merged = {**first, "kernels": {}, "scenarios": [], "merged_from": [str(d) for d, _ in runs]}
    by_name: dict[str, dict] = {}
    for run_dir, result in runs:
        clash = set(merged["kernels"]) & set(result["kernels"])
        if clash:
            raise MeminitError(f"{run_dir} has kernel {', '.join(sorted(clash))} again: "
                               "merge one run per kernel (e.g. a base run and a series run)")
        merged["kernels"].update(result["kernels"])
        for entry in result["scenarios"]:
            if entry.get("kind", "memmap") != "memmap":
                raise MeminitError(f"{run_dir}: only memmap scenarios merge, not {entry['name']}")
            if entry["name"] not in by_name:
                by_name[entry["name"]] = {**entry, "groups": []}
                merged["scenarios"].append(by_name[entry["name"]])
            by_name[entry["name"]]["groups"] += entry["groups"]
    return merged


def _cmd_report(args: argparse.Namespace) -> int:
    runs = [results.load_json(run) for run in args.run]
    if len(runs) == 1:
        run_dir, result = runs[0]
        if result.get("kind") != "memmap":
            raise MeminitError(f"{run_dir}: 'meminit report' renders scenario runs; this one is "
                               f"{result.get('kind')!r}")
    else:
        result = merge(runs)
        run_dir = results.new_run_dir("report")
        results.write_json(run_dir, result)
        print(f"merged: {run_dir / results.RESULT_FILE}", file=sys.stderr)
    print(scenarios.render(result))
    for png in scenarios.plot(result, run_dir):
        print(f"plot: {png}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="re-render the table and plot of a results/<run>, or merge "
                                      "runs of one machine (a base and a series measure) into one")
    p.add_argument("run", nargs="+", help="run directory or its name under results/")
    p.set_defaults(func=_cmd_report)
