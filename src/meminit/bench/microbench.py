"""Userspace replay of the memmap-init and huge-page-clearing write patterns (issue 5).

``meminit microbench`` (commands/microbench.py) builds bench/ (C, see bench/README.md), runs
``bench/build/meminit-bench run`` with every strategy interleaved (ABCABC),
and writes ``results/microbench-<UTC stamp>/``: result.json (machine, load,
options, every raw sample, the summary), table.txt (what is printed) and
plot.png.  Every run first runs the correctness check (every record-fill
strategy byte-equal to the slow path, every clear strategy exact) and measures
nothing if it fails; ``--verify`` runs only the check.

This module runs it (run(MicrobenchRequest)); the benchmark's output format is benchbin,
the statistics bench_stats, the tables and plot bench_render.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meminit.core import proc, results
from meminit.bench.bench_render import plot, render_report
from meminit.bench.bench_stats import (STREAMING, TWIN_SUFFIX, add_clear_612, add_ratios, auto_rows, crossover, machine_limit,
                                 summarize, thread_scaling)
from meminit.bench.benchbin import BINARY, Output, parse_output, verify
from meminit.core.errors import MeminitError
from meminit.core.hostinfo import loadavg, machine_info
from meminit.core.hugetlb import HugetlbReservation, hugetlb_plan
from meminit.core.units import format_size, parse_size


FILL_STRATEGIES = "slow,slow-saferet,template,movnti,movntdq,avx512nt,repmovsb,auto-altmap,auto-dram"
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
    "dests": ("cold,warm,walked,readback", "cold,warm,walked,readback"),
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
# kernel's chunks, in every size, layout and cache state, on 1 and 2 threads (order 9 as the
# series writes it, o9pre, since 2026-11-29; o9dedup: the deduplicated DRAM memmap of devdax,
# which nobody walks: cold and just zeroed); nothing else; and
# the twins of template and streaming, so that the sweep measures the bar's own noise (BEST_TWIN)
AUTO_SWEEP = {"fill": f"slow,template,{STREAMING},auto,template{TWIN_SUFFIX},{STREAMING}{TWIN_SUFFIX}",
              "threads": "1,2", "split": "chunked", "layouts": "o0,o9pre,o9dedup",
              "dests": "cold,warm,walked", "clear": "none", "fault": "none", "scale_fill": "none"}

# ---------------------------------------------------------------------- run

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


@dataclass(frozen=True)
class MicrobenchRequest:
    """What `meminit microbench` was asked. `profile`: the PROFILES options given (one absent
    or None: the profile's value, --quick's or --auto-sweep's); sizes as text, which the tool reads."""

    quick: bool = False
    auto_sweep: bool = False
    profile: dict[str, Any] = field(default_factory=dict)
    movsb_block: str = "4K"
    pgmap_type: str = "fsdax"
    clear_fault: str = "middle"
    auto_altmap_min: str | None = None
    auto_dram_min: str | None = None
    # the learning auto's walk hint: "capped" (half the LLC and 4 MiB, patch 11), "llc", "full",
    # "fraction" (before) or "aged" (a candidate)
    auto_walk_share: str = "capped"
    # rounds this many LLCs into a range use the late margin (bench/src/auto.h AUTO_LATE_LLCS)
    auto_late_llcs: int = 2
    # the late rounds keep template only if its piece is 1/auto_late_margin faster (AUTO_LATE_MARGIN_DEN)
    auto_late_margin: int = 4
    # on several threads a round from chunk 2 on turns the others' verdict only if the other mode is
    # 1/auto_switch_margin faster (AUTO_SWITCH_MARGIN_DEN; 0: the 1/32 margin, before 2026-11-28)
    auto_switch_margin: int = 4
    # the order of a round's pieces (bench/src/auto.h auto_stream_first), patch 11's
    auto_order: str = "lead-first"
    # a round's verdict serves the same slot of the next N - 1 ranges of its kind and size (patch
    # 11's MEMMAP_AUTO_REUSE; 0: every range learns; bench/src/auto.h AUTO_MEMO)
    auto_memo: int = 8
    # a round whose pieces tie within a quarter times a span of this many struct pages in each
    # mode, which decides (patch 11's MEMMAP_AUTO_SPAN_PAGES; bench/src/auto.h AUTO_SPAN_RECORDS;
    # 0: none, as patch 11 before 2026-11-29)
    auto_span: int = 4096
    nice: int = 0
    out: Path | None = None  # None: results/microbench-<UTC stamp>
    verify: bool = False
    verify_size: str = "4M"


def option_values(req: MicrobenchRequest) -> dict:
    idx = 1 if req.quick else 0
    preset = AUTO_SWEEP if req.auto_sweep else {}
    return {name: (req.profile[name] if req.profile.get(name) is not None else preset.get(name, prof[idx]))
            for name, prof in PROFILES.items()}


def bench_command(opts: dict, fault_kinds: list[str], movsb_block: str, pgmap_type: str,
                  auto_min: tuple[str | None, str | None] = (None, None),
                  clear_fault: str = "middle", auto_walk_share: str = "capped",
                  auto_late_llcs: int = 2, auto_late_margin: int = 4,
                  auto_order: str = "lead-first", auto_memo: int = 8,
                  auto_switch_margin: int = 4, auto_span: int = 4096) -> list[str]:
    cmd = [str(BINARY), "run", "--sizes", opts["sizes"], "--reps", str(opts["reps"]),
           "--threads", opts["threads"], "--layouts", opts["layouts"], "--dests", opts["dests"],
           "--fill", opts["fill"] or "none", "--clear", opts["clear"] or "none",
           "--clear-size", opts["clear_size"], "--fault", ",".join(fault_kinds) or "none",
           "--fault-size", opts["fault_size"], "--min-bytes", opts["min_bytes"],
           "--movsb-block", movsb_block, "--pgmap-type", pgmap_type,
           "--split", opts.get("split") or "even", "--chunk", opts.get("chunk") or "128M",
           "--clear-fault", clear_fault, "--auto-walk-share", auto_walk_share,
           "--auto-late-llcs", str(auto_late_llcs), "--auto-late-margin", str(auto_late_margin),
           "--auto-order", auto_order, "--auto-memo", str(auto_memo),
           "--auto-switch-margin", str(auto_switch_margin), "--auto-span", str(auto_span)]
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


def run(req: MicrobenchRequest) -> int:
    if req.verify:
        checked = verify(req.verify_size)
        sys.stdout.write(checked.stdout)
        sys.stderr.write(checked.stderr)
        if checked.returncode != 0:
            raise MeminitError("verify failed: a strategy does not reproduce the slow path (see FAIL lines)")
        return 0
    # a strategy that writes the wrong struct pages has no speed worth printing
    print("meminit: verifying every strategy against the slow path first", file=sys.stderr, flush=True)
    checked = verify(req.verify_size)
    if checked.returncode != 0:
        failures = [line for line in checked.stdout.splitlines() if not line.startswith("ok ")]
        raise MeminitError("verify failed, nothing measured: a strategy does not reproduce the slow path:\n"
                           + "\n".join(failures[-15:] + checked.stderr.strip().splitlines()[-5:]))
    opts = option_values(req)
    if int(opts["reps"]) < 1:
        raise MeminitError("--reps must be at least 1")
    for s in str(opts["sizes"]).split(","):
        if parse_size(s) % 32768:
            raise MeminitError(f"fill size {s} must be a multiple of 32K (one order-9 compound of records)")
    fault_size = parse_size(opts["fault_size"])
    fault_kinds = [k for k in str(opts["fault"]).split(",") if k and k != "none"]

    run_dir = req.out or results.new_run_dir("microbench")
    run_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = loadavg()
    print(f"meminit: microbench -> {run_dir}  (load average {load_start})", file=sys.stderr, flush=True)

    plan = hugetlb_plan(fault_kinds, fault_size)
    auto_min = (req.auto_altmap_min, req.auto_dram_min)
    started = time.monotonic()
    sections: list[tuple[str, list[str], list[str]]] = []   # (name, command, output lines)
    with HugetlbReservation(plan) as resv:
        run_kinds = [k for k in fault_kinds if k not in resv.skipped]
        cmds = [("", bench_command(opts, run_kinds, req.movsb_block, req.pgmap_type, auto_min,
                                   req.clear_fault, req.auto_walk_share, req.auto_late_llcs,
                                   req.auto_late_margin, req.auto_order, req.auto_memo,
                                   req.auto_switch_margin, req.auto_span))]
        scale = scaling_command(opts, req.movsb_block, req.pgmap_type, auto_min)
        if scale:
            cmds.append(("scaling", scale))
        for name, cmd in cmds:
            lines: list[str] = []
            sections.append((name, cmd, lines))
            # the child runs in its own session, away from Ctrl-C: stream() stops it
            # on the interrupt, before the hugetlb pool is restored
            rc = proc.stream(cmd, on_line=lines.append, merge_stderr=False,
                             preexec=lambda: own_session(req.nice))
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
        "options": {**opts, "nice": req.nice, "movsb_block": req.movsb_block,
                    "pgmap_type": req.pgmap_type, "quick": req.quick,
                    "auto_altmap_min": req.auto_altmap_min, "auto_dram_min": req.auto_dram_min,
                    "auto_walk_share": req.auto_walk_share, "auto_late_llcs": req.auto_late_llcs,
                    "auto_late_margin": req.auto_late_margin, "auto_order": req.auto_order,
                    "auto_memo": req.auto_memo, "auto_switch_margin": req.auto_switch_margin,
                    "auto_span": req.auto_span, "commands": [c for _n, c, _l in sections]},
        "bench_info": out.info,
        "limit": limit,
        "summary": rows,
        "thread_scaling": thread_scaling(rows),
        "crossover": [{**c, "ratios": {format_size(k): v for k, v in c["ratios"].items()}}
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
