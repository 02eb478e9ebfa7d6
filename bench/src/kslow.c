/*
 * kslow.c - replay of Linux 6.12's per-PFN ZONE_DEVICE memmap init
 * (mm/mm_init.c: memmap_init_zone_device() -> __init_zone_device_page() ->
 * __init_single_page(), memmap_init_compound(), prep_compound_tail(),
 * prep_compound_head()).
 *
 * How this stays honest: the code below keeps the kernel's semantics, not
 * just its stores.  Plain C assignments stay plain (the compiler may merge
 * them, as it may in the kernel); WRITE_ONCE()/atomic_set() are volatile
 * stores; __set_bit() is the x86 "bts" asm with a "memory" clobber, as in
 * arch/x86/include/asm/bitops.h; test_bit() is a volatile load; the
 * page_ref_set tracepoint is a 5-byte NOP like a disabled static key;
 * __init_single_page() is an out-of-line function (it has six callers in
 * mm/), cond_resched() is a call into another file.  The Makefile builds this
 * file alone, with the kernel's code-generation flags (-O2, no SSE/AVX, no
 * strict aliasing) and without LTO, so the compiler gets exactly the freedom
 * it has in the kernel and no more.  The same file is built a second time
 * with -mfunction-return=thunk-extern to model the AMD "Safe RET" (SRSO)
 * return thunk that Debian kernels use on Zen 3/4.
 */
#include "page.h"

#ifndef SLOW_PREFIX
#define SLOW_PREFIX slow
#endif
#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define NAME(n) CAT(SLOW_PREFIX, n)

#define __always_inline inline __attribute__((__always_inline__))
#define noinline __attribute__((__noinline__))

#define WRITE_ONCE(x, val) (*(volatile __typeof__(x) *)&(x) = (val))
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))

static __always_inline void atomic_set(int *v, int i)
{
	WRITE_ONCE(*v, i);
}

/* arch___set_bit(): non-atomic, but an asm with a memory clobber */
static __always_inline void __set_bit(long nr, unsigned long *addr)
{
	asm volatile("btsq %1,%0" : : "m"(*(volatile long *)addr), "Ir"(nr) : "memory");
}

/* constant_test_bit(): a volatile load */
static __always_inline int test_bit(long nr, const unsigned long *addr)
{
	return ((1UL << (nr & 63)) & ((const volatile unsigned long *)addr)[nr >> 6]) != 0;
}

/* a disabled static key (jump label): a 5-byte NOP, no clobber */
static __always_inline int page_ref_tracepoint_active(void)
{
	asm volatile(".byte 0x0f,0x1f,0x44,0x00,0x00");
	return 0;
}

static __always_inline void INIT_LIST_HEAD(struct list_head *list)
{
	WRITE_ONCE(list->next, list);
	WRITE_ONCE(list->prev, list);
}

static __always_inline void set_page_count(struct page *page, int v)
{
	atomic_set(&page->_refcount, v);
	if (page_ref_tracepoint_active())
		bench_warn("page_ref_set");
}

static __always_inline void init_page_count(struct page *page)
{
	set_page_count(page, 1);
}

/* mm_zero_struct_page() for sizeof(struct page) == 64 */
static __always_inline void mm_zero_struct_page(struct page *page)
{
	unsigned long *_pp = (void *)page;

	_pp[7] = 0;
	_pp[6] = 0;
	_pp[5] = 0;
	_pp[4] = 0;
	_pp[3] = 0;
	_pp[2] = 0;
	_pp[1] = 0;
	_pp[0] = 0;
}

static __always_inline void set_page_zone(struct page *page, unsigned long zone)
{
	page->flags &= ~(ZONES_MASK << ZONES_PGSHIFT);
	page->flags |= (zone & ZONES_MASK) << ZONES_PGSHIFT;
}

static __always_inline void set_page_node(struct page *page, unsigned long node)
{
	page->flags &= ~(NODES_MASK << NODES_PGSHIFT);
	page->flags |= (node & NODES_MASK) << NODES_PGSHIFT;
}

static __always_inline void set_page_links(struct page *page, unsigned long zone,
					   unsigned long node, unsigned long pfn)
{
	(void)pfn; /* no SECTION_IN_PAGE_FLAGS with SPARSEMEM_VMEMMAP */
	set_page_zone(page, zone);
	set_page_node(page, node);
}

static __always_inline void page_cpupid_reset_last(struct page *page)
{
	page->flags |= LAST_CPUPID_MASK << LAST_CPUPID_PGSHIFT;
}

noinline void NAME(__init_single_page)(struct page *page, unsigned long pfn,
				       unsigned long zone, int nid)
{
	mm_zero_struct_page(page);
	set_page_links(page, zone, nid, pfn);
	init_page_count(page);
	atomic_set(&page->_mapcount, -1);
	page_cpupid_reset_last(page);
	/* page_kasan_tag_reset(): nothing without KASAN_SW_TAGS/HW_TAGS */
	INIT_LIST_HEAD(&page->lru);
	/* no WANT_PAGE_VIRTUAL on x86-64 */
}

static void NAME(__init_zone_device_page)(struct page *page, unsigned long pfn,
					  unsigned long zone_idx, int nid,
					  struct dev_pagemap *pgmap)
{
	NAME(__init_single_page)(page, pfn, zone_idx, nid);
	__set_bit(PG_reserved, &page->flags);		/* __SetPageReserved() */
	page->pgmap = pgmap;
	page->zone_device_data = (void *)0;
	if (pgmap->type == MEMORY_DEVICE_PRIVATE ||
	    pgmap->type == MEMORY_DEVICE_COHERENT)
		set_page_count(page, 0);
}

static __always_inline void set_compound_head(struct page *page, struct page *head)
{
	WRITE_ONCE(page->compound_head, (unsigned long)head + 1);
}

static __always_inline void prep_compound_tail(struct page *head, int tail_idx)
{
	struct page *p = head + tail_idx;

	p->mapping = (void *)TAIL_MAPPING;
	set_compound_head(p, head);
	p->private = 0;				/* set_page_private() */
}

static __always_inline void folio_set_order(struct folio *folio, unsigned int order)
{
	/* WARN_ON_ONCE(!order || !folio_test_large(folio)) */
	if (!order || !test_bit(PG_head, &folio->flags)) {
		bench_warn("folio_set_order");
		return;
	}
	folio->_flags_1 = (folio->_flags_1 & ~0xffUL) | order;
	folio->_folio_nr_pages = 1U << order;
}

static __always_inline void prep_compound_head(struct page *page, unsigned int order)
{
	struct folio *folio = (struct folio *)page;

	folio_set_order(folio, order);
	atomic_set(&folio->_large_mapcount, -1);
	atomic_set(&folio->_entire_mapcount, -1);
	atomic_set(&folio->_nr_pages_mapped, 0);
	atomic_set(&folio->_pincount, 0);
	if (order > 1)
		INIT_LIST_HEAD(&folio->_deferred_list);
}

static void NAME(memmap_init_compound)(struct page *head, unsigned long head_pfn,
				       unsigned long zone_idx, int nid,
				       struct dev_pagemap *pgmap,
				       unsigned long nr_pages)
{
	unsigned long pfn, end_pfn = head_pfn + nr_pages;
	unsigned int order = pgmap->vmemmap_shift;

	__set_bit(PG_head, &head->flags);		/* __SetPageHead() */
	for (pfn = head_pfn + 1; pfn < end_pfn; pfn++) {
		struct page *page = head + (pfn - head_pfn);

		NAME(__init_zone_device_page)(page, pfn, zone_idx, nid, pgmap);
		prep_compound_tail(head, pfn - head_pfn);
		set_page_count(page, 0);
		if (pfn == head_pfn + 1)
			prep_compound_head(head, order);
	}
}

/*
 * memmap_init_zone_device() for one job.  compound_nr_pages() (page.h) is the
 * whole compound where the kernel writes every struct page of one (an
 * altmap, pmem map=dev), the first 128 of 512 with vmemmap optimisation
 * (devdax map=mem on x86-64: layout o9dedup).
 */
void NAME(memmap_init_zone_device)(const struct fill_job *j)
{
	struct page *vmemmap = j->map - j->base_pfn;	/* pfn_to_page(pfn) */
	struct dev_pagemap *pgmap = j->pgmap;
	unsigned long pfns_per_compound = 1UL << pgmap->vmemmap_shift;
	unsigned long pfn, end_pfn = j->start_pfn + j->nr_pages;
	unsigned long zone_idx = j->zone_idx;
	int nid = (int)j->nid;

	for (pfn = j->start_pfn; pfn < end_pfn; pfn += pfns_per_compound) {
		struct page *page = vmemmap + pfn;

		NAME(__init_zone_device_page)(page, pfn, zone_idx, nid, pgmap);
		if ((pfn & (PAGES_PER_SECTION - 1)) == 0)
			bench_cond_resched();
		if (pfns_per_compound == 1)
			continue;
		NAME(memmap_init_compound)(page, pfn, zone_idx, nid, pgmap,
					   compound_nr_pages(pgmap));
	}
}
