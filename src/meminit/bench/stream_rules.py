"""Fixed streaming rules judged over every recorded run (issue 66): which memmaps the kernel
writes with streaming stores, decided from what the range and its caller know (an altmap or
DRAM, how many struct pages it writes, whether the caller reads the memmap next), against the
better of template and streaming in each configuration, time-weighted, on every CPU on file
(`bench-results rules`).

A configuration is a one-thread fill of a run (the core series makes no splits) in a caller's
cache state: `cold` stands for an altmap memmap (fsdax/devdax map=dev), except `o9dedup`,
which x86-64 deduplicates only without an altmap and so is a DRAM memmap; `warm` (just
zeroed) for a DRAM memmap nobody walks; `walked` for a DRAM memmap its owner reads right
after the init (test_hmm). Per configuration the better mode is the one of template and
streaming with the better median rate; a mode's time is the better mode's median time times
the median, over the repetitions, of that mode's time over the better mode's in the same
repetition (the samples of one repetition ran side by side; a run kept without repetitions
gives its medians' ratio). The learning `auto` is the replay's (auto_replay), paired the same
way.

The bars, per run (BARS):
(a) the better modes' total time over the rule's total is at least TOTAL_BAR;
(b) no configuration's mode is behind template, as the median of the paired ratios, by more
    than max(BEHIND_SHARE, BEHIND_MS of template's time) plus the noise;
(c) the callers' own cases (CALLER_CASES) not behind template by more than the noise.
The noise of a configuration is how far the same code timed twice disagrees there: the
largest distance from 1 of the median paired ratio of a mode's twin (the bench's
`template-twin`, `movntdq-twin`) to the mode, and at least NOISE_FLOOR (the 3 % the paired
bar has always allowed; the floor alone where a run has no twins).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from meminit.bench import auto_replay, bench_stats, recorded_runs, replay_runs
from meminit.bench.memmap_layouts import LAYOUTS
from meminit.core import units
from meminit.core.tables import render_markdown, render_table

TOTAL_BAR = 0.97
BEHIND_SHARE = 0.10
BEHIND_MS = 0.5
NOISE_FLOOR = 0.03
# (layout, dest, bytes of memmap): test_hmm's 256 MiB chunk, walked right after the init, and
# a just-zeroed 1 GiB DRAM memmap (a 64 GB device-private range)
CALLER_CASES = (("o0", "walked", 4 << 20), ("o0", "warm", 1 << 30))
TEMPLATE, STREAMING, AUTO = "template", bench_stats.STREAMING, "auto"
# the streaming strategies a rule can be judged with: MOVNTDQ of whole lines (the bench's
# default, what the learning auto was replayed with) and MOVNTI (memcpy_flushcache(), the mm
# tree's memcpy_nontemporal() on x86); only MOVNTDQ has the replayed auto
MOVNTI = "movnti"
STREAMINGS = (STREAMING, MOVNTI)
BARS = (f"(a) the better mode's total over the rule's >= {TOTAL_BAR} in every run; (b) no configuration "
        f"behind template by more than max({BEHIND_SHARE:.0%}, {BEHIND_MS} ms) beyond noise; (c) "
        + " and ".join(f"{layout} {dest} {units.format_size(size)}" for layout, dest, size in CALLER_CASES)
        + f" not behind template beyond noise (noise: the twins' disagreement, at least {NOISE_FLOOR:.0%})")


@dataclass(frozen=True)
class Config:
    """A configuration as the kernel sees the range: its memmap's memory and caller."""
    layout: str
    dest: str
    size: int  # bytes of struct pages written, as memmap_init_default_mode() counts a range
    # (a deduplicated one writes a quarter of the memmap its PFNs span)

    @property
    def altmap(self) -> bool:
        return self.dest == "cold" and self.layout != "o9dedup"

    @property
    def read_next(self) -> bool:
        return self.dest == "walked"


@dataclass(frozen=True)
class Rule:
    """Stream into an altmap memmap if `altmap`; into a DRAM one whose range writes at least
    `dram_min` bytes of struct pages (Config.size; None: never), unless its caller reads it next
    and `read_next` is False. `level`: what the kernel must know to apply it (0 nothing, 1 where
    the memmap lives, 2 and its size, 3 and the caller's flag, 4 its own timing)."""
    name: str
    level: int
    altmap: bool = False
    dram_min: int | None = None
    read_next: bool = True

    def streams(self, cfg: Config) -> bool:
        if cfg.altmap:
            return self.altmap
        if self.dram_min is None or cfg.size < self.dram_min:
            return False
        return self.read_next or not cfg.read_next

    def says(self) -> str:
        if self.level == 4:
            return "the learning auto (rounds timed in the kernel), replayed"
        if not self.altmap:
            return "always template"
        if self.dram_min == 0 and self.read_next:
            return "always stream"
        text = "stream into an altmap"
        if self.dram_min is not None:
            text += f", or a DRAM one writing {units.format_size(self.dram_min)} of struct pages or more" \
                if self.dram_min else ", or a DRAM memmap"
            if not self.read_next:
                text += " its caller does not read next"
        return text


LEARNING_AUTO = Rule(AUTO, 4)
CANDIDATES = (
    Rule("template", 0), Rule("stream", 0, altmap=True, dram_min=0), Rule("altmap", 1, altmap=True),
    *(Rule(f"altmap+dram>={units.format_size(n)}", 2, True, n) for n in (16 << 20, 64 << 20, 256 << 20)),
    *(Rule(f"altmap+dram>={units.format_size(n)}-unread" if n else "stream-unread", 3, True, n, read_next=False)
      for n in (0, 16 << 20, 64 << 20)),
    LEARNING_AUTO)


def _time_ratio(row: dict, ref: dict) -> float:
    """The median over the repetitions of row's time over ref's (1 for the same row)."""
    return 1.0 if row is ref else statistics.median(bench_stats.paired_ratios(ref, row))


@dataclass
class Cell:
    """One configuration of one run: the better mode's median time, and per mode (template,
    streaming, auto) its paired time over the better mode's and over template's."""
    cfg: Config
    best_ms: float
    over_best: dict[str, float]
    over_template: dict[str, float]
    noise: float
    streaming: str = STREAMING  # the strategy timed as the streaming mode (STREAMINGS)

    @property
    def template_ms(self) -> float:
        return self.best_ms * self.over_best[TEMPLATE]

    def mode(self, rule: Rule) -> str:
        return AUTO if rule.level == 4 else STREAMING if rule.streams(self.cfg) else TEMPLATE

    def behind(self, rule: Rule) -> float:
        """How far the rule's mode is behind template here (0.1: 10 % slower)."""
        return self.over_template[self.mode(rule)] - 1

    def misses_bound(self, rule: Rule) -> bool:
        return self.behind(rule) > max(BEHIND_SHARE, BEHIND_MS / self.template_ms) + self.noise

    def misses_caller(self, rule: Rule) -> bool:
        return (self.cfg.layout, self.cfg.dest, self.cfg.size) in CALLER_CASES and self.behind(rule) > self.noise


def _twins_noise(idx: dict, key: tuple, streaming: str) -> float:
    noise = NOISE_FLOOR
    for mode in (TEMPLATE, streaming):
        twin, row = idx.get((mode + bench_stats.TWIN_SUFFIX, *key)), idx.get((mode, *key))
        if twin and row:
            noise = max(noise, abs(_time_ratio(twin, row) - 1))
    return noise


def run_cells(run: recorded_runs.RecordedRun, policy: auto_replay.Policy,
              streaming: str = STREAMING) -> list[Cell]:
    """A run's one-thread configurations in the callers' cache states that have template and
    `streaming` timed, and with MOVNTDQ the replayed learning auto too (the better mode is then
    the better of template and `streaming`)."""
    idx = replay_runs.configurations(run.rows)
    with_auto = streaming == STREAMING
    autos = {(c["layout"], c["dest"], c["size"]): c for c in
             replay_runs.replay_rows(policy, run.rows, run.llc_bytes, run.probes_judge(policy.order),
                                     run.auto_span == policy.span) if c["threads"] == 1} if with_auto else {}
    cells = []
    for (strat, layout, dest, size, threads), tmpl in idx.items():
        stream = idx.get((streaming, layout, dest, size, threads))
        auto = autos.get((layout, dest, size))
        if strat != TEMPLATE or threads != 1 or dest not in auto_replay.JUDGED_DESTS or layout not in LAYOUTS \
                or stream is None:
            continue
        if with_auto and (auto is None or not auto["ratio_best"] or not auto["ratio_template"]):
            continue
        best = stream if stream["median"] > tmpl["median"] else tmpl
        over_best = {TEMPLATE: _time_ratio(tmpl, best), STREAMING: _time_ratio(stream, best)}
        over_template = {TEMPLATE: 1.0, STREAMING: _time_ratio(stream, tmpl)}
        if auto is not None:
            over_best[AUTO], over_template[AUTO] = 1 / auto["ratio_best"], 1 / auto["ratio_template"]
        cells.append(Cell(Config(layout, dest, size), size / (best["median"] * 1e6), over_best, over_template,
                          _twins_noise(idx, (layout, dest, size, threads), streaming), streaming))
    return cells


def total_ratio(cells: list[Cell], rule: Rule) -> float:
    """(a): the better modes' total time over the rule's."""
    return sum(c.best_ms for c in cells) / sum(c.best_ms * c.over_best[c.mode(rule)] for c in cells)


@dataclass
class Verdict:
    """One rule on one CPU: (a) per run, the configurations missing (b) and (c), of how many."""
    totals: list[float] = field(default_factory=list)
    configs: int = 0
    bound_misses: list[str] = field(default_factory=list)
    callers: int = 0
    caller_misses: list[str] = field(default_factory=list)

    def meets(self, callers: bool = True) -> bool:
        return min(self.totals) >= TOTAL_BAR and not self.bound_misses and not (callers and self.caller_misses)


# the VMs' CPUs by family and model, as README.md and bench/RESULTS.md name them
CPU_NAMES = {(23, 1): "Zen 1", (25, 1): "Zen 3", (25, 17): "Zen 4", (26, 2): "Zen 5"}
NOT_RECORDED = " (family not recorded)"  # cpu_label's mark of a run without family and model


def cpu_label(cpu: str) -> str:
    """A run's CPU by family and model ('Zen 3 f25m1', 'Xeon f6m207'); its model string where
    the run did not record them."""
    found = re.search(r"family (\d+) model (\d+)", cpu)
    if not found:
        return f"{cpu}{NOT_RECORDED}"
    family, model = int(found[1]), int(found[2])
    name = CPU_NAMES.get((family, model)) or ("Xeon" if "Xeon" in cpu else cpu.split(" family")[0])
    return f"{name} f{family}m{model}"


def candidates(streaming: str = STREAMING) -> tuple[Rule, ...]:
    """The rules judged with `streaming`: the fixed ones, and the learning auto with MOVNTDQ."""
    return CANDIDATES if streaming == STREAMING else tuple(r for r in CANDIDATES if r is not LEARNING_AUTO)


def judge(runs: list[recorded_runs.RecordedRun], policy: auto_replay.Policy,
          rules: tuple[Rule, ...] = CANDIDATES, streaming: str = STREAMING) -> dict[str, dict[str, Verdict]]:
    """cpu_label -> rule name -> its Verdict over that CPU's runs, streaming with `streaming`
    (runs without a judged configuration left out)."""
    out: dict[str, dict[str, Verdict]] = defaultdict(lambda: {r.name: Verdict() for r in rules})
    for run in runs:
        cells = run_cells(run, policy, streaming)
        if not cells:
            continue
        for rule in rules:
            v = out[cpu_label(run.cpu)][rule.name]
            v.totals.append(total_ratio(cells, rule))
            v.configs += len(cells)
            where = f"{run.name.rsplit('/', 1)[-1]}: "
            v.bound_misses += [where + _cfg_text(c, rule) for c in cells if c.misses_bound(rule)]
            v.callers += sum((c.cfg.layout, c.cfg.dest, c.cfg.size) in CALLER_CASES for c in cells)
            v.caller_misses += [where + _cfg_text(c, rule) for c in cells if c.misses_caller(rule)]
    return dict(out)


def _cfg_text(c: Cell, rule: Rule) -> str:
    mode = c.streaming if c.mode(rule) == STREAMING else c.mode(rule)
    return (f"{c.cfg.layout} {c.cfg.dest} {units.format_size(c.cfg.size)} {mode} "
            f"{c.over_template[c.mode(rule)]:.2f}x template's time")


def pick(verdicts: dict[str, dict[str, Verdict]], rules: tuple[Rule, ...] = CANDIDATES) -> tuple[Rule, bool] | None:
    """The simplest rule (lowest level; among equals the best worst run of (a)) that meets
    (a), (b) and (c) on every CPU, with True; else the simplest that meets (a) and (b), with
    False; None if none does."""
    for callers in (True, False):
        ok = [r for r in rules if all(cpu[r.name].meets(callers) for cpu in verdicts.values())]
        if ok:
            return min(ok, key=lambda r: (r.level, -min(min(cpu[r.name].totals) for cpu in verdicts.values()))), \
                callers
    return None


def cell_text(v: Verdict) -> str:
    """'worst / median of (a), configurations missing (b), callers' cases missing (c)'."""
    worst, median = min(v.totals), statistics.median(v.totals)
    a = f"{worst:.2f}" if round(worst, 2) == round(median, 2) else f"{worst:.2f}/{median:.2f}"
    return f"{a} b{len(v.bound_misses)} c{len(v.caller_misses)}/{v.callers}"


def _paired(run: recorded_runs.RecordedRun) -> bool:
    """Whether the run kept its repetitions (else its medians are compared)."""
    return all(r.get("by_rep") for r in run.rows if r.get("kind", "fill") == "fill")


def report(runs: list[recorded_runs.RecordedRun], policy: auto_replay.Policy, markdown: bool = False,
           streaming: str = STREAMING) -> str:
    """The candidates side by side per CPU, streaming with `streaming`, which meet the bars,
    what each misses, and the pick."""
    rules = candidates(streaming)
    verdicts = judge(runs, policy, rules, streaming)
    if not verdicts:
        return f"no recorded run timed template and {streaming} on one thread\n"
    cpus = sorted(verdicts)
    header = ["rule", *(f"{cpu} ({len(verdicts[cpu][TEMPLATE].totals)})" for cpu in cpus), "meets"]
    rows = []
    for rule in rules:
        per_cpu = [verdicts[cpu][rule.name] for cpu in cpus]
        meets = "a, b, c" if all(v.meets() for v in per_cpu) else \
            "a, b" if all(v.meets(False) for v in per_cpu) else "-"
        rows.append([rule.name, *(cell_text(v) for v in per_cpu), meets])
    medians = [r.name.rsplit("/", 1)[-1] for r in runs if not _paired(r) and run_cells(r, policy, streaming)]
    lines = [f"fixed streaming rules{' and the learning auto' if LEARNING_AUTO in rules else ''}, "
             f"streaming with {streaming}, over {sum(len(verdicts[c][TEMPLATE].totals) for c in cpus)} "
             f"recorded runs, one thread, per CPU (runs): (a) worst/median run, b: configurations missing "
             f"(b), c: callers' cases missing (c) / judged; {BARS}; paired by repetition"
             + (f", medians for {', '.join(medians)} (no repetitions kept)" if medians else ""), "",
             (render_markdown if markdown else render_table)(header, rows), ""]
    lines += [f"- {rule.name}: {rule.says()}" for rule in rules]
    lines.append("")
    for rule in rules[1:]:
        misses = sorted({m for cpu in cpus for v in [verdicts[cpu][rule.name]]
                         for m in [f"(b) {b}" for b in v.bound_misses] + [f"(c) {c}" for c in v.caller_misses]})
        if misses:
            lines.append(f"{rule.name} misses {len(misses)}: " + "; ".join(misses[:6])
                         + (" ..." if len(misses) > 6 else ""))
    chosen = pick(verdicts, rules)
    lines.append("")
    if chosen is None:
        lines.append("no candidate meets (a) and (b) on every CPU")
    else:
        rule, callers = chosen
        lines.append(f"the simplest rule that meets {'(a), (b) and (c)' if callers else '(a) and (b), none meeting (c) too'} "
                     f"on every CPU: {rule.name} ({rule.says()})")
    return "\n".join(lines) + "\n"


COVER_RULES = ("template", "stream", "altmap", "altmap+dram>=64M", AUTO)


def cover_table(runs: list[recorded_runs.RecordedRun], policy: auto_replay.Policy, markdown: bool = False) -> str:
    """The rules of COVER_RULES per CPU for a cover letter (or, `markdown`, the README),
    narrow: the worst run's (a), and 'b'/'c' where the rule misses bar (b)/(c) on that CPU."""
    verdicts = judge(runs, policy)

    def cell(v: Verdict) -> str:
        return f"{min(v.totals):.2f}" + ("b" if v.bound_misses else "") + ("c" if v.caller_misses else "")

    rows = [[f"{cpu.replace(NOT_RECORDED, ', unrecorded')} ({len(verdicts[cpu][TEMPLATE].totals)})",
             *(cell(verdicts[cpu][r]) for r in COVER_RULES)]
            for cpu in sorted(verdicts)]
    return (render_markdown if markdown else render_table)(
        ["CPU (runs)", "template", "stream", "altmap only", "this series", "auto"], rows) + "\n"
