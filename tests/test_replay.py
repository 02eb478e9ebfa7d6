"""The real-CPU replay of a run's memmap (issue 35, item 3), offline: the bench faked
(conftest.FAKE_BENCH: slow 4 GB/s, template 8, movntdq 16, auto 12; 1.5x on two threads)."""

from __future__ import annotations

import subprocess

import pytest

from meminit import benchbin, memmap_replay
from meminit.errors import MeminitError

PAGES = 386560  # the recorded namespace: one range, initialised on 2 threads
BIND_BYTES = PAGES * 64


DEVICE_PRIVATE = memmap_replay.Memmap("device-private", pages=65536, ranges=2, order=0, altmap=False,
                                      pgmap_type="private", threads=1, threads_from="as the series guest ran")


# ------------------------------------------------------------- the library


def test_the_bench_runs_once_per_distinct_memmap_after_its_verify(fake_bench, tmp_path):
    fsdax = memmap_replay.Memmap("fsdax-mapdev", pages=PAGES, ranges=1, order=0, altmap=True, pgmap_type="fsdax",
                                 threads=2, threads_from="as the series guest ran")
    figs = memmap_replay.replay([fsdax, DEVICE_PRIVATE, fsdax], reps=3, log=tmp_path / "replay.txt")
    assert [line.split()[:2] for line in fake_bench.read_text().splitlines()] == [
        ["verify", "--size"], ["run", "--sizes"], ["run", "--sizes"]]
    assert figs[0] == figs[2] and figs[0]["modes"]["template"]["ms"] == pytest.approx(BIND_BYTES / 12e9 * 1e3)
    assert figs[0]["command"][figs[0]["command"].index("--threads") + 1] == "1,2"
    assert (tmp_path / "replay.txt").read_text().count("# ") == 2


def test_a_bench_whose_verify_fails_replays_nothing(monkeypatch, fake_bench):
    failed = subprocess.CompletedProcess([], 1, stdout="ok fill slow\nFAIL fill template o0: record 7 differs\n",
                                         stderr="verify failed: 1 failure(s)\n")
    monkeypatch.setattr(benchbin, "verify", lambda size: failed)
    with pytest.raises(MeminitError, match="(?s)verify failed.*record 7 differs"):
        memmap_replay.replay([DEVICE_PRIVATE])
    assert "run " not in fake_bench.read_text()


def test_ms_per_bind_counts_every_range_of_the_bind():
    out = benchbin.parse_output("".join(
        f"sample kind=fill strategy={s} layout=o0 dest=warm size={4 << 20} threads=1 rep={r} ns={ns} "
        f"bytes={4 << 20}\n" for r in range(3) for s, ns in (("slow", 2_000_000), ("template", 1_000_000),
                                                             ("movntdq", 500_000), ("auto", 1_000_000))))
    fig = memmap_replay.figures(DEVICE_PRIVATE, ["bench"], out, 3)
    assert fig["modes"]["slow"]["ms"] == pytest.approx(4.0)  # 2 ms per 4 MiB range, two ranges per bind
    assert fig["modes"]["base"] == fig["modes"]["slow"]  # one thread: base is the slow path's samples
    text = memmap_replay.render([("device-private", fig)], "tcg", "cpu")
    assert "2 x 65536 pages, 4.0 MiB" in text and "DRAM: just allocated" in text
    assert "the replay's auto does not" in text  # test_hmm's walk hint, which the replay lacks
    del out.samples[-1]  # auto's last repetition: the medians move, nothing is missing
    memmap_replay.figures(DEVICE_PRIVATE, ["bench"], out, 3)
    out.samples[:] = [s for s in out.samples if s["strategy"] != "movntdq"]
    out.skips.append({"kind": "fill", "strategy": "movntdq", "reason": "no SSE2"})
    with pytest.raises(MeminitError, match=r"no movntdq fill on 1 thread\(s\) \(movntdq: no SSE2\)"):
        memmap_replay.figures(DEVICE_PRIVATE, ["bench"], out, 3)


def test_the_series_thread_rule():
    """One thread below 16 MiB of struct pages; else CPUs, chunks (128 MiB of device memory), 16."""
    assert [memmap_replay.kernel_threads(p, 8) for p in (262143, 262144, 3 * 32768 * 4, 1 << 30)] == [1, 8, 8, 8]
    assert memmap_replay.kernel_threads(262144, 64) == 8 and memmap_replay.kernel_threads(1 << 30, 64) == 16


def test_a_memmap_that_is_not_whole_compounds_of_records_is_replayed_rounded_up():
    m = memmap_replay.Memmap("fsdax-mapdev", pages=1000, ranges=1, order=0, altmap=True, pgmap_type="fsdax",
                             threads=1, threads_from="")
    assert m.bench_size == 64 << 10  # 64000 bytes, up to whole 32 KiB
    with pytest.raises(MeminitError, match="orders 0 and 9, not 18"):
        memmap_replay.Memmap("x", 1, 1, 18, True, "fsdax", 1, "").layout
