#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run a command inside a throw-away QEMU VM that boots the Debian kernel
# selected by scripts/deps.sh, with the host's root file system visible
# (read-only, under a tmpfs overlay) and vhost_blk.ko loaded.  See
# README.rst in this directory.

set -euo pipefail

me=run-vm
vm_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$vm_dir/../../../.." && pwd)
BUILD=${BUILD:-$repo/build}

usage() {
	cat <<EOF
Usage: ${0##*/} [OPTIONS] -- COMMAND [ARGS...]

Boot the vhost-blk test VM (the kernel from \$BUILD/kernel.env under QEMU),
load vhost_iotlb, vhost, null_blk, brd and vhost_blk.ko, run COMMAND in the
current directory and power off.  The host root is visible read-only with
a throw-away tmpfs overlay; the output directory is shared read-write at
the same path.  A single COMMAND argument is run with 'bash -c'.

Options:
  --kernel KIND      stock (default): Debian's 6.12 kernel from
                     \$BUILD/kernel.env (KREL);
                     debug: the KASAN + lockdep + kmemleak build of the same
                     source (make debug-kernel), with its modules and
                     \$BUILD/module-debug/vhost_blk.ko (make module-debug);
                     6.1: Debian 12's default kernel, 6.1 LTS (KREL_61),
                     with \$BUILD/module-6.1/vhost_blk.ko (make module-6.1)
                     7.3: Debian 13's Linux 7.3 (KREL_73, unpacked into
                     KIMG_73 by scripts/mainline.sh), with
                     \$BUILD/module-7.3/vhost_blk.ko (make module-7.3)
  --timeout SECONDS  kill the VM after this long (default 600; 2400 with
                     --kernel debug)
  --mem MIB          guest memory (default 2048; 3072 with --kernel debug)
  --smp N            guest CPUs (default 2)
  --tcg-threads MODE multi (default: a host thread per vCPU) or single
                     (the vCPUs take turns on one thread: slower, but a
                     kernel text patch cannot race another vCPU; see
                     README.rst)
  --no-module        do not load $repo/vhost_blk.ko
  --brd-mib N        size of /dev/ram0 in MiB (default 256)
  --out DIR          read-write output directory (default \$BUILD/vm-out)
  --netdev SPEC      a virtio-net NIC on QEMU's -netdev SPEC (for
                     instance socket,listen=127.0.0.1:PORT in one VM and
                     socket,connect=127.0.0.1:PORT in another: a link
                     between the two); COMMAND loads virtio_net and sets
                     the address.  --mac sets its MAC address
  -v, --verbose      say which accelerator is used and how long the boot took
  --debug            also show the kernel log and the VM's own steps on the
                     console (interleaves with the command's output)
  -h, --help         this text

Environment:
  BUILD                       build directory (default $repo/build)
  VHOST_BLK_VM_KERNEL         stock, debug or 6.1: the default of --kernel
  VHOST_BLK_VM_ACCEL          kvm, tcg or auto (default auto: KVM only if a
                              cached probe boot showed that it works)
  VHOST_BLK_VM_QEMU           QEMU binary (default qemu-system-x86_64)
  VHOST_BLK_VM_MODULE         module to insmod (default $repo/vhost_blk.ko,
                              \$BUILD/module-debug/vhost_blk.ko with
                              --kernel debug, \$BUILD/module-6.1/vhost_blk.ko
                              with --kernel 6.1)
  VHOST_BLK_VM_DMESG_IGNORE   extended regex of kernel log lines the
                              dmesg check ignores
  VHOST_BLK_VM_KEEP           1: keep the temporary run directory

COMMAND sees BUILD, PATH and every VHOST_BLK_* variable of the caller, and
VHOST_BLK_VM=1, VHOST_BLK_VM_KERNEL=stock|debug|6.1 and VHOST_BLK_VM_OUT=DIR.
DIR receives dmesg.log (the full kernel log) and console.log (the raw
serial console).

Exit status: COMMAND's status; 3 if COMMAND succeeded but the kernel log
shows a warning, oops, KASAN, UBSAN, lockdep, DEBUG_OBJECTS, list
corruption or kmemleak report, a hung task or similar; 124 on
timeout; 125 if the VM could not be set up or died; 2 for usage or
configuration errors.
EOF
}

msg() { printf '%s: %s\n' "$me" "$*" >&2; }
die() {
	local rc=$1

	shift
	msg "$*"
	exit "$rc"
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

kind=${VHOST_BLK_VM_KERNEL:-stock}
timeout_s=
mem=
smp=2
tcg_threads=multi
no_module=0
brd_mib=256
out=
verbose=0
debug=0
netdev=
mac=52:54:00:76:62:01

need_arg() { [ "$2" -ge 2 ] || die 2 "$1 needs an argument (see --help)"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--kernel)	need_arg "$1" $#; kind=$2; shift 2 ;;
	--kernel=*)	kind=${1#*=}; shift ;;
	--timeout)	need_arg "$1" $#; timeout_s=$2; shift 2 ;;
	--timeout=*)	timeout_s=${1#*=}; shift ;;
	--mem)		need_arg "$1" $#; mem=$2; shift 2 ;;
	--mem=*)	mem=${1#*=}; shift ;;
	--smp)		need_arg "$1" $#; smp=$2; shift 2 ;;
	--smp=*)	smp=${1#*=}; shift ;;
	--tcg-threads)	need_arg "$1" $#; tcg_threads=$2; shift 2 ;;
	--tcg-threads=*) tcg_threads=${1#*=}; shift ;;
	--brd-mib)	need_arg "$1" $#; brd_mib=$2; shift 2 ;;
	--brd-mib=*)	brd_mib=${1#*=}; shift ;;
	--out)		need_arg "$1" $#; out=$2; shift 2 ;;
	--out=*)	out=${1#*=}; shift ;;
	--netdev)	need_arg "$1" $#; netdev=$2; shift 2 ;;
	--netdev=*)	netdev=${1#*=}; shift ;;
	--mac)		need_arg "$1" $#; mac=$2; shift 2 ;;
	--mac=*)	mac=${1#*=}; shift ;;
	--no-module)	no_module=1; shift ;;
	-v|--verbose)	verbose=1; shift ;;
	--debug)	verbose=1; debug=1; shift ;;
	-h|--help)	usage; exit 0 ;;
	--)		shift; break ;;
	-*)		die 2 "unknown option $1 (see --help)" ;;
	*)		break ;;
	esac
done
[ $# -gt 0 ] || die 2 "no command given (usage: ${0##*/} [OPTIONS] -- COMMAND [ARGS...])"

case "$kind" in
stock|6.1|7.3) timeout_s=${timeout_s:-600}; mem=${mem:-2048} ;;
# KASAN, lockdep and kmemleak make the kernel several times slower under
# TCG, and KASAN's shadow and quarantine take memory.
debug)	timeout_s=${timeout_s:-2400}; mem=${mem:-3072} ;;
*)	die 2 "--kernel: stock, debug, 6.1 or 7.3, not '$kind'" ;;
esac

# check_uint OPTION VALUE MIN
check_uint() {
	if ! is_uint "$2" || [ "$2" -lt "$3" ]; then
		die 2 "$1: '$2' is not a number of at least $3"
	fi
}
check_uint --timeout "$timeout_s" 1
check_uint --mem "$mem" 256
check_uint --smp "$smp" 1
check_uint --brd-mib "$brd_mib" 1
case "$tcg_threads" in
single|multi) ;;
*) die 2 "--tcg-threads: single or multi, not '$tcg_threads'" ;;
esac

env_file=$BUILD/kernel.env
[ -f "$env_file" ] || die 2 "$env_file not found: run 'make deps' first"
BUILD=$(cd "$BUILD" && pwd)
env_file=$BUILD/kernel.env
KREL= KREL_61= KREL_73= KIMG_73=
# shellcheck source=/dev/null
. "$env_file"
[ -n "$KREL" ] || die 2 "$env_file does not set KREL: run 'make deps'"
if [ "$kind" = 6.1 ]; then
	[ -n "$KREL_61" ] || die 2 "$env_file does not set KREL_61: run 'make deps'"
	KREL=$KREL_61
fi

# The debug kernel's modules are not under /lib/modules: modprobe on the
# host is pointed at its tree with -d, and stage 2 links it into the VM's
# /lib/modules.
modprobe_root=()
vm_moddir=
default_ko=$repo/vhost_blk.ko
if [ "$kind" = 7.3 ]; then
	# Debian 13's kernel, unpacked by scripts/mainline.sh outside /boot.
	[ -n "$KREL_73" ] && [ -n "$KIMG_73" ] ||
		die 2 "$env_file does not set KREL_73 and KIMG_73: run 'make deps'"
	KREL=$KREL_73
	kernel=$KIMG_73/vmlinuz
	moddir=$KIMG_73/modules/lib/modules/$KREL
	modprobe_root=(-d "$KIMG_73/modules")
	vm_moddir=$moddir
	default_ko=$BUILD/module-7.3/vhost_blk.ko
	[ -r "$kernel" ] || die 2 "kernel image $kernel not found: run 'make deps'"
	[ -f "$moddir/modules.dep" ] || die 2 "$moddir/modules.dep not found: run 'make deps'"
elif [ "$kind" != debug ]; then
	[ "$kind" = stock ] || default_ko=$BUILD/module-$kind/vhost_blk.ko
	kernel=/boot/vmlinuz-$KREL
	moddir=/lib/modules/$KREL
	[ -r "$kernel" ] || die 2 "kernel image $kernel not found: run 'make deps'"
	[ -f "$moddir/modules.dep" ] || die 2 "$moddir/modules.dep not found: run 'make deps'"
else
	debug_dir=$(bash "$repo/scripts/debug-kernel.sh" --path) ||
		die 2 "no debug kernel built: run 'make module-debug' (or 'make debug-kernel')"
	KREL=$(cat "$debug_dir/kernelrelease") ||
		die 2 "cannot read $debug_dir/kernelrelease"
	kernel=$debug_dir/bzImage
	moddir=$debug_dir/modules/lib/modules/$KREL
	modprobe_root=(-d "$debug_dir/modules")
	vm_moddir=$moddir
	default_ko=$BUILD/module-debug/vhost_blk.ko
	[ -r "$kernel" ] || die 2 "kernel image $kernel not found: run 'make debug-kernel'"
	[ -f "$moddir/modules.dep" ] || die 2 "$moddir/modules.dep not found: run 'make debug-kernel'"
fi
qemu=${VHOST_BLK_VM_QEMU:-qemu-system-x86_64}
busybox=$(command -v busybox || true)
command -v "$qemu" >/dev/null || die 2 "$qemu not found: run 'make deps'"
[ -n "$busybox" ] || die 2 "busybox not found: run 'make deps' (busybox-static)"
if ldd "$busybox" >/dev/null 2>&1; then
	die 2 "$busybox is dynamically linked: install busybox-static"
fi
for tool in modprobe cpio xz timeout flock sha256sum mkfifo perl; do
	command -v "$tool" >/dev/null || die 2 "$tool not found: run 'make deps'"
done

ko=${VHOST_BLK_VM_MODULE:-$default_ko}
if [ "$no_module" = 0 ] && [ ! -f "$ko" ]; then
	case "$kind" in
	stock) die 2 "$ko not found: build it with 'make module', or pass --no-module" ;;
	*) die 2 "$ko not found: build it with 'make module-$kind', or pass --no-module" ;;
	esac
fi
ko=$(cd "$(dirname "$ko")" && pwd)/${ko##*/}

out=${out:-$BUILD/vm-out}
mkdir -p "$out" || die 2 "cannot create the output directory $out"
out=$(cd "$out" && pwd -P)
case "$out/" in
/proc/*|/sys/*|/dev/*) die 2 "--out $out: not usable inside the VM" ;;
esac
cwd=$(pwd)
nl=$'\n'
for path in "$repo" "$out" "$cwd"; do
	case "$path" in
	*"$nl"*) die 2 "a newline in the path '$path' is not supported" ;;
	esac
done

cache=$BUILD/vm
mkdir -p "$cache" || die 2 "cannot create $cache"

# ---------------------------------------------------------------- initramfs
#
# busybox-static, the virtio-pci/9p/overlay modules of $KREL (and what they depend on,
# decompressed so that busybox insmod can load them) and vm/init.  Rebuilt
# only when one of those inputs changes.

initramfs=$cache/initramfs-$KREL.cpio
initramfs_format=1

initramfs_modules() {
	local m

	# One module per call: modprobe takes further words as parameters.
	# virtio_pci is built in on 6.12 and a module on 6.1.
	for m in virtio_pci 9pnet_virtio 9p overlay; do
		modprobe "${modprobe_root[@]}" -S "$KREL" --show-depends "$m" || return
	done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }'
}

build_initramfs() {
	local mods key tmp m name

	mods=$(initramfs_modules) ||
		die 2 "modprobe ${modprobe_root[*]} -S $KREL --show-depends virtio_pci 9pnet_virtio 9p overlay failed"
	# (The debug kernel has them built in.)
	[ -n "$mods" ] || [ "$kind" = debug ] ||
		die 2 "no 9p/overlay modules found in $moddir"
	# shellcheck disable=SC2086
	key=$({ echo "format $initramfs_format $KREL"
		sha256sum "$vm_dir/init" "$busybox" $mods; } | sha256sum) ||
		die 2 "cannot read the initramfs inputs ($vm_dir/init, $busybox, modules)"
	key=${key%% *}
	if [ -f "$initramfs" ] && [ "$(cat "$initramfs.key" 2>/dev/null)" = "$key" ]; then
		return 0
	fi

	msg "building $initramfs"
	tmp=$(mktemp -d "$cache/initramfs.XXXXXX")
	mkdir -p "$tmp"/bin "$tmp"/dev "$tmp"/proc "$tmp"/sys "$tmp"/mnt \
		"$tmp"/modules
	: >"$tmp/modules/load.order"
	cp "$busybox" "$tmp/bin/busybox"
	cp "$vm_dir/init" "$tmp/init"
	chmod 755 "$tmp/init" "$tmp/bin/busybox"
	# Only needed if the kernel has no built-in initramfs providing it;
	# init copes without it.
	mknod "$tmp/dev/console" c 5 1 2>/dev/null || true
	for m in $mods; do
		name=${m##*/}
		case "$name" in
		*.ko.xz)  name=${name%.xz};  xz -dc "$m" >"$tmp/modules/$name" ;;
		*.ko.zst) name=${name%.zst}; zstd -qdc "$m" >"$tmp/modules/$name" ;;
		*.ko.gz)  name=${name%.gz};  gzip -dc "$m" >"$tmp/modules/$name" ;;
		*.ko)     cp "$m" "$tmp/modules/$name" ;;
		*)        rm -rf "$tmp"; die 2 "unexpected module file $m" ;;
		esac || { rm -rf "$tmp"; die 2 "cannot decompress $m"; }
		echo "$name" >>"$tmp/modules/load.order"
	done
	if ! (cd "$tmp" && find . | LC_ALL=C sort |
	      cpio -o -H newc -R 0:0 --quiet >"$initramfs.tmp.$$"); then
		rm -rf "$tmp" "$initramfs.tmp.$$"
		die 2 "cpio failed while writing $initramfs"
	fi
	rm -rf "$tmp"
	mv "$initramfs.tmp.$$" "$initramfs"
	echo "$key" >"$initramfs.key"
}

# Serialise concurrent runs while the cache is being (re)built.
exec {lock_fd}>"$cache/.lock"
flock "$lock_fd"
build_initramfs
flock -u "$lock_fd"
exec {lock_fd}>&-

# ---------------------------------------------------------------- QEMU

# QEMU option values: a comma is written as two.
qesc() { printf '%s' "${1//,/,,}"; }

new_nonce() { od -An -N6 -tx1 /dev/urandom | tr -d ' \n'; }

base_cmdline="console=ttyS0 panic=-1 printk.devkmsg=on log_buf_len=4M"
qemu_common=(-nodefaults -no-user-config -display none -no-reboot -nic none
	-kernel "$kernel" -initrd "$initramfs" -serial stdio)

# KVM runs only specially built guest kernels on some machines: a stock
# kernel dies at once with an emulation failure.  Probe once with a short
# boot and cache the answer.
kvm_probe() {
	local key probe nonce result=fail log

	key="$KREL $(uname -r) $("$qemu" --version | sed -n 1p) $(cat "$initramfs.key")"
	probe=$cache/kvm-probe
	[ "$kind" = stock ] || probe=$cache/kvm-probe-$kind
	if [ -f "$probe" ] && [ "$(head -n 1 "$probe")" = "$key" ]; then
		[ "$(sed -n 2p "$probe")" = ok ]
		return
	fi
	msg "probing whether KVM boots $KREL (once; result cached in $probe)"
	nonce=$(new_nonce)
	log=$(mktemp)
	# (QEMU aborts on a KVM emulation failure: keep bash's report quiet.)
	{ timeout -k 5 30 "$qemu" "${qemu_common[@]}" -accel kvm -cpu host \
		-smp 1 -m 512 \
		-append "$base_cmdline quiet loglevel=1 vbvm.mode=probe vbvm.nonce=$nonce" \
		</dev/null >"$log" 2>&1 || true; } 2>/dev/null
	grep -q "VHOST-BLK-VM-PROBE-OK-$nonce" "$log" && result=ok
	rm -f "$log"
	printf '%s\n%s\n' "$key" "$result" >"$probe.tmp.$$"
	mv "$probe.tmp.$$" "$probe"
	msg "KVM probe: $result"
	[ "$result" = ok ]
}

accel=${VHOST_BLK_VM_ACCEL:-auto}
case "$accel" in
kvm|tcg) ;;
auto)
	accel=tcg
	if [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] && kvm_probe; then
		accel=kvm
	fi
	;;
*)	die 2 "VHOST_BLK_VM_ACCEL=$accel: expected kvm, tcg or auto" ;;
esac
if [ "$accel" = kvm ]; then
	accel_args=(-accel kvm -cpu host)
else
	accel_args=(-accel "tcg,thread=$tcg_threads" -cpu max)
fi

# ---------------------------------------------------------------- the run

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vhost-blk-vm.XXXXXX")
share=$tmp/share	# the guest's /.vhost-blk-vm
mkdir "$share"
qpid=
fpid=

# shellcheck disable=SC2317  # (the traps call these)
cleanup() {
	if [ -n "$qpid" ]; then
		kill -TERM "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
	fi
	if [ "${VHOST_BLK_VM_KEEP:-0}" = 1 ]; then
		msg "kept the run directory $tmp"
	else
		rm -rf "$tmp"
	fi
}
# shellcheck disable=SC2317
on_signal() {
	trap - INT TERM HUP
	msg "interrupted, stopping the VM"
	exit 130
}
trap cleanup EXIT
trap on_signal INT TERM HUP

nonce=$(new_nonce)
begin_marker=VHOST-BLK-VM-BEGIN-$nonce
status_marker=VHOST-BLK-VM-STATUS-$nonce=

# The command: argv as given, or one string for bash -c.
if [ $# -eq 1 ]; then
	vm_cmd=(bash -c "$1")
else
	vm_cmd=("$@")
fi
# Its environment: BUILD, PATH and VHOST_BLK_* of the caller.  Its output
# goes to a tty (the serial console) even when ours does not: then say
# TERM=dumb, so that tools leave out colours and progress bars.
term=dumb
[ ! -t 1 ] || term=${TERM:-dumb}
vm_env=("BUILD=$BUILD" "PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin"
	"HOME=/root" "TERM=$term" "VHOST_BLK_VM=1"
	"VHOST_BLK_VM_OUT=$out" "VHOST_BLK_VM_KERNEL=$kind" "KREL=$KREL")
while IFS= read -r var; do
	case "$var" in
	VHOST_BLK_VM|VHOST_BLK_VM_OUT|VHOST_BLK_VM_KERNEL) ;;
	VHOST_BLK_*) vm_env+=("$var=${!var}") ;;
	esac
done < <(compgen -e)

{
	printf 'VM_NONCE=%q\n' "$nonce"
	printf 'VM_KREL=%q\n' "$KREL"
	printf 'VM_MODDIR=%q\n' "$vm_moddir"
	printf 'VM_REPO=%q\n' "$repo"
	printf 'VM_OUT=%q\n' "$out"
	printf 'VM_CWD=%q\n' "$cwd"
	printf 'VM_KO=%q\n' "$ko"
	printf 'VM_NO_MODULE=%q\n' "$no_module"
	printf 'VM_DEBUG=%q\n' "$debug"
	printf 'VM_CMD=('
	printf ' %q' "${vm_cmd[@]}"
	printf ' )\nVM_ENV=('
	printf ' %q' "${vm_env[@]}"
	printf ' )\n'
} >"$share/config"
cp "$vm_dir/guest.sh" "$share/guest.sh"
printf '%s\n' "$out" >"$share/out-dir"
# A tmpfs on /tmp and /run, unless it would hide the project, the output
# directory, the working directory or the module.
ko_dir=$repo
[ "$no_module" = 1 ] || ko_dir=${ko%/*}
for dir in /tmp /run; do
	for path in "$repo" "$out" "$cwd" "$ko_dir" "${vm_moddir:-$repo}"; do
		case "$path/" in
		"$dir"/*) continue 2 ;;
		esac
	done
	echo "$dir"
done >"$share/tmpfs-dirs"

cmdline="$base_cmdline vbvm.mode=run vbvm.nonce=$nonce vbvm.debug=$debug"
cmdline+=" brd.rd_nr=1 brd.rd_size=$((brd_mib * 1024))"
if [ "$debug" = 1 ]; then
	cmdline+=" loglevel=7"
else
	cmdline+=" quiet loglevel=1"
fi
# TCG on a busy host is slow: raise the soft lockup and RCU stall limits so
# that only real stalls make the dmesg check fail.
cmdline+=" watchdog_thresh=30 rcupdate.rcu_cpu_stall_timeout=90"
# TCG's TSC is the host's clock, the same on every vCPU; but on a busy host
# the clocksource watchdog can still call it unstable at any moment, which
# flips the sched_clock static key and so patches scheduler text (int3
# and all) while the other vCPU runs through it.  Trust the TSC.
[ "$accel" = tcg ] && cmdline+=" tsc=reliable"
# Under TCG every retpoline, RSB fill and barrier the kernel puts in
# against speculation attacks is emulated instruction by instruction, for
# CPU flaws TCG does not have: with mitigations=off the same VM ran system
# calls 42% and fork-exec 28% faster here.  The tests check behaviour and
# counts, which mitigations do not change.
[ "$accel" = tcg ] && cmdline+=" mitigations=off"
# The debug kernel: every KASAN report, not only the first.  PCI interrupt
# routing from the BIOS table: through ACPI, each interrupt link took 20 s
# of AML under KASAN and lockdep, a minute per boot.
if [ "$kind" = debug ]; then
	cmdline+=" kasan_multi_shot acpi=noirq"
fi

qemu_args=("${qemu_common[@]}" "${accel_args[@]}" -smp "$smp" -m "$mem"
	-append "$cmdline"
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$(qesc "$share"),mount_tag=vmrun,security_model=none,multidevs=remap"
	-virtfs "local,path=$(qesc "$out"),mount_tag=vmout,security_model=none,multidevs=remap")
[ -z "$netdev" ] ||
	qemu_args+=(-netdev "$netdev,id=net0" -device "virtio-net-pci,netdev=net0,mac=$mac")

console_log=$out/console.log
rm -f "$out/dmesg.log" "$console_log"

# Copy the serial console to console.log and, without the markers and the
# power-off noise, to stdout.  Line by line, so output appears as each line
# is completed.  (Perl, not a bash read loop, which makes a system call per
# byte.  The serial port itself carries about 200 KB/s under TCG.)
console_filter() {
	perl -e '
		use strict;
		use warnings;
		use Time::HiRes qw(time);
		my ($log, $begin, $status, $tmp, $debug) = @ARGV;
		open(my $lf, ">", $log) or die "run-vm: cannot write $log: $!\n";
		$lf->autoflush(1);
		$| = 1;
		my $done = 0;
		sub put {
			my ($file, $text) = @_;
			open(my $fh, ">", $file) or return;
			print $fh "$text\n";
			close($fh);
		}
		while (my $line = <STDIN>) {
			print $lf $line;
			$line =~ s/\r?\n?\z//;
			my $i = index($line, $begin);
			if ($i >= 0) {
				my ($up) = $line =~ /uptime=(\S+)/;
				put("$tmp/begin-time", sprintf("%.3f %s", time, $up // "?"));
				$line = substr($line, 0, $i);
				print "$line\n" if length($line) && !$done;
				next;
			}
			$i = index($line, $status);
			if ($i >= 0) {
				my ($st) = substr($line, $i + length($status)) =~ /^(\d+)/;
				put("$tmp/status.console", $st) if defined $st;
				$line = substr($line, 0, $i);
				print "$line\n" if length($line);
				$done = 1;
				next;
			}
			print "$line\n" if !$done || $debug;
		}
	' "$console_log" "$begin_marker" "$status_marker" "$tmp" "$debug"
}

mkfifo "$tmp/console"
console_filter <"$tmp/console" &
fpid=$!

if [ "$verbose" = 1 ]; then
	if [ "$kind" = stock ]; then
		msg "$qemu ${accel_args[*]} -smp $smp -m $mem, kernel $KREL"
	else
		msg "$qemu ${accel_args[*]} -smp $smp -m $mem, kernel $KREL ($kernel)"
	fi
fi
start=$(perl -MTime::HiRes=time -e 'printf "%.3f", time')
timeout -k 10 "$timeout_s" "$qemu" "${qemu_args[@]}" \
	</dev/null >"$tmp/console" 2>"$tmp/qemu.err" &
qpid=$!
qrc=0
# (Quiet: bash would also report a QEMU that aborts; see qemu.err below.)
{ wait "$qpid" || qrc=$?; } 2>/dev/null
qpid=
wait "$fpid" || true
end=$(perl -MTime::HiRes=time -e 'printf "%.3f", time')

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

if [ "$verbose" = 1 ] && [ -f "$tmp/begin-time" ]; then
	read -r begin uptime <"$tmp/begin-time"
	msg "boot to command: $(elapsed "$start" "$begin") s (guest uptime $uptime s), total $(elapsed "$start" "$end") s"
fi

if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	msg "timed out after $timeout_s s (console log: $console_log)"
	exit 124
fi

status=
if [ -f "$share/status" ]; then
	status=$(cat "$share/status")
elif [ -f "$tmp/status.console" ]; then
	status=$(cat "$tmp/status.console")
fi
if ! is_uint "$status"; then
	if [ "$qrc" != 0 ] || [ -s "$tmp/qemu.err" ]; then
		msg "QEMU exited with status $qrc:"
		sed 's/^/  /' "$tmp/qemu.err" >&2
	fi
	if grep -q 'Kernel panic' "$console_log" 2>/dev/null; then
		msg "the guest kernel panicked before the command's status was reported (console log: $console_log)"
	else
		msg "the VM stopped without reporting the command's status (console log: $console_log)"
	fi
	exit 125
fi
if [ "$status" = 125 ]; then
	msg "the VM could not be set up (see the messages above; console log: $console_log)"
fi

# ---------------------------------------------------------------- dmesg check

# Besides WARN and BUG and their traces: every report of the debug
# kernel's checkers, KASAN ("BUG: KASAN: ..."), UBSAN, lockdep (its
# headers are "WARNING: possible circular locking dependency detected",
# "... recursive locking ...", "WARNING: inconsistent lock state",
# "WARNING: suspicious RCU usage", "BUG: sleeping function called from
# invalid context", "BUG: scheduling while atomic" and the like),
# DEBUG_OBJECTS ("ODEBUG: ..."), DEBUG_LIST ("list_add corruption"),
# kmemleak ("unreferenced object", in the log with kmemleak.verbose) and
# hung tasks; and lockdep switching itself off, after which
# lockdep_assert_held() checks nothing.
dmesg_pattern='WARNING:|BUG:|kernel BUG|Oops|general protection fault|Call Trace|possible circular locking|possible recursive locking|inconsistent lock state|lockdep|locking correctness validator|Disabling lock debugging|suspicious RCU usage|blocked for more than|UBSAN|KASAN|ODEBUG|list_(add|del) corruption|unreferenced object|refcount_t'

# Lines that match but report nothing: the debug kernel's boot banner.
dmesg_benign='rcu:[[:space:]]+RCU lockdep checking is enabled\.$'

# Print each report: up to 4 lines before the matching line (not printed
# yet), then the lines after it up to the end of the trace ("---[ end
# trace", or "</TASK>" without one) or 40 lines, at most 200 lines in all.
dmesg_report() {
	awk -v pat="$dmesg_pattern" -v ign="${VHOST_BLK_VM_DMESG_IGNORE:-}" \
	    -v benign="$dmesg_benign" '
	{ line[NR] = $0 }
	END {
		n = 0; last = 0
		for (i = 1; i <= NR; i++) {
			if (i <= last || line[i] !~ pat || line[i] ~ benign)
				continue
			if (ign != "" && line[i] ~ ign)
				continue
			if (n > 0)
				print "  ..."
			first = i - 4
			if (first <= last)
				first = last + 1
			for (j = first; j <= NR && j < i + 40; j++) {
				print "  " line[j]
				n++
				if (line[j] ~ /---\[ end trace/)
					break
				if (line[j] ~ /<\/TASK>/ && line[j + 1] !~ /---\[ end trace/)
					break
			}
			last = j
			if (n >= 200) {
				print "  [...]"
				break
			}
		}
	}' "$1"
}

dmesg_log=$out/dmesg.log
dmesg_rc=0
if [ ! -f "$dmesg_log" ]; then
	[ "$status" = 125 ] || msg "no kernel log was saved to $dmesg_log"
	dmesg_rc=1
else
	report=$(dmesg_report "$dmesg_log")
	if [ -n "$report" ]; then
		msg "dmesg shows a kernel warning (full log: $dmesg_log):"
		printf '%s\n' "$report" >&2
		dmesg_rc=1
	fi
fi

if [ "$status" != 0 ]; then
	[ "$status" = 125 ] || msg "command exited with status $status"
	exit "$status"
fi
[ "$dmesg_rc" = 0 ] || exit 3
exit 0
