#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turn bench/run's JSON series into a table of ratios and regenerate
docs/performance.md with the machine described."""
import datetime
import json
import os
import platform
import subprocess
import sys


def load(d, name):
    p = os.path.join(d, name + ".json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return ("%d cores (%s), %.0f GiB RAM, Linux %s, %s; node %s"
            % (os.cpu_count(), cpu, mem_kib / 1048576, platform.release(),
               platform.freedesktop_os_release().get("PRETTY_NAME", "?"), node or "absent"))


def ms(us):
    return "%.3f ms" % (us / 1000.0)


def main(d, out):
    rows = [
        ("wasm_keepalive", "plimsoll wasm snippet, HTTP keep-alive (`console.log(2)`)"),
        ("wasm_newconn", "plimsoll wasm snippet, new HTTP connection per run"),
        ("wasm_engine", "the engine alone: the provider's pool and worker, no daemon"),
        ("refusal_keepalive", "typed refusal (floor `vm` on a `process` daemon), keep-alive"),
        ("node_spawn", "`node -e 'console.log(2)'`, spawned per run"),
    ]
    docker_rows = [
        ("docker_runc_plimsoll", "plimsoll docker/runc python snippet `print(1)`, keep-alive"),
        ("docker_runc_paced", "the same at 80% of the runs' pool refill rate (Describe's pools)"),
        ("docker_runc_cli", "`docker run --rm` same image, runtime and walls (runc)"),
        ("docker_runc_js", "plimsoll docker/runc javascript snippet `console.log(1)`, paced"),
        ("docker_runsc_plimsoll", "plimsoll docker/runsc python snippet `print(1)`, keep-alive"),
        ("docker_runsc_paced", "the same at 80% of the runs' pool refill rate (Describe's pools)"),
        ("docker_runsc_cli", "`docker run --rm` same image, runtime and walls (runsc)"),
        ("docker_runsc_js", "plimsoll docker/runsc javascript snippet `console.log(1)`, paced"),
    ]
    for rt in ("runc", "runsc"):
        docker_rows += [
            ("docker_%s_project1_paced" % rt,
             "plimsoll docker/%s project, one step `python3 -c print(1)`, paced" % rt),
            ("docker_%s_project3_paced" % rt, "plimsoll docker/%s project, three such steps, paced" % rt),
            ("docker_%s_tproject1_paced" % rt, "plimsoll docker/%s project, one step `true`, paced" % rt),
            ("docker_%s_tproject3_paced" % rt, "plimsoll docker/%s project, three `true` steps, paced" % rt),
            ("docker_%s_project1" % rt,
             "plimsoll docker/%s project, one `python3` step, back to back" % rt),
            ("docker_%s_project3" % rt,
             "plimsoll docker/%s project, three `python3` steps, back to back" % rt),
            ("docker_%s_cli_project3" % rt,
             "`docker run --rm` of the same three steps (project image, %s)" % rt)]
    rows = rows + docker_rows
    data = {k: load(d, k) for k, _ in rows}
    def table_of(keys):
        out = ["| series | n | p50 | p95 | p99 |", "|---|---|---|---|---|"]
        for k, label in rows:
            v = data[k]
            if k in keys and v:
                out.append("| %s | %d | %s | %s | %s |" % (label, v["n"], ms(v["p50_us"]),
                                                         ms(v["p95_us"]), ms(v["p99_us"])))
        return "\n".join(out)
    wasm_keys = {"wasm_keepalive", "wasm_newconn", "wasm_engine", "refusal_keepalive", "node_spawn"}
    docker_keys = {k for k, _ in docker_rows}
    lines = [table_of(wasm_keys)]
    docker_table = table_of(docker_keys)
    ratios = []
    w, n = data["wasm_keepalive"], data["node_spawn"]
    if w and n:
        ratios.append("| `node -e` p50 / plimsoll wasm p50 (keep-alive) | **%.1f×** |"
                      % (n["p50_us"] / w["p50_us"]))
        ratios.append("| `node -e` p95 / plimsoll wasm p95 (keep-alive) | %.1f× |"
                      % (n["p95_us"] / w["p95_us"]))
    if w and data["wasm_engine"]:
        ratios.append("| wasm: plimsoll p50 (keep-alive) / the engine alone p50 (aim ≤ 1.5×) | "
                      "**%.2f×** |" % (w["p50_us"] / data["wasm_engine"]["p50_us"]))
    if w and data["wasm_newconn"]:
        ratios.append("| new connection p50 / keep-alive p50 | %.2f× |"
                      % (data["wasm_newconn"]["p50_us"] / w["p50_us"]))
    if w and data["refusal_keepalive"]:
        ratios.append("| run p50 / refusal p50 | %.2f× |"
                      % (w["p50_us"] / data["refusal_keepalive"]["p50_us"]))
    for rt in ("runc", "runsc"):
        p, c = data.get("docker_%s_plimsoll" % rt), data.get("docker_%s_cli" % rt)
        if p and c:
            ratios.append("| docker/%s: `docker run --rm` p50 / plimsoll p50 | **%.2f×** |"
                          % (rt, c["p50_us"] / p["p50_us"]))
    for rt in ("runc", "runsc"):
        b2b, paced = data.get("docker_%s_plimsoll" % rt), data.get("docker_%s_paced" % rt)
        if b2b and paced:
            ratios.append("| docker/%s: p95 back-to-back / p95 at a rate the pool sustains | "
                          "%.2f× |" % (rt, b2b["p95_us"] / paced["p95_us"]))
    sess = load(d, "sessions") or []
    for rt in ("runc", "runsc"):
        # Issue 37's aims: a step's own cost at most 8x a later session
        # cell's p50, a one-step project at most 2x a snippet's p50 at the
        # same pacing.
        cell = [r for r in sess if r["runtime"] == rt and r["pool"]]
        cell_ms = cell[0].get("later_cell_p50_ms") if cell else None
        snip = data.get("docker_%s_paced" % rt)
        for pre, what in (("tproject", "`true`"), ("project", "`python3 -c print(1)`")):
            one = data.get("docker_%s_%s1_paced" % (rt, pre))
            three = data.get("docker_%s_%s3_paced" % (rt, pre))
            if one and three:
                step = (three["p50_us"] - one["p50_us"]) / 2000.0
                ratios.append("| docker/%s: a %s step's own cost, (3 steps p50 − 1 step p50) / 2, "
                              "paced | %.1f ms |" % (rt, what, step))
                if cell_ms:
                    ratios.append("| docker/%s: a %s step's own cost / a later session cell "
                                  "p50 (%.1f ms; aim ≤ 8×) | **%.2f×** |"
                                  % (rt, what, cell_ms, step / cell_ms))
            if one and snip:
                ratios.append("| docker/%s: a one-step (%s) project p50 / a python snippet p50, "
                              "both paced (aim ≤ 2×) | **%.2f×** |"
                              % (rt, what, one["p50_us"] / snip["p50_us"]))
        # The same aim for a session's project calls (RunInSession with a
        # project; bench/sessions.py, pool on): 1 and 3 steps, one session.
        pp = cell[0].get("project_p50_ms", {}) if cell else {}
        if pp.get("first1") is not None and pp.get("true1"):
            ratios.append("| sessions/%s: a session's first project call p50 / a later one "
                          "(one `true` step each: %.1f / %.1f ms; the first starts the step "
                          "runner, which then waits between calls) | %.2f× |"
                          % (rt, pp["first1"], pp["true1"], pp["first1"] / pp["true1"]))
        for pre, what in (("true", "`true`"), ("py", "`python3 -c print(1)`")):
            if pp.get(pre + "1") is not None and pp.get(pre + "3") is not None and cell_ms:
                step = (pp[pre + "3"] - pp[pre + "1"]) / 2
                ratios.append("| sessions/%s: a %s step's own cost in a session's project call "
                              "(%.1f ms) / a later cell p50 (aim ≤ 8×) | **%.2f×** |"
                              % (rt, what, step, step / cell_ms))
        fp = cell[0].get("files_p50_ms", {}) if cell else {}
        for key, what in (("write1k", "WriteFiles of 1 KiB"), ("read1k", "ReadFile of 1 KiB"),
                          ("write1m", "WriteFiles of 1 MiB"), ("read1m", "ReadFile of 1 MiB")):
            if fp.get(key) is not None and cell_ms:
                ratios.append("| sessions/%s: a %s p50 (%.1f ms) / a later cell p50 | %.2f× |"
                              % (rt, what, fp[key], fp[key] / cell_ms))
        b2b, cli = data.get("docker_%s_project3" % rt), data.get("docker_%s_cli_project3" % rt)
        if b2b and cli:
            ratios.append("| docker/%s: three-step projects a minute back to back, plimsoll / "
                          "`docker run --rm` (%.0f / %.0f) | **%.2f×** |"
                          % (rt, 60e6 / b2b["mean_us"], 60e6 / cli["mean_us"],
                             cli["mean_us"] / b2b["mean_us"]))
    sess_lines = ["| runtime | warm pool | OpenSession + first Python cell p50 | min | max | n |"
                  " a later cell p50 | the same, pool refilled | waiting sandbox memory |",
                  "|---|---|---|---|---|---|---|---|---|"]
    for r in sess:
        sess_lines.append("| %s | %s | %.1f ms | %.1f ms | %.1f ms | %d | %s | %s | %s |" % (
            r["runtime"], "1 waiting" if r["pool"] else "off", r["p50_ms"], r["min_ms"],
            r["max_ms"], r["n"],
            "%.1f ms" % r["later_cell_p50_ms"] if r.get("later_cell_p50_ms") else "—",
            "%.1f ms" % r["later_cell_refilled_p50_ms"] if r.get("later_cell_refilled_p50_ms")
            else "—",
            "%.1f MiB" % (r["waiting_memory_bytes"] / 1048576) if r["waiting_memory_bytes"]
            else "—"))
    for rt in ("runc", "runsc"):
        off = [r for r in sess if r["runtime"] == rt and not r["pool"]]
        on = [r for r in sess if r["runtime"] == rt and r["pool"]]
        if off and on:
            ratios.append("| sessions/%s: open + first cell, pool off p50 / pool on p50 | "
                          "**%.2f×** |" % (rt, off[0]["p50_ms"] / on[0]["p50_ms"]))
    sess_table = "\n".join(sess_lines) if sess else "(not measured: no docker engine)"
    files_lines = ["| runtime | WriteFiles 1 KiB | ReadFile 1 KiB | WriteFiles 1 MiB | "
                   "ReadFile 1 MiB | a later cell |", "|---|---|---|---|---|---|"]
    for r in sess:
        fp = r.get("files_p50_ms") or {}
        if r["pool"] and fp:
            files_lines.append("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms |" % (
                r["runtime"], fp["write1k"], fp["read1k"], fp["write1m"], fp["read1m"],
                r["later_cell_p50_ms"]))
    files_table = ("\n".join(files_lines) if len(files_lines) > 2
                   else "(not measured: no docker engine)")
    art = load(d, "artifacts") or []
    art_lines = ["| runtime | snippet | snippet + collect | project (one step) | "
                 "project + collect |", "|---|---|---|---|---|"]
    for r in art:
        p = r["p50_ms"]
        art_lines.append("| %s | %.1f ms | %.1f ms (%.2f×) | %.1f ms | %.1f ms (%.2f×) |" % (
            r["runtime"], p["snippet"], p["snippet_collect"], p["snippet_collect"] / p["snippet"],
            p["project"], p["project_collect"], p["project_collect"] / p["project"]))
    art_table = "\n".join(art_lines) if art else "(not measured: no docker engine)"
    disp = load(d, "display") or []
    disp_lines = ["| runtime | a cell displaying a 100 KB image/png | p95 | a plain later cell | p95 |"
                  " ratio (p50) |", "|---|---|---|---|---|---|"]
    for r in disp:
        p, q = r["p50_ms"], r["p95_ms"]
        disp_lines.append("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.2f× |" % (
            r["runtime"], p["image"], q["image"], p["plain"], q["plain"], p["image"] / p["plain"]))
    disp_table = "\n".join(disp_lines) if disp else "(not measured: no docker engine)"
    e2b = load(d, "e2b") or []
    e2b_lines = ["| payload | wall p50 | the fake's share p50 | plimsoll's own p50 | p95 |"
                 " calls per run |", "|---|---|---|---|---|---|"]
    for r in e2b:
        e2b_lines.append("| %s | %.1f ms | %.1f ms | **%.1f ms** | %.1f ms | %.0f |" % (
            r["name"], r["wall_p50_ms"], r["fake_p50_ms"], r["overhead_p50_ms"],
            r["overhead_p95_ms"], r["calls_per_run"]))
    e2b_table = "\n".join(e2b_lines) if e2b else "(not measured: no docker engine)"
    mcp = load(d, "mcp")
    mcp_table = "(not measured)"
    if mcp:
        p, q = mcp["p50_ms"], mcp["p95_ms"]
        mcp_table = "\n".join(
            ["| the same `console.log(1)` snippet | p50 | p95 | p50 over Connect JSON's |",
             "|---|---|---|---|"] +
            ["| %s | %.2f ms | %.2f ms | %.2f× |" % (label, p[k], q[k], p[k] / p["connect"])
             for k, label in (("connect", "Connect JSON `Run`"),
                              ("mcp_http", "MCP `tools/call run_code`, Streamable HTTP"),
                              ("mcp_stdio", "MCP `tools/call run_code`, stdio (`plimsoll mcp`)"))])
    fleet = load(d, "fleet")
    fleet_table = "(not measured: no docker engine)"
    if fleet:
        de, sn, ce = fleet["describe"], fleet["snippets_per_s"], fleet["cell"]
        names = (("direct", "one daemon, direct"), ("haproxy", "HAProxy (`deploy/haproxy.cfg`), three daemons"),
                 ("nginx", "nginx, three daemons"))
        fleet_table = "\n".join(
            ["| path | `Describe` p50 | p95 | snippets/s (%d callers) | over direct | a later cell p50 | p95 |"
             % fleet["callers"], "|---|---|---|---|---|---|---|"] +
            ["| %s | %.2f ms | %.2f ms | %.1f | %.2f× | %.1f ms | %.1f ms |" % (
                label, de[k]["p50_ms"], de[k]["p95_ms"], sn[k], sn[k] / sn["direct"],
                ce[k]["p50_ms"], ce[k]["p95_ms"]) for k, label in names])
    proto = load(d, "protocols") or {}
    labels = {
        "connect_json_h1": "Connect, JSON, HTTP/1.1",
        "connect_proto_h1": "Connect, binary, HTTP/1.1",
        "grpc_web_h1": "gRPC-Web, HTTP/1.1",
        "grpc_h2": "gRPC, HTTP/2 (h2c)",
        "connect_proto_h2": "Connect, binary, HTTP/2 (h2c)",
    }
    proto_lines = ["| protocol | n | p50 | p95 | p99 |", "|---|---|---|---|---|"]
    for k, label in labels.items():
        v = (proto.get("latency") or {}).get(k)
        if v:
            proto_lines.append("| %s | %d | %s | %s | %s |" % (
                label, v["n"], ms(v["p50_us"]), ms(v["p95_us"]), ms(v["p99_us"])))
    tput_labels = {
        "refusals_h1_json": "typed refusals, Connect JSON, HTTP/1.1",
        "refusals_grpc_h2": "typed refusals, gRPC, HTTP/2",
        "snippets_h1_json": "snippets, Connect JSON, HTTP/1.1",
        "snippets_grpc_h2": "snippets, gRPC, HTTP/2",
    }
    proto_lines += ["", "| closed loop | connections × streams | calls/s |", "|---|---|---|"]
    for k, label in tput_labels.items():
        v = (proto.get("throughput") or {}).get(k)
        if v:
            proto_lines.append("| %s | %d × %d | **%.0f** |" % (
                label, v["connections"], v["streams"], v["req_per_s"]))
    e4 = load(d, "wasm_engine4")
    if e4:
        proto_lines.append("| the engine alone (no daemon): %d threads on as many workers | %d | "
                           "%.0f |" % (e4["threads"], e4["threads"], e4["per_s"]))
        snip = (proto.get("throughput") or {}).get("snippets_h1_json")
        if snip:
            ratios.append("| wasm: snippets/s, the engine alone / plimsoll (Connect JSON, 4 "
                          "connections) | %.2f× |" % (e4["per_s"] / snip["req_per_s"]))
    attack = load(d, "attack")
    if attack and attack.get("ratio"):
        ratios.append("| an honest wasm run's p50 under attack / on a quiet daemon (%.2f / %.2f "
                      "ms, a new HTTP/1.1 connection each; strangers at every HTTP/2 cap, "
                      "`bench/attack.py`; %d answers wrong) | %.2f× |" % (
                          attack["attack_p50_ms"], attack["quiet_p50_ms"], attack["wrong"],
                          attack["ratio"]))
    lat = proto.get("latency") or {}
    if lat.get("connect_json_h1") and lat.get("grpc_h2"):
        ratios.append("| gRPC (HTTP/2) p50 / Connect JSON (HTTP/1.1) p50 | %.2f× |"
                      % (lat["grpc_h2"]["p50_us"] / lat["connect_json_h1"]["p50_us"]))
    if lat.get("connect_json_h1") and lat.get("connect_proto_h1"):
        ratios.append("| Connect binary p50 / Connect JSON p50 (HTTP/1.1) | %.2f× |"
                      % (lat["connect_proto_h1"]["p50_us"] / lat["connect_json_h1"]["p50_us"]))
    st = proto.get("streaming")
    if st:
        proto_lines += ["", "| live output (RunStream, Connect JSON, HTTP/1.1; %d calls) | p50 | p95 |"
                        % st["n"], "|---|---|---|",
                        "| first output message (`console.log('first')`, then 100 ms of work) "
                        "| **%s** | %s |" % (ms(st["first_output_p50_us"]),
                                             ms(st["first_output_p95_us"])),
                        "| the stream's end | %s | |" % ms(st["stream_end_p50_us"]),
                        "| the same snippet's unary Run (its answer at the end) | %s | |"
                        % ms(st["unary_p50_us"])]
        ratios.append("| unary Run p50 / RunStream's first output p50 (a run of 100 ms) | "
                      "**%.0f×** |" % (st["unary_p50_us"] / st["first_output_p50_us"]))
    proto_table = "\n".join(proto_lines) if proto else "(not measured: no h2load)"
    table = "\n".join(lines)
    ratio_table = "\n".join(["| ratio | value |", "|---|---|"] + ratios)
    print(table)
    print()
    print(docker_table)
    print()
    print(ratio_table)
    doc = """# Performance

Measured by `bench/run` (one command: it installs what is missing, builds,
starts the daemon, runs every series side by side in one run and rewrites
this page). Numbers on a shared 2-core VM vary by ±30% between runs; read
them as orders of magnitude. No test asserts a speed: this page is where
speed is recorded.

- **When:** {when}
- **Machine:** {machine}
- **Client:** `build/bench/bench` (C, libcurl), one connection, sequential
  calls, 50 warm-up calls not counted; `node -e` timed as posix_spawn + wait.

## wasm provider

{table}

## docker provider

{docker_table}

### Where a project step's time goes

A step used to be an engine exec: the daemon asked the engine to create
the exec, started it on a stream of its own, read the stream to its end,
asked the engine for the exit code, then proved from the host that
nothing of the step was left. Now the container's PID 1 runs the step
([providers/docker.md](providers/docker.md#a-project-the-bootstrap-runs-each-step)),
and the engine is not asked at all between the files and the end. A
trace of the daemon through one two-step project of `true` steps under
runc, on a warm container, for the binaries before and after the change
(this machine, with other work on both cores, so slower than the table):
`strace -f -tt -T -p <plimsolld's pid> -e trace=sendto,recvfrom,write,read,openat,connect,poll,kill`
while `curl` sends `{{"project":{{"steps":[{{"argv":["true"]}},{{"argv":["true"]}}]}}}}`
to `Run`, the second such call after the daemon started:

| | before (an exec a step) | now (PID 1 runs the step) |
|---|---|---|
| a step | exec create, start: 1 ms; the exec's own stream until `true` ended and the engine closed it: 226 and 249 ms; exec inspect for its exit code: 1 ms; the host's cgroup read | the command on the attach stream (105 bytes), PID 1 spawns `true`, waits, kills and reaps, drains its stdin, writes the two markers: 6.8 and 3.5 ms from the command's write to the second marker's read; the host's cgroup read and PID 1's status: 0.4 ms |
| the end | the engine's kill, `/wait` (190 ms), an inspect, the host's proof | the cgroup's OOM count, a SIGKILL to PID 1 from the host, its thread seen exiting: 2.5 ms |
| the whole run as the caller saw it | about 700 ms | 27 ms |

So what is left of a step is PID 1's spawn of the program and its
kill-and-reap, plus the program itself: a `python3` step costs its own
start (tens of milliseconds here under runc, more under gVisor, whose
`execve` and many small file opens are each a trip through its kernel),
except in a pooled container, whose first step and first two later
`python3` steps find a Python started with the container, waiting
([providers/docker.md](providers/docker.md#the-steps-wait)).
Under runsc the daemon reads no `runsc ps` between steps (70–110 ms each
here: `time runsc --root /run/docker/runtime-runc/moby ps --format json <id>`
six times against a running runsc container): the proof between steps is
PID 1's
([security.md](security.md#a-projects-steps-under-runsc)).

In a session, a project call's steps are run by the session's step
runner, which the cleanup after the call before started and left waiting
with a Python for each `python3` step
([sessions.md](sessions.md#a-waiting-runner)). Traced the same way
(`strace -f -tt -T -p <plimsolld's pid>`, `-e trace=sendto,recvfrom,write,read,connect,poll,kill,accept4,openat,wait4`)
through a session's call of three `true` steps under runc, the second such
call after the first project call:

| | before (a runner started by the call) | now (the runner waiting) |
|---|---|---|
| before the first step | the runner's exec created and started; its Python and imports until its first marker: 191 ms | the waiting runner checked (its start time, its socket silent) and the sandbox's state read: 3.5 ms |
| a step | the command on the runner's stdin to its marker: 6 to 7 ms; the host's cgroup read | the command on the runner's socket to its marker: 11.4 ms for the first (the waiters checked), 4 ms for the others; the host's cgroup read |
| the whole call as the caller saw it | 215 ms | 27 ms |

## Load and soak

Twice the admission capacity, and soaks of 10,000 wasm and 1,000 docker
runs: [load.md](load.md) (`tests/load/test_load.py`).

## Sessions (docker)

{sess_table}

Measured by `bench/sessions.py` through the daemon: the clock runs from
`OpenSession` (with the hint `python`) to the first cell's answer (`1 + 1`);
then, once the cleanup after that call has finished, a later cell (`2 + 2`)
is timed alone, 1.5 s (runc) or 3 s (runsc) after the open. With the pool
on, the open's take has started a replacement sandbox and its two
interpreters, which may still be starting then and share the two cores
with that cell; so one more cell (`3 + 3`) is timed once Describe shows
the sessions pool full again and 2.5 s more have passed (the column "pool
refilled": what a notebook's later cell costs on an otherwise idle
daemon). The session is closed after. With the pool, each open takes a sandbox that
already runs a Python and a Node interpreter (the bench waits for the
filler between opens, so every open finds one); without it, the open
creates and starts the container and starts the Python interpreter. The
waiting sandbox's memory is the engine's cgroup figure for a pooled
container (usage minus inactive file cache), both interpreters included.
The spec's figures for comparison: about 20 ms (runc) and 30–50 ms (gVisor)
with the pool, 750 / 850 ms without; 39 / 66 MiB per waiting sandbox.
Issue 18's aims: open + first cell ≤ 10 ms (runc) and ≤ 15 ms (runsc), a
later cell ≤ 5 ms on both. A call no longer waits for the readiness check
(the engine's `/info`, 28 ms), which a keeper thread re-checks each second
while calls come ([providers/docker.md](providers/docker.md)); what is
left of a later cell is the settings read-back (an inspect of the
container, compared with its digest at open) and the cell's own frames.

### A session's file calls

{files_table}

The same run, with the pool on, after the project calls: each file call
timed as a repeated one (the same call once before, untimed), once the
cleanup of the call before has finished; 1 KiB and 1 MiB of random bytes
(so `content_base64` both ways). Each is one `docker exec` of the
bootstrap as the calls' user ([sessions.md](sessions.md#session-files)),
and the exec's start is most of a small call's time, as it was for a
project call's first step before the step runner waited between calls.

## A run's artifacts (docker)

{art_table}

Measured by `bench/artifacts.py` through the daemon: each payload writes a
1 KiB file into its work directory, and is timed with and without
`collect` naming it, in turn, at 1.5 s (runc) or 3 s (runsc) apart so each
run finds a warm container waiting; p50 of 10 each, after one untimed
round. With `collect` the run costs one `docker exec` more, the reader's
([api.md](api.md#artifacts)), after the guest ended and before the
container's end.

## A cell's display outputs (docker)

{disp_table}

Measured by `bench/display.py` through the daemon, in one session: a
Python cell that displays 100 KB of `image/png` (`display(..., raw=True)`:
made in the interpreter, sent on the uplink as one display message, parsed
and checked by the daemon, base64 in the JSON answer) and a plain cell
`x + 1`, in turn, each once the cleanup after the call before it finished
(1.5 s apart under runc, 3 s under runsc); p50 and p95 of 20 each, after
one untimed round ([sessions.md](sessions.md#display-outputs)).

## e2b provider: plumbing only

{e2b_table}

Measured by `bench/e2b.py` against the local fake of E2B's API
(`tests/fakes/e2b`), whose "VMs" are local containers: its times say
nothing about E2B, so only plimsoll's own share is reported. For each run,
the wall time the caller saw minus the time the fake spent answering that
run's calls (the fake times each request; a run's calls are sequential):
the HTTP front, admission, the control-plane and envd clients, the stream
reader, the record. On the real service a run also pays E2B's create
(hundreds of milliseconds) and the network's round trips.

## MCP (wasm)

{mcp_table}

Measured by `bench/mcp.py` against one wasm daemon, in turn, each timed
from the request written to the answer read: a Connect JSON `Run` on a
kept-alive connection, a `tools/call run_code` on `/mcp` in an
initialized MCP session on a kept-alive connection, and the same message
through one `plimsoll mcp` process (stdio, relaying to `/mcp`); p50 and
p95 of 500 each after an untimed round ([mcp.md](mcp.md)). The MCP faces
pay JSON-RPC, the tool's schema check and its result's shaping on top of
the same call of the service; stdio adds the relay's hop.

## Fleet

{fleet_table}

Measured by `bench/fleet.py`: three docker daemons (runc, one engine, this
machine's two cores) and HAProxy running `deploy/haproxy.cfg`, against
the first daemon called directly and against Debian's nginx in front of
the same three (least connections, and a route header to its daemon by one
upstream per daemon with the others as backups). `Describe`: one call at a
time on a kept-alive connection, what the proxy's hop costs a call that
does nothing. Snippets: `print(1)` in Python from six callers at once, each
on its own kept-alive connection. A later cell: `print(1)` in a session
opened on the first daemon, through each proxy by its route. On one
machine the three daemons share the two cores and the one engine, so three
behind a proxy run no more snippets a second than one does: the ratio
shows what the proxy costs, not what more machines add
([deploy.md](deploy.md)).

## Protocols

{proto_table}

Measured by `bench/protocols.py` with h2load (Debian's nghttp2-client, a
closed-loop generator that speaks HTTP/1.1 and HTTP/2) against one wasm
daemon: latency one call at a time on one connection (a `console.log(2)`
snippet), throughput on 4 connections with the generator on the same two
cores; live output with a Python caller reading RunStream's envelopes one by
one (the time from the request to the first `output` message). Why the front is libmicrohttpd and libnghttp2 behind one acceptor,
and what it cost: [internals/http.md](internals/http.md).

## Ratios

{ratios}

The aims set for the wasm provider (issue 18): 8,000 snippets/s on 4
connections and p50 ≤ 0.25 ms through HTTP with keep-alive, within 1.5× of
the engine alone measured in the same run. A run's time here includes HTTP
parsing, authentication (SHA-256 of the key), admission, the round trip to
a worker process, the run on the engine's pre-initialised image
([providers/wasm.md](providers/wasm.md), "Each run from the engine's
image"), the run record (three SHA-256 digests over canonical JSON) and
the log line. The engine alone (`build/bench/bench-engine`) is the same
snippet through the provider's pool and worker with no daemon: the worker
round trip and the run, nothing of HTTP, auth, the record or the log.
Where the time goes, sampled by `perf`, before and after the image:
[internals/profile-wasm.md](internals/profile-wasm.md).

The docker rows compare one plimsoll run (a started container from the
warm pool, attach, the payload, the stream to the bootstrap's end marker,
the cgroup's OOM count and its kill from the host; the container is
deleted after the answer) with `docker run --rm` of the same image,
runtime and walls through the Debian docker CLI, in the same run. The
aims: 30 ms (runc) and 50 ms (runsc) when a waiting container exists.
plimsoll's runs take a container from its warm pool
(`SANDBOX_DOCKER_WARM`, 2 per image by default); back-to-back calls from
one client outrun the warmer that replaces them, so some runs start a
container cold, which is what the p95 and p99 show; the paced rows run at
a rate the pool sustains, from the pool full again (`bench/run` waits
until Describe's runs pool has its target waiting). A warm container's python3 and node are
started with it and wait for the code (runc and runsc), so a paced run
pays no interpreter start; in a cold container the interpreter starts
fresh. A take holds the pool's refill back until the run ends (500 ms
at most), so a new sandbox's start does not share the cores with the
run ([providers/docker.md](providers/docker.md), "The pool stands
aside").
Where a run's time goes and how the engine's teardown left the answer's
path: [providers/docker.md](providers/docker.md), "The run's end", and
[internals/docker-handoff.md](internals/docker-handoff.md).

Reproduce: `bench/run` (set `PL_BENCH_N` for more calls per series,
`PL_BENCH_DOCKER_N` for the docker series).
""".format(when=datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), machine=machine(),
           table=table, docker_table=docker_table, ratios=ratio_table, sess_table=sess_table, files_table=files_table, art_table=art_table, disp_table=disp_table,
           e2b_table=e2b_table, proto_table=proto_table, mcp_table=mcp_table,
           fleet_table=fleet_table)
    with open(out, "w") as f:
        f.write(doc)
    print("\nwrote", out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
