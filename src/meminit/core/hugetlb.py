"""hugetlb pools: how many pages a fault run needs, and raising the pool for it (restored after)."""

from __future__ import annotations

import sys
from pathlib import Path

HUGETLB_DIRS = {
    "hugetlb-2M": ("hugepages-2048kB", 2 << 20),
    "hugetlb-1G": ("hugepages-1048576kB", 1 << 30),
}
HUGEPAGES_SYSFS = Path("/sys/kernel/mm/hugepages")


def hugetlb_plan(kinds: list[str], fault_size: int) -> dict[str, int]:
    """Pages each hugetlb kind needs for one fault run."""
    plan = {}
    for kind in kinds:
        if kind in HUGETLB_DIRS:
            page = HUGETLB_DIRS[kind][1]
            plan[kind] = -(-fault_size // page)
    return plan


class HugetlbReservation:
    """Raise nr_hugepages so that enough pages are free; restore on exit."""

    def __init__(self, plan: dict[str, int], root: Path = HUGEPAGES_SYSFS):
        self.plan = plan
        self.root = root
        self.saved: dict[Path, int] = {}
        self.skipped: dict[str, str] = {}

    def __enter__(self) -> "HugetlbReservation":
        for kind, need in self.plan.items():
            d = self.root / HUGETLB_DIRS[kind][0]
            try:
                nr = int((d / "nr_hugepages").read_text())
                free = int((d / "free_hugepages").read_text())
            except (OSError, ValueError) as exc:
                self.skipped[kind] = f"no hugetlb pool for this size ({exc})"
                continue
            if free >= need:
                continue
            try:
                (d / "nr_hugepages").write_text(str(nr + need - free))
                self.saved[d] = nr
            except OSError as exc:
                self.skipped[kind] = f"cannot reserve {need} pages via {d}/nr_hugepages: {exc.strerror}"
                continue
            got = int((d / "free_hugepages").read_text())
            if got < need:
                self.skipped[kind] = (f"asked the kernel for {need} free {HUGETLB_DIRS[kind][0]} pages, "
                                      f"got {got} (not enough contiguous free memory)")
                self._restore(d)
        return self

    def _restore(self, d: Path) -> None:
        nr = self.saved.pop(d, None)
        if nr is not None:
            try:
                (d / "nr_hugepages").write_text(str(nr))
            except OSError as exc:
                print(f"meminit: warning: could not restore {d}/nr_hugepages to {nr}: {exc}", file=sys.stderr)

    def __exit__(self, *exc) -> None:
        for d in list(self.saved):
            self._restore(d)
