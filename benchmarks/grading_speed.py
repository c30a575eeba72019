"""Seconds per submission for `course grade` on kernel_attention, one and two at a time.

Grades copies of the reference solution (the slowest realistic submission: every cell runs).

    .venv/bin/python benchmarks/grading_speed.py [COPIES]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from autograder.build import build
from autograder.grade import Grader, Limits
from autograder.layout import Layout

SLUG = "kernel_attention"


def main(copies: int = 4) -> None:
    layout = Layout.find(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        build(layout, SLUG, notebooks_dir=tmp / "notebooks", log=lambda *a: None)
        print(f"course build {SLUG}: {time.perf_counter() - started:.1f} s")
        submissions = tmp / "submissions"
        submissions.mkdir()
        for i in range(copies):
            shutil.copy(layout.solution_notebook(SLUG), submissions / f"student{i}.ipynb")
        print(f"{'jobs':>4}  {'submissions':>11}  {'wall s':>7}  {'s/submission':>12}  {'mean per-row s':>14}")
        for jobs in (1, 2):
            started = time.perf_counter()
            rows = Grader(layout, submissions, tmp / f"results{jobs}", Limits(), jobs=jobs).run(log=lambda *a: None)
            wall = time.perf_counter() - started
            assert all(r["status"] == "ok" and r["total"] == r["possible"] for r in rows), rows
            mean_row = sum(r["seconds"] for r in rows) / len(rows)
            print(f"{jobs:>4}  {len(rows):>11}  {wall:>7.1f}  {wall / len(rows):>12.1f}  {mean_row:>14.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
