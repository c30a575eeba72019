"""The pretraining notebook's data, model and harnesses in ``helpers.pretraining``."""

from collections import Counter

import pytest
import torch
from torch import nn

from helpers.pretraining import (MASK, PAD, PLACES, GPT, CharVocab, deterministic_weights, encode_pairs,
                                 finetuning_batches, invented_names, make_corpus, make_people, predict_places,
                                 pretraining_batches, question, read_span_example, split_people, train)

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


def test_people_and_corpus_are_deterministic_and_every_person_is_in_the_corpus():
    people = make_people(300, seed=0)
    assert people == make_people(300, seed=0) and people != make_people(300, seed=1)
    assert len({p.name for p in people}) == 300
    corpus = make_corpus(people)
    assert corpus == make_corpus(people)
    for person in people[::17]:
        about = [d for d in corpus if d.startswith(person.name) or f" {person.name}" in d]
        assert len(about) >= 4 and all(person.place in d for d in about)
    assert not any(MASK in d or PAD in d for d in corpus)
    counts = Counter(p.place for p in people)
    assert set(counts) <= set(PLACES) and counts.most_common(1)[0][0] == "London"
    finetune, heldout = split_people(people)
    assert not {p.name for p in finetune} & {p.name for p in heldout} and len(finetune) + len(heldout) == 300
    strangers = invented_names(50, people)
    assert len(set(strangers)) == 50 and not set(strangers) & {p.name for p in people}


def test_read_span_example_names_each_kind_of_mistake():
    document = "Ada Brou was born in Lima in 1901."
    good = "Ada Brou was born in " + MASK + " in 1901." + MASK + "Lima"
    good = good + PAD * (41 - len(good))
    assert read_span_example(good[:-1], good[1:], document, 40) == ("Ada Brou was born in ", "Lima", " in 1901.", None)
    assert "shifted" in read_span_example(good[:-1], good[:-1], document, 40)[3]
    assert "two MASK" in read_span_example(good[:-1].replace(MASK, "x", 1), good[1:].replace(MASK, "x", 1),
                                           document, 40)[3]
    wrong_order = "Ada Brou was born in " + MASK + "Lima" + MASK + " in 1901."
    wrong_order += PAD * (41 - len(wrong_order))
    assert "start of the document" in read_span_example(wrong_order[:-1], wrong_order[1:], document, 40)[3]
    long_doc = "abcdefghij" * 10
    kept = long_doc[:44]  # int(7/8 * 48) = 42
    too_long = kept[:10] + MASK + kept[20:] + MASK + kept[10:20]
    too_long += PAD * (49 - len(too_long))
    assert "more than int(7/8" in read_span_example(too_long[:-1], too_long[1:], long_doc, 48)[3]
    assert encode_pairs([("ab", "c")]) == [2, 97, 98, 1, 99]


def test_vocab_round_trip_and_clear_error():
    vocab = CharVocab(["Hello world", "Where?"])
    assert vocab.chars[:2] == [PAD, MASK] and vocab.index[PAD] == 0
    assert vocab.decode(vocab.encode("Hello" + MASK + PAD)) == "Hello" + MASK + PAD
    with pytest.raises(ValueError, match="does not have"):
        vocab.encode("caf\u00e9")


class _LoopAttention(nn.Module):
    """A causal single-head attention written independently of any solution, for harness tests."""

    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.proj(nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))


def _span(document, block_size, generator):
    """A simple, valid span corruption: truncate, cut a span, rearrange."""
    n = min(len(document), int(torch.randint(4, int(block_size * 7 / 8) + 1, (1,), generator=generator)))
    span = int(torch.randint(0, n // 2 + 1, (1,), generator=generator))
    start = int(torch.randint(0, n - span + 1, (1,), generator=generator))
    text = document[:start] + MASK + document[start + span:n] + MASK + document[start:start + span]
    text += PAD * (block_size + 1 - len(text))
    return text[:-1], text[1:]


def _finetune(q, a, block_size):
    text = q + MASK + a + MASK
    text += PAD * (block_size + 1 - len(text))
    return text[:-1], PAD * (len(q) - 1) + text[len(q):]


def test_batches_check_the_students_functions_and_have_the_right_shapes():
    people = make_people(40)
    corpus = make_corpus(people, biographies_per_person=2)
    vocab = CharVocab(corpus + [question(p.name) for p in people])
    x, y = pretraining_batches(corpus, _span, vocab, 48, batch_size=5, seed=0)()
    assert x.shape == y.shape == (5, 48) and torch.equal(x[:, 1:], y[:, :-1])
    x, y = finetuning_batches(people, _finetune, vocab, 48, batch_size=6, seed=0)()
    assert x.shape == (6, 48) and (y[:, :10] == 0).all()
    with pytest.raises(ValueError, match="block_size = 48"):
        pretraining_batches(corpus, lambda d, b, g: ("ab", "bc"), vocab, 48, 2, 0)()
    with pytest.raises(TypeError, match="tuple"):
        finetuning_batches(people, lambda q, a, b: q + a, vocab, 48, 2, 0)


def test_a_small_gpt_learns_the_questions_it_is_finetuned_on_and_predict_places_reads_answers():
    people = make_people(16)
    vocab = CharVocab([question(p.name) for p in people] + list(PLACES))
    model = GPT(len(vocab), 48, _LoopAttention, n_embd=64, n_layer=2, n_head=1)
    batches = finetuning_batches(people, _finetune, vocab, 48, batch_size=16, seed=0)
    names, answers = [p.name for p in people], [p.place for p in people]
    log = train(model, batches, steps=150, lr=3e-3, name="tiny", every=10,
                evaluate=lambda m: sum(a == b for a, b in zip(predict_places(m, vocab, names), answers)) / 16,
                eval_every=50)
    assert log.losses[-1] < 0.2 * log.losses[0] and log.eval_steps == [50, 100, 150]
    assert log.accuracies[-1] >= 0.75
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 49, dtype=torch.long))


def test_deterministic_weights_depend_only_on_names_and_shapes():
    a = deterministic_weights(nn.Linear(3, 2).double(), seed=1)
    b = nn.Linear(3, 2).double()
    b.bias.data.fill_(7.0)
    deterministic_weights(b, seed=1)
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
