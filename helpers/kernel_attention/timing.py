"""Run time of causal softmax attention against causal linear attention: timing that stands up to
background load, the plot against the sequence length, and the length from which linear attention
is faster."""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter
import torch

from ..progress import progress
from .harness import _check_callable, _check_positive, _check_sizes, _output_of, _qkv

__all__ = ["plot_causal_timing", "crossover_length"]


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
