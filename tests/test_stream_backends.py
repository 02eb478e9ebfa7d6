"""bench-results backends: MOVNTI against MOVNTDQ, time-weighted, on a hand-computed fixture."""

from __future__ import annotations

import pytest

from meminit.bench import recorded_runs, stream_backends

GIB, MIB = 1 << 30, 1 << 20


def _row(strategy: str, size: int, median: float, threads: int = 1) -> dict:
    return {"kind": "fill", "strategy": strategy, "layout": "o0", "dest": "cold", "size": size,
            "threads": threads, "median": median}


def test_the_total_weighs_each_configuration_by_its_time_and_the_worst_is_named():
    # 1 GiB: MOVNTDQ 20 GB/s (53.687 ms), MOVNTI 19 (56.513 ms); 4 MiB: MOVNTDQ 10 (0.419 ms),
    # MOVNTI 20 (0.210 ms); a two-thread row, which the core never makes, is left out
    run = recorded_runs.RecordedRun("runs/a", "AMD EPYC family 25 model 17", [
        _row("movntdq", GIB, 20.0), _row("movnti", GIB, 19.0),
        _row("movntdq", 4 * MIB, 10.0), _row("movnti", 4 * MIB, 20.0),
        _row("movntdq", GIB, 30.0, threads=2), _row("movnti", GIB, 10.0, threads=2),
        _row("template", GIB, 15.0)])
    got = stream_backends.compare(run)
    assert got is not None and got.configs == 2
    # (56.513 + 0.210) / (53.687 + 0.419): the 4 MiB win hardly counts beside 1 GiB's loss
    assert got.total == pytest.approx(56.7227 / 54.1065, rel=1e-4)
    assert got.worst == pytest.approx(20 / 19) and got.worst_config == "o0 cold 1G"
    assert "Zen 4" in stream_backends.report([run])


def test_a_run_without_both_backends_is_left_out():
    run = recorded_runs.RecordedRun("runs/b", "?", [_row("movntdq", GIB, 20.0), _row("template", GIB, 15.0)])
    assert stream_backends.compare(run) is None
    assert stream_backends.report([run]).startswith("no recorded run")
