// SPDX-License-Identifier: GPL-2.0
/*
 * vhost_blk_pathfail: a guest that keeps writing, with every write
 * verified, while the path to its disk fails and comes back.
 *
 * It drives /dev/vhost-blk like a VMM whose guest writes 4 KiB blocks of
 * a window of the disk at a fixed queue depth, one write per block at a
 * time, each sector stamped with (seed, block, sector, generation).  The
 * generation of a block goes up with every write of it.  The model keeps,
 * per block, the last generation the device answered OK and the last one
 * it was given: once nothing is in flight, every sector must hold one of
 * those generations, or any between them (those writes failed), exactly.
 * A read that finds anything else is corrupt data.
 *
 * Every used element must name a request in flight (a request answered
 * twice, or never posted, fails), and once told to stop every request
 * in flight must be answered (else it was lost).
 *
 * The phases:
 *   1. every block of the window written once (generation 1);
 *   2. writes at --depth until the file --stop-file exists, while the
 *      caller takes the path down and brings it back; --progress-file
 *      holds "ANSWERED INFLIGHT IOERR" after every harvest;
 *   3. drain: every request in flight answered within --drain-timeout;
 *   4. the window read back and checked against the model;
 *   5. the device keeps serving: every block written and read once more,
 *      all of them OK.
 *
 * It prints one TAP result per phase.
 *
 * Usage: vhost_blk_pathfail --backend PATH --stop-file PATH [options]
 * Exit status: 0 pass, 1 failure, 2 usage, 4 skip (no /dev/vhost-blk).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blk_req.h"
#include "guest_mem.h"
#include "vblk_dev.h"
#include "vq.h"

#define BLOCK		4096U
#define SECT		512U
#define SPB		(BLOCK / SECT)
#define KSFT_SKIP	4
#define STAMP_MAGIC	0x7662706174686661ULL	/* "vbpathfa" */

struct stamp {
	uint64_t magic;
	uint64_t seed;
	uint64_t block;
	uint32_t sector;		/* within the block */
	uint32_t gen;
};

struct blkstate {
	uint32_t ok_gen;		/* last generation answered OK */
	uint32_t issued_gen;		/* last generation posted */
	bool busy;
};

struct slot {
	struct blk_req req;
	uint64_t block;
	uint32_t gen;
	bool write;
	bool inflight;
};

static struct {
	const char *backend;
	const char *stop_file;
	const char *progress_file;
	uint64_t first_block;		/* the window, in blocks */
	uint64_t blocks;
	unsigned int depth;
	unsigned int drain_s;
	uint64_t seed;
} o = {
	.first_block = 0,
	.blocks = 2048,
	.depth = 16,
	.drain_s = 180,
	.seed = 1,
};

static struct blkstate *bs;
static struct slot *slots;
static struct vblk_dev dev;
static struct guest_mem gm;
static uint64_t answered, ioerr, posted, rnd_state;
static unsigned int inflight, tap_n;

static void print_usage(FILE *f, const char *prog)
{
	fprintf(f,
"Usage: %s --backend PATH --stop-file PATH [options]\n"
"\n"
"A guest writing verified 4 KiB blocks through /dev/vhost-blk while its\n"
"disk's path fails: writes go on until --stop-file exists, then every\n"
"request must be answered once, and the disk must hold what the answers\n"
"say (a failed write: old or new data, never anything else).\n"
"\n"
"  -b, --backend PATH        the disk (block device or file)\n"
"  -S, --stop-file PATH      stop writing once this exists\n"
"  -p, --progress-file PATH  'ANSWERED INFLIGHT IOERR', after every harvest\n"
"  -f, --first-block N       window start, in 4 KiB blocks (default 0)\n"
"  -n, --blocks N            window size in blocks (default 2048)\n"
"  -q, --depth N             writes in flight (default 16, at most 64)\n"
"  -t, --drain-timeout S     wait this long for answers once stopped\n"
"                            (default 180)\n"
"  -s, --seed N              pattern seed (default 1)\n"
"  -h, --help                this text\n"
"\n"
"Exit status: 0 pass, 1 failure, 2 usage, 4 skip.\n", prog);
}

static void tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %u - ", ok ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static uint64_t rnd(void)
{
	/* xorshift64* */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dULL;
}

/* Sector @s of generation @gen of block @b: a stamp, then a pattern. */
static void fill_sector(uint8_t *p, uint64_t b, uint32_t s, uint32_t gen)
{
	struct stamp st = {
		.magic = STAMP_MAGIC, .seed = o.seed, .block = b,
		.sector = s, .gen = gen,
	};
	uint64_t x = (o.seed * 0x9e3779b97f4a7c15ULL) ^ (b << 20) ^
		     ((uint64_t)s << 16) ^ gen;
	unsigned int i;

	memcpy(p, &st, sizeof(st));
	for (i = sizeof(st); i < SECT; i += 8) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		memcpy(p + i, &x, 8);
	}
}

/*
 * Which generation does sector @s of block @b hold?  The generation, or
 * -1 if it is not exactly a sector this program wrote to that place.
 */
static int64_t sector_gen(const uint8_t *p, uint64_t b, uint32_t s)
{
	uint8_t want[SECT];
	struct stamp st;

	memcpy(&st, p, sizeof(st));
	if (st.magic != STAMP_MAGIC || st.seed != o.seed || st.block != b ||
	    st.sector != s)
		return -1;
	fill_sector(want, b, s, st.gen);
	return memcmp(want, p, SECT) ? -1 : (int64_t)st.gen;
}

static void progress(void)
{
	char tmp[4096];
	FILE *f;

	if (!o.progress_file)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", o.progress_file);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%" PRIu64 " %u %" PRIu64 "\n", answered, inflight, ioerr);
	if (fclose(f) == 0)
		rename(tmp, o.progress_file);
}

static int post(struct slot *sl, uint64_t b, bool write)
{
	uint8_t buf[BLOCK];
	struct vq *vq = &dev.vq[0];
	unsigned int s;
	int err;

	sl->block = b;
	sl->write = write;
	sl->req.hdr->type = write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN;
	sl->req.hdr->sector = (o.first_block + b) * SPB;
	*sl->req.status = BLK_STATUS_UNSET;
	sl->req.done = false;
	if (write) {
		sl->gen = ++bs[b].issued_gen;
		for (s = 0; s < SPB; s++)
			fill_sector(buf + s * SECT, b, s, sl->gen);
		blk_req_fill(&sl->req, buf, BLOCK);
		/* The data segment is device-readable for a write. */
		sl->req.bufs[1].write = false;
	} else {
		memset(sl->req.data[0], 0xa5, BLOCK);
		sl->req.bufs[1].write = true;
	}
	bs[b].busy = true;
	err = blk_req_post(vq, &sl->req);
	if (err) {
		fprintf(stderr, "# posting block %" PRIu64 ": %s\n", b,
			strerror(-err));
		return err;
	}
	sl->inflight = true;
	inflight++;
	posted++;
	return 0;
}

/*
 * Harvest one answer, waiting up to @timeout_ms.  0, -ETIMEDOUT, or
 * -EPROTO for an answer to no request in flight.  @bad_read is set when
 * a read returned data the model does not allow.
 */
static int harvest(int timeout_ms, uint64_t *bad_read)
{
	struct vq_used u;
	struct slot *sl;
	uint8_t st, buf[BLOCK];
	unsigned int s;
	int err;

	err = vq_wait_used(&dev.vq[0], &u, timeout_ms);
	if (err)
		return err;
	sl = u.token;		/* &slot->req, its first member */
	if (u.bad || !sl || !sl->inflight) {
		fprintf(stderr,
			"# used element id %u len %u: no request of that head is in flight (answered twice?)\n",
			u.id, u.len);
		return -EPROTO;
	}
	sl->inflight = false;
	inflight--;
	answered++;
	st = *sl->req.status;
	bs[sl->block].busy = false;
	if (st == VIRTIO_BLK_S_IOERR) {
		ioerr++;
	} else if (st != VIRTIO_BLK_S_OK) {
		fprintf(stderr, "# block %" PRIu64 ": status %u (%s), used %u\n",
			sl->block, st, blk_status_name(st), u.len);
		return -EPROTO;
	} else if (sl->write) {
		bs[sl->block].ok_gen = sl->gen;
	} else {
		blk_req_gather(&sl->req, buf, BLOCK);
		for (s = 0; s < SPB; s++) {
			int64_t g = sector_gen(buf + s * SECT, sl->block, s);

			if (g < bs[sl->block].ok_gen ||
			    g > bs[sl->block].issued_gen) {
				fprintf(stderr, "# block %" PRIu64
					" sector %u: %s (acknowledged generation %u, last written %u)\n",
					sl->block, s,
					g < 0 ? "not data this program wrote there" :
						"a generation it does not hold",
					bs[sl->block].ok_gen,
					bs[sl->block].issued_gen);
				(*bad_read)++;
				break;
			}
		}
	}
	progress();
	return 0;
}

static struct slot *free_slot(void)
{
	unsigned int i;

	for (i = 0; i < o.depth; i++)
		if (!slots[i].inflight)
			return &slots[i];
	return NULL;
}

/*
 * Keep @depth requests in flight: every block of the window once, in
 * order (@sweep), or random idle blocks until the stop file exists.
 * Returns 0 or a harvest error.
 */
static int run_writes(bool sweep, bool write, uint64_t *bad_read)
{
	uint64_t next = 0;
	int err;

	for (;;) {
		struct slot *sl;

		while ((sl = free_slot())) {
			uint64_t b;

			if (sweep) {
				if (next == o.blocks)
					break;
				b = next++;
			} else {
				if (!access(o.stop_file, F_OK))
					return 0;
				do
					b = rnd() % o.blocks;
				while (bs[b].busy);
			}
			err = post(sl, b, write);
			if (err)
				return err;
		}
		vq_kick(&dev.vq[0]);
		if (sweep && next == o.blocks && !inflight)
			return 0;
		/* While the path is down nothing is answered: just wait. */
		err = harvest(sweep ? o.drain_s * 1000 : 1000, bad_read);
		if (err == -ETIMEDOUT && !sweep)
			continue;
		if (err)
			return err;
	}
}

static uint64_t parse_u64(const char *opt, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "vhost_blk_pathfail: %s: '%s' is not a number\n",
			opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "stop-file", required_argument, NULL, 'S' },
		{ "progress-file", required_argument, NULL, 'p' },
		{ "first-block", required_argument, NULL, 'f' },
		{ "blocks", required_argument, NULL, 'n' },
		{ "depth", required_argument, NULL, 'q' },
		{ "drain-timeout", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct vblk_config cfg = {
		.nvqs = 1,
		.num = 128,
		.features = VBLK_FEATURES_ALL,
	};
	uint64_t bad_read = 0, ioerr_outage, posted_outage, b;
	unsigned int i;
	int c, fd, err;

	while ((c = getopt_long(argc, argv, "b:S:p:f:n:q:t:s:h", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			o.backend = optarg;
			break;
		case 'S':
			o.stop_file = optarg;
			break;
		case 'p':
			o.progress_file = optarg;
			break;
		case 'f':
			o.first_block = parse_u64("--first-block", optarg);
			break;
		case 'n':
			o.blocks = parse_u64("--blocks", optarg);
			break;
		case 'q':
			o.depth = (unsigned int)parse_u64("--depth", optarg);
			break;
		case 't':
			o.drain_s = (unsigned int)parse_u64("--drain-timeout", optarg);
			break;
		case 's':
			o.seed = parse_u64("--seed", optarg);
			break;
		case 'h':
			print_usage(stdout, argv[0]);
			return 0;
		default:
			print_usage(stderr, argv[0]);
			return 2;
		}
	}
	if (!o.backend || !o.stop_file || optind != argc) {
		print_usage(stderr, argv[0]);
		return 2;
	}
	if (!o.depth || o.depth > 64 || o.blocks < 2 * o.depth ||
	    o.blocks > (1ULL << 24) || !o.drain_s || o.drain_s > 3600) {
		fprintf(stderr,
			"vhost_blk_pathfail: --depth 1-64, --blocks at least twice the depth and at most 2^24, --drain-timeout 1-3600\n");
		return 2;
	}
	rnd_state = o.seed * 2654435761ULL + 1;
	if (access(VBLK_DEV_PATH, F_OK)) {
		printf("1..0 # SKIP %s: %s\n", VBLK_DEV_PATH, strerror(errno));
		return KSFT_SKIP;
	}
	fd = open(o.backend, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "vhost_blk_pathfail: open %s: %s\n", o.backend,
			strerror(errno));
		return 1;
	}
	cfg.backend_fd = fd;
	bs = calloc(o.blocks, sizeof(*bs));
	slots = calloc(o.depth, sizeof(*slots));
	if (!bs || !slots) {
		fprintf(stderr, "vhost_blk_pathfail: out of memory\n");
		return 1;
	}
	if (guest_mem_init(&gm, 0, 0)) {
		fprintf(stderr, "vhost_blk_pathfail: guest memory: %s\n",
			strerror(errno));
		return 1;
	}
	err = vblk_open(&dev, &gm, &cfg);
	if (err) {
		fprintf(stderr, "vhost_blk_pathfail: setting up %s on %s: %s\n",
			VBLK_DEV_PATH, o.backend, strerror(-err));
		return 1;
	}
	for (i = 0; i < o.depth; i++) {
		uint32_t len = BLOCK;
		struct blk_req_spec spec = {
			.type = VIRTIO_BLK_T_OUT,
			.nseg = 1,
			.seg_len = &len,
			.dir = BLK_DIR_OUT,
			.align = BLOCK,
		};

		err = blk_req_prep(&slots[i].req, &gm, &spec);
		if (err)
			return 1;
	}
	printf("TAP version 13\n1..5\n");
	printf("# %s: blocks %" PRIu64 "-%" PRIu64 " (4 KiB), depth %u, seed %" PRIu64 "\n",
	       o.backend, o.first_block, o.first_block + o.blocks - 1,
	       o.depth, o.seed);

	err = run_writes(true, true, &bad_read);
	tap(!err && !ioerr, "the window written once before the path fails (%" PRIu64
	    " writes, %" PRIu64 " IOERR)",
	    answered, ioerr);
	if (err)
		goto out;

	posted_outage = posted;
	ioerr_outage = ioerr;
	progress();
	err = run_writes(false, true, &bad_read);
	posted_outage = posted - posted_outage;
	while (!err && inflight)
		err = harvest(o.drain_s * 1000, &bad_read);
	tap(!err, "every write posted while the path failed was answered once (%" PRIu64
	    " posted, %" PRIu64 " IOERR, %u never answered)%s",
	    posted_outage, ioerr - ioerr_outage, inflight,
	    err == -ETIMEDOUT ? ": a request was lost" :
	    err == -EPROTO ? ": an answer to no request in flight" : "");
	if (err)
		goto out;

	err = run_writes(true, false, &bad_read);
	tap(!err && !bad_read,
	    "every sector holds the data of its last acknowledged write, or of a failed one after it (%"
	    PRIu64 " blocks read, %" PRIu64 " wrong)",
	    o.blocks, bad_read);
	if (err)
		goto out;

	ioerr_outage = ioerr;
	err = run_writes(true, true, &bad_read);
	for (b = 0; !err && b < o.blocks; b++)
		if (bs[b].ok_gen != bs[b].issued_gen)
			err = -EIO;
	tap(!err && ioerr == ioerr_outage,
	    "afterwards every block is written again, all OK (%" PRIu64 " IOERR)",
	    ioerr - ioerr_outage);
	if (err)
		goto out;
	bad_read = 0;
	err = run_writes(true, false, &bad_read);
	tap(!err && !bad_read, "and reads back what was written (%" PRIu64 " wrong)",
	    bad_read);
out:
	if (err)
		printf("# stopped: %s\n", strerror(-err));
	vblk_close(&dev);
	for (i = 0; i < o.depth; i++)
		blk_req_free(&slots[i].req);
	close(fd);
	return err || bad_read ? 1 : 0;
}
