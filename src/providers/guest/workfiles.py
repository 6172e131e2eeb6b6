# SPDX-License-Identifier: Apache-2.0
# A sandbox's work directory as plimsoll's own programs read it: the file
# calls' reader and lister (ReadFile, ListFiles) and a run's collect globs
# (docs/api.md, "Artifacts"), in docker's bootstrap (its read, list and
# collect modes, from /work) and the hosted providers' files.py (from the
# work directory's own walk from "/").  Each program opens the directory
# and hands its fd and device here; it defines emit(obj), its
# "PLIMSOLL <json>" line.  Nothing here follows a symlink: every name is
# lstat'ed, opened O_NOFOLLOW, and compared (device, inode) after the open;
# a broken rule is said only as an exit code (FILE_RULES), which the
# daemon turns into its own sentence.
import os
import stat

FILE_RULES = {"missing": 64, "symlink": 65, "not_regular": 66, "not_directory": 67,
              "denied": 68, "too_large": 69, "elsewhere": 71, "changed": 72, "other": 73,
              "no_space": 74, "staged": 75}
FILE_MAX_SIZE = 0xffffffff
LIST_MAX_PATH = 4096
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
COLLECT_MAX_DEPTH = 16  # PL_FILES_MAX_DEPTH


class FileRule(Exception):
    """A file call's path broke a rule; code is its exit code."""

    def __init__(self, rule):
        super().__init__(rule)
        self.code = FILE_RULES[rule]


def rule_code(e):
    """An OSError's exit code among FILE_RULES."""
    import errno
    return FILE_RULES[{errno.ENOENT: "missing", errno.ELOOP: "symlink",
                       errno.ENOTDIR: "not_directory", errno.EACCES: "denied",
                       errno.EPERM: "denied", errno.EISDIR: "not_regular",
                       errno.ENXIO: "not_regular", errno.ENOSPC: "no_space",
                       errno.EDQUOT: "no_space"}.get(e.errno, "other")]


def parts_of(rel):
    """rel's components, or None when it is not a plain relative path (the
    daemon refused those before; these programs trust no argument)."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\0" in rel:
        return None
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return parts


def open_dir_at(dfd, name, dev, make=False):
    """name in the directory dfd, opened as a directory without following a
    symlink, on the filesystem dev (None: any), made first when make."""
    try:
        before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        if not make:
            raise FileRule("missing")
        try:
            os.mkdir(name, 0o755, dir_fd=dfd)
        except FileExistsError:
            pass
        before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if stat.S_ISLNK(before.st_mode):
        raise FileRule("symlink")
    if not stat.S_ISDIR(before.st_mode):
        raise FileRule("not_directory")
    # O_NOFOLLOW with O_DIRECTORY is not enough under gVisor (2022-12-19: it
    # follows the link): what was opened must be what lstat saw.
    nfd = os.open(name, DIR_FLAGS, dir_fd=dfd)
    after = os.fstat(nfd)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        os.close(nfd)
        raise FileRule("changed")
    if dev is not None and after.st_dev != dev:
        os.close(nfd)
        raise FileRule("elsewhere")
    return nfd


def put(data):
    """All of data on stdout."""
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def read_at(dfd, dev, name, offset, limit):
    """ReadFile: name, a regular file in the directory dfd (closed here) on
    the device dev; "PLIMSOLL {"size": N}" and up to limit bytes from
    offset on stdout."""
    try:
        try:
            before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise FileRule("missing")
        if stat.S_ISLNK(before.st_mode):
            raise FileRule("symlink")
        if not stat.S_ISREG(before.st_mode):
            raise FileRule("not_regular")
        # O_NONBLOCK: what is swapped in after the lstat (a FIFO) cannot
        # hold the open; the fstat below finds it out.
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY |
                     os.O_CLOEXEC, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise FileRule("changed")
        if not stat.S_ISREG(st.st_mode):
            raise FileRule("not_regular")
        if st.st_dev != dev:
            raise FileRule("elsewhere")
        if st.st_size > FILE_MAX_SIZE:
            raise FileRule("too_large")
        want = max(0, min(limit, st.st_size - offset))
        chunks, got = [], 0
        while got < want:
            b = os.pread(fd, want - got, offset + got)
            if not b:
                break
            chunks.append(b)
            got += len(b)
    finally:
        os.close(fd)
    emit({"size": st.st_size})
    for b in chunks:
        put(b)


def list_at(top, dev, prefix, depth, most):
    """ListFiles: the entries under the directory top (an fd, closed here,
    on the device dev), depth levels, at most most of them, depth first and
    each directory's names sorted; one JSON line an entry ({"p": base64 of
    prefix and the path, "t", "s", "m", "mt"}), then "PLIMSOLL
    {"truncated": B}"."""
    import base64
    import json
    count, truncated = 0, False
    out = []

    def walk(dfd, rel, level):
        nonlocal count, truncated
        for name in sorted(os.listdir(dfd), key=os.fsencode):
            if count >= most:
                truncated = True
                return
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            p = rel + os.fsencode(name)
            if len(p) > LIST_MAX_PATH:
                truncated = True
                continue
            m = st.st_mode
            t = ("directory" if stat.S_ISDIR(m) else "file" if stat.S_ISREG(m)
                 else "symlink" if stat.S_ISLNK(m) else "fifo" if stat.S_ISFIFO(m)
                 else "socket" if stat.S_ISSOCK(m)
                 else "device" if stat.S_ISCHR(m) or stat.S_ISBLK(m) else "other")
            out.append(json.dumps({"p": base64.b64encode(p).decode(), "t": t, "s": st.st_size,
                                   "m": m & 0o7777, "mt": st.st_mtime_ns},
                                  separators=(",", ":")).encode() + b"\n")
            count += 1
            if t == "directory" and level < depth:
                try:
                    sub = open_dir_at(dfd, name, dev)
                except (OSError, FileRule):
                    continue  # not ours to enter, or swapped: listed, not entered
                try:
                    walk(sub, p + b"/", level + 1)
                finally:
                    os.close(sub)
                if count >= most and truncated:
                    return

    try:
        walk(top, prefix, 1)
    finally:
        os.close(top)
    put(b"".join(out))
    emit({"truncated": truncated})


def glob_match(pat, parts, prefix):
    """Whether the path parts (str) match the glob pat (its components):
    '*', '?' and '[...]' within a name, a "**" component any number of
    directories.  prefix: whether something below the directory parts
    could still match."""
    import fnmatch
    memo = {}

    def m(i, j):
        key = (i, j)
        if key not in memo:
            if j == len(parts):
                r = i < len(pat) if prefix else all(p == "**" for p in pat[i:])
            elif i == len(pat):
                r = False
            elif pat[i] == "**":
                r = m(i + 1, j) or m(i, j + 1)
            else:
                r = fnmatch.fnmatchcase(parts[j], pat[i]) and m(i + 1, j + 1)
            memo[key] = r
        return memo[key]
    return m(0, 0)


def collect_from(top, dev, h):
    """The regular files under the directory top (an fd, closed here, on
    the device dev) that h["globs"] match, depth first and each
    directory's names sorted, reached without following a symlink, on
    top's filesystem only: per file one line {"p": path, "s": size, "n":
    count} and its first count bytes (h["bytes"] in all, h["files"] files
    at most, h["visits"] entries looked at), then "PLIMSOLL {"truncated":
    B}".  What is swapped, gone or not a regular file when it is opened is
    left out, saying nothing of it."""
    import base64
    import json
    pats = [g.split("/") for g in h["globs"]]
    most, visits = h["files"], h["visits"]
    state = {"count": 0, "visits": 0, "truncated": False, "budget": h["bytes"]}

    def take(dfd, name, before, rel):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                         dir_fd=dfd)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if ((st.st_dev, st.st_ino) != (before.st_dev, before.st_ino)
                    or not stat.S_ISREG(st.st_mode) or st.st_dev != dev):
                return
            want = max(0, min(state["budget"], st.st_size))
            chunks, got = [], 0
            while got < want:
                b = os.pread(fd, want - got, got)
                if not b:
                    break
                chunks.append(b)
                got += len(b)
        finally:
            os.close(fd)
        put(json.dumps({"p": base64.b64encode(rel).decode(), "s": st.st_size, "n": got},
                       separators=(",", ":")).encode() + b"\n")
        for b in chunks:
            put(b)
        state["budget"] -= got
        state["count"] += 1

    def walk(dfd, rel, names, level):
        for name in sorted(os.listdir(dfd), key=os.fsencode):
            if state["truncated"]:
                return
            if state["visits"] >= visits:
                state["truncated"] = True
                return
            state["visits"] += 1
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            p = rel + os.fsencode(name)
            parts = names + [name]
            if len(p) > LIST_MAX_PATH:
                continue
            if stat.S_ISREG(st.st_mode) and any(glob_match(g, parts, False) for g in pats):
                if state["count"] >= most:
                    state["truncated"] = True
                    return
                take(dfd, name, st, p)
            elif (stat.S_ISDIR(st.st_mode) and level < COLLECT_MAX_DEPTH
                  and any(glob_match(g, parts, True) for g in pats)):
                try:
                    sub = open_dir_at(dfd, name, dev)
                except (OSError, FileRule):
                    continue
                try:
                    walk(sub, p + b"/", parts, level + 1)
                finally:
                    os.close(sub)

    try:
        walk(top, b"", [], 1)
    finally:
        os.close(top)
    emit({"truncated": state["truncated"]})
