"""Data, tokenizer and evaluation for the summarization notebook.

No news corpus can be installed offline, so this module writes one: short news-style articles
of six story types, each with a one-sentence reference summary. An article states its story's
facts in one of several paraphrases, adds details a summary should leave out and distractor
sentences with facts of the same kind about other people, places and teams, and sometimes opens
with a scene-setting sentence, so a good summary has to pick the right facts, not copy the lead.

The corpus is a pure function of its seed. A third of the test articles use only people,
places and companies that never occur in training (``Article.unseen``), to show how far a model
copies names it never saw rather than recalling names it learned.

Nothing here is a solution: the attention, masks, layers, model, loss and decoders are the
students' to write.
"""

from __future__ import annotations

import math
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import torch

from .models import BUNDLED_BERT, bundled_model_path
from .progress import progress
from .runtime import budget

__all__ = [
    "Article",
    "Corpus",
    "make_corpus",
    "Vocabulary",
    "build_vocabulary",
    "Batch",
    "batches",
    "lead_summary",
    "rouge",
    "load_news_dataset",
]

# ---------------------------------------------------------------------------------------------
# Entity pools. "seen" names appear in training; "unseen" ones only in the unseen test articles.
# ---------------------------------------------------------------------------------------------
_POOLS = {
    "seen": {
        "first": """Anna Marco Priya Daniel Sofia Lukas Amara Tomas Elena Kenji Laura Omar Ines Pavel
            Maya Hugo Nadia Felix Clara Jonas Leila Mateo Irene Samuel Hana Viktor Rosa Adrian
            Julia Karim Eva Bruno Lina Oscar Mira Rafael Alice Theo Nora Emil""".split(),
        "last": """Novak Bauer Okafor Lindqvist Moreau Costa Tanaka Fischer Haddad Kowalski Silva
            Jansen Petrov Romero Weber Larsen Mendes Dubois Horvat Nakamura Schmidt Rossi Varga
            Ortiz Keller Brandt Meyer Duarte Sato Ivanova Marsh Quinn Holt Berg Vidal""".split(),
        "city": """Lisbon Oslo Dublin Porto Vienna Krakow Lyon Bergen Turin Seville Ghent Malmo
            Leeds Graz Bremen Utrecht Bologna Nantes Cork Aarhus Basel Brno Split Tampere Gdansk
            Riga Lille Bilbao Zurich Antwerp""".split(),
        "firm": """Norvik Aldren Castell Brightway Helix Meridian Orion Kestrel Vantage Solace
            Tidewell Granite Larkspur Beacon Summit Falcon Harbor Ember""".split(),
        "mascot": """Rovers Wanderers Falcons Lions Harriers Rangers Bears Wolves Comets Saints""".split(),
    },
    "unseen": {
        "first": """Zoltan Ngozi Bartholomew Yusuf Ingrid Thandiwe Casimir Oluwaseun Ulrike
            Dragan Soren Xiomara Anselm Wilhelmina Tadeo""".split(),
        "last": """Abernathy Eriksdottir Mbeki Yilmaz Castellanos Zielinski Achterberg Oyelaran
            Fairbanks Quispe Lundgren Thorsby Valdivia Rutherford""".split(),
        "city": """Reykjavik Tallinn Ljubljana Innsbruck Plovdiv Trondheim Valletta Coimbra
            Szeged Kaunas Salzburg Dundee""".split(),
        "firm": """Quillon Zephyra Obsidia Marlowe Crestline Wexford Juniper Halcyon""".split(),
        "mascot": """Otters Stallions Ravens Panthers Hornets""".split(),
    },
}
_INDUSTRY = ["software", "shipping", "energy", "retail", "medical devices", "steel", "insurance", "food"]
_FIRM_KIND = ["Systems", "Group", "Industries", "Holdings", "Labs"]
_QUARTER = ["first", "second", "third", "fourth"]
_WEEKDAY = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTH = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
_OFFICE = ["mayor", "governor", "council"]
_EVENT = ["flood", "wildfire", "storm", "landslide"]
_FINDING = [
    "regular walking lowers blood pressure",
    "bees can recognise human faces",
    "sleep helps children learn new words",
    "city trees reduce summer heat",
    "coffee does not harm the heart",
    "music lessons improve memory",
    "noise from traffic disturbs birdsong",
    "cold water swimming eases stress",
]
_OPENERS = [
    "It was a busy week in {city2}.",
    "The news came at the end of a long {weekday2}.",
    "Few people expected the announcement.",
    "Rain fell across much of the region for most of the day.",
    "Local radio carried the story throughout the evening.",
]


def _pick(rng: random.Random, items: Sequence[str], avoid: Sequence[str] = ()) -> str:
    return rng.choice([item for item in items if item not in avoid])


class _Cast:
    """Draws distinct names from one pool (seen or unseen) for one article."""

    def __init__(self, rng: random.Random, pool: dict[str, list[str]]):
        self.rng, self.pool, self.used = rng, pool, set()

    def _fresh(self, make) -> str:
        for _ in range(100):
            value = make()
            if value not in self.used:
                self.used.add(value)
                return value
        raise RuntimeError("name pool exhausted")

    def person(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(self.pool['first'])} {self.rng.choice(self.pool['last'])}")

    def surname(self, person: str) -> str:
        return person.split()[-1]

    def city(self) -> str:
        return self._fresh(lambda: self.rng.choice(self.pool["city"]))

    def company(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(self.pool['firm'])} {self.rng.choice(_FIRM_KIND)}")

    def team(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(self.pool['city'])} {self.rng.choice(self.pool['mascot'])}")


def _count(rng: random.Random, low: int, high: int) -> str:
    return f"{rng.randint(low, high):,}"


# Each story returns (lead paraphrases, details, distractors, summary). Every fact of the summary
# is in each lead paraphrase, or in a detail the story always includes.
def _earnings(rng, cast):
    company, ceo, rival = cast.company(), cast.person(), cast.company()
    quarter, pct, amount = rng.choice(_QUARTER), rng.randint(2, 40), f"{rng.randint(10, 950)}.{rng.randint(1, 9)}"
    rose = rng.random() < 0.5
    verb, verb2, sign = ("rose", "climbed", "up") if rose else ("fell", "dropped", "down")
    weekday = rng.choice(_WEEKDAY)
    leads = [
        f"{company} said on {weekday} that its {quarter} quarter revenue {verb} {pct} percent to {amount} million dollars.",
        f"Revenue at {company} {verb2} by {pct} percent in the {quarter} quarter, reaching {amount} million dollars, the company announced on {weekday}.",
        f"In its {quarter} quarter report, {company} posted revenue of {amount} million dollars, {sign} {pct} percent from a year earlier.",
    ]
    details = [
        f"The {rng.choice(_INDUSTRY)} company is based in {cast.city()} and employs about {_count(rng, 300, 9000)} people.",
        f"Chief executive {ceo} told analysts that demand had been {'stronger' if rose else 'weaker'} than planned.",
    ]
    distractors = [
        f"Shares of rival {rival} {'fell' if rose else 'rose'} {rng.randint(1, 9)} percent on the same day.",
        f"{cast.company()} is due to report its own results in {rng.choice(_MONTH)}.",
    ]
    summary = f"{company} {quarter} quarter revenue {verb} {pct} percent to {amount} million dollars."
    return leads, details, distractors, summary


def _match(rng, cast):
    winner, loser, other_a, other_b = cast.team(), cast.team(), cast.team(), cast.team()
    scorer = cast.person()
    goals_w = rng.randint(1, 5)
    goals_l = rng.randint(0, goals_w - 1)
    weekday = rng.choice(_WEEKDAY)
    leads = [
        f"{winner} beat {loser} {goals_w}-{goals_l} on {weekday}, with {scorer} scoring the winning goal.",
        f"A late goal from {scorer} gave {winner} a {goals_w}-{goals_l} win over {loser} on {weekday}.",
        f"{loser} lost {goals_w}-{goals_l} to {winner} on {weekday} after {scorer} found the net for the home side.",
    ]
    details = [
        f"About {_count(rng, 2000, 60000)} fans watched the game.",
        f"The result lifts {winner} to {rng.choice(['second', 'third', 'fourth', 'fifth'])} place in the table.",
    ]
    draw = rng.randint(0, 3)
    distractors = [
        f"In the other game of the day, {other_a} drew {draw}-{draw} with {other_b}.",
        f"{cast.person()} of {other_a} missed the match with an injury.",
    ]
    summary = f"{winner} beat {loser} {goals_w}-{goals_l} after a goal from {scorer}."
    return leads, details, distractors, summary


def _election(rng, cast):
    winner, runner_up, other = cast.person(), cast.person(), cast.person()
    city, office = cast.city(), rng.choice(_OFFICE)
    pct = rng.randint(41, 78)
    race = {"mayor": "mayoral", "governor": "governor's", "council": "council"}[office]
    leads = [
        f"{winner} won the {race} election in {city} with {pct} percent of the vote.",
        f"Voters in {city} chose {winner} in the {race} election, giving the winner {pct} percent of the vote.",
        f"With {pct} percent of the vote, {winner} defeated {runner_up} in the {race} election in {city}.",
    ]
    details = [
        f"{runner_up} conceded late in the evening and thanked supporters.",
        f"Turnout was {rng.randint(30, 75)} percent, officials said.",
    ]
    distractors = [
        f"In {cast.city()}, {other} won a council seat with {rng.randint(20, 60)} percent.",
        f"A recount has been requested in {cast.city()}.",
    ]
    summary = f"{winner} wins the {race} race in {city} with {pct} percent of the vote."
    return leads, details, distractors, summary


def _disaster(rng, cast):
    city, official = cast.city(), cast.person()
    event, weekday = rng.choice(_EVENT), rng.choice(_WEEKDAY)
    people = _count(rng, 150, 25000)
    leads = [
        f"A {event} in {city} forced {people} people to leave their homes on {weekday}.",
        f"About {people} residents of {city} were evacuated on {weekday} as a {event} swept through the area.",
        f"Officials in {city} moved {people} people out of their homes on {weekday} after a {event}.",
    ]
    details = [
        f"Emergency coordinator {official} said shelters had been opened in schools.",
        f"No injuries were reported by {rng.choice(['noon', 'nightfall', 'late afternoon'])}.",
    ]
    distractors = [
        f"A smaller {rng.choice(_EVENT)} near {cast.city()} last year displaced {_count(rng, 50, 900)} people.",
        f"Forecasters expect calmer weather in {cast.city()} by the weekend.",
    ]
    summary = f"A {event} in {city} forced {people} people from their homes on {weekday}."
    return leads, details, distractors, summary


def _appointment(rng, cast):
    company, new, old = cast.company(), cast.person(), cast.person()
    month = rng.choice(_MONTH)
    leads = [
        f"{company} has named {new} as its new chief executive, replacing {old}, from {month}.",
        f"{new} will succeed {old} as chief executive of {company} in {month}, the company said.",
        f"From {month}, {company} will be led by {new}, who takes over from {old} as chief executive.",
    ]
    details = [
        f"{cast.surname(new)} previously ran the firm's operations in {cast.city()}.",
        f"{cast.surname(old)} led the company for {rng.randint(3, 15)} years.",
    ]
    distractors = [
        f"{cast.company()} also changed its chief financial officer this week.",
        f"Analyst {cast.person()} said the move had been expected.",
    ]
    summary = f"{company} named {new} chief executive, replacing {old}, from {month}."
    return leads, details, distractors, summary


def _research(rng, cast):
    lead_author, colleague = cast.person(), cast.person()
    city, finding = cast.city(), rng.choice(_FINDING)
    participants = _count(rng, 40, 4000)
    leads = [
        f"Researchers led by {lead_author} at the University of {city} found that {finding}.",
        f"A team at the University of {city}, led by {lead_author}, reports that {finding}.",
        f"{finding[0].upper() + finding[1:]}, according to a study led by {lead_author} at the University of {city}.",
    ]
    details = [
        f"The study followed {participants} participants for two years.",
        f"Co-author {colleague} said more work was needed.",
    ]
    distractors = [
        f"An earlier study in {cast.city()} had found that {_pick(rng, _FINDING, [finding])}.",
        f"The university plans a new laboratory in {cast.city()}.",
    ]
    summary = f"A University of {city} study led by {lead_author} finds that {finding}."
    return leads, details, distractors, summary


STORY_TYPES = {
    "earnings": _earnings,
    "match": _match,
    "election": _election,
    "disaster": _disaster,
    "appointment": _appointment,
    "research": _research,
}


@dataclass(frozen=True)
class Article:
    """One generated article.

    Attributes
    ----------
    id : str
    document : str  the article
    summary : str  the reference summary
    story : str  one of ``STORY_TYPES``
    unseen : bool  True when every name in it is absent from the training split
    """

    id: str
    document: str
    summary: str
    story: str
    unseen: bool = False


@dataclass(frozen=True)
class Corpus:
    train: list[Article]
    val: list[Article]
    test: list[Article]

    def __repr__(self) -> str:
        unseen = sum(a.unseen for a in self.test)
        return (f"Corpus(train={len(self.train)}, val={len(self.val)}, test={len(self.test)} "
                f"of which {unseen} with unseen names)")


def _article(rng: random.Random, split: str, index: int, unseen: bool) -> Article:
    cast = _Cast(rng, _POOLS["unseen" if unseen else "seen"])
    story = rng.choice(sorted(STORY_TYPES))
    leads, details, distractors, summary = STORY_TYPES[story](rng, cast)
    body = details[: rng.randint(1, 2)] + distractors[: rng.randint(1, 2)]
    rng.shuffle(body)
    sentences = [rng.choice(leads), *body]
    if rng.random() < 0.4:  # a scene-setting opener: the lead sentence is no longer first
        opener = rng.choice(_OPENERS).format(city2=cast.city(), weekday2=rng.choice(_WEEKDAY))
        sentences.insert(0, opener)
    return Article(f"{split}-{index:05d}", " ".join(sentences), summary, story, unseen)


def make_corpus(seed: int = 0, n_train: int = 6000, n_val: int = 400, n_test: int = 600,
                unseen_fraction: float = 1 / 3) -> Corpus:
    """Generate the news corpus: the same articles for the same arguments, on every machine.

    Parameters
    ----------
    seed : int
    n_train, n_val, n_test : int
        Split sizes. Train and validation use only the "seen" names.
    unseen_fraction : float
        Share of the test split whose names never occur in training (the rest use seen names).
    """
    if min(n_train, n_val, n_test) < 0 or not 0 <= unseen_fraction <= 1:
        raise ValueError("split sizes must be >= 0 and unseen_fraction in [0, 1]")
    splits = {}
    for offset, (split, size) in enumerate([("train", n_train), ("val", n_val), ("test", n_test)]):
        rng = random.Random(f"{seed}-{split}")  # each split its own stream: sizes do not interact
        n_unseen = round(size * unseen_fraction) if split == "test" else 0
        splits[split] = [_article(rng, split, i, unseen=i < n_unseen) for i in range(size)]
    return Corpus(**splits)


def lead_summary(document: str, sentences: int = 1) -> str:
    """The lead baseline: the first ``sentences`` sentences of the article."""
    parts = re.split(r"(?<=[.!?])\s+", document.strip())
    return " ".join(parts[:sentences])


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
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


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


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------
def rouge(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1, ROUGE-2 and ROUGE-L F1 (``rouge-score``, with stemming) over pairs."""
    from rouge_score import rouge_scorer

    if len(predictions) != len(references) or not references:
        raise ValueError(f"need as many predictions as references, and at least one "
                         f"(got {len(predictions)} and {len(references)})")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    totals = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for prediction, reference in zip(predictions, references):
        for name, score in scorer.score(reference, prediction).items():
            totals[name] += score.fmeasure
    return {name: total / len(references) for name, total in totals.items()}


# ---------------------------------------------------------------------------------------------
# Real news data, for users with network (or a local copy in the same format)
# ---------------------------------------------------------------------------------------------
_HUB = {  # name -> (hub path, configuration, document field, summary field)
    "xsum": ("EdinburghNLP/xsum", None, "document", "summary"),
    "cnn_dailymail": ("abisee/cnn_dailymail", "3.0.0", "article", "highlights"),
}


def load_news_dataset(name: str = "xsum", split: str = "train", *, data_files: str | Path | None = None,
                      limit: int | None = None) -> list[Article]:
    """XSum or CNN/DailyMail as ``Article`` objects, through the ``datasets`` library.

    With ``data_files`` (a JSON-lines, JSON or CSV file with that dataset's field names) nothing is
    downloaded; without it the data come from the Hugging Face hub, which needs network.
    """
    if name not in _HUB:
        raise ValueError(f"unknown dataset {name!r}: choose one of {sorted(_HUB)}")
    import datasets

    path, config, doc_field, sum_field = _HUB[name]
    if data_files is not None:
        data_files = Path(data_files)
        if not data_files.is_file():
            raise FileNotFoundError(f"no such data file: {data_files}")
        kind = {".jsonl": "json", ".json": "json", ".csv": "csv"}.get(data_files.suffix)
        if kind is None:
            raise ValueError(f"{data_files.name}: expected a .jsonl, .json or .csv file")
        table = datasets.load_dataset(kind, data_files={split: str(data_files)}, split=split)
    else:
        table = datasets.load_dataset(path, config, split=split)
    missing = {doc_field, sum_field} - set(table.column_names)
    if missing:
        raise ValueError(f"{name} rows need the fields {doc_field!r} and {sum_field!r}; "
                         f"missing {sorted(missing)} (found {table.column_names})")
    if limit is not None:
        table = table.select(range(min(limit, len(table))))
    return [Article(str(row.get("id", i)), row[doc_field], row[sum_field], name)
            for i, row in enumerate(table)]


# ---------------------------------------------------------------------------------------------
# Training and evaluation harnesses (they take the student's model, loss and decoder)
# ---------------------------------------------------------------------------------------------
@dataclass
class History:
    """The training loss of every step, the validation loss before training and after each epoch
    as (step, loss) pairs, the number of steps and the seconds taken (validation included), and
    the seconds of each training step alone (``step_seconds``: forward, backward and update, no
    validation), which is what to compare when two models train side by side."""

    train: list
    val: list
    steps: int = 0
    seconds: float = 0.0
    step_seconds: list = field(default_factory=list)

    def seconds_per_step(self, steps: int | None = None) -> float:
        """Mean seconds of a training step over the first ``steps`` steps (all by default),
        validation excluded."""
        chosen = self.step_seconds[:steps]
        if not chosen:
            raise ValueError("no training step was timed")
        return sum(chosen) / len(chosen)


def mean_loss(model, articles: Sequence[Article], vocab: Vocabulary, loss_fn, batch_size: int = 200) -> float:
    """The model's mean ``loss_fn(logits, targets, pad_id)`` over the batches of ``articles`` (eval mode)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        losses = [float(loss_fn(model(b.src, b.tgt_in), b.targets, vocab.pad_id))
                  for b in batches(articles, vocab, batch_size)]
    model.train(was_training)
    return sum(losses) / len(losses)


def train_summarizer(model, corpus: Corpus, vocab: Vocabulary, loss_fn, *, epochs: int, batch_size: int = 64,
                     lr: float = 1e-3, max_steps: int | None = None, seed: int = 0) -> History:
    """Train with AdamW (gradients clipped to norm 1): ``epochs`` passes over the shuffled
    training split, or ``max_steps`` batches in all if that comes first. The validation loss is
    measured before training and after each epoch (and at the last step); in the grading setting on
    the first 64 validation articles (a grading run only has to run every cell). Each step's own
    time goes to ``History.step_seconds``."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    per_epoch = -(-len(corpus.train) // batch_size)
    total = epochs * per_epoch if max_steps is None else min(max_steps, epochs * per_epoch)
    val = budget(full=corpus.val, quick=corpus.val, grading=corpus.val[:64])
    history, started = History([], [(0, mean_loss(model, val, vocab, loss_fn))]), time.perf_counter()

    def stream():  # (epoch, batch) pairs, a new shuffle each epoch
        for index in range(epochs):
            for batch in batches(corpus.train, vocab, batch_size, shuffle=True, seed=seed * 1000 + index):
                yield index, batch

    epoch_of_last = 0
    model.train()
    for step, (epoch, batch) in zip(progress(range(total), desc="training", total=total), stream()):
        if epoch != epoch_of_last:  # an epoch ended
            history.val.append((step, mean_loss(model, val, vocab, loss_fn)))
            epoch_of_last = epoch
        step_started = time.perf_counter()
        loss = loss_fn(model(batch.src, batch.tgt_in), batch.targets, vocab.pad_id)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        history.train.append(loss.item())
        history.step_seconds.append(time.perf_counter() - step_started)
    history.steps = len(history.train)
    history.val.append((history.steps, mean_loss(model, val, vocab, loss_fn)))
    model.eval()
    history.seconds = time.perf_counter() - started
    return history


def time_training_steps(models: dict, corpus: Corpus, vocab: Vocabulary, loss_fn, *, steps: int = 20,
                        batch_size: int = 64, lr: float = 1e-3) -> dict[str, float]:
    """Median seconds of one training step of each model, timed on equal work: copies of the models
    (the originals are left as they are) take turns, one step each, on the same ``steps`` batches,
    so a change in the machine's load falls on all of them alike. No validation is timed.

    Returns
    -------
    dict
        {name: median seconds per step}, in the order of ``models``.
    """
    import copy
    import statistics

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    copies = {name: copy.deepcopy(model).train() for name, model in models.items()}
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01) for name, model in copies.items()}
    seconds: dict[str, list[float]] = {name: [] for name in copies}
    for _, batch in zip(range(steps), batches(corpus.train, vocab, batch_size, shuffle=True, seed=12345)):
        for name, model in copies.items():
            started = time.perf_counter()
            loss = loss_fn(model(batch.src, batch.tgt_in), batch.targets, vocab.pad_id)
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            seconds[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in seconds.items()}


def plot_losses(*histories: History, labels: Sequence[str] = ("softmax attention",), ax=None):
    """Training loss per step (and its running mean) and validation loss, one colour per history.

    The legend sits below the axes, where it covers no curve."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.2 + 0.3 * len(histories)))
    for history, label, colour in zip(histories, labels, ["tab:blue", "tab:orange", "tab:green"]):
        steps = range(1, len(history.train) + 1)
        ax.plot(steps, history.train, "-", color=colour, alpha=0.25, lw=0.8)
        window = max(1, len(history.train) // 30)
        smooth = [sum(history.train[max(0, i - window + 1): i + 1]) / len(history.train[max(0, i - window + 1): i + 1])
                  for i in range(len(history.train))]
        ax.plot(steps, smooth, "-", color=colour, label=f"{label}: training (running mean of {window} steps)"
                if window > 1 else f"{label}: training")
        ax.plot(*zip(*history.val), "o--", color=colour, label=f"{label}: validation")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy per summary token (log scale)")
    ax.set_yscale("log")  # the late, small improvements are where models differ
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    low, high = ax.get_ylim()
    for candidates in ((0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 7, 10),  # the coarsest set with at least 3 labels in range
                       (0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1, 1.5, 2, 3, 4, 5, 6, 7, 8, 10),
                       tuple(round(0.05 * k, 2) for k in range(2, 20)) + tuple(k / 2 for k in range(2, 21))):
        ticks = [t for t in candidates if low <= t <= high]
        if len(ticks) >= 3:
            break
    ax.set_yticks(ticks)
    ax.set_ylim(low, high)
    ax.set_title("Learning curves")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(2, len(histories)), fontsize=9, frameon=False)
    return ax


def summarize(model, decode, articles: Sequence[Article], vocab: Vocabulary, *, batch_size: int = 100,
              max_len: int = 40, **options) -> list[str]:
    """Summaries of ``articles`` written by ``decode(model, src, max_len, bos_id, eos_id, **options)``."""
    model.eval()
    out = []
    with torch.no_grad():
        for batch in batches(articles, vocab, batch_size):
            tokens = decode(model, batch.src, max_len, vocab.bos_id, vocab.eos_id, **options)
            out += [vocab.decode(row) for row in tokens]
    return out


def rouge_table(predictions: Sequence[str], articles: Sequence[Article]) -> dict[str, dict[str, float]]:
    """ROUGE of ``predictions`` on all ``articles``, on those with seen names and on those with unseen ones."""
    table = {}
    for name, keep in (("all", lambda a: True), ("seen names", lambda a: not a.unseen), ("unseen names", lambda a: a.unseen)):
        pairs = [(p, a.summary) for p, a in zip(predictions, articles) if keep(a)]
        if pairs:
            table[name] = rouge([p for p, _ in pairs], [r for _, r in pairs])
    return table


def print_rouge(tables: dict[str, dict[str, dict[str, float]]]) -> None:
    """Print {system: rouge_table(...)} as one table: ROUGE-1/2/L F1 per system and subset."""
    width = max(len("system"), *map(len, tables)) + 2
    print(f"{'system':<{width}}{'articles':<14}{'ROUGE-1':>9}{'ROUGE-2':>9}{'ROUGE-L':>9}")
    for system, table in tables.items():
        for subset, scores in table.items():
            print(f"{system:<{width}}{subset:<14}{scores['rouge1']:>9.3f}{scores['rouge2']:>9.3f}{scores['rougeL']:>9.3f}")


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


def plot_masks(masks: dict, row: int = 0):
    """Row ``row`` of batched masks, (B, T) or (B, Tq, Tk), side by side: white where attention is allowed."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    two_colours = ListedColormap(["black", "white"])  # a mask has two values: masked, allowed
    fig, axes = plt.subplots(1, len(masks), figsize=(3.6 * len(masks) + 1, 3.8), squeeze=False)
    axes = axes[0]
    for ax, (name, mask) in zip(axes, masks.items()):
        m = mask[row]
        m = m[None] if m.dim() == 1 else m  # a padding mask: one row
        image = ax.imshow(m.float().numpy(), cmap=two_colours, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel("key position" if m.shape[0] > 1 else "token position")
        ax.set_ylabel("query position" if m.shape[0] > 1 else "")
        if m.shape[0] == 1:
            ax.set_yticks([])
    fig.suptitle(f"Masks of batch row {row} (white: allowed, black: masked)")
    fig.tight_layout()
    bar = fig.colorbar(image, ax=list(axes), fraction=0.02, pad=0.02, ticks=[0.25, 0.75])
    bar.ax.set_yticklabels(["masked\n(False)", "allowed\n(True)"])
    bar.set_label("mask value")
    return fig


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


# ---------------------------------------------------------------------------------------------
# The optional Performer part: plumbing around the student's performer_attention.
# ---------------------------------------------------------------------------------------------
def random_projection(num_features: int, d: int, seed: int = 0) -> torch.Tensor:
    """``(num_features, d)`` FAVOR+ projection: blocks of ``d`` orthogonal directions (QR of a
    Gaussian matrix), each row rescaled to the length of a Gaussian vector, so every row is still
    distributed as N(0, I) but the rows of a block do not repeat each other's information."""
    g = torch.Generator().manual_seed(seed)
    blocks = [torch.linalg.qr(torch.randn(d, d, generator=g))[0].T for _ in range(-(-num_features // d))]
    lengths = torch.randn(num_features, d, generator=g).norm(dim=1)
    return torch.cat(blocks)[:num_features] * lengths[:, None]


def split_mask(mask: torch.Tensor | None, Tq: int, Tk: int) -> tuple[torch.Tensor | None, bool]:
    """A layer's boolean mask ``(Tq, Tk)`` or ``(B, Tq, Tk)`` as ``(key_mask (B, Tk), causal)``.

    Linear attention cannot apply an arbitrary mask, only drop keys and hide later positions; a
    mask that is not of that form is refused rather than silently approximated."""
    if mask is None:
        return None, False
    if mask.dim() == 2:
        mask = mask[None]
    key_mask = mask.any(dim=1)  # (B, Tk): a key some query may see
    causal = Tq == Tk and Tq > 1 and not mask.triu(1).any()
    rebuilt = key_mask[:, None, :].expand(-1, Tq, -1)
    if causal:
        rebuilt = rebuilt & torch.ones(Tq, Tk, dtype=torch.bool, device=mask.device).tril()
    if not torch.equal(rebuilt, mask.expand_as(rebuilt)):
        raise ValueError("Performer attention supports masks that drop keys (padding) and hide later positions "
                         "(causal), nothing else: this mask is neither")
    return key_mask, causal


class PerformerAttention(torch.nn.Module):
    """Multi-head attention as in Part 3 (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), whose
    core is ``performer_attention(q, k, v, projection, key_mask, causal)`` with a fixed random
    projection of ``num_features`` rows per head. Returns ``(out, None)``: it has no weights."""

    def __init__(self, performer_attention, d_model: int, num_heads: int, num_features: int, seed: int = 0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.attend, self.num_heads, self.d_head = performer_attention, num_heads, d_model // num_heads
        self.q_proj, self.k_proj = torch.nn.Linear(d_model, d_model), torch.nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = torch.nn.Linear(d_model, d_model), torch.nn.Linear(d_model, d_model)
        self.register_buffer("projection", random_projection(num_features, self.d_head, seed))

    def forward(self, query, key, value, mask=None, cache=None):
        if isinstance(cache, dict):
            raise ValueError("this Performer model has no key/value cache: decode it with use_cache=False")
        B, Tq, Tk = query.shape[0], query.shape[1], key.shape[1]
        key_mask, causal = split_mask(mask, Tq, Tk)

        def heads(x):  # (B, T, d_model) -> (B, heads, T, d_head)
            return x.view(B, x.shape[1], self.num_heads, self.d_head).transpose(1, 2)

        out = self.attend(heads(self.q_proj(query)), heads(self.k_proj(key)), heads(self.v_proj(value)),
                          self.projection, key_mask=None if key_mask is None else key_mask[:, None, :], causal=causal)
        if not isinstance(out, torch.Tensor) or out.shape != (B, self.num_heads, Tq, self.d_head):
            raise ValueError(f"performer_attention must return a tensor of shape (B, heads, Tq, d_head) = "
                             f"{(B, self.num_heads, Tq, self.d_head)}, got {getattr(out, 'shape', type(out).__name__)}")
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, -1)), None


def use_performer_attention(model: torch.nn.Module, attention_class: type, performer_attention, *,
                            num_features: int = 64, seed: int = 0) -> int:
    """Replace every ``attention_class`` module inside ``model`` by a fresh ``PerformerAttention``
    of the same size (each with its own projection); returns how many were replaced."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, attention_class):
                d_model, num_heads = child.q_proj.in_features, getattr(child, "num_heads", None)
                if num_heads is None:
                    raise ValueError(f"{attention_class.__name__} needs a num_heads attribute to be replaced")
                setattr(parent, name, PerformerAttention(performer_attention, d_model, num_heads, num_features,
                                                         seed=seed + replaced))
                replaced += 1
    if not replaced:
        raise ValueError(f"no {attention_class.__name__} module found in the model")
    return replaced
