"""`course new` + `course build` + `course grade` work for a fresh assignment with no other step: its
reference scores full marks, its blank notebook nothing, and its gradebook has the written question."""

import csv
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.build.assign import build
from autograder.grade.grader import Grader, Limits
from autograder.layout import CourseError, Layout
from autograder.build.new import new_assignment

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.batch
def test_a_new_assignment_builds_and_grades_at_once(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    for name in ("helpers", "solutions"):
        shutil.copytree(REPO / name, course / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "requirements-no-deps.txt"):
        shutil.copy(REPO / name, course / name)
    layout = Layout(course, course / "out")
    written = new_assignment(layout, "layer_softmax")
    assert [p.relative_to(course).as_posix() for p in written] == [
        "solutions/layer_softmax/layer_softmax.ipynb", "helpers/layer_softmax.py", "tests/layer_softmax_variants.py"]
    with pytest.raises(CourseError, match="exists already"):
        new_assignment(layout, "layer_softmax")
    said = []
    build(layout, "layer_softmax", log=said.append)
    assert not any("warning" in line for line in said), said
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(layout.solution_notebook("layer_softmax"), subs / "solved.ipynb")
    shutil.copy(layout.student_dir("layer_softmax") / "layer_softmax.ipynb", subs / "blank.ipynb")
    os.chmod(tmp_path, 0o700)  # POSIX separation refuses a course others could read
    rows = {row["file"]: row for row in Grader(layout, subs, tmp_path / "results", Limits(timeout=120, memory_mb=3072),
                                                jobs=2).run(log=lambda *a: None)}
    assert rows["solved.ipynb"]["total"] == rows["solved.ipynb"]["possible"] == 2, rows["solved.ipynb"]
    assert rows["blank.ipynb"]["total"] == 0
    with open(tmp_path / "results" / "gradebook" / "layer_softmax.csv", newline="") as f:
        book = list(csv.DictReader(f))
    assert "q2_why_the_maximum (written, of 1)" in book[0]


def test_a_bad_or_taken_name_is_refused(tmp_path):
    layout = Layout(tmp_path, tmp_path / "out")
    with pytest.raises(CourseError, match="not an assignment name"):
        new_assignment(layout, "Bad-Name")
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "taken.py").write_text("")
    with pytest.raises(CourseError, match="exists already"):
        new_assignment(layout, "taken")
    assert not (tmp_path / "solutions").exists()
