/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cleanup.c: the cleanup a hosted sandbox runs as root between a project's
 * steps and after a session's call (docs/internals/hosted.md, "Cleanup").
 */
#include <stdio.h>
#include <string.h>

#include "../../core/clock.h"
#include "hosted.h"

/*
 * Between two steps and after a session's call, as root: end every process
 * of the guest's user (by the real uid in /proc/PID/status, which a process
 * cannot hide by making itself non-dumpable) but the kept ones, and prove
 * none is left; as on docker, a step never finds what an earlier one left
 * running.  argv: UID [PID:START...], the kept processes (a session's
 * interpreters and their relays), each spared only while its start time
 * matches and it is alive.  A process is alive while any of its threads
 * is (a leader that exited alone reads as a zombie while its other threads
 * run on); a true zombie counts as ended: a kept interpreter may not have
 * reaped a child the cleanup killed.  Prints "clean" and, on a second line,
 * "alive" and the kept ones still alive.
 *
 * Whatever the uid, the cleanup spares itself, its ancestors (the exec's
 * own chain) and PID 1 (the sandbox's main process, which must live): no
 * service documents which user its main process runs as, and on one whose
 * main process is the guest's user it cannot be ended from inside anyway.
 * UID "self" is for a service whose commands all run as the guest's user
 * (openshell: ExecSandbox has no user): the cleanup ends every other
 * process of its own uid.
 */
/* Python: this process and its ancestors into the set `mine`, at the
 * given indentation. */
#define ANCESTORS(in)                                                                              \
    in "p = os.getpid()\n" in "while p > 0 and p not in mine:\n" in "    mine.add(p)\n" in         \
       "    try:\n" in "        with open('/proc/%d/stat' % p) as f:\n" in                         \
       "            p = int(f.read().rsplit(')', 1)[1].split()[1])\n" in                           \
       "    except (OSError, ValueError, IndexError):\n" in "        break\n"

const char ph_end_user_processes[] =
    "import os, signal, sys, time\n"
    "uid = sys.argv[1]\n"
    "keep = dict(tuple(int(x) for x in k.split(':')) for k in sys.argv[2:])\n"
    "mine = set()\n"
    "if uid == 'self':\n"
    "    uid = str(os.getuid())\n" ANCESTORS(
        "") "mine.add(1)\n"
            "def stat(p):\n"
            "    try:\n"
            "        with open('/proc/%d/stat' % p) as f:\n"
            "            rest = f.read()\n"
            "        return int(rest[rest.rfind(')') + 2:].split()[19])\n"
            "    except (OSError, ValueError, IndexError):\n"
            "        return None\n"
            "def alive(p):\n"
            "    try:\n"
            "        tids = os.listdir('/proc/%d/task' % p)\n"
            "    except OSError:\n"
            "        return False\n"
            "    for t in tids:\n"
            "        try:\n"
            "            with open('/proc/%d/task/%s/stat' % (p, t)) as f:\n"
            "                raw = f.read()\n"
            "        except OSError:\n"
            "            continue\n"
            "        if raw[raw.rfind(')') + 2:][:1] not in ('Z', 'X', 'x', ''):\n"
            "            return True\n"
            "    return False\n"
            "def spared(p):\n"
            "    return p in keep and stat(p) == keep[p] and alive(p)\n"
            "def theirs():\n"
            "    out = []\n"
            "    for p in os.listdir('/proc'):\n"
            "        if not p.isdigit() or int(p) in mine:\n"
            "            continue\n"
            "        try:\n"
            "            with open('/proc/%s/status' % p) as f:\n"
            "                if any(l.split()[1:2] == [uid] for l in f if "
            "l.startswith('Uid:')):\n"
            "                    if not spared(int(p)) and alive(int(p)):\n"
            "                        out.append(int(p))\n"
            "        except (OSError, ValueError):\n"
            "            pass\n"
            "    return out\n"
            "for _ in range(100):\n"
            "    left = theirs()\n"
            "    if not left:\n"
            "        print('clean')\n"
            "        break\n"
            "    for p in left:\n"
            "        try:\n"
            "            os.kill(p, signal.SIGKILL)\n"
            "        except OSError:\n"
            "            pass\n"
            "    time.sleep(0.01)\n"
            "else:\n"
            "    print('left', theirs())\n"
            "print(' '.join(['alive'] + ['%d:%d' % (p, s) for p, s in sorted(keep.items()) if "
            "spared(p)]))\n";

/* The guest user's processes other than this one and its ancestors,
 * "PID:START" each on one line: a fresh sandbox's own processes, read
 * before any code runs, which a "self" cleanup then spares. */
const char ph_own_processes[] =
    "import os\n"
    "mine = set()\n" ANCESTORS(
        "") "uid, out = str(os.getuid()), []\n"
            "for p in os.listdir('/proc'):\n"
            "    if not p.isdigit() or int(p) in mine:\n"
            "        continue\n"
            "    try:\n"
            "        with open('/proc/%s/status' % p) as f:\n"
            "            if not any(l.split()[1:2] == [uid] for l in f if l.startswith('Uid:')):\n"
            "                continue\n"
            "        with open('/proc/%s/stat' % p) as f:\n"
            "            raw = f.read()\n"
            "        out.append('%s:%s' % (p, raw[raw.rfind(')') + 2:].split()[19]))\n"
            "    except (OSError, ValueError, IndexError):\n"
            "        pass\n"
            "print(' '.join(out))\n";

bool ph_cleanup_clean(const char *out, size_t len, char *ret_alive, size_t alive_size) {
    /* "clean\nalive[ P:S...]\n" and nothing else */
    if (len < 12 || memcmp(out, "clean\nalive", 11) != 0 || out[len - 1] != '\n' ||
        memchr(out + 11, '\n', len - 12))
        return false;
    if (ret_alive)
        snprintf(ret_alive, alive_size, "%.*s", (int)(len - 12), out + 11);
    return true;
}

uint64_t ph_cleanup_deadline(uint64_t deadline) {
    uint64_t floor = pl_now_ns() + (uint64_t)PH_CLEANUP_MIN_MS * 1000000ull;
    return deadline > floor ? deadline : floor;
}

int ph_cleanup_verdict(bool timed_out, int exit_code, const char *out, size_t len,
                       const char *after, char *ret_alive, size_t alive_size,
                       struct pl_error *err) {
    if (!timed_out && exit_code == 0 && ph_cleanup_clean(out, len, ret_alive, alive_size))
        return 0;
    char why[48];
    if (timed_out)
        snprintf(why, sizeof(why), "the cleanup timed out");
    else if (exit_code != 0)
        snprintf(why, sizeof(why), "the cleanup exited %d", exit_code);
    else
        snprintf(why, sizeof(why), "the cleanup did not say clean");
    return pl_error_set(err, PL_REASON_INTERNAL,
                        "what %s left running could not be ended (%s): %.*s", after, why,
                        (int)(len < 100 ? len : 100), out);
}
