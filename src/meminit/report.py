"""Results: run directories, result.json, the terminal table and the PNG plot."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from meminit import faults, fork, latency, paths
from meminit.errors import MeminitError

TCG_LABEL = "TCG: functional timings, not performance figures"


def new_run_dir(kind: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = paths.RESULTS / f"{kind}-{stamp}"
    suffix = 1
    while run_dir.exists():
        suffix += 1
        run_dir = paths.RESULTS / f"{kind}-{stamp}-{suffix}"
    run_dir.mkdir(parents=True)
    return run_dir


def write_json(run_dir: Path, data: dict) -> Path:
    path = run_dir / "result.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def load_json(run: str) -> tuple[Path, dict]:
    run_dir = Path(run)
    if not run_dir.is_dir():
        run_dir = paths.RESULTS / run
    path = run_dir / "result.json"
    if not path.exists():
        raise MeminitError(f"no result.json in {run_dir}")
    return run_dir, json.loads(path.read_text())


@dataclass(frozen=True)
class Stats:
    n: int
    mean: float
    stdev: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        if not values:
            raise ValueError("no samples")
        return cls(n=len(values), mean=statistics.fmean(values),
                   stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
                   minimum=min(values), maximum=max(values))


def render_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    line = "  ".join("{:<%d}" % w if i == 0 else "{:>%d}" % w for i, w in enumerate(widths))
    out = [line.format(*header), "  ".join("-" * w for w in widths)]
    out += [line.format(*row) for row in rows]
    return "\n".join(out)


def memmap_scenarios(result: dict) -> list[dict]:
    return [s for s in result["scenarios"] if s.get("kind", "memmap") == "memmap"]


def memmap_groups(scen: dict) -> list[tuple[dict, Stats, float | None, float | None]]:
    """Per group with samples: its steady-state stats and mean ratio to `slow` and to `base`."""
    groups = [g for g in scen["groups"] if g["steady_ms"]]
    means = {(g["kernel"], g["variant"]): Stats.of(g["steady_ms"]).mean for g in groups}
    base_mean = next((m for (k, _), m in means.items() if k == "base"), None)
    out = []
    for g in groups:
        st = Stats.of(g["steady_ms"])
        slow_mean = means.get((g["kernel"], "slow"))
        out.append((g, st, st.mean / slow_mean if slow_mean else None,
                    st.mean / base_mean if base_mean else None))
    return out


def variant_label(group: dict) -> str:
    """The requested variant, and the concrete modes the kernel reported when they differ.

    A fast mode that is not allowed (see docs/series.md, Gating) runs as slow, and `auto`
    without a streaming backend runs as template: the table shows both.
    """
    used = group.get("modes_used") or []
    if not used or used == [group["variant"]]:
        return group["variant"]
    return f"{group['variant']} ({'+'.join(used)})"


def memmap_rows(result: dict) -> tuple[list[str], list[list[str]]]:
    """Rows shaped like the public cover letter: first bind apart, steady state, ratios."""
    header = ["scenario", "kernel", "variant", "threads", "ran on", "pages", "first bind ms", "steady ms (mean ± sd)",
              "min", "max", "n", "vs slow", "vs base"]
    rows: list[list[str]] = []
    for scen in memmap_scenarios(result):
        for g, st, vs_slow, vs_base in memmap_groups(scen):
            first = f"{g['first_ms']:.2f}" if g.get("first_ms") is not None else "-"
            rows.append([scen["name"], g["kernel"], variant_label(g), "/".join(map(str, g.get("threads", []))) or "-",
                         g.get("ran_on", "-"), str(g.get("pages", "")), first,
                         f"{st.mean:.2f} ± {st.stdev:.2f}", f"{st.minimum:.2f}", f"{st.maximum:.2f}",
                         str(st.n),
                         f"{vs_slow:.2f}" if vs_slow is not None else "-",
                         f"{vs_base:.2f}" if vs_base is not None else "-"])
    return header, rows


def render(result: dict) -> str:
    """Every scenario of a run: the memmap table, then a fork table per kernel."""
    lines = []
    if memmap_scenarios(result):
        lines.append(render_table(*memmap_rows(result)))
    for scen in result["scenarios"]:
        if scen.get("kind") == "fork":
            for kernel, rows in scen["runs"].items():
                lines += ["", f"fork: {kernel} kernel", fork.fork_table(rows)]
        elif scen.get("kind") == "faults":
            lines += ["", f"{scen['name']}: demand faults, one write per huge page, "
                      f"{scen.get('fault_size', '?')} per mapping and pass", fault_table(scen["runs"])]
        elif scen.get("kind") == "latency":
            lines += ["", f"{scen['name']}: cyclictest (SCHED_FIFO, CPU 1) beside 1 GiB hugetlb clears on "
                      f"CPU 1, {scen.get('rounds')} rounds x {scen.get('seconds')} s per cell",
                      latency.table(scen["rows"])]
    if result.get("accel") == "tcg":
        lines.append(f"({TCG_LABEL})")
    lines.append(f"accelerator {result.get('accel')}, guest {result.get('guest_cpus')} CPUs / "
                 f"{result.get('guest_memory')}, {result.get('source_package')} "
                 f"{result.get('source_version')}, series {result.get('series_commit', '?')[:12]}")
    return "\n".join(lines)


def plot_memmap(result: dict, out: Path) -> Path:
    import matplotlib  # noqa: PLC0415 - heavy import only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    scenarios = memmap_scenarios(result)
    fig, axes = plt.subplots(len(scenarios), 2, figsize=(12, 4 * len(scenarios)), squeeze=False)
    for (ax_iter, ax_ratio), scen in zip(axes, scenarios):
        for g in scen["groups"]:
            label = f"{g['kernel']}/{g['variant']}"
            ax_iter.plot(range(1, len(g["steady_ms"]) + 1), g["steady_ms"], marker="o", label=label)
        ax_iter.set_title(f"{scen['name']}: memmap init per rebind")
        ax_iter.set_xlabel("rebind")
        ax_iter.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax_iter.set_ylabel("ms")
        ax_iter.legend(fontsize="small")
        groups = memmap_groups(scen)
        labels = [f"{g['kernel']}/{g['variant']}" for g, _, _, _ in groups]
        ratios = [next((r for r in (vs_slow, vs_base) if r is not None), 1.0)
                  for _, _, vs_slow, vs_base in groups]
        ax_ratio.bar(labels, ratios)
        ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
        ax_ratio.set_title(f"{scen['name']}: steady mean vs slow (or base)")
        ax_ratio.tick_params(axis="x", rotation=30)
    if result.get("accel") == "tcg":
        fig.suptitle(TCG_LABEL, color="darkred")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def fault_table(runs: dict[str, list[dict]]) -> str:
    """One row per kernel and mapping kind; `vs base` compares means of the same kind."""
    base = {r["kind"]: statistics.fmean(r["gbps"]) for r in runs.get("base", []) if r.get("gbps")}
    rows: list[list[str]] = []
    for kind in faults.KINDS:
        for kernel, kernel_rows in runs.items():
            row = next((r for r in kernel_rows if r["kind"] == kind), None)
            if row is None:
                continue
            if "skipped" in row:
                rows.append([kind, kernel, "skipped: " + row["skipped"], "", "", "", "", ""])
                continue
            st = Stats.of(row["gbps"])
            huge = "-" if row["huge_fraction"] is None else f"{100 * row['huge_fraction']:.0f}%"
            ratio = f"{st.mean / base[kind]:.2f}" if kind in base else "-"
            rows.append([kind, kernel, f"{st.mean:.2f} ± {st.stdev:.2f}", f"{st.minimum:.2f}",
                         f"{st.maximum:.2f}", str(st.n), huge, ratio])
    return render_table(["mapping", "kernel", "GB/s (mean ± sd)", "min", "max", "n", "huge", "vs base"],
                        rows)


def plot_faults(runs: dict[str, list[dict]], out: Path, title: str) -> Path:
    import matplotlib  # noqa: PLC0415 - heavy import only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(len(runs), 1)
    for i, (kernel, kernel_rows) in enumerate(runs.items()):
        by_kind = {r["kind"]: r["gbps"] for r in kernel_rows if r.get("gbps")}
        xs = [k + i * width for k, kind in enumerate(faults.KINDS) if kind in by_kind]
        values = [by_kind[kind] for kind in faults.KINDS if kind in by_kind]
        ax.bar(xs, [statistics.fmean(v) for v in values], width,
               yerr=[statistics.stdev(v) if len(v) > 1 else 0.0 for v in values], label=kernel)
    ax.set_xticks([k + width * (len(runs) - 1) / 2 for k in range(len(faults.KINDS))], faults.KINDS)
    ax.set_ylabel("GB/s faulted (mean, sd bars)")
    ax.set_title(title, fontsize="small")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def plot(result: dict, run_dir: Path) -> list[Path]:
    pngs = []
    if memmap_scenarios(result):
        pngs.append(plot_memmap(result, run_dir / "plot.png"))
    for scen in result["scenarios"]:
        if scen.get("kind") == "fork":
            title = f"fork with N VMAs ({result.get('accel')})"
            if result.get("accel") == "tcg":
                title += f" - {TCG_LABEL}"
            fork.plot_forks(scen["runs"], run_dir / "fork.png", title)
            pngs.append(run_dir / "fork.png")
        elif scen.get("kind") == "faults":
            title = f"{scen['name']}: huge-page demand faults ({result.get('accel')})"
            if result.get("accel") == "tcg":
                title += f" - {TCG_LABEL}"
            pngs.append(plot_faults(scen["runs"], run_dir / "faults.png", title))
        elif scen.get("kind") == "latency":
            title = f"{scen['name']}: worst wakeup latency beside 1 GiB clears ({result.get('accel')})"
            if result.get("accel") == "tcg":
                title += f" - {TCG_LABEL}"
            pngs.append(latency.plot(scen["rows"], run_dir / "latency.png", title))
    return pngs


def _cmd_report(args: argparse.Namespace) -> int:
    run_dir, result = load_json(args.run)
    kind = result.get("kind")
    if kind != "memmap":
        raise MeminitError(f"{run_dir}: 'meminit report' renders scenario runs; this one is {kind!r}")
    print(render(result))
    for png in plot(result, run_dir):
        print(f"plot: {png}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="re-render the table and plot of a results/<run>")
    p.add_argument("run", help="run directory or its name under results/")
    p.set_defaults(func=_cmd_report)
