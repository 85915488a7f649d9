// SPDX-License-Identifier: GPL-2.0
/*
 * Guest memory model: mapping, bump allocator, slab.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "guest_mem.h"

void guest_log(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int guest_mem_init(struct guest_mem *gm, size_t size, uint64_t gpa)
{
	void *va;

	memset(gm, 0, sizeof(*gm));
	if (!size)
		size = GUEST_MEM_DEFAULT_SIZE;
	if (!gpa)
		gpa = GUEST_MEM_DEFAULT_GPA;
	size = (size + 4095) & ~4095UL;

	va = mmap(NULL, size, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (va == MAP_FAILED) {
		int err = errno;

		guest_log("guest_mem: mmap %zu bytes: %s", size, strerror(err));
		return -err;
	}
	gm->va = va;
	gm->size = size;
	gm->gpa = gpa;
	gm->brk = 0;
	return 0;
}

void guest_mem_destroy(struct guest_mem *gm)
{
	if (gm->va)
		munmap(gm->va, gm->size);
	memset(gm, 0, sizeof(*gm));
}

void *guest_alloc(struct guest_mem *gm, size_t size, size_t align)
{
	size_t off;

	if (!align)
		align = 64;
	if (align & (align - 1)) {
		guest_log("%s: alignment %zu is not a power of two", __func__, align);
		return NULL;
	}
	off = (gm->brk + align - 1) & ~(align - 1);
	if (off > gm->size || size > gm->size - off) {
		guest_log("%s: %zu bytes (align %zu) do not fit: %zu of %zu used",
			  __func__, size, align, gm->brk, gm->size);
		return NULL;
	}
	gm->brk = off + size;
	memset(gm->va + off, 0, size);
	return gm->va + off;
}

int guest_slab_init(struct guest_slab *slab, struct guest_mem *gm,
		    size_t size, size_t align, unsigned int count)
{
	unsigned int i;

	memset(slab, 0, sizeof(*slab));
	if (!align)
		align = 64;
	size = (size + align - 1) & ~(align - 1);
	if (!size || !count)
		return -EINVAL;
	slab->free = calloc(count, sizeof(*slab->free));
	if (!slab->free)
		return -ENOMEM;
	slab->base = guest_alloc(gm, size * count, align);
	if (!slab->base) {
		free(slab->free);
		slab->free = NULL;
		return -ENOMEM;
	}
	slab->size = size;
	slab->count = count;
	for (i = 0; i < count; i++)
		slab->free[i] = slab->base + (size_t)(count - 1 - i) * size;
	slab->nfree = count;
	return 0;
}

void guest_slab_destroy(struct guest_slab *slab)
{
	free(slab->free);
	memset(slab, 0, sizeof(*slab));
}

void *guest_slab_get(struct guest_slab *slab)
{
	if (!slab->nfree)
		return NULL;
	return slab->free[--slab->nfree];
}

void guest_slab_put(struct guest_slab *slab, void *obj)
{
	if (obj && slab->nfree < slab->count)
		slab->free[slab->nfree++] = obj;
}
