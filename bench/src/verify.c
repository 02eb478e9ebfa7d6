/*
 * verify.c - the verify mode: every fill strategy against the slow path, the
 * slow path against the fields 6.12 sets, every clear method against its
 * range.  --bug injects a known bug (clear-overrun here, the others where
 * the fills and chunks are made), which these checks must catch.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include "bench.h"

#define GUARD 65536	/* > 511 records: a misaligned chunk's overrun stays in it */
#define POISON 0xa5

static int failures;

static void report(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	if (!ok)
		failures++;
}

/*
 * chunk_req_pages for a check of the learning auto: o0's or o9's (pieces of
 * a compound page), twice o9's where the vmemmap is deduplicated (pieces of
 * two compound pages write 256 struct pages)
 */
static unsigned long check_chunk(unsigned long o0, unsigned long o9)
{
	if (!the_pgmap.vmemmap_shift)
		return o0;
	return the_pgmap.vmemmap_optimized ? 2 * o9 : o9;
}

/* Field-level checks of the reference (the slow path), so that a wrong
 * replay cannot pass by agreeing with itself. */
static void check_reference(const struct page *map, unsigned long nr, unsigned int order,
			    const char *name)
{
	unsigned long want_flags = (ZONE_DEVICE_IDX << ZONES_PGSHIFT) |
				   (LAST_CPUPID_MASK << LAST_CPUPID_PGSHIFT) | (1UL << PG_reserved);
	int head_ref = the_pgmap.type == MEMORY_DEVICE_PRIVATE ||
		       the_pgmap.type == MEMORY_DEVICE_COHERENT ? 0 : 1;
	unsigned long unit = 1UL << order, written = compound_nr_pages(&the_pgmap);
	char what[400];
	int ok = 1;

	for (unsigned long i = 0; i < nr && ok; i++) {
		const struct page *p = &map[i];
		unsigned long idx = i & (unit - 1);
		const struct page *head = p - idx;

		/* o9dedup: the struct pages the kernel does not write stay as they were */
		if (idx >= written) {
			const unsigned char *b = (const unsigned char *)p;

			for (size_t k = 0; k < sizeof(*p); k++)
				ok &= b[k] == POISON;
			if (!ok)
				snprintf(what, sizeof(what),
					 "reference %s: record %lu, which the kernel does not write, "
					 "written", name, i);
			continue;
		}
		if (p->_mapcount != -1 && idx != 1)
			ok = 0;
		if (p->memcg_data || (idx != 1 && p->index))
			ok = 0;
		if (idx == 0) {
			ok &= p->flags == (want_flags | (order ? 1UL << PG_head : 0));
			ok &= p->pgmap == &the_pgmap && !p->zone_device_data && !p->mapping;
			ok &= p->_refcount == head_ref && !p->private;
		} else {
			ok &= p->compound_head == (unsigned long)head + 1 && !p->private;
			ok &= p->_refcount == 0;
			if (idx == 1) {
				const struct folio *f = (const struct folio *)head;

				ok &= p->flags == (want_flags | order);
				ok &= f->_large_mapcount == -1 && f->_entire_mapcount == -1;
				ok &= f->_nr_pages_mapped == 0 && f->_pincount == 0;
				ok &= f->_folio_nr_pages == (1U << order) && p->_mapcount == -1;
			} else {
				ok &= p->flags == want_flags;
				ok &= !p->zone_device_data && p->mapping == (void *)TAIL_MAPPING;
			}
		}
		if (!ok)
			snprintf(what, sizeof(what), "reference %s: record %lu has unexpected fields", name, i);
	}
	if (ok)
		snprintf(what, sizeof(what), "reference %s: fields of %lu records as 6.12 sets them%s",
			 name, nr, written < unit ? ", the unwritten ones untouched" : "");
	report(ok, what);
}

/*
 * A clock for the learning auto that makes every thread's rounds alternate:
 * streaming wins its odd rounds, template its even ones (each piece at 50
 * against 70: past the quarter a round beside other threads' verdict needs),
 * so a range mixes both modes chunk by chunk.  Ten readings per round, two for each of the
 * timed lead-in (template) and the four pieces, whatever their order
 * (--auto-order): auto.c says which kind each timed piece is.
 */
#define FULL_ROUND_READS (2 * (1 + AUTO_PIECES))

/*
 * The scripted clocks count the readings of their thread since the fill
 * began (clock_gen moves on for every fill), so that a pool thread reused
 * from an earlier fill starts its script at the beginning.
 */
static _Atomic unsigned long clock_gen;
static __thread unsigned long script_gen, script_reads;
static __thread uint64_t script_now;

static unsigned long script_read(void)
{
	unsigned long gen = atomic_load(&clock_gen);

	if (script_gen != gen) {
		script_gen = gen;
		script_reads = 0;
	}
	return script_reads++;
}

static _Atomic unsigned long flip_stream_rounds;	/* rounds the clock made streaming win */

/*
 * The kinds of the timed pieces of the first full round a thread ran under
 * the flipping clock, bit k set if the k-th was streaming (the first lead-in
 * is template), with ORDER_SEEN set: the first thread to finish one stores
 * it (fill by fill, reset by the caller).
 */
#define ORDER_SEEN 0x100u
static _Atomic unsigned int flip_round_order;
static __thread unsigned int order_bits;

/* the order --auto-order asks for: pairs from auto_stream_first on time S first */
static unsigned int expected_round_order(void)
{
	unsigned int bits = 0, k = auto_first_lead;	/* a timed lead-in first */

	for (int pair = 0; pair < AUTO_PIECES / 2; pair++) {
		int lead = !pair && !auto_first_lead;	/* only the first lead-in is timed */

		if (pair >= auto_stream_first)
			bits |= 1u << k++;
		k += lead + 1;		/* the lead-in (if timed) and the template piece */
		if (pair < auto_stream_first)
			bits |= 1u << k++;
	}
	return bits | ORDER_SEEN;
}

static uint64_t flip_clock(void)
{
	unsigned long n = script_read();
	unsigned long round = n / FULL_ROUND_READS;
	int stream_piece = auto_timing_streaming;

	if (!n)
		order_bits = 0;
	if (!round && !(n % 2) && auto_timing_streaming)
		order_bits |= 1u << (n / 2);
	if (n == FULL_ROUND_READS - 1) {
		unsigned int unset = 0;

		atomic_compare_exchange_strong(&flip_round_order, &unset, order_bits | ORDER_SEEN);
	}

	if (n % 2)
		script_now += stream_piece == (int)(round % 2) ? 50 : 70;
	if (n % FULL_ROUND_READS == FULL_ROUND_READS - 1 && round % 2)
		atomic_fetch_add(&flip_stream_rounds, 1);
	return script_now;
}

/* Clocks under which the first pair of every round is decisive, the
 * streaming piece three times the template piece's (and the timed
 * lead-in's) time or the other way round: every round must end after that
 * pair, with the faster mode. */
static uint64_t decisive_clock(int stream_wins)
{
	unsigned long n = script_read();
	int stream_piece = auto_timing_streaming;

	if (n % 2)
		script_now += stream_piece == stream_wins ? 50 : 150;
	return script_now;
}

/* A clock under which the modes tie but the first template piece of every
 * round is disturbed (three times the others): the lead-in's time shows it,
 * so no round may end early, and template must win every round. */
static __thread unsigned long template_reads;	/* in this round, by disturbed_clock() */

static uint64_t disturbed_clock(void)
{
	unsigned long n = script_read();

	if (!(n % FULL_ROUND_READS))
		template_reads = 0;
	/* the second template reading pair: lead-in first, then this piece */
	if (!auto_timing_streaming && template_reads++ == 3)
		script_now += 150;
	else if (n % 2)
		script_now += 50;
	return script_now;
}

static uint64_t template_decisive_clock(void)
{
	return decisive_clock(0);
}

static uint64_t streaming_decisive_clock(void)
{
	return decisive_clock(1);
}

/*
 * Clocks that time every template piece (and lead-in) at 50 and every
 * streaming piece at 57 (a tie: template ahead by less than a quarter), at
 * 70 (template ahead by more) or at 150 (template decisively faster: early
 * rounds end after their first pair). Each timed piece reads the clock
 * twice; auto.c says which kind it times, as rounds of two and of four
 * pieces mix here.
 */
static uint64_t late_clock(uint64_t stream_ns)
{
	if (script_read() % 2)
		script_now += auto_timing_streaming ? stream_ns : 50;
	return script_now;
}

static uint64_t late_tie_clock(void)
{
	return late_clock(57);
}

static uint64_t late_template_clock(void)
{
	return late_clock(70);
}

/* template three times as fast: decisive, but a late round runs on */
static uint64_t late_decisive_clock(void)
{
	return late_clock(150);
}

/*
 * Of the rounds logged since auto_log_reset(), those that run both pairs
 * whatever the clock: on several threads the rounds from chunk 2 on that
 * began under a verdict (auto.c: timed beside the others' writes in it).
 */
static unsigned long rounds_beside_others(int threads)
{
	const struct auto_round_record *r;
	unsigned long n, count = 0;

	r = auto_log(&n);
	for (unsigned long i = 0; threads > 1 && i < n; i++)
		count += r[i].chunk >= 2 && r[i].before >= 0;
	return count;
}

/* Rounds at chunks from late_chunk on, counted apart from auto.c. */
static unsigned long late_rounds_expected(unsigned long nr, unsigned int order,
					  unsigned long late_chunk)
{
	unsigned long first = BASE_PFN, end = BASE_PFN + nr, count = 0;
	unsigned long cp = chunk_pages, chunk_first = first - first % cp;

	for (unsigned long c = 2; chunk_first + c * cp < end; c++) {
		unsigned long lo = chunk_first + c * cp, hi = lo + cp < end ? lo + cp : end;

		if (!(c & (c - 1)) && c >= late_chunk && hi - lo >= auto_round_records(&the_pgmap, c))
			count++;
	}
	return count;
}

/*
 * Past twice the LLC (an LLC of 256 KiB injected, so that a 4 MiB range
 * has rounds on both sides): a tie keeps template in the rounds before and
 * streams in those past it; template ahead by more than a quarter keeps
 * template in both (issue 33, bench/README.md).
 */
static void verify_auto_late(char *buf, const char *ref, size_t size, unsigned long nr, int order,
			     int pre, const char *layout, const char *tname)
{
	static const int thread_counts[] = { 1, 2 };
	static uint64_t (*const clocks[])(void) = {
		late_tie_clock, late_template_clock, late_decisive_clock,
	};
	static const char *const clock_names[] = {
		"late-tie", "late-template", "late-template-decisive",
	};
	const size_t llc = 256UL << 10;
	struct page *map = (struct page *)(buf + GUARD);
	char what[400];

	/* rounds fit in chunks of 2048 records at order 0, of 4096 at order 9 */
	chunk_req_pages = check_chunk(2048, 4096);
	for (int ti = 0; ti < 2; ti++)
	for (int ci = 0; ci < 3; ci++) {
		struct auto_stats a = { 0 };
		unsigned long late_chunk, want_late, early, want_pieces, beside, cb;
		int ok, right;

		memset(buf, POISON, size + 2 * GUARD);
		atomic_fetch_add(&clock_gen, 1);
		auto_llc_override = llc;
		auto_log_reset();
		run_auto_fill(pre, clocks[ci], thread_counts[ti], map, nr, order, READBACK_NONE,
			      PREP_NONE, &a);
		auto_llc_override = 0;
		/* chunk bytes as the kernel counts them: struct pages written */
		cb = memmap_written_pages(chunk_pages, &the_pgmap) * 64;
		late_chunk = (2 * llc + cb - 1) / cb;
		want_late = late_rounds_expected(nr, order, late_chunk);
		early = a.rounds - want_late;
		/*
		 * only the decisive clock ends rounds early, and only early
		 * ones not timed beside other threads' writes (all those of
		 * chunk 2 on here: the late ones begin under a verdict too)
		 */
		beside = rounds_beside_others(thread_counts[ti]);
		beside = beside > want_late ? beside - want_late : 0;
		want_pieces = (ci == 2 ? (early - beside) * AUTO_PIECES / 2 + beside * AUTO_PIECES :
			       early * AUTO_PIECES) + want_late * AUTO_PIECES;
		ok = !memcmp(buf, ref, size + 2 * GUARD) && a.records == nr;
		right = want_late && early && a.rounds > want_late && a.pieces == want_pieces &&
			a.stream_rounds == (ci ? 0 : want_late) &&
			/*
			 * template only: nothing streamed but the probe pieces;
			 * on one thread the chunks after the late rounds stream
			 * too (on two, another thread may take them before the
			 * round has published)
			 */
			(ci ? a.streamed == a.pieces / 2 * auto_probe_records(&the_pgmap, 0) :
			 a.streamed >= a.pieces / 2 * auto_probe_records(&the_pgmap, 0) &&
			 (thread_counts[ti] > 1 ||
			  a.streamed > a.pieces / 2 * auto_probe_records(&the_pgmap, 0)) &&
			 a.streamed < a.records);
		snprintf(what, sizeof(what),
			 "fill auto layout=%s pgmap=%s threads=%d split=chunked/%lu clock=%s llc=%zu "
			 "records=%lu (rounds %lu, %lu past chunk %lu, streaming won %lu, streamed %lu, "
			 "pieces %lu)%s",
			 layout, tname, thread_counts[ti], chunk_pages, clock_names[ci], llc, nr,
			 a.rounds, want_late, late_chunk, a.stream_rounds, a.streamed, a.pieces,
			 !ok ? ": differs from the slow path" : right ? "" :
			 a.pieces != want_pieces ? ": a late round ended early with template" : ci ?
			 ": streamed where template was ahead by more than the late margin" :
			 ": a tie did not keep template before twice the LLC and stream past it");
		report(ok && right, what);
	}
}

/*
 * Clocks under which each mode is only 10 % ahead in turn: every template
 * piece (and lead-in) at 50, streaming pieces at 55 in the rounds of chunks
 * 0 and 1 and at 45 from chunk 2 on, or the other way round.
 */
static uint64_t switch_clock(uint64_t first_stream_ns, uint64_t later_stream_ns)
{
	if (script_read() % 2)
		script_now += !auto_timing_streaming ? 50 :
			      auto_timing_chunk < 2 ? first_stream_ns : later_stream_ns;
	return script_now;
}

static uint64_t switch_stream_later_clock(void)
{
	return switch_clock(55, 45);
}

static uint64_t switch_template_later_clock(void)
{
	return switch_clock(45, 55);
}

/*
 * On several threads the rounds of chunk 2 on keep the verdict the others
 * write in unless the other mode is a quarter ahead
 * (AUTO_SWITCH_MARGIN_DEN): with template ahead in chunks 0 and 1 and
 * streaming 10 % ahead later, no round streams; the other way round, every
 * round does. On one thread the later rounds turn the verdict.
 */
static void verify_auto_switch(char *buf, const char *ref, size_t size, unsigned long nr,
			       int order, int pre, const char *layout, const char *tname)
{
	static uint64_t (*const clocks[])(void) = {
		switch_stream_later_clock, switch_template_later_clock,
	};
	static const char *const clock_names[] = { "switch-stream-later", "switch-template-later" };
	unsigned long memo = auto_memo, late_llcs = auto_late_llcs;
	struct page *map = (struct page *)(buf + GUARD);
	char what[400];

	chunk_req_pages = check_chunk(2048, 4096);
	auto_memo = 0;
	auto_late_llcs = 0;
	for (int threads = 1; threads <= 2; threads++)
	for (int ci = 0; ci < 2; ci++) {
		struct auto_stats a = { 0 };
		unsigned long want;
		int ok;

		memset(buf, POISON, size + 2 * GUARD);
		atomic_fetch_add(&clock_gen, 1);
		run_auto_fill(pre, clocks[ci], threads, map, nr, order, READBACK_NONE, PREP_NONE,
			      &a);
		ok = !memcmp(buf, ref, size + 2 * GUARD) && a.records == nr;
		/* one thread: chunk 0's round, then the later ones, turn it */
		want = threads > 1 ? (ci ? a.rounds : 0) : ci ? 1 : a.rounds - 1;
		snprintf(what, sizeof(what),
			 "fill auto layout=%s pgmap=%s threads=%d split=chunked/%lu clock=%s "
			 "records=%lu (rounds %lu, streaming won %lu, expected %lu)%s",
			 layout, tname, threads, chunk_pages, clock_names[ci], nr, a.rounds,
			 a.stream_rounds, want, !ok ? ": differs from the slow path" :
			 a.rounds < 2 ? ": no round after chunk 0, the check proved nothing" :
			 a.stream_rounds == want ? "" : threads > 1 ?
			 ": a round beside the others' verdict turned it for less than a quarter" :
			 ": one thread's later rounds did not turn the verdict");
		report(ok && a.rounds >= 2 && a.stream_rounds == want, what);
	}
	auto_memo = memo;
	auto_late_llcs = late_llcs;
}

/*
 * Clocks whose pieces tie within a quarter (template at 50, streaming at 45
 * or 55) and whose spans do not (the other mode at 70 against 50), and two
 * whose pieces decide, with spans that would stream: decisively (streaming
 * at 150: the round ends after its first pair) and past the quarter (70).
 */
static uint64_t span_clock(uint64_t stream_piece_ns, uint64_t tmpl_span_ns, uint64_t stream_span_ns)
{
	if (script_read() % 2)
		script_now += !auto_timing_span ? (auto_timing_streaming ? stream_piece_ns : 50) :
			      auto_timing_streaming ? stream_span_ns : tmpl_span_ns;
	return script_now;
}

static uint64_t span_template_clock(void)
{
	return span_clock(45, 50, 70);
}

static uint64_t span_stream_clock(void)
{
	return span_clock(55, 70, 50);
}

static uint64_t span_decisive_clock(void)
{
	return span_clock(150, 70, 50);
}

/* template's piece ahead by more than the quarter (50 against 70): no tie */
static uint64_t span_quarter_clock(void)
{
	return span_clock(70, 70, 50);
}

/*
 * --auto-span (one thread, no memo, no late rounds; spans of 256 struct
 * pages, which fit with their lead-in after a round in the chunks here,
 * 2560 records, 5120 of order 9 whose pieces are a compound page, 16384
 * deduplicated): every
 * round whose pieces tie times its spans, and they decide against the
 * pieces; a round the pieces decide, early or by more than the quarter,
 * times none.
 */
static void verify_auto_span(char *buf, const char *ref, size_t size, unsigned long nr,
			     int order, int pre, const char *layout, const char *tname)
{
	static uint64_t (*const clocks[])(void) = {
		span_template_clock, span_stream_clock, span_decisive_clock, span_quarter_clock,
	};
	static const char *const clock_names[] = {
		"span-template", "span-stream", "span-decisive", "span-quarter",
	};
	unsigned long memo = auto_memo, late_llcs = auto_late_llcs, span = auto_span;
	struct page *map = (struct page *)(buf + GUARD);
	char what[400];

	/*
	 * deduplicated: pieces and spans of two compound pages, and chunks of
	 * 16384 PFNs, so that chunk 0, which starts at BASE_PFN, is whole (one
	 * of 10240 would leave it only room for its round)
	 */
	chunk_req_pages = the_pgmap.vmemmap_optimized ? 16384 : check_chunk(2560, 5120);
	auto_memo = 0;
	auto_late_llcs = 0;
	auto_span = 256;
	for (int ci = 0; ci < 4; ci++) {
		struct auto_stats a = { 0 };
		unsigned long want_spans, want_stream;
		int ok, right;

		memset(buf, POISON, size + 2 * GUARD);
		atomic_fetch_add(&clock_gen, 1);
		run_auto_fill(pre, clocks[ci], 1, map, nr, order, READBACK_NONE, PREP_NONE, &a);
		ok = !memcmp(buf, ref, size + 2 * GUARD) && a.records == nr;
		want_spans = ci < 2 ? a.rounds : 0;
		want_stream = ci == 1 ? a.rounds : 0;
		right = a.rounds >= 2 && a.spans == want_spans && a.stream_rounds == want_stream;
		snprintf(what, sizeof(what),
			 "fill auto layout=%s pgmap=%s threads=1 split=chunked/%lu clock=%s span=%lu "
			 "records=%lu (rounds %lu, spans %lu, streaming won %lu, expected %lu)%s",
			 layout, tname, chunk_pages, clock_names[ci], auto_span_records(&the_pgmap), nr,
			 a.rounds, a.spans, a.stream_rounds, want_stream,
			 !ok ? ": differs from the slow path" :
			 a.rounds < 2 ? ": fewer than two rounds, the check proved nothing" :
			 a.spans != want_spans ? (ci < 2 ? ": a tie did not time its spans" :
						  ": a decided round timed spans") :
			 right ? "" : ": the spans did not decide a tie");
		report(ok && right, what);
	}
	auto_memo = memo;
	auto_late_llcs = late_llcs;
	auto_span = span;
}

/*
 * One range of verify_auto_memo(): poisoned, filled by auto on one thread
 * under the streaming-decisive clock; 1 if it matches the slow path's.
 */
static int memo_range(char *buf, const char *ref, size_t size, unsigned long nr, int order,
		      int pre, int readback, struct auto_stats *stats)
{
	memset(buf, POISON, size + 2 * GUARD);
	run_auto_fill(pre, streaming_decisive_clock, 1, (struct page *)(buf + GUARD), nr, order,
		      readback, PREP_NONE, stats);
	return !memcmp(buf, ref, size + 2 * GUARD) && stats->records == nr;
}

/*
 * --auto-memo: with a memory of 3, seven ranges of one class run the rounds
 * of one range in the first, fourth and seventh and none in the others, which
 * follow the remembered verdicts (streaming, the clock's); a range of
 * another class (walked next) learns for itself, and so does one of half
 * the size; with an age of 0 ns no verdict serves the next range.
 */
static void verify_auto_memo(char *buf, const char *ref, size_t size, unsigned long nr, int order,
			     int pre, const char *layout, const char *tname)
{
	unsigned long memo = auto_memo, per_range;
	struct auto_stats a = { 0 }, walked = { 0 }, half = { 0 }, aged = { 0 };
	int ok, all_streamed = 1;
	char what[400];

	chunk_req_pages = check_chunk(2048, 4096);
	auto_memo = 0;
	ok = memo_range(buf, ref, size, nr, order, pre, READBACK_NONE, &a);
	per_range = a.rounds;
	auto_memo = 3;
	auto_memo_reset();
	a = (struct auto_stats){ 0 };
	for (int r = 0; r < 7; r++) {
		struct auto_stats one = { 0 };

		ok = memo_range(buf, ref, size, nr, order, pre, READBACK_NONE, &one) && ok;
		if (!one.rounds)
			all_streamed = all_streamed && one.streamed == nr;
		a.rounds += one.rounds;
		a.memo_rounds += one.memo_rounds;
	}
	ok = memo_range(buf, ref, size, nr, order, pre, READBACK_WALK, &walked) && ok;
	/* half the range: its records differ from ref's, only its rounds count */
	run_auto_fill(pre, streaming_decisive_clock, 1, (struct page *)(buf + GUARD), nr / 2, order,
		      READBACK_NONE, PREP_NONE, &half);
	/* a range that learns, and one after it once its verdicts are too old */
	auto_memo_reset();
	ok = memo_range(buf, ref, size, nr, order, pre, READBACK_NONE, &aged) && ok;
	auto_memo_age_ns = 0;
	aged = (struct auto_stats){ 0 };
	ok = memo_range(buf, ref, size, nr, order, pre, READBACK_NONE, &aged) && ok;
	auto_memo_age_ns = AUTO_MEMO_AGE_NS;
	auto_memo = memo;
	auto_memo_reset();
	snprintf(what, sizeof(what),
		 "fill auto layout=%s pgmap=%s threads=1 split=chunked/%lu clock=streaming-decisive "
		 "memo=3 records=%lu "
		 "(rounds per range %lu; seven ranges: %lu rounds, %lu remembered; walked: %lu; "
		 "half the size: %lu, %lu remembered; too old: %lu, %lu remembered)%s",
		 layout, tname, chunk_pages, nr, per_range, a.rounds, a.memo_rounds, walked.rounds,
		 half.rounds, half.memo_rounds, aged.rounds, aged.memo_rounds,
		 !ok ? ": differs from the slow path" :
		 a.rounds != 3 * per_range || a.memo_rounds != 4 * per_range ?
		 ": rounds not remembered for exactly the next two ranges" :
		 !all_streamed ? ": a remembered verdict not followed" :
		 walked.rounds != per_range ? ": a verdict served another class" :
		 !half.rounds || half.memo_rounds ? ": a verdict served another size" :
		 aged.rounds != per_range || aged.memo_rounds ? ": a verdict served past its age" :
		 "");
	report(ok && per_range && a.rounds == 3 * per_range && a.memo_rounds == 4 * per_range &&
	       all_streamed && walked.rounds == per_range && half.rounds && !half.memo_rounds &&
	       aged.rounds == per_range && !aged.memo_rounds, what);
}

/*
 * The round log the replay reads (probe_rounds=, bench-results rounds): two
 * ranges on one thread under the flipping clock, every range learning.
 * Each round must carry its range's fill and, as the mode it began under,
 * the verdict of the round before it in that fill (none for the first): on
 * one thread that is what the other chunks followed.
 */
static void verify_auto_log(char *buf, const char *ref, size_t size, unsigned long nr, int order,
			    int pre, const char *layout, const char *tname)
{
	unsigned long memo = auto_memo, late_llcs = auto_late_llcs, n, fills = 0, wrong = 0;
	unsigned long in_fill = 0, most = 0;
	struct auto_stats a = { 0 };
	const struct auto_round_record *r;
	int ok = 1, prev = -1, seen[2] = { 0, 0 };
	char what[300];

	chunk_req_pages = check_chunk(2048, 4096);
	auto_memo = 0;
	auto_late_llcs = 0;
	auto_log_reset();
	for (int f = 0; f < 2; f++) {
		memset(buf, POISON, size + 2 * GUARD);
		atomic_fetch_add(&clock_gen, 1);
		run_auto_fill(pre, flip_clock, 1, (struct page *)(buf + GUARD), nr, order,
			      READBACK_NONE, PREP_NONE, &a);
		ok = ok && !memcmp(buf, ref, size + 2 * GUARD);
	}
	auto_memo = memo;
	auto_late_llcs = late_llcs;
	r = auto_log(&n);
	for (unsigned long i = 0; i < n; i++) {
		/* an early end logged its second pair as 0: the first decided */
		int early = !r[i].tmpl_ns[1] && !r[i].stream_ns[1];
		uint64_t t[2] = { r[i].tmpl_ns[0], early ? r[i].tmpl_ns[0] : r[i].tmpl_ns[1] };
		uint64_t st[2] = { r[i].stream_ns[0], early ? r[i].stream_ns[0] : r[i].stream_ns[1] };

		if (!i || r[i].fill != r[i - 1].fill) {
			fills++;
			prev = -1;
			in_fill = 0;
		}
		if (++in_fill > most)
			most = in_fill;
		wrong += r[i].fill != fills - 1 || r[i].before != prev;
		if (r[i].before >= 0)
			seen[r[i].before] = 1;
		prev = auto_round_streams(t, st, 0, -1);
	}
	snprintf(what, sizeof(what),
		 "fill auto layout=%s pgmap=%s threads=1 split=chunked/%lu clock=flipping "
		 "records=%lu: round log (rounds %lu, logged %lu, fills %lu, wrong %lu)%s",
		 layout, tname, chunk_pages, nr, a.rounds, n, fills, wrong,
		 !ok ? ": differs from the slow path" : n != a.rounds || fills != 2 ?
		 ": rounds or fills not logged as run" : wrong ?
		 ": a round logged another fill or mode before it than it ran in" :
		 !seen[0] && !seen[1] ? ": no round after another, the check proved nothing" :
		 most >= 3 && (!seen[0] || !seen[1]) ?
		 ": the clock did not flip, the check proved nothing" : "");
	/* three rounds in a fill: the second and third begin under both modes */
	report(ok && n == a.rounds && fills == 2 && !wrong && (seen[0] || seen[1]) &&
	       (most < 3 || (seen[0] && seen[1])), what);
}

static void verify_auto(char *buf, const char *ref, size_t size, unsigned long nr, int order,
			int pre, const char *layout, const char *tname)
{
	static const int thread_counts[] = { 1, 2, 3 };
	/* chunks of 2048 and 4096 records: rounds fit in both at order 0 (two
	 * lead-ins and four pieces of 256 records), in the larger at order 9
	 * (of 512 records) */
	static const unsigned long chunk_reqs[] = { 2048, 4096 };
	/* flip 0: the real clock; 1: rounds alternate; 2, 3: template or
	 * streaming decisively faster, rounds end after their first pair; 4: a
	 * tie with each round's first template piece disturbed */
	static uint64_t (*const clocks[])(void) = {
		now_ns, flip_clock, template_decisive_clock, streaming_decisive_clock,
		disturbed_clock,
	};
	static const char *const clock_names[] = {
		"real", "flipping", "template-decisive", "streaming-decisive",
		"disturbed-template",
	};
	struct page *map = (struct page *)(buf + GUARD);
	unsigned long late_llcs = auto_late_llcs;
	char what[400];

	/* the scripted clocks' verdicts hold before the late chunk; on a CPU
	 * with an LLC small enough to reach it here they would not */
	auto_late_llcs = 0;
	for (int ti = 0; ti < 3; ti++)
	for (int ci = 0; ci < 2; ci++)
	for (int flip = 0; flip < 5; flip++)
	for (int walk = READBACK_NONE; walk <= READBACK_WALK; walk++) {
		struct auto_stats a = { 0 };
		int ok, learns, right, hinted;

		/* deduplicated: 4096 too small, 8192 with room (check_chunk()) */
		chunk_req_pages = check_chunk(chunk_reqs[ci], chunk_reqs[ci]);
		memset(buf, POISON, size + 2 * GUARD);
		atomic_store(&flip_stream_rounds, 0);
		atomic_store(&flip_round_order, 0);
		/* walk: a read-back fill (each chunk, or the whole range after the
		 * fill), whose hint makes auto read back every probe piece */
		atomic_fetch_add(&clock_gen, 1);
		auto_log_reset();
		run_auto_fill(pre, clocks[flip], thread_counts[ti], map, nr, order, walk, PREP_NONE,
			      &a);
		ok = !memcmp(buf, ref, size + 2 * GUARD) && a.records == nr;
		/*
		 * Where a round fits in a chunk, the flipping clock must have made
		 * the range mix both modes, or this check proved nothing about
		 * switching between chunks; where none fits, the range is too small
		 * to learn from and must be template only.
		 */
		learns = chunk_pages >= auto_round_room(&the_pgmap, 0, walk);
		if (!learns)
			right = !a.rounds && !a.streamed;
		else if (flip == 4)
			right = a.rounds && !a.stream_rounds && a.pieces == a.rounds * AUTO_PIECES;
		else if (flip >= 2)
			/* the rounds beside other threads' writes run both pairs */
			right = a.rounds && a.stream_rounds == (flip == 3 ? a.rounds : 0) &&
				a.pieces == a.rounds * AUTO_PIECES / 2 +
					    rounds_beside_others(thread_counts[ti]) *
					    AUTO_PIECES / 2;
		else
			right = !flip || (a.rounds >= 2 && a.streamed && a.streamed < a.records &&
					  a.stream_rounds == atomic_load(&flip_stream_rounds) &&
					  atomic_load(&flip_round_order) == expected_round_order());
		/* no read-back where the range outgrows this machine's LLC */
		hinted = walk && auto_walk_share(memmap_written_pages(nr, &the_pgmap) * 64,
						 llc_bytes());
		right = right && a.walked == (hinted ? a.pieces : 0) &&
			a.pieces >= a.rounds * AUTO_PIECES / 2 && a.pieces <= a.rounds * AUTO_PIECES;
		snprintf(what, sizeof(what),
			 "fill auto layout=%s pgmap=%s threads=%d split=chunked/%lu clock=%s walk=%d "
			 "records=%lu (rounds %lu, streamed %lu, pieces walked %lu)%s", layout, tname,
			 thread_counts[ti], chunk_pages, clock_names[flip],
			 walk, nr, a.rounds,
			 a.streamed, a.walked,
			 !ok ? ": differs from the slow path" : right ? "" :
			 a.walked != (hinted ? a.pieces : 0) ? ": probe pieces not walked as hinted" :
			 !learns ? ": learned where no round fits" : flip == 4 ?
			 ": one disturbed template piece ended a round with streaming" : flip >= 2 ?
			 ": rounds did not end with the faster mode at a decisive first pair "
			 "(or ended early beside other threads' writes)" :
			 atomic_load(&flip_round_order) != expected_round_order() ?
			 ": a round timed its pieces out of the --auto-order order" :
			 ": did not mix the modes as the clock said");
		report(ok && right, what);
	}
	auto_late_llcs = late_llcs;
}

/*
 * The pieces auto_fill_chunk() hands to the fill functions, logged instead
 * of written: a round must tile its chunk, every record written once, in
 * order, and count exactly what it writes.  The memory checks above cannot
 * see a piece that runs past its count when a later piece writes the same
 * records again (the stream-first order's first piece once streamed the
 * whole chunk, and the rest wrote it again).
 */
#define TILE_LOG 32
static struct tile { unsigned long start, nr; int streamed; } tile_log[TILE_LOG];
static unsigned long tile_n;

static void tile_record(const struct fill_job *j, int streamed)
{
	if (tile_n < TILE_LOG)
		tile_log[tile_n] = (struct tile){ j->start_pfn, j->nr_pages, streamed };
	tile_n++;
}

static void tile_template(const struct fill_job *j)
{
	tile_record(j, 0);
}

static void tile_stream(const struct fill_job *j)
{
	tile_record(j, 1);
}

static void tile_drain(void)
{
}

/*
 * The walk hint's reads under --auto-walk-share aged: a streaming piece read
 * back right after it was written, and for each template piece as many lines
 * past the round (which no piece of the round writes), inside the chunk.
 */
static unsigned long tile_round_end, tile_chunk_end, tile_ahead_reads;
static const char *tile_read_fault;

static unsigned long tile_walk(const struct fill_job *j)
{
	const struct tile *last = tile_n && tile_n <= TILE_LOG ? &tile_log[tile_n - 1] : NULL;

	if (last && last->streamed && j->start_pfn == last->start && j->nr_pages == last->nr)
		return 0;
	if (j->start_pfn < tile_round_end)
		tile_read_fault = last && !last->streamed && j->start_pfn == last->start ?
				  "read a template piece back instead of the lines ahead" :
				  "read lines the round writes";
	else if (j->start_pfn + j->nr_pages > tile_chunk_end)
		tile_read_fault = "read past the chunk";
	else
		tile_ahead_reads++;
	return 0;
}

/* why the logged pieces do not tile [start, start + nr), or NULL */
static const char *tile_fault(unsigned long start, unsigned long nr, unsigned int order,
			      const struct auto_stats *a)
{
	unsigned long at = start, streamed = 0;

	if (tile_n > TILE_LOG)
		return "more pieces than a round writes";
	for (unsigned long i = 0; i < tile_n; i++) {
		const struct tile *t = &tile_log[i];

		if (t->start != at)
			return t->start < at ? "a piece wrote records another piece wrote" :
					       "a piece left records unwritten";
		if (!t->nr || t->nr % (1UL << order))
			return "a piece of no or part of a compound page";
		at += t->nr;
		streamed += t->streamed ? t->nr : 0;
	}
	if (at != start + nr)
		return at > start + nr ? "wrote past the chunk" : "left the chunk's end unwritten";
	if (a->records != nr || a->streamed != streamed)
		return "counted other records than it wrote";
	return NULL;
}

static void verify_auto_tiles(void)
{
	static uint64_t (*const clocks[])(void) = {
		template_decisive_clock, streaming_decisive_clock, late_tie_clock,
	};
	static const char *const clock_names[] = {
		"template-decisive", "streaming-decisive", "tie",
	};
	/* without the walk hint, and with it read ahead (--auto-walk-share aged) */
	static const struct auto_fns fns[2] = {
		{ tile_template, tile_stream, tile_drain, NULL, 0, AUTO_NO_LATE_CHUNK, 0, 0, 0 },
		{ tile_template, tile_stream, tile_drain, tile_walk, AUTO_WALK_SHARE_ONE,
		  AUTO_NO_LATE_CHUNK, 0, 0, 0 },
	};
	int stream_first = auto_stream_first, first_lead = auto_first_lead;
	int walk_rule = auto_walk_rule;
	char what[320];

	for (int aged = 0; aged < 2; aged++)
	for (int lo = 0; lo < 3; lo++)
	for (size_t so = 0; so < n_auto_orders; so++)
	for (int ci = 0; ci < 3; ci++)
	for (unsigned long idx = 0; idx < 4; idx++)
	for (int size = 0; size < 4; size++) {
		static const char *const names[] = { "o0", "o9", "o9dedup" };
		struct dev_pagemap pgmap = layout_pgmap(find_layout(names[lo]), the_pgmap.type);
		unsigned int order = (unsigned int)pgmap.vmemmap_shift;
		unsigned long unit = 1UL << order, round, nr;
		struct fill_job chunk;
		int want_round;
		struct auto_stats a;
		const char *fault;

		auto_stream_first = auto_orders[so].stream_first;
		auto_first_lead = auto_orders[so].first_lead;
		auto_walk_rule = aged ? AUTO_WALK_AGED : walk_rule;
		round = auto_round_room(&pgmap, idx, aged);
		/* one page short of a round, a round exactly, a page more, four rounds */
		nr = size == 0 ? round - unit : size == 1 ? round : size == 2 ? round + unit : 4 * round;
		want_round = size && auto_probe_chunk(idx, 0);
		chunk = (struct fill_job){
			.base_pfn = BASE_PFN, .start_pfn = BASE_PFN + 4 * round, .nr_pages = nr,
			.order = order, .pgmap = &pgmap, .bug = bug,
		};
		auto_reset();
		atomic_fetch_add(&clock_gen, 1);
		tile_n = 0;
		tile_chunk_end = chunk.start_pfn + nr;
		tile_round_end = chunk.start_pfn + auto_round_records(&pgmap, idx);
		tile_ahead_reads = 0;
		tile_read_fault = NULL;
		auto_fill_chunk(&chunk, idx, &fns[aged], clocks[ci]);
		a = auto_stats();
		fault = tile_fault(chunk.start_pfn, nr, chunk.order, &a);
		if (!fault)
			fault = tile_read_fault;
		/* one read ahead per template piece, that is per pair */
		if (!fault && aged && tile_ahead_reads != a.pieces / 2)
			fault = "not one read ahead per template piece";
		if (!fault && !a.rounds != !want_round)
			fault = want_round ? "no round where one fits" : "a round where none fits";
		snprintf(what, sizeof(what),
			 "fill auto tiles its chunk%s: order=%u%s %s clock=%s chunk=%lu records=%lu "
			 "(pieces %lu, rounds %lu, streamed %lu)%s%s", aged ? ", walked, aged" : "",
			 order, pgmap.vmemmap_optimized ? " dedup" : "", auto_orders[so].name,
			 clock_names[ci], idx, nr, tile_n, a.rounds, a.streamed,
			 fault ? ": " : "", fault ? fault : "");
		report(!fault, what);
	}
	auto_stream_first = stream_first;
	auto_first_lead = first_lead;
	auto_walk_rule = walk_rule;
	auto_reset();
}

/*
 * Which chunks start with a round (patch 11's memmap_init_auto_is_probe_chunk()),
 * from a table written out apart from auto.c: before any verdict every chunk,
 * since on a node with a CPU per chunk all of them are taken at once; after
 * one, chunk 0 and the powers of two from 2 on.
 */
static void verify_auto_schedule(void)
{
	unsigned long wrong = 0, first = 0;
	char what[200];

	for (unsigned long c = 0; c < 130; c++) {
		int pow2 = c == 2;

		for (unsigned long p = 4; p <= c; p *= 2)
			pow2 |= p == c;
		for (int learned = 0; learned < 2; learned++)
			if (auto_probe_chunk(c, learned) != (!learned || c == 0 || pow2)) {
				if (!wrong++)
					first = c;
			}
	}
	snprintf(what, sizeof(what), "auto's rounds: every chunk before a verdict, 0, 2, 4 ... "
		 "after one (%lu wrong)", wrong);
	if (wrong)
		snprintf(what + strlen(what), sizeof(what) - strlen(what),
			 ": the first chunk %lu", first);
	report(!wrong, what);
}

/* The share of a piece's read-back the candidate walk hint counts (issue 33). */
static void verify_auto_walk_share(void)
{
	int rule = auto_walk_rule;
	unsigned long aged, in_llc, half_llc, past_half, at_llc, four_llc, unknown, unknown_cap;
	unsigned long cap, past_cap;
	char what[360];

	/* aged reads ahead at every size */
	auto_walk_rule = AUTO_WALK_AGED;
	aged = auto_walk_share(32UL << 20, 8UL << 20);
	/* the rest is patch 11's rule, whatever --auto-walk-share says */
	auto_walk_rule = AUTO_WALK_CAPPED;
	in_llc = auto_walk_share(2UL << 20, 8UL << 20);
	half_llc = auto_walk_share(4UL << 20, 8UL << 20);
	past_half = auto_walk_share((4UL << 20) + 64, 8UL << 20);
	at_llc = auto_walk_share(8UL << 20, 8UL << 20);
	four_llc = auto_walk_share(32UL << 20, 8UL << 20);
	/* within half a 32 MiB LLC: read back up to the cap only */
	cap = auto_walk_share(AUTO_WALK_MAX_BYTES, 32UL << 20);
	past_cap = auto_walk_share(AUTO_WALK_MAX_BYTES + 64, 32UL << 20);
	unknown_cap = auto_walk_share(AUTO_WALK_MAX_BYTES, 0);
	unknown = auto_walk_share(32UL << 20, 0);

	auto_walk_rule = rule;
	snprintf(what, sizeof(what), "auto walk share: range of a quarter of the LLC %lu, half %lu, "
		 "one record more %lu, the LLC's size %lu, 4 x the LLC %lu; of a 32 MiB LLC, %lu "
		 "bytes %lu, one record more %lu; LLC unknown, %lu bytes %lu, 32 MiB %lu; aged at "
		 "4 x the LLC %lu (want %d, %d, 0, 0, 0; %d, 0; %d, 0; %d)", in_llc, half_llc,
		 past_half, at_llc, four_llc, AUTO_WALK_MAX_BYTES, cap, past_cap,
		 AUTO_WALK_MAX_BYTES, unknown_cap, unknown, aged, AUTO_WALK_SHARE_ONE,
		 AUTO_WALK_SHARE_ONE, AUTO_WALK_SHARE_ONE, AUTO_WALK_SHARE_ONE, AUTO_WALK_SHARE_ONE);
	report(in_llc == AUTO_WALK_SHARE_ONE && half_llc == AUTO_WALK_SHARE_ONE && !past_half &&
	       !at_llc && !four_llc && cap == AUTO_WALK_SHARE_ONE && !past_cap &&
	       unknown_cap == AUTO_WALK_SHARE_ONE && !unknown && aged == AUTO_WALK_SHARE_ONE, what);
}

int cmd_verify(struct opts *o)
{
	int avx512 = has_avx512f(), clzero = has_clzero();
	/* struct pages written, as run's sizes: o9dedup's range spans four times the PFNs */
	size_t size = o->verify_size & ~32767UL;
	size_t most = layout_pfns(find_layout("o9dedup"), size) * 64;
	char *buf, *ref, what[400];
	static const char *layouts[] = { "o0", "o9", "o9pre", "o9dedup" };
	static const int types[] = { MEMORY_DEVICE_FS_DAX, MEMORY_DEVICE_PRIVATE };
	static const int thread_counts[] = { 1, 2, 3 };

	if (!size)
		die("--size must be at least 32 KiB%s", "");
	/* every range learns, so that each check sees its own rounds;
	 * verify_auto_memo() checks the remembered verdicts */
	auto_memo = 0;
	/* the checks count their rounds' pieces without spans; verify_auto_span()
	 * times its own */
	auto_span = 0;
	alloc_scratch();
	verify_auto_walk_share();
	verify_auto_schedule();
	verify_auto_tiles();
	buf = alloc_buf(most + 2 * GUARD, 1);
	ref = malloc(most + 2 * GUARD);
	if (!ref)
		die("out of memory%s", "");
	for (int ty = 0; ty < 2; ty++) {
		the_pgmap.type = types[ty];
		for (int li = 0; li < 4; li++) {
			const struct layout *lay = find_layout(layouts[li]);
			int pre = lay->pre, order = (int)lay->order;
			struct page *map = (struct page *)(buf + GUARD);
			unsigned long nr = layout_pfns(lay, size);
			size_t bytes = nr * 64;
			const char *tname = types[ty] == MEMORY_DEVICE_PRIVATE ? "private" : "fsdax";

			set_layout(lay);
			memset(buf, POISON, bytes + 2 * GUARD);
			run_fill(slow_memmap_init_zone_device, 1, map, nr, order, 0, PREP_NONE, SPLIT_EVEN);
			memcpy(ref, buf, bytes + 2 * GUARD);
			snprintf(what, sizeof(what), "%s/%s", layouts[li], tname);
			check_reference(map, nr, order, what);
			for (size_t f = 0; f < n_fill_strategies; f++) {
				const struct fill_strategy *fs = &fill_strategies[f];

				if ((fs->needs_avx512 && !avx512) || fs->placement)
					continue;	/* auto-* run the template/movntdq functions */
				if (fs->learns) {
					verify_auto(buf, ref, bytes, nr, order, pre, layouts[li], tname);
					verify_auto_late(buf, ref, bytes, nr, order, pre, layouts[li],
							 tname);
					verify_auto_memo(buf, ref, bytes, nr, order, pre, layouts[li],
							 tname);
					verify_auto_log(buf, ref, bytes, nr, order, pre, layouts[li],
							tname);
					verify_auto_switch(buf, ref, bytes, nr, order, pre,
							   layouts[li], tname);
					verify_auto_span(buf, ref, bytes, nr, order, pre, layouts[li],
							 tname);
					continue;
				}
				for (int ti = 0; ti < 3; ti++)
				for (int xi = 0; xi < 3; xi++) {
					int threads = thread_counts[ti];
					int split = xi ? SPLIT_CHUNKED : SPLIT_EVEN;
					char sname[32] = "even";

					/* chunk sizes that are not multiples of a compound page:
					 * 100 pages -> 512, 700 -> 1024 (uneven last chunk) */
					chunk_req_pages = xi == 1 ? 100 : 700;
					memset(buf, POISON, bytes + 2 * GUARD);
					run_fill(pre ? fs->pre : fs->fn, threads, map, nr, order, 0, PREP_NONE, split);
					if (split == SPLIT_CHUNKED)
						snprintf(sname, sizeof(sname), "chunked/%lu", chunk_pages);
					int ok = !memcmp(buf, ref, bytes + 2 * GUARD);
					size_t at = 0;

					if (!ok)
						while (at < bytes + 2 * GUARD && buf[at] == ref[at])
							at++;
					snprintf(what, sizeof(what),
						 "fill %s layout=%s pgmap=%s threads=%d split=%s records=%lu%s",
						 fs->name, layouts[li], tname, threads, sname, nr,
						 ok ? "" : " (first differing byte ");
					if (!ok) {
						long off = (long)at - GUARD;

						snprintf(what + strlen(what), sizeof(what) - strlen(what),
							 "at record %ld offset %ld)", off >= 0 ? off / 64 : -1,
							 off >= 0 ? off % 64 : off);
					}
					report(ok, what);
				}
			}
		}
	}

	/* clearing: zeros inside, poison untouched outside */
	for (size_t c = 0; c < n_clear_methods; c++) {
		const struct clear_method *m = &clear_methods[c];
		static const size_t units[] = { 4096, 2UL << 20, 0 };

		if (!cpu_ok(m->needs, avx512, clzero))
			continue;
		for (int u = 0; u < 3; u++)
		for (int fp = FAULT_FIRST; fp <= (m->folio ? FAULT_LAST : FAULT_FIRST); fp++) {
			size_t unit = units[u] ? units[u] : size;
			char *r = buf + GUARD;
			int ok = 1;

			clear_fault = fp;
			memset(buf, POISON, size + 2 * GUARD);
			do_clear(m, r, size + (bug == BUG_CLEAR_OVERRUN && !m->folio ? 64 : 0), unit);
			for (size_t i = 0; i < size + 2 * GUARD; i++) {
				int inside = i >= GUARD && i < GUARD + size;

				unsigned char b = (unsigned char)buf[i];

				if ((inside && b != m->byte) || (!inside && b != POISON)) {
					ok = 0;
					break;
				}
			}
			snprintf(what, sizeof(what), "clear %s unit=%zu bytes=%zu%s", m->name, unit, size,
				 !m->folio ? "" : fp == FAULT_FIRST ? " fault=first" :
				 fp == FAULT_MIDDLE ? " fault=middle" : " fault=last");
			report(ok, what);
		}
	}
	printf("%s: %d failure(s)\n", failures ? "verify FAILED" : "verify passed", failures);
	return failures ? 1 : 0;
}
