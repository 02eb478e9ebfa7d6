/*
 * bench.h - what meminit-bench's driver files share: the options, the
 * machine helpers, the fill strategies and the thread pool that runs them,
 * the clear methods and fault kinds.  The record, and the declarations of
 * the strategies and of the replayed kernel code, are in page.h and auto.h.
 *
 *   main.c         commands: usage, dispatch, info
 *   options.c      the command line
 *   machine.c      CPU features, LLC size, buffers, THP backing, eviction
 *   fill_pool.c    thread pool, even and chunked split: one fill
 *   fill_run.c     fill strategies, layouts, the fill samples of run
 *   clear_fault.c  clear methods and fault kinds, their samples of run
 *   run.c          run mode: checks, info lines, the repetitions
 *   verify.c       verify mode
 */
#ifndef MEMINIT_BENCH_BENCH_H
#define MEMINIT_BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auto.h"
#include "page.h"

#define MAX_LIST 32
#define MAX_THREADS 64
#define BASE_PFN 0x1000000UL	/* the "device" starts at 64 GiB */
#define HUGE_2M (2UL << 20)

/* --------------------------------------------------------------- options.c */

struct opts {
	char *sizes[MAX_LIST], *threads[MAX_LIST], *layouts[MAX_LIST], *dests[MAX_LIST];
	char *fills[MAX_LIST], *clears[MAX_LIST], *faults[MAX_LIST], *splits[MAX_LIST];
	int n_sizes, n_threads, n_layouts, n_dests, n_fills, n_clears, n_faults, n_splits;
	size_t auto_altmap_min, auto_dram_min;	/* 0: LLC and 2 x LLC */
	int reps;
	size_t clear_size, fault_size, evict_bytes, verify_size, min_bytes;
};

void die(const char *fmt, const char *arg);
size_t parse_size(const char *s);
void defaults(struct opts *o);
int parse_opts(int argc, char **argv, struct opts *o);

/* --------------------------------------------------------------- machine.c */

/* Inline: the timed regions start and stop on these, and a call into
 * another file would add to every sample. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int has_clzero(void);
int has_avx512f(void);
int cpu_ok(int needs, int avx512, int clzero);
size_t llc_bytes(void);
void *alloc_buf(size_t len, int hugepage);
size_t anon_huge_bytes(void *addr);

extern unsigned char *evict_buf;
extern size_t evict_len;
extern volatile unsigned long sink;	/* what reads add up to, so they are not dropped */
void evict(void);

/* ------------------------------------------------------------- fill_pool.c */

typedef void (*fill_fn)(const struct fill_job *);

#define SPLIT_EVEN 0
#define SPLIT_CHUNKED 1

#define PREP_NONE 0
#define PREP_COLD 1		/* evict the caches */
#define PREP_WARM 2		/* evict, then zero the destination with normal stores */

#define READBACK_NONE 0
#define READBACK_CHUNK 1	/* each thread reads back every chunk it has just filled */
#define READBACK_WALK 2		/* the main thread walks the whole range once, after the fill */

extern unsigned long chunk_req_pages;	/* --chunk, in pages */
extern unsigned long chunk_pages, n_chunks;	/* of the last chunked fill */
extern int bug;				/* --bug: BUG_* */
extern struct dev_pagemap the_pgmap;
extern size_t scratch_bytes;		/* --movsb-block */
extern uint64_t last_cpu_ns;	/* CPU time of the calling thread in the last sample */

void alloc_scratch(void);
uint64_t run_fill(fill_fn fn, int threads, struct page *map, unsigned long nr_pages,
		  unsigned int order, int do_readback, int prep, int split);
uint64_t run_auto_fill(int pre, uint64_t (*clock)(void), int threads, struct page *map,
		       unsigned long nr_pages, unsigned int order, int do_readback, int prep,
		       struct auto_stats *learned);

/* -------------------------------------------------------------- fill_run.c */

struct fill_strategy {
	const char *name;
	fill_fn fn;		/* layouts o0, o9 and o9dedup */
	fill_fn pre;		/* layout o9pre */
	int needs_avx512;
	int placement;		/* auto-*: where the memmap lives (PLACE_*), else 0 */
	int learns;		/* auto: learns on the chunks it fills (auto.c) */
};

/* where the memmap lives, for the auto-* thresholds (fill_run.c) */
#define PLACE_ALTMAP 1
#define PLACE_DRAM 2
extern size_t auto_min[3];	/* threshold in memmap bytes, by placement */

extern const struct fill_strategy fill_strategies[];
extern const size_t n_fill_strategies;

const struct fill_strategy *find_fill(const char *name);
struct layout {
	const char *name;
	unsigned int order;
	int pre;		/* the fill's _pre function (fill_strategy.pre) */
	int dedup;		/* dev_pagemap.vmemmap_optimized */
};

const struct layout *find_layout(const char *name);
/* a pgmap of the given type with the layout's compound pages */
struct dev_pagemap layout_pgmap(const struct layout *l, enum memory_type type);
/* the_pgmap as the layout's init sees it */
void set_layout(const struct layout *l);
/* PFNs of a range whose init writes written_bytes of struct pages */
unsigned long layout_pfns(const struct layout *l, size_t written_bytes);
/* dedup_buf: layout o9dedup's buffer (run.c) */
void fill_samples(struct opts *o, int rep, char *buf, char *dedup_buf, int avx512);

/* ----------------------------------------------------------- clear_fault.c */

typedef void (*clear_fn)(void *, size_t, size_t);

struct clear_method {
	const char *name;
	clear_fn fn;
	int needs;		/* 1: avx512f, 2: clzero */
	unsigned char byte;	/* what the range holds afterwards */
	size_t folio;		/* folio methods: folio size (fn is NULL) */
	int php;		/* 1: 6.12 process_huge_page(), 0: folio_zero_user() extents */
};

extern const struct clear_method clear_methods[];
extern const size_t n_clear_methods;
extern int clear_fault;	/* fault subpage of each folio */

void do_clear(const struct clear_method *m, void *p, size_t len, size_t unit);
int parse_clear_case(const char *spec, const struct clear_method **m, size_t *unit);
void clear_samples(struct opts *o, int rep, char *buf, int avx512, int clzero);
void fault_samples(struct opts *o, int rep);

/* --------------------------------------------------------- run.c, verify.c */

int cmd_run(struct opts *o);
int cmd_verify(struct opts *o);

#endif
