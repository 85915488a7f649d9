/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-user, front-end side (QEMU's docs/interop/vhost-user.rst): just
 * what a virtio-blk front-end with shared memfd memory needs, in the order
 * QEMU sends it.
 */
#ifndef VBB_VU_H
#define VBB_VU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/virtio_blk.h>

#include "guest_mem.h"
#include "vq.h"
#include "vu_io.h"

/* The part of virtio_blk_config the tool reads: up to num_queues. */
#define VU_BLK_CONFIG_SIZE \
	(offsetof(struct virtio_blk_config, num_queues) + sizeof(__u16))

struct vu_conn {
	int fd;
	const char *path;
	pid_t peer;			/* the back-end process (SO_PEERCRED) */
	uint64_t features;		/* offered */
	uint64_t protocol;		/* negotiated protocol features */
	unsigned int max_queues;	/* GET_QUEUE_NUM; 0: unknown */
	uint64_t capacity;		/* sectors, from GET_CONFIG */
	uint16_t num_queues;		/* from GET_CONFIG (VIRTIO_BLK_F_MQ) */
	bool have_config;
};

/* Connect to @path (retrying for a few seconds while it does not exist). */
int vu_connect(struct vu_conn *c, const char *path);
/* GET_FEATURES, protocol features, GET_QUEUE_NUM, SET_OWNER, GET_CONFIG. */
int vu_init(struct vu_conn *c);
int vu_set_features(struct vu_conn *c, uint64_t features);
/* One region: the whole of @gm, mapped from @memfd at offset 0. */
int vu_set_mem_table(struct vu_conn *c, const struct guest_mem *gm,
		     int memfd);
/* NUM, BASE, ADDR, KICK, CALL, then ENABLE. */
int vu_setup_vq(struct vu_conn *c, const struct vq *vq);
/* GET_VRING_BASE: the back-end stops the ring. */
int vu_stop_vq(struct vu_conn *c, unsigned int index);
void vu_close(struct vu_conn *c);

#endif /* VBB_VU_H */
