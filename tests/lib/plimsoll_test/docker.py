# SPDX-License-Identifier: Apache-2.0
"""The docker engine as the tests see it: a tiny Engine API client for their
own checks (engine, ours, engine_up), the settings of a docker-provider
daemon (docker_env), one started for a test class (start_docker_daemon,
the DockerDaemon mixin), and per_runtime, which makes a suite written once
into its runc and runsc test classes."""
import http.client
import json
import os
import socket
import unittest
import urllib.parse

from .harness import Daemon

SOCK = "/var/run/docker.sock"

# Instance labels carry this process's pid, so two test runs sharing the
# engine never delete each other's containers.
RUN_TAG = "-%d" % os.getpid()


class Engine(http.client.HTTPConnection):
    """A tiny Docker Engine API client for the tests' own checks."""

    def __init__(self):
        super().__init__("docker", timeout=60)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        s.connect(SOCK)
        self.sock = s


def engine(method, path, body=None, headers=None):
    c = Engine()
    try:
        c.request(method, "/v1.41" + path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data and data[:1] in b"[{" else data)
    finally:
        c.close()


def ours(instance):
    """Every container (any state) of this run's instance `instance`."""
    f = json.dumps({"label": ["org.plimsoll.instance=%s" % (instance + RUN_TAG)]})
    return engine("GET", "/containers/json?all=1&filters=" + urllib.parse.quote(f))[1]


def engine_up():
    try:
        return engine("GET", "/_ping")[0] == 200
    except OSError:
        return False


def require_engine():
    """Raise when no engine runs: a docker test class cannot start."""
    if not engine_up():
        raise RuntimeError("the docker engine is not running: run scripts/docker-setup")


def docker_env(runtime, instance, **extra):
    env = {"SANDBOX_PROVIDER": "docker", "SANDBOX_DOCKER_RUNTIME": runtime,
           "SANDBOX_DOCKER_INSTANCE": instance + RUN_TAG, "SANDBOX_OUTPUT_BYTES": "4096",
           "SANDBOX_MAX_CONCURRENT": "4", "SANDBOX_PER_KEY_CONCURRENT": "4",
           "SANDBOX_RATE_PER_MIN": "100000", "SANDBOX_RATE_BURST": "10000",
           "SANDBOX_DOCKER_PIDS": "64"}
    env.update(extra)
    return env


def start_docker_daemon(runtime, instance, timeout=120, **extra):
    """A docker-provider daemon for a test class, with docker_env's settings
    and extra; fails when no engine runs."""
    require_engine()
    return Daemon(env=docker_env(runtime, instance, **extra)).start(timeout=timeout)


class DockerDaemon:
    """Mixin for a test class with one docker-provider daemon under
    cls.RUNTIME: setUpClass starts cls.d for instance cls.instance
    (INSTANCE + RUNTIME) with docker_env and cls.settings(), waiting up to
    START_TIMEOUT seconds; tearDownClass stops it and fails when a
    container of the instance is left (a class may extend either)."""
    RUNTIME = None  # per_runtime sets it
    INSTANCE = None  # the instance's name before the runtime's
    SETTINGS = {}
    START_TIMEOUT = 120

    @classmethod
    def settings(cls):
        """The daemon's settings beyond docker_env's: SETTINGS, and those a
        subclass makes at setUpClass."""
        return dict(cls.SETTINGS)

    @classmethod
    def setUpClass(cls):
        cls.instance = cls.INSTANCE + cls.RUNTIME
        cls.d = start_docker_daemon(cls.RUNTIME, cls.instance, timeout=cls.START_TIMEOUT,
                                    **cls.settings())

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        left = ours(cls.instance)
        assert left == [], "containers left behind: %r" % left


def per_runtime(suite, *mixins):
    """The two TestCase classes of a suite written once for both runtimes:
    SuiteRunc (RUNTIME "runc") and SuiteRunsc (RUNTIME "runsc"), each made of
    suite, mixins and unittest.TestCase, named and placed in suite's module
    as if written there by hand (so test ids are module.SuiteRunc.test_x).

        SuiteRunc, SuiteRunsc = per_runtime(Suite)
    """
    made = []
    for runtime in ("runc", "runsc"):
        name = suite.__name__ + runtime.capitalize()
        made.append(type(name, (suite,) + mixins + (unittest.TestCase,),
                         {"RUNTIME": runtime, "__module__": suite.__module__,
                          "__qualname__": name}))
    return tuple(made)
