/*
 * kfill.c - fast paths a kernel can use without touching FPU/vector state:
 * built with -mgeneral-regs-only, like kernel code.
 *   template  - plain 64-byte copy: 8 x 8-byte MOV from registers
 *   movnti    - 8 x MOVNTI (memcpy_flushcache()'s store) + SFENCE drain
 *   repmovsb  - REP MOVSB from a cache-hot block of replicated records
 */
#include "fill_common.h"

typedef struct {
	unsigned long w[8];
} gtpl;

static inline gtpl gload(const unsigned long *s)
{
	gtpl t;

	for (int i = 0; i < 8; i++)
		t.w[i] = s[i];
	return t;
}

#define GPUT(p, t)								\
	do {									\
		unsigned long *d_ = (unsigned long *)(p);			\
		d_[0] = (t).w[0]; d_[1] = (t).w[1]; d_[2] = (t).w[2];		\
		d_[3] = (t).w[3]; d_[4] = (t).w[4]; d_[5] = (t).w[5];		\
		d_[6] = (t).w[6]; d_[7] = (t).w[7];				\
	} while (0)

#define NOP_DRAIN() do { } while (0)

#define MOVNTI(dst, v) asm volatile("movnti %1, %0" : "=m"(dst) : "r"(v))
#define NTPUT(p, t)								\
	do {									\
		unsigned long *d_ = (unsigned long *)(p);			\
		MOVNTI(d_[0], (t).w[0]); MOVNTI(d_[1], (t).w[1]);		\
		MOVNTI(d_[2], (t).w[2]); MOVNTI(d_[3], (t).w[3]);		\
		MOVNTI(d_[4], (t).w[4]); MOVNTI(d_[5], (t).w[5]);		\
		MOVNTI(d_[6], (t).w[6]); MOVNTI(d_[7], (t).w[7]);		\
	} while (0)
#define SFENCE() asm volatile("sfence" ::: "memory")

DEFINE_FILL(fill_template, gtpl, gload, GPUT, NOP_DRAIN, 0)
DEFINE_FILL(fill_template_pre, gtpl, gload, GPUT, NOP_DRAIN, 1)
DEFINE_FILL(fill_movnti, gtpl, gload, NTPUT, SFENCE, 0)
DEFINE_FILL(fill_movnti_pre, gtpl, gload, NTPUT, SFENCE, 1)

static inline void rep_movsb(void *d, const void *s, unsigned long n)
{
	asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

/*
 * REP MOVSB from a replicated block of scratch_bytes (default 4 KiB).
 * Order 0: the block holds head records.  Compound: the head and tail 1 (with
 * the compound-head data already in it) are written with plain stores, the
 * block holds tail records whose compound_head words are re-pointed once per
 * compound, and the other tails it writes (compound_nr_pages()) are copied
 * from it block by block.  (Blocks of
 * 32 KiB and more copy at about half the speed on this CPU; see README.)
 */
void fill_repmovsb(const struct fill_job *j0)
{
	struct templates T;
	struct fill_job j;
	struct page *p, *end;
	unsigned long *blk = j0->scratch;
	unsigned long per = j0->scratch_bytes / 64, i;

	get_templates(j0, &T, &j);
	p = j.map + (j.start_pfn - j.base_pfn);
	end = p + j.nr_pages;
	if (j.order == 0) {
		for (i = 0; i < per; i++)
			copy_words(blk + 8 * i, T.head);
		while (p < end) {
			unsigned long n = (unsigned long)(end - p) < per ? (unsigned long)(end - p) : per;

			rep_movsb(p, blk, n * 64);
			p += n;
		}
		inject_template_bug(j0);
		return;
	}
	unsigned long unit = 1UL << j.order;
	gtpl h = gload(T.head);

	for (i = 0; i < per; i++)
		copy_words(blk + 8 * i, T.tail);
	for (; p < end; p += unit) {
		unsigned long ch = (unsigned long)p + 1, w[8];
		struct page *q = p + 2, *qend = p + compound_nr_pages(j.pgmap);

		copy_words(w, T.first_tail);
		w[1] = ch;
		gtpl ft = gload(w);

		GPUT(p, h);
		GPUT(p + 1, ft);
		for (i = 0; i < per; i++)
			blk[8 * i + 1] = ch;
		while (q < qend) {
			unsigned long n = (unsigned long)(qend - q) < per ? (unsigned long)(qend - q) : per;

			rep_movsb(q, blk, n * 64);
			q += n;
		}
	}
}
