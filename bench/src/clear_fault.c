/*
 * clear_fault.c - the clear methods (how the kernel clears pages, and the
 * folio orders of 6.12 and the extent series) and the fault kinds, and
 * their samples in one repetition of run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

int clear_fault = FAULT_MIDDLE;	/* fault subpage of each folio */

void do_clear(const struct clear_method *m, void *p, size_t len, size_t unit)
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

const struct clear_method clear_methods[] = {
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
const size_t n_clear_methods = N_CLEAR;

/* "stosb-4K", "stosb_desc-4K" (4 KiB pages, last to first in each 2 MiB
 * folio), "avx512nt-1G", "stosq-all" ... */
int parse_clear_case(const char *spec, const struct clear_method **m, size_t *unit)
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

/* The clear samples of repetition rep, one per clear case. */
void clear_samples(struct opts *o, int rep, char *buf, int avx512, int clzero)
{
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
}

/* The fault samples of repetition rep, one per fault kind. */
void fault_samples(struct opts *o, int rep)
{
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
}
