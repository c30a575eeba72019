"""Leak detection catches planted leaks; unreadable submissions get a clear reason."""

import json
import re
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.build.check import leak_problems, read_secrets
from autograder.layout import Layout
from autograder.grade.submissions import InvalidSubmission, read_submission_notebook

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]
SLUG = "kernel_attention"


@pytest.fixture
def bundle_copy(tmp_path):
    for folder in ("solutions", "helpers", "notebooks"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return Layout(tmp_path)


def test_master_secrets_are_found():
    """The hidden tests are exactly the master's test cells marked hidden (read here with a plain
    pattern, not the master reader); every solution line is the master's and none is in the
    committed student notebook, whose prompts and public tests are not secrets."""
    path = REPO / "solutions" / SLUG / f"{SLUG}.ipynb"
    secrets = read_secrets(path)
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    hidden = {name for cell in cells if re.search(r"TEST CONFIG[\s\S]*hidden:\s*true[\s\S]*END TEST CONFIG", cell)
              for name in re.findall(r"^def (test_\w+)", cell, re.M)}
    assert len(hidden) >= 8 and secrets.hidden_tests == hidden
    master_lines = {line.strip() for cell in cells for line in cell.splitlines()}
    student = nbformat.read(REPO / "notebooks" / SLUG / f"{SLUG}.ipynb", as_version=4)
    student_lines = {line.strip() for cell in student.cells for line in cell.source.splitlines()}
    assert len(secrets.solution_lines) >= 20 and secrets.solution_lines <= master_lines
    assert not secrets.solution_lines & student_lines, sorted(secrets.solution_lines & student_lines)[:3]
    # the body of the reference softmax_attention is a secret; its signature, given to students, is not
    assert "def softmax_attention(Q, K, V, mask=None):" in student_lines - secrets.solution_lines


def test_clean_bundle_has_no_leaks(bundle_copy):
    assert leak_problems(bundle_copy) == []


def test_planted_leaks_are_reported(bundle_copy):
    secrets = read_secrets(bundle_copy.master(SLUG))
    solution_line = sorted(secrets.solution_lines)[0]
    hidden_test = sorted(secrets.hidden_tests)[0]
    (bundle_copy.helpers / "oops.py").write_text(f"# BEGIN SOLUTION\n{solution_line}\n")
    student = bundle_copy.student_dir(SLUG) / f"{SLUG}.ipynb"
    nb = nbformat.read(student, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"{hidden_test}()"))
    nbformat.write(nb, student)
    (bundle_copy.student_dir(SLUG) / "golden_values.json").write_text("{}")
    problems = "\n".join(leak_problems(bundle_copy))
    assert "helpers/oops.py: otter marker 'BEGIN SOLUTION'" in problems
    assert f"helpers/oops.py: contains a line of {SLUG}'s reference solution" in problems
    assert f"names hidden test {hidden_test}" in problems
    assert "golden values file in the student folder" in problems


@pytest.mark.parametrize("make, reason", [
    (lambda p: p.with_suffix(".ipynb").write_text('{"cells": [', encoding="utf-8"), "not a readable Jupyter notebook"),
    (lambda p: p.with_suffix(".ipynb").write_bytes(b"\xff\xfe\x00"), "not UTF-8"),
    (lambda p: p.with_suffix(".zip").write_bytes(b"PK\x03\x04 truncated"), "not a valid zip"),
])
def test_unreadable_submissions_say_why(tmp_path, make, reason):
    base = tmp_path / "submission"
    make(base)
    path = next(tmp_path.iterdir())
    with pytest.raises(InvalidSubmission, match=reason):
        read_submission_notebook(path)


def test_zip_with_two_notebooks_is_invalid(tmp_path):
    nb = nbformat.writes(nbformat.v4.new_notebook())
    with zipfile.ZipFile(tmp_path / "s.zip", "w") as zf:
        zf.writestr("a.ipynb", nb)
        zf.writestr("b.ipynb", nb)
    with pytest.raises(InvalidSubmission, match="2 notebooks"):
        read_submission_notebook(tmp_path / "s.zip")
