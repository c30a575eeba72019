"""Kernels started warm: a process with torch, numpy, matplotlib and ipykernel already imported
forks each submission's kernel, which then enters that submission's sandbox.

Importing those takes 1 to 3 s of every sealed submission (``benchmarks/submission_time.py``); a
fork takes milliseconds. Three parties:

- the grader (:class:`ForkServer`) starts the server once per grading run, as a fresh program (not
  a fork of the grader: nothing the grader holds, golden values or results, is in its memory), as
  the grader's own user (root under POSIX separation and for a root grader's bubblewrap). For each
  run it hands the server one end of a socket pair with what the run is (:meth:`ForkServer.register`:
  the sandbox's first process, its uid outside and the ids it has inside, its control groups); the
  other end goes to the runner alone, as the channel does (the runner is undumpable and the kernel
  does not inherit it);
- the runner asks for its kernel once on its end (``course_runner``'s provisioner), sending the
  kernel's command, environment and folder, its streams, and its own namespaces (as descriptors);
- the server forks a child per request, and only one per run. The child joins the run's control
  groups, takes its resource limits (or the server's where those are lower), drops supplementary
  groups (as root), joins the runner's namespaces (for bubblewrap, first the user namespace that owns
  them, then the runner's own), becomes the run's uid and gid with no capabilities and no_new_privs,
  and, where the run has a PID namespace of its own, forks the kernel into it; only then is the
  request parsed. The kernel is a process of the run like any other: counted, limited and killed
  with it.

Nothing here but the standard library at import: the server runs as a script copied into the
grading library (``course_forkserver.py``), and the grader imports it as a module.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

#: What the server imports before it forks anything: what every notebook's first cell imports.
PRELOADED = ("numpy", "torch", "torch.nn.functional", "matplotlib", "matplotlib.pyplot", "psutil",
             "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel")
#: Imported too once the grader says the run's assignment loads the bundled pretrained models
#: (:meth:`ForkServer.preload_models`): the code helpers.core.models loads them with, about 3 s of a
#: kernel's start. Hugging Face reads its cache's place from the environment as it loads; the runs'
#: environment fixes it (protocol.sandbox_environment), so the server's copy says what each kernel's would.
MODEL_CODE = ("transformers", "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
              "transformers.models.bert.modeling_bert", "transformers.models.bert.tokenization_bert",
              "transformers.models.llama.modeling_llama")
#: Largest request the child reads (the kernel's command, environment and folder).
MAX_REQUEST = 1 << 16
READY = b"ready\n"
#: Most descriptors a request brings: three streams and seven namespaces.
MAX_DESCRIPTORS = 10
#: Largest note the grader sends about a run.
MAX_NOTE = 1 << 14

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 4, 38, 24
NS_GET_USERNS, NS_GET_OWNER_UID = 0xB701, 0xB704
_CLONE_FLAGS = {"user": 0x10000000, "mnt": 0x00020000, "pid": 0x20000000, "net": 0x40000000, "ipc": 0x08000000,
                "uts": 0x04000000, "cgroup": 0x02000000}
#: Every capability number there could be (the bounding set is emptied up to it).
_LAST_CAP = 63


# ---------------------------------------------------------------------------------------------
# The grader's side


class ForkServer:
    """The server of one grading run: :meth:`start`, :meth:`register` each run, :meth:`close`."""

    def __init__(self, python: str, script: Path, env: dict[str, str]):
        self.python, self.script, self.env = python, script, env
        self.proc: subprocess.Popen | None = None
        self.control: socket.socket | None = None

    def start(self) -> "ForkServer":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # -I: the server's path is the venv's alone (the kernel builds the run's path itself)
            self.proc = subprocess.Popen([self.python, "-I", str(self.script), str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True, cwd=self.env.get("HOME"))
        finally:
            theirs.close()
        self.control = ours
        return self

    def wait_ready(self, seconds: float = 120.0) -> bool:
        """Has the server finished its imports (it says so once)? False if it died or took too long."""
        self.control.settimeout(seconds)
        try:
            return self.control.recv(len(READY)) == READY
        except OSError:
            return False
        finally:
            self.control.settimeout(None)

    def preload_models(self) -> None:
        """Have the server import :data:`MODEL_CODE` before it forks the next kernel (once is enough).
        Raises OSError if the server is gone."""
        self.control.send(json.dumps({"preload": "models"}).encode())

    @staticmethod
    def pair() -> tuple[socket.socket, socket.socket]:
        """(the runner's end, the server's end) of a new run's socket pair: the runner's is passed
        to the sandbox's first process, the server's to :meth:`register` once that process exists."""
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def register(self, server_end: socket.socket, pid: int, uid: int, become: tuple[int, int], group_procs: list[str],
                 namespaces: tuple[str, ...]) -> None:
        """Hand the server its end of a run's pair: it will fork one kernel into the run whose
        first process is ``pid`` (run by ``uid``; it becomes the runner), in the control groups whose
        ``cgroup.procs`` files are ``group_procs``, in the ``namespaces`` the runner sends (their
        names, in the order it sends them), as the uid and gid ``become`` (as that user namespace
        sees them). Raises OSError if the server is gone."""
        note = json.dumps({"pid": pid, "uid": uid, "become": list(become), "groups": group_procs,
                           "namespaces": list(namespaces), "drop_groups": os.geteuid() == 0}).encode()
        socket.send_fds(self.control, [note], [server_end.fileno()])

    def close(self) -> None:
        if self.control is not None:
            self.control.close()  # end of file: the server exits
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------------------------
# The server (the grader's user; never runs a submission's code)


def serve(control: socket.socket) -> None:
    """Preload, say so, then fork a kernel for each run that asks, and tell the run its exit status."""
    for name in PRELOADED:
        __import__(name)
    control.sendall(READY)
    selector = selectors.DefaultSelector()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *args: None)  # the wake-up fd carries it
    selector.register(control, selectors.EVENT_READ, "control")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    waiting: dict[int, tuple[socket.socket, dict]] = {}  # fd -> (a run's end, its registration)
    kernels: dict[int, socket.socket] = {}  # pid of a forked kernel -> its run's end
    while True:
        for key, _ in selector.select():
            try:
                _handle(key, control, selector, wake_r, waiting, kernels)
            except _GraderGone:
                return
            except Exception:  # one run's trouble (a failed fork, a malformed note): that run starts cold
                if isinstance(key.fileobj, socket.socket) and key.fileobj is not control:
                    waiting.pop(key.fd, None)
                    try:
                        selector.unregister(key.fileobj)
                    except (KeyError, ValueError):
                        pass
                    key.fileobj.close()


class _GraderGone(Exception):
    pass


def _import_model_code() -> None:
    for name in MODEL_CODE:
        try:
            __import__(name)
        except ImportError:  # not installed here: each kernel finds out for itself
            return


def _handle(key, control, selector, wake_r, waiting, kernels) -> None:
    """One event of the server's loop."""
    if key.data == "control":
        try:
            note, fds, _, _ = socket.recv_fds(control, MAX_NOTE, 1)
        except OSError:
            note, fds = b"", []
        if not note:  # the grader is done or gone
            raise _GraderGone
        message = json.loads(note)
        if message.get("preload") == "models" and not fds:
            _import_model_code()
            return
        run_end = socket.socket(fileno=fds[0])
        waiting[run_end.fileno()] = (run_end, message)
        selector.register(run_end, selectors.EVENT_READ, "run")
    elif key.data == "child":
        os.read(wake_r, 4096)
        _reap(kernels, selector)
    elif key.data == "run":  # a runner asks for its kernel, or its end closed
        run_end, run = waiting.pop(key.fd)
        selector.unregister(run_end)
        try:  # read here, as bytes; the child parses it once it is the run's uid
            asked = socket.recv_fds(run_end, MAX_REQUEST, MAX_DESCRIPTORS)
        except OSError:
            asked = (b"", [], 0, None)
        if not asked[0] and not asked[1]:
            run_end.close()
            return
        if len(asked[1]) != 3 + len(run["namespaces"]):  # its three streams and its namespaces
            for fd in asked[1]:
                os.close(fd)
            _tell(run_end, {"error": "a request brings the kernel's three streams and the runner's namespaces"})
            run_end.close()
            return
        pid = os.fork()
        if pid == 0:  # the child never returns into this loop, whatever happens
            code = 72
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                code = become_kernel(run_end, run, asked)
            except BaseException:
                traceback.print_exc()  # on the run's stderr once the kernel has its streams
            finally:
                os._exit(code)
        for fd in asked[1]:
            os.close(fd)
        kernels[pid] = run_end
        selector.register(run_end, selectors.EVENT_READ, ("forked", pid))
    else:  # a run that has its kernel asks again: refused (one kernel per run)
        pid, run_end = key.data[1], key.fileobj
        try:
            data, fds, _, _ = socket.recv_fds(run_end, MAX_REQUEST, MAX_DESCRIPTORS)
            again = bool(data) or bool(fds)
            for fd in fds:
                os.close(fd)
        except OSError:
            again = False
        if again:
            _tell(run_end, {"error": "a run gets one kernel"})
        else:  # the runner let go: nobody to tell how the kernel ends
            selector.unregister(run_end)
            run_end.close()
            kernels.pop(pid, None)


def _reap(kernels: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    """Collect every kernel that ended and send its run the status (as ``Popen.returncode`` says it)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        run_end = kernels.pop(pid, None)
        if run_end is not None:
            _tell(run_end, {"exit": os.waitstatus_to_exitcode(status)})
            selector.unregister(run_end)
            run_end.close()


def become_kernel(run_end: socket.socket, run: dict, asked: tuple) -> int:
    """In the forked child: enter the run's sandbox, then read the request and run the kernel.
    Returns an exit code; never returns into the server's loop. Where the run has a PID namespace
    of its own, the kernel is forked once more, into it, and this process waits for it and ends
    as it ends (the server tells the runner)."""
    streams, namespaces = asked[1][:3], asked[1][3:]
    try:
        keep = sorted({run_end.fileno(), *asked[1]})
        ceiling = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        ceiling = 1 << 20 if ceiling == resource.RLIM_INFINITY else ceiling
        for low, high in zip([2, *keep], [*keep, ceiling]):
            os.closerange(low + 1, high)
        new_pid_namespace = enter_sandbox(run, namespaces)
    except Exception as err:  # refused: the runner hears why and starts no kernel
        _tell(run_end, {"error": f"the kernel could not enter the sandbox: {type(err).__name__}: {err}"})
        return 70
    # from here on: the run's uid, nothing privileged left
    if new_pid_namespace and os.fork() != 0:
        run_end.close()
        for fd in asked[1]:
            os.close(fd)
        _, status = os.waitpid(-1, 0)
        if os.WIFSIGNALED(status):  # end as the kernel ended, for the runner's message
            if os.WTERMSIG(status) not in (signal.SIGKILL, signal.SIGSTOP):  # (those two have no handler)
                signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        return os.waitstatus_to_exitcode(status)
    for fd in namespaces:
        os.close(fd)
    try:
        check_dropped(run)
        request = _parse_request(asked[0], asked[2])
        for target, fd in zip((0, 1, 2), streams):
            os.dup2(fd, target)
        for fd in streams:
            if fd > 2:
                os.close(fd)
        run_end.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")  # a runner that gave up gets no kernel
    except OSError:
        return 73
    except Exception as err:
        _tell(run_end, {"error": f"the kernel's request was refused: {type(err).__name__}: {err}"})
        return 71
    run_end.close()  # the kernel keeps no way to the runner or to this server
    os.umask(0o022)  # as the seal's launcher sets it
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the server ignores it; a kernel must not
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # as an exec'd kernel is (its uid drop made it undumpable)
    return run_kernel(request)


def _tell(run_end: socket.socket, message: dict) -> None:
    try:
        run_end.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass


def enter_sandbox(run: dict, namespaces: list[int]) -> bool:
    """Become a process of the run whose first process is ``run["pid"]`` (outside its namespaces,
    as ``run["uid"]``): its control groups, resource limits, the namespaces the runner sent
    (``namespaces``, descriptors in the order of ``run["namespaces"]``), and the uid and gid it has
    there (``run["become"]``), with no capabilities and no_new_privs. Returns whether the run has a
    PID namespace of its own (the kernel must then be forked into it). Where this server is root,
    it drops its supplementary groups too; where it is not (bubblewrap as a normal user), the
    sandbox keeps the user's, as bubblewrap itself does."""
    pid, uid = int(run["pid"]), int(run["uid"])
    inside_uid, inside_gid = (int(i) for i in run["become"])
    if 0 in (uid, inside_uid, inside_gid):
        raise PermissionError("a kernel never runs as root")
    names = list(run["namespaces"])
    if len(namespaces) != len(names) or not set(names) <= set(_CLONE_FLAGS):
        raise ValueError("the runner sent the wrong namespaces")
    given = dict(zip(names, namespaces))
    joined = [(name, fd) for name, fd in given.items() if os.fstat(fd).st_ino != os.stat(f"/proc/self/ns/{name}").st_ino]
    new_user = any(name == "user" for name, _ in joined)
    status = _status(pid)
    if status.get("Uid", "").split() != [str(uid)] * 4 or (not new_user and status.get("NoNewPrivs") != "1"):
        raise PermissionError(f"process {pid} is not the run's runner")
    if new_user and _namespace_owner(given["user"]) != uid:
        raise PermissionError("the runner's user namespace is not the run's")
    limits = _limits_of(pid)
    if _status(pid).get("Uid", "").split() != [str(uid)] * 4:  # still the run's (its pid was not reused)
        raise PermissionError(f"process {pid} ended")
    root = os.geteuid() == 0
    with _step("a session of its own"):
        os.setsid()
    with _step("the run's control groups"):
        for procs in run["groups"]:  # while root: the group files are root's
            Path(procs).write_text(str(os.getpid()))
    with _step("oom_score_adj"):
        Path("/proc/self/oom_score_adj").write_text("1000")  # the submission's processes die first
    with _step("the run's resource limits"):  # its own, or this server's where they are lower
        for which, pair in limits.items():
            resource.setrlimit(which, tuple(map(_lower, pair, resource.getrlimit(which))))
    if root:
        with _step("no supplementary groups"):  # before a user namespace, which may deny setgroups
            os.setgroups([])
    # The user namespace that owns the run's other namespaces first (bubblewrap nests the runner's own
    # inside it when it changes the uid), then those, then the runner's own user namespace.
    current_user = os.stat("/proc/self/ns/user").st_ino  # (after the mount namespace, /proc is the run's)
    if new_user:
        with _step("the user namespace of the run's namespaces"):
            owner = fcntl.ioctl(given["mnt"], NS_GET_USERNS)
            try:
                if _namespace_owner(owner) != uid:
                    raise PermissionError("the run's namespaces belong to another user")
                if os.fstat(owner).st_ino != current_user:
                    _setns(owner, "user")
                    current_user = os.fstat(owner).st_ino
            finally:
                os.close(owner)
    for name, fd in joined:
        if name != "user":
            with _step(f"the run's {name} namespace"):
                _setns(fd, name)
    if new_user and os.fstat(given["user"]).st_ino != current_user:
        with _step("the runner's user namespace"):
            _setns(given["user"], "user")
    with _step("dropping privileges"):
        for cap in range(_LAST_CAP + 1):  # past the kernel's last one: refused, harmlessly
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        os.setresgid(inside_gid, inside_gid, inside_gid)
        os.setresuid(inside_uid, inside_uid, inside_uid)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        _clear_capabilities()
    if os.getresuid() != (inside_uid,) * 3 or os.getresgid() != (inside_gid,) * 3:
        raise PermissionError("the uid or gid did not change")
    return any(name == "pid" for name, _ in joined)


def check_dropped(run: dict) -> None:
    """Nothing privileged is left (read from /proc/self, which, after a PID namespace was joined,
    only the process forked into it sees)."""
    inside_uid, inside_gid = (int(i) for i in run["become"])
    mine = _status("self")
    if (mine["Uid"].split() != [str(inside_uid)] * 4 or mine["Gid"].split() != [str(inside_gid)] * 4
            or (run.get("drop_groups") and mine["Groups"])
            or any(int(mine[c], 16) for c in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
            or mine["NoNewPrivs"] != "1"):
        raise PermissionError("privileges left after the drop")


def _setns(fd: int, name: str) -> None:
    if _libc.setns(fd, _CLONE_FLAGS[name]) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _namespace_owner(fd: int) -> int:
    """The uid that owns a user namespace (ioctl NS_GET_OWNER_UID)."""
    import array

    owner = array.array("I", [0])
    fcntl.ioctl(fd, NS_GET_OWNER_UID, owner, True)
    return owner[0]


@contextmanager
def _step(what: str):
    """Name the step that failed in the error the runner hears."""
    try:
        yield
    except OSError as err:
        raise OSError(err.errno, f"{what}: {err.strerror or err}") from None


def _limits_of(pid: int) -> dict[int, tuple[int, int]]:
    """Another process's resource limits, from ``/proc/PID/limits`` (prlimit(2) would ask for
    CAP_SYS_RESOURCE, which a container's root lacks): its rows are the limits in their numbering."""
    known = {getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")}
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    if len(rows) <= max(known):
        raise OSError(0, f"/proc/{pid}/limits has {len(rows)} limits, expected {max(known) + 1}")
    limits = {}
    for which in sorted(known):
        soft, hard = rows[which][26:47].strip(), rows[which][47:68].strip()
        limits[which] = tuple(resource.RLIM_INFINITY if v == "unlimited" else int(v) for v in (soft, hard))
    return limits


def _lower(a: int, b: int) -> int:
    return b if a == resource.RLIM_INFINITY else a if b == resource.RLIM_INFINITY else min(a, b)


def _status(pid: int | str) -> dict[str, str]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields


def _clear_capabilities() -> None:
    """Empty the inheritable set too (setuid leaves it), as ``setpriv --inh-caps=-all`` does."""
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = ctypes.create_string_buffer(24)  # two {effective, permitted, inheritable}, all empty
    if _libc.capset(ctypes.c_char_p(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _parse_request(data: bytes, flags: int) -> dict:
    """The runner's request: one message, a JSON object (its streams and namespaces came with it)."""
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        raise ValueError(f"a request is at most {MAX_REQUEST} bytes with its descriptors")
    request = json.loads(data)
    if not isinstance(request, dict) or not isinstance(request.get("argv"), list) or not isinstance(request.get("env"), dict):
        raise ValueError("expected the kernel's argv, env and cwd")
    return request


def run_kernel(request: dict) -> int:
    """Turn this process into the kernel an exec of ``request["argv"]`` would have started:
    its environment, folder and module path, then ipykernel's app in this process."""
    import importlib
    import random
    import tempfile

    env = {str(k): str(v) for k, v in request["env"].items()}
    env["JPY_PARENT_PID"] = str(os.getppid() or 1)  # the kernel ends with its parent (this server), not the runner
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request.get("cwd") or env.get("HOME", "/"))
    tempfile.tempdir = None  # the run's TMPDIR, not the server's
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))  # the server ran with -I
    base = [p for p in sys.path if p and p != os.path.dirname(os.path.abspath(__file__))]
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *base]
    importlib.invalidate_caches()
    random.seed()  # a fresh process's own randomness, not the server's copy
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()
    import matplotlib
    for cached in (matplotlib.get_configdir, matplotlib.get_cachedir):  # the run's MPLCONFIGDIR
        getattr(cached, "cache_clear", lambda: None)()
    # torch's threads are left alone: a fresh process picks them at its first parallel operation, from
    # the thread settings the server started with (the pool's, which every run gets), and MKL caps them
    # at the cores. Setting the count here took 16 threads on 2 cores where an exec'd kernel took 2.
    argv = [str(a) for a in request["argv"]]
    module_at = argv.index("-m") + 2 if "-m" in argv else 1
    sys.argv = [argv[0], *argv[module_at:]]
    from ipykernel.kernelapp import IPKernelApp

    # its default was read in the server; in a PID namespace of its own the parent is out of sight (0):
    # 1 means no poller (the namespace ends with the run)
    app = IPKernelApp.instance(parent_handle=os.getppid() or 1)
    app.initialize(sys.argv[1:])
    backend = env.get("MPLBACKEND", "")
    if "matplotlib_inline" in backend:  # figures shown after each cell: hooked into the shell, which exists now
        app.shell.enable_matplotlib(backend)
    elif backend and matplotlib.get_backend().lower() != backend.lower():
        import matplotlib.pyplot as plt
        plt.switch_backend(backend)
    try:
        app.start()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the grader, which closes this
    control = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(control)
    finally:
        control.close()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # nothing is left to clean up: the interpreter's teardown of torch took about a second
