"""``course grade``: grade every submission in a folder, in parallel, each sealed in a sandbox.

Every ``.ipynb`` or ``.zip`` found gets exactly one row (points per question, total, status
ok / error / timeout / memory / tampered / invalid, and a message), whatever the submission
does. Rows are saved atomically, one file per submission, as they finish, so an interrupted (even
killed) run resumes where it stopped; a row is reused only while the submission's bytes (sha256)
and the autograder are unchanged.

By default each submission runs sealed (:mod:`autograder.sandbox.session`): in a bubblewrap sandbox, or
where none starts and the grader is root, as a separate uid (POSIX separation), its score judged
outside from the values its tests collected (:mod:`autograder.judge.verdicts`). The run itself, with
its resume and progress bar, is :class:`autograder.grade.batch.Batch`, which ``course pdf`` drives too. ``unsafe=True`` is plain otter in a child process of
the grading user, which a determined submission can fool: only for code the instructor trusts.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from helpers.core.models import prepare_bundled_gpt

from autograder.autograder_zip import Autograder, NotACourseAutograder
from autograder.build import master
from autograder.grade.batch import Batch
from autograder.grade.results import (EXECUTED_KEY, ResultsFolder, limits_record, now, write_atomically, write_reports,
                                      write_run_record)
from autograder.grade.row import ROW_FORMAT, Row, Status, completed
from autograder.grade.submissions import (InvalidSubmission, assignment_slug, find_submissions, has_outputs,
                                          read_submission_notebook, sha256, submission_id)
from autograder.grade.unsealed import run_worker
from autograder.layout import CourseError, Layout, slug_of_autograder
from autograder.limits import SandboxLimits
from autograder.report.gradebook import read_roster, write_gradebooks
from autograder.sandbox.seal import SandboxUnavailable
from autograder.sandbox.session import SandboxesOnDemand, SandboxPool

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
    roster: Path | None = None  # a CSV telling whose each upload is (the gradebook's student column)
    # a notebook saved without outputs kept as its run executed it, for `course pdf --graded`
    # (about a second more per such submission; the suite's batches, which make no PDFs, turn it off)
    keep_executed: bool = True
    _prepared: set = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def autograder_for(self, path: Path) -> tuple[str, Path, nbformat.NotebookNode]:
        """(assignment, autograder zip, notebook) of a submission; InvalidSubmission if it can't be told."""
        nb = read_submission_notebook(path)
        if self.autograder:
            return self.assignment or slug_of_autograder(self.autograder), self.autograder, nb
        slug = assignment_slug(nb, self.assignment)
        zip_path = self.layout.autograder_zip(slug)
        if not zip_path.is_file():
            raise InvalidSubmission(f"no autograder for assignment {slug!r} at {zip_path}; run `course build {slug}`")
        return slug, zip_path, nb

    def loaded(self, zip_path: Path, sandboxes: SandboxPool) -> Autograder:
        """The autograder zip, read once per run (its public files extracted for the sandboxes)."""
        try:
            autograder = sandboxes.autograder(zip_path)
        except NotACourseAutograder as err:  # the instructor's zip, not the submission: stop the run, say why
            raise CourseError(str(err)) from None
        with self._lock:
            if zip_path not in self._prepared and autograder.needs_bundled_gpt:
                try:  # converted once here: the sandboxes see the cache read-only
                    prepare_bundled_gpt()
                except FileNotFoundError as err:  # the model package is missing: say so, not a traceback
                    raise CourseError(f"{zip_path.name}: its tests load the bundled GPT model: {err}") from None
            self._prepared.add(zip_path)
        return autograder

    def grade_one(self, path: Path, sandboxes: SandboxesOnDemand | None) -> Row:
        """One submission's row; ``sandboxes`` is the run's (None when grading unsafe)."""
        started = time.perf_counter()
        row: Row = {"format": ROW_FORMAT, "submission": submission_id(path, self.submissions),
                    "file": str(path.relative_to(self.submissions)), "sha256": sha256(path)}
        try:
            slug, zip_path, nb = self.autograder_for(path)
        except InvalidSubmission as err:
            row.update(assignment="", autograder_sha256="",
                       **completed({"status": Status.INVALID, "message": str(err), "questions": {}}, {}))
        else:
            if sandboxes is None:  # otter's own run: no sandbox, the zip read as otter reads it
                row.update(assignment=slug, autograder_sha256=sha256(zip_path))
                row.update(run_worker(path, zip_path, self.limits))
            else:  # read once per run: tests, points and the zip's hash
                pool = sandboxes.get()
                autograder = self.loaded(zip_path, pool)
                row.update(assignment=slug, autograder_sha256=autograder.sha256)
                keep = self.keep_executed and not has_outputs(nb)  # course pdf then takes this run's outputs
                result, executed = pool.grade(autograder, nbformat.writes(nb), self.limits, keep_notebook=keep)
                row.update(result)
                if executed is not None:
                    self.save_executed(row, executed)
        row["seconds"] = round(time.perf_counter() - started, 2)
        row["sealed"] = not self.unsafe
        row["limits"], row["graded_at"] = limits_record(self.limits), now()
        return row

    def save_executed(self, row: Row, text: str) -> None:
        """Keep the notebook as its grading run executed it (sent before the tests went in), marked
        with the submission's hash, for ``course pdf --graded``; one that does not parse is dropped."""
        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception:  # the kernel's output: nothing to keep, the grade stands
            return
        nb.metadata[EXECUTED_KEY] = {"sha256": row["sha256"], "setting": "grading"}
        target = ResultsFolder(self.out).executed_of(row["submission"])
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, nbformat.writes(nb))

    def still_holds(self, path: Path, row: dict) -> bool:
        """A saved row still holds: same submission bytes, same autograder (if it got that far), same mode."""
        if row.get("sha256") != sha256(path) or row.get("sealed", False) != (not self.unsafe):
            return False
        if not row.get("assignment"):  # rejected before an autograder was chosen
            return True
        zip_path = self.autograder or self.layout.autograder_zip(row["assignment"])
        return zip_path.is_file() and row.get("autograder_sha256") == sha256(zip_path)

    def start_sandboxes(self, sandboxes: SandboxesOnDemand, log=print) -> None:
        """Start the sandbox this machine allows before any work; a set-up problem stops the run
        with what to fix."""
        try:
            pool = sandboxes.get()
        except SandboxUnavailable as err:
            raise CourseError(f"submissions cannot be graded sealed on this machine yet: {err}") from None
        log(f"grading sealed ({pool.description}): each submission in its own sandbox, scores judged outside it")
        if pool.unseen_memory_note:
            log(pool.unseen_memory_note)

    def run(self, log=print) -> list[dict]:
        if self.autograder and not self.unsafe:  # a zip sealed grading cannot judge stops here, with what to do
            try:
                Autograder.read(self.autograder)
            except NotACourseAutograder as err:
                raise CourseError(str(err)) from None
        private = [self.submissions, self.out, self.layout.solutions, self.layout.out,
                   *([self.autograder] if self.autograder else [])]
        batch = Batch(self.submissions, self.out, ResultsFolder.ROWS, self.jobs, self.force)
        found = batch.find(log)
        rows = {path: row for path, row in batch.saved(found).items() if self.still_holds(path, row)}
        if rows:
            log(f"{len(rows)} submission(s) already graded and unchanged (use --force to regrade)")
        todo = [path for path in found if path not in rows]
        with SandboxesOnDemand(self.jobs, threads=self.threads, mode=self.sandbox_mode, private=private,
                               warm_judge=True) as sandboxes:
            if todo and self.unsafe:
                log("WARNING: grading UNSAFE (--unsafe): otter runs each submission in your own account")
            elif todo:
                self.start_sandboxes(sandboxes, log)
            chosen = None if self.unsafe else sandboxes
            rows.update(batch.work(todo, lambda path: self.grade_one(path, chosen), desc="grading"))
        rows = [rows[path] for path in found]
        write_reports(rows, self.out)
        _, strays = find_submissions(self.submissions)
        write_gradebooks(rows, [p.relative_to(self.submissions).as_posix() for p in strays], self.out,
                         self.written_questions(rows), read_roster(self.roster) if self.roster else None)
        write_run_record(self.out, self.submissions, self.limits, not self.unsafe, self.sandbox_mode)
        return rows

    def written_questions(self, rows: list[dict]) -> dict[str, list[tuple[str, float]]]:
        """Each graded assignment's written questions and their points, from its master (none when the
        master is not in this bundle, as for a zip given with --autograder)."""
        found = {}
        for slug in {row["assignment"] for row in rows if row["assignment"]}:
            try:
                nb = master.read(self.layout.master(slug))
            except (CourseError, OSError, ValueError):
                continue
            found[slug] = [(q.name, float(q.points or 0)) for q in master.questions(nb, manual=True)]
        return found
