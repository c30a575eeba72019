"""A master or an autograder zip this bundle cannot grade sealed is refused at once, saying what to
change: a master in otter's older formats before anything runs, a zip built by plain `otter assign`
before any submission is graded; a float compared exactly is pointed out at build."""

import json
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.autograder_zip import Autograder, NotACourseAutograder
from autograder.build.assign import build, exact_float_checks
from autograder.grade.grader import Grader
from autograder.layout import CourseError, Layout

pytestmark = pytest.mark.alone  # a refusal is timed against a bound (read, not run): nothing in the background


def raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def otter_style_master(folder: Path, slug: str = "hw01") -> Path:
    """A small master as an otter course writes it: OK-format tests, an assert-only test cell, no golden
    values in its autograder_files, a public test worth points."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        raw("# ASSIGNMENT CONFIG\nname: hw01\ngenerate: true\nfiles:\n    - data.csv"),
        raw("# BEGIN QUESTION\nname: q1"), nbformat.v4.new_markdown_cell("Set `x` to the smallest prime."),
        raw("# BEGIN SOLUTION"), nbformat.v4.new_code_cell("x = 2 # SOLUTION"), raw("# END SOLUTION"),
        raw("# BEGIN TESTS"),
        nbformat.v4.new_code_cell('""" # BEGIN TEST CONFIG\npoints: 2\n""" # END TEST CONFIG\nisinstance(x, int)'),
        nbformat.v4.new_code_cell("assert x == 2"),
        raw("# END TESTS"), raw("# END QUESTION"),
        raw("# BEGIN QUESTION\nname: q2"), nbformat.v4.new_markdown_cell("Define `square`."),
        raw("# BEGIN SOLUTION"), nbformat.v4.new_code_cell("def square(v):\n    return v * v # SOLUTION"),
        raw("# END SOLUTION"), raw("# BEGIN TESTS"),
        nbformat.v4.new_code_cell('""" # BEGIN TEST CONFIG\npoints: 3\nhidden: true\n""" # END TEST CONFIG\n'
                                  "def test_square(square):\n    assert square(4) == 16"),
        raw("# END TESTS"), raw("# END QUESTION"),
    ]
    path = folder / "solutions" / slug / f"{slug}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    (folder / "helpers").mkdir()
    return path


def test_a_master_in_otters_older_formats_is_refused_before_anything_runs(tmp_path):
    otter_style_master(tmp_path)
    started = time.perf_counter()
    with pytest.raises(CourseError) as refused:
        build(Layout(tmp_path, tmp_path / "out"), "hw01", log=lambda *a: None)
    seconds = time.perf_counter() - started
    text = str(refused.value)
    assert seconds < 10, seconds  # read, not run
    assert "writing-an-assignment.md" in text
    assert "autograder_files must list golden_values.json, helpers" in text
    assert "ok_format: false" in text
    assert "q1: a test cell that defines no test_ function ('\"\"\" # BEGIN TEST CONFIG'" in text
    assert "q1: a test cell that defines no test_ function ('assert x == 2'" in text
    assert "q2/test_square is worth points but checks nothing through expect()" in text
    assert not (tmp_path / "out").exists()  # nothing was written


def test_the_courses_own_masters_pass_the_check_before_running():
    from autograder.build import master
    layout = Layout.find(Path(__file__).resolve().parents[2])
    for path in sorted(layout.root.glob("solutions/*/*.ipynb")):
        slug = path.parent.name
        assert master.problems_before_running(master.read(path), slug) == [], slug


def plain_otter_zip(path: Path) -> Path:
    """What plain `otter assign` writes: tests and a config, no golden values."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("otter_config.json", json.dumps({"assignment_name": "hw01"}))
        zf.writestr("tests/q1.py", "OK_FORMAT = True\ntest = {'name': 'q1', 'points': 1, 'suites': []}\n")
        zf.writestr("run_autograder", "#!/usr/bin/env bash\n")
    return path


def test_a_zip_built_by_plain_otter_assign_is_refused_with_what_to_do(tmp_path):
    zip_path = plain_otter_zip(tmp_path / "hw01-autograder.zip")
    with pytest.raises(NotACourseAutograder, match="not built by `course build`"):
        Autograder.read(zip_path)
    assert Autograder.read(zip_path, need_golden=False).golden == {}  # unsealed otter grading reads it
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "a.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    grader = Grader(Layout(tmp_path, tmp_path / "out"), tmp_path / "subs", tmp_path / "results", autograder=zip_path)
    with pytest.raises(CourseError, match="--unsafe"):
        grader.run(log=lambda *a: None)
    with pytest.raises(NotACourseAutograder, match="could not be read"):
        Autograder.read(tmp_path / "subs" / "a.ipynb")


def test_a_float_compared_exactly_is_pointed_out_at_build():
    def spec(data, rtol=0, atol=0, dtype="float64"):
        return {"check": "close", "test": "test_x", "rtol": rtol, "atol": atol,
                "expected": {"kind": "array", "dtype": dtype, "shape": [len(data)], "data": data}}

    assert exact_float_checks({"a": spec([0.25, 1.5])})[0].startswith("a (test_x) compares a float value exactly")
    assert exact_float_checks({"whole": spec([0.0, 1.0, 2.0]), "tolerant": spec([0.25], rtol=1e-5),
                               "tokens": spec([1, 4], dtype="int64")}) == []
