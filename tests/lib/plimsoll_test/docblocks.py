# SPDX-License-Identifier: Apache-2.0
"""The fenced blocks of the Markdown docs and the markers before them
(`<!-- doc: ... -->`): how they are read and how a block's printed output
is compared with the output block that shows it.  tests/docs/test_docs.py
(the docs suite) states the rules and runs or checks every block;
tests/clients/test_install.py (the clients suite) runs the `install`
blocks, each client's install steps, from an empty directory."""
import json
import os
import re

KINDS = ("wasm", "disabled", "docker", "docker-sessions", "docker-data", "fleet")
RUN_KINDS = KINDS + ("", "quickstart")
CLIENTS = ("c", "python", "typescript", "go")
RUN_LANGUAGES = ("", "sh", "bash", "python", "c", "go", "ts")  # a run block's fence
GUEST_KINDS = ("docker", "wasm")
GUEST_LANGUAGES = {"python": "python", "js": "javascript", "javascript": "javascript"}
ELLIPSIS = "\u2026"


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*doc:\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, path, line, lang, text, marker):
        self.path = path  # relative to the repository
        self.line = line  # the opening fence's line, from 1
        self.lang = lang
        self.text = text
        self.marker = marker  # the marker's text, or None
        self.kind = None  # run, output, answer, install, grants, guest, mcp-config, not run, shape; None: a bad marker
        self.arg = ""  # run: the daemon kind; answer: "METHOD[.FIELD] KIND [REQUEST]"; install: the client; guest: "KIND PROFILE"
        self.problem = None
        self.prev = None  # the block before it in its file
        self.checks = []  # output and answer blocks that follow a run (or install) block
        self.exit = 0  # a run block's exit status
        self.grants = None  # a guest block's: its file's grants block
        self.parse_marker()

    def __str__(self):
        return "%s:%d" % (self.path, self.line)

    def parse_marker(self):
        m = self.marker
        if m is None:
            self.problem = "no <!-- doc: ... --> marker on the line before the fence"
            return
        for kind in ("not run:", "shape:"):
            if m.startswith(kind):
                self.kind, self.arg = kind[:-1], m[len(kind):].strip()
                if not self.arg:
                    self.problem = "'%s' needs a reason" % kind
                return
        word, _, rest = m.partition(" ")
        rest = rest.strip()
        if word == "run":
            m = re.fullmatch(r"(.*?)\s*\bexits (\d+)", rest)
            if m:
                rest, self.exit = m.group(1), int(m.group(2))
            self.kind, self.arg = "run", rest
            if rest not in RUN_KINDS:
                self.problem = "unknown daemon kind %r (one of %s)" % (rest, ", ".join(KINDS))
            elif self.lang not in RUN_LANGUAGES:
                self.problem = "a %r block cannot be run" % self.lang
        elif word == "install":
            self.kind, self.arg = "install", rest
            if rest not in CLIENTS:
                self.problem = "install wants a client (one of %s)" % ", ".join(CLIENTS)
            elif self.lang not in ("sh", "bash"):
                self.problem = "install steps are a sh block"
        elif word == "mcp-config":
            self.kind, self.arg = "mcp-config", rest
            if rest not in KINDS:
                self.problem = "mcp-config wants a daemon kind (one of %s)" % ", ".join(KINDS)
            elif self.lang != "json":
                self.problem = "an MCP client's configuration is a json block"
        elif word == "output" and not rest:
            self.kind = "output"
        elif word == "grants" and not rest:
            self.kind = "grants"
        elif word == "guest":
            self.kind, self.arg = "guest", rest
            parts = rest.split()
            if len(parts) != 2 or parts[0] not in GUEST_KINDS:
                self.problem = "guest wants KIND PROFILE, KIND one of %s" % ", ".join(GUEST_KINDS)
            elif self.lang not in GUEST_LANGUAGES:
                self.problem = "a %r block cannot be guest code" % self.lang
        elif word == "answer":
            self.kind, self.arg = "answer", rest
            if rest:
                parts = rest.split(None, 2)
                if len(parts) < 2 or parts[1] not in KINDS:
                    self.problem = "answer wants METHOD[.FIELD] KIND [REQUEST]"
                elif len(parts) == 3:
                    try:
                        json.loads(parts[2])
                    except ValueError as e:
                        self.problem = "the request is not JSON: %s" % e
        else:
            self.problem = "unknown marker %r" % m

    @property
    def daemon_kind(self):
        """The daemon the block's own test needs (None: none)."""
        if self.kind in ("run", "mcp-config"):
            return self.arg
        if self.kind == "answer" and self.arg:
            return self.arg.split()[1]
        return None


def doc_files(root):
    """The Markdown files whose blocks are run or checked: README.md,
    docs/**/*.md and each client's README.md, under `root`."""
    out = [os.path.join(root, "README.md")]
    for d, _, names in sorted(os.walk(os.path.join(root, "docs"))):
        out += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    clients = os.path.join(root, "clients")
    for c in sorted(os.listdir(clients)):
        if os.path.isfile(os.path.join(clients, c, "README.md")):
            out.append(os.path.join(clients, c, "README.md"))
    return out


def read_blocks(path, root):
    """The fenced blocks of the Markdown file `path`, named relative to `root`."""
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence),
                                              lines[j]):
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
        mk = MARKER.match(lines[i - 1]) if i > 0 else None
        b = Block(rel, i + 1, lang, "\n".join(body) + "\n", mk.group(1) if mk else None)
        if blocks:
            b.prev = blocks[-1]
        blocks.append(b)
        i = j + 1
    grants = [b for b in blocks if b.kind == "grants"]
    for b in blocks:
        if b.kind == "guest":
            if len(grants) != 1:
                b.problem = "guest code needs one grants block in its file, not %d" % len(grants)
            else:
                b.grants = grants[0]
        if b.kind in ("output", "answer") and not (b.kind == "answer" and b.arg):
            run = b.prev
            while run is not None and run.kind in ("output", "answer") and not run.arg:
                run = run.prev
            if run is None or run.kind not in ("run", "install"):
                b.problem = "'%s' follows no run block" % b.kind
            else:
                run.checks.append(b)
    return blocks


def output_matches(shown, got):
    """Whether the printed text `got` is what the block `shown` shows (the
    module's output rules); returns None, or what differs."""
    want = [ln.rstrip() for ln in shown.rstrip("\n").split("\n")]
    have = [ln.rstrip() for ln in got.split("\n")]
    while have and not have[-1]:
        have.pop()

    def line_ok(w, h):
        return re.fullmatch(".*?".join(re.escape(p) for p in w.split(ELLIPSIS)), h) is not None

    def match(wi, hi):
        if wi == len(want):
            return hi == len(have)
        if want[wi] == ELLIPSIS:
            return any(match(wi + 1, k) for k in range(hi, len(have) + 1))
        return hi < len(have) and line_ok(want[wi], have[hi]) and match(wi + 1, hi + 1)

    if match(0, 0):
        return None
    return "shown:\n%s\nprinted:\n%s" % ("\n".join(want), "\n".join(have))
