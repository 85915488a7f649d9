#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian packages (make deb) installed, used and purged inside the
# test VM, on the stock kernel with no vhost_blk loaded by the runner
# (make package-test runs: vm/run-vm.sh --no-module -- package_test.sh).
# The VM's root is a tmpfs overlay over the host's: what is installed here
# is gone when the VM powers off, and the host is not touched.  See --help.

set -euo pipefail

me=package_test.sh

usage() {
	cat <<EOF
Usage: $me [--tap FILE] DEBDIR [BINDIR]

Inside the test VM (vm/run-vm.sh --no-module): install
DEBDIR/vhost-blk-dkms_*.deb and DEBDIR/vhost-blk-tools_*.deb with apt-get
(DKMS builds vhost_blk.ko for the running kernel), check dkms status, the
module's path, the modules-load.d snippet (systemd-modules-load loads it),
the udev rule (systemd-udevd, started here, gives /dev/vhost-blk group kvm
mode 0660), that a user in group kvm can open the node and one not in it
gets EACCES, the PRE_BUILD refusal for a kernel series without its source,
BINDIR/vhost_blk_ctl_test (default \$BUILD/selftests) against brd, then
purge both packages and check that every file they made is gone.  Prints
TAP; with --tap also writes it to FILE.  Command output goes to
\$VHOST_BLK_VM_OUT/package.log, the selftest's TAP to
\$VHOST_BLK_VM_OUT/package.vhost_blk_ctl_test.out.

Options:
  --tap FILE   write the TAP output to FILE as well
  -h, --help   this text
EOF
}

tap_path=
while [ $# -gt 0 ]; do
	case "$1" in
	--tap)		[ $# -ge 2 ] || { echo "$me: --tap needs a file" >&2; exit 2; }
			tap_path=$2; shift 2 ;;
	-h|--help)	usage; exit 0 ;;
	-*)		echo "$me: unknown option '$1' (see --help)" >&2; exit 2 ;;
	*)		break ;;
	esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "$me: usage: $me [--tap FILE] DEBDIR [BINDIR]" >&2
	exit 2
fi
debdir=$1
bindir=${2:-${BUILD:-}/selftests}
out=${VHOST_BLK_VM_OUT:?$me runs inside the test VM (vm/run-vm.sh --no-module)}
log=$out/package.log
: >"$log"

# shellcheck source=tools/testing/vhost-blk-ci/tap.sh
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
# check NAME WHY-IF-NOT COMMAND...: ok when COMMAND succeeds.
check() {
	local name=$1 why=$2

	shift 2
	if "$@" >>"$log" 2>&1; then
		tap_ok "$name"
	else
		tap_not_ok "$name - $why (log: $log)"
	fi
}
# run COMMAND...: into the log, with a header line, each line of output
# stamped with the time it was complete (printf's %(...)T: no fork).
run() {
	printf '%(%T)T + %s\n' -1 "$*" >>"$log"
	"$@" 2>&1 | while IFS= read -r line; do
		printf '%(%T)T %s\n' -1 "$line"
	done >>"$log"
}

plan=18
tap_start "$tap_path"
tap_plan "$plan"

krel=$(uname -r)
dkms_deb=$(ls "$debdir"/vhost-blk-dkms_*_all.deb 2>/dev/null | sort -V | tail -n 1 || true)
tools_deb=$(ls "$debdir"/vhost-blk-tools_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$dkms_deb" ] || [ -z "$tools_deb" ]; then
	tap_bail "no vhost-blk-dkms_*_all.deb or vhost-blk-tools_*.deb in $debdir: run 'make deb'"
	exit 1
fi
ver=$(dpkg-deb -f "$dkms_deb" Version)
ver=${ver%-*}
if grep -qw vhost_blk /proc/modules; then
	tap_bail "vhost_blk is already loaded: run the VM with --no-module"
	exit 1
fi

# The VM's /dev is a bare devtmpfs: no /dev/fd, which udev or systemd
# would have made and dkms needs (for <(...)).  On the overlay, like any
# other change here.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# The VM runs the command in a chroot (the host root under an overlay):
# udevadm would ignore requests there.
export SYSTEMD_IGNORE_CHROOT=1

# Debian's DKMS postinst builds for the running kernel and for the newest
# one with a /boot/config-*: on 6.1 that would be 6.12 as well, whose
# build is the 6.12 VM's to test (and 5 min here).  Hide the newer
# kernels' configs, on the overlay.
for cfg in /boot/config-*; do
	[ -f "$cfg" ] && [ "$cfg" != "/boot/config-$krel" ] || continue
	if dpkg --compare-versions "${cfg#/boot/config-}" gt "$krel"; then
		mv "$cfg" "$cfg.hidden-by-package-test" &&
			tap_diag "hid $cfg: DKMS builds for $krel only"
	fi
done

# DKMS runs depmod, which reads every module of the kernel: on 6.12 that
# is 4230 .ko.xz, each decompressed under TCG, 3 of this VM's 12 min.
# Cut the tree, on the overlay, to what this test can load: the modules
# loaded now, vhost_blk's dependencies and what the selftest loads
# (dm-mod for dmsetup, loop, null_blk), with theirs.
declare -A keep=()
for mod in $(awk '{ print $1 }' /proc/modules) vhost vhost_iotlb dm_mod \
	loop null_blk; do
	while read -r cmd ko _; do
		[ "$cmd" != insmod ] || keep[$ko]=1
	done < <(modprobe --show-depends "$mod" 2>/dev/null || true)
done
if [ -n "$(printf '%s\n' "${!keep[@]}" | grep '/vhost\.ko')" ]; then
	drop=()
	while IFS= read -r -d '' ko; do
		[ -n "${keep[$ko]:-}" ] || drop+=("$ko")
	done < <(find "/lib/modules/$krel/kernel" -name '*.ko*' -print0)
	# One rm for all: a process each costs minutes under TCG.
	printf '%s\0' "${drop[@]}" | xargs -0 -r rm -f
	run depmod -a "$krel" &&
		tap_diag "the VM's module tree cut to ${#keep[@]} modules (${#drop[@]} removed, on the overlay): depmod's time"
else
	tap_diag "modprobe --show-depends vhost found nothing: the module tree is left whole"
fi

# 1: apt-get installs both from the files, offline (every dependency is
# already installed on the host root the VM sees); DKMS builds the module
# in the postinst.
t0=$(date +%s)
if run env DEBIAN_FRONTEND=noninteractive apt-get install -y \
	--no-install-recommends "$dkms_deb" "$tools_deb"; then
	tap_ok "install - apt-get install of both packages, DKMS build included: $(($(date +%s) - t0)) s"
else
	tap_not_ok "install - apt-get install $dkms_deb $tools_deb failed after $(($(date +%s) - t0)) s (log: $log)"
fi

# 2: dkms status: this module installed for the running kernel, no
# warning or error for anything.
# dkms's compiler check runs 'readelf -p .comment' on the headers'
# vmlinux, which has no such section: that warning is about the kernel.
dkms_status() {
	local s

	s=$(dkms status 2>&1 || true)
	printf '+ dkms status\n%s\n' "$s" >>"$log"
	grep -v "^readelf: Warning: Section '.comment' was not dumped" <<<"$s" || true
}

status=$(dkms_status)
if grep -qxF "vhost-blk/$ver, $krel, $(uname -m): installed" <<<"$status" &&
   ! grep -qiE 'warning|error|broken|added$|built$' <<<"$status"; then
	tap_ok "dkms-status - vhost-blk/$ver installed for $krel"
else
	tap_not_ok "dkms-status - expected 'vhost-blk/$ver, $krel, $(uname -m): installed' and nothing else amiss, got: $(tr '\n' ';' <<<"$status")"
fi

# 3: modprobe would load the DKMS build.
modfile=$(modinfo -n vhost_blk 2>>"$log" || true)
case $modfile in
"/lib/modules/$krel/updates/dkms/vhost_blk.ko"*)
	tap_ok "module-path - $modfile" ;;
*)	tap_not_ok "module-path - modinfo -n vhost_blk is '$modfile', not /lib/modules/$krel/updates/dkms/vhost_blk.ko*" ;;
esac

# 4: the tools package's files.
rule=/usr/lib/udev/rules.d/60-vhost-blk.rules
snippet=/usr/lib/modules-load.d/vhost-blk.conf
if [ -f "$rule" ] && grep -qE '^KERNEL=="vhost-blk", GROUP="kvm", MODE="0660"' "$rule" &&
   [ -f "$snippet" ] && grep -qx vhost_blk "$snippet" &&
   [ -f /usr/share/man/man8/vhost-blk-bridge.8.gz ] &&
   run vhost-blk-bridge --help; then
	tap_ok "tools-files - udev rule, modules-load.d snippet, man page, vhost-blk-bridge --help"
else
	tap_not_ok "tools-files - $rule, $snippet, the man page or vhost-blk-bridge --help missing or wrong"
fi

# 4b: the bridge's systemd units, as an instance of them, pass
# systemd-analyze verify (the ExecStart binary, the directives), and the
# instances' configuration directory exists.
units=/lib/systemd/system
udir=$(mktemp -d)
for u in service socket; do
	ln -s "$units/vhost-blk-bridge@.$u" "$udir/vhost-blk-bridge@pkgtest.$u"
done
if [ -f "$units/vhost-blk-bridge@.service" ] &&
   [ -f "$units/vhost-blk-bridge@.socket" ] && [ -d /etc/vhost-blk-bridge ] &&
   [ -f /usr/share/doc/vhost-blk-tools/examples/instance.conf ] &&
   run systemd-analyze verify --man=no "$udir/vhost-blk-bridge@pkgtest.socket" \
	"$udir/vhost-blk-bridge@pkgtest.service"; then
	tap_ok "systemd-units - vhost-blk-bridge@.socket and @.service verify, /etc/vhost-blk-bridge, example instance.conf"
else
	tap_not_ok "systemd-units - missing, or systemd-analyze verify failed (log: $log)"
fi
rm -rf "$udir"

# 4c: the service's user, made by the postinst's systemd-sysusers from the
# package's sysusers.d file: a system user with no login, in group kvm
# (for /dev/vhost-blk) and a group of its own.
sysusers=/usr/lib/sysusers.d/vhost-blk-bridge.conf
bu=$(getent passwd vhost-blk-bridge || true)
bgroups=$(id -nG vhost-blk-bridge 2>/dev/null | tr ' ' '\n' | sort | tr '\n' ' ')
if [ -f "$sysusers" ] && [ -n "$bu" ] &&
   [ "$(cut -d: -f3 <<<"$bu")" -lt 1000 ] &&
   [ "$(cut -d: -f7 <<<"$bu")" = /usr/sbin/nologin ] &&
   [ "$bgroups" = "kvm vhost-blk-bridge " ] &&
   grep -qx 'User=vhost-blk-bridge' "$units/vhost-blk-bridge@.service" &&
   grep -qx 'CapabilityBoundingSet=' "$units/vhost-blk-bridge@.service"; then
	tap_ok "system-user - vhost-blk-bridge ($bu; groups ${bgroups% }), the service's User=, no capabilities"
else
	tap_not_ok "system-user - expected $sysusers and a system user vhost-blk-bridge in groups kvm and vhost-blk-bridge, got '$bu' in '${bgroups% }'"
fi

# 5: the dkms.conf refuses a kernel series it has no source for, saying
# why.  (PRE_BUILD alone, in a scratch build dir.)
scratch=$(mktemp -d)
if (cd "$scratch" && "/usr/src/vhost-blk-$ver/dkms-vhost-h.sh" 6.99.1-fake-amd64) \
	>"$scratch/out" 2>&1; then
	tap_not_ok "refuse-other-series - dkms-vhost-h.sh accepted kernel 6.99.1 without linux-source-6.99"
elif grep -q 'install linux-source-6.99' "$scratch/out" &&
     grep -q 'linux-source-6.99' "$scratch/make.log"; then
	tap_ok "refuse-other-series - PRE_BUILD refuses kernel 6.99.1: $(head -n 1 "$scratch/out")"
else
	tap_not_ok "refuse-other-series - dkms-vhost-h.sh failed without the expected message: $(tr '\n' ' ' <"$scratch/out")"
fi
rm -rf "$scratch"

# 6: udev.  The VM runs no udevd: start systemd-udevd here, so that the
# rule is applied the way it is at boot, on the module's uevent.
udevd=/lib/systemd/systemd-udevd
if run "$udevd" --daemon && run udevadm settle --timeout=60; then
	tap_ok "udevd - systemd-udevd started"
else
	tap_not_ok "udevd - $udevd --daemon failed"
fi

# 7: systemd-modules-load loads what the snippet lists, as at boot.
if run /lib/systemd/systemd-modules-load "$snippet" &&
   grep -qw vhost_blk /proc/modules; then
	tap_ok "modules-load - systemd-modules-load $snippet loaded vhost_blk"
else
	tap_not_ok "modules-load - systemd-modules-load $snippet did not load vhost_blk"
	run modprobe vhost_blk || true
fi

# 8: the module loaded is the DKMS build: the same GNU build ID (the
# last 20 bytes of the sysfs note are its descriptor).
loaded=$(od -An -tx1 -v /sys/module/vhost_blk/notes/.note.gnu.build-id 2>/dev/null |
	 tr -d ' \n' || true)
loaded=${loaded: -40}
built=none
if [ -n "$modfile" ] && xz -dc "$modfile" >/tmp/vhost_blk.ko 2>/dev/null ||
   cp "$modfile" /tmp/vhost_blk.ko 2>/dev/null; then
	built=$(readelf -n /tmp/vhost_blk.ko 2>/dev/null |
		sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p' || true)
fi
if [ -n "$loaded" ] && [ "$loaded" = "$built" ]; then
	tap_ok "module-loaded - build ID $loaded, the DKMS build's"
else
	tap_not_ok "module-loaded - loaded build ID '$loaded', DKMS build's '$built'"
fi

# 9: the node, as udev left it.
run udevadm settle --timeout=60 || true
perm=$(stat -c '%G %a' /dev/vhost-blk 2>&1 || true)
if [ "$perm" = "kvm 660" ]; then
	tap_ok "node-perms - /dev/vhost-blk group kvm mode 0660"
else
	tap_not_ok "node-perms - /dev/vhost-blk is '$perm', expected 'kvm 660'"
fi

# 10, 11: open(2) as an unprivileged user in group kvm, and not in it.
kvm_gid=$(getent group kvm | cut -d: -f3 || true)
uid=4242
open_as() {	# open_as SETPRIV-GROUP-OPTION: stderr of the open
	setpriv --reuid="$uid" --regid="$uid" "$1" \
		bash -c 'exec 3<>/dev/vhost-blk' 2>&1
}
if [ ! -c /dev/vhost-blk ]; then
	tap_not_ok "kvm-user-open - no /dev/vhost-blk"
elif [ -z "$kvm_gid" ]; then
	tap_not_ok "kvm-user-open - no group kvm"
elif msg=$(open_as --groups="$kvm_gid"); then
	tap_ok "kvm-user-open - uid $uid in group kvm ($kvm_gid) opens /dev/vhost-blk"
else
	tap_not_ok "kvm-user-open - uid $uid in group kvm cannot open /dev/vhost-blk: $msg"
fi
if [ ! -c /dev/vhost-blk ]; then
	tap_not_ok "other-user-eacces - no /dev/vhost-blk"
elif msg=$(open_as --clear-groups); then
	tap_not_ok "other-user-eacces - uid $uid in no group opened /dev/vhost-blk"
elif grep -q 'Permission denied' <<<"$msg"; then
	tap_ok "other-user-eacces - uid $uid in no group: EACCES"
else
	tap_not_ok "other-user-eacces - expected EACCES, got: $msg"
fi

# 12: a selftest against the installed module, as in_vm.sh runs it.
ctl_tap=$out/package.vhost_blk_ctl_test.out
if [ -x "$bindir/vhost_blk_ctl_test" ]; then
	VHOST_BLK_TEST_STRICT=1 VHOST_BLK_TEST_DEV=/dev/ram0 \
		"$bindir/vhost_blk_ctl_test" >"$ctl_tap" 2>&1 && rc=0 || rc=$?
	totals=$(sed -n 's/^# Totals: //p' "$ctl_tap")
	if [ "$rc" = 0 ]; then
		tap_ok "ctl-selftest - vhost_blk_ctl_test on /dev/ram0: ${totals:-?}"
	else
		tap_not_ok "ctl-selftest - vhost_blk_ctl_test on /dev/ram0 exited $rc: ${totals:-no totals}, see $ctl_tap"
	fi
else
	tap_not_ok "ctl-selftest - $bindir/vhost_blk_ctl_test missing: run 'make tools'"
fi

# 13: unloading.
check module-unload "rmmod vhost_blk failed" rmmod vhost_blk
run udevadm control --exit || true

# 14: purge both.
t0=$(date +%s)
if run env DEBIAN_FRONTEND=noninteractive apt-get purge -y \
	vhost-blk-dkms vhost-blk-tools; then
	tap_ok "purge - apt-get purge of both packages: $(($(date +%s) - t0)) s"
else
	tap_not_ok "purge - apt-get purge vhost-blk-dkms vhost-blk-tools failed (log: $log)"
fi

# 15: nothing left behind.
left=()
for f in /lib/modules/"$krel"/updates/dkms/vhost_blk.ko* /var/lib/dkms/vhost-blk \
	 "/usr/src/vhost-blk-$ver" "$rule" /lib/udev/rules.d/60-vhost-blk.rules \
	 "$snippet" /usr/sbin/vhost-blk-bridge "$units/vhost-blk-bridge@.service" \
	 "$units/vhost-blk-bridge@.socket" "$sysusers"; do
	[ ! -e "$f" ] || left+=("$f")
done
if [ ${#left[@]} -eq 0 ]; then
	tap_ok "purged-files - module, dkms tree, sources, udev rule, snippet, bridge, units, sysusers.d file gone (the user stays, as Debian keeps system users)"
else
	tap_not_ok "purged-files - left behind: ${left[*]}"
fi

# 16: dkms knows nothing of it, and modprobe finds no vhost_blk.
status=$(dkms_status)
if grep -q vhost-blk <<<"$status"; then
	tap_not_ok "dkms-clean - dkms status still lists: $(tr '\n' ';' <<<"$status")"
elif modinfo -n vhost_blk >>"$log" 2>&1; then
	tap_not_ok "dkms-clean - modinfo still finds vhost_blk"
else
	tap_ok "dkms-clean - dkms status and modinfo know no vhost_blk"
fi

tap_end
