// SPDX-License-Identifier: GPL-2.0
/*
 * Back-end kind 2: any vhost-user-blk back-end on a unix socket, driven
 * as QEMU's vhost-user-blk device drives it.  Its CPU time is that of
 * every thread of the peer process.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "guest.h"
#include "vu.h"

int engine_vhost_user(const struct opts *o, const struct point *p,
		      struct result *res)
{
	uint64_t want = guest_features(p), acked;
	struct run r = { .o = o, .p = *p };
	static struct vq vqs[BENCH_MAX_QUEUES];
	static struct guest g;
	struct vu_conn c = { .fd = -1 };
	unsigned int i, nvq = 0;
	int err;

	err = guest_init(&g, o, p);
	if (!err)
		err = vu_connect(&c, o->sock);
	if (!err)
		err = vu_init(&c);
	if (err)
		goto out;
	if (c.max_queues && p->queues > c.max_queues) {
		bench_err("vhost-user %s: %u queues wanted, the back-end has %u",
			  o->sock, p->queues, c.max_queues);
		err = -EINVAL;
		goto out;
	}
	if (!c.have_config) {
		bench_err("vhost-user %s: no VHOST_USER_PROTOCOL_F_CONFIG: cannot learn the disk size",
			  o->sock);
		err = -ENOTSUP;
		goto out;
	}
	acked = c.features & want;
	if ((want & ~acked) & (1ULL << VIRTIO_RING_F_EVENT_IDX)) {
		bench_err("vhost-user %s: the back-end does not offer VIRTIO_RING_F_EVENT_IDX",
			  o->sock);
		err = -ENOTSUP;
		goto out;
	}
	acked |= c.features & (1ULL << VU_F_PROTOCOL_FEATURES);
	err = vu_set_features(&c, acked);
	if (!err)
		err = vu_set_mem_table(&c, &g.gm, g.memfd);
	for (i = 0; !err && i < p->queues; i++) {
		struct vq_config cfg = {
			.index = i,
			.num = o->ring,
			.max_indirect = GUEST_INDIRECT_MAX,
			.event_idx = p->event_idx == 1,
		};

		err = vq_init(&vqs[i], &g.gm, &cfg);
		if (err)
			break;
		nvq = i + 1;
		err = vu_setup_vq(&c, &vqs[i]);
	}
	if (!err)
		err = guest_prep(&g, vqs, o, p);
	if (err)
		goto out;

	res->capacity = c.capacity * 512;
	r.nblocks = (o->size && o->size < res->capacity ? o->size :
		     res->capacity) / o->bs;
	if (!r.nblocks) {
		bench_err("vhost-user %s: the disk has %llu bytes, less than one request",
			  o->sock, (unsigned long long)res->capacity);
		err = -EINVAL;
		goto out;
	}
	if (c.peer <= 0) {
		bench_err("vhost-user %s: SO_PEERCRED gave no peer pid: cannot measure the back-end's CPU time",
			  o->sock);
		err = -ESRCH;
		goto out;
	}
	r.be_sel = (struct cpu_sel){ .pid = c.peer, .match = CPU_ALL };
	r.guest_sel = (struct cpu_sel){ .pid = getpid(), .match = CPU_ALL };
	r.guest_cpu = true;
	res->be_pid = c.peer;
	res->be_cpu_what = "back-end process";
	if (o->split_cpus) {
		err = run_pin_backend(&r.be_sel);
		if (err)
			goto out;
	}
	guest_attach(&g, &r);
	err = run_measure(&r, res);
	/* Stop the rings before the memory goes away. */
	for (i = 0; i < nvq && c.fd >= 0; i++) {
		int e = vu_stop_vq(&c, i);

		err = err ? err : e;
	}
out:
	vu_close(&c);
	for (i = 0; i < nvq; i++)
		vq_destroy(&vqs[i]);
	guest_destroy(&g);
	return err;
}
