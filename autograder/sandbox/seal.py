"""The sandbox one submission runs in, and the limits around it: one interface, two seals.

- bubblewrap (:class:`autograder.sandbox.bubblewrap.BubblewrapSeal`) where it starts: namespaces for
  everything, the submission sees the system read-only, its own notebook and public files, and
  in-memory folders of its own; its PID namespace dies whole with it.
- POSIX separation (:class:`autograder.sandbox.posix.PosixSeal`) where it cannot (Gradescope's and
  most Docker containers): the grader is root and the submission runs as a uid of its own.

This module holds what both share: the limits, the run loop (start, relay the runner's messages,
watch time, memory, disk and processes, end everything); :mod:`autograder.sandbox.choose` picks the seal, and
the threads that talk to a run are :mod:`autograder.sandbox.streams`. What a sandbox
holds is measured by :mod:`autograder.sandbox.holdings`; the uids of a root grader are leased, emptied and
checked by :mod:`autograder.sandbox.uids`.

Who it runs as: an unprivileged user. A root grader gives each submission a fresh uid of its own
(:class:`autograder.sandbox.uids.UidPool`), never one that an earlier submission left anything under. Run by
a normal user, bwrap creates a user namespace as that user.

Limits: wall time (held whatever the sandbox does to its channel or its streams: nothing the
grader waits on can block the watch); memory, counting the processes' pages and every file or
shared-memory object held in memory (:mod:`autograder.sandbox.holdings`); files on disk, all together;
processes (RLIMIT_NPROC, and watched here); bytes written to stdout/stderr (the rest is drained and
dropped). At a limit, or when the run ends, every process of the sandbox is killed, and the run is
not over until none is left.

Only the runner can write the grader's channel: its write end is handed to the runner alone (the
lifeline watcher closes its copy first), the runner makes itself undumpable before any student code
runs (so no process of its uid can copy a descriptor out of it), and the kernel does not inherit it.
When the grader itself dies, two things end the sandbox: bwrap's ``--die-with-parent`` (or, under
POSIX separation, the next grader emptying the uid before it uses it), and a watcher inside that
waits on a pipe only the grader can write to and kills every process of the sandbox when it closes.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.limits import GROUP_TASK_SLACK, LAUNCHER_PROCESSES, MAX_FILES, THREADS_PER_PROCESS, SandboxLimits
from autograder.sandbox.cgroups import CgroupHome, RunGroup, container_oom_kills, find_home, memory_allowed_mb
from autograder.sandbox.holdings import Meter, alive, descendants
from autograder.sandbox.protocol import CELLS_DONE, CHANNEL_ENV, FORKSERVER_ENV, KERNEL_NAMESPACES, LIFELINE_ENV
from autograder.sandbox.streams import Drain, Lines, Replies
from autograder.sandbox.uids import UidPool, writable_places
from autograder.templates import render

if TYPE_CHECKING:
    from autograder.sandbox.forkserver import ForkServer

#: The watch looks at the run this often, and at once when the runner says the cells ran.
POLL_SECONDS = 0.1
#: This often the watch reads the exact memory and finds every process of the run anew; between
#: those reads a cheap bound above the exact figure decides whether to read it now (exact reads
#: cost tens of milliseconds per process, most of a core at every poll).
EXACT_SECONDS = 1.0
#: Runs first in every sandbox and ends every process of it once the grader lets go of the lifeline
#: (``templates/lifeline.sh.tmpl`` says how).
LIFELINE = render("lifeline.sh.tmpl", channel_env=CHANNEL_ENV, lifeline_env=LIFELINE_ENV, forkserver_env=FORKSERVER_ENV)
#: The submission's writable working folder inside the bubblewrap sandbox (in memory, size-capped).
WORKDIR = "/grading/work"
#: Starts every sandbox: the first processes the kernel's OOM killer ends when the machine or a
#: container runs out of memory are the submission's, not the grader's (which must write the result).
#: Only a grader with CAP_SYS_RESOURCE (not Docker's root) keeps a hostile run from lowering it again;
#: the memory limit, which leaves the grader room in a container, is what holds then.
KILLED_FIRST = ["sh", "-c", 'echo 1000 2>/dev/null >/proc/self/oom_score_adj; exec "$@"', "sh"]
#: Where a grading run keeps its shared files, tried in order: the first that a uid owning nothing
#: can traverse (a private TMPDIR, as clusters set, would hide the staging folders from the sandbox).
TEMP_CANDIDATES = (None, "/tmp", "/var/tmp", "/dev/shm")  # None: tempfile.gettempdir()
#: How long the grader waits for a stream reader once every process of the sandbox is gone.
JOIN_SECONDS = 5.0


class SandboxUnavailable(RuntimeError):
    """No sandbox can start here (no bwrap, or user namespaces are disabled)."""


@dataclass
class SandboxRun:
    """What happened: how it ended, what the runner reported, what it printed."""

    returncode: int | None = None
    killed_for: str | None = None  # "timeout", "memory", "disk", "processes" or None
    messages: list[dict] = field(default_factory=list)
    output: str = ""
    output_dropped: int = 0
    channel_overflow: bool = False
    peak_memory_mb: float = 0.0  # processes and in-memory files together
    peak_disk_mb: float = 0.0
    peak_address_space_mb: float = 0.0  # the largest single process's virtual size
    memory_parts: dict[str, float] = field(default_factory=dict)  # a memory kill: MB by kind, what it counted
    disk_cause: str = "size"  # a disk kill: "size", "files" (more than MAX_FILES) or "depth" (past MAX_DEPTH)
    seconds: float = 0.0
    cells_seconds: float | None = None  # when the runner said the cells ran (the tests follow): for benchmarks
    leftovers: list[str] = field(default_factory=list)  # what could not be removed after the run


def _reachable_by_others(path: Path) -> bool:
    """Can a uid that owns nothing here reach ``path`` (x on every parent, r on the target)?"""
    return _blocking_folder(path) is None


def _blocking_folder(path: Path, gid: int | None = None) -> Path | None:
    """The outermost folder that stops a uid owning nothing (in group ``gid``, if given) from
    reaching ``path``; the path itself when only its own mode does; None when it is reachable."""
    path = path.resolve()

    def allows(st, bits: int) -> bool:
        shift = 3 if gid is not None and st.st_gid == gid else 0
        return st.st_mode & (bits << shift) == bits << shift

    for parent in reversed(path.parents):
        if not allows(os.stat(parent), 0o001):
            return parent
    st = os.stat(path)
    return None if allows(st, 0o004) and (not path.is_dir() or allows(st, 0o001)) else path


def grading_temp_base() -> Path:
    """A folder for a grading run's shared files that the sandbox's uid can traverse."""
    if os.geteuid() != 0:  # the sandbox runs as this very user: any temp folder will do
        return Path(tempfile.gettempdir())
    tried = []
    for candidate in TEMP_CANDIDATES:
        folder = Path(candidate or tempfile.gettempdir())
        if folder.is_dir() and _reachable_by_others(folder):
            return folder
        tried.append(str(folder))
    raise SandboxUnavailable(
        f"no temp folder here lets the sandbox's unprivileged user in ({', '.join(dict.fromkeys(tried))}: a folder "
        "on each path lacks o+x). Point TMPDIR at a folder that others may traverse (chmod o+x on it and its "
        "parents; the grader's own files inside stay private)")


@dataclass
class _RunPlace:
    """Where one run lives as the sandboxed process sees it: its working folder, home and temp."""

    cwd: str | None  # for Popen (None: the sandbox sets its own)
    home: str
    tmp: str
    host_folder: Path | None = None  # removed after the run



class Seal:
    """The run loop both seals share: start the command, relay messages, watch time, memory, disk
    and processes, end everything. Subclasses say how the command is built, who its members are
    and how they end."""

    mode = "?"
    python: Path
    staging: Path
    uids: UidPool | None = None  # a root grader's: a fresh uid per run
    _groups: tuple[CgroupHome | None, str] | None = None  # found once per seal: find_home()
    forkserver: ForkServer | None = None  # starts kernels warm (:mod:`autograder.sandbox.forkserver`)
    _group_names = itertools.count(1)
    _active_lock = threading.Lock()
    _active: set[int] = set()  # runs going on now, in this process (the machine-wide count needs one alone)
    _starts = itertools.count(1)

    @property
    def cgroups(self) -> CgroupHome | None:
        """Where each run gets a control group of its own (None: the meter counts alone)."""
        if self._groups is None:
            self._groups = find_home()
            if self._groups[0] is not None:
                self._groups[0].remove_stale()
        return self._groups[0]

    @property
    def counting(self) -> str:
        """How memory is counted here, for the log and the results."""
        return "kernel-counted memory" if self.cgroups is not None else "memory counted from /proc"

    @staticmethod
    def host_places() -> list[Path]:
        """The host's folders a submission could leave files in, for its uid to be emptied of them:
        every world-writable one (a search of the file systems, about 1 s here)."""
        return writable_places()

    def _claim_uids(self) -> None:
        """A root grader's seal made without a pool of uids (``open_seal`` gives one) claims one of
        its own when it is made: a run never goes under root's own uid."""
        if self.uids is None and os.geteuid() == 0:
            self.uids = UidPool(1, self.host_places())

    def require_private(self, paths: list[Path]) -> None:
        """Refuse to start if a submission could read any of ``paths``. A seal that shows a
        submission nothing of the grader's files (bubblewrap) has nothing to check."""

    @contextmanager
    def lease(self):
        """The uid one run is graded under: a fresh one from the pool when the grader is root
        (given back, emptied, after the run), else this user's own."""
        if self.uids is None:
            yield os.getuid()
            return
        uid = self.uids.lease()
        try:
            yield uid
        finally:
            self.uids.give_back(uid)

    def inside_ids(self, uid: int) -> tuple[int, int]:
        """The uid and gid a run of ``uid`` has as its own user namespace sees them."""
        return uid, uid

    def inside(self, host: Path, dest: str) -> str:
        """The path under which the sandboxed process sees ``host`` (bound at ``dest`` or not)."""
        raise NotImplementedError

    def grant(self, folder: Path, uid: int) -> None:
        """Let ``uid`` (and, where the grader is root, no other sandbox) read ``folder``."""
        for root, dirs, files in os.walk(folder):
            _share(Path(root), 0o755, uid)
            for name in files:
                _share(Path(root, name), 0o644, uid)

    def _place(self, uid: int, limits: SandboxLimits) -> _RunPlace:
        raise NotImplementedError

    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], uid: int,
                limits: SandboxLimits, place: _RunPlace | None = None) -> list[str]:
        raise NotImplementedError

    def _meter(self, uid: int, place: _RunPlace) -> Meter:
        raise NotImplementedError

    def _members(self, proc: subprocess.Popen, uid: int, known: list[int] | None = None) -> list[int]:
        """The run's processes; ``known`` (the last answer) allows a cheaper search where one exists."""
        raise NotImplementedError

    @staticmethod
    def _known_and_below(proc: subprocess.Popen, known: list[int]) -> list[int]:
        """The run's processes between two full searches: the launcher's tree, what the last full
        search found still alive, and the trees below those (a warm kernel is no child of the launcher)."""
        found = set(descendants(proc.pid))
        for pid in known:
            if pid not in found and alive(pid):
                found.add(pid)
                found.update(descendants(pid))
        return sorted(found)

    def _finish(self, proc: subprocess.Popen, uid: int, place: _RunPlace) -> list[str]:
        """End every process of the run; returns what could not be ended or removed."""
        raise NotImplementedError

    def run(self, argv: list[str], *, binds: list[tuple[Path, str]], env: dict[str, str], uid: int,
            limits: SandboxLimits, after_cells: bytes | None = None) -> SandboxRun:
        """Run ``argv`` in a sandbox as ``uid`` (from :meth:`lease`) until it ends or hits a limit.

        The runner inside writes newline-delimited JSON messages to the file descriptor named by
        ``$COURSE_CHANNEL_FD``. ``after_cells`` (the tests) is written to the runner's stdin once,
        when it reports that the notebook's cells ran, never before; by a thread of its own, so a
        sandbox that never reads its stdin cannot stall the watch.
        ``HOME`` and ``TMPDIR`` are the sandbox's own (a private, writable working and temp folder).
        """
        result = SandboxRun()
        group = self._new_group(limits)
        machine = MachineMemory(self) if group is None else None
        warm = self.forkserver.pair() if self.forkserver is not None else None  # (the runner's end, the server's)
        try:
            place = self._place(uid, limits)
            channel_r, channel_w = os.pipe()
            lifeline_r, lifeline_w = os.pipe()  # the grader keeps the write end until the run is over
            env = {**env, "HOME": place.home, "TMPDIR": place.tmp, CHANNEL_ENV: str(channel_w),
                   LIFELINE_ENV: str(lifeline_r)}
            passed = [channel_w, lifeline_r]
            if warm:
                env[FORKSERVER_ENV] = str(warm[0].fileno())
                passed.append(warm[0].fileno())
            command = self.command(["/bin/bash", "-c", LIFELINE, "bash", *argv], binds, env, uid, limits, place)
            if group is not None:  # joined while still root, before anything of the run starts
                command = [*group.join_command(), *command]
            command = [*KILLED_FIRST, *command]
            meter = self._meter(uid, place)
            started = time.perf_counter()
            try:
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, pass_fds=passed,
                                        start_new_session=True, cwd=place.cwd, env=env if place.cwd else None)
            finally:
                os.close(channel_w)
                os.close(lifeline_r)
                if warm:
                    warm[0].close()
        except BaseException:  # nothing started: the group and the machine's count are given back
            if warm:
                warm[1].close()
            if group is not None:
                group.remove()
            if machine:
                machine.close()
            raise
        if warm:  # the server forks the kernel into this run once the runner asks (or the runner starts its own)
            try:
                self.forkserver.register(warm[1], proc.pid, uid, self.inside_ids(uid),
                                         group.procs_files() if group else [], KERNEL_NAMESPACES)
            except OSError:
                pass
            warm[1].close()
        output = Drain(proc.stdout, limits.output_bytes)
        channel = Lines(os.fdopen(channel_r, "rb"), limits.channel_bytes, wake_for={CELLS_DONE})
        replies = Replies(proc.stdin)
        members: list[int] = []
        last_exact = -EXACT_SECONDS
        try:
            while proc.poll() is None:
                for message in channel.take():
                    result.messages.append(message)
                    if after_cells is not None and message.get("event") == CELLS_DONE:
                        replies.put(after_cells)  # the tests go in only now, and only once
                        after_cells = None
                        result.cells_seconds = time.perf_counter() - started
                if time.perf_counter() - started > limits.timeout:
                    result.killed_for = "timeout"
                    break
                exact = time.perf_counter() - last_exact >= EXACT_SECONDS
                members = self._members(proc, uid, None if exact else members)
                held = meter.measure(members, exact=exact)
                if exact:  # from its end: a read that takes long still leaves cheap looks between two
                    last_exact = time.perf_counter()
                if not exact and held.memory_mb > limits.memory_mb:  # the bound says maybe: read it exactly
                    exact, held = True, meter.measure(members, exact=True)
                if exact:
                    result.peak_memory_mb = max(result.peak_memory_mb, held.memory_mb)
                result.peak_disk_mb = max(result.peak_disk_mb, held.disk_mb)
                result.peak_address_space_mb = max(result.peak_address_space_mb, held.address_space_mb)
                if held.memory_mb > limits.memory_mb:
                    result.killed_for, result.memory_parts = "memory", held.parts
                    break
                if group is not None and group.oom_kills():  # the kernel stopped it at the limit
                    result.killed_for, result.memory_parts = "memory", group.parts()
                    break
                unseen = machine.lost_mb() if machine else 0.0
                if unseen > limits.memory_mb:
                    result.killed_for, result.memory_parts = "memory", {MachineMemory.PART: unseen}
                    break
                if machine and (ran_out := machine.container_ran_out()):
                    result.killed_for, result.memory_parts = "memory", ran_out
                    break
                cause = "size" if held.disk_mb > limits.disk_mb else "files" if held.files > MAX_FILES else \
                    "depth" if held.too_deep else None
                if cause:
                    result.killed_for, result.disk_cause = "disk", cause
                    break
                if held.processes > limits.processes + LAUNCHER_PROCESSES:
                    result.killed_for = "processes"
                    break
                if channel.ended:  # every writer closed it: what is left is the sandbox's own exit
                    with suppress(subprocess.TimeoutExpired):
                        proc.wait(POLL_SECONDS)
                else:  # woken early when the cells ran: the tests go in at once
                    channel.wait(POLL_SECONDS)
        finally:
            if group is not None:
                if result.killed_for is None and group.oom_kills():  # hit between two polls
                    result.killed_for, result.memory_parts = "memory", group.parts()
                left = group.kill()
            result.leftovers = self._finish(proc, uid, place)
            if group is not None:
                if left or not group.remove():
                    result.leftovers.append("processes of its control group survived the kill")
            if machine:
                if result.killed_for is None and (ran_out := machine.container_ran_out()):  # between two polls
                    result.killed_for, result.memory_parts = "memory", ran_out
                machine.close()
            os.close(lifeline_w)
            replies.stop()
        # every process that held the streams is gone; a reader still blocked is abandoned, not awaited
        output.join(JOIN_SECONDS)
        channel.join(JOIN_SECONDS)
        for message in channel.take():
            result.messages.append(message)
        result.returncode = proc.returncode
        result.output, result.output_dropped = output.text(), output.dropped
        result.channel_overflow = channel.overflow
        result.seconds = time.perf_counter() - started
        return result

    def _new_group(self, limits: SandboxLimits) -> RunGroup | None:
        if self.cgroups is None:
            return None
        name = f"course-sandbox-{os.getpid()}-{next(self._group_names)}"
        return self.cgroups.new_group(name, limits.memory_mb, limits.processes * THREADS_PER_PROCESS + GROUP_TASK_SLACK)

    def probe(self) -> None:
        """Start one trivial sandbox; raise SandboxUnavailable with the tools' own words if it cannot."""
        with self.lease() as uid:
            run = self.run([str(self.python), "-c", f"import os; os.write(int(os.environ['{CHANNEL_ENV}']), b'{{\"ok\": true}}\\n')"],
                           binds=[], env={"PATH": "/usr/bin:/bin"}, uid=uid, limits=SandboxLimits(timeout=30, memory_mb=512))
        if not any(m.get("ok") for m in run.messages):
            raise SandboxUnavailable(f"{self.mode} could not start a sandbox here: "
                                     f"{run.output.strip()[-300:] or run.returncode}")


class MachineMemory:
    """Where no control group can be made: the memory the whole machine lost while a run went on
    (``MemAvailable``), which counts what no /proc reading of the run shows (socket buffers, files in
    flight over a socket). Only meaningful while this run is the grader's only one (``--jobs 1``): with
    another run beside it, it says nothing. In a container with a memory limit (Gradescope) the host's
    figure says nothing either; there a kill by the container's kernel is what shows such memory."""

    PART = "memory the machine lost while it ran (socket buffers, files in flight)"
    #: When the container's kernel killed a process of the run for the container's memory limit.
    OUT_OF_MEMORY = "what the container, grader included, may hold: its kernel killed the run's processes"

    def __init__(self, seal: "Seal"):
        self.seal, self.start = seal, next(Seal._starts)
        with Seal._active_lock:
            self.alone = not Seal._active
            Seal._active.add(self.start)
        self.baseline = _available_mb()
        # in a container with a memory limit, /proc/meminfo is the host's, whose other tenants come and
        # go: there the container's own limit, and its count of OOM kills, stand in for this figure
        self.container_mb = memory_allowed_mb()
        self.oom_kills = container_oom_kills() if self.container_mb else 0

    def _still_alone(self) -> bool:
        with Seal._active_lock:
            self.alone = self.alone and Seal._active == {self.start}
        return self.alone

    def container_ran_out(self) -> dict[str, float] | None:
        """What a memory kill says, if the container's kernel killed a process for its memory limit
        while this run was the only one (the grader's own processes are killed last: KILLED_FIRST)."""
        if self.container_mb and self._still_alone() and container_oom_kills() > self.oom_kills:
            return {self.OUT_OF_MEMORY: float(self.container_mb)}
        return None

    def lost_mb(self) -> float:
        if self.container_mb is None and self._still_alone():
            return max(self.baseline - _available_mb(), 0.0)
        return 0.0

    def close(self) -> None:
        with Seal._active_lock:
            Seal._active.discard(self.start)


def _available_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _share(path: Path, mode: int, uid: int) -> None:
    if os.geteuid() == 0:  # the run's own group may read it, nobody else (other runs have other uids)
        os.chown(path, 0, uid)
        os.chmod(path, mode & 0o750)
    else:
        os.chmod(path, mode)


def _root_may(*flags: str, command: tuple | list = ("true",)) -> bool:
    """Can this (root) process make these namespaces (not in most containers) and run ``command`` there?"""
    try:
        return subprocess.run(["unshare", *flags, "--", *command], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def kill_tree(proc: subprocess.Popen, seconds: float = 10.0, reap=None) -> list[int]:
    """Kill ``proc`` and every process below it, reap ``proc``, and wait for the rest to be gone;
    returns the ones still alive after ``seconds``. ``reap``, called while waiting, reaps what the
    grader adopted of them (:func:`autograder.sandbox.uids.reap_adopted`): a PID namespace's init
    ends only once every process of its namespace is reaped, the warm kernel included, whose parent
    (outside the namespace) may die first and leave it to the grader."""
    members = descendants(proc.pid)
    for pid in [proc.pid, *members]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    deadline = time.monotonic() + seconds
    while (left := [pid for pid in members if alive(pid)]) and time.monotonic() < deadline:
        if reap is not None:
            reap()
        time.sleep(0.02)
    return left
