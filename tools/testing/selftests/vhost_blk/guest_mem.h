/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Guest memory model for the vhost-blk tests: one anonymous mapping that the
 * "guest" sees at a guest-physical base unrelated to its virtual address,
 * plus a bump allocator (with mark/release) and a fixed-size slab on top.
 */
#ifndef VBLK_GUEST_MEM_H
#define VBLK_GUEST_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kselftest.h"		/* __printf, __noreturn */

#define GUEST_MEM_DEFAULT_SIZE	(64UL << 20)
#define GUEST_MEM_DEFAULT_GPA	0x40000000ULL

struct guest_mem {
	uint8_t *va;		/* start of the mapping */
	size_t size;		/* bytes */
	uint64_t gpa;		/* guest-physical address of va[0] */
	size_t brk;		/* bump allocator: first free offset */
};

/* Map @size bytes (0: default) at guest-physical @gpa (0: default). */
int guest_mem_init(struct guest_mem *gm, size_t size, uint64_t gpa);
void guest_mem_destroy(struct guest_mem *gm);

/*
 * Zeroed allocation of @size bytes aligned to @align (a power of two, 0
 * means 64).  Returns NULL (and reports) when the region is exhausted.
 */
void *guest_alloc(struct guest_mem *gm, size_t size, size_t align);

/* Everything allocated after guest_mark() is freed by guest_release(). */
static inline size_t guest_mark(const struct guest_mem *gm)
{
	return gm->brk;
}

static inline void guest_release(struct guest_mem *gm, size_t mark)
{
	if (mark <= gm->brk)
		gm->brk = mark;
}

static inline bool guest_contains(const struct guest_mem *gm, uint64_t gpa,
				  uint64_t len)
{
	return gpa >= gm->gpa && len <= gm->size &&
	       gpa - gm->gpa <= gm->size - len;
}

/* Guest-physical address of a pointer into the region. */
static inline uint64_t gpa_of(const struct guest_mem *gm, const void *p)
{
	return gm->gpa + (uint64_t)((const uint8_t *)p - gm->va);
}

/* Pointer for a guest-physical address, NULL outside the region. */
static inline void *ptr_of(const struct guest_mem *gm, uint64_t gpa)
{
	if (!guest_contains(gm, gpa, 0))
		return NULL;
	return gm->va + (gpa - gm->gpa);
}

/*
 * Slab of @count objects of @size bytes carved once from the region; get
 * and put are O(1) and never touch the bump allocator again.
 */
struct guest_slab {
	uint8_t *base;
	size_t size;		/* object stride */
	unsigned int count;
	unsigned int nfree;
	void **free;		/* stack of free objects (host heap) */
};

int guest_slab_init(struct guest_slab *slab, struct guest_mem *gm,
		    size_t size, size_t align, unsigned int count);
void guest_slab_destroy(struct guest_slab *slab);
void *guest_slab_get(struct guest_slab *slab);
void guest_slab_put(struct guest_slab *slab, void *obj);

/* Diagnostics go to stderr, prefixed "# " so they never break TAP. */
__printf(1, 2) void guest_log(const char *fmt, ...);

#endif /* VBLK_GUEST_MEM_H */
