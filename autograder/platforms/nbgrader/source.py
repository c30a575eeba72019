"""nbgrader, first half: the same master notebooks as an nbgrader course (``course build --nbgrader``).
The other half, ``course grade``'s scores in an nbgrader gradebook, is :mod:`autograder.platforms.nbgrader.gradebook`.

An otter master becomes ``source/<slug>/<slug>.ipynb`` with nbgrader's cell metadata:

* solution code keeps its regions, as ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (nbgrader's
  markers); ``generate_assignment`` replaces them with ``...`` as otter does;
* each question's public tests become one read-only cell that runs them (the students' instant
  check, like ``grader.check``);
* each hidden test becomes one autograded cell worth the test's points, its code and the golden
  values it compares against inside a hidden-test region, so the release holds neither;
* each written answer becomes a manually graded answer cell with the question's points;
* every other markdown cell (the prompts) is read-only.

Golden values travel inside the hidden regions (``helpers.golden.use_golden``), so autograding
needs no extra file and works wherever the source notebook goes.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import nbformat

from helpers.core.contract import MEASURE_MODULES_ENV, SETTING_ENV
from helpers.core.golden import golden_blob  # the format use_golden reads, kept beside it

from autograder.build import master
from autograder.judge import sampling as grader_measures
from autograder.layout import CourseError
from autograder.limits import DEFAULT_LIMITS
from autograder.sandbox.protocol import GRADING_SETTING
from autograder.templates import render

SCHEMA_VERSION = 3
# Prompts that describe otter's check cells, reworded for nbgrader's public-check cells.
GRADER_CHECK = [(re.compile(r"(\ban? )?`grader\.check\(\.\.\.\)`( cell)?"), "a public-check cell"),
                (re.compile(r"`grader\.check`"), "public check")]

SUBMIT_NBGRADER = """## Submit

Run the whole notebook in a fresh kernel (Kernel → Restart Kernel and Run All Cells), check that every
public check passes, save it, and submit it from the Assignments tab (nbgrader)."""


def grade_id(question: str, test: str) -> str:
    """The nbgrader grade id of a hidden test's cell (the gradebook writer finds scores by it)."""
    return f"{question}-{test}"


def cell_metadata(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
                  points: float | None = None) -> dict:
    """nbgrader's metadata of one cell (the gradebook half marks its cells the same way)."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = float(points or 0)
    return {"nbgrader": meta}


def _solution_markers(source: str) -> str:
    """otter's solution comments as nbgrader's (``### BEGIN SOLUTION``)."""
    return "\n".join(master.SOLUTION_COMMENT.sub(lambda m: f"{m.group(1)}### {m.group(2).upper()} SOLUTION", line)
                     for line in source.splitlines())


def _call(test: master.TestCell) -> str:
    return f"{test.name}({', '.join(test.args)})"


def convert(source: nbformat.NotebookNode, by_test: dict[str, dict], slug: str) -> nbformat.NotebookNode:
    """The nbgrader source notebook of an otter master, each hidden test with the golden values
    it uses (``by_test``: :meth:`~autograder.autograder_zip.Autograder.golden_by_test`)."""
    cells, tests, counter = [], {}, 0

    def next_id(stem: str) -> str:
        nonlocal counter
        counter += 1
        return f"{stem}-{counter}"

    try:
        walked = list(master.walk(source))
    except master.MasterFormatError as err:
        raise CourseError(f"{slug}: {err}") from None
    for index, (cell, place) in enumerate(walked):
        question = place.question
        if place.in_tests:
            tests.setdefault(question.name, []).append(master.parse_test(cell.source))
        elif place.in_solution and question and question.manual:
            answer = textwrap.dedent(cell.source).strip("\n")
            answer = re.sub(r"^\*\*Reference answer\.\*\*\s*", "", answer)
            cells.append(nbformat.v4.new_markdown_cell(
                f"### BEGIN SOLUTION\n{answer}\n### END SOLUTION",
                metadata=cell_metadata(question.name, solution=True, grade=True, points=question.points)))
        elif place.in_solution and cell.cell_type == "code":
            cells.append(nbformat.v4.new_code_cell(_solution_markers(cell.source),
                                                   metadata=cell_metadata(next_id(f"{question.name}-code"), solution=True)))
        elif cell.cell_type == "markdown":
            if cell.source.lstrip().startswith("## Submit"):
                cells.append(nbformat.v4.new_markdown_cell(SUBMIT_NBGRADER, metadata=cell_metadata("submit", locked=True)))
            else:
                text = cell.source
                for pattern, words in GRADER_CHECK:
                    text = pattern.sub(words, text)
                cells.append(nbformat.v4.new_markdown_cell(text, metadata=cell_metadata(next_id("prompt"), locked=True)))
        elif cell.cell_type == "code":
            if "export_submission(grader)" in cell.source:
                continue  # nbgrader collects the notebook itself
            cells.append(nbformat.v4.new_code_cell(cell.source))
        following = walked[index + 1][1].question if index + 1 < len(walked) else None
        if question and following is not question and question.name in tests:  # the question's end
            cells += _test_cells(question.name, tests.pop(question.name), by_test)
    return nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})


def _test_cells(question: str, tests: list[master.TestCell], by_test: dict[str, dict]) -> list:
    cells = []
    public = [t for t in tests if not t.hidden]
    if public:
        body = "\n\n\n".join(t.code for t in public)
        calls = "\n".join(_call(t) for t in public)
        cells.append(nbformat.v4.new_code_cell(
            f"# Public checks of {question}: run after your code; the first problem stops the cell with a message.\n"
            f"{body}\n\n\n{calls}\nprint(\"{question}: all public checks passed\")",
            metadata=cell_metadata(f"{question}-public", locked=True)))
    for test in (t for t in tests if t.hidden):
        golden = by_test.get(test.name, {})
        load = f"from helpers.core.golden import use_golden\nuse_golden({golden_blob(golden)!r})\n" if golden else ""
        points = f"{test.points:g}"
        cells.append(nbformat.v4.new_code_cell(
            f"# Hidden test of {question}, worth {points} point{'s' * (points != '1')}: it runs when the notebook is graded.\n"
            f"### BEGIN HIDDEN TESTS\n{load}{test.code}\n\n\n{_call(test)}\n### END HIDDEN TESTS",
            metadata=cell_metadata(grade_id(question, test.name), grade=True, locked=True, points=test.points)))
    return cells


def write_course(dest: Path, slug: str, master_path: Path, by_test: dict[str, dict], files: list[Path]) -> Path:
    """Write ``dest/source/<slug>/<slug>.ipynb``, the files it needs beside it, and
    ``dest/nbgrader_config.py`` when there is none. Returns the notebook's path."""
    folder = dest / "source" / slug
    if folder.exists():
        shutil.rmtree(folder)  # a rebuild replaces the assignment, never mixes two versions
    folder.mkdir(parents=True)
    notebook = convert(nbformat.read(master_path, as_version=4), by_test, slug)
    nbformat.validate(notebook)
    nbformat.write(notebook, folder / f"{slug}.ipynb")
    for path in files:
        target = folder / path.name
        if path.is_dir():
            shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, target)
    config = dest / "nbgrader_config.py"
    if not config.exists():
        config.write_text(render("nbgrader_config.py.tmpl", timeout=f"{DEFAULT_LIMITS.timeout:g}", setting_env=SETTING_ENV,
                                 setting=GRADING_SETTING, measures_env=MEASURE_MODULES_ENV,
                                 measures=grader_measures.__name__), encoding="utf-8")
    return folder / f"{slug}.ipynb"


def add_to_course(layout, autograder, dest: Path) -> Path:
    """An assignment into the nbgrader course at ``dest``, with the golden values of its built
    autograder (the :class:`~autograder.autograder_zip.Autograder` that ``build`` returns or reads)."""
    slug = autograder.name
    return write_course(dest, slug, layout.master(slug), autograder.golden_by_test(), [layout.helpers])
