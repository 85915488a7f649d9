// SPDX-License-Identifier: GPL-2.0
/*
 * Thread CPU time from /proc.  See cpu.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

uint64_t cpu_diff(const struct cpu_sample *a, const struct cpu_sample *b)
{
	uint64_t sum = 0;
	unsigned int i, j;

	for (i = 0; i < b->n; i++) {
		uint64_t base = 0;

		for (j = 0; j < a->n; j++) {
			if (a->tid[j] == b->tid[i]) {
				base = a->ns[j];
				break;
			}
		}
		if (b->ns[i] > base)
			sum += b->ns[i] - base;
	}
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
