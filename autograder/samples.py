"""Sample submissions made from an assignment's reference and student notebooks.

Used by ``course demo`` and by the tests: one complete, one partly done, one untouched, one that
raises, one that loops forever, one that eats memory, a corrupted file and a zip with no notebook.
"""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path

import nbformat

from .layout import Layout

#: sample name -> the status(es) ``course grade`` must give it
EXPECTED_STATUS = {
    "complete.ipynb": ("ok",),
    "complete_export.zip": ("ok",),
    "partial.ipynb": ("ok", "error"),  # "error" when cells call the unfinished functions
    "blank.ipynb": ("ok", "error"),
    "raising.ipynb": ("error",),
    "looping.ipynb": ("timeout",),
    "memory_hog.ipynb": ("memory",),
    "corrupted.ipynb": ("invalid",),
    "no_notebook.zip": ("invalid",),
}
#: the samples that test the grader rather than an assignment (partial credit, zips, limits): one
#: assignment's are enough
GRADER_SAMPLES = ("complete_export.zip", "partial.ipynb", "raising.ipynb", "looping.ipynb", "memory_hog.ipynb")


def answer_cells(solution, student) -> dict[int, int]:
    """Reference cell index -> student cell index, for the code cells that differ (the TODOs).

    Code cells line up one to one (otter only drops markdown answers and hidden tests, which
    live in metadata), so they are matched by order.
    """
    ref = [i for i, c in enumerate(solution.cells) if c.cell_type == "code"]
    stu = [i for i, c in enumerate(student.cells) if c.cell_type == "code"]
    if len(ref) != len(stu):
        raise ValueError(f"reference has {len(ref)} code cells, the student notebook {len(stu)}")
    return {r: s for r, s in zip(ref, stu) if solution.cells[r].source != student.cells[s].source}


def _with_cell(nb, index: int, source: str):
    nb = copy.deepcopy(nb)
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def write_samples(layout: Layout, slug: str, folder: Path, notebooks_dir: Path | None = None,
                  grader_samples: bool = True) -> dict[str, tuple]:
    """Write the samples for ``slug`` into ``folder``; returns file name -> expected statuses.

    ``notebooks_dir`` is where the built student notebooks are (default: ``notebooks/``);
    ``grader_samples=False`` leaves out ``GRADER_SAMPLES``.
    """
    solution = nbformat.read(layout.solution_notebook(slug), as_version=4)
    student_path = (notebooks_dir or layout.notebooks) / slug / f"{slug}.ipynb"
    student = nbformat.read(student_path, as_version=4)
    answers = answer_cells(solution, student)
    todo = sorted(answers)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{slug}.ipynb"

    def answered(done) -> nbformat.NotebookNode:
        """The student notebook with the TODO cells at these reference indices solved."""
        nb = copy.deepcopy(student)
        for r in done:
            nb.cells[answers[r]].source = solution.cells[r].source
        return nb

    complete = answered(todo)  # what a student who solved every code question hands in
    nbformat.write(complete, folder / "complete.ipynb")
    nbformat.write(student, folder / "blank.ipynb")
    text = nbformat.writes(complete)
    (folder / "corrupted.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")
    with zipfile.ZipFile(folder / "no_notebook.zip", "w") as zf:
        zf.writestr("answers.txt", "I could not get the notebook to save.")
    if not grader_samples:
        return {name: status for name, status in EXPECTED_STATUS.items() if name not in GRADER_SAMPLES}

    with zipfile.ZipFile(folder / "complete_export.zip", "w") as zf:
        zf.writestr(name, nbformat.writes(complete))
    nbformat.write(answered(todo[: len(todo) // 2]), folder / "partial.ipynb")
    raising = copy.deepcopy(complete)
    first = raising.cells[answers[todo[0]]]
    first.source = 'raise RuntimeError("I will finish this part later")\n' + first.source
    nbformat.write(raising, folder / "raising.ipynb")

    nbformat.write(_with_cell(complete, answers[todo[0]], "while True:  # an endless loop\n    pass"),
                   folder / "looping.ipynb")
    nbformat.write(_with_cell(complete, answers[todo[0]], "import numpy as np\nhog = np.ones(2**30)  # 8 GiB, over the demo limit"),
                   folder / "memory_hog.ipynb")
    return dict(EXPECTED_STATUS)
