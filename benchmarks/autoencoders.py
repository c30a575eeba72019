"""autoencoders targets: the experiment grid's time, the MNIST probe accuracies with 200 labels
(nonlinear k = 100 beside raw pixels and PCA), the linear autoencoder's principal angles against
PCA, and how long the notebook takes in the quick and grading settings.

    .venv/bin/python benchmarks/autoencoders.py                      # the full grid, about 10 minutes
    .venv/bin/python benchmarks/autoencoders.py --setting quick      # the grid as the quick setting runs it
    .venv/bin/python benchmarks/autoencoders.py --fast               # the grading setting's grid
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from helpers.autoencoders import (fit_linear_autoencoder, linear_map, load_mnist, make_synthetic,
                                  principal_angle_cosines, run_probe_grid)
from busy import compare_when_asked
from reference import load_reference, notebook_seconds

SLUG = "autoencoders"


def grid_setting(setting: str) -> dict:
    """The notebook's grid cell (Part 5), in one setting: "full", "quick" or "grading"."""
    def pick(full, quick, grading):
        return {"full": full, "quick": quick, "grading": grading}[setting]

    return dict(ks=pick([5, 10, 100, 1000], [5, 10, 100, 1000], [100]), seeds=pick([0, 1, 2], [0], [0]),
                num_labels=200, hidden_dims={"synthetic": (128,), "MNIST": (256,)},
                epochs={"synthetic": pick(5, 5, 1), "MNIST": pick(10, 10, 1)},
                step_options={"denoising": {"noise_std": 0.5}, "masked": {"mask_prob": 0.5}},
                train_size=pick(None, None, 1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=("full", "quick", "grading"), default="full",
                        help="the notebook setting whose grid to run (default: full)")
    parser.add_argument("--fast", action="store_true", help="the grading setting's grid (same as --setting grading)")
    args = parser.parse_args()
    name = "grading" if args.fast else args.setting
    ref = load_reference(SLUG)
    torch.set_num_threads(os.cpu_count() or 1)
    setting = grid_setting(name)
    train_size = setting.pop("train_size")
    synthetic, mnist = make_synthetic(), load_mnist()
    start = time.perf_counter()
    grid, _ = run_probe_grid(ref["Autoencoder"], ref["training_step"], ref["linear_probe_accuracy"], ref["pca_components"],
                             [synthetic.head(train_size), mnist.head(train_size)], **setting)
    seconds = time.perf_counter() - start
    print(f"grid ({name} setting): {len(grid.runs)} models pretrained and probed in {seconds / 60:.1f} min"
          + {"full": " (target <= 10 min)", "quick": " (target <= 2.5 min)", "grading": ""}[name])
    for name in ("MNIST", "synthetic"):
        base = grid.baselines[name]
        print(f"\n{name}, {grid.num_labels} labels: raw input {base['raw']:.1%}; PCA "
              + ", ".join(f"k={k} {a:.1%}" for k, a in sorted(base["pca"].items())))
        for kind in ("linear", "nonlinear"):
            for variant in ("vanilla", "denoising", "masked"):
                acc = grid.accuracies(name, kind, variant)
                print(f"  {kind:>9} {variant:>9}: " + "  ".join(
                    f"k={k} {statistics.mean(a):.1%} [{min(a):.1%}-{max(a):.1%}]" for k, a in acc.items()))
    if name != "grading":
        print("\ntarget: MNIST, nonlinear k=100, 200 labels >= 79%: "
              + ", ".join(f"{v} mean {statistics.mean(a):.1%} (min {min(a):.1%})"
                          for v in ("vanilla", "denoising", "masked")
                          for a in [grid.accuracies("MNIST", "nonlinear", v)[100]]))
    print()
    for k in (5, 10):
        torch.manual_seed(k)
        model = ref["Autoencoder"](synthetic.dim, (), k)
        start = time.perf_counter()
        loss = fit_linear_autoencoder(model, synthetic.train[0])
        cosines = principal_angle_cosines(linear_map(model.decoder), ref["pca_components"](synthetic.train[0].double(), k))
        print(f"linear autoencoder k={k}: loss {loss:.5f} in {time.perf_counter() - start:.1f} s; "
              f"principal-angle cosines vs PCA min {cosines.min():.6f} (target >= 0.99)")
    print(f"\nnotebook top to bottom, quick setting: {notebook_seconds(SLUG, 'quick'):.1f} s (target <= 180 s)")
    print(f"notebook top to bottom, grading setting: {notebook_seconds(SLUG, 'grading'):.1f} s (target <= 90 s)")


if __name__ == "__main__":
    if not compare_when_asked(SLUG):  # --quick --busy: idle and beside a busy program (benchmarks/busy.py)
        main()
