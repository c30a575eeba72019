"""Editing notebooks for tests: splice a replacement function into a reference notebook."""

from __future__ import annotations

import ast
import copy
import symtable
import textwrap
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]


def master(slug: str):
    """The master notebook of ``slug``: its reference solution and every test."""
    return nbformat.read(REPO / "solutions" / slug / f"{slug}.ipynb", as_version=4)


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
    return [name for name, _ in _edits(variant)]


def definitions(sources) -> dict[str, set[str]]:
    """Top-level name -> the global names its definitions use, over the code that parses: a
    function's or a class's free names (``symtable`` tells a test's own ``model`` from the global
    one), or the names in a statement that assigns a global (a test may read a result a cell made)."""
    uses: dict[str, set[str]] = {}
    for source in sources:
        source = textwrap.dedent(source)
        try:
            tree = ast.parse(source)
            scopes = {table.get_name(): table for table in symtable.symtable(source, "<cell>", "exec").get_children()}
        except SyntaxError:  # cells with IPython magics define nothing a test reaches
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = {node.name}
                # decorators, base classes and defaults run at top level, the body in its own scope
                outer = node.decorator_list + getattr(node, "bases", []) + (node.args.defaults if hasattr(node, "args") else [])
                names = _global_names(scopes[node.name]) | {n.id for e in outer for n in ast.walk(e) if isinstance(n, ast.Name)}
                if node.name.startswith("test_"):  # otter passes a test the globals its parameters name
                    names |= {arg.arg for arg in node.args.args}
            else:
                defined = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            for name in defined:
                uses.setdefault(name, set()).update(names - {name})
    return uses


def _global_names(table: symtable.SymbolTable) -> set[str]:
    names = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_global()}
    for child in table.get_children():
        names |= _global_names(child)
    return names


def reached(names, uses: dict[str, set[str]]) -> set[str]:
    """Every top-level name that ``names`` use, directly or through other definitions."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += uses.get(name, ())
    return seen


def pack_wrong(variants: list, master, size: int = 4, prefix: str = "wrong") -> None:
    """Grade known-wrong variants in shared notebooks, at most ``size`` to one, where their bugs
    cannot hide each other's: no test a variant must fail (``must_lose``, ``must_fail_public``)
    reaches a definition another variant of its notebook replaces, through the master's code or
    the variants' own sources. Static: a test that finds functions by ``globals()`` would escape.
    A variant with ``must_keep`` (hidden tests it must still pass) is always graded alone."""
    sources = [cell.source for cell in master.cells if cell.cell_type == "code"]
    base = definitions(sources)  # parsed once: the uses of several sources are the union of each one's
    tests = {name for name in base if name.startswith("test_")}
    own = {id(variant): definitions([src for _, src in _edits(variant)]) for variant in variants}

    def uses_with(members: list[dict]) -> dict[str, set[str]]:
        uses = {name: set(names) for name, names in base.items()}
        for member in members:
            for name, names in own[id(member)].items():
                uses.setdefault(name, set()).update(names)
        return uses

    groups: list[list[dict]] = []
    for variant in variants:
        must = set(variant["must_lose"]) | set(variant.get("must_fail_public", ())) | set(variant.get("must_keep", ()))
        if must - tests:
            raise ValueError(f"{variant['name']}: no test named {sorted(must - tests)} in the master")
        if variant.get("must_keep"):  # what it must keep, only it may touch: graded alone
            groups.append([variant])
            continue
        for group in groups:
            members = group + [variant]
            uses = uses_with(members)
            if len(group) < size and not any(m.get("must_keep") for m in group) and all(
                    not set(edited_functions(a)) & reached(set(b["must_lose"]) | set(b.get("must_fail_public", ())), uses)
                    for a in members for b in members if a is not b):
                group.append(variant)
                break
        else:
            groups.append([variant])
    for index, group in enumerate(g for g in groups if len(g) > 1):
        for variant in group:
            variant["notebook"] = f"{prefix}_{index + 1}"


def _edits(variant: dict) -> list[tuple[str, str]]:
    return variant["edits"] if "edits" in variant else [(variant["function"], variant["source"])]


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
