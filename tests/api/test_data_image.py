# SPDX-License-Identifier: Apache-2.0
"""The data image (docs/providers/docker.md, "The data image") through the
real daemon and the real docker engine: a daemon whose session image is
plimsoll/data says in Describe's operations.display that its Python cells
show matplotlib figures and pandas frames, and its cells import numpy,
pandas and matplotlib and draw a PNG, under runc and under runsc; a daemon
on plimsoll/project shows only Python's and JavaScript's display(), and one
with sessions off shows none.  The images come from scripts/build/images
(scripts/docker-setup builds them)."""
import binascii
import os
import re
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import DockerDaemon, engine, ours, per_runtime  # noqa: E402

DATA = "plimsoll/data:latest"
PROJECT = "plimsoll/project:latest"
PNG = b"\x89PNG\r\n\x1a\n"

# A cell that draws a frame's plot into /tmp and prints what the file
# starts with (its signature and IHDR chunk: width and height).
DRAW = """
import binascii
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

frame = pd.DataFrame({"x": np.arange(10), "y": np.arange(10) ** 2})
ax = frame.plot(x="x", y="y", figsize=(4, 3))
ax.figure.savefig("/tmp/plot.png", dpi=50)
plt.close("all")
with open("/tmp/plot.png", "rb") as f:
    data = f.read()
print(len(data), binascii.hexlify(data[:24]).decode(), int(frame["y"].sum()))
"""


def display(d):
    status, body = d.rpc("Describe", {})
    if status != 200:
        raise AssertionError("Describe: %s %r" % (status, body))
    return body["operations"]["display"], body["startup_checks"]


class ImageDaemon(DockerDaemon):
    START_TIMEOUT = 240

    @classmethod
    def setUpClass(cls):
        for image in (DATA, PROJECT):
            status, _ = engine("GET", "/images/%s/json" % image)
            if status != 200:
                raise RuntimeError("%s is not built: run scripts/build/images" % image)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left


class DataSessions(ImageDaemon):
    """Sessions on plimsoll/data; per_runtime sets RUNTIME."""
    INSTANCE = "data-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_DOCKER_PROJECT_IMAGE": DATA,
                "SANDBOX_DOCKER_WARM": "0"}

    def cell(self, sid, code):
        status, body = self.d.rpc("RunCell", {"session_id": sid,
                                              "cell": {"language": "python", "code": code}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["exit_code"], 0, body)
        return body

    def open(self):
        status, body = self.d.rpc("OpenSession", {"languages": ["python"]})
        self.assertEqual(status, 200, body)
        sid = body["session_id"]
        self.addCleanup(self.d.rpc, "CloseSession", {"session_id": sid})
        return sid

    def test_describe_says_every_display_kind(self):
        kinds, checks = display(self.d)
        self.assertEqual(kinds, {"python": True, "javascript": True, "matplotlib": True,
                                 "pandas": True})
        self.assertIn("in the session image (%s) python3, as the sandbox user, imported "
                      "matplotlib with the Agg backend and matplotlib.pyplot and imported pandas"
                      % DATA, checks)

    def test_a_cell_imports_pandas_and_matplotlib(self):
        sid = self.open()
        out = self.cell(sid, "import pandas, matplotlib; print(pandas.__version__)")["stdout"]
        self.assertRegex(out, r"^\d+\.\d+\.\d+\n$")

    def test_a_cell_draws_a_png(self):
        sid = self.open()
        out = self.cell(sid, DRAW)["stdout"].split()
        self.assertEqual(len(out), 3, out)
        size, head, total = int(out[0]), binascii.unhexlify(out[1]), int(out[2])
        self.assertEqual(head[:8], PNG)
        self.assertEqual(head[12:16], b"IHDR")
        # 4 by 3 inches at 50 dots an inch.
        self.assertEqual(struct.unpack(">II", head[16:24]), (200, 150))
        self.assertGreater(size, 1000)
        self.assertEqual(total, sum(i * i for i in range(10)))


DataSessionsRunc, DataSessionsRunsc = per_runtime(DataSessions)


class ProjectSessions(ImageDaemon, unittest.TestCase):
    """Sessions on plimsoll/project: no matplotlib, no pandas."""
    RUNTIME = "runc"
    INSTANCE = "data-project-"
    SETTINGS = {"SANDBOX_MAX_SESSIONS": "2", "SANDBOX_DOCKER_PROJECT_IMAGE": PROJECT,
                "SANDBOX_DOCKER_WARM": "0"}

    def test_describe_says_python_and_javascript_only(self):
        kinds, checks = display(self.d)
        self.assertEqual(kinds, {"python": True, "javascript": True, "matplotlib": False,
                                 "pandas": False})
        self.assertIn("in the session image (%s) python3, as the sandbox user, could not import "
                      "matplotlib with the Agg backend and matplotlib.pyplot and could not import "
                      "pandas" % PROJECT, checks)
        # Why each is off is logged once.
        why = {line["library"]: line["why"] for line in self.d.log_lines()
               if line.get("msg", "").startswith("docker: a display kind is off")}
        self.assertEqual(sorted(why), ["matplotlib", "pandas"])
        for lib, text in why.items():
            self.assertTrue(re.match(r"ModuleNotFoundError: No module named '%s'" % lib, text),
                            text)


class DataNoSessions(ImageDaemon, unittest.TestCase):
    """plimsoll/data with sessions off: no cells, so no display kind (and
    the probe does not import the libraries)."""
    RUNTIME = "runc"
    INSTANCE = "data-nosessions-"
    SETTINGS = {"SANDBOX_DOCKER_PROJECT_IMAGE": DATA, "SANDBOX_DOCKER_WARM": "0"}

    def test_describe_says_no_display_kind(self):
        kinds, checks = display(self.d)
        self.assertEqual(kinds, {"python": False, "javascript": False, "matplotlib": False,
                                 "pandas": False})
        self.assertFalse([c for c in checks if "in the session image" in c], checks)


if __name__ == "__main__":
    unittest.main()
