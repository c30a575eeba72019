"""The golden-value primitive in its three modes, and the judge shared by compare and sealed grading."""

import json
import re

import numpy as np
import pytest
import torch

from helpers import golden
from helpers.golden import GoldenMismatch, encode, expect, expect_between, judge

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


@pytest.fixture
def golden_file(tmp_path, monkeypatch):
    path = tmp_path / "golden_values.json"
    monkeypatch.setenv(golden.FILE_ENV, str(path))
    return path


def record(monkeypatch, fn):
    monkeypatch.setenv(golden.MODE_ENV, "record")
    fn()
    monkeypatch.setenv(golden.MODE_ENV, "compare")


def test_record_then_compare_accepts_float64_and_rejects_a_wrong_value(golden_file, monkeypatch):
    x = torch.linspace(0, 1, 12).reshape(3, 4)

    def test_reference():  # the name ties the key to its test
        expect("demo/out", x, rtol=1e-4, atol=1e-6)

    record(monkeypatch, test_reference)
    stored = json.loads(golden_file.read_text())["values"]["demo/out"]
    assert stored["test"] == "test_reference" and stored["check"] == "close"

    expect("demo/out", x.double() + 1e-7)  # another dtype of the same family, tiny error: passes
    with pytest.raises(GoldenMismatch) as err:
        expect("demo/out", x + 0.01)
    message = str(err.value)
    assert "largest error" in message and "demo/out" in message
    assert "0.0909" not in message  # never reveals reference values (x[0,1] = 1/11)


@pytest.mark.parametrize("bad, words", [
    (torch.zeros(4, 3), "shape (4, 3)"),
    (torch.zeros(3, 4, dtype=torch.long), "dtype int64"),
    (torch.full((3, 4), float("nan")), "non-finite"),
    (None, "NoneType"),
    ("text", "expected a number or array"),
])
def test_compare_explains_what_differs(golden_file, monkeypatch, bad, words):
    def test_reference():
        expect("k", torch.ones(3, 4))

    record(monkeypatch, test_reference)
    with pytest.raises(GoldenMismatch, match=None) as err:
        expect("k", bad)
    assert words in str(err.value)


def test_booleans_compare_exactly(golden_file, monkeypatch):
    mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))

    def test_mask():
        expect("mask", mask)

    record(monkeypatch, test_mask)
    expect("mask", mask.clone())
    with pytest.raises(GoldenMismatch, match="entries differ"):
        expect("mask", mask.T)


def test_between_is_judged_from_the_recorded_bounds(golden_file, monkeypatch):
    def test_property():
        expect_between("err", 0.01, high=0.05)

    record(monkeypatch, test_property)
    expect_between("err", 0.04, high=0.05)
    with pytest.raises(GoldenMismatch, match="at most 0.05"):
        expect_between("err", 0.2, high=0.05)
    # editing the bound at the call site changes nothing: the golden file is the source of truth
    with pytest.raises(GoldenMismatch):
        expect_between("err", 0.2, high=10.0)


def test_record_refuses_a_reference_that_breaks_its_own_property(golden_file, monkeypatch):
    monkeypatch.setenv(golden.MODE_ENV, "record")
    with pytest.raises(GoldenMismatch, match="reference solution fails"):
        expect_between("err", 0.5, high=0.1)


def test_record_refuses_a_key_shared_by_two_tests(golden_file, monkeypatch):
    monkeypatch.setenv(golden.MODE_ENV, "record")

    def test_one():
        expect("shared", 1.0)

    def test_two():
        expect("shared", 1.0)

    test_one()
    with pytest.raises(ValueError, match=r"recorded twice \(by test_one and test_two\)"):
        test_two()


def test_record_refuses_a_key_reused_within_one_test(golden_file, monkeypatch):
    """Sealed grading takes one value per key, so a key in a loop must fail at build time."""
    monkeypatch.setenv(golden.MODE_ENV, "record")

    def test_loop():
        for value in (1.0, 2.0):
            expect("same", value)

    with pytest.raises(ValueError, match="recorded twice"):
        test_loop()


def test_collect_writes_values_and_judges_nothing(tmp_path, monkeypatch):
    outbox = tmp_path / "outbox.jsonl"
    monkeypatch.setenv(golden.MODE_ENV, "collect")
    monkeypatch.setenv(golden.OUTBOX_ENV, str(outbox))
    expect("a", torch.arange(3))
    expect("b", None)  # unencodable values are reported, not raised
    lines = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert lines[0] == {"key": "a", "value": encode(torch.arange(3))}
    assert lines[1]["key"] == "b" and "NoneType" in lines[1]["error"]


def test_compare_without_golden_file_says_hidden_tests_run_in_the_autograder(tmp_path, monkeypatch):
    monkeypatch.setenv(golden.FILE_ENV, str(tmp_path / "missing.json"))
    monkeypatch.setenv(golden.MODE_ENV, "compare")
    with pytest.raises(FileNotFoundError, match="only inside the autograder"):
        expect("k", 1.0)


def test_compare_unknown_key_asks_for_a_rebuild(golden_file, monkeypatch):
    def test_reference():
        expect("known", 1.0)

    record(monkeypatch, test_reference)
    with pytest.raises(GoldenMismatch, match="rebuild"):
        expect("unknown", 1.0)


def test_bad_mode_is_named(monkeypatch):
    monkeypatch.setenv(golden.MODE_ENV, "replay")
    with pytest.raises(RuntimeError, match="replay"):
        expect("k", 1.0)


def test_judge_tolerance_and_matching_infinities():
    spec = {"check": "close", "rtol": 1e-3, "atol": 0.0, "expected": encode(np.array([1.0, np.inf, 100.0]))}
    assert judge(spec, encode(np.array([1.0005, np.inf, 100.05]))) is None
    assert "largest error" in judge(spec, encode(np.array([1.0, np.inf, 100.5])))
    assert "non-finite" in judge(spec, encode(np.array([np.nan, np.inf, 100.0])))


def test_encode_rejects_ragged_and_objects():
    with pytest.raises(TypeError, match="array"):
        encode([[1, 2], [3]])
    with pytest.raises(TypeError, match="dict"):
        encode({"a": 1})


def test_a_single_boolean_is_compared():
    """A 0-d boolean (a property such as "the input is unchanged") must fail when it differs."""
    spec = {"check": "close", "expected": encode(True), "rtol": 0.0, "atol": 0.0}
    assert judge(spec, encode(True)) is None
    assert judge(spec, encode(False)) == "got False, the reference has True"
    grid = {"check": "close", "expected": encode(np.array([True, False])), "rtol": 0.0, "atol": 0.0}
    assert judge(grid, encode(np.array([True, True]))) == "1 of 2 entries differ, first at index (1,)"


def test_a_single_number_is_compared():
    """A 0-d float (a scalar loss tensor) is judged like any array, not refused as unreadable."""
    import torch

    spec = {"check": "close", "expected": encode(torch.tensor(2.5)), "rtol": 1e-5, "atol": 1e-6}
    assert judge(spec, encode(torch.tensor(2.5, dtype=torch.float64))) is None
    assert judge(spec, encode(torch.tensor(2.6))).startswith("the value differs from the reference by 0.1")
    assert "non-finite" in judge(spec, encode(torch.tensor(float("nan"))))


def test_the_runner_library_runs_alone_and_speaks_the_protocol(tmp_path):
    """The runner runs in the sandbox with only its library folder: it must import its protocol and
    the helpers' contract from there (copies), never the bundle's packages (helpers loads torch)."""
    import subprocess
    import sys

    from autograder.sandbox import protocol
    from autograder.sandbox.session import runner_library
    from helpers.core import contract

    lib = runner_library(tmp_path)
    probe = ("import sys, course_runner as r; "
             "print(r.CHANNEL_ENV, r.TEST_DRIVER.is_file(), r.TEST, sorted(m for m in sys.modules if m.split('.')[0] in "
             "('autograder', 'helpers', 'torch')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(lib)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 3)[:3] == [protocol.CHANNEL_ENV, "True", protocol.TEST]
    assert done.stdout.strip().endswith("[]"), done.stdout  # nothing of the bundle, no torch
    driver = (lib / protocol.TEST_DRIVER_FILE).read_text()  # rendered from its template, valid Python
    compile(driver, protocol.TEST_DRIVER_FILE, "exec")
    assert f'os.environ["{contract.GOLDEN_MODE_ENV}"] = "collect"' in driver and "$" not in driver
    assert (lib / "otter" / "__init__.py").read_text().count("class Notebook") == 1


def test_the_runner_hands_each_kernel_the_graders_matplotlib_font_list(tmp_path):
    """A sandbox starts with an empty matplotlib folder: without the grader's font list, importing
    pyplot there scans every system font again (seconds per submission). The runner copies it in,
    and matplotlib reads it rather than writing a new one."""
    import subprocess
    import sys

    from autograder.sandbox.session import runner_library

    lib = runner_library(tmp_path)
    (tmp_path / "tmp").mkdir()
    probe = ("import os, pathlib, course_runner as r; r.private_folders(); "
             "folder = pathlib.Path(os.environ['MPLCONFIGDIR']); "
             "stamps = lambda: {p.name: p.stat().st_mtime_ns for p in folder.glob('fontlist-*.json')}; "
             "before = stamps(); import matplotlib.pyplot; print(len(before), before == stamps())")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(lib), "TMPDIR": str(tmp_path / "tmp"),
                               "HOME": str(tmp_path), "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True"], done.stdout  # one list, read, not rebuilt


# ----------------------------------------------------------------------------- measures of raw values
def causal_like(x: torch.Tensor) -> torch.Tensor:
    """A stand-in for a student's function: a prefix sum (output i uses positions j <= i)."""
    return x.cumsum(-2)


def property_test(f, approximate=lambda x: torch.softmax(x, dim=-1) * 1.01):
    """One hidden test in the form kernel_attention's take: raw outputs in, the judge measures."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 10, 3, generator=g, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 6:] += 1.0
    position = torch.arange(10)[None, :, None]
    expect_between("demo/future_leak", (f(x), f(x2)), measure="max_abs_difference", where=position < 6, high=1e-6)
    exact = torch.softmax(x, dim=-1)  # a reference computed without student code
    expect_between("demo/relative_error", approximate(x), measure="relative_error", reference=exact, high=0.05)


def test_measures_record_the_check_and_its_reference_but_collect_only_raw_values(golden_file, monkeypatch, tmp_path):
    def test_record():
        property_test(causal_like)

    record(monkeypatch, test_record)
    stored = json.loads(golden_file.read_text())["values"]
    leak, error = stored["demo/future_leak"], stored["demo/relative_error"]
    assert leak["measure"] == "max_abs_difference" and leak["shapes"] == [[2, 10, 3], [2, 10, 3]]
    assert leak["where"]["dtype"] == "bool" and "reference" not in leak
    assert error["measure"] == "relative_error" and error["reference"]["shape"] == [2, 10, 3]
    assert error["high"] == 0.05 and error["test"] == "test_record"

    outbox = tmp_path / "outbox.jsonl"
    monkeypatch.setenv(golden.MODE_ENV, "collect")
    monkeypatch.setenv(golden.OUTBOX_ENV, str(outbox))
    property_test(causal_like)
    lines = {line["key"]: line for line in map(json.loads, outbox.read_text().splitlines())}
    assert lines["demo/future_leak"]["value"]["kind"] == "values"  # both raw outputs, nothing computed from them
    assert [item["shape"] for item in lines["demo/future_leak"]["value"]["items"]] == [[2, 10, 3], [2, 10, 3]]
    assert set(lines["demo/relative_error"]) == {"key", "value"}  # the reference is not sent
    # what was collected is judged outside as compare mode judges it: both pass here
    for key, line in lines.items():
        assert judge(stored[key], line["value"]) is None, key


def test_compare_judges_measures_from_the_recorded_check(golden_file, monkeypatch):
    def test_record():
        property_test(causal_like)

    record(monkeypatch, test_record)
    property_test(causal_like)  # the same test passes in compare mode
    leaky = lambda x: x.cumsum(-2).flip(-2)  # noqa: E731 - output i sees positions after i
    with pytest.raises(GoldenMismatch, match=r"demo/future_leak: the largest difference is \d.*must be at most 1e-06"):
        property_test(leaky)
    # a reference or bound given at the call changes nothing: the recorded ones are used
    exact = torch.softmax(torch.randn(2, 10, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64), -1)
    with pytest.raises(GoldenMismatch, match="relative error is 1, must be at most 0.05"):
        expect_between("demo/relative_error", torch.zeros(2, 10, 3), measure="relative_error",
                       reference=torch.zeros(2, 10, 3), high=10.0)
    expect_between("demo/relative_error", exact, measure="relative_error", reference=torch.ones(1), high=0.0)


def test_a_forged_collected_line_cannot_change_the_check_and_never_sees_the_reference(golden_file, monkeypatch):
    def test_record():
        property_test(causal_like)

    record(monkeypatch, test_record)
    stored = json.loads(golden_file.read_text())["values"]
    spec = stored["demo/relative_error"]
    reference = golden._decode(spec["reference"])
    zeros = encode(np.zeros((2, 10, 3)))
    # fields a forger adds to its line are not read: the measure, bounds and reference are the file's
    forged = dict(zeros, measure="value", high=1e9, low=None, reference=zeros, where=encode(np.zeros(1, bool)))
    message = judge(spec, forged)
    assert message == "the relative error is 1, must be at most 0.05"
    for got in (encode(reference * 1.5), encode(-reference), encode(reference[:1]),
                {"kind": "values", "items": [encode(reference * 2), encode(reference)]}, encode(np.full((2, 10, 3), np.nan))):
        message = judge(spec, got)
        assert message, got.get("kind")
        # never the reference: no entry of it appears in what the student is told
        assert not any(f"{v:.3g}" in message or f"{v:.4g}" in message for v in reference.ravel()[:20] if abs(v) > 1e-3)
    # a single array (or a string) where a pair is measured; a pair where one number is
    leak = stored["demo/future_leak"]
    assert judge(leak, zeros) == "expected a pair of arrays"
    assert judge(leak, {"kind": "values", "items": [zeros, {"kind": "str", "value": "x"}]}) == \
        "the second value is not a number or array"
    assert judge({"check": "between", "low": 0, "high": 1}, {"kind": "values", "items": [zeros, zeros]}).startswith(
        "expected a single number")
    # a line whose dtype is not a number type is not read (the grader reports it as unreadable)
    with pytest.raises(ValueError, match="not a number type"):
        judge(leak, {"kind": "values", "items": [dict(zeros, dtype="object"), zeros]})


def test_where_selects_the_entries_a_difference_is_measured_over():
    a = np.zeros((2, 4, 1))
    b = a.copy()
    b[:, 3] = 5.0  # differs only at the last position
    spec = {"check": "between", "high": 1e-6, "low": None, "measure": "max_abs_difference",
            "shapes": [[2, 4, 1], [2, 4, 1]], "where": encode(np.arange(4)[None, :, None] < 3)}
    pair = {"kind": "values", "items": [encode(a), encode(b)]}
    assert judge(spec, pair) is None
    assert judge(dict(spec, where=encode(np.ones((1, 4, 1), bool))), pair) == \
        "the largest difference is 5, must be at most 1e-06"
    assert judge(spec, {"kind": "values", "items": [encode(a), encode(b[:, :3])]}) == \
        "the second value has shape (2, 3, 1) but the reference has shape (2, 4, 1)"


def test_measure_calls_are_checked_at_the_call_in_every_mode(golden_file, monkeypatch):
    x = torch.ones(3)
    with pytest.raises(ValueError, match="unknown measure 'norm'"):
        expect_between("k", x, measure="norm", high=1)
    with pytest.raises(ValueError, match="needs a reference"):
        expect_between("k", x, measure="relative_error", high=1)
    with pytest.raises(ValueError, match="a pair of arrays, or one array and a reference"):
        expect_between("k", x, measure="max_abs_difference", high=1)
    with pytest.raises(ValueError, match="a pair of arrays, or one array and a reference"):
        expect_between("k", (x, x), measure="max_abs_difference", reference=x, high=1)
    with pytest.raises(ValueError, match='measure="value" takes one number'):
        expect_between("k", 0.5, reference=x, high=1)
    monkeypatch.setenv(golden.MODE_ENV, "record")

    def test_mismatch():
        expect_between("bad/shapes", (x, torch.ones(4)), measure="max_abs_difference", high=1)

    with pytest.raises(ValueError, match="different shapes"):
        test_mismatch()

    def test_bad_where():
        expect_between("bad/where", (x, x), measure="max_abs_difference", where=torch.ones(3), high=1)

    with pytest.raises(TypeError, match="where must be a boolean"):
        test_bad_where()

    def test_failing_reference():
        expect_between("bad/reference", x * 2, measure="relative_error", reference=x, high=0.1)

    with pytest.raises(GoldenMismatch, match="reference solution fails its own property check: the relative error is 1"):
        test_failing_reference()


def test_old_golden_files_and_plain_numbers_keep_working():
    """A spec recorded before measures existed, and a number the student's function returned."""
    old = {"check": "between", "low": 0.0, "high": 0.25, "test": "test_old"}
    assert judge(old, encode(0.1)) is None
    assert judge(old, encode(torch.tensor(0.3))) == "got 0.3, must be at most 0.25"
    assert judge(old, encode(float("nan"))) == "got nan, expected a finite number"


def _spec(measure, shapes, low=None, high=None, **parts):
    return {"check": "between", "measure": measure, "low": low, "high": high, "shapes": shapes,
            **{name: encode(value) for name, value in parts.items() if name != "params"}, "params": parts.get("params")}


@pytest.mark.parametrize("measure, arrays, parts, expected", [
    ("mean_difference", [np.full(4, 3.5)], {"reference": np.float64(3.0)}, 0.5),
    ("mean_difference", [np.array([True, False, False, False])], {}, 0.25),
    ("std_difference", [np.array([1.0, 3.0]), np.zeros(2)], {}, 2 ** 0.5),
    ("fraction_beyond", [np.array([0.0, 2.0, -3.0, 1.0])], {"params": {"threshold": 1.5}}, 0.5),
    ("std_of_row_means", [np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])], {}, 0.5),
    ("masked_copy", [np.array([[0.0, 2.0]]), np.array([[True, False]])], {"reference": np.array([[5.0, 2.5]])}, 0.5),
    ("dtype", [np.zeros(2, np.float32)], {"params": {"dtypes": ["float64"]}}, 0.0),
    ("float32_round_off", [np.array([0.5, 0.1])], {}, abs(0.1 - float(np.float32(0.1)))),
    ("length", [np.zeros((2, 3, 7))], {"params": {"axis": 2}}, 7.0),
    ("mismatches", [np.array([1, 2, 3]), np.array([1, 5, 3])], {}, 1.0),
    ("mismatches", [np.array([1, 2, 3]), np.array([1, 2])], {}, 3.0),
    ("distinct_rows", [np.array([[1, 2], [1, 2], [3, 4]])], {}, 2.0),
    ("eos_mismatches", [np.array([[0, 2, 4, 1], [0, 1, 1, 1]])], {"reference": np.array([[0, 2, 4, 3], [0, 1, 1, 2]]),
                                                                 "params": {"eos": 4}}, 1.0),
    ("eos_mismatches", [np.array([[0, 2, 4, 1]])], {"reference": np.array([[0, 2, 4, 3]]),
                                                    "params": {"eos": 4, "after_eos": "eos"}}, 1.0),
    ("greedy_problems", [np.array([[1, 0, 2], [1, 1, 0]]), np.array([[1, 0, 2], [1, 1, 1]]),
                         np.array([[[5.0, 1, 0], [0, 0, 9]], [[0, 5, 0], [7, 7, 0]]])],
     {"params": {"bos": 1, "eos": 2, "tie": 1e-4}}, 0.0),  # row 1 parts from the cached one at a tie
    ("greedy_problems", [np.array([[1, 1, 2]]), np.array([[1, 0, 2]]), np.array([[[5.0, 1, 0], [0, 0, 9]]])],
     {"params": {"bos": 1, "eos": 2, "tie": 1e-4}}, 2.0),  # not greedy, and parts where no tie is
    ("frequency_error", [np.array([[0, 0, 1, 1]])], {"reference": np.log(np.array([[0.5, 0.3, 0.2]])),
                                                     "params": {"top_k": [2]}}, abs(0.5 - 0.625)),
    ("draws_outside", [np.array([[0, 2, 1, 7]])], {"reference": np.log(np.array([[0.5, 0.3, 0.2]])),
                                                   "params": {"top_p": [0.6]}}, 2.0),
])
def test_each_measure_computes_its_number_from_the_raw_values(measure, arrays, parts, expected):
    import autograder.judge.sampling  # noqa: F401 (the grader's judge hands its own measures in as it loads)

    spec = _spec(measure, [list(a.shape) for a in arrays], high=-1.0, **parts)  # every value breaks the bound
    got = {"kind": "values", "items": [encode(a) for a in arrays]} if len(arrays) > 1 else encode(arrays[0])
    message = judge(spec, got)
    assert message.startswith(golden.MEASURES[measure]["says"])
    assert judge(dict(spec, high=expected + 1e-12, low=expected - 1e-12), got) is None, message


def test_a_grader_side_measure_is_computed_only_where_the_grader_hands_it_in(monkeypatch):
    """The helpers name summarization's sampling measures but never import the grader: without the
    grader's module a judge says so; with the module the build names in the environment it computes."""
    import dataclasses
    import sys

    from helpers.core import contract
    from helpers.core.measures import MEASURES

    monkeypatch.setitem(MEASURES, "draws_outside", dataclasses.replace(MEASURES["draws_outside"], compute=None))
    monkeypatch.delitem(sys.modules, "autograder.judge.sampling", raising=False)  # as in a kernel that never loaded it
    monkeypatch.delenv(contract.MEASURE_MODULES_ENV, raising=False)
    spec = _spec("draws_outside", [[1, 4]], high=0.5, reference=np.log(np.array([[0.5, 0.3, 0.2]])),
                 params={"top_p": [0.6]})
    got = encode(np.array([[0, 2, 1, 7]]))
    with pytest.raises(ValueError, match="computed by the grader only"):
        judge(spec, got)
    monkeypatch.setenv(contract.MEASURE_MODULES_ENV, "autograder.judge.sampling")
    assert judge(spec, got).startswith("the draws outside the distribution are 2")


def test_the_sampling_filter_follows_the_text_temperature_then_top_k_then_top_p():
    from autograder.judge.sampling import filtered_distribution

    logits = np.log([0.1, 0.4, 0.2, 0.3])
    assert np.allclose(filtered_distribution(logits, 1.0, None, None), [0.1, 0.4, 0.2, 0.3])
    assert np.allclose(filtered_distribution(logits, 1.0, 2, None), [0, 4 / 7, 0, 3 / 7])
    assert np.allclose(filtered_distribution(logits, 1.0, None, 0.5), [0, 4 / 7, 0, 3 / 7])  # 0.4 < 0.5: 0.3 joins
    hot = filtered_distribution(logits, 2.0, None, None)
    assert np.allclose(hot, np.sqrt([0.1, 0.4, 0.2, 0.3]) / np.sqrt([0.1, 0.4, 0.2, 0.3]).sum())


def test_measures_with_params_text_and_free_shapes_record_and_judge(golden_file, monkeypatch, tmp_path):
    def test_record():
        x = torch.full((3, 4), 2.0, dtype=torch.float64)
        expect_between("demo/noise_std", x + torch.tensor([1.0, -1.0]).repeat(6).reshape(3, 4), measure="std_difference",
                       reference=2.0, low=0.9, high=1.1)  # a scalar reference broadcast to the values
        expect_between("demo/tails", x + 3.0, measure="fraction_beyond", reference=x[:1], params={"threshold": 1.0},
                       low=1.0)
        expect_between("demo/runs_differ", (torch.tensor([0, 1, 2]), torch.tensor([0, 1])), measure="mismatches", low=1)
        expect_between("demo/spans", json.dumps([["ab", "b!"]] * 2), measure="span_problems",
                       params={"documents": ["ab"], "block_sizes": [2], "repeats": 2}, low=2)

    record(monkeypatch, test_record)
    stored = json.loads(golden_file.read_text())["values"]
    assert stored["demo/tails"]["params"] == {"threshold": 1.0} and stored["demo/tails"]["reference"]["shape"] == [1, 4]
    assert stored["demo/noise_std"]["reference"]["shape"] == []
    test_record()  # compare mode passes the same values
    # a forged line cannot bring its own params: the file's are used
    assert judge(stored["demo/tails"], dict(encode(np.full((3, 4), 2.0)), params={"threshold": -1})) == \
        "the fraction beyond the threshold is 0, must be at least 1"
    assert judge(stored["demo/spans"], encode(np.zeros(3))) == "value is not a string"
    assert judge(stored["demo/spans"], encode("not json")) == "the examples could not be read"
    with pytest.raises(ValueError, match="needs params threshold"):
        expect_between("k", torch.ones(2), measure="fraction_beyond", high=1)
    with pytest.raises(ValueError, match="takes no reference"):
        expect_between("k", torch.ones(2), measure="dtype", reference=torch.ones(2), params={"dtypes": []}, low=1)
    monkeypatch.setenv(golden.MODE_ENV, "record")

    def test_bad_reference():
        expect_between("bad/reference", torch.ones(3, 4), measure="mean_difference", reference=torch.ones(2), high=1)

    with pytest.raises(ValueError, match=r"reference of shape \(2,\) does not broadcast"):
        test_bad_reference()


def test_golden_references_and_the_graders_own_toy_model(golden_file, monkeypatch):
    from helpers.summarization import ToyDecoderModel

    model, src = ToyDecoderModel(vocab_size=5, seed=0, sharpness=0.7), torch.arange(4)[:, None].repeat(1, 2)
    tokens = torch.zeros(4, 1, dtype=torch.long)
    for _ in range(3):
        tokens = torch.cat([tokens, model(src, tokens)[:, -1].argmax(-1, keepdim=True)], 1)
    params = {"model": {"vocab_size": 5, "seed": 0, "sharpness": 0.7}, "top_k": 1, "bos": 0, "eos": 4, "max_len": 3}

    def test_record(sent):
        expect_between("demo/greedy", sent, measure="eos_mismatches", golden=True, params={"eos": 4}, high=0)
        expect_between("demo/top_1", sent, measure="toy_top_k_violations", reference=src, params=params, high=0)

    record(monkeypatch, lambda: test_record(tokens))
    stored = json.loads(golden_file.read_text())["values"]
    assert golden._decode(stored["demo/greedy"]["reference"]).tolist() == tokens.tolist()  # the reference's own value
    test_record(tokens)
    wrong = tokens.clone()
    wrong[:, 1] = (wrong[:, 1] + 1) % 5  # every row's first token is no longer the most likely
    with pytest.raises(GoldenMismatch, match="the rows that differ are 4"):
        test_record(wrong)
    assert re.fullmatch(r"the tokens that break the rules are [4-9], must be at most 0", judge(stored["demo/top_1"], encode(wrong)))
    with pytest.raises(ValueError, match="golden=True takes one array and no reference"):
        expect_between("k", tokens, measure="eos_mismatches", golden=True, reference=tokens, params={"eos": 4}, high=0)


def test_arguments_changed_by_a_call_are_caught_in_every_mode(golden_file, monkeypatch, tmp_path):
    from helpers.golden import expect_arguments_unchanged

    def adds_a_new_tensor(x, extra):
        return x + extra["bias"]

    def adds_in_place(x, extra):
        x += extra["bias"]  # the caller's x changes
        return x

    def make():  # a -inf mask entry, and a numpy array inside a dict: all are compared
        return torch.tensor([[1.0, float("-inf")], [2.0, 3.0]]), {"bias": torch.ones(2, 2), "table": np.arange(3.0)}

    def test_reference():
        x, extra = make()
        out = expect_arguments_unchanged("calls/arguments_changed_by_the_call", adds_a_new_tensor, x, extra)
        assert torch.equal(out, adds_a_new_tensor(*make()))  # what the call returned is handed back

    record(monkeypatch, test_reference)
    assert json.loads(golden_file.read_text())["values"]["calls/arguments_changed_by_the_call"]["measure"] == "mismatches"
    test_reference()  # compare mode: the same correct function passes
    with pytest.raises(GoldenMismatch, match="entries that differ are 1"):  # one argument changed (-inf stays -inf)
        expect_arguments_unchanged("calls/arguments_changed_by_the_call", adds_in_place, *make())
    # sealed grading: both copies are collected and judged outside, where the count is made
    outbox = tmp_path / "outbox.jsonl"
    monkeypatch.setenv(golden.MODE_ENV, "collect")
    monkeypatch.setenv(golden.OUTBOX_ENV, str(outbox))
    expect_arguments_unchanged("calls/arguments_changed_by_the_call", adds_in_place, *make())
    collected = json.loads(outbox.read_text().splitlines()[-1])
    spec = json.loads(golden_file.read_text())["values"]["calls/arguments_changed_by_the_call"]
    assert "entries that differ are 1" in judge(spec, collected["value"])
    assert len(collected["value"]["items"][0]["data"]) == 3  # a number per tensor or array, whatever its size
    def reshapes_in_place(x, extra):  # every value kept in its order, the shape changed: caught too
        return x.unsqueeze_(0)[0] + extra["bias"]

    monkeypatch.setenv(golden.MODE_ENV, "compare")
    with pytest.raises(GoldenMismatch, match="entries that differ"):
        expect_arguments_unchanged("calls/arguments_changed_by_the_call", reshapes_in_place, *make())
    with pytest.raises(TypeError, match="none of the arguments is a tensor"):
        expect_arguments_unchanged("calls/nothing", len, "text")


def test_the_libraries_a_measure_imports_are_named_and_loaded_beside_the_first_sandbox(tmp_path, monkeypatch):
    """course grade's pool imports what the judge's measures will (summarization's decoding measure
    imports torch, about 2 s) while its first sandbox runs, not after it; a module that cannot be
    imported is left for the judge to report."""
    import sys
    import threading

    from autograder.sandbox.session import warm_up
    from helpers.core.measures import modules_for

    specs = [{"check": "close"}, {"measure": "value"}, {"measure": "toy_top_k_violations"},
             {"measure": "span_problems"}, {"measure": "toy_top_k_violations"}, {"measure": "max_abs_difference"}]
    assert modules_for(specs) == ["torch", "helpers.summarization.decoding", "helpers.pretraining"]
    assert modules_for([{"measure": "max_abs_difference"}, {"check": "between"}]) == []
    (tmp_path / "warm_probe_module.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, "warm_probe_module", raising=False)
    warm_up(["no_such_module_anywhere", "warm_probe_module"])
    for thread in [t for t in threading.enumerate() if t.name == "judge-warm-up"]:
        thread.join(timeout=60)
    assert sys.modules["warm_probe_module"].LOADED
