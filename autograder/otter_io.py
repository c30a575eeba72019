"""Reading what otter's own grading returns: the first error of an executed notebook, and the
scores of ``otter.api.grade_submission`` (the build's recording run and ``course grade --unsafe``)."""

from __future__ import annotations


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
