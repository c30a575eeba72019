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
``toy_top_k_violations``
    summarization's sampled tokens ``(B, T)`` for the articles ``src`` (the reference, ``(B, S)``) of a
    ``ToyDecoderModel(**params["model"])``: the tokens outside the ``params["top_k"]`` most likely
    after their prefix (by the grader's own copy of the model), before the row's first
    ``params["eos"]``; tokens after it that are not eos; rows that do not start with
    ``params["bos"]``; and one if the rows are longer than ``params["max_len"] + 1``.
"""

from __future__ import annotations

import json
import statistics

from .base import Measure, Refused, shown_shape

__all__ = ["MEASURES"]


def _pairs(text: str, count: int) -> list:
    try:
        pairs = json.loads(text)
    except ValueError:
        raise Refused("the examples could not be read") from None
    if not isinstance(pairs, list):
        raise Refused("the examples could not be read")
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


def _toy_top_k_violations(arrays, reference, where, params):
    import torch

    from helpers.summarization.decoding import ToyDecoderModel

    out, src = arrays[0], reference
    if out.ndim != 2 or out.shape[0] != src.shape[0] or out.dtype.kind not in "iu" or out.shape[1] < 1:
        raise Refused(f"expected integer tokens with {src.shape[0]} rows, got {out.dtype} of shape {shown_shape(out.shape)}")
    model = ToyDecoderModel(**params["model"])
    eos, top_k = int(params["eos"]), int(params["top_k"])
    tokens = torch.as_tensor(out, dtype=torch.long)
    if not ((tokens >= 0) & (tokens < model.vocab_size)).all():
        raise Refused("some tokens are not in the vocabulary")
    with torch.no_grad():
        logits = model(torch.as_tensor(src), tokens[:, :-1])
    allowed = torch.zeros_like(logits, dtype=torch.bool).scatter(2, logits.topk(top_k, dim=-1).indices, True)
    chosen = allowed.gather(2, tokens[:, 1:, None])[..., 0]
    finished_before = torch.cat([torch.zeros(len(tokens), 1, dtype=torch.bool), (tokens[:, 1:-1] == eos).cummax(1).values], 1)
    bad = int((tokens[:, 0] != int(params["bos"])).sum()) + int(tokens.shape[1] > int(params["max_len"]) + 1)
    bad += int((~chosen & ~finished_before).sum()) + int(((tokens[:, 1:] != eos) & finished_before).sum())
    return float(bad)


MEASURES: dict[str, Measure] = {
    "span_problems": Measure("the examples that break the description are", _span_problems, arrays=(1,),
                             reference="none", shapes="free", params=("documents", "block_sizes", "repeats"),
                             elementwise=False, text=True, imports=("helpers.pretraining",)),
    "span_statistics": Measure("the statistics outside their ranges are", _span_statistics, arrays=(1,),
                               reference="none", shapes="free", params=("document", "block_size", "count", "ranges"),
                               elementwise=False, text=True, imports=("helpers.pretraining",)),
    "toy_top_k_violations": Measure("the tokens that break the rules are", _toy_top_k_violations, arrays=(1,),
                                    reference="required", shapes="free", params=("model", "top_k", "bos", "eos", "max_len"),
                                    elementwise=False, imports=("torch", "helpers.summarization.decoding")),
}
