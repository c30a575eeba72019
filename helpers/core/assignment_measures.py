"""Grader-side measures that need a course helper: the judge calls its own copy of the helper (a
copy patched in the student's kernel changes nothing). Registered in
:data:`helpers.core.measures.MEASURES` (documented there with the others); a helper is imported
only when its measure runs.

``span_problems``
    pretraining's span-corruption examples, as JSON text of a list of ``[x, y]`` pairs made for
    ``params["documents"]`` (each ``params["repeats"]`` times in a row) under each of
    ``params["block_sizes"]`` in turn: the number of examples ``read_span_example`` rejects (a
    missing or extra example counts as one).
``span_statistics``
    such examples of one ``params["document"]`` and ``params["block_size"]``: the number of
    statistics of the truncated text's length ``L``, the span's share of it and where it starts
    that fall outside ``params["ranges"]`` (``{"length_min": [4, 4], ...}``: ``length_min``,
    ``length_max``, ``length_mean``, ``length_spread``, ``span_ratio_mean``,
    ``span_ratio_spread``, ``start_mean``; spreads are population standard deviations), plus the
    number of examples that break the description.
"""

from __future__ import annotations

import json
import statistics

from .measures import Measure, _Refused

__all__ = ["MEASURES"]


def _pairs(text: str, count: int) -> list:
    try:
        pairs = json.loads(text)
    except ValueError:
        raise _Refused("the examples could not be read") from None
    if not isinstance(pairs, list):
        raise _Refused("the examples could not be read")
    return [pair if isinstance(pair, list) and len(pair) == 2 else [None, None] for pair in pairs[:count]] + \
        [[None, None]] * max(0, count - len(pairs)), len(pairs) - count


def _pieces(pairs, documents_and_sizes):
    from helpers.pretraining import read_span_example

    return [read_span_example(x, y, document, block_size) if isinstance(x, str) and isinstance(y, str)
            else ("", "", "", "not a pair of strings")
            for (x, y), (document, block_size) in zip(pairs, documents_and_sizes)]


def _span_problems(texts, reference, where, params):
    plan = [(document, block_size) for block_size in params["block_sizes"] for document in params["documents"]
            for _ in range(int(params["repeats"]))]
    pairs, extra = _pairs(texts[0], len(plan))
    return float(sum(piece[3] is not None for piece in _pieces(pairs, plan)) + max(extra, 0))


def _span_statistics(texts, reference, where, params):
    pairs, extra = _pairs(texts[0], int(params["count"]))
    pieces = _pieces(pairs, [(params["document"], int(params["block_size"]))] * len(pairs))
    broken = sum(piece[3] is not None for piece in pieces) + max(extra, 0)
    if broken:
        return float(broken), f"{broken} example(s) break the description"
    lengths = [len(prefix) + len(span) + len(suffix) for prefix, span, suffix, _ in pieces]
    ratios = [len(span) / length for (_, span, _, _), length in zip(pieces, lengths)]
    starts = [len(prefix) / max(1, length - len(span)) for (prefix, span, _, _), length in zip(pieces, lengths)]
    found = {"length_min": min(lengths), "length_max": max(lengths), "length_mean": statistics.mean(lengths),
             "length_spread": statistics.pstdev(lengths), "span_ratio_mean": statistics.mean(ratios),
             "span_ratio_spread": statistics.pstdev(ratios), "start_mean": statistics.mean(starts)}
    outside = [f"{name} {found[name]:.4g} outside [{low:g}, {high:g}]" for name, (low, high) in params["ranges"].items()
               if not low <= found[name] <= high]
    return float(len(outside)), "; ".join(outside)


MEASURES: dict[str, Measure] = {
    "span_problems": Measure("the examples that break the description are", _span_problems, arrays=(1,),
                             reference="none", shapes="free", params=("documents", "block_sizes", "repeats"),
                             elementwise=False, text=True),
    "span_statistics": Measure("the statistics outside their ranges are", _span_statistics, arrays=(1,),
                               reference="none", shapes="free", params=("document", "block_size", "count", "ranges"),
                               elementwise=False, text=True),
}
