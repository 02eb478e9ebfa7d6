"""The learning `auto` replayed over a recorded run's summary rows (issue 33): which
configurations the replay judges, with which of the sweep's probes, and auto_replay's verdict
on each (`bench-results replay`)."""

from __future__ import annotations

from meminit.bench import auto_replay, bench_stats
from meminit.bench.memmap_layouts import LAYOUTS


def configurations(rows: list[dict]) -> dict[tuple, dict]:
    """A run's fill rows of the main section by (strategy, layout, dest, size, threads), the
    chunked split where a case ran in both."""
    idx: dict[tuple, dict] = {}
    for r in rows:
        if r.get("kind", "fill") != "fill" or r.get("section", "") not in ("", "main"):
            continue
        key = (r["strategy"], r["layout"], r["dest"], r["size"], r["threads"])
        if key not in idx or r.get("split") == "chunked":
            idx[key] = r
    return idx


# what auto's rows carry of its probes: their sums and every logged round
PROBE_FIELDS = ("probe_tmpl_ns", "probe_stream_ns", "probe_records", "rounds_by_rep")
NOT_JUDGED = "not judged"
# what the replay takes from the sweep's own auto where one verdict cannot replay its rounds
LIVE_FIELDS = ("by_rep", "streamed_share")


def _capped_walk(policy: auto_replay.Policy, dest: str, size: int, llc_bytes: int | None) -> bool:
    """A walked range whose rounds read their pieces back (within half the LLC) where the
    policy's walk_max says they would not."""
    return dest == "walked" and policy.walk_max > 0 and llc_bytes is not None and \
        policy.walk_max < size <= llc_bytes // 2


def replay_rows(policy: auto_replay.Policy, rows: list[dict], llc_bytes: int | None = None,
                probes_usable: bool = True, own_rule: bool = True) -> list[dict]:
    """Every configuration of a run's summary rows that has template and streaming (main section,
    the chunked split where a case ran in both) in a destination state of the kernel's callers.
    probes_usable False (the run's rounds timed other pieces or another order than the
    policy's): a configuration whose auto kept probes is NOT_JUDGED, its figures as assumed.
    own_rule False (the run's auto timed spans the policy does not, or the other way round):
    its own auto cannot stand in for the policy where the probes' sums tie."""
    idx = {key: r for key, r in configurations(rows).items() if r["dest"] in auto_replay.JUDGED_DESTS}
    out = []
    for (strat, layout, dest, size, threads), t in idx.items():
        if strat != "template" or layout not in LAYOUTS:
            continue
        s, auto = (idx.get((name, layout, dest, size, threads)) for name in (bench_stats.STREAMING, "auto"))
        foreign = stand_in = False
        if auto is not None and _capped_walk(policy, dest, size, llc_bytes):
            # the sweep's rounds read their pieces back where the policy's would not: those of the
            # just-zeroed range of the same run stand in (the walk comes after the init); the
            # sweep's own auto ran other rounds, so it cannot stand in for a tie
            warm = idx.get(("auto", layout, "warm", size, threads))
            auto = {k: v for k, v in auto.items() if k not in PROBE_FIELDS + LIVE_FIELDS}
            auto.update({k: v for k, v in (warm or {}).items() if k in PROBE_FIELDS})
            stand_in = True
        if not own_rule and auto is not None:
            auto = {k: v for k, v in auto.items() if k not in LIVE_FIELDS}
        if not probes_usable and auto is not None and any(k in auto for k in PROBE_FIELDS):
            foreign, auto = True, {k: v for k, v in auto.items() if k not in PROBE_FIELDS}
        if s:
            out.append(auto_replay.replay_cell(policy, t, s, auto, LAYOUTS[layout], llc_bytes))
            if stand_in:
                out[-1]["source"] = f"zeroed {out[-1]['source']}"
            if foreign:
                out[-1].update(source="other rounds", verdict=NOT_JUDGED)
    out.sort(key=lambda c: (c["layout"], bench_stats.dest_rank(c["dest"]), c["size"], c["threads"]))
    return out
