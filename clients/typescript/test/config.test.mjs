// SPDX-License-Identifier: Apache-2.0
// The client's configuration (docs/clients.md, "Configuration"): the URL
// and the key from the environment, their precedence and trimming, the key
// file's errors, and no key in any error or view of the client.  Fake
// fetches only: no daemon needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import * as P from "../dist/index.js";
import { connectError } from "./helpers.mjs";

const { Client, ConfigurationError } = P;
const VARS = ["PLIMSOLL_URL", "PLIMSOLL_KEY", "PLIMSOLL_KEY_FILE"];

/** Run `fn` with the three variables exactly as given (the rest of the environment untouched). */
async function withEnv(values, fn) {
  const saved = Object.fromEntries(VARS.map((k) => [k, process.env[k]]));
  for (const k of VARS) delete process.env[k];
  Object.assign(process.env, values);
  try {
    return await fn();
  } finally {
    for (const k of VARS) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
}

/** A key to recognise: never a substring of a message by chance. */
const secretKey = () => "plk_" + randomBytes(24).toString("hex");

/** Every run of 6 characters of `key`: no text may hold any of them. */
const pieces = (key) => Array.from({ length: key.length - 5 }, (_, i) => key.slice(i, i + 6));

function assertHides(key, text) {
  for (const p of pieces(key)) assert.ok(!text.includes(p), `${JSON.stringify(p)} of the key is shown: ${text}`);
}

/** All an error shows: its string, message, stack, inspection, JSON and cause. */
function everythingSaid(e) {
  return [String(e), e.message, e.stack, inspect(e, { showHidden: true, depth: 5 }), JSON.stringify(e), inspect(e.cause)].join("\n");
}

/** A fetch that answers Describe and keeps each call's headers. */
function recorder() {
  const calls = [];
  const f = async (url, init) => {
    calls.push({ url, headers: init.headers });
    return new Response("{}", { status: 200, headers: { "Content-Type": "application/json" } });
  };
  f.calls = calls;
  return f;
}

/** The Authorization header a client sends (undefined: none). */
async function sentAuth(client, f) {
  await client.describe();
  return f.calls.at(-1).headers["Authorization"];
}

function tmp(t) {
  const dir = mkdtempSync(join(tmpdir(), "plimsoll-config-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function keyFile(dir, text, name = "key") {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

test("config: the URL and the key from the environment alone", async () => {
  const key = secretKey();
  await withEnv({ PLIMSOLL_URL: "http://daemon.test:7475", PLIMSOLL_KEY: key }, async () => {
    const f = recorder();
    const c = new Client({ fetch: f });
    assert.equal(c.url, "http://daemon.test:7475");
    assert.equal(await sentAuth(c, f), `Bearer ${key}`);
    assert.equal(f.calls[0].url, "http://daemon.test:7475/plimsoll.v1.SandboxService/Describe");
    // new Client() with no options at all: the global fetch
    const saved = globalThis.fetch;
    globalThis.fetch = f;
    try {
      const bare = new Client();
      assert.equal(bare.url, "http://daemon.test:7475");
      assert.equal(await sentAuth(bare, f), `Bearer ${key}`);
    } finally {
      globalThis.fetch = saved;
    }
  });
});

test("config: nothing set is the default URL and no key", async () => {
  await withEnv({}, async () => {
    const f = recorder();
    const c = new Client({ fetch: f });
    assert.equal(c.url, "http://127.0.0.1:7475");
    assert.equal(c.url, P.DEFAULT_URL);
    assert.equal(await sentAuth(c, f), undefined);
  });
  await withEnv({ PLIMSOLL_KEY: "", PLIMSOLL_KEY_FILE: "" }, async () => {
    const f = recorder();
    assert.equal(await sentAuth(new Client({ fetch: f }), f), undefined);
  });
});

test("config: the key file's first line, trimmed of its newline", async (t) => {
  const dir = tmp(t);
  const key = secretKey();
  for (const text of [key + "\n", key + "\r\n", "  " + key + "\t\n", key + "\nsecond line\n", key]) {
    const path = keyFile(dir, text);
    await withEnv({ PLIMSOLL_KEY_FILE: path }, async () => {
      const f = recorder();
      assert.equal(await sentAuth(new Client({ fetch: f }), f), `Bearer ${key}`, JSON.stringify(text));
    });
  }
});

test("config: PLIMSOLL_KEY wins over PLIMSOLL_KEY_FILE", async (t) => {
  const dir = tmp(t);
  const key = secretKey();
  const other = secretKey();
  const path = keyFile(dir, other + "\n");
  await withEnv({ PLIMSOLL_KEY: key, PLIMSOLL_KEY_FILE: path }, async () => {
    const f = recorder();
    assert.equal(await sentAuth(new Client({ fetch: f }), f), `Bearer ${key}`);
  });
  await withEnv({ PLIMSOLL_KEY: key, PLIMSOLL_KEY_FILE: join(dir, "missing") }, async () => {
    const f = recorder(); // the file is not even read
    assert.equal(await sentAuth(new Client({ fetch: f }), f), `Bearer ${key}`);
  });
  await withEnv({ PLIMSOLL_KEY: " \n", PLIMSOLL_KEY_FILE: path }, async () => {
    const f = recorder(); // an empty PLIMSOLL_KEY is not set
    assert.equal(await sentAuth(new Client({ fetch: f }), f), `Bearer ${other}`);
  });
});

test("config: options given win over the environment", async (t) => {
  const dir = tmp(t);
  const key = secretKey();
  const envKey = secretKey();
  const path = keyFile(dir, secretKey() + "\n");
  await withEnv({ PLIMSOLL_URL: "http://env.test", PLIMSOLL_KEY: envKey, PLIMSOLL_KEY_FILE: path }, async () => {
    const f = recorder();
    const c = new Client({ url: "http://given.test", apiKey: key, fetch: f });
    assert.equal(c.url, "http://given.test");
    assert.equal(await sentAuth(c, f), `Bearer ${key}`);
    assert.equal(await sentAuth(new Client({ url: "http://given.test", fetch: f }), f), `Bearer ${envKey}`);
    assert.equal(new Client({ apiKey: key, fetch: f }).url, "http://env.test");
  });
  await withEnv({ PLIMSOLL_KEY_FILE: join(dir, "missing") }, async () => {
    const f = recorder(); // no file is read for a given key
    assert.equal(await sentAuth(new Client({ apiKey: key, fetch: f }), f), `Bearer ${key}`);
  });
});

test("config: a given key and URL are trimmed", async () => {
  const key = secretKey();
  await withEnv({}, async () => {
    const f = recorder();
    const c = new Client({ url: " http://given.test/\n", apiKey: key + "\n", fetch: f });
    assert.equal(c.url, "http://given.test");
    assert.equal(await sentAuth(c, f), `Bearer ${key}`);
  });
  await withEnv({ PLIMSOLL_URL: "http://env.test\n", PLIMSOLL_KEY: "\t" + key + "\r\n" }, async () => {
    const f = recorder();
    const c = new Client({ fetch: f });
    assert.equal(c.url, "http://env.test");
    assert.equal(await sentAuth(c, f), `Bearer ${key}`);
  });
});

function assertKeyFileError(e, path, why) {
  assert.ok(e instanceof ConfigurationError, String(e));
  assert.ok(e instanceof P.PlimsollError);
  assert.equal(e.name, "ConfigurationError");
  assert.equal(e.path, path);
  assert.equal(e.code, "invalid_argument");
  assert.equal(e.dispatched, false);
  assert.ok(e.message.includes(`cannot read the key file ${path}: ${why}`), e.message);
  assert.ok(e.message.includes("PLIMSOLL_KEY_FILE"), e.message);
  return true;
}

test("config: a missing key file is a ConfigurationError naming it", async (t) => {
  const path = join(tmp(t), "no", "key");
  await withEnv({ PLIMSOLL_KEY_FILE: path }, async () => {
    const f = recorder();
    assert.throws(() => new Client({ fetch: f }), (e) => assertKeyFileError(e, path, "no such file or directory (ENOENT)"));
    assert.equal(f.calls.length, 0);
  });
});

test("config: a key file that is a directory", async (t) => {
  const dir = tmp(t);
  await withEnv({ PLIMSOLL_KEY_FILE: dir }, async () => {
    assert.throws(() => new Client({ fetch: recorder() }), (e) => assertKeyFileError(e, dir, "illegal operation on a directory (EISDIR)"));
  });
});

test("config: a key file that cannot be read", { skip: process.getuid?.() === 0 && "root reads a file of mode 000" }, async (t) => {
  const path = keyFile(tmp(t), secretKey() + "\n");
  chmodSync(path, 0);
  await withEnv({ PLIMSOLL_KEY_FILE: path }, async () => {
    assert.throws(() => new Client({ fetch: recorder() }), (e) => assertKeyFileError(e, path, "permission denied (EACCES)"));
  });
});

test("config: a key file whose first line is empty holds no key", async (t) => {
  const dir = tmp(t);
  for (const text of ["", "\n", "  \n" + secretKey() + "\n"]) {
    const path = keyFile(dir, text);
    await withEnv({ PLIMSOLL_KEY_FILE: path }, async () => {
      assert.throws(
        () => new Client({ fetch: recorder() }),
        (e) => e instanceof ConfigurationError && e.path === path && e.message.includes(`the key file ${path} holds no key`),
      );
    });
  }
});

test("config: without a synchronous fs, the first call reads the key file", async (t) => {
  const dir = tmp(t);
  const key = secretKey();
  const saved = process.getBuiltinModule;
  process.getBuiltinModule = undefined;
  try {
    await withEnv({ PLIMSOLL_KEY_FILE: keyFile(dir, key + "\n") }, async () => {
      const f = recorder();
      const c = new Client({ fetch: f });
      assert.equal(await sentAuth(c, f), `Bearer ${key}`);
      assert.equal(await sentAuth(c, f), `Bearer ${key}`);
    });
    const missing = join(dir, "missing");
    await withEnv({ PLIMSOLL_KEY_FILE: missing }, async () => {
      const f = recorder();
      const c = new Client({ fetch: f });
      for (let i = 0; i < 2; i++) {
        await assert.rejects(c.describe(), (e) => assertKeyFileError(e, missing, "no such file or directory (ENOENT)"));
      }
      assert.equal(f.calls.length, 0, "nothing was sent");
    });
  } finally {
    process.getBuiltinModule = saved;
  }
});

test("config: where there is no process (a browser), url must be given", () => {
  const desc = Object.getOwnPropertyDescriptor(globalThis, "process");
  const f = recorder();
  let thrown;
  let given;
  Object.defineProperty(globalThis, "process", { value: undefined, configurable: true, writable: true });
  try {
    try {
      new Client({ fetch: f });
    } catch (e) {
      thrown = e;
    }
    given = new Client({ url: "http://given.test", apiKey: "plk_k", fetch: f });
  } finally {
    Object.defineProperty(globalThis, "process", desc);
  }
  assert.ok(thrown instanceof ConfigurationError, String(thrown));
  assert.match(thrown.message, /no url given, and this runtime has no process\.env/);
  assert.match(thrown.message, /pass \{ url, apiKey \}/);
  assert.equal(given.url, "http://given.test");
});

test("config: a key that cannot be sent is refused without showing it", async (t) => {
  const dir = tmp(t);
  const cases = {
    "\n": "contains a line break",
    "\r": "contains a line break",
    "\u0000": "contains a control character",
    "\u001b": "contains a control character",
    "\u007f": "contains a control character",
    " ": "contains a space",
    "\u00e9": "contains a character that is not ASCII",
    "\u2028": "contains a character that is not ASCII",
  };
  for (const [bad, why] of Object.entries(cases)) {
    const key = secretKey();
    const broken = key.slice(0, 25) + bad + key.slice(25);
    const attempts = [() => new Client({ url: "http://given.test", apiKey: broken })];
    if (bad !== "\u0000") {
      attempts.push(() => withEnv({ PLIMSOLL_KEY: broken }, () => new Client({ fetch: recorder() })));
    }
    if (bad !== "\n") {
      const path = keyFile(dir, broken + "\n");
      attempts.push(() => withEnv({ PLIMSOLL_KEY_FILE: path }, () => new Client({ fetch: recorder() })));
    }
    for (const attempt of attempts) {
      let e;
      try {
        await attempt();
      } catch (err) {
        e = err;
      }
      assert.ok(e instanceof ConfigurationError, `${JSON.stringify(bad)}: ${e}`);
      assert.ok(e.message.includes("the API key"), e.message);
      assert.ok(e.message.includes(why), `${JSON.stringify(bad)}: ${e.message}`);
      assert.equal(e.cause, undefined);
      assertHides(key, everythingSaid(e));
    }
  }
});

test("config: no view of a client shows its key", async () => {
  const key = secretKey();
  await withEnv({ PLIMSOLL_URL: "http://env.test", PLIMSOLL_KEY: key }, async () => {
    for (const c of [new Client(), new Client({ url: "http://given.test", apiKey: key })]) {
      const text = [
        String(c),
        `${c}`,
        JSON.stringify(c),
        inspect(c, { showHidden: true, depth: 10, getters: true }),
        JSON.stringify(Object.getOwnPropertyNames(c).map((k) => c[k])),
      ].join("\n");
      assertHides(key, text);
      assert.ok(String(c).startsWith("Client(http://"), String(c));
    }
  });
});

test("config: a refused key is not in the error", async () => {
  const key = secretKey();
  const f = async () =>
    new Response(JSON.stringify(connectError("unauthenticated", "UNAUTHENTICATED", "no such key", { dispatched: "false" })), {
      status: 401,
      headers: { "Content-Type": "application/json" },
    });
  await withEnv({ PLIMSOLL_KEY: key }, async () => {
    await assert.rejects(new Client({ url: "http://daemon.test", fetch: f }).describe(), (e) => {
      assert.ok(e instanceof P.UnauthenticatedError);
      assertHides(key, everythingSaid(e));
      return true;
    });
  });
});

test("arguments: a wrongly typed number is refused at the call, naming it", async () => {
  const f = recorder();
  const c = new Client({ url: "http://daemon.test", apiKey: "plk_k", fetch: f });
  const snippet = { language: "javascript", code: "1" };
  const refused = async (promise, cls, name) => {
    await assert.rejects(promise, (e) => e instanceof cls && e.message.includes(name));
  };
  await refused(c.runSnippet({ ...snippet, timeoutMs: "5000" }), TypeError, "timeout_ms");
  await refused(c.runSnippet({ ...snippet, timeoutMs: 1.5 }), RangeError, "timeout_ms");
  await refused(c.runSnippet({ ...snippet, timeoutMs: -1 }), RangeError, "timeout_ms");
  await refused(c.runSnippet({ ...snippet, memoryMb: "64" }), TypeError, "memory_mb");
  await refused(c.run({ snippet, timeout_ms: "5000" }), TypeError, "timeout_ms");
  await refused(c.runStream({ snippet, memory_mb: 2 ** 32 }), RangeError, "memory_mb");
  await refused(c.runInSession("s", { snippet, timeout_ms: "5" }), TypeError, "timeout_ms");
  await refused(c.runCell("s", { language: "python", code: "1" }, "5"), TypeError, "timeoutMs");
  assert.equal(f.calls.length, 0, "nothing was sent");
  for (const name of ["timeoutMs", "maxAnswerBytes", "maxMessageBytes"]) {
    assert.throws(() => new Client({ url: "http://daemon.test", apiKey: "plk_k", [name]: "5000" }), (e) => e instanceof TypeError && e.message.includes(name));
  }
  assert.throws(() => new Client({ url: 7475 }), TypeError);
  assert.throws(() => new Client({ url: "http://daemon.test", apiKey: 42 }), TypeError);
});
