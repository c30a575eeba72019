"""The sandbox uids of a root grader: claimed from other graders, one fresh uid per submission,
and emptied (processes, files, IPC objects) before a uid counts as free again.

Under POSIX separation the uid is the seal: whatever a submission leaves under its uid (a process
that forked past the kill, a file in ``/run/lock``, a SysV segment) waits for the next submission
graded under it. So a uid is leased to one submission at a time (:class:`UidPool`), and given back
only when :func:`empty_uid` has killed every process of it (as that uid, ``kill(-1, SIGKILL)``,
which takes every process of the uid at once: fork fails once a fatal signal is pending, so a chain
that forks and exits cannot outrun it), removed what it owns in every place it could write and its
IPC objects, and then found nothing left. A uid that cannot be emptied is never leased again.

While a pool is open the grader is its process's child subreaper (:class:`Adoption`): a sandbox's
process whose parent dies before it (bubblewrap's PID-namespace init, which its launcher leaves
behind when it exits; the lifeline's shell under POSIX separation) becomes the grader's child
instead of init's, and the emptying reaps its zombie at once. init may reap late (1.3 to 1.8 s on
the test machine, never where a container's PID 1 is a plain shell), and until then the zombie
counts against the uid's process limit, so the uid could not be given back.

Claims use lock files in a folder only root can write (opened without following links), so no
submission can plant a link or a FIFO where a grader will open one.
"""

from __future__ import annotations

import ctypes
import fcntl
import grp
import os
import pwd
import queue
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

from autograder.sandbox.holdings import owned_entries, processes_of, sysv_objects

#: First uid handed to sandboxes when the grader runs as root; ``$COURSE_SANDBOX_UID_BASE`` moves it.
SANDBOX_UID_BASE = 64000
UID_BASE_ENV = "COURSE_SANDBOX_UID_BASE"
#: How many uids a run may claim from its base on (other graders hold some).
UID_RANGE = 1000
#: Where root graders mark the uids they use (the first whose parent exists): made 0700 by the first
#: grader, checked by every one.
LOCK_FOLDERS = (Path("/run/course-grade"), Path("/var/lib/course-grade"))
#: Folders never searched for world-writable places (kernel views, not storage).
NOT_PLACES = ("/proc", "/sys")


class UidError(RuntimeError):
    """No uid can be claimed or emptied (the message says what to do)."""


def uid_base() -> int:
    return int(os.environ.get(UID_BASE_ENV) or SANDBOX_UID_BASE)


def lock_folder() -> Path:
    """The root-only folder of uid claims, made if missing; refused if anyone else could write it."""
    folder = next((f for f in LOCK_FOLDERS if f.parent.is_dir()), LOCK_FOLDERS[-1])
    try:
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o700)  # whatever the umask
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise UidError(f"{folder} must be a folder owned by root that nobody else can write "
                       f"(found mode {stat.filemode(st.st_mode)}, owner {st.st_uid}); remove it and grade again")
    return folder


def _lock(folder: Path, uid: int):
    """The open, locked claim file of ``uid``, or None when another grader holds it."""
    fd = os.open(folder / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _taken_by_the_system(uid: int) -> bool:
    """An account or a group has this id (the sandbox runs with gid = uid)."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def claim_uids(count: int, *, avoid: set[int] = frozenset()) -> list[tuple[int, int]]:
    """``count`` uids that no account or group has and no other grader on this machine holds:
    [(uid, lock fd)] (closing the fd frees the uid for other graders)."""
    folder, base = lock_folder(), uid_base()
    held = []
    for uid in range(base, base + UID_RANGE):
        if len(held) == count:
            break
        if uid in avoid or _taken_by_the_system(uid):
            continue
        fd = _lock(folder, uid)
        if fd is not None:
            held.append((uid, fd))
    if len(held) < count:
        for _, fd in held:
            os.close(fd)
        raise UidError(f"no {count} free sandbox uids from {base} to {base + UID_RANGE - 1} (accounts, groups or "
                       f"other graders hold them); set {UID_BASE_ENV} to another range")
    return held


# ----------------------------------------------------------------------------- where a uid can write
#: How long one search for writable places serves the graders of one process (a test suite starts many).
PLACES_SECONDS = 600
_places: tuple[float, list[Path]] | None = None


def writable_places() -> list[Path]:
    """Every folder a uid owning nothing could write: world-writable folders reachable by others
    (all file systems but /proc and /sys; folders it cannot enter are not searched, since nothing
    inside them is within its reach). Searched when a run under POSIX separation starts (about 1 s
    on the test machine with the file system cached, a few seconds cold; bubblewrap's submissions write no host folder and need none), and again by
    a later run of the same process once PLACES_SECONDS have passed."""
    global _places
    if _places is None or time.monotonic() - _places[0] > PLACES_SECONDS:
        _places = (time.monotonic(), _search_places())
    return list(_places[1])


def _search_places() -> list[Path]:
    # "-type d" before "-perm": find reads a file's type from its folder's listing, so only folders
    # are stat'ed, not every file of the machine (the same folders found in 1.0 s instead of 1.6 s)
    command = ["find", "/", "(", *_prune_args(), "-type", "d", "!", "-perm", "-0001", ")", "-prune", "-o",
               "-type", "d", "-perm", "-0002", "-print0"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=120)
        found = [Path(p.decode("utf-8", "surrogateescape")) for p in done.stdout.split(b"\0") if p]
    except (OSError, subprocess.TimeoutExpired):
        found = []
    # the usual ones even if the search failed
    found += [Path(p) for p in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue") if Path(p).is_dir()]
    return sorted(set(found))


def _prune_args() -> list[str]:
    args = []
    for path in NOT_PLACES:
        args += ["-path", path, "-o"]
    return args


# ----------------------------------------------------------------------------- adopting orphans
#: prctl(2)'s option that makes a process the reaper of its descendants' orphans.
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37


class Adoption:
    """The process is a child subreaper while at least one pool is open (counted: the suite runs
    two graders in one process), and no longer once the last closes, so orphans of whatever else
    the process starts later go to init as before."""

    _count = 0
    _lock = threading.Lock()

    @classmethod
    def _set(cls, on: bool) -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
        except (OSError, AttributeError):  # not Linux's libc: init reaps, the emptying waits for it
            pass

    @staticmethod
    def active() -> bool:
        """Is this process a child subreaper now (whoever made it one)?"""
        value = ctypes.c_int(0)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)
        except (OSError, AttributeError):
            return False
        return bool(value.value)

    @classmethod
    def begin(cls) -> None:
        with cls._lock:
            cls._count += 1
            if cls._count == 1:
                cls._set(True)

    @classmethod
    def end(cls) -> None:
        with cls._lock:
            cls._count -= 1
            if cls._count == 0:
                cls._set(False)


def reap_adopted(uid: int) -> None:
    """Reap the zombies of ``uid`` that are this process's children. Only once the run that leased
    the uid is over, when its launcher (a child of ours running as ``uid``) was reaped already: each
    is then an orphan this process adopted, and no one else waits for it."""
    me = os.getpid()
    for pid in processes_of(uid, zombies=True):
        try:
            stat_line = Path(f"/proc/{pid}/stat").read_text()
            state, parent = stat_line.rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if state == "Z" and int(parent) == me:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


# ----------------------------------------------------------------------------- emptying a uid
def kill_uid(uid: int, seconds: float = 10.0) -> bool:
    """Kill every process of ``uid``; True once none is left (zombies hold nothing)."""
    deadline = time.monotonic() + seconds
    while pids := processes_of(uid):
        if time.monotonic() > deadline:
            return False
        reap_adopted(uid)  # a dying PID-namespace init waits for the zombies of its namespace the grader adopted
        _kill_all_as(uid)  # a fork chain: all at once
        for pid in pids:  # and one that keeps killing the killer: by pid, as root
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return True


def _kill_all_as(uid: int) -> None:
    """``kill(-1, SIGKILL)`` issued as ``uid``: every process it may signal, which is every process
    of that uid (no_new_privs keeps them from any other), in one step of the kernel. A program of
    its own (not a fork of this threaded process, whose child could deadlock on a lock another
    thread held)."""
    subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                    "kill", "-9", "-1"], capture_output=True, timeout=10)


def remove_files_of(uid: int, places: list[Path]) -> None:
    """Remove what ``uid`` owns in ``places`` (the world-writable folders; what it made inside a
    folder of its own goes with that folder). Only after its processes are gone: nothing races it."""
    for entry, _, is_folder in owned_entries({uid}, places):
        if is_folder:
            try:
                shutil.rmtree(entry.path, ignore_errors=True)  # fd-based: it follows no link
            except RecursionError:  # deeper than Python's stack: rm walks any depth (fts, by descriptor)
                pass
            if os.path.lexists(entry.path):
                subprocess.run(["rm", "-rf", "--one-file-system", "--", entry.path], capture_output=True, timeout=300)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def remove_ipc_of(uid: int) -> None:
    """Remove the SysV segments, queues and semaphore sets ``uid`` owns or made."""
    flags = {"shm": "-m", "msg": "-q", "sem": "-s"}
    for kind, ident in sysv_objects(uid):
        subprocess.run(["ipcrm", flags[kind], str(ident)], capture_output=True, timeout=10)


def leftovers(uid: int, places: list[Path], seconds: float = 5.0) -> list[str]:
    """What ``uid`` still has: processes (zombies too, once their parent had ``seconds`` to reap
    them: they count against the next run's process limit), files in ``places``, IPC objects."""
    deadline = time.monotonic() + seconds
    reap_adopted(uid)
    while processes_of(uid, zombies=True) and time.monotonic() < deadline:
        time.sleep(0.05)
        reap_adopted(uid)  # one that was still dying at the last look
    left = [f"process {pid}" for pid in processes_of(uid, zombies=True)]
    left += [f"file {entry.path}" for entry, _, _ in owned_entries({uid}, places)]
    left += [f"SysV {kind} {ident}" for kind, ident in sysv_objects(uid)]
    return left


def empty_uid(uid: int, places: list[Path]) -> list[str]:
    """Kill, remove, check: what is left of ``uid`` afterwards (empty when it may be used again)."""
    kill_uid(uid)
    remove_files_of(uid, places)
    remove_ipc_of(uid)
    return leftovers(uid, places)


class UidPool:
    """The uids of one grading run: each submission gets a uid no earlier submission of this run has
    left anything under. A uid goes back only once :func:`empty_uid` leaves it empty, to the end of
    the queue; one that cannot be emptied is set aside (and another claimed)."""

    def __init__(self, count: int, places: list[Path]):
        self.places = places
        self._claimed = dict(claim_uids(count))
        self._free: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.quarantined: dict[int, list[str]] = {}
        self._emptying: list[threading.Thread] = []
        for uid in self._claimed:
            left = empty_uid(uid, places)  # a grader killed earlier may have left something under it
            if left:
                self._set_aside(uid, left)
            else:
                self._free.put(uid)
        Adoption.begin()  # orphans of this pool's runs are ours to reap (ended in close)
        self._adopting = True

    def lease(self) -> int:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        while True:  # the others are still being emptied: claim one more
            with self._lock:
                (uid, fd), = claim_uids(1, avoid=set(self._claimed) | set(self.quarantined))
                self._claimed[uid] = fd
            left = empty_uid(uid, self.places)  # a grader killed earlier may have left something under it
            if not left:
                return uid
            self._set_aside(uid, left)

    def give_back(self, uid: int) -> None:
        """Empty ``uid`` in the background (its zombies may take init a few seconds to reap) and
        put it back once nothing of it is left; the next run meanwhile leases another."""
        worker = threading.Thread(target=self._empty, args=(uid,), daemon=True)
        with self._lock:
            self._emptying.append(worker)
        worker.start()

    def _empty(self, uid: int) -> None:
        left = empty_uid(uid, self.places)
        if left:
            self._set_aside(uid, left)
        else:
            self._free.put(uid)

    def _set_aside(self, uid: int, left: list[str]) -> None:
        with self._lock:
            self.quarantined[uid] = left

    def close(self) -> None:
        """Free the claims for other graders, once emptied (a uid set aside stays claimed until this
        process ends)."""
        for worker in list(self._emptying):
            worker.join()
        with self._lock:
            for uid, fd in list(self._claimed.items()):
                if uid not in self.quarantined:
                    os.close(fd)
                    del self._claimed[uid]
            adopting, self._adopting = self._adopting, False
        if adopting:
            Adoption.end()
