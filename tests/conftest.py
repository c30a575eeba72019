"""Session fixtures: one build and one sealed grading batch for the whole suite.

The batch holds the sample submissions, the known-wrong and known-correct variants, the students'
exported zips and the adversarial submissions; every test reads its rows, nothing is graded twice.
"""

import hashlib
import importlib
import os
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

# tests import their data modules (known-wrong variants, notebook edits) by plain name
sys.path.insert(0, str(Path(__file__).parent))
# builds, grading runs and tests use the fast training/timing budget
os.environ.setdefault("COURSE_SETTING", "grading")

import nbformat  # noqa: E402

from autograder.build import build  # noqa: E402
from autograder.grade import Grader, Limits  # noqa: E402
from autograder.layout import OUT_ENV, Layout  # noqa: E402
from autograder.samples import write_samples  # noqa: E402

SLUG = "kernel_attention"
REPO = Path(__file__).resolve().parents[1]
LIMITS = Limits(timeout=60, memory_mb=3072)
BATCH_LIMITS = {  # the batches that need other limits than LIMITS
    # its notebook grades in under 20 s, and its batch holds the samples and attacks that must run
    # into the time limit: a shorter one saves a minute
    "kernel_attention": Limits(timeout=40, memory_mb=3072),
    # the notebook holds both pretrained models and its tests load their own copies
    "visualizing_attention": Limits(timeout=60, memory_mb=4096),
    # trains a small transformer for 10 steps and decodes with three strategies before its tests
    "summarization": Limits(timeout=120, memory_mb=3072),
}


#: Fixtures that build an assignment or grade a batch of notebooks: a test that uses one (even
#: through another fixture) is marked ``batch`` and left out of the fast lane (``make test-fast``:
#: ``pytest -m "not batch"``).
BATCH_FIXTURES = {"fresh_notebooks", "submissions", "graded", "assignment_batch", "gradescope", "nbgrader_courses"}


def pytest_collection_modifyitems(items):
    for item in items:
        if BATCH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.batch)


@pytest.fixture(scope="session")
def layout(tmp_path_factory):
    """The bundle, with its generated files (autograder zips) in a temp folder: the checkout's own
    out/ is left alone, and two runs of the suite never build into the same place. ``course``
    commands the tests start find it through $COURSE_OUT."""
    out = tmp_path_factory.mktemp("out")
    os.environ[OUT_ENV] = str(out)
    return Layout(REPO, out)


@pytest.fixture(scope="session")
def fresh_notebooks(layout, tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebooks")
    build(layout, SLUG, notebooks_dir=folder, log=lambda *args: None)
    return folder


class Listener:
    """A TCP server on loopback that counts connections: the target of the network attack."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        for _ in range(20_000):  # bounded: at most ~3 hours of half-second waits
            if self.stopped.is_set():
                return
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stopped.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture(scope="session")
def listener():
    server = Listener()
    yield server
    server.close()


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
        rows = Grader(layout, folder, out, limits, jobs=2).run(log=quiet)
        rows += Grader(layout, aside, out.parent / f"{out.name}_references", Limits(), jobs=2,
                       threads=REFERENCE_THREADS).run(log=quiet)
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
    from notebook_edits import replace_function
    from student_run import run_as_student

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


@pytest.fixture(scope="session")
def submissions(layout, fresh_notebooks, listener, tmp_path_factory):
    """(folder, expected statuses per file, host paths the attacks aim at)."""
    from adversarial import make_attacks, malformed_files, metadata_attack, with_attack
    from kernel_attention_variants import CORRECT, WRONG

    from helpers.submission import latex_available

    folder = tmp_path_factory.mktemp("submissions")
    results = tmp_path_factory.mktemp("results")
    kinds = ("with_pdf", "without_latex") if latex_available() else ("without_latex",)
    expected = write_batch(layout, SLUG, fresh_notebooks, folder, WRONG + CORRECT, kinds, grader_samples=True)
    complete = nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
    blank = nbformat.read(folder / "samples" / "blank.ipynb", as_version=4)
    # What a student might try against the grader.
    paths = {"repo": REPO, "autograder_zip": layout.autograder_zip(SLUG), "submissions": folder,
             "results": results, "host_marker": tmp_path_factory.mktemp("host") / "written_by_a_submission",
             "port": listener.port}
    from seal_attacks import seal_attacks

    attacks = make_attacks(paths) + seal_attacks()
    (folder / "adversarial").mkdir()
    for attack in attacks:
        nbformat.write(with_attack(blank, attack["cell"]), folder / "adversarial" / f"{attack['name']}.ipynb")
        expected[f"adversarial/{attack['name']}.ipynb"] = attack["expect"]
    planted = Path("/tmp") / f"planted-{os.getpid()}-autograder.zip"
    planted.write_bytes((layout.autograder_zip(SLUG)).read_bytes())
    paths["planted_zip"] = planted
    nbformat.write(metadata_attack(blank, planted), folder / "adversarial" / "climbs_to_a_planted_autograder.ipynb")
    expected["adversarial/climbs_to_a_planted_autograder.ipynb"] = ("invalid",)
    for name, statuses in malformed_files(folder / "adversarial", nbformat.writes(complete)).items():
        expected[f"adversarial/{name}"] = statuses
    paths["digest_before"] = tree_digest(folder)
    yield folder, expected, paths
    planted.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def graded(layout, submissions):
    """{file: row} of the one sealed grading run, and its results folder."""
    folder, _, paths = submissions
    out = paths["results"]
    rows = grade_batch(layout, folder, out, BATCH_LIMITS[SLUG])
    paths["digest_after_grading"] = tree_digest(folder)
    return rows, out


def failures(row: dict, hidden: bool) -> set[str]:
    """Names of the failed hidden (or public) tests in a grading row."""
    return {case["test"] for q in row["questions"].values() for case in q["cases"]
            if case["hidden"] == hidden and not case["passed"]}


@dataclass
class Batch:
    """One assignment's sealed grading run: rows by file, expected statuses, the submissions folder
    (its parent holds the student's run, ``student_without_latex/``) and the fresh build."""

    rows: dict
    expected: dict
    folder: Path
    notebooks: Path


@pytest.fixture(scope="session")
def assignment_batch(layout, tmp_path_factory, request):
    """``get(slug) -> Batch``: build the assignment and grade its samples, variants
    (``tests/<slug>_variants.py``) and a student's export in one sealed run, on first use.
    kernel_attention's is the ``graded`` batch, which holds the attacks on the grader as well."""
    batches: dict[str, Batch] = {}

    def get(slug: str) -> Batch:
        if slug == SLUG and slug not in batches:
            folder, expected, _ = request.getfixturevalue("submissions")
            rows, _ = request.getfixturevalue("graded")
            batches[slug] = Batch(rows, expected, folder, request.getfixturevalue("fresh_notebooks"))
        if slug not in batches:
            variants = importlib.import_module(f"{slug}_variants")
            notebooks = tmp_path_factory.mktemp(f"{slug}_notebooks")
            build(layout, slug, notebooks_dir=notebooks, log=lambda *args: None)
            folder = tmp_path_factory.mktemp(f"{slug}_submissions")
            expected = write_batch(layout, slug, notebooks, folder, variants.WRONG + variants.CORRECT, ("without_latex",))
            limits = BATCH_LIMITS.get(slug, LIMITS)
            rows = grade_batch(layout, folder, tmp_path_factory.mktemp(f"{slug}_results"), limits)
            batches[slug] = Batch(rows, expected, folder, notebooks)
        return batches[slug]

    return get
