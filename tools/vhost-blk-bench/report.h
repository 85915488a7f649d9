/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The results of one invocation: a table (with the vhost-blk ratios) and
 * one JSON object per run.
 */
#ifndef VBB_REPORT_H
#define VBB_REPORT_H

#include <stdio.h>

#include "bench.h"

/* Per-request figures of a run, derived from its counters. */
struct figures {
	double iops;
	double lat_mean_us, lat_p50_us, lat_p99_us, lat_max_us;
	double notif, wakeups, spurious, kicks, kicks_suppressed, syscalls;
	double be_cpu_us, guest_cpu_us;
	double irq_cpu_us;		/* system-wide irq + softirq */
	double be_csw;			/* back-end context switches */
	double be_syscalls;		/* ... system calls; NAN: unknown */
	double cpu_us;			/* be_cpu_us + irq_cpu_us */
};

void figures_of(const struct result *res, struct figures *f);
/* The back-end's polling, in words: "off", "adaptive:32", "fixed:64"... */
void polling_name(const struct point *p, char *buf, size_t len);

/* Where the numbers come from, said in every output. */
const char *report_env(const struct opts *o);
bool report_emulated(const struct opts *o);

void report_table(FILE *out, const struct opts *o,
		  const struct result *res, unsigned int n);
/* Appends; 0 or -errno (reported). */
int report_json(const char *path, const struct opts *o,
		const struct result *res, unsigned int n);

#endif /* VBB_REPORT_H */
