"""Sealed grading: run a submission in the sandbox, judge what it collected outside it.

Inside the sandbox (:mod:`autograder.sandbox_runner`) the notebook runs, then the tests, with
``expect`` in *collect* mode. Out here the score is computed: a test with points passes only if
every golden value recorded for it was collected exactly once and is judged close (or in range)
by :func:`helpers.golden.judge`, and the test itself did not raise. Golden values, tolerances and
the tests' points are read from the autograder zip here and never enter the sandbox, so patching
anything inside the kernel (otter, helpers, numpy, torch) can change only the student's own values.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import sys
import tempfile
import threading
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from helpers.core.contract import (ASSETS_ENV, GOLDEN_FILENAME, MODEL_CACHE_ENV as CACHE_ENV, SETTING_ENV, SUBMISSION_ENV,
                                   WAIT_POLICY, WAIT_POLICY_ENV)
from helpers.core.golden import judge
from helpers.core.models import model_cache_dir

from .otter_io import read_tests
from .submissions import sha256
from .sandbox import SandboxLimits, SandboxRun, close_sandbox, grading_temp_base, open_sandbox
from .seal_posix import PosixSandbox

#: What an error says when memory ran out (Python, torch's allocator, a Rust extension's os error 12).
MEMORY_MARKERS = ("MemoryError", "can't allocate memory", "Cannot allocate memory", "os error 12",
                  "DefaultCPUAllocator", "out of memory")

RUNNER = Path(__file__).with_name("sandbox_runner.py")
MODEL_CACHE = "/grading/models"  # where the host's converted models appear, read-only
#: Module names that are replaced inside the sandbox by a stub that refuses to import.
#: rfc3987_syntax builds a parser grammar at import (1.3 s, in the runner and again in the kernel)
#: for a URI format check that validating a notebook never uses; jsonschema skips it when absent.
SLOW_OPTIONAL_IMPORTS = ("rfc3987_syntax",)


@dataclass
class Autograder:
    """An autograder zip (or the folder Gradescope unpacks it into): the only code that knows its
    layout. ``tests/<question>.py`` hold the tests, ``otter_config.json`` the assignment's name,
    ``files/`` what the notebook may import or read (``helpers``, data) and, never shown to
    submissions, ``files/golden_values.json``. Only ``assets`` (``files/`` without the golden
    values, extracted by :meth:`load`) is shown to submissions."""

    zip_path: Path
    name: str  # assignment name, as the notebook file is called
    tests: dict  # question -> [{"test", "points", "hidden"}]
    sources: list[dict]  # [{"question", "source"}] test files, sent in after the cells ran
    golden: dict  # key -> spec (with "test")
    sha256: str = ""  # of the zip file (empty for an unpacked folder): a saved grade names it
    assets: Path | None = None  # public files of the zip (helpers, data), golden values left out

    @property
    def notebook_name(self) -> str:
        """The file name otter's init cell expects (``otter.Notebook("<assignment>.ipynb")``)."""
        return f"{self.name}.ipynb"

    @classmethod
    def read(cls, zip_path: Path) -> "Autograder":
        """Read an autograder zip, or the folder it was unpacked into, without extracting anything."""
        with _opened(zip_path) as zf:
            tests = read_tests(zf)
            config = json.loads(zf.read("otter_config.json"))
            golden = json.loads(zf.read(f"{ASSETS_DIR}/{GOLDEN_FILENAME}"))["values"]
            sources = [{"question": Path(name).stem, "source": zf.read(name).decode("utf-8")}
                       for name in zf.namelist() if name.startswith("tests/") and name.endswith(".py")]
        return cls(Path(zip_path), config["assignment_name"], tests, sorted(sources, key=lambda s: s["question"]),
                   golden, sha256(Path(zip_path)) if Path(zip_path).is_file() else "")

    @classmethod
    def load(cls, zip_path: Path, folder: Path) -> "Autograder":
        """:meth:`read`, with the public files extracted to ``folder/assets`` for the sandboxes."""
        autograder = cls.read(zip_path)
        autograder.assets = folder / "assets"
        with _opened(zip_path) as zf:
            for name in zf.namelist():
                parts = Path(name).parts
                if (parts[0] != ASSETS_DIR or name.endswith("/") or parts[-1] == GOLDEN_FILENAME
                        or ".." in parts or "__pycache__" in parts):
                    continue
                target = autograder.assets / Path(*parts[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
        autograder.assets.mkdir(parents=True, exist_ok=True)
        _open_up(folder)
        return autograder


#: The zip's folder of files the notebook may use (otter's ``autograder_files``).
ASSETS_DIR = "files"


def _opened(zip_path: Path):
    """The zip, or the folder it was unpacked into, as something with ``namelist`` and ``read``."""
    return _Unpacked(zip_path) if Path(zip_path).is_dir() else zipfile.ZipFile(zip_path)


class _Unpacked:
    """An unpacked autograder folder read like its zip (``namelist``, ``read``)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def namelist(self) -> list[str]:
        return sorted(p.relative_to(self.folder).as_posix() for p in self.folder.rglob("*") if p.is_file())

    def read(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _open_up(folder: Path) -> None:
    """Readable by the sandbox's uid: folders 755, files 644 (all under a grader-owned temp folder)."""
    for root, dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


#: What ``import otter`` gives a notebook inside the sandbox. The notebook's first cell makes a
#: ``grader = otter.Notebook(...)`` for public checks and the export, which grading skips (as
#: otter's own grading mode does); importing the real otter there costs a second per submission.
OTTER_STAND_IN = '''"""Stand-in for otter inside the grading sandbox: the grader object does nothing there."""


class Notebook:
    def __init__(self, nb_path=None, *args, **kwargs):
        self._notebook = nb_path

    def __getattr__(self, name):  # check, check_all, export, ...: no-ops while grading
        return lambda *args, **kwargs: None
'''


def runner_library(folder: Path) -> Path:
    """The read-only /grading/lib: the runner, the otter stand-in and stubs of slow optional imports."""
    lib = folder / "lib"
    (lib / "otter").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(RUNNER, lib / "course_runner.py")
    (lib / "otter" / "__init__.py").write_text(OTTER_STAND_IN)
    for module in SLOW_OPTIONAL_IMPORTS:
        (lib / f"{module}.py").write_text(f'raise ImportError("{module} is left out of the grading sandbox")\n')
    _open_up(lib)
    return lib


def sandbox_environment(venv_bin: Path, threads: int) -> dict[str, str]:
    """What every sandboxed run starts with (the sandbox adds its own HOME and TMPDIR)."""
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "USER": "student",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "JUPYTER_PLATFORM_DIRS": "1",
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        WAIT_POLICY_ENV: WAIT_POLICY,  # idle OpenMP threads sleep: jobs share the cores without spinning
        SETTING_ENV: "grading",
    }


#: Where a grading run keeps its shared files (under a temp folder the sandbox's uid can traverse).
WORKSPACE_PREFIX = "course-grade-"


class SandboxPool:
    """The sandboxes of one run of ``course grade``, ``course pdf`` or the Gradescope autograder.

    It finds a temp folder the sandbox's user can reach whatever ``TMPDIR`` is, starts the
    sandbox this machine allows (:func:`autograder.sandbox.open_sandbox`: bubblewrap, else POSIX
    separation as root; a root grader's runs each get a fresh uid), reads each autograder once, and
    grades (:meth:`grade`) or runs (:meth:`execute`) a notebook in it. ``private`` lists what a
    POSIX-separated submission must not be able to read (golden values, masters, results, other
    submissions): the pool refuses to start, saying what to fix, if any of it is world-readable.
    """

    def __init__(self, jobs: int = 2, *, threads: int | None = None, mode: str | None = None,
                 private: list[Path] = ()):
        self.jobs = max(1, jobs)
        self.threads = threads or max(1, (os.cpu_count() or 1) // self.jobs)
        self.mode, self.private = mode, list(private)
        self.sandbox = None
        self._autograders: dict[Path, Autograder] = {}
        self._lock = threading.Lock()

    def start(self) -> "SandboxPool":
        base = grading_temp_base()
        remove_stale_workspaces(base)
        self.workspace = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-", dir=base))
        self.workspace.chmod(0o711)  # the sandboxes' uids pass through to what is shared with them
        try:
            self.lib = runner_library(self.workspace)
            staging = self.workspace / "staging"
            staging.mkdir()
            staging.chmod(0o711)  # explicit: a grader's umask of 077 must not lock the sandboxes out
            self.sandbox = open_sandbox(staging, Path(sys.executable), self.mode, self.jobs)
            if isinstance(self.sandbox, PosixSandbox):
                self.sandbox.require_private(self.private)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def description(self) -> str:
        """Which seal grades, for the results and the log."""
        return getattr(self.sandbox, "description", getattr(self.sandbox, "mode", "none"))

    def close(self) -> None:
        shutil.rmtree(self.workspace, ignore_errors=True)
        close_sandbox(self.sandbox)  # the uids are free for another grader

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
            return self._autograders[zip_path]

    def grade(self, autograder: Autograder, notebook_text: str, limits: SandboxLimits) -> dict:
        """Grade one submission (its notebook's text); always returns a result dict."""
        run = self._run(autograder, notebook_text, limits, tests=autograder.sources, return_notebook=False)
        return {**verdict(run, autograder, limits), "sandbox": self.description}

    def execute(self, autograder: Autograder, notebook_text: str, limits: SandboxLimits) -> tuple[str | None, str]:
        """Run a notebook's cells as grading does, without tests: (the executed notebook's text or
        None, what went wrong if anything)."""
        run = self._run(autograder, notebook_text, limits, tests=[], return_notebook=True)
        text = next((m.get("text") for m in run.messages if m.get("event") == "notebook"), None)
        problem = verdict(run, autograder, limits)["message"]
        if text is None and not problem:
            problem = "the sandbox did not send the executed notebook back (larger than 48 MiB?)"
        return (text if isinstance(text, str) else None), problem

    def _run(self, autograder: Autograder, notebook_text: str, limits: SandboxLimits, *, tests: list[dict],
             return_notebook: bool) -> SandboxRun:
        """Run a notebook's cells in a sandbox, then ``tests`` (sent in only after the cells ran)."""
        submission = Path(tempfile.mkdtemp(prefix="submission-", dir=self.workspace))
        try:
            (submission / "submission.ipynb").write_text(notebook_text, encoding="utf-8")
            (submission / "job.json").write_text(json.dumps({"notebook_name": autograder.notebook_name,
                                                             "return_notebook": return_notebook}))
            with self.sandbox.lease() as uid:  # a fresh uid: nothing of an earlier run is left under it
                self.sandbox.grant(submission, uid)  # this run's uid reads it; the others do not
                argv, binds, env = self._command(autograder, submission, return_notebook)
                return self.sandbox.run(argv, binds=binds, env=env, uid=uid, limits=limits,
                                        on_message=_tests_after_cells(tests))
        finally:
            shutil.rmtree(submission, ignore_errors=True)

    def _command(self, autograder: Autograder, submission: Path, return_notebook: bool) -> tuple[list, list, dict]:
        """(argv, binds, env) of the runner: paths as the sandbox shows them."""
        sandbox = self.sandbox
        binds = [(self.lib, "/grading/lib"), (autograder.assets, "/grading/assets"), (submission, "/grading/submission")]
        seen = {dest: sandbox.inside(host, dest) for host, dest in binds}
        env = sandbox_environment(Path(sys.executable).parent, self.threads)
        env.update({"PYTHONPATH": f"{seen['/grading/lib']}:{seen['/grading/assets']}",
                    SUBMISSION_ENV: seen["/grading/submission"], ASSETS_ENV: seen["/grading/assets"]})
        if return_notebook:  # the notebook is wanted for its plots: Jupyter's inline backend, not Agg
            env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        if model_cache_dir().is_dir():  # converted models, read-only (helpers.models converts elsewhere if it must)
            binds.append((model_cache_dir(), MODEL_CACHE))
            env[CACHE_ENV] = sandbox.inside(model_cache_dir(), MODEL_CACHE)
        return [sys.executable, f"{seen['/grading/lib']}/course_runner.py"], binds, env


def _tests_after_cells(tests: list[dict]):
    request = (json.dumps(tests) + "\n").encode("utf-8")
    sent = []

    def on_message(message: dict):
        if message.get("event") == "cells_done" and not sent:
            sent.append(True)
            return request  # the tests go in only now, and only once
        return None

    return on_message


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


def verdict(run: SandboxRun, autograder: Autograder, limits: SandboxLimits) -> dict:
    """Status, message and per-question scores from what the sandbox reported."""
    events = {m.get("event") for m in run.messages}
    tests = [m for m in run.messages if m.get("event") == "test"]
    cells = next((m for m in run.messages if m.get("event") == "cells_done"), None)
    questions, tampering = score(autograder, tests)

    status, message = "ok", ""
    if run.leftovers:  # something of the sandbox outlived the kill: what it reported is not judged
        for detail in questions.values():
            detail["score"] = 0
            for case in detail["cases"]:
                case["passed"], case["message"] = False, "not judged: the sandbox could not be emptied"
        status, message = "error", "processes of its sandbox outlived the kill; nothing it reported was judged"
    elif run.killed_for == "timeout":
        status, message = "timeout", f"did not finish within {limits.timeout:g} s (an endless loop or a very slow cell?)"
    elif run.killed_for == "memory":
        status, message = "memory", (f"used more than {limits.memory_mb} MB of memory (all its processes together); "
                                     "stopped")
    elif run.killed_for == "processes":
        status, message = "error", f"started more than {limits.processes} processes at once; stopped"
    elif run.killed_for == "disk":
        status, message = "error", f"wrote more than {limits.disk_mb} MB of files (all its files together); stopped"
    elif run.channel_overflow or tampering:
        status, message = "tampered", "; ".join(tampering) or "the sandbox sent more results than any test makes"
    elif cells and cells.get("kernel_died"):
        status, message = "error", cells["kernel_died"]
    elif cells and cells.get("first_error"):
        err = cells["first_error"]
        text = f"{err['ename']}: {err['evalue']}"
        status = "memory" if _out_of_memory(text) else "error"
        message = f"the cell starting {err['cell']!r} raised {text}"
    elif "done" not in events:
        status = "error"
        runner_error = next((m["error"] for m in run.messages if m.get("event") == "runner_error"), "")
        if runner_error:  # its type only: the text may quote a hidden test
            message = f"grading failed inside the sandbox ({exception_name(runner_error)})"
        else:
            how = f"; it was killed by signal {-run.returncode}" if (run.returncode or 0) < 0 else \
                f"; exit status {run.returncode}" if run.returncode else ""
            # never the runner's printed output: after the tests went in, it may quote them
            message = f"the grading runner stopped before it finished (did the notebook kill it, or exit?{how})"
    short_of_memory = next((m for m in tests if _out_of_memory(m.get("error"))), None)
    if status == "ok" and short_of_memory:  # points lost to memory are never a silent "ok"
        where = f"the test {short_of_memory['test']}" if short_of_memory.get("test") else \
            f"the tests of {short_of_memory.get('question')}"
        status, message = "memory", f"{where} ran out of memory ({exception_name(short_of_memory['error'])})"
    if run.output_dropped and status == "ok":
        message = f"printed more than {limits.output_bytes >> 10} KiB outside the notebook; the rest was dropped"
    return {"status": status, "message": message[:500], "questions": questions,
            "peak_memory_mb": round(run.peak_memory_mb), "peak_address_space_mb": round(run.peak_address_space_mb),
            "sandbox_seconds": round(run.seconds, 2)}


#: Exception names a hidden test's feedback may show: Python's own, and the golden judge's.
KNOWN_EXCEPTIONS = {name for name, value in vars(__import__("builtins")).items()
                    if isinstance(value, type) and issubclass(value, BaseException)} | {"GoldenMismatch"}


#: The runner's own words (the test driver's, for a missing function), which may be shown whole.
RUNNER_WORDS = re.compile(r"the notebook does not define \w+(, \w+){0,5}|the test file reported nothing|"
                          r"the notebook's kernel (died|was killed by signal \d+ \(\w+\)|exited with code -?\d+ "
                          r"\(os\._exit or a crash in a cell\?\)) during the tests")


def exception_name(error: str) -> str:
    """What a status or a test's feedback may say of an error raised in the sandbox after the tests
    went in: the exception's name if it is a standard one, never its text (a notebook can put
    anything there, the tests' source included). The public checks in the notebook say more."""
    text = str(error)
    if RUNNER_WORDS.fullmatch(text):
        return text
    name = text.split(":", 1)[0].strip().rsplit(".", 1)[-1]
    return name if name in KNOWN_EXCEPTIONS else "an exception"


def _out_of_memory(error) -> bool:
    return isinstance(error, str) and any(marker in error for marker in MEMORY_MARKERS)


def score(autograder: Autograder, tests: list[dict]) -> tuple[dict, list[str]]:
    """Per-question scores, judged here from the collected values; plus any signs of tampering."""
    outcomes = {m["test"]: m for m in tests if m.get("test")}
    file_errors = {m["question"]: m["error"] for m in tests if not m.get("test")}
    collected: dict[str, list] = {}
    for m in tests:
        for line in m.get("values") or []:
            if isinstance(line, dict) and isinstance(line.get("key"), str):
                collected.setdefault(line["key"], []).append(line)
    keys_of = {}
    for key, spec in autograder.golden.items():
        keys_of.setdefault(spec.get("test"), []).append(key)
    repeated = sorted(k for k, v in collected.items() if len(v) > 1 and k in autograder.golden)
    tampering = [f"value {k!r} was reported {len(collected[k])} times" for k in repeated[:3]]
    counts = Counter(m["test"] for m in tests if m.get("test"))
    tampering += [f"test {t} was reported {n} times" for t, n in counts.items() if n > 1][:3]

    questions = {}
    for question, cases in autograder.tests.items():
        results = []
        for case in cases:
            outcome = outcomes.get(case["test"])
            problems = []
            if outcome is None:
                why = file_errors.get(question)
                if why:
                    why = f"the tests raised {exception_name(why)}"
                problems.append(f"did not run ({why or 'the grading stopped before it'})")
            elif not outcome.get("passed"):
                error = outcome.get("error") or "an error"
                # the name only, for public tests too: a test file holds public and hidden tests,
                # and a notebook can put their source into the text of any exception it raises
                problems.append(f"raised {exception_name(error)}")
            if case["hidden"]:
                for key in keys_of.get(case["test"], []):
                    got = collected.get(key, [])
                    if outcome is not None and not got:
                        if outcome.get("passed"):
                            problems.append(f"{key}: no value was collected")
                    elif len(got) > 1:
                        problems.append(f"{key}: reported more than once")
                    elif got:
                        problems.append(_judged(key, autograder.golden[key], got[0]))
            problems = [p for p in problems if p]
            passed = not problems
            results.append({"test": case["test"], "hidden": case["hidden"], "points": case["points"],
                            "passed": passed, "message": "\n".join(problems)})
        score_ = sum(r["points"] for r in results if r["passed"])
        questions[question] = {"score": score_, "possible": sum(r["points"] for r in results), "cases": results}
    return questions, tampering


def _judged(key: str, spec: dict, line: dict) -> str | None:
    if "error" in line:
        return f"{key}: {line['error']}"[:300]
    try:
        message = judge(spec, line["value"])
    except Exception:  # a malformed record is a wrong value, never a crash of the grader
        return f"{key}: the value could not be read"
    return f"{key}: {message}" if message else None

