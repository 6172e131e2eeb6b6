// SPDX-License-Identifier: Apache-2.0
// Builds dist/ from src/ with the pinned TypeScript (npm ci first): the ES
// module build in dist/ (tsconfig.json) and the CommonJS build in dist/cjs/
// (tsconfig.cjs.json), whose package.json says "commonjs" so that Node and
// TypeScript read its .js and .d.ts files as CommonJS.  `npm run build`
// runs it, and `npm pack` (prepack) with --license, which also copies the
// repository's LICENSE in (postpack removes the copy).
import { spawn } from "node:child_process";
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

process.chdir(fileURLToPath(new URL(".", import.meta.url)));
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync("dist", { recursive: true, force: true });
// The two builds at once: each is one compiler process, mostly on one core.
const built = await Promise.all(
  ["tsconfig.json", "tsconfig.cjs.json"].map(
    (project) =>
      new Promise((resolve) =>
        spawn(process.execPath, [tsc, "-p", project], { stdio: "inherit" }).on("close", (code) => resolve(code)),
      ),
  ),
);
if (built.some((code) => code !== 0)) process.exit(1);
writeFileSync("dist/cjs/package.json", JSON.stringify({ type: "commonjs" }) + "\n");
if (process.argv.includes("--license")) copyFileSync("../../LICENSE", "LICENSE");
