"""The encoder-decoder of the attention-foundations notebook: the GRU encoder, the bottleneck decoder,
the model that joins them, its training loop, greedy decoding and exact match by sentence length.

The attention decoder is the students' to write; these take it, or :class:`BottleneckDecoder`, as
the model's decoder.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from ..training import TrainingLog, run_training
from ..validation import check_tensor
from .data import VOCAB, CaseBatch, make_batch, make_case_examples

__all__ = ["Encoder", "BottleneckDecoder", "Seq2Seq", "train_seq2seq", "greedy_decode", "exact_match_by_length"]


class Encoder(nn.Module):
    """A character embedding and a one-layer GRU over the source.

    ``forward(src, src_mask)`` returns ``(states, last)``: the hidden state at every source
    position, (B, S, H), zero at padding, and the state after the last real token, (1, B, H),
    which is the bottleneck a plain encoder-decoder hands to its decoder.
    """

    def __init__(self, vocab_size: int, hidden_size: int, embed_size: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=VOCAB.PAD)
        self.rnn = nn.GRU(embed_size, hidden_size, batch_first=True)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor):
        lengths = src_mask.sum(dim=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths, batch_first=True, enforce_sorted=False)
        states, last = self.rnn(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        return states, last


class BottleneckDecoder(nn.Module):
    """The decoder of Discussion 8's Figure 1: a GRU that starts from the encoder's last state and
    never looks at the source again.

    Same interface as the attention decoder: ``forward(tokens, hidden, enc_states, src_mask)``
    returns ``(logits (B, T, V), hidden (1, B, H), None)``; ``enc_states`` is ignored.
    """

    def __init__(self, vocab_size: int, hidden_size: int, embed_size: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=VOCAB.PAD)
        self.rnn = nn.GRU(embed_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens, hidden, enc_states, src_mask):
        queries, hidden = self.rnn(self.embed(tokens), hidden)
        return self.out(queries), hidden, None


class Seq2Seq(nn.Module):
    """An encoder and a decoder joined by the encoder's last state (the bottleneck), plus
    whatever the decoder reads from ``enc_states`` (nothing for :class:`BottleneckDecoder`)."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, batch: CaseBatch):
        """Teacher-forced logits (B, T, V) and attention weights (B, T, S) or None."""
        enc_states, last = self.encoder(batch.src, batch.src_mask)
        logits, _, weights = self.decoder(batch.tgt_in, last, enc_states, batch.src_mask)
        return logits, weights


def _check_decoder_output(result, batch: CaseBatch):
    if not (isinstance(result, tuple) and len(result) == 3):
        raise TypeError("the decoder's forward must return the triple (logits, hidden, weights)")
    logits, _, weights = result
    B, T = batch.tgt_in.shape
    check_tensor("logits", logits, shape=(B, T, len(VOCAB)))
    if weights is not None:
        check_tensor("weights", weights, shape=(B, T, batch.src.shape[1]))


def train_seq2seq(model: Seq2Seq, *, steps: int, lengths: Sequence[int], batch_size: int = 64, lr: float = 3e-3,
                  seed: int = 0, name: str = "model", every: int = 25) -> TrainingLog:
    """Train ``model`` on fresh random case examples with teacher forcing and Adam.

    Each step draws ``batch_size`` new examples with lengths from ``lengths``; the loss is the
    cross-entropy of every target character and EOS (padding ignored). Gradients are clipped to
    norm 1 (recurrent networks can have exploding gradients); the learning rate decays along a cosine.
    The loss is logged every ``every`` steps, or often enough for ten points in a short run.
    """
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    # the learning rate decays along a cosine to 5% of ``lr``: the last steps polish long sentences
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=0.05 * lr)

    def loss_at(step: int) -> torch.Tensor:
        batch = make_batch(make_case_examples(batch_size, lengths, seed=seed * 1_000_003 + step))
        enc_states, last = model.encoder(batch.src, batch.src_mask)
        result = model.decoder(batch.tgt_in, last, enc_states, batch.src_mask)
        if step == 1:  # a wrong shape gets a clear message, not an error deep inside the loss
            _check_decoder_output(result, batch)
        return nn.functional.cross_entropy(result[0].transpose(1, 2), batch.tgt_out, ignore_index=VOCAB.PAD)

    return run_training(model, steps=steps, optimizer=optimizer, schedule=schedule, loss_at=loss_at, name=name,
                        every=every)


@torch.no_grad()
def greedy_decode(model: Seq2Seq, batch: CaseBatch, max_len: int | None = None):
    """Decode one character at a time, feeding each prediction back in.

    Returns ``(ids (B, L), weights (B, L, S) or None)``; rows stop at EOS (PAD after).
    """
    model.eval()
    enc_states, hidden = model.encoder(batch.src, batch.src_mask)
    B = batch.src.shape[0]
    max_len = max_len or batch.src.shape[1] + 1
    token = torch.full((B, 1), VOCAB.BOS, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    ids, weights = [], []
    for _step in range(max_len):
        logits, hidden, w = model.decoder(token, hidden, enc_states, batch.src_mask)
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        token[done] = VOCAB.PAD
        ids.append(token)
        if w is not None:
            weights.append(w[:, -1:])
        done |= token[:, 0] == VOCAB.EOS
        if done.all():
            break
    return torch.cat(ids, dim=1), (torch.cat(weights, dim=1) if weights else None)


def exact_match_by_length(model: Seq2Seq, lengths: Sequence[int], n_per_length: int = 200,
                          seed: int = 12345) -> dict[int, float]:
    """Share of held-out sentences of each length whose whole output is exactly right."""
    scores = {}
    for length in lengths:
        examples = make_case_examples(n_per_length, length, seed=seed + length)
        ids, _ = greedy_decode(model, make_batch(examples))
        right = sum(VOCAB.decode(row) == target for row, (_, _, target) in zip(ids, examples))
        scores[length] = right / n_per_length
    return scores
