"""Seconds per submission, side by side on the same kernel_attention submissions, two at a time:

- sealed ``course grade --jobs 2`` (bubblewrap sandbox, scores judged outside);
- the autograder zip run as Gradescope runs it (``course gradescope-check``: POSIX separation, a
  uid of its own, as in Gradescope's containers), two containers at a time (as root only);
- plain ``otter run`` with the same autograder zip (compare mode), two processes at a time;
- the notebook executed by nbclient alone, unsandboxed, two at a time (no grading at all).

The targets (issue 7): sealed at most half the wall time per submission of ``otter run``, and at
most 1.3 times nbclient alone. A sealed run of only the first two copies is timed too, to tell
what a run pays once (the fork server's imports, the uids' emptying at its end), which a class of
hundreds spreads thin, from what each further submission adds. Submissions are copies of the
solved student notebook, each with different bytes (the slowest realistic submission: every cell
runs).

    .venv/bin/python benchmarks/grading_speed.py [COPIES]
"""

from __future__ import annotations

import os
import subprocess
import sys
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from autograder.grade.grader import Grader, Limits
from autograder.layout import Layout
from reference import solved_student_notebook

SLUG = "kernel_attention"
JOBS = 2

NBCLIENT_ALONE = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": sys.argv[2]}}).execute()
"""


def path_without_latex() -> str:
    """The export cell makes a PDF when LaTeX is on the PATH; graders do not, so hide it."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if not any(Path(f, t).exists() for t in ("xelatex", "pandoc")))


def two_at_a_time(commands: list[tuple[list[str], Path]]) -> float:
    env = dict(os.environ, COURSE_SETTING="grading", PATH=path_without_latex())

    def run(item):
        command, cwd = item
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{command[:4]} failed: {done.stderr[-1000:]}")

    started = time.perf_counter()
    with ThreadPoolExecutor(JOBS) as pool:
        list(pool.map(run, commands))
    return time.perf_counter() - started


def main(copies: int = 6) -> None:
    layout = Layout.find(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        complete = solved_student_notebook(layout, SLUG, tmp)
        submissions = tmp / "submissions"
        submissions.mkdir()
        for i in range(copies):
            complete.metadata["copy"] = i
            nbformat.write(complete, submissions / f"student{i}.ipynb")
        zip_path = Path(shutil.copy(layout.autograder_zip(SLUG), tmp))  # private, as gradescope-check demands

        started = time.perf_counter()
        rows = Grader(layout, submissions, tmp / "sealed", Limits(), jobs=JOBS).run(log=lambda *a: None)
        sealed = time.perf_counter() - started
        # what a run pays once (the fork server's imports, the uids' emptying at its end) against what
        # each further submission costs: the same grading of the first JOBS copies alone
        first_few = tmp / "first_few"
        first_few.mkdir()
        for i in range(JOBS):
            shutil.copy(submissions / f"student{i}.ipynb", first_few)
        started = time.perf_counter()
        Grader(layout, first_few, tmp / "sealed_first_few", Limits(), jobs=JOBS).run(log=lambda *a: None)
        sealed_first_few = time.perf_counter() - started
        assert all(r["status"] == "ok" and r["total"] == r["possible"] for r in rows), [r["message"] for r in rows]

        gradescope = None
        if os.geteuid() == 0:
            from autograder.platforms.gradescope import emulate

            import queue

            uid_bases = queue.Queue()  # one per worker: two graders on one uid would kill each other's processes
            for base in range(64200, 64200 + 10 * JOBS, 10):
                uid_bases.put(base)

            def check(i: int) -> None:
                base = uid_bases.get()
                try:
                    results = emulate(zip_path, submissions / f"student{i}.ipynb",
                                      env={"COURSE_SANDBOX_UID_BASE": str(base)})
                finally:
                    uid_bases.put(base)
                assert results["score"] == 22, results["output"]

            started = time.perf_counter()
            with ThreadPoolExecutor(JOBS) as pool:
                list(pool.map(check, range(copies)))
            gradescope = time.perf_counter() - started

        otter = Path(sys.executable).with_name("otter")
        runs = []
        for i in range(copies):
            work = tmp / f"otter{i}"
            work.mkdir()
            nbformat.write(complete, work / f"{SLUG}.ipynb")
            runs.append(([str(otter), "run", "-a", str(zip_path), "-o", str(work), f"{SLUG}.ipynb"], work))
        otter_wall = two_at_a_time(runs)

        alone = []
        for i in range(copies):
            work = tmp / f"alone{i}"
            work.mkdir()
            nbformat.write(complete, work / f"{SLUG}.ipynb")
            alone.append(([sys.executable, "-c", NBCLIENT_ALONE, f"{SLUG}.ipynb", str(work)], work))
        alone_wall = two_at_a_time(alone)

    per = {name: wall / copies for name, wall in
           (("sealed course grade", sealed), ("Gradescope zip (posix)", gradescope), ("plain otter run", otter_wall),
            ("nbclient alone", alone_wall)) if wall is not None}
    print(f"{copies} complete {SLUG} submissions, {JOBS} at a time, {os.cpu_count()} cores")
    print(f"{'':<24}{'wall s':>8}{'s/submission':>14}")
    for name, seconds in per.items():
        print(f"{name:<24}{seconds * copies:>8.1f}{seconds:>14.2f}")
    print(f"sealed / otter run:     {per['sealed course grade'] / per['plain otter run']:.2f}  (target <= 0.5)")
    if copies > JOBS:
        further = (sealed - sealed_first_few) / (copies - JOBS)
        print(f"  a sealed run of {JOBS} copies took {sealed_first_few:.1f} s; each further copy added {further:.2f} s "
              f"({further / per['plain otter run']:.2f} of otter run's s/submission)")
    print(f"sealed / nbclient alone: {per['sealed course grade'] / per['nbclient alone']:.2f}  (target <= 1.3)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
