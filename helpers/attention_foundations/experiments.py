"""Simulations of the attention-foundations notebook, with their plots: the moments of q.k and
softmax saturation, positional encodings and relative position biases, the receptive field of argmax
attention, and the key-norm experiment of the attention exploration.

Each takes the student's functions as arguments; every random draw comes from a generator of its
own, so the global random state is never touched.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import torch

from ..validation import check_tensor

__all__ = [
    "plot_softmax_saturation",
    "plot_moments",
    "plot_position_similarity",
    "plot_relative_bias",
    "random_argmax_sources",
    "orthogonal_keys",
    "key_norm_experiment",
    "plot_key_norm_experiment",
]


def _generator(seed: int) -> torch.Generator:
    """A CPU generator of its own, so the simulations never touch the global random state."""
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------- scaled dot products

def plot_moments(dot_product_moments: Callable, dot_product_mean: Callable, dot_product_variance: Callable, *,
                 dims: Sequence[int], mu: float, sigma: float, num_samples: int, seed: int = 0):
    """Simulated against closed-form mean and variance of q.k, for growing d (two panels).

    Returns the rows ``{"d", "mean", "mean_formula", "var", "var_formula"}`` that were plotted.
    """
    generator = _generator(seed)
    rows = []
    for d in dims:
        mean, var = (float(x) for x in dot_product_moments(d, mu, sigma, num_samples, generator))
        rows.append({"d": d, "mean": mean, "mean_formula": float(dot_product_mean(d, mu, sigma)),
                     "var": var, "var_formula": float(dot_product_variance(d, mu, sigma))})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, key, label in ((axes[0], "mean", "mean of q.k"), (axes[1], "var", "variance of q.k")):
        ax.plot(dims, [r[f"{key}_formula"] for r in rows], color="black", label="your closed form")
        ax.plot(dims, [r[key] for r in rows], "o", color="tab:orange", label=f"simulated ({num_samples:,} pairs)")
        ax.set_xscale("log", base=2)
        positive = all(r[k] > 0 for r in rows for k in (key, f"{key}_formula"))
        ax.set_yscale("log" if positive else "symlog")  # a zero or negative mean cannot go on a log axis
        ax.set_xlabel("dimension d")
        ax.set_ylabel(label)
        ax.set_title(f"{label}, mu = {mu}, sigma = {sigma}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return rows


def plot_softmax_saturation(scale_for_unit_variance: Callable, *, dims: Sequence[int], num_keys: int = 16,
                            trials: int = 400, seed: int = 0):
    """How peaked softmax(K q / s) is for standard normal q and keys, with s = 1 and with the
    student's scale, as d grows (left: spread of the scores; right: the largest weight).

    Returns the rows ``{"d", "score_std", "score_std_scaled", "top_weight", "top_weight_scaled"}``.
    """
    generator = _generator(seed)
    rows = []
    for d in dims:
        q = torch.randn(trials, 1, d, generator=generator, dtype=torch.float64)
        K = torch.randn(trials, num_keys, d, generator=generator, dtype=torch.float64)
        scores = (q * K).sum(-1)  # (trials, num_keys)
        s = float(scale_for_unit_variance(d))
        rows.append({"d": d, "score_std": scores.std().item(), "score_std_scaled": (scores / s).std().item(),
                     "top_weight": torch.softmax(scores, -1).max(-1).values.mean().item(),
                     "top_weight_scaled": torch.softmax(scores / s, -1).max(-1).values.mean().item()})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, key, label in ((axes[0], "score_std", "standard deviation of the scores"),
                           (axes[1], "top_weight", "mean largest softmax weight")):
        ax.plot(dims, [r[key] for r in rows], "o-", label="scores q.k (s = 1)")
        ax.plot(dims, [r[f"{key}_scaled"] for r in rows], "s-", label="scores q.k / s, your s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("dimension d")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_yscale("log", base=2)
    axes[1].axhline(1 / num_keys, color="gray", linestyle=":", label=f"uniform (1/{num_keys})")
    axes[1].set_ylim(0, 1.02)
    axes[1].legend(loc="center right")  # between the rising s = 1 curve and the flat scaled one
    axes[0].set_title("Spread of the scores")
    axes[1].set_title(f"Saturation: one key takes it all ({num_keys} keys)")
    fig.tight_layout()
    return rows


# ----------------------------------------------------------------------------- positions

def plot_position_similarity(encodings: dict[str, torch.Tensor], *, reference_position: int | None = None):
    """For each encoding (T, d): the (T, T) map of dot products between positions, and below it
    the row of one position against every other."""
    fig, axes = plt.subplots(2, len(encodings), figsize=(5.5 * len(encodings), 8.5),
                             gridspec_kw={"height_ratios": [3, 1.4]}, squeeze=False)
    for col, (name, pe) in enumerate(encodings.items()):
        check_tensor(name, pe, ndim=2, floating=True)
        sims = (pe @ pe.T).detach().double()
        T = sims.shape[0]
        t0 = T // 2 if reference_position is None else reference_position
        low, high = sims.min().item(), sims.max().item()
        if low >= 0:  # nothing to centre: spend the whole colour scale on the values that occur
            image = axes[0, col].imshow(sims.numpy(), cmap="viridis", vmin=low, vmax=high)
        else:
            image = axes[0, col].imshow(sims.numpy(), cmap="RdBu_r", vmin=-max(-low, high), vmax=max(-low, high))
        fig.colorbar(image, ax=axes[0, col], fraction=0.046, pad=0.04, label=f"dot product ({low:.3g} to {high:.3g})")
        axes[0, col].set_title(f"{name}: p_s . p_t")
        axes[0, col].set_xlabel("position t")
        axes[0, col].set_ylabel("position s")
        axes[1, col].plot(range(T), sims[t0].numpy())
        axes[1, col].axvline(t0, color="gray", linestyle=":")
        axes[1, col].set_xlabel("position t")
        axes[1, col].set_ylabel(f"p_{t0} . p_t")
        axes[1, col].set_title(f"{name}: position {t0} against every position t")
        axes[1, col].grid(True, alpha=0.3)
    fig.tight_layout()
    return axes


def plot_relative_bias(bias: torch.Tensor):
    """One heatmap per head of a (heads, T, T) relative-position bias, on a scale centred at 0."""
    check_tensor("bias", bias, ndim=3)
    bias = bias.detach().double()
    limit = max(1e-9, bias.abs().max().item())
    fig, axes = plt.subplots(1, bias.shape[0], figsize=(5.5 * bias.shape[0], 4.5), squeeze=False)
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(bias[h].numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="bias added to the score")
        ax.set_title(f"head {h}: bias of the pair (i, j)")
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
    fig.tight_layout()
    return axes


def random_argmax_sources(T: int, heads: int, layers: int, dim: int = 16, seed: int = 0) -> list[torch.Tensor]:
    """Which key each query picks under argmax attention, with random queries and keys.

    Returns ``layers`` LongTensors of shape (heads, T): entry [h, i] is the position that query i
    of head h attends to in that layer (layer 1 first).
    """
    generator = _generator(seed)
    sources = []
    for _ in range(layers):
        Q = torch.randn(heads, T, dim, generator=generator)
        K = torch.randn(heads, T, dim, generator=generator)
        sources.append((Q @ K.transpose(1, 2)).argmax(dim=-1))
    return sources


# ----------------------------------------------------------------------------- attention exploration

def orthogonal_keys(n: int, d: int, norm: float = 1.0, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """``n`` mutually orthogonal vectors of length ``norm`` in R^d, as the rows of an (n, d) tensor."""
    if n > d:
        raise ValueError(f"at most d = {d} orthogonal vectors exist in R^{d}, asked for {n}")
    generator = _generator(seed)
    basis, _ = torch.linalg.qr(torch.randn(d, n, generator=generator, dtype=torch.float64))
    return (norm * basis.T).to(dtype)


def _softmax_share(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    return torch.softmax((keys @ q.unsqueeze(-1)).squeeze(-1), dim=-1)  # (trials, n)


def key_norm_experiment(average_query: Callable, copy_query: Callable, *, n: int = 8, d: int = 32, beta: float = 20.0,
                        epsilon: float = 1e-4, trials: int = 2000, seed: int = 0) -> dict[str, torch.Tensor]:
    """The practical's question 1(c)-(d), simulated.

    Key means are orthogonal unit vectors ``mu_i``; every key is drawn as ``mu_i`` plus noise of
    variance ``epsilon`` per coordinate, and key ``a = 0`` also gets a random length: its covariance
    adds ``1/2 mu_a mu_a^T``. One head uses ``average_query(means, 0, 1, beta)``; two heads use
    ``copy_query(means, 0, beta)`` and ``copy_query(means, 1, beta)`` and average their outputs.

    Returns, per trial, the weight that the output puts on value a for each setup
    (``"one_head"`` and ``"two_heads"``) and the signed length of key a along its mean direction
    (``"length_a"``; negative when the draw flipped the key).
    """
    generator = _generator(seed)
    means = orthogonal_keys(n, d, seed=seed)
    keys = means + math.sqrt(epsilon) * torch.randn(trials, n, d, generator=generator, dtype=torch.float64)
    stretch = torch.randn(trials, 1, generator=generator, dtype=torch.float64) / math.sqrt(2)
    keys[:, 0] += stretch * means[0]
    q_avg = check_tensor("average_query(...)", average_query(means, 0, 1, beta), shape=(d,))
    q_a = check_tensor("copy_query(...)", copy_query(means, 0, beta), shape=(d,))
    q_b = check_tensor("copy_query(...)", copy_query(means, 1, beta), shape=(d,))
    one_head = _softmax_share(q_avg.to(keys.dtype), keys)[:, 0]
    two_heads = 0.5 * (_softmax_share(q_a.to(keys.dtype), keys)[:, 0] + _softmax_share(q_b.to(keys.dtype), keys)[:, 0])
    return {"one_head": one_head, "two_heads": two_heads, "length_a": keys[:, 0] @ means[0]}


def plot_key_norm_experiment(result: dict[str, torch.Tensor]):
    """Left: the weight on value a against the length of key a; right: its histogram."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for name, label, color in (("one_head", "one head, averaging query", "tab:red"),
                               ("two_heads", "two heads, one copying query each", "tab:blue")):
        axes[0].plot(result["length_a"].numpy(), result[name].numpy(), ".", markersize=3, alpha=0.5, color=color,
                     label=label)
        axes[1].hist(result[name].numpy(), bins=40, range=(0, 1), alpha=0.6, color=color, label=label)
    axes[0].axhline(0.5, color="gray", linestyle=":", label="0.5: the average we asked for")
    axes[0].set_xlabel("length of key a along its mean (negative: the draw flipped it)")
    axes[0].set_ylabel("weight of value a in the output")
    axes[0].set_title("The output against the length of key a")
    axes[1].set_xlabel("weight of value a in the output (0.5 = the average we asked for)")
    axes[1].set_ylabel("trials")
    axes[1].set_title("Spread over the trials")
    axes[1].axvline(0.5, color="gray", linestyle=":")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    # one legend for both panels, below them: inside, it covered points or the tallest bar
    fig.legend(handles, labels, loc="lower center", ncol=3, markerscale=4, frameon=False)
    return axes
