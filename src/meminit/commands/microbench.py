"""`meminit microbench`: the userspace benchmark on this CPU (microbench.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from meminit.bench import microbench
from meminit.core import units
from meminit.commands import options

# what meminit-bench takes (bench/src): fill sizes in whole order-9 compounds of 64-byte records
# (run.c), 1 to MAX_THREADS (bench.h) threads; the options keep the text, which the tool reads
FILL_SIZE = options.size(multiple=32 * units.KIB)
FILL_SIZES = options.as_text(options.listed(FILL_SIZE))
THREADS = options.as_text(options.listed(options.integer(1, 64)))
BYTES = options.as_text(options.size())


def request_from(args: argparse.Namespace) -> microbench.MicrobenchRequest:
    return microbench.MicrobenchRequest(
        quick=args.quick, auto_sweep=args.auto_sweep, profile={name: getattr(args, name) for name in microbench.PROFILES},
        movsb_block=args.movsb_block, pgmap_type=args.pgmap_type, clear_fault=args.clear_fault,
        auto_altmap_min=args.auto_altmap_min, auto_dram_min=args.auto_dram_min,
        auto_walk_share=args.auto_walk_share, auto_late_llcs=args.auto_late_llcs,
        auto_late_margin=args.auto_late_margin, auto_order=args.auto_order,
        auto_memo=args.auto_memo, auto_switch_margin=args.auto_switch_margin,
        auto_span=args.auto_span, nice=args.nice,
        out=Path(args.out) if args.out else None, verify=args.verify, verify_size=args.verify_size)


def _cmd_microbench(args: argparse.Namespace) -> int:
    return microbench.run(request_from(args))


def register(subparsers: argparse._SubParsersAction) -> None:
    d = microbench.MicrobenchRequest()  # the defaults
    p = subparsers.add_parser(
        "microbench",
        help="replay memmap-init and huge-page clearing write patterns on this CPU (bench/)",
        description="Build bench/ and measure record-fill and clearing strategies on the real CPU. "
                    "Defaults take 3-4 minutes on a 2-vCPU VM with a 32 MiB L3; --quick is a smoke run "
                    "(20 s there, 2 minutes where a 480 MiB L3 makes every cold sample evict 1.4 GiB).")
    p.add_argument("--quick", action="store_true", help="small sizes, 3 repetitions (a smoke run)")
    p.add_argument("--auto-sweep", dest="auto_sweep", action="store_true",
                   help="issue 14's sweep: slow, template, movntdq and the learning auto on the kernel's "
                        "chunks, 1 and 2 threads, every size/layout/dest, no clears or faults (about "
                        "25 minutes with the default sizes; bench/results/ summaries come from it)")
    p.add_argument("--sizes", type=FILL_SIZES, help="record-fill destination sizes, in bytes of memmap (default 4M,16M,64M,256M,1G; 4M is the memmap of one 256 MiB test_hmm chunk)")
    p.add_argument("--reps", type=options.integer(), help="interleaved repetitions per case (default 7)")
    p.add_argument("--threads", type=THREADS, help="thread counts for the fills (default 1; the scaling section runs 1,2)")
    p.add_argument("--split", help="how threads share a fill: even (one run per thread), chunked "
                                   "(threads pull --chunk sized chunks from a counter); default even")
    p.add_argument("--chunk", type=BYTES,
                   help="chunk of the chunked split, in bytes of device memory (one 4 KiB "
                        "page per 64-byte record; rounded up to 512 pages); default 128M")
    p.add_argument("--scale-sizes", dest="scale_sizes", type=FILL_SIZES, help="scaling section: memmap sizes (default 1G)")
    p.add_argument("--scale-threads", dest="scale_threads", type=THREADS, help="scaling section: thread counts (default 1,2)")
    p.add_argument("--scale-layouts", dest="scale_layouts", help="scaling section: layouts (default o0,o9)")
    p.add_argument("--scale-fill", dest="scale_fill",
                   help="scaling section: strategies, cold, even and chunked split "
                        "(default slow,template,movntdq; 'none' skips the section)")
    p.add_argument("--auto-altmap-min", dest="auto_altmap_min", type=BYTES,
                   help="auto-altmap streams from this memmap size on (default: the LLC size)")
    p.add_argument("--auto-dram-min", dest="auto_dram_min", type=BYTES,
                   help="auto-dram streams from this memmap size on (default: 2 x the LLC size, as the kernel)")
    p.add_argument("--layouts", help="o0 (every record a head), o9 (order-9 compounds, head data "
                                     "after the tails), o9pre (first tail pre-composed, as the "
                                     "series writes it), o9dedup (o9pre "
                                     "as x86-64 deduplicates a DRAM memmap: 128 of 512 struct pages "
                                     "written, sizes count those; not walked); default o0,o9, "
                                     "--auto-sweep o0,o9pre,o9dedup")
    p.add_argument("--dests", help="cold, warm (just zeroed), walked (just zeroed, then walked once "
                                   "after the fill), readback (each chunk read back after its fill) "
                                   "(default cold,warm,walked,readback; --auto-sweep: cold,warm,walked)")
    p.add_argument("--fill", help=f"fill strategies (default {microbench.FILL_STRATEGIES})")
    p.add_argument("--clear", help="clear cases method-unit, e.g. stosb-4K,stosq-2M,clzero-all "
                                   "(methods: stosb stosb_desc stosq movnti avx512nt clzero memset; "
                                   "stosb_nz and avx512nt_nz store 0x5a: data-bandwidth probes)")
    p.add_argument("--clear-fault", dest="clear_fault", default=d.clear_fault, choices=["first", "middle", "last"],
                   help="fault subpage of every folio for php2M/fz2M/fz1G clears (default middle)")
    p.add_argument("--clear-size", dest="clear_size", type=BYTES, help="bytes cleared per clear sample (default 1G)")
    p.add_argument("--fault", help=f"demand-fault mappings (default {microbench.FAULT_KINDS}; 'none' to skip)")
    p.add_argument("--fault-size", dest="fault_size", type=BYTES, help="bytes faulted per sample (default 1G)")
    p.add_argument("--min-bytes", dest="min_bytes", type=BYTES,
                   help="timed bytes per fill sample: smaller destinations are filled several times "
                        "(each pass prepared afresh) (default 64M)")
    p.add_argument("--movsb-block", default=d.movsb_block, type=options.as_text(options.size(minimum=64)),
                   help="replicated block for rep movsb, order 0, at least 64 (default 4K)")
    p.add_argument("--pgmap-type", default=d.pgmap_type, choices=["fsdax", "private", "coherent", "generic"],
                   help="dev_pagemap type (sets the head refcount: 0 for private/coherent)")
    p.add_argument("--auto-walk-share", default=d.auto_walk_share,
                   choices=["capped", "llc", "full", "fraction", "aged"],
                   help="what the learning auto's walk hint (walked, readback) counts of each probe "
                        "piece's read-back: capped, all of it while the range fits in half the LLC and "
                        "in 4 MiB, none past that, as a walk after the whole range then misses in both "
                        "modes (patch 11); llc, the same without the 4 MiB cap (patch 11 until "
                        "2026-11-28); full, all of it (patch 11 until 2026-11-26); fraction, LLC / "
                        "range of it past the LLC (until 2026-11-26 19:45); aged, at every size each "
                        "template piece charged a read of as many lines past the round instead of its "
                        "own read-back, zeroed as long ago as the walk will find template's, and each "
                        "streaming piece read back (a candidate, 2026-11-28) (default capped)")
    p.add_argument("--auto-late-llcs", type=options.integer(0, 64, note="0: none"),
                   default=d.auto_late_llcs,
                   help="the learning auto's rounds in chunks that start this many LLCs into the "
                        "range keep template only if its probe is more than a quarter faster, as "
                        "no probe pays for the write-backs template leaves past the LLC (patch "
                        "11); 0: every round needs streaming 1/32 faster (before 2026-11-27) "
                        "(default %(default)s)")
    p.add_argument("--auto-late-margin", type=options.integer(2, 64), default=d.auto_late_margin,
                   help="the late rounds keep template only if its probe is more than 1/N faster "
                        "(patch 11's MEMMAP_AUTO_LATE_MARGIN; 8 was tried on 2026-11-27, "
                        "docs/series.md) (default %(default)s)")
    p.add_argument("--auto-order", default=d.auto_order,
                   choices=["lead-first", "second-stream-first", "stream-first", "lead-stream-first"],
                   help="the order of a round's pieces: lead-first, each pair a lead-in, a "
                        "template and a streaming piece (patch 11); stream-first, each pair a "
                        "streaming piece, a lead-in and a template piece; lead-stream-first, the "
                        "same after a timed lead-in; second-stream-first, the second pair only "
                        "streaming first (docs/series.md, \"Streaming first in each pair\") "
                        "(default %(default)s)")
    p.add_argument("--auto-memo", type=options.integer(0, 1024), default=d.auto_memo,
                   help="a round's verdict also serves the same round of the next N - 1 ranges "
                        "of its kind and size, which run none there (patch 11's "
                        "MEMMAP_AUTO_REUSE); 0: every range learns (docs/series.md, "
                        "\"Remembered verdicts\") (default %(default)s)")
    p.add_argument("--auto-switch-margin", type=options.margin_denominator(),
                   default=d.auto_switch_margin,
                   help="on several threads a round from chunk 2 on times its pieces beside the "
                        "other threads' writes in the verdict it began under, which makes the "
                        "other mode look faster: it turns that verdict only if the other mode's "
                        "probe is more than 1/N faster (patch 11's MEMMAP_AUTO_SWITCH_MARGIN); "
                        "0: the 1/32 margin, as before 2026-11-28 (docs/series.md, \"Two "
                        "threads\") (default %(default)s)")
    p.add_argument("--auto-span", type=options.integer(0, 1 << 20, note="0: none"), default=d.auto_span,
                   help="a round whose faster pieces are within a quarter of each other also "
                        "times a span of N struct pages in each mode (template first), and the "
                        "spans decide (docs/series.md, \"Spans for the ties\") (default "
                        "%(default)s, as patch 11's MEMMAP_AUTO_SPAN_PAGES; 0: none, as patch 11 "
                        "before 2026-11-29)")
    p.add_argument("--nice", type=options.integer(-20, 19, note="0: unchanged"), default=d.nice,
                   help="niceness for the benchmark's own session/autogroup (e.g. -10 on a busy "
                        "shared machine; negative values need root)")
    p.add_argument("--out", help="result directory (default results/microbench-<UTC stamp>)")
    p.add_argument("--verify", action="store_true", help="only run the correctness check")
    p.add_argument("--verify-size", default=d.verify_size, type=options.as_text(FILL_SIZE),
                   help="records size for --verify, a multiple of 32K (default 4M)")
    p.set_defaults(func=_cmd_microbench)
