"""summarization targets: training time and test ROUGE at the full setting (all test articles,
those with names seen in training, those with unseen names) against the lead baseline; the
key/value cache's speed-up at summary length 64; the optional Performer (FAVOR+) model trained
with the same budget, against softmax attention; the fast setting's whole notebook time.

    .venv/bin/python benchmarks/summarization.py
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from helpers import seed_everything
from helpers.summarization import (build_vocabulary, batches, lead_summary, make_corpus, rouge_table, summarize,
                                   plot_losses, time_decoding, train_summarizer, use_performer_attention)
from reference import load_reference, notebook_seconds

SLUG = "summarization"
# The notebook's full setting (Part 7).
MODEL = dict(d_model=128, num_heads=4, num_layers=2, d_ff=256, max_len=256)
EPOCHS, LR = 14, 1e-3
PERFORMER_FEATURES = 32  # per head, as in Part 12


def main() -> None:
    ref = load_reference(SLUG)
    corpus = make_corpus()
    vocab = build_vocabulary(corpus.train)
    seed_everything(0)
    model = ref["Summarizer"](len(vocab), pad_id=vocab.pad_id, **MODEL)
    history = train_summarizer(model, corpus, vocab, ref["sequence_loss"], epochs=EPOCHS, lr=LR)
    print(f"training, full setting: {history.steps} steps in {history.seconds:.0f} s (target <= 600 s); "
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
    performer_history = train_summarizer(performer, corpus, vocab, ref["sequence_loss"], epochs=EPOCHS, lr=LR)
    performer_scores = rouge_table(summarize(performer, ref["greedy_decode"], corpus.test, vocab), corpus.test)
    print(f"Performer ({PERFORMER_FEATURES} features per head), same budget: {performer_history.seconds:.0f} s "
          f"(softmax {history.seconds:.0f} s); final validation loss {performer_history.val[-1][1]:.2f} "
          f"(softmax {history.val[-1][1]:.2f})")
    figure = Path("out/benchmarks/summarization_learning_curves.png")
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot_losses(history, performer_history, labels=("softmax attention", "Performer (FAVOR+)")).figure.savefig(figure, dpi=100)
    print(f"learning curves of both: {figure}")
    for subset in performer_scores:
        print(f"ROUGE-L, {subset:<13} Performer greedy {performer_scores[subset]['rougeL']:.3f}   "
              f"softmax greedy {scores[subset]['rougeL']:.3f}")
    print(f"notebook top to bottom, fast setting: {notebook_seconds(SLUG, True):.1f} s (target <= 90 s)")


if __name__ == "__main__":
    main()
