// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of vhost-blk-bridge's vhost-user side, on the host: no VM, no
 * module.  The test plays QEMU on one end of a socketpair and drives the
 * bridge's session on the other end one message at a time; a fake
 * /dev/vhost-blk (fake_kdev.c) records every ioctl the bridge issues and
 * refuses what the real module refuses.  Output is TAP.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <systemd/sd-daemon.h>
#include <linux/virtio_ring.h>

#include "fake_kdev.h"
#include "kdev.h"
#include "listen.h"
#include "log.h"
#include "vhost_user.h"

/* ------------------------------------------------------------- harness */

static unsigned int t_num, t_pass, t_fail;
static bool t_ok;
static FILE *t_log;

/*
 * _exit() of a forked child.  The coverage build (make coverage) exits
 * the child through exit(), whose handlers write its gcov counts.
 */
#ifdef VBB_COVERAGE
#define child_exit(code)	exit(code)
#else
#define child_exit(code)	_exit(code)
#endif

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			printf("#   %s:%d: check failed: %s\n", __FILE__,	\
			       __LINE__, #cond);			\
			printf("#   ");					\
			printf(__VA_ARGS__);				\
			printf("\n");					\
			t_ok = false;					\
		}							\
	} while (0)

static void log_reset(void)
{
	fflush(t_log);
	if (ftruncate(fileno(t_log), 0))
		perror("ftruncate");
	rewind(t_log);
}

static char *log_text(void)
{
	static char buf[16384];
	size_t n;

	fflush(t_log);
	rewind(t_log);
	n = fread(buf, 1, sizeof(buf) - 1, t_log);
	buf[n] = 0;
	fseek(t_log, 0, SEEK_END);
	return buf;
}

static bool log_has(const char *s)
{
	return strstr(log_text(), s) != NULL;
}

static void dump_log(void)
{
	char *p = log_text(), *nl;

	while (*p) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		printf("#   log: %s\n", p);
		if (!nl)
			break;
		p = nl + 1;
	}
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the DIR's own */
}

/* Mappings in this process of the memfd called @name. */
static int count_maps(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, name) != NULL;
	fclose(f);
	return n;
}

/* ... of the test's guest memory, and of its dirty log. */
static int count_guest_maps(void)
{
	return count_maps("vbb-test-guest");
}

static int count_log_maps(void)
{
	return count_maps("vbb-test-log");
}

/* ------------------------------------------------------ the test device */

#define NQ		2
#define DISK_BYTES	(8u << 20)
#define MEM_BYTES	(2u << 20)
#define REGION_BYTES	(1u << 20)
/* The frontend's (QEMU's) addresses of the two regions. */
#define FE_UVA0		0x7f0000000000ULL
#define FE_UVA1		0x7f0000400000ULL
#define GPA0		0x0ULL
#define GPA1		0x100000000ULL
/* Where ring q lives in region 1. */
#define RING_OFF(q)	(0x10000u * (q))
#define DESC_OFF	0x0
#define AVAIL_OFF	0x1000
#define USED_OFF	0x2000
#define RING_NUM	256

struct env {
	struct fake fake;
	struct kdev_ops ops;
	struct vu_params p;
	struct disk disk;
	char disk_path[64];
	struct vu_session s;
	bool open;
	int fe;				/* QEMU's end */
	int be;				/* the bridge's end */
	int memfd;
	uint8_t *mem;			/* the test's own view of guest RAM */
	int kick[NQ], call[NQ];
};

static int env_init_opts(struct env *e, bool read_only, bool open_session)
{
	int sv[2], i;

	memset(e, 0, sizeof(*e));
	fake_init(&e->fake);
	e->ops = (struct kdev_ops){
		.open = fake_open, .ioctl = fake_ioctl, .close = fake_close,
		.priv = &e->fake,
	};
	strcpy(e->disk_path, "/tmp/vbb-test-disk-XXXXXX");
	e->disk.fd = mkstemp(e->disk_path);
	if (e->disk.fd < 0 || ftruncate(e->disk.fd, DISK_BYTES))
		return -1;
	if (read_only) {
		int ro = open(e->disk_path, O_RDONLY | O_CLOEXEC);

		close(e->disk.fd);
		e->disk.fd = ro;
	}
	unlink(e->disk_path);
	e->disk.path = e->disk_path;
	e->disk.read_only = read_only;
	e->disk.blk_size = 512;

	e->p.kdev.path = "/dev/vhost-blk";
	e->p.kdev.ops = &e->ops;
	e->p.kdev.disk = &e->disk;
	e->p.kdev.num_queues = NQ;
	e->p.msg_timeout_ms = 200;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	e->fe = sv[0];
	e->be = sv[1];

	e->memfd = memfd_create("vbb-test-guest", MFD_CLOEXEC);
	if (e->memfd < 0 || ftruncate(e->memfd, MEM_BYTES))
		return -1;
	e->mem = mmap(NULL, MEM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		      e->memfd, 0);
	if (e->mem == MAP_FAILED)
		return -1;
	for (i = 0; i < NQ; i++) {
		e->kick[i] = eventfd(0, EFD_CLOEXEC);
		e->call[i] = eventfd(0, EFD_CLOEXEC);
	}
	if (!open_session)
		return 0;
	if (vu_session_open(&e->s, &e->p, e->be))
		return -1;
	e->open = true;
	return 0;
}

static void env_fini(struct env *e)
{
	int i;

	if (e->open)
		vu_session_close(&e->s);
	if (e->fe >= 0)
		close(e->fe);
	close(e->be);
	munmap(e->mem, MEM_BYTES);
	close(e->memfd);
	close(e->disk.fd);
	for (i = 0; i < NQ; i++) {
		close(e->kick[i]);
		close(e->call[i]);
	}
}

/* Raw bytes, part of a message: for the framing's error paths. */
static int send_raw(int sock, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return vu_sendv(sock, &iov, 1, NULL, 0);
}

static int send_msg(struct env *e, uint32_t req, uint32_t flags,
		    const void *payload, uint32_t size, const int *fds,
		    unsigned int nfds)
{
	struct vu_hdr h = { .request = req, .flags = flags, .size = size };

	return vu_send_msg(e->fe, &h, payload, fds, nfds);
}

/* Send one request and let the bridge handle it. */
static int xchg(struct env *e, uint32_t req, uint32_t flags,
		const void *payload, uint32_t size, const int *fds,
		unsigned int nfds)
{
	if (send_msg(e, req, flags, payload, size, fds, nfds))
		return -100;
	return vu_session_handle(&e->s);
}

static int xchg_u64(struct env *e, uint32_t req, uint64_t v)
{
	return xchg(e, req, VU_VERSION, &v, sizeof(v), NULL, 0);
}

static int xchg_state(struct env *e, uint32_t req, uint32_t index,
		      uint32_t num)
{
	struct vhost_vring_state st = { .index = index, .num = num };

	return xchg(e, req, VU_VERSION, &st, sizeof(st), NULL, 0);
}

static int xchg_fd(struct env *e, uint32_t req, uint32_t index, int fd)
{
	uint64_t v = index;

	return xchg(e, req, VU_VERSION, &v, sizeof(v), &fd, 1);
}

/* Read one reply; -1 if none within 1 s. */
static int recv_reply(struct env *e, struct vu_hdr *h, void *payload,
		      size_t max)
{
	struct pollfd pfd = { .fd = e->fe, .events = POLLIN };
	uint8_t buf[sizeof(*h) + 1024];
	ssize_t n;

	if (poll(&pfd, 1, 1000) != 1)
		return -1;
	n = recv(e->fe, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < (ssize_t)sizeof(*h))
		return -1;
	memcpy(h, buf, sizeof(*h));
	if ((size_t)n != sizeof(*h) + h->size || h->size > max)
		return -1;
	memcpy(payload, buf + sizeof(*h), h->size);
	return 0;
}

static bool no_reply_pending(struct env *e)
{
	struct pollfd pfd = { .fd = e->fe, .events = POLLIN };

	return poll(&pfd, 1, 0) == 0;
}

/* A GET_* that answers a u64; checks the reply header. */
static uint64_t get_u64(struct env *e, uint32_t req)
{
	struct vu_hdr h;
	uint64_t v = ~0ULL;
	int ret;

	ret = xchg(e, req, VU_VERSION, NULL, 0, NULL, 0);
	CHECK(ret == 0, "%s handled: %d", vu_request_name(req), ret);
	CHECK(recv_reply(e, &h, &v, sizeof(v)) == 0, "%s: no reply",
	      vu_request_name(req));
	CHECK(h.flags == 0x5, "%s reply flags 0x%x", vu_request_name(req),
	      h.flags);
	CHECK(h.request == req, "reply to %u for %u", h.request, req);
	CHECK(h.size == 8, "reply size %u", h.size);
	return v;
}

/* Expect an ack (REPLY_ACK) with value want (0: success, else non-zero). */
static void expect_ack(struct env *e, bool success, uint32_t req)
{
	struct vu_hdr h;
	uint64_t v = 12345;

	CHECK(recv_reply(e, &h, &v, sizeof(v)) == 0, "no ack for %s",
	      vu_request_name(req));
	CHECK(h.flags == 0x5, "ack flags 0x%x", h.flags);
	CHECK(h.request == req, "ack for %u, not %u", h.request, req);
	CHECK(h.size == 8, "ack size %u", h.size);
	CHECK(success ? v == 0 : v != 0, "ack value %llu", (unsigned long long)v);
}

/* QEMU 7.2's vhost_dev_init: the handshake. */
static void handshake(struct env *e)
{
	int i;

	get_u64(e, VU_GET_FEATURES);
	get_u64(e, VU_GET_PROTOCOL_FEATURES);
	CHECK(xchg_u64(e, VU_SET_PROTOCOL_FEATURES, VU_PROTOCOL_FEATURES) == 0,
	      "SET_PROTOCOL_FEATURES");
	get_u64(e, VU_GET_QUEUE_NUM);
	CHECK(xchg(e, VU_SET_OWNER, VU_VERSION, NULL, 0, NULL, 0) == 0,
	      "SET_OWNER");
	for (i = 0; i < NQ; i++)
		CHECK(xchg_fd(e, VU_SET_VRING_CALL, i, e->call[i]) == 0,
		      "SET_VRING_CALL %d", i);
}

static void fill_mem_table(struct vu_memory *m)
{
	memset(m, 0, sizeof(*m));
	m->nregions = 2;
	m->regions[0] = (struct vu_mem_region){
		.guest_phys_addr = GPA0, .memory_size = REGION_BYTES,
		.userspace_addr = FE_UVA0, .mmap_offset = 0,
	};
	m->regions[1] = (struct vu_mem_region){
		.guest_phys_addr = GPA1, .memory_size = REGION_BYTES,
		.userspace_addr = FE_UVA1, .mmap_offset = REGION_BYTES,
	};
}

static int set_mem_table(struct env *e, uint32_t flags)
{
	struct vu_memory m;
	int fds[2] = { e->memfd, e->memfd };

	fill_mem_table(&m);
	return xchg(e, VU_SET_MEM_TABLE, flags, &m, 8 + 2 * 32, fds, 2);
}

static struct vhost_vring_addr fe_ring_addr(unsigned int q)
{
	uint64_t base = FE_UVA1 + RING_OFF(q);

	return (struct vhost_vring_addr){
		.index = q,
		.desc_user_addr = base + DESC_OFF,
		.avail_user_addr = base + AVAIL_OFF,
		.used_user_addr = base + USED_OFF,
		.log_guest_addr = GPA1 + RING_OFF(q) + USED_OFF,
	};
}

/* QEMU 7.2's vhost_dev_start for rings [0, nq), then enable them. */
static void start(struct env *e, unsigned int nq, bool enable)
{
	unsigned int q;
	int ret;

	ret = xchg_u64(e, VU_SET_FEATURES, fake_guest_features |
		       F(VU_F_PROTOCOL_FEATURES));
	CHECK(ret == 0, "SET_FEATURES: %d", ret);
	ret = set_mem_table(e, VU_VERSION | VU_NEED_REPLY);
	CHECK(ret == 0, "SET_MEM_TABLE: %d", ret);
	expect_ack(e, true, VU_SET_MEM_TABLE);
	for (q = 0; q < nq; q++) {
		struct vhost_vring_addr a = fe_ring_addr(q);

		CHECK(xchg_state(e, VU_SET_VRING_NUM, q, RING_NUM) == 0,
		      "SET_VRING_NUM %u", q);
		CHECK(xchg_state(e, VU_SET_VRING_BASE, q, 0) == 0,
		      "SET_VRING_BASE %u", q);
		CHECK(xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a),
			   NULL, 0) == 0, "SET_VRING_ADDR %u", q);
		CHECK(xchg_fd(e, VU_SET_VRING_KICK, q, e->kick[q]) == 0,
		      "SET_VRING_KICK %u", q);
	}
	if (!enable)
		return;
	for (q = 0; q < nq; q++)
		CHECK(xchg_state(e, VU_SET_VRING_ENABLE, q, 1) == 0,
		      "SET_VRING_ENABLE %u", q);
	for (q = 0; q < nq; q++)
		CHECK(xchg_fd(e, VU_SET_VRING_CALL, q, e->call[q]) == 0,
		      "SET_VRING_CALL %u", q);
}

/* QEMU 7.2's vhost_dev_stop. */
static void stop(struct env *e, unsigned int nq)
{
	struct vhost_vring_state st;
	struct vu_hdr h;
	unsigned int q;

	for (q = 0; q < nq; q++)
		CHECK(xchg_state(e, VU_SET_VRING_ENABLE, q, 0) == 0,
		      "disable %u", q);
	for (q = 0; q < nq; q++) {
		CHECK(xchg_state(e, VU_GET_VRING_BASE, q, 0) == 0,
		      "GET_VRING_BASE %u", q);
		CHECK(recv_reply(e, &h, &st, sizeof(st)) == 0,
		      "GET_VRING_BASE %u reply", q);
	}
}

/* ---------------------------------------------------------------- tests */

static void t_get_features(struct env *e)
{
	uint64_t f = get_u64(e, VU_GET_FEATURES);

	CHECK(f & F(VU_F_PROTOCOL_FEATURES), "features 0x%llx lack bit 30",
	      (unsigned long long)f);
	CHECK((f & ~F(VU_F_PROTOCOL_FEATURES)) == fake_features,
	      "features 0x%llx, module offers 0x%llx", (unsigned long long)f,
	      (unsigned long long)fake_features);
	CHECK(!(f & F(VIRTIO_BLK_F_RO)), "RO offered for a writable disk");
}

static void t_get_protocol_features(struct env *e)
{
	uint64_t f = get_u64(e, VU_GET_PROTOCOL_FEATURES);

	CHECK(f == (F(VU_PROTOCOL_F_MQ) | F(VU_PROTOCOL_F_LOG_SHMFD) |
		    F(VU_PROTOCOL_F_REPLY_ACK) | F(VU_PROTOCOL_F_BACKEND_REQ) |
		    F(VU_PROTOCOL_F_CONFIG) |
		    F(VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS)),
	      "protocol features 0x%llx", (unsigned long long)f);
}

static void t_set_protocol_features_unknown(struct env *e)
{
	/* Bit 2, RARP: a vhost-user-net extension. */
	int ret = xchg_u64(e, VU_SET_PROTOCOL_FEATURES,
			   VU_PROTOCOL_FEATURES | F(2));

	CHECK(ret == -1, "accepted: %d", ret);
	CHECK(log_has("never offered"), "no clear error");
}

static void t_get_queue_num(struct env *e)
{
	CHECK(get_u64(e, VU_GET_QUEUE_NUM) == NQ, "queue num");
}

static void t_get_config(struct env *e)
{
	struct vu_config_space req = { .offset = 0, .size = 60 }, rep;
	struct virtio_blk_config cfg;
	struct vu_hdr h;
	int ret;

	handshake(e);
	ret = xchg(e, VU_GET_CONFIG, VU_VERSION, &req, 12 + req.size, NULL, 0);
	CHECK(ret == 0, "GET_CONFIG: %d", ret);
	CHECK(recv_reply(e, &h, &rep, sizeof(rep)) == 0, "no reply");
	CHECK(h.flags == 0x5, "flags 0x%x", h.flags);
	CHECK(h.size == 12 + 60, "reply size %u", h.size);
	CHECK(rep.offset == 0 && rep.size == 60, "reply range %u+%u",
	      rep.offset, rep.size);
	memset(&cfg, 0, sizeof(cfg));
	memcpy(&cfg, rep.region, 60);
	CHECK(le64toh(cfg.capacity) == DISK_BYTES / 512, "capacity %llu",
	      (unsigned long long)le64toh(cfg.capacity));
	CHECK(le32toh(cfg.blk_size) == 512, "blk_size %u",
	      le32toh(cfg.blk_size));
	/* QEMU's default queue-size, 128, less header and status. */
	CHECK(le32toh(cfg.seg_max) == 126, "seg_max %u", le32toh(cfg.seg_max));
	CHECK(le16toh(cfg.num_queues) == NQ, "num_queues %u",
	      le16toh(cfg.num_queues));
	CHECK(le32toh(cfg.max_discard_seg) == VHOST_BLK_MAX_DISCARD_SEG,
	      "max_discard_seg %u (the module's config)",
	      le32toh(cfg.max_discard_seg));

	/* A slice: seg_max alone. */
	req.offset = 12;
	req.size = 4;
	ret = xchg(e, VU_GET_CONFIG, VU_VERSION, &req, 12 + 4, NULL, 0);
	CHECK(ret == 0, "GET_CONFIG slice: %d", ret);
	CHECK(recv_reply(e, &h, &rep, sizeof(rep)) == 0, "no reply");
	CHECK(h.size == 16 && rep.size == 4 && rep.offset == 12,
	      "slice reply %u %u+%u", h.size, rep.offset, rep.size);
	CHECK(le32toh(*(uint32_t *)rep.region) == 126, "slice seg_max");
}

/*
 * Online resize: the disk grows, SIGHUP calls vu_session_config_changed(),
 * which sends CONFIG_CHANGE_MSG on the back-end channel; the frontend's
 * next GET_CONFIG has the new capacity.  Without a channel it says so.
 */
static void t_config_change_on_resize(struct env *e)
{
	struct vu_config_space req = { .offset = 0, .size = 60 }, rep;
	struct virtio_blk_config cfg;
	struct vu_hdr h = { 0 };
	int sv[2];

	handshake(e);
	CHECK(vu_session_config_changed(&e->s) == -ENOTCONN &&
	      log_has("the frontend has no back-end channel"),
	      "a change without a channel");
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	      "socketpair");
	CHECK(xchg(e, VU_SET_BACKEND_REQ_FD, VU_VERSION, NULL, 0, &sv[1], 1) == 0,
	      "SET_BACKEND_REQ_FD");
	close(sv[1]);
	CHECK(!ftruncate(e->disk.fd, 2 * DISK_BYTES), "grow the disk");
	CHECK(vu_session_config_changed(&e->s) == 0, "config change");
	CHECK(recv(sv[0], &h, sizeof(h), MSG_DONTWAIT) == sizeof(h) &&
	      h.request == VU_BACKEND_CONFIG_CHANGE_MSG && h.flags == VU_VERSION &&
	      h.size == 0, "CONFIG_CHANGE_MSG: request %u flags 0x%x size %u",
	      h.request, h.flags, h.size);
	CHECK(xchg(e, VU_GET_CONFIG, VU_VERSION, &req, 12 + req.size, NULL, 0) == 0,
	      "GET_CONFIG");
	CHECK(recv_reply(e, &h, &rep, sizeof(rep)) == 0, "no reply");
	memset(&cfg, 0, sizeof(cfg));
	memcpy(&cfg, rep.region, 60);
	CHECK(le64toh(cfg.capacity) == 2 * DISK_BYTES / 512, "capacity %llu",
	      (unsigned long long)le64toh(cfg.capacity));
	close(sv[0]);
}

/* SET_BACKEND_REQ_FD without the protocol feature is refused. */
static void t_backend_req_fd_not_negotiated(struct env *e)
{
	int fd = eventfd(0, EFD_CLOEXEC);

	CHECK(xchg_u64(e, VU_SET_PROTOCOL_FEATURES, F(VU_PROTOCOL_F_REPLY_ACK)) == 0,
	      "SET_PROTOCOL_FEATURES");
	CHECK(xchg(e, VU_SET_BACKEND_REQ_FD, VU_VERSION, NULL, 0, &fd, 1) == -1 &&
	      log_has("VHOST_USER_PROTOCOL_F_BACKEND_REQ was not negotiated"),
	      "accepted without the feature");
	close(fd);
}

static void t_get_config_bad(struct env *e)
{
	struct vu_config_space req = { .offset = 0, .size = 60 };
	int ret;

	/* The size field says 60, the payload has 20. */
	ret = xchg(e, VU_GET_CONFIG, VU_VERSION, &req, 12 + 20, NULL, 0);
	CHECK(ret == -1, "accepted: %d", ret);
	CHECK(log_has("does not match"), "no clear error");
}

static void t_config_fallback(struct env *e)
{
	struct vu_config_space req = { .offset = 0, .size = 60 }, rep;
	struct virtio_blk_config cfg;
	struct vu_hdr h;
	uint64_t f;

	/* An older module without VHOST_BLK_GET_CONFIG. */
	vu_session_close(&e->s);
	e->fake.has_config = false;
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "open");
	f = get_u64(e, VU_GET_FEATURES);
	CHECK(!(f & (F(VIRTIO_BLK_F_DISCARD) | F(VIRTIO_BLK_F_WRITE_ZEROES) |
		     F(VIRTIO_BLK_F_TOPOLOGY))),
	      "features 0x%llx offer limits the bridge cannot fill",
	      (unsigned long long)f);
	CHECK(f & F(VIRTIO_BLK_F_FLUSH), "FLUSH lost");
	CHECK(xchg(e, VU_GET_CONFIG, VU_VERSION, &req, 12 + 60, NULL, 0) == 0,
	      "GET_CONFIG");
	CHECK(recv_reply(e, &h, &rep, sizeof(rep)) == 0, "no reply");
	memset(&cfg, 0, sizeof(cfg));
	memcpy(&cfg, rep.region, 60);
	CHECK(le64toh(cfg.capacity) == DISK_BYTES / 512, "capacity");
	CHECK(le32toh(cfg.blk_size) == 512, "blk_size");
	CHECK(le32toh(cfg.seg_max) == 126, "seg_max");
	CHECK(le16toh(cfg.num_queues) == NQ, "num_queues");
}

static void t_reply_ack(struct env *e)
{
	int ret;

	ret = xchg(e, VU_SET_OWNER, VU_VERSION | VU_NEED_REPLY, NULL, 0,
		   NULL, 0);
	CHECK(ret == 0, "SET_OWNER: %d", ret);
	expect_ack(e, true, VU_SET_OWNER);
	ret = xchg(e, VU_SET_OWNER, VU_VERSION, NULL, 0, NULL, 0);
	CHECK(ret == 0, "SET_OWNER: %d", ret);
	CHECK(no_reply_pending(e), "a reply without need_reply");
	/* need_reply on a GET: only its own reply. */
	ret = xchg(e, VU_GET_QUEUE_NUM, VU_VERSION | VU_NEED_REPLY, NULL, 0,
		   NULL, 0);
	CHECK(ret == 0, "GET_QUEUE_NUM: %d", ret);
	{
		struct vu_hdr h;
		uint64_t v;

		CHECK(recv_reply(e, &h, &v, sizeof(v)) == 0 && v == NQ,
		      "GET_QUEUE_NUM reply");
		CHECK(no_reply_pending(e), "an extra ack after a GET");
	}
}

static void t_set_features(struct env *e)
{
	int i;

	handshake(e);
	CHECK(xchg_u64(e, VU_SET_FEATURES, fake_guest_features |
		       F(VU_F_PROTOCOL_FEATURES)) == 0, "SET_FEATURES");
	i = find_call(&e->fake, VHOST_SET_FEATURES, 0);
	CHECK(i >= 0, "no VHOST_SET_FEATURES");
	if (i >= 0)
		CHECK(e->fake.calls[i].a.u64 == fake_guest_features,
		      "kernel got 0x%llx", (unsigned long long)e->fake.calls[i].a.u64);
}

static void t_set_features_not_offered(struct env *e)
{
	int ret = xchg_u64(e, VU_SET_FEATURES,
			   fake_features | F(VIRTIO_F_RING_PACKED));

	CHECK(ret == -1, "accepted: %d", ret);
	CHECK(log_has("never offered"), "no clear error");
	CHECK(find_call(&e->fake, VHOST_SET_FEATURES, 0) < 0,
	      "reached the kernel");
}

static void t_mem_table(struct env *e)
{
	struct fake_call *c;
	int i;

	/* Magic words at the start of each region, seen from guest RAM. */
	*(uint64_t *)(e->mem) = 0x1111111111111111ULL;
	*(uint64_t *)(e->mem + REGION_BYTES) = 0x2222222222222222ULL;
	handshake(e);
	CHECK(set_mem_table(e, VU_VERSION | VU_NEED_REPLY) == 0, "SET_MEM_TABLE");
	expect_ack(e, true, VU_SET_MEM_TABLE);
	i = find_call(&e->fake, VHOST_SET_MEM_TABLE, 0);
	CHECK(i >= 0, "no VHOST_SET_MEM_TABLE");
	if (i < 0)
		return;
	c = &e->fake.calls[i];
	CHECK(c->nregions == 2, "%u regions", c->nregions);
	CHECK(c->regions[0].guest_phys_addr == GPA0 &&
	      c->regions[0].memory_size == REGION_BYTES, "region 0 gpa/size");
	CHECK(c->regions[1].guest_phys_addr == GPA1 &&
	      c->regions[1].memory_size == REGION_BYTES, "region 1 gpa/size");
	CHECK(c->regions[0].userspace_addr != FE_UVA0 &&
	      c->regions[1].userspace_addr != FE_UVA1,
	      "the frontend's addresses went to the kernel");
	CHECK(c->regions[0].flags_padding == 0, "flags_padding");
	CHECK(*(uint64_t *)(uintptr_t)c->regions[0].userspace_addr ==
	      0x1111111111111111ULL, "region 0 maps the wrong memory");
	CHECK(*(uint64_t *)(uintptr_t)c->regions[1].userspace_addr ==
	      0x2222222222222222ULL,
	      "region 1 maps the wrong memory (mmap_offset ignored?)");
}

static void t_mem_table_unaligned_offset(struct env *e)
{
	struct vu_memory m;
	struct fake_call *c;
	int fd = e->memfd, i;

	*(uint64_t *)(e->mem + 0x10800) = 0x3333333333333333ULL;
	handshake(e);
	memset(&m, 0, sizeof(m));
	m.nregions = 1;
	m.regions[0] = (struct vu_mem_region){
		.guest_phys_addr = 0x800, .memory_size = 0x10000,
		.userspace_addr = FE_UVA0, .mmap_offset = 0x10800,
	};
	CHECK(xchg(e, VU_SET_MEM_TABLE, VU_VERSION, &m, 8 + 32, &fd, 1) == 0,
	      "SET_MEM_TABLE");
	i = find_call(&e->fake, VHOST_SET_MEM_TABLE, 0);
	CHECK(i >= 0, "no VHOST_SET_MEM_TABLE");
	if (i < 0)
		return;
	c = &e->fake.calls[i];
	CHECK(*(uint64_t *)(uintptr_t)c->regions[0].userspace_addr ==
	      0x3333333333333333ULL, "wrong memory");
}

/* The VmFlags line of the mapping that holds @addr, in /proc/self/smaps. */
static bool vm_flags_of(const void *addr, char *flags, size_t len)
{
	unsigned long lo, hi, a = (unsigned long)addr;
	bool in = false;
	char line[512];
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') &&
		    line[strspn(line, "0123456789abcdef")] == '-')
			in = a >= lo && a < hi;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			size_t n = strlen(line + 8);

			if (n >= len)
				n = len - 1;
			memcpy(flags, line + 8, n);
			flags[n] = 0;
			fclose(f);
			return true;
		}
	}
	fclose(f);
	return false;
}

/*
 * Guest memory on hugetlbfs (QEMU's memory-backend-file on /dev/hugepages,
 * or memfd with hugetlb=on): mapped from the huge page that holds the
 * region's mmap_offset, with MAP_NORESERVE (this host has no huge pages
 * reserved: without it the mmap fails) and MADV_DONTDUMP.  The same for
 * an ordinary memfd.
 */
static void t_mem_table_hugetlb(struct env *e)
{
	const uint64_t huge = 2 << 20;
	uint64_t offs[2] = { huge, huge + 0x10000 };
	struct vu_memory m;
	char flags[256];
	unsigned int k;
	int fd, i, at;

	fd = memfd_create("vbb-test-huge", MFD_CLOEXEC | MFD_HUGETLB);
	if (fd < 0) {
		printf("#   no hugetlbfs memfd here (%s): the hugetlb part is not run\n",
		       strerror(errno));
	} else {
		CHECK(!ftruncate(fd, 4 * huge), "ftruncate: %s", strerror(errno));
	}
	handshake(e);
	for (k = 0; fd >= 0 && k < 2; k++) {
		memset(&m, 0, sizeof(m));
		m.nregions = 1;
		m.regions[0] = (struct vu_mem_region){
			.guest_phys_addr = 0, .memory_size = huge,
			.userspace_addr = FE_UVA0, .mmap_offset = offs[k],
		};
		at = e->fake.ncalls;
		CHECK(xchg(e, VU_SET_MEM_TABLE, VU_VERSION, &m, 8 + 32, &fd, 1) == 0,
		      "SET_MEM_TABLE on hugetlbfs at offset 0x%llx",
		      (unsigned long long)offs[k]);
		i = find_call(&e->fake, VHOST_SET_MEM_TABLE, at);
		CHECK(i >= 0, "no VHOST_SET_MEM_TABLE");
		if (i < 0)
			break;
		CHECK((e->fake.calls[i].regions[0].userspace_addr & (huge - 1)) ==
		      (offs[k] & (huge - 1)), "not mapped from the huge page");
		CHECK(vm_flags_of((void *)(uintptr_t)e->fake.calls[i].regions[0].userspace_addr,
				  flags, sizeof(flags)) &&
		      strstr(flags, " dd") && strstr(flags, " nr") && strstr(flags, " ht"),
		      "VmFlags:%s", flags);
	}
	if (fd >= 0)
		close(fd);
	/* An ordinary memfd: the same flags. */
	memset(&m, 0, sizeof(m));
	m.nregions = 1;
	m.regions[0] = (struct vu_mem_region){
		.guest_phys_addr = 0, .memory_size = 0x10000,
		.userspace_addr = FE_UVA0, .mmap_offset = 0,
	};
	fd = e->memfd;
	at = e->fake.ncalls;
	CHECK(xchg(e, VU_SET_MEM_TABLE, VU_VERSION, &m, 8 + 32, &fd, 1) == 0,
	      "SET_MEM_TABLE");
	i = find_call(&e->fake, VHOST_SET_MEM_TABLE, at);
	CHECK(i >= 0 && vm_flags_of((void *)(uintptr_t)e->fake.calls[i].regions[0].userspace_addr,
				    flags, sizeof(flags)) &&
	      strstr(flags, " dd") && strstr(flags, " nr"), "memfd VmFlags:%s",
	      flags);
}

/* ADD_MEM_REG of region @k: 64 KiB at guest @k MiB, offset @k * 64 KiB. */
static int add_region(struct env *e, uint32_t req, unsigned int k)
{
	struct vu_mem_reg r = {
		.region = {
			.guest_phys_addr = (uint64_t)k << 20,
			.memory_size = 0x10000,
			.userspace_addr = FE_UVA0 + ((uint64_t)k << 20),
			.mmap_offset = (uint64_t)k * 0x10000,
		},
	};
	int fd = e->memfd;

	return xchg(e, req, VU_VERSION, &r, sizeof(r), &fd,
		    req == VU_ADD_MEM_REG ? 1 : 0);
}

/* The last VHOST_SET_MEM_TABLE: its regions, each checked by its marker. */
static unsigned int check_table(struct env *e, unsigned int skip)
{
	int i = -1, j;
	unsigned int n, k;

	while ((j = find_call(&e->fake, VHOST_SET_MEM_TABLE, i + 1)) >= 0)
		i = j;
	if (i < 0)
		return 0;
	n = e->fake.calls[i].nregions;
	for (k = 0; k < n && k < FAKE_MAX_REGIONS; k++) {
		const struct vhost_memory_region *kr = &e->fake.calls[i].regions[k];
		unsigned int id = kr->guest_phys_addr >> 20;

		CHECK(id != skip, "removed region %u still there", skip);
		CHECK(*(uint32_t *)(uintptr_t)kr->userspace_addr == 0x5107u + id,
		      "region %u maps the wrong memory", id);
	}
	return n;
}

/*
 * CONFIGURE_MEM_SLOTS: GET_MAX_MEM_SLOTS is the vhost module's limit;
 * regions come one at a time, past SET_MEM_TABLE's 8; each change gives
 * the module the whole table again; REM_MEM_REG takes the one named (an
 * fd sent with it is closed unused); no more than the slots.
 */
static void t_mem_slots(struct env *e)
{
	unsigned int k, n = 10;

	for (k = 0; k < n; k++)
		*(uint32_t *)(e->mem + k * 0x10000) = 0x5107u + k;
	handshake(e);
	CHECK(get_u64(e, VU_GET_MAX_MEM_SLOTS) == VU_MAX_MEM_SLOTS,
	      "max slots");
	for (k = 0; k < n; k++)
		CHECK(add_region(e, VU_ADD_MEM_REG, k) == 0, "ADD_MEM_REG %u", k);
	CHECK(check_table(e, ~0u) == n, "table of %u regions", n);
	CHECK(e->s.nregions == n, "%u regions in the session", e->s.nregions);
	/* Remove the fourth, with an fd as some frontends send. */
	{
		struct vu_mem_reg r = {
			.region = {
				.guest_phys_addr = 3ULL << 20, .memory_size = 0x10000,
				.userspace_addr = FE_UVA0 + (3ULL << 20),
			},
		};
		int fd = dup(e->memfd);

		CHECK(xchg(e, VU_REM_MEM_REG, VU_VERSION, &r, sizeof(r), &fd, 1) == 0,
		      "REM_MEM_REG");
		close(fd);
	}
	CHECK(check_table(e, 3) == n - 1, "table after removal");
	/* The limit: the module's, here 10. */
	e->p.max_mem_slots = 10;
	CHECK(get_u64(e, VU_GET_MAX_MEM_SLOTS) == 10, "max slots of the module");
	CHECK(add_region(e, VU_ADD_MEM_REG, 3) == 0, "ADD_MEM_REG again");
	CHECK(add_region(e, VU_ADD_MEM_REG, 11) == -1 &&
	      log_has("all 10 memory slots are in use"), "an 11th slot");
}

/*
 * REM_MEM_REG of the region that holds the rings, then ADD_MEM_REG of it
 * again (QEMU replaces a region that changed that way): the rings wait,
 * cleared in the kernel and the disk detached, and run again once their
 * memory is back; the connection stays.
 */
static void t_mem_slots_rem_ring_region(struct env *e)
{
	struct vu_mem_reg r = {
		.region = {
			.guest_phys_addr = GPA1, .memory_size = REGION_BYTES,
			.userspace_addr = FE_UVA1, .mmap_offset = REGION_BYTES,
		},
	};
	int fd = e->memfd;

	handshake(e);
	start(e, NQ, true);
	CHECK(e->fake.attached && e->fake.desc[0] && e->fake.desc[1],
	      "not running");
	CHECK(xchg(e, VU_REM_MEM_REG, VU_VERSION, &r, sizeof(r), NULL, 0) == 0,
	      "REM_MEM_REG of the rings' region");
	CHECK(log_has("vring 0: its memory left the table"), "no notice");
	CHECK(!e->fake.attached, "attached with its rings unmapped");
	CHECK(!e->fake.desc[0] && !e->fake.desc[1],
	      "the kernel still has the rings");
	CHECK(xchg(e, VU_ADD_MEM_REG, VU_VERSION, &r, sizeof(r), &fd, 1) == 0,
	      "ADD_MEM_REG of it again");
	CHECK(e->fake.attached && e->fake.running[0] && e->fake.running[1],
	      "not running again");
	CHECK(e->fake.desc[0] && e->fake.desc[1], "rings not set again");
	CHECK(!log_has("error"), "errors");
}

/* REM_MEM_REG of a region never added is refused. */
static void t_mem_slots_rem_unknown(struct env *e)
{
	handshake(e);
	CHECK(add_region(e, VU_ADD_MEM_REG, 0) == 0, "ADD_MEM_REG");
	CHECK(add_region(e, VU_REM_MEM_REG, 5) == -1 &&
	      log_has("no region at guest 0x500000"), "an unknown region");
}

static void t_vring_addr(struct env *e)
{
	unsigned int q;
	int i = 0;

	for (q = 0; q < NQ; q++) {
		uint8_t *r = e->mem + REGION_BYTES + RING_OFF(q);

		*(uint32_t *)(r + DESC_OFF) = 0xd0d0d000 + q;
		*(uint32_t *)(r + AVAIL_OFF) = 0xa0a0a000 + q;
		*(uint32_t *)(r + USED_OFF) = 0x05ed0000 + q;
	}
	handshake(e);
	start(e, NQ, true);
	for (q = 0; q < NQ; q++) {
		struct vhost_vring_addr *a;

		i = find_call(&e->fake, VHOST_SET_VRING_ADDR, i);
		CHECK(i >= 0, "no VHOST_SET_VRING_ADDR for %u", q);
		if (i < 0)
			return;
		a = &e->fake.calls[i++].a.addr;
		CHECK(a->index == q, "index %u", a->index);
		CHECK(a->flags == 0, "flags %u", a->flags);
		CHECK(*(uint32_t *)(uintptr_t)a->desc_user_addr == 0xd0d0d000 + q,
		      "desc of ring %u translated wrong", q);
		CHECK(*(uint32_t *)(uintptr_t)a->avail_user_addr == 0xa0a0a000 + q,
		      "avail of ring %u translated wrong", q);
		CHECK(*(uint32_t *)(uintptr_t)a->used_user_addr == 0x05ed0000 + q,
		      "used of ring %u translated wrong", q);
	}
	CHECK(vu_uva_to_host(&e->s, FE_UVA1 + REGION_BYTES - 4, 8) == NULL,
	      "a range across the end of a region translated");
}

static void t_attach_when_all_enabled(struct env *e)
{
	int att, last_enable_call, after_probe;

	/* kdev_open attaches and detaches once, to probe the disk. */
	after_probe = find_backend(&e->fake, false, 0) + 1;
	CHECK(after_probe > 0, "no probe");
	handshake(e);
	start(e, NQ, false);
	CHECK(find_backend(&e->fake, true, after_probe) < 0,
	      "attached before SET_VRING_ENABLE");
	CHECK(xchg_state(e, VU_SET_VRING_ENABLE, 0, 1) == 0, "enable 0");
	CHECK(find_backend(&e->fake, true, after_probe) < 0,
	      "attached with ring 1 set up but disabled");
	last_enable_call = e->fake.ncalls;
	CHECK(xchg_state(e, VU_SET_VRING_ENABLE, 1, 1) == 0, "enable 1");
	att = find_backend(&e->fake, true, last_enable_call);
	CHECK(att >= 0, "not attached after every ring was enabled");
	if (att >= 0)
		CHECK(e->fake.calls[att].a.file.fd == e->disk.fd &&
		      e->fake.calls[att].fd_valid,
		      "attached fd %d, disk is %d",
		      e->fake.calls[att].a.file.fd, e->disk.fd);
	CHECK(e->fake.attached && e->fake.running[0] && e->fake.running[1],
	      "rings not running");
	/* Call eventfd changes (MSI-X masking) keep the rings running. */
	CHECK(xchg_fd(e, VU_SET_VRING_CALL, 0, e->call[1]) == 0, "CALL");
	CHECK(e->fake.attached && count_calls(&e->fake, VHOST_BLK_SET_BACKEND) ==
	      3, "SET_VRING_CALL detached the disk");
}

static void t_one_of_two_queues(struct env *e)
{
	/* A guest with one CPU sets up only queue 0 of 2. */
	handshake(e);
	start(e, 1, true);
	CHECK(e->fake.attached && e->fake.running[0] && !e->fake.running[1],
	      "attached %d running %d %d", e->fake.attached,
	      e->fake.running[0], e->fake.running[1]);
}

static void t_get_vring_base(struct env *e)
{
	struct vhost_vring_state st = { .index = 1 };
	struct vu_hdr h;
	int det, get, i;

	handshake(e);
	start(e, NQ, true);
	e->fake.last_avail[1] = 42;
	i = e->fake.ncalls;
	CHECK(xchg_state(e, VU_GET_VRING_BASE, 1, 0) == 0, "GET_VRING_BASE");
	CHECK(recv_reply(e, &h, &st, sizeof(st)) == 0, "no reply");
	CHECK(h.flags == 0x5, "flags 0x%x", h.flags);
	CHECK(h.request == VU_GET_VRING_BASE && h.size == 8, "header");
	CHECK(st.index == 1 && st.num == 42, "state %u %u", st.index, st.num);
	det = find_backend(&e->fake, false, i);
	get = find_call(&e->fake, VHOST_GET_VRING_BASE, i);
	CHECK(det >= 0 && get >= 0 && det < get,
	      "VHOST_BLK_SET_BACKEND(-1) at %d, VHOST_GET_VRING_BASE at %d",
	      det, get);
	/* The stopped ring is unhooked so that no attach restarts it. */
	i = find_call(&e->fake, VHOST_SET_VRING_KICK, get);
	CHECK(i >= 0 && e->fake.calls[i].a.file.fd == -1, "kick not unbound");
	i = find_call(&e->fake, VHOST_SET_VRING_ADDR, get);
	CHECK(i >= 0 && e->fake.calls[i].a.addr.desc_user_addr == 0,
	      "ring address not cleared");
	/* Ring 0 still runs on its own. */
	CHECK(e->fake.attached && e->fake.running[0] && !e->fake.running[1],
	      "ring 0 not restarted alone");
}

static void t_restart(struct env *e)
{
	handshake(e);
	start(e, NQ, true);
	stop(e, NQ);
	CHECK(!e->fake.attached, "attached after stop");
	/* Guest reboot: the same sequence again, no EBUSY anywhere. */
	log_reset();
	start(e, NQ, true);
	CHECK(e->fake.attached && e->fake.running[0] && e->fake.running[1],
	      "not running after restart");
	CHECK(!log_has("error"), "errors on restart");
}

static void t_reconfigure_running(struct env *e)
{
	int i, det, num;

	handshake(e);
	start(e, NQ, true);
	i = e->fake.ncalls;
	/* The module refuses these on a running ring: detach first. */
	CHECK(xchg_state(e, VU_SET_VRING_NUM, 0, 128) == 0, "SET_VRING_NUM");
	CHECK(xchg_state(e, VU_SET_VRING_BASE, 0, 7) == 0, "SET_VRING_BASE");
	det = find_backend(&e->fake, false, i);
	num = find_call(&e->fake, VHOST_SET_VRING_NUM, i);
	CHECK(det >= 0 && num > det, "detach %d, SET_VRING_NUM %d", det, num);
	CHECK(!log_has("Device or resource busy"), "EBUSY from the kernel");
	CHECK(e->fake.last_avail[0] == 7, "base not set");
	CHECK(e->fake.attached, "not attached again");
}

static void t_mem_table_running(struct env *e)
{
	int i, det, mt, att, a0, a1;

	handshake(e);
	start(e, NQ, true);
	i = e->fake.ncalls;
	CHECK(set_mem_table(e, VU_VERSION) == 0, "SET_MEM_TABLE");
	det = find_backend(&e->fake, false, i);
	mt = find_call(&e->fake, VHOST_SET_MEM_TABLE, i);
	a0 = find_call(&e->fake, VHOST_SET_VRING_ADDR, mt);
	a1 = find_call(&e->fake, VHOST_SET_VRING_ADDR, a0 + 1);
	att = find_backend(&e->fake, true, i);
	CHECK(det >= 0 && det < mt && mt < a0 && a0 < a1 && a1 < att,
	      "order: detach %d mem %d addr %d %d attach %d", det, mt, a0,
	      a1, att);
	if (a0 >= 0) {
		*(uint32_t *)(e->mem + REGION_BYTES + DESC_OFF) = 0xfeedf00d;
		CHECK(*(uint32_t *)(uintptr_t)e->fake.calls[a0].a.addr.desc_user_addr ==
		      0xfeedf00d, "ring 0 not moved to the new mapping");
	}
	CHECK(count_guest_maps() == 1 + 2,
	      "%d mappings of guest memory (the test's, plus 2 new ones)",
	      count_guest_maps());
}

static void t_call_nofd(struct env *e)
{
	uint64_t v = 1 | VU_VRING_NOFD;
	int i;

	handshake(e);
	start(e, NQ, true);
	i = e->fake.ncalls;
	CHECK(xchg(e, VU_SET_VRING_CALL, VU_VERSION, &v, 8, NULL, 0) == 0,
	      "SET_VRING_CALL without fd");
	i = find_call(&e->fake, VHOST_SET_VRING_CALL, i);
	CHECK(i >= 0 && e->fake.calls[i].a.file.fd == -1 &&
	      e->fake.calls[i].a.file.index == 1, "kernel not unbound");
	CHECK(!e->fake.attached, "still attached with no call eventfd");
	CHECK(xchg_fd(e, VU_SET_VRING_CALL, 1, e->call[1]) == 0, "CALL");
	CHECK(e->fake.attached, "not attached again");
}

/*
 * A new call eventfd is signalled once when it is set, as libvhost-user
 * does, so that a frontend that reconnects misses no interrupt; without
 * an fd nothing is signalled.
 */
static void t_call_signalled_when_set(struct env *e)
{
	struct pollfd pfd = { .fd = e->call[0], .events = POLLIN };
	uint64_t v = 0, nofd = 0 | VU_VRING_NOFD;

	/* The handshake sets it once: one signal, drained here. */
	handshake(e);
	CHECK(poll(&pfd, 1, 0) == 1 && read(e->call[0], &v, 8) == 8 && v == 1,
	      "the handshake's call eventfd: %llu", (unsigned long long)v);
	v = 0;
	/* Set again, as a reconnecting frontend does. */
	CHECK(xchg_fd(e, VU_SET_VRING_CALL, 0, e->call[0]) == 0, "CALL");
	CHECK(poll(&pfd, 1, 0) == 1 && read(e->call[0], &v, 8) == 8 && v == 1,
	      "the new call eventfd was not signalled once (%llu)",
	      (unsigned long long)v);
	CHECK(xchg(e, VU_SET_VRING_CALL, VU_VERSION, &nofd, 8, NULL, 0) == 0,
	      "CALL without fd");
	CHECK(poll(&pfd, 1, 0) == 0, "signalled on unbind");
}

static void t_no_protocol_features(struct env *e)
{
	unsigned int q;

	/* An old frontend: rings are enabled from the start. */
	for (q = 0; q < NQ; q++)
		CHECK(xchg_fd(e, VU_SET_VRING_CALL, q, e->call[q]) == 0, "call");
	CHECK(xchg_u64(e, VU_SET_FEATURES, fake_guest_features) == 0,
	      "features");
	CHECK(set_mem_table(e, VU_VERSION) == 0, "mem");
	for (q = 0; q < NQ; q++) {
		struct vhost_vring_addr a = fe_ring_addr(q);

		CHECK(xchg_state(e, VU_SET_VRING_NUM, q, RING_NUM) == 0, "num");
		CHECK(xchg_state(e, VU_SET_VRING_BASE, q, 0) == 0, "base");
		CHECK(xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a),
			   NULL, 0) == 0, "addr");
		CHECK(xchg_fd(e, VU_SET_VRING_KICK, q, e->kick[q]) == 0, "kick");
		CHECK(e->fake.attached && e->fake.running[q],
		      "ring %u not running after its kick", q);
	}
}

static void t_reset_owner(struct env *e)
{
	handshake(e);
	start(e, NQ, true);
	CHECK(xchg(e, VU_RESET_OWNER, VU_VERSION, NULL, 0, NULL, 0) == 0,
	      "RESET_OWNER");
	CHECK(!e->fake.attached, "still attached");
	CHECK(e->fake.desc[0] == 0 && e->fake.desc[1] == 0, "rings not cleared");
}

/*
 * A frontend that sends requests and never reads the replies: once the
 * socket's buffer is full, a reply waits for room no longer than the
 * message deadline (200 ms here), then the connection is closed.  Without
 * a deadline the bridge would wait for ever, wedged.  alarm() guards the
 * test program against that.
 */
static void t_reply_to_a_frontend_that_does_not_read(struct env *e)
{
	struct vu_hdr h = { .request = VU_GET_FEATURES, .flags = VU_VERSION };
	int small = 4096, i, ret = 0;

	CHECK(setsockopt(e->be, SOL_SOCKET, SO_SNDBUF, &small,
			 sizeof(small)) == 0, "SO_SNDBUF");
	alarm(60);
	for (i = 0; i < 100000 && ret == 0; i++) {
		CHECK(vu_send_msg(e->fe, &h, NULL, NULL, 0) == 0, "send");
		ret = vu_session_handle(&e->s);
	}
	alarm(0);
	CHECK(ret == -1, "handle: %d after %d requests", ret, i);
	CHECK(log_has("sending the reply: Connection timed out"),
	      "no clear error");
}

static void t_short_header(struct env *e)
{
	uint8_t b[5] = { 1, 0, 0, 0, 1 };
	int ret;

	send_raw(e->fe, b, sizeof(b));
	shutdown(e->fe, SHUT_WR);
	ret = vu_session_handle(&e->s);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("short header: connection closed after 5 of 12 bytes"),
	      "no clear error");
}

static void t_short_header_stall(struct env *e)
{
	uint8_t b[5] = { 1, 0, 0, 0, 1 };
	int ret;

	send_raw(e->fe, b, sizeof(b));
	ret = vu_session_handle(&e->s);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("short header: 5 of 12 bytes when the message's 200 ms were up"),
	      "no clear error");
}

/*
 * A frontend that drip-feeds a header, a byte every 50 ms: each byte comes
 * well within --msg-timeout (200 ms), the whole header does not.  The
 * deadline is the message's, so it is refused once the 200 ms are up,
 * rather than after 12 gaps (or, a byte per 199 ms, after minutes).
 */
static void t_drip_feed_header(struct env *e)
{
	struct vu_hdr h = { VU_GET_FEATURES, VU_VERSION, 0 };
	const uint8_t *b = (const uint8_t *)&h;
	unsigned int i;
	pid_t pid;
	int ret, st;

	pid = fork();
	if (pid == 0) {
		for (i = 0; i < sizeof(h); i++) {
			if (write(e->fe, &b[i], 1) != 1)
				child_exit(1);
			usleep(50000);
		}
		child_exit(0);
	}
	CHECK(pid > 0, "fork: %s", strerror(errno));
	if (pid < 0)
		return;
	/* The first byte is there before the handler starts, as in poll(). */
	usleep(10000);
	ret = vu_session_handle(&e->s);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("bytes when the message's 200 ms were up"),
	      "no clear error");
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st), "child");
}

static void t_short_payload(struct env *e)
{
	struct vu_hdr h = { VU_SET_FEATURES, VU_VERSION, 8 };
	int ret;

	send_raw(e->fe, &h, sizeof(h));
	send_raw(e->fe, "abc", 3);
	shutdown(e->fe, SHUT_WR);
	ret = vu_session_handle(&e->s);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("short payload"), "no clear error");
}

static void t_bad_size(struct env *e)
{
	uint32_t v = 1;
	int ret = xchg(e, VU_SET_FEATURES, VU_VERSION, &v, 4, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("SET_FEATURES: payload of 4 bytes, expected 8"),
	      "no clear error");
	CHECK(find_call(&e->fake, VHOST_SET_FEATURES, 0) < 0, "reached the kernel");
}

static void t_oversize(struct env *e)
{
	struct vu_hdr h = { VU_SET_MEM_TABLE, VU_VERSION, 1u << 20 };
	int ret;

	send_raw(e->fe, &h, sizeof(h));
	ret = vu_session_handle(&e->s);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("larger than any request"), "no clear error");
}

static void t_unknown_request(struct env *e)
{
	int ret = xchg(e, 999, VU_VERSION | VU_NEED_REPLY, NULL, 0, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("unknown request 999"), "no clear error");
	expect_ack(e, false, 999);
}

static void t_unsupported_request(struct env *e)
{
	uint64_t v = 0;
	int ret = xchg(e, VU_SET_LOG_FD, VU_VERSION, &v, 8, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("SET_LOG_FD (7): not supported"), "no clear error");
}

static void t_bad_version(struct env *e)
{
	int ret = xchg(e, VU_GET_FEATURES, 0x2, NULL, 0, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("unsupported protocol version 2"), "no clear error");
	CHECK(no_reply_pending(e), "answered");
}

static void t_reply_flag_in_request(struct env *e)
{
	int ret = xchg(e, VU_GET_FEATURES, VU_REPLY_FLAGS, NULL, 0, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("reply flag"), "no clear error");
}

static void t_kick_missing_fd(struct env *e)
{
	uint64_t v = 0;
	int ret = xchg(e, VU_SET_VRING_KICK, VU_VERSION, &v, 8, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("SET_VRING_KICK: 0 file descriptors, expected 1"),
	      "no clear error");
	CHECK(find_call(&e->fake, VHOST_SET_VRING_KICK, 0) < 0,
	      "reached the kernel");
}

static void t_kick_nofd_flag(struct env *e)
{
	uint64_t v = VU_VRING_NOFD;
	int ret = xchg(e, VU_SET_VRING_KICK, VU_VERSION, &v, 8, NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("polling"), "no clear error");
}

/* Whether descriptors @a and @b refer to the same open file. */
static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/*
 * The shared framing itself (tools/lib/vhost-user/vu_io.c), on a
 * socketpair of its own: a request with a payload and 2 descriptors, its
 * reply, the reply flag checked both ways, a silent peer, then EOF.
 */
static void t_framing_roundtrip(struct env *e)
{
	struct vu_mem_reg reg = {
		.region = {
			.guest_phys_addr = GPA1, .memory_size = REGION_BYTES,
			.userspace_addr = FE_UVA1, .mmap_offset = 0x3000,
		},
	};
	struct vu_hdr h = {
		.request = VU_ADD_MEM_REG, .flags = VU_VERSION | VU_NEED_REPLY,
		.size = sizeof(reg),
	};
	struct vu_hdr rh = {
		.request = VU_ADD_MEM_REG, .flags = VU_REPLY_FLAGS, .size = 8,
	};
	int fds[2] = { e->memfd, e->kick[1] }, sv[2], ret;
	uint64_t ack = 0x1122334455667788ULL;
	struct vu_msg m;
	char err[256] = "";
	unsigned int i;

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	      "socketpair: %s", strerror(errno));
	CHECK(vu_send_msg(sv[0], &h, &reg, fds, 2) == 0, "send");
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REQUEST, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == 1, "receive: %d (%s)", ret, err);
	CHECK(!memcmp(&m.hdr, &h, sizeof(h)), "header: %u 0x%x %u",
	      m.hdr.request, m.hdr.flags, m.hdr.size);
	CHECK(!memcmp(&m.payload.mem_reg, &reg, sizeof(reg)),
	      "payload: guest 0x%llx size 0x%llx user 0x%llx offset 0x%llx",
	      (unsigned long long)m.payload.mem_reg.region.guest_phys_addr,
	      (unsigned long long)m.payload.mem_reg.region.memory_size,
	      (unsigned long long)m.payload.mem_reg.region.userspace_addr,
	      (unsigned long long)m.payload.mem_reg.region.mmap_offset);
	CHECK(m.nfds == 2, "%u fds", m.nfds);
	for (i = 0; i < m.nfds && i < 2; i++) {
		CHECK(m.fds[i] != fds[i] && same_file(m.fds[i], fds[i]),
		      "fd %u: %d is not a new descriptor of %d's file", i,
		      m.fds[i], fds[i]);
		CHECK(fcntl(m.fds[i], F_GETFD) == FD_CLOEXEC,
		      "fd %u not close-on-exec", i);
	}
	vu_msg_close_fds(&m);
	CHECK(m.nfds == 0, "%u fds after closing", m.nfds);

	/* The reply, back the other way. */
	CHECK(vu_send_msg(sv[1], &rh, &ack, NULL, 0) == 0, "send the reply");
	ret = vu_recv_msg(sv[0], &m, VU_RECV_REPLY, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == 1 && m.hdr.flags == VU_REPLY_FLAGS && m.hdr.size == 8 &&
	      m.payload.u64 == ack && m.nfds == 0,
	      "reply: %d (%s), flags 0x%x size %u value 0x%llx fds %u", ret,
	      err, m.hdr.flags, m.hdr.size, (unsigned long long)m.payload.u64,
	      m.nfds);

	/* A reply where a request is due, and the other way round. */
	CHECK(vu_send_msg(sv[1], &rh, &ack, NULL, 0) == 0, "send");
	ret = vu_recv_msg(sv[0], &m, VU_RECV_REQUEST, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == -1 && strstr(err, "a request with the reply flag"),
	      "a reply taken for a request: %d (%s)", ret, err);
	h.size = 0;
	CHECK(vu_send_msg(sv[0], &h, NULL, NULL, 0) == 0, "send");
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REPLY, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == -1 && strstr(err, "a reply without the reply flag"),
	      "a request taken for a reply: %d (%s)", ret, err);

	/* Nothing within the wait; then EOF between messages. */
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REQUEST, 50, 1000, err,
			  sizeof(err));
	CHECK(ret == -1 && strstr(err, "no message within 50 ms"),
	      "a silent peer: %d (%s)", ret, err);
	shutdown(sv[0], SHUT_WR);
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REQUEST, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == 0 && m.nfds == 0, "EOF: %d (%s)", ret, err);
	close(sv[0]);
	close(sv[1]);
}

/*
 * The framing's descriptor limit: VU_MAX_FDS descriptors come through;
 * one more and the message is refused with every one of them closed, be
 * they sent with its first byte (the kernel drops what does not fit) or
 * spread over its header and payload (the reader closes the surplus).
 */
static void t_framing_fd_limit(struct env *e)
{
	struct vu_hdr h = {
		.request = VU_SET_VRING_CALL, .flags = VU_VERSION, .size = 8,
	};
	int fds[VU_MAX_FDS + 1], sv[2], before, ret, i;
	struct iovec iov;
	uint64_t v = 0;
	struct vu_msg m;
	char err[256] = "";

	(void)e;
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	      "socketpair: %s", strerror(errno));
	for (i = 0; i < VU_MAX_FDS + 1; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	before = count_fds();

	CHECK(vu_send_msg(sv[0], &h, &v, fds, VU_MAX_FDS) == 0, "send");
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REQUEST, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == 1 && m.nfds == VU_MAX_FDS, "%d fds: %d (%s), %u received",
	      VU_MAX_FDS, ret, err, m.nfds);
	for (i = 0; i < (int)m.nfds; i++)
		CHECK(same_file(m.fds[i], fds[i]), "fd %d: another file", i);
	vu_msg_close_fds(&m);
	CHECK(count_fds() == before, "leaked %d fds", count_fds() - before);

	CHECK(vu_send_msg(sv[0], &h, &v, fds, VU_MAX_FDS + 1) == 0, "send");
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REQUEST, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == -1 && strstr(err, "more than 8 file descriptors"),
	      "%d fds: %d (%s)", VU_MAX_FDS + 1, ret, err);
	CHECK(m.nfds == 0, "%u fds left in the message", m.nfds);
	CHECK(count_fds() == before, "leaked %d fds", count_fds() - before);

	/* 5 with the header, 4 with the payload, on a new connection. */
	close(sv[0]);
	close(sv[1]);
	CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	      "socketpair: %s", strerror(errno));
	iov = (struct iovec){ .iov_base = &h, .iov_len = sizeof(h) };
	CHECK(vu_sendv(sv[0], &iov, 1, fds, 5) == 0, "send the header");
	iov = (struct iovec){ .iov_base = &v, .iov_len = sizeof(v) };
	CHECK(vu_sendv(sv[0], &iov, 1, fds + 5, VU_MAX_FDS - 4) == 0,
	      "send the payload");
	ret = vu_recv_msg(sv[1], &m, VU_RECV_REQUEST, 1000, 1000, err,
			  sizeof(err));
	CHECK(ret == -1 && strstr(err, "more than 8 file descriptors"),
	      "5 + %d fds: %d (%s)", VU_MAX_FDS - 4, ret, err);
	CHECK(m.nfds == 0, "%u fds left in the message", m.nfds);
	CHECK(count_fds() == before, "leaked %d fds", count_fds() - before);

	for (i = 0; i < VU_MAX_FDS + 1; i++)
		close(fds[i]);
	close(sv[0]);
	close(sv[1]);
}

static void t_too_many_fds(struct env *e)
{
	int fds[9], i, before, ret;
	uint64_t v = 0;

	for (i = 0; i < 9; i++)
		fds[i] = eventfd(0, EFD_CLOEXEC);
	before = count_fds();
	ret = xchg(e, VU_SET_VRING_CALL, VU_VERSION, &v, 8, fds, 9);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("more than 8 file descriptors"), "no clear error");
	CHECK(count_fds() == before, "leaked %d fds", count_fds() - before);
	for (i = 0; i < 9; i++)
		close(fds[i]);
}

static void t_two_fds_on_kick(struct env *e)
{
	int fds[2] = { e->kick[0], e->kick[1] }, before, ret;
	uint64_t v = 0;

	before = count_fds();
	ret = xchg(e, VU_SET_VRING_KICK, VU_VERSION, &v, 8, fds, 2);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("2 file descriptors, expected 1"), "no clear error");
	CHECK(count_fds() == before, "leaked %d fds", count_fds() - before);
}

static void t_fd_on_plain_request(struct env *e)
{
	int fd = e->kick[0], ret;

	ret = xchg(e, VU_GET_FEATURES, VU_VERSION, NULL, 0, &fd, 1);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("GET_FEATURES: 1 file descriptor, expected 0"),
	      "no clear error");
}

static void t_mem_table_fd_mismatch(struct env *e)
{
	struct vu_memory m;
	int ret;

	fill_mem_table(&m);
	ret = xchg(e, VU_SET_MEM_TABLE, VU_VERSION, &m, 8 + 2 * 32,
		   &e->memfd, 1);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("2 regions but 1 file descriptors"), "no clear error");
	CHECK(count_guest_maps() == 1, "mappings left behind");
}

static void t_mem_table_bad_size(struct env *e)
{
	int fds[2] = { e->memfd, e->memfd }, ret;
	struct vu_memory m;

	fill_mem_table(&m);
	ret = xchg(e, VU_SET_MEM_TABLE, VU_VERSION, &m, 8 + 32, fds, 2);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("payload of 40 bytes for 2 regions, expected 72"),
	      "no clear error");
}

static void t_mem_table_mmap_fails(struct env *e)
{
	int fds[2] = { e->memfd, e->kick[0] }, ret;
	struct vu_memory m;

	fill_mem_table(&m);
	ret = xchg(e, VU_SET_MEM_TABLE, VU_VERSION | VU_NEED_REPLY, &m,
		   8 + 2 * 32, fds, 2);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("mmap of region 1"), "no clear error");
	expect_ack(e, false, VU_SET_MEM_TABLE);
	CHECK(count_guest_maps() == 1, "region 0 left mapped");
}

static void t_vring_index_range(struct env *e)
{
	int ret = xchg_state(e, VU_SET_VRING_NUM, NQ, 256);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("vring index 2 out of range (the device has 2 queues)"),
	      "no clear error");
}

static void t_vring_addr_outside(struct env *e)
{
	struct vhost_vring_addr a = fe_ring_addr(0);
	int ret;

	handshake(e);
	CHECK(set_mem_table(e, VU_VERSION) == 0, "mem");
	CHECK(xchg_state(e, VU_SET_VRING_NUM, 0, RING_NUM) == 0, "num");
	a.used_user_addr = FE_UVA1 + REGION_BYTES - 8;
	ret = xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("used ring at 0x7f00004ffff8 is not inside the memory table"),
	      "no clear error");
}

static void t_vring_addr_before_mem(struct env *e)
{
	struct vhost_vring_addr a = fe_ring_addr(0);
	int ret = xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0);

	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("no SET_MEM_TABLE yet"), "no clear error");
}

static void t_kernel_error(struct env *e)
{
	int ret;

	handshake(e);
	e->fake.fail_req = VHOST_SET_VRING_NUM;
	e->fake.fail_errno = EINVAL;
	ret = xchg(e, VU_SET_VRING_NUM, VU_VERSION | VU_NEED_REPLY,
		   &(struct vhost_vring_state){ .index = 0, .num = 100 }, 8,
		   NULL, 0);
	CHECK(ret == -1, "handle: %d", ret);
	CHECK(log_has("ioctl VHOST_SET_VRING_NUM on /dev/vhost-blk: Invalid argument (errno 22)"),
	      "no clear error");
	expect_ack(e, false, VU_SET_VRING_NUM);
}

static void t_set_config_refused(struct env *e)
{
	struct vu_config_space c = { .offset = 0, .size = 1, .flags = 0 };
	int ret;

	ret = xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0);
	CHECK(ret == 0, "connection closed: %d", ret);
	expect_ack(e, false, VU_SET_CONFIG);
	CHECK(log_has("read-only"), "no warning");
}

/* GET_CONFIG's writeback byte. */
static uint8_t get_wce(struct env *e)
{
	struct vu_config_space req = { .offset = 32, .size = 1 }, rep;
	struct vu_hdr h;

	CHECK(xchg(e, VU_GET_CONFIG, VU_VERSION, &req, 12 + 1, NULL, 0) == 0,
	      "GET_CONFIG");
	CHECK(recv_reply(e, &h, &rep, 12 + 1) == 0, "no reply");
	return rep.region[0];
}

/*
 * The guest's write cache switch: QEMU writes the writeback byte alone
 * (VIRTIO_BLK_F_CONFIG_WCE), which goes to the module; GET_CONFIG reads
 * it back.  A value the module refuses, or the byte written without the
 * feature negotiated, is nacked, and the connection stays.
 */
static void t_set_config_wce(struct env *e)
{
	struct vu_config_space c = { .offset = 32, .size = 1, .flags = 0 };

	handshake(e);
	CHECK(get_u64(e, VU_GET_FEATURES) & F(VIRTIO_BLK_F_CONFIG_WCE),
	      "CONFIG_WCE not offered");
	/* Not negotiated yet. */
	CHECK(xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0) == 0, "SET_CONFIG");
	expect_ack(e, false, VU_SET_CONFIG);
	CHECK(log_has("was not negotiated"), "no warning");
	CHECK(e->fake.wce == 1, "writeback changed");

	start(e, NQ, true);
	CHECK(get_wce(e) == 1, "not writeback at first");
	c.region[0] = 0;
	CHECK(xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0) == 0, "SET_CONFIG");
	expect_ack(e, true, VU_SET_CONFIG);
	CHECK(e->fake.wce == 0, "the module was not told");
	CHECK(get_wce(e) == 0, "GET_CONFIG does not follow");
	CHECK(log_has("writethrough"), "not logged");

	c.region[0] = 2;
	CHECK(xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0) == 0, "SET_CONFIG");
	expect_ack(e, false, VU_SET_CONFIG);
	CHECK(e->fake.wce == 0 && get_wce(e) == 0, "a refused value stuck");

	c.region[0] = 1;
	CHECK(xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0) == 0, "SET_CONFIG");
	expect_ack(e, true, VU_SET_CONFIG);
	CHECK(e->fake.wce == 1 && get_wce(e) == 1, "not writeback again");
}

/*
 * The guest's switch outlives its frontend's connection: when the same
 * frontend process reconnects, the new device starts writethrough, as
 * the guest left it, and GET_CONFIG says so; another process's starts
 * writeback; until the guest switches back.
 */
static void t_set_config_wce_kept(struct env *e)
{
	struct vu_config_space c = { .offset = 32, .size = 1, .flags = 0 };
	struct vu_kept kept = { .wce = -1 };

	e->p.kept = &kept;
	handshake(e);
	start(e, NQ, true);
	CHECK(xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0) == 0, "SET_CONFIG");
	expect_ack(e, true, VU_SET_CONFIG);
	CHECK(kept.wce == 0 && kept.pid == getpid(), "not kept, or not whose");

	/* The same frontend again, a new device: writethrough from the start. */
	vu_session_close(&e->s);
	e->fake.wce = 1;
	log_reset();
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "reopen");
	CHECK(e->fake.wce == 0, "the new device is not writethrough");
	CHECK(log_has("starts writethrough"), "not logged");
	handshake(e);
	CHECK(get_wce(e) == 0, "GET_CONFIG says writeback");

	/* Another process, another VM: the module's default. */
	vu_session_close(&e->s);
	e->fake.wce = 1;
	kept.pid = getpid() + 1;
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "reopen");
	CHECK(e->fake.wce == 1, "another frontend's device is writethrough");
	kept.pid = getpid();

	c.region[0] = 1;
	handshake(e);
	start(e, NQ, true);
	CHECK(xchg(e, VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, &c, 13,
		   NULL, 0) == 0, "SET_CONFIG");
	expect_ack(e, true, VU_SET_CONFIG);
	CHECK(kept.wce == 1 && e->fake.wce == 1, "writeback not kept");
	e->p.kept = NULL;
}

static void t_disconnect_mid_io(struct env *e)
{
	int ret;

	handshake(e);
	start(e, NQ, true);
	CHECK(e->fake.attached, "not attached");
	CHECK(count_guest_maps() == 3, "guest memory not mapped");
	close(e->fe);
	e->fe = -1;
	ret = vu_session_handle(&e->s);
	CHECK(ret == 1, "handle: %d", ret);
	CHECK(log_has("frontend disconnected"), "no message");
	vu_session_close(&e->s);
	e->open = false;
	CHECK(e->fake.closes == 1 && !e->fake.open,
	      "/dev/vhost-blk not closed (closes %u)", e->fake.closes);
	CHECK(count_guest_maps() == 1, "guest memory still mapped");
}

static void t_reconnect(struct env *e)
{
	int sv[2];

	handshake(e);
	start(e, NQ, true);
	close(e->fe);
	CHECK(vu_session_handle(&e->s) == 1, "EOF");
	vu_session_close(&e->s);
	close(e->be);

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
	      "socketpair");
	e->fe = sv[0];
	e->be = sv[1];
	log_reset();
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "reopen");
	CHECK(e->fake.opens == 2 && e->fake.open, "not reopened");
	handshake(e);
	start(e, NQ, true);
	CHECK(e->fake.attached && e->fake.running[0] && e->fake.running[1],
	      "not running after reconnect");
	CHECK(!log_has("error"), "errors after reconnect");
}

static void t_read_only(struct env *e)
{
	uint64_t f;

	f = get_u64(e, VU_GET_FEATURES);
	CHECK(f & F(VIRTIO_BLK_F_RO), "RO not offered: 0x%llx",
	      (unsigned long long)f);
	/* A guest's: logging is the VMM's, and needs a log. */
	f &= ~F(VHOST_F_LOG_ALL);
	CHECK(xchg_u64(e, VU_SET_FEATURES, f) == 0, "SET_FEATURES with RO");
}

/*
 * What the bridge refuses as a backend, each with the path and reason in
 * its message: a path that does not exist, a directory, a FIFO, a file
 * shorter than one block.  A file that is not a whole number of blocks
 * is served, with a warning.
 */
static void t_disk_refused(struct env *e)
{
	char dir[] = "/tmp/vbb-test-dir-XXXXXX";
	char path[64];
	struct disk d;
	int fd;

	(void)e;
	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/none", dir);
	CHECK(disk_open(&d, path, false, true) == -ENOENT &&
	      log_has("cannot open backend"), "a missing path");
	CHECK(disk_open(&d, dir, true, true) < 0 &&
	      log_has("is neither a regular file nor a block device"),
	      "a directory");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK(mkfifo(path, 0600) == 0, "mkfifo");
	/* O_RDWR on a FIFO does not block. */
	CHECK(disk_open(&d, path, false, true) < 0 &&
	      log_has("is neither a regular file nor a block device"),
	      "a FIFO");
	unlink(path);
	snprintf(path, sizeof(path), "%s/tiny", dir);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 100) == 0, "tiny file");
	CHECK(disk_open(&d, path, false, true) == -EINVAL &&
	      log_has("is smaller than one block"), "a 100-byte file");
	CHECK(ftruncate(fd, 4096 + 100) == 0, "ragged file");
	log_reset();
	if (disk_open(&d, path, false, true) == 0) {
		CHECK(log_has("size 4196"), "no warning of the ragged tail");
		disk_close(&d);
	} else {
		/* No O_DIRECT where /tmp is (tmpfs before 6.6). */
		CHECK(log_has("with O_DIRECT"), "a ragged file refused: %s",
		      log_text());
	}
	close(fd);
	unlink(path);
	rmdir(dir);
}

/*
 * /dev/vhost-blk refusing the bridge's set-up: no module (ENOENT, with a
 * hint), too few queues (SET_NUM_QUEUES or GET_VRING_STATS: EINVAL),
 * any other error of theirs, of SET_SERIAL or of the config probe.  Each
 * fails the session with the ioctl named, and leaves the device closed.
 */
static void t_open_refused(struct env *e)
{
	static const struct {
		unsigned long req;
		int err;
		const char *says;
	} cases[] = {
		{ VHOST_BLK_SET_NUM_QUEUES, EINVAL, "serves fewer than 2 queues" },
		{ VHOST_BLK_SET_NUM_QUEUES, EIO, "ioctl VHOST_BLK_SET_NUM_QUEUES" },
		{ VHOST_BLK_GET_VRING_STATS, EINVAL, "serves fewer than 2 queues" },
		{ VHOST_BLK_GET_VRING_STATS, EIO, "ioctl VHOST_BLK_GET_VRING_STATS" },
		{ VHOST_BLK_SET_SERIAL, EIO, "ioctl VHOST_BLK_SET_SERIAL" },
		{ VHOST_BLK_GET_CONFIG, EIO, "ioctl VHOST_BLK_GET_CONFIG" },
		{ VHOST_BLK_SET_BACKEND, EIO, "cannot attach backend" },
		{ VHOST_GET_FEATURES, EIO, "ioctl VHOST_GET_FEATURES" },
	};
	unsigned int i;

	vu_session_close(&e->s);
	e->open = false;
	e->p.kdev.serial = "disk-1";
	e->fake.open_errno = ENOENT;
	CHECK(vu_session_open(&e->s, &e->p, e->be) == -ENOENT &&
	      log_has("(is vhost_blk.ko loaded?)"), "no module");
	e->fake.open_errno = 0;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		log_reset();
		e->fake.fail_req = cases[i].req;
		e->fake.fail_errno = cases[i].err;
		CHECK(vu_session_open(&e->s, &e->p, e->be) == -cases[i].err &&
		      log_has(cases[i].says), "case %u: %s", i, cases[i].says);
		CHECK(!e->fake.open, "case %u: the device stayed open", i);
	}
	e->fake.fail_req = 0;
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "open at last");
	e->open = true;
}

static void t_open_params(struct env *e)
{
	int i, n = 0, p = 0;

	vu_session_close(&e->s);
	e->fake.ncalls = 0;
	e->p.kdev.poll_us = 50;
	e->p.kdev.poll_adaptive = true;
	e->p.kdev.serial = "disk-42";
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "open");
	CHECK(e->fake.calls[0].req == VHOST_BLK_SET_NUM_QUEUES &&
	      e->fake.calls[1].req == VHOST_SET_FORK_FROM_OWNER &&
	      e->fake.calls[2].req == VHOST_SET_OWNER &&
	      e->fake.calls[3].req == VHOST_BLK_CHARGE_PEER,
	      "not SET_NUM_QUEUES, FORK_FROM_OWNER, SET_OWNER, CHARGE_PEER");
	for (i = 0; i < (int)e->fake.ncalls; i++) {
		struct fake_call *c = &e->fake.calls[i];

		if (c->req == VHOST_SET_VRING_BUSYLOOP_TIMEOUT) {
			CHECK(c->a.state.index == (unsigned int)n &&
			      c->a.state.num == 50, "busyloop %u %u",
			      c->a.state.index, c->a.state.num);
			n++;
		}
		p += c->req == VHOST_BLK_SET_VRING_POLL;
	}
	CHECK(n == NQ, "%d busyloop timeouts", n);
	CHECK(p == NQ, "%d adaptive polls", p);
	i = find_call(&e->fake, VHOST_BLK_SET_SERIAL, 0);
	CHECK(i >= 0 && !memcmp(e->fake.calls[i].a.serial,
				"disk-42\0\0\0\0\0\0\0\0\0\0\0\0\0", 20),
	      "serial");
	/* The probe leaves the disk detached. */
	CHECK(!e->fake.attached, "attached after open");
}

/* Reopen the session with @charge; the result of vu_session_open(). */
static int reopen_charge(struct env *e, enum kdev_charge charge)
{
	int ret;

	vu_session_close(&e->s);
	e->open = false;
	e->fake.ncalls = 0;
	log_reset();
	e->p.kdev.charge = charge;
	ret = vu_session_open(&e->s, &e->p, e->be);
	e->open = !ret;
	return ret;
}

/* Whether the worker kind @mode was asked for, before SET_OWNER. */
static bool workers_asked_before_owner(const struct env *e, uint64_t mode)
{
	int i = find_call(&e->fake, VHOST_SET_FORK_FROM_OWNER, 0);

	return i >= 0 && e->fake.calls[i].a.u64 == mode &&
	       i < find_call(&e->fake, VHOST_SET_OWNER, 0);
}

/*
 * The guest is charged to the frontend: kthread workers asked for before
 * SET_OWNER, then CHARGE_PEER with the frontend's connection.  A kernel
 * that cannot is a warning by default and fatal with --charge frontend.
 */
static void t_charge_frontend(struct env *e)
{
	int i;

	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "open");
	CHECK(workers_asked_before_owner(e, VHOST_FORK_OWNER_KTHREAD),
	      "no kthread workers before SET_OWNER");
	i = find_call(&e->fake, VHOST_BLK_CHARGE_PEER, 0);
	CHECK(i >= 0 && e->fake.calls[i].a.file.fd == e->be &&
	      e->fake.calls[i].ret == 0, "CHARGE_PEER not with the connection");
	CHECK(i < find_call(&e->fake, VHOST_BLK_SET_BACKEND, 0),
	      "CHARGE_PEER after the backend");
	CHECK(log_has("charged to the frontend's cgroups"), "not said");

	/* A kernel before VHOST_SET_FORK_FROM_OWNER: the bridge pays. */
	e->fake.has_fork_owner = false;
	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "open without");
	CHECK(count_calls(&e->fake, VHOST_BLK_CHARGE_PEER) == 0,
	      "CHARGE_PEER without kthread workers");
	CHECK(log_has("ioctl VHOST_SET_FORK_FROM_OWNER on /dev/vhost-blk: Inappropriate ioctl for device (errno 25): the guest's I/O, memory and CPU time are charged to the bridge's cgroups"),
	      "no clear warning");
	CHECK(reopen_charge(e, KDEV_CHARGE_FRONTEND) == -ENOTTY,
	      "--charge frontend opened without");
	CHECK(log_has("(--charge frontend)") && !e->fake.open,
	      "no clear error, or the device stayed open");
	e->fake.has_fork_owner = true;

	/* A module before VHOST_BLK_CHARGE_PEER. */
	e->fake.has_charge_peer = false;
	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "open without");
	CHECK(log_has("ioctl VHOST_BLK_CHARGE_PEER on /dev/vhost-blk: Inappropriate ioctl"),
	      "no clear warning");
	CHECK(reopen_charge(e, KDEV_CHARGE_FRONTEND) == -ENOTTY,
	      "--charge frontend opened without");
	e->fake.has_charge_peer = true;

	/* --charge bridge: neither. */
	CHECK(reopen_charge(e, KDEV_CHARGE_BRIDGE) == 0, "open");
	CHECK(count_calls(&e->fake, VHOST_SET_FORK_FROM_OWNER) == 0 &&
	      count_calls(&e->fake, VHOST_BLK_CHARGE_PEER) == 0,
	      "--charge bridge charged the frontend");
	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "reopen");
}

/*
 * --worker-per-queue: a worker of its own for each queue after the
 * first, attached to it, after SET_OWNER and with vhost_task workers;
 * --poll-completions sets VHOST_BLK_POLL_COMPLETIONS on every queue.
 */
static void t_worker_per_queue(struct env *e)
{
	int i, q, n = 0, attached = 0, polls = 0;

	e->p.kdev.worker_per_queue = true;
	e->p.kdev.poll_us = 20;
	e->p.kdev.poll_completions = true;
	CHECK(reopen_charge(e, KDEV_CHARGE_BRIDGE) == 0, "open");
	CHECK(workers_asked_before_owner(e, VHOST_FORK_OWNER_TASK),
	      "vhost_task workers not asked for before SET_OWNER");
	i = find_call(&e->fake, VHOST_SET_OWNER, 0);
	for (q = i; q >= 0 && q < (int)e->fake.ncalls; q++) {
		const struct fake_call *c = &e->fake.calls[q];

		if (c->req == VHOST_NEW_WORKER && !c->ret)
			n++;
		if (c->req == VHOST_ATTACH_VRING_WORKER && !c->ret &&
		    c->a.state.index == (unsigned int)(attached + 1) &&
		    c->a.state.num == (unsigned int)(attached + 1))
			attached++;
		if (c->req == VHOST_BLK_SET_VRING_POLL &&
		    c->a.state.num == VHOST_BLK_POLL_COMPLETIONS)
			polls++;
	}
	CHECK(i >= 0 && find_call(&e->fake, VHOST_NEW_WORKER, 0) > i,
	      "NEW_WORKER before SET_OWNER");
	CHECK(n == NQ - 1 && attached == NQ - 1,
	      "%d workers made, %d attached for %d queues", n, attached, NQ);
	CHECK(polls == NQ, "%d queues poll for completions", polls);

	/* A kernel without the worker choice: its default, vhost_tasks. */
	e->fake.has_fork_owner = false;
	CHECK(reopen_charge(e, KDEV_CHARGE_BRIDGE) == 0,
	      "open without VHOST_SET_FORK_FROM_OWNER");
	CHECK(count_calls(&e->fake, VHOST_ATTACH_VRING_WORKER) == NQ - 1,
	      "queues without a worker");
	e->fake.has_fork_owner = true;

	/* A kernel that refuses: the frontend is refused, told why. */
	e->fake.fail_req = VHOST_ATTACH_VRING_WORKER;
	e->fake.fail_errno = ENOTTY;
	CHECK(reopen_charge(e, KDEV_CHARGE_BRIDGE) == -ENOTTY, "opened");
	CHECK(log_has("ioctl VHOST_ATTACH_VRING_WORKER on /dev/vhost-blk") &&
	      !e->fake.open, "no clear error, or the device stayed open");
	e->fake.fail_req = 0;
	e->p.kdev.worker_per_queue = false;
	e->p.kdev.poll_us = 0;
	e->p.kdev.poll_completions = false;
	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "reopen");
}

/*
 * --pin-memory asks for VHOST_BLK_SET_MEM_PINNED before the frontend's
 * first memory table, and a table the kernel cannot pin (ENOMEM) fails
 * SET_MEM_TABLE with the reason told: RLIMIT_MEMLOCK.
 */
static void t_pin_memory(struct env *e)
{
	int i, ret;

	e->p.kdev.pin_memory = true;
	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "open");
	i = find_call(&e->fake, VHOST_BLK_SET_MEM_PINNED, 0);
	CHECK(i >= 0 && e->fake.calls[i].a.state.num == 1 &&
	      !e->fake.calls[i].ret, "VHOST_BLK_SET_MEM_PINNED 1 not asked");
	CHECK(find_call(&e->fake, VHOST_SET_MEM_TABLE, 0) < 0,
	      "a memory table before the pinning was asked");
	e->fake.fail_req = VHOST_SET_MEM_TABLE;
	e->fake.fail_errno = ENOMEM;
	ret = set_mem_table(e, VU_VERSION | VU_NEED_REPLY);
	CHECK(ret == -1, "handle: %d", ret);
	expect_ack(e, false, VU_SET_MEM_TABLE);
	CHECK(log_has("RLIMIT_MEMLOCK"), "no clear error");
	e->fake.fail_req = 0;
	e->p.kdev.pin_memory = false;
	CHECK(reopen_charge(e, KDEV_CHARGE_AUTO) == 0, "reopen");
	CHECK(find_call(&e->fake, VHOST_BLK_SET_MEM_PINNED, 0) < 0,
	      "pinned without --pin-memory");
}

static void t_too_many_queues(struct env *e)
{
	vu_session_close(&e->s);
	e->fake.nvqs = 1;
	CHECK(vu_session_open(&e->s, &e->p, e->be) != 0, "opened");
	CHECK(log_has("fewer than 2 queues"), "no clear error");
	CHECK(!e->fake.open, "device left open");
	e->fake.nvqs = 16;
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "reopen");
}

static void t_open_fails(struct env *e)
{
	vu_session_close(&e->s);
	e->fake.open_errno = ENOENT;
	CHECK(vu_session_open(&e->s, &e->p, e->be) != 0, "opened");
	CHECK(log_has("cannot open /dev/vhost-blk: No such file or directory (is vhost_blk.ko loaded?)"),
	      "no clear error");
	e->fake.open_errno = 0;
	CHECK(vu_session_open(&e->s, &e->p, e->be) == 0, "reopen");
}

static void t_stats(struct env *e)
{
	FILE *f = tmpfile();
	char buf[4096];
	size_t n;

	CHECK(kdev_print_stats(&e->s.kdev, f, "test") == 0, "print");
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	CHECK(strstr(buf, "stats test queue=0 in=10 out=20") != NULL,
	      "queue 0: %s", buf);
	CHECK(strstr(buf, "stats test queue=1 in=11 out=21") != NULL,
	      "queue 1: %s", buf);
}

/*
 * Random messages after a normal start: whatever they do, the session
 * must not crash, must answer with flags 0x5 if at all, and must not leak.
 */
/* ------------------------------------------------------ live migration */

/* One bit a page: the test's guest memory ends at GPA1 + 1 MiB, 5 GiB. */
#define LOG_BYTES	(160u << 10)

/* A dirty log memfd whose first word, after @offset, holds @mark. */
static int make_log(uint64_t offset, uint32_t mark)
{
	int fd = memfd_create("vbb-test-log", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, offset + LOG_BYTES) ||
	    pwrite(fd, &mark, sizeof(mark), offset) != sizeof(mark))
		return -1;
	return fd;
}

/* SET_LOG_BASE as QEMU 7.2 sends it with LOG_SHMFD, and its reply. */
static int set_log_base(struct env *e, int fd, uint64_t size, uint64_t offset)
{
	struct vu_log log = { .mmap_size = size, .mmap_offset = offset };
	struct vu_hdr h;
	uint64_t v = ~0ULL;
	int ret;

	ret = xchg(e, VU_SET_LOG_BASE, VU_VERSION, &log, sizeof(log), &fd,
		   fd < 0 ? 0 : 1);
	if (ret)
		return ret;
	CHECK(recv_reply(e, &h, &v, sizeof(v)) == 0, "SET_LOG_BASE: no reply");
	CHECK(h.request == VU_SET_LOG_BASE && h.flags == 0x5 && h.size == 8 &&
	      v == 0, "SET_LOG_BASE reply: request %u flags 0x%x size %u value %llu",
	      h.request, h.flags, h.size, (unsigned long long)v);
	return 0;
}

/* The log the kernel was last given holds @mark: it is our mapping. */
static void expect_kernel_log(struct env *e, uint32_t mark)
{
	int i = -1, j;

	for (j = find_call(&e->fake, VHOST_SET_LOG_BASE, 0); j >= 0;
	     j = find_call(&e->fake, VHOST_SET_LOG_BASE, j + 1))
		i = j;
	CHECK(i >= 0, "no VHOST_SET_LOG_BASE");
	if (i < 0)
		return;
	CHECK(*(uint32_t *)(uintptr_t)e->fake.calls[i].a.u64 == mark,
	      "the kernel's log is not the frontend's");
}

/*
 * QEMU's vhost_migration_log(): SET_LOG_BASE with the log's fd, then
 * SET_FEATURES with VHOST_F_LOG_ALL, then SET_VRING_ADDR with
 * VHOST_VRING_F_LOG for every ring; all of it reaches the kernel.
 */
static void t_migration_log(struct env *e)
{
	int fd = make_log(0x2000, 0x10c10c), i, ret;
	struct vhost_vring_addr a;
	unsigned int q;

	CHECK(fd >= 0, "log memfd");
	handshake(e);
	start(e, NQ, true);
	i = find_call(&e->fake, VHOST_SET_FEATURES, 0);
	CHECK(i >= 0 && !(e->fake.calls[i].a.u64 & F(VHOST_F_LOG_ALL)),
	      "logging on from the start");
	ret = set_log_base(e, fd, LOG_BYTES, 0x2000);
	CHECK(ret == 0, "SET_LOG_BASE: %d", ret);
	close(fd);
	expect_kernel_log(e, 0x10c10c);
	CHECK(count_log_maps() == 1, "log not mapped once");

	i = e->fake.ncalls;
	ret = xchg_u64(e, VU_SET_FEATURES, fake_features |
		       F(VU_F_PROTOCOL_FEATURES));
	CHECK(ret == 0, "SET_FEATURES with LOG_ALL: %d", ret);
	i = find_call(&e->fake, VHOST_SET_FEATURES, i);
	CHECK(i >= 0 && e->fake.calls[i].a.u64 == fake_features,
	      "the kernel did not get VHOST_F_LOG_ALL");
	for (q = 0; q < NQ; q++) {
		a = fe_ring_addr(q);
		a.flags = 1u << VHOST_VRING_F_LOG;
		i = e->fake.ncalls;
		ret = xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a),
			   NULL, 0);
		CHECK(ret == 0, "SET_VRING_ADDR %u with LOG: %d", q, ret);
		i = find_call(&e->fake, VHOST_SET_VRING_ADDR, i);
		CHECK(i >= 0, "no VHOST_SET_VRING_ADDR for %u", q);
		if (i < 0)
			continue;
		CHECK(e->fake.calls[i].a.addr.flags == 1u << VHOST_VRING_F_LOG &&
		      e->fake.calls[i].a.addr.log_guest_addr == a.log_guest_addr,
		      "ring %u: flags 0x%x log 0x%llx", q,
		      e->fake.calls[i].a.addr.flags,
		      (unsigned long long)e->fake.calls[i].a.addr.log_guest_addr);
	}
	CHECK(e->fake.attached && e->fake.running[0] && e->fake.running[1],
	      "not running while logging");
	CHECK(!log_has("error"), "errors while logging");
}

/* A new log (guest memory grew) replaces the old one; none outlives us. */
static void t_migration_log_replaced(struct env *e)
{
	int fd1 = make_log(0, 0xaaaa), fd2 = make_log(0x1000, 0xbbbb);

	CHECK(fd1 >= 0 && fd2 >= 0, "log memfds");
	handshake(e);
	start(e, NQ, true);
	CHECK(set_log_base(e, fd1, LOG_BYTES, 0) == 0, "first log");
	CHECK(set_log_base(e, fd2, LOG_BYTES, 0x1000) == 0, "second log");
	close(fd1);
	close(fd2);
	expect_kernel_log(e, 0xbbbb);
	CHECK(count_log_maps() == 1, "%d log mappings", count_log_maps());
	close(e->fe);
	e->fe = -1;
	CHECK(vu_session_handle(&e->s) == 1, "EOF");
	vu_session_close(&e->s);
	e->open = false;
	CHECK(count_log_maps() == 0, "the log is still mapped after the session");
}

/* A new session on a fresh environment, started as QEMU starts it. */
static void fresh_start(struct env *e)
{
	env_fini(e);
	CHECK(env_init_opts(e, false, true) == 0, "setup");
	handshake(e);
	start(e, NQ, true);
}

/* What a dirty log must not be; each closes the connection, leaks nothing. */
static void t_migration_log_bad(struct env *e)
{
	struct vu_log log = { .mmap_size = LOG_BYTES };
	struct vhost_vring_addr a = fe_ring_addr(0);
	int fd = make_log(0, 1), ret, null = open("/dev/null", O_RDONLY);

	CHECK(fd >= 0 && null >= 0, "fds");
	/* Before LOG_SHMFD was negotiated. */
	get_u64(e, VU_GET_FEATURES);
	ret = set_log_base(e, fd, LOG_BYTES, 0);
	CHECK(ret == -1 && log_has("LOG_SHMFD"), "without LOG_SHMFD: %d", ret);

	fresh_start(e);
	ret = xchg(e, VU_SET_LOG_BASE, VU_VERSION, &log, sizeof(log), NULL, 0);
	CHECK(ret == -1, "no fd: %d", ret);

	fresh_start(e);
	ret = set_log_base(e, fd, ~0ULL - 100, 0x1000);
	CHECK(ret == -1 && log_has("bad log"), "size wrapping around: %d", ret);

	fresh_start(e);
	ret = set_log_base(e, null, LOG_BYTES, 0);
	CHECK(ret == -1 && log_has("mmap of the log"), "unmappable fd: %d", ret);

	fresh_start(e);
	a.flags = 1u << VHOST_VRING_F_LOG;
	ret = xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0);
	CHECK(ret == -1 && log_has("without SET_LOG_BASE"),
	      "VHOST_VRING_F_LOG without a log: %d", ret);
	CHECK(count_log_maps() == 0, "a refused log stayed mapped");
	close(fd);
	close(null);
}

/* No VHOST_SET_VRING_ADDR with VHOST_VRING_F_LOG reached the kernel. */
static bool kernel_logs_no_ring(struct env *e)
{
	int i;

	for (i = find_call(&e->fake, VHOST_SET_VRING_ADDR, 0); i >= 0;
	     i = find_call(&e->fake, VHOST_SET_VRING_ADDR, i + 1))
		if (e->fake.calls[i].a.addr.flags & (1u << VHOST_VRING_F_LOG))
			return false;
	return true;
}

/*
 * The vhost core sets dirty bits at the log's address + page / 8 with
 * nothing but access_ok(): a log shorter than what it logs would have the
 * kernel set bits anywhere in the bridge.  So the log must cover the
 * memory table while VHOST_F_LOG_ALL is on, and every logged used ring,
 * whichever of SET_LOG_BASE, SET_FEATURES, SET_VRING_ADDR, SET_VRING_NUM
 * or ADD_MEM_REG would break that; what would is refused and never
 * reaches the kernel.
 */
static void t_migration_log_bounded(struct env *e)
{
	uint64_t logging = fake_guest_features | F(VHOST_F_LOG_ALL) |
			   F(VU_F_PROTOCOL_FEATURES);
	int fd = make_log(0, 1), ret, i;
	struct vhost_vring_addr a;

	CHECK(fd >= 0, "log memfd");
	/* A ring logged at 2^40 with a 4 KiB log (it covers 128 MiB). */
	fresh_start(e);
	CHECK(set_log_base(e, fd, 4096, 0) == 0, "a 4 KiB log, nothing logged");
	a = fe_ring_addr(0);
	a.flags = 1u << VHOST_VRING_F_LOG;
	a.log_guest_addr = 1ULL << 40;
	ret = xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0);
	CHECK(ret == -1 && log_has("does not cover the used ring of vring 0"),
	      "ring logged at 2^40 with a 4 KiB log: %d", ret);
	CHECK(kernel_logs_no_ring(e), "the kernel got the ring's log address");

	/* A 1-byte log (32 KiB of guest memory) for the whole table. */
	fresh_start(e);
	CHECK(set_log_base(e, fd, 1, 0) == 0, "a 1-byte log, nothing logged");
	i = e->fake.ncalls;
	ret = xchg_u64(e, VU_SET_FEATURES, logging);
	CHECK(ret == -1 && log_has("does not cover guest memory 0x0 + 0x100000"),
	      "LOG_ALL with a 1-byte log: %d", ret);
	CHECK(find_call(&e->fake, VHOST_SET_FEATURES, i) < 0,
	      "the kernel got LOG_ALL");

	/* LOG_ALL with no log at all. */
	fresh_start(e);
	ret = xchg_u64(e, VU_SET_FEATURES, logging);
	CHECK(ret == -1 && log_has("VHOST_F_LOG_ALL without SET_LOG_BASE"),
	      "LOG_ALL without a log: %d", ret);

	/* Logging on, then a log that no longer covers the table. */
	fresh_start(e);
	CHECK(set_log_base(e, fd, LOG_BYTES, 0) == 0, "a log for 5 GiB");
	CHECK(xchg_u64(e, VU_SET_FEATURES, logging) == 0, "LOG_ALL");
	ret = set_log_base(e, fd, 4096, 0);
	CHECK(ret == -1 && log_has("does not cover guest memory 0x100000000"),
	      "a shorter log while logging: %d", ret);
	expect_kernel_log(e, 1);

	/* Logging on: a logged ring made longer than its log covers. */
	fresh_start(e);
	CHECK(set_log_base(e, fd, LOG_BYTES, 0) == 0, "a log for 5 GiB");
	a = fe_ring_addr(0);
	a.flags = 1u << VHOST_VRING_F_LOG;
	/* Its used ring (RING_NUM entries) ends where the log does. */
	a.log_guest_addr = (LOG_BYTES * 8ULL << 12) - (6 + 8 * RING_NUM);
	CHECK(xchg(e, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0) == 0,
	      "a used ring logged up to the end of the log");
	ret = xchg_state(e, VU_SET_VRING_NUM, 0, 2 * RING_NUM);
	CHECK(ret == -1 && log_has("does not cover the used ring of vring 0"),
	      "SET_VRING_NUM past the log: %d", ret);

	/* Logging on, then a region added past the log (8 bytes: 256 KiB). */
	env_fini(e);
	CHECK(env_init_opts(e, false, true) == 0, "setup");
	handshake(e);
	CHECK(add_region(e, VU_ADD_MEM_REG, 0) == 0, "ADD_MEM_REG at 0");
	CHECK(set_log_base(e, fd, 8, 0) == 0, "an 8-byte log");
	CHECK(xchg_u64(e, VU_SET_FEATURES, logging) == 0,
	      "LOG_ALL, the table covered");
	i = e->fake.ncalls;
	ret = add_region(e, VU_ADD_MEM_REG, 1);
	CHECK(ret == -1 && log_has("does not cover guest memory 0x100000"),
	      "ADD_MEM_REG past the log: %d", ret);
	CHECK(find_call(&e->fake, VHOST_SET_MEM_TABLE, i) < 0,
	      "the kernel got the region past the log");
	close(fd);
}


/* ------------------------------------------------ the listening socket */

#define T_SOCK	"/tmp/vbb-test-listen.sock"

/* A listening unix socket of the test's own, as a caller would pass it. */
static int t_listener(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	/* Linux names it in the abstract namespace: nothing to unlink. */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sa_family_t)) ||
	    listen(fd, 1)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* --socket PATH: 0600 by default; --socket-mode and --socket-group. */
static void t_listen_path_mode_group(struct env *e)
{
	struct vbb_listen_opts o = { .path = T_SOCK, .fd = -1 };
	enum vbb_listen_source src;
	struct stat st;
	int fd;

	(void)e;
	fd = vbb_listen(&o, &src);
	CHECK(fd >= 0 && src == VBB_LISTEN_PATH, "listen: %d", fd);
	CHECK(!stat(T_SOCK, &st) && S_ISSOCK(st.st_mode) &&
	      (st.st_mode & 0777) == 0600, "default mode 0%o",
	      st.st_mode & 0777);
	if (fd >= 0)
		close(fd);
	/* A stale socket is replaced, with the mode and group asked for. */
	o.has_mode = true;
	o.mode = 0660;
	o.has_gid = true;
	o.gid = 4242;
	fd = vbb_listen(&o, &src);
	CHECK(fd >= 0, "listen again: %d", fd);
	CHECK(!stat(T_SOCK, &st) && (st.st_mode & 0777) == 0660 &&
	      st.st_gid == 4242, "mode 0%o gid %u", st.st_mode & 0777,
	      (unsigned int)st.st_gid);
	/* One that is still served is not stolen. */
	CHECK(vbb_listen(&o, &src) == -1 && log_has("is in use by another process"),
	      "a served socket was replaced");
	if (fd >= 0)
		close(fd);
	unlink(T_SOCK);
}

/* --socket PATH that cannot be ours: too long, or not a socket. */
static void t_listen_path_refused(struct env *e)
{
	struct vbb_listen_opts o = { .fd = -1 };
	enum vbb_listen_source src;
	char longpath[200];
	char file[] = "/tmp/vbb-test-notsock-XXXXXX";
	int fd;

	(void)e;
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = 0;
	o.path = longpath;
	CHECK(vbb_listen(&o, &src) == -1 && log_has("is longer than"),
	      "a path longer than sun_path");
	fd = mkstemp(file);
	CHECK(fd >= 0, "mkstemp");
	o.path = file;
	CHECK(vbb_listen(&o, &src) == -1 &&
	      log_has("exists and is not a socket"), "a regular file");
	CHECK(access(file, F_OK) == 0, "the file was removed");
	unlink(file);
	close(fd);
	o.path = "/nonexistent-dir/vbb.sock";
	CHECK(vbb_listen(&o, &src) == -1 && log_has("bind /nonexistent-dir"),
	      "a directory that does not exist");
}

/*
 * --socket-mode, --socket-group and --allow-uid: octal modes up to 0777,
 * groups and users by number or name, at most VBB_MAX_ALLOW_UIDS users;
 * anything else refused with the option named.
 */
static void t_option_parsers(struct env *e)
{
	static const char *const bad_modes[] = { "0778", "01000", "-1", "",
						 "rw", "0660x" };
	uid_t allow[VBB_MAX_ALLOW_UIDS];
	unsigned int i;
	size_t n = 0;
	mode_t mode;
	gid_t gid;

	(void)e;
	CHECK(vbb_parse_mode("--socket-mode", "0660", &mode) == 0 &&
	      mode == 0660, "0660");
	CHECK(vbb_parse_mode("--socket-mode", "777", &mode) == 0 &&
	      mode == 0777, "777");
	for (i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
		log_reset();
		CHECK(vbb_parse_mode("--socket-mode", bad_modes[i], &mode) == -1 &&
		      log_has("--socket-mode: '") &&
		      log_has("is not an octal mode"), "mode '%s'", bad_modes[i]);
	}
	CHECK(vbb_parse_group("--socket-group", "4242", &gid) == 0 &&
	      gid == 4242, "group by number");
	CHECK(vbb_parse_group("--socket-group", "root", &gid) == 0 && gid == 0,
	      "group by name");
	CHECK(vbb_parse_group("--socket-group", "vbb-no-such-group", &gid) == -1 &&
	      log_has("--socket-group: no group 'vbb-no-such-group'"),
	      "an unknown group");
	CHECK(vbb_parse_group("--socket-group", "-5", &gid) == -1,
	      "a negative group");
	CHECK(vbb_parse_uid("--allow-uid", "root", allow, &n) == 0 && n == 1 &&
	      allow[0] == 0, "user by name");
	CHECK(vbb_parse_uid("--allow-uid", "vbb-no-such-user", allow, &n) == -1 &&
	      n == 1 && log_has("--allow-uid: no user 'vbb-no-such-user'"),
	      "an unknown user");
	while (n < VBB_MAX_ALLOW_UIDS)
		CHECK(vbb_parse_uid("--allow-uid", "4242", allow, &n) == 0,
		      "user %zu by number", n);
	CHECK(vbb_parse_uid("--allow-uid", "4243", allow, &n) == -1 &&
	      n == VBB_MAX_ALLOW_UIDS && log_has("at most 32 users"),
	      "one user too many");
}

/* --socket-fd N: a listening unix stream socket, nothing else. */
static void t_listen_socket_fd(struct env *e)
{
	struct vbb_listen_opts o = { .fd = -1 };
	enum vbb_listen_source src;
	int l = t_listener();

	CHECK(l >= 0, "listener: %s", strerror(errno));
	if (l < 0)
		return;
	o.fd = l;
	CHECK(vbb_listen(&o, &src) == l && src == VBB_LISTEN_FD,
	      "the inherited socket is not used");
	/* A connected socket (the session's own) is refused. */
	o.fd = e->be;
	CHECK(vbb_listen(&o, &src) == -1 &&
	      log_has("is not a listening unix stream socket"),
	      "a connected socket was taken");
	o.fd = l;
	o.path = T_SOCK;
	CHECK(vbb_listen(&o, &src) == -1 && log_has("--socket-fd: the socket is the caller's"),
	      "--socket-fd with --socket");
	close(l);
}

/*
 * Socket activation: LISTEN_FDS=1, LISTEN_PID=us and the socket on fd 3,
 * as systemd starts a service of a .socket unit.  In a child, whose fd 3
 * is ours to replace.  Exit status: 0 if vbb_listen() took fd 3 and
 * cleared LISTEN_FDS, 1 if not, 2 if --socket was refused beside it.
 */
static int t_activated_child(bool with_path)
{
	struct vbb_listen_opts o = { .fd = -1, .path = with_path ? T_SOCK : NULL };
	enum vbb_listen_source src;
	char pid[16];
	int l = t_listener();

	if (l < 0 || dup2(l, SD_LISTEN_FDS_START) < 0)
		child_exit(3);
	snprintf(pid, sizeof(pid), "%d", getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	if (with_path)
		child_exit(vbb_listen(&o, &src) == -1 ? 2 : 1);
	child_exit(vbb_listen(&o, &src) == SD_LISTEN_FDS_START &&
	      src == VBB_LISTEN_SYSTEMD && !getenv("LISTEN_FDS") ? 0 : 1);
}

static void t_listen_socket_activation(struct env *e)
{
	int i, st;

	(void)e;
	for (i = 0; i < 2; i++) {
		pid_t pid = fork();

		if (pid == 0)
			t_activated_child(i);
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		      WEXITSTATUS(st) == (i ? 2 : 0),
		      "%s: child status %d", i ? "with --socket" : "alone",
		      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	/* Not ours: LISTEN_PID of another process. */
	setenv("LISTEN_PID", "1", 1);
	setenv("LISTEN_FDS", "1", 1);
	{
		struct vbb_listen_opts o = { .fd = -1 };
		enum vbb_listen_source src;

		CHECK(vbb_listen(&o, &src) == -1 &&
		      log_has("no socket: --socket, --socket-fd or socket activation"),
		      "LISTEN_FDS of another process was taken");
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
}

/*
 * --allow-uid: a frontend of another user (a child that setuid()s to
 * 4242 and connects) is refused and logged; allowed, it is served.
 */
static void t_peer_allow_list(struct env *e)
{
	struct vbb_listen_opts o = { .path = T_SOCK, .fd = -1, .has_mode = true,
				     .mode = 0666 };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uid_t other = 4242, self_uid = getuid();
	enum vbb_listen_source src;
	int l, c, i, st;
	bool ok[2];

	(void)e;
	if (geteuid()) {
		printf("#   not root: the other user's part is not run\n");
		return;
	}
	strcpy(sun.sun_path, T_SOCK);
	l = vbb_listen(&o, &src);
	CHECK(l >= 0, "listen");
	if (l < 0)
		return;
	for (i = 0; i < 2; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			int fd;

			if (setgid(other) || setuid(other))
				child_exit(3);
			fd = socket(AF_UNIX, SOCK_STREAM, 0);
			if (fd < 0 ||
			    connect(fd, (struct sockaddr *)&sun, sizeof(sun)))
				child_exit(4);
			child_exit(0);
		}
		c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		CHECK(c >= 0, "accept: %s", strerror(errno));
		ok[i] = c >= 0 && vbb_peer_allowed(c, i ? &other : &self_uid, 1);
		if (c >= 0)
			close(c);
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		      !WEXITSTATUS(st), "child %d", WEXITSTATUS(st));
	}
	CHECK(!ok[0], "uid 4242 served with --allow-uid %u", (unsigned int)self_uid);
	CHECK(log_has("refusing a frontend: uid 4242 (pid "), "refusal not logged");
	CHECK(ok[1], "uid 4242 refused with --allow-uid 4242");
	/* No list: any peer that the socket's permissions let in. */
	CHECK(vbb_peer_allowed(e->be, NULL, 0), "refused without a list");
	close(l);
	unlink(T_SOCK);
}

/*
 * seg_max is --queue-size - 2, as QEMU's virtio-blk makes it, and never
 * more than the module's; a ring smaller than that is warned about.
 */
static void t_seg_max_queue_size(struct env *e)
{
	struct vhost_vring_state st = { .index = 0, .num = 64 };
	struct virtio_blk_config cfg;

	CHECK(kdev_seg_max(0) == 126 && kdev_seg_max(256) == 254 &&
	      kdev_seg_max(32768) == VHOST_BLK_SEG_MAX,
	      "seg_max %u %u %u", kdev_seg_max(0), kdev_seg_max(256),
	      kdev_seg_max(32768));
	e->p.kdev.queue_size = 256;
	kdev_blk_config(&e->s.kdev, &cfg);
	CHECK(le32toh(cfg.seg_max) == 254, "config seg_max %u",
	      le32toh(cfg.seg_max));
	handshake(e);
	CHECK(xchg(e, VU_SET_VRING_NUM, VU_VERSION, &st, sizeof(st), NULL, 0) == 0,
	      "SET_VRING_NUM 64");
	CHECK(log_has("ring 0 has 64 entries, fewer than seg_max 254 + 2"),
	      "no warning for a ring shorter than seg_max");
}

/*
 * The backend is locked: a second bridge on the same disk fails to start,
 * read-write or read-only, unless it (and the first) pass --shared; two
 * read-only bridges share it.
 */
static void t_disk_lock(struct env *e)
{
	char path[] = "/var/tmp/vbb-test-lock-XXXXXX";
	struct disk a, b;
	int fd = mkstemp(path);

	(void)e;
	CHECK(fd >= 0 && !ftruncate(fd, 1 << 20), "scratch disk");
	if (fd < 0)
		return;
	close(fd);
	CHECK(!disk_open(&a, path, false, false), "first read-write bridge");
	CHECK(disk_open(&b, path, false, false) == -EAGAIN &&
	      log_has("is locked by another process"),
	      "a second read-write bridge started");
	CHECK(disk_open(&b, path, true, false) == -EAGAIN,
	      "a read-only bridge started beside a read-write one");
	CHECK(!disk_open(&b, path, false, true), "--shared was refused");
	disk_close(&b);
	disk_close(&a);
	/* Closed: the lock is gone with the fd. */
	CHECK(!disk_open(&a, path, true, false), "first read-only bridge");
	CHECK(!disk_open(&b, path, true, false), "second read-only bridge");
	disk_close(&b);
	CHECK(disk_open(&b, path, false, false) == -EAGAIN,
	      "read-write beside read-only");
	disk_close(&a);
	unlink(path);
}

/* Readiness: READY=1 on $NOTIFY_SOCKET, as systemd's Type=notify waits. */
static void t_notify_ready(struct env *e)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = "/tmp/vbb-test-notify.sock";
	char buf[128] = "";
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	(void)e;
	strcpy(sun.sun_path, path);
	unlink(path);
	CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&sun, sizeof(sun)),
	      "notify socket: %s", strerror(errno));
	setenv("NOTIFY_SOCKET", path, 1);
	vbb_notify_ready("disk.img");
	unsetenv("NOTIFY_SOCKET");
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	CHECK(n > 0 && !strcmp(buf, "READY=1\nSTATUS=disk.img"),
	      "got '%s'", buf);
	close(fd);
	unlink(path);
}


struct test {
	const char *name;
	void (*fn)(struct env *e);
	bool read_only;
};

static const struct test tests[] = {
	{ "GET_FEATURES offers the module's features and PROTOCOL_FEATURES", t_get_features, false },
	{ "GET_PROTOCOL_FEATURES is MQ, LOG_SHMFD, REPLY_ACK, BACKEND_REQ, CONFIG, CONFIGURE_MEM_SLOTS", t_get_protocol_features, false },
	{ "SET_PROTOCOL_FEATURES with a bit never offered is refused", t_set_protocol_features_unknown, false },
	{ "GET_QUEUE_NUM is --num-queues", t_get_queue_num, false },
	{ "GET_CONFIG: capacity, blk_size, seg_max, num_queues, slices", t_get_config, false },
	{ "GET_CONFIG with a size that does not match is refused", t_get_config_bad, false },
	{ "online resize: CONFIG_CHANGE_MSG on the back-end channel, new capacity", t_config_change_on_resize, false },
	{ "SET_BACKEND_REQ_FD without BACKEND_REQ is refused", t_backend_req_fd_not_negotiated, false },
	{ "without VHOST_BLK_GET_CONFIG the bridge builds the config", t_config_fallback, false },
	{ "REPLY_ACK: ack only with need_reply, not after a GET", t_reply_ack, false },
	{ "SET_FEATURES strips PROTOCOL_FEATURES for the kernel", t_set_features, false },
	{ "SET_FEATURES with a bit never offered is refused", t_set_features_not_offered, false },
	{ "SET_MEM_TABLE gives the kernel gpa/size and our own mappings", t_mem_table, false },
	{ "SET_MEM_TABLE with a mmap_offset off a page boundary", t_mem_table_unaligned_offset, false },
	{ "SET_MEM_TABLE on hugetlbfs: huge-page aligned, MAP_NORESERVE, MADV_DONTDUMP", t_mem_table_hugetlb, false },
	{ "CONFIGURE_MEM_SLOTS: 10 regions added, one removed, the module's limit", t_mem_slots, false },
	{ "REM_MEM_REG of the rings' region: they wait, and run when it is back", t_mem_slots_rem_ring_region, false },
	{ "REM_MEM_REG of an unknown region is refused", t_mem_slots_rem_unknown, false },
	{ "SET_VRING_ADDR is translated into our mappings", t_vring_addr, false },
	{ "the disk is attached once every set-up ring is enabled", t_attach_when_all_enabled, false },
	{ "a guest using 1 of 2 queues gets its queue running", t_one_of_two_queues, false },
	{ "GET_VRING_BASE detaches first, answers the kernel's base", t_get_vring_base, false },
	{ "stop and start again (guest reboot)", t_restart, false },
	{ "SET_VRING_NUM/BASE on a running ring detach first", t_reconfigure_running, false },
	{ "SET_MEM_TABLE while running: detach, remap rings, attach", t_mem_table_running, false },
	{ "SET_VRING_CALL without fd unbinds the call eventfd", t_call_nofd, false },
	{ "a new call eventfd is signalled once when it is set", t_call_signalled_when_set, false },
	{ "without PROTOCOL_FEATURES rings start enabled", t_no_protocol_features, false },
	{ "RESET_OWNER disables every ring", t_reset_owner, false },
	{ "short header, then EOF", t_short_header, false },
	{ "a frontend that does not read its replies: the reply times out", t_reply_to_a_frontend_that_does_not_read, false },
	{ "short header, then nothing", t_short_header_stall, false },
	{ "a header drip-fed byte by byte: the whole message has one deadline", t_drip_feed_header, false },
	{ "short payload, then EOF", t_short_payload, false },
	{ "payload size that does not fit the request", t_bad_size, false },
	{ "payload larger than any request", t_oversize, false },
	{ "unknown request, with need_reply: nack and close", t_unknown_request, false },
	{ "a request that was never offered", t_unsupported_request, false },
	{ "bad protocol version", t_bad_version, false },
	{ "a request with the reply flag", t_reply_flag_in_request, false },
	{ "SET_VRING_KICK without its fd", t_kick_missing_fd, false },
	{ "SET_VRING_KICK in polling mode (no fd flag)", t_kick_nofd_flag, false },
	{ "framing: a message, 2 fds and a reply through vu_send_msg / vu_recv_msg", t_framing_roundtrip, false },
	{ "framing: 8 fds come through, 9 (at once or spread) are refused and closed", t_framing_fd_limit, false },
	{ "9 fds in one message, none leaked", t_too_many_fds, false },
	{ "2 fds on SET_VRING_KICK, none leaked", t_two_fds_on_kick, false },
	{ "an fd on a request that takes none", t_fd_on_plain_request, false },
	{ "SET_MEM_TABLE with fewer fds than regions", t_mem_table_fd_mismatch, false },
	{ "SET_MEM_TABLE whose size does not match nregions", t_mem_table_bad_size, false },
	{ "SET_MEM_TABLE with an fd that cannot be mapped", t_mem_table_mmap_fails, false },
	{ "vring index out of range", t_vring_index_range, false },
	{ "vring address outside guest memory", t_vring_addr_outside, false },
	{ "SET_VRING_ADDR before SET_MEM_TABLE", t_vring_addr_before_mem, false },
	{ "a failing ioctl is named, nacked and closes", t_kernel_error, false },
	{ "SET_CONFIG of a read-only byte is nacked, the connection stays", t_set_config_refused, false },
	{ "SET_CONFIG of writeback goes to the module (CONFIG_WCE)", t_set_config_wce, false },
	{ "the guest's write cache switch outlives its frontend's reconnect", t_set_config_wce_kept, false },
	{ "frontend disconnects mid-I/O: device closed, memory unmapped", t_disconnect_mid_io, false },
	{ "a reconnecting frontend gets a working device", t_reconnect, false },
	{ "--read-only offers VIRTIO_BLK_F_RO", t_read_only, true },
	{ "open: queue count, owner, busy poll, adaptive poll, serial", t_open_params, false },
	{ "open: the guest is charged to the frontend's cgroups", t_charge_frontend, false },
	{ "--worker-per-queue and --poll-completions", t_worker_per_queue, false },
	{ "--pin-memory: pinned before the first table; ENOMEM explained", t_pin_memory, false },
	{ "--num-queues above the module's max_queues", t_too_many_queues, false },
	{ "/dev/vhost-blk missing", t_open_fails, false },
	{ "queue counters", t_stats, false },
	{ "migration: SET_LOG_BASE, LOG_ALL and VRING_F_LOG reach the kernel", t_migration_log, false },
	{ "migration: a new log replaces the old, none outlives the session", t_migration_log_replaced, false },
	{ "migration: a log without LOG_SHMFD, fd, valid size or mapping", t_migration_log_bad, false },
	{ "migration: a log that does not cover the table or a logged ring is refused", t_migration_log_bounded, false },
	{ "--socket PATH: 0600, or --socket-mode and --socket-group", t_listen_path_mode_group, false },
	{ "--socket PATH: too long, or not a socket, is refused", t_listen_path_refused, false },
	{ "--socket-mode, --socket-group, --allow-uid: what they accept", t_option_parsers, false },
	{ "--socket-fd: only a listening unix stream socket", t_listen_socket_fd, false },
	{ "a backend that is missing, not a file or device, or too small is refused", t_disk_refused, false },
	{ "/dev/vhost-blk refusing the set-up fails the session, device closed", t_open_refused, false },
	{ "socket activation: LISTEN_FDS's socket, and no --socket beside it", t_listen_socket_activation, false },
	{ "--allow-uid: another user's frontend is refused and logged", t_peer_allow_list, false },
	{ "READY=1 on NOTIFY_SOCKET", t_notify_ready, false },
	{ "the backend is locked unless --shared", t_disk_lock, false },
	{ "seg_max is --queue-size - 2, a shorter ring is warned about", t_seg_max_queue_size, false },
};

int main(void)
{
	unsigned int i, ntests = sizeof(tests) / sizeof(tests[0]);
	int fds_start;

	setvbuf(stdout, NULL, _IOLBF, 0);
	t_log = tmpfile();
	if (!t_log) {
		perror("tmpfile");
		return 1;
	}
	vbb_log_file = t_log;
	vbb_verbose = true;
	fds_start = count_fds();

	printf("TAP version 13\n1..%u\n", ntests + 1);
	for (i = 0; i < ntests; i++) {
		struct env e;

		log_reset();
		t_ok = true;
		if (env_init_opts(&e, tests[i].read_only, true)) {
			printf("#   setup failed: %s\n", strerror(errno));
			dump_log();
			t_ok = false;
		} else {
			tests[i].fn(&e);
			env_fini(&e);
		}
		if (!t_ok)
			dump_log();
		printf("%sok %u - %s\n", t_ok ? "" : "not ", ++t_num,
		       tests[i].name);
		t_ok ? t_pass++ : t_fail++;
	}

	t_ok = count_fds() == fds_start;
	if (!t_ok)
		printf("#   %d fds at the start, %d at the end\n", fds_start,
		       count_fds());
	printf("%sok %u - no file descriptor leaked\n", t_ok ? "" : "not ",
	       ++t_num);
	t_ok ? t_pass++ : t_fail++;

	printf("%u passed, %u failed\n", t_pass, t_fail);
	return t_fail ? 1 : 0;
}
