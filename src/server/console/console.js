// SPDX-License-Identifier: Apache-2.0
// The operator's console (docs/console.md).  Every call is the API's own,
// with the key typed on the page and kept in this tab's sessionStorage.
// Everything the daemon or a guest wrote is put on the page as text
// (textContent), never as markup, and long output is cut on the page.  A
// cell's display outputs are no exception: an image is decoded from its
// bytes and drawn on a canvas, an HTML table is rebuilt from its cells'
// text, and everything else is text (the outputs section below).
"use strict";

const TIERS = ["none", "process", "container", "kernel", "vm"];
const SERVICE = "/plimsoll.v1.SandboxService/";
const SHOWN = 65536; // characters of one output shown on the page
const $ = (id) => document.getElementById(id);
let describe = null;
let timer = null;
let explainTimer = null;
let explainSeq = 0;

function key() { return sessionStorage.getItem("plimsoll-key") || ""; }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

async function call(method, body) {
  const r = await fetch(SERVICE + method, {
    method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + key()},
    body: JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { json = null; }
  return {status: r.status, json: json, text: text};
}

// ---- the canonical form and the record's digests (docs/records.md) ----
function canon(v) {
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v !== null && typeof v === "object")
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  return JSON.stringify(v);
}

async function sha256(v) {
  const data = new TextEncoder().encode(canon(v));
  const d = await crypto.subtle.digest("SHA-256", data);
  return Array.from(new Uint8Array(d)).map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function checkRecord(request, answer) {
  if (!window.crypto || !crypto.subtle) return "not checked: this page is not a secure context";
  const rec = answer.record;
  if (!rec) return "mismatch: the answer carries no record";
  const resp = Object.assign({}, answer);
  delete resp.record;
  const body = Object.assign({}, rec);
  delete body.digest;
  const want = [["request_sha256", await sha256(request)], ["response_sha256", await sha256(resp)],
                ["digest", await sha256(body)]];
  for (const [name, got] of want)
    if (rec[name] !== got) return "mismatch: " + name;
  return "checked";
}

// ---- health, the key ----
async function health() {
  const h = $("health");
  try {
    const r = await fetch("/readyz");
    const t = (await r.text()).trim();
    h.textContent = "health: " + t;
    h.className = "pill " + (r.ok ? "ok" : "bad");
  } catch (e) {
    h.textContent = "health: unreachable";
    h.className = "pill bad";
  }
}

async function useKey(k) {
  if (k !== undefined) sessionStorage.setItem("plimsoll-key", k);
  if (!key()) return showKeyless();
  const r = await call("Describe", {});
  if (r.status !== 200 || !r.json) {
    sessionStorage.removeItem("plimsoll-key");
    showKeyless(r.json && r.json.message ? r.json.message : "the key was refused");
    return;
  }
  describe = r.json;
  $("nokey").hidden = true;
  $("main").hidden = false;
  drawOffer();
  drawLoadLine();
  refresh();
  if (timer) clearInterval(timer);
  timer = setInterval(refresh, 2000);
}

function showKeyless(why) {
  describe = null;
  if (timer) clearInterval(timer);
  timer = null;
  $("main").hidden = true;
  $("nokey").hidden = false;
  $("nokey").textContent = why ? "Refused: " + why + "." :
    "Type a key to see this daemon. Without one the page shows the public health alone.";
}

// ---- what the daemon runs: the payload kinds and the languages offered ----
// The run box's first code, per language; a sample left as it was follows
// the language chosen.
const SAMPLES = {javascript: "console.log(6 * 7)", python: "print(6 * 7)"};

function followSample() {
  const code = $("code");
  if (Object.values(SAMPLES).includes(code.value) && SAMPLES[$("lang").value])
    code.value = SAMPLES[$("lang").value];
}

const KINDS = [["snippet", "snippets"], ["project", "projects (files and steps)"],
               ["module", "WebAssembly modules (WASI)"], ["session", "sessions"]];

function drawOffer() {
  const ops = describe.operations || {};
  const list = $("payloads");
  clear(list);
  for (const [kind, name] of KINDS) {
    const op = ops[kind] || {};
    let text = name + ": ";
    if (!op.supported) {
      text += "not offered by this daemon";
    } else {
      const langs = kind === "session" ? describe.languages || [] : op.languages || [];
      text += langs.length ? (kind === "session" ? "cells in " : "") + langs.join(", ") : "offered";
      if (op.max_timeout_ms) text += "; timeout up to " + op.max_timeout_ms + " ms";
      if (kind === "session") {
        const shows = Object.keys(ops.display || {}).filter((k) => ops.display[k] === true);
        if (shows.length) text += "; display outputs from " + shows.join(", ");
      }
    }
    const li = el("li", op.supported ? "pass" : "", text);
    li.dataset.kind = kind;
    list.appendChild(li);
  }
  // A cell runs in a session: offered where the daemon keeps sessions.
  const cells = $("kind").querySelector("option[value=cell]");
  cells.disabled = !(describe.supports_sessions && ops.session && ops.session.supported);
  if (cells.disabled) $("kind").value = "snippet";
  drawLanguages();
}

// The run box offers the languages this daemon runs for the payload
// chosen (its snippets', or its sessions' cells'), and no other.
function drawLanguages() {
  const ops = describe.operations || {};
  const sel = $("lang");
  const was = sel.value;
  const cell = mode() === "cell";
  const langs = cell ? describe.languages || [] :
    (ops.snippet && ops.snippet.supported && ops.snippet.languages) || [];
  clear(sel);
  for (const l of langs) sel.appendChild(el("option", "", l));
  if (!langs.length) {
    const o = el("option", "", cell ? "(this daemon runs no cells)" : "(this daemon runs no snippets)");
    o.value = "";
    sel.appendChild(o);
  }
  if (langs.includes(was)) sel.value = was;
  followSample();
}

// ---- the load line ----
function floor() { return $("floor").value; }

function drawLoadLine() {
  const mark = describe.isolation;
  $("painted").textContent = mark;
  $("provider").textContent = describe.provider;
  $("runtime").textContent = describe.runtime || "(none)";
  const list = $("tiers");
  clear(list);
  const f = floor();
  for (let i = TIERS.length - 1; i >= 0; i--) {
    const li = el("li", "", TIERS[i]);
    li.dataset.tier = TIERS[i];
    if (f && i <= TIERS.indexOf(f)) li.classList.add("water");
    if (TIERS[i] === f) li.classList.add("floor");
    if (TIERS[i] === mark) li.classList.add("mark");
    list.appendChild(li);
  }
  const v = $("verdict");
  if (!f) {
    v.textContent = "No floor asked: any run may go.";
    v.className = "verdict";
  } else if (TIERS.indexOf(f) > TIERS.indexOf(mark)) {
    v.textContent = "The water (" + f + ") is above the mark (" + mark +
      "): refused INSUFFICIENT_ISOLATION before anything runs.";
    v.className = "verdict refuse";
  } else {
    v.textContent = "The water (" + f + ") is at or below the mark (" + mark + ").";
    v.className = "verdict pass";
  }
  const checks = $("checks");
  clear(checks);
  for (const c of describe.startup_checks || []) checks.appendChild(el("li", "", c));
  if (!(describe.startup_checks || []).length)
    checks.appendChild(el("li", "", "this provider lists no startup check in Describe: its " +
                          "mark rests on its configuration and the daemon's own startup"));
}

// ---- the request built on the page, the ticket, the run ----
function mode() { return $("kind").value; }

// The request the run box would send: a RunRequest for a snippet; for a
// cell, RunCell's message without its session_id (what its record's
// request_sha256 covers).  A cell carries no floor: neither OpenSession
// nor RunCell takes one.
function request() {
  const code = {language: $("lang").value, code: $("code").value};
  const req = mode() === "cell" ? {cell: code} : {snippet: code};
  if (floor() && mode() !== "cell") req.minimum_isolation = floor();
  const t = parseInt($("timeout").value, 10);
  if (t > 0) req.timeout_ms = t;
  return req;
}

// The ticket describes exactly the request the run box would send: any
// change marks it stale at once and asks again shortly; an answer for a
// request that has changed since is dropped.
function requestChanged() {
  $("ticketlist").classList.add("stale");
  $("ticketverdict").textContent = "the request changed; asking the daemon…";
  $("ticketverdict").className = "verdict";
  if (explainTimer) clearTimeout(explainTimer);
  explainTimer = setTimeout(explain, 300);
}

async function explain() {
  if (explainTimer) clearTimeout(explainTimer);
  explainTimer = null;
  drawLoadLine();
  const req = request();
  const seq = ++explainSeq;
  const list = $("ticketlist");
  const v = $("ticketverdict");
  if (mode() === "cell") {
    // Explain speaks of a cell only in an open session: run opens one and
    // asks there, before the cell is sent.
    clear(list);
    list.classList.remove("stale");
    list.dataset.for = JSON.stringify(req);
    v.textContent = "A cell is explained in its session: run opens one, asks Explain there, " +
      "runs the cell and closes the session." + (floor() ? " A cell carries no floor." : "");
    v.className = "verdict";
    return;
  }
  list.classList.add("stale");
  v.textContent = "asking the daemon…";
  v.className = "verdict";
  let r;
  try {
    r = await call("Explain", {run: req});
  } catch (e) {
    if (seq !== explainSeq) return;
    clear(list);
    v.textContent = "the daemon could not be reached";
    v.className = "verdict refuse";
    return;
  }
  if (seq !== explainSeq) return; // a newer request is being explained
  drawTicket(req, r);
}

// Explain's answer r for req, as the ticket.
function drawTicket(req, r) {
  const list = $("ticketlist");
  const v = $("ticketverdict");
  clear(list);
  list.classList.remove("stale");
  list.dataset.for = JSON.stringify(req);
  if (r.status !== 200 || !r.json) {
    v.textContent = "Explain refused: " + (r.json ? r.json.message : r.text);
    v.className = "verdict refuse";
    return;
  }
  for (const c of r.json.checks) {
    const li = el("li", c.passed ? "pass" : "refuse");
    li.dataset.check = c.check;
    li.appendChild(el("b", "", c.check + " "));
    li.appendChild(el("span", "value", c.value));
    if (c.refusal)
      li.appendChild(el("span", "why", c.refusal.reason + " (" + c.refusal.code + "): " +
                         c.refusal.message));
    list.appendChild(li);
  }
  v.textContent = r.json.dispatch ? "would be dispatched" : "would be refused; nothing would run";
  v.className = "verdict " + (r.json.dispatch ? "pass" : "refuse");
}

function shown(s) {
  s = s || "";
  if (s.length <= SHOWN) return s;
  return s.slice(0, SHOWN) + "\n… (" + (s.length - SHOWN) + " more characters not shown here)";
}

function channel(which, lines) {
  for (const id of ["ch-result", "ch-refusal", "ch-infra"]) {
    const c = $(id);
    c.classList.toggle("active", id === which);
    clear(c.querySelector(".body"));
  }
  const body = $(which).querySelector(".body");
  for (const l of lines) body.appendChild(el("div", "", l));
}

// What the run, call or cell cost (docs/api.md, "Usage"), shown beside its
// time; or why the provider measured nothing.
function usageLines(a) {
  const u = a.usage;
  if (!u || typeof u !== "object")
    return a.usage_absent ? ["usage absent: " + a.usage_absent] : [];
  const peak = typeof u.memory_peak_kib === "number" ?
    "memory peak " + (u.memory_peak_kib / 1024).toFixed(1) + " MiB" : "memory peak not measured";
  return ["cpu " + (u.cpu_user_ms ?? 0) + " ms user + " + (u.cpu_system_ms ?? 0) + " ms system",
          peak + " (" + u.source + ")"];
}

function clearRun() {
  for (const id of ["stdout", "stderr", "record"]) $(id).textContent = "";
  $("digest").textContent = "";
  drawOutputs({});
}

// A 200 answer of Run or RunCell to req, in the result channel (with
// extra lines), its output, its display outputs and its checked record.
async function showAnswer(req, a, extra) {
  channel("ch-result", ["exit code " + a.exit_code, "isolation " + a.isolation,
                        "outcome " + a.outcome + (a.timed_out ? " (timed out)" : ""),
                        a.duration_ms + " ms"].concat(usageLines(a), extra));
  $("stdout").textContent = shown(a.stdout);
  $("stderr").textContent = shown(a.stderr);
  drawOutputs(a);
  $("record").textContent = JSON.stringify(a.record, null, 2);
  const verdict = await checkRecord(req, a);
  const d = $("digest");
  d.textContent = "record digests: " + verdict;
  d.className = "verdict " + (verdict === "checked" ? "pass" : "refuse");
}

// Any other answer r of the call named by what: a typed refusal where
// nothing ran, infrastructure otherwise (with extra lines).
function showFailure(r, what, extra = []) {
  const info = r.json && r.json.details && r.json.details[0] && r.json.details[0].debug;
  const reason = info ? info.reason : "";
  const dispatched = info && info.metadata ? info.metadata.dispatched === "true" : true;
  if (r.json && reason && reason !== "INTERNAL" && !dispatched)
    channel("ch-refusal", [what + reason + " (" + r.json.code + ")", r.json.message,
                           "dispatched: no"].concat(extra));
  else
    channel("ch-infra", [what + (reason || "HTTP " + r.status) + (r.json ? ": " + r.json.message : ""),
                         dispatched ? "it may have run" : "nothing ran"].concat(extra));
}

async function run() {
  const req = request();
  clearRun();
  if (mode() === "cell") return runCell(req);
  if ($("ticketlist").dataset.for !== JSON.stringify(req)) explain();
  let r;
  try {
    r = await call("Run", req);
  } catch (e) {
    channel("ch-infra", ["the daemon could not be reached"]);
    return;
  }
  if (r.status === 200 && r.json) return showAnswer(req, r.json, []);
  showFailure(r, "");
}

// A cell in a session of its own: OpenSession, Explain in it (the
// ticket), RunCell, and CloseSession whatever happened.
async function runCell(req) {
  // The ticket is this cell's, asked in its session below.
  if (explainTimer) clearTimeout(explainTimer);
  explainTimer = null;
  let r;
  try {
    r = await call("OpenSession", {languages: [req.cell.language]});
  } catch (e) {
    r = null;
  }
  if (!r || r.status !== 200 || !r.json || typeof r.json.session_id !== "string") {
    explain();
    if (r) showFailure(r, "OpenSession: ");
    else channel("ch-infra", ["the daemon could not be reached"]);
    return;
  }
  const sid = r.json.session_id;
  const seq = ++explainSeq;
  try {
    const e = await call("Explain", Object.assign({session_id: sid}, req));
    if (seq === explainSeq) drawTicket(req, e);
  } catch (e) {
    // The ticket stays as it was; RunCell says what the daemon thinks.
  }
  try {
    r = await call("RunCell", Object.assign({session_id: sid}, req));
  } catch (e) {
    r = null;
  }
  let closed;
  try {
    const c = await call("CloseSession", {session_id: sid});
    closed = c.status === 200 ? "closed after the cell" :
      "not closed (" + (c.json ? c.json.message : "HTTP " + c.status) + "): it ends when its time is up";
  } catch (e) {
    closed = "not closed (the daemon could not be reached): it ends when its time is up";
  }
  if (!r) {
    channel("ch-infra", ["RunCell: the daemon could not be reached", "it may have run",
                         "session " + closed]);
    return;
  }
  if (r.status === 200 && r.json)
    return showAnswer(req, r.json, ["a session of its own, " + closed]);
  showFailure(r, "RunCell: ", ["session " + closed]);
}

// ---- a cell's display outputs (docs/console.md, "A cell's display outputs") ----
// All of it is the guest's data.  An image is decoded from its bytes by
// the page and drawn on a canvas: no URL is ever made of the guest's
// data, and the page's Content-Security-Policy keeps img-src 'self' (a
// data: image would need img-src data:; a decoded bitmap needs nothing).
// An HTML table is rebuilt from its cells' text; anything else is text or
// a line.  Each bound below says on the page when it cut.
const OUTPUTS_SHOWN = 64;         // outputs of one answer drawn
const IMAGE_SIDE = 8192;          // pixels on either side of an image drawn
const IMAGE_PIXELS = 4096 * 4096; // pixels of one image drawn
const TABLE_ROWS = 200;           // rows of a rebuilt table
const TABLE_COLUMNS = 50;         // cells of a rebuilt table's row
const CELL_CHARS = 200;           // characters of a rebuilt table's cell
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif"];
const NOT_TEXT = new Set(["script", "style", "template"]); // in a table cell

// The daemon's text types (docs/sessions.md); every other type is base64.
function isText(mime) {
  return mime.startsWith("text/") || mime === "application/json" ||
    mime === "application/javascript" || mime === "image/svg+xml" ||
    mime.endsWith("+json") || mime.endsWith("+xml");
}

// The bytes of s when it is base64 in the standard alphabet with its
// padding and nothing else (no space, no URL alphabet); otherwise null.
function base64Bytes(s) {
  if (typeof s !== "string" || s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
  try {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(s);
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch (e) {
    return null;
  }
}

// The width and height an image's own header gives, when its bytes open
// as mime's format says (PNG's signature and IHDR, GIF's header, JPEG's
// markers up to its frame); otherwise null.
function imageSize(mime, b) {
  const be16 = (i) => (b[i] << 8) | b[i + 1];
  const be32 = (i) => b[i] * 16777216 + (b[i + 1] << 16) + (b[i + 2] << 8) + b[i + 3];
  if (mime === "image/png") {
    const head = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52];
    if (b.length < 24 || head.some((x, i) => b[i] !== x)) return null;
    return {width: be32(16), height: be32(20)};
  }
  if (mime === "image/gif") {
    const head = String.fromCharCode(...b.subarray(0, 6));
    if (b.length < 10 || (head !== "GIF87a" && head !== "GIF89a")) return null;
    return {width: b[6] | (b[7] << 8), height: b[8] | (b[9] << 8)};
  }
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return null;
  for (let i = 2; i + 9 < b.length;) {
    if (b[i] !== 0xff) return null;
    const m = b[i + 1];
    if (m === 0xff) { i++; continue; } // fill
    if (m === 0x01 || (m >= 0xd0 && m <= 0xd7)) { i += 2; continue; } // no length
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc)
      return {width: be16(i + 7), height: be16(i + 5)}; // a start of frame
    if (m === 0xd9 || m === 0xda) return null; // the end, or a scan, before any frame
    i += 2 + be16(i + 2);
  }
  return null;
}

// An image output: checked, measured and bounded, then decoded by the
// browser from its bytes (createImageBitmap: no URL, no fetch; it decodes
// bitmaps only, never SVG) and drawn on a canvas.
function drawImage(box, mime, data) {
  const name = mime.slice(6).toUpperCase();
  const bytes = base64Bytes(data);
  if (!bytes) {
    box.appendChild(el("p", "caption", mime + ": not drawn: its data is not base64"));
    return;
  }
  const size = imageSize(mime, bytes);
  if (!size || !size.width || !size.height) {
    box.appendChild(el("p", "caption", mime + ": " + bytes.length +
                       " bytes, not drawn: they are not a " + name + " image"));
    return;
  }
  const dims = size.width + " × " + size.height + " pixels";
  if (size.width > IMAGE_SIDE || size.height > IMAGE_SIDE || size.width * size.height > IMAGE_PIXELS) {
    box.appendChild(el("p", "caption", mime + ": " + dims + ", not drawn: this page draws at most " +
                       IMAGE_SIDE + " pixels a side and " + IMAGE_PIXELS + " in all"));
    return;
  }
  const canvas = el("canvas", "image");
  canvas.width = size.width;
  canvas.height = size.height;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", mime + ", " + dims);
  const caption = el("p", "caption", mime + ", " + dims);
  box.appendChild(canvas);
  box.appendChild(caption);
  createImageBitmap(new Blob([bytes], {type: mime})).then((bitmap) => {
    canvas.width = bitmap.width;
    canvas.height = bitmap.height;
    canvas.getContext("2d").drawImage(bitmap, 0, 0);
    bitmap.close();
    canvas.classList.add("drawn");
  }, () => {
    canvas.remove();
    caption.textContent = mime + ": " + bytes.length + " bytes, not drawn: the browser could not " +
      "decode them";
  });
}

// The text of a guest's table cell: its text nodes, without those of any
// script, style or template in it, its white space folded.
function cellText(cell) {
  const walk = cell.ownerDocument.createTreeWalker(cell, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => n.nodeType === Node.ELEMENT_NODE && NOT_TEXT.has(n.localName) ?
      NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  let text = "";
  for (let n = walk.nextNode(); n; n = walk.nextNode())
    if (n.nodeType === Node.TEXT_NODE) text += n.data;
  return text.replace(/\s+/g, " ").trim();
}

// A new table made on this page from the guest's table t (in an inert
// document): its rows in thead and tbody, each cell a th or td holding
// its text; nothing of t's markup, no attribute.  Bounded; what was cut
// is said under it.
function rebuiltTable(box, t) {
  const wrap = el("div", "tablewrap");
  const table = el("table", "guest");
  const head = el("thead");
  const body = el("tbody");
  const rows = t.rows;
  let widest = 0;
  let shortened = 0;
  for (let i = 0; i < Math.min(rows.length, TABLE_ROWS); i++) {
    const row = rows[i];
    const tr = el("tr");
    widest = Math.max(widest, row.cells.length);
    for (let j = 0; j < Math.min(row.cells.length, TABLE_COLUMNS); j++) {
      const cell = row.cells[j];
      let text = cellText(cell);
      if (text.length > CELL_CHARS) {
        text = text.slice(0, CELL_CHARS) + "…";
        shortened++;
      }
      tr.appendChild(el(cell.localName === "th" ? "th" : "td", "", text));
    }
    (row.parentNode.localName === "thead" ? head : body).appendChild(tr);
  }
  if (head.firstChild) table.appendChild(head);
  table.appendChild(body);
  wrap.appendChild(table);
  box.appendChild(wrap);
  const cut = [];
  if (rows.length > TABLE_ROWS) cut.push("the first " + TABLE_ROWS + " of " + rows.length + " rows");
  if (widest > TABLE_COLUMNS) cut.push("the first " + TABLE_COLUMNS + " of " + widest + " cells a row");
  if (shortened)
    cut.push(shortened + (shortened === 1 ? " cell's" : " cells'") + " text cut at " + CELL_CHARS +
             " characters");
  box.appendChild(el("p", "caption", "text/html: its first table, rebuilt from its cells' text" +
                     (cut.length ? "; shown: " + cut.join(", ") : "")));
}

// text/html, never markup on this page: parsed into an inert document
// (DOMParser: no script runs there, nothing is fetched), its first table
// rebuilt; with no table, the bundle's text/plain instead.  That document
// has this page's Content-Security-Policy too: the browser's console
// reports each inline style and handler of the HTML it refused there
// (pandas' tables carry a style attribute), though nothing there is shown.
function drawHtml(box, html, plain) {
  const t = new DOMParser().parseFromString(html, "text/html").querySelector("table");
  if (t) {
    rebuiltTable(box, t);
  } else if (typeof plain === "string") {
    box.appendChild(el("pre", "", shown(plain)));
    box.appendChild(el("p", "caption", "text/plain: its text/html holds no table"));
  } else {
    box.appendChild(el("pre", "", shown(html)));
    box.appendChild(el("p", "caption", "text/html as its source: it holds no table"));
  }
}

// One output (a MIME bundle): the types it holds, then one of them shown:
// an image, an HTML table, JSON pretty-printed, text; a binary type of
// any other kind as a line naming it and its size.
function drawOutput(o) {
  const box = el("div", "output");
  const data = o && typeof o.data === "object" && o.data !== null ? o.data : {};
  const types = Object.keys(data).filter((m) => typeof data[m] === "string");
  box.appendChild(el("p", "mime", (o && o.kind === "result" ? "result" : "display") + ": " +
                     (types.length ? types.join(", ") : "(no data)")));
  const image = IMAGE_TYPES.find((m) => types.includes(m));
  const json = types.find((m) => m === "application/json" || m.endsWith("+json"));
  const text = types.includes("text/plain") ? "text/plain" : types.find(isText);
  if (image) {
    drawImage(box, image, data[image]);
  } else if (types.includes("text/html")) {
    drawHtml(box, data["text/html"], data["text/plain"]);
  } else if (json) {
    let pretty = data[json];
    try { pretty = JSON.stringify(JSON.parse(pretty), null, 2); } catch (e) { /* as it came */ }
    box.appendChild(el("pre", "", shown(pretty)));
  } else if (text) {
    box.appendChild(el("pre", "", shown(data[text])));
    if (text === "image/svg+xml")
      box.appendChild(el("p", "caption", "image/svg+xml: its source, never drawn"));
  } else {
    for (const m of types) {
      const s = data[m];
      const bytes = s.length / 4 * 3 - (s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0);
      box.appendChild(el("p", "caption", m + ": " + Math.floor(bytes) + " bytes, not shown"));
    }
  }
  return box;
}

// An answer's outputs, in the order they came, and how many the daemon
// left out; the section is hidden when there are neither.
function drawOutputs(a) {
  const box = $("outputs");
  clear(box);
  const list = Array.isArray(a.outputs) ? a.outputs : [];
  const dropped = Number.isInteger(a.outputs_dropped) && a.outputs_dropped > 0 ? a.outputs_dropped : 0;
  for (const o of list.slice(0, OUTPUTS_SHOWN)) box.appendChild(drawOutput(o));
  if (list.length > OUTPUTS_SHOWN)
    box.appendChild(el("p", "caption more", (list.length - OUTPUTS_SHOWN) +
                       (list.length - OUTPUTS_SHOWN === 1 ? " more output" : " more outputs") +
                       " not shown here"));
  if (dropped)
    box.appendChild(el("p", "caption dropped", dropped + (dropped === 1 ? " output was" : " outputs were") +
                       " left out by the daemon (past its display bounds, or not a well-formed output)"));
  box.hidden = !(list.length || dropped);
  $("outputs-title").hidden = box.hidden;
}

// ---- readiness and limits ----
async function metrics() {
  const r = await fetch("/metrics", {headers: {"Authorization": "Bearer " + key()}});
  if (!r.ok) return {};
  const out = {};
  for (const line of (await r.text()).split("\n")) {
    if (!line || line[0] === "#") continue;
    const i = line.lastIndexOf(" ");
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

async function refresh() {
  if (!describe) return;
  health();
  let m = {};
  try { m = await metrics(); } catch (e) { m = {}; }
  const L = describe.limits || {};
  const rows = [
    ["ready", m.plimsoll_ready === 1 ? "yes" : m.plimsoll_ready === 0 ? "no" : "?"],
    ["runs in progress", (m.plimsoll_in_flight ?? "?") + " of " + L.effective_concurrency],
    ["sessions", describe.supports_sessions ? "kept (" + (describe.languages || []).join(", ") + " cells)" : "not kept"],
    ["per caller, at once", L.per_key_concurrent],
    ["rate per caller", L.rate_per_min + " a minute, burst " + L.rate_burst],
    ["default timeout", L.default_timeout_ms + " ms"],
    ["output cap", L.output_bytes + " bytes a stream"],
    ["memory a run", L.memory_mb + " MB"],
  ];
  const body = $("limitrows");
  clear(body);
  for (const [k, v] of rows) {
    const tr = el("tr");
    tr.appendChild(el("td", "", k));
    tr.appendChild(el("td", "", v));
    body.appendChild(tr);
  }
  $("refreshed").textContent = "refreshed " + new Date().toLocaleTimeString();
}

document.addEventListener("DOMContentLoaded", () => {
  $("keyform").addEventListener("submit", (e) => {
    e.preventDefault();
    const k = $("key").value.trim();
    $("key").value = "";
    useKey(k);
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem("plimsoll-key");
    showKeyless();
  });
  $("floor").addEventListener("change", explain);
  $("lang").addEventListener("change", followSample);
  $("kind").addEventListener("change", () => {
    drawLanguages();
    requestChanged();
  });
  for (const id of ["lang", "timeout", "code"]) {
    $(id).addEventListener("input", requestChanged);
    $(id).addEventListener("change", requestChanged);
  }
  $("explain").addEventListener("click", explain);
  $("run").addEventListener("click", run);
  health();
  useKey();
});
