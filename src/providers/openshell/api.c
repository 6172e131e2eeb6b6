/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c: the gateway's calls (docs/providers/openshell.md), each one gRPC
 * call of proto/openshell/openshell.proto, and the read-back of a
 * sandbox: everything plimsoll asked for, compared with what the gateway
 * says it made, before any code runs.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/buf.h"
#include "../../core/cleanup.h"
#include "../../core/clock.h"
#include "openshell.pb-c.h"
#include "osh_int.h"

#define SVC "/openshell.v1.OpenShell/"

int osh_status_error(struct pl_error *err, const char *method, const struct ph_grpc_call *c) {
    return pl_error_set(err, PL_REASON_INTERNAL, "the OpenShell gateway: %s: %s: %.200s", method,
                        ph_grpc_code_name(c->status), c->message);
}

struct one {
    struct pl_buf msg;
    unsigned n;
};

static int keep_one(void *ud, const unsigned char *msg, size_t len, struct pl_error *err) {
    struct one *o = ud;
    if (++o->n > 1)
        return pl_error_set(err, PL_REASON_INTERNAL, "a unary call answered more than once");
    return pl_buf_append(&o->msg, msg, len) < 0 && len
               ? pl_error_set(err, PL_REASON_INTERNAL, "out of memory")
               : 0;
}

/*
 * One unary call: req packed, the answer unpacked with desc into *ret
 * (when the status is OK).  0 with c->status set; < 0 when the gateway
 * could not be reached or the answer does not read.
 */
static int unary(struct osh_state *s, const char *method, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *desc, uint64_t timeout_ms,
                 ProtobufCMessage **ret, struct ph_grpc_call *c, struct pl_error *err) {
    *ret = NULL;
    size_t len = protobuf_c_message_get_packed_size(req);
    uint8_t *packed = malloc(len ? len : 1);
    if (!packed)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    protobuf_c_message_pack(req, packed);
    char path[128];
    snprintf(path, sizeof(path), SVC "%s", method);
    struct one o = {0};
    *c = (struct ph_grpc_call){.method = path,
                               .msg = packed,
                               .len = len,
                               .timeout_ms = timeout_ms ? timeout_ms : s->set.call_timeout_ms,
                               .max_message = OSH_MAX_MESSAGE,
                               .on_message = keep_one,
                               .ud = &o};
    int rc = ph_grpc(&s->target, c, err);
    free(packed);
    c->method = NULL;
    if (rc < 0) {
        ph_outage(&s->books, err);
        pl_buf_free(&o.msg);
        return -1;
    }
    if (c->status == PH_GRPC_UNAVAILABLE) {
        struct pl_error why = {0};
        osh_status_error(&why, method, c);
        ph_outage(&s->books, &why);
    } else {
        ph_outage(&s->books, NULL);
    }
    if (c->status == PH_GRPC_OK) {
        *ret = protobuf_c_message_unpack(desc, NULL, o.msg.len, (const uint8_t *)o.msg.data);
        if (!*ret)
            rc = pl_error_set(err, PL_REASON_INTERNAL,
                              "the OpenShell gateway: %s: the answer does not read as its message",
                              method);
    }
    pl_buf_free(&o.msg);
    return rc;
}

int osh_health(struct osh_state *s, uint64_t timeout_ms, struct pl_error *err) {
    Openshell__V1__HealthRequest req = OPENSHELL__V1__HEALTH_REQUEST__INIT;
    ProtobufCMessage *m;
    struct ph_grpc_call c;
    if (unary(s, "Health", &req.base, &openshell__v1__health_response__descriptor, timeout_ms, &m,
              &c, err) < 0)
        return -1;
    if (c.status != PH_GRPC_OK)
        return osh_status_error(err, "Health", &c);
    Openshell__V1__HealthResponse *h = (Openshell__V1__HealthResponse *)m;
    int rc = 0;
    if (h->status != OPENSHELL__V1__SERVICE_STATUS__SERVICE_STATUS_HEALTHY)
        rc = pl_error_set(err, PL_REASON_INTERNAL, "the OpenShell gateway reports itself %s",
                          h->status == OPENSHELL__V1__SERVICE_STATUS__SERVICE_STATUS_DEGRADED
                              ? "degraded"
                              : "unhealthy");
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

static void copy_printable(char *dst, size_t size, const char *src) {
    size_t o = 0;
    for (; src && *src && o + 1 < size; src++)
        dst[o++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
    dst[o] = '\0';
}

int osh_gateway_driver(struct osh_state *s, struct pl_error *err) {
    Openshell__V1__GetGatewayInfoRequest req = OPENSHELL__V1__GET_GATEWAY_INFO_REQUEST__INIT;
    ProtobufCMessage *m;
    struct ph_grpc_call c;
    if (unary(s, "GetGatewayInfo", &req.base, &openshell__v1__get_gateway_info_response__descriptor,
              0, &m, &c, err) < 0)
        return -1;
    if (c.status == PH_GRPC_PERMISSION_DENIED)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the gateway refused to say which compute driver it runs "
                            "(GetGatewayInfo: PERMISSION_DENIED: %.160s): the container tier "
                            "needs that report, so the token must be allowed to read it",
                            c.message);
    if (c.status != PH_GRPC_OK)
        return osh_status_error(err, "GetGatewayInfo", &c);
    Openshell__V1__GetGatewayInfoResponse *g = (Openshell__V1__GetGatewayInfoResponse *)m;
    int rc = 0;
    char names[256] = "";
    size_t off = 0;
    copy_printable(s->gateway_version, sizeof(s->gateway_version), g->gateway_version);
    /* The gateway states its own status here too (upstream's answers
     * HEALTHY, crates/openshell-server/src/grpc/mod.rs:262): anything else
     * is a gateway not to start on. */
    if (g->status != OPENSHELL__V1__SERVICE_STATUS__SERVICE_STATUS_HEALTHY) {
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the OpenShell gateway's GetGatewayInfo reports it %s, not healthy",
                          g->status == OPENSHELL__V1__SERVICE_STATUS__SERVICE_STATUS_DEGRADED
                              ? "degraded"
                          : g->status == OPENSHELL__V1__SERVICE_STATUS__SERVICE_STATUS_UNHEALTHY
                              ? "unhealthy"
                              : "of no stated status");
        protobuf_c_message_free_unpacked(m, NULL);
        return rc;
    }
    /* Exactly one driver, and it is docker: only that report is evidence
     * that each sandbox is a container on a docker engine. */
    for (size_t i = 0; i < g->n_compute_drivers; i++) {
        const Openshell__V1__ComputeDriverInfo *d = g->compute_drivers[i];
        char n[64];
        copy_printable(n, sizeof(n), d->name);
        if (off < sizeof(names))
            off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "", n);
    }
    const Openshell__V1__ComputeDriverInfo *d =
        g->n_compute_drivers == 1 ? g->compute_drivers[0] : NULL;
    const Openshell__V1__ComputeDriverCapabilities *cap = d ? d->capabilities : NULL;
    if (!d || strcmp(d->name, "docker") != 0 || !cap || strcmp(cap->driver_name, "docker") != 0)
        rc = pl_error_set(err, PL_REASON_INTERNAL,
                          "the gateway's compute driver must be docker, alone: it reports [%s]%s",
                          names, d && !cap ? " without capabilities" : "");
    else {
        snprintf(s->driver, sizeof(s->driver), "docker");
        copy_printable(s->driver_version, sizeof(s->driver_version), cap->driver_version);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* --- what every sandbox is asked to be -------------------------------- */

struct asked {
    char run[40], deadline[24], memory[24];
    Openshell__V1__ObjectMeta__LabelsEntry ml[4], *mlp[4];
    Openshell__V1__SandboxTemplate__LabelsEntry tl[4], *tlp[4];
    Openshell__V1__CreateSandboxRequest__LabelsEntry rl[4], *rlp[4];
    Google__Protobuf__Value cpu_v, mem_v, limits_v;
    Google__Protobuf__Struct__FieldsEntry cpu_e, mem_e, limits_e, *lim_f[2], *res_f[1];
    Google__Protobuf__Struct limits, resources;
    char *ro[4], *rw[1];
    Openshell__V1__FilesystemPolicy fs;
    Openshell__V1__ProcessPolicy proc;
    Openshell__V1__SandboxPolicy policy;
    Openshell__V1__SandboxTemplate tmpl;
    Openshell__V1__SandboxSpec spec;
};

static const char *const label_keys[4] = {OSH_LABEL_MANAGED, OSH_LABEL_INSTANCE, OSH_LABEL_RUN,
                                          OSH_LABEL_DEADLINE};

static void ask(struct osh_state *s, const struct osh_sandbox *sb, struct asked *a) {
    snprintf(a->run, sizeof(a->run), "%s", sb->run_id);
    snprintf(a->deadline, sizeof(a->deadline), "%llu", (unsigned long long)sb->deadline_s);
    snprintf(a->memory, sizeof(a->memory), "%uMi", s->set.memory_mib);
    const char *vals[4] = {"1", s->set.instance, a->run, a->deadline};
    for (int i = 0; i < 4; i++) {
        a->ml[i] =
            (Openshell__V1__ObjectMeta__LabelsEntry)OPENSHELL__V1__OBJECT_META__LABELS_ENTRY__INIT;
        a->tl[i] = (Openshell__V1__SandboxTemplate__LabelsEntry)
            OPENSHELL__V1__SANDBOX_TEMPLATE__LABELS_ENTRY__INIT;
        a->rl[i] = (Openshell__V1__CreateSandboxRequest__LabelsEntry)
            OPENSHELL__V1__CREATE_SANDBOX_REQUEST__LABELS_ENTRY__INIT;
        a->ml[i].key = a->tl[i].key = a->rl[i].key = (char *)label_keys[i];
        a->ml[i].value = a->tl[i].value = a->rl[i].value = (char *)vals[i];
        a->mlp[i] = &a->ml[i];
        a->tlp[i] = &a->tl[i];
        a->rlp[i] = &a->rl[i];
    }
    a->cpu_v = (Google__Protobuf__Value)GOOGLE__PROTOBUF__VALUE__INIT;
    a->cpu_v.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    a->cpu_v.string_value = s->set.cpu;
    a->mem_v = (Google__Protobuf__Value)GOOGLE__PROTOBUF__VALUE__INIT;
    a->mem_v.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    a->mem_v.string_value = a->memory;
    a->cpu_e = (Google__Protobuf__Struct__FieldsEntry)GOOGLE__PROTOBUF__STRUCT__FIELDS_ENTRY__INIT;
    a->cpu_e.key = "cpu";
    a->cpu_e.value = &a->cpu_v;
    a->mem_e = (Google__Protobuf__Struct__FieldsEntry)GOOGLE__PROTOBUF__STRUCT__FIELDS_ENTRY__INIT;
    a->mem_e.key = "memory";
    a->mem_e.value = &a->mem_v;
    a->lim_f[0] = &a->cpu_e;
    a->lim_f[1] = &a->mem_e;
    a->limits = (Google__Protobuf__Struct)GOOGLE__PROTOBUF__STRUCT__INIT;
    a->limits.n_fields = 2;
    a->limits.fields = a->lim_f;
    a->limits_v = (Google__Protobuf__Value)GOOGLE__PROTOBUF__VALUE__INIT;
    a->limits_v.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE;
    a->limits_v.struct_value = &a->limits;
    a->limits_e =
        (Google__Protobuf__Struct__FieldsEntry)GOOGLE__PROTOBUF__STRUCT__FIELDS_ENTRY__INIT;
    a->limits_e.key = "limits";
    a->limits_e.value = &a->limits_v;
    a->res_f[0] = &a->limits_e;
    a->resources = (Google__Protobuf__Struct)GOOGLE__PROTOBUF__STRUCT__INIT;
    a->resources.n_fields = 1;
    a->resources.fields = a->res_f;
    /* The policy: read-only system, writable /tmp alone, no network at
     * all, the unprivileged user. */
    a->ro[0] = "/usr";
    a->ro[1] = "/lib";
    a->ro[2] = "/etc";
    a->ro[3] = "/bin";
    a->rw[0] = "/tmp";
    a->fs = (Openshell__V1__FilesystemPolicy)OPENSHELL__V1__FILESYSTEM_POLICY__INIT;
    a->fs.n_read_only = 4;
    a->fs.read_only = a->ro;
    a->fs.n_read_write = 1;
    a->fs.read_write = a->rw;
    a->proc = (Openshell__V1__ProcessPolicy)OPENSHELL__V1__PROCESS_POLICY__INIT;
    a->proc.run_as_user = "sandbox";
    a->proc.run_as_group = "sandbox";
    a->policy = (Openshell__V1__SandboxPolicy)OPENSHELL__V1__SANDBOX_POLICY__INIT;
    a->policy.version = 1;
    a->policy.filesystem = &a->fs;
    a->policy.process = &a->proc;
    a->tmpl = (Openshell__V1__SandboxTemplate)OPENSHELL__V1__SANDBOX_TEMPLATE__INIT;
    a->tmpl.image = s->set.image;
    a->tmpl.n_labels = 4;
    a->tmpl.labels = a->tlp;
    a->tmpl.resources = &a->resources;
    a->spec = (Openshell__V1__SandboxSpec)OPENSHELL__V1__SANDBOX_SPEC__INIT;
    a->spec.template_ = &a->tmpl;
    a->spec.policy = &a->policy;
}

/* The policy as plimsoll packs it (the read-back compares these bytes). */
static uint8_t *pack_policy(const Openshell__V1__SandboxPolicy *p, size_t *ret_len) {
    size_t len = protobuf_c_message_get_packed_size(&p->base);
    uint8_t *b = malloc(len ? len : 1);
    if (b)
        protobuf_c_message_pack(&p->base, b);
    *ret_len = len;
    return b;
}

/*
 * Upstream's policy hash (deterministic_policy_hash, crates/openshell-server/
 * src/grpc/policy.rs:5704: the hex SHA-256 of canonical_policy_bytes,
 * :5667-5700), over the fields this proto carries: the policy with its maps
 * cleared, encoded (prost's encoding: fields by number, defaults left out;
 * protobuf-c's is the same bytes for these messages) and length-prefixed
 * (:5511-5522, a u64 little-endian length); then "network_policies", their
 * count and each key (sorted bytewise) with its rule's canonical bytes
 * (:5544-5595: the rule encoded, then per endpoint its index and its empty
 * graphql_persisted_queries map; these endpoints carry no L7 rules); then
 * "network_middlewares" and a count of 0 (this proto has none).
 */
static int put_u64(struct pl_buf *b, uint64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    return pl_buf_append(b, le, 8);
}

static int put_bytes(struct pl_buf *b, const void *data, size_t len) {
    return put_u64(b, len) < 0 || (len && pl_buf_append(b, data, len) < 0) ? -1 : 0;
}

static int put_message(struct pl_buf *b, const ProtobufCMessage *m) {
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *packed = malloc(len ? len : 1);
    if (!packed)
        return -1;
    protobuf_c_message_pack(m, packed);
    int rc = put_bytes(b, packed, len);
    free(packed);
    return rc;
}

static int by_key(const void *a, const void *b) {
    const Openshell__V1__SandboxPolicy__NetworkPoliciesEntry *const *x = a, *const *y = b;
    return strcmp((*x)->key, (*y)->key);
}

static int canonical_rule(struct pl_buf *out, const Openshell__V1__NetworkPolicyRule *r) {
    struct pl_buf rb = {0};
    int rc = put_message(&rb, &r->base);
    for (size_t i = 0; rc == 0 && i < r->n_endpoints; i++) {
        static const char label[] = "graphql_persisted_queries";
        rc = put_u64(&rb, i) < 0 || put_bytes(&rb, label, sizeof(label) - 1) < 0 ||
                     put_u64(&rb, 0) < 0
                 ? -1
                 : 0;
    }
    if (rc == 0)
        rc = put_bytes(out, rb.data, rb.len);
    pl_buf_free(&rb);
    return rc;
}

static int osh_policy_hash(const Openshell__V1__SandboxPolicy *p, char hex[65]) {
    Openshell__V1__SandboxPolicy map_free = *p;
    map_free.n_network_policies = 0;
    map_free.network_policies = NULL;
    size_t n = p->n_network_policies;
    Openshell__V1__SandboxPolicy__NetworkPoliciesEntry **sorted =
        calloc(n ? n : 1, sizeof(*sorted));
    struct pl_buf b = {0};
    int rc = sorted ? put_message(&b, &map_free.base) : -1;
    static const char np[] = "network_policies", nm[] = "network_middlewares";
    if (rc == 0) {
        if (n) {
            memcpy(sorted, p->network_policies, n * sizeof(*sorted));
            qsort(sorted, n, sizeof(*sorted), by_key);
        }
        rc = put_bytes(&b, np, sizeof(np) - 1) < 0 || put_u64(&b, n) < 0 ? -1 : 0;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const Openshell__V1__NetworkPolicyRule *r = sorted[i]->value;
        Openshell__V1__NetworkPolicyRule empty = OPENSHELL__V1__NETWORK_POLICY_RULE__INIT;
        rc = put_bytes(&b, sorted[i]->key, strlen(sorted[i]->key)) < 0 ||
                     canonical_rule(&b, r ? r : &empty) < 0
                 ? -1
                 : 0;
    }
    if (rc == 0)
        rc = put_bytes(&b, nm, sizeof(nm) - 1) < 0 || put_u64(&b, 0) < 0 ? -1 : 0;
    unsigned char md[32];
    if (rc == 0 && EVP_Digest(b.data, b.len, md, NULL, EVP_sha256(), NULL) != 1)
        rc = -1;
    for (int i = 0; rc == 0 && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    free(sorted);
    pl_buf_free(&b);
    return rc;
}

/* Whether n labels (key/value pairs of any entry type) are exactly ours. */
#define LABELS_ARE(n, arr, vals)                                                                   \
    ({                                                                                             \
        bool same_ = (n) == 4;                                                                     \
        for (size_t i_ = 0; same_ && i_ < (n); i_++) {                                             \
            bool hit_ = false;                                                                     \
            for (int k_ = 0; k_ < 4; k_++)                                                         \
                hit_ = hit_ || (strcmp((arr)[i_]->key, label_keys[k_]) == 0 &&                     \
                                strcmp((arr)[i_]->value, (vals)[k_]) == 0);                        \
            same_ = hit_;                                                                          \
        }                                                                                          \
        same_;                                                                                     \
    })

static const Google__Protobuf__Value *field(const Google__Protobuf__Struct *st, const char *key) {
    for (size_t i = 0; st && i < st->n_fields; i++)
        if (strcmp(st->fields[i]->key, key) == 0)
            return st->fields[i]->value;
    return NULL;
}

static bool is_string(const Google__Protobuf__Value *v, const char *want) {
    return v && v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE &&
           strcmp(v->string_value, want) == 0;
}

/* What differs between the sandbox read back and what was asked ("" when
 * nothing). */
static void compare(const struct asked *a, const Openshell__V1__Sandbox *sb, char *why,
                    size_t why_len) {
    why[0] = '\0';
    const char *vals[4] = {a->ml[0].value, a->ml[1].value, a->ml[2].value, a->ml[3].value};
    const Openshell__V1__SandboxSpec *sp = sb->spec;
    const Openshell__V1__SandboxTemplate *t = sp ? sp->template_ : NULL;
    if (!sb->metadata || !LABELS_ARE(sb->metadata->n_labels, sb->metadata->labels, vals)) {
        snprintf(why, why_len, "its labels are not the four plimsoll set");
        return;
    }
    if (!t || !LABELS_ARE(t->n_labels, t->labels, vals)) {
        snprintf(why, why_len, "its template's labels are not the four plimsoll set");
        return;
    }
    if (strcmp(t->image, a->tmpl.image) != 0) {
        snprintf(why, why_len, "its image is %.100s, not %.100s", t->image, a->tmpl.image);
        return;
    }
    const Google__Protobuf__Value *lim = field(t->resources, "limits");
    const Google__Protobuf__Struct *ls =
        lim && lim->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE ? lim->struct_value
                                                                            : NULL;
    if (!t->resources || t->resources->n_fields != 1 || !ls || ls->n_fields != 2 ||
        !is_string(field(ls, "cpu"), a->cpu_v.string_value) ||
        !is_string(field(ls, "memory"), a->mem_v.string_value)) {
        snprintf(why, why_len, "its resources are not limits of cpu %s and memory %s",
                 a->cpu_v.string_value, a->mem_v.string_value);
        return;
    }
    if (sp->n_providers || sp->n_environment) {
        snprintf(why, why_len, "it has %zu providers and %zu environment variables, not none",
                 sp->n_providers, sp->n_environment);
        return;
    }
    size_t la = 0, lb = 0;
    uint8_t *pa = pack_policy(&a->policy, &la);
    uint8_t *pb = sp->policy ? pack_policy(sp->policy, &lb) : NULL;
    if (!pa || !pb || la != lb || memcmp(pa, pb, la) != 0)
        snprintf(why, why_len, "its policy is not the one plimsoll set");
    free(pa);
    free(pb);
}

static int get_sandbox(struct osh_state *s, const char *name, Openshell__V1__Sandbox **ret,
                       struct ph_grpc_call *c, struct pl_error *err) {
    Openshell__V1__GetSandboxRequest req = OPENSHELL__V1__GET_SANDBOX_REQUEST__INIT;
    req.name = (char *)name;
    ProtobufCMessage *m;
    *ret = NULL;
    if (unary(s, "GetSandbox", &req.base, &openshell__v1__sandbox_response__descriptor, 0, &m, c,
              err) < 0)
        return -1;
    if (c->status != PH_GRPC_OK)
        return 0;
    Openshell__V1__SandboxResponse *r = (Openshell__V1__SandboxResponse *)m;
    *ret = r->sandbox;
    r->sandbox = NULL;
    protobuf_c_message_free_unpacked(m, NULL);
    if (!*ret)
        return pl_error_set(err, PL_REASON_INTERNAL,
                            "the OpenShell gateway: GetSandbox answered no sandbox");
    return 0;
}

static int refuse_drift(const char *name, const char *why, struct pl_error *err) {
    /* NOT_READY: the wall is not what was asked; typed, nothing ran. */
    return pl_error_set(err, PL_REASON_NOT_READY,
                        "the OpenShell sandbox %s read back is not what plimsoll asked for: %s; "
                        "nothing ran in it and it was deleted",
                        name, why);
}

int osh_readback(struct osh_state *s, struct osh_sandbox *sb, struct pl_error *err) {
    struct asked a;
    ask(s, sb, &a);
    Openshell__V1__Sandbox *got = NULL;
    struct ph_grpc_call c;
    if (get_sandbox(s, sb->name, &got, &c, err) < 0)
        return -1;
    if (!got)
        return osh_status_error(err, "GetSandbox", &c);
    char why[300];
    compare(&a, got, why, sizeof(why));
    if (!why[0] &&
        (!got->status || got->status->phase != OPENSHELL__V1__SANDBOX_PHASE__SANDBOX_PHASE_READY))
        snprintf(why, sizeof(why), "it is not READY");
    if (!why[0] && (!got->metadata->id[0] || strcmp(got->metadata->name, sb->name) != 0))
        snprintf(why, sizeof(why), "its name or id is not its own");
    if (!why[0] && sb->id[0] && strcmp(got->metadata->id, sb->id) != 0)
        snprintf(why, sizeof(why), "its id changed");
    if (!why[0])
        snprintf(sb->id, sizeof(sb->id), "%s", got->metadata->id);
    protobuf_c_message_free_unpacked(&got->base, NULL);
    if (why[0])
        return refuse_drift(sb->name, why, err);

    /* No credentials attached by OpenShell. */
    Openshell__V1__ListSandboxProvidersRequest lp =
        OPENSHELL__V1__LIST_SANDBOX_PROVIDERS_REQUEST__INIT;
    lp.sandbox_name = sb->name;
    ProtobufCMessage *m;
    if (unary(s, "ListSandboxProviders", &lp.base,
              &openshell__v1__list_sandbox_providers_response__descriptor, 0, &m, &c, err) < 0)
        return -1;
    if (c.status != PH_GRPC_OK)
        return osh_status_error(err, "ListSandboxProviders", &c);
    size_t np = ((Openshell__V1__ListSandboxProvidersResponse *)m)->n_providers;
    protobuf_c_message_free_unpacked(m, NULL);
    if (np)
        return refuse_drift(sb->name, "the gateway attached provider credentials to it", err);

    /* The policy's revision: the first, loaded, and its hash upstream's
     * hash of the policy plimsoll sent. */
    char want[65];
    if (osh_policy_hash(&a.policy, want) < 0)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    Openshell__V1__GetSandboxPolicyStatusRequest ps =
        OPENSHELL__V1__GET_SANDBOX_POLICY_STATUS_REQUEST__INIT;
    ps.name = sb->name;
    if (unary(s, "GetSandboxPolicyStatus", &ps.base,
              &openshell__v1__get_sandbox_policy_status_response__descriptor, 0, &m, &c, err) < 0)
        return -1;
    if (c.status != PH_GRPC_OK)
        return osh_status_error(err, "GetSandboxPolicyStatus", &c);
    Openshell__V1__GetSandboxPolicyStatusResponse *st =
        (Openshell__V1__GetSandboxPolicyStatusResponse *)m;
    const Openshell__V1__SandboxPolicyRevision *rev = st->revision;
    why[0] = '\0';
    if (!rev || rev->version != 1 || st->active_version != 1 ||
        rev->status != OPENSHELL__V1__POLICY_STATUS__POLICY_STATUS_LOADED)
        snprintf(why, sizeof(why), "its policy is not the first revision, loaded");
    else if (strcmp(rev->policy_hash, want) != 0) {
        char shown[24];
        copy_printable(shown, sizeof(shown), rev->policy_hash);
        snprintf(why, sizeof(why),
                 "its policy's hash is %s%s, not %.16s... (the gateway's hash of the policy "
                 "plimsoll sent)",
                 shown[0] ? shown : "empty",
                 strlen(rev->policy_hash) >= sizeof(shown) - 1 ? "..." : "", want);
    } else
        snprintf(s->policy_hash, sizeof(s->policy_hash), "%s", want);
    protobuf_c_message_free_unpacked(m, NULL);
    return why[0] ? refuse_drift(sb->name, why, err) : 0;
}

int osh_create(struct osh_state *s, struct osh_sandbox *sb, uint64_t deadline,
               struct pl_error *err) {
    struct asked a;
    ask(s, sb, &a);
    Openshell__V1__CreateSandboxRequest req = OPENSHELL__V1__CREATE_SANDBOX_REQUEST__INIT;
    req.spec = &a.spec;
    req.name = sb->name;
    req.n_labels = 4;
    req.labels = a.rlp;
    ProtobufCMessage *m;
    struct ph_grpc_call c;
    if (unary(s, "CreateSandbox", &req.base, &openshell__v1__sandbox_response__descriptor, 0, &m,
              &c, err) < 0)
        return -1;
    if (c.status != PH_GRPC_OK)
        return osh_status_error(err, "CreateSandbox", &c);
    protobuf_c_message_free_unpacked(m, NULL);
    /* PROVISIONING until READY; ERROR is for good. */
    for (unsigned wait_ms = 20;; wait_ms = wait_ms < 200 ? wait_ms * 2 : 200) {
        Openshell__V1__Sandbox *got = NULL;
        if (get_sandbox(s, sb->name, &got, &c, err) < 0)
            return -1;
        if (!got)
            return osh_status_error(err, "GetSandbox", &c);
        int phase = got->status ? (int)got->status->phase : 0;
        protobuf_c_message_free_unpacked(&got->base, NULL);
        if (phase == OPENSHELL__V1__SANDBOX_PHASE__SANDBOX_PHASE_READY)
            break;
        if (phase == OPENSHELL__V1__SANDBOX_PHASE__SANDBOX_PHASE_ERROR)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the OpenShell sandbox %s went to ERROR before it was ready",
                                sb->name);
        if (pl_now_ns() + wait_ms * 1000000ull >= deadline)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the OpenShell sandbox %s was not ready before the run's deadline",
                                sb->name);
        pl_sleep_ns(wait_ms * 1000000ull);
    }
    return osh_readback(s, sb, err);
}

int osh_delete(struct osh_state *s, const char *name, struct pl_error *err) {
    Openshell__V1__DeleteSandboxRequest req = OPENSHELL__V1__DELETE_SANDBOX_REQUEST__INIT;
    req.name = (char *)name;
    ProtobufCMessage *m;
    struct ph_grpc_call c;
    if (unary(s, "DeleteSandbox", &req.base, &openshell__v1__delete_sandbox_response__descriptor, 0,
              &m, &c, err) < 0)
        return -1;
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (c.status == PH_GRPC_OK || c.status == PH_GRPC_NOT_FOUND)
        return 0;
    return osh_status_error(err, "DeleteSandbox", &c);
}

int osh_gone(struct osh_state *s, const char *name, struct pl_error *err) {
    uint64_t until = pl_deadline_in_ms(s->set.call_timeout_ms);
    for (;;) {
        Openshell__V1__Sandbox *got = NULL;
        struct ph_grpc_call c;
        if (get_sandbox(s, name, &got, &c, err) < 0)
            return -1;
        if (!got)
            return c.status == PH_GRPC_NOT_FOUND ? 0 : osh_status_error(err, "GetSandbox", &c);
        int phase = got->status ? (int)got->status->phase : 0;
        protobuf_c_message_free_unpacked(&got->base, NULL);
        if (phase != OPENSHELL__V1__SANDBOX_PHASE__SANDBOX_PHASE_DELETING || pl_now_ns() >= until)
            return pl_error_set(err, PL_REASON_INTERNAL,
                                "the sandbox %s is still there after its delete", name);
        pl_sleep_ns(100000000ull);
    }
}

static const char *label(const Openshell__V1__ObjectMeta *md, const char *key) {
    for (size_t i = 0; md && i < md->n_labels; i++)
        if (strcmp(md->labels[i]->key, key) == 0)
            return md->labels[i]->value;
    return NULL;
}

static void unpackedp(ProtobufCMessage **m) {
    if (*m)
        protobuf_c_message_free_unpacked(*m, NULL);
}

int osh_list_managed(struct osh_state *s, struct osh_listed **ret, size_t *ret_n,
                     struct pl_error *err) {
    *ret = NULL;
    *ret_n = 0;
    PL_AUTO_FREE struct osh_listed *list = NULL;
    size_t nlist = 0, cap = 0;
    for (uint32_t offset = 0;;) {
        Openshell__V1__ListSandboxesRequest req = OPENSHELL__V1__LIST_SANDBOXES_REQUEST__INIT;
        req.limit = 100;
        req.offset = offset;
        req.label_selector = OSH_LABEL_MANAGED "=1";
        PL_CLEANUP(unpackedp) ProtobufCMessage *m = NULL;
        struct ph_grpc_call c;
        if (unary(s, "ListSandboxes", &req.base,
                  &openshell__v1__list_sandboxes_response__descriptor, 0, &m, &c, err) < 0)
            return -1;
        if (c.status != PH_GRPC_OK)
            return osh_status_error(err, "ListSandboxes", &c);
        Openshell__V1__ListSandboxesResponse *l = (Openshell__V1__ListSandboxesResponse *)m;
        size_t n = l->n_sandboxes;
        for (size_t i = 0; i < n; i++) {
            const Openshell__V1__ObjectMeta *md = l->sandboxes[i]->metadata;
            const char *managed = label(md, OSH_LABEL_MANAGED);
            if (!md || !managed || strcmp(managed, "1") != 0)
                continue; /* the selector's job, not trusted */
            if (nlist == cap) {
                size_t nc = cap ? cap * 2 : 16;
                struct osh_listed *nr = nc <= 100000 ? realloc(list, nc * sizeof(*list)) : NULL;
                if (!nr)
                    return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
                list = nr;
                cap = nc;
            }
            struct osh_listed *o = &list[nlist++];
            const char *inst = label(md, OSH_LABEL_INSTANCE), *run = label(md, OSH_LABEL_RUN),
                       *dl = label(md, OSH_LABEL_DEADLINE);
            snprintf(o->name, sizeof(o->name), "%s", md->name);
            snprintf(o->instance, sizeof(o->instance), "%s", inst ? inst : "");
            snprintf(o->run, sizeof(o->run), "%s", run ? run : "");
            char *end = NULL;
            o->deadline_s = dl && *dl ? strtoull(dl, &end, 10) : 0;
            if (!end || *end)
                o->deadline_s = 0; /* no lifetime it declares: treated as past */
        }
        if (n < 100) {
            *ret = PL_TAKE_PTR(list);
            *ret_n = nlist;
            return 0;
        }
        offset += 100;
    }
}
