"""`meminit maple-bench`: fork's maple-tree copy on the host (maple_bench.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from meminit.bench import maple_bench
from meminit.commands import options
from meminit.core.errors import MeminitError


def _counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise MeminitError(f"--counts wants comma-separated integers, got {text!r}") from exc
    if not counts or any(n <= 0 for n in counts):
        raise MeminitError(f"--counts wants positive integers, got {text!r}")
    return counts


def request_from(args: argparse.Namespace) -> maple_bench.MapleBenchRequest:
    return maple_bench.MapleBenchRequest(counts=_counts(args.counts), reps=args.reps, min_seconds=args.min_seconds,
                                         gap_pages=args.gap_pages, fork_seconds=args.fork_seconds,
                                         out=Path(args.out) if args.out else None)


def _cmd_maple_bench(args: argparse.Namespace) -> int:
    return maple_bench.run(request_from(args))


def register(subparsers: argparse._SubParsersAction) -> None:
    d = maple_bench.MapleBenchRequest()  # the defaults
    p = subparsers.add_parser(
        "maple-bench",
        help="host benchmark of fork's maple-tree copy (__mt_dup vs re-insert)",
        description="Build the kernel's userspace maple-tree harness from the pristine 6.12 "
                    "source (BENCH_FORK), time __mt_dup() against rebuilding a tree of N "
                    "VMA-like ranges, optionally run forkbench on the host; write "
                    "results/maple-<UTC>/result.json and maple.png.",
    )
    p.add_argument("--counts", default=",".join(map(str, d.counts)),
                   type=options.as_text(options.listed(options.integer())),
                   help="comma-separated N values (default: %(default)s)")
    p.add_argument("--reps", type=options.integer(), default=d.reps,
                   help="repetitions, interleaved over N and methods (default: %(default)s)")
    p.add_argument("--min-seconds", type=options.number(zero="0: three copies a sample"), default=d.min_seconds,
                   help="minimum timed seconds per (rep, N, method) sample, at least three copies "
                        "(default: %(default)s)")
    p.add_argument("--gap-pages", type=options.integer(0, note="0: contiguous"), default=d.gap_pages,
                   help="unmapped pages between the ranges (default 0: contiguous, like forkbench)")
    p.add_argument("--fork-seconds", type=options.number(zero="0 skips it"), default=d.fork_seconds,
                   help="seconds of forkbench per N and rep on the host; 0 skips it "
                        "(default: %(default)s)")
    p.add_argument("--out", help="result directory (default: results/maple-<UTC stamp>)")
    p.set_defaults(func=_cmd_maple_bench)
