"""attention_foundations targets: both RNNs of Part 3 trained at the full setting in at most 5
minutes with the attention model at least 95% exact match at the longest length tested, the
bottleneck model's decay with length beside it, and the whole notebook in the fast setting in at
most 60 s.

    .venv/bin/python benchmarks/attention_foundations.py          # about 5 minutes
    .venv/bin/python benchmarks/attention_foundations.py --fast   # the fast setting's training only
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from helpers.attention_foundations import VOCAB, BottleneckDecoder, Encoder, Seq2Seq, exact_match_by_length, train_seq2seq
from reference import load_reference, notebook_seconds

SLUG = "attention_foundations"
TRAIN_LENGTHS = range(4, 31)  # the notebook's training cell
TEST_LENGTHS = [5, 10, 15, 20, 25, 30]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="train with the fast setting's 20 steps")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    ref = load_reference(SLUG)
    steps = 20 if args.fast else 2000
    started, scores = time.perf_counter(), {}
    for name, decoder in (("bottleneck", BottleneckDecoder), ("attention", ref["AttentionDecoder"])):
        torch.manual_seed(0)
        model = Seq2Seq(Encoder(len(VOCAB), 128), decoder(len(VOCAB), 128))
        log = train_seq2seq(model, steps=steps, lengths=TRAIN_LENGTHS, name=name)
        scores[name] = exact_match_by_length(model, TEST_LENGTHS, n_per_length=200)
        print(f"{name:>10}: {steps} steps in {log.seconds:.0f} s, final loss {log.losses[-1]:.4f}; exact match "
              + "  ".join(f"{n}: {100 * s:.1f}%" for n, s in scores[name].items()))
    total = time.perf_counter() - started
    print(f"both models trained and evaluated in {total / 60:.1f} min" + ("" if args.fast else " (target <= 5 min)"))
    if not args.fast:
        longest = TEST_LENGTHS[-1]
        print(f"attention model at length {longest}: {100 * scores['attention'][longest]:.1f}% exact match "
              f"(target >= 95%); bottleneck model {100 * scores['bottleneck'][longest]:.1f}%")
    print(f"\nnotebook top to bottom, fast setting: {notebook_seconds(SLUG, True):.1f} s (target <= 60 s)")


if __name__ == "__main__":
    main()
