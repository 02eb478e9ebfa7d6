/*
 * auto.c - the learning `auto` policy, as the kernel runs it on its chunks.
 *
 * No size rule fitted on one CPU holds on the next (bench/README.md, "`auto`
 * that learns"), so auto measures instead.  A range is initialised in
 * chunks (the kernel's split); every chunk whose index is 0 or a power of
 * two starts with a probe round (chunk 1 only while no round has published a
 * verdict: on one thread chunk 0's round has, and chunk 2's learns again
 * soon enough), and so does every other chunk taken before any verdict
 * (patch 11 since 2026-11-29: on a node with a CPU per chunk they are all
 * taken at once; on one and two threads none is, so nothing measured here
 * changes): two pairs of pieces of at least auto_probe_min records,
 * whole compound pages, each pair a template lead-in of at least
 * auto_probe_lead records (the first timed), a timed template piece and a
 * timed streaming piece (drained before the clock is read), with MFENCE
 * before every clock read, so that every piece's stores are paid for
 * (--auto-order tries other orders: bench/README.md).  The round's winner
 * fills the rest of its chunk; every other chunk follows the round of the
 * highest chunk finished so far; streaming wins only if its faster piece
 * beats template's faster piece by more than a 1/32 margin.  Before the
 * first round, and in a range too small for one, template fills.
 *
 * The lead-in is there because a template piece that starts a write stream
 * pays the prefetchers' ramp (on the Zen 4 VM ~1.3 us, as much as the rest
 * of a 16 KiB piece): without it every round on AMD found streaming ~2x
 * faster where the whole range ran at the same speed in both modes, and
 * auto streamed 84-100 % of every range.  The streaming pieces need none
 * (bench/README.md); each template piece gets its own, as the streaming
 * piece before it leaves the prefetchers no stream to follow.
 *
 * A caller that walks the memmap right after the init (test_hmm, nouveau,
 * xen's unpopulated-alloc; the bench's readback destination) gives the
 * hint fn->walk: every piece is then read back as the walk reads it before
 * its clock stops, so that streaming pays for the misses it leaves behind.
 *
 * Rounds at chunk 0, (1,) 2, 4, 8 ... learn at once where a range starts
 * and again as it grows out of the caches, at a cost that shrinks with the
 * range: a range of N > 1 chunks runs ilog2(N - 1) + 1 rounds on one
 * thread; a round writes two lead-ins and two pieces in template and two
 * pieces in streaming.  Chunk 1's round mattered only where a second thread
 * starts it blind: on one thread it doubled the cost of learning a 4 MiB
 * memmap, which the Xeon VM, where template is 2.4-2.8x slower, paid in
 * full.  The minimum of two pieces discards an interrupt in one of them.
 * A round stops after its first pair when one mode took at least
 * AUTO_DECISIVE times the other's time: the second pair could not turn the
 * verdict unless an interrupt hit the first, and would only cost.  Where
 * template is faster by far (a just-zeroed memmap of the Zen 5 VM, 2.4x) it
 * saves a streaming piece; where streaming is (cold 4 MiB memmaps of order
 * 9 on the Zen 1 and Xeon VMs, 2.3-2.8x) a lead-in and a template piece,
 * which cost 3-4 % of such a range and kept auto below 0.97x the better
 * mode there.  To end a round with streaming, the first lead-in (per
 * piece) must have taken AUTO_DECISIVE times the streaming piece too, so
 * that one disturbed template piece cannot decide a range with one round.
 *
 * On several threads a round from chunk 2 on that starts once a verdict
 * has been published times its pieces beside the other threads' writes in
 * that verdict, which makes the other mode's piece look faster (a streaming
 * piece beside template writers, a template piece beside streamers; on the
 * Zen 4 VM the rounds turned the verdict back and forth): such a round
 * turns it only if the other mode is more than 1/auto_switch_margin_den
 * faster (--auto-switch-margin, patch 11's MEMMAP_AUTO_SWITCH_MARGIN) and
 * runs both pairs, as one pair beside the other mode is what the margin
 * distrusts.
 *
 * --auto-span (patch 11's spans): a full round, neither late nor
 * beside other threads, whose faster pieces are within a quarter of each
 * other is left to a span of each mode after it (a template lead-in, then
 * the template span, then the streaming one), which sees
 * what a 16 KiB piece misses: streaming's fixed costs spread thin, and the
 * write-back of template's lines (bench/README.md, "Spans for the ties").
 *
 * A round's verdict also serves the same round of the next auto_memo - 1
 * ranges of its kind and size (--auto-memo, patch 11's MEMMAP_AUTO_REUSE):
 * owners of small ranges map them in bursts, where a round costs about the
 * 3 % the bar leaves (bench/README.md, "Remembered verdicts").
 */
#include <stdatomic.h>

#include "auto.h"
#include "bench.h"

static struct auto_stats stats;
unsigned long auto_probe_min = AUTO_PROBE_RECORDS;
unsigned long auto_probe_lead = AUTO_PROBE_RECORDS;
unsigned long auto_probe_late;	/* 0: as auto_probe_min */
unsigned long auto_late_llcs = AUTO_LATE_LLCS;
unsigned long auto_late_margin_den = AUTO_LATE_MARGIN_DEN;
unsigned long auto_switch_margin_den = AUTO_SWITCH_MARGIN_DEN;
size_t auto_llc_override;
__thread int auto_timing_streaming;
__thread int auto_timing_span;
unsigned long auto_span = AUTO_SPAN_RECORDS;
__thread unsigned long auto_timing_chunk;
int auto_walk_rule = AUTO_WALK_CAPPED;	/* --auto-walk-share */
int auto_stream_first = 2;	/* --auto-order: lead-first, as patch 11 */
int auto_first_lead;
const struct auto_order auto_orders[] = {
	{ "stream-first", 0, 0 },
	{ "second-stream-first", 1, 0 },
	{ "lead-first", 2, 0 },
	{ "lead-stream-first", 0, 1 },
};
const size_t n_auto_orders = sizeof(auto_orders) / sizeof(auto_orders[0]);

const char *auto_order_name(void)
{
	for (size_t i = 0; i < n_auto_orders; i++)
		if (auto_orders[i].stream_first == auto_stream_first &&
		    auto_orders[i].first_lead == auto_first_lead)
			return auto_orders[i].name;
	return "?";
}
/* the round of the highest chunk so far: chunk << 1 | streaming won; -1 none */
static _Atomic long verdict = -1;
static struct auto_round_record round_log[AUTO_LOG_ROUNDS];
unsigned long auto_memo = AUTO_MEMO;
uint64_t auto_memo_age_ns = AUTO_MEMO_AGE_NS;
/*
 * per class: the size its verdicts are for, and per round slot the ranges
 * the verdict still serves and the verdict
 */
static struct {
	_Atomic unsigned int size_log2;
	/* CLOCK_MONOTONIC ns when a round was last remembered */
	_Atomic uint64_t stamp_ns;
	struct {
		_Atomic long left;
		_Atomic int streams;
	} slot[AUTO_MEMO_SLOTS];
} memo[AUTO_MEMO_CLASSES];

unsigned int auto_memo_class(int cold, int walked, unsigned int order, int threads)
{
	return (cold ? 1U : 0) | (walked ? 2U : 0) | (order ? 4U : 0) | (threads > 1 ? 8U : 0);
}

void auto_memo_reset(void)
{
	for (int c = 0; c < AUTO_MEMO_CLASSES; c++)
		for (int s = 0; s < AUTO_MEMO_SLOTS; s++)
			atomic_store_explicit(&memo[c].slot[s].left, 0, memory_order_relaxed);
}

/* the round slot of a probe chunk: 0 for chunk 0, 1 + log2 of the others */
static unsigned int memo_slot(unsigned long idx)
{
	return idx ? 64 - (unsigned int)__builtin_clzl(idx) : 0;
}

/*
 * Take a remembered verdict for this chunk's slot if one still serves: 1 and
 * *s.  A chunk between two powers of two (a round only when taken before any
 * verdict) reads the lower one's slot without using up its count, as patch
 * 11's memmap_init_auto_recall().
 */
static int memo_take(const struct auto_fns *fn, unsigned long idx, int *s)
{
	_Atomic long *left = &memo[fn->memo_class].slot[memo_slot(idx)].left;
	long n;

	if (atomic_load_explicit(&memo[fn->memo_class].size_log2, memory_order_acquire) !=
	    fn->memo_size_log2 ||
	    now_ns() - atomic_load_explicit(&memo[fn->memo_class].stamp_ns,
						  memory_order_relaxed) > auto_memo_age_ns)
		return 0;
	n = atomic_load_explicit(left, memory_order_acquire);
	while (n > 0)
		if ((idx & (idx - 1)) ||
		    atomic_compare_exchange_weak_explicit(left, &n, n - 1, memory_order_acquire,
							  memory_order_acquire)) {
			*s = atomic_load_explicit(&memo[fn->memo_class].slot[memo_slot(idx)].streams,
						  memory_order_relaxed);
			return 1;
		}
	return 0;
}

/*
 * Remember a round's verdict; a range of another size forgets the old ones,
 * and so does one that finds them too old (lest a fresh round revive them).
 */
static void memo_keep(const struct auto_fns *fn, unsigned long idx, int s)
{
	uint64_t now;
	int stale;

	/* a chunk between two powers of two keeps nothing (memo_take()) */
	if (auto_memo < 2 || (idx & (idx - 1)))
		return;
	now = now_ns();
	stale = now - atomic_load_explicit(&memo[fn->memo_class].stamp_ns,
					   memory_order_relaxed) > auto_memo_age_ns;
	if (atomic_exchange_explicit(&memo[fn->memo_class].size_log2, fn->memo_size_log2,
				     memory_order_acq_rel) != fn->memo_size_log2 || stale)
		for (int i = 0; i < AUTO_MEMO_SLOTS; i++)
			atomic_store_explicit(&memo[fn->memo_class].slot[i].left, 0,
					      memory_order_relaxed);
	atomic_store_explicit(&memo[fn->memo_class].stamp_ns, now, memory_order_relaxed);
	atomic_store_explicit(&memo[fn->memo_class].slot[memo_slot(idx)].streams, s,
			      memory_order_relaxed);
	atomic_store_explicit(&memo[fn->memo_class].slot[memo_slot(idx)].left,
			      (long)auto_memo - 1, memory_order_release);
}
static unsigned long round_log_n;
/* this thread's last round's spans (template, streaming ns), 0 without */
static __thread uint64_t span_log[2];
/* the fills since auto_log_reset(): auto_reset() starts each */
static unsigned long round_log_fills;

void auto_log_reset(void)
{
	__atomic_store_n(&round_log_n, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&round_log_fills, 0, __ATOMIC_RELAXED);
}

const struct auto_round_record *auto_log(unsigned long *n)
{
	unsigned long logged = __atomic_load_n(&round_log_n, __ATOMIC_RELAXED);

	*n = logged < AUTO_LOG_ROUNDS ? logged : AUTO_LOG_ROUNDS;
	return round_log;
}

/* before: the verdict published when the round began (-1 none) */
static void log_round(unsigned long idx, uint64_t lead_ns, const uint64_t ns[2][2], int early,
		      long before)
{
	unsigned long slot = __atomic_fetch_add(&round_log_n, 1, __ATOMIC_RELAXED);

	if (slot >= AUTO_LOG_ROUNDS)
		return;
	round_log[slot] = (struct auto_round_record){
		.chunk = idx, .lead_ns = lead_ns,
		.tmpl_ns = { ns[0][0], early ? 0 : ns[0][1] },
		.stream_ns = { ns[1][0], early ? 0 : ns[1][1] },
		.fill = __atomic_load_n(&round_log_fills, __ATOMIC_RELAXED) - 1,
		.before = before < 0 ? -1 : (int)(before & 1),
		.span_ns = { span_log[0], span_log[1] },
	};
}

/* Publish the verdict of the round in chunk idx unless a higher one is. */
static void publish(unsigned long idx, int s)
{
	long old = atomic_load_explicit(&verdict, memory_order_relaxed);
	long new = (long)(idx << 1 | (unsigned long)s);

	do {
		if (old >= 0 && (unsigned long)old >> 1 > idx)
			return;
	} while (!atomic_compare_exchange_weak(&verdict, &old, new));
}

int auto_probe_chunk(unsigned long chunk, int learned)
{
	/* BUG_AUTO_BLIND: the rule before 2026-11-29, other chunks never round */
	if (bug == BUG_AUTO_BLIND)
		return !(chunk & (chunk - 1)) && !(chunk == 1 && learned);
	return !learned || (chunk != 1 && !(chunk & (chunk - 1)));
}

/*
 * The PFNs (records of the map) of the fewest whole compound pages that write
 * at least `records` struct pages: compound_nr_pages() of each, so a piece
 * of a deduplicated memmap spans four times its struct pages' PFNs (the
 * kernel's memmap_init_auto_whole_compounds())
 */
static unsigned long whole_compound(unsigned long records, const struct dev_pagemap *pgmap)
{
	unsigned long written = compound_nr_pages(pgmap);

	return (records + written - 1) / written << pgmap->vmemmap_shift;
}

unsigned long auto_probe_records(const struct dev_pagemap *pgmap, unsigned long chunk)
{
	return whole_compound(chunk >= 2 && auto_probe_late ? auto_probe_late : auto_probe_min,
			      pgmap);
}

static unsigned long auto_lead_records(const struct dev_pagemap *pgmap)
{
	return whole_compound(auto_probe_lead, pgmap);
}

/* the faster of a mode's two pieces */
static uint64_t faster_piece(const uint64_t ns[2])
{
	return ns[0] < ns[1] ? ns[0] : ns[1];
}

/* streaming faster than template by more than the 1/32 margin */
static int streams_by_margin(uint64_t tmpl_ns, uint64_t stream_ns)
{
	return stream_ns * AUTO_MARGIN_DEN < tmpl_ns * (AUTO_MARGIN_DEN - 1);
}

unsigned long auto_round_records(const struct dev_pagemap *pgmap, unsigned long chunk)
{
	return (AUTO_PIECES / 2 + auto_first_lead) * auto_lead_records(pgmap) +
	       AUTO_PIECES * auto_probe_records(pgmap, chunk);
}

unsigned long auto_round_room(const struct dev_pagemap *pgmap, unsigned long chunk, int walked)
{
	int aged = walked && auto_walk_rule == AUTO_WALK_AGED;

	return auto_round_records(pgmap, chunk) + (aged ? 2 * auto_probe_records(pgmap, chunk) : 0);
}

int auto_round_streams(const uint64_t tmpl_ns[2], const uint64_t stream_ns[2], int late,
		       int current)
{
	uint64_t t = faster_piece(tmpl_ns), s = faster_piece(stream_ns);

	/* BUG_AUTO_LATE_IGNORED: past the LLC as before it */
	if (late && bug != BUG_AUTO_LATE_IGNORED)
		return t * auto_late_margin_den >= s * (auto_late_margin_den - 1);
	if (current == 0 && auto_switch_margin_den)
		return s * auto_switch_margin_den < t * (auto_switch_margin_den - 1);
	if (current == 1 && auto_switch_margin_den)
		return t * auto_switch_margin_den >= s * (auto_switch_margin_den - 1);
	return streams_by_margin(t, s);
}

unsigned long auto_late_chunk(size_t chunk_bytes, size_t llc)
{
	if (!llc || !auto_late_llcs || !chunk_bytes)
		return AUTO_NO_LATE_CHUNK;
	return (auto_late_llcs * llc + chunk_bytes - 1) / chunk_bytes;
}

int auto_round_decided(uint64_t lead_ns, uint64_t tmpl_ns, uint64_t stream_ns, int late)
{
	/* a late round ends early only with streaming (BUG_AUTO_LATE_IGNORED: either way) */
	if ((!late || bug == BUG_AUTO_LATE_IGNORED) && stream_ns >= AUTO_DECISIVE * tmpl_ns)
		return 1;
	/* BUG_AUTO_LEAD_UNCHECKED: one disturbed template piece decides */
	return tmpl_ns >= AUTO_DECISIVE * stream_ns &&
	       (bug == BUG_AUTO_LEAD_UNCHECKED || lead_ns >= AUTO_DECISIVE * stream_ns);
}

unsigned long auto_walk_share(size_t bytes, size_t llc)
{
	unsigned long share;

	if (bug == BUG_AUTO_WALK_SHARE || auto_walk_rule == AUTO_WALK_FULL ||
	    auto_walk_rule == AUTO_WALK_AGED)
		return AUTO_WALK_SHARE_ONE;
	if (auto_walk_rule == AUTO_WALK_CAPPED)
		return bytes <= AUTO_WALK_MAX_BYTES && (!llc || bytes <= llc / 2) ?
		       AUTO_WALK_SHARE_ONE : 0;
	if (!llc)
		return AUTO_WALK_SHARE_ONE;
	if (auto_walk_rule == AUTO_WALK_LLC)
		return bytes <= llc / 2 ? AUTO_WALK_SHARE_ONE : 0;
	if (bytes <= llc)
		return AUTO_WALK_SHARE_ONE;
	share = llc * AUTO_WALK_SHARE_ONE / bytes;
	return share ? share : 1;	/* as patch 11's until 2026-11-26 19:45, at least 1 */
}

void auto_reset(void)
{
	__atomic_fetch_add(&round_log_fills, 1, __ATOMIC_RELAXED);
	atomic_store_explicit(&verdict, -1, memory_order_relaxed);
	__atomic_store_n(&stats.rounds, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.stream_rounds, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.streamed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.records, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.probe_tmpl_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.probe_stream_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.probe_records, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.walked, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.pieces, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.memo_rounds, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stats.spans, 0, __ATOMIC_RELAXED);
}

struct auto_stats auto_stats(void)
{
	return stats;
}

static void count(unsigned long records, int streamed)
{
	__atomic_fetch_add(&stats.records, records, __ATOMIC_RELAXED);
	if (streamed)
		__atomic_fetch_add(&stats.streamed, records, __ATOMIC_RELAXED);
}

/*
 * Read back a piece as the hinted walk does and return its time since t0,
 * counting only fn->walk_share of the read-back (--auto-walk-share fraction).
 */
static uint64_t walk_piece(const struct auto_fns *fn, const struct fill_job *piece,
			   uint64_t (*clock)(void), uint64_t t0)
{
	uint64_t t1 = 0;

	if (fn->walk_share < AUTO_WALK_SHARE_ONE) {
		__builtin_ia32_mfence();
		t1 = clock();
	}
	sink += fn->walk(piece);
	__atomic_fetch_add(&stats.walked, 1, __ATOMIC_RELAXED);
	__builtin_ia32_mfence();
	if (fn->walk_share < AUTO_WALK_SHARE_ONE)
		return t1 - t0 + (clock() - t1) * fn->walk_share / AUTO_WALK_SHARE_ONE;
	return clock() - t0;
}

/*
 * Write the records of piece with f.  BUG_AUTO_FIRST_OVERRUN: the round's
 * first write runs a compound page past the records it counts, as the
 * stream-first order's first piece did before its length was set (the
 * next piece writes the same records again, so only verify's tiling check
 * can see it).
 */
static void write_piece(void (*f)(const struct fill_job *), struct fill_job *piece)
{
	struct fill_job w = *piece;

	if (piece->bug == BUG_AUTO_FIRST_OVERRUN) {
		w.nr_pages += 1UL << piece->order;
		piece->bug = BUG_NONE;
	}
	f(&w);
}

/*
 * Write and time one probe piece at piece->start_pfn (drained if streaming,
 * read back for the walk hint), count it and step past it.
 */
static uint64_t probe_piece(const struct fill_job *j, struct fill_job *piece, int st,
			    const struct auto_fns *fn, uint64_t (*clock)(void),
			    const struct fill_job *aged)
{
	uint64_t t0, ns;

	/* as the kernel's mb(): the previous piece's stores are not this
	 * one's to pay for, and this one's are */
	auto_timing_streaming = st;
	__builtin_ia32_mfence();
	t0 = clock();
	write_piece(st ? fn->stream : fn->tmpl, piece);
	if (st)
		fn->drain();
	if (fn->walk && j->bug != BUG_AUTO_NO_WALK) {
		/* --auto-walk-share aged: what the walk will pay for template's lines */
		ns = walk_piece(fn, aged ? aged : piece, clock, t0);
	} else {
		__builtin_ia32_mfence();
		ns = clock() - t0;
	}
	count(piece->nr_pages, st);
	piece->start_pfn += piece->nr_pages;
	return ns;
}

/*
 * The template lead-in before a timed template piece at piece->start_pfn:
 * trains the prefetchers on the template stream; the first of a round is
 * timed, per probe's worth of records (*lead_ns).
 */
static void lead_in(struct fill_job *piece, unsigned long lead, unsigned long probe,
		    const struct auto_fns *fn, uint64_t (*clock)(void), uint64_t *lead_ns)
{
	uint64_t t0;

	piece->nr_pages = lead;
	if (lead_ns && lead) {
		auto_timing_streaming = 0;
		__builtin_ia32_mfence();
		t0 = clock();
		write_piece(fn->tmpl, piece);
		__builtin_ia32_mfence();
		*lead_ns = (clock() - t0) * probe / lead;
	} else {
		write_piece(fn->tmpl, piece);
	}
	count(lead, 0);
	piece->start_pfn += lead;
	piece->nr_pages = probe;
}

unsigned long auto_span_records(const struct dev_pagemap *pgmap)
{
	return whole_compound(auto_span, pgmap);
}

/*
 * Whether a round's pieces leave its verdict to the spans (--auto-span): a
 * full round, neither late nor beside other threads' writes (a round from
 * chunk 2 on, on several threads, whatever the switch margin: the spans would
 * be timed beside them too), whose faster pieces are within a quarter of
 * each other (AUTO_SPAN_TIE_DEN).
 */
static int span_settles(const uint64_t ns[2][2], int pieces, int late, int beside, int aged)
{
	uint64_t t = faster_piece(ns[0]), s = faster_piece(ns[1]);

	return auto_span && !aged && !late && !beside && pieces == AUTO_PIECES &&
	       t * AUTO_SPAN_TIE_DEN > s * (AUTO_SPAN_TIE_DEN - 1) &&
	       s * AUTO_SPAN_TIE_DEN > t * (AUTO_SPAN_TIE_DEN - 1);
}

void auto_fill_chunk(const struct fill_job *chunk, unsigned long idx, const struct auto_fns *fn,
		     uint64_t (*clock)(void))
{
	unsigned long probe = auto_probe_records(chunk->pgmap, idx);
	unsigned long lead = auto_lead_records(chunk->pgmap);
	unsigned long span = auto_span_records(chunk->pgmap);
	struct fill_job j = *chunk;
	long v = atomic_load_explicit(&verdict, memory_order_relaxed);
	int aged = fn->walk && auto_walk_rule == AUTO_WALK_AGED;
	int round = auto_probe_chunk(idx, v >= 0) &&
		    j.nr_pages >= auto_round_room(j.pgmap, idx, fn->walk != NULL);
	int s;

	if (round && memo_take(fn, idx, &s)) {
		publish(idx, s);
		__atomic_fetch_add(&stats.memo_rounds, 1, __ATOMIC_RELAXED);
	} else if (round) {
		int late = idx >= fn->late_chunk;
		uint64_t ns[2][2], lead_ns = 0;
		struct fill_job piece = j;
		unsigned long written;
		int pieces = 0;
		/*
		 * on several threads the others write in verdict v while a
		 * round from chunk 2 on times its pieces (chunks 0 and 1 run
		 * theirs at once, in each other's company): such a round
		 * keeps v unless the other mode wins by the switch margin,
		 * and runs both pairs (--auto-switch-margin 0: neither)
		 */
		int current = fn->several_threads && idx >= 2 && v >= 0 && auto_switch_margin_den &&
			      j.bug != BUG_AUTO_SWITCH_IGNORED ? (int)(v & 1) : -1;

		auto_timing_chunk = idx;
		piece.nr_pages = probe;	/* lead_in() sets it again after a lead-in */
		/* lead-stream-first: the round's first write is the timed lead-in */
		if (auto_first_lead)
			lead_in(&piece, lead, probe, fn, clock, &lead_ns);

		for (int pair = 0; pair < AUTO_PIECES / 2; pair++) {
			/*
			 * --auto-order: pairs from auto_stream_first on time their
			 * streaming piece first, then the lead-in and the template
			 * piece, so that the rest of a chunk template wins
			 * continues the template stream instead of starting a
			 * new one after a streaming piece
			 */
			/*
			 * --auto-walk-share aged: the template piece is charged
			 * a read of lines past the round, zeroed as long ago as
			 * the walk will find template's lines
			 */
			struct fill_job ahead = j;

			ahead.start_pfn += auto_round_records(j.pgmap, idx) + pair * probe;
			ahead.nr_pages = probe;
			if (pair >= auto_stream_first)
				ns[1][pair] = probe_piece(&j, &piece, 1, fn, clock, NULL);
			lead_in(&piece, lead, probe, fn, clock,
				pair || auto_first_lead ? NULL : &lead_ns);
			ns[0][pair] = probe_piece(&j, &piece, 0, fn, clock, aged ? &ahead : NULL);
			if (pair < auto_stream_first)
				ns[1][pair] = probe_piece(&j, &piece, 1, fn, clock, NULL);
			pieces += 2;
			if (!pair && current < 0 &&
			    auto_round_decided(lead_ns, ns[0][0], ns[1][0], late) &&
			    j.bug != BUG_AUTO_NO_EARLY) {
				ns[0][1] = ns[0][0];
				ns[1][1] = ns[1][0];
				break;
			}
		}
		__atomic_fetch_add(&stats.pieces, pieces, __ATOMIC_RELAXED);
		s = auto_round_streams(ns[0], ns[1], late, current);
		/* BUG_AUTO_ROUND: forgets that the round wrote only these pieces */
		written = lead * ((pieces + 1) / 2 + auto_first_lead) +
			  probe * (pieces + (j.bug == BUG_AUTO_ROUND &&
					     j.nr_pages > auto_round_records(j.pgmap, idx)));
		j.start_pfn += written;
		j.nr_pages -= written;
		span_log[0] = span_log[1] = 0;
		if (span_settles(ns, pieces, late, fn->several_threads && idx >= 2, aged) &&
		    j.nr_pages >= lead + 2 * span) {
			struct fill_job sp = j;

			sp.bug = BUG_NONE;	/* a round's first write is not a span */
			/* a lead-in, as for a template piece (patch 11's) */
			lead_in(&sp, lead, probe, fn, clock, NULL);
			sp.nr_pages = span;
			auto_timing_span = 1;
			span_log[0] = probe_piece(&j, &sp, 0, fn, clock, NULL);
			span_log[1] = probe_piece(&j, &sp, 1, fn, clock, NULL);
			auto_timing_span = 0;
			/* BUG_AUTO_SPAN_IGNORED: the pieces' tie decides */
			if (j.bug != BUG_AUTO_SPAN_IGNORED)
				s = streams_by_margin(span_log[0], span_log[1]);
			__atomic_fetch_add(&stats.spans, 1, __ATOMIC_RELAXED);
			j.start_pfn += lead + 2 * span;
			j.nr_pages -= lead + 2 * span;
		}
		log_round(idx, lead_ns, ns, pieces < AUTO_PIECES, v);
		if (j.bug == BUG_AUTO_STREAM || j.bug == BUG_AUTO_TEMPLATE)
			s = j.bug == BUG_AUTO_STREAM;
		__atomic_fetch_add(&stats.probe_tmpl_ns, faster_piece(ns[0]), __ATOMIC_RELAXED);
		__atomic_fetch_add(&stats.probe_stream_ns, faster_piece(ns[1]), __ATOMIC_RELAXED);
		__atomic_fetch_add(&stats.probe_records, probe, __ATOMIC_RELAXED);
		publish(idx, s);
		memo_keep(fn, idx, s);
		__atomic_fetch_add(&stats.rounds, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&stats.stream_rounds, s, __ATOMIC_RELAXED);
	} else {
		s = v > 0 && (v & 1);	/* before any round: template */
	}
	if (!j.nr_pages)
		return;
	(s ? fn->stream : fn->tmpl)(&j);
	count(j.nr_pages, s);
}
