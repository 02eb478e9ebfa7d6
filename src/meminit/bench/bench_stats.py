"""meminit-bench samples summarised: medians, the machine's limits, ratios, thread scaling,
the streaming crossover and the `auto` policies against issue 14's bar. Pure functions of
the parsed samples (benchbin), so tests check them without running anything.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import NamedTuple

from meminit.bench.benchbin import gbps
from meminit.core.units import format_size

# the kernel's streaming backend (memcpy_nontemporal() on x86-64: 4 x MOVNTDQ per line)
STREAMING = "movntdq"
# folio_zero_user()'s unit under preempt=none/voluntary (patch 14); full preemption clears
# the whole folio (fz2M-2M, fz1G-1G)
KERNEL_COOPERATIVE_UNIT = 256 << 10

def dest_rank(dest: str) -> int:
    """cold, warm (just zeroed), walked (just zeroed, then walked once), read back (each chunk):
    the order tables list destination states in."""
    return {"cold": 0, "warm": 1, "walked": 2, "readback": 3}.get(dest, 4)


KEY_FIELDS = ("kind", "strategy", "layout", "dest", "size", "threads", "split", "unit", "section")


def group_key(sample: dict) -> tuple:
    return tuple(sample.get(k, "") for k in KEY_FIELDS)


class Round(NamedTuple):
    """One logged round: its chunk, the lead-in's ns, the first template and streaming pieces'
    ns, the second ones (0 when the round ended after its first pair); since 2026-11-27 21:57
    UTC also the fill of the sample it ran in and the verdict the other chunks followed when it
    began (-1 none yet, 0 template, 1 streaming); None in older logs; under the bench's
    --auto-span its spans' template and streaming ns (0 where it timed none), None without."""
    chunk: int
    lead_ns: int
    tmpl0_ns: int
    stream0_ns: int
    tmpl1_ns: int
    stream1_ns: int
    fill: int | None = None
    before: int | None = None
    span_tmpl_ns: int | None = None
    span_stream_ns: int | None = None


def parse_rounds(text: str) -> list[Round]:
    """meminit-bench's probe_rounds=c:l:t:s:t:s[:f:b[:st:ss]],... of a sample."""
    out = []
    for item in text.split(","):
        fields = [int(v) for v in item.split(":")]
        if len(fields) not in (6, 8, 10) or (len(fields) >= 8 and fields[7] not in (-1, 0, 1)):
            raise ValueError(f"a probe round has six, eight or ten fields (the eighth -1, 0 or 1), "
                             f"not {item!r}")
        out.append(Round(*fields))
    return out


def summarize(samples: list[dict]) -> list[dict]:
    """One row per case: min/median/max GB/s over the repetitions, in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for s in samples:
        groups.setdefault(group_key(s), []).append(s)
    rows = []
    for key, members in groups.items():
        rates = [gbps(s) for s in members]
        row = {k: v for k, v in zip(KEY_FIELDS, key) if v != ""}
        row.update(n=len(rates), min=min(rates), median=statistics.median(rates), max=max(rates))
        cpu = [s["cpu_ns"] / s["ns"] for s in members if isinstance(s.get("cpu_ns"), int)]
        if cpu:
            row["cpu_share"] = statistics.median(cpu)
        huge = [s["huge_bytes"] / s["bytes"] for s in members if isinstance(s.get("huge_bytes"), int)]
        if huge:
            row["huge_fraction"] = min(huge)
        # per repetition (the samples are interleaved), for the paired bar of auto_rows(); the
        # on-CPU share only where it means one: cpu_ns is the calling thread's, which with
        # helpers waits for the last of them off its own work
        row["by_rep"] = [[s.get("rep", i), gbps(s),
                          s["cpu_ns"] / s["ns"] if isinstance(s.get("cpu_ns"), int) and s.get("threads", 1) == 1
                          else None] for i, s in enumerate(members)]
        for extra in ("chose", "chunks"):
            if extra in members[0]:
                row[extra] = members[0][extra]
        if all(isinstance(s.get("records"), int) and s["records"] for s in members):
            # the learning auto: what share of the records it streamed, over every repetition
            row["streamed_share"] = sum(s["streamed"] for s in members) / sum(s["records"] for s in members)
            row["stream_rounds"] = sum(s["stream_rounds"] for s in members)
            row["rounds"] = sum(s["rounds"] for s in members)
            if all(isinstance(s.get("probe_records"), int) for s in members):
                # what the probes measured: the faster piece of each mode, summed over rounds
                row["probe_tmpl_ns"] = sum(s["probe_tmpl_ns"] for s in members)
                row["probe_stream_ns"] = sum(s["probe_stream_ns"] for s in members)
                row["probe_records"] = sum(s["probe_records"] for s in members)
            # each round the learning auto ran, per repetition (the bench's probe_rounds=, kept
            # as text), where the bench logged all of them; a repetition whose ranges all ran
            # on remembered verdicts (--auto-memo) ran none and logs none
            ran = [(s.get("rep", i), s) for i, s in enumerate(members) if s["rounds"]]
            logged = [[rep, s["probe_rounds"]] for rep, s in ran if isinstance(s.get("probe_rounds"), str)]
            if logged and len(logged) == len(ran) and \
                    all(len(parse_rounds(text)) == s["rounds"] for (_, text), (_, s) in zip(logged, ran)):
                row["rounds_by_rep"] = logged
        rows.append(row)
    return rows


def is_data_probe(row: dict) -> bool:
    """Clear-family cases that store non-zero bytes (store-bandwidth probes)."""
    return row["kind"] == "clear" and row["strategy"].split("-")[0].endswith("_nz")


def machine_limit(rows: list[dict], llc_bytes: int) -> dict:
    """The best store bandwidth of the run, larger than the LLC (what memory,
    not the cache, sustains), for zeros and for data separately: on some
    machines lines of zeros are written much faster than lines of data with
    the same instruction.  'data' = best of the cold fills and the non-zero
    probes; 'zero' = best of the clearing cases."""
    big = [r for r in rows if r.get("size", 0) > llc_bytes] or rows
    zero = [r for r in big if r["kind"] == "clear" and not is_data_probe(r)]
    data = [r for r in big if is_data_probe(r) or (r["kind"] == "fill" and r.get("dest") == "cold")]
    out = {}
    for name, cands in (("zero", zero), ("data", data)):
        if cands:
            best = max(cands, key=lambda r: r["median"])
            out[name] = {"gbps": best["median"], "case": case_label(best)}
    return out


def limit_for(row: dict, limits: dict) -> float | None:
    """The limit a case is compared with: data stores for fills and probes, zeros otherwise."""
    kind = "data" if row["kind"] == "fill" or is_data_probe(row) else "zero"
    entry = limits.get(kind) or limits.get("zero") or limits.get("data")
    return entry["gbps"] if entry else None


def case_label(row: dict) -> str:
    parts = [row["kind"], row["strategy"]]
    if "layout" in row:
        parts.append(row["layout"])
    if "dest" in row:
        parts.append(row["dest"])
    if "unit" in row:
        parts.append(f"unit={format_size(row['unit'])}")
    if "size" in row:
        parts.append(format_size(row["size"]))
    parts.append(f"t{row.get('threads', 1)}")
    return " ".join(str(p) for p in parts)


def add_ratios(rows: list[dict], limits: dict) -> None:
    """x_slow for fills (median against the median of 'slow' of the same
    layout/dest/size/threads; x_slow_best: max against max),
    x_4k for clears (against 'stosb-4K' of the same size), x_limit for all
    (see limit_for)."""
    def fkey(r: dict) -> tuple:
        return (r.get("layout"), r.get("dest"), r.get("size"), r.get("threads"), r.get("split"),
                r.get("section"))

    slow = {fkey(r): r for r in rows if r["kind"] == "fill" and r["strategy"] == "slow"}
    four_k = {r.get("size"): r["median"] for r in rows
              if r["kind"] == "clear" and r["strategy"] == "stosb-4K"}
    for r in rows:
        if r["kind"] == "fill":
            base = slow.get(fkey(r))
            if base:
                r["x_slow"] = r["median"] / base["median"]
                # best against best: the least disturbed sample of each
                r["x_slow_best"] = r["max"] / base["max"]
        elif r["kind"] == "clear" and not is_data_probe(r):
            base = four_k.get(r.get("size"))
            if base:
                r["x_4k"] = r["median"] / base
        limit = limit_for(r, limits)
        if limit:
            r["x_limit"] = r["median"] / limit


def thread_scaling(rows: list[dict]) -> list[dict]:
    """median(threads=N) / median(threads=1) for every fill case run at both."""
    def key(r: dict) -> tuple:
        return (r["strategy"], r.get("layout"), r.get("dest"), r.get("size"), r.get("split"),
                r.get("section"))

    base = {key(r): r["median"] for r in rows if r["kind"] == "fill" and r.get("threads") == 1}
    out = []
    for r in rows:
        if r["kind"] != "fill" or r.get("threads") == 1:
            continue
        b = base.get(key(r))
        if b:
            out.append({"strategy": r["strategy"], "layout": r.get("layout"), "dest": r.get("dest"),
                        "size": r.get("size"), "split": r.get("split", "even"), "threads": r["threads"],
                        "gbps_1": b, "gbps_n": r["median"], "ratio": r["median"] / b})
    return out


def best_fill(rows: list[dict], size: int, layout: str, dest: str = "cold") -> dict | None:
    """The fastest non-slow strategy (by median) for one size/layout/dest, any thread count."""
    cands = [r for r in rows if r["kind"] == "fill" and r.get("size") == size
             and r.get("layout") == layout and r.get("dest") == dest
             and not r["strategy"].startswith(("slow", "auto"))
             and not r["strategy"].endswith(TWIN_SUFFIX)]
    return max(cands, key=lambda r: r["median"]) if cands else None


def _fill_index(rows: list[dict]) -> dict:
    """(strategy, size, layout, dest, threads, split, section) -> row, for fills."""
    return {(r["strategy"], r.get("size"), r.get("layout"), r.get("dest"), r.get("threads"),
             r.get("split", "even"), r.get("section", "")): r for r in rows if r["kind"] == "fill"}


def crossover(rows: list[dict], stream: str = STREAMING, plain: str = "template") -> list[dict]:
    """Per layout/dest (one thread, even split, per section): the streaming copy's median over
    the template copy's at every size, and the crossover: the smallest size from which
    streaming is at least as fast at that size and every larger one (None: never)."""
    idx = _fill_index(rows)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for (strat, size, layout, dest, threads, split, section) in idx:
        if strat == plain and threads == 1 and split == "even" and section in ("", "main") \
                and (stream, size, layout, dest, threads, split, section) in idx:
            groups[(layout, dest, section)].append(size)
    out = []
    for (layout, dest, section), sizes in groups.items():
        sizes.sort()
        ratios = {}
        for size in sizes:
            p = idx[(plain, size, layout, dest, 1, "even", section)]
            st = idx[(stream, size, layout, dest, 1, "even", section)]
            ratios[size] = st["median"] / p["median"]
        cross = None
        for size in reversed(sizes):
            if ratios[size] >= 1.0:
                cross = size
            else:
                break
        out.append({"layout": layout, "dest": dest, "section": section, "ratios": ratios,
                    "crossover": cross})
    out.sort(key=lambda c: (c["layout"], dest_rank(c["dest"])))
    return out


# issue 33's bar: per interleaved repetition, auto's rate over the better mode's (the mode with
# the better median); the median of those pairs at least AUTO_BAR, or "within noise" when the
# 6th of 7 sorted pairs is (noise_pair()); samples below MIN_ON_CPU are dropped
AUTO_BAR = 0.97
MIN_ON_CPU = 0.95


def rates_by_rep(row: dict) -> dict:
    """rep -> GB/s of the samples that ran at least MIN_ON_CPU on a CPU (all of them where the
    run did not record CPU time); a row without repetitions (a transcribed summary) is its median."""
    reps = row.get("by_rep")
    if not reps:
        return {None: row["median"]}
    return {rep: rate for rep, rate, cpu in reps if cpu is None or cpu >= MIN_ON_CPU}


def paired_ratios(row: dict, ref: dict) -> list[float]:
    """row's rate over ref's, repetition by repetition (the samples of one repetition ran side
    by side), sorted; summaries without repetitions give their medians' ratio."""
    a, b = rates_by_rep(row), rates_by_rep(ref)
    if None in a or None in b:
        return [row["median"] / ref["median"]]
    return sorted(a[k] / b[k] for k in a.keys() & b.keys())


def noise_pair(pairs: list[float]) -> float | None:
    """The pair the noise verdict looks at: the one with ceil(2n/7), and at least two, of the n
    sorted pairs at or above it (the 6th of 7, the second best of 3 to 6, the 11th of 14
    and of 15), so that more repetitions, or fewer after dropping disturbed ones, never ask
    fewer of them to reach the bar than 2 of 7; None under three."""
    n = len(pairs)
    if n < 3:
        return None
    return pairs[n - max(2, -(-2 * n // 7))]


def bar_verdict(pairs: list[float]) -> str:
    """'ok' (median of the sorted pairs >= AUTO_BAR), 'noise' (below, but noise_pair() is at
    or above it) or 'MISS'; 'MISS' too when no pair is left."""
    if not pairs:
        return "MISS"
    if statistics.median(pairs) >= AUTO_BAR:
        return "ok"
    noisy = noise_pair(pairs)
    return "noise" if noisy is not None and noisy >= AUTO_BAR else "MISS"


# patch 10's MEMMAP_INIT_MT_MIN_STRUCT_PAGES: a range that writes fewer struct pages stays on
# the calling thread unless memmap_init_threads forces a count
KERNEL_MT_MIN_RECORDS = 262144
RECORD_BYTES = 64  # one struct page


def forced_split(size: int, threads: int) -> bool:
    """A split of `size` bytes of memmap across `threads` that the kernel makes only when
    memmap_init_threads forces it."""
    return threads > 1 and size // RECORD_BYTES < KERNEL_MT_MIN_RECORDS


# the bench's twins (fill_run.c): template's and the streaming copy's code under a second name
TWIN_SUFFIX = "-twin"
# auto_rows()'s pseudo-policy: in each configuration, the twin of the better mode against that
# mode, what a zero-cost oracle scores; its misses are the bar's own noise in the sweep
BEST_TWIN = "best-twin"


def auto_rows(rows: list[dict], info: dict | None = None) -> list[dict]:
    """`auto` against the better of template/streaming (by median) and against slow, per
    configuration (size, layout, dest, threads, split).  ratio_best: the median of the paired
    ratios auto/best (paired_ratios()); regret: the median of what auto chose over the best
    median (the size rules auto-altmap/auto-dram only, which choose once per fill); noise: the
    spread of the pairs (noise_pair() over median, minus one).  verdict: bar_verdict() against
    the best and against template; passes when neither is 'MISS'.  The learning `auto`
    reports the share of records it streamed (chose "S 97%") and what its probes measured.
    Where the run has the twins (TWIN_SUFFIX), BEST_TWIN rows pair the better mode's twin with
    it: what a policy that always chose right at no cost would score, the bar's own noise."""
    idx = _fill_index(rows)
    out = []
    policies = [(strat, k, r) for (strat, *k), r in idx.items() if strat.startswith("auto")]
    for (strat, *k), r in idx.items():
        mode = idx.get((STREAMING,) + tuple(k))
        if strat == "template" and mode:
            better = max((r, mode), key=lambda c: c["median"])
            twin = idx.get((better["strategy"] + TWIN_SUFFIX,) + tuple(k))
            if twin:
                policies.append((BEST_TWIN, k, twin))
    for strat, (size, layout, dest, threads, split, section), r in policies:
        k = (size, layout, dest, threads, split, section)
        cand = [idx[(c,) + k] for c in ("template", STREAMING) if (c,) + k in idx]
        if not cand:
            continue
        best = max(cand, key=lambda c: c["median"])
        tmpl = idx.get(("template",) + k)
        if strat == BEST_TWIN:
            chose, chosen = f"= {best['strategy']}", None
        elif "streamed_share" in r:
            chose, chosen = f"S {100 * r['streamed_share']:.0f}%", None
        else:
            chose = r.get("chose") or "?"
            chosen = idx.get((chose,) + k)
        slow = idx.get(("slow",) + k)
        pairs = paired_ratios(r, best)
        ratio_best = statistics.median(pairs) if pairs else 0.0
        pairs_t = paired_ratios(r, tmpl) if tmpl else []
        verdict = bar_verdict(pairs)
        verdict_t = bar_verdict(pairs_t) if tmpl else "ok"
        probe = None
        if r.get("probe_stream_ns"):
            probe = r["probe_tmpl_ns"] / r["probe_stream_ns"]
        out.append({
            "strategy": strat, "size": size, "layout": layout, "dest": dest, "threads": threads,
            "split": split, "section": section, "chose": chose, "median": r["median"],
            "best": best["strategy"], "best_median": best["median"],
            "ratio_best": ratio_best, "pairs": len(pairs),
            "regret": chosen["median"] / best["median"] if chosen else None,
            "noise": (noisy / ratio_best - 1) if (noisy := noise_pair(pairs)) and ratio_best else 0.0,
            "ratio_slow": r["median"] / slow["median"] if slow else None,
            "ratio_template": statistics.median(pairs_t) if pairs_t else None,
            "probe_t_over_s": probe,
            "range_t_over_s": (idx[(STREAMING,) + k]["median"] / tmpl["median"]
                               if tmpl and (STREAMING,) + k in idx else None),
            "verdict": verdict if verdict_t != "MISS" else "MISS",
            "passes": verdict != "MISS" and verdict_t != "MISS",
            "forced": forced_split(size, threads),
        })
    out.sort(key=lambda a: (a["strategy"], a["layout"], dest_rank(a["dest"]), a["size"], a["threads"]))
    return out


# 6.12's order for each folio size, the baseline of the extent series' folio_zero_user()
CLEAR_612 = {"2M": "php2M-4K", "1G": "stosb-4K"}


def clear_folio(strategy: str) -> str:
    """Folio size a clearing case stands for: fz2M-*/php2M-* -> 2M; everything else
    clears the whole range as one 1 GiB folio would (6.12: clear_gigantic_page())."""
    method = strategy.rsplit("-", 1)[0]
    return "2M" if method.endswith("2M") else "1G"


def add_clear_612(rows: list[dict]) -> None:
    """x_612 for clears: median over 6.12's order for the same folio size and clear size."""
    base = {(r["strategy"], r.get("size")): r["median"] for r in rows if r["kind"] == "clear"}
    for r in rows:
        if r["kind"] == "clear" and not is_data_probe(r):
            b = base.get((CLEAR_612[clear_folio(r["strategy"])], r.get("size")))
            if b:
                r["x_612"] = r["median"] / b
