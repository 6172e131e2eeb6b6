# SPDX-License-Identifier: Apache-2.0
# A hosted session's file calls inside its sandbox (docs/internals/hosted.md,
# "Session files"), run as the guest's user by `python3 -I -c THIS MODE CTL
# [PIECE...]`, CTL one JSON object:
#
#   read   {"workdir", "path", "offset", "limit"}: one regular file of the
#          work directory; "PLIMSOLL {"size": N}" and the bytes asked for
#          on stdout (docker's reader's shape, read by the same parser).
#   list   {"workdir", "path", "depth", "entries"}: one JSON line an entry,
#          then "PLIMSOLL {"truncated": B}" (docker's lister's shape).
#   collect  {"workdir", "globs", "files", "bytes", "visits"}: a project's
#          collect globs (workfiles.py, docker's bootstrap's shape).
#   write  {"workdir", "stage", "first", "last", "len", "sha256"}: the
#          PIECEs (base64) are the next bytes of the call's stream, its
#          header's length on a line, the header ({"files": [{"path",
#          "len"}]}), then every file's bytes.  A stream too long for one
#          command's arguments is appended to a staging file of a random
#          name in /tmp over several; the last command checks the whole
#          stream's length and SHA-256 (a guest of the same user may have
#          changed a staged byte: nothing is written then) and writes the
#          files in order.  On a refusal, the index of the file on stdout.
#
# Every path is walked one component at a time from "/" (the work directory
# too: its parents may be the guest's own, as /tmp is everyone's), never
# following a symlink, and checked after each open against what lstat saw;
# the reader, the lister and the collect walk are docker's bootstrap's
# (src/providers/guest/workfiles.py, before this file).  A broken rule is
# said only as an exit code (FILE_RULES), which the daemon turns into its
# own sentence: nothing this program found travels but that code.
import base64
import errno
import hashlib
import json
import os
import sys

def work_dir(workdir, parts, make=False):
    """An fd of workdir/parts... and the work directory's device."""
    top = parts_of(workdir.lstrip("/")) if workdir.startswith("/") else None
    if top is None:
        raise FileRule("other")
    dfd = os.open("/", DIR_FLAGS)
    try:
        for p in top:
            nfd = open_dir_at(dfd, p, None, make)
            os.close(dfd)
            dfd = nfd
        dev = os.fstat(dfd).st_dev
        for p in parts:
            nfd = open_dir_at(dfd, p, dev, make)
            os.close(dfd)
            dfd = nfd
    except BaseException:
        os.close(dfd)
        raise
    return dfd, dev


def emit(obj):
    os.write(1, b"PLIMSOLL " + json.dumps(obj, separators=(",", ":")).encode() + b"\n")


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_file(h):
    parts = parts_of(h.get("path"))
    if parts is None:
        raise FileRule("other")
    dfd, dev = work_dir(h["workdir"], parts[:-1])
    read_at(dfd, dev, parts[-1], h["offset"], h["limit"])


def list_files(h):
    path = h.get("path") or ""
    parts = parts_of(path) if path else []
    if parts is None:
        raise FileRule("other")
    try:
        top, dev = work_dir(h["workdir"], parts)
    except FileRule as e:
        if path or e.code != FILE_RULES["missing"]:
            raise
        emit({"truncated": False})  # nothing has made the work directory yet
        return
    list_at(top, dev, os.fsencode(path + "/") if path else b"", h["depth"], h["entries"])


def unlink_quietly(name):
    try:
        os.unlink(name)
    except OSError:
        pass


def stream_of(h, pieces):
    """This command's bytes of the stream, and the whole stream when it is
    the last: the staged bytes first, checked against the daemon's length
    and SHA-256 before anything is written."""
    data = b"".join(base64.b64decode(p, validate=True) for p in pieces)
    if h["first"] and h["last"]:
        whole = data
    else:
        stage = h["stage"]
        if not (isinstance(stage, str) and len(stage) == 24 and
                all(c in "0123456789abcdef" for c in stage)):
            raise FileRule("other")
        name = "/tmp/.plimsoll-stage-" + stage
        try:
            # A fresh file of a name nobody could know (O_EXCL), appended
            # to without following a symlink; a FIFO cannot hold the open.
            flags = (os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC |
                     (os.O_CREAT | os.O_EXCL if h["first"] else 0))
            fd = os.open(name, flags, 0o600)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise FileRule("staged")
                write_all(fd, data)
            finally:
                os.close(fd)
            if not h["last"]:
                return None
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise FileRule("staged")
                chunks, got = [], 0
                while got <= h["len"]:
                    b = os.read(fd, h["len"] + 1 - got)
                    if not b:
                        break
                    chunks.append(b)
                    got += len(b)
                whole = b"".join(chunks)
            finally:
                os.close(fd)
        except OSError as e:
            unlink_quietly(name)
            raise FileRule("no_space" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "staged")
        except BaseException:
            unlink_quietly(name)
            raise
        if h["last"]:
            unlink_quietly(name)
    if len(whole) != h["len"] or hashlib.sha256(whole).hexdigest() != h["sha256"]:
        raise FileRule("staged")
    return whole


def write_one(workdir, rel, data):
    parts = parts_of(rel)
    if parts is None:
        raise FileRule("other")
    dfd, dev = work_dir(workdir, parts[:-1], make=True)
    try:
        try:
            before = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            before = None
        if before is not None and stat.S_ISLNK(before.st_mode):
            raise FileRule("symlink")
        if before is not None and not stat.S_ISREG(before.st_mode):
            raise FileRule("not_regular")
        fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW |
                     os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o644, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRule("not_regular")
        if st.st_dev != dev:
            raise FileRule("elsewhere")
        write_all(fd, data)
    finally:
        os.close(fd)


def write_files(h, pieces):
    whole = stream_of(h, pieces)
    if whole is None:
        return
    nl = whole.index(b"\n", 0, 16)
    n = int(whole[:nl])
    head = json.loads(whole[nl + 1:nl + 1 + n])
    at = nl + 1 + n
    for i, f in enumerate(head["files"]):
        data = whole[at:at + f["len"]]
        at += f["len"]
        try:
            write_one(h["workdir"], f["path"], data)
        except BaseException:
            os.write(1, b"%d\n" % i)  # which file; the exit code says why
            raise


def collect(h):
    """A project's collect globs (workfiles.py), from the work directory; none
    when nothing has made it."""
    try:
        top, dev = work_dir(h["workdir"], [])
    except FileRule as e:
        if e.code != FILE_RULES["missing"]:
            raise
        emit({"truncated": False})
        return
    collect_from(top, dev, h)


def main():
    mode, h, pieces = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    fn = {"read": lambda: read_file(h), "list": lambda: list_files(h),
          "write": lambda: write_files(h, pieces), "collect": lambda: collect(h)}[mode]
    try:
        fn()
    except FileRule as e:
        os._exit(e.code)
    except OSError as e:
        os._exit(rule_code(e))
    os._exit(0)


main()
