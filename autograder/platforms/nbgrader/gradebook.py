"""nbgrader, second half: ``course grade``'s scores in an nbgrader gradebook, and each submission
under ``autograded/`` with nbgrader metadata so the formgrader shows it for the written answers.
The course folder itself is written by :mod:`autograder.platforms.nbgrader.source`.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from helpers.core.pdf import BEGIN as STUDENT_BEGIN, END as STUDENT_END  # the student notebook's question markers

from autograder.build import master
from autograder.grade.submissions import InvalidSubmission, read_submission_notebook
from autograder.layout import CourseError
from autograder.platforms.nbgrader.source import cell_metadata, grade_id
from autograder.sandbox.protocol import PUBLIC_CHECK


def student_of(row: dict) -> str:
    """The nbgrader student id of a graded submission: its first folder inside the submissions
    folder (``alice/kernel_attention.ipynb`` -> ``alice``), or its file name without the extension
    (``alice.zip`` -> ``alice``)."""
    parts = Path(row["file"]).parts
    return parts[0] if len(parts) > 1 else Path(parts[0]).stem


def _for_formgrader(nb, slug: str, row: dict, source) -> nbformat.NotebookNode:
    """The student's notebook with nbgrader metadata on what the formgrader shows: each written
    answer cell becomes that question's manually graded cell, and after each autograded question a
    read-only cell per hidden test states what ``course grade`` found."""
    manual = master.questions(source, manual=True)
    cells, index, in_question, answered = [], 0, False, False
    for cell in nb.cells:
        text = cell.source if cell.cell_type == "markdown" else ""
        # otter's markers, in the order they appear (one cell may end a question and begin the next)
        for _, marker in sorted((text.find(m), m) for m in (STUDENT_BEGIN, STUDENT_END) if m in text):
            in_question, answered = marker == STUDENT_BEGIN, False
        if in_question and not answered and "otter_answer_cell" in cell.metadata.get("tags", []) and index < len(manual):
            question = manual[index]
            cell = nbformat.from_dict({**cell, "metadata": {**cell.metadata, **cell_metadata(
                question.name, solution=True, grade=True, points=question.points)}})
            index, answered = index + 1, True
        cells.append(cell)
        check = re.fullmatch(PUBLIC_CHECK, cell.source.strip()) if cell.cell_type == "code" else None
        if check and check.group(1) in row.get("questions", {}):
            for case in (c for c in row["questions"][check.group(1)]["cases"] if c["hidden"]):
                verdict = "passed" if case["passed"] else f"failed: {case.get('message', '')}".strip()
                cells.append(nbformat.v4.new_code_cell(
                    f"# hidden test {case['test']} (graded by `course grade`): {verdict[:300]}",
                    metadata=cell_metadata(grade_id(check.group(1), case['test']), grade=True, locked=True, points=case["points"])))
    if index != len(manual):
        raise InvalidSubmission(f"it has {index} written answer cells for the {len(manual)} written questions of "
                                f"{slug} (an answer cell deleted?)")
    return nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)


def write_gradebook(rows: list[dict], gradebook: Path, layout, submissions: Path, log=print) -> dict:
    """Put ``course grade``'s automatic scores into the nbgrader gradebook at ``gradebook`` (the
    course folder's ``gradebook.db``; ``nbgrader generate_assignment`` must have made the
    assignment there), and each submission, with nbgrader metadata, under ``autograded/`` so
    the formgrader can show it for the written answers. Returns counts of what was written."""
    from nbgrader.api import Gradebook, MissingEntry

    course = gradebook.resolve().parent
    seen: dict[tuple[str, str], str] = {}
    written = {"submissions": 0, "skipped": 0}
    with Gradebook(f"sqlite:///{gradebook.resolve()}") as gb:
        for row in rows:
            slug, student = row.get("assignment"), student_of(row)
            if not slug:
                log(f"nbgrader: {row['file']} skipped: {row.get('message') or 'no assignment'}")
                written["skipped"] += 1
                continue
            if (slug, student) in seen:
                raise CourseError(f"two submissions of {slug} for student {student!r}: {seen[slug, student]} and {row['file']}; "
                                 "put each student's files in a folder named after the student")
            seen[slug, student] = row["file"]
            try:
                notebook = gb.find_notebook(slug, slug)
            except MissingEntry:
                raise CourseError(f"{slug} is not in {gradebook}: run `nbgrader generate_assignment {slug}` in "
                                 f"{course} first") from None
            gb.update_or_create_student(student)
            gb.update_or_create_submission(slug, student)
            outcomes = {grade_id(q, case['test']): case for q, detail in row.get("questions", {}).items()
                        for case in detail["cases"] if case["hidden"]}
            for cell in notebook.grade_cells:
                if cell.cell_type != "code":
                    continue  # written answers: graded by hand in the formgrader
                grade = gb.find_grade(cell.name, slug, slug, student)
                case = outcomes.get(cell.name)  # missing when the run timed out or failed first
                grade.auto_score = float(cell.max_score) if case and case["passed"] else 0.0
            gb.db.commit()
            try:
                nb = read_submission_notebook(submissions / row["file"])
                copy = _for_formgrader(nb, slug, row, nbformat.read(layout.master(slug), as_version=4))
            except InvalidSubmission as err:
                log(f"nbgrader: {row['file']}: scores written, notebook not copied for the formgrader: {err}")
            else:
                folder = course / "autograded" / student / slug
                folder.mkdir(parents=True, exist_ok=True)
                nbformat.write(copy, folder / f"{slug}.ipynb")
            written["submissions"] += 1
    return written
