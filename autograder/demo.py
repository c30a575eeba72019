"""``course demo``: the whole flow on sample submissions, for a newcomer to watch."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from .build import build
from .grade import Grader, Limits, format_table
from .layout import Layout
from .samples import write_samples


def demo(layout: Layout, out: Path | None = None, log=print, unsafe: bool = False) -> int:
    out = out or layout.out / "demo"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    expected = {}
    for slug in layout.slugs():
        log(f"== building {slug} (executes the reference solution and records golden values)")
        build(layout, slug, log=log)
        for name, status in write_samples(layout, slug, out / "submissions" / slug).items():
            expected[f"{slug}__{name}"] = status
    log(f"\n== grading {len(expected)} sample submissions (complete, partial, blank, raising, looping, "
        "memory hog, corrupted, zip without notebook)")
    rows = Grader(layout, out / "submissions", out / "results", Limits(timeout=60, memory_mb=3072), jobs=2,
                  unsafe=unsafe).run(log=log)
    log("\n" + format_table(rows))
    wrong = [f"{r['submission']}: status {r['status']}, expected {expected[r['submission']]}"
             for r in rows if r["status"] not in expected[r["submission"]]]
    log(f"\nDemo finished in {time.perf_counter() - started:.0f} s. " + (
        "Graded UNSAFE (--unsafe): otter in your own account." if unsafe else
        "Graded sealed: each submission ran in a bubblewrap sandbox (no network, read-only system, nothing "
        "of the bundle in sight) and its score was judged outside it from the values its tests collected."))
    log(f"  student notebooks:  {layout.notebooks}/")
    log(f"  autograder zips:    {layout.out / 'autograders'}/")
    log(f"  sample submissions: {out / 'submissions'}/")
    log(f"  scores:             {out / 'results' / 'results.csv'} (and results.json)")
    log(f"  feedback:           {out / 'results' / 'feedback'}/")
    for line in wrong:
        log(f"UNEXPECTED {line}")
    return 1 if wrong else 0
