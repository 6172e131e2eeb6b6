#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fleet benchmark: three docker daemons (runc, one engine) behind HAProxy
running deploy/haproxy.cfg, against one of them called directly, and
behind nginx (Debian's nginx-light, a configuration written here to do
what deploy/haproxy.cfg does as far as nginx can: least connections, a
route header to a named daemon with the others as its backups), in one
run:

  describe   p50 and p95 of N Describe calls, one at a time on a kept-alive
             connection: what the proxy's hop costs a call that does
             nothing
  snippets   snippets per second, N docker snippets (`print(1)`), six
             callers at once, each on its own kept-alive connection:
             direct to one daemon, then through each proxy to three
  cell       p50 and p95 of N later cells of one session (`print(1)`),
             direct and through each proxy by its route

    bench/fleet.py OUT_DIR [N]   (writes OUT_DIR/fleet.json)

Called by bench/run; report.py turns the JSON into docs/performance.md.
"""
import concurrent.futures
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
from plimsoll_test.fleet import SERVICE, Fleet  # noqa: E402
from plimsoll_test.grants import free_port  # noqa: E402

CALLERS = 6
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_conf(d, port, daemons):
    names = sorted(daemons)
    routes = "\n".join("        %s %s;" % (n, n) for n in names)
    ups = []
    for n in names:
        servers = "\n".join("        server 127.0.0.1:%d%s;" % (daemons[m], "" if m == n else " backup")
                            for m in names)
        ups.append("    upstream %s {\n%s\n        keepalive 16;\n    }" % (n, servers))
    pool = "\n".join("        server 127.0.0.1:%d;" % daemons[n] for n in names)
    return """worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/nginx.err;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(d)s/body;
    proxy_temp_path %(d)s/proxy;
    map $http_plimsoll_route $plimsoll_upstream {
        default pool;
%(routes)s
    }
    upstream pool {
        least_conn;
%(pool)s
        keepalive 16;
    }
%(ups)s
    server {
        listen 127.0.0.1:%(port)d;
        location / {
            proxy_pass http://$plimsoll_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 3660s;
            proxy_buffering off;
        }
    }
}
""" % {"d": d, "port": port, "routes": routes, "pool": pool, "ups": "\n".join(ups)}


def start_nginx(f):
    d = os.path.join(f.dir, "nginx")
    os.makedirs(d, exist_ok=True)
    port = free_port("127.0.0.1")
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as out:
        out.write(nginx_conf(d, port, f.ports))
    p = subprocess.Popen([NGINX, "-c", conf, "-p", d, "-g", "daemon off;"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/readyz")
            c.getresponse().read()
            c.close()
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("nginx did not start: " + open(os.path.join(d, "nginx.err")).read())


def calls(port, headers, method, body, n, check):
    """n calls on one kept-alive connection; each call's milliseconds."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    out = []
    try:
        for _ in range(n):
            t0 = time.monotonic()
            c.request("POST", SERVICE + method, body, headers)
            r = c.getresponse()
            data = r.read()
            out.append((time.monotonic() - t0) * 1000)
            assert r.status == 200, data
            check(json.loads(data))
    finally:
        c.close()
    return out


def series(port, headers, method, body, n, check):
    calls(port, headers, method, body, 2, check)  # untimed
    t = calls(port, headers, method, body, n, check)
    return {"p50_ms": statistics.median(t), "p95_ms": sorted(t)[max(0, int(len(t) * 0.95) - 1)]}


def throughput(port, headers, body, n):
    per = max(1, n // CALLERS)
    check = lambda b: b["stdout"] == "1\n" or (_ for _ in ()).throw(AssertionError(b))  # noqa: E731
    calls(port, headers, "Run", body, 1, check)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CALLERS) as ex:
        list(ex.map(lambda _: calls(port, headers, "Run", body, per, check), range(CALLERS)))
    return per * CALLERS / (time.monotonic() - t0)


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    f = Fleet(n=3, instance="bench-fleet").start()
    ng = None
    row = {"n": n, "callers": CALLERS}
    try:
        ng, ng_port = start_nginx(f)
        targets = {"direct": f.ports["d1"], "haproxy": f.proxy_port, "nginx": ng_port}
        h = f.headers()
        ok = lambda b: None  # noqa: E731
        row["describe"] = {k: series(p, h, "Describe", b"{}", n * 5, ok) for k, p in targets.items()}
        snippet = json.dumps({"snippet": {"language": "python", "code": "print(1)"}}).encode()
        row["snippets_per_s"] = {k: throughput(p, h, snippet, n) for k, p in targets.items()}
        status, opened, _ = f.rpc("OpenSession", {"languages": ["python"]}, route="d1")
        assert status == 200, opened
        cell = json.dumps({"session_id": opened["session_id"],
                           "cell": {"language": "python", "code": "print(1)"}}).encode()
        hr = f.headers(route="d1")
        one = lambda b: b["stdout"] == "1\n" or (_ for _ in ()).throw(AssertionError(b))  # noqa: E731
        row["cell"] = {k: series(p, hr, "RunCell", cell, n, one) for k, p in targets.items()}
    finally:
        if ng:
            ng.terminate()
            ng.wait()
        f.stop()
    d, s, c = row["describe"], row["snippets_per_s"], row["cell"]
    print("  fleet: Describe p50 direct %.2f ms, haproxy %.2f, nginx %.2f; snippets/s direct (1) "
          "%.1f, haproxy (3) %.1f (%.2fx), nginx (3) %.1f (%.2fx); a later cell p50 direct %.1f ms,"
          " haproxy %.1f, nginx %.1f" % (
              d["direct"]["p50_ms"], d["haproxy"]["p50_ms"], d["nginx"]["p50_ms"],
              s["direct"], s["haproxy"], s["haproxy"] / s["direct"], s["nginx"],
              s["nginx"] / s["direct"], c["direct"]["p50_ms"], c["haproxy"]["p50_ms"],
              c["nginx"]["p50_ms"]))
    with open(os.path.join(out, "fleet.json"), "w") as fp:
        json.dump(row, fp, indent=1)


if __name__ == "__main__":
    main()
