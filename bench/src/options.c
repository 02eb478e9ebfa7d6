/*
 * options.c - meminit-bench's command line: the option defaults, their
 * parsing, sizes like "4M" or "1GiB", comma-separated lists, and die() for
 * what cannot be run.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "meminit-bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	exit(2);
}

size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	size_t mul = 1;

	if (end == s || v < 0)
		die("bad size '%s'", s);
	switch (*end) {
	case 'k': case 'K': mul = 1UL << 10; end++; break;
	case 'm': case 'M': mul = 1UL << 20; end++; break;
	case 'g': case 'G': mul = 1UL << 30; end++; break;
	case '\0': break;
	default: die("bad size suffix in '%s'", s);
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		die("bad size '%s'", s);
	return (size_t)(v * (double)mul);
}

/* Split a comma-separated list in place. */
static int split_list(char *s, char **out)
{
	int n = 0;

	for (char *tok = strtok(s, ","); tok && n < MAX_LIST; tok = strtok(NULL, ","))
		out[n++] = tok;
	return n;
}

static char *dupstr(const char *s)
{
	char *d = strdup(s);

	if (!d)
		die("out of memory%s", "");
	return d;
}

static void set_list(char **out, int *n, const char *s)
{
	*n = split_list(dupstr(s), out);
}

void defaults(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	set_list(o->sizes, &o->n_sizes, "4M,16M,128M,1G");
	set_list(o->threads, &o->n_threads, "1,2");
	set_list(o->layouts, &o->n_layouts, "o0,o9");
	set_list(o->dests, &o->n_dests, "cold,warm,readback");
	set_list(o->fills, &o->n_fills, "slow,slow-saferet,template,movnti,movntdq,avx512nt,repmovsb");
	set_list(o->clears, &o->n_clears,
		 "stosb-4K,stosb_desc-4K,stosb-2M,stosb-32M,stosb-1G,stosq-4K,stosq-2M,stosq-32M,"
		 "stosq-1G,movnti-1G,avx512nt-2M,avx512nt-1G,clzero-2M,clzero-1G,memset-1G,"
		 "stosb_nz-1G,avx512nt_nz-1G");
	set_list(o->faults, &o->n_faults, "anon-4K,thp-2M,hugetlb-2M,hugetlb-1G");
	set_list(o->splits, &o->n_splits, "even");
	o->reps = 5;
	o->clear_size = 1UL << 30;
	o->fault_size = 1UL << 30;
	o->verify_size = 4UL << 20;
	o->min_bytes = 64UL << 20;
}

int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "sizes", 1, 0, 's' }, { "threads", 1, 0, 't' }, { "layouts", 1, 0, 'l' },
		{ "dests", 1, 0, 'd' }, { "fill", 1, 0, 'f' }, { "clear", 1, 0, 'c' },
		{ "fault", 1, 0, 'F' }, { "reps", 1, 0, 'r' }, { "clear-size", 1, 0, 'C' },
		{ "fault-size", 1, 0, 'S' }, { "evict-bytes", 1, 0, 'e' },
		{ "movsb-block", 1, 0, 'm' }, { "pgmap-type", 1, 0, 'p' }, { "size", 1, 0, 'z' },
		{ "bug", 1, 0, 'b' }, { "min-bytes", 1, 0, 'M' }, { "split", 1, 0, 'x' },
		{ "chunk", 1, 0, 'k' }, { "auto-altmap-min", 1, 0, 'A' },
		{ "auto-dram-min", 1, 0, 'D' }, { "clear-fault", 1, 0, 'q' },
		{ "auto-probe", 1, 0, 'P' }, { "auto-lead", 1, 0, 'L' },
		{ "auto-probe-late", 1, 0, 'T' }, { "auto-walk-share", 1, 0, 'W' },
		{ "auto-late-llcs", 1, 0, 'Y' }, { "auto-order", 1, 0, 'O' },
		{ "auto-late-margin", 1, 0, 'G' }, { "auto-memo", 1, 0, 'R' },
		{ "auto-switch-margin", 1, 0, 'H' }, { "auto-span", 1, 0, 'N' },
		{ 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': set_list(o->sizes, &o->n_sizes, optarg); break;
		case 't': set_list(o->threads, &o->n_threads, optarg); break;
		case 'l': set_list(o->layouts, &o->n_layouts, optarg); break;
		case 'd': set_list(o->dests, &o->n_dests, optarg); break;
		case 'f': set_list(o->fills, &o->n_fills, optarg); break;
		case 'c': set_list(o->clears, &o->n_clears, optarg); break;
		case 'F': set_list(o->faults, &o->n_faults, optarg); break;
		case 'r': o->reps = atoi(optarg); break;
		case 'C': o->clear_size = parse_size(optarg); break;
		case 'S': o->fault_size = parse_size(optarg); break;
		case 'e': o->evict_bytes = parse_size(optarg); break;
		case 'm': scratch_bytes = parse_size(optarg) & ~63UL; break;
		case 'z': o->verify_size = parse_size(optarg); break;
		case 'M': o->min_bytes = parse_size(optarg); break;
		case 'x': set_list(o->splits, &o->n_splits, optarg); break;
		/* --chunk is in bytes of device memory: one 4 KiB page per record */
		case 'k': chunk_req_pages = parse_size(optarg) / 4096; break;
		case 'A': o->auto_altmap_min = parse_size(optarg); break;
		case 'D': o->auto_dram_min = parse_size(optarg); break;
		case 'L': auto_probe_lead = strtoul(optarg, NULL, 0); break;
		case 'R': auto_memo = strtoul(optarg, NULL, 0); break;
		case 'T': auto_probe_late = strtoul(optarg, NULL, 0); break;
		case 'N': auto_span = strtoul(optarg, NULL, 0); break;
		case 'Y': auto_late_llcs = strtoul(optarg, NULL, 0); break;
		case 'G':
			auto_late_margin_den = strtoul(optarg, NULL, 0);
			if (auto_late_margin_den < 2)
				die("--auto-late-margin wants the denominator of the margin, 2 or more, "
				    "not '%s'", optarg);
			break;
		case 'H':
			auto_switch_margin_den = strtoul(optarg, NULL, 0);
			if (auto_switch_margin_den == 1)
				die("--auto-switch-margin wants the denominator of the margin, 2 or more "
				    "(0: none), not '%s'", optarg);
			break;
		case 'O': {
			size_t i = 0;

			while (i < n_auto_orders && strcmp(optarg, auto_orders[i].name))
				i++;
			if (i == n_auto_orders)
				die("unknown --auto-order '%s' (lead-first, second-stream-first, "
				    "stream-first, lead-stream-first)", optarg);
			auto_stream_first = auto_orders[i].stream_first;
			auto_first_lead = auto_orders[i].first_lead;
			break;
		}
		case 'W':
			if (!strcmp(optarg, "full"))
				auto_walk_rule = AUTO_WALK_FULL;
			else if (!strcmp(optarg, "llc"))
				auto_walk_rule = AUTO_WALK_LLC;
			else if (!strcmp(optarg, "fraction"))
				auto_walk_rule = AUTO_WALK_FRACTION;
			else if (!strcmp(optarg, "aged"))
				auto_walk_rule = AUTO_WALK_AGED;
			else if (!strcmp(optarg, "capped"))
				auto_walk_rule = AUTO_WALK_CAPPED;
			else
				die("unknown --auto-walk-share '%s' (full, llc, fraction, aged, capped)",
				    optarg);
			break;
		case 'P':
			auto_probe_min = strtoul(optarg, NULL, 0);
			if (!auto_probe_min)
				die("--auto-probe wants struct pages per probe piece, not '%s'", optarg);
			break;
		case 'q':
			if (!strcmp(optarg, "first")) clear_fault = FAULT_FIRST;
			else if (!strcmp(optarg, "middle")) clear_fault = FAULT_MIDDLE;
			else if (!strcmp(optarg, "last")) clear_fault = FAULT_LAST;
			else die("unknown --clear-fault '%s' (first, middle, last)", optarg);
			break;
		case 'p':
			if (!strcmp(optarg, "private")) the_pgmap.type = MEMORY_DEVICE_PRIVATE;
			else if (!strcmp(optarg, "coherent")) the_pgmap.type = MEMORY_DEVICE_COHERENT;
			else if (!strcmp(optarg, "fsdax")) the_pgmap.type = MEMORY_DEVICE_FS_DAX;
			else if (!strcmp(optarg, "generic")) the_pgmap.type = MEMORY_DEVICE_GENERIC;
			else die("unknown pgmap type '%s'", optarg);
			break;
		case 'b':
			if (!strcmp(optarg, "deferred-list")) bug = BUG_DEFERRED_LIST;
			else if (!strcmp(optarg, "clear-overrun")) bug = BUG_CLEAR_OVERRUN;
			else if (!strcmp(optarg, "template-refcount")) bug = BUG_TEMPLATE_REFCOUNT;
			else if (!strcmp(optarg, "chunk-align")) bug = BUG_CHUNK_ALIGN;
			else if (!strcmp(optarg, "auto-round")) bug = BUG_AUTO_ROUND;
			else if (!strcmp(optarg, "auto-stream")) bug = BUG_AUTO_STREAM;
			else if (!strcmp(optarg, "auto-template")) bug = BUG_AUTO_TEMPLATE;
			else if (!strcmp(optarg, "auto-no-walk")) bug = BUG_AUTO_NO_WALK;
			else if (!strcmp(optarg, "auto-no-early")) bug = BUG_AUTO_NO_EARLY;
			else if (!strcmp(optarg, "auto-walk-share")) bug = BUG_AUTO_WALK_SHARE;
			else if (!strcmp(optarg, "auto-lead-unchecked")) bug = BUG_AUTO_LEAD_UNCHECKED;
			else if (!strcmp(optarg, "auto-late-ignored")) bug = BUG_AUTO_LATE_IGNORED;
			else if (!strcmp(optarg, "auto-first-overrun")) bug = BUG_AUTO_FIRST_OVERRUN;
			else if (!strcmp(optarg, "auto-switch-ignored")) bug = BUG_AUTO_SWITCH_IGNORED;
			else if (!strcmp(optarg, "auto-span-ignored")) bug = BUG_AUTO_SPAN_IGNORED;
			else if (!strcmp(optarg, "auto-blind")) bug = BUG_AUTO_BLIND;
			else die("unknown bug '%s'", optarg);
			break;
		default:
			return -1;
		}
	}
	if (o->reps < 1)
		die("--reps must be >= 1%s", "");
	for (int i = 0; i < o->n_splits; i++)
		if (strcmp(o->splits[i], "even") && strcmp(o->splits[i], "chunked"))
			die("unknown split '%s' (even, chunked)", o->splits[i]);
	/* "none" empties a list */
	if (o->n_fills == 1 && !strcmp(o->fills[0], "none")) o->n_fills = 0;
	if (o->n_clears == 1 && !strcmp(o->clears[0], "none")) o->n_clears = 0;
	if (o->n_faults == 1 && !strcmp(o->faults[0], "none")) o->n_faults = 0;
	return 0;
}
