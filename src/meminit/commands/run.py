"""`meminit run`: the main job. Build the kernels, boot each scenario's guests, write result.json, table and plots."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meminit import build, deps, forkbench, results, source, units, vm
from meminit.commands.boot import add_guest_options
from meminit.scenarios import DEFAULT, REGISTRY, RunRequest, fault_latency, plot, render, thp_fault


def run(req: RunRequest) -> Path:
    """Build what is needed, boot every kernel per scenario, write result.json and print the table."""
    chosen = [REGISTRY[name] for name in req.scenarios]
    memories = [s.guest_memory(req) for s in chosen]  # refuses impossible sizes before building
    deps.ensure(deps.GUEST)
    kernels = build.build_variants(req.kernels, jobs=req.jobs)
    run_dir = results.new_run_dir("run")
    accel = vm.resolve_accel(req.accel, kernels[req.kernels[0]].image, run_dir)
    result = {
        "kind": "memmap", "accel": accel, "guest_cpus": req.cpus, "init_threads": req.init_threads,
        "guest_memory": units.format_size(max(memories)), "pmem_size": units.format_size(req.pmem_size),
        "rebinds": req.rebinds, "source_package": source.SOURCE_PACKAGE,
        "source_version": source.source_version(), "series_commit": source.series_commit(),
        "kernels": {v: k.release for v, k in kernels.items()}, "scenarios": [],
    }
    for scenario in chosen:
        result["scenarios"].append(scenario.run(req, kernels, run_dir, accel))
        results.write_json(run_dir, result)
    print(render(result))
    for png in plot(result, run_dir):
        print(f"plot: {png}", file=sys.stderr)
    print(f"results: {run_dir / results.RESULT_FILE}", file=sys.stderr)
    return run_dir


def request_from(args: argparse.Namespace) -> RunRequest:
    return RunRequest(
        scenarios=args.scenario or [DEFAULT], kernels=args.kernels, accel=args.accel, cpus=args.cpus,
        memory=args.memory, append=args.append, timeout=args.timeout, jobs=args.jobs,
        variants=args.variants, pmem_size=args.pmem_size, init_threads=args.init_threads,
        rebinds=args.rebinds, fork_vmas=args.fork_vmas, fork_seconds=args.fork_seconds,
        fork_reps=args.fork_reps, fault_size=args.fault_size, fault_reps=args.fault_reps,
        preempt=args.preempt, latency_units=args.latency_units, latency_seconds=args.latency_seconds,
        latency_rounds=args.latency_rounds, latency_hog=args.latency_hog, latency_trace=args.latency_trace)


def _cmd_run(args: argparse.Namespace) -> int:
    run(request_from(args))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    lat = fault_latency
    p = sub.add_parser("run", help="the main job: build, boot and time memmap init per scenario")
    p.add_argument("--scenario", action="append", choices=list(REGISTRY),
                   help=f"scenario to run (repeatable; default {DEFAULT})")
    p.add_argument("--kernels", type=lambda s: s.split(","), default=["series", "base"],
                   help="comma-separated kernels to boot, first decides the accelerator "
                        "(default series,base)")
    p.add_argument("--variants", type=lambda s: s.split(","), default=["all"],
                   help="series init modes to interleave, e.g. slow,template "
                        "(default: every mode the kernel offers)")
    p.add_argument("--pmem-size", type=units.parse_size, default=units.parse_size("2G"),
                   help="emulated pmem size (default 2G; multiple of 128M)")
    p.add_argument("--init-threads", type=int, default=None,
                   help="series kernels: most threads for one range's memmap init "
                        "(0 = the kernel's automatic choice, its default; 1 = single-threaded)")
    p.add_argument("--rebinds", type=int, default=5, help="rebinds per variant (default 5)")
    p.add_argument("--fork-vmas", type=lambda s: [int(n) for n in s.split(",")],
                   default=list(forkbench.DEFAULT_COUNTS), help="fork scenario: VMA counts (default "
                   + ",".join(map(str, forkbench.DEFAULT_COUNTS)) + ")")
    p.add_argument("--fork-seconds", type=float, default=2.0, help="fork scenario: seconds per N and rep")
    p.add_argument("--fork-reps", type=int, default=3, help="fork scenario: interleaved repetitions")
    p.add_argument("--fault-size", type=units.parse_size, default=thp_fault.DEFAULT_FAULT_SIZE,
                   help="thp-fault scenario: bytes faulted per mapping kind and pass (default "
                   f"{units.format_size(thp_fault.DEFAULT_FAULT_SIZE)}; multiple of 1G)")
    p.add_argument("--fault-reps", type=int, default=thp_fault.DEFAULT_REPS,
                   help=f"thp-fault scenario: repetitions (default {thp_fault.DEFAULT_REPS})")
    p.add_argument("--preempt", type=lat.parse_models, default=list(lat.MODELS),
                   help="fault-latency scenario: preemption models, one boot each "
                        f"(default {','.join(lat.MODELS)})")
    p.add_argument("--latency-units", type=lat.parse_units, default=list(lat.DEFAULT_UNITS),
                   help="fault-latency scenario: series clearing units to interleave, 'default' "
                        f"being the kernel's choice (default {','.join(lat.DEFAULT_UNITS)})")
    p.add_argument("--latency-seconds", type=int, default=lat.DEFAULT_SECONDS,
                   help=f"fault-latency scenario: cyclictest seconds per cell (default {lat.DEFAULT_SECONDS})")
    p.add_argument("--latency-rounds", type=int, default=lat.DEFAULT_ROUNDS,
                   help=f"fault-latency scenario: rounds over the units (default {lat.DEFAULT_ROUNDS})")
    p.add_argument("--latency-hog", type=lambda s: [h for h in s.split(",") if h], default=list(lat.HOGS),
                   help="fault-latency scenario: memory writer on CPU 0, off and/or on (default off,on)")
    p.add_argument("--latency-trace", type=int, default=0, metavar="USEC",
                   help="fault-latency scenario, diagnostic: trace scheduler, IRQ and timer events "
                        "and stop each cell at its first wakeup this late, keeping the trace "
                        "and printing its longest silence (default 0: off)")
    p.add_argument("--timeout", type=int, default=1200, help="guest timeout in seconds")
    p.add_argument("-j", "--jobs", type=int, help="kernel build jobs (default: CPUs)")
    add_guest_options(p)
    p.set_defaults(func=_cmd_run)
