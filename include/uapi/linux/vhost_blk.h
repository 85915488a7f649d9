/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * vhost-blk: in-kernel virtio-blk device backend.
 *
 * A VMM opens /dev/vhost-blk and drives it with the generic vhost ioctls of
 * <linux/vhost.h> (VHOST_SET_OWNER, VHOST_SET_MEM_TABLE, VHOST_SET_VRING_*,
 * VHOST_GET/SET_FEATURES, the worker ioctls, and VHOST_SET_LOG_BASE /
 * VHOST_SET_LOG_FD with VHOST_F_LOG_ALL for live migration), plus the ones
 * below.
 *
 * Only the owner, the process whose mm called VHOST_SET_OWNER, may change
 * the device: any other caller (a forked child holding the fd included)
 * gets EPERM from every ioctl below but the read-only ones
 * (VHOST_BLK_GET_CONFIG, VHOST_BLK_GET_VRING_STATS without a reset), as it
 * does from the vhost core's.
 *
 * With a backend attached, VHOST_SET_MEM_TABLE first answers every
 * request in flight (their buffers were translated through the old
 * table), then installs the new table and restarts the queues.  Only a
 * fatal signal ends that wait: the old table then stays.
 *
 * The ioctls below take VHOST_VIRTIO numbers 0x50 to 0x5f, a block that
 * no other vhost device uses (vhost-net has 0x30, vhost-scsi 0x40,
 * vhost-vsock 0x60, vhost-vdpa 0x70 on).  Earlier out-of-tree vhost-blk
 * postings used 0xFF and 0xFE, counting down from the top: a VMM written
 * to them needs the new numbers, as the ABI was never merged.
 */
#ifndef _UAPI_LINUX_VHOST_BLK_H
#define _UAPI_LINUX_VHOST_BLK_H

#include <linux/types.h>
#include <linux/vhost.h>
#include <linux/virtio_blk.h>

/* Length of the GET_ID string (VIRTIO_BLK_ID_BYTES in virtio_blk.h). */
#define VHOST_BLK_SERIAL_LEN	20

/*
 * Limits of the device, for the VMM's virtio_blk_config (VHOST_BLK_GET_CONFIG
 * fills them in).  A chain holds at most 1024 descriptors (UIO_MAXIOV), two
 * of them the header and the status.
 */
#define VHOST_BLK_SEG_MAX			1022
/*
 * Bytes in one data buffer (size_max).  A read or write with a longer one
 * is answered VIRTIO_BLK_S_IOERR.
 */
#define VHOST_BLK_SIZE_MAX			(1U << 20)
/* DISCARD, WRITE_ZEROES and SECURE_ERASE: ranges per request... */
#define VHOST_BLK_MAX_DISCARD_SEG		32
/* ... and 512-byte sectors per range (2 GiB - 512). */
#define VHOST_BLK_MAX_DISCARD_SECTORS		0x3fffff

/*
 * VHOST_BLK_SET_BACKEND - attach or detach the disk behind every virtqueue.
 *
 * @fd is an open block device or regular file, and binds the device as it
 * binds read(2) and write(2): it must be open for reading; an fd open
 * read-only makes the device read-only (VIRTIO_BLK_F_RO is offered), and
 * so does, for as long as it lasts, a block device made read-only
 * (BLKROSET) or a file made append-only or immutable after the attach:
 * writes then get VIRTIO_BLK_S_IOERR.  A regular file must support
 * O_DIRECT.  @fd == -1 detaches the backend after every request already
 * taken from the rings has completed and its status has been written.
 * @index must be 0: one backend serves all queues.
 *
 * Errors: EBADF for a bad fd or one not open for reading, EINVAL for an
 * O_APPEND fd or @index not 0, EPERM for a writable fd on an append-only
 * or immutable file, ENOTBLK for neither a block device nor a regular
 * file, EOPNOTSUPP for a file without direct I/O, EFAULT.
 */
#define VHOST_BLK_SET_BACKEND	_IOW(VHOST_VIRTIO, 0x50, struct vhost_vring_file)

/*
 * VHOST_BLK_SET_SERIAL - set the string a VIRTIO_BLK_T_GET_ID request
 * returns.  Exactly VHOST_BLK_SERIAL_LEN bytes are read; a string shorter
 * than that is NUL-padded by the caller.  The default is all zeroes.
 */
#define VHOST_BLK_SET_SERIAL	_IOW(VHOST_VIRTIO, 0x51, char[VHOST_BLK_SERIAL_LEN])

/*
 * VHOST_BLK_GET_CONFIG - read @len bytes of the virtio-blk config space
 * (struct virtio_blk_config) of the attached backend, from byte @offset
 * on, into @buf: little-endian as a VIRTIO 1.x device presents it:
 * capacity, blk_size, topology, seg_max, num_queues (the device's
 * maximum) and the discard / write-zeroes / secure-erase limits above
 * (those of write zeroes and secure erase 0 where the backend has not got
 * them).  A VMM may copy it to its guest as is, or lower num_queues.
 * Returns the number of bytes filled in: fewer than @len where the config
 * space this kernel knows ends sooner (the struct grows with the spec;
 * the ioctl number does not).  EINVAL for @len 0 or @offset at or past
 * the end, ENXIO without a backend.  The backend-dependent features
 * (VIRTIO_BLK_F_RO; VIRTIO_BLK_F_DISCARD: a file, or a block device with
 * discard; VIRTIO_BLK_F_WRITE_ZEROES: a file, or a block device with
 * REQ_OP_WRITE_ZEROES; VIRTIO_BLK_F_SECURE_ERASE) are offered by
 * VHOST_GET_FEATURES only while a backend that has them is attached: a
 * VMM reads the features after VHOST_BLK_SET_BACKEND.  A DISCARD,
 * WRITE_ZEROES or SECURE_ERASE request whose feature was not set with
 * VHOST_SET_FEATURES is answered VIRTIO_BLK_S_UNSUPP, whatever the
 * backend could do.
 */
struct vhost_blk_config {
	__u32 offset;
	__u32 len;
	__u8 buf[];
};

#define VHOST_BLK_GET_CONFIG	_IOWR(VHOST_VIRTIO, 0x54, struct vhost_blk_config)

/*
 * VHOST_BLK_SET_CONFIG - write @len bytes of @buf at @offset of the
 * virtio-blk config space, as the guest's driver wrote them (vhost-user's
 * SET_CONFIG).  Only the writeback byte (struct virtio_blk_config's wce,
 * VIRTIO_BLK_F_CONFIG_WCE) is writable: 1 for a writeback cache, 0 for
 * writethrough, in which every write is durable when it is answered
 * (REQ_FUA on a block device, IOCB_DSYNC on a file).  EINVAL for any
 * other byte or value.  The mode holds for the life of the fd, across
 * backends, and VHOST_BLK_GET_CONFIG reads it back; it applies while
 * VIRTIO_BLK_F_CONFIG_WCE is negotiated.  A driver that did not negotiate
 * VIRTIO_BLK_F_FLUSH always gets writethrough (it can never flush), and
 * reads 0 there.  Needs no backend; owner only.
 */
#define VHOST_BLK_SET_CONFIG	_IOW(VHOST_VIRTIO, 0x56, struct vhost_blk_config)

/*
 * VHOST_BLK_SET_NUM_QUEUES - how many virtqueues this device has, from 1 to
 * the module's max_queues.  Optional; if used, it must be the first ioctl
 * on the file (EBUSY afterwards), because the vhost core allocates the
 * state of every queue at VHOST_SET_OWNER.  Without it the device has
 * max_queues queues.  EINVAL for 0 or more than max_queues.
 */
#define VHOST_BLK_SET_NUM_QUEUES	_IOW(VHOST_VIRTIO, 0x55, __u32)

/*
 * VHOST_BLK_CHARGE_PEER - charge the guest's work to the cgroups of
 * another process: the one at the other end of @fd, a connected AF_UNIX
 * socket (the process whose credentials SO_PEERCRED reports, as of its
 * connect()).  A vhost-user bridge passes the socket of the frontend it
 * serves, so that the frontend's cgroup (the VM's) pays for the CPU time,
 * I/O (io.max) and memory of its guest's requests, as it would were the
 * frontend the owner.  The vhost workers and the sync task are moved into
 * every cgroup of that process, and what they allocate for the guest is
 * charged to its memory cgroup.  That needs kthread workers, chosen with
 * VHOST_SET_FORK_FROM_OWNER before VHOST_SET_OWNER: a vhost_task worker
 * is a thread of the owner and cannot leave its cgroup (EINVAL).
 * Once per owner, before the first VHOST_BLK_SET_BACKEND (EBUSY
 * otherwise); VHOST_RESET_OWNER ends it.  A listening socket or a
 * socketpair names the process that made it.  ENOTSOCK if @fd is not a
 * socket, ENOTCONN if it is not AF_UNIX or has no peer, ESRCH if the
 * peer has exited.  Owner only.
 */
#define VHOST_BLK_CHARGE_PEER	_IOW(VHOST_VIRTIO, 0x57, __s32)

/*
 * VHOST_BLK_SET_MEM_PINNED - with 1, pin the owner's memory once per
 * memory table, as io_uring pins registered buffers, rather than once per
 * request: every VHOST_SET_MEM_TABLE from then on pins the pages of its
 * regions (FOLL_LONGTERM, writable) before the table takes over, and
 * unpins those of the table it replaces; a region the two tables share
 * (the same user addresses) keeps its pages and is not charged twice.
 * Reads and writes on a block device backend are then built on those
 * pages, with no page pinned or unpinned for them; a request whose
 * buffers are not all in the table (or a file backend) pins its pages
 * itself, as without this.  With 0, unpin now; the next table is not
 * pinned.  The choice holds for the life of the fd; VHOST_RESET_OWNER
 * and the release unpin.
 *
 * The pages are charged to the owner's RLIMIT_MEMLOCK (its mm's
 * locked_vm) unless it has CAP_IPC_LOCK, and the page arrays to its
 * memory cgroup.  A table that cannot be pinned leaves the old one in
 * force and fails VHOST_SET_MEM_TABLE: ENOMEM past RLIMIT_MEMLOCK,
 * EFAULT for a region not mapped writable, and what pin_user_pages()
 * refuses (FOLL_LONGTERM takes anonymous, shmem and hugetlbfs memory,
 * not a file mapping that needs writeback).  The pages are those mapped
 * when the table was pinned, and a region sent again at the same
 * addresses keeps them: a VMM that maps other memory at a region's
 * address, or discards guest memory (a balloon, virtio-mem), must not
 * use this, or must re-pin with 0, 1 and VHOST_SET_MEM_TABLE, as VFIO's
 * users must.  EINVAL for a value other than 0 or 1.  Owner only.
 */
#define VHOST_BLK_SET_MEM_PINNED	_IOW(VHOST_VIRTIO, 0x58, __u32)

/*
 * Per-queue counters.  Each counts since the device was opened (or since
 * the last read with VHOST_BLK_STATS_RESET).  The struct grows at its end
 * as counters are added, without a new ioctl number: @argsz says how
 * much of it the caller has and, on return, how much the kernel filled,
 * as VFIO's argsz does.
 */
struct vhost_blk_vring_stats {
	__u32 argsz;			/* in: sizeof; out: bytes filled in */
	__u32 index;			/* in: the queue */
	__u32 flags;			/* in: VHOST_BLK_STATS_* */
	__u32 reserved;			/* in: 0 */
	__u64 reqs_in;			/* requests by type, as answered */
	__u64 reqs_out;
	__u64 reqs_flush;
	__u64 reqs_get_id;
	__u64 reqs_discard;
	__u64 reqs_write_zeroes;
	__u64 reqs_secure_erase;
	__u64 reqs_unsupp;		/* answered VIRTIO_BLK_S_UNSUPP */
	__u64 reqs_ioerr;		/* answered VIRTIO_BLK_S_IOERR */
	__u64 bytes_read;		/* data read into the guest */
	__u64 bytes_written;		/* data written from the guest */
	__u64 kicks;			/* worker runs woken by the guest's kick */
	__u64 notifies;			/* call eventfd signalled */
	/* used-ring updates the guest asked not to hear about */
	__u64 notifies_suppressed;
	__u64 used_batches;		/* used-ring updates by the worker */
	__u64 polls;			/* busy polls of an empty ring */
	__u64 poll_hits;		/* ... that found a request */
	__u64 poll_ns;			/* time spent busy polling */
	__u64 inflight;			/* requests in flight now */
	__u64 inflight_max;		/* high-water mark of inflight */
	__u64 poll_window_ns;		/* current busy-poll window */
	/* requests whose buffers went through bounce pages */
	__u64 reqs_bounced;
	/* times the ring waited for bounce pages to be freed */
	__u64 bounce_waits;
	__u64 bounce_bytes_max;		/* high-water mark of bounce pages */
	/*
	 * Requests whose answer could not be put in the used ring (the
	 * guest's used ring is not writable): never returned to the guest.
	 */
	__u64 used_errors;
	/*
	 * Completion polling (VHOST_BLK_POLL_COMPLETIONS): bios submitted
	 * with REQ_POLLED; bio_poll() calls that found at least one
	 * completion; and reads and writes of a queue with the flag whose
	 * bios went without REQ_POLLED, to complete by interrupt (see
	 * VHOST_BLK_SET_VRING_POLL for when).
	 */
	__u64 polled_bios;
	__u64 poll_reaped;
	__u64 poll_fallbacks;
	/*
	 * Reads and writes on a block device built on the pinned memory
	 * table (VHOST_BLK_SET_MEM_PINNED), with no page pinned for them
	 * (one sent again unpolled counts again).
	 */
	__u64 reqs_pinned;
};

/* The header: argsz, index, flags, reserved. */
#define VHOST_BLK_VRING_STATS_MIN_SZ	16

#define VHOST_BLK_STATS_RESET	(1U << 0)

/*
 * VHOST_BLK_GET_VRING_STATS - read the counters of queue @index: as many
 * as fit in @argsz bytes (at least the 16 of the header), with @argsz
 * set to the bytes filled in.  With VHOST_BLK_STATS_RESET in @flags they
 * are zeroed after the read (inflight stays).  EINVAL for a queue out of
 * range, an unknown flag, @reserved not 0 or @argsz under 16.  The
 * argument's size is not in the number: it grows.
 */
#define VHOST_BLK_GET_VRING_STATS	_IO(VHOST_VIRTIO, 0x52)

/*
 * Busy polling.  VHOST_SET_VRING_BUSYLOOP_TIMEOUT (vhost core, in
 * microseconds, per queue, 0 = off) sets how long a worker keeps polling an
 * empty ring, with guest kicks still disabled, before it sleeps.  With
 * VHOST_BLK_POLL_ADAPTIVE that timeout is the ceiling of a window that
 * grows by @grow when a longer poll would have caught the next request and
 * shrinks by @shrink (0: back to nothing) when the ring stays idle past the
 * ceiling, as QEMU's poll-max-ns / poll-grow / poll-shrink do.
 *
 * With VHOST_BLK_POLL_COMPLETIONS the worker also polls for the
 * completions of the queue's reads and writes instead of waiting for the
 * device's interrupt, as io_uring's IOPOLL does: while the ring is being
 * busy-polled (its window, fixed or adaptive, is not 0) and the backend
 * is a blk-mq block device with poll queues, a read or write that fits in
 * one bio is submitted with REQ_POLLED and reaped with bio_poll() by the
 * worker, in its busy-poll loop and, past the window, until it completes.
 * Every other read or write of the queue completes by interrupt, and is
 * counted in poll_fallbacks: a file backend, a device without poll
 * queues, a window of 0 (polling off), a request that needs more than one
 * bio.  The results are the same either way.
 */
struct vhost_blk_vring_poll {
	__u32 index;			/* the queue */
	__u32 flags;			/* VHOST_BLK_POLL_* */
	__u32 grow;			/* 0: default 2 */
	__u32 shrink;			/* 0: reset the window to 0 */
	__u32 reserved[2];		/* 0 */
};

#define VHOST_BLK_POLL_ADAPTIVE		(1U << 0)
#define VHOST_BLK_POLL_COMPLETIONS	(1U << 1)

/*
 * VHOST_BLK_SET_VRING_POLL - set the polling mode of queue @index.  EINVAL
 * for a queue out of range, an unknown flag or @reserved not 0.
 */
#define VHOST_BLK_SET_VRING_POLL \
	_IOW(VHOST_VIRTIO, 0x53, struct vhost_blk_vring_poll)

#endif /* _UAPI_LINUX_VHOST_BLK_H */
