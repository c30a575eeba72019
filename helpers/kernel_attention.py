"""Harnesses for the ``kernel_attention`` assignment.

Everything here takes the *student's* functions as arguments and only builds inputs, measures
and plots. No function the students write (softmax attention, kernels, feature maps, the
associative or causal linear attention, random features) is implemented here; exact references
inside the plots come from the student's own ``softmax_attention``.

The one feature map provided, :func:`elu_feature_map` (``elu(x) + 1``, Katharopoulos et al.,
2020), is a cheap positive map used to time causal linear attention; it is not part of any
graded question.
"""

from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Callable, Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter
import numpy as np
import torch
import torch.nn.functional as F

from .memory import largest_intermediate
from .progress import progress
from .validation import check_tensor

__all__ = [
    "elu_feature_map",
    "causal_mask",
    "relative_error",
    "plot_rff_error",
    "plot_causal_timing",
    "crossover_length",
    "plot_feature_map_error",
    "largest_intermediate",
]


# ----------------------------------------------------------------------------- small tools
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """The positive feature map ``elu(x) + 1`` of "Transformers are RNNs" (Katharopoulos et al.).

    Parameters
    ----------
    x : torch.Tensor, shape (..., D), floating point

    Returns
    -------
    torch.Tensor, shape (..., D)
        Every entry is strictly positive, so linear attention with this map never divides by
        zero.
    """
    check_tensor("x", x, min_ndim=1, floating=True)
    return F.elu(x) + 1.0


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (n, n) mask that is True where query ``i`` may attend to key ``j``, i.e. ``j <= i``.

    Parameters
    ----------
    n : int
        Sequence length, at least 1.
    device : torch.device or str, optional

    Returns
    -------
    torch.Tensor, shape (n, n), dtype bool
        Lower-triangular (diagonal included); broadcasts against (..., n, n) score tensors.
    """
    if not isinstance(n, Integral) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return torch.ones(int(n), int(n), dtype=torch.bool, device=device).tril()


def relative_error(approx: torch.Tensor, exact: torch.Tensor) -> float:
    """Relative Frobenius error ``||approx - exact|| / ||exact||`` over all entries.

    Parameters
    ----------
    approx, exact : torch.Tensor, same shape

    Returns
    -------
    float
        ``inf`` when ``approx`` holds nan or inf (a failed approximation, not a crash).
    """
    check_tensor("approx", approx, floating=True)
    check_tensor("exact", exact, floating=True)
    if approx.shape != exact.shape:
        raise ValueError(f"approx has shape {tuple(approx.shape)} but exact has shape {tuple(exact.shape)}")
    approx, exact = approx.detach().double(), exact.detach().double()
    if not torch.isfinite(approx).all():
        return math.inf
    return float((approx - exact).norm() / exact.norm().clamp_min(1e-300))


# ----------------------------------------------------------------------------- argument checks
def _check_callable(name: str, fn) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be a function, got {type(fn).__name__}")


def _check_sizes(name: str, values, *, minimum: int = 1) -> list[int]:
    if isinstance(values, Integral):
        values = [values]
    try:
        values = list(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}") from None
    if not values or not all(isinstance(v, Integral) and not isinstance(v, bool) and v >= minimum for v in values):
        raise ValueError(f"{name} must be a non-empty sequence of ints >= {minimum}, got {values!r}")
    return [int(v) for v in values]


def _check_positive(name: str, value) -> float:
    if not isinstance(value, Real) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _output_of(name: str, result, shape: tuple[int, ...]) -> torch.Tensor:
    """The attention output of a student function (first element when it returns a tuple)."""
    shape = tuple(shape)
    if isinstance(result, (tuple, list)):
        if not result:
            raise TypeError(f"{name} returned an empty {type(result).__name__}")
        result = result[0]
    if not isinstance(result, torch.Tensor):
        raise TypeError(
            f"{name} returned {type(result).__name__}, expected a torch.Tensor of shape {shape}: "
            "is the function implemented?"
        )
    if tuple(result.shape) != tuple(shape):
        raise ValueError(f"{name} returned shape {tuple(result.shape)}, expected {tuple(shape)}")
    return result


def _qkv(generator: torch.Generator, batch: int, n: int, d: int, m: int, scale: float,
         dtype: torch.dtype = torch.float64):
    Q = torch.randn(batch, n, d, generator=generator, dtype=torch.float64) * scale  # (B, N, D)
    K = torch.randn(batch, n, d, generator=generator, dtype=torch.float64) * scale  # (B, N, D)
    V = torch.randn(batch, n, m, generator=generator, dtype=torch.float64)  # (B, N, M)
    return Q.to(dtype), K.to(dtype), V.to(dtype)


def _new_axes(ax, ncols: int, width: float = 5.2, height: float = 3.8):
    if ax is None:
        fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
        return fig, list(axes[0])
    axes = list(np.atleast_1d(ax))
    if len(axes) != ncols:
        raise ValueError(f"ax must hold {ncols} matplotlib Axes, got {len(axes)}")
    return axes[0].figure, axes


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


# ----------------------------------------------------------------------------- timing
def _best_times(fns: Sequence[Callable], args: tuple, repeats: int, min_seconds: float,
                max_calls: int = 100) -> list[float]:
    """Best wall-clock time of each function on ``args``, the functions called in turn.

    Calling them alternately (one call of each, again and again) exposes both to the same
    background load, so a burst of other work slows both instead of deciding the comparison. Each
    function is called at least ``repeats`` times, and a short one again until ``min_seconds`` have
    been spent on it (at most ``max_calls`` calls), so the total time stays bounded.
    """
    best = [math.inf] * len(fns)
    spent = [0.0] * len(fns)
    calls = [0] * len(fns)

    def wanted(i: int) -> bool:
        return calls[i] < repeats or (spent[i] < min_seconds and calls[i] < max_calls)

    while any(wanted(i) for i in range(len(fns))):
        for i, fn in enumerate(fns):
            if wanted(i):
                start = time.perf_counter()
                fn(*args)
                took = time.perf_counter() - start
                best[i], spent[i], calls[i] = min(best[i], took), spent[i] + took, calls[i] + 1
    return best


def _implausible(lengths: Sequence[int], times: Sequence[float], growth: float = 0.3) -> list[int]:
    """Indices of points worth timing again: slower than a longer length allows.

    The cost of either form grows with N (at least like N^0.3 per step here, also at lengths where
    fixed overheads dominate), so a time above ``times[j] * (N_i / N_j) ** growth`` for some longer
    length N_j means that another program slowed that point."""
    return [i for i in range(len(times) - 1)
            if any(times[i] > times[j] * (lengths[i] / lengths[j]) ** growth for j in range(i + 1, len(times)))]


def plot_causal_timing(causal_softmax: Callable, causal_linear: Callable, *,
                       lengths: Sequence[int] = (128, 256, 512, 1024, 2048, 4096, 8192),
                       dim: int = 32, value_dim: int = 32, batch: int = 1, repeats: int = 3,
                       seed: int = 0, ax=None, min_seconds: float = 0.2) -> list[dict]:
    """Time causal softmax attention against causal linear attention and plot both against N.

    Each function is called on float32 inputs Q, K (batch, N, dim) and V (batch, N, value_dim)
    under ``torch.no_grad()``; after one warm-up call the best of ``repeats`` wall-clock times is
    kept (the minimum is the least noisy estimate of the cost). The two functions are called in
    turn, so background load hits both alike, and calls shorter than a few milliseconds are repeated
    (until about ``min_seconds`` have been spent, at most 100 calls). A length that came out slower
    than a longer one allows (the cost grows with N, so this is another program's burst) is timed
    again, twice at most, keeping the best time seen. The dotted line marks
    :func:`crossover_length` of the returned table: the smallest measured N from which linear
    attention is faster at that and every longer length.

    Parameters
    ----------
    causal_softmax, causal_linear : callable
        ``fn(Q, K, V) -> out`` (or ``(out, weights)``), out of shape (batch, N, value_dim). Build
        the causal mask or pick the feature map inside, e.g.
        ``lambda Q, K, V: causal_linear_attention(Q, K, V, elu_feature_map)``.
    lengths : sequence of int
        Sequence lengths N to time.
    dim, value_dim, batch : int
        D, M and the batch size.
    repeats : int
        Timed calls per length and function (at least).
    min_seconds : float
        Keep timing a short call until this much time has been spent on it.
    seed : int
    ax : matplotlib Axes, optional

    Returns
    -------
    list of dict
        One row per length: ``{"N", "softmax_s", "linear_s", "speedup"}`` where ``speedup`` is
        softmax time / linear time (above 1 means linear attention is faster).
    """
    _check_callable("causal_softmax", causal_softmax)
    _check_callable("causal_linear", causal_linear)
    lengths = sorted(set(_check_sizes("lengths", lengths)))
    dim = _check_sizes("dim", dim)[0]
    value_dim = _check_sizes("value_dim", value_dim)[0]
    batch = _check_sizes("batch", batch)[0]
    repeats = _check_sizes("repeats", repeats)[0]
    min_seconds = 0.0 if min_seconds == 0 else _check_positive("min_seconds", min_seconds)
    gen = torch.Generator().manual_seed(seed)
    fns = (causal_softmax, causal_linear)
    inputs = {}
    times = {}  # N -> [softmax seconds, linear seconds]
    with torch.no_grad():
        for n in progress(lengths, desc="timing"):
            inputs[n] = _qkv(gen, batch, n, dim, value_dim, 1.0, torch.float32)
            for name, fn in zip(("causal_softmax", "causal_linear"), fns):
                _output_of(name, fn(*inputs[n]), inputs[n][2].shape)  # warm-up and shape check
            times[n] = _best_times(fns, inputs[n], repeats, min_seconds)
        for _ in range(2):  # a second look at points a burst of other work made too slow
            suspect = {lengths[i] for k in range(len(fns)) for i in _implausible(lengths, [times[n][k] for n in lengths])}
            for n in sorted(suspect):
                again = _best_times(fns, inputs[n], repeats, min_seconds)
                times[n] = [min(a, b) for a, b in zip(times[n], again)]
    table = [{"N": n, "softmax_s": times[n][0], "linear_s": times[n][1], "speedup": times[n][0] / times[n][1]}
             for n in lengths]

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4.2))
    ns = [r["N"] for r in table]
    ax.plot(ns, [r["softmax_s"] for r in table], "o-", label="causal softmax attention")
    ax.plot(ns, [r["linear_s"] for r in table], "s-", label="causal linear attention")
    cross = crossover_length(table)
    if cross is not None:
        ax.axvline(cross, color="gray", ls=":", label=f"linear faster at every N ≥ {cross}")
    ax.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="seconds per call (best)",
           title=f"Causal attention run time (D = {dim}, M = {value_dim}, batch {batch}, CPU)")
    ax.set_xticks(ns, [str(n) for n in ns], rotation=45 if len(ns) > 8 else 0)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9, loc="lower right")  # run time grows with N: the lower right stays empty
    ax.figure.tight_layout()
    return table


def crossover_length(table: Sequence[dict]) -> int | None:
    """Smallest N from which on linear attention is faster at every measured length.

    Parameters
    ----------
    table : list of dict
        As returned by :func:`plot_causal_timing`.

    Returns
    -------
    int or None
        None when softmax attention is still faster at the largest N.
    """
    rows = list(table)
    if not rows or not all({"N", "softmax_s", "linear_s"} <= set(r) for r in rows):
        raise ValueError("table must be the list of rows returned by plot_causal_timing")
    cross = None
    for row in sorted(rows, key=lambda r: r["N"], reverse=True):
        if row["linear_s"] < row["softmax_s"]:
            cross = row["N"]
        else:
            break
    return cross


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
