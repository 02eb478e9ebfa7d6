"""`meminit boot`: boot a built or packaged kernel and run one command in the guest."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import kernels, paths, results, units
from meminit.guest import vm
from meminit.kernel import build, own_tree, package, source
from meminit.commands import options
from meminit.core.errors import MeminitError
from meminit.core.kernels import Linux


@dataclass(frozen=True)
class BootRequest:
    """What `meminit boot` was asked: a built variant (None: series) or a linux-image package, the
    command to run in the guest, emulated pmem at 4G (None: none), and the guest."""

    command: str = "uname -r"
    variant: str | None = None
    deb: Path | None = None
    pmem_size: int | None = None
    linux: Linux = kernels.DEFAULT
    guest: vm.GuestRequest = field(default_factory=vm.GuestRequest)
    tree: own_tree.OwnTree | None = None  # --tree: a commit of the user's own tree instead


def _kernel_to_boot(req: BootRequest, run_dir: Path) -> tuple[Path, str]:
    """The image to boot and its name: a built variant or the kernel of a linux-image package,
    unpacked with its modules into the run's directory. A built variant is always brought up to
    date first (kbuild's incremental build: seconds when nothing changed), so that a change
    committed in the tree or a config fragment is what boots, never the image built before it."""
    if req.deb is not None:
        return package.unpack_image(req.deb, run_dir / "image")
    variant = req.variant or "series"
    if req.tree is not None:
        kernel = build.build_trees([variant], own_tree.prepare(req.tree).trees, own=True)[variant]
        return kernel.image, kernel.variant
    kernel = build.kernel_for(variant, source.prepare_trees(req.linux))
    build.build(kernel)
    return kernel.image, kernel.variant


def boot(req: BootRequest) -> int:
    """Boot the kernel, run the command in the guest and print its output; the guest's exit code."""
    if req.deb is not None and req.variant is not None:
        raise MeminitError(f"boot either a built kernel ({req.variant}) or --deb, not both")
    if req.deb is not None and req.tree is not None:
        raise MeminitError("boot either a kernel of --tree or --deb, not both")
    memory, append = req.guest.memory or vm.DEFAULT_MEMORY, list(req.guest.append)
    if req.pmem_size is not None:
        memory, memmap = vm.pmem_layout(req.pmem_size, req.guest.memory)
        append.append(memmap)
    run_dir = results.new_run_dir("boot")
    image, name = _kernel_to_boot(req, run_dir)
    accel = vm.resolve_accel(req.guest.accel, image, run_dir, name)
    # the command's output, apart from the kernel's console, for the user's terminal
    output = run_dir / "guest.stdout"
    # The guest sees the host read-only but for the run's directory, where the command
    # runs; matplotlib (measure's plot) needs a config directory it can write.
    script = (f"export MEMINIT={shlex.quote(str(paths.REPO / 'meminit'))} MPLCONFIGDIR=/tmp/matplotlib\n"
              f"(\n{req.command}\n) > {shlex.quote(str(output))}")
    spec = vm.BootSpec(image=image, kernel=name, name="boot", script=script,
                       memory_bytes=memory, cpus=req.guest.cpus, append=append,
                       timeout_s=req.guest.timeout or vm.DEFAULT_TIMEOUT_S)
    result = vm.boot(spec, run_dir, accel)
    if output.exists():
        sys.stdout.write(output.read_text(errors="replace"))
    if result.stderr:
        print(result.stderr, end="", file=sys.stderr)
    print(f"guest exit {result.exit_code} after {result.seconds:.0f}s ({accel}); logs in {run_dir}")
    return result.exit_code


def request_from(args: argparse.Namespace) -> BootRequest:
    return BootRequest(command=args.command, variant=args.variant, deb=args.deb, pmem_size=args.pmem_size,
                       linux=options.linux_from(args), guest=options.guest_from(args),
                       tree=options.tree_from(args))


def _cmd_boot(args: argparse.Namespace) -> int:
    return boot(request_from(args))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "boot", help="boot a built kernel or a packaged one and run a command in the guest",
        description="Boots a kernel under QEMU and runs one shell command in it, in the boot's "
                    "results directory (the one place the guest may write; the rest of the host is "
                    "read-only), with $MEMINIT naming this checkout's ./meminit.")
    p.add_argument("variant", nargs="?", choices=["base", "series", "debug"],
                   help="the built kernel to boot (default series; brought up to date by an incremental build first)")
    options.add_linux_option(p)
    options.add_tree_options(p, "boot (its --series commit, or --base with the variant base)")
    p.add_argument("--deb", type=Path, metavar="LINUX_IMAGE_DEB",
                   help="boot the kernel of a linux-image package (from `package`), its modules with it")
    p.add_argument("--pmem-size", type=options.size(multiple=128 * units.MIB), default=None,
                   help="emulated pmem at 4G, e.g. 1G (multiple of 128M): raw namespace0.0 (default none)")
    p.add_argument("-c", "--command", default=BootRequest.command, help="shell command to run in the guest")
    options.add_guest_options(p)
    p.set_defaults(func=_cmd_boot)
