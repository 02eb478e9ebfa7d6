/* auto.h - the learning `auto` policy (auto.c), replayed on the kernel's chunks. */
#ifndef MEMINIT_BENCH_AUTO_H
#define MEMINIT_BENCH_AUTO_H
#include <stddef.h>
#include <stdint.h>

#include "page.h"

#define AUTO_PROBE_RECORDS 256	/* default: at least 16 KiB of struct pages per piece */
#define AUTO_PIECES 4		/* per round: two template, two streaming (--auto-order) */
#define AUTO_MARGIN_DEN 32	/* streaming must be more than 1/32 faster */
#define AUTO_DECISIVE 2		/* a first pair this far apart ends the round */
/* rounds of chunks that start AUTO_LATE_LLCS x the LLC into the range keep
 * template only if its piece is more than 1/AUTO_LATE_MARGIN_DEN faster, and
 * do not end early with template */
#define AUTO_LATE_LLCS 2
#define AUTO_LATE_MARGIN_DEN 4
/*
 * On several threads a round from chunk 2 on times its pieces while the
 * other threads write in the verdict it began under, which makes the other
 * mode's piece look faster: such a round turns that verdict only if the
 * other mode's piece is more than 1/AUTO_SWITCH_MARGIN_DEN faster
 */
#define AUTO_SWITCH_MARGIN_DEN 4
#define AUTO_NO_LATE_CHUNK (~0UL)
/*
 * --auto-span: a round whose faster pieces are within 1/AUTO_SPAN_TIE_DEN of
 * each other times a span of AUTO_SPAN_RECORDS struct pages of each mode,
 * template first, and they decide (by the 1/32 margin), as patch 11's
 * MEMMAP_AUTO_SPAN_TIE and MEMMAP_AUTO_SPAN_PAGES (bench/README.md)
 */
#define AUTO_SPAN_TIE_DEN 4
#define AUTO_SPAN_RECORDS 4096

struct auto_fns {
	void (*tmpl)(const struct fill_job *);
	void (*stream)(const struct fill_job *);
	void (*drain)(void);
	/* the caller's hint that it walks the memmap next: each probe piece
	 * is read back as the walk reads it before its clock stops; NULL: none */
	unsigned long (*walk)(const struct fill_job *);
	/* of each piece's read-back time, the share the walk pays: /AUTO_WALK_SHARE_ONE */
	unsigned long walk_share;
	/* the first chunk whose rounds use the late margin (auto_late_chunk()) */
	unsigned long late_chunk;
	/* the range's class for --auto-memo (auto_memo_class()), and log2 of its
	 * memmap bytes: a verdict serves only ranges of its class and size */
	unsigned int memo_class, memo_size_log2;
	/* several threads share the range (AUTO_SWITCH_MARGIN_DEN) */
	int several_threads;
};
#define AUTO_WALK_SHARE_ONE 1024

/* --auto-probe: struct pages per probe piece, at least (AUTO_PROBE_RECORDS) */
extern unsigned long auto_probe_min;
/* --auto-lead: struct pages of template before each timed template piece
 * (the first lead-in of a round timed for auto_round_decided()) */
extern unsigned long auto_probe_lead;
/* --auto-span: struct pages per span, at least; 0: none (patch 11 before 2026-11-29) */
extern unsigned long auto_span;
/* for verify's clocks: the piece being timed is a span */
extern __thread int auto_timing_span;
/* the PFNs (records of the map) of a span: whole compound pages writing auto_span struct pages */
unsigned long auto_span_records(const struct dev_pagemap *pgmap);
/* --auto-probe-late: struct pages per piece in the rounds of chunk 2 on (0: as the first) */
extern unsigned long auto_probe_late;
/* --auto-late-llcs: AUTO_LATE_LLCS, 0 for no late margin (as patch 11 before 2026-11-27) */
extern unsigned long auto_late_llcs;
/* --auto-late-margin: AUTO_LATE_MARGIN_DEN, the late rounds' margin is 1/this */
extern unsigned long auto_late_margin_den;
/* --auto-switch-margin: AUTO_SWITCH_MARGIN_DEN, 0 for none (as patch 11 before 2026-11-28) */
extern unsigned long auto_switch_margin_den;
/* for verify: the LLC size auto assumes instead of the CPU's (0: the CPU's) */
extern size_t auto_llc_override;
/* for verify's clocks: the piece being timed on this thread is a streaming one */
extern __thread int auto_timing_streaming;
/* the chunk whose round this thread is timing (for verify's clocks) */
extern __thread unsigned long auto_timing_chunk;
/*
 * --auto-walk-share: what the walk hint counts of a piece's read-back: all of it
 * while the range fits in half the LLC and in AUTO_WALK_MAX_BYTES (or in the
 * latter where the LLC is unknown), none, no read-back, past that (capped,
 * patch 11's memmap_init_auto_walk_cached() since 2026-11-28: a guest may keep
 * far less of the LLC than cacheinfo reports, and test_hmm, the one owner that
 * sets the kernel's walk flag, maps 4 MiB of it at a time); the same without
 * the 4 MiB cap and all of it where the LLC is unknown (llc, patch 11 from
 * 2026-11-26 19:45 to 2026-11-28); all of it at every size (full, patch 11 until 2026-11-26);
 * all of it up to the LLC and LLC / range of it past it (fraction, until
 * 2026-11-26 19:45); at every size, each template piece charged a read of as
 * many lines past the round instead of its own read-back, zeroed as long ago
 * as the walk will find template's, and each streaming piece read back (aged,
 * a candidate: docs/series.md, "The first live sweeps on a Zen 3 VM")
 */
enum { AUTO_WALK_FULL, AUTO_WALK_LLC, AUTO_WALK_FRACTION, AUTO_WALK_AGED, AUTO_WALK_CAPPED };
#define AUTO_WALK_MAX_BYTES (4UL << 20)
extern int auto_walk_rule;
/* --auto-order: the pairs of a round from this one on time their streaming
 * piece first, then the lead-in and the template piece (2: none, lead-first,
 * as patch 11; 1: the second pair, second-stream-first; 0: both,
 * stream-first or, with auto_first_lead, lead-stream-first) */
extern int auto_stream_first;
/* --auto-order lead-stream-first: a timed template lead-in starts the round,
 * before the first streaming piece (the pairs' lead-ins are then untimed) */
extern int auto_first_lead;
/* the --auto-order names and the two settings each stands for */
struct auto_order {
	const char *name;
	int stream_first, first_lead;
};
extern const struct auto_order auto_orders[];
extern const size_t n_auto_orders;
/* the --auto-order in force, as its name ("info auto_order=", which the replay reads) */
const char *auto_order_name(void);

/*
 * --auto-memo N: a round's verdict also serves the same round slot (chunk 0,
 * 1, 2, 4, ...) of the next N - 1 ranges of its class and size (the same
 * power of two of memmap bytes), which run no round there; the Nth runs it
 * again, as does a range of another size, which also forgets the verdicts
 * of the size before.  AUTO_MEMO (patch 11's MEMMAP_AUTO_REUSE) by default;
 * 0 or 1: every range learns (patch 11 before 2026-11-27).
 */
#define AUTO_MEMO 8
/* a verdict serves ranges for a second at most (patch 11's MEMMAP_AUTO_MEMORY_AGE, HZ);
 * the kernel also keys it by node, which the bench, on one, need not */
#define AUTO_MEMO_AGE_NS 1000000000ULL
extern unsigned long auto_memo;
/* for verify: how long a verdict serves (AUTO_MEMO_AGE_NS) */
extern uint64_t auto_memo_age_ns;
#define AUTO_MEMO_CLASSES 16
#define AUTO_MEMO_SLOTS 66
/* what the kernel knows of a range before its init: where the memmap lives
 * (cold: in an altmap; else DRAM, just allocated), whether the rounds read
 * their pieces back (the walk hint within its cap), compound pages, more
 * than one thread */
unsigned int auto_memo_class(int cold, int walked, unsigned int order, int threads);
/* forget every remembered verdict */
void auto_memo_reset(void);

/* What auto did in the fills since auto_reset(), over all threads. */
struct auto_stats {
	unsigned long rounds;		/* probe rounds run */
	unsigned long stream_rounds;	/* rounds streaming won */
	unsigned long streamed;		/* records written with streaming stores */
	unsigned long records;		/* records written */
	/* what the probes measured, summed over the rounds: the faster piece
	 * of each mode, and the records of one piece */
	uint64_t probe_tmpl_ns;
	uint64_t probe_stream_ns;
	unsigned long probe_records;
	unsigned long walked;		/* probe pieces and spans read back for the walk hint */
	unsigned long pieces;		/* probe pieces timed */
	unsigned long memo_rounds;	/* rounds --auto-memo saved */
	unsigned long spans;		/* rounds settled by spans (--auto-span) */
};

/*
 * One probe round as it ran, for the replay (auto_replay.py), which judges
 * other rules on what each round measured: a rule's verdict differs from
 * round to round where the probes sit near its margin, which sums over the
 * rounds hide.
 */
struct auto_round_record {
	unsigned long chunk;		/* index of its chunk in the range */
	uint64_t lead_ns;		/* the first lead-in, per piece's worth */
	uint64_t tmpl_ns[2];		/* [1]: 0 if the round ended after one pair */
	uint64_t stream_ns[2];
	unsigned long fill;		/* the fill of the sample it ran in, from 0 */
	/*
	 * the verdict the other chunks followed when it began: -1 none yet,
	 * 0 template, 1 streaming; on several threads the mode the others
	 * were writing in while its pieces were timed
	 */
	int before;
	uint64_t span_ns[2];		/* its spans (--auto-span), template first; 0: none */
};
#define AUTO_LOG_ROUNDS 1024
/* forget the logged rounds (auto_reset() keeps them: a sample has several fills) */
void auto_log_reset(void);
/* the rounds logged since auto_log_reset(), the first AUTO_LOG_ROUNDS; *n: how many */
const struct auto_round_record *auto_log(unsigned long *n);

/* whether chunk starts with a round; learned: a round has published a verdict */
int auto_probe_chunk(unsigned long chunk, int learned);
/*
 * The sizes of a round, in PFNs (records of the map): whole compound pages,
 * each writing compound_nr_pages(pgmap) struct pages (a quarter of its PFNs
 * in layout o9dedup).  A probe piece of chunk:
 */
unsigned long auto_probe_records(const struct dev_pagemap *pgmap, unsigned long chunk);
/* a full probe round: two lead-ins and the four pieces */
unsigned long auto_round_records(const struct dev_pagemap *pgmap, unsigned long chunk);
/* what a round needs in its chunk: the round, and with the walk hint under
 * --auto-walk-share aged the lines its two template pieces read ahead */
unsigned long auto_round_room(const struct dev_pagemap *pgmap, unsigned long chunk, int walked);
/*
 * the round's verdict; late: its chunk is at or past the late chunk;
 * current: the verdict the other threads wrote in when it began (0 template,
 * 1 streaming), -1 where none or one thread
 */
int auto_round_streams(const uint64_t tmpl_ns[2], const uint64_t stream_ns[2], int late,
		       int current);
/* the first chunk of chunk_bytes of memmap whose rounds are late under an
 * LLC of llc bytes (0: unknown), or AUTO_NO_LATE_CHUNK */
unsigned long auto_late_chunk(size_t chunk_bytes, size_t llc);
/* whether the round's first pair of pieces decides it: one mode took
 * AUTO_DECISIVE times the other's time, and for streaming to win that way
 * the timed lead-in (lead_ns, per piece) too; late: only streaming wins that way */
int auto_round_decided(uint64_t lead_ns, uint64_t tmpl_ns, uint64_t stream_ns, int late);
/* of a piece's read-back, what a walk after a range of bytes pays (llc 0: unknown, all; 0: none) */
unsigned long auto_walk_share(size_t bytes, size_t llc);
void auto_reset(void);
struct auto_stats auto_stats(void);
/* Fill chunk number idx of a range (j->tpl, j->no_drain set as for any chunk). */
void auto_fill_chunk(const struct fill_job *j, unsigned long idx, const struct auto_fns *fn,
		     uint64_t (*clock)(void));
#endif
