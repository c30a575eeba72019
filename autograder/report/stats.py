"""The numbers of ``course report``: scores per question, how each test behaves across the class,
and the failures grouped into common mistakes. Plain data in, plain data out (no HTML here)."""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

from autograder.report.inputs import STATUSES, Graded

#: A test is "failed by strong submissions" when fewer than this share of the strongest quarter
#: (by their score on every other test) pass it: more often a bad test than a bad class.
STRONG_PASS_BELOW = 0.5
#: Passing a test that goes with a lower score elsewhere at this correlation or below is flagged.
NEGATIVE_CORRELATION = -0.3
#: Fewest submissions for a flag (fewer say nothing about a test).
FEWEST = 3
#: A correlation flag rests on at least this many passing and this many failing submissions: on three
#: failures a correlation of -0.3 is chance.
FEWEST_EACH_SIDE = 5


@dataclass
class QuestionStats:
    question: str
    possible: float
    mean: float
    median: float
    full: float  # share at full marks
    zero: float  # share at zero


def question_stats(graded: list[Graded]) -> list[QuestionStats]:
    """Per question over the submissions that have a score (invalid ones have none)."""
    scored = [g for g in graded if g.status != "invalid" and g.scores]
    questions = sorted({q for g in scored for q in g.scores})
    out = []
    for q in questions:
        values = [g.scores.get(q, 0.0) for g in scored]
        possible = max([g.question_possible.get(q, 0.0) for g in scored] + [max(values)])
        out.append(QuestionStats(q, possible, statistics.fmean(values), statistics.median(values),
                                 sum(v >= possible > 0 for v in values) / len(values),
                                 sum(v <= 0 for v in values) / len(values)))
    return out


def status_counts(graded: list[Graded]) -> dict[str, int]:
    counts = Counter(g.status for g in graded)
    return {s: counts[s] for s in [*STATUSES, *sorted(set(counts) - set(STATUSES))] if counts[s] or s in STATUSES}


@dataclass
class ByTest:
    question: str
    test: str
    hidden: bool
    points: float
    judged: int  # submissions whose outcome counts
    passed: int
    correlation: float | None  # between passing and the score on every other test
    rest_passing: float | None  # mean share of the other points, among those who pass
    rest_failing: float | None  # ... and among those who fail
    strong: int  # the strongest quarter by the other points
    strong_passed: int
    flags: list[str] = field(default_factory=list)
    severity: float = 0.0

    @property
    def share(self) -> float:
        return self.passed / self.judged if self.judged else 0.0


def _judged_cases(graded: list[Graded]):
    """(submission, case) pairs whose outcome says something about the test: the tests ran to the
    end (no timeout, memory, tampering) and this one was not skipped."""
    for g in graded:
        if not g.finished or not g.cases:
            continue
        for case in g.cases:
            if not case["message"].startswith("did not run"):
                yield g, case


def by_test(graded: list[Graded]) -> list[ByTest]:
    """Every test, the flagged first (likely bad tests, then tests nobody passes, then tests whose
    passing goes with a lower score elsewhere, then tests everybody passes), then by pass share."""
    grouped: dict[tuple, list] = {}
    for g, case in _judged_cases(graded):
        grouped.setdefault((case["question"], case["test"]), []).append((g, case))
    out = [_one_test(key, pairs) for key, pairs in grouped.items()]
    return sorted(out, key=lambda t: (-t.severity, t.share, t.question, t.test))


def _one_test(key: tuple, pairs: list) -> ByTest:
    passed = [1.0 if case["passed"] else 0.0 for _, case in pairs]
    rest = []
    for g, case in pairs:
        own = case["points"] if case["passed"] else 0.0
        room = g.possible - case["points"]
        rest.append((g.total - own) / room if room > 0 else 0.0)
    n = len(pairs)
    first = pairs[0][1]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    stats = ByTest(key[0], key[1], first["hidden"], max(c["points"] for _, c in pairs), n, int(sum(passed)),
                      _correlation(passed, rest), mean([r for r, p in zip(rest, passed) if p]),
                      mean([r for r, p in zip(rest, passed) if not p]), 0, 0)
    ranked = sorted(rest, reverse=True)
    cut = ranked[max(2, math.ceil(n / 4)) - 1] if n >= FEWEST else math.inf
    strong = [p for r, p in zip(rest, passed) if r >= cut and r > 0]
    stats.strong, stats.strong_passed = len(strong), int(sum(strong))
    if n >= FEWEST and len(strong) >= 2 and stats.strong_passed < STRONG_PASS_BELOW * len(strong):
        stats.flags.append(f"strong submissions fail it ({stats.strong_passed} of the {len(strong)} best by their "
                           "other tests pass): check the test before the class")
        stats.severity = max(stats.severity, 3 + 1 - stats.strong_passed / len(strong))
    if n >= FEWEST and stats.passed == 0:
        stats.flags.append("nobody passes it")
        stats.severity = max(stats.severity, 2)
    failing = n - stats.passed
    if (min(stats.passed, failing) >= FEWEST_EACH_SIDE and stats.correlation is not None
            and stats.correlation <= NEGATIVE_CORRELATION):
        stats.flags.append(f"passing it goes with a lower score elsewhere (correlation {stats.correlation:.2f}, on "
                           f"{stats.passed} passing and {failing} failing submissions)")
        stats.severity = max(stats.severity, 1.5 - stats.correlation)
    if n >= FEWEST and stats.passed == n:  # a public check is meant to be passed before handing in
        public = not stats.hidden and not stats.points
        stats.flags.append("everybody passes it" + (" (a public check: as expected)" if public else
                                                    ": does it tell a right answer from a wrong one?"))
        stats.severity = max(stats.severity, 0.5 if public else 1)
    return stats


def _correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r (point-biserial for a 0/1 ``xs``); None where either side does not vary."""
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


# ------------------------------------------------------------------------------------ common mistakes

#: What differs between two reports of the same mistake: quoted text, numbers (with signs,
#: decimals and exponents, hexadecimal), numpy's wrapping of them, and how many of them a tuple holds.
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?![\w])")
_WRAPPED = re.compile(r"\b(?:np|numpy|torch)\.\w+\(#\)")
_TUPLE = re.compile(r"[(\[]#(?:,\s*#)+,?[)\]]")
_LONG = 300


def problems(message: str) -> list[str]:
    """The problems a failure message names: each line the sealed grader writes (one per check),
    or the last line of a long traceback (unsealed grading)."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if len(lines) > 4:
        lines = lines[-1:]
    return [line[:_LONG] for line in lines] or ["(no message)"]


def normalise(problem: str) -> str:
    """A problem with numbers as # and quoted text as '…', so "largest error 0.31 at index (0, 2)"
    and "largest error 0.27 at index (1, 0, 3)" fall together, and NameErrors of different names."""
    text = _NUMBER.sub("#", _QUOTED.sub("'…'", problem))
    return _TUPLE.sub("(#, …)", _WRAPPED.sub("#", text))


@dataclass
class MistakeGroup:
    pattern: str
    count: int
    examples: list[tuple[Graded, str]]  # (submission, its message as written)


@dataclass
class MistakesOfTest:
    question: str
    test: str
    hidden: bool
    failed: int
    judged: int
    groups: list[MistakeGroup]
    other_groups: int = 0  # groups beyond those shown


def common_mistakes(graded: list[Graded], examples: int = 2, groups: int = 6) -> list[MistakesOfTest]:
    """Per test with failures (most failures first): the problems its failures name, grouped after
    normalising, largest group first; a submission whose failure names two problems is in both."""
    grouped: dict[tuple, dict] = {}
    judged: Counter = Counter()
    failed: Counter = Counter()
    for g, case in _judged_cases(graded):
        key = (case["question"], case["test"], case["hidden"])
        judged[key] += 1
        if case["passed"]:
            continue
        failed[key] += 1
        for problem in dict.fromkeys(problems(case["message"])):
            grouped.setdefault(key, {}).setdefault(normalise(problem), []).append((g, problem))
    out = []
    for key, patterns in grouped.items():
        ordered = sorted(patterns.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        out.append(MistakesOfTest(key[0], key[1], key[2], failed[key], judged[key],
                                [MistakeGroup(p, len(v), v[:examples]) for p, v in ordered[:groups]],
                                len(ordered) - min(groups, len(ordered))))
    return sorted(out, key=lambda t: (-t.failed, t.question, t.test))


#: course grade's message for a notebook whose cell raised: "the cell starting 'x = f(1)' raised
#: NameError: name 'f' is not defined".
_CELL_RAISED = re.compile(r"the cell starting (?P<cell>.+?) raised (?P<error>[A-Za-z_][\w.]*)")


@dataclass
class RaisingCell:
    cell: str
    count: int
    errors: Counter
    examples: list[Graded]


def raising_cells(graded: list[Graded], examples: int = 2) -> list[RaisingCell]:
    """The cells that raised (the first in each notebook, as grading records it), most often first."""
    cells: dict[str, RaisingCell] = {}
    for g in graded:
        found = _CELL_RAISED.search(g.message)
        if not found:
            continue
        cell = cells.setdefault(found["cell"], RaisingCell(found["cell"], 0, Counter(), []))
        cell.count += 1
        cell.errors[found["error"].rsplit(".", 1)[-1]] += 1
        if len(cell.examples) < examples:
            cell.examples.append(g)
    return sorted(cells.values(), key=lambda c: (-c.count, c.cell))


def totals(graded: list[Graded]) -> tuple[list[float], float]:
    """The totals of the scored submissions, and the most points possible."""
    scored = [g for g in graded if g.status != "invalid"]
    return [g.total for g in scored], max([g.possible for g in scored] + [0.0])
