"""What the machine the harness runs on is: CPU, caches, memory, load, compiler."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from meminit.core import proc


def read_text(path: str | Path, default: str = "") -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return default


def parse_cpuinfo(text: str) -> dict:
    """Model name, family/model/stepping and flags of the first processor in /proc/cpuinfo."""
    info: dict = {"cpu_model": "unknown", "flags": []}
    numbers = {"cpu family": "cpu_family", "model": "cpu_model_number", "stepping": "cpu_stepping"}
    for line in text.splitlines():
        if not line.strip():
            if info["flags"]:
                break
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and info["cpu_model"] == "unknown":
            info["cpu_model"] = value.strip()
        elif key == "flags" and not info["flags"]:
            info["flags"] = value.split()
        elif key in numbers and numbers[key] not in info:
            info[numbers[key]] = value.strip()
    return info


def cpu_model() -> str:
    model = parse_cpuinfo(read_text("/proc/cpuinfo"))["cpu_model"]
    return model if model != "unknown" else (platform.processor() or "unknown")


def cache_info() -> list[dict]:
    caches = []
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        caches.append({k: read_text(d / k).strip() for k in ("level", "type", "size", "shared_cpu_list")})
    return caches


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, '? ? ?' where /proc/loadavg cannot be read."""
    return " ".join(read_text("/proc/loadavg", "? ? ?").split()[:3])


def cpu_times(stat: str) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat's first line; idle and iowait are not busy."""
    fields = [int(v) for v in stat.splitlines()[0].split()[1:]] if stat.startswith("cpu ") else []
    if len(fields) < 5:
        return 0, 0
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal; guest time is in user
    return total - fields[3] - fields[4], total


def cpu_busy(seconds: float = 1.0) -> float | None:
    """The share of every CPU's time spent busy over the next `seconds` (None: /proc/stat unread)."""
    busy0, total0 = cpu_times(read_text("/proc/stat"))
    time.sleep(seconds)
    busy1, total1 = cpu_times(read_text("/proc/stat"))
    return (busy1 - busy0) / (total1 - total0) if total1 > total0 else None


def memory_bytes(meminfo: str | None = None) -> int | None:
    """The machine's memory (MemTotal of /proc/meminfo) in bytes; None where it says none."""
    for line in (read_text("/proc/meminfo") if meminfo is None else meminfo).splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def machine_info() -> dict:
    cpu = parse_cpuinfo(read_text("/proc/cpuinfo"))
    return {
        **cpu,
        "caches": cache_info(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "mem_total": next((line.split(":", 1)[1].strip() for line in read_text("/proc/meminfo").splitlines()
                           if line.startswith("MemTotal")), ""),
        "thp_enabled": read_text("/sys/kernel/mm/transparent_hugepage/enabled").strip(),
        "gcc": proc.first_line(["gcc", "--version"]),
        "hypervisor": "hypervisor" in cpu["flags"],
    }
