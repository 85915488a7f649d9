// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the kernel side.  Opens /dev/vhost-blk for one
 * frontend connection, attaches and detaches the disk, builds the feature
 * set and the config space the frontend sees, and reads the module's
 * per-queue counters.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "kdev.h"
#include "log.h"

#define F(bit)		(1ULL << (bit))

/* Feature bits the bridge knows how to present to a frontend. */
#define KDEV_KNOWN_FEATURES (F(VIRTIO_F_VERSION_1) |			\
			     F(VIRTIO_RING_F_INDIRECT_DESC) |		\
			     F(VIRTIO_RING_F_EVENT_IDX) |		\
			     F(VIRTIO_BLK_F_SIZE_MAX) |			\
			     F(VIRTIO_BLK_F_SEG_MAX) |			\
			     F(VIRTIO_BLK_F_BLK_SIZE) |			\
			     F(VIRTIO_BLK_F_FLUSH) |			\
			     F(VIRTIO_BLK_F_CONFIG_WCE) |		\
			     F(VIRTIO_BLK_F_MQ) |			\
			     F(VIRTIO_BLK_F_RO) |			\
			     F(VIRTIO_BLK_F_TOPOLOGY) |			\
			     F(VIRTIO_BLK_F_DISCARD) |			\
			     F(VIRTIO_BLK_F_WRITE_ZEROES) |		\
			     F(VIRTIO_BLK_F_SECURE_ERASE) |		\
			     F(VHOST_F_LOG_ALL))

/*
 * Bits whose config fields (size_max, topology, discard / write-zeroes /
 * secure-erase limits) only the module can fill in, with
 * VHOST_BLK_GET_CONFIG.  Without that ioctl (an older module) they are
 * not offered.
 */
#define KDEV_CONFIG_FEATURES (F(VIRTIO_BLK_F_SIZE_MAX) |		\
			      F(VIRTIO_BLK_F_CONFIG_WCE) |		\
			      F(VIRTIO_BLK_F_TOPOLOGY) |		\
			      F(VIRTIO_BLK_F_DISCARD) |			\
			      F(VIRTIO_BLK_F_WRITE_ZEROES) |		\
			      F(VIRTIO_BLK_F_SECURE_ERASE))

static int sys_open(void *priv, const char *path)
{
	int fd;

	(void)priv;
	fd = open(path, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int sys_ioctl(void *priv, int fd, unsigned long req, void *arg)
{
	(void)priv;
	return ioctl(fd, req, arg) < 0 ? -errno : 0;
}

static void sys_close(void *priv, int fd)
{
	(void)priv;
	close(fd);
}

const struct kdev_ops kdev_sys_ops = {
	.open = sys_open,
	.ioctl = sys_ioctl,
	.close = sys_close,
};

/* ------------------------------------------------------------------ disk */

/*
 * Lock the whole backend (an OFD lock, held as long as the fd is open): a
 * write lock for a read-write disk, a read lock for a read-only one, as
 * QEMU locks its images.  A second bridge, or a QEMU, on the same disk
 * then fails to start rather than have two writers corrupt it.
 */
static int disk_lock(struct disk *d)
{
	struct flock fl = {
		.l_type = d->read_only ? F_RDLCK : F_WRLCK,
		.l_whence = SEEK_SET,
	};
	int ret;

	if (fcntl(d->fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	ret = -errno;
	if (ret == -EAGAIN || ret == -EACCES)
		vbb_err("backend %s is locked by another process (another bridge, or a QEMU using it): pass --shared only if both are meant to use it, as in a live migration",
			d->path);
	else
		vbb_err("cannot lock backend %s: %s", d->path, strerror(-ret));
	return ret;
}

int disk_open(struct disk *d, const char *path, bool read_only, bool shared)
{
	struct stat st;
	uint64_t size;
	int fd, ro, ssz, ret;

	memset(d, 0, sizeof(*d));
	d->path = path;
	d->read_only = read_only;
	d->fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (d->fd < 0) {
		ret = -errno;
		vbb_err("cannot open backend %s %s: %s", path,
			read_only ? "read-only" : "read-write", strerror(-ret));
		return ret;
	}
	if (fstat(d->fd, &st) < 0) {
		ret = -errno;
		vbb_err("fstat %s: %s", path, strerror(-ret));
		goto err;
	}
	if (S_ISBLK(st.st_mode)) {
		d->blkdev = true;
		if (ioctl(d->fd, BLKSSZGET, &ssz) < 0) {
			ret = -errno;
			vbb_err("ioctl BLKSSZGET on %s: %s", path,
				strerror(-ret));
			goto err;
		}
		d->blk_size = ssz;
		if (!read_only && ioctl(d->fd, BLKROGET, &ro) == 0 && ro) {
			vbb_err("block device %s is read-only: use --read-only",
				path);
			ret = -EROFS;
			goto err;
		}
	} else if (S_ISREG(st.st_mode)) {
		d->blk_size = 512;
		/* The module does direct I/O on files; say so now, not later. */
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fd < 0) {
			ret = -errno;
			vbb_err("%s: %s with O_DIRECT: the file system must support direct I/O for vhost-blk",
				path, strerror(-ret));
			goto err;
		}
		close(fd);
	} else {
		vbb_err("backend %s is neither a regular file nor a block device",
			path);
		ret = -ENOTBLK;
		goto err;
	}
	if (d->blk_size < 512 || (d->blk_size & (d->blk_size - 1))) {
		vbb_err("backend %s: unusable logical block size %u", path,
			d->blk_size);
		ret = -EINVAL;
		goto err;
	}
	ret = disk_size(d, &size);
	if (ret)
		goto err;
	if (size < d->blk_size) {
		vbb_err("backend %s is smaller than one block (%" PRIu64
			" bytes)", path, size);
		ret = -EINVAL;
		goto err;
	}
	if (size % 512)
		vbb_warn("backend %s: size %" PRIu64
			 " is not a multiple of 512; the last %" PRIu64
			 " bytes are not visible", path, size, size % 512);
	if (!shared) {
		ret = disk_lock(d);
		if (ret)
			goto err;
	}
	return 0;
err:
	close(d->fd);
	d->fd = -1;
	return ret;
}

int disk_size(const struct disk *d, uint64_t *bytes)
{
	struct stat st;
	int ret;

	if (d->blkdev) {
		if (ioctl(d->fd, BLKGETSIZE64, bytes) < 0) {
			ret = -errno;
			vbb_err("ioctl BLKGETSIZE64 on %s: %s", d->path,
				strerror(-ret));
			return ret;
		}
		return 0;
	}
	if (fstat(d->fd, &st) < 0) {
		ret = -errno;
		vbb_err("fstat %s: %s", d->path, strerror(-ret));
		return ret;
	}
	*bytes = st.st_size;
	return 0;
}

void disk_close(struct disk *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

/* ------------------------------------------------------- /dev/vhost-blk */

int kdev_ioctl(struct kdev *k, unsigned long req, void *arg, const char *name)
{
	int ret = k->p->ops->ioctl(k->p->ops->priv, k->fd, req, arg);

	if (ret)
		vbb_err("ioctl %s on %s: %s (errno %d)", name, k->p->path,
			strerror(-ret), -ret);
	return ret;
}

int kdev_attach(struct kdev *k)
{
	struct vhost_vring_file be = { .index = 0, .fd = k->p->disk->fd };
	int ret;

	ret = KDEV_IOCTL(k, VHOST_BLK_SET_BACKEND, &be);
	if (ret)
		return ret;
	k->attached = true;
	vbb_dbg("backend %s attached", k->p->disk->path);
	return 0;
}

int kdev_detach(struct kdev *k)
{
	struct vhost_vring_file be = { .index = 0, .fd = -1 };
	int ret;

	ret = KDEV_IOCTL(k, VHOST_BLK_SET_BACKEND, &be);
	if (ret)
		return ret;
	k->attached = false;
	vbb_dbg("backend detached");
	return 0;
}

/* Attach the disk with no ring set up, to read features and config. */
static int kdev_probe(struct kdev *k)
{
	union {
		struct vhost_blk_config hdr;
		__u8 raw[sizeof(struct vhost_blk_config) +
			 sizeof(struct virtio_blk_config)];
	} cfg;
	int ret;

	ret = kdev_attach(k);
	if (ret) {
		vbb_err("cannot attach backend %s to %s", k->p->disk->path,
			k->p->path);
		return ret;
	}
	ret = KDEV_IOCTL(k, VHOST_GET_FEATURES, &k->features);
	if (ret)
		goto out;
	/* Bytes past what the module fills in stay 0. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.hdr.len = sizeof(k->config);
	ret = k->p->ops->ioctl(k->p->ops->priv, k->fd, VHOST_BLK_GET_CONFIG,
			       &cfg);
	if (ret == -ENOTTY || ret == -EINVAL) {
		vbb_dbg("%s has no VHOST_BLK_GET_CONFIG: the bridge fills in the config space",
			k->p->path);
		ret = 0;
	} else if (ret) {
		vbb_err("ioctl VHOST_BLK_GET_CONFIG on %s: %s (errno %d)",
			k->p->path, strerror(-ret), -ret);
		goto out;
	} else {
		memcpy(&k->config, cfg.hdr.buf, sizeof(k->config));
		k->have_config = true;
	}
out:
	if (kdev_detach(k) && !ret)
		ret = -EIO;
	return ret;
}

/*
 * Why the guest's work stays charged to the bridge: fatal with
 * --charge frontend, a warning otherwise.  0 or -errno.
 */
static int kdev_charge_failed(struct kdev *k, const char *what, int err)
{
	if (k->p->charge == KDEV_CHARGE_FRONTEND) {
		vbb_err("%s on %s: %s (errno %d): cannot charge the guest to the frontend's cgroups (--charge frontend)",
			what, k->p->path, strerror(-err), -err);
		return err;
	}
	vbb_warn("%s on %s: %s (errno %d): the guest's I/O, memory and CPU time are charged to the bridge's cgroups, not the frontend's",
		 what, k->p->path, strerror(-err), -err);
	return 0;
}

/*
 * Before VHOST_SET_OWNER: the kind of worker, VHOST_FORK_OWNER_KTHREAD or
 * _TASK.  0 or -errno; -ENOTTY from a kernel without the choice, which
 * takes it for an unknown ioctl of a device with no owner yet (EPERM).
 */
static int kdev_fork_owner(struct kdev *k, __u8 mode)
{
	int ret;

	ret = k->p->ops->ioctl(k->p->ops->priv, k->fd,
			       VHOST_SET_FORK_FROM_OWNER, &mode);
	return ret == -EPERM ? -ENOTTY : ret;
}

/*
 * Kthread workers, which VHOST_BLK_CHARGE_PEER can move into the
 * frontend's cgroups (a vhost_task worker is a thread of the bridge).
 * Returns 1 if asked for, 0 if not, or -errno.
 */
static int kdev_kthread_workers(struct kdev *k)
{
	int ret = kdev_fork_owner(k, VHOST_FORK_OWNER_KTHREAD);

	if (!ret)
		return 1;
	return kdev_charge_failed(k, "ioctl VHOST_SET_FORK_FROM_OWNER", ret);
}

/*
 * Before VHOST_SET_OWNER, for a worker per queue: vhost_task workers,
 * whatever the vhost module's fork_from_owner_default says (its kthread
 * workers cannot be more than one).  A kernel without the choice has
 * only vhost_tasks, or only kthreads and no VHOST_NEW_WORKER either,
 * which says so later.  0 or -errno.
 */
static int kdev_task_workers(struct kdev *k)
{
	int ret = kdev_fork_owner(k, VHOST_FORK_OWNER_TASK);

	if (ret == -ENOTTY)
		return 0;
	if (ret)
		vbb_err("ioctl VHOST_SET_FORK_FROM_OWNER on %s: %s (errno %d)",
			k->p->path, strerror(-ret), -ret);
	return ret;
}

/* After VHOST_SET_OWNER, before the first backend.  0 or -errno. */
static int kdev_charge_peer(struct kdev *k, int peer)
{
	__s32 fd = peer;
	int ret;

	ret = k->p->ops->ioctl(k->p->ops->priv, k->fd, VHOST_BLK_CHARGE_PEER,
			       &fd);
	if (ret)
		return kdev_charge_failed(k, "ioctl VHOST_BLK_CHARGE_PEER", ret);
	k->charged = true;
	vbb_info("the guest's I/O, memory and CPU time are charged to the frontend's cgroups");
	return 0;
}

/*
 * After VHOST_SET_OWNER, which made the worker of every queue: a worker of
 * its own for each queue but the first.  0 or -errno.
 */
static int kdev_worker_per_queue(struct kdev *k)
{
	struct vhost_worker_state worker;
	struct vhost_vring_worker vw;
	unsigned int i;
	int ret;

	for (i = 1; i < k->p->num_queues; i++) {
		memset(&worker, 0, sizeof(worker));
		ret = KDEV_IOCTL(k, VHOST_NEW_WORKER, &worker);
		if (ret)
			return ret;
		vw.index = i;
		vw.worker_id = worker.worker_id;
		ret = KDEV_IOCTL(k, VHOST_ATTACH_VRING_WORKER, &vw);
		if (ret)
			return ret;
	}
	return 0;
}

int kdev_open(struct kdev *k, const struct kdev_params *p, int peer)
{
	bool charge = peer >= 0 && p->charge != KDEV_CHARGE_BRIDGE;
	struct vhost_blk_vring_stats st;
	char serial[VHOST_BLK_SERIAL_LEN];
	__u32 nvqs = p->num_queues;
	unsigned int i;
	int ret;

	memset(k, 0, sizeof(*k));
	k->p = p;
	k->fd = p->ops->open(p->ops->priv, p->path);
	if (k->fd < 0) {
		ret = k->fd;
		vbb_err("cannot open %s: %s%s", p->path, strerror(-ret),
			ret == -ENOENT ? " (is vhost_blk.ko loaded?)" : "");
		k->fd = -1;
		return ret;
	}

	/*
	 * Size the device first: the kernel allocates every queue's state at
	 * VHOST_SET_OWNER.  EINVAL: more queues than the module's max_queues.
	 */
	ret = p->ops->ioctl(p->ops->priv, k->fd, VHOST_BLK_SET_NUM_QUEUES,
			    &nvqs);
	if (ret) {
		if (ret == -EINVAL)
			vbb_err("%s serves fewer than %u queues (module parameter max_queues): lower --num-queues",
				p->path, p->num_queues);
		else
			vbb_err("ioctl VHOST_BLK_SET_NUM_QUEUES on %s: %s (errno %d)",
				p->path, strerror(-ret), -ret);
		goto err;
	}

	if (charge) {
		ret = kdev_kthread_workers(k);
		if (ret < 0)
			goto err;
		charge = ret;
	} else if (p->worker_per_queue) {
		ret = kdev_task_workers(k);
		if (ret)
			goto err;
	}
	ret = KDEV_IOCTL(k, VHOST_SET_OWNER, NULL);
	if (ret)
		goto err;
	if (charge) {
		ret = kdev_charge_peer(k, peer);
		if (ret)
			goto err;
	}

	if (p->worker_per_queue) {
		ret = kdev_worker_per_queue(k);
		if (ret)
			goto err;
	}

	/* The module serves max_queues queues per device: is ours there? */
	memset(&st, 0, sizeof(st));
	st.argsz = sizeof(st);
	st.index = p->num_queues - 1;
	ret = p->ops->ioctl(p->ops->priv, k->fd, VHOST_BLK_GET_VRING_STATS,
			    &st);
	if (ret == -EINVAL) {
		vbb_err("%s serves fewer than %u queues (module parameter max_queues): lower --num-queues",
			p->path, p->num_queues);
		goto err;
	} else if (ret) {
		vbb_err("ioctl VHOST_BLK_GET_VRING_STATS on %s: %s (errno %d)",
			p->path, strerror(-ret), -ret);
		goto err;
	}

	if (p->pin_memory) {
		uint32_t on = 1;

		ret = KDEV_IOCTL(k, VHOST_BLK_SET_MEM_PINNED, &on);
		if (ret)
			goto err;
	}

	if (p->serial) {
		/* NUL-padded, not necessarily NUL-terminated. */
		memset(serial, 0, sizeof(serial));
		memcpy(serial, p->serial, strnlen(p->serial, sizeof(serial)));
		ret = KDEV_IOCTL(k, VHOST_BLK_SET_SERIAL, serial);
		if (ret)
			goto err;
	}

	for (i = 0; i < p->num_queues; i++) {
		struct vhost_vring_state busy = { .index = i, .num = p->poll_us };
		struct vhost_blk_vring_poll poll = {
			.index = i,
			.flags = (p->poll_adaptive ? VHOST_BLK_POLL_ADAPTIVE : 0) |
				 (p->poll_completions ?
				  VHOST_BLK_POLL_COMPLETIONS : 0),
		};

		if (p->poll_us) {
			ret = KDEV_IOCTL(k, VHOST_SET_VRING_BUSYLOOP_TIMEOUT,
					 &busy);
			if (ret)
				goto err;
		}
		if (poll.flags) {
			ret = KDEV_IOCTL(k, VHOST_BLK_SET_VRING_POLL, &poll);
			if (ret)
				goto err;
		}
	}

	ret = kdev_probe(k);
	if (ret)
		goto err;
	return 0;
err:
	kdev_close(k);
	return ret;
}

void kdev_close(struct kdev *k)
{
	if (k->fd >= 0)
		k->p->ops->close(k->p->ops->priv, k->fd);
	k->fd = -1;
	k->attached = false;
}

uint64_t kdev_offered_features(const struct kdev *k)
{
	uint64_t f = k->features & KDEV_KNOWN_FEATURES;

	if (!k->have_config)
		f &= ~KDEV_CONFIG_FEATURES;
	if (k->p->disk->read_only)
		f |= F(VIRTIO_BLK_F_RO);
	return f;
}

/*
 * As QEMU's own virtio-blk sizes it (seg-max-adjust): two descriptors of a
 * request are its header and status, so a guest without indirect
 * descriptors never builds a chain longer than its ring.  And never more
 * than the module takes.
 */
unsigned int kdev_seg_max(unsigned int queue_size)
{
	unsigned int qs = queue_size ? queue_size : KDEV_DEFAULT_QUEUE_SIZE;

	return qs - 2 < VHOST_BLK_SEG_MAX ? qs - 2 : VHOST_BLK_SEG_MAX;
}

void kdev_blk_config(const struct kdev *k, struct virtio_blk_config *cfg)
{
	uint64_t bytes;

	if (k->have_config) {
		*cfg = k->config;
	} else {
		/*
		 * An older module: what userspace knows.  Topology and the
		 * discard / write-zeroes / secure-erase limits need the
		 * module (see KDEV_CONFIG_FEATURES); those bits are not
		 * offered then.
		 */
		memset(cfg, 0, sizeof(*cfg));
		cfg->blk_size = htole32(k->p->disk->blk_size);
	}
	cfg->seg_max = htole32(kdev_seg_max(k->p->queue_size));
	cfg->num_queues = htole16(k->p->num_queues);
	/* The disk may have grown since the module was asked. */
	if (disk_size(k->p->disk, &bytes) == 0)
		cfg->capacity = htole64(bytes / 512);
}

int kdev_set_wce(struct kdev *k, uint8_t wce)
{
	union {
		struct vhost_blk_config hdr;
		uint8_t raw[sizeof(struct vhost_blk_config) + 1];
	} arg;
	int ret;

	if (k->fd < 0)
		return -EBADF;
	memset(&arg, 0, sizeof(arg));
	arg.hdr.offset = offsetof(struct virtio_blk_config, wce);
	arg.hdr.len = 1;
	arg.hdr.buf[0] = wce;
	ret = KDEV_IOCTL(k, VHOST_BLK_SET_CONFIG, &arg);
	if (!ret)
		k->config.wce = wce;
	return ret;
}

int kdev_print_stats(struct kdev *k, FILE *f, const char *why)
{
	struct vhost_blk_vring_stats st;
	unsigned int i;
	int ret;

	if (k->fd < 0)
		return -EBADF;
	for (i = 0; i < k->p->num_queues; i++) {
		memset(&st, 0, sizeof(st));
		st.argsz = sizeof(st);
		st.index = i;
		ret = KDEV_IOCTL(k, VHOST_BLK_GET_VRING_STATS, &st);
		if (ret)
			return ret;
		fprintf(f, "vhost-blk-bridge: stats %s queue=%u"
			" in=%llu out=%llu flush=%llu get_id=%llu"
			" discard=%llu write_zeroes=%llu secure_erase=%llu"
			" unsupp=%llu ioerr=%llu"
			" bytes_read=%llu bytes_written=%llu"
			" kicks=%llu notifies=%llu notifies_suppressed=%llu"
			" used_batches=%llu polls=%llu poll_hits=%llu"
			" poll_ns=%llu inflight=%llu inflight_max=%llu"
			" poll_window_ns=%llu bounced=%llu bounce_waits=%llu"
			" bounce_bytes_max=%llu used_errors=%llu"
			" polled_bios=%llu poll_reaped=%llu"
			" poll_fallbacks=%llu pinned=%llu\n",
			why, i,
			(unsigned long long)st.reqs_in,
			(unsigned long long)st.reqs_out,
			(unsigned long long)st.reqs_flush,
			(unsigned long long)st.reqs_get_id,
			(unsigned long long)st.reqs_discard,
			(unsigned long long)st.reqs_write_zeroes,
			(unsigned long long)st.reqs_secure_erase,
			(unsigned long long)st.reqs_unsupp,
			(unsigned long long)st.reqs_ioerr,
			(unsigned long long)st.bytes_read,
			(unsigned long long)st.bytes_written,
			(unsigned long long)st.kicks,
			(unsigned long long)st.notifies,
			(unsigned long long)st.notifies_suppressed,
			(unsigned long long)st.used_batches,
			(unsigned long long)st.polls,
			(unsigned long long)st.poll_hits,
			(unsigned long long)st.poll_ns,
			(unsigned long long)st.inflight,
			(unsigned long long)st.inflight_max,
			(unsigned long long)st.poll_window_ns,
			(unsigned long long)st.reqs_bounced,
			(unsigned long long)st.bounce_waits,
			(unsigned long long)st.bounce_bytes_max,
			(unsigned long long)st.used_errors,
			(unsigned long long)st.polled_bios,
			(unsigned long long)st.poll_reaped,
			(unsigned long long)st.poll_fallbacks,
			(unsigned long long)st.reqs_pinned);
	}
	fflush(f);
	return 0;
}
