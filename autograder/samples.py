"""Sample submissions made from an assignment's reference and student notebooks.

Used by ``course demo`` and by the tests: one complete, one partly done, one untouched, one that
raises, one that loops forever, one that eats memory, a corrupted file and a zip with no notebook.
"""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path

import nbformat

from autograder.layout import Layout

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
                  grader_samples: bool = True, only: tuple[str, ...] | None = None) -> dict[str, tuple]:
    """Write the samples for ``slug`` into ``folder``; returns file name -> expected statuses.

    ``notebooks_dir`` is where the built student notebooks are (default: ``notebooks/``);
    ``grader_samples=False`` leaves out ``GRADER_SAMPLES``; ``only`` names the samples to write.
    """
    solution = nbformat.read(layout.solution_notebook(slug), as_version=4)
    student_path = (notebooks_dir or layout.notebooks) / slug / f"{slug}.ipynb"
    student = nbformat.read(student_path, as_version=4)
    answers = answer_cells(solution, student)
    todo = sorted(answers)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{slug}.ipynb"
    wanted = [n for n in EXPECTED_STATUS if (grader_samples or n not in GRADER_SAMPLES) and (only is None or n in only)]

    def answered(done) -> nbformat.NotebookNode:
        """The student notebook with the TODO cells at these reference indices solved."""
        nb = copy.deepcopy(student)
        for r in done:
            nb.cells[answers[r]].source = solution.cells[r].source
        return nb

    complete = answered(todo)  # what a student who solved every code question hands in

    def raising() -> nbformat.NotebookNode:
        nb = copy.deepcopy(complete)
        first = nb.cells[answers[todo[0]]]
        first.source = 'raise RuntimeError("I will finish this part later")\n' + first.source
        return nb

    def zipped(entries: dict[str, str]):
        def write(path: Path) -> None:
            with zipfile.ZipFile(path, "w") as zf:
                for entry, text in entries.items():
                    zf.writestr(entry, text)
        return write

    text = nbformat.writes(complete)
    writers = {
        "complete.ipynb": lambda: complete,
        "complete_export.zip": zipped({name: text}),
        "partial.ipynb": lambda: answered(todo[: len(todo) // 2]),
        "blank.ipynb": lambda: student,
        "raising.ipynb": raising,
        "looping.ipynb": lambda: _with_cell(complete, answers[todo[0]], "while True:  # an endless loop\n    pass"),
        "memory_hog.ipynb": lambda: _with_cell(complete, answers[todo[0]],
                                               "import numpy as np\nhog = np.ones(2**30)  # 8 GiB, over any grading limit"),
        "corrupted.ipynb": lambda path: path.write_text(text[: len(text) // 2], encoding="utf-8"),
        "no_notebook.zip": zipped({"answers.txt": "I could not get the notebook to save."}),
    }
    for sample in wanted:
        writer = writers[sample]
        if sample.endswith(".zip") or sample == "corrupted.ipynb":
            writer(folder / sample)
        else:
            nbformat.write(writer(), folder / sample)
    return {sample: EXPECTED_STATUS[sample] for sample in wanted}
