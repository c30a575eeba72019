"""One submission, graded in its own process: ``python -m autograder.worker SUBMISSION ZIP RESULT``.

``course grade`` starts this under a memory limit and kills its process group at the time limit,
so a submission that hangs or eats memory cannot take the grading run down with it. The worker
writes a JSON result: status, message, per-question scores and per-test outcomes.

This is the seam where sealed grading plugs in: the runner below (otter in compare mode) is the
only part that executes student code.
"""

from __future__ import annotations

import json
import stat
import sys
import traceback
import zipfile
from pathlib import Path

import nbformat

from .otter_io import first_error, read_tests, summarize

#: What an error says when memory ran out (Python, torch's allocator, a Rust extension's os error 12).
MEMORY_MARKERS = ("MemoryError", "can't allocate memory", "Cannot allocate memory", "os error 12",
                  "DefaultCPUAllocator", "out of memory")
MAX_NOTEBOOK_BYTES = 100 << 20


class InvalidSubmission(Exception):
    """The file is not something we can grade (not a notebook, corrupted, wrong assignment)."""


def read_submission_notebook(path: Path):
    """Load the notebook of a submission (.ipynb, or a .zip holding exactly one)."""
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                text = _notebook_in_zip(zf)
        else:
            if path.stat().st_size > MAX_NOTEBOOK_BYTES:
                raise InvalidSubmission(f"the notebook is {path.stat().st_size >> 20} MB; at most "
                                        f"{MAX_NOTEBOOK_BYTES >> 20} MB is graded (clear large outputs)")
            text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except InvalidSubmission:
        raise
    except zipfile.BadZipFile:
        raise InvalidSubmission("not a valid zip file (corrupted or truncated upload?)") from None
    except UnicodeDecodeError:
        raise InvalidSubmission("the notebook is not UTF-8 text") from None
    except Exception as err:  # nbformat / json errors come in many types
        reason = str(err).splitlines()[0][:200]
        raise InvalidSubmission(f"not a readable Jupyter notebook: {type(err).__name__}: {reason}") from None
    return nb


def _notebook_in_zip(zf: zipfile.ZipFile) -> str:
    """The text of the one notebook in a submission zip; nothing is extracted to disk."""
    for info in zf.infolist():
        parts = info.filename.replace("\\", "/").split("/")
        if info.filename.startswith("/") or ".." in parts:
            raise InvalidSubmission(f"the zip holds an entry with an unsafe path ({info.filename[:80]!r})")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidSubmission(f"the zip holds a symbolic link ({info.filename[:80]!r}); upload the files themselves")
    names = [i for i in zf.infolist() if i.filename.endswith(".ipynb") and "/." not in "/" + i.filename]
    if len(names) != 1:
        raise InvalidSubmission(f"the zip holds {len(names)} notebooks; expected exactly one")
    if names[0].file_size > MAX_NOTEBOOK_BYTES:
        raise InvalidSubmission(f"the notebook in the zip is {names[0].file_size >> 20} MB; at most "
                                f"{MAX_NOTEBOOK_BYTES >> 20} MB is graded")
    return zf.read(names[0]).decode("utf-8")


def assignment_of(nb) -> str | None:
    return nb.metadata.get("otter", {}).get("assignment_name")


def notebook_name(autograder_zip: Path) -> str:
    """The file name otter's init cell expects (``otter.Notebook("<assignment>.ipynb")``)."""
    with zipfile.ZipFile(autograder_zip) as zf:
        config = json.loads(zf.read("otter_config.json"))
    return f"{config['assignment_name']}.ipynb"


def grade(submission: Path, autograder_zip: Path) -> dict:
    nb = read_submission_notebook(submission)
    from otter.api import grade_submission

    # Grade the notebook alone, under the name its init cell expects: students rename files,
    # and a zip's other files (the PDF) are for manual grading.
    submission = Path.cwd() / notebook_name(autograder_zip)
    nbformat.write(nb, submission)

    try:
        results = grade_submission(str(submission), str(autograder_zip), quiet=True)
    except MemoryError:
        return {"status": "memory", "message": "ran out of memory while grading", "questions": {}}
    except Exception as err:
        text = f"{type(err).__name__}: {err}"
        if "Assignment name" in str(err) or "assignment name" in str(err):
            raise InvalidSubmission(f"submitted to the wrong assignment: {err}") from None
        status = "memory" if any(m in text for m in MEMORY_MARKERS) else "error"
        if "DeadKernelError" in text or "Kernel died" in text:
            status, text = "memory", f"the notebook's kernel died (most often: out of memory): {err}"
        return {"status": status, "message": text[:500], "questions": {}}
    if results.has_catastrophic_failure():
        return {"status": "error", "message": f"grading failed: {results.catastrophic_error}"[:500], "questions": {}}
    questions = summarize(results, read_tests(autograder_zip))
    status, message = "ok", ""
    error = first_error(results.notebook)
    if error:
        where, ename, evalue = error
        status = "memory" if any(m in f"{ename}: {evalue}" for m in MEMORY_MARKERS) else "error"
        message = f"{where} raised {ename}: {evalue}"[:500]
    return {"status": status, "message": message, "questions": questions}


def main(argv: list[str] | None = None) -> int:
    submission, autograder_zip, result_path = (Path(a) for a in (argv or sys.argv[1:]))
    try:
        result = grade(submission, autograder_zip)
    except InvalidSubmission as err:
        result = {"status": "invalid", "message": str(err), "questions": {}}
    except Exception as err:  # the grader's own failure still produces a row
        result = {"status": "error", "message": f"grader error: {type(err).__name__}: {err}",
                  "questions": {}, "traceback": traceback.format_exc()}
    result_path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
