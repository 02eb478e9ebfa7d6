// SPDX-License-Identifier: GPL-2.0
/*
 * forkbench: fork rate of a process that owns N extra VMAs.
 *
 * For every N of the list: reserve N+2 pages, unmap the first and last so the
 * block cannot merge with a neighbour, and give the N pages alternating
 * protections (read / read-write) so every page is its own VMA. The VMA count
 * of /proc/self/maps must rise by exactly N, or the run fails. Then fork for
 * a fixed time; each child calls _exit(0) at once and the parent reaps it
 * before the next fork. One JSON line per (repetition, N) on stdout.
 *
 * The cycle timed is fork + child exit + wait, like unixbench's spawn: the
 * kernel copies the VMAs and their maple tree (dup_mmap) and tears them down
 * again (exit_mmap). fork_call_us is the mean time the parent spends inside
 * fork() alone.
 *
 * Repetitions are the outer loop and alternate the order of N (ascending,
 * then descending) so slow drift in the machine's load spreads evenly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "counts.h"


static long page_size;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail(unsigned long n, const char *what)
{
	printf("{\"kind\": \"forkbench\", \"vmas\": %lu, \"error\": \"%s: %s\"}\n",
	       n, what, errno ? strerror(errno) : "check failed");
	fflush(stdout);
	exit(1);
}

/* Lines of /proc/self/maps: one per VMA. */
static long count_vmas(void)
{
	char buf[65536];
	long lines = 0;
	size_t got, i;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
		for (i = 0; i < got; i++)
			lines += buf[i] == '\n';
	fclose(f);
	return lines;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* N pages, each its own VMA; returns the first page. */
static char *map_vmas(unsigned long n, int touch)
{
	size_t len = (n + 2) * page_size;
	unsigned long i;
	char *base;

	base = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		fail(n, "mmap");
	/* holes on both sides: nothing outside can merge with the block */
	if (munmap(base, page_size) || munmap(base + (n + 1) * page_size, page_size))
		fail(n, "munmap guard");
	base += page_size;
	for (i = 1; i < n; i += 2)
		if (mprotect(base + i * page_size, page_size, PROT_READ | PROT_WRITE))
			fail(n, "mprotect (vm.max_map_count too low?)");
	if (touch)
		for (i = 1; i < n; i += 2)
			base[i * page_size] = 1;
	return base;
}

static void run_one(int rep, unsigned long n, double seconds, int touch)
{
	long before, during, after, max_maps = read_long("/proc/sys/vm/max_map_count");
	double t0, t, fork_time = 0, elapsed;
	unsigned long forks = 0, warm;
	char *base;
	pid_t pid;
	int status;

	before = count_vmas();
	if (max_maps > 0 && before + (long)n + 16 > max_maps) {
		errno = 0;
		fail(n, "N exceeds vm.max_map_count");
	}
	base = map_vmas(n, touch);
	during = count_vmas();
	if (during - before != (long)n) {
		errno = 0;
		printf("{\"kind\": \"forkbench\", \"vmas\": %lu, \"error\": "
		       "\"VMA count rose by %ld, not by N\"}\n", n, during - before);
		exit(1);
	}

	for (warm = 0; warm < 3; warm++) {
		pid = fork();
		if (pid < 0)
			fail(n, "fork");
		if (pid == 0)
			_exit(0);
		waitpid(pid, &status, 0);
	}

	t0 = now();
	do {
		t = now();
		pid = fork();
		if (pid == 0)
			_exit(0);
		fork_time += now() - t;
		if (pid < 0)
			fail(n, "fork");
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			fail(n, "child did not exit cleanly");
		forks++;
	} while ((elapsed = now() - t0) < seconds);

	if (munmap(base, n * page_size))
		fail(n, "munmap");
	after = count_vmas();

	printf("{\"kind\": \"forkbench\", \"rep\": %d, \"vmas\": %lu, "
	       "\"maps_before\": %ld, \"maps_during\": %ld, \"maps_after\": %ld, "
	       "\"touched\": %s, \"forks\": %lu, \"seconds\": %.6f, "
	       "\"forks_per_sec\": %.3f, \"fork_call_us\": %.3f}\n",
	       rep, n, before, during, after, touch ? "true" : "false", forks,
	       elapsed, forks / elapsed, fork_time / forks * 1e6);
	fflush(stdout);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-n N1,N2,...] [-t seconds] [-r reps] [-T]\n"
		"  -n  extra VMAs to map (default 21,221,1621,12821,51221)\n"
		"  -t  seconds of forking per N and repetition (default 2)\n"
		"  -r  repetitions, interleaved over N (default 1)\n"
		"  -T  touch the writable pages first (anon_vma, page tables)\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long counts[MAX_COUNTS];
	int nr_counts = 0, reps = 1, touch = 0, opt, r, i;
	double seconds = 2.0;

	while ((opt = getopt(argc, argv, "n:t:r:Th")) != -1) {
		switch (opt) {
		case 'n': nr_counts = parse_counts("forkbench", optarg, counts); break;
		case 't': seconds = atof(optarg); break;
		case 'r': reps = atoi(optarg); break;
		case 'T': touch = 1; break;
		default: usage(argv[0]);
		}
	}
	if (optind != argc || reps < 1 || !(seconds > 0))
		usage(argv[0]);
	if (!nr_counts)
		nr_counts = parse_counts("forkbench", "21,221,1621,12821,51221", counts);
	page_size = sysconf(_SC_PAGESIZE);

	for (r = 0; r < reps; r++)
		for (i = 0; i < nr_counts; i++)
			run_one(r, counts[r % 2 ? nr_counts - 1 - i : i], seconds, touch);
	return 0;
}
