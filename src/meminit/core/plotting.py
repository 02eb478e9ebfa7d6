"""matplotlib, set up once for files (no display), imported only when a plot is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DPI = 90


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (the import is heavy: only when plotting)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def save(fig: Any, out: Path, dpi: int = DPI) -> Path:
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out
