# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# A single-node Ceph cluster on loopback, for the test VM: one monitor, one
# manager and one OSD keeping its objects in memory (memstore), no
# authentication, pools of size 1; an RBD image in it mapped with the
# kernel client (rbd map), whose /dev/rbdN is what vhost-blk is given.
# Debian 12's Ceph 16 (ceph-mon, ceph-mgr, ceph-osd, ceph-common:
# scripts/deps.sh --ceph installs them).
#
# Sourced, not run:
#
#   . ceph_rbd.sh
#   ceph_rbd_up DIR IMAGE SIZE_MIB   start the cluster in DIR, create
#                                    rbd/IMAGE, map it, print /dev/rbdN
#   ceph_rbd_down DIR                unmap, stop the cluster's daemons
#
# The cluster's configuration is DIR/ceph.conf, for ceph, rbd (CEPH_CONF)
# and QEMU's rbd driver (conf=).  ceph_rbd_up may run in a command
# substitution: what ceph_rbd_down needs is in DIR.  Each function prints
# its errors on stderr and returns non-zero.

# ceph_rbd_wait SECONDS COMMAND...: until COMMAND succeeds, a bound against
# a hang, not a measurement.
ceph_rbd_wait() {
	local i limit=$1

	shift
	for ((i = 0; i < limit; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}

# Not 'ceph osd stat | grep -q': under a caller's pipefail, grep leaving
# early could make ceph's SIGPIPE the pipeline's status.
ceph_rbd_osd_up() {
	[[ $(ceph osd stat 2>/dev/null) == *' 1 up'* ]]
}

ceph_rbd_up() {
	local d=$1 image=$2 size=$3 fsid uuid id dev

	command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null &&
		command -v rbd >/dev/null || {
		echo "ceph_rbd: ceph-mon, ceph-osd or rbd missing (scripts/deps.sh --ceph)" >&2
		return 1
	}
	# The test VM comes up with its loopback interface down.
	ip link set lo up >&2 || return
	rm -rf "$d" && mkdir -p "$d/run" "$d/log" "$d/mon-a" "$d/mgr-x" \
		"$d/osd-0" || return
	fsid=$(cat /proc/sys/kernel/random/uuid)
	# memstore: the OSD's objects in memory, as a null_blk's; 512 MiB.
	cat >"$d/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:6789
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
ms bind msgr2 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = 536870912
osd memory target = 268435456
osd crush chooseleaf type = 0
run dir = $d/run
log file = $d/log/\$name.log
[mon.a]
mon data = $d/mon-a
[mgr.x]
mgr data = $d/mgr-x
[osd.0]
osd data = $d/osd-0
EOF
	export CEPH_CONF=$d/ceph.conf
	# Every daemon is given -c, by which ceph_rbd_down finds it.
	monmaptool --create --add a v1:127.0.0.1:6789 --fsid "$fsid" \
		"$d/monmap" >/dev/null &&
		ceph-mon --mkfs -i a --monmap "$d/monmap" -c "$CEPH_CONF" >&2 &&
		ceph-mon -i a -c "$CEPH_CONF" >&2 || {
		echo "ceph_rbd: the monitor did not start (see $d/log/mon.a.log)" >&2
		return 1
	}
	ceph_rbd_wait 120 ceph -s || {
		echo "ceph_rbd: the monitor does not answer (see $d/log/mon.a.log)" >&2
		return 1
	}
	# --no-mon-config: see ceph-osd below.
	ceph-mgr -i x --no-mon-config -c "$CEPH_CONF" >&2 || {
		echo "ceph_rbd: the manager did not start (see $d/log/mgr.x.log)" >&2
		return 1
	}
	# Every setting is in ceph.conf: --no-mon-config.  Without it Ceph 16's
	# daemons fetch the monitor's config first, which leaves the monitor
	# addresses in the daemon's context; the MonClient built from those has
	# no fsid (00000000-...) until the monitor's monmap arrives, and the
	# OSD's first command (osd crush set-device-class) can go before it:
	# "mon_cmd_maybe_osd_create fail: 'wrong fsid'", and the OSD exits.
	uuid=$(cat /proc/sys/kernel/random/uuid)
	id=$(ceph osd new "$uuid") &&
		ceph-osd -i "$id" --mkfs --osd-uuid "$uuid" --no-mon-config \
			-c "$CEPH_CONF" >"$d/log/osd-mkfs.log" 2>&1 &&
		ceph-osd -i "$id" --no-mon-config -c "$CEPH_CONF" >&2 &&
		ceph_rbd_wait 180 ceph_rbd_osd_up || {
		echo "ceph_rbd: the OSD did not come up (see $d/log/osd.0.log)" >&2
		return 1
	}
	{
		ceph osd pool create rbd 8 8 &&
			ceph osd pool set rbd size 1 --yes-i-really-mean-it &&
			rbd pool init rbd &&
			rbd create --size "$size" --image-feature layering "rbd/$image"
	} >&2 || {
		echo "ceph_rbd: creating the pool and image rbd/$image failed" >&2
		return 1
	}
	# No udev in the test VM: devtmpfs makes the node.
	modprobe rbd >&2 && dev=$(rbd map -o noudev "rbd/$image") &&
		[ -b "$dev" ] || {
		echo "ceph_rbd: rbd map rbd/$image failed (see dmesg)" >&2
		return 1
	}
	echo "$dev" >"$d/mapped"
	echo "$dev"
}

ceph_rbd_down() {
	local d=$1

	[ -f "$d/ceph.conf" ] || return 0
	if [ -f "$d/mapped" ]; then
		CEPH_CONF=$d/ceph.conf rbd unmap -o noudev "$(cat "$d/mapped")" 2>/dev/null
		rm -f "$d/mapped"
	fi
	pkill -f -- "-c $d/ceph.conf" 2>/dev/null
	return 0
}
