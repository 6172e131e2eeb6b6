#!/bin/sh
# Development check of the session agent (src/providers/docker/session_agent.py)
# with the docker CLI, under runc and runsc: a container made like
# plimsolld's, the agent's modes run through `docker exec`, PASS/FAIL lines
# and the measured figures.  Usage: tests/agent/check_agent.sh [runc] [runsc]
# Needs docker, the plimsoll/project image and python3 on the host.  Only
# touches the containers it names (hagent-check-<runtime>-<pid>).
set -u
cd "$(dirname "$0")/../.." || exit 2
AGENT_FILE=src/providers/docker/session_agent.py
AGENT=$(cat "$AGENT_FILE")
SECCOMP=${SECCOMP:-/work/main/seccomp/plimsoll.json}
IMAGE=${IMAGE:-plimsoll/project:latest}
RUNTIMES=${*:-runc runsc}
FAILS=0
TMPD=$(mktemp -d)
C=""
trap 'rm -rf "$TMPD"; [ -n "$C" ] && docker rm -f "$C" >/dev/null 2>&1' EXIT

pass() { echo "PASS [$RT] $1"; }
fail() { echo "FAIL [$RT] $1"; FAILS=$((FAILS + 1)); }
check() { # check NAME 'CONDITION' (a shell expression, evaluated now)
    if eval "$2"; then pass "$1"; else fail "$1"; fi
}
now_ms() { date +%s%3N; }
ex() { docker exec -i "$C" python3 -c "$AGENT" "$@"; }

# cell LANG CODE [FILES_JSON]: runs a cell, leaves $TMPD/out, $TMPD/err, $RC, $MS
cell() {
    python3 - "$@" >"$TMPD/in" <<'EOF'
import json, sys
lang, code = sys.argv[1], sys.argv[2].encode()
files = [(p, d.encode()) for p, d in json.loads(sys.argv[3])] if len(sys.argv) > 3 else []
h = json.dumps({"language": lang, "code_len": len(code),
                "files": [{"path": p, "len": len(d)} for p, d in files]}).encode()
sys.stdout.buffer.write(b"%d\n" % len(h) + h + code + b"".join(d for _, d in files))
EOF
    t0=$(now_ms)
    docker exec -i "$C" python3 -c "$AGENT" cell <"$TMPD/in" >"$TMPD/out" 2>"$TMPD/err"
    RC=$?
    MS=$(($(now_ms) - t0))
}
out_is() { [ "$(cat "$TMPD/out")" = "$1" ]; }
err_has() { grep -q -- "$1" "$TMPD/err"; }
json_get() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); print(eval(sys.argv[2], {"v": v}))' "$1" "$2"; }

launch() { # launch LANG: sets $LJ (the JSON), $LRC, $LMS
    t0=$(now_ms)
    LJ=$(ex launch "$1")
    LRC=$?
    LMS=$(($(now_ms) - t0))
}

run_runtime() {
    RT=$1
    C=hagent-check-$RT-$$
    extra=""
    [ "$RT" = runsc ] && extra="--security-opt seccomp=$SECCOMP --ulimit nproc=128:128"
    pids=128
    [ "$RT" = runsc ] && pids=4096
    # shellcheck disable=SC2086
    if ! docker run -d --rm --name "$C" --runtime "$RT" --user 65534:65534 --read-only \
        --network none --cap-drop ALL --security-opt no-new-privileges $extra \
        --tmpfs /tmp:rw,noexec,nosuid,nodev,size=16m,mode=1777 \
        --tmpfs /work:rw,noexec,nosuid,nodev,size=64m,mode=1777 -w /work \
        --memory 512m --memory-swap 512m --pids-limit $pids --ulimit nofile=1024:1024 \
        -e HOME=/tmp -e PYTHONUNBUFFERED=1 -e PYTHONDONTWRITEBYTECODE=1 -e LANG=C.UTF-8 \
        "$IMAGE" python3 -c "$AGENT" main >/dev/null; then
        fail "container starts"
        return
    fi
    sleep 0.3

    t0=$(now_ms); docker exec "$C" true; BASE=$(($(now_ms) - t0))

    # No interpreter yet: exit 3 and nothing written.
    cell python 'print(1)'
    check "cell without interpreter: exit 3, no output" \
        '[ "$RC" = 3 ] && [ ! -s "$TMPD/out" ] && [ ! -s "$TMPD/err" ]'
    cell javascript 'console.log(1)'
    check "js cell without interpreter: exit 3, no output" \
        '[ "$RC" = 3 ] && [ ! -s "$TMPD/out" ] && [ ! -s "$TMPD/err" ]'

    launch python
    PY_LAUNCH=$LMS; PYJ=$LJ
    check "launch python: exit 0, one JSON line with pid/start ($LJ)" \
        '[ "$LRC" = 0 ] && [ "$(json_get "$LJ" "\"pid\" in v and \"start\" in v")" = True ]'
    check "launch python: non-dumpable" '[ "$(json_get "$LJ" "v[\"dumpable\"]")" = False ]'
    PY_PID=$(json_get "$PYJ" 'v["pid"]'); PY_START=$(json_get "$PYJ" 'v["start"]')
    PSL=$(ex ps | python3 -c "import json,sys; print([(p['ppid'], p['comm'], p['start']) for p in json.load(sys.stdin) if p['pid']==$PY_PID])")
    check "launch python: the pid is the interpreter, child of PID 1 ($PSL)" \
        '[ "$PSL" = "[(1, '"'python3'"', $PY_START)]" ]'

    cell python 'x = 21'
    check "python: assignment cell exit 0, no output" '[ "$RC" = 0 ] && [ ! -s "$TMPD/out" ]'
    cell python 'x * 2'
    PY_CELL=$MS
    check "python: x * 2 prints 42" '[ "$RC" = 0 ] && out_is 42'
    cell python 'import math'
    cell python 'math.pi'
    check "python: import persists" 'out_is 3.141592653589793'
    cell python 'import sys
print("a")
print("b", file=sys.stderr)'
    check "python: stdout and stderr on their fds" \
        '[ "$RC" = 0 ] && out_is a && [ "$(cat "$TMPD/err")" = b ]'
    cell python 'def f():
    raise ValueError("boom")
f()'
    check "python: raise gives exit 1 and a traceback without the agent's frames" \
        '[ "$RC" = 1 ] && err_has "ValueError: boom" && err_has "<cell" && ! err_has "<string>"'
    cell python 'import os, subprocess; os.write(1, b"w\n"); subprocess.run(["echo", "sub"]); None'
    check "python: os.write(1) and child output reach the cell" 'out_is "w
sub"'
    cell python 'import asyncio
await asyncio.sleep(0.05)
6 * 7'
    check "python: top-level await" 'out_is 42'
    cell python 'raise SystemExit(0)'
    check "python: SystemExit(0) is status 0" '[ "$RC" = 0 ]'
    cell python 'import sys; sys.exit(3)'
    check "python: SystemExit(3) is status 1" '[ "$RC" = 1 ] && err_has "SystemExit: 3"'
    cell python 'open("d/f.txt").read()' '[["d/f.txt", "file-data"]]'
    check "python: files written under /work first" "out_is \"'file-data'\""
    cell python '1' '[["../x", "no"]]'
    check "files: '..' refused, exit 2" '[ "$RC" = 2 ] && err_has "^plimsoll: "'
    cell python '1' '[["/tmp/x", "no"]]'
    check "files: absolute path refused, exit 2" '[ "$RC" = 2 ] && err_has "^plimsoll: "'
    cell python 'import os; os.symlink("/tmp", "lnk")'
    cell python '1' '[["lnk/x", "no"]]'
    check "files: path through a symlink refused, exit 2" '[ "$RC" = 2 ] && err_has "^plimsoll: "'

    launch javascript
    JS_LAUNCH=$LMS; JSJ=$LJ
    check "launch javascript: exit 0 ($LJ)" '[ "$LRC" = 0 ]'
    JS_PID=$(json_get "$JSJ" 'v["pid"]')
    PSL=$(ex ps | python3 -c "import json,sys; print([p['comm'] for p in json.load(sys.stdin) if p['pid']==$JS_PID])")
    check "launch javascript: the pid is node ($PSL)" '[ "$PSL" = "['"'node'"']" ]'
    cell javascript 'let y = 20'
    cell javascript 'y + 22'
    JS_CELL=$MS
    check "js: let survives between cells (y + 22 prints 42)" 'out_is 42'
    cell javascript 'const fs = require("fs")'
    cell javascript 'fs.existsSync("/work")'
    check "js: const and require persist" 'out_is true'
    cell javascript 'await new Promise(r => setTimeout(() => r(5), 100))'
    check "js: top-level await of one expression prints 5" '[ "$RC" = 0 ] && out_is 5'
    cell javascript 'Promise.resolve(7)'
    check "js: a Promise completion value is awaited" 'out_is 7'
    cell javascript 'console.log("a"); console.error("b"); void process.stdout.write("c\n")'
    check "js: console and process.stdout on their fds" \
        '[ "$RC" = 0 ] && out_is "a
c" && [ "$(cat "$TMPD/err")" = b ]'
    cell javascript 'throw new Error("boom")'
    check "js: throw gives exit 1 and a stack" '[ "$RC" = 1 ] && err_has "Error: boom"'
    cell javascript 'Promise.reject(new Error("rej")); 1'
    check "js: unhandled rejection gives exit 1" '[ "$RC" = 1 ] && err_has rej'

    # Idle interpreters' memory.
    PY_RSS=$(docker exec "$C" sh -c "grep VmRSS /proc/$PY_PID/status" | awk '{print $2}')
    JS_RSS=$(docker exec "$C" sh -c "grep VmRSS /proc/$JS_PID/status" | awk '{print $2}')

    # Non-dumpable: another uid-65534 process cannot open /proc/<pid>/fd/1
    # (runc).  gVisor does not enforce it: there the open succeeds (writes
    # go through, reads fail with EBADF): reported as INFO, not a failure.
    docker exec -d "$C" python3 -c 'import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); time.sleep(60)' nd
    docker exec -d "$C" python3 -c 'import time; time.sleep(60)' control
    sleep 0.5
    FD=$(docker exec "$C" python3 -c '
import os
for p in sorted(os.listdir("/proc")):
    if not p.isdigit() or p == str(os.getpid()):
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read().split(bytes(1))
    except OSError:
        continue
    if len(cmd) < 4 or b"time.sleep(60)" not in cmd[2]:
        continue
    try:
        os.open("/proc/%s/fd/1" % p, os.O_WRONLY)
        print(cmd[3].decode() + ":open", end=" ")
    except OSError as e:
        print(cmd[3].decode() + ":" + e.strerror.replace(" ", "_"), end=" ")')
    if [ "$RT" = runsc ]; then
        echo "INFO [$RT] /proc/<pid>/fd/1 of a non-dumpable process from another uid-65534 one: $FD"
        check "control: a dumpable process's fd opens ($FD)" 'echo "$FD" | grep -q "control:open"'
    else
        check "non-dumpable: /proc/pid/fd/1 refused, the dumpable control opens ($FD)" \
            'echo "$FD" | grep -q "nd:Permission_denied" && echo "$FD" | grep -q "control:open"'
    fi
    cell python 'import ctypes
ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)'
    check "python interpreter itself is dumpable again after exec (prctl get = 1)" 'out_is 1'

    # Background processes, a pid-hopping fork loop, then cleanup keeping python.
    docker exec "$C" sh -c 'sleep 1000 & sleep 1001 &'
    cell python 'import subprocess; subprocess.Popen(["sleep", "999"], start_new_session=True); None'
    cell python 'import os, time
if os.fork() == 0:
    os.setsid()
    while True:
        if os.fork():
            os._exit(0)
        time.sleep(0.002)
None'
    cell javascript 'require("child_process").spawn("sh", ["-c", "while true; do (sleep 0.3 &); sleep 0.02; done"], {detached: true, stdio: "ignore"}).unref()'
    sleep 0.5
    BEFORE=$(ex ps | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    t0=$(now_ms)
    CJ=$(ex cleanup "[[$PY_PID, $PY_START]]")
    CLEAN_MS=$(($(now_ms) - t0))
    OK=$(json_get "$CJ" "v['clean'] and v['alive'] == [[$PY_PID, $PY_START]] and v['left'] == []")
    check "cleanup: clean, python kept ($BEFORE processes before; $CJ)" '[ "$OK" = True ]'
    sleep 0.3
    LEFT=$(ex ps | python3 -c "import json,sys; print(sorted(p['pid'] for p in json.load(sys.stdin) if p['state'] != 'Z'))")
    OK=$(echo "$LEFT" | python3 -c "import sys; l=eval(sys.stdin.read()); print(len(l) == 3 and 1 in l and $PY_PID in l)")
    check "after cleanup only PID 1, python and ps itself ($LEFT)" '[ "$OK" = True ]'
    cell python 'x'
    check "python state survives the cleanup" 'out_is 21'
    cell javascript '1'
    check "js interpreter swept: cell exits 3" '[ "$RC" = 3 ] && [ ! -s "$TMPD/out" ]'
    CJ=$(ex cleanup "[[$PY_PID, 1]]")
    OK=$(json_get "$CJ" "v['clean'] and v['alive'] == []")
    check "cleanup: wrong starttime is not spared ($CJ)" '[ "$OK" = True ]'
    cell python 'x'
    check "python killed: cell exits 3" '[ "$RC" = 3 ]'

    launch python
    cell python 'y = 1'
    cell python 'import os; print("bye", flush=True); os._exit(3)'
    check "os._exit in a cell: exit 4, says so" \
        '[ "$RC" = 4 ] && err_has "^plimsoll: the interpreter ended" && out_is bye'
    launch javascript
    cell javascript 'process.exit(0)'
    check "process.exit in a js cell: exit 4" '[ "$RC" = 4 ] && err_has "the interpreter ended"'

    check "main still runs as PID 1" '[ "$(docker inspect -f "{{.State.Running}}" "$C")" = true ]'
    t0=$(now_ms); docker stop -t 5 "$C" >/dev/null; STOP=$(($(now_ms) - t0))
    check "main exits on SIGTERM (docker stop took ${STOP} ms)" '[ "$STOP" -lt 4000 ]'
    C=""

    echo "FIGURES [$RT] docker exec true ${BASE} ms; launch python ${PY_LAUNCH} ms; launch javascript ${JS_LAUNCH} ms;" \
        "python cell ${PY_CELL} ms; js cell ${JS_CELL} ms; cleanup ${CLEAN_MS} ms;" \
        "idle RSS python ${PY_RSS} kB, node ${JS_RSS} kB"
}

for rt in $RUNTIMES; do
    run_runtime "$rt"
done
[ "$FAILS" = 0 ] && echo "ALL PASS" || echo "$FAILS FAILED"
[ "$FAILS" = 0 ]
