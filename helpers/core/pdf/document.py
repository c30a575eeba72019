"""The LaTeX document of a notebook's manual questions: the preamble, each question's heading,
prompt, answers and the outputs (pictures, printouts) it shows, and the PDF bookmarks."""

from __future__ import annotations

import base64
import binascii
import io
from pathlib import Path

from .latex import MAIN_FONTS, _fallbacks, _font_chars, escape, verbatim
from .questions import Question, _students, unanswered

__all__: list[str] = []


MAX_OUTPUT_LINES = 40  # of one printed output; the rest is counted, not shown


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
%% the student's answer, set apart from the prompt by a label and two rules
\definecolor{answer}{RGB}{31,79,140}
\newcommand{\answerstart}{\par\smallskip\noindent{\color{answer}\rule{\linewidth}{0.6pt}}\par\nobreak
  {\small\bfseries\color{answer}Answer\par}\nobreak\smallskip}
\newcommand{\answerend}{\par\noindent{\color{answer}\rule{\linewidth}{0.6pt}}\par\medskip}
%% a picture as large as it may be (0.42 of a page), or smaller to fit the rest of this page, with
%% room left for a short answer below it, when at least a fifth of it is left, rather than leave the
%% page nearly empty
\newlength{\roomleft}
\newcommand{\fitgraphic}[1]{\par\setlength{\roomleft}{\dimexpr\pagegoal-\pagetotal-8\baselineskip\relax}%%
  \ifdim\roomleft<0.2\textheight\setlength{\roomleft}{0.42\textheight}\fi
  \ifdim\roomleft>0.42\textheight\setlength{\roomleft}{0.42\textheight}\fi
  \begin{center}\includegraphics[width=0.92\linewidth,height=\roomleft]{#1}\end{center}}
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
        return f"\\fitgraphic{{{path.name}}}\n", None
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
    answering = False  # inside the student's cells: between \answerstart and \answerend
    for index, cell in enumerate(question.cells):
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        if _students(cell) != answering:
            answering = not answering
            parts.append("\\answerstart\n" if answering else "\\answerend\n")
        if answering and cell.cell_type == "markdown" and unanswered(source):
            parts.append("\\emph{No answer.}\n\n")
        elif cell.cell_type == "markdown":
            if (plain and _students(cell)) or id(cell) not in markdown:
                parts.append(verbatim(source, r"\small", whole_lines=True))
            else:
                parts.append(markdown[id(cell)] + "\n\n")
        elif cell.cell_type == "code":
            if source.strip():
                parts.append(verbatim(source, r"\footnotesize"))
            parts.append(_outputs(cell, folder, f"q{number}-c{index}"))
    if answering:
        parts.append("\\answerend\n")
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
