"""The generated news corpus: articles of six story types, each with a one-sentence reference
summary, and a loader for real news data (XSum, CNN/DailyMail) for users with network.

An article states its story's facts in one of several paraphrases, adds details a summary should
leave out and distractor sentences with facts of the same kind about other people, places and
teams, and sometimes opens with a scene-setting sentence, so a good summary has to pick the right
facts, not copy the lead. The corpus is a pure function of its seed. A third of the test articles
use only people, places and companies that never occur in training (``Article.unseen``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

__all__ = ["ENTITY_POOLS", "STORY_TYPES", "Article", "Corpus", "make_corpus", "lead_summary", "load_news_dataset"]

# ---------------------------------------------------------------------------------------------
# Entity pools. "seen" names appear in training; "unseen" ones only in the unseen test articles.
# ---------------------------------------------------------------------------------------------
ENTITY_POOLS = {
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
    cast = _Cast(rng, ENTITY_POOLS["unseen" if unseen else "seen"])
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
    try:
        import datasets
    except ImportError:  # an optional extra: the notebook's own corpus needs none of it
        raise ImportError("load_news_dataset needs the `datasets` package, an optional extra of the course's install: "
                          "pip install -e '.[news]' in the course folder (it adds about 200 MB)") from None

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

