"""The suite's nbgrader course folders: every assignment written by ``course build --nbgrader``'s
code, released by ``nbgrader generate_assignment`` and autograded by ``nbgrader autograde``
(tests/platforms/test_nbgrader.py reads them).

The assignments run in two lanes at once, each lane its own course folder (its own gradebook.db),
each taking the next assignment when it is free. Per assignment three notebooks are autograded:
the source (reference solution), the untouched release, and the source with the edits of one
known-wrong variant notebook that ``course grade`` graded in the assignment's batch.

:func:`make_courses` runs in the background grading's worker process once the batches are graded
(support/batches.py: BackgroundGrading), beside the tests that may share the machine with it.
"""

from __future__ import annotations

import importlib
import os
import queue
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from autograder.autograder_zip import Autograder
from autograder.layout import Layout
from autograder.platforms.nbgrader.source import add_to_course
from tests.support.batches import take_environment, variant_notebook
from tests.support.notebook_edits import replace_function

#: Two course folders, autograded at once; each takes the next assignment when it is free.
LANES = 2
#: Taken first, so that no lane is left with a long one at the end: nbgrader's autograde of the
#: three notebooks took visualizing_attention 73 s and summarization 57 s alone, the others 31 to 39 s.
SLOWEST = ("visualizing_attention", "summarization")
# Each lane's kernels get their share of the cores: two lanes of torch kernels with a thread per core
# each oversubscribe the CPU, and torch's waiting threads then slow both lanes several times over.
THREADS_PER_LANE = str(max(1, (os.cpu_count() or 1) // LANES))


def nbgrader(course: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "OMP_NUM_THREADS": THREADS_PER_LANE, "MKL_NUM_THREADS": THREADS_PER_LANE}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                            timeout=1200, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def wrong_group(slug: str) -> tuple[str, list[dict]]:
    """The first known-wrong variant notebook of ``slug`` and every variant graded in it."""
    wrong = importlib.import_module(f"tests.{slug}_variants").WRONG
    notebook = variant_notebook(wrong[0])
    return notebook, [v for v in wrong if variant_notebook(v) == notebook]


def with_edits(nb, variants: list[dict]):
    for variant in variants:
        for function, source in variant.get("edits", [(variant.get("function"), variant.get("source"))]):
            nb = replace_function(nb, function, source)
    return nb


def release_and_autograde(layout, course: Path, slug: str) -> None:
    """Write, release and autograde ``slug`` in the course folder ``course``."""
    source = add_to_course(layout, Autograder.read(layout.autograder_zip(slug)), course)
    nbgrader(course, "generate_assignment", slug, "--force")
    release = course / "release" / slug / f"{slug}.ipynb"
    _, variants = wrong_group(slug)
    submitted = {"reference": nbformat.read(source, as_version=4),
                 "untouched": nbformat.read(release, as_version=4),
                 "wrong": with_edits(nbformat.read(source, as_version=4), variants)}
    for student, nb in submitted.items():
        folder = course / "submitted" / student / slug
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{slug}.ipynb")
    nbgrader(course, "autograde", slug, "--create", "--force")


def make_courses(root: str, out: str, lanes: list[str], environment: dict) -> dict[str, Path]:
    """{slug: course folder}: every assignment released and autograded, in the lanes' folders (made
    by the caller, one per lane), with the session's starting environment. Needs every assignment's
    autograder zip, whose golden values the courses carry."""
    take_environment(environment)
    layout = Layout(Path(root), Path(out))
    free: queue.Queue = queue.Queue()
    for lane in lanes:
        free.put(Path(lane))

    def in_a_free_lane(slug):
        course = free.get()
        try:
            release_and_autograde(layout, course, slug)
            return slug, course
        finally:
            free.put(course)

    order = sorted(layout.slugs(), key=lambda slug: slug not in SLOWEST)
    with ThreadPoolExecutor(len(lanes)) as pool:
        return dict(pool.map(in_a_free_lane, order))
