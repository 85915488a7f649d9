/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio-blk requests in guest memory: lay out header, data and status the
 * way a spec asks (split header, data sharing the header's or the status
 * descriptor, zero-length descriptors, indirect table), post them on a vq
 * and collect their completions.
 */
#ifndef VBLK_BLK_REQ_H
#define VBLK_BLK_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/virtio_blk.h>

#include "guest_mem.h"
#include "vq.h"

#ifndef VIRTIO_BLK_T_GET_LIFETIME
#define VIRTIO_BLK_T_GET_LIFETIME	10
#endif

#define BLK_SECTOR_SIZE		512
#define BLK_HDR_SIZE		((unsigned int)sizeof(struct virtio_blk_outhdr))
#define BLK_STATUS_UNSET	0xff	/* status byte before completion */

/*
 * Layout flags.
 * BLK_REQ_INDIRECT: the whole chain in an indirect table.
 * BLK_REQ_DATA_IN_HDR: the first data segment in the header's (last)
 *	descriptor; needs device-readable data.
 * BLK_REQ_DATA_IN_STATUS: the last data segment in the status descriptor;
 *	needs device-writable data.
 * BLK_REQ_ZERO_LEN: a zero-length descriptor before every descriptor and
 *	one at the end.
 */
enum {
	BLK_REQ_INDIRECT	= 1 << 0,
	BLK_REQ_DATA_IN_HDR	= 1 << 1,
	BLK_REQ_DATA_IN_STATUS	= 1 << 2,
	BLK_REQ_ZERO_LEN	= 1 << 3,
};

enum blk_dir {
	BLK_DIR_AUTO,		/* writable for IN, GET_ID, GET_LIFETIME */
	BLK_DIR_OUT,		/* data is device-readable */
	BLK_DIR_IN,		/* data is device-writable */
};

struct blk_req_spec {
	uint32_t type;
	uint32_t ioprio;
	uint64_t sector;
	unsigned int nseg;		/* data segments */
	const uint32_t *seg_len;	/* their lengths (may be 0) */
	enum blk_dir dir;
	unsigned int hdr_parts;		/* header descriptors, 0/1: one */
	unsigned int flags;		/* BLK_REQ_* */
	unsigned int align;		/* data buffer alignment; 0: 512 */
	unsigned int misalign;		/* added to every data address */
};

struct blk_req {
	struct virtio_blk_outhdr *hdr;	/* in guest memory */
	uint8_t *status;		/* in guest memory */
	unsigned int nseg;
	uint8_t **data;			/* segment buffers, in guest memory */
	uint32_t *len;
	size_t data_len;		/* sum of len[] */
	bool data_write;
	unsigned int flags;

	struct vq_buf *bufs;		/* the chain */
	unsigned int nbufs;

	int head;			/* after posting */
	bool done;
	uint32_t used_len;		/* from the used ring */
};

/*
 * Allocate and lay out a request from @gm (reclaim with guest_release()),
 * write its header, set the status to BLK_STATUS_UNSET.  The data buffers
 * are zeroed; fill them (blk_req_fill) before posting a write.
 * 0 or -EINVAL (impossible layout) / -ENOMEM, reported.
 */
int blk_req_prep(struct blk_req *req, struct guest_mem *gm,
		 const struct blk_req_spec *spec);
/* Frees the host-side arrays (not the guest memory). */
void blk_req_free(struct blk_req *req);

/* Scatter @len bytes of @src into the segments / gather them to @dst. */
size_t blk_req_fill(struct blk_req *req, const void *src, size_t len);
size_t blk_req_gather(const struct blk_req *req, void *dst, size_t len);

/* Post (not kick); the request may be posted again once done. */
int blk_req_post(struct vq *vq, struct blk_req *req);

/*
 * Harvest one completion (waiting up to the hang timeout) and mark its
 * request done.  0, -ETIMEDOUT or -EPROTO (bad id / double completion).
 */
int blk_complete_one(struct vq *vq);
/* Harvest until @n completions have been taken. */
int blk_complete(struct vq *vq, unsigned int n);
/* Post, kick, and wait until @req is done (others may complete too). */
int blk_req_run(struct vq *vq, struct blk_req *req);

const char *blk_status_name(uint8_t status);

#endif /* VBLK_BLK_REQ_H */
