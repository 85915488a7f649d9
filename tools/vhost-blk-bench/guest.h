/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The guest model: memory shared the way QEMU shares guest RAM (a memfd),
 * and a virtio-blk driver that keeps iodepth requests in flight on each
 * virtqueue and takes completions the way Linux's virtio_blk does.  The
 * same driver runs against /dev/vhost-blk and vhost-user back-ends.
 */
#ifndef VBB_GUEST_H
#define VBB_GUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "blk_req.h"
#include "guest_mem.h"
#include "vq.h"

/* Entries of each indirect table: header, data, status. */
#define GUEST_INDIRECT_MAX	4

struct gslot {
	struct blk_req req;
	uint64_t t;			/* when it was posted */
};

struct gqueue {
	struct qthread qt;		/* first: the run sees only this */
	struct vq *vq;
	struct gslot *slot;
	unsigned int depth;
	unsigned int *ready;		/* slots waiting to be posted */
	unsigned int nready;
};

struct guest {
	struct guest_mem gm;
	int memfd;
	unsigned int nq;
	struct gqueue q[BENCH_MAX_QUEUES];
	struct qthread *qp[BENCH_MAX_QUEUES];
};

/* Shared guest memory (memfd, MAP_SHARED) big enough for the point. */
int guest_init(struct guest *g, const struct opts *o, const struct point *p);
/* The driver's requests on @vqs (p->queues of them, already set up). */
int guest_prep(struct guest *g, struct vq *vqs, const struct opts *o,
	       const struct point *p);
/* Point @r at the driver's queue threads. */
void guest_attach(struct guest *g, struct run *r);
void guest_destroy(struct guest *g);

/* Features the driver asks for, whatever the back-end. */
uint64_t guest_features(const struct point *p);

#endif /* VBB_GUEST_H */
