// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk data path: reads and writes of every shape, request layouts,
 * FLUSH, GET_ID, error statuses, many requests in flight, several queues.
 *
 * Every test runs twice, with VIRTIO_RING_F_EVENT_IDX negotiated and
 * without.  The backend is VHOST_BLK_TEST_DEV (see vblk_test.h).
 */
#include "kselftest_harness.h"

#include <limits.h>
#include <linux/falloc.h>
#include <linux/loop.h>

#include "vblk_test.h"
#include "vblk_host.h"

FIXTURE(vhost_blk) {
	struct env e;
};

FIXTURE_VARIANT(vhost_blk) {
	bool event_idx;
};

FIXTURE_VARIANT_ADD(vhost_blk, event_idx) {
	.event_idx = true,
};

FIXTURE_VARIANT_ADD(vhost_blk, no_event_idx) {
	.event_idx = false,
};

FIXTURE_SETUP(vhost_blk)
{
	uint64_t features = VBLK_FEATURES_ALL;

	if (!variant->event_idx)
		features &= ~VBLK_F(VIRTIO_RING_F_EVENT_IDX);
	env_setup(_metadata, &self->e, features);
	if (_metadata->exit_code)
		return;
	ASSERT_EQ(variant->event_idx,
		  vblk_has(&self->e.dev, VIRTIO_RING_F_EVENT_IDX));
}

FIXTURE_TEARDOWN(vhost_blk)
{
	env_teardown(&self->e);
}

/* Lengths that add up to a multiple of 512, none of them a multiple. */
static const uint32_t odd_w[] = { 1, 511, 100, 412, 3, 1021, 7, 4105, 2, 494 };
static const uint32_t odd_r[] = { 13, 2047, 5, 4093, 498 };

static size_t sum_of(const uint32_t *seg, unsigned int n)
{
	size_t s = 0;

	while (n--)
		s += seg[n];
	return s;
}

TEST_F_TIMEOUT(vhost_blk, write_read_many_offsets_and_sizes, 120)
{
	static const size_t sizes[] = {
		512, 1024, 4096, 4608, 65536, 131584, 1 * MiB,
	};
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	unsigned int i, j;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		uint64_t n = sizes[i] / SECTOR;
		const uint64_t offsets[] = {
			0, 1, 7, 8, 127, 2049, e->sectors / 2 + 3,
			e->sectors - n - 1, e->sectors - n,
		};

		for (j = 0; j < ARRAY_SIZE(offsets); j++)
			rw_verify(_metadata, e, vq, offsets[j], sizes[i],
				  NULL, NULL);
	}
}

TEST_F(vhost_blk, first_and_last_sector_round_trip)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t last = e->sectors - 1, seed_first, seed_last;
	uint8_t buf[512], tail[8 * 512];

	seed_first = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed_first, 0);
	write_ok(_metadata, e, vq, 0, buf, sizeof(buf), NULL);

	seed_last = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed_last, last * SECTOR);
	write_ok(_metadata, e, vq, last, buf, sizeof(buf), NULL);

	verify_pattern(_metadata, e, vq, 0, SECTOR, seed_first);
	verify_pattern(_metadata, e, vq, last, SECTOR, seed_last);
	/* The last sector read as the tail of a larger request. */
	read_ok(_metadata, e, vq, last - 7, tail, sizeof(tail), NULL);
	pattern_fill(buf, sizeof(buf), seed_last, last * SECTOR);
	expect_same(_metadata, buf, tail + 7 * SECTOR, SECTOR,
		    "last sector, read in an 8-sector request");
}

TEST_F_TIMEOUT(vhost_blk, one_mib_requests_in_every_shape, 60)
{
	static uint32_t seg16k[64], seg4k[256];
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout direct64 = { .nseg = 64, .seg = seg16k };
	struct layout ind256 = {
		.flags = BLK_REQ_INDIRECT, .nseg = 256, .seg = seg4k,
	};
	struct layout ind1 = { .flags = BLK_REQ_INDIRECT };
	unsigned int i;

	for (i = 0; i < 64; i++)
		seg16k[i] = 16 * KiB;
	for (i = 0; i < 256; i++)
		seg4k[i] = 4 * KiB;

	rw_verify(_metadata, e, vq, 4096, MiB, NULL, NULL);
	rw_verify(_metadata, e, vq, 4096, MiB, &direct64, &ind256);
	rw_verify(_metadata, e, vq, 8192 + 1, MiB, &ind256, &direct64);
	rw_verify(_metadata, e, vq, 8192 + 1, MiB, &ind1, &ind256);
}

TEST_F(vhost_blk, many_small_segments_round_trip)
{
	static uint32_t seg512[64], seg4k[8];
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout w = { .nseg = 64, .seg = seg512 };
	struct layout r = { .nseg = 8, .seg = seg4k };
	unsigned int i;

	for (i = 0; i < 64; i++)
		seg512[i] = 512;
	for (i = 0; i < 8; i++)
		seg4k[i] = 4096;

	rw_verify(_metadata, e, vq, 333, 32 * KiB, &w, &r);
	rw_verify(_metadata, e, vq, 334, 32 * KiB, &r, &w);
}

TEST_F(vhost_blk, odd_segment_sizes_round_trip)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	size_t len = sum_of(odd_w, ARRAY_SIZE(odd_w));
	struct layout w = { .nseg = ARRAY_SIZE(odd_w), .seg = odd_w };
	struct layout r = { .nseg = ARRAY_SIZE(odd_r), .seg = odd_r };
	struct layout wi = w, ri = r;

	ASSERT_EQ(len, sum_of(odd_r, ARRAY_SIZE(odd_r)));
	ASSERT_EQ(0ULL, len % SECTOR);
	wi.flags = BLK_REQ_INDIRECT;
	ri.flags = BLK_REQ_INDIRECT;

	rw_verify(_metadata, e, vq, 1000, len, &w, &r);
	rw_verify(_metadata, e, vq, 1003, len, &r, &w);
	rw_verify(_metadata, e, vq, 1005, len, &wi, &ri);
	rw_verify(_metadata, e, vq, 1007, len, &w, NULL);
	rw_verify(_metadata, e, vq, 1009, len, NULL, &ri);
}

TEST_F(vhost_blk, indirect_chains_round_trip)
{
	static const uint32_t three[] = { 4096, 512, 3584 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout one = { .flags = BLK_REQ_INDIRECT };
	struct layout multi = {
		.flags = BLK_REQ_INDIRECT, .nseg = 3, .seg = three,
	};

	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_RING_F_INDIRECT_DESC));
	rw_verify(_metadata, e, vq, 50, 512, &one, &one);
	rw_verify(_metadata, e, vq, 60, 8192, &one, NULL);
	rw_verify(_metadata, e, vq, 70, 8192, NULL, &one);
	rw_verify(_metadata, e, vq, 80, 8192, &multi, &multi);
	rw_verify(_metadata, e, vq, 90, 8192, &multi, &one);
}

/*
 * Post @count requests of @len bytes (as @nseg equal segments), writes to
 * consecutive areas from @sector, with one kick; then read them all back
 * the same way.
 */
static void batch_write_read(struct __test_metadata *_metadata, struct env *e,
			     struct vq *vq, uint64_t sector, unsigned int count,
			     uint32_t len, unsigned int nseg, unsigned int flags)
{
	struct blk_req *req = calloc(count, sizeof(*req));
	uint32_t *seg = xmalloc(_metadata, nseg * sizeof(*seg));
	uint8_t *pat = xmalloc(_metadata, len), *got = xmalloc(_metadata, len);
	size_t mark = guest_mark(&e->gm);
	uint64_t seed = new_seed(e);
	struct blk_req_spec spec = {
		.nseg = nseg, .seg_len = seg, .flags = flags,
	};
	unsigned int i, pass;

	ASSERT_NE(NULL, req);
	ASSERT_EQ(0U, len % nseg);
	for (i = 0; i < nseg; i++)
		seg[i] = len / nseg;

	for (pass = 0; pass < 2; pass++) {
		spec.type = pass ? VIRTIO_BLK_T_IN : VIRTIO_BLK_T_OUT;
		for (i = 0; i < count; i++) {
			spec.sector = sector + (uint64_t)i * (len / SECTOR);
			ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
			if (!pass) {
				pattern_fill(pat, len, seed,
					     spec.sector * SECTOR);
				blk_req_fill(&req[i], pat, len);
			}
			ASSERT_EQ(0, blk_req_post(vq, &req[i]))
				TH_LOG("request %u of %u", i, count);
		}
		ASSERT_LE(0, vq_kick(vq));
		ASSERT_EQ(0, blk_complete(vq, count));
		ASSERT_EQ(0U, vq->inflight);
		for (i = 0; i < count; i++) {
			ASSERT_TRUE(req[i].done);
			ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status,
				      "%s %u of %u", pass ? "read" : "write",
				      i, count);
			ASSERT_EQ(pass ? len + 1 : 1, req[i].used_len);
			if (pass) {
				spec.sector = sector +
					      (uint64_t)i * (len / SECTOR);
				pattern_fill(pat, len, seed,
					     spec.sector * SECTOR);
				blk_req_gather(&req[i], got, len);
				expect_same(_metadata, pat, got, len,
					    "batched read");
			}
			blk_req_free(&req[i]);
		}
		guest_release(&e->gm, mark);
	}
	free(req);
	free(seg);
	free(pat);
	free(got);
}

TEST_F_TIMEOUT(vhost_blk, ring_full_of_direct_chains, 60)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];

	/* 3 descriptors each: as many as the ring holds. */
	batch_write_read(_metadata, e, vq, 20000, vq->num / 3, 64 * KiB, 1,
			 0);
	/* 6 descriptors each. */
	batch_write_read(_metadata, e, vq, 30000, vq->num / 6, 16 * KiB, 4,
			 0);
}

TEST_F_TIMEOUT(vhost_blk, ring_full_of_indirect_chains, 60)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];

	batch_write_read(_metadata, e, vq, 40000, vq->num, 64 * KiB, 1,
			 BLK_REQ_INDIRECT);
	batch_write_read(_metadata, e, vq, 60000, vq->num, 32 * KiB, 8,
			 BLK_REQ_INDIRECT);
}

/*
 * A request keeps up to 8 data buffers (the kernel's UIO_FASTIOV) in
 * itself and a longer list in an allocation of its own; answered
 * requests are reused.  Chains on both sides of that line, the header or
 * the status sharing a buffer with data, a ring full of each kind in
 * flight and then reused by the other: every byte and every count right.
 */
TEST_F_TIMEOUT(vhost_blk, chains_either_side_of_the_inline_buffers, 60)
{
	static const unsigned int nsegs[] = { 1, 7, 8, 9, 16 };
	static uint32_t seg[16];
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct vhost_blk_vring_stats st;
	uint64_t reqs = 0, bytes = 0;
	unsigned int i, n;

	for (i = 0; i < ARRAY_SIZE(seg); i++)
		seg[i] = 512;
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, VHOST_BLK_STATS_RESET, &st));
	for (i = 0; i < ARRAY_SIZE(nsegs); i++) {
		struct layout hdr = {
			.flags = BLK_REQ_DATA_IN_HDR, .nseg = nsegs[i],
			.seg = seg,
		};
		struct layout status = {
			.flags = BLK_REQ_DATA_IN_STATUS | BLK_REQ_INDIRECT,
			.nseg = nsegs[i], .seg = seg,
		};

		n = nsegs[i];
		rw_verify(_metadata, e, vq, 70000 + i * 32, n * 512, &hdr,
			  &status);
		reqs++;
		bytes += n * 512;
	}
	for (i = 0; i < 4; i++) {
		n = i & 1 ? 9 : 8;
		batch_write_read(_metadata, e, vq, 80000 + i * 8192, vq->num,
				 n * 512, n, BLK_REQ_INDIRECT);
		reqs += vq->num;
		bytes += (uint64_t)vq->num * n * 512;
	}
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	ASSERT_EQ(reqs, st.reqs_out);
	ASSERT_EQ(reqs, st.reqs_in);
	ASSERT_EQ(bytes, st.bytes_written);
	ASSERT_EQ(bytes, st.bytes_read);
	ASSERT_EQ(0ULL, st.reqs_ioerr);
	ASSERT_EQ(0ULL, st.inflight);
}

TEST_F_TIMEOUT(vhost_blk, kick_after_every_request_completes_all, 60)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	unsigned int count = vq->num, i;
	struct blk_req *req = calloc(count, sizeof(*req));
	uint32_t len = 4 * KiB;
	uint8_t *pat = xmalloc(_metadata, len);
	uint64_t seed = new_seed(e);
	struct blk_req_spec spec = {
		.type = VIRTIO_BLK_T_OUT, .nseg = 1, .seg_len = &len,
		.flags = BLK_REQ_INDIRECT,
	};

	ASSERT_NE(NULL, req);
	for (i = 0; i < count; i++) {
		spec.sector = 5000 + i * 8;
		ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
		pattern_fill(pat, len, seed, spec.sector * SECTOR);
		blk_req_fill(&req[i], pat, len);
		ASSERT_EQ(0, blk_req_post(vq, &req[i]));
		ASSERT_LE(0, vq_kick(vq));
	}
	ASSERT_EQ(0, blk_complete(vq, count));
	for (i = 0; i < count; i++) {
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status, "request %u",
			      i);
		ASSERT_EQ(1U, req[i].used_len);
		blk_req_free(&req[i]);
	}
	TH_LOG("%u requests: %llu kicks, %llu suppressed, %llu notifications",
	       count, (unsigned long long)vq->kicks,
	       (unsigned long long)vq->kicks_suppressed,
	       (unsigned long long)vq->notifications);
	for (i = 0; i < count; i += 17)
		verify_pattern(_metadata, e, vq, 5000 + i * 8, len, seed);
	free(req);
	free(pat);
}

TEST_F(vhost_blk, mixed_request_types_in_flight)
{
	enum { NW = 24, NR = 24, NF = 4, NI = 4, NU = 4, N = NW + NR + NF + NI + NU };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct blk_req req[N];
	uint32_t len = 8 * KiB, idlen = VIRTIO_BLK_ID_BYTES;
	uint8_t *pat = xmalloc(_metadata, len), *got = xmalloc(_metadata, len);
	uint64_t seed_old = new_seed(e), seed_new;
	unsigned int i;

	/* The read area holds known data first. */
	for (i = 0; i < NR; i++) {
		pattern_fill(pat, len, seed_old, (7000 + i * 16) * SECTOR);
		write_ok(_metadata, e, vq, 7000 + i * 16, pat, len, NULL);
	}
	seed_new = new_seed(e);

	for (i = 0; i < N; i++) {
		struct blk_req_spec spec = {
			.nseg = 1, .seg_len = &len, .flags = BLK_REQ_INDIRECT,
		};

		if (i < NW) {
			spec.type = VIRTIO_BLK_T_OUT;
			spec.sector = 9000 + i * 16;
		} else if (i < NW + NR) {
			spec.type = VIRTIO_BLK_T_IN;
			spec.sector = 7000 + (i - NW) * 16;
		} else if (i < NW + NR + NF) {
			spec.type = VIRTIO_BLK_T_FLUSH;
			spec.nseg = 0;
		} else if (i < NW + NR + NF + NI) {
			spec.type = VIRTIO_BLK_T_GET_ID;
			spec.seg_len = &idlen;
		} else {
			spec.type = 0xff;
		}
		ASSERT_EQ(0, blk_req_prep(&req[i], &e->gm, &spec));
		if (spec.type == VIRTIO_BLK_T_OUT) {
			pattern_fill(pat, len, seed_new, spec.sector * SECTOR);
			blk_req_fill(&req[i], pat, len);
		}
	}
	/* Interleave the types on the ring. */
	for (i = 0; i < N; i++)
		ASSERT_EQ(0, blk_req_post(vq, &req[(i * 7) % N]));
	ASSERT_LE(0, vq_kick(vq));
	ASSERT_EQ(0, blk_complete(vq, N));

	for (i = 0; i < N; i++) {
		uint32_t type = req[i].hdr->type;

		if (type == 0xff) {
			ASSERT_STATUS(VIRTIO_BLK_S_UNSUPP, *req[i].status,
				      "type 0xff");
			ASSERT_EQ(1U, req[i].used_len);
			continue;
		}
		ASSERT_STATUS(VIRTIO_BLK_S_OK, *req[i].status,
			      "request %u, type %u", i, type);
		if (type == VIRTIO_BLK_T_IN) {
			ASSERT_EQ(len + 1, req[i].used_len);
			pattern_fill(pat, len, seed_old,
				     req[i].hdr->sector * SECTOR);
			expect_same(_metadata, pat, req[i].data[0], len,
				    "read in flight with writes");
		} else if (type == VIRTIO_BLK_T_GET_ID) {
			ASSERT_EQ(VIRTIO_BLK_ID_BYTES + 1U, req[i].used_len);
			expect_same(_metadata, TEST_SERIAL, req[i].data[0],
				    VIRTIO_BLK_ID_BYTES, "serial");
		} else {
			ASSERT_EQ(1U, req[i].used_len);
		}
	}
	for (i = 0; i < NW; i++)
		verify_pattern(_metadata, e, vq, 9000 + i * 16, len, seed_new);
	for (i = 0; i < N; i++)
		blk_req_free(&req[i]);
	free(pat);
	free(got);
}

TEST_F(vhost_blk, split_header_round_trip)
{
	static const unsigned int parts[] = { 2, 3, 4, 5, 8, 16 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(parts); i++) {
		struct layout w = { .hdr_parts = parts[i] };
		struct layout r = {
			.hdr_parts = parts[ARRAY_SIZE(parts) - 1 - i],
		};
		struct layout wi = w;

		wi.flags = BLK_REQ_INDIRECT;
		rw_verify(_metadata, e, vq, 3000 + i * 8, 4096, &w, &r);
		rw_verify(_metadata, e, vq, 3100 + i * 8, 4096, &wi, &w);
	}
}

TEST_F(vhost_blk, split_header_flush_and_get_id)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout lo = { .hdr_parts = 3, .flags = BLK_REQ_ZERO_LEN };
	uint8_t id[VIRTIO_BLK_ID_BYTES];

	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_FLUSH, 0, NULL, 0, &lo),
		      VIRTIO_BLK_S_OK, 1, "flush");
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_GET_ID, 0, id,
			   sizeof(id), &lo),
		      VIRTIO_BLK_S_OK, sizeof(id) + 1, "GET_ID");
	expect_same(_metadata, TEST_SERIAL, id, sizeof(id), "serial");
}

TEST_F(vhost_blk, data_in_header_descriptor_is_written)
{
	static const uint32_t segs[] = { 1024, 3072 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout one = { .flags = BLK_REQ_DATA_IN_HDR };
	struct layout two = {
		.flags = BLK_REQ_DATA_IN_HDR, .nseg = 2, .seg = segs,
	};
	struct layout split = {
		.flags = BLK_REQ_DATA_IN_HDR, .hdr_parts = 2,
	};
	struct layout ind = {
		.flags = BLK_REQ_DATA_IN_HDR | BLK_REQ_INDIRECT,
	};

	rw_verify(_metadata, e, vq, 1100, 512, &one, NULL);
	rw_verify(_metadata, e, vq, 1110, 4096, &one, NULL);
	rw_verify(_metadata, e, vq, 1120, 4096, &two, NULL);
	rw_verify(_metadata, e, vq, 1130, 4096, &split, NULL);
	rw_verify(_metadata, e, vq, 1140, 64 * KiB, &ind, NULL);
}

TEST_F(vhost_blk, data_in_status_descriptor_is_read)
{
	static const uint32_t segs[] = { 3072, 1024 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout one = { .flags = BLK_REQ_DATA_IN_STATUS };
	struct layout two = {
		.flags = BLK_REQ_DATA_IN_STATUS, .nseg = 2, .seg = segs,
	};
	struct layout ind = {
		.flags = BLK_REQ_DATA_IN_STATUS | BLK_REQ_INDIRECT,
		.hdr_parts = 4,
	};

	rw_verify(_metadata, e, vq, 1200, 512, NULL, &one);
	rw_verify(_metadata, e, vq, 1210, 4096, NULL, &one);
	rw_verify(_metadata, e, vq, 1220, 4096, NULL, &two);
	rw_verify(_metadata, e, vq, 1230, 64 * KiB, NULL, &ind);
}

TEST_F(vhost_blk, data_in_status_descriptor_get_id)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t id[VIRTIO_BLK_ID_BYTES];

	expect_result(_metadata,
		      get_id(_metadata, e, vq, sizeof(id),
			     BLK_REQ_DATA_IN_STATUS, id),
		      VIRTIO_BLK_S_OK, sizeof(id) + 1, "GET_ID");
	expect_same(_metadata, TEST_SERIAL, id, sizeof(id), "serial");
}

TEST_F(vhost_blk, zero_length_descriptors_are_ignored)
{
	static const uint32_t with_empty[] = { 0, 4096, 0, 0, 512, 3584, 0 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout zl = { .flags = BLK_REQ_ZERO_LEN };
	struct layout empty = {
		.nseg = ARRAY_SIZE(with_empty), .seg = with_empty,
	};
	struct layout both = {
		.flags = BLK_REQ_ZERO_LEN, .hdr_parts = 2,
		.nseg = ARRAY_SIZE(with_empty), .seg = with_empty,
	};
	struct layout ind = both;

	ind.flags |= BLK_REQ_INDIRECT;
	rw_verify(_metadata, e, vq, 1300, 512, &zl, &zl);
	rw_verify(_metadata, e, vq, 1310, 8192, &empty, &empty);
	rw_verify(_metadata, e, vq, 1320, 8192, &both, &zl);
	rw_verify(_metadata, e, vq, 1330, 8192, &ind, &ind);
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_FLUSH, 0, NULL, 0, &zl),
		      VIRTIO_BLK_S_OK, 1, "flush");
}

TEST_F(vhost_blk, all_layout_options_combined)
{
	static const uint32_t wseg[] = { 700, 0, 324, 3072 };
	static const uint32_t rseg[] = { 2048, 0, 1023, 1025 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout w = {
		.flags = BLK_REQ_DATA_IN_HDR | BLK_REQ_ZERO_LEN,
		.hdr_parts = 3, .nseg = ARRAY_SIZE(wseg), .seg = wseg,
		.misalign = 8,
	};
	struct layout r = {
		.flags = BLK_REQ_DATA_IN_STATUS | BLK_REQ_ZERO_LEN,
		.hdr_parts = 16, .nseg = ARRAY_SIZE(rseg), .seg = rseg,
		.misalign = 3,
	};
	struct layout wi = w, ri = r;

	wi.flags |= BLK_REQ_INDIRECT;
	ri.flags |= BLK_REQ_INDIRECT;
	rw_verify(_metadata, e, vq, 1400, 4096, &w, &r);
	rw_verify(_metadata, e, vq, 1410, 4096, &wi, &ri);
	rw_verify(_metadata, e, vq, 1420, 4096, &w, &ri);
}

TEST_F(vhost_blk, misaligned_data_buffers_round_trip)
{
	static const unsigned int off[] = { 1, 3, 8, 16, 100, 511, 2048 };
	static const uint32_t segs[] = { 1000, 24, 3072 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(off); i++) {
		struct layout one = { .align = 4096, .misalign = off[i] };
		struct layout multi = {
			.align = 4096, .misalign = off[i],
			.nseg = ARRAY_SIZE(segs), .seg = segs,
		};

		rw_verify(_metadata, e, vq, 1500 + i * 16, 4096, &one, &one);
		rw_verify(_metadata, e, vq, 1600 + i * 16, 4096, &multi, NULL);
		rw_verify(_metadata, e, vq, 1700 + i * 16, 4096, NULL, &multi);
	}
}

/*
 * A FLUSH is answered OK once it has reached the disk: the disk's own
 * flush counter moves (the block device's, or for a file the one under
 * its file system, which fsync() flushes).  A write-through disk (brd)
 * has no cache a flush could reach: the status is all there is to see.
 */
TEST_F(vhost_blk, flush_returns_ok)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	dev_t disk = host_disk_of(_metadata, e->path);
	bool wc = host_disk_write_back(_metadata, disk);
	uint64_t before, after;
	uint8_t buf[4096];

	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_BLK_F_FLUSH));
	before = host_disk_flushes(_metadata, disk);
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_FLUSH, 0, NULL, 0, NULL),
		      VIRTIO_BLK_S_OK, 1, "flush");
	after = host_disk_flushes(_metadata, disk);
	if (wc)
		EXPECT_LT(before, after)
			TH_LOG("no flush reached %u:%u", major(disk),
			       minor(disk));

	pattern_fill(buf, sizeof(buf), new_seed(e), 1800 * SECTOR);
	write_ok(_metadata, e, vq, 1800, buf, sizeof(buf), NULL);
	/* The sector of a flush is reserved and ignored. */
	before = host_disk_flushes(_metadata, disk);
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_FLUSH, 12345, NULL, 0,
			   NULL),
		      VIRTIO_BLK_S_OK, 1, "flush with a sector");
	after = host_disk_flushes(_metadata, disk);
	if (wc)
		EXPECT_LT(before, after)
			TH_LOG("no flush reached %u:%u after a write",
			       major(disk), minor(disk));
	verify_pattern(_metadata, e, vq, 1800, sizeof(buf), e->seed);
	if (!wc)
		SKIP(return, "%s is write-through: no flush can reach it",
		     e->path);
}

TEST_F(vhost_blk, get_id_returns_serial)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t id[VIRTIO_BLK_ID_BYTES];

	expect_result(_metadata, get_id(_metadata, e, vq, sizeof(id), 0, id),
		      VIRTIO_BLK_S_OK, VIRTIO_BLK_ID_BYTES + 1, "GET_ID");
	expect_same(_metadata, TEST_SERIAL, id, sizeof(id), "serial");
}

TEST_F(vhost_blk, get_id_short_buffer_gets_prefix)
{
	static const uint32_t lens[] = { 1, 8, 19 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t id[VIRTIO_BLK_ID_BYTES];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		expect_result(_metadata,
			      get_id(_metadata, e, vq, lens[i], 0, id),
			      VIRTIO_BLK_S_OK, lens[i] + 1, "short GET_ID");
		expect_same(_metadata, TEST_SERIAL, id, lens[i], "serial");
	}
}

TEST_F(vhost_blk, get_id_long_buffer_gets_20_bytes)
{
	static const uint32_t segs[] = { 7, 9, 496 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t id[512], pad[512 - VIRTIO_BLK_ID_BYTES];
	struct layout split = { .nseg = ARRAY_SIZE(segs), .seg = segs };

	memset(pad, 0xa5, sizeof(pad));
	expect_result(_metadata, get_id(_metadata, e, vq, sizeof(id), 0, id),
		      VIRTIO_BLK_S_OK, VIRTIO_BLK_ID_BYTES + 1, "GET_ID");
	expect_same(_metadata, TEST_SERIAL, id, VIRTIO_BLK_ID_BYTES, "serial");
	expect_same(_metadata, pad, id + VIRTIO_BLK_ID_BYTES, sizeof(pad),
		    "bytes after the serial");

	/* The serial scattered over three segments. */
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_GET_ID, 0, id,
			   sizeof(id), &split),
		      VIRTIO_BLK_S_OK, VIRTIO_BLK_ID_BYTES + 1,
		      "GET_ID over 3 segments");
	expect_same(_metadata, TEST_SERIAL, id, VIRTIO_BLK_ID_BYTES,
		    "serial over 3 segments");
}

/* @type at @sector, @len bytes: expect IOERR with a used length of 1. */
static void expect_ioerr(struct __test_metadata *_metadata, struct env *e,
			 uint32_t type, uint64_t sector, size_t len,
			 const struct layout *lo)
{
	uint8_t *buf = xmalloc(_metadata, len);
	char what[96];

	memset(buf, 0x3c, len);
	snprintf(what, sizeof(what),
		 "%s of %zu bytes at sector %llu (capacity %llu sectors)",
		 type == VIRTIO_BLK_T_IN ? "read" : "write", len,
		 (unsigned long long)sector, (unsigned long long)e->sectors);
	expect_result(_metadata,
		      xfer(_metadata, e, &e->dev.vq[0], type, sector, buf, len,
			   lo),
		      VIRTIO_BLK_S_IOERR, 1, what);
	free(buf);
}

TEST_F(vhost_blk, read_starting_past_capacity_is_ioerr)
{
	struct env *e = &self->e;

	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, e->sectors, 512, NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, e->sectors + 1000, 4096,
		     NULL);
	/* sector * 512 overflows 64 bits. */
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, 1ULL << 55, 512, NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, ~0ULL, 512, NULL);
}

TEST_F(vhost_blk, write_starting_past_capacity_is_ioerr)
{
	struct env *e = &self->e;

	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, e->sectors, 512, NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, e->sectors + 1000, 4096,
		     NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, 1ULL << 55, 512, NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, ~0ULL, 512, NULL);
}

TEST_F(vhost_blk, read_running_past_capacity_is_ioerr)
{
	struct env *e = &self->e;

	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, e->sectors - 1, 1024,
		     NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, e->sectors - 8, MiB,
		     NULL);
}

TEST_F(vhost_blk, write_running_past_capacity_is_ioerr_and_writes_nothing)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint64_t seed;
	uint8_t buf[4096];

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, (e->sectors - 8) * SECTOR);
	write_ok(_metadata, e, vq, e->sectors - 8, buf, sizeof(buf), NULL);

	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, e->sectors - 1, 1024,
		     NULL);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, e->sectors - 4, 64 * KiB,
		     NULL);
	verify_pattern(_metadata, e, vq, e->sectors - 8, sizeof(buf), seed);
}

TEST_F(vhost_blk, length_not_multiple_of_512_is_ioerr)
{
	static const uint32_t segs[] = { 512, 1 };
	static const size_t lens[] = { 1, 100, 511, 513, 1000, 4097 };
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct layout two = { .nseg = 2, .seg = segs };
	uint64_t seed;
	uint8_t buf[8192];
	unsigned int i;

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 2000 * SECTOR);
	write_ok(_metadata, e, vq, 2000, buf, sizeof(buf), NULL);

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, 2000, lens[i],
			     NULL);
		expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, 2000, lens[i],
			     NULL);
	}
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_IN, 2000, 513, &two);
	expect_ioerr(_metadata, e, VIRTIO_BLK_T_OUT, 2000, 513, &two);
	verify_pattern(_metadata, e, vq, 2000, sizeof(buf), seed);
}

TEST_F(vhost_blk, unknown_types_are_unsupp)
{
	static const uint32_t types[] = {
		0xff, VIRTIO_BLK_T_SCSI_CMD, 3, 5, 7, 9, 12,
		VIRTIO_BLK_T_ZONE_APPEND, VIRTIO_BLK_T_ZONE_REPORT,
		VIRTIO_BLK_T_ZONE_OPEN, VIRTIO_BLK_T_ZONE_CLOSE,
		VIRTIO_BLK_T_ZONE_FINISH, VIRTIO_BLK_T_ZONE_RESET,
		VIRTIO_BLK_T_ZONE_RESET_ALL, 0x7fffffff, 0xffffffff,
	};
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[512];
	unsigned int i;
	char what[64];

	memset(buf, 0, sizeof(buf));
	for (i = 0; i < ARRAY_SIZE(types); i++) {
		snprintf(what, sizeof(what), "type %#x", types[i]);
		expect_result(_metadata,
			      xfer(_metadata, e, vq, types[i], 0, buf,
				   sizeof(buf), NULL),
			      VIRTIO_BLK_S_UNSUPP, 1, what);
		snprintf(what, sizeof(what), "type %#x without data",
			 types[i]);
		expect_result(_metadata,
			      xfer(_metadata, e, vq, types[i], 0, NULL, 0,
				   NULL),
			      VIRTIO_BLK_S_UNSUPP, 1, what);
	}
}

TEST_F(vhost_blk, get_lifetime_is_unsupp)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[16];

	memset(buf, 0xa5, sizeof(buf));
	expect_result(_metadata,
		      xfer(_metadata, e, vq, VIRTIO_BLK_T_GET_LIFETIME, 0, buf,
			   sizeof(buf), NULL),
		      VIRTIO_BLK_S_UNSUPP, 1, "GET_LIFETIME");
}

TEST_F(vhost_blk, data_in_the_wrong_direction_is_ioerr)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	uint8_t buf[4096];
	uint64_t seed;

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 2100 * SECTOR);
	write_ok(_metadata, e, vq, 2100, buf, sizeof(buf), NULL);

	/* A read whose buffer the device may not write... */
	expect_result(_metadata,
		      xfer_dir(_metadata, e, vq, VIRTIO_BLK_T_IN, BLK_DIR_OUT,
			       2100, buf, sizeof(buf), NULL),
		      VIRTIO_BLK_S_IOERR, 1, "read into a readable buffer");
	/* ... and a write whose buffer it may not read. */
	memset(buf, 0, sizeof(buf));
	expect_result(_metadata,
		      xfer_dir(_metadata, e, vq, VIRTIO_BLK_T_OUT, BLK_DIR_IN,
			       2100, buf, sizeof(buf), NULL),
		      VIRTIO_BLK_S_IOERR, 1, "write from a writable buffer");
	verify_pattern(_metadata, e, vq, 2100, sizeof(buf), seed);
}

TEST_F_TIMEOUT(vhost_blk, max_segments_per_request_round_trip, 60)
{
	static uint32_t seg[VHOST_BLK_SEG_MAX];
	struct env *e = &self->e;
	struct layout lo = {
		.flags = BLK_REQ_INDIRECT, .nseg = VHOST_BLK_SEG_MAX,
		.seg = seg,
	};
	struct layout odd = lo;
	unsigned int i;

	/* Header, 1022 data segments and status: 1024 descriptors. */
	env_reopen(_metadata, e, 1, VHOST_BLK_SEG_MAX + 2, 0);
	for (i = 0; i < VHOST_BLK_SEG_MAX; i++)
		seg[i] = 512;
	rw_verify(_metadata, e, &e->dev.vq[0], 2200,
		  VHOST_BLK_SEG_MAX * 512, &lo, NULL);
	rw_verify(_metadata, e, &e->dev.vq[0], 3300,
		  VHOST_BLK_SEG_MAX * 512, NULL, &lo);
	/* Unaligned segment lengths: 511 + 513 + 511 + ... */
	for (i = 0; i < VHOST_BLK_SEG_MAX; i++)
		seg[i] = i & 1 ? 513 : 511;
	rw_verify(_metadata, e, &e->dev.vq[0], 4400,
		  VHOST_BLK_SEG_MAX * 512, &odd, &odd);
}

/*
 * Fill @nsect sectors from @base with a pattern, WRITE_ZEROES the @n ranges
 * @r (inside them), expect OK, and read back zeroes in exactly the ranges.
 * The attached backend must be one that is offered WRITE_ZEROES.
 */
static void zero_ranges_exactly(struct __test_metadata *_metadata,
				struct env *e, uint64_t base, unsigned int nsect,
				const struct virtio_blk_discard_write_zeroes *r,
				unsigned int n, const char *what)
{
	struct vq *vq = &e->dev.vq[0];
	size_t len = (size_t)nsect * SECTOR;
	uint8_t *want = xmalloc(_metadata, len), *got = xmalloc(_metadata, len);
	uint64_t f = 0;
	unsigned int i;

	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	ASSERT_TRUE(!!(f & VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES)))
		TH_LOG("%s: WRITE_ZEROES is not offered", what);
	pattern_fill(want, len, new_seed(e), base * SECTOR);
	write_ok(_metadata, e, vq, base, want, len, NULL);
	expect_result(_metadata,
		      ranges(_metadata, e, vq, VIRTIO_BLK_T_WRITE_ZEROES, r, n,
			     0),
		      VIRTIO_BLK_S_OK, 1, what);
	for (i = 0; i < n; i++)
		memset(want + (le64toh(r[i].sector) - base) * SECTOR, 0,
		       (size_t)le32toh(r[i].num_sectors) * SECTOR);
	read_ok(_metadata, e, vq, base, got, len, NULL);
	expect_same(_metadata, want, got, len, what);
	free(want);
	free(got);
}

TEST_F(vhost_blk, write_zeroes_zeroes_exactly_the_ranges)
{
	const uint64_t base = 5500;
	struct virtio_blk_discard_write_zeroes r[3] = {
		range(base + 8, 8, 0),
		range(base + 32, 16, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP),
		range(base + 63, 1, 0),
	};

	if (!backend_has_write_zeroes(self->e.backend_fd))
		SKIP(return, "%s has no write zeroes", self->e.path);
	zero_ranges_exactly(_metadata, &self->e, base, 64, r, 3,
			    "WRITE_ZEROES over 3 ranges");
}

/* An empty range is a no-op; the ranges around it are done, on any backend. */
TEST_F(vhost_blk, write_zeroes_empty_range_is_a_noop)
{
	const uint64_t base = 5650;
	struct virtio_blk_discard_write_zeroes r[3] = {
		range(base, 2, 0),
		range(base + 4, 0, 0),
		range(base + 8, 2, 0),
	};

	if (!backend_has_write_zeroes(self->e.backend_fd))
		SKIP(return, "%s has no write zeroes", self->e.path);
	zero_ranges_exactly(_metadata, &self->e, base, 16, r, 3,
			    "WRITE_ZEROES with an empty range");
}

/*
 * A table that is empty or not a multiple of 16 bytes is IOERR, more than 32
 * ranges or a reserved flag UNSUPP, a range outside the disk IOERR; but a
 * block device without write zeroes answers UNSUPP to any WRITE_ZEROES
 * whose table is well-formed, before its ranges are looked at.
 */
TEST_F(vhost_blk, write_zeroes_bad_ranges_are_rejected)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct virtio_blk_discard_write_zeroes r[VHOST_BLK_MAX_DISCARD_SEG + 1];
	const uint32_t wz = VIRTIO_BLK_T_WRITE_ZEROES;
	const uint8_t bad = backend_has_write_zeroes(e->backend_fd) ?
			    VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_UNSUPP;
	uint8_t buf[4096];
	uint64_t seed;
	unsigned int i;

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 5600 * SECTOR);
	write_ok(_metadata, e, vq, 5600, buf, sizeof(buf), NULL);

	r[0] = range(e->sectors - 4, 8, 0);
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 1, 0),
		      bad, 1, "range running past the end");
	r[0] = range(e->sectors, 1, 0);
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 1, 0),
		      bad, 1, "range starting at the end");
	r[0] = range(~0ULL - 3, 8, 0);
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 1, 0),
		      bad, 1, "range wrapping around");
	r[0] = range(5600, VHOST_BLK_MAX_DISCARD_SECTORS + 1, 0);
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 1, 0),
		      bad, 1, "range over the size limit");
	/* A good range and a bad one: nothing is done. */
	r[0] = range(5600, 8, 0);
	r[1] = range(e->sectors, 8, 0);
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 2, 0),
		      bad, 1, "good range, then a bad one");
	r[1] = range(5600, 8, 2);
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 2, 0),
		      VIRTIO_BLK_S_UNSUPP, 1, "reserved flag");
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 1, 8),
		      range_status(&e->dev, wz, VIRTIO_BLK_S_IOERR), 1,
		      "table of 24 bytes");
	expect_result(_metadata, ranges(_metadata, e, vq, wz, r, 0, 0),
		      range_status(&e->dev, wz, VIRTIO_BLK_S_IOERR), 1,
		      "no table");
	for (i = 0; i <= VHOST_BLK_MAX_DISCARD_SEG; i++)
		r[i] = range(5600, 1, 0);
	expect_result(_metadata,
		      ranges(_metadata, e, vq, wz, r,
			     VHOST_BLK_MAX_DISCARD_SEG + 1, 0),
		      VIRTIO_BLK_S_UNSUPP, 1, "too many ranges");
	verify_pattern(_metadata, e, vq, 5600, sizeof(buf), seed);
}

/*
 * A block device without REQ_OP_WRITE_ZEROES (brd, null_blk) would have the
 * kernel write zero pages for a WRITE_ZEROES, up to 64 GiB of them for one
 * request: it is not offered, the config has no write-zeroes limits, and a
 * WRITE_ZEROES, with unmap or without, is UNSUPP and writes nothing.
 */
TEST_F(vhost_blk, write_zeroes_without_device_support_is_not_offered_and_unsupp)
{
	const uint64_t base = 5900;
	const uint32_t unmap = VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
	const struct virtio_blk_discard_write_zeroes r[2] = {
		range(base + 8, 8, 0),
		range(base + 24, 16, unmap),
	};
	struct vhost_blk_vring_stats st;
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	struct virtio_blk_config cfg;
	uint8_t buf[64 * SECTOR];
	struct result res;
	uint64_t seed, f = 0;
	unsigned int i;
	char what[64];

	if (backend_has_write_zeroes(e->backend_fd))
		SKIP(return, "%s has write zeroes", e->path);
	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	EXPECT_FALSE(!!(f & VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES)))
		TH_LOG("WRITE_ZEROES offered on %s", e->path);
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(0U, cfg.max_write_zeroes_sectors);
	EXPECT_EQ(0U, cfg.max_write_zeroes_seg);
	EXPECT_EQ(0, cfg.write_zeroes_may_unmap);

	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, base * SECTOR);
	write_ok(_metadata, e, vq, base, buf, sizeof(buf), NULL);
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, VHOST_BLK_STATS_RESET, &st));
	/* Each range alone, then both. */
	for (i = 0; i < 3; i++) {
		res = ranges(_metadata, e, vq, VIRTIO_BLK_T_WRITE_ZEROES,
			     i < 2 ? &r[i] : r, i < 2 ? 1 : 2, 0);
		snprintf(what, sizeof(what), "WRITE_ZEROES %s",
			 i == 0 ? "without unmap" : i == 1 ? "with unmap" :
			 "of 2 ranges");
		EXPECT_EQ(VIRTIO_BLK_S_UNSUPP, res.status)
			TH_LOG("%s: status %s", what,
			       blk_status_name(res.status));
		EXPECT_EQ(1U, res.used) TH_LOG("used length of %s", what);
	}
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	EXPECT_EQ(3ULL, st.reqs_unsupp);
	EXPECT_EQ(0ULL, st.reqs_write_zeroes);
	verify_pattern(_metadata, e, vq, base, sizeof(buf), seed);
}

/*
 * A block device with REQ_OP_WRITE_ZEROES is offered WRITE_ZEROES, with its
 * limits in the config, and zeroes exactly the ranges: a loop device over
 * a scratch file, which does it with fallocate() on the file.  Loop makes
 * an unmapping WRITE_ZEROES a PUNCH_HOLE and the others a ZERO_RANGE,
 * which some file systems lack (tmpfs): those are sent only where the
 * scratch file took a ZERO_RANGE.
 */
TEST_F(vhost_blk, write_zeroes_on_a_loop_device_is_offered_and_zeroes)
{
	const uint64_t size = 64 * MiB, base = 2048;
	const uint32_t unmap = VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP;
	struct virtio_blk_discard_write_zeroes punch[3] = {
		range(base + 8, 8, unmap),
		range(base + 33, 7, unmap),
		range(base + 63, 1, unmap),
	};
	struct virtio_blk_discard_write_zeroes keep[2] = {
		range(base + 1, 3, 0),
		range(base + 40, 16, 0),
	};
	struct vhost_blk_vring_stats st;
	char dirbuf[PATH_MAX], path[PATH_MAX + 64], name[32];
	struct env *e = &self->e;
	struct virtio_blk_config cfg;
	bool zero_range;
	const char *dir;
	int fd, loop;
	uint64_t f = 0;

	dir = scratch_dir(e, dirbuf, sizeof(dirbuf));
	snprintf(path, sizeof(path), "%s/vhost-blk-io-loop.XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		SKIP(return, "cannot create a scratch file in %.200s: %s", dir,
		     strerror(errno));
	unlink(path);
	ASSERT_EQ(0, ftruncate(fd, (off_t)size));
	zero_range = !fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
				0, 4096);
	loop = loop_attach(fd, name, sizeof(name));
	close(fd);
	if (loop == -ENOENT)
		SKIP(return, "no /dev/loop-control (no loop driver)");
	ASSERT_LE(0, loop)
		TH_LOG("a loop device over %s: %s", dir, strerror(-loop));
	if (!backend_has_write_zeroes(loop)) {
		close(loop);
		SKIP(return, "%s over %.200s has no write zeroes", name, dir);
	}
	ASSERT_EQ(0, vblk_attach(&e->dev, loop));
	close(loop);
	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, VHOST_BLK_STATS_RESET, &st));

	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	ASSERT_TRUE(!!(f & VBLK_F(VIRTIO_BLK_F_WRITE_ZEROES)))
		TH_LOG("%s over %s: WRITE_ZEROES not offered", name, dir);
	ASSERT_EQ(0, vblk_get_config(e->dev.fd, &cfg));
	EXPECT_EQ(size / SECTOR, cfg.capacity);
	EXPECT_EQ((uint32_t)VHOST_BLK_MAX_DISCARD_SECTORS,
		  cfg.max_write_zeroes_sectors);
	EXPECT_EQ((uint32_t)VHOST_BLK_MAX_DISCARD_SEG, cfg.max_write_zeroes_seg);
	EXPECT_EQ(1, cfg.write_zeroes_may_unmap);

	zero_ranges_exactly(_metadata, e, base, 64, punch, ARRAY_SIZE(punch),
			    "WRITE_ZEROES with unmap on a loop device");
	if (zero_range)
		zero_ranges_exactly(_metadata, e, base, 64, keep,
				    ARRAY_SIZE(keep),
				    "WRITE_ZEROES on a loop device");
	else
		TH_LOG("%s has no ZERO_RANGE: WRITE_ZEROES without unmap not sent",
		       dir);

	ASSERT_EQ(0, vblk_get_stats(e->dev.fd, 0, 0, &st));
	EXPECT_EQ(zero_range ? 2ULL : 1ULL, st.reqs_write_zeroes);
	EXPECT_EQ(0ULL, st.reqs_unsupp);
	EXPECT_EQ(0ULL, st.reqs_ioerr);
}

TEST_F(vhost_blk, discard_is_done_or_unsupported)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	const uint32_t dc = VIRTIO_BLK_T_DISCARD;
	struct virtio_blk_discard_write_zeroes r[1];
	uint8_t buf[4096];
	struct result res;
	uint64_t seed;

	/* Offered, and so negotiated, where the backend discards. */
	ASSERT_EQ(backend_has_discard(e->backend_fd),
		  vblk_has(&e->dev, VIRTIO_BLK_F_DISCARD));
	seed = new_seed(e);
	pattern_fill(buf, sizeof(buf), seed, 5700 * SECTOR);
	write_ok(_metadata, e, vq, 5700, buf, sizeof(buf), NULL);

	r[0] = range(5700, 8, 0);
	res = ranges(_metadata, e, vq, dc, r, 1, 0);
	ASSERT_EQ(1U, res.used);
	ASSERT_TRUE(res.status == VIRTIO_BLK_S_OK ||
		    res.status == VIRTIO_BLK_S_UNSUPP)
		TH_LOG("DISCARD: status %s", blk_status_name(res.status));
	if (res.status == VIRTIO_BLK_S_UNSUPP) {
		/* Refused: nothing of it was done. */
		verify_pattern(_metadata, e, vq, 5700, sizeof(buf), seed);
		SKIP(return, "%s has no discard (DISCARD answered UNSUPP)",
		     e->path);
	}
	/* UNMAP means nothing for DISCARD: a reserved flag. */
	r[0] = range(5700, 8, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	expect_result(_metadata, ranges(_metadata, e, vq, dc, r, 1, 0),
		      VIRTIO_BLK_S_UNSUPP, 1, "DISCARD with UNMAP");
	r[0] = range(e->sectors - 4, 8, 0);
	expect_result(_metadata, ranges(_metadata, e, vq, dc, r, 1, 0),
		      VIRTIO_BLK_S_IOERR, 1, "DISCARD past the end");
	/* The disk still works around a discarded area. */
	rw_verify(_metadata, e, vq, 5700, 4096, NULL, NULL);
}

TEST_F(vhost_blk, secure_erase_without_the_feature_is_unsupp)
{
	struct env *e = &self->e;
	struct virtio_blk_discard_write_zeroes r[1] = { range(5800, 8, 0) };
	uint64_t f = 0;

	ASSERT_EQ(0, vblk_get_features(e->dev.fd, &f));
	if (f & VBLK_F(VIRTIO_BLK_F_SECURE_ERASE))
		SKIP(return, "%s supports secure erase", e->path);
	expect_result(_metadata,
		      ranges(_metadata, e, &e->dev.vq[0],
			     VIRTIO_BLK_T_SECURE_ERASE, r, 1, 0),
		      VIRTIO_BLK_S_UNSUPP, 1, "SECURE_ERASE");
}

TEST_F_TIMEOUT(vhost_blk, every_queue_serves_the_same_disk, 60)
{
	enum { PER_Q = 8 };
	struct env *e = &self->e;
	uint32_t len = 16 * KiB;
	uint8_t *pat = xmalloc(_metadata, len);
	uint64_t seed = new_seed(e);
	unsigned int nq = e->nq, q, i;
	struct blk_req *req = calloc(nq * PER_Q, sizeof(*req));

	ASSERT_NE(NULL, req);
	env_reopen(_metadata, e, nq, 16, 0);
	ASSERT_EQ(nq, e->dev.nvqs);
	ASSERT_TRUE(vblk_has(&e->dev, VIRTIO_BLK_F_MQ));

	/* Writes on all queues at once. */
	for (q = 0; q < nq; q++) {
		for (i = 0; i < PER_Q; i++) {
			struct blk_req *r = &req[q * PER_Q + i];
			struct blk_req_spec spec = {
				.type = VIRTIO_BLK_T_OUT, .nseg = 1,
				.seg_len = &len,
				.sector = 100000 + (q * PER_Q + i) * 32,
				.flags = (i & 1) ? BLK_REQ_INDIRECT : 0,
			};

			ASSERT_EQ(0, blk_req_prep(r, &e->gm, &spec));
			pattern_fill(pat, len, seed, spec.sector * SECTOR);
			blk_req_fill(r, pat, len);
			ASSERT_EQ(0, blk_req_post(&e->dev.vq[q], r));
		}
	}
	for (q = 0; q < nq; q++)
		ASSERT_LE(0, vq_kick(&e->dev.vq[q]));
	for (q = 0; q < nq; q++) {
		ASSERT_EQ(0, blk_complete(&e->dev.vq[q], PER_Q))
			TH_LOG("queue %u", q);
		for (i = 0; i < PER_Q; i++) {
			struct blk_req *r = &req[q * PER_Q + i];

			ASSERT_STATUS(VIRTIO_BLK_S_OK, *r->status,
				      "queue %u request %u", q, i);
			ASSERT_EQ(1U, r->used_len);
			blk_req_free(r);
		}
	}
	/* Read every area back through another queue. */
	for (q = 0; q < nq; q++)
		for (i = 0; i < PER_Q; i++)
			verify_pattern(_metadata, e, &e->dev.vq[(q + 5) % nq],
				       100000 + (q * PER_Q + i) * 32, len,
				       seed);
	free(req);
	free(pat);
}

TEST_F_TIMEOUT(vhost_blk, ring_indices_wrap_around, 60)
{
	struct env *e = &self->e;
	struct vq *vq;
	unsigned int round;

	/* 64 entries before the 16-bit indices wrap. */
	env_reopen(_metadata, e, 1, 0, 0xffc0);
	vq = &e->dev.vq[0];
	ASSERT_EQ(0xffc0, vq->avail_idx);
	for (round = 0; round < 3; round++)
		batch_write_read(_metadata, e, vq, 120000 + round * 4096,
				 vq->num / 3, 8 * KiB, 1, 0);
	ASSERT_GT(0xffc0, vq->avail_idx) TH_LOG("the index did not wrap");
	for (round = 0; round < 2; round++)
		batch_write_read(_metadata, e, vq, 130000 + round * 4096,
				 vq->num, 4 * KiB, 1, BLK_REQ_INDIRECT);
}

TEST_F(vhost_blk, data_reaches_the_backend)
{
	struct env *e = &self->e;
	struct vq *vq = &e->dev.vq[0];
	size_t len = 64 * KiB;
	uint64_t sector = 140000, seed;
	uint8_t *pat, *got;
	int fd;

	ASSERT_EQ(0, posix_memalign((void **)&pat, 4096, len));
	ASSERT_EQ(0, posix_memalign((void **)&got, 4096, len));
	fd = open(e->path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL)
		fd = open(e->path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", e->path, strerror(errno));

	/* Device write, backend read. */
	seed = new_seed(e);
	pattern_fill(pat, len, seed, sector * SECTOR);
	write_ok(_metadata, e, vq, sector, pat, len, NULL);
	ASSERT_EQ((ssize_t)len, pread(fd, got, len, sector * SECTOR))
		TH_LOG("pread: %s", strerror(errno));
	expect_same(_metadata, pat, got, len, "backend after a device write");

	/* Backend write, device read. */
	seed = new_seed(e);
	pattern_fill(pat, len, seed, (sector + 256) * SECTOR);
	ASSERT_EQ((ssize_t)len, pwrite(fd, pat, len, (sector + 256) * SECTOR))
		TH_LOG("pwrite: %s", strerror(errno));
	ASSERT_EQ(0, fdatasync(fd));
	verify_pattern(_metadata, e, vq, sector + 256, len, seed);
	close(fd);
	free(pat);
	free(got);
}

TEST_HARNESS_MAIN
