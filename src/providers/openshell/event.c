/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event.c: one ExecSandbox event as the daemon reads it (apart from
 * exec.c so its fuzz harness, fuzz/fuzz_osh_exec.c, links it alone).
 */
#include <string.h>

#include "openshell.pb-c.h"
#include "osh_int.h"

void osh_exec_init(struct osh_exec *x, size_t output_cap) {
    memset(x, 0, sizeof(*x));
    pl_capture_init(&x->out, output_cap);
    pl_capture_init(&x->err, output_cap);
    x->exit_code = -1;
}

void osh_exec_free(struct osh_exec *x) {
    pl_capture_free(&x->out);
    pl_capture_free(&x->err);
}

int osh_exec_event(struct osh_exec *x, const unsigned char *msg, size_t len, struct pl_error *err) {
    Openshell__V1__ExecSandboxEvent *ev = openshell__v1__exec_sandbox_event__unpack(NULL, len, msg);
    if (!ev)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the OpenShell gateway: an exec event does not read");
    int rc = 0;
    switch (ev->payload_case) {
    case OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDOUT:
        if (ev->stdout->data.len &&
            pl_capture_add(&x->out, ev->stdout->data.data, ev->stdout->data.len) < 0)
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        break;
    case OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_STDERR:
        if (ev->stderr->data.len &&
            pl_capture_add(&x->err, ev->stderr->data.data, ev->stderr->data.len) < 0)
            rc = pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        break;
    case OPENSHELL__V1__EXEC_SANDBOX_EVENT__PAYLOAD_EXIT:
        x->exit_code = ev->exit->exit_code;
        rc = 1; /* the end: nothing after it is read */
        break;
    default:
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the OpenShell gateway: an exec event with no payload");
    }
    protobuf_c_message_free_unpacked(&ev->base, NULL);
    return rc;
}
