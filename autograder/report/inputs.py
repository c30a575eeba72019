"""What ``course report`` reads: a ``course grade`` results folder, or a folder of Gradescope
``results.json`` files (one per submission, as the autograder zip writes them).

Both become one :class:`GradedBatch` of :class:`Graded` submissions. Nothing here stops at bad input: a
truncated or hand-edited ``results.json``, a row from another version, a missing row or feedback
file each add a note (:class:`Notes`) that names the file, and the rest is read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from autograder.grade.results import RUN_FORMAT, ResultsFolder
from autograder.grade.row import REQUIRED_FIELDS, ROW_FORMAT, UNFINISHED, Status
from autograder.layout import CourseError
from autograder.platforms.gradescope import read_results

#: The statuses ``course grade`` gives, in the order the report lists them.
STATUSES = tuple(Status)


class Notes:
    """Problems with the input, grouped by what went wrong: ``add("feedback/x.txt", "missing")``."""

    def __init__(self):
        self.groups: dict[str, list[str]] = {}

    def add(self, where: str, what: str) -> None:
        self.groups.setdefault(what, []).append(str(where))

    def lines(self, shown: int = 4, base: Path | None = None, *more: Path | None) -> list[str]:
        """One line per problem; paths under ``base`` (or a folder of ``more``) are shown relative to it."""
        out = []
        prefixes = [f"{folder}/" for folder in (base, *more) if folder]
        for what, places in self.groups.items():
            places = [next((p.removeprefix(x) for x in prefixes if p.startswith(x)), p) for p in places]
            listed = ", ".join(places[:shown]) + (f" and {len(places) - shown} more" if len(places) > shown else "")
            out.append(f"{listed}: {what}")
        return out

    def __len__(self) -> int:
        return len(self.groups)


@dataclass
class Graded:
    """One submission as graded: its scores, its test outcomes (None where unknown) and where its
    feedback and its code are."""

    name: str
    assignment: str
    status: str
    message: str
    total: float
    possible: float
    scores: dict[str, float]
    cases: list[dict] | None = None  # {"question", "test", "hidden", "points", "passed", "message"}
    question_possible: dict[str, float] = field(default_factory=dict)
    feedback: Path | None = None
    code: Path | None = None  # the submitted file (.ipynb or .zip), if it can be reached
    autograder: str = ""  # digest of the autograder zip
    sandbox: str = ""
    sealed: bool | None = None
    limits: dict | None = None
    graded_at: str = ""

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED


@dataclass
class GradedBatch:
    kind: str  # "course grade" or "Gradescope"
    folder: Path
    graded: list[Graded]
    notes: Notes
    run: dict = field(default_factory=dict)
    code_folder: Path | None = None

    def assignments(self) -> list[str]:
        return sorted({g.assignment for g in self.graded if g.assignment})


def read_batch(folder: Path, submissions: Path | None = None, assignment: str | None = None) -> GradedBatch:
    """The graded submissions of ``folder``: ``course grade``'s results, else Gradescope's."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CourseError(f"results folder {folder} does not exist")
    results = ResultsFolder(folder)
    if any(path.exists() for path in (results.json, results.rows, results.run)) and not _is_gradescope_file(results.json):
        batch = read_course_grade(folder, submissions)
    else:
        batch = read_gradescope(folder, submissions, assignment)
    if assignment:
        batch.graded = [g for g in batch.graded if g.assignment in (assignment, "")]
    if not any(g.assignment for g in batch.graded):
        raise CourseError(f"{folder}: no graded submission found (neither course grade's results.json and rows/ nor "
                          "Gradescope results.json files)" + "".join(f"\n  {line}" for line in batch.notes.lines()))
    return batch


def _load_json(path: Path, notes: Notes, what: str):
    """The JSON in ``path``, or None with a note naming the file and why (truncated, edited by hand,
    missing); ``what`` says what the report does without it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        notes.add(path, f"missing{what}")
    except UnicodeDecodeError:
        notes.add(path, f"not UTF-8 text{what}")
    except ValueError as err:
        where = f" at line {err.lineno}, column {err.colno}" if hasattr(err, "lineno") else ""
        notes.add(path, f"not valid JSON{where} (truncated, or edited by hand?){what}")
    return None


def read_course_grade(folder: Path, submissions: Path | None = None) -> GradedBatch:
    notes = Notes()
    run = {}
    results = ResultsFolder(folder)
    if results.run.exists():
        run = _load_json(results.run, notes, "; limits, date and the submissions folder are unknown") or {}
        if not isinstance(run, dict):
            notes.add(results.run, "not a run record (a JSON object was expected); ignored")
            run = {}
        elif run.get("format") != RUN_FORMAT:
            notes.add(results.run, f"written by another version of course grade (format {run.get('format')!r}, "
                                         f"this report reads format {RUN_FORMAT}); read as far as it matches")
    else:
        notes.add(results.run, "missing (results of an older course grade): limits, date and the "
                                     "submissions folder are not recorded; pass --submissions DIR for the code")
    summary = _load_json(results.json, notes, "; the rows are read from rows/*.json instead")
    if summary is not None and not isinstance(summary, list):
        notes.add(results.json, "not a list of rows (another version, or another tool's file?); "
                                           "the rows are read from rows/*.json instead")
        summary = None
    if summary is None:
        summary = []
        for path in sorted(results.rows.glob("*.json")):
            row = _load_json(path, notes, "; left out")
            if isinstance(row, dict):
                summary.append(row)
    code_folder = submissions or (Path(run["submissions"]) if isinstance(run.get("submissions"), str) else None)
    if code_folder and not code_folder.is_dir():
        notes.add(code_folder, "the submissions folder is not there; Similar submissions is left out "
                               "(pass --submissions DIR)")
        code_folder = None
    graded = []
    for index, row in enumerate(summary):
        problem = _row_problem(row)
        if problem:
            name = row.get("submission") if isinstance(row, dict) and isinstance(row.get("submission"), str) else None
            notes.add(f"results.json row {index + 1}" + (f" ({name})" if name else ""),
                      f"{problem} (written by another version of course grade, or edited by hand?); left out")
            continue
        if row.get("format", ROW_FORMAT) != ROW_FORMAT:
            notes.add(f"results.json row {index + 1} ({row['submission']})",
                      f"written by another version of course grade (row format {row.get('format')!r}, this report "
                      f"reads format {ROW_FORMAT}); read as far as it matches")
        graded.append(_from_row(row, folder, run, code_folder, notes))
    return GradedBatch("course grade", folder, graded, notes, run, code_folder)


def _row_problem(row) -> str:
    if not isinstance(row, dict):
        return "not a row (a JSON object was expected)"
    for key, kinds in REQUIRED_FIELDS.items():
        if key not in row:
            return f"no {key!r}"
        if not isinstance(row[key], kinds) or isinstance(row[key], bool):
            return f"{key!r} is {type(row[key]).__name__}"
    if "/" in row["submission"] or "\0" in row["submission"] or row["submission"].strip(".") == "":
        return "its submission name is not a file name"  # it names files of the results folder
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in row["scores"].values()):
        return "a score that is not a number"
    return ""


def _from_row(row: dict, folder: Path, run: dict, code_folder: Path | None, notes: Notes) -> Graded:
    name = row["submission"]
    results = ResultsFolder(folder)
    feedback = results.feedback_of(name)
    if not feedback.is_file():
        notes.add(f"feedback/{name}.txt", "missing; the report links to no feedback for it")
        feedback = None
    graded = Graded(name=name, assignment=str(row.get("assignment") or ""), status=row["status"],
                    message=str(row.get("message") or ""), total=float(row["total"]), possible=float(row["possible"]),
                    scores={str(q): float(v) for q, v in row["scores"].items()}, feedback=feedback,
                    autograder=str(row.get("autograder_sha256") or ""), sandbox=str(row.get("sandbox") or ""),
                    sealed=row.get("sealed"), limits=row.get("limits") or run.get("limits"),
                    graded_at=str(row.get("graded_at") or run.get("graded_at") or ""))
    if isinstance(row.get("file"), str) and code_folder and ".." not in Path(row["file"]).parts:
        graded.code = code_folder / row["file"]
    full = row if "questions" in row else _load_json(results.row_of(name), notes,
                                                    "; its tests are left out of Tests and Common mistakes")
    if isinstance(full, dict) and isinstance(full.get("questions"), dict):
        graded.cases, graded.question_possible = _cases(full["questions"])
        if graded.cases is None:
            notes.add(f"rows/{name}.json", "its test outcomes are not in the expected form; left out of Tests")
    return graded


def _cases(questions: dict) -> tuple[list[dict] | None, dict[str, float]]:
    cases, possible = [], {}
    for question, detail in questions.items():
        if not isinstance(detail, dict) or not isinstance(detail.get("cases"), list):
            return None, {}
        if isinstance(detail.get("possible"), (int, float)):
            possible[question] = float(detail["possible"])
        for case in detail["cases"]:
            if not (isinstance(case, dict) and isinstance(case.get("test"), str) and isinstance(case.get("passed"), bool)):
                return None, {}
            cases.append({"question": question, "test": case["test"], "hidden": bool(case.get("hidden")),
                          "points": float(case.get("points") or 0), "passed": case["passed"],
                          "message": str(case.get("message") or "")})
    return cases, possible


# ---------------------------------------------------------------------------------------- Gradescope

def _is_gradescope_file(path: Path) -> bool:
    try:
        if path.stat().st_size > 20 << 20:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("tests"), list)


def read_gradescope(folder: Path, submissions: Path | None = None, assignment: str | None = None) -> GradedBatch:
    """Every ``results.json`` (or ``<name>.json``) in Gradescope's format under ``folder``: one per
    submission, named after its folder (or its file). The student's upload, where it lies beside
    its results (as in Gradescope's export) or in ``submissions/<name>``, gives the code."""
    notes = Notes()
    graded = []
    for path in sorted(folder.rglob("*.json")):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        nested = path.name == "results.json" and path.parent != folder
        name = path.parent.relative_to(folder).as_posix().replace("/", "__") if nested else path.stem
        if path.name != "results.json" and path.parent != folder:
            continue  # other JSON inside a submission's folder (the student's own files)
        data = _load_json(path, notes, "; left out")
        if data is None:
            continue
        if not (isinstance(data, dict) and isinstance(data.get("tests"), list)):
            notes.add(path.relative_to(folder), "not a Gradescope results file (no list of tests); left out")
            continue
        try:
            graded.append(_from_gradescope(name, data, path, folder, submissions, assignment, nested))
        except (TypeError, ValueError, AttributeError) as err:
            notes.add(path.relative_to(folder), f"not in the form the autograder writes ({err}); left out")
    return GradedBatch("Gradescope", folder, graded, notes, {}, submissions)


def _from_gradescope(name: str, data: dict, path: Path, folder: Path, submissions: Path | None,
                     assignment: str | None, nested: bool) -> Graded:
    read = read_results(data)
    extra, cases, status, message = read["extra"], read["cases"], read["status"], read["message"]
    scores, possible = {}, {}
    for case in cases:
        scores[case["question"]] = scores.get(case["question"], 0.0) + (case["points"] if case["passed"] else 0.0)
        possible[case["question"]] = possible.get(case["question"], 0.0) + case["points"]
    code = None
    if nested:
        uploads = [p for p in sorted(path.parent.iterdir()) if p.suffix in (".ipynb", ".zip") and p.is_file()]
        code = uploads[0] if len(uploads) == 1 else None
    if code is None and submissions:
        code = next((p for p in (submissions / f"{name}.ipynb", submissions / f"{name}.zip") if p.is_file()), None)
        if code is None and (submissions / name).is_dir():
            uploads = sorted((submissions / name).glob("*.ipynb")) or sorted((submissions / name).glob("*.zip"))
            code = uploads[0] if uploads else None
    seal = read["sandbox"]
    return Graded(name=name, assignment=str(extra.get("assignment") or assignment or folder.name),
                  status=status if cases or status != "ok" else "error", message=message,
                  total=read["total"], possible=float(sum(possible.values())), scores=scores,
                  cases=cases if status not in UNFINISHED else [], question_possible=possible, feedback=path, code=code,
                  autograder=str(extra.get("autograder_sha256") or ""), sandbox=seal, sealed=bool(seal) or None,
                  limits=extra.get("limits") if isinstance(extra.get("limits"), dict) else None,
                  graded_at=str(extra.get("graded_at") or _modified(path)))


def _modified(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
