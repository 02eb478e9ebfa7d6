"""`meminit run`: the main job. Build the kernels, boot each scenario's guests, write result.json, table and plots."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from meminit.core import deps, hostinfo, results, units
from meminit.guest import vm
from meminit.kernel import build, own_tree, source
from meminit.commands import options
from meminit.core.errors import MeminitError
from meminit.scenarios import DEFAULT, REGISTRY, RunRequest, fault_latency, memmap, plot, render
from meminit.scenarios.base import TIMEOUT_S


def run(req: RunRequest) -> Path:
    """Build what is needed, boot every kernel per scenario, write result.json and print the table."""
    if len(set(req.kernels)) != len(req.kernels):
        raise MeminitError(f"--kernels names a kernel twice: {','.join(req.kernels)}")
    prepared = own_tree.prepare(req.tree) if req.tree else None
    if prepared:
        req = dataclasses.replace(req, linux=prepared.trees.linux)
    chosen = [REGISTRY[name] for name in req.scenarios]
    for scenario in chosen:
        if req.linux.version not in scenario.linux_versions:
            raise MeminitError(f"scenario {scenario.name} runs on Linux {', '.join(scenario.linux_versions)} "
                               f"only: {scenario.elsewhere}")
    memories = [s.guest_memory(req) for s in chosen]  # refuses impossible sizes before building
    deps.ensure(deps.GUEST)
    memmap.prepare_replay(req)
    if prepared:
        built = build.build_trees(req.kernels, prepared.trees, req.jobs, own=True)
    else:
        built = build.build_variants(req.kernels, jobs=req.jobs, linux=req.linux)
    run_dir = results.new_run_dir("run")
    first = built[req.kernels[0]]
    accel = vm.resolve_accel(req.guest.accel, first.image, run_dir, first.variant)
    result: dict[str, Any] = {
        "kind": "memmap", "host_cpu": hostinfo.cpu_model(), "accel": accel, "guest_cpus": req.guest.cpus,
        "init_threads": req.init_threads,
        "guest_memory": units.format_size(max(memories)), "pmem_size": units.format_size(req.pmem_size),
        "rebinds": req.rebinds,
        **(prepared.provenance() if prepared else source.provenance(req.linux)),
        "kernels": {v: k.release for v, k in built.items()}, "scenarios": [],
    }
    for scenario in chosen:
        result["scenarios"].append(scenario.run(req, built, run_dir, accel))
        results.write_json(run_dir, result)
    memmap.replay_run(result, req, run_dir)  # after the guests: the CPU is the bench's alone
    results.write_json(run_dir, result)
    print(render(result))
    for png in plot(result, run_dir):
        print(f"plot: {png}", file=sys.stderr)
    print(f"results: {run_dir / results.RESULT_FILE}", file=sys.stderr)
    return run_dir


def request_from(args: argparse.Namespace) -> RunRequest:
    if args.init_threads is not None and "threads" not in (args.rfc or ()) and not args.tree:
        options.refuse(args, "--init-threads sets the threads RFC's memmap_init_threads: add --rfc threads")
    return RunRequest(
        scenarios=args.scenario or [DEFAULT], kernels=args.kernels, linux=options.linux_from(args),
        tree=options.tree_from(args),
        guest=options.guest_from(args), jobs=args.jobs,
        variants=args.variants, pmem_size=args.pmem_size, init_threads=args.init_threads,
        rebinds=args.rebinds, replay=not args.no_replay, replay_reps=args.replay_reps,
        fork_vmas=args.fork_vmas, fork_seconds=args.fork_seconds,
        fork_reps=args.fork_reps, fault_size=args.fault_size, fault_reps=args.fault_reps,
        preempt=args.preempt, latency_units=args.latency_units, latency_seconds=args.latency_seconds,
        latency_rounds=args.latency_rounds, latency_hog=args.latency_hog, latency_trace=args.latency_trace)


def _cmd_run(args: argparse.Namespace) -> int:
    run(request_from(args))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    lat = fault_latency
    d = RunRequest(scenarios=[DEFAULT])  # the defaults

    def listed(values: list) -> str:
        return ",".join(map(str, values))
    p = sub.add_parser("run", help="the main job: build, boot and time memmap init per scenario")
    p.add_argument("--scenario", action="append", choices=list(REGISTRY),
                   help=f"scenario to run (repeatable; default {DEFAULT}): "
                        + "; ".join(f"{name}: {s.help}" for name, s in REGISTRY.items()))
    options.add_linux_option(p)
    options.add_tree_options(p, "build and measure, base against series,")
    p.add_argument("--kernels", type=lambda s: s.split(","), default=d.kernels,
                   help="comma-separated kernels to boot, first decides the accelerator "
                        f"(default {listed(d.kernels)})")
    p.add_argument("--variants", type=lambda s: s.split(","), default=d.variants,
                   help="series init modes to interleave, e.g. slow,template "
                        "(default: every mode the kernel offers)")
    p.add_argument("--pmem-size", type=options.size(multiple=128 * units.MIB), default=d.pmem_size,
                   help=f"emulated pmem size (default {units.format_size(d.pmem_size)}; multiple of 128M)")
    p.add_argument("--init-threads", type=options.integer(0, note="0: the kernel's choice"), default=None,
                   help="series kernels: most threads for one range's memmap init "
                        "(0 = the kernel's automatic choice, its default; 1 = single-threaded)")
    p.add_argument("--rebinds", type=options.integer(), default=d.rebinds, help=f"rebinds per variant (default {d.rebinds})")
    p.add_argument("--no-replay", action="store_true",
                   help="memmap scenarios: skip the bench's replay of each memmap on this CPU (the "
                        "performance figures under TCG, where the guest's timings are functional)")
    p.add_argument("--replay-reps", type=options.integer(), default=d.replay_reps,
                   help=f"memmap scenarios: interleaved repetitions of the replay (default {d.replay_reps})")
    p.add_argument("--fork-vmas", type=options.listed(options.integer()),
                   default=d.fork_vmas, help=f"fork scenario: VMA counts (default {listed(d.fork_vmas)})")
    p.add_argument("--fork-seconds", type=options.number(), default=d.fork_seconds,
                   help=f"fork scenario: seconds per N and rep (default {d.fork_seconds:g})")
    p.add_argument("--fork-reps", type=options.integer(), default=d.fork_reps,
                   help=f"fork scenario: interleaved repetitions (default {d.fork_reps})")
    p.add_argument("--fault-size", type=options.size(multiple=units.GIB), default=d.fault_size,
                   help="thp-fault scenario: bytes faulted per mapping kind and pass (default "
                   f"{units.format_size(d.fault_size)}; multiple of 1G)")
    p.add_argument("--fault-reps", type=options.integer(), default=d.fault_reps,
                   help=f"thp-fault scenario: repetitions (default {d.fault_reps})")
    p.add_argument("--preempt", default=d.preempt,
                   type=options.explained(lat.parse_models, "model list", "comma-separated preemption models"),
                   help="fault-latency scenario: preemption models, one boot each "
                        f"(default {listed(d.preempt)})")
    p.add_argument("--latency-units", default=d.latency_units,
                   type=options.explained(lat.parse_units, "size list", "'default' and/or sizes of whole 4K pages"),
                   help="fault-latency scenario: series clearing units to interleave, 'default' "
                        f"being the kernel's choice (default {listed(d.latency_units)})")
    p.add_argument("--latency-seconds", type=options.integer(), default=d.latency_seconds,
                   help=f"fault-latency scenario: cyclictest seconds per cell (default {d.latency_seconds})")
    p.add_argument("--latency-rounds", type=options.integer(), default=d.latency_rounds,
                   help=f"fault-latency scenario: rounds over the units (default {d.latency_rounds})")
    p.add_argument("--latency-hog", type=lambda s: [h for h in s.split(",") if h], default=d.latency_hog,
                   help=f"fault-latency scenario: memory writer on CPU 0, off and/or on (default {listed(d.latency_hog)})")
    p.add_argument("--latency-trace", type=options.integer(0, note="0: off"), default=d.latency_trace, metavar="USEC",
                   help="fault-latency scenario, diagnostic: trace scheduler, IRQ and timer events "
                        "and stop each cell at its first wakeup this late, keeping the trace "
                        "and printing its longest silence (default 0: off)")
    options.add_guest_options(p, "timeout", timeout=TIMEOUT_S)
    p.add_argument("-j", "--jobs", type=options.integer(), help="kernel build jobs (default: CPUs)")
    options.add_guest_options(p)
    p.set_defaults(func=_cmd_run)
