/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vhost-blk-bridge: where the vhost-user socket comes from (systemd socket
 * activation, an inherited fd, or a path of our own with its mode and
 * group), who may connect (SO_PEERCRED against an allow-list), and
 * readiness for systemd.
 */
#ifndef VBB_LISTEN_H
#define VBB_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define VBB_MAX_ALLOW_UIDS	32

struct vbb_listen_opts {
	const char *path;		/* --socket: created by us, or NULL */
	int fd;				/* --socket-fd, or -1 */
	bool has_mode;			/* --socket-mode given */
	mode_t mode;
	bool has_gid;			/* --socket-group given */
	gid_t gid;
};

/* Where the listening socket came from. */
enum vbb_listen_source {
	VBB_LISTEN_SYSTEMD,		/* LISTEN_FDS: systemd's .socket unit */
	VBB_LISTEN_FD,			/* --socket-fd */
	VBB_LISTEN_PATH,		/* --socket: bound here, ours to unlink */
};

/*
 * The listening socket: systemd's when the process was socket-activated
 * (exactly one stream unix socket, LISTEN_FDS unset afterwards), else the
 * --socket-fd descriptor (checked to be a listening stream unix socket),
 * else one bound at --socket with --socket-mode and --socket-group.
 * Returns the fd, or -1 with the reason logged.
 */
int vbb_listen(const struct vbb_listen_opts *o, enum vbb_listen_source *src);

/* "0660" style: octal, at most 0777.  0 or -1 (logged). */
int vbb_parse_mode(const char *opt, const char *s, mode_t *mode);
/* A group name or number.  0 or -1 (logged). */
int vbb_parse_group(const char *opt, const char *s, gid_t *gid);
/* A user name or number, appended to allow[*n].  0 or -1 (logged). */
int vbb_parse_uid(const char *opt, const char *s, uid_t *allow, size_t *n);

/*
 * Whether the peer of the connected socket @fd may be served: any peer
 * when @n is 0, else only one whose uid (SO_PEERCRED) is in @allow.  A
 * refusal is logged with the peer's uid and pid.  Returns true to serve.
 */
bool vbb_peer_allowed(int fd, const uid_t *allow, size_t n);

/* Tell systemd (NOTIFY_SOCKET, if any) that the socket is ready. */
void vbb_notify_ready(const char *what);

#endif
