"""Plots of the encoder-decoder part of the attention-foundations notebook: exact match against
sentence length, and where the attention decoder looks while it decodes one sentence."""

from __future__ import annotations

import matplotlib.pyplot as plt

from .data import UPPER, VOCAB, make_batch
from .seq2seq import Seq2Seq, greedy_decode

__all__ = ["plot_accuracy_by_length", "plot_alignment"]


def plot_accuracy_by_length(results: dict[str, dict[int, float]], *, trained_up_to: int | None = None, ax=None):
    """Exact-match accuracy against sentence length, one line per model."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 4))
    # big hollow markers under small filled ones: where two curves coincide, both stay visible
    styles = [("o", 11, "-"), ("s", 5, "--"), ("^", 8, "-."), ("D", 4, ":")]
    for i, (name, scores) in enumerate(results.items()):
        marker, size, line = styles[i % len(styles)]
        ax.plot(list(scores), [100 * s for s in scores.values()], marker=marker, markersize=size, linestyle=line,
                markerfacecolor="none" if i % 2 == 0 else None, markeredgewidth=1.8, label=name)
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            same = [n for n in results[a] if n in results[b] and abs(results[a][n] - results[b][n]) < 1e-9]
            if same:
                where = "at every length" if len(same) == len(results[a]) else "at " + ", ".join(map(str, same))
                ax.plot([], [], " ", label=f"{a} and {b} coincide\n{where}")
    if trained_up_to is not None:
        ax.axvline(trained_up_to, color="gray", linestyle=":", label=f"longest training\nsentence ({trained_up_to})")
    ax.set_xlabel("sentence length (characters)")
    ax.set_ylabel("exact match (% of sentences)")
    ax.set_ylim(-4, 104)
    ax.set_title("Whole sentence right, by length")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # outside: never over a point
    ax.figure.tight_layout()
    return ax


def plot_alignment(model: Seq2Seq, task: str, text: str, ax=None):
    """The attention weights of one greedy decoding: output characters down, source across."""
    target = text.upper() if task == UPPER else text.lower()
    batch = make_batch([(task, text, target)])
    ids, weights = greedy_decode(model, batch)
    if weights is None:
        raise ValueError("this model's decoder returns no attention weights")
    output = [VOCAB.tokens[i] for i in ids[0].tolist() if i != VOCAB.PAD]
    source = [VOCAB.tokens[i] for i in batch.src[0].tolist()]
    w = weights[0, : len(output)]
    if ax is None:
        _, ax = plt.subplots(figsize=(0.28 * len(source) + 2, 0.28 * len(output) + 1.5))
    # scaled to the largest weight, so a nearly uniform map still shows its pattern; the colourbar
    # marks what uniform attention over the source would be
    top, uniform = w.max().item(), 1 / len(source)
    image = ax.imshow(w.numpy(), cmap="viridis", vmin=0, vmax=max(top, 1.5 * uniform), aspect="auto")
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.03, pad=0.02,
                             label=f"attention weight (0 to {top:.2f}; uniform = 1/{len(source)} = {uniform:.3f})")
    bar.ax.axhline(uniform, color="white", linewidth=2)
    bar.ax.axhline(uniform, color="black", linewidth=1, linestyle="--")
    show = lambda t: "␣" if t == " " else t  # noqa: E731
    ax.set_xticks(range(len(source)), [show(t) for t in source], fontsize=8)
    ax.set_yticks(range(len(output)), [show(t) for t in output], fontsize=8)
    ax.set_xlabel("source (encoder states)")
    ax.set_ylabel("output character")
    ax.set_title(f"Where the decoder looks: {VOCAB.decode(ids[0])!r}")
    return ax
