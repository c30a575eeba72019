"""The gradebook: a row for every upload (a stray file included), whose it is, each question's points,
the written questions as columns to fill; and its Canvas form."""

import csv
from pathlib import Path

import pytest

from autograder.report.gradebook import student_of, write_gradebooks

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


def row(file, assignment="kernel_attention", status="ok", total=10.0, scores=None, message=""):
    scores = scores if scores is not None else {"q1_softmax": 5, "q3_quadratic": 5.0}
    return {"submission": file.replace("/", "__"), "file": file, "assignment": assignment, "status": status,
            "scores": scores if assignment else {}, "total": total if assignment else 0,
            "possible": 22 if assignment else 0, "message": message}


def read(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_who_an_upload_is_comes_from_the_roster_the_platforms_names_a_folder_or_the_file():
    roster = [{"student": "s-007", "name": "Trent Moss", "file": "trent"}]
    assert student_of("trent_notes.txt", roster).id == "s-007"
    assert student_of("smithjane_LATE_123456_987654_kernel_attention.ipynb") == \
        type(student_of("x"))("123456", "smithjane", "Canvas")
    assert student_of("Jane Smith_4242_assignsubmission_file_/kernel_attention_submission.zip").id == "4242"
    assert student_of("alice/kernel_attention.ipynb").id == "alice"
    assert student_of("bob.ipynb").id == "bob"


def test_every_upload_gets_a_row_with_its_points_and_the_written_questions_to_fill(tmp_path):
    rows = [row("alice/kernel_attention.ipynb"),
            row("smithjane_123456_987654_kernel_attention.ipynb", status="timeout", total=3, message="did not finish"),
            row("broken.zip", assignment="", status="invalid", message="not a valid zip file")]
    written = {"kernel_attention": [("q1_axis", 1.0), ("q2_denominator", 1.5)]}
    files = write_gradebooks(rows, ["trent_notes.txt"], tmp_path, written)
    assert [p.name for p in files] == ["kernel_attention.csv", "kernel_attention-canvas.csv"]
    book = read(tmp_path / "gradebook" / "kernel_attention.csv")
    assert [r["student"] for r in book] == ["alice", "123456", "broken", "trent_notes"]
    assert [r["status"] for r in book] == ["ok", "timeout", "invalid", "not graded"]
    assert book[0]["q1_softmax (auto)"] == "5" and book[0]["autograded total"] == "10.0"
    assert book[0]["q1_axis (written, of 1)"] == "" and book[0]["written possible"] == "2.5"
    assert "neither a notebook nor a zip" in book[3]["message"]
    canvas = list(csv.reader(open(tmp_path / "gradebook" / "kernel_attention-canvas.csv", newline="")))
    # Canvas's import: these five columns first, the assignment after, a Points Possible row, one row per upload
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[0][5] == "kernel_attention (autograded)" and canvas[1][0] == "Points Possible" and canvas[1][5] == "22"
    assert len(canvas) == 2 + 4
    assert canvas[3][1] == "123456" and canvas[3][5] == "3"  # matched by Canvas's user id
    assert canvas[2][3] == "alice"  # the others by login
