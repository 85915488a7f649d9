/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bridge: the kernel side.  Everything that reaches
 * /dev/vhost-blk goes through a struct kdev_ops, so that the unit tests can
 * put a fake in its place and look at the ioctls the bridge would issue.
 */
#ifndef VBB_KDEV_H
#define VBB_KDEV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/vhost.h>
#include <linux/virtio_blk.h>
#include <linux/vhost_blk.h>

/* Linux 6.17's worker choice, for headers from before it. */
#ifndef VHOST_SET_FORK_FROM_OWNER
#define VHOST_FORK_OWNER_KTHREAD	0
#define VHOST_FORK_OWNER_TASK		1
#define VHOST_SET_FORK_FROM_OWNER	_IOW(VHOST_VIRTIO, 0x84, __u8)
#endif

/* Most queues the bridge serves (the module's max_queues is at most 64). */
#define KDEV_MAX_QUEUES		64

/*
 * The system calls the bridge makes on /dev/vhost-blk.  Each returns 0 (or
 * the new fd for open) on success and -errno on failure.
 */
struct kdev_ops {
	int (*open)(void *priv, const char *path);
	int (*ioctl)(void *priv, int fd, unsigned long req, void *arg);
	void (*close)(void *priv, int fd);
	void *priv;
};

/* open(2), ioctl(2), close(2). */
extern const struct kdev_ops kdev_sys_ops;

/* The disk behind the device: a regular file or a block device. */
struct disk {
	const char *path;
	int fd;
	bool read_only;
	bool blkdev;
	uint32_t blk_size;		/* logical block size */
};

/*
 * Open and check the backend; unless @shared, take an OFD lock on all of
 * it (write lock, or read lock when @read_only), held until disk_close().
 * 0 or -errno, the reason logged.
 */
int disk_open(struct disk *d, const char *path, bool read_only, bool shared);
/* Size in bytes (BLKGETSIZE64 or st_size); 0 or -errno. */
int disk_size(const struct disk *d, uint64_t *bytes);
void disk_close(struct disk *d);

/*
 * Whose cgroups pay for a guest's work (CPU time of the workers, I/O,
 * memory): the frontend's, through VHOST_BLK_CHARGE_PEER with its
 * connection and kthread workers, or the bridge's own.  With AUTO a
 * kernel that cannot leaves it to the bridge, with a warning; with
 * FRONTEND the connection is refused.
 */
enum kdev_charge {
	KDEV_CHARGE_AUTO,
	KDEV_CHARGE_FRONTEND,
	KDEV_CHARGE_BRIDGE,
};

/* How every /dev/vhost-blk the bridge opens is set up. */
struct kdev_params {
	const char *path;		/* the misc device */
	const struct kdev_ops *ops;
	const struct disk *disk;
	unsigned int num_queues;
	/*
	 * The frontend's ring size (QEMU's queue-size; 0: QEMU's default,
	 * KDEV_DEFAULT_QUEUE_SIZE): seg_max is at most this - 2.
	 */
	unsigned int queue_size;
	unsigned int poll_us;		/* VHOST_SET_VRING_BUSYLOOP_TIMEOUT */
	bool poll_adaptive;		/* VHOST_BLK_SET_VRING_POLL */
	bool poll_completions;		/* ... VHOST_BLK_POLL_COMPLETIONS */
	/* VHOST_NEW_WORKER for each queue after the first (vhost_tasks). */
	bool worker_per_queue;
	/* VHOST_BLK_SET_MEM_PINNED: the guest's memory pinned per table. */
	bool pin_memory;
	const char *serial;		/* NULL: the module's default */
	enum kdev_charge charge;	/* whose cgroups pay for the guest */
};

/* QEMU's vhost-user-blk queue-size default. */
#define KDEV_DEFAULT_QUEUE_SIZE	128

/* seg_max for a ring of @queue_size entries (0: the default). */
unsigned int kdev_seg_max(unsigned int queue_size);

struct kdev {
	const struct kdev_params *p;
	int fd;
	bool attached;			/* VHOST_BLK_SET_BACKEND with the disk */
	bool charged;			/* VHOST_BLK_CHARGE_PEER done */
	uint64_t features;		/* VHOST_GET_FEATURES, backend attached */
	bool have_config;		/* VHOST_BLK_GET_CONFIG answered */
	struct virtio_blk_config config;	/* its answer, little-endian */
};

/*
 * ioctl through the ops; on failure print "ioctl NAME on PATH: strerror"
 * and return -errno.
 */
int kdev_ioctl(struct kdev *k, unsigned long req, void *arg, const char *name);
#define KDEV_IOCTL(k, req, arg)	kdev_ioctl((k), (req), (void *)(arg), #req)

/*
 * Open the device, take ownership (VHOST_SET_OWNER), charge the frontend
 * at the other end of the socket @peer (-1: none, for a probe; see enum
 * kdev_charge), check the queue count, set the serial and the polling
 * mode of every queue, and attach the disk once to learn its features
 * and config space.  Returns with the disk detached.  0 or -errno, with
 * the reason printed.
 */
int kdev_open(struct kdev *k, const struct kdev_params *p, int peer);
/* Close the fd: the module drains every request in flight. */
void kdev_close(struct kdev *k);

/* VHOST_BLK_SET_BACKEND with the disk, or with -1 (drains in flight I/O). */
int kdev_attach(struct kdev *k);
int kdev_detach(struct kdev *k);

/*
 * The virtio feature bits a frontend may see: what the module offers and
 * the bridge can describe in the config space, plus VIRTIO_BLK_F_RO for a
 * read-only disk.
 */
uint64_t kdev_offered_features(const struct kdev *k);

/*
 * The virtio_blk_config (little-endian) to show the frontend: the module's
 * own when it has VHOST_BLK_GET_CONFIG, else built here; capacity is read
 * from the disk again on every call.
 */
void kdev_blk_config(const struct kdev *k, struct virtio_blk_config *cfg);

/* One line per queue of VHOST_BLK_GET_VRING_STATS; 0 or -errno. */
/*
 * The guest's write cache switch (VIRTIO_BLK_F_CONFIG_WCE): @wce 1 for
 * writeback, 0 for writethrough, through VHOST_BLK_SET_CONFIG; the config
 * space the frontend reads follows.  0 or -errno (printed).
 */
int kdev_set_wce(struct kdev *k, uint8_t wce);
int kdev_print_stats(struct kdev *k, FILE *f, const char *why);

#endif
