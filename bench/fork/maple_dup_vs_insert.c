// SPDX-License-Identifier: GPL-2.0
/*
 * maple_dup_vs_insert: how much does fork's maple-tree copy gain from the
 * structural duplication (__mt_dup(), Linux 6.8+) over rebuilding the tree
 * entry by entry (what dup_mmap() did up to 6.7)?
 *
 * Built against the kernel's own userspace maple-tree harness
 * (tools/testing/radix-tree: lib/maple_tree.c compiled for userspace, its
 * slab and RCU shims); this file only adds a main() and the measurement.
 *
 * A source tree holds N ranges laid out like the VMAs of a process (one page
 * each, contiguous by default, optional gaps) with MM_MT_FLAGS. Each copy
 * must end up mapping every range of the source to the matching "new VMA",
 * as the child's mm does after fork. Three ways to get there:
 *
 *   mt_dup      __mt_dup(), then overwrite every entry in place with the new
 *               VMA (mas_store over the same range), as 6.12 dup_mmap() does
 *   bulk_insert mas_expected_entries(N) then mas_store() of every range in
 *               order, RCU off, as dup_mmap() did up to Linux 6.7
 *   store_each  mas_store_gfp() of every range into an empty tree, RCU off
 *               but no size hint
 *
 * Every sample is checked: each copy of the first batch is walked next to the
 * source (same ranges, same count, the value is the new VMA of the source's
 * old VMA) and the first copy also goes through mt_validate().
 *
 * Output: one JSON line per (repetition, N, method). Repetitions are the
 * outer loop and the method order rotates, so that load from neighbours
 * spreads over all cells instead of hitting one.
 */

#define CONFIG_DEBUG_MAPLE_TREE
#define CONFIG_MAPLE_SEARCH
#define dump_stack()	assert(0)	/* as the harness's maple.c */
#include <assert.h>
#include "test.h"
#include <linux/maple_tree.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "counts.h"

#define PAGE_SZ		4096UL
#define MAP_BASE	0x7f0000000000UL
#define FLAGS_MM	(MT_FLAGS_ALLOC_RANGE | MT_FLAGS_LOCK_EXTERN | MT_FLAGS_USE_RCU)

struct fake_vma {
	unsigned long start;	/* first byte */
	unsigned long last;	/* last byte (inclusive) */
	struct fake_vma *twin;	/* the child's copy of this VMA */
};

enum method { M_MT_DUP, M_BULK_INSERT, M_STORE_EACH, NR_METHODS };
static const char *const method_name[NR_METHODS] = {
	"mt_dup", "bulk_insert", "store_each",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *msg, unsigned long n, const char *method)
{
	printf("{\"error\": \"%s\", \"n\": %lu, \"method\": \"%s\"}\n",
	       msg, n, method);
	fflush(stdout);
	exit(1);
}

/* Make the VMAs of the source and of the child, and the source tree. */
static struct fake_vma *make_vmas(unsigned long n, unsigned long gap_pages)
{
	struct fake_vma *old = calloc(2 * n, sizeof(*old));
	unsigned long i, stride = (1 + gap_pages) * PAGE_SZ;

	if (!old) {
		perror("calloc");
		exit(1);
	}
	for (i = 0; i < n; i++) {
		struct fake_vma *child = &old[n + i];

		old[i].start = MAP_BASE + i * stride;
		old[i].last = old[i].start + PAGE_SZ - 1;
		child->start = old[i].start;
		child->last = old[i].last;
		old[i].twin = child;
	}
	return old;
}

static void build_source(struct maple_tree *src, struct fake_vma *vmas,
			 unsigned long n)
{
	MA_STATE(mas, src, 0, 0);
	unsigned long i;

	mt_init_flags(src, FLAGS_MM);
	for (i = 0; i < n; i++) {
		mas_set_range(&mas, vmas[i].start, vmas[i].last);
		if (mas_store_gfp(&mas, &vmas[i], GFP_KERNEL))
			die("source store failed", n, "source");
	}
	mas_destroy(&mas);
}

/* 6.12 dup_mmap(): structural copy, then swap in the child's VMAs. */
static void copy_mt_dup(struct maple_tree *src, struct maple_tree *dst,
			double *struct_seconds)
{
	MA_STATE(mas, dst, 0, 0);
	struct fake_vma *vma;
	double t0 = now();

	mt_init_flags(dst, FLAGS_MM);
	if (__mt_dup(src, dst, GFP_KERNEL))
		die("__mt_dup failed", 0, "mt_dup");
	*struct_seconds += now() - t0;

	mt_clear_in_rcu(dst);
	mas_for_each(&mas, vma, ULONG_MAX) {
		mas.index = vma->start;
		mas.last = vma->last;
		mas_store(&mas, vma->twin);
		if (mas_is_err(&mas))
			die("in-place store failed", 0, "mt_dup");
	}
	mas_destroy(&mas);
	mt_set_in_rcu(dst);
}

/* Up to 6.7 dup_mmap(): bulk insertion in order with preallocation. */
static void copy_bulk_insert(struct maple_tree *src, struct maple_tree *dst,
			     unsigned long n)
{
	MA_STATE(old, src, 0, 0);
	MA_STATE(mas, dst, 0, 0);
	struct fake_vma *vma;

	mt_init_flags(dst, FLAGS_MM);
	mt_clear_in_rcu(dst);
	if (mas_expected_entries(&mas, n))
		die("mas_expected_entries failed", n, "bulk_insert");
	mas_for_each(&old, vma, ULONG_MAX) {
		mas.index = vma->start;
		mas.last = vma->last;
		mas_store(&mas, vma->twin);
		if (mas_is_err(&mas))
			die("bulk store failed", n, "bulk_insert");
	}
	mas_destroy(&mas);
	mt_set_in_rcu(dst);
}

/* Plain re-insertion, one range at a time, no hint about the size. */
static void copy_store_each(struct maple_tree *src, struct maple_tree *dst)
{
	MA_STATE(old, src, 0, 0);
	MA_STATE(mas, dst, 0, 0);
	struct fake_vma *vma;

	mt_init_flags(dst, FLAGS_MM);
	mt_clear_in_rcu(dst);	/* nobody sees the tree yet: no RCU copies */
	mas_for_each(&old, vma, ULONG_MAX) {
		mas_set_range(&mas, vma->start, vma->last);
		if (mas_store_gfp(&mas, vma->twin, GFP_KERNEL))
			die("store failed", 0, "store_each");
	}
	mas_destroy(&mas);
	mt_set_in_rcu(dst);
}

/* Same ranges in the same order, each mapped to the twin of the source's VMA. */
static void verify_copy(struct maple_tree *src, struct maple_tree *dst,
			unsigned long n, const char *method)
{
	MA_STATE(a, src, 0, 0);
	MA_STATE(b, dst, 0, 0);
	struct fake_vma *va, *vb;
	unsigned long seen = 0;

	for (;;) {
		va = mas_find(&a, ULONG_MAX);
		vb = mas_find(&b, ULONG_MAX);
		if (!va && !vb)
			break;
		if (!va || !vb)
			die("copy and source differ in length", n, method);
		if (a.index != b.index || a.last != b.last)
			die("copy has a different range", n, method);
		if (vb != va->twin || vb->start != b.index || vb->last != b.last)
			die("copy maps a range to the wrong VMA", n, method);
		seen++;
	}
	if (seen != n)
		die("copy does not hold N ranges", n, method);
}

static void destroy_all(struct maple_tree *trees, unsigned long batch)
{
	unsigned long i;

	for (i = 0; i < batch; i++)
		__mt_destroy(&trees[i]);
	rcu_barrier();	/* frees go through call_rcu: settle outside timing */
}

/* Nodes one copy holds, from the harness's count of live slab objects. */
static long nodes_of_one_copy(struct maple_tree *src, unsigned long n,
			      enum method m)
{
	struct maple_tree dst;
	double ignored = 0;
	long before, after;

	rcu_barrier();
	before = uatomic_read(&nr_allocated);
	if (m == M_MT_DUP)
		copy_mt_dup(src, &dst, &ignored);
	else if (m == M_BULK_INSERT)
		copy_bulk_insert(src, &dst, n);
	else
		copy_store_each(src, &dst);
	rcu_barrier();
	after = uatomic_read(&nr_allocated);
	verify_copy(src, &dst, n, method_name[m]);
	mt_validate(&dst);
	destroy_all(&dst, 1);
	return after - before;
}

static void run_sample(int rep, unsigned long n, enum method m,
		       struct maple_tree *src, double min_seconds)
{
	/* about 200k ranges copied per batch, at least one tree per batch */
	unsigned long batch = n >= 200000 ? 1 : 200000 / n;
	struct maple_tree *trees = calloc(batch, sizeof(*trees));
	double elapsed = 0, struct_seconds = 0, t0;
	unsigned long copies = 0, i;
	int first = 1;
	long nodes;

	if (!trees) {
		perror("calloc");
		exit(1);
	}
	nodes = nodes_of_one_copy(src, n, m);
	while (elapsed < min_seconds || copies < 3) {
		t0 = now();
		for (i = 0; i < batch; i++) {
			if (m == M_MT_DUP)
				copy_mt_dup(src, &trees[i], &struct_seconds);
			else if (m == M_BULK_INSERT)
				copy_bulk_insert(src, &trees[i], n);
			else
				copy_store_each(src, &trees[i]);
		}
		elapsed += now() - t0;
		copies += batch;
		if (first) {
			for (i = 0; i < batch; i++)
				verify_copy(src, &trees[i], n, method_name[m]);
			first = 0;
		}
		destroy_all(trees, batch);
	}
	free(trees);

	printf("{\"kind\": \"maple_copy\", \"rep\": %d, \"n\": %lu, "
	       "\"method\": \"%s\", \"copies\": %lu, \"seconds\": %.6f, "
	       "\"us_per_copy\": %.4f, \"ns_per_entry\": %.3f, \"nodes\": %ld",
	       rep, n, method_name[m], copies, elapsed,
	       elapsed / copies * 1e6, elapsed / copies / n * 1e9, nodes);
	if (m == M_MT_DUP)
		printf(", \"us_mt_dup_only\": %.4f",
		       struct_seconds / copies * 1e6);
	printf(", \"verified\": true}\n");
	fflush(stdout);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-n N1,N2,...] [-r reps] [-t min_seconds] [-g gap_pages]\n"
		"  -n  range counts (default 21,221,1621,12821,51221)\n"
		"  -r  repetitions, interleaved over N and methods (default 3)\n"
		"  -t  minimum timed seconds per sample (default 0.2)\n"
		"  -g  unmapped pages between ranges (default 0: contiguous)\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long counts[MAX_COUNTS], gap = 0;
	double min_seconds = 0.2;
	int nr_counts = 0, reps = 3, opt, r, c, k;

	while ((opt = getopt(argc, argv, "n:r:t:g:h")) != -1) {
		switch (opt) {
		case 'n': nr_counts = parse_counts("maple_dup_vs_insert", optarg, counts); break;
		case 'r': reps = atoi(optarg); break;
		case 't': min_seconds = atof(optarg); break;
		case 'g': gap = strtoul(optarg, NULL, 10); break;
		default: usage(argv[0]);
		}
	}
	if (!nr_counts)
		nr_counts = parse_counts("maple_dup_vs_insert", "21,221,1621,12821,51221", counts);
	if (reps < 1 || min_seconds < 0)
		usage(argv[0]);

	maple_tree_init();
	for (r = 0; r < reps; r++) {
		for (c = 0; c < nr_counts; c++) {
			unsigned long n = counts[c];
			struct fake_vma *vmas = make_vmas(n, gap);
			struct maple_tree src;

			build_source(&src, vmas, n);
			mt_validate(&src);
			for (k = 0; k < NR_METHODS; k++) {
				enum method m = (k + r + c) % NR_METHODS;

				run_sample(r, n, m, &src, min_seconds);
			}
			destroy_all(&src, 1);
			free(vmas);
		}
	}
	rcu_barrier();
	return 0;
}
