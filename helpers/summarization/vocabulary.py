"""Tokens and batches: the WordPiece vocabulary of the bundled MiniLM cut down to the pieces the
training split uses, and padded batch-first batches of articles and summaries."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

from ..models import BUNDLED_BERT, bundled_model_path
from .corpus import Article

__all__ = ["SPECIALS", "Vocabulary", "build_vocabulary", "Batch", "batches"]

# ---------------------------------------------------------------------------------------------
# Tokenizer: the WordPiece vocabulary that ships with the bundled MiniLM, cut down to the pieces
# the training split uses (a 30,522-way softmax would dominate a small model's time on a CPU).
# ---------------------------------------------------------------------------------------------
SPECIALS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")


class Vocabulary:
    """Text <-> token ids: WordPiece splitting, then a compact id per piece.

    ``pad_id`` is 0; ``bos_id`` starts every summary and ``eos_id`` ends it; a piece the training
    split never used becomes ``unk_id``.
    """

    def __init__(self, pieces: Sequence[str], wordpiece):
        self.pieces = list(SPECIALS) + [p for p in pieces if p not in SPECIALS]
        self.index = {piece: i for i, piece in enumerate(self.pieces)}
        self._wordpiece = wordpiece
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = range(4)

    def __len__(self) -> int:
        return len(self.pieces)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} pieces)"

    def tokenize(self, text: str) -> list[str]:
        return self._wordpiece.encode(text, add_special_tokens=False).tokens

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.index.get(piece, self.unk_id) for piece in self.tokenize(text)]
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids) -> str:
        """Token ids back to text; stops at the first eos and leaves out pad and bos."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        words: list[str] = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            piece = self.pieces[i] if 0 <= i < len(self.pieces) else "[UNK]"
            if piece.startswith("##") and words:
                words[-1] += piece[2:]
            else:
                words.append(piece)
        text = " ".join(words)
        text = re.sub(r"(\d) ([.,]) (?=\d)", r"\1\2", text)  # 3 . 2 -> 3.2, 1 , 250 -> 1,250
        text = re.sub(r"(\w) - (?=\w)", r"\1-", text)  # 2-1, co-author
        text = re.sub(r" ([.,;:!?)])", r"\1", text).replace(" ' s ", "'s ")
        return text


def _wordpiece(vocab: dict[str, int] | None = None):
    from tokenizers import BertWordPieceTokenizer  # the fast tokenizer library transformers uses

    if vocab is None:
        return BertWordPieceTokenizer(str(bundled_model_path(BUNDLED_BERT) / "vocab.txt"), lowercase=True)
    return BertWordPieceTokenizer(vocab, lowercase=True, unk_token="[UNK]", sep_token="[EOS]", cls_token="[BOS]",
                                  pad_token="[PAD]", mask_token="[UNK]")


def build_vocabulary(articles: Sequence[Article]) -> Vocabulary:
    """The vocabulary of these articles (documents and summaries), most frequent pieces first.

    MiniLM's WordPiece splits the texts; the pieces used, plus every letter and digit alone and
    as a word continuation, make the vocabulary. A word of another text is then split into these
    pieces, down to single characters if need be: nothing is unknown, but a piece that training
    never used has an untrained embedding.
    """
    full = _wordpiece()
    counts: dict[str, int] = {}
    texts = [t for a in articles for t in (a.document, a.summary)]
    for encoding in full.encode_batch(texts, add_special_tokens=False):
        for piece in encoding.tokens:
            counts[piece] = counts.get(piece, 0) + 1
    alphanumeric = "abcdefghijklmnopqrstuvwxyz0123456789"
    characters = [*alphanumeric, *(f"##{c}" for c in alphanumeric), *".,;:!?'\"()-&%$/"]
    ordered = sorted(counts, key=lambda p: (-counts[p], p)) + [c for c in characters if c not in counts]
    pieces = list(SPECIALS) + [p for p in ordered if p not in SPECIALS]
    return Vocabulary(pieces, _wordpiece({piece: i for i, piece in enumerate(pieces)}))


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Batch:
    """Padded token ids of a batch (batch-first, pad_id where a row is shorter).

    ``src`` (B, Ts) the articles; ``tgt`` (B, Tt + 1) the summaries as bos ... eos. The decoder
    reads ``tgt_in = tgt[:, :-1]`` and is scored on ``targets = tgt[:, 1:]``.
    """

    src: torch.Tensor
    tgt: torch.Tensor
    articles: list[Article]

    @property
    def tgt_in(self) -> torch.Tensor:
        return self.tgt[:, :-1]

    @property
    def targets(self) -> torch.Tensor:
        return self.tgt[:, 1:]


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, longest row) LongTensor, short rows filled with ``pad_id``."""
    return pad_sequence([torch.tensor(row, dtype=torch.long) for row in rows], batch_first=True, padding_value=pad_id)


def batches(articles: Sequence[Article], vocab: Vocabulary, batch_size: int, *, shuffle: bool = False,
            seed: int = 0, max_src: int = 192, max_tgt: int = 48) -> Iterator[Batch]:
    """Cut ``articles`` into padded batches (articles longer than ``max_src`` pieces are cut)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = list(range(len(articles)))
    if shuffle:
        random.Random(seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        chosen = [articles[i] for i in order[start: start + batch_size]]
        src = [vocab.encode(a.document)[:max_src] for a in chosen]
        tgt = [vocab.encode(a.summary, bos=True, eos=True)[: max_tgt + 1] for a in chosen]
        yield Batch(_pad(src, vocab.pad_id), _pad(tgt, vocab.pad_id), chosen)


