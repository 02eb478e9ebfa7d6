"""check-configs' `x86_64-modules` target: the core's KUnit suites as modules of a kernel whose
KUnit is a module itself (KUNIT=m, as Debian builds it), booted under QEMU.

The test command's debug kernel keeps KUNIT=y, as the clearing topic's folio_zero_user suite
is bool (it calls hugetlb and scheduler internals nobody exports); it loads the core's suite
as a module already. Here KUnit itself is a module, so nothing of it is built in: the debug
kernel with config/kunit-modules.config (bool suites off) in its own build directory, booted
with ktap.LOAD_KUNIT_MODULES, each module's KTAP document parsed by kunit.py. It fails unless
KUnit and each core suite were built as modules, and each suite ran and passed every case.
"""

from __future__ import annotations

import sys
from pathlib import Path

from meminit.core import results
from meminit.core.kernels import Linux
from meminit.guest import ktap, vm
from meminit.kernel import build

NAME = "x86_64-modules"
VARIANT = "kunit-modules"  # kconfig.fragments_for: debug + kunit-modules.config
# the core's suites: what must load as modules and pass
SUITES = ("memcpy_nontemporal", "zone_device_memmap")


def kernel(linux: Linux, tree: Path) -> build.Kernel:
    return build.Kernel(variant=VARIANT, src=tree, out=linux.build_root / VARIANT, linux=linux)


def modules_built(out: Path) -> dict[str, bool]:
    """kunit and each core suite: whether modules.order lists its module (suite NAME is
    NAME_kunit.ko; KUnit's own is kunit.ko)."""
    order = (out / "modules.order").read_text() if (out / "modules.order").exists() else ""
    names = {Path(line).stem for line in order.split()}
    return {name: (name if name == "kunit" else f"{name}_kunit") in names for name in ("kunit", *SUITES)}


def check(report: ktap.KunitReport, built: dict[str, bool]) -> list[str]:
    """Why the target failed; empty when KUnit is a module (kunit.ko, which KUNIT=y would not
    build; configure refuses a fragment's dropped option before that), each core suite a
    module that ran and passed every case (a skip would mean a fast path went untested)."""
    problems = [f"{name}: no module in modules.order" for name, ok in built.items() if not ok]
    return problems + ktap.gate(report, SUITES, skips_allowed=False)


def run(linux: Linux, tree: Path, jobs: int) -> list[str]:
    """Build, boot and judge the target; its problems, each prefixed with its name."""
    target = kernel(linux, tree)
    build.build(target, jobs)
    run_dir = results.new_run_dir("kunit-modules")
    accel = vm.resolve_accel("auto", target.image, run_dir, target.variant)
    spec = vm.BootSpec(image=target.image, kernel=target.variant, name=NAME, script=ktap.LOAD_KUNIT_MODULES)
    result = vm.boot(spec, run_dir, accel)
    report = ktap.parse(result.console.read_text(errors="replace"), tree)
    (run_dir / f"{NAME}.kunit.txt").write_text(report.summary + "\n")
    ran = [s for s in SUITES if s in report.suites()]
    print(f"meminit: {NAME}: {report.tally()} (suites run of {', '.join(SUITES)}: {', '.join(ran) or 'none'}); "
          f"console: {result.console}", file=sys.stderr, flush=True)
    return [f"{NAME}: {p}" for p in check(report, modules_built(target.out))]

