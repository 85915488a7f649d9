// SPDX-License-Identifier: GPL-2.0
/*
 * One point of the matrix: queue threads, warm-up, measured window, CPU
 * samples at its edges, and the sums.  See bench.h.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Threads that finished wait here until the CPU time has been sampled. */
struct run_sync {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int running;
	bool release;
};

static struct run_sync run_sync = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

void bench_err(const char *fmt, ...)
{
	va_list ap;

	fputs(BENCH_NAME ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t qthread_block(struct qthread *q)
{
	uint64_t x = q->rng;

	/* xorshift64*, then a multiply to map it onto [0, nblocks). */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	q->rng = x;
	x *= 0x2545f4914f6cdd1dULL;
	return (uint64_t)(((unsigned __int128)x * q->run->nblocks) >> 64);
}

const char *be_name(enum be_kind be)
{
	static const char *const names[BE_NR] = {
		[BE_VHOST_BLK] = "vhost-blk",
		[BE_VHOST_USER] = "vhost-user",
		[BE_URING] = "io_uring",
	};

	return be < BE_NR ? names[be] : "?";
}

const char *uring_name(enum uring_mode m)
{
	static const char *const names[URING_NR] = {
		[URING_PLAIN] = "plain",
		[URING_SQPOLL] = "sqpoll",
		[URING_IOPOLL] = "iopoll",
	};

	return m < URING_NR ? names[m] : "?";
}

const char *rw_name(enum rw_kind rw)
{
	return rw == RW_READ ? "randread" : "randwrite";
}

/* Called by a queue thread when it is done (or failed), before it exits. */
static void run_thread_done(void)
{
	pthread_mutex_lock(&run_sync.lock);
	run_sync.running--;
	pthread_cond_broadcast(&run_sync.cond);
	while (!run_sync.release)
		pthread_cond_wait(&run_sync.cond, &run_sync.lock);
	pthread_mutex_unlock(&run_sync.lock);
}

static long run_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n;
}

int run_pin_backend(const struct cpu_sel *sel)
{
	static struct cpu_sample s;
	long cpu = run_cpus() - 1;
	cpu_set_t set;
	unsigned int i;
	int err;

	err = cpu_sample(sel, &s);
	if (err)
		return err;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	for (i = 0; i < s.n; i++) {
		if (sched_setaffinity(s.tid[i], sizeof(set), &set) &&
		    errno != ESRCH) {
			err = -errno;
			bench_err("sched_setaffinity(thread %d of process %d, CPU %ld): %s",
				  s.tid[i], sel->pid, cpu, strerror(errno));
			return err;
		}
	}
	return 0;
}

static void *run_thread(void *arg)
{
	struct qthread *q = arg;
	char name[16];

	if (q->run->o->split_cpus) {
		long cpu = (long)q->index % run_cpus();
		cpu_set_t set;
		int err;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (err)
			bench_err("queue %u: pinning to CPU %ld: %s (running unpinned)",
				  q->index, cpu, strerror(err));
	}
	q->tid = gettid();
	/* Not "vhost-...": the workers' names must stay apart. */
	snprintf(name, sizeof(name), "vbb-q%u", q->index);
	pthread_setname_np(pthread_self(), name);
	q->run->fn(q);
	run_thread_done();
	return NULL;
}

static unsigned int run_running(void)
{
	unsigned int n;

	pthread_mutex_lock(&run_sync.lock);
	n = run_sync.running;
	pthread_mutex_unlock(&run_sync.lock);
	return n;
}

/* Sleep @ns, or less if a queue thread ends (it can only have failed). */
static void run_sleep(struct run *r, uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	for (;;) {
		uint64_t now = now_ns(), step;
		struct timespec ts;

		if (now >= end || run_running() < r->nq)
			return;
		step = end - now < 20000000 ? end - now : 20000000;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)step;
		nanosleep(&ts, NULL);
	}
}

static void run_wait_threads(void)
{
	pthread_mutex_lock(&run_sync.lock);
	while (run_sync.running)
		pthread_cond_wait(&run_sync.cond, &run_sync.lock);
	pthread_mutex_unlock(&run_sync.lock);
}

struct run_cpu {
	struct cpu_sample be, guest;
	uint64_t irq_ns;
};

static int run_cpu_sample(struct run *r, struct run_cpu *c)
{
	int err = cpu_sample(&r->be_sel, &c->be);

	if (!err)
		err = cpu_irq_ns(&c->irq_ns);
	if (!err && r->guest_cpu)
		err = cpu_sample(&r->guest_sel, &c->guest);
	return err;
}

static int run_window(struct run *r, bool start, struct result *res)
{
	return r->window ? r->window(r, start, res) : 0;
}

/*
 * Count the back-end's system calls over the window; a kernel without
 * perf or the tracepoint leaves them unknown (-1), not the run failed.
 */
static void run_sys_start(struct run *r, struct sys_count *sc)
{
	int err = sys_count_start(&r->be_sel, sc);

	if (err)
		bench_err("system calls not counted (perf_event_open of raw_syscalls:sys_enter: %s)",
			  strerror(-err));
}

int run_measure(struct run *r, struct result *res)
{
	static struct run_cpu c0, c1;	/* large: not on the stack */
	static struct sys_count sc;
	bool count_mode = r->o->ios != 0;
	uint64_t t0 = 0, t1;
	unsigned int i, started;
	int err = 0, werr;

	run_sync.running = r->nq;
	run_sync.release = false;
	atomic_store(&r->phase, count_mode ? PHASE_MEASURE : PHASE_RAMP);
	if (count_mode) {
		err = run_window(r, true, res);
		if (!err)
			err = run_cpu_sample(r, &c0);
		if (err)
			return err;
		run_sys_start(r, &sc);
		t0 = now_ns();
	}

	for (started = 0; started < r->nq; started++) {
		struct qthread *q = r->q[started];

		q->run = r;
		q->index = started;
		q->rng = r->o->seed * 0x9e3779b97f4a7c15ULL + started + 1;
		err = -pthread_create(&q->thread, NULL, run_thread, q);
		if (err) {
			bench_err("pthread_create: %s", strerror(-err));
			break;
		}
	}
	if (started < r->nq) {
		/* Those never started count as done. */
		pthread_mutex_lock(&run_sync.lock);
		run_sync.running -= r->nq - started;
		pthread_mutex_unlock(&run_sync.lock);
		atomic_store(&r->phase, PHASE_STOP);
	} else if (!count_mode) {
		run_sleep(r, (uint64_t)(r->o->ramp_s * 1e9));
		err = run_window(r, true, res);
		if (!err)
			err = run_cpu_sample(r, &c0);
		if (!err)
			run_sys_start(r, &sc);
		t0 = now_ns();
		atomic_store_explicit(&r->phase, PHASE_MEASURE,
				      memory_order_release);
		if (!err)
			run_sleep(r, (uint64_t)(r->o->runtime_s * 1e9));
		res->be_syscalls = sys_count_stop(&sc);
		if (!err)
			err = run_cpu_sample(r, &c1);
		t1 = now_ns();
		atomic_store_explicit(&r->phase, PHASE_STOP,
				      memory_order_release);
		werr = run_window(r, false, res);
		err = err ? err : werr;
		res->secs = (double)(t1 - t0) / 1e9;
	}

	run_wait_threads();
	if (started == r->nq && count_mode) {
		t1 = now_ns();
		res->be_syscalls = sys_count_stop(&sc);
		err = run_cpu_sample(r, &c1);
		werr = run_window(r, false, res);
		err = err ? err : werr;
		res->secs = (double)(t1 - t0) / 1e9;
	}
	pthread_mutex_lock(&run_sync.lock);
	run_sync.release = true;
	pthread_cond_broadcast(&run_sync.cond);
	pthread_mutex_unlock(&run_sync.lock);
	for (i = 0; i < started; i++)
		pthread_join(r->q[i]->thread, NULL);
	if (started < r->nq) {
		sys_count_stop(&sc);
		return err;
	}

	res->ok = !err;
	for (i = 0; i < r->nq; i++) {
		const struct qstats *s = &r->q[i]->st;
		struct qstats *t = &res->tot;

		if (r->q[i]->err)
			res->ok = false;
		t->issued += s->issued;
		t->completed += s->completed;
		t->errors += s->errors;
		t->bad_len += s->bad_len;
		t->bytes += s->bytes;
		t->m_done += s->m_done;
		t->m_kicks += s->m_kicks;
		t->m_kicks_suppressed += s->m_kicks_suppressed;
		t->m_call_reads += s->m_call_reads;
		t->m_signals += s->m_signals;
		t->m_spurious += s->m_spurious;
		t->m_syscalls += s->m_syscalls;
		hist_merge(&t->hist, &s->hist);
		if (r->q[i]->err && !err)
			err = r->q[i]->err;
	}
	if (!err) {
		res->be_cpu_ns = cpu_diff(&c0.be, &c1.be);
		res->be_csw = cpu_diff_csw(&c0.be, &c1.be);
		res->be_threads = c1.be.n;
		res->irq_ns = c1.irq_ns > c0.irq_ns ? c1.irq_ns - c0.irq_ns : 0;
		res->cpu_ticks = c0.be.ticks || c1.be.ticks;
		if (r->guest_cpu) {
			res->guest_cpu_ns = cpu_diff(&c0.guest, &c1.guest);
			res->cpu_ticks |= c0.guest.ticks || c1.guest.ticks;
		}
	}
	return err;
}
