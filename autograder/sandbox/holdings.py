"""What a sandbox holds, read from /proc: its processes, the memory they and their files take, disk.

A limit must count every kind of memory a hostile notebook can hold, not only its processes' pages:
a memfd or a file in a tmpfs (``/dev/shm``, bubblewrap's in-memory folders) is memory that no
process maps, and SysV shared memory outlives every process. :func:`measure` adds them up, each
object once (by device and inode), and counts files on disk apart:

- process pages: the proportional set size of anonymous and file-backed pages (``Pss_Anon`` +
  ``Pss_File`` of ``smaps_rollup``); shared memory (``Pss_Shmem``) is left out there and counted
  per object below, so a memfd that is both mapped and open counts once;
- shared-memory objects: every regular file a process holds open or maps that lives in memory (a
  memfd, a file of a tmpfs, deleted or not), at its allocated size; SysV segments and message
  queues of the uid (``/proc/sysvipc``);
- files the uid owns in the folders it may write (its home and temp folder, the machine's
  world-writable places): on a tmpfs they are memory, elsewhere disk; deleted files still held
  open count where they live;
- bubblewrap's own in-memory folders (``/tmp``, the working folder, ``/dev``): the space used on
  every tmpfs mounted in the sandbox's mount namespace that the host does not have.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.limits import MAX_DEPTH, MAX_FILES

#: The machine's shared-memory folder: a tmpfs of a sandbox's own mounted there is memory, not disk.
SHARED_MEMORY = "/dev/shm"
#: File systems whose files are memory.
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs", "shm", "devtmpfs", "hugetlbfs"}


@dataclass
class Holdings:
    processes: int = 0
    memory_mb: float = 0.0  # process pages + shared memory + files in memory
    disk_mb: float = 0.0  # files on disk
    address_space_mb: float = 0.0  # the largest single process's virtual size (reported only)
    files: int = 0  # files and folders the uid owns in its folders
    too_deep: bool = False  # some of them are nested deeper than MAX_DEPTH
    parts: dict[str, float] = field(default_factory=dict)  # memory_mb by kind, to say what a kill counted


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (bubblewrap: a double fork or setsid does not leave the tree,
    orphans go to the sandbox's own reaper). Read from each thread's ``children`` list, so the
    cost grows with the sandbox, not with the machine's process count."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            except OSError:
                continue
            found.extend(int(child) for child in children)
            todo.extend(int(child) for child in children)
    return found


def alive(pid: int) -> bool:
    """Is ``pid`` a process that still runs (not gone, not a zombie)?"""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def processes_of(uid: int, zombies: bool = False) -> list[int]:
    """Every live process whose real or effective uid is ``uid`` (read from status: a process that
    made itself undumpable has a /proc folder owned by root). Zombies hold nothing but a process
    slot and are left out (``zombies=True``: counted too; they count against RLIMIT_NPROC)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
            uids = status.split("\nUid:", 1)[1].split("\n", 1)[0].split()
            if str(uid) in uids[:3] and (zombies or "\nState:\tZ" not in status):
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def threads_of(uid: int) -> int:
    """Threads of every process of ``uid`` (RLIMIT_NPROC counts threads)."""
    count = 0
    for pid in processes_of(uid):
        try:
            count += int(Path(f"/proc/{pid}/status").read_text().split("Threads:", 1)[1].split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return count


def memory_devices() -> set[int]:
    """Devices of this mount namespace's in-memory file systems."""
    return {dev for dev, fstype in _mounts(Path("/proc/self/mountinfo")).values() if fstype in MEMORY_FILESYSTEMS}


def _mounts(mountinfo: Path) -> dict[str, tuple[int, str]]:
    """{mount point: (device, file system type)} of a mountinfo file."""
    mounts = {}
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        fields = line.split()
        try:
            major, minor = fields[2].split(":")
            fstype = fields[fields.index("-") + 1]
        except (ValueError, IndexError):
            continue
        mounts[fields[4].replace("\\040", " ")] = (os.makedev(int(major), int(minor)), fstype)
    return mounts


class Meter:
    """Measures one sandbox again and again (the host's devices are read once)."""

    def __init__(self, uid: int | None, folders: list[Path] = ()):
        self.uid = uid  # None: not a uid of its own (bubblewrap run by an ordinary user)
        self.folders = [Path(f) for f in folders]
        self.host_devices = {dev for dev, _ in _mounts(Path("/proc/self/mountinfo")).values()}
        self.memory_devices = memory_devices()

    def in_memory(self, dev: int) -> bool:
        # a memfd, SysV segment or anonymous shared mapping lives on the kernel's internal shm mount,
        # which no mountinfo lists
        return dev in self.memory_devices or dev not in self.host_devices

    def measure(self, pids: list[int], exact: bool = True) -> Holdings:
        """What ``pids`` and the uid hold. ``exact=False`` counts process pages as resident pages
        (``statm``, read in microseconds), a bound above the proportional size that ``exact``
        reads from ``smaps_rollup`` (milliseconds per process: the page tables are walked)."""
        held = Holdings(processes=len(pids))
        objects: dict[tuple[int, int], int] = {}  # (device, inode) -> bytes, memory
        disk: dict[tuple[int, int], int] = {}
        sandbox_mounts: dict[int, int] = {}  # the sandbox's own tmpfs: device -> bytes used
        shared_memory_mounts: set[int] = set()  # ... those over /dev/shm (memory only, not disk)
        pages = 0
        for pid in pids:
            pages += _private_pages_kb(pid) if exact else _resident_kb(pid)
            held.address_space_mb = max(held.address_space_mb, _virtual_kb(pid) / 1024)
            for dev, ino, size, deleted in _open_and_mapped_files(pid):
                if self.in_memory(dev):
                    objects[(dev, ino)] = size
                elif deleted:  # a named file on disk is the uid's (counted below) or not its writing at all
                    disk[(dev, ino)] = size
            for dev, (used, point) in self._own_tmpfs(pid).items():
                sandbox_mounts[dev] = used
                if point == SHARED_MEMORY:
                    shared_memory_mounts.add(dev)
        if self.uid is None and pids:  # bubblewrap: its own IPC namespace, whoever it runs as
            objects.update(_sysv_bytes_of_namespace(pids[-1]))
        if self.uid is not None:
            owned, held.too_deep = self._owned_files()
            held.files = len(owned)
            for (dev, ino), size in owned.items():
                (objects if self.in_memory(dev) else disk)[(dev, ino)] = size
            objects.update(_sysv_bytes(self.uid))
        for dev in sandbox_mounts:  # counted as a whole below
            for key in [k for k in objects if k[0] == dev]:
                del objects[key]
        held.parts = {"process pages": pages / 1024, "shared-memory objects and files": sum(objects.values()) / (1 << 20),
                      "the sandbox's in-memory folders": sum(sandbox_mounts.values()) / (1 << 20)}
        held.memory_mb = sum(held.parts.values())
        on_disk = sum(used for dev, used in sandbox_mounts.items() if dev not in shared_memory_mounts)
        held.disk_mb = (sum(disk.values()) + on_disk) / (1 << 20)
        return held

    def _own_tmpfs(self, pid: int) -> dict[int, tuple[int, str]]:
        """{device: (bytes used, mount point)} of the in-memory file systems mounted in ``pid``'s
        mount namespace only."""
        used = {}
        for point, (dev, fstype) in _mounts(Path(f"/proc/{pid}/mountinfo")).items():
            if fstype in MEMORY_FILESYSTEMS and dev not in self.host_devices and dev not in used:
                try:  # one open folder for both questions: the path cannot change between them
                    fd = os.open(f"/proc/{pid}/root{point}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    # the mount may have moved since mountinfo was read (bwrap setting up or tearing
                    # down): then the path names another file system, perhaps the host's disk
                    if os.fstat(fd).st_dev != dev:
                        continue
                    vfs = os.fstatvfs(fd)
                except OSError:
                    continue
                finally:
                    os.close(fd)
                used[dev] = ((vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, point)
        return used

    def _owned_files(self) -> tuple[dict[tuple[int, int], int], bool]:
        """Files and folders the uid owns in its folders (it can write nowhere else: the folders
        are its own and every world-writable place of the machine), and everything inside them;
        and whether any lie deeper than MAX_DEPTH."""
        found: dict[tuple[int, int], int] = {}
        too_deep = False
        for folder in self.folders:
            try:
                top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            too_deep |= walk_owned(top, {self.uid}, found)
        return found, too_deep


def walk_owned(top: int, uids: set[int], found: dict[tuple[int, int], int]) -> bool:
    """Add to ``found`` ({(device, inode): allocated bytes}) every file and folder below the folder
    open as ``top`` that one of ``uids`` owns, entering only folders they own; by descriptor (no
    path is ever built, so no length hides a file), depth first, stopping at MAX_FILES entries.
    Closes ``top``. True if some folder lay deeper than MAX_DEPTH (not entered)."""
    too_deep = False
    try:
        stack = [(top, os.scandir(top))]
    except OSError:
        os.close(top)
        return False
    try:
        while stack and len(found) <= MAX_FILES:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                stack.pop()
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid not in uids:
                continue
            found[(st.st_dev, st.st_ino)] = st.st_blocks * 512
            if not stat.S_ISDIR(st.st_mode):
                continue
            if len(stack) > MAX_DEPTH:
                too_deep = True
                continue
            try:
                child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                continue
            try:
                stack.append((child, os.scandir(child)))
            except OSError:
                os.close(child)
    finally:
        for fd, entries in stack:
            entries.close()
            os.close(fd)
    return too_deep


def owned_entries(uids, places: list[Path]):
    """(entry, owner, is a folder) of each file or folder directly in ``places`` owned by one of ``uids``."""
    for place in places:
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid in uids:
                yield entry, st.st_uid, stat.S_ISDIR(st.st_mode)


def _private_pages_kb(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    total = 0
    for line in text.splitlines():
        if line.startswith(("Pss_Anon:", "Pss_File:")):
            total += int(line.split()[1])
    if "Pss_Anon:" not in text:  # an old kernel: all of Pss (shared memory then counts twice at worst)
        total = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")), 0)
    return total


def _resident_kb(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, IndexError, ValueError):
        return 0


def _virtual_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("VmSize:", 1)[1].split()[0]) if "VmSize:" in status else 0
    except (OSError, IndexError, ValueError):
        return 0


def _open_and_mapped_files(pid: int):
    """(device, inode, allocated bytes, deleted) of each regular file ``pid`` holds open, and of each
    shared-memory or deleted file it maps. A model's weights that it reads from a shared read-only
    cache are held open too: only the caller knows which files are its own."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        fds = []
    for fd in fds:
        try:
            st = os.stat(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # pipes, sockets, anonymous inodes
        try:
            deleted = os.readlink(f"{fd_dir}/{fd}").endswith(" (deleted)")
        except OSError:  # a path past PATH_MAX has no link text: the inode still says
            deleted = st.st_nlink == 0
        yield st.st_dev, st.st_ino, st.st_blocks * 512, deleted
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return
    seen = set()
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or fields[4] == "0":
            continue
        path = fields[5]
        if not (path.startswith(("/memfd:", "/dev/shm/", "/SYSV")) or path.endswith("(deleted)")):
            continue
        if path.startswith("/SYSV"):
            continue  # counted from /proc/sysvipc
        if fields[0] in seen:
            continue
        seen.add(fields[0])
        try:
            st = os.stat(f"/proc/{pid}/map_files/{fields[0]}")
        except OSError:
            continue
        yield st.st_dev, st.st_ino, st.st_blocks * 512, path.endswith(" (deleted)")


def sysv_objects(uid: int) -> list[tuple[str, int]]:
    """(kind, id) of every SysV shared memory segment, message queue and semaphore set ``uid``
    owns or created (an owner may hand a segment to another uid; its creator stays)."""
    found = []
    for kind, owner_columns in (("shm", (7, 9)), ("msg", (7, 9)), ("sem", (4, 6))):
        for fields in _sysv_rows(kind):
            try:
                if any(int(fields[c]) == uid for c in owner_columns):
                    found.append((kind, int(fields[1])))
            except (ValueError, IndexError):
                continue
    return found


def _sysv_rows(kind: str) -> list[list[str]]:
    try:
        return [line.split() for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]]
    except OSError:
        return []


_CLONE_NEWIPC = 0x08000000
_libc = None


def _sysv_bytes_of_namespace(pid: int) -> dict[tuple[int, int], int]:
    """Memory in every SysV segment and queue of ``pid``'s IPC namespace (bubblewrap makes one per
    sandbox, which the host's /proc/sysvipc does not show): read from inside it, by this thread
    alone (an IPC namespace is per thread), which then goes back to its own."""
    global _libc
    import ctypes

    try:
        theirs = os.open(f"/proc/{pid}/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return {}
    ours = os.open("/proc/thread-self/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if os.fstat(theirs).st_ino == os.fstat(ours).st_ino:
            return {}
        _libc = _libc or ctypes.CDLL(None, use_errno=True)
        if _libc.setns(theirs, _CLONE_NEWIPC) != 0:
            return {}
        try:
            return _sysv_bytes(None)
        finally:
            if _libc.setns(ours, _CLONE_NEWIPC) != 0:  # never go on in the sandbox's namespace
                os._exit(70)
    finally:
        os.close(theirs)
        os.close(ours)


def _sysv_bytes(uid: int | None) -> dict[tuple[int, int], int]:
    """Memory in ``uid``'s SysV segments (resident and swapped) and queued messages (every uid's: None)."""
    held = {}
    for fields in _sysv_rows("shm"):
        try:
            if uid is None or int(fields[7]) == uid or int(fields[9]) == uid:
                rss_swap = sum(int(x) for x in fields[14:16]) if len(fields) >= 16 else int(fields[3])
                held[(-1, int(fields[1]))] = rss_swap
        except (ValueError, IndexError):
            continue
    for fields in _sysv_rows("msg"):
        try:
            if uid is None or int(fields[7]) == uid or int(fields[9]) == uid:
                held[(-2, int(fields[1]))] = int(fields[3])
        except (ValueError, IndexError):
            continue
    return held
