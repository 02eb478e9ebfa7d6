"""The mailed series' cover letter: what and why and the open questions from
docs/series.md, the measured tables with their machines (bench/results/), and what the
harness checks on every series it tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from meminit.bench import bench_results
from meminit.core import kernels, paths, tables, units
from meminit.guest import configs, ktap, selftests
from meminit.kernel import compile_checks
from meminit.scenarios import soak
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux

SERIES_DOC = paths.REPO / "docs" / "series.md"
# per kernel: what its series does (7.3 carries the memmap half only)
SUBJECTS = {kernels.LTS.version: "mm: faster ZONE_DEVICE memmap init and huge-page clearing",
            kernels.MAINLINE.version: "mm: faster ZONE_DEVICE memmap init"}
# per kernel: the docs/series.md section whose first paragraphs say what the series does
# ("" for the document's own; 6.12's second says it is the backport), and the open
# questions it adds
INTRO_SECTIONS = {kernels.LTS.version: ("", 2), kernels.MAINLINE.version: ("On Linux 7.3", 1)}
OWN_QUESTIONS = {kernels.LTS.version: "Open questions on 6.12"}
TABLE_SIZE = 1 << 30     # the bench's largest fill: far beyond any LLC measured
WIDTH = 76


def doc_section(text: str, heading: str) -> str:
    """The body of `## heading` in a Markdown document, up to the next `## `."""
    marker = f"\n## {heading}\n"
    if marker not in text:
        raise MeminitError(f"{SERIES_DOC.name} has no '## {heading}' section")
    body = text.split(marker, 1)[1].split("\n## ", 1)[0]
    return body.strip()


def intro(text: str, paragraphs: int = 1) -> str:
    """The document's first paragraphs (with their lists), below its title."""
    return "\n\n".join(text.split("\n", 1)[1].strip().split("\n\n")[:paragraphs])


def rewrap(markdown: str) -> str:
    """Paragraphs and `*`/`-` list items of a Markdown section refilled to WIDTH."""
    blocks = []
    for paragraph in markdown.split("\n\n"):
        items: list[list[str]] = []
        for line in paragraph.splitlines():
            if line.startswith(("* ", "- ")) or not items:
                items.append([line.strip()])
            else:
                items[-1].append(line.strip())
        blocks.append("\n".join(
            fill(" ".join(item), subsequent_indent="  " if item[0][:2] in ("* ", "- ") else "")
            for item in items))
    return "\n\n".join(blocks)


def provenance(summary: dict) -> str:
    """Where a CPU's figures come from, as bench/results/ keeps it."""
    parts = [f"{summary['reps']} interleaved repetitions" if summary.get("reps") else "",
             "in a VM" if summary.get("hypervisor") else "",
             f"load {summary['loadavg_start']} -> {summary['loadavg_end']}" if summary.get("loadavg_start") else "",
             summary.get("note") or "", bench_results.auto_verdict(summary)]
    return "; ".join(p for p in parts if p)


def bench_table(summaries: list[dict], size: int = TABLE_SIZE) -> str:
    """Per CPU, one thread, `size` fills: GB/s of the slow path, template, streaming and the
    learning auto, and template and streaming against the slow path."""
    blocks = []
    for summary in summaries:
        idx = bench_results.rows_by_case(summary, "")
        rows = []
        for layout in sorted({r["layout"] for r in summary["rows"]}):
            for dest in ("cold", "warm", "walked", "readback"):
                got: dict[str, dict | None] = {s: idx.get((s, layout, dest, size, 1))
                                               for s in bench_results.TABLE_STRATEGIES}
                slow, template, streaming, auto = (case["median"] if case else None for case in got.values())
                if not (template and streaming):
                    continue
                ratio = (lambda v: f"{v / slow:.2f}x" if v and slow else "-")
                rows.append([f"{layout} {dest}", *(f"{v:.1f}" if v else "-" for v in (slow, template,
                                                                                      streaming, auto)),
                             ratio(template), ratio(streaming)])
        if not rows:
            continue
        head = ["1 thread", "slow", "template", "streaming", "auto", "tmpl/slow", "strm/slow"]
        title = f"{bench_results.label(summary)}, {summary['date'][:10]} ({provenance(summary)}):"
        blocks.append(fill(title) + "\n" + tables.render_table(head, rows))
    if not blocks:
        return "(no CPU in bench/results/ has a run at this size)"
    return (f"GB/s of struct pages written, {units.format_size(size)} of memmap, median of the run;\n"
            "o0: order-0 pages, o9: 2 MiB compound pages; cold, just zeroed (warm), just\n"
            "zeroed and walked once after the init (walked), or each chunk read back\n"
            "right after its init (readback):\n\n" + "\n\n".join(blocks))


def how_tested(linux: Linux = kernels.DEFAULT) -> str:
    """What the harness checks on `linux`'s series, and which checks every CI run makes (its
    code and .ci/run, not a claim about one run)."""
    suites = ktap.required_suites(linux)
    kunit_targets = configs.TARGETS_BY_KERNEL[linux.version]
    compile_targets = compile_checks.COMPILE_TARGETS_BY_KERNEL[linux.version]
    targets = {grouped: "; ".join(f"{n} ({', '.join(t.suites)})" for n, t in kunit_targets.items()
                                  if t.in_kunit_group == grouped)
               for grouped in (True, False)}
    by_hand = [f"KUnit through kunit.py on {targets[False]}"] if targets[False] else []
    if compile_targets:
        by_hand.append(f"W=1 compiles of the touched files under {', '.join(compile_targets)}")
    items = [
        "Every CI run: the files each prefix touches compile with W=1 and no warning on an added "
        "line, the series with its topic and test hooks builds, every patch, the RFCs' too, is "
        "checkpatch --strict clean. By hand: every prefix builds in full, the RFCs' too.",
        f"Every CI run: KUnit ({', '.join(suites)}) booted in QEMU on a debug kernel: DEBUG_VM, "
        "PROVE_LOCKING, PREEMPT full, DEBUG_PAGE_REF, 2 NUMA nodes with the pmem on the node "
        "without CPUs; a fast-path case that skips there fails the run. Before a submission: "
        f"booted again with preempt={linux.other_preempt}.",
        f"{'Every CI run' if linux.ci_kunit else 'Before a submission'}: KUnit through kunit.py "
        f"on {targets[True]}." + (f" By hand: {'; '.join(by_hand)}." if by_hand else ""),
        "Every CI run: struct pages hashed after fsdax map=dev rebinds in every mode (slow, "
        "template, streaming) and compared (before a submission under "
        f"preempt={linux.other_preempt} too, and with the RFCs on two threads and in auto).",
    ]
    if "soak" in linux.long_guests:
        items.append(f"Before a submission: a soak of {soak.SHORT_CYCLES} bind/unbind cycles per device type "
                     "(fsdax map=dev, devdax align=2M, device-private through test_hmm) with struct pages "
                     "hashed and compared, CPU hotplug, injected allocation failures and kmemleak; 100 by hand.")
    if "selftests" in linux.long_guests:
        items.append(f"Before a submission: {len(selftests.fast(linux))} of the kernel's mm selftests on the "
                     f"debug kernel. By hand: all {len(selftests.of(linux))} on base and series side by side.")
    return "\n".join(fill(item, initial_indent="- ", subsequent_indent="  ") for item in items)


def fill(text: str, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """textwrap.fill at WIDTH that never breaks a word at its hyphen (device-private)."""
    return textwrap.fill(text, WIDTH, break_on_hyphens=False, initial_indent=initial_indent,
                         subsequent_indent=subsequent_indent)


def series_intro(doc: str, linux: Linux) -> str:
    """What `linux`'s series does: the first paragraphs (with their lists) of its section."""
    section, paragraphs = INTRO_SECTIONS[linux.version]
    return intro(doc if not section else "\n" + doc_section(doc, section), paragraphs)


def blurb(linux: Linux, source_version: str) -> str:
    doc = SERIES_DOC.read_text()
    upstream = source_version.split("-")[0]
    questions = rewrap(doc_section(doc, "Open questions"))
    if linux.version in OWN_QUESTIONS:
        questions += "\n" + rewrap(doc_section(doc, OWN_QUESTIONS[linux.version]))
    parts = [
        rewrap(series_intro(doc, linux)),
        "Why\n---\n\n" + rewrap(doc_section(doc, "Why")),
        "Measured\n--------\n\n" + fill(
            "A userspace benchmark replays the kernel's memmap writes on the real CPU (the slow "
            "path's per-PFN sequence included); our guests run under QEMU's TCG, so their timings "
            "are functional only and are not quoted.")
        + "\n\n" + bench_table(bench_results.load_all()),
        "How it is tested\n----------------\n\n" + how_tested(linux),
        "Open questions\n--------------\n\n" + questions,
        fill(f"The base is Debian's {linux.source_package} {source_version} (upstream v{upstream} "
             "with Debian's patches), unpacked and committed as is; the base-commit below is "
             "that commit, the same on every machine with this package."),
    ]
    return "\n\n".join(parts) + "\n"


def part_cover(folder: Path) -> tuple[str, str]:
    """The cover letter of a part mailed apart (an RFC, a topic): its folder's `cover`, whose
    first line is the subject and the rest the text."""
    cover = folder / "cover"
    if not cover.exists():
        raise MeminitError(f"{cover} is missing: a part mailed apart needs its cover letter "
                           "(first line the subject, then the text)")
    subject, _, text = cover.read_text().partition("\n")
    return subject.strip(), text.strip() + "\n"
