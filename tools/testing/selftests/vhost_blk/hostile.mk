# SPDX-License-Identifier: GPL-2.0
#
# The hostile-guest programs: vhost_blk_hostile_test (kselftest harness)
# and vhost_blk_fuzz (standalone fuzzer and data-integrity stress), both
# on libvblkguest.a plus hostile.c.  Included at the end of the Makefile,
# whose OUT, OBJDIR, LIB, CFLAGS and LDFLAGS it uses; hostile.sh runs them.

HOSTILE_SRCS	:= vhost_blk_hostile_test.c vhost_blk_fuzz.c hostile.c
HOSTILE_OBJS	:= $(HOSTILE_SRCS:%.c=$(OBJDIR)/%.o)
HOSTILE_PROGS	:= $(OUT)/vhost_blk_hostile_test $(OUT)/vhost_blk_fuzz

.PHONY: hostile hostile-clean

all: $(HOSTILE_PROGS)
hostile: $(HOSTILE_PROGS)

# As for the other harness tests (see the Makefile).
$(OBJDIR)/vhost_blk_hostile_test.o: CFLAGS += -Wno-unused-parameter -Wno-clobbered

$(HOSTILE_PROGS): $(OUT)/%: $(OBJDIR)/%.o $(OBJDIR)/hostile.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^

clean: hostile-clean
hostile-clean:
	rm -f $(HOSTILE_OBJS) $(HOSTILE_OBJS:.o=.d) $(HOSTILE_PROGS)

-include $(HOSTILE_OBJS:.o=.d)
