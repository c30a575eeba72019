"""Editing notebooks for tests: splice a replacement function into a reference notebook."""

from __future__ import annotations

import ast
import copy
import textwrap


def replace_function(nb, name: str, source: str):
    """A copy of ``nb`` where the top-level ``def name`` (or ``class name``) is replaced by ``source``.

    Raises ValueError unless exactly one code cell defines ``name`` at top level.
    """
    nb = copy.deepcopy(nb)
    hits = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # cells with IPython magics never hold graded functions
            continue
        hits += [(cell, node) for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name]
    if len(hits) != 1:
        raise ValueError(f"expected one top-level definition of {name}, found {len(hits)}")
    cell, node = hits[0]
    lines = cell.source.splitlines()
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    cell.source = "\n".join(lines[:start] + textwrap.dedent(source).strip("\n").splitlines() + lines[node.end_lineno:])
    return nb


def edited_functions(variant: dict) -> list[str]:
    """The names a variant replaces: its ``function``, or every name in its ``edits``."""
    return [name for name, _ in variant["edits"]] if "edits" in variant else [variant["function"]]


def share_notebook(variants: list, notebook: str, *names: str) -> None:
    """Grade the named variants in one notebook. Only for bugs that cannot hide each other: no
    variant may break a test that another one in the notebook must fail."""
    for variant in variants:
        if variant["name"] in names:
            variant["notebook"] = notebook


def pack_correct(variants: list, prefix: str = "correct_alternatives") -> None:
    """Put correct alternatives together, as few notebooks as possible, never two replacements of
    one function in the same notebook (together they must still keep full marks)."""
    notebooks: list[set] = []  # the functions each notebook already replaces
    for variant in variants:
        names = set(edited_functions(variant))
        index = next((i for i, used in enumerate(notebooks) if not used & names), len(notebooks))
        if index == len(notebooks):
            notebooks.append(set())
        notebooks[index] |= names
        variant["notebook"] = f"{prefix}_{index + 1}"
