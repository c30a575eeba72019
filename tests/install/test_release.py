"""`course release`: what students receive holds the notebooks, the helpers and their install files,
and `course check --release` fails on anything a student must not see."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.build.check import read_secrets
from autograder.layout import CourseError, Layout
from autograder.build.release import make_release, release_problems, student_dependencies

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]
LAYOUT = Layout(REPO)
SLUG = "kernel_attention"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    dest = tmp_path_factory.mktemp("release") / "course"
    assert make_release(LAYOUT, dest) == []
    return dest


def test_the_release_holds_what_students_need_and_nothing_of_the_instructors(release):
    for slug in LAYOUT.slugs():
        assert (release / "notebooks" / slug / f"{slug}.ipynb").is_file(), slug
    assert (release / "helpers" / "__init__.py").is_file()
    assert not any((release / name).exists() for name in ("solutions", "autograder", "tests", "benchmarks", "out"))
    pins = student_dependencies(LAYOUT)
    assert not any(pin.startswith(("nbgrader", "bubblewrap", "copydetect")) for pin in pins), pins
    pyproject = (release / "pyproject.toml").read_text()
    assert all(f'"{pin}"' in pyproject for pin in pins) and "nbgrader" not in pyproject
    readme = (release / "README.md").read_text()
    assert "pip install -e ." in readme and "requirements-no-deps.txt" in readme and "texlive-xetex" in readme
    assert (release / "postBuild").stat().st_mode & 0o111 and "--no-deps" in (release / "postBuild").read_text()


def test_the_release_check_finds_every_kind_of_secret(release, tmp_path):
    planted = tmp_path / "planted"
    shutil.copytree(release, planted)
    secrets = read_secrets(LAYOUT.master(SLUG))
    solution_line, hidden_test = sorted(secrets.solution_lines)[0], sorted(secrets.hidden_tests)[0]
    nb_path = planted / "notebooks" / SLUG / f"{SLUG}.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"{solution_line}\n{hidden_test}()"))
    nbformat.write(nb, nb_path)
    (planted / "notebooks" / SLUG / "golden_values.json").write_text(json.dumps({"values": {}}))
    (planted / "helpers" / "grading.py").write_text("from autograder.judge.verdicts import verdict\n")
    config = planted / "etc" / "jupyter" / "labconfig" / "page_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"disabledExtensions": {}, "enabled": ["@jupyter/nbgrader:validate-assignment"]}))
    (planted / "pyproject.toml").write_text((planted / "pyproject.toml").read_text().replace(
        "dependencies = [\n", 'dependencies = [\n    "nbgrader==0.9.6",\n'))
    problems = "\n".join(release_problems(LAYOUT, planted))
    assert f"contains a line of {SLUG}'s reference solution" in problems
    assert f"names hidden test {hidden_test}" in problems
    assert "golden values file" in problems
    assert "helpers/grading.py:1: imports the grader" in problems
    assert "page_config.json: enables an nbgrader extension" in problems
    assert "pyproject.toml:" in problems and "installs the instructor's side" in problems


def test_a_release_never_overwrites_a_folder_unasked(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(CourseError, match="not empty"):
        make_release(LAYOUT, tmp_path, [SLUG])
    assert (tmp_path / "keep.txt").read_text() == "mine"
