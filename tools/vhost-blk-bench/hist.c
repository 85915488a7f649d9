// SPDX-License-Identifier: GPL-2.0
/*
 * Latency histogram.  See hist.h.
 */
#include "hist.h"

static unsigned int hist_index(uint64_t v)
{
	unsigned int shift;

	if (v < HIST_SUB)
		return (unsigned int)v;
	shift = 63 - __builtin_clzll(v) - HIST_SUB_BITS;
	return ((shift + 1) << HIST_SUB_BITS) +
	       (unsigned int)((v >> shift) & (HIST_SUB - 1));
}

/* The middle of bucket @i. */
static uint64_t hist_value(unsigned int i)
{
	unsigned int shift;

	if (i < HIST_SUB)
		return i;
	shift = (i >> HIST_SUB_BITS) - 1;
	return (((uint64_t)HIST_SUB + (i & (HIST_SUB - 1))) << shift) +
	       ((1ULL << shift) >> 1);
}

void hist_add(struct hist *h, uint64_t ns)
{
	h->bucket[hist_index(ns)]++;
	h->count++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	unsigned int i;

	for (i = 0; i < HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

uint64_t hist_percentile(const struct hist *h, double pct)
{
	uint64_t rank, seen = 0;
	unsigned int i;

	if (!h->count)
		return 0;
	/* The smallest value with at least pct% of the samples at or below. */
	rank = (uint64_t)((double)h->count * pct / 100.0 + 0.999999);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t v = hist_value(i);

			return v < h->max ? v : h->max;
		}
	}
	return h->max;
}
