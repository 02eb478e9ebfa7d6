/*
 * fill_run.c - the record-fill strategies, the layouts, and the fill samples
 * of one repetition of run.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

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
size_t auto_min[3];	/* threshold in memmap bytes, by placement (PLACE_*) */

const struct fill_strategy fill_strategies[] = {
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
	/*
	 * The same code as template and movntdq under a second name: auto's
	 * bar paired with a twin of the better mode measures the bar's own
	 * noise in the same sweep (what a zero-cost oracle would score).
	 */
	{ "template-twin", fill_template, fill_template_pre, 0, 0, 0 },
	{ "movntdq-twin", fill_movntdq, fill_movntdq_pre, 0, 0, 0 },
};

/*
 * What each probe round of the sample measured, for the replay: chunk, lead-in,
 * first template and streaming pieces, second ones (0 after an early end), the
 * fill and the verdict the other chunks followed when it began (-1 none, 0
 * template, 1 streaming), as probe_rounds=c:l:t:s:t:s:f:b,... (fewer than
 * rounds= if the log was full); under --auto-span also its spans' template and
 * streaming ns (0:0 where it timed none), c:l:t:s:t:s:f:b:st:ss.
 */
static void print_round_log(void)
{
	unsigned long n;
	const struct auto_round_record *r = auto_log(&n);

	if (!n)
		return;
	printf(" probe_rounds=");
	for (unsigned long i = 0; i < n; i++) {
		printf("%s%lu:%llu:%llu:%llu:%llu:%llu:%lu:%d", i ? "," : "", r[i].chunk,
		       (unsigned long long)r[i].lead_ns,
		       (unsigned long long)r[i].tmpl_ns[0], (unsigned long long)r[i].stream_ns[0],
		       (unsigned long long)r[i].tmpl_ns[1], (unsigned long long)r[i].stream_ns[1],
		       r[i].fill, r[i].before);
		if (auto_span)
			printf(":%llu:%llu", (unsigned long long)r[i].span_ns[0],
			       (unsigned long long)r[i].span_ns[1]);
	}
}

/* splitmix64: the shuffle's generator, seeded per repetition and configuration */
static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* order[0..n): 0..n-1 in repetition 0, else a Fisher-Yates shuffle from seed */
static void fill_order(int *order, int n, int rep, uint64_t seed)
{
	for (int i = 0; i < n; i++)
		order[i] = i;
	if (!rep)
		return;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(splitmix64(&seed) % (uint64_t)(i + 1));
		int t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
}

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
const size_t n_fill_strategies = N_FILL;

const struct fill_strategy *find_fill(const char *name)
{
	for (size_t i = 0; i < N_FILL; i++)
		if (!strcmp(fill_strategies[i].name, name))
			return &fill_strategies[i];
	die("unknown fill strategy '%s'", name);
	return NULL;
}

/*
 * The layouts of the records: o9pre writes the first tail with the compound
 * head's data already in it, as the series does; o9dedup is o9pre as the
 * kernel writes a DRAM memmap of 2 MiB compound pages on x86-64 (devdax
 * map=mem), 128 of each 512 struct pages (compound_nr_pages()).  Its sizes
 * count the struct pages written, as the kernel's thresholds do: its range
 * spans four times as many PFNs.
 */
static const struct layout layouts[] = {
	{ "o0", 0, 0, 0 }, { "o9", 9, 0, 0 }, { "o9pre", 9, 1, 0 }, { "o9dedup", 9, 1, 1 },
};

const struct layout *find_layout(const char *name)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (!strcmp(layouts[i].name, name))
			return &layouts[i];
	die("unknown layout '%s' (o0, o9, o9pre, o9dedup)", name);
	return NULL;
}

struct dev_pagemap layout_pgmap(const struct layout *l, enum memory_type type)
{
	return (struct dev_pagemap){ .type = type, .vmemmap_shift = l->order,
				     .vmemmap_optimized = l->dedup };
}

void set_layout(const struct layout *l)
{
	the_pgmap = layout_pgmap(l, the_pgmap.type);
}

unsigned long layout_pfns(const struct layout *l, size_t written_bytes)
{
	struct dev_pagemap pgmap = layout_pgmap(l, the_pgmap.type);

	return written_bytes / 64 / compound_nr_pages(&pgmap) << l->order;
}

/* The fill samples of repetition rep: every size, layout, destination,
 * thread count, split and strategy once. Repetition 0 runs the strategies
 * in the order given (the tables list them in it), the others in an order
 * shuffled per repetition and configuration (seeded, so a run repeats), so
 * that no strategy always runs at the same place or after the same one: what
 * a fill leaves behind, in the host or the prefetchers, is then not always
 * the same strategy's to pay. */
void fill_samples(struct opts *o, int rep, char *buf, char *dedup_buf, int avx512)
{
	uint64_t config = 0;

	for (int si = 0; si < o->n_sizes; si++) {
		size_t size = parse_size(o->sizes[si]);
		/* small destinations: several timed passes per sample */
		unsigned long passes = size < o->min_bytes ? (o->min_bytes + size - 1) / size : 1;

		for (int li = 0; li < o->n_layouts; li++) {
			const struct layout *lay = find_layout(o->layouts[li]);
			int pre = lay->pre, order = (int)lay->order;
			unsigned long nr = layout_pfns(lay, size);
			struct page *map = (struct page *)(lay->dedup ? dedup_buf : buf);

			set_layout(lay);

			for (int di = 0; di < o->n_dests; di++) {
				const char *dest = o->dests[di];
				int walked = !strcmp(dest, "walked");
				int rb = walked ? READBACK_WALK :
					 !strcmp(dest, "readback") ? READBACK_CHUNK : READBACK_NONE;

				if (strcmp(dest, "cold") && strcmp(dest, "warm") && !rb)
					die("unknown destination '%s' (cold, warm, readback, walked)", dest);
				if (lay->dedup && rb)
					continue;	/* nobody walks it: run.c's skip line */
				for (int ti = 0; ti < o->n_threads; ti++) {
					int threads = atoi(o->threads[ti]);

					for (int xi = 0; xi < o->n_splits; xi++) {
						int xsplit = strcmp(o->splits[xi], "even") ? SPLIT_CHUNKED : SPLIT_EVEN;

						int order_of[MAX_LIST];

						fill_order(order_of, o->n_fills, rep,
							   (uint64_t)rep << 32 | config++);
						for (int fi = 0; fi < o->n_fills; fi++) {
							int f = order_of[fi];
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
							auto_log_reset();
							/*
							 * a sample's ranges remember verdicts for
							 * one another (the replay's learning_share()),
							 * not for the next configuration's: a sweep
							 * interleaves what no owner maps in turn
							 */
							auto_memo_reset();
							for (unsigned long k = 0; k < passes; k++) {
								int prep = strcmp(dest, "warm") && !walked ?
									   PREP_COLD : PREP_WARM;

								if (fs->learns)
									ns += run_auto_fill(pre, now_ns, threads,
											    map, nr,
											    order, rb, prep, &learned);
								else
									ns += run_fill(fn, threads, map,
										       nr, order, rb, prep, split);
								cpu += last_cpu_ns;
							}
							printf("sample kind=fill strategy=%s layout=%s dest=%s size=%zu "
							       "threads=%d split=%s rep=%d ns=%llu bytes=%zu cpu_ns=%llu "
							       "passes=%lu", fs->name, o->layouts[li], dest, size, threads,
							       split == SPLIT_CHUNKED ? "chunked" : "even", rep,
							       (unsigned long long)ns, size * passes,
							       (unsigned long long)cpu, passes);
							if (fs->learns)
								printf(" rounds=%lu stream_rounds=%lu streamed=%lu records=%lu"
								       " probe_tmpl_ns=%llu probe_stream_ns=%llu"
								       " probe_records=%lu probe_pieces=%lu"
								       " memo_rounds=%lu",
								       learned.rounds, learned.stream_rounds,
								       learned.streamed, learned.records,
								       (unsigned long long)learned.probe_tmpl_ns,
								       (unsigned long long)learned.probe_stream_ns,
								       learned.probe_records, learned.pieces,
								       learned.memo_rounds);
							if (fs->learns && auto_span)
								printf(" spans=%lu", learned.spans);
							if (fs->learns)
								print_round_log();
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
}
