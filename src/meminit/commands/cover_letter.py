"""The mailed series' cover letter: what and why and the open questions from
docs/series.md, the measured tables with their machines (bench/results/, and the latest
`meminit run` if there is one), and how the series was tested, from the harness itself."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from meminit import bench_results, configs, paths, results, scenarios, selftests, soak, tables, units
from meminit.errors import MeminitError

SERIES_DOC = paths.REPO / "docs" / "series.md"
SUBJECT = "mm: faster ZONE_DEVICE memmap init and huge-page clearing"
TABLE_SIZE = 1 << 30     # the bench's largest fill: far beyond any LLC measured
WIDTH = 76


def doc_section(text: str, heading: str) -> str:
    """The body of `## heading` in a Markdown document, up to the next `## `."""
    marker = f"\n## {heading}\n"
    if marker not in text:
        raise MeminitError(f"{SERIES_DOC.name} has no '## {heading}' section")
    body = text.split(marker, 1)[1].split("\n## ", 1)[0]
    return body.strip()


def intro(text: str) -> str:
    """The document's first paragraph (with its list): what the series does."""
    return text.split("\n", 1)[1].strip().split("\n\n", 1)[0]


def bench_table(summaries: list[dict], size: int = TABLE_SIZE) -> str:
    """Per CPU, one thread, `size` fills: GB/s of the slow path, template, streaming and the
    learning auto, and template and streaming against the slow path."""
    blocks = []
    for summary in summaries:
        idx = bench_results.rows_by_case(summary, "")
        rows = []
        for layout in sorted({r["layout"] for r in summary["rows"]}):
            for dest in ("cold", "warm", "readback"):
                got = {s: idx.get((s, layout, dest, size, 1)) for s in bench_results.TABLE_STRATEGIES}
                slow, template, streaming, auto = (got[s]["median"] if got[s] else None
                                                   for s in bench_results.TABLE_STRATEGIES)
                if not (template and streaming):
                    continue
                ratio = (lambda v: f"{v / slow:.2f}x" if v and slow else "-")
                rows.append([f"{layout} {dest}", *(f"{v:.1f}" if v else "-" for v in (slow, template,
                                                                                      streaming, auto)),
                             ratio(template), ratio(streaming)])
        if not rows:
            continue
        head = ["1 thread", "slow", "template", "streaming", "auto", "tmpl/slow", "strm/slow"]
        reps = f"{summary['reps']} interleaved repetitions; " if summary.get("reps") else ""
        title = f"{bench_results.label(summary)} ({summary['date'][:10]}, {reps}{bench_results.auto_verdict(summary)}):"
        blocks.append(textwrap.fill(title, WIDTH) + "\n" + tables.render_table(head, rows))
    if not blocks:
        return "(no CPU in bench/results/ has a run at this size)"
    return (f"GB/s of struct pages written, {units.format_size(size)} of memmap, median of the run:\n\n"
            + "\n\n".join(blocks))


def latest_run(results_dir: Path = paths.RESULTS) -> Path | None:
    """The newest `meminit run` that timed memmap inits (a fork-only run says nothing of the series)."""
    for run in sorted((p.parent for p in results_dir.glob("run-*/" + results.RESULT_FILE)), reverse=True):
        entries = json.loads((run / results.RESULT_FILE).read_text()).get("scenarios", [])
        if any(e.get("kind", "memmap") == "memmap" for e in entries):
            return run
    return None


def run_table(run_dir: Path) -> str:
    result = json.loads((run_dir / results.RESULT_FILE).read_text())
    return f"`meminit run`, {run_dir.name}:\n\n" + scenarios.render(result)


def how_tested() -> str:
    suites = [s.strip() for s in (paths.CONFIG_DIR / "kunit-suites.txt").read_text().splitlines()
              if s.strip() and not s.startswith("#")]
    ci_targets = [n for n, t in configs.TARGETS.items() if t.in_ci]
    other_targets = [n for n, t in configs.TARGETS.items() if not t.in_ci]
    items = [
        "`meminit check-series`: every prefix builds (the debug config below), the files each "
        "prefix touches compile with W=1 and no warning on an added line, checkpatch --strict.",
        f"KUnit ({', '.join(suites)}) booted in QEMU on a debug kernel: DEBUG_VM, PROVE_LOCKING, "
        "PREEMPT full, DEBUG_PAGE_REF, 2 NUMA nodes with the pmem on the node without CPUs; "
        "the test fails if a fast-path case skips there.",
        f"The same suites through kunit.py on {', '.join(ci_targets)} (every CI run) and "
        f"{', '.join(other_targets)} (`meminit check-configs`); W=1 compiles under "
        f"{', '.join(configs.COMPILE_TARGETS)}.",
        "Struct pages hashed after a rebind in every mode (slow, template, streaming, auto) and "
        "compared, by the test command and every `meminit run`: fsdax map=dev, devdax align=2M, "
        "device-private (test_hmm).",
        f"A soak of {soak.SHORT_CYCLES} bind/unbind cycles per scenario with CPU hotplug, "
        "injected allocation failures and kmemleak (`meminit soak` runs 100).",
        f"The kernel's mm selftests on base and series side by side ({len(selftests.SELFTESTS)} "
        f"programs; {len(selftests.FAST)} of them on every CI run).",
    ]
    return "\n".join(textwrap.fill(item, WIDTH, initial_indent="- ", subsequent_indent="  ")
                     for item in items)


def blurb(run_dir: Path | None, source_package: str, source_version: str) -> str:
    doc = SERIES_DOC.read_text()
    parts = [
        intro(doc),
        "Why\n---\n\n" + doc_section(doc, "Why"),
        "Measured\n--------\n\n" + textwrap.fill(
            "The userspace benchmark (bench/ in the harness) replays the kernel's memmap writes on "
            "the real CPU; our guests run under TCG, so their timings are functional only.", WIDTH)
        + "\n\n" + bench_table(bench_results.load_all()),
    ]
    if run_dir:
        parts.append(run_table(run_dir))
    parts += [
        "How it was tested\n-----------------\n\n" + how_tested(),
        "Open questions\n--------------\n\n" + doc_section(doc, "Open questions"),
        textwrap.fill(f"The base is Debian's {source_package} {source_version}, unpacked and committed "
                      "as is (the harness's `meminit tree` recreates the base-commit below).", WIDTH),
    ]
    return "\n\n".join(parts) + "\n"
