"""Data, tokenizer, harnesses and fixed test models for the summarization notebook.

No news corpus can be installed offline, so :mod:`.corpus` writes one (short news-style articles,
each with a one-sentence reference summary; a third of the test articles use only names never
seen in training). :mod:`.vocabulary` turns articles into padded batches; :mod:`.harness` trains
and evaluates the student's model with the student's loss and decoder; :mod:`.decoding` holds the
small fixed models the decoders are checked and timed with; :mod:`.performer` is the plumbing of
the optional Performer part.

Nothing here is a solution: the attention, masks, layers, model, loss and decoders are the
students' to write. Every public name is importable from ``helpers.summarization`` itself.
"""

from .corpus import ENTITY_POOLS, STORY_TYPES, Article, Corpus, lead_summary, load_news_dataset, make_corpus
from .decoding import (TREE, TREE_WORDS, ToyDecoderModel, TreeModel, exhaustive_search, plot_decoding_times,
                       print_tree, time_decoding)
from .harness import (History, copied_facts, facts_of, mean_loss, plot_cross_attention, plot_losses, plot_masks,
                      print_copied_facts, print_rouge, rouge, rouge_table, summarize, time_training_steps, train_summarizer)
from .performer import PerformerAttention, largest_intermediate, random_projection, split_mask, use_performer_attention
from .vocabulary import SPECIALS, Batch, Vocabulary, batches, build_vocabulary

__all__ = [
    # the corpus (corpus.py)
    "ENTITY_POOLS", "STORY_TYPES", "Article", "Corpus", "make_corpus", "lead_summary", "load_news_dataset",
    # tokens and batches (vocabulary.py)
    "SPECIALS", "Vocabulary", "build_vocabulary", "Batch", "batches",
    # training and evaluation (harness.py)
    "rouge", "rouge_table", "print_rouge", "History", "mean_loss", "train_summarizer", "time_training_steps",
    "plot_losses", "summarize", "plot_masks", "plot_cross_attention", "facts_of", "copied_facts", "print_copied_facts",
    # decoding (decoding.py)
    "ToyDecoderModel", "exhaustive_search", "time_decoding", "plot_decoding_times", "TREE_WORDS", "TREE",
    "TreeModel", "print_tree",
    # the optional Performer part (performer.py)
    "random_projection", "split_mask", "PerformerAttention", "use_performer_attention", "largest_intermediate",
]
