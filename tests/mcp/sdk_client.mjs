// SPDX-License-Identifier: Apache-2.0
// An MCP client built only from a library nobody here wrote: the MCP
// TypeScript SDK's Client (@modelcontextprotocol/sdk), over either of its
// transports to a real plimsolld:
//   stdio  StdioClientTransport spawning `plimsoll mcp` (the CLI of the
//          build under test) with PLIMSOLL_URL and PLIMSOLL_KEY, and
//          --minimum-isolation TIER when the plan says cli_minimum_isolation
//   http   StreamableHTTPClientTransport to URL (the daemon's /mcp), with
//          Authorization: Bearer KEY and, when the plan says
//          header_minimum_isolation, Plimsoll-Minimum-Isolation: TIER
// Either may also state a floor at initialization as the capability
// experimental["org.plimsoll"].minimum_isolation (plan's
// capability_minimum_isolation).
//
// Reads a plan as JSON on stdin:
//   {transport, cli, url, key, cli_minimum_isolation?,
//    header_minimum_isolation?, capability_minimum_isolation?,
//    timeout_ms?, steps: [{op, ...}]}
// with each step one of
//   {op: "listTools"}  {op: "callTool", name, arguments}  {op: "ping"}
//   {op: "listResources"}  {op: "readResource", uri}
//   {op: "listResourceTemplates"}
// A step may say save: {NAME: "dotted.path"} to keep a value of its
// result; a later step's string "{{NAME}}" (anywhere in it) is replaced
// by that value.
//
// Prints one JSON line for the connection, {op: "connect", ok: {server,
// capabilities, instructions, protocol_version, session_id}} or {op:
// "connect", error}, then one line per step, {op, ok: <what the SDK
// returned>} or {op, error: {name, code, message, data}} (an McpError's
// code and data as the SDK gives them), then {op: "close", transport_errors:
// [...]} after ending the MCP session (DELETE over HTTP).  The test
// (test_mcp_sdk.py) judges.
//
// The tool list is read once right after connecting, so the SDK's own
// check of every structuredContent against its tool's outputSchema is on
// for every callTool (the SDK checks only tools it has listed): a result
// that breaks its schema comes back as the McpError the SDK throws.
import { readFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(readFileSync(0, "utf8"));
const out = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const options = { timeout: plan.timeout_ms ?? 120000 };

function errorLine(e) {
  return {
    name: e?.name ?? typeof e,
    code: e?.code,
    message: e?.message ?? String(e),
    data: e?.data,
  };
}

let transport;
if (plan.transport === "stdio") {
  const args = ["mcp"];
  if (plan.cli_minimum_isolation) args.push("--minimum-isolation", plan.cli_minimum_isolation);
  transport = new StdioClientTransport({
    command: plan.cli,
    args,
    env: { PLIMSOLL_URL: plan.url, PLIMSOLL_KEY: plan.key },
    stderr: "inherit", // the CLI's logs go to this process's stderr, which the test keeps
  });
} else if (plan.transport === "http") {
  const headers = { Authorization: "Bearer " + plan.key };
  if (plan.header_minimum_isolation)
    headers["Plimsoll-Minimum-Isolation"] = plan.header_minimum_isolation;
  transport = new StreamableHTTPClientTransport(new URL(plan.url + "/mcp"), {
    requestInit: { headers },
  });
} else {
  throw new Error("unknown transport " + plan.transport);
}

const capabilities = {};
if (plan.capability_minimum_isolation)
  capabilities.experimental = {
    "org.plimsoll": { minimum_isolation: plan.capability_minimum_isolation },
  };
const client = new Client({ name: "plimsoll-mcp-test", version: "0.0.0" }, { capabilities });
const transportErrors = [];
client.onerror = (e) => transportErrors.push(errorLine(e));

try {
  await client.connect(transport, options);
  await client.listTools(undefined, options); // caches every outputSchema's validator
  out({
    op: "connect",
    ok: {
      server: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      instructions: client.getInstructions(),
      protocol_version: transport.protocolVersion,
      session_id: transport.sessionId,
    },
  });
} catch (e) {
  out({ op: "connect", error: errorLine(e), transport_errors: transportErrors });
  await client.close().catch(() => {});
  process.exit(0);
}

const saved = {};
function substitute(v) {
  if (typeof v === "string")
    return v.replace(/\{\{(\w+)\}\}/g, (_, name) => {
      if (!(name in saved)) throw new Error("nothing saved as " + name);
      return String(saved[name]);
    });
  if (Array.isArray(v)) return v.map(substitute);
  if (v && typeof v === "object")
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x)]));
  return v;
}

for (const raw of plan.steps) {
  let line;
  try {
    const step = substitute(raw);
    let result;
    switch (step.op) {
      case "listTools":
        result = await client.listTools(undefined, options);
        break;
      case "callTool":
        result = await client.callTool(
          { name: step.name, arguments: step.arguments ?? {} },
          undefined,
          options,
        );
        break;
      case "listResources":
        result = await client.listResources(undefined, options);
        break;
      case "readResource":
        result = await client.readResource({ uri: step.uri }, options);
        break;
      case "listResourceTemplates":
        result = await client.listResourceTemplates(undefined, options);
        break;
      case "ping":
        result = await client.ping(options);
        break;
      default:
        throw new Error("unknown step " + step.op);
    }
    for (const [name, path] of Object.entries(step.save ?? {}))
      saved[name] = path.split(".").reduce((o, k) => o?.[k], result);
    line = { op: step.op, ok: result };
  } catch (e) {
    line = { op: raw.op, error: errorLine(e) };
  }
  out(line);
}

let terminated = null;
if (plan.transport === "http") {
  try {
    await transport.terminateSession();
    terminated = true;
  } catch (e) {
    terminated = errorLine(e);
  }
}
await client.close().catch((e) => transportErrors.push(errorLine(e)));
out({ op: "close", terminated, transport_errors: transportErrors });
process.exit(0);
