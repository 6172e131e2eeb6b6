# SPDX-License-Identifier: Apache-2.0
"""Grants through the real daemon: grant profiles checked at startup,
refusals before dispatch, and the broker carrying a run's calls to a real
test API on loopback (tests/lib/plimsoll_test/upstream.py) that verifies
the shared token or the minted JWT.  The wasm provider brokers snippets
through plimsoll.request(); the docker provider through a Unix socket at
/run/plimsoll/broker.sock, under runc and under runsc."""
import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from plimsoll_test.docker import per_runtime  # noqa: E402
from plimsoll_test.grants import (HMAC_KEY, SCOPES, TOKEN, GrantDaemon, GrantFiles,  # noqa: E402
                                  grant_env, jwt_cred, profile, token_cred)
from plimsoll_test.harness import Daemon, error_info, run_startup  # noqa: E402
from plimsoll_test.payloads import js, snippet  # noqa: E402
from plimsoll_test.upstream import Check, Upstream  # noqa: E402


class GrantsFileAtStartup(unittest.TestCase):
    """Each bad grants file stops the daemon with a message naming the profile."""

    @classmethod
    def setUpClass(cls):
        cls.files = GrantFiles()

    @classmethod
    def tearDownClass(cls):
        cls.files.close()

    def refuse(self, profiles, *want, env=None):
        path = self.files.write(profiles)
        e = grant_env(path, SANDBOX_PROVIDER="wasm")
        e.update(env or {})
        code, err = run_startup(e)
        self.assertEqual(code, 2, err)
        for w in want:
            self.assertIn(w, err)
        self.assertNotIn(TOKEN, err)
        self.assertNotIn(HMAC_KEY, err)
        return err

    def test_empty_route_list(self):
        self.refuse({"billing": profile("http://127.0.0.1:9", token_cred(), routes=[])},
                    '"billing"', "route")

    def test_scope_code_run(self):
        p = profile("http://127.0.0.1:9", token_cred())
        p["scopes"] = ["items:read", "code:run"]
        self.refuse({"runner": p}, '"runner"', "code:run")

    def test_scope_star(self):
        p = profile("http://127.0.0.1:9", token_cred())
        p["scopes"] = ["*"]
        self.refuse({"everything": p}, '"everything"', "*")

    def test_unknown_credential_kind(self):
        self.refuse({"oauth": profile("http://127.0.0.1:9", {"kind": "oauth2"})}, '"oauth"',
                    "kind")

    def test_missing_token_variable(self):
        self.refuse({"tok": profile("http://127.0.0.1:9", {"kind": "shared_token",
                                                           "env": "NOT_SET_ANYWHERE"})},
                    '"tok"', "NOT_SET_ANYWHERE")

    def test_missing_hmac_key_variable(self):
        c = jwt_cred("HS256")
        c["key_env"] = "NO_SUCH_KEY_VAR"
        self.refuse({"hs": profile("http://127.0.0.1:9", c)}, '"hs"', "NO_SUCH_KEY_VAR")

    def test_missing_key_file(self):
        c = jwt_cred("RS256", self.files)
        c["key_file"] = "/nonexistent/key.pem"
        self.refuse({"rs": profile("http://127.0.0.1:9", c)}, '"rs"', "/nonexistent/key.pem")

    def test_key_of_the_wrong_kind(self):
        c = jwt_cred("RS256", self.files)
        c["key_file"] = self.files.key("ed")
        self.refuse({"mixed": profile("http://127.0.0.1:9", c)}, '"mixed"')

    def test_ca_file_needs_https(self):
        p = profile("http://127.0.0.1:9", token_cred(), ca_file=self.files.cert)
        self.refuse({"plain": p}, '"plain"', "ca_file")

    def test_missing_ca_file(self):
        p = profile("https://127.0.0.1:9", token_cred(), ca_file="/nonexistent/ca.pem")
        self.refuse({"tls": p}, '"tls"', "/nonexistent/ca.pem")

    def test_unreadable_file(self):
        code, err = run_startup({"PLIMSOLL_GRANTS_FILE": "/nonexistent/grants.json"})
        self.assertEqual(code, 2)
        self.assertIn("PLIMSOLL_GRANTS_FILE", err)

    def test_not_json(self):
        with open(self.files.path, "w") as f:
            f.write("{profiles: nope")
        code, err = run_startup(grant_env(self.files.path))
        self.assertEqual(code, 2)
        self.assertIn("PLIMSOLL_GRANTS_FILE", err)


class WasmGrants(unittest.TestCase):
    """The wasm provider: refusals before dispatch and plimsoll.request()."""

    @classmethod
    def setUpClass(cls):
        cls.files = GrantFiles()
        cls.up = Upstream(Check(token=TOKEN))
        cls.up_tls = Upstream(Check(token=TOKEN), tls=(cls.files.cert, cls.files.cert_key))
        path = cls.files.write({
            "items": profile(cls.up.url, token_cred()),
            "alice-only": profile(cls.up.url, token_cred(), callers=["alice"]),
            "items-tls": profile(cls.up_tls.url, token_cred(), ca_file=cls.files.cert),
            "items-tls-unverified": profile(cls.up_tls.url, token_cred()),
        })
        cls.d = Daemon(env=grant_env(path, SANDBOX_PROVIDER="wasm", SANDBOX_RATE_PER_MIN="100000",
                                     SANDBOX_RATE_BURST="10000")).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        cls.up.close()
        cls.up_tls.close()
        cls.files.close()
        text = cls.d.log_text()
        assert TOKEN not in text, "the token reached the daemon's log"

    def setUp(self):
        self.up.take()

    def run_ok(self, msg, principal="alice"):
        status, body = self.d.rpc("Run", msg, principal=principal)
        self.assertEqual(status, 200, body)
        self.assertNotIn(TOKEN, json.dumps(body))
        return body

    def refused(self, msg, code, reason, principal="alice"):
        status, body = self.d.rpc("Run", msg, principal=principal)
        self.assertNotEqual(status, 200, body)
        self.assertEqual(body["code"], code, body)
        info, _ = error_info(body)
        self.assertEqual(info["reason"], reason, body)
        self.assertEqual(info["metadata"]["dispatched"], "false")
        self.assertNotIn(TOKEN, json.dumps(body))
        return body

    def test_describe_says_which_kinds_carry_grants(self):
        status, body = self.d.rpc("Describe", {})
        self.assertEqual(status, 200)
        ops = body["operations"]
        self.assertTrue(ops["snippet"]["grants"])
        self.assertFalse(ops["module"]["grants"])

    def test_allowed_route(self):
        body = self.run_ok(js(
            "const r = plimsoll.request({method: 'GET', path: '/items/42?full=1'});"
            "console.log(r.status, JSON.parse(r.body).path, JSON.parse(r.body).query,"
            " r.headers['content-type']);", "items"))
        self.assertEqual(body["exit_code"], 0, body)
        self.assertEqual(body["stdout"], "200 /items/42 full=1 application/json\n")
        got = self.up.take()
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0]["ok"], got[0])
        self.assertEqual(body["record"]["broker_calls"], 1)
        self.assertEqual(body["record"]["broker_refused"], 0)

    def test_post_with_body(self):
        body = self.run_ok(js(
            "const r = plimsoll.request({method: 'POST', path: '/items/7/notes',"
            " headers: {'content-type': 'application/json', 'authorization': 'Bearer mine'},"
            " body: JSON.stringify({n: 1})});"
            "console.log(r.status, JSON.parse(r.body).body);", "items"))
        self.assertEqual(body["stdout"], '200 {"n":1}\n', body)
        got = self.up.take()
        self.assertEqual(got[0]["method"], "POST")
        # The guest's own Authorization never reaches the API; the broker's does.
        self.assertEqual(got[0]["headers"]["authorization"], "Bearer " + TOKEN)

    def test_disallowed_route_and_method_never_reach_the_api(self):
        body = self.run_ok(js(
            "for (const [m, p] of [['GET', '/admin'], ['DELETE', '/items/1'],"
            " ['GET', '/items/1/../../admin'], ['GET', '/items/%2e%2e']]) {"
            "  const r = plimsoll.request({method: m, path: p});"
            "  console.log(r.status, r.refused, r.headers['x-plimsoll-broker'],"
            "   JSON.parse(r.body).error); }", "items"))
        self.assertEqual(body["stdout"].splitlines(), [
            "403 true refused route_not_allowed", "403 true refused route_not_allowed",
            "400 true refused bad_path", "400 true refused bad_path"], body)
        self.assertEqual(self.up.take(), [])
        self.assertEqual(body["record"]["broker_calls"], 0)
        self.assertEqual(body["record"]["broker_refused"], 4)

    def test_no_grant_no_broker(self):
        body = self.run_ok(js(
            "console.log(plimsoll.hasGrant);"
            "try { plimsoll.request({path: '/items/1'}); } catch (e) { console.log(e.message); }"))
        self.assertEqual(body["stdout"].splitlines()[0], "false")
        self.assertIn("no grant", body["stdout"])
        self.assertEqual(self.up.take(), [])
        self.assertEqual(body["record"]["broker_calls"], 0)

    def test_unknown_profile(self):
        self.refused(js("1", "nope"), "invalid_argument", "INVALID_REQUEST")

    def test_grant_sent_in_full(self):
        self.refused(js("1", grant={"base_url": self.up.url}), "invalid_argument",
                     "INVALID_REQUEST")

    def test_caller_not_allowed(self):
        self.refused(js("console.log(1)", "alice-only"), "permission_denied",
                     "CALLER_NOT_ALLOWED", principal="bob")
        self.run_ok(js("console.log(1)", "alice-only"), principal="alice")

    def test_module_grant_unsupported(self):
        wasm = "AGFzbQEAAAA="
        self.refused({"module": {"wasm_base64": wasm}, "grant_profile": "items"},
                     "unimplemented", "UNSUPPORTED")

    def test_https_api_verified_with_the_profiles_ca(self):
        body = self.run_ok(js(
            "const r = plimsoll.request({path: '/items/3'});"
            "console.log(r.status, JSON.parse(r.body).path);", "items-tls"))
        self.assertEqual(body["stdout"], "200 /items/3\n", body)
        got = self.up_tls.take()
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0]["ok"])
        # Without the CA the certificate does not verify: the call fails, no bytes sent.
        body = self.run_ok(js(
            "const r = plimsoll.request({path: '/items/3'});"
            "console.log(r.status, JSON.parse(r.body).error);", "items-tls-unverified"))
        self.assertEqual(body["stdout"], "502 upstream_unreachable\n", body)
        self.assertEqual(self.up_tls.take(), [])

    def test_response_cap_and_upstream_down(self):
        body = self.run_ok(js(
            "const r = plimsoll.request({path: '/big?n=5000000'});"
            "console.log(r.status, JSON.parse(r.body).error);", "items"))
        self.assertEqual(body["stdout"], "502 response_too_large\n", body)


class DockerGrants(GrantDaemon):
    """Shared by both runtimes; per_runtime sets RUNTIME."""
    INSTANCE = "grants-"

    @classmethod
    def grants(cls):
        jwt = {"issuer": "plimsoll-test", "audience": "items-api", "scopes": SCOPES}
        cls.up_hs = Upstream(Check(alg="HS256", hmac_key=HMAC_KEY.encode(), **jwt))
        cls.up_rs = Upstream(Check(alg="RS256", pub_pem=cls.files.pub("rsa"), **jwt))
        cls.up_ed = Upstream(Check(alg="EdDSA", pub_pem=cls.files.pub("ed"), **jwt))
        return {
            "items": profile(cls.up.url, token_cred()),
            "items-hs": profile(cls.up_hs.url, jwt_cred("HS256")),
            "items-rs": profile(cls.up_rs.url, jwt_cred("RS256", cls.files)),
            "items-ed": profile(cls.up_ed.url, jwt_cred("EdDSA", cls.files)),
        }

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        for u in (cls.up_hs, cls.up_rs, cls.up_ed):
            u.close()
        cls.close_grants()
        assert TOKEN not in cls.d.log_text()
        assert HMAC_KEY not in cls.d.log_text()

    def setUp(self):
        for u in (self.up, self.up_hs, self.up_rs, self.up_ed):
            u.take()

    CLIENT = (
        "import http.client, json, os, socket\n"
        "class C(http.client.HTTPConnection):\n"
        "    def connect(self):\n"
        "        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "        s.connect(os.environ['PLIMSOLL_BROKER_SOCKET'])\n"
        "        self.sock = s\n"
        "def call(method, path, body=None):\n"
        "    c = C('broker')\n"
        "    h = {'Content-Type': 'application/json', 'Authorization': 'Bearer mine'}\n"
        "    c.request(method, path, body=body, headers=h)\n"
        "    r = c.getresponse()\n"
        "    return r.status, r.getheader('X-Plimsoll-Broker'), r.read().decode()\n"
    )

    def py(self, code, grant, principal="alice"):
        msg = snippet("python", self.CLIENT + code, grant)
        status, body = self.d.rpc("Run", msg, principal=principal)
        self.assertEqual(status, 200, body)
        self.assertNotIn(TOKEN, json.dumps(body))
        return body

    def test_snippet_allowed_route(self):
        body = self.py("s, b, t = call('GET', '/items/42?x=1')\n"
                       "print(s, b, json.loads(t)['path'], json.loads(t)['query'])\n", "items")
        self.assertEqual(body["stdout"], "200 None /items/42 x=1\n", body)
        got = self.up.take()
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0]["ok"], got[0])
        self.assertEqual(got[0]["headers"]["authorization"], "Bearer " + TOKEN)
        self.assertEqual(body["record"]["broker_calls"], 1)

    def test_refused_routes_never_reach_the_api(self):
        body = self.py("for m, p in (('GET', '/admin'), ('PUT', '/items/1'),"
                       " ('GET', '/items//1'), ('GET', '/reports/%2F..')):\n"
                       "    s, b, t = call(m, p)\n"
                       "    print(s, b, json.loads(t)['error'])\n", "items")
        self.assertEqual(body["stdout"].splitlines(), [
            "403 refused route_not_allowed", "403 refused route_not_allowed",
            "400 refused bad_path", "400 refused bad_path"], body)
        self.assertEqual(self.up.take(), [])
        self.assertEqual(body["record"]["broker_refused"], 4)

    def test_project_step_calls_the_api(self):
        script = self.CLIENT + (
            "s, b, t = call('POST', '/items/9/notes', json.dumps({'from': 'project'}))\n"
            "print(s, json.loads(t)['body'])\n")
        msg = {"project": {"files": [{"path": "call.py", "content": script}],
                           "steps": [{"name": "call", "argv": ["python3", "call.py"]}]},
               "grant_profile": "items"}
        status, body = self.d.rpc("Run", msg)
        self.assertEqual(status, 200, body)
        step = body["steps"][0]
        self.assertEqual(step["exit_code"], 0, body)
        self.assertEqual(step["stdout"], '200 {"from": "project"}\n', body)
        got = self.up.take()
        self.assertEqual([g["method"] for g in got], ["POST"])

    def test_no_grant_reaches_nothing(self):
        code = ("import os, socket\n"
                "print(os.path.exists('/run/plimsoll'), 'PLIMSOLL_BROKER_SOCKET' in os.environ)\n"
                "for host in ('127.0.0.1', '172.17.0.1', '10.0.0.1'):\n"
                "    s = socket.socket(); s.settimeout(2)\n"
                "    try:\n"
                "        s.connect((host, %d)); print('reached', host)\n"
                "    except OSError as e:\n"
                "        print('unreachable')\n" % self.up.port)
        msg = {"snippet": {"language": "python", "code": code}}
        status, body = self.d.rpc("Run", msg)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"].splitlines(),
                         ["False False", "unreachable", "unreachable", "unreachable"], body)
        self.assertEqual(self.up.take(), [])

    def test_jwt_algorithms_verify_upstream(self):
        for grant, up in (("items-hs", self.up_hs), ("items-rs", self.up_rs),
                          ("items-ed", self.up_ed)):
            body = self.py("s, b, t = call('GET', '/items/1')\n"
                           "print(s, json.loads(t)['sub'])\n", grant)
            self.assertEqual(body["stdout"], "200 alice\n", (grant, body))
            got = up.take()
            self.assertEqual(len(got), 1, grant)
            self.assertTrue(got[0]["ok"], got[0])
            self.assertEqual(got[0]["claims"]["sub"], "alice")

    def test_concurrent_runs_get_their_own_subjects(self):
        results = {}

        def one(principal):
            results[principal] = self.py("s, b, t = call('GET', '/items/1')\n"
                                         "print(json.loads(t)['sub'])\n", "items-hs",
                                         principal=principal)

        ts = [threading.Thread(target=one, args=(p,)) for p in ("alice", "bob")]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results["alice"]["stdout"], "alice\n")
        self.assertEqual(results["bob"]["stdout"], "bob\n")
        got = self.up_hs.take()
        self.assertEqual(sorted(g["claims"]["sub"] for g in got), ["alice", "bob"])
        self.assertNotEqual(got[0]["claims"]["jti"], got[1]["claims"]["jti"])

    def test_javascript_snippet_uses_node_http(self):
        code = ("const http = require('http');"
                "http.get({socketPath: process.env.PLIMSOLL_BROKER_SOCKET, path: '/items/5'},"
                " r => { let b = ''; r.on('data', d => b += d);"
                " r.on('end', () => console.log(r.statusCode, JSON.parse(b).path)); });")
        msg = {"snippet": {"language": "javascript", "code": code}, "grant_profile": "items"}
        status, body = self.d.rpc("Run", msg)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["stdout"], "200 /items/5\n", body)

    def test_module_grant_unsupported(self):
        status, body = self.d.rpc("Run", {"module": {"wasm_base64": "AGFzbQEAAAA="},
                                          "grant_profile": "items"})
        self.assertEqual(body["code"], "unimplemented", body)


DockerGrantsRunc, DockerGrantsRunsc = per_runtime(DockerGrants)


if __name__ == "__main__":
    unittest.main()
