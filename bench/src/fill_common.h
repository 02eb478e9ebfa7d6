/*
 * fill_common.h - the shape shared by every template-based fast path:
 * initialise the first unit of a job (one page, or one compound page)
 * through the replayed slow path, take its records as templates, then write
 * every further record from the templates.  Included by kfill.c and vfill.c,
 * each of which supplies how one 64-byte record is stored (PUT) and drained.
 */
#ifndef MEMINIT_BENCH_FILL_COMMON_H
#define MEMINIT_BENCH_FILL_COMMON_H

#include "page.h"

#define F_WRITE_ONCE(x, val) (*(volatile __typeof__(x) *)&(x) = (val))

static inline void copy_words(unsigned long *d, const unsigned long *s)
{
	for (int i = 0; i < 8; i++)
		d[i] = s[i];
}

/*
 * Run the slow path on the job's first unit and derive the templates from
 * what it wrote.  *rest receives the remainder of the job.
 */
static inline void first_unit_templates(const struct fill_job *j, struct templates *t,
					struct fill_job *rest)
{
	struct fill_job one = *j;
	unsigned long unit = 1UL << j->order;
	const unsigned long *w;

	one.nr_pages = unit;
	slow_memmap_init_zone_device(&one);
	w = (const unsigned long *)(j->map + (j->start_pfn - j->base_pfn));
	copy_words(t->head, w);
	if (j->order) {
		copy_words(t->first_tail, w + 8);
		copy_words(t->tail, w + 16);	/* page 2: a plain tail */
	} else {
		copy_words(t->first_tail, w);
		copy_words(t->tail, w);
	}
	*rest = *j;
	rest->start_pfn += unit;
	rest->nr_pages -= unit;
}

/*
 * What prep_compound_head() leaves behind in 6.12, written after the tails.
 * Only the first tail keeps it: in the 6.12 slow path the INIT_LIST_HEAD()
 * of folio->_deferred_list (page 2) is overwritten when page 2 itself is
 * initialised, so a fast path that redoes it after the tails would not be
 * bit-for-bit equal (BUG_DEFERRED_LIST shows the verifier catches that).
 */
/*
 * The templates of a job: the worker's cached ones when it already derived
 * them from an earlier chunk (the records do not depend on the PFN on x86-64,
 * and compound_head is re-pointed per compound anyway), else from the slow
 * path on this job's first unit, cached for the next chunk.
 */
static inline void get_templates(const struct fill_job *j, struct templates *t,
				 struct fill_job *rest)
{
	if (j->tpl && j->tpl->valid) {
		*t = *j->tpl;
		*rest = *j;
		return;
	}
	first_unit_templates(j, t, rest);
	t->valid = 1;
	if (j->tpl)
		*j->tpl = *t;
}

static inline void fast_prep_compound_head(struct page *head, unsigned int order, int bug)
{
	struct folio *folio = (struct folio *)head;

	if (!(((const volatile unsigned long *)&folio->flags)[0] & (1UL << PG_head)))
		bench_warn("fast folio_set_order");
	folio->_flags_1 = (folio->_flags_1 & ~0xffUL) | order;
	folio->_folio_nr_pages = 1U << order;
	F_WRITE_ONCE(folio->_large_mapcount, -1);
	F_WRITE_ONCE(folio->_entire_mapcount, -1);
	F_WRITE_ONCE(folio->_nr_pages_mapped, 0);
	F_WRITE_ONCE(folio->_pincount, 0);
	if (bug == BUG_DEFERRED_LIST) {
		F_WRITE_ONCE(folio->_deferred_list.next, &folio->_deferred_list);
		F_WRITE_ONCE(folio->_deferred_list.prev, &folio->_deferred_list);
	}
}

static inline void inject_template_bug(const struct fill_job *j)
{
	if (j->bug == BUG_TEMPLATE_REFCOUNT && j->nr_pages > 1) {
		struct page *last = j->map + (j->start_pfn - j->base_pfn) + j->nr_pages - 1;
		last->_refcount ^= 1;
	}
}

/*
 * DEFINE_FILL(name, tpl_t, LOAD, PUT, DRAIN, PRE)
 *   tpl_t: a record held in registers; LOAD(const unsigned long *) -> tpl_t;
 *   PUT(struct page *, tpl_t) stores one record; DRAIN() orders the stores
 *   before later normal stores/reads; PRE = 1 writes the first tail with the
 *   compound-head data already in it (no drain and no read per compound),
 *   PRE = 0 writes it as a plain tail and runs prep_compound_head after the
 *   tails, after a drain, as the series does.
 */
#define DEFINE_FILL(name, tpl_t, LOAD, PUT, DRAIN, PRE)				\
void name(const struct fill_job *j0)						\
{										\
	struct templates T;							\
	struct fill_job j;							\
	struct page *p, *end;							\
										\
	get_templates(j0, &T, &j);						\
	p = j.map + (j.start_pfn - j.base_pfn);					\
	end = p + j.nr_pages;							\
	if (j.order == 0) {							\
		tpl_t h = LOAD(T.head);						\
		for (; p < end; p++)						\
			PUT(p, h);						\
		if (!j0->no_drain)						\
			DRAIN();						\
		inject_template_bug(j0);					\
		return;								\
	}									\
	unsigned long unit = 1UL << j.order;					\
	/* struct pages written per compound page: fewer than unit where	\
	 * the vmemmap is optimised (compound_nr_pages()) */			\
	unsigned long written = compound_nr_pages(j.pgmap);			\
	tpl_t h = LOAD(T.head);							\
	for (; p < end; p += unit) {						\
		unsigned long w[8];						\
		struct page *q;							\
		copy_words(w, PRE ? T.first_tail : T.tail);			\
		w[1] = (unsigned long)p + 1;					\
		tpl_t ft = LOAD(w);						\
		copy_words(w, T.tail);						\
		w[1] = (unsigned long)p + 1;					\
		tpl_t tt = LOAD(w);						\
		PUT(p, h);							\
		PUT(p + 1, ft);							\
		for (q = p + 2; q < p + written; q++)				\
			PUT(q, tt);						\
		if (!PRE) {							\
			DRAIN();						\
			fast_prep_compound_head(p, j.order, j.bug);		\
		}								\
	}									\
	if (!j0->no_drain)							\
		DRAIN();							\
}

#endif
