/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the vhost-blk selftest programs.  Include after
 * kselftest_harness.h, from exactly one file per program: the helpers take
 * the harness' _metadata so they can ASSERT.
 *
 * The backend under test is VHOST_BLK_TEST_DEV, a block device or a regular
 * file of at least 128 MiB, opened O_RDWR; its content is overwritten.
 * Without it the program makes its own before the first test, as the ublk
 * selftests do (vblk_own_backend()): a memory-backed null_blk device
 * through configfs, or a loop device on a sparse file; it is removed when
 * the program exits.  Without /dev/vhost-blk, or if no backend can be
 * made, every test is skipped, or fails if VHOST_BLK_TEST_STRICT is set to
 * anything but 0 (as the project's make check does).
 */
#ifndef VBLK_TEST_H
#define VBLK_TEST_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>

#include "blk_req.h"
#include "guest_mem.h"
#include "vblk_dev.h"
#include "vq.h"

#define TEST_SERIAL	"vhost-blk-selftest01"	/* exactly 20 bytes */
#define SECTOR		512ULL
#define KiB		1024UL
#define MiB		(1024UL * 1024)
/* The tests use fixed areas up to about 80 MiB into the disk. */
#define TEST_MIN_CAPACITY	(128 * MiB)
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif

struct env {
	const char *path;
	int backend_fd;
	uint64_t capacity;		/* bytes */
	uint64_t sectors;
	unsigned int nq;		/* queues of the device */
	uint64_t features;		/* wanted when opening a device */
	uint64_t seed;			/* for data patterns */
	struct guest_mem gm;
	struct vblk_dev dev;		/* the test's device */
};

/* What came back for a request. */
struct result {
	uint8_t status;
	uint32_t used;			/* used-ring length */
};

/* Request layout for the data helpers; NULL means one plain segment. */
struct layout {
	unsigned int flags;		/* BLK_REQ_* */
	unsigned int hdr_parts;
	unsigned int align;
	unsigned int misalign;
	unsigned int nseg;		/* 0: a single segment */
	const uint32_t *seg;		/* must add up to the length */
};

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* A fresh seed, so data left on the disk by earlier runs never matches. */
static inline uint64_t new_seed(struct env *e)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	e->seed = mix64(e->seed + 1 + (uint64_t)getpid() * 1000003 +
			(uint64_t)ts.tv_nsec);
	return e->seed;
}

/* Content of disk byte offset @off (a multiple of 8) under @seed. */
static inline void pattern_fill(void *buf, size_t len, uint64_t seed,
				uint64_t off)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t w = mix64(seed ^ (off + i) ^ 0x5bd1e995ULL);

		memcpy(p + i, &w, len - i < 8 ? len - i : 8);
	}
}

static inline void *xmalloc(struct __test_metadata *_metadata, size_t len)
{
	void *p = malloc(len ? len : 1);

	ASSERT_NE(NULL, p);
	return p;
}

static inline void expect_same(struct __test_metadata *_metadata,
			       const void *want, const void *got, size_t len,
			       const char *what)
{
	const uint8_t *w = want, *g = got;
	size_t i;

	if (!memcmp(w, g, len))
		return;
	for (i = 0; w[i] == g[i]; i++)
		;
	ASSERT_EQ(len, i)
		TH_LOG("%s: first difference at byte %zu of %zu: expected 0x%02x, got 0x%02x",
		       what, i, len, w[i], g[i]);
}

/* Status byte check; @got is evaluated once, @fmt says what it was. */
#define ASSERT_STATUS(want, got, fmt, ...) do {				\
	uint8_t __want = (want), __got = (got);				\
									\
	ASSERT_EQ(__want, __got)					\
		TH_LOG("status %s (0x%02x), expected %s: " fmt,		\
		       blk_status_name(__got), __got,			\
		       blk_status_name(__want), ##__VA_ARGS__);		\
} while (0)

static inline uint64_t backend_capacity(struct __test_metadata *_metadata,
					int fd)
{
	uint64_t size = 0;
	struct stat st;

	ASSERT_EQ(0, fstat(fd, &st));
	if (S_ISBLK(st.st_mode)) {
		ASSERT_EQ(0, ioctl(fd, BLKGETSIZE64, &size))
			TH_LOG("BLKGETSIZE64: %s", strerror(errno));
	} else {
		ASSERT_TRUE(S_ISREG(st.st_mode))
			TH_LOG("backend is neither a block device nor a file");
		size = (uint64_t)st.st_size;
	}
	return size;
}

/*
 * A queue limit of the block device open as @fd, read from
 * /sys/dev/block/MAJ:MIN/queue/@name (discard_max_bytes, ...); 0 for
 * anything but a block device, or if it cannot be read.
 */
static inline uint64_t backend_queue_limit(int fd, const char *name)
{
	unsigned long long v = 0;
	char path[128];
	struct stat st;
	FILE *f;

	if (fstat(fd, &st) || !S_ISBLK(st.st_mode))
		return 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s",
		 major(st.st_rdev), minor(st.st_rdev), name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/*
 * Whether the backend open as @fd is a regular file, or a block device
 * whose queue limit @name (discard_max_bytes, ...) is not 0.
 */
static inline bool backend_file_or_limit(int fd, const char *name)
{
	struct stat st;

	if (fstat(fd, &st))
		return false;
	return !S_ISBLK(st.st_mode) || backend_queue_limit(fd, name);
}

/*
 * Whether vhost-blk offers WRITE_ZEROES on the backend open as @fd, where
 * it zeroes cheaply: a regular file (fallocate()), or a block device with
 * REQ_OP_WRITE_ZEROES.
 */
static inline bool backend_has_write_zeroes(int fd)
{
	return backend_file_or_limit(fd, "write_zeroes_max_bytes");
}

/*
 * Whether vhost-blk offers DISCARD on the backend open as @fd: a regular
 * file (a punched hole), or a block device with discard.
 */
static inline bool backend_has_discard(int fd)
{
	return backend_file_or_limit(fd, "discard_max_bytes");
}

/*
 * Where a test makes scratch files: VHOST_BLK_SCRATCH_DIR, else next to a
 * file backend (a real file system), else /tmp.  The files must allow
 * O_DIRECT: in_vm.sh points VHOST_BLK_SCRATCH_DIR away from /tmp where
 * tmpfs has none (before 6.6).
 */
static inline const char *scratch_dir(struct env *e, char *buf, size_t len)
{
	const char *dir = getenv("VHOST_BLK_SCRATCH_DIR");
	struct stat st;
	char *slash;

	if (dir && *dir)
		return dir;
	if (fstat(e->backend_fd, &st) || !S_ISREG(st.st_mode))
		return "/tmp";
	snprintf(buf, len, "%s", e->path);
	slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return "/tmp";
	*slash = 0;
	return buf;
}

/* Open a device on @e's guest memory, serial and backend. */
/* The test's device set-up, for @nvqs queues: tests change what they need. */
static inline struct vblk_config env_config(const struct env *e,
					    unsigned int nvqs)
{
	struct vblk_config cfg = {
		.nvqs = nvqs,
		.features = e->features,
		.serial = TEST_SERIAL,
		.backend_fd = e->backend_fd,
	};

	return cfg;
}

static inline int env_open_dev(struct env *e, struct vblk_dev *dev,
			       unsigned int nvqs, unsigned int max_indirect,
			       uint16_t base)
{
	struct vblk_config cfg = env_config(e, nvqs);

	cfg.max_indirect = max_indirect;
	cfg.base = base;
	return vblk_open(dev, &e->gm, &cfg);
}

/* Replace the test's device by one with other parameters. */
static inline void env_reopen(struct __test_metadata *_metadata,
			      struct env *e, unsigned int nvqs,
			      unsigned int max_indirect, uint16_t base)
{
	vblk_close(&e->dev);
	ASSERT_EQ(0, env_open_dev(e, &e->dev, nvqs, max_indirect, base));
}

/*
 * Open @path as @e's backend and the test's device on it: the second half
 * of env_setup(), for a program that brings its own backend.
 */
static inline void env_attach(struct __test_metadata *_metadata,
			      struct env *e, const char *path)
{
	struct virtio_blk_config cfg;

	e->path = path;
	e->backend_fd = open(e->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, e->backend_fd)
		TH_LOG("open %s: %s", e->path, strerror(errno));
	e->capacity = backend_capacity(_metadata, e->backend_fd);
	ASSERT_LE(TEST_MIN_CAPACITY, e->capacity)
		TH_LOG("%s has %llu bytes, the tests need %lu MiB", e->path,
		       (unsigned long long)e->capacity,
		       TEST_MIN_CAPACITY / MiB);
	e->sectors = e->capacity / SECTOR;
	new_seed(e);

	ASSERT_EQ(0, guest_mem_init(&e->gm, 0, 0));
	ASSERT_EQ(0, env_open_dev(e, &e->dev, 1, 0, 0));
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	e->nq = cfg.num_queues;
	ASSERT_LE(1U, e->nq);
	ASSERT_GE((unsigned int)VBLK_MAX_VQS, e->nq);
}

/*
 * The backend the program made itself, if VHOST_BLK_TEST_DEV was not set:
 * removed by the process that made it, at exit (the harness forks a child
 * per test, and the children must leave it alone).
 */
static struct {
	pid_t owner;
	char nullb[128];		/* configfs directory */
	char loop[64];			/* loop device */
	char image[64];			/* its backing file */
} vblk_own;

/* Write @val to the configfs attribute @attr of @dir; 0 or -1. */
static inline int vblk_own_set(const char *dir, const char *attr,
			       const char *val)
{
	char path[192];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", dir, attr);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

/* 256 MiB of null_blk in memory, with discard; its device node or NULL. */
static inline const char *vblk_own_nullb(char *dev, size_t len)
{
	static const char *const attrs[][2] = {
		{ "size", "256" }, { "memory_backed", "1" },
		{ "blocksize", "512" }, { "discard", "1" }, { "power", "1" },
	};
	char index[16] = "", path[160];
	unsigned int i, tries;
	FILE *f;

	if (system("modprobe null_blk nr_devices=0 >/dev/null 2>&1") ||
	    access("/sys/kernel/config/nullb", F_OK))
		return NULL;
	snprintf(vblk_own.nullb, sizeof(vblk_own.nullb),
		 "/sys/kernel/config/nullb/vblk-selftest-%d", getpid());
	if (mkdir(vblk_own.nullb, 0755)) {
		vblk_own.nullb[0] = 0;
		return NULL;
	}
	for (i = 0; i < ARRAY_SIZE(attrs); i++)
		if (vblk_own_set(vblk_own.nullb, attrs[i][0], attrs[i][1]))
			return NULL;
	snprintf(path, sizeof(path), "%s/index", vblk_own.nullb);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(index, sizeof(index), f))
			index[0] = 0;
		fclose(f);
	}
	index[strcspn(index, "\n")] = 0;
	/* Named after the configfs directory since 6.x, nullbN before. */
	for (tries = 0; tries < 100; tries++) {
		snprintf(dev, len, "/dev/vblk-selftest-%d", getpid());
		if (!access(dev, F_OK))
			return dev;
		snprintf(dev, len, "/dev/nullb%s", index);
		if (index[0] && !access(dev, F_OK))
			return dev;
		usleep(20000);
	}
	return NULL;
}

/* A loop device on a sparse 256 MiB file in /tmp; its node or NULL. */
static inline const char *vblk_own_loop(char *dev, size_t len)
{
	char cmd[160];
	FILE *p;
	int fd;

	snprintf(vblk_own.image, sizeof(vblk_own.image),
		 "/tmp/vblk-selftest-%d.img", getpid());
	fd = open(vblk_own.image, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		  0600);
	if (fd < 0 || ftruncate(fd, 256 * MiB)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "losetup --find --show %s 2>/dev/null",
		 vblk_own.image);
	p = popen(cmd, "r");
	if (!p)
		return NULL;
	if (!fgets(dev, len, p))
		dev[0] = 0;
	pclose(p);
	dev[strcspn(dev, "\n")] = 0;
	if (!dev[0])
		return NULL;
	snprintf(vblk_own.loop, sizeof(vblk_own.loop), "%s", dev);
	return dev;
}

static inline void vblk_own_remove(void)
{
	char cmd[96];

	if (vblk_own.owner != getpid())
		return;
	if (vblk_own.nullb[0]) {
		vblk_own_set(vblk_own.nullb, "power", "0");
		rmdir(vblk_own.nullb);
	}
	if (vblk_own.loop[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d %s 2>/dev/null",
			 vblk_own.loop);
		if (system(cmd))
			fprintf(stderr, "# could not detach %s\n",
				vblk_own.loop);
	}
	if (vblk_own.image[0])
		unlink(vblk_own.image);
}

/*
 * Before the harness runs: without VHOST_BLK_TEST_DEV, and with
 * /dev/vhost-blk there (as root), make a backend and name it in
 * VHOST_BLK_TEST_DEV for every test.
 */
__attribute__((constructor)) static void vblk_own_backend(void)
{
	static char dev[160];
	const char *path = getenv("VHOST_BLK_TEST_DEV");

	if ((path && *path) || access(VBLK_DEV_PATH, F_OK) || geteuid())
		return;
	vblk_own.owner = getpid();
	atexit(vblk_own_remove);
	path = vblk_own_nullb(dev, sizeof(dev));
	if (!path) {
		vblk_own_remove();
		vblk_own.nullb[0] = 0;
		path = vblk_own_loop(dev, sizeof(dev));
	}
	if (path)
		setenv("VHOST_BLK_TEST_DEV", path, 1);
}

/* Whether a missing device must fail the test (VHOST_BLK_TEST_STRICT). */
static inline bool env_strict(void)
{
	const char *strict = getenv("VHOST_BLK_TEST_STRICT");

	return strict && *strict && strcmp(strict, "0");
}

static inline void env_setup(struct __test_metadata *_metadata, struct env *e,
			     uint64_t features)
{
	const char *path;
	bool must;

	memset(e, 0, sizeof(*e));
	e->backend_fd = -1;
	e->dev.fd = -1;
	e->features = features;

	/* Where the device must be there, its absence is a failure. */
	must = env_strict();
	path = getenv("VHOST_BLK_TEST_DEV");
	if (!path || !*path) {
		ASSERT_FALSE(must)
			TH_LOG("VHOST_BLK_TEST_DEV is not set (VHOST_BLK_TEST_STRICT)");
		SKIP(return, "VHOST_BLK_TEST_DEV is not set");
	}
	if (access(VBLK_DEV_PATH, F_OK)) {
		ASSERT_FALSE(must)
			TH_LOG("%s does not exist (is vhost_blk loaded?) (VHOST_BLK_TEST_STRICT)",
			       VBLK_DEV_PATH);
		SKIP(return, "%s does not exist (is vhost_blk loaded?)",
		     VBLK_DEV_PATH);
	}
	env_attach(_metadata, e, path);
}

static inline void env_teardown(struct env *e)
{
	vblk_close(&e->dev);
	guest_mem_destroy(&e->gm);
	if (e->backend_fd >= 0)
		close(e->backend_fd);
}

/*
 * One request, synchronously: data from/to @buf (@len bytes), laid out as
 * @lo says.
 */
static inline struct result xfer_dir(struct __test_metadata *_metadata,
				     struct env *e, struct vq *vq,
				     uint32_t type, enum blk_dir dir,
				     uint64_t sector, void *buf, size_t len,
				     const struct layout *lo)
{
	size_t mark = guest_mark(&e->gm);
	uint32_t one = (uint32_t)len;
	struct blk_req_spec spec = {
		.type = type,
		.sector = sector,
		.dir = dir,
		.nseg = len ? 1 : 0,
		.seg_len = &one,
	};
	struct blk_req req;
	struct result r;

	if (lo) {
		spec.flags = lo->flags;
		spec.hdr_parts = lo->hdr_parts;
		spec.align = lo->align;
		spec.misalign = lo->misalign;
		if (lo->nseg) {
			size_t sum = 0;
			unsigned int i;

			for (i = 0; i < lo->nseg; i++)
				sum += lo->seg[i];
			ASSERT_EQ(len, sum);
			spec.nseg = lo->nseg;
			spec.seg_len = lo->seg;
		}
	}
	ASSERT_EQ(0, blk_req_prep(&req, &e->gm, &spec));
	if (!req.data_write && buf)
		blk_req_fill(&req, buf, len);
	ASSERT_EQ(0, blk_req_run(vq, &req))
		TH_LOG("type %u sector %llu, %zu bytes: no completion",
		       type, (unsigned long long)sector, len);
	r.status = *req.status;
	r.used = req.used_len;
	if (req.data_write && buf)
		blk_req_gather(&req, buf, len);
	blk_req_free(&req);
	guest_release(&e->gm, mark);
	return r;
}

static inline struct result xfer(struct __test_metadata *_metadata,
				 struct env *e, struct vq *vq, uint32_t type,
				 uint64_t sector, void *buf, size_t len,
				 const struct layout *lo)
{
	return xfer_dir(_metadata, e, vq, type, BLK_DIR_AUTO, sector, buf,
			len, lo);
}

/* Check status and used length; @what names the request. */
static inline void expect_result(struct __test_metadata *_metadata,
				 struct result r, uint8_t status,
				 uint32_t used, const char *what)
{
	ASSERT_STATUS(status, r.status, "%s", what);
	ASSERT_EQ(used, r.used) TH_LOG("used length of %s", what);
}

static inline void write_ok(struct __test_metadata *_metadata, struct env *e,
			    struct vq *vq, uint64_t sector, const void *buf,
			    size_t len, const struct layout *lo)
{
	struct result r;
	char what[64];

	r = xfer(_metadata, e, vq, VIRTIO_BLK_T_OUT, sector, (void *)buf, len,
		 lo);
	snprintf(what, sizeof(what), "write of %zu bytes at sector %llu",
		 len, (unsigned long long)sector);
	expect_result(_metadata, r, VIRTIO_BLK_S_OK, 1, what);
}

static inline void read_ok(struct __test_metadata *_metadata, struct env *e,
			   struct vq *vq, uint64_t sector, void *buf,
			   size_t len, const struct layout *lo)
{
	struct result r;
	char what[64];

	r = xfer(_metadata, e, vq, VIRTIO_BLK_T_IN, sector, buf, len, lo);
	snprintf(what, sizeof(what), "read of %zu bytes at sector %llu",
		 len, (unsigned long long)sector);
	expect_result(_metadata, r, VIRTIO_BLK_S_OK, (uint32_t)len + 1, what);
}

/* Write a fresh pattern with layout @wlo, read it back with @rlo. */
static inline void rw_verify(struct __test_metadata *_metadata, struct env *e,
			     struct vq *vq, uint64_t sector, size_t len,
			     const struct layout *wlo, const struct layout *rlo)
{
	uint8_t *w = xmalloc(_metadata, len), *r = xmalloc(_metadata, len);
	char what[96];

	pattern_fill(w, len, new_seed(e), sector * SECTOR);
	memset(r, 0xa5, len);
	write_ok(_metadata, e, vq, sector, w, len, wlo);
	read_ok(_metadata, e, vq, sector, r, len, rlo);
	snprintf(what, sizeof(what), "%zu bytes at sector %llu", len,
		 (unsigned long long)sector);
	expect_same(_metadata, w, r, len, what);
	free(w);
	free(r);
}

/* Read @len bytes at @sector and compare with what @seed wrote there. */
static inline void verify_pattern(struct __test_metadata *_metadata,
				  struct env *e, struct vq *vq,
				  uint64_t sector, size_t len, uint64_t seed)
{
	uint8_t *w = xmalloc(_metadata, len), *r = xmalloc(_metadata, len);
	char what[96];

	pattern_fill(w, len, seed, sector * SECTOR);
	read_ok(_metadata, e, vq, sector, r, len, NULL);
	snprintf(what, sizeof(what), "%zu bytes at sector %llu", len,
		 (unsigned long long)sector);
	expect_same(_metadata, w, r, len, what);
	free(w);
	free(r);
}

/* GET_ID into a @buflen-byte buffer pre-filled with 0xa5, copied to @out. */
static inline struct result get_id(struct __test_metadata *_metadata,
				   struct env *e, struct vq *vq,
				   uint32_t buflen, unsigned int flags,
				   uint8_t *out)
{
	size_t mark = guest_mark(&e->gm);
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_GET_ID,
		.nseg = 1,
		.seg_len = &buflen,
		.flags = flags,
	};
	struct blk_req req;
	struct result r;

	ASSERT_EQ(0, blk_req_prep(&req, &e->gm, &spec));
	memset(req.data[0], 0xa5, buflen);
	ASSERT_EQ(0, blk_req_run(vq, &req));
	memcpy(out, req.data[0], buflen);
	r.status = *req.status;
	r.used = req.used_len;
	blk_req_free(&req);
	guest_release(&e->gm, mark);
	return r;
}

/* The feature a DISCARD, WRITE_ZEROES or SECURE_ERASE request needs. */
static inline unsigned int range_feature(uint32_t type)
{
	if (type == VIRTIO_BLK_T_DISCARD)
		return VIRTIO_BLK_F_DISCARD;
	if (type == VIRTIO_BLK_T_WRITE_ZEROES)
		return VIRTIO_BLK_F_WRITE_ZEROES;
	return VIRTIO_BLK_F_SECURE_ERASE;
}

/*
 * The answer to a range request of @type that the device would otherwise
 * answer @status: UNSUPP if its feature was not negotiated on @dev, which
 * the device tells before anything else of the request.
 */
static inline uint8_t range_status(const struct vblk_dev *dev, uint32_t type,
				   uint8_t status)
{
	return vblk_has(dev, range_feature(type)) ? status :
	       VIRTIO_BLK_S_UNSUPP;
}

/* A DISCARD / WRITE_ZEROES / SECURE_ERASE request over @n ranges. */
static inline struct result ranges(struct __test_metadata *_metadata,
				   struct env *e, struct vq *vq, uint32_t type,
				   const struct virtio_blk_discard_write_zeroes *r,
				   unsigned int n, size_t extra)
{
	size_t len = n * sizeof(*r) + extra;
	uint8_t *buf = xmalloc(_metadata, len);
	struct result res;

	memset(buf, 0, len);
	memcpy(buf, r, n * sizeof(*r));
	res = xfer(_metadata, e, vq, type, 0, buf, len, NULL);
	free(buf);
	return res;
}

static inline struct virtio_blk_discard_write_zeroes range(uint64_t sector,
							   uint32_t n,
							   uint32_t flags)
{
	struct virtio_blk_discard_write_zeroes r = {
		.sector = htole64(sector),
		.num_sectors = htole32(n),
		.flags = htole32(flags),
	};

	return r;
}

#endif /* VBLK_TEST_H */
