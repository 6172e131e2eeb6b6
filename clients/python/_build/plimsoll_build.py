# SPDX-License-Identifier: Apache-2.0
"""The Python client's build backend (PEP 517, with PEP 660's editable
install): standard library only, so `pip install ./clients/python` and
`pip wheel` work where no package index can be reached.  pyproject.toml
names it with `backend-path`, and its `requires` is empty, so pip's build
isolation has nothing to fetch.

It builds one pure-Python wheel (py3-none-any) from src/plimsoll, and an
sdist of the folder's files.  The metadata is pyproject.toml's [project]
table, read with tomllib where Python has it (3.11+) and, before that, by
the small reader below, which takes exactly the forms that file uses.
Archives are reproducible: every entry has the same time (SOURCE_DATE_EPOCH
when set) and a fixed mode."""
import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "plimsoll"
TAG = "py3-none-any"
# Only these of the folder's files go into an sdist (never a build's leftovers).
SDIST_FILES = ("pyproject.toml", "README.md", "run-tests")
SDIST_TREES = ("_build", "src", "tests")


def _read_project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib
    except ImportError:
        return _small_toml(data.decode("utf-8"))["project"]
    return tomllib.loads(data.decode("utf-8"))["project"]


def _small_toml(text):
    """Tables of `key = "string"` and `key = ["string", ...]` (a list may
    span lines): what pyproject.toml holds, for Pythons without tomllib."""
    out, table, pending = {}, None, None
    for line in text.splitlines():
        line = line.strip()
        if pending is not None:
            key, acc = pending
            acc += " " + line
            if acc.rstrip().endswith("]"):
                out[table][key] = re.findall(r'"((?:[^"\\]|\\.)*)"', acc)
                pending = None
            else:
                pending = (key, acc)
            continue
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([\w.-]+)\]", line)
        if m:
            table = m.group(1)
            out.setdefault(table, {})
            continue
        m = re.fullmatch(r'([\w-]+)\s*=\s*(.*)', line)
        if not m or table is None:
            raise ValueError("pyproject.toml: cannot read %r" % line)
        key, value = m.groups()
        if value.startswith('"'):
            out[table][key] = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', value).group(1)
        elif value.startswith("["):
            if value.rstrip().endswith("]"):
                out[table][key] = re.findall(r'"((?:[^"\\]|\\.)*)"', value)
            else:
                pending = (key, value)
        else:
            raise ValueError("pyproject.toml: cannot read %r" % line)
    return out


def _metadata():
    p = _read_project()
    lines = ["Metadata-Version: 2.1",
             "Name: %s" % p["name"],
             "Version: %s" % p["version"],
             "Summary: %s" % p["description"],
             "License: Apache-2.0",
             "Requires-Python: %s" % p["requires-python"]]
    lines += ["Classifier: %s" % c for c in p.get("classifiers", [])]
    lines += ["Requires-Dist: %s" % d for d in p.get("dependencies", [])]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, p["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return p["name"], p["version"], "\n".join(lines) + "\n\n" + readme


def _stamp():
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01
    return max(epoch, 315532800)


def _dist_info(name, version):
    return "%s-%s.dist-info" % (name, version)


def _wheel_text():
    return ("Wheel-Version: 1.0\nGenerator: plimsoll _build/plimsoll_build.py\n"
            "Root-Is-Purelib: true\nTag: %s\n" % TAG)


def _package_files():
    """(path in the wheel, path on disk) for the package, sorted."""
    src = os.path.join(HERE, "src")
    out = []
    for d, dirs, names in os.walk(os.path.join(src, PACKAGE)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") or n == "py.typed":
                full = os.path.join(d, n)
                out.append((os.path.relpath(full, src).replace(os.sep, "/"), full))
    return out


def _write_wheel(directory, members):
    """A wheel of `members` ((name, bytes) in order), with its RECORD."""
    name, version, _ = _metadata()
    info = _dist_info(name, version)
    record = io.StringIO()
    path = os.path.join(directory, "%s-%s-%s.whl" % (name, version, TAG))
    when = time.gmtime(_stamp())[:6]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in members:
            zi = zipfile.ZipInfo(arc, when)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.write("%s,sha256=%s,%d\n" % (arc, digest.decode("ascii"), len(data)))
        record.write("%s/RECORD,,\n" % info)
        zi = zipfile.ZipInfo("%s/RECORD" % info, when)
        zi.external_attr = 0o644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(zi, record.getvalue())
    return os.path.basename(path)


def _info_members():
    name, version, metadata = _metadata()
    info = _dist_info(name, version)
    return [("%s/METADATA" % info, metadata.encode("utf-8")),
            ("%s/WHEEL" % info, _wheel_text().encode("utf-8"))]


# ---- PEP 517 -------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, _ = _metadata()
    info = _dist_info(name, version)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for arc, data in _info_members():
        with open(os.path.join(metadata_directory, arc), "wb") as f:
            f.write(data)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    members = []
    for arc, full in _package_files():
        with open(full, "rb") as f:
            members.append((arc, f.read()))
    return _write_wheel(wheel_directory, members + _info_members())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose one module file is a .pth naming src/: the package is
    imported from the checkout."""
    pth = (os.path.join(HERE, "src") + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [("__editable__.%s.pth" % PACKAGE, pth)] + _info_members())


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = "%s-%s" % (name, version)
    paths = [p for p in SDIST_FILES if os.path.isfile(os.path.join(HERE, p))]
    for tree in SDIST_TREES:
        for d, dirs, names in os.walk(os.path.join(HERE, tree)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            paths += [os.path.relpath(os.path.join(d, n), HERE) for n in sorted(names)
                      if not n.endswith(".pyc")]
    path = os.path.join(sdist_directory, base + ".tar.gz")
    stamp = _stamp()

    def add(tar, arc, data, mode):
        ti = tarfile.TarInfo("%s/%s" % (base, arc.replace(os.sep, "/")))
        ti.size, ti.mtime, ti.mode = len(data), stamp, mode
        ti.uname = ti.gname = ""
        tar.addfile(ti, io.BytesIO(data))

    # The gzip header has a time of its own: the same stamp, not the clock
    # (two builds a second apart differed there alone).
    with open(path, "wb") as raw, \
            gzip.GzipFile(base + ".tar", "wb", fileobj=raw, mtime=stamp) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", metadata.encode("utf-8"), 0o644)
        for p in paths:
            full = os.path.join(HERE, p)
            with open(full, "rb") as f:
                add(tar, p, f.read(), 0o755 if os.access(full, os.X_OK) else 0o644)
    return os.path.basename(path)
