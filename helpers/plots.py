"""Plots shared by the notebooks."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch

from .validation import check_tensor

__all__ = ["plot_attention"]


def plot_attention(weights, *, query_labels: Sequence[str] | None = None,
                   key_labels: Sequence[str] | None = None, title: str = "Attention weights",
                   ax=None, annotate: bool | None = None, cmap: str = "viridis"):
    """Heatmap of an attention matrix: one row per query, one column per key.

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
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.45 * max(n_k, 4), 0.8 + 0.4 * max(n_q, 4)))
    image = ax.imshow(w.numpy(), cmap=cmap, vmin=0.0, vmax=max(1e-9, float(w.max())), aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    ax.set_xlabel("key position" if key_labels is None else "key")
    ax.set_ylabel("query position" if query_labels is None else "query")
    ax.set_title(title)
    ax.set_xticks(range(n_k), key_labels if key_labels is not None else range(n_k),
                  rotation=90 if key_labels is not None else 0)
    ax.set_yticks(range(n_q), query_labels if query_labels is not None else range(n_q))
    if annotate if annotate is not None else max(n_q, n_k) <= 12:
        threshold = 0.6 * float(w.max())
        for i in range(n_q):
            for j in range(n_k):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if w[i, j] > threshold else "white")
    return ax
