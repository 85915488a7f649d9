// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-user front-end.  See vu.h.
 *
 * Every message the back-end need not answer is sent with NEED_REPLY once
 * REPLY_ACK is negotiated, so that a refusal is reported at the message
 * that caused it rather than as a hang later.
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/vhost_types.h>

#include "bench.h"
#include "vu.h"

/* A reply: its first byte within this, then the whole of it as well. */
#define VU_REPLY_TIMEOUT_MS	10000
#define VU_CONNECT_TIMEOUT_MS	5000

static int vu_fail(struct vu_conn *c, uint32_t req, const char *what, int err)
{
	bench_err("vhost-user %s: VHOST_USER_%s: %s%s%s", c->path,
		  vu_request_name(req), what, err ? ": " : "",
		  err ? strerror(err) : "");
	return err ? -err : -EPROTO;
}

static int vu_send(struct vu_conn *c, uint32_t req, uint32_t flags,
		   const void *payload, uint32_t size, const int *fds,
		   unsigned int nfds)
{
	struct vu_hdr hdr = { .request = req, .flags = VU_VERSION | flags,
			      .size = size };
	int err = vu_send_msg(c->fd, &hdr, payload, fds, nfds);

	return err ? vu_fail(c, req, "send", -err) : 0;
}

/* The payload of the reply to @req, exactly @size bytes of it. */
static int vu_recv_exact(struct vu_conn *c, uint32_t req, void *reply,
			 uint32_t size)
{
	struct vu_msg m;
	char err[256];
	int ret;

	ret = vu_recv_msg(c->fd, &m, VU_RECV_REPLY, VU_REPLY_TIMEOUT_MS,
			  VU_REPLY_TIMEOUT_MS, err, sizeof(err));
	if (ret == 0)
		return vu_fail(c, req, "the back-end closed the connection", 0);
	if (ret < 0)
		return vu_fail(c, req, err, 0);
	/* Replies to these requests carry no descriptors. */
	vu_msg_close_fds(&m);
	if (m.hdr.request != req) {
		bench_err("vhost-user %s: VHOST_USER_%s: unexpected reply (request %u, flags %#x)",
			  c->path, vu_request_name(req), m.hdr.request,
			  m.hdr.flags);
		return -EPROTO;
	}
	if (m.hdr.size != size) {
		bench_err("vhost-user %s: VHOST_USER_%s: reply of %u bytes, expected %u",
			  c->path, vu_request_name(req), m.hdr.size, size);
		return -EPROTO;
	}
	memcpy(reply, &m.payload, size);
	return 0;
}

/* A request the back-end answers with a payload. */
static int vu_get(struct vu_conn *c, uint32_t req, const void *arg,
		  uint32_t arg_size, void *reply, uint32_t reply_size)
{
	int err = vu_send(c, req, 0, arg, arg_size, NULL, 0);

	return err ? err : vu_recv_exact(c, req, reply, reply_size);
}

static int vu_get_u64(struct vu_conn *c, uint32_t req, uint64_t *val)
{
	return vu_get(c, req, NULL, 0, val, sizeof(*val));
}

/* A request without an answer of its own; acknowledged with REPLY_ACK. */
static int vu_set(struct vu_conn *c, uint32_t req, const void *arg,
		  uint32_t size, const int *fds, unsigned int nfds)
{
	bool ack = c->protocol & (1ULL << VU_PROTOCOL_F_REPLY_ACK);
	uint64_t status;
	int err;

	err = vu_send(c, req, ack ? VU_NEED_REPLY : 0, arg, size, fds, nfds);
	if (err || !ack)
		return err;
	err = vu_recv_exact(c, req, &status, sizeof(status));
	if (err)
		return err;
	if (status) {
		bench_err("vhost-user %s: VHOST_USER_%s: the back-end refused it (status %llu)",
			  c->path, vu_request_name(req), (unsigned long long)status);
		return -EIO;
	}
	return 0;
}

static int vu_set_u64(struct vu_conn *c, uint32_t req, uint64_t val)
{
	return vu_set(c, req, &val, sizeof(val), NULL, 0);
}

static int vu_set_state(struct vu_conn *c, uint32_t req, unsigned int index,
			unsigned int num)
{
	struct vhost_vring_state s = { .index = index, .num = num };

	return vu_set(c, req, &s, sizeof(s), NULL, 0);
}

static int vu_set_fd(struct vu_conn *c, uint32_t req, unsigned int index,
		     int fd)
{
	uint64_t val = index;

	return vu_set(c, req, &val, sizeof(val), &fd, 1);
}

int vu_connect(struct vu_conn *c, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int waited = 0;

	memset(c, 0, sizeof(*c));
	c->path = path;
	c->fd = -1;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		bench_err("vhost-user socket path %s is too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(sun.sun_path, path);

	for (;;) {
		int err;

		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			bench_err("socket(AF_UNIX): %s", strerror(errno));
			return -errno;
		}
		if (!connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)))
			break;
		err = errno;
		close(c->fd);
		c->fd = -1;
		/* A daemon that is still starting, or between two clients. */
		if ((err != ENOENT && err != ECONNREFUSED) ||
		    waited >= VU_CONNECT_TIMEOUT_MS) {
			bench_err("vhost-user: connect to %s: %s", path,
				  strerror(err));
			return -err;
		}
		usleep(50000);
		waited += 50;
	}
	if (!getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		c->peer = cred.pid;
	return 0;
}

int vu_init(struct vu_conn *c)
{
	const uint64_t want = (1ULL << VU_PROTOCOL_F_MQ) |
			      (1ULL << VU_PROTOCOL_F_REPLY_ACK) |
			      (1ULL << VU_PROTOCOL_F_CONFIG);
	uint64_t offered, val;
	int err;

	err = vu_get_u64(c, VU_GET_FEATURES, &c->features);
	if (err)
		return err;
	if (c->features & (1ULL << VU_F_PROTOCOL_FEATURES)) {
		err = vu_get_u64(c, VU_GET_PROTOCOL_FEATURES, &offered);
		if (err)
			return err;
		/* Not acknowledged yet: sent without NEED_REPLY. */
		err = vu_set_u64(c, VU_SET_PROTOCOL_FEATURES, offered & want);
		if (err)
			return err;
		c->protocol = offered & want;
	}
	if (c->protocol & (1ULL << VU_PROTOCOL_F_MQ)) {
		err = vu_get_u64(c, VU_GET_QUEUE_NUM, &val);
		if (err)
			return err;
		c->max_queues = (unsigned int)val;
	}
	err = vu_set(c, VU_SET_OWNER, NULL, 0, NULL, 0);
	if (err)
		return err;
	if (c->protocol & (1ULL << VU_PROTOCOL_F_CONFIG)) {
		struct vu_config_space cfg = { .size = VU_BLK_CONFIG_SIZE };
		struct virtio_blk_config blk;
		uint32_t size = VU_CONFIG_HDR_SIZE + VU_BLK_CONFIG_SIZE;

		err = vu_get(c, VU_GET_CONFIG, &cfg, size, &cfg, size);
		if (err)
			return err;
		memcpy(&blk, cfg.region, VU_BLK_CONFIG_SIZE);
		/* Little-endian, like every VIRTIO 1 config space. */
		c->capacity = le64toh(blk.capacity);
		c->num_queues = le16toh(blk.num_queues);
		c->have_config = true;
	}
	return 0;
}

int vu_set_features(struct vu_conn *c, uint64_t features)
{
	return vu_set_u64(c, VU_SET_FEATURES, features);
}

int vu_set_mem_table(struct vu_conn *c, const struct guest_mem *gm, int memfd)
{
	struct vu_memory mem = {
		.nregions = 1,
		.regions[0] = {
			.guest_phys_addr = gm->gpa,
			.memory_size = gm->size,
			.userspace_addr = (uint64_t)(uintptr_t)gm->va,
			.mmap_offset = 0,
		},
	};

	/* The payload ends after the one region. */
	return vu_set(c, VU_SET_MEM_TABLE, &mem,
		      offsetof(struct vu_memory, regions[1]), &memfd, 1);
}

int vu_setup_vq(struct vu_conn *c, const struct vq *vq)
{
	struct vhost_vring_addr addr = {
		.index = vq->index,
		.desc_user_addr = vq_uaddr(vq->desc),
		.avail_user_addr = vq_uaddr(vq->avail),
		.used_user_addr = vq_uaddr(vq->used),
	};
	int err;

	err = vu_set_state(c, VU_SET_VRING_NUM, vq->index, vq->num);
	if (!err)
		err = vu_set_state(c, VU_SET_VRING_BASE, vq->index,
				   vq->avail_idx);
	if (!err)
		err = vu_set(c, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0);
	if (!err)
		err = vu_set_fd(c, VU_SET_VRING_KICK, vq->index, vq->kick_fd);
	if (!err)
		err = vu_set_fd(c, VU_SET_VRING_CALL, vq->index, vq->call_fd);
	/* With protocol features a ring starts disabled. */
	if (!err && (c->features & (1ULL << VU_F_PROTOCOL_FEATURES)))
		err = vu_set_state(c, VU_SET_VRING_ENABLE, vq->index, 1);
	return err;
}

int vu_stop_vq(struct vu_conn *c, unsigned int index)
{
	struct vhost_vring_state s = { .index = index };

	return vu_get(c, VU_GET_VRING_BASE, &s, sizeof(s), &s, sizeof(s));
}

void vu_close(struct vu_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}
