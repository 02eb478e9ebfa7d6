"""The fault-latency scenario: scheduling latency beside huge-page clears, per preemption model.

Under the none and voluntary preemption models `folio_zero_user()` is preempted only at
its reschedule points: stock 6.12 has one before every 4 KiB page, the series one per
clearing unit (patch 14). This scenario measures what that costs a task that wants the
CPU. In the guest, CPU 1 runs a loop that allocates and clears 1 GiB hugetlb pages
(`fallocate` on hugetlbfs, which clears through `folio_zero_user()`), and cyclictest's
SCHED_FIFO thread on the same CPU, which records how late its timer wakeups run. With
`hog` on, CPU 0 writes memory all the while (`dd` from /dev/zero into a 256 MiB buffer).

Every kernel boots once per preemption model (`preempt=` of PREEMPT_DYNAMIC). On a
series kernel the cells cycle through clearing units, set through the TEST ONLY debugfs
override (patch 17), interleaved and repeated in rounds; "default" is the kernel's own
choice. Each cell reports cyclictest's worst, 99th-percentile and mean latency and the
time each 1 GiB clear took. With `trace_us`, a diagnostic run: the scheduler, interrupt
and timer events are traced and cyclictest stops the trace (and its cell) at the first
wakeup later than that. The trace is kept, and the longest stretch of CPU 1's without
any event says what the CPU did meanwhile: timer interrupts arriving while one task
keeps the CPU is code that does not reschedule; no event at all is interrupts off, or a
vCPU the host did not run; no event on the other CPU either points at the emulator or
host.
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from meminit.core import kernels, plotting, results
from meminit.guest import vm
from meminit.core.units import GIB, parse_size
from meminit.core.errors import MeminitError
from meminit.scenarios.base import Boot, RunRequest, Scenario
from meminit.core.tables import render_table

SCENARIO = "fault-latency"
MODELS = ("none", "voluntary", "full")
DEFAULT_UNIT = "default"
HOGS = ("off", "on")
UNIT_KNOB = "/sys/kernel/debug/folio_zero_user_unit_pages"
PREEMPT_FILE = "/sys/kernel/debug/sched/preempt"
PAGE_SIZE = 4096
CLEAR_BYTES = GIB
GUEST_MEMORY = 4 * GIB  # 1 GiB hugetlb page (boot-time: needs high RAM to spare), hog, the rest
HOG_BUFFER = "256M"
# cyclictest: SCHED_FIFO priority, timer interval and histogram range in µs
PRIORITY = 95
INTERVAL_US = 1000
HISTOGRAM_US = 200_000
TRACEFS = "/sys/kernel/tracing"
# what a CPU does, as far as the run kernels' tracepoints tell (no function tracer there)
TRACE_EVENTS = ("sched/sched_switch", "sched/sched_wakeup", "irq/irq_handler_entry",
                "irq/softirq_entry", "irq_vectors/local_timer_entry", "timer/hrtimer_expire_entry")
TRACE_BUFFER_KB = 32768  # per CPU: a 10 s cell writes a few MiB

@dataclass(frozen=True)
class Cell:
    """One cyclictest run: `unit` is DEFAULT_UNIT or a size such as 2M."""

    kernel: str
    model: str
    round: int
    hog: str
    unit: str

    @property
    def stem(self) -> str:
        return f"lat-{self.kernel}-{self.model}-r{self.round}-hog{self.hog}-{self.unit}"


def parse_units(text: str) -> list[str]:
    """Comma-separated units: `default` or sizes that are whole pages (4K, 2M, 32M)."""
    clear_units = [u.strip() for u in text.split(",") if u.strip()]
    for unit in clear_units:
        if unit != DEFAULT_UNIT and unit_pages(unit) < 1:
            raise MeminitError(f"clearing unit {unit}: not a positive number of 4 KiB pages")
    if not clear_units:
        raise MeminitError("no clearing unit given")
    return clear_units


def unit_pages(unit: str) -> int:
    """Pages for the debugfs override; 0 is the kernel's own choice."""
    if unit == DEFAULT_UNIT:
        return 0
    size = parse_size(unit)
    if size % PAGE_SIZE:
        raise MeminitError(f"clearing unit {unit} is not a multiple of 4K")
    return size // PAGE_SIZE


def parse_models(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise MeminitError(f"preemption models must be among {', '.join(MODELS)}; got {text!r}")
    return models


def boot_parameters(model: str) -> list[str]:
    return ["hugepagesz=1G", "hugepages=1", f"preempt={model}"]


def cells(kernel: str, model: str, clear_units: list[str], hogs: list[str], rounds: int) -> list[Cell]:
    """Rounds outermost, then hog, then unit: every unit meets the same conditions in turn."""
    return [Cell(kernel, model, r, hog, unit) for r in range(1, rounds + 1) for hog in hogs for unit in clear_units]


def guest_script(kernel: str, model: str, clear_units: list[str], hogs: list[str], rounds: int,
                 seconds: int, out_dir: Path, trace_us: int = 0) -> str:
    """Check the model and the pool, then run every cell; a unit needs the debugfs knob.
    With trace_us, each cell stops at the first wakeup that late and keeps the trace."""
    runs = "\n".join(f"cell {shlex.quote(c.stem)} {unit_pages(c.unit)} {c.hog}"
                     for c in cells(kernel, model, clear_units, hogs, rounds))
    needs_knob = any(u != DEFAULT_UNIT for u in clear_units)
    events = " ".join(TRACE_EVENTS)
    return f"""#!/bin/bash
# {SCENARIO}: generated by meminit (scenarios/fault_latency.py)
set -eu
out={shlex.quote(str(out_dir))}
knob={UNIT_KNOB}
model=$(sed -n 's/.*(\\([a-z]*\\)).*/\\1/p' {PREEMPT_FILE})
if [ "$model" != {model} ]; then
    echo "booted with preempt={model} but the kernel runs '$model' ({PREEMPT_FILE})" >&2; exit 3
fi
if {'true' if needs_knob else 'false'} && [ ! -e "$knob" ]; then
    echo "$knob missing: only a series kernel with CONFIG_FOLIO_ZERO_USER_UNIT_DEBUGFS sets units" >&2
    exit 3
fi
mnt=$(mktemp -d)
mount -t hugetlbfs -o pagesize=1G none "$mnt"
if [ "$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages)" -lt 1 ]; then
    echo "no free 1 GiB hugetlb page" >&2; exit 3
fi
stop="$mnt.stop"
trace_us={trace_us}
T={TRACEFS}
if [ "$trace_us" -gt 0 ]; then
    mountpoint -q $T || mount -t tracefs nodev $T
    echo 0 > $T/tracing_on
    echo {TRACE_BUFFER_KB} > $T/buffer_size_kb
    for e in {events}; do
        [ -e $T/events/$e/enable ] || {{ echo "kernel has no trace event $e" >&2; exit 3; }}
        echo 1 > $T/events/$e/enable
    done
fi

# CPU 1: allocate and clear 1 GiB pages until $stop exists; ns per clear to $1
clear_loop() {{
    while [ ! -e "$stop" ]; do
        t0=$(date +%s%N)
        fallocate -l 1G "$mnt/page"
        t1=$(date +%s%N)
        rm -f "$mnt/page"
        echo $((t1 - t0)) >> "$1"
    done
}}

cell() {{  # stem, unit pages (0: the kernel's choice), hog on/off
    local hog_pid=
    if [ -e "$knob" ]; then echo "$2" > "$knob"; fi
    rm -f "$stop" "$out/$1.clears"
    if [ "$3" = on ]; then
        taskset -c 0 dd if=/dev/zero of=/dev/null bs={HOG_BUFFER} 2>/dev/null &
        hog_pid=$!
    fi
    taskset -c 1 bash -c "$(declare -f clear_loop); stop=$stop mnt=$mnt clear_loop $out/$1.clears" &
    local loop_pid=$!
    sleep 1
    local breaktrace=
    if [ "$trace_us" -gt 0 ]; then
        echo > $T/trace; echo 1 > $T/tracing_on
        breaktrace="-b $trace_us --tracemark"
    fi
    cyclictest -m -q -p {PRIORITY} -a 1 -t 1 -i {INTERVAL_US} -D {seconds} -h {HISTOGRAM_US} \
        $breaktrace --json="$out/$1.json" > /dev/null
    touch "$stop"
    if [ "$trace_us" -gt 0 ]; then
        # cyclictest -b turns tracing off when it breaks: then keep what the CPUs did
        if [ "$(cat $T/tracing_on)" = 0 ]; then cat $T/trace > "$out/$1.trace"; fi
        echo 0 > $T/tracing_on
    fi
    wait "$loop_pid"
    if [ -n "$hog_pid" ]; then kill "$hog_pid"; wait "$hog_pid" || true; fi
    echo "$1 done" >&2
}}

{runs}
if [ -e "$knob" ]; then echo 0 > "$knob"; fi
umount "$mnt"
"""


def percentile_us(histogram: dict[str, int], cycles: int, maximum: int, fraction: float) -> int:
    """The latency that `fraction` of the cycles did not exceed, from cyclictest's µs histogram;
    cycles beyond its range (missing from it) count as the maximum."""
    wanted = fraction * cycles
    seen = 0
    for us, count in sorted((int(k), v) for k, v in histogram.items()):
        seen += count
        if seen >= wanted:
            return us
    return maximum


def read_cell(cell: Cell, out_dir: Path) -> dict:
    """cyclictest's figures and the clear times of one cell; fails on what is missing."""
    ct_file, clears_file = out_dir / f"{cell.stem}.json", out_dir / f"{cell.stem}.clears"
    if not ct_file.exists():
        raise MeminitError(f"{SCENARIO}: no cyclictest result {ct_file}")
    data = json.loads(ct_file.read_text())
    threads = list(data.get("thread", {}).values())
    if len(threads) != 1 or not threads[0].get("cycles"):
        raise MeminitError(f"{SCENARIO}: {ct_file} has no cyclictest cycles")
    clears = [int(line) for line in clears_file.read_text().split()] if clears_file.exists() else []
    if not clears:
        raise MeminitError(f"{SCENARIO}: no 1 GiB clear finished in {cell.stem} ({clears_file})")
    thread = threads[0]
    histogram = thread.get("histogram") or {}
    if not histogram:
        raise MeminitError(f"{SCENARIO}: {ct_file} has no latency histogram (cyclictest -h)")
    return {"kernel": cell.kernel, "model": cell.model, "round": cell.round, "hog": cell.hog,
            "unit": cell.unit, "max_us": thread["max"], "avg_us": thread["avg"],
            "p99_us": percentile_us(histogram, thread["cycles"], thread["max"], 0.99),
            "cycles": thread["cycles"], "clear_ms": [ns / 1e6 for ns in clears]}


_TRACE_LINE = re.compile(r"^\s*(?P<task>.+?-\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<flags>\S+)\s+"
                         r"(?P<ts>\d+\.\d+):\s+(?P<event>.*)$")


@dataclass(frozen=True)
class Silence:
    """The longest stretch of one CPU's trace without an event, the events around it, and
    how many events the other CPUs traced meanwhile."""

    ms: float
    before: str
    after: str
    break_line: str  # cyclictest's tracemark, "" if the trace has none
    others: int  # events of other CPUs inside the silence: 0 when the whole guest stood still


def longest_silence(trace: str, cpu: int = 1) -> Silence | None:
    """Of `cpu` in ftrace's text output, up to cyclictest's break mark."""
    events: list[tuple[float, str]] = []
    others: list[float] = []
    mark = ""
    for line in trace.splitlines():
        m = _TRACE_LINE.match(line)
        if not m:
            continue
        text = f"{m.group('ts')} {m.group('task')} [{m.group('flags')}] {m.group('event')}"
        if "hit latency threshold" in m.group("event"):
            mark = text
            break
        if int(m.group("cpu")) == cpu:
            events.append((float(m.group("ts")), text))
        else:
            others.append(float(m.group("ts")))
    if len(events) < 2:
        return None
    gap, i = max((b[0] - a[0], i) for i, (a, b) in enumerate(zip(events, events[1:])))
    start, end = events[i][0], events[i + 1][0]
    return Silence(gap * 1e3, events[i][1], events[i + 1][1], mark,
                   sum(start < t < end for t in others))


def trace_report(cell: Cell, out_dir: Path) -> dict:
    """What a traced cell's CPU 1 trace says; {} when the cell did not break."""
    path = out_dir / f"{cell.stem}.trace"
    if not path.exists():
        return {}
    silence = longest_silence(path.read_text(errors="replace"))
    if silence is None:
        raise MeminitError(f"{SCENARIO}: {path} holds fewer than two events")
    return {"trace": path.name, "silence_ms": round(silence.ms, 3), "silence_before": silence.before,
            "silence_after": silence.after, "break": silence.break_line,
            "silence_other_cpu_events": silence.others}


def summarize(samples: list[dict]) -> list[dict]:
    """One row per kernel, model, hog and unit: worst over rounds, and the clears' GB/s."""
    keys = dict.fromkeys((s["model"], s["hog"], s["kernel"], s["unit"]) for s in samples)
    rows = []
    for model, hog, kernel, unit in keys:
        mine = [s for s in samples if (s["model"], s["hog"], s["kernel"], s["unit"]) == (model, hog, kernel, unit)]
        clear_ms = [ms for s in mine for ms in s["clear_ms"]]
        rows.append({"model": model, "hog": hog, "kernel": kernel, "unit": unit,
                     "max_us": [s["max_us"] for s in mine], "avg_us": [s["avg_us"] for s in mine],
                     "p99_us": [s["p99_us"] for s in mine],
                     "clears": len(clear_ms),
                     "clear_gbps": CLEAR_BYTES / 1e9 / (statistics.median(clear_ms) / 1e3)})
    base_worst = {(r["model"], r["hog"]): max(r["max_us"]) for r in rows
                  if r["kernel"] == "base" and r["unit"] == DEFAULT_UNIT}
    for row in rows:
        ref = base_worst.get((row["model"], row["hog"]))
        row["vs_base"] = max(row["max_us"]) / ref if ref else None
    order = {m: i for i, m in enumerate(MODELS)}
    rows.sort(key=lambda r: (order.get(r["model"], 9), r["hog"], r["kernel"] != "base",
                             unit_pages(r["unit"]) if r["unit"] != DEFAULT_UNIT else -1))
    return rows


def table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        ratio = f"{r['vs_base']:.1f}" if r["vs_base"] is not None else "-"
        out.append([r["model"], r["hog"], r["kernel"], r["unit"], str(max(r["max_us"])),
                    "/".join(str(m) for m in r["max_us"]),
                    str(max(r["p99_us"])) if r.get("p99_us") else "-",  # runs before p99 was kept
                    f"{statistics.fmean(r['avg_us']):.0f}", str(r["clears"]), f"{r['clear_gbps']:.2f}",
                    ratio])
    return render_table(["preempt", "hog", "kernel", "unit", "worst µs", "per round", "p99 µs",
                         "mean µs", "clears", "clear GB/s", "worst vs base"], out)


def plot(rows: list[dict], out: Path, title: str) -> Path:
    """Worst latency per unit, one panel per preemption model, hog off and on side by side."""
    plt = plotting.pyplot()
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models):
        mine = [r for r in rows if r["model"] == model]
        labels = list(dict.fromkeys(f"{r['kernel']}\n{r['unit']}" for r in mine))
        for i, hog in enumerate(HOGS):
            worst = {f"{r['kernel']}\n{r['unit']}": max(r["max_us"]) for r in mine if r["hog"] == hog}
            xs = [k + i * 0.4 for k, label in enumerate(labels) if label in worst]
            ax.bar(xs, [worst[label] for label in labels if label in worst], 0.4, label=f"hog {hog}")
        ax.set_xticks([k + 0.2 for k in range(len(labels))], labels, fontsize="x-small")
        ax.set_yscale("log")
        ax.set_title(f"preempt={model}", fontsize="small")
        ax.set_ylabel("worst wakeup latency, µs")
        ax.legend(fontsize="x-small")
    fig.suptitle(title, fontsize="small")
    return plotting.save(fig, out)


class FaultLatencyScenario(Scenario):
    name = SCENARIO
    kind = "latency"
    help = "cyclictest wakeup latency beside 1 GiB hugetlb clears, per preemption model"
    plot_file = "latency.png"
    linux_versions = (kernels.LTS.version,)
    elsewhere = ("its clearing-unit override is a 6.12 patch, and 7.3 has neither the none nor the "
                 "voluntary model on x86")

    def guest_memory(self, req: RunRequest) -> int:
        return req.guest.memory or GUEST_MEMORY

    def boots(self, req: RunRequest) -> list[Boot]:
        """One boot per preemption model and kernel, the kernels alternating within a model."""
        return [Boot(kernel=k, name=f"{self.name}-{k}-{model}", parameters=tuple(boot_parameters(model)),
                     cpus=max(req.guest.cpus, 2), detail=model) for model in req.preempt for k in req.kernels]

    @staticmethod
    def units_for(req: RunRequest, boot: Boot) -> list[str]:
        return req.latency_units if boot.kernel != "base" else [DEFAULT_UNIT]

    def guest_script(self, req: RunRequest, boot: Boot, run_dir: Path) -> str:
        return guest_script(boot.kernel, boot.detail, self.units_for(req, boot), req.latency_hog,
                            req.latency_rounds, req.latency_seconds, run_dir, req.latency_trace)

    def collect(self, req: RunRequest, boot: Boot, result: vm.BootResult, run_dir: Path) -> list[dict]:
        samples = []
        for cell in cells(boot.kernel, boot.detail, self.units_for(req, boot), req.latency_hog,
                          req.latency_rounds):
            sample = read_cell(cell, run_dir) | trace_report(cell, run_dir)
            if "trace" in sample:
                print(f"{cell.stem}: worst {sample['max_us']} µs; CPU 1's longest silence "
                      f"{sample['silence_ms']} ms ({sample['silence_other_cpu_events']} events of "
                      f"other CPUs meanwhile),\n  after  {sample['silence_before']}\n"
                      f"  before {sample['silence_after']}\n  ({run_dir / sample['trace']})",
                      file=sys.stderr, flush=True)
            samples.append(sample)
        return samples

    def entry(self, req: RunRequest, samples: dict[Boot, list[dict]]) -> dict:
        flat = [s for boot_samples in samples.values() for s in boot_samples]
        return {"samples": flat, "rows": summarize(flat), "seconds": req.latency_seconds,
                "rounds": req.latency_rounds}

    def render(self, entries: list[dict], result: dict) -> str:
        return "\n\n".join(f"{e['name']}: cyclictest (SCHED_FIFO, CPU 1) beside 1 GiB hugetlb clears on "
                            f"CPU 1, {e.get('rounds')} rounds x {e.get('seconds')} s per cell\n" + table(e["rows"])
                            for e in entries)

    def plot(self, entries: list[dict], result: dict, out: Path) -> Path:
        entry = entries[-1]
        title = results.accel_title(f"{entry['name']}: worst wakeup latency beside 1 GiB clears",
                                    result.get("accel"))
        return plot(entry["rows"], out, title)


SCENARIO_PLUGIN = FaultLatencyScenario()
