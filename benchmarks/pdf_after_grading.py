"""course pdf right after course grade: with ``--graded`` (the grading run's executed notebooks
reused) against without (every notebook saved without outputs run again), on a class of solved
kernel_attention notebooks saved without outputs, each with its own written answers.

    .venv/bin/python benchmarks/pdf_after_grading.py [SUBMISSIONS] [--graded-only]

``--graded-only`` leaves out the run without ``--graded`` (for a large class, where it takes minutes).
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from reference import REPO

from autograder.grade.grader import Grader, Limits
from autograder.layout import Layout
from autograder.pdf import PdfMaker
from autograder.samples import write_samples

SLUG = "kernel_attention"
JOBS = 2


def main(count: int = 40, graded_only: bool = False) -> None:
    os.environ.setdefault("COURSE_SETTING", "grading")
    layout = Layout.find(REPO)
    with tempfile.TemporaryDirectory(prefix="bench-pdf-graded-") as tmp:
        tmp = Path(tmp)
        write_samples(layout, SLUG, tmp / "samples", only=("complete.ipynb",))
        complete = nbformat.read(tmp / "samples" / "complete.ipynb", as_version=4)
        submissions = tmp / "class"
        submissions.mkdir()
        for s in range(count):
            nb = copy.deepcopy(complete)
            for n, cell in enumerate(c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])):
                cell.source = f"Student {s}, answer {n}: the weights over the keys sum to one, $O(N^2 D)$."
            nbformat.write(nb, submissions / f"student{s:02d}.ipynb")
        quiet = lambda *args: None  # noqa: E731
        started = time.perf_counter()
        rows = Grader(layout, submissions, tmp / "results", Limits(), jobs=JOBS).run(log=quiet)
        grading = time.perf_counter() - started
        assert all(r["status"] == "ok" and r["total"] == r["possible"] for r in rows), [r["message"] for r in rows]
        timings = {}
        runs = [("course pdf --graded RESULTS", tmp / "results")] + ([] if graded_only else [("course pdf (runs each again)", None)])
        for name, graded in runs:
            started = time.perf_counter()
            records = PdfMaker(layout, submissions, tmp / f"pdfs-{bool(graded)}", jobs=JOBS, graded=graded).run(log=quiet)
            timings[name] = time.perf_counter() - started
            assert all(r["status"] == "ok" for r in records), [r["message"] for r in records if r["status"] != "ok"]
            reused = sum(bool(r.get("from_grading_run")) for r in records)
            print(f"{name:<30} {timings[name]:7.1f} s  ({timings[name] / count:.2f} s per PDF; "
                  f"{reused} of {count} from the grading run)")
    print(f"course grade of the same {count}: {grading:.1f} s; {JOBS} jobs, {os.cpu_count()} cores")
    if not graded_only:
        print(f"reuse saves {timings['course pdf (runs each again)'] - timings['course pdf --graded RESULTS']:.0f} s "
              f"({timings['course pdf (runs each again)'] / timings['course pdf --graded RESULTS']:.1f}x)")


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(numbers[0]) if numbers else 40, graded_only="--graded-only" in sys.argv[1:])
