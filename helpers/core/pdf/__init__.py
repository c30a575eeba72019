"""PDFs of a notebook's manually graded questions: the student's zip and the TAs' ``course pdf``.

One renderer for both, so a student sees the pages a TA will grade. A question is what otter's
student notebook marks with ``<!-- BEGIN QUESTION -->`` / ``<!-- END QUESTION -->``: its prompt,
the plots and printouts placed inside it, and the student's answer cells.

It never breaks on what a student typed. Markdown is read as JupyterLab shows it (a list right
under a line of text, GitHub tables, fenced code, ``$...$`` and ``$$...$$`` math) and goes through
pandoc to LaTeX; code and printed text are escaped here, character by character, and wrap at the
margin; a character the main font lacks (CJK, emoji) is set in a fallback font that has it, or
shown as its code point. When LaTeX still fails, each question is tried alone, and the student's
markdown in the ones that fail is set as plain text instead (the locked prompts stay typeset): the
rest of the PDF stands. Typesetting one submission has a time budget (``TYPESET_SECONDS``): what
LaTeX cannot set within it is set as plain text, which always is quick, and the PDF says so.

:mod:`.questions` finds the questions in a notebook; :mod:`.latex` turns text, code and markdown
into LaTeX; :mod:`.document` assembles the LaTeX document; :mod:`.render` runs xelatex within the
time budget and writes the PDF. Every public name is importable from ``helpers.core.pdf`` itself
(and from its old path ``helpers.pdf``).
"""

from .questions import BEGIN, END  # noqa: F401 (the student notebook's question markers, which the gradebook reads)
from .questions import PLACEHOLDER, Question, manual_questions, unanswered
from .render import ALONE_SECONDS, TYPESET_SECONDS, LatexMissing, RenderedPdf, latex_missing, render_notice, render_pdf

__all__ = ["LatexMissing", "PLACEHOLDER", "Question", "RenderedPdf", "manual_questions", "unanswered", "render_pdf",
           "render_notice", "latex_missing",
           "TYPESET_SECONDS", "ALONE_SECONDS"]  # the time bounds, which the tests quote
