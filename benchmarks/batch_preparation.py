"""How long the test suite takes to prepare its grading batches: every assignment built and its
batch written (samples, variant notebooks, a student's run and export), as the suite's
``batch_preparation`` fixture does it, ``--jobs`` at a time (1: one after another, as the suite
did before; 2: what the suite does).

    .venv/bin/python benchmarks/batch_preparation.py [--jobs N] [SLUG ...]

Prints each batch's time as it is ready and the total.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from autograder.layout import OUT_ENV, Layout
from autograder.sandbox.protocol import GRADING_SETTING, SETTING_ENV
from helpers.submission import latex_available

REPO = Path(__file__).resolve().parents[1]
# the preparation is the tests' own (the tests package, from the top of the repository; the
# preparation's worker processes are given the same path)
sys.path.insert(0, str(REPO))

from tests.support.batches import PREPARATION_JOBS, SLUG, BatchPreparation  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=PREPARATION_JOBS)
    parser.add_argument("slugs", nargs="*", help="default: every assignment")
    args = parser.parse_args()
    os.environ.setdefault(SETTING_ENV, GRADING_SETTING)  # as the suite builds and runs them
    with tempfile.TemporaryDirectory(prefix="batch-preparation-") as tmp:
        tmp = Path(tmp)
        os.environ[OUT_ENV] = str(tmp / "out")
        layout = Layout(REPO, tmp / "out")
        slugs = args.slugs or layout.slugs()
        kinds = {SLUG: ("with_pdf", "without_latex") if latex_available() else ("without_latex",)}
        preparation = BatchPreparation(layout, lambda slug: tmp / slug, slugs, kinds, jobs=args.jobs)
        started = time.perf_counter()
        try:
            for slug in slugs:
                folder = preparation.get(slug).folder
                files = [*folder.rglob("*.ipynb"), *folder.rglob("*.zip")]
                print(f"{slug}: {len(files)} submissions, ready at {time.perf_counter() - started:.1f} s", flush=True)
        finally:
            preparation.close()
        print(f"{len(slugs)} batches prepared {args.jobs} at a time in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
