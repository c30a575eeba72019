"""The gradebook a course's learning platform takes, written beside ``course grade``'s results.

One CSV per assignment, ``RESULTS/gradebook/<assignment>.csv``: a row for every upload (a stray or
unreadable one included, with its reason), the student it belongs to, each autograded question's
points, the written questions as empty columns for the TAs to fill, the autograded total, the status.
Beside it, ``RESULTS/gradebook/<assignment>-canvas.csv`` in the form Canvas's gradebook import reads.

Who a file belongs to comes from, in order: a roster the instructor gives (``--roster``: a CSV with a
``student`` column, optionally ``name`` and ``file``, the start of the student's file names); the
names the platforms give files in a bulk download (Canvas: ``name_12345_67890_original.ipynb``, the
second part being the student's Canvas user id; Moodle: ``Full Name_12345_assignsubmission_file_...``);
a folder per student (``alice/kernel_attention.ipynb``); else the file's own name.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.grade.results import ResultsFolder, write_atomically
from autograder.judge.quoting import spreadsheet_safe

#: Canvas's bulk download: ``lastfirst[_LATE]_<user id>_<submission id>_<original name>``.
CANVAS_NAME = re.compile(r"^(?P<name>[^_/]+?)(?:_LATE)?_(?P<user>\d+)_(?P<submission>\d+)_(?P<rest>.+)$")
#: Moodle's: ``<Full Name>_<participant id>_assignsubmission_file_<original name>`` (a file or a folder).
MOODLE_NAME = re.compile(r"^(?P<name>.+?)_(?P<user>\d+)_assignsubmission_(?:file|onlinetext)_(?P<rest>.*)$")


@dataclass(frozen=True)
class Student:
    id: str
    name: str = ""
    source: str = "file name"  # how it was told: roster, Canvas, Moodle, folder, file name


def read_roster(path: Path) -> list[dict]:
    """The roster's rows: ``student`` (required), ``name`` and ``file`` (optional)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    if not rows or "student" not in rows[0]:
        raise ValueError(f"{path}: a roster is a CSV with a 'student' column (and optionally 'name' and 'file')")
    return rows


def student_of(file: str, roster: list[dict] | None = None) -> Student:
    """Whose upload ``file`` (a path relative to the submissions folder) is."""
    parts = Path(file).parts
    first = parts[0]
    for row in roster or []:
        key = (row.get("file") or row["student"]).strip()
        if key and (first == key or first.startswith(key)):
            return Student(row["student"].strip(), (row.get("name") or "").strip(), "roster")
    canvas = CANVAS_NAME.match(first)
    if canvas:
        return Student(canvas["user"], canvas["name"], "Canvas")
    moodle = MOODLE_NAME.match(first)
    if moodle:
        return Student(moodle["user"], moodle["name"], "Moodle")
    if len(parts) > 1:
        return Student(first, "", "folder")
    return Student(Path(first).stem, "", "file name")


def write_gradebooks(rows: list[dict], strays: list[str], out: Path, written: dict[str, list[tuple[str, float]]],
                     roster: list[dict] | None = None) -> list[Path]:
    """One gradebook (and its Canvas form) per assignment graded. ``strays``: uploads that are not
    notebooks or zips, which every gradebook lists as not graded; ``written``: each assignment's
    written questions and their points. Returns the files written."""
    assignments = sorted({row["assignment"] for row in rows if row["assignment"]}) or ["unknown"]
    unassigned = [row for row in rows if not row["assignment"]]
    folder = ResultsFolder(out).gradebooks
    folder.mkdir(parents=True, exist_ok=True)
    written_files = []
    for assignment in assignments:
        graded = [row for row in rows if row["assignment"] == assignment]
        autograded = sorted({q for row in graded for q in row["scores"]})
        manual = written.get(assignment, [])
        header = ["student", "name", "identified by", "file", *(f"{q} (auto)" for q in autograded),
                  *(f"{q} (written, of {points:g})" for q, points in manual), "autograded total", "autograded possible",
                  "written possible", "status", "message"]
        table = [header]
        for row in graded + unassigned:
            student = student_of(row["file"], roster)
            table.append([student.id, student.name, student.source, row["file"],
                          *(row["scores"].get(q, "") for q in autograded), *("" for _ in manual),
                          row["total"] if row["assignment"] else "", row["possible"] if row["assignment"] else "",
                          sum(p for _, p in manual), row["status"], row["message"]])
        for stray in strays:
            student = student_of(stray, roster)
            table.append([student.id, student.name, student.source, stray, *("" for _ in autograded),
                          *("" for _ in manual), "", "", sum(p for _, p in manual), "not graded",
                          "neither a notebook nor a zip: not graded"])
        path = folder / f"{assignment}.csv"
        write_atomically(path, _csv(table))
        written_files.append(path)
        canvas = folder / f"{assignment}-canvas.csv"
        write_atomically(canvas, _csv(canvas_table(assignment, table, header)))
        written_files.append(canvas)
    return written_files


def canvas_table(assignment: str, table: list[list], header: list[str]) -> list[list]:
    """Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then one column per
    assignment, and a "Points Possible" row; Canvas matches rows by ID (its user id, from the bulk
    download's file names). The autograded points go in; the written ones are added in Canvas."""
    total, possible = header.index("autograded total"), header.index("autograded possible")
    rows = table[1:]
    points = next((r[possible] for r in rows if r[possible] != ""), "")
    out = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{assignment} (autograded)"],
           ["Points Possible", "", "", "", "", points]]
    for row in rows:
        canvas_id = row[0] if row[2] == "Canvas" else ""
        out.append([row[1] or row[0], canvas_id, "", "" if canvas_id else row[0], "", row[total]])
    return out


def _csv(table: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for line in table:
        writer.writerow([spreadsheet_safe(cell) for cell in line])
    return buffer.getvalue()


__all__ = ["Student", "canvas_table", "read_roster", "student_of", "write_gradebooks"]
