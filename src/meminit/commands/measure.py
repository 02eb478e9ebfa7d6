"""`meminit measure`: the memmap scenarios on the machine itself, against a device the user names.

For a machine with real pmem, CXL or device memory, booted into a series kernel (or a
stock one, for the base line): rebind the named device as `run` rebinds its emulated
pmem, and write the same result.json, table and plot, labelled with the host's CPU,
kernel and device and "host" as the accelerator. `meminit report BASE_RUN SERIES_RUN`
puts a base and a series run side by side. What the command refuses, so that it never
costs anybody data, is in devices.py; what it puts back, in host_measure.py.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from meminit import scenarios
from meminit.core import deps, hostinfo, results
from meminit.host import devices
from meminit.kernel import memmap_log
from meminit.commands import options
from meminit.core.errors import MeminitError
from meminit.host.host_measure import (KernelFiles, KernelLog, KernelModes, Log, Rebinds, Settings,
                                  choose_variants, interrupts_held, prepare_kernel, rebind)
from meminit.scenarios import memmap
from meminit.core.units import format_size

@dataclass(frozen=True)
class MeasureRequest:
    kind: str  # namespace, dax, hmm
    name: str
    variants: list[str] = field(default_factory=lambda: ["all"])
    rebinds: int = 5
    init_threads: int | None = None
    erase_named: list[str] = field(default_factory=list)
    results_root: Path | None = None
    plot: bool = True


def measure(req: MeasureRequest, files: KernelFiles = KernelFiles(),
            view: devices.SystemView = devices.SystemView()) -> Path:
    """Check the device, rebind it with every setting put back after, write and print the run."""
    if req.rebinds < 1:
        raise MeminitError("--rebinds must be at least 1")
    deps.ensure(deps.HOST)
    device = devices.inspect(req.kind, req.name, view)
    problems = devices.refusals(device, req.erase_named, view)
    if problems:
        raise MeminitError(f"refusing to rebind {device.name}:\n  - " + "\n  - ".join(problems))
    kernel, seen = rebind_and_restore(req, device, files, KernelLog, lambda: devices.in_use(device, view))
    run_dir = results.new_run_dir("measure", req.results_root)
    (run_dir / "kernel-log.txt").write_text("\n".join(seen.log) + "\n")
    (run_dir / "hashes.txt").write_text("".join(h + "\n" for h in seen.hashes))
    result = host_result(req, device, kernel, seen.log, seen.hashes)
    results.write_json(run_dir, result)
    print(scenarios.render(result))
    if req.plot:
        for png in scenarios.plot(result, run_dir):
            print(f"plot: {png}", file=sys.stderr)
    print(f"results: {run_dir / results.RESULT_FILE}", file=sys.stderr)
    return run_dir


def rebind_and_restore(req: MeasureRequest, device: devices.Device, files: KernelFiles,
                       open_log: Callable[[Path], Log],
                       in_use: Callable[[], list[str]] = lambda: []) -> tuple[KernelModes, Rebinds]:
    """The rebinds, with Ctrl-C held between steps and every setting put back, whatever happens."""
    settings = Settings()
    with interrupts_held() as interrupts:
        try:
            kernel = prepare_kernel(files, settings, req.init_threads)
            variants = choose_variants(req.variants, kernel)
            print(f"meminit: rebinding {device.name} ({device.scenario}) {req.rebinds} times per variant: "
                  f"{' '.join(variants)}", file=sys.stderr, flush=True)
            log = open_log(files.kmsg)
            try:
                seen = rebind(device, kernel, variants, req.rebinds, files, settings, interrupts, log, in_use,
                              on_step=lambda step: print(f"meminit: {step}", file=sys.stderr, flush=True))
            finally:
                log.close()
        finally:
            failed = settings.restore()
            if failed:
                print("meminit: could not put back:\n  - " + "\n  - ".join(failed), file=sys.stderr)
        if failed:
            raise MeminitError(f"the machine is not as it was: {'; '.join(failed)}")
    return kernel, seen


def host_result(req: MeasureRequest, device: devices.Device, kernel: KernelModes,
                log: list[str], hashes: list[str]) -> dict:
    """result.json of a host run: one memmap scenario entry, as `run` writes it."""
    samples = memmap_log.parse_init_samples("\n".join(log))
    if not any(s.phase == "rebind" for s in samples):
        raise MeminitError(f"binding {device.name} logged no memmap_init_zone_device timing line: "
                           "its mode maps no struct pages, or the kernel's pr_debug is compiled out")
    mismatch = memmap_log.hash_mismatch(memmap_log.parse_hashes("\n".join(hashes)))
    if mismatch:
        raise MeminitError(f"{device.name}: struct pages differ between variants ({mismatch})")
    label = "series" if kernel.series else "base"
    return {
        "kind": "memmap", "host_cpu": hostinfo.cpu_model(), "accel": "host", "host_cpus": os.cpu_count(),
        "host_kernel": platform.release(), "init_threads": req.init_threads, "rebinds": req.rebinds,
        "device": {"kind": device.kind, "name": device.name, "size": format_size(device.size) if device.size else "-"},
        "kernels": {label: platform.release()},
        "scenarios": [{"name": device.scenario, "kind": "memmap",
                       "groups": memmap.group_samples(label, samples)}],
    }


def request_from(args: argparse.Namespace) -> MeasureRequest:
    kind, name = (("namespace", args.namespace) if args.namespace else ("dax", args.dax) if args.dax
                  else ("hmm", devices.HMM_MODULE))
    return MeasureRequest(kind=kind, name=name, variants=args.variants, rebinds=args.rebinds,
                          init_threads=args.init_threads, erase_named=args.dynamic_options,
                          results_root=args.results, plot=not args.no_plot)


def _cmd_measure(args: argparse.Namespace) -> int:
    measure(request_from(args))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    d = MeasureRequest(kind="", name="")
    p = sub.add_parser(
        "measure", help="on this machine, no VM: rebind a device you name and time its memmap init",
        description="Rebind the named device on the running kernel and time its memmap init per "
                    "variant, as `run` does in a guest. Refuses a device that is mounted, held, in "
                    "use, onlined as RAM, or not named exactly, and one holding a filesystem unless "
                    f"{devices.ERASE_FLAG}NAME names it. Puts back every setting it changes.")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--namespace", metavar="NAME", help="an fsdax or devdax namespace, e.g. namespace0.0")
    which.add_argument("--dax", metavar="NAME", help="a devdax device, e.g. dax0.0 (CXL, hmem or pmem)")
    which.add_argument("--hmm", action="store_true",
                       help="device-private memory: load and unload the test_hmm module")
    p.add_argument("--variants", type=lambda s: s.split(","), default=d.variants,
                   help="series modes to interleave (default: every mode the kernel offers; a kernel "
                        "without the series measures 'default')")
    p.add_argument("--rebinds", type=options.integer(), default=d.rebinds, help=f"rebinds per variant (default {d.rebinds})")
    p.add_argument("--init-threads", type=options.integer(0, note="0: the kernel's choice"), default=None,
                   help="series kernels: most threads for one range's memmap init (0 = the kernel's "
                        "automatic choice; put back after)")
    p.add_argument("--results", type=Path, default=None, metavar="DIR",
                   help="where the run directory is made (default results/)")
    p.add_argument("--no-plot", action="store_true",
                   help="no plot.png (`report RUN` draws it later); matplotlib is slow to start on a small machine")
    p.set_defaults(func=_cmd_measure, dynamic_option_prefix=devices.ERASE_FLAG)
