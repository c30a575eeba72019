"""Only the grader's own words reach a reader (autograder.judge.quoting): every field a sandbox's kernel
can write carries a marker, and no row, feedback file, results.csv/json, Gradescope result, report
or status shows it. Also: what root reads from a submission or a sandbox is bounded, and
results.csv evaluates nothing in a spreadsheet."""

import csv
import json
import zipfile
from pathlib import Path

import pytest

from autograder.autograder_zip import Autograder
from autograder.platforms.gradescope import gradescope_results
from autograder.judge.verdicts import run_status, verdict
from autograder.judge.quoting import (exception_name, known_outcomes, parameters_by_test, public_check_wording,
                                      public_check_wordings, spreadsheet_safe)
from autograder.grade.results import write_reports
from autograder.limits import SandboxLimits
from autograder.sandbox.seal import SandboxRun
from helpers.core.golden import encode

#: What a kernel writes wherever it can; no reader may see it.
MARK = "KERNELMARK"
HIDDEN_SOURCE = f"def test_hidden(f):\n    expect('q1/out', f(3))  # {MARK}"

SOURCES = [{"question": "q1", "source": "from otter.test_files import test_case\n\n"
            "@test_case(points=0)\ndef test_public(f):\n    assert f(1) == 2\n\n"
            "@test_case(points=2, hidden=True)\n" + HIDDEN_SOURCE + "\n"}]
AUTOGRADER = Autograder(
    zip_path=Path("a.zip"), name="a",
    tests={"q1": [{"test": "test_public", "points": 0, "hidden": False},
                  {"test": "test_hidden", "points": 2, "hidden": True}],
           "q2": [{"test": "test_other", "points": 1, "hidden": True}]},
    sources=SOURCES,
    golden={"q1/out": {"test": "test_hidden", "check": "close", "expected": encode([1.0, 2.0]), "rtol": 1e-5,
                       "atol": 1e-6},
            "q1/shape": {"test": "test_hidden", "check": "close", "expected": encode([[1.0, 2.0]]), "rtol": 1e-5,
                         "atol": 1e-6},
            "q2/other": {"test": "test_other", "check": "close", "expected": encode(1.0), "rtol": 0, "atol": 1e-6}},
    assets=Path("."))


def hostile_run() -> SandboxRun:
    """Every field of every message the kernel could have shaped after the tests went in."""
    values = [
        {"key": "q1/out", "error": HIDDEN_SOURCE},  # an "error" record, as expect's collect writes it
        {"key": "q1/shape", "value": {"kind": "array", "dtype": "float64", "shape": [0, 75, 69, 82, 78, 69, 76],
                                      "data": []}},  # a shape that spells text
        {"key": f"q9/{MARK}", "value": encode(1.0)},  # a key the golden file does not have
        {"key": "q2/other", "value": {"kind": "str", "value": MARK}},
    ]
    return SandboxRun(messages=[
        {"event": "cells_done", "first_error": None, "kernel_died": None},
        {"event": "test", "question": "q1", "test": "test_public", "passed": False,
         "error": f"AssertionError: {HIDDEN_SOURCE}", "values": []},
        {"event": "test", "question": "q1", "test": "test_hidden", "passed": False,
         "error": f"the notebook does not define {MARK}", "values": values},
        {"event": "test", "question": "q1", "test": HIDDEN_SOURCE, "passed": True, "error": "", "values": []},
        {"event": "test", "question": "q1", "test": HIDDEN_SOURCE, "passed": True, "error": "", "values": []},
        {"event": "test", "question": f"q1 {MARK}", "test": None, "passed": False,
         "error": f"MemoryError: {MARK}", "values": []},
        {"event": "test", "question": "q2", "test": "test_other", "passed": False,
         "error": f"the notebook's kernel exited with code 1 ({MARK}) during the tests", "values": []},
        {"event": "test", "question": "q2", "test": "test_other", "passed": False,
         "error": f"ValueError: {MARK}", "values": []},
        {"event": "runner_error", "error": f"KeyError: {MARK}"},
    ])


def row_of(result: dict, name: str = "alice.ipynb") -> dict:
    row = {"submission": name, "file": name, "sha256": "0", "assignment": "a", "autograder_sha256": "1", **result}
    row["scores"] = {q: v["score"] for q, v in sorted(row["questions"].items())}
    row["total"] = sum(row["scores"].values())
    row["possible"] = sum(v["possible"] for v in row["questions"].values())
    row.update(seconds=1.0, sealed=True, limits={}, graded_at="now", sandbox="test")
    return row


def test_no_field_the_kernel_wrote_reaches_any_reader(tmp_path):
    result = verdict(hostile_run(), AUTOGRADER, SandboxLimits())
    status, message = run_status(hostile_run(), SandboxLimits())
    write_reports([row_of(result)], tmp_path)
    shown = {"row": json.dumps(result), "status": message,
             "gradescope": json.dumps(gradescope_results({**result, "sandbox": "test"}, 1.0))}
    shown.update({p.name: p.read_text() for p in tmp_path.rglob("*") if p.is_file()})
    for where, text in shown.items():
        assert MARK not in text and "def test_" not in text and "expect(" not in text, (where, text[:3000])
    assert result["status"] == "tampered"  # the forged and repeated outcomes say so, without their names
    assert "2 outcome(s) of tests this assignment does not have" in result["message"]
    assert "test test_other was reported 2 times" in result["message"]  # a known name is the grader's own
    cases = {c["test"]: c for c in result["questions"]["q1"]["cases"]}
    assert "q1/out: the value is not a tensor, array, number or string" in cases["test_hidden"]["message"]
    assert "q1/shape: shape a 7-d shape but the reference has shape (1, 2)" in cases["test_hidden"]["message"]
    assert "raised an exception" in cases["test_hidden"]["message"]  # the missing name is not the test's parameter


def test_a_failed_public_check_says_its_message_in_its_own_words_and_nothing_the_kernel_added():
    sources = [{"question": "q1", "source": "@test_case(points=0)\ndef test_public(f):\n"
                "    assert f(1).shape == (4,), f\"expected shape (4,), got {tuple(f(1).shape)}\"\n"
                "    assert f(2) > 0, 'f must be positive for a positive input'\n\n"
                "@test_case(points=2, hidden=True)\ndef test_hidden(f):\n"
                f"    assert f(3) == 9, 'the hidden words {MARK} stay hidden'\n"}]
    wordings = public_check_wordings(sources, {"test_public"})
    assert set(wordings) == {"test_public"}  # the hidden test's strings are never read
    # a value the check fills in is shown as "…": the kernel could have put anything there
    assert public_check_wording(f"AssertionError: expected shape (4,), got {MARK}", wordings["test_public"]) == \
        "expected shape (4,), got …"
    assert public_check_wording("AssertionError: f must be positive for a positive input", wordings["test_public"]) == \
        "f must be positive for a positive input"
    for forged in (f"AssertionError: the hidden words {MARK} stay hidden", f"AssertionError: {HIDDEN_SOURCE}",
                   "AssertionError: f must be positive for a positive input, and " + MARK):
        assert public_check_wording(forged, wordings["test_public"]) is None
    # through the verdict: the public case's message, the hidden case's name only
    autograder = Autograder(zip_path=Path("a.zip"), name="a", sources=sources, golden={}, assets=Path("."),
                            tests={"q1": [{"test": "test_public", "points": 0, "hidden": False},
                                          {"test": "test_hidden", "points": 2, "hidden": True}]})
    run = SandboxRun(messages=[
        {"event": "cells_done", "first_error": None, "kernel_died": None},
        {"event": "test", "question": "q1", "test": "test_public", "passed": False,
         "error": "AssertionError: expected shape (4,), got (3,)", "values": []},
        {"event": "test", "question": "q1", "test": "test_hidden", "passed": False,
         "error": "AssertionError: expected shape (4,), got (3,)", "values": []}, {"event": "done"}])
    cases = {c["test"]: c["message"] for c in verdict(run, autograder, SandboxLimits())["questions"]["q1"]["cases"]}
    assert cases == {"test_public": "raised AssertionError: expected shape (4,), got …",
                     "test_hidden": "raised AssertionError"}


def test_the_graders_own_words_and_the_tests_own_parameters_are_shown():
    parameters = parameters_by_test(SOURCES)
    assert parameters == {"test_public": {"f"}, "test_hidden": {"f"}}
    assert exception_name("the notebook does not define f", parameters["test_hidden"]) == "the notebook does not define f"
    assert exception_name("the notebook does not define g", parameters["test_hidden"]) == "an exception"
    assert exception_name("the notebook's kernel was killed by signal 9 (SIGKILL) during the tests") .endswith("tests")
    assert exception_name("the notebook's kernel was killed by signal 9 (HIDDEN) during the tests") == "an exception"
    assert exception_name("the notebook's kernel exited with code 12345678 (os._exit or a crash in a cell?) during "
                          "the tests") == "an exception"  # digits can carry text too
    assert exception_name("numpy.linalg.LinAlgError: x") == "an exception"
    assert exception_name("ZeroDivisionError: x") == "ZeroDivisionError"
    kept, unknown = known_outcomes([{"test": "a"}, {"test": "b"}, {"test": None}, {"test": 3}], {"a"})
    assert [m["test"] for m in kept] == ["a", None] and unknown == 2


def test_a_students_own_cell_error_is_shown_cut_short():
    long_text = "x" * 5000
    run = SandboxRun(messages=[{"event": "cells_done", "kernel_died": None,
                                "first_error": {"cell": "y = f(" + "z" * 500, "ename": "ValueError", "evalue": long_text}}])
    status, message = run_status(run, SandboxLimits())
    assert status == "error" and message.startswith("the cell starting 'y = f(zzz")
    assert "ValueError: xxx" in message and len(message) < 400


@pytest.mark.parametrize("name", ["=2+5.ipynb", "@SUM(1+1).ipynb", '=HYPERLINK("x","y").ipynb',
                                  "+1.ipynb", "-1.ipynb", "\tx.ipynb", "\rx.ipynb"])
def test_results_csv_evaluates_nothing_in_a_spreadsheet(tmp_path, name):
    result = verdict(SandboxRun(messages=[{"event": "cells_done"}, {"event": "done"}]), AUTOGRADER, SandboxLimits())
    row = row_of(result, name)
    row["message"] = "=1+1"
    write_reports([row], tmp_path)
    cells = [cell for line in csv.reader(open(tmp_path / "results.csv", newline="")) for cell in line]
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in cells), cells
    assert "'" + name in cells and "'=1+1" in cells
    assert spreadsheet_safe(-3) == -3 and spreadsheet_safe("alice") == "alice"  # numbers stay numbers


def test_a_zip_that_lies_about_its_size_is_refused_without_inflating_it(tmp_path):
    """A 1,000-byte entry in the header and gigabytes inside: inflated a chunk at a time, stopped
    at the ratio cap; root's memory never holds more than the cap."""
    import resource

    from autograder.grade.submissions import InvalidSubmission, read_submission_notebook

    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("bomb.ipynb", "w", force_zip64=True) as entry:
            chunk = b" " * (1 << 20)
            for _ in range(300):  # 300 MB of spaces: about 300 KB compressed
                entry.write(chunk)
    data = bytearray(bomb.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # the headers' uncompressed size
        at = data.find(signature)
        data[at + offset:at + offset + 4] = (1000).to_bytes(4, "little")
    bomb.write_bytes(bytes(data))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InvalidSubmission, match="inflates|not a valid zip|CRC|Bad"):
        read_submission_notebook(bomb)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64, grown_mb


def test_a_runner_reads_no_outbox_line_past_its_cap(tmp_path, monkeypatch):
    """A line over the cap is skipped unread but for its key; deep nesting is dropped in the sandbox."""
    from autograder.sandbox import runner as sandbox_runner
    from autograder.limits import RUNNER_CAPS, runner_caps
    from autograder.sandbox import protocol

    MAX_VALUE_LINE_BYTES = RUNNER_CAPS.value_line_bytes

    outbox = tmp_path / "outbox.jsonl"
    monkeypatch.setattr(sandbox_runner, "OUTBOX", outbox)
    huge = '{"key": "q1/out", "value": {"kind": "array", "data": [' + "1," * MAX_VALUE_LINE_BYTES + '1]}}\n'
    nested = '{"key": "q1/deep", "value": ' + "[" * 50 + "]" * 50 + "}\n"
    lists = '{"key": "q1/lists", "value": {"kind": "array", "dtype": "float64", "shape": [3], "data": [[], [], []]}}\n'
    honest = json.dumps({"key": "q1/ok", "value": encode([1.0, 2.0])}) + "\n"
    outbox.write_text(huge + nested + lists + honest + "not json\n" + json.dumps({"key": "x", "other": 1}) + "\n")
    runner = sandbox_runner.Runner(channel=None)
    runner.job = protocol.job("notebook.ipynb", False, runner_caps())
    values = runner.new_values()
    assert values == [{"key": "q1/out", "refused": len(huge)}, {"key": "q1/ok", "value": encode([1.0, 2.0])}]
    result = verdict(SandboxRun(messages=[{"event": "cells_done"}, {"event": "test", "question": "q1",
                                          "test": "test_hidden", "passed": True, "error": "", "values": values},
                                         {"event": "done"}]), AUTOGRADER, SandboxLimits())
    message = {c["test"]: c for c in result["questions"]["q1"]["cases"]}["test_hidden"]["message"]
    assert f"q1/out: the value was over {MAX_VALUE_LINE_BYTES >> 20} MiB as collected" in message


def test_the_graders_channel_reader_holds_no_more_than_its_cap():
    import os

    from autograder.sandbox.streams import Lines

    r, w = os.pipe()
    reader = Lines(os.fdopen(r, "rb"), cap=1 << 20)
    with os.fdopen(w, "wb") as out:
        out.write(b'{"event": "done"}\n' + b"[" * (8 << 20) + b"\n" + b'{"event": "late"}\n')
    reader.join(10)
    assert [m["event"] for m in reader.take()] == ["done"] and reader.overflow


def test_the_graders_channel_reader_wakes_the_watch_when_the_cells_ran_and_at_the_end():
    """The watch sends the tests in as soon as the cells ran: that message wakes it, and so does the
    channel's end (then it waits for the sandbox's exit instead). Other messages do not, so a
    sandbox that floods its channel cannot make the watch spin."""
    import os
    import threading
    import time

    from autograder.sandbox.streams import Lines

    def waited(reader, bound):
        started = time.monotonic()
        reader.wait(bound)
        return time.monotonic() - started

    r, w = os.pipe()
    reader = Lines(os.fdopen(r, "rb"), cap=1 << 20, wake_for={"cells_done"})
    out = os.fdopen(w, "wb")
    out.write(b'{"event": "test"}\n' * 50)
    out.flush()
    assert waited(reader, 0.5) >= 0.4, "a message the watch does not act on woke it"
    threading.Timer(0.2, lambda: (out.write(b'{"event": "cells_done"}\n'), out.flush())).start()
    assert waited(reader, 60) < 30, "the cells' end did not wake the watch"
    assert [m["event"] for m in reader.take()] == ["test"] * 50 + ["cells_done"] and not reader.ended
    out.write(b'{"event": "cells_done"}\n')
    out.flush()
    time.sleep(0.2)  # arrived before the watch waits: the wait returns at once
    assert waited(reader, 60) < 30
    out.close()
    assert waited(reader, 60) < 30, "the channel's end did not wake the watch"
    assert reader.ended and [m["event"] for m in reader.take()] == ["cells_done"]
