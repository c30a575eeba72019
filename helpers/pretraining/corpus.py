"""The pretraining notebook's corpus: invented people, their biographies, and the finetuning question.

Each person has a birthplace, a profession and dates, told in several short biographies of varied
wording; filler text about nothing in particular is mixed in. The same seed always gives the same
people and the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

__all__ = ["PLACES", "Person", "make_people", "invented_names", "make_corpus", "split_people", "question"]


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
class Person:
    name: str
    place: str
    job: str
    year: int


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
