/*
 * meminit-bench - replay the kernel's memmap-init and page-clearing write
 * patterns on the real CPU.
 *
 *   meminit-bench run [options]     interleaved samples, one line each
 *   meminit-bench verify [options]  every strategy against the slow path
 *   meminit-bench info              CPU features the strategies depend on
 *
 * Output lines of "run" (parsed by src/meminit/microbench.py):
 *   sample kind=fill strategy=S layout=L dest=D size=N threads=T rep=R ns=NS bytes=B
 *          cpu_ns=C passes=P
 *   sample kind=clear strategy=S unit=U size=N threads=1 rep=R ns=NS bytes=B cpu_ns=C
 *   sample kind=fault strategy=K size=N threads=1 rep=R ns=NS bytes=B huge_bytes=H
 *          cpu_ns=C prime_ns=P
 *   skip kind=K strategy=S reason=free text to end of line
 *   info key=value
 * ns is wall time of the timed region (all passes), bytes what it wrote,
 * cpu_ns the CPU time of the timing thread in it.  Cases are interleaved:
 * every case once per repetition.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "auto.h"
#include "page.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

#define MAX_LIST 32
#define MAX_THREADS 64
#define BASE_PFN 0x1000000UL	/* the "device" starts at 64 GiB */
#define HUGE_2M (2UL << 20)

/* ------------------------------------------------------------------ misc */

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "meminit-bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	size_t mul = 1;

	if (end == s || v < 0)
		die("bad size '%s'", s);
	switch (*end) {
	case 'k': case 'K': mul = 1UL << 10; end++; break;
	case 'm': case 'M': mul = 1UL << 20; end++; break;
	case 'g': case 'G': mul = 1UL << 30; end++; break;
	case '\0': break;
	default: die("bad size suffix in '%s'", s);
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		die("bad size '%s'", s);
	return (size_t)(v * (double)mul);
}

/* Split a comma-separated list in place. */
static int split_list(char *s, char **out)
{
	int n = 0;

	for (char *tok = strtok(s, ","); tok && n < MAX_LIST; tok = strtok(NULL, ","))
		out[n++] = tok;
	return n;
}

static int has_clzero(void)
{
	unsigned int a, b, c, d;

	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000008)
		return 0;
	__cpuid(0x80000008, a, b, c, d);
	return b & 1;
}

static int has_avx512f(void)
{
	__builtin_cpu_init();
	return !!__builtin_cpu_supports("avx512f");
}

static size_t llc_bytes(void)
{
	/* sysfs first: in a VM, CPUID leaf 0x8000001D (what sysconf() reads) may
	 * describe the host's L3 rather than this guest's */
	FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
	long v;

	if (f) {
		char buf[64];

		if (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = 0;
			fclose(f);
			return parse_size(buf);
		}
		fclose(f);
	}
	v = sysconf(_SC_LEVEL3_CACHE_SIZE);
	return v > 0 ? (size_t)v : 32UL << 20;
}

/* Anonymous memory on 2 MiB boundaries, THP-backed where possible (the
 * kernel's vmemmap is mapped with 2 MiB pages on x86), prefaulted. */
static void *alloc_buf(size_t len, int hugepage)
{
	size_t map = len + HUGE_2M;
	char *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		die("mmap of the benchmark buffer failed: %s", strerror(errno));
	a = (char *)(((uintptr_t)p + HUGE_2M - 1) & ~(HUGE_2M - 1));
	if (a > p)
		munmap(p, a - p);
	if (p + map > a + len)
		munmap(a + len, p + map - (a + len));
	madvise(a, len, hugepage ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(a, 0x5a, len);
	return a;
}

/* Bytes of the VMA containing addr that are backed by transparent huge pages. */
static size_t anon_huge_bytes(void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	size_t kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb * 1024;
}

/* ---------------------------------------------------------------- eviction */

static unsigned char *evict_buf;
static size_t evict_len;
static volatile unsigned long sink;

static void evict(void)
{
	unsigned long s = 0;

	/* read and dirty every line of a buffer several times the LLC */
	for (size_t i = 0; i < evict_len; i += 64) {
		s += evict_buf[i];
		evict_buf[i] = (unsigned char)s;
	}
	sink += s;
}

/* --------------------------------------------------------------- strategies */

typedef void (*fill_fn)(const struct fill_job *);

struct fill_strategy {
	const char *name;
	fill_fn fn;		/* layouts o0 and o9 */
	fill_fn pre;		/* layout o9pre */
	int needs_avx512;
	int placement;		/* auto-*: where the memmap lives (PLACE_*), else 0 */
	int learns;		/* auto: learns on the chunks it fills (auto.c) */
};

/*
 * The kernel's `auto` policy (issue 6): stream iff the CPU has the
 * non-temporal backend (x86-64: MOVNTDQ, SSE2, always) and the memmap is at
 * least a threshold: the LLC size when the memmap lives in device memory
 * (altmap, map=dev: never cache-resident, never read right after init by the
 * CPU that wrote it), 2 x LLC when it lives in ordinary DRAM (it may have
 * just been zeroed into the cache, and streaming stores have to push those
 * lines out).  The bench has no device memory: the placement only selects
 * the threshold; every destination is DRAM here.
 */
#define PLACE_ALTMAP 1
#define PLACE_DRAM 2
static size_t auto_min[3];	/* threshold in memmap bytes, by placement */

static const struct fill_strategy fill_strategies[] = {
	{ "slow", slow_memmap_init_zone_device, slow_memmap_init_zone_device, 0, 0, 0 },
	{ "slow-saferet", saferet_memmap_init_zone_device, saferet_memmap_init_zone_device, 0, 0, 0 },
	{ "template", fill_template, fill_template_pre, 0, 0, 0 },
	{ "movnti", fill_movnti, fill_movnti_pre, 0, 0, 0 },
	{ "movntdq", fill_movntdq, fill_movntdq_pre, 0, 0, 0 },
	{ "avx512nt", fill_avx512nt, fill_avx512nt_pre, 1, 0, 0 },
	{ "repmovsb", fill_repmovsb, fill_repmovsb, 0, 0, 0 },
	{ "auto-altmap", NULL, NULL, 0, PLACE_ALTMAP, 0 },
	{ "auto-dram", NULL, NULL, 0, PLACE_DRAM, 0 },
	{ "auto", NULL, NULL, 0, 0, 1 },
};

static void sfence(void)
{
	asm volatile("sfence" ::: "memory");
}

/* What the learning auto chooses between: the template copy and the kernel's
 * streaming backend (memcpy_nontemporal(): MOVNTDQ), by layout. */
static const struct auto_fns auto_fns = { fill_template, fill_movntdq, sfence };
static const struct auto_fns auto_fns_pre = { fill_template_pre, fill_movntdq_pre, sfence };

/* What `auto` runs for a fill of `bytes` of memmap: the streaming copy
 * (movntdq, the kernel's memcpy_nontemporal() backend) or the template copy. */
static int auto_streams(const struct fill_strategy *fs, size_t bytes)
{
	return bytes >= auto_min[fs->placement];
}

static fill_fn strategy_fn(const struct fill_strategy *fs, int pre, size_t bytes)
{
	if (fs->learns)
		return NULL;	/* run_chunks() runs auto_fill_chunk() */
	if (fs->placement) {
		if (auto_streams(fs, bytes))
			return pre ? fill_movntdq_pre : fill_movntdq;
		return pre ? fill_template_pre : fill_template;
	}
	return pre ? fs->pre : fs->fn;
}
#define N_FILL (sizeof(fill_strategies) / sizeof(fill_strategies[0]))

static const struct fill_strategy *find_fill(const char *name)
{
	for (size_t i = 0; i < N_FILL; i++)
		if (!strcmp(fill_strategies[i].name, name))
			return &fill_strategies[i];
	die("unknown fill strategy '%s'", name);
	return NULL;
}

typedef void (*clear_fn)(void *, size_t, size_t);

struct clear_method {
	const char *name;
	clear_fn fn;
	int needs;		/* 1: avx512f, 2: clzero */
	unsigned char byte;	/* what the range holds afterwards */
	size_t folio;		/* folio methods: folio size (fn is NULL) */
	int php;		/* 1: 6.12 process_huge_page(), 0: folio_zero_user() extents */
};

static int clear_fault = FAULT_MIDDLE;	/* fault subpage of each folio */

static void do_clear(const struct clear_method *m, void *p, size_t len, size_t unit)
{
	if (m->folio && m->php)
		clear_folios_php(p, len, m->folio, clear_fault);
	else if (m->folio)
		clear_folios_fz(p, len, unit, m->folio, clear_fault);
	else if (m->fn == (clear_fn)clear_stosb_desc)
		clear_stosb_desc(p, len, unit < HUGE_2M ? HUGE_2M : unit);
	else
		m->fn(p, len, unit);
}

static const struct clear_method clear_methods[] = {
	{ "stosb", clear_stosb, 0, 0, 0, 0 },
	{ "stosb_desc", clear_stosb_desc, 0, 0, 0, 0 },
	{ "stosq", clear_stosq, 0, 0, 0, 0 },
	{ "movnti", clear_movnti, 0, 0, 0, 0 },
	{ "avx512nt", clear_avx512nt, 1, 0, 0, 0 },
	{ "clzero", clear_clzero, 2, 0, 0, 0 },
	{ "memset", clear_memset, 0, 0, 0, 0 },
	{ "stosb_nz", fill_stosb_nz, 0, 0x5a, 0, 0 },
	{ "avx512nt_nz", fill_avx512nt_nz, 1, 0x5a, 0, 0 },
	/* fault in the middle of every folio (--clear-fault) */
	{ "php2M", NULL, 0, 0, 2UL << 20, 1 },	/* 6.12, THP / 2 MiB hugetlb */
	{ "fz2M", NULL, 0, 0, 2UL << 20, 0 },	/* extent series, 2 MiB folio */
	{ "fz1G", NULL, 0, 0, 1UL << 30, 0 },	/* extent series, 1 GiB folio */
};
#define N_CLEAR (sizeof(clear_methods) / sizeof(clear_methods[0]))

/* "stosb-4K", "stosb_desc-4K" (4 KiB pages, last to first in each 2 MiB
 * folio), "avx512nt-1G", "stosq-all" ... */
static int parse_clear_case(const char *spec, const struct clear_method **m, size_t *unit)
{
	char buf[64];
	char *dash;

	snprintf(buf, sizeof(buf), "%s", spec);
	dash = strrchr(buf, '-');
	if (!dash)
		return -1;
	*dash = 0;
	*unit = strcmp(dash + 1, "all") ? parse_size(dash + 1) : 0;
	for (size_t i = 0; i < N_CLEAR; i++)
		if (!strcmp(clear_methods[i].name, buf)) {
			*m = &clear_methods[i];
			return 0;
		}
	return -1;
}

static int layout_order(const char *layout, int *pre)
{
	*pre = !strcmp(layout, "o9pre");
	if (!strcmp(layout, "o0"))
		return 0;
	if (!strcmp(layout, "o9") || *pre)
		return 9;
	die("unknown layout '%s' (o0, o9, o9pre)", layout);
	return -1;
}

/* ------------------------------------------------------------------ threads */

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

/*
 * Chunked split (the kernel's multithreaded init, issue 6): the range is cut
 * at PFNs that are multiples of chunk_pages (rounded up to a whole number of
 * compound pages and pageblocks), and every thread pulls the next chunk from
 * an atomic counter until none is left.  Each thread drains its streaming
 * stores once, after its last chunk; the caller waits for all of them.
 */
#define SPLIT_EVEN 0
#define SPLIT_CHUNKED 1
#define PAGEBLOCK_NR_PAGES 512UL	/* pageblock_order 9 on x86-64 */

static unsigned long chunk_req_pages = 32768;	/* --chunk: 128 MiB of device memory */
/* the learning auto's modes for this fill (run_chunks), and its clock */
static const struct auto_fns *learning;
static uint64_t (*learning_clock)(void);
static _Atomic unsigned long next_chunk;
static unsigned long chunk_first, chunk_end, chunk_pages, n_chunks;
static int bug;

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
		if (w->readback)
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
	if (w->readback)
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

static struct dev_pagemap the_pgmap = { .type = MEMORY_DEVICE_FS_DAX };
static void *scratch[MAX_THREADS];
static size_t scratch_bytes = 4096;

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

static uint64_t last_cpu_ns;	/* CPU time of the calling thread in the last sample */

#define PREP_NONE 0
#define PREP_COLD 1		/* evict the caches */
#define PREP_WARM 2		/* evict, then zero the destination with normal stores */

static void evict(void);

/*
 * Run fn over nr_pages records with `threads` threads after preparing the
 * destination; returns the elapsed ns from release to the last thread done.
 */
static uint64_t run_fill(fill_fn fn, int threads, struct page *map, unsigned long nr_pages,
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
		warm_zero(map, nr_pages * 64);

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
	t1 = now_ns();
	for (int t = 0; t < threads; t++)
		sink += pool[t].sum;
	return t1 - t0;
}

/*
 * One fill of the learning auto (auto.c) on the kernel's chunks, with its own
 * verdict and the given clock; adds what it did to *learned.
 */
static uint64_t run_auto_fill(int pre, uint64_t (*clock)(void), int threads, struct page *map,
			      unsigned long nr_pages, unsigned int order, int do_readback, int prep,
			      struct auto_stats *learned)
{
	struct auto_stats a;
	uint64_t ns;

	learning = pre ? &auto_fns_pre : &auto_fns;
	learning_clock = clock;
	auto_reset();
	ns = run_fill(NULL, threads, map, nr_pages, order, do_readback, prep, SPLIT_CHUNKED);
	learning = NULL;
	a = auto_stats();
	learned->rounds += a.rounds;
	learned->stream_rounds += a.stream_rounds;
	learned->streamed += a.streamed;
	learned->records += a.records;
	return ns;
}

/* -------------------------------------------------------------- fault test */

static int fault_sample(const char *kind, size_t size, uint64_t *ns, size_t *huge, char *why,
			size_t whylen)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	size_t page = 4096, map = size;
	char *p, *a;
	uint64_t t0, t1, c0;

	if (!strcmp(kind, "anon-4K")) {
	} else if (!strcmp(kind, "thp-2M")) {
		page = HUGE_2M;
		map = size + HUGE_2M;
	} else if (!strcmp(kind, "hugetlb-2M")) {
		page = HUGE_2M;
		flags |= MAP_HUGETLB | (21 << MAP_HUGE_SHIFT);
	} else if (!strcmp(kind, "hugetlb-1G")) {
		page = 1UL << 30;
		flags |= MAP_HUGETLB | (30 << MAP_HUGE_SHIFT);
	} else {
		die("unknown fault kind '%s' (anon-4K, thp-2M, hugetlb-2M, hugetlb-1G)", kind);
	}
	if (size % page) {
		snprintf(why, whylen, "size %zu is not a multiple of the page size %zu", size, page);
		return -1;
	}
	p = mmap(NULL, map, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(why, whylen, "mmap(%s, %zu bytes) failed: %s%s", kind, size, strerror(errno),
			 flags & MAP_HUGETLB ? " (not enough hugetlb pages reserved)" : "");
		return -1;
	}
	a = p;
	if (!strcmp(kind, "thp-2M")) {
		a = (char *)(((uintptr_t)p + HUGE_2M - 1) & ~(HUGE_2M - 1));
		if (madvise(a, size, MADV_HUGEPAGE)) {
			snprintf(why, whylen, "madvise(MADV_HUGEPAGE) failed: %s", strerror(errno));
			munmap(p, map);
			return -1;
		}
	} else if (!strcmp(kind, "anon-4K")) {
		madvise(a, size, MADV_NOHUGEPAGE);
	}
	t0 = now_ns();
	c0 = thread_cpu_ns();
	for (size_t off = 0; off < size; off += page)
		((volatile char *)a)[off] = 1;	/* one write fault per page */
	last_cpu_ns = thread_cpu_ns() - c0;
	t1 = now_ns();
	*ns = t1 - t0;
	*huge = !strcmp(kind, "thp-2M") ? anon_huge_bytes(a) : (page > 4096 ? size : 0);
	munmap(p, map);
	return 0;
}

/* ---------------------------------------------------------------- run mode */

struct opts {
	char *sizes[MAX_LIST], *threads[MAX_LIST], *layouts[MAX_LIST], *dests[MAX_LIST];
	char *fills[MAX_LIST], *clears[MAX_LIST], *faults[MAX_LIST], *splits[MAX_LIST];
	int n_sizes, n_threads, n_layouts, n_dests, n_fills, n_clears, n_faults, n_splits;
	size_t auto_altmap_min, auto_dram_min;	/* 0: LLC and 2 x LLC */
	int reps;
	size_t clear_size, fault_size, evict_bytes, verify_size, min_bytes;
};

static char *dupstr(const char *s)
{
	char *d = strdup(s);

	if (!d)
		die("out of memory%s", "");
	return d;
}

static void set_list(char **out, int *n, const char *s)
{
	*n = split_list(dupstr(s), out);
}

static void defaults(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	set_list(o->sizes, &o->n_sizes, "4M,16M,128M,1G");
	set_list(o->threads, &o->n_threads, "1,2");
	set_list(o->layouts, &o->n_layouts, "o0,o9");
	set_list(o->dests, &o->n_dests, "cold,warm,readback");
	set_list(o->fills, &o->n_fills, "slow,slow-saferet,template,movnti,movntdq,avx512nt,repmovsb");
	set_list(o->clears, &o->n_clears,
		 "stosb-4K,stosb_desc-4K,stosb-2M,stosb-32M,stosb-1G,stosq-4K,stosq-2M,stosq-32M,"
		 "stosq-1G,movnti-1G,avx512nt-2M,avx512nt-1G,clzero-2M,clzero-1G,memset-1G,"
		 "stosb_nz-1G,avx512nt_nz-1G");
	set_list(o->faults, &o->n_faults, "anon-4K,thp-2M,hugetlb-2M,hugetlb-1G");
	set_list(o->splits, &o->n_splits, "even");
	o->reps = 5;
	o->clear_size = 1UL << 30;
	o->fault_size = 1UL << 30;
	o->verify_size = 4UL << 20;
	o->min_bytes = 64UL << 20;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "sizes", 1, 0, 's' }, { "threads", 1, 0, 't' }, { "layouts", 1, 0, 'l' },
		{ "dests", 1, 0, 'd' }, { "fill", 1, 0, 'f' }, { "clear", 1, 0, 'c' },
		{ "fault", 1, 0, 'F' }, { "reps", 1, 0, 'r' }, { "clear-size", 1, 0, 'C' },
		{ "fault-size", 1, 0, 'S' }, { "evict-bytes", 1, 0, 'e' },
		{ "movsb-block", 1, 0, 'm' }, { "pgmap-type", 1, 0, 'p' }, { "size", 1, 0, 'z' },
		{ "bug", 1, 0, 'b' }, { "min-bytes", 1, 0, 'M' }, { "split", 1, 0, 'x' },
		{ "chunk", 1, 0, 'k' }, { "auto-altmap-min", 1, 0, 'A' },
		{ "auto-dram-min", 1, 0, 'D' }, { "clear-fault", 1, 0, 'q' }, { 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': set_list(o->sizes, &o->n_sizes, optarg); break;
		case 't': set_list(o->threads, &o->n_threads, optarg); break;
		case 'l': set_list(o->layouts, &o->n_layouts, optarg); break;
		case 'd': set_list(o->dests, &o->n_dests, optarg); break;
		case 'f': set_list(o->fills, &o->n_fills, optarg); break;
		case 'c': set_list(o->clears, &o->n_clears, optarg); break;
		case 'F': set_list(o->faults, &o->n_faults, optarg); break;
		case 'r': o->reps = atoi(optarg); break;
		case 'C': o->clear_size = parse_size(optarg); break;
		case 'S': o->fault_size = parse_size(optarg); break;
		case 'e': o->evict_bytes = parse_size(optarg); break;
		case 'm': scratch_bytes = parse_size(optarg) & ~63UL; break;
		case 'z': o->verify_size = parse_size(optarg); break;
		case 'M': o->min_bytes = parse_size(optarg); break;
		case 'x': set_list(o->splits, &o->n_splits, optarg); break;
		/* --chunk is in bytes of device memory: one 4 KiB page per record */
		case 'k': chunk_req_pages = parse_size(optarg) / 4096; break;
		case 'A': o->auto_altmap_min = parse_size(optarg); break;
		case 'D': o->auto_dram_min = parse_size(optarg); break;
		case 'q':
			if (!strcmp(optarg, "first")) clear_fault = FAULT_FIRST;
			else if (!strcmp(optarg, "middle")) clear_fault = FAULT_MIDDLE;
			else if (!strcmp(optarg, "last")) clear_fault = FAULT_LAST;
			else die("unknown --clear-fault '%s' (first, middle, last)", optarg);
			break;
		case 'p':
			if (!strcmp(optarg, "private")) the_pgmap.type = MEMORY_DEVICE_PRIVATE;
			else if (!strcmp(optarg, "coherent")) the_pgmap.type = MEMORY_DEVICE_COHERENT;
			else if (!strcmp(optarg, "fsdax")) the_pgmap.type = MEMORY_DEVICE_FS_DAX;
			else if (!strcmp(optarg, "generic")) the_pgmap.type = MEMORY_DEVICE_GENERIC;
			else die("unknown pgmap type '%s'", optarg);
			break;
		case 'b':
			if (!strcmp(optarg, "deferred-list")) bug = BUG_DEFERRED_LIST;
			else if (!strcmp(optarg, "clear-overrun")) bug = BUG_CLEAR_OVERRUN;
			else if (!strcmp(optarg, "template-refcount")) bug = BUG_TEMPLATE_REFCOUNT;
			else if (!strcmp(optarg, "chunk-align")) bug = BUG_CHUNK_ALIGN;
			else if (!strcmp(optarg, "auto-round")) bug = BUG_AUTO_ROUND;
			else die("unknown bug '%s'", optarg);
			break;
		default:
			return -1;
		}
	}
	if (o->reps < 1)
		die("--reps must be >= 1%s", "");
	for (int i = 0; i < o->n_splits; i++)
		if (strcmp(o->splits[i], "even") && strcmp(o->splits[i], "chunked"))
			die("unknown split '%s' (even, chunked)", o->splits[i]);
	/* "none" empties a list */
	if (o->n_fills == 1 && !strcmp(o->fills[0], "none")) o->n_fills = 0;
	if (o->n_clears == 1 && !strcmp(o->clears[0], "none")) o->n_clears = 0;
	if (o->n_faults == 1 && !strcmp(o->faults[0], "none")) o->n_faults = 0;
	return 0;
}

static int cpu_ok(int needs, int avx512, int clzero)
{
	return !((needs == 1 && !avx512) || (needs == 2 && !clzero));
}

static void alloc_scratch(void)
{
	size_t want = scratch_bytes > 32768 ? scratch_bytes : 32768;

	for (int t = 0; t < MAX_THREADS; t++)
		if (posix_memalign(&scratch[t], 4096, want))
			die("out of memory%s", "");
}

static int cmd_run(struct opts *o)
{
	int avx512 = has_avx512f(), clzero = has_clzero();
	size_t max_fill = 0, llc = llc_bytes();
	char *buf;

	for (int i = 0; i < o->n_sizes; i++) {
		size_t s = parse_size(o->sizes[i]);

		if (s % 32768 || !s)
			die("fill size '%s' must be a non-zero multiple of 32 KiB", o->sizes[i]);
		if (s > max_fill)
			max_fill = s;
	}
	for (int i = 0; i < o->n_threads; i++)
		if (atoi(o->threads[i]) < 1 || atoi(o->threads[i]) > MAX_THREADS)
			die("bad thread count '%s'", o->threads[i]);
	if (!o->evict_bytes)
		o->evict_bytes = 3 * llc;
	auto_min[PLACE_ALTMAP] = o->auto_altmap_min ? o->auto_altmap_min : llc;
	auto_min[PLACE_DRAM] = o->auto_dram_min ? o->auto_dram_min : 2 * llc;
	alloc_scratch();
	size_t need = max_fill > o->clear_size ? max_fill : o->clear_size;
	printf("info llc_bytes=%zu\ninfo evict_bytes=%zu\ninfo avx512f=%d\ninfo clzero=%d\n"
	       "info movsb_block=%zu\ninfo pgmap_type=%d\ninfo buffer_bytes=%zu\n"
	       "info auto_altmap_min=%zu\ninfo auto_dram_min=%zu\ninfo chunk_pages=%lu\n"
	       "info llc_sysconf=%ld\ninfo clear_fault=%d\n",
	       llc, o->evict_bytes, avx512, clzero, scratch_bytes, the_pgmap.type, need,
	       auto_min[PLACE_ALTMAP], auto_min[PLACE_DRAM], chunk_req_pages,
	       sysconf(_SC_LEVEL3_CACHE_SIZE), clear_fault);
	fflush(stdout);
	buf = alloc_buf(need, 1);
	printf("info buffer_thp_bytes=%zu\n", anon_huge_bytes(buf));
	evict_len = o->evict_bytes;
	evict_buf = alloc_buf(evict_len, 0);

	/* skip lines for what this CPU cannot run, once */
	for (int f = 0; f < o->n_fills; f++) {
		const struct fill_strategy *fs = find_fill(o->fills[f]);

		if (fs->needs_avx512 && !avx512)
			printf("skip kind=fill strategy=%s reason=CPU has no avx512f\n", fs->name);
	}
	for (int c = 0; c < o->n_clears; c++) {
		const struct clear_method *m;
		size_t unit;

		if (parse_clear_case(o->clears[c], &m, &unit))
			die("bad clear case '%s' (method-unit, e.g. stosb-4K)", o->clears[c]);
		if (!cpu_ok(m->needs, avx512, clzero))
			printf("skip kind=clear strategy=%s reason=CPU lacks %s\n", m->name,
			       m->needs == 1 ? "avx512f" : "clzero");
	}
	fflush(stdout);

	for (int rep = 0; rep < o->reps; rep++) {
		fprintf(stderr, "meminit-bench: repetition %d/%d\n", rep + 1, o->reps);
		/* the kernel may split the buffer's huge pages (e.g. the THP shrinker
		 * for zero-filled subpages): re-dirty it and record its THP backing */
		memset(buf, 0x5a, need);
		printf("info rep%d_buffer_thp_bytes=%zu\n", rep, anon_huge_bytes(buf));
		for (int si = 0; si < o->n_sizes; si++) {
			size_t size = parse_size(o->sizes[si]);
			/* small destinations: several timed passes per sample */
			unsigned long passes = size < o->min_bytes ? (o->min_bytes + size - 1) / size : 1;

			for (int li = 0; li < o->n_layouts; li++) {
				int pre, order = layout_order(o->layouts[li], &pre);

				for (int di = 0; di < o->n_dests; di++) {
					const char *dest = o->dests[di];
					int rb = !strcmp(dest, "readback");

					if (strcmp(dest, "cold") && strcmp(dest, "warm") && !rb)
						die("unknown destination '%s' (cold, warm, readback)", dest);
					for (int ti = 0; ti < o->n_threads; ti++) {
					int threads = atoi(o->threads[ti]);

					for (int xi = 0; xi < o->n_splits; xi++) {
						int xsplit = strcmp(o->splits[xi], "even") ? SPLIT_CHUNKED : SPLIT_EVEN;

						for (int f = 0; f < o->n_fills; f++) {
							const struct fill_strategy *fs = find_fill(o->fills[f]);
							fill_fn fn = strategy_fn(fs, pre, size);
							/* the learning auto runs on the kernel's chunks */
							int split = fs->learns ? SPLIT_CHUNKED : xsplit;
							struct auto_stats learned = { 0 };
							uint64_t ns;

							if (fs->needs_avx512 && !avx512)
								continue;
							uint64_t cpu = 0;

							ns = 0;
							for (unsigned long k = 0; k < passes; k++) {
								int prep = strcmp(dest, "warm") ? PREP_COLD : PREP_WARM;

								if (fs->learns)
									ns += run_auto_fill(pre, now_ns, threads,
											    (struct page *)buf, size / 64,
											    order, rb, prep, &learned);
								else
									ns += run_fill(fn, threads, (struct page *)buf,
										       size / 64, order, rb, prep, split);
								cpu += last_cpu_ns;
							}
							printf("sample kind=fill strategy=%s layout=%s dest=%s size=%zu "
							       "threads=%d split=%s rep=%d ns=%llu bytes=%zu cpu_ns=%llu "
							       "passes=%lu", fs->name, o->layouts[li], dest, size, threads,
							       split == SPLIT_CHUNKED ? "chunked" : "even", rep,
							       (unsigned long long)ns, size * passes,
							       (unsigned long long)cpu, passes);
							if (fs->learns)
								printf(" rounds=%lu stream_rounds=%lu streamed=%lu records=%lu",
								       learned.rounds, learned.stream_rounds,
								       learned.streamed, learned.records);
							if (split == SPLIT_CHUNKED)
								printf(" chunks=%lu", n_chunks);
							if (fs->placement)
								printf(" chose=%s", auto_streams(fs, size) ? "movntdq" : "template");
							printf("\n");
						}
					}
					}
				}
			}
		}
		fflush(stdout);
		for (int c = 0; c < o->n_clears; c++) {
			const struct clear_method *m;
			size_t unit;
			uint64_t t0, t1, c0;

			parse_clear_case(o->clears[c], &m, &unit);
			if (!cpu_ok(m->needs, avx512, clzero))
				continue;
			if (!unit || unit > o->clear_size)
				unit = o->clear_size;
			evict();
			t0 = now_ns();
			c0 = thread_cpu_ns();
			do_clear(m, buf, o->clear_size, unit);
			c0 = thread_cpu_ns() - c0;
			t1 = now_ns();
			printf("sample kind=clear strategy=%s unit=%zu size=%zu threads=1 rep=%d ns=%llu "
			       "bytes=%zu cpu_ns=%llu\n", o->clears[c], unit, o->clear_size, rep,
			       (unsigned long long)(t1 - t0), o->clear_size, (unsigned long long)c0);
		}
		fflush(stdout);
		for (int k = 0; k < o->n_faults; k++) {
			uint64_t ns;
			size_t huge;
			char why[256];

			uint64_t prime_ns;

			/*
			 * An untimed pass right before the timed one.  In a VM with free
			 * page reporting (virtio-balloon), memory the guest freed is given
			 * back to the host within seconds and the next first touch costs a
			 * host fault as well; re-touching just before the sample makes the
			 * guest pages the timed pass gets host-backed, so it measures the
			 * guest kernel's fault and clearing work.
			 */
			if (fault_sample(o->faults[k], o->fault_size, &prime_ns, &huge, why, sizeof(why)) ||
			    fault_sample(o->faults[k], o->fault_size, &ns, &huge, why, sizeof(why))) {
				if (rep == 0)
					printf("skip kind=fault strategy=%s reason=%s\n", o->faults[k], why);
				continue;
			}
			printf("sample kind=fault strategy=%s size=%zu threads=1 rep=%d ns=%llu bytes=%zu "
			       "huge_bytes=%zu cpu_ns=%llu prime_ns=%llu\n", o->faults[k], o->fault_size, rep,
			       (unsigned long long)ns, o->fault_size, huge, (unsigned long long)last_cpu_ns,
			       (unsigned long long)prime_ns);
		}
		fflush(stdout);
	}
	printf("info sink=%lu\n", (unsigned long)(sink & 1));
	return 0;
}

/* ------------------------------------------------------------- verify mode */

#define GUARD 65536	/* > 511 records: a misaligned chunk's overrun stays in it */
#define POISON 0xa5

static int failures;

static void report(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	if (!ok)
		failures++;
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
	unsigned long unit = 1UL << order;
	char what[400];
	int ok = 1;

	for (unsigned long i = 0; i < nr && ok; i++) {
		const struct page *p = &map[i];
		unsigned long idx = i & (unit - 1);
		const struct page *head = p - idx;

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
		snprintf(what, sizeof(what), "reference %s: fields of %lu records as 6.12 sets them",
			 name, nr);
	report(ok, what);
}

/*
 * A clock for the learning auto that makes every thread's rounds alternate:
 * streaming wins its odd rounds, template its even ones, so a range mixes
 * both modes chunk by chunk.  Eight readings per round, two per piece.
 */
static __thread unsigned long flip_reads;
static __thread uint64_t flip_now;

static uint64_t flip_clock(void)
{
	unsigned long n = flip_reads++, piece = n / 2 % AUTO_PIECES, round = n / 8;
	int stream_piece = piece == 1 || piece == 2;

	if (n % 2)
		flip_now += stream_piece == (int)(round % 2) ? 50 : 100;
	return flip_now;
}

static void verify_auto(char *buf, const char *ref, size_t size, unsigned long nr, int order,
			int pre, const char *layout, const char *tname)
{
	static const int thread_counts[] = { 1, 2, 3 };
	/* chunks of 1024 and 4096 records: rounds fit in both at order 0, in the
	 * larger at order 9 (four 512-record pieces) */
	static const unsigned long chunk_reqs[] = { 700, 4096 };
	struct page *map = (struct page *)(buf + GUARD);
	char what[400];

	for (int ti = 0; ti < 3; ti++)
	for (int ci = 0; ci < 2; ci++)
	for (int flip = 0; flip < 2; flip++) {
		struct auto_stats a = { 0 };
		int ok, learns, right;

		chunk_req_pages = chunk_reqs[ci];
		memset(buf, POISON, size + 2 * GUARD);
		run_auto_fill(pre, flip ? flip_clock : now_ns, thread_counts[ti], map, nr, order, 0,
			      PREP_NONE, &a);
		ok = !memcmp(buf, ref, size + 2 * GUARD) && a.records == nr;
		/*
		 * Where a round fits in a chunk, the flipping clock must have made
		 * the range mix both modes, or this check proved nothing about
		 * switching between chunks; where none fits, the range is too small
		 * to learn from and must be template only.
		 */
		learns = chunk_pages >= AUTO_PIECES * auto_probe_records(order);
		if (!learns)
			right = !a.rounds && !a.streamed;
		else
			right = !flip || (a.rounds >= 2 && a.streamed && a.streamed < a.records);
		snprintf(what, sizeof(what),
			 "fill auto layout=%s pgmap=%s threads=%d split=chunked/%lu clock=%s records=%lu "
			 "(rounds %lu, streamed %lu)%s", layout, tname, thread_counts[ti], chunk_pages,
			 flip ? "flipping" : "real", nr, a.rounds, a.streamed,
			 !ok ? ": differs from the slow path" : right ? "" :
			 learns ? ": did not mix the modes" : ": learned where no round fits");
		report(ok && right, what);
	}
}

static int cmd_verify(struct opts *o)
{
	int avx512 = has_avx512f(), clzero = has_clzero();
	size_t size = o->verify_size & ~32767UL;
	unsigned long nr = size / 64;
	char *buf, *ref, what[400];
	static const char *layouts[] = { "o0", "o9", "o9pre" };
	static const int types[] = { MEMORY_DEVICE_FS_DAX, MEMORY_DEVICE_PRIVATE };
	static const int thread_counts[] = { 1, 2, 3 };

	if (!size)
		die("--size must be at least 32 KiB%s", "");
	alloc_scratch();
	buf = alloc_buf(size + 2 * GUARD, 1);
	ref = malloc(size + 2 * GUARD);
	if (!ref)
		die("out of memory%s", "");
	for (int ty = 0; ty < 2; ty++) {
		the_pgmap.type = types[ty];
		for (int li = 0; li < 3; li++) {
			int pre, order = layout_order(layouts[li], &pre);
			struct page *map = (struct page *)(buf + GUARD);
			const char *tname = types[ty] == MEMORY_DEVICE_PRIVATE ? "private" : "fsdax";

			memset(buf, POISON, size + 2 * GUARD);
			run_fill(slow_memmap_init_zone_device, 1, map, nr, order, 0, PREP_NONE, SPLIT_EVEN);
			memcpy(ref, buf, size + 2 * GUARD);
			snprintf(what, sizeof(what), "%s/%s", layouts[li], tname);
			check_reference(map, nr, order, what);
			for (size_t f = 0; f < N_FILL; f++) {
				const struct fill_strategy *fs = &fill_strategies[f];

				if ((fs->needs_avx512 && !avx512) || fs->placement)
					continue;	/* auto-* run the template/movntdq functions */
				if (fs->learns) {
					verify_auto(buf, ref, size, nr, order, pre, layouts[li], tname);
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
					memset(buf, POISON, size + 2 * GUARD);
					run_fill(pre ? fs->pre : fs->fn, threads, map, nr, order, 0, PREP_NONE, split);
					if (split == SPLIT_CHUNKED)
						snprintf(sname, sizeof(sname), "chunked/%lu", chunk_pages);
					int ok = !memcmp(buf, ref, size + 2 * GUARD);
					size_t at = 0;

					if (!ok)
						while (at < size + 2 * GUARD && buf[at] == ref[at])
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
	for (size_t c = 0; c < N_CLEAR; c++) {
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

static int cmd_info(void)
{
	printf("info avx512f=%d\ninfo clzero=%d\ninfo llc_bytes=%zu\n", has_avx512f(), has_clzero(),
	       llc_bytes());
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: meminit-bench run|verify|info [options]\n");
		return 2;
	}
	defaults(&o);
	if (parse_opts(argc - 1, argv + 1, &o))
		return 2;
	if (!strcmp(argv[1], "run"))
		return cmd_run(&o);
	if (!strcmp(argv[1], "verify"))
		return cmd_verify(&o);
	if (!strcmp(argv[1], "info"))
		return cmd_info();
	fprintf(stderr, "meminit-bench: unknown command '%s'\n", argv[1]);
	return 2;
}
