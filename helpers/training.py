"""The training loop the assignments share: its log, the loop itself, and the loss plot.

An assignment says how one step's loss is computed (``loss_at(step)``: draw a batch, run the model,
return the loss); :func:`run_training` does the rest the same way everywhere: gradients clipped to
norm 1, the optimizer and its schedule stepped, the mean loss logged at least ten times per run
(so a short run still draws a curve), an optional held-out score every ``eval_every`` steps, a
progress bar, the model left in eval mode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import ticker
from torch import nn

from .progress import progress

__all__ = ["TrainingLog", "run_training", "plot_training_loss", "loss_axis"]


@dataclass
class TrainingLog:
    """What a training run saw: the mean loss at ``steps``, held-out scores at ``eval_steps``
    (``accuracies``), and the wall time."""

    name: str
    steps: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    eval_steps: list = field(default_factory=list)
    accuracies: list = field(default_factory=list)
    seconds: float = 0.0


def run_training(model: nn.Module, *, steps: int, optimizer: torch.optim.Optimizer, schedule,
                 loss_at: Callable[[int], torch.Tensor], name: str, every: int = 50,
                 evaluate: Callable[[nn.Module], float] | None = None, eval_every: int | None = None) -> TrainingLog:
    """Train ``model`` for ``steps`` steps (numbered from 1) on ``loss_at(step)``.

    Parameters
    ----------
    loss_at : callable
        The loss of step ``step`` (a scalar tensor), with the model in train mode.
    every : int
        Log the mean loss every ``every`` steps, or more often if that would give fewer than ten
        points, and at the last step.
    evaluate, eval_every : callable and int, optional
        ``evaluate(model)`` every ``eval_every`` steps and at the end, in eval mode.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps!r}")
    log = TrainingLog(name)
    every = max(1, min(every, steps // 10))
    started, running = time.perf_counter(), []
    model.train()
    for step in progress(range(1, steps + 1), desc=f"training {name}"):
        loss = loss_at(step)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        running.append(loss.item())
        if step % every == 0 or step == steps:
            log.steps.append(step)
            log.losses.append(sum(running) / len(running))
            running = []
        if evaluate is not None and eval_every and (step % eval_every == 0 or step == steps):
            model.eval()
            log.eval_steps.append(step)
            log.accuracies.append(evaluate(model))
            model.train()
    model.eval()
    log.seconds = time.perf_counter() - started
    return log


def _plain(value, _pos=None) -> str:
    """A tick label in plain decimals: 0.02, 0.5, 3 (never 2x10^-2 or 3.71x10^0)."""
    return np.format_float_positional(value, precision=4, trim="-")


def loss_axis(ax, values) -> None:
    """A log axis with plain labels when the values span at least a factor 4, else a linear one.

    With a span of at least 4, the ticks 1, 1.5, 2, 3, 4, 5, 7 x 10^k (fewer on wider spans) put three
    labels or more on the axis; a narrower span (a short run whose loss barely moved) would get one
    label or none on a log axis.
    """
    values = [v for v in values if np.isfinite(v)]  # a diverged run's NaN says nothing about the range
    if not values:
        return
    low, high = min(values), max(values)
    if low <= 0 or high / low < 4:
        ax.yaxis.set_major_formatter(ticker.ScalarFormatter(useOffset=False))
        return
    ax.set_yscale("log")
    decades = np.log10(high / low)
    subs = ((1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0) if decades <= 1 else (1.0, 2.0, 3.0, 5.0) if decades <= 1.5
            else (1.0, 2.0, 5.0) if decades <= 3 else (1.0,))  # at least three labels on any span
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(_plain))
    ax.yaxis.set_minor_locator(ticker.LogLocator(base=10, subs=np.arange(1, 10)))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def plot_training_loss(*logs: TrainingLog, ax=None):
    """The training loss of each log over its steps, on a log scale with plain tick labels (a linear
    one when the loss moved by less than a factor 4); every logged point is marked when a run logged
    few of them. One run is named in the title, without a legend; several get a legend above the
    axes, where it covers no curve and leaves the plot its full width. Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.8))
    styles = ("-", "--", "-.", ":")
    described = []
    for i, log in enumerate(logs):
        few = len(log.steps) < 40
        described.append(f"{log.name} ({log.seconds:.0f} s, {log.steps[-1] if log.steps else 0} steps)")
        ax.plot(log.steps, log.losses, linestyle=styles[i % len(styles)], marker="o" if few else None,
                markersize=4 if few else 0, label=described[-1])
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy per character (nats)")
    loss_axis(ax, [v for log in logs for v in log.losses])
    ax.grid(alpha=0.3, which="both")
    if len(logs) == 1:
        ax.set_title(f"Training loss: {described[0]}")
    else:
        ax.set_title("Training loss", pad=8 + 14 * ((len(logs) + 1) // 2))
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9, frameon=False,
                  borderaxespad=0.2)  # above the axes: never over a curve
    ax.figure.tight_layout()
    return ax
