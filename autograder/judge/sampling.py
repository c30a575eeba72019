"""The judge's measures of sampled tokens (summarization's decoding): the next-token distribution
the text defines, and how far a notebook's draws are from it.

They implement top-k and nucleus filtering, which students write themselves, so they live here with
the grader and not in ``helpers``: ``helpers.core.measures`` names them, and this module hands their
arithmetic in when it loads (the judge imports it; the build names it to the kernel that records).
"""

from __future__ import annotations

import numpy as np

from helpers.core.measures import provide
from helpers.core.measures.base import Refused, shown_shape

__all__ = ["filtered_distribution", "frequency_error", "draws_outside"]


def filtered_distribution(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The next-token distribution the summarization text defines: logits / temperature, only the
    ``top_k`` largest (ties at the k-th kept), then the most likely tokens until their probability
    reaches ``top_p`` (each token kept while the mass before it is below p), renormalized."""
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    if top_k is not None:
        z = np.where(z < np.sort(z)[::-1][int(top_k) - 1], -np.inf, z)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p is not None:
        order = np.argsort(-p, kind="stable")
        before = np.cumsum(p[order]) - p[order]
        kept = np.zeros_like(p, dtype=bool)
        kept[order[before < float(top_p)]] = True
        p = np.where(kept, p, 0.0)
        p /= p.sum()
    return p


def _distributions(draws, logits, params):
    draws = draws.reshape(-1, draws.shape[-1]) if draws.ndim > 1 else draws[None]
    logits = logits.reshape(-1, logits.shape[-1])
    if draws.shape[0] != logits.shape[0] or draws.dtype.kind not in "iu":
        raise Refused(f"expected integer draws with {logits.shape[0]} row(s), got {draws.dtype} of shape {shown_shape(draws.shape)}")
    options = [params.get(name) or [None] * len(logits) for name in ("temperature", "top_k", "top_p")]
    return draws, [filtered_distribution(row, t or 1.0, k, p) for row, t, k, p in zip(logits, *options)]


def frequency_error(arrays, reference, where, params):
    draws, distributions = _distributions(arrays[0], reference, params)
    worst = 0.0
    for row, p in zip(draws, distributions):
        inside = row[(row >= 0) & (row < len(p))]
        frequency = np.bincount(inside, minlength=len(p))[:len(p)] / max(len(row), 1)
        worst = max(worst, float(np.abs(frequency - p).max()), float(1 - len(inside) / max(len(row), 1)))
    return worst


def draws_outside(arrays, reference, where, params):
    draws, distributions = _distributions(arrays[0], reference, params)
    outside = 0
    for row, p in zip(draws, distributions):
        inside = (row >= 0) & (row < len(p))
        outside += int((~inside).sum()) + int((p[row[inside]] == 0).sum())
    return float(outside)


# the table in helpers.core.measures names these two; their arithmetic is handed in from here
provide("frequency_error", frequency_error)
provide("draws_outside", draws_outside)
