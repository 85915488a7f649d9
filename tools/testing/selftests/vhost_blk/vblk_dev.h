/* SPDX-License-Identifier: GPL-2.0 */
/*
 * /dev/vhost-blk from the VMM's side: open, negotiate, register guest
 * memory, set up virtqueues, serial and backend; every failing ioctl is
 * reported on stderr with its name and errno.
 */
#ifndef VBLK_DEV_H
#define VBLK_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/vhost.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/vhost_blk.h>

#include "guest_mem.h"
#include "vq.h"

/*
 * The VMM's choice of vhost worker kind, in the uapi of newer kernels
 * (7.3 has it) than the headers the tests may build against.
 */
#ifndef VHOST_SET_FORK_FROM_OWNER
#define VHOST_FORK_OWNER_KTHREAD	0
#define VHOST_FORK_OWNER_TASK		1
#define VHOST_SET_FORK_FROM_OWNER	_IOW(VHOST_VIRTIO, 0x84, __u8)
#define VHOST_GET_FORK_FROM_OWNER	_IOR(VHOST_VIRTIO, 0x85, __u8)
#endif

#define VBLK_DEV_PATH		"/dev/vhost-blk"
/* The module's max_queues parameter is at most 256 (default 64). */
#define VBLK_MAX_VQS		256

#define VBLK_F(bit)		(1ULL << (bit))
/* Features the device always offers... */
#define VBLK_FEATURES_DEVICE	(VBLK_F(VIRTIO_F_VERSION_1) |		\
				 VBLK_F(VIRTIO_RING_F_INDIRECT_DESC) |	\
				 VBLK_F(VIRTIO_RING_F_EVENT_IDX) |	\
				 VBLK_F(VIRTIO_BLK_F_SIZE_MAX) |	\
				 VBLK_F(VIRTIO_BLK_F_SEG_MAX) |		\
				 VBLK_F(VIRTIO_BLK_F_BLK_SIZE) |	\
				 VBLK_F(VIRTIO_BLK_F_FLUSH) |		\
				 VBLK_F(VIRTIO_BLK_F_CONFIG_WCE) |	\
				 VBLK_F(VIRTIO_BLK_F_TOPOLOGY) |	\
				 VBLK_F(VIRTIO_BLK_F_MQ))
/* ... and those it offers only while a backend that has them is attached. */
#define VBLK_FEATURES_BACKEND	(VBLK_F(VIRTIO_BLK_F_RO) |		\
				 VBLK_F(VIRTIO_BLK_F_DISCARD) |		\
				 VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES) |	\
				 VBLK_F(VIRTIO_BLK_F_SECURE_ERASE))
/* The VMM's own: dirty logging for migration, also always offered. */
#define VBLK_FEATURES_VHOST	VBLK_F(VHOST_F_LOG_ALL)
/*
 * What a test wants by default: everything but logging, which a VMM turns
 * on only with a log set up (VHOST_SET_LOG_BASE), for a migration.
 */
#define VBLK_FEATURES_ALL	(~VBLK_FEATURES_VHOST)

struct vblk_config {
	unsigned int nvqs;		/* 0: 1 */
	unsigned int num;		/* ring size; 0: VQ_DEFAULT_NUM */
	unsigned int max_indirect;	/* 0: VQ_DEFAULT_INDIRECT */
	uint64_t features;		/* wanted; acked = offered & wanted */
	uint16_t base;			/* initial ring index of every vq */
	const char *serial;		/* NULL: leave the default */
	int backend_fd;			/* < 0: no backend */
	/*
	 * VHOST_SET_FORK_FROM_OWNER(VHOST_FORK_OWNER_KTHREAD) before
	 * SET_OWNER: kthread workers; -ENOTTY where the kernel has no such
	 * choice (it answers EPERM or ENOTTY).
	 */
	bool kthread_workers;
};

struct vblk_dev {
	int fd;
	struct guest_mem *gm;
	/*
	 * VHOST_GET_FEATURES at open, and again once the backend is
	 * attached: the backend-dependent bits are offered only then.
	 */
	uint64_t offered;
	uint64_t features;		/* acked */
	uint64_t wanted;		/* vblk_config.features */
	unsigned int nvqs;
	struct vq vq[VBLK_MAX_VQS];
};

/*
 * Fault injection in the device's own ioctls, those made through
 * vblk_ioctl() (all of them, or the ioctl @req alone): with @nth set, the
 * nth fault-injection site that they reach (a slab allocation, with
 * failslab's ignore-gfp-wait off) fails, counted across ioctls and only
 * in them (the kernel's fail-nth of this thread, @fd:
 * /proc/thread-self/fail-nth).  @fired says it did; that ioctl's failure
 * is not reported.  @nth is 0 again after it.
 */
struct vblk_fault {
	int fd;
	unsigned long req;
	unsigned int nth;
	bool fired;
};

extern struct vblk_fault vblk_fault;

/* ioctl() that reports "NAME: strerror" on failure; 0 or -errno. */
int vblk_ioctl(int fd, unsigned long req, void *arg, const char *name);
#define VBLK_IOCTL(fd, req, arg)	vblk_ioctl(fd, req, arg, #req)

/* Building blocks, for tests that need the steps one by one. */
int vblk_open_fd(void);				/* open + SET_OWNER */
/* The same, with kthread workers (VHOST_SET_FORK_FROM_OWNER) if asked. */
int vblk_open_fd_workers(bool kthread_workers);
int vblk_get_features(int fd, uint64_t *features);
int vblk_set_features(int fd, uint64_t features);
int vblk_set_mem_table(int fd, const struct guest_mem *gm);
/* A table of @n regions, each one guest_mem; the caller keeps them. */
int vblk_set_mem_regions(int fd, const struct guest_mem *const *gms,
			 unsigned int n);
/* VHOST_BLK_SET_MEM_PINNED: pin each memory table from the next one on. */
int vblk_set_mem_pinned(int fd, bool on);
int vblk_setup_vq(int fd, const struct vq *vq, uint16_t base);
/*
 * VHOST_SET_VRING_ADDR for @vq; with @log, its used ring is logged for a
 * migration (VHOST_VRING_F_LOG, at the used ring's guest address).
 */
int vblk_set_vring_addr(int fd, const struct vq *vq, bool log);
int vblk_set_serial(int fd, const char *serial);	/* NUL-padded */
int vblk_set_backend(int fd, int backend_fd);
/*
 * VHOST_BLK_GET_CONFIG of the whole struct, converted to host byte order;
 * needs a backend.  Bytes the kernel does not have are left 0.
 */
int vblk_get_config(int fd, struct virtio_blk_config *cfg);
/* VHOST_BLK_SET_CONFIG of @len bytes at @offset; 0 or -errno. */
int vblk_set_config(int fd, uint32_t offset, const void *buf, uint32_t len);
/* VHOST_BLK_GET_VRING_STATS of queue @index, all of this struct. */
int vblk_get_stats(int fd, unsigned int index, uint32_t flags,
		   struct vhost_blk_vring_stats *st);

/*
 * Everything at once; on failure nothing stays open.  Features are
 * negotiated first, and once more after the backend is attached if it
 * offers more (DISCARD, WRITE_ZEROES, SECURE_ERASE, RO): a request that
 * needs one the device was not told of is answered UNSUPP.
 */
int vblk_open(struct vblk_dev *dev, struct guest_mem *gm,
	      const struct vblk_config *cfg);
/*
 * VHOST_BLK_SET_BACKEND of @backend_fd, then the features negotiated
 * again if the backend offers others (vblk_open() does the same).
 */
int vblk_attach(struct vblk_dev *dev, int backend_fd);
/* Close the device fd (whatever is in flight) and free the vqs. */
void vblk_close(struct vblk_dev *dev);

static inline bool vblk_has(const struct vblk_dev *dev, unsigned int bit)
{
	return dev->features & VBLK_F(bit);
}

#endif /* VBLK_DEV_H */
