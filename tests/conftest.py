"""Session fixtures: one build and one sealed grading batch for the whole suite.

The batch holds the sample submissions, the known-wrong and known-correct variants, the students'
exported zips and the adversarial submissions; every test reads its rows, nothing is graded twice.
The batches are graded in the background from the first test on, while the tests marked
``beside_grading`` run; every other test waits for them (docs/developers/testing.md). nbgrader's
course folders are made in the background next, beside the tests after the batches; those that use
them come last but for the ones marked ``alone``, which wait for all of it.
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


from tests.support.adversarial import Listener  # noqa: E402
from autograder.build.assign import build  # noqa: E402
from autograder.layout import OUT_ENV, Layout  # noqa: E402
from tests.support.batches import REPO, SLUG, BackgroundGrading, BatchPreparation  # noqa: E402


#: Fixtures that build an assignment or grade a batch of notebooks: a test that uses one (even
#: through another fixture) is marked ``batch`` and left out of the fast lane (``make test-fast``:
#: ``pytest -m "not batch"``).
BATCH_FIXTURES = {"batch_preparation", "background_grading", "fresh_notebooks", "submissions", "graded",
                  "assignment_batch", "gradescope", "nbgrader_courses"}


#: The batches the collected tests grade (batches_to_grade), whether they use nbgrader's course
#: folders, their BackgroundGrading once started, and the test being set up.
WANTED = pytest.StashKey[list]()
WANTED_COURSES = pytest.StashKey[bool]()
BACKGROUND = pytest.StashKey[BackgroundGrading]()
CURRENT = pytest.StashKey[pytest.Item]()


def pytest_collection_modifyitems(items):
    for item in items:  # before `-m` deselects (a conftest's hook runs before pytest's own)
        if BATCH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.batch)


def pytest_collection_finish(session):
    """With the tests that will run known (after `-m`, `-k`, `--lf`, `--ff`): the batches they grade,
    and the tests that may share the machine with the background grading first, while it runs."""
    session.config.stash[WANTED] = batches_to_grade(session.items)
    session.config.stash[WANTED_COURSES] = any(uses_courses(item) for item in session.items)
    if session.config.stash[WANTED]:
        session.items.sort(key=run_order)


def beside_grading(item) -> bool:
    """Marked ``beside_grading`` (a module's mark covers its tests) and using no batch fixture."""
    return item.get_closest_marker("beside_grading") is not None and item.get_closest_marker("batch") is None


def alone(item) -> bool:
    """Marked ``alone``: it times what another program could stretch, so nothing runs in the background."""
    return item.get_closest_marker("alone") is not None


def uses_courses(item) -> bool:
    return "nbgrader_courses" in getattr(item, "fixturenames", ())


def run_order(item) -> int:
    """Beside the batches first; then the tests after them, while the courses are made; then those
    that read the courses; the ones that must run alone last (the sort keeps each group's order)."""
    if beside_grading(item):
        return 0
    if alone(item):
        return 3
    return 2 if uses_courses(item) else 1


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
        if names & {"submissions", "graded"}:  # kernel_attention's batch, with the attacks (and gradescope)
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
                                   request.config.stash[WANTED], kinds)
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
def background_grading(layout, batch_preparation, listener, tmp_path_factory, request):
    """Every batch the session grades, graded one after another from the session's first test on
    (BackgroundGrading); kernel_attention's with the attacks on the grader, aimed at what is made here."""
    from helpers.models import prepare_bundled_gpt

    # converted once, here, before anything else may: the preparation's student runs, the grading and
    # the marked tests that load GPT would otherwise race to convert it into the same folder
    prepare_bundled_gpt()
    attack_paths = {"host_marker": tmp_path_factory.mktemp("host") / "written_by_a_submission", "port": listener.port,
                    "planted_zip": Path("/tmp") / f"planted-{os.getpid()}-autograder.zip"}
    from tests.support.nbgrader_courses import LANES

    lanes = [tmp_path_factory.mktemp(f"nbgrader_lane{i}") for i in range(LANES)] \
        if request.config.stash[WANTED_COURSES] else []
    grading = BackgroundGrading(layout, batch_preparation, lambda slug: tmp_path_factory.mktemp(f"{slug}_results"),
                                attack_paths, course_lanes=lanes)
    grading.start()
    request.config.stash[BACKGROUND] = grading
    yield grading
    grading.close()


@pytest.fixture(scope="session", autouse=True)
def _grading_starts_with_the_session(request):
    """The background grading starts with the first test set up, whichever it is (asked for by name,
    so that the fast lane's tests do not count as using a batch fixture: it starts nothing there). If
    that test may not run beside it, it waits here, before its own fixtures are made."""
    if request.config.stash[WANTED]:
        wait_as_it_must(request.getfixturevalue("background_grading"), request.config.stash[CURRENT])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test not marked ``beside_grading`` waits, before any of its fixtures is made, until every
    batch is graded (BackgroundGrading); one marked ``alone`` until the courses are made too."""
    item.config.stash[CURRENT] = item
    grading = item.config.stash.get(BACKGROUND, None)
    if grading is not None:
        wait_as_it_must(grading, item)


def wait_as_it_must(grading: BackgroundGrading, item) -> None:
    """A test beside the grading goes on; one marked ``alone`` waits for all background work; any
    other waits until the batches are graded."""
    if alone(item):
        grading.wait_all()
    elif not beside_grading(item):
        grading.wait()


@pytest.fixture(scope="session")
def submissions(background_grading):
    """(folder, expected statuses per file, host paths the attacks aim at): kernel_attention's
    prepared batch, with the attacks on the grader added."""
    batch = background_grading.get(SLUG)
    return batch.folder, batch.expected, batch.paths


@pytest.fixture(scope="session")
def graded(background_grading):
    """{file: row} of the one sealed grading run, and its results folder."""
    batch = background_grading.get(SLUG)
    return batch.rows, batch.results


@pytest.fixture(scope="session")
def nbgrader_courses(background_grading):
    """{slug: course folder}: every assignment released and autograded by nbgrader, in the background
    once the batches are graded (support/nbgrader_courses.py)."""
    return background_grading.courses()


@pytest.fixture(scope="session")
def assignment_batch(background_grading):
    """``get(slug) -> GradedAssignment``: the assignment's prepared batch (its samples, variants from
    ``tests/<slug>_variants.py`` and a student's export) graded in one sealed run, in the background.
    kernel_attention's is the ``graded`` batch, which holds the attacks on the grader as well."""
    return background_grading.get
