/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plimsoll's implementation of the wasm2c runtime (wabt 1.0.32 ABI).
 *
 * Replaces wabt's wasm-rt-impl.c for the functions the generated QuickJS
 * module uses: traps, function-type registration, linear memory and the
 * funcref table.  See wasm_rt_host.h for why.  Notes:
 *
 *  - Linear memory: one mmap(PROT_NONE) reservation per process, reused by
 *    each (one-at-a-time) instance, with the first `pages` read/write.
 *    memory.grow mprotects more of it; past max_pages (lowered to the
 *    per-run cap) it fails, which guest malloc() sees as out of memory.
 *    Freeing an instance zeroes everything it could have written, so the
 *    next instance starts from all-zero memory exactly as with a fresh
 *    mapping, minus the page faults.  Bounds are checked by the generated
 *    code (WASM_RT_MEMCHECK_SIGNAL_HANDLER=0), so nothing relies on guard
 *    pages and no per-instance 8 GiB reservation exists.
 *  - Traps siglongjmp to pl_wasm_jump with the trap code.  A trap with no
 *    armed jump target is a worker bug and aborts.
 *  - wasm_rt_call_stack_depth is the global counter the generated
 *    FUNC_PROLOGUE increments; it must be reset after any jump because the
 *    matching FUNC_EPILOGUEs never ran.
 */
#include "wasm_rt_host.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

sigjmp_buf pl_wasm_jump;
volatile bool pl_wasm_jump_armed;

uint32_t wasm_rt_call_stack_depth;

/* Address space reserved for linear memory, and how much of it stays
 * resident (zeroed) between runs. */
#define PL_WASM_REGION_SIZE ((size_t)65535 * PL_WASM_PAGE_SIZE)
#define PL_WASM_KEEP_RESIDENT ((size_t)8 << 20)

static uint32_t g_cap_pages = 1;
static bool g_memory_failed;
static uint8_t *g_region;    /* the linear-memory reservation */
static bool g_region_in_use; /* an instance currently owns it */

struct func_type {
    uint32_t param_count;
    uint32_t result_count;
    wasm_rt_type_t *types; /* params then results */
};

static struct func_type *g_func_types;
static uint32_t g_func_type_count;

void pl_wasm_rt_set_memory_cap(uint32_t pages) {
    if (pages < 1)
        pages = 1;
    if (pages > 65535)
        pages = 65535;
    g_cap_pages = pages;
}

bool pl_wasm_rt_memory_failed(void) {
    return g_memory_failed;
}

void pl_wasm_rt_reset_after_jump(void) {
    wasm_rt_call_stack_depth = 0;
}

/* ---- wasm-rt.h API ------------------------------------------------------ */

void wasm_rt_init(void) {}

bool wasm_rt_is_initialized(void) {
    return true;
}

void wasm_rt_free(void) {
    for (uint32_t i = 0; i < g_func_type_count; i++)
        free(g_func_types[i].types);
    free(g_func_types);
    g_func_types = NULL;
    g_func_type_count = 0;
}

void wasm_rt_trap(wasm_rt_trap_t code) {
    if (!pl_wasm_jump_armed) {
        fprintf(stderr, "plimsoll-js-worker: wasm trap outside a guest call: %s\n",
                wasm_rt_strerror(code));
        abort();
    }
    pl_wasm_jump_armed = false;
    siglongjmp(pl_wasm_jump, (int)code);
}

const char *wasm_rt_strerror(wasm_rt_trap_t trap) {
    switch (trap) {
    case WASM_RT_TRAP_NONE: return "no error";
    case WASM_RT_TRAP_OOB: return "out-of-bounds memory access (or guest stack overflow)";
    case WASM_RT_TRAP_INT_OVERFLOW: return "integer overflow";
    case WASM_RT_TRAP_DIV_BY_ZERO: return "integer divide by zero";
    case WASM_RT_TRAP_INVALID_CONVERSION: return "invalid float to integer conversion";
    case WASM_RT_TRAP_UNREACHABLE: return "unreachable executed (engine abort)";
    case WASM_RT_TRAP_CALL_INDIRECT: return "invalid indirect call";
    case WASM_RT_TRAP_UNCAUGHT_EXCEPTION: return "uncaught wasm exception";
    case WASM_RT_TRAP_EXHAUSTION: return "call stack exhausted";
    }
    return "unknown trap";
}

uint32_t wasm_rt_register_func_type(uint32_t params, uint32_t results, ...) {
    uint32_t n = params + results;
    wasm_rt_type_t types[64];
    struct func_type *grown;
    va_list ap;

    if (n > 64) {
        fprintf(stderr, "plimsoll-js-worker: wasm function type too large\n");
        abort();
    }
    va_start(ap, results);
    for (uint32_t i = 0; i < n; i++)
        types[i] = (wasm_rt_type_t)va_arg(ap, int);
    va_end(ap);

    for (uint32_t i = 0; i < g_func_type_count; i++) {
        struct func_type *t = &g_func_types[i];
        if (t->param_count == params && t->result_count == results &&
            (n == 0 || memcmp(t->types, types, n * sizeof(types[0])) == 0))
            return i + 1;
    }

    grown = realloc(g_func_types, (g_func_type_count + 1) * sizeof(*grown));
    if (!grown)
        abort(); /* module init only: nothing sensible to do */
    g_func_types = grown;
    grown[g_func_type_count].param_count = params;
    grown[g_func_type_count].result_count = results;
    grown[g_func_type_count].types = malloc(n ? n * sizeof(types[0]) : 1);
    if (!grown[g_func_type_count].types)
        abort();
    if (n)
        memcpy(grown[g_func_type_count].types, types, n * sizeof(types[0]));
    return ++g_func_type_count;
}

/*
 * Reserve the process's linear-memory region once: 65535 pages (just
 * under 4 GiB) of PROT_NONE, MAP_NORESERVE address space.  Only one
 * instance exists at a time, so every instance reuses it.
 */
static int region_reserve(void) {
    void *p;

    if (g_region)
        return 0;
    p = mmap(NULL, PL_WASM_REGION_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
    if (p == MAP_FAILED)
        return -1;
    g_region = p;
    return 0;
}

void wasm_rt_allocate_memory(wasm_rt_memory_t *mem, uint32_t initial_pages, uint32_t max_pages) {
    memset(mem, 0, sizeof(*mem));
    if (max_pages > g_cap_pages)
        max_pages = g_cap_pages;
    g_memory_failed = false;
    if (g_region_in_use) {
        /* Two live instances in one process would share memory. */
        fprintf(stderr, "plimsoll-js-worker: second wasm memory requested\n");
        abort();
    }
    if (initial_pages > max_pages || region_reserve() < 0) {
        /* The cap is below what the module needs to start (or no address
         * space).  The caller's LOAD_DATA then traps (OOB) and the run is
         * reported as out of memory. */
        g_memory_failed = true;
        return;
    }
    if (initial_pages > 0 && mprotect(g_region, (size_t)initial_pages * PL_WASM_PAGE_SIZE,
                                      PROT_READ | PROT_WRITE) != 0) {
        g_memory_failed = true;
        return;
    }
    g_region_in_use = true;
    mem->data = g_region;
    mem->pages = initial_pages;
    mem->max_pages = max_pages;
    mem->size = initial_pages * PL_WASM_PAGE_SIZE;
}

uint32_t wasm_rt_grow_memory(wasm_rt_memory_t *mem, uint32_t delta) {
    uint32_t old_pages = mem->pages;
    uint64_t new_pages = (uint64_t)old_pages + delta;

    if (!mem->data || new_pages > mem->max_pages)
        return UINT32_MAX;
    if (delta == 0)
        return old_pages;
    if (mprotect(mem->data + (size_t)old_pages * PL_WASM_PAGE_SIZE,
                 (size_t)delta * PL_WASM_PAGE_SIZE, PROT_READ | PROT_WRITE) != 0)
        return UINT32_MAX;
    /* Publish the size only after the pages are accessible. */
    mem->pages = (uint32_t)new_pages;
    mem->size = (uint32_t)new_pages * PL_WASM_PAGE_SIZE;
    return old_pages;
}

/* Scrub [from, to) of the region as wasm_rt_free_memory does: zeroed and
 * kept below PL_WASM_KEEP_RESIDENT, returned to the kernel (and
 * inaccessible) above it. */
static int region_scrub(uint8_t *data, size_t from, size_t to) {
    size_t keep = to < PL_WASM_KEEP_RESIDENT ? to : PL_WASM_KEEP_RESIDENT;

    if (from < keep) {
        memset(data + from, 0, keep - from);
        from = keep;
    }
    if (to > from && (madvise(data + from, to - from, MADV_DONTNEED) != 0 ||
                      mprotect(data + from, to - from, PROT_NONE) != 0))
        return -1;
    return 0;
}

/*
 * Free = scrub.  Everything the instance could have written lies below
 * mem->size (accesses are bounds-checked against it and it never shrinks),
 * so zeroing [0, size) restores the all-zero state of a fresh mapping.
 * The first PL_WASM_KEEP_RESIDENT bytes are zeroed with memset and stay
 * resident and read/write (the next instance then takes no page faults
 * there, otherwise most of a run's cost; re-protecting them would cost
 * more still, in TLB flushes).  The guest still cannot
 * touch them beyond its current size: every access is bounds-checked
 * against mem->size.  The rest is returned to the kernel with
 * MADV_DONTNEED (reads back as zero) and set back to PROT_NONE.
 */
void wasm_rt_free_memory(wasm_rt_memory_t *mem) {
    if (mem->data) {
        if (region_scrub(mem->data, 0, mem->size) < 0) {
            /* Cannot guarantee zeroed memory: start over. */
            munmap(g_region, PL_WASM_REGION_SIZE);
            g_region = NULL;
        }
        g_region_in_use = false;
    }
    memset(mem, 0, sizeof(*mem));
}

/* Granularity of an image's zero and non-zero spans. */
#define PL_WASM_SPAN_UNIT 4096u

static bool all_zero(const uint8_t *p, size_t len) {
    return p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
}

int pl_wasm_image_take(struct pl_wasm_image *img, const wasm_rt_memory_t *mem) {
    size_t size = (size_t)mem->pages * PL_WASM_PAGE_SIZE, units = size / PL_WASM_SPAN_UNIT;

    memset(img, 0, sizeof(*img));
    img->data = malloc(size ? size : 1);
    img->spans = calloc(units ? units : 1, sizeof(*img->spans)); /* at most one per unit */
    if (!img->data || !img->spans) {
        free(img->data);
        free(img->spans);
        memset(img, 0, sizeof(*img));
        return -1;
    }
    memcpy(img->data, mem->data, size);
    img->pages = mem->pages;
    for (size_t u = 0; u < units; u++) {
        uint32_t off = (uint32_t)(u * PL_WASM_SPAN_UNIT);
        bool zero = all_zero(img->data + off, PL_WASM_SPAN_UNIT);
        struct pl_wasm_span *last = img->n_spans ? &img->spans[img->n_spans - 1] : NULL;

        if (last && last->zero == zero)
            last->len += PL_WASM_SPAN_UNIT;
        else
            img->spans[img->n_spans++] = (struct pl_wasm_span){off, PL_WASM_SPAN_UNIT, zero};
    }
    return 0;
}

/*
 * Everything the instance could have written lies below mem->size, as for
 * wasm_rt_free_memory: [0, image) is overwritten with the image (its zero
 * spans with memset, which writes without reading), the rest scrubbed.
 * The image's own pages stay read/write (they lie below the resident
 * part, or were made accessible when the memory grew to them).
 */
int pl_wasm_rt_memory_restore(wasm_rt_memory_t *mem, const struct pl_wasm_image *img) {
    size_t used = mem->size, size = (size_t)img->pages * PL_WASM_PAGE_SIZE;

    if (!mem->data || !g_region_in_use)
        return -1;
    if (used < size) {
        if (mprotect(mem->data + used, size - used, PROT_READ | PROT_WRITE) != 0)
            return -1;
    } else if (region_scrub(mem->data, size, used) < 0) {
        return -1;
    }
    for (uint32_t i = 0; i < img->n_spans; i++) {
        const struct pl_wasm_span *sp = &img->spans[i];

        if (sp->zero)
            memset(mem->data + sp->off, 0, sp->len);
        else
            memcpy(mem->data + sp->off, img->data + sp->off, sp->len);
    }
    mem->pages = img->pages;
    mem->size = (uint32_t)size;
    return 0;
}

void pl_wasm_rt_memory_set_max(wasm_rt_memory_t *mem, uint32_t pages, uint32_t module_max) {
    mem->max_pages = pages < module_max ? pages : module_max;
}

void wasm_rt_allocate_funcref_table(wasm_rt_funcref_table_t *table, uint32_t elements,
                                    uint32_t max_elements) {
    table->size = 0;
    table->max_size = max_elements;
    table->data = calloc(elements ? elements : 1, sizeof(wasm_rt_funcref_t));
    if (!table->data)
        wasm_rt_trap(WASM_RT_TRAP_EXHAUSTION); /* inside the instantiate jump */
    table->size = elements;
}

void wasm_rt_free_funcref_table(wasm_rt_funcref_table_t *table) {
    free(table->data);
    table->data = NULL;
    table->size = 0;
}

uint32_t wasm_rt_grow_funcref_table(wasm_rt_funcref_table_t *table, uint32_t delta,
                                    wasm_rt_funcref_t init) {
    /* The QuickJS module never executes table.grow; refuse rather than
     * call realloc() where a deadline signal could interrupt it. */
    (void)table;
    (void)delta;
    (void)init;
    return UINT32_MAX;
}
