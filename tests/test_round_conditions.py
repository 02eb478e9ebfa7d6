"""`bench-results rounds`: the logged rounds grouped by the mode they began under."""

import math

import pytest

from meminit.bench import auto_replay, bench_stats, recorded_runs, round_conditions


def _row(strategy, median, **extra):
    return {"kind": "fill", "strategy": strategy, "layout": "o0", "dest": "warm", "size": 64 << 20,
            "threads": 2, "split": "chunked", "median": median, **extra}


def _run(rounds_by_rep):
    rows = [_row("template", 10.0), _row(bench_stats.STREAMING, 8.0),
            _row("auto", 9.0, rounds_by_rep=rounds_by_rep)]
    return recorded_runs.RecordedRun("run", "cpu", rows, llc_bytes=None)


def test_rounds_are_grouped_by_the_mode_they_began_under():
    # chunk 0 blind; chunk 2 under template finds streaming more than a quarter faster (lead-in,
    # T, S, T, S); chunk 4 under streaming finds template twice as fast and ends after its first pair
    text = "0:100:100:100:100:100:0:-1,2:100:130:100:140:90:0:0,4:100:100:200:0:0:0:1"
    cells = round_conditions.by_condition(auto_replay.Policy(), _run([[0, text]]))
    assert len(cells) == 1
    cell = cells[0]
    assert cell["range_t_over_s"] == pytest.approx(0.8)
    groups = cell["by_before"]
    assert groups[-1] == {"rounds": 1, "t_over_s": pytest.approx(1.0), "streamed": 0.0}
    assert groups[0] == {"rounds": 1, "t_over_s": pytest.approx(130 / 90), "streamed": 1.0}
    # the early end compares the first pair only
    assert groups[1] == {"rounds": 1, "t_over_s": pytest.approx(0.5), "streamed": 0.0}
    # geometric mean over the rounds of one mode, across repetitions
    two = round_conditions.by_condition(auto_replay.Policy(), _run(
        [[0, "2:100:100:50:100:50:0:0"], [1, "2:100:100:200:100:200:0:0"]]))
    assert two[0]["by_before"][0]["t_over_s"] == pytest.approx(math.exp(0.0))
    assert two[0]["by_before"][0]["streamed"] == 0.5
    report = round_conditions.report(auto_replay.Policy(), [_run([[0, text]])])
    assert "o0 warm     64M t2  range T/S 0.80" in report and "template:    1 x 1.44 100%" in report
    # beside template writers streaming a quarter ahead is not enough to turn the verdict
    quarter = round_conditions.by_condition(auto_replay.Policy(), _run([[0, "2:100:120:100:130:90:0:0"]]))
    assert quarter[0]["by_before"][0]["streamed"] == 0.0


def test_a_rounds_logged_spans_decide_it():
    # chunk 0 tied in its pieces (streaming 5 % ahead) and left to spans that found template a
    # third faster: not a streaming round, though the pieces alone would stream
    tied = "0:100:100:95:100:95:0:-1:300:400"
    for policy, streamed in ((auto_replay.Policy(), 0.0), (auto_replay.Policy(span=0), 1.0)):
        cells = round_conditions.by_condition(policy, _run([[0, tied]]))
        assert cells[0]["by_before"][-1]["streamed"] == streamed


def test_logs_without_the_mode_are_left_out():
    run = _run([[0, "0:100:100:100:100:100,2:100:120:100:130:90"]])
    assert round_conditions.by_condition(auto_replay.Policy(), run) == []
    assert round_conditions.report(auto_replay.Policy(), [run]).startswith("no recorded run logged")
