"""Session fixtures: one build and one sealed grading batch for the whole suite.

The batch holds the sample submissions, the known-wrong and known-correct variants, the students'
exported zips and the adversarial submissions; every test reads its rows, nothing is graded twice.
What the fixtures and the tests share (the constants, writing and grading a batch, reading a row)
is in ``support/batches.py``: no module imports this one.
"""

import os
from pathlib import Path

import pytest

# tests import the suite's support modules (tests.support) and each assignment's known-wrong and
# known-correct variants (tests/<slug>_variants.py) as modules of the tests package
# builds, grading runs and tests use the fast training/timing budget
os.environ.setdefault("COURSE_SETTING", "grading")

import nbformat  # noqa: E402

from tests.support.adversarial import Listener  # noqa: E402
from autograder.build.assign import build  # noqa: E402
from autograder.layout import OUT_ENV, Layout  # noqa: E402
from tests.support.batches import (BATCH_LIMITS, LIMITS, REPO, SLUG, BatchPreparation, GradedAssignment,  # noqa: E402
                                   grade_batch, tree_digest)


#: Fixtures that build an assignment or grade a batch of notebooks: a test that uses one (even
#: through another fixture) is marked ``batch`` and left out of the fast lane (``make test-fast``:
#: ``pytest -m "not batch"``).
BATCH_FIXTURES = {"batch_preparation", "fresh_notebooks", "submissions", "graded", "assignment_batch", "gradescope",
                  "nbgrader_courses"}


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


def batches_to_grade(items) -> list[str]:
    """The assignments whose batch the selected tests grade, in the order of the layout."""
    slugs = Layout(REPO).slugs()
    wanted = set()
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "submissions" in names:  # kernel_attention's batch, with the attacks (graded, gradescope)
            wanted.add(SLUG)
        if "nbgrader_courses" in names:  # its courses carry the golden values of every batch's build
            wanted.update(slugs)
        if "assignment_batch" in names:
            params = getattr(getattr(item, "callspec", None), "params", {})
            wanted.add(params.get("slug") or getattr(item.module, "SLUG", SLUG))
    return [slug for slug in slugs if slug in wanted]


@pytest.fixture(scope="session")
def batch_preparation(layout, tmp_path_factory, request):
    """Every batch the selected tests grade, built and written two at a time (BatchPreparation)."""
    from helpers.submission import latex_available

    kinds = {SLUG: ("with_pdf", "without_latex") if latex_available() else ("without_latex",)}
    preparation = BatchPreparation(layout, lambda slug: tmp_path_factory.mktemp(f"{slug}_batch"),
                                   batches_to_grade(request.session.items), kinds)
    yield preparation
    preparation.close()


@pytest.fixture(scope="session")
def fresh_notebooks(layout, batch_preparation, tmp_path_factory):
    """kernel_attention's student notebooks, freshly built (with its batch when the session grades it)."""
    if SLUG in batch_preparation.wanted:
        return batch_preparation.get(SLUG).notebooks
    folder = tmp_path_factory.mktemp("notebooks")
    build(layout, SLUG, notebooks_dir=folder, log=lambda *args: None)
    return folder


@pytest.fixture(scope="session")
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="session")
def submissions(layout, batch_preparation, listener, tmp_path_factory):
    """(folder, expected statuses per file, host paths the attacks aim at): kernel_attention's
    prepared batch, with the attacks on the grader added."""
    from tests.support.adversarial import make_attacks, malformed_files, metadata_attack, with_attack

    prepared = batch_preparation.get(SLUG)
    folder, expected = prepared.folder, dict(prepared.expected)
    results = tmp_path_factory.mktemp("results")
    complete = nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
    blank = nbformat.read(folder / "samples" / "blank.ipynb", as_version=4)
    # What a student might try against the grader.
    paths = {"repo": REPO, "autograder_zip": layout.autograder_zip(SLUG), "submissions": folder,
             "results": results, "host_marker": tmp_path_factory.mktemp("host") / "written_by_a_submission",
             "port": listener.port}
    from tests.support.seal_attacks import seal_attacks

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


@pytest.fixture(scope="session")
def assignment_batch(layout, batch_preparation, tmp_path_factory, request):
    """``get(slug) -> GradedAssignment``: grade the assignment's prepared batch (its samples,
    variants from ``tests/<slug>_variants.py`` and a student's export) in one sealed run, on first use.
    kernel_attention's is the ``graded`` batch, which holds the attacks on the grader as well."""
    batches: dict[str, GradedAssignment] = {}

    def get(slug: str) -> GradedAssignment:
        if slug == SLUG and slug not in batches:
            folder, expected, _ = request.getfixturevalue("submissions")
            rows, _ = request.getfixturevalue("graded")
            batches[slug] = GradedAssignment(rows, expected, folder, request.getfixturevalue("fresh_notebooks"))
        if slug not in batches:
            prepared = batch_preparation.get(slug)
            limits = BATCH_LIMITS.get(slug, LIMITS)
            rows = grade_batch(layout, prepared.folder, tmp_path_factory.mktemp(f"{slug}_results"), limits)
            batches[slug] = GradedAssignment(rows, prepared.expected, prepared.folder, prepared.notebooks)
        return batches[slug]

    return get
