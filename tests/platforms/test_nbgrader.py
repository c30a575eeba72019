"""nbgrader interop on every assignment: the course folder `course build --nbgrader` writes, what
`nbgrader generate_assignment` and `nbgrader autograde` make of it, `course grade`'s scores in the
gradebook, and the formgrader's grading page on them.

The course folders (two lanes, each its own gradebook.db and formgrader server) are made in the
background once the batches are graded (tests/support/nbgrader_courses.py, the ``nbgrader_courses``
fixture in conftest): per assignment nbgrader autogrades the source (reference solution), the
untouched release, and the source with the edits of one known-wrong variant notebook that
`course grade` graded in the assignment's batch.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder.layout import CourseError, Layout
from autograder.platforms.nbgrader.gradebook import student_of, write_gradebook
from tests.support.batches import SLUG as KERNEL_SLUG, failures
from tests.support.nbgrader_courses import wrong_group

SLUGS = Layout.find(Path(__file__)).slugs()  # every assignment that exists


def course_grade_rows(slug, request) -> dict:
    """``course grade``'s rows of the assignment's one sealed batch."""
    if slug == KERNEL_SLUG:
        return request.getfixturevalue("graded")[0]
    return request.getfixturevalue("assignment_batch")(slug).rows


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gradebook(course: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{course / 'gradebook.db'}")


def hidden_failures_in(course: Path, slug: str, student: str) -> tuple[set[str], float, float]:
    """(failed autograded cells, code score, max code score) of one autograded submission."""
    with gradebook(course) as gb:
        sub = gb.find_submission_notebook(slug, slug, student)
        failed = {g.name for g in sub.grades if g.cell_type == "code" and (g.score or 0) < g.max_score}
        return failed, sub.code_score, sub.max_code_score


def test_the_course_folder_has_the_config_and_the_files_each_notebook_needs(nbgrader_courses):
    for slug, course in nbgrader_courses.items():
        config = (course / "nbgrader_config.py").read_text()
        assert 'code_stub = {"python": "..."}' in config and 'os.environ["COURSE_SETTING"] = "grading"' in config
        # nbgrader judges in its own kernel: the grader's measures are handed in there as in the build
        assert 'os.environ["COURSE_MEASURE_MODULES"] = "autograder.judge.sampling"' in config
        assert (course / "release" / slug / "helpers" / "golden.py").is_file()
        assert not list((course / "release" / slug).rglob("golden_values.json"))


@pytest.mark.parametrize("slug", SLUGS)
def test_release_keeps_prompts_read_only_and_holds_no_solution_hidden_test_or_golden_value(nbgrader_courses, slug):
    course = nbgrader_courses[slug]
    source = nbformat.read(course / "source" / slug / f"{slug}.ipynb", as_version=4)
    release = nbformat.read(course / "release" / slug / f"{slug}.ipynb", as_version=4)
    text = nbformat.writes(release)
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "use_golden(", "Reference answer"):
        assert secret not in text, secret
    hidden = [c for c in source.cells if "### BEGIN HIDDEN TESTS" in c.source]
    assert hidden and all(c.metadata["nbgrader"]["grade"] and c.metadata["nbgrader"]["locked"] for c in hidden)
    released = {c.metadata["nbgrader"]["grade_id"]: c for c in release.cells if "nbgrader" in c.metadata}
    for cell in hidden:  # the graded cell is there, empty but for its comment
        assert released[cell.metadata["nbgrader"]["grade_id"]].source.startswith("# Hidden test of")
    prompts = [c for c in release.cells if c.cell_type == "markdown" and not c.metadata["nbgrader"]["solution"]]
    assert prompts and all(c.metadata["nbgrader"]["locked"] for c in prompts)
    answers = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "markdown"]
    assert answers and all(c.metadata["nbgrader"]["grade"] and c.metadata["nbgrader"]["points"] >= 0 for c in answers)
    assert all(c.source == "_Type your answer here, replacing this text._" for c in answers)
    calls = [c.source for c in release.cells if c.cell_type == "code"]  # no otter grader, no export step
    assert not any("grader.check(" in source or "export_submission(" in source for source in calls)
    assert "grader.check" not in "".join(c.source for c in release.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("slug", SLUGS)
def test_reference_scores_full_marks_and_the_untouched_release_zero(nbgrader_courses, request, slug):
    course = nbgrader_courses[slug]
    failed, score, possible = hidden_failures_in(course, slug, "reference")
    assert failed == set() and score == possible
    # the same points as under course grade
    assert possible == course_grade_rows(slug, request)["samples/complete.ipynb"]["possible"]
    failed, score, _ = hidden_failures_in(course, slug, "untouched")
    assert score == 0 and failed


@pytest.mark.parametrize("slug", SLUGS)
def test_known_wrong_variant_loses_the_points_it_loses_under_course_grade(nbgrader_courses, request, slug):
    notebook, _ = wrong_group(slug)
    row = course_grade_rows(slug, request)[f"variants/{notebook}.ipynb"]
    lost = {f"{q}-{c['test']}": c["points"] for q, d in row["questions"].items() for c in d["cases"]
            if c["hidden"] and not c["passed"]}
    assert set(lost) and {name.split("-", 1)[1] for name in lost} == failures(row, hidden=True)
    failed, score, possible = hidden_failures_in(nbgrader_courses[slug], slug, "wrong")
    assert failed == set(lost), (sorted(failed), sorted(lost))
    assert possible - score == pytest.approx(sum(lost.values())) == pytest.approx(row["possible"] - row["total"])


@pytest.fixture(scope="session")
def gradebooks_from_course_grade(nbgrader_courses, layout, request):
    """`course grade`'s rows of each batch's reference, blank and wrong variant, written into the
    gradebooks as students cg-reference, cg-blank and cg-wrong."""
    written = {}
    for slug, course in nbgrader_courses.items():
        rows = course_grade_rows(slug, request)
        notebook, _ = wrong_group(slug)
        folder = (request.getfixturevalue("submissions")[0] if slug == KERNEL_SLUG
                  else request.getfixturevalue("assignment_batch")(slug).folder)
        picked = []
        for student, name in (("cg-reference", "samples/complete.ipynb"), ("cg-blank", "samples/blank.ipynb"),
                              ("cg-wrong", f"variants/{notebook}.ipynb")):
            picked.append({**rows[name], "file": f"{student}/{Path(name).name}"})
            target = course / "cg-submissions" / student
            target.mkdir(parents=True, exist_ok=True)
            (target / Path(name).name).write_bytes((folder / name).read_bytes())
        written[slug] = (picked, write_gradebook(picked, course / "gradebook.db", layout, course / "cg-submissions",
                                                 log=lambda *a: None))
    return written


@pytest.mark.parametrize("slug", SLUGS)
def test_course_grade_scores_go_into_the_gradebook_cell_by_cell(nbgrader_courses, gradebooks_from_course_grade, slug):
    rows, counts = gradebooks_from_course_grade[slug]
    assert counts == {"submissions": 3, "skipped": 0}
    course = nbgrader_courses[slug]
    for row in rows:
        failed, score, possible = hidden_failures_in(course, slug, student_of(row))
        assert (score, possible) == (row["total"], row["possible"])
        assert {name.split("-", 1)[1] for name in failed} == failures(row, hidden=True)
    # the written answers wait for a person, as they do after nbgrader's own autograde
    with gradebook(course) as gb:
        sub = gb.find_submission_notebook(slug, slug, "cg-reference")
        assert sub.needs_manual_grade and sub.max_written_score > 0
        assert sub.score == sub.code_score  # nothing written was scored automatically


def test_formgrader_shows_each_course_grade_submission_and_takes_a_manual_grade(nbgrader_courses,
                                                                                gradebooks_from_course_grade):
    for course in sorted(set(nbgrader_courses.values())):
        lane = [slug for slug in SLUGS if nbgrader_courses[slug] == course]
        port = free_port()
        config = course / "formgrader_test_config.py"
        config.write_text(f"c.ServerApp.jpserver_extensions = {{'nbgrader.server_extensions.formgrader': True}}\n"
                          f"c.IdentityProvider.token = 'test-token'\nc.ServerApp.ip = '127.0.0.1'\n"
                          f"c.ServerApp.port = {port}\nc.ServerApp.port_retries = 0\nc.ServerApp.open_browser = False\n"
                          f"c.ServerApp.allow_root = True\n")
        server = subprocess.Popen([sys.executable, "-m", "jupyter_server", f"--config={config}"], cwd=course,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        headers = {"Authorization": "token test-token"}

        def request(path, data=None):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={**headers, "Content-Type": "application/json"},
                                         data=None if data is None else json.dumps(data).encode(), method="PUT" if data else "GET")
            with urllib.request.urlopen(req, timeout=60) as response:
                return response.status, response.read().decode()

        try:
            for _ in range(120):  # bounded: at most a minute for the server to listen
                try:
                    request("/formgrader/api/status")
                    break
                except OSError:
                    time.sleep(0.5)
            for slug in lane:
                with gradebook(course) as gb:
                    sub = gb.find_submission_notebook(slug, slug, "cg-reference")
                    written = next(g for g in sub.grades if g.cell_type == "markdown")
                    before, sub_id, grade_id, name = sub.score, sub.id, written.id, written.name
                status, page = request(f"/formgrader/submissions/{sub_id}/")
                assert status == 200 and name in page and "graded by" in page, slug
                status, _ = request(f"/formgrader/api/grade/{grade_id}", {"manual_score": 0.5})
                assert status == 200
                with gradebook(course) as gb:
                    assert gb.find_submission_notebook(slug, slug, "cg-reference").score == pytest.approx(before + 0.5)
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_gradebook_errors_name_the_problem(nbgrader_courses, layout, tmp_path):
    course = nbgrader_courses["karate_gnn"]
    row = {"file": "dana/karate_gnn.ipynb", "assignment": "karate_gnn", "status": "ok", "questions": {}}
    with pytest.raises(CourseError, match="two submissions of karate_gnn for student 'dana'"):
        write_gradebook([row, {**row, "file": "dana/again.ipynb"}], course / "gradebook.db", layout, tmp_path,
                        log=lambda *a: None)
    elsewhere = next(slug for slug in SLUGS if nbgrader_courses[slug] != course)  # not released in this course
    with pytest.raises(CourseError, match=f"nbgrader generate_assignment {elsewhere}"):
        write_gradebook([{**row, "assignment": elsewhere}], course / "gradebook.db", layout, tmp_path,
                        log=lambda *a: None)
    said = []
    counts = write_gradebook([{"file": "x.ipynb", "assignment": "", "status": "invalid", "message": "not a notebook",
                               "questions": {}}], course / "gradebook.db", layout, tmp_path, log=said.append)
    assert counts == {"submissions": 0, "skipped": 1} and "x.ipynb skipped: not a notebook" in said[0]
    # a notebook whose written-answer cell was deleted: its scores go in, the formgrader copy is
    # refused with a message, and the run goes on
    nb = nbformat.read(layout.notebooks / "karate_gnn" / "karate_gnn.ipynb", as_version=4)
    answers = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "otter_answer_cell" in c.metadata.get("tags", [])]
    assert answers, "karate_gnn has written questions"
    del nb.cells[answers[0]]
    (tmp_path / "erin").mkdir()
    nbformat.write(nb, tmp_path / "erin" / "karate_gnn.ipynb")
    said = []
    counts = write_gradebook([{**row, "file": "erin/karate_gnn.ipynb"}], course / "gradebook.db", layout, tmp_path,
                             log=said.append)
    assert counts == {"submissions": 1, "skipped": 0}
    assert any("erin/karate_gnn.ipynb: scores written, notebook not copied" in s and "answer cell deleted" in s for s in said), said
    assert not (course / "autograded" / "erin").exists()
