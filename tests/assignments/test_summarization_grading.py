"""The summarization assignment's own checks: the student's run (fast setting) passes every public
check (the optional Performer part's too), the loss falls and the cache gives the same tokens; the
decoding harnesses in ``helpers``.
Its build and grading batch are checked in ``test_assignment_batches``."""

import math
import re

import torch

from tests.support.adversarial import grade_forgeries
from tests.support.batches import BATCH_LIMITS
from helpers import summarization as S
from tests.support.student_run import printed
from tests.summarization_variants import FORGEABLE_PROPERTIES

SLUG = "summarization"


def test_student_run_passes_every_public_check_and_the_loss_falls(assignment_batch):
    said = printed(assignment_batch(SLUG).folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 12, said
    before, after = map(float, re.search(r"validation loss ([\d.]+) -> ([\d.]+)", said).groups())
    assert after < before - 0.5, (before, after)
    assert "identical tokens with and without the cache: True" in said
    assert "beam width 2: neural neural network" in said and "most likely sequence: neural network network" in said
    assert "6 attention modules now use FAVOR+" in said  # the optional Performer part ran too
    for system in ("lead sentence", "greedy", "beam search (k=4)", "Performer, greedy"):
        assert re.search(rf"{re.escape(system)}\s+unseen names", said), system


def test_the_tree_is_homework_6s_trap_for_beam_search():
    src = torch.zeros(1, 1, dtype=torch.long)
    best, score = S.exhaustive_search(S.TreeModel(), src, 3, 0, 3)
    assert best == [0, 1, 2, 2] and math.isclose(math.exp(score), 0.55 * 0.40 * 0.99)
    for prefix, options in S.TREE.items():  # the model is the tree, and bos and eos never win
        assert math.isclose(sum(options.values()), 1.0), prefix
        probs = torch.softmax(S.TreeModel()(src, torch.tensor([[0, *prefix]]))[0, -1], -1)
        assert torch.allclose(probs[1:3], torch.tensor([options[1], options[2]], dtype=torch.float64)), prefix
        assert probs[[0, 3]].max() == 0, prefix
    # Question 10b by hand, width 2: no two candidates ever tie, so "which sequences are kept" has one
    # answer, and the beam drops "neural network" at step 2, the prefix of the most likely sequence
    beams, kept = [((), 1.0)], []
    for _step in range(3):
        candidates = sorted(((p + (w,), q * S.TREE[p][w]) for p, q in beams for w in (1, 2)), key=lambda c: -c[1])
        scores = [q for _, q in candidates]
        assert min(a - b for a, b in zip(scores, scores[1:])) > 1e-3, candidates
        beams = candidates[:2]
        kept.append([p for p, _ in beams])
    assert kept[1] == [(2, 1), (1, 1)] and kept[2] == [(1, 1, 2), (2, 1, 1)]


def test_the_toy_model_depends_on_the_article_and_the_whole_prefix():
    model = S.ToyDecoderModel(vocab_size=5, seed=0)
    a = model(torch.tensor([[1]]), torch.tensor([[0, 2, 3]]))
    assert a.shape == (1, 3, 5)
    assert not torch.allclose(a, model(torch.tensor([[2]]), torch.tensor([[0, 2, 3]])))  # the article
    assert not torch.allclose(a[0, 2], model(torch.tensor([[1]]), torch.tensor([[0, 4, 3]]))[0, 2])  # an earlier token
    assert torch.equal(a[0, :1], model(torch.tensor([[1]]), torch.tensor([[0]]))[0])  # not a later one


def test_training_harness_lowers_the_loss_of_a_tiny_model():
    corpus = S.make_corpus(n_train=256, n_val=32, n_test=0)
    vocab = S.build_vocabulary(corpus.train)
    torch.manual_seed(0)
    model = _TinyModel(len(vocab))
    loss_fn = lambda logits, targets, pad: torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=pad)
    history = S.train_summarizer(model, corpus, vocab, loss_fn, epochs=2, batch_size=32, lr=1e-2)
    assert history.steps == 16 and len(history.train) == 16
    assert [step for step, _ in history.val] == [0, 8, 16]
    assert history.val[-1][1] < history.val[0][1] - 0.5
    assert not model.training
    capped = S.train_summarizer(_TinyModel(len(vocab)), corpus, vocab, loss_fn, epochs=5, batch_size=32, max_steps=3)
    assert capped.steps == 3 and [step for step, _ in capped.val] == [0, 3]


class _TinyModel(torch.nn.Module):
    """Predicts each summary token from the previous one and the article's mean embedding."""

    def __init__(self, vocab_size):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, 32)
        self.out = torch.nn.Linear(64, vocab_size)

    def forward(self, src, tgt_in):
        article = self.embed(src).mean(1, keepdim=True).expand(-1, tgt_in.shape[1], -1)
        return self.out(torch.cat([self.embed(tgt_in), article], -1))


def test_forgeries_pass_only_what_simple_functions_pass(layout, assignment_batch, tmp_path):
    """Issue 35: a notebook that implements nothing and makes every number computed in its kernel lie
    passes no hidden test (it passed 21 of 43 points before: the 19 that rested on properties, and the
    model's 2 with a module of the right size); one that also sends what each property accepts passes
    only three tests of two runs (4 points), which simple functions that are not the graded ones pass too."""
    passed = grade_forgeries(layout, SLUG, assignment_batch(SLUG).folder / "samples" / "blank.ipynb", tmp_path,
                             BATCH_LIMITS[SLUG])
    assert passed == {"every_number": set(), "collected_values": FORGEABLE_PROPERTIES}
