"""The attention-foundations assignment's own checks: the student's run, and the data, models and
harnesses in ``helpers``. Its build and grading batch are checked in ``test_assignment_batches``."""

import pytest
import torch

from helpers.attention_foundations import (VOCAB, BottleneckDecoder, Encoder, Seq2Seq, discussion_example,
                                           exact_match_by_length, greedy_decode, key_norm_experiment, make_batch,
                                           make_case_examples, orthogonal_keys, random_argmax_sources, train_seq2seq)
from tests.support.adversarial import grade_forgeries
from tests.support.batches import LIMITS
from tests.attention_foundations_variants import FORGEABLE_PROPERTIES
from tests.support.student_run import printed

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

SLUG = "attention_foundations"


def test_student_run_passes_every_public_check_and_trains_both_models(assignment_batch):
    folder = assignment_batch(SLUG).folder
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 8, said
    assert "training bottleneck: 8 steps in" in said and "training attention: 8 steps in" in said
    assert "[1054.,  852., -396.]" in said  # the discussion's scores, printed from the student's function
    assert "largest receptive field" in said and "two_heads: weight of value a" in said


def test_case_examples_are_deterministic_and_follow_the_task():
    examples = make_case_examples(50, range(4, 31), seed=3)
    assert examples == make_case_examples(50, range(4, 31), seed=3)
    assert examples != make_case_examples(50, range(4, 31), seed=4)
    assert {task for task, _, _ in examples} == {"<U>", "<L>"}
    for task, text, target in examples:
        assert 4 <= len(text) <= 30 and set(text) <= set(VOCAB.tokens)
        assert target == (text.upper() if task == "<U>" else text.lower())
    mixed = "".join(text for _, text, _ in examples)
    assert mixed != mixed.lower() and mixed != mixed.upper()  # the input's case says nothing about the task
    with pytest.raises(ValueError, match="alphabet"):
        VOCAB.encode_source("<U>", "caf\u00e9")
    with pytest.raises(ValueError, match="task"):
        VOCAB.encode_source("<X>", "abc")


def test_batches_pad_and_shift_the_targets():
    batch = make_batch([("<U>", "ab", "AB"), ("<L>", "Hello", "hello")])
    assert batch.src.shape == (2, 6) and batch.src_mask.sum(1).tolist() == [3, 6]
    assert VOCAB.decode(batch.tgt_out[1]) == "hello" and batch.tgt_out[0, 2] == VOCAB.EOS
    assert batch.tgt_in[:, 0].eq(VOCAB.BOS).all() and torch.equal(batch.tgt_in[1, 1:], batch.tgt_out[1, :-1])
    assert (batch.tgt_out[0, 3:] == VOCAB.PAD).all()


def test_encoder_last_state_ignores_padding():
    torch.manual_seed(0)
    encoder = Encoder(len(VOCAB), 16)
    alone = make_batch([("<U>", "abc", "ABC")])
    padded = make_batch([("<U>", "abc", "ABC"), ("<L>", "a much longer one", "a much longer one")])
    states_alone, last_alone = encoder(alone.src, alone.src_mask)
    states_padded, last_padded = encoder(padded.src, padded.src_mask)
    assert torch.allclose(last_alone[0, 0], last_padded[0, 0], atol=1e-6)
    assert torch.allclose(states_alone[0], states_padded[0, :4], atol=1e-6)
    assert (states_padded[0, 4:] == 0).all()


def test_bottleneck_model_learns_short_sentences_and_greedy_decoding_stops_at_eos():
    torch.manual_seed(0)
    model = Seq2Seq(Encoder(len(VOCAB), 64), BottleneckDecoder(len(VOCAB), 64))
    log = train_seq2seq(model, steps=250, lengths=[2], batch_size=64, lr=1e-2)
    assert log.losses[-1] < 0.5 * log.losses[0]
    assert exact_match_by_length(model, [2], n_per_length=50)[2] > 0.6
    ids, weights = greedy_decode(model, make_batch(make_case_examples(8, 3, seed=1)))
    assert weights is None and ids.shape[1] <= 5
    for row in ids:  # PAD after EOS, never a character
        row = row.tolist()
        if VOCAB.EOS in row:
            assert all(i == VOCAB.PAD for i in row[row.index(VOCAB.EOS) + 1:])


def test_training_refuses_a_decoder_with_the_wrong_output():
    class Broken(BottleneckDecoder):
        def forward(self, tokens, hidden, enc_states, src_mask):
            return super().forward(tokens, hidden, enc_states, src_mask)[0]

    model = Seq2Seq(Encoder(len(VOCAB), 8), Broken(len(VOCAB), 8))
    with pytest.raises(TypeError, match=r"\(logits, hidden, weights\)"):
        train_seq2seq(model, steps=1, lengths=[3])


def test_discussion_example_gives_the_published_scores():
    ex = discussion_example()
    q2, keys = ex["W_q"] @ ex["h"][1], ex["h"] @ ex["W_k"].T
    assert (keys @ q2).tolist() == [1054.0, 852.0, -396.0]
    assert (ex["W_v"] @ ex["h"][0]).tolist() == [23.0, 46.0]


def test_random_argmax_sources_are_valid_positions():
    sources = random_argmax_sources(50, heads=3, layers=2, seed=1)
    assert len(sources) == 2 and all(s.shape == (3, 50) and s.dtype == torch.long for s in sources)
    assert all(0 <= int(s.min()) and int(s.max()) < 50 for s in sources)
    assert torch.equal(sources[0], random_argmax_sources(50, heads=3, layers=2, seed=1)[0])


def test_orthogonal_keys_and_the_key_norm_experiment():
    keys = orthogonal_keys(5, 8, norm=2.0, seed=0)
    assert torch.allclose(keys @ keys.T, 4 * torch.eye(5, dtype=torch.float64), atol=1e-12)
    with pytest.raises(ValueError, match="orthogonal"):
        orthogonal_keys(9, 8)

    def copy(keys, j, beta):
        return beta * keys[j] / keys[j].dot(keys[j])

    def average(keys, a, b, beta):
        return copy(keys, a, beta) + copy(keys, b, beta)

    result = key_norm_experiment(average, copy, trials=400, seed=0)
    near_half = lambda share: ((share > 0.4) & (share < 0.6)).double().mean().item()  # noqa: E731
    assert near_half(result["two_heads"]) > 0.8 > 0.2 > near_half(result["one_head"])
    long_keys = result["length_a"] > 1.3
    assert long_keys.any() and (result["one_head"][long_keys] > 0.95).all()  # a long key a takes the average
    with pytest.raises(ValueError, match="shape"):
        key_norm_experiment(lambda *a: torch.zeros(3), copy, trials=10)


def test_forgeries_pass_only_what_trivial_functions_pass(layout, assignment_batch, tmp_path):
    """Issue 35: a notebook that implements nothing and makes every number computed in its kernel lie
    passes no hidden test (it passed 1 of 15 points before the property checks were judged from raw
    values); one that also sends what each property accepts passes only the moments test, as a function that returns
    the closed forms (which the text asks for) plus a little float64 noise from the generator does."""
    passed = grade_forgeries(layout, SLUG, assignment_batch(SLUG).folder / "samples" / "blank.ipynb", tmp_path, LIMITS)
    assert passed == {"every_number": set(), "collected_values": FORGEABLE_PROPERTIES}
