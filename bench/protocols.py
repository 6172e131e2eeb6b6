#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The protocol family side by side against one wasm plimsolld, with
nghttp2's h2load (Debian's nghttp2-client), a closed-loop load generator
that speaks HTTP/1.1 and HTTP/2:

- latency, one connection, one call at a time: Connect JSON and Connect
  binary over HTTP/1.1, gRPC-Web over HTTP/1.1, gRPC and Connect binary
  over HTTP/2 (h2c), a `console.log(2)` snippet each;
- throughput, closed loop on 4 connections: typed refusals (floor `vm`)
  over HTTP/1.1 Connect JSON and over gRPC (8 streams a connection), and
  snippets over both;
- live output (RunStream, Connect streaming JSON over HTTP/1.1, one call
  at a time): the time to the first output message and to the end, for a
  snippet that prints, works 100 ms, and prints again, beside the same
  snippet's unary Run (whose answer comes only at the end).

    bench/protocols.py OUT_DIR [N] [PLIMSOLLD]   -> OUT_DIR/protocols.json

PLIMSOLLD (default build/plimsolld) lets one run measure another build of
the daemon the same way (docs/decisions/http2.md compares two).
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PATH = "/plimsoll.v1.SandboxService/Run"


def encode(text, msg="RunRequest"):
    return subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"),
                           "--encode=plimsoll.v1." + msg, "plimsoll/v1/sandbox.proto"],
                          input=text.encode(), capture_output=True, check=True).stdout


def envelope(b):
    return b"\x00" + len(b).to_bytes(4, "big") + b


def start(daemon, work, key):
    keys = os.path.join(work, "keys")
    sha = hashlib.sha256(key.encode()).hexdigest()
    with open(keys, "w") as f:
        f.write("bench %s\n" % sha)
    log = open(os.path.join(work, "daemon.log"), "wb")
    env = dict(os.environ, SANDBOX_PROVIDER="wasm", PLIMSOLL_KEYS_FILE=keys,
               PLIMSOLL_LISTEN="127.0.0.1:0", SANDBOX_RATE_PER_MIN="1000000",
               SANDBOX_RATE_BURST="1000000", SANDBOX_PER_KEY_CONCURRENT="64",
               SANDBOX_MAX_CONCURRENT="64")
    p = subprocess.Popen([daemon], env=env, stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(400):
        with open(os.path.join(work, "daemon.log")) as f:
            m = re.search(r'"msg":"listening","address":"([^"]+)"', f.read())
        if m:
            return p, "http://" + m.group(1)
        time.sleep(0.05)
    raise RuntimeError("plimsolld did not start")


def h2load(url, key, body_file, ctype, n, h1, clients=1, streams=1, log=None, extra=()):
    args = ["h2load", "-n", str(n), "-c", str(clients), "-m", str(streams), "-d", body_file,
            "-H", "content-type: " + ctype, "-H", "authorization: Bearer " + key]
    if h1:
        args.append("--h1")
    if log:
        args += ["--log-file", log]
    for h in extra:
        args += ["-H", h]
    out = subprocess.run(args + [url + PATH], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out).group(1))
    ok = int(re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out).group(1))
    return rps, ok, out


def percentiles(log):
    us = sorted(int(line.split("\t")[2]) for line in open(log) if line.strip())
    q = lambda p: us[min(len(us) - 1, int(p * len(us)))]  # noqa: E731
    return {"n": len(us), "p50_us": q(0.50), "p95_us": q(0.95), "p99_us": q(0.99)}


def stream_latency(url, key, code, n):
    """RunStream n times on one kept-alive connection: the first output
    message's and the end's time after the request went out, in us."""
    import http.client
    host, port = url[len("http://"):].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    body = envelope(json.dumps({"snippet": {"language": "javascript", "code": code}}).encode())
    hdr = {"Content-Type": "application/connect+json", "Authorization": "Bearer " + key}
    first, total = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        c.request("POST", "/plimsoll.v1.SandboxService/RunStream", body, hdr)
        r = c.getresponse()
        t_first = None
        while True:
            head = r.read(5)
            if len(head) < 5:
                raise RuntimeError("RunStream ended without its end message")
            msg = r.read(int.from_bytes(head[1:], "big"))
            if head[0] == 0 and t_first is None and msg.startswith(b'{"output"'):
                t_first = time.perf_counter()
            if head[0] == 2:
                break
        r.read()
        end = time.perf_counter()
        first.append((t_first - t0) * 1e6 if t_first else float("nan"))
        total.append((end - t0) * 1e6)
    c.close()
    return first, total


def unary_latency(url, key, code, n):
    import http.client
    host, port = url[len("http://"):].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    body = json.dumps({"snippet": {"language": "javascript", "code": code}})
    hdr = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        c.request("POST", PATH, body, hdr)
        c.getresponse().read()
        out.append((time.perf_counter() - t0) * 1e6)
    c.close()
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(out_dir, n=2000, daemon=None):
    daemon = daemon or os.path.join(ROOT, "build", "plimsolld")
    work = tempfile.mkdtemp(prefix="plimsoll-bench-protocols-")
    key = subprocess.run([os.path.join(os.path.dirname(daemon), "plimsoll"), "keygen", "bench"],
                         capture_output=True, text=True, check=True).stdout.split()[0]
    snippet = 'snippet { language: "javascript" code: "console.log(2)" }'
    refused = snippet + ' minimum_isolation: "vm"'
    bodies = {
        "json": json.dumps({"snippet": {"language": "javascript", "code": "console.log(2)"}}),
        "json_refused": json.dumps({"snippet": {"language": "javascript", "code": "1"},
                                    "minimum_isolation": "vm"}),
        "proto": encode(snippet), "grpc": envelope(encode(snippet)),
        "grpc_refused": envelope(encode(refused)),
    }
    files = {}
    for k, v in bodies.items():
        files[k] = os.path.join(work, k)
        with open(files[k], "wb") as f:
            f.write(v.encode() if isinstance(v, str) else v)
    proc, url = start(daemon, work, key)
    result = {"daemon": daemon, "latency": {}, "throughput": {}}
    try:
        te = ["te: trailers"]
        series = [
            ("connect_json_h1", "json", "application/json", True, ()),
            ("connect_proto_h1", "proto", "application/proto", True, ()),
            ("grpc_web_h1", "grpc", "application/grpc-web+proto", True, ()),
            ("grpc_h2", "grpc", "application/grpc", False, te),
            ("connect_proto_h2", "proto", "application/proto", False, ()),
        ]
        only_h1 = os.environ.get("PL_BENCH_H1_ONLY")  # a daemon before HTTP/2
        for name, body, ctype, h1, extra in series:
            if only_h1 and not h1:
                continue
            h2load(url, key, files[body], ctype, 200, h1, extra=extra)  # warm-up
            log = os.path.join(work, name + ".log")
            rps, ok, _ = h2load(url, key, files[body], ctype, n, h1, log=log, extra=extra)
            result["latency"][name] = dict(percentiles(log), succeeded=ok)
            print("  %-18s p50 %.3f ms  p95 %.3f ms" % (
                name, result["latency"][name]["p50_us"] / 1000,
                result["latency"][name]["p95_us"] / 1000), flush=True)
        loads = [
            ("refusals_h1_json", "json_refused", "application/json", True, 4, 1, ()),
            ("refusals_grpc_h2", "grpc_refused", "application/grpc", False, 4, 8, te),
            ("snippets_h1_json", "json", "application/json", True, 4, 1, ()),
            ("snippets_grpc_h2", "grpc", "application/grpc", False, 4, 4, te),
        ]
        for name, body, ctype, h1, c, m, extra in loads:
            if only_h1 and not h1:
                continue
            total = n * 10 if name.startswith("refusals") else n * 2
            h2load(url, key, files[body], ctype, 500, h1, c, m, extra=extra)
            rps, ok, _ = h2load(url, key, files[body], ctype, total, h1, c, m, extra=extra)
            result["throughput"][name] = {"n": total, "req_per_s": rps, "connections": c,
                                          "streams": m}
            print("  %-18s %.0f calls/s (%d connections x %d streams)" % (name, rps, c, m),
                  flush=True)
        # Live output: a first line, 100 ms of work, a second line.
        code = ("console.log('first'); let t = Date.now(); while (Date.now() - t < 100) {} "
                "console.log('second')")
        m = max(20, n // 20)
        stream_latency(url, key, code, 5)  # warm-up
        first, total = stream_latency(url, key, code, m)
        unary = unary_latency(url, key, code, m)
        result["streaming"] = {
            "n": m, "code": code,
            "first_output_p50_us": pct(first, 0.5), "first_output_p95_us": pct(first, 0.95),
            "stream_end_p50_us": pct(total, 0.5), "unary_p50_us": pct(unary, 0.5)}
        print("  RunStream first output p50 %.3f ms (p95 %.3f), its end %.1f ms; unary Run "
              "%.1f ms" % (pct(first, 0.5) / 1000, pct(first, 0.95) / 1000,
                           pct(total, 0.5) / 1000, pct(unary, 0.5) / 1000), flush=True)
    finally:
        proc.terminate()
        proc.wait()
    with open(os.path.join(out_dir, "protocols.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000,
         sys.argv[3] if len(sys.argv) > 3 else None)
