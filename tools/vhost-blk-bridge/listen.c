// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: the listening socket, its access control and systemd
 * readiness.  See listen.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "listen.h"
#include "log.h"

/* A listening SOCK_STREAM unix socket, close-on-exec from here on. */
static int check_listening(int fd, const char *what)
{
	int ret = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);

	if (ret < 0) {
		vbb_err("%s: fd %d: %s", what, fd, strerror(-ret));
		return -1;
	}
	if (!ret) {
		vbb_err("%s: fd %d is not a listening unix stream socket",
			what, fd);
		return -1;
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		vbb_err("%s: fcntl(F_SETFD) on fd %d: %s", what, fd,
			strerror(errno));
		return -1;
	}
	return fd;
}

/*
 * Bind and listen on @o->path, refusing to steal a socket someone still
 * serves.  It is created 0600 and only then given --socket-mode and
 * --socket-group, so that nobody else can connect in between.
 */
static int listen_path(const struct vbb_listen_opts *o)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = o->path;
	struct stat st;
	mode_t old_mask;
	int fd, probe, ret;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		vbb_err("socket path %s is longer than %zu bytes", path,
			sizeof(sun.sun_path) - 1);
		return -1;
	}
	strcpy(sun.sun_path, path);

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			vbb_err("%s exists and is not a socket", path);
			return -1;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 &&
		    connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
			close(probe);
			vbb_err("%s is in use by another process", path);
			return -1;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		vbb_err("socket(AF_UNIX): %s", strerror(errno));
		return -1;
	}
	old_mask = umask(0177);
	ret = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old_mask);
	if (ret < 0) {
		vbb_err("bind %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (o->has_gid && chown(path, (uid_t)-1, o->gid) < 0) {
		vbb_err("chown %s to group %u: %s", path, (unsigned int)o->gid,
			strerror(errno));
		goto fail;
	}
	if (chmod(path, o->has_mode ? o->mode : 0600) < 0) {
		vbb_err("chmod %s: %s", path, strerror(errno));
		goto fail;
	}
	if (listen(fd, 1) < 0) {
		vbb_err("listen %s: %s", path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	unlink(path);
	return -1;
}

int vbb_listen(const struct vbb_listen_opts *o, enum vbb_listen_source *src)
{
	int n = sd_listen_fds(1);

	if (n < 0) {
		vbb_err("LISTEN_FDS: %s", strerror(-n));
		return -1;
	}
	if (n > 0) {
		if (n != 1) {
			vbb_err("socket activation passed %d sockets, not one",
				n);
			return -1;
		}
		if (o->path || o->fd >= 0 || o->has_mode || o->has_gid) {
			vbb_err("socket-activated: --socket, --socket-fd, --socket-mode and --socket-group are the .socket unit's");
			return -1;
		}
		*src = VBB_LISTEN_SYSTEMD;
		return check_listening(SD_LISTEN_FDS_START, "LISTEN_FDS");
	}
	if (o->fd >= 0) {
		if (o->path || o->has_mode || o->has_gid) {
			vbb_err("--socket-fd: the socket is the caller's; --socket, --socket-mode and --socket-group do not apply");
			return -1;
		}
		*src = VBB_LISTEN_FD;
		return check_listening(o->fd, "--socket-fd");
	}
	if (!o->path) {
		vbb_err("no socket: --socket, --socket-fd or socket activation");
		return -1;
	}
	*src = VBB_LISTEN_PATH;
	return listen_path(o);
}

int vbb_parse_mode(const char *opt, const char *s, mode_t *mode)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 8);
	if (errno || end == s || *end || s[0] == '-' || v > 0777) {
		vbb_err("%s: '%s' is not an octal mode from 0 to 0777", opt, s);
		return -1;
	}
	*mode = v;
	return 0;
}

/* A decimal id without sign or junk.  0 or -1. */
static int parse_id(const char *s, unsigned int *id)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v >= (unsigned int)-1)
		return -1;
	*id = v;
	return 0;
}

int vbb_parse_group(const char *opt, const char *s, gid_t *gid)
{
	struct group *gr;
	unsigned int id;

	if (!parse_id(s, &id)) {
		*gid = id;
		return 0;
	}
	errno = 0;
	gr = getgrnam(s);
	if (!gr) {
		vbb_err("%s: no group '%s'%s%s", opt, s, errno ? ": " : "",
			errno ? strerror(errno) : "");
		return -1;
	}
	*gid = gr->gr_gid;
	return 0;
}

int vbb_parse_uid(const char *opt, const char *s, uid_t *allow, size_t *n)
{
	struct passwd *pw;
	unsigned int id;

	if (*n >= VBB_MAX_ALLOW_UIDS) {
		vbb_err("%s: at most %d users", opt, VBB_MAX_ALLOW_UIDS);
		return -1;
	}
	if (!parse_id(s, &id)) {
		allow[(*n)++] = id;
		return 0;
	}
	errno = 0;
	pw = getpwnam(s);
	if (!pw) {
		vbb_err("%s: no user '%s'%s%s", opt, s, errno ? ": " : "",
			errno ? strerror(errno) : "");
		return -1;
	}
	allow[(*n)++] = pw->pw_uid;
	return 0;
}

bool vbb_peer_allowed(int fd, const uid_t *allow, size_t n)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	size_t i;

	if (!n)
		return true;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		vbb_warn("refusing a frontend: SO_PEERCRED: %s",
			 strerror(errno));
		return false;
	}
	for (i = 0; i < n; i++)
		if (cred.uid == allow[i])
			return true;
	vbb_warn("refusing a frontend: uid %u (pid %d) is not in --allow-uid",
		 (unsigned int)cred.uid, (int)cred.pid);
	return false;
}

void vbb_notify_ready(const char *what)
{
	int ret = sd_notifyf(0, "READY=1\nSTATUS=%s", what);

	if (ret < 0)
		vbb_warn("sd_notify READY=1: %s", strerror(-ret));
}
