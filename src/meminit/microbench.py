"""Userspace replay of the memmap-init and huge-page-clearing write patterns (issue 5).

``meminit microbench`` builds bench/ (C, see bench/README.md), runs
``bench/build/meminit-bench run`` with every strategy interleaved (ABCABC),
and writes ``results/microbench-<UTC stamp>/``: result.json (machine, load,
options, every raw sample, the summary), table.txt (what is printed) and
plot.png.  Every run first runs the correctness check (every record-fill
strategy byte-equal to the slow path, every clear strategy exact) and measures
nothing if it fails; ``--verify`` runs only the check.

This module is the command; the benchmark's output format is benchbin, the
statistics bench_stats, the tables and plot bench_render.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from meminit import proc, results, units
from meminit.commands import options
from meminit.bench_render import plot, render_report
from meminit.bench_stats import (STREAMING, add_clear_612, add_ratios, auto_rows, crossover, machine_limit,
                                 summarize, thread_scaling)
from meminit.benchbin import BINARY, Output, parse_output, verify
from meminit.errors import MeminitError
from meminit.hostinfo import loadavg, machine_info
from meminit.hugetlb import HugetlbReservation, hugetlb_plan
from meminit.units import format_size, parse_size


FILL_STRATEGIES = "slow,slow-saferet,template,movnti,movntdq,avx512nt,repmovsb,auto-altmap,auto-dram"
CLEAR_CASES = ("stosb-4K,stosb_desc-4K,php2M-4K,fz2M-256K,fz2M-2M,stosb-2M,stosb-32M,stosb-1G,"
               "fz1G-256K,fz1G-2M,fz1G-8M,fz1G-16M,fz1G-32M,fz1G-64M,fz1G-128M,fz1G-1G,stosq-4K,stosq-2M,stosq-32M,"
               "stosq-1G,movnti-1G,avx512nt-2M,avx512nt-1G,clzero-2M,clzero-1G,memset-1G,"
               "stosb_nz-1G,avx512nt_nz-1G")
FAULT_KINDS = "anon-4K,thp-2M,hugetlb-2M,hugetlb-1G"
# what meminit-bench takes (bench/src): fill sizes in whole order-9 compounds of 64-byte records
# (run.c), 1 to MAX_THREADS (bench.h) threads; the options keep the text, which the tool reads
FILL_SIZE = options.size(multiple=32 * units.KIB)
FILL_SIZES = options.as_text(options.listed(FILL_SIZE))
THREADS = options.as_text(options.listed(options.integer(1, 64)))
BYTES = options.as_text(options.size())

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
        checked = verify(args.verify_size)
        sys.stdout.write(checked.stdout)
        sys.stderr.write(checked.stderr)
        if checked.returncode != 0:
            raise MeminitError("verify failed: a strategy does not reproduce the slow path (see FAIL lines)")
        return 0
    # a strategy that writes the wrong struct pages has no speed worth printing
    print("meminit: verifying every strategy against the slow path first", file=sys.stderr, flush=True)
    checked = verify(args.verify_size)
    if checked.returncode != 0:
        failures = [line for line in checked.stdout.splitlines() if not line.startswith("ok ")]
        raise MeminitError("verify failed, nothing measured: a strategy does not reproduce the slow path:\n"
                           + "\n".join(failures[-15:] + checked.stderr.strip().splitlines()[-5:]))
    opts = option_values(args)
    if int(opts["reps"]) < 1:
        raise MeminitError("--reps must be at least 1")
    for s in str(opts["sizes"]).split(","):
        if parse_size(s) % 32768:
            raise MeminitError(f"fill size {s} must be a multiple of 32K (one order-9 compound of records)")
    fault_size = parse_size(opts["fault_size"])
    fault_kinds = [k for k in str(opts["fault"]).split(",") if k and k != "none"]

    run_dir = Path(args.out) if args.out else results.new_run_dir("microbench")
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
            # the child runs in its own session, away from Ctrl-C: stream() stops it
            # on the interrupt, before the hugetlb pool is restored
            rc = proc.stream(cmd, on_line=lines.append, merge_stderr=False,
                             preexec=lambda: own_session(args.nice))
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


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "microbench",
        help="replay memmap-init and huge-page clearing write patterns on this CPU (bench/)",
        description="Build bench/ and measure record-fill and clearing strategies on the real CPU. "
                    "Defaults take 3-4 minutes on a 2-vCPU VM with a 32 MiB L3; --quick is a smoke run "
                    "(20 s there, 2 minutes where a 480 MiB L3 makes every cold sample evict 1.4 GiB).")
    p.add_argument("--quick", action="store_true", help="small sizes, 3 repetitions (a smoke run)")
    p.add_argument("--auto-sweep", dest="auto_sweep", action="store_true",
                   help="issue 14's sweep: slow, template, movntdq and the learning auto on the kernel's "
                        "chunks, 1 and 2 threads, every size/layout/dest, no clears or faults (about "
                        "25 minutes with the default sizes; bench/results/ summaries come from it)")
    p.add_argument("--sizes", type=FILL_SIZES, help="record-fill destination sizes, in bytes of memmap (default 4M,16M,64M,256M,1G; 4M is the memmap of one 256 MiB test_hmm chunk)")
    p.add_argument("--reps", type=options.integer(), help="interleaved repetitions per case (default 7)")
    p.add_argument("--threads", type=THREADS, help="thread counts for the fills (default 1; the scaling section runs 1,2)")
    p.add_argument("--split", help="how threads share a fill: even (one run per thread), chunked "
                                   "(threads pull --chunk sized chunks from a counter); default even")
    p.add_argument("--chunk", type=BYTES,
                   help="chunk of the chunked split, in bytes of device memory (one 4 KiB "
                        "page per 64-byte record; rounded up to 512 pages); default 128M")
    p.add_argument("--scale-sizes", dest="scale_sizes", type=FILL_SIZES, help="scaling section: memmap sizes (default 1G)")
    p.add_argument("--scale-threads", dest="scale_threads", type=THREADS, help="scaling section: thread counts (default 1,2)")
    p.add_argument("--scale-layouts", dest="scale_layouts", help="scaling section: layouts (default o0,o9)")
    p.add_argument("--scale-fill", dest="scale_fill",
                   help="scaling section: strategies, cold, even and chunked split "
                        "(default slow,template,movntdq; 'none' skips the section)")
    p.add_argument("--auto-altmap-min", dest="auto_altmap_min", type=BYTES,
                   help="auto-altmap streams from this memmap size on (default: the LLC size)")
    p.add_argument("--auto-dram-min", dest="auto_dram_min", type=BYTES,
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
    p.add_argument("--clear-size", dest="clear_size", type=BYTES, help="bytes cleared per clear sample (default 1G)")
    p.add_argument("--fault", help=f"demand-fault mappings (default {FAULT_KINDS}; 'none' to skip)")
    p.add_argument("--fault-size", dest="fault_size", type=BYTES, help="bytes faulted per sample (default 1G)")
    p.add_argument("--min-bytes", dest="min_bytes", type=BYTES,
                   help="timed bytes per fill sample: smaller destinations are filled several times "
                        "(each pass prepared afresh) (default 64M)")
    p.add_argument("--movsb-block", default="4K", type=options.as_text(options.size(minimum=64)),
                   help="replicated block for rep movsb, order 0, at least 64 (default 4K)")
    p.add_argument("--pgmap-type", default="fsdax", choices=["fsdax", "private", "coherent", "generic"],
                   help="dev_pagemap type (sets the head refcount: 0 for private/coherent)")
    p.add_argument("--nice", type=options.integer(-20, 19, note="0: unchanged"), default=0,
                   help="niceness for the benchmark's own session/autogroup (e.g. -10 on a busy "
                        "shared machine; negative values need root)")
    p.add_argument("--out", help="result directory (default results/microbench-<UTC stamp>)")
    p.add_argument("--verify", action="store_true", help="only run the correctness check")
    p.add_argument("--verify-size", default="4M", type=options.as_text(FILL_SIZE),
                   help="records size for --verify, a multiple of 32K (default 4M)")
    p.set_defaults(func=run)
