# SPDX-License-Identifier: Apache-2.0
"""The project's protos against the services' published ones.

Both sides are compiled at test time with Debian's protoc
(--descriptor_set_out --include_imports) and read with python3-protobuf's
descriptor_pb2.  The published protos are read from <repo>/../shared/upstream
(its README names the upstream file and commit of each); nothing of them is
copied into the repository, and a missing copy is an error, not a skip.

compare() matches each message of the project's proto with upstream's
message of the same name (in any of upstream's packages; a name several of
upstream's packages define is the one in the package of the project's own
name, or, with none there, refused as ambiguous) and each field by name, and reports every field whose
number, type (the message or enum type's name included) or label differs,
naming the message, the field and upstream's file; a field upstream's
message does not have is reported too (a gateway would never send it, and
its number may be another field's there).  Enums are matched the
same way, each value by name and number, and each method of the
project's services must be upstream's, with the same request and answer
types and streams.
"""
import os
import subprocess
import sys
import tempfile

try:
    from google.protobuf import descriptor_pb2
except ImportError:                      # an interpreter without Debian's packages
    sys.path.append("/usr/lib/python3/dist-packages")
    from google.protobuf import descriptor_pb2

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
UPSTREAM = os.path.join(REPO, "..", "shared", "upstream")
FDP = descriptor_pb2.FieldDescriptorProto
TYPE_NAMES = {v: k[len("TYPE_"):].lower() for k, v in FDP.Type.items()}
LABEL_NAMES = {v: k[len("LABEL_"):].lower() for k, v in FDP.Label.items()}
# protoc's own imports (google/protobuf/*.proto): Debian's libprotobuf-dev.
PROTOC_INCLUDE = "/usr/include"


def upstream_dir(name):
    """<repo>/../shared/upstream/<name>, or AssertionError when it is missing."""
    d = os.path.normpath(os.path.join(UPSTREAM, name))
    if not os.path.isdir(d):
        raise AssertionError("the published contracts are not at %s (../shared/upstream "
                             "from the repository; see its README)" % d)
    return d


def compile_set(proto_dir, files):
    """A FileDescriptorSet of `files` (and everything they import)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        r = subprocess.run(["protoc", "-I", proto_dir, "-I", PROTOC_INCLUDE,
                            "--include_imports", "--descriptor_set_out=" + out] + list(files),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("protoc %s: %s" % (" ".join(files), r.stderr.strip()))
        with open(out, "rb") as f:
            s = descriptor_pb2.FileDescriptorSet()
            s.ParseFromString(f.read())
            return s


def _walk(fdset):
    """{full name: (kind, descriptor, file)} for every message and enum,
    nested ones included; map entries are left out (their fields are
    compared through the map field's own type)."""
    out = {}

    def add_msgs(prefix, msgs, fname):
        for m in msgs:
            full = prefix + "." + m.name
            out[full] = ("message", m, fname)
            add_msgs(full, m.nested_type, fname)
            for e in m.enum_type:
                out[full + "." + e.name] = ("enum", e, fname)

    for f in fdset.file:
        prefix = "." + f.package if f.package else ""
        add_msgs(prefix, f.message_type, f.name)
        for e in f.enum_type:
            out[prefix + "." + e.name] = ("enum", e, f.name)
    return out


def _short(full, pkg_of):
    """A type's name without its package (nested names keep their parent)."""
    pkg = pkg_of(full)
    return full[len(pkg) + 1:] if pkg else full.lstrip(".")


def _field_shape(field, types, pkg_of):
    """(number, type, type name, label) of a field; a map field's type is
    'map<key, value>' with the value's type name."""
    tname = _short(field.type_name, pkg_of) if field.type_name else ""
    if field.type == FDP.TYPE_MESSAGE and field.type_name in types:
        m = types[field.type_name][1]
        if m.options.map_entry:
            k, v = m.field[0], m.field[1]
            vt = _short(v.type_name, pkg_of) if v.type_name else TYPE_NAMES[v.type]
            return (field.number, "map", "map<%s, %s>" % (TYPE_NAMES[k.type], vt), "repeated")
    # proto3 optional is a synthetic oneof: the label says optional either way.
    return (field.number, TYPE_NAMES[field.type], tname, LABEL_NAMES[field.label])


def compare(ours, theirs):
    """The project's FileDescriptorSet against upstream's: (mismatches,
    matched) where mismatches is a list of sentences and matched the list of
    message names both define."""
    our_pkgs = {f.package for f in ours.file}
    their_pkgs = {f.package for f in theirs.file}

    def pkg_of_in(pkgs):
        def pkg_of(full):
            best = ""
            for p in pkgs:
                if full.startswith("." + p + ".") and len(p) > len(best):
                    best = p
            return "." + best if best else ""
        return pkg_of

    our_pkg_of, their_pkg_of = pkg_of_in(our_pkgs), pkg_of_in(their_pkgs)
    ours_t, theirs_t = _walk(ours), _walk(theirs)
    by_short = {}
    for full, (kind, d, fname) in theirs_t.items():
        by_short.setdefault(_short(full, their_pkg_of), []).append((full, kind, d, fname))
    problems, matched = [], []
    for full, (kind, d, fname) in sorted(ours_t.items()):
        if fname.startswith("google/protobuf/"):
            continue
        short = _short(full, our_pkg_of)
        if kind == "message" and d.options.map_entry:
            continue
        cands = [c for c in by_short.get(short, []) if c[1] == kind]
        if not cands:
            continue
        # The same name in upstream's package of the same name is the one meant.
        same = [c for c in cands if their_pkg_of(c[0]) == our_pkg_of(full)]
        if len(cands) > 1 and len(same) == 1:
            cands = same
        if len(cands) > 1:
            problems.append("%s %s: upstream defines it in %s; which one is meant is not "
                            "known" % (kind, short, ", ".join("%s (%s)" % (c[0].lstrip("."), c[3])
                                                               for c in cands)))
            continue
        tfull, _, td, tfile = cands[0]
        matched.append(short)
        if kind == "enum":
            theirs_v = {v.name: v.number for v in td.value}
            for v in d.value:
                if v.name not in theirs_v:
                    continue
                if theirs_v[v.name] != v.number:
                    problems.append("enum %s value %s: %d here, %d in upstream's %s (%s)"
                                    % (short, v.name, v.number, theirs_v[v.name], tfile,
                                       tfull.lstrip(".")))
            continue
        theirs_f = {f.name: f for f in td.field}
        theirs_n = {f.number: f for f in td.field}
        for f in d.field:
            tf = theirs_f.get(f.name)
            if tf is None:
                other = theirs_n.get(f.number)
                problems.append("message %s field %s: upstream's %s (%s) has no such field%s"
                                % (short, f.name, tfile, tfull.lstrip("."),
                                   "; its number %d is upstream's %s" % (f.number, other.name)
                                   if other is not None else ""))
                continue
            a = _field_shape(f, ours_t, our_pkg_of)
            b = _field_shape(tf, theirs_t, their_pkg_of)
            for what, i in (("number", 0), ("type", 1), ("type name", 2), ("label", 3)):
                if a[i] != b[i]:
                    problems.append("message %s field %s: %s %r here, %r in upstream's %s (%s)"
                                    % (short, f.name, what, a[i], b[i], tfile,
                                       tfull.lstrip(".")))
            # A field of a oneof here must be in a oneof there (and not).
            a_one = f.HasField("oneof_index") and not f.proto3_optional
            b_one = tf.HasField("oneof_index") and not tf.proto3_optional
            if a_one != b_one:
                problems.append("message %s field %s: %s a oneof here, %s in upstream's %s"
                                % (short, f.name, "in" if a_one else "not in",
                                   "in one" if b_one else "not in one", tfile))
    # The services: each method here is upstream's, with its types and streams.
    their_svcs = {}
    for f in theirs.file:
        for sv in f.service:
            their_svcs[("." + f.package if f.package else "") + "." + sv.name] = (sv, f.name)
    for f in ours.file:
        if f.name.startswith("google/protobuf/"):
            continue
        for sv in f.service:
            full = ("." + f.package if f.package else "") + "." + sv.name
            if full not in their_svcs:
                problems.append("service %s: upstream has no service of that full name (the "
                                "gRPC path is /%s/<method>)" % (full.lstrip("."), full.lstrip(".")))
                continue
            tsv, tfile = their_svcs[full]
            tm = {m.name: m for m in tsv.method}
            for m in sv.method:
                t = tm.get(m.name)
                if t is None:
                    problems.append("service %s method %s: not in upstream's %s"
                                    % (sv.name, m.name, tfile))
                    continue
                a = (_short(m.input_type, our_pkg_of), _short(m.output_type, our_pkg_of),
                     m.client_streaming, m.server_streaming)
                b = (_short(t.input_type, their_pkg_of), _short(t.output_type, their_pkg_of),
                     t.client_streaming, t.server_streaming)
                if a != b:
                    problems.append("service %s method %s: (input, output, client stream, "
                                    "server stream) %r here, %r in upstream's %s"
                                    % (sv.name, m.name, a, b, tfile))
            matched.append("service " + sv.name)
    return problems, matched
