# SPDX-License-Identifier: Apache-2.0
"""scripts/live as the hosted folders' test_*_live modules run it: the
script a user runs against the real service, run as it is against the
project's fake of that service, with the settings a user would set and
nothing else of the test harness's.

LiveTarget is the mixin: a subclass sets TARGET and REQUIRED (the settings
the script names as required) and defines settings(), the environment for
a run against its fake, and make_fake(), the fake started (stopped at the
class's end, which fails when it left anything or saw a breach of its
service's contract).  It gives the two cases every target has: the run
passes, and each required setting left out fails it (never a skip) with
the script's own sentence.  REQUIRED lists (the setting left out, the
setting the script must name): a token left out names the certificate
that could stand for it.
"""
import os
import subprocess

from .harness import BUILD, ROOT

SCRIPT = os.path.join(ROOT, "scripts", "live")
# The startup test (a sandbox), the startup session, a grant's sandbox:
# minutes on a loaded machine, against a fake whose sandboxes are containers.
TIMEOUT_S = 600


def run_live(target, env, timeout=TIMEOUT_S):
    """(exit status, stdout, stderr) of `scripts/live TARGET` with env as
    its whole environment beside PATH, HOME and the build to use."""
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
            "PLIMSOLL_BUILD_DIR": BUILD}
    full.update(env)
    p = subprocess.run([SCRIPT, target], env=full, cwd=ROOT, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class LiveTarget:
    TARGET = None
    REQUIRED = ()
    # What the script prints for each run it checks, in order.
    EXPECT = ()

    @classmethod
    def make_fake(cls):
        """The fake of the service, started (the subclass's)."""
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.fake = cls.make_fake()

    @classmethod
    def tearDownClass(cls):
        left = cls.fake.stop()
        if left:
            raise AssertionError("the fake left %r" % (left,))

    def test_the_live_script_passes_against_the_fake(self):
        rc, out, err = run_live(self.TARGET, self.settings())
        self.assertEqual(rc, 0, "scripts/live %s failed:\n%s\n%s" % (self.TARGET, out, err[-4000:]))
        lines = out.splitlines()
        self.assertEqual(lines[-1], "scripts/live %s: passed" % self.TARGET)
        for line in self.EXPECT:
            self.assertIn(line, lines, out)

    def test_a_missing_setting_fails_it_rather_than_skips(self):
        for left_out, name in self.REQUIRED:
            env = {k: v for k, v in self.settings().items() if k != left_out}
            rc, out, err = run_live(self.TARGET, env, timeout=60)
            self.assertEqual(rc, 1, (left_out, out, err))
            self.assertIn("scripts/live %s: %s is not set; a live target fails rather than skips"
                          % (self.TARGET, name), err)
            self.assertNotIn("passed", out)
