/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Latency histogram: log-linear buckets (64 per power of two, so any
 * percentile is within 1/64 of the true value), constant size, mergeable.
 */
#ifndef VBB_HIST_H
#define VBB_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS	6
#define HIST_SUB	(1U << HIST_SUB_BITS)
#define HIST_BUCKETS	((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t sum;			/* ns, for an exact mean */
	uint64_t max;
	uint64_t bucket[HIST_BUCKETS];
};

void hist_add(struct hist *h, uint64_t ns);
void hist_merge(struct hist *dst, const struct hist *src);
/* Mean and the @pct (0-100) percentile, in ns; 0 for an empty histogram. */
double hist_mean(const struct hist *h);
uint64_t hist_percentile(const struct hist *h, double pct);

#endif /* VBB_HIST_H */
