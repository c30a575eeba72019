"""summarization targets: training time and test ROUGE at the full setting (all test articles,
those with names seen in training, those with unseen names) against the lead baseline; the
key/value cache's speed-up at summary length 64; the optional Performer (FAVOR+) model trained
with the same budget, against softmax attention, per training step; the grading setting's whole
notebook time.

With ``--quick``: the solved notebook run top to bottom in the quick setting, as a student on a
slow laptop would, and the figures that student reads: the notebook's time (and the kernel's CPU
time), the training time and validation loss, ROUGE against the lead baseline, whether the model
copies the names of the articles (those of the printed examples and of the cross-attention map),
the cache's speed-up and the time per training step of both models in Part 12.

    .venv/bin/python benchmarks/summarization.py            # full setting (about 25 minutes)
    .venv/bin/python benchmarks/summarization.py --quick    # quick notebook (a few minutes)
"""

from __future__ import annotations

import argparse
import re
import resource
import time
from pathlib import Path

import torch

from helpers import seed_everything
from helpers.summarization import (build_vocabulary, batches, lead_summary, make_corpus, rouge_table, summarize,
                                   plot_losses, time_decoding, time_training_steps, train_summarizer,
                                   use_performer_attention)
from busy import compare_when_asked
from reference import load_reference, notebook_seconds, run_solved_notebook

SLUG = "summarization"
# The notebook's full setting (Part 7).
MODEL = dict(d_model=128, num_heads=4, num_layers=2, d_ff=256, max_len=256, dropout=0.0)
SCHEDULE = dict(epochs=11, max_steps=2000, batch_size=32, lr=1e-3)
PERFORMER_FEATURES = 32  # per head, as in Part 12


def main() -> None:
    ref = load_reference(SLUG)
    corpus = make_corpus()
    vocab = build_vocabulary(corpus.train)
    seed_everything(0)
    model = ref["Summarizer"](len(vocab), pad_id=vocab.pad_id, **MODEL)
    history = train_summarizer(model, corpus, vocab, ref["sequence_loss"], **SCHEDULE)
    print(f"training, full setting: {history.steps} steps in {history.seconds:.0f} s (target <= 300 s); "
          f"validation loss {history.val[0][1]:.2f} -> {history.val[-1][1]:.2f}")

    started = time.perf_counter()
    greedy = summarize(model, ref["greedy_decode"], corpus.test, vocab, use_cache=True)
    seconds = time.perf_counter() - started
    lead = rouge_table([lead_summary(a.document) for a in corpus.test], corpus.test)
    scores = rouge_table(greedy, corpus.test)
    print(f"greedy decoding of {len(corpus.test)} test articles with the cache: {seconds:.1f} s")
    for subset in scores:
        print(f"ROUGE-L, {subset:<13} greedy {scores[subset]['rougeL']:.3f}   lead sentence {lead[subset]['rougeL']:.3f}"
              + ("   (target >= 0.70)" if subset == "all" else ""))
    for subset in scores:
        print(f"ROUGE-1/2, {subset:<11} greedy {scores[subset]['rouge1']:.3f}/{scores[subset]['rouge2']:.3f}   "
              f"lead {lead[subset]['rouge1']:.3f}/{lead[subset]['rouge2']:.3f}")
    beam_articles = corpus.test[:150]
    beam = rouge_table(summarize(model, ref["beam_search"], beam_articles, vocab, beam_size=4), beam_articles)
    greedy_150 = rouge_table(greedy[:150], beam_articles)
    print(f"first 150 test articles: ROUGE-L beam (k=4) {beam['all']['rougeL']:.3f}, greedy {greedy_150['all']['rougeL']:.3f}")

    batch = next(batches(corpus.val, vocab, 8))
    times = time_decoding(ref["greedy_decode"], model, batch.src, [16, 32, 64], vocab.bos_id, vocab.eos_id, repeats=3)
    for length, plain, cached in zip(times["lengths"], times["recompute"], times["cache"]):
        print(f"greedy, 8 articles, {length} tokens: recompute {plain:.3f} s, cache {cached:.3f} s, "
              f"speed-up {plain / cached:.1f}x" + ("   (target >= 3x)" if length == 64 else ""))
    with torch.no_grad():
        plain = ref["greedy_decode"](model, batch.src, 64, vocab.bos_id, vocab.eos_id)
        cached = ref["greedy_decode"](model, batch.src, 64, vocab.bos_id, vocab.eos_id, use_cache=True)
    print(f"cached and recomputed tokens identical: {torch.equal(plain, cached)}")

    seed_everything(0)
    performer = ref["Summarizer"](len(vocab), pad_id=vocab.pad_id, **MODEL)
    use_performer_attention(performer, ref["MultiHeadAttention"], ref["performer_attention"], num_features=PERFORMER_FEATURES)
    performer_history = train_summarizer(performer, corpus, vocab, ref["sequence_loss"], **SCHEDULE)
    performer_scores = rouge_table(summarize(performer, ref["greedy_decode"], corpus.test, vocab), corpus.test)
    print(f"Performer ({PERFORMER_FEATURES} features per head), same budget: {performer_history.seconds:.0f} s "
          f"(softmax {history.seconds:.0f} s); final validation loss {performer_history.val[-1][1]:.2f} "
          f"(softmax {history.val[-1][1]:.2f})")
    step_seconds = time_training_steps({"softmax": model, "Performer": performer}, corpus, vocab, ref["sequence_loss"],
                                       batch_size=SCHEDULE["batch_size"])
    print(f"seconds per training step, the same 20 batches in turns (median): Performer {step_seconds['Performer']:.3f} s, "
          f"softmax {step_seconds['softmax']:.3f} s")
    figure = Path("out/benchmarks/summarization_learning_curves.png")
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot_losses(history, performer_history, labels=("softmax attention", "Performer (FAVOR+)")).figure.savefig(
        figure, dpi=100, bbox_inches="tight")
    print(f"learning curves of both: {figure}")
    for subset in performer_scores:
        print(f"ROUGE-L, {subset:<13} Performer greedy {performer_scores[subset]['rougeL']:.3f}   "
              f"softmax greedy {scores[subset]['rougeL']:.3f}")
    print(f"notebook top to bottom, grading setting: {notebook_seconds(SLUG, 'grading'):.1f} s (target <= 90 s)")


def _printed(nb) -> list[str]:
    """Each code cell's printed output, in order."""
    return ["".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
            for cell in nb.cells if cell.cell_type == "code"]


def _names(text: str) -> set[str]:
    """The capitalised words of a reference summary (names, places, firms, days)."""
    return {w.lower() for w in re.findall(r"[A-Za-z]+", text) if w[0].isupper()} - {"a", "the", "university"}


def quick() -> None:
    """Run the solved notebook in the quick setting and print what a student reads from it."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, nb = run_solved_notebook(SLUG, "quick")
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    said = "\n".join(_printed(nb))
    print(f"quick notebook top to bottom: {seconds:.0f} s wall, {cpu:.0f} s CPU in its kernel (target: <= 3 minutes of training)")
    steps, train_s, before, after = re.search(r"(\d+) steps in (\d+) s; validation loss ([\d.]+) -> ([\d.]+)", said).groups()
    print(f"training (Part 7): {steps} steps in {train_s} s wall; validation loss {before} -> {after}")
    performer = re.search(r"(\d+) steps; validation loss ([\d.]+) -> ([\d.]+)", said)
    if performer:
        print(f"Performer training (Part 12): {performer.group(1)} steps")
    timing = re.search(r"the same (\d+) batches for both, in turns: softmax attention ([\d.]+) s, "
                       r"Performer ([\d.]+) s \(([\d.]+)x\)", said)
    if timing:
        print(f"time per training step, the same {timing.group(1)} batches in turns: softmax {timing.group(2)} s, "
              f"Performer {timing.group(3)} s ({timing.group(4)}x)")
    speed = re.search(r"at (\d+) tokens the cache is ([\d.]+)x faster", said)
    print(f"key/value cache at {speed.group(1)} tokens: {speed.group(2)}x faster; identical tokens: "
          f"{'identical tokens with and without the cache: True' in said}")
    rows = re.findall(r"^(lead sentence|greedy|beam search \(k=4\)|softmax attention, greedy|Performer, greedy)\s+"
                      r"(all|seen names|unseen names)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", said, flags=re.M)
    for system, subset, r1, r2, rl in rows:
        print(f"ROUGE {system:<26} {subset:<13} R-1 {r1}  R-2 {r2}  R-L {rl}")
    copied = total = 0
    for reference, model in re.findall(r"REFERENCE: (.*)\nMODEL:\s+(.*)", said):
        names = _names(reference)
        found = names & set(re.findall(r"[a-z]+", model.lower()))
        copied, total = copied + len(found), total + len(names)
        print(f"example: reference names {sorted(names)}, copied {sorted(found)}")
    print(f"names of the printed examples' references written by the model: {copied}/{total}")
    part11 = next(text for text in _printed(nb) if text.startswith("ARTICLE:  ") and "REFERENCE:" in text)
    print(f"cross-attention example (Part 11): {part11.strip()}")


if __name__ == "__main__":
    if not compare_when_asked(SLUG):  # --quick --busy: idle and beside a busy program (benchmarks/busy.py)
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--quick", action="store_true", help="time the quick notebook and print what a student reads from it")
        quick() if parser.parse_args().quick else main()
