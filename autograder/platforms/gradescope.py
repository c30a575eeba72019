"""The autograder zip on Gradescope: the submission graded sealed, as ``course grade`` grades it.

Gradescope unpacks the zip into ``/autograder/source``, puts the student's upload in
``/autograder/submission``, runs ``/autograder/run_autograder`` as root and reads
``/autograder/results/results.json``. Stock otter would run the student's notebook and the hidden
tests in one kernel as root, beside the golden values, where one cell can rewrite them or patch
the test runner. Here the zip's ``run_otter.py`` calls :func:`main` instead, which:

1. makes ``/autograder`` private to root (golden values, hidden tests, results and the upload);
2. runs the notebook, then the tests, through :class:`autograder.sandbox.session.SandboxPool`: bubblewrap
   where it starts, else (Gradescope's containers have no user namespaces) POSIX separation, a uid
   of its own that reads nothing of ``/autograder``, killed whole before anything is judged;
3. judges the collected values here, as root, and writes ``results.json`` in Gradescope's format:
   one entry per test, hidden tests visible ``after_published`` (as otter does), a visible note of
   the status and of which seal graded; ``extra_data`` holds them with the limits and the date for
   ``course report`` on the downloaded results.

``otter run`` ignores ``run_otter.py`` and keeps grading the zip in otter's own way (golden values
compared inside the kernel), for instructors who want it. :func:`emulate` runs the zip the way
Gradescope does on this machine (``course gradescope-check``), and :func:`prepare_image` is what the
zip's ``setup.sh`` adds to the image.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.autograder_zip import ENTRY_FILE, GRADESCOPE_ROOT, SOURCE_DIR, Autograder
from autograder.grade.results import limits_record, now
from autograder.grade.row import Status
from autograder.grade.submissions import InvalidSubmission, find_upload, read_submission_notebook
from autograder.limits import DEFAULT_LIMITS, limits_within
from autograder.sandbox.choose import SANDBOX_MODE_ENV
from autograder.sandbox.seal import SandboxUnavailable

def main(autograder_dir: str = GRADESCOPE_ROOT) -> int:
    """Grade ``<autograder_dir>/submission`` sealed; write ``results/results.json``. Exit status 0
    when a result was written (whatever the score), 1 when the grader itself failed."""
    root = Path(autograder_dir)
    results = root / "results" / "results.json"
    started = time.perf_counter()
    try:
        if os.geteuid() != 0:
            raise SandboxUnavailable("the Gradescope autograder must run as root (it runs the submission as "
                                     "another user); Gradescope does so")
        os.chmod(root, 0o700)  # nothing under /autograder is the submission's business
        try:
            notebook = read_submission_notebook(find_upload(root / "submission"))
        except InvalidSubmission as err:
            return _write(results, invalid_results(str(err)))
        import nbformat

        from autograder.sandbox.cgroups import memory_allowed_mb
        from autograder.sandbox.session import SandboxPool

        # the container's memory setting (768 MB unless the instructor raised it) holds this grader
        # and the submission together: a submission stopped at course grade's 4096 MB would have
        # been killed by the container first, and perhaps this grader with it, leaving no result
        container_mb = memory_allowed_mb()
        limits = limits_within(DEFAULT_LIMITS, container_mb)
        print(f"memory limit {limits.memory_mb} MB" + (f" (the container allows {container_mb} MB)" if container_mb else ""))
        with SandboxPool(1, private=[root]) as pool:  # torch's threads: the container's cores
            autograder = pool.autograder(root / SOURCE_DIR)
            if autograder.needs_bundled_gpt:  # the image's setup converted it; again if that step was skipped
                from helpers.core.models import prepare_bundled_gpt

                prepare_bundled_gpt()
            result, _ = pool.grade(autograder, nbformat.writes(notebook), limits)
        result.update(assignment=autograder.name, autograder_sha256=autograder.sha256,
                      limits=limits_record(limits), graded_at=now())
        output = gradescope_results(result, time.perf_counter() - started)
        print(f"{output['score']:g} / {result['possible']:g} points; status {result['status']}; "
              f"graded sealed ({result['sandbox']})")
        return _write(results, output)
    except SandboxUnavailable as err:
        _write(results, failed_results(f"The submission could not be graded sealed here, so it was not graded: {err}"))
        print(f"course autograder: {err}", file=sys.stderr)
        return 1
    except Exception:
        _write(results, failed_results("The autograder failed; your instructor has been shown why."))
        traceback.print_exc()
        return 1


#: Gradescope's results.json as this module writes it: a first entry "Grading" whose text is
#: "Status: ok. <message>\nGraded sealed (<seal>) in 12 s.", one entry "<question>: <test>" per test,
#: and ``extra_data`` (kept by Gradescope, shown to no student) with the row's own fields.
RESULTS_FORMAT = 1
RESULTS_NOTE = re.compile(r"Status: (?P<status>\w+)\.(?P<message>.*?)(\nGraded sealed \((?P<seal>[^)]*)\))?", re.S)
#: The row's fields ``extra_data`` carries, for ``course report`` on the downloaded results.
EXTRA_FIELDS = ("assignment", "status", "message", "sandbox", "autograder_sha256", "limits", "graded_at")


def gradescope_results(result: dict, seconds: float) -> dict:
    """A sealed grading result (a row's scored part, with whatever of ``EXTRA_FIELDS`` it has) in
    Gradescope's format."""
    tests = []
    for question, detail in sorted(result["questions"].items()):
        for case in detail["cases"]:
            points = case["points"] or 0
            tests.append({
                "name": f"{question}: {case['test']}",
                "score": points if case["passed"] else 0,
                "max_score": points,
                "status": "passed" if case["passed"] else "failed",
                "visibility": "after_published" if case["hidden"] else "visible",
                "output": case["message"] or ("passed" if case["passed"] else "failed"),
            })
    note = f"Status: {result['status']}." + (f" {result['message']}" if result["message"] else "")
    note += f"\nGraded sealed ({result['sandbox']}) in {seconds:.0f} s."
    tests.insert(0, {"name": "Grading", "status": "passed" if result["status"] == Status.OK else "failed",
                     "visibility": "visible", "output": note})
    score = sum(t.get("score", 0) for t in tests)
    extra = {"format": RESULTS_FORMAT, **{k: result[k] for k in EXTRA_FIELDS if result.get(k) is not None}}
    return {"score": round(score, 4), "output": note, "stdout_visibility": "hidden", "tests": tests, "extra_data": extra}


def read_results(data: dict) -> dict:
    """A Gradescope results.json (as :func:`gradescope_results`, :func:`invalid_results` or
    :func:`failed_results` write it, or an older one without ``extra_data``) read back: status,
    message, the test cases, the total, and the row's fields ``extra_data`` kept (empty when absent).
    Raises TypeError, ValueError or AttributeError on a file not in that form."""
    extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
    cases, first = [], None
    for test in data["tests"]:
        title = str(test.get("name", ""))
        if ": " not in title:
            first = first or test
            continue
        question, test_name = title.split(": ", 1)
        points = float(test.get("max_score") or 0)
        passed = test.get("status") == "passed" if "status" in test else float(test.get("score") or 0) >= points
        cases.append({"question": question, "test": test_name, "hidden": test.get("visibility", "visible") != "visible",
                      "points": points, "passed": passed, "message": "" if passed else str(test.get("output") or "")})
    note = str((first or {}).get("output") or data.get("output") or "")
    match = RESULTS_NOTE.match(note)
    if extra.get("status"):
        status, message = str(extra["status"]), str(extra.get("message") or "")
    elif match:
        status, message = match["status"], match["message"].strip()
    else:  # "Submission" (the upload was not gradable) or "Autograder" (the grader failed)
        status = Status.INVALID if (first or {}).get("name") == "Submission" else Status.ERROR
        message = note.strip()
    sandbox = str(extra.get("sandbox") or (match["seal"] if match and match["seal"] else ""))
    return {"status": status, "message": message, "cases": cases, "total": float(data.get("score") or 0),
            "sandbox": sandbox, "extra": extra}


def invalid_results(reason: str) -> dict:
    text = f"This upload could not be graded: {reason}"
    return {"score": 0, "output": text, "stdout_visibility": "hidden",
            "tests": [{"name": "Submission", "status": "failed", "visibility": "visible", "output": text}]}


def failed_results(text: str) -> dict:
    return {"score": 0, "output": text, "stdout_visibility": "hidden",
            "tests": [{"name": "Autograder", "status": "failed", "visibility": "visible", "output": text}]}


def _write(path: Path, results: dict) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def prepare_image() -> None:
    """Run by the zip's ``setup.sh`` (as root, while Gradescope builds the image): let an
    unprivileged uid run this Python and read the converted models (traversal only, ``o+x``, on
    the folders above them, such as ``/root``: their listings stay private), and convert the
    bundled GPT once when the tests load it."""
    from helpers.core.models import model_cache_dir, prepare_bundled_gpt

    if Autograder.read(Path(GRADESCOPE_ROOT, SOURCE_DIR)).needs_bundled_gpt:
        prepare_bundled_gpt()
    for path in (Path(os.path.realpath(sys.executable)), Path(sys.prefix), model_cache_dir()):
        for folder in path.parents:
            mode = os.stat(folder).st_mode
            if not mode & 0o001:
                os.chmod(folder, mode | 0o001)


def emulate(zip_path: Path, submission: Path, *, mode: str = "posix", timeout: float = 900,
            env: dict[str, str] | None = None, memory_mb: int | None = None) -> dict:
    """Run the autograder zip as Gradescope does, here: the zip unpacked into ``source``, the upload
    in ``submission``, a temp folder bound at ``/autograder`` in a private mount namespace, its
    ``run_otter.py`` run as root with this Python. ``mode`` is the seal the grader must use
    (``posix``, as in Gradescope's containers); ``env`` adds to the grader's environment;
    ``memory_mb`` is the container's memory (Gradescope's Autograder Settings), made a control
    group's limit on the whole run (None: this machine's). Returns the ``results.json`` written,
    with the grader's printed output under ``"_log"`` and, in an emulated container, the number of
    processes the grader left running in it when it ended under ``"_left_running"`` (None without)."""
    from autograder.layout import CourseError

    if os.geteuid() != 0:
        raise CourseError("checking a zip as Gradescope runs it needs root (Gradescope runs it as root, and the "
                          "grader then runs the submission as another user): run it with sudo")
    from autograder.sandbox.seal import _reachable_by_others

    exposed = [p for p in (Path(zip_path), Path(submission)) if _reachable_by_others(Path(p))]
    if exposed:  # the submission would run as another uid on this file system, as in course grade
        listed = " ".join(str(p) for p in exposed)
        raise CourseError(f"the submission would run as another user here and could read {listed} (the zip holds "
                          f"the golden values and hidden tests): make it private first (chmod o-rwx {listed}, or on a "
                          "folder above it) and check again")
    with tempfile.TemporaryDirectory(prefix="gradescope-check-") as tmp:
        folder = Path(tmp, "autograder")
        for name in (SOURCE_DIR, "submission", "results"):
            (folder / name).mkdir(parents=True)
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(folder / SOURCE_DIR)
        shutil.copy(submission, folder / "submission" / Path(submission).name)
        printed = Path(tmp, "printed.txt")  # a file, not a pipe: a process left behind cannot hold the check
        with _mount_point(Path(GRADESCOPE_ROOT)), _container(memory_mb) as container, open(printed, "wb") as out:
            bind = 'mount --bind "$1" "$2"; shift 2; exec "$@"'
            try:
                subprocess.run([*container.prefix, "unshare", "--mount", "--propagation", "private", "--", "sh", "-ec",
                                bind, "sh", str(folder), GRADESCOPE_ROOT, sys.executable,
                                f"{GRADESCOPE_ROOT}/{SOURCE_DIR}/{ENTRY_FILE}"],
                               env={**os.environ, SANDBOX_MODE_ENV: mode, **(env or {})}, stdout=out,
                               stderr=subprocess.STDOUT, timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            left_running = container.left_running()
        # the log may hold a submission's bytes: replaced, never a decoding error
        log = printed.read_text(encoding="utf-8", errors="replace")[-3000:]
        if timed_out:
            left = f" ({left_running} process(es) in the container, ended with it)" if left_running else ""
            raise CourseError(f"the autograder was still running after {timeout:g} s{left} (Gradescope would stop it "
                              f"at its own timeout):\n{log}")
        results = folder / "results" / "results.json"
        if not results.is_file():
            raise CourseError(f"the autograder wrote no results.json:\n{log}")
        output = json.loads(results.read_text(encoding="utf-8"))
        output["_log"] = log
        output["_left_running"] = left_running  # processes the grader left in the container (ended with it)
        return output


@dataclass
class _Container:
    """The emulated container: a command prefix that runs a command in it, and a count of the
    processes in it (None where no container is emulated)."""

    prefix: list[str]
    left_running: Callable[[], int | None]


@contextlib.contextmanager
def _container(memory_mb: int | None):
    """The emulated container: a control group of ``memory_mb`` (none when None), killed and
    removed afterwards."""
    if memory_mb is None:
        yield _Container([], lambda: None)
        return
    from autograder.layout import CourseError
    from autograder.sandbox.cgroups import GROUP_PREFIX, find_home

    home, why = find_home()
    if home is None:
        raise CourseError(f"a container's memory cannot be emulated here: {why}")
    group = home.new_group(f"{GROUP_PREFIX}{os.getpid()}-container-{time.monotonic_ns()}", memory_mb, 4096)
    try:
        yield _Container(group.join_command(), lambda: len(group.members()))
    finally:
        surviving = group.kill()
        if surviving or not group.remove():  # said, never raised: it would hide the check's own error
            warnings.warn(f"the emulated container's control group {group.folders[0]} could not be emptied "
                          f"({len(surviving)} process(es) left) or removed: remove it by hand")


@contextlib.contextmanager
def _mount_point(folder: Path):
    """An empty ``folder`` on this machine for the private mounts (each check sees its own), made if
    missing and removed by the last check that uses it; a folder that was there before stays."""
    from autograder.sandbox.uids import lock_folder

    lock_path = lock_folder() / "gradescope-check.lock"  # root's own folder: no link can be planted there
    made_marker = lock_path.with_suffix(".made")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # held while this check runs
        try:
            folder.mkdir()
            made_marker.touch()
        except FileExistsError:  # there before, or another check made it a moment ago
            pass
        try:
            yield
        finally:
            # no `return` in here: it would swallow the check's own error
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                last = True
            except OSError:  # another check still uses the folder
                last = False
            if last and made_marker.exists():
                try:
                    folder.rmdir()
                except OSError:
                    pass
                made_marker.unlink(missing_ok=True)
