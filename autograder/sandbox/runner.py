"""Runs inside the grading sandbox: execute a submission's notebook, then the tests, report out.

Started by ``course grade`` as ``python /grading/lib/course_runner.py``. It trusts nothing it
reports: everything here shares the sandbox with the student's code. The grader outside judges
the collected values against golden values that never enter the sandbox.

The conversation with the grader is :mod:`autograder.sandbox.protocol`'s (copied beside this file as
``course_protocol``): cells first, then the test files the grader sends in, one message per test.

Only the standard library, nbformat and nbclient (with its traitlets) are imported here: no otter, no torch.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

try:  # copied into the sandbox beside its protocol (autograder.sandbox.session.runner_library)
    from course_protocol import (SANDBOX_ASSETS, ASSETS_ENV, CELLS_DONE, CHANNEL_ENV, DONE, FONT_LIST_DIR,
                                 FORKSERVER_ENV, JOB_FILE, KERNEL_NAMESPACES, NOTEBOOK, NOTEBOOK_FILE, PUBLIC_CHECK, RUNNER_ERROR,
                                 SANDBOX_SUBMISSION, SUBMISSION_ENV, TEST, TEST_DRIVER_FILE)
except ImportError:  # imported from the package (by the tests)
    from autograder.sandbox.protocol import (SANDBOX_ASSETS, ASSETS_ENV, CELLS_DONE, CHANNEL_ENV, DONE, FONT_LIST_DIR,
                                             FORKSERVER_ENV, JOB_FILE, KERNEL_NAMESPACES, NOTEBOOK, NOTEBOOK_FILE, PUBLIC_CHECK, RUNNER_ERROR,
                                             SANDBOX_SUBMISSION, SUBMISSION_ENV, TEST, TEST_DRIVER_FILE)

SUBMISSION = Path(os.environ.get(SUBMISSION_ENV, SANDBOX_SUBMISSION))
ASSETS = Path(os.environ.get(ASSETS_ENV, SANDBOX_ASSETS))
OUTBOX = Path(tempfile.gettempdir()) / "course-outbox.jsonl"  # the sandbox's own temp folder
MAX_ERROR_CHARS = 300  # an error text the runner passes on (the grader quotes less of it)
PR_SET_DUMPABLE = 4

# Cells that are only a public check or the export: skipped in grading (public checks carry no
# points; otter's grading mode turns the export into a no-op). Nothing a student writes is lost:
# the whole cell must be exactly one such call.
SKIPPED_CELL = re.compile(rf"""({PUBLIC_CHECK}|grader\.check_all\(\)|export_submission\(grader\))""")

# The code the kernel runs for one test file (``templates/test_driver.py.tmpl``, rendered beside
# this file by the grader): one JSON line per test function.
TEST_DRIVER = Path(__file__).with_name(TEST_DRIVER_FILE)


def protect_self() -> None:
    """Other processes of the sandbox (the student's) may not read this one's memory or descriptors."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def skipped(source: str) -> bool:
    return SKIPPED_CELL.fullmatch(source.strip()) is not None


def first_line_of_code(source: str) -> str:
    lines = [line.strip() for line in source.splitlines()]
    return next((line for line in lines if line and not line.startswith("#")), "")


def short(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = "".join(ch if ch.isprintable() or ch == "\n" else "?" for ch in str(text))
    return text[:limit]


def kernel_exit(client) -> str:
    """How the kernel ended, as far as its process tells."""
    try:
        code = client.km.provisioner.process.poll()
    except AttributeError:
        code = None
    if code is None:
        return "the notebook's kernel died"
    if code < 0:
        return f"the notebook's kernel was killed by signal {-code} ({signal.Signals(-code).name})"
    return f"the notebook's kernel exited with code {code} (os._exit or a crash in a cell?)"


class Runner:
    def __init__(self, channel, forkserver: socket.socket | None = None):
        self.channel = channel
        self.forkserver = forkserver
        self.job: dict = {}
        self.outbox_position = 0
        self.values_bytes = 0

    def send(self, message: dict) -> None:
        self.channel.write(json.dumps(message) + "\n")
        self.channel.flush()

    def prepare(self) -> Path:
        job = self.job = json.loads((SUBMISSION / JOB_FILE).read_text())
        workdir = Path.cwd()
        if ASSETS.is_dir():  # data files next to the notebook, as in the student's folder
            for entry in ASSETS.iterdir():
                if not (workdir / entry.name).exists():
                    (workdir / entry.name).symlink_to(entry)
        notebook = workdir / job["notebook_name"]
        shutil.copyfile(SUBMISSION / NOTEBOOK_FILE, notebook)
        profile = Path(os.environ["IPYTHONDIR"]) / "profile_default"
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "ipython_kernel_config.py").write_text('c.IPKernelApp.log_level = "ERROR"\n')
        return notebook

    def run(self) -> None:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import DeadKernelError

        notebook = self.prepare()
        nb = nbformat.read(notebook, as_version=4)
        warm = {"kernel_manager_class": forked_kernel_manager(self.forkserver)} if self.forkserver else {}
        client = NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=None, config=private_kernel_ports(),
                                shutdown_kernel="immediate",
                                resources={"metadata": {"path": str(notebook.parent)}}, **warm)
        first_error, died = None, None
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code" or skipped(cell.source):
                    continue
                try:
                    client.execute_cell(cell, index)
                except DeadKernelError:
                    died = f"{kernel_exit(client)} while running the cell starting {first_line_of_code(cell.source)[:60]!r}"
                    break
                if first_error is None:
                    for output in cell.get("outputs", []):
                        if output.get("output_type") == "error":
                            first_error = {"cell": first_line_of_code(cell.source)[:60], "index": index,
                                           "ename": short(output.get("ename", ""), 80),
                                           "evalue": short(output.get("evalue", ""))}
                            break
            if self.job.get("return_notebook"):
                text, caps = nbformat.writes(nb), self.job["caps"]
                too_large = (len(json.dumps(text)) > caps["graded_notebook_bytes"] if self.job.get("tests_follow")
                             else len(text) > caps["notebook_chars"])
                self.send({"event": NOTEBOOK, "text": None if too_large else text})
            self.send({"event": CELLS_DONE, "first_error": first_error, "kernel_died": died})
            request = sys.stdin.readline()
            files = json.loads(request) if request.strip() else []
            if died is None and files:
                self.run_tests(client, nb, files)
        self.send({"event": DONE})

    def run_tests(self, client, nb, files: list[dict]) -> None:
        from nbclient.exceptions import DeadKernelError

        OUTBOX.write_text("")
        client.execute_cell(self.append(nb, TEST_DRIVER.read_text(encoding="utf-8")), len(nb.cells) - 1)
        for test_file in files:
            cell = self.append(nb, f"__course_run_test_file({test_file['source']!r}, {str(OUTBOX)!r})")
            try:
                client.execute_cell(cell, len(nb.cells) - 1)
            except DeadKernelError:
                self.send({"event": TEST, "question": test_file["question"], "test": None, "passed": False,
                           "error": kernel_exit(client) + " during the tests", "values": self.new_values()})
                return
            reported = False
            for output in cell.get("outputs", []):
                for line in (output.get("text") or "").splitlines():
                    try:
                        outcome = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(outcome, dict) and "test" in outcome:
                        # a name the kernel printed: the grader shows only the names it knows
                        self.send({"event": TEST, "question": test_file["question"],
                                   "test": str(outcome["test"])[:self.job["caps"]["test_name_chars"]],
                                   "passed": outcome.get("passed") is True, "error": short(outcome.get("error", "")),
                                   "values": self.new_values()})
                        reported = True
                if output.get("output_type") == "error":
                    self.send({"event": TEST, "question": test_file["question"], "test": None, "passed": False,
                               "error": short(f"{output.get('ename')}: {output.get('evalue')}"),
                               "values": self.new_values()})
            if not reported:
                self.send({"event": TEST, "question": test_file["question"], "test": None, "passed": False,
                           "error": "the test file reported nothing", "values": self.new_values()})

    @staticmethod
    def append(nb, source: str):
        """A new code cell at the end of the notebook (nbclient writes outputs back by index)."""
        import nbformat

        nb.cells.append(nbformat.v4.new_code_cell(source))
        return nb.cells[-1]

    def new_values(self) -> list:
        """Values collected since the last call, each checked to be a record ``expect`` writes
        (malformed lines skipped; a line over the job's ``value_line_bytes``, or past ``values_bytes``,
        becomes ``{"key", "refused"}``, read no further than its key), so the grader parses only
        flat records of bounded size."""
        values = []
        line_cap, total_cap = self.job["caps"]["value_line_bytes"], self.job["caps"]["values_bytes"]
        try:
            f = open(OUTBOX, "rb")
        except OSError:
            return values
        with f:
            f.seek(self.outbox_position)
            while True:
                line = f.readline(line_cap + 1)
                if not line:
                    break
                size = len(line)
                while not line.endswith(b"\n"):  # over the cap: skip to the end of the line unread
                    rest = f.readline(1 << 20)
                    if not rest:
                        break
                    size += len(rest)
                    line = line[:line_cap + 1] + rest[-1:]
                self.outbox_position += size
                self.values_bytes += size
                if size > line_cap or self.values_bytes > total_cap:
                    key = VALUE_KEY.match(line[:300])
                    if key:
                        values.append({"key": key.group(1).decode("utf-8", "replace"), "refused": size})
                    continue
                record = well_formed(line)
                if record is not None:
                    values.append(record)
        return values


#: The key at the start of an outbox line (``expect`` writes it first), read without parsing the rest.
VALUE_KEY = re.compile(rb'\{"key": "([\w.:/-]{1,200})"')


def well_formed(line: bytes) -> dict | None:
    """The outbox line if it is a record ``expect`` writes, else None: ``{"key", "error"}`` or
    ``{"key", "value"}`` whose value is an encoded array (a flat list of numbers), a string, or a
    list of those. Anything else (nested lists that cost far more to parse than their bytes) is
    dropped here in the sandbox, where parsing costs the submission's memory, not the grader's."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("key"), str):
        return None
    if set(record) == {"key", "error"}:
        return record if isinstance(record["error"], str) else None
    if set(record) != {"key", "value"} or not isinstance(record["value"], dict):
        return None
    value = record["value"]
    items = value.get("items") if value.get("kind") == "values" else [value]
    if not isinstance(items, list) or not all(_encoded(item) for item in items):
        return None
    return record


def _encoded(item) -> bool:
    """Is ``item`` one value as ``helpers.core.golden.encode`` writes it?"""
    if not isinstance(item, dict):
        return False
    if item.get("kind") == "str":
        return isinstance(item.get("value"), str)
    data, shape = item.get("data"), item.get("shape")
    return (item.get("kind") == "array" and isinstance(item.get("dtype"), str) and isinstance(shape, list)
            and isinstance(data, list) and all(isinstance(d, int) for d in shape)
            and all(isinstance(x, (int, float)) for x in data))


#: How long the runner waits for the fork server's kernel before it starts one itself.
FORKSERVER_SECONDS = 60


class ForkedKernel:
    """What jupyter_client asks of a kernel's Popen, for a kernel the fork server started: it is
    not this process's child, so its exit status comes from the server, on the run's socket."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, server: socket.socket):
        self.pid, self.server, self.returncode = pid, server, None

    def _hear(self, timeout: float | None) -> None:
        self.server.settimeout(timeout)
        try:
            data = self.server.recv(4096)
        except (BlockingIOError, TimeoutError, OSError):
            return
        if not data:  # the server is gone: the process itself says whether the kernel is
            if not _alive(self.pid):
                self.returncode = -signal.SIGKILL
            elif timeout:
                time.sleep(timeout)  # no busy wait on a closed socket
            return
        try:
            self.returncode = int(json.loads(data)["exit"])
        except (ValueError, KeyError, TypeError):
            pass

    def poll(self) -> int | None:
        if self.returncode is None:
            self._hear(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        while self.returncode is None:
            self._hear(0.1)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forked_kernel_manager(server: socket.socket):
    """A KernelManager whose kernel the fork server starts warm (torch and friends imported), with
    the command, environment and folder jupyter_client would have started it with. Should the
    server refuse or not answer, the kernel is started the usual way, and the run's output says so."""
    from jupyter_client.manager import AsyncKernelManager  # nbclient's own kind: its client never blocks the loop
    from jupyter_client.provisioning import LocalProvisioner

    class ForkedProvisioner(LocalProvisioner):
        async def launch_kernel(self, cmd, **kwargs):
            env, cwd = kwargs.get("env") or dict(os.environ), str(kwargs.get("cwd") or os.getcwd())
            reply = ask_for_kernel(server, {"argv": list(cmd), "env": dict(env), "cwd": cwd})
            if "pid" not in reply:
                server.close()  # a server that answers late forks nothing: its child cannot tell this runner
                print(f"course runner: no warm kernel ({reply.get('error', 'no answer')}); starting one",
                      file=sys.stderr, flush=True)
                return await super().launch_kernel(cmd, **kwargs)
            self.process = ForkedKernel(int(reply["pid"]), server)
            self.pid = self.pgid = self.process.pid  # the kernel leads a session of its own
            self.cwd = cwd
            return self.connection_info

    class ForkedKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            if self.provisioner is None:
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(__import__("uuid").uuid4())
                self.provisioner = ForkedProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
            return await super()._async_pre_start_kernel(**kw)

    return ForkedKernelManager


def ask_for_kernel(server: socket.socket, request: dict) -> dict:
    """Send the fork server the kernel's request (with its stdin, this runner's stdout and stderr,
    and this runner's namespaces, which the kernel joins) and return its answer: ``{"pid"}``, or
    ``{"error"}``."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    namespaces = []
    try:
        namespaces = [os.open(f"/proc/self/ns/{name}", os.O_RDONLY) for name in KERNEL_NAMESPACES]
        socket.send_fds(server, [json.dumps(request).encode()], [devnull, 1, 2, *namespaces])
        server.settimeout(FORKSERVER_SECONDS)
        data = server.recv(4096)
        return json.loads(data) if data else {"error": "the fork server closed the run's socket"}
    except (OSError, ValueError) as err:
        return {"error": f"{type(err).__name__}: {err}"}
    finally:
        for fd in [devnull, *namespaces]:
            os.close(fd)
        server.settimeout(None)


def private_kernel_ports():
    """The kernel's messaging sockets as Unix sockets in a folder only this uid can open: where
    there is no network namespace, TCP ports on localhost would let a concurrent submission listen
    to this kernel's output, or talk to it."""
    from traitlets.config import Config

    folder = Path(tempfile.gettempdir()) / "kernel-sockets"
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(folder / "kernel")
    return config


def private_folders() -> None:
    """IPython, Jupyter and matplotlib keep their state in the sandbox's own temp folder. matplotlib's
    starts with the grader's font list: without one, importing pyplot scans every system font (4 to 6
    s per submission)."""
    tmp = tempfile.gettempdir()
    for name, sub in (("IPYTHONDIR", "ipython"), ("JUPYTER_RUNTIME_DIR", "jupyter"), ("MPLCONFIGDIR", "matplotlib")):
        os.environ.setdefault(name, os.path.join(tmp, sub))
    fonts = Path(__file__).with_name(FONT_LIST_DIR)
    if fonts.is_dir():
        matplotlib_dir = Path(os.environ["MPLCONFIGDIR"])
        matplotlib_dir.mkdir(parents=True, exist_ok=True)
        for font_list in fonts.glob("fontlist-*.json"):
            shutil.copyfile(font_list, matplotlib_dir / font_list.name)


def main() -> int:
    protect_self()
    private_folders()
    fd = int(os.environ.pop(CHANNEL_ENV))
    os.set_inheritable(fd, False)  # the kernel must not inherit the way out
    forkserver = None
    if FORKSERVER_ENV in os.environ:  # kernels start warm, from the fork server (also not inherited)
        forkserver = socket.socket(fileno=int(os.environ.pop(FORKSERVER_ENV)))
        forkserver.set_inheritable(False)
    with os.fdopen(fd, "w", encoding="utf-8") as channel:
        runner = Runner(channel, forkserver)
        try:
            runner.run()
        except Exception as err:  # the runner's own failure, reported rather than swallowed
            runner.send({"event": RUNNER_ERROR, "error": short(f"{type(err).__name__}: {err}")})
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
