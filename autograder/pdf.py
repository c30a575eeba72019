"""``course pdf``: the manually graded answers of every submission as PDFs, for TAs.

A notebook saved without outputs (the student never saved after running it) takes the outputs of
its sealed grading run when ``--graded`` names the ``course grade`` results folder that kept them;
else it is executed first, sealed in the grading sandbox as ``course grade`` runs it, in the grading
setting. Its first page says which. One PDF per submission (``OUT/<assignment>/<submission>.pdf``)
and one merged file per assignment (``OUT/<assignment>.pdf``) with a bookmark per submission and, under it, per question.
Submissions are found, resumed and worked through as ``course grade`` does it (:class:`autograder.grade.batch.Batch`). One that cannot be rendered at all (not a
notebook, no notebook in the zip, not an assignment of this course) gets a notice page in the
merged file and a line in ``OUT/pdf-log.txt``; the others go on. A rerun reuses every PDF whose
submission bytes and options are unchanged.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from helpers.core.pdf import LatexMissing, latex_missing, render_notice, render_pdf

from autograder.build import master
from autograder.grade.batch import Batch
from autograder.grade.results import EXECUTED_KEY, ResultsFolder, write_atomically
from autograder.grade.submissions import (InvalidSubmission, assignment_slug, has_outputs, read_submission_notebook,
                                          sha256, submission_id)
from autograder.layout import CourseError, Layout
from autograder.limits import SandboxLimits
from autograder.sandbox.seal import SandboxUnavailable
from autograder.sandbox.session import SandboxesOnDemand

#: Bumped when the PDFs would come out differently: older ones are then made again.
RENDERER_VERSION = 1
UNASSIGNED = "unassigned"
#: Where a run's records are saved, one file per submission.
RECORDS = "records"


def manual_questions_of(path: Path) -> list[tuple[str, float | None]]:
    """(name, points) of a master's manually graded questions, in notebook order."""
    return [(q.name, q.points) for q in master.questions(master.read(path), manual=True)]


@dataclass
class PdfMaker:
    layout: Layout
    submissions: Path
    out: Path
    jobs: int = 2
    pagebreaks: bool = False  # every question on a new page, for Gradescope's page matching
    force: bool = False
    assignment: str | None = None
    execute: bool = True  # run notebooks saved without outputs (sealed) so their plots appear
    graded: Path | None = None  # a `course grade` results folder of these submissions: its executed notebooks are used
    limits: SandboxLimits = SandboxLimits()
    _questions: dict = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def questions_of(self, slug: str) -> list[tuple[str, float | None]]:
        with self._lock:
            if slug not in self._questions:
                self._questions[slug] = manual_questions_of(self.layout.master(slug))
            return self._questions[slug]

    def options(self) -> dict:
        return {"renderer": RENDERER_VERSION, "pagebreaks": self.pagebreaks, "execute": self.execute}

    def from_grading_run(self, record: dict):
        """The notebook as ``course grade`` executed it (``--graded``), if it kept one for these very
        bytes; else None."""
        if self.graded is None:
            return None
        kept = ResultsFolder(self.graded).executed_of(record["submission"])
        try:
            nb = nbformat.read(kept, as_version=4)
        except (OSError, ValueError):
            return None
        return nb if nb.metadata.get(EXECUTED_KEY, {}).get("sha256") == record["sha256"] else None

    def executed(self, slug: str, nb, sandboxes: SandboxesOnDemand) -> tuple[object | None, str]:
        """``nb`` run sealed in the sandbox, as grading runs it: (the executed notebook or None, why not)."""
        zip_path = self.layout.autograder_zip(slug)
        if not zip_path.is_file():
            return None, f"no autograder at {zip_path} to run it with (run `course build {slug}`)"
        try:
            pool = sandboxes.get()
        except SandboxUnavailable as err:
            return None, f"no sandbox can start here to run it ({str(err)[:160]})"
        text, problem = pool.execute(pool.autograder(zip_path), nbformat.writes(nb), self.limits)
        return (nbformat.reads(text, as_version=4) if text else None), problem

    def make_one(self, path: Path, sandboxes: SandboxesOnDemand) -> dict:
        """Render one submission; always returns its record (status ok or failed, and why). A notebook
        saved without outputs is run in one of ``sandboxes`` (started only if one is needed)."""
        started = time.perf_counter()
        record = {"submission": submission_id(path, self.submissions), "file": path.relative_to(self.submissions).as_posix(),
                  "sha256": sha256(path), **self.options(), "assignment": "", "status": "failed", "message": ""}
        try:
            nb = read_submission_notebook(path)
            slug = assignment_slug(nb, self.assignment, known=self.layout.slugs())
        except InvalidSubmission as err:
            record["message"] = str(err)
            return self.save(record, started)
        record["assignment"] = slug
        lines = [f"assignment {slug} · file {record['file']}"]
        kept = None if has_outputs(nb) else self.from_grading_run(record)
        if kept is not None:
            nb = kept
            lines.append("Saved without outputs: the plots and printouts below come from its sealed grading run "
                         "(grading setting), not from the student's own run.")
            record.update(executed=True, from_grading_run=True,
                          message="saved without outputs; the outputs of its grading run")
        elif not has_outputs(nb):  # and no grading run kept it: run it here
            ran, problem = self.executed(slug, nb, sandboxes) if self.execute else (None, "not asked to (--no-execute)")
            if ran is not None:
                nb = ran
                lines.append("Saved without outputs: the plots and printouts below come from running the notebook "
                             "for this PDF (sealed, grading setting), not from the student's own run"
                             + (f"; it stopped: {problem}" if problem else "."))
            else:
                lines.append("Saved without outputs, so the plots and printouts the questions discuss are missing; "
                             f"it was not run for this PDF: {problem}")
            record["executed"] = ran is not None
            record["message"] = ("saved without outputs; run for this PDF" + (f", and it stopped: {problem}" if problem else "")
                                 if ran is not None else f"saved without outputs and not run: {problem}")
            record["worth_a_look"] = bool(problem) or ran is None  # it stopped, or its plots are missing
        target = self.out / slug / f"{record['submission']}.pdf"
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            rendered = render_pdf(nb, target, title=record["submission"], lines=lines, names=self.questions_of(slug),
                                  pagebreaks=self.pagebreaks)
        except LatexMissing:
            raise
        except Exception as err:  # one submission's failure never stops the others
            record["message"] = f"could not be rendered: {type(err).__name__}: {str(err)[:300]}"
            return self.save(record, started)
        record.update(status="ok", pages=rendered.pages, verbatim=rendered.verbatim, pdf=target.relative_to(self.out).as_posix())
        plain = ["set as plain text where LaTeX failed: " + ", ".join(rendered.verbatim)] if rendered.verbatim else []
        record["message"] = "; ".join(filter(None, [record["message"], *rendered.notes, *plain]))
        record["worth_a_look"] = bool(record.get("worth_a_look") or rendered.notes or plain)
        return self.save(record, started)

    def save(self, record: dict, started: float) -> dict:
        record["seconds"] = round(time.perf_counter() - started, 2)
        return record

    def still_holds(self, path: Path, record: dict) -> bool:
        """A saved record still holds: same bytes, same options, its PDF still there."""
        if record.get("sha256") != sha256(path) or any(record.get(k) != v for k, v in self.options().items()):
            return False
        return record.get("status") != "ok" or (self.out / record.get("pdf", "")).is_file()

    def run(self, log=print) -> list[dict]:
        problem = latex_missing()
        if problem:
            raise CourseError(problem)
        if self.assignment and self.assignment not in self.layout.slugs():
            raise CourseError(f"no assignment {self.assignment!r} (known: {', '.join(self.layout.slugs())})")
        batch = Batch(self.submissions, self.out, RECORDS, self.jobs, self.force)
        started = time.perf_counter()
        found = batch.find(log)
        records = {path: record for path, record in batch.saved(found).items() if self.still_holds(path, record)}
        if records:
            log(f"{len(records)} submission(s) unchanged since their PDF was made (use --force to remake them)")
        todo = [path for path in found if path not in records]
        private = [self.submissions, self.out, self.layout.solutions, self.layout.out]
        with SandboxesOnDemand(self.jobs, private=private) as sandboxes:
            records.update(batch.work(todo, lambda path: self.make_one(path, sandboxes), desc="PDFs"))
        ordered = [records[path] for path in found]
        self.seconds = time.perf_counter() - started
        self.merged = self.merge(ordered)
        self.write_log(ordered)
        return ordered

    def merge(self, records: list[dict]) -> dict[str, int]:
        """OUT/<assignment>.pdf for every assignment: each submission's PDF (its bookmarks kept), or a
        notice page for one that could not be rendered. Returns the page count of each."""
        from pypdf import PdfWriter

        slugs = sorted({r["assignment"] for r in records if r["assignment"]})

        def placed(record: dict) -> str:
            """Where a record goes: its assignment; for one that names none, a folder of its path named
            after an assignment, else the only assignment there is, else ``unassigned``."""
            if record["assignment"]:
                return record["assignment"]
            folders = [part for part in Path(record["file"]).parts[:-1] if part in self.layout.slugs()]
            return folders[-1] if folders else self.assignment or (slugs[0] if len(slugs) == 1 else UNASSIGNED)

        merged = {}
        notices = self.out / "notices"
        for slug in sorted({placed(r) for r in records}):
            group = [r for r in records if placed(r) == slug]
            writer = PdfWriter()
            for record in group:
                if record["status"] == "ok":
                    append_with_bookmarks(writer, self.out / record["pdf"], record["submission"])
                else:
                    notices.mkdir(exist_ok=True)
                    notice = notices / f"{record['submission']}.pdf"
                    render_notice(notice, record["submission"], [f"file {record['file']}", "This submission could not be "
                                  "rendered, so it has no pages here:", record["message"]])
                    append_with_bookmarks(writer, notice, record["submission"] + " (not rendered)")
            target = self.out / f"{slug}.pdf"
            buffer = io.BytesIO()
            writer.write(buffer)
            write_atomically(target, buffer.getvalue())
            merged[slug] = len(writer.pages)
        return merged

    def write_log(self, records: list[dict]) -> None:
        """``pdf-log.txt``: the submissions a TA should look at: not rendered, rendered in part as plain
        text, or with plots missing or from a run that stopped; nothing for the others."""
        lines = [f"{r['submission']}: {'ok, ' if r['status'] == 'ok' else 'NOT RENDERED: '}{r['message']}"
                 for r in records if r["status"] != "ok" or r.get("worth_a_look")]
        write_atomically(self.out / "pdf-log.txt", "\n".join(lines) + ("\n" if lines else ""))


def append_with_bookmarks(writer, pdf: Path, title: str) -> None:
    """Append ``pdf`` under a bookmark ``title`` with its own bookmarks (the questions) as children.

    The bookmarks are made anew with page numbers: the files' own ones name destinations ("q1")
    that every submission's file repeats, and would all jump to the first submission's pages."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    start = len(writer.pages)
    writer.append(reader, import_outline=False)
    parent = writer.add_outline_item(title=title, page_number=start)

    def children(items):
        for item in items:
            if isinstance(item, list):
                yield from children(item)
            elif item.title != title:  # the file's own top bookmark is the submission itself
                yield item

    for item in children(reader.outline):
        writer.add_outline_item(title=item.title, page_number=start + reader.get_destination_page_number(item), parent=parent)


def summary(maker: PdfMaker, records: list[dict]) -> str:
    ok = [r for r in records if r["status"] == "ok"]
    lines = [f"{len(ok)} of {len(records)} submission(s) rendered"
             + (f"; {len(records) - len(ok)} could not be (see {maker.out / 'pdf-log.txt'})" if len(ok) < len(records) else "")]
    for slug, pages in sorted(maker.merged.items()):
        lines.append(f"{maker.out / (slug + '.pdf')}: {pages} pages")
    for r in records:
        if r["message"]:
            lines.append(f"  {r['submission']}: {r['message'][:160]}")
    return "\n".join(lines)
