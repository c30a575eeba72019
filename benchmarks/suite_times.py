"""Where the test suite's time goes: each test file's total, and the tests and fixtures that take it.

pytest writes a JUnit XML report of a run (``--junitxml``); each test case there holds the time of
its setup, call and teardown together, so a session fixture (a build, a graded batch) counts in the
first test that asks for it. The batches are graded in the background while the tests marked
``beside_grading`` run first (docs/developers/testing.md): the first test that waits for them counts
the rest of that grading, and the marked tests count the time they shared the machine. This reads such a report and prints the files by their total, with the
slowest cases of each; ``--record`` keeps the totals in ``benchmarks/suite_times.json`` with the date,
the commit and a note of how the run was made, for the site's figures page.

    PYTEST_ADDOPTS=--junitxml=/tmp/junit.xml make test      # or CI=1 .ci/run
    .venv/bin/python benchmarks/suite_times.py /tmp/junit.xml [--record] [--note "fresh clone, idle"]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "benchmarks" / "suite_times.json"
#: The targets of issue 48: the whole suite and the fast lane (``make test-fast``), in minutes.
TARGET_MINUTES = {"suite": 25, "fast lane": 5}


def read(report: Path) -> tuple[dict[str, float], dict[str, list[tuple[float, str]]], float, int]:
    """(seconds per test file, its cases by time, the run's own seconds, the number of cases)."""
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    per_file: dict[str, float] = defaultdict(float)
    cases: dict[str, list[tuple[float, str]]] = defaultdict(list)
    count = 0
    for suite in suites:
        for case in suite.iter("testcase"):
            seconds = float(case.get("time") or 0)
            path = (case.get("classname") or "").replace(".", "/") + ".py"
            path = path.rsplit("/", 1)[0] + ".py" if not (REPO / path).is_file() and "/" in path else path
            per_file[path] += seconds
            cases[path].append((seconds, case.get("name") or "?"))
            count += 1
    total = sum(float(s.get("time") or 0) for s in suites)
    return dict(per_file), cases, total, count


def table(per_file: dict[str, float], cases: dict[str, list[tuple[float, str]]], total: float, count: int) -> str:
    lines = [f"{count} tests, {total / 60:.1f} min in all (target {TARGET_MINUTES['suite']} min)", "",
             f"{'seconds':>8}  {'share':>5}  file (and its slowest tests)"]
    for path, seconds in sorted(per_file.items(), key=lambda item: -item[1]):
        lines.append(f"{seconds:8.0f}  {seconds / max(total, 1e-9):5.0%}  {path}")
        for case_seconds, name in sorted(cases[path], reverse=True)[:3]:
            if case_seconds >= 5:
                lines.append(f"{case_seconds:8.0f}         {name}")
    return "\n".join(lines)


def record(per_file: dict[str, float], total: float, count: int, note: str, commit: str = "") -> None:
    commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                      text=True).stdout.strip()
    entry = {"date": dt.date.today().isoformat(), "commit": commit, "note": note, "tests": count,
             "seconds": round(total),
             "files": {path: round(seconds) for path, seconds in sorted(per_file.items(), key=lambda item: -item[1])}}
    RECORD.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="pytest's JUnit XML report (--junitxml)")
    parser.add_argument("--record", action="store_true", help=f"keep the figures in {RECORD.relative_to(REPO)}")
    parser.add_argument("--note", default="", help="how the run was made (fresh clone, idle or loaded)")
    parser.add_argument("--commit", default="", help="the commit the run tested (default: this checkout's HEAD)")
    args = parser.parse_args()
    per_file, cases, total, count = read(args.report)
    print(table(per_file, cases, total, count))
    if args.record:
        record(per_file, total, count, args.note, args.commit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
