"""Golden values: how hidden tests compare a student's results with the reference solution's.

A hidden test calls the student's function on a fixed, seeded input and hands the result to
:func:`expect` (or a property of it to :func:`expect_between`). The test code is identical
everywhere; what the call does depends on ``COURSE_GOLDEN_MODE``:

``record``
    ``course build`` runs the master (reference solution) and stores each value, with its check
    and the name of the test that produced it, in the golden file (``COURSE_GOLDEN_FILE``). The
    file ships inside the autograder zip only, never to students.
``compare`` (the default)
    Inside otter's own runs, where the tests share the student's kernel (``otter run``, ``course grade
    --unsafe``, nbgrader's autograding): load the golden file and raise
    :class:`GoldenMismatch` with a message that says *what* differed (shape, dtype, largest
    error), never the expected value.
``collect``
    Sealed grading: append the student's value to an outbox (``COURSE_GOLDEN_OUTBOX``) and judge
    nothing; the grader calls :func:`judge` outside the student's process, where student code
    cannot reach.

The golden file, not the call site, is the source of truth for every check: a student who edits
a tolerance in their own kernel changes nothing.

What a check can be trusted with, in sealed grading (the hidden tests run in the student's kernel,
which can patch torch, numpy and these helpers before they run):

* **Golden comparison** (:func:`expect`): the student's value against the reference's, recorded at
  build. Nothing in the kernel knows the expected value, so no patch can produce it.
* **A measure of raw values** (:func:`expect_between` with ``measure=``): the test hands over what
  the student's functions returned, and the judge does the arithmetic (:data:`MEASURES`, in
  :mod:`helpers.core.measures`: the largest difference between two outputs, the relative error
  against a ``reference`` the test computes without student code, a mean, a spread, the frequencies
  of sampled tokens...) on the values, with the reference, the ``where`` mask, the ``params`` and the
  bounds read from the golden file only. Patching ``norm``, ``abs``, ``max`` or ``item`` in the
  kernel changes nothing: a number the test computed inside from the student's values is never
  sent. ``measure="value"`` (the default) takes a single number as it is: only for a number the
  student's function itself returned (a loss, an accuracy).
* **A measurement only possible inside** (the largest tensor a call builds, found by hooking
  torch): as honest as the kernel, so never alone: the same test also compares that call's output
  with a golden value, and a submission that implements nothing cannot pass it.

What no check can do: the values are *sent* from the kernel, so a notebook that patches this
module can send any value under any key. A golden comparison still holds: the notebook would have
to know the reference's result. A property holds only as far as the values it accepts are hard to
make: two equal arrays differ nowhere, and a reference the test computes in the kernel can be read
there and sent back. A property gives its points to anything that satisfies it (exact softmax
attention has a small approximation error, a prefix sum is causal), so the points for implementing
a function rest on golden values. docs/instructors/security.md says which check is judged how.

nbgrader has no place for a file that students never receive, so there each hidden test carries
its own golden values inside its hidden region and hands them to :func:`use_golden` first; compare
mode reads them before the file.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .contract import GOLDEN_FILE_ENV, GOLDEN_FILENAME, GOLDEN_MODE_ENV, GOLDEN_OUTBOX_ENV
from .measures import MEASURES, bounds as _bounds, check_call, decode as _decode_array, judge_measure, measure_parts, shown_shape

__all__ = [
    "expect",
    "expect_between",
    "expect_arguments_unchanged",
    "MEASURES",
    "use_golden",
    "golden_blob",
    "GoldenMismatch",
    "judge",
    "encode",
    "load_golden",
    "GOLDEN_FILENAME",
    "MODE_ENV",
    "FILE_ENV",
    "OUTBOX_ENV",
]

MODE_ENV = GOLDEN_MODE_ENV
FILE_ENV = GOLDEN_FILE_ENV
OUTBOX_ENV = GOLDEN_OUTBOX_ENV
FORMAT_VERSION = 1
_MODES = ("record", "compare", "collect")


class GoldenMismatch(AssertionError):
    """A value differs from the reference (or breaks its recorded property)."""


# ----------------------------------------------------------------------------- encoding
def encode(value: Any) -> dict:
    """Turn a tensor, array, number, bool, (nested) list or string into a JSON-able record.

    Raises
    ------
    TypeError
        For anything else (``None``, a model, a ragged list...), with the type in the message.
    """
    if isinstance(value, str):
        return {"kind": "str", "value": value}
    try:
        import torch

        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            if value.dtype in (torch.bfloat16, torch.float16):
                value = value.float()
            value = value.numpy()
    except ImportError:  # pragma: no cover - torch is a dependency, but encode works without it
        pass
    if value is None or not isinstance(value, (np.ndarray, np.generic, bool, int, float, list, tuple)):
        raise TypeError(f"expected a tensor, array, number or string, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except ValueError as err:  # ragged nested lists
        raise TypeError(f"could not turn the value into an array: {err}") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"expected numbers or booleans, got an array of dtype {arr.dtype}")
    return {"kind": "array", "dtype": str(arr.dtype), "shape": list(arr.shape), "data": arr.ravel().tolist()}


def _decode(record: dict):
    if record["kind"] == "str":
        return record["value"]
    return _decode_array(record)


_KIND_NAMES = {"b": "boolean", "i": "integer", "u": "integer", "f": "floating-point"}


# ----------------------------------------------------------------------------- judging
def judge(spec: dict, got: dict) -> str | None:
    """Judge an encoded value against a recorded check.

    Parameters
    ----------
    spec : dict
        One entry of the golden file: ``{"check": "close", "expected", "rtol", "atol"}`` or
        ``{"check": "between", "low", "high"}``, the latter with ``"measure"``, ``"shapes"`` and
        optionally ``"reference"`` and ``"where"`` when a measure of raw values is checked. Every
        part of the check comes from here, never from ``got``.
    got : dict
        The student's value, as made by :func:`encode`, or ``{"kind": "values", "items": [...]}``
        for the pair of arrays a difference is measured between.

    Returns
    -------
    str or None
        ``None`` when the value passes, otherwise a message for the student that never contains
        the expected value.
    """
    if spec["check"] == "between":
        if spec.get("measure", "value") != "value":
            return judge_measure(spec, got)
        return _judge_between(spec, got)
    if spec["check"] != "close":
        raise ValueError(f"unknown check {spec['check']!r} in golden file")
    expected = spec["expected"]
    if expected["kind"] == "str" or got["kind"] == "str":
        if got["kind"] != expected["kind"]:
            return f"expected a {'string' if expected['kind'] == 'str' else 'number or array'}"
        return None if got["value"] == expected["value"] else "the string differs from the reference"
    exp, val = _decode(expected), _decode(got)
    if val.dtype.kind != exp.dtype.kind and {val.dtype.kind, exp.dtype.kind} != {"i", "u"}:
        return f"dtype {val.dtype} where a {_KIND_NAMES[exp.dtype.kind]} result was expected"
    if val.shape != exp.shape:
        return f"shape {shown_shape(val.shape)} but the reference has shape {tuple(exp.shape)}"
    if exp.dtype.kind == "b":
        mismatch = np.atleast_1d(val != exp)  # a single bool is 0-d: argwhere of it finds nothing
        if not mismatch.any():
            return None
        if val.ndim == 0:
            return f"got {bool(val)}, the reference has {bool(exp)}"
        first = tuple(int(i) for i in np.argwhere(mismatch)[0])
        return f"{int(mismatch.sum())} of {val.size} entries differ, first at index {first}"
    # At least 1-d: arithmetic on 0-d arrays gives numpy scalars, which take no index assignment.
    val64, exp64 = np.atleast_1d(val.astype(np.float64)), np.atleast_1d(exp.astype(np.float64))
    bad = ~np.isfinite(val64) & np.isfinite(exp64)
    if bad.any():
        return f"non-finite value (nan or inf) at index {tuple(np.argwhere(bad)[0])}"
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite
        err = np.abs(val64 - exp64)
    err[~np.isfinite(exp64) & (val64 == exp64)] = 0.0  # matching infinities
    excess = err - (spec["atol"] + spec["rtol"] * np.abs(exp64))
    if val64.size == 0 or not (excess > 0).any():
        return None
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    if val.ndim == 0:
        return (f"the value differs from the reference by {err[worst]:.3g} "
                f"(tolerance rtol={spec['rtol']:g}, atol={spec['atol']:g})")
    return (
        f"values differ from the reference: largest error {err[worst]:.3g} at index "
        f"{tuple(int(i) for i in worst)} (tolerance rtol={spec['rtol']:g}, atol={spec['atol']:g})"
    )


def _judge_between(spec: dict, got: dict) -> str | None:
    if got["kind"] != "array" or int(np.prod(got["shape"])) != 1:
        return f"expected a single number, got shape {shown_shape(got.get('shape', ()))}"
    return _bounds(float(_decode(got).ravel()[0]), spec, "got")


# ----------------------------------------------------------------------------- modes
def expect(key: str, value: Any, *, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Check that ``value`` matches the reference solution's value recorded under ``key``.

    Parameters
    ----------
    key : str
        Unique name of the value within the assignment, e.g. ``"softmax/out_masked"``.
    value : tensor, array, number, bool or str
        The student's result. Shape and dtype family (float / int / bool) must match.
    rtol, atol : float
        Tolerance as in ``numpy.allclose``: choose it so every correct implementation passes
        (float32 or float64, einsum or matmul) and each common bug fails.
    """
    _dispatch(key, value, {"check": "close", "rtol": float(rtol), "atol": float(atol)})


def expect_between(key: str, value: Any, *, low: float | None = None, high: float | None = None,
                   measure: str = "value", reference: Any = None, where: Any = None,
                   params: dict | None = None, golden: bool = False) -> None:
    """Check a property: a measure of ``value`` must lie in ``[low, high]`` (either bound may be None).

    Parameters
    ----------
    key : str
        Unique name of the check within the assignment.
    value : number, tensor or array, or a tuple of them
        Raw values: what the student's functions returned, untouched. Never a number the test
        computed from them inside the kernel (a norm, a maximum, ``.item()``): a notebook can patch
        that arithmetic. Hand over the arrays and name a ``measure``: the judge computes it. A
        tuple holds several arrays (two calls' outputs); a list is one array.
    low, high : float
        The bounds, recorded at build; the call site's values count only there.
    measure : str
        What the judge computes from ``value``: ``"value"`` (the default) takes one number as it
        is, only for a number the student's function returned itself (a loss, an accuracy), e.g.
        ``expect_between("loss", loss, high=0.4)``; every other name is a measure of
        :data:`MEASURES` (documented in :mod:`helpers.core.measures`), e.g. ``"max_abs_difference"``
        of a pair ``(a, b)`` or of one array and ``reference``, ``"relative_error"`` against
        ``reference``, ``"mean_difference"``, ``"std_difference"``, ``"mismatches"``.
    reference : tensor or array, optional
        A value the test computes *without* student code (e.g. exact softmax attention by torch on
        the test's inputs). Recorded at build, where it is real; in grading, the recorded one is
        used (in collect mode it is not even sent), so patching torch cannot change it.
    where : boolean tensor or array, optional
        Which entries the measure looks at (broadcast against the value's shape), built without
        student code, e.g. the positions before 6: ``(torch.arange(10) < 6)[None, :, None]``.
        Recorded like ``reference``.
    params : dict, optional
        Settings of the measure (a threshold, an eos id, a document), JSON numbers and strings.
        Recorded like ``reference``.
    golden : bool
        The reference is the reference solution's own ``value``, recorded at build instead of a
        ``reference`` the test computes (which a notebook could read and send back): for outputs
        that a measure compares loosely, e.g. decoded tokens up to eos, whose lengths may differ.

    Shapes must match the reference solution's (recorded at build) unless the measure says
    otherwise. Messages give the measured number and the bound, never the reference. Example: a
    change at positions 6.. must not reach the outputs before 6::

        out, out2 = f(Q, K, V), f(Q2, K2, V2)
        expect_between("causal/future_leak", (out, out2), measure="max_abs_difference",
                       where=(torch.arange(10) < 6)[None, :, None], high=1e-6)
    """
    if low is None and high is None:
        raise ValueError("expect_between needs low, high or both")
    several = isinstance(value, tuple) and measure != "value"
    rule = check_call(measure, len(value) if several else 1, reference, where, params, golden)
    check = {"check": "between", "low": low, "high": high}
    if rule is not None:
        check["measure"] = measure
    if golden and _mode() == "record":
        reference = value  # the reference solution's own output (only in record mode: never in the kernel)
    _dispatch(key, value, check, several=several, reference=reference, where=where, params=params)


def expect_arguments_unchanged(key: str, function, *args, **kwargs) -> Any:
    """Call ``function(*args, **kwargs)``, check that the call left its arguments as it found them,
    and return what it returned.

    The course's rule: a graded function computes new tensors and changes none it is given (no
    ``x += ...``, ``x[...] = ...`` or ``x.add_(...)`` on an argument) unless its text says so. Every
    tensor or array among the arguments, also inside tuples, lists and mappings, is fingerprinted
    before and after the call (its shape, dtype and bytes: an in-place reshape that keeps every value
    counts too); the judge counts the arguments whose fingerprint changed (``measure="mismatches"``,
    at most 0). Models and other objects are not compared: a training function changes its model's
    weights by design. Like any property, this one is as honest as the kernel that computes it: the
    points for implementing a function rest on golden values. Example::

        out = expect_arguments_unchanged("softmax/arguments_changed_by_the_call", softmax_attention, Q, K, V)
    """
    before = _argument_fingerprints(args, kwargs)
    if before is None:
        raise TypeError(f"{key}: none of the arguments is a tensor or an array, so there is nothing to compare")
    result = function(*args, **kwargs)
    expect_between(key, (before, _argument_fingerprints(args, kwargs)), measure="mismatches", high=0)
    return result


def _argument_fingerprints(args: tuple, kwargs: dict) -> np.ndarray | None:
    """One number per tensor or array among ``args`` and ``kwargs`` (nested in tuples, lists, dicts),
    in a fixed order: 52 bits of the SHA-256 of its shape, dtype and bytes (exact in a float64, so the
    few numbers sent stand for arguments of any size); None when there is none."""
    import hashlib

    found: list[float] = []

    def fingerprint(array: np.ndarray, dtype) -> float:
        digest = hashlib.sha256(f"{array.shape}|{dtype}|".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
        return float(int.from_bytes(digest.digest()[:8], "big") >> 12)

    def visit(value) -> None:
        if isinstance(value, (tuple, list)):
            for item in value:
                visit(item)
        elif isinstance(value, Mapping):  # a dict, or a tokenizer's BatchEncoding
            for name in sorted(value, key=str):
                visit(value[name])
        elif hasattr(value, "detach"):  # a torch tensor, on any device, of any dtype (bfloat16 has no numpy form)
            plain = value.detach().to("cpu")
            numpy_form = plain.float().numpy() if str(plain.dtype) == "torch.bfloat16" else plain.numpy()
            found.append(fingerprint(numpy_form, plain.dtype))
        elif isinstance(value, np.ndarray):
            found.append(fingerprint(value, value.dtype))

    visit((args, kwargs))
    return np.array(found, dtype=np.float64) if found else None


def _mode() -> str:
    mode = os.environ.get(MODE_ENV, "compare").strip().lower() or "compare"
    if mode not in _MODES:
        raise RuntimeError(f"{MODE_ENV}={mode!r}; expected one of {', '.join(_MODES)}")
    return mode


def _golden_path() -> Path:
    return Path(os.environ.get(FILE_ENV) or GOLDEN_FILENAME)


def _dispatch(key: str, value: Any, check: dict, *, several: bool = False, reference: Any = None,
              where: Any = None, params: dict | None = None) -> None:
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string, got {key!r}")
    mode = _mode()
    if mode == "collect":
        _collect(key, value, several)  # the raw value only: reference, mask, params come from the golden file
        return
    try:
        got = _encode_raw(value, several)
    except TypeError as err:
        raise GoldenMismatch(f"{key}: {err}") from None
    if mode == "record":
        _record(key, got, check, reference, where, params)
        return
    # compare: judged exactly as the sealed grader judges, from the recorded check only
    spec = _GIVEN[key] if key in _GIVEN else load_golden(_golden_path())["values"].get(key)
    if spec is None:
        raise GoldenMismatch(f"{key}: no golden value recorded under this key; rebuild the autograder")
    message = judge(spec, got)
    if message:
        raise GoldenMismatch(f"{key}: {message}")


def _encode_raw(value: Any, several: bool) -> dict:
    """:func:`encode`, or each array of a tuple as ``{"kind": "values", "items": [...]}``."""
    if several:
        return {"kind": "values", "items": [encode(item) for item in value]}
    return encode(value)


def _collect(key: str, value: Any, several: bool = False) -> None:
    outbox = os.environ.get(OUTBOX_ENV)
    if not outbox:
        raise RuntimeError(f"{MODE_ENV}=collect needs {OUTBOX_ENV}, the file to append values to")
    try:
        line = {"key": key, "value": _encode_raw(value, several)}
    except TypeError as err:
        line = {"key": key, "error": str(err)}
    with open(outbox, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _calling_test() -> str | None:
    """Name of the ``test_*`` function on the call stack: ties each key to its test case."""
    for frame in inspect.stack()[2:]:
        if frame.function.startswith("test_"):
            return frame.function
    return None


def _record(key: str, got: dict, check: dict, reference: Any = None, where: Any = None,
            params: dict | None = None) -> None:
    path = _golden_path()
    golden = load_golden(path) if path.exists() else {"format": FORMAT_VERSION, "values": {}}
    test = _calling_test()
    previous = golden["values"].get(key)
    if previous is not None:
        # Sealed grading takes one value per key: a key reused (by another test, or in a loop) is ambiguous.
        raise ValueError(f"key {key!r} is recorded twice (by {previous.get('test')} and {test}); "
                         "give every expect() call its own key")
    spec = dict(check, test=test)
    if check["check"] == "close":
        spec["expected"] = got
    else:
        if "measure" in check:
            spec.update(measure_parts(key, MEASURES[check["measure"]], got, reference, where, params, encode))
        message = judge(spec, got)
        if message:
            raise GoldenMismatch(f"{key}: the reference solution fails its own property check: {message}")
    golden["values"][key] = spec
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(golden, sort_keys=True, indent=1), encoding="utf-8")
    tmp.replace(path)
    _LOADED.pop(str(path), None)


_LOADED: dict[str, tuple[float, dict]] = {}
_GIVEN: dict[str, dict] = {}  # golden values handed over in-process by use_golden (nbgrader)


def golden_blob(values: dict) -> str:
    """Golden values as one compressed string literal, the form :func:`use_golden` reads."""
    import base64
    import zlib

    return base64.b64encode(zlib.compress(json.dumps(values, sort_keys=True).encode("utf-8"), 9)).decode("ascii")


def use_golden(blob: str) -> None:
    """Register golden values for compare mode from a string made by :func:`golden_blob` (``course
    build --nbgrader`` writes one into each hidden test's region, so the release never holds it)."""
    import base64
    import zlib

    values = json.loads(zlib.decompress(base64.b64decode(blob)).decode("utf-8"))
    if not isinstance(values, dict):
        raise ValueError("use_golden expects the golden values of one test, a JSON object")
    _GIVEN.update(values)


def load_golden(path: str | os.PathLike) -> dict:
    """Read a golden file (cached until it changes on disk)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"golden values file {str(path)!r} not found: hidden tests run only inside the "
            f"autograder (or set {FILE_ENV})"
        )
    mtime = path.stat().st_mtime
    cached = _LOADED.get(str(path))
    if cached and cached[0] == mtime:
        return cached[1]
    golden = json.loads(path.read_text(encoding="utf-8"))
    if golden.get("format") != FORMAT_VERSION or "values" not in golden:
        raise ValueError(f"{path} is not a golden values file of format {FORMAT_VERSION}")
    _LOADED[str(path)] = (mtime, golden)
    return golden
