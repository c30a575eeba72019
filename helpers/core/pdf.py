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
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

__all__ = ["LatexMissing", "Question", "RenderedPdf", "manual_questions", "render_pdf", "render_notice", "latex_missing",
           "TYPESET_SECONDS", "ALONE_SECONDS"]  # the time bounds, which tests and the README quote

BEGIN, END = "<!-- BEGIN QUESTION -->", "<!-- END QUESTION -->"
MAX_OUTPUT_LINES = 40  # of one printed output; the rest is counted, not shown
MAX_LINE_CHARS = 400  # a longer line is cut (it would fill pages with one number list)
COMPILE_SECONDS = 120  # one xelatex run of plain text at most (a safety net: it takes seconds)
#: The budget for typesetting one submission's markdown: the first try gets most of it, each
#: question tried alone at most ALONE_SECONDS; past it, the remaining answers are set as plain text.
TYPESET_SECONDS = 90
ALONE_SECONDS = 20
#: pandoc's markdown, read as JupyterLab renders it.
MARKDOWN_FORMAT = "markdown-auto_identifiers+tex_math_dollars+raw_tex+lists_without_preceding_blankline+pipe_tables"

#: Fonts tried, in order, for characters the main fonts lack (installed by .ci/run on Debian:
#: fonts-droid-fallback for CJK, fonts-symbola for emoji and symbols).
FALLBACK_FONTS = ("Droid Sans Fallback", "Symbola")
MAIN_FONTS = {"main": "DejaVu Serif", "sans": "DejaVu Sans", "mono": "DejaVu Sans Mono"}


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
class Question:
    """One manually graded question of a notebook: its name, points and cells, and the code cells
    right above it (``context``), whose plots and printouts the question usually discusses."""

    name: str
    points: float | None
    cells: list = field(default_factory=list)
    context: list = field(default_factory=list)

    @property
    def label(self) -> str:
        """The prompt's own label ("Question 1a (written)"), else the name."""
        for cell in self.cells:
            if cell.cell_type == "markdown":
                found = re.search(r"\*\*(Question [^*]{1,60}?)\.?\*\*", cell.source)
                if found:
                    return found.group(1)
        return self.name


def manual_questions(nb, names: list[tuple[str, float | None]] | None = None) -> list[Question]:
    """The questions otter's markers delimit in a student notebook, in order, named from ``names``
    ((name, points) of the master's manual questions, in the same order) where the counts agree."""
    found: list[Question] = []
    current: Question | None = None
    above: list = []  # code cells since the last markdown cell outside a question
    for cell in nb.cells:
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        if cell.cell_type != "markdown" or (BEGIN not in source and END not in source):
            if current is not None:
                current.cells.append(cell)
            elif cell.cell_type == "code":
                above.append(cell)
            elif cell.cell_type == "markdown":
                above = []
            continue
        # a marker cell may close one question, open the next, and carry text of either
        for piece in re.split(f"({re.escape(BEGIN)}|{re.escape(END)})", source):
            if piece == BEGIN:
                current = Question(f"question {len(found) + 1}", None, context=above)
                found.append(current)
                above = []
            elif piece == END:
                current = None
            elif piece.strip() and current is not None:
                current.cells.append(_markdown(piece.strip(), locked=cell.metadata.get("editable") is False))
            elif piece.strip():
                above = []
    if names and len(names) == len(found):
        for question, (name, points) in zip(found, names):
            question.name, question.points = name, points
    return found


def _markdown(text: str, locked: bool):
    import nbformat

    cell = nbformat.v4.new_markdown_cell(text)
    if locked:
        cell.metadata["editable"] = False
    return cell


def _students(cell) -> bool:
    """A cell the student wrote or could edit (otter locks the prompts it writes)."""
    return cell.metadata.get("editable") is not False


@dataclass
class RenderedPdf:
    path: Path
    pages: int
    verbatim: list[str]  # questions whose student markdown LaTeX could not set, shown as plain text
    notes: list[str]


# --------------------------------------------------------------------------------------- text
_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#", "%": r"\%",
            "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}"}
_INVISIBLE = {"\u200d", "\ufe0f", "\ufe0e", "\u200b", "\ufeff"}  # joiners and variation selectors
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@lru_cache(maxsize=None)
def _font_chars(family: str) -> frozenset[int] | None:
    """The code points a font installed under ``family`` has, or None when it is not installed."""
    try:
        path = subprocess.run(["fc-match", "--format=%{file}", f"{family}"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
        matched = subprocess.run(["fc-match", "--format=%{family}", f"{family}"], capture_output=True, text=True,
                                 timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not path or family.lower() not in matched.lower():
        return None
    from fontTools.ttLib import TTFont

    try:
        with TTFont(path, fontNumber=0, lazy=True) as font:
            return frozenset(font.getBestCmap() or {})
    except Exception:  # an unreadable font file is a missing font
        return None


def _fallbacks() -> list[tuple[str, str, frozenset[int]]]:
    """(LaTeX command, font family, its characters) of each installed fallback font."""
    return [(f"\\fallback{chr(ord('A') + i)}", family, chars) for i, family in enumerate(FALLBACK_FONTS)
            if (chars := _font_chars(family))]


def fontify(latex: str, main: str = "main") -> str:
    """``latex`` with every run of characters its main font lacks switched to a fallback font that
    has them, or replaced by a visible ``[U+XXXX]``. ASCII is never touched."""
    base = _font_chars(MAIN_FONTS[main]) or frozenset(range(0x250))
    fallbacks = _fallbacks()
    out, run, run_font = [], [], None

    def flush():
        if run:
            out.append("{" + run_font + " " + "".join(run) + "}")
            run.clear()

    for ch in latex:
        code = ord(ch)
        if code < 128 or code in base:
            flush()
            out.append(ch)
            continue
        if ch in _INVISIBLE:
            continue
        font = next((name for name, _, chars in fallbacks if code in chars), None)
        if font is None:
            flush()
            out.append(f"\\texttt{{[U+{code:04X}]}}")
            continue
        if font != run_font:
            flush()
            run_font = font
        run.append(ch)
    flush()
    return "".join(out)


def escape(text: str, main: str = "main") -> str:
    """Plain text as LaTeX that typesets it as it is, whatever it holds."""
    text = _ANSI.sub("", text)
    return fontify("".join(_SPECIAL.get(ch, ch) for ch in text), main)


def verbatim(text: str, size: str = r"\small", max_lines: int | None = None, whole_lines: bool = False) -> str:
    """Code or printed text, line breaks kept, long lines wrapped at any character; printed text
    is cut after ``max_lines`` lines (the count of the rest is shown), and a line longer than
    ``MAX_LINE_CHARS`` is cut unless ``whole_lines`` (a student's answer is kept whole)."""
    lines = _ANSI.sub("", text).rstrip("\n").splitlines() or [""]
    shown = [line if whole_lines or len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ..."
             for line in lines[:max_lines]]
    if max_lines is not None and len(lines) > max_lines:
        shown.append(f"... ({len(lines) - max_lines} more lines)")
    body = "\n".join(escape(line.expandtabs(4), "mono") for line in shown)
    return (f"\\begin{{Verbatim}}[commandchars=\\\\\\{{\\}},breaklines,breakanywhere,fontsize={size}]\n"
            f"{body}\n\\end{{Verbatim}}\n")


#: A run of this many characters with no space (a pasted hash, a URL, a key held down) gets a
#: break opportunity every BREAK_EVERY characters: TeX cannot break it, and a paragraph holding one
#: took xelatex half a minute and more before it gave up.
LONG_WORD = re.compile(r"(?<![^\s(])[^\s`$\\]{80,}")
BREAK_EVERY = 40
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _breakable(text: str) -> str:
    """``text`` with a LaTeX break opportunity inside every very long word, outside code and math."""
    out, fenced = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and not line.startswith(("    ", "\t")):
            line = LONG_WORD.sub(lambda m: "\\allowbreak{}".join(
                m.group(0)[i:i + BREAK_EVERY] for i in range(0, len(m.group(0)), BREAK_EVERY)), line)
        out.append(line)
    return "\n".join(out)


def markdown_to_latex(texts: list[str]) -> list[str]:
    """Many markdown cells to LaTeX in one pandoc call (one call costs about 0.2 s)."""
    if not texts:
        return []
    marker = "COURSECELLBREAK7f3a"
    joined = f"\n\n{marker}\n\n".join(_breakable(text) for text in texts)
    # headings of an answer sit below the question's (level 3 on), out of the bookmarks
    # --no-highlight: fenced code as plain verbatim (pandoc's highlighting macros need its template)
    result = subprocess.run(["pandoc", "-f", MARKDOWN_FORMAT, "-t", "latex", "--no-highlight",
                             "--wrap=preserve", "--shift-heading-level-by=2"], input=joined, capture_output=True, text=True, timeout=COMPILE_SECONDS)
    if result.returncode != 0:
        raise RuntimeError(f"pandoc failed: {result.stderr.strip()[:300]}")
    parts = [part.strip() for part in result.stdout.split(marker)]
    if len(parts) != len(texts):  # a cell swallowed the marker (inside a code block?): one at a time
        return [markdown_to_latex([text])[0] if len(texts) > 1 else result.stdout for text in texts]
    return [_wrapped_code(part) for part in parts]


_VERBATIM = re.compile(r"\\begin\{verbatim\}\n(.*?)\\end\{verbatim\}", re.DOTALL)


def _wrapped_code(latex: str) -> str:
    """pandoc's LaTeX of one cell, fontified, its code blocks wrapping at the margin (fvextra)
    and left as typed (no font switches inside them)."""
    out, last = [], 0
    for block in _VERBATIM.finditer(latex):
        out.append(fontify(latex[last:block.start()]))
        out.append("\\begin{Verbatim}[breaklines,breakanywhere,fontsize=\\small]\n" + block.group(1) + "\\end{Verbatim}")
        last = block.end()
    out.append(fontify(latex[last:]))
    return "".join(out)


# --------------------------------------------------------------------------------------- document
# \questiongap: a question's heading never ends a page alone (a new page unless 12 lines are left)
PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[a4paper,margin=2cm]{geometry}
\usepackage{fontspec}
%(fonts)s
\usepackage{amsmath,amssymb}
\usepackage{graphicx}
\usepackage{fvextra}
\usepackage{xcolor}
\usepackage{longtable,booktabs,array}
\usepackage{hyperref}
\usepackage{bookmark}
\usepackage{needspace}
\usepackage{parskip}
\usepackage{enumitem}
\setlist{nosep}
\providecommand{\tightlist}{\setlength{\itemsep}{0pt}\setlength{\parskip}{0pt}}
\def\pandocbounded#1{#1}
\hypersetup{colorlinks=true,linkcolor=blue,urlcolor=blue,pdfcreator={course pdf},bookmarksdepth=1}
\setcounter{secnumdepth}{0}
\sloppy
\setlength{\emergencystretch}{3em}
\newcommand{\questiongap}{\par\bigskip\needspace{12\baselineskip}}
\newcommand{\questionheading}[1]{{\large\bfseries\raggedright #1\par}\nobreak\medskip}
\setkeys{Gin}{keepaspectratio}
\fvset{frame=leftline,rulecolor=\color{gray!40},framesep=2mm}
\raggedbottom
\pagestyle{plain}
\begin{document}
"""


def _preamble() -> str:
    """The preamble with the fonts this machine has (Latin Modern, LaTeX's own, where DejaVu is missing)."""
    fonts = [f"\\set{kind}font{{{family}}}" + ("[Scale=0.88]" if kind == "mono" else "")
             for kind, family in MAIN_FONTS.items() if _font_chars(family)]
    fonts += [f"\\newfontfamily{name}{{{family}}}" for name, family, _ in _fallbacks()]
    return PREAMBLE % {"fonts": "\n".join(fonts)}


def _image(output: dict, folder: Path, stem: str) -> tuple[str | None, str | None]:
    """(LaTeX for the output's picture, a note when it could not be used)."""
    data = output.get("data", {})
    for mime, suffix in (("image/png", ".png"), ("image/jpeg", ".jpg")):
        if mime not in data:
            continue
        raw = data[mime]
        try:
            payload = base64.b64decode("".join(raw) if isinstance(raw, list) else raw, validate=False)
            from PIL import Image

            with Image.open(io.BytesIO(payload)) as picture:
                picture.verify()
        except (binascii.Error, ValueError, OSError, SyntaxError):
            return None, "a picture in this output could not be read"
        path = folder / f"{stem}{suffix}"
        path.write_bytes(payload)
        return (f"\\begin{{center}}\\includegraphics[width=0.92\\linewidth,height=0.42\\textheight]"
                f"{{{path.name}}}\\end{{center}}\n"), None
    return None, None


def _outputs(cell, folder: Path, stem: str) -> str:
    parts = []
    for index, output in enumerate(cell.get("outputs", [])):
        kind = output.get("output_type")
        if kind == "stream":
            text = output.get("text", "")
            parts.append(verbatim("".join(text) if isinstance(text, list) else text, r"\footnotesize", MAX_OUTPUT_LINES))
        elif kind in ("execute_result", "display_data"):
            picture, note = _image(output, folder, f"{stem}-{index}")
            data = output.get("data", {})
            if picture:
                parts.append(picture)
            elif note:
                parts.append(f"\\emph{{[{escape(note)}]}}\n\n")
            elif "text/plain" in data:
                text = data["text/plain"]
                parts.append(verbatim("".join(text) if isinstance(text, list) else text, r"\footnotesize", MAX_OUTPUT_LINES))
            elif data:
                parts.append("\\emph{[an interactive output (" + escape(", ".join(sorted(data))) + ") is not shown]}\n\n")
        elif kind == "error":
            parts.append(verbatim(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}", r"\footnotesize", MAX_OUTPUT_LINES))
    return "".join(parts)


def _question_latex(question: Question, markdown: dict[int, str], folder: Path, number: int,
                    plain: bool, pagebreak: bool) -> str:
    heading = question.label
    if question.name != heading and not question.name.startswith("question "):
        heading += f" · {question.name}"
    if question.points is not None:
        heading += f" · {question.points:g} point{'s' if question.points != 1 else ''}"
    parts = [("\\clearpage\n" if pagebreak else "\\questiongap\n"),
             f"\\pdfbookmark[1]{{{_bookmark_text(heading)}}}{{q{number}}}\n",
             f"\\questionheading{{{escape(heading)}}}\n"]
    shown = "".join(_outputs(cell, folder, f"q{number}-above{index}") for index, cell in enumerate(question.context))
    if shown:
        parts.append("{\\footnotesize\\itshape What the cells above the question showed:\\par}\n" + shown)
    for index, cell in enumerate(question.cells):
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        if cell.cell_type == "markdown":
            if (plain and _students(cell)) or id(cell) not in markdown:
                parts.append(verbatim(source, r"\small", whole_lines=True))
            else:
                parts.append(markdown[id(cell)] + "\n\n")
        elif cell.cell_type == "code":
            if source.strip():
                parts.append(verbatim(source, r"\footnotesize"))
            parts.append(_outputs(cell, folder, f"q{number}-c{index}"))
    return "".join(parts)


def _bookmark_text(text: str) -> str:
    """Text for a PDF bookmark: hyperref turns it into a PDF string; keep it to safe characters."""
    cleaned = "".join(ch if ch.isalnum() or ch in " .,:;()-+'/_" else " " for ch in text.replace("·", "-"))
    return cleaned.replace("_", r"\_")


def _document(title: str, lines: list[str], questions: list[Question], markdown: dict[int, str], folder: Path,
              plain: set[int], pagebreaks: bool) -> str:
    head = [f"\\pdfbookmark[0]{{{_bookmark_text(title)}}}{{top}}\n",
            f"{{\\Large\\bfseries {escape(title)}\\par}}\n"]
    head += [f"{{\\small {escape(line)}\\par}}\n" for line in lines]
    if not questions:
        head.append("\n\\emph{This notebook has no manually graded questions (no BEGIN QUESTION markers).}\n")
    body = [_question_latex(q, markdown, folder, n, n in plain, pagebreaks and n > 0) for n, q in enumerate(questions)]
    return _preamble() + "".join(head) + "".join(body) + "\\end{document}\n"


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
