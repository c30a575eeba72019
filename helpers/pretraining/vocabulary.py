"""Characters and examples of the pretraining notebook: the PAD and MASK characters, the check of a
span-corruption example, the character vocabulary, and the batches of pretraining and finetuning
that go through the student's example builders."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from .corpus import Person, question

__all__ = ["PAD", "MASK", "read_span_example", "encode_pairs", "CharVocab", "pretraining_batches",
           "finetuning_batches"]


PAD = "\u25a1"   # □ fills every example to block_size + 1 characters; the loss ignores it
MASK = "\u2047"  # ⁇ marks where the span was cut out, and where it starts again at the end


def _generator(seed: int) -> torch.Generator:
    """A CPU generator of its own, so that batches and weights never touch the global random state."""
    return torch.Generator().manual_seed(seed)


def read_span_example(x: str, y: str, document: str, block_size: int):
    """Take a span-corruption example apart: ``(prefix, span, suffix, problem)``.

    ``problem`` is ``None`` when ``(x, y)`` is a correct example of ``document`` (as the notebook
    describes it), and otherwise a sentence that says what is wrong (the pieces are then ``""``).
    ``document`` must hold neither MASK nor PAD.
    """
    def bad(message):
        return "", "", "", message

    if not (isinstance(x, str) and isinstance(y, str)):
        return bad(f"x and y must be strings, got {type(x).__name__} and {type(y).__name__}")
    if len(x) != block_size or len(y) != block_size:
        return bad(f"x and y must have block_size = {block_size} characters, got {len(x)} and {len(y)}")
    if x[1:] != y[:-1]:
        return bad("y must be x shifted by one character")
    text = x + y[-1]
    if text.count(MASK) != 2:
        return bad(f"the example must hold exactly two MASK characters, it holds {text.count(MASK)}: {text!r}")
    prefix, suffix, tail = text.split(MASK)
    span = tail.rstrip(PAD)
    if PAD in prefix + suffix + span:
        return bad(f"PAD may only come at the end, after the span: {text!r}")
    kept = prefix + span + suffix
    longest = block_size * 7 // 8  # the longest truncation the description allows
    if kept != document[:len(kept)]:
        return bad(f"prefix + span + suffix must be the start of the document (prefix + MASK + suffix + MASK + span): {text!r}")
    if len(kept) > longest:
        return bad(f"the truncated document has {len(kept)} characters, more than int(7/8 * block_size) = {longest}")
    if len(kept) < min(4, len(document)):
        return bad(f"the truncated document has {len(kept)} characters; it must keep at least 4")
    return prefix, span, suffix, None


def encode_pairs(pairs) -> list[int]:
    """String pairs as one list of integers (each string's length, then its code points), for the
    golden values of a test."""
    out = []
    for pair in pairs:
        for text in pair:
            out += [len(text)] + [ord(c) for c in text]
    return out


class CharVocab:
    """Every character of the corpus and the questions, PAD first (id 0, ignored by the loss)."""

    def __init__(self, texts: Sequence[str]):
        chars = sorted(set("".join(texts)) - {PAD, MASK})
        self.chars = [PAD, MASK] + chars
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        unknown = sorted({c for c in text if c not in self.index})
        if unknown:
            raise ValueError(f"characters the vocabulary does not have: {unknown}")
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids))


def _check_pair(pair, block_size: int, who: str):
    """A clear message for a wrong return value of the student's example builder."""
    if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
        raise TypeError(f"{who} must return a tuple (x, y) of two strings, got {type(pair).__name__}")
    x, y = pair
    if len(x) != block_size or len(y) != block_size:
        raise ValueError(f"{who} must return strings of block_size = {block_size} characters, got "
                         f"len(x) = {len(x)} and len(y) = {len(y)}")
    return x, y


def pretraining_batches(corpus: Sequence[str], span_corrupt: Callable, vocab: CharVocab, block_size: int,
                        batch_size: int, seed: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """A function that returns a new batch ``(x, y)`` of (batch_size, block_size) ids each call:
    random documents of ``corpus`` through ``span_corrupt(document, block_size, generator)``."""
    generator = _generator(seed)

    def batch():
        rows = torch.randint(len(corpus), (batch_size,), generator=generator).tolist()
        pairs = [_check_pair(span_corrupt(corpus[i], block_size, generator), block_size, "span_corrupt")
                 for i in rows]
        return (torch.stack([vocab.encode(x) for x, _ in pairs]), torch.stack([vocab.encode(y) for _, y in pairs]))

    return batch


def finetuning_batches(people: Sequence[Person], finetune_example: Callable, vocab: CharVocab, block_size: int,
                       batch_size: int, seed: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Like ``pretraining_batches``, from ``finetune_example(question, place, block_size)`` of ``people``."""
    pairs = [_check_pair(finetune_example(question(p.name), p.place, block_size), block_size, "finetune_example")
             for p in people]
    xs = torch.stack([vocab.encode(x) for x, _ in pairs])
    ys = torch.stack([vocab.encode(y) for _, y in pairs])
    generator = _generator(seed)

    def batch():
        rows = torch.randint(len(pairs), (batch_size,), generator=generator)
        return xs[rows], ys[rows]

    return batch
