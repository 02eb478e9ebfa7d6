/*
 * meminit-bench - replay the kernel's memmap-init and page-clearing write
 * patterns on the real CPU.
 *
 *   meminit-bench run [options]     interleaved samples, one line each
 *   meminit-bench verify [options]  every strategy against the slow path
 *   meminit-bench info              CPU features the strategies depend on
 *
 * Output lines of "run" (parsed by src/meminit/benchbin.py):
 *   sample kind=fill strategy=S layout=L dest=D size=N threads=T rep=R ns=NS bytes=B
 *          cpu_ns=C passes=P
 *   sample kind=clear strategy=S unit=U size=N threads=1 rep=R ns=NS bytes=B cpu_ns=C
 *   sample kind=fault strategy=K size=N threads=1 rep=R ns=NS bytes=B huge_bytes=H
 *          cpu_ns=C prime_ns=P
 *   skip kind=K strategy=S reason=free text to end of line
 *   info key=value
 * ns is wall time of the timed region (all passes), bytes what it wrote,
 * cpu_ns the CPU time of the timing thread in it.  Cases are interleaved:
 * every case once per repetition.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "bench.h"

static int cmd_info(void)
{
	printf("info avx512f=%d\ninfo clzero=%d\ninfo llc_bytes=%zu\n", has_avx512f(), has_clzero(),
	       llc_bytes());
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: meminit-bench run|verify|info [options]\n");
		return 2;
	}
	defaults(&o);
	if (parse_opts(argc - 1, argv + 1, &o))
		return 2;
	if (!strcmp(argv[1], "run"))
		return cmd_run(&o);
	if (!strcmp(argv[1], "verify"))
		return cmd_verify(&o);
	if (!strcmp(argv[1], "info"))
		return cmd_info();
	fprintf(stderr, "meminit-bench: unknown command '%s'\n", argv[1]);
	return 2;
}
