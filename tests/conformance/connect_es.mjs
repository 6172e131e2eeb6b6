// SPDX-License-Identifier: Apache-2.0
// A caller built only from tools nobody here wrote: the Connect TypeScript
// stack (@connectrpc/connect-node over @bufbuild/protobuf), with the
// messages protoc-gen-es generated from proto/ at test time.
//
// Reads {base_url, calls: [{mode, method, request, key, timeout_ms}]} as
// JSON on stdin; mode is "json" or "binary" (Connect's two codecs),
// "grpc-web", "grpc" or "connect-h2" (the last two over HTTP/2).  Prints
// one JSON line per call: {ok: <response, proto3 JSON with proto field
// names>} or {error: {code, message, details: [<google.rpc.ErrorInfo>]}},
// as the library decoded them; a server-streaming call's line has
// {stream: [<each message, in order>]} and, when it ended in an error,
// that error.  The test (test_connect_es.py) judges.
import { readFileSync } from "node:fs";

import { toJson, fromJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";

import { SandboxService } from "./gen/plimsoll/v1/sandbox_pb.js";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

// Connect's code names ("failed_precondition") from the library's enum.
function codeName(code) {
  return Code[code].replace(/[A-Z]/g, (c, i) => (i ? "_" : "") + c.toLowerCase());
}

const input = JSON.parse(readFileSync(0, "utf8"));
// Connect's two codecs and gRPC-Web over HTTP/1.1, gRPC and Connect over
// HTTP/2 (h2c with prior knowledge); each made only when a call asks for it.
const transports = {
  json: () =>
    createConnectTransport({ baseUrl: input.base_url, httpVersion: "1.1", useBinaryFormat: false }),
  binary: () =>
    createConnectTransport({ baseUrl: input.base_url, httpVersion: "1.1", useBinaryFormat: true }),
  "grpc-web": () => createGrpcWebTransport({ baseUrl: input.base_url, httpVersion: "1.1" }),
  grpc: () => createGrpcTransport({ baseUrl: input.base_url }),
  "connect-h2": () =>
    createConnectTransport({ baseUrl: input.base_url, httpVersion: "2", useBinaryFormat: true }),
};
const clients = {};
function client(mode) {
  clients[mode] ??= createClient(SandboxService, transports[mode]());
  return clients[mode];
}

for (const call of input.calls) {
  const method = SandboxService.method[call.method[0].toLowerCase() + call.method.slice(1)];
  const options = { headers: {} };
  if (call.key) options.headers.Authorization = "Bearer " + call.key;
  if (call.timeout_ms) options.timeoutMs = call.timeout_ms;
  const started = Date.now();
  let line = null;
  try {
    const request = fromJson(method.input, call.request ?? {});
    if (method.methodKind === "server_streaming") {
      // Each message as it came, then the end (an error ends it too).
      line = { stream: [] };
      for await (const m of client(call.mode)[method.localName](request, options))
        line.stream.push(toJson(method.output, m, { useProtoFieldName: true }));
    } else {
      const response = await client(call.mode)[method.localName](request, options);
      line = { ok: toJson(method.output, response, { useProtoFieldName: true }) };
    }
  } catch (e) {
    const err = ConnectError.from(e);
    line = {
      ...(line?.stream ? { stream: line.stream } : {}),
      error: {
        code: codeName(err.code),
        message: err.rawMessage,
        details: err
          .findDetails(ErrorInfoSchema)
          .map((d) => toJson(ErrorInfoSchema, d, { useProtoFieldName: true })),
      },
    };
  }
  line.elapsed_ms = Date.now() - started;
  process.stdout.write(JSON.stringify(line) + "\n");
}
for (const mode of Object.keys(clients)) delete clients[mode];
process.exit(0); // HTTP/2 sessions would keep the process alive
