"""`meminit boot`: boot a built or packaged kernel and run one command in the guest; guest options."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from meminit import build, package, paths, results, source, units, vm
from meminit.commands import options
from meminit.errors import MeminitError


def add_guest_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto",
                   help="QEMU accelerator (default: KVM if a trial guest boots, else TCG)")
    p.add_argument("--cpus", type=options.integer(), default=2, help="guest CPUs (default 2)")
    p.add_argument("--memory", type=options.size(multiple=units.MIB), default=None,
                   help="guest memory, e.g. 8G, a multiple of 1M (default: what the scenario needs)")
    p.add_argument("--append", action="append", default=[], metavar="PARAM",
                   help="extra kernel parameter (repeatable)")


def _kernel_to_boot(args: argparse.Namespace, run_dir: Path) -> tuple[Path, str]:
    """The image to boot and its name: a built variant or the kernel of a linux-image package,
    unpacked with its modules into the run's directory. A built variant is always brought up to
    date first (kbuild's incremental build: seconds when nothing changed), so that a change
    committed in the tree or a config fragment is what boots, never the image built before it."""
    if args.deb is not None:
        return package.unpack_image(args.deb, run_dir / "image")
    kernel = build.kernel_for(args.variant or "series", source.prepare_trees(options.linux_from(args)))
    build.build(kernel)
    return kernel.image, kernel.variant


def _cmd_boot(args: argparse.Namespace) -> int:
    if args.deb is not None and args.variant is not None:
        raise MeminitError(f"boot either a built kernel ({args.variant}) or --deb, not both")
    memory, append = args.memory or vm.DEFAULT_MEMORY, list(args.append)
    if args.pmem_size is not None:
        memory, memmap = vm.pmem_layout(args.pmem_size, args.memory)
        append.append(memmap)
    run_dir = results.new_run_dir("boot")
    image, name = _kernel_to_boot(args, run_dir)
    accel = vm.resolve_accel(args.accel, image, run_dir, name)
    # the command's output, apart from the kernel's console, for the user's terminal
    output = run_dir / "guest.stdout"
    # The guest sees the host read-only but for the run's directory, where the command
    # runs; matplotlib (measure's plot) needs a config directory it can write.
    script = (f"export MEMINIT={shlex.quote(str(paths.REPO / 'meminit'))} MPLCONFIGDIR=/tmp/matplotlib\n"
              f"(\n{args.command}\n) > {shlex.quote(str(output))}")
    spec = vm.BootSpec(image=image, kernel=name, name="boot", script=script,
                       memory_bytes=memory, cpus=args.cpus, append=append)
    result = vm.boot(spec, run_dir, accel)
    if output.exists():
        sys.stdout.write(output.read_text(errors="replace"))
    if result.stderr:
        print(result.stderr, end="", file=sys.stderr)
    print(f"guest exit {result.exit_code} after {result.seconds:.0f}s ({accel}); logs in {run_dir}")
    return result.exit_code


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "boot", help="boot a built kernel or a packaged one and run a command in the guest",
        description="Boots a kernel under QEMU and runs one shell command in it, in the boot's "
                    "results directory (the one place the guest may write; the rest of the host is "
                    "read-only), with $MEMINIT naming this checkout's ./meminit.")
    p.add_argument("variant", nargs="?", choices=["base", "series", "debug"],
                   help="the built kernel to boot (default series; brought up to date by an incremental build first)")
    options.add_linux_option(p)
    p.add_argument("--deb", type=Path, metavar="LINUX_IMAGE_DEB",
                   help="boot the kernel of a linux-image package (from `package`), its modules with it")
    p.add_argument("--pmem-size", type=options.size(multiple=128 * units.MIB), default=None,
                   help="emulated pmem at 4G, e.g. 1G (multiple of 128M): raw namespace0.0 (default none)")
    p.add_argument("-c", "--command", default="uname -r", help="shell command to run in the guest")
    add_guest_options(p)
    p.set_defaults(func=_cmd_boot)
