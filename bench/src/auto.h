/* auto.h - the learning `auto` policy (auto.c), replayed on the kernel's chunks. */
#ifndef MEMINIT_BENCH_AUTO_H
#define MEMINIT_BENCH_AUTO_H
#include <stdint.h>

#include "page.h"

#define AUTO_PROBE_RECORDS 256	/* at least 16 KiB of struct pages per piece */
#define AUTO_PIECES 4		/* per round: template, streaming, streaming, template */
#define AUTO_MARGIN_DEN 32	/* streaming must be more than 1/32 faster */

struct auto_fns {
	void (*tmpl)(const struct fill_job *);
	void (*stream)(const struct fill_job *);
	void (*drain)(void);
};

/* What auto did in the fills since auto_reset(), over all threads. */
struct auto_stats {
	unsigned long rounds;		/* probe rounds run */
	unsigned long stream_rounds;	/* rounds streaming won */
	unsigned long streamed;		/* records written with streaming stores */
	unsigned long records;		/* records written */
};

int auto_probe_chunk(unsigned long chunk);
unsigned long auto_probe_records(unsigned int order);
int auto_round_streams(const uint64_t tmpl_ns[2], const uint64_t stream_ns[2]);
void auto_reset(void);
struct auto_stats auto_stats(void);
/* Fill chunk number idx of a range (j->tpl, j->no_drain set as for any chunk). */
void auto_fill_chunk(const struct fill_job *j, unsigned long idx, const struct auto_fns *fn,
		     uint64_t (*clock)(void));
#endif
