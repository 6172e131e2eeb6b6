# SPDX-License-Identifier: Apache-2.0
"""proto/openshell/openshell.proto against OpenShell's published protos.

Every message and field of the project's proto that upstream's protos
(<repo>/../shared/upstream/openshell, the commit in its README) also define
must carry upstream's number, type (the message or enum type's name
included) and label, every enum value upstream's number, and every method
of the service upstream's types and streams (tests/lib/plimsoll_test/
protocontract.py).  Both sides are compiled here with Debian's protoc; a
missing upstream copy fails the test.  No gateway or daemon is needed."""
import os
import re
import shutil
import tempfile
import unittest

from plimsoll_test import protocontract as pc
from plimsoll_test.harness import ROOT

PROTO_DIR = os.path.join(ROOT, "proto", "openshell")
# The messages the provider sends or reads: each must have been matched
# with upstream's (a check that matched nothing would pass by itself).
USED = ("GetGatewayInfoResponse", "ComputeDriverInfo", "ComputeDriverCapabilities",
        "HealthResponse", "Provider", "ObjectMeta", "Sandbox", "SandboxSpec", "SandboxTemplate",
        "SandboxStatus", "SandboxPolicy", "FilesystemPolicy", "ProcessPolicy",
        "NetworkPolicyRule", "NetworkEndpoint", "CreateSandboxRequest", "ExecSandboxRequest",
        "ExecSandboxEvent", "ExecSandboxInput", "SandboxPolicyRevision",
        "GetSandboxPolicyStatusResponse", "ListSandboxProvidersResponse", "ServiceStatus",
        "SandboxPhase", "PolicyStatus", "service OpenShell")


def upstream_set():
    up = pc.upstream_dir("openshell")
    files = sorted(f for f in os.listdir(up) if f.endswith(".proto"))
    if "openshell.proto" not in files:
        raise AssertionError("%s has no openshell.proto" % up)
    return pc.compile_set(up, files)


class TestOpenShellProtoContract(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.theirs = upstream_set()

    def test_every_shared_field_is_upstreams(self):
        ours = pc.compile_set(PROTO_DIR, ["openshell.proto"])
        problems, matched = pc.compare(ours, self.theirs)
        self.assertEqual(problems, [], "proto/openshell/openshell.proto differs from upstream:\n"
                         + "\n".join(problems))
        missing = [m for m in USED if m not in matched]
        self.assertEqual(missing, [], "not matched with any of upstream's messages")

    def test_a_missing_upstream_copy_fails(self):
        with self.assertRaisesRegex(AssertionError, "the published contracts are not at"):
            pc.upstream_dir("openshell-no-such-copy")

    def test_a_misnumbered_field_is_named(self):
        """The check itself: the numbering this proto once had (version = 1,
        compute_drivers = 2) and a Provider with a field of its own are
        each named with their message, field and upstream's file."""
        with open(os.path.join(PROTO_DIR, "openshell.proto")) as f:
            text = f.read()
        old = re.sub(r"message GetGatewayInfoResponse \{[^}]*\}",
                     "message GetGatewayInfoResponse {\n  string version = 1;\n"
                     "  repeated ComputeDriverInfo compute_drivers = 2;\n}", text)
        old = re.sub(r"message Provider \{[^}]*\}",
                     "message Provider {\n  string id = 1;\n  string name = 2;\n"
                     "  string type = 3;\n}", old)
        old = old.replace("string policy_hash = 2;", "bytes policy_hash = 2;")
        self.assertNotEqual(old, text)
        tmp = tempfile.mkdtemp(prefix="osh-contract-")
        try:
            with open(os.path.join(tmp, "openshell.proto"), "w") as f:
                f.write(old)
            problems, _ = pc.compare(pc.compile_set(tmp, ["openshell.proto"]), self.theirs)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        text = "\n".join(problems)
        for want in ("message GetGatewayInfoResponse field compute_drivers: number 2 here, 3 in "
                     "upstream's openshell.proto",
                     "message GetGatewayInfoResponse field version: upstream's openshell.proto "
                     "(openshell.v1.GetGatewayInfoResponse) has no such field; its number 1 is "
                     "upstream's status",
                     "message Provider field id: upstream's datamodel.proto",
                     "message Provider field type: number 3 here, 2 in upstream's datamodel.proto",
                     "message SandboxPolicyRevision field policy_hash: type 'bytes' here, "
                     "'string' in upstream's openshell.proto"):
            self.assertIn(want, text)


if __name__ == "__main__":
    unittest.main()
