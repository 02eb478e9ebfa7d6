"""What the learning auto's rounds measured, by the mode the range's other chunks were written
in when each round began (`bench-results rounds`, issue 33).

On several threads a round times its pieces while the other threads write their chunks in the
verdict of an earlier round, and on the Zen 4 VM each mode's pieces looked faster while the
others wrote in the other mode: a streaming piece beside template writers, a template piece
beside streamers (docs/series.md, "Two threads: a round sees the other threads' mode"). The
range then runs in neither mode's own company, which only rounds logged with the mode they
began under (meminit-bench since 2026-11-27 21:57 UTC) can show, on any CPU a sweep is made on.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from meminit.bench import auto_replay, auto_spans, bench_stats, replay_runs
from meminit.bench.memmap_layouts import LAYOUTS
from meminit.bench.recorded_runs import RecordedRun
from meminit.core import units

BEFORE = {-1: "none", 0: "template", 1: "streaming"}


def by_condition(policy: auto_replay.Policy, run: RecordedRun) -> list[dict]:
    """Per configuration whose sweep logged the mode each round began under: per mode (none
    yet, template, streaming) the rounds, the geometric mean of template's over streaming's
    faster piece and the share of rounds whose verdict was streaming (the policy's rules, late
    rounds included; a round's logged spans decide it where the policy takes spans), beside the
    range's own template over streaming time."""
    idx = replay_runs.configurations(run.rows)
    out = []
    for (strategy, layout, dest, size, threads), row in idx.items():
        if strategy != "auto" or not row.get("rounds_by_rep"):
            continue
        late = auto_replay.late_chunk(policy, LAYOUTS[layout], run.llc_bytes)
        groups: dict[int, list[tuple[float, bool]]] = defaultdict(list)
        for _rep, text in row["rounds_by_rep"]:
            for rnd in bench_stats.parse_rounds(text):
                t_ns, s_ns, _early = auto_replay.logged_faster_pieces(rnd)
                if rnd.before is None or not (t_ns and s_ns):
                    continue
                beside = bool(rnd.before) \
                    if auto_replay.timed_beside_others(threads, rnd.chunk) and rnd.before >= 0 else None
                won, _pairs = auto_replay.round_verdict(policy, rnd, late is not None and rnd.chunk >= late,
                                                        beside)
                if policy.span and rnd.span_tmpl_ns and rnd.span_stream_ns:
                    won = bool(auto_spans.span_streams(policy, rnd, None))
                groups[rnd.before].append((math.log(t_ns / s_ns), won))
        if not groups:
            continue
        tmpl = idx.get(("template", layout, dest, size, threads))
        stream = idx.get((bench_stats.STREAMING, layout, dest, size, threads))
        out.append({"layout": layout, "dest": dest, "size": size, "threads": threads,
                    "range_t_over_s": stream["median"] / tmpl["median"] if tmpl and stream else None,
                    "by_before": {before: {"rounds": len(v),
                                           "t_over_s": math.exp(statistics.fmean(x for x, _ in v)),
                                           "streamed": sum(w for _, w in v) / len(v)}
                                  for before, v in sorted(groups.items())}})
    out.sort(key=lambda c: (c["threads"], c["layout"], bench_stats.dest_rank(c["dest"]), c["size"]))
    return out


def report(policy: auto_replay.Policy, runs: list[RecordedRun]) -> str:
    """Per run that logged them: every configuration's rounds by the mode they began under."""
    out = []
    for run in runs:
        cells = by_condition(policy, run)
        if not cells:
            continue
        out.append(f"{run.name} ({run.cpu})")
        for c in cells:
            cols = []
            for before, name in BEFORE.items():
                g = c["by_before"].get(before)
                cols.append(f"{name}: {g['rounds']:4d} x {g['t_over_s']:.2f} {100 * g['streamed']:3.0f}%"
                            if g else f"{name}: {'-':>15}")
            rng = "-" if c["range_t_over_s"] is None else f"{c['range_t_over_s']:.2f}"
            out.append(f"  {c['layout']} {c['dest']:6} {units.format_size(c['size']):>5} t{c['threads']}  "
                       f"range T/S {rng:>4}  " + "  ".join(cols))
    if not out:
        return ("no recorded run logged the mode its rounds began under (meminit-bench before "
                "2026-11-27 21:57 UTC)\n")
    head = ("rounds by the mode the other chunks followed when each began (none yet, template, "
            "streaming): rounds x geometric mean of template's over streaming's faster piece, and "
            "the share of them that chose streaming; range T/S: template's time over streaming's "
            "over the whole range\n")
    return head + "\n".join(out) + "\n"
