"""Load an assignment's reference functions from its master notebook (instructor-side only)."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]


def load_reference(slug: str) -> dict:
    """Namespace holding the master's imports and top-level function and class definitions.

    Only ``import`` statements, ``def`` and ``class`` blocks are executed: no plots, no training.
    """
    nb = nbformat.read(REPO / "solutions" / slug / f"{slug}.ipynb", as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
        exec(compile(ast.Module(body=keep, type_ignores=[]), f"<{slug} master>", "exec"), namespace)
    return namespace


def solved_student_notebook(layout, slug: str, folder: Path):
    """Build ``slug`` into ``folder`` and return its student notebook with every TODO solved
    (the "complete" sample submission): what a student who finished everything hands in."""
    from autograder.build.assign import build
    from autograder.samples import write_samples

    build(layout, slug, notebooks_dir=folder / "notebooks", log=lambda *a: None)
    write_samples(layout, slug, folder / "samples", notebooks_dir=folder / "notebooks")
    return nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)


def _setting_name(setting) -> str:
    """``True`` / ``False`` (the older fast flag) or a setting's name."""
    if setting is True:
        return "grading"
    if setting is False:
        return "full"
    if setting not in ("full", "quick", "grading"):
        raise ValueError(f"setting must be 'full', 'quick' or 'grading', got {setting!r}")
    return setting


def notebook_seconds(slug: str, setting="full") -> float:
    """Seconds to run the solved student notebook top to bottom in a fresh kernel (all but the
    export cell) in one setting: ``"full"``, ``"quick"`` or ``"grading"``."""
    return run_solved_notebook(slug, setting)[0]


def run_solved_notebook(slug: str, setting="full", edit=None):
    """(seconds, executed notebook): the solved student notebook run top to bottom in a fresh kernel
    (all but the export cell) in one setting, chosen through ``COURSE_SETTING`` as a student's
    environment would (``True`` still means the grading setting). ``edit(cells)`` may change the
    cells first (another seed, fewer parts, a cell that reads the results)."""
    import os
    import tempfile
    import time

    from nbclient import NotebookClient

    from autograder.layout import Layout
    from autograder.samples import write_samples

    name = _setting_name(setting)
    with tempfile.TemporaryDirectory() as tmp:
        write_samples(Layout.find(REPO), slug, Path(tmp))
        nb = nbformat.read(Path(tmp) / "complete.ipynb", as_version=4)
        nb.cells = nb.cells[:-1]  # everything but the export
        if edit:
            nb.cells = edit(nb.cells)
        nbformat.write(nb, Path(tmp) / f"{slug}.ipynb")  # otter's grader object reads the notebook file
        saved = {key: os.environ.pop(key, None) for key in ("COURSE_FAST", "COURSE_SETTING")}
        os.environ["COURSE_SETTING"] = name
        try:
            started = time.perf_counter()
            NotebookClient(nb, kernel_name="python3", timeout=3600, resources={"metadata": {"path": tmp}}).execute()
            return time.perf_counter() - started, nb
        finally:
            os.environ.pop("COURSE_SETTING", None)
            for key, value in saved.items():
                if value is not None:
                    os.environ[key] = value
