# SPDX-License-Identifier: Apache-2.0
"""Headless Chromium (Debian's) driven over the DevTools protocol with
Debian's python3-websocket: a page's console errors, exceptions and CSP
violations collected, script evaluated in it, screenshots taken.

    with Browser() as b:
        b.goto("http://127.0.0.1:7475/")
        b.wait("document.readyState === 'complete'")
        b.eval("document.title")
"""
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import sys
import time
import urllib.request

try:
    import websocket  # Debian: python3-websocket
except ImportError:  # an interpreter without it (pyenv's) borrows Debian's
    sys.path.append("/usr/lib/python3/dist-packages")
    import websocket

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class Browser:
    def __init__(self, width=1400, height=1100, args=()):
        """args: more of Chromium's switches (a certificate to trust)."""
        self.dir = tempfile.mkdtemp(prefix="plimsoll-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-port=0", "--remote-allow-origins=*",
             "--user-data-dir=" + self.dir, "--window-size=%d,%d" % (width, height)]
            + list(args) + ["about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = None
        deadline = time.monotonic() + 60
        active = os.path.join(self.dir, "DevToolsActivePort")
        while time.monotonic() < deadline and port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited %s" % self.proc.returncode)
            try:
                with open(active) as f:
                    port = int(f.readline())
            except (OSError, ValueError):
                time.sleep(0.1)
        if port is None:
            self.close()
            raise RuntimeError("chromium did not open its DevTools port")
        pages = []
        while time.monotonic() < deadline and not pages:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            if not pages:
                time.sleep(0.1)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self.ids = itertools.count(1)
        self.errors = []    # console errors, exceptions, CSP violations
        self.network_errors = []  # answers with an error status
        self.requests = []  # URLs the page asked for
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(domain + ".enable")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _event(self, m):
        method, p = m.get("method"), m.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: %s" % [a.get("value", a.get("description"))
                                                 for a in p.get("args", [])])
        elif method == "Runtime.exceptionThrown":
            self.errors.append("exception: %s" % p["exceptionDetails"].get("text"))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            # An answer with a 4xx status is logged by the browser too: an
            # API refusal the page shows is not a page error.
            (self.network_errors if p["entry"].get("source") == "network"
             else self.errors).append("log: %s" % p["entry"].get("text"))
        elif method == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])

    def send(self, method, **params):
        i = next(self.ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self._event(m)

    def eval(self, expression):
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait(self, expression, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval(expression):
                return
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s" % expression)

    def goto(self, url):
        self.send("Page.navigate", url=url)
        self.wait("document.readyState === 'complete'")

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path
