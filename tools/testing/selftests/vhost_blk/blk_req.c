// SPDX-License-Identifier: GPL-2.0
/*
 * virtio-blk request layout and completion.  See blk_req.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blk_req.h"

#define BLK_MAX_HDR_PARTS	BLK_HDR_SIZE

static bool blk_type_is_read(uint32_t type)
{
	return type == VIRTIO_BLK_T_IN || type == VIRTIO_BLK_T_GET_ID ||
	       type == VIRTIO_BLK_T_GET_LIFETIME;
}

static void blk_add(struct blk_req *req, uint64_t addr, uint32_t len,
		    bool write)
{
	struct vq_buf *b;

	if (req->flags & BLK_REQ_ZERO_LEN) {
		b = &req->bufs[req->nbufs++];
		b->addr = addr;
		b->len = 0;
		b->write = write;
	}
	b = &req->bufs[req->nbufs++];
	b->addr = addr;
	b->len = len;
	b->write = write;
}

static int blk_req_layout(struct blk_req *req, struct guest_mem *gm,
			  const struct blk_req_spec *spec)
{
	unsigned int align = spec->align ? spec->align : BLK_SECTOR_SIZE;
	unsigned int parts = spec->hdr_parts ? spec->hdr_parts : 1;
	unsigned int nseg = spec->nseg, first = 0, end = nseg, i, off;
	size_t pad = (BLK_HDR_SIZE + align - 1) & ~(size_t)(align - 1);
	uint8_t *p;

	if (req->flags & BLK_REQ_DATA_IN_HDR) {
		p = guest_alloc(gm, pad + spec->misalign + spec->seg_len[0],
				align);
		if (!p)
			return -ENOMEM;
		req->data[0] = p + pad + spec->misalign;
		req->hdr = (void *)(req->data[0] - BLK_HDR_SIZE);
		first = 1;
	} else {
		req->hdr = guest_alloc(gm, BLK_HDR_SIZE, 16);
		if (!req->hdr)
			return -ENOMEM;
	}

	if (req->flags & BLK_REQ_DATA_IN_STATUS) {
		end = nseg - 1;
		p = guest_alloc(gm, spec->misalign + spec->seg_len[end] + 1,
				align);
		if (!p)
			return -ENOMEM;
		req->data[end] = p + spec->misalign;
		req->status = req->data[end] + spec->seg_len[end];
	} else {
		req->status = guest_alloc(gm, 1, 64);
		if (!req->status)
			return -ENOMEM;
	}

	for (i = first; i < end; i++) {
		p = guest_alloc(gm, spec->misalign + spec->seg_len[i], align);
		if (!p)
			return -ENOMEM;
		req->data[i] = p + spec->misalign;
	}

	/* Device-readable part: the header, maybe the data. */
	for (i = 0, off = 0; i < parts; i++) {
		unsigned int len = BLK_HDR_SIZE / parts +
				   (i < BLK_HDR_SIZE % parts);

		if (i == parts - 1 && (req->flags & BLK_REQ_DATA_IN_HDR))
			len += req->len[0];
		blk_add(req, gpa_of(gm, (uint8_t *)req->hdr + off), len, false);
		off += len;
	}
	if (!req->data_write)
		for (i = first; i < nseg; i++)
			blk_add(req, gpa_of(gm, req->data[i]), req->len[i],
				false);

	/* Device-writable part: maybe the data, the status byte last. */
	if (req->data_write)
		for (i = 0; i < end; i++)
			blk_add(req, gpa_of(gm, req->data[i]), req->len[i],
				true);
	if (req->flags & BLK_REQ_DATA_IN_STATUS)
		blk_add(req, gpa_of(gm, req->data[end]), req->len[end] + 1,
			true);
	else
		blk_add(req, gpa_of(gm, req->status), 1, true);
	if (req->flags & BLK_REQ_ZERO_LEN) {
		req->bufs[req->nbufs].addr = gpa_of(gm, req->status);
		req->bufs[req->nbufs].len = 0;
		req->bufs[req->nbufs].write = true;
		req->nbufs++;
	}
	return 0;
}

int blk_req_prep(struct blk_req *req, struct guest_mem *gm,
		 const struct blk_req_spec *spec)
{
	unsigned int parts = spec->hdr_parts ? spec->hdr_parts : 1;
	unsigned int align = spec->align ? spec->align : BLK_SECTOR_SIZE;
	unsigned int i, max_bufs;
	int err;

	memset(req, 0, sizeof(*req));
	req->head = -1;
	req->flags = spec->flags;
	req->nseg = spec->nseg;
	if (spec->dir == BLK_DIR_AUTO)
		req->data_write = blk_type_is_read(spec->type);
	else
		req->data_write = spec->dir == BLK_DIR_IN;

	if (parts > BLK_MAX_HDR_PARTS || (align & (align - 1)) ||
	    (spec->nseg && !spec->seg_len) ||
	    ((spec->flags & BLK_REQ_DATA_IN_HDR) &&
	     (!spec->nseg || req->data_write)) ||
	    ((spec->flags & BLK_REQ_DATA_IN_STATUS) &&
	     (!spec->nseg || !req->data_write))) {
		guest_log(
			"blk_req: impossible layout (type %u, %u segments, %u header parts, flags %#x)",
			spec->type, spec->nseg, parts, spec->flags);
		return -EINVAL;
	}

	max_bufs = 2 * (parts + spec->nseg + 1) + 1;
	req->data = calloc(spec->nseg + 1, sizeof(*req->data));
	req->len = calloc(spec->nseg + 1, sizeof(*req->len));
	req->bufs = calloc(max_bufs, sizeof(*req->bufs));
	if (!req->data || !req->len || !req->bufs) {
		blk_req_free(req);
		return -ENOMEM;
	}
	for (i = 0; i < spec->nseg; i++) {
		req->len[i] = spec->seg_len[i];
		req->data_len += spec->seg_len[i];
	}

	err = blk_req_layout(req, gm, spec);
	if (err) {
		guest_log("blk_req: out of guest memory for %zu data bytes",
			  req->data_len);
		blk_req_free(req);
		return err;
	}
	req->hdr->type = spec->type;
	req->hdr->ioprio = spec->ioprio;
	req->hdr->sector = spec->sector;
	*req->status = BLK_STATUS_UNSET;
	return 0;
}

void blk_req_free(struct blk_req *req)
{
	free(req->data);
	free(req->len);
	free(req->bufs);
	req->data = NULL;
	req->len = NULL;
	req->bufs = NULL;
	req->nbufs = 0;
}

size_t blk_req_fill(struct blk_req *req, const void *src, size_t len)
{
	const uint8_t *s = src;
	size_t done = 0;
	unsigned int i;

	for (i = 0; i < req->nseg && done < len; i++) {
		size_t n = req->len[i] < len - done ? req->len[i] : len - done;

		memcpy(req->data[i], s + done, n);
		done += n;
	}
	return done;
}

size_t blk_req_gather(const struct blk_req *req, void *dst, size_t len)
{
	uint8_t *d = dst;
	size_t done = 0;
	unsigned int i;

	for (i = 0; i < req->nseg && done < len; i++) {
		size_t n = req->len[i] < len - done ? req->len[i] : len - done;

		memcpy(d + done, req->data[i], n);
		done += n;
	}
	return done;
}

int blk_req_post(struct vq *vq, struct blk_req *req)
{
	int head;

	req->done = false;
	req->used_len = 0;
	*req->status = BLK_STATUS_UNSET;
	head = vq_add_chain(vq, req->bufs, req->nbufs,
			    (req->flags & BLK_REQ_INDIRECT) ? VQ_ADD_INDIRECT : 0,
			    req);
	if (head < 0) {
		guest_log("blk_req: cannot post a chain of %u descriptors on vq %u (%u free): %s",
			  req->nbufs, vq->index, vq->num_free, strerror(-head));
		return head;
	}
	req->head = head;
	return 0;
}

int blk_complete_one(struct vq *vq)
{
	struct blk_req *req;
	struct vq_used u;
	int err;

	err = vq_wait_used(vq, &u, -1);
	if (err)
		return err;
	if (u.bad)
		return -EPROTO;
	req = u.token;
	if (req->done) {
		guest_log("blk_req: head %u completed twice", u.id);
		return -EPROTO;
	}
	req->done = true;
	req->used_len = u.len;
	return 0;
}

int blk_complete(struct vq *vq, unsigned int n)
{
	int err;

	while (n--) {
		err = blk_complete_one(vq);
		if (err)
			return err;
	}
	return 0;
}

int blk_req_run(struct vq *vq, struct blk_req *req)
{
	int err;

	err = blk_req_post(vq, req);
	if (err)
		return err;
	err = vq_kick(vq);
	if (err < 0)
		return err;
	while (!req->done) {
		err = blk_complete_one(vq);
		if (err)
			return err;
	}
	return 0;
}

const char *blk_status_name(uint8_t status)
{
	switch (status) {
	case VIRTIO_BLK_S_OK:
		return "OK";
	case VIRTIO_BLK_S_IOERR:
		return "IOERR";
	case VIRTIO_BLK_S_UNSUPP:
		return "UNSUPP";
	case BLK_STATUS_UNSET:
		return "unset";
	default:
		return "invalid";
	}
}
