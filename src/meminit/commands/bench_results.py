"""`meminit bench-results`: per-CPU benchmark summaries and their table (bench_results.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from meminit.bench import auto_replay, bench_results, recorded_runs, round_conditions, stream_backends, stream_rules
from meminit.commands import options


def _cmd_bench_results(args: argparse.Namespace) -> int:
    if args.action == "replay":
        return bench_results.replay(auto_replay.Policy(probe=args.probe, lead=args.lead,
                                                       late_llcs=args.late_llcs, memo=args.memo,
                                                       switch_margin_den=args.switch_margin,
                                                       walk_max=args.walk_max, span=args.span),
                                    [Path(r) for r in args.run], args.check)
    if args.action == "rounds":
        print(round_conditions.report(auto_replay.Policy(late_llcs=args.late_llcs,
                                                         switch_margin_den=args.switch_margin,
                                                       walk_max=args.walk_max),
                                      recorded_runs.recorded_runs([Path(r) for r in args.run])), end="")
        return 0
    if args.action == "rules":
        print(stream_rules.report(recorded_runs.recorded_runs([Path(r) for r in args.run]), auto_replay.Policy(),
                                  args.markdown, args.streaming), end="")
        return 0
    if args.action == "backends":
        print(stream_backends.report(recorded_runs.recorded_runs([Path(r) for r in args.run])))
        return 0
    if args.action == "add":
        if len(args.run) != 1:
            args.usage_error("add needs RUN (one): a microbench run directory, or a table.txt")
        bench_results.add_run(Path(args.run[0]), args.source, args.cpu_model, args.family, args.model, args.date,
                              args.note)
        return 0
    return bench_results.show_table(args.check, args.write)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench-results", help="per-CPU benchmark summaries (bench/results/) and their table")
    p.add_argument("action", choices=("add", "table", "replay", "rounds", "rules", "backends"),
                   help="add: summarise a microbench run into bench/results/; table: the table across CPUs; "
                   "replay: the learning auto over every recorded sweep (bench/results/, ../shared/measurements/); "
                   "rounds: what its logged rounds measured, by the mode the other chunks were written in; "
                   "rules: fixed streaming rules beside the learning auto, time-weighted, per CPU, and the "
                   "simplest that meets the bars; backends: MOVNTI (memcpy_flushcache()) against MOVNTDQ, "
                   "time-weighted, per run that timed both")
    p.add_argument("run", nargs="*", help="add: a microbench run directory, or a table.txt; replay, rounds, rules, "
                   "backends: more runs (name them before the options)")
    p.add_argument("--source", help="add: where the run came from (default: its path)")
    p.add_argument("--cpu-model", help="add, for a table.txt: the CPU model string")
    cpu_number = options.as_text(options.integer(0))  # as /proc/cpuinfo and result.json have them
    p.add_argument("--family", type=cpu_number, help="add: the CPU family, where the run did not record it")
    p.add_argument("--model", type=cpu_number, help="add: the CPU model number, where the run did not record it")
    p.add_argument("--date", help="add, for a table.txt: when the run was made (UTC)")
    p.add_argument("--note", help="add, for a table.txt: what the run lacks or how it was made")
    p.add_argument("--check", action="store_true", help="table: fail if bench/RESULTS.md is out of step; "
                   "replay: fail if a configuration of a split the kernel makes misses the bar")
    p.add_argument("--probe", type=options.integer(), default=auto_replay.Policy.probe,
                   help="replay: struct pages per timed probe piece (default %(default)s, as patch 11)")
    p.add_argument("--lead", type=options.integer(0, note="0: none"), default=auto_replay.Policy.lead,
                   help="replay: untimed template struct pages before a round's pieces (default %(default)s; "
                        "0: none)")
    p.add_argument("--late-llcs", type=options.integer(0, 64, note="0: none"),
                   default=auto_replay.Policy.late_llcs,
                   help="replay: rounds this many LLCs into a range keep template only if its probe is a "
                        "quarter faster (default %(default)s, as patch 11; 0: the 1/32 margin everywhere, "
                        "before 2026-11-27)")
    p.add_argument("--switch-margin", type=options.margin_denominator(),
                   default=auto_replay.Policy.switch_margin_den,
                   help="replay, rounds: on several threads a round from chunk 2 on turns the verdict the "
                        "other threads write in only if the other mode's probe is more than 1/N faster "
                        "(default %(default)s, as patch 11; 0: the 1/32 margin, before 2026-11-28)")
    p.add_argument("--memo", type=options.integer(0, 1024, note="0: none"), default=auto_replay.Policy.memo,
                   help="replay: a round's verdict serves the same round of the next N - 1 ranges of its "
                        "kind and size, in bursts of ranges as the sweep runs them (64 MiB of struct "
                        "pages per sample) (default %(default)s, as patch 11; 0: every range learns, "
                        "as before 2026-11-27)")
    p.add_argument("--span", type=options.integer(0, 1 << 20, note="0: none"),
                   default=auto_replay.Policy.span,
                   help="replay: a round whose faster pieces are within a quarter of each other "
                        "times a span of N struct pages in each mode, which decides (the bench's "
                        "--auto-span); the sweep's logged spans where it timed them, else each "
                        "repetition's own range (default %(default)s, as patch 11's "
                        "MEMMAP_AUTO_SPAN_PAGES; 0: none, as patch 11 before 2026-11-29)")
    p.add_argument("--walk-max", type=options.size(minimum=0), default=auto_replay.Policy.walk_max,
                   help="replay: the walk hint's read-back stops at this much memmap as well as at half "
                        "the LLC (default 4M, as patch 11 since 2026-11-28; 0: half the LLC only, as "
                        "before); walked ranges the sweep read back past it are judged by the rounds of "
                        "the same run's just-zeroed range")
    p.add_argument("--write", action="store_true", help="table: write the table into bench/RESULTS.md")
    p.add_argument("--markdown", action="store_true", help="rules: the table in Markdown")
    p.add_argument("--streaming", choices=stream_rules.STREAMINGS, default=stream_rules.STREAMING,
                   help="rules: the strategy timed as streaming (default %(default)s, with the learning "
                        "auto; movnti: memcpy_flushcache(), the mm tree's memcpy_nontemporal() on x86, "
                        "in the runs that timed it)")
    p.set_defaults(func=_cmd_bench_results, usage_error=p.error)
