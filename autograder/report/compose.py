"""``course report RESULTS``: after grading, one page per assignment that shows the instructor how
the scores spread, which tests misbehave, what the common mistakes were and which submissions look
alike. It reads ``course grade``'s results folder (``results.json``, ``rows/``, ``feedback/`` and
``run.json``, which says where the submissions are) or a folder of Gradescope ``results.json`` files,
and writes one self-contained HTML file per assignment (:mod:`autograder.report.html`).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from autograder.grade.results import now, write_atomically
from autograder.layout import Layout
from autograder.report import sections
from autograder.report.html import esc, page
from autograder.report.inputs import GradedBatch, Graded, Notes, read_batch
from autograder.report.similarity import code_cells, copy_groups, read_codes, similar_pairs


def report_paths(results: Path, out: Path | None, slugs: list[str]) -> dict[str, Path]:
    """Where each assignment's page goes: ``out`` (default ``RESULTS/report.html``) for one
    assignment; ``<stem>-<assignment>.html`` beside it for several."""
    out = out or results / "report.html"
    if len(slugs) == 1:
        return {slugs[0]: out}
    return {slug: out.with_name(f"{out.stem}-{slug}{out.suffix or '.html'}") for slug in slugs}


def make_reports(results: Path, out: Path | None = None, *, submissions: Path | None = None,
                 assignment: str | None = None, layout: Layout | None = None, log=print) -> list[Path]:
    """Write the report of every assignment in ``results``; returns the pages written. Problems with
    the input are printed (``log``) and listed at the top of each page; the rest is reported."""
    results = Path(results).resolve()
    batch = read_batch(results, submissions.resolve() if submissions else None, assignment)
    slugs = batch.assignments()
    paths = report_paths(results, Path(out).resolve() if out else None, slugs)
    bundle = _bundle_version(layout)
    written = []
    for slug in slugs:
        graded = [g for g in batch.graded if g.assignment in (slug, "")]
        target = paths[slug]
        target.parent.mkdir(parents=True, exist_ok=True)
        notes = Notes()
        notes.groups = {what: list(places) for what, places in batch.notes.groups.items()}
        html = render(slug, graded, batch, target.parent, _template(layout, slug, notes), notes, bundle)
        write_atomically(target, html)
        for line in notes.lines(100, results):
            log(f"note: {line}")
        written.append(target)
    return written


def render(slug: str, graded: list[Graded], batch: GradedBatch, base: Path, template: list[str] | None, notes: Notes,
           bundle: str) -> str:
    """The page of one assignment."""
    started = time.perf_counter()
    pairs, groups, compared, reason = [], [], 0, ""
    with_code = [(g.name, g.code) for g in graded if g.code is not None]
    if not with_code:
        reason = ("the submissions' files were not found: pass --submissions DIR (the folder that was graded)"
                  if batch.kind == "course grade" else
                  "no upload lies beside the results.json files; pass --submissions DIR (a folder of <name>.ipynb)")
    else:
        codes = read_codes(with_code, template, notes)
        compared = len(codes)
        pairs, groups = similar_pairs(codes), copy_groups(codes)
    links = {g.name: g.feedback for g in graded}
    body = [("scores", "Scores", sections.scores(graded, base)),
            ("tests", "Tests", sections.tests(graded)),
            ("mistakes", "Common mistakes", sections.mistakes(graded, base)),
            ("similar", "Similar submissions", sections.similar(pairs, compared, len(graded), base, links, reason, groups)),
            ("every", "Every submission", sections.every_submission(graded, base)),
            ("graded", "What graded", sections.what_graded(batch, graded, now(), bundle))]
    finished = sections.unfinished_share(graded)
    subtitle = (f"{len(graded)} submission(s) ({finished}), graded by {esc(batch.kind)}; results in "
                f"<code>{esc(batch.folder)}</code>; made in {time.perf_counter() - started:.1f} s")
    return page(f"Grading report: {slug}", subtitle, body, notes.lines(4, batch.folder, batch.code_folder))


def _template(layout: Layout | None, slug: str, notes: Notes) -> list[str] | None:
    """The code cells of the assignment's student notebook: the given code left out of comparisons."""
    if layout is None:
        notes.add("student notebook", f"no course bundle found: the code {slug} gives students is left out only "
                                      "where most submissions share it (run inside the bundle, or pass --course)")
        return None
    path = layout.student_dir(slug) / f"{slug}.ipynb"
    try:
        return code_cells(path)
    except (OSError, ValueError, KeyError) as err:
        notes.add(path, f"cannot be read ({type(err).__name__}): the given code is left out only where most "
                        "submissions share it")
        return None


def _bundle_version(layout: Layout | None) -> str:
    """The course bundle and its commit, where git can tell."""
    if layout is None:
        return "course report"
    try:
        commit = subprocess.run(["git", "-C", str(layout.root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"course report in {layout.root}" + (f" (commit {commit})" if commit else "")


def main_report(args, layout: Layout | None) -> int:
    """The ``course report`` command (see :mod:`autograder.cli`)."""
    paths = make_reports(Path(args.results), Path(args.out) if args.out else None,
                         submissions=Path(args.submissions) if args.submissions else None,
                         assignment=args.assignment, layout=layout, log=lambda s: print(s, file=sys.stderr))
    for path in paths:
        print(path)
    return 0
