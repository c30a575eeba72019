"""Data, models, harnesses and plots for the attention-foundations notebook.

Nothing here is a solution: the attention scores, the moments of q.k, the attention decoder, the
positional encodings, the receptive-field count and the exploration queries are the students' to
write. The harnesses (training loop, accuracy by length, simulations) take the student's functions
and classes as arguments.

The sequence task is the one of Discussion 8: a task token (``<U>`` or ``<L>``) followed by a
sentence in mixed case; the answer is the sentence in upper or lower case, one character per step.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from torch.nn.utils.rnn import pad_sequence
from torch import nn

from .training import TrainingLog, plot_training_loss, run_training  # noqa: F401 (the notebook's)
from .validation import check_tensor

__all__ = [
    "discussion_example",
    "CharVocab",
    "VOCAB",
    "make_case_examples",
    "CaseBatch",
    "make_batch",
    "Encoder",
    "BottleneckDecoder",
    "Seq2Seq",
    "train_seq2seq",
    "greedy_decode",
    "exact_match_by_length",
    "plot_accuracy_by_length",
    "plot_alignment",
    "plot_training_loss",
    "plot_softmax_saturation",
    "plot_moments",
    "plot_position_similarity",
    "plot_relative_bias",
    "random_argmax_sources",
    "orthogonal_keys",
    "key_norm_experiment",
    "plot_key_norm_experiment",
]


def _generator(seed: int) -> torch.Generator:
    """A CPU generator of its own, so the simulations never touch the global random state."""
    return torch.Generator().manual_seed(seed)


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


# ----------------------------------------------------------------------------- the models

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


# ----------------------------------------------------------------------------- plots

def plot_accuracy_by_length(results: dict[str, dict[int, float]], *, trained_up_to: int | None = None, ax=None):
    """Exact-match accuracy against sentence length, one line per model."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 4))
    # big hollow markers under small filled ones: where two curves coincide, both stay visible
    styles = [("o", 11, "-"), ("s", 5, "--"), ("^", 8, "-."), ("D", 4, ":")]
    for i, (name, scores) in enumerate(results.items()):
        marker, size, line = styles[i % len(styles)]
        ax.plot(list(scores), [100 * s for s in scores.values()], marker=marker, markersize=size, linestyle=line,
                markerfacecolor="none" if i % 2 == 0 else None, markeredgewidth=1.8, label=name)
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            same = [n for n in results[a] if n in results[b] and abs(results[a][n] - results[b][n]) < 1e-9]
            if same:
                where = "at every length" if len(same) == len(results[a]) else "at " + ", ".join(map(str, same))
                ax.plot([], [], " ", label=f"{a} and {b} coincide\n{where}")
    if trained_up_to is not None:
        ax.axvline(trained_up_to, color="gray", linestyle=":", label=f"longest training\nsentence ({trained_up_to})")
    ax.set_xlabel("sentence length (characters)")
    ax.set_ylabel("exact match (% of sentences)")
    ax.set_ylim(-4, 104)
    ax.set_title("Whole sentence right, by length")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # outside: never over a point
    ax.figure.tight_layout()
    return ax


def plot_alignment(model: Seq2Seq, task: str, text: str, ax=None):
    """The attention weights of one greedy decoding: output characters down, source across."""
    target = text.upper() if task == UPPER else text.lower()
    batch = make_batch([(task, text, target)])
    ids, weights = greedy_decode(model, batch)
    if weights is None:
        raise ValueError("this model's decoder returns no attention weights")
    output = [VOCAB.tokens[i] for i in ids[0].tolist() if i != VOCAB.PAD]
    source = [VOCAB.tokens[i] for i in batch.src[0].tolist()]
    w = weights[0, : len(output)]
    if ax is None:
        _, ax = plt.subplots(figsize=(0.28 * len(source) + 2, 0.28 * len(output) + 1.5))
    # scaled to the largest weight, so a nearly uniform map still shows its pattern; the colourbar
    # marks what uniform attention over the source would be
    top, uniform = w.max().item(), 1 / len(source)
    image = ax.imshow(w.numpy(), cmap="viridis", vmin=0, vmax=max(top, 1.5 * uniform), aspect="auto")
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.03, pad=0.02,
                             label=f"attention weight (0 to {top:.2f}; uniform = 1/{len(source)} = {uniform:.3f})")
    bar.ax.axhline(uniform, color="white", linewidth=2)
    bar.ax.axhline(uniform, color="black", linewidth=1, linestyle="--")
    show = lambda t: "␣" if t == " " else t  # noqa: E731
    ax.set_xticks(range(len(source)), [show(t) for t in source], fontsize=8)
    ax.set_yticks(range(len(output)), [show(t) for t in output], fontsize=8)
    ax.set_xlabel("source (encoder states)")
    ax.set_ylabel("output character")
    ax.set_title(f"Where the decoder looks: {VOCAB.decode(ids[0])!r}")
    return ax


# ----------------------------------------------------------------------------- scaled dot products

def plot_moments(dot_product_moments: Callable, dot_product_mean: Callable, dot_product_variance: Callable, *,
                 dims: Sequence[int], mu: float, sigma: float, num_samples: int, seed: int = 0):
    """Simulated against closed-form mean and variance of q.k, for growing d (two panels).

    Returns the rows ``{"d", "mean", "mean_formula", "var", "var_formula"}`` that were plotted.
    """
    generator = _generator(seed)
    rows = []
    for d in dims:
        mean, var = (float(x) for x in dot_product_moments(d, mu, sigma, num_samples, generator))
        rows.append({"d": d, "mean": mean, "mean_formula": float(dot_product_mean(d, mu, sigma)),
                     "var": var, "var_formula": float(dot_product_variance(d, mu, sigma))})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, key, label in ((axes[0], "mean", "mean of q.k"), (axes[1], "var", "variance of q.k")):
        ax.plot(dims, [r[f"{key}_formula"] for r in rows], color="black", label="your closed form")
        ax.plot(dims, [r[key] for r in rows], "o", color="tab:orange", label=f"simulated ({num_samples:,} pairs)")
        ax.set_xscale("log", base=2)
        positive = all(r[k] > 0 for r in rows for k in (key, f"{key}_formula"))
        ax.set_yscale("log" if positive else "symlog")  # a zero or negative mean cannot go on a log axis
        ax.set_xlabel("dimension d")
        ax.set_ylabel(label)
        ax.set_title(f"{label}, mu = {mu}, sigma = {sigma}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return rows


def plot_softmax_saturation(scale_for_unit_variance: Callable, *, dims: Sequence[int], num_keys: int = 16,
                            trials: int = 400, seed: int = 0):
    """How peaked softmax(K q / s) is for standard normal q and keys, with s = 1 and with the
    student's scale, as d grows (left: spread of the scores; right: the largest weight).

    Returns the rows ``{"d", "score_std", "score_std_scaled", "top_weight", "top_weight_scaled"}``.
    """
    generator = _generator(seed)
    rows = []
    for d in dims:
        q = torch.randn(trials, 1, d, generator=generator, dtype=torch.float64)
        K = torch.randn(trials, num_keys, d, generator=generator, dtype=torch.float64)
        scores = (q * K).sum(-1)  # (trials, num_keys)
        s = float(scale_for_unit_variance(d))
        rows.append({"d": d, "score_std": scores.std().item(), "score_std_scaled": (scores / s).std().item(),
                     "top_weight": torch.softmax(scores, -1).max(-1).values.mean().item(),
                     "top_weight_scaled": torch.softmax(scores / s, -1).max(-1).values.mean().item()})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, key, label in ((axes[0], "score_std", "standard deviation of the scores"),
                           (axes[1], "top_weight", "mean largest softmax weight")):
        ax.plot(dims, [r[key] for r in rows], "o-", label="scores q.k (s = 1)")
        ax.plot(dims, [r[f"{key}_scaled"] for r in rows], "s-", label="scores q.k / s, your s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("dimension d")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_yscale("log", base=2)
    axes[1].axhline(1 / num_keys, color="gray", linestyle=":", label=f"uniform (1/{num_keys})")
    axes[1].set_ylim(0, 1.02)
    axes[1].legend(loc="center right")  # between the rising s = 1 curve and the flat scaled one
    axes[0].set_title("Spread of the scores")
    axes[1].set_title(f"Saturation: one key takes it all ({num_keys} keys)")
    fig.tight_layout()
    return rows


# ----------------------------------------------------------------------------- positions

def plot_position_similarity(encodings: dict[str, torch.Tensor], *, reference_position: int | None = None):
    """For each encoding (T, d): the (T, T) map of dot products between positions, and below it
    the row of one position against every other."""
    fig, axes = plt.subplots(2, len(encodings), figsize=(5.5 * len(encodings), 8.5),
                             gridspec_kw={"height_ratios": [3, 1.4]}, squeeze=False)
    for col, (name, pe) in enumerate(encodings.items()):
        check_tensor(name, pe, ndim=2, floating=True)
        sims = (pe @ pe.T).detach().double()
        T = sims.shape[0]
        t0 = T // 2 if reference_position is None else reference_position
        low, high = sims.min().item(), sims.max().item()
        if low >= 0:  # nothing to centre: spend the whole colour scale on the values that occur
            image = axes[0, col].imshow(sims.numpy(), cmap="viridis", vmin=low, vmax=high)
        else:
            image = axes[0, col].imshow(sims.numpy(), cmap="RdBu_r", vmin=-max(-low, high), vmax=max(-low, high))
        fig.colorbar(image, ax=axes[0, col], fraction=0.046, pad=0.04, label=f"dot product ({low:.3g} to {high:.3g})")
        axes[0, col].set_title(f"{name}: p_s . p_t")
        axes[0, col].set_xlabel("position t")
        axes[0, col].set_ylabel("position s")
        axes[1, col].plot(range(T), sims[t0].numpy())
        axes[1, col].axvline(t0, color="gray", linestyle=":")
        axes[1, col].set_xlabel("position t")
        axes[1, col].set_ylabel(f"p_{t0} . p_t")
        axes[1, col].set_title(f"{name}: position {t0} against every position t")
        axes[1, col].grid(True, alpha=0.3)
    fig.tight_layout()
    return axes


def plot_relative_bias(bias: torch.Tensor):
    """One heatmap per head of a (heads, T, T) relative-position bias, on a scale centred at 0."""
    check_tensor("bias", bias, ndim=3)
    bias = bias.detach().double()
    limit = max(1e-9, bias.abs().max().item())
    fig, axes = plt.subplots(1, bias.shape[0], figsize=(5.5 * bias.shape[0], 4.5), squeeze=False)
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(bias[h].numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="bias added to the score")
        ax.set_title(f"head {h}: bias of the pair (i, j)")
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
    fig.tight_layout()
    return axes


def random_argmax_sources(T: int, heads: int, layers: int, dim: int = 16, seed: int = 0) -> list[torch.Tensor]:
    """Which key each query picks under argmax attention, with random queries and keys.

    Returns ``layers`` LongTensors of shape (heads, T): entry [h, i] is the position that query i
    of head h attends to in that layer (layer 1 first).
    """
    generator = _generator(seed)
    sources = []
    for _ in range(layers):
        Q = torch.randn(heads, T, dim, generator=generator)
        K = torch.randn(heads, T, dim, generator=generator)
        sources.append((Q @ K.transpose(1, 2)).argmax(dim=-1))
    return sources


# ----------------------------------------------------------------------------- attention exploration

def orthogonal_keys(n: int, d: int, norm: float = 1.0, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """``n`` mutually orthogonal vectors of length ``norm`` in R^d, as the rows of an (n, d) tensor."""
    if n > d:
        raise ValueError(f"at most d = {d} orthogonal vectors exist in R^{d}, asked for {n}")
    generator = _generator(seed)
    basis, _ = torch.linalg.qr(torch.randn(d, n, generator=generator, dtype=torch.float64))
    return (norm * basis.T).to(dtype)


def _softmax_share(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    return torch.softmax((keys @ q.unsqueeze(-1)).squeeze(-1), dim=-1)  # (trials, n)


def key_norm_experiment(average_query: Callable, copy_query: Callable, *, n: int = 8, d: int = 32, beta: float = 20.0,
                        epsilon: float = 1e-4, trials: int = 2000, seed: int = 0) -> dict[str, torch.Tensor]:
    """The practical's question 1(c)-(d), simulated.

    Key means are orthogonal unit vectors ``mu_i``; every key is drawn as ``mu_i`` plus noise of
    variance ``epsilon`` per coordinate, and key ``a = 0`` also gets a random length: its covariance
    adds ``1/2 mu_a mu_a^T``. One head uses ``average_query(means, 0, 1, beta)``; two heads use
    ``copy_query(means, 0, beta)`` and ``copy_query(means, 1, beta)`` and average their outputs.

    Returns, per trial, the weight that the output puts on value a for each setup
    (``"one_head"`` and ``"two_heads"``) and the signed length of key a along its mean direction
    (``"length_a"``; negative when the draw flipped the key).
    """
    generator = _generator(seed)
    means = orthogonal_keys(n, d, seed=seed)
    keys = means + math.sqrt(epsilon) * torch.randn(trials, n, d, generator=generator, dtype=torch.float64)
    stretch = torch.randn(trials, 1, generator=generator, dtype=torch.float64) / math.sqrt(2)
    keys[:, 0] += stretch * means[0]
    q_avg = check_tensor("average_query(...)", average_query(means, 0, 1, beta), shape=(d,))
    q_a = check_tensor("copy_query(...)", copy_query(means, 0, beta), shape=(d,))
    q_b = check_tensor("copy_query(...)", copy_query(means, 1, beta), shape=(d,))
    one_head = _softmax_share(q_avg.to(keys.dtype), keys)[:, 0]
    two_heads = 0.5 * (_softmax_share(q_a.to(keys.dtype), keys)[:, 0] + _softmax_share(q_b.to(keys.dtype), keys)[:, 0])
    return {"one_head": one_head, "two_heads": two_heads, "length_a": keys[:, 0] @ means[0]}


def plot_key_norm_experiment(result: dict[str, torch.Tensor]):
    """Left: the weight on value a against the length of key a; right: its histogram."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for name, label, color in (("one_head", "one head, averaging query", "tab:red"),
                               ("two_heads", "two heads, one copying query each", "tab:blue")):
        axes[0].plot(result["length_a"].numpy(), result[name].numpy(), ".", markersize=3, alpha=0.5, color=color,
                     label=label)
        axes[1].hist(result[name].numpy(), bins=40, range=(0, 1), alpha=0.6, color=color, label=label)
    axes[0].axhline(0.5, color="gray", linestyle=":", label="0.5: the average we asked for")
    axes[0].set_xlabel("length of key a along its mean (negative: the draw flipped it)")
    axes[0].set_ylabel("weight of value a in the output")
    axes[0].set_title("The output against the length of key a")
    axes[1].set_xlabel("weight of value a in the output (0.5 = the average we asked for)")
    axes[1].set_ylabel("trials")
    axes[1].set_title("Spread over the trials")
    axes[1].axvline(0.5, color="gray", linestyle=":")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    # one legend for both panels, below them: inside, it covered points or the tallest bar
    fig.legend(handles, labels, loc="lower center", ncol=3, markerscale=4, frameon=False)
    return axes
