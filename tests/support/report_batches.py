"""Material for the report's tests and benchmark: disguised copies of a notebook, and grading rows
made from an assignment's known-wrong and known-correct variants without grading anything.

Pure helpers, no tests. A row here has the shape ``course grade`` saves in ``rows/<id>.json``.
"""

from __future__ import annotations

import ast
import copy
import functools
import io
import json
import random
import sys
import tokenize
from pathlib import Path

import nbformat

from autograder.build.master import parse_test, solution_lines, walk
from autograder.grade.results import RUN_FILE, RUN_FORMAT, write_atomically
from autograder.grade.row import ROW_FORMAT

REPO = Path(__file__).resolve().parents[2]

#: New names for the locals of a disguised copy, used in turn.
SYNONYMS = ("alpha", "beta", "gamma", "delta", "eps_", "zeta", "theta", "kappa", "lam", "mu_", "nu_", "xi_",
            "omicron", "rho", "sigma_", "tau", "upsilon", "chi", "psi", "omega")


def _renamable(function: ast.FunctionDef) -> set[str]:
    """A function's positional arguments without defaults and the names it assigns: what a copier
    renames without changing how the function is called."""
    args = function.args.args
    names = {a.arg for a in args[:len(args) - len(function.args.defaults)]}
    names |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def disguise(source: str, offset: int = 0) -> str:
    """The cell's code as a copier hands it in: the arguments and locals of every function renamed
    (the layout, docstrings and comments kept), and its functions in reverse order. Code that does
    not parse is returned unchanged."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError):
        return source
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    renames = []
    for index, function in enumerate(functions):
        names = sorted(_renamable(function))
        renames.append((function.lineno, function.end_lineno,
                        {name: f"{SYNONYMS[(offset + index * 7 + i) % len(SYNONYMS)]}{i}" for i, name in enumerate(names)}))
    lines = source.splitlines(keepends=True)
    depth = 0
    edits = []
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if tok.type != tokenize.NAME:
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == "." or (depth and after == "="):  # an attribute, a keyword argument
            continue
        for first, last, names in renames:
            if first <= tok.start[0] <= last and tok.string in names:
                edits.append((tok.start, tok.end, names[tok.string]))
    for (row, col), (_, end), new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    blocks = [(min([f.lineno, *(d.lineno for d in f.decorator_list)]) - 1, f.end_lineno) for f in functions]
    out, position = [], 0
    for (start, end), (src_start, src_end) in zip(blocks, reversed(blocks)):
        out += lines[position:start]
        block = lines[src_start:src_end]
        if block and not block[-1].endswith("\n"):
            block[-1] += "\n"
        out += block
        position = end
    out += lines[position:]
    return "".join(out)


def disguised_copy(nb, template, swap_cells: bool = True):
    """A copy of notebook ``nb`` in disguise: the cells that differ from the student ``template``
    disguised (:func:`disguise`), and with ``swap_cells`` the first two of them swapped."""
    nb = copy.deepcopy(nb)
    given = {cell.source for cell in template.cells if cell.cell_type == "code"}
    written = [cell for cell in nb.cells if cell.cell_type == "code" and cell.source not in given]
    for offset, cell in enumerate(written):
        cell.source = disguise(cell.source, offset)
    if swap_cells and len(written) >= 2:
        written[0].source, written[1].source = written[1].source, written[0].source
    return nb


@functools.lru_cache(maxsize=None)
def variants(slug: str) -> tuple[list[dict], list[dict]]:
    """(WRONG, CORRECT) of ``tests/<slug>_variants.py``, read without packing them into shared
    notebooks as the module does on import for its grading batch (a minute for the larger ones)."""
    module = sys.modules.get(f"tests.{slug}_variants")
    if module is not None:
        return module.WRONG, module.CORRECT
    path = REPO / "tests" / f"{slug}_variants.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tree.body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                                                    and getattr(node.value.func, "id", "") in ("pack_wrong", "pack_correct"))]
    namespace = {"__name__": f"{slug}_variants_unpacked", "__file__": str(path)}
    exec(compile(tree, str(path), "exec"), namespace)
    return namespace["WRONG"], namespace["CORRECT"]


@functools.lru_cache(maxsize=None)
def master_tests(slug: str) -> dict[str, list[dict]]:
    """Question -> its tests ``{"test", "points", "hidden"}``, read from the master (no build needed)."""
    master = nbformat.read(REPO / "solutions" / slug / f"{slug}.ipynb", as_version=4)
    tests: dict[str, list[dict]] = {}
    for cell, place in walk(master):
        if place.in_tests and cell.cell_type == "code" and place.question:
            test = parse_test(cell.source)
            tests.setdefault(place.question.name, []).append(
                {"test": test.name, "points": test.points, "hidden": test.hidden})
    return tests


def template(slug: str):
    """The student notebook of ``slug``, as committed."""
    return nbformat.read(REPO / "notebooks" / slug / f"{slug}.ipynb", as_version=4)


def solved(slug: str):
    """The student notebook with every function it asks for written as in the master's solution
    (what a student who solved it all hands in), made without building anything."""
    return copy.deepcopy(_solved(slug))


@functools.lru_cache(maxsize=None)
def _solved(slug: str):
    from tests.support.notebook_edits import replace_function

    master = nbformat.read(REPO / "solutions" / slug / f"{slug}.ipynb", as_version=4)
    nb = template(slug)
    asked = {node.name for cell in nb.cells if cell.cell_type == "code"
             for node in _parsed(cell.source) if isinstance(node, ast.FunctionDef)}
    for cell, place in walk(master):
        if cell.cell_type != "code" or place.in_tests or "SOLUTION" not in cell.source:
            continue
        source = "\n".join(line for line, _ in solution_lines(cell.source))
        for node in _parsed(source):
            if isinstance(node, ast.FunctionDef) and node.name in asked:
                nb = replace_function(nb, node.name, ast.get_source_segment(source, node))
    return nb


def _parsed(source: str) -> list:
    try:
        return ast.parse(source).body
    except SyntaxError:
        return []


def with_variant(nb, variant: dict):
    """``nb`` with the functions a variant of ``tests/<slug>_variants.py`` replaces."""
    from tests.support.notebook_edits import replace_function

    for function, source in variant.get("edits", [(variant.get("function"), variant.get("source"))]):
        nb = replace_function(nb, function, source)
    return nb


def _case(test: dict, passed: bool, message: str = "") -> dict:
    return {"test": test["test"], "hidden": test["hidden"], "points": test["points"], "passed": passed,
            "message": "" if passed else message}


def synthetic_row(name: str, tests: dict, failed: dict[str, str], assignment: str, status: str = "ok",
                  message: str = "", file: str | None = None) -> dict:
    """A full grading row: ``tests`` is question -> [{"test", "points", "hidden"}] (as
    :func:`autograder.otter_io.read_tests` reads them); ``failed`` is test name -> its message."""
    questions = {}
    for question, cases in tests.items():
        results = [_case(case, case["test"] not in failed, failed.get(case["test"], "")) for case in cases]
        questions[question] = {"score": sum(c["points"] for c in results if c["passed"]),
                               "possible": sum(c["points"] for c in results), "cases": results}
    scores = {q: v["score"] for q, v in sorted(questions.items())}
    file = file or (name if name.endswith((".ipynb", ".zip")) else f"{name}.ipynb")
    return {"format": ROW_FORMAT, "submission": name, "file": file, "sha256": "0" * 64, "assignment": assignment,
            "autograder_sha256": "a" * 64, "status": status, "message": message, "questions": questions,
            "sandbox": "bubblewrap", "scores": scores, "total": round(sum(scores.values()), 4),
            "possible": round(sum(v["possible"] for v in questions.values()), 4), "seconds": 1.0, "sealed": True}


def mistake(test: str, rng: random.Random) -> str:
    """A failure message as the golden judge writes them, with numbers that differ per submission."""
    return rng.choice([
        f"{test}_out: values differ from the reference: largest error {rng.uniform(0.05, 3):.3g} at index "
        f"({rng.randrange(4)}, {rng.randrange(8)}) (tolerance rtol=1e-05, atol=1e-06)",
        f"{test}_out: shape ({rng.randrange(2, 9)}, {rng.randrange(2, 9)}) but the reference has shape (4, 8)",
        "raised NameError",
    ])


def write_results(folder: Path, rows: list[dict], submissions: Path | None = None, limits: dict | None = None) -> Path:
    """A results folder as ``course grade`` writes it: rows/, results.json, feedback/ and run.json."""
    from autograder.grade.results import write_reports

    (folder / "rows").mkdir(parents=True, exist_ok=True)
    for row in rows:
        write_atomically(folder / "rows" / f"{row['submission']}.json", json.dumps(row))
    write_reports(rows, folder)
    run = {"format": RUN_FORMAT, "submissions": str(submissions) if submissions else None,
           "graded_at": "2026-01-15T10:00:00+00:00", "sealed": True,
           "limits": limits or {"timeout": 300.0, "memory_mb": 4096, "processes": 64, "disk_mb": 512}}
    (folder / RUN_FILE).write_text(json.dumps(run), encoding="utf-8")
    return folder


