/*
 * stubs.c - out-of-line helpers the replayed kernel code calls, kept in their
 * own translation unit so the compiler cannot see through them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "page.h"

unsigned long bench_warn_count;

__attribute__((noinline)) void bench_cond_resched(void)
{
	/* the kernel's cond_resched() under PREEMPT_VOLUNTARY: a check, no switch */
	asm volatile("" ::: "memory");
}

__attribute__((noinline)) void bench_warn(const char *what)
{
	if (bench_warn_count++ < 3)
		fprintf(stderr, "meminit-bench: WARN in replayed kernel code: %s\n", what);
}
