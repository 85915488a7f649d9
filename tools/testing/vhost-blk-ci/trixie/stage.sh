#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One boot's stage of the package test on the Debian 13 machine
# (scripts/trixie-machine.sh), run by vhost-blk-test-stage.service from
# the runner's 9p share on /mnt/vbt (trixie/run.sh):
#
#   in/    this script, the .debs, vhost_blk_ctl_test, the domain XML,
#          the libvirt guest's bzImage and tools.img (read here)
#   out/   results (a line per check: pass|fail NAME DETAIL), log, the
#          kernel log of each boot, and next/ with the kernel to boot
#          next when this stage installed one
#
# The stage is kept in the machine, /var/lib/vhost-blk-test/stage:
#   install   (trixie's 6.12) apt-get install of the .debs, DKMS builds
#             the module; reboot
#   installed (6.12) what boot did: modules-load.d loaded vhost_blk, udev
#             gave /dev/vhost-blk root:kvm 0660, no unit failed; a bridge
#             socket enabled with systemctl; the ctl selftest; a guest
#             of libvirt's on a bridge instance; then the kernel upgrade
#             to trixie-backports' 7.3 with apt-get, DKMS builds for it;
#             power off, the runner boots 7.3
#   upgraded  (7.3) the same checks of the boot; the socket still enabled;
#             the ctl selftest; the libvirt guest; purge, nothing left;
#             power off
set -uo pipefail

share=/mnt/vbt
in=$share/in
out=$share/out
state=/var/lib/vhost-blk-test
log=$out/log
mkdir -p "$state" "$out"
stage=$(cat "$state/stage" 2>/dev/null || echo install)
krel=$(uname -r)

say() { echo "vbt-stage: $*" >/dev/console; }
result() {	# result pass|fail NAME [DETAIL]
	echo "$1 $stage:$2 ${3:-}" >>"$out/results"
	say "$1 $stage:$2 ${3:-}"
}
# run COMMAND...: into the log, with a header line, each line of output
# stamped with the time it was complete (printf's %(...)T: no fork), so
# that the log shows where a stage's time went.
run() {
	local rc

	printf '%(%T)T + [%s] %s\n' -1 "$stage" "$*" >>"$log"
	"$@" 2>&1 | while IFS= read -r line; do
		printf '%(%T)T %s\n' -1 "$line"
	done >>"$log"
	rc=${PIPESTATUS[0]}
	printf '%(%T)T = %s\n' -1 "$rc" >>"$log"
	return "$rc"
}
# check NAME COMMAND...: pass when COMMAND succeeds.
check() {
	local name=$1

	shift
	if run "$@"; then
		result pass "$name"
	else
		result fail "$name" "see $log"
	fi
}
# The end of a stage: its kernel log for the runner's warning check,
# then the next stage, and a reboot or a power-off.
finish() {	# finish NEXT-STAGE reboot|poweroff
	journalctl -k -b --no-pager >"$out/dmesg-$stage.log" 2>&1
	echo "$1" >"$state/stage"
	sync
	say "stage $stage done, next $1: $2"
	systemctl "$2" --no-block
	exit 0
}

# The boot's other jobs first: the checks are of a booted machine.  (Not
# systemctl is-system-running --wait: this unit's own job is one of the
# boot's.)
wait_booted() {
	local i

	for i in $(seq 600); do
		[ "$(systemctl list-jobs --no-legend | grep -vc vhost-blk-test-stage)" = 0 ] &&
			return 0
		sleep 1
	done
	return 1
}

ver=
dkms_deb=$(ls "$in"/vhost-blk-dkms_*_all.deb 2>/dev/null | sort -V | tail -n 1)
tools_deb=$(ls "$in"/vhost-blk-tools_*.deb 2>/dev/null | sort -V | tail -n 1)
[ -z "$dkms_deb" ] || ver=$(dpkg-deb -f "$dkms_deb" Version | sed 's/-[^-]*$//')

# dkms status, less the compiler check's noise about the kernel's vmlinux.
dkms_status() {
	dkms status 2>&1 | grep -v "^readelf: Warning: Section '.comment' was not dumped"
}
dkms_installed() {	# dkms_installed KREL
	local s

	s=$(dkms_status)
	echo "+ [$stage] dkms status: $s" >>"$log"
	grep -qxF "vhost-blk/$ver, $1, $(uname -m): installed" <<<"$s"
}

# What every boot with the packages installed must show.
boot_checks() {
	local perm failed

	if wait_booted; then
		result pass booted "$krel, systemd $(systemctl --version | sed -n 's/^systemd \([0-9]*\).*/\1/p') as PID 1"
	else
		result fail booted "jobs still queued after 600 s: $(systemctl list-jobs --no-legend | tr '\n' ';')"
	fi
	# systemd 257 logs the modules it inserts at debug level only: the
	# module's first kernel line (the taint of an unsigned out-of-tree
	# module) must come between systemd-modules-load.service's start and
	# its end in the boot's journal.
	if grep -qw vhost_blk /proc/modules &&
	   journalctl -b --no-pager -o cat | awk '
		/Starting systemd-modules-load.service/ { started = 1 }
		started && /^vhost_blk: / { loaded = 1 }
		/Finished systemd-modules-load.service/ { ok = started && loaded; exit }
		END { exit !ok }'; then
		result pass modules-load "systemd-modules-load loaded vhost_blk at boot"
	else
		result fail modules-load "vhost_blk not loaded by systemd-modules-load at boot: $(journalctl -b --no-pager -o cat | grep -E 'modules-load|^vhost_blk' | head -n 6 | tr '\n' ';')"
	fi
	perm=$(stat -c '%U:%G %a' /dev/vhost-blk 2>&1)
	if [ "$perm" = "root:kvm 660" ]; then
		result pass node-perms "/dev/vhost-blk root:kvm 0660 from udev"
	else
		result fail node-perms "/dev/vhost-blk is '$perm'"
	fi
	failed=$(systemctl --failed --no-legend --plain 2>&1)
	if [ -z "$failed" ]; then
		result pass no-failed-units "systemctl --failed lists none"
	else
		result fail no-failed-units "$(tr '\n' ';' <<<"$failed")"
	fi
}

ctl_selftest() {
	local rc totals

	run modprobe brd rd_nr=1 rd_size=262144
	VHOST_BLK_TEST_STRICT=1 VHOST_BLK_TEST_DEV=/dev/ram0 \
		"$in/vhost_blk_ctl_test" >"$out/ctl-$stage.out" 2>&1
	rc=$?
	totals=$(sed -n 's/^# Totals: //p' "$out/ctl-$stage.out")
	if [ "$rc" = 0 ]; then
		result pass ctl-selftest "on /dev/ram0: $totals"
	else
		result fail ctl-selftest "exited $rc: ${totals:-no totals}, see ctl-$stage.out"
	fi
	run rmmod brd
}

# charge_sample SERVICE: "QEMU_CGROUP N IN_QEMU" while the guest runs:
# QEMU's cgroup (libvirt's machine scope), and how many of the kthreads
# that work for the guest (the vhost worker vhost-PID and the sync task
# vhost-blk-PID, PID the bridge's) there are and are in it.  Nothing until
# QEMU and the bridge both run.  Builtins only: this runs every second.
charge_sample() {
	local bpid qpid qcg='' cg p comm line n=0 inq=0

	bpid=$(systemctl show -p MainPID --value "$1")
	qpid=$(cat /run/libvirt/qemu/vbb-e2e.pid 2>/dev/null)
	[ -n "$qpid" ] && [ "${bpid:-0}" != 0 ] || return 0
	while read -r line; do
		qcg=${line#0::}
	done <"/proc/$qpid/cgroup"
	[ -n "$qcg" ] || return 0
	for p in /proc/[0-9]*; do
		read -r comm <"$p/comm" 2>/dev/null || continue
		case "$comm" in
		"vhost-$bpid" | "vhost-blk-$bpid"*) ;;
		*) continue ;;
		esac
		cg=
		while read -r line; do
			cg=${line#0::}
		done <"$p/cgroup"
		n=$((n + 1))
		[ "$cg" = "$qcg" ] && inq=$((inq + 1))
	done
	echo "$qcg $n $inq"
}

# A guest of libvirt's on a disk the bridge serves, as a Debian 13 host
# runs one: libvirt's own daemons, the shipped domain XML
# (Documentation/virt/vhost-blk/vhost-blk-bridge-domain.xml) defined and
# started with virsh, QEMU as libvirt-qemu in the machine scope systemd
# gives it, the bridge an instance of the packaged units.  The guest is
# the end-to-end test's (its kernel and read-only tools.img from the
# share), in its libvirt mode: it checks the files the disk holds (made
# here, as the e2e's first boot leaves them), writes and verifies 8 MiB
# with fio; the file GROW among them has it ask for more room, which it
# gets as a user gives it: the image grown, then systemctl reload of the
# instance; it sees the capacity grow, writes and verifies the new area,
# and powers off.  Its results come back in its console log.  Meanwhile
# the kthreads that serve it must be in QEMU's cgroup, not the bridge's
# (--charge auto): the VM's io.max, memory.max and cpu.max bound its disk.
libvirt_guest() {
	local name=vbb-e2e d=$state/files img=$state/vbb-e2e.img i st n=0
	local console=/var/log/libvirt/qemu/vbb-e2e-console.log
	local virsh=(virsh -c qemu:///system) svc=vhost-blk-bridge@vbb-e2e.service
	local grown=0 charge='' sample qcg kn kinq

	if [ ! -f "$in/bzImage" ] || [ ! -f "$in/tools.img" ]; then
		result fail libvirt-guest "no guest kernel or tools.img in the share"
		return
	fi
	# The disk: 256 MiB, an ext4 of 64 MiB at its start with two files
	# and their SHA-256 sums.
	rm -rf "$d" "$img"
	mkdir -p "$d"
	head -c 4M /dev/urandom >"$d/random"
	cp /usr/bin/dpkg "$d/"
	(cd "$d" && sha256sum random dpkg >SUMS)
	: >"$d/GROW"
	truncate -s 256M "$img"
	run mkfs.ext4 -q -F -d "$d" "$img" 64M
	chown vhost-blk-bridge: "$img"
	printf 'BACKEND=%s\nOPTIONS=--allow-uid libvirt-qemu --serial %s\n' \
		"$img" "$name" >"/etc/vhost-blk-bridge/$name.conf"
	check libvirt-socket systemctl enable --now "vhost-blk-bridge@$name.socket"
	mkdir -p /var/lib/libvirt/boot /var/lib/libvirt/images
	cp "$in/bzImage" "/var/lib/libvirt/boot/$name-bzImage"
	cp "$in/tools.img" "/var/lib/libvirt/images/$name-tools.img"
	rm -f "$console"
	check libvirt-define "${virsh[@]}" define "$in/vhost-blk-bridge-domain.xml"
	st=
	if run "${virsh[@]}" start "$name"; then
		result pass libvirt-start "$("${virsh[@]}" version 2>/dev/null | sed -n 's/^Running hypervisor: //p')"
		for i in $(seq 1200); do
			st=$("${virsh[@]}" domstate "$name" 2>/dev/null)
			[ "$st" = "shut off" ] && break
			sample=$(charge_sample "$svc")
			read -r _ kn _ <<<"$sample"
			[ "${kn:-0}" -ge 2 ] && charge=$sample
			if [ "$grown" = 0 ] &&
			   grep -q '^VBB-E2E-RESIZE-REQUEST' "$console" 2>/dev/null; then
				grown=1
				run truncate -s +64M "$img"
				check libvirt-reload systemctl reload "$svc"
			fi
			sleep 1
		done
		if [ "$st" = "shut off" ]; then
			result pass libvirt-domain-ended "after $i s"
		else
			result fail libvirt-domain-ended "still '$st' after 1200 s"
			run "${virsh[@]}" destroy "$name"
		fi
	else
		result fail libvirt-start "see $log and libvirt-qemu-$stage.log"
	fi
	cp "/var/log/libvirt/qemu/$name.log" "$out/libvirt-qemu-$stage.log" 2>/dev/null
	cp "$console" "$out/guest-$stage.log" 2>/dev/null
	# The guest's own results, each a result here.
	while read -r _ gname gres gdetail; do
		n=$((n + 1))
		result "$gres" "guest:$gname" "$gdetail"
	done < <(tr -d '\r' <"$console" 2>/dev/null | grep '^VBB-E2E-RESULT ')
	if [ "$n" -gt 0 ] && tr -d '\r' <"$console" | grep -q '^VBB-E2E-DONE'; then
		result pass libvirt-guest-done "$n results from the guest"
	else
		result fail libvirt-guest-done "$n results and no VBB-E2E-DONE in its console (guest-$stage.log)"
	fi
	run "${virsh[@]}" undefine "$name"
	# The bridge that served it was the instance's service; it told the
	# guest of the new size, and charged the guest's work to its VM.
	journalctl -b --no-pager -o cat -u "$svc" >"$out/bridge-$stage.log" 2>&1
	if grep -q 'frontend connected' "$out/bridge-$stage.log"; then
		result pass libvirt-bridge-served "$svc served the guest's QEMU"
	else
		result fail libvirt-bridge-served "$(tail -n 3 "$out/bridge-$stage.log" | tr '\n' ';')"
	fi
	if [ "$grown" = 1 ] &&
	   grep -q 'config change sent to the frontend' "$out/bridge-$stage.log"; then
		result pass libvirt-resize "the image grown by 64 MiB, systemctl reload: the bridge sent the config change"
	else
		result fail libvirt-resize "$([ "$grown" = 1 ] || echo 'the guest never asked; ')no config change in bridge-$stage.log"
	fi
	read -r qcg kn kinq <<<"$charge"
	if ! grep -q "charged to the frontend's cgroups" "$out/bridge-$stage.log"; then
		result fail libvirt-charged-to-the-vm "the bridge did not charge the frontend (bridge-$stage.log)"
	elif [ -z "$charge" ] || [ "$kinq" != "$kn" ]; then
		result fail libvirt-charged-to-the-vm "kthreads of the guest: ${kn:-none found}, ${kinq:-0} in QEMU's cgroup ${qcg:-?}"
	else
		result pass libvirt-charged-to-the-vm "$kn kthreads in QEMU's cgroup $qcg"
	fi
	run systemctl disable --now "vhost-blk-bridge@$name.socket" \
		"vhost-blk-bridge@$name.service"
}

say "stage $stage on $krel"
export DEBIAN_FRONTEND=noninteractive
case $stage in
install)
	if wait_booted && [ -z "$(systemctl --failed --no-legend --plain)" ]; then
		result pass booted "$krel, no unit failed"
	else
		result fail booted "$(systemctl --failed --no-legend --plain | tr '\n' ';')"
	fi
	mkdir -p /root/debs
	cp "$dkms_deb" "$tools_deb" /root/debs/
	t0=$(date +%s)
	if run apt-get install -y \
		/root/debs/"${dkms_deb##*/}" /root/debs/"${tools_deb##*/}"; then
		result pass apt-install "both packages, the DKMS build for $krel included: $(($(date +%s) - t0)) s"
	else
		result fail apt-install "see $log"
	fi
	if dkms_installed "$krel"; then
		result pass dkms-status "vhost-blk/$ver installed for $krel"
	else
		result fail dkms-status "vhost-blk/$ver not installed for $krel: $(dkms_status | tr '\n' ';')"
	fi
	finish installed reboot
	;;
installed)
	boot_checks
	# A disk for the bridge, configured and enabled as bridge.rst says.
	truncate -s 256M "$state/disk.img"
	cat >/etc/vhost-blk-bridge/disk.conf <<EOF
BACKEND=$state/disk.img
OPTIONS=--serial trixie-disk
EOF
	check socket-enable systemctl enable --now vhost-blk-bridge@disk.socket
	if [ "$(systemctl is-active vhost-blk-bridge@disk.socket)" = active ] &&
	   [ -S /run/vhost-blk-bridge/disk.sock ]; then
		result pass socket-active "$(stat -c '%n %U:%G %a' /run/vhost-blk-bridge/disk.sock)"
	else
		result fail socket-active "$(systemctl status --no-pager vhost-blk-bridge@disk.socket 2>&1 | head -n 5 | tr '\n' ';')"
	fi
	ctl_selftest
	libvirt_guest
	# The kernel upgrade, as a Debian 13 user makes it: the backports
	# kernel with its headers, and its linux-source for the DKMS build
	# (linux-source is the metapackage of the newest series).
	t0=$(date +%s)
	if run apt-get install -y -t trixie-backports \
		linux-image-amd64 linux-headers-amd64 linux-source; then
		result pass kernel-upgrade "apt-get install -t trixie-backports linux-image-amd64 linux-headers-amd64 linux-source: $(($(date +%s) - t0)) s"
	else
		result fail kernel-upgrade "see $log"
	fi
	new=$(cd /lib/modules && ls -d 7.* 2>/dev/null | sort -V | tail -n 1)
	if [ -n "$new" ] && dkms_installed "$new"; then
		result pass dkms-built-for-upgrade "vhost-blk/$ver installed for $new"
	else
		result fail dkms-built-for-upgrade "no DKMS build for '${new:-no 7.x kernel}': $(dkms_status | tr '\n' ';')"
	fi
	mkdir -p "$out/next"
	vmlinuz=/boot/vmlinuz-$new
	[ -f "$vmlinuz" ] || vmlinuz=/lib/modules/$new/vmlinuz
	if [ -n "$new" ] && cp "$vmlinuz" "$out/next/vmlinuz" &&
	   cp "/boot/initrd.img-$new" "$out/next/initrd.img"; then
		echo "$new" >"$out/next/release"
	fi
	finish upgraded poweroff
	;;
upgraded)
	case $krel in
	7.*)	result pass kernel "booted the upgraded kernel $krel" ;;
	*)	result fail kernel "booted $krel, not the upgrade's 7.x" ;;
	esac
	boot_checks
	if [ "$(systemctl is-enabled vhost-blk-bridge@disk.socket)" = enabled ] &&
	   [ "$(systemctl is-active vhost-blk-bridge@disk.socket)" = active ]; then
		result pass socket-after-upgrade "vhost-blk-bridge@disk.socket enabled and listening"
	else
		result fail socket-after-upgrade "$(systemctl is-enabled vhost-blk-bridge@disk.socket) $(systemctl is-active vhost-blk-bridge@disk.socket)"
	fi
	ctl_selftest
	libvirt_guest
	run systemctl disable --now vhost-blk-bridge@disk.socket
	run rmmod vhost_blk
	check purge apt-get purge -y vhost-blk-dkms vhost-blk-tools
	left=$(ls -d /usr/src/vhost-blk-* /var/lib/dkms/vhost-blk \
		/lib/modules/*/updates/dkms/vhost_blk.ko* \
		/usr/lib/udev/rules.d/60-vhost-blk.rules \
		/usr/lib/modules-load.d/vhost-blk.conf \
		/lib/systemd/system/vhost-blk-bridge@.* \
		/usr/bin/vhost-blk-bridge /usr/sbin/vhost-blk-bridge 2>/dev/null)
	if [ -z "$left" ] && ! modinfo vhost_blk >/dev/null 2>&1; then
		result pass purged "no module for any kernel, no source, rule, snippet, units or bridge"
	else
		result fail purged "left: $(tr '\n' ' ' <<<"$left")"
	fi
	touch "$out/done"
	finish "done" poweroff
	;;
*)
	result fail stage "unknown stage '$stage'"
	touch "$out/done"
	finish "done" poweroff
	;;
esac
