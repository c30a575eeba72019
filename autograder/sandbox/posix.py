"""The POSIX seal: a uid of its own, for where bubblewrap cannot start; the grader must be root.

What this seal guarantees (docs/instructors/security.md says the same for instructors):

- the submission runs as a fresh uid leased for it alone (:class:`autograder.sandbox.uids.UidPool`), with no
  capabilities and no way to gain any (``--no-new-privs``: a setuid file it plants gives it nothing),
  in a private home and temp folder; it reads only what :meth:`PosixSeal.grant` shares with its
  group and what the machine makes world-readable, which the grader checks holds nothing secret;
- every process of the uid is killed at once, as that uid (``kill(-1)``), and the run is over only
  when none is left; then what the uid owns in every world-writable place and its SysV IPC objects
  are removed, and the uid is used again only when nothing of it is left;
- memory counts its processes' pages, its memfds, its files in tmpfs and its SysV segments; its
  files on disk count together against the disk limit (RLIMIT_FSIZE stops a single file first);
  POSIX message queues are refused (RLIMIT_MSGQUEUE 0);
- its kernel talks over Unix sockets in its private temp folder, which no other uid can open.

What it cannot do: where ``unshare --net`` is refused (Gradescope, Docker), the network is open to
the submission; it shares the machine's file system, so anything world-readable is readable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from autograder.limits import OPEN_FILES, THREADS_PER_PROCESS, SandboxLimits, address_space_backstop_mb
from autograder.sandbox.holdings import SHARED_MEMORY, Meter, processes_of
from autograder.sandbox.seal import (SandboxUnavailable, Seal, _blocking_folder, _reachable_by_others, _root_may, _RunPlace,
                                     kill_tree)
from autograder.sandbox.uids import UidPool, kill_uid


@dataclass
class PosixSeal(Seal):
    """Sealed by plain POSIX separation, for where bubblewrap cannot start; the grader must be root.

    The submission runs as a uid of its own per job (leased from :class:`autograder.sandbox.uids.UidPool`: nobody's
    account, no other grader's, nothing left of an earlier run), with no capabilities and no way to gain any (``--no-new-privs``, an empty bounding
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
    uids: UidPool | None = None  # a fresh uid per run (claimed when made if none is given)
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
        self._claim_uids()

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

    def _place(self, uid: int, limits: SandboxLimits) -> _RunPlace:
        with self._lock:
            self._runs += 1
            folder = self.staging / f"run{self._runs}"
        folder.mkdir()
        os.chmod(folder, 0o711)  # explicit modes: a grader's umask of 077 must not lock the uid out
        for name in ("home", "tmp"):
            (folder / name).mkdir()
            os.chmod(folder / name, 0o700)
            os.chown(folder / name, uid, uid)
        return _RunPlace(cwd=str(folder / "home"), home=str(folder / "home"), tmp=str(folder / "tmp"), host_folder=folder)

    def command(self, argv: list[str], binds: list[tuple[Path, str]], env: dict[str, str], uid: int,
                limits: SandboxLimits, place: _RunPlace | None = None) -> list[str]:
        limit = ["prlimit", f"--nproc={limits.processes * THREADS_PER_PROCESS}",
                 f"--as={address_space_backstop_mb(limits.memory_mb) << 20}", f"--fsize={limits.disk_mb << 20}",
                 f"--nofile={OPEN_FILES}", "--msgqueue=0", "--core=0", "--"]
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                "--inh-caps=-all", "--bounding-set=-all", "--"]
        covers = self._covers([*self.needed, *(Path(source) for source, _ in binds)], uid)
        folders = self._memory_folders(uid, limits, place) if self.can_mount else []
        flags = (["--mount", "--propagation", "private"] if covers or folders else []) + (["--net"] if self.no_network else [])
        if not flags:
            return [*limit, *drop, *argv]
        # umask 022: the folders made here must be passable by the uid whatever the grader's umask
        script = "umask 022\n" + "".join(line + "\n" for line in covers + folders)
        script += "ip link set lo up\n" if self.no_network else ""
        script += 'exec "$@"'
        return ["unshare", *flags, "--", "sh", "-ec", script, "sh", *limit, *drop, *argv]

    @staticmethod
    def _memory_folders(uid: int, limits: SandboxLimits, place: _RunPlace | None) -> list[str]:
        """Shell lines that give the run, in its private mount namespace, in-memory folders of its own
        with a size cap over its home, its temp folder and /dev/shm: the kernel stops a file there at the
        disk limit, and the meter reads each one's use whole (no walk, however deep its folders)."""
        import shlex

        lines = []
        if Path(SHARED_MEMORY).is_dir():  # memory, not disk: as large as the memory limit lets it be
            lines.append(f"mount -t tmpfs -o size={limits.memory_mb << 20},mode=1777,nosuid,nodev course-shm {SHARED_MEMORY}")
        for folder in ([place.home, place.tmp] if place else []):
            lines.append(f"mount -t tmpfs -o size={limits.disk_mb << 20},mode=0700,uid={uid},gid={uid},nosuid,nodev "
                         f"course-run {shlex.quote(folder)}")
        if place:  # the launcher started in the folder below the mount: start the run in the mounted one
            lines.append(f"cd {shlex.quote(place.cwd or place.home)}")
        return lines

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

    def _meter(self, uid: int, place: _RunPlace) -> Meter:
        folders = [Path(place.home), Path(place.tmp), *(self.uids.places if self.uids else [])]
        return Meter(uid, folders)

    def _members(self, proc: subprocess.Popen, uid: int, known: list[int] | None = None) -> list[int]:
        if known is None:
            return processes_of(uid)  # every process on the machine read: a double fork cannot leave its uid
        return self._known_and_below(proc, known)

    def _finish(self, proc: subprocess.Popen, uid: int, place: _RunPlace) -> list[str]:
        kill_tree(proc, seconds=0)
        left = [] if kill_uid(uid) else [f"process {pid} of uid {uid} outlived the kill" for pid in processes_of(uid)]
        if place.host_folder is not None:
            shutil.rmtree(place.host_folder, ignore_errors=True)
        return left  # the files and IPC objects it left elsewhere: UidPool.give_back
