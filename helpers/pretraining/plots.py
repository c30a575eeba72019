"""Plots of the pretraining notebook: held-out accuracy over finetuning, and which places the
models answer against how common each place is."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import matplotlib.pyplot as plt

from ..training import TrainingLog
from .corpus import PLACES

__all__ = ["plot_finetuning_curves", "plot_place_counts"]


def plot_finetuning_curves(logs: Sequence[TrainingLog], baseline: float | None = None, offset: float = 0.0):
    """Held-out accuracy over finetuning steps, one line per model, the baseline dashed.

    Every curve is drawn at its exact values. Curves that coincide (equal accuracy at the same step,
    for instance all at 0% early on) stay visible because each later curve is drawn thinner and with
    smaller markers on top of the earlier ones, and the figure says so. ``offset`` (percentage
    points, 0 by default) additionally lifts the i-th curve by ``i * offset`` where curves coincide,
    never below its value. The legend gives each model's final accuracy.
    """
    fig, ax = plt.subplots(figsize=(9, 4))
    series = [[100 * a for a in log.accuracies] for log in logs]
    points = [dict(zip(log.eval_steps, ys)) for log, ys in zip(logs, series)]
    overlap = any(abs(points[i][step] - points[j][step]) < 1e-9
                  for i in range(len(logs)) for j in range(i + 1, len(logs))
                  for step in set(points[i]) & set(points[j]))
    markers, styles = "osD^v", ["-", "--", "-.", ":"]
    for i, (log, ys) in enumerate(zip(logs, series)):
        shift = offset * i if overlap else 0.0
        final = f"{ys[-1]:.1f}%" if ys else "no evaluation"
        under = len(logs) - 1 - i  # the first curve lies at the bottom: widest line, largest marker
        ax.plot(log.eval_steps, [y + shift for y in ys], marker=markers[i % len(markers)],
                markersize=5 + 4 * under, markerfacecolor="white" if under else None, markeredgewidth=1.5,
                linewidth=1.3 + 1.5 * under, linestyle=styles[i % len(styles)], zorder=2 + i,
                label=f"{log.name} (final {final})")
    if baseline is not None:
        ax.axhline(100 * baseline, color="gray", linestyle="--", linewidth=1, zorder=1,
                   label=f"most common place ({100 * baseline:.1f}%)")
    top = max([100 * (baseline or 0)] + [y for ys in series for y in ys]) + offset * max(0, len(logs) - 1)
    high = max(5.0, 1.15 * top + 1)
    ax.set_ylim(-0.04 * high, high)  # room for the markers at 0%, no axis below it
    ax.set_xlabel("finetuning step")
    ax.set_ylabel("exact match on held-out people (%)")
    rows = (len(logs) + (baseline is not None) + 1) // 2
    ax.set_title("Answering about people seen only in pretraining", pad=8 + 15 * rows)
    ax.grid(alpha=0.3)
    # above the axes, two columns: the plot keeps the figure's width and no entry covers a curve
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9, frameon=False, borderaxespad=0.2)
    notes = []
    if overlap:
        lifted = f" and lifted {offset:g} points per curve" if offset else ""
        notes.append("Where curves coincide, later ones are drawn thinner, on top" + lifted + ".")
    never = [log.name for log, ys in zip(logs, series) if ys and max(ys) == 0]
    if never:  # a flat line at 0 is easy to take for a missing curve
        notes.append("At 0% at every step: " + ", ".join(never) + ".")
    if notes:  # under the axis label, where it covers nothing
        ax.annotate("\n".join(notes), xy=(0, 0), xycoords="axes fraction", xytext=(0, -36),
                    textcoords="offset points", fontsize=9, color="dimgray", va="top")
    fig.tight_layout()
    return fig


def plot_place_counts(groups: dict[str, Sequence[str]], top: int | None = None):
    """Side-by-side bars: how often each place appears in each group of answers (in % of the group).

    The places run from the most common in the first group to the least common (ties in the
    corpus's order), so the first group's bars fall from left to right and the others can be read
    against them; places only the other groups gave follow. ``top`` keeps only the ``top`` places
    most often given or true (the rest are summed in "other places"); every answer that is not a
    place of the corpus (a misspelling, nothing at all) is counted in the last bar.
    """
    counts = {label: Counter(answers) for label, answers in groups.items()}
    given = sum(counts.values(), Counter())
    first_label = next(iter(counts), "")
    first = counts.get(first_label, Counter())
    shown = sorted((p for p in PLACES if given[p]), key=lambda p: (-first[p], -given[p], PLACES.index(p)))
    if top is not None:
        kept = {p for p, _ in Counter({p: given[p] for p in shown}).most_common(top)}
        shown = [p for p in shown if p in kept]
    other = [p for p in PLACES if p not in shown]
    names = shown + (["other places"] if any(given[p] for p in other) else []) + ["not a place"]
    fig, ax = plt.subplots(figsize=(min(12.0, max(7.0, 0.32 * len(names) + 2)), 4))
    width = 0.8 / len(groups)
    for i, (label, count) in enumerate(counts.items()):
        total = max(1, sum(count.values()))
        values = [count[p] for p in shown]
        if "other places" in names:
            values.append(sum(count[p] for p in other))
        values.append(total - sum(count[p] for p in PLACES))
        ax.bar([j + i * width for j in range(len(names))], [100 * v / total for v in values], width,
               label=f"{label} ({total})")
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(names))], names, rotation=60, ha="right")
    short = first_label.split(" (")[0]
    ax.set_xlabel(f"place, most common among the {short} first; last, answers that are no place")
    ax.set_ylabel("share of the group's answers (%)")
    ax.set_title("Which places come out, against how common each place is", pad=26)
    ax.grid(axis="y", alpha=0.3)
    # above the axes: a tall bar can stand anywhere, so no corner of the axes is sure to be empty
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(groups), fontsize=9, frameon=False)
    fig.tight_layout()
    return fig
