"""Unsealed grading with plain otter (``course grade --unsafe``, and the suite's control runs):
one submission in its own process, ``python -m autograder.grade.unsealed SUBMISSION ZIP RESULT``.

:func:`run_worker` starts it under a memory backstop and kills its process group at the time
limit, so a submission that hangs or eats memory cannot take the grading run down with it. The
worker writes a JSON result: status, message, per-question scores and per-test outcomes. Otter
compares golden values in the student's own kernel here, which a determined submission can fool:
sealed grading (:mod:`autograder.sandbox.session`, :mod:`autograder.judge.verdicts`) is the default everywhere else.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import nbformat

from helpers.core.contract import GOLDEN_MODE_ENV as MODE_ENV, MEASURE_MODULES_ENV, SETTING_ENV

from autograder.autograder_zip import Autograder
from autograder.grade.row import Status, Verdict, completed
from autograder.grade.submissions import InvalidSubmission, read_submission_notebook
from autograder.judge import sampling as grader_measures
from autograder.judge.verdicts import MEMORY_MARKERS
from autograder.kernels import IPYTHONDIR_ENV, isolated_ipython_dir
from autograder.limits import SandboxLimits, address_space_backstop_mb, over_time
from autograder.otter_io import first_error, summarize
from autograder.sandbox.protocol import GRADING_SETTING


def grade(submission: Path, autograder_zip: Path) -> dict:
    nb = read_submission_notebook(submission)
    from otter.api import grade_submission

    # Grade the notebook alone, under the name its init cell expects: students rename files,
    # and a zip's other files (the PDF) are for manual grading.
    autograder = Autograder.read(autograder_zip, need_golden=False)  # otter's own zips too: otter judges here
    submission = Path.cwd() / autograder.notebook_name
    nbformat.write(nb, submission)

    try:
        results = grade_submission(str(submission), str(autograder_zip), quiet=True)
    except MemoryError:
        return {"status": Status.MEMORY, "message": "ran out of memory while grading", "questions": {}}
    except Exception as err:
        text = f"{type(err).__name__}: {err}"
        if "Assignment name" in str(err) or "assignment name" in str(err):
            raise InvalidSubmission(f"submitted to the wrong assignment: {err}") from None
        status = Status.MEMORY if any(m in text for m in MEMORY_MARKERS) else Status.ERROR
        if "DeadKernelError" in text or "Kernel died" in text:
            status, text = Status.MEMORY, f"the notebook's kernel died (most often: out of memory): {err}"
        return {"status": status, "message": text[:500], "questions": {}}
    if results.has_catastrophic_failure():
        return {"status": Status.ERROR, "message": f"grading failed: {results.catastrophic_error}"[:500], "questions": {}}
    questions = summarize(results, autograder.tests)
    status, message = Status.OK, ""
    error = first_error(results.notebook)
    if error:
        where, ename, evalue = error
        status = Status.MEMORY if any(m in f"{ename}: {evalue}" for m in MEMORY_MARKERS) else Status.ERROR
        message = f"{where} raised {ename}: {evalue}"[:500]
    return {"status": status, "message": message, "questions": questions}


def main(argv: list[str] | None = None) -> int:
    submission, autograder_zip, result_path = (Path(a) for a in (argv or sys.argv[1:]))
    try:
        result = grade(submission, autograder_zip)
    except InvalidSubmission as err:
        result = {"status": Status.INVALID, "message": str(err), "questions": {}}
    except Exception as err:  # the grader's own failure still produces a row
        result = {"status": Status.ERROR, "message": f"grader error: {type(err).__name__}: {err}",
                  "questions": {}, "traceback": traceback.format_exc()}
    result_path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _limit_memory(memory_mb: int):
    def apply():  # a backstop only: an address-space cap at the limit fails correct torch code
        limit = address_space_backstop_mb(memory_mb) << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_worker(submission: Path, autograder_zip: Path, limits: SandboxLimits) -> Verdict:
    """Unsafe path: grade one submission with otter in a child process group; always returns the
    complete scored part of a row."""
    return completed(_worker_result(submission, autograder_zip, limits),
                     Autograder.read(autograder_zip, need_golden=False).possible)


def _worker_result(submission: Path, autograder_zip: Path, limits: SandboxLimits) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        result_path, log_path = Path(tmp) / "result.json", Path(tmp) / "worker.log"
        # TMPDIR inside our folder: otter's temp copies (hidden tests, golden values) go when it goes,
        # even when the worker is killed at the time limit.
        # otter compares golden values in the kernel: it gets the grader's own measures as the build's does
        env = dict(os.environ, **{SETTING_ENV: GRADING_SETTING, MODE_ENV: "compare", "TMPDIR": tmp,
                                  MEASURE_MODULES_ENV: grader_measures.__name__,
                                  IPYTHONDIR_ENV: str(isolated_ipython_dir(Path(tmp)))})
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.grade.unsealed", str(submission), str(autograder_zip), str(result_path)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
                start_new_session=True, preexec_fn=_limit_memory(limits.memory_mb),
            )
            try:
                proc.wait(timeout=limits.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"status": Status.TIMEOUT, "questions": {},
                        "message": over_time(limits)}
            finally:
                # the notebook kernel runs in the same process group: never leave it behind
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if result_path.is_file():
            return json.loads(result_path.read_text(encoding="utf-8"))
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-400:].strip()
        if proc.returncode < 0 or "MemoryError" in tail:
            return {"status": Status.MEMORY, "questions": {},
                    "message": f"the grading process died (signal {-proc.returncode}); most often: out of "
                               f"memory (limit {limits.memory_mb} MB)"}
        return {"status": Status.ERROR, "questions": {}, "message": f"the grading process failed: {tail}"}
