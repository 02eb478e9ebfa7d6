/*
 * fill_pool.c - one fill of the records: the helper threads that persist
 * across samples, the even split into per-thread jobs, the chunked split of
 * the kernel's multithreaded init, and the learning auto run on its chunks.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct worker {
	pthread_t tid;
	fill_fn fn;
	struct fill_job job;
	int chunked;
	int readback;
	unsigned long sum;
	unsigned long arm;		/* under pool_lock: sample generation to join */
	_Atomic unsigned long ready;	/* generation it is spinning for */
	_Atomic unsigned long done;	/* last generation finished */
};

static unsigned long readback_job(const struct fill_job *j)
{
	const struct page *p = j->map + (j->start_pfn - j->base_pfn);
	unsigned long s = 0;

	/* what the page allocator reads first: flags and the refcount */
	for (unsigned long i = 0; i < j->nr_pages; i++)
		s += p[i].flags + (unsigned long)p[i]._refcount;
	return s;
}

static void readback(struct worker *w)
{
	w->sum = readback_job(&w->job);
}

static void sfence(void)
{
	asm volatile("sfence" ::: "memory");
}

/*
 * Chunked split (the kernel's multithreaded init, issue 6): the range is cut
 * at PFNs that are multiples of chunk_pages (rounded up to a whole number of
 * compound pages and pageblocks), and every thread pulls the next chunk from
 * an atomic counter until none is left.  Each thread drains its streaming
 * stores once, after its last chunk; the caller waits for all of them.
 */
#define PAGEBLOCK_NR_PAGES 512UL	/* pageblock_order 9 on x86-64 */

unsigned long chunk_req_pages = 32768;	/* --chunk: 128 MiB of device memory */
/* the learning auto's modes for this fill (run_chunks), and its clock */
static const struct auto_fns *learning;
static uint64_t (*learning_clock)(void);
static _Atomic unsigned long next_chunk;
static unsigned long chunk_first, chunk_end;
unsigned long chunk_pages, n_chunks;
int bug;

static unsigned long chunk_round(unsigned long want, unsigned int order)
{
	unsigned long align = 1UL << order;

	if (align < PAGEBLOCK_NR_PAGES)
		align = PAGEBLOCK_NR_PAGES;
	if (bug == BUG_CHUNK_ALIGN)
		align = 64;	/* forgets the compound/pageblock alignment */
	if (!want)
		want = 1;
	return (want + align - 1) / align * align;
}

static void setup_chunks(unsigned long start_pfn, unsigned long nr_pages, unsigned int order)
{
	chunk_pages = chunk_round(chunk_req_pages, order);
	chunk_first = start_pfn - start_pfn % chunk_pages;
	chunk_end = start_pfn + nr_pages;
	n_chunks = (chunk_end - 1) / chunk_pages - start_pfn / chunk_pages + 1;
	atomic_store_explicit(&next_chunk, 0, memory_order_relaxed);
}

static void run_chunks(struct worker *w)
{
	struct templates tpl;
	struct fill_job j = w->job;
	unsigned long c, first = j.start_pfn, s = 0;

	tpl.valid = 0;
	j.tpl = &tpl;
	j.no_drain = 1;
	while ((c = atomic_fetch_add_explicit(&next_chunk, 1, memory_order_relaxed)) < n_chunks) {
		unsigned long lo = chunk_first + c * chunk_pages, hi = lo + chunk_pages;

		j.start_pfn = lo < first ? first : lo;
		j.nr_pages = (hi > chunk_end ? chunk_end : hi) - j.start_pfn;
		if (learning)
			auto_fill_chunk(&j, c, learning, learning_clock);
		else
			w->fn(&j);
		if (w->readback == READBACK_CHUNK)
			s += readback_job(&j);
	}
	sfence();	/* the one drain of this thread */
	w->sum = s;
}

static void do_work(struct worker *w)
{
	if (w->chunked) {
		run_chunks(w);
		return;
	}
	w->fn(&w->job);
	if (w->readback == READBACK_CHUNK)
		readback(w);
}

/*
 * Helper threads persist across samples.  For a sample, the main thread
 * prepares the destination, wakes the helpers it needs, waits until each one
 * reports that it is running and spinning, and starts the clock when it
 * releases them: thread start-up and wake-up latency stay out of the timing.
 * (Arming them before a long preparation made them spin for milliseconds,
 * use up their share against the busy neighbours and get preempted just
 * before the start.)
 */
static struct worker pool[MAX_THREADS];
static int pool_threads = 1;	/* pool[0] is the main thread */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static _Atomic unsigned long go_gen;
static unsigned long gen;

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned long mine = 0;

	for (;;) {
		pthread_mutex_lock(&pool_lock);
		while (w->arm == mine)
			pthread_cond_wait(&pool_cond, &pool_lock);
		mine = w->arm;
		pthread_mutex_unlock(&pool_lock);
		atomic_store_explicit(&w->ready, mine, memory_order_release);
		while (atomic_load_explicit(&go_gen, memory_order_acquire) != mine)
			__builtin_ia32_pause();
		do_work(w);
		atomic_store_explicit(&w->done, mine, memory_order_release);
	}
	return NULL;
}

struct dev_pagemap the_pgmap = { .type = MEMORY_DEVICE_FS_DAX };
static void *scratch[MAX_THREADS];
size_t scratch_bytes = 4096;

/* Split nr_pages records into per-thread jobs aligned to compound pages. */
static void make_jobs(struct worker *w, int threads, struct page *map, unsigned long nr_pages,
		      unsigned int order)
{
	unsigned long unit = 1UL << order, units = nr_pages / unit, pfn = BASE_PFN;

	for (int t = 0; t < threads; t++) {
		unsigned long mine = units / threads + ((unsigned long)t < units % threads);

		memset(&w[t].job, 0, sizeof(w[t].job));
		w[t].job.map = map;
		w[t].job.base_pfn = BASE_PFN;
		w[t].job.start_pfn = pfn;
		w[t].job.nr_pages = mine * unit;
		w[t].job.order = order;
		w[t].job.zone_idx = ZONE_DEVICE_IDX;
		w[t].job.nid = 0;
		w[t].job.pgmap = &the_pgmap;
		w[t].job.bug = bug;
		w[t].job.scratch = scratch[t];
		w[t].job.scratch_bytes = scratch_bytes;
		pfn += mine * unit;
	}
}

uint64_t last_cpu_ns;	/* CPU time of the calling thread in the last sample */

/*
 * Zero with normal stores what the init will write, as a just-allocated DRAM
 * memmap is (PREP_WARM): with vmemmap optimisation only the struct pages
 * written of each compound page exist.
 */
static void zero_written(struct page *map, unsigned long nr_pages)
{
	unsigned long unit = 1UL << the_pgmap.vmemmap_shift, written = compound_nr_pages(&the_pgmap);

	if (written == unit) {
		warm_zero(map, nr_pages * 64);
		return;
	}
	for (unsigned long c = 0; c < nr_pages; c += unit)
		warm_zero(map + c, written * 64);
}

/*
 * Run fn over nr_pages records with `threads` threads after preparing the
 * destination; returns the elapsed ns from release to the last thread done.
 */
uint64_t run_fill(fill_fn fn, int threads, struct page *map, unsigned long nr_pages,
		  unsigned int order, int do_readback, int prep, int split)
{
	uint64_t t0, t1, c0;

	while (pool_threads < threads) {
		if (pthread_create(&pool[pool_threads].tid, NULL, worker_main, &pool[pool_threads]))
			die("pthread_create failed%s", "");
		pool_threads++;
	}
	the_pgmap.vmemmap_shift = order;
	if (split == SPLIT_CHUNKED) {
		/* every thread gets the whole range; run_chunks() hands out chunks */
		make_jobs(pool, 1, map, nr_pages, order);
		for (int t = 1; t < threads; t++) {
			pool[t].job = pool[0].job;
			pool[t].job.scratch = scratch[t];
		}
		setup_chunks(BASE_PFN, nr_pages, order);
	} else {
		make_jobs(pool, threads, map, nr_pages, order);
	}
	if (prep != PREP_NONE)
		evict();
	if (prep == PREP_WARM)
		zero_written(map, nr_pages);

	gen++;
	pthread_mutex_lock(&pool_lock);
	for (int t = 0; t < threads; t++) {
		pool[t].fn = fn;
		pool[t].readback = do_readback;
		pool[t].chunked = split == SPLIT_CHUNKED;
		pool[t].sum = 0;
		if (t)
			pool[t].arm = gen;
	}
	pthread_cond_broadcast(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
	for (int t = 1; t < threads; t++)
		while (atomic_load_explicit(&pool[t].ready, memory_order_acquire) != gen)
			__builtin_ia32_pause();

	t0 = now_ns();
	atomic_store_explicit(&go_gen, gen, memory_order_release);
	c0 = thread_cpu_ns();
	do_work(&pool[0]);
	last_cpu_ns = thread_cpu_ns() - c0;
	for (int t = 1; t < threads; t++)
		while (atomic_load_explicit(&pool[t].done, memory_order_acquire) != gen)
			__builtin_ia32_pause();
	if (do_readback == READBACK_WALK) {
		/* the caller's walk of the whole memmap, on one thread */
		struct fill_job whole = pool[0].job;
		uint64_t c1 = thread_cpu_ns();

		whole.start_pfn = BASE_PFN;
		whole.nr_pages = nr_pages;
		pool[0].sum += readback_job(&whole);
		last_cpu_ns += thread_cpu_ns() - c1;
	}
	t1 = now_ns();
	for (int t = 0; t < threads; t++)
		sink += pool[t].sum;
	return t1 - t0;
}

/* What the learning auto chooses between: the template copy and the kernel's
 * streaming backend (memcpy_nontemporal(): MOVNTDQ), by layout. */
static const struct auto_fns auto_fns = { fill_template, fill_movntdq, sfence, NULL, 0, 0, 0, 0, 0 };
static const struct auto_fns auto_fns_pre = { fill_template_pre, fill_movntdq_pre, sfence, NULL, 0, 0, 0, 0, 0 };

/*
 * One fill of the learning auto (auto.c) on the kernel's chunks, with its own
 * verdict and the given clock; adds what it did to *learned.
 */
uint64_t run_auto_fill(int pre, uint64_t (*clock)(void), int threads, struct page *map,
		       unsigned long nr_pages, unsigned int order, int do_readback, int prep,
		       struct auto_stats *learned)
{
	struct auto_fns fns = pre ? auto_fns_pre : auto_fns;
	struct auto_stats a;
	size_t llc = auto_llc_override ? auto_llc_override : llc_bytes();
	uint64_t ns;

	/*
	 * A fill that is read back gives auto the hint that the memmap is walked
	 * next.  As patch 11, the probes read each piece back only while the
	 * range fits in half the LLC and in 4 MiB: a walk in PFN order after a
	 * larger range misses on nearly every line, template's as streaming's,
	 * as the lines it has not yet reached are the least recently used and
	 * go first, the LLC is shared and not a true LRU, and a guest may keep
	 * far less of it than cacheinfo reports (--auto-walk-share).
	 */
	/* sizes as the kernel counts them: struct pages written (o9dedup: a quarter) */
	the_pgmap.vmemmap_shift = order;
	if (do_readback) {
		fns.walk_share = auto_walk_share(memmap_written_pages(nr_pages, &the_pgmap) * 64, llc);
		fns.walk = fns.walk_share ? readback_job : NULL;
	}
	/*
	 * Past twice the LLC, template pays for writing back the lines it
	 * dirtied, which no probe piece waits for (bench/README.md): rounds
	 * there keep template only if it is clearly faster.
	 */
	fns.late_chunk = auto_late_chunk(memmap_written_pages(chunk_round(chunk_req_pages, order),
							     &the_pgmap) * 64, llc);
	/* cold stands for an altmap, which a deduplicated vmemmap never has */
	fns.memo_class = auto_memo_class(prep == PREP_COLD && !the_pgmap.vmemmap_optimized,
					 fns.walk != NULL, order, threads);
	fns.memo_size_log2 = 63 - (unsigned int)__builtin_clzl(memmap_written_pages(nr_pages,
										      &the_pgmap) * 64 | 1);
	fns.several_threads = threads > 1;
	learning = &fns;
	learning_clock = clock;
	auto_reset();
	ns = run_fill(NULL, threads, map, nr_pages, order, do_readback, prep, SPLIT_CHUNKED);
	learning = NULL;
	a = auto_stats();
	learned->rounds += a.rounds;
	learned->stream_rounds += a.stream_rounds;
	learned->streamed += a.streamed;
	learned->records += a.records;
	learned->probe_tmpl_ns += a.probe_tmpl_ns;
	learned->probe_stream_ns += a.probe_stream_ns;
	learned->probe_records += a.probe_records;
	learned->walked += a.walked;
	learned->pieces += a.pieces;
	learned->memo_rounds += a.memo_rounds;
	learned->spans += a.spans;
	return ns;
}

void alloc_scratch(void)
{
	size_t want = scratch_bytes > 32768 ? scratch_bytes : 32768;

	for (int t = 0; t < MAX_THREADS; t++)
		if (posix_memalign(&scratch[t], 4096, want))
			die("out of memory%s", "");
}
