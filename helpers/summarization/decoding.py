"""What the decoding parts are checked and timed with: small fixed models whose next-token
distribution depends on the article and the whole prefix (no attention the student wrote),
exhaustive search, Homework 6's probability tree, and the cache's timing and its plot."""

from __future__ import annotations

import math
import time
from typing import Sequence

import torch

__all__ = ["ToyDecoderModel", "exhaustive_search", "time_decoding", "plot_decoding_times",
           "TREE_WORDS", "TREE", "TreeModel", "print_tree"]

# ---------------------------------------------------------------------------------------------
# Small fixed models for the decoders: next-token log-probabilities that depend on the article
# and on the whole prefix, without any attention the student wrote.
# ---------------------------------------------------------------------------------------------
class ToyDecoderModel(torch.nn.Module):
    """``model(src, tgt_in) -> logits (B, Tt, vocab)`` from seeded random tables.

    The logits after a prefix depend on its last token, on its length, on a running sum of the
    prefix, and on the first token of ``src``; ``sharpness`` scales them (larger: surer).
    """

    def __init__(self, vocab_size: int = 7, seed: int = 0, sharpness: float = 2.0, eos_id: int | None = None,
                 eos_bias: float = 0.0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.vocab_size = vocab_size
        self.last = torch.randn(vocab_size, vocab_size, generator=g) * sharpness
        self.position = torch.randn(64, vocab_size, generator=g) * sharpness
        self.history = torch.randn(97, vocab_size, generator=g) * sharpness
        self.article = torch.randn(vocab_size + 64, vocab_size, generator=g) * sharpness
        if eos_id is not None:
            self.position[:, eos_id] += eos_bias
        self.calls = 0

    def forward(self, src, tgt_in):
        self.calls += 1
        T = tgt_in.shape[1]
        running = (tgt_in.long() * 7 + 3).cumsum(dim=1) % 97  # (B, T): depends on the whole prefix
        return (self.last[tgt_in] + self.position[:T][None] + self.history[running]
                + self.article[src[:, :1].long() % (self.vocab_size + 64)])


def exhaustive_search(model, src_row, max_len: int, bos_id: int, eos_id: int) -> tuple[list[int], float]:
    """The most likely sequence (bos, up to ``max_len`` tokens, ending at eos or at max_len) by
    scoring every one: only for tiny vocabularies."""
    import torch.nn.functional as F

    best = ([bos_id], float("-inf"))
    frontier = [([bos_id], 0.0)]
    for _length in range(1, max_len + 1):
        tokens = torch.tensor([seq for seq, _ in frontier])
        logp = F.log_softmax(model(src_row.expand(len(frontier), -1), tokens)[:, -1].double(), dim=-1)
        grown = []
        for (seq, score), row in zip(frontier, logp):
            for token, lp in enumerate(row.tolist()):
                candidate = (seq + [token], score + lp)
                if token == eos_id:
                    best = max(best, candidate, key=lambda c: c[1])
                else:
                    grown.append(candidate)
        frontier = grown
    for candidate in frontier:  # reached max_len without eos
        best = max(best, candidate, key=lambda c: c[1])
    return best


def time_decoding(decode, model, src, lengths: Sequence[int], bos_id: int, eos_id: int, repeats: int = 1) -> dict:
    """Seconds ``decode`` takes to write exactly L tokens, for each L in ``lengths``, with and
    without the key/value cache (eos is never chosen: its logit is pushed down while timing)."""
    class NoEos(torch.nn.Module):  # the same model, but eos never wins: every run has length L
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.decoder = getattr(inner, "decoder", None)

        def _mask(self, logits):
            logits = logits.clone()
            logits[..., eos_id] = float("-inf")
            return logits

        def forward(self, src, tgt_in):
            return self._mask(self.inner(src, tgt_in))

        def encode(self, src):
            return self.inner.encode(src)

        def decode(self, memory, src, tgt_in, caches=None):
            return self._mask(self.inner.decode(memory, src, tgt_in, caches))

    wrapped = NoEos(model).eval()
    times = {"recompute": [], "cache": []}
    with torch.no_grad():
        for length in lengths:
            for kind in times:
                best = float("inf")
                for _ in range(repeats):
                    started = time.perf_counter()
                    decode(wrapped, src, length, bos_id, eos_id, use_cache=kind == "cache")
                    best = min(best, time.perf_counter() - started)
                times[kind].append(best)
    return {"lengths": list(lengths), **times}


def plot_decoding_times(times: dict, ax=None):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ax.plot(times["lengths"], times["recompute"], "o-", label="recompute every step")
    ax.plot(times["lengths"], times["cache"], "s-", label="key/value cache")
    ax.set_xticks(times["lengths"])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("summary length (tokens generated)")
    ax.set_ylabel("seconds for the batch")
    ax.set_title("Greedy decoding time")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")  # both curves start low at the left
    return ax


# ---------------------------------------------------------------------------------------------
# Homework 6's beam search exercise: a two-word vocabulary and a fixed tree of probabilities
# ---------------------------------------------------------------------------------------------
TREE_WORDS = {0: "<s>", 1: "neural", 2: "network", 3: "</s>"}
#: P(next word | words so far); sequences have three words and never end early. Homework 6 has
#: 0.50 / 0.50 after "network neural", where two sequences tie at step 3 of a width-2 beam search;
#: 0.52 / 0.48 keeps its trap (the beam drops the prefix of the most likely sequence) without a tie.
TREE = {
    (): {1: 0.55, 2: 0.45},
    (1,): {1: 0.60, 2: 0.40},
    (2,): {1: 0.90, 2: 0.10},
    (1, 1): {1: 0.35, 2: 0.65},
    (1, 2): {1: 0.01, 2: 0.99},
    (2, 1): {1: 0.52, 2: 0.48},
    (2, 2): {1: 0.30, 2: 0.70},
}


class TreeModel(torch.nn.Module):
    """``model(src, tgt_in) -> logits`` whose softmax is the probability tree ``TREE``; ``src`` is ignored.

    bos = 0 and eos = 3 get a logit of -1e9 (a log-probability of about -1e9, not -inf), so no
    sequence ends early and no hypothesis holding them wins; but a beam of width 3 or more has more
    places than the two words, so it may keep such a hypothesis (``[bos, eos]``, ``[bos, bos]``)
    in its last places."""

    def forward(self, src, tgt_in):
        B, T = tgt_in.shape
        logits = torch.full((B, T, len(TREE_WORDS)), -1e9, dtype=torch.float64)
        for b in range(B):
            for t in range(T):
                prefix = tuple(int(x) for x in tgt_in[b, 1: t + 1])
                for word, p in TREE.get(prefix, {1: 0.5, 2: 0.5}).items():
                    logits[b, t, word] = math.log(p)
        return logits


def print_tree() -> None:
    """The tree as a table: each prefix and the probabilities of the next word."""
    for prefix, nxt in TREE.items():
        words = " ".join(TREE_WORDS[w] for w in prefix) or "(start)"
        options = ", ".join(f"{TREE_WORDS[w]}: {p:.2f} (log {math.log(p):.3f})" for w, p in nxt.items())
        print(f"{words:<18} -> {options}")

