/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cleanup.c: src/core/cleanup.h.  A cleanup runs on every way out of
 * its scope, a TAKE hands the value on and leaves nothing to release, and
 * closing keeps errno.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/core/buf.h"
#include "../../src/core/cleanup.h"

static int fd_open(int fd) {
    return fcntl(fd, F_GETFD) >= 0;
}

/* Opens a descriptor into *ret_seen; hands it on only when keep. */
static int open_then(bool keep, int *ret_seen) {
    PL_AUTO_CLOSE int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    *ret_seen = fd;
    if (!keep)
        return -1;
    return PL_TAKE_FD(fd);
}

static void test_fd_closed_unless_taken(void **state) {
    (void)state;
    int seen = -1;
    assert_int_equal(open_then(false, &seen), -1);
    assert_true(seen >= 0);
    assert_false(fd_open(seen));
    int kept = open_then(true, &seen);
    assert_int_equal(kept, seen);
    assert_true(fd_open(kept));
    close(kept);
}

static void test_close_keeps_errno(void **state) {
    (void)state;
    {
        PL_AUTO_CLOSE int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        errno = ENOSPC;
    }
    assert_int_equal(errno, ENOSPC);
}

static void test_take_ptr_and_json(void **state) {
    (void)state;
    char *out = NULL;
    json_t *kept = NULL;
    {
        PL_AUTO_FREE char *p = strdup("kept");
        PL_AUTO_FREE char *dropped = strdup("dropped"); /* freed here: ASan says if not */
        PL_AUTO_JSON json_t *j = json_pack("{s:i}", "n", 1);
        assert_non_null(dropped);
        out = PL_TAKE_PTR(p);
        assert_null(p);
        json_incref(j);
        kept = j;
    }
    assert_string_equal(out, "kept");
    assert_int_equal(kept->refcount, 1); /* the scope's reference went */
    json_decref(kept);
    free(out);
}

static void test_take_struct(void **state) {
    (void)state;
    struct pl_buf out = {0};
    {
        PL_CLEANUP(pl_buf_free) struct pl_buf b = {0};
        pl_buf_printf(&b, "%s", "bytes");
        out = PL_TAKE_STRUCT(b);
        assert_null(b.data);
        assert_int_equal(b.len, 0);
    }
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.data, "bytes", 5);
    pl_buf_free(&out);
}

struct thing {
    int *freed;
};

static void thing_free(struct thing *t) {
    if (t) {
        (*t->freed)++;
        free(t);
    }
}
PL_DEFINE_FREEP(struct thing, thing_free)

static void test_defined_freep(void **state) {
    (void)state;
    int freed = 0;
    {
        PL_CLEANUP(thing_freep) struct thing *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        t->freed = &freed;
        PL_CLEANUP(thing_freep) struct thing *none = NULL; /* NULL-safe */
        (void)none;
    }
    assert_int_equal(freed, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_closed_unless_taken), cmocka_unit_test(test_close_keeps_errno),
        cmocka_unit_test(test_take_ptr_and_json),      cmocka_unit_test(test_take_struct),
        cmocka_unit_test(test_defined_freep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
