"""Run directories under results/ and the result.json every command writes there."""

from __future__ import annotations

import json
import time
from pathlib import Path

from meminit.core import paths
from meminit.core.errors import MeminitError

RESULT_FILE = "result.json"
TCG_LABEL = "TCG: functional timings, not performance figures"


def new_run_dir(kind: str, root: Path | None = None) -> Path:
    """results/<kind>-<UTC stamp>[-n], created."""
    root = root or paths.RESULTS
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = root / f"{kind}-{stamp}"
    suffix = 1
    while run_dir.exists():
        suffix += 1
        run_dir = root / f"{kind}-{stamp}-{suffix}"
    run_dir.mkdir(parents=True)
    return run_dir


def write_json(run_dir: Path, data: dict) -> Path:
    path = run_dir / RESULT_FILE
    # insertion order: the kernels and scenarios in the order they ran, as the run printed them
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def find_run(run: str | Path) -> Path:
    """A run directory named by path or by its name under results/."""
    run_dir = Path(run)
    if not run_dir.is_dir():
        run_dir = paths.RESULTS / run
    if not run_dir.is_dir():
        raise MeminitError(f"no run directory {run} (nor {run_dir})")
    return run_dir


def load_json(run: str | Path) -> tuple[Path, dict]:
    run_dir = find_run(run)
    path = run_dir / RESULT_FILE
    if not path.exists():
        raise MeminitError(f"no {RESULT_FILE} in {run_dir}")
    return run_dir, json.loads(path.read_text())


def accel_title(title: str, accel: str | None) -> str:
    """A plot title with the accelerator, and TCG's warning when the guest ran under TCG."""
    title = f"{title} ({accel})"
    return f"{title} - {TCG_LABEL}" if accel == "tcg" else title
