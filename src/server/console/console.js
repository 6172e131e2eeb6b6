// SPDX-License-Identifier: Apache-2.0
// The operator's console (docs/console.md).  Every call is the API's own,
// with the key typed on the page and kept in this tab's sessionStorage.
// Everything the daemon or a guest wrote is put on the page as text
// (textContent), never as markup, and long output is cut on the page.
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
    }
    const li = el("li", op.supported ? "pass" : "", text);
    li.dataset.kind = kind;
    list.appendChild(li);
  }
  // The run box offers the snippet languages this daemon runs, and no other.
  const sel = $("lang");
  const was = sel.value;
  const langs = (ops.snippet && ops.snippet.supported && ops.snippet.languages) || [];
  clear(sel);
  for (const l of langs) sel.appendChild(el("option", "", l));
  if (!langs.length) {
    const o = el("option", "", "(this daemon runs no snippets)");
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
function request() {
  const req = {snippet: {language: $("lang").value, code: $("code").value}};
  if (floor()) req.minimum_isolation = floor();
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

async function run() {
  const req = request();
  if ($("ticketlist").dataset.for !== JSON.stringify(req)) explain();
  for (const id of ["stdout", "stderr", "record"]) $(id).textContent = "";
  $("digest").textContent = "";
  let r;
  try {
    r = await call("Run", req);
  } catch (e) {
    channel("ch-infra", ["the daemon could not be reached"]);
    return;
  }
  if (r.status === 200 && r.json) {
    const a = r.json;
    channel("ch-result", ["exit code " + a.exit_code, "isolation " + a.isolation,
                          "outcome " + a.outcome + (a.timed_out ? " (timed out)" : ""),
                          a.duration_ms + " ms"]);
    $("stdout").textContent = shown(a.stdout);
    $("stderr").textContent = shown(a.stderr);
    $("record").textContent = JSON.stringify(a.record, null, 2);
    const verdict = await checkRecord(req, a);
    const d = $("digest");
    d.textContent = "record digests: " + verdict;
    d.className = "verdict " + (verdict === "checked" ? "pass" : "refuse");
    return;
  }
  const info = r.json && r.json.details && r.json.details[0] && r.json.details[0].debug;
  const reason = info ? info.reason : "";
  const dispatched = info && info.metadata ? info.metadata.dispatched === "true" : true;
  if (r.json && reason && reason !== "INTERNAL" && !dispatched)
    channel("ch-refusal", [reason + " (" + r.json.code + ")", r.json.message,
                           "dispatched: no"]);
  else
    channel("ch-infra", [(reason || "HTTP " + r.status) + (r.json ? ": " + r.json.message : ""),
                         dispatched ? "it may have run" : "nothing ran"]);
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
  for (const id of ["lang", "timeout", "code"]) {
    $(id).addEventListener("input", requestChanged);
    $(id).addEventListener("change", requestChanged);
  }
  $("explain").addEventListener("click", explain);
  $("run").addEventListener("click", run);
  health();
  useKey();
});
