"""``course grade``: grade every submission in a folder, in parallel, each in its own process.

Every ``.ipynb`` or ``.zip`` found gets exactly one row (points per question, total, status
ok / error / timeout / memory / invalid, and a message), whatever the submission does. Rows are
saved one file per submission as they finish, so an interrupted run resumes where it stopped;
a row is reused only while the submission's bytes (sha256) and the autograder are unchanged.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from helpers.golden import MODE_ENV
from helpers.runtime import FAST_ENV

from .kernels import IPYTHONDIR_ENV, isolated_ipython_dir
from .layout import CourseError, Layout
from .otter_io import possible_points, read_tests
from .worker import InvalidSubmission, assignment_of, read_submission_notebook

STATUSES = ("ok", "error", "timeout", "memory", "invalid")
SUBMISSION_SUFFIXES = (".ipynb", ".zip")


@dataclass(frozen=True)
class Limits:
    timeout: float = 300.0  # wall-clock seconds per submission
    memory_mb: int = 4096  # address-space limit of each process grading a submission


def find_submissions(folder: Path) -> tuple[list[Path], list[Path]]:
    """(gradable files, other files) under ``folder``, hidden folders and checkpoints skipped."""
    gradable, other = [], []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        (gradable if path.suffix.lower() in SUBMISSION_SUFFIXES else other).append(path)
    return gradable, other


def submission_id(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix().replace("/", "__")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _limit_memory(memory_mb: int):
    def apply():
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_worker(submission: Path, autograder_zip: Path, limits: Limits) -> dict:
    """Grade one submission in a child process group under the limits; always returns a result."""
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        result_path, log_path = Path(tmp) / "result.json", Path(tmp) / "worker.log"
        env = dict(os.environ, **{FAST_ENV: "1", MODE_ENV: "compare",
                                  IPYTHONDIR_ENV: str(isolated_ipython_dir(Path(tmp)))})
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.worker", str(submission), str(autograder_zip), str(result_path)],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
                start_new_session=True, preexec_fn=_limit_memory(limits.memory_mb),
            )
            try:
                proc.wait(timeout=limits.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return {"status": "timeout", "questions": {},
                        "message": f"did not finish within {limits.timeout:g} s (an endless loop or a very slow cell?)"}
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
            return {"status": "memory", "questions": {},
                    "message": f"the grading process died (signal {-proc.returncode}); most often: out of "
                               f"memory (limit {limits.memory_mb} MB)"}
        return {"status": "error", "questions": {}, "message": f"the grading process failed: {tail}"}


@dataclass
class Grader:
    layout: Layout
    submissions: Path
    out: Path
    limits: Limits = Limits()
    jobs: int = 2
    force: bool = False
    assignment: str | None = None
    autograder: Path | None = None

    def autograder_for(self, path: Path) -> tuple[str, Path]:
        """(assignment, autograder zip) for a submission; InvalidSubmission if it can't be told."""
        if self.autograder:
            return self.assignment or self.autograder.stem.removesuffix("-autograder"), self.autograder
        nb = read_submission_notebook(path)
        slug = self.assignment or assignment_of(nb)
        if not slug:
            raise InvalidSubmission("the notebook does not say which assignment it is (no otter metadata); "
                                    "grade it with --assignment SLUG")
        zip_path = self.layout.autograder_zip(slug)
        if not zip_path.is_file():
            raise InvalidSubmission(f"no autograder for assignment {slug!r} at {zip_path}; run `course build {slug}`")
        return slug, zip_path

    def grade_one(self, path: Path, row_path: Path) -> dict:
        started = time.perf_counter()
        row = {"submission": submission_id(path, self.submissions), "file": str(path.relative_to(self.submissions)),
               "sha256": sha256(path)}
        try:
            slug, zip_path = self.autograder_for(path)
        except InvalidSubmission as err:
            row.update(assignment="", autograder_sha256="", status="invalid", message=str(err), questions={})
        else:
            row.update(assignment=slug, autograder_sha256=sha256(zip_path))
            row.update(run_worker(path, zip_path, self.limits))
            possible = possible_points(read_tests(zip_path))
            for q, points in possible.items():  # every question gets a column, even on timeout
                row["questions"].setdefault(q, {"score": 0, "possible": points, "cases": []})
        row["scores"] = {q: v["score"] for q, v in sorted(row["questions"].items())}
        row["total"] = round(sum(row["scores"].values()), 4)
        row["possible"] = round(sum(v["possible"] for v in row["questions"].values()), 4)
        row["seconds"] = round(time.perf_counter() - started, 2)
        row_path.write_text(json.dumps(row, indent=1), encoding="utf-8")
        return row

    def is_current(self, row_path: Path, path: Path) -> bool:
        """A saved row still holds: same submission bytes, same autograder (if it got that far)."""
        if self.force or not row_path.is_file():
            return False
        try:
            row = json.loads(row_path.read_text(encoding="utf-8"))
        except ValueError:
            return False
        if row.get("sha256") != sha256(path):
            return False
        if not row.get("assignment"):  # rejected before an autograder was chosen
            return True
        zip_path = self.autograder or self.layout.autograder_zip(row["assignment"])
        return zip_path.is_file() and row.get("autograder_sha256") == sha256(zip_path)

    def run(self, log=print) -> list[dict]:
        if not self.submissions.is_dir():
            raise CourseError(f"submissions folder {self.submissions} does not exist")
        found, others = find_submissions(self.submissions)
        if others:
            log(f"note: {len(others)} file(s) are neither .ipynb nor .zip and are not graded: "
                + ", ".join(str(p.relative_to(self.submissions)) for p in others[:5]) + (" ..." if len(others) > 5 else ""))
        if not found:
            raise CourseError(f"no .ipynb or .zip submissions under {self.submissions}")
        rows_dir = self.out / "rows"
        rows_dir.mkdir(parents=True, exist_ok=True)
        todo, rows = [], {}
        for path in found:
            row_path = rows_dir / f"{submission_id(path, self.submissions)}.json"
            if self.is_current(row_path, path):
                rows[path] = json.loads(row_path.read_text(encoding="utf-8"))
            else:
                todo.append((path, row_path))
        if rows:
            log(f"{len(rows)} submission(s) already graded and unchanged (use --force to regrade)")
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            futures = {pool.submit(self.grade_one, p, r): p for p, r in todo}
            for future in tqdm(as_completed(futures), total=len(futures), desc="grading", unit="submission",
                               disable=not todo):
                rows[futures[future]] = future.result()
        ordered = [rows[p] for p in found]
        write_reports(ordered, self.out)
        return ordered


def write_reports(rows: list[dict], out: Path) -> None:
    """results.csv / results.json (one row per submission) and feedback/<submission>.txt."""
    questions = sorted({q for row in rows for q in row["scores"]})
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "assignment", "status", *questions, "total", "possible", "seconds", "message"])
        for row in rows:
            writer.writerow([row["submission"], row["assignment"], row["status"],
                             *(row["scores"].get(q, "") for q in questions),
                             row["total"], row["possible"], row["seconds"], row["message"]])
    summary = [{k: v for k, v in row.items() if k != "questions"} for row in rows]
    (out / "results.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    for row in rows:
        (feedback / f"{row['submission']}.txt").write_text(feedback_text(row), encoding="utf-8")


def feedback_text(row: dict) -> str:
    lines = [f"Submission: {row['file']}", f"Assignment: {row['assignment'] or '?'}",
             f"Score: {row['total']:g} / {row['possible']:g}   (status: {row['status']})"]
    if row["message"]:
        lines.append(f"Note: {row['message']}")
    for q, detail in sorted(row["questions"].items()):
        lines.append(f"\n{q}: {detail['score']:g} / {detail['possible']:g}")
        for case in detail["cases"]:
            if case["points"] or not case["passed"]:
                mark = "passed" if case["passed"] else "FAILED"
                kind = "hidden" if case["hidden"] else "public"
                lines.append(f"  - {case['test']} ({kind}, {case['points'] or 0:g} pt): {mark}")
                if not case["passed"] and case["message"]:
                    shown = _without_test_code(case["message"]) if case["hidden"] else case["message"].strip().splitlines()[-6:]
                    lines.extend("      " + line for line in shown)
    return "\n".join(lines) + "\n"


def _without_test_code(message: str) -> list[str]:
    """A hidden test's failure as the student may see it: the exception, not the failing line.

    Otter writes "Error at line N in test q:" and the line of test code before the exception;
    those two lines go, the verdict (what differed, or the student's own error) stays.
    """
    lines = [line for line in message.strip().splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.lstrip().startswith("Error at line"):
            return lines[:i] + lines[i + 2:]
    return lines


def format_table(rows: list[dict]) -> str:
    """The score table printed at the end of a run."""
    questions = sorted({q for row in rows for q in row["scores"]})
    header = ["submission", "status", *questions, "total"]
    body = [[row["submission"], row["status"], *(f"{row['scores'].get(q, 0):g}" for q in questions),
             f"{row['total']:g}/{row['possible']:g}"] for row in rows]
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for row in rows:
        if row["message"]:
            lines.append(f"{row['submission']}: {row['message'][:160]}")
    return "\n".join(lines)
