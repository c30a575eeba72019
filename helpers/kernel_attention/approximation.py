"""How well random features approximate softmax attention: the error of random-Fourier-feature
attention against the number of features and the dimension, and the error of trigonometric and
positive random features as the norms of queries and keys grow."""

from __future__ import annotations

from typing import Callable, Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter
import numpy as np
import torch

from ..progress import progress
from .harness import _check_callable, _check_positive, _check_sizes, _new_axes, _output_of, _qkv
from .tools import relative_error

__all__ = ["plot_rff_error", "plot_feature_map_error"]


# ----------------------------------------------------------------------------- RFF error
def plot_rff_error(rff_attention: Callable, softmax_attention: Callable, *,
                   dims: Sequence[int] = (4, 8, 16, 32),
                   num_features: Sequence[int] = (16, 64, 256, 1024, 4096),
                   seq_len: int = 32, value_dim: int = 8, scale: float = 0.5,
                   trials: int = 3, seed: int = 0, ax=None) -> dict:
    """Plot how well random-Fourier-feature attention approximates softmax attention.

    For every query/key dimension ``D`` in ``dims`` and every number of random features
    ``D_random`` in ``num_features``, draws ``trials`` random problems (queries and keys with
    i.i.d. N(0, scale^2) entries, values N(0, 1), float64), runs both functions and records the
    mean relative error ``||approx - exact|| / ||exact||``.

    Parameters
    ----------
    rff_attention : callable
        ``rff_attention(Q, K, V, num_features, seed) -> out`` with Q, K (B, N, D), V (B, N, M)
        and out (B, N, M).
    softmax_attention : callable
        ``softmax_attention(Q, K, V) -> (out, weights)`` (or just ``out``): the exact reference.
    dims, num_features : sequence of int
        The grid of D and D_random values.
    seq_len, value_dim : int
        N and M of the random problems.
    scale : float
        Standard deviation of the query and key entries. Larger entries mean larger norms and a
        harder approximation.
    trials : int
        Random problems (and random feature draws) per grid point.
    seed : int
        Seeds the inputs; trial ``t`` passes ``seed + t`` to ``rff_attention``.
    ax : sequence of two matplotlib Axes, optional

    Returns
    -------
    dict
        ``{"dims": [...], "num_features": [...], "errors": ndarray (len(dims), len(num_features))}``
    """
    _check_callable("rff_attention", rff_attention)
    _check_callable("softmax_attention", softmax_attention)
    dims = _check_sizes("dims", dims)
    num_features = _check_sizes("num_features", num_features)
    seq_len = _check_sizes("seq_len", seq_len)[0]
    value_dim = _check_sizes("value_dim", value_dim)[0]
    trials = _check_sizes("trials", trials)[0]
    scale = _check_positive("scale", scale)
    errors = np.zeros((len(dims), len(num_features)))
    grid = [(i, d, j, r) for i, d in enumerate(dims) for j, r in enumerate(num_features)]
    with torch.no_grad():
        for i, d, j, r in progress(grid, desc="RFF error"):
            gen = torch.Generator().manual_seed(seed * 1000 + d)
            errs = []
            for t in range(trials):
                Q, K, V = _qkv(gen, 1, seq_len, d, value_dim, scale)
                exact = _output_of("softmax_attention", softmax_attention(Q, K, V), V.shape)
                approx = _output_of("rff_attention", rff_attention(Q, K, V, r, seed + t), V.shape)
                errs.append(relative_error(approx, exact))
            errors[i, j] = float(np.mean(errs))

    fig, (left, right) = _new_axes(ax, 2)
    for i, d in enumerate(dims):
        left.plot(num_features, errors[i], "o-", label=f"D = {d}")
    ref = errors[:, 0].mean() * np.sqrt(num_features[0] / np.asarray(num_features, dtype=float))
    left.plot(num_features, ref, "k--", lw=1, label=r"$\propto 1/\sqrt{D_{random}}$")
    left.set(xscale="log", yscale="log", xlabel=r"number of random features $D_{random}$",
             ylabel="relative error vs softmax attention",
             title="Error against the number of random features")
    left.set_xticks(num_features, [str(r) for r in num_features])
    left.xaxis.set_minor_formatter(NullFormatter())
    left.legend(fontsize=8, loc="lower left")  # the curves fall to the right: the lower left stays free
    for j, r in enumerate(num_features):
        right.plot(dims, errors[:, j], "s-", label=rf"$D_{{random}}$ = {r}")
    right.set(xscale="log", yscale="log", xlabel="query/key dimension D",
              ylabel="relative error vs softmax attention",
              title=f"Error against D (entries of q, k ~ N(0, {scale:g}²))")
    right.set_xticks(dims, [str(d) for d in dims])
    right.xaxis.set_minor_formatter(NullFormatter())
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes, over no curve
    for a in (left, right):
        a.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return {"dims": dims, "num_features": num_features, "errors": errors}


# ----------------------------------------------------------------------------- feature maps vs norm
def plot_feature_map_error(trig_attention: Callable, positive_attention: Callable,
                           softmax_attention: Callable, *,
                           scales: Sequence[float] = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0),
                           dim: int = 16, seq_len: int = 64, value_dim: int = 8,
                           num_features: int = 256, trials: int = 5, seed: int = 0,
                           ax=None) -> dict:
    """Plot the error of two random-feature approximations of softmax attention as norms grow.

    For every ``scale`` draws ``trials`` problems with query/key entries N(0, scale^2) (so the
    norms grow like ``scale * sqrt(dim)``) and records the median relative error of each
    approximation over the trials. A trial whose output is not finite (nan or inf) counts as an
    infinite error; where the median is infinite the plot marks the scale with a red cross.

    Parameters
    ----------
    trig_attention, positive_attention : callable
        ``fn(Q, K, V, num_features, seed) -> out`` with Q, K (B, N, D), V (B, N, M), out (B, N, M):
        attention with trigonometric (random Fourier) features and with positive random features.
    softmax_attention : callable
        ``softmax_attention(Q, K, V) -> (out, weights)`` (or just ``out``): the exact reference.
    scales : sequence of float
        Standard deviations of the query and key entries.
    dim, seq_len, value_dim, num_features, trials, seed : int
    ax : matplotlib Axes, optional

    Returns
    -------
    dict
        ``{"scales", "trig", "positive"}``: median relative errors, one per scale (``inf`` where
        half of the trials or more gave a non-finite output).
    """
    for name, fn in (("trig_attention", trig_attention), ("positive_attention", positive_attention),
                     ("softmax_attention", softmax_attention)):
        _check_callable(name, fn)
    scales = [_check_positive("scales", s) for s in (scales if np.iterable(scales) else [scales])]
    if not scales:
        raise ValueError("scales must not be empty")
    dim = _check_sizes("dim", dim)[0]
    seq_len = _check_sizes("seq_len", seq_len)[0]
    value_dim = _check_sizes("value_dim", value_dim)[0]
    num_features = _check_sizes("num_features", num_features)[0]
    trials = _check_sizes("trials", trials)[0]
    results = {"scales": scales, "trig": [], "positive": []}
    with torch.no_grad():
        for s in progress(scales, desc="feature maps"):
            gen = torch.Generator().manual_seed(seed)
            errs = {"trig": [], "positive": []}
            for t in range(trials):
                Q, K, V = _qkv(gen, 1, seq_len, dim, value_dim, s)
                exact = _output_of("softmax_attention", softmax_attention(Q, K, V), V.shape)
                for key, name, fn in (("trig", "trig_attention", trig_attention),
                                      ("positive", "positive_attention", positive_attention)):
                    out = _output_of(name, fn(Q, K, V, num_features, seed + t), V.shape)
                    errs[key].append(relative_error(out, exact))
            for key in ("trig", "positive"):
                results[key].append(float(np.median(errs[key])))

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.2))
    for key, label, marker in (("trig", "random Fourier features (sin, cos)", "o-"),
                               ("positive", "positive random features (FAVOR+)", "s-")):
        errs = np.asarray(results[key], dtype=float)
        shown = np.where(np.isfinite(errs), errs, np.nan)
        ax.plot(scales, shown, marker, label=label)
        bad = ~np.isfinite(errs)
        if bad.any():
            ax.plot(np.asarray(scales)[bad], np.full(bad.sum(), np.nanmax(shown) if np.isfinite(shown).any() else 1.0),
                    "x", color="red", ms=9, label=f"{label.split(' (')[0]}: not finite")
    ax.axhline(1.0, color="gray", ls=":", lw=1, label="error = 100%")
    ax.set(yscale="log", xlabel="std of query/key entries (norm ≈ std·√D)",
           ylabel="median relative error vs softmax",
           title=f"Random features vs query/key norm (D = {dim}, {num_features} features)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return results
