"""The golden-value primitive in its three modes, and the judge shared by compare and sealed grading."""

import json

import numpy as np
import pytest
import torch

from helpers import golden
from helpers.golden import GoldenMismatch, encode, expect, expect_between, judge


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


def test_the_sandbox_runner_and_the_contract_name_the_same_things():
    """The runner runs alone in the sandbox and imports nothing of the bundle: its copies of the
    names in helpers.core.contract must be the same strings."""
    from autograder import sandbox_runner
    from helpers.core import contract

    for name in ("CHANNEL_ENV", "GOLDEN_MODE_ENV", "GOLDEN_OUTBOX_ENV", "SUBMISSION_ENV", "ASSETS_ENV"):
        assert getattr(sandbox_runner, name) == getattr(contract, name), name
    assert f'os.environ["{contract.GOLDEN_MODE_ENV}"] = "collect"' in sandbox_runner.TEST_DRIVER
