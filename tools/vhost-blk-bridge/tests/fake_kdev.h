/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A fake /dev/vhost-blk for the bridge's unit tests (struct kdev_ops): it
 * records every ioctl the bridge issues and refuses what the real module
 * refuses (SET_VRING_NUM / BASE on a running ring), so that the tests
 * check the bridge's calls, not a kernel.
 */
#ifndef VBB_FAKE_KDEV_H
#define VBB_FAKE_KDEV_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/vhost.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "kdev.h"
#include "vhost_user.h"

#define F(bit)		(1ULL << (bit))

#define FAKE_MAX_CALLS	512
#define FAKE_FD		1000
/* Regions a recorded VHOST_SET_MEM_TABLE keeps; the vhost module's limit. */
#define FAKE_MAX_REGIONS	16
#define FAKE_MAX_MEM_REGIONS	64

struct fake_call {
	unsigned long req;
	int ret;
	union {
		uint64_t u64;
		struct vhost_vring_state state;
		struct vhost_vring_addr addr;
		struct vhost_vring_file file;
		char serial[VHOST_BLK_SERIAL_LEN];
	} a;
	bool fd_valid;			/* vring file / backend: fd was open */
	bool fd_socket;			/* CHARGE_PEER: ... and a socket */
	uint32_t nregions;
	struct vhost_memory_region regions[FAKE_MAX_REGIONS];
};

struct fake {
	struct fake_call calls[FAKE_MAX_CALLS];
	unsigned int ncalls;
	unsigned int opens, closes;
	bool open;
	int open_errno;			/* open fails with this */
	bool owner;
	bool attached;
	bool ro_backend;		/* the attached fd is read-only */
	uint64_t features;
	bool has_config;		/* VHOST_BLK_GET_CONFIG exists */
	uint8_t wce;			/* VHOST_BLK_SET_CONFIG's writeback */
	bool has_fork_owner;		/* VHOST_SET_FORK_FROM_OWNER exists */
	bool has_charge_peer;		/* VHOST_BLK_CHARGE_PEER exists */
	bool kthreads;			/* kthread workers were asked for */
	bool charged;			/* VHOST_BLK_CHARGE_PEER succeeded */
	bool attached_once;		/* a backend was attached */
	unsigned int workers;		/* VHOST_NEW_WORKER: the last id */
	unsigned int nvqs;
	uint64_t desc[KDEV_MAX_QUEUES];
	bool running[KDEV_MAX_QUEUES];
	uint16_t last_avail[KDEV_MAX_QUEUES];
	unsigned long fail_req;		/* this ioctl fails ... */
	int fail_errno;			/* ... with this */
};

#define FAKE_FEATURES							\
	(F(VIRTIO_F_VERSION_1) | F(VIRTIO_RING_F_INDIRECT_DESC) |	\
	 F(VIRTIO_RING_F_EVENT_IDX) | F(VIRTIO_BLK_F_SEG_MAX) |		\
	 F(VIRTIO_BLK_F_BLK_SIZE) | F(VIRTIO_BLK_F_FLUSH) |		\
	 F(VIRTIO_BLK_F_CONFIG_WCE) |					\
	 F(VIRTIO_BLK_F_TOPOLOGY) | F(VIRTIO_BLK_F_MQ) |		\
	 F(VIRTIO_BLK_F_DISCARD) | F(VIRTIO_BLK_F_WRITE_ZEROES) |	\
	 F(VHOST_F_LOG_ALL))
extern const uint64_t fake_features;
/* What QEMU acks outside a migration: all but dirty logging. */
extern const uint64_t fake_guest_features;

void fake_init(struct fake *f);
/* The struct kdev_ops functions; priv is the struct fake. */
int fake_open(void *priv, const char *path);
void fake_close(void *priv, int fd);
int fake_ioctl(void *priv, int fd, unsigned long req, void *arg);

/* Index of the first call to req at or after from, or -1. */
int find_call(const struct fake *f, unsigned long req, int from);
int count_calls(const struct fake *f, unsigned long req);
/*
 * Index of the first VHOST_BLK_SET_BACKEND at or after from that attaches
 * (attach true) or detaches, or -1.
 */
int find_backend(const struct fake *f, bool attach, int from);

#endif
