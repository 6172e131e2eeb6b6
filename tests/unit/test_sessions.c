/* SPDX-License-Identifier: Apache-2.0 */
/* test_sessions.c: the daemon's session table (src/server/sessions.c)
 * over a provider that keeps sessions in memory and counts what it was
 * asked to do: ids, owners, admission held from open to end, the ended
 * reason, the one-call-at-a-time turn, idle pause and resume, lifetime,
 * shutdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/clock.h"
#include "../../src/server/sessions.h"

/* ---- a provider that keeps sessions in memory ------------------------------ */

struct fake {
    atomic_int opened, closed, paused, resumed;
    atomic_bool fail_open, fail_resume;
    atomic_int pausing;  /* pauses begun */
    atomic_int pause_ms; /* how long a pause takes */
    atomic_int in_run;   /* calls running now: never above 1 per session */
    atomic_int max_in_run;
};

static struct fake F;

static void fake_info(void *state, struct pl_provider_info *ret) {
    (void)state;
    *ret = (struct pl_provider_info){.tier = PL_TIER_CONTAINER,
                                     .runtime = "fake",
                                     .session = {.supported = true, .languages = {"python"}}};
}

static int fake_open(void *state, const struct pl_session_open *o, void **ret,
                     struct pl_error *err) {
    (void)state;
    if (atomic_load(&F.fail_open))
        return pl_error_set(err, PL_REASON_INTERNAL, "the engine said no");
    assert_non_null(o->tag);
    atomic_fetch_add(&F.opened, 1);
    *ret = calloc(1, 1);
    return 0;
}

static int fake_session_run(void *state, void *session, const struct pl_run_ctx *ctx,
                            const struct pl_run_request *req, struct pl_run_result *ret,
                            struct pl_error *err) {
    (void)state, (void)session, (void)ctx, (void)req, (void)ret, (void)err;
    return 0;
}

static int fake_pause(void *state, void *session) {
    (void)state, (void)session;
    atomic_fetch_add(&F.pausing, 1);
    pl_sleep_ns(PL_MS((uint64_t)atomic_load(&F.pause_ms)));
    atomic_fetch_add(&F.paused, 1);
    return 0;
}

static int fake_resume(void *state, void *session, struct pl_error *err) {
    (void)state, (void)session;
    if (atomic_load(&F.fail_resume))
        return pl_error_set(err, PL_REASON_INTERNAL, "gone");
    atomic_fetch_add(&F.resumed, 1);
    return 0;
}

static void fake_close(void *state, void *session) {
    (void)state;
    atomic_fetch_add(&F.closed, 1);
    free(session);
}

static int fake_run(void *state, const struct pl_run_ctx *ctx, const struct pl_run_request *req,
                    struct pl_run_result *ret, struct pl_error *err) {
    (void)state, (void)ctx, (void)req, (void)ret, (void)err;
    return 0;
}

static const struct pl_provider_ops fake_ops = {
    .name = "fake",
    .max_tier = PL_TIER_CONTAINER,
    .info = fake_info,
    .run = fake_run,
    .session_open = fake_open,
    .session_run = fake_session_run,
    .session_pause = fake_pause,
    .session_resume = fake_resume,
    .session_close = fake_close,
};

struct fixture {
    struct pl_provider prov;
    struct pl_admission *adm;
    struct pl_sessions *s;
};

static struct fixture *fixture_new(unsigned max, unsigned lifetime_s, unsigned idle_s,
                                   unsigned capacity) {
    memset(&F, 0, sizeof(F));
    struct fixture *f = calloc(1, sizeof(*f));
    f->prov.ops = &fake_ops;
    fake_info(NULL, &f->prov.info);
    struct pl_admission_limits al = {
        .capacity = capacity, .per_key = capacity, .rate_per_min = 6000, .burst = 100};
    assert_int_equal(pl_admission_new(&al, NULL, NULL, &f->adm), 0);
    struct pl_sessions_limits sl = {
        .max_sessions = max, .lifetime_s = lifetime_s, .idle_s = idle_s, .memory_mb = 64};
    struct pl_error err = {0};
    assert_int_equal(pl_sessions_new(&sl, &f->prov, f->adm, &f->s, &err), 0);
    return f;
}

static void fixture_free(struct fixture *f) {
    pl_sessions_free(f->s);
    pl_admission_free(f->adm);
    free(f);
}

static void open_ok(struct fixture *f, const char *who, char id[PL_SESSION_ID_LEN + 1]) {
    struct pl_error err = {0};
    const char *none[] = {NULL};
    assert_int_equal(pl_sessions_open(f->s, who, none, id, &err), 0);
}

/* Wait (at most 5 s) until counter reaches at least n. */
static void wait_count(atomic_int *counter, int n) {
    uint64_t until = pl_deadline_in_ms(5000);
    while (atomic_load(counter) < n && pl_now_ns() < until)
        pl_sleep_ns(PL_MS(20));
    assert_true(atomic_load(counter) >= n);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_ids_are_long_random_hex(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 600, 600, 8);
    char a[PL_SESSION_ID_LEN + 1], b[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", a);
    open_ok(f, "alice", b);
    assert_int_equal(strlen(a), PL_SESSION_ID_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), PL_SESSION_ID_LEN);
    assert_string_not_equal(a, b);
    assert_int_equal(pl_sessions_open_count(f->s), 2);
    fixture_free(f);
    assert_int_equal(atomic_load(&F.closed), 2); /* shutdown ended both */
}

static void test_another_callers_id_is_not_found(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 600, 600, 8);
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    struct pl_session *ss = NULL;
    struct pl_error err = {0};
    assert_int_equal(pl_sessions_begin(f->s, "mallory", id, &ss, NULL, 0, &err), -1);
    assert_int_equal(err.reason, PL_REASON_NOT_FOUND);
    err = (struct pl_error){0};
    assert_int_equal(pl_sessions_close(f->s, "mallory", id, &err), -1);
    assert_int_equal(err.reason, PL_REASON_NOT_FOUND);
    /* a wrong length, a near miss */
    err = (struct pl_error){0};
    assert_int_equal(pl_sessions_begin(f->s, "alice", "abc", &ss, NULL, 0, &err), -1);
    assert_int_equal(err.reason, PL_REASON_NOT_FOUND);
    char near[PL_SESSION_ID_LEN + 1];
    memcpy(near, id, sizeof(near));
    near[10] = near[10] == 'a' ? 'b' : 'a';
    err = (struct pl_error){0};
    assert_int_equal(pl_sessions_begin(f->s, "alice", near, &ss, NULL, 0, &err), -1);
    assert_int_equal(err.reason, PL_REASON_NOT_FOUND);
    /* the owner still gets it */
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), 0);
    assert_non_null(pl_session_handle(ss));
    assert_string_equal(pl_session_previous_digest(ss), "");
    pl_sessions_done(f->s, ss, "d1", NULL);
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), 0);
    assert_string_equal(pl_session_previous_digest(ss), "d1"); /* records chain */
    pl_sessions_done(f->s, ss, NULL, NULL);
    fixture_free(f);
}

static void test_admission_is_held_from_open_to_end(void **state) {
    (void)state;
    struct fixture *f = fixture_new(4, 600, 600, 2);
    char a[PL_SESSION_ID_LEN + 1], b[PL_SESSION_ID_LEN + 1], c[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", a);
    open_ok(f, "alice", b);
    assert_int_equal(pl_admission_in_flight(f->adm), 2);
    struct pl_error err = {0};
    const char *none[] = {NULL};
    assert_int_equal(pl_sessions_open(f->s, "alice", none, c, &err), -1);
    assert_int_equal(err.reason, PL_REASON_AT_CAPACITY); /* admission's, not the table's */
    assert_int_equal(pl_sessions_close(f->s, "alice", a, &err), 0);
    assert_int_equal(pl_admission_in_flight(f->adm), 1);
    open_ok(f, "alice", c);
    fixture_free(f);
}

static void test_the_table_has_a_cap(void **state) {
    (void)state;
    struct fixture *f = fixture_new(1, 600, 600, 8);
    char a[PL_SESSION_ID_LEN + 1], b[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", a);
    struct pl_error err = {0};
    const char *none[] = {NULL};
    assert_int_equal(pl_sessions_open(f->s, "bob", none, b, &err), -1);
    assert_int_equal(err.reason, PL_REASON_AT_CAPACITY);
    assert_non_null(strstr(err.message, "SANDBOX_MAX_SESSIONS=1"));
    assert_int_equal(pl_admission_in_flight(f->adm), 1); /* bob's slot was given back */
    fixture_free(f);
}

static void test_a_failed_open_gives_everything_back(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 600, 8);
    atomic_store(&F.fail_open, true);
    char id[PL_SESSION_ID_LEN + 1];
    struct pl_error err = {0};
    const char *none[] = {NULL};
    assert_int_equal(pl_sessions_open(f->s, "alice", none, id, &err), -1);
    assert_int_equal(err.reason, PL_REASON_INTERNAL);
    assert_int_equal(pl_admission_in_flight(f->adm), 0);
    assert_int_equal(pl_sessions_open_count(f->s), 0);
    fixture_free(f);
}

static void test_the_ended_reason_is_kept_and_given(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 600, 8);
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    struct pl_session *ss = NULL;
    struct pl_error err = {0};
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), 0);
    pl_sessions_done(f->s, ss, NULL, "the main process ended");
    assert_int_equal(atomic_load(&F.closed), 1);
    assert_int_equal(pl_admission_in_flight(f->adm), 0);
    char why[256] = "";
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, why, sizeof(why), &err), -1);
    assert_int_equal(err.reason, PL_REASON_SESSION_ENDED);
    assert_string_equal(why, "the main process ended");
    assert_non_null(strstr(err.message, "the main process ended"));
    /* a small buffer is cut, not overrun */
    char small[8];
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, small, sizeof(small), &err), -1);
    assert_string_equal(small, "the mai");
    /* closing an ended session forgets it */
    err = (struct pl_error){0};
    assert_int_equal(pl_sessions_close(f->s, "alice", id, &err), 0);
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), -1);
    assert_int_equal(err.reason, PL_REASON_NOT_FOUND);
    fixture_free(f);
}

struct racer {
    struct fixture *f;
    const char *id;
    atomic_int *inside;
    atomic_int *most;
};

static void *race(void *arg) {
    struct racer *r = arg;
    for (int i = 0; i < 50; i++) {
        struct pl_session *ss = NULL;
        struct pl_error err = {0};
        assert_int_equal(pl_sessions_begin(r->f->s, "alice", r->id, &ss, NULL, 0, &err), 0);
        int now = atomic_fetch_add(r->inside, 1) + 1;
        if (now > atomic_load(r->most))
            atomic_store(r->most, now);
        pl_sleep_ns(20000);
        atomic_fetch_sub(r->inside, 1);
        pl_sessions_done(r->f->s, ss, NULL, NULL);
    }
    return NULL;
}

static void test_one_call_at_a_time(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 600, 8);
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    atomic_int inside = 0, most = 0;
    struct racer r = {f, id, &inside, &most};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, race, &r);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&most), 1);
    fixture_free(f);
}

static void test_idle_pause_and_resume(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 1, 8);
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    wait_count(&F.paused, 1);
    assert_int_equal(atomic_load(&F.paused), 1);
    struct pl_session *ss = NULL;
    struct pl_error err = {0};
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), 0);
    assert_int_equal(atomic_load(&F.resumed), 1);
    pl_sessions_done(f->s, ss, NULL, NULL);
    fixture_free(f);
}

/* A provider whose idle stop frees the slot (openshell): the pause gives
 * it back, the next call takes one again or is refused AT_CAPACITY with
 * the session kept, and the end does not give it back twice. */
static void test_an_idle_stop_gives_the_slot_back(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 1, 1);
    f->prov.info.idle_frees_slot = true;
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    assert_int_equal(pl_admission_in_flight(f->adm), 1);
    wait_count(&F.paused, 1);
    uint64_t until = pl_deadline_in_ms(5000);
    while (pl_admission_in_flight(f->adm) != 0 && pl_now_ns() < until)
        pl_sleep_ns(PL_MS(10));
    assert_int_equal(pl_admission_in_flight(f->adm), 0);
    /* someone else holds the one slot: the session's call is refused */
    struct pl_error err = {0};
    assert_int_equal(pl_admission_acquire(f->adm, "bob", &err), 0);
    struct pl_session *ss = NULL;
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), -1);
    assert_int_equal(err.reason, PL_REASON_AT_CAPACITY);
    assert_int_equal(atomic_load(&F.resumed), 0);
    pl_admission_release(f->adm, "bob");
    /* now it takes the slot, resumes and runs */
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, NULL, 0, &err), 0);
    assert_int_equal(atomic_load(&F.resumed), 1);
    assert_int_equal(pl_admission_in_flight(f->adm), 1);
    pl_sessions_done(f->s, ss, NULL, NULL);
    assert_int_equal(pl_sessions_close(f->s, "alice", id, &err), 0);
    assert_int_equal(pl_admission_in_flight(f->adm), 0);
    /* closed while stopped: no second release either */
    open_ok(f, "alice", id);
    wait_count(&F.paused, 2);
    until = pl_deadline_in_ms(5000);
    while (pl_admission_in_flight(f->adm) != 0 && pl_now_ns() < until)
        pl_sleep_ns(PL_MS(10));
    assert_int_equal(pl_sessions_close(f->s, "alice", id, &err), 0);
    assert_int_equal(pl_admission_in_flight(f->adm), 0);
    assert_int_equal(pl_admission_acquire(f->adm, "bob", &err), 0);
    assert_int_equal(pl_admission_acquire(f->adm, "carol", &err), -1);
    pl_admission_release(f->adm, "bob");
    fixture_free(f);
}

static void test_a_failed_resume_ends_the_session(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 1, 8);
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    wait_count(&F.paused, 1);
    atomic_store(&F.fail_resume, true);
    struct pl_session *ss = NULL;
    struct pl_error err = {0};
    char why[256] = "";
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, why, sizeof(why), &err), -1);
    assert_int_equal(err.reason, PL_REASON_SESSION_ENDED);
    assert_non_null(strstr(why, "resumed"));
    assert_int_equal(pl_admission_in_flight(f->adm), 0);
    fixture_free(f);
}

/* The reaper lets go of the table while a provider pauses an idle
 * session; a session opened meanwhile in a later slot is younger than the
 * reaper's clock read before the pause, and once was ended at once as past
 * its lifetime (the difference wrapped). */
static void test_a_session_opened_during_a_pause_lives(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 1, 8);
    char a[PL_SESSION_ID_LEN + 1], b[PL_SESSION_ID_LEN + 1];
    atomic_store(&F.pause_ms, 600);
    open_ok(f, "alice", a);
    wait_count(&F.pausing, 1);
    open_ok(f, "bob", b); /* while alice's pause runs */
    wait_count(&F.paused, 1);
    pl_sleep_ns(PL_MS(300)); /* the rest of that pass, and the next */
    struct pl_session *ss = NULL;
    struct pl_error err = {0};
    char why[256] = "";
    assert_int_equal(pl_sessions_begin(f->s, "bob", b, &ss, why, sizeof(why), &err), 0);
    pl_sessions_done(f->s, ss, NULL, NULL);
    assert_int_equal(pl_sessions_open_count(f->s), 2);
    fixture_free(f);
}

static void test_lifetime_ends_a_session(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 1, 600, 8);
    char id[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    wait_count(&F.closed, 1);
    struct pl_session *ss = NULL;
    struct pl_error err = {0};
    char why[256] = "";
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, why, sizeof(why), &err), -1);
    assert_int_equal(err.reason, PL_REASON_SESSION_ENDED);
    assert_non_null(strstr(why, "SANDBOX_SESSION_LIFETIME"));
    assert_int_equal(pl_sessions_open_count(f->s), 0);
    fixture_free(f);
}

static void test_shutdown_ends_sessions_and_refuses_opens(void **state) {
    (void)state;
    struct fixture *f = fixture_new(2, 600, 600, 8);
    char id[PL_SESSION_ID_LEN + 1], other[PL_SESSION_ID_LEN + 1];
    open_ok(f, "alice", id);
    pl_sessions_shutdown(f->s);
    assert_int_equal(atomic_load(&F.closed), 1);
    struct pl_error err = {0};
    const char *none[] = {NULL};
    assert_int_equal(pl_sessions_open(f->s, "alice", none, other, &err), -1);
    assert_int_equal(err.reason, PL_REASON_SHUTTING_DOWN);
    struct pl_session *ss = NULL;
    char why[256] = "";
    assert_int_equal(pl_sessions_begin(f->s, "alice", id, &ss, why, sizeof(why), &err), -1);
    assert_int_equal(err.reason, PL_REASON_SESSION_ENDED);
    assert_string_equal(why, "the daemon shut down");
    fixture_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_are_long_random_hex),
        cmocka_unit_test(test_another_callers_id_is_not_found),
        cmocka_unit_test(test_admission_is_held_from_open_to_end),
        cmocka_unit_test(test_the_table_has_a_cap),
        cmocka_unit_test(test_a_failed_open_gives_everything_back),
        cmocka_unit_test(test_the_ended_reason_is_kept_and_given),
        cmocka_unit_test(test_one_call_at_a_time),
        cmocka_unit_test(test_idle_pause_and_resume),
        cmocka_unit_test(test_an_idle_stop_gives_the_slot_back),
        cmocka_unit_test(test_a_session_opened_during_a_pause_lives),
        cmocka_unit_test(test_a_failed_resume_ends_the_session),
        cmocka_unit_test(test_lifetime_ends_a_session),
        cmocka_unit_test(test_shutdown_ends_sessions_and_refuses_opens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
