"""What the session fixtures (conftest.py) and the tests share about the suite's grading batches:
the assignment the suite's one batch grades, its limits, how a batch is written and graded, and
how a row is read."""

from __future__ import annotations

import hashlib
import importlib
import multiprocessing
import os
import signal
import threading
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from autograder.grade.grader import Grader, Limits
from autograder.layout import Layout
from autograder.limits import threads_per_job
from autograder.samples import write_samples
from autograder.sandbox.protocol import thread_settings

SLUG = "kernel_attention"
REPO = Path(__file__).resolve().parents[2]
LIMITS = Limits(timeout=60, memory_mb=3072)
BATCH_LIMITS = {  # the batches that need other limits than LIMITS
    # its notebook grades in about 10 s two at a time (under 400 MB), and its batch holds the samples
    # and attacks that must run into the time or memory limit: lower limits end those sooner (this
    # machine fills memory at 125 to 250 MB/s), with each honest notebook still far inside them
    "kernel_attention": Limits(timeout=25, memory_mb=2048),
    # the notebook holds both pretrained models and its tests load their own copies
    "visualizing_attention": Limits(timeout=60, memory_mb=4096),
    # trains a small transformer for 10 steps and decodes with three strategies before its tests
    "summarization": Limits(timeout=120, memory_mb=3072),
}


#: torch's threads per grading process for the references: what a 16-core server would start (torch's
#: MKL caps a team at the cores, so a machine with fewer runs them with fewer, as its exec'd kernels do).
REFERENCE_THREADS = 16


def grade_batch(layout, folder: Path, out: Path, limits: Limits) -> dict:
    """{file: row} of one sealed grading batch. The references (the complete sample, its zip and
    the students' exports) are graded apart, with `course grade`'s default limits and torch at
    REFERENCE_THREADS threads per process, as a bigger machine would grade them: no correct
    submission may lose a point to a limit there. They are graded one at a time beside the batch
    (two at a time), so that neither run's last submission leaves a core idle."""
    references = [folder / "samples" / "complete.ipynb", folder / "samples" / "complete_export.zip",
                  *sorted((folder / "exports").glob("*.zip"))]
    aside = folder.parent / f"{folder.name}_references"
    moved = []
    try:
        for path in references:
            if path.exists():
                target = aside / path.relative_to(folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                path.rename(target)
                moved.append((path, target))
        quiet = lambda *args: None  # noqa: E731
        # the batches make no PDFs: no executed notebook is kept (tests/pdf checks keeping)
        with ThreadPoolExecutor(1) as beside:
            graded_references = beside.submit(
                Grader(layout, aside, out.parent / f"{out.name}_references", Limits(), jobs=1,
                       threads=REFERENCE_THREADS, keep_executed=False).run, log=quiet)
            rows = Grader(layout, folder, out, limits, jobs=2, keep_executed=False).run(log=quiet)
            rows += graded_references.result()
    finally:
        for path, target in moved:
            target.rename(path)
    return {row["file"]: row for row in rows}


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def variant_notebook(variant: dict) -> str:
    """The notebook a variant is graded in: its own, or one it shares (``"notebook"``) with
    variants whose bugs cannot hide each other's, to grade fewer notebooks."""
    return variant.get("notebook", variant["name"])


def write_batch(layout, slug, notebooks_dir, folder, variants, latex_kinds, grader_samples=False) -> dict:
    """Samples, known-wrong and known-correct variants and the students' real exports of one
    assignment under ``folder``; returns {file: expected statuses}. ``grader_samples``: with the
    samples that test the grader rather than the assignment (partial credit, a zip, a loop, a
    memory hog, a raise); one batch holds them."""
    from tests.support.notebook_edits import replace_function
    from tests.support.student_run import run_as_student

    samples = write_samples(layout, slug, folder / "samples", notebooks_dir=notebooks_dir, grader_samples=grader_samples)
    expected = {f"samples/{name}": statuses for name, statuses in samples.items()}  # file -> statuses
    complete = nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
    (folder / "variants").mkdir()
    edited = {}  # notebook name -> the complete notebook with the edits of every variant it holds
    for variant in variants:
        notebook = variant_notebook(variant)
        for function, source in variant.get("edits", [(variant.get("function"), variant.get("source"))]):
            edited[notebook] = replace_function(edited.get(notebook, complete), function, source)
    for notebook, nb in edited.items():
        nbformat.write(nb, folder / "variants" / f"{notebook}.ipynb")
    # The real export path: run the solved student notebook in a kernel; its last cell writes the zip.
    (folder / "exports").mkdir()
    for kind in latex_kinds:
        workdir = folder.parent / f"student_{kind}"  # outside the submissions folder
        exported = run_as_student(folder / "samples" / "complete.ipynb", workdir, latex=kind == "with_pdf")
        exported.rename(folder / "exports" / f"{kind}.zip")
        expected[f"exports/{kind}.zip"] = ("ok",)
    return expected


#: Batches prepared at once (each a build and a student's run in one kernel: one core each).
PREPARATION_JOBS = 2


@dataclass
class PreparedBatch:
    """An assignment built into ``notebooks`` and its submissions written into ``folder``, whose
    parent is the batch's own (it holds the students' runs, ``student_<kind>/``)."""

    notebooks: Path
    folder: Path
    expected: dict


def take_environment(environment: dict) -> None:
    """A worker process's environment: the session's as it was when the fixtures started, not as a
    test running meanwhile in the main process may have changed it (``monkeypatch.setenv``)."""
    os.environ.clear()
    os.environ.update(environment)


def prepare_batch(root: str, out: str, slug: str, base: str, latex_kinds: tuple, grader_samples: bool,
                  jobs: int, environment: dict) -> PreparedBatch:
    """In a worker process, one of ``jobs``: build ``slug`` and write its batch (:func:`write_batch`)
    under ``base``, with the kernels it starts given their share of the cores."""
    take_environment(environment)
    os.environ.update(thread_settings(threads_per_job(jobs)))
    from autograder.build.assign import build

    layout, base = Layout(Path(root), Path(out)), Path(base)
    notebooks, folder = base / "notebooks", base / "submissions"
    folder.mkdir(parents=True)
    build(layout, slug, notebooks_dir=notebooks, log=lambda *args: None)
    variants = importlib.import_module(f"tests.{slug}_variants")
    expected = write_batch(layout, slug, notebooks, folder, variants.WRONG + variants.CORRECT, latex_kinds, grader_samples)
    return PreparedBatch(notebooks, folder, expected)


class BatchPreparation:
    """Builds and writes the suite's batches ahead of their grading, PREPARATION_JOBS at a time.

    A build and a student's run each keep one core busy, and grading a batch keeps both: preparing
    every batch the session will grade before the first is graded fills the core the other would
    leave idle. ``wanted`` are those batches; one asked for outside them is prepared on its own.
    """

    def __init__(self, layout, base_folder, wanted: list[str], latex_kinds: dict[str, tuple],
                 jobs: int = PREPARATION_JOBS):
        self.layout, self.base_folder, self.wanted, self.latex_kinds = layout, base_folder, wanted, latex_kinds
        self.jobs = jobs
        self.environment = dict(os.environ)
        self.futures: dict[str, Future] = {}
        self.pool: ProcessPoolExecutor | None = None
        self.lock = threading.Lock()  # asked for by the background grading's thread and the main one

    def _submit(self, slug: str) -> None:
        if self.pool is None:
            self.pool = ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"))
        self.futures[slug] = self.pool.submit(
            prepare_batch, str(self.layout.root), str(self.layout.out), slug, str(self.base_folder(slug)),
            self.latex_kinds.get(slug, ("without_latex",)), slug == SLUG, self.jobs, self.environment)

    def get(self, slug: str) -> PreparedBatch:
        """The prepared batch of ``slug``; the first call starts every wanted one, and waits for all
        of them (grading the first while the rest are prepared would slow both)."""
        with self.lock:
            if not self.futures and slug in self.wanted:
                for each in self.wanted:
                    self._submit(each)
                for future in list(self.futures.values()):
                    future.exception()  # wait; a failure is raised by the get() that asks for that batch
            if slug not in self.futures:
                self._submit(slug)
        return self.futures[slug].result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def failures(row: dict, hidden: bool) -> set[str]:
    """Names of the failed hidden (or public) tests in a grading row."""
    return {case["test"] for q in row["questions"].values() for case in q["cases"]
            if case["hidden"] == hidden and not case["passed"]}


@dataclass
class GradedAssignment:
    """One assignment's sealed grading run: rows by file, expected statuses, the submissions folder
    (its parent holds the student's run, ``student_without_latex/``), the fresh build and the
    results folder; kernel_attention's also has ``paths``, what its attacks aim at (and the folder's
    digests before and after grading)."""

    rows: dict
    expected: dict
    folder: Path
    notebooks: Path
    results: Path
    paths: dict | None = None


def add_attacks(layout, folder: Path, expected: dict, paths: dict) -> tuple[dict, dict]:
    """Write the attacks on the grader into ``folder/adversarial`` (kernel_attention's batch):
    (expected statuses with theirs added, ``paths`` with what they aim at added). ``paths`` brings
    the results folder, the host file a submission must not write, the listener's port and where
    to plant a copy of the autograder zip (outside the submissions folder)."""
    from tests.support.adversarial import make_attacks, malformed_files, metadata_attack, with_attack
    from tests.support.seal_attacks import seal_attacks

    expected = dict(expected)
    complete = nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
    blank = nbformat.read(folder / "samples" / "blank.ipynb", as_version=4)
    paths = {**paths, "repo": REPO, "autograder_zip": layout.autograder_zip(SLUG), "submissions": folder}
    (folder / "adversarial").mkdir()
    for attack in make_attacks(paths) + seal_attacks():
        nbformat.write(with_attack(blank, attack["cell"]), folder / "adversarial" / f"{attack['name']}.ipynb")
        expected[f"adversarial/{attack['name']}.ipynb"] = attack["expect"]
    planted = Path(paths["planted_zip"])
    planted.write_bytes(layout.autograder_zip(SLUG).read_bytes())
    nbformat.write(metadata_attack(blank, planted), folder / "adversarial" / "climbs_to_a_planted_autograder.ipynb")
    expected["adversarial/climbs_to_a_planted_autograder.ipynb"] = ("invalid",)
    for name, statuses in malformed_files(folder / "adversarial", nbformat.writes(complete)).items():
        expected[f"adversarial/{name}"] = statuses
    paths["digest_before"] = tree_digest(folder)
    return expected, paths


def grade_prepared(root: str, out: str, slug: str, prepared: PreparedBatch, results: str, environment: dict,
                   attack_paths: dict | None) -> GradedAssignment:
    """In the background grading's worker process: grade one prepared batch, kernel_attention's
    with the attacks on the grader added first (``attack_paths``: see :func:`add_attacks`)."""
    take_environment(environment)
    layout, expected, paths = Layout(Path(root), Path(out)), prepared.expected, None
    if attack_paths is not None:
        expected, paths = add_attacks(layout, prepared.folder, expected, attack_paths)
    rows = grade_batch(layout, prepared.folder, Path(results), BATCH_LIMITS.get(slug, LIMITS))
    if paths is not None:
        paths["digest_after_grading"] = tree_digest(prepared.folder)
    return GradedAssignment(rows, expected, prepared.folder, prepared.notebooks, Path(results), paths)


class BackgroundGrading:
    """Grades the session's batches one after another, from its first test on, in a worker process
    of its own (its environment is the session's at the start, whatever a test sets meanwhile);
    then, if ``course_lanes`` are given, makes the nbgrader course folders in those folders
    (support/nbgrader_courses.py), in the same process.

    The tests marked ``beside_grading`` run first, meanwhile: they start no sandbox, look at no
    process but their own and time nothing another program could stretch, so they can share the
    machine with the grading (whose time limits leave room for them), and they use the cores that a
    batch's slowest submissions (the attacks that run into the time limit) and the preparation's
    last build leave idle. Every other test waits until the batches are graded (:meth:`wait`), so
    the seal's checks that look at the whole machine (no runner left anywhere) see only their own.
    The courses start then, beside those tests: nbgrader's kernels are plain processes of the
    session's user (no sandbox, no runner), and most of those tests leave a core idle. Tests
    marked ``alone`` time what a neighbour could stretch: they wait for the courses too
    (:meth:`wait_all`).
    """

    def __init__(self, layout, preparation: BatchPreparation, results_folder: Callable[[str], Path],
                 attack_paths: dict, course_lanes: list[Path] = ()):
        self.layout, self.preparation, self.attack_paths = layout, preparation, attack_paths
        self.results_folder = results_folder
        self.course_lanes = [str(lane) for lane in course_lanes]
        self.courses_future: Future | None = Future() if self.course_lanes else None
        self.environment = dict(os.environ)
        self.futures: dict[str, Future] = {slug: Future() for slug in preparation.wanted}
        self.results = {slug: results_folder(slug) for slug in self.futures}  # made here, in the main thread
        self.pool: ProcessPoolExecutor | None = None
        self.worker_pid: int | None = None
        self.thread = threading.Thread(target=self._grade_all, name="background-grading", daemon=True)

    def _start_pool(self) -> None:
        # a ProcessPoolExecutor, not a multiprocessing.Pool: a worker that dies (killed for its memory,
        # say) breaks the pool and fails the batches waiting on it, where a Pool would wait forever
        self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        self.worker_pid = self.pool.submit(os.getpid).result()  # started now, from the main thread

    def start(self) -> None:
        if self.futures or self.courses_future:
            self._start_pool()
            self.thread.start()

    def _grade(self, slug: str) -> GradedAssignment:
        prepared = self.preparation.get(slug)
        return self.pool.submit(grade_prepared, str(self.layout.root), str(self.layout.out), slug, prepared,
                                str(self.results[slug]), self.environment,
                                {**self.attack_paths, "results": self.results[slug]} if slug == SLUG else None).result()

    def _settle(self, slug: str, future: Future) -> None:
        try:
            future.set_result(self._grade(slug))
        except BaseException as error:  # raised by the get() that asks for this batch
            future.set_exception(error)

    def _grade_all(self) -> None:
        for slug, future in list(self.futures.items()):
            if future.set_running_or_notify_cancel():
                self._settle(slug, future)
        if self.courses_future is not None and self.courses_future.set_running_or_notify_cancel():
            from tests.support.nbgrader_courses import make_courses

            try:
                self.courses_future.set_result(self.pool.submit(
                    make_courses, str(self.layout.root), str(self.layout.out), self.course_lanes,
                    self.environment).result())
            except BaseException as error:  # raised by the courses() of the tests that ask for them
                self.courses_future.set_exception(error)

    def get(self, slug: str) -> GradedAssignment:
        """The graded batch of ``slug``, waiting for it; one no collected test named is graded now."""
        if slug not in self.futures:
            self.results[slug] = self.results_folder(slug)
            if self.pool is None:
                self._start_pool()
            self.futures[slug] = Future()
            self._settle(slug, self.futures[slug])
        return self.futures[slug].result()

    def courses(self) -> dict[str, Path]:
        """{slug: nbgrader course folder}, waiting for them (made only with ``course_lanes``)."""
        if self.courses_future is None:
            raise RuntimeError("no collected test asked for the nbgrader courses (conftest: WANTED_COURSES)")
        return self.courses_future.result()

    def wait(self) -> None:
        """Until every batch is graded (or has failed)."""
        wait(list(self.futures.values()))

    def wait_all(self) -> None:
        """Until the batches are graded and the courses made (or have failed): nothing runs then."""
        wait([*self.futures.values(), *([self.courses_future] if self.courses_future else [])])

    def close(self) -> None:
        """Stop: batches not started are not graded, and a run still going (the session ended early:
        ``-x``, an error) is ended, its sandboxes with it."""
        everything = [*self.futures.values(), *([self.courses_future] if self.courses_future else [])]
        for future in everything:
            future.cancel()
        if self.pool is not None:
            if not all(future.done() for future in everything) and self.worker_pid:
                try:
                    os.kill(self.worker_pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            self.pool.shutdown(wait=True, cancel_futures=True)
        Path(self.attack_paths["planted_zip"]).unlink(missing_ok=True)
