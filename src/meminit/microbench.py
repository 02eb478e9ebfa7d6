"""Userspace replay of the memmap-init and huge-page-clearing write patterns (issue 5).

``meminit microbench`` builds bench/ (C, see bench/README.md), runs
``bench/build/meminit-bench run`` with every strategy interleaved (ABCABC),
and writes ``results/microbench-<UTC stamp>/``: result.json (machine, load,
options, every raw sample, the summary), table.txt (what is printed) and
plot.png.  ``--verify`` runs only the correctness check (every record-fill
strategy byte-equal to the slow path, every clear strategy exact).

The pure logic (parsing the benchmark's lines, statistics, ratios, tables)
lives in plain functions so tests/test_microbench.py can check it without
running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from meminit import deps, paths
from meminit.errors import MeminitError

BUILD_DIR = paths.BENCH_DIR / "build"
BINARY = BUILD_DIR / "meminit-bench"

FILL_STRATEGIES = "slow,slow-saferet,template,movnti,movntdq,avx512nt,repmovsb,auto-altmap,auto-dram"
# the kernel's streaming backend (memcpy_nontemporal() on x86-64: 4 x MOVNTDQ per line)
STREAMING = "movntdq"
# folio_zero_user()'s unit under preempt=none/voluntary (patch 14); full preemption clears
# the whole folio (fz2M-2M, fz1G-1G)
KERNEL_COOPERATIVE_UNIT = 256 << 10
CLEAR_CASES = ("stosb-4K,stosb_desc-4K,php2M-4K,fz2M-256K,fz2M-2M,stosb-2M,stosb-32M,stosb-1G,"
               "fz1G-256K,fz1G-2M,fz1G-8M,fz1G-16M,fz1G-32M,fz1G-64M,fz1G-128M,fz1G-1G,stosq-4K,stosq-2M,stosq-32M,"
               "stosq-1G,movnti-1G,avx512nt-2M,avx512nt-1G,clzero-2M,clzero-1G,memset-1G,"
               "stosb_nz-1G,avx512nt_nz-1G")
FAULT_KINDS = "anon-4K,thp-2M,hugetlb-2M,hugetlb-1G"

# name -> (default, --quick value)
PROFILES = {
    "sizes": ("4M,16M,64M,256M,1G", "4M,64M"),
    "reps": (7, 3),
    "threads": ("1", "1"),
    "split": ("even", "even"),
    "layouts": ("o0,o9", "o0,o9"),
    "dests": ("cold,warm,readback", "cold,warm,readback"),
    "fill": (FILL_STRATEGIES, FILL_STRATEGIES),
    "clear": (CLEAR_CASES, "stosb-4K,php2M-4K,fz2M-256K,stosb-2M,stosb-32M,stosb-all,fz1G-256K,fz1G-32M,"
                           "stosq-all,avx512nt-all,clzero-all,stosb_nz-all,avx512nt_nz-all"),
    "clear_size": ("1G", "128M"),
    "fault": (FAULT_KINDS, "anon-4K,thp-2M,hugetlb-2M"),
    "fault_size": ("1G", "128M"),
    "min_bytes": ("64M", "16M"),
    # the thread-scaling section: a second, separately interleaved run
    "scale_sizes": ("1G", "256M"),
    "scale_threads": ("1,2", "1,2"),
    "scale_layouts": ("o0,o9", "o0"),
    "scale_fill": ("slow,template,movntdq", "slow,template,movntdq"),
    "chunk": ("128M", "128M"),
}

# --auto-sweep: issue 14's sweep, the learning auto against slow, template and streaming on the
# kernel's chunks, in every size, layout and cache state, on 1 and 2 threads; nothing else
AUTO_SWEEP = {"fill": f"slow,template,{STREAMING},auto", "threads": "1,2", "split": "chunked",
              "clear": "none", "fault": "none", "scale_fill": "none"}

HUGETLB_DIRS = {
    "hugetlb-2M": ("hugepages-2048kB", 2 << 20),
    "hugetlb-1G": ("hugepages-1048576kB", 1 << 30),
}
HUGEPAGES_SYSFS = Path("/sys/kernel/mm/hugepages")


# --------------------------------------------------------------------- parsing

def parse_size(text: str) -> int:
    """'16M' -> 16777216; accepts K/M/G with optional 'i'/'B', or plain bytes."""
    t = text.strip()
    mult = 1
    for suffix in ("iB", "B", "i"):
        if t.endswith(suffix) and len(t) > len(suffix) and t[-len(suffix) - 1] in "kKmMgG":
            t = t[: -len(suffix)]
            break
    if t and t[-1] in "kKmMgG":
        mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[t[-1].lower()]
        t = t[:-1]
    try:
        value = float(t)
    except ValueError:
        raise MeminitError(f"bad size {text!r} (use e.g. 16M, 1G)") from None
    if value <= 0:
        raise MeminitError(f"bad size {text!r}: must be positive")
    return int(value * mult)


def human_size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


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


# ----------------------------------------------------------------------- stats

KEY_FIELDS = ("kind", "strategy", "layout", "dest", "size", "threads", "split", "unit", "section")


def gbps(sample: dict) -> float:
    return sample["bytes"] / sample["ns"]  # bytes per ns == GB/s


def group_key(sample: dict) -> tuple:
    return tuple(sample.get(k, "") for k in KEY_FIELDS)


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
        for extra in ("chose", "chunks"):
            if extra in members[0]:
                row[extra] = members[0][extra]
        if all(isinstance(s.get("records"), int) and s["records"] for s in members):
            # the learning auto: what share of the records it streamed, over every repetition
            row["streamed_share"] = sum(s["streamed"] for s in members) / sum(s["records"] for s in members)
            row["stream_rounds"] = sum(s["stream_rounds"] for s in members)
            row["rounds"] = sum(s["rounds"] for s in members)
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
        parts.append(f"unit={human_size(row['unit'])}")
    if "size" in row:
        parts.append(human_size(row["size"]))
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
             and not r["strategy"].startswith(("slow", "auto"))]
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
    out.sort(key=lambda c: (c["layout"], _dest_rank(c["dest"])))
    return out


# issue 14's bar: auto's median at least this share of the better mode's, or within noise
AUTO_BAR = 0.97


def _half_spread(row: dict) -> float:
    return (row["max"] - row["min"]) / 2 / row["median"]


def auto_rows(rows: list[dict], info: dict | None = None) -> list[dict]:
    """`auto` against the best of template/streaming and against slow, per configuration
    (size, layout, dest, threads, split).  ratio_best: auto's own median over the best median;
    regret: the median of what auto chose over the best median (the policy's cost without
    auto's own sampling noise; only for the size rules auto-altmap/auto-dram, which choose
    once per fill); noise: the larger half spread (max-min)/2 over median of auto and of the
    best.  passes: issue 14's bar, ratio_best >= AUTO_BAR or within noise, and auto not below
    template by more than noise.  The learning `auto` reports the share of records it streamed
    (chose "S 97%")."""
    idx = _fill_index(rows)
    out = []
    for (strat, size, layout, dest, threads, split, section), r in idx.items():
        if not strat.startswith("auto"):
            continue
        k = (size, layout, dest, threads, split, section)
        cand = [idx[(c,) + k] for c in ("template", STREAMING) if (c,) + k in idx]
        if not cand:
            continue
        best = max(cand, key=lambda c: c["median"])
        tmpl = idx.get(("template",) + k)
        if "streamed_share" in r:
            chose, chosen = f"S {100 * r['streamed_share']:.0f}%", None
        else:
            chose = r.get("chose") or "?"
            chosen = idx.get((chose,) + k)
        slow = idx.get(("slow",) + k)
        noise = max(_half_spread(best), _half_spread(r))
        ratio_best = r["median"] / best["median"]
        ratio_template = r["median"] / tmpl["median"] if tmpl else None
        out.append({
            "strategy": strat, "size": size, "layout": layout, "dest": dest, "threads": threads,
            "split": split, "section": section, "chose": chose, "median": r["median"],
            "best": best["strategy"], "best_median": best["median"],
            "ratio_best": ratio_best,
            "regret": chosen["median"] / best["median"] if chosen else None,
            "noise": noise,
            "ratio_slow": r["median"] / slow["median"] if slow else None,
            "ratio_template": ratio_template,
            "passes": (ratio_best >= AUTO_BAR or ratio_best >= 1 - noise)
                      and (ratio_template is None or ratio_template >= 1 - noise),
        })
    out.sort(key=lambda a: (a["strategy"], a["layout"], _dest_rank(a["dest"]), a["size"], a["threads"]))
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


# ---------------------------------------------------------------------- tables

def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """Fixed-width text table; first column left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {row!r} does not match headers {headers!r}")
        widths = [max(w, len(c)) for w, c in zip(widths, row)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def _f(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _cpu(row: dict) -> str:
    return "-" if "cpu_share" not in row else f"{100 * row['cpu_share']:.0f}%"


def fill_tables(rows: list[dict]) -> str:
    fills = [r for r in rows if r["kind"] == "fill"]
    blocks = []
    order: list[tuple] = []
    def k(r: dict) -> tuple:
        return (r.get("section", ""), r["size"], r["layout"], r["dest"], r["threads"], r.get("split", "even"))

    for r in fills:
        if k(r) not in order:
            order.append(k(r))
    for key in sorted(order, key=lambda k: (k[0], k[1], k[2], _dest_rank(k[3]), k[4], k[5])):
        section, size, layout, dest, threads, split = key
        sel = [r for r in fills if k(r) == key]
        title = f"record fill {human_size(size)} layout={layout} dest={dest} threads={threads}"
        if split != "even" or section == "scaling":
            title += f" split={split}"
        if section == "scaling":
            title += " (scaling run)"
        table = render_table(
            ["strategy", "min GB/s", "median", "max", "x slow", "best x", "x limit", "on-cpu"],
            [[r["strategy"] + (f" ({r['chose']})" if "chose" in r else ""), _f(r["min"]), _f(r["median"]),
              _f(r["max"]), _f(r.get("x_slow"), 2, "x"),
              _f(r.get("x_slow_best"), 2, "x"), _f(r.get("x_limit"), 2, "x"), _cpu(r)] for r in sel])
        blocks.append(f"{title}\n{table}")
    return "\n\n".join(blocks)


def _dest_rank(dest: str) -> int:
    return {"cold": 0, "warm": 1, "readback": 2}.get(dest, 3)


def clear_table(rows: list[dict]) -> str:
    sel = [r for r in rows if r["kind"] == "clear"]
    if not sel:
        return ""
    size = human_size(sel[0]["size"])
    return f"clearing {size} (cold), one call per unit\n" + render_table(
        ["strategy", "unit", "min GB/s", "median", "max", "x 4K", "x 6.12", "x limit", "on-cpu"],
        [[r["strategy"], human_size(r["unit"]), _f(r["min"]), _f(r["median"]), _f(r["max"]),
          _f(r.get("x_4k"), 2, "x"), _f(r.get("x_612"), 2, "x"), _f(r.get("x_limit"), 2, "x"), _cpu(r)]
         for r in sel])


def unit_table(rows: list[dict]) -> str:
    """folio_zero_user() of the extent series on a 1 GiB folio, by unit, against 6.12's
    ascending 4 KiB loop and against the kernel's unit under cooperative preemption."""
    sel = sorted([r for r in rows if r["kind"] == "clear" and r["strategy"].startswith("fz1G-")],
                 key=lambda r: r["unit"])
    if not sel:
        return ""
    ref = next((r["median"] for r in sel if r["unit"] == KERNEL_COOPERATIVE_UNIT), None)
    return ("folio_zero_user() of a 1 GiB folio by unit (fault in the middle, cleared last)\n"
            + render_table(["unit", "min GB/s", "median", "max", "x 6.12 (4K asc)",
                            f"x {human_size(KERNEL_COOPERATIVE_UNIT)} unit"],
                           [[human_size(r["unit"]), _f(r["min"]), _f(r["median"]), _f(r["max"]),
                             _f(r.get("x_612"), 2, "x"),
                             _f(r["median"] / ref if ref else None, 2, "x")] for r in sel]))


def fault_table(rows: list[dict], skips: list[dict]) -> str:
    sel = [r for r in rows if r["kind"] == "fault"]
    lines = []
    if sel:
        lines.append(f"demand faults (write one byte per page), {human_size(sel[0]['size'])} per run\n"
                     + render_table(
                         ["mapping", "min GB/s", "median", "max", "huge pages", "x limit"],
                         [[r["strategy"], _f(r["min"]), _f(r["median"]), _f(r["max"]),
                           "-" if "huge_fraction" not in r else f"{100 * r['huge_fraction']:.0f}%",
                           _f(r.get("x_limit"), 2, "x")] for r in sel]))
    for s in skips:
        lines.append(f"skipped {s.get('kind', '?')} {s.get('strategy', '?')}: {s.get('reason', '')}")
    return "\n".join(lines)


def scaling_table(scaling: list[dict]) -> str:
    if not scaling:
        return ""
    return "thread scaling (median GB/s; each ratio within one split)\n" + render_table(
        ["strategy", "layout", "dest", "size", "split", "1 thread", "N threads", "N", "ratio"],
        [[s["strategy"], s["layout"], s["dest"], human_size(s["size"]), s.get("split", "even"),
          _f(s["gbps_1"]), _f(s["gbps_n"]), str(s["threads"]), _f(s["ratio"], 2, "x")] for s in scaling])


def crossover_table(cross: list[dict]) -> str:
    if not cross:
        return ""
    sizes = sorted({size for c in cross for size in c["ratios"]})
    return (f"streaming ({STREAMING}) over template, median, 1 thread, by memmap size; crossover = "
            "smallest size from which streaming wins at it and every larger size\n"
            + render_table(["layout", "dest"] + [human_size(x) for x in sizes] + ["crossover"],
                           [[c["layout"], c["dest"]] + [_f(c["ratios"].get(x), 2, "x") for x in sizes]
                            + [human_size(c["crossover"]) if c["crossover"] else "none"] for c in cross]))


def auto_table(autos: list[dict]) -> str:
    if not autos:
        return ""
    return ("auto against the best of template/"
            f"{STREAMING} in the same run and split (auto-altmap/auto-dram: the size rule; auto: "
            "learns on its chunks, chose = share of records streamed); bar: x best >= "
            f"{AUTO_BAR} or within noise, x template not below noise\n"
            + render_table(["policy", "layout", "dest", "size", "thr", "chose", "GB/s", "best", "best GB/s",
                            "x best", "x template", "regret", "noise", "x slow", "bar"],
                           [[a["strategy"], a["layout"], a["dest"], human_size(a["size"]), str(a["threads"]),
                             a["chose"], _f(a["median"]), a["best"], _f(a["best_median"]),
                             _f(a["ratio_best"], 2, "x"), _f(a["ratio_template"], 2, "x"),
                             _f(a["regret"], 2, "x"), _f(100 * a["noise"], 0, "%"),
                             _f(a["ratio_slow"], 2, "x"), "ok" if a["passes"] else "MISS"]
                            for a in autos]))


def auto_bar(autos: list[dict]) -> str:
    """One policy's auto_rows() against issue 14's bar: its worst case and how many passed."""
    worst = min(autos, key=lambda a: a["ratio_best"])
    misses = sum(not a["passes"] for a in autos)
    return (f"worst x best {worst['ratio_best']:.2f}x ({worst['layout']} {worst['dest']} "
            f"{human_size(worst['size'])} t{worst['threads']}, noise {100 * worst['noise']:.0f}%), "
            f"bar met in {len(autos) - misses}/{len(autos)} configurations")


def headline(rows: list[dict], limit: dict) -> str:
    """The answers the issue asks for, computed from this run."""
    out = []
    for name, what in (("zero", "zeros"), ("data", "non-zero data")):
        if limit and name in limit:
            out.append(f"limit, best store bandwidth of {what} this run: {limit[name]['gbps']:.2f} GB/s "
                       f"({limit[name]['case']})")
    sizes = sorted({r["size"] for r in rows if r["kind"] == "fill"})
    if sizes:
        big = sizes[-1]
        for layout in sorted({r["layout"] for r in rows if r["kind"] == "fill"}):
            b = best_fill(rows, big, layout)
            if b and "x_slow" in b:
                out.append(f"fastest fill, {human_size(big)} cold {layout}: {b['strategy']} t{b['threads']} "
                           f"{b['median']:.2f} GB/s = {b['x_slow']:.2f}x slow (same threads; "
                           f"best sample against best: {b['x_slow_best']:.2f}x)")
            for threads in sorted({r["threads"] for r in rows if r["kind"] == "fill"}):
                one = [r for r in rows if r["kind"] == "fill" and r.get("size") == big and r.get("layout") == layout
                       and r.get("dest") == "cold" and r.get("threads") == threads
                       and not r["strategy"].startswith("slow")]
                if one and threads != (b or {}).get("threads"):
                    c = max(one, key=lambda r: r["median"])
                    if "x_slow" in c:
                        out.append(f"  at {threads} thread(s): {c['strategy']} {c['median']:.2f} GB/s = "
                                   f"{c['x_slow']:.2f}x slow (best against best: {c['x_slow_best']:.2f}x)")
    clears = {(r["strategy"]): r for r in rows if r["kind"] == "clear"}
    for name in ("stosb-2M", "stosb-32M", "stosb-1G", "stosb-all"):
        if name in clears and "x_4k" in clears[name]:
            out.append(f"clear extent {name} over 4K pages: {clears[name]['x_4k']:.2f}x")
    for name in ("fz2M-256K", "fz2M-2M", "fz1G-256K", "fz1G-32M", "fz1G-1G"):
        if name in clears and "x_612" in clears[name]:
            out.append(f"folio_zero_user {name} over 6.12's order ({CLEAR_612[clear_folio(name)]}): "
                       f"{clears[name]['x_612']:.2f}x")
    for s in thread_scaling(rows):
        if s["strategy"] in ("slow", "template", STREAMING) and s.get("dest") == "cold":
            out.append(f"1->{s['threads']} threads {s['strategy']} {s['layout']} {human_size(s['size'])} "
                       f"split={s['split']}: {s['gbps_1']:.2f} -> {s['gbps_n']:.2f} GB/s = {s['ratio']:.2f}x")
    for c in crossover(rows):
        out.append(f"streaming crossover {c['layout']} {c['dest']}: "
                   + (human_size(c["crossover"]) if c["crossover"] else "none in the sizes run"))
    autos = auto_rows(rows)
    for pol in sorted({a["strategy"] for a in autos}):
        sel = [a for a in autos if a["strategy"] == pol]
        reg = [a for a in sel if a["regret"] is not None]
        line = f"{pol}: {auto_bar(sel)}"
        if reg:
            w = min(reg, key=lambda a: a["regret"])
            line += f", worst choice regret {w['regret']:.2f}x ({w['layout']} {w['dest']} {human_size(w['size'])})"
        slows = [a for a in sel if a["ratio_slow"] is not None]
        if slows:
            line += f", worst x slow {min(a['ratio_slow'] for a in slows):.2f}x"
        out.append(line)
    return "\n".join(out)


def render_report(result: dict) -> str:
    rows = result["summary"]
    parts = [
        f"meminit microbench  {result['date']}  {result['machine']['cpu_model']}  "
        f"kernel {result['machine']['kernel']}",
        f"load average: start {result['loadavg_start']}  end {result['loadavg_end']}  "
        f"reps={result['options']['reps']} interleaved  nice={result['options']['nice']}",
        headline(rows, result.get("limit")),
        fill_tables(rows),
        scaling_table(result.get("thread_scaling", [])),
        crossover_table(crossover(rows)),
        auto_table(auto_rows(rows)),
        clear_table(rows),
        unit_table(rows),
        fault_table(rows, result.get("skips", [])),
        "x slow: median against the slow path's median; best x: fastest sample against the slow "
        "path's fastest (the slow path is CPU-bound and suffers most from busy neighbours).  "
        "x limit: fills and *_nz probes against the non-zero-data limit, clears and faults against "
        "the zeros limit.  on-cpu = share of wall time the timing thread was on a CPU (below ~95% "
        "the sample was disturbed by other load).",
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


# --------------------------------------------------------------- machine info

def read_text(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return default


def parse_cpuinfo(text: str) -> dict:
    """Model name, family/model/stepping and flags of the first processor in /proc/cpuinfo."""
    info = {"cpu_model": "unknown", "flags": []}
    numbers = {"cpu family": "cpu_family", "model": "cpu_model_number", "stepping": "cpu_stepping"}
    for line in text.splitlines():
        if not line.strip():
            if info["flags"]:
                break
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and info["cpu_model"] == "unknown":
            info["cpu_model"] = value.strip()
        elif key == "flags" and not info["flags"]:
            info["flags"] = value.split()
        elif key in numbers and numbers[key] not in info:
            info[numbers[key]] = value.strip()
    return info


def cache_info() -> list[dict]:
    caches = []
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        caches.append({k: read_text(d / k).strip() for k in ("level", "type", "size", "shared_cpu_list")})
    return caches


def machine_info() -> dict:
    cpu = parse_cpuinfo(read_text("/proc/cpuinfo"))
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True)
    return {
        **cpu,
        "caches": cache_info(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "mem_total": next((l.split(":", 1)[1].strip() for l in read_text("/proc/meminfo").splitlines()
                           if l.startswith("MemTotal")), ""),
        "thp_enabled": read_text("/sys/kernel/mm/transparent_hugepage/enabled").strip(),
        "gcc": gcc.stdout.splitlines()[0] if gcc.returncode == 0 and gcc.stdout else "",
        "hypervisor": "hypervisor" in cpu["flags"],
    }


def loadavg() -> str:
    return " ".join(read_text("/proc/loadavg", "? ? ?").split()[:3])


# ------------------------------------------------------------------ hugetlb

def hugetlb_plan(kinds: list[str], fault_size: int) -> dict[str, int]:
    """Pages each hugetlb kind needs for one fault run."""
    plan = {}
    for kind in kinds:
        if kind in HUGETLB_DIRS:
            page = HUGETLB_DIRS[kind][1]
            plan[kind] = -(-fault_size // page)
    return plan


class HugetlbReservation:
    """Raise nr_hugepages so that enough pages are free; restore on exit."""

    def __init__(self, plan: dict[str, int], root: Path = HUGEPAGES_SYSFS):
        self.plan = plan
        self.root = root
        self.saved: dict[Path, int] = {}
        self.skipped: dict[str, str] = {}

    def __enter__(self) -> "HugetlbReservation":
        for kind, need in self.plan.items():
            d = self.root / HUGETLB_DIRS[kind][0]
            try:
                nr = int((d / "nr_hugepages").read_text())
                free = int((d / "free_hugepages").read_text())
            except (OSError, ValueError) as exc:
                self.skipped[kind] = f"no hugetlb pool for this size ({exc})"
                continue
            if free >= need:
                continue
            try:
                (d / "nr_hugepages").write_text(str(nr + need - free))
                self.saved[d] = nr
            except OSError as exc:
                self.skipped[kind] = f"cannot reserve {need} pages via {d}/nr_hugepages: {exc.strerror}"
                continue
            got = int((d / "free_hugepages").read_text())
            if got < need:
                self.skipped[kind] = (f"asked the kernel for {need} free {HUGETLB_DIRS[kind][0]} pages, "
                                      f"got {got} (not enough contiguous free memory)")
                self._restore(d)
        return self

    def _restore(self, d: Path) -> None:
        nr = self.saved.pop(d, None)
        if nr is not None:
            try:
                (d / "nr_hugepages").write_text(str(nr))
            except OSError as exc:
                print(f"meminit: warning: could not restore {d}/nr_hugepages to {nr}: {exc}", file=sys.stderr)

    def __exit__(self, *exc) -> None:
        for d in list(self.saved):
            self._restore(d)


# ---------------------------------------------------------------------- run

def build() -> Path:
    deps.ensure(deps.BENCH)
    proc = subprocess.run(["make", "-C", str(paths.BENCH_DIR), "-s"], capture_output=True, text=True)
    if proc.returncode != 0 or not BINARY.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise MeminitError(f"building the benchmark in {paths.BENCH_DIR} failed:\n{tail}")
    return BINARY


def verify(size: str = "4M", bug: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(build()), "verify", "--size", size] + (["--bug", bug] if bug else [])
    return subprocess.run(cmd, capture_output=True, text=True)


def own_session(nice: int) -> None:
    """In the benchmark child: a session (so an autogroup) of its own, and the
    requested niceness for that autogroup and the process.  With
    sched_autogroup_enabled every session competes as one group, so a plain
    nice(2) alone would not change the share against builds in other sessions."""
    os.setsid()
    if nice:
        try:
            Path("/proc/self/autogroup").write_text(str(nice))
        except OSError:
            pass  # no autogroups, or not allowed: the process niceness still applies
        os.nice(nice)


def option_values(args: argparse.Namespace) -> dict:
    idx = 1 if args.quick else 0
    preset = AUTO_SWEEP if getattr(args, "auto_sweep", False) else {}
    return {name: (getattr(args, name) if getattr(args, name) is not None else preset.get(name, prof[idx]))
            for name, prof in PROFILES.items()}


def bench_command(opts: dict, fault_kinds: list[str], movsb_block: str, pgmap_type: str,
                  auto_min: tuple[str | None, str | None] = (None, None),
                  clear_fault: str = "middle") -> list[str]:
    cmd = [str(BINARY), "run", "--sizes", opts["sizes"], "--reps", str(opts["reps"]),
           "--threads", opts["threads"], "--layouts", opts["layouts"], "--dests", opts["dests"],
           "--fill", opts["fill"] or "none", "--clear", opts["clear"] or "none",
           "--clear-size", opts["clear_size"], "--fault", ",".join(fault_kinds) or "none",
           "--fault-size", opts["fault_size"], "--min-bytes", opts["min_bytes"],
           "--movsb-block", movsb_block, "--pgmap-type", pgmap_type,
           "--split", opts.get("split") or "even", "--chunk", opts.get("chunk") or "128M",
           "--clear-fault", clear_fault]
    for flag, value in zip(("--auto-altmap-min", "--auto-dram-min"), auto_min):
        if value:
            cmd += [flag, value]
    return cmd


def scaling_command(opts: dict, movsb_block: str, pgmap_type: str,
                    auto_min: tuple[str | None, str | None] = (None, None)) -> list[str] | None:
    """The thread-scaling section: cold fills, even and chunked split, its own interleaving."""
    if not opts["scale_fill"] or opts["scale_fill"] == "none":
        return None
    sec = {**opts, "sizes": opts["scale_sizes"], "threads": opts["scale_threads"],
           "layouts": opts["scale_layouts"], "dests": "cold", "fill": opts["scale_fill"],
           "clear": "none", "split": "even,chunked"}
    return bench_command(sec, [], movsb_block, pgmap_type, auto_min)


def tag_section(out: Output, section: str) -> Output:
    for s in out.samples:
        s["section"] = section
    return out


def run(args: argparse.Namespace) -> int:
    if args.verify:
        proc = verify(args.verify_size)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise MeminitError("verify failed: a strategy does not reproduce the slow path (see FAIL lines)")
        return 0
    build()
    opts = option_values(args)
    if int(opts["reps"]) < 1:
        raise MeminitError("--reps must be at least 1")
    for s in str(opts["sizes"]).split(","):
        if parse_size(s) % 32768:
            raise MeminitError(f"fill size {s} must be a multiple of 32K (one order-9 compound of records)")
    fault_size = parse_size(opts["fault_size"])
    fault_kinds = [k for k in str(opts["fault"]).split(",") if k and k != "none"]

    from meminit import report  # noqa: PLC0415 - shared run-directory helper

    run_dir = Path(args.out) if args.out else report.new_run_dir("microbench")
    run_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = loadavg()
    print(f"meminit: microbench -> {run_dir}  (load average {load_start})", file=sys.stderr, flush=True)

    plan = hugetlb_plan(fault_kinds, fault_size)
    auto_min = (args.auto_altmap_min, args.auto_dram_min)
    started = time.monotonic()
    sections: list[tuple[str, list[str], list[str]]] = []   # (name, command, output lines)
    with HugetlbReservation(plan) as resv:
        run_kinds = [k for k in fault_kinds if k not in resv.skipped]
        cmds = [("", bench_command(opts, run_kinds, args.movsb_block, args.pgmap_type, auto_min,
                                   args.clear_fault))]
        scale = scaling_command(opts, args.movsb_block, args.pgmap_type, auto_min)
        if scale:
            cmds.append(("scaling", scale))
        for name, cmd in cmds:
            lines: list[str] = []
            sections.append((name, cmd, lines))
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                    preexec_fn=lambda: own_session(args.nice))
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    lines.append(line)
                rc = proc.wait()
            except BaseException:
                # the child runs in its own session, so Ctrl-C does not reach it:
                # stop it before the hugetlb pool is restored
                proc.kill()
                proc.wait()
                raise
            if rc != 0:
                break
    elapsed = time.monotonic() - started
    (run_dir / "raw.txt").write_text("".join(f"# section {name or 'main'}: {' '.join(cmd)}\n" + "".join(lines)
                                             for name, cmd, lines in sections))
    if rc != 0:
        raise MeminitError(f"{' '.join(cmd)} exited with {rc}; raw output in {run_dir}/raw.txt")
    load_end = loadavg()

    out = Output()
    for name, _cmd, lines in sections:
        part = parse_output("".join(lines))
        if name:
            tag_section(part, name)
        out.samples += part.samples
        out.skips += part.skips
        out.info.update({k: v for k, v in part.info.items() if k not in out.info})
    skips = out.skips + [{"kind": "fault", "strategy": k, "reason": r} for k, r in resv.skipped.items()]
    rows = summarize(out.samples)
    limit = machine_limit(rows, int(out.info.get("llc_bytes", 32 << 20)))
    add_ratios(rows, limit)
    add_clear_612(rows)
    result = {
        "date": date,
        "elapsed_s": round(elapsed, 1),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "machine": machine,
        "options": {**opts, "nice": args.nice, "movsb_block": args.movsb_block,
                    "pgmap_type": args.pgmap_type, "quick": args.quick,
                    "auto_altmap_min": args.auto_altmap_min, "auto_dram_min": args.auto_dram_min,
                    "commands": [c for _n, c, _l in sections]},
        "bench_info": out.info,
        "limit": limit,
        "summary": rows,
        "thread_scaling": thread_scaling(rows),
        "crossover": [{**c, "ratios": {human_size(k): v for k, v in c["ratios"].items()}}
                      for c in crossover(rows)],
        "auto": auto_rows(rows),
        "skips": skips,
        "samples": out.samples,
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    text = render_report(result)
    (run_dir / "table.txt").write_text(text)
    print(text)
    try:
        plot(result, run_dir / "plot.png")
    except Exception as exc:  # the numbers are already saved; a plot failure must not hide them
        print(f"meminit: warning: plot failed: {exc}", file=sys.stderr)
    print(f"results: {run_dir}  ({elapsed:.0f} s)")
    return 0


def plot(result: dict, path: Path) -> None:
    import matplotlib  # noqa: PLC0415 - heavy import only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = result["summary"]
    fills = [r for r in rows if r["kind"] == "fill" and r.get("section", "") in ("", "main")]
    sizes = sorted({r["size"] for r in fills})
    panels: list[tuple[str, list[dict]]] = []
    if fills:
        big, small = sizes[-1], sizes[0]
        for layout in sorted({r["layout"] for r in fills}):
            for dest, size in (("cold", big), ("warm", small), ("readback", small)):
                sel = [r for r in fills if r["layout"] == layout and r["dest"] == dest and r["size"] == size]
                if sel:
                    panels.append((f"fill {layout} {dest} {human_size(size)}", sel))
    clears = [r for r in rows if r["kind"] == "clear"]
    faults = [r for r in rows if r["kind"] == "fault"]
    if clears:
        panels.append((f"clear {human_size(clears[0]['size'])} cold", clears))
    if faults:
        panels.append((f"demand fault {human_size(faults[0]['size'])}", faults))
    if not panels:
        return
    ncols = 3
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 4 * nrows), squeeze=False)
    limits = result.get("limit") or {}
    for ax, (title, sel) in zip(axes.flat, panels):
        labels = [r["strategy"] + (f" t{r['threads']}" if r.get("threads", 1) != 1 else "")
                  + (f" {human_size(r['unit'])}" if r["kind"] == "clear" and r["strategy"].endswith("all") else "")
                  for r in sel]
        med = [r["median"] for r in sel]
        err = [[r["median"] - r["min"] for r in sel], [r["max"] - r["median"] for r in sel]]
        colors = ["tab:red" if r["strategy"].startswith("slow") else
                  "tab:blue" if r.get("threads", 1) == 1 else "tab:green" for r in sel]
        ax.bar(range(len(sel)), med, yerr=err, color=colors, capsize=2)
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels(labels, rotation=70, fontsize=7)
        ax.set_ylabel("GB/s (median, min-max)")
        ax.set_title(title, fontsize=9)
        limit = limit_for(sel[0], limits)
        if limit:
            ax.axhline(limit, color="gray", linestyle="--", linewidth=0.8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"meminit microbench {result['date']} - {result['machine']['cpu_model']} - load "
                 f"{result['loadavg_start']} -> {result['loadavg_end']} - dashed: limit (data for fills, zeros for clears)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "microbench",
        help="replay memmap-init and huge-page clearing write patterns on this CPU (bench/)",
        description="Build bench/ and measure record-fill and clearing strategies on the real CPU. "
                    "Defaults take about 3-4 minutes on this busy 2-vCPU machine; --quick is a <30 s smoke run.")
    p.add_argument("--quick", action="store_true", help="small sizes, 3 repetitions (<30 s smoke run)")
    p.add_argument("--auto-sweep", dest="auto_sweep", action="store_true",
                   help="issue 14's sweep: slow, template, movntdq and the learning auto on the kernel's "
                        "chunks, 1 and 2 threads, every size/layout/dest, no clears or faults (about "
                        "25 minutes with the default sizes; bench/results/ summaries come from it)")
    p.add_argument("--sizes", help="record-fill destination sizes, in bytes of memmap (default 4M,16M,64M,256M,1G; 4M is the memmap of one 256 MiB test_hmm chunk)")
    p.add_argument("--reps", type=int, help="interleaved repetitions per case (default 7)")
    p.add_argument("--threads", help="thread counts for the fills (default 1; the scaling section runs 1,2)")
    p.add_argument("--split", help="how threads share a fill: even (one run per thread), chunked "
                                   "(threads pull --chunk sized chunks from a counter); default even")
    p.add_argument("--chunk", help="chunk of the chunked split, in bytes of device memory (one 4 KiB "
                                   "page per 64-byte record; rounded up to 512 pages); default 128M")
    p.add_argument("--scale-sizes", dest="scale_sizes", help="scaling section: memmap sizes (default 1G)")
    p.add_argument("--scale-threads", dest="scale_threads", help="scaling section: thread counts (default 1,2)")
    p.add_argument("--scale-layouts", dest="scale_layouts", help="scaling section: layouts (default o0,o9)")
    p.add_argument("--scale-fill", dest="scale_fill",
                   help="scaling section: strategies, cold, even and chunked split "
                        "(default slow,template,movntdq; 'none' skips the section)")
    p.add_argument("--auto-altmap-min", dest="auto_altmap_min",
                   help="auto-altmap streams from this memmap size on (default: the LLC size)")
    p.add_argument("--auto-dram-min", dest="auto_dram_min",
                   help="auto-dram streams from this memmap size on (default: 2 x the LLC size, as the kernel)")
    p.add_argument("--layouts", help="o0 (every record a head), o9 (order-9 compounds, head data "
                                     "after the tails), o9pre (first tail pre-composed); default o0,o9")
    p.add_argument("--dests", help="cold, warm, readback (default all three)")
    p.add_argument("--fill", help=f"fill strategies (default {FILL_STRATEGIES})")
    p.add_argument("--clear", help="clear cases method-unit, e.g. stosb-4K,stosq-2M,clzero-all "
                                   "(methods: stosb stosb_desc stosq movnti avx512nt clzero memset; "
                                   "stosb_nz and avx512nt_nz store 0x5a: data-bandwidth probes)")
    p.add_argument("--clear-fault", dest="clear_fault", default="middle", choices=["first", "middle", "last"],
                   help="fault subpage of every folio for php2M/fz2M/fz1G clears (default middle)")
    p.add_argument("--clear-size", dest="clear_size", help="bytes cleared per clear sample (default 1G)")
    p.add_argument("--fault", help=f"demand-fault mappings (default {FAULT_KINDS}; 'none' to skip)")
    p.add_argument("--fault-size", dest="fault_size", help="bytes faulted per sample (default 1G)")
    p.add_argument("--min-bytes", dest="min_bytes",
                   help="timed bytes per fill sample: smaller destinations are filled several times "
                        "(each pass prepared afresh) (default 64M)")
    p.add_argument("--movsb-block", default="4K", help="replicated block for rep movsb, order 0 (default 4K)")
    p.add_argument("--pgmap-type", default="fsdax", choices=["fsdax", "private", "coherent", "generic"],
                   help="dev_pagemap type (sets the head refcount: 0 for private/coherent)")
    p.add_argument("--nice", type=int, default=0,
                   help="niceness for the benchmark's own session/autogroup (e.g. -10 on a busy "
                        "shared machine; negative values need root)")
    p.add_argument("--out", help="result directory (default results/microbench-<UTC stamp>)")
    p.add_argument("--verify", action="store_true", help="only run the correctness check")
    p.add_argument("--verify-size", default="4M", help="records size for --verify (default 4M)")
    p.set_defaults(func=run)
