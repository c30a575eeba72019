"""The master format (otter-grader's v1 notebook format), read in one place.

A master is a sequence of cells. Raw cells are directives: ``# ASSIGNMENT CONFIG`` (first, with
YAML), ``# BEGIN QUESTION`` (with YAML: name, manual, points) ... ``# END QUESTION``, and inside a
question ``# BEGIN SOLUTION`` / ``# END SOLUTION`` (a written answer, or a block of solution
code) and ``# BEGIN TESTS`` / ``# END TESTS``. A test cell opens with a TEST CONFIG header in
otter's own grammar (a string of YAML from ``# BEGIN TEST CONFIG`` to ``# END TEST CONFIG``
after the quotes that open and close it; optionally after an assignment, one to three quotes, any
case) and defines one ``test_`` function. Inside code cells,
solution lines sit between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` comments or end in
``# SOLUTION``.

``course build``, ``course check``, ``course pdf`` and the nbgrader converter all read masters
through :func:`walk`, :func:`split_test_config` and :func:`parse_test`. The student notebook's
own question markers (``<!-- BEGIN QUESTION -->``) belong to ``helpers.pdf``, which students use.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import nbformat
import yaml

from autograder.autograder_zip import case_settings

#: otter assign's own patterns for a test cell's header (otter/assign/tests_manager.py).
BEGIN_TEST_CONFIG = re.compile(r'(?:.\s*=\s*)?""?"?\s*#\s*BEGIN\s*TEST\s*CONFIG', re.IGNORECASE)
END_TEST_CONFIG = re.compile(r'""?"?\s*#\s*END\s*TEST\s*CONFIG', re.IGNORECASE)
#: A solution region inside a code cell.
SOLUTION_COMMENT = re.compile(r"^(\s*)#\s*(BEGIN|END) SOLUTION\b.*$", re.IGNORECASE)


class MasterFormatError(ValueError):
    """The master does not follow the format; the message says where."""


@dataclass(frozen=True, eq=False)
class Question:
    """One question of a master, from the YAML of its ``# BEGIN QUESTION`` cell (one object per
    question: cells of the same question share it)."""

    name: str  # what test files, PDF bookmarks and nbgrader grade ids call it
    manual: bool = False  # graded by hand (a written answer or a plot), not by tests
    points: float | None = None  # as the master states them (written questions must); None: its tests' sum
    config: dict = field(default_factory=dict, repr=False)  # the whole YAML, as otter reads it

    @classmethod
    def from_config(cls, config: dict) -> "Question":
        if not config.get("name"):
            raise MasterFormatError(f"a BEGIN QUESTION cell without a name: {config!r}")
        return cls(name=str(config["name"]), manual=bool(config.get("manual", False)), points=config.get("points"),
                   config=config)


@dataclass(frozen=True)
class TestCell:
    """One test cell: its test function and the configuration of its header."""

    name: str
    args: list[str]
    code: str  # the cell without its header
    points: float
    hidden: bool


@dataclass(frozen=True)
class Place:
    """Where a cell of the master stands: in which question, and in which block of it."""

    question: Question | None  # None outside questions
    in_solution: bool  # inside a raw BEGIN/END SOLUTION block (a written answer or solution code)
    in_tests: bool  # inside a raw BEGIN/END TESTS block


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def directive(cell) -> tuple[str, dict]:
    """``("BEGIN QUESTION", {config})`` for a raw directive cell, ``("", {})`` for any other cell."""
    if cell.cell_type != "raw":
        return "", {}
    first, _, rest = cell.source.strip().partition("\n")
    word = first.lstrip("# ").strip().upper()
    return word, (yaml.safe_load(rest) or {}) if rest.strip() else {}


def assignment_config(nb) -> dict:
    """The YAML of the first cell, which must be a raw ``# ASSIGNMENT CONFIG`` cell."""
    word, config = directive(nb.cells[0]) if nb.cells else ("", {})
    if word != "ASSIGNMENT CONFIG":
        raise MasterFormatError("the first cell must be a raw '# ASSIGNMENT CONFIG' cell")
    return config


def walk(nb) -> Iterator[tuple[object, Place]]:
    """Every cell that is not a directive, with where it stands. Raises MasterFormatError for an
    unknown raw cell or blocks left open."""
    question, in_solution, in_tests = None, False, False
    for cell in nb.cells:
        word, config = directive(cell)
        if word == "ASSIGNMENT CONFIG":
            continue
        if word == "BEGIN QUESTION":
            question = Question.from_config(config)
        elif word == "END QUESTION":
            question = None
        elif word in ("BEGIN SOLUTION", "END SOLUTION"):
            in_solution = word == "BEGIN SOLUTION"
        elif word in ("BEGIN TESTS", "END TESTS"):
            in_tests = word == "BEGIN TESTS"
        elif cell.cell_type == "raw":
            raise MasterFormatError(f"a raw cell that is no directive of the master format: {cell.source[:60]!r}")
        else:
            yield cell, Place(question, in_solution, in_tests)
    if question is not None or in_solution or in_tests:
        raise MasterFormatError("the master ends inside a question, solution or test block")


def questions(nb, *, manual: bool | None = None) -> list[Question]:
    """Every question, in order (only the written ones with ``manual=True``, only the autograded
    ones with ``manual=False``)."""
    found = [Question.from_config(config) for cell in nb.cells for word, config in [directive(cell)]
             if word == "BEGIN QUESTION"]
    return [q for q in found if manual is None or q.manual == manual]


def split_test_config(source: str) -> tuple[dict, str]:
    """(the header's YAML, the code after it) of a test cell; ``({}, source)`` without a header."""
    lines = source.splitlines(keepends=True)
    if not lines or not BEGIN_TEST_CONFIG.match(lines[0]):
        return {}, source
    for end, line in enumerate(lines[1:], start=1):
        if END_TEST_CONFIG.match(line):
            return yaml.safe_load("".join(lines[1:end])) or {}, "".join(lines[end + 1:])
    raise MasterFormatError(f"a TEST CONFIG header that never ends: {source[:80]!r}")


def parse_test(source: str) -> TestCell:
    """A test cell: exactly one ``test_`` function after its header."""
    config, code = split_test_config(source)
    functions = [n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    if len(functions) != 1:
        raise MasterFormatError(f"a test cell must define one test_ function, found {[f.name for f in functions]}")
    settings = case_settings(config)
    return TestCell(name=functions[0].name, args=[a.arg for a in functions[0].args.args], code=code.strip("\n"),
                    points=float(settings["points"]), hidden=settings["hidden"])


def solution_lines(source: str) -> Iterator[tuple[str, bool]]:
    """(line, is it solution code) for each line of a code cell: inside ``# BEGIN/END SOLUTION``
    comments, or ending in ``# SOLUTION`` (that line's code before the comment). The markers
    themselves are left out."""
    inside = False
    for line in source.splitlines():
        marker = SOLUTION_COMMENT.match(line)
        if marker:
            inside = marker.group(2).upper() == "BEGIN"
        elif inside:
            yield line, True
        elif line.rstrip().upper().endswith("# SOLUTION"):
            yield line.rsplit("#", 1)[0], True
        else:
            yield line, False


#: What every master's configuration must say for sealed grading: the golden values and the helpers
#: ship in the zip; tests are pytest-style functions (otter's OK format checks inside the kernel).
REQUIRED_AUTOGRADER_FILES = ("golden_values.json", "helpers")
#: Where the instructor reads what a master must hold.
FORMAT_PAGE = "docs/instructors/writing-an-assignment.md"


def problems_before_running(nb, slug: str) -> list[str]:
    """What keeps a master from building, found by reading it alone (nothing is executed): a
    missing or wrong configuration, otter's OK-format or assert-only tests, a public test worth
    points, a test worth points that checks nothing through ``expect``. Each entry says what to change.
    ``course build`` refuses such a master at once instead of after running it."""
    try:
        config = assignment_config(nb)
    except MasterFormatError as err:
        return [f"{err} (copy the one of {FORMAT_PAGE})"]
    found = []
    if config.get("name") != slug:
        found.append(f"the configuration's name is {config.get('name')!r}; it must be the folder's name, {slug!r}")
    listed = config.get("autograder_files") or []
    missing = [name for name in REQUIRED_AUTOGRADER_FILES if name not in listed]
    if missing:
        found.append(f"autograder_files must list {', '.join(missing)} (the golden values and the helpers ship in the "
                     "autograder zip, never to students)")
    tests = config.get("tests") or {}
    if tests.get("ok_format", True) is not False:
        found.append("tests must say ok_format: false: each test is a pytest-style function that checks through "
                     "expect() (otter's OK-format tests check inside the student's kernel, which sealed grading "
                     "cannot trust)")
    try:
        cells = list(walk(nb))
    except MasterFormatError as err:
        return found + [str(err)]
    for cell, place in cells:
        if not place.in_tests or cell.cell_type != "code":
            continue
        where = place.question.name if place.question else "a test block outside any question"
        try:
            test = parse_test(cell.source)
        except (MasterFormatError, SyntaxError):
            first = next((line for line in cell.source.splitlines() if line.strip()), "")[:60]
            found.append(f"{where}: a test cell that defines no test_ function ({first!r}: assert lines and doctests "
                         "are otter's older formats; write def test_...(the_function): ... expect(...))")
            continue
        if test.points and not test.hidden:
            found.append(f"{where}/{test.name} is public but worth {test.points:g} points; public tests must be worth 0")
        if test.points and not re.search(r"\bexpect(_between)?\(", test.code):
            found.append(f"{where}/{test.name} is worth points but checks nothing through expect() or expect_between(); "
                         "sealed grading could not score it")
    return found
