/*
 * vfill.c - streaming fast paths with vector registers (in the kernel these
 * need kernel_fpu_begin()/end() around the loop):
 *   movntdq   - 4 x MOVNTDQ (16-byte streaming stores, SSE2) + SFENCE
 *   avx512nt  - 1 x VMOVNTDQ zmm (one full 64-byte line per store) + SFENCE
 */
#include <immintrin.h>

#include "fill_common.h"

typedef struct {
	__m128i x[4];
} xtpl;

static inline xtpl xload(const unsigned long *s)
{
	xtpl t;

	for (int i = 0; i < 4; i++)
		t.x[i] = _mm_loadu_si128((const __m128i *)(s + 2 * i));
	return t;
}

#define XPUT(p, t)								\
	do {									\
		__m128i *d_ = (__m128i *)(p);					\
		_mm_stream_si128(d_ + 0, (t).x[0]);				\
		_mm_stream_si128(d_ + 1, (t).x[1]);				\
		_mm_stream_si128(d_ + 2, (t).x[2]);				\
		_mm_stream_si128(d_ + 3, (t).x[3]);				\
	} while (0)
#define SFENCE() _mm_sfence()

DEFINE_FILL(fill_movntdq, xtpl, xload, XPUT, SFENCE, 0)
DEFINE_FILL(fill_movntdq_pre, xtpl, xload, XPUT, SFENCE, 1)

#pragma GCC push_options
#pragma GCC target("avx512f")
static inline __m512i zload(const unsigned long *s)
{
	return _mm512_loadu_si512((const void *)s);
}

#define ZPUT(p, t) _mm512_stream_si512((void *)(p), (t))

DEFINE_FILL(fill_avx512nt, __m512i, zload, ZPUT, SFENCE, 0)
DEFINE_FILL(fill_avx512nt_pre, __m512i, zload, ZPUT, SFENCE, 1)
#pragma GCC pop_options
