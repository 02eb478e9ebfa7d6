"""Rebinding a device on the running kernel and reading its memmap timings, with no VM.

The same steps as a scenario's guest script (scenarios/memmap.py): per rebind and
variant, set the series' mode, unbind, write a marker to the kernel log, bind, hash the
struct pages; the kernel's timing lines are then attributed by memmap_log like a
guest's dmesg. Here the machine is somebody's: every setting changed (debugfs mounted,
dynamic debug of mm/mm_init.c, the series' mode and thread count, the device's binding)
is put back, also after an error or Ctrl-C. Ctrl-C and SIGTERM are held while a step
runs, and the tools run in their own session, so no driver bind is cut in half.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from meminit.core import proc
from meminit.host.devices import Device
from meminit.core.errors import MeminitError
from meminit.kernel.memmap_log import HASH_FILE, MARK, MODE_FILE, THREADS_FILE, memmap_hash_function

DEBUGFS = Path("/sys/kernel/debug")
DYNAMIC_DEBUG = DEBUGFS / "dynamic_debug" / "control"
DEBUG_FILE = "mm/mm_init.c"


@dataclass
class KernelFiles:
    """The kernel interfaces used; tests point them at plain files."""

    debugfs: Path = DEBUGFS
    mode: Path = Path(MODE_FILE)
    threads: Path = Path(THREADS_FILE)
    hash: Path = Path(HASH_FILE)
    dynamic_debug: Path = DYNAMIC_DEBUG
    kmsg: Path = Path("/dev/kmsg")
    iomem: Path = Path("/proc/iomem")
    lockdown: Path = Path("/sys/kernel/security/lockdown")


class KernelLog:
    """The kernel log from now on, read from /dev/kmsg (one record per read)."""

    def __init__(self, kmsg: Path) -> None:
        self.fd = os.open(kmsg, os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.lost = 0  # records overwritten before we read them
        self.writer = kmsg

    def write(self, text: str) -> None:
        with self.writer.open("w") as kmsg:
            kmsg.write(text + "\n")

    def read_new(self) -> list[str]:
        """The messages logged since the last call, one per line."""
        lines: list[str] = []
        while True:
            try:
                record = os.read(self.fd, 8192)
            except BlockingIOError:
                return lines
            except OSError as exc:
                if exc.errno != errno.EPIPE:
                    raise
                self.lost += 1
                continue
            if not record:
                return lines
            header, _, message = record.decode(errors="replace").partition(";")
            lines.append(message.split("\n", 1)[0])

    def close(self) -> None:
        os.close(self.fd)


# Ctrl-C, kill, a closed ssh session or terminal, Ctrl-\\: each would end the command
# without putting anything back, so each waits for the step in progress.
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Interrupts:
    """The HELD_SIGNALS held until check(), between steps that must not be cut."""

    def __init__(self) -> None:
        self.received: int | None = None

    def _hold(self, signum: int, frame: object) -> None:
        self.received = signum

    def check(self) -> None:
        if self.received is not None:
            raise KeyboardInterrupt(f"signal {self.received}")


@contextmanager
def interrupts_held() -> Iterator[Interrupts]:
    held = Interrupts()
    old = {s: signal.signal(s, held._hold) for s in HELD_SIGNALS}
    try:
        yield held
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    held.check()


def mode_of(text: str) -> tuple[list[str], str]:
    """The modes a mode file offers and the current one: 'slow [template] auto'."""
    modes = text.replace("[", "").replace("]", "").split()
    current = re.search(r"\[([\w-]+)\]", text)
    if not current:
        raise MeminitError(f"cannot tell the current mode from {text!r}")
    return modes, current.group(1)


def dynamic_debug_lines(control: str) -> list[int]:
    """Lines of mm/mm_init.c whose pr_debug is on ('=p' among the flags)."""
    on = []
    for line in control.splitlines():
        m = re.match(rf"\S*{re.escape(DEBUG_FILE)}:(\d+) \[\S*\]\S+ =(\S+)", line)
        if m and "p" in m.group(2):
            on.append(int(m.group(1)))
    return on


@dataclass
class Settings:
    """What was changed, to be put back: each entry undoes one change."""

    undo: list[tuple[str, Callable[[], object]]] = field(default_factory=list)

    def restore(self) -> list[str]:
        """Undo every change, newest first; the failures, each named."""
        failed = []
        for what, action in reversed(self.undo):
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - every other change must still be put back
                failed.append(f"{what}: {exc}")
        self.undo.clear()
        return failed


def _write(path: Path, value: str) -> None:
    path.write_text(value + "\n")


@dataclass(frozen=True)
class KernelModes:
    """The series' switch as found: its modes and the current one; ["default"] without it."""

    series: bool
    modes: list[str]
    current: str


def prepare_kernel(files: KernelFiles, settings: Settings, threads: int | None) -> KernelModes:
    """debugfs mounted, timing lines on, threads set; what the kernel's switch offers."""
    if files.lockdown.exists():
        _, level = mode_of(files.lockdown.read_text())
        if level != "none":
            raise MeminitError(f"the kernel is locked down ({level}, as under Secure Boot): debugfs refuses "
                               "the writes that switch modes and turn on the timing lines; boot with Secure "
                               "Boot off, or lockdown=none where the kernel allows it")
    if not os.path.ismount(files.debugfs) and files.debugfs == DEBUGFS:
        proc.run(["mount", "-t", "debugfs", "debugfs", str(files.debugfs)], "mount debugfs")
        settings.undo.append(("unmount debugfs", lambda: proc.run(["umount", str(files.debugfs)], "umount")))
    if not files.dynamic_debug.exists():
        raise MeminitError(f"no {files.dynamic_debug}: the kernel needs CONFIG_DYNAMIC_DEBUG for its "
                           "memmap_init_zone_device timing lines")
    was_on = dynamic_debug_lines(files.dynamic_debug.read_text())

    def debug_back() -> None:
        _write(files.dynamic_debug, f"file {DEBUG_FILE} -p")
        for line in was_on:
            _write(files.dynamic_debug, f"file {DEBUG_FILE} line {line} +p")
    settings.undo.append((f"dynamic debug of {DEBUG_FILE}", debug_back))
    _write(files.dynamic_debug, f"file {DEBUG_FILE} +p")
    if not files.mode.exists():
        if threads is not None:
            raise MeminitError(f"--init-threads needs the series' {files.threads}; this kernel has none")
        return KernelModes(False, ["default"], "default")
    modes, current = mode_of(files.mode.read_text())
    settings.undo.append((f"{files.mode} back to {current}", lambda: _write(files.mode, current)))
    if threads is not None:
        if not files.threads.exists():
            raise MeminitError(f"this kernel has no {files.threads}")
        before = files.threads.read_text().strip()
        settings.undo.append((f"{files.threads} back to {before}", lambda: _write(files.threads, before)))
        _write(files.threads, str(threads))
    return KernelModes(True, modes, current)


def choose_variants(requested: list[str], kernel: KernelModes) -> list[str]:
    """The variants to interleave: the kernel's modes, or 'default' on a kernel without the switch."""
    modes = kernel.modes
    if not kernel.series:
        if requested not in (["all"], ["default"]):
            raise MeminitError(f"this kernel has no {MODE_FILE} (not the series): it measures only "
                               f"'default', not {','.join(requested)}")
        return ["default"]
    if requested == ["all"]:
        return modes
    unknown = [v for v in requested if v not in modes]
    if unknown:
        raise MeminitError(f"the kernel has no mode {','.join(unknown)} (it has {' '.join(modes)})")
    return requested


@dataclass
class Binding:
    """The device's driver binding, tracked so it can be put back as it was."""

    device: Device
    bound: bool

    def set(self, bound: bool) -> None:
        cmd = self.device.bind if bound else self.device.unbind
        proc.run(list(cmd), " ".join(cmd), new_session=True)
        self.bound = bound

    def restore(self) -> None:
        if self.bound != self.device.bound:
            self.set(self.device.bound)


def memmap_hash(device: Device) -> str:
    """The struct pages of the bound device, hashed by the series' TEST ONLY debugfs file."""
    script = f"{memmap_hash_function()}\nmemmap_hash_of {device.scenario} {' '.join(device.iomem_names)}\n"
    return proc.run(["bash", "-c", script], f"hashing the struct pages of {device.name}").stdout.strip()


def iomem_ranges(device: Device, iomem: str) -> int:
    """How many /proc/iomem ranges carry the first of the device's names that has any."""
    names = [line.split(" : ", 1)[1].strip() for line in iomem.splitlines() if " : " in line]
    return next((n for n in (names.count(name) for name in device.iomem_names) if n), 0)


@dataclass
class Rebinds:
    """What a measurement saw: kernel log lines (markers included) and hashes per variant."""

    log: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)  # memmap_log HASH_LINE lines


class Log(Protocol):
    """The kernel log as rebind() uses it (KernelLog; a fake in tests)."""

    def write(self, text: str) -> None: ...
    def read_new(self) -> list[str]: ...
    def close(self) -> None: ...


def rebind(device: Device, kernel: KernelModes, variants: list[str], rebinds: int, files: KernelFiles,
           settings: Settings, interrupts: Interrupts, log: Log, in_use: Callable[[], list[str]],
           on_step: Callable[[str], None] = lambda _: None) -> Rebinds:
    """Unbind and bind `rebinds` times per variant, interleaved, after a first bind (in the
    kernel's current mode, as a scenario's setup) when the device starts unbound.

    Before every unbind, `in_use` says again who uses the device: a bind can bring users
    (udev assembling md or LVM on it, a process opening it), and one stops the run.
    """
    seen = Rebinds()
    binding = Binding(device, device.bound)
    settings.undo.append((f"{device.name} {'bound' if device.bound else 'unbound'} again", binding.restore))
    hashing = files.hash.exists()
    if hashing and device.kind != "hmm" and iomem_ranges(device, files.iomem.read_text()) > 1:
        # memmap_hash_of hashes one range of a pmem or dax device, sized by the last timing line
        print(f"meminit: {device.name} has several ranges; its struct pages are not hashed",
              file=sys.stderr, flush=True)
        hashing = False

    def bind(phase: str, variant: str, iteration: int) -> None:
        interrupts.check()
        if phase == "rebind" and kernel.series:  # a base kernel runs only "default"
            _write(files.mode, variant)
        if binding.bound:
            users = in_use()
            if users:
                raise MeminitError(f"{device.name} got a user while it was measured: {'; '.join(users)}")
            binding.set(False)
        log.write(f"{MARK} {phase} {variant} {iteration}")
        binding.set(True)
        if hashing:
            seen.hashes.append(f"{MARK}-hash {variant} {iteration} {memmap_hash(device)}")
        seen.log.extend(log.read_new())
        on_step(f"{phase} {variant} {iteration}")

    if not device.bound:
        bind("first", kernel.current, 0)
    for i in range(1, rebinds + 1):
        for variant in variants:
            bind("rebind", variant, i)
    interrupts.check()
    lost = getattr(log, "lost", 0)
    if lost:
        raise MeminitError(f"{lost} kernel log records were overwritten before they were read")
    return seen
