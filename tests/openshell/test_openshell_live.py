# SPDX-License-Identifier: Apache-2.0
"""scripts/live openshell, the command a user runs against an OpenShell
gateway, run as it is against the local fake gateway (a real gRPC server
speaking upstream's protos, with upstream's request limits): the driver
report, the startup test and the startup session, a snippet of each
language, a two-step project, a grant through the relay and a session's
two cells; and each required setting left out fails the script instead of
skipping.

Run: cd tests/openshell && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_openshell_live
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from plimsoll_test.live import LiveTarget  # noqa: E402
from plimsoll_test.openshell import FakeOpenShell  # noqa: E402


class OpenShell(LiveTarget, unittest.TestCase):
    TARGET = "openshell"
    REQUIRED = (("SANDBOX_OPENSHELL_URL", "SANDBOX_OPENSHELL_URL"),
                ("SANDBOX_OPENSHELL_IMAGE", "SANDBOX_OPENSHELL_IMAGE"),
                ("SANDBOX_OPENSHELL_TOKEN", "SANDBOX_OPENSHELL_CERT_FILE"))
    EXPECT = ("project ok", "relay ok", "session ok")

    @classmethod
    def make_fake(cls):
        return FakeOpenShell().start()

    def settings(self):
        return {"SANDBOX_OPENSHELL_URL": "http://" + self.fake.address,
                "SANDBOX_OPENSHELL_TOKEN": self.fake.admin_token,
                "SANDBOX_OPENSHELL_IMAGE": "plimsoll/project:latest",
                "SANDBOX_OPENSHELL_INSTANCE": "live%d" % os.getpid(),
                # Nothing on this machine answers it, open egress or not.
                "SANDBOX_OPENSHELL_EGRESS_PROBE": "192.0.2.1:80"}


if __name__ == "__main__":
    unittest.main()
