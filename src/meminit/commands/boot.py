"""`meminit boot`: boot a built kernel and run one command in the guest; guest options."""

from __future__ import annotations

import argparse
import shlex
import sys

from meminit import build, results, source, vm
from meminit.units import parse_size


def add_guest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto",
                   help="QEMU accelerator (default: KVM if a trial guest boots, else TCG)")
    p.add_argument("--cpus", type=int, default=2, help="guest CPUs (default 2)")
    p.add_argument("--memory", type=parse_size, default=None,
                   help="guest memory, e.g. 8G (default: what the scenario needs)")
    p.add_argument("--append", action="append", default=[], metavar="PARAM",
                   help="extra kernel parameter (repeatable)")


def _cmd_boot(args: argparse.Namespace) -> int:
    kernel = build.kernel_for(args.variant, source.prepare_trees())
    if not kernel.image.exists():
        build.build(kernel)
    run_dir = results.new_run_dir("boot")
    accel = vm.resolve_accel(args.accel, kernel.image, run_dir, kernel.variant)
    # the command's output, apart from the kernel's console, for the user's terminal
    output = run_dir / f"{args.variant}.stdout"
    spec = vm.BootSpec(image=kernel.image, kernel=kernel.variant, name=args.variant,
                       script=f"(\n{args.command}\n) > {shlex.quote(str(output))}",
                       memory_bytes=args.memory or vm.DEFAULT_MEMORY, cpus=args.cpus, append=args.append)
    result = vm.boot(spec, run_dir, accel)
    if output.exists():
        sys.stdout.write(output.read_text(errors="replace"))
    if result.stderr:
        print(result.stderr, end="", file=sys.stderr)
    print(f"guest exit {result.exit_code} after {result.seconds:.0f}s ({accel}); logs in {run_dir}")
    return result.exit_code


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("boot", help="boot a built kernel and run a command in the guest")
    p.add_argument("variant", nargs="?", default="series", choices=["base", "series", "debug"])
    p.add_argument("-c", "--command", default="uname -r", help="shell command to run in the guest")
    add_guest_options(p)
    p.set_defaults(func=_cmd_boot)
