/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.c: normalize and validate Run requests (see request.h).
 *
 * The schema below mirrors proto/plimsoll/v1/sandbox.proto.  Keeping the
 * message shapes as data means one walker enforces names, types and
 * unknown-field refusal for every message, and the fuzz harness reaches all
 * of it through one entry point.
 */
#include "request.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canon.h"
#include "cleanup.h"
#include "config.h"
#include "jsonscan.h"

enum ftype { F_STRING, F_UINT, F_MSG, F_MSG_LIST, F_STRING_LIST, F_REFUSED };

struct field;
struct msg {
    const char *name;
    const struct field *fields;
};
struct field {
    const char *snake;
    const char *camel;
    enum ftype type;
    const struct msg *sub;
    const char *refusal; /* F_REFUSED: why */
};

static const struct field file_fields[] = {
    {"path", "path", F_STRING, NULL, NULL},
    {"content", "content", F_STRING, NULL, NULL},
    {"content_base64", "contentBase64", F_STRING, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg file_msg = {"File", file_fields};

static const struct field step_fields[] = {
    {"name", "name", F_STRING, NULL, NULL},
    {"argv", "argv", F_STRING_LIST, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg step_msg = {"Step", step_fields};

static const struct field snippet_fields[] = {
    {"language", "language", F_STRING, NULL, NULL},
    {"code", "code", F_STRING, NULL, NULL},
    {"stdin", "stdin", F_STRING, NULL, NULL},
    {"collect", "collect", F_STRING_LIST, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg snippet_msg = {"Snippet", snippet_fields};

static const struct field project_fields[] = {
    {"files", "files", F_MSG_LIST, &file_msg, NULL},
    {"steps", "steps", F_MSG_LIST, &step_msg, NULL},
    {"collect", "collect", F_STRING_LIST, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg project_msg = {"Project", project_fields};

static const struct field module_fields[] = {
    {"wasm_base64", "wasmBase64", F_STRING, NULL, NULL},
    {"args", "args", F_STRING_LIST, NULL, NULL},
    {"stdin", "stdin", F_STRING, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg module_msg = {"Module", module_fields};

static const struct field cell_fields[] = {
    {"language", "language", F_STRING, NULL, NULL},
    {"code", "code", F_STRING, NULL, NULL},
    {"files", "files", F_MSG_LIST, &file_msg, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg cell_msg = {"Cell", cell_fields};

static const struct field run_fields[] = {
    {"minimum_isolation", "minimumIsolation", F_STRING, NULL, NULL},
    {"grant_profile", "grantProfile", F_STRING, NULL, NULL},
    {"timeout_ms", "timeoutMs", F_UINT, NULL, NULL},
    {"memory_mb", "memoryMb", F_UINT, NULL, NULL},
    {"snippet", "snippet", F_MSG, &snippet_msg, NULL},
    {"project", "project", F_MSG, &project_msg, NULL},
    {"module", "module", F_MSG, &module_msg, NULL},
    {"cell", "cell", F_MSG, &cell_msg, NULL},
    {"grant", "grant", F_REFUSED, NULL,
     "a grant is named with grant_profile; a grant sent in full is refused"},
    {"grants", "grants", F_REFUSED, NULL,
     "a grant is named with grant_profile; a grant sent in full is refused"},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg run_msg = {"RunRequest", run_fields};

static const struct field write_files_fields[] = {
    {"files", "files", F_MSG_LIST, &file_msg, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg write_files_msg = {"WriteFilesRequest", write_files_fields};
static const struct field read_file_fields[] = {
    {"path", "path", F_STRING, NULL, NULL},
    {"offset", "offset", F_UINT, NULL, NULL},
    {"limit", "limit", F_UINT, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg read_file_msg = {"ReadFileRequest", read_file_fields};
static const struct field list_files_fields[] = {
    {"path", "path", F_STRING, NULL, NULL},
    {"depth", "depth", F_UINT, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
};
static const struct msg list_files_msg = {"ListFilesRequest", list_files_fields};

static const struct field empty_fields[] = {{NULL, NULL, 0, NULL, NULL}};
static const struct msg empty_msg = {"Empty", empty_fields};

#define MAX_LIST 1024u /* any repeated field, before its own tighter bound */

#define invalid(err, fmt, a, b) pl_error_set(err, PL_REASON_INVALID_REQUEST, fmt, a, b)

static json_t *normalize(const json_t *in, const struct msg *m, const char *where,
                         struct pl_error *err);

/* Proto3 JSON takes a uint32 as a number or a decimal string. */
static json_t *norm_uint(const json_t *v, const char *name, struct pl_error *err) {
    json_int_t n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (len == 0 || len > 10)
            goto bad;
        n = 0;
        for (size_t i = 0; i < len; i++) {
            if (s[i] < '0' || s[i] > '9')
                goto bad;
            n = n * 10 + (s[i] - '0');
        }
    } else {
        goto bad;
    }
    if (n < 0 || n > UINT32_MAX)
        goto bad;
    return json_integer(n);
bad:
    invalid(err, "%s: must be a whole number from 0 to 4294967295%s", name, "");
    return NULL;
}

static json_t *norm_field(const json_t *v, const struct field *f, const char *path,
                          struct pl_error *err) {
    switch (f->type) {
    case F_STRING:
        if (!json_is_string(v)) {
            invalid(err, "%s: must be a string%s", path, "");
            return NULL;
        }
        return json_incref((json_t *)v);
    case F_UINT: return norm_uint(v, path, err);
    case F_MSG: return normalize(v, f->sub, path, err);
    case F_STRING_LIST:
    case F_MSG_LIST: {
        if (!json_is_array(v)) {
            invalid(err, "%s: must be a list%s", path, "");
            return NULL;
        }
        if (json_array_size(v) > MAX_LIST) {
            pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: more than %u entries", path,
                         MAX_LIST);
            return NULL;
        }
        json_t *out = json_array();
        if (!out)
            return NULL;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            char sub[160];
            snprintf(sub, sizeof(sub), "%.100s[%zu]", path, i);
            json_t *ne;
            if (f->type == F_STRING_LIST) {
                if (!json_is_string(e)) {
                    invalid(err, "%s: must be a string%s", sub, "");
                    json_decref(out);
                    return NULL;
                }
                ne = json_incref(e);
            } else {
                ne = normalize(e, f->sub, sub, err);
            }
            if (!ne || json_array_append_new(out, ne) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    case F_REFUSED: invalid(err, "%s: %s", path, f->refusal); return NULL;
    }
    return NULL;
}

static json_t *normalize(const json_t *in, const struct msg *m, const char *where,
                         struct pl_error *err) {
    if (!json_is_object(in)) {
        invalid(err, "%s: must be a JSON object (%s)", where, m->name);
        return NULL;
    }
    json_t *out = json_object();
    if (!out) {
        pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        const struct field *f = NULL;
        for (const struct field *c = m->fields; c->snake; c++) {
            if (strcmp(key, c->snake) == 0 || strcmp(key, c->camel) == 0) {
                f = c;
                break;
            }
        }
        char path[160];
        if (!f) {
            snprintf(path, sizeof(path), "%.100s%s%.40s", where, *where ? "." : "", key);
            invalid(err, "%s: unknown field in %s", path, m->name);
            json_decref(out);
            return NULL;
        }
        snprintf(path, sizeof(path), "%.100s%s%.40s", where, *where ? "." : "", f->snake);
        if (json_is_null(v))
            continue; /* proto3 JSON: null is the default value */
        if (json_object_get(out, f->snake)) {
            invalid(err, "%s: given twice (as %s and its other spelling)", path, key);
            json_decref(out);
            return NULL;
        }
        json_t *nv = norm_field(v, f, path, err);
        if (!nv || json_object_set_new(out, f->snake, nv) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *parse_body(const char *body, size_t len, struct pl_error *err) {
    if (len == 0)
        return json_object();
    /* The shape first: jansson's tree can be many times the text. */
    if (pl_json_check_bounds(body, len, err) < 0)
        return NULL;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        pl_error_set(err, PL_REASON_INVALID_REQUEST, "body is not valid JSON: %s (line %d)",
                     jerr.text, jerr.line);
        return NULL;
    }
    return root;
}

int pl_empty_request_decode(const char *body, size_t len, struct pl_error *err) {
    json_t *root = parse_body(body, len, err);
    if (!root)
        return -1;
    json_t *n = normalize(root, &empty_msg, "", err);
    json_decref(root);
    if (!n)
        return -1;
    json_decref(n);
    return 0;
}

const char *pl_payload_name(enum pl_payload_kind kind) {
    switch (kind) {
    case PL_PAYLOAD_SNIPPET: return "snippet";
    case PL_PAYLOAD_PROJECT: return "project";
    case PL_PAYLOAD_MODULE: return "module";
    case PL_PAYLOAD_CELL: return "cell";
    case PL_PAYLOAD_WRITE_FILES: return "WriteFiles";
    case PL_PAYLOAD_READ_FILE: return "ReadFile";
    case PL_PAYLOAD_LIST_FILES: return "ListFiles";
    case PL_PAYLOAD_NONE: break;
    }
    return "none";
}

static const char *str(const json_t *obj, const char *key, size_t *ret_len) {
    json_t *v = json_object_get(obj, key);
    if (!v)
        return NULL;
    if (ret_len)
        *ret_len = json_string_length(v);
    return json_string_value(v);
}

/* A relative path inside the work directory: no "..", no empty segment. */
static int path_ok(const char *p, size_t n) {
    if (n == 0 || n > PL_PATH_MAX_BYTES || p[0] == '/' || memchr(p, '\0', n))
        return 0;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/') {
            if (i == seg)
                return 0; /* empty segment: "a//b" or trailing '/' */
            if ((i - seg == 1 && p[seg] == '.') ||
                (i - seg == 2 && p[seg] == '.' && p[seg + 1] == '.'))
                return 0;
            seg = i + 1;
        } else if ((unsigned char)p[i] < 0x20) {
            return 0;
        }
    }
    return 1;
}

/* Files being decoded, owned until handed on. */
struct file_list {
    struct pl_file *v;
    size_t n;
};

static void file_list_clear(struct file_list *l) {
    for (size_t i = 0; l->v && i < l->n; i++)
        free(l->v[i].content);
    free(l->v);
}

static int decode_files(const json_t *list, const char *where, struct pl_file **ret_files,
                        size_t *ret_n, struct pl_error *err) {
    size_t n = json_array_size(list);
    *ret_files = NULL;
    *ret_n = 0;
    if (n == 0)
        return 0;
    if (n > PL_PROJECT_MAX_FILES)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s.files: more than %u files", where,
                            PL_PROJECT_MAX_FILES);
    PL_CLEANUP(file_list_clear) struct file_list fl = {calloc(n, sizeof(*fl.v)), n};
    struct pl_file *files = fl.v;
    if (!files)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *f = json_array_get(list, i);
        size_t plen = 0, clen = 0, blen = 0;
        const char *path = str(f, "path", &plen);
        const char *content = str(f, "content", &clen);
        const char *b64 = str(f, "content_base64", &blen);
        if (!path || !path_ok(path, plen)) {
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s.files[%zu].path: a relative path of at most %u bytes, without "
                                "'.', '..', empty or control characters",
                                where, i, PL_PATH_MAX_BYTES);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(files[j].path, path) == 0) {
                return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s.files[%zu].path: duplicate",
                                    where, i);
            }
        }
        files[i].path = path;
        if (content && b64) {
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s.files[%zu]: give content or content_base64, not both", where,
                                i);
        }
        if (b64) {
            int r = pl_base64_decode(b64, blen, PL_PROJECT_MAX_FILE_BYTES, &files[i].content,
                                     &files[i].len);
            if (r < 0) {
                return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                    r == -2 ? "%s.files[%zu].content_base64: too large"
                                            : "%s.files[%zu].content_base64: not base64",
                                    where, i);
            }
        } else {
            if (clen > PL_PROJECT_MAX_FILE_BYTES) {
                return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                    "%s.files[%zu].content: too large", where, i);
            }
            files[i].content = malloc(clen ? clen : 1);
            if (!files[i].content) {
                return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
            }
            if (clen)
                memcpy(files[i].content, content, clen);
            files[i].len = clen;
        }
        total += files[i].len;
        if (total > PL_PROJECT_MAX_FILE_BYTES) {
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s.files: more than %u bytes in all", where,
                                PL_PROJECT_MAX_FILE_BYTES);
        }
    }
    *ret_files = PL_TAKE_PTR(fl.v);
    *ret_n = n;
    return 0;
}

static int decode_strings(const json_t *list, const char *what, size_t min, const char ***ret,
                          size_t *ret_n, struct pl_error *err) {
    size_t n = json_array_size(list);
    *ret = NULL;
    *ret_n = 0;
    if (n < min)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: needs at least %zu entries", what,
                            min);
    if (n > PL_ARGV_MAX)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: more than %u entries", what,
                            PL_ARGV_MAX);
    if (n == 0)
        return 0;
    const char **v = calloc(n, sizeof(*v));
    if (!v)
        return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(list, i);
        size_t len = json_string_length(e);
        if (len > PL_ARG_MAX_BYTES || memchr(json_string_value(e), '\0', len)) {
            free(v);
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s[%zu]: longer than %u bytes or holds a NUL", what, i,
                                PL_ARG_MAX_BYTES);
        }
        v[i] = json_string_value(e);
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Collect globs: at most PL_COLLECT_MAX_GLOBS, each a relative path by
 * path_ok's rules (a glob's '*', '?' and '[' are bytes like any other
 * there), so none can name anything outside the work directory. */
static int decode_collect(const json_t *list, const char *what, const char ***ret, size_t *ret_n,
                          struct pl_error *err) {
    size_t n = json_array_size(list);
    if (n > PL_COLLECT_MAX_GLOBS)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "%s: more than %u globs", what,
                            PL_COLLECT_MAX_GLOBS);
    if (decode_strings(list, what, 0, ret, ret_n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!path_ok((*ret)[i], json_string_length(json_array_get(list, i))))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "%s[%zu]: a glob relative to the work directory, of at most %u "
                                "bytes, without '.', '..', empty or control characters",
                                what, i, PL_PATH_MAX_BYTES);
    return 0;
}

static int decode_payload(struct pl_run_request *r, bool allow_cell, struct pl_error *err) {
    const json_t *c = r->canonical;
    const char *kinds[] = {"snippet", "project", "module", "cell"};
    int count = 0;
    for (int i = 0; i < 4; i++)
        if (json_object_get(c, kinds[i])) {
            count++;
            r->kind = (enum pl_payload_kind)(PL_PAYLOAD_SNIPPET + i);
        }
    if (count != 1)
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "payload: exactly one of snippet, project or module is required "
                            "(got %d)",
                            count);

    const json_t *p = json_object_get(c, pl_payload_name(r->kind));
    switch (r->kind) {
    case PL_PAYLOAD_SNIPPET: {
        r->snippet.language = str(p, "language", NULL);
        if (!r->snippet.language || (strcmp(r->snippet.language, "javascript") != 0 &&
                                     strcmp(r->snippet.language, "python") != 0))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "snippet.language: must be \"javascript\" or \"python\"");
        r->snippet.code = str(p, "code", &r->snippet.code_len);
        if (!r->snippet.code || r->snippet.code_len == 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "snippet.code: required");
        if (r->snippet.code_len > PL_SNIPPET_MAX_BYTES)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "snippet.code: %zu bytes exceeds the limit of %u bytes",
                                r->snippet.code_len, PL_SNIPPET_MAX_BYTES);
        r->snippet.stdin_data = str(p, "stdin", &r->snippet.stdin_len);
        if (r->snippet.stdin_len > PL_STDIN_MAX_BYTES)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "snippet.stdin: exceeds the limit of %u bytes", PL_STDIN_MAX_BYTES);
        return decode_collect(json_object_get(p, "collect"), "snippet.collect", &r->collect,
                              &r->ncollect, err);
    }
    case PL_PAYLOAD_PROJECT: {
        if (decode_files(json_object_get(p, "files"), "project", &r->project.files,
                         &r->project.nfiles, err) < 0)
            return -1;
        const json_t *steps = json_object_get(p, "steps");
        size_t n = json_array_size(steps);
        if (n == 0 || n > PL_PROJECT_MAX_STEPS)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "project.steps: between 1 and %u steps are required",
                                PL_PROJECT_MAX_STEPS);
        r->project.steps = calloc(n, sizeof(*r->project.steps));
        if (!r->project.steps)
            return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
        r->project.nsteps = n;
        for (size_t i = 0; i < n; i++) {
            const json_t *s = json_array_get(steps, i);
            struct pl_step *st = &r->project.steps[i];
            char what[64];
            snprintf(what, sizeof(what), "project.steps[%zu].argv", i);
            if (decode_strings(json_object_get(s, "argv"), what, 1, &st->argv, &st->argc, err) < 0)
                return -1;
            size_t nlen = 0;
            st->name = str(s, "name", &nlen);
            if (st->name && (nlen == 0 || nlen > PL_NAME_MAX_BYTES))
                return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                    "project.steps[%zu].name: 1 to %u bytes", i, PL_NAME_MAX_BYTES);
            if (!st->name) {
                st->name_owned = malloc(32);
                if (!st->name_owned)
                    return pl_error_set(err, PL_REASON_INTERNAL, "out of memory");
                snprintf(st->name_owned, 32, "step-%zu", i + 1);
                st->name = st->name_owned;
            }
        }
        return decode_collect(json_object_get(p, "collect"), "project.collect", &r->collect,
                              &r->ncollect, err);
    }
    case PL_PAYLOAD_MODULE: {
        size_t blen = 0;
        const char *b64 = str(p, "wasm_base64", &blen);
        if (!b64 || blen == 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "module.wasm_base64: required");
        int rr =
            pl_base64_decode(b64, blen, PL_MODULE_MAX_BYTES, &r->module.wasm, &r->module.wasm_len);
        if (rr == -2)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "module.wasm_base64: the module exceeds %u bytes",
                                PL_MODULE_MAX_BYTES);
        if (rr < 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "module.wasm_base64: not base64");
        if (r->module.wasm_len < 8 || memcmp(r->module.wasm, "\0asm", 4) != 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "module.wasm_base64: not a WebAssembly binary (no \\0asm "
                                "header)");
        if (decode_strings(json_object_get(p, "args"), "module.args", 0, &r->module.args,
                           &r->module.nargs, err) < 0)
            return -1;
        r->module.stdin_data = str(p, "stdin", &r->module.stdin_len);
        if (r->module.stdin_len > PL_STDIN_MAX_BYTES)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "module.stdin: exceeds the limit of %u bytes", PL_STDIN_MAX_BYTES);
        return 0;
    }
    case PL_PAYLOAD_CELL:
        if (!allow_cell)
            return pl_error_set(
                err, PL_REASON_INVALID_REQUEST,
                "cell: a cell runs only inside a session (RunCell); Run refuses it");
        r->cell.language = str(p, "language", NULL);
        if (!r->cell.language || (strcmp(r->cell.language, "javascript") != 0 &&
                                  strcmp(r->cell.language, "python") != 0))
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "cell.language: must be \"javascript\" or \"python\"");
        r->cell.code = str(p, "code", &r->cell.code_len);
        if (!r->cell.code)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "cell.code: required");
        if (r->cell.code_len > PL_SNIPPET_MAX_BYTES)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "cell.code: %zu bytes exceeds the limit of %u bytes",
                                r->cell.code_len, PL_SNIPPET_MAX_BYTES);
        return decode_files(json_object_get(p, "files"), "cell", &r->cell.files, &r->cell.nfiles,
                            err);
    case PL_PAYLOAD_WRITE_FILES:
    case PL_PAYLOAD_READ_FILE:
    case PL_PAYLOAD_LIST_FILES:
    case PL_PAYLOAD_NONE: break; /* never a RunRequest's */
    }
    return pl_error_set(err, PL_REASON_INVALID_REQUEST, "payload: missing");
}

void pl_run_request_clear(struct pl_run_request *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->project.nfiles; i++)
        free(r->project.files[i].content);
    free(r->project.files);
    for (size_t i = 0; i < r->project.nsteps; i++) {
        free(r->project.steps[i].argv);
        free(r->project.steps[i].name_owned);
    }
    free(r->project.steps);
    free(r->collect);
    free(r->module.wasm);
    free(r->module.args);
    for (size_t i = 0; i < r->cell.nfiles; i++)
        free(r->cell.files[i].content);
    free(r->cell.files);
    for (size_t i = 0; i < r->write.nfiles; i++)
        free(r->write.files[i].content);
    free(r->write.files);
    json_decref(r->canonical);
    memset(r, 0, sizeof(*r));
}

int pl_run_request_decode(const char *body, size_t len, const struct pl_request_limits *limits,
                          struct pl_run_request *ret, struct pl_error *err) {
    PL_CLEANUP(pl_run_request_clear) struct pl_run_request r = {0};
    json_t *root = parse_body(body, len, err);
    if (!root)
        return -1;
    r.canonical = normalize(root, &run_msg, "", err);
    json_decref(root);
    if (!r.canonical)
        return -1;

    const char *floor = str(r.canonical, "minimum_isolation", NULL);
    if (floor && *floor) {
        if (pl_tier_parse(floor, &r.floor) < 0) {
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "minimum_isolation: \"%.32s\" is not a tier (none, process, "
                                "container, kernel, vm)",
                                floor);
        }
        r.has_floor = true;
    }
    size_t glen = 0;
    r.grant_profile = str(r.canonical, "grant_profile", &glen);
    if (r.grant_profile && glen == 0)
        r.grant_profile = NULL;
    if (r.grant_profile && glen > PL_NAME_MAX_BYTES) {
        return pl_error_set(err, PL_REASON_INVALID_REQUEST, "grant_profile: longer than %u bytes",
                            PL_NAME_MAX_BYTES);
    }
    json_t *t = json_object_get(r.canonical, "timeout_ms");
    r.timeout_ms = t ? (unsigned)json_integer_value(t) : 0;
    if (r.timeout_ms > limits->max_timeout_ms) {
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "timeout_ms: %u exceeds the longest allowed, %u ms", r.timeout_ms,
                            limits->max_timeout_ms);
    }
    json_t *m = json_object_get(r.canonical, "memory_mb");
    r.memory_mb = m ? (unsigned)json_integer_value(m) : 0;
    if (r.memory_mb > limits->memory_mb) {
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "memory_mb: %u exceeds the per-run allowance of %u MB", r.memory_mb,
                            limits->memory_mb);
    }
    if (decode_payload(&r, limits->allow_cell, err) < 0)
        return -1;
    *ret = PL_TAKE_STRUCT(r);
    return 0;
}

int pl_files_request_decode(enum pl_payload_kind kind, const char *body, size_t len,
                            const struct pl_files_limits *limits, struct pl_run_request *ret,
                            struct pl_error *err) {
    PL_CLEANUP(pl_run_request_clear) struct pl_run_request r = {.kind = kind};
    const struct msg *m = kind == PL_PAYLOAD_WRITE_FILES ? &write_files_msg
                          : kind == PL_PAYLOAD_READ_FILE ? &read_file_msg
                                                         : &list_files_msg;
    json_t *root = parse_body(body, len, err);
    if (!root)
        return -1;
    r.canonical = normalize(root, m, "", err);
    json_decref(root);
    if (!r.canonical)
        return -1;
    if (kind == PL_PAYLOAD_WRITE_FILES) {
        json_t *files = json_object_get(r.canonical, "files");
        if (json_array_size(files) == 0)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "files: at least one file");
        if (decode_files(files, "WriteFilesRequest", &r.write.files, &r.write.nfiles, err) < 0)
            return -1;
        for (size_t i = 0; i < r.write.nfiles; i++)
            r.write.bytes += r.write.files[i].len;
        *ret = PL_TAKE_STRUCT(r);
        return 0;
    }
    size_t plen = 0;
    const char *path = str(r.canonical, "path", &plen);
    bool is_read = kind == PL_PAYLOAD_READ_FILE;
    if (is_read ? !path || !path_ok(path, plen) : path && plen && !path_ok(path, plen))
        return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                            "path: %sa relative path inside the work directory of at most %u "
                            "bytes, without '.', '..', empty segments or control characters",
                            is_read ? "required, " : "", PL_PATH_MAX_BYTES);
    r.file.path = path ? path : "";
    json_t *v;
    if (is_read) {
        r.file.offset =
            (v = json_object_get(r.canonical, "offset")) ? (unsigned)json_integer_value(v) : 0;
        r.file.limit =
            (v = json_object_get(r.canonical, "limit")) ? (unsigned)json_integer_value(v) : 0;
        if (r.file.limit > limits->read_bytes)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST,
                                "limit: %u bytes is past this daemon's SANDBOX_FILE_READ_BYTES "
                                "(%u); read the rest with a later offset",
                                r.file.limit, limits->read_bytes);
        if (r.file.limit == 0)
            r.file.limit = limits->read_bytes;
    } else {
        r.file.depth =
            (v = json_object_get(r.canonical, "depth")) ? (unsigned)json_integer_value(v) : 0;
        if (r.file.depth > PL_FILES_MAX_DEPTH)
            return pl_error_set(err, PL_REASON_INVALID_REQUEST, "depth: %u is past the most, %u",
                                r.file.depth, PL_FILES_MAX_DEPTH);
        if (r.file.depth == 0)
            r.file.depth = 1;
    }
    *ret = PL_TAKE_STRUCT(r);
    return 0;
}
