"""The kernel tree's commands: `tree`, `export`, `build`, `check-series`."""

from __future__ import annotations

import argparse

from meminit import build, checks, source


def _cmd_tree(args: argparse.Namespace) -> int:
    trees = source.prepare_trees(reset=args.reset)
    print(f"series tree: {trees.series} ({len(source.read_series())} patches on {source.BASE_TAG})")
    print(f"base tree:   {trees.base}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    written = source.export_series()
    for patch in written:
        print(f"patches/{patch.name}")
    print(f"{len(written)} patches exported; patches/series updated")
    return 0


def _register_source(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tree", help="unpack linux-source-6.12 and apply patches/ as git commits")
    p.add_argument("--reset", action="store_true",
                   help="discard commits or changes in work/linux that were not exported")
    p.set_defaults(func=_cmd_tree)
    p = sub.add_parser("export", help="write the commits of work/linux back to patches/")
    p.set_defaults(func=_cmd_export)


def _cmd_build(args: argparse.Namespace) -> int:
    build.build_variants(args.variants or ["series"], reset=args.reset, jobs=args.jobs)
    return 0


def _register_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build the base and/or series kernel (ccache, trimmed config)")
    p.add_argument("variants", nargs="*", metavar="VARIANT",
                   help="base, series and/or debug (default: series)")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: number of CPUs)")
    p.add_argument("--reset", action="store_true", help="discard unexported work in work/linux")
    p.set_defaults(func=_cmd_build)


def _cmd_check_series(args: argparse.Namespace) -> int:
    checks.check_series(args.jobs, touched_only=args.touched_only)
    return 0


def _register_checks(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check-series", help="build every prefix of the series, checkpatch, W=1")
    p.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: 2)")
    p.add_argument("--touched-only", action="store_true",
                   help="per prefix compile only the files the series touched so far (W=1) and "
                        "build only the last prefix fully: what CI runs; the default builds "
                        "every prefix fully, for before a submission")
    p.set_defaults(func=_cmd_check_series)


def register(sub: argparse._SubParsersAction) -> None:
    _register_source(sub)
    _register_build(sub)
    _register_checks(sub)
