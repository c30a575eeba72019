"""The harnesses that take the student's model, loss and decoder: ROUGE, training with its
learning curves, equal-work step timing, writing summaries, and the plot of Part 4's masks."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch

from ..progress import progress
from ..runtime import budget
from ..training import loss_axis
from .corpus import Article, Corpus
from .vocabulary import Vocabulary, batches

__all__ = ["rouge", "rouge_table", "print_rouge", "History", "mean_loss", "train_summarizer", "time_training_steps",
           "plot_losses", "summarize", "plot_masks"]

# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------
def rouge(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F1 (``rouge-score``, with stemming) over pairs."""
    from rouge_score import rouge_scorer

    if len(predictions) != len(references) or not references:
        raise ValueError(f"need as many predictions as references, and at least one "
                         f"(got {len(predictions)} and {len(references)})")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    totals = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for prediction, reference in zip(predictions, references):
        for name, score in scorer.score(reference, prediction).items():
            totals[name] += score.fmeasure
    return {name: total / len(references) for name, total in totals.items()}


# ---------------------------------------------------------------------------------------------
# Training and evaluation harnesses (they take the student's model, loss and decoder)
# ---------------------------------------------------------------------------------------------
@dataclass
class History:
    """The training loss of every step, the validation loss before training and after each epoch
    as (step, loss) pairs, the number of steps and the seconds taken (validation included). To
    compare the speed of two models, time them on equal work with :func:`time_training_steps`."""

    train: list
    val: list
    steps: int = 0
    seconds: float = 0.0


def mean_loss(model, articles: Sequence[Article], vocab: Vocabulary, loss_fn, batch_size: int = 200) -> float:
    """The model's mean ``loss_fn(logits, targets, pad_id)`` over the batches of ``articles`` (eval mode)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        losses = [float(loss_fn(model(b.src, b.tgt_in), b.targets, vocab.pad_id))
                  for b in batches(articles, vocab, batch_size)]
    model.train(was_training)
    return sum(losses) / len(losses)


def train_summarizer(model, corpus: Corpus, vocab: Vocabulary, loss_fn, *, epochs: int, batch_size: int = 64,
                     lr: float = 1e-3, max_steps: int | None = None, seed: int = 0) -> History:
    """Train with AdamW (gradients clipped to norm 1): ``epochs`` passes over the shuffled
    training split, or ``max_steps`` batches in all if that comes first. The validation loss is
    measured before training and after each epoch (and at the last step); in the grading setting on
    the first 64 validation articles (a grading run only has to run every cell)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    per_epoch = -(-len(corpus.train) // batch_size)
    total = epochs * per_epoch if max_steps is None else min(max_steps, epochs * per_epoch)
    val = budget(full=corpus.val, quick=corpus.val, grading=corpus.val[:64])
    history, started = History([], [(0, mean_loss(model, val, vocab, loss_fn))]), time.perf_counter()

    def stream():  # (epoch, batch) pairs, a new shuffle each epoch
        for index in range(epochs):
            for batch in batches(corpus.train, vocab, batch_size, shuffle=True, seed=seed * 1000 + index):
                yield index, batch

    epoch_of_last = 0
    model.train()
    for step, (epoch, batch) in zip(progress(range(total), desc="training", total=total), stream()):
        if epoch != epoch_of_last:  # an epoch ended
            history.val.append((step, mean_loss(model, val, vocab, loss_fn)))
            epoch_of_last = epoch
        loss = loss_fn(model(batch.src, batch.tgt_in), batch.targets, vocab.pad_id)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        history.train.append(loss.item())
    history.steps = len(history.train)
    history.val.append((history.steps, mean_loss(model, val, vocab, loss_fn)))
    model.eval()
    history.seconds = time.perf_counter() - started
    return history


def time_training_steps(models: dict, corpus: Corpus, vocab: Vocabulary, loss_fn, *, steps: int = 20,
                        batch_size: int = 64, lr: float = 1e-3) -> dict[str, float]:
    """Median seconds of one training step of each model, timed on equal work: copies of the models
    (the originals are left as they are) take turns, one step each, on the same ``steps`` batches,
    so a change in the machine's load falls on all of them alike. No validation is timed.

    Returns
    -------
    dict
        {name: median seconds per step}, in the order of ``models``.
    """
    import copy
    import statistics

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    copies = {name: copy.deepcopy(model).train() for name, model in models.items()}
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01) for name, model in copies.items()}
    seconds: dict[str, list[float]] = {name: [] for name in copies}
    for _, batch in zip(range(steps), batches(corpus.train, vocab, batch_size, shuffle=True, seed=12345)):
        for name, model in copies.items():
            started = time.perf_counter()
            loss = loss_fn(model(batch.src, batch.tgt_in), batch.targets, vocab.pad_id)
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in seconds.items()}


def plot_losses(*histories: History, labels: Sequence[str] = ("softmax attention",), ax=None):
    """Training loss per step (and its running mean) and validation loss, one colour per history.

    The legend sits below the axes, where it covers no curve."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.2 + 0.3 * len(histories)))
    for history, label, colour in zip(histories, labels, ["tab:blue", "tab:orange", "tab:green"]):
        steps = range(1, len(history.train) + 1)
        ax.plot(steps, history.train, "-", color=colour, alpha=0.25, lw=0.8)
        window = max(1, len(history.train) // 30)
        smooth = [sum(history.train[max(0, i - window + 1): i + 1]) / len(history.train[max(0, i - window + 1): i + 1])
                  for i in range(len(history.train))]
        ax.plot(steps, smooth, "-", color=colour, label=f"{label}: training (running mean of {window} steps)"
                if window > 1 else f"{label}: training")
        ax.plot(*zip(*history.val), "o--", color=colour, label=f"{label}: validation")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy per summary token")
    loss_axis(ax, [v for h in histories for v in [*h.train, *(loss for _, loss in h.val)]])  # log with plain labels: the late, small improvements are where models differ
    ax.set_title("Learning curves")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(2, len(histories)), fontsize=9, frameon=False)
    return ax


def summarize(model, decode, articles: Sequence[Article], vocab: Vocabulary, *, batch_size: int = 100,
              max_len: int = 40, **options) -> list[str]:
    """Summaries of ``articles`` written by ``decode(model, src, max_len, bos_id, eos_id, **options)``."""
    model.eval()
    out = []
    with torch.no_grad():
        for batch in batches(articles, vocab, batch_size):
            tokens = decode(model, batch.src, max_len, vocab.bos_id, vocab.eos_id, **options)
            out += [vocab.decode(row) for row in tokens]
    return out


def rouge_table(predictions: Sequence[str], articles: Sequence[Article]) -> dict[str, dict[str, float]]:
    """ROUGE of ``predictions`` on all ``articles``, on those with seen names and on those with unseen ones."""
    table = {}
    for name, keep in (("all", lambda a: True), ("seen names", lambda a: not a.unseen), ("unseen names", lambda a: a.unseen)):
        pairs = [(p, a.summary) for p, a in zip(predictions, articles) if keep(a)]
        if pairs:
            table[name] = rouge([p for p, _ in pairs], [r for _, r in pairs])
    return table


def print_rouge(tables: dict[str, dict[str, dict[str, float]]]) -> None:
    """Print {system: rouge_table(...)} as one table: ROUGE-1/2/L F1 per system and subset."""
    width = max(len("system"), *map(len, tables)) + 2
    print(f"{'system':<{width}}{'articles':<14}{'ROUGE-1':>9}{'ROUGE-2':>9}{'ROUGE-L':>9}")
    for system, table in tables.items():
        for subset, scores in table.items():
            print(f"{system:<{width}}{subset:<14}{scores['rouge1']:>9.3f}{scores['rouge2']:>9.3f}{scores['rougeL']:>9.3f}")



def plot_masks(masks: dict, row: int = 0):
    """Row ``row`` of batched masks, (B, T) or (B, Tq, Tk), side by side: white where attention is allowed."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    two_colours = ListedColormap(["black", "white"])  # a mask has two values: masked, allowed
    fig, axes = plt.subplots(1, len(masks), figsize=(3.6 * len(masks) + 1, 3.8), squeeze=False)
    axes = axes[0]
    for ax, (name, mask) in zip(axes, masks.items()):
        m = mask[row]
        m = m[None] if m.dim() == 1 else m  # a padding mask: one row
        image = ax.imshow(m.float().numpy(), cmap=two_colours, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel("key position" if m.shape[0] > 1 else "token position")
        ax.set_ylabel("query position" if m.shape[0] > 1 else "")
        if m.shape[0] == 1:
            ax.set_yticks([])
    fig.suptitle(f"Masks of batch row {row} (white: allowed, black: masked)")
    fig.tight_layout()
    bar = fig.colorbar(image, ax=list(axes), fraction=0.02, pad=0.02, ticks=[0.25, 0.75])
    bar.ax.set_yticklabels(["masked\n(False)", "allowed\n(True)"])
    bar.set_label("mask value")
    return fig

