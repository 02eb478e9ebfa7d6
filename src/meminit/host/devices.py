"""The device `meminit measure` rebinds on a real machine, and what keeps it off anyone's data.

A device is named by the user, exactly: an ndctl namespace (`namespace0.0`), a dax
device (`dax0.0`), or the test_hmm module. Rebinding one unbinds its driver and binds it
again, so the kernel tears down and re-initialises its memmap; that does not write the
data area, but a device somebody is using would lose its user, and a wrong name would
hit somebody else's device. So nothing here reconfigures or creates anything, names
like `all` are refused before ndctl sees them, and a device is refused when it is:
- mounted, swapped on, or held by another block device (dm, md): always;
- open or mapped by a process: always;
- onlined as system RAM (a dax device in system-ram mode): always;
- disabled, or in a mode without struct pages: always (nothing to measure);
- carrying a filesystem or partition signature (blkid): unless the user passed
  `--i-know-this-erases-NAME` with this device's exact name.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from meminit.core import proc, units
from meminit.core.errors import MeminitError

NAMESPACE_NAME = re.compile(r"namespace\d+\.\d+")
DAX_NAME = re.compile(r"dax\d+\.\d+")
HMM_MODULE = "test_hmm"
ERASE_FLAG = "--i-know-this-erases-"


@dataclass(frozen=True)
class Device:
    """One device to rebind: how, what it is called in /proc/iomem, and what may hold it."""

    kind: str  # "namespace", "dax" or "hmm"
    name: str
    scenario: str  # the table's row: fsdax-mapdev, devdax-2m, device-private, ...
    size: int
    unbind: tuple[str, ...]
    bind: tuple[str, ...]
    iomem_names: tuple[str, ...] = ()  # its range in /proc/iomem, for the memmap hash
    block: str | None = None  # pmemX: its partitions, mounts, holders and signature count
    chars: tuple[str, ...] = ()  # daxX.Y: the dax devices it provides
    bound: bool = True  # at the start, and so again at the end
    refusals: tuple[str, ...] = field(default=())  # found while inspecting (mode, state)


@dataclass(frozen=True)
class SystemView:
    """Where the kernel's tables are read from; tests point these at fixtures."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    dev: Path = Path("/dev")


def _list(cmd: list[str], what: str) -> list[dict]:
    out = proc.run(cmd, what).stdout.strip()
    if not out:
        return []
    data = json.loads(out)
    return data if isinstance(data, list) else [data]


def _devdax_scenario(align: int | None) -> str:
    return f"devdax-{units.format_size(align).lower()}" if align else "devdax"


def namespace_device(name: str, listing: list[dict]) -> Device:
    """The namespace `name` from `ndctl list -N -X -i -n NAME` output (-X: its dax devices)."""
    found = [n for n in listing if n.get("dev") == name]
    if not found:
        raise MeminitError(f"ndctl knows no namespace {name}; `ndctl list -N -i` lists them")
    ns = found[0]
    mode, refusals = ns.get("mode", "?"), []
    if ns.get("state") == "disabled":
        refusals.append(f"{name} is disabled: enable it (ndctl enable-namespace {name}) and run again")
    daxes = ns.get("daxregion", {}).get("devices", [])
    chars = tuple(d["chardev"] for d in daxes if "chardev" in d) or tuple(filter(None, [ns.get("chardev")]))
    if mode == "fsdax":
        scenario = f"fsdax-map{ns.get('map', 'mem')}"
        if not ns.get("blockdev") and ns.get("state") != "disabled":
            refusals.append(f"ndctl lists no block device of {name}, so nothing could be checked for users")
    elif mode == "devdax":
        scenario = _devdax_scenario(ns.get("align"))
        if not chars and ns.get("state") != "disabled":
            refusals.append(f"ndctl lists no dax device of {name}, so nothing could be checked for users")
        refusals += [f"{d.get('chardev')} of {name} is onlined as system RAM (kmem): its memory is in use "
                     "by the kernel" for d in daxes if d.get("mode") == "system-ram"]
        refusals += [f"{d.get('chardev')} of {name} is in mode {d.get('mode')!r}, not devdax"
                     for d in daxes if d.get("mode") not in ("devdax", "system-ram")]
    else:
        scenario = mode
        refusals.append(f"{name} is in {mode} mode, which has no struct pages: only fsdax and devdax "
                        "namespaces are measured (and meminit does not reconfigure namespaces)")
    return Device(kind="namespace", name=name, scenario=scenario, size=int(ns.get("size", 0)),
                  unbind=("ndctl", "disable-namespace", name), bind=("ndctl", "enable-namespace", name),
                  iomem_names=(*chars, name), block=ns.get("blockdev"), chars=chars,
                  refusals=tuple(refusals))


def dax_device(name: str, listing: list[dict]) -> Device:
    """The dax device `name` from `daxctl list -D -i -d NAME` output."""
    found = [d for d in listing if d.get("chardev") == name]
    if not found:
        raise MeminitError(f"daxctl knows no device {name}; `daxctl list -D -i` lists them")
    dax, refusals = found[0], []
    if dax.get("mode") == "system-ram":
        refusals.append(f"{name} is onlined as system RAM (kmem): its memory is in use by the kernel")
    elif dax.get("mode") != "devdax":
        refusals.append(f"{name} is in mode {dax.get('mode')!r}, not devdax")
    if dax.get("state") == "disabled":
        refusals.append(f"{name} is disabled: enable it (daxctl enable-device {name}) and run again")
    return Device(kind="dax", name=name, scenario=_devdax_scenario(dax.get("align")),
                  size=int(dax.get("size", 0)), unbind=("daxctl", "disable-device", name),
                  bind=("daxctl", "enable-device", name), iomem_names=(name,), chars=(name,),
                  refusals=tuple(refusals))


def hmm_device(view: SystemView) -> Device:
    """test_hmm: loaded, it memremaps two DEVICE_PRIVATE chunks in DRAM; unloaded, it frees them."""
    refusals = []
    if (view.sys / "module" / HMM_MODULE).exists():
        refusals.append(f"{HMM_MODULE} is already loaded, so something may be using its devices: "
                        f"unload it (modprobe -r {HMM_MODULE}) and run again")
    return Device(kind="hmm", name=HMM_MODULE, scenario="device-private", size=0,
                  unbind=("modprobe", "-r", HMM_MODULE), bind=("modprobe", HMM_MODULE),
                  bound=False, refusals=tuple(refusals))


def inspect(kind: str, name: str, view: SystemView = SystemView()) -> Device:
    """The named device as ndctl, daxctl or sysfs describe it; refuses names that are not one device."""
    if kind == "namespace":
        if not NAMESPACE_NAME.fullmatch(name):
            raise MeminitError(f"--namespace takes one namespace by name, like namespace0.0, not {name!r}")
        return namespace_device(name, _list(["ndctl", "list", "-N", "-X", "-i", "-n", name], "ndctl list"))
    if kind == "dax":
        if not DAX_NAME.fullmatch(name):
            raise MeminitError(f"--dax takes one dax device by name, like dax0.0, not {name!r}")
        return dax_device(name, _list(["daxctl", "list", "-D", "-i", "-d", name], "daxctl list"))
    return hmm_device(view)


def block_devices(device: Device, view: SystemView) -> dict[str, str]:
    """The device's block device and its partitions: name -> "major:minor"."""
    if not device.block:
        return {}
    top = view.sys / "block" / device.block
    found = {device.block: (top / "dev").read_text().strip()}
    for part in sorted(top.glob(f"{device.block}p*")):
        found[part.name] = (part / "dev").read_text().strip()
    return found


def mounted(numbers: dict[str, str], view: SystemView) -> list[str]:
    """Mounts and swaps on any of the block devices (mountinfo gives major:minor)."""
    by_number = {v: k for k, v in numbers.items()}
    found = []
    for line in (view.proc / "self" / "mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[2] in by_number:
            found.append(f"{by_number[fields[2]]} is mounted on {fields[4]}")
    swaps = (view.proc / "swaps").read_text().splitlines()[1:]
    for line in swaps:
        path = line.split()[0]
        if Path(path).name in numbers:
            found.append(f"{Path(path).name} is swap")
    return found


def held(device: Device, view: SystemView) -> list[str]:
    """Block devices stacked on it (device-mapper, md, ...)."""
    found = []
    for name in block_devices(device, view):
        top = view.sys / "block" / device.block  # type: ignore[operator]
        holders = (top if name == device.block else top / name) / "holders"
        found += [f"{name} is held by {h.name}" for h in sorted(holders.glob("*"))]
    return found


def device_numbers(device: Device, view: SystemView) -> dict[int, str]:
    """st_rdev -> /dev name of its block devices, partitions and dax devices."""
    nodes = [view.dev / n for n in (*block_devices(device, view), *device.chars)]
    numbers = {}
    for node in nodes:
        try:
            st = os.stat(node)
        except OSError:
            continue
        if stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode):
            numbers[st.st_rdev] = f"/dev/{node.name}"
    return numbers


def users(device: Device, view: SystemView) -> list[str]:
    """Processes with the device open or mapped, matched by device number (a container's
    /dev/whatever is the same device): 'pid N (comm) has /dev/X open'."""
    numbers = device_numbers(device, view)
    if not numbers:
        return []
    found = []
    for pid_dir in sorted(view.proc.glob("[0-9]*")):
        holding: set[str] = set()
        try:
            for how, entries in (("has {} open", pid_dir / "fd"), ("maps {}", pid_dir / "map_files")):
                for entry in entries.iterdir():
                    try:
                        rdev = os.stat(entry).st_rdev
                    except OSError:
                        continue
                    if rdev in numbers:
                        holding.add(how.format(numbers[rdev]))
            comm = (pid_dir / "comm").read_text().strip()
        except OSError:  # the process ended, or is not ours to look at
            continue
        found += [f"pid {pid_dir.name} ({comm}) {what}" for what in sorted(holding)]
    return found


def kernel_users(device: Device, view: SystemView) -> list[str]:
    """Users inside the kernel that claim nothing: loop devices and NVMe-oF targets backed by it."""
    numbers = device_numbers(device, view)
    found = []
    backing = [(f.parent.parent.name, f) for f in view.sys.glob("block/loop*/loop/backing_file")]
    backing += [(f"nvmet namespace {f.parent.name} of {f.parent.parent.parent.name}", f)
                for f in view.sys.glob("kernel/config/nvmet/subsystems/*/namespaces/*/device_path")]
    for user, pointer in backing:
        try:
            target = pointer.read_text().strip()
            rdev = os.stat(target).st_rdev if target else None
        except OSError:
            continue
        if rdev in numbers:
            found.append(f"{numbers[rdev]} backs {user}")
    return found


def claimed(device: Device, view: SystemView) -> list[str]:
    """Block devices the kernel holds exclusively (a mount of any filesystem, swap, dm, md,
    bcache, a journal or log device): an O_EXCL open of them fails with EBUSY."""
    found = []
    for name in block_devices(device, view):
        try:
            fd = os.open(view.dev / name, os.O_RDONLY | os.O_EXCL)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                found.append(f"{name} is claimed by the kernel (mounted, swap, or under another "
                             "block device: an exclusive open fails)")
            continue
        os.close(fd)
    return found


def signatures(device: Device, view: SystemView) -> list[str]:
    """Filesystem or partition-table signatures on its block devices (blkid's low-level probe)."""
    found = []
    for name in block_devices(device, view):
        probe = proc.run(["blkid", "-p", "-o", "export", str(view.dev / name)], "blkid", check=False)
        if probe.returncode == 2:   # nothing found
            continue
        if probe.returncode != 0:
            raise MeminitError(f"blkid -p /dev/{name} failed (exit {probe.returncode}): {probe.stderr.strip()}")
        tags = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
        kind = tags.get("TYPE") or (f"a {tags['PTTYPE']} partition table" if "PTTYPE" in tags else "a signature")
        found.append(f"{name} holds {kind}")
    return found


def in_use(device: Device, view: SystemView = SystemView()) -> list[str]:
    """Everything that uses the device now: checked before the first rebind and every next one."""
    found = mounted(block_devices(device, view), view) + held(device, view)
    explained = {reason.split()[0] for reason in found}
    found += [reason for reason in claimed(device, view) if reason.split()[0] not in explained]
    return found + users(device, view) + kernel_users(device, view)


def refusals(device: Device, erase_named: list[str], view: SystemView = SystemView()) -> list[str]:
    """Why `device` must not be rebound; empty when it may be.

    `erase_named` are the NAMEs of every --i-know-this-erases-NAME given: one naming
    another device is refused too, so a typo cannot pass for consent.
    """
    found = list(device.refusals)
    stray = [n for n in erase_named if n != device.name]
    if stray:
        found.append(f"{', '.join(ERASE_FLAG + n for n in stray)} names another device than {device.name}")
    if device.block and not (view.sys / "block" / device.block).exists():
        raise MeminitError(f"{device.name} names block device {device.block}, but "
                           f"{view.sys / 'block' / device.block} does not exist")
    found += in_use(device, view)
    signed = signatures(device, view)
    if signed and device.name not in erase_named:
        found += [f"{s}: if its data may go, say so with {ERASE_FLAG}{device.name}" for s in signed]
    return found
