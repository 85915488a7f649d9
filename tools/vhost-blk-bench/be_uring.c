// SPDX-License-Identifier: GPL-2.0
/*
 * Back-end kind 3: the raw device from userspace, O_DIRECT through one
 * io_uring per queue thread: what a virtualized path can at best approach.
 * Each thread submits its freed slots and waits for a completion in one
 * io_uring_enter().  Three set-ups (point.uring):
 *
 *   plain    a plain ring, interrupt completions;
 *   sqpoll   the file and the buffers registered, and one SQPOLL thread
 *            shared by every queue's ring (IORING_SETUP_ATTACH_WQ), on the
 *            back-end's CPU with --cpus split;
 *   iopoll   the file and the buffers registered, IORING_SETUP_IOPOLL:
 *            the waiting thread polls the device for completions, which
 *            needs a disk with poll queues (null_blk poll_queues=N).
 *
 * The CPU time is that of the tool's own threads, the SQPOLL thread
 * ("iou-sqp-PID", a thread of this process) included.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>
#include <liburing.h>

#include "bench.h"
#include "guest.h"

struct uqueue {
	struct qthread qt;		/* first: the run sees only this */
	struct io_uring ring;
	bool ring_ok;
	bool fixed;			/* registered file (index 0) and buffers */
	int fd;
	unsigned int depth;
	uint8_t **buf;			/* in the shared "guest" memory */
	uint64_t *t;			/* when each slot was submitted */
	unsigned int *ready;
	unsigned int nready;
};

struct uring {
	struct guest g;			/* only for its memory */
	struct uqueue q[BENCH_MAX_QUEUES];
	struct qthread *qp[BENCH_MAX_QUEUES];
};

static int uring_submit(struct uqueue *q, int phase)
{
	struct qthread *qt = &q->qt;
	const struct opts *o = qt->run->o;
	int n = 0;

	while (q->nready && phase != PHASE_STOP &&
	       (!o->ios || qt->st.issued < o->ios)) {
		unsigned int i = q->ready[--q->nready];
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
		uint64_t off = qthread_block(qt) * o->bs;

		if (!sqe) {
			bench_err("queue %u: io_uring submission queue full",
				  qt->index);
			return -EBUSY;
		}
		if (q->fixed && qt->run->p.rw == RW_READ)
			io_uring_prep_read_fixed(sqe, 0, q->buf[i], o->bs, off,
						 (int)i);
		else if (q->fixed)
			io_uring_prep_write_fixed(sqe, 0, q->buf[i], o->bs,
						  off, (int)i);
		else if (qt->run->p.rw == RW_READ)
			io_uring_prep_read(sqe, q->fd, q->buf[i], o->bs, off);
		else
			io_uring_prep_write(sqe, q->fd, q->buf[i], o->bs, off);
		if (q->fixed)
			sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data64(sqe, i);
		q->t[i] = now_ns();
		qt->st.issued++;
		n++;
	}
	return n;
}

static void uring_reap(struct uqueue *q, int phase)
{
	struct qthread *qt = &q->qt;
	unsigned int bs = qt->run->o->bs, seen = 0, head;
	struct io_uring_cqe *cqe;
	uint64_t now = now_ns();

	io_uring_for_each_cqe(&q->ring, head, cqe) {
		unsigned int i = (unsigned int)cqe->user_data;

		qt->st.completed++;
		if (cqe->res != (int)bs) {
			if (!qt->st.errors)
				bench_err("queue %u: io_uring request: %s",
					  qt->index, cqe->res < 0 ?
					  strerror(-cqe->res) : "short transfer");
			qt->st.errors++;
		} else {
			qt->st.bytes += bs;
		}
		if (phase == PHASE_MEASURE) {
			qt->st.m_done++;
			hist_add(&qt->st.hist, now - q->t[i]);
		}
		q->ready[q->nready++] = i;
		seen++;
	}
	io_uring_cq_advance(&q->ring, seen);
}

static void *uring_thread(void *arg)
{
	struct uqueue *q = arg;
	struct qthread *qt = &q->qt;
	unsigned int inflight = 0, i;
	int phase, n, err = 0;

	for (i = 0; i < q->depth; i++)
		q->ready[i] = q->depth - 1 - i;
	q->nready = q->depth;

	for (;;) {
		struct __kernel_timespec ts = { .tv_sec = VQ_HANG_TIMEOUT_MS / 1000 };
		struct io_uring_cqe *cqe;

		phase = run_phase(qt->run);
		n = uring_submit(q, phase);
		if (n < 0) {
			err = n;
			break;
		}
		inflight += (unsigned int)n;
		if (!inflight)
			break;
		n = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts,
						     NULL);
		if (phase == PHASE_MEASURE)
			qt->st.m_syscalls++;
		if (n == -ETIME) {
			bench_err("queue %u: no io_uring completion within %d ms (%u in flight)",
				  qt->index, VQ_HANG_TIMEOUT_MS, inflight);
			err = -ETIMEDOUT;
			break;
		}
		if (n < 0 && n != -EINTR) {
			bench_err("queue %u: io_uring_enter: %s", qt->index,
				  strerror(-n));
			err = n;
			break;
		}
		phase = run_phase(qt->run);
		i = q->nready;
		uring_reap(q, phase);
		inflight -= q->nready - i;
	}
	qt->err = err;
	return NULL;
}

/* Register queue @q's file and buffers with its ring. */
static int uring_register(struct uqueue *q, const struct opts *o)
{
	struct iovec *iov = calloc(q->depth, sizeof(*iov));
	unsigned int j;
	int err;

	if (!iov)
		return -ENOMEM;
	for (j = 0; j < q->depth; j++) {
		iov[j].iov_base = q->buf[j];
		iov[j].iov_len = o->bs;
	}
	err = io_uring_register_files(&q->ring, &q->fd, 1);
	if (err)
		bench_err("io_uring_register_files(%s): %s", o->dev,
			  strerror(-err));
	if (!err) {
		err = io_uring_register_buffers(&q->ring, iov, q->depth);
		if (err)
			bench_err("io_uring_register_buffers(%u of %u bytes): %s",
				  q->depth, o->bs, strerror(-err));
	}
	free(iov);
	q->fixed = !err;
	return err;
}

/*
 * The ring of queue @i: SQPOLL rings after the first attach to its SQPOLL
 * thread (@sq_fd), so that all queues share one, as they share one vhost
 * worker or one iothread.
 */
static int uring_ring(struct uqueue *q, const struct opts *o,
		      const struct point *p, int sq_fd)
{
	struct io_uring_params par = { 0 };
	int err;

	if (p->uring == URING_SQPOLL) {
		par.flags = IORING_SETUP_SQPOLL;
		par.sq_thread_idle = 100;	/* ms */
		if (o->split_cpus) {
			long n = sysconf(_SC_NPROCESSORS_ONLN);

			par.flags |= IORING_SETUP_SQ_AFF;
			par.sq_thread_cpu = n > 1 ? (unsigned int)n - 1 : 0;
		}
		if (sq_fd >= 0) {
			par.flags |= IORING_SETUP_ATTACH_WQ;
			par.wq_fd = (unsigned int)sq_fd;
		}
	} else if (p->uring == URING_IOPOLL) {
		par.flags = IORING_SETUP_IOPOLL;
	}
	err = io_uring_queue_init_params(p->iodepth, &q->ring, &par);
	if (err)
		bench_err("io_uring_queue_init(%u, %s): %s", p->iodepth,
			  uring_name(p->uring), strerror(-err));
	return err;
}

static int uring_prep(struct uring *u, const struct opts *o,
		      const struct point *p)
{
	unsigned int i, j;
	int err;

	for (i = 0; i < p->queues; i++) {
		struct uqueue *q = &u->q[i];

		q->fd = open(o->dev, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (q->fd < 0) {
			err = -errno;
			bench_err("open %s (O_DIRECT): %s", o->dev,
				  strerror(errno));
			return err;
		}
		err = uring_ring(q, o, p, i ? u->q[0].ring.ring_fd : -1);
		if (err)
			return err;
		q->ring_ok = true;
		q->depth = p->iodepth;
		q->buf = calloc(p->iodepth, sizeof(*q->buf));
		q->t = calloc(p->iodepth, sizeof(*q->t));
		q->ready = calloc(p->iodepth, sizeof(*q->ready));
		if (!q->buf || !q->t || !q->ready)
			return -ENOMEM;
		for (j = 0; j < p->iodepth; j++) {
			q->buf[j] = guest_alloc(&u->g.gm, o->bs, 4096);
			if (!q->buf[j])
				return -ENOMEM;
			if (p->rw == RW_WRITE)
				memset(q->buf[j], 0x5a, o->bs);
		}
		if (p->uring != URING_PLAIN) {
			err = uring_register(q, o);
			if (err)
				return err;
		}
		u->qp[i] = &q->qt;
	}
	return 0;
}

static void uring_destroy(struct uring *u)
{
	unsigned int i;

	for (i = 0; i < BENCH_MAX_QUEUES; i++) {
		struct uqueue *q = &u->q[i];

		if (q->ring_ok)
			io_uring_queue_exit(&q->ring);
		if (q->fd >= 0)
			close(q->fd);
		free(q->buf);
		free(q->t);
		free(q->ready);
	}
	guest_destroy(&u->g);
	memset(u, 0, sizeof(*u));
}

static int uring_capacity(const char *path, uint64_t *bytes)
{
	struct stat st;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		bench_err("open %s: %s", path, strerror(errno));
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, bytes)) {
			err = -errno;
			bench_err("%s: ioctl BLKGETSIZE64: %s", path,
				  strerror(errno));
		}
	} else {
		*bytes = (uint64_t)st.st_size;
	}
	if (fd >= 0)
		close(fd);
	return err;
}

int engine_uring(const struct opts *o, const struct point *p,
		 struct result *res)
{
	struct run r = { .o = o, .p = *p };
	static struct uring u;
	int err;

	memset(&u, 0, sizeof(u));
	u.g.memfd = -1;
	for (unsigned int i = 0; i < BENCH_MAX_QUEUES; i++)
		u.q[i].fd = -1;
	err = uring_capacity(o->dev, &res->capacity);
	if (!err)
		err = guest_init(&u.g, o, p);
	if (!err)
		err = uring_prep(&u, o, p);
	if (err)
		goto out;
	r.nblocks = (o->size && o->size < res->capacity ? o->size :
		     res->capacity) / o->bs;
	if (!r.nblocks) {
		bench_err("%s: %llu bytes, smaller than one request", o->dev,
			  (unsigned long long)res->capacity);
		err = -EINVAL;
		goto out;
	}
	/* Everything the process does is the "back-end" here. */
	r.be_sel = (struct cpu_sel){ .pid = getpid(), .match = CPU_ALL };
	res->be_pid = getpid();
	res->be_cpu_what = p->uring == URING_SQPOLL ?
		"the tool's own threads and the SQPOLL thread" :
		"the tool's own threads";
	r.q = u.qp;
	r.nq = p->queues;
	r.fn = uring_thread;
	err = run_measure(&r, res);
out:
	uring_destroy(&u);
	return err;
}
