// SPDX-License-Identifier: Apache-2.0
// What `npm pack` puts in the published package: packed from a copy of the
// package as a fresh checkout has it (no dist, no LICENSE), so the prepack
// step builds dist and copies the repository's LICENSE in, and the `files`
// list alone decides the rest.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const PKG = fileURLToPath(new URL("..", import.meta.url));
const LICENSE = fileURLToPath(new URL("../../../LICENSE", import.meta.url));

test("npm pack ships dist's .js and .d.ts (ES module and CommonJS), README.md, LICENSE and package.json, nothing else", () => {
  const top = mkdtempSync(join(tmpdir(), "plimsoll-pack-"));
  try {
    // The package two levels below a LICENSE, as in the repository.
    const copy = join(top, "clients", "typescript");
    cpSync(LICENSE, join(top, "LICENSE"));
    cpSync(PKG, copy, {
      recursive: true,
      filter: (src) => !["node_modules", "dist", "LICENSE"].includes(src.slice(PKG.length).split("/")[0]),
    });
    symlinkSync(join(PKG, "node_modules"), join(copy, "node_modules"));
    const out = execFileSync("npm", ["pack", "--dry-run", "--json"], {
      cwd: copy,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, npm_config_update_notifier: "false", npm_config_fund: "false" },
    });
    const [packed] = JSON.parse(out);
    const files = packed.files.map((f) => f.path).sort();
    const modules = readdirSync(join(PKG, "src"))
      .filter((f) => f.endsWith(".ts"))
      .map((f) => f.slice(0, -3));
    assert.ok(modules.includes("index") && modules.includes("client"), modules.join(" "));
    const want = [
      "LICENSE",
      "README.md",
      "package.json",
      "dist/cjs/package.json",
      ...modules.flatMap((m) => [`dist/${m}.js`, `dist/${m}.d.ts`, `dist/cjs/${m}.js`, `dist/cjs/${m}.d.ts`]),
    ].sort();
    assert.deepEqual(files, want);
    const license = packed.files.find((f) => f.path === "LICENSE");
    assert.equal(license.size, statSync(LICENSE).size, "the repository's LICENSE");
    assert.ok(!existsSync(join(copy, "LICENSE")), "postpack removes the copied LICENSE");

    // The manifest it ships: the licence, publishable, every entry point packed.
    const manifest = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8"));
    assert.equal(packed.name, manifest.name);
    assert.equal(manifest.license, "Apache-2.0");
    assert.equal(manifest.private, undefined);
    const targets = [manifest.main, manifest.types];
    for (const entry of Object.values(manifest.exports)) {
      // Each entry point both ways, each with its own types.
      assert.deepEqual(Object.keys(entry), ["import", "require"]);
      for (const way of [entry.import, entry.require]) targets.push(way.types, way.default);
    }
    for (const t of targets) assert.ok(files.includes(t.replace(/^\.\//, "")), `${t} is not packed`);
  } finally {
    rmSync(top, { recursive: true, force: true });
  }
});
