# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the Python suites (tests/api, tests/hostile, tests/e2b,
tests/load),
the clients' harness (tests/clients) and bench/: no test module imports
another.

  harness    the real plimsolld over HTTP (Daemon, error_info, run_startup);
             ClassDaemon, one daemon for a test class
  docker     the engine (engine, ours, engine_up), docker_env,
             start_docker_daemon; DockerDaemon, a test class's docker daemon;
             per_runtime, a suite's runc and runsc test classes
  grants     profiles, GrantFiles, grant_env; GrantDaemon, a DockerDaemon
             with grants to a test API
  upstream   the test API a grant's broker forwards to (Upstream, Check)
  hostcheck  what the host sees of an instance's sandboxes (cgroups, /proc)
  hostile    the Hostile mixin (typed answers, a daemon that recovers) and
             its wasm and docker daemons
  procs      the daemon's descriptor and thread counts, its children
  payloads   run requests (snippet, py, js, module, built_module) and the
             record's digests (canon, sha)
  rawhttp    HTTP by hand over a raw socket (head, read_answer)
  e2b        the local fake of E2B's API (FakeE2B: start, misbehave, plant,
             state, envd, run), Connect envelopes, bridge_gateway

tests/run.py puts tests/lib on sys.path; each module that uses the
package also inserts it, so `python3 -m unittest test_x` works in its own
folder."""
