// SPDX-License-Identifier: GPL-2.0
/*
 * Thread CPU time from /proc.  See cpu.h.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu.h"

static int read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

/* Run time of one thread in ns; false if it is gone. */
static bool task_ns(pid_t pid, pid_t tid, uint64_t *ns, bool *ticks)
{
	char path[96], buf[1024], *p;
	unsigned long long utime, stime;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	if (!read_small(path, buf, sizeof(buf)) &&
	    sscanf(buf, "%llu", &utime) == 1) {
		*ns = utime;
		return true;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (read_small(path, buf, sizeof(buf)))
		return false;
	/* The name may hold anything: fields start after its last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return false;
	/* Field 3 follows; utime and stime are fields 14 and 15. */
	for (i = 3; i < 14 && p; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu %llu", &utime, &stime) != 2)
		return false;
	*ns = (utime + stime) * (1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK));
	*ticks = true;
	return true;
}

/* Voluntary plus involuntary context switches of one thread, or 0. */
static uint64_t task_csw(pid_t pid, pid_t tid)
{
	char path[96], buf[2048];
	unsigned long long v = 0, nv = 0;
	const char *p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (read_small(path, buf, sizeof(buf)))
		return 0;
	p = strstr(buf, "\nvoluntary_ctxt_switches:");
	if (p)
		sscanf(p, "\nvoluntary_ctxt_switches: %llu", &v);
	p = strstr(buf, "\nnonvoluntary_ctxt_switches:");
	if (p)
		sscanf(p, "\nnonvoluntary_ctxt_switches: %llu", &nv);
	return v + nv;
}

static bool task_matches(const struct cpu_sel *sel, pid_t tid)
{
	char path[96], comm[64];
	bool named;

	if (sel->match == CPU_ALL)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", sel->pid, tid);
	if (read_small(path, comm, sizeof(comm)))
		return false;
	comm[strcspn(comm, "\n")] = '\0';
	named = !strcmp(comm, sel->name);
	return sel->match == CPU_NAMED ? named : !named;
}

static int cpu_walk(const struct cpu_sel *sel, struct cpu_sample *s)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", sel->pid);
	dir = opendir(path);
	if (!dir) {
		int err = errno;

		fprintf(stderr, "vhost-blk-bench: %s: %s\n", path,
			strerror(err));
		return -err;
	}
	if (s) {
		s->n = 0;
		s->ticks = false;
	}
	while ((d = readdir(dir))) {
		pid_t tid = (pid_t)atoi(d->d_name);
		uint64_t ns;

		if (tid <= 0 || !task_matches(sel, tid))
			continue;
		n++;
		if (!s || s->n == CPU_MAX_TASKS)
			continue;
		if (!task_ns(sel->pid, tid, &ns, &s->ticks))
			continue;
		s->tid[s->n] = tid;
		s->ns[s->n] = ns;
		s->csw[s->n] = task_csw(sel->pid, tid);
		s->n++;
	}
	closedir(dir);
	return n;
}

int cpu_sample(const struct cpu_sel *sel, struct cpu_sample *s)
{
	int n = cpu_walk(sel, s);

	return n < 0 ? n : 0;
}

int cpu_count(const struct cpu_sel *sel)
{
	return cpu_walk(sel, NULL);
}

/* The growth of one per-thread counter (@va of @a, @vb of @b). */
static uint64_t sample_diff(const struct cpu_sample *a, const uint64_t *va,
			    const struct cpu_sample *b, const uint64_t *vb)
{
	uint64_t sum = 0;
	unsigned int i, j;

	for (i = 0; i < b->n; i++) {
		uint64_t base = 0;

		for (j = 0; j < a->n; j++) {
			if (a->tid[j] == b->tid[i]) {
				base = va[j];
				break;
			}
		}
		if (vb[i] > base)
			sum += vb[i] - base;
	}
	return sum;
}

uint64_t cpu_diff(const struct cpu_sample *a, const struct cpu_sample *b)
{
	return sample_diff(a, a->ns, b, b->ns);
}

uint64_t cpu_diff_csw(const struct cpu_sample *a, const struct cpu_sample *b)
{
	return sample_diff(a, a->csw, b, b->csw);
}

/* The id of raw_syscalls:sys_enter, from tracefs; -errno without it. */
static long sys_enter_id(void)
{
	static const char *const paths[] = {
		"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
		"/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id",
	};
	char buf[32];
	unsigned int i;
	int err = -ENOENT;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		err = read_small(paths[i], buf, sizeof(buf));
		if (!err)
			return strtol(buf, NULL, 10);
	}
	return err;
}

int sys_count_start(const struct cpu_sel *sel, struct sys_count *sc)
{
	static struct cpu_sample s;	/* large: not on the stack */
	struct perf_event_attr attr = {
		.type = PERF_TYPE_TRACEPOINT,
		.size = sizeof(attr),
	};
	long id = sys_enter_id();
	unsigned int i;
	int err;

	sc->n = 0;
	sc->ok = false;
	if (id < 0)
		return (int)id;
	attr.config = (uint64_t)id;
	err = cpu_sample(sel, &s);
	if (err)
		return err;
	for (i = 0; i < s.n; i++) {
		/* This thread only, on any CPU: counts until closed. */
		int fd = (int)syscall(SYS_perf_event_open, &attr, s.tid[i], -1,
				      -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			/* Gone since the walk: nothing to count. */
			if (errno == ESRCH)
				continue;
			err = -errno;
			sys_count_stop(sc);
			return err;
		}
		sc->fd[sc->n++] = fd;
	}
	/* No thread matched: a count of 0 is true. */
	sc->ok = true;
	return 0;
}

int64_t sys_count_stop(struct sys_count *sc)
{
	int64_t sum = sc->ok ? 0 : -1;
	unsigned int i;

	for (i = 0; i < sc->n; i++) {
		uint64_t v;

		if (read(sc->fd[i], &v, sizeof(v)) != (ssize_t)sizeof(v))
			sum = -1;
		else if (sum >= 0)
			sum += (int64_t)v;
		close(sc->fd[i]);
	}
	sc->n = 0;
	sc->ok = false;
	return sum;
}

int cpu_irq_ns(uint64_t *ns)
{
	unsigned long long user, nice, sys, idle, iowait, irq, softirq;
	char buf[512];
	int err = read_small("/proc/stat", buf, sizeof(buf));

	if (err) {
		fprintf(stderr, "vhost-blk-bench: /proc/stat: %s\n",
			strerror(-err));
		return err;
	}
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice,
		   &sys, &idle, &iowait, &irq, &softirq) != 7) {
		fprintf(stderr, "vhost-blk-bench: /proc/stat: no \"cpu\" line with irq and softirq\n");
		return -EINVAL;
	}
	*ns = (irq + softirq) * (1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK));
	return 0;
}
