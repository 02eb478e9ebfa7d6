"""`meminit bench-results` (commands/bench_results.py): bench/results/ keeps one summary per CPU model that
`./meminit microbench` ran on, and bench/RESULTS.md shows one table across them (issue 14).

A summary comes from a run directory of `./meminit microbench` (its result.json), or, for
runs kept only as text (../shared/measurements, the first runs in bench/RESULTS.md), from the
command's table.txt, whose fill tables give every case's min/median/max; the CPU model is
then given on the command line. The RESULTS.md table is generated, and `table --check` (run by
the tests) fails when it is out of step with bench/results/.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from meminit.bench import auto_replay, bench_render, bench_stats, recorded_runs, replay_runs
from meminit.core import paths, units
from meminit.core.tables import render_table
from meminit.core.errors import MeminitError

RESULTS_DIR = paths.BENCH_DIR / "results"
README = paths.BENCH_DIR / "RESULTS.md"
TABLE_BEGIN = "<!-- cpu-table:begin -->"
TABLE_END = "<!-- cpu-table:end -->"
# what the cross-CPU table shows, in this order; movntdq is the kernel's streaming store
TABLE_STRATEGIES = ("slow", "template", bench_stats.STREAMING, "auto")
KEPT_STRATEGIES = TABLE_STRATEGIES + ("auto-altmap", "auto-dram") + tuple(
    st + bench_stats.TWIN_SUFFIX for st in ("template", bench_stats.STREAMING))
ROW_FIELDS = ("strategy", "layout", "dest", "size", "threads", "split", "section", "min", "median", "max",
              "n", "chose", "streamed_share", "by_rep", "probe_tmpl_ns", "probe_stream_ns", "probe_records",
              "rounds_by_rep")
# the flags the strategies depend on
KEPT_FLAGS = ("avx512f", "erms", "fsrm", "clzero", "movdir64b", "hypervisor")


def slug(cpu_model: str, family: str | int | None, model: str | int | None) -> str:
    name = re.sub(r"\((r|tm)\)", "", cpu_model.lower())
    name = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    return f"{name}-f{family}m{model}" if family is not None and model is not None else name


def _rows(rows: list[dict]) -> list[dict]:
    return [{k: r[k] for k in ROW_FIELDS if k in r} for r in rows
            if r.get("kind", "fill") == "fill" and r["strategy"] in KEPT_STRATEGIES]


def from_result(result: dict, source: str) -> dict:
    """The summary of a `./meminit microbench` run (its result.json)."""
    m = result["machine"]
    summary = {
        "cpu_model": m["cpu_model"], "family": m.get("cpu_family"), "model": m.get("cpu_model_number"),
        "stepping": m.get("cpu_stepping"),
        "flags": [f for f in KEPT_FLAGS if f in m.get("flags", [])],
        "caches": m.get("caches", []), "cpus": m.get("cpus"), "hypervisor": m.get("hypervisor"),
        "kernel": m.get("kernel"), "date": result["date"],
        "loadavg_start": result["loadavg_start"], "loadavg_end": result["loadavg_end"],
        "reps": result["options"]["reps"], "source": source,
        # ranges a round's verdict served (--auto-memo; absent before 2026-11-27 evening: 0, every
        # range learned): the replay of logged rounds reproduces only runs where every range did
        "auto_memo": result["options"].get("auto_memo", 0),
        # the order of the pieces auto's rounds timed (--auto-order, in result.json since
        # 2026-11-27 12:10; without it the replay cannot judge the policy by the run's probes)
        "round_order": result["options"].get("auto_order"),
        # struct pages of the spans its auto timed for the ties (--auto-span, 2026-11-28; 0: none)
        "auto_span": result["options"].get("auto_span", 0),
        # from the samples where the run kept them, so that the rows carry today's summary
        # (the repetitions the paired bar needs, what auto's probes measured)
        "rows": _rows(bench_stats.summarize(result["samples"]) if result.get("samples") else result["summary"]),
    }
    summary["slug"] = slug(summary["cpu_model"], summary["family"], summary["model"])
    return summary


_TABLE_HEAD = re.compile(r"^record fill (?P<size>\S+) layout=(?P<layout>\S+) dest=(?P<dest>\S+) "
                         r"threads=(?P<threads>\d+)(?: split=(?P<split>\S+))?(?P<scaling> \(scaling run\))?")


def parse_fill_tables(text: str) -> list[dict]:
    """The rows of the 'record fill ...' tables of a table.txt: min/median/max per strategy."""
    rows: list[dict] = []
    case = None
    for line in text.splitlines():
        head = _TABLE_HEAD.match(line)
        if head:
            case = {"layout": head["layout"], "dest": head["dest"], "size": units.parse_size(head["size"]),
                    "threads": int(head["threads"]), "split": head["split"] or "even"}
            if head["scaling"]:
                case["section"] = "scaling"
            continue
        if not line.strip():
            case = None
            continue
        # the size rules name what they chose: "auto-dram (template)  12.00  13.37 ..."
        chose = re.match(r"^(\S+) \((\w+)\)(.*)$", line)
        cells = [chose[1], *chose[3].split()] if chose else line.split()
        if case and len(cells) >= 4 and re.fullmatch(r"[\d.]+", cells[2]):
            rows.append({"strategy": cells[0], **case, "min": float(cells[1]),
                         "median": float(cells[2]), "max": float(cells[3]), "n": None,
                         **({"chose": chose[2]} if chose else {})})
    return _rows(rows)


def from_table_text(text: str, cpu_model: str, family: str | None, model: str | None,
                    date: str, source: str, note: str = "") -> dict:
    rows = parse_fill_tables(text)
    if not rows:
        raise MeminitError(f"{source}: no 'record fill' tables found")
    summary = {"cpu_model": cpu_model, "family": family, "model": model, "stepping": None,
               "flags": [], "caches": [], "cpus": None, "hypervisor": None, "kernel": None,
               "date": date, "loadavg_start": None, "loadavg_end": None, "reps": None,
               "source": source, "note": note, "rows": rows}
    summary["slug"] = slug(cpu_model, family, model)
    return summary


def save(summary: dict, directory: Path = RESULTS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{summary['slug']}.json"
    path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return path


def load_all(directory: Path = RESULTS_DIR) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def rows_by_case(summary: dict, section: str) -> dict:
    """(strategy, layout, dest, size, threads) -> row of one section ("" main, "scaling"); where a
    case ran in both splits, the chunked one, which is how the kernel and the learning auto run."""
    idx: dict = {}
    for r in summary["rows"]:
        if r.get("section", "") != section:
            continue
        key = (r["strategy"], r["layout"], r["dest"], r["size"], r["threads"])
        if key not in idx or r.get("split") == "chunked":
            idx[key] = r
    return idx


def label(summary: dict) -> str:
    llc = next((c["size"] for c in summary.get("caches", []) if c.get("level") == "3"), None)
    fm = f", family {summary['family']} model {summary['model']}" if summary.get("family") else ""
    return f"{summary['cpu_model']}{fm}" + (f", L3 {llc}" if llc else "")


def auto_verdict(summary: dict) -> str:
    """The issue-14 bar for the learning auto on this CPU, from the summary's rows."""
    rows = bench_stats.auto_rows([{"kind": "fill", **r} for r in summary["rows"]])
    autos = [a for a in rows if a["strategy"] == "auto"]
    if not autos:
        return "learning auto not measured"
    twins = [a for a in rows if a["strategy"] == bench_stats.BEST_TWIN]
    return f"learning auto: {bench_render.auto_bar(autos)}" + (
        f"; the better mode's twin (the bar's own noise): met in "
        f"{sum(a['passes'] for a in twins)}/{len(twins)}" if twins else "")


def cpu_table(summaries: list[dict]) -> str:
    """Markdown: per CPU, layout and destination, the one-thread medians (GB/s) of slow, template,
    streaming and auto at each size; then 1 -> 2 thread scaling at the largest size, cold."""
    out = []
    for s in summaries:
        idx = rows_by_case(s, "")
        scaling = rows_by_case(s, "scaling") or idx
        sizes = sorted({r["size"] for r in s["rows"]})
        out.append(f"**{label(s)}** ({s['date'][:10]}, {s['source']}; {auto_verdict(s)})\n")
        out.append("| layout | dest | " + " | ".join(units.format_size(z) for z in sizes) + " |")
        out.append("|---|---|" + "---|" * len(sizes))
        for layout in sorted({r["layout"] for r in s["rows"]}):
            for dest in sorted({r["dest"] for r in s["rows"]}, key=bench_stats.dest_rank):
                cells = []
                for z in sizes:
                    vals = [idx.get((st, layout, dest, z, 1)) for st in TABLE_STRATEGIES]
                    cells.append(" / ".join(f"{v['median']:.1f}" if v else "-" for v in vals))
                if any(c.strip("-/ ") for c in cells):
                    out.append(f"| {layout} | {dest} | " + " | ".join(cells) + " |")
        big = sizes[-1] if sizes else 0  # no size: nothing scaled
        scale = []
        for layout in sorted({r["layout"] for r in s["rows"]}):
            for st in TABLE_STRATEGIES:
                one, two = (scaling.get((st, layout, "cold", big, 1)),
                            scaling.get((st, layout, "cold", big, 2)))
                if one and two:
                    scale.append(f"{st} {layout} {one['median']:.1f} -> {two['median']:.1f} "
                                 f"({two['median'] / one['median']:.2f}x)")
        out.append("\n1 -> 2 threads, " + (f"{units.format_size(big)} cold: " + "; ".join(scale) if scale
                                           else "not measured") + "\n")
    return "\n".join(out).rstrip() + "\n"


def readme_with_table(readme: str, table: str) -> str:
    if TABLE_BEGIN not in readme or TABLE_END not in readme:
        raise MeminitError(f"{README} has no {TABLE_BEGIN} ... {TABLE_END} block")
    head, rest = readme.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_BEGIN}\n{table}{TABLE_END}{tail}"


def replay_report(runs: list[recorded_runs.RecordedRun], policy: auto_replay.Policy) -> tuple[str, bool]:
    """Per recorded run: every configuration the replay judges, and its worst cell; whether
    every judged cell of a split the kernel makes met the bar (forced splits' misses are
    counted, not claimed). The configurations of a run whose rounds timed another
    order than the policy's are shown, not judged (replay_runs.NOT_JUDGED)."""
    out, every = [], True
    aside_cells = aside_runs = forced_misses = 0
    for run in runs:
        cells = replay_runs.replay_rows(policy, run.rows, run.llc_bytes, run.probes_judge(policy.order),
                                        run.auto_span == policy.span)
        if not cells:
            out.append(f"{run.name} ({run.cpu}): no configuration with template and {bench_stats.STREAMING}\n")
            continue
        judged = [c for c in cells if c["verdict"] != replay_runs.NOT_JUDGED]
        misses = [c for c in judged if c["verdict"] == "MISS"]
        forced = sum(c["forced"] for c in misses)
        every &= forced == len(misses)  # the bar is claimed for the splits the kernel makes
        forced_misses += forced
        head = f"{run.name} ({run.cpu}): "
        if judged:
            head += f"bar met in {len(judged) - len(misses)}/{len(judged)}"
            if forced:
                head += f" ({forced} of the misses on threads the kernel uses there only when forced)"
        else:
            head += "no configuration judged"
        if len(judged) < len(cells):
            aside_cells, aside_runs = aside_cells + len(cells) - len(judged), aside_runs + 1
            head += (f"{',' if judged else ':'} {len(cells) - len(judged)} not judged (its probes timed "
                     f"rounds {run.round_order or 'of an unrecorded order'}, not {policy.order})")
        if judged:
            worst = min(judged, key=lambda c: c["ratio_best"])
            head += (f", worst x best {worst['ratio_best']:.2f}x ({worst['layout']} {worst['dest']} "
                     f"{units.format_size(worst['size'])} t{worst['threads']}, {worst['mode']}, "
                     f"verdict {worst['source']})")
        out.append(head + "\n")
        out.append(render_table(
            ["layout", "dest", "size", "thr", "split", "range T/S", "verdict", "from", "other mode",
             "live S", "x best", "x template", "bar"],
            [[c["layout"], c["dest"], units.format_size(c["size"]),
              f"{c['threads']}{'*' if c['forced'] else ''}", c["split"],
              f"{c['range_t_over_s']:.2f}", c["mode"], c["source"], f"{100 * c['other_share']:.1f}%",
              "-" if c["live_streamed"] is None else f"{100 * c['live_streamed']:.0f}%",
              f"{c['ratio_best']:.2f}x", f"{c['ratio_template']:.2f}x", c["verdict"]] for c in cells]) + "\n")
    if aside_cells:
        out.append(f"not judged: {aside_cells} configurations of {aside_runs} runs whose probes timed "
                   f"rounds of another order than {policy.order}, which cannot say what its rounds see "
                   "(figures shown as assumed)\n")
    if forced_misses:
        out.append(f"counted apart: {forced_misses} {'miss' if forced_misses == 1 else 'misses'} of two-thread "
                   "splits the kernel makes only when memmap_init_threads forces them (docs/series.md, "
                   "'The decision')\n")
    return "\n".join(out), every


def replay(policy: auto_replay.Policy, more_runs: list[Path], check: bool = False) -> int:
    """The learning auto replayed over every recorded sweep and `more_runs`, printed; with
    `check`, 1 if a configuration of a split the kernel makes misses the bar (forced splits are
    shown and counted, not claimed)."""
    runs = recorded_runs.recorded_runs(more_runs)
    text, every = replay_report(runs, policy)
    print(f"the learning auto replayed ({policy}) over {len(runs)} recorded runs: x best, x template "
          f"= median of per-repetition ratios (medians where a run kept none); from: the verdicts "
          f"from the sweep's logged rounds one by one, from its probes' sums, or assumed (the mode "
          f"that won the range); zeroed ...: a walked range the sweep's rounds read back where the "
          f"policy's would not (--walk-max), judged by the rounds of the same run's just-zeroed range; "
          f"other rounds: the sweep's rounds timed another order, not judged; live: the probes' sums tie, so the cell is the sweep's own auto "
          f"(the rule of its day), paired as the live bar pairs it; live S: the share the sweep's "
          f"own auto streamed; bar "
          f"{bench_stats.AUTO_BAR}; thr 2*: the kernel keeps a range that writes fewer than "
          f"{bench_stats.KERNEL_MT_MIN_RECORDS} struct pages on one thread unless "
          f"memmap_init_threads forces more; destination states judged: "
          f"{', '.join(auto_replay.JUDGED_DESTS)} (readback, each chunk read back during the "
          f"init, stands for no caller)\n")
    print(text, end="")
    print("every judged configuration of a split the kernel makes met the bar" if every
          else "some configurations of splits the kernel makes missed the bar")
    return 0 if every or not check else 1


def add_run(path: Path, source: str | None = None, cpu_model: str | None = None, family: str | None = None,
            model: str | None = None, date: str | None = None, note: str | None = None) -> Path:
    """The summary of a microbench run directory (its result.json), or of a table.txt with the
    CPU model and date given, saved into bench/results/."""
    if source and "./meminit " in source:
        # bench/RESULTS.md shows the source, and tests/test_readme.py parses every
        # `./meminit ...` there as a command line
        raise MeminitError(f"--source {source!r}: name the command without './' (e.g. 'meminit "
                           "microbench --auto-sweep at <commit>'): RESULTS.md would quote it as a "
                           "command line")
    if (path / "result.json").exists():
        summary = from_result(json.loads((path / "result.json").read_text()), source or str(path))
        # runs made before result.json recorded family and model take them from the command line
        summary["family"] = summary["family"] or family
        summary["model"] = summary["model"] or model
        summary["slug"] = slug(summary["cpu_model"], summary["family"], summary["model"])
    else:
        table_file = path / "table.txt" if path.is_dir() else path
        if not (cpu_model and date):
            raise MeminitError("a run without result.json needs --cpu-model and --date")
        summary = from_table_text(table_file.read_text(), cpu_model, family, model,
                                  date, source or str(table_file), note or "")
    # another run of this CPU model (of the same day): keep both, as the replay judges every
    # recorded run
    when = str(summary.get("date") or "undated")
    base = summary["slug"]
    for suffix in ("", f"-{when[:10]}") + ((f"-{when[:10]}-{when[11:13]}{when[14:16]}",) if when[11:16] else ()):
        summary["slug"] = base + suffix
        existing = RESULTS_DIR / f"{summary['slug']}.json"
        if not existing.exists() or json.loads(existing.read_text()).get("source") == summary["source"]:
            break
    else:
        raise MeminitError(f"{existing} holds another run of the same minute: name the new one apart")
    saved = save(summary, RESULTS_DIR)
    print(f"meminit: {saved}: {len(summary['rows'])} cases of {summary['cpu_model']}")
    return saved


def show_table(check: bool = False, write: bool = False) -> int:
    """The table across CPUs: printed, written into bench/RESULTS.md, or (`check`) 1 if the
    README's is out of step with bench/results/."""
    table = cpu_table(load_all())
    if check:
        if readme_with_table(README.read_text(), table) != README.read_text():
            print(f"{README} is out of step with {RESULTS_DIR}: run `./meminit bench-results table "
                  "--write`", file=sys.stderr)
            return 1
        return 0
    if write:
        README.write_text(readme_with_table(README.read_text(), table))
        print(f"meminit: wrote the table into {README}")
        return 0
    print(table, end="")
    return 0
