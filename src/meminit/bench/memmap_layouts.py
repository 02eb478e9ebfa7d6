"""The bench's record layouts as the replay counts them (bench/src/fill_run.c, `--layouts`): how
many PFNs a compound page spans and how many of its struct pages the init writes.

Sizes count the struct pages written, as the kernel's thresholds and the bench's `--sizes` do. On
x86-64 a DRAM memmap of 2 MiB compound pages (devdax map=mem) is deduplicated: only two pages of
each compound page's struct pages exist, 128 of its 512, so its range spans four times the PFNs
it writes (layout o9dedup).
"""

from __future__ import annotations

from dataclasses import dataclass

PAGEBLOCK_PFNS = 512  # the kernel's chunks are whole pageblocks (pageblock_order 9 on x86-64)


@dataclass(frozen=True)
class Layout:
    """A compound page of `pfns` PFNs whose init writes `written` struct pages."""
    pfns: int
    written: int

    def chunk_written(self, chunk_pfns: int) -> int:
        """The struct pages a chunk of `chunk_pfns` PFNs writes, rounded up to whole compound
        pages and pageblocks as the kernel's split rounds it (memmap_init_split())."""
        align = max(self.pfns, PAGEBLOCK_PFNS)
        return -(-chunk_pfns // align) * align // self.pfns * self.written

    def whole(self, struct_pages: int) -> int:
        """The struct pages of the fewest whole compound pages writing at least `struct_pages`."""
        return -(-struct_pages // self.written) * self.written


LAYOUTS = {"o0": Layout(1, 1), "o9": Layout(512, 512), "o9pre": Layout(512, 512), "o9dedup": Layout(512, 128)}
O0, O9, O9DEDUP = LAYOUTS["o0"], LAYOUTS["o9"], LAYOUTS["o9dedup"]
