"""The data of the attention-foundations notebook: Discussion 8's worked example and the case task.

The case task: a task token (``<U>`` or ``<L>``) followed by a sentence in mixed case; the answer is
the sentence in upper or lower case, one character per step. :class:`CharVocab` gives tokens their
ids, :func:`make_case_examples` draws examples and :func:`make_batch` pads them into a batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

__all__ = ["discussion_example", "CharVocab", "VOCAB", "make_case_examples", "CaseBatch", "make_batch"]


def discussion_example() -> dict[str, torch.Tensor]:
    """The three hidden states and projections of Discussion 8, question 2, as float64 tensors.

    ``h`` holds the hidden states as rows: ``h[i]`` is h_{i+1} of the discussion (shape (3, 2)).
    The matrices act on column vectors, as written there: q_i = W_q h_i.
    """
    return {
        "h": torch.tensor([[5.0, 1.0], [4.0, 3.0], [-2.0, 6.0]], dtype=torch.float64),
        "W_q": torch.tensor([[1.0, 0.0], [2.0, 9.0]], dtype=torch.float64),
        "W_k": torch.tensor([[0.0, 1.0], [6.0, 0.0]], dtype=torch.float64),
        "W_v": torch.tensor([[4.0, 3.0], [9.0, 1.0]], dtype=torch.float64),
    }


# ----------------------------------------------------------------------------- the case task

_WORDS = """
the of and to in is you that it he was for on are as with his they at be this have from or one
had by word but not what all were we when your can said there use an each which she do how their
if will up other about out many then them these so some her would make like him into time has look
two more write go see number no way could people my than first water been call who oil its now
find long down day did get come made may part student teacher class model attention query key value
layer head token vector matrix network train learn data sentence letter paper river city garden
window morning evening music story friend family school market summer winter bridge forest mountain
island ocean planet engine signal memory order small large quick quiet bright simple strong gentle
""".split()

UPPER, LOWER = "<U>", "<L>"


class CharVocab:
    """Characters and special tokens of the case task, with their integer ids.

    ``PAD`` (0) fills short rows, ``BOS`` starts every decoder input, ``EOS`` ends every target,
    ``<U>`` and ``<L>`` are the two task tokens; then the space and the 52 letters.
    """

    PAD, BOS, EOS = 0, 1, 2

    def __init__(self):
        self.tokens = ["<pad>", "<bos>", "<eos>", UPPER, LOWER, " "]
        self.tokens += [chr(c) for c in range(ord("a"), ord("z") + 1)]
        self.tokens += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def encode_source(self, task: str, text: str) -> list[int]:
        """The encoder's input: the task token, then one id per character."""
        if task not in (UPPER, LOWER):
            raise ValueError(f"task must be {UPPER!r} or {LOWER!r}, got {task!r}")
        unknown = sorted({c for c in text if c not in self.index})
        if unknown:
            raise ValueError(f"characters outside the task's alphabet (letters and space): {unknown}")
        return [self.index[task]] + [self.index[c] for c in text]

    def encode_target(self, text: str) -> list[int]:
        return [self.index[c] for c in text] + [self.EOS]

    def decode(self, ids) -> str:
        """Characters up to the first EOS; special tokens other than the task tokens are dropped."""
        out = []
        for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
            if i == self.EOS:
                break
            token = self.tokens[i]
            if token in (UPPER, LOWER) or len(token) == 1:
                out.append(token)
        return "".join(out)


VOCAB = CharVocab()


def _word(rng: random.Random) -> str:
    """An English word from a fixed list, or as often a random string of 1 to 8 letters: a model
    that only learned the list's spellings could not copy the rest."""
    if rng.random() < 0.5:
        return rng.choice(_WORDS)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 8)))


def _sentence(rng: random.Random, length: int) -> str:
    """Words cut to exactly ``length`` characters, each letter upper- or lower-case at random (so
    that neither case can be guessed from the input alone)."""
    words = []
    while sum(len(w) + 1 for w in words) < length + 1:
        words.append(_word(rng))
    text = " ".join(words)[:length].rstrip()
    text = text + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length - len(text)))
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def make_case_examples(n: int, lengths: Sequence[int] | int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` examples ``(task, source text, target text)``, half of each task in random order.

    Parameters
    ----------
    n : int
    lengths : int or sequence of int
        The sentence length in characters (the task token not counted); a sequence gives each
        example a length drawn uniformly from it.
    seed : int
        The same seed gives the same examples.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    choices = [lengths] if isinstance(lengths, int) else list(lengths)
    if not choices or min(choices) < 1:
        raise ValueError(f"lengths must be positive, got {lengths!r}")
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        text = _sentence(rng, rng.choice(choices))
        task = UPPER if i % 2 == 0 else LOWER
        examples.append((task, text, text.upper() if task == UPPER else text.lower()))
    rng.shuffle(examples)
    return examples


@dataclass
class CaseBatch:
    """Padded tensors of a batch of case examples (``B`` rows).

    src : (B, S) int64, task token then characters, PAD after the end.
    src_mask : (B, S) bool, True at real source tokens.
    tgt_in : (B, T) int64, BOS then the target characters (the decoder's input, teacher forcing).
    tgt_out : (B, T) int64, the target characters then EOS, PAD after (what the decoder predicts).
    """

    src: torch.Tensor
    src_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    examples: list = field(repr=False)


def _pad(rows: list[list[int]]) -> torch.Tensor:
    """(B, longest row) LongTensor, short rows filled with PAD."""
    return pad_sequence([torch.tensor(row, dtype=torch.long) for row in rows], batch_first=True, padding_value=VOCAB.PAD)


def make_batch(examples: Sequence[tuple[str, str, str]]) -> CaseBatch:
    """Pad a list of ``(task, source, target)`` examples into a :class:`CaseBatch`."""
    src = _pad([VOCAB.encode_source(task, text) for task, text, _ in examples])
    targets = [VOCAB.encode_target(target) for _, _, target in examples]
    tgt_out = _pad(targets)
    tgt_in = _pad([[VOCAB.BOS] + t[:-1] for t in targets])
    return CaseBatch(src, src != VOCAB.PAD, tgt_in, tgt_out, list(examples))
