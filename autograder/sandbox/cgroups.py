"""Limits the kernel counts for us: a control group per sandboxed run, where one can be made.

The meter of :mod:`autograder.sandbox.holdings` reads what /proc shows, and a hostile notebook can hold
memory that /proc does not show: data queued in socket buffers, memfds in flight over a socket
after every process closed them. The kernel's memory controller charges all of it (pages,
shared memory, memfds, tmpfs files, socket buffers, kernel memory) to the control group whose
process caused it, and stops the group at its limit. So where a cgroup can be made (cgroup v2
with the memory controller delegated to the grader, or cgroup v1's memory hierarchy as root, as
on most hosts), each run gets its own:

- ``memory.max`` (v1: ``memory.limit_in_bytes``, with swap capped the same) at the memory limit:
  at the limit the kernel reclaims caches, then kills inside the group; the run is ``memory``;
- ``pids.max`` at the process limit's threads (the kernel refuses the next fork or thread);
- the group is killed whole (v2: ``cgroup.kill``; v1: every member, until none is left) and
  removed after the run.

Where none can be made (Gradescope's and most Docker containers mount /sys/fs/cgroup read-only),
:func:`find_home` says why and the meter's own counts, with the POSIX seal's extra limits, stand
alone: docs/instructors/security.md, "Which memory and disk each seal counts", says what that leaves.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: ``off`` makes the grader use no control group (the meter alone), as on Gradescope.
CGROUP_ENV = "COURSE_CGROUP"
#: Prefix of the groups made here; a group whose grader died is removed by the next grader.
GROUP_PREFIX = "course-sandbox-"


@dataclass(frozen=True)
class CgroupHome:
    """Where this grader may make groups: cgroup v2's one folder, or cgroup v1's memory and pids
    folders (pids is optional there: RLIMIT_NPROC and the watch hold processes anyway)."""

    version: int
    memory: Path  # the folder under which each run's group is made
    pids: Path | None = None  # v1 only: the pids hierarchy's folder (v2: the same as memory)

    def new_group(self, name: str, memory_mb: int, max_tasks: int) -> "RunGroup":
        """A fresh group for one run, with its limits set."""
        folders = [self.memory / name] + ([self.pids / name] if self.pids else [])
        for folder in folders:
            folder.mkdir()
        group = RunGroup(self, folders)
        limit = str(memory_mb << 20)
        if self.version == 2:
            _write(folders[0] / "memory.max", limit)
            _write(folders[0] / "memory.swap.max", "0", optional=True)
            _write(folders[0] / "pids.max", str(max_tasks))
        else:
            _write(folders[0] / "memory.limit_in_bytes", limit)
            _write(folders[0] / "memory.memsw.limit_in_bytes", limit, optional=True)  # swap is no way around it
            if self.pids:
                _write(folders[1] / "pids.max", str(max_tasks))
        return group

    def remove_stale(self) -> None:
        """Remove the empty groups of graders that died (a group with members is left alone)."""
        for parent in {self.memory, *([self.pids] if self.pids else [])}:
            for folder in parent.glob(f"{GROUP_PREFIX}*"):
                pid = folder.name.removeprefix(GROUP_PREFIX).split("-", 1)[0]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    try:
                        folder.rmdir()
                    except OSError:
                        pass


@dataclass
class RunGroup:
    """One run's control group(s): join, read, kill, remove."""

    home: CgroupHome
    folders: list[Path]

    def procs_files(self) -> list[str]:
        """The files a process writes its pid into to join the group (root's: joined before the uid drops)."""
        return [str(f / "cgroup.procs") for f in self.folders]

    def join_command(self) -> list[str]:
        """A prefix that moves the command into the group before it execs (run while still root,
        before the uid drops: the group files are root's)."""
        script = 'while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; shift; exec "$@"'
        return ["sh", "-ec", script, "sh", *self.procs_files(), "--"]

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the group's memory limit."""
        memory = self.folders[0]
        text = _read(memory / ("memory.events" if self.home.version == 2 else "memory.oom_control"))
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
        # an old v1 kernel without the count: the limit was hit and the group is under OOM now
        return int("under_oom 1" in text)

    def memory_mb(self) -> float:
        """What the group holds now, caches included (the kernel reclaims those at the limit)."""
        name = "memory.current" if self.home.version == 2 else "memory.usage_in_bytes"
        value = _read(self.folders[0] / name).strip()
        return int(value) / (1 << 20) if value.isdigit() else 0.0

    def peak_mb(self) -> float:
        """The most the group held at once (v1 and kernels since 5.19 record it)."""
        name = "memory.peak" if self.home.version == 2 else "memory.max_usage_in_bytes"
        value = _read(self.folders[0] / name).strip()
        return int(value) / (1 << 20) if value.isdigit() else self.memory_mb()

    def parts(self) -> dict[str, float]:
        """What a memory kill says it counted."""
        return {"all its memory as the kernel counts it (socket buffers and files in flight included)": self.peak_mb()}

    def members(self) -> list[int]:
        """The processes in the group and in any group made inside it (a grader run in the group
        makes its own there)."""
        pids = set()
        for folder in self._folders_deepest_first():
            pids.update(int(p) for p in _read(folder / "cgroup.procs").split() if p.isdigit())
        return sorted(pids)

    def _folders_deepest_first(self) -> list[Path]:
        nested = [Path(top, name) for folder in self.folders for top, names, _ in os.walk(folder) for name in names]
        return sorted(nested, key=lambda f: len(f.parts), reverse=True) + list(self.folders)

    def kill(self, seconds: float = 10.0) -> list[int]:
        """Kill every member (v2: at once, by the kernel); returns those still there after ``seconds``."""
        if self.home.version == 2 and (self.folders[0] / "cgroup.kill").exists():
            _write(self.folders[0] / "cgroup.kill", "1", optional=True)
        deadline = time.monotonic() + seconds
        while (left := self.members()) and time.monotonic() < deadline:
            for pid in left:  # a fork after the read lands in the group too: the next round gets it
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)
        return self.members()

    def remove(self, seconds: float = 5.0) -> bool:
        """Remove the group (its charges go to the parent); False if it could not be."""
        deadline = time.monotonic() + seconds
        for folder in self._folders_deepest_first():  # a group with groups inside cannot go first
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.05)
        return True


def find_home() -> tuple[CgroupHome | None, str]:
    """(where this grader may make groups, or None; a line that says which or why not)."""
    if os.environ.get(CGROUP_ENV, "").strip().lower() in ("off", "0", "no"):
        return None, f"no control groups ({CGROUP_ENV}=off)"
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    if "cgroup2" in mounts and "" in own:
        home = _usable_v2(_folder(mounts["cgroup2"], own[""]))
        if home:
            return home, "control groups (cgroup v2): memory and processes counted by the kernel"
    if "memory" in mounts and "memory" in own:
        memory = _folder(mounts["memory"], own["memory"])
        pids = _folder(mounts["pids"], own["pids"]) if "pids" in mounts and "pids" in own else None
        if memory.is_dir() and _may_make_groups(memory):
            home = CgroupHome(1, memory, pids if pids and _may_make_groups(pids) else None)
            return home, "control groups (cgroup v1): memory counted by the kernel"
    return None, "no control group can be made here (read-only or not delegated): the meter counts alone"


def _limited_memory_groups() -> list[tuple[Path, int, int]]:
    """(folder, cgroup version, limit in bytes) of this process's memory control group and the
    groups above it that have a limit below the machine's memory (a container's)."""
    mounts, own = _cgroup_mounts(), _own_cgroups()
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        machine = 1 << 62
    found = []
    for hierarchy, controller, version in (("cgroup2", "", 2), ("memory", "memory", 1)):
        if hierarchy not in mounts or controller not in own:
            continue
        top, folder = mounts[hierarchy][0], _folder(mounts[hierarchy], own[controller])
        while True:  # "max" (v2), a missing file and v1's huge number for none all fall out
            value = _read(folder / ("memory.max" if version == 2 else "memory.limit_in_bytes")).strip()
            if value.isdigit() and int(value) < machine:
                found.append((folder, version, int(value)))
            if folder == top or folder.parent == folder:
                break
            folder = folder.parent
    return found


def memory_allowed_mb() -> int | None:
    """The memory this process and everything it starts may use together: the smallest limit on
    its control groups and the groups above them (a container's memory setting), in MB; None when
    none is set below the machine's memory, or none can be read."""
    limits = [limit for _, _, limit in _limited_memory_groups()]
    return min(limits) >> 20 if limits else None


def container_oom_kills() -> int:
    """How many processes of this process's own memory control group (and, on v2, the groups below
    it) the kernel has killed for lack of memory; 0 outside a container, where no group above has a
    limit. Only the own group: v1 counts a kill only in the group the process was in, and v2 counts
    it in every group above, siblings' kills included. Read-only: it works where no group can be
    made, as on Gradescope."""
    if not _limited_memory_groups():
        return 0
    mounts, own = _cgroup_mounts(), _own_cgroups()
    kills = 0
    for hierarchy, controller, name in (("cgroup2", "", "memory.events"), ("memory", "memory", "memory.oom_control")):
        if hierarchy in mounts and controller in own:
            for line in _read(_folder(mounts[hierarchy], own[controller]) / name).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    kills += int(value)
    return kills


def _usable_v2(folder: Path) -> CgroupHome | None:
    """This cgroup v2 folder, if its children can have memory and pids controllers set by us."""
    wanted = {"memory", "pids"}
    if not wanted <= set(_read(folder / "cgroup.controllers").split()):
        return None
    if not wanted <= set(_read(folder / "cgroup.subtree_control").split()):
        try:  # refused when this cgroup holds processes itself (cgroup v2's no-internal-process rule)
            _write(folder / "cgroup.subtree_control", "+memory +pids")
        except OSError:
            return None
    return CgroupHome(2, folder) if _may_make_groups(folder) else None


def _may_make_groups(folder: Path) -> bool:
    # a name of this thread's own: two graders in one process (the suite grades a batch and its
    # references at once) may probe together, and a shared name would make one see no control groups
    probe = folder / f"{GROUP_PREFIX}{os.getpid()}-{threading.get_ident()}-probe"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def _folder(mount: tuple[Path, str], own: str) -> Path:
    """This process's folder in a hierarchy mounted at ``mount[0]`` whose root is ``mount[1]``."""
    point, root = mount
    relative = own[len(root):] if root != "/" and own.startswith(root) else own
    return point / relative.lstrip("/")


def _cgroup_mounts() -> dict[str, tuple[Path, str]]:
    """{"cgroup2": (mount point, root), controller name: its v1 (mount point, root)}."""
    found: dict[str, tuple[Path, str]] = {}
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        fields = line.split()
        try:
            fstype = fields[fields.index("-") + 1]
            options = fields[fields.index("-") + 3].split(",")
        except (ValueError, IndexError):
            continue
        if fstype == "cgroup2":
            found.setdefault("cgroup2", (Path(fields[4]), fields[3]))
        elif fstype == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options:
                    found.setdefault(controller, (Path(fields[4]), fields[3]))
    return found


def _own_cgroups() -> dict[str, str]:
    """{controller: this process's path} from /proc/self/cgroup ("" is cgroup v2's line)."""
    found = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                found[controller] = parts[2]
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise


__all__ = ["CGROUP_ENV", "CgroupHome", "RunGroup", "find_home"]
