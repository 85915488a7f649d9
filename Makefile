# SPDX-License-Identifier: GPL-2.0
#
# vhost-blk: top-level build.  See README.md.
#
#   make            deps (once), vhost_blk.ko and every userspace tool
#   make deps       install packages and unpack kernel sources (idempotent)
#   make module     vhost_blk.ko only
#   make tools      userspace only
#   make debug-kernel  the 7.3 KASAN + lockdep test kernel (cached, built once)
#   make module-debug  vhost_blk.ko for it, in build/module-debug
#   make module-6.1 vhost_blk.ko for Debian's 6.1 LTS kernel, in
#                   build/module-6.1
#   make module-7.3 vhost_blk.ko for Linux 7.3 (Debian 13's), built in the
#                   Debian 13 build root, in build/module-7.3
#   make check      build, boot the test VMs (7.3, 6.12 and 6.1 stock; the
#                   7.3 debug kernel), run every selftest; the series check
#   make patches    the patch series against linux-source-7.3, in
#                   build/patches/series (patches-check: and check it)
#   make fuzz-debug the hostile-guest suite with 10^6 fuzzer requests per
#                   backend on the debug kernel (hours)
#   make fuzz-bridge the bridge's libFuzzer target, 10^7 inputs (about an
#                   hour; make check runs 10^5)
#   make coverage   line coverage of the bridge: unit tests and fuzz corpus;
#                   and line and branch coverage of blk.c from the last
#                   make check's debug VM (its module is built for gcov)
#   make bench      the benchmark matrix in the test VM (bench/results/)
#   make bench-guest  a Linux guest's fio through QEMU 10's virtio-blk,
#                   qemu-storage-daemon 10 and vhost-blk (bench/results-guest/;
#                   BENCH_GUEST_ARGS=--quick: the short harness run)
#   make demo       a guest on vhost-blk-bridge: its fio IOPS and latency
#   make demo-migrate  live migration between two test VMs sharing an
#                   NVMe/TCP disk (about 15 min)
#   make checkpatch kernel code through checkpatch.pl --strict
#   make deb        vhost-blk-dkms and vhost-blk-tools .debs in build/deb
#   make package-test  build them, install them in the test VM, test them
#   make intree     drivers/vhost/ and the kselftests in a 7.3 kernel tree
#   make clean

TOP   := $(CURDIR)
BUILD ?= $(TOP)/build
export BUILD

-include $(BUILD)/kernel.env
export KREL KSRC KREL_61 KSRC_61

KDIR  := /usr/src/linux-headers-$(KREL)
SELFTEST_DIR := tools/testing/selftests/vhost_blk
# The project's own CI: make check's runner, the test VM, the package test.
CI_DIR := tools/testing/vhost-blk-ci
BRIDGE_DIR := tools/vhost-blk-bridge
BENCH_DIR := tools/vhost-blk-bench

# Userspace: C11, warnings are errors, 6.12 uapi headers from linux-source
# (the host's linux-libc-dev is older), ours first.
USER_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror \
	-I$(TOP)/include/uapi -I$(KSRC)/include/uapi
export USER_CFLAGS

KERNEL_SRCS := drivers/vhost/blk.c drivers/vhost/blk_trace.h \
	include/uapi/linux/vhost_blk.h
# The backport layer: out-of-tree builds for kernels before 7.3 only.
BACKPORT_SRCS := backport/backport.h backport/include/linux/sched/vhost_task.h

.PHONY: all deps module tools check check-long bench bench-guest demo demo-migrate checkpatch intree clean \
	debug-kernel module-debug module-6.1 module-7.3 fuzz-debug patches patches-check fuzz-bridge coverage deb \
	package-test package-test-trixie

all: module module-7.3 tools

$(BUILD)/kernel.env: scripts/deps.sh
	bash scripts/deps.sh
	touch $@

deps:
	bash scripts/deps.sh

module: $(BUILD)/kernel.env
	$(MAKE) -C $(KDIR) M=$(TOP) KSRC=$(KSRC) modules

# The debug kernel: scripts/debug-kernel.sh builds it once per machine into
# /var/cache/vhost-blk/debug-kernel (see --help there).
debug-kernel: $(BUILD)/kernel.env
	@bash scripts/debug-kernel.sh >/dev/null

# vhost_blk.ko against the debug kernel's tree.  M= builds put their objects
# next to the sources, so it builds from a copy in $(DEBUG_MOD) and the
# stock module in the top directory is left alone.  lockdep must be on in
# it: a lockdep_assert_held() calls lock_is_held_type() only then.
#
# copy-module-src DIR: Kbuild and the module's sources into DIR (cp -p:
# unchanged files keep their times, so kbuild rebuilds only what changed).
define copy-module-src
	@mkdir -p $(1)/drivers/vhost $(1)/include/uapi/linux
	@cp -p Kbuild $(1)/
	@cp -p drivers/vhost/blk.c drivers/vhost/blk_trace.h $(1)/drivers/vhost/
	@cp -p include/uapi/linux/vhost_blk.h $(1)/include/uapi/linux/
	@cp -p --parents $(BACKPORT_SRCS) $(1)/
endef

DEBUG_MOD := $(BUILD)/module-debug
module-debug: debug-kernel
	$(call copy-module-src,$(DEBUG_MOD))
	@dk=$$(bash scripts/debug-kernel.sh --path) && \
	$(MAKE) -C $$dk/src O=$$dk/obj M=$(DEBUG_MOD) KSRC=$$dk/src \
		VHOST_BLK_GCOV=1 modules
	@test "$$(nm -u $(DEBUG_MOD)/vhost_blk.ko | grep -cw lock_is_held_type)" -gt 0 || \
		{ echo "$(DEBUG_MOD)/vhost_blk.ko does not call lock_is_held_type: lockdep is off in its build" >&2; exit 1; }
	@test "$$(nm -u $(DEBUG_MOD)/vhost_blk.ko | grep -cw __gcov_init)" -gt 0 || \
		{ echo "$(DEBUG_MOD)/vhost_blk.ko has no gcov counters: no CONFIG_GCOV_KERNEL in the debug kernel?" >&2; exit 1; }

# vhost_blk.ko for Debian 12's default kernel, 6.1 LTS (KREL_61 from
# deps.sh), against its headers and its own vhost.h, from a copy in
# $(MOD_61): the backport layer (backport/) fills in what 6.1 lacks.
MOD_61 := $(BUILD)/module-6.1
module-6.1: $(BUILD)/kernel.env
	$(call copy-module-src,$(MOD_61))
	$(MAKE) -C /usr/src/linux-headers-$(KREL_61) M=$(MOD_61) \
		KSRC=$(KSRC_61) modules

# vhost_blk.ko for Linux 7.3, the kernel blk.c is written to (KREL_73 from
# scripts/mainline.sh), built by Debian 13's gcc-14 and kbuild in the build
# root KROOT_73, against 7.3's headers and its vhost.h, from a copy in
# $(MOD_73).  No backport layer: Kbuild adds it only before 7.3.
MOD_73 := $(BUILD)/module-7.3
module-7.3: $(BUILD)/kernel.env
	$(call copy-module-src,$(MOD_73))
	bash scripts/in-root.sh $(KROOT_73) $(BUILD) -- \
		make -C /usr/src/linux-headers-$(KREL_73) M=/build/module-7.3 \
		KSRC=/build/linux-source-7.3 modules

tools: $(BUILD)/kernel.env
	$(MAKE) -C $(SELFTEST_DIR) OUT=$(BUILD)/selftests
	$(MAKE) -C $(BRIDGE_DIR) OUT=$(BUILD)/tools all $(BUILD)/tools/vhost-blk-bridge-test
	$(MAKE) -C $(BENCH_DIR) OUT=$(BUILD)/vhost-blk-bench

# The builds are run_check.sh's first results: one that fails is a failed
# result, and the summary line is printed all the same.
# A failed set-up (scripts/deps.sh) is a result too: the summary line is
# printed all the same.
# make check-long: the same with every pass on every backend, the e2e
# live migration, make intree and three times the debug fuzzing
# (run_check.sh --long; not timed as a whole yet: what it adds took about
# 25 min of VM time in the runs before the cuts).
check check-long:
	@$(MAKE) --no-print-directory $(BUILD)/kernel.env || { \
		echo "not ok 1 - make deps: scripts/deps.sh failed (its output is above)"; \
		echo "0 passed, 1 failed"; exit 1; }
	bash $(CI_DIR)/run_check.sh --build "all module-6.1 deb" \
		--build-behind module-debug $(if $(filter check-long,$@),--long)

# The long fuzz run: FUZZ_DEBUG_REQUESTS (default 10^6) fuzzer requests per
# backend on the debug kernel, plus the rest of the hostile-guest suite and
# the kmemleak and lockdep checks.  Results in build/vm-out/fuzz-debug.
FUZZ_DEBUG_REQUESTS ?= 1000000
fuzz-debug: all module-debug
	bash $(CI_DIR)/run_check.sh --fuzz-debug $(FUZZ_DEBUG_REQUESTS)

BRIDGE_FUZZ_RUNS ?= 10000000
fuzz-bridge: $(BUILD)/kernel.env
	$(MAKE) -C $(BRIDGE_DIR) fuzz FUZZ_RUNS=$(BRIDGE_FUZZ_RUNS)

KCOV_GCDA := $(BUILD)/vm-out/selftests/debug/gcov
coverage: $(BUILD)/kernel.env
	$(MAKE) -s -C $(BRIDGE_DIR) coverage
	@if [ -s $(KCOV_GCDA)/blk.gcda ]; then \
		bash tools/testing/vhost-blk-ci/kernel_coverage.sh $(KCOV_GCDA) \
			$(BUILD)/module-debug $(BUILD)/coverage-kernel; \
	else \
		echo "blk.c: no gcov counts in $(KCOV_GCDA): make check's debug VM collects them"; \
	fi

bench: all
	bash scripts/deps.sh --ceph
	bash scripts/qemu10.sh
	bash $(BENCH_DIR)/run-bench.sh

bench-guest: all
	bash $(BENCH_DIR)/guest-bench.sh $(BENCH_GUEST_ARGS)

demo: all
	bash $(BRIDGE_DIR)/e2e/demo.sh

demo-migrate: all
	bash $(BRIDGE_DIR)/e2e/two-host.sh

# Errors fail the target.  Trace headers get the usual CHECKs on the
# TRACE_EVENT() layout, which every kernel trace header shares.
checkpatch: $(BUILD)/kernel.env
	@perl $(KSRC_73)/scripts/checkpatch.pl --strict --no-tree --terse \
		--ignore FILE_PATH_CHANGES -f $(KERNEL_SRCS) | tee $(BUILD)/checkpatch.log
	@! grep -q ': ERROR:' $(BUILD)/checkpatch.log

# The series (scripts/patches.sh): build/patches/series, a git
# format-patch series with a cover letter against linux-source-7.3;
# patches-check also applies it and builds and checkpatches every patch.
patches: $(BUILD)/kernel.env
	bash scripts/patches.sh

patches-check: $(BUILD)/kernel.env
	bash scripts/patches.sh --check

# Our files applied to linux-source-7.3 in $(BUILD)/intree: drivers/vhost/
# built with O= and in the tree, the kselftests run the kernel's way in the
# test VM (which loads the out-of-tree module).
intree: module-7.3
	bash scripts/intree.sh

# The Debian packages (debian/), built by dpkg-buildpackage from a copy of
# the source tree (tracked and untracked files, not the ignored ones) in
# $(DEB_DIR)/src: it writes the .debs next to the tree, in $(DEB_DIR).
DEB_DIR := $(BUILD)/deb
deb: $(BUILD)/kernel.env
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/src
	git ls-files -z -co --exclude-standard | \
		tar --null -T - -cf - | tar -xf - -C $(DEB_DIR)/src
	cd $(DEB_DIR)/src && KSRC=$(KSRC) dpkg-buildpackage -b -us -uc -j1 \
		>$(DEB_DIR)/build.log 2>&1 || \
		{ tail -n 40 $(DEB_DIR)/build.log >&2; exit 1; }
	@ls -1 $(DEB_DIR)/*.deb

# The packages installed, used and purged in the test VM (stock kernel,
# no module loaded by the runner): package_test.sh.
package-test: deb tools
	bash $(CI_DIR)/vm/run-vm.sh --no-module --timeout 1800 \
		--out $(BUILD)/vm-out/package -- \
		bash $(CI_DIR)/package_test.sh \
		--tap $(BUILD)/vm-out/package/package.tap $(DEB_DIR)

# The packages on a real Debian 13 machine (systemd as PID 1), through a
# reboot and a kernel upgrade to 7.3: trixie/run.sh, which makes the
# machine's image the first time (scripts/trixie-machine.sh).
package-test-trixie: deb tools
	bash $(CI_DIR)/trixie/run.sh --out $(BUILD)/vm-out/trixie $(DEB_DIR)

clean:
	-$(MAKE) -C $(KDIR) M=$(TOP) clean
	rm -rf $(DEBUG_MOD) $(MOD_61)
	-$(MAKE) -C $(SELFTEST_DIR) OUT=$(BUILD)/selftests clean
	-$(MAKE) -C $(BRIDGE_DIR) OUT=$(BUILD)/tools clean
	-$(MAKE) -C $(BENCH_DIR) OUT=$(BUILD)/vhost-blk-bench clean
