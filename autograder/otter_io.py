"""Reading otter's artifacts: test files inside an autograder zip, and grading results."""

from __future__ import annotations

import ast
import contextlib
import zipfile
from pathlib import Path


def read_tests(autograder_zip: str | Path) -> dict[str, list[dict]]:
    """Question name -> its test functions ``{"test", "points", "hidden"}``, in the order otter runs them.

    Otter names test cases "q1 - 1", "q1 - 2"...; the function names are what the golden file
    ties values to, so the two are matched by position.
    """
    questions: dict[str, list[dict]] = {}
    opened = hasattr(autograder_zip, "namelist")  # an open zip, or an unpacked folder read like one
    with contextlib.nullcontext(autograder_zip) if opened else zipfile.ZipFile(autograder_zip) as zf:
        for name in sorted(zf.namelist()):
            if not (name.startswith("tests/") and name.endswith(".py")):
                continue
            tree = ast.parse(zf.read(name).decode("utf-8"))
            question = Path(name).stem
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "name" for t in node.targets):
                    question = ast.literal_eval(node.value)
            questions[question] = [
                {"test": node.name, **_decorator_config(node.decorator_list[0])}
                for node in tree.body
                if isinstance(node, ast.FunctionDef) and node.decorator_list
            ]
    return questions


def _decorator_config(decorator: ast.expr) -> dict:
    keywords = {k.arg: ast.literal_eval(k.value) for k in getattr(decorator, "keywords", [])}
    return {"points": keywords.get("points") or 0, "hidden": bool(keywords.get("hidden", False))}


def possible_points(tests: dict[str, list[dict]]) -> dict[str, float]:
    """Question name -> points available (autograded questions only)."""
    return {q: sum(case["points"] for case in cases) for q, cases in tests.items()}


def first_error(executed_nb) -> tuple[str, str, str] | None:
    """(where, exception name, message) of the first error output in an executed notebook.

    ``where`` names the cell by its first line of code, which the student can find in their
    notebook (cell numbers shift: otter adds cells of its own when it grades).
    """
    for index, cell in enumerate(getattr(executed_nb, "cells", None) or []):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                lines = [line.strip() for line in cell.get("source", "").splitlines()]
                code = next((line for line in lines if line and not line.startswith("#")), "")
                where = f"the cell starting {code[:60]!r}" if code else f"cell {index}"
                return where, output.get("ename", ""), output.get("evalue", "")
    return None


def summarize(results, tests: dict[str, list[dict]]) -> dict:
    """Plain-data view of an ``otter.test_files.GradingResults``: scores and per-test outcomes."""
    questions = {}
    for qname, test_file in sorted(results.results.items()):
        names = [case["test"] for case in tests.get(qname, [])]
        cases = []
        for i, case_result in enumerate(test_file.test_case_results):
            case = case_result.test_case
            cases.append({
                "test": names[i] if i < len(names) else case.name,
                "hidden": bool(case.hidden),
                "points": case.points,
                "passed": bool(case_result.passed),
                "message": "" if case_result.passed else case_result.message,
            })
        questions[qname] = {"score": test_file.score, "possible": test_file.possible, "cases": cases}
    return questions
