// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/vhost-blk control plane.  See vblk_dev.h.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "vblk_dev.h"

struct vblk_fault vblk_fault = { .fd = -1 };

/* Arm fail-nth for the ioctl @req; true if it is armed. */
static bool vblk_fault_arm(unsigned long req)
{
	char num[16];
	int len;

	if (vblk_fault.fd < 0 || !vblk_fault.nth ||
	    (vblk_fault.req && vblk_fault.req != req))
		return false;
	len = snprintf(num, sizeof(num), "%u", vblk_fault.nth);
	return pwrite(vblk_fault.fd, num, len, 0) == len;
}

/* What is left of the count after the ioctl; disarm. */
static void vblk_fault_disarm(void)
{
	char num[16] = "";
	ssize_t n;

	n = pread(vblk_fault.fd, num, sizeof(num) - 1, 0);
	if (pwrite(vblk_fault.fd, "0", 1, 0) != 1 || n <= 0)
		return;
	num[n] = 0;
	vblk_fault.nth = strtoul(num, NULL, 10);
	if (!vblk_fault.nth)
		vblk_fault.fired = true;
}

int vblk_ioctl(int fd, unsigned long req, void *arg, const char *name)
{
	bool armed = vblk_fault_arm(req);
	int ret = ioctl(fd, req, arg);
	int err = errno;

	if (armed)
		vblk_fault_disarm();
	if (ret < 0) {
		if (!armed || !vblk_fault.fired)
			guest_log("vhost-blk: ioctl %s: %s (errno %d)", name,
				  strerror(err), err);
		return -err;
	}
	return 0;
}

int vblk_open_fd(void)
{
	return vblk_open_fd_workers(false);
}

int vblk_open_fd_workers(bool kthread_workers)
{
	uint8_t fork_owner = VHOST_FORK_OWNER_KTHREAD;
	int fd, err;

	fd = open(VBLK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		guest_log("vhost-blk: open %s: %s", VBLK_DEV_PATH,
			  strerror(err));
		return -err;
	}
	if (kthread_workers &&
	    ioctl(fd, VHOST_SET_FORK_FROM_OWNER, &fork_owner)) {
		err = errno;
		/*
		 * A kernel without the choice takes it for an unknown ioctl
		 * of a device that has no owner yet: EPERM, or ENOTTY.
		 */
		if (err == EPERM)
			err = ENOTTY;
		if (err != ENOTTY)
			guest_log("vhost-blk: VHOST_SET_FORK_FROM_OWNER: %s",
				  strerror(err));
		close(fd);
		return -err;
	}
	err = VBLK_IOCTL(fd, VHOST_SET_OWNER, NULL);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int vblk_get_features(int fd, uint64_t *features)
{
	return VBLK_IOCTL(fd, VHOST_GET_FEATURES, features);
}

int vblk_set_features(int fd, uint64_t features)
{
	return VBLK_IOCTL(fd, VHOST_SET_FEATURES, &features);
}

int vblk_set_mem_regions(int fd, const struct guest_mem *const *gms,
			 unsigned int n)
{
	struct vhost_memory *mem;
	unsigned int i;
	int err;

	mem = calloc(1, sizeof(*mem) + n * sizeof(mem->regions[0]));
	if (!mem)
		return -ENOMEM;
	mem->nregions = n;
	for (i = 0; i < n; i++) {
		mem->regions[i].guest_phys_addr = gms[i]->gpa;
		mem->regions[i].memory_size = gms[i]->size;
		mem->regions[i].userspace_addr = (uint64_t)(uintptr_t)gms[i]->va;
	}
	err = VBLK_IOCTL(fd, VHOST_SET_MEM_TABLE, mem);
	free(mem);
	return err;
}

int vblk_set_mem_table(int fd, const struct guest_mem *gm)
{
	return vblk_set_mem_regions(fd, &gm, 1);
}

int vblk_set_mem_pinned(int fd, bool on)
{
	uint32_t val = on;

	return VBLK_IOCTL(fd, VHOST_BLK_SET_MEM_PINNED, &val);
}

int vblk_set_vring_addr(int fd, const struct vq *vq, bool log)
{
	struct vhost_vring_addr addr = {
		.index = vq->index,
		.flags = log ? 1u << VHOST_VRING_F_LOG : 0,
		.desc_user_addr = vq_uaddr(vq->desc),
		.avail_user_addr = vq_uaddr(vq->avail),
		.used_user_addr = vq_uaddr(vq->used),
		.log_guest_addr = gpa_of(vq->gm, vq->used),
	};

	return VBLK_IOCTL(fd, VHOST_SET_VRING_ADDR, &addr);
}

int vblk_setup_vq(int fd, const struct vq *vq, uint16_t base)
{
	struct vhost_vring_state num = { .index = vq->index, .num = vq->num };
	struct vhost_vring_state state = { .index = vq->index, .num = base };
	struct vhost_vring_file kick = { .index = vq->index, .fd = vq->kick_fd };
	struct vhost_vring_file call = { .index = vq->index, .fd = vq->call_fd };
	int err;

	err = VBLK_IOCTL(fd, VHOST_SET_VRING_NUM, &num);
	if (!err)
		err = VBLK_IOCTL(fd, VHOST_SET_VRING_BASE, &state);
	if (!err)
		err = vblk_set_vring_addr(fd, vq, false);
	if (!err)
		err = VBLK_IOCTL(fd, VHOST_SET_VRING_KICK, &kick);
	if (!err)
		err = VBLK_IOCTL(fd, VHOST_SET_VRING_CALL, &call);
	if (err)
		guest_log("vhost-blk: setting up vq %u failed", vq->index);
	return err;
}

int vblk_set_serial(int fd, const char *serial)
{
	char buf[VHOST_BLK_SERIAL_LEN] = { 0 };
	size_t len = strnlen(serial, sizeof(buf));

	memcpy(buf, serial, len);
	return VBLK_IOCTL(fd, VHOST_BLK_SET_SERIAL, buf);
}

int vblk_set_backend(int fd, int backend_fd)
{
	struct vhost_vring_file file = { .index = 0, .fd = backend_fd };

	return VBLK_IOCTL(fd, VHOST_BLK_SET_BACKEND, &file);
}

int vblk_set_config(int fd, uint32_t offset, const void *buf, uint32_t len)
{
	union {
		struct vhost_blk_config hdr;
		uint8_t raw[sizeof(struct vhost_blk_config) +
			    sizeof(struct virtio_blk_config)];
	} arg;

	if (len > sizeof(struct virtio_blk_config))
		return -EINVAL;
	memset(&arg, 0, sizeof(arg));
	arg.hdr.offset = offset;
	arg.hdr.len = len;
	memcpy(arg.hdr.buf, buf, len);
	return VBLK_IOCTL(fd, VHOST_BLK_SET_CONFIG, &arg);
}

int vblk_get_config(int fd, struct virtio_blk_config *cfg)
{
	union {
		struct vhost_blk_config hdr;
		uint8_t raw[sizeof(struct vhost_blk_config) + sizeof(*cfg)];
	} arg;
	int n;

	memset(&arg, 0, sizeof(arg));
	arg.hdr.len = sizeof(*cfg);
	n = ioctl(fd, VHOST_BLK_GET_CONFIG, &arg);
	if (n < 0) {
		int err = errno;

		guest_log("vhost-blk: ioctl VHOST_BLK_GET_CONFIG: %s (errno %d)",
			  strerror(err), err);
		return -err;
	}
	if ((size_t)n > sizeof(*cfg)) {
		guest_log("vhost-blk: VHOST_BLK_GET_CONFIG filled %d of %zu bytes",
			  n, sizeof(*cfg));
		return -EPROTO;
	}
	memset(cfg, 0, sizeof(*cfg));
	memcpy(cfg, arg.hdr.buf, n);
	/* Little-endian as the device presents it; x86 needs nothing. */
	cfg->capacity = le64toh(cfg->capacity);
	cfg->size_max = le32toh(cfg->size_max);
	cfg->seg_max = le32toh(cfg->seg_max);
	cfg->blk_size = le32toh(cfg->blk_size);
	cfg->min_io_size = le16toh(cfg->min_io_size);
	cfg->opt_io_size = le32toh(cfg->opt_io_size);
	cfg->num_queues = le16toh(cfg->num_queues);
	cfg->max_discard_sectors = le32toh(cfg->max_discard_sectors);
	cfg->max_discard_seg = le32toh(cfg->max_discard_seg);
	cfg->discard_sector_alignment = le32toh(cfg->discard_sector_alignment);
	cfg->max_write_zeroes_sectors = le32toh(cfg->max_write_zeroes_sectors);
	cfg->max_write_zeroes_seg = le32toh(cfg->max_write_zeroes_seg);
	cfg->max_secure_erase_sectors = le32toh(cfg->max_secure_erase_sectors);
	cfg->max_secure_erase_seg = le32toh(cfg->max_secure_erase_seg);
	cfg->secure_erase_sector_alignment =
		le32toh(cfg->secure_erase_sector_alignment);
	return 0;
}

int vblk_get_stats(int fd, unsigned int index, uint32_t flags,
		   struct vhost_blk_vring_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->argsz = sizeof(*st);
	st->index = index;
	st->flags = flags;
	return VBLK_IOCTL(fd, VHOST_BLK_GET_VRING_STATS, st);
}

/* A wait on one of our queues gave up: what the device counted there. */
static void vblk_hang_report(const struct vq *vq, void *arg)
{
	const struct vblk_dev *dev = arg;
	struct vhost_blk_vring_stats st;

	if (vblk_get_stats(dev->fd, vq->index, 0, &st)) {
		guest_log("vq %u: device: GET_VRING_STATS failed", vq->index);
		return;
	}
	guest_log(
		"vq %u: device: %llu kicks, %llu answered (in %llu out %llu flush %llu get_id %llu ranges %llu unsupp %llu ioerr %llu), %llu in flight, %llu used batches, %llu notifies, %llu suppressed, %llu polls, %llu polled bios, %llu used errors",
		vq->index, (unsigned long long)st.kicks,
		(unsigned long long)(st.reqs_in + st.reqs_out + st.reqs_flush +
				     st.reqs_get_id + st.reqs_discard +
				     st.reqs_write_zeroes +
				     st.reqs_secure_erase + st.reqs_unsupp +
				     st.reqs_ioerr),
		(unsigned long long)st.reqs_in,
		(unsigned long long)st.reqs_out,
		(unsigned long long)st.reqs_flush,
		(unsigned long long)st.reqs_get_id,
		(unsigned long long)(st.reqs_discard + st.reqs_write_zeroes +
				     st.reqs_secure_erase),
		(unsigned long long)st.reqs_unsupp,
		(unsigned long long)st.reqs_ioerr,
		(unsigned long long)st.inflight,
		(unsigned long long)st.used_batches,
		(unsigned long long)st.notifies,
		(unsigned long long)st.notifies_suppressed,
		(unsigned long long)st.polls,
		(unsigned long long)st.polled_bios,
		(unsigned long long)st.used_errors);
}

int vblk_open(struct vblk_dev *dev, struct guest_mem *gm,
	      const struct vblk_config *cfg)
{
	unsigned int nvqs = cfg->nvqs ? cfg->nvqs : 1;
	unsigned int i;
	int err;

	memset(dev, 0, sizeof(*dev));
	dev->fd = -1;
	dev->gm = gm;
	for (i = 0; i < VBLK_MAX_VQS; i++) {
		dev->vq[i].kick_fd = -1;
		dev->vq[i].call_fd = -1;
	}
	if (nvqs > VBLK_MAX_VQS) {
		guest_log("vhost-blk: %u queues requested, at most %u", nvqs,
			  VBLK_MAX_VQS);
		return -EINVAL;
	}

	dev->fd = vblk_open_fd_workers(cfg->kthread_workers);
	if (dev->fd < 0)
		return dev->fd;

	err = vblk_get_features(dev->fd, &dev->offered);
	if (err)
		goto fail;
	dev->wanted = cfg->features;
	dev->features = dev->offered & cfg->features;
	err = vblk_set_features(dev->fd, dev->features);
	if (err)
		goto fail;
	err = vblk_set_mem_table(dev->fd, gm);
	if (err)
		goto fail;

	for (i = 0; i < nvqs; i++) {
		struct vq_config vcfg = {
			.index = i,
			.num = cfg->num,
			.max_indirect = cfg->max_indirect,
			.event_idx = vblk_has(dev, VIRTIO_RING_F_EVENT_IDX),
			.base = cfg->base,
		};

		err = vq_init(&dev->vq[i], gm, &vcfg);
		if (err)
			goto fail;
		dev->vq[i].hang_report = vblk_hang_report;
		dev->vq[i].hang_arg = dev;
		dev->nvqs = i + 1;
		err = vblk_setup_vq(dev->fd, &dev->vq[i], cfg->base);
		if (err)
			goto fail;
	}

	if (cfg->serial) {
		err = vblk_set_serial(dev->fd, cfg->serial);
		if (err)
			goto fail;
	}
	if (cfg->backend_fd >= 0) {
		err = vblk_attach(dev, cfg->backend_fd);
		if (err)
			goto fail;
	}
	return 0;

fail:
	vblk_close(dev);
	return err;
}

int vblk_attach(struct vblk_dev *dev, int backend_fd)
{
	int err;

	err = vblk_set_backend(dev->fd, backend_fd);
	if (err)
		return err;
	err = vblk_get_features(dev->fd, &dev->offered);
	if (err || (dev->offered & dev->wanted) == dev->features)
		return err;
	dev->features = dev->offered & dev->wanted;
	return vblk_set_features(dev->fd, dev->features);
}

void vblk_close(struct vblk_dev *dev)
{
	unsigned int i;

	if (dev->fd >= 0)
		close(dev->fd);
	dev->fd = -1;
	for (i = 0; i < dev->nvqs; i++)
		vq_destroy(&dev->vq[i]);
	dev->nvqs = 0;
}
