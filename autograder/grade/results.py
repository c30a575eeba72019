"""What a grading run writes: rows saved atomically, ``results.csv`` / ``results.json``, a feedback
file per submission, and the score table printed at the end. :class:`ResultsFolder` is the one
place that names the files of a results folder; the grader, the report, the gradebooks and the
demo go through it."""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autograder.judge.quoting import spreadsheet_safe

#: What a grading run records beside its results (``course report`` reads it): where the
#: submissions are, the limits, the seal and the date. ``RUN_FORMAT`` changes when its meaning does.
RUN_FILE = "run.json"
RUN_FORMAT = 1


#: The metadata key of a kept executed notebook: the hash of the submission it was run from.
EXECUTED_KEY = "course_graded_run"


@dataclass(frozen=True)
class ResultsFolder:
    """The files of a ``course grade`` results folder."""

    root: Path
    ROWS = "rows"  # one saved row per submission (the batch's records folder)

    @property
    def rows(self) -> Path:
        return self.root / self.ROWS

    @property
    def csv(self) -> Path:
        return self.root / "results.csv"

    @property
    def json(self) -> Path:
        return self.root / "results.json"

    @property
    def feedback(self) -> Path:
        return self.root / "feedback"

    def feedback_of(self, submission: str) -> Path:
        return self.feedback / f"{submission}.txt"

    def row_of(self, submission: str) -> Path:
        return self.rows / f"{submission}.json"

    @property
    def run(self) -> Path:
        return self.root / RUN_FILE

    @property
    def gradebooks(self) -> Path:
        return self.root / "gradebook"

    @property
    def executed(self) -> Path:
        """Notebooks saved without outputs, as their sealed grading run executed them (for ``course pdf``)."""
        return self.root / "executed"

    def executed_of(self, submission: str) -> Path:
        return self.executed / f"{submission}.ipynb"


def write_atomically(path: Path, content: str | bytes) -> None:
    """Write a file so that a reader (or a rerun after a kill) sees the old or the new content, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    data = content.encode("utf-8") if isinstance(content, str) else content
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_reports(rows: list[dict], out: Path) -> None:
    """results.csv / results.json (one row per submission) and feedback/<submission>.txt."""
    questions = sorted({q for row in rows for q in row["scores"]})
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["submission", "assignment", "status", *questions, "total", "possible", "seconds", "message"])
    for row in rows:  # a file may be named "=HYPERLINK(...).ipynb": no cell is a formula
        writer.writerow([spreadsheet_safe(cell) for cell in (
            row["submission"], row["assignment"], row["status"], *(row["scores"].get(q, "") for q in questions),
            row["total"], row["possible"], row["seconds"], row["message"])])
    folder = ResultsFolder(out)
    write_atomically(folder.csv, table.getvalue())
    summary = [{k: v for k, v in row.items() if k != "questions"} for row in rows]
    write_atomically(folder.json, json.dumps(summary, indent=1))
    folder.feedback.mkdir(exist_ok=True)
    for row in rows:
        write_atomically(folder.feedback_of(row["submission"]), feedback_text(row))


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def limits_record(limits) -> dict:
    """The limits a row was graded under, as the rows and ``run.json`` record them."""
    return {k: getattr(limits, k) for k in ("timeout", "memory_mb", "processes", "disk_mb")}


def write_run_record(out: Path, submissions: Path, limits, sealed: bool, sandbox: str | None) -> None:
    """``run.json``: what graded this results folder, for ``course report``."""
    record = {"format": RUN_FORMAT, "submissions": str(submissions), "graded_at": now(),
              "limits": limits_record(limits), "sealed": sealed, "sandbox_mode": sandbox}
    write_atomically(ResultsFolder(out).run, json.dumps(record, indent=1))


def feedback_text(row: dict) -> str:
    lines = [f"Submission: {row['file']}", f"Assignment: {row['assignment'] or '?'}",
             f"Score: {row['total']:g} / {row['possible']:g}   (status: {row['status']})"]
    if row["message"]:
        lines.append(f"Note: {row['message']}")
    for q, detail in sorted(row["questions"].items()):
        lines.append(f"\n{q}: {detail['score']:g} / {detail['possible']:g}")
        for case in detail["cases"]:
            if case["points"] or not case["passed"]:
                mark = "passed" if case["passed"] else "FAILED"
                kind = "hidden" if case["hidden"] else "public"
                lines.append(f"  - {case['test']} ({kind}, {case['points'] or 0:g} pt): {mark}")
                if not case["passed"] and case["message"]:
                    shown = _without_test_code(case["message"]) if case["hidden"] else case["message"].strip().splitlines()[-6:]
                    lines.extend("      " + line for line in shown)
    return "\n".join(lines) + "\n"


def _without_test_code(message: str) -> list[str]:
    """A hidden test's failure as the student may see it: the exception, not the failing line.

    Otter writes "Error at line N in test q:" and the line of test code before the exception;
    those two lines go, the verdict (what differed, or the student's own error) stays.
    """
    lines = [line for line in message.strip().splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.lstrip().startswith("Error at line"):
            return lines[:i] + lines[i + 2:]
    return lines


def format_table(rows: list[dict]) -> str:
    """The score table printed at the end of a run: one block per assignment (its own questions),
    then the message of every row that has one."""
    blocks = []
    for assignment in sorted({row["assignment"] for row in rows}, key=lambda a: (a == "", a)):  # invalid ones last
        group = [row for row in rows if row["assignment"] == assignment]
        questions = sorted({q for row in group for q in row["scores"]})
        header = ["submission", "status", *questions, "total"]
        body = [[row["submission"], row["status"], *(f"{row['scores'][q]:g}" if q in row["scores"] else "-"
                                                      for q in questions),
                 f"{row['total']:g}/{row['possible']:g}"] for row in group]
        widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *body]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        blocks.append((f"{assignment}:\n" if assignment else "not graded (no assignment):\n") + "\n".join(lines))
    notes = [f"{row['submission']}: {row['message'][:160]}" for row in rows if row["message"]]
    return "\n\n".join(blocks) + ("\n\n" + "\n".join(notes) if notes else "")
