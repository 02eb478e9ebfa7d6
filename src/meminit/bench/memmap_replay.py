"""The real-CPU replay of a run's memmap (issue 35, item 3): the struct pages one bind of a
memmap scenario initialised, written again by meminit-bench on this machine's own CPU.

A guest under TCG runs on an emulated CPU: its timings show that every mode ran and gave
the same struct pages, not how fast a mode is on a real one. The bench (bench/, C) writes
the same 64-byte struct pages in each mode's order (6.12's per-page path, the series'
template copies, its MOVNTDQ streaming, the learning auto) in the kernel's chunks, into
memory placed as the kernel's memmap is: an altmap memmap (fsdax map=dev, devdax) lives in
the device, where nothing has zeroed or read it (the bench's `cold`); a DRAM memmap
(device-private) has just been allocated, so zeroed (`warm`). One bench run per distinct
memmap (size, order, placement, threads), the modes interleaved; each median rate becomes
ms per bind: the bytes of struct pages one bind writes, over that rate.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from meminit.bench import benchbin
from meminit.core import hostinfo, proc
from meminit.bench.bench_stats import STREAMING, summarize
from meminit.core.errors import MeminitError
from meminit.core.tables import render_table

STRUCT_PAGE_BYTES = 64  # sizeof(struct page) on x86-64 (bench/README.md, "The record")
# the bench's fill -> the series' mode it replays
MODES = {"slow": "slow", "template": "template", STREAMING: "streaming", "auto": "auto"}
BASE = "base"  # 6.12's per-page path on one thread: the bench's slow fill with threads=1
ORDER = (BASE, *MODES.values())
REPS = 5
CHUNK = "128M"  # the series' chunk: one memory section of device memory (patch 10)
SIZE_ALIGN = 32 << 10  # the bench fills whole order-9 compounds of records
LAYOUTS = {0: "o0", 9: "o9"}
VERIFY_SIZE = "1M"
BUSY_S = 1.0  # how long the host's CPUs are watched for other work before the replay
BUSY_MAX = 0.1  # busier than this, the figures are disturbed (the threaded ones most)


@dataclass(frozen=True)
class Memmap:
    """What one bind of a scenario initialised, and where, as the replay writes it again."""

    scenario: str
    pages: int  # struct pages of one range
    ranges: int  # ranges one bind initialises (test_hmm: one per 256 MiB chunk)
    order: int  # compound order: 0, or 9 for 2 MiB pages
    altmap: bool  # the memmap lives in the device (cold), else in DRAM just allocated (warm)
    pgmap_type: str  # the bench's --pgmap-type: fsdax, generic (devdax), private
    threads: int
    threads_from: str  # where the thread count comes from, for the table
    # the series' modes to replay: those its kernel has (auto only with the rfc/auto part)
    modes: tuple[str, ...] = tuple(MODES.values())

    @property
    def range_bytes(self) -> int:
        return self.pages * STRUCT_PAGE_BYTES

    @property
    def bench_size(self) -> int:
        """The bench's fill size: the range's struct pages, up to whole 32 KiB (its unit)."""
        return max(SIZE_ALIGN, -(-self.range_bytes // SIZE_ALIGN) * SIZE_ALIGN)

    @property
    def layout(self) -> str:
        if self.order not in LAYOUTS:
            raise MeminitError(f"{self.scenario}: the bench replays orders 0 and 9, not {self.order}")
        return LAYOUTS[self.order]

    @property
    def dest(self) -> str:
        return "cold" if self.altmap else "warm"

    @property
    def placement(self) -> str:
        return "altmap: cold" if self.altmap else "DRAM: just allocated"

    def key(self) -> tuple:
        return (self.bench_size, self.layout, self.dest, self.pgmap_type, self.threads)


def kernel_threads(pages: int, most: int) -> int:
    """The series' thread count for one range (patch 10): one below 16 MiB of struct pages,
    else min(most, chunks, 16), a chunk being 128 MiB of device memory (32768 pages)."""
    if pages * STRUCT_PAGE_BYTES < 16 << 20:
        return 1
    return max(1, min(most, -(-pages // 32768), 16))


def command(binary: Path, memmap: Memmap, reps: int) -> list[str]:
    """The bench run of one memmap: every mode at its threads, and slow on one thread (base)."""
    threads = "1" if memmap.threads == 1 else f"1,{memmap.threads}"
    return [str(binary), "run", "--sizes", str(memmap.bench_size), "--reps", str(reps), "--threads", threads,
            "--layouts", memmap.layout, "--dests", memmap.dest,
            "--fill", ",".join(f for f, mode in MODES.items() if mode in memmap.modes), "--clear", "none",
            "--fault", "none", "--split", "chunked", "--chunk", CHUNK, "--pgmap-type", memmap.pgmap_type]


def replay(memmaps: list[Memmap], reps: int = REPS, log: Path | None = None) -> list[dict]:
    """The replay of each memmap, in order: the bench built and verified, then run once per
    distinct memmap; its output lines go to `log`. Raises MeminitError naming what failed."""
    binary = benchbin.build()
    load = hostinfo.loadavg()
    busy = hostinfo.cpu_busy(BUSY_S)  # other work, before ours starts
    cpu = hostinfo.parse_cpuinfo(hostinfo.read_text("/proc/cpuinfo"))
    cpu_label = f"{cpu['cpu_model']}, family {cpu.get('cpu_family', '?')} model {cpu.get('cpu_model_number', '?')}"
    checked = benchbin.verify(VERIFY_SIZE)
    if checked.returncode != 0:
        failures = [line for line in checked.stdout.splitlines() if not line.startswith("ok ")]
        raise MeminitError("meminit-bench verify failed: a strategy does not write what the slow path writes, "
                           "so its timings replay nothing:\n" + proc.tail("\n".join(failures) + checked.stderr))
    runs: dict[tuple, tuple[list[str], benchbin.Output]] = {}
    raw = []
    for memmap in memmaps:
        if memmap.key() not in runs:
            cmd = command(binary, memmap, reps)
            done = proc.run(cmd, f"meminit-bench, the real-CPU replay of {memmap.scenario}'s memmap")
            runs[memmap.key()] = (cmd, benchbin.parse_output(done.stdout))
            raw.append(f"# {' '.join(cmd)}\n{done.stdout}")
    if log:
        log.write_text("".join(raw))
    return [{**figures(memmap, *runs[memmap.key()], reps), "cpu": cpu_label, "loadavg": load,
             "busy_before": busy} for memmap in memmaps]


def figures(memmap: Memmap, cmd: list[str], out: benchbin.Output, reps: int) -> dict:
    """One memmap's replay for result.json: ms per bind of base and every mode, and the samples."""
    rows = [r for r in summarize(out.samples) if r.get("kind") == "fill" and r.get("size") == memmap.bench_size
            and r.get("layout") == memmap.layout and r.get("dest") == memmap.dest]

    def case(strategy: str, threads: int) -> dict:
        row = next((r for r in rows if r["strategy"] == strategy and r.get("threads", 1) == threads), None)
        if row is None:
            why = "; ".join(f"{s.get('strategy')}: {s.get('reason')}" for s in out.skips) or "no sample line"
            raise MeminitError(f"{' '.join(cmd)}: no {strategy} fill on {threads} thread(s) ({why})")
        per_bind = memmap.ranges * memmap.range_bytes / 1e6  # bytes -> ms at 1 GB/s
        ms = {"ms": per_bind / row["median"], "min": per_bind / row["max"], "max": per_bind / row["min"],
              "gbps": row["median"], "n": row["n"]}
        if "streamed_share" in row:
            ms["streamed_share"] = row["streamed_share"]
        return ms

    modes = {BASE: case("slow", 1), **{mode: case(fill, memmap.threads) for fill, mode in MODES.items()
                                       if mode in memmap.modes}}
    # the bench's own measure of disturbance: the share of a one-thread sample's wall time
    # its thread was on a CPU (below 95 %, other load took the CPU; bench/README.md)
    alone = [s["cpu_ns"] / s["ns"] for s in out.samples if s.get("threads") == 1 and isinstance(s.get("cpu_ns"), int)]
    return {"memmap": asdict(memmap), "bench_size": memmap.bench_size, "layout": memmap.layout,
            "dest": memmap.dest, "reps": reps, "command": cmd, "modes": modes,
            "on_cpu": statistics.median(alone) if alone else None,
            "bench_info": out.info, "samples": out.samples}


def _pages(memmap: dict) -> str:
    pages = f"{memmap['pages']} pages, {memmap['pages'] * STRUCT_PAGE_BYTES / (1 << 20):.1f} MiB"
    return pages if memmap["ranges"] == 1 else f"{memmap['ranges']} x {pages}"


def speedups(replay: dict) -> dict[str, tuple[float, float]]:
    """Per mode: its speed-up over the replay's slow and over its base (higher is better)."""
    modes = replay["modes"]
    return {mode: (modes["slow"]["ms"] / fig["ms"], modes[BASE]["ms"] / fig["ms"]) for mode, fig in modes.items()}


def replayed(replay: dict) -> list[str]:
    """The replay's modes in the table's order (base first; runs before the parts have all)."""
    return [m for m in ORDER if m in replay["modes"]]


def mode_label(mode: str, fig: dict) -> str:
    if mode == BASE:
        return "base (per page, 1 thread)"
    if "streamed_share" in fig:
        return f"{mode} (streamed {fig['streamed_share']:.0%})"
    return mode


def rows(replays: list[tuple[str, dict]]) -> tuple[list[str], list[list[str]]]:
    header = ["scenario", "memmap per bind", "order", "memmap in", "threads", "mode", "ms per bind",
              "min", "max", "x slow", "x base"]
    out = []
    for name, replay in replays:
        memmap, up = replay["memmap"], speedups(replay)
        for mode in replayed(replay):
            fig = replay["modes"][mode]
            threads = 1 if mode == BASE else memmap["threads"]
            out.append([name, _pages(memmap), str(memmap["order"]), Memmap(**memmap).placement, str(threads),
                        mode_label(mode, fig), f"{fig['ms']:.2f}", f"{fig['min']:.2f}", f"{fig['max']:.2f}",
                        f"{up[mode][0]:.2f}x", f"{up[mode][1]:.2f}x"])
    return header, out


def render(replays: list[tuple[str, dict]], accel: str | None, host_cpu: str) -> str:
    """The replay's table, headed by what it is and where each number comes from."""
    first = replays[0][1]
    if accel == "tcg":
        role = ("These are the performance figures: the guest's table above ran on an emulated CPU (TCG); "
                "it shows that every mode ran and gave the same struct pages, not how fast a mode is.")
    else:
        role = f"Beside the guest's timings above ({accel}), which are the figures, for comparison."
    threads = "; ".join(f"{name} {r['memmap']['threads']}: {r['memmap']['threads_from']}" for name, r in replays)
    notes = [
        "(memmap per bind: the struct pages the guest's kernel initialised per bind, 64 bytes each, written "
        "in each mode's order, in the kernel's chunks of 128 MiB of device memory;",
        " memmap in: altmap, in the device: cold, in no cache and never zeroed; DRAM: just allocated, so zeroed;",
        " x slow, x base: speed-up over the replay's slow and base rows, higher is better; base: the "
        "per-page path (the bench replays 6.12's writes) on one thread, as the base kernel runs it;",
        f" threads: {threads})",
    ]
    if any(not r["memmap"]["altmap"] for _, r in replays):
        notes.insert(-1, " DRAM memmap: the kernel's auto reads its probe pieces back where the owner walks the "
                         "memmap next (test_hmm); the replay's auto does not;")
    quiet = ""
    busy = first.get("busy_before")
    if busy is not None:
        quiet = f" Other work kept the CPUs {busy:.0%} busy in the second before it"
        quiet += (": these figures are disturbed, the threaded ones most; run again on a quiet host."
                  if busy > BUSY_MAX else ".")
    shares = [r["on_cpu"] for _, r in replays if r.get("on_cpu") is not None]
    if shares and min(shares) < 0.95:
        quiet += (f" Its one-thread samples were {min(shares):.0%} on CPU: other load took the CPU, so these "
                  "figures are disturbed.")
    return "\n".join([
        f"Real CPU ({first.get('cpu', host_cpu)}): the same memmap written again in userspace by meminit-bench "
        f"(bench/), {first['reps']} interleaved repetitions: ms per bind, median and range.{quiet}",
        role,
        render_table(*rows(replays)),
        *notes,
    ])


def plot_panel(ax: Any, name: str, replay: dict, host_cpu: str) -> None:
    """One scenario's replay: ms per bind per mode (median, min-max), each bar's speed-up over slow."""
    modes = replay["modes"]
    up = speedups(replay)
    shown = replayed(replay)
    xs = range(len(shown))
    heights = [modes[m]["ms"] for m in shown]
    errors = [[modes[m]["ms"] - modes[m]["min"] for m in shown], [modes[m]["max"] - modes[m]["ms"] for m in shown]]
    bars = ax.bar(list(xs), heights, 0.6, yerr=errors, capsize=3, color="tab:green", label="replay, median")
    for bar, mode in zip(bars, shown):
        if not math.isnan(up[mode][0]):
            ax.annotate(f"{up[mode][0]:.2f}x slow", (bar.get_x() + bar.get_width() / 2, modes[mode]["max"]),
                        xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize="small")
    threads = replay["memmap"]["threads"]
    ax.set_xticks(list(xs), ["base (1 thread)" if m == BASE else f"{m} ({threads} thr.)" for m in shown],
                  rotation=30, ha="right")
    ax.set_ylabel("ms per bind, median and range (lower is better)")
    ax.set_ylim(top=max(modes[m]["max"] for m in shown) * 1.15)
    ax.set_title(f"{name}: REAL CPU, userspace replay of the same memmap\n({host_cpu}, "
                 f"{Memmap(**replay['memmap']).placement}, {replay['reps']} reps)", fontsize="medium")
