"""Data, views and plots for the attention-visualization notebook.

The homework's sentences, batching with the tokenizers' right padding, the token labels the views
show, a GPT-side counterpart of bertviz's neuron view (one head's queries, keys and their products
for one token), and the plots of the head scores, entropies and key similarities the students
compute. The models come from :mod:`helpers.models`; bertviz's views from
:mod:`helpers.attention_views`.
"""

from __future__ import annotations

import math

from typing import Sequence

import matplotlib.pyplot as plt
import torch

from .validation import check_tensor

__all__ = [
    "GPT_EXAMPLES", "PARTY_PAIR", "PLAY_SENTENCES", "THANKSGIVING_PAIR", "HAPPY_PAIR", "SCORE_SENTENCES",
    "reverse_words", "encode", "token_labels", "run_gpt", "run_bert",
    "plot_query_key", "plot_head_scores", "top_heads", "plot_entropy", "plot_key_cosines",
]

# The homework's examples.
GPT_EXAMPLES = [
    "The dog ran",
    "The dog sitting in the car",
    "Jaime Salazar is running for election. Despite his party affiliation, Mr.",
]
PARTY_PAIR = ("I wanted to have a party", "I bought a cake for it.")
PLAY_SENTENCES = ("I was going to play at the park.", "I was going to a play in the park")
THANKSGIVING_PAIR = ("I wanted to have a party", "I like Thanksgiving dinner")
HAPPY_PAIR = ("I am happy", "I am not sad")

# Sentences for the head scores: varied lengths and structure, some as pairs (two [SEP] tokens).
SCORE_SENTENCES = [
    ("The cat sat on the mat.", None),
    ("She gave her brother the keys before she left for work.", None),
    ("Rain is expected tomorrow", "so bring an umbrella."),
    ("The committee approved the new budget after a long debate.", None),
    ("Where did you put the book?", "It is on the kitchen table."),
    ("Two trains left the station at noon, one heading north and one heading south.", None),
    ("He plays the piano", "and his sister plays the violin."),
    ("A small boat drifted slowly across the quiet lake.", None),
]


def reverse_words(sentence: str) -> str:
    """The sentence with its words in reverse order (punctuation stays on its word)."""
    return " ".join(reversed(sentence.split()))


def encode(tokenizer, examples: Sequence):
    """A right-padded batch (``input_ids``, ``attention_mask``, and ``token_type_ids`` for BERT) of
    ``examples``: texts, or ``(sentence_a, sentence_b)`` pairs where ``sentence_b`` may be None."""
    encoded = []
    for example in examples:
        first, second = (example, None) if isinstance(example, str) else example
        encoded.append(tokenizer(first, second))
    return tokenizer.pad(encoded, padding=True, return_tensors="pt")


def token_labels(tokenizer, ids) -> list[str]:
    """Readable tokens for one sequence of ids: GPT-2-style byte markers (``Ġ``) shown as spaces."""
    return [t.replace("Ġ", " ").replace("Ċ", "\\n") for t in tokenizer.convert_ids_to_tokens(list(map(int, ids)))]


@torch.no_grad()
def run_gpt(model, tokenizer, text: str):
    """``(attentions, tokens)`` of one text through the GPT-style model: a per-layer tuple of
    ``(1, heads, T, T)`` tensors, as bertviz's views take them."""
    inputs = tokenizer(text, return_tensors="pt")
    return model(**inputs).attentions, token_labels(tokenizer, inputs["input_ids"][0])


@torch.no_grad()
def run_bert(model, tokenizer, sentence_a: str, sentence_b: str | None = None):
    """``(attentions, tokens, sentence_b_start)`` of one sentence or a pair through the BERT-style
    model; ``sentence_b_start`` is None for a single sentence."""
    inputs = tokenizer(sentence_a, sentence_b, return_tensors="pt")
    tokens = token_labels(tokenizer, inputs["input_ids"][0])
    start = None
    if sentence_b is not None:
        start = int(inputs["token_type_ids"][0].tolist().index(1))
    return model(**inputs).attentions, tokens, start


def plot_query_key(q: torch.Tensor, k: torch.Tensor, tokens: Sequence[str], position: int, *, title: str = ""):
    """The GPT-side neuron view: how one head scores the keys for the query at ``position``.

    ``q``, ``k``: ``(T, d)`` queries and keys of one head of one sequence (after the rotary
    embedding). Left: the query, the keys it may see, and their element-wise products, one row per
    token and one column per dimension. Right: the products summed (the scaled score q.k / sqrt(d))
    and the softmax over the visible keys (the attention weights).
    """
    check_tensor("q", q, ndim=2, floating=True)
    check_tensor("k", k, shape=tuple(q.shape), floating=True)
    T, d = q.shape
    if len(tokens) != T or not 0 <= position < T:
        raise ValueError(f"need {T} tokens and 0 <= position < {T}, got {len(tokens)} tokens and position {position}")
    q, k = q.detach().double().cpu(), k.detach().double().cpu()
    seen = k[: position + 1]  # a causal head sees the keys up to its own position
    products = q[position] * seen
    scores = products.sum(-1) / d ** 0.5
    weights = scores.softmax(-1)
    labels = list(tokens[: position + 1])
    rows = position + 1
    # rows of the grid: the query, a gap, the keys (one row per token), a gap for the x labels,
    # the two colour bars; heights in units of one token row (0.32 inch)
    ratios = [1, 0.45, rows, 1.7, 0.4]
    height = 1.3 + 0.32 * sum(ratios)  # 0.75 inch above for the titles, 0.55 below for the colour bar labels
    fig = plt.figure(figsize=(12, height))
    grid = fig.add_gridspec(5, 4, height_ratios=ratios, width_ratios=[6, 6, 1.3, 1.3], hspace=0.0, wspace=0.08,
                            top=1 - 0.75 / height, bottom=0.55 / height)
    limit = float(max(q[position].abs().max(), seen.abs().max()))
    query_ax = fig.add_subplot(grid[0, 0])
    query_image = query_ax.imshow(q[position][None].numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    query_ax.set_yticks([0], [f"query: {tokens[position]!r}"])
    query_ax.set_xticks([])
    query_ax.set_title("query and keys (one column per dimension)")
    key_ax = fig.add_subplot(grid[2, 0])
    key_ax.imshow(seen.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    key_ax.set_yticks(range(rows), [f"key: {t!r}" for t in labels])
    key_ax.set_xlabel("dimension")
    product_ax = fig.add_subplot(grid[2, 1])
    bound = float(products.abs().max())
    product_image = product_ax.imshow(products.numpy(), cmap="PuOr_r", vmin=-bound, vmax=bound, aspect="auto")
    product_ax.set_yticks([])
    product_ax.set_xlabel("dimension")
    product_ax.set_title("query x key, element-wise")
    score_ax = fig.add_subplot(grid[2, 2])
    score_ax.barh(range(rows), scores.numpy(), color=["tab:red" if s < 0 else "tab:blue" for s in scores])
    score_ax.axvline(0, color="black", lw=0.8)
    score_ax.set_ylim(rows - 0.5, -0.5)
    score_ax.set_yticks([])
    score_ax.set_title("q.k/sqrt(d)", fontsize=9)
    score_ax.tick_params(labelsize=8)
    weight_ax = fig.add_subplot(grid[2, 3])
    weight_ax.barh(range(rows), weights.numpy(), color="tab:green")
    weight_ax.set_ylim(rows - 0.5, -0.5)
    weight_ax.set_xlim(0, 1)
    weight_ax.set_yticks([])
    weight_ax.set_title("weight", fontsize=9)
    weight_ax.tick_params(labelsize=8)
    for ax in (fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[0, 2]), fig.add_subplot(grid[0, 3])):
        ax.axis("off")
    # colour bars last, so that the axes above keep their order in fig.axes
    fig.colorbar(query_image, cax=fig.add_subplot(grid[4, 0]), orientation="horizontal",
                 label="entry of the query or key vector")
    fig.colorbar(product_image, cax=fig.add_subplot(grid[4, 1]), orientation="horizontal",
                 label="query entry x key entry (a row sums to q.k)")
    fig.suptitle(title or f"how the query of {tokens[position]!r} scores each key it can see")
    return fig


def plot_head_scores(scores: dict[str, torch.Tensor], *, title: str = "what each head attends to"):
    """One heatmap per score, layers down and heads across, on a common 0..1 colour scale.

    The panels are laid out three to a row (two when there are four, one row when there are at
    most three), sized so that a notebook shows them without zooming: 9 pt tick labels, and the
    figure's height fitted to the panels' shape, so no empty band is left around them.
    """
    for name, score in scores.items():
        check_tensor(name, score, ndim=2)
    if not scores:
        raise ValueError("scores is empty: pass at least one (layers, heads) score")
    count = len(scores)
    ncols = 2 if count == 4 else min(3, count)
    nrows = math.ceil(count / ncols)
    layers, heads = next(iter(scores.values())).shape
    width = 9.5
    spare = nrows * ncols > count  # an empty slot holds the colourbar; else it stands on the right
    panel = (width - (0.8 if spare else 2.0)) / ncols  # inches per panel, margins (and colourbar) taken off
    row_height = panel * layers / heads + 0.7  # the map, its title, its tick labels and axis label
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, nrows * row_height + 0.35), squeeze=False,
                             layout="constrained")
    shown = list(axes.flat)
    for ax, (name, score) in zip(shown, scores.items()):
        image = ax.imshow(score.detach().float(), vmin=0, vmax=1, cmap="viridis")
        ax.set_title(name.replace("_", " "), fontsize=11)
        ax.set_xlabel("head", fontsize=10)
        ax.set_ylabel("layer", fontsize=10)
        ax.set_xticks(range(score.shape[1]))
        ax.set_yticks(range(score.shape[0]))
        ax.tick_params(labelsize=9, length=2, pad=2)
    for ax in shown[count:]:
        ax.set_axis_off()
    if spare:
        bar = shown[count].inset_axes([0.1, 0.55, 0.8, 0.12])
        fig.colorbar(image, cax=bar, orientation="horizontal", label="mean attention weight")
        bar.tick_params(labelsize=9)
    else:
        fig.colorbar(image, ax=shown, shrink=0.9, aspect=30, label="mean attention weight")
    fig.suptitle(title, fontsize=12)
    return fig


def top_heads(score: torch.Tensor, n: int = 3) -> list[tuple[int, int, float]]:
    """The ``n`` heads with the highest score, as ``(layer, head, score)``, best first."""
    check_tensor("score", score, ndim=2)
    values, flat = score.flatten().topk(min(n, score.numel()))
    heads = score.shape[1]
    return [(int(i) // heads, int(i) % heads, float(v)) for v, i in zip(values, flat)]


def plot_entropy(trained: torch.Tensor, untrained: torch.Tensor, uniform: float):
    """Mean attention entropy of every head, trained against untrained, per layer; ``uniform`` is
    the entropy of spreading the weight evenly over the keys (drawn as a line)."""
    check_tensor("trained", trained, ndim=2)
    check_tensor("untrained", untrained, shape=tuple(trained.shape))
    layers, heads = trained.shape
    fig, ax = plt.subplots(figsize=(8, 4))
    for values, label, colour in ((trained, "trained", "tab:blue"), (untrained, "randomly initialized", "tab:orange")):
        for layer in range(layers):
            x = layer + torch.linspace(-0.25, 0.25, heads)
            ax.scatter(x, values[layer].detach(), s=14, color=colour, label=label if layer == 0 else None)
    ax.axhline(uniform, color="grey", linestyle="--", label="uniform over the keys")
    ax.set_xticks(range(layers), [f"layer {i}" for i in range(layers)])
    ax.set_ylabel("mean entropy (nats)")
    ax.set_ylim(0, uniform * 1.35)  # room above the uniform line for the legend
    ax.set_title("how spread out each head's attention is (one dot per head)")
    ax.legend(loc="upper center", ncol=3)
    return fig


def plot_key_cosines(cosines: torch.Tensor, word: str, sentences: Sequence[str]):
    """Cosine similarity per layer between the key vectors of ``word`` in two sentences."""
    check_tensor("cosines", cosines, ndim=1)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(len(cosines)), cosines.detach(), marker="o")
    ax.set_xticks(range(len(cosines)))
    ax.set_xlabel("layer")
    ax.set_ylabel("cosine similarity")
    ax.set_ylim(min(0.0, float(cosines.min())) - 0.05, 1.02)
    ax.set_title(f"key of {word!r}: {sentences[0]!r}\nvs {sentences[1]!r}", fontsize=9)
    ax.grid(alpha=0.3)
    return fig
