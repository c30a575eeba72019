"""The pretraining notebook's model and what is done with it: a small GPT around the student's
attention layer, its training loop, greedy answers to the finetuning question, and deterministic
weights to compare two attention layers with."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import nn

from ..training import TrainingLog, run_training
from ..validation import check_tensor
from .corpus import question
from .vocabulary import MASK, PAD, CharVocab, _generator

__all__ = ["GPT", "train", "predict_places", "deterministic_weights"]


class _Block(nn.Module):
    """Pre-norm transformer block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, attention: nn.Module, n_embd: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = attention
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small GPT: token and learned position embeddings, ``n_layer`` blocks, a final LayerNorm and
    a linear head. ``attention`` is the class of the attention layer, built as
    ``attention(n_embd, n_head, block_size)`` (``CausalSelfAttention`` or ``SynthesizerAttention``)."""

    def __init__(self, vocab_size: int, block_size: int, attention: type, n_embd: int = 128, n_layer: int = 4,
                 n_head: int = 4, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.block_size = block_size
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.blocks = nn.Sequential(*[_Block(attention(n_embd, n_head, block_size), n_embd) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        for module in self.modules():  # GPT-2's small initialisation
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, 0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, vocab) logits of the next character."""
        T = idx.shape[1]
        if T > self.block_size:
            raise ValueError(f"sequence of {T} characters, longer than block_size = {self.block_size}")
        x = self.tok(idx) + self.pos[:, :T]
        out = self.blocks(x)
        return self.head(self.ln(out))


def train(model: GPT, batches: Callable, *, steps: int, lr: float, name: str, every: int = 50,
          evaluate: Callable[[GPT], float] | None = None, eval_every: int | None = None) -> TrainingLog:
    """AdamW with a short warm-up and a cosine decay; cross-entropy that ignores PAD (id 0).

    ``evaluate(model)``, if given, is called every ``eval_every`` steps and at the end (the model in
    eval mode); its values go into the log's ``accuracies``.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, min(50, steps // 10))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))

    def loss_at(step: int) -> torch.Tensor:
        x, y = batches()
        logits = model(x)
        if step == 1:
            check_tensor("the model's logits", logits, shape=(*x.shape, logits.shape[-1]))
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=0)

    return run_training(model, steps=steps, optimizer=optimizer, schedule=schedule, loss_at=loss_at, name=name,
                        every=every, evaluate=evaluate, eval_every=eval_every)


@torch.no_grad()
def predict_places(model: GPT, vocab: CharVocab, names: Sequence[str], max_chars: int = 12,
                   batch_size: int = 512) -> list[str]:
    """Greedy answers to "Where was NAME born?": the characters after the question's MASK, up to the
    next MASK or PAD (at most ``max_chars``)."""
    model.eval()
    answers = []
    for start in range(0, len(names), batch_size):
        prompts = [question(n) + MASK for n in names[start:start + batch_size]]
        lengths = torch.tensor([len(p) for p in prompts])
        width = min(model.block_size, int(lengths.max()) + max_chars)
        ids = torch.zeros(len(prompts), width, dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, :len(prompt)] = vocab.encode(prompt)
        done = torch.zeros(len(prompts), dtype=torch.bool)
        out = [[] for _ in prompts]
        rows = torch.arange(len(prompts))
        for step in range(max_chars):
            position = lengths + step
            if int(position.max()) >= width:
                break
            logits = model(ids[:, : int(position.max())])
            nxt = logits[rows, position - 1].argmax(dim=-1)
            done |= (nxt == vocab.index[MASK]) | (nxt == vocab.index[PAD])
            for row in torch.nonzero(~done).flatten().tolist():
                out[row].append(vocab.chars[int(nxt[row])])
            ids[rows, position] = torch.where(done, ids[rows, position], nxt)
            if bool(done.all()):
                break
        answers += ["".join(chars) for chars in out]
    return answers


def deterministic_weights(module: nn.Module, seed: int, scale: float = 0.3) -> nn.Module:
    """Overwrite every parameter of ``module`` with numbers drawn in the order of their names, so
    that two layers with the same parameter names and shapes get the same weights however their
    ``__init__`` created them."""
    generator = _generator(seed)
    with torch.no_grad():
        for _, parameter in sorted(module.named_parameters()):
            parameter.copy_(scale * torch.randn(parameter.shape, generator=generator, dtype=torch.float64))
    return module
