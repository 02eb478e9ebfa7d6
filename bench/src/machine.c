/*
 * machine.c - what meminit-bench asks of the machine it runs on: CPU
 * features, the LLC size, benchmark buffers and their THP backing, and the
 * cache eviction before cold samples.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"

int has_clzero(void)
{
	unsigned int a, b, c, d;

	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000008)
		return 0;
	__cpuid(0x80000008, a, b, c, d);
	return b & 1;
}

int has_avx512f(void)
{
	__builtin_cpu_init();
	return !!__builtin_cpu_supports("avx512f");
}

int cpu_ok(int needs, int avx512, int clzero)
{
	return !((needs == 1 && !avx512) || (needs == 2 && !clzero));
}

static size_t read_llc_bytes(void)
{
	/* sysfs first: in a VM, CPUID leaf 0x8000001D (what sysconf() reads) may
	 * describe the host's L3 rather than this guest's */
	FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
	long v;

	if (f) {
		char buf[64];

		if (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = 0;
			fclose(f);
			return parse_size(buf);
		}
		fclose(f);
	}
	v = sysconf(_SC_LEVEL3_CACHE_SIZE);
	return v > 0 ? (size_t)v : 32UL << 20;
}

/* Read once: the learning auto asks before every read-back fill. */
size_t llc_bytes(void)
{
	static size_t llc;

	if (!llc)
		llc = read_llc_bytes();
	return llc;
}

/* Anonymous memory on 2 MiB boundaries, THP-backed where possible (the
 * kernel's vmemmap is mapped with 2 MiB pages on x86), prefaulted. */
void *alloc_buf(size_t len, int hugepage)
{
	size_t map = len + HUGE_2M;
	char *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		die("mmap of the benchmark buffer failed: %s", strerror(errno));
	a = (char *)(((uintptr_t)p + HUGE_2M - 1) & ~(HUGE_2M - 1));
	if (a > p)
		munmap(p, a - p);
	if (p + map > a + len)
		munmap(a + len, p + map - (a + len));
	madvise(a, len, hugepage ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(a, 0x5a, len);
	return a;
}

/* Bytes of the VMA containing addr that are backed by transparent huge pages. */
size_t anon_huge_bytes(void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	size_t kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb * 1024;
}

/* ---------------------------------------------------------------- eviction */

unsigned char *evict_buf;
size_t evict_len;
volatile unsigned long sink;

void evict(void)
{
	unsigned long s = 0;

	/* read and dirty every line of a buffer several times the LLC */
	for (size_t i = 0; i < evict_len; i += 64) {
		s += evict_buf[i];
		evict_buf[i] = (unsigned char)s;
	}
	sink += s;
}
