"""Plots shared by the notebooks."""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import MaxNLocator

from .validation import check_tensor

__all__ = ["plot_attention"]


def _decimals(step: float) -> int:
    """Decimals that tell values ``step`` apart (0.1 -> 1, 0.002 -> 3)."""
    return max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 2


def plot_attention(weights, *, query_labels: Sequence[str] | None = None,
                   key_labels: Sequence[str] | None = None, title: str = "Attention weights",
                   ax=None, annotate: bool | None = None, cmap: str = "viridis",
                   vmin: float | None = None, vmax: float | None = None, mark_uniform: bool | None = None):
    """Heatmap of an attention matrix: one row per query, one column per key.

    The colours span the smallest to the largest weight shown (the colourbar's label gives that
    range), so a nearly uniform map still shows which keys get a little more. When the rows sum
    to one, the colourbar marks 1 / (number of keys), the weight every key would get from a
    query that spreads its attention evenly.

    Parameters
    ----------
    weights : torch.Tensor or array, shape (T_q, T_k)
        Attention weights (usually rows summing to 1). A leading batch/head dimension of size 1
        is squeezed away.
    query_labels, key_labels : sequence of str, optional
        Tick labels (e.g. tokens); lengths must match T_q and T_k.
    title : str
        Axes title.
    ax : matplotlib Axes, optional
        Draw here instead of a new figure.
    annotate : bool, optional
        Write each weight in its cell; defaults to True for matrices up to 12 x 12.
    cmap : str
        Matplotlib colour map.
    vmin, vmax : float, optional
        Fix the ends of the colour scale (e.g. 0 and 1, or the same range for two maps drawn side
        by side); by default the smallest and the largest weight.
    mark_uniform : bool, optional
        Mark 1 / T_k on the colourbar. By default it is marked when every row sums to 1 and
        1 / T_k lies inside the colour scale.

    Returns
    -------
    matplotlib.axes.Axes
    """
    w = torch.as_tensor(weights).detach().cpu()
    while w.ndim > 2 and w.shape[0] == 1:
        w = w[0]
    check_tensor("weights", w, ndim=2)
    w = w.float()
    n_q, n_k = w.shape
    for name, labels, n in (("query_labels", query_labels, n_q), ("key_labels", key_labels, n_k)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels but weights has {n} along that axis")
    finite = w[torch.isfinite(w)]
    low = float(finite.min()) if vmin is None and finite.numel() else (0.0 if vmin is None else float(vmin))
    high = float(finite.max()) if vmax is None and finite.numel() else (1.0 if vmax is None else float(vmax))
    constant = high - low <= 1e-6 * max(abs(high), 1e-9)
    if constant:  # every weight the same: one colour, and the label says which value
        low, high = min(0.0, low), max(high, low + 1e-9)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.45 * max(n_k, 4), 0.8 + 0.4 * max(n_q, 4)))
    image = ax.imshow(w.numpy(), cmap=cmap, vmin=low, vmax=high, aspect="auto")
    decimals = max(2, _decimals((high - low) / 10))
    if constant:
        label = f"weight: every entry {float(finite.max()):.{decimals}f}" if finite.numel() else "weight"
    else:
        label = f"weight, {low:.{decimals}f} to {high:.{decimals}f}"
    uniform = 1.0 / n_k
    if mark_uniform is None:
        rows_sum_to_one = finite.numel() == w.numel() and bool(torch.allclose(w.sum(-1), torch.ones(n_q), atol=1e-3))
        mark_uniform = n_k > 1 and rows_sum_to_one
    mark_uniform = bool(mark_uniform) and low <= uniform <= high
    if mark_uniform:
        label += " (red: uniform)"
    colorbar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=label)
    if mark_uniform:
        # the usual ticks, minus those too close to the mark to read, plus the mark itself
        ticks = [t for t in MaxNLocator(nbins=5).tick_values(low, high)
                 if low - 1e-12 <= t <= high + 1e-12 and abs(t - uniform) > 0.09 * (high - low)]
        tick_decimals = max(_decimals(ticks[1] - ticks[0]) if len(ticks) > 1 else 2, 1)
        colorbar.set_ticks(ticks + [uniform],
                           labels=[f"{t:.{tick_decimals}f}" for t in ticks] + [f"1/{n_k}"])
        colorbar.ax.axhline(uniform, color="red", lw=1.5)
        colorbar.ax.get_yticklabels()[-1].set_color("red")
    ax.set_xlabel("key position" if key_labels is None else "key")
    ax.set_ylabel("query position" if query_labels is None else "query")
    ax.set_title(title)
    ax.set_xticks(range(n_k), key_labels if key_labels is not None else range(n_k),
                  rotation=90 if key_labels is not None else 0)
    ax.set_yticks(range(n_q), query_labels if query_labels is not None else range(n_q))
    if annotate if annotate is not None else max(n_q, n_k) <= 12:
        threshold = low + 0.6 * (high - low)  # light cells (viridis' yellow end) get black text
        cell_decimals = 2 if high - low >= 0.1 or constant else 3
        # the numbers grow with the cells (7 to 10 pt), so a wide figure shrunk to the notebook's width
        # keeps them legible
        box, (fig_w, fig_h) = ax.get_position(), ax.figure.get_size_inches()
        cell_points = 72 * min(box.width * fig_w / n_k, box.height * fig_h / n_q)
        text_size = max(7.0, min(10.0, cell_points / (0.62 * (cell_decimals + 2) + 0.6)))  # the number fits its cell
        for i in range(n_q):
            for j in range(n_k):
                ax.text(j, i, f"{w[i, j]:.{cell_decimals}f}", ha="center", va="center", fontsize=text_size,
                        color="black" if w[i, j] > threshold else "white")
    return ax
