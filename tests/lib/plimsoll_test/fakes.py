# SPDX-License-Identifier: Apache-2.0
"""What the hosted services' fakes' wrappers share (e2b.py, dockercloud.py,
openshell.py): the fake as a child process, the docker objects carrying its
label, and stop(), which ends the fake with SIGTERM and returns (and
removes) the containers and networks of its label still left: none when
the fake cleaned up after itself.  A subclass sets LABEL, and proc and
instance once started."""
import json
import signal
import subprocess
import urllib.parse

from .docker import engine


class FakeProcess:
    LABEL = None
    proc = None
    instance = None
    returncode = None

    def label_filter(self):
        f = json.dumps({"label": ["%s=%s" % (self.LABEL, self.instance)]})
        return "filters=" + urllib.parse.quote(f)

    def containers(self):
        """Every container (any state) carrying this fake's label."""
        return engine("GET", "/containers/json?all=1&" + self.label_filter())[1]

    def networks(self):
        """Every network carrying this fake's label."""
        return engine("GET", "/networks?" + self.label_filter())[1]

    def stop(self, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.returncode = self.proc.returncode
            self.proc.stdout.close()
        if not self.instance:
            return []
        containers, networks = self.containers(), self.networks()
        for c in containers:
            engine("DELETE", "/containers/%s?force=1" % c["Id"])
        for n in networks:
            engine("DELETE", "/networks/" + n["Id"])
        return containers + networks
