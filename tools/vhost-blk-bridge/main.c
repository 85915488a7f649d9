// SPDX-License-Identifier: GPL-2.0
/*
 * vhost-blk-bridge: serve QEMU's vhost-user-blk device from the kernel's
 * vhost-blk.  The control plane (a vhost-user unix socket) is here; the
 * data plane is handed to /dev/vhost-blk.  See vhost-blk-bridge.8.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "kdev.h"
#include "listen.h"
#include "log.h"
#include "vhost_user.h"

#define DEFAULT_DEVICE		"/dev/vhost-blk"
#define DEFAULT_MSG_TIMEOUT_MS	5000

static void usage(FILE *f)
{
	fprintf(f,
"Usage: vhost-blk-bridge --socket PATH|--socket-fd N --backend FILE|BLOCKDEV\n"
"                        [OPTIONS]\n"
"\n"
"A vhost-user-blk back-end whose data plane is the kernel's vhost-blk:\n"
"QEMU's -device vhost-user-blk-pci connects to PATH; guest requests go\n"
"from the kick eventfd to /dev/vhost-blk's worker, to the disk, and back\n"
"through the call eventfd without passing through this process.\n"
"\n"
"Options:\n"
"  -s, --socket PATH        vhost-user socket to listen on (created, mode\n"
"                           0600 unless --socket-mode)\n"
"      --socket-fd N        listen on the inherited socket N instead\n"
"      --socket-mode MODE   octal mode of the --socket PATH (e.g. 0660)\n"
"      --socket-group G     group of the --socket PATH (name or number)\n"
"      --allow-uid U        serve only frontends of user U (name or\n"
"                           number, SO_PEERCRED); repeat for more users\n"
"  -b, --backend PATH       raw image file or block device\n"
"  -r, --read-only          open the backend read-only; the guest sees a\n"
"                           read-only disk (VIRTIO_BLK_F_RO)\n"
"      --shared             do not lock the backend (by default an OFD lock\n"
"                           keeps a second bridge or a QEMU off it); for\n"
"                           the two bridges of a live migration\n"
"      --charge WHO         whose cgroups pay for the guest's I/O, memory\n"
"                           and CPU time: frontend (the connected process,\n"
"                           SO_PEERCRED; refuse it if the kernel cannot),\n"
"                           bridge (this process), or auto (the default:\n"
"                           frontend where the kernel can, with a warning\n"
"                           otherwise)\n"
"      --serial S           GET_ID string (at most %d bytes)\n"
"  -q, --num-queues N       virtqueues (default 1)\n"
"      --queue-size N       the frontend's ring size, QEMU's queue-size\n"
"                           (default %d): seg_max is N - 2\n"
"      --poll-us N          busy-poll each ring for N us before sleeping\n"
"                           (VHOST_SET_VRING_BUSYLOOP_TIMEOUT, default 0)\n"
"      --poll-adaptive      adapt the poll window, --poll-us the ceiling\n"
"      --poll-completions   poll for the disk's completions while polling\n"
"                           the ring (VHOST_BLK_POLL_COMPLETIONS; needs\n"
"                           --poll-us and a disk with poll queues)\n"
"      --worker-per-queue   a vhost worker for each queue (VHOST_NEW_WORKER),\n"
"                           not one for all; its workers are threads of\n"
"                           the bridge, so the guest is charged to the\n"
"                           bridge (not with --charge frontend)\n"
"      --pin-memory         pin the guest's memory once per memory table\n"
"                           rather than per request (VHOST_BLK_SET_MEM_PINNED):\n"
"                           needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK as large\n"
"                           as the guest's memory\n"
"      --device PATH        vhost-blk device (default " DEFAULT_DEVICE ")\n"
"      --once               exit when the first frontend disconnects\n"
"      --stats-interval S   print the queue counters every S seconds\n"
"      --msg-timeout MS     a message must be whole within MS of its\n"
"                           first byte, and a reply or back-end message\n"
"                           must go out within MS (default %d)\n"
"  -v, --verbose            log every vhost-user message\n"
"  -h, --help               this text\n"
"\n"
"The per-queue counters of the module (VHOST_BLK_GET_VRING_STATS) are\n"
"printed on stdout on SIGUSR1, when a frontend disconnects and at exit.\n"
"SIGHUP: the disk's size is read again and the frontend told (online\n"
"resize).  SIGTERM and SIGINT end the program.\n"
"\n"
"Started by a systemd .socket unit (LISTEN_FDS), it serves that socket and\n"
"takes no --socket option; it tells systemd when it is ready (sd_notify).\n",
		VHOST_BLK_SERIAL_LEN, KDEV_DEFAULT_QUEUE_SIZE,
		DEFAULT_MSG_TIMEOUT_MS);
}

static int parse_charge(const char *s, enum kdev_charge *out)
{
	static const char *const names[] = {
		[KDEV_CHARGE_AUTO] = "auto",
		[KDEV_CHARGE_FRONTEND] = "frontend",
		[KDEV_CHARGE_BRIDGE] = "bridge",
	};
	unsigned int i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*out = i;
			return 0;
		}
	}
	vbb_err("--charge: '%s' is not auto, frontend or bridge", s);
	return -1;
}

static int parse_uint(const char *opt, const char *s, unsigned long min,
		      unsigned long max, unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
		vbb_err("%s: '%s' is not a number from %lu to %lu", opt, s,
			min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* The vhost module's max_mem_regions, or 0 if it cannot be read. */
static unsigned int vhost_max_mem_regions(void)
{
	FILE *f = fopen("/sys/module/vhost/parameters/max_mem_regions", "r");
	unsigned int n = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%u", &n) != 1)
		n = 0;
	fclose(f);
	return n;
}

static void print_stats(struct vu_session *s, bool active, const char *why)
{
	if (!active) {
		if (!strcmp(why, "signal"))
			vbb_info("stats: no frontend connected");
		return;
	}
	if (kdev_print_stats(&s->kdev, stdout, why))
		vbb_warn("cannot read the queue counters");
}

/* The guest's write cache switch, for its frontend's next connection. */
static struct vu_kept kept = { .wce = -1 };

int main(int argc, char **argv)
{
	enum {
		OPT_SERIAL = 256, OPT_POLL_US, OPT_POLL_ADAPTIVE, OPT_DEVICE,
		OPT_POLL_COMPLETIONS, OPT_WORKER_PER_QUEUE, OPT_PIN_MEMORY,
		OPT_ONCE, OPT_STATS_INTERVAL, OPT_MSG_TIMEOUT, OPT_SOCKET_FD,
		OPT_SOCKET_MODE, OPT_SOCKET_GROUP, OPT_ALLOW_UID, OPT_SHARED,
		OPT_CHARGE,
		OPT_QUEUE_SIZE,
	};
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-fd", required_argument, NULL, OPT_SOCKET_FD },
		{ "socket-mode", required_argument, NULL, OPT_SOCKET_MODE },
		{ "socket-group", required_argument, NULL, OPT_SOCKET_GROUP },
		{ "allow-uid", required_argument, NULL, OPT_ALLOW_UID },
		{ "backend", required_argument, NULL, 'b' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "shared", no_argument, NULL, OPT_SHARED },
		{ "charge", required_argument, NULL, OPT_CHARGE },
		{ "serial", required_argument, NULL, OPT_SERIAL },
		{ "num-queues", required_argument, NULL, 'q' },
		{ "queue-size", required_argument, NULL, OPT_QUEUE_SIZE },
		{ "poll-us", required_argument, NULL, OPT_POLL_US },
		{ "poll-adaptive", no_argument, NULL, OPT_POLL_ADAPTIVE },
		{ "poll-completions", no_argument, NULL, OPT_POLL_COMPLETIONS },
		{ "worker-per-queue", no_argument, NULL, OPT_WORKER_PER_QUEUE },
		{ "pin-memory", no_argument, NULL, OPT_PIN_MEMORY },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "stats-interval", required_argument, NULL, OPT_STATS_INTERVAL },
		{ "msg-timeout", required_argument, NULL, OPT_MSG_TIMEOUT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct vbb_listen_opts lo = { .fd = -1 };
	enum vbb_listen_source src;
	uid_t allow[VBB_MAX_ALLOW_UIDS];
	size_t nallow = 0;
	unsigned int sock_fd;
	const char *backend = NULL, *where;
	unsigned int stats_interval = 0, timeout_ms = DEFAULT_MSG_TIMEOUT_MS;
	bool read_only = false, once = false, active = false, stop = false;
	bool shared = false;
	struct vu_params params = {
		.kdev = {
			.path = DEFAULT_DEVICE,
			.ops = &kdev_sys_ops,
			.num_queues = 1,
		},
	};
	struct vu_session session;
	struct disk disk;
	struct kdev probe;
	int lfd, sfd, cfd = -1, opt, status = 0;
	sigset_t sigs;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "s:b:rq:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			lo.path = optarg;
			break;
		case OPT_SOCKET_FD:
			if (parse_uint("--socket-fd", optarg, 0, INT_MAX,
				       &sock_fd))
				return 2;
			lo.fd = sock_fd;
			break;
		case OPT_SOCKET_MODE:
			if (vbb_parse_mode("--socket-mode", optarg, &lo.mode))
				return 2;
			lo.has_mode = true;
			break;
		case OPT_SOCKET_GROUP:
			if (vbb_parse_group("--socket-group", optarg, &lo.gid))
				return 2;
			lo.has_gid = true;
			break;
		case OPT_ALLOW_UID:
			if (vbb_parse_uid("--allow-uid", optarg, allow, &nallow))
				return 2;
			break;
		case 'b':
			backend = optarg;
			break;
		case 'r':
			read_only = true;
			break;
		case OPT_SHARED:
			shared = true;
			break;
		case OPT_CHARGE:
			if (parse_charge(optarg, &params.kdev.charge))
				return 2;
			break;
		case OPT_SERIAL:
			if (strlen(optarg) > VHOST_BLK_SERIAL_LEN) {
				vbb_err("--serial: '%s' is longer than %d bytes",
					optarg, VHOST_BLK_SERIAL_LEN);
				return 2;
			}
			params.kdev.serial = optarg;
			break;
		case 'q':
			if (parse_uint("--num-queues", optarg, 1,
				       KDEV_MAX_QUEUES, &params.kdev.num_queues))
				return 2;
			break;
		case OPT_QUEUE_SIZE:
			if (parse_uint("--queue-size", optarg, 4, 32768,
				       &params.kdev.queue_size))
				return 2;
			break;
		case OPT_POLL_US:
			if (parse_uint("--poll-us", optarg, 0, UINT_MAX,
				       &params.kdev.poll_us))
				return 2;
			break;
		case OPT_POLL_ADAPTIVE:
			params.kdev.poll_adaptive = true;
			break;
		case OPT_POLL_COMPLETIONS:
			params.kdev.poll_completions = true;
			break;
		case OPT_WORKER_PER_QUEUE:
			params.kdev.worker_per_queue = true;
			break;
		case OPT_PIN_MEMORY:
			params.kdev.pin_memory = true;
			break;
		case OPT_DEVICE:
			params.kdev.path = optarg;
			break;
		case OPT_ONCE:
			once = true;
			break;
		case OPT_STATS_INTERVAL:
			if (parse_uint("--stats-interval", optarg, 1, 86400,
				       &stats_interval))
				return 2;
			break;
		case OPT_MSG_TIMEOUT:
			if (parse_uint("--msg-timeout", optarg, 1, 3600000,
				       &timeout_ms))
				return 2;
			break;
		case 'v':
			vbb_verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		vbb_err("unexpected argument '%s' (see --help)", argv[optind]);
		return 2;
	}
	if (!backend) {
		vbb_err("--backend is required (see --help)");
		return 2;
	}
	if (params.kdev.poll_adaptive && !params.kdev.poll_us) {
		vbb_err("--poll-adaptive needs --poll-us (the window's ceiling)");
		return 2;
	}
	if (params.kdev.poll_completions && !params.kdev.poll_us) {
		vbb_err("--poll-completions needs --poll-us (completions are polled while the ring is)");
		return 2;
	}
	/*
	 * The vhost core gives an owner with kthread workers one worker
	 * (VHOST_NEW_WORKER is EFAULT), and only kthreads can be charged to
	 * the frontend.
	 */
	if (params.kdev.worker_per_queue) {
		if (params.kdev.charge == KDEV_CHARGE_FRONTEND) {
			vbb_err("--worker-per-queue and --charge frontend: a worker per queue is a thread of the bridge, and only kthread workers (one per device) can be charged to the frontend");
			return 2;
		}
		if (params.kdev.charge == KDEV_CHARGE_AUTO)
			vbb_warn("--worker-per-queue: the workers are threads of the bridge, so the guest's I/O, memory and CPU time are charged to the bridge's cgroups");
		params.kdev.charge = KDEV_CHARGE_BRIDGE;
	}
	params.msg_timeout_ms = timeout_ms;
	params.max_mem_slots = vhost_max_mem_regions();
	params.kept = &kept;

	if (disk_open(&disk, backend, read_only, shared))
		return 1;
	params.kdev.disk = &disk;

	/* Fail now, not when QEMU connects, if the module cannot serve. */
	if (kdev_open(&probe, &params.kdev, -1)) {
		disk_close(&disk);
		return 1;
	}
	kdev_close(&probe);

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0) {
		vbb_err("signalfd: %s", strerror(errno));
		disk_close(&disk);
		return 1;
	}

	lfd = vbb_listen(&lo, &src);
	if (lfd < 0) {
		close(sfd);
		disk_close(&disk);
		return 1;
	}
	where = src == VBB_LISTEN_SYSTEMD ? "the socket systemd passed" :
		src == VBB_LISTEN_FD ? "the --socket-fd socket" : lo.path;
	vbb_info("serving %s%s on %s through %s, %u queue%s",
		 backend, read_only ? " (read-only)" : "", where,
		 params.kdev.path, params.kdev.num_queues,
		 params.kdev.num_queues == 1 ? "" : "s");
	vbb_notify_ready(backend);

	while (!stop) {
		struct pollfd pfd[3] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = lfd, .events = POLLIN },
			{ .fd = cfd, .events = POLLIN },
		};
		int n = poll(pfd, cfd >= 0 ? 3 : 2,
			     stats_interval ? (int)stats_interval * 1000 : -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			vbb_err("poll: %s", strerror(errno));
			status = 1;
			break;
		}
		if (n == 0) {
			print_stats(&session, active, "interval");
			continue;
		}

		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGUSR1) {
					print_stats(&session, active, "signal");
				} else if (si.ssi_signo == SIGHUP) {
					if (active)
						vu_session_config_changed(&session);
					else
						vbb_info("SIGHUP: no frontend to tell of the disk's size");
				} else {
					vbb_info("%s: exiting",
						 strsignal(si.ssi_signo));
					stop = true;
					continue;
				}
			}
		}

		if (pfd[1].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd < 0) {
				vbb_warn("accept on %s: %s", where,
					 strerror(errno));
			} else if (!vbb_peer_allowed(fd, allow, nallow)) {
				close(fd);
			} else if (active) {
				vbb_warn("a frontend is already connected: refusing another");
				close(fd);
			} else if (vu_session_open(&session, &params, fd)) {
				vbb_err("cannot serve the new frontend");
				close(fd);
			} else {
				vbb_info("frontend connected");
				cfd = fd;
				active = true;
			}
		}

		if (cfd >= 0 && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			int ret = vu_session_handle(&session);

			if (ret) {
				print_stats(&session, true, "disconnect");
				vu_session_close(&session);
				close(cfd);
				cfd = -1;
				active = false;
				if (once) {
					status = ret < 0;
					stop = true;
				}
			}
		}
	}

	if (active) {
		print_stats(&session, true, "exit");
		vu_session_close(&session);
		close(cfd);
	}
	close(lfd);
	if (src == VBB_LISTEN_PATH)
		unlink(lo.path);
	close(sfd);
	disk_close(&disk);
	return status;
}
