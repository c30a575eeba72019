"""What the session fixtures (conftest.py) and the tests share about the suite's grading batches:
the assignment the suite's one batch grades, its limits, how a batch is written and graded, and
how a row is read."""

from __future__ import annotations

import hashlib
import importlib
import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

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


def prepare_batch(root: str, out: str, slug: str, base: str, latex_kinds: tuple, grader_samples: bool,
                  jobs: int) -> PreparedBatch:
    """In a worker process, one of ``jobs``: build ``slug`` and write its batch (:func:`write_batch`)
    under ``base``, with the kernels it starts given their share of the cores."""
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
        self.futures: dict[str, Future] = {}
        self.pool: ProcessPoolExecutor | None = None

    def _submit(self, slug: str) -> None:
        if self.pool is None:
            self.pool = ProcessPoolExecutor(self.jobs, mp_context=multiprocessing.get_context("spawn"))
        self.futures[slug] = self.pool.submit(
            prepare_batch, str(self.layout.root), str(self.layout.out), slug, str(self.base_folder(slug)),
            self.latex_kinds.get(slug, ("without_latex",)), slug == SLUG, self.jobs)

    def get(self, slug: str) -> PreparedBatch:
        """The prepared batch of ``slug``; the first call starts every wanted one, and waits for all
        of them (grading the first while the rest are prepared would slow both)."""
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
    (its parent holds the student's run, ``student_without_latex/``) and the fresh build."""

    rows: dict
    expected: dict
    folder: Path
    notebooks: Path
