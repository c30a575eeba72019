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
    from autograder.build import build
    from autograder.samples import write_samples

    build(layout, slug, notebooks_dir=folder / "notebooks", log=lambda *a: None)
    write_samples(layout, slug, folder / "samples", notebooks_dir=folder / "notebooks")
    return nbformat.read(folder / "samples" / "complete.ipynb", as_version=4)
