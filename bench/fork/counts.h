/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The "-n N1,N2,..." list both fork benchmarks take: positive counts, at most
 * MAX_COUNTS of them; a bad list ends the program with exit code 2.
 */
#ifndef MEMINIT_FORK_COUNTS_H
#define MEMINIT_FORK_COUNTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNTS 32

static int parse_counts(const char *prog, const char *arg, unsigned long *counts)
{
	char *copy = strdup(arg), *tok, *save = NULL, *end;
	int nr = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long v = strtoul(tok, &end, 10);

		if (*end || v == 0 || nr == MAX_COUNTS) {
			fprintf(stderr, "%s: bad -n list '%s'\n", prog, arg);
			exit(2);
		}
		counts[nr++] = v;
	}
	free(copy);
	return nr;
}

#endif
