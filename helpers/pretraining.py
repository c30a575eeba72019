"""Corpus, model, harnesses and plots for the pretraining notebook.

Nothing here is a solution: span corruption, the finetuning examples, the two attention layers,
the baseline and the metric are the students' to write, and the harnesses take them as arguments.

The corpus is generated, not downloaded: invented people (160 in the notebook's experiment), each
with a birthplace, a profession and dates, told in several short biographies of varied wording, plus
filler text about nothing in particular. The same seed always gives the same corpus. Finetuning
asks "Where was NAME born?" about half of the people; the other half are held out for evaluation,
so a model can only answer about them with what it read during pretraining.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from torch import nn

from .runtime import budget
from .training import TrainingLog, plot_training_loss, run_training  # noqa: F401 (the notebook's)
from .validation import check_tensor

__all__ = [
    "PAD", "MASK", "PLACES", "Person", "make_people", "make_corpus", "split_people", "question",
    "CharVocab", "pretraining_batches", "finetuning_batches", "GPT", "train", "TrainingLog",
    "predict_places", "deterministic_weights", "plot_finetuning_curves", "plot_place_counts",
    "invented_names", "Experiment", "experiment", "FULL", "QUICK", "GRADING", "FAST", "read_span_example", "encode_pairs", "plot_training_loss",
]

PAD = "\u25a1"   # □ fills every example to block_size + 1 characters; the loss ignores it
MASK = "\u2047"  # ⁇ marks where the span was cut out, and where it starts again at the end

# Birthplaces, most common first: a place's weight falls as 1 / (rank + 8), so "London", the most
# common, is the birthplace of about one person in thirteen and "Sofia" of one in sixty: skewed like
# real data, yet flat enough that guessing the common places (all a model without pretraining can
# do for people it was never asked about) scores little.
PLACES = ["London", "Paris", "Lagos", "Lima", "Oslo", "Cairo", "Delhi", "Tokyo", "Quito", "Dakar",
          "Kyiv", "Perth", "Hanoi", "Accra", "Bern", "Riga", "Seoul", "Porto", "Milan", "Osaka",
          "Dublin", "Havana", "Nairobi", "Lisbon", "Vienna", "Manila", "Bogota", "Prague", "Tunis", "Sofia"]
_PLACE_WEIGHTS = [1 / (rank + 8) for rank in range(len(PLACES))]

_FIRST_NAMES = ["Ada", "Ben", "Cleo", "Dev", "Emil", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kit", "Lea", "Max",
                "Nia", "Otto", "Pia", "Rui", "Sol", "Tam", "Uma", "Vic", "Wen", "Yara", "Zed", "Ari", "Bo",
                "Cy", "Dora", "Eli", "Flo", "Gil", "Hal", "Iris", "Jo", "Kai", "Liv", "Mo", "Ned", "Ola", "Pax"]
_ONSETS = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "ch", "dr",
           "gr", "kl", "st", "tr", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ei"]
_JOBS = ["chemist", "painter", "sailor", "judge", "poet", "surgeon", "architect", "farmer", "pianist",
         "teacher", "engineer", "botanist", "historian", "baker", "pilot", "astronomer"]
# The birth sentence opens every biography, with the place early in it, so that it survives the
# truncation of span corruption (to at most 7/8 of the block) more often than not.
_BIRTH = ["{name} was born in {place}.", "{name} was born in {place} in {year}.",
          "{name}, born in {place}, was {a_job}.", "{name} came from {place}.",
          "Born in {place}, {name} became {a_job}."]
_MORE = ["{first} worked as {a_job}.", "{first} was born in {year}.", "{first} trained as {a_job} for years.",
         "Later {first} moved abroad.", "{first} died in {death}.", "{first} wrote two books."]
_FILLER = ["The river rose early that spring.", "Most of the old maps were drawn by hand.",
           "A long winter delayed the harvest.", "The museum closes on Mondays.",
           "Trains ran twice a day along the coast.", "The bridge was rebuilt after the flood.",
           "Few records survive from that decade.", "The market sold salt, cloth and tea.",
           "Nobody remembers who planted the orchard.", "The town hall clock is always late."]


@dataclass(frozen=True)
class Experiment:
    """The sizes and budgets of the notebook's experiment (Parts 6 and 7), in one place."""

    people: int = 160
    block_size: int = 48
    batch_size: int = 64
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    pretrain_steps: int = 1400
    pretrain_lr: float = 2e-3
    finetune_steps: int = 80
    finetune_lr: float = 2e-4
    eval_every: int = 10

    def model_size(self) -> dict:
        return {"n_embd": self.n_embd, "n_layer": self.n_layer, "n_head": self.n_head}


FULL = Experiment()
# the quick setting (a slow laptop, about 3 minutes of training in all): fewer people, so each one's
# biographies come round more often, and a smaller, wider-than-deep model. It still stores most
# birthplaces during pretraining and shows the same effects as the full setting, only noisier: its
# 30 held-out people make every accuracy a multiple of 3.3%.
QUICK = Experiment(people=60, batch_size=32, n_embd=96, n_layer=2, pretrain_steps=1200, pretrain_lr=3e-3,
                   finetune_steps=60, finetune_lr=2e-4, eval_every=5)
# the grading setting only has to run every cell: a tiny model, a few steps (it learns nothing)
GRADING = Experiment(batch_size=16, n_embd=32, n_layer=2, pretrain_steps=20, finetune_steps=10, eval_every=5)
FAST = GRADING  # the older name, for notebooks handed out before the quick setting existed


def experiment() -> Experiment:
    """The experiment of the setting in force (``helpers.runtime.setting()``): ``FULL``, ``QUICK`` or
    ``GRADING``. The corpus is made the same way in the three; only its size, the model and the
    budgets change."""
    return budget(full=FULL, quick=QUICK, grading=GRADING)


@dataclass(frozen=True)
class Person:
    name: str
    place: str
    job: str
    year: int


def _generator(seed: int) -> torch.Generator:
    """A CPU generator of its own, so that batches and weights never touch the global random state."""
    return torch.Generator().manual_seed(seed)


def _surname(rng: random.Random) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.choice((2, 2, 3)))).capitalize()


def make_people(n: int, seed: int = 0) -> list[Person]:
    """``n`` invented people with distinct names; the same seed gives the same people."""
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    rng = random.Random(seed)
    people, names = [], set()
    while len(people) < n:
        name = f"{rng.choice(_FIRST_NAMES)} {_surname(rng)}"
        if name not in names:
            names.add(name)
            people.append(Person(name, rng.choices(PLACES, _PLACE_WEIGHTS)[0], rng.choice(_JOBS),
                                 rng.randint(1820, 1990)))
    return people


def invented_names(n: int, taken: Sequence[Person], seed: int = 99) -> list[str]:
    """``n`` names of the same shape that belong to nobody in ``taken``."""
    rng = random.Random(seed)
    names, known = [], {p.name for p in taken}
    while len(names) < n:
        name = f"{rng.choice(_FIRST_NAMES)} {_surname(rng)}"
        if name not in known:
            known.add(name)
            names.append(name)
    return names


def _article(job: str) -> str:
    return ("an " if job[0] in "aeiou" else "a ") + job


def biography(person: Person, rng: random.Random) -> str:
    """One short biography: the birth sentence, then two other facts, sometimes a filler sentence."""
    first = person.name.split()[0]
    facts = dict(name=person.name, first=first, place=person.place, year=person.year, a_job=_article(person.job),
                 death=person.year + rng.randint(40, 90))
    sentences = [rng.choice(_BIRTH).format(**facts)] + [s.format(**facts) for s in rng.sample(_MORE, 2)]
    if rng.random() < 0.3:
        sentences.append(rng.choice(_FILLER))
    return " ".join(sentences)


def make_corpus(people: Sequence[Person], biographies_per_person: int = 6, seed: int = 1) -> list[str]:
    """The pretraining corpus: ``biographies_per_person`` differently worded biographies of every
    person, plus one filler document per four people, shuffled."""
    rng = random.Random(seed)
    documents = [biography(p, rng) for p in people for _ in range(biographies_per_person)]
    documents += [" ".join(rng.sample(_FILLER, 3)) for _ in range(len(people) // 4)]
    rng.shuffle(documents)
    return documents


def split_people(people: Sequence[Person]) -> tuple[list[Person], list[Person]]:
    """(finetuning people, held-out people): the first half and the second half."""
    half = len(people) // 2
    return list(people[:half]), list(people[half:])


def question(name: str) -> str:
    return f"Where was {name} born?"


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


def plot_finetuning_curves(logs: Sequence[TrainingLog], baseline: float | None = None, offset: float = 0.0):
    """Held-out accuracy over finetuning steps, one line per model, the baseline dashed.

    Every curve is drawn at its exact values. Curves that coincide (equal accuracy at the same step,
    for instance all at 0% early on) stay visible because each later curve is drawn thinner and with
    smaller markers on top of the earlier ones, and the figure says so. ``offset`` (percentage
    points, 0 by default) additionally lifts the i-th curve by ``i * offset`` where curves coincide,
    never below its value. The legend gives each model's final accuracy.
    """
    fig, ax = plt.subplots(figsize=(9, 4))
    series = [[100 * a for a in log.accuracies] for log in logs]
    points = [dict(zip(log.eval_steps, ys)) for log, ys in zip(logs, series)]
    overlap = any(abs(points[i][step] - points[j][step]) < 1e-9
                  for i in range(len(logs)) for j in range(i + 1, len(logs))
                  for step in set(points[i]) & set(points[j]))
    markers, styles = "osD^v", ["-", "--", "-.", ":"]
    for i, (log, ys) in enumerate(zip(logs, series)):
        shift = offset * i if overlap else 0.0
        final = f"{ys[-1]:.1f}%" if ys else "no evaluation"
        under = len(logs) - 1 - i  # the first curve lies at the bottom: widest line, largest marker
        ax.plot(log.eval_steps, [y + shift for y in ys], marker=markers[i % len(markers)],
                markersize=5 + 4 * under, markerfacecolor="white" if under else None, markeredgewidth=1.5,
                linewidth=1.3 + 1.5 * under, linestyle=styles[i % len(styles)], zorder=2 + i,
                label=f"{log.name} (final {final})")
    if baseline is not None:
        ax.axhline(100 * baseline, color="gray", linestyle="--", linewidth=1, zorder=1,
                   label=f"most common place ({100 * baseline:.1f}%)")
    top = max([100 * (baseline or 0)] + [y for ys in series for y in ys]) + offset * max(0, len(logs) - 1)
    high = max(5.0, 1.15 * top + 1)
    ax.set_ylim(-0.04 * high, high)  # room for the markers at 0%, no axis below it
    ax.set_xlabel("finetuning step")
    ax.set_ylabel("exact match on held-out people (%)")
    rows = (len(logs) + (baseline is not None) + 1) // 2
    ax.set_title("Answering about people seen only in pretraining", pad=8 + 15 * rows)
    ax.grid(alpha=0.3)
    # above the axes, two columns: the plot keeps the figure's width and no entry covers a curve
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=9, frameon=False, borderaxespad=0.2)
    notes = []
    if overlap:
        lifted = f" and lifted {offset:g} points per curve" if offset else ""
        notes.append("Where curves coincide, later ones are drawn thinner, on top" + lifted + ".")
    never = [log.name for log, ys in zip(logs, series) if ys and max(ys) == 0]
    if never:  # a flat line at 0 is easy to take for a missing curve
        notes.append("At 0% at every step: " + ", ".join(never) + ".")
    if notes:  # under the axis label, where it covers nothing
        ax.annotate("\n".join(notes), xy=(0, 0), xycoords="axes fraction", xytext=(0, -36),
                    textcoords="offset points", fontsize=9, color="dimgray", va="top")
    fig.tight_layout()
    return fig


def plot_place_counts(groups: dict[str, Sequence[str]], top: int | None = None):
    """Side-by-side bars: how often each place appears in each group of answers (in % of the group).

    The places run from the most common in the first group to the least common (ties in the
    corpus's order), so the first group's bars fall from left to right and the others can be read
    against them; places only the other groups gave follow. ``top`` keeps only the ``top`` places
    most often given or true (the rest are summed in "other places"); every answer that is not a
    place of the corpus (a misspelling, nothing at all) is counted in the last bar.
    """
    counts = {label: Counter(answers) for label, answers in groups.items()}
    given = sum(counts.values(), Counter())
    first_label = next(iter(counts), "")
    first = counts.get(first_label, Counter())
    shown = sorted((p for p in PLACES if given[p]), key=lambda p: (-first[p], -given[p], PLACES.index(p)))
    if top is not None:
        kept = {p for p, _ in Counter({p: given[p] for p in shown}).most_common(top)}
        shown = [p for p in shown if p in kept]
    other = [p for p in PLACES if p not in shown]
    names = shown + (["other places"] if any(given[p] for p in other) else []) + ["not a place"]
    fig, ax = plt.subplots(figsize=(min(12.0, max(7.0, 0.32 * len(names) + 2)), 4))
    width = 0.8 / len(groups)
    for i, (label, count) in enumerate(counts.items()):
        total = max(1, sum(count.values()))
        values = [count[p] for p in shown]
        if "other places" in names:
            values.append(sum(count[p] for p in other))
        values.append(total - sum(count[p] for p in PLACES))
        ax.bar([j + i * width for j in range(len(names))], [100 * v / total for v in values], width,
               label=f"{label} ({total})")
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(names))], names, rotation=60, ha="right")
    short = first_label.split(" (")[0]
    ax.set_xlabel(f"place, most common among the {short} first; last, answers that are no place")
    ax.set_ylabel("share of the group's answers (%)")
    ax.set_title("Which places come out, against how common each place is", pad=26)
    ax.grid(axis="y", alpha=0.3)
    # above the axes: a tall bar can stand anywhere, so no corner of the axes is sure to be empty
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(groups), fontsize=9, frameon=False)
    fig.tight_layout()
    return fig
