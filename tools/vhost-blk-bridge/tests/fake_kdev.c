// SPDX-License-Identifier: GPL-2.0
/*
 * The fake /dev/vhost-blk of the bridge's unit tests: see fake_kdev.h.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "fake_kdev.h"

const uint64_t fake_features = FAKE_FEATURES;
const uint64_t fake_guest_features = FAKE_FEATURES & ~F(VHOST_F_LOG_ALL);

void fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	f->features = fake_features;
	f->has_config = true;
	f->wce = 1;
	f->nvqs = 16;
	f->has_fork_owner = true;
	f->has_charge_peer = true;
}

int fake_open(void *priv, const char *path)
{
	struct fake *f = priv;

	(void)path;
	if (f->open_errno)
		return -f->open_errno;
	f->opens++;
	f->open = true;
	f->owner = false;
	f->attached = false;
	f->kthreads = false;
	f->charged = false;
	f->attached_once = false;
	f->workers = 0;
	memset(f->desc, 0, sizeof(f->desc));
	memset(f->running, 0, sizeof(f->running));
	return FAKE_FD;
}

void fake_close(void *priv, int fd)
{
	struct fake *f = priv;

	(void)fd;
	f->closes++;
	f->open = false;
	f->attached = false;
}

static bool fd_is_open(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) != -1;
}

static bool fake_vring_req(unsigned long req)
{
	return req == VHOST_SET_VRING_NUM || req == VHOST_SET_VRING_BASE ||
	       req == VHOST_GET_VRING_BASE || req == VHOST_SET_VRING_ADDR ||
	       req == VHOST_SET_VRING_KICK || req == VHOST_SET_VRING_CALL ||
	       req == VHOST_SET_VRING_ERR ||
	       req == VHOST_SET_VRING_BUSYLOOP_TIMEOUT;
}

static int fake_do(struct fake *f, struct fake_call *c, unsigned long req,
		   void *arg)
{
	unsigned int i, idx = 0;

	if (!f->open)
		return -EBADF;
	if (f->fail_req == req)
		return -f->fail_errno;
	if (req == VHOST_BLK_SET_NUM_QUEUES) {
		/* Only before the owner, as the module does. */
		if (f->owner)
			return -EBUSY;
		return *(__u32 *)arg && *(__u32 *)arg <= f->nvqs ? 0 : -EINVAL;
	}
	if (req == VHOST_SET_FORK_FROM_OWNER) {
		/* Only before the owner, as the vhost core does. */
		if (!f->has_fork_owner)
			return -EPERM;
		if (f->owner)
			return -EBUSY;
		f->kthreads = c->a.u64 == VHOST_FORK_OWNER_KTHREAD;
		return 0;
	}
	if (req != VHOST_SET_OWNER && req != VHOST_GET_FEATURES && !f->owner)
		return -EPERM;
	if (fake_vring_req(req)) {
		idx = c->a.state.index;		/* index is first everywhere */
		if (idx >= f->nvqs)
			return -ENOBUFS;
	}

	switch (req) {
	case VHOST_SET_OWNER:
		if (f->owner)
			return -EBUSY;
		f->owner = true;
		return 0;
	case VHOST_GET_FEATURES:
		*(uint64_t *)arg = f->features |
			(f->attached && f->ro_backend ? F(VIRTIO_BLK_F_RO) : 0);
		return 0;
	case VHOST_SET_FEATURES:
		if (c->a.u64 & ~(f->features | F(VIRTIO_BLK_F_RO)))
			return -EOPNOTSUPP;
		return 0;
	case VHOST_BLK_SET_BACKEND:
		memset(f->running, 0, sizeof(f->running));
		if (c->a.file.fd == -1) {
			f->attached = false;
			return 0;
		}
		if (!c->fd_valid)
			return -EBADF;
		f->attached = true;
		f->attached_once = true;
		f->ro_backend = (fcntl(c->a.file.fd, F_GETFL) & O_ACCMODE) ==
				O_RDONLY;
		for (i = 0; i < f->nvqs; i++)
			f->running[i] = f->desc[i] != 0;
		return 0;
	case VHOST_BLK_SET_SERIAL:
		return 0;
	case VHOST_BLK_CHARGE_PEER:
		/* As the module: kthread workers, once, before a backend. */
		if (!f->has_charge_peer)
			return -ENOTTY;
		if (!f->kthreads)
			return -EINVAL;
		if (f->charged || f->attached_once)
			return -EBUSY;
		if (!c->fd_valid)
			return -EBADF;
		if (!c->fd_socket)
			return -ENOTSOCK;
		f->charged = true;
		return 0;
	case VHOST_BLK_GET_CONFIG: {
		struct vhost_blk_config *hdr = arg;
		struct virtio_blk_config *cfg = (void *)hdr->buf;

		if (!f->has_config)
			return -ENOTTY;
		if (!f->attached)
			return -ENXIO;
		if (hdr->offset || hdr->len != sizeof(*cfg))
			return -EINVAL;
		memset(cfg, 0, sizeof(*cfg));
		cfg->capacity = htole64(12345);	/* bridge re-reads it */
		cfg->blk_size = htole32(512);
		cfg->seg_max = htole32(VHOST_BLK_SEG_MAX);
		cfg->num_queues = htole16(f->nvqs);
		cfg->max_discard_sectors =
			htole32(VHOST_BLK_MAX_DISCARD_SECTORS);
		cfg->max_discard_seg = htole32(VHOST_BLK_MAX_DISCARD_SEG);
		cfg->wce = f->wce;
		return 0;
	}
	case VHOST_BLK_SET_CONFIG: {
		struct vhost_blk_config *hdr = arg;

		if (!f->has_config)
			return -ENOTTY;
		/* As the module: the writeback byte alone, 0 or 1. */
		if (hdr->offset != offsetof(struct virtio_blk_config, wce) ||
		    hdr->len != 1 || hdr->buf[0] > 1)
			return -EINVAL;
		f->wce = hdr->buf[0];
		return 0;
	}
	case VHOST_BLK_GET_VRING_STATS: {
		struct vhost_blk_vring_stats *st = arg;
		unsigned int q = st->index;

		if (q >= f->nvqs || st->argsz != sizeof(*st))
			return -EINVAL;
		memset(st, 0, sizeof(*st));
		st->argsz = sizeof(*st);
		st->index = q;
		st->reqs_in = 10 + q;
		st->reqs_out = 20 + q;
		return 0;
	}
	case VHOST_BLK_SET_VRING_POLL:
		return 0;
	case VHOST_NEW_WORKER:
		/* The vhost core's rule: kthread owners have one worker. */
		if (f->kthreads)
			return -EFAULT;
		((struct vhost_worker_state *)arg)->worker_id = ++f->workers;
		return 0;
	case VHOST_ATTACH_VRING_WORKER: {
		const struct vhost_vring_worker *w = arg;

		return w->index < f->nvqs && w->worker_id <= f->workers ?
		       0 : -EINVAL;
	}
	case VHOST_BLK_SET_MEM_PINNED:
		return *(__u32 *)arg <= 1 ? 0 : -EINVAL;
	case VHOST_SET_MEM_TABLE:
		/* vhost's max_mem_regions, by default. */
		if (((const struct vhost_memory *)arg)->nregions >
		    FAKE_MAX_MEM_REGIONS)
			return -E2BIG;
		return 0;
	case VHOST_SET_VRING_NUM:
	case VHOST_SET_VRING_BASE:
		/* Like the vhost core: not on a running ring. */
		if (f->running[idx])
			return -EBUSY;
		if (req == VHOST_SET_VRING_BASE)
			f->last_avail[idx] = c->a.state.num;
		return 0;
	case VHOST_GET_VRING_BASE:
		((struct vhost_vring_state *)arg)->num = f->last_avail[idx];
		return 0;
	case VHOST_SET_VRING_ADDR:
		f->desc[idx] = c->a.addr.desc_user_addr;
		return 0;
	case VHOST_SET_VRING_KICK:
	case VHOST_SET_VRING_CALL:
	case VHOST_SET_VRING_ERR:
		if (c->a.file.fd != -1 && !c->fd_valid)
			return -EBADF;
		return 0;
	case VHOST_SET_VRING_BUSYLOOP_TIMEOUT:
		return 0;
	case VHOST_SET_LOG_BASE:
		return 0;
	default:
		return -ENOTTY;
	}
}

int fake_ioctl(void *priv, int fd, unsigned long req, void *arg)
{
	struct fake *f = priv;
	struct fake_call *c;
	struct stat st;

	if (fd != FAKE_FD)
		return -EBADF;
	if (f->ncalls == FAKE_MAX_CALLS)
		return -ENOSPC;
	c = &f->calls[f->ncalls++];
	memset(c, 0, sizeof(*c));
	c->req = req;
	if (req == VHOST_SET_MEM_TABLE) {
		const struct vhost_memory *m = arg;

		c->nregions = m->nregions;
		if (m->nregions <= FAKE_MAX_REGIONS)
			memcpy(c->regions, m->regions,
			       m->nregions * sizeof(m->regions[0]));
	} else if (req == VHOST_BLK_SET_SERIAL) {
		memcpy(c->a.serial, arg, sizeof(c->a.serial));
	} else if (req == VHOST_SET_VRING_ADDR) {
		c->a.addr = *(struct vhost_vring_addr *)arg;
	} else if (req == VHOST_SET_VRING_KICK || req == VHOST_SET_VRING_CALL ||
		   req == VHOST_SET_VRING_ERR || req == VHOST_BLK_SET_BACKEND) {
		c->a.file = *(struct vhost_vring_file *)arg;
		c->fd_valid = fd_is_open(c->a.file.fd);
	} else if (req == VHOST_SET_FEATURES) {
		c->a.u64 = *(uint64_t *)arg;
	} else if (req == VHOST_BLK_SET_NUM_QUEUES ||
		   req == VHOST_BLK_SET_MEM_PINNED) {
		c->a.state.num = *(__u32 *)arg;
	} else if (req == VHOST_SET_FORK_FROM_OWNER) {
		c->a.u64 = *(__u8 *)arg;
	} else if (req == VHOST_BLK_CHARGE_PEER) {
		c->a.file.fd = *(__s32 *)arg;
		c->fd_valid = fd_is_open(c->a.file.fd);
		c->fd_socket = c->fd_valid && fstat(c->a.file.fd, &st) == 0 &&
			       S_ISSOCK(st.st_mode);
	} else if (req != VHOST_SET_OWNER && req != VHOST_GET_FEATURES &&
		   req != VHOST_BLK_GET_CONFIG && req != VHOST_NEW_WORKER) {
		/* vhost_vring_state, or a struct starting with an index. */
		memcpy(&c->a.state, arg, sizeof(c->a.state));
	}
	c->ret = fake_do(f, c, req, arg);
	if (req == VHOST_NEW_WORKER && !c->ret)
		c->a.state.num = ((struct vhost_worker_state *)arg)->worker_id;
	return c->ret;
}

/* Index of the first call to req at or after from, or -1. */
int find_call(const struct fake *f, unsigned long req, int from)
{
	unsigned int i;

	for (i = from < 0 ? 0 : from; i < f->ncalls; i++)
		if (f->calls[i].req == req)
			return i;
	return -1;
}

int count_calls(const struct fake *f, unsigned long req)
{
	unsigned int i;
	int n = 0;

	for (i = 0; i < f->ncalls; i++)
		n += f->calls[i].req == req;
	return n;
}

/* Index of the first VHOST_BLK_SET_BACKEND at or after from that attaches
 * (attach true) or detaches. */
int find_backend(const struct fake *f, bool attach, int from)
{
	int i = from;

	while ((i = find_call(f, VHOST_BLK_SET_BACKEND, i)) >= 0) {
		if ((f->calls[i].a.file.fd != -1) == attach)
			return i;
		i++;
	}
	return -1;
}

