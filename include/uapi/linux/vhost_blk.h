/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * vhost-blk: in-kernel virtio-blk device backend.
 *
 * A VMM opens /dev/vhost-blk and drives it with the generic vhost ioctls of
 * <linux/vhost.h> (VHOST_SET_OWNER, VHOST_SET_MEM_TABLE, VHOST_SET_VRING_*,
 * VHOST_GET/SET_FEATURES, the worker ioctls), plus the two below.
 *
 * The ioctl numbers 0xFF and 0xFE on VHOST_VIRTIO are the ones used by the
 * earlier out-of-tree vhost-blk implementation and by the QEMU device posted
 * with it, so a VMM written against that ABI works unchanged.
 */
#ifndef _UAPI_LINUX_VHOST_BLK_H
#define _UAPI_LINUX_VHOST_BLK_H

#include <linux/types.h>
#include <linux/vhost.h>

/* Length of the GET_ID string (VIRTIO_BLK_ID_BYTES in virtio_blk.h). */
#define VHOST_BLK_SERIAL_LEN	20

/*
 * VHOST_BLK_SET_BACKEND - attach or detach the disk behind every virtqueue.
 *
 * @fd is an open block device or regular file; its open mode decides
 * whether the disk is writable (a read-only fd, or a read-only block
 * device, makes the device read-only and VIRTIO_BLK_F_RO is offered).  A
 * regular file must support O_DIRECT.  @fd == -1 detaches the backend after
 * every request already taken from the rings has completed and its status
 * has been written.  @index is ignored: one backend serves all queues.
 *
 * Errors: EBADF for a bad fd, ENOTBLK for neither a block device nor a
 * regular file, EOPNOTSUPP for a file without direct I/O, EFAULT.
 */
#define VHOST_BLK_SET_BACKEND	_IOW(VHOST_VIRTIO, 0xFF, struct vhost_vring_file)

/*
 * VHOST_BLK_SET_SERIAL - set the string a VIRTIO_BLK_T_GET_ID request
 * returns.  Exactly VHOST_BLK_SERIAL_LEN bytes are read; a string shorter
 * than that is NUL-padded by the caller.  The default is all zeroes.
 */
#define VHOST_BLK_SET_SERIAL	_IOW(VHOST_VIRTIO, 0xFE, char[VHOST_BLK_SERIAL_LEN])

#endif /* _UAPI_LINUX_VHOST_BLK_H */
