"""The harnesses that take the student's model, loss and decoder: ROUGE, training with its
learning curves, equal-work step timing, writing summaries, and the plot of Part 4's masks."""

from __future__ import annotations

import math
import re
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
           "plot_losses", "summarize", "plot_masks", "plot_cross_attention", "facts_of", "copied_facts", "print_copied_facts"]

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


def _draw_losses(ax, histories, labels, colours, last_step: int | None = None) -> list[float]:
    """Training and validation losses of ``histories`` on ``ax``, up to ``last_step``; the values drawn."""
    drawn = []
    for history, label, colour in zip(histories, labels, colours):
        train = list(history.train[:last_step] if last_step else history.train)
        val = [(step, loss) for step, loss in history.val if last_step is None or step <= last_step]
        steps = range(1, len(train) + 1)
        # the window adapts to the run: about 30 windows over it, so a short run keeps its points
        window = max(1, len(history.train) // 30)
        if len(train) <= 60 or window == 1:  # few steps: every step is a point worth seeing
            ax.plot(steps, train, "-", marker=".", markersize=5, color=colour, lw=1.0, label=f"{label}: training")
        else:
            ax.plot(steps, train, "-", color=colour, alpha=0.25, lw=0.8)
            smooth = [sum(train[max(0, i - window + 1): i + 1]) / len(train[max(0, i - window + 1): i + 1])
                      for i in range(len(train))]
            ax.plot(steps, smooth, "-", color=colour, label=f"{label}: training (running mean of {window} steps)")
        if val:
            ax.plot(*zip(*val), "o--", color=colour, markersize=6, markerfacecolor="white", markeredgewidth=1.5,
                    label=f"{label}: validation")
        drawn += [*train, *(loss for _, loss in val)]
    return drawn


def plot_losses(*histories: History, labels: Sequence[str] = ("softmax attention",), ax=None):
    """Training loss per step (and its running mean) and validation loss, one colour per history.

    A run of a few dozen steps is drawn point by point, its validation losses as open circles. When
    one run is much shorter than another (the Performer's 30 quick steps beside 1,500), a second
    panel shows the first steps of every run, where the short one can be compared. The legend sits
    below the axes, where it covers no curve. Returns the axes of the whole runs."""
    import matplotlib.pyplot as plt

    colours = ["tab:blue", "tab:orange", "tab:green"]
    lengths = [len(h.train) for h in histories]
    short = min(lengths, default=0)
    zoom = ax is None and len(histories) > 1 and 0 < short and 5 * short <= max(lengths)
    if ax is None:
        if zoom:
            _, (ax, first) = plt.subplots(1, 2, figsize=(10, 4.2 + 0.3 * len(histories)),
                                          gridspec_kw={"width_ratios": [3, 2]})
        else:
            _, ax = plt.subplots(figsize=(7, 4.2 + 0.3 * len(histories)))
    drawn = _draw_losses(ax, histories, labels, colours)
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy per summary token")
    loss_axis(ax, drawn)  # log with plain labels: the late, small improvements are where models differ
    ax.set_title("Learning curves")
    ax.grid(alpha=0.3)
    if zoom:
        # the first steps of every run, at the short run's scale
        first_drawn = _draw_losses(first, histories, labels, colours, last_step=short)
        first.set_xlabel("training step")
        loss_axis(first, first_drawn)
        first.set_title(f"the first {short} steps")
        first.grid(alpha=0.3)
        handles, names = ax.get_legend_handles_labels()
        ax.figure.legend(handles, names, loc="lower center", ncol=min(2, len(histories)), fontsize=9, frameon=False)
        rows = math.ceil(len(names) / min(2, len(histories)))
        ax.figure.tight_layout(rect=(0, (0.12 + 0.2 * rows) / ax.figure.get_figheight(), 1, 1))
    else:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(2, len(histories)), fontsize=9,
                  frameon=False)
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
    """Row ``row`` of batched masks, (B, T) or (B, Tq, Tk): white where attention is allowed.

    A one-row mask (a padding mask) is drawn as a short strip across the figure; the square masks
    stand side by side below it, every cell a square of the same size, so their shapes compare."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    two_colours = ListedColormap(["black", "white"])  # a mask has two values: masked, allowed
    picked = {}
    for name, mask in masks.items():
        m = mask[row]
        picked[name] = (m[None] if m.dim() == 1 else m).float()
    strips = {name: m for name, m in picked.items() if m.shape[0] == 1}
    grids = {name: m for name, m in picked.items() if m.shape[0] > 1}
    width = 10.0
    cell = min(0.12, (width - 1.0 - 0.6 * len(grids)) / max(1, sum(m.shape[1] for m in grids.values())))
    grid_height = cell * max((m.shape[0] for m in grids.values()), default=0) + 1.0 if grids else 0.0
    strip_height = 1.0  # a strip of one row, its title and its axis label
    fig = plt.figure(figsize=(width, strip_height * len(strips) + grid_height + 0.6))
    layout = fig.add_gridspec(len(strips) + bool(grids), 1,
                              height_ratios=[strip_height] * len(strips) + ([grid_height] if grids else []))
    for k, (name, m) in enumerate(strips.items()):
        ax = fig.add_subplot(layout[k])
        ax.imshow(m.numpy(), cmap=two_colours, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_title(f"{name}: one value per token", fontsize=10)
        ax.set_xlabel("token position")
        ax.set_yticks([])
    if grids:
        cells = layout[len(strips)].subgridspec(1, len(grids), width_ratios=[m.shape[1] for m in grids.values()])
        for k, (name, m) in enumerate(grids.items()):
            ax = fig.add_subplot(cells[k])
            ax.imshow(m.numpy(), cmap=two_colours, vmin=0, vmax=1, aspect="equal", interpolation="nearest")
            ax.set_title(name, fontsize=10)
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
    for ax in fig.axes:  # a grey frame shows where a white mask ends
        for spine in ax.spines.values():
            spine.set_edgecolor("gray")
    fig.suptitle(f"Masks of batch row {row}")
    fig.legend(handles=[Patch(facecolor="white", edgecolor="gray", label="allowed (True)"),
                        Patch(facecolor="black", edgecolor="gray", label="masked (False)")],
               loc="upper right", ncol=2, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def plot_cross_attention(weights, summary_pieces: Sequence[str], article_pieces: Sequence[str], *,
                         title: str = "cross-attention (mean over heads)", max_width: float = 10.0,
                         font_size: float = 8.0):
    """Cross-attention weights (summary pieces down, article pieces across) readable at notebook width.

    The figure is at most ``max_width`` inches wide. When the article has more pieces than fit
    across at ``font_size`` points, it is split into rows of consecutive pieces (every row with
    the summary's pieces down its side), all on one colour scale, so each label stays legible
    instead of the figure growing wider.

    Parameters
    ----------
    weights : torch.Tensor, shape (T_summary, T_article)
    summary_pieces, article_pieces : sequence of str
        Tick labels, one per row and one per column of ``weights``.
    """
    import matplotlib.pyplot as plt

    w = torch.as_tensor(weights).detach().float().cpu()
    while w.dim() > 2 and w.shape[0] == 1:
        w = w[0]
    if w.dim() != 2:
        raise ValueError(f"weights must be (T_summary, T_article), got shape {tuple(w.shape)}")
    n_q, n_k = w.shape
    if len(summary_pieces) != n_q or len(article_pieces) != n_k:
        raise ValueError(f"{len(summary_pieces)} summary and {len(article_pieces)} article labels for weights of "
                         f"shape {tuple(w.shape)}")
    label_room = 0.12 * max((len(p) for p in summary_pieces), default=1) * font_size / 8 + 0.5  # inches
    across = max(1, (max_width - label_room - 1.3) * 72 / (1.25 * font_size))  # pieces per row at this font
    rows = math.ceil(n_k / across)
    per_row = math.ceil(n_k / rows)
    cell_w = min(0.3, (max_width - label_room - 1.3) / per_row)
    cell_h = max(1.3 * font_size / 72, 0.14)
    panel_h = n_q * cell_h + 0.12 * max((len(p) for p in article_pieces), default=1) * font_size / 8 + 0.6
    fig, axes = plt.subplots(rows, 1, figsize=(label_room + per_row * cell_w + 1.3, rows * panel_h + 0.5),
                             squeeze=False, layout="constrained")
    high = float(w.max()) if w.numel() else 1.0
    for r, ax in enumerate(axes[:, 0]):
        start, stop = r * per_row, min(n_k, (r + 1) * per_row)
        chunk = torch.full((n_q, per_row), float("nan"))
        chunk[:, : stop - start] = w[:, start:stop]
        image = ax.imshow(chunk.numpy(), cmap="viridis", vmin=0.0, vmax=high, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(stop - start), article_pieces[start:stop], rotation=90, fontsize=font_size)
        ax.set_yticks(range(n_q), summary_pieces, fontsize=font_size)
        ax.set_xlim(-0.5, per_row - 0.5)
        ax.set_ylabel("summary piece (written)")
        ax.set_xlabel("article piece" + (f" {start + 1}-{stop} of {n_k}" if rows > 1 else ""))
    fig.colorbar(image, ax=axes[:, 0].tolist(), fraction=0.03, pad=0.01, label=f"weight, 0 to {high:.2f}")
    fig.suptitle(title)
    return fig


#: Capitalised words of a summary that are not names (articles of speech, days, months).
_NOT_NAMES = {"A", "An", "The", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
              "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
              "November", "December"}


def facts_of(summary: str) -> tuple[set[str], set[str]]:
    """(names, numbers) of a reference summary, lower-cased as the vocabulary's pieces are: its
    capitalised words other than articles, days and months, and every run of digits."""
    words = re.findall(r"[A-Za-z]+|\d+", summary)
    names = {w.lower() for w in words if w[0].isupper() and w not in _NOT_NAMES}
    return names, {w for w in words if w.isdigit()}


def copied_facts(weights, summary_pieces: Sequence[str], article_pieces: Sequence[str], summary: str) -> list[dict]:
    """Where each name and number the model wrote puts its cross-attention weight.

    For every row of ``weights`` (summary pieces down, article pieces across, as
    :func:`plot_cross_attention` draws them) whose piece is a name or a number of the reference
    ``summary`` and also stands in the article: the piece, whether it is a number, the weight on
    the article's copies of that same piece, and whether the row's largest weight is on one of them.
    """
    w = torch.as_tensor(weights).detach().float().cpu()
    if w.shape != (len(summary_pieces), len(article_pieces)):
        raise ValueError(f"weights of shape {tuple(w.shape)} for {len(summary_pieces)} summary and "
                         f"{len(article_pieces)} article pieces: one row per summary piece, one column per article piece")
    article = [p.removeprefix("##") for p in article_pieces]
    names, numbers = facts_of(summary)
    rows = []
    for row, piece in enumerate(summary_pieces):
        places = [j for j, p in enumerate(article) if p == piece]
        if piece in names | numbers and places:
            rows.append({"piece": piece, "number": piece in numbers, "weight_on_its_place": float(w[row, places].sum()),
                         "peak_on_its_place": int(w[row].argmax()) in places})
    return rows


def print_copied_facts(rows: list[dict]) -> None:
    """One line per copied name or number: the weight on its place in the article."""
    if not rows:
        print("the summary copies no name or number of the article")
    for r in rows:
        where = "its largest weight" if r["peak_on_its_place"] else "not its largest weight"
        print(f"{r['piece']:>14} ({'number' if r['number'] else 'name'}): {r['weight_on_its_place']:.2f} of its weight on "
              f"the same piece in the article ({where})")
