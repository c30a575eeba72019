"""PDFs of a notebook's manual questions and notice pages, typeset by xelatex within a time budget:
what LaTeX cannot set in time, or at all, is set as plain text."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .document import _bookmark_text, _document, _preamble
from .latex import COMPILE_SECONDS, escape, markdown_to_latex
from .questions import manual_questions

__all__ = ["LatexMissing", "RenderedPdf", "render_pdf", "render_notice", "latex_missing", "TYPESET_SECONDS",
           "ALONE_SECONDS"]


#: The budget for typesetting one submission's markdown: the first try gets most of it, each
#: question tried alone at most ALONE_SECONDS; past it, the remaining answers are set as plain text.
TYPESET_SECONDS = 90
ALONE_SECONDS = 20


class LatexMissing(RuntimeError):
    """xelatex or pandoc is not installed; the message says what to install."""


def latex_missing() -> str | None:
    """What to install for PDFs, or None when xelatex and pandoc are both there."""
    missing = [tool for tool in ("xelatex", "pandoc") if not shutil.which(tool)]
    if not missing:
        return None
    return (f"{' and '.join(missing)} not found: PDFs need LaTeX and pandoc. On Debian or Ubuntu: "
            "sudo apt-get install texlive-xetex texlive-fonts-recommended texlive-plain-generic pandoc "
            "fonts-dejavu fonts-droid-fallback fonts-symbola; on macOS: brew install --cask mactex && brew install pandoc")


@dataclass
class RenderedPdf:
    path: Path
    pages: int
    verbatim: list[str]  # questions whose student markdown LaTeX could not set, shown as plain text
    notes: list[str]


def _compile(tex: str, folder: Path, name: str, seconds: float = COMPILE_SECONDS) -> Path | None:
    """xelatex once (bookmarks need no second pass with the bookmark package); the PDF or None
    (also when it takes longer than ``seconds``)."""
    (folder / f"{name}.tex").write_text(tex, encoding="utf-8")
    pdf = folder / f"{name}.pdf"
    pdf.unlink(missing_ok=True)
    if seconds <= 0:
        return None
    try:
        done = subprocess.run(["xelatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", f"{name}.tex"],
                              cwd=folder, capture_output=True, timeout=seconds, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None
    return pdf if done.returncode == 0 and pdf.exists() else None


def render_pdf(nb, out: Path, *, title: str, lines: list[str] = (), names: list[tuple[str, float | None]] | None = None,
               pagebreaks: bool = False) -> RenderedPdf:
    """Write the PDF of ``nb``'s manual questions to ``out``.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        A student notebook (otter's question markers in it).
    out : Path
        The PDF to write (its folder must exist).
    title, lines : str, list of str
        The heading: the submission's name, then lines such as the assignment and notes.
    names : list of (str, float or None), optional
        The master's manual questions, in order: their names and points head each question.
    pagebreaks : bool
        Start every question on a new page (Gradescope matches pages to questions that way);
        otherwise questions follow each other and no page is left mostly blank.

    Raises
    ------
    LatexMissing
        xelatex or pandoc is not installed.
    RuntimeError
        Even plain text could not be set (a broken TeX installation).
    """
    problem = latex_missing()
    if problem:
        raise LatexMissing(problem)
    questions = manual_questions(nb, names)
    cells = [c for q in questions for c in q.cells if c.cell_type == "markdown"]
    sources = [c.source if isinstance(c.source, str) else "".join(c.source) for c in cells]
    notes = []
    try:
        markdown = dict(zip(map(id, cells), markdown_to_latex(sources)))
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        markdown, notes = {}, [f"markdown set as plain text: {err}"]
    with tempfile.TemporaryDirectory(prefix="course-pdf-") as tmp:
        folder = Path(tmp)
        plain: set[int] = set()
        deadline = time.monotonic() + TYPESET_SECONDS
        left = lambda: deadline - time.monotonic()  # noqa: E731
        pdf = _compile(_document(title, lines, questions, markdown, folder, plain, pagebreaks), folder, "submission",
                       left() - ALONE_SECONDS)
        if pdf is None:  # find the questions LaTeX cannot set, each alone; set their markdown as text
            for n, question in enumerate(questions):
                alone = _document(title, [], [question], markdown, folder, set(), False)
                if _compile(alone, folder, f"alone{n}", min(ALONE_SECONDS, left())) is None:
                    plain.add(n)
            if left() <= 0:
                notes.append(f"typesetting took more than {TYPESET_SECONDS} s: the answers it had not set by then are "
                             "set as plain text")
            pdf = _compile(_document(title, lines, questions, markdown, folder, plain, pagebreaks), folder, "submission",
                           max(left(), ALONE_SECONDS))
        if pdf is None:  # nothing of the student's is trusted to LaTeX any more
            plain = set(range(len(questions)))
            pdf = _compile(_document(title, lines, questions, {}, folder, plain, pagebreaks), folder, "submission")
        if pdf is None:
            log = folder / "submission.log"
            tail = log.read_text(encoding="utf-8", errors="replace")[-600:] if log.exists() else ""
            raise RuntimeError(f"xelatex could not set even plain text: {tail}")
        shutil.copyfile(pdf, out)
    from pypdf import PdfReader

    return RenderedPdf(out, len(PdfReader(out).pages), [questions[n].name for n in sorted(plain)], notes)


def render_notice(out: Path, title: str, lines: list[str]) -> int:
    """A one-page PDF that stands for a submission that could not be rendered; its page count."""
    problem = latex_missing()
    if problem:
        raise LatexMissing(problem)
    head = (f"\\pdfbookmark[0]{{{_bookmark_text(title)}}}{{top}}\n{{\\Large\\bfseries {escape(title)}\\par}}\\bigskip\n"
            + "".join(f"{escape(line)}\\par\n" for line in lines))
    with tempfile.TemporaryDirectory(prefix="course-pdf-") as tmp:
        pdf = _compile(_preamble() + head + "\\end{document}\n", Path(tmp), "notice")
        if pdf is None:
            raise RuntimeError("xelatex could not set a notice page")
        shutil.copyfile(pdf, out)
    from pypdf import PdfReader

    return len(PdfReader(out).pages)
