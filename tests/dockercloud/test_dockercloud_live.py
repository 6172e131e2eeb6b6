# SPDX-License-Identifier: Apache-2.0
"""scripts/live dockercloud, the command a user runs against Docker
Sandboxes, run as it is against the local fake of the Docker Sandboxes API
(every request and answer checked against its published OpenAPI file):
the startup test, a snippet of each language and a two-step project; and
each required setting left out fails the script instead of skipping.
dockercloud keeps no sessions (docs/providers/dockercloud.md).

Run: cd tests/dockercloud && PLIMSOLL_BUILD_DIR=... python3 -m unittest test_dockercloud_live
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from plimsoll_test.dockercloud import FakeDockerCloud  # noqa: E402
from plimsoll_test.live import LiveTarget  # noqa: E402


class DockerCloud(LiveTarget, unittest.TestCase):
    TARGET = "dockercloud"
    REQUIRED = tuple((n, n) for n in ("SANDBOX_DOCKERCLOUD_ACCOUNT", "SANDBOX_DOCKERCLOUD_TOKEN",
                                       "SANDBOX_DOCKERCLOUD_AUTH_URL", "SANDBOX_DOCKERCLOUD_IMAGE"))
    EXPECT = ("project ok",)

    @classmethod
    def make_fake(cls):
        return FakeDockerCloud(secret="dckr_pat_" + os.urandom(8).hex()).start()

    def settings(self):
        return {"SANDBOX_DOCKERCLOUD_ACCOUNT": self.fake.account,
                "SANDBOX_DOCKERCLOUD_TOKEN": self.fake.secret,
                "SANDBOX_DOCKERCLOUD_AUTH_URL": self.fake.auth_url + "/v2/auth/token",
                "SANDBOX_DOCKERCLOUD_API_URL": self.fake.url,
                "SANDBOX_DOCKERCLOUD_IMAGE": "plimsoll/project:latest",
                "SANDBOX_DOCKERCLOUD_INSTANCE": "live%d" % os.getpid(),
                # Nothing on this machine answers it, open egress or not.
                "SANDBOX_DOCKERCLOUD_EGRESS_PROBE": "192.0.2.1:80"}


if __name__ == "__main__":
    unittest.main()
