"""attention_foundations targets: Part 3's two RNNs trained as in the notebook, in one setting, with
the time and the exact match by length of both models; then the whole notebook in that setting.

Full setting: both models in at most 5 minutes, the attention model at least 95% exact match at the
longest length tested, the bottleneck model decaying with length. Quick setting: at most 3 minutes
of training for the whole notebook (170 CPU-seconds), the attention model far ahead of the
bottleneck on long sentences.

    .venv/bin/python benchmarks/attention_foundations.py            # full setting, about 10 minutes
    .venv/bin/python benchmarks/attention_foundations.py --quick    # quick setting, about 3 minutes
    .venv/bin/python benchmarks/attention_foundations.py --grading  # grading setting (--fast is the old name)
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import torch

from helpers.attention_foundations import VOCAB, BottleneckDecoder, Encoder, Seq2Seq, exact_match_by_length, train_seq2seq
from busy import compare_when_asked
from reference import load_reference, notebook_seconds

SLUG = "attention_foundations"
TRAIN_LENGTHS = range(4, 31)  # the notebook's training cell
TEST_LENGTHS = [5, 10, 15, 20, 25, 30]
#: The budget() values of the notebook's training and evaluation cells: steps, learning rate,
#: sentences per length.
SETTINGS = {"full": (2000, 3e-3, 200), "quick": (600, 1e-2, 200), "grading": (20, 3e-3, 10)}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="the quick setting: 600 steps at lr 1e-2")
    group.add_argument("--grading", "--fast", action="store_true", help="the grading setting's 20 steps")
    parser.add_argument("--no-notebook", action="store_true", help="skip running the whole notebook")
    args = parser.parse_args()
    setting = "quick" if args.quick else "grading" if args.grading else "full"
    steps, lr, per_length = SETTINGS[setting]
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 0)) or os.cpu_count() or 1)
    ref = load_reference(SLUG)
    print(f"setting {setting}: {steps} steps at lr {lr:g}, {per_length} sentences per length, "
          f"{torch.get_num_threads()} threads")
    started, cpu_started, scores = time.perf_counter(), _cpu_seconds(), {}
    for name, decoder in (("bottleneck", BottleneckDecoder), ("attention", ref["AttentionDecoder"])):
        torch.manual_seed(0)
        model = Seq2Seq(Encoder(len(VOCAB), 128), decoder(len(VOCAB), 128))
        cpu = _cpu_seconds()
        log = train_seq2seq(model, steps=steps, lengths=TRAIN_LENGTHS, lr=lr, name=name)
        cpu = _cpu_seconds() - cpu
        scores[name] = exact_match_by_length(model, TEST_LENGTHS, n_per_length=per_length)
        print(f"{name:>10}: {steps} steps in {log.seconds:.0f} s ({cpu:.0f} CPU-s), final loss {log.losses[-1]:.4f}; "
              "exact match " + "  ".join(f"{n}: {100 * s:.1f}%" for n, s in scores[name].items()))
    total, cpu_total = time.perf_counter() - started, _cpu_seconds() - cpu_started
    target = {"full": " (target <= 5 min)", "quick": " (target: 170 CPU-s for the whole notebook's training)"}
    print(f"both models trained and evaluated in {total / 60:.1f} min, {cpu_total:.0f} CPU-s{target.get(setting, '')}")
    if setting != "grading":
        longest = TEST_LENGTHS[-1]
        gaps = {n: scores["attention"][n] - scores["bottleneck"][n] for n in TEST_LENGTHS}
        print(f"attention model at length {longest}: {100 * scores['attention'][longest]:.1f}% exact match"
              + (" (target >= 95%)" if setting == "full" else "")
              + f"; bottleneck model {100 * scores['bottleneck'][longest]:.1f}%; smallest lead of attention "
              f"from length 15 on: {100 * min(g for n, g in gaps.items() if n >= 15):.1f} points")
    if not args.no_notebook:
        limits = {"full": "15 min", "quick": "3 min of training", "grading": "60 s"}
        seconds = notebook_seconds(SLUG, setting)
        print(f"\nnotebook top to bottom, {setting} setting: {seconds:.0f} s (target <= {limits[setting]})")


if __name__ == "__main__":
    if not compare_when_asked(SLUG):  # --quick --busy: idle and beside a busy program (benchmarks/busy.py)
        main()
