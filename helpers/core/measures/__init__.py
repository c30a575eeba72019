"""What the judge computes from raw values: the measures of ``expect_between(..., measure=...)``.

A hidden test hands over what the student's functions returned (one array, or several from
several calls) and names a measure; the judge computes it outside the student's process, with
the reference, the ``where`` mask and the ``params`` read from the golden file only (recorded at
build, never collected). So no measure trusts a number computed in the student's kernel.

Each entry of :data:`MEASURES` says how many raw arrays the measure takes, whether it takes a
reference, which ``params`` it needs and whether each array's shape must be the reference
solution's (``shapes="recorded"``, the rule for most) or is the measure's own business
(``shapes="free"``: sampled sequences whose length varies), and which modules its arithmetic
imports on first use (``imports``: :func:`modules_for` lets ``course grade`` load them while its
first sandbox runs). The table is small and fixed on purpose: the golden file names the measure, a
collected line cannot.

Below, *d* is the difference a measure looks at: ``a - b`` for a pair of arrays, ``value -
reference`` for one array and a reference (the reference broadcast to the value's shape), or
the value itself when it comes alone; ``where`` picks its entries.

``max_abs_difference``
    the largest ``|d|`` (a pair, or one array and a reference).
``relative_error``
    ``||d|| / ||reference||`` (Frobenius norm; needs a reference).
``mean_difference``, ``std_difference``
    the mean of *d*; its standard deviation (``ddof=1``, torch's default).
``fraction_beyond``
    the fraction of entries with ``|d| > params["threshold"]``.
``std_of_row_means``
    the standard deviation (``ddof=1``) of *d*'s means over its last axis.
``masked_copy``
    a pair ``(out, mask)`` and the reference ``x``: the largest distance of ``out`` from ``x``
    with the entries ``mask`` selects set to 0.
``dtype``
    1 when the array's dtype is one of ``params["dtypes"]`` (e.g. ``["float64"]``), else 0 (its
    shape must be the reference solution's, as for every recorded-shape measure).
``float32_round_off``
    the largest change of an entry rounded to float32 (0 for numbers computed in float32).
``length``
    the array's size along ``params["axis"]`` (any shape otherwise).
``mismatches``
    a pair of arrays of any shapes: the number of entries that differ, or the larger size when
    the shapes differ (two sampled runs: 0 when they are the same).
``distinct_rows``
    the number of different rows of a 2-d array.
``eos_mismatches``
    token sequences ``(B, T)`` against reference sequences ``(B, T')``: the rows that differ
    from their reference up to and including its first ``params["eos"]`` (or over its whole
    length without one); with ``params["after_eos"] = "eos"`` a row that goes on with anything
    but eos after that point counts as well. Rows must match the reference's; lengths may not.
``greedy_problems``
    three arrays from a greedy decoder: its tokens ``(B, T)``, its tokens decoded another way (with a
    cache) ``(B, T')`` and the model's logits for the first ones, ``(B, T - 1, V)`` (what the model
    gives after each prefix): the rows that do not start with ``params["bos"]`` or do not take the
    largest logit (within ``params["tie"]``) at every step up to their first ``params["eos"]``, plus
    one when the two decodings part where the logits of their two tokens differ by more than the tie
    (or have different lengths with the same tokens).
``frequency_error``, ``draws_outside``
    draws ``(R, N)`` of token ids against next-token logits ``(R, C)`` (the reference), one row
    of logits per row of draws, turned into the distribution the text defines with
    ``params["temperature"]``, ``["top_k"]`` and ``["top_p"]`` (one entry per row, ``None`` for
    no filter): temperature, then the k most likely, then the smallest set whose probability
    reaches p. ``frequency_error`` is the largest ``|frequency - probability|``;
    ``draws_outside`` the number of draws of tokens that distribution never gives.

With ``golden=True`` the reference is the reference solution's own value, recorded at build (as
:func:`helpers.core.golden.expect` records it): nothing in the student's kernel holds it, so it
cannot be sent back; for outputs a measure compares loosely (tokens up to eos, of any length).

Grader-side measures that call the grader's own copy of a course helper (a patched copy in the
student's kernel changes nothing) live in :mod:`helpers.core.measures.assignments`. Those whose
arithmetic is an exercise's solution (``frequency_error``, ``draws_outside``) are named here and
computed by the grader, which hands them in with :func:`provide`.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from importlib import import_module
from typing import Any, Callable

import numpy as np

from ..contract import MEASURE_MODULES_ENV
from .assignments import MEASURES as ASSIGNMENT_MEASURES
from .base import Measure, Refused, shown_shape

__all__ = ["Measure", "MEASURES", "judge_measure", "measure_parts", "check_call", "bounds", "decode", "modules_for"]


# ----------------------------------------------------------------------------- arithmetic
def _d(arrays, reference, where) -> np.ndarray:
    a = arrays[0].astype(np.float64)
    if len(arrays) == 2:
        d = a - arrays[1].astype(np.float64)
    elif reference is not None:
        d = a - np.broadcast_to(reference.astype(np.float64), a.shape)
    else:
        d = a
    if where is not None:
        d = d[np.broadcast_to(where.astype(bool), d.shape)]
    return np.atleast_1d(d)


def _max_abs(arrays, reference, where, params):
    d = _d(arrays, reference, where)
    return float(np.abs(d).max()) if d.size else 0.0


def _relative(arrays, reference, where, params):
    d = _d(arrays, reference, where)
    scale = np.broadcast_to(reference.astype(np.float64), arrays[0].shape)
    if where is not None:
        scale = scale[np.broadcast_to(where.astype(bool), scale.shape)]
    norm = float(np.linalg.norm(scale))
    return float(np.linalg.norm(d)) / norm if norm > 0 else float("inf")


def _mean(arrays, reference, where, params):
    d = _d(arrays, reference, where)
    return float(d.mean()) if d.size else float("nan")


def _std(arrays, reference, where, params):
    d = _d(arrays, reference, where)
    return float(d.std(ddof=1)) if d.size > 1 else float("nan")


def _beyond(arrays, reference, where, params):
    d = _d(arrays, reference, where)
    return float((np.abs(d) > float(params["threshold"])).mean()) if d.size else float("nan")


def _std_of_row_means(arrays, reference, where, params):
    if where is not None:
        raise ValueError("std_of_row_means takes no where")
    rows = _d(arrays, reference, None).reshape(arrays[0].shape).mean(axis=-1).ravel()
    return float(rows.std(ddof=1)) if rows.size > 1 else float("nan")


def _masked_copy(arrays, reference, where, params):
    out, mask = arrays[0].astype(np.float64), arrays[1].astype(bool)
    expected = np.where(mask, 0.0, np.broadcast_to(reference.astype(np.float64), out.shape))
    return float(np.abs(out - expected).max()) if out.size else 0.0


def _dtype(arrays, reference, where, params):
    return 1.0 if str(arrays[0].dtype) in params["dtypes"] else 0.0


def _round_off(arrays, reference, where, params):
    value = arrays[0].astype(np.float64)
    return float(np.abs(value - value.astype(np.float32).astype(np.float64)).max()) if value.size else 0.0


def _length(arrays, reference, where, params):
    value = arrays[0]
    axis = int(params["axis"])
    return float(value.shape[axis]) if -value.ndim <= axis < value.ndim else 0.0


def _mismatches(arrays, reference, where, params):
    a, b = arrays
    if a.shape != b.shape:
        return float(max(a.size, b.size, 1))
    return float(np.count_nonzero(a != b))


def _distinct_rows(arrays, reference, where, params):
    value = arrays[0]
    return float(len({row.tobytes() for row in value.reshape(len(value), -1)})) if value.ndim else 1.0


def _eos_mismatches(arrays, reference, where, params):
    tokens, expected, eos = arrays[0], reference, int(params["eos"])
    if tokens.ndim != 2 or tokens.shape[0] != expected.shape[0]:
        return float(expected.shape[0]), f"expected {expected.shape[0]} rows of tokens, got shape {shown_shape(tokens.shape)}"
    bad = 0
    for mine, theirs in zip(tokens.tolist(), expected.tolist()):
        end = theirs.index(eos) + 1 if eos in theirs else len(theirs)
        bad += mine[:end] != theirs[:end] or (params.get("after_eos") == "eos" and any(t != eos for t in mine[end:]))
    return float(bad)


def _greedy_problems(arrays, reference, where, params):
    plain, cached, logits = arrays
    bos, eos, tie = int(params["bos"]), int(params["eos"]), float(params["tie"])
    if plain.ndim != 2 or cached.ndim != 2 or logits.shape[:2] != (plain.shape[0], plain.shape[1] - 1) \
            or cached.shape[0] != plain.shape[0]:
        return float(plain.shape[0] if plain.ndim else 1), "the shapes of the tokens and the logits do not fit"
    logits = logits.astype(np.float64)
    best = logits.max(axis=-1)
    bad = 0
    for b, row in enumerate(plain.tolist()):  # each row greedy with respect to the logits, up to its eos
        end = row.index(eos) + 1 if eos in row else len(row)
        bad += row[0] != bos or any(not 0 <= token < logits.shape[2] or logits[b, t - 1, token] < best[b, t - 1] - tie
                                    for t, token in enumerate(row[1:end], start=1))
    width = min(plain.shape[1], cached.shape[1])
    differs = plain[:, :width] != cached[:, :width]
    if differs.any():  # the first step where the two part: they may only choose between (near) ties
        step = int(np.nonzero(differs.any(axis=0))[0][0])
        rows = np.nonzero(differs[:, step])[0]
        chosen = [(logits[b, step - 1, plain[b, step]], logits[b, step - 1, cached[b, step]])
                  for b in rows if step >= 1 and 0 <= cached[b, step] < logits.shape[2]]
        bad += len(chosen) < len(rows) or any(abs(p - c) > tie for p, c in chosen)
    elif plain.shape != cached.shape:
        bad += 1
    return float(bad)


#: The measures the judge applies to raw values: name -> :class:`Measure` (``None`` for "value",
#: a single number taken as it is: what the student's function returned, a loss or an accuracy).
MEASURES: dict[str, Measure | None] = {
    "value": None,
    "max_abs_difference": Measure("the largest difference is", _max_abs, difference=True),
    "relative_error": Measure("the relative error is", _relative, arrays=(1,), reference="required"),
    "mean_difference": Measure("the mean is", _mean),
    "std_difference": Measure("the standard deviation is", _std),
    "fraction_beyond": Measure("the fraction beyond the threshold is", _beyond, params=("threshold",)),
    "std_of_row_means": Measure("the standard deviation of the rows' means is", _std_of_row_means),
    "masked_copy": Measure("the largest distance from the masked input is", _masked_copy, arrays=(2,),
                           reference="required"),
    "dtype": Measure("dtype match", _dtype, arrays=(1,), reference="none", params=("dtypes",)),
    "float32_round_off": Measure("the largest change by rounding to float32 is", _round_off, arrays=(1,),
                                 reference="none"),
    "length": Measure("the length is", _length, arrays=(1,), reference="none", shapes="free", params=("axis",)),
    "mismatches": Measure("the entries that differ are", _mismatches, arrays=(2,), reference="none",
                          shapes="free", elementwise=False),
    "distinct_rows": Measure("the number of different rows is", _distinct_rows, arrays=(1,), reference="none"),
    "eos_mismatches": Measure("the rows that differ are", _eos_mismatches, arrays=(1,), reference="required",
                              shapes="free", params=("eos",), elementwise=False),
    "greedy_problems": Measure("the problems are", _greedy_problems, arrays=(3,), reference="none", shapes="free",
                               params=("bos", "eos", "tie"), elementwise=False),
    # top-k and nucleus filtering are an exercise's solution: the grader hands their arithmetic in (provide)
    "frequency_error": Measure("the largest frequency error is", None, arrays=(1,), reference="required",
                               elementwise=False),
    "draws_outside": Measure("the draws outside the distribution are", None, arrays=(1,), reference="required",
                             elementwise=False),
}


def modules_for(specs) -> list[str]:
    """The modules the measures of these golden specs import when they first run (``Measure.imports``),
    each once, in order: what a grader can load before its first judging."""
    found: dict[str, None] = {}
    for spec in specs:
        rule = MEASURES.get(spec.get("measure", "value")) if isinstance(spec, dict) else None
        for module in (rule.imports if rule is not None else ()):
            found.setdefault(module)
    return list(found)


def provide(name: str, compute: Callable[..., Any]) -> None:
    """Hand in the arithmetic of a measure the table names without it (the grader's own measures,
    which the package students install does not carry)."""
    if name not in MEASURES or MEASURES[name] is None:
        raise ValueError(f"unknown measure {name!r}")
    MEASURES[name] = replace(MEASURES[name], compute=compute)


def _computable(name: str) -> Measure:
    """The rule of ``name`` with its arithmetic: a grader-side measure's comes from the modules that
    :data:`~helpers.core.contract.MEASURE_MODULES_ENV` names (the build's kernel sets it), which
    :func:`provide` it when they load."""
    if MEASURES[name].compute is None:
        for module in filter(None, os.environ.get(MEASURE_MODULES_ENV, "").split(",")):
            import_module(module.strip())
    if MEASURES[name].compute is None:
        raise ValueError(f"measure {name!r} is computed by the grader only: a hidden test may use it "
                         f"(the build names the module that provides it in {MEASURE_MODULES_ENV})")
    return MEASURES[name]


# ----------------------------------------------------------------------------- judging
def decode(record: dict):
    """An encoded array back as numpy (numbers and booleans only: a collected line is the student's)."""
    dtype = np.dtype(record["dtype"])
    if dtype.kind not in "biuf":
        raise ValueError(f"dtype {dtype} is not a number type")
    return np.asarray(record["data"], dtype=dtype).reshape(record["shape"])


def bounds(v: float, spec: dict, what: str) -> str | None:
    if not np.isfinite(v):
        return f"{what} {v}, expected a finite number"
    if spec.get("low") is not None and v < spec["low"]:
        return f"{what} {v:.4g}, must be at least {spec['low']:g}"
    if spec.get("high") is not None and v > spec["high"]:
        return f"{what} {v:.4g}, must be at most {spec['high']:g}"
    return None


_WHICH = ("the first ", "the second ", "the third ")


def judge_measure(spec: dict, got: dict) -> str | None:
    """A measure of raw values: arrays from the student; reference, mask, params, bounds from ``spec``."""
    rule = MEASURES.get(spec["measure"])
    if rule is None:
        raise ValueError(f"unknown measure {spec['measure']!r} in golden file")
    count = len(spec["shapes"])
    items = got.get("items") if got.get("kind") == "values" else [got]
    if not isinstance(items, list) or len(items) != count:
        return {1: "expected one array", 2: "expected a pair of arrays"}.get(count, f"expected {count} arrays")
    arrays = []
    for n, (item, shape) in enumerate(zip(items, spec["shapes"])):
        which = _WHICH[n] if count > 1 else ""
        if rule.text:
            if not isinstance(item, dict) or item.get("kind") != "str" or not isinstance(item.get("value"), str):
                return f"{which}value is not a string"
            arrays.append(item["value"])
            continue
        if not isinstance(item, dict) or item.get("kind") != "array":
            return f"{which}value is not a number or array"
        value = decode(item)
        if rule.shapes == "recorded" and value.shape != tuple(shape):
            return f"{which}value has shape {shown_shape(value.shape)} but the reference has shape {tuple(shape)}"
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            return f"{which}value holds a non-finite number (nan or inf)"
        arrays.append(value)
    if rule.elementwise and count == 2 and arrays[0].shape != arrays[1].shape:
        return f"the two values have shapes {shown_shape(arrays[0].shape)} and {shown_shape(arrays[1].shape)}"
    reference = decode(spec["reference"]) if "reference" in spec else None
    where = decode(spec["where"]) if "where" in spec else None
    try:
        result = _computable(spec["measure"]).compute(arrays, reference, where, spec.get("params") or {})
    except Refused as why:
        return str(why)
    number, detail = result if isinstance(result, tuple) else (result, "")
    message = bounds(number, spec, rule.says)
    return f"{message} ({detail})" if message and detail else message


def measure_parts(key: str, rule: Measure, got: dict, reference: Any, where: Any, params: dict | None,
                  encode: Callable) -> dict:
    """What the golden file holds for a measure besides its bounds (the raw values' shapes, the
    reference, the mask, the params), checked to fit together: a test's mistake shows at build."""
    items = got["items"] if got["kind"] == "values" else [got]
    if any(item["kind"] != ("str" if rule.text else "array") for item in items):
        raise TypeError(f"{key}: this measure takes {'strings' if rule.text else 'numbers or arrays, not strings'}")
    parts: dict = {"shapes": [item.get("shape") for item in items]}
    for name, given in (("reference", reference), ("where", where)):
        if given is None:
            continue
        parts[name] = encode(given)
        if parts[name]["kind"] != "array":
            raise TypeError(f"{key}: the {name} must be numbers")
    if "where" in parts and parts["where"]["dtype"] != "bool":
        raise TypeError(f"{key}: where must be a boolean tensor or array")
    if params:
        try:
            parts["params"] = json.loads(json.dumps(params, allow_nan=False))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{key}: params must be JSON numbers, strings, lists and dicts ({err})") from None
    if rule.elementwise and not rule.text:
        shapes = {tuple(shape) for shape in parts["shapes"]}
        if len(shapes) != 1:
            raise ValueError(f"{key}: the measure's arrays have different shapes {sorted(shapes)}")
        shape = next(iter(shapes))
        for name in ("reference", "where"):
            if name in parts:
                own = tuple(parts[name]["shape"])
                try:
                    fits = np.broadcast_shapes(own, shape) == shape
                except ValueError:
                    fits = False
                if not fits:
                    raise ValueError(f"{key}: {name} of shape {own} does not broadcast to the values' shape {shape}")
    return parts


def check_call(measure: Any, count: int, reference: Any, where: Any, params: dict | None,
               golden: bool = False) -> Measure | None:
    """The rule of ``measure``, after checking that a call fits it (in every mode, at the call)."""
    rule = MEASURES.get(measure, False) if isinstance(measure, str) else False
    if rule is False:
        raise ValueError(f"unknown measure {measure!r}; expected one of {', '.join(MEASURES)}")
    if rule is None:
        if reference is not None or where is not None or params:
            raise ValueError('measure="value" takes one number: no reference, no where, no params')
        return None
    if golden and (reference is not None or rule.reference == "none" or count != 1):
        raise ValueError(f"golden=True takes one array and no reference (the recorded value is the reference), "
                         f"for a measure that takes one ({measure!r})")
    if rule.reference == "required" and reference is None and not golden:
        raise ValueError(f"measure {measure!r} needs a reference")
    if rule.difference and (count == 2) == (reference is not None):
        raise ValueError(f"measure {measure!r} takes a pair of arrays, or one array and a reference")
    if count not in rule.arrays:
        wanted = " or ".join({1: "one array", 2: "a pair of arrays"}.get(n, f"{n} arrays") for n in rule.arrays)
        raise ValueError(f"measure {measure!r} takes {wanted} (several as a tuple)")
    if rule.reference == "none" and reference is not None:
        raise ValueError(f"measure {measure!r} takes no reference")
    missing = [name for name in rule.params if name not in (params or {})]
    if missing:
        raise ValueError(f"measure {measure!r} needs params {', '.join(missing)}")
    return rule


MEASURES.update(ASSIGNMENT_MEASURES)
