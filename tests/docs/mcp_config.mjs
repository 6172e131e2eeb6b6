// SPDX-License-Identifier: Apache-2.0
// An MCP client's configuration as docs/mcp.md shows it, run by the MCP
// TypeScript SDK's client (installed by tests/mcp/setup) the way an MCP
// client reads it: each server of "mcpServers" is started (command, args,
// env) over stdio, or reached (type "http", url, headers with ${VAR}
// expanded from the given environment) over Streamable HTTP.  Reads
// {config, cli, env} on stdin; `plimsoll` as a command is cli.  Prints one
// JSON line per server: {server, tools, instructions, run} or {server, error}.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const sdk = join(dirname(fileURLToPath(import.meta.url)), "..", "mcp", "node_modules",
                 "@modelcontextprotocol", "sdk", "dist", "esm", "client");
const { Client } = await import(join(sdk, "index.js"));
const { StdioClientTransport } = await import(join(sdk, "stdio.js"));
const { StreamableHTTPClientTransport } = await import(join(sdk, "streamableHttp.js"));

const plan = JSON.parse(readFileSync(0, "utf8"));
const expand = (s) => s.replace(/\$\{(\w+)\}/g, (_, v) => plan.env[v] ?? "");
let failed = false;
for (const [name, conf] of Object.entries(plan.config.mcpServers)) {
  const line = { server: name };
  const client = new Client({ name: "docs", version: "1.0.0" });
  try {
    let transport;
    if (conf.type === "http" || conf.url) {
      const headers = Object.fromEntries(Object.entries(conf.headers ?? {}).map(([k, v]) => [k, expand(v)]));
      transport = new StreamableHTTPClientTransport(new URL(conf.url), { requestInit: { headers } });
    } else {
      transport = new StdioClientTransport({
        command: conf.command === "plimsoll" ? plan.cli : conf.command,
        args: conf.args ?? [],
        env: { PATH: plan.env.PATH, ...(conf.env ?? {}) },
        cwd: process.cwd(),
        stderr: "inherit",
      });
    }
    await client.connect(transport);
    line.instructions = client.getInstructions();
    line.tools = (await client.listTools()).tools.map((t) => t.name);
    const r = await client.callTool({ name: "run_code",
                                      arguments: { language: "javascript", code: "console.log(6 * 7)" } });
    line.run = r.structuredContent ?? { content: r.content, isError: r.isError };
    await client.close();
  } catch (e) {
    line.error = String(e?.message ?? e);
    failed = true;
  }
  process.stdout.write(JSON.stringify(line) + "\n");
}
process.exit(failed ? 1 : 0);
