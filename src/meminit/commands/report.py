"""`meminit report RUN`: render a run's table and plots again from its result.json."""

from __future__ import annotations

import argparse

from meminit import results, scenarios
from meminit.errors import MeminitError


def _cmd_report(args: argparse.Namespace) -> int:
    run_dir, result = results.load_json(args.run)
    kind = result.get("kind")
    if kind != "memmap":
        raise MeminitError(f"{run_dir}: 'meminit report' renders scenario runs; this one is {kind!r}")
    print(scenarios.render(result))
    for png in scenarios.plot(result, run_dir):
        print(f"plot: {png}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="re-render the table and plot of a results/<run>")
    p.add_argument("run", help="run directory or its name under results/")
    p.set_defaults(func=_cmd_report)
