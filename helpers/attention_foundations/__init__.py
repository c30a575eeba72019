"""Data, models, harnesses and plots for the attention-foundations notebook.

Nothing here is a solution: the attention scores, the moments of q.k, the attention decoder, the
positional encodings, the receptive-field count and the exploration queries are the students' to
write. The harnesses (training loop, accuracy by length, simulations) take the student's functions
and classes as arguments.

The sequence task is the one of Discussion 8: a task token (``<U>`` or ``<L>``) followed by a
sentence in mixed case; the answer is the sentence in upper or lower case, one character per step.

:mod:`.data` holds Discussion 8's worked example and the case task (vocabulary, examples, padded
batches); :mod:`.seq2seq` the encoder, the bottleneck decoder, training and greedy decoding;
:mod:`.plots` the plots of that part (accuracy by length, alignment); :mod:`.experiments` the
simulations and plots of the scaled dot products, positions and attention exploration parts. Every
public name is importable from ``helpers.attention_foundations`` itself.
"""

from ..training import plot_training_loss  # the notebook's
from .data import LOWER, UPPER  # noqa: F401 (the task tokens, importable from here as before the split)
from .data import VOCAB, CaseBatch, CharVocab, discussion_example, make_batch, make_case_examples
from .experiments import (key_norm_experiment, orthogonal_keys, plot_key_norm_experiment, plot_moments,
                          plot_position_similarity, plot_relative_bias, plot_softmax_saturation, random_argmax_sources)
from .plots import plot_accuracy_by_length, plot_alignment
from .seq2seq import BottleneckDecoder, Encoder, Seq2Seq, exact_match_by_length, greedy_decode, train_seq2seq

__all__ = [
    # the worked example and the case task (data.py)
    "discussion_example", "CharVocab", "VOCAB", "make_case_examples", "CaseBatch", "make_batch",
    # the encoder-decoder (seq2seq.py)
    "Encoder", "BottleneckDecoder", "Seq2Seq", "train_seq2seq", "greedy_decode", "exact_match_by_length",
    # its plots (plots.py), and the training loss (helpers.training)
    "plot_accuracy_by_length", "plot_alignment", "plot_training_loss",
    # the simulations (experiments.py)
    "plot_softmax_saturation", "plot_moments", "plot_position_similarity", "plot_relative_bias",
    "random_argmax_sources", "orthogonal_keys", "key_norm_experiment", "plot_key_norm_experiment",
]
