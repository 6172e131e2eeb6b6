# SPDX-License-Identifier: Apache-2.0
"""The operator's console in a real browser: Debian's headless Chromium
driven over the DevTools protocol (plimsoll_test.browser) against a real
daemon.  The page loads under its Content-Security-Policy with no console
error; without a key it asks for nothing but the public health; with one
it draws the load line from Describe; the floor above the mark gives the
refusal in Explain's ticket and in a real run; a snippet's output and its
checked record digests; guest output shown as text, never as markup, and a
very long output cut on the page; the security headers; the setting that
turns the page off.  Screenshots of three floors (below, at and above the
mark) are saved as the test's artefacts, in the build's
meson-logs/console/ (and in PL_CONSOLE_SHOTS, when set, for docs/).

Run: cd tests/console && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_console
"""
import json
import os
import re
import sys
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.browser import Browser  # noqa: E402
from plimsoll_test.docker import start_docker_daemon  # noqa: E402
from plimsoll_test.harness import BUILD, Daemon  # noqa: E402

SHOTS = [os.path.join(BUILD, "meson-logs", "console")]
if os.environ.get("PL_CONSOLE_SHOTS"):
    SHOTS.append(os.environ["PL_CONSOLE_SHOTS"])
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def clipped(b):
    """The elements cut at their section's right edge, or a section that
    scrolls sideways, at the browser's width (1400 px)."""
    return b.eval("""(() => { const out = [];
      for (const s of document.querySelectorAll('section')) {
        const r = s.getBoundingClientRect();
        if (s.scrollWidth > s.clientWidth + 1) out.push(s.id + ' scrolls');
        for (const e of s.querySelectorAll('h2, h3, p, li, label, select, button')) {
          const x = e.getBoundingClientRect();
          if (x.width && (x.right > r.right + 1 || e.scrollWidth > e.clientWidth + 1))
            out.push(s.id + ' ' + e.tagName + ' ' + (e.id || e.textContent.slice(0, 30)));
        }
      } return out; })()""")


class Console(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(env={"SANDBOX_PROVIDER": "wasm"}).start()
        cls.url = "http://%s:%d/" % (cls.d.host, cls.d.port)
        try:
            cls.b = Browser()
        except Exception:
            cls.d.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.b.close()
        cls.d.stop()

    def shot(self, name):
        for d in SHOTS:
            self.b.screenshot(os.path.join(d, name + ".png"))

    def text(self, id_):
        return self.b.eval("document.getElementById(%s).textContent" % json.dumps(id_))

    def set_floor(self, floor):
        self.b.eval("(() => { const f = document.getElementById('floor'); f.value = %s;"
                    " f.dispatchEvent(new Event('change')); })()" % json.dumps(floor))
        self.b.wait("document.getElementById('ticketverdict').textContent.startsWith('would')")

    def set_code(self, code, lang="javascript"):
        # As typing does: the value, then the input event the page listens to.
        self.b.eval("(() => { const c = document.getElementById('code'); c.value = %s;"
                    " document.getElementById('lang').value = %s;"
                    " c.dispatchEvent(new Event('input')); })()"
                    % (json.dumps(code), json.dumps(lang)))

    def wait_ticket_current(self):
        """Until the ticket on the page is Explain's answer for the request
        the run box would send now."""
        self.b.wait("document.getElementById('ticketlist').dataset.for === JSON.stringify(request())"
                    " && !document.getElementById('ticketlist').classList.contains('stale')")

    def visible(self, id_):
        return self.b.eval("document.getElementById(%s).getClientRects().length > 0" % json.dumps(id_))

    def clipped(self):
        return clipped(self.b)

    def run_snippet(self):
        self.b.eval("document.querySelectorAll('.channel.active').forEach(c => c.classList.remove('active'))")
        self.b.eval("document.getElementById('run').click()")
        self.b.wait("document.querySelector('.channel.active') !== null")
        return self.b.eval("document.querySelector('.channel.active').id")

    def test_the_page(self):
        b = self.b
        b.goto(self.url)
        # Without a key: the public health alone, nothing else asked for.
        b.wait("document.getElementById('health').textContent === 'health: ready'")
        self.assertTrue(b.eval("document.getElementById('main').hidden"))
        # Hidden as drawn, not only as marked: no panel shows, the prompt does.
        self.assertFalse(self.visible("main"))
        self.assertTrue(self.visible("nokey"))
        self.shot("keyless")
        asked = {u[len(self.url) - 1:] for u in b.requests if u.startswith(self.url)}
        # The browser asks for the icon on its own schedule (a CI run saw the
        # list read before it had), so the icon may or may not be in it yet.
        self.assertLessEqual({"/", "/console.css", "/console.js", "/readyz"}, asked)
        self.assertLessEqual(asked, {"/", "/console.css", "/console.js", "/favicon.svg", "/readyz"})
        # A wrong key: refused, nothing shown.
        b.eval("(() => { document.getElementById('key').value = 'not-a-key';"
               " document.getElementById('keyform').requestSubmit(); })()")
        b.wait("document.getElementById('nokey').textContent.startsWith('Refused')")
        self.assertTrue(b.eval("document.getElementById('main').hidden"))
        # The key, kept for the tab and never in the page's address.
        b.eval("(() => { document.getElementById('key').value = %s;"
               " document.getElementById('keyform').requestSubmit(); })()"
               % json.dumps(self.d.keys["alice"]))
        b.wait("!document.getElementById('main').hidden && "
               "document.getElementById('painted').textContent === 'process'")
        self.assertEqual(b.eval("document.getElementById('key').value"), "")
        self.assertEqual(b.eval("sessionStorage.getItem('plimsoll-key')"), self.d.keys["alice"])
        self.assertIn("configuration plus startup checks, never attestation", self.text("claim"))
        self.assertEqual(b.eval("document.querySelector('#tiers li.mark').dataset.tier"), "process")
        self.assertGreater(b.eval("document.querySelectorAll('#checks li').length"), 0)
        b.wait("document.getElementById('limitrows').children.length > 0")
        self.assertIn("runs in progress", self.text("limitrows"))
        self.assertTrue(self.visible("main"))
        self.assertFalse(self.visible("nokey"))
        # What it runs, from Describe: the wasm daemon's JavaScript alone.
        self.assertEqual(b.eval("Array.from(document.getElementById('lang').options, o => o.value)"),
                         ["javascript"])
        kinds = b.eval("Object.fromEntries(Array.from(document.querySelectorAll('#payloads li'),"
                       " l => [l.dataset.kind, l.textContent]))")
        self.assertTrue(kinds["snippet"].startswith("snippets: javascript"), kinds)
        self.assertEqual(kinds["project"], "projects (files and steps): not offered by this daemon")
        self.assertTrue(kinds["module"].startswith("WebAssembly modules (WASI): offered"), kinds)
        self.assertEqual(kinds["session"], "sessions: not offered by this daemon")
        self.assertIn("refused as out of memory", self.text("checks"))

        # The water above the mark: refused in the ticket and by a real run.
        self.set_code("console.log(6 * 7)")
        self.set_floor("vm")
        self.assertEqual(self.text("ticketverdict"), "would be refused; nothing would run")
        self.assertEqual(b.eval("document.querySelector('#ticketlist li.refuse').dataset.check"),
                         "isolation_floor")
        self.assertIn("INSUFFICIENT_ISOLATION", self.text("ticketlist"))
        self.assertIn("above the mark", self.text("verdict"))
        self.assertEqual(self.run_snippet(), "ch-refusal")
        self.assertIn("INSUFFICIENT_ISOLATION", self.text("ch-refusal"))
        self.assertEqual(self.clipped(), [])
        self.shot("floor-above")

        # The ticket follows the request: a timeout typed past the longest
        # allowed is in the next ticket, refused there, without a click.
        b.eval("(() => { const t = document.getElementById('timeout'); t.value = '999999';"
               " t.dispatchEvent(new Event('input')); })()")
        self.assertIn("stale", b.eval("document.getElementById('ticketlist').className"))
        self.wait_ticket_current()
        self.assertEqual(json.loads(b.eval("document.getElementById('ticketlist').dataset.for"))
                         ["timeout_ms"], 999999)
        self.assertIn("999999", self.text("ticketlist"))
        b.eval("(() => { const t = document.getElementById('timeout'); t.value = '';"
               " t.dispatchEvent(new Event('input')); })()")
        self.wait_ticket_current()
        self.assertNotIn("timeout_ms", b.eval("document.getElementById('ticketlist').dataset.for"))

        # At the mark, then below it: dispatched, and a real run's output and
        # record, its digests checked in the page.
        self.set_floor("process")
        self.assertEqual(self.text("ticketverdict"), "would be dispatched")
        self.shot("floor-at")
        self.set_floor("none")
        self.assertEqual(self.run_snippet(), "ch-result")
        self.assertEqual(self.text("stdout"), "42\n")
        b.wait("document.getElementById('digest').textContent !== ''")
        self.assertEqual(self.text("digest"), "record digests: checked")
        self.shot("floor-below")

        # Guest output is text, never markup; a very long one is cut.
        hostile = "<img src=x onerror=\"document.title='owned'\"><b>bold</b><script>x()</script>"
        self.set_code("console.log(%s)" % json.dumps(hostile))
        self.assertEqual(self.run_snippet(), "ch-result")
        self.assertEqual(self.text("stdout"), hostile + "\n")
        self.assertEqual(b.eval("document.querySelectorAll('#stdout *').length"), 0)
        self.assertNotEqual(b.eval("document.title"), "owned")
        self.set_code("console.log('y'.repeat(300000))")
        self.assertEqual(self.run_snippet(), "ch-result")
        out = self.text("stdout")
        self.assertLess(len(out), 66000)
        self.assertIn("more characters not shown here", out)

        # Nothing went wrong in the page: no console error, no exception, no
        # CSP violation; the only error statuses are the refusals it showed
        # (the wrong key's 401, the floor's 400).
        self.assertEqual(b.errors, [])
        self.assertEqual([e.rsplit("status of ", 1)[1][:3] for e in b.network_errors],
                         ["401", "400"], b.network_errors)

    def test_headers(self):
        for path in ("/", "/console.js", "/console.css", "/healthz"):
            with urllib.request.urlopen(self.url[:-1] + path, timeout=10) as r:
                self.assertEqual(r.headers["Content-Security-Policy"], CSP, path)
                self.assertEqual(r.headers["X-Content-Type-Options"], "nosniff", path)
                self.assertEqual(r.headers["X-Frame-Options"], "DENY", path)
        with urllib.request.urlopen(self.url, timeout=10) as r:
            self.assertTrue(r.headers["Content-Type"].startswith("text/html"))
            page = r.read().decode()
        self.assertNotIn("<script>", page)  # scripts come from /console.js alone
        self.assertIsNone(re.search(r"\son[a-z]+\s*=", page))  # no inline handler
        self.assertNotIn("style=", page)


class Runsc(unittest.TestCase):
    """A docker daemon under runsc with sessions on: the mark is kernel, and
    the page says what proved it (the canaries saw gVisor's kernel, not the
    host's), both languages, and every payload kind."""

    def test_what_proved_the_mark(self):
        d = start_docker_daemon("runsc", "console-runsc", timeout=180, SANDBOX_MAX_SESSIONS="2")
        try:
            with Browser() as b:
                b.goto("http://%s:%d/" % (d.host, d.port))
                b.wait("document.getElementById('health').textContent === 'health: ready'")
                b.eval("(() => { document.getElementById('key').value = %s;"
                       " document.getElementById('keyform').requestSubmit(); })()"
                       % json.dumps(d.keys["alice"]))
                b.wait("document.getElementById('painted').textContent === 'kernel'")
                checks = b.eval("Array.from(document.querySelectorAll('#checks li'), l => l.textContent)")
                self.assertTrue(any(c.startswith("under runsc each canary read a /proc/version that "
                                                 "is not the host's") for c in checks), checks)
                self.assertTrue(any(c.startswith("one real session") for c in checks), checks)
                self.assertEqual(b.eval("Array.from(document.getElementById('lang').options,"
                                        " o => o.value)"), ["python", "javascript"])
                # The sample code is the language's own.
                self.assertEqual(b.eval("document.getElementById('code').value"), "print(6 * 7)")
                kinds = b.eval("Array.from(document.querySelectorAll('#payloads li.pass'),"
                               " l => l.dataset.kind)")
                self.assertEqual(kinds, ["snippet", "project", "module", "session"])
                b.eval("(() => { const f = document.getElementById('floor'); f.value = 'kernel';"
                       " f.dispatchEvent(new Event('change')); })()")
                b.wait("document.getElementById('ticketverdict').textContent === 'would be dispatched'")
                self.assertEqual(clipped(b), [])
                for shots in SHOTS:
                    b.screenshot(os.path.join(shots, "runsc.png"))
                self.assertEqual(b.errors, [])
        finally:
            d.stop()


class Off(unittest.TestCase):
    def test_the_page_can_be_turned_off(self):
        d = Daemon(env={"SANDBOX_PROVIDER": "wasm", "PLIMSOLL_CONSOLE": "off"}).start()
        try:
            for path in ("/", "/console.js"):
                with self.assertRaises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen("http://%s:%d%s" % (d.host, d.port, path), timeout=10)
                self.assertEqual(e.exception.code, 404)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
