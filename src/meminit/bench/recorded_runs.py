"""The sweeps on file that `bench-results replay` replays the learning auto over
(auto_replay): microbench runs (result.json, raw.txt) and bench/results summaries, from
this repository and from ../shared/measurements/ (runs of CPUs this machine is not)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from meminit.bench import bench_stats, benchbin
from meminit.core import paths, units

SHARED_MEASUREMENTS = paths.REPO.parent / "shared" / "measurements"
RESULTS_DIR = paths.BENCH_DIR / "results"


@dataclass
class RecordedRun:
    name: str
    cpu: str
    rows: list[dict]
    llc_bytes: int | None = None  # None: the run did not record it
    # ranges a round's verdict served in the run (--auto-memo; 0: every range learned)
    auto_memo: int = 0
    # the order of the pieces its auto's rounds timed (--auto-order; None: not recorded)
    round_order: str | None = None
    # struct pages of the spans its auto timed for the ties (--auto-span; 0: none, patch 11's rule)
    auto_span: int = 0

    def probes_judge(self, order: str) -> bool:
        """Whether its probes can judge a policy whose rounds time their pieces in `order`:
        only if its own did (a run that did not record its order cannot say)."""
        return self.round_order == order


def _llc_from_caches(caches: list[dict]) -> int | None:
    """The last level's size from a machine's cache list (sysfs sizes such as '32768K')."""
    levels = [c for c in caches if c.get("type") != "Instruction"]
    if not levels:
        return None
    top = max(levels, key=lambda c: int(c["level"]))
    return units.parse_size(top["size"])


def _llc_from_info(info: dict) -> int | None:
    """The LLC size the bench printed ('info llc_bytes=...'), if it did."""
    value = info.get("llc_bytes")
    return int(value) or None if value is not None else None


def _cpu(machine: dict) -> str:
    fm = f" family {machine.get('cpu_family') or machine.get('family')} model " \
         f"{machine.get('cpu_model_number') or machine.get('model')}"
    return f"{machine.get('cpu_model', '?')}{fm if 'None' not in fm else ''}"


def load_run(path: Path) -> RecordedRun | None:
    """A recorded sweep: a microbench result.json (its samples re-summarised, so that the
    repetitions pair), a raw.txt of samples, or a bench/results summary (medians only)."""
    if path.is_dir():
        for name in ("result.json", "raw.txt"):
            if (path / name).exists():
                return load_run(path / name)
        return None
    if path.name == "raw.txt":
        out = benchbin.parse_output(path.read_text())
        table = path.with_name("table.txt")
        head = table.read_text().splitlines()[0] if table.exists() else ""
        cpu = head.split("  ")[2] if head.count("  ") >= 2 else "?"
        return RecordedRun(str(path.parent), cpu, bench_stats.summarize(out.samples),
                           _llc_from_info(out.info), round_order=out.info.get("auto_order"))
    data = json.loads(path.read_text())
    if "samples" in data:
        llc = _llc_from_info(data.get("bench_info", {})) or _llc_from_caches(data["machine"].get("caches", []))
        options = data.get("options", {})
        return RecordedRun(str(path.parent), _cpu(data["machine"]), bench_stats.summarize(data["samples"]), llc,
                           options.get("auto_memo", 0),
                           options.get("auto_order") or data.get("bench_info", {}).get("auto_order"),
                           options.get("auto_span", 0))
    if "rows" in data:
        return RecordedRun(str(path), _cpu(data), [{"kind": "fill", **r} for r in data["rows"]],
                           _llc_from_caches(data.get("caches", [])), data.get("auto_memo", 0),
                           data.get("round_order"), data.get("auto_span", 0))
    return None


def recorded_runs(extra: list[Path] | None = None) -> list[RecordedRun]:
    """bench/results/ and ../shared/measurements/ (when there), and any run named."""
    found = sorted(RESULTS_DIR.glob("*.json"))
    if SHARED_MEASUREMENTS.is_dir():
        found += sorted(p for p in SHARED_MEASUREMENTS.iterdir() if p.is_dir())
    runs = []
    for p in found + list(extra or []):
        run = load_run(p)
        if run is not None:
            runs.append(run)
    return runs
