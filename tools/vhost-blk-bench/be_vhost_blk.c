// SPDX-License-Identifier: GPL-2.0
/*
 * Back-end kind 1: /dev/vhost-blk, set up as a VMM would (with the
 * selftests' vblk_dev.c building blocks), with the polling mode and worker
 * layout of the point.
 * Its CPU time is that of the vhost worker threads ("vhost-<owner pid>",
 * threads of this process).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "bench.h"
#include "guest.h"
#include "vblk_dev.h"

struct vbk {
	int fd;
	unsigned int nq;
	uint64_t features;		/* acked */
	bool cpoll_refused;		/* EINVAL to VHOST_BLK_POLL_COMPLETIONS */
	struct vq vq[BENCH_MAX_QUEUES];
};

static void vbk_stats_add(struct vhost_blk_vring_stats *t,
			  const struct vhost_blk_vring_stats *st)
{
	t->reqs_in += st->reqs_in;
	t->reqs_out += st->reqs_out;
	t->reqs_flush += st->reqs_flush;
	t->reqs_get_id += st->reqs_get_id;
	t->reqs_unsupp += st->reqs_unsupp;
	t->reqs_ioerr += st->reqs_ioerr;
	t->bytes_read += st->bytes_read;
	t->bytes_written += st->bytes_written;
	t->kicks += st->kicks;
	t->notifies += st->notifies;
	t->notifies_suppressed += st->notifies_suppressed;
	t->used_batches += st->used_batches;
	t->polls += st->polls;
	t->poll_hits += st->poll_hits;
	t->poll_ns += st->poll_ns;
	t->inflight += st->inflight;
	if (st->inflight_max > t->inflight_max)
		t->inflight_max = st->inflight_max;
	if (st->poll_window_ns > t->poll_window_ns)
		t->poll_window_ns = st->poll_window_ns;
	t->polled_bios += st->polled_bios;
	t->poll_reaped += st->poll_reaped;
	t->poll_fallbacks += st->poll_fallbacks;
}

/*
 * The counters of queue @index, completion polling's too where the kernel
 * has them (@argsz comes back with what it filled in).
 */
static int vbk_get_stats(int fd, unsigned int index, uint32_t flags,
			 struct vhost_blk_vring_stats *x, bool *cpoll)
{
	int err;

	memset(x, 0, sizeof(*x));
	x->argsz = sizeof(*x);
	x->index = index;
	x->flags = flags;
	err = VBLK_IOCTL(fd, VHOST_BLK_GET_VRING_STATS, x);
	*cpoll = !err && x->argsz >= offsetof(struct vhost_blk_vring_stats,
					      poll_fallbacks) +
					     sizeof(x->poll_fallbacks);
	return err;
}

/* The device's own counters over the window: reset at its start. */
static int vbk_window(struct run *r, bool start, struct result *res)
{
	struct vbk *b = r->priv;
	bool cpoll = true;
	unsigned int i;

	if (!start)
		memset(&res->dev, 0, sizeof(res->dev));
	for (i = 0; i < b->nq; i++) {
		struct vhost_blk_vring_stats st;
		bool have;
		int err = vbk_get_stats(b->fd, i,
					start ? VHOST_BLK_STATS_RESET : 0,
					&st, &have);

		if (err)
			return err;
		cpoll &= have;
		if (!start)
			vbk_stats_add(&res->dev, &st);
	}
	res->have_dev_stats = !start;
	res->have_cpoll_stats = !start && cpoll;
	return 0;
}

static int vbk_workers(struct vbk *b)
{
	unsigned int i;
	int err;

	for (i = 1; i < b->nq; i++) {
		struct vhost_worker_state w = { 0 };
		struct vhost_vring_worker vw = { .index = i };

		err = VBLK_IOCTL(b->fd, VHOST_NEW_WORKER, &w);
		if (err)
			return err;
		vw.worker_id = w.worker_id;
		err = VBLK_IOCTL(b->fd, VHOST_ATTACH_VRING_WORKER, &vw);
		if (err)
			return err;
	}
	return 0;
}

/*
 * The polling mode of the point.  A kernel that does not know
 * VHOST_BLK_POLL_COMPLETIONS answers EINVAL: noted in @b, unreported, so
 * that the run is recorded as unsupported.
 */
static int vbk_poll(struct vbk *b, const struct point *p)
{
	unsigned int us = p->poll_us > 0 ? (unsigned int)p->poll_us : 0;
	unsigned int i;
	int err;

	for (i = 0; i < b->nq; i++) {
		struct vhost_vring_state t = { .index = i, .num = us };
		struct vhost_blk_vring_poll mode = {
			.index = i,
			.flags = p->poll_adaptive ? VHOST_BLK_POLL_ADAPTIVE : 0,
		};

		err = VBLK_IOCTL(b->fd, VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &t);
		if (err)
			return err;
		if (p->poll_completions == 1) {
			mode.flags |= VHOST_BLK_POLL_COMPLETIONS;
			if (ioctl(b->fd, VHOST_BLK_SET_VRING_POLL, &mode)) {
				err = -errno;
				if (err == -EINVAL) {
					b->cpoll_refused = true;
					return err;
				}
				bench_err("%s: ioctl VHOST_BLK_SET_VRING_POLL (queue %u, flags %#x): %s",
					  VBLK_DEV_PATH, i, mode.flags,
					  strerror(-err));
				return err;
			}
			continue;
		}
		err = VBLK_IOCTL(b->fd, VHOST_BLK_SET_VRING_POLL, &mode);
		if (err)
			return err;
	}
	return 0;
}

/*
 * What a VMM does: only the queues it uses (VHOST_BLK_SET_NUM_QUEUES must
 * come first), owner, features, memory, rings; then the worker layout
 * and the polling mode of the point, and the backend last.
 */
static int vbk_open(struct vbk *b, struct guest *g, const struct opts *o,
		    const struct point *p, int backend_fd, uint64_t *capacity)
{
	__u32 nq = p->queues;
	struct virtio_blk_config bc;
	uint64_t offered;
	unsigned int i;
	int err;

	b->nq = p->queues;
	b->fd = open(VBLK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (b->fd < 0) {
		err = -errno;
		bench_err("open %s: %s", VBLK_DEV_PATH, strerror(errno));
		return err;
	}
	err = VBLK_IOCTL(b->fd, VHOST_BLK_SET_NUM_QUEUES, &nq);
	if (!err)
		err = VBLK_IOCTL(b->fd, VHOST_SET_OWNER, NULL);
	if (!err)
		err = vblk_get_features(b->fd, &offered);
	if (err)
		return err;
	b->features = offered & guest_features(p);
	if (p->event_idx !=
	    !!(b->features & (1ULL << VIRTIO_RING_F_EVENT_IDX))) {
		bench_err("%s does not offer VIRTIO_RING_F_EVENT_IDX",
			  VBLK_DEV_PATH);
		return -ENOTSUP;
	}
	err = vblk_set_features(b->fd, b->features);
	if (!err && o->pin_memory)
		err = vblk_set_mem_pinned(b->fd, true);
	if (!err)
		err = vblk_set_mem_table(b->fd, &g->gm);
	for (i = 0; !err && i < b->nq; i++) {
		struct vq_config cfg = {
			.index = i,
			.num = o->ring,
			.max_indirect = GUEST_INDIRECT_MAX,
			.event_idx = p->event_idx == 1,
		};

		err = vq_init(&b->vq[i], &g->gm, &cfg);
		if (!err)
			err = vblk_setup_vq(b->fd, &b->vq[i], 0);
	}
	if (!err && o->workers == WORKERS_PER_QUEUE)
		err = vbk_workers(b);
	if (!err)
		err = vbk_poll(b, p);
	if (!err)
		err = vblk_set_backend(b->fd, backend_fd);
	if (!err)
		err = vblk_get_config(b->fd, &bc);
	if (err)
		return err;
	*capacity = bc.capacity * 512;
	return 0;
}

static void vbk_close(struct vbk *b)
{
	unsigned int i;

	/* Closing the device drains it: every request in flight completes. */
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	for (i = 0; i < BENCH_MAX_QUEUES; i++)
		if (b->vq[i].kick_fd >= 0 || b->vq[i].call_fd >= 0)
			vq_destroy(&b->vq[i]);
}

int engine_vhost_blk(const struct opts *o, const struct point *p,
		     struct result *res)
{
	struct run r = { .o = o, .p = *p };
	static struct guest g;
	static struct vbk b;
	unsigned int i;
	int bfd, err;

	memset(&b, 0, sizeof(b));
	b.fd = -1;
	for (i = 0; i < BENCH_MAX_QUEUES; i++)
		b.vq[i].kick_fd = b.vq[i].call_fd = -1;

	bfd = open(o->dev, O_RDWR | O_CLOEXEC);
	if (bfd < 0) {
		err = -errno;
		bench_err("open %s: %s", o->dev, strerror(errno));
		return err;
	}
	err = guest_init(&g, o, p);
	if (!err)
		err = vbk_open(&b, &g, o, p, bfd, &res->capacity);
	if (!err)
		err = guest_prep(&g, b.vq, o, p);
	if (err && b.cpoll_refused) {
		res->unsupported = true;
		goto out;
	}
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
	/* The vhost workers are threads of the owner, "vhost-<its pid>". */
	r.be_sel = (struct cpu_sel){ .pid = getpid(), .match = CPU_NAMED };
	snprintf(r.be_sel.name, sizeof(r.be_sel.name), "vhost-%d", getpid());
	r.guest_sel = r.be_sel;
	r.guest_sel.match = CPU_NOT_NAMED;
	r.guest_cpu = true;
	if (cpu_count(&r.be_sel) <= 0) {
		bench_err("no vhost worker thread (vhost-%d) in /proc/%d/task: cannot measure the back-end's CPU time",
			  getpid(), getpid());
		err = -ESRCH;
		goto out;
	}
	res->be_pid = getpid();
	res->be_cpu_what = "vhost worker threads";
	if (o->split_cpus) {
		err = run_pin_backend(&r.be_sel);
		if (err)
			goto out;
	}
	r.window = vbk_window;
	r.priv = &b;
	guest_attach(&g, &r);
	err = run_measure(&r, res);
out:
	vbk_close(&b);
	close(bfd);
	guest_destroy(&g);
	return err;
}
