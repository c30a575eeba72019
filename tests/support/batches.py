"""What the session fixtures (conftest.py) and the tests share about the suite's grading batches:
the assignment the suite's one batch grades, its limits, how a batch is written and graded, and
how a row is read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.grade.grader import Grader, Limits
from autograder.samples import write_samples

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


#: torch's threads per grading process for the references: what a 16-core server would start.
REFERENCE_THREADS = 16


def grade_batch(layout, folder: Path, out: Path, limits: Limits) -> dict:
    """{file: row} of one sealed grading batch. The references (the complete sample, its zip and
    the students' exports) are graded apart, two at once, with `course grade`'s default limits and
    torch at REFERENCE_THREADS threads per process, as a bigger machine would grade them: no
    correct submission may lose a point to a limit there."""
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
        rows = Grader(layout, folder, out, limits, jobs=2, keep_executed=False).run(log=quiet)
        rows += Grader(layout, aside, out.parent / f"{out.name}_references", Limits(), jobs=2,
                       threads=REFERENCE_THREADS, keep_executed=False).run(log=quiet)
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
