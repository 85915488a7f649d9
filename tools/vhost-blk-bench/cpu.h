/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU time of a set of threads, from /proc/PID/task/TID: schedstat (ns of
 * run time) where the kernel has it, else utime + stime of stat (clock
 * ticks); and their context switches (status: voluntary and not) and
 * system calls (a perf counter of raw_syscalls:sys_enter on each).
 * Threads are chosen by their exact name (comm).
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
	uint64_t csw[CPU_MAX_TASKS];	/* context switches, both kinds */
};

/* One perf counter of system calls entered per thread. */
struct sys_count {
	unsigned int n;
	bool ok;		/* counting: sys_count_start() succeeded */
	int fd[CPU_MAX_TASKS];
};

/* 0, or -errno (reported) if /proc/PID/task cannot be read. */
int cpu_sample(const struct cpu_sel *sel, struct cpu_sample *s);
/*
 * CPU time between two samples: threads in @b that were in @a count their
 * difference, threads that appeared count all their time, threads that
 * exited in between are lost.
 */
uint64_t cpu_diff(const struct cpu_sample *a, const struct cpu_sample *b);
/* Context switches between two samples, counted the same way. */
uint64_t cpu_diff_csw(const struct cpu_sample *a, const struct cpu_sample *b);
/*
 * Start counting the system calls of the threads @sel matches now (those
 * that start later are not counted): 0, or -errno when perf or the
 * raw_syscalls tracepoint is not there (then nothing is counted, and
 * sys_count_stop() says so).
 */
int sys_count_start(const struct cpu_sel *sel, struct sys_count *sc);
/* Stop: the calls counted, or -1 if none could be. */
int64_t sys_count_stop(struct sys_count *sc);
/* Number of threads @sel matches now (-errno on failure). */
int cpu_count(const struct cpu_sel *sel);
/*
 * Interrupt and softirq time of all CPUs so far, in ns, from the irq and
 * softirq columns of /proc/stat's "cpu" line (USER_HZ units): 0, or
 * -errno (reported).
 */
int cpu_irq_ns(uint64_t *ns);

#endif /* VBB_CPU_H */
