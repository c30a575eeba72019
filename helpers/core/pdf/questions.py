"""The manually graded questions of a student notebook: what otter marks with
``<!-- BEGIN QUESTION -->`` / ``<!-- END QUESTION -->``, with the cells inside each question and the
code cells right above it, whose plots and printouts it usually discusses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PLACEHOLDER", "Question", "manual_questions", "unanswered"]


BEGIN, END = "<!-- BEGIN QUESTION -->", "<!-- END QUESTION -->"
#: What otter puts in a written answer's cell for the student to replace.
PLACEHOLDER = "Type your answer here, replacing this text."


def unanswered(source: str) -> bool:
    """A written answer left empty or as otter's placeholder."""
    return source.strip().strip("_*").strip() in ("", PLACEHOLDER)


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
