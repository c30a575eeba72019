"""course pdf: PDFs per minute with --jobs 1 and 2, and each merged file's page count against the
sum of its per-submission files (equal: no blank or extra pages), for every assignment.

Each assignment's solved student notebook is run once as a student runs it (fast setting), then
copied into 8 submissions with different written answers: real plots, real prompts.

    .venv/bin/python benchmarks/pdf.py
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from pypdf import PdfReader

from reference import REPO, solved_student_notebook

from autograder.layout import Layout
from autograder.pdf import PdfMaker

COPIES = 8
ANSWER = ("Answer {n} of student {s}: the weights over the keys sum to one, so each output is a weighted "
          "average of the values; $\\sum_j a_{{ij}} = 1$ and the cost is $O(N L D)$. ") * 3


def executed(nb, folder: Path):
    """``nb`` run top to bottom in a fresh kernel, in the fast setting, without the export cell."""
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    nbformat.write(nb, folder / f"{nb.metadata['otter']['assignment_name']}.ipynb")
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and "export_submission(" not in cell.source:
                client.execute_cell(cell, index)
    return nb


def main() -> None:
    os.environ.setdefault("COURSE_SETTING", "grading")
    layout = Layout.find(REPO)
    with tempfile.TemporaryDirectory(prefix="bench-pdf-") as tmp:
        tmp = Path(tmp)
        submissions = tmp / "submissions"
        for slug in layout.slugs():
            started = time.perf_counter()
            work = tmp / slug
            work.mkdir()
            nb = executed(solved_student_notebook(layout, slug, work), work)
            for s in range(COPIES):
                copy_ = copy.deepcopy(nb)
                answers = [c for c in copy_.cells if "otter_answer_cell" in c.metadata.get("tags", [])]
                for n, cell in enumerate(answers):
                    cell.source = ANSWER.format(n=n, s=s)
                (submissions / slug).mkdir(parents=True, exist_ok=True)
                nbformat.write(copy_, submissions / slug / f"student{s:02d}.ipynb")
            print(f"{slug}: built and run once as a student in {time.perf_counter() - started:.0f} s; "
                  f"{len(answers)} written answers")
        total = COPIES * len(layout.slugs())
        for jobs in (1, 2):
            maker = PdfMaker(layout, submissions, tmp / f"pdfs{jobs}", jobs=jobs)
            records = maker.run(log=lambda *a: None)
            assert all(r["status"] == "ok" for r in records), [r for r in records if r["status"] != "ok"]
            print(f"--jobs {jobs}: {total} PDFs in {maker.seconds:.1f} s = {total / maker.seconds * 60:.0f} PDFs per minute")
        for slug in layout.slugs():
            out = tmp / "pdfs2"
            per_submission = [len(PdfReader(p).pages) for p in sorted((out / slug).glob("*.pdf"))]
            merged = len(PdfReader(out / f"{slug}.pdf").pages)
            print(f"{slug}: merged {merged} pages, per-submission files {sum(per_submission)} pages in all "
                  f"({min(per_submission)}-{max(per_submission)} each)")
        started = time.perf_counter()
        rerun = PdfMaker(layout, submissions, tmp / "pdfs2", jobs=2)
        rerun.run(log=lambda *a: None)
        print(f"rerun with nothing changed: {time.perf_counter() - started:.1f} s (merging only)")
        gradescope = PdfMaker(layout, submissions, tmp / "gradescope", jobs=2, pagebreaks=True)
        gradescope.run(log=lambda *a: None)
        print("--gradescope (every question on a new page): " + ", ".join(
            f"{slug} {pages} pages" for slug, pages in sorted(gradescope.merged.items())))


if __name__ == "__main__":
    main()
