/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_mcp.c: libFuzzer harness for the MCP server's body path
 * (src/server/api_mcp.c): the input's first byte picks the headers (an
 * initialized MCP session's id or none or a stranger's; a protocol
 * version; a floor), the rest is the body POSTed to /mcp, through the
 * real API on the Disabled provider, so a tools/call reaches its tool and
 * the service's refusal.  Every answer must be JSON-RPC's: a 202 or 204
 * with no body, or a JSON object with "jsonrpc": "2.0"; then the same
 * bytes go through api_mcp_wrap as a refusal's body. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/server/api_int.h"
#include "../src/server/mcp_sessions.h"
#include "fixture.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct pl_config config;
static struct pl_provider provider;
static struct pl_api api;
static char sid[PL_MCP_ID_LEN + 1];

static const char *setting(const char *name, void *userdata) {
    (void)userdata;
    if (strcmp(name, "PLIMSOLL_MCP_SESSIONS") == 0)
        return "64";
    return strcmp(name, "PLIMSOLL_KEYS_FILE") == 0 ? "/dev/null" : NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_api_init("fuzz_mcp", setting, &config, &provider, &api);
    api.mcp_sessions = pl_mcp_sessions_new(&config);
    struct pl_error err = {0};
    if (!api.mcp_sessions ||
        pl_mcp_session_open(api.mcp_sessions, "fuzzer", PL_TIER_NONE, "2025-11-25", sid, &err) <
            0 ||
        pl_mcp_session_set_initialized(api.mcp_sessions, sid, "fuzzer") < 0)
        abort();
    return 0;
}

static void check_answer(const struct pl_api_response *rs, bool response) {
    if (rs->status == 202 || rs->status == 204) {
        if (rs->body_len)
            abort();
        return;
    }
    json_t *v = json_loadb(rs->body, rs->body_len, 0, NULL);
    const char *jr = json_string_value(json_object_get(v, "jsonrpc"));
    if (!v || !jr || strcmp(jr, "2.0") != 0 ||
        (response && !(json_object_get(v, "result") || json_object_get(v, "error"))))
        abort(); /* every other answer is one JSON-RPC response */
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    unsigned pick = data[0];
    static const char *const versions[] = {NULL, "2025-11-25", "2025-06-18", "1999-01-01"};
    static const char *const floors[] = {NULL, "none", "vm", "steel"};
    struct pl_api_request rq = {
        .http_method = "POST",
        .path = "/mcp",
        .content_type = "application/json",
        .authorization = "Bearer fuzz-key",
        .host = "127.0.0.1:7475",
        .mcp_session_id = (pick & 3) == 0   ? NULL
                          : (pick & 3) == 1 ? sid
                                            : "0123",
        .mcp_protocol_version = versions[(pick >> 2) & 3],
        .mcp_floor = floors[(pick >> 4) & 3],
        .body = (const char *)data + 1,
        .body_len = size - 1,
    };
    struct pl_api_response rs;
    pl_api_handle(&api, &rq, &rs);
    check_answer(&rs, true);
    pl_api_response_clear(&rs);
    /* The bytes as a refusal's body, rewritten into JSON-RPC's shape. */
    struct pl_api_response w = {.status = 400 + (pick & 0x3f), .content_type = "application/json"};
    w.body = malloc(size);
    if (!w.body)
        return 0;
    memcpy(w.body, data + 1, size - 1);
    w.body[size - 1] = '\0';
    w.body_len = size - 1;
    api_mcp_wrap(&w); /* a body already JSON-RPC's is left as it is */
    check_answer(&w, false);
    pl_api_response_clear(&w);
    return 0;
}
