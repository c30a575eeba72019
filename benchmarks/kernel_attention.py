"""kernel_attention targets: where causal linear attention overtakes causal softmax attention on
this CPU, how close random-feature attention gets to softmax attention, and how long the notebook
takes in each setting (full, quick, grading).

Times the reference implementations from the kernel_attention master (the same harness students
use) and prints the table, the crossover length and the time ratio at N = 8192. The linear form is
memory-bound (it materialises an N x F x M tensor of prefix sums), so single runs are noisy: the
whole sweep runs ROUNDS times and the median crossover and ratio are reported with their range.

    .venv/bin/python benchmarks/kernel_attention.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import torch

sys.path.insert(0, str(Path(__file__).parent))
from busy import compare_when_asked  # noqa: E402
from reference import REPO, load_reference, notebook_seconds  # noqa: E402

SLUG = "kernel_attention"

from helpers.kernel_attention import (  # noqa: E402
    causal_mask,
    crossover_length,
    elu_feature_map,
    plot_causal_timing,
    relative_error,
)

LENGTHS = (64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
ROUNDS, REPEATS = 3, 7


def main() -> None:
    ref = load_reference("kernel_attention")
    softmax_attention, causal_linear_attention = ref["softmax_attention"], ref["causal_linear_attention"]

    def causal_softmax(Q, K, V):
        return softmax_attention(Q, K, V, mask=causal_mask(Q.shape[-2]))[0]

    def causal_linear(Q, K, V):
        return causal_linear_attention(Q, K, V, elu_feature_map)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; D = M = 32, batch 1, float32, "
          f"best of {REPEATS} calls, {ROUNDS} rounds")
    crossings, ratios = [], []
    for round_ in range(ROUNDS):
        matplotlib.pyplot.close("all")
        table = plot_causal_timing(causal_softmax, causal_linear, lengths=LENGTHS, repeats=REPEATS)
        crossings.append(crossover_length(table) or float("inf"))
        ratios.append(table[-1]["speedup"])
        print(f"round {round_ + 1}: linear faster from N = {crossings[-1]}, "
              f"softmax/linear at N = {table[-1]['N']}: {ratios[-1]:.1f}x")
    print(f"\nlast round:\n{'N':>6}  {'softmax ms':>11}  {'linear ms':>10}  {'softmax/linear':>14}")
    for row in table:
        print(f"{row['N']:>6}  {1e3 * row['softmax_s']:>11.2f}  {1e3 * row['linear_s']:>10.2f}  {row['speedup']:>14.2f}")
    print(f"\ncausal linear attention is faster from N = {statistics.median(crossings):g} "
          f"(median of {ROUNDS}; range {min(crossings):g}-{max(crossings):g})")
    print(f"time ratio softmax/linear at N = {LENGTHS[-1]}: {statistics.median(ratios):.1f}x "
          f"(median; range {min(ratios):.1f}-{max(ratios):.1f}x)")
    out = REPO / "out" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    matplotlib.pyplot.gcf().savefig(out / "causal_timing.png", dpi=120)
    print(f"plot: {out / 'causal_timing.png'}")
    rff_error(ref)
    for setting in ("full", "quick", "grading"):
        print(f"notebook top to bottom, {setting} setting: {notebook_seconds('kernel_attention', setting):.1f} s")


def rff_error(ref: dict) -> None:
    """Relative error of the reference rff_attention against softmax attention (the hidden test's
    problem size: D = 8, N = 16, entries N(0, 0.5^2)), over 10 seeds of W."""
    g = torch.Generator().manual_seed(10)
    Q, K = (0.5 * torch.randn(2, 2, 16, 8, generator=g, dtype=torch.float64) for _ in range(2))
    V = torch.randn(2, 2, 16, 3, generator=g, dtype=torch.float64)
    exact = ref["softmax_attention"](Q, K, V)[0]
    for features in (256, 4096):
        errors = [relative_error(ref["rff_attention"](Q, K, V, features, seed), exact) for seed in range(10)]
        print(f"rff_attention with {features} features: relative error median {statistics.median(errors):.3f}, "
              f"max {max(errors):.3f} over 10 seeds" + (" (hidden test accepts <= 0.08)" if features == 4096 else ""))


if __name__ == "__main__":
    if not compare_when_asked(SLUG):  # --quick --busy: idle and beside a busy program (benchmarks/busy.py)
        main()
