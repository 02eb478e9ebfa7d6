"""meminit-bench summaries as people read them: the tables and headline of `meminit microbench`
(table.txt) and its plot.png.
"""

from __future__ import annotations

from pathlib import Path

from meminit.core import plotting
from meminit.bench.bench_stats import (AUTO_BAR, BEST_TWIN, KERNEL_MT_MIN_RECORDS, MIN_ON_CPU, CLEAR_612, KERNEL_COOPERATIVE_UNIT, STREAMING, auto_rows,
                                 best_fill, clear_folio, crossover, dest_rank, limit_for, thread_scaling)
from meminit.core.tables import render_table
from meminit.core.units import format_size


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
    for key in sorted(order, key=lambda k: (k[0], k[1], k[2], dest_rank(k[3]), k[4], k[5])):
        section, size, layout, dest, threads, split = key
        sel = [r for r in fills if k(r) == key]
        title = f"record fill {format_size(size)} layout={layout} dest={dest} threads={threads}"
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


def clear_table(rows: list[dict]) -> str:
    sel = [r for r in rows if r["kind"] == "clear"]
    if not sel:
        return ""
    size = format_size(sel[0]["size"])
    return f"clearing {size} (cold), one call per unit\n" + render_table(
        ["strategy", "unit", "min GB/s", "median", "max", "x 4K", "x 6.12", "x limit", "on-cpu"],
        [[r["strategy"], format_size(r["unit"]), _f(r["min"]), _f(r["median"]), _f(r["max"]),
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
                            f"x {format_size(KERNEL_COOPERATIVE_UNIT)} unit"],
                           [[format_size(r["unit"]), _f(r["min"]), _f(r["median"]), _f(r["max"]),
                             _f(r.get("x_612"), 2, "x"),
                             _f(r["median"] / ref if ref else None, 2, "x")] for r in sel]))


def fault_table(rows: list[dict], skips: list[dict]) -> str:
    sel = [r for r in rows if r["kind"] == "fault"]
    lines = []
    if sel:
        lines.append(f"demand faults (write one byte per page), {format_size(sel[0]['size'])} per run\n"
                     + render_table(
                         ["mapping", "min GB/s", "median", "max", "huge pages", "x limit"],
                         [[r["strategy"], _f(r["min"]), _f(r["median"]), _f(r["max"]),
                           "-" if "huge_fraction" not in r else f"{100 * r['huge_fraction']:.0f}%",
                           _f(r.get("x_limit"), 2, "x")] for r in sel]))
    for s in skips:
        where = "".join(f" {s[k]}" for k in ("layout", "dest") if k in s)
        lines.append(f"skipped {s.get('kind', '?')} {s.get('strategy', '?')}{where}: {s.get('reason', '')}")
    return "\n".join(lines)


def scaling_table(scaling: list[dict]) -> str:
    if not scaling:
        return ""
    return "thread scaling (median GB/s; each ratio within one split)\n" + render_table(
        ["strategy", "layout", "dest", "size", "split", "1 thread", "N threads", "N", "ratio"],
        [[s["strategy"], s["layout"], s["dest"], format_size(s["size"]), s.get("split", "even"),
          _f(s["gbps_1"]), _f(s["gbps_n"]), str(s["threads"]), _f(s["ratio"], 2, "x")] for s in scaling])


def crossover_table(cross: list[dict]) -> str:
    if not cross:
        return ""
    sizes = sorted({size for c in cross for size in c["ratios"]})
    return (f"streaming ({STREAMING}) over template, median, 1 thread, by memmap size; crossover = "
            "smallest size from which streaming wins at it and every larger size\n"
            + render_table(["layout", "dest"] + [format_size(x) for x in sizes] + ["crossover"],
                           [[c["layout"], c["dest"]] + [_f(c["ratios"].get(x), 2, "x") for x in sizes]
                            + [format_size(c["crossover"]) if c["crossover"] else "none"] for c in cross]))


def auto_table(autos: list[dict]) -> str:
    if not autos:
        return ""
    return ("auto against the better of template/"
            f"{STREAMING} (by median) in the same run and split (auto-altmap/auto-dram: the size rule; "
            "auto: learns on its chunks, chose = share of records streamed; "
            f"{BEST_TWIN}: the better mode's twin, the same code under another name, against it: "
            "what an oracle that chose right at no cost scores, so its misses are the bar's own "
            "noise in this run); x best, x template: "
            "median of the per-repetition ratios (samples below "
            f"{100 * MIN_ON_CPU:.0f}% on-CPU dropped); bar: ok when that median >= {AUTO_BAR}, noise "
            "when only the 6th of 7 sorted ratios is (2 of 7 of them at or above it), against the best and against "
            "template; probe T/S, "
            "range T/S: template's time over streaming's in auto's probes and over the whole range; "
            f"thr 2*: the kernel keeps a range that writes fewer than {KERNEL_MT_MIN_RECORDS} struct "
            "pages on one thread unless memmap_init_threads forces more\n"
            + render_table(["policy", "layout", "dest", "size", "thr", "chose", "GB/s", "best", "best GB/s",
                            "x best", "x template", "regret", "noise", "probe T/S", "range T/S", "x slow",
                            "bar"],
                           [[a["strategy"], a["layout"], a["dest"], format_size(a["size"]),
                             f"{a['threads']}{'*' if a.get('forced') else ''}",
                             a["chose"], _f(a["median"]), a["best"], _f(a["best_median"]),
                             _f(a["ratio_best"], 2, "x"), _f(a["ratio_template"], 2, "x"),
                             _f(a["regret"], 2, "x"), _f(100 * a["noise"], 0, "%"),
                             _f(a.get("probe_t_over_s"), 2), _f(a.get("range_t_over_s"), 2),
                             _f(a["ratio_slow"], 2, "x"), a.get("verdict", "ok" if a["passes"] else "MISS")]
                            for a in autos]))


def auto_bar(autos: list[dict]) -> str:
    """One policy's auto_rows() against issue 33's bar: its worst case and how many passed."""
    worst = min(autos, key=lambda a: a["ratio_best"])
    misses = sum(not a["passes"] for a in autos)
    forced = sum(not a["passes"] and a.get("forced", False) for a in autos)
    noise = sum(a.get("verdict") == "noise" for a in autos)
    return (f"worst x best {worst['ratio_best']:.2f}x ({worst['layout']} {worst['dest']} "
            f"{format_size(worst['size'])} t{worst['threads']}{'*' if worst.get('forced') else ''}, "
            + (f"noise pair {worst['ratio_best'] * (1 + worst['noise']):.2f}x), " if worst.get("pairs", 0) >= 3
               else "too few pairs for noise), ")
            + f"bar met in {len(autos) - misses}/{len(autos)} configurations ({noise} within noise"
            + (f"; {forced} of the misses on threads the kernel uses there only when forced" if forced else "")
            + ")")


def headline(rows: list[dict], limit: dict | None) -> str:
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
                out.append(f"fastest fill, {format_size(big)} cold {layout}: {b['strategy']} t{b['threads']} "
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
            out.append(f"1->{s['threads']} threads {s['strategy']} {s['layout']} {format_size(s['size'])} "
                       f"split={s['split']}: {s['gbps_1']:.2f} -> {s['gbps_n']:.2f} GB/s = {s['ratio']:.2f}x")
    for c in crossover(rows):
        out.append(f"streaming crossover {c['layout']} {c['dest']}: "
                   + (format_size(c["crossover"]) if c["crossover"] else "none in the sizes run"))
    autos = auto_rows(rows)
    for pol in sorted({a["strategy"] for a in autos}):
        sel = [a for a in autos if a["strategy"] == pol]
        reg = [a for a in sel if a["regret"] is not None]
        line = f"{pol}: {auto_bar(sel)}"
        if reg:
            w = min(reg, key=lambda a: a["regret"])
            line += f", worst choice regret {w['regret']:.2f}x ({w['layout']} {w['dest']} {format_size(w['size'])})"
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


def plot(result: dict, path: Path) -> None:
    rows = result["summary"]
    fills = [r for r in rows if r["kind"] == "fill" and r.get("section", "") in ("", "main")]
    sizes = sorted({r["size"] for r in fills})
    panels: list[tuple[str, list[dict]]] = []
    if fills:
        big, small = sizes[-1], sizes[0]
        for layout in sorted({r["layout"] for r in fills}):
            for dest, size in (("cold", big), ("warm", small), ("walked", small), ("readback", small)):
                sel = [r for r in fills if r["layout"] == layout and r["dest"] == dest and r["size"] == size]
                if sel:
                    panels.append((f"fill {layout} {dest} {format_size(size)}", sel))
    clears = [r for r in rows if r["kind"] == "clear"]
    faults = [r for r in rows if r["kind"] == "fault"]
    if clears:
        panels.append((f"clear {format_size(clears[0]['size'])} cold", clears))
    if faults:
        panels.append((f"demand fault {format_size(faults[0]['size'])}", faults))
    if not panels:
        return
    ncols = 3
    nrows = -(-len(panels) // ncols)
    plt = plotting.pyplot()
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 4 * nrows), squeeze=False)
    limits = result.get("limit") or {}
    for ax, (title, sel) in zip(axes.flat, panels):
        labels = [r["strategy"] + (f" t{r['threads']}" if r.get("threads", 1) != 1 else "")
                  + (f" {format_size(r['unit'])}" if r["kind"] == "clear" and r["strategy"].endswith("all") else "")
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
    plotting.save(fig, path, dpi=110)
