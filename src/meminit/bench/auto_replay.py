"""The learning `auto` replayed over recorded sweeps (issue 33): what the policy would have cost on a
CPU this machine is not, from what each mode cost over the whole range there.

Per configuration (size, layout, destination, threads) of a run that measured template and
streaming, the replay takes the probe schedule of the policy (bench/src/auto.c, patch 11: a round
at chunk 0 and every power-of-two chunk with room for it, chunk 1 only where a second thread takes
it before chunk 0's round has decided; each round two pairs of an untimed template lead-in, a timed
template piece and a timed streaming piece, the second pair skipped when the first found one mode
twice as fast as the other) and its verdicts, and predicts auto's rate repetition by repetition:
each chunk in the mode of the last round before it, the rounds' pieces in theirs. The verdicts come
from what the probes measured where the sweep recorded it (probe T/S, as the kernel decides:
streaming must be faster by 1/32, and in the rounds of chunks twice the run's LLC into the range
template must be faster by a quarter to keep them; no such rounds where the run did not record its
LLC); in a run made before probes were recorded it is the mode that was faster over the whole
range, i.e. the replay then judges the schedule's cost assuming the probes see what the range costs
("assumed"), which the live sweep on this machine checks (`probe T/S` against `range T/S`).

Where the sweep logged every round (`probe_rounds=`, bench since 2026-11-27), the verdicts are
judged round by round instead ("rounds"; "rounds, remembered" where repetitions that ran none
follow those that did): each round's own pieces against the rule, its early end
included, and per repetition the share of the records each mode wrote follows from them. On several
threads a round from chunk 2 on turns the verdict the other chunks follow only by the switch margin
(patch 11's MEMMAP_AUTO_SWITCH_MARGIN) and runs both pairs, and the replay judges it beside each
mode in the share of the fills that follow it there. The pieces are the sweep's: a policy with
other piece sizes (--probe, --lead) is charged its own, but judged on what the sweep's pieces
measured, and a round the sweep ended early counts as one pair whatever the policy's early end. A
rule whose margin sits inside the rounds' spread streams some rounds and not others, which the
probes' sums, one verdict for all, cannot show (`live S`: what the sweep's own auto streamed).
Where a sweep kept only the sums and they tie (neither mode's probes faster by the margin), the
rounds' verdicts were their pieces' noise and no one verdict replays them: such a configuration is
judged by the sweep's own auto, paired repetition by repetition as the live bar is ("live"; the
rule of the sweep's day, before any late round, as the cell has none). Probes judge the policy only
where the sweep's rounds timed its pieces in its order (Policy.order, the bench's --auto-order,
which a run records): a run of other rounds (the Zen 3 VM's sweep of 2026-11-25 timed a lead-in, T,
T, S, S; one Zen 4 sweep S, T, S, T), or of none recorded, is not judged where its auto kept
probes: they measured rounds the policy does not run.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from meminit.bench import auto_spans, bench_stats
from meminit.bench.memmap_layouts import Layout

# the cache states of the kernel's callers (bench/README.md): an altmap memmap (cold), a DRAM
# memmap nobody walks (warm) and one its owner walks after the init (walked); `readback`, each
# chunk read back right after its init, stands for no caller and is not judged
JUDGED_DESTS = ("cold", "warm", "walked")


@dataclass(frozen=True)
class Policy:
    """The learning auto's parameters (bench/src/auto.h; patch 11's MEMMAP_AUTO_*)."""
    probe: int = 256  # struct pages per timed piece, at least
    lead: int = 256  # untimed template struct pages before the pieces, at least
    pieces: int = 4  # two template, two streaming
    margin_den: int = 32  # streaming must be faster by more than 1/32
    decisive: float = 2.0  # a round stops after its first pair if one mode is this much faster
    chunk_pages: int = 32768  # the kernel's chunk: 128 MiB of device memory
    # rounds of chunks that start late_llcs x the LLC into the range (0: none) keep template only
    # if its piece is faster by more than 1/late_margin_den
    late_llcs: int = 2
    late_margin_den: int = 4
    # on several threads a round from chunk 2 on (not late) turns the verdict the other threads
    # write in only if the other mode's piece is faster by more than 1/switch_margin_den (0: no
    # such rule, as patch 11 before 2026-11-28)
    switch_margin_den: int = 4
    # a round's verdict serves the same round of the next memo - 1 ranges of its kind and size
    # (patch 11's MEMMAP_AUTO_REUSE; 0: every range learns), in bursts of ranges as the sweep runs
    # them: a sample of one configuration fills burst_bytes of struct pages, several ranges if
    # they are smaller
    memo: int = 8
    burst_bytes: int = 64 << 20
    # the order of a round's pieces (the bench's --auto-order): a run's probes judge the
    # policy only if its rounds timed the same pieces in the same order
    order: str = "lead-first"
    # the walk hint's read-back stops at half the LLC and, if set, at walk_max bytes of memmap
    # (patch 11's MEMMAP_AUTO_WALK_MAX since 2026-11-28; 0: half the LLC only, as before)
    walk_max: int = 4 << 20
    # patch 11's spans (MEMMAP_AUTO_SPAN_PAGES, the bench's --auto-span; 0: none, as patch 11
    # before 2026-11-29): span_records(), span_streams()
    span: int = 4096
    span_tie_den: int = 4


def _chunk_pages(policy: Policy, layout: Layout) -> int:
    """The struct pages of the kernel's chunk, rounded to compound pages and pageblocks as its
    split does."""
    return layout.chunk_written(policy.chunk_pages)


def _pieces(policy: Policy, layout: Layout) -> tuple[int, int]:
    """(struct pages of a timed piece, of a lead-in): whole compound pages, as the kernel's."""
    return layout.whole(policy.probe), layout.whole(policy.lead)


def learning_share(policy: Policy, records: int) -> float:
    """The share of a burst's ranges of `records` struct pages that run their rounds: all
    without memo; with it, one in memo of the ranges of a sample (policy.burst_bytes)."""
    if policy.memo < 2:
        return 1.0
    ranges = max(1, -(-policy.burst_bytes // (records * bench_stats.RECORD_BYTES)))
    return -(-ranges // policy.memo) / ranges


def _round_records(policy: Policy, layout: Layout, pairs: int) -> int:
    probe, lead = _pieces(policy, layout)
    return pairs * (lead + 2 * probe)


def _chunk_with_round(policy: Policy, layout: Layout, size: int, pairs: int, streams_rest: bool,
                      learns: float = 1.0, span: int = 0) -> tuple[float, float]:
    """(template records, streaming records) of a chunk of `size` that starts with a round of
    `pairs` pairs (a lead-in, a template and a streaming piece each) and, if `span`, a lead-in
    and `span` struct pages of each mode after it, the rest in its verdict; learns: the share of
    the ranges that run the round, the others write the chunk in the remembered verdict
    (learning_share())."""
    probe, lead = _pieces(policy, layout)
    span_lead = lead if span else 0
    rest = size - _round_records(policy, layout, pairs) - span_lead - 2 * span
    t = pairs * (lead + probe) + span_lead + span + (0 if streams_rest else rest)
    s = pairs * probe + span + (rest if streams_rest else 0)
    whole = (0, size) if streams_rest else (size, 0)
    return learns * t + (1 - learns) * whole[0], learns * s + (1 - learns) * whole[1]


def _chunks(policy: Policy, records: int, layout: Layout, threads: int) -> Iterator[tuple[int, int, bool]]:
    """(index, struct pages, whether it starts with a round) of every chunk of a range: a round
    in chunk 0 and every power-of-two chunk with room for two lead-ins and the pieces; in chunk
    1 only on several threads, where a second thread takes it while chunk 0's round runs (one
    thread has chunk 0's verdict by then)."""
    probe, lead = _pieces(policy, layout)
    chunk = _chunk_pages(policy, layout)
    per_round = policy.pieces // 2 * lead + policy.pieces * probe
    for idx in range(-(-records // chunk)):
        size = min(chunk, records - idx * chunk)
        yield idx, size, not (idx & (idx - 1) or (idx == 1 and threads == 1)) and size >= per_round


def schedule(policy: Policy, records: int, layout: Layout, early: bool = False,
             threads: int = 1) -> tuple[int, int]:
    """(template records, streaming records) the probe rounds write in a range of `records`
    struct pages written of `layout` (whole compound pages per piece, _chunks()' rounds);
    early: every round stopped after its first pair."""
    probe, lead = _pieces(policy, layout)
    pairs = 1 if early else policy.pieces // 2
    rounds = sum(has_round for _idx, _size, has_round in _chunks(policy, records, layout, threads))
    return rounds * pairs * (lead + probe), rounds * pairs * probe


def streams(policy: Policy, probe_tmpl_ns: float, probe_stream_ns: float, late: bool = False,
            beside: bool | None = None) -> bool:
    """The kernel's verdict: streaming's faster piece beats template's by more than 1/margin;
    late (past late_llcs x the LLC): template's does not beat streaming's by 1/late_margin_den;
    beside (a round from chunk 2 on, on several threads: whether the others wrote in streaming
    while it timed its pieces): the other mode's piece must be faster by 1/switch_margin_den."""
    if late:
        return probe_tmpl_ns * policy.late_margin_den >= probe_stream_ns * (policy.late_margin_den - 1)
    den = policy.switch_margin_den
    if beside is not None and den:
        if beside:
            return not probe_tmpl_ns * den < probe_stream_ns * (den - 1)
        return probe_stream_ns * den < probe_tmpl_ns * (den - 1)
    return probe_stream_ns * policy.margin_den < probe_tmpl_ns * (policy.margin_den - 1)


def tie(policy: Policy, probe_tmpl_ns: float, probe_stream_ns: float) -> bool:
    """Neither mode's probe beats the other's by the margin (1/margin_den): a round's verdict
    there is its pieces' noise."""
    return not streams(policy, probe_tmpl_ns, probe_stream_ns) and \
        not streams(policy, probe_stream_ns, probe_tmpl_ns)


def decided(policy: Policy, lead_ns: float, t_ns: float, s_ns: float, late: bool) -> bool:
    """The kernel's early end after a round's first pair (memmap_init_auto_round_decided()):
    streaming took decisive x template's time (not in a late round), or template and the
    lead-in each took decisive x streaming's."""
    if policy.decisive <= 0:
        return False
    return (not late and s_ns >= policy.decisive * t_ns) or \
        (t_ns >= policy.decisive * s_ns and lead_ns >= policy.decisive * s_ns)


def logged_faster_pieces(rnd: bench_stats.Round) -> tuple[int, int, bool]:
    """(template ns, streaming ns, ended early) of a logged round: each mode's faster piece, or
    the first pair's where the bench ended the round after it (no second pair logged)."""
    _chunk, _lead, t0, s0, t1, s1 = rnd[:6]
    if t1 == 0 and s1 == 0:
        return t0, s0, True
    return min(t0, t1), min(s0, s1), False


def timed_beside_others(threads: int, chunk: int) -> bool:
    """Whether a round of `chunk` times its pieces beside the other threads' writes in a
    verdict: on several threads from chunk 2 on (chunks 0 and 1 run theirs at once; the
    kernel's memmap_init_auto_others())."""
    return threads > 1 and chunk >= 2


def round_verdict(policy: Policy, rnd: bench_stats.Round, late: bool,
                  beside: bool | None = None) -> tuple[bool, int]:
    """(streams, pairs) of a logged round under the policy: its early end from the first pair
    (a round the bench ended early has no second pair to go on: the first decides); beside: as
    streams(), and a round beside other threads' writes does not end early."""
    _chunk, lead, t0, s0 = rnd[:4]
    if (beside is None or not policy.switch_margin_den) and decided(policy, lead, t0, s0, late):
        return streams(policy, t0, s0, late, beside), 1
    t_ns, s_ns, early = logged_faster_pieces(rnd)
    return streams(policy, t_ns, s_ns, late, beside), 1 if early else policy.pieces // 2


def streamed_by_rounds(policy: Policy, records: int, layout: Layout, threads: int, late: int | None,
                       rounds: list[bench_stats.Round], range_streams: bool | None = None) -> float | None:
    """The share of a range's records streaming writes when each round of the policy's schedule
    goes as the logged rounds of its chunk went (their mean over the fills of a repetition); a
    scheduled round that ran in only some fills (chunk 1, which a second thread skips once chunk
    0 has decided) in that share of them; None without a round of chunk 0, or if the schedule
    has a round the sweep never ran, or one that times spans without a verdict for them
    (range_streams: whether the repetition's ranges ran faster streaming, for span_streams())."""
    by_chunk: dict[int, list[bench_stats.Round]] = defaultdict(list)
    for rnd in rounds:
        by_chunk[rnd[0]].append(rnd)
    fills = len(by_chunk.get(0, []))
    if not fills:
        return None
    learns = learning_share(policy, records)
    tmpl = stream = 0.0
    follow = 0.0  # share of the fills in which the chunks after the last round stream
    for idx, size, has_round in _chunks(policy, records, layout, threads):
        logged = by_chunk.get(idx, []) if has_round else []
        if has_round and not logged and not (idx == 1 and threads > 1):
            return None  # a round the sweep never ran: its rounds cannot judge this schedule
        ran = min(1.0, len(logged) / fills)
        in_t = in_s = wins = 0.0
        is_late = late is not None and idx >= late
        for rnd in logged:
            # on several threads a round from chunk 2 on is timed beside the others' mode:
            # streaming in `follow` of the fills
            for beside, weight in (((False, 1 - follow), (True, follow))
                                   if timed_beside_others(threads, idx) else ((None, 1.0),)):
                won, pairs = round_verdict(policy, rnd, is_late, beside)
                span = auto_spans.span_records(policy, layout, size - _round_records(policy, layout, pairs),
                                               pairs, is_late, beside) \
                    if auto_spans.ties(policy, *logged_faster_pieces(rnd)[:2]) else 0
                if span:
                    spanned = auto_spans.span_streams(policy, rnd, range_streams)
                    if spanned is None:
                        return None
                    won = spanned
                t, s = _chunk_with_round(policy, layout, size, pairs, won, learns, span)
                in_t, in_s, wins = in_t + weight * t, in_s + weight * s, wins + weight * won
        if logged:
            in_t, in_s, wins = in_t / len(logged), in_s / len(logged), wins / len(logged)
        tmpl += ran * in_t + (1 - ran) * (1 - follow) * size
        stream += ran * in_s + (1 - ran) * follow * size
        follow = ran * wins + (1 - ran) * follow
    return stream / (tmpl + stream)


def late_chunk(policy: Policy, layout: Layout, llc_bytes: int | None) -> int | None:
    """The first chunk whose rounds are late: the one that starts late_llcs x the LLC into the
    range (chunk index x chunk bytes of struct pages, as the kernel counts); None without one."""
    if not llc_bytes or not policy.late_llcs:
        return None
    chunk_bytes = _chunk_pages(policy, layout) * bench_stats.RECORD_BYTES
    return -(-policy.late_llcs * llc_bytes // chunk_bytes)


def split(policy: Policy, records: int, layout: Layout, verdicts: tuple[bool, bool], early: bool = False,
          threads: int = 1, late: int | None = None, early_late: bool | None = None,
          spans: bool = False) -> tuple[float, float]:
    """(template records, streaming records) of the whole range: every round as schedule()
    counts it, the rest of its chunk in its verdict (verdicts: before the late chunk, from it
    on), every other chunk in the verdict of the last round before it, template before any.
    early: the rounds end after their first pair; early_late: the late ones do (default: as
    early; a late round ends early only where streaming won decisively). spans: the early rounds
    not beside other threads also time spans (auto_spans)."""
    early_late = early if early_late is None else early_late
    tmpl = stream = 0.0
    mode = False
    learns = learning_share(policy, records)
    for idx, size, has_round in _chunks(policy, records, layout, threads):
        if has_round:
            is_late = late is not None and idx >= late
            mode = verdicts[is_late]
            pairs = 1 if (early_late if is_late else early) else policy.pieces // 2
            span = auto_spans.span_records(policy, layout, size - _round_records(policy, layout, pairs), pairs,
                                           is_late, True if timed_beside_others(threads, idx) else None) \
                if spans else 0
            t, s = _chunk_with_round(policy, layout, size, pairs, mode, learns, span)
        else:
            t, s = (0, size) if mode else (size, 0)
        tmpl, stream = tmpl + t, stream + s
    return tmpl, stream


def replay_cell(policy: Policy, tmpl: dict, stream: dict, auto: dict | None, layout: Layout,
                llc_bytes: int | None = None) -> dict:
    """One configuration: the verdicts, the predicted per-repetition rates and the bar."""
    records = tmpl["size"] // bench_stats.RECORD_BYTES
    if auto and auto.get("probe_stream_ns"):
        t_ns, s_ns = auto["probe_tmpl_ns"], auto["probe_stream_ns"]
        source = "probes"
    else:
        # the probes assumed to time what the whole range costs
        t_ns, s_ns = 1 / tmpl["median"], 1 / stream["median"]
        source = "assumed"
    ratio = t_ns / s_ns
    verdicts = (streams(policy, t_ns, s_ns), streams(policy, t_ns, s_ns, late=True))
    # room for spans: what chunk 0 leaves after a full round (none in a deduplicated layout's)
    room = min(records, _chunk_pages(policy, layout)) - _round_records(policy, layout, policy.pieces // 2)
    spans = auto_spans.span_records(policy, layout, room, policy.pieces // 2, False, None) > 0 and \
        auto_spans.ties(policy, t_ns, s_ns)
    if spans:
        # the sums tie by a quarter: the early rounds' spans decide, assumed to see the range
        verdicts = (streams(policy, 1 / tmpl["median"], 1 / stream["median"]), verdicts[1])
        source = source if source == "assumed" else f"{source}, spans assumed"
    late = late_chunk(policy, layout, llc_bytes)
    # the round stops after its first pair when one mode is decisively faster
    early = policy.decisive > 0 and max(ratio, 1 / ratio) >= policy.decisive
    # a late round ends early only with streaming
    in_tmpl, in_stream = split(policy, records, layout, verdicts, early, tmpl["threads"], late,
                               early and ratio > 1, spans and not early)
    s = in_stream > in_tmpl
    # where the late rounds turn the verdict, the mode of most of the range after the other's
    past_late = late is not None and -(-records // _chunk_pages(policy, layout)) > late
    mode = ("streaming" if s else "template") if verdicts[0] == verdicts[1] or not past_late \
        else ("template, late streaming" if verdicts[1] else "streaming, late template")
    other = (in_tmpl if s else in_stream) / records
    rt, rs = bench_stats.rates_by_rep(tmpl), bench_stats.rates_by_rep(stream)
    keys = [None] if None in rt or None in rs else sorted(rt.keys() & rs.keys())
    if keys == [None]:
        rt, rs = {None: tmpl["median"]}, {None: stream["median"]}
    # the share streaming writes, per repetition: one for all from the probes' sums, or each
    # repetition's from its logged rounds
    shares = dict.fromkeys(keys, in_stream / records)
    # per repetition, whether its range streamed faster by the margin: the verdict of spans the
    # sweep did not time (every repetition's, as its rounds ran in all of them)
    all_t, all_s = ({rep: rate for rep, rate, _cpu in row.get("by_rep") or []} for row in (tmpl, stream))
    truth = {k: all_s[k] * (policy.margin_den - 1) > all_t[k] * policy.margin_den for k in all_t.keys() & all_s.keys()}
    logged = _logged_shares(policy, auto, records, layout, tmpl["threads"], late, truth)
    share = None
    # repetitions summarize() left out (no round: all on remembered verdicts) follow those that learned
    remembered = logged is not None and None not in keys and not logged.keys() >= set(keys)
    if logged is not None and remembered:
        mean = statistics.fmean(logged.values())
        logged = {k: logged.get(k, mean) for k in keys}
    if logged and None not in keys and all(k in logged for k in keys):
        shares, source = logged, "rounds, remembered" if remembered else "rounds"
        # over every repetition, as the sweep's streamed share counts it (the pairs leave out
        # the disturbed ones)
        share = statistics.fmean(logged.values())
    elif source == "probes" and not spans and tie(policy, t_ns, s_ns) and not past_late and auto \
            and auto.get("by_rep") and auto.get("streamed_share") is not None:
        # the sums tie: each round's verdict was its own pieces' noise, which one verdict for
        # all cannot replay; the sweep's own auto ran those rounds, repetition by repetition
        share, source = auto["streamed_share"], "live"
    if share is not None:
        s = share > 0.5
        mode, other = ("streaming" if s else "template"), (1 - share if s else share)
    best = stream if stream["median"] > tmpl["median"] else tmpl
    if source == "live" and auto is not None:
        pairs, pairs_t = bench_stats.paired_ratios(auto, best), bench_stats.paired_ratios(auto, tmpl)
    else:
        pairs, pairs_t = [], []
        for k in keys:
            rate = 1 / (shares[k] / rs[k] + (1 - shares[k]) / rt[k])
            pairs.append(rate / (rs[k] if best is stream else rt[k]))
            pairs_t.append(rate / rt[k])
    pairs.sort()
    pairs_t.sort()
    verdict, verdict_t = bench_stats.bar_verdict(pairs), bench_stats.bar_verdict(pairs_t)
    return {"size": tmpl["size"], "layout": tmpl["layout"], "dest": tmpl["dest"], "threads": tmpl["threads"],
            "split": tmpl.get("split", "even"), "mode": mode, "source": source,
            "forced": bench_stats.forced_split(tmpl["size"], tmpl["threads"]),
            "other_share": other, "range_t_over_s": stream["median"] / tmpl["median"],
            "live_streamed": auto.get("streamed_share") if auto else None,
            "ratio_best": statistics.median(pairs) if pairs else 0.0,
            "ratio_template": statistics.median(pairs_t) if pairs_t else 0.0,
            "verdict": "MISS" if "MISS" in (verdict, verdict_t) else verdict}


def _logged_shares(policy: Policy, auto: dict | None, records: int, layout: Layout, threads: int,
                   late: int | None, range_streams: dict | None = None) -> dict | None:
    """Per repetition, streamed_by_rounds() of the rounds the sweep logged in it; None unless
    the sweep logged them (all of them: the bench logs at most 1024 per sample) and they can
    judge the policy's schedule (range_streams: per repetition, whether its ranges ran faster
    streaming, for spans the sweep did not time)."""
    shares = {}
    for rep, text in (auto or {}).get("rounds_by_rep") or []:
        share = streamed_by_rounds(policy, records, layout, threads, late, bench_stats.parse_rounds(text),
                                   (range_streams or {}).get(rep))
        if share is None:
            return None
        shares[rep] = share
    return shares or None
