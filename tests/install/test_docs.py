"""The documentation site builds in strict mode (a broken link, a page missing from the navigation or
a generated page that fails stops it), and its architecture page names the tree as it is."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

REPO = Path(__file__).resolve().parents[2]


def test_the_site_builds_strict_with_its_generated_pages(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    cli = (tmp_path / "site" / "instructors" / "cli.html").read_text()
    for command in ("course build", "course grade", "course pdf", "course report", "course check", "course demo"):
        assert command in cli, command
    assert "--nbgrader-gradebook" in cli  # an option, read from the parser itself
    from autograder.limits import DEFAULT_LIMITS, RUNNER_CAPS

    limits = (tmp_path / "site" / "instructors" / "limits.html").read_text()  # the numbers the grader uses
    assert f"{DEFAULT_LIMITS.timeout:g} s" in limits and f"{DEFAULT_LIMITS.memory_mb} MB" in limits
    assert f"{RUNNER_CAPS.value_line_bytes >> 20} MiB" in limits
    results = (tmp_path / "site" / "results.html").read_text()
    assert "beside one busy program" in results and "held" in results


def test_the_architecture_page_names_every_module_and_no_missing_one():
    page = (REPO / "docs" / "developers" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w/]+\.py)`", page))
    grader = {p.relative_to(REPO / "autograder").as_posix() for p in (REPO / "autograder").rglob("*.py")}
    core = {p.relative_to(REPO / "helpers" / "core").as_posix() for p in (REPO / "helpers" / "core").rglob("*.py")}
    core = {m for m in core if not m.startswith("pdf/")} | {"measures/__init__.py"}  # pdf/ is named as a package
    modules = {m for m in grader | core if not m.endswith("__init__.py")} | {"measures/__init__.py"}
    assert modules - named == set(), f"modules the architecture page does not name: {sorted(modules - named)}"
    # a path is read inside autograder/, helpers/core/, docs/hooks/ or from the repository's top
    missing = {n for n in named if not any((base / n).is_file() for base in
                                           (REPO / "autograder", REPO / "helpers" / "core", REPO / "docs" / "hooks", REPO))}
    assert missing == set(), f"files the architecture page names that do not exist: {sorted(missing)}"


def test_the_readme_is_short_and_points_to_pages_that_exist():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 100
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        assert (REPO / target).exists(), target
    assert "DESIGN.md" not in readme
