"""``course demo``: the whole flow on sample submissions, for a newcomer to watch.

Every assignment is built and two of its samples are graded with ``course grade``'s own default
limits: the complete notebook, which must get full marks (the demo fails loudly otherwise: it proves
the references), and a partly done notebook whose feedback is shown. One assignment's complete
notebook is graded as a student's export zip too (the zip's path is the same for every assignment). The bad
inputs a grader must survive (untouched, raising, looping, memory hog, corrupted, a zip without a
notebook) are shown once, on the quickest assignment, with a short time limit for the loop.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from autograder.build.assign import build_all
from autograder.grade.grader import Grader, Limits
from autograder.grade.results import ResultsFolder, format_table
from autograder.layout import Layout
from autograder.report.compose import make_reports
from autograder.samples import write_samples

#: Graded for every assignment, with the default limits.
ASSIGNMENT_SAMPLES = ("complete.ipynb", "partial.ipynb")
#: Graded for the quickest assignment only: the complete notebook as a student's export zip.
ZIP_SAMPLE = "complete_export.zip"
#: Must get full marks with status ok: the references, as a notebook and as a student's export.
FULL_MARKS = ("complete.ipynb", ZIP_SAMPLE)
#: Shown once: what the grader does with submissions that break.
BAD_INPUTS = ("blank.ipynb", "raising.ipynb", "looping.ipynb", "memory_hog.ipynb", "corrupted.ipynb",
              "no_notebook.zip")
BAD_INPUTS_ASSIGNMENT = "kernel_attention"  # the quickest to grade
#: The loop and the memory hog only have to be seen hitting their limits: 20 s instead of the default
#: 300 s, and 1024 MB instead of 4096 (kernel_attention's notebook needs about 400 MB). At 4096 MB the
#: hog can meet the time limit first: on a machine that fills memory at 150 MB/s it takes over 25 s.
BAD_INPUT_LIMITS = Limits(timeout=20, memory_mb=1024)


def demo(layout: Layout, out: Path | None = None, log=print, unsafe: bool = False) -> int:
    out = out or layout.out / "demo"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    expected = {}
    slugs = layout.slugs()
    log(f"== building {len(slugs)} assignments, two at a time (each executes its reference solution and records "
        "golden values)")
    build_all(layout, slugs, jobs=2, log=log)
    bad_slug = BAD_INPUTS_ASSIGNMENT if BAD_INPUTS_ASSIGNMENT in slugs else slugs[0]
    for slug in slugs:
        samples = ASSIGNMENT_SAMPLES + ((ZIP_SAMPLE,) if slug == bad_slug else ())
        for name, status in write_samples(layout, slug, out / "submissions" / slug, only=samples).items():
            expected[f"{slug}__{name}"] = status
    bad = write_samples(layout, bad_slug, out / "bad_inputs" / bad_slug, only=BAD_INPUTS)
    expected.update({f"{bad_slug}__{name}": status for name, status in bad.items()})

    log(f"\n== grading {len(expected)} sample submissions: each assignment's complete notebook and a partly done "
        f"one, and {bad_slug}'s complete notebook as a student's export zip (limits as `course grade`'s defaults)")
    rows = Grader(layout, out / "submissions", out / "results", Limits(), jobs=2, unsafe=unsafe).run(log=log)
    log("\n" + format_table(rows))
    log(f"\n== grading {len(bad)} bad inputs to {bad_slug} (untouched, raising, looping, memory hog, corrupted, a zip "
        f"without a notebook); the loop meets a {BAD_INPUT_LIMITS.timeout:g} s limit, the hog a "
        f"{BAD_INPUT_LIMITS.memory_mb} MB one")
    bad_rows = Grader(layout, out / "bad_inputs", out / "results_bad_inputs", BAD_INPUT_LIMITS, jobs=2,
                      unsafe=unsafe).run(log=log)
    log("\n" + format_table(bad_rows))

    partial = next((r for r in rows if r["submission"].endswith("partial.ipynb")), None)
    if partial:
        feedback = ResultsFolder(out / "results").feedback_of(partial["submission"])
        log(f"\n== what a student reads: {feedback}")
        log("\n".join(feedback.read_text(encoding="utf-8").splitlines()[:14]) + "\n  ...")

    reports = [path for results in ("results", "results_bad_inputs")
               for path in make_reports(out / results, layout=layout, log=lambda line: None)]
    log("\n== the instructor's report of each graded folder (scores, tests, common mistakes, similar "
        "submissions):\n" + "\n".join(f"  {path}" for path in reports))

    problems = unexpected(rows + bad_rows, expected)
    sealing = "UNSAFE (--unsafe): otter in your own account" if unsafe else \
        f"sealed ({rows[0].get('sandbox', 'sandbox') if rows else 'sandbox'}): each submission in its own sandbox, " \
        "its score judged outside it from the values its tests collected"
    log(f"\nDemo finished in {time.perf_counter() - started:.0f} s. Graded {sealing}.")
    log(f"  student notebooks:  {layout.notebooks}/")
    log(f"  autograder zips:    {layout.out / 'autograders'}/ (upload one to Gradescope as it is)")
    log(f"  sample submissions: {out / 'submissions'}/ and {out / 'bad_inputs'}/")
    log(f"  scores:             {out / 'results' / 'results.csv'} (and results.json)")
    log(f"  feedback:           {out / 'results' / 'feedback'}/")
    log(f"  reports:            {out / 'results'}/report-<assignment>.html (course report {out / 'results'})")
    log(f"  TAs' PDFs:          course pdf {out / 'submissions'} --out {out / 'pdfs'} --graded {out / 'results'}")
    for line in problems:
        log(f"UNEXPECTED {line}")
    if not problems:
        log(f"Every reference scored full marks ({len(slugs)} assignments, and {bad_slug}'s export zip).")
    return 1 if problems else 0


def unexpected(rows: list[dict], expected: dict[str, tuple]) -> list[str]:
    """What the demo must not show: a status other than expected, or a reference short of full marks."""
    problems = []
    for row in rows:
        name = row["submission"]
        if row["status"] not in expected.get(name, ()):
            problems.append(f"{name}: status {row['status']}, expected {' or '.join(expected.get(name, ('?',)))}"
                            + (f" ({row['message'][:200]})" if row["message"] else ""))
        elif name.split("__")[-1] in FULL_MARKS and row["total"] != row["possible"]:
            lost = [f"{q} {v['score']:g}/{v['possible']:g}" for q, v in sorted(row["questions"].items())
                    if v["score"] != v["possible"]]
            problems.append(f"{name}: the reference scored {row['total']:g}/{row['possible']:g} "
                            f"({', '.join(lost)}){': ' + row['message'][:200] if row['message'] else ''}")
    missing = set(expected) - {row["submission"] for row in rows}
    problems += [f"{name}: no row" for name in sorted(missing)]
    return problems
