// SPDX-License-Identifier: GPL-2.0
/*
 * The guest-model virtio-blk driver.  See guest.h.
 *
 * Completions are taken as Linux's virtblk_done() takes them: the driver
 * sleeps on the call eventfd (its interrupt) with callbacks enabled,
 * drains the used ring with callbacks disabled, and re-enables them with
 * a re-check for the race.  Freed slots are posted again as one batch
 * followed by at most one kick, which the device may have suppressed.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "guest.h"

#define GUEST_F(bit)	(1ULL << (bit))

uint64_t guest_features(const struct point *p)
{
	uint64_t f = GUEST_F(VIRTIO_F_VERSION_1) |
		     GUEST_F(VIRTIO_RING_F_INDIRECT_DESC) |
		     GUEST_F(VIRTIO_BLK_F_SEG_MAX) |
		     GUEST_F(VIRTIO_BLK_F_BLK_SIZE) |
		     GUEST_F(VIRTIO_BLK_F_FLUSH) |
		     GUEST_F(VIRTIO_BLK_F_TOPOLOGY) |
		     GUEST_F(VIRTIO_BLK_F_MQ);

	if (p->event_idx)
		f |= GUEST_F(VIRTIO_RING_F_EVENT_IDX);
	return f;
}

int guest_init(struct guest *g, const struct opts *o, const struct point *p)
{
	size_t per_q = (size_t)o->ring * (16 + 8 + 16 * GUEST_INDIRECT_MAX) +
		       (size_t)p->iodepth * (o->bs + 2 * 4096) + (64 << 10);
	size_t size = (1 << 20) + per_q * p->queues;
	void *va;

	memset(g, 0, sizeof(*g));
	g->memfd = -1;
	size = (size + (2 << 20) - 1) & ~(size_t)((2 << 20) - 1);
	g->memfd = memfd_create("vhost-blk-bench-guest", MFD_CLOEXEC);
	if (g->memfd < 0) {
		bench_err("memfd_create: %s", strerror(errno));
		return -errno;
	}
	if (ftruncate(g->memfd, (off_t)size)) {
		bench_err("ftruncate of the guest memory memfd to %zu bytes: %s",
			  size, strerror(errno));
		goto fail;
	}
	va = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, g->memfd, 0);
	if (va == MAP_FAILED) {
		bench_err("mmap of %zu bytes of guest memory: %s", size,
			  strerror(errno));
		goto fail;
	}
	/* A guest_mem like guest_mem_init() makes, on shared memory. */
	g->gm.va = va;
	g->gm.size = size;
	g->gm.gpa = GUEST_MEM_DEFAULT_GPA;
	g->gm.brk = 0;
	return 0;

fail:
	close(g->memfd);
	g->memfd = -1;
	return -errno;
}

int guest_prep(struct guest *g, struct vq *vqs, const struct opts *o,
	       const struct point *p)
{
	uint32_t len = o->bs;
	struct blk_req_spec spec = {
		.type = p->rw == RW_READ ? VIRTIO_BLK_T_IN : VIRTIO_BLK_T_OUT,
		.nseg = 1,
		.seg_len = &len,
		.flags = o->indirect ? BLK_REQ_INDIRECT : 0,
		.align = 4096,
	};
	unsigned int i, j;
	int err;

	g->nq = p->queues;
	for (i = 0; i < p->queues; i++) {
		struct gqueue *q = &g->q[i];

		q->vq = &vqs[i];
		q->depth = p->iodepth;
		q->slot = calloc(p->iodepth, sizeof(*q->slot));
		q->ready = calloc(p->iodepth, sizeof(*q->ready));
		if (!q->slot || !q->ready) {
			bench_err("out of memory for %u requests", p->iodepth);
			return -ENOMEM;
		}
		for (j = 0; j < p->iodepth; j++) {
			err = blk_req_prep(&q->slot[j].req, &g->gm, &spec);
			if (err) {
				bench_err("cannot lay out request %u of queue %u",
					  j, i);
				return err;
			}
			/* Write buffers carry something other than zeroes. */
			if (p->rw == RW_WRITE)
				memset(q->slot[j].req.data[0], 0x5a, len);
		}
		g->qp[i] = &q->qt;
	}
	return 0;
}

void guest_destroy(struct guest *g)
{
	unsigned int i, j;

	for (i = 0; i < BENCH_MAX_QUEUES; i++) {
		struct gqueue *q = &g->q[i];

		if (q->slot)
			for (j = 0; j < q->depth; j++)
				blk_req_free(&q->slot[j].req);
		free(q->slot);
		free(q->ready);
	}
	if (g->gm.va)
		munmap(g->gm.va, g->gm.size);
	if (g->memfd >= 0)
		close(g->memfd);
	memset(g, 0, sizeof(*g));
	g->memfd = -1;
}

/*
 * Callbacks off while draining (virtqueue_disable_cb): without EVENT_IDX
 * the NO_INTERRUPT flag; with it, used_event is moved out of the way, as
 * Linux does with the value 0.
 */
static void guest_cb_disable(struct vq *vq)
{
	if (vq->event_idx)
		vq_set_used_event(vq, 0);
	else
		vq_set_no_interrupt(vq, true);
}

/*
 * Callbacks back on (virtqueue_enable_cb): ask for a signal on the next
 * completion, then re-check the ring.  True if it is empty, i.e. the
 * device will signal the next one.
 */
static bool guest_cb_enable(struct vq *vq)
{
	if (vq->event_idx)
		vq_set_used_event(vq, vq->last_used_idx);
	else
		vq_set_no_interrupt(vq, false);
	/* vq_set_*() end with a full barrier: used->idx is read after. */
	return !vq_used_pending(vq);
}

static bool guest_may_issue(struct gqueue *q, int phase)
{
	const struct opts *o = q->qt.run->o;

	if (phase == PHASE_STOP)
		return false;
	return !o->ios || q->qt.st.issued < o->ios;
}

/* Post every ready slot, then kick once.  0 or -errno. */
static int guest_submit(struct gqueue *q, int phase)
{
	struct qthread *qt = &q->qt;
	unsigned int sectors = qt->run->o->bs / BLK_SECTOR_SIZE, n = 0;
	int err, kicked;

	while (q->nready && guest_may_issue(q, phase)) {
		struct gslot *s = &q->slot[q->ready[--q->nready]];

		s->req.hdr->sector = qthread_block(qt) * sectors;
		s->t = now_ns();
		err = blk_req_post(q->vq, &s->req);
		if (err)
			return err;
		qt->st.issued++;
		n++;
	}
	if (!n)
		return 0;
	kicked = vq_kick(q->vq);
	if (kicked < 0)
		return kicked;
	if (phase == PHASE_MEASURE) {
		qt->st.m_kicks += kicked;
		qt->st.m_kicks_suppressed += !kicked;
	}
	return 0;
}

static int guest_complete(struct gqueue *q, const struct vq_used *u,
			  int phase, uint64_t now)
{
	struct qthread *qt = &q->qt;
	const struct opts *o = qt->run->o;
	struct gslot *s;

	if (u->bad) {
		bench_err("queue %u: the device returned head %u, which is not outstanding",
			  qt->index, u->id);
		return -EPROTO;
	}
	s = (struct gslot *)((char *)u->token - offsetof(struct gslot, req));
	qt->st.completed++;
	if (*s->req.status != VIRTIO_BLK_S_OK) {
		if (!qt->st.errors)
			bench_err("queue %u: request at sector %llu: status %s (0x%02x)",
				  qt->index,
				  (unsigned long long)s->req.hdr->sector,
				  blk_status_name(*s->req.status),
				  *s->req.status);
		qt->st.errors++;
	} else {
		qt->st.bytes += o->bs;
	}
	if (qt->run->p.rw == RW_READ && u->len != o->bs + 1)
		qt->st.bad_len++;
	if (phase == PHASE_MEASURE) {
		qt->st.m_done++;
		hist_add(&qt->st.hist, now - s->t);
	}
	q->ready[q->nready++] = (unsigned int)(s - q->slot);
	return 0;
}

/* Sleep until the device signals.  0 or -errno (reported). */
static int guest_wait(struct gqueue *q, int phase)
{
	struct qthread *qt = &q->qt;
	struct vq *vq = q->vq;
	uint64_t reads = vq->call_reads, sig = vq->notifications;
	int err;

	err = vq_wait_call(vq, VQ_HANG_TIMEOUT_MS);
	if (err == -ETIMEDOUT) {
		bench_err("queue %u: no completion signalled within %d ms (in flight %u, avail idx %u, used idx %u, last used %u)",
			  qt->index, VQ_HANG_TIMEOUT_MS, vq->inflight,
			  vq->avail_idx,
			  __atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE),
			  vq->last_used_idx);
		return err;
	}
	if (err)
		return err;
	if (phase == PHASE_MEASURE) {
		qt->st.m_call_reads += vq->call_reads - reads;
		qt->st.m_signals += vq->notifications - sig;
		qt->st.m_spurious += !vq_used_pending(vq);
	}
	return 0;
}

static void *guest_thread(void *arg)
{
	struct gqueue *q = arg;
	struct vq *vq = q->vq;
	struct vq_used u;
	unsigned int i;
	int phase, err = 0;

	for (i = 0; i < q->depth; i++)
		q->ready[i] = q->depth - 1 - i;
	q->nready = q->depth;
	vq_set_cb_mode(vq, VQ_CB_MANUAL);
	guest_cb_enable(vq);

	for (;;) {
		phase = run_phase(q->qt.run);
		err = guest_submit(q, phase);
		if (err || !vq->inflight)
			break;
		if (!vq_used_pending(vq)) {
			err = guest_wait(q, phase);
			if (err)
				break;
		}
		phase = run_phase(q->qt.run);
		do {
			uint64_t now;

			guest_cb_disable(vq);
			while (!err && vq_get_used(vq, &u)) {
				now = now_ns();
				err = guest_complete(q, &u, phase, now);
			}
		} while (!err && !guest_cb_enable(vq));
		if (err)
			break;
	}
	q->qt.err = err;
	return NULL;
}

void guest_attach(struct guest *g, struct run *r)
{
	r->q = g->qp;
	r->nq = g->nq;
	r->fn = guest_thread;
}
