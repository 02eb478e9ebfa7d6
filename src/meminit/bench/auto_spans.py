"""Spans for the ties (patch 11's, the bench's --auto-span), as the replay
(auto_replay) charges and judges them: a full round, neither late nor beside other threads'
writes, whose faster pieces are within 1/span_tie_den of each other times a span of
Policy.span struct pages in each mode after it, and the spans decide by the 1/margin_den margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from meminit.bench.memmap_layouts import Layout


class Policy(Protocol):
    """What of auto_replay.Policy (frozen) the spans read: struct pages per span (0: none),
    the template lead-in before them, the tie (pieces within 1/span_tie_den), the pieces of a
    full round, and the spans' margin."""
    @property
    def span(self) -> int: ...
    @property
    def lead(self) -> int: ...
    @property
    def span_tie_den(self) -> int: ...
    @property
    def pieces(self) -> int: ...
    @property
    def margin_den(self) -> int: ...


def ties(policy: Policy, t_ns: float, s_ns: float) -> bool:
    """Whether a round's faster pieces (template, streaming ns) are within 1/span_tie_den of each
    other: the spans decide such a round."""
    den = policy.span_tie_den
    return t_ns * den > s_ns * (den - 1) and s_ns * den > t_ns * (den - 1)


def span_records(policy: Policy, layout: Layout, rest: int, pairs: int, late: bool, beside: bool | None) -> int:
    """The struct pages of each span a round of a tie times (whole compound pages of `layout`; 0
    for none): a full round (`pairs`), not late, not beside other threads, and room for a lead-in
    and both spans in the `rest` of its chunk after the round (the bench's span_settles())."""
    span, lead = layout.whole(policy.span), layout.whole(policy.lead)
    if not span or late or beside is not None or pairs < policy.pieces // 2 or rest < lead + 2 * span:
        return 0
    return span


def span_streams(policy: Policy, rnd: Sequence[int | None], range_streams: bool | None) -> bool | None:
    """A span pair's verdict: from the spans the sweep logged for the round (its ninth and tenth
    fields), else `range_streams` (the repetition's own ranges: streaming faster by the margin)."""
    t_ns, s_ns = (rnd[8], rnd[9]) if len(rnd) > 9 else (None, None)
    return s_ns * policy.margin_den < t_ns * (policy.margin_den - 1) if t_ns and s_ns else range_streams
