/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bench: one guest-model virtio-blk driver, three kinds of
 * backend.  Types shared by the parts of the tool.
 */
#ifndef VBB_BENCH_H
#define VBB_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>
#include <linux/vhost_blk.h>

#include "cpu.h"
#include "hist.h"

#define BENCH_NAME		"vhost-blk-bench"
#define BENCH_MAX_QUEUES	16
#define BENCH_MAX_DEPTH		1024

enum be_kind {
	BE_VHOST_BLK,		/* /dev/vhost-blk */
	BE_VHOST_USER,		/* a vhost-user-blk back-end on a socket */
	BE_URING,		/* the raw device, io_uring from userspace */
	BE_NR
};

enum rw_kind {
	RW_READ,		/* 4k random reads (any block size, in fact) */
	RW_WRITE,
	RW_NR
};

/* How the io_uring back-end drives the raw device. */
enum uring_mode {
	URING_PLAIN,		/* a plain ring, interrupt completions */
	URING_SQPOLL,		/* registered file and buffers, SQPOLL */
	URING_IOPOLL,		/* registered file and buffers, IOPOLL */
	URING_NR
};

/* One measured point of the matrix. */
struct point {
	enum be_kind be;
	enum rw_kind rw;
	unsigned int iodepth;		/* per queue */
	unsigned int queues;
	int event_idx;			/* 1 or 0; -1: does not apply */
	int poll_us;			/* busy-poll timeout; -1: does not apply */
	bool poll_adaptive;		/* poll_us is the adaptive ceiling */
	int poll_completions;		/* vhost-blk: 1 or 0; -1: does not apply */
	enum uring_mode uring;		/* io_uring only */
	unsigned int rep;		/* repetition, from 1 */
};

enum workers_mode {
	WORKERS_SHARED,			/* the device's one vhost worker */
	WORKERS_PER_QUEUE,		/* VHOST_NEW_WORKER for every queue */
};

struct opts {
	const char *dev;		/* block device (vhost-blk, io_uring) */
	const char *sock;		/* vhost-user socket */
	const char *label;		/* what the device is, for the report */
	const char *tag;		/* which experiment, for the report */
	const char *env;		/* "TCG", "KVM", "bare metal", ... */
	double ramp_s;			/* time-based: warm-up, not measured */
	double runtime_s;		/* time-based: measured window */
	uint64_t ios;			/* per queue; non-zero: count-based */
	unsigned int bs;		/* bytes per request */
	unsigned int ring;		/* virtqueue size */
	bool indirect;			/* chains in indirect tables */
	enum workers_mode workers;
	bool pin_memory;		/* VHOST_BLK_SET_MEM_PINNED */
	bool split_cpus;		/* queue i on CPU i, back-end on the last */
	uint64_t size;			/* bytes of the device addressed; 0: all */
	uint64_t seed;
	unsigned int repeat;		/* the whole list, this many times */
	unsigned int round;		/* the number of the first */
	/* What the vhost-user back-end polls (reported only); -1: unknown. */
	int vu_poll_us;
	bool vu_poll_adaptive;
	const char *vu_peer;		/* which vhost-user back-end, or NULL */
	bool smoke;
	bool quiet;
	const char *json;		/* append one JSON object per run */
};

/* What a queue thread counts; summed over queues for the result. */
struct qstats {
	uint64_t issued;
	uint64_t completed;
	uint64_t errors;		/* status other than VIRTIO_BLK_S_OK */
	uint64_t bad_len;		/* reads whose used length is wrong */
	uint64_t bytes;			/* moved by successful requests */
	/* In the measured window only: */
	uint64_t m_done;
	uint64_t m_kicks;		/* kick eventfd writes */
	uint64_t m_kicks_suppressed;	/* ... the device said were not needed */
	uint64_t m_call_reads;		/* call eventfd reads (notifications) */
	uint64_t m_signals;		/* sum of the call eventfd counters */
	uint64_t m_spurious;		/* wake-ups with nothing in the ring */
	uint64_t m_syscalls;		/* io_uring_enter calls */
	struct hist hist;		/* latency, ns */
};

enum phase {
	PHASE_RAMP,
	PHASE_MEASURE,
	PHASE_STOP,
};

struct run;

/* A queue thread; engines embed it first in their per-queue state. */
struct qthread {
	struct run *run;
	unsigned int index;
	pthread_t thread;
	pid_t tid;
	int err;			/* -errno when the thread failed */
	uint64_t rng;
	struct qstats st;
};


struct result {
	struct point p;
	bool ok;
	bool unsupported;		/* the kernel refused the point's mode */
	double secs;			/* measured window */
	struct qstats tot;
	uint64_t capacity;		/* bytes, as the backend reported it */
	pid_t be_pid;			/* whose CPU time is the backend's */
	const char *be_cpu_what;	/* "vhost workers", "daemon", ... */
	uint64_t be_cpu_ns;
	uint64_t guest_cpu_ns;		/* the driver threads */
	uint64_t irq_ns;		/* system-wide irq + softirq (/proc/stat) */
	bool cpu_ticks;			/* tick resolution only */
	unsigned int be_threads;
	uint64_t be_csw;		/* the back-end's context switches */
	int64_t be_syscalls;		/* ... its system calls; -1: unknown */
	bool have_dev_stats;		/* vhost-blk's counters, summed */
	bool have_cpoll_stats;		/* ... with completion polling's */
	struct vhost_blk_vring_stats dev;	/* in the measured window */
};

struct run {
	const struct opts *o;
	struct point p;
	uint64_t nblocks;		/* addressable blocks of bs bytes */
	_Atomic int phase;
	struct qthread **q;
	unsigned int nq;
	void *(*fn)(void *);		/* the engine's queue thread */
	struct cpu_sel be_sel;		/* the backend's threads */
	struct cpu_sel guest_sel;	/* the driver's threads */
	bool guest_cpu;			/* guest_sel applies */
	/* Called at the edges of the measured window (may be NULL). */
	int (*window)(struct run *r, bool start, struct result *res);
	void *priv;
};

static inline int run_phase(struct run *r)
{
	return atomic_load_explicit(&r->phase, memory_order_acquire);
}

/* Monotonic time in ns. */
uint64_t now_ns(void);
/* Pin every thread of @sel to the last online CPU (--cpus split). */
int run_pin_backend(const struct cpu_sel *sel);
/* The next random block for queue thread @q. */
uint64_t qthread_block(struct qthread *q);

/*
 * Run the point: start one thread per queue, warm up, measure (time- or
 * count-based), stop, join and sum.  The engines call it once their
 * queues are set up.
 */
int run_measure(struct run *r, struct result *res);

/* The engines. */
int engine_vhost_blk(const struct opts *o, const struct point *p,
		     struct result *res);
int engine_vhost_user(const struct opts *o, const struct point *p,
		      struct result *res);
int engine_uring(const struct opts *o, const struct point *p,
		 struct result *res);

const char *be_name(enum be_kind be);
const char *uring_name(enum uring_mode m);
const char *rw_name(enum rw_kind rw);

void bench_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* VBB_BENCH_H */
