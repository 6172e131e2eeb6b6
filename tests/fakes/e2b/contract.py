# SPDX-License-Identifier: Apache-2.0
"""E2B's published contracts, read at run time, as the fake checks its
traffic against them (docs/providers/e2b-fake.md, "The contract check").

    c = Contract(upstream_dir)            # raises ContractMissing
    op = c.api_operation("POST", "/sandboxes")
    violations = c.check_request(op, query, headers, body)
    violations += c.check_response(op, status, content_type, body)

The upstream directory holds e2b-dev/E2B's spec/openapi.yml (the control
plane), spec/envd/envd.yaml (envd's HTTP API) and
spec/envd/process/process.proto (envd's Connect RPCs), kept unchanged in
../shared/upstream/e2b of the worktree; nothing of them is copied here.
Every violation is a dict: file (the upstream file), operation, field,
problem.

The OpenAPI schemas are OpenAPI 3.0's dialect of JSON Schema; they are
turned into draft 4 for the validator (Debian's python3-jsonschema):
nullable becomes "or null", and an object schema that names its properties
admits no others (the spec's types are what a server reads; a field it does
not declare is one it ignores, so a misspelt field is a violation, not a
no-op).  Proto3 JSON messages are checked field by field against the
proto's messages: the JSON name (lowerCamelCase) or the field's own name,
the type, at most one member of a oneof.
"""
import os
import re
import urllib.parse

import jsonschema
import yaml

API_FILE = "e2b/openapi.yml"
ENVD_FILE = "e2b/envd.yaml"
PROCESS_FILE = "e2b/process.proto"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class ContractMissing(Exception):
    """An upstream file is not there: the fake refuses to start."""


def violation(file, operation, field, problem):
    return {"file": file, "operation": operation, "field": field, "problem": problem}


# ------------------------------------------------------------ OpenAPI 3.0

def to_draft4(node, strict=True, in_allof=False):
    """An OpenAPI 3.0 schema (tree) as a draft 4 JSON Schema."""
    if isinstance(node, list):
        return [to_draft4(n, strict) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in ("nullable", "example", "deprecated", "discriminator", "xml", "externalDocs",
                 "readOnly", "writeOnly") or k.startswith("x-"):
            continue
        if k == "properties" and isinstance(v, dict):
            out[k] = {name: to_draft4(s, strict) for name, s in v.items()}
        elif k == "allOf":
            out[k] = [to_draft4(s, strict, in_allof=True) for s in v]
        else:
            out[k] = to_draft4(v, strict)
    if strict and not in_allof and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if node.get("nullable") is True:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


FORMATS = jsonschema.FormatChecker(())


@FORMATS.checks("date-time", raises=ValueError)
def is_date_time(value):
    return not isinstance(value, str) or bool(DATE_TIME.match(value))


@FORMATS.checks("int32")
def is_int32(value):
    return not isinstance(value, int) or -(1 << 31) <= value < (1 << 31)


@FORMATS.checks("int64")
def is_int64(value):
    return not isinstance(value, int) or -(1 << 63) <= value < (1 << 63)


def fields_of(error, prefix):
    """A validator error's places: body.network.denyOut[0] (one for each
    property an additionalProperties error names)."""
    out = prefix
    for p in error.absolute_path:
        out += "[%d]" % p if isinstance(p, int) else ".%s" % p
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        extra = sorted(k for k in error.instance if k not in known)
        if extra:
            return [out + "." + k for k in extra]
    if error.validator == "required":
        m = re.match(r"'([^']+)'", error.message)
        if m:
            out += "." + m.group(1)
    return [out]


class OpenApi:
    """One OpenAPI document: its operations and a validator for its schemas."""

    def __init__(self, path, file):
        self.file = file
        try:
            with open(path, encoding="utf-8") as f:
                self.doc = yaml.safe_load(f)
        except OSError as e:
            raise ContractMissing("%s: %s" % (path, e)) from None
        # The lines each path and schema starts on, for the messages.
        self.lines = {}
        with open(path, encoding="utf-8") as f:
            section = None
            for n, line in enumerate(f, 1):
                m = re.match(r"^  (/\S*):\s*$", line)
                if m:
                    self.lines[m.group(1)] = n
                m = re.match(r"^    ([A-Za-z0-9_]+):\s*$", line)
                if m and section == "schemas":
                    self.lines.setdefault("#/components/schemas/" + m.group(1), n)
                m = re.match(r"^  ([a-zA-Z]+):\s*$", line)
                if m:
                    section = m.group(1)
        self.root = {"components": to_draft4(self.doc.get("components", {}))}
        self.lax_root = {"components": to_draft4(self.doc.get("components", {}), strict=False)}
        self.validators = {}
        self.paths = []
        for template, item in (self.doc.get("paths") or {}).items():
            regex = "^" + re.sub(r"\\\{([^}]+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            self.paths.append((literal, template, re.compile(regex), item))
        self.paths.sort(key=lambda p: -p[0])   # literal paths before templated ones

    def where(self, template):
        return "%s:%s" % (self.file, self.lines.get(template, "?"))

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            node = self.pointer(node["$ref"])
        return node

    def pointer(self, ref):
        node = self.doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        return node

    def operation(self, method, path):
        """(template, operation dict, path parameters) or a violation."""
        for _, template, regex, item in self.paths:
            m = regex.match(path)
            if not m:
                continue
            op = item.get(method.lower())
            if op is None:
                return None, violation(self.where(template), "%s %s" % (method, template), "method",
                                       "%s is not an operation of %s" % (method, template))
            params = [self.resolve(p) for p in item.get("parameters", []) + op.get("parameters", [])]
            return Operation(self, method, template, op, params,
                             {k: urllib.parse.unquote(v) for k, v in m.groupdict().items()}), None
        return None, violation(self.file, "%s %s" % (method, path), "path",
                               "%s is not a path of %s" % (path, self.file))

    def validate(self, schema, value, where, operation, prefix, strict=True):
        """Violations of value against an OpenAPI schema (strict: objects
        closed to properties they do not list; not strict: the document's
        own rules, as E2B's server validates a request)."""
        key = (repr(schema), strict)
        v = self.validators.get(key)
        if v is None:
            root = self.root if strict else self.lax_root
            wrapped = dict(root, allOf=[to_draft4(schema, strict)])
            v = self.validators[key] = jsonschema.Draft4Validator(wrapped, format_checker=FORMATS)
        out = []
        for e in sorted(v.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path]):
            for field in fields_of(e, prefix):
                out.append(violation(where, operation, field, e.message))
        return out


class Operation:
    def __init__(self, api, method, template, op, params, path_params):
        self.api, self.method, self.template, self.op = api, method, template, op
        self.params, self.path_params = params, path_params
        self.name = "%s %s" % (method, template)
        self.where = api.where(template)

    def v(self, field, problem):
        return violation(self.where, self.name, field, problem)

    def refusal(self, query, body, content_type):
        """The first problem E2B's server refuses this request for (400), or
        None: its OpenAPI request validator (kin-openapi, in e2b-dev/infra's
        packages/api/main.go) checks parameters and the body against the
        document, which leaves objects open and undeclared query parameters
        alone.  Security (401) is the caller's."""
        found = self.check_request(query, {}, body, content_type, strict=False)
        return found[0] if found else None

    def check_request(self, query, headers, body, content_type, strict=True):
        """query: {name: [values]}; headers: a mapping (case-insensitive
        get); body: bytes (b"" when none)."""
        self.strict = strict
        out = []
        declared = {(p["in"], p["name"]): p for p in self.params}
        for (where, name), p in declared.items():
            present = name in query if where == "query" else \
                name in self.path_params if where == "path" else headers.get(name) is not None
            if p.get("required") and not present:
                out.append(self.v("%s.%s" % (where, name), "required %s parameter missing" % where))
        for name, values in query.items():
            p = declared.get(("query", name))
            if p is None:
                if strict:
                    out.append(self.v("query." + name, "not a parameter of the operation"))
                continue
            out += self.query_value(p, name, values)
        for name, value in self.path_params.items():
            p = declared.get(("path", name))
            if p is not None:
                out += self.api.validate(p.get("schema", {}), value, self.where, self.name,
                                         "path." + name, strict)
        if strict:
            out += self.check_security(headers)
        out += self.check_body(body, content_type)
        return out

    def query_value(self, p, name, values):
        schema = self.api.resolve(p.get("schema", {}))
        kind = schema.get("type")
        if kind == "array":
            explode = p.get("explode", p.get("style", "form") == "form")
            if not explode and len(values) > 1:
                return [self.v("query." + name, "given %d times; the parameter is one "
                                                "comma-separated list (explode: false)" % len(values))]
            items = [i for v in values for i in (v.split(",") if not explode else [v])]
            value = [self.scalar(self.api.resolve(schema.get("items", {})), i) for i in items]
        else:
            if len(values) > 1:
                return [self.v("query." + name, "given %d times" % len(values))]
            value = self.scalar(schema, values[0])
        return self.api.validate(p.get("schema", {}), value, self.where, self.name, "query." + name,
                                 self.strict)

    @staticmethod
    def scalar(schema, text):
        """A query value as the type its schema names (left a string when it
        does not read as one, so the validator names the mismatch)."""
        kind = schema.get("type")
        if kind == "integer" and re.fullmatch(r"-?\d+", text):
            return int(text)
        if kind == "number":
            try:
                return float(text)
            except ValueError:
                return text
        if kind == "boolean" and text in ("true", "false"):
            return text == "true"
        return text

    def check_security(self, headers):
        alternatives = self.op.get("security", self.api.doc.get("security"))
        if not alternatives:
            return []
        schemes = self.api.doc.get("components", {}).get("securitySchemes", {})
        for alt in alternatives:
            if all(self.has_credential(schemes.get(name, {}), headers) for name in alt):
                return []
        names = " or ".join("+".join(alt) or "none" for alt in alternatives)
        return [self.v("headers", "no credential of %s" % names)]

    @staticmethod
    def has_credential(scheme, headers):
        if scheme.get("type") == "apiKey" and scheme.get("in") == "header":
            return bool(headers.get(scheme["name"]))
        if scheme.get("type") == "http":
            auth = headers.get("Authorization") or ""
            return auth.lower().startswith(scheme.get("scheme", "").lower() + " ")
        return False

    def check_body(self, body, content_type):
        rb = self.api.resolve(self.op.get("requestBody"))
        if rb is None:
            return [self.v("body", "the operation takes no body (%d bytes sent)" % len(body))] \
                if body else []
        if not body:
            return [self.v("body", "required body missing")] if rb.get("required") else []
        media = (content_type or "").split(";")[0].strip().lower()
        content = rb.get("content", {})
        if media not in content:
            return [self.v("headers.Content-Type", "%r is not one of %s" %
                           (content_type, sorted(content)))]
        if media != "application/json":
            return []
        try:
            value = json_loads(body)
        except ValueError as e:
            return [self.v("body", "not JSON: %s" % e)]
        return self.api.validate(content[media].get("schema", {}), value, self.where, self.name,
                                 "body", self.strict)

    def check_response(self, status, content_type, body):
        responses = self.op.get("responses", {})
        spec = responses.get(str(status)) or responses.get("%dXX" % (status // 100)) or \
            responses.get("default")
        if spec is None:
            if status < 400:
                return [self.v("response", "status %d is not one of the operation's (%s)"
                               % (status, ", ".join(sorted(responses))))]
            # An error the document does not list (a server may answer any):
            # its body is still the document's Error.
            spec = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        spec = self.api.resolve(spec)
        content = spec.get("content")
        if not content:
            return [self.v("response", "status %d has no body, %d bytes answered" % (status, len(body)))] \
                if body else []
        media = (content_type or "").split(";")[0].strip().lower()
        if media not in content:
            return [self.v("response.Content-Type", "%r is not one of %s for %d" %
                           (content_type, sorted(content), status))]
        if media != "application/json":
            return []
        try:
            value = json_loads(body)
        except ValueError as e:
            return [self.v("response", "not JSON: %s" % e)]
        return self.api.validate(content[media].get("schema", {}), value, self.where, self.name,
                                 "response.%d" % status)


def json_loads(body):
    import json
    return json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)


# ---------------------------------------------------------------- proto3

class Proto:
    """The messages and enums of one .proto file (enough of the grammar
    for envd's: messages, nested messages and enums, oneof, map, optional,
    repeated), and the RPCs of its services."""

    SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
               "fixed32", "fixed64", "sfixed32", "sfixed64", "float", "double"}

    def __init__(self, path, file):
        self.file = file
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ContractMissing("%s: %s" % (path, e)) from None
        self.package = (re.search(r"^\s*package\s+([\w.]+)\s*;", text, re.M) or [None, ""])[1]
        lines = text.split("\n")
        self.messages, self.enums, self.rpcs = {}, {}, {}
        scope, kinds = [], []
        oneof = None
        for n, raw in enumerate(lines, 1):
            line = re.sub(r"//.*", "", raw).strip()
            m = re.match(r"^(message|enum)\s+(\w+)\s*\{\s*\}$", line)
            if m:   # an empty one on one line
                name = ".".join(scope + [m.group(2)])
                if m.group(1) == "message":
                    self.messages[name] = {"fields": {}, "line": n}
                else:
                    self.enums[name] = {}
                continue
            m = re.match(r"^(message|enum|service)\s+(\w+)\s*\{$", line)
            if m:
                scope.append(m.group(2))
                kinds.append(m.group(1))
                name = ".".join(scope)
                if m.group(1) == "message":
                    self.messages[name] = {"fields": {}, "line": n}
                elif m.group(1) == "enum":
                    self.enums[name] = {}
                continue
            m = re.match(r"^oneof\s+(\w+)\s*\{$", line)
            if m:
                oneof = m.group(1)
                kinds.append("oneof")
                continue
            if line.startswith("}"):
                kind = kinds.pop()
                if kind == "oneof":
                    oneof = None
                else:
                    scope.pop()
                continue
            if not kinds:
                continue
            if kinds[-1] == "enum":
                m = re.match(r"^(\w+)\s*=\s*(-?\d+)\s*;$", line)
                if m:
                    self.enums[".".join(scope)][m.group(1)] = int(m.group(2))
                continue
            if kinds[-1] == "service":
                m = re.match(r"^rpc\s+(\w+)\s*\(\s*(stream\s+)?(\w+)\s*\)\s*returns\s*\(\s*(stream\s+)?(\w+)\s*\)", line)
                if m:
                    self.rpcs["/%s.%s/%s" % (self.package, scope[-1], m.group(1))] = {
                        "request": m.group(3), "response": m.group(5),
                        "client_stream": bool(m.group(2)), "server_stream": bool(m.group(4)),
                        "line": n}
                continue
            m = re.match(r"^(optional\s+|repeated\s+)?(map\s*<\s*(\w+)\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;$", line)
            if m:
                label = (m.group(1) or "").strip()
                field = {"name": m.group(5), "label": label, "oneof": oneof, "line": n,
                         "scope": ".".join(scope)}
                if m.group(3):
                    field.update(type="map", key=m.group(3), value=m.group(4))
                else:
                    field["type"] = m.group(2)
                self.messages[".".join(scope)]["fields"][m.group(5)] = field

    @staticmethod
    def json_name(name):
        parts = name.split("_")
        return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])

    def lookup(self, type_name, scope, table):
        """A type named in scope, innermost first (proto's scoping)."""
        parts = scope.split(".") if scope else []
        while True:
            candidate = ".".join(parts + [type_name])
            if candidate in table:
                return candidate
            if not parts:
                return None
            parts.pop()

    def check(self, message, value, operation, field="message"):
        """Violations of a proto3 JSON value against message."""
        out = []
        spec = self.messages.get(message)
        where = lambda f: "%s:%d" % (self.file, f["line"]) if f else \
            "%s:%d" % (self.file, self.messages[message]["line"])
        if not isinstance(value, dict):
            return [violation(where(None), operation, field, "%r is not a %s object" % (value, message))]
        by_json = {}
        for f in spec["fields"].values():
            by_json[self.json_name(f["name"])] = f
            by_json[f["name"]] = f
        set_oneofs = {}
        for key, v in value.items():
            f = by_json.get(key)
            if f is None:
                out.append(violation(where(None), operation, "%s.%s" % (field, key),
                                     "not a field of %s" % message))
                continue
            if f["oneof"]:
                if f["oneof"] in set_oneofs and v is not None:
                    out.append(violation(where(f), operation, "%s.%s" % (field, key),
                                         "oneof %s already set by %s" % (f["oneof"], set_oneofs[f["oneof"]])))
                set_oneofs[f["oneof"]] = key
            if v is None:
                continue
            out += self.check_field(f, v, operation, "%s.%s" % (field, key), where(f))
        return out

    def check_field(self, f, v, operation, field, where):
        if f["type"] == "map":
            if not isinstance(v, dict):
                return [violation(where, operation, field, "a map is a JSON object")]
            out = []
            for k, item in v.items():
                out += self.check_value(f["value"], f["scope"], item, operation,
                                        "%s[%r]" % (field, k), where)
            return out
        if f["label"] == "repeated":
            if not isinstance(v, list):
                return [violation(where, operation, field, "a repeated field is a JSON array")]
            out = []
            for i, item in enumerate(v):
                out += self.check_value(f["type"], f["scope"], item, operation,
                                        "%s[%d]" % (field, i), where)
            return out
        return self.check_value(f["type"], f["scope"], v, operation, field, where)

    def check_value(self, type_name, scope, v, operation, field, where):
        def bad(problem):
            return [violation(where, operation, field, problem)]
        if type_name == "string":
            return [] if isinstance(v, str) else bad("%r is not a string" % (v,))
        if type_name == "bool":
            return [] if isinstance(v, bool) else bad("%r is not a bool" % (v,))
        if type_name == "bytes":
            ok = isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9+/_-]*={0,2}", v)
            return [] if ok else bad("%r is not base64" % (v,))
        if type_name in ("float", "double"):
            return [] if isinstance(v, (int, float)) and not isinstance(v, bool) \
                else bad("%r is not a number" % (v,))
        if type_name in self.SCALARS:
            if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool):
                return bad("%r is not an integer" % (v,))
            bits = 64 if "64" in type_name else 32
            low = 0 if type_name.startswith(("uint", "fixed")) else -(1 << (bits - 1))
            high = (1 << bits) if low == 0 else (1 << (bits - 1))
            return [] if low <= v < high else bad("%d is out of %s's range" % (v, type_name))
        enum = self.lookup(type_name, scope, self.enums)
        if enum:
            values = self.enums[enum]
            if isinstance(v, str):
                return [] if v in values else bad("%r is not a value of enum %s" % (v, enum))
            if isinstance(v, int) and not isinstance(v, bool):
                return []   # proto3 enums are open: any number reads
            return bad("%r is not an enum value" % (v,))
        message = self.lookup(type_name, scope, self.messages)
        if message:
            return self.check(message, v, operation, field)
        return bad("type %s is not in %s" % (type_name, self.file))


# ------------------------------------------------------------------ both

class Contract:
    """E2B's three documents, from an upstream directory."""

    def __init__(self, upstream):
        for name in ("openapi.yml", "envd.yaml", "process.proto"):
            if not os.path.isfile(os.path.join(upstream, name)):
                raise ContractMissing("%s is missing (E2B's published contract, read at run "
                                      "time; see ../shared/upstream/README.md)"
                                      % os.path.join(upstream, name))
        self.api = OpenApi(os.path.join(upstream, "openapi.yml"), API_FILE)
        self.envd = OpenApi(os.path.join(upstream, "envd.yaml"), ENVD_FILE)
        self.process = Proto(os.path.join(upstream, "process.proto"), PROCESS_FILE)

    def rpc(self, path):
        """The Process RPC of a Connect path, or None."""
        return self.process.rpcs.get(path)
