# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# NVMe over TCP on loopback, for the test VM: the kernel's NVMe target
# (nvmet, nvmet-tcp) exports one namespace, set up through configfs, and
# the kernel's NVMe/TCP host (nvme-tcp) connects to it through
# /dev/nvme-fabrics, which is what "nvme connect" writes.  The namespace
# that appears, /dev/nvmeXnY, is what vhost-blk (or anything else) is
# given.
#
# Sourced, not run:
#
#   . nvme_tcp.sh
#   dev=$(nvme_tcp_up NAME BACKING_DEV [PORT [CTRL_LOSS_TMO]])
#   nvme_tcp_export NAME BACKING_DEV PORT ADDR   the target side alone
#   dev=$(nvme_tcp_connect NAME ADDR PORT CTRL_LOSS_TMO)
#                              the host side alone (another machine's
#                              export: live migration between two hosts)
#   nvme_tcp_port_down NAME / nvme_tcp_port_up NAME
#   nvme_tcp_state NAME        the host controller's state (live, connecting)
#   nvme_tcp_down NAME         disconnect and remove the export
#
# NAME names the export: the subsystem NQN is nqn.2026-12.dev.vhost-blk:NAME.
# Each function prints its errors on stderr and returns non-zero.

nvme_tcp_cfs=/sys/kernel/config/nvmet

# The host controller of export NAME (nvmeN), from its subsystem NQN.
nvme_tcp_ctrl() {
	local nqn=nqn.2026-12.dev.vhost-blk:$1 c

	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] || continue
		if [ "$(cat "$c/subsysnqn")" = "$nqn" ] &&
		   [ "$(cat "$c/transport" 2>/dev/null)" = tcp ]; then
			echo "${c##*/}"
			return 0
		fi
	done
	return 1
}

nvme_tcp_state() {
	local c

	c=$(nvme_tcp_ctrl "$1") || { echo none; return 1; }
	cat "/sys/class/nvme/$c/state"
}

# The namespace's block device.  With native multipath (Debian's
# CONFIG_NVME_MULTIPATH=y) it is the subsystem's head, nvme<subsys>n1,
# whose device is the subsystem; without, the controller's own nvmeNn1.
nvme_tcp_dev() {
	local nqn=nqn.2026-12.dev.vhost-blk:$1 b

	for b in /sys/block/nvme*n1; do
		[ -e "$b" ] || continue
		case "${b##*/}" in
		nvme*c*n1) continue ;;	# a path under a multipath head
		esac
		if [ "$(cat "$b/device/subsysnqn" 2>/dev/null)" = "$nqn" ]; then
			echo "/dev/${b##*/}"
			return 0
		fi
	done
	return 1
}

# nvme_tcp_up NAME BACKING_DEV [PORT [CTRL_LOSS_TMO]]: export BACKING_DEV
# as namespace 1 of the subsystem NAME on 127.0.0.1:PORT (default 4420),
# connect to it, print the namespace's block device.  The host retries a
# lost connection every second for CTRL_LOSS_TMO seconds (default 60)
# before it fails the I/O it holds.
nvme_tcp_up() {
	local port=${3:-4420}

	nvme_tcp_export "$1" "$2" "$port" 127.0.0.1 &&
		nvme_tcp_connect "$1" 127.0.0.1 "$port" "${4:-60}"
}

# nvme_tcp_modules: the target's and the host's modules, and a loopback
# interface that is up (the test VM comes up with it down).
nvme_tcp_modules() {
	modprobe -a nvmet nvmet-tcp nvme-tcp >&2 || {
		echo "nvme_tcp: cannot load nvmet, nvmet-tcp and nvme-tcp" >&2
		return 1
	}
	if [ "$(cat /sys/class/net/lo/operstate 2>/dev/null)" = down ] ||
	   ! ip -o addr show dev lo 2>/dev/null | grep -q 'inet 127'; then
		ip link set lo up >&2 || {
			echo "nvme_tcp: cannot bring up the loopback interface" >&2
			return 1
		}
	fi
}

# nvme_tcp_export NAME BACKING_DEV PORT ADDR: the target serves BACKING_DEV
# as namespace 1 of subsystem NAME on ADDR:PORT, to any host.
nvme_tcp_export() {
	local name=$1 backing=$2 port=$3 addr=$4
	local nqn=nqn.2026-12.dev.vhost-blk:$1 sub ns pdir

	nvme_tcp_modules || return
	[ -d "$nvme_tcp_cfs" ] || {
		echo "nvme_tcp: $nvme_tcp_cfs missing (configfs not mounted?)" >&2
		return 1
	}
	sub=$nvme_tcp_cfs/subsystems/$nqn
	ns=$sub/namespaces/1
	pdir=$nvme_tcp_cfs/ports/$port
	# Any host may connect: the port listens on loopback or a test link.
	mkdir "$sub" && echo 1 >"$sub/attr_allow_any_host" &&
		mkdir "$ns" && echo "$backing" >"$ns/device_path" &&
		echo 1 >"$ns/enable" || {
		echo "nvme_tcp: exporting $backing as $nqn failed" >&2
		return 1
	}
	if [ ! -d "$pdir" ]; then
		mkdir "$pdir" && echo tcp >"$pdir/addr_trtype" &&
			echo ipv4 >"$pdir/addr_adrfam" &&
			echo "$addr" >"$pdir/addr_traddr" &&
			echo "$port" >"$pdir/addr_trsvcid" || {
			echo "nvme_tcp: making port $port on $addr failed" >&2
			return 1
		}
	fi
	nvme_tcp_port_up "$name" "$port"
}

# nvme_tcp_connect NAME ADDR PORT CTRL_LOSS_TMO: connect to subsystem NAME
# on ADDR:PORT, print the namespace's block device.
nvme_tcp_connect() {
	local name=$1 addr=$2 port=$3 tmo=$4
	local nqn=nqn.2026-12.dev.vhost-blk:$1 dev out opts

	nvme_tcp_modules || return
	# What "nvme connect -t tcp -a ADDR -s PORT -n NQN
	# --ctrl-loss-tmo TMO --reconnect-delay 1" writes.
	opts="transport=tcp,traddr=$addr,trsvcid=$port,nqn=$nqn"
	opts+=",ctrl_loss_tmo=$tmo,reconnect_delay=1"
	if ! out=$(exec 3<>/dev/nvme-fabrics &&
		   printf '%s' "$opts" >&3 &&
		   head -n 1 <&3); then
		echo "nvme_tcp: connecting to $nqn on $addr:$port failed (see dmesg)" >&2
		return 1
	fi
	for _ in $(seq 100); do
		if dev=$(nvme_tcp_dev "$name") && [ -b "$dev" ]; then
			echo "$dev"
			return 0
		fi
		sleep 0.1
	done
	echo "nvme_tcp: connected ($out) but no block device of $nqn appeared" >&2
	return 1
}

# The target stops (or starts again) serving the subsystem on its port: the
# host's connection drops, and it reconnects every second meanwhile.
nvme_tcp_port_down() {
	local port=${2:-4420}

	rm "$nvme_tcp_cfs/ports/$port/subsystems/nqn.2026-12.dev.vhost-blk:$1"
}

nvme_tcp_port_up() {
	local nqn=nqn.2026-12.dev.vhost-blk:$1 port=${2:-4420}

	ln -s "$nvme_tcp_cfs/subsystems/$nqn" \
		"$nvme_tcp_cfs/ports/$port/subsystems/$nqn" || {
		echo "nvme_tcp: enabling $nqn on port $port failed" >&2
		return 1
	}
}

# nvme_tcp_down NAME [PORT]: disconnect the host, remove the export (and the
# port, if nothing else is on it).
nvme_tcp_down() {
	local nqn=nqn.2026-12.dev.vhost-blk:$1 port=${2:-4420} c sub

	sub=$nvme_tcp_cfs/subsystems/$nqn
	if c=$(nvme_tcp_ctrl "$1"); then
		echo 1 >"/sys/class/nvme/$c/delete_controller" 2>/dev/null
	fi
	rm -f "$nvme_tcp_cfs/ports/$port/subsystems/$nqn" 2>/dev/null
	rmdir "$nvme_tcp_cfs/ports/$port" 2>/dev/null
	if [ -d "$sub" ]; then
		echo 0 >"$sub/namespaces/1/enable" 2>/dev/null
		rmdir "$sub/namespaces/1" "$sub" 2>/dev/null
	fi
	return 0
}
