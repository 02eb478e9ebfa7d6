/*
 * page.h - a 64-byte record laid out like Linux 6.12's struct page on x86-64
 * (Debian amd64 config: SPARSEMEM_VMEMMAP, MEMCG, NUMA_BALANCING, LRU_GEN,
 * NODES_SHIFT=10, NR_CPUS=8192, five zones), plus what the benchmark's
 * translation units share.
 */
#ifndef MEMINIT_BENCH_PAGE_H
#define MEMINIT_BENCH_PAGE_H

#include <stddef.h>

/* ---- page->flags layout (include/linux/page-flags-layout.h, mmzone.h) ----
 * | NODE (10) | ZONE (3) | LAST_CPUPID (21) | LRU gen/refs | ... | flags |
 * SECTIONS_WIDTH is 0 with SPARSEMEM_VMEMMAP, so no section bits.  */
#define PG_head 6
#define PG_reserved 13
#define NODES_PGSHIFT 54
#define NODES_MASK 0x3ffUL
#define ZONES_PGSHIFT 51
#define ZONES_MASK 0x7UL
#define LAST_CPUPID_PGSHIFT 30
#define LAST_CPUPID_MASK ((1UL << 21) - 1)
#define ZONE_DEVICE_IDX 4UL /* DMA, DMA32, NORMAL, MOVABLE, DEVICE */
#define PAGES_PER_SECTION 32768UL /* SECTION_SIZE_BITS 27 - PAGE_SHIFT 12 */
#define POISON_POINTER_DELTA 0xdead000000000000UL
#define TAIL_MAPPING (POISON_POINTER_DELTA + 0x400)

/* enum memory_type (include/linux/memremap.h) */
enum memory_type {
	MEMORY_DEVICE_PRIVATE = 1,
	MEMORY_DEVICE_COHERENT,
	MEMORY_DEVICE_FS_DAX,
	MEMORY_DEVICE_GENERIC,
	MEMORY_DEVICE_PCI_P2PDMA,
};

struct dev_pagemap {
	enum memory_type type;
	unsigned long vmemmap_shift;
	/*
	 * the kernel's vmemmap_can_optimize() for this pgmap: on x86-64 a
	 * compound pgmap without an altmap (devdax map=mem) maps only
	 * VMEMMAP_RESERVE_NR pages of each compound page's struct pages and
	 * points the rest of its vmemmap at the second: layout o9dedup
	 */
	int vmemmap_optimized;
};

#define VMEMMAP_RESERVE_NR 2
#define PAGE_SIZE_4K 4096UL

/* struct pages the init writes per compound page (the kernel's compound_nr_pages()) */
static inline unsigned long compound_nr_pages(const struct dev_pagemap *pgmap)
{
	/* the kernel optimises only compound pages whose struct pages span more */
	if (pgmap->vmemmap_optimized &&
	    (64UL << pgmap->vmemmap_shift) / PAGE_SIZE_4K > VMEMMAP_RESERVE_NR)
		return VMEMMAP_RESERVE_NR * (PAGE_SIZE_4K / 64);
	return 1UL << pgmap->vmemmap_shift;
}

/* struct pages the init of nr_pfns PFNs (whole compound pages) writes */
static inline unsigned long memmap_written_pages(unsigned long nr_pfns,
						 const struct dev_pagemap *pgmap)
{
	return (nr_pfns >> pgmap->vmemmap_shift) * compound_nr_pages(pgmap);
}

struct list_head {
	struct list_head *next, *prev;
};

/* struct page, field for field (include/linux/mm_types.h, 6.12) */
struct page {
	unsigned long flags;			/*  0 */
	union {					/*  8 .. 47 */
		struct {
			struct list_head lru;	/*  8, 16 */
			void *mapping;		/* 24 */
			unsigned long index;	/* 32 */
			unsigned long private;	/* 40 */
		};
		struct {			/* tail pages */
			unsigned long compound_head; /* 8, bit 0 set */
		};
		struct {			/* ZONE_DEVICE pages */
			struct dev_pagemap *pgmap;   /* 8 */
			void *zone_device_data;      /* 16 */
		};
	};
	int _mapcount;				/* 48, atomic_t */
	int _refcount;				/* 52, atomic_t */
	unsigned long memcg_data;		/* 56 */
};

/* The first three struct pages of a large folio (struct folio, 6.12). */
struct folio {
	union {
		struct {
			unsigned long flags;
			struct list_head lru;
			void *mapping;
			unsigned long index;
			void *private;
			int _mapcount;
			int _refcount;
			unsigned long memcg_data;
		};
		struct page page;
	};
	union {
		struct {
			unsigned long _flags_1;
			unsigned long _head_1;
			int _large_mapcount;
			int _entire_mapcount;
			int _nr_pages_mapped;
			int _pincount;
			unsigned int _folio_nr_pages;
		};
		struct page __page_1;
	};
	union {
		struct {
			unsigned long _flags_2;
			unsigned long _head_2;
			struct list_head _deferred_list;
		};
		struct page __page_2;
	};
};

_Static_assert(sizeof(struct page) == 64, "struct page must be 64 bytes");
_Static_assert(offsetof(struct page, mapping) == 24, "mapping at 24");
_Static_assert(offsetof(struct page, _mapcount) == 48, "_mapcount at 48");
_Static_assert(offsetof(struct page, memcg_data) == 56, "memcg_data at 56");
_Static_assert(offsetof(struct folio, _large_mapcount) == 64 + 16, "_large_mapcount");
_Static_assert(offsetof(struct folio, _folio_nr_pages) == 64 + 32, "_folio_nr_pages");
_Static_assert(offsetof(struct folio, _deferred_list) == 128 + 16, "_deferred_list");

/* One thread's share of a fill: pages [map + first, map + first + nr). */
struct fill_job {
	struct page *map;		/* the "vmemmap": PFN base_pfn is map[0] */
	unsigned long base_pfn;
	unsigned long start_pfn;	/* first PFN of this job (compound aligned) */
	unsigned long nr_pages;		/* multiple of 1 << order */
	unsigned int order;		/* 0 or 9 (pgmap->vmemmap_shift) */
	unsigned long zone_idx, nid;	/* runtime values, as in the kernel */
	struct dev_pagemap *pgmap;
	int bug;			/* verify self-test: inject a known bug */
	void *scratch;			/* per-thread cache-hot block (rep movsb) */
	size_t scratch_bytes;
	/*
	 * Chunked split: a worker runs many jobs (chunks).  tpl, when set, keeps
	 * the templates its first chunk derived from the slow path, so later
	 * chunks reuse them instead of running the slow path again; no_drain
	 * leaves the final SFENCE to the worker, once after its last chunk.
	 */
	struct templates *tpl;
	int no_drain;
};

#define BUG_NONE 0
#define BUG_DEFERRED_LIST 1	/* fast o9: full prep_compound_head after tails */
#define BUG_CLEAR_OVERRUN 2	/* clear: one line too many */
#define BUG_TEMPLATE_REFCOUNT 3	/* fast o0: wrong refcount in the last record */
#define BUG_CHUNK_ALIGN 4	/* chunked split: chunks rounded to 64 pages, not 512 */
#define BUG_AUTO_ROUND 5	/* learning auto: the rest of a chunk starts a piece late */
#define BUG_AUTO_STREAM 6	/* learning auto: streams whatever the round found */
#define BUG_AUTO_TEMPLATE 7	/* learning auto: copies whatever the round found */
#define BUG_AUTO_NO_WALK 8	/* learning auto: ignores the hint that the memmap is walked next */
#define BUG_AUTO_NO_EARLY 9	/* learning auto: a decisive first pair does not end the round */
#define BUG_AUTO_WALK_SHARE 10	/* learning auto: the walk hint counts all of every read-back */
#define BUG_AUTO_LEAD_UNCHECKED 11	/* learning auto: one slow template piece ends a round with streaming */
#define BUG_AUTO_LATE_IGNORED 12	/* learning auto: rounds past twice the LLC keep the 1/32 margin */
#define BUG_AUTO_FIRST_OVERRUN 13	/* learning auto: a round's first write runs past what it counts */
#define BUG_AUTO_SWITCH_IGNORED 14	/* learning auto: rounds beside other threads keep the 1/32 margin */
#define BUG_AUTO_SPAN_IGNORED 15	/* learning auto: a tie the spans settle keeps the pieces' verdict */
#define BUG_AUTO_BLIND 16	/* learning auto: a chunk taken before any verdict has no round unless a power of two */

/* kslow.c: the kernel's slow path, compiled like the kernel */
void slow_memmap_init_zone_device(const struct fill_job *j);
void saferet_memmap_init_zone_device(const struct fill_job *j);
/* stubs.c */
void bench_cond_resched(void);
void bench_warn(const char *what);

/* kfill.c: fast paths that use general-purpose registers only */
void fill_template(const struct fill_job *j);
void fill_template_pre(const struct fill_job *j);
void fill_movnti(const struct fill_job *j);
void fill_movnti_pre(const struct fill_job *j);
void fill_repmovsb(const struct fill_job *j);
/* vfill.c: fast paths with SSE2 / AVX-512 streaming stores */
void fill_movntdq(const struct fill_job *j);
void fill_movntdq_pre(const struct fill_job *j);
void fill_avx512nt(const struct fill_job *j);
void fill_avx512nt_pre(const struct fill_job *j);

/* clear.c: clear [p, p + len) with the given unit (bytes per call) */
void clear_stosb(void *p, size_t len, size_t unit);
void clear_stosq(void *p, size_t len, size_t unit);
void clear_movnti(void *p, size_t len, size_t unit);
void clear_avx512nt(void *p, size_t len, size_t unit);
void clear_clzero(void *p, size_t len, size_t unit);
void clear_memset(void *p, size_t len, size_t unit);
void clear_stosb_desc(void *p, size_t len, size_t folio);
/* folio by folio, the fault at subpage fault_idx(folio pages) of each folio */
#define FAULT_FIRST 0
#define FAULT_MIDDLE 1
#define FAULT_LAST 2
void clear_folios_php(void *p, size_t len, size_t folio, int fault);
void clear_folios_fz(void *p, size_t len, size_t unit, size_t folio, int fault);
void warm_zero(void *p, size_t len);
void fill_stosb_nz(void *p, size_t len, size_t unit);
void fill_avx512nt_nz(void *p, size_t len, size_t unit);

/* Templates derived from slow-path-initialised records (fill_common.h). */
struct templates {
	unsigned long head[8];		/* head page (PG_head set for order > 0) */
	unsigned long tail[8];		/* tail page, compound_head word patched */
	unsigned long first_tail[8];	/* tail 1 with prep_compound_head data */
	int valid;
};

#endif
