"""Where does causal linear attention overtake causal softmax attention on this CPU?

Times the reference implementations from the kernel_attention master (the same harness students
use) and prints the table, the crossover length and the time ratio at N = 8192.

    .venv/bin/python benchmarks/causal_attention_speed.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import torch

sys.path.insert(0, str(Path(__file__).parent))
from reference import REPO, load_reference  # noqa: E402

from helpers.kernel_attention import causal_mask, crossover_length, elu_feature_map, plot_causal_timing  # noqa: E402

LENGTHS = (64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)


def main() -> None:
    ref = load_reference("kernel_attention")
    softmax_attention, causal_linear_attention = ref["softmax_attention"], ref["causal_linear_attention"]

    def causal_softmax(Q, K, V):
        return softmax_attention(Q, K, V, mask=causal_mask(Q.shape[-2]))[0]

    def causal_linear(Q, K, V):
        return causal_linear_attention(Q, K, V, elu_feature_map)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; D = M = 32, batch 1, float32, best of 3")
    table = plot_causal_timing(causal_softmax, causal_linear, lengths=LENGTHS, repeats=3)
    print(f"{'N':>6}  {'softmax ms':>11}  {'linear ms':>10}  {'softmax/linear':>14}")
    for row in table:
        print(f"{row['N']:>6}  {1e3 * row['softmax_s']:>11.2f}  {1e3 * row['linear_s']:>10.2f}  {row['speedup']:>14.2f}")
    cross = crossover_length(table)
    print(f"causal linear attention is faster from N = {cross} on" if cross else "softmax is faster at every N")
    print(f"time ratio softmax/linear at N = {table[-1]['N']}: {table[-1]['speedup']:.1f}x")
    out = REPO / "out" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    matplotlib.pyplot.gcf().savefig(out / "causal_timing.png", dpi=120)
    print(f"plot: {out / 'causal_timing.png'}")


if __name__ == "__main__":
    main()
