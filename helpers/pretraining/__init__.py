"""Corpus, model, harnesses and plots for the pretraining notebook.

Nothing here is a solution: span corruption, the finetuning examples, the two attention layers,
the baseline and the metric are the students' to write, and the harnesses take them as arguments.

The corpus is generated, not downloaded: invented people (160 in the notebook's experiment), each
with a birthplace, a profession and dates, told in several short biographies of varied wording, plus
filler text about nothing in particular. The same seed always gives the same corpus. Finetuning
asks "Where was NAME born?" about half of the people; the other half are held out for evaluation,
so a model can only answer about them with what it read during pretraining.

:mod:`.corpus` makes the people, the corpus and the question; :mod:`.settings` holds the sizes and
budgets of each setting; :mod:`.vocabulary` the PAD and MASK characters, the characters' ids and
the batches; :mod:`.model` the GPT, its training loop and its answers; :mod:`.plots` the plots.
Every public name is importable from ``helpers.pretraining`` itself.
"""

from ..training import TrainingLog, plot_training_loss  # the notebook's
from .corpus import PLACES, Person, invented_names, make_corpus, make_people, question, split_people
from .corpus import biography  # noqa: F401 (importable from here as before the split)
from .model import GPT, deterministic_weights, predict_places, train
from .plots import plot_finetuning_curves, plot_place_counts
from .settings import FAST, FULL, GRADING, QUICK, Experiment, experiment
from .vocabulary import (MASK, PAD, CharVocab, encode_pairs, finetuning_batches, pretraining_batches,
                         read_span_example)

__all__ = [
    # the people and the corpus (corpus.py)
    "PLACES", "Person", "make_people", "invented_names", "make_corpus", "split_people", "question",
    # the sizes and budgets of each setting (settings.py)
    "Experiment", "experiment", "FULL", "QUICK", "GRADING", "FAST",
    # characters, examples and batches (vocabulary.py)
    "PAD", "MASK", "read_span_example", "encode_pairs", "CharVocab", "pretraining_batches", "finetuning_batches",
    # the model (model.py), and the training log and loss plot (helpers.training)
    "GPT", "train", "predict_places", "deterministic_weights", "TrainingLog", "plot_training_loss",
    # the plots (plots.py)
    "plot_finetuning_curves", "plot_place_counts",
]
