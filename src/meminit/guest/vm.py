"""Booting a built kernel under QEMU with virtme-ng, KVM when it really works, TCG otherwise.

The guest sees the host's root filesystem (read-only) through virtme-ng, so Debian's
ndctl/daxctl installed on the host run in the guest. Results never travel through the
console: the guest script writes files into the run directory, shared read-write, so
kernel messages and command output cannot be confused. The console is still captured
(vng --verbose) because it is where a panic or a hang leaves its last words.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import deps, paths, proc
from meminit.core.units import GIB, format_size
from meminit.core.errors import MeminitError

# QEMU q35 keeps 2 GiB of RAM below 4 GiB once the guest has >= 2.75 GiB; the rest
# starts at 4 GiB. Emulated pmem (memmap=SIZE!4G) is carved out of that high RAM.
Q35_LOW_RAM = 2 * GIB
PMEM_OFFSET = 4 * GIB
# Ordinary RAM the guest keeps for itself beside the pmem (low RAM + this much high RAM).
GUEST_HEADROOM = 1 * GIB
DEFAULT_MEMORY = 4 * GIB
DEFAULT_CPUS = 2
DEFAULT_TIMEOUT_S = 900


def host_tsc_khz(cpuinfo: str) -> int | None:
    """The host's TSC rate in kHz from /proc/cpuinfo, when the TSC is constant."""
    if not re.search(r"^flags\s*:.*\bconstant_tsc\b", cpuinfo, re.MULTILINE):
        return None
    m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.MULTILINE)
    return round(float(m.group(1)) * 1000) if m else None


def clock_parameters() -> list[str]:
    """Keep the guest's ktime on the TSC, so the series' ns timings are not 4 ms jiffies.

    Under a loaded TCG host the guest's TSC calibration fails now and then (seen with
    the config trimmed of ACPI, hence of HPET and the PM timer, calibrating against the
    PIT), and the clocksource watchdog then gives up on the TSC. QEMU passes
    the host TSC through (TCG and KVM alike), so tell the guest its rate and trust it.
    """
    khz = host_tsc_khz(Path("/proc/cpuinfo").read_text())
    return ["tsc=reliable", *([f"tsc_early_khz={khz}"] if khz else [])]


# x86's COMMAND_LINE_SIZE is 2048 bytes, and virtme-ng adds its own parameters (mounts,
# init, console) to ours: beyond this many bytes of ours, later ones could be cut off
# without a word, as the guest script once cut off kunit.enable=0 and memmap=.
MAX_APPEND_BYTES = 1024
# Built-in KUnit suites run at every boot; the test command runs them, other boots need not.
SKIP_KUNIT = "kunit.enable=0"

ACCEL_CACHE = paths.CACHE / "accel.json"
TRIAL_TIMEOUT_S = 90
VNG = "vng"

# Lines of a kernel log that mean the boot is not trustworthy.
# Lockdep and RCU splats begin "WARNING: possible circular locking ...", "WARNING:
# suspicious RCU usage" and so on: any message that starts with "WARNING: " counts (not
# "Spectre V2 : WARNING: ...", which is advice, not a splat).
KERNEL_FAILURE = re.compile(
    r"(Kernel panic - not syncing|Oops: |BUG: |(?:^|\]\s)WARNING: |"
    r"general protection fault|kernel BUG at|Unable to handle kernel|"
    r"watchdog: BUG: soft lockup|INFO: task .* blocked for more than|"
    r"UBSAN: )"
)
KMEMLEAK_FOUND = re.compile(r"kmemleak: \d+ new suspected memory leaks")


@dataclass(frozen=True)
class GuestRequest:
    """What a command that boots guests was asked of them, the same on every such command:
    the accelerator (auto: KVM if a trial guest boots, else TCG), CPUs, memory, extra kernel
    parameters and the timeout in seconds. Memory and timeout None: the command's or the
    scenario's own (soak and selftests size and time their guests themselves)."""

    accel: str = "auto"
    cpus: int = DEFAULT_CPUS
    memory: int | None = None
    append: list[str] = field(default_factory=list)
    timeout: int | None = None


@dataclass
class BootSpec:
    image: Path
    name: str
    script: str
    kernel: str = ""  # the kernel's name in messages (series, base, debug)
    memory_bytes: int = DEFAULT_MEMORY
    cpus: int = DEFAULT_CPUS
    append: list[str] = field(default_factory=list)
    timeout_s: int = DEFAULT_TIMEOUT_S
    numa: list[str] = field(default_factory=list)  # vng --numa arguments, one per node
    # host directories the guest may write to, its writes kept in memory (vng --overlay-rwdir)
    overlay_dirs: list[str] = field(default_factory=list)
    # The script reads /sys/kernel/debug/kmemleak and its caller judges each report
    # (soak.py knows leaks of the base kernel); else any kmemleak report fails the boot.
    leaks_judged_by_caller: bool = False


@dataclass
class BootResult:
    console: Path
    dmesg: Path
    exit_code: int
    seconds: float
    stderr: str = ""

    def stderr_tail(self, lines: int = 15) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


def pmem_layout(pmem_bytes: int, memory_bytes: int | None) -> tuple[int, str]:
    """Guest memory and the memmap= parameter for `pmem_bytes` of emulated pmem at 4 GiB.

    Refuses, before anything boots, a size the guest cannot address.
    """
    if pmem_bytes <= 0 or pmem_bytes % (128 << 20):
        raise MeminitError("emulated pmem must be a positive multiple of 128M (a memory section)")
    needed = Q35_LOW_RAM + pmem_bytes + GUEST_HEADROOM
    memory = memory_bytes if memory_bytes is not None else needed
    if memory < needed:
        high = max(memory - Q35_LOW_RAM, 0)
        raise MeminitError(
            f"{format_size(pmem_bytes)} of emulated pmem does not fit a {format_size(memory)} guest: "
            f"q35 maps only {format_size(high)} above 4G, and the guest keeps "
            f"{format_size(GUEST_HEADROOM)} of it; use --memory {format_size(needed)} or more")
    return memory, f"memmap={format_size(pmem_bytes)}!{format_size(PMEM_OFFSET)}"


def numa_pmem_layout(memory_bytes: int, cpus: int) -> list[str]:
    """Two NUMA nodes for a pmem guest: node 0 has every CPU and the RAM below 4 GiB, node 1
    the rest, i.e. the emulated pmem at 4 GiB and the RAM above it, and no CPU.

    q35 puts 2 GiB below 4 GiB when the guest has 2.75 GiB or more, and QEMU gives the
    nodes guest RAM in order, so node 1 starts at 4 GiB: a device on a node with memory
    and no CPUs, whose memmap init must take its helper CPUs from elsewhere.
    """
    if memory_bytes < Q35_LOW_RAM + GUEST_HEADROOM:
        raise MeminitError(f"a {format_size(memory_bytes)} guest is too small for a second "
                           f"NUMA node above 4 GiB")
    return [f"{Q35_LOW_RAM >> 20}M,cpus=0-{cpus - 1}", f"{(memory_bytes - Q35_LOW_RAM) >> 20}M"]


def kernel_failures(log: str, leaks: bool = True) -> list[str]:
    """The lines of a console/dmesg log that report a panic, oops, BUG, WARN, lockup or
    (with `leaks`) a kmemleak finding."""
    return [line.strip() for line in log.splitlines()
            if KERNEL_FAILURE.search(line) or (leaks and KMEMLEAK_FOUND.search(line))]


def _vng_path() -> str:
    candidate = Path(sys.executable).parent / VNG
    return str(candidate) if candidate.exists() else VNG


def _vng_env() -> dict[str, str]:
    # vng runs its helpers (virtme-run, ...) through PATH: put the venv's bin first.
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def check_append(params: list[str]) -> None:
    """Refuse kernel parameters that could push the command line past what the kernel keeps."""
    size = len(" ".join(params))
    if size > MAX_APPEND_BYTES:
        raise MeminitError(f"{size} bytes of kernel parameters ({' '.join(params)[:80]}...) "
                           f"exceed the {MAX_APPEND_BYTES} this harness allows: the kernel keeps "
                           "2048 bytes of command line, virtme-ng's own parameters included")


def vng_command(spec: BootSpec, accel: str, shared_dir: Path) -> list[str]:
    check_append([*clock_parameters(), *spec.append])
    cmd = [_vng_path(), "--run", str(spec.image), "--verbose", "--disable-microvm",
           "--memory", str(spec.memory_bytes // (1 << 20)) + "M", "--cpus", str(spec.cpus),
           "--rwdir", str(shared_dir)]
    if accel == "tcg":
        cmd.append("--disable-kvm")
    else:
        # vng picks q35 only for TCG; the pmem layout above assumes q35 in both modes.
        cmd.append("--qemu-opts=-machine q35")
    for node in spec.numa:
        cmd += ["--numa", node]
    for directory in spec.overlay_dirs:
        cmd += ["--overlay-rwdir", directory]
    for arg in [*clock_parameters(), *spec.append]:
        cmd += ["--append", arg]
    cmd += ["--exec", spec.script]
    return cmd


_BROUGHT_UP = re.compile(r"smp: Brought up (?P<nodes>\d+) nodes?, (?P<cpus>\d+) CPUs?")


def guest_cpus(log: str) -> int | None:
    """CPUs the guest kernel brought up, from its boot log (None if it does not say)."""
    m = _BROUGHT_UP.search(log)
    return int(m.group("cpus")) if m else None


def guest_files(shared_dir: Path, name: str) -> tuple[Path, Path, Path]:
    """Where the guest leaves its script's exit code, its dmesg and its script's stderr."""
    return (shared_dir / f"{name}.exit", shared_dir / f"{name}.dmesg.log",
            shared_dir / f"{name}.stderr")


def guest_script_file(shared_dir: Path, name: str) -> Path:
    """The file the guest runs: virtme-ng would otherwise pass the script on the command line."""
    return shared_dir / f"{name}.guest.sh"


def guest_wrapper(spec: BootSpec, shared_dir: Path) -> str:
    """Wrap the scenario script so its exit code and dmesg land in files, not on the console.

    The script stands on lines of its own, so a trailing comment or a here-doc in it ends
    where it should.

    The guest reboots through sysrq, and vng's -no-reboot turns that reboot into QEMU's
    exit: it needs no ACPI power-off and no init system, and cannot hang in shutdown.
    """
    exit_file, dmesg_file, stderr_file = guest_files(shared_dir, spec.name)
    return (f"cd {shlex.quote(str(shared_dir))}; "
            f"(\n{spec.script}\n) 2> {shlex.quote(str(stderr_file))}; rc=$?; "
            f"dmesg > {shlex.quote(str(dmesg_file))}; "
            f"echo $rc > {shlex.quote(str(exit_file))}; sync; "
            "echo b > /proc/sysrq-trigger")


def boot(spec: BootSpec, run_dir: Path, accel: str) -> BootResult:
    """Boot once, run spec.script in the guest, and fail loudly on panic/oops/WARN/hang."""
    deps.ensure(deps.GUEST)
    if not spec.image.exists():
        raise MeminitError(f"kernel image {spec.image} does not exist: build it first")
    run_dir.mkdir(parents=True, exist_ok=True)
    console = run_dir / f"{spec.name}.console.log"
    exit_file, dmesg, stderr = guest_files(run_dir, spec.name)
    for stale in (exit_file, dmesg, stderr):
        stale.unlink(missing_ok=True)
    script_file = guest_script_file(run_dir, spec.name)
    script_file.write_text(guest_wrapper(spec, run_dir) + "\n")
    wrapped = BootSpec(**{**spec.__dict__, "script": f"sh {shlex.quote(str(script_file))}"})
    cmd = vng_command(wrapped, accel, run_dir)
    (run_dir / f"{spec.name}.cmd").write_text(shlex.join(cmd) + "\n")
    print(f"meminit: booting {spec.kernel or spec.image}/{spec.name} "
          f"({accel}, {format_size(spec.memory_bytes)}, {spec.cpus} CPUs); console: {console}",
          file=sys.stderr, flush=True)
    start = time.monotonic()
    # A pipe, not the log file itself: QEMU reopens its stdout by path for the script's
    # output ports, and a reopened regular file would overwrite the log from offset 0.
    vng = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, cwd=run_dir, env=_vng_env(),
                           start_new_session=True)
    with console.open("wb") as out:
        copier = threading.Thread(target=shutil.copyfileobj, args=(vng.stdout, out), daemon=True)
        copier.start()
        try:
            vng.wait(timeout=spec.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(vng.pid, signal.SIGKILL)
            vng.wait()
            raise MeminitError(f"guest {spec.name} hung: no exit after {spec.timeout_s}s; console: {console}")
        finally:
            copier.join(timeout=10)
    seconds = time.monotonic() - start
    log = console.read_text(errors="replace")
    if dmesg.exists():
        log += dmesg.read_text(errors="replace")
    failures = kernel_failures(log, leaks=not spec.leaks_judged_by_caller)
    if failures:
        raise MeminitError(f"guest {spec.name}: kernel reported a failure: {failures[0]}\n"
                           f"console: {console}" + (f"\ndmesg: {dmesg}" if dmesg.exists() else ""))
    # A guest that silently runs on fewer CPUs measures something else (without ACPI,
    # SeaBIOS' MP table offers the kernel only the boot CPU).
    online = guest_cpus(log)
    if online is not None and online != spec.cpus:
        raise MeminitError(f"guest {spec.name} brought up {online} of the {spec.cpus} CPUs it was "
                           f"given; console: {console}")
    if not exit_file.exists():
        raise MeminitError(f"guest {spec.name} ended without running the script to its end "
                           f"(vng exit {vng.returncode}); console: {console}")
    code = int(exit_file.read_text().strip() or "-1")
    return BootResult(console=console, dmesg=dmesg, exit_code=code, seconds=seconds,
                      stderr=stderr.read_text(errors="replace") if stderr.exists() else "")


def _host_key() -> str:
    return f"{os.uname().release} {proc.first_line(['qemu-system-x86_64', '--version']) or '?'}"


def detect_accel(image: Path, run_dir: Path, kernel: str = "") -> str:
    """'kvm' if a trial guest really boots with KVM here, else 'tcg'; the verdict is cached."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    # the verdict is keyed on QEMU's version, so QEMU must be there before it is asked
    deps.ensure(deps.GUEST)
    key = _host_key()
    if ACCEL_CACHE.exists():
        cached = json.loads(ACCEL_CACHE.read_text())
        if cached.get("host") == key:
            return str(cached["accel"])
    print("meminit: /dev/kvm exists; booting a trial KVM guest to see whether it really starts",
          file=sys.stderr, flush=True)
    spec = BootSpec(image=image, name="kvm-trial", script="true", kernel=kernel, memory_bytes=1 * GIB,
                    cpus=1, timeout_s=TRIAL_TIMEOUT_S)
    try:
        accel = "kvm" if boot(spec, run_dir, "kvm").exit_code == 0 else "tcg"
    except MeminitError as exc:
        print(f"meminit: KVM trial failed ({str(exc).splitlines()[0]}); using TCG", file=sys.stderr)
        accel = "tcg"
    ACCEL_CACHE.parent.mkdir(parents=True, exist_ok=True)
    ACCEL_CACHE.write_text(json.dumps({"host": key, "accel": accel}) + "\n")
    return accel


def resolve_accel(requested: str, image: Path, run_dir: Path, kernel: str = "") -> str:
    return detect_accel(image, run_dir, kernel) if requested == "auto" else requested


def boot_script(spec: BootSpec, run_dir: Path, accel: str, output: Path | None = None) -> BootResult:
    """Boot and run spec.script; a non-zero exit fails with the script's stderr and where to look."""
    result = boot(spec, run_dir, accel)
    if result.exit_code != 0:
        where = f"output: {output}; " if output else ""
        raise MeminitError(f"{spec.name}: guest script failed with exit {result.exit_code}:\n"
                           f"{result.stderr_tail()}\n{where}console: {result.console}")
    return result


# kunit.py (from 7.x on) starts QEMU with "-accel kvm -accel hvf -accel tcg", and QEMU
# takes the first that initialises: where /dev/kvm opens but guests never run (the PVM
# hosts here), the guest hangs until kunit.py's timeout. These wrappers drop the kvm
# and hvf choices, so such guests run under TCG, as 6.12's kunit.py always ran them.
_TCG_ONLY_QEMU = """#!/bin/sh
# written by meminit (vm.tcg_only_qemu): {real} without -accel kvm or -accel hvf
accel=0
for arg do
    shift
    if [ "$accel" = 1 ]; then
        accel=0
        case "$arg" in kvm|hvf) continue ;; esac
        set -- "$@" -accel
    fi
    if [ "$arg" = -accel ]; then accel=1; continue; fi
    set -- "$@" "$arg"
done
exec {real} "$@"
"""


def tcg_only_qemu(directory: Path, qemu_arches: list[str]) -> Path:
    """A directory of qemu-system-ARCH wrappers that never ask for KVM or HVF, to put first
    on the PATH of a tool that starts QEMU itself (kunit.py); returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    for arch in qemu_arches:
        real = shutil.which(f"qemu-system-{arch}")
        if real is None:
            raise MeminitError(f"qemu-system-{arch} is not installed")
        wrapper = directory / f"qemu-system-{arch}"
        wrapper.write_text(_TCG_ONLY_QEMU.format(real=real))
        wrapper.chmod(0o755)
    return directory
