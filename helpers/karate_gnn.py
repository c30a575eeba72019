"""Zachary's karate club for the GCN notebook: the data, plots, a baseline and gradient harnesses.

Nothing here is a solution: the GCN's parts are the students' to write. The harnesses take the
student's functions as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import torch

from .validation import check_tensor

__all__ = [
    "KarateClub",
    "load_karate_club",
    "accuracy",
    "label_propagation",
    "plot_club",
    "EmbeddingRecorder",
    "plot_embedding_snapshots",
    "hand_written_gcn",
    "GradientMismatch",
    "gradcheck_gcn",
]

#: The two factions after the split, as networkx's ``club`` attribute names them.
CLUBS = ("Mr. Hi", "Officer")
INSTRUCTOR, ADMINISTRATOR = 0, 33
COLORS = ("#1f77b4", "#ff7f0e")


@dataclass(frozen=True)
class KarateClub:
    """The club as tensors.

    Attributes
    ----------
    graph : networkx.Graph
        34 members, an edge where two members met outside the club.
    A : torch.Tensor, shape (34, 34), float32
        0/1 symmetric adjacency without self loops.
    labels : torch.Tensor, shape (34,), int64
        The faction each member joined: 0 = Mr. Hi (the instructor), 1 = Officer (the administrator).
    train_nodes : torch.Tensor, shape (2,), int64
        The only labelled members: node 0 (Mr. Hi) and node 33 (the administrator).
    test_nodes : torch.Tensor, shape (32,), int64
        Every other member; their labels are for evaluation only.
    positions : dict
        A fixed layout for drawing the graph.
    """

    graph: nx.Graph
    A: torch.Tensor
    labels: torch.Tensor
    train_nodes: torch.Tensor
    test_nodes: torch.Tensor
    positions: dict

    @property
    def num_nodes(self) -> int:
        return self.A.shape[0]


def load_karate_club() -> KarateClub:
    """Zachary's karate club with the real split (the ``club`` attribute), offline from networkx.

    Recent networkx versions store how often two members met as edge weights; the adjacency here
    is 0/1: an edge or none.
    """
    graph = nx.karate_club_graph()
    n = graph.number_of_nodes()
    A = torch.zeros(n, n)
    for u, v in graph.edges():
        A[u, v] = A[v, u] = 1.0
    labels = torch.tensor([CLUBS.index(graph.nodes[i]["club"]) for i in range(n)])
    train = torch.tensor([INSTRUCTOR, ADMINISTRATOR])
    test = torch.tensor([i for i in range(n) if i not in (INSTRUCTOR, ADMINISTRATOR)])
    positions = nx.spring_layout(graph, seed=8)  # the seed that keeps every pair of nodes apart
    return KarateClub(graph, A, labels, train, test, positions)


def accuracy(predicted: torch.Tensor, labels: torch.Tensor, nodes: torch.Tensor) -> tuple[int, int]:
    """(correct, total) over ``nodes``.

    Parameters
    ----------
    predicted, labels : torch.Tensor, shape (N,), integer
    nodes : torch.Tensor, shape (K,), integer
    """
    check_tensor("predicted", predicted, ndim=1)
    check_tensor("labels", labels, shape=tuple(predicted.shape))
    nodes = torch.as_tensor(nodes)
    return int((predicted[nodes] == labels[nodes]).sum()), int(nodes.numel())


def label_propagation(club: KarateClub) -> torch.Tensor:
    """Baseline: networkx's harmonic function (label propagation) from the same two labels.

    Returns
    -------
    torch.Tensor, shape (N,), int64
        The predicted faction of every member.
    """
    from networkx.algorithms import node_classification

    graph = nx.Graph()  # the same edges, no weights, no club attribute; nodes in order 0..N-1
    graph.add_nodes_from(range(club.num_nodes))
    graph.add_edges_from(club.graph.edges())
    for node in club.train_nodes.tolist():
        graph.nodes[node]["label"] = int(club.labels[node])
    predicted = node_classification.harmonic_function(graph, label_name="label")  # a list in node order
    return torch.tensor([int(p) for p in predicted])


def plot_club(club: KarateClub, predicted: torch.Tensor | None = None, *, title: str | None = None, ax=None):
    """Draw the club, coloured by the true faction, or by ``predicted`` with mistakes ringed in red.

    The two labelled members are drawn as squares.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    shown = club.labels if predicted is None else torch.as_tensor(predicted)
    check_tensor("predicted", shown, shape=(club.num_nodes,))
    colors = [COLORS[int(c)] for c in shown]
    nx.draw_networkx_edges(club.graph, club.positions, ax=ax, alpha=0.3)
    others = [i for i in range(club.num_nodes) if i not in club.train_nodes.tolist()]
    nx.draw_networkx_nodes(club.graph, club.positions, nodelist=others, node_color=[colors[i] for i in others],
                           node_size=260, ax=ax)
    train = club.train_nodes.tolist()
    nx.draw_networkx_nodes(club.graph, club.positions, nodelist=train, node_color=[colors[i] for i in train],
                           node_shape="s", node_size=420, edgecolors="black", linewidths=2, ax=ax)
    if predicted is not None:
        wrong = [i for i in range(club.num_nodes) if int(shown[i]) != int(club.labels[i])]
        nx.draw_networkx_nodes(club.graph, club.positions, nodelist=wrong, node_color="none", node_size=520,
                               edgecolors="red", linewidths=2.5, ax=ax)
    nx.draw_networkx_labels(club.graph, club.positions, font_size=8, ax=ax)
    handles = [plt.Line2D([], [], marker="o", ls="", color=COLORS[k], label=CLUBS[k]) for k in (0, 1)]
    handles.append(plt.Line2D([], [], marker="s", ls="", color="gray", markeredgecolor="black", label="labelled"))
    if predicted is not None:
        handles.append(plt.Line2D([], [], marker="o", ls="", color="none", markeredgecolor="red", label="wrong"))
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    ax.set_title(title or ("True factions" if predicted is None else "Predicted factions"))
    ax.set_axis_off()
    return ax


class EmbeddingRecorder:
    """Callback for training: after the epochs listed in ``at`` (from 1), keep the 2-D embedding of each node.

    Pass it as ``on_epoch`` to ``train_semi_supervised``, which calls it with the epoch counted from
    0; ``at`` counts from 1 ("after epoch 1" is after the first step). It calls
    ``model.embed(A_hat, X)`` without gradients. ``snapshots`` is a list of ``(epoch, array (N, 2))``.
    """

    def __init__(self, A_hat: torch.Tensor, X: torch.Tensor, at: Sequence[int] = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 100, 200)):
        self.at = {int(e) for e in at}
        if not self.at or min(self.at) < 1:
            raise ValueError(f"at must list epochs counted from 1, got {sorted(self.at)}")
        self.A_hat, self.X = A_hat, X
        self.snapshots: list[tuple[int, np.ndarray]] = []

    def __call__(self, epoch: int, model) -> None:
        if epoch + 1 in self.at:
            with torch.no_grad():
                embedding = model.embed(self.A_hat, self.X)
            check_tensor("model.embed(A_hat, X)", embedding, shape=(self.X.shape[0], 2))
            self.snapshots.append((epoch + 1, embedding.detach().cpu().numpy().copy()))


def plot_embedding_snapshots(snapshots: Sequence[tuple[int, np.ndarray]], club: KarateClub, *, columns: int = 4,
                             label_boundary: int = 4):
    """A grid of the 2-D node embeddings over training, coloured by the true faction.

    The labelled members are squares; the split should emerge as the epochs go by. In the last
    snapshot the ``label_boundary`` members closest to the boundary between the two labelled
    members (the perpendicular bisector of the segment joining them) are numbered.
    """
    if not snapshots:
        raise ValueError("no snapshots: pass an EmbeddingRecorder as on_epoch to the training function")
    rows = -(-len(snapshots) // columns)
    # at most about 10 inches wide, so a notebook shows it at its size; the outer panels carry the labels
    fig, axes = plt.subplots(rows, columns, figsize=(min(3.2, 10.0 / columns) * columns, 2.5 * rows + 0.6),
                             squeeze=False)
    colors = [COLORS[int(c)] for c in club.labels]
    train = set(club.train_nodes.tolist())
    for k, (ax, (epoch, emb)) in enumerate(zip(axes.flat, snapshots)):
        others = [i for i in range(len(emb)) if i not in train]
        ax.scatter(emb[others, 0], emb[others, 1], c=[colors[i] for i in others], s=30)
        ax.scatter(emb[sorted(train), 0], emb[sorted(train), 1], c=[colors[i] for i in sorted(train)], marker="s",
                   s=70, edgecolors="black")
        ax.set_title(f"after epoch {epoch}", fontsize=10)
        if k + columns >= len(snapshots):  # nothing below it
            ax.set_xlabel("embedding 1", fontsize=9)
        if k % columns == 0:
            ax.set_ylabel("embedding 2", fontsize=9)
        ax.tick_params(labelsize=9)
        ax.set_xlim(-1.15, 1.15)  # tanh's range, with room for the markers at the corners
        ax.set_ylim(-1.15, 1.15)
        ax.set_xticks([-1, 0, 1])
        ax.set_yticks([-1, 0, 1])
    for ax in list(axes.flat)[len(snapshots):]:
        ax.set_axis_off()
    numbered = _number_boundary_members(axes.flat[len(snapshots) - 1], snapshots[-1][1], club, label_boundary)
    fig.suptitle("Node embeddings (output of the second GCN layer) during training; "
                 "colour = true faction, squares = the two labelled members"
                 + (f"\nnumbered in the last panel: the {numbered} members nearest the boundary between them"
                    if numbered else ""),
                 fontsize=10)
    fig.tight_layout()
    return fig


def _number_boundary_members(ax, emb: np.ndarray, club: KarateClub, count: int) -> int:
    """Write the node number of the ``count`` members nearest the perpendicular bisector of the two
    labelled members' embeddings; returns how many were numbered."""
    first, second = (emb[i] for i in club.train_nodes.tolist()[:2])
    axis = second - first
    if count <= 0 or float(axis @ axis) < 1e-12:
        return 0
    along = (emb - (first + second) / 2) @ axis / float(np.sqrt(axis @ axis))  # signed distance to the bisector
    train = set(club.train_nodes.tolist())
    nearest = [i for i in np.argsort(np.abs(along)) if i not in train][:count]
    for rank, i in enumerate(sorted(nearest, key=lambda i: along[i])):
        # alternate sides, so that two members close together keep readable numbers
        offset = (-9, 7) if rank % 2 == 0 else (8, -11)
        ax.annotate(str(i), emb[i], xytext=offset, textcoords="offset points", fontsize=9,
                    ha="right" if offset[0] < 0 else "left",
                    arrowprops=dict(arrowstyle="-", lw=0.6, color="gray", shrinkA=0, shrinkB=3))
    return len(nearest)


def hand_written_gcn(gcn_layer_backward: Callable) -> Callable:
    """A GCN layer function ``f(A_hat, X, weight, bias)`` whose backward pass is yours.

    Forward: ``A_hat @ X @ weight + bias``. Backward: ``gcn_layer_backward(A_hat, X, weight,
    grad_out) -> (grad_X, grad_weight, grad_bias)``; A_hat gets no gradient.
    """

    class _Layer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, A_hat, X, weight, bias):
            ctx.save_for_backward(A_hat, X, weight)
            return A_hat @ X @ weight + bias

        @staticmethod
        def backward(ctx, grad_out):
            A_hat, X, weight = ctx.saved_tensors
            grads = gcn_layer_backward(A_hat, X, weight, grad_out)
            if not (isinstance(grads, tuple) and len(grads) == 3):
                raise TypeError("gcn_layer_backward must return the tuple (grad_X, grad_weight, grad_bias)")
            grad_X, grad_weight, grad_bias = grads
            check_tensor("grad_X", grad_X, shape=tuple(X.shape))
            check_tensor("grad_weight", grad_weight, shape=tuple(weight.shape))
            check_tensor("grad_bias", grad_bias, shape=(weight.shape[1],))
            return None, grad_X, grad_weight, grad_bias

    return _Layer.apply


class GradientMismatch(AssertionError):
    """Your backward pass gives a gradient that differs from the exact one; the message names it."""


#: The inputs of the two-layer model, in gradcheck's order: what each gradient is of.
_INPUT_NAMES = ("X (the node features)", "W1 (the first layer's weight)", "b1 (the first layer's bias)",
                "W2 (the second layer's weight)", "b2 (the second layer's bias)")


def gradcheck_gcn(gcn_layer_backward: Callable, A_hat: torch.Tensor, *, hidden: int = 4, seed: int = 0) -> bool:
    """``torch.autograd.gradcheck`` on a two-layer GCN (tanh between) built with your backward.

    Runs in float64 with random features and weights, once on ``A_hat`` and once on a random
    matrix of the same size that is not symmetric (for a symmetric ``A_hat`` a backward pass that
    forgets its transpose is still exact). Numerical and analytical gradients of every input
    (X, both weights, both biases) must agree.

    Returns
    -------
    bool
        True when they agree.

    Raises
    ------
    GradientMismatch
        When they do not: which gradient (of X, W1, b1, W2 or b2), on which matrix, and the largest
        difference from the exact gradient and where it is.
    """
    check_tensor("A_hat", A_hat, ndim=2)
    g = torch.Generator().manual_seed(seed)
    n = A_hat.shape[0]
    not_symmetric = torch.rand(n, n, generator=g, dtype=torch.float64) / n
    return all(_gradcheck_two_layers(gcn_layer_backward, A, hidden, g, which)
               for A, which in ((A_hat.detach().double(), "your A_hat"),
                                (not_symmetric, "a random matrix that is not symmetric (a missing transpose shows here)")))


def _gradcheck_two_layers(gcn_layer_backward: Callable, A64: torch.Tensor, hidden: int, g: torch.Generator,
                          which: str) -> bool:
    layer = hand_written_gcn(gcn_layer_backward)
    n = A64.shape[0]
    inputs = (torch.randn(n, 3, generator=g, dtype=torch.float64),
              torch.randn(3, hidden, generator=g, dtype=torch.float64),
              torch.randn(hidden, generator=g, dtype=torch.float64),
              torch.randn(hidden, 2, generator=g, dtype=torch.float64),
              torch.randn(2, generator=g, dtype=torch.float64))
    inputs = tuple(t.requires_grad_() for t in inputs)

    def model(X, W1, b1, W2, b2):
        return layer(A64, torch.tanh(layer(A64, X, W1, b1)), W2, b2)

    def exact(X, W1, b1, W2, b2):  # the same model, differentiated by autograd itself
        return A64 @ torch.tanh(A64 @ X @ W1 + b1) @ W2 + b2

    upstream = torch.randn(n, 2, generator=g, dtype=torch.float64)
    yours = torch.autograd.grad(model(*inputs), inputs, upstream)
    truth = torch.autograd.grad(exact(*inputs), inputs, upstream)
    for name, mine, right in zip(_INPUT_NAMES, yours, truth):
        difference = (mine - right).abs()
        if not torch.allclose(mine, right, rtol=1e-5, atol=1e-7):
            where = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0])
            raise GradientMismatch(f"the gradient of {name} differs from the exact one on {which}: largest difference "
                                   f"{difference.max().item():.3g} at index {where}")
    return torch.autograd.gradcheck(model, inputs, eps=1e-6, atol=1e-5)
