"""``course grade``: grade every submission in a folder, in parallel, each sealed in a sandbox.

Every ``.ipynb`` or ``.zip`` found gets exactly one row (points per question, total, status
ok / error / timeout / memory / tampered / invalid, and a message), whatever the submission
does. Rows are saved atomically, one file per submission, as they finish, so an interrupted (even
killed) run resumes where it stopped; a row is reused only while the submission's bytes (sha256)
and the autograder are unchanged.

By default each submission runs sealed (:mod:`autograder.sealed`): in a bubblewrap sandbox, or
where none starts and the grader is root, as a separate uid (POSIX separation), its score judged
outside from the values its tests collected. ``unsafe=True`` is plain otter in a child process of
the grading user, which a determined submission can fool: only for code the instructor trusts.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from tqdm.auto import tqdm

from helpers.core.models import prepare_bundled_gpt

from .layout import CourseError, Layout
from .otter_io import possible_points, read_tests
from .reports import limits_record, now, write_atomically, write_reports, write_run_record
from .sandbox import SandboxLimits, SandboxUnavailable
from .sealed import Autograder, SandboxPool
from .submissions import (SLUG_PATTERN, InvalidSubmission, assignment_of, find_submissions, read_submission_notebook,
                          sha256, submission_id)
from .worker import run_worker

#: Time, memory (all processes of a submission together), process and output limits.
Limits = SandboxLimits


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
    unsafe: bool = False  # plain otter grading in the grader's account: only for trusted code
    threads: int | None = None  # torch/OpenMP threads per submission (default: the cores shared among jobs)
    sandbox_mode: str | None = None  # auto, bubblewrap or posix (default: $COURSE_SANDBOX, else auto)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _prepared: set = field(default_factory=set, init=False, repr=False)

    def autograder_for(self, path: Path) -> tuple[str, Path, nbformat.NotebookNode]:
        """(assignment, autograder zip, notebook) of a submission; InvalidSubmission if it can't be told."""
        nb = read_submission_notebook(path)
        if self.autograder:
            return self.assignment or self.autograder.stem.removesuffix("-autograder"), self.autograder, nb
        slug = self.assignment or assignment_of(nb)
        if not slug:
            raise InvalidSubmission("the notebook does not say which assignment it is (no otter metadata); "
                                    "grade it with --assignment SLUG")
        if not isinstance(slug, str) or not SLUG_PATTERN.fullmatch(slug):
            raise InvalidSubmission(f"the notebook names the assignment {str(slug)[:60]!r}, which is not an "
                                    "assignment name (lowercase letters, digits and _)")
        zip_path = self.layout.autograder_zip(slug)
        if not zip_path.is_file():
            raise InvalidSubmission(f"no autograder for assignment {slug!r} at {zip_path}; run `course build {slug}`")
        return slug, zip_path, nb

    def loaded(self, zip_path: Path) -> Autograder:
        """The autograder zip, read once per run (its public files extracted for the sandboxes)."""
        autograder = self._pool.autograder(zip_path)
        with self._lock:
            if zip_path not in self._prepared and any("load_gpt(" in s["source"] for s in autograder.sources):
                try:  # converted once here: the sandboxes see the cache read-only
                    prepare_bundled_gpt()
                except FileNotFoundError as err:  # the model package is missing: say so, not a traceback
                    raise CourseError(f"{zip_path.name}: its tests load the bundled GPT model: {err}") from None
            self._prepared.add(zip_path)
        return autograder

    def grade_one(self, path: Path, row_path: Path) -> dict:
        started = time.perf_counter()
        row = {"submission": submission_id(path, self.submissions), "file": str(path.relative_to(self.submissions)),
               "sha256": sha256(path)}
        try:
            slug, zip_path, nb = self.autograder_for(path)
        except InvalidSubmission as err:
            row.update(assignment="", autograder_sha256="", status="invalid", message=str(err), questions={})
        else:
            if self.unsafe:  # otter's own run: no pool, the zip read as otter reads it
                row.update(assignment=slug, autograder_sha256=sha256(zip_path))
                row.update(run_worker(path, zip_path, self.limits))
                possible = possible_points(read_tests(zip_path))
            else:  # read once per run: tests, points and the zip's hash
                autograder = self.loaded(zip_path)
                row.update(assignment=slug, autograder_sha256=autograder.sha256)
                row.update(self._pool.grade(autograder, nbformat.writes(nb), self.limits))
                possible = possible_points(autograder.tests)
            for q, points in possible.items():  # every question gets a column, even on timeout
                row["questions"].setdefault(q, {"score": 0, "possible": points, "cases": []})
        row["scores"] = {q: v["score"] for q, v in sorted(row["questions"].items())}
        row["total"] = round(sum(row["scores"].values()), 4)
        row["possible"] = round(sum(v["possible"] for v in row["questions"].values()), 4)
        row["seconds"] = round(time.perf_counter() - started, 2)
        row["sealed"] = not self.unsafe
        row["limits"], row["graded_at"] = limits_record(self.limits), now()
        write_atomically(row_path, json.dumps(row, indent=1))
        return row

    def is_current(self, row_path: Path, path: Path) -> bool:
        """A saved row still holds: same submission bytes, same autograder (if it got that far), same mode."""
        if self.force or not row_path.is_file():
            return False
        try:
            row = json.loads(row_path.read_text(encoding="utf-8"))
        except ValueError:
            return False
        if row.get("sha256") != sha256(path) or row.get("sealed", False) != (not self.unsafe):
            return False
        if not row.get("assignment"):  # rejected before an autograder was chosen
            return True
        zip_path = self.autograder or self.layout.autograder_zip(row["assignment"])
        return zip_path.is_file() and row.get("autograder_sha256") == sha256(zip_path)

    def start_sandboxes(self) -> None:
        """Start the sandbox this machine allows; a set-up problem stops the run with what to fix."""
        private = [self.submissions, self.out, self.layout.solutions, self.layout.out]
        self._pool = SandboxPool(self.jobs, threads=self.threads, mode=self.sandbox_mode,
                                 private=[*private, *([self.autograder] if self.autograder else [])])
        try:
            self._pool.start()
        except SandboxUnavailable as err:
            raise CourseError(f"submissions cannot be graded sealed on this machine yet: {err}") from None

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
        if todo and not self.unsafe:
            self.start_sandboxes()
            log(f"grading sealed ({self._pool.description}): each submission in its own sandbox, scores judged "
                "outside it")
        elif todo:
            log("WARNING: grading UNSAFE (--unsafe): otter runs each submission in your own account")
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
                futures = {pool.submit(self.grade_one, p, r): p for p, r in todo}
                for future in tqdm(as_completed(futures), total=len(futures), desc="grading", unit="submission",
                                   disable=not todo):
                    rows[futures[future]] = future.result()
        finally:
            if todo and not self.unsafe:
                self._pool.close()
        ordered = [rows[p] for p in found]
        write_reports(ordered, self.out)
        write_run_record(self.out, self.submissions, self.limits, not self.unsafe, self.sandbox_mode)
        return ordered


