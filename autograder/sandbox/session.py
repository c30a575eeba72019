"""The sandboxes of one run of ``course grade``, ``course pdf`` or the Gradescope autograder.

:class:`SandboxPool` starts the seal this machine allows (:func:`autograder.sandbox.choose.open_seal`),
reads each autograder zip once, and runs a submission's notebook in a fresh sandbox: with the
tests sent in after its cells (:meth:`SandboxPool.grade`, judged by :mod:`autograder.judge.verdicts`), or
without them, for its outputs (:meth:`SandboxPool.execute`, for ``course pdf``). What the sandbox
is told and what it answers is :mod:`autograder.sandbox.protocol`.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from helpers.core import contract
from helpers.core.contract import MODEL_CACHE_ENV
from helpers.core.measures import modules_for
from helpers.core.models import model_cache_dir

from autograder.autograder_zip import Autograder, open_up
from autograder.judge.verdicts import run_status, verdict
from autograder.sandbox import protocol
from autograder.sandbox import forkserver
from autograder.sandbox.forkserver import ForkServer
from autograder.sandbox.protocol import (ASSETS_ENV, CELLS_DONE, CONTRACT_FILE, FONT_LIST_DIR, FORKSERVER_FILE, JOB_FILE, NOTEBOOK,
                       NOTEBOOK_FILE, PROTOCOL_FILE, RUNNER_FILE, SANDBOX_ASSETS, SANDBOX_LIB, SANDBOX_MODELS,
                       SANDBOX_SUBMISSION, SUBMISSION_ENV, TEST_DRIVER_FILE)
from autograder.limits import RUNNER_CAPS, SandboxLimits, runner_caps, threads_per_job, usable_cores
from autograder.sandbox.choose import close_seal, open_seal
from autograder.sandbox.seal import SandboxRun, SandboxUnavailable, grading_temp_base
from autograder.templates import render

RUNNER = Path(__file__).with_name("runner.py")
#: Module names that are replaced inside the sandbox by a stub that refuses to import.
#: rfc3987_syntax builds a parser grammar at import (1.3 s, in the runner and again in the kernel)
#: for a URI format check that validating a notebook never uses; jsonschema skips it when absent.
SLOW_OPTIONAL_IMPORTS = ("rfc3987_syntax",)
#: Where a grading run keeps its shared files (under a temp folder the sandbox's uid can traverse).
WORKSPACE_PREFIX = "course-grade-"
#: Set to 0 to start every kernel the usual way (an exec'd Python) instead of from the fork server.
WARM_KERNELS_ENV = "COURSE_WARM_KERNELS"


def runner_library(folder: Path) -> Path:
    """The read-only /grading/lib: the runner with its protocol, the helpers' contract and its test
    driver, the otter stand-in, stubs of slow optional imports, and matplotlib's font list."""
    lib = folder / "lib"
    (lib / "otter").mkdir(parents=True, exist_ok=True)
    for source, name in ((RUNNER, RUNNER_FILE), (Path(protocol.__file__), PROTOCOL_FILE),
                         (Path(contract.__file__), CONTRACT_FILE), (Path(forkserver.__file__), FORKSERVER_FILE)):
        shutil.copyfile(source, lib / name)
    # what ``import otter`` gives the notebook: its grader object does nothing while grading (the
    # grader runs the tests itself, as otter's grading mode does; the real otter costs a second to import)
    (lib / "otter" / "__init__.py").write_text(render("otter_stand_in.py.tmpl"))
    (lib / TEST_DRIVER_FILE).write_text(render("test_driver.py.tmpl", golden_mode_env=contract.GOLDEN_MODE_ENV,
                                               golden_outbox_env=contract.GOLDEN_OUTBOX_ENV))
    for module in SLOW_OPTIONAL_IMPORTS:
        (lib / f"{module}.py").write_text(f'raise ImportError("{module} is left out of the grading sandbox")\n')
    write_font_list(lib / FONT_LIST_DIR)
    open_up(lib)
    return lib


def write_font_list(folder: Path) -> None:
    """matplotlib's font list as the grader's matplotlib knows it (read from its own cache), for the
    runner to hand each kernel: it is the same venv and the same system fonts. A font the sandbox
    cannot see makes matplotlib rebuild the list there, which is only slower."""
    from matplotlib import font_manager

    folder.mkdir(exist_ok=True)
    font_manager.json_dump(font_manager.fontManager, folder / f"fontlist-v{font_manager.FontManager.__version__}.json")


def executed_notebook(run: SandboxRun) -> str | None:
    """The executed notebook's text the runner sent, if it came before the cells-done event: only
    then had no test entered the sandbox (a later one could hold a hidden test's text)."""
    for message in run.messages:
        if message.get("event") == CELLS_DONE:
            return None
        if message.get("event") == NOTEBOOK and isinstance(message.get("text"), str):
            return message["text"]
    return None


class SandboxPool:
    """It finds a temp folder the sandbox's user can reach whatever ``TMPDIR`` is, starts the seal
    (bubblewrap, else POSIX separation as root; a root grader's runs each get a fresh uid), and
    runs notebooks in it. ``private`` lists what a POSIX-separated submission must not be able to
    read (golden values, masters, results, other submissions): the pool refuses to start, saying
    what to fix, if any of it is world-readable.
    """

    def __init__(self, jobs: int = 2, *, threads: int | None = None, mode: str | None = None,
                 private: list[Path] = (), warm_judge: bool = False):
        self.jobs = max(1, jobs)
        # load what the judge's measures import (torch, a course helper) while the first sandbox runs;
        # not on Gradescope, where the grader and the submission share the container's memory
        self.warm_judge = warm_judge
        self.threads = threads or threads_per_job(self.jobs)
        # more threads than cores (REFERENCE_THREADS in the suite, or --jobs above the cores): idle ones sleep
        self.shared_cores = self.jobs * self.threads > usable_cores()
        self.mode, self.private = mode, list(private)
        self.seal = None
        self._forkserver: ForkServer | None = None
        self._models_preloaded = False
        self._autograders: dict[Path, Autograder] = {}
        self._lock = threading.Lock()

    def start(self) -> "SandboxPool":
        base = grading_temp_base()
        remove_stale_workspaces(base)
        self.workspace = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-", dir=base))
        self.workspace.chmod(0o711)  # the sandboxes' uids pass through to what is shared with them
        try:
            self.lib = runner_library(self.workspace)
            forkserver = self._start_forkserver()  # it imports while the seal is opened and checked
            staging = self.workspace / "staging"
            staging.mkdir()
            staging.chmod(0o711)  # explicit: a grader's umask of 077 must not lock the sandboxes out
            self.seal = open_seal(staging, Path(sys.executable), self.mode, self.jobs)
            self.seal.require_private(self.private)
            self.seal.forkserver = forkserver
        except BaseException:
            self.close()
            raise
        return self

    def _start_forkserver(self) -> ForkServer | None:
        """Kernels start warm from a fork server (:mod:`autograder.sandbox.forkserver`), with the runs'
        thread settings and a home of its own (None where ``$COURSE_WARM_KERNELS`` is 0)."""
        if os.environ.get(WARM_KERNELS_ENV, "1") == "0":
            return None
        home = self.workspace / "forkserver"
        (home / "tmp").mkdir(parents=True)
        home.chmod(0o700)
        fonts = home / "matplotlib"
        shutil.copytree(self.lib / FONT_LIST_DIR, fonts)
        env = protocol.sandbox_environment(str(Path(sys.executable).parent), self.threads, shared_cores=self.shared_cores)
        env.update({"HOME": str(home), "TMPDIR": str(home / "tmp"), "MPLCONFIGDIR": str(fonts),
                    "IPYTHONDIR": str(home / "ipython")})
        self._forkserver = ForkServer(sys.executable, self.lib / FORKSERVER_FILE, env).start()
        return self._forkserver

    @property
    def description(self) -> str:
        """Which seal grades and how it counts memory, for the results and the log."""
        seal = getattr(self.seal, "description", getattr(self.seal, "mode", "none"))
        return f"{seal}; {self.seal.counting}" if self.seal is not None else seal

    @property
    def unseen_memory_note(self) -> str | None:
        """A warning when memory no /proc reading shows goes uncounted: no control group, several jobs."""
        if self.seal is not None and self.seal.cgroups is None and self.jobs > 1:
            return ("note: no control group can be made here, so with several jobs at once memory held in socket "
                    "buffers or files in flight is bounded per process only; --jobs 1 counts it "
                    "(docs/instructors/security.md)")
        return None

    def close(self) -> None:
        if self._forkserver is not None:
            self._forkserver.close()
        shutil.rmtree(self.workspace, ignore_errors=True)
        close_seal(self.seal)  # the uids are free for another grader

    def __enter__(self) -> "SandboxPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def autograder(self, zip_path: Path) -> Autograder:
        """The autograder zip (or unpacked folder), read once per run."""
        with self._lock:
            if zip_path not in self._autograders:
                folder = self.workspace / f"autograder{len(self._autograders)}"
                self._autograders[zip_path] = Autograder.load(zip_path, folder)
                if self.warm_judge:
                    warm_up(modules_for(self._autograders[zip_path].golden.values()))
            return self._autograders[zip_path]

    def grade(self, autograder: Autograder, notebook_text: str, limits: SandboxLimits, *,
              keep_notebook: bool = False) -> tuple[dict, str | None]:
        """Grade one submission (its notebook's text): (a result dict, always; with ``keep_notebook``,
        the executed notebook's text, as it was before the tests went in, or None)."""
        run = self._run(autograder, notebook_text, limits, tests=autograder.sources, return_notebook=keep_notebook)
        return {**verdict(run, autograder, limits), "sandbox": self.description}, executed_notebook(run)

    def execute(self, autograder: Autograder, notebook_text: str, limits: SandboxLimits) -> tuple[str | None, str]:
        """Run a notebook's cells as grading does, without tests: (the executed notebook's text or
        None, what went wrong if anything)."""
        run = self._run(autograder, notebook_text, limits, tests=[], return_notebook=True)
        text = executed_notebook(run)
        _, problem = run_status(run, limits)
        if text is None and not problem:
            problem = f"the sandbox did not send the executed notebook back (larger than {RUNNER_CAPS.notebook_chars >> 20} MiB?)"
        return text, problem

    def _run(self, autograder: Autograder, notebook_text: str, limits: SandboxLimits, *, tests: list[dict],
             return_notebook: bool) -> SandboxRun:
        """Run a notebook's cells in a sandbox, then ``tests`` (sent in only after the cells ran)."""
        if autograder.loads_pretrained_models:
            self._preload_models()
        submission = Path(tempfile.mkdtemp(prefix="submission-", dir=self.workspace))
        try:
            (submission / NOTEBOOK_FILE).write_text(notebook_text, encoding="utf-8")
            (submission / JOB_FILE).write_text(json.dumps(protocol.job(autograder.notebook_name, return_notebook, runner_caps(),
                                                                      tests_follow=bool(tests))))
            with self.seal.lease() as uid:  # a fresh uid: nothing of an earlier run is left under it
                self.seal.grant(submission, uid)  # this run's uid reads it; the others do not
                argv, binds, env = self._command(autograder, submission, return_notebook)
                return self.seal.run(argv, binds=binds, env=env, uid=uid, limits=limits,
                                     after_cells=(json.dumps(tests) + "\n").encode("utf-8"))
        finally:
            shutil.rmtree(submission, ignore_errors=True)

    def _preload_models(self) -> None:
        """Once: the fork server imports the models' code, so that its kernels start with it."""
        with self._lock:
            if self._forkserver is None or self._models_preloaded:
                return
            self._models_preloaded = True
            try:
                self._forkserver.preload_models()
            except OSError:  # the server is gone: kernels start cold, as they do without it
                pass

    def _command(self, autograder: Autograder, submission: Path, return_notebook: bool) -> tuple[list, list, dict]:
        """(argv, binds, env) of the runner: paths as the sandbox shows them."""
        seal = self.seal
        binds = [(self.lib, SANDBOX_LIB), (autograder.assets, SANDBOX_ASSETS), (submission, SANDBOX_SUBMISSION)]
        seen = {dest: seal.inside(host, dest) for host, dest in binds}
        env = protocol.sandbox_environment(str(Path(sys.executable).parent), self.threads, shared_cores=self.shared_cores)
        env.update({"PYTHONPATH": f"{seen[SANDBOX_LIB]}:{seen[SANDBOX_ASSETS]}",
                    SUBMISSION_ENV: seen[SANDBOX_SUBMISSION], ASSETS_ENV: seen[SANDBOX_ASSETS]})
        if return_notebook:  # the notebook is wanted for its plots: Jupyter's inline backend, not Agg
            env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        if model_cache_dir().is_dir():  # converted models, read-only (helpers.models converts elsewhere if it must)
            binds.append((model_cache_dir(), SANDBOX_MODELS))
            env[MODEL_CACHE_ENV] = seal.inside(model_cache_dir(), SANDBOX_MODELS)
        return [sys.executable, f"{seen[SANDBOX_LIB]}/{RUNNER_FILE}"], binds, env


def warm_up(modules: list[str]) -> None:
    """Import ``modules`` in a thread of their own (the judge imports them at its first use anyway:
    summarization's decoding measure imports torch, about 2 s, which would otherwise follow the first
    sandbox instead of running beside it). A module that fails to import fails again, and says why,
    when the judge needs it."""
    def load():
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception:
                pass

    if modules:
        threading.Thread(target=load, name="judge-warm-up", daemon=True).start()


class SandboxesOnDemand:
    """A run's :class:`SandboxPool`, started on first use (``course pdf`` needs one only for a notebook
    saved without outputs) and closed when the run ends; ``with`` it. A pool that cannot start
    raises the same :class:`SandboxUnavailable` at every use."""

    def __init__(self, jobs: int = 2, **options):
        self.jobs, self.options = jobs, options
        self._pool: SandboxPool | SandboxUnavailable | None = None
        self._lock = threading.Lock()

    def get(self) -> SandboxPool:
        with self._lock:
            if self._pool is None:
                pool = SandboxPool(self.jobs, **self.options)
                try:
                    self._pool = pool.start()
                except SandboxUnavailable as err:
                    self._pool = err
        if isinstance(self._pool, SandboxUnavailable):
            raise self._pool
        return self._pool

    def close(self) -> None:
        if isinstance(self._pool, SandboxPool):
            self._pool.close()

    def __enter__(self) -> "SandboxesOnDemand":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def remove_stale_workspaces(base: Path) -> None:
    """Remove the temp folders of grading runs that were killed (their pid is gone)."""
    for folder in Path(base).glob(f"{WORKSPACE_PREFIX}*-*"):
        pid = folder.name.removeprefix(WORKSPACE_PREFIX).split("-", 1)[0]
        try:
            mine = folder.lstat().st_uid == os.geteuid() and folder.is_dir() and not folder.is_symlink()
        except OSError:
            mine = False
        if mine and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)
