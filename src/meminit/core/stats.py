"""Summaries of repeated samples: mean and spread, median and range."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    n: int
    mean: float
    stdev: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        if not values:
            raise ValueError("no samples")
        return cls(n=len(values), mean=statistics.fmean(values),
                   stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
                   minimum=min(values), maximum=max(values))


def median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def spread_pct(values: list[float]) -> float:
    """(max - min) over the median, in percent."""
    med = statistics.median(values)
    return (max(values) - min(values)) / med * 100.0 if med else 0.0
