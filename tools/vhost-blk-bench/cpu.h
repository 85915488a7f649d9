/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU time of a set of threads, from /proc/PID/task/TID: schedstat (ns of
 * run time) where the kernel has it, else utime + stime of stat (clock
 * ticks).  Threads are chosen by their exact name (comm).
 */
#ifndef VBB_CPU_H
#define VBB_CPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CPU_MAX_TASKS	256

enum cpu_match {
	CPU_ALL,		/* every thread of the process */
	CPU_NAMED,		/* threads whose comm is the name */
	CPU_NOT_NAMED,		/* all the others */
};

struct cpu_sel {
	pid_t pid;
	enum cpu_match match;
	char name[16];		/* TASK_COMM_LEN */
};

struct cpu_sample {
	unsigned int n;
	bool ticks;		/* some value came from stat, not schedstat */
	pid_t tid[CPU_MAX_TASKS];
	uint64_t ns[CPU_MAX_TASKS];
};

/* 0, or -errno (reported) if /proc/PID/task cannot be read. */
int cpu_sample(const struct cpu_sel *sel, struct cpu_sample *s);
/*
 * CPU time between two samples: threads in @b that were in @a count their
 * difference, threads that appeared count all their time, threads that
 * exited in between are lost.
 */
uint64_t cpu_diff(const struct cpu_sample *a, const struct cpu_sample *b);
/* Number of threads @sel matches now (-errno on failure). */
int cpu_count(const struct cpu_sel *sel);
/*
 * Interrupt and softirq time of all CPUs so far, in ns, from the irq and
 * softirq columns of /proc/stat's "cpu" line (USER_HZ units): 0, or
 * -errno (reported).
 */
int cpu_irq_ns(uint64_t *ns);

#endif /* VBB_CPU_H */
