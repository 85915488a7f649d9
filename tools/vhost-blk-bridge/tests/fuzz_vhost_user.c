// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: the bridge's vhost-user message handler, fed by a
 * hostile frontend, over the fake /dev/vhost-blk of the unit tests.
 *
 * An input is a sequence of messages as they go on the wire: a 12-byte
 * header, then as many payload bytes as the header says (fewer if the
 * input ends first: the framing's deadline, 1 ms here, is met).  Each goes
 * through a socketpair with the descriptors its request takes, as QEMU
 * would attach them: a region's memfd for SET_MEM_TABLE (one per region),
 * ADD_MEM_REG, REM_MEM_REG and SET_LOG_BASE; an eventfd for the ring
 * descriptors (unless the invalid-fd flag is set); a socket for
 * SET_BACKEND_REQ_FD.  vu_session_handle() runs after each, the replies
 * are read and their descriptors closed, and the session ends with the
 * input or at the first message that closes the connection.  After every
 * input, the process must hold exactly the descriptors and mappings it
 * held before: anything else aborts, as a crash would.
 *
 * VBB_FUZZ_WRITE_SEEDS=DIR writes the seed corpus (tests/fuzz-seeds) and
 * exits: QEMU's start-up, a migration's dirty logging, memory slots, the
 * config space and a reset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <dirent.h>

#include "fake_kdev.h"
#include "kdev.h"
#include "log.h"
#include "vhost_user.h"
#include "vu_io.h"

#define NQ		2
#define MEM_BYTES	(4u << 20)
#define DISK_BYTES	(16u << 20)

static struct {
	struct fake fake;
	struct kdev_ops ops;
	struct vu_params p;
	struct disk disk;
	int memfd;
} g;

static int count_entries(const char *dir)
{
	struct dirent *d;
	DIR *dh = opendir(dir);
	int n = 0;

	if (!dh)
		abort();
	while ((d = readdir(dh)))
		n++;
	closedir(dh);
	return n;
}

static int count_maps(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	if (!f)
		abort();
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "vbb-fuzz-guest") != NULL;
	fclose(f);
	return n;
}

static void setup(void)
{
	char path[] = "/tmp/vbb-fuzz-disk-XXXXXX";

	fake_init(&g.fake);
	g.ops = (struct kdev_ops){
		.open = fake_open, .ioctl = fake_ioctl, .close = fake_close,
		.priv = &g.fake,
	};
	g.disk.fd = mkstemp(path);
	if (g.disk.fd < 0 || ftruncate(g.disk.fd, DISK_BYTES))
		abort();
	unlink(path);
	g.disk.path = "vbb-fuzz-disk";
	g.disk.blk_size = 512;
	g.p.kdev.path = "/dev/vhost-blk";
	g.p.kdev.ops = &g.ops;
	g.p.kdev.disk = &g.disk;
	g.p.kdev.num_queues = NQ;
	/* A truncated message costs its deadline: keep it short. */
	g.p.msg_timeout_ms = 1;
	g.memfd = memfd_create("vbb-fuzz-guest", MFD_CLOEXEC);
	if (g.memfd < 0 || ftruncate(g.memfd, MEM_BYTES))
		abort();
	/* Errors are what the inputs are for: nobody reads them. */
	vbb_log_file = fopen("/dev/null", "w");
	if (!vbb_log_file)
		abort();
}

/* The descriptors a frontend attaches to @h with @payload (@len bytes). */
static unsigned int attach_fds(const struct vu_hdr *h, const uint8_t *payload,
			       uint32_t len, int *fds)
{
	uint32_t n = 0, i;
	uint64_t u64 = 0;
	int sv[2];

	switch (h->request) {
	case VU_SET_MEM_TABLE:
		if (len >= 4)
			memcpy(&n, payload, 4);
		n = n > VU_MAX_FDS ? VU_MAX_FDS : n;
		for (i = 0; i < n; i++)
			fds[i] = dup(g.memfd);
		return n;
	case VU_ADD_MEM_REG:
	case VU_REM_MEM_REG:
	case VU_SET_LOG_BASE:
		fds[0] = dup(g.memfd);
		return 1;
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		if (len >= 8)
			memcpy(&u64, payload, 8);
		if (u64 & VU_VRING_NOFD)
			return 0;
		fds[0] = eventfd(0, EFD_CLOEXEC);
		return 1;
	case VU_SET_BACKEND_REQ_FD:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			abort();
		close(sv[1]);
		fds[0] = sv[0];
		return 1;
	default:
		return 0;
	}
}

/* Read whatever the bridge sent back, closing any descriptor in it. */
static void drain(int fe)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} ctl;
	char buf[4096];

	for (;;) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf,
			.msg_controllen = sizeof(ctl.buf),
		};
		struct cmsghdr *c;
		ssize_t n = recvmsg(fe, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (n <= 0)
			return;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			int *fd = (int *)CMSG_DATA(c);
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			while (k--)
				close(fd[k]);
		}
	}
}

static void run(const uint8_t *data, size_t size)
{
	struct vu_session s;
	size_t off = 0;
	int sv[2], ret = 0;

	fake_init(&g.fake);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	if (vu_session_open(&s, &g.p, sv[1]))
		abort();
	while (ret == 0 && off + sizeof(struct vu_hdr) <= size) {
		struct vu_hdr h;
		struct iovec iov[2];
		uint32_t len;
		int fds[VU_MAX_FDS];
		unsigned int nfds, i;

		memcpy(&h, data + off, sizeof(h));
		iov[0] = (struct iovec){ (void *)(data + off), sizeof(h) };
		off += sizeof(h);
		len = h.size < size - off ? h.size : (uint32_t)(size - off);
		iov[1] = (struct iovec){ (void *)(data + off), len };
		nfds = attach_fds(&h, data + off, len, fds);
		off += len;
		/* The fake records at most FAKE_MAX_CALLS; only its state counts. */
		g.fake.ncalls = 0;
		if (vu_sendv(sv[0], iov, len ? 2 : 1, fds, nfds))
			ret = -1;
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		if (!ret)
			ret = vu_session_handle(&s);
		drain(sv[0]);
	}
	vu_session_close(&s);
	close(sv[0]);
	close(sv[1]);
}

/* ---------------------------------------------------------- the seeds */

static FILE *seed;

static void put(uint32_t req, uint32_t flags, const void *payload,
		uint32_t size)
{
	struct vu_hdr h = { .request = req, .flags = flags, .size = size };

	fwrite(&h, sizeof(h), 1, seed);
	if (size)
		fwrite(payload, size, 1, seed);
}

static void put_u64(uint32_t req, uint64_t v)
{
	put(req, VU_VERSION, &v, sizeof(v));
}

static void put_state(uint32_t req, unsigned int index, unsigned int num)
{
	struct vhost_vring_state st = { .index = index, .num = num };

	put(req, VU_VERSION, &st, sizeof(st));
}

static struct vhost_vring_addr ring_addr(unsigned int q, bool log)
{
	uint64_t base = 0x7f0000000000ULL + 0x10000 * q;

	return (struct vhost_vring_addr){
		.index = q,
		.flags = log ? 1u << VHOST_VRING_F_LOG : 0,
		.desc_user_addr = base,
		.avail_user_addr = base + 0x1000,
		.used_user_addr = base + 0x2000,
		.log_guest_addr = 0x10000 * q + 0x2000,
	};
}

/* QEMU 7.2's vhost_dev_start(), as the unit tests replay it. */
static void put_start(void)
{
	struct vu_memory m = { .nregions = 2 };
	unsigned int q;

	put(VU_GET_FEATURES, VU_VERSION, NULL, 0);
	put(VU_GET_PROTOCOL_FEATURES, VU_VERSION, NULL, 0);
	put_u64(VU_SET_PROTOCOL_FEATURES, VU_PROTOCOL_FEATURES);
	put(VU_GET_QUEUE_NUM, VU_VERSION, NULL, 0);
	put(VU_SET_OWNER, VU_VERSION, NULL, 0);
	for (q = 0; q < NQ; q++)
		put_u64(VU_SET_VRING_CALL, q);
	put_u64(VU_SET_FEATURES, fake_guest_features |
		F(VU_F_PROTOCOL_FEATURES));
	m.regions[0] = (struct vu_mem_region){
		.guest_phys_addr = 0, .memory_size = MEM_BYTES / 2,
		.userspace_addr = 0x7f0000000000ULL,
	};
	m.regions[1] = (struct vu_mem_region){
		.guest_phys_addr = 1ULL << 32, .memory_size = MEM_BYTES / 2,
		.userspace_addr = 0x7f1000000000ULL,
		.mmap_offset = MEM_BYTES / 2,
	};
	put(VU_SET_MEM_TABLE, VU_VERSION | VU_NEED_REPLY, &m,
	    8 + 2 * sizeof(m.regions[0]));
	for (q = 0; q < NQ; q++) {
		struct vhost_vring_addr a = ring_addr(q, false);

		put_state(VU_SET_VRING_NUM, q, 256);
		put_state(VU_SET_VRING_BASE, q, 0);
		put(VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a));
		put_u64(VU_SET_VRING_KICK, q);
		put_state(VU_SET_VRING_ENABLE, q, 1);
	}
}

static void write_seeds(const char *dir)
{
	struct vu_log log = { .mmap_size = MEM_BYTES / 2 };
	struct vu_mem_reg r = {
		.region = {
			.guest_phys_addr = 1ULL << 20, .memory_size = 0x10000,
			.userspace_addr = 0x7f0000100000ULL,
			.mmap_offset = 0x100000,
		},
	};
	struct vhost_vring_addr a;
	uint8_t cfg[8 + VU_MAX_CONFIG_SIZE] = { 0 };
	const char *names[] = { "start", "migration", "mem-slots", "config",
				"reset" };
	char path[512];
	unsigned int k, q;

	for (k = 0; k < 5; k++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
		seed = fopen(path, "w");
		if (!seed)
			abort();
		put_start();
		switch (k) {
		case 1:
			put(VU_SET_LOG_BASE, VU_VERSION, &log, sizeof(log));
			put_u64(VU_SET_FEATURES, fake_features |
				F(VU_F_PROTOCOL_FEATURES));
			for (q = 0; q < NQ; q++) {
				a = ring_addr(q, true);
				put(VU_SET_VRING_ADDR, VU_VERSION, &a,
				    sizeof(a));
			}
			put_state(VU_GET_VRING_BASE, 0, 0);
			break;
		case 2:
			put(VU_GET_MAX_MEM_SLOTS, VU_VERSION, NULL, 0);
			put(VU_ADD_MEM_REG, VU_VERSION | VU_NEED_REPLY, &r,
			    sizeof(r));
			put(VU_REM_MEM_REG, VU_VERSION | VU_NEED_REPLY, &r,
			    sizeof(r));
			break;
		case 3:
			cfg[4] = 60;	/* size */
			put(VU_GET_CONFIG, VU_VERSION, cfg, 12 + 60);
			put(VU_SET_CONFIG, VU_VERSION | VU_NEED_REPLY, cfg,
			    12 + 60);
			break;
		case 4:
			for (q = 0; q < NQ; q++)
				put_state(VU_GET_VRING_BASE, q, 0);
			put(VU_RESET_OWNER, VU_VERSION, NULL, 0);
			break;
		}
		fclose(seed);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("VBB_FUZZ_WRITE_SEEDS");

	(void)argc;
	(void)argv;
	if (dir) {
		write_seeds(dir);
		exit(0);
	}
	setup();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fds = count_entries("/proc/self/fd"), maps = count_maps();

	run(data, size);
	/* What a session leaves behind is a finding, as a crash is. */
	if (count_entries("/proc/self/fd") != fds || count_maps() != maps) {
		fprintf(stderr, "vbb-fuzz: %d descriptors and %d guest mappings before the input, %d and %d after\n",
			fds, maps, count_entries("/proc/self/fd"),
			count_maps());
		abort();
	}
	return 0;
}
