#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# /init of the nested guest of the vhost-blk-bridge end-to-end test (busybox
# sh).  Its root is the read-only tools disk; /dev/vda is the disk served by
# QEMU's vhost-user-blk-pci -> vhost-blk-bridge -> /dev/vhost-blk.
#
# Kernel parameters: vbb.mode=rw|reconnect|migrate|ro|libvirt|demo|bench|probe,
# vbb.serial=S, vbb.resize=1 (reconnect: ask the host to grow the disk, see
# it grow; libvirt asks when the disk's file system has a file GROW),
# vbb.hotplug=1 (reconnect: ask for a memory hot-plug while reads run),
# vbb.qd1=SIZE, vbb.qd16=SIZE (fio sizes), vbb.runtime=S (demo: seconds
# per fio job; bench: too), vbb.jobs=J1,J2... and vbb.njobs=N (bench: the
# sections of fio-bench.job to run, and fio jobs per section,
# one per CPU).  Every check prints
#   VBB-E2E-RESULT <name> pass|fail [detail]
# and every phase VBB-E2E-TIME <name> <seconds>; the demo prints fio's terse
# lines as VBB-E2E-FIO <line>; the bench, around each job,
# VBB-BENCH-READY <job> and VBB-BENCH-END <job> <fio status> (each waits
# for the host's VBB-E2E-GO on the console), then fio's terse line as
# VBB-BENCH-TERSE <job> <line>.  The last line is VBB-E2E-DONE.  Then the
# guest powers off (reboot with QEMU -no-reboot).

export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null	# (the kernel may have)
mount -t tmpfs tmp /tmp

arg() {
	for w in $(cat /proc/cmdline); do
		case "$w" in "$1"=*) echo "${w#*=}"; return ;; esac
	done
}
now() { cut -d' ' -f1 /proc/uptime; }
result() { echo "VBB-E2E-RESULT $1 $2 ${3:-}"; }
check() {	# check NAME COMMAND...: pass if COMMAND succeeds
	name=$1
	shift
	if "$@" >/tmp/out 2>&1; then
		result "$name" pass
	else
		result "$name" fail "$(tail -n 3 /tmp/out | tr '\n' '|')"
		sed 's/^/  | /' /tmp/out | tail -n 20
	fi
}
phase_start() { t0=$(now); }
phase_end() { echo "VBB-E2E-TIME $1 $(awk "BEGIN { print $(now) - $t0 }")"; }

mode=$(arg vbb.mode)
serial=$(arg vbb.serial)
export VBB_DEV=/dev/vda
export VBB_QD1_SIZE=$(arg vbb.qd1)
export VBB_QD16_SIZE=$(arg vbb.qd16)
export VBB_RUNTIME=$(arg vbb.runtime)
echo "VBB-E2E-BOOTED $(now) mode=$mode"

fio_run() {	# fio_run [fio options]: both jobs of /etc/fio.job
	fio --output-format=normal "$@" /etc/fio.job
}
fio_summary() {	# the per-job lines of the last fio_run
	grep -E '^(qd1|qd16): \(groupid|^  (read|write): IOPS' /tmp/out |
		sed 's/^/  fio: /'
}
fio_check() {	# fio_check WHAT [fio options]: fio_run, a result per job
	what=$1
	shift
	fio_run "$@" >/tmp/out 2>&1
	rc=$?
	for job in qd1 qd16; do
		if grep -q "^$job: (groupid=[0-9]*, jobs=1): err= 0:" /tmp/out; then
			result "fio-$job-$what" pass
		else
			result "fio-$job-$what" fail "$(grep -E "^$job: \(groupid|^verify: " /tmp/out |
				head -n 2 | cut -c1-160 | tr '\n' '|')"
		fi
	done
	[ "$rc" = 0 ] || result "fio-$what-status" fail "fio exit status $rc"
	[ "$rc" = 0 ] || sed 's/^/  | /' /tmp/out | tail -n 20
	fio_summary
}

# grown_check BEFORE: the capacity, BEFORE sectors when the host was
# asked to grow the disk, grows (the host grows the disk and has the
# bridge send CONFIG_CHANGE_MSG; QEMU interrupts us with the new
# capacity; the wait is a hang guard only), and the new area takes writes
# and reads them back.
grown_check() {
	before=$1
	i=0
	while [ "$(cat /sys/block/vda/size)" = "$before" ] && [ $i -lt 1500 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	after=$(cat /sys/block/vda/size)
	check resize-capacity-grew test "$after" -gt "$before"
	echo "  resize: /sys/block/vda/size $before -> $after"
	check resize-new-area-write-verify fio --name=grown \
		--filename=/dev/vda --offset=$((before * 512)) --size=8m \
		--rw=write --bs=64k --direct=1 --ioengine=psync \
		--verify=crc32c --do_verify=1 --output=/tmp/grown
}

# (The bench's peers do not all pass a serial on.)
[ "$mode" = bench ] ||
	check serial test "$(cat /sys/block/vda/serial 2>&1)" = "$serial"

case "$mode" in
probe)
	# Where the time goes: program start-up in the nested guest.
	phase_start; fio --version; phase_end fio-version
	phase_start; fio --version; phase_end fio-version-again
	phase_start; /sbin/e2fsck -V; phase_end e2fsck-version
	phase_start; busybox true; phase_end busybox-true
	;;
rw)
	check writable test "$(cat /sys/block/vda/ro)" = 0
	# One read from every CPU: with num-queues > 1 each CPU has a queue.
	ncpu=$(grep -c '^processor' /proc/cpuinfo)
	c=0
	while [ "$ncpu" -gt 1 ] && [ $c -lt "$ncpu" ]; do
		check read-on-cpu$c taskset -c $c dd if=/dev/vda of=/dev/null bs=4k count=16 iflag=direct
		c=$((c + 1))
	done
	phase_start
	fio_check write-verify
	phase_end fio
	# The host SIGUSR1s the bridge now, while this disk is open and has
	# been read, and answers on the console once the counters are out.
	echo "VBB-E2E-STATS-REQUEST"
	read -r -t 300 ack </dev/console
	check stats-request-answered test "$ack" = VBB-E2E-GO

	# The write cache switch (VIRTIO_BLK_F_CONFIG_WCE): virtio_blk's
	# cache_type writes the config's writeback byte, which QEMU passes on
	# with SET_CONFIG, and the bridge to the module.  A write and read
	# at 96 MiB, which nothing else uses, with the cache writethrough.
	check cache-type-write-back test "$(cat /sys/block/vda/cache_type)" = "write back"
	check cache-type-to-write-through sh -c 'echo "write through" >/sys/block/vda/cache_type'
	check cache-type-write-through test "$(cat /sys/block/vda/cache_type)" = "write through"
	check writethrough-write-read sh -c 'dd if=/dev/urandom of=/tmp/wt bs=64k count=16 &&
		dd if=/tmp/wt of=/dev/vda bs=64k seek=1536 oflag=direct &&
		dd if=/dev/vda of=/tmp/wt2 bs=64k skip=1536 count=16 iflag=direct &&
		cmp /tmp/wt /tmp/wt2'
	check cache-type-to-write-back sh -c 'echo "write back" >/sys/block/vda/cache_type'

	phase_start
	check mkfs /sbin/mke2fs -q -F -t ext4 /dev/vda 64M
	check mount mount -t ext4 /dev/vda /mnt
	mkfiles() {
		dd if=/dev/urandom of=/mnt/random bs=64k count=64 &&
		mkdir /mnt/tree &&
		cp /usr/bin/fio /bin/busybox /sbin/mke2fs /mnt/tree/ &&
		i=0 &&
		while [ $i -lt 100 ]; do
			echo "small file $i" >/mnt/tree/small.$i || return 1
			i=$((i + 1))
		done &&
		(cd /mnt && find random tree -type f | sort | xargs sha256sum >SUMS) &&
		sync
	}
	check files mkfiles
	check umount umount /mnt
	check fsck /sbin/e2fsck -fn /dev/vda
	check remount-verify sh -c 'mount -o ro /dev/vda /mnt && cd /mnt && sha256sum -c -s SUMS && cd / && umount /mnt'
	phase_end ext4
	;;
reconnect)
	# Same bridge, new QEMU: what the first boot wrote is still there.
	if [ "$(arg vbb.hotplug)" = 1 ]; then
		# Memory is hot-plugged while reads run: the host plugs a DIMM
		# when asked and answers once the bridge has its region.
		phase_start
		# Direct reads in a loop until told to stop: running for all
		# of the hot-plug, however long it takes.
		rm -f /tmp/hp.stop /tmp/hp.err /tmp/hp.count
		(
			n=0
			while [ ! -e /tmp/hp.stop ]; do
				dd if=/dev/vda of=/dev/null bs=64k count=16 \
					iflag=direct 2>>/tmp/hp.err ||
					echo "read $n failed" >>/tmp/hp.err
				n=$((n + 1))
			done
			echo "$n" >/tmp/hp.count
		) &
		hp_pid=$!
		echo "VBB-E2E-HOTPLUG-REQUEST"
		read -r -t 300 ack </dev/console
		check hotplug-request-answered test "$ack" = VBB-E2E-GO
		check hotplug-reads-running kill -0 "$hp_pid"
		touch /tmp/hp.stop
		wait "$hp_pid"
		grep -v 'records\|copied' /tmp/hp.err >/tmp/hp.bad
		check hotplug-reads-no-error test ! -s /tmp/hp.bad
		echo "  hotplug: $(cat /tmp/hp.count) reads of 1 MiB during the hot-plug"
		phase_end hotplug
	fi
	phase_start
	fio_check reverify --verify_only
	check fsck /sbin/e2fsck -fn /dev/vda
	check files-verify sh -c 'mount -o ro /dev/vda /mnt && cd /mnt && sha256sum -c -s SUMS && cd / && umount /mnt'
	phase_end reconnect
	if [ "$(arg vbb.resize)" = 1 ]; then
		# Online resize: the host grows the disk and SIGHUPs the
		# bridge, then answers on the console.
		phase_start
		before=$(cat /sys/block/vda/size)
		echo "VBB-E2E-RESIZE-REQUEST $before"
		read -r -t 300 ack </dev/console
		check resize-request-answered test "$ack" = VBB-E2E-GO
		grown_check "$before"
		phase_end resize
	fi
	;;
ro)
	phase_start
	check read-only-flag test "$(cat /sys/block/vda/ro)" = 1
	check write-refused sh -c '! dd if=/dev/zero of=/dev/vda bs=4096 count=1 oflag=direct conv=fsync'
	fio_check reverify --verify_only
	check fsck /sbin/e2fsck -fn /dev/vda
	check files-verify sh -c 'mount -o ro /dev/vda /mnt && cd /mnt && sha256sum -c -s SUMS && cd / && umount /mnt'
	phase_end ro
	;;
libvirt)
	# Booted by libvirt from Documentation/virt/vhost-blk/
	# vhost-blk-bridge-domain.xml, on a bridge started as its systemd
	# units start it: the files of boot 1 are there, and a new region
	# takes writes and verifies.
	phase_start
	check writable test "$(cat /sys/block/vda/ro)" = 0
	check files-verify sh -c 'mount -o ro /dev/vda /mnt && cd /mnt && sha256sum -c -s SUMS && cd / && umount /mnt'
	check fio-write-verify fio --name=libvirt --filename=/dev/vda \
		--direct=1 --ioengine=libaio --bs=16k --iodepth=16 --size=8m \
		--offset=232m --rw=randwrite --verify=crc32c --randrepeat=1 \
		--do_verify=1
	phase_end libvirt
	# A host that will grow the disk under us, as a systemd host does
	# (the image grown, then systemctl reload of the bridge's instance),
	# says so with a file GROW on it: libvirt's console is a log file,
	# so there is no answer to read, only the capacity to watch.
	if mount -o ro /dev/vda /mnt 2>/dev/null; then
		grow=0
		[ -f /mnt/GROW ] && grow=1
		umount /mnt
		if [ "$grow" = 1 ]; then
			phase_start
			before=$(cat /sys/block/vda/size)
			echo "VBB-E2E-RESIZE-REQUEST $before"
			grown_check "$before"
			phase_end resize
		fi
	fi
	;;
migrate)
	# Live migration with I/O running: write a pattern, ask the host to
	# migrate, and re-verify it (reads into guest memory through vhost)
	# until the host says, on the console, that the migration is done;
	# by then this runs on the destination.  Then new writes there.
	mig="--name=mig --filename=/dev/vda --direct=1 --ioengine=libaio --bs=4k --iodepth=16 --size=8m --verify=crc32c --randrepeat=1 --rw=randwrite"
	phase_start
	check migrate-write fio $mig --offset=200m --do_verify=0
	fio $mig --offset=200m --verify_only --loops=100000 >/tmp/mig 2>&1 &
	fiopid=$!
	# fio takes seconds to start here: ask only once 64 reads are done.
	reads0=$(awk '{ print $1 }' /sys/block/vda/stat)
	i=0
	while [ "$(awk '{ print $1 }' /sys/block/vda/stat)" -lt $((reads0 + 64)) ] &&
	      [ $i -lt 1500 ] && kill -0 $fiopid 2>/dev/null; do
		sleep 0.2
		i=$((i + 1))
	done
	echo "VBB-E2E-MIGRATE-NOW"
	# One read, one timeout: busybox's read -t drops what it has read
	# when its time runs out mid-line, so a loop of short reads can lose
	# the answer's first bytes.  The host always answers.
	ack=
	read -r -t 600 ack </dev/console
	check migrate-answered test "$ack" = VBB-E2E-GO
	# Still reading now: the reads ran through the whole migration.
	check migrate-reads-throughout kill -0 $fiopid
	kill -INT $fiopid 2>/dev/null
	wait $fiopid
	if grep -q '^mig: (groupid=0, jobs=1): err= 0:' /tmp/mig &&
	   ! grep -q '^verify: ' /tmp/mig; then
		result migrate-verify-during pass "$(sed -n 's/.*READ: .*io=\([^ ,]*\).*/\1/p' /tmp/mig | head -n 1) read"
	else
		result migrate-verify-during fail "$(grep -E '^verify: |err=' /tmp/mig | head -n 2 | cut -c1-160 | tr '\n' '|')"
	fi
	phase_end migrate
	check migrate-verify-after fio $mig --offset=200m --verify_only
	check migrate-new-writes fio $mig --offset=216m --do_verify=1
	;;
demo)
	# make demo: 4 KiB random reads and writes at iodepth 1 and 16.
	phase_start
	if fio --output-format=terse --terse-version=3 /etc/fio-demo.job >/tmp/out 2>&1; then
		result fio-demo pass
	else
		result fio-demo fail "$(tail -n 3 /tmp/out | tr '\n' '|')"
	fi
	grep '^3;' /tmp/out | sed 's/^/VBB-E2E-FIO /'
	phase_end fio
	;;
bench)
	# make bench-guest: the host measures each job from READY to END.
	njobs=$(arg vbb.njobs)
	export VBB_NJOBS=${njobs:-1}
	export VBB_CPUS=0-$((VBB_NJOBS - 1))
	# Untimed: fio's first start (its pages, the disk's first reads)
	# would otherwise land in the first job's figures.
	VBB_RUNTIME=1 fio --output-format=terse --section=randread-qd1 \
		/etc/fio-bench.job >/dev/null 2>&1
	for job in $(arg vbb.jobs | tr ',' ' '); do
		echo "VBB-BENCH-READY $job"
		ack=
		read -r -t 600 ack </dev/console
		fio --output-format=terse --terse-version=3 --section="$job" \
			/etc/fio-bench.job >/tmp/bench.out 2>/tmp/bench.err
		rc=$?
		echo "VBB-BENCH-END $job $rc"
		ack=
		read -r -t 600 ack </dev/console
		[ "$rc" = 0 ] || sed 's/^/  | /' /tmp/bench.err | tail -n 10
		grep '^3;' /tmp/bench.out | sed "s/^/VBB-BENCH-TERSE $job /"
		if [ "$rc" = 0 ]; then
			result "fio-$job" pass
		else
			result "fio-$job" fail "fio exit status $rc"
		fi
	done
	;;
*)
	result mode fail "unknown vbb.mode '$mode'"
	;;
esac

sync
echo "VBB-E2E-DONE $(now)"
reboot -f
