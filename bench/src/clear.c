/*
 * clear.c - zeroing strategies.  Each clears [p, p + len) in calls of at most
 * `unit` bytes, the way a kernel clears a huge folio either one 4 KiB page at
 * a time (clear_page_erms(): REP STOSB of 4096 bytes, with a cond_resched()
 * between pages) or in extents (clear_pages(): one REP STOSB/STOSQ per unit).
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "page.h"

static inline void rep_stosb(void *p, size_t n)
{
	asm volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(0) : "memory");
}

static inline void rep_stosq(void *p, size_t n)
{
	n /= 8;
	asm volatile("rep stosq" : "+D"(p), "+c"(n) : "a"(0UL) : "memory");
}

#define CHUNKED(body)								\
	do {									\
		char *c_ = p;							\
		while (len) {							\
			size_t n = len < unit ? len : unit;			\
			body;							\
			bench_cond_resched();					\
			c_ += n;						\
			len -= n;						\
		}								\
	} while (0)

void clear_stosb(void *p, size_t len, size_t unit)
{
	CHUNKED(rep_stosb(c_, n));
}

void clear_stosq(void *p, size_t len, size_t unit)
{
	CHUNKED(rep_stosq(c_, n));
}

/* The order 6.12's process_huge_page() uses for a fault at the first subpage
 * of a folio: subpages from the last to the first (target cleared last). */
void clear_stosb_desc(void *p, size_t len, size_t folio)
{
	char *c = p;

	for (size_t off = 0; off < len; off += folio) {
		size_t n = len - off < folio ? len - off : folio;

		for (size_t i = n; i >= 4096; i -= 4096) {
			rep_stosb(c + off + i - 4096, 4096);
			bench_cond_resched();
		}
	}
}

static void ntq_chunk(char *c, size_t n)
{
	for (size_t i = 0; i < n; i += 8)
		asm volatile("movnti %1, %0" : "=m"(*(unsigned long *)(c + i)) : "r"(0UL));
	asm volatile("sfence" ::: "memory");
}

void clear_movnti(void *p, size_t len, size_t unit)
{
	CHUNKED(ntq_chunk(c_, n));
}

__attribute__((target("avx512f"))) static void nt512_chunk(char *c, size_t n)
{
	__m512i z = _mm512_setzero_si512();

	for (size_t i = 0; i < n; i += 64)
		_mm512_stream_si512((void *)(c + i), z);
	_mm_sfence();
}

void clear_avx512nt(void *p, size_t len, size_t unit)
{
	CHUNKED(nt512_chunk(c_, n));
}

static void clzero_chunk(char *c, size_t n)
{
	for (size_t i = 0; i < n; i += 64)
		asm volatile("clzero" : : "a"(c + i) : "memory");
	asm volatile("sfence" ::: "memory");
}

void clear_clzero(void *p, size_t len, size_t unit)
{
	CHUNKED(clzero_chunk(c_, n));
}

void clear_memset(void *p, size_t len, size_t unit)
{
	CHUNKED(memset(c_, 0, n));
}

/* Temporal zeroing that leaves the lines in cache (a "warm" destination). */
__attribute__((target("avx2"))) void warm_zero(void *p, size_t len)
{
	__m256i z = _mm256_setzero_si256();
	char *c = p;

	for (size_t i = 0; i < len; i += 32)
		_mm256_store_si256((__m256i *)(c + i), z);
	asm volatile("" ::: "memory");
}

/*
 * Store-bandwidth probes with non-zero data (0x5a).  Not clearing strategies:
 * on this machine lines of zeros are written much faster than lines of data
 * with the same instruction, so the bandwidth a record fill can reach must be
 * measured with data.
 */
static inline void rep_stosb_byte(void *p, size_t n, int c)
{
	asm volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(c) : "memory");
}

void fill_stosb_nz(void *p, size_t len, size_t unit)
{
	CHUNKED(rep_stosb_byte(c_, n, 0x5a));
}

__attribute__((target("avx512f"))) static void nt512_nz_chunk(char *c, size_t n)
{
	__m512i v = _mm512_set1_epi8(0x5a);

	for (size_t i = 0; i < n; i += 64)
		_mm512_stream_si512((void *)(c + i), v);
	_mm_sfence();
}

void fill_avx512nt_nz(void *p, size_t len, size_t unit)
{
	CHUNKED(nt512_nz_chunk(c_, n));
}

/* ------------------------------------------------------------------------
 * Huge-folio clearing orders, folio by folio, for a fault at a given subpage
 * of each folio (first, middle or last 4 KiB page).
 */
static unsigned long fault_idx(unsigned long nr, int fault)
{
	return fault == FAULT_FIRST ? 0 : fault == FAULT_LAST ? nr - 1 : nr / 2;
}

static inline void clear_subpage(char *base, unsigned long i)
{
	bench_cond_resched();
	rep_stosb(base + i * 4096, 4096);
}

/*
 * 6.12's process_huge_page() (the order folio_zero_user() uses for folios up
 * to MAX_ORDER_NR_PAGES): 4 KiB pages, first the far end of the folio, then
 * left-right pairs converging on the target subpage, which is cleared last.
 */
static void php_folio(char *base, unsigned long nr, unsigned long n)
{
	unsigned long i, b, l;

	if (2 * n <= nr) {
		b = 0;
		l = n;
		for (i = nr; i-- > 2 * n;)
			clear_subpage(base, i);
	} else {
		b = nr - 2 * (nr - n);
		l = nr - n;
		for (i = 0; i < b; i++)
			clear_subpage(base, i);
	}
	for (i = 0; i < l; i++) {
		clear_subpage(base, b + i);
		clear_subpage(base, b + 2 * l - 1 - i);
	}
}

void clear_folios_php(void *p, size_t len, size_t folio, int fault)
{
	char *c = p;

	for (size_t off = 0; off < len; off += folio) {
		size_t n = len - off < folio ? len - off : folio;

		if (n < 4096)
			break;
		php_folio(c + off, n / 4096, fault_idx(n / 4096, fault));
	}
}

/* clear_contig_highpages(): rep stosb extents of at most `unit` bytes */
static void clear_units(char *p, size_t len, size_t unit)
{
	CHUNKED(rep_stosb(c_, n));
}

#define FZ_RADIUS 2	/* subpages on each side of the fault cleared last */

/*
 * folio_zero_user() of the extent series: the part right of the fault's
 * neighbourhood, then the part left of it, then the neighbourhood itself
 * (fault subpage +- FZ_RADIUS) last so it stays cache-hot; each part in
 * extents of at most `unit` bytes with a cond_resched() between them.
 */
static void fz_folio(char *base, unsigned long nr, unsigned long n, size_t unit)
{
	unsigned long lo = n > FZ_RADIUS ? n - FZ_RADIUS : 0;
	unsigned long hi = n + FZ_RADIUS < nr - 1 ? n + FZ_RADIUS : nr - 1;

	if (hi + 1 < nr)
		clear_units(base + (hi + 1) * 4096, (nr - hi - 1) * 4096, unit);
	if (lo)
		clear_units(base, lo * 4096, unit);
	clear_units(base + lo * 4096, (hi - lo + 1) * 4096, unit);
}

void clear_folios_fz(void *p, size_t len, size_t unit, size_t folio, int fault)
{
	char *c = p;

	for (size_t off = 0; off < len; off += folio) {
		size_t n = len - off < folio ? len - off : folio;

		if (n < 4096)
			break;
		fz_folio(c + off, n / 4096, fault_idx(n / 4096, fault), unit);
	}
}
