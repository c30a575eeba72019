"""A row: what ``course grade`` records for one submission, and the statuses it can have.

The judge (:func:`autograder.judge.verdicts.verdict`), the unsealed worker and the grader fill a
row; results.csv and results.json, the feedback, the report, the gradebooks and Gradescope's
results read it. This module is where its fields and statuses are written down, for both sides.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypedDict


class Status(StrEnum):
    """How grading a submission went (a ``str``: rows and results.json hold the plain word)."""

    OK = "ok"  # the tests ran to the end (points may still be lost)
    ERROR = "error"  # the notebook or the grading failed; the tests that ran still count
    TIMEOUT = "timeout"  # stopped at the time limit
    MEMORY = "memory"  # stopped at the memory limit, or a test ran out of memory
    TAMPERED = "tampered"  # the sandbox reported what no honest run reports
    INVALID = "invalid"  # not a readable notebook of a known assignment

    @property
    def finished(self) -> bool:
        """Whether the tests ran to the end (an ``error`` still ran them): the test statistics use only these."""
        return self not in UNFINISHED


#: Statuses whose tests did not run to the end.
UNFINISHED = frozenset({Status.TIMEOUT, Status.MEMORY, Status.TAMPERED, Status.INVALID})


class Case(TypedDict):
    """One test's outcome."""

    test: str
    hidden: bool
    points: float
    passed: bool
    message: str


class Question(TypedDict):
    score: float
    possible: float
    cases: list[Case]


class Verdict(TypedDict, total=False):
    """The scored part of a row, as the judge (sealed) or the worker (unsealed) returns it."""

    status: Status
    message: str
    questions: dict[str, Question]
    peak_memory_mb: int  # sealed only, with the two below
    peak_address_space_mb: int
    sandbox_seconds: float


#: The rows' format: it changes when a field's meaning does (the report notes rows of another).
ROW_FORMAT = 1


class Row(Verdict, total=False):
    """A row of results.json (and of ``rows/<submission>.json``)."""

    format: int  # ROW_FORMAT
    submission: str  # the submission's name: a file name, unique in the run
    file: str  # the uploaded file, relative to the submissions folder
    assignment: str  # "" when it could not be told
    autograder_sha256: str
    scores: dict[str, float]  # question -> points
    total: float
    possible: float
    seconds: float
    sealed: bool
    limits: dict
    graded_at: str


def completed(verdict: Verdict, possible: dict[str, float]) -> Verdict:
    """The complete scored part of a row: ``verdict`` with a column for every question of
    ``possible`` (0 points where its tests never ran, as on a timeout), each question's score, the
    total and the points possible."""
    questions = dict(verdict.get("questions") or {})
    for question, points in possible.items():
        questions.setdefault(question, {"score": 0, "possible": points, "cases": []})
    scores = {q: v["score"] for q, v in sorted(questions.items())}
    return {**verdict, "questions": questions, "scores": scores, "total": round(sum(scores.values()), 4),
            "possible": round(sum(v["possible"] for v in questions.values()), 4)}


#: What a reader needs of a row, and of which types, to use it at all.
REQUIRED_FIELDS = {"submission": str, "status": str, "total": (int, float), "possible": (int, float), "scores": dict}
