# SPDX-License-Identifier: Apache-2.0
"""scripts/live e2b and e2b-guard, the commands a user runs against E2B,
run as they are against the local fake of E2B's API (every request and
answer checked against E2B's published OpenAPI and envd protos): the
startup test and the startup session, a snippet of each language, a
two-step project, a session's two cells, and a grant through the guard;
and each required setting left out fails the script instead of skipping.

Run: cd tests/e2b && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_e2b_live
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from plimsoll_test.e2b import FakeE2B  # noqa: E402
from plimsoll_test.grants import free_port  # noqa: E402
from plimsoll_test.live import LiveTarget  # noqa: E402

TEMPLATE = "plimsoll-project"
IMAGE = "plimsoll/project:latest"


class LiveFake(LiveTarget):
    @classmethod
    def make_fake(cls):
        return FakeE2B(api_key="e2b_live_" + os.urandom(8).hex(),
                       templates={TEMPLATE: IMAGE}, cpu=2, memory_mb=512).start()

    def settings(self):
        return {"E2B_API_KEY": self.fake.api_key, "SANDBOX_E2B_TEMPLATE": TEMPLATE,
                "SANDBOX_E2B_API_URL": self.fake.url,
                "SANDBOX_E2B_INSTANCE": "live%d" % os.getpid(),
                # Nothing on this machine answers it, open egress or not.
                "SANDBOX_E2B_EGRESS_PROBE": "192.0.2.1:80"}


class E2B(LiveFake, unittest.TestCase):
    TARGET = "e2b"
    REQUIRED = (("E2B_API_KEY", "E2B_API_KEY"), ("SANDBOX_E2B_TEMPLATE", "SANDBOX_E2B_TEMPLATE"))
    EXPECT = ("project ok", "session ok")


class E2BGuard(LiveFake, unittest.TestCase):
    TARGET = "e2b-guard"
    REQUIRED = E2B.REQUIRED + (("E2B_GUARD_URL", "E2B_GUARD_URL"),)
    EXPECT = ("project ok", "guard ok", "session ok")

    def settings(self):
        env = super().settings()
        gw = self.fake.gateway()
        env.update(E2B_GUARD_URL="http://%s:%d" % (gw, free_port(gw)), SANDBOX_E2B_GUARD_LISTEN=gw)
        return env


if __name__ == "__main__":
    unittest.main()
