"""The paired bar (bench_stats) and the replay of the learning auto over recorded sweeps
(auto_replay, `bench-results replay`): pure functions over made-up samples."""

import json
from pathlib import Path

import pytest

from meminit.bench import auto_replay, bench_render, bench_results, bench_stats, benchbin, recorded_runs, replay_runs
from meminit.bench.memmap_layouts import LAYOUTS, O0, O9, O9DEDUP

DATA = Path(__file__).parent / "data"

# every range learns: the charges of one range (the default remembers verdicts, memo 8)
POLICY = auto_replay.Policy(memo=0, span=0)  # patch 11 before its spans (2026-11-29)


def test_bar_verdict_median_then_second_best():
    assert bench_stats.bar_verdict([0.96, 0.97, 0.98]) == "ok"
    assert bench_stats.bar_verdict([0.90, 0.91, 0.92, 0.93, 0.95, 0.97, 0.99]) == "noise"
    assert bench_stats.bar_verdict([0.90, 0.91, 0.92, 0.93, 0.95, 0.96, 0.99]) == "MISS"
    assert bench_stats.bar_verdict([0.5, 0.99]) == "MISS"  # too few pairs for noise
    assert bench_stats.bar_verdict([]) == "MISS"


def test_noise_pair_asks_two_of_seven_pairs_at_any_count():
    assert bench_stats.noise_pair([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]) == 0.6
    assert bench_stats.noise_pair([0.1, 0.2, 0.3]) == 0.2
    assert bench_stats.noise_pair([0.5, 0.99]) is None
    # 15 repetitions: five pairs at or above the bar (the 11th), not two (the second best)
    fifteen = [0.90] * 11 + [0.97] * 4
    assert bench_stats.noise_pair(fifteen) == 0.90
    assert bench_stats.bar_verdict(fifteen) == "MISS"
    assert bench_stats.bar_verdict([0.90] * 10 + [0.97] * 5) == "noise"
    # never fewer than 2 of 7 (and 2) pairs at or above it, whatever the count
    for n in range(3, 40):
        above = n - [i for i in range(n) if bench_stats.noise_pair(list(range(n))) == i][0]
        assert above >= max(2, 2 * n / 7) and above - 1 < max(2, 2 * n / 7)


def _samples(strategy, rates, threads=1, cpu=1.0, **extra):
    return [{"kind": "fill", "strategy": strategy, "layout": "o0", "dest": "cold", "size": 4 << 20,
             "threads": threads, "split": "chunked", "rep": i, "ns": int(1e6 / r), "bytes": int(1e6),
             "cpu_ns": int(cpu * 1e6 / r), **extra} for i, r in enumerate(rates)]


def test_pairs_follow_the_repetitions_and_drop_disturbed_samples():
    rows = bench_stats.summarize(_samples("template", [10, 20, 10]) + _samples("auto", [10, 20, 10])
                                 + _samples("movntdq", [5, 5, 5], cpu=0.5))
    tmpl, auto, stream = rows
    # repetition by repetition auto matched template although the medians of a shifting
    # machine would not tell
    assert bench_stats.paired_ratios(auto, tmpl) == pytest.approx([1.0, 1.0, 1.0], rel=1e-3)
    assert bench_stats.paired_ratios(auto, stream) == []  # every streaming sample ran half off-CPU


def test_auto_rows_judge_the_pairs():
    rows = bench_stats.summarize(_samples("template", [10] * 7) + _samples("movntdq", [12] * 7)
                                 + _samples("auto", [11.0] * 7))
    a = next(a for a in bench_stats.auto_rows(rows) if a["strategy"] == "auto")
    assert a["best"] == "movntdq" and a["ratio_best"] == pytest.approx(11 / 12, rel=1e-3)
    assert a["verdict"] == "MISS" and not a["passes"]
    rows = bench_stats.summarize(_samples("template", [10] * 7) + _samples("movntdq", [12] * 7)
                                 + _samples("auto", [11.9] * 7))
    assert next(a for a in bench_stats.auto_rows(rows) if a["strategy"] == "auto")["passes"]


def test_live_table_marks_the_splits_the_kernel_makes_only_when_forced():
    # 4 MiB of struct pages on two threads: fewer than 262144, so a forced split; 16 MiB is not
    rows = bench_stats.summarize([s for t in (1, 2) for strategy, rate in (("template", 10), ("movntdq", 12),
                                                                            ("auto", 11.0))
                                  for s in _samples(strategy, [rate] * 7, threads=t)])
    autos = [a for a in bench_stats.auto_rows(rows) if a["strategy"] == "auto"]
    assert [(a["threads"], a["forced"]) for a in autos] == [(1, False), (2, True)]
    assert bench_stats.forced_split(4 << 20, 2) and not bench_stats.forced_split(16 << 20, 2)
    assert not bench_stats.forced_split(4 << 20, 1)
    bar = bench_render.auto_bar(autos)
    assert "bar met in 0/2 configurations (0 within noise; 1 of the misses on threads the kernel uses" in bar
    assert " 2* " in bench_render.auto_table(autos) and " 1* " not in bench_render.auto_table(autos)


def test_schedule_counts_the_lead_ins_whole_compound_pages_and_chunk_1_only_on_threads():
    # 4 MiB of struct pages, 128 MiB chunks: two chunks; one thread has chunk 0's verdict when
    # it reaches chunk 1, so one round; on two threads chunk 1 starts with a round of its own.
    # A round is two pairs, each a template lead-in, a template and a streaming piece
    assert auto_replay.schedule(POLICY, 65536, O0) == (2 * (256 + 256), 2 * 256)
    assert auto_replay.schedule(POLICY, 65536, O0, threads=2) == (2 * 2 * (256 + 256), 2 * 2 * 256)
    # order 9: the lead-ins and every piece are one 512-page compound page
    assert auto_replay.schedule(POLICY, 65536, O9) == (2 * (512 + 512), 2 * 512)
    # 1 GiB: chunks 0, 2, 4, 8 ... 256 of 512 probe (and 1 on two threads)
    assert auto_replay.schedule(POLICY, 1 << 24, O0)[1] == 9 * 2 * 256
    assert auto_replay.schedule(POLICY, 1 << 24, O0, threads=2)[1] == 10 * 2 * 256
    # a range with no chunk large enough for a round is template only
    assert auto_replay.schedule(POLICY, 1000, O0) == (0, 0)
    # rounds that end after their first pair, whichever mode it found faster by far
    assert auto_replay.schedule(POLICY, 65536, O0, early=True) == (256 + 256, 256)
    assert auto_replay.schedule(POLICY, 65536, O9, early=True) == (512 + 512, 512)


def test_a_deduplicated_layout_counts_the_struct_pages_it_writes():
    # x86-64's deduplicated order-9 memmap writes 128 of each compound page's 512 struct pages:
    # a piece of 256 written is two compound pages, and a section's chunk (32768 PFNs, 64
    # compound pages) writes 8192, so 4 MiB written is 8 chunks with rounds in 0, 2 and 4
    assert O9DEDUP.whole(256) == 256 and O9.whole(256) == 512
    assert O9DEDUP.chunk_written(32768) == 8192 and O9.chunk_written(32768) == 32768
    assert auto_replay.schedule(POLICY, 65536, O9DEDUP) == (3 * 2 * (256 + 256), 3 * 2 * 256)
    # the late chunk counts the chunk's written bytes, as the kernel does: 2 x 32 MiB / 512 KiB
    assert auto_replay.late_chunk(POLICY, O9DEDUP, 32 << 20) == 128
    assert auto_replay.late_chunk(POLICY, O9, 32 << 20) == 32
    # its chunks have no room for spans: probes that tie within a quarter where template copies
    # the range twice as fast are the pieces' verdict (streaming, a miss), not spans' assumed one
    tmpl, stream = _row("template", [20] * 7), _row("movntdq", [10] * 7)
    auto = _row("auto", [10] * 7, probe_tmpl_ns=1100, probe_stream_ns=1000)
    spans = auto_replay.Policy(memo=0, span=4096)
    assert auto_replay.replay_cell(spans, tmpl, stream, auto, O0)["source"] == "probes, spans assumed"
    cell = auto_replay.replay_cell(spans, tmpl, stream, auto, O9DEDUP)
    assert (cell["source"], cell["verdict"]) == ("probes", "MISS")


def _row(strategy, rates, **extra):
    return {**bench_stats.summarize(_samples(strategy, rates))[0], **extra}


def test_replay_uses_the_probes_where_the_sweep_recorded_them():
    tmpl, stream = _row("template", [20] * 7), _row("movntdq", [10] * 7)
    # probes that saw streaming faster, where the whole range copies twice as fast: a miss
    wrong = _row("auto", [10] * 7, probe_tmpl_ns=2000, probe_stream_ns=1000)
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, wrong, O0)
    assert (cell["mode"], cell["source"], cell["verdict"]) == ("streaming", "probes", "MISS")
    right = _row("auto", [20] * 7, probe_tmpl_ns=1000, probe_stream_ns=2000)
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, right, O0)
    assert (cell["mode"], cell["verdict"]) == ("template", "ok")
    # template twice as fast: the one round (one thread, two chunks) ends after its first
    # pair, 256 of 65536 records streamed at half the speed
    assert cell["ratio_best"] == pytest.approx(1 / (1 + 256 / 65536), rel=1e-6)
    close = _row("auto", [20] * 7, probe_tmpl_ns=1000, probe_stream_ns=1500)
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, close, O0)
    assert cell["ratio_best"] == pytest.approx(1 / (1 + 512 / 65536), rel=1e-6)


def test_replay_of_tied_probe_sums_judges_the_sweeps_own_auto():
    tmpl, stream = _row("template", [18] * 7), _row("movntdq", [24] * 7)
    # the sums tie (1.3 %, inside the 1/32 margin): one verdict would say template, 0.75x;
    # the rounds split and the sweep's auto streamed 91 %, at these rates per repetition
    rates = [24.5, 23.0, 24.0, 23.5, 22.0, 24.2, 23.8]
    auto = _row("auto", rates, probe_tmpl_ns=1013, probe_stream_ns=1000, streamed_share=0.91)
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)
    assert (cell["mode"], cell["source"]) == ("streaming", "live")
    assert cell["ratio_best"] == pytest.approx(23.8 / 24, rel=1e-3)
    assert cell["ratio_template"] == pytest.approx(23.8 / 18, rel=1e-3)
    assert cell["other_share"] == pytest.approx(0.09) and cell["verdict"] == "ok"
    # the same auto with a margin's worth between the sums: the sums decide, as before
    auto.update(probe_tmpl_ns=1000, probe_stream_ns=1100)
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)
    assert (cell["mode"], cell["source"], cell["verdict"]) == ("template", "probes", "MISS")
    # a tie in a summary without repetitions has no pairs to go on: the sums decide
    auto.update(probe_tmpl_ns=1013, probe_stream_ns=1000, by_rep=[])
    assert auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)["source"] == "probes"
    # a run whose auto timed spans the policy does not (or the other way round): its own auto
    # ran another rule and cannot stand in for the tie
    tied = _row("auto", rates, probe_tmpl_ns=1013, probe_stream_ns=1000, streamed_share=0.91)
    rows = [{**r, "kind": "fill", "split": "chunked"} for r in (tmpl, stream, tied)]
    assert [c["source"] for c in replay_runs.replay_rows(POLICY, rows)] == ["live"]
    assert [c["source"] for c in replay_runs.replay_rows(POLICY, rows, own_rule=False)] == ["probes"]


def test_replay_without_probes_assumes_them_right_and_charges_the_schedule():
    tmpl, stream = _row("template", [8] * 7), _row("movntdq", [22] * 7)
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, None, O0)
    assert (cell["mode"], cell["source"]) == ("streaming", "assumed")
    # streaming 2.75x faster: decisive, the one round ends after its first pair, whose lead-in
    # and template piece (512 of 65536 records) cost 1.4 %
    other = 512 / 65536
    assert cell["ratio_best"] == pytest.approx(1 / ((1 - other) + other * 22 / 8), rel=1e-6)
    assert cell["verdict"] == "ok"
    # on two threads the kernel splits only ranges of 16 MiB of struct pages or more
    assert not cell["forced"]
    two = auto_replay.replay_cell(POLICY, {**tmpl, "threads": 2}, {**stream, "threads": 2}, None, O0)
    assert two["forced"] and two["other_share"] == pytest.approx(2 * other)  # two rounds
    assert two["ratio_best"] == pytest.approx(1 / ((1 - 2 * other) + 2 * other * 22 / 8), rel=1e-6)


def test_remembered_verdicts_charge_the_rounds_of_one_range_in_memo():
    # a sample is 64 MiB of struct pages: 16 ranges of 4 MiB, 4 of 16 MiB, one from 64 MiB
    memo = auto_replay.Policy()
    assert memo.memo == 8  # patch 11's MEMMAP_AUTO_REUSE
    assert auto_replay.learning_share(POLICY, 65536) == 1.0
    assert auto_replay.learning_share(memo, 65536) == pytest.approx(2 / 16)
    assert auto_replay.learning_share(memo, 4 * 65536) == pytest.approx(1 / 4)
    assert auto_replay.learning_share(memo, 16 * 65536) == 1.0
    assert auto_replay.learning_share(auto_replay.Policy(memo=1), 65536) == 1.0
    tmpl, stream = _row("template", [8] * 7), _row("movntdq", [22] * 7)
    cell = auto_replay.replay_cell(memo, tmpl, stream, None, O0)
    # the round's lead-in and template piece in two ranges of 16
    other = 512 / 65536 * 2 / 16
    assert cell["other_share"] == pytest.approx(other)
    assert cell["ratio_best"] == pytest.approx(1 / ((1 - other) + other * 22 / 8), rel=1e-6)


def test_replay_command_reads_every_kind_of_recorded_run(tmp_path, capsys):
    samples = (_samples("template", [20] * 7) + _samples("movntdq", [10] * 7)
               + _samples("auto", [19.9] * 7, probe_tmpl_ns=1, probe_stream_ns=2, probe_records=1,
                          rounds=1, stream_rounds=0, streamed=0, records=1))
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").write_text(json.dumps({"samples": samples, "machine": {"cpu_model": "Test CPU"},
                                                 "options": {"auto_order": "lead-first"}}))
    loaded = recorded_runs.load_run(run)
    assert loaded is not None and loaded.cpu.startswith("Test CPU") and loaded.round_order == "lead-first"
    text, every = bench_results.replay_report([loaded], POLICY)
    assert every and "bar met in 1/1" in text and "verdict probes)" in text and "assumed" not in text


def test_probes_judge_only_a_policy_whose_rounds_they_timed(tmp_path):
    # probes that saw streaming faster where template copies the range twice as fast: judged
    # by them the policy misses; timed by rounds of another order (or of none recorded) they
    # say nothing about the policy's rounds, either way: the configuration is not judged
    rounds = [[rep, "0:2000:2000:1000:2000:1000,1:2000:2000:1000:2000:1000"] for rep in range(7)]
    sums = {"probe_tmpl_ns": 2000, "probe_stream_ns": 1000, "probe_records": 256}
    for logged in ({}, {"rounds_by_rep": rounds}):
        rows = [_row("template", [20] * 7), _row("movntdq", [10] * 7), _row("auto", [10] * 7, **sums, **logged)]
        own = replay_runs.replay_rows(POLICY, rows, None, True)
        assert [(c["source"], c["verdict"]) for c in own] == [("rounds" if logged else "probes", "MISS")]
        other = replay_runs.replay_rows(POLICY, rows, None, False)
        assert [(c["source"], c["verdict"]) for c in other] == [("other rounds", replay_runs.NOT_JUDGED)]
        # its figures as assumed, as the report says: neither its sums nor its rounds used
        assert other[0]["mode"] == "template" and other[0]["ratio_best"] > 0.97
        for order, judged in (("lead-first", True), ("stream-first", False), ("lead-in, T, T, S, S", False),
                              (None, False)):
            run = recorded_runs.RecordedRun("run", "Test CPU", rows, round_order=order)
            assert run.probes_judge(POLICY.order) == judged
            text, every = bench_results.replay_report([run], POLICY)
            assert every != judged
            if not judged:
                assert "no configuration judged: 1 not judged (its probes timed rounds" in text
                assert "not judged: 1 configurations of 1 runs" in text
    # a run without probes is still judged, as assumed
    plain = [_row("template", [20] * 7), _row("movntdq", [10] * 7)]
    assert [c["source"] for c in replay_runs.replay_rows(POLICY, plain, None, False)] == ["assumed"]
    # a summary keeps the order its run's options name, and each kind of run gives it back
    result = {"machine": {"cpu_model": "Test CPU"}, "date": "2026-11-28T00:00:00Z", "loadavg_start": "0",
              "loadavg_end": "0", "options": {"reps": 7, "auto_order": "lead-first"}, "summary": []}
    summary = bench_results.from_result(result, "test")
    assert summary["round_order"] == "lead-first"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(summary))
    assert recorded_runs.load_run(path).round_order == "lead-first"
    raw = tmp_path / "raw" / "raw.txt"
    raw.parent.mkdir()
    raw.write_text("info llc_bytes=33554432\ninfo auto_order=stream-first\n")
    assert recorded_runs.load_run(raw.parent).round_order == "stream-first"

def test_replay_judges_the_callers_states_not_the_per_chunk_read_back():
    samples = []
    for dest in ("cold", "walked", "readback"):
        samples += [{**s, "dest": dest} for s in _samples("template", [10] * 7) + _samples("movntdq", [12] * 7)]
    cells = replay_runs.replay_rows(POLICY, bench_stats.summarize(samples))
    assert [c["dest"] for c in cells] == ["cold", "walked"]


def test_late_rounds_stream_past_twice_the_llc_unless_template_is_a_quarter_faster():
    # 1 GiB of struct pages in 2 MiB chunks; under a 32 MiB LLC chunk 32 is the first late one
    assert auto_replay.late_chunk(POLICY, O0, 32 << 20) == 32
    assert auto_replay.late_chunk(POLICY, O0, None) is None
    assert auto_replay.late_chunk(auto_replay.Policy(late_llcs=0), O0, 32 << 20) is None
    # probes that put template 20 % ahead: early rounds keep template, late ones stream
    assert not auto_replay.streams(POLICY, 1000, 1200)
    assert auto_replay.streams(POLICY, 1000, 1200, late=True)
    assert not auto_replay.streams(POLICY, 1000, 1334, late=True)
    # chunks 0-31 template, 32-511 streaming, but for the rounds' pieces in the other mode
    records = 1 << 24
    tmpl, stream = auto_replay.split(POLICY, records, O0, (False, True), late=32)
    assert tmpl + stream == records
    rounds_before, rounds_after = 5, 4  # chunks 0, 2, 4, 8, 16 and 32, 64, 128, 256
    assert tmpl == 31 * 32768 + 32768 - rounds_before * 2 * 256 + rounds_after * 2 * 512
    # the whole range streams 7 % faster: with the late rounds auto meets the bar, without not
    size = records * 64
    t = {**_row("template", [20.0] * 7), "size": size}
    s = {**_row("movntdq", [21.4] * 7), "size": size}
    probes = _row("auto", [20] * 7, probe_tmpl_ns=1000, probe_stream_ns=1200)
    cell = auto_replay.replay_cell(POLICY, t, s, probes, O0, 32 << 20)
    assert cell["mode"] == "template, late streaming" and cell["verdict"] == "ok"
    cell = auto_replay.replay_cell(POLICY, t, s, probes, O0, None)
    assert cell["mode"] == "template" and cell["verdict"] == "MISS"


def test_recorded_runs_carry_their_llc(tmp_path):
    samples = _samples("template", [20] * 7) + _samples("movntdq", [10] * 7)
    run = tmp_path / "run"
    run.mkdir()
    caches = [{"level": "2", "type": "Unified", "size": "1024K"},
              {"level": "3", "type": "Unified", "size": "32768K"},
              {"level": "1", "type": "Instruction", "size": "32K"}]
    (run / "result.json").write_text(json.dumps({"samples": samples,
                                                 "machine": {"cpu_model": "Test CPU", "caches": caches}}))
    assert recorded_runs.load_run(run).llc_bytes == 32 << 20
    (run / "result.json").write_text(json.dumps({"samples": samples, "bench_info": {"llc_bytes": "8388608"},
                                                 "machine": {"cpu_model": "Test CPU"}}))
    assert recorded_runs.load_run(run).llc_bytes == 8 << 20
    (run / "result.json").write_text(json.dumps({"samples": samples, "machine": {"cpu_model": "Test CPU"}}))
    assert recorded_runs.load_run(run).llc_bytes is None


def test_adding_another_run_of_a_cpu_keeps_the_one_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_results, "RESULTS_DIR", tmp_path / "results")
    samples = _samples("template", [20] * 7) + _samples("movntdq", [10] * 7)
    for day in ("24T05:10", "27T05:10", "27T08:21"):
        run = tmp_path / f"run-{day}"
        run.mkdir()
        (run / "result.json").write_text(json.dumps({
            "samples": samples, "date": f"2026-11-{day}:04Z", "loadavg_start": "0",
            "loadavg_end": "0", "options": {"reps": 7},
            "machine": {"cpu_model": "Test CPU", "cpu_family": "25", "cpu_model_number": "17"}}))
        bench_results.add_run(run)
    # a second run of the same day is told apart by its time
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "test-cpu-f25m17-2026-11-27-0821.json", "test-cpu-f25m17-2026-11-27.json", "test-cpu-f25m17.json"]
    # the same run again replaces its own summary
    bench_results.add_run(tmp_path / "run-24T05:10")
    bench_results.add_run(tmp_path / "run-27T08:21")
    assert len(list((tmp_path / "results").iterdir())) == 3


def test_late_rounds_end_early_only_with_streaming():
    # template three times as fast over 1 GiB: rounds before chunk 32 stop after a pair, the
    # four late ones (32, 64, 128, 256) run both pairs; streaming that fast: all stop early
    records = 1 << 24
    tmpl, stream = auto_replay.split(POLICY, records, O0, (False, False), early=True, late=32,
                                     early_late=False)
    assert stream == 5 * 256 + 4 * 2 * 256
    tmpl, stream = auto_replay.split(POLICY, records, O0, (True, True), early=True, late=32)
    assert tmpl == 9 * (256 + 256)


def test_logged_rounds_are_kept_per_repetition_only_when_complete():
    logged = [{"rounds": 2, "stream_rounds": 1, "streamed": 10, "records": 100, "probe_records": 512,
               "probe_tmpl_ns": 1, "probe_stream_ns": 1, "probe_rounds": "0:9:1:2:0:0,2:9:3:1:3:1"}] * 3
    row = bench_stats.summarize([{**s, **x} for s, x in zip(_samples("auto", [10] * 3), logged)])[0]
    assert row["rounds_by_rep"] == [[0, logged[0]["probe_rounds"]], [1, logged[1]["probe_rounds"]],
                                    [2, logged[2]["probe_rounds"]]]
    assert [r[:6] for r in bench_stats.parse_rounds(logged[0]["probe_rounds"])] == \
        [(0, 9, 1, 2, 0, 0), (2, 9, 3, 1, 3, 1)]
    # since 2026-11-27 21:57 UTC the fill and the verdict the round began under follow
    assert bench_stats.parse_rounds("4:9:3:1:3:1:2:0") == [(4, 9, 3, 1, 3, 1, 2, 0, None, None)]
    assert bench_stats.parse_rounds("0:9:3:1:3:1:0:-1")[0].before == -1
    with pytest.raises(ValueError):
        bench_stats.parse_rounds("4:9:3:1:3:1:2:2")
    # a sample whose log ran full (fewer rounds logged than run): no per-round replay
    full = [dict(x, rounds=3) if i == 1 else x for i, x in enumerate(logged)]
    row = bench_stats.summarize([{**s, **x} for s, x in zip(_samples("auto", [10] * 3), full)])[0]
    assert "rounds_by_rep" not in row
    # a repetition whose ranges all ran on remembered verdicts ran no round and logs none: the
    # others' logs are kept; with none run at all there is nothing to keep
    served = {"rounds": 0, "stream_rounds": 0, "probe_records": 0, "probe_tmpl_ns": 0, "probe_stream_ns": 0}
    memo = [dict({k: v for k, v in x.items() if k != "probe_rounds"}, **served) if i == 1 else x
            for i, x in enumerate(logged)]
    row = bench_stats.summarize([{**s, **x} for s, x in zip(_samples("auto", [10] * 3), memo)])[0]
    assert row["rounds_by_rep"] == [[0, logged[0]["probe_rounds"]], [2, logged[2]["probe_rounds"]]]
    none = [dict({k: v for k, v in x.items() if k != "probe_rounds"}, **served) for x in logged]
    row = bench_stats.summarize([{**s, **x} for s, x in zip(_samples("auto", [10] * 3), none)])[0]
    assert "rounds_by_rep" not in row
    with pytest.raises(ValueError):
        bench_stats.parse_rounds("0:1:2")


def test_round_verdicts_follow_the_kernels_rules():
    # template clearly faster in the first pair: ends early with template
    assert auto_replay.round_verdict(POLICY, (0, 900, 100, 300, 0, 0), False) == (False, 1)
    # streaming twice as fast, but the lead-in was not: one disturbed template piece must not
    # end the round, the second pair decides (its faster pieces: 100 against 98, a tie)
    assert auto_replay.round_verdict(POLICY, (0, 150, 400, 100, 100, 98), False) == (False, 2)
    # a late round keeps template only if it is a quarter faster, and never ends early with it
    assert auto_replay.round_verdict(POLICY, (8, 300, 100, 300, 100, 134), True) == (False, 2)
    assert auto_replay.round_verdict(POLICY, (8, 300, 100, 300, 100, 133), True) == (True, 2)
    # the same pieces in an early round end after the first pair, with template
    assert auto_replay.round_verdict(POLICY, (8, 300, 100, 300, 100, 134), False) == (False, 1)
    # a round the bench ended early has no second pair: the first decides
    assert auto_replay.round_verdict(POLICY, (0, 900, 400, 100, 0, 0), False) == (True, 1)


def test_streamed_share_follows_each_logged_round_over_its_chunks():
    # 64 MiB of order-0 struct pages, one thread: 32 chunks, rounds at 0, 2, 4, 8, 16
    records, chunk = 1 << 20, 32768
    tie, fast = (900, 100, 100, 100, 100), (900, 100, 60, 100, 60)  # streaming, not decisive
    rounds = [(0, *tie), (2, *tie), (4, *tie), (8, *tie), (16, *fast)]
    share = auto_replay.streamed_by_rounds(POLICY, records, O0, 1, None, rounds)
    pieces = 5 * 2 * 256  # streaming pieces of the five rounds (none decisive: lead-in 9x)
    tmpl_pieces = 2 * (256 + 256)
    assert share == pytest.approx((pieces + 16 * chunk - 2 * 256 - tmpl_pieces) / records)
    # the same rounds, streaming's only in half of the fills: chunk 16 on streams half as much
    half = rounds + [(0, *tie), (2, *tie), (4, *tie), (8, *tie), (16, *tie)]
    assert auto_replay.streamed_by_rounds(POLICY, records, O0, 1, None, half) == \
        pytest.approx((pieces + 8 * chunk - 256 - tmpl_pieces / 2) / records)
    # a round of chunk 1 that a second thread ran in one fill of two: chunk 1 streams half the time
    two = [(0, *tie), (1, *fast), (0, *tie)]
    share = auto_replay.streamed_by_rounds(POLICY, 65536, O0, 2, None, two)
    assert share == pytest.approx((2 * 256 + (chunk - 2 * 256 - 2 * 512) / 2 + 2 * 256 / 2) / 65536)
    assert auto_replay.streamed_by_rounds(POLICY, records, O0, 1, None, [(2, *tie)]) is None
    # late from chunk 16 on: its tie streams there (template must be a quarter faster to keep it)
    late = auto_replay.streamed_by_rounds(POLICY, records, O0, 1, 16, [(0, *tie), (2, *tie), (4, *tie), (8, *tie),
                                                                       (16, *tie)])
    assert late == pytest.approx((pieces + 16 * chunk - 2 * 256 - tmpl_pieces) / records)


def test_rounds_beside_other_threads_turn_the_verdict_only_by_a_quarter():
    # alone (one thread, chunks 0 and 1): the 1/32 margin
    assert auto_replay.streams(POLICY, 100, 90)
    # beside template writers streaming must be more than a quarter ahead, beside streamers
    # template must be; a late round keeps its own rule (a tie streams)
    assert not auto_replay.streams(POLICY, 100, 90, beside=False)
    assert not auto_replay.streams(POLICY, 400, 300, beside=False)
    assert auto_replay.streams(POLICY, 400, 299, beside=False)
    assert auto_replay.streams(POLICY, 90, 100, beside=True)
    assert auto_replay.streams(POLICY, 300, 400, beside=True)
    assert not auto_replay.streams(POLICY, 299, 400, beside=True)
    assert auto_replay.streams(POLICY, 100, 100, late=True, beside=False)
    assert auto_replay.streams(auto_replay.Policy(switch_margin_den=0), 100, 90, beside=False)
    # 64 MiB of order-0 struct pages on two threads: 32 chunks, rounds at 0, 1, 2, 4, 8, 16; each
    # mode only 10 % ahead in turn (lead-ins 9x: no early end)
    records, chunk, piece = 1 << 20, 32768, 256
    t_ahead, s_ahead = (900, 100, 110, 100, 110), (900, 110, 100, 110, 100)
    first_t = [(0, *t_ahead), (1, *t_ahead)] + [(c, *s_ahead) for c in (2, 4, 8, 16)]
    first_s = [(0, *s_ahead), (1, *s_ahead)] + [(c, *t_ahead) for c in (2, 4, 8, 16)]
    pieces = 6 * 2 * piece  # the streaming pieces of the six rounds
    # template ahead at chunks 0 and 1: the later rounds keep it, only their pieces stream
    assert auto_replay.streamed_by_rounds(POLICY, records, O0, 2, None, first_t) == \
        pytest.approx(pieces / records)
    # streaming ahead there: the later rounds keep streaming, all but the rounds' lead-ins and
    # template pieces stream
    assert auto_replay.streamed_by_rounds(POLICY, records, O0, 2, None, first_s) == \
        pytest.approx((records - 6 * 2 * 2 * piece) / records)
    # without the rule chunk 2's round turns the verdict either way
    no_rule = auto_replay.Policy(memo=0, switch_margin_den=0, span=0)
    assert auto_replay.streamed_by_rounds(no_rule, records, O0, 2, None, first_t) > 0.9
    assert auto_replay.streamed_by_rounds(no_rule, records, O0, 2, None, first_s) < 0.1
    # one thread has no other writer: chunk 2's round turns it
    alone = [r for r in first_t if r[0] != 1]
    assert auto_replay.streamed_by_rounds(POLICY, records, O0, 1, None, alone) > 0.9
    # beside other threads' writes a decisive first pair does not end the round: the second
    # pair (a tie here) decides, and is charged
    decisive = (8, 900, 100, 300, 100, 100)
    assert auto_replay.round_verdict(POLICY, decisive, False) == (False, 1)
    assert auto_replay.round_verdict(POLICY, decisive, False, beside=True) == (True, 2)
    assert auto_replay.round_verdict(POLICY, decisive, False, beside=False) == (False, 2)


def test_replay_judges_logged_rounds_repetition_by_repetition():
    tmpl, stream = _row("template", [20] * 7), _row("movntdq", [10] * 7)
    # the probes' sums say streaming (2000 against 1000), but the rounds of six repetitions of
    # seven found template faster: the sums' one verdict would miss, the rounds' pass
    wrong, right = "0:9000:100:300:0:0", "0:9000:3000:100:3000:100"
    auto = _row("auto", [20] * 7, probe_tmpl_ns=2000, probe_stream_ns=1000,
                rounds_by_rep=[[k, right if k == 3 else wrong] for k in range(7)])
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)
    assert (cell["mode"], cell["source"], cell["verdict"]) == ("template", "rounds", "ok")
    assert cell["ratio_best"] == pytest.approx(1 / (1 + 256 / 65536), rel=1e-6)
    assert cell["other_share"] == pytest.approx((6 * 256 / 65536 + (65536 - 2 * 256) / 65536) / 7)
    # a repetition that ran no round (summarize() leaves it out: its ranges all ran on remembered
    # verdicts) follows those that learned: it streams their mean share
    auto["rounds_by_rep"] = auto["rounds_by_rep"][1:]
    cell = auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)
    assert (cell["source"], cell["mode"]) == ("rounds, remembered", "template")
    assert cell["other_share"] == pytest.approx((5 * 256 / 65536 + (65536 - 2 * 256) / 65536) / 6)
    # without any round logged the probes' sums judge the whole cell
    del auto["rounds_by_rep"]
    assert auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)["source"] == "probes"


def test_replay_of_logged_rounds_reproduces_what_the_sweep_streamed_on_one_thread():
    # every recorded sweep that logged its rounds ran the policy replayed here: on one thread
    # (no race between threads' rounds) the replay must put each record in the mode the sweep
    # did. A change of rule makes the runs recorded before it leave this test: replay them with
    # the Policy they ran. A run whose verdicts served several ranges logged the rounds of the
    # ranges that learned only, which cannot give the others' shares
    checked = 0
    for run in recorded_runs.recorded_runs():
        if run.auto_memo >= 2:
            continue
        for row in run.rows:
            if row.get("strategy") != "auto" or row["threads"] != 1 or "rounds_by_rep" not in row:
                continue
            layout = LAYOUTS[row["layout"]]
            late = auto_replay.late_chunk(POLICY, layout, run.llc_bytes)
            shares = [auto_replay.streamed_by_rounds(POLICY, row["size"] // 64, layout, 1, late,
                                                     bench_stats.parse_rounds(text))
                      for _rep, text in row["rounds_by_rep"]]
            assert sum(shares) / len(shares) == pytest.approx(row["streamed_share"], abs=1e-9), row
            checked += 1
    assert checked >= 30


def test_walk_max_judges_a_walked_range_past_it_by_the_just_zeroed_rounds():
    size, llc = 16 << 20, 32 << 20
    rows = [{**_row("template", [10] * 7), "dest": "walked", "size": size},
            {**_row("movntdq", [12] * 7), "dest": "walked", "size": size},
            # the walked rounds read their pieces back (half the LLC) and chose template
            {**_row("auto", [10] * 7, probe_tmpl_ns=1000, probe_stream_ns=2000, streamed_share=0.0),
             "dest": "walked", "size": size},
            # the just-zeroed range's rounds wrote without a read-back and found streaming faster
            {**_row("auto", [12] * 7, probe_tmpl_ns=2000, probe_stream_ns=1000), "dest": "warm", "size": size}]
    # patch 11 before 2026-11-28: read back within half the LLC, at every size
    half_llc = auto_replay.Policy(memo=0, walk_max=0)
    walked = [c for c in replay_runs.replay_rows(half_llc, rows, llc) if c["dest"] == "walked"]
    assert [(c["mode"], c["source"], c["verdict"]) for c in walked] == [("template", "probes", "MISS")]
    capped = POLICY
    assert capped.walk_max == 4 << 20  # as patch 11
    walked = [c for c in replay_runs.replay_rows(capped, rows, llc) if c["dest"] == "walked"]
    assert [(c["mode"], c["source"], c["verdict"]) for c in walked] == [("streaming", "zeroed probes", "ok")]
    # a range the sweep did not read back (past half the LLC), or whose LLC is unknown, or
    # within the cap, keeps its own rounds
    for policy, llc_bytes in ((capped, 16 << 20), (capped, None), (auto_replay.Policy(memo=0, walk_max=size), llc)):
        walked = [c for c in replay_runs.replay_rows(policy, rows, llc_bytes) if c["dest"] == "walked"]
        assert walked[0]["source"] == "probes" and walked[0]["mode"] == "template"
    # without the just-zeroed range's auto the cell is assumed, not judged by the walked rounds
    walked = [c for c in replay_runs.replay_rows(capped, rows[:3], llc) if c["dest"] == "walked"]
    assert walked[0]["source"] == "zeroed assumed"


def test_spans_settle_a_tie_and_are_charged_in_both_modes():
    # 4 MiB of order-0 struct pages on one thread: one round (chunk 0), spans of 4096
    policy, records, span = auto_replay.Policy(memo=0, span=4096), 65536, 4096
    tie = (0, 900, 100, 100, 100, 95)  # streaming ahead by 5 %: within a quarter
    assert auto_replay.streamed_by_rounds(POLICY, records, O0, 1, None, [tie]) == \
        pytest.approx(1 - (2 * (256 + 256)) / records)
    # the spans the sweep logged say template: the rest of the range goes template
    logged = tie + (0, -1, 1400, 1500)
    assert auto_replay.streamed_by_rounds(policy, records, O0, 1, None, [logged]) == \
        pytest.approx((2 * 256 + span) / records)
    # no spans logged: the repetition's own ranges decide; without them nothing can
    assert auto_replay.streamed_by_rounds(policy, records, O0, 1, None, [tie], range_streams=False) == \
        pytest.approx((2 * 256 + span) / records)
    # streaming: all but the round's lead-ins and template pieces, the spans' lead-in and template
    assert auto_replay.streamed_by_rounds(policy, records, O0, 1, None, [tie], range_streams=True) == \
        pytest.approx(1 - (2 * (256 + 256) + 256 + span) / records)
    assert auto_replay.streamed_by_rounds(policy, records, O0, 1, None, [tie]) is None
    # pieces a quarter apart, an early end, a late round: no spans
    for rnd, late in (((0, 900, 100, 100, 100, 74), None), ((0, 900, 100, 300, 0, 0), None), (tie, 0)):
        assert auto_replay.streamed_by_rounds(policy, records, O0, 1, late, [rnd]) == \
            auto_replay.streamed_by_rounds(POLICY, records, O0, 1, late, [rnd])
    # a chunk with no room for a lead-in and both spans after the round times none: chunk 0's
    # 32768 records leave 31232 after the round, room for spans of 15488 and not 15489
    fits, short = (auto_replay.Policy(memo=0, span=n) for n in (15488, 15489))
    assert auto_replay.streamed_by_rounds(fits, records, O0, 1, None, [tie], range_streams=False) == \
        pytest.approx((2 * 256 + 15488) / records)
    assert auto_replay.streamed_by_rounds(short, records, O0, 1, None, [tie]) == \
        auto_replay.streamed_by_rounds(POLICY, records, O0, 1, None, [tie])


def test_parse_rounds_reads_the_spans():
    rnd = bench_stats.parse_rounds("0:9:3:1:3:1:2:-1:40:20")[0]
    assert (rnd.span_tmpl_ns, rnd.span_stream_ns) == (40, 20)
    assert bench_stats.parse_rounds("0:9:3:1:3:1:2:-1")[0].span_tmpl_ns is None
    with pytest.raises(ValueError):
        bench_stats.parse_rounds("0:9:3:1:3:1:2:-1:40")


def test_tied_probe_sums_are_left_to_spans_assumed_to_see_the_range():
    tmpl, stream = _row("template", [18] * 7), _row("movntdq", [24] * 7)
    # the sums a quarter apart at most (template's 10 % ahead): the spans decide, assumed right
    auto = _row("auto", [20] * 7, probe_tmpl_ns=1000, probe_stream_ns=1100)
    spans = auto_replay.Policy(memo=0, span=4096)
    cell = auto_replay.replay_cell(spans, tmpl, stream, auto, O0)
    assert (cell["mode"], cell["source"]) == ("streaming", "probes, spans assumed")
    # one round (4 MiB, one thread): its template pieces, lead-ins and span, the spans' lead-in
    assert cell["other_share"] == pytest.approx((2 * (256 + 256) + 256 + 4096) / 65536)
    assert auto_replay.replay_cell(POLICY, tmpl, stream, auto, O0)["mode"] == "template"
    # template a third ahead: past the quarter, the pieces decide and no span is charged
    auto.update(probe_stream_ns=1340)
    cell = auto_replay.replay_cell(spans, tmpl, stream, auto, O0)
    assert (cell["mode"], cell["source"]) == ("template", "probes")


def test_replay_of_a_span_sweep_reproduces_what_it_streamed_on_one_thread():
    # a bench run with --auto-span 4096 and every range learning (--auto-memo 0), on one
    # thread (the Zen 3 VM, 2026-11-28): replaying its logged rounds and spans must put each
    # record in the mode the bench did, spans included
    out = benchbin.parse_output((DATA / "span-sweep-raw.txt").read_text())
    policy = auto_replay.Policy(memo=0, span=4096)
    late_llc = int(out.info["llc_bytes"])
    checked = spanned = 0
    for row in bench_stats.summarize(out.samples):
        if row.get("strategy") != "auto":
            continue
        layout = LAYOUTS[row["layout"]]
        late = auto_replay.late_chunk(policy, layout, late_llc)
        shares = [auto_replay.streamed_by_rounds(policy, row["size"] // 64, layout, 1, late,
                                                 bench_stats.parse_rounds(text))
                  for _rep, text in row["rounds_by_rep"]]
        assert sum(shares) / len(shares) == pytest.approx(row["streamed_share"], abs=1e-9), row
        spanned += sum(r.span_tmpl_ns > 0 for _rep, text in row["rounds_by_rep"]
                       for r in bench_stats.parse_rounds(text))
        checked += 1
    assert checked == 12 and spanned >= 5


def test_replay_of_a_deduplicated_sweep_reproduces_what_it_streamed():
    # a bench run of layout o9dedup (--auto-memo 0, --auto-span 4096, one thread; the Zen 3 VM,
    # 2026-11-29): its pieces are two compound pages, 256 struct pages written, its chunks 8192
    # written, and it times no span; replaying its logged rounds must put each record in the
    # mode the bench did
    out = benchbin.parse_output((DATA / "dedup-sweep-raw.txt").read_text())
    policy = auto_replay.Policy(memo=0, span=4096)
    checked = 0
    for row in bench_stats.summarize(out.samples):
        if row.get("strategy") != "auto":
            continue
        late = auto_replay.late_chunk(policy, O9DEDUP, int(out.info["llc_bytes"]))
        rounds = [bench_stats.parse_rounds(text) for _rep, text in row["rounds_by_rep"]]
        shares = [auto_replay.streamed_by_rounds(policy, row["size"] // 64, O9DEDUP, 1, late, r) for r in rounds]
        assert sum(shares) / len(shares) == pytest.approx(row["streamed_share"], abs=1e-9), row
        assert not any(r.span_tmpl_ns for rep in rounds for r in rep)
        checked += 1
    assert checked == 4


def _missed_rows(threads):
    # a 4 MiB configuration whose probes saw streaming faster where template copies the range
    # twice as fast: a miss
    sums = {"probe_tmpl_ns": 2000, "probe_stream_ns": 1000, "probe_records": 256}
    return [{**bench_stats.summarize(_samples(strategy, rates, threads=threads))[0], **extra}
            for strategy, rates, extra in (("template", [20] * 7, {}), ("movntdq", [10] * 7, {}),
                                           ("auto", [10] * 7, sums))]


def test_replay_claims_the_bar_for_the_splits_the_kernel_makes():
    # the same miss on one thread fails the report; on two threads of a 4 MiB memmap, a split
    # the kernel makes only when memmap_init_threads forces it, it is shown and counted, not
    # claimed
    for threads, claimed in ((1, True), (2, False)):
        run = recorded_runs.RecordedRun("run", "Test CPU", _missed_rows(threads), round_order="lead-first")
        text, every = bench_results.replay_report([run], POLICY)
        assert "bar met in 0/1" in text and "MISS" in text
        assert every != claimed
        assert ("counted apart: 1 miss of two-thread splits" in text) != claimed
        assert ("1 of the misses on threads the kernel uses there only when forced" in text) != claimed
    # both in one run: the miss of the split the kernel makes still fails it
    both = _missed_rows(1) + _missed_rows(2)
    text, every = bench_results.replay_report([recorded_runs.RecordedRun("run", "Test CPU", both,
                                                                         round_order="lead-first")], POLICY)
    assert not every and "bar met in 0/2 (1 of the misses on threads" in text and "counted apart: 1 miss " in text
