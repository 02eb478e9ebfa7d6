"""`bench-results backends`: the two x86 streaming backends side by side in every recorded run
that timed both (docs/series.md, step 4): MOVNTDQ of whole lines in an FPU section (the
core's patch 6) against MOVNTI, 8-byte stores of general registers (memcpy_flushcache(),
what the mm tree's queued memcpy_nontemporal() is on x86).

Per run, over its one-thread configurations (the core makes no others): the time-weighted
ratio, MOVNTI's total time over MOVNTDQ's (each configuration's time its size over its
median rate), and the configuration where MOVNTI is furthest behind, paired per repetition
where the run kept them (medians otherwise)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from meminit.bench import bench_stats, recorded_runs, replay_runs, stream_rules
from meminit.core import tables, units

WHOLE_LINES, EIGHT_BYTES = bench_stats.STREAMING, stream_rules.MOVNTI


@dataclass(frozen=True)
class Comparison:
    run: str
    cpu: str
    configs: int
    total: float  # MOVNTI's total time over MOVNTDQ's
    worst: float  # the largest of the configurations' paired time ratios
    worst_config: str


def compare(run: recorded_runs.RecordedRun) -> Comparison | None:
    """The run's comparison, None if it did not time both backends on one thread."""
    idx = replay_runs.configurations(run.rows)
    keys = [key[1:] for key in idx if key[0] == WHOLE_LINES and key[4] == 1 and (EIGHT_BYTES, *key[1:]) in idx]
    if not keys:
        return None
    time_ms = {k: k[2] / (idx[(WHOLE_LINES, *k)]["median"] * 1e6) for k in keys}
    # each configuration's MOVNTI time over MOVNTDQ's: MOVNTDQ's rate over MOVNTI's, paired
    over = {k: statistics.median(bench_stats.paired_ratios(idx[(WHOLE_LINES, *k)], idx[(EIGHT_BYTES, *k)]))
            for k in keys}
    total = sum(time_ms[k] * over[k] for k in keys) / sum(time_ms.values())
    worst = max(keys, key=lambda k: over[k])
    layout, dest, size, _ = worst
    return Comparison(run.name, run.cpu, len(keys), total, over[worst], f"{layout} {dest} {units.format_size(size)}")


def report(runs: list[recorded_runs.RecordedRun]) -> str:
    found = [c for c in map(compare, runs) if c is not None]
    if not found:
        return "no recorded run timed both movntdq and movnti on one thread"
    rows = [[stream_rules.cpu_label(c.cpu), c.run.rsplit("/", 1)[-1], str(c.configs), f"{c.total:.3f}",
             f"{c.worst:.2f} ({c.worst_config})"] for c in found]
    return (f"MOVNTI (memcpy_flushcache()) against MOVNTDQ (patch 6), one thread: {EIGHT_BYTES}'s total time "
            f"over {WHOLE_LINES}'s, time-weighted over the run's configurations, and the configuration where "
            f"it is furthest behind (paired per repetition)\n"
            + tables.render_table(["CPU", "run", "configs", "total", "worst"], rows))
