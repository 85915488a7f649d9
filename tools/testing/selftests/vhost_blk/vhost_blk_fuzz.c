// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_fuzz: a seeded, reproducible hostile guest for vhost-blk.
 *
 * It drives /dev/vhost-blk like a VMM whose guest mixes valid requests
 * with malformed ones: random layouts (split headers, data sharing the
 * header's or the status descriptor, odd segment sizes, zero-length
 * descriptors with garbage addresses, indirect tables, buffers across
 * memory-region boundaries), wrong directions, short headers, bad lengths
 * and sectors, bad range tables, missing status bytes, and chains the
 * vhost core itself must refuse (loops, addresses outside guest memory,
 * bad indirect tables, too many descriptors, bogus avail entries).  While
 * I/O runs it re-sends the memory table, detaches and re-attaches the
 * backend (sometimes read-only), resets the owner, closes and reopens the
 * device, changes the serial and the polling mode.
 *
 * Every request goes through a model of the vhost core (which chains it
 * refuses, and the iovecs of the others) and of the contract of
 * Documentation/virt/vhost-blk/uapi.rst (status byte, used length, which
 * bytes are written), and every answer is checked against it.  A shadow of
 * the disk follows the writes that succeed; reads are checked against it,
 * and so is the whole disk at the end.  Guest memory the device was not
 * given as writable holds canary bytes that are checked after every
 * request and once more at the end.
 *
 * A chain the core refuses stops its ring (the core does not consume a head
 * it cannot parse).  The fuzzer sees the vq error eventfd fire and the
 * device's avail index stop at that head, then "repairs" the ring the way
 * only a guest can: it swaps the avail entry for a prepared valid chain (or
 * restores the avail index), which the device then answers.
 *
 * --stress turns it into a data-integrity test: valid requests only (reads,
 * writes, flushes, discards, write-zeroes) at queue depths up to the ring
 * size, every read checked against the shadow.
 *
 * Usage: vhost_blk_fuzz --backend PATH [--seed N] [--requests N] [--stress]
 * Exit status: 0 pass, 1 failure (the seed is printed), 2 usage, 4 skip.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>

#include "kselftest.h"		/* __printf, __noreturn, KSFT_SKIP, ARRAY_SIZE */

#include "blk_req.h"
#include "guest_mem.h"
#include "hostile.h"
#include "vblk_dev.h"
#include "vq.h"

#define SECT		512ULL
#define MAX_Q		8
#define CORE_IOV	1024		/* UIO_MAXIOV: the core's iovec array */
#define BOUNCE_MAX	(1U << 20)	/* misaligned requests up to this size */
#define RSEG		16U		/* struct virtio_blk_discard_write_zeroes */
#define MAX_SEG		VHOST_BLK_MAX_DISCARD_SEG
#define MAX_SECT	VHOST_BLK_MAX_DISCARD_SECTORS
#define SERIAL_LEN	VHOST_BLK_SERIAL_LEN
#define HANG_MS		30000
#define IDLE_MS		5		/* kick after this long without answers */

#define GEN_ZERO	UINT32_MAX	/* sector holds zeroes */
#define GEN_ANY		(UINT32_MAX - 1) /* anything (secure erase) */

/* ------------------------------------------------------------- options */

static struct opts {
	const char *backend;
	uint64_t seed;
	uint64_t requests;
	bool stress;
	unsigned int nq;
	unsigned int num;
	uint64_t window;		/* sectors of the hot area */
	int verbose;
} o;

static const char *prog = "vhost_blk_fuzz";

static void print_usage(FILE *f)
{
	fprintf(f,
"Usage: %s [OPTIONS]\n"
"\n"
"A seeded hostile guest for /dev/vhost-blk: valid requests mixed with\n"
"malformed chains, control ioctls while I/O runs, everything checked\n"
"against a model of the vhost core, of the vhost-blk contract and of the\n"
"disk.  The backend's contents are overwritten.\n"
"\n"
"Options:\n"
"  -b, --backend PATH   block device or regular file to use as the disk\n"
"                       (default: $VHOST_BLK_TEST_DEV)\n"
"  -s, --seed N         seed (default: from the clock; always printed)\n"
"  -n, --requests N     requests to send (default 20000)\n"
"      --stress         data-integrity mode: valid requests only, queue\n"
"                       depth up to the ring size\n"
"  -q, --queues N       virtqueues, 1-%d (default 4, --stress 2)\n"
"  -r, --ring N         ring size, power of two 16-1024 (default 64,\n"
"                       --stress 256)\n"
"  -w, --window-mib N   hot area for valid I/O (default 32; --stress 48)\n"
"  -v, --verbose        report every control operation\n"
"  -h, --help           this text\n"
"\n"
"Exit status: 0 all checks passed, 1 a check failed (the seed is printed),\n"
"2 usage error, 4 skipped (no /dev/vhost-blk or no backend).\n",
		prog, MAX_Q);
}

/* -------------------------------------------------------- the state */

struct iovr {
	uint64_t gpa;
	uint32_t len;
};

enum expect_kind {
	X_CORE,		/* the vhost core refuses it: never answered */
	X_NOSTATUS,	/* no writable byte: used length 0, nothing written */
	X_ANSWER,	/* a status byte and a used length */
};

/* What a request is meant to be, for the statistics. */
enum label {
	L_IN, L_OUT, L_FLUSH, L_GET_ID, L_DISCARD, L_WZ, L_SE,
	L_BIG,
	/* Malformed for the module (answered). */
	M_UNKNOWN_TYPE, M_ZONE_TYPE, M_SHORT_HDR, M_HDR_WRITABLE, M_IN_RDATA,
	M_OUT_WDATA, M_RANGE_WDATA, M_BAD_LEN, M_PAST_CAP, M_WRAP,
	M_RANGE_EMPTY, M_RANGE_NOT16, M_RANGE_TOO_MANY, M_RANGE_FLAGS,
	M_RANGE_OUTSIDE, M_RANGE_ZERO, M_NO_STATUS, M_BIG_MISALIGNED,
	M_FLUSH_DATA, M_GET_ID_SHORT,
	/* Malformed for the vhost core (refused). */
	C_LOOP, C_NEXT_OUTSIDE, C_ADDR_OUTSIDE, C_IND_BAD_LEN, C_IND_LOOP,
	C_IND_NESTED, C_IND_OUTSIDE, C_IND_EMPTY, C_TOO_MANY, C_OUT_AFTER_IN,
	C_BAD_HEAD, C_IDX_JUMP,
	L_REPAIR,
	L_NR
};

static const char *const label_name[L_NR] = {
	"in", "out", "flush", "get_id", "discard", "write_zeroes",
	"secure_erase", "big",
	"unknown_type", "zone_or_lifetime", "short_header", "header_writable",
	"in_readable_data", "out_writable_data", "range_writable_data",
	"bad_length", "past_capacity", "sector_wrap", "range_empty",
	"range_not_16", "range_too_many", "range_flags", "range_outside",
	"range_zero_count", "no_status", "big_misaligned", "flush_data",
	"get_id_short",
	"desc_loop", "next_outside_ring", "addr_outside_memory",
	"indirect_bad_len", "indirect_loop", "indirect_nested",
	"indirect_outside_memory", "indirect_empty", "too_many_descs",
	"readable_after_writable", "avail_head_outside", "avail_idx_jump",
	"repair",
};

struct req;

struct bad {
	struct bad *next;
	int kind;			/* C_BAD_HEAD, C_IDX_JUMP or a chain */
	uint16_t pos;			/* its avail position */
	uint16_t real_idx;		/* C_IDX_JUMP: the true avail index */
	struct req *chain;		/* a refused chain, to reclaim */
	struct req *repair;		/* the chain that replaces it */
	uint64_t err_mark;		/* errors seen when it became first */
};

struct lock {
	uint64_t sector;
	uint32_t n;
	bool write;
};

struct req {
	uint64_t seq;
	unsigned int q;
	int head;
	int label;
	bool big;
	int arena;			/* index in the queue's pool, or -1 */
	/* Guest memory the request owns, and its contents when posted. */
	size_t aoff, alen;
	uint8_t *snap;
	/* The chain as the vhost core parses it. */
	bool core_bad;
	struct iovr *out, *in;
	unsigned int nout, nin;
	uint64_t out_len, in_len;
	uint8_t hdr[16];
	uint8_t *tab;			/* out stream after the header */
	uint32_t tab_len;		/* (only kept for range types) */
	/* OUT data: generation of the pattern it carries */
	uint32_t dgen;
	/* Disk areas it may touch. */
	struct lock *locks;
	unsigned int nlocks;
	bool locked;
	/* The expected answer. */
	bool evaluated;
	int x;
	uint8_t status;
	uint32_t used;
	uint64_t status_gpa;
	uint32_t mtype;			/* type the module accounts it as */
	uint64_t sector;		/* IN / OUT served */
	uint32_t nsect;
	unsigned int napply;		/* ranges served */
	unsigned int serial_epoch;
	struct bad *bad;		/* a refused chain's bad item */
};

struct qstate {
	struct vq vq;
	/* Request memory: o.num areas per queue, a stack of free ones. */
	unsigned int *arena_free;
	unsigned int narena_free;
	int err_fd;
	uint64_t err_seen;
	struct bad *bad, *bad_tail;	/* refused items, in avail order */
	bool no_post;			/* an avail index jump is pending */
	unsigned int busyloop_us;
};

/* Answers counted per device epoch, to compare with the module's counters. */
struct epoch {
	uint64_t in, out, flush, get_id, discard, wz, unsupp, ioerr;
	uint64_t bytes_read, bytes_written;
};

static struct fz {
	struct guest_mem gm;
	int dev;
	int be_fd, ro_fd, io_fd;	/* backend: rw, read-only, O_DIRECT */
	uint64_t cap;			/* sectors */
	bool bdev, has_discard, has_wz, has_se, attached, ro;
	unsigned int lbs_mask, addr_mask;
	uint64_t features;
	/* guest memory layout */
	size_t void_off, void_len, arena_off, arena_sz, big_off, big_sz;
	size_t tail_off, tail_len;
	size_t cuts[3];
	unsigned int ncuts;
	struct qstate q[MAX_Q];
	/* disk model */
	uint32_t *gen;
	uint8_t *maybe0;
	/*
	 * The generation a discarded block device sector held, GEN_ZERO if
	 * none: see sector_matches().
	 */
	uint32_t *discarded;
	uint32_t *writer;		/* request that last changed the sector */
	uint8_t *writer_label;
	uint16_t *rlock, *wlock;
	uint32_t next_gen;
	uint64_t dseed;
	/* serials by epoch */
	char (*serial)[SERIAL_LEN];
	unsigned int serial_epoch;
	bool big_busy;
	struct hq_rng rng;
	uint64_t seq;
	uint64_t outstanding;
	unsigned int ro_batches;
	unsigned int detached_batches;
	int64_t last_progress;
	int64_t last_idle_kick;
	const char *waiting;		/* what the current wait is for */
	/* statistics */
	uint64_t sent[L_NR];
	uint64_t st_ok, st_ioerr, st_unsupp, st_nostatus, st_core;
	uint64_t repairs, lost, ops[10], kicks, kicks_forced, kicks_none;
	uint64_t idle_kicks, epochs_checked, reads_checked, bytes_checked;
	uint64_t learned_zero, torn_discards, conflicts, depth_max, guest_depth;
	uint64_t mixed_indirect;
	struct epoch ep;
} f;

enum {
	OP_MEMTABLE, OP_REATTACH, OP_RO, OP_RESET, OP_REOPEN, OP_SERIAL,
	OP_POLL, OP_STATS, OP_NR
};

static const char *const op_name[OP_NR] = {
	"set_mem_table", "detach_reattach", "read_only_period",
	"reset_owner", "close_reopen", "set_serial", "busy_poll", "get_stats",
};

/* ------------------------------------------------------------ failures */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void dump_req(const struct req *r)
{
	unsigned int i;

	if (!r)
		return;
	fprintf(stderr, "#   request #%" PRIu64
		" (%s) on queue %u, head %d, hdr type %u sector %#" PRIx64 "\n",
		r->seq, label_name[r->label], r->q, r->head,
		*(const uint32_t *)r->hdr, *(const uint64_t *)(r->hdr + 8));
	fprintf(stderr, "#   readable %" PRIu64 " bytes in %u iovecs, writable %" PRIu64
		" in %u; expected %s status %u used %u\n",
		r->out_len, r->nout, r->in_len, r->nin,
		r->x == X_CORE ? "core refusal" :
		r->x == X_NOSTATUS ? "no status" : "answer",
		r->status, r->used);
	for (i = 0; i < r->nout && i < 8; i++)
		fprintf(stderr, "#     out %#" PRIx64 "+%u\n", r->out[i].gpa,
			r->out[i].len);
	for (i = 0; i < r->nin && i < 8; i++)
		fprintf(stderr, "#     in  %#" PRIx64 "+%u\n", r->in[i].gpa,
			r->in[i].len);
}

static void __noreturn __printf(2, 3)
fail(const struct req *r, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "# FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	dump_req(r);
	fprintf(stderr, "# reproduce with: %s --backend %s --seed %" PRIu64 " --requests %" PRIu64
		"%s (request %" PRIu64 " of the run)\n",
		prog, o.backend, o.seed, o.requests, o.stress ? " --stress" : "",
		f.seq);
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		fail(NULL, "out of memory");
	return p;
}

static void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (!p)
		fail(NULL, "out of memory");
	return p;
}

static __printf(1, 2) void vlog(const char *fmt, ...);
static void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!o.verbose)
		return;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* ------------------------------------------------------------ randomness */

static uint64_t rnd(uint64_t n)
{
	return n ? hq_below(&f.rng, n) : 0;
}

static bool chance(unsigned int num, unsigned int den)
{
	return hq_chance(&f.rng, num, den);
}

/* --------------------------------------------------------- guest memory */

static inline size_t goff(uint64_t gpa)
{
	return (size_t)(gpa - f.gm.gpa);
}

static inline uint64_t gpa_at(size_t off)
{
	return f.gm.gpa + off;
}

static size_t arena_of(unsigned int q, unsigned int idx)
{
	return f.arena_off + ((size_t)q * o.num + idx) * f.arena_sz;
}

/*
 * A request's memory comes from its queue's pool, not from its head (the
 * head is only known when it is posted).  Every request holds a ring slot
 * while it has an area, so o.num areas per queue are enough.
 */
static int arena_get(unsigned int qi)
{
	struct qstate *q = &f.q[qi];

	if (!q->narena_free)
		return -1;
	return (int)q->arena_free[--q->narena_free];
}

static void arena_put(unsigned int qi, int idx)
{
	if (idx >= 0)
		f.q[qi].arena_free[f.q[qi].narena_free++] = (unsigned int)idx;
}

/* ----------------------------------------------------- the vhost core */

/* translate_desc(): iovecs of [addr, addr + len), split at the regions. */
static int core_translate(uint64_t addr, uint32_t len, struct iovr *iov,
			  unsigned int room)
{
	uint64_t last = addr + len - 1, cur = addr, end;
	unsigned int n = 0, i;

	if (!len)
		return 0;
	if (last < addr || addr < f.gm.gpa || last >= f.gm.gpa + f.gm.size)
		return -EFAULT;
	while (cur <= last) {
		end = f.gm.gpa + f.gm.size;
		for (i = 0; i < f.ncuts; i++)
			if (gpa_at(f.cuts[i]) > cur) {
				end = gpa_at(f.cuts[i]);
				break;
			}
		if (n >= room)
			return -ENOBUFS;
		if (iov) {
			iov[n].gpa = cur;
			iov[n].len = (uint32_t)((last < end - 1 ? last : end - 1) -
						cur + 1);
		}
		n++;
		if (last < end)
			break;
		cur = end;
	}
	return (int)n;
}

/*
 * vhost_get_vq_desc() over the chain @d of @n descriptors as they were
 * handed to hq_add() ("next" below @n is an index into @d, anything else is
 * a ring index).  Fills r->out / r->in; false if the core refuses it.
 */
static bool core_parse(struct req *r, const struct vring_desc *d,
		       unsigned int n, unsigned int num)
{
	static struct iovr out[CORE_IOV], in[CORE_IOV];
	struct iovr tmp[CORE_IOV];
	unsigned int nout = 0, nin = 0, found = 0, i = 0;
	struct vring_desc desc;
	int k, j;

	for (;;) {
		if (i >= n)
			return false;	/* outside the ring (next >= num) */
		if (++found > num)
			return false;	/* loop */
		desc = d[i];
		if (desc.flags & VRING_DESC_F_INDIRECT) {
			const struct vring_desc *t;
			unsigned int count, fi = 0;
			struct vring_desc e;

			if (desc.len % 16)
				return false;
			if (core_translate(desc.addr, desc.len, NULL, CORE_IOV) < 0)
				return false;
			count = desc.len / 16;
			if (count > 65536)
				return false;
			t = ptr_of(&f.gm, desc.addr);
			do {
				if (++fi > count)
					return false;
				memcpy(&e, &t[fi - 1], sizeof(e));
				if (e.flags & VRING_DESC_F_INDIRECT)
					return false;
				k = core_translate(e.addr, e.len, tmp,
						   CORE_IOV - nout - nin);
				if (k < 0)
					return false;
				if (e.flags & VRING_DESC_F_WRITE) {
					for (j = 0; j < k; j++)
						in[nin++] = tmp[j];
				} else {
					if (nin)
						return false;
					for (j = 0; j < k; j++)
						out[nout++] = tmp[j];
				}
			} while (e.flags & VRING_DESC_F_NEXT);
		} else {
			k = core_translate(desc.addr, desc.len, tmp,
					   CORE_IOV - nout - nin);
			if (k < 0)
				return false;
			if (desc.flags & VRING_DESC_F_WRITE) {
				for (j = 0; j < k; j++)
					in[nin++] = tmp[j];
			} else {
				if (nin)
					return false;
				for (j = 0; j < k; j++)
					out[nout++] = tmp[j];
			}
		}
		if (!(desc.flags & VRING_DESC_F_NEXT))
			break;
		if (desc.next >= num)
			return false;
		i = desc.next < n ? desc.next : n;	/* n: not ours */
	}
	r->out = xcalloc(nout, sizeof(*r->out));
	r->in = xcalloc(nin, sizeof(*r->in));
	memcpy(r->out, out, nout * sizeof(*out));
	memcpy(r->in, in, nin * sizeof(*in));
	r->nout = nout;
	r->nin = nin;
	r->out_len = r->in_len = 0;
	for (j = 0; j < (int)nout; j++)
		r->out_len += out[j].len;
	for (j = 0; j < (int)nin; j++)
		r->in_len += in[j].len;
	return true;
}

/* Copy @len bytes from offset @skip of the stream @iov (guest memory). */
static void stream_copy(const struct iovr *iov, unsigned int n, uint64_t skip,
			uint64_t len, uint8_t *dst)
{
	unsigned int i;

	for (i = 0; i < n && len; i++) {
		uint64_t l = iov[i].len, k;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		k = l - skip < len ? l - skip : len;
		memcpy(dst, f.gm.va + goff(iov[i].gpa) + skip, k);
		dst += k;
		len -= k;
		skip = 0;
	}
}

/* ------------------------------------------------ the vhost-blk contract */

/*
 * Whether @ok holds for every piece of the data: @len bytes of the iovecs
 * @iov after the first @skip bytes, each piece at guest address @gpa and
 * @k bytes long.
 */
static bool data_all(const struct iovr *iov, unsigned int n, uint64_t skip,
		     uint64_t len, bool (*ok)(uint64_t gpa, uint64_t k))
{
	unsigned int i;

	for (i = 0; i < n && len; i++) {
		uint64_t l = iov[i].len, k;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		k = l - skip < len ? l - skip : len;
		if (!ok(iov[i].gpa + skip, k))
			return false;
		len -= k;
		skip = 0;
	}
	return true;
}

/* iov_iter_is_aligned() on the data part of a stream. */
static bool piece_aligned(uint64_t gpa, uint64_t k)
{
	return !(gpa & f.addr_mask) && !(k & f.lbs_mask);
}

/* vhost_blk_data_bounded(): no data iovec longer than size_max. */
static bool piece_bounded(uint64_t gpa, uint64_t k)
{
	(void)gpa;
	return k <= VHOST_BLK_SIZE_MAX;
}

static bool data_aligned(const struct iovr *iov, unsigned int n, uint64_t skip,
			 uint64_t len)
{
	return data_all(iov, n, skip, len, piece_aligned);
}

static bool data_bounded(const struct iovr *iov, unsigned int n, uint64_t skip,
			 uint64_t len)
{
	return data_all(iov, n, skip, len, piece_bounded);
}

static bool rw_ok(uint64_t sector, uint64_t len, bool write, bool ro)
{
	if (write && ro)
		return false;
	if (len & (SECT - 1))
		return false;
	if (sector > f.cap || (len / SECT) > f.cap - sector)
		return false;
	if (((sector * SECT) | len) & f.lbs_mask)
		return false;
	return true;
}

/* The feature a range request needs (vhost_blk_range_feature()). */
static unsigned int range_feature(uint32_t type)
{
	if (type == VIRTIO_BLK_T_DISCARD)
		return VIRTIO_BLK_F_DISCARD;
	if (type == VIRTIO_BLK_T_WRITE_ZEROES)
		return VIRTIO_BLK_F_WRITE_ZEROES;
	return VIRTIO_BLK_F_SECURE_ERASE;
}

/* vhost_blk_check_ranges() */
static uint8_t ranges_status(const struct req *r, uint32_t type, bool ro)
{
	uint32_t mask = type == VIRTIO_BLK_T_WRITE_ZEROES ?
			VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
	uint32_t align = f.lbs_mask >> 9;
	uint64_t len = r->out_len - 16;
	const struct virtio_blk_discard_write_zeroes *s = (const void *)r->tab;
	unsigned int i, nr;

	if (ro || !len || len % RSEG)
		return VIRTIO_BLK_S_IOERR;
	if (len / RSEG > MAX_SEG)
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_DISCARD && f.bdev && !f.has_discard)
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_WRITE_ZEROES && !f.has_wz)
		return VIRTIO_BLK_S_UNSUPP;
	if (type == VIRTIO_BLK_T_SECURE_ERASE && !f.has_se)
		return VIRTIO_BLK_S_UNSUPP;
	nr = (unsigned int)(len / RSEG);
	for (i = 0; i < nr; i++)
		if (s[i].flags & ~mask)
			return VIRTIO_BLK_S_UNSUPP;
	for (i = 0; i < nr; i++) {
		uint64_t sec = s[i].sector;
		uint32_t cnt = s[i].num_sectors;

		if (cnt > MAX_SECT || sec > f.cap || cnt > f.cap - sec ||
		    ((sec | cnt) & align))
			return VIRTIO_BLK_S_IOERR;
	}
	return VIRTIO_BLK_S_OK;
}

/*
 * The answer vhost-blk owes @r with the backend read-only or not: status,
 * used length, where the status goes, what the request does to the disk.
 */
static void evaluate(struct req *r, bool ro)
{
	uint64_t in_data, out_data;
	uint32_t type;
	uint64_t sector;

	r->evaluated = true;
	r->sector = 0;
	r->nsect = 0;
	r->napply = 0;
	if (r->core_bad) {
		r->x = X_CORE;
		return;
	}
	if (!r->in_len) {
		r->x = X_NOSTATUS;
		r->used = 0;
		return;
	}
	r->x = X_ANSWER;
	r->status_gpa = r->in[r->nin - 1].gpa + r->in[r->nin - 1].len - 1;
	r->used = 1;
	in_data = r->in_len - 1;
	if (r->out_len < 16) {
		r->mtype = UINT32_MAX;
		r->status = VIRTIO_BLK_S_IOERR;
		return;
	}
	memcpy(&type, r->hdr, 4);
	memcpy(&sector, r->hdr + 8, 8);
	r->mtype = type;
	out_data = r->out_len - 16;
	r->status = VIRTIO_BLK_S_OK;
	switch (type) {
	case VIRTIO_BLK_T_IN:
		if (out_data || !data_bounded(r->in, r->nin, 0, in_data) ||
		    !rw_ok(sector, in_data, false, ro)) {
			r->status = VIRTIO_BLK_S_IOERR;
		} else if (in_data) {
			/* The status byte is not data. */
			if (in_data > BOUNCE_MAX &&
			    !data_aligned(r->in, r->nin, 0, in_data)) {
				r->status = VIRTIO_BLK_S_IOERR;
				break;
			}
			r->sector = sector;
			r->nsect = (uint32_t)(in_data / SECT);
			r->used = (uint32_t)in_data + 1;
		}
		break;
	case VIRTIO_BLK_T_OUT:
		if (in_data || !data_bounded(r->out, r->nout, 16, out_data) ||
		    !rw_ok(sector, out_data, true, ro)) {
			r->status = VIRTIO_BLK_S_IOERR;
		} else if (out_data) {
			if (out_data > BOUNCE_MAX &&
			    !data_aligned(r->out, r->nout, 16, out_data)) {
				r->status = VIRTIO_BLK_S_IOERR;
				break;
			}
			r->sector = sector;
			r->nsect = (uint32_t)(out_data / SECT);
		}
		break;
	case VIRTIO_BLK_T_FLUSH:
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
	case VIRTIO_BLK_T_SECURE_ERASE:
		/* Not negotiated: UNSUPP before anything else. */
		if (!(f.features & VBLK_F(range_feature(type)))) {
			r->status = VIRTIO_BLK_S_UNSUPP;
			break;
		}
		if (in_data) {
			r->status = VIRTIO_BLK_S_IOERR;
			break;
		}
		r->status = ranges_status(r, type, ro);
		if (r->status != VIRTIO_BLK_S_OK)
			break;
		/* Every range is applied; an empty one is a no-op. */
		r->napply = (unsigned int)(out_data / RSEG);
		break;
	case VIRTIO_BLK_T_GET_ID:
		r->used = (uint32_t)(in_data < SERIAL_LEN ? in_data : SERIAL_LEN) + 1;
		break;
	default:
		r->status = VIRTIO_BLK_S_UNSUPP;
		break;
	}
}

/* ------------------------------------------------------------- the disk */

static void lock_add(struct req *r, uint64_t sector, uint64_t n, bool write)
{
	if (!n || sector >= f.cap)
		return;
	if (n > f.cap - sector)
		n = f.cap - sector;
	r->locks = realloc(r->locks, (r->nlocks + 1) * sizeof(*r->locks));
	if (!r->locks)
		fail(r, "out of memory");
	r->locks[r->nlocks++] = (struct lock){ sector, (uint32_t)n, write };
}

/* The disk areas @r may touch if served by a writable backend. */
static void compute_locks(struct req *r)
{
	struct req tmp = *r;
	const struct virtio_blk_discard_write_zeroes *s = (const void *)r->tab;
	uint32_t type;
	unsigned int i;

	evaluate(&tmp, false);
	if (tmp.x != X_ANSWER || tmp.status != VIRTIO_BLK_S_OK)
		return;
	memcpy(&type, r->hdr, 4);
	if (type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_OUT)
		lock_add(r, tmp.sector, tmp.nsect, type == VIRTIO_BLK_T_OUT);
	else if (type == VIRTIO_BLK_T_DISCARD ||
		 type == VIRTIO_BLK_T_WRITE_ZEROES ||
		 type == VIRTIO_BLK_T_SECURE_ERASE)
		for (i = 0; i < tmp.napply; i++)
			lock_add(r, s[i].sector, s[i].num_sectors, true);
}

static bool conflicts(const struct req *r)
{
	unsigned int i;
	uint64_t s;

	for (i = 0; i < r->nlocks; i++)
		for (s = r->locks[i].sector;
		     s < r->locks[i].sector + r->locks[i].n; s++)
			if (f.wlock[s] || (r->locks[i].write && f.rlock[s]))
				return true;
	return false;
}

static void locks_take(struct req *r, int d)
{
	unsigned int i;
	uint64_t s;

	for (i = 0; i < r->nlocks; i++)
		for (s = r->locks[i].sector;
		     s < r->locks[i].sector + r->locks[i].n; s++) {
			if (r->locks[i].write)
				f.wlock[s] += d;
			else
				f.rlock[s] += d;
		}
	r->locked = d > 0;
}

/* Does @buf hold what the model says sector @s holds?  Learns zeroes. */
static bool sector_matches(uint64_t s, const uint8_t *buf)
{
	uint32_t g = f.gen[s];

	if (g == GEN_ANY)
		return true;
	if (g == GEN_ZERO ? hq_is_zero(buf, SECT) :
			    !hq_sector_diff(buf, f.dseed, g, s)) {
		f.maybe0[s] = 0;
		return true;
	}
	if (f.maybe0[s] && hq_is_zero(buf, SECT)) {
		f.gen[s] = GEN_ZERO;
		f.maybe0[s] = 0;
		f.learned_zero++;
		return true;
	}
	/*
	 * A discarded sector's content is undefined until it is written
	 * again, short of data it never held: each byte the old one or 0.
	 */
	if (f.discarded[s] != GEN_ZERO) {
		uint8_t old[SECT];
		unsigned int i;

		hq_sector_fill(old, f.dseed, f.discarded[s], s);
		for (i = 0; i < SECT; i++)
			if (buf[i] && buf[i] != old[i])
				return false;
		f.torn_discards++;
		return true;
	}
	return false;
}

/* The last answered requests that touched (or could have) the disk. */
#define HIST	8192
static struct hist {
	uint64_t seq;
	int label;
	uint32_t type;
	uint8_t status;
	unsigned int nr;
	uint64_t sector[4];
	uint32_t n[4];
} hist[HIST];
static unsigned int nhist;

static void hist_add(const struct req *r)
{
	struct hist *h = &hist[nhist++ % HIST];
	const struct virtio_blk_discard_write_zeroes *s = (const void *)r->tab;
	unsigned int i;

	memset(h, 0, sizeof(*h));
	h->seq = r->seq;
	h->label = r->label;
	h->type = r->mtype;
	h->status = r->status;
	if (r->nsect) {
		h->nr = 1;
		h->sector[0] = r->sector;
		h->n[0] = r->nsect;
	}
	for (i = 0; s && i < (r->tab_len / RSEG) && h->nr < 4; i++) {
		h->sector[h->nr] = s[i].sector;
		h->n[h->nr++] = s[i].num_sectors;
	}
}

static void explain_history(uint64_t lo, uint64_t hi)
{
	unsigned int i, k;

	for (i = nhist > HIST ? nhist - HIST : 0; i < nhist; i++) {
		const struct hist *h = &hist[i % HIST];

		for (k = 0; k < h->nr; k++)
			if (h->sector[k] < hi && h->sector[k] + h->n[k] > lo)
				break;
		if (k == h->nr)
			continue;
		fprintf(stderr, "#   request #%" PRIu64 " (%s) type %u status %u:", h->seq,
			label_name[h->label], h->type, h->status);
		for (k = 0; k < h->nr; k++)
			fprintf(stderr, " %" PRIu64 "+%u", h->sector[k], h->n[k]);
		fprintf(stderr, "\n");
	}
}

/* What each sector of a failed read held, and who wrote it last. */
static void explain_read(const struct req *r, const uint8_t *buf)
{
	uint8_t *now = NULL;
	uint32_t k;

	if (!posix_memalign((void **)&now, 4096, (size_t)r->nsect * SECT) &&
	    pread(f.io_fd, now, (size_t)r->nsect * SECT,
		  (off_t)(r->sector * SECT)) != (ssize_t)(r->nsect * SECT)) {
		free(now);
		now = NULL;
	}

	for (k = 0; k < r->nsect && k < 64; k++) {
		uint64_t s = r->sector + k;
		const uint8_t *p = buf + k * SECT;
		uint32_t g = f.gen[s];
		const char *what = hq_is_zero(p, SECT) ? "zeroes" :
			g < GEN_ANY && !hq_sector_diff(p, f.dseed, g, s) ?
			"as modelled" : "other data";

		fprintf(stderr, "#   sector %" PRIu64 ": %s (on the disk now: %s); "
			"model generation %u%s, last changed by request #%u (%s)\n",
			s, what, !now ? "?" : !memcmp(now + k * SECT, p, SECT) ?
			"the same" : hq_is_zero(now + k * SECT, SECT) ? "zeroes" :
			"different", g, f.maybe0[s] ? " or zeroes" : "",
			f.writer[s],
			f.writer[s] ? label_name[f.writer_label[s]] : "none");
	}
	free(now);
	fprintf(stderr, "#   answered requests around it, oldest first:\n");
	explain_history(r->sector > 64 ? r->sector - 64 : 0,
			r->sector + r->nsect + 64);
}

static void model_set(const struct req *r, uint64_t sector, uint64_t n,
		      uint32_t gen, bool maybe0)
{
	uint64_t s;

	for (s = sector; s < sector + n && s < f.cap; s++) {
		f.writer[s] = (uint32_t)r->seq;
		f.writer_label[s] = (uint8_t)r->label;
		if (maybe0) {
			/* Discarded: what it held, or zeroes. */
			if (f.gen[s] != GEN_ZERO)
				f.maybe0[s] = 1;
			if (f.gen[s] < GEN_ANY)
				f.discarded[s] = f.gen[s];
		} else {
			f.gen[s] = gen;
			f.maybe0[s] = 0;
			f.discarded[s] = GEN_ZERO;
		}
	}
}

/* -------------------------------------------------------- the device */

static void check_ioctl(int err, const char *what)
{
	if (err)
		fail(NULL, "%s failed: %s", what, strerror(-err));
}

enum { SETUP_OWNED, SETUP_REOPEN };

static void setup_device(int how)
{
	unsigned int i;

	if (how == SETUP_REOPEN) {
		f.dev = vblk_open_fd();
		if (f.dev < 0)
			fail(NULL, "reopening %s: %s", VBLK_DEV_PATH,
			     strerror(-f.dev));
	}
	check_ioctl(vblk_set_features(f.dev, f.features), "SET_FEATURES");
	check_ioctl(hq_set_mem_table(f.dev, &f.gm, f.cuts, f.ncuts),
		    "SET_MEM_TABLE");
	for (i = 0; i < o.nq; i++) {
		struct qstate *q = &f.q[i];

		check_ioctl(vblk_setup_vq(f.dev, &q->vq, q->vq.avail_idx),
			    "vring setup");
		check_ioctl(hq_set_err_fd(f.dev, i, q->err_fd), "SET_VRING_ERR");
		q->busyloop_us = 0;
	}
	check_ioctl(vblk_set_serial(f.dev, f.serial[f.serial_epoch]),
		    "SET_SERIAL");
	if (f.attached)
		check_ioctl(vblk_set_backend(f.dev, f.ro ? f.ro_fd : f.be_fd),
			    "SET_BACKEND");
}

static void kick_queue(unsigned int qi, bool force)
{
	int r = force ? vq_kick_force(&f.q[qi].vq) : vq_kick(&f.q[qi].vq);

	if (r < 0)
		fail(NULL, "kick of queue %u: %s", qi, strerror(-r));
}

/* ------------------------------------------------------ completing */

static void req_free(struct req *r)
{
	free(r->snap);
	free(r->out);
	free(r->in);
	free(r->tab);
	free(r->locks);
	free(r);
}

/* Give the request's memory back its canaries and drop it. */
static void req_retire(struct req *r)
{
	if (r->locked)
		locks_take(r, -1);
	hq_canary_fill(&f.gm, r->aoff, r->alen);
	if (r->big)
		f.big_busy = false;
	arena_put(r->q, r->arena);
	f.outstanding--;
	req_free(r);
}

static void epoch_count(const struct req *r)
{
	struct epoch *e = &f.ep;

	if (r->status == VIRTIO_BLK_S_UNSUPP) {
		e->unsupp++;
		return;
	}
	if (r->status == VIRTIO_BLK_S_IOERR)
		e->ioerr++;
	switch (r->mtype) {
	case VIRTIO_BLK_T_IN:
		e->in++;
		if (r->status == VIRTIO_BLK_S_OK)
			e->bytes_read += r->in_len - 1;
		break;
	case VIRTIO_BLK_T_OUT:
		e->out++;
		if (r->status == VIRTIO_BLK_S_OK)
			e->bytes_written += r->out_len - 16;
		break;
	case VIRTIO_BLK_T_FLUSH:
		e->flush++;
		break;
	case VIRTIO_BLK_T_GET_ID:
		e->get_id++;
		break;
	case VIRTIO_BLK_T_DISCARD:
		e->discard++;
		break;
	case VIRTIO_BLK_T_WRITE_ZEROES:
		e->wz++;
		break;
	}
}

static void resolve_repaired(struct req *rep);

/* The device answered @r with @used: check everything, update the model. */
static void complete(struct req *r, uint32_t used)
{
	uint8_t *want, *got = f.gm.va + r->aoff;
	uint32_t type;
	size_t i;

	if (!r->evaluated)
		fail(r, "answered before a backend was attached");
	if (r->x == X_CORE)
		fail(r, "the device answered (used length %u) a chain the vhost core must refuse",
		     used);
	if (r->x == X_NOSTATUS) {
		if (used)
			fail(r, "a chain without a status byte came back with used length %u",
			     used);
		f.st_nostatus++;
	} else {
		uint8_t st = f.gm.va[goff(r->status_gpa)];

		if (st != r->status || used != r->used)
			fail(r, "answered status %u (%s) used %u, expected status %u (%s) used %u",
			     st, blk_status_name(st), used, r->status,
			     blk_status_name(r->status), r->used);
		if (st == VIRTIO_BLK_S_OK)
			f.st_ok++;
		else if (st == VIRTIO_BLK_S_IOERR)
			f.st_ioerr++;
		else
			f.st_unsupp++;
		epoch_count(r);
	}

	/* Expected image of the request's memory. */
	want = xmalloc(r->alen);
	memcpy(want, r->snap, r->alen);
	memcpy(&type, r->hdr, 4);
	if (r->x == X_ANSWER && r->status == VIRTIO_BLK_S_OK) {
		if (r->mtype == VIRTIO_BLK_T_IN && r->nsect) {
			uint64_t len = (uint64_t)r->nsect * SECT;
			uint8_t *buf = xmalloc(len);
			uint32_t k;

			stream_copy(r->in, r->nin, 0, len, buf);
			for (k = 0; k < r->nsect; k++)
				if (!sector_matches(r->sector + k, buf + k * SECT)) {
					uint32_t g = f.gen[r->sector + k];

					explain_read(r, buf);
					fail(r, "read of sector %" PRIu64
					     " returned wrong data (model: %s%s, byte 0: %02x, diff at %u)",
					     r->sector + k,
					     g == GEN_ZERO ? "zeroes" : "pattern",
					     f.maybe0[r->sector + k] ? " or zeroes" : "",
					     buf[k * SECT],
					     g < GEN_ANY ?
					     hq_sector_diff(buf + k * SECT, f.dseed,
							    g, r->sector + k) : 0);
				}
			f.reads_checked++;
			f.bytes_checked += len;
			/* Verified: it is what the device was to write there. */
			{
				uint64_t done = 0;

				for (i = 0; i < r->nin && done < len; i++) {
					uint64_t k2 = r->in[i].len < len - done ?
						      r->in[i].len : len - done;

					memcpy(want + goff(r->in[i].gpa) - r->aoff,
					       buf + done, k2);
					done += k2;
				}
			}
			free(buf);
		} else if (r->mtype == VIRTIO_BLK_T_GET_ID) {
			uint32_t k = r->used - 1, e, done = 0;
			uint8_t id[SERIAL_LEN];

			stream_copy(r->in, r->nin, 0, k, id);
			for (e = r->serial_epoch; e <= f.serial_epoch; e++)
				if (!memcmp(id, f.serial[e], k))
					break;
			if (e > f.serial_epoch)
				fail(r, "GET_ID returned a serial never set");
			for (i = 0; i < r->nin && done < k; i++) {
				uint32_t k2 = r->in[i].len < k - done ?
					      r->in[i].len : k - done;

				memcpy(want + goff(r->in[i].gpa) - r->aoff,
				       id + done, k2);
				done += k2;
			}
		}
	}
	if (r->x == X_ANSWER)
		want[goff(r->status_gpa) - r->aoff] = r->status;
	if (memcmp(want, got, r->alen)) {
		for (i = 0; want[i] == got[i]; i++)
			;
		fail(r, "guest memory %#" PRIx64
		     " (byte %zu of the request's %zu) is %#x, expected %#x",
		     gpa_at(r->aoff + i), i, r->alen, got[i], want[i]);
	}
	free(want);

	/* The disk. */
	if (r->x == X_ANSWER && (r->nlocks || r->nsect))
		hist_add(r);
	if (r->x == X_ANSWER) {
		const struct virtio_blk_discard_write_zeroes *s =
			(const void *)r->tab;
		unsigned int k;

		if (r->mtype == VIRTIO_BLK_T_OUT && r->status == VIRTIO_BLK_S_OK &&
		    r->nsect)
			model_set(r, r->sector, r->nsect, r->dgen, false);
		for (k = 0; k < r->napply; k++) {
			if (r->mtype == VIRTIO_BLK_T_WRITE_ZEROES)
				model_set(r, s[k].sector, s[k].num_sectors,
					  GEN_ZERO, false);
			else if (r->mtype == VIRTIO_BLK_T_SECURE_ERASE)
				model_set(r, s[k].sector, s[k].num_sectors,
					  GEN_ANY, false);
			else if (!f.bdev)
				model_set(r, s[k].sector, s[k].num_sectors,
					  GEN_ZERO, false);
			else
				model_set(r, s[k].sector, s[k].num_sectors, 0,
					  true);
		}
	}
	if (r->label == L_REPAIR)
		resolve_repaired(r);
	req_retire(r);
	f.last_progress = now_ms();
}

static void harvest(unsigned int qi)
{
	struct vq *vq = &f.q[qi].vq;
	struct vq_used u;

	while (vq_get_used(vq, &u)) {
		if (u.bad)
			fail(NULL,
			     "queue %u: the used ring returned id %u, which is not an outstanding head",
			     qi, u.id);
		complete(u.token, u.len);
	}
}

static void harvest_all(void)
{
	unsigned int i;

	for (i = 0; i < o.nq; i++)
		harvest(i);
}

/* --------------------------------------------------- refused chains */

static void bad_push(struct qstate *q, struct bad *b)
{
	b->next = NULL;
	if (q->bad_tail)
		q->bad_tail->next = b;
	else
		q->bad = b;
	q->bad_tail = b;
	if (q->bad == b)
		b->err_mark = q->err_seen;
}

static void bad_pop(struct qstate *q)
{
	struct bad *b = q->bad;

	q->bad = b->next;
	if (!q->bad)
		q->bad_tail = NULL;
	else
		q->bad->err_mark = q->err_seen;
	if (b->kind == C_IDX_JUMP)
		q->no_post = false;
}

/* The repair chain was answered: the device is past the refused item. */
static void resolve_repaired(struct req *rep)
{
	struct bad *b = rep->bad;
	struct qstate *q = &f.q[rep->q];

	if (b->chain) {
		hq_reclaim(&q->vq, (uint16_t)b->chain->head);
		req_retire(b->chain);
	}
	free(b);
}

/*
 * If queue @qi's first refused item has been met by the core (an error was
 * reported since it became first, and the device's avail index stopped at
 * it), replace it the way a guest can.  Returns true if it did.
 */
static bool try_repair(unsigned int qi)
{
	struct qstate *q = &f.q[qi];
	struct bad *b = q->bad;
	uint16_t base;

	if (!b || q->err_seen == b->err_mark || !f.attached)
		return false;
	check_ioctl(hq_vring_base(f.dev, qi, &base), "GET_VRING_BASE");
	if (base != b->pos)
		return false;
	f.repairs++;
	f.st_core++;
	bad_pop(q);
	if (b->kind == C_IDX_JUMP) {
		hq_set_avail_idx(&q->vq, b->real_idx);
		free(b);
	} else {
		hq_set_avail_entry(&q->vq, b->pos, (uint16_t)b->repair->head);
	}
	kick_queue(qi, true);
	f.last_progress = now_ms();
	return true;
}

static void read_errors(void)
{
	unsigned int i;

	for (i = 0; i < o.nq; i++)
		f.q[i].err_seen += hq_eventfd_read(f.q[i].err_fd);
}

static void dump_queues(void)
{
	unsigned int i;

	for (i = 0; i < o.nq; i++) {
		struct qstate *q = &f.q[i];
		uint16_t base = 0;

		hq_vring_base(f.dev, i, &base);
		fprintf(stderr,
			"#   queue %u: %u in flight, avail %u (in memory %u), used %u (harvested %u), device base %u, errors %"
			PRIu64 ", first refused item: %s pos %u mark %" PRIu64 "%s\n",
			i, q->vq.inflight, q->vq.avail_idx, q->vq.avail->idx,
			q->vq.used->idx, q->vq.last_used_idx, base, q->err_seen,
			q->bad ? label_name[q->bad->kind] : "none",
			q->bad ? q->bad->pos : 0, q->bad ? q->bad->err_mark : 0,
			q->no_post ? ", no posting" : "");
	}
	fprintf(stderr, "#   backend %s%s\n", f.attached ? "attached" : "detached",
		f.ro ? " read-only" : "");
}

/* Wait up to @ms for any completion or error, then handle them. */
static void pump(int ms)
{
	struct pollfd pfd[2 * MAX_Q];
	bool stuck = false;
	unsigned int i;
	int64_t now;

	harvest_all();
	for (i = 0; i < o.nq; i++) {
		pfd[2 * i] = (struct pollfd){ .fd = f.q[i].vq.call_fd,
					      .events = POLLIN };
		pfd[2 * i + 1] = (struct pollfd){ .fd = f.q[i].err_fd,
						  .events = POLLIN };
	}
	if (ms && poll(pfd, 2 * o.nq, ms) < 0 && errno != EINTR)
		fail(NULL, "poll: %s", strerror(errno));
	for (i = 0; i < o.nq; i++)
		vq_drain_calls(&f.q[i].vq);
	read_errors();
	harvest_all();
	for (i = 0; i < o.nq; i++)
		while (try_repair(i))
			harvest(i);

	now = now_ms();
	for (i = 0; i < o.nq && !stuck; i++)
		stuck = f.q[i].vq.inflight || f.q[i].bad;
	if (stuck && f.attached && now - f.last_progress > IDLE_MS &&
	    now - f.last_idle_kick > IDLE_MS) {
		/*
		 * Requests posted without a kick (or whose kick was
		 * suppressed), a refused item not met yet: a guest waiting
		 * for an answer kicks.
		 */
		for (i = 0; i < o.nq; i++)
			if (f.q[i].vq.inflight || f.q[i].bad)
				kick_queue(i, true);
		f.idle_kicks++;
		f.last_idle_kick = now;
	}
	if (now - f.last_progress > HANG_MS) {
		dump_queues();
		fail(NULL, "no progress for %d s while %s, %" PRIu64 " requests outstanding",
		     HANG_MS / 1000, f.waiting, f.outstanding);
	}
}

/* A guest about to wait for answers kicks every queue it has used. */
static void wait_begin(const char *what)
{
	unsigned int i;

	f.last_progress = now_ms();
	f.waiting = what;
	if (!f.attached)
		return;
	for (i = 0; i < o.nq; i++)
		if (f.q[i].vq.inflight)
			kick_queue(i, true);
}

static void wait_all(void)
{
	if (!f.outstanding)
		return;
	wait_begin("waiting for every answer");
	while (f.outstanding)
		pump(10);
}

/* --------------------------------------------------------- control */

/*
 * After VHOST_RESET_OWNER or close: everything the device had taken was
 * answered; what is left was never taken and must be untouched.
 */
static void drop_outstanding(void)
{
	unsigned int qi, h;

	harvest_all();
	for (qi = 0; qi < o.nq; qi++) {
		struct qstate *q = &f.q[qi];

		while (q->bad) {
			struct bad *b = q->bad;

			bad_pop(q);
			if (b->kind == C_IDX_JUMP)
				hq_set_avail_idx(&q->vq, b->real_idx);
			free(b);
		}
		q->no_post = false;
		for (h = 0; h < q->vq.num; h++) {
			struct req *r;

			if (!q->vq.slot[h].busy)
				continue;
			r = q->vq.slot[h].token;
			if (memcmp(f.gm.va + r->aoff, r->snap, r->alen))
				fail(r,
				     "a request the device never answered had its memory changed");
			hq_reclaim(&q->vq, (uint16_t)h);
			f.lost++;
			req_retire(r);
		}
	}
}

static void check_epoch(void)
{
	struct epoch sum = { 0 };
	struct vhost_blk_vring_stats st;
	unsigned int i;

	for (i = 0; i < o.nq; i++) {
		check_ioctl(hq_stats(f.dev, i, true, &st), "GET_VRING_STATS");
		sum.in += st.reqs_in;
		sum.out += st.reqs_out;
		sum.flush += st.reqs_flush;
		sum.get_id += st.reqs_get_id;
		sum.discard += st.reqs_discard;
		sum.wz += st.reqs_write_zeroes;
		sum.unsupp += st.reqs_unsupp;
		sum.ioerr += st.reqs_ioerr;
		sum.bytes_read += st.bytes_read;
		sum.bytes_written += st.bytes_written;
		if (st.inflight_max > f.depth_max)
			f.depth_max = st.inflight_max;
	}
	{
#define CMP(field) do {							\
	if (sum.field != f.ep.field)					\
		fail(NULL, "VHOST_BLK_GET_VRING_STATS: " #field " is %" PRIu64	\
		     ", %" PRIu64 " were answered",				\
		     sum.field, f.ep.field);				\
} while (0)
		CMP(in); CMP(out); CMP(flush); CMP(get_id); CMP(discard);
		CMP(wz); CMP(unsupp); CMP(ioerr); CMP(bytes_read);
		CMP(bytes_written);
#undef CMP
		f.epochs_checked++;
	}
	memset(&f.ep, 0, sizeof(f.ep));
}

static void reevaluate_outstanding(void)
{
	unsigned int qi, h;

	for (qi = 0; qi < o.nq; qi++)
		for (h = 0; h < f.q[qi].vq.num; h++) {
			struct req *r;

			if (!f.q[qi].vq.slot[h].busy)
				continue;
			r = f.q[qi].vq.slot[h].token;
			evaluate(r, f.ro);
		}
}

static void detach(void)
{
	check_ioctl(vblk_set_backend(f.dev, -1), "SET_BACKEND -1");
	f.attached = false;
	/* Everything taken was answered. */
	harvest_all();
}

static void attach(bool ro)
{
	f.ro = ro;
	reevaluate_outstanding();
	check_ioctl(vblk_set_backend(f.dev, ro ? f.ro_fd : f.be_fd),
		    ro ? "SET_BACKEND (read-only)" : "SET_BACKEND");
	f.attached = true;
	f.last_progress = now_ms();
}

static void do_op(int op)
{
	unsigned int i;

	f.ops[op]++;
	vlog("request %" PRIu64 ": %s (%" PRIu64 " outstanding)", f.seq,
	     op_name[op], f.outstanding);
	switch (op) {
	case OP_MEMTABLE:
		check_ioctl(hq_set_mem_table(f.dev, &f.gm, f.cuts, f.ncuts),
			    "SET_MEM_TABLE");
		break;
	case OP_REATTACH:
		detach();
		/* Batches posted meanwhile wait for the backend. */
		f.detached_batches = 1 + (unsigned int)rnd(3);
		break;
	case OP_RO:
		detach();
		attach(true);
		f.ro_batches = 2 + (unsigned int)rnd(6);
		break;
	case OP_RESET:
		check_ioctl(VBLK_IOCTL(f.dev, VHOST_RESET_OWNER, NULL),
			    "VHOST_RESET_OWNER");
		drop_outstanding();
		/* Only an owner may reset the counters, which check_epoch does. */
		check_ioctl(VBLK_IOCTL(f.dev, VHOST_SET_OWNER, NULL),
			    "VHOST_SET_OWNER after VHOST_RESET_OWNER");
		check_epoch();
		setup_device(SETUP_OWNED);
		break;
	case OP_REOPEN:
		close(f.dev);
		drop_outstanding();
		/* The counters went with the device. */
		memset(&f.ep, 0, sizeof(f.ep));
		setup_device(SETUP_REOPEN);
		break;
	case OP_SERIAL: {
		char *s;

		f.serial = realloc(f.serial, (f.serial_epoch + 2) * SERIAL_LEN);
		if (!f.serial)
			fail(NULL, "out of memory");
		s = f.serial[f.serial_epoch + 1];
		for (i = 0; i < SERIAL_LEN; i++)
			s[i] = (char)rnd(256);
		check_ioctl(vblk_set_serial(f.dev, s), "SET_SERIAL");
		/* vblk_set_serial() stops at a NUL: so does the device's. */
		{
			size_t l = strnlen(s, SERIAL_LEN);

			memset(s + l, 0, SERIAL_LEN - l);
		}
		f.serial_epoch++;
		break;
	}
	case OP_POLL: {
		struct vhost_vring_state st = { .index = (unsigned int)rnd(o.nq) };
		struct vhost_blk_vring_poll p = { .index = st.index };
		static const unsigned int us[] = { 0, 0, 10, 50, 100 };

		st.num = us[rnd(5)];
		check_ioctl(VBLK_IOCTL(f.dev, VHOST_SET_VRING_BUSYLOOP_TIMEOUT, &st),
			    "SET_VRING_BUSYLOOP_TIMEOUT");
		f.q[st.index].busyloop_us = st.num;
		p.flags = chance(1, 2) ? VHOST_BLK_POLL_ADAPTIVE : 0;
		p.grow = (uint32_t)rnd(4);
		p.shrink = (uint32_t)rnd(4);
		check_ioctl(VBLK_IOCTL(f.dev, VHOST_BLK_SET_VRING_POLL, &p),
			    "SET_VRING_POLL");
		break;
	}
	case OP_STATS: {
		struct vhost_blk_vring_stats st;
		struct virtio_blk_config cfg;

		check_ioctl(hq_stats(f.dev, (unsigned int)rnd(o.nq), false, &st),
			    "GET_VRING_STATS");
		if (f.attached) {
			check_ioctl(vblk_get_config(f.dev, &cfg),
				    "GET_CONFIG");
			if (cfg.capacity != f.cap)
				fail(NULL, "GET_CONFIG: capacity %llu, expected %" PRIu64,
				     (unsigned long long)cfg.capacity, f.cap);
		}
		break;
	}
	}
}

/* ------------------------------------------------------- generation */

/* A logical request before layout. */
struct spec {
	int label;
	uint8_t *r;			/* readable stream */
	uint32_t rlen;
	uint32_t wlen;			/* writable stream, status included */
	uint32_t dgen;
	bool big;
	int core;			/* C_* to apply after layout, or 0 */
};

static void spec_hdr(struct spec *s, uint32_t type, uint64_t sector,
		     uint32_t payload)
{
	struct virtio_blk_outhdr h = { .type = type, .ioprio = (uint32_t)rnd(8),
				       .sector = sector };

	s->rlen = 16 + payload;
	s->r = xmalloc(s->rlen);
	memcpy(s->r, &h, 16);
}

/* A sector for a valid request of @n sectors. */
static uint64_t pick_sector(uint32_t n)
{
	uint64_t lim;

	if (n >= f.cap)
		return 0;
	if (chance(3, 100))
		return f.cap - n - rnd(n + 16 < f.cap - n ? n + 16 : 1);
	lim = chance(9, 10) ? o.window : f.cap;
	if (lim > f.cap)
		lim = f.cap;
	if (n >= lim)
		return 0;
	return rnd(lim - n + 1);
}

static uint32_t pick_nsect(void)
{
	unsigned int c = (unsigned int)rnd(100);

	if (c < 20)
		return 1;
	if (c < 60)
		return 2 + (uint32_t)rnd(7);
	if (c < 85)
		return 9 + (uint32_t)rnd(24);
	return 33 + (uint32_t)rnd(96);
}

static void fill_pattern(uint8_t *dst, uint64_t sector, uint32_t len,
			 uint32_t gen)
{
	uint8_t sec[SECT];
	uint32_t done;

	for (done = 0; done < len; done += SECT, sector++) {
		uint32_t k = len - done < SECT ? len - done : SECT;

		hq_sector_fill(sec, f.dseed, gen, sector);
		memcpy(dst + done, sec, k);
	}
}

static void gen_rw(struct spec *s, bool write, uint32_t nsect, uint64_t sector)
{
	uint32_t len = nsect * SECT;

	if (write) {
		s->dgen = f.next_gen++;
		spec_hdr(s, VIRTIO_BLK_T_OUT, sector, len);
		fill_pattern(s->r + 16, sector, len, s->dgen);
		s->wlen = 1;
	} else {
		spec_hdr(s, VIRTIO_BLK_T_IN, sector, 0);
		s->wlen = len + 1;
	}
}

static void gen_ranges(struct spec *s, uint32_t type, unsigned int nseg,
		       bool valid_flags)
{
	struct virtio_blk_discard_write_zeroes seg;
	unsigned int i;

	spec_hdr(s, type, 0, nseg * RSEG);
	for (i = 0; i < nseg; i++) {
		/* --stress keeps ranges small: they lock what they cover. */
		uint32_t n = chance(1, 10) && !o.stress ?
			     65 + (uint32_t)rnd(1984) : 1 + (uint32_t)rnd(64);

		seg.sector = pick_sector(n);
		seg.num_sectors = n;
		seg.flags = type == VIRTIO_BLK_T_WRITE_ZEROES && valid_flags &&
			    chance(1, 2) ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
		memcpy(s->r + 16 + i * RSEG, &seg, RSEG);
	}
	s->wlen = 1;
}

static unsigned int nranges(void)
{
	if (chance(1, 4) && !o.stress)
		return 1 + (unsigned int)rnd(MAX_SEG);
	return 1 + (unsigned int)rnd(3);
}

static void gen_valid(struct spec *s)
{
	unsigned int c = (unsigned int)rnd(100);

	if (c < 32) {
		s->label = L_IN;
		gen_rw(s, false, pick_nsect(), 0);
		memcpy(s->r + 8, &(uint64_t){ pick_sector(
		       (s->wlen - 1) / SECT) }, 8);
	} else if (c < 64) {
		uint32_t n = pick_nsect();

		s->label = L_OUT;
		gen_rw(s, true, n, pick_sector(n));
	} else if (c < 70) {
		s->label = L_FLUSH;
		spec_hdr(s, VIRTIO_BLK_T_FLUSH, rnd(2) ? rnd(1000) : 0, 0);
		s->wlen = 1;
	} else if (c < 75) {
		s->label = L_GET_ID;
		spec_hdr(s, VIRTIO_BLK_T_GET_ID, 0, 0);
		s->wlen = (chance(1, 2) ? SERIAL_LEN : SERIAL_LEN + (uint32_t)rnd(600)) + 1;
	} else if (c < 86) {
		s->label = L_DISCARD;
		gen_ranges(s, VIRTIO_BLK_T_DISCARD, nranges(), true);
	} else if (c < 98) {
		s->label = L_WZ;
		gen_ranges(s, VIRTIO_BLK_T_WRITE_ZEROES, nranges(), true);
	} else {
		s->label = L_SE;
		gen_ranges(s, VIRTIO_BLK_T_SECURE_ERASE, 1, true);
	}
}

/* A 1 MiB+ request in the big area: aligned (served) or not (IOERR). */
static void gen_big(struct spec *s, bool misaligned)
{
	uint32_t nsect = 2048 + (uint32_t)rnd(1024);

	s->big = true;
	s->label = misaligned ? M_BIG_MISALIGNED : L_BIG;
	if (chance(1, 2))
		gen_rw(s, true, nsect, pick_sector(nsect));
	else {
		gen_rw(s, false, nsect, 0);
		memcpy(s->r + 8, &(uint64_t){ pick_sector(nsect) }, 8);
	}
}

static const uint32_t zone_types[] = {
	VIRTIO_BLK_T_GET_LIFETIME, VIRTIO_BLK_T_ZONE_APPEND,
	VIRTIO_BLK_T_ZONE_REPORT, VIRTIO_BLK_T_ZONE_OPEN,
	VIRTIO_BLK_T_ZONE_CLOSE, VIRTIO_BLK_T_ZONE_FINISH,
	VIRTIO_BLK_T_ZONE_RESET, VIRTIO_BLK_T_ZONE_RESET_ALL,
};

static bool known_type(uint32_t t)
{
	return t == VIRTIO_BLK_T_IN || t == VIRTIO_BLK_T_OUT ||
	       t == VIRTIO_BLK_T_FLUSH || t == VIRTIO_BLK_T_GET_ID ||
	       t == VIRTIO_BLK_T_DISCARD || t == VIRTIO_BLK_T_WRITE_ZEROES ||
	       t == VIRTIO_BLK_T_SECURE_ERASE;
}

/* One malformation the module must answer. */
static void gen_malformed(struct spec *s)
{
	int m = M_UNKNOWN_TYPE + (int)rnd(M_GET_ID_SHORT - M_UNKNOWN_TYPE + 1);
	uint32_t n = pick_nsect(), t;
	uint8_t *junk;
	uint32_t k;

	s->label = m;
	switch (m) {
	case M_UNKNOWN_TYPE:
		do {
			t = (uint32_t)(chance(1, 2) ? rnd(64) : hq_rand(&f.rng));
		} while (known_type(t));
		spec_hdr(s, t, rnd(f.cap), chance(1, 2) ? 512 : 0);
		s->wlen = 1 + (chance(1, 2) ? 512 : 0);
		break;
	case M_ZONE_TYPE:
		spec_hdr(s, zone_types[rnd(ARRAY_SIZE(zone_types))],
			 rnd(f.cap), 0);
		s->wlen = 1 + (uint32_t)rnd(4096);
		break;
	case M_SHORT_HDR:
		gen_rw(s, chance(1, 2), n, pick_sector(n));
		s->rlen = (uint32_t)rnd(16);
		s->wlen = 1 + (chance(1, 2) ? n * SECT : 0);
		break;
	case M_HDR_WRITABLE:
		gen_rw(s, chance(1, 2), n, pick_sector(n));
		s->wlen = s->rlen + 1;
		s->rlen = 0;
		break;
	case M_IN_RDATA:
		gen_rw(s, false, n, pick_sector(n));
		k = chance(1, 2) ? 1 + (uint32_t)rnd(511) : SECT * (1 + (uint32_t)rnd(8));
		junk = realloc(s->r, 16 + k);
		if (!junk)
			fail(NULL, "out of memory");
		s->r = junk;
		memset(s->r + 16, 0x5a, k);
		s->rlen = 16 + k;
		if (chance(1, 3))
			s->wlen = 1;
		break;
	case M_OUT_WDATA:
		gen_rw(s, true, n, pick_sector(n));
		s->wlen = 1 + (chance(1, 2) ? 1 + (uint32_t)rnd(511) : SECT);
		if (chance(1, 3))
			s->rlen = 16;
		break;
	case M_RANGE_WDATA:
		gen_ranges(s, chance(1, 2) ? VIRTIO_BLK_T_DISCARD :
			   VIRTIO_BLK_T_WRITE_ZEROES, 1 + (unsigned int)rnd(4), true);
		s->wlen = 1 + 1 + (uint32_t)rnd(1024);
		break;
	case M_BAD_LEN:
		k = 1 + (uint32_t)rnd(511);
		if (chance(1, 2)) {
			gen_rw(s, true, n, pick_sector(n));
			s->rlen -= k;	/* n * 512 - k bytes */
		} else {
			gen_rw(s, false, n, pick_sector(n));
			s->wlen = chance(1, 2) ? s->wlen - k : s->wlen + k;
		}
		break;
	case M_PAST_CAP: {
		uint64_t sec;

		k = (uint32_t)rnd(3);
		sec = k == 0 ? f.cap - rnd(n < f.cap ? n : 1) : k == 1 ? f.cap :
		      f.cap + rnd(1ULL << 40);
		if (k == 0 && n < 2)
			n = 2;
		gen_rw(s, chance(1, 2), n, sec);
		memcpy(s->r + 8, &sec, 8);
		break;
	}
	case M_WRAP: {
		/* sector * 512 wraps (mod 2^64) into the hot area. */
		uint64_t low = rnd(o.window), sec;

		k = (uint32_t)rnd(4);
		sec = k == 0 ? (1ULL << 55) + low :
		      k == 1 ? ((1 + rnd(511)) << 55) + low :
		      k == 2 ? ~0ULL - rnd(64) : (1ULL << 55) - rnd(4);
		if (chance(1, 2)) {
			gen_rw(s, true, n, sec);
		} else if (chance(1, 2)) {
			gen_rw(s, false, n, 0);
			memcpy(s->r + 8, &sec, 8);
		} else {
			gen_ranges(s, chance(1, 2) ? VIRTIO_BLK_T_DISCARD :
				   VIRTIO_BLK_T_WRITE_ZEROES, 1, true);
			memcpy(s->r + 16, &sec, 8);
		}
		break;
	}
	case M_RANGE_EMPTY:
		spec_hdr(s, VIRTIO_BLK_T_DISCARD + (uint32_t)rnd(2) * 2, 0, 0);
		s->wlen = 1;
		break;
	case M_RANGE_NOT16:
		gen_ranges(s, chance(1, 2) ? VIRTIO_BLK_T_DISCARD :
			   VIRTIO_BLK_T_WRITE_ZEROES, 1 + (unsigned int)rnd(8), true);
		k = 1 + (uint32_t)rnd(15);
		s->rlen -= chance(1, 2) ? k : 0;
		if (s->rlen % RSEG == 0)
			s->rlen -= k;
		break;
	case M_RANGE_TOO_MANY:
		k = (uint32_t)rnd(3);
		gen_ranges(s, k == 0 ? VIRTIO_BLK_T_DISCARD : k == 1 ?
			   VIRTIO_BLK_T_WRITE_ZEROES : VIRTIO_BLK_T_SECURE_ERASE,
			   MAX_SEG + 1 + (unsigned int)rnd(64), true);
		break;
	case M_RANGE_FLAGS: {
		unsigned int nseg = 1 + (unsigned int)rnd(4), i = (unsigned int)rnd(nseg);
		uint32_t fl = (uint32_t)(hq_rand(&f.rng) | (2U << rnd(31)));

		gen_ranges(s, chance(1, 2) ? VIRTIO_BLK_T_DISCARD :
			   VIRTIO_BLK_T_WRITE_ZEROES, nseg, true);
		memcpy(&t, s->r, 4);
		if (t == VIRTIO_BLK_T_DISCARD && chance(1, 2))
			fl = VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
		memcpy(s->r + 16 + i * RSEG + 12, &fl, 4);
		break;
	}
	case M_RANGE_OUTSIDE: {
		unsigned int nseg = 1 + (unsigned int)rnd(4), i = (unsigned int)rnd(nseg);
		uint64_t sec;
		uint32_t cnt;

		gen_ranges(s, chance(1, 2) ? VIRTIO_BLK_T_DISCARD :
			   VIRTIO_BLK_T_WRITE_ZEROES, nseg, true);
		k = (uint32_t)rnd(4);
		sec = k == 0 ? f.cap : k == 1 ? f.cap - 1 : k == 2 ?
		      f.cap + rnd(1ULL << 50) : rnd(f.cap);
		cnt = k == 3 ? MAX_SECT + 1 + (uint32_t)rnd(1000) :
		      k == 1 ? 2 + (uint32_t)rnd(100) : 1 + (uint32_t)rnd(100);
		memcpy(s->r + 16 + i * RSEG, &sec, 8);
		memcpy(s->r + 16 + i * RSEG + 8, &cnt, 4);
		break;
	}
	case M_RANGE_ZERO: {
		unsigned int nseg = 1 + (unsigned int)rnd(4), i = (unsigned int)rnd(nseg);
		uint32_t zero = 0;

		gen_ranges(s, chance(1, 2) ? VIRTIO_BLK_T_DISCARD :
			   VIRTIO_BLK_T_WRITE_ZEROES, nseg, true);
		memcpy(s->r + 16 + i * RSEG + 8, &zero, 4);
		break;
	}
	case M_NO_STATUS:
		gen_valid(s);
		s->label = M_NO_STATUS;
		s->wlen = 0;
		break;
	case M_BIG_MISALIGNED:
		gen_big(s, true);
		break;
	case M_FLUSH_DATA:
		spec_hdr(s, VIRTIO_BLK_T_FLUSH, 0, chance(1, 2) ? 1 + (uint32_t)rnd(2048) : 0);
		memset(s->r + 16, 0x66, s->rlen - 16);
		s->wlen = 1 + (chance(1, 2) ? 1 + (uint32_t)rnd(2048) : 0);
		break;
	case M_GET_ID_SHORT:
		spec_hdr(s, VIRTIO_BLK_T_GET_ID, 0, 0);
		s->wlen = 1 + (uint32_t)rnd(SERIAL_LEN);
		break;
	}
}

/* ------------------------------------------------------------- layout */

struct piece {
	uint64_t gpa;
	uint32_t len;
	uint16_t flags;
};

struct layout {
	struct piece p[CORE_IOV + 64];
	unsigned int n;
	size_t base, lim, cur;		/* arena offsets */
	bool overflow;
	bool tight;			/* no gaps, no alignment */
	bool misalign;			/* data never 512-aligned */
};

/* Room for @len bytes in the request's memory, aligned and gapped. */
static uint64_t place(struct layout *L, uint32_t len, bool data)
{
	static const unsigned int aligns[] = { 1, 2, 8, 16, 64, 512, 512,
					       4096 };
	size_t a = data && chance(3, 4) ? 512 : aligns[rnd(ARRAY_SIZE(aligns))];
	size_t pos = L->cur + (chance(1, 3) ? rnd(48) : 0);

	pos = (pos + a - 1) & ~(a - 1);
	if (data && ((a == 512 && chance(1, 8)) || L->misalign))
		pos += 1 + rnd(511);	/* misaligned data */
	if (L->tight || pos + len > L->lim)
		pos = L->cur;
	if (pos + len > L->lim) {
		L->overflow = true;
		pos = L->lim - len;
	}
	L->cur = pos + len;
	return gpa_at(pos);
}

static void add_piece(struct layout *L, uint64_t gpa, uint32_t len,
		      uint16_t flags)
{
	if (L->n < (unsigned int)ARRAY_SIZE(L->p))
		L->p[L->n++] = (struct piece){ gpa, len, flags };
}

/* A zero-length descriptor: the core skips it, wherever it points. */
static void maybe_zero_len(struct layout *L, uint16_t flags)
{
	uint64_t a;

	if (!chance(1, 16))
		return;
	switch (rnd(4)) {
	case 0:
		a = 0;
		break;
	case 1:
		a = f.gm.gpa + f.gm.size + rnd(1 << 20);
		break;
	case 2:
		a = hq_rand(&f.rng);
		break;
	default:
		a = gpa_at(L->base + rnd(L->lim - L->base));
		break;
	}
	add_piece(L, a, 0, flags);
}

/* Split a stream of @len bytes into pieces and place them. */
static void lay_stream(struct layout *L, const uint8_t *src, uint32_t len,
		       bool write, uint32_t hdr_cut)
{
	uint32_t cuts[16], ncut = 0, i, start = 0;
	uint16_t fl = write ? VRING_DESC_F_WRITE : 0;

	if (!len)
		return;
	/* Mostly: header and data apart.  Sometimes: anywhere. */
	if (hdr_cut && hdr_cut < len && chance(4, 5))
		cuts[ncut++] = hdr_cut;
	if (chance(1, 4)) {
		unsigned int extra = 1 + (unsigned int)rnd(chance(1, 8) ? 12 : 3);

		while (extra-- && ncut < (uint32_t)ARRAY_SIZE(cuts) - 1) {
			uint32_t c = (uint32_t)rnd(len);

			if (c)
				cuts[ncut++] = chance(1, 2) ? c :
					       (c & ~(SECT - 1)) ? c & ~(SECT - 1) : c;
		}
	}
	/* Sort, unique. */
	for (i = 1; i < ncut; i++) {
		uint32_t v = cuts[i], j = i;

		while (j && cuts[j - 1] > v) {
			cuts[j] = cuts[j - 1];
			j--;
		}
		cuts[j] = v;
	}
	cuts[ncut++] = len;
	for (i = 0; i < ncut; i++) {
		uint32_t l = cuts[i] - start;
		uint64_t gpa;

		if (!l)
			continue;
		maybe_zero_len(L, fl);
		gpa = place(L, l, l >= SECT);
		if (src)
			memcpy(f.gm.va + goff(gpa), src + start, l);
		add_piece(L, gpa, l, fl);
		start = cuts[i];
		if (fl & VRING_DESC_F_WRITE && chance(1, 64))
			add_piece(L, 0, 0, fl);
	}
}

/* ----------------------------------------------------- building chains */

/* A request with its own memory, ready to post. */
static struct req *req_new(unsigned int qi, int label, bool big)
{
	struct req *r = xcalloc(1, sizeof(*r));

	/* Repairs are not counted as requests sent. */
	r->seq = label == L_REPAIR ? f.seq : ++f.seq;
	r->q = qi;
	r->label = label;
	r->big = big;
	r->head = -1;
	r->arena = -1;
	r->serial_epoch = f.serial_epoch;
	return r;
}

/* Snapshot the request's memory and work out its expected answer. */
static void req_finish(struct req *r)
{
	uint32_t type;

	r->snap = xmalloc(r->alen);
	memcpy(r->snap, f.gm.va + r->aoff, r->alen);
	memset(r->hdr, 0, sizeof(r->hdr));
	if (!r->core_bad) {
		stream_copy(r->out, r->nout, 0, r->out_len < 16 ? r->out_len : 16,
			    r->hdr);
		memcpy(&type, r->hdr, 4);
		if (r->out_len >= 16 &&
		    (type == VIRTIO_BLK_T_DISCARD ||
		     type == VIRTIO_BLK_T_WRITE_ZEROES ||
		     type == VIRTIO_BLK_T_SECURE_ERASE) &&
		    r->out_len - 16 <= 4096) {
			r->tab_len = (uint32_t)(r->out_len - 16);
			r->tab = xmalloc(r->tab_len);
			stream_copy(r->out, r->nout, 16, r->tab_len, r->tab);
		}
		compute_locks(r);
	}
	if (f.attached)
		evaluate(r, f.ro);
	else
		r->evaluated = false;
}

/* Apply core malformation @c to the pieces / the ring descriptors. */
static void apply_core(struct layout *L, int c, struct vring_desc *d,
		       unsigned int *nd, bool *indirect, uint64_t tab_gpa,
		       unsigned int num)
{
	struct vring_desc *t = tab_gpa ? ptr_of(&f.gm, tab_gpa) : NULL;
	unsigned int i;

	switch (c) {
	case C_LOOP:
		/* The last descriptor chains back into the chain. */
		d[*nd - 1].flags |= VRING_DESC_F_NEXT;
		d[*nd - 1].next = (uint16_t)rnd(*nd);
		break;
	case C_NEXT_OUTSIDE:
		d[*nd - 1].flags |= VRING_DESC_F_NEXT;
		d[*nd - 1].next = (uint16_t)(num + rnd(65536 - num));
		break;
	case C_ADDR_OUTSIDE: {
		/* A descriptor with bytes, pointing outside guest memory. */
		struct vring_desc *v = *indirect ? t : d;
		unsigned int n = *indirect ? L->n : *nd;
		uint64_t end = f.gm.gpa + f.gm.size;

		for (i = (unsigned int)rnd(n); !v[i].len; i = (i + 1) % n)
			;
		switch (rnd(6)) {
		case 0:
			v[i].addr = end + rnd(1 << 20);
			break;
		case 1:
			v[i].addr = end - 1 - rnd(v[i].len > 1 ? v[i].len - 1 : 1);
			if (v[i].len < 2)
				v[i].len = 2;
			break;
		case 2:
			v[i].addr = f.gm.gpa - v[i].len - rnd(4096);
			break;
		case 3:
			v[i].addr = f.gm.gpa - 1;
			if (v[i].len < 2)
				v[i].len = 2;
			break;
		case 4:
			v[i].addr = ~0ULL - rnd(v[i].len);
			break;
		default:
			v[i].len = 0x80000000U + (uint32_t)rnd(1U << 30);
			break;
		}
		break;
	}
	case C_IND_BAD_LEN:
		d[0].len += 1 + (uint32_t)rnd(15);
		break;
	case C_IND_LOOP:
		t[L->n - 1].flags |= VRING_DESC_F_NEXT;
		t[L->n - 1].next = (uint16_t)rnd(L->n);
		break;
	case C_IND_NESTED:
		i = (unsigned int)rnd(L->n);
		t[i].flags |= VRING_DESC_F_INDIRECT;
		break;
	case C_IND_OUTSIDE:
		d[0].addr = chance(1, 2) ? f.gm.gpa + f.gm.size - d[0].len / 2 :
			    f.gm.gpa + f.gm.size + rnd(1 << 24);
		break;
	case C_IND_EMPTY:
		d[0].len = 0;
		break;
	case C_OUT_AFTER_IN:
		/* A readable descriptor after the status. */
		if (*indirect) {
			t[L->n - 1].flags |= VRING_DESC_F_NEXT;
			t[L->n - 1].next = (uint16_t)L->n;
			t[L->n] = (struct vring_desc){ t[0].addr, 16, 0, 0 };
			d[0].len += 16;
		} else {
			d[*nd - 1].flags |= VRING_DESC_F_NEXT;
			d[*nd - 1].next = (uint16_t)*nd;
			d[*nd] = (struct vring_desc){ d[0].addr, 16, 0, 0 };
			++*nd;
		}
		break;
	}
}

static int core_for_layout(bool indirect)
{
	static const int direct[] = { C_LOOP, C_NEXT_OUTSIDE, C_ADDR_OUTSIDE,
				      C_OUT_AFTER_IN };
	static const int ind[] = { C_ADDR_OUTSIDE, C_IND_BAD_LEN, C_IND_LOOP,
				   C_IND_NESTED, C_IND_OUTSIDE, C_IND_EMPTY,
				   C_OUT_AFTER_IN };

	return indirect ? ind[rnd(ARRAY_SIZE(ind))] :
			  direct[rnd(ARRAY_SIZE(direct))];
}

/*
 * Build @s into a chain on queue @qi: memory, descriptors, the core's and
 * the module's view.  Returns the request, not yet posted (NULL: no room).
 */
static struct req *build(unsigned int qi, struct spec *s, struct vring_desc *d,
			 unsigned int *nd)
{
	struct qstate *q = &f.q[qi];
	static struct layout L;
	struct req *r;
	bool indirect;
	uint64_t tab = 0;
	unsigned int i, maxd;
	uint32_t hdr_cut = s->rlen >= 16 ? 16 : 0;

	/* --stress: mostly one slot per chain, to fill the ring. */
	indirect = s->big || chance(o.stress ? 85 : 35, 100) ||
		   s->core == C_TOO_MANY;
	r = req_new(qi, s->label, s->big);
	L.n = 0;
	L.overflow = false;
	L.tight = false;
	L.misalign = s->label == M_BIG_MISALIGNED;
	if (s->big) {
		L.base = f.big_off;
		L.lim = f.big_off + f.big_sz;
	} else {
		r->arena = arena_get(qi);
		if (r->arena < 0)
			fail(r, "internal: no free memory area on queue %u", qi);
		L.base = arena_of(qi, (unsigned int)r->arena);
		L.lim = L.base + f.arena_sz;
	}
	L.cur = L.base;

	if (s->core == C_TOO_MANY) {
		/* Over 1024 non-empty descriptors: 1-byte pieces. */
		unsigned int n = CORE_IOV + 1 + (unsigned int)rnd(40);

		L.tight = true;
		for (i = 0; i < n - 1; i++)
			add_piece(&L, place(&L, 1, false), 1, 0);
		add_piece(&L, place(&L, 1, false), 1, VRING_DESC_F_WRITE);
		L.tight = false;
	} else {
		lay_stream(&L, s->r, s->rlen, false, hdr_cut);
		/* Writable: data first, the status in the last piece. */
		lay_stream(&L, NULL, s->wlen, true, s->wlen - 1);
		if (!s->wlen && chance(1, 3))
			add_piece(&L, gpa_at(L.base), 0, VRING_DESC_F_WRITE);
	}
	if (L.overflow)
		fail(r, "internal: a request of %u + %u bytes does not fit in %zu",
		     s->rlen, s->wlen, L.lim - L.base);
	if (!L.n)
		add_piece(&L, gpa_at(L.base), 0, 0);

	/* Direct chains: at most 16, one more for C_OUT_AFTER_IN. */
	maxd = q->vq.num_free - 1 < 16 ? q->vq.num_free - 1 : 16;
	if (!indirect && L.n + 1 > maxd)
		indirect = true;
	if (s->core == -1)
		s->core = core_for_layout(indirect);
	if (indirect) {
		struct vring_desc *t;

		/* One spare entry for C_OUT_AFTER_IN. */
		L.tight = true;
		tab = place(&L, 16 * (L.n + 1), false);
		L.tight = false;
		t = ptr_of(&f.gm, tab);
		for (i = 0; i < L.n; i++)
			t[i] = (struct vring_desc){ L.p[i].gpa, L.p[i].len,
				L.p[i].flags | (i + 1 < L.n ? VRING_DESC_F_NEXT : 0),
				(uint16_t)(i + 1 < L.n ? i + 1 : 0) };
		d[0] = (struct vring_desc){ tab, 16 * L.n, VRING_DESC_F_INDIRECT, 0 };
		*nd = 1;
	} else {
		for (i = 0; i < L.n; i++)
			d[i] = (struct vring_desc){ L.p[i].gpa, L.p[i].len,
				L.p[i].flags | (i + 1 < L.n ? VRING_DESC_F_NEXT : 0),
				(uint16_t)(i + 1 < L.n ? i + 1 : 0) };
		*nd = L.n;
		/*
		 * Now and then a run of them goes into an indirect table
		 * that the direct chain goes through (INDIRECT with NEXT:
		 * the spec forbids it, the vhost core follows it).
		 */
		if (L.n >= 3 && !s->core && chance(1, 16)) {
			unsigned int a = (unsigned int)rnd(L.n - 1), k;
			unsigned int b = a + 1 + (unsigned int)rnd(L.n - a - 1);
			struct vring_desc *t;

			L.tight = true;
			tab = place(&L, 16 * (b - a), false);
			L.tight = false;
			t = ptr_of(&f.gm, tab);
			for (k = a; k < b; k++) {
				t[k - a] = d[k];
				t[k - a].flags &= ~VRING_DESC_F_NEXT;
				if (k + 1 < b) {
					t[k - a].flags |= VRING_DESC_F_NEXT;
					t[k - a].next = (uint16_t)(k - a + 1);
				}
			}
			d[a] = (struct vring_desc){ tab, 16 * (b - a),
				VRING_DESC_F_INDIRECT | (b < L.n ? VRING_DESC_F_NEXT : 0),
				(uint16_t)(b < L.n ? a + 1 : 0) };
			for (k = b; k < L.n; k++) {
				d[a + 1 + k - b] = d[k];
				if (d[a + 1 + k - b].flags & VRING_DESC_F_NEXT)
					d[a + 1 + k - b].next = (uint16_t)(a + 2 + k - b);
			}
			*nd = a + 1 + L.n - b;
			f.mixed_indirect++;
		}
	}
	/* Unknown flag bits are ignored by the core. */
	if (chance(1, 32))
		d[rnd(*nd)].flags |= (uint16_t)(0x8 << rnd(12));
	if (s->core && s->core != C_TOO_MANY) {
		apply_core(&L, s->core, d, nd, &indirect, indirect ? tab : 0,
			   q->vq.num);
		r->label = s->core;
	}
	if (s->core == C_TOO_MANY)
		r->label = C_TOO_MANY;
	r->aoff = L.base;
	r->alen = L.cur - L.base;
	r->dgen = s->dgen;
	r->core_bad = !core_parse(r, d, *nd, q->vq.num);
	req_finish(r);
	return r;
}

/* ---------------------------------------------------------- posting */

static void post(struct req *r, const struct vring_desc *d, unsigned int nd,
		 bool publish)
{
	struct qstate *q = &f.q[r->q];
	int head;

	/* Built while detached, the backend came back meanwhile. */
	if (!r->evaluated && f.attached)
		evaluate(r, f.ro);
	head = hq_add(&q->vq, d, nd, r, publish);

	if (head < 0)
		fail(r, "internal: hq_add: %s", strerror(-head));
	r->head = head;
	if (q->vq.inflight > f.guest_depth)
		f.guest_depth = q->vq.inflight;
	if (r->locks)
		locks_take(r, 1);
	if (r->big)
		f.big_busy = true;
	f.outstanding++;
	f.sent[r->label]++;
}

/* The chain that replaces refused item @b: one writable byte (IOERR). */
static void post_repair(unsigned int qi, struct bad *b)
{
	struct qstate *q = &f.q[qi];
	struct req *r = req_new(qi, L_REPAIR, false);
	struct vring_desc d;

	r->arena = arena_get(qi);
	if (r->arena < 0)
		fail(r, "internal: no free memory area on queue %u", qi);
	r->aoff = arena_of(qi, (unsigned int)r->arena);
	r->alen = 64;
	d = (struct vring_desc){ gpa_at(r->aoff + 5), 1, VRING_DESC_F_WRITE, 0 };
	r->core_bad = !core_parse(r, &d, 1, q->vq.num);
	r->bad = b;
	req_finish(r);
	/* One writable byte: IOERR whatever the backend. */
	evaluate(r, f.ro);
	post(r, &d, 1, false);
	b->repair = r;
}

/* Make sure queue @qi has @n free slots (waiting for completions). */
static void need_slots(unsigned int qi, unsigned int n)
{
	if (f.q[qi].vq.num_free >= n)
		return;
	wait_begin("waiting for free ring slots");
	while (f.q[qi].vq.num_free < n) {
		if (!f.attached)
			attach(false);
		pump(10);
	}
}

/* Wait until the device has taken everything posted on queue @qi. */
static void wait_taken(unsigned int qi)
{
	uint16_t base;

	f.last_progress = now_ms();
	f.waiting = "waiting for the device to take every request";
	for (;;) {
		if (!f.attached)
			attach(false);
		check_ioctl(hq_vring_base(f.dev, qi, &base), "GET_VRING_BASE");
		if (base == f.q[qi].vq.avail_idx)
			return;
		kick_queue(qi, true);
		pump(5);
	}
}

static void need_no_conflict(struct req *r)
{
	if (!conflicts(r))
		return;
	f.conflicts++;
	wait_begin("waiting for a request on the same sectors");
	while (conflicts(r)) {
		if (!f.attached)
			attach(false);
		pump(10);
	}
}

/* One request on queue @qi. */
static void one_request(unsigned int qi)
{
	struct qstate *q = &f.q[qi];
	struct spec s = { 0 };
	struct vring_desc d[CORE_IOV + 64];
	unsigned int nd, c = (unsigned int)rnd(1000);
	struct req *r;

	if (o.stress) {
		if (chance(1, 1000))
			gen_big(&s, false);
		else
			gen_valid(&s);
		/* No secure erase: it would make sectors unknown. */
		while (s.label == L_SE) {
			free(s.r);
			memset(&s, 0, sizeof(s));
			gen_valid(&s);
		}
	} else if (c < 627) {
		gen_valid(&s);
	} else if (c < 630) {
		gen_big(&s, false);
	} else if (c < 900) {
		gen_malformed(&s);
	} else if (c < 975) {
		/* Refused by the core, on top of a valid-looking request. */
		gen_valid(&s);
		s.core = c < 965 ? -1 : C_TOO_MANY;
	} else {
		/* Avail ring: a bogus head, or (last) an index jump. */
		struct bad *b = xcalloc(1, sizeof(*b));

		need_slots(qi, 1);
		b->kind = c < 990 ? C_BAD_HEAD : C_IDX_JUMP;
		if (b->kind == C_BAD_HEAD) {
			b->pos = q->vq.avail_idx;
			post_repair(qi, b);
			vq_publish(&q->vq, (uint16_t)(q->vq.num +
					   rnd(65536 - q->vq.num)));
		} else {
			/*
			 * A jump hides every entry the device has not seen
			 * yet: let it take them all first, so that it stops
			 * exactly here.
			 */
			wait_taken(qi);
			b->pos = b->real_idx = q->vq.avail_idx;
			hq_set_avail_idx(&q->vq, (uint16_t)(b->real_idx +
					 q->vq.num + 1 + rnd(1000)));
			q->no_post = true;
		}
		bad_push(q, b);
		f.sent[b->kind]++;
		return;
	}

	if (s.big && f.big_busy) {
		wait_begin("waiting for the big area");
		while (f.big_busy) {
			if (!f.attached)
				attach(false);
			pump(10);
		}
	}
	/* Room: up to 16 direct descriptors plus a repair chain. */
	need_slots(qi, s.core ? 18 : 17);
	r = build(qi, &s, d, &nd);
	free(s.r);
	need_no_conflict(r);
	if (r->core_bad) {
		struct bad *b = xcalloc(1, sizeof(*b));

		b->kind = r->label;
		b->pos = q->vq.avail_idx;
		b->chain = r;
		r->bad = b;
		post(r, d, nd, true);
		post_repair(qi, b);
		bad_push(q, b);
	} else {
		post(r, d, nd, true);
	}
}

/* ------------------------------------------------------------ the run */

/* /sys/dev/block/M:m/queue/@attr of block device @dev: 0 if unreadable. */
static unsigned long long queue_limit(dev_t dev, const char *attr)
{
	unsigned long long v = 0;
	char path[128];
	FILE *fp;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s",
		 major(dev), minor(dev), attr);
	fp = fopen(path, "r");
	if (fp) {
		if (fscanf(fp, "%llu", &v) != 1)
			v = 0;
		fclose(fp);
	}
	return v;
}

static void open_backend(void)
{
	unsigned long long align;
	struct stat st;
	uint64_t size = 0;
	dev_t disk;

	f.be_fd = open(o.backend, O_RDWR | O_CLOEXEC);
	if (f.be_fd < 0) {
		fprintf(stderr, "%s: cannot open the backend %s: %s\n", prog,
			o.backend, strerror(errno));
		exit(errno == ENOENT ? KSFT_SKIP : 2);
	}
	f.ro_fd = open(o.backend, O_RDONLY | O_CLOEXEC);
	f.io_fd = open(o.backend, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (f.ro_fd < 0 || f.io_fd < 0 || fstat(f.be_fd, &st)) {
		fprintf(stderr, "%s: %s: %s\n", prog, o.backend, strerror(errno));
		exit(2);
	}
	f.bdev = S_ISBLK(st.st_mode);
	if (f.bdev) {
		if (ioctl(f.be_fd, BLKGETSIZE64, &size)) {
			fprintf(stderr, "%s: BLKGETSIZE64: %s\n", prog,
				strerror(errno));
			exit(2);
		}
		f.has_discard = queue_limit(st.st_rdev, "discard_max_bytes");
		/* Without it, WRITE_ZEROES is neither offered nor done. */
		f.has_wz = queue_limit(st.st_rdev, "write_zeroes_max_bytes");
		disk = st.st_rdev;
	} else if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
		f.has_wz = true;
		disk = st.st_dev;
	} else {
		fprintf(stderr, "%s: %s is neither a block device nor a regular file\n",
			prog, o.backend);
		exit(2);
	}
	/*
	 * As the module: buffers start on a sector, or on the device's DMA
	 * alignment where that is more; a block device that would take less
	 * (NVMe: 4 bytes, null_blk of 7.3: 2) still has them bounced.
	 */
	align = queue_limit(disk, "dma_alignment");
	f.addr_mask = 511;
	if (align > f.addr_mask)
		f.addr_mask = (unsigned int)align;
	f.cap = size / SECT;
	if (f.cap < 8192) {
		fprintf(stderr, "%s: %s has %" PRIu64 " bytes, at least 4 MiB needed\n",
			prog, o.backend, size);
		exit(2);
	}
}

/* Initial contents: generation 0 of every sector, written O_DIRECT. */
static void disk_init(void)
{
	const size_t chunk = 1 << 20;
	uint8_t *buf;
	uint64_t s, off;

	if (posix_memalign((void **)&buf, 4096, chunk))
		fail(NULL, "out of memory");
	for (off = 0; off < f.cap * SECT; off += chunk) {
		size_t len = f.cap * SECT - off < chunk ? f.cap * SECT - off : chunk;

		for (s = 0; s < len / SECT; s++)
			hq_sector_fill(buf + s * SECT, f.dseed, 0, off / SECT + s);
		if (pwrite(f.io_fd, buf, len, (off_t)off) != (ssize_t)len)
			fail(NULL, "writing the initial pattern at %" PRIu64 ": %s",
			     off, strerror(errno));
	}
	if (fdatasync(f.io_fd))
		fail(NULL, "fdatasync: %s", strerror(errno));
	free(buf);
}

/* Every sector of the disk against the model. */
static void disk_verify(void)
{
	const size_t chunk = 1 << 20;
	uint8_t *buf;
	uint64_t s, off;

	if (posix_memalign((void **)&buf, 4096, chunk))
		fail(NULL, "out of memory");
	for (off = 0; off < f.cap * SECT; off += chunk) {
		size_t len = f.cap * SECT - off < chunk ? f.cap * SECT - off : chunk;

		if (pread(f.io_fd, buf, len, (off_t)off) != (ssize_t)len)
			fail(NULL, "reading the disk at %" PRIu64 ": %s", off,
			     strerror(errno));
		for (s = 0; s < len / SECT; s++) {
			uint64_t sec = off / SECT + s;

			if (!sector_matches(sec, buf + s * SECT))
				fail(NULL, "at the end, sector %" PRIu64
				     " holds %s, the model says %s%s (generation %u)",
				     sec,
				     hq_is_zero(buf + s * SECT, SECT) ? "zeroes" : "other data",
				     f.gen[sec] == GEN_ZERO ? "zeroes" : "a pattern",
				     f.maybe0[sec] ? " or zeroes" : "", f.gen[sec]);
		}
	}
	free(buf);
}

static void layout_memory(void)
{
	size_t rings = 0, total, i;
	unsigned int qi;

	f.arena_sz = 144 * 1024;
	/* Rings (vq_init allocates them first), with slack. */
	rings = (size_t)o.nq * (16 * o.num + 4096 + 6 + 2 * o.num + 4096 +
				8 * o.num + 64 + 4096);
	f.void_len = 1 << 20;
	f.big_sz = (3U << 20) + 65536;
	f.tail_len = 1 << 16;
	total = rings + f.void_len + (size_t)o.nq * o.num * f.arena_sz +
		f.big_sz + f.tail_len + 65536;
	if (guest_mem_init(&f.gm, total, 0))
		fail(NULL, "cannot map %zu bytes of guest memory", total);
	for (qi = 0; qi < o.nq; qi++) {
		struct vq_config cfg = {
			.index = qi, .num = o.num, .max_indirect = 1,
			.event_idx = !!(f.features & VBLK_F(VIRTIO_RING_F_EVENT_IDX)),
		};

		if (vq_init(&f.q[qi].vq, &f.gm, &cfg))
			fail(NULL, "vq_init");
		f.q[qi].err_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (f.q[qi].err_fd < 0)
			fail(NULL, "eventfd: %s", strerror(errno));
		f.q[qi].arena_free = xcalloc(o.num, sizeof(unsigned int));
		for (i = 0; i < o.num; i++)
			f.q[qi].arena_free[i] = (unsigned int)(o.num - 1 - i);
		f.q[qi].narena_free = o.num;
	}
	f.void_off = (f.gm.brk + 4095) & ~4095UL;
	f.arena_off = f.void_off + f.void_len;
	f.big_off = f.arena_off + (size_t)o.nq * o.num * f.arena_sz;
	f.tail_off = f.big_off + f.big_sz;
	if (f.tail_off + f.tail_len > f.gm.size)
		fail(NULL, "internal: guest memory layout");
	f.gm.brk = f.gm.size;
	hq_canary_fill(&f.gm, f.void_off, f.gm.size - f.void_off);
	/* Region boundaries inside the arenas: odd, 512-aligned, a page. */
	f.ncuts = 3;
	f.cuts[0] = f.arena_off + 4096 * (1 + rnd(16)) + 1 + rnd(511);
	f.cuts[1] = f.arena_off + (f.big_off - f.arena_off) / 2 + 512 * (1 + rnd(7));
	f.cuts[2] = f.big_off + f.big_sz / 2 + 4096;
	for (i = 0; i + 1 < f.ncuts; i++)
		if (f.cuts[i] >= f.cuts[i + 1])
			fail(NULL, "internal: cuts");
}

static void canary_sweep(void)
{
	long long bad = hq_canary_find(&f.gm, f.void_off, f.gm.size - f.void_off);

	if (bad >= 0)
		fail(NULL, "guest memory %#" PRIx64
		     " (offset %lld), which the device was never given as writable, changed",
		     gpa_at((size_t)bad), bad);
}

/* Valid writes and reads on every queue: the device still serves. */
static void final_round(void)
{
	unsigned int qi, k;

	for (qi = 0; qi < o.nq; qi++)
		for (k = 0; k < 4; k++) {
			struct spec s = { 0 };
			struct vring_desc d[CORE_IOV + 64];
			unsigned int nd;
			struct req *r;

			if (k & 1) {
				s.label = L_IN;
				gen_rw(&s, false, 8, 0);
				memcpy(s.r + 8, &(uint64_t){ 64ULL * (qi * 4 + k - 1) }, 8);
			} else {
				s.label = L_OUT;
				gen_rw(&s, true, 8, 64ULL * (qi * 4 + k));
			}
			need_slots(qi, 17);
			r = build(qi, &s, d, &nd);
			free(s.r);
			if (r->x != X_ANSWER || r->status != VIRTIO_BLK_S_OK)
				fail(r, "internal: final request not valid");
			need_no_conflict(r);
			post(r, d, nd, true);
			kick_queue(qi, true);
			wait_all();
		}
}

static void print_stats(double secs)
{
	uint64_t total = 0, valid = 0, mod = 0, core = 0;
	int i;

	for (i = 0; i < L_NR; i++) {
		total += f.sent[i];
		if (i < M_UNKNOWN_TYPE)
			valid += f.sent[i];
		else if (i < C_LOOP)
			mod += f.sent[i];
		else if (i < L_REPAIR)
			core += f.sent[i];
	}
	printf("# seed %" PRIu64 ", %s, backend %s (%s, %" PRIu64 " sectors%s%s)\n",
	       o.seed, o.stress ? "stress" : "fuzz", o.backend,
	       f.bdev ? "block device" : "file", f.cap,
	       f.bdev && !f.has_discard ? ", no discard" : "",
	       !f.has_wz ? ", no write zeroes" : "");
	printf("# %" PRIu64 " requests in %.1f s (%.0f/s): %" PRIu64 " valid, %" PRIu64
	       " malformed for the module, %" PRIu64 " refused by the core (+%" PRIu64
	       " repairs)\n",
	       total - f.sent[L_REPAIR], secs, (double)total / secs, valid, mod,
	       core, f.sent[L_REPAIR]);
	printf("# answers: %" PRIu64 " OK, %" PRIu64 " IOERR, %" PRIu64 " UNSUPP, %" PRIu64
	       " without status (used 0), %" PRIu64 " refusals confirmed; %" PRIu64
	       " never taken (reset/close)\n",
	       f.st_ok, f.st_ioerr, f.st_unsupp, f.st_nostatus, f.st_core,
	       f.lost);
	printf("# reads checked: %" PRIu64 " (%" PRIu64
	       " MiB), discarded sectors found zeroed: %" PRIu64
	       ", read as old bytes and zeroes: %" PRIu64 ", lock waits: %" PRIu64
	       ", idle kicks: %" PRIu64 "\n",
	       f.reads_checked, f.bytes_checked >> 20, f.learned_zero,
	       f.torn_discards, f.conflicts, f.idle_kicks);
	printf("# kicks: %" PRIu64 " if needed, %" PRIu64 " forced, %" PRIu64
	       " batches unkicked; counter epochs checked: %" PRIu64 "\n",
	       f.kicks, f.kicks_forced, f.kicks_none, f.epochs_checked);
	printf("# queue depth: up to %" PRIu64
	       " chains outstanding on a ring of %u, up to %" PRIu64
	       " requests in flight in the backend\n",
	       f.guest_depth, o.num, f.depth_max);
	printf("# layouts: %" PRIu64
	       " direct chains through an indirect table (INDIRECT with NEXT)\n",
	       f.mixed_indirect);
	printf("# sent:");
	for (i = 0; i < L_NR; i++)
		if (f.sent[i])
			printf(" %s=%" PRIu64, label_name[i], f.sent[i]);
	printf("\n# control:");
	for (i = 0; i < OP_NR; i++)
		printf(" %s=%" PRIu64, op_name[i], f.ops[i]);
	printf("\n");
}

static uint64_t parse_u64(const char *opt, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || !*s || *end || *s == '-') {
		fprintf(stderr, "%s: %s: '%s' is not a number\n", prog, opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "requests", required_argument, NULL, 'n' },
		{ "stress", no_argument, NULL, 'S' },
		{ "queues", required_argument, NULL, 'q' },
		{ "ring", required_argument, NULL, 'r' },
		{ "window-mib", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	bool seed_set = false;
	uint64_t window_mib = 0, next_op, batches = 0;
	int64_t t0, t_init, t_run, t_end;
	struct timespec ts;
	int c;

	o.requests = 20000;
	while ((c = getopt_long(argc, argv, "b:s:n:q:r:w:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			o.backend = optarg;
			break;
		case 's':
			o.seed = parse_u64("--seed", optarg);
			seed_set = true;
			break;
		case 'n':
			o.requests = parse_u64("--requests", optarg);
			break;
		case 'S':
			o.stress = true;
			break;
		case 'q':
			o.nq = (unsigned int)parse_u64("--queues", optarg);
			if (!o.nq || o.nq > MAX_Q) {
				fprintf(stderr, "%s: --queues: 1 to %d\n", prog, MAX_Q);
				return 2;
			}
			break;
		case 'r':
			o.num = (unsigned int)parse_u64("--ring", optarg);
			if (o.num < 16 || o.num > 1024 || (o.num & (o.num - 1))) {
				fprintf(stderr, "%s: --ring: a power of two from 16 to 1024\n",
					prog);
				return 2;
			}
			break;
		case 'w':
			window_mib = parse_u64("--window-mib", optarg);
			if (!window_mib) {
				fprintf(stderr, "%s: --window-mib: at least 1\n", prog);
				return 2;
			}
			break;
		case 'v':
			o.verbose++;
			break;
		case 'h':
			print_usage(stdout);
			return 0;
		default:
			fprintf(stderr, "%s: see --help\n", prog);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n",
			prog, argv[optind]);
		return 2;
	}
	if (!o.backend)
		o.backend = getenv("VHOST_BLK_TEST_DEV");
	if (!o.backend || !*o.backend) {
		fprintf(stderr,
			"%s: no backend: use --backend PATH or set VHOST_BLK_TEST_DEV (see --help)\n",
			prog);
		return 2;
	}
	if (!o.nq)
		o.nq = o.stress ? 2 : 4;
	if (!o.num)
		o.num = o.stress ? 256 : 64;
	if (!window_mib)
		window_mib = o.stress ? 48 : 32;
	if (!seed_set) {
		clock_gettime(CLOCK_REALTIME, &ts);
		o.seed = hq_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
				(uint64_t)getpid());
	}
	printf("# %s: seed %" PRIu64 "\n", prog, o.seed);
	fflush(stdout);
	if (access(VBLK_DEV_PATH, F_OK)) {
		printf("# SKIP: %s does not exist (is vhost_blk loaded?)\n",
		       VBLK_DEV_PATH);
		return KSFT_SKIP;
	}

	/* Snapshots come and go: keep them off mmap()/munmap(). */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	f.rng.s = o.seed;
	f.waiting = "posting";
	f.dseed = hq_mix(o.seed ^ 0xd15c);
	f.next_gen = 1;
	open_backend();
	o.window = window_mib * 2048;
	if (o.window > f.cap)
		o.window = f.cap;
	f.gen = xcalloc(f.cap, sizeof(*f.gen));
	f.maybe0 = xcalloc(f.cap, 1);
	f.discarded = xcalloc(f.cap, sizeof(*f.discarded));
	/* GEN_ZERO is all ones. */
	memset(f.discarded, 0xff, f.cap * sizeof(*f.discarded));
	f.writer = xcalloc(f.cap, sizeof(*f.writer));
	f.writer_label = xcalloc(f.cap, 1);
	f.rlock = xcalloc(f.cap, sizeof(*f.rlock));
	f.wlock = xcalloc(f.cap, sizeof(*f.wlock));
	f.serial = xcalloc(1, SERIAL_LEN);
	memcpy(f.serial[0], "vhost-blk-fuzz-00000", SERIAL_LEN);

	f.features = VBLK_FEATURES_DEVICE;
	if (chance(1, 4))
		f.features &= ~VBLK_F(VIRTIO_RING_F_EVENT_IDX);
	layout_memory();
	t0 = now_ms();
	disk_init();
	t_init = now_ms() - t0;

	f.dev = vblk_open_fd();
	if (f.dev < 0)
		fail(NULL, "cannot open %s", VBLK_DEV_PATH);
	{
		uint64_t offered;
		struct virtio_blk_config cfg;
		unsigned int b;

		check_ioctl(vblk_get_features(f.dev, &offered), "GET_FEATURES");
		f.features &= offered;
		f.attached = true;
		setup_device(SETUP_OWNED);
		check_ioctl(vblk_get_features(f.dev, &offered), "GET_FEATURES");
		f.has_se = !!(offered & VBLK_F(VIRTIO_BLK_F_SECURE_ERASE));
		if (f.has_wz != !!(offered & VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES)))
			fail(NULL, "WRITE_ZEROES %soffered on a backend %s write zeroes",
			     f.has_wz ? "not " : "",
			     f.has_wz ? "with" : "without");
		if ((!f.bdev || f.has_discard) !=
		    !!(offered & VBLK_F(VIRTIO_BLK_F_DISCARD)))
			fail(NULL, "DISCARD %soffered on a backend %s discard",
			     f.bdev && !f.has_discard ? "" : "not ",
			     f.bdev && !f.has_discard ? "without" : "with");
		/*
		 * The backend's range commands, now offered: each accepted
		 * or not, so that both the served and the not negotiated
		 * answers are met.
		 */
		offered &= VBLK_F(VIRTIO_BLK_F_DISCARD) |
			   VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES) |
			   VBLK_F(VIRTIO_BLK_F_SECURE_ERASE);
		for (b = 0; b < 64; b++)
			if ((offered & VBLK_F(b)) && chance(3, 4))
				f.features |= VBLK_F(b);
		check_ioctl(vblk_set_features(f.dev, f.features),
			    "SET_FEATURES");
		check_ioctl(vblk_get_config(f.dev, &cfg),
			    "GET_CONFIG");
		f.lbs_mask = cfg.blk_size - 1;
		if (cfg.capacity != f.cap)
			fail(NULL, "GET_CONFIG capacity %llu, the backend has %" PRIu64,
			     (unsigned long long)cfg.capacity, f.cap);
	}
	t0 = now_ms();
	f.last_progress = t0;
	next_op = o.stress ? UINT64_MAX : 500 + rnd(1500);
	while (f.seq < o.requests) {
		unsigned int qi = (unsigned int)rnd(o.nq), b, k;
		struct qstate *q = &f.q[qi];

		/* --stress: now and then a batch that fills the ring. */
		b = o.stress ? (chance(1, 4) ? o.num : 1 + (unsigned int)rnd(o.num / 2)) :
			       1 + (unsigned int)rnd(chance(1, 4) ? 48 : 12);
		if (q->no_post) {
			f.waiting = "waiting for an avail index jump to be met";
			pump(5);
			continue;
		}
		for (k = 0; k < b && f.seq < o.requests && !q->no_post; k++)
			one_request(qi);
		k = (unsigned int)rnd(100);
		if (q->bad) {
			/* Let the core meet the refused item now. */
			kick_queue(qi, true);
		} else if (k < 80) {
			kick_queue(qi, false);
			f.kicks++;
		} else if (k < 92) {
			kick_queue(qi, true);
			f.kicks_forced++;
		} else {
			f.kicks_none++;
		}
		pump(0);
		batches++;
		if (f.ro_batches && !--f.ro_batches) {
			detach();
			attach(false);
		}
		if (!f.attached && (!f.detached_batches || !--f.detached_batches))
			attach(false);
		if (f.seq >= next_op) {
			int op = (int)rnd(OP_NR);

			/* A read-only period ends before another starts. */
			if (op == OP_RO && f.ro)
				op = OP_REATTACH;
			do_op(op);
			next_op = f.seq + 500 + rnd(1500);
		}
	}
	if (f.ro || !f.attached) {
		if (f.attached)
			detach();
		attach(false);
	}
	/* Let every refused item be met and repaired, everything answered. */
	for (unsigned int qi = 0; qi < o.nq; qi++)
		kick_queue(qi, true);
	wait_all();
	final_round();
	t_run = now_ms() - t0;
	detach();
	check_epoch();
	canary_sweep();
	t0 = now_ms();
	disk_verify();
	t_end = now_ms() - t0;
	print_stats((double)t_run / 1000);
	{
		struct rusage ru;

		getrusage(RUSAGE_THREAD, &ru);
		printf(
			"# disk: %.1f s to write the initial pattern, %.1f s to verify it at the end; fuzzer CPU %.1f s user %.1f s sys\n",
		       (double)t_init / 1000, (double)t_end / 1000,
		       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	}
	close(f.dev);
	return 0;
}
