"""The optional Performer part of ``summarization``: its public check catches known-wrong
``performer_attention``s and accepts correct alternatives (it has no hidden tests: the part is not
graded), and the plumbing in ``helpers.summarization`` turns the student's model into a Performer
that trains."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from helpers import summarization as S
from tests.support.notebook_edits import master
from tests.summarization_variants import PERFORMER_CORRECT, PERFORMER_WRONG

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


@pytest.fixture(scope="module")
def reference():
    """The master's code cells executed up to Part 12's solution: every function a student writes,
    and the public check of Part 12."""
    namespace = {"math": math, "torch": torch, "nn": nn, "F": F}
    wanted = ("def scaled_dot_product_attention", "def sinusoidal_positional_encoding", "class MultiHeadAttention",
              "def padding_mask", "class EncoderLayer", "class Summarizer", "def sequence_loss", "def performer_attention")
    for cell in master("summarization").cells:
        if cell.cell_type == "code" and any(cell.source.lstrip().startswith(w) for w in wanted):
            exec(cell.source, namespace)
    check = next(c.source for c in master("summarization").cells if "def test_performer_public" in c.source)
    exec(check, namespace)
    return namespace


def run_check(reference, source=None):
    namespace = dict(reference)
    if source is not None:
        exec(source, namespace)
    namespace["test_performer_public"](namespace["performer_attention"], namespace["scaled_dot_product_attention"])


def test_the_reference_passes_the_public_check(reference):
    run_check(reference)


@pytest.mark.parametrize("variant", PERFORMER_WRONG, ids=lambda v: v["name"])
def test_a_known_wrong_performer_fails_the_public_check(reference, variant):
    with pytest.raises(AssertionError):
        run_check(reference, variant["source"])


@pytest.mark.parametrize("variant", PERFORMER_CORRECT, ids=lambda v: v["name"])
def test_a_correct_alternative_passes_the_public_check(reference, variant):
    run_check(reference, variant["source"])


def test_performer_attention_estimates_softmax_attention(reference):
    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(3, 2, 4, 30, 16, generator=g) * torch.tensor([0.5, 0.5, 1.0])[:, None, None, None, None]
    exact = reference["scaled_dot_product_attention"](q, k, v)[0]
    errors = [float((reference["performer_attention"](q, k, v, S.random_projection(m, 16, seed=1)) - exact).norm()
                    / exact.norm()) for m in (16, 256, 4096)]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.1, errors


def test_random_projection_rows_are_orthogonal_within_a_block_and_seeded():
    w = S.random_projection(40, 16, seed=4)
    assert w.shape == (40, 16) and torch.equal(w, S.random_projection(40, 16, seed=4))
    assert not torch.equal(w, S.random_projection(40, 16, seed=5))
    directions = w[:16] / w[:16].norm(dim=1, keepdim=True)
    assert torch.allclose(directions @ directions.T, torch.eye(16), atol=1e-5)
    assert 2.5 < float(w.norm(dim=1).mean()) < 5.5  # lengths of 16-dimensional Gaussian vectors, about 4


def test_split_mask_reads_padding_and_causality_and_refuses_anything_else(reference):
    tgt = torch.tensor([[5, 6, 7, 0], [5, 6, 0, 0]])
    key_mask, causal = S.split_mask(reference["decoder_self_attention_mask"](tgt, 0), 4, 4)
    assert causal and torch.equal(key_mask, tgt != 0)
    src = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    key_mask, causal = S.split_mask(reference["cross_attention_mask"](src, tgt, 0), 4, 5)
    assert not causal and torch.equal(key_mask, src != 0)
    square = (src[:, :4] != 0)[:, None, :].expand(-1, 4, -1)  # the encoder's padding mask
    key_mask, causal = S.split_mask(square, 4, 4)  # every query sees the same keys: padding, not causal
    assert not causal and torch.equal(key_mask, src[:, :4] != 0)
    assert S.split_mask(None, 3, 3) == (None, False)
    band = torch.ones(4, 4, dtype=torch.bool).tril().triu(-1)  # a sliding window: not expressible
    with pytest.raises(ValueError, match="padding.*causal"):
        S.split_mask(band, 4, 4)


def test_a_performer_summarizer_keeps_padding_and_causality_and_trains(reference):
    torch.manual_seed(0)
    model = reference["Summarizer"](40, 32, 4, 2, 64, 64, pad_id=0)
    assert S.use_performer_attention(model, reference["MultiHeadAttention"], reference["performer_attention"],
                                     num_features=16) == 6
    assert not any(isinstance(m, reference["MultiHeadAttention"]) for m in model.modules())
    model.eval()
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(4, 40, (3, 9), generator=g), torch.randint(4, 40, (3, 6), generator=g)
    src[1, 6:] = 0
    with torch.no_grad():
        logits = model(src, tgt)
        assert torch.isfinite(logits).all()
        assert torch.allclose(logits, model(torch.cat([src, torch.zeros(3, 2, dtype=torch.long)], 1), tgt), atol=1e-4)
        later = tgt.clone()
        later[:, 3:] = 7
        assert torch.allclose(logits[:, :3], model(src, later)[:, :3], atol=1e-4)
    with pytest.raises(ValueError, match="use_cache=False"):
        model.decode(model.encode(src), src, tgt[:, :1], [{} for _ in model.decoder])
    corpus = S.make_corpus(n_train=320, n_val=40, n_test=10)
    vocab = S.build_vocabulary(corpus.train)
    torch.manual_seed(0)
    model = reference["Summarizer"](len(vocab), 64, 4, 1, 128, 256, pad_id=vocab.pad_id)
    S.use_performer_attention(model, reference["MultiHeadAttention"], reference["performer_attention"], num_features=16)
    history = S.train_summarizer(model, corpus, vocab, reference["sequence_loss"], epochs=2, lr=2e-3)
    assert all(math.isfinite(loss) for loss in history.train)
    assert history.val[-1][1] < history.val[0][1] - 1.0, history.val


def test_a_wrong_shape_from_performer_attention_is_named():
    module = S.PerformerAttention(lambda q, k, v, projection, key_mask=None, causal=False: v[..., :1, :],
                                  d_model=8, num_heads=2, num_features=4)
    with pytest.raises(ValueError, match=r"\(B, heads, Tq, d_head\)"):
        module(torch.randn(1, 3, 8), torch.randn(1, 3, 8), torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="no MultiHeadAttention"):
        S.use_performer_attention(nn.Linear(2, 2), type("MultiHeadAttention", (nn.Module,), {}), None)
