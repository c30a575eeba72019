"""The judge: a submission's status and score from what its sandbox reported, computed outside it.

A test with points passes only if it ran without raising and every golden value recorded for it
was collected exactly once and is judged close (or in range) by :func:`helpers.core.golden.judge`;
the golden values, tolerances and points come from the autograder zip and never enter the sandbox,
so patching anything inside the kernel (otter, helpers, numpy, torch) can change only the student's
own values. Nothing a student sees quotes a hidden test: what of the sandbox's words may be shown
is :mod:`autograder.judge.quoting`'s rule.
"""

from __future__ import annotations

from collections import Counter

from helpers.core.golden import judge

import autograder.judge.sampling  # noqa: F401 (hands the grader's own measures to the table)
from autograder.autograder_zip import Autograder
from autograder.grade.row import Status, Verdict, completed
from autograder.judge.quoting import (UNREADABLE_VALUE, exception_name, excerpt, known_outcomes, parameters_by_test,
                                      public_check_wording, public_check_wordings)
from autograder.limits import MAX_DEPTH, MAX_FILES, RUNNER_CAPS, SandboxLimits, over_time
from autograder.sandbox.protocol import CELLS_DONE, DONE, RUNNER_ERROR, TEST
from autograder.sandbox.seal import SandboxRun

#: What an error says when memory ran out (Python, torch's allocator, a Rust extension's os error 12).
MEMORY_MARKERS = ("MemoryError", "can't allocate memory", "Cannot allocate memory", "os error 12",
                  "DefaultCPUAllocator", "out of memory")


def verdict(run: SandboxRun, autograder: Autograder, limits: SandboxLimits) -> Verdict:
    """Status, message and per-question scores from what the sandbox reported."""
    reported = [m for m in run.messages if m.get("event") == TEST]
    tests, unknown = known_outcomes(reported, {c["test"] for cases in autograder.tests.values() for c in cases})
    questions, tampering = score(autograder, tests)
    if unknown:  # never named: a kernel can print any test name, a hidden test's source included
        tampering.insert(0, f"the sandbox reported {unknown} outcome(s) of tests this assignment does not have")
    if run.leftovers:  # something of the sandbox outlived the kill: what it reported is not judged
        for detail in questions.values():
            detail["score"] = 0
            for case in detail["cases"]:
                case["passed"], case["message"] = False, "not judged: the sandbox could not be emptied"
    status, message = run_status(run, limits, tampering)
    short_of_memory = next((m for m in tests if _out_of_memory(m.get("error"))), None)
    if status == Status.OK and short_of_memory:  # points lost to memory are never a silent "ok"
        where = f"the test {short_of_memory['test']}" if short_of_memory.get("test") else \
            f"the tests of {short_of_memory['question']}" if short_of_memory.get("question") in autograder.tests \
            else "a test"
        status, message = Status.MEMORY, f"{where} ran out of memory ({exception_name(short_of_memory['error'])})"
    if run.output_dropped and status == Status.OK:
        message = f"printed more than {limits.output_bytes >> 10} KiB outside the notebook; the rest was dropped"
    return completed({"status": status, "message": message[:500], "questions": questions,
                      "peak_memory_mb": round(run.peak_memory_mb), "peak_address_space_mb": round(run.peak_address_space_mb),
                      "sandbox_seconds": round(run.seconds, 2)}, autograder.possible)


def run_status(run: SandboxRun, limits: SandboxLimits, tampering: list[str] = ()) -> tuple[Status, str]:
    """(status, message) of how a run went, tests aside: a limit, signs of tampering, the notebook's
    own first error, or a runner that did not finish. ``course pdf`` shows it beside a notebook it ran."""
    events = {m.get("event") for m in run.messages}
    cells = next((m for m in run.messages if m.get("event") == CELLS_DONE), None)
    if run.leftovers:
        return Status.ERROR, "processes of its sandbox outlived the kill; nothing it reported was judged"
    if run.killed_for == "timeout":
        return Status.TIMEOUT, over_time(limits)
    if run.killed_for == "memory":
        largest = max(run.memory_parts.items(), key=lambda part: part[1], default=None)
        most = f", most of it {largest[0]} ({largest[1]:.0f} MB)" if largest else ""
        return Status.MEMORY, f"used more than {limits.memory_mb} MB of memory (all its processes together{most}); stopped"
    if run.killed_for == "processes":
        return Status.ERROR, f"started more than {limits.processes} processes at once; stopped"
    if run.killed_for == "disk":
        what = {"files": f"more than {MAX_FILES} files", "depth": f"folders nested deeper than {MAX_DEPTH}"}
        return Status.ERROR, f"wrote {what.get(run.disk_cause, f'more than {limits.disk_mb} MB of files')} (all its files together); stopped"
    if run.channel_overflow or tampering:
        return Status.TAMPERED, "; ".join(tampering) or "the sandbox sent more results than any test makes"
    if cells and cells.get("kernel_died"):
        return Status.ERROR, excerpt(cells["kernel_died"], "evalue")  # the runner's words and the cell's first line
    if cells and isinstance(cells.get("first_error"), dict):  # the student's own error, before any test went in
        err = cells["first_error"]
        text = f"{excerpt(err.get('ename'), 'ename')}: {excerpt(err.get('evalue'), 'evalue')}"
        return ((Status.MEMORY if _out_of_memory(text) else Status.ERROR),
                f"the cell starting {excerpt(err.get('cell'), 'cell')!r} raised {text}")
    if DONE not in events:
        runner_error = next((m["error"] for m in run.messages if m.get("event") == RUNNER_ERROR), "")
        if runner_error:  # its type only: the text may quote a hidden test
            return Status.ERROR, f"grading failed inside the sandbox ({exception_name(runner_error)})"
        how = f"; it was killed by signal {-run.returncode}" if (run.returncode or 0) < 0 else \
            f"; exit status {run.returncode}" if run.returncode else ""
        # never the runner's printed output: after the tests went in, it may quote them
        return Status.ERROR, f"the grading runner stopped before it finished (did the notebook kill it, or exit?{how})"
    return Status.OK, ""


def _out_of_memory(error) -> bool:
    return isinstance(error, str) and any(marker in error for marker in MEMORY_MARKERS)


def score(autograder: Autograder, tests: list[dict]) -> tuple[dict, list[str]]:
    """Per-question scores, judged here from the collected values; plus any signs of tampering."""
    outcomes = {m["test"]: m for m in tests if m.get("test")}
    file_errors = {m["question"]: m.get("error") for m in tests
                   if not m.get("test") and isinstance(m.get("question"), str) and m["question"] in autograder.tests}
    parameters = parameters_by_test(autograder.sources)
    wordings = public_check_wordings(autograder.sources, {case["test"] for cases in autograder.tests.values()
                                                          for case in cases if not case["hidden"]})
    collected: dict[str, list] = {}
    for m in tests:
        for line in m.get("values") or []:
            if isinstance(line, dict) and isinstance(line.get("key"), str):
                collected.setdefault(line["key"], []).append(line)
    keys_of = autograder.golden_by_test()
    repeated = sorted(k for k, v in collected.items() if len(v) > 1 and k in autograder.golden)
    tampering = [f"value {k!r} was reported {len(collected[k])} times" for k in repeated[:3]]
    counts = Counter(m["test"] for m in tests if m.get("test"))
    tampering += [f"test {t} was reported {n} times" for t, n in counts.items() if n > 1][:3]

    questions = {}
    for question, cases in autograder.tests.items():
        results = []
        for case in cases:
            outcome = outcomes.get(case["test"])
            problems = []
            if outcome is None:
                why = file_errors.get(question)
                if why:
                    why = f"the tests raised {exception_name(why)}"
                problems.append(f"did not run ({why or 'the grading stopped before it'})")
            elif not outcome.get("passed"):
                error = outcome.get("error") or "an error"
                # the name only: a test file holds public and hidden tests, and a notebook can put
                # their source into the text of any exception it raises; a public check's failure
                # adds its message as the check's own source words it (quoting.public_check_wording)
                said = None if case["hidden"] else public_check_wording(error, wordings.get(case["test"], []))
                problems.append(f"raised {exception_name(error, parameters.get(case['test'], frozenset()))}"
                                + (f": {said}" if said else ""))
            if case["hidden"]:
                for key in keys_of.get(case["test"], []):
                    got = collected.get(key, [])
                    if outcome is not None and not got:
                        if outcome.get("passed"):
                            problems.append(f"{key}: no value was collected")
                    elif len(got) > 1:
                        problems.append(f"{key}: reported more than once")
                    elif got:
                        problems.append(_judged(key, autograder.golden[key], got[0]))
            problems = [p for p in problems if p]
            passed = not problems
            results.append({"test": case["test"], "hidden": case["hidden"], "points": case["points"],
                            "passed": passed, "message": "\n".join(problems)})
        score_ = sum(r["points"] for r in results if r["passed"])
        questions[question] = {"score": score_, "possible": sum(r["points"] for r in results), "cases": results}
    return questions, tampering


def _judged(key: str, spec: dict, line: dict) -> str | None:
    if "error" in line:  # written by the kernel: never quoted
        return f"{key}: {UNREADABLE_VALUE}"
    if "refused" in line:  # the runner read no further than the key
        return (f"{key}: the value was over {RUNNER_CAPS.value_line_bytes >> 20} MiB as collected (or past the "
                f"{RUNNER_CAPS.values_bytes >> 20} MiB of all values together) and was not read: check its shape")
    try:
        message = judge(spec, line["value"])
    except Exception:  # a malformed record is a wrong value, never a crash of the grader
        return f"{key}: the value could not be read"
    return f"{key}: {message}" if message else None

