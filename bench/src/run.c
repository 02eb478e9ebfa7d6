/*
 * run.c - the run mode: the checks of the fill sizes and thread counts, the
 * info and skip lines, the buffers, and the repetitions, each of which runs
 * every case once (fill_run.c, clear_fault.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

int cmd_run(struct opts *o)
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
	size_t max_map = 0, dedup_map = 0;
	char *dedup_buf = NULL;

	/*
	 * o9dedup's range spans four times the PFNs it writes struct pages, in
	 * a buffer of its own of 4 KiB pages: the kernel's two vmemmap pages of
	 * a compound page are separate pages, mapped by PTEs, and a THP-backed
	 * buffer would put every written 8 KiB at a 32 KiB physical stride too
	 */
	for (int i = 0; i < o->n_layouts; i++) {
		const struct layout *l = find_layout(o->layouts[i]);
		size_t map = layout_pfns(l, max_fill) * 64;

		if (l->dedup)
			dedup_map = map;
		else if (map > max_map)
			max_map = map;
		for (int d = 0; d < o->n_dests; d++)
			if (l->dedup && (!strcmp(o->dests[d], "walked") || !strcmp(o->dests[d], "readback")))
				printf("skip kind=fill strategy=all layout=%s dest=%s reason=nothing walks a "
				       "deduplicated memmap (devdax) right after its init\n", l->name,
				       o->dests[d]);
	}
	size_t need = max_map > o->clear_size ? max_map : o->clear_size;
	printf("info llc_bytes=%zu\ninfo evict_bytes=%zu\ninfo avx512f=%d\ninfo clzero=%d\n"
	       "info movsb_block=%zu\ninfo pgmap_type=%d\ninfo buffer_bytes=%zu\n"
	       "info auto_altmap_min=%zu\ninfo auto_dram_min=%zu\ninfo chunk_pages=%lu\n"
	       "info llc_sysconf=%ld\ninfo clear_fault=%d\ninfo auto_order=%s\n"
	       "info dedup_buffer_bytes=%zu\n",
	       llc, o->evict_bytes, avx512, clzero, scratch_bytes, the_pgmap.type, need,
	       auto_min[PLACE_ALTMAP], auto_min[PLACE_DRAM], chunk_req_pages,
	       sysconf(_SC_LEVEL3_CACHE_SIZE), clear_fault, auto_order_name(), dedup_map);
	fflush(stdout);
	buf = alloc_buf(need, 1);
	printf("info buffer_thp_bytes=%zu\n", anon_huge_bytes(buf));
	if (dedup_map) {
		dedup_buf = alloc_buf(dedup_map, 0);
		printf("info dedup_buffer_thp_bytes=%zu\n", anon_huge_bytes(dedup_buf));
	}
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
		if (dedup_buf)
			memset(dedup_buf, 0x5a, dedup_map);
		printf("info rep%d_buffer_thp_bytes=%zu\n", rep, anon_huge_bytes(buf));
		fill_samples(o, rep, buf, dedup_buf, avx512);
		fflush(stdout);
		clear_samples(o, rep, buf, avx512, clzero);
		fflush(stdout);
		fault_samples(o, rep);
		fflush(stdout);
	}
	printf("info sink=%lu\n", (unsigned long)(sink & 1));
	return 0;
}
