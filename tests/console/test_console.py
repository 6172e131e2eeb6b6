# SPDX-License-Identifier: Apache-2.0
"""The operator's console in a real browser: Debian's headless Chromium
driven over the DevTools protocol (plimsoll_test.browser) against a real
daemon.  The page loads under its Content-Security-Policy with no console
error; without a key it asks for nothing but the public health; with one
it draws the load line from Describe; the floor above the mark gives the
refusal in Explain's ticket and in a real run; a snippet's output and its
checked record digests; guest output shown as text, never as markup, and a
very long output cut on the page; the security headers; the setting that
turns the page off.  On a docker daemon whose sessions run on the data
image, a cell's display outputs in the run box (Outputs): a matplotlib
chart drawn from its PNG, a DataFrame's table rebuilt from its text, a
JPEG, a GIF and JavaScript's display(); and hostile ones: HTML with
scripts, handlers, frames and javascript: links, which leaves nothing of
its markup on the page but a table of text and runs nothing, an image
that is not one, SVG shown as its source, outputs the daemon left out.
Screenshots of three floors (below, at and above the mark) and of the
chart are saved as the test's artefacts, in the build's
meson-logs/console/ (and in PL_CONSOLE_SHOTS, when set, for docs/);
PL_CONSOLE_CHART=1 writes the chart's as docs/images/console-chart.png.

Run: cd tests/console && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_console
"""
import base64
import json
import os
import re
import struct
import sys
import unittest
import zlib
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from plimsoll_test.browser import Browser  # noqa: E402
from plimsoll_test.docker import engine, start_docker_daemon  # noqa: E402
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
        # No sessions, so no cell: the run box sends snippets only.
        self.assertTrue(b.eval("document.querySelector('#kind option[value=cell]').disabled"))
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
                self.assertFalse(b.eval("document.querySelector('#kind option[value=cell]')"
                                        ".disabled"))
                b.eval("(() => { const f = document.getElementById('floor'); f.value = 'kernel';"
                       " f.dispatchEvent(new Event('change')); })()")
                b.wait("document.getElementById('ticketverdict').textContent === 'would be dispatched'")
                self.assertEqual(clipped(b), [])
                for shots in SHOTS:
                    b.screenshot(os.path.join(shots, "runsc.png"))
                self.assertEqual(b.errors, [])
        finally:
            d.stop()


def png(width, height, rgb=(47, 128, 199)):
    """A PNG of width × height pixels of one colour, made here."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    raw = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


DATA = "plimsoll/data:latest"
CHART = os.path.join(HERE, "..", "..", "docs", "images", "console-chart.png")

# A chart and a table, as docs/sessions.md's example draws them: a figure
# (400 × 300 pixels), displayed, and a DataFrame as the cell's value.
CHART_CELL = """import matplotlib.pyplot as plt
import pandas as pd
frame = pd.DataFrame({"n": [1, 2, 3, 4, 5], "square": [1, 4, 9, 16, 25]})
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.plot(frame["n"], frame["square"], marker="o")
ax.set_title("squares")
display(fig)
frame"""

# HTML a guest hopes the page renders: a script, handlers, a frame,
# javascript: links, styles that would hide the page, fetches that would
# say it was rendered; and in it, a table whose cells hold the same.
HOSTILE_HTML = (
    "<script>window.pwned = 'script'; document.title = 'owned'</script>"
    "<img src='/pwned-img' onerror=\"window.pwned = 'img'\">"
    "<iframe src=\"javascript:parent.pwned = 'iframe'\"></iframe><iframe src='/pwned-frame'></iframe>"
    "<a href=\"javascript:window.pwned = 'link'\" id='pwned-link'>click</a>"
    "<style>body { display: none }</style><link rel='stylesheet' href='/pwned-css'>"
    "<base href='http://pwned.invalid/'><meta http-equiv='refresh' content='0; url=/pwned-refresh'>"
    "<svg onload=\"window.pwned = 'svg'\"><circle r='5'/></svg>"
    "<table onclick=\"window.pwned = 'table'\" style='color: red' class='evil' id='runbox'>"
    "<style>td { display: none }</style>"
    "<thead><tr><th onmouseover=\"window.pwned = 'th'\">name"
    "<script>window.pwned = 'th script'</script></th><th>value</th></tr></thead>"
    "<tbody><tr><td><img src='/pwned-cell' onerror=\"window.pwned = 'cell img'\">alpha</td>"
    "<td><a href=\"javascript:window.pwned = 'cell link'\">1</a></td></tr>"
    "<tr><td>beta <b>bold</b></td><td><iframe src='/pwned-cell-frame'></iframe>2</td></tr>"
    "</tbody></table><table><tr><td>a second table</td></tr></table>")
SVG = ("<svg xmlns='http://www.w3.org/2000/svg' width='20' height='20' "
       "onload=\"window.pwned = 'svg'\"><script>window.pwned = 'svg script'</script>"
       "<rect width='20' height='20'/></svg>")
HOSTILE_CELL = """HTML, SVG = %r, %r
# 300 rows of 60 cells, one of them 500 characters long.
BIG = "<table>%%s</table>" %% "".join(
    "<tr>%%s</tr>" %% "".join("<td>%%s</td>" %% ("x" * 500 if (r, c) == (1, 1) else "%%d.%%d" %% (r, c))
                            for c in range(60)) for r in range(300))
display({"text/html": HTML, "text/plain": "the plain text"}, raw=True)
display({"text/html": "<p onclick='x()'>no table here</p><script>window.pwned = 'p'</script>",
         "text/plain": "<b>plain</b> instead"}, raw=True)
display({"image/png": b"this is not a PNG at all"}, raw=True)
display({"image/svg+xml": SVG}, raw=True)
display({"application/json": '{"a": [1, 2], "b": "<i>x</i>"}'}, raw=True)
display({"application/pdf": b"%%PDF-1.4 not really"}, raw=True)
display({"text/html": BIG}, raw=True)
for i in range(6):
    display(i)
""" % (HOSTILE_HTML, SVG)

# What the browser reports when it parses a guest's HTML in the inert
# document the page makes of it, which has the page's policy: each inline
# handler, inline style and base it refused there (nothing of it is shown).
REFUSED_IN_INERT = re.compile(
    r"log: (Executing inline event handler|Applying inline style|Setting the document's base URI"
    r" to '[^']*') violates the following Content Security Policy directive")


def page_errors(b):
    """The browser's errors but the policy's refusals in inert documents."""
    return [e for e in b.errors if not REFUSED_IN_INERT.match(e)]


# The page's elements an output may hold, and their attributes.
OWN = """(() => { const bad = [];
  for (const e of document.querySelectorAll('#outputs *')) {
    const allowed = e.localName === 'canvas' ? ['class', 'width', 'height', 'role', 'aria-label']
                                             : ['class'];
    if (!['div', 'p', 'pre', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'canvas']
          .includes(e.localName)) bad.push(e.localName);
    for (const a of e.getAttributeNames()) if (!allowed.includes(a)) bad.push(e.localName + '@' + a);
  } return bad; })()"""

ROWS = """Array.from(document.querySelectorAll('#outputs .output')[%d].querySelectorAll('tr'),
  r => Array.from(r.cells, c => c.localName + ':' + c.textContent))"""


class Outputs(unittest.TestCase):
    """A cell's display outputs in the run box, on a docker daemon (runc)
    whose sessions run on the data image: the run box's cell mode opens a
    session, asks Explain there, runs the cell and closes the session."""

    @classmethod
    def setUpClass(cls):
        status, _ = engine("GET", "/images/%s/json" % DATA)
        if status != 200:
            raise RuntimeError("%s is not built: run scripts/build/images" % DATA)
        cls.d = start_docker_daemon("runc", "console-outputs", timeout=240,
                                    SANDBOX_MAX_SESSIONS="2", SANDBOX_DOCKER_PROJECT_IMAGE=DATA,
                                    SANDBOX_DOCKER_WARM="0", SANDBOX_DISPLAY_OUTPUTS="12")
        try:
            cls.b = Browser()
            cls.b.goto("http://%s:%d/" % (cls.d.host, cls.d.port))
            cls.b.wait("document.getElementById('health').textContent === 'health: ready'")
            cls.b.eval("(() => { document.getElementById('key').value = %s;"
                       " document.getElementById('keyform').requestSubmit(); })()"
                       % json.dumps(cls.d.keys["alice"]))
            cls.b.wait("document.getElementById('painted').textContent === 'container'")
        except Exception:
            cls.d.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.b.close()
        cls.d.stop()

    def setUp(self):
        del self.b.errors[:]  # each test reads its own

    def text(self, id_):
        return self.b.eval("document.getElementById(%s).textContent" % json.dumps(id_))

    def cell(self, code, lang="python", held=()):
        """code run as a cell from the run box: its channel, once its
        outputs are drawn; the page left no session open (but those held
        by the test)."""
        b = self.b
        b.eval("(() => { const k = document.getElementById('kind'); k.value = 'cell';"
               " k.dispatchEvent(new Event('change')); const l = document.getElementById('lang');"
               " l.value = %s; const c = document.getElementById('code'); c.value = %s;"
               " c.dispatchEvent(new Event('input')); })()" % (json.dumps(lang), json.dumps(code)))
        b.eval("document.querySelectorAll('.channel.active').forEach(c => c.classList.remove('active'))")
        b.eval("document.getElementById('run').click()")
        b.wait("document.querySelector('.channel.active') !== null", timeout=120)
        b.wait("document.getElementById('digest').textContent !== '' ||"
               " !document.getElementById('ch-result').classList.contains('active')")
        # Every image decoded and drawn, or said to be not drawn.
        b.wait("document.querySelectorAll('#outputs canvas:not(.drawn)').length === 0")
        status, body = self.d.rpc("ListSessions", {})
        self.assertEqual(status, 200, body)
        self.assertEqual([s["session_id"] for s in body["sessions"]
                          if s["state"] != "ended" and s["session_id"] not in held], [])
        return b.eval("document.querySelector('.channel.active').id")

    def outputs(self):
        """Each output's head line and captions."""
        return self.b.eval("Array.from(document.querySelectorAll('#outputs .output'), o =>"
                           " [o.querySelector('.mime').textContent,"
                           "  Array.from(o.querySelectorAll('.caption'), c => c.textContent)])")

    def test_a_chart_and_a_table(self):
        b = self.b
        # What it runs, from Describe: cells, and what their outputs can be.
        self.assertIn("display outputs from python, javascript, matplotlib, pandas",
                      b.eval("document.querySelector('#payloads li[data-kind=session]').textContent"))
        self.assertEqual(self.cell(CHART_CELL), "ch-result")
        # The cell's own ticket: Explain asked in its session, for its request.
        self.assertEqual(self.text("ticketverdict"), "would be dispatched")
        self.assertEqual(b.eval("document.getElementById('ticketlist').dataset.for"),
                         b.eval("JSON.stringify(request())"))
        self.assertEqual(json.loads(b.eval("JSON.stringify(request())")),
                         {"cell": {"language": "python", "code": CHART_CELL}})
        result = b.eval("Array.from(document.querySelectorAll('#ch-result .body div'),"
                        " d => d.textContent)")
        self.assertEqual(result[:3], ["exit code 0", "isolation container", "outcome completed"])
        self.assertRegex(result[3], r"^\d+ ms$")
        # Its usage beside its time, from the container's cgroup.
        self.assertRegex(result[4], r"^cpu \d+ ms user \+ \d+ ms system$")
        self.assertRegex(result[5], r"^memory peak \d+\.\d MiB \(cgroup\)$")
        self.assertEqual(result[6], "a session of its own, closed after the cell")
        self.assertEqual(self.text("digest"), "record digests: checked")
        # The figure: drawn from its PNG at its own size, not blank.
        self.assertEqual(self.outputs(), [
            ["display: image/png, text/plain", ["image/png, 400 × 300 pixels"]],
            ["result: text/html, text/plain",
             ["text/html: its first table, rebuilt from its cells' text"]]])
        self.assertEqual(b.eval("(() => { const c = document.querySelector('#outputs canvas');"
                                " return [c.width, c.height]; })()"), [400, 300])
        inked = b.eval("(() => { const c = document.querySelector('#outputs canvas');"
                       " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                       " let n = 0; for (let i = 0; i < d.length; i += 4)"
                       " if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) n++; return n; })()")
        self.assertGreater(inked, 1000)
        # The frame: its table, rebuilt from its text.
        self.assertEqual(b.eval(ROWS % 1), [
            ["th:", "th:n", "th:square"], ["th:0", "td:1", "td:1"], ["th:1", "td:2", "td:4"],
            ["th:2", "td:3", "td:9"], ["th:3", "td:4", "td:16"], ["th:4", "td:5", "td:25"]])
        self.assertEqual(b.eval(OWN), [])
        self.assertEqual(clipped(b), [])
        self.shot_chart()
        # No error but the policy refusing the style attribute pandas puts
        # on its header row, in the inert document.
        self.assertEqual(page_errors(b), [])

    def shot_chart(self):
        """The run box down to its outputs: the test's artefact, and
        docs/images/console-chart.png when PL_CONSOLE_CHART=1."""
        clip = self.b.eval("(() => { const s = document.getElementById('runbox').getBoundingClientRect();"
                           " const o = document.getElementById('outputs').getBoundingClientRect();"
                           " return {x: s.left + scrollX, y: s.top + scrollY, width: s.width,"
                           " height: o.bottom - s.top + 12, scale: 1}; })()")
        data = base64.b64decode(self.b.send("Page.captureScreenshot", format="png", clip=clip,
                                            captureBeyondViewport=True)["data"])
        paths = [os.path.join(d, "chart.png") for d in SHOTS]
        if os.environ.get("PL_CONSOLE_CHART") == "1":
            paths.append(CHART)
        for path in paths:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        # The picture in docs/console.md, however it was made: a PNG, small.
        with open(CHART, "rb") as f:
            doc = f.read()
        self.assertEqual(doc[:8], b"\x89PNG\r\n\x1a\n")
        self.assertLess(len(doc), 100000)

    def test_other_image_formats(self):
        b = self.b
        code = ("import io\nfrom PIL import Image\n"
                "def of(fmt, size, colour):\n"
                "    buf = io.BytesIO()\n"
                "    Image.new('RGB', size, colour).save(buf, fmt)\n"
                "    return buf.getvalue()\n"
                "display({'image/jpeg': of('JPEG', (30, 20), 'red')}, raw=True)\n"
                "display({'image/gif': of('GIF', (12, 8), 'blue')}, raw=True)\n"
                "display({'image/png': %r}, raw=True)\n" % png(7, 5))
        self.assertEqual(self.cell(code), "ch-result")
        self.assertEqual(b.eval("Array.from(document.querySelectorAll('#outputs canvas.drawn'),"
                                " c => [c.width, c.height])"), [[30, 20], [12, 8], [7, 5]])
        # The PNG's one colour, as drawn.
        self.assertEqual(b.eval("Array.from(document.querySelectorAll('#outputs canvas')[2]"
                                ".getContext('2d').getImageData(3, 2, 1, 1).data)"), [47, 128, 199, 255])
        # JavaScript's display(): bytes as a PNG, a string as HTML.
        js = ("display(Buffer.from(%s, 'base64'), 'image/png');\n"
              "display('<table><tr><th>k</th><td>v</td></tr></table>', 'text/html');\n"
              "display({a: 1});" % json.dumps(base64.b64encode(png(9, 4)).decode()))
        self.assertEqual(self.cell(js, "javascript"), "ch-result")
        self.assertEqual(b.eval("Array.from(document.querySelectorAll('#outputs canvas.drawn'),"
                                " c => [c.width, c.height])"), [[9, 4]])
        self.assertEqual(b.eval(ROWS % 1), [["th:k", "td:v"]])
        self.assertEqual(b.eval("document.querySelectorAll('#outputs pre')[0].textContent"),
                         '{\n  "a": 1\n}')
        self.assertEqual(b.eval(OWN), [])
        self.assertEqual(b.errors, [])

    def test_hostile_outputs(self):
        b = self.b
        self.assertEqual(self.cell(HOSTILE_CELL), "ch-result")
        heads = self.outputs()
        self.assertEqual(len(heads), 12, heads)
        # Nothing of the guest's markup on the page but the rebuilt table,
        # nothing of it ran, nothing of it was fetched.
        self.assertIsNone(b.eval("window.pwned"))
        self.assertEqual(b.eval("document.title"), "plimsoll console")
        self.assertEqual(b.eval(OWN), [])
        self.assertEqual(b.eval("document.querySelectorAll('iframe, img, a, svg, style, base,"
                                " meta[http-equiv]').length"), 0)
        self.assertEqual(b.eval("Array.from(document.querySelectorAll('link'),"
                                " l => l.getAttribute('href'))"), ["/console.css", "/favicon.svg"])
        self.assertEqual(b.eval("Array.from(document.scripts, s => s.getAttribute('src'))"),
                         ["/console.js"])
        self.assertEqual(b.eval("document.querySelectorAll('#runbox').length"), 1)
        self.assertNotEqual(b.eval("getComputedStyle(document.body).display"), "none")
        self.assertEqual([u for u in b.requests if "pwned" in u], [])
        # The inert document the HTML was parsed in has the page's policy:
        # the browser reports each handler and inline style it refused
        # there, and nothing else went wrong.
        self.assertEqual(page_errors(b), [])
        self.assertGreater(len(b.errors), 0)
        # The first table, of text, in thead and tbody as the guest's was.
        self.assertEqual(heads[0], ["display: text/html, text/plain",
                                    ["text/html: its first table, rebuilt from its cells' text"]])
        self.assertEqual(b.eval(ROWS % 0), [["th:name", "th:value"], ["td:alpha", "td:1"],
                                             ["td:beta bold", "td:2"]])
        self.assertEqual(b.eval("document.querySelectorAll('#outputs .output')[0]"
                                ".querySelectorAll('thead tr, tbody tr').length"), 3)
        # HTML without a table: its text/plain instead, as text.
        self.assertEqual(heads[1], ["display: text/html, text/plain",
                                    ["text/plain: its text/html holds no table"]])
        self.assertEqual(b.eval("document.querySelectorAll('#outputs .output')[1]"
                                ".querySelector('pre').textContent"), "<b>plain</b> instead")
        # An image/png that is no PNG: a line, no image.
        self.assertEqual(heads[2], ["display: image/png",
                                    ["image/png: 24 bytes, not drawn: they are not a PNG image"]])
        self.assertEqual(b.eval("document.querySelectorAll('#outputs canvas').length"), 0)
        # SVG: its source, as text.
        self.assertEqual(heads[3], ["display: image/svg+xml", ["image/svg+xml: its source, never drawn"]])
        self.assertEqual(b.eval("document.querySelectorAll('#outputs .output')[3]"
                                ".querySelector('pre').textContent"), SVG)
        # JSON pretty-printed; another binary type named with its size.
        self.assertEqual(b.eval("document.querySelectorAll('#outputs .output')[4]"
                                ".querySelector('pre').textContent"),
                         json.dumps({"a": [1, 2], "b": "<i>x</i>"}, indent=2))
        self.assertEqual(heads[5], ["display: application/pdf",
                                    ["application/pdf: 19 bytes, not shown"]])
        # A big table: bounded, and said so.
        self.assertEqual(heads[6][1], ["text/html: its first table, rebuilt from its cells' text; "
                                       "shown: the first 200 of 300 rows, the first 50 of 60 cells"
                                       " a row, 1 cell's text cut at 200 characters"])
        big = b.eval("(() => { const t = document.querySelectorAll('#outputs .output')[6]"
                     ".querySelector('table'); return [t.rows.length,"
                     " Math.max(...Array.from(t.rows, r => r.cells.length)),"
                     " t.rows[1].cells[1].textContent.length]; })()")
        self.assertEqual(big, [200, 50, 201])
        # Past SANDBOX_DISPLAY_OUTPUTS (12): the daemon left one out.
        self.assertEqual(heads[11], ["display: text/plain", []])
        self.assertEqual(b.eval("document.querySelector('#outputs > .dropped').textContent"),
                         "1 output was left out by the daemon (past its display bounds, or not a"
                         " well-formed output)")

    def test_a_refused_session_and_a_refused_cell(self):
        b = self.b
        # Every session taken (SANDBOX_MAX_SESSIONS is 2): OpenSession's
        # refusal, and nothing left open by the page.
        held = []
        for _ in range(2):
            status, body = self.d.rpc("OpenSession", {})
            self.assertEqual(status, 200, body)
            held.append(body["session_id"])
        try:
            self.assertEqual(self.cell("print(1)", held=held), "ch-refusal")
            lines = b.eval("Array.from(document.querySelectorAll('#ch-refusal .body div'),"
                           " d => d.textContent)")
            self.assertTrue(lines[0].startswith("OpenSession: AT_CAPACITY ("), lines)
            self.assertEqual(lines[2], "dispatched: no")
            self.assertTrue(b.eval("document.getElementById('outputs').hidden"))
        finally:
            for sid in held:
                self.d.rpc("CloseSession", {"session_id": sid})
        # A cell past the longest timeout: refused by RunCell in its
        # session (Explain said so first), and the session closed.
        b.eval("(() => { const t = document.getElementById('timeout'); t.value = '99999999';"
               " t.dispatchEvent(new Event('input')); })()")
        try:
            self.assertEqual(self.cell("print(1)"), "ch-refusal")
            lines = b.eval("Array.from(document.querySelectorAll('#ch-refusal .body div'),"
                           " d => d.textContent)")
            self.assertTrue(lines[0].startswith("RunCell: INVALID_REQUEST ("), lines)
            self.assertEqual(lines[2:], ["dispatched: no", "session closed after the cell"])
            self.assertEqual(self.text("ticketverdict"), "would be refused; nothing would run")
            self.assertEqual(b.eval("document.querySelector('#ticketlist li.refuse').dataset.check"),
                             "request")
        finally:
            b.eval("(() => { const t = document.getElementById('timeout'); t.value = '';"
                   " t.dispatchEvent(new Event('input')); })()")
        self.assertEqual(page_errors(b), [])

    def test_the_page_checks_what_the_daemon_would_not_send(self):
        """What the daemon never lets through (it drops an output whose
        base64 is not), drawn by the page from a forged answer: the page's
        own checks."""
        b = self.b
        huge = png(1, 1)[:16] + struct.pack(">II", 100000, 100000) + png(1, 1)[24:]
        forged = {"outputs": [
            {"kind": "display", "data": {"image/png": "not base64!"}},
            {"kind": "display", "data": {"image/png": base64.urlsafe_b64encode(b"\xfb\xff" * 12).decode()}},
            {"kind": "display", "data": {"image/png": base64.b64encode(huge).decode()}},
            {"kind": "display", "data": {"image/jpeg": base64.b64encode(png(2, 2)).decode()}},
            {"kind": "display", "data": {"image/gif": base64.b64encode(b"GIF89a\x01\x00\x01\x00"
                                                                       b"broken").decode()}},
            {"kind": "<b>result</b>", "data": {"text/html": 7, "text/plain": "plain"}},
            {"kind": "display", "data": None}, None],
            "outputs_dropped": 3}
        b.eval("drawOutputs(%s)" % json.dumps(forged))
        b.wait("document.querySelectorAll('#outputs canvas').length === 0")
        self.assertEqual(self.outputs(), [
            ["display: image/png", ["image/png: not drawn: its data is not base64"]],
            ["display: image/png", ["image/png: not drawn: its data is not base64"]],
            ["display: image/png", ["image/png: 100000 × 100000 pixels, not drawn: this page draws"
                                    " at most 8192 pixels a side and 16777216 in all"]],
            ["display: image/jpeg", ["image/jpeg: %d bytes, not drawn: they are not a JPEG image"
                                     % len(png(2, 2))]],
            ["display: image/gif", ["image/gif: 16 bytes, not drawn: the browser could not decode"
                                    " them"]],
            ["display: text/plain", []],
            ["display: (no data)", []],
            ["display: (no data)", []]])
        self.assertEqual(b.eval("document.querySelector('#outputs > .dropped').textContent"),
                         "3 outputs were left out by the daemon (past its display bounds, or not a"
                         " well-formed output)")
        self.assertEqual(b.eval(OWN), [])
        self.assertEqual(b.errors, [])

    def test_the_page_bounds_at_their_edges(self):
        b = self.b

        def table(rows, cells, long):
            return "<table>%s</table>" % "".join(
                "<tr>%s</tr>" % "".join("<td>%s</td>" % ("y" * long if (r, c) == (0, 0) else "c")
                                        for c in range(cells)) for r in range(rows))

        def image(width, height):
            return {"kind": "display", "data": {"image/png": base64.b64encode(
                png(1, 1)[:16] + struct.pack(">II", width, height) + png(1, 1)[24:]).decode()}}

        outputs = [{"kind": "display", "data": {"text/html": table(200, 50, 200)}},
                   {"kind": "display", "data": {"text/html": table(201, 51, 201)}},
                   {"kind": "display", "data": {"image/png": base64.b64encode(png(8192, 1)).decode()}},
                   image(8193, 1), image(4097, 4096)]
        outputs += [{"kind": "display", "data": {"text/plain": str(i)}} for i in range(60)]
        b.eval("drawOutputs(%s)" % json.dumps({"outputs": outputs}))
        b.wait("document.querySelectorAll('#outputs canvas:not(.drawn)').length === 0")
        heads = self.outputs()
        self.assertEqual(len(heads), 64)
        self.assertEqual(b.eval("document.querySelector('#outputs > .more').textContent"),
                         "1 more output not shown here")
        self.assertEqual(heads[0][1], ["text/html: its first table, rebuilt from its cells' text"])
        self.assertEqual(heads[1][1], ["text/html: its first table, rebuilt from its cells' text; "
                                       "shown: the first 200 of 201 rows, the first 50 of 51 cells"
                                       " a row, 1 cell's text cut at 200 characters"])
        self.assertEqual(b.eval("Array.from(document.querySelectorAll('#outputs table'), t =>"
                                " [t.rows.length, t.rows[0].cells.length,"
                                " t.rows[0].cells[0].textContent.length])"),
                         [[200, 50, 200], [200, 50, 201]])
        self.assertEqual(heads[2][1], ["image/png, 8192 × 1 pixels"])
        self.assertEqual(b.eval("Array.from(document.querySelectorAll('#outputs canvas.drawn'),"
                                " c => [c.width, c.height])"), [[8192, 1]])
        self.assertEqual([h[1] for h in heads[3:5]], [
            ["image/png: 8193 × 1 pixels, not drawn: this page draws at most 8192 pixels a side"
             " and 16777216 in all"],
            ["image/png: 4097 × 4096 pixels, not drawn: this page draws at most 8192 pixels a side"
             " and 16777216 in all"]])
        self.assertEqual(b.errors, [])


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
