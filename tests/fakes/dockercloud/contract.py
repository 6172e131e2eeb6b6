# SPDX-License-Identifier: Apache-2.0
"""The Docker Sandboxes API's own contract, as the fake checks it: every
request it is sent (path, method, parameters, body) and every answer it
gives (status, body) against the published OpenAPI file, read at run time
from ../shared/upstream/dockercloud/api.yaml beside the repository (never
copied into it).

    c = Contract.load()                      # raises ContractMissing
    v = c.check(method, path, query, headers, body, content_type,
                status, answer, answer_type)  # [violation, ...]

A violation is {"operation", "field", "message", "upstream", "line"}:
the operation's id (or "METHOD path" when the file has none), the field
of the request or answer that broke it, what the file wants, the upstream
file, and the line of the operation in it.  Schemas are JSON Schema
2020-12 (OpenAPI 3.1 and later), checked with Debian's python3-jsonschema;
documents are read with python3-yaml.
"""
import json
import os
import re
import warnings

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
UPSTREAM_NAME = "dockercloud/api.yaml"
UPSTREAM = os.path.join(REPO, "..", "shared", "upstream", "dockercloud", "api.yaml")
BASE = "urn:dockercloud-api"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


class ContractMissing(Exception):
    """The upstream file is not there: the fake must not run unchecked."""


def _validator(doc, pointer):
    """A validator of the schema at `pointer` in doc, its $refs resolved
    in doc (referencing with jsonschema 4.18 and later, RefResolver
    before)."""
    cls = jsonschema.Draft202012Validator
    schema = {"$ref": BASE + "#" + pointer}
    try:
        import referencing
        import referencing.jsonschema
        resource = referencing.Resource(contents=doc, specification=referencing.jsonschema.DRAFT202012)
        registry = referencing.Registry().with_resource(BASE, resource)
        return cls(schema, registry=registry)
    except ImportError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            resolver = jsonschema.RefResolver(base_uri=BASE, referrer=doc, store={BASE: doc})
            return cls(schema, resolver=resolver)


def _pointer(*parts):
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _field(prefix, error):
    path = "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in error.absolute_path)
    return (prefix + path) if path else prefix


class Operation:
    def __init__(self, contract, template, method, path_item, op):
        self.contract, self.template, self.method, self.op = contract, template, method, op
        self.id = op.get("operationId") or "%s %s" % (method.upper(), template)
        self.line = contract.lines.get(self.id, 0)
        names = re.findall(r"\{([^}]+)\}", template)
        self.regex = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "([^/]+)", re.escape(template)) + "$")
        self.path_names = names
        params = {}
        for p in list(path_item.get("parameters", [])) + list(op.get("parameters", [])):
            p = contract.deref(p)
            params[(p["in"], p["name"].lower() if p["in"] == "header" else p["name"])] = p
        self.params = params
        self.pointer = _pointer("paths", template, method)

    def violation(self, field, message):
        return {"operation": self.id, "field": field, "message": message,
                "upstream": UPSTREAM_NAME, "line": self.line}


class Contract:
    def __init__(self, text):
        # libyaml's loader when python3-yaml has it (ten times faster).
        self.doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        self.lines = {}
        for n, line in enumerate(text.splitlines(), 1):
            m = re.match(r"^\s+operationId:\s*(\S+)\s*$", line)
            if m:
                self.lines[m.group(1)] = n
        self.ops = []
        for template, item in self.doc.get("paths", {}).items():
            for method in METHODS:
                if method in item:
                    self.ops.append(Operation(self, template, method, item, item[method]))
        # A literal segment wins over a parameter (/v1/processes/exec over
        # /v1/processes/{process}).
        self.ops.sort(key=lambda o: (o.template.count("{"), -len(o.template)))
        self.validators = {}

    @classmethod
    def load(cls, path=UPSTREAM):
        try:
            with open(path, encoding="utf-8") as f:
                return cls(f.read())
        except OSError as e:
            raise ContractMissing("the Docker Sandboxes API's OpenAPI file %s: %s (the fake "
                                  "checks every request and answer against it)"
                                  % (path, e.strerror)) from None

    def deref(self, obj):
        while isinstance(obj, dict) and "$ref" in obj:
            ref = obj["$ref"]
            if not ref.startswith("#/"):
                raise ValueError("an external $ref %r" % ref)
            node = self.doc
            for part in ref[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            obj = node
        return obj

    def validator(self, pointer):
        if pointer not in self.validators:
            self.validators[pointer] = _validator(self.doc, pointer)
        return self.validators[pointer]

    def schema_errors(self, op, pointer, instance, prefix):
        out = []
        for e in sorted(self.validator(pointer).iter_errors(instance), key=lambda e: list(e.absolute_path)):
            out.append(op.violation(_field(prefix, e), e.message[:300]))
        return out

    def find(self, method, path):
        """(operation, path parameters) or (None, None)."""
        path_ok = False
        for op in self.ops:
            m = op.regex.match(path)
            if m:
                path_ok = True
                if op.method == method.lower():
                    return op, dict(zip(op.path_names, m.groups()))
        return None, path_ok

    # -- one exchange

    def check(self, method, path, query, headers, body, content_type, status, answer, answer_type,
              checked=None):
        """Violations of one request (query: {name: [values]}, headers: a
        case-insensitive mapping, body: bytes) and of its answer; checked,
        when given, is the permissions the fake checked for it, which must
        be the operation's x-sbx-required-permissions."""
        if isinstance(headers, dict):
            headers = {k.lower(): v for k, v in headers.items()}
        op, params = self.find(method, path)
        if op is None:
            return [{"operation": "%s %s" % (method, path), "field": "path" if not params else "method",
                     "message": "no operation of the API is %s %s" % (method, path),
                     "upstream": UPSTREAM_NAME, "line": 0}]
        out = []
        want = sorted(op.op.get("x-sbx-required-permissions") or [])
        if checked is not None and sorted(checked) != want:
            out.append(op.violation("x-sbx-required-permissions", "the fake checked %s, the file "
                                    "requires %s" % (sorted(checked), want)))
        return (out + self.check_request(op, params, query, headers, body, content_type)
                + self.check_answer(op, status, answer, answer_type))

    def param_value(self, param, raw):
        """A query or header value as its schema's type reads it."""
        schema = self.deref(param.get("schema", {}))
        kind = schema.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if "boolean" in kinds and raw in ("true", "false"):
            return raw == "true"
        if ("integer" in kinds or "number" in kinds) and re.fullmatch(r"-?\d+", raw):
            return int(raw)
        return raw

    def check_request(self, op, path_params, query, headers, body, content_type):
        out = []
        for (where, name), p in op.params.items():
            if where == "query":
                present = name in query
                values = query.get(name, [])
            elif where == "header":
                present = headers.get(name) is not None
                values = [headers.get(name)] if present else []
            elif where == "path":
                present, values = name in path_params, [path_params.get(name, "")]
            else:
                continue
            if p.get("required") and not present:
                out.append(op.violation("%s.%s" % (where, p["name"]), "required, not sent"))
                continue
            if where == "query" and len(values) > 1 and \
                    self.deref(p.get("schema", {})).get("type") != "array":
                out.append(op.violation("query.%s" % name, "sent %d times" % len(values)))
            if "schema" in p:
                for v in values:
                    out += [op.violation("%s.%s" % (where, p["name"]), e)
                            for e in self.param_errors(op, p, self.param_value(p, v))]
        for name in query:
            if ("query", name) not in op.params:
                out.append(op.violation("query.%s" % name, "not a parameter of this operation"))
        rb = self.deref(op.op.get("requestBody")) if op.op.get("requestBody") else None
        if rb is None:
            if body:
                out.append(op.violation("body", "this operation takes no request body"))
            return out
        if not body:
            if rb.get("required"):
                out.append(op.violation("body", "required, not sent"))
            return out
        media = (content_type or "").split(";")[0].strip().lower()
        content = rb.get("content", {})
        if media not in content:
            out.append(op.violation("Content-Type", "%r is not one of %s" % (media, ", ".join(content))))
            return out
        pointer = op.pointer + _pointer("requestBody", "content", media)
        if media == "application/json":
            try:
                instance = json.loads(body)
            except ValueError as e:
                return out + [op.violation("body", "not JSON: %s" % e)]
            if "schema" in content[media]:
                out += self.schema_errors(op, pointer + "/schema", instance, "body")
        elif media == "multipart/form-data" and "itemSchema" in content[media]:
            out += self.check_multipart(op, pointer + "/itemSchema", body, content_type,
                                        content[media].get("x-sbx-framing", {}).get("partOrder"))
        return out

    def param_errors(self, op, param, value):
        key = ("param", op.id, param["in"], param["name"])
        if key not in self.validators:
            holder = dict(self.doc)
            holder["x-plimsoll-param"] = self.deref(param["schema"])
            self.validators[key] = _validator(holder, "/x-plimsoll-param")
        return [e.message[:300] for e in self.validators[key].iter_errors(value)]

    def check_multipart(self, op, pointer, body, content_type, order):
        """Each part, as {name: value}, against the item schema; the parts
        in the documented order."""
        m = re.search(r'boundary=(?:"([^"]+)"|([^;\s]+))', content_type or "")
        if not m:
            return [op.violation("Content-Type", "multipart without a boundary")]
        delimiter = b"--" + (m.group(1) or m.group(2)).encode()
        chunks = body.split(delimiter)
        if len(chunks) < 2 or not chunks[-1].startswith(b"--"):
            return [op.violation("body", "no clean closing multipart delimiter")]
        out, names = [], []
        for i, chunk in enumerate(chunks[1:-1]):
            head, _, data = chunk.partition(b"\r\n\r\n")
            data = data[:-2] if data.endswith(b"\r\n") else data
            hdrs = {}
            for line in head.decode("utf-8", "replace").split("\r\n"):
                k, colon, v = line.partition(":")
                if colon:
                    hdrs[k.strip().lower()] = v.strip()
            n = re.search(r'(?:^|;)\s*name="?([^";]+)"?', hdrs.get("content-disposition", ""))
            name = n.group(1) if n else None
            names.append(name)
            if name == "metadata":
                try:
                    value = json.loads(data)
                except ValueError:
                    out.append(op.violation("body[%d].metadata" % i, "not JSON"))
                    continue
            else:
                value = data.decode("latin-1")
            out += self.schema_errors(op, pointer, {name or "": value}, "body[%d]" % i)
        if order and names and any(n != order[i % len(order)] for i, n in enumerate(names)):
            out.append(op.violation("body", "parts %s, not in the order %s" % (names, order)))
        return out

    def check_answer(self, op, status, answer, answer_type):
        responses = op.op.get("responses", {})
        key = str(status)
        if key not in responses:
            key = "%dXX" % (status // 100) if "%dXX" % (status // 100) in responses else "default"
        if key not in responses or (key == "default" and status < 400):
            return [op.violation("answer.status", "%d is not a response of this operation" % status)]
        resp = self.deref(responses[key])
        content = resp.get("content")
        if not content:
            if answer:
                return [op.violation("answer.body", "response %s has no body" % key)]
            return []
        media = (answer_type or "").split(";")[0].strip().lower()
        if media not in content:
            return [op.violation("answer.Content-Type", "%r is not one of %s for %s"
                                 % (media, ", ".join(content), key))]
        if media != "application/json" or "schema" not in content[media]:
            return []
        try:
            instance = json.loads(answer)
        except ValueError as e:
            return [op.violation("answer.body", "not JSON: %s" % e)]
        pointer = op.pointer + _pointer("responses", key) if "$ref" not in responses[key] else \
            responses[key]["$ref"][1:]
        return self.schema_errors(op, pointer + _pointer("content", media, "schema"), instance,
                                  "answer(%d)" % status)
